/* ITCH 5.0 codec: one field table per message type (the fields after the
 * 11-byte common header) drives both the decoder and the encoder, so the
 * two cannot disagree on a layout; GLIMPSE's End of Snapshot, which has no
 * common header, is written out by hand.
 *
 * Layouts: NASDAQ's TotalView-ITCH 5.0 specification and GLIMPSE 5.0's
 * End of Snapshot. Where lockstep decides something the spec leaves open,
 * the comment at the check says so.
 *
 * The codec is canonical: a message that decodes re-encodes to the very
 * same bytes. That is why the decoder refuses what the encoder could never
 * write (an alpha field that is not left-justified, a sequence number with
 * a leading zero) instead of accepting it loosely. */
#include "itch.h"

#include <stddef.h>
#include <string.h>

#include "wire.h"

enum field_kind {
	F_STOCK, /* alpha, at least one byte that is not a space */
	F_ALPHA, /* alpha, may be all spaces (decoded as "") */
	F_CHR, /* one printable byte, a space included */
	F_SIDE, /* 'B' or 'S' */
	F_YN, /* 'Y' or 'N' */
	F_U32,
	F_U64,
};

/* One wire field: its kind, its width on the wire, and where it lives in
 * struct itch_msg. Fields follow each other on the wire after the common
 * header. */
struct field {
	uint8_t kind;
	uint8_t width;
	uint16_t off;
};

struct layout {
	uint8_t len; /* on the wire, header included; 0: no such type */
	uint8_t nfields;
	const struct field *fields;
};

#define FLD(k, m, w) { (k), (w), offsetof(struct itch_msg, m) }
#define STOCK(m) FLD(F_STOCK, m, ITCH_STOCK_LEN)
#define ALPHA(m, w) FLD(F_ALPHA, m, w)
#define CHR(m) FLD(F_CHR, m, 1)
#define SIDE(m) FLD(F_SIDE, m, 1)
#define YN(m) FLD(F_YN, m, 1)
#define U32(m) FLD(F_U32, m, 4)
#define U64(m) FLD(F_U64, m, 8)
#define LAYOUT(l, f) { (l), sizeof(f) / sizeof((f)[0]), (f) }

static const struct field system_event_fields[] = {
	CHR(u.system_event.event_code),
};
static const struct field stock_directory_fields[] = {
	STOCK(u.stock_directory.stock), CHR(u.stock_directory.market_category),
	CHR(u.stock_directory.financial_status), U32(u.stock_directory.round_lot_size),
	CHR(u.stock_directory.round_lots_only), CHR(u.stock_directory.issue_classification),
	ALPHA(u.stock_directory.issue_subtype, 2), CHR(u.stock_directory.authenticity),
	CHR(u.stock_directory.short_sale_threshold), CHR(u.stock_directory.ipo_flag),
	CHR(u.stock_directory.luld_tier), CHR(u.stock_directory.etp_flag),
	U32(u.stock_directory.etp_leverage), CHR(u.stock_directory.inverse),
};
static const struct field trading_action_fields[] = {
	STOCK(u.trading_action.stock), CHR(u.trading_action.state),
	CHR(u.trading_action.reserved), ALPHA(u.trading_action.reason, 4),
};
static const struct field add_order_fields[] = {
	U64(u.add.ref), SIDE(u.add.side), U32(u.add.shares), STOCK(u.add.stock),
	U32(u.add.price),
};
static const struct field add_order_mpid_fields[] = {
	U64(u.add.ref), SIDE(u.add.side), U32(u.add.shares), STOCK(u.add.stock),
	U32(u.add.price), ALPHA(u.add.attribution, ITCH_MPID_LEN),
};
static const struct field order_executed_fields[] = {
	U64(u.executed.ref), U32(u.executed.shares), U64(u.executed.match),
};
static const struct field order_executed_price_fields[] = {
	U64(u.executed.ref), U32(u.executed.shares), U64(u.executed.match),
	YN(u.executed.printable), U32(u.executed.price),
};
static const struct field order_cancel_fields[] = {
	U64(u.cancel.ref), U32(u.cancel.shares),
};
static const struct field order_delete_fields[] = {
	U64(u.del.ref),
};
static const struct field order_replace_fields[] = {
	U64(u.replace.old_ref), U64(u.replace.new_ref), U32(u.replace.shares),
	U32(u.replace.price),
};
static const struct field trade_fields[] = {
	U64(u.trade.ref), SIDE(u.trade.side), U32(u.trade.shares), STOCK(u.trade.stock),
	U32(u.trade.price), U64(u.trade.match),
};

/* Indexed by the type byte; types are ASCII letters. End of Snapshot has
 * its length here and no fields: it is coded apart. */
