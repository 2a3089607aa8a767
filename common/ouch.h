/* OUCH 4.2 (NASDAQ): the order-entry messages carried in SoupBinTCP
 * unsequenced (in) and sequenced (out) data packets.
 *
 * Integers are big-endian on the wire; alpha fields are left-justified and
 * padded with spaces; prices are 4-byte integers with 4 implied decimals.
 * Decoded alpha fields are NUL-terminated and trimmed of trailing spaces.
 * Every alpha byte on the wire, one-character fields included, is printable
 * ASCII (0x20-0x7E). Nothing here allocates or logs. */
#ifndef LOCKSTEP_OUCH_H
#define LOCKSTEP_OUCH_H

#include <stddef.h>
#include <stdint.h>

#define OUCH_TOKEN_LEN 14
#define OUCH_STOCK_LEN 8
#define OUCH_FIRM_LEN 4

#define OUCH_PRICE_MARKET 2147483647u /* $214748.3647: a market order */
#define OUCH_PRICE_MAX 1999999900u /* $199,999.99: the largest limit price */
#define OUCH_TIF_IOC 0u
#define OUCH_TIF_MARKET_HOURS 99998u
#define OUCH_TIF_SYSTEM_HOURS 99999u
#define OUCH_TIF_MAX_SECONDS 86400u /* a TIF in seconds: 1 to a day */
#define OUCH_SHARES_MAX 999999u /* the spec: more than 0, fewer than 1,000,000 */
#define OUCH_TICK_BREAK 10000u /* $1.00: the tick is $0.01 at and above it */

/* Message lengths on the wire, type byte included. */
enum {
	OUCH_ENTER_ORDER_LEN = 49,
	OUCH_REPLACE_ORDER_LEN = 47,
	OUCH_CANCEL_ORDER_LEN = 19,
	OUCH_MODIFY_ORDER_LEN = 20,
	OUCH_SYSTEM_EVENT_LEN = 10,
	OUCH_ACCEPTED_LEN = 66,
	OUCH_REPLACED_LEN = 80,
	OUCH_CANCELED_LEN = 28,
	OUCH_AIQ_CANCELED_LEN = 37,
	OUCH_EXECUTED_LEN = 40,
	OUCH_BROKEN_TRADE_LEN = 32,
	OUCH_REJECTED_LEN = 24,
	OUCH_CANCEL_PENDING_LEN = 23,
	OUCH_CANCEL_REJECT_LEN = 23,
	OUCH_ORDER_MODIFIED_LEN = 28,
	OUCH_MAX_LEN = 80,
};

/* Message types. */
enum ouch_type {
	/* inbound */
	OUCH_ENTER_ORDER = 'O',
	OUCH_REPLACE_ORDER = 'U',
	OUCH_CANCEL_ORDER = 'X',
	OUCH_MODIFY_ORDER = 'M',
	/* outbound ('U' and 'M' are reused: direction tells them apart) */
	OUCH_SYSTEM_EVENT = 'S',
	OUCH_ACCEPTED = 'A',
	OUCH_REPLACED = 'U',
	OUCH_CANCELED = 'C',
	OUCH_AIQ_CANCELED = 'D',
	OUCH_EXECUTED = 'E',
	OUCH_BROKEN_TRADE = 'B',
	OUCH_REJECTED = 'J',
	OUCH_CANCEL_PENDING = 'P',
	OUCH_CANCEL_REJECT = 'I',
	OUCH_ORDER_MODIFIED = 'M',
};

/* Side: Buy, Sell, Sell short, Sell short exempt. */
enum { OUCH_BUY = 'B', OUCH_SELL = 'S', OUCH_SELL_SHORT = 'T', OUCH_SELL_SHORT_EXEMPT = 'E' };
/* Display: attributable, anonymous, non-displayed, post-only, imbalance-only,
 * mid-point peg, mid-point peg post-only, post-only attributable, retail
 * order type 1 / 2, retail price improvement. */
