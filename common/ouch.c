/* OUCH 4.2 codec: one field table per message type drives both the decoder
 * and the encoder, so the two cannot disagree on a layout. (The outbound
 * types the matcher sends most also have straight-line encoders of their
 * own, in ouch_encode.c, held to the table's output by the tests.)
 *
 * Sources checked for the layouts and code lists: NASDAQ's OUCH4.2.pdf and
 * psxouch42.pdf (as transcribed by the Open Markets Initiative) and
 * Wireshark's OUCH 4.x dissector. Where lockstep decides something the spec
 * leaves open, the comment at the check says so. */
#include "ouch.h"
#include "ouch_private.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum field_kind { F_STR, F_CHR, F_U32, F_U64 };

/* One wire field: its kind, its width on the wire, and where it lives in
 * struct ouch_msg. Fields follow each other on the wire after the type. */
struct field {
	uint8_t kind;
	uint8_t width;
	uint16_t off;
};

struct layout {
	uint8_t len; /* on the wire, type included; 0: no such type */
	uint8_t nfields;
	const struct field *fields;
};

#define STR(m, w) { F_STR, (w), offsetof(struct ouch_msg, m) }
#define CHR(m) { F_CHR, 1, offsetof(struct ouch_msg, m) }
#define U32(m) { F_U32, 4, offsetof(struct ouch_msg, m) }
#define U64(m) { F_U64, 8, offsetof(struct ouch_msg, m) }
#define TOKEN(m) STR(m, OUCH_TOKEN_LEN)
#define LAYOUT(l, f) { (l), sizeof(f) / sizeof((f)[0]), (f) }

/* --- inbound ------------------------------------------------------------- */
static const struct field enter_fields[] = {
	TOKEN(u.enter.token), CHR(u.enter.side), U32(u.enter.shares),
	STR(u.enter.stock, OUCH_STOCK_LEN), U32(u.enter.price), U32(u.enter.tif),
	STR(u.enter.firm, OUCH_FIRM_LEN), CHR(u.enter.display), CHR(u.enter.capacity),
	CHR(u.enter.iso), U32(u.enter.min_qty), CHR(u.enter.cross_type),
	CHR(u.enter.customer_type),
};
static const struct field replace_fields[] = {
	TOKEN(u.replace.existing_token), TOKEN(u.replace.replacement_token),
	U32(u.replace.shares), U32(u.replace.price), U32(u.replace.tif),
	CHR(u.replace.display), CHR(u.replace.iso), U32(u.replace.min_qty),
};
static const struct field cancel_fields[] = {
	TOKEN(u.cancel.token), U32(u.cancel.shares),
};
static const struct field modify_fields[] = {
	TOKEN(u.modify.token), CHR(u.modify.side), U32(u.modify.shares),
};

/* --- outbound ------------------------------------------------------------ */
static const struct field system_event_fields[] = {
	U64(u.system_event.timestamp), CHR(u.system_event.event_code),
};
static const struct field accepted_fields[] = {
	U64(u.accepted.timestamp), TOKEN(u.accepted.token), CHR(u.accepted.side),
	U32(u.accepted.shares), STR(u.accepted.stock, OUCH_STOCK_LEN),
	U32(u.accepted.price), U32(u.accepted.tif), STR(u.accepted.firm, OUCH_FIRM_LEN),
	CHR(u.accepted.display), U64(u.accepted.order_ref), CHR(u.accepted.capacity),
	CHR(u.accepted.iso), U32(u.accepted.min_qty), CHR(u.accepted.cross_type),
	CHR(u.accepted.state), CHR(u.accepted.bbo_weight),
};
static const struct field replaced_fields[] = {
	U64(u.replaced.timestamp), TOKEN(u.replaced.replacement_token),
	CHR(u.replaced.side), U32(u.replaced.shares), STR(u.replaced.stock, OUCH_STOCK_LEN),
	U32(u.replaced.price), U32(u.replaced.tif), STR(u.replaced.firm, OUCH_FIRM_LEN),
	CHR(u.replaced.display), U64(u.replaced.order_ref), CHR(u.replaced.capacity),
	CHR(u.replaced.iso), U32(u.replaced.min_qty), CHR(u.replaced.cross_type),
	CHR(u.replaced.state), TOKEN(u.replaced.previous_token), CHR(u.replaced.bbo_weight),
};
static const struct field canceled_fields[] = {
	U64(u.canceled.timestamp), TOKEN(u.canceled.token), U32(u.canceled.decrement),
	CHR(u.canceled.reason),
};
static const struct field aiq_canceled_fields[] = {
	U64(u.aiq_canceled.timestamp), TOKEN(u.aiq_canceled.token),
	U32(u.aiq_canceled.decrement), CHR(u.aiq_canceled.reason),
	U32(u.aiq_canceled.prevented), U32(u.aiq_canceled.price),
	CHR(u.aiq_canceled.liquidity),
};
static const struct field executed_fields[] = {
	U64(u.executed.timestamp), TOKEN(u.executed.token), U32(u.executed.shares),
	U32(u.executed.price), CHR(u.executed.liquidity), U64(u.executed.match),
};
static const struct field broken_trade_fields[] = {
	U64(u.broken_trade.timestamp), TOKEN(u.broken_trade.token),
	U64(u.broken_trade.match), CHR(u.broken_trade.reason),
};
static const struct field rejected_fields[] = {
	U64(u.rejected.timestamp), TOKEN(u.rejected.token), CHR(u.rejected.reason),
};
static const struct field cancel_pending_fields[] = {
	U64(u.cancel_pending.timestamp), TOKEN(u.cancel_pending.token),
};
static const struct field cancel_reject_fields[] = {
	U64(u.cancel_reject.timestamp), TOKEN(u.cancel_reject.token),
};
static const struct field order_modified_fields[] = {
	U64(u.order_modified.timestamp), TOKEN(u.order_modified.token),
	CHR(u.order_modified.side), U32(u.order_modified.shares),
};

