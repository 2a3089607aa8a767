/* ouch_encode_outbound: straight-line encoders for the outbound messages the
 * matcher sends (Accepted, Replaced, Canceled, Executed, Rejected, Order
 * Modified, Cancel Reject and Cancel Pending); System Event, AIQ Canceled
 * and Broken Trade go through the field table in ouch.c.
 *
 * Each encoder gives the table's bytes and the table's error for every
 * input (tests/test_ouch.c and tests/fuzz/fuzz_ouch.c compare the two):
 * OUCH_E_NOSPACE first, then OUCH_E_FIELD for any string longer than its
 * field or with a byte outside 0x20-0x7E before its NUL, or any one-char
 * field that is neither NUL (sent as a space) nor printable. A message is
 * built on the stack and copied out whole, so out is untouched on error.
 * Alpha fields are checked and padded 8 bytes at a time. */
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

/* An alpha field of w bytes (4 to 15) from src, an array of w + 1: the bytes
 * before src's first NUL, then spaces. *bad gets a nonzero bit when those
 * bytes are more than w or one is unprintable. */
static inline uint8_t *put_str(uint8_t *p, const char *src, unsigned w, uint64_t *bad)
{
	uint8_t tmp[16] = { 0 };
	uint64_t x0, x1, k0, k1;

	memcpy(tmp, src, w + 1);
	x0 = load_le64(tmp);
	x1 = load_le64(tmp + 8);
	k0 = before_nul(x0);
	k1 = before_nul(x1) & -(uint64_t)(k0 == UINT64_MAX); /* tmp[15] is a NUL */
	*bad |= (unprintable(x0) & k0) | (unprintable(x1) & k1);
	/* too long: byte w is kept, so no NUL in src[0..w] */
	*bad |= w < 8 ? (k0 >> (8 * w)) & 1 : (k1 >> (8 * (w - 8))) & 1;
	store_le64(tmp, (x0 & k0) | (SPACES & ~k0));
	store_le64(tmp + 8, (x1 & k1) | (SPACES & ~k1));
	memcpy(p, tmp, w);
	return p + w;
}

/* A one-character field: NUL is sent as a space, anything else must be
 * printable. */
static inline uint8_t *put_chr(uint8_t *p, char c, uint64_t *bad)
{
	uint8_t b = (uint8_t)c;

	*bad |= b != 0 && (uint8_t)(b - 0x20) > 0x7e - 0x20;
	*p = b ? b : ' ';
	return p + 1;
}

#define put_token(p, t, bad) put_str((p), (t), OUCH_TOKEN_LEN, (bad))

/* The fields of Accepted and Replaced from side to state (a macro: the two
 * structs differ in type, not in these members). */
#define PUT_ORDER_BODY(p, a, bad)                                       \
	do {                                                            \
		(p) = put_chr((p), (a)->side, (bad));                   \
		(p) = put_u32((p), (a)->shares);                        \
		(p) = put_str((p), (a)->stock, OUCH_STOCK_LEN, (bad));  \
		(p) = put_u32((p), (a)->price);                         \
		(p) = put_u32((p), (a)->tif);                           \
		(p) = put_str((p), (a)->firm, OUCH_FIRM_LEN, (bad));    \
		(p) = put_chr((p), (a)->display, (bad));                \
		(p) = put_u64((p), (a)->order_ref);                     \
		(p) = put_chr((p), (a)->capacity, (bad));               \
		(p) = put_chr((p), (a)->iso, (bad));                    \
		(p) = put_u32((p), (a)->min_qty);                       \
		(p) = put_chr((p), (a)->cross_type, (bad));             \
		(p) = put_chr((p), (a)->state, (bad));                  \
	} while (0)

/* Copies a built message of len bytes out, or reports the bad field. */
static inline int finish(uint8_t *out, const uint8_t *buf, size_t len, uint64_t bad)
{
	if (bad)
		return OUCH_E_FIELD;
	memcpy(out, buf, len);
	return (int)len;
}

static int enc_accepted(const struct ouch_accepted *a, uint8_t *out)
{
	uint8_t buf[OUCH_ACCEPTED_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = OUCH_ACCEPTED;
	p = put_u64(p, a->timestamp);
	p = put_token(p, a->token, &bad);
	PUT_ORDER_BODY(p, a, &bad);
	put_chr(p, a->bbo_weight, &bad);
	return finish(out, buf, sizeof(buf), bad);
}

static int enc_replaced(const struct ouch_replaced *r, uint8_t *out)
{
	uint8_t buf[OUCH_REPLACED_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = OUCH_REPLACED;
	p = put_u64(p, r->timestamp);
	p = put_token(p, r->replacement_token, &bad);
	PUT_ORDER_BODY(p, r, &bad);
	p = put_token(p, r->previous_token, &bad);
	put_chr(p, r->bbo_weight, &bad);
	return finish(out, buf, sizeof(buf), bad);
}

static int enc_canceled(const struct ouch_canceled *c, uint8_t *out)
{
	uint8_t buf[OUCH_CANCELED_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = OUCH_CANCELED;
	p = put_u64(p, c->timestamp);
	p = put_token(p, c->token, &bad);
	p = put_u32(p, c->decrement);
	put_chr(p, c->reason, &bad);
	return finish(out, buf, sizeof(buf), bad);
}

static int enc_executed(const struct ouch_executed *e, uint8_t *out)
{
	uint8_t buf[OUCH_EXECUTED_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = OUCH_EXECUTED;
	p = put_u64(p, e->timestamp);
	p = put_token(p, e->token, &bad);
	p = put_u32(p, e->shares);
	p = put_u32(p, e->price);
	p = put_chr(p, e->liquidity, &bad);
	put_u64(p, e->match);
	return finish(out, buf, sizeof(buf), bad);
}

static int enc_rejected(const struct ouch_rejected *r, uint8_t *out)
{
	uint8_t buf[OUCH_REJECTED_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = OUCH_REJECTED;
	p = put_u64(p, r->timestamp);
	p = put_token(p, r->token, &bad);
	put_chr(p, r->reason, &bad);
	return finish(out, buf, sizeof(buf), bad);
}

static int enc_order_modified(const struct ouch_order_modified *m, uint8_t *out)
{
	uint8_t buf[OUCH_ORDER_MODIFIED_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = OUCH_ORDER_MODIFIED;
	p = put_u64(p, m->timestamp);
	p = put_token(p, m->token, &bad);
	p = put_chr(p, m->side, &bad);
	put_u32(p, m->shares);
	return finish(out, buf, sizeof(buf), bad);
}

/* Cancel Reject and Cancel Pending: the type byte, a timestamp, a token. */
static int enc_token_only(char type, const struct ouch_token_only *t, uint8_t *out)
{
	uint8_t buf[OUCH_CANCEL_REJECT_LEN], *p = buf;
	uint64_t bad = 0;

	*p++ = (uint8_t)type;
	p = put_u64(p, t->timestamp);
	put_token(p, t->token, &bad);
	return finish(out, buf, sizeof(buf), bad);
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
	case OUCH_REJECTED: return enc_rejected(&msg->u.rejected, out);
	case OUCH_ORDER_MODIFIED: return enc_order_modified(&msg->u.order_modified, out);
	case OUCH_CANCEL_REJECT: return enc_token_only(OUCH_CANCEL_REJECT, &msg->u.cancel_reject, out);
	default: return enc_token_only(OUCH_CANCEL_PENDING, &msg->u.cancel_pending, out);
	}
}