enum {
	OUCH_DISPLAY_ATTRIBUTABLE = 'A',
	OUCH_DISPLAY_ANONYMOUS = 'Y',
	OUCH_DISPLAY_NONDISPLAYED = 'N',
	OUCH_DISPLAY_POST_ONLY = 'P',
	OUCH_DISPLAY_IMBALANCE_ONLY = 'I',
	OUCH_DISPLAY_MIDPOINT = 'M',
	OUCH_DISPLAY_MIDPOINT_POST_ONLY = 'W',
	OUCH_DISPLAY_POST_ONLY_ATTRIBUTABLE = 'L',
	OUCH_DISPLAY_RETAIL_1 = 'O',
	OUCH_DISPLAY_RETAIL_2 = 'T',
	OUCH_DISPLAY_RETAIL_PRICE_IMPROVEMENT = 'Q',
	OUCH_DISPLAY_CHANGED_NONDISPLAYED = 'Z', /* outbound only: entered as
						   * displayed, priced to comply */
};
/* Capacity: agency, principal, riskless, other. */
enum { OUCH_CAP_AGENCY = 'A', OUCH_CAP_PRINCIPAL = 'P', OUCH_CAP_RISKLESS = 'R', OUCH_CAP_OTHER = 'O' };
/* Intermarket sweep eligibility. */
enum { OUCH_ISO_ELIGIBLE = 'Y', OUCH_ISO_NOT_ELIGIBLE = 'N' };
/* Cross type: no cross, opening, closing, halt/IPO, supplemental, retail,
 * extended life. lockstep trades the continuous market only ('N'). */
enum { OUCH_CROSS_NONE = 'N', OUCH_CROSS_OPENING = 'O', OUCH_CROSS_CLOSING = 'C',
       OUCH_CROSS_HALT_IPO = 'H', OUCH_CROSS_SUPPLEMENTAL = 'S', OUCH_CROSS_RETAIL = 'R',
       OUCH_CROSS_EXTENDED_LIFE = 'E' };
/* Customer type: retail designated, not retail, the port's default. */
enum { OUCH_CUST_RETAIL = 'R', OUCH_CUST_NOT_RETAIL = 'N', OUCH_CUST_DEFAULT = ' ' };
/* System event codes. */
enum { OUCH_EVENT_START_OF_DAY = 'S', OUCH_EVENT_END_OF_DAY = 'E' };
/* Order state in Accepted/Replaced. */
enum { OUCH_STATE_LIVE = 'L', OUCH_STATE_DEAD = 'D' };
/* Liquidity flags (the subset lockstep produces). */
enum { OUCH_LIQ_ADDED = 'A', OUCH_LIQ_REMOVED = 'R' };

/* Rejected reasons. The first block is OUCH 4.2's own list (checked against
 * NASDAQ's OUCH4.2.pdf); clients are told to expect additions. */
