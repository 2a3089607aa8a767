/* ouch_encode_outbound: straight-line encoders for the outbound messages the
 * matcher sends (Accepted, Replaced, Canceled, Executed, Rejected, Order
 * Modified, Cancel Reject and Cancel Pending); System Event, AIQ Canceled
 * and Broken Trade go through the field table in ouch.c.
 *
 * Each encoder gives the table's bytes and the table's error for every
 * input (tests/test_ouch.c and tests/fuzz/fuzz_ouch.c compare the two):
 * OUCH_E_NOSPACE first, then OUCH_E_FIELD for any string longer than its
 * field or with a byte outside 0x20-0x7E before its NUL, or any one-char
 * field that is neither NUL (sent as a space) nor printable. Every field
 * is checked before a byte is written, so out is untouched on error.
 * Alpha fields are loaded, checked and padded 8 bytes at a time. */
#include <stdint.h>
#include <string.h>

#include "ouch.h"
#include "ouch_private.h"

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
#define SPACES 0x2020202020202020ull

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline void store_le64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, sizeof(v));
}

static inline uint8_t *put_u32(uint8_t *p, uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	memcpy(p, &v, sizeof(v));
	return p + sizeof(v);
}

static inline uint8_t *put_u64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, sizeof(v));
	return p + sizeof(v);
}

/* The bytes of x (little-endian order) before its first NUL, as a mask of
 * whole bytes; all of x when it has none. The NUL test is exact per byte:
 * (b & 0x7f) + 0x7f sets bit 7 unless the low bits are 0, and never
 * carries into the next byte. */
static inline uint64_t before_nul(uint64_t x)
{
	uint64_t nul = ~((((x & ~HIGHS) + ~HIGHS) | x)) & HIGHS;

	nul &= -nul; /* the first NUL's bit 7, or 0 */
	return (nul >> 7) - 1;
}

/* Bit 7 set in each byte of x outside 0x20-0x7E. For b < 0x80:
 * b + 0x60 has bit 7 iff b >= 0x20, b + 0x01 has it iff b == 0x7f; no sum
 * carries into the next byte. */
static inline uint64_t unprintable(uint64_t x)
{
	uint64_t lo = x & ~HIGHS;
	uint64_t ok = (lo + 0x60 * ONES) & ~(lo + ONES) & ~x;

	return ~ok & HIGHS;
}