#define NTYPES 128
static const struct layout layouts[NTYPES] = {
	[ITCH_SYSTEM_EVENT] = LAYOUT(ITCH_SYSTEM_EVENT_LEN, system_event_fields),
	[ITCH_STOCK_DIRECTORY] = LAYOUT(ITCH_STOCK_DIRECTORY_LEN, stock_directory_fields),
	[ITCH_TRADING_ACTION] = LAYOUT(ITCH_TRADING_ACTION_LEN, trading_action_fields),
	[ITCH_ADD_ORDER] = LAYOUT(ITCH_ADD_ORDER_LEN, add_order_fields),
	[ITCH_ADD_ORDER_MPID] = LAYOUT(ITCH_ADD_ORDER_MPID_LEN, add_order_mpid_fields),
	[ITCH_ORDER_EXECUTED] = LAYOUT(ITCH_ORDER_EXECUTED_LEN, order_executed_fields),
	[ITCH_ORDER_EXECUTED_PRICE] =
		LAYOUT(ITCH_ORDER_EXECUTED_PRICE_LEN, order_executed_price_fields),
	[ITCH_ORDER_CANCEL] = LAYOUT(ITCH_ORDER_CANCEL_LEN, order_cancel_fields),
	[ITCH_ORDER_DELETE] = LAYOUT(ITCH_ORDER_DELETE_LEN, order_delete_fields),
	[ITCH_ORDER_REPLACE] = LAYOUT(ITCH_ORDER_REPLACE_LEN, order_replace_fields),
	[ITCH_TRADE] = LAYOUT(ITCH_TRADE_LEN, trade_fields),
	[ITCH_END_OF_SNAPSHOT] = { ITCH_END_OF_SNAPSHOT_LEN, 0, NULL },
};

const char *itch_strerror(int err)
{
	switch (err) {
	case ITCH_OK: return "success";
	case ITCH_E_EMPTY: return "empty message (no type byte)";
	case ITCH_E_TYPE: return "unknown ITCH message type";
	case ITCH_E_LEN: return "wrong length for the message type";
	case ITCH_E_ALPHA: return "alpha field unprintable, not left-justified or empty";
	case ITCH_E_FIELD: return "field value not allowed for the message type";
	case ITCH_E_NOSPACE: return "output buffer too small";
	}
	return "unknown ITCH error";
}

static const struct layout *find(char type)
{
	uint8_t t = (uint8_t)type;

	if (t >= NTYPES || layouts[t].len == 0)
		return NULL;
	return &layouts[t];
}

size_t itch_len(char type)
{
	const struct layout *l = find(type);

	return l ? l->len : 0;
}

static int printable(uint8_t c)
{
	return c >= 0x20 && c <= 0x7e;
}

/* ITCH_OK, or the error of one-char field c of kind `kind` (on the wire or
 * in the struct: the rule is the same). */
static int check_chr(uint8_t kind, uint8_t c)
{
	if (kind == F_SIDE)
		return c == 'B' || c == 'S' ? ITCH_OK : ITCH_E_FIELD;
	if (kind == F_YN)
		return c == 'Y' || c == 'N' ? ITCH_OK : ITCH_E_FIELD;
	return printable(c) ? ITCH_OK : ITCH_E_ALPHA;
}

/* ITCH_OK, or ITCH_E_ALPHA: the n bytes of an alpha field (the wire's, or
 * the struct's string before its NUL) are printable, no space comes before
 * a byte that is not one, and a stock has a first byte that is not one. */
static int check_alpha(uint8_t kind, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!printable(s[i]))
			return ITCH_E_ALPHA;
		if (i > 0 && s[i - 1] == ' ' && s[i] != ' ')
			return ITCH_E_ALPHA;
	}
	if (kind == F_STOCK && (n == 0 || s[0] == ' '))
		return ITCH_E_ALPHA;
	return ITCH_OK;
}

static uint64_t get_u48(const uint8_t *p)
{
	return (uint64_t)wire_get_u16(p) << 32 | wire_get_u32(p + 2);
}

static void put_u48(uint8_t *p, uint64_t v)
{
	wire_put_u16(p, (uint16_t)(v >> 32));
	wire_put_u32(p + 2, (uint32_t)v);
}

/* --- decoding ------------------------------------------------------------ */

/* End of Snapshot: 1 to 20 digits, then spaces to the end of the field.
 * The spec says numeric, left-justified, space padded; a leading zero
 * (other than "0" itself) is refused because the encoder never writes one. */