enum {
	OUCH_REJ_TEST_MODE = 'T',
	OUCH_REJ_HALTED = 'H',
	OUCH_REJ_SHARES_EXCEED_THRESHOLD = 'Z',
	OUCH_REJ_INVALID_STOCK = 'S',
	OUCH_REJ_INVALID_DISPLAY = 'D',
	OUCH_REJ_CLOSED = 'C',
	OUCH_REJ_FIRM_NOT_AUTHORIZED = 'L',
	OUCH_REJ_OUTSIDE_TIMES = 'M',
	OUCH_REJ_NOT_ALLOWED_NOW = 'R', /* "not allowed in this type of cross
					 * (stock or time restrictions)" */
	OUCH_REJ_CROSS_NOT_ALLOWED = 'R', /* the same code, by the spec's name */
	OUCH_REJ_INVALID_PRICE = 'X',
	OUCH_REJ_INVALID_MIN_QTY = 'N',
	OUCH_REJ_OTHER = 'O',
	OUCH_REJ_INVALID_MIDPOINT_POST_ONLY = 'W',
	OUCH_REJ_REJECT_ALL = 'a', /* Reject All enabled */
	OUCH_REJ_EASY_TO_BORROW = 'b',
	OUCH_REJ_RESTRICTED_SYMBOL = 'c',
	OUCH_REJ_ISO_RESTRICTION = 'd',
	OUCH_REJ_ODD_LOT_RESTRICTION = 'e',
	OUCH_REJ_MIDPOINT_RESTRICTION = 'f',
	OUCH_REJ_PRE_MARKET_RESTRICTION = 'g',
	OUCH_REJ_POST_MARKET_RESTRICTION = 'h',
	OUCH_REJ_SHORT_SALE_RESTRICTION = 'i',
	OUCH_REJ_ON_OPEN_RESTRICTION = 'j',
	OUCH_REJ_ON_CLOSE_RESTRICTION = 'k',
	OUCH_REJ_TWO_SIDED_QUOTE = 'l',
	OUCH_REJ_EXCEEDED_SHARES_LIMIT = 'm',
	OUCH_REJ_EXCEEDED_DOLLAR_LIMIT = 'n',
	/* A price off the tick: OUCH has no code of its own for it, and NASDAQ
	 * sends Invalid Price. (Was 'a', which is Reject All enabled.) */
	OUCH_REJ_SUB_PENNY_NOT_ALLOWED = 'X',
	/* lockstep's own, for checks that OUCH 4.2 has no code for; letters
	 * that the spec's list does not use. */
	OUCH_REJ_INVALID_SIDE = 's',
	OUCH_REJ_INVALID_TIF = 't',
	OUCH_REJ_INVALID_CAPACITY = 'u', /* NASDAQ converts such to 'O' */
	OUCH_REJ_INVALID_SHARES = 'v', /* zero shares */
	OUCH_REJ_DUPLICATE_TOKEN = 'w', /* NASDAQ silently ignores these */
	OUCH_REJ_INVALID_TOKEN = 'x', /* empty (all spaces) or unprintable */
	OUCH_REJ_INVALID_ISO = 'y', /* neither Y nor N */
	OUCH_REJ_POST_ONLY_WOULD_TAKE = 'p',
	OUCH_REJ_OPEN_QUOTA = 'q', /* the user's or firm's max_open resting orders */
	OUCH_REJ_CREDIT = 'r', /* the user's or firm's credit (open notional) */
	/* the gateway's own (lockstep-gateway(8), THE CLIENT EDGE): the
	 * login's message rate ([gateway] login_rate) with its queue
	 * (login_queue) full; a command too large for one tape datagram */
	OUCH_REJ_THROTTLED = 'o',
	OUCH_REJ_TOO_LARGE = 'z',
};
/* Canceled reasons (OUCH 4.2). */
enum {
	OUCH_CXL_USER = 'U',
	OUCH_CXL_IOC = 'I',
	OUCH_CXL_TIMEOUT = 'T',
	OUCH_CXL_SUPERVISORY = 'S',
	OUCH_CXL_REGULATORY = 'D',
	OUCH_CXL_SELF_MATCH = 'Q',
	OUCH_CXL_SYSTEM = 'Z',
	OUCH_CXL_CROSS = 'C',
	OUCH_CXL_MARKET_COLLARS = 'K',
	OUCH_CXL_HALTED = 'H',
	OUCH_CXL_OPEN_PROTECTION = 'X',
	OUCH_CXL_CLOSED = 'E',
	OUCH_CXL_POST_ONLY_NMS = 'F', /* would have been price slid for NMS */
	OUCH_CXL_POST_ONLY_CONTRA = 'G', /* slid by a displayed contra order */
};
/* Broken Trade reasons. */
enum { OUCH_BRK_ERRONEOUS = 'E', OUCH_BRK_CONSENT = 'C', OUCH_BRK_SUPERVISORY = 'S',
       OUCH_BRK_EXTERNAL = 'X' };