/* Indexed by the type byte; types are ASCII letters. */
#define NTYPES 128
static const struct layout inbound_layouts[NTYPES] = {
	[OUCH_ENTER_ORDER] = LAYOUT(OUCH_ENTER_ORDER_LEN, enter_fields),
	[OUCH_REPLACE_ORDER] = LAYOUT(OUCH_REPLACE_ORDER_LEN, replace_fields),
	[OUCH_CANCEL_ORDER] = LAYOUT(OUCH_CANCEL_ORDER_LEN, cancel_fields),
	[OUCH_MODIFY_ORDER] = LAYOUT(OUCH_MODIFY_ORDER_LEN, modify_fields),
};
static const struct layout outbound_layouts[NTYPES] = {
	[OUCH_SYSTEM_EVENT] = LAYOUT(OUCH_SYSTEM_EVENT_LEN, system_event_fields),
	[OUCH_ACCEPTED] = LAYOUT(OUCH_ACCEPTED_LEN, accepted_fields),
	[OUCH_REPLACED] = LAYOUT(OUCH_REPLACED_LEN, replaced_fields),
	[OUCH_CANCELED] = LAYOUT(OUCH_CANCELED_LEN, canceled_fields),
	[OUCH_AIQ_CANCELED] = LAYOUT(OUCH_AIQ_CANCELED_LEN, aiq_canceled_fields),
	[OUCH_EXECUTED] = LAYOUT(OUCH_EXECUTED_LEN, executed_fields),
	[OUCH_BROKEN_TRADE] = LAYOUT(OUCH_BROKEN_TRADE_LEN, broken_trade_fields),
	[OUCH_REJECTED] = LAYOUT(OUCH_REJECTED_LEN, rejected_fields),
	[OUCH_CANCEL_PENDING] = LAYOUT(OUCH_CANCEL_PENDING_LEN, cancel_pending_fields),
	[OUCH_CANCEL_REJECT] = LAYOUT(OUCH_CANCEL_REJECT_LEN, cancel_reject_fields),
	[OUCH_ORDER_MODIFIED] = LAYOUT(OUCH_ORDER_MODIFIED_LEN, order_modified_fields),
};

const char *ouch_strerror(int err)
{
	switch (err) {
	case OUCH_OK: return "success";
	case OUCH_E_EMPTY: return "empty message (no type byte)";
	case OUCH_E_UNKNOWN_TYPE: return "unknown message type for this direction";
	case OUCH_E_LENGTH: return "wrong length for the message type";
	case OUCH_E_FIELD: return "alpha field not printable ASCII or too long";
	case OUCH_E_NOSPACE: return "output buffer too small";
	}
	return "unknown OUCH error";
}

static int printable(uint8_t c)
{
	return c >= 0x20 && c <= 0x7e;
}

