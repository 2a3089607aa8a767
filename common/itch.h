/* ITCH 5.0 (NASDAQ TotalView-ITCH): the public market data messages
 * lockstep's matchers publish, one channel per partition, carried in
 * MoldUDP64 message blocks (one ITCH message a block); and GLIMPSE 5.0's
 * End of Snapshot, the last message of a snapshot served over SoupBinTCP.
 *
 * Every message begins with the same 11 bytes: message type (1), stock
 * locate (u16), tracking number (u16), timestamp (u48: nanoseconds since
 * midnight). Integers are big-endian; alpha fields are left-justified and
 * padded with spaces; prices are u32 with 4 implied decimals. Decoded
 * alpha fields are NUL-terminated and trimmed of trailing spaces; every
 * alpha byte on the wire is printable ASCII (0x20-0x7E).
 *
 * The types lockstep publishes, and their lengths on the wire:
 *   'S' System Event 12, 'R' Stock Directory 39, 'H' Stock Trading Action 25,
 *   'A' Add Order 36, 'F' Add Order with MPID attribution 40,
 *   'E' Order Executed 31, 'C' Order Executed With Price 36,
 *   'X' Order Cancel 23, 'D' Order Delete 19, 'U' Order Replace 35,
 *   'P' Trade (non-cross) 44;
 * and GLIMPSE's 'G' End of Snapshot 21 (type, then the sequence number as
 * 20 ASCII digits, left-justified, space padded: the ITCH sequence number
 * of the next message on the live feed, at the snapshot's position; no
 * common header: itch_encode ignores locate, tracking and timestamp, and
 * itch_decode sets them to 0).
 *
 * Other ITCH 5.0 types (a full TotalView feed also has 'Y', 'L', 'V', 'W',
 * 'K', 'J', 'h', 'Q', 'B', 'I', 'N') are not published: itch_decode
 * answers ITCH_E_TYPE for them, and a subscriber skips and counts them.
 *
 * Nothing here allocates or logs. */
#ifndef LOCKSTEP_ITCH_H
#define LOCKSTEP_ITCH_H

#include <stddef.h>
#include <stdint.h>

#define ITCH_STOCK_LEN 8
#define ITCH_MPID_LEN 4
#define ITCH_HDR_LEN 11 /* type, locate, tracking, timestamp */
#define ITCH_TS_MAX 0xFFFFFFFFFFFFull /* 48 bits */
#define ITCH_SEQ_DIGITS 20 /* GLIMPSE End of Snapshot */

enum {
	ITCH_SYSTEM_EVENT_LEN = 12,
	ITCH_STOCK_DIRECTORY_LEN = 39,
	ITCH_TRADING_ACTION_LEN = 25,
	ITCH_ADD_ORDER_LEN = 36,
	ITCH_ADD_ORDER_MPID_LEN = 40,
	ITCH_ORDER_EXECUTED_LEN = 31,
	ITCH_ORDER_EXECUTED_PRICE_LEN = 36,
	ITCH_ORDER_CANCEL_LEN = 23,
	ITCH_ORDER_DELETE_LEN = 19,
	ITCH_ORDER_REPLACE_LEN = 35,
	ITCH_TRADE_LEN = 44,
	ITCH_END_OF_SNAPSHOT_LEN = 21,
	ITCH_MAX_LEN = 44,
};

enum itch_type {
	ITCH_SYSTEM_EVENT = 'S',
	ITCH_STOCK_DIRECTORY = 'R',
	ITCH_TRADING_ACTION = 'H',
	ITCH_ADD_ORDER = 'A',
	ITCH_ADD_ORDER_MPID = 'F',
	ITCH_ORDER_EXECUTED = 'E',
	ITCH_ORDER_EXECUTED_PRICE = 'C',
	ITCH_ORDER_CANCEL = 'X',
	ITCH_ORDER_DELETE = 'D',
	ITCH_ORDER_REPLACE = 'U',
	ITCH_TRADE = 'P',
	ITCH_END_OF_SNAPSHOT = 'G', /* GLIMPSE */
};

/* System Event codes. */
enum {
	ITCH_EVENT_START_OF_MESSAGES = 'O',
	ITCH_EVENT_START_OF_SYSTEM = 'S',
	ITCH_EVENT_START_OF_MARKET = 'Q',
	ITCH_EVENT_END_OF_MARKET = 'M',
	ITCH_EVENT_END_OF_SYSTEM = 'E',
	ITCH_EVENT_END_OF_MESSAGES = 'C',
};