/* --- inbound ------------------------------------------------------------- */
struct ouch_enter_order {
	char token[OUCH_TOKEN_LEN + 1];
	char side;
	uint32_t shares;
	char stock[OUCH_STOCK_LEN + 1];
	uint32_t price;
	uint32_t tif;
	char firm[OUCH_FIRM_LEN + 1];
	char display;
	char capacity;
	char iso; /* intermarket sweep eligibility: Y or N */
	uint32_t min_qty;
	char cross_type;
	char customer_type;
};

struct ouch_replace_order {
	char existing_token[OUCH_TOKEN_LEN + 1];
	char replacement_token[OUCH_TOKEN_LEN + 1];
	uint32_t shares;
	uint32_t price;
	uint32_t tif;
	char display;
	char iso;
	uint32_t min_qty;
};

struct ouch_cancel_order {
	char token[OUCH_TOKEN_LEN + 1];
	uint32_t shares; /* the new intended size: 0 cancels the whole order */
};

struct ouch_modify_order {
	char token[OUCH_TOKEN_LEN + 1];
	char side;
	uint32_t shares;
};

/* --- outbound (timestamp: nanoseconds since midnight) --------------------- */
struct ouch_system_event {
	uint64_t timestamp;
	char event_code;
};

struct ouch_accepted {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	char side;
	uint32_t shares;
	char stock[OUCH_STOCK_LEN + 1];
	uint32_t price;
	uint32_t tif;
	char firm[OUCH_FIRM_LEN + 1];
	char display;
	uint64_t order_ref;
	char capacity;
	char iso;
	uint32_t min_qty;
	char cross_type;
	char state;
	char bbo_weight;
};

struct ouch_replaced {
	uint64_t timestamp;
	char replacement_token[OUCH_TOKEN_LEN + 1];
	char side;
	uint32_t shares;
	char stock[OUCH_STOCK_LEN + 1];
	uint32_t price;
	uint32_t tif;
	char firm[OUCH_FIRM_LEN + 1];
	char display;
	uint64_t order_ref;
	char capacity;
	char iso;
	uint32_t min_qty;
	char cross_type;
	char state;
	char previous_token[OUCH_TOKEN_LEN + 1];
	char bbo_weight;
};

struct ouch_canceled {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	uint32_t decrement;
	char reason;
};

struct ouch_aiq_canceled {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	uint32_t decrement;
	char reason;
	uint32_t prevented;
	uint32_t price;
	char liquidity;
};

struct ouch_executed {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	uint32_t shares;
	uint32_t price;
	char liquidity;
	uint64_t match;
};

struct ouch_broken_trade {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	uint64_t match;
	char reason;
};

struct ouch_rejected {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	char reason;
};

/* Cancel Pending and Cancel Reject share one layout. */
struct ouch_token_only {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
};

struct ouch_order_modified {
	uint64_t timestamp;
	char token[OUCH_TOKEN_LEN + 1];
	char side;
	uint32_t shares;
};

/* A decoded message of either direction. */
struct ouch_msg {
	char type;
	/* 1 for a client's message, 0 for the exchange's: set by the decoders,
	 * ignored by the encoders, read by ouch_format to tell Replace Order
	 * from Replaced ('U') and Modify Order from Order Modified ('M'). */
	uint8_t inbound;
	union {
		struct ouch_enter_order enter;
		struct ouch_replace_order replace;
		struct ouch_cancel_order cancel;
		struct ouch_modify_order modify;
		struct ouch_system_event system_event;
		struct ouch_accepted accepted;
		struct ouch_replaced replaced;
		struct ouch_canceled canceled;
		struct ouch_aiq_canceled aiq_canceled;
		struct ouch_executed executed;
		struct ouch_broken_trade broken_trade;
		struct ouch_rejected rejected;
		struct ouch_token_only cancel_pending;
		struct ouch_token_only cancel_reject;
		struct ouch_order_modified order_modified;
	} u;
};