static const struct layout *find(const struct layout *tab, char type)
{
	uint8_t t = (uint8_t)type;

	if (t >= NTYPES || tab[t].len == 0)
		return NULL;
	return &tab[t];
}

/* --- decoding ------------------------------------------------------------ */
static uint64_t get_be(const uint8_t *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v = (v << 8) | p[i];
	return v;
}

static int decode(const struct layout *tab, int inbound, const uint8_t *buf, size_t len,
		  struct ouch_msg *out)
{
	const struct layout *l;
	struct ouch_msg m;
	size_t pos = 1;

	if (len == 0)
		return OUCH_E_EMPTY;
	l = find(tab, (char)buf[0]);
	if (!l)
		return OUCH_E_UNKNOWN_TYPE;
	if (len != l->len)
		return OUCH_E_LENGTH;
	memset(&m, 0, sizeof(m));
	m.type = (char)buf[0];
	m.inbound = (uint8_t)inbound;
	for (unsigned i = 0; i < l->nfields; i++) {
		const struct field *f = &l->fields[i];
		const uint8_t *src = buf + pos;
		char *dst = (char *)&m + f->off;
		uint32_t v32;
		uint64_t v64;
		size_t n;

		switch (f->kind) {
		case F_STR:
			for (n = 0; n < f->width; n++)
				if (!printable(src[n]))
					return OUCH_E_FIELD;
			n = f->width;
			while (n > 0 && src[n - 1] == ' ')
				n--;
			memcpy(dst, src, n);
			dst[n] = '\0';
			break;
		case F_CHR:
			if (!printable(src[0]))
				return OUCH_E_FIELD;
			*dst = (char)src[0];
			break;
		case F_U32:
			v32 = (uint32_t)get_be(src, 4);
			memcpy(dst, &v32, sizeof(v32));
			break;
		default:
			v64 = get_be(src, 8);
			memcpy(dst, &v64, sizeof(v64));
			break;
		}
		pos += f->width;
	}
	if (pos != len) /* a table that disagrees with its length */
		return OUCH_E_LENGTH;
	memcpy(out, &m, sizeof(m));
	return OUCH_OK;
}

int ouch_decode_inbound(const uint8_t *buf, size_t len, struct ouch_msg *out)
{
	return decode(inbound_layouts, 1, buf, len, out);
}

int ouch_decode_outbound(const uint8_t *buf, size_t len, struct ouch_msg *out)
{
	return decode(outbound_layouts, 0, buf, len, out);
}

/* The Rejected reason for an unprintable alpha field at offset `off` of
 * struct ouch_msg in an inbound message of type `type`. */
static char bad_field_reason(char type, size_t off)
{
#define AT(m) (off == offsetof(struct ouch_msg, m))
	if (AT(u.enter.token) || (type == OUCH_REPLACE_ORDER && AT(u.replace.replacement_token)))
		return OUCH_REJ_INVALID_TOKEN;
	if (type == OUCH_REPLACE_ORDER)
		return AT(u.replace.display) ? OUCH_REJ_INVALID_DISPLAY : OUCH_REJ_INVALID_ISO;
	if (type == OUCH_MODIFY_ORDER || AT(u.enter.side))
		return OUCH_REJ_INVALID_SIDE;
	if (AT(u.enter.stock))
		return OUCH_REJ_INVALID_STOCK;
	if (AT(u.enter.firm))
		return OUCH_REJ_FIRM_NOT_AUTHORIZED;
	if (AT(u.enter.display))
		return OUCH_REJ_INVALID_DISPLAY;
	if (AT(u.enter.capacity))
		return OUCH_REJ_INVALID_CAPACITY;
	if (AT(u.enter.iso))
		return OUCH_REJ_INVALID_ISO;
	if (AT(u.enter.cross_type))
		return OUCH_REJ_CROSS_NOT_ALLOWED;
	return OUCH_REJ_OTHER; /* customer type */
#undef AT
}