static int decode_end_of_snapshot(const uint8_t *p, struct itch_msg *m)
{
	uint64_t v = 0;
	size_t n = 0;

	while (n < ITCH_SEQ_DIGITS && p[n] >= '0' && p[n] <= '9') {
		unsigned d = (unsigned)(p[n] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return ITCH_E_FIELD;
		v = v * 10 + d;
		n++;
	}
	if (n == 0 || (n > 1 && p[0] == '0'))
		return ITCH_E_FIELD;
	for (size_t i = n; i < ITCH_SEQ_DIGITS; i++)
		if (p[i] != ' ')
			return ITCH_E_FIELD;
	m->u.end_of_snapshot.seq = v;
	return ITCH_OK;
}

int itch_decode(const uint8_t *buf, size_t len, struct itch_msg *out)
{
	const struct layout *l;
	struct itch_msg m;
	size_t pos = ITCH_HDR_LEN;
	int rc;

	if (len == 0)
		return ITCH_E_EMPTY;
	l = find((char)buf[0]);
	if (!l)
		return ITCH_E_TYPE;
	if (len != l->len)
		return ITCH_E_LEN;
	memset(&m, 0, sizeof(m));
	m.type = (char)buf[0];
	if (m.type == ITCH_END_OF_SNAPSHOT) {
		rc = decode_end_of_snapshot(buf + 1, &m);
		if (rc != ITCH_OK)
			return rc;
		memcpy(out, &m, sizeof(m));
		return ITCH_OK;
	}
	m.locate = wire_get_u16(buf + 1);
	m.tracking = wire_get_u16(buf + 3);
	m.timestamp = get_u48(buf + 5);
	for (unsigned i = 0; i < l->nfields; i++) {
		const struct field *f = &l->fields[i];
		const uint8_t *src = buf + pos;
		char *dst = (char *)&m + f->off;
		uint32_t v32;
		uint64_t v64;
		size_t n;

		switch (f->kind) {
		case F_STOCK:
		case F_ALPHA:
			rc = check_alpha(f->kind, src, f->width);
			if (rc != ITCH_OK)
				return rc;
			n = f->width;
			while (n > 0 && src[n - 1] == ' ')
				n--;
			memcpy(dst, src, n);
			dst[n] = '\0';
			break;
		case F_CHR:
		case F_SIDE:
		case F_YN:
			rc = check_chr(f->kind, src[0]);
			if (rc != ITCH_OK)
				return rc;
			*dst = (char)src[0];
			break;
		case F_U32:
			v32 = wire_get_u32(src);
			memcpy(dst, &v32, sizeof(v32));
			break;
		default:
			v64 = wire_get_u64(src);
			memcpy(dst, &v64, sizeof(v64));
			break;
		}
		pos += f->width;
	}
	if (pos != len) /* a table that disagrees with its length */
		return ITCH_E_LEN;
	memcpy(out, &m, sizeof(m));
	return ITCH_OK;
}

/* --- encoding ------------------------------------------------------------ */

/* The sequence number's digits, left-justified in 20 spaces. */
static void encode_end_of_snapshot(uint64_t v, uint8_t *p)
{
	uint8_t digits[ITCH_SEQ_DIGITS];
	size_t n = 0;

	do {
		digits[n++] = (uint8_t)('0' + v % 10);
		v /= 10;
	} while (v > 0); /* at most 20 digits: UINT64_MAX has 20 */
	memset(p, ' ', ITCH_SEQ_DIGITS);
	for (size_t i = 0; i < n; i++)
		p[i] = digits[n - 1 - i];
}

int itch_encode(const struct itch_msg *msg, uint8_t *out, size_t cap)
{
	const struct layout *l = find(msg->type);
	uint8_t buf[ITCH_MAX_LEN];
	size_t pos = ITCH_HDR_LEN;

	if (!l)
		return ITCH_E_TYPE;
	if (cap < l->len)
		return ITCH_E_NOSPACE;
	buf[0] = (uint8_t)msg->type;
	if (msg->type == ITCH_END_OF_SNAPSHOT) {
		/* no common header: locate, tracking and timestamp are not sent */
		encode_end_of_snapshot(msg->u.end_of_snapshot.seq, buf + 1);
		memcpy(out, buf, l->len);
		return l->len;
	}
	if (msg->timestamp > ITCH_TS_MAX)
		return ITCH_E_FIELD;
	wire_put_u16(buf + 1, msg->locate);
	wire_put_u16(buf + 3, msg->tracking);
	put_u48(buf + 5, msg->timestamp);
	for (unsigned i = 0; i < l->nfields; i++) {
		const struct field *f = &l->fields[i];
		const char *src = (const char *)msg + f->off;
		uint8_t *dst = buf + pos;
		uint32_t v32;
		uint64_t v64;
		size_t n;
		int rc;

		switch (f->kind) {
		case F_STOCK:
		case F_ALPHA:
			/* the struct's array is width + 1 long; trailing spaces
			 * in the string are padding like the encoder's own */
			n = strnlen(src, (size_t)f->width + 1);
			if (n > f->width)
				return ITCH_E_ALPHA;
			rc = check_alpha(f->kind, (const uint8_t *)src, n);
			if (rc != ITCH_OK)
				return rc;
			memcpy(dst, src, n);
			memset(dst + n, ' ', f->width - n);
			break;
		case F_CHR:
		case F_SIDE:
		case F_YN:
			/* NUL is not turned into a space: a field left unset
			 * is an error, not a blank */
			rc = check_chr(f->kind, (uint8_t)*src);
			if (rc != ITCH_OK)
				return rc;
			dst[0] = (uint8_t)*src;
			break;
		case F_U32:
			memcpy(&v32, src, sizeof(v32));
			wire_put_u32(dst, v32);
			break;
		default:
			memcpy(&v64, src, sizeof(v64));
			wire_put_u64(dst, v64);
			break;
		}
		pos += f->width;
	}
	if (pos != l->len) /* a table that disagrees with its length */
		return ITCH_E_LEN;
	memcpy(out, buf, l->len);
	return l->len;
}