enum ouch_err {
	OUCH_OK = 0,
	OUCH_E_EMPTY = -1, /* no type byte */
	OUCH_E_UNKNOWN_TYPE = -2, /* not a message of this direction */
	OUCH_E_LENGTH = -3, /* wrong length for the type */
	OUCH_E_FIELD = -4, /* an alpha field with a non-printable byte; encoder:
			    * also a string longer than its field */
	OUCH_E_NOSPACE = -5, /* encoder: buffer too small */
};

const char *ouch_strerror(int err);

/* Decoders check the type, the exact length for it, and that every alpha byte
 * is printable; they do not judge values (see ouch_validate_*). On success
 * every byte of *out is written (padding zeroed, so two decodes of one
 * message compare equal with memcmp); on error *out is untouched. */
int ouch_decode_inbound(const uint8_t *buf, size_t len, struct ouch_msg *out);
int ouch_decode_outbound(const uint8_t *buf, size_t len, struct ouch_msg *out);

/* Encodes msg (type chosen by msg->type and the direction) and returns its
 * length, or a negative error; on error out is untouched. Strings are
 * space-padded; one longer than its field, or holding a byte outside
 * 0x20-0x7E, is OUCH_E_FIELD. A one-character field of '\0' is sent as a
 * space (the spec's blank); any other unprintable one is OUCH_E_FIELD.
 * Decoding then encoding gives back the same bytes. */
int ouch_encode_inbound(const struct ouch_msg *msg, uint8_t *out, size_t cap);
int ouch_encode_outbound(const struct ouch_msg *msg, uint8_t *out, size_t cap);

/* Field validation: 0 when valid, else the OUCH Rejected reason to send.
 * Checks, in this order (the first failure is returned): token, side,
 * shares in (0, min(max_shares, OUCH_SHARES_MAX)], price, TIF, a market
 * price only with TIF 0 (IOC), display (lockstep takes A Y N P), the
 * firm field printable ('L'; Enter only), capacity, ISO, cross type (lockstep takes N), customer type, minimum quantity. See
 * ouch.c for the reason each gives. Symbol, tick and token uniqueness are
 * the caller's (they need its tables); an off-tick price is rejected with
 * OUCH_REJ_SUB_PENNY_NOT_ALLOWED ('X'). */
int ouch_validate_enter(const struct ouch_enter_order *o, uint32_t max_shares);
int ouch_validate_replace(const struct ouch_replace_order *o, uint32_t max_shares);
/* For an inbound message that ouch_decode_inbound refused with
 * OUCH_E_FIELD (a known type of the right length, an unprintable byte):
 * *reason, the Rejected reason fitting its first unprintable field
 * (OUCH_REJ_INVALID_TOKEN for a token, side 's', stock 'S', firm 'L',
 * display 'D', capacity 'u', ISO 'y', cross type 'R', customer type 'O'),
 * and the token an answer names (Enter: its token; Replace: the
 * replacement token; Cancel, Modify: its token) with each unprintable
 * byte as '?', trimmed of trailing spaces. OUCH_OK, or the decode error
 * (anything but OUCH_E_FIELD: no answer fits; outputs untouched). */
int ouch_inbound_bad_field(const uint8_t *buf, size_t len, char *reason,
			   char token[OUCH_TOKEN_LEN + 1]);
/* The tick rule: 1 if price is on the tick: $0.01 (100) at or above $1.00
 * (10000), $0.0001 (1) below. Market price passes. */
int ouch_price_on_tick(uint32_t price);
/* A human-readable one-line rendering (for lockstep-client and dumps), no
 * newline; outbound lines start with the timestamp as HH:MM:SS.nnnnnnnnn.
 * Writes at most cap bytes including the NUL (nothing when cap is 0) and
 * returns the length written, truncating to cap - 1. */
int ouch_format(const struct ouch_msg *msg, char *out, size_t cap);
/* Human text for a Rejected / Canceled / Broken Trade reason code, e.g.
 * "invalid price"; "unknown" for a code not listed above. Never NULL. */
const char *ouch_reject_reason_str(char reason);
const char *ouch_cancel_reason_str(char reason);
const char *ouch_broken_reason_str(char reason);

#endif