int ouch_inbound_bad_field(const uint8_t *buf, size_t len, char *reason,
			   char token[OUCH_TOKEN_LEN + 1])
{
	struct ouch_msg m;
	int rc = ouch_decode_inbound(buf, len, &m);
	const struct layout *l;
	size_t pos = 1, at, n = OUCH_TOKEN_LEN;

	if (rc != OUCH_E_FIELD)
		return rc == OUCH_OK ? OUCH_E_FIELD : rc;
	l = find(inbound_layouts, (char)buf[0]);
	for (unsigned i = 0; i < l->nfields; i++) {
		const struct field *f = &l->fields[i];
		unsigned k = 0;

		while (f->kind != F_U32 && k < f->width && printable(buf[pos + k]))
			k++;
		if (f->kind != F_U32 && k < f->width) {
			*reason = bad_field_reason((char)buf[0], f->off);
			break;
		}
		pos += f->width;
	}
	at = buf[0] == OUCH_REPLACE_ORDER ? 1 + OUCH_TOKEN_LEN : 1;
	for (size_t k = 0; k < OUCH_TOKEN_LEN; k++)
		token[k] = printable(buf[at + k]) ? (char)buf[at + k] : '?';
	while (n > 0 && token[n - 1] == ' ')
		n--;
	token[n] = '\0';
	return OUCH_OK;
}

/* --- encoding ------------------------------------------------------------ */
static void put_be(uint8_t *p, uint64_t v, unsigned width)
{
	for (unsigned i = width; i > 0; i--) {
		p[i - 1] = (uint8_t)v;
		v >>= 8;
	}
}

static int encode(const struct layout *tab, const struct ouch_msg *msg, uint8_t *out,
		  size_t cap)
{
	const struct layout *l = find(tab, msg->type);
	uint8_t buf[OUCH_MAX_LEN];
	size_t pos = 1;

	if (!l)
		return OUCH_E_UNKNOWN_TYPE;
	if (cap < l->len)
		return OUCH_E_NOSPACE;
	buf[0] = (uint8_t)msg->type;
	for (unsigned i = 0; i < l->nfields; i++) {
		const struct field *f = &l->fields[i];
		const char *src = (const char *)msg + f->off;
		uint8_t *dst = buf + pos;
		uint32_t v32;
		uint64_t v64;
		size_t n;

		switch (f->kind) {
		case F_STR:
			/* the struct's array is width + 1 long */
			n = strnlen(src, (size_t)f->width + 1);
			if (n > f->width)
				return OUCH_E_FIELD;
			for (size_t k = 0; k < n; k++)
				if (!printable((uint8_t)src[k]))
					return OUCH_E_FIELD;
			memcpy(dst, src, n);
			memset(dst + n, ' ', f->width - n);
			break;
		case F_CHR:
			if (*src == '\0')
				dst[0] = ' ';
			else if (printable((uint8_t)*src))
				dst[0] = (uint8_t)*src;
			else
				return OUCH_E_FIELD;
			break;
		case F_U32:
			memcpy(&v32, src, sizeof(v32));
			put_be(dst, v32, 4);
			break;
		default:
			memcpy(&v64, src, sizeof(v64));
			put_be(dst, v64, 8);
			break;
		}
		pos += f->width;
	}
	if (pos != l->len) /* a table that disagrees with its length */
		return OUCH_E_LENGTH;
	memcpy(out, buf, l->len);
	return l->len;
}

int ouch_encode_inbound(const struct ouch_msg *msg, uint8_t *out, size_t cap)
{
	return encode(inbound_layouts, msg, out, cap);
}

/* ouch_encode_outbound (ouch_encode.c) sends the types it has no encoder of
 * its own for here; the tests compare the two paths. */
int ouch_encode_outbound_table(const struct ouch_msg *msg, uint8_t *out, size_t cap)
{
	return encode(outbound_layouts, msg, out, cap);
}

/* --- validation ---------------------------------------------------------- */

/* A token needs one non-space byte (the wire pads with spaces, so an empty
 * or all-space token cannot name an order) and only printable bytes. */
static int token_ok(const char *t)
{
	size_t n = strnlen(t, OUCH_TOKEN_LEN + 1);
	int seen = 0;

	if (n > OUCH_TOKEN_LEN)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!printable((uint8_t)t[i]))
			return 0;
		if (t[i] != ' ')
			seen = 1;
	}
	return seen;
}

static int side_ok(char c)
{
	return c == OUCH_BUY || c == OUCH_SELL || c == OUCH_SELL_SHORT ||
	       c == OUCH_SELL_SHORT_EXEMPT;
}

/* lockstep supports the plain displays only; the spec's others (I M W L O T
 * Q) are refused with Invalid Display Type rather than converted. */
static int display_ok(char c)
{
	return c == OUCH_DISPLAY_ATTRIBUTABLE || c == OUCH_DISPLAY_ANONYMOUS ||
	       c == OUCH_DISPLAY_NONDISPLAYED || c == OUCH_DISPLAY_POST_ONLY;
}