static inline uint64_t load_le32(const char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

/* An alpha field of w bytes (4 to 15) from src, an array of w + 1, read as
 * two words straight from src (overlapping loads, no byte past src[w]):
 * the bytes before src's first NUL, then spaces. *bad gets a nonzero bit
 * when those bytes are more than w or one is unprintable. */
/* An alpha field checked and padded: bytes 0-7 in lo, 8-15 in hi. */
struct alpha {
	uint64_t lo, hi;
};

static inline void alpha(struct alpha *a, const char *src, unsigned w, uint64_t *bad)
{
	uint64_t x0, x1 = 0, k0, k1;

	if (w + 1 >= 8) {
		x0 = load_le64((const uint8_t *)src);
		if (w + 1 > 8)
			x1 = load_le64((const uint8_t *)src + w + 1 - 8) >> (8 * (16 - (w + 1)));
	} else { /* two 4-byte loads; the bytes they share land alike */
		x0 = load_le32(src) | load_le32(src + w + 1 - 4) << (8 * (w + 1 - 4));
	}
	k0 = before_nul(x0);
	k1 = before_nul(x1) & -(uint64_t)(k0 == UINT64_MAX); /* x1's top byte is 0 */
	*bad |= (unprintable(x0) & k0) | (unprintable(x1) & k1);
	/* too long: byte w is kept, so no NUL in src[0..w] */
	*bad |= w < 8 ? (k0 >> (8 * w)) & 1 : (k1 >> (8 * (w - 8))) & 1;
	a->lo = (x0 & k0) | (SPACES & ~k0);
	a->hi = (x1 & k1) | (SPACES & ~k1);
}

/* Writes the w bytes of an alpha field (4 to 15) with whole-word stores. */
static inline uint8_t *put_alpha(uint8_t *p, const struct alpha *a, unsigned w)
{
	uint8_t tmp[8];

	if (w >= 8) {
		store_le64(p, a->lo);
		if (w > 8) { /* bytes w-8 .. w-1: lo's top ones, then hi's */
			store_le64(tmp, a->lo >> (8 * (w - 8)) | a->hi << (8 * (16 - w)));
			memcpy(p + w - 8, tmp, 8);
		}
	} else {
		store_le64(tmp, a->lo);
		memcpy(p, tmp, 4);
		store_le64(tmp, a->lo >> (8 * (w - 4)));
		memcpy(p + w - 4, tmp, 4);
	}
	return p + w;
}

/* A one-character field: NUL is sent as a space, anything else must be
 * printable. */
static inline uint8_t chr(char c, uint64_t *bad)
{
	uint8_t b = (uint8_t)c;

	*bad |= b != 0 && (uint8_t)(b - 0x20) > 0x7e - 0x20;
	return b ? b : ' ';
}

/* The checked alpha and char fields of Accepted and Replaced from side to
 * state; the macros take either struct (they differ in type, not in these
 * members). */
struct order_body {
	struct alpha stock, firm;
	uint8_t side, display, capacity, iso, cross_type, state;
};

#define CHECK_ORDER_BODY(b, a, bad)                                       \
	do {                                                              \
		(b)->side = chr((a)->side, (bad));                        \
		alpha(&(b)->stock, (a)->stock, OUCH_STOCK_LEN, (bad));    \
		alpha(&(b)->firm, (a)->firm, OUCH_FIRM_LEN, (bad));       \
		(b)->display = chr((a)->display, (bad));                  \
		(b)->capacity = chr((a)->capacity, (bad));                \
		(b)->iso = chr((a)->iso, (bad));                          \
		(b)->cross_type = chr((a)->cross_type, (bad));            \
		(b)->state = chr((a)->state, (bad));                      \
	} while (0)

#define PUT_ORDER_BODY(p, b, a)                                           \
	do {                                                              \
		*(p)++ = (b)->side;                                       \
		(p) = put_u32((p), (a)->shares);                          \
		(p) = put_alpha((p), &(b)->stock, OUCH_STOCK_LEN);        \
		(p) = put_u32((p), (a)->price);                           \
		(p) = put_u32((p), (a)->tif);                             \
		(p) = put_alpha((p), &(b)->firm, OUCH_FIRM_LEN);          \
		*(p)++ = (b)->display;                                    \
		(p) = put_u64((p), (a)->order_ref);                       \
		*(p)++ = (b)->capacity;                                   \
		*(p)++ = (b)->iso;                                        \
		(p) = put_u32((p), (a)->min_qty);                         \
		*(p)++ = (b)->cross_type;                                 \
		*(p)++ = (b)->state;                                      \
	} while (0)

/* Each encoder checks every field first and writes out only when all are
 * good; the caller has checked cap. */
static int enc_accepted(const struct ouch_accepted *a, uint8_t *out)
{
	struct order_body b;
	struct alpha tok;
	uint64_t bad = 0;
	uint8_t bbo, *p = out;

	alpha(&tok, a->token, OUCH_TOKEN_LEN, &bad);
	CHECK_ORDER_BODY(&b, a, &bad);
	bbo = chr(a->bbo_weight, &bad);
	if (bad)
		return OUCH_E_FIELD;
	*p++ = OUCH_ACCEPTED;
	p = put_u64(p, a->timestamp);
	p = put_alpha(p, &tok, OUCH_TOKEN_LEN);
	PUT_ORDER_BODY(p, &b, a);
	*p = bbo;
	return OUCH_ACCEPTED_LEN;
}

static int enc_replaced(const struct ouch_replaced *r, uint8_t *out)
{
	struct order_body b;
	struct alpha tok, prev;
	uint64_t bad = 0;
	uint8_t bbo, *p = out;

	alpha(&tok, r->replacement_token, OUCH_TOKEN_LEN, &bad);
	CHECK_ORDER_BODY(&b, r, &bad);
	alpha(&prev, r->previous_token, OUCH_TOKEN_LEN, &bad);
	bbo = chr(r->bbo_weight, &bad);
	if (bad)
		return OUCH_E_FIELD;
	*p++ = OUCH_REPLACED;
	p = put_u64(p, r->timestamp);
	p = put_alpha(p, &tok, OUCH_TOKEN_LEN);
	PUT_ORDER_BODY(p, &b, r);
	p = put_alpha(p, &prev, OUCH_TOKEN_LEN);
	*p = bbo;
	return OUCH_REPLACED_LEN;
}

static int enc_canceled(const struct ouch_canceled *c, uint8_t *out)
{
	struct alpha tok;
	uint64_t bad = 0;
	uint8_t reason, *p = out;

	alpha(&tok, c->token, OUCH_TOKEN_LEN, &bad);
	reason = chr(c->reason, &bad);
	if (bad)
		return OUCH_E_FIELD;
	*p++ = OUCH_CANCELED;
	p = put_u64(p, c->timestamp);
	p = put_alpha(p, &tok, OUCH_TOKEN_LEN);
	p = put_u32(p, c->decrement);
	*p = reason;
	return OUCH_CANCELED_LEN;
}

static int enc_executed(const struct ouch_executed *e, uint8_t *out)
{
	struct alpha tok;
	uint64_t bad = 0;
	uint8_t liq, *p = out;

	alpha(&tok, e->token, OUCH_TOKEN_LEN, &bad);
	liq = chr(e->liquidity, &bad);
	if (bad)
		return OUCH_E_FIELD;
	*p++ = OUCH_EXECUTED;
	p = put_u64(p, e->timestamp);
	p = put_alpha(p, &tok, OUCH_TOKEN_LEN);
	p = put_u32(p, e->shares);
	p = put_u32(p, e->price);
	*p++ = liq;
	put_u64(p, e->match);
	return OUCH_EXECUTED_LEN;
}

/* Rejected, Order Modified, Cancel Reject and Cancel Pending: a timestamp,
 * a token, then one char (Rejected's reason, Order Modified's side) or
 * none, then Order Modified's shares. */
static inline __attribute__((always_inline)) int enc_token_msg(char type, int len, uint64_t ts, const char *token, const char *c,
			 uint32_t shares, uint8_t *out)
{
	struct alpha tok;
	uint64_t bad = 0;
	uint8_t ch = 0, *p = out;

	alpha(&tok, token, OUCH_TOKEN_LEN, &bad);
	if (c)
		ch = chr(*c, &bad);
	if (bad)
		return OUCH_E_FIELD;
	*p++ = (uint8_t)type;
	p = put_u64(p, ts);
	p = put_alpha(p, &tok, OUCH_TOKEN_LEN);
	if (c)
		*p++ = ch;
	if (type == OUCH_ORDER_MODIFIED)
		put_u32(p, shares);
	return len;
}

_Static_assert(OUCH_CANCEL_PENDING_LEN == OUCH_CANCEL_REJECT_LEN,
	       "Cancel Pending and Cancel Reject share one layout");

/* The length each type of its own has on the wire: 0 for the table's. */
static int own_len(char type)
{
	switch (type) {
	case OUCH_ACCEPTED: return OUCH_ACCEPTED_LEN;
	case OUCH_REPLACED: return OUCH_REPLACED_LEN;
	case OUCH_CANCELED: return OUCH_CANCELED_LEN;
	case OUCH_EXECUTED: return OUCH_EXECUTED_LEN;
	case OUCH_REJECTED: return OUCH_REJECTED_LEN;
	case OUCH_ORDER_MODIFIED: return OUCH_ORDER_MODIFIED_LEN;
	case OUCH_CANCEL_REJECT: return OUCH_CANCEL_REJECT_LEN;
	case OUCH_CANCEL_PENDING: return OUCH_CANCEL_PENDING_LEN;
	}
	return 0;
}

int ouch_encode_outbound(const struct ouch_msg *msg, uint8_t *out, size_t cap)
{
	const struct ouch_rejected *rej = &msg->u.rejected;
	const struct ouch_order_modified *mod = &msg->u.order_modified;
	const struct ouch_token_only *tok = &msg->u.cancel_reject; /* or _pending */
	int len = own_len(msg->type);

	if (len == 0)
		return ouch_encode_outbound_table(msg, out, cap);
	if (cap < (size_t)len)
		return OUCH_E_NOSPACE;
	switch (msg->type) {
	case OUCH_ACCEPTED: return enc_accepted(&msg->u.accepted, out);
	case OUCH_REPLACED: return enc_replaced(&msg->u.replaced, out);
	case OUCH_CANCELED: return enc_canceled(&msg->u.canceled, out);
	case OUCH_EXECUTED: return enc_executed(&msg->u.executed, out);
	case OUCH_REJECTED:
		return enc_token_msg(OUCH_REJECTED, len, rej->timestamp, rej->token, &rej->reason,
				     0, out);
	case OUCH_ORDER_MODIFIED:
		return enc_token_msg(OUCH_ORDER_MODIFIED, len, mod->timestamp, mod->token,
				     &mod->side, mod->shares, out);
	default: /* Cancel Reject, Cancel Pending */
		return enc_token_msg(msg->type, len, tok->timestamp, tok->token, NULL, 0, out);
	}
}