/* Trading states (Stock Trading Action). */
enum {
	ITCH_STATE_HALTED = 'H',
	ITCH_STATE_PAUSED = 'P',
	ITCH_STATE_QUOTATION = 'Q',
	ITCH_STATE_TRADING = 'T',
};

struct itch_msg {
	char type; /* enum itch_type */
	uint16_t locate, tracking;
	uint64_t timestamp; /* ns since midnight, <= ITCH_TS_MAX */
	union {
		struct {
			char event_code;
		} system_event;
		struct {
			char stock[ITCH_STOCK_LEN + 1];
			char market_category, financial_status;
			uint32_t round_lot_size;
			char round_lots_only, issue_classification;
			char issue_subtype[3]; /* 2 alpha */
			char authenticity, short_sale_threshold, ipo_flag, luld_tier, etp_flag;
			uint32_t etp_leverage;
			char inverse;
		} stock_directory;
		struct {
			char stock[ITCH_STOCK_LEN + 1];
			char state, reserved;
			char reason[5]; /* 4 alpha */
		} trading_action;
		/* 'A' and 'F' (attribution: 'F' only) */
		struct {
			uint64_t ref;
			char side; /* 'B' or 'S' */
			uint32_t shares;
			char stock[ITCH_STOCK_LEN + 1];
			uint32_t price;
			char attribution[ITCH_MPID_LEN + 1];
		} add;
		/* 'E' and 'C' (printable and price: 'C' only) */
		struct {
			uint64_t ref;
			uint32_t shares;
			uint64_t match;
			char printable; /* 'Y' or 'N' */
			uint32_t price;
		} executed;
		struct {
			uint64_t ref;
			uint32_t shares; /* canceled */
		} cancel;
		struct {
			uint64_t ref;
		} del;
		struct {
			uint64_t old_ref, new_ref;
			uint32_t shares, price;
		} replace;
		struct {
			uint64_t ref; /* 0 on lockstep's feed: the order is not displayed */
			char side;
			uint32_t shares;
			char stock[ITCH_STOCK_LEN + 1];
			uint32_t price;
			uint64_t match;
		} trade;
		struct {
			uint64_t seq; /* the next ITCH sequence number on the live feed */
		} end_of_snapshot;
	} u;
};

enum itch_err {
	ITCH_OK = 0,
	ITCH_E_EMPTY = -1, /* no byte at all */
	ITCH_E_TYPE = -2, /* a type this codec does not know */
	ITCH_E_LEN = -3, /* not the type's length */
	ITCH_E_ALPHA = -4, /* an alpha byte outside printable ASCII, or an alpha
			    * field with a space before a non-space (not
			    * left-justified), or an empty required field */
	ITCH_E_FIELD = -5, /* a value the type does not allow: side not B/S,
			    * printable not Y/N, timestamp > ITCH_TS_MAX,
			    * End of Snapshot not 1..20 digits then spaces,
			    * with no leading zero, within a u64 */
	ITCH_E_NOSPACE = -6, /* encode: the buffer is too small */
};

const char *itch_strerror(int err);

/* The length on the wire of a message of this type, 0 for a type this
 * codec does not know. */
size_t itch_len(char type);

/* Encodes msg into out[0..cap): its length, or ITCH_E_TYPE, ITCH_E_NOSPACE,
 * ITCH_E_FIELD or ITCH_E_ALPHA (a string longer than its field, a byte
 * outside 0x20-0x7E, a one-char field left NUL, a space before a non-space,
 * an empty stock); out is untouched on error. Trailing spaces of a string
 * are padding: decoding gives it back without them. */
int itch_encode(const struct itch_msg *msg, uint8_t *out, size_t cap);

/* Decodes exactly one message from buf[0..len) (len must be the type's
 * length): 0, or a negative enum itch_err (then *out is untouched). */
int itch_decode(const uint8_t *buf, size_t len, struct itch_msg *out);

/* NASDAQ's ITCH file format, as lockstep-replay itch writes and
 * lockstep-feed --record writes: each message preceded by its length as a
 * u16 big-endian. */
#define ITCH_FILE_PREFIX 2

#endif