static int capacity_ok(char c)
{
	return c == OUCH_CAP_AGENCY || c == OUCH_CAP_PRINCIPAL || c == OUCH_CAP_RISKLESS ||
	       c == OUCH_CAP_OTHER;
}

static int iso_ok(char c)
{
	return c == OUCH_ISO_ELIGIBLE || c == OUCH_ISO_NOT_ELIGIBLE;
}

static int tif_ok(uint32_t tif)
{
	return tif <= OUCH_TIF_MAX_SECONDS || tif == OUCH_TIF_MARKET_HOURS ||
	       tif == OUCH_TIF_SYSTEM_HOURS;
}

/* The checks that Enter and Replace share, in the documented order. */
static int check_order(uint32_t shares, uint32_t price, uint32_t tif, char display,
		       uint32_t max_shares)
{
	uint32_t limit = max_shares < OUCH_SHARES_MAX ? max_shares : OUCH_SHARES_MAX;

	if (shares == 0)
		return OUCH_REJ_INVALID_SHARES;
	if (shares > limit)
		return OUCH_REJ_SHARES_EXCEED_THRESHOLD;
	if (price == 0 || (price > OUCH_PRICE_MAX && price != OUCH_PRICE_MARKET))
		return OUCH_REJ_INVALID_PRICE;
	if (!tif_ok(tif))
		return OUCH_REJ_INVALID_TIF;
	/* lockstep has no crosses, where OUCH uses the market price; in the
	 * continuous market a market order must say IOC (TIF 0) so that it
	 * never rests at a price of $214,748.3647. */
	if (price == OUCH_PRICE_MARKET && tif != OUCH_TIF_IOC)
		return OUCH_REJ_INVALID_PRICE;
	if (!display_ok(display))
		return OUCH_REJ_INVALID_DISPLAY;
	return 0;
}

int ouch_validate_enter(const struct ouch_enter_order *o, uint32_t max_shares)
{
	int r;

	if (!token_ok(o->token))
		return OUCH_REJ_INVALID_TOKEN;
	if (!side_ok(o->side))
		return OUCH_REJ_INVALID_SIDE;
	r = check_order(o->shares, o->price, o->tif, o->display, max_shares);
	if (r)
		return r;
	/* the firm goes back in Accepted and Replaced: what no encoder takes
	 * (an unprintable byte) is refused here (blank: none, as NUL) */
	for (size_t i = 0; i < OUCH_FIRM_LEN && o->firm[i]; i++)
		if (!printable((uint8_t)o->firm[i]))
			return OUCH_REJ_FIRM_NOT_AUTHORIZED;
	/* NASDAQ converts an unknown capacity to 'O'; lockstep refuses it. */
	if (!capacity_ok(o->capacity))
		return OUCH_REJ_INVALID_CAPACITY;
	if (!iso_ok(o->iso))
		return OUCH_REJ_INVALID_ISO;
	/* Every cross type but N names a NASDAQ cross that lockstep does not
	 * run: the spec's "not allowed in this type of cross". */
	if (o->cross_type != OUCH_CROSS_NONE)
		return OUCH_REJ_CROSS_NOT_ALLOWED;
	/* An optional field: R, N or blank ('\0' is sent as blank). */
	if (o->customer_type != OUCH_CUST_RETAIL && o->customer_type != OUCH_CUST_NOT_RETAIL &&
	    o->customer_type != OUCH_CUST_DEFAULT && o->customer_type != '\0')
		return OUCH_REJ_OTHER;
	if (o->min_qty > o->shares)
		return OUCH_REJ_INVALID_MIN_QTY;
	return 0;
}

int ouch_validate_replace(const struct ouch_replace_order *o, uint32_t max_shares)
{
	int r;

	if (!token_ok(o->existing_token) || !token_ok(o->replacement_token))
		return OUCH_REJ_INVALID_TOKEN;
	r = check_order(o->shares, o->price, o->tif, o->display, max_shares);
	if (r)
		return r;
	if (!iso_ok(o->iso))
		return OUCH_REJ_INVALID_ISO;
	if (o->min_qty > o->shares)
		return OUCH_REJ_INVALID_MIN_QTY;
	return 0;
}

int ouch_price_on_tick(uint32_t price)
{
	if (price == OUCH_PRICE_MARKET || price < OUCH_TICK_BREAK)
		return 1;
	return price % 100 == 0;
}

/* --- human text ---------------------------------------------------------- */
const char *ouch_reject_reason_str(char reason)
{
	switch (reason) {
	case OUCH_REJ_TEST_MODE: return "test mode";
	case OUCH_REJ_HALTED: return "halted";
	case OUCH_REJ_SHARES_EXCEED_THRESHOLD: return "shares exceed safety threshold";
	case OUCH_REJ_INVALID_STOCK: return "invalid stock";
	case OUCH_REJ_INVALID_DISPLAY: return "invalid display type";
	case OUCH_REJ_CLOSED: return "market closed";
	case OUCH_REJ_FIRM_NOT_AUTHORIZED: return "firm not authorized for clearing type";
	case OUCH_REJ_OUTSIDE_TIMES: return "outside permitted times for clearing type";
	case OUCH_REJ_CROSS_NOT_ALLOWED: return "not allowed in this type of cross";
	case OUCH_REJ_INVALID_PRICE: return "invalid price";
	case OUCH_REJ_INVALID_MIN_QTY: return "invalid minimum quantity";
	case OUCH_REJ_OTHER: return "other";
	case OUCH_REJ_INVALID_MIDPOINT_POST_ONLY: return "invalid mid-point post only price";
	case OUCH_REJ_REJECT_ALL: return "reject all enabled";
	case OUCH_REJ_EASY_TO_BORROW: return "easy to borrow reject";
	case OUCH_REJ_RESTRICTED_SYMBOL: return "restricted symbol list reject";
	case OUCH_REJ_ISO_RESTRICTION: return "ISO order restriction";
	case OUCH_REJ_ODD_LOT_RESTRICTION: return "odd lot order restriction";
	case OUCH_REJ_MIDPOINT_RESTRICTION: return "mid-point order restriction";
	case OUCH_REJ_PRE_MARKET_RESTRICTION: return "pre-market order restriction";
	case OUCH_REJ_POST_MARKET_RESTRICTION: return "post-market order restriction";
	case OUCH_REJ_SHORT_SALE_RESTRICTION: return "short sale order restriction";
	case OUCH_REJ_ON_OPEN_RESTRICTION: return "on open order restriction";
	case OUCH_REJ_ON_CLOSE_RESTRICTION: return "on close order restriction";
	case OUCH_REJ_TWO_SIDED_QUOTE: return "two sided quote reject";
	case OUCH_REJ_EXCEEDED_SHARES_LIMIT: return "exceeded shares limit";
	case OUCH_REJ_EXCEEDED_DOLLAR_LIMIT: return "exceeded dollar value limit";
	case OUCH_REJ_INVALID_SIDE: return "invalid side";
	case OUCH_REJ_INVALID_TIF: return "invalid time in force";
	case OUCH_REJ_INVALID_CAPACITY: return "invalid capacity";
	case OUCH_REJ_INVALID_SHARES: return "invalid shares";
	case OUCH_REJ_DUPLICATE_TOKEN: return "duplicate token";
	case OUCH_REJ_INVALID_TOKEN: return "invalid token";
	case OUCH_REJ_INVALID_ISO: return "invalid intermarket sweep eligibility";
	case OUCH_REJ_POST_ONLY_WOULD_TAKE: return "post-only order would take liquidity";
	case OUCH_REJ_OPEN_QUOTA: return "open order quota";
	case OUCH_REJ_CREDIT: return "credit limit";
	case OUCH_REJ_THROTTLED: return "message rate exceeded";
	case OUCH_REJ_TOO_LARGE: return "command too large";
	}
	return "unknown";
}

const char *ouch_cancel_reason_str(char reason)
{
	switch (reason) {
	case OUCH_CXL_USER: return "user requested";
	case OUCH_CXL_IOC: return "immediate or cancel";
	case OUCH_CXL_TIMEOUT: return "timeout";
	case OUCH_CXL_SUPERVISORY: return "supervisory";
	case OUCH_CXL_REGULATORY: return "regulatory restriction";
	case OUCH_CXL_SELF_MATCH: return "self-match prevention";
	case OUCH_CXL_SYSTEM: return "system cancel";
	case OUCH_CXL_CROSS: return "cross canceled";
	case OUCH_CXL_MARKET_COLLARS: return "market collars";
	case OUCH_CXL_HALTED: return "halted";
	case OUCH_CXL_OPEN_PROTECTION: return "open protection";
	case OUCH_CXL_CLOSED: return "closed";
	case OUCH_CXL_POST_ONLY_NMS: return "post-only: would be price slid for NMS";
	case OUCH_CXL_POST_ONLY_CONTRA: return "post-only: would be price slid by a contra order";
	}
	return "unknown";
}

const char *ouch_broken_reason_str(char reason)
{
	switch (reason) {
	case OUCH_BRK_ERRONEOUS: return "erroneous";
	case OUCH_BRK_CONSENT: return "consent";
	case OUCH_BRK_SUPERVISORY: return "supervisory";
	case OUCH_BRK_EXTERNAL: return "external";
	}
	return "unknown";
}

static const char *event_str(char code)
{
	switch (code) {
	case OUCH_EVENT_START_OF_DAY: return "start of day";
	case OUCH_EVENT_END_OF_DAY: return "end of day";
	}
	return "unknown";
}

/* --- formatting ---------------------------------------------------------- */
struct line {
	char *out;
	size_t cap; /* > 0 */
	size_t len; /* < cap */
};

__attribute__((format(printf, 2, 3)))
static void put(struct line *ln, const char *fmt, ...)
{
	size_t room = ln->cap - ln->len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(ln->out + ln->len, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	ln->len += (size_t)n < room ? (size_t)n : room - 1;
}

/* A one-character field as shown: unprintable bytes (only possible in a
 * struct that no decoder made) become '?'. */
static char shown(char c)
{
	return printable((uint8_t)c) ? c : '?';
}

static void put_price(struct line *ln, uint32_t price)
{
	if (price == OUCH_PRICE_MARKET)
		put(ln, "MKT");
	else
		put(ln, "%" PRIu32 ".%04" PRIu32, price / 10000, price % 10000);
}

static void put_time(struct line *ln, uint64_t ns)
{
	uint64_t s = ns / 1000000000u;

	put(ln, "%02" PRIu64 ":%02u:%02u.%09u ", s / 3600, (unsigned)(s / 60 % 60),
	    (unsigned)(s % 60), (unsigned)(ns % 1000000000u));
}

/* Strings are printed with a bound, so a struct whose array lacks its NUL
 * is still read only within the array. */
#define TOK "%.14s"
#define STK "%.8s"
#define FRM "%.4s"

/* The part of Accepted and Replaced after the token(s). */
#define PUT_ORDER_BODY(ln, a)                                                          \
	do {                                                                           \
		put(ln, " %c %" PRIu32 " " STK " @ ", shown((a)->side), (a)->shares,    \
		    (a)->stock);                                                       \
		put_price(ln, (a)->price);                                             \
		put(ln, " tif=%" PRIu32 " firm=" FRM " display=%c ref=%" PRIu64         \
			" state=%c cap=%c iso=%c minqty=%" PRIu32 " cross=%c",         \
		    (a)->tif, (a)->firm, shown((a)->display), (a)->order_ref,          \
		    shown((a)->state), shown((a)->capacity), shown((a)->iso),          \
		    (a)->min_qty, shown((a)->cross_type));                             \
		if ((a)->bbo_weight != ' ' && (a)->bbo_weight != '\0')                 \
			put(ln, " bbo=%c", shown((a)->bbo_weight));                    \
	} while (0)

static void format_inbound(struct line *ln, const struct ouch_msg *m)
{
	const struct ouch_enter_order *e = &m->u.enter;
	const struct ouch_replace_order *r = &m->u.replace;

	switch (m->type) {
	case OUCH_ENTER_ORDER:
		put(ln, "Enter token=" TOK " %c %" PRIu32 " " STK " @ ", e->token, shown(e->side),
		    e->shares, e->stock);
		put_price(ln, e->price);
		put(ln, " tif=%" PRIu32 " firm=" FRM " display=%c cap=%c iso=%c minqty=%" PRIu32
			" cross=%c",
		    e->tif, e->firm, shown(e->display), shown(e->capacity), shown(e->iso),
		    e->min_qty, shown(e->cross_type));
		if (e->customer_type != ' ' && e->customer_type != '\0')
			put(ln, " cust=%c", shown(e->customer_type));
		break;
	case OUCH_REPLACE_ORDER:
		put(ln, "Replace token=" TOK " new=" TOK " %" PRIu32 " @ ", r->existing_token,
		    r->replacement_token, r->shares);
		put_price(ln, r->price);
		put(ln, " tif=%" PRIu32 " display=%c iso=%c minqty=%" PRIu32, r->tif,
		    shown(r->display), shown(r->iso), r->min_qty);
		break;
	case OUCH_CANCEL_ORDER:
		put(ln, "Cancel token=" TOK " shares=%" PRIu32, m->u.cancel.token,
		    m->u.cancel.shares);
		break;
	case OUCH_MODIFY_ORDER:
		put(ln, "Modify token=" TOK " %c %" PRIu32, m->u.modify.token,
		    shown(m->u.modify.side), m->u.modify.shares);
		break;
	}
}

static void format_outbound(struct line *ln, const struct ouch_msg *m)
{
	const struct layout *l = find(outbound_layouts, m->type);

	if (!l) {
		put(ln, "Unknown type=0x%02x", (unsigned)(uint8_t)m->type);
		return;
	}
	/* every outbound message starts with its timestamp */
	put_time(ln, m->u.system_event.timestamp);
	switch (m->type) {
	case OUCH_SYSTEM_EVENT:
		put(ln, "SystemEvent code=%c (%s)", shown(m->u.system_event.event_code),
		    event_str(m->u.system_event.event_code));
		break;
	case OUCH_ACCEPTED:
		put(ln, "Accepted token=" TOK, m->u.accepted.token);
		PUT_ORDER_BODY(ln, &m->u.accepted);
		break;
	case OUCH_REPLACED:
		put(ln, "Replaced token=" TOK " prev=" TOK, m->u.replaced.replacement_token,
		    m->u.replaced.previous_token);
		PUT_ORDER_BODY(ln, &m->u.replaced);
		break;
	case OUCH_CANCELED:
		put(ln, "Canceled token=" TOK " dec=%" PRIu32 " reason=%c (%s)",
		    m->u.canceled.token, m->u.canceled.decrement, shown(m->u.canceled.reason),
		    ouch_cancel_reason_str(m->u.canceled.reason));
		break;
	case OUCH_AIQ_CANCELED:
		put(ln, "AIQCanceled token=" TOK " dec=%" PRIu32 " reason=%c (%s) prevented=%" PRIu32
			" @ ",
		    m->u.aiq_canceled.token, m->u.aiq_canceled.decrement,
		    shown(m->u.aiq_canceled.reason),
		    ouch_cancel_reason_str(m->u.aiq_canceled.reason), m->u.aiq_canceled.prevented);
		put_price(ln, m->u.aiq_canceled.price);
		put(ln, " liq=%c", shown(m->u.aiq_canceled.liquidity));
		break;
	case OUCH_EXECUTED:
		put(ln, "Executed token=" TOK " %" PRIu32 " @ ", m->u.executed.token,
		    m->u.executed.shares);
		put_price(ln, m->u.executed.price);
		put(ln, " liq=%c match=%" PRIu64, shown(m->u.executed.liquidity),
		    m->u.executed.match);
		break;
	case OUCH_BROKEN_TRADE:
		put(ln, "BrokenTrade token=" TOK " match=%" PRIu64 " reason=%c (%s)",
		    m->u.broken_trade.token, m->u.broken_trade.match,
		    shown(m->u.broken_trade.reason),
		    ouch_broken_reason_str(m->u.broken_trade.reason));
		break;
	case OUCH_REJECTED:
		put(ln, "Rejected token=" TOK " reason=%c (%s)", m->u.rejected.token,
		    shown(m->u.rejected.reason), ouch_reject_reason_str(m->u.rejected.reason));
		break;
	case OUCH_CANCEL_PENDING:
		put(ln, "CancelPending token=" TOK, m->u.cancel_pending.token);
		break;
	case OUCH_CANCEL_REJECT:
		put(ln, "CancelReject token=" TOK, m->u.cancel_reject.token);
		break;
	default: /* OUCH_ORDER_MODIFIED */
		put(ln, "OrderModified token=" TOK " %c %" PRIu32, m->u.order_modified.token,
		    shown(m->u.order_modified.side), m->u.order_modified.shares);
		break;
	}
}

int ouch_format(const struct ouch_msg *msg, char *out, size_t cap)
{
	struct line ln = { out, cap, 0 };

	if (cap == 0)
		return 0;
	out[0] = '\0';
	/* Only 'U' and 'M' need msg->inbound: every other type exists in one
	 * direction alone, so a hand-made struct that left it 0 still prints. */
	if (find(inbound_layouts, msg->type) &&
	    (msg->inbound || !find(outbound_layouts, msg->type)))
		format_inbound(&ln, msg);
	else
		format_outbound(&ln, msg);
	return (int)ln.len;
}
