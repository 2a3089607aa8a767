/* OUCH 4.2 codec: byte-exact layouts, round trips of every type in both
 * directions, malformed input, the straight-line outbound encoders against
 * the table encoder, validation, the tick rule and formatting. */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ouch.h"
#include "ouch_private.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define TS_0930 ((9ull * 3600 + 30 * 60) * 1000000000ull + 1) /* 09:30:00.000000001 */

/* --- sample messages ------------------------------------------------------ */
static struct ouch_msg blank(char type, int inbound)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.inbound = (uint8_t)inbound;
	return m;
}

static struct ouch_msg sample_enter(void)
{
	struct ouch_msg m = blank(OUCH_ENTER_ORDER, 1);
	struct ouch_enter_order *e = &m.u.enter;

	strcpy(e->token, "ORD1");
	e->side = OUCH_BUY;
	e->shares = 100;
	strcpy(e->stock, "AAPL");
	e->price = 1502500;
	e->tif = OUCH_TIF_SYSTEM_HOURS;
	strcpy(e->firm, "FRMA");
	e->display = OUCH_DISPLAY_ATTRIBUTABLE;
	e->capacity = OUCH_CAP_AGENCY;
	e->iso = 'N';
	e->min_qty = 0;
	e->cross_type = OUCH_CROSS_NONE;
	e->customer_type = OUCH_CUST_RETAIL;
	return m;
}

static struct ouch_msg sample_replace(void)
{
	struct ouch_msg m = blank(OUCH_REPLACE_ORDER, 1);
	struct ouch_replace_order *r = &m.u.replace;

	strcpy(r->existing_token, "ORD1");
	strcpy(r->replacement_token, "ORD2-REPLACE14"); /* all 14 bytes */
	r->shares = 200;
	r->price = 1502600;
	r->tif = OUCH_TIF_IOC;
	r->display = OUCH_DISPLAY_NONDISPLAYED;
	r->iso = 'Y';
	r->min_qty = 100;
	return m;
}

static struct ouch_msg sample_cancel(void)
{
	struct ouch_msg m = blank(OUCH_CANCEL_ORDER, 1);

	strcpy(m.u.cancel.token, "ORD1");
	m.u.cancel.shares = 0;
	return m;
}

static struct ouch_msg sample_modify(void)
{
	struct ouch_msg m = blank(OUCH_MODIFY_ORDER, 1);

	strcpy(m.u.modify.token, "ORD1");
	m.u.modify.side = OUCH_SELL_SHORT;
	m.u.modify.shares = 50;
	return m;
}

static struct ouch_msg sample_system_event(void)
{
	struct ouch_msg m = blank(OUCH_SYSTEM_EVENT, 0);

	m.u.system_event.timestamp = 4 * 3600ull * 1000000000ull;
	m.u.system_event.event_code = OUCH_EVENT_START_OF_DAY;
	return m;
}

static struct ouch_msg sample_accepted(void)
{
	struct ouch_msg m = blank(OUCH_ACCEPTED, 0);
	struct ouch_accepted *a = &m.u.accepted;

	a->timestamp = TS_0930;
	strcpy(a->token, "ORD1");
	a->side = OUCH_BUY;
	a->shares = 100;
	strcpy(a->stock, "AAPL");
	a->price = 1502500;
	a->tif = OUCH_TIF_SYSTEM_HOURS;
	strcpy(a->firm, "FRMA");
	a->display = OUCH_DISPLAY_ATTRIBUTABLE;
	a->order_ref = 12;
	a->capacity = OUCH_CAP_AGENCY;
	a->iso = 'N';
	a->min_qty = 0;
	a->cross_type = OUCH_CROSS_NONE;
	a->state = OUCH_STATE_LIVE;
	a->bbo_weight = ' ';
	return m;
}

static struct ouch_msg sample_replaced(void)
{
	struct ouch_msg m = blank(OUCH_REPLACED, 0);
	struct ouch_replaced *r = &m.u.replaced;

	r->timestamp = TS_0930 + 5;
	strcpy(r->replacement_token, "ORD2");
	r->side = OUCH_SELL;
	r->shares = 300;
	strcpy(r->stock, "MSFT");
	r->price = 3105000;
	r->tif = 60;
	strcpy(r->firm, "FRMB");
	r->display = OUCH_DISPLAY_POST_ONLY;
	r->order_ref = 0x0102030405060708ull;
	r->capacity = OUCH_CAP_PRINCIPAL;
	r->iso = 'Y';
	r->min_qty = 10;
	r->cross_type = OUCH_CROSS_NONE;
	r->state = OUCH_STATE_DEAD;
	strcpy(r->previous_token, "ORD1");
	r->bbo_weight = '2';
	return m;
}

static struct ouch_msg sample_canceled(void)
{
	struct ouch_msg m = blank(OUCH_CANCELED, 0);

	m.u.canceled.timestamp = TS_0930 + 9;
	strcpy(m.u.canceled.token, "ORD1");
	m.u.canceled.decrement = 50;
	m.u.canceled.reason = OUCH_CXL_USER;
	return m;
}

static struct ouch_msg sample_aiq_canceled(void)
{
	struct ouch_msg m = blank(OUCH_AIQ_CANCELED, 0);

	m.u.aiq_canceled.timestamp = TS_0930;
	strcpy(m.u.aiq_canceled.token, "ORD3");
	m.u.aiq_canceled.decrement = 40;
	m.u.aiq_canceled.reason = OUCH_CXL_SELF_MATCH;
	m.u.aiq_canceled.prevented = 30;
	m.u.aiq_canceled.price = 100000;
	m.u.aiq_canceled.liquidity = OUCH_LIQ_REMOVED;
	return m;
}

static struct ouch_msg sample_executed(void)
{
	struct ouch_msg m = blank(OUCH_EXECUTED, 0);

	m.u.executed.timestamp = TS_0930;
	strcpy(m.u.executed.token, "ORD1");
	m.u.executed.shares = 100;
	m.u.executed.price = 1502500;
	m.u.executed.liquidity = OUCH_LIQ_ADDED;
	m.u.executed.match = 7;
	return m;
}

static struct ouch_msg sample_broken_trade(void)
{
	struct ouch_msg m = blank(OUCH_BROKEN_TRADE, 0);

	m.u.broken_trade.timestamp = TS_0930;
	strcpy(m.u.broken_trade.token, "ORD1");
	m.u.broken_trade.match = 7;
	m.u.broken_trade.reason = OUCH_BRK_ERRONEOUS;
	return m;
}

static struct ouch_msg sample_rejected(void)
{
	struct ouch_msg m = blank(OUCH_REJECTED, 0);

	m.u.rejected.timestamp = TS_0930;
	strcpy(m.u.rejected.token, "ORD9");
	m.u.rejected.reason = OUCH_REJ_INVALID_PRICE;
	return m;
}

static struct ouch_msg sample_cancel_pending(void)
{
	struct ouch_msg m = blank(OUCH_CANCEL_PENDING, 0);

	m.u.cancel_pending.timestamp = TS_0930;
	strcpy(m.u.cancel_pending.token, "ORD1");
	return m;
}

static struct ouch_msg sample_cancel_reject(void)
{
	struct ouch_msg m = blank(OUCH_CANCEL_REJECT, 0);

	m.u.cancel_reject.timestamp = TS_0930;
	strcpy(m.u.cancel_reject.token, "ORD1");
	return m;
}

static struct ouch_msg sample_order_modified(void)
{
	struct ouch_msg m = blank(OUCH_ORDER_MODIFIED, 0);

	m.u.order_modified.timestamp = TS_0930;
	strcpy(m.u.order_modified.token, "ORD1");
	m.u.order_modified.side = OUCH_SELL;
	m.u.order_modified.shares = 25;
	return m;
}

struct sample {
	const char *name;
	struct ouch_msg (*make)(void);
	int inbound;
	int len;
};

static const struct sample samples[] = {
	{ "enter", sample_enter, 1, OUCH_ENTER_ORDER_LEN },
	{ "replace", sample_replace, 1, OUCH_REPLACE_ORDER_LEN },
	{ "cancel", sample_cancel, 1, OUCH_CANCEL_ORDER_LEN },
	{ "modify", sample_modify, 1, OUCH_MODIFY_ORDER_LEN },
	{ "system_event", sample_system_event, 0, OUCH_SYSTEM_EVENT_LEN },
	{ "accepted", sample_accepted, 0, OUCH_ACCEPTED_LEN },
	{ "replaced", sample_replaced, 0, OUCH_REPLACED_LEN },
	{ "canceled", sample_canceled, 0, OUCH_CANCELED_LEN },
	{ "aiq_canceled", sample_aiq_canceled, 0, OUCH_AIQ_CANCELED_LEN },
	{ "executed", sample_executed, 0, OUCH_EXECUTED_LEN },
	{ "broken_trade", sample_broken_trade, 0, OUCH_BROKEN_TRADE_LEN },
	{ "rejected", sample_rejected, 0, OUCH_REJECTED_LEN },
	{ "cancel_pending", sample_cancel_pending, 0, OUCH_CANCEL_PENDING_LEN },
	{ "cancel_reject", sample_cancel_reject, 0, OUCH_CANCEL_REJECT_LEN },
	{ "order_modified", sample_order_modified, 0, OUCH_ORDER_MODIFIED_LEN },
};

static int encode(const struct ouch_msg *m, int inbound, uint8_t *out, size_t cap)
{
	return inbound ? ouch_encode_inbound(m, out, cap) : ouch_encode_outbound(m, out, cap);
}

static int decode(const uint8_t *buf, size_t len, int inbound, struct ouch_msg *m)
{
	return inbound ? ouch_decode_inbound(buf, len, m) : ouch_decode_outbound(buf, len, m);
}

/* --- round trips and exact bytes ------------------------------------------ */
START_TEST(round_trip_every_type)
{
	const struct sample *s = &samples[_i];
	struct ouch_msg in = s->make(), out;
	uint8_t buf[OUCH_MAX_LEN], again[OUCH_MAX_LEN];
	int n;

	n = encode(&in, s->inbound, buf, sizeof(buf));
	ck_assert_msg(n == s->len, "%s: encoded %d bytes, want %d", s->name, n, s->len);
	ck_assert_int_eq(buf[0], (uint8_t)in.type);
	memset(&out, 0xa5, sizeof(out));
	ck_assert_int_eq(decode(buf, (size_t)n, s->inbound, &out), OUCH_OK);
	ck_assert_msg(memcmp(&in, &out, sizeof(in)) == 0, "%s: decoded differs", s->name);
	ck_assert_int_eq(encode(&out, s->inbound, again, sizeof(again)), n);
	ck_assert_mem_eq(buf, again, (size_t)n);
	/* the other direction does not know this message at this length */
	ck_assert_int_lt(decode(buf, (size_t)n, !s->inbound, &out), 0);
}
END_TEST

static const uint8_t enter_bytes[OUCH_ENTER_ORDER_LEN] = {
	'O',
	'O', 'R', 'D', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', /* token */
	'B',					/* side */
	0x00, 0x00, 0x00, 0x64,			/* shares 100 */
	'A', 'A', 'P', 'L', ' ', ' ', ' ', ' ',	/* stock */
	0x00, 0x16, 0xed, 0x24,			/* price 150.2500 */
	0x00, 0x01, 0x86, 0x9f,			/* tif 99999 */
	'F', 'R', 'M', 'A',			/* firm */
	'A', 'A', 'N',				/* display, capacity, iso */
	0x00, 0x00, 0x00, 0x00,			/* min qty */
	'N', 'R',				/* cross type, customer type */
};

static const uint8_t accepted_bytes[OUCH_ACCEPTED_LEN] = {
	'A',
	0x00, 0x00, 0x1f, 0x1a, 0xce, 0xd9, 0xf0, 0x01, /* 09:30:00.000000001 */
	'O', 'R', 'D', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ',
	'B',
	0x00, 0x00, 0x00, 0x64,
	'A', 'A', 'P', 'L', ' ', ' ', ' ', ' ',
	0x00, 0x16, 0xed, 0x24,
	0x00, 0x01, 0x86, 0x9f,
	'F', 'R', 'M', 'A',
	'A',					   /* display */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, /* order ref 12 */
	'A', 'N',				   /* capacity, iso */
	0x00, 0x00, 0x00, 0x00,			   /* min qty */
	'N', 'L', ' ',				   /* cross, state, bbo weight */
};

static const uint8_t executed_bytes[OUCH_EXECUTED_LEN] = {
	'E',
	0x00, 0x00, 0x1f, 0x1a, 0xce, 0xd9, 0xf0, 0x01,
	'O', 'R', 'D', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ',
	0x00, 0x00, 0x00, 0x64,			   /* executed shares */
	0x00, 0x16, 0xed, 0x24,			   /* execution price */
	'A',					   /* liquidity */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* match */
};

static void check_exact(struct ouch_msg m, int inbound, const uint8_t *want, size_t len)
{
	uint8_t buf[OUCH_MAX_LEN];
	struct ouch_msg got;

	ck_assert_int_eq(encode(&m, inbound, buf, sizeof(buf)), (int)len);
	ck_assert_mem_eq(buf, want, len);
	ck_assert_int_eq(decode(want, len, inbound, &got), OUCH_OK);
	ck_assert_int_eq(memcmp(&got, &m, sizeof(m)), 0);
}

START_TEST(exact_bytes_enter)
{
	check_exact(sample_enter(), 1, enter_bytes, sizeof(enter_bytes));
}
END_TEST

START_TEST(exact_bytes_accepted)
{
	check_exact(sample_accepted(), 0, accepted_bytes, sizeof(accepted_bytes));
}
END_TEST

START_TEST(exact_bytes_executed)
{
	check_exact(sample_executed(), 0, executed_bytes, sizeof(executed_bytes));
}
END_TEST

START_TEST(big_endian_extremes)
{
	struct ouch_msg m = sample_executed(), got;
	uint8_t buf[OUCH_MAX_LEN];

	m.u.executed.timestamp = 0x0102030405060708ull;
	m.u.executed.shares = 0xfffffffeu;
	m.u.executed.price = OUCH_PRICE_MARKET;
	m.u.executed.match = UINT64_MAX;
	ck_assert_int_eq(ouch_encode_outbound(&m, buf, sizeof(buf)), OUCH_EXECUTED_LEN);
	ck_assert_int_eq(buf[1], 0x01);
	ck_assert_int_eq(buf[8], 0x08);
	ck_assert_int_eq(buf[23], 0xff);
	ck_assert_int_eq(buf[26], 0xfe);
	ck_assert_int_eq(buf[27], 0x7f);
	ck_assert_int_eq(buf[30], 0xff);
	ck_assert_int_eq(ouch_decode_outbound(buf, OUCH_EXECUTED_LEN, &got), OUCH_OK);
	ck_assert_uint_eq(got.u.executed.timestamp, 0x0102030405060708ull);
	ck_assert_uint_eq(got.u.executed.shares, 0xfffffffeu);
	ck_assert_uint_eq(got.u.executed.price, OUCH_PRICE_MARKET);
	ck_assert_uint_eq(got.u.executed.match, UINT64_MAX);
	ck_assert_int_eq(got.inbound, 0);
}
END_TEST

START_TEST(alpha_trimming)
{
	uint8_t buf[OUCH_ENTER_ORDER_LEN];
	struct ouch_msg m;

	memcpy(buf, enter_bytes, sizeof(buf));
	memcpy(buf + 1, " A B          ", OUCH_TOKEN_LEN); /* leading space kept */
	memcpy(buf + 20, "        ", OUCH_STOCK_LEN);	  /* all spaces: empty */
	memcpy(buf + 36, "ABCD", OUCH_FIRM_LEN);	  /* full width */
	ck_assert_int_eq(ouch_decode_inbound(buf, sizeof(buf), &m), OUCH_OK);
	ck_assert_str_eq(m.u.enter.token, " A B");
	ck_assert_str_eq(m.u.enter.stock, "");
	ck_assert_str_eq(m.u.enter.firm, "ABCD");
	ck_assert_int_eq(m.inbound, 1);

	/* a token given with trailing spaces goes out as the same bytes */
	m = sample_enter();
	strcpy(m.u.enter.token, "ORD1   ");
	{
		uint8_t out[OUCH_MAX_LEN];

		ck_assert_int_eq(ouch_encode_inbound(&m, out, sizeof(out)), OUCH_ENTER_ORDER_LEN);
		ck_assert_mem_eq(out, enter_bytes, OUCH_ENTER_ORDER_LEN);
	}
}
END_TEST

/* --- malformed input --------------------------------------------------- */
struct bad_input {
	const char *name;
	struct ouch_msg (*make)(void); /* NULL: no base message */
	uint8_t type;		       /* when make is NULL, or to override */
	int len;		       /* bytes handed to the decoder */
	int patch_at;		       /* -1: none */
	uint8_t patch;
	int want;
};

static void run_bad(const struct bad_input *b, int inbound)
{
	uint8_t buf[OUCH_MAX_LEN + 16];
	struct ouch_msg m, before;

	memset(buf, ' ', sizeof(buf));
	if (b->make) {
		struct ouch_msg src = b->make();

		ck_assert_int_gt(encode(&src, src.inbound, buf, sizeof(buf)), 0);
	}
	if (b->type)
		buf[0] = b->type;
	if (b->patch_at >= 0)
		buf[b->patch_at] = b->patch;
	memset(&m, 0x5a, sizeof(m));
	before = m;
	ck_assert_msg(decode(buf, (size_t)b->len, inbound, &m) == b->want, "%s: got %d, want %d",
		      b->name, decode(buf, (size_t)b->len, inbound, &m), b->want);
	ck_assert_msg(memcmp(&m, &before, sizeof(m)) == 0, "%s: output touched", b->name);
}

static const struct bad_input bad_inbound[] = {
	{ "empty", NULL, 'O', 0, -1, 0, OUCH_E_EMPTY },
	{ "unknown type Z", sample_enter, 'Z', 49, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "outbound Accepted", sample_accepted, 0, 66, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "type byte 0x80", sample_enter, 0x80, 49, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "type byte 0xff", sample_enter, 0xff, 49, -1, 0, OUCH_E_UNKNOWN_TYPE },
	/* Enter Order cut at every field boundary */
	{ "enter: type only", sample_enter, 0, 1, -1, 0, OUCH_E_LENGTH },
	{ "enter: to token", sample_enter, 0, 15, -1, 0, OUCH_E_LENGTH },
	{ "enter: to side", sample_enter, 0, 16, -1, 0, OUCH_E_LENGTH },
	{ "enter: to shares", sample_enter, 0, 20, -1, 0, OUCH_E_LENGTH },
	{ "enter: to stock", sample_enter, 0, 28, -1, 0, OUCH_E_LENGTH },
	{ "enter: to price", sample_enter, 0, 32, -1, 0, OUCH_E_LENGTH },
	{ "enter: to tif", sample_enter, 0, 36, -1, 0, OUCH_E_LENGTH },
	{ "enter: to firm", sample_enter, 0, 40, -1, 0, OUCH_E_LENGTH },
	{ "enter: to display", sample_enter, 0, 41, -1, 0, OUCH_E_LENGTH },
	{ "enter: to capacity", sample_enter, 0, 42, -1, 0, OUCH_E_LENGTH },
	{ "enter: to iso", sample_enter, 0, 43, -1, 0, OUCH_E_LENGTH },
	{ "enter: to min qty", sample_enter, 0, 47, -1, 0, OUCH_E_LENGTH },
	{ "enter: OUCH 4.0 (no customer type)", sample_enter, 0, 48, -1, 0, OUCH_E_LENGTH },
	{ "enter: one byte long", sample_enter, 0, 50, -1, 0, OUCH_E_LENGTH },
	{ "replace: short", sample_replace, 0, 46, -1, 0, OUCH_E_LENGTH },
	{ "replace: long", sample_replace, 0, 48, -1, 0, OUCH_E_LENGTH },
	{ "replace: Replaced's length", sample_replace, 0, 80, -1, 0, OUCH_E_LENGTH },
	{ "cancel: short", sample_cancel, 0, 18, -1, 0, OUCH_E_LENGTH },
	{ "cancel: long", sample_cancel, 0, 20, -1, 0, OUCH_E_LENGTH },
	{ "modify: short", sample_modify, 0, 19, -1, 0, OUCH_E_LENGTH },
	{ "modify: Order Modified's length", sample_modify, 0, 28, -1, 0, OUCH_E_LENGTH },
	/* unprintable alpha bytes */
	{ "enter: NUL in token", sample_enter, 0, 49, 5, 0x00, OUCH_E_FIELD },
	{ "enter: DEL in stock", sample_enter, 0, 49, 27, 0x7f, OUCH_E_FIELD },
	{ "enter: 0x80 in firm", sample_enter, 0, 49, 36, 0x80, OUCH_E_FIELD },
	{ "enter: control byte side", sample_enter, 0, 49, 15, 0x01, OUCH_E_FIELD },
	{ "enter: NUL display", sample_enter, 0, 49, 40, 0x00, OUCH_E_FIELD },
	{ "enter: NUL customer type", sample_enter, 0, 49, 48, 0x00, OUCH_E_FIELD },
	{ "replace: LF in new token", sample_replace, 0, 47, 20, '\n', OUCH_E_FIELD },
	{ "replace: 0xff iso", sample_replace, 0, 47, 42, 0xff, OUCH_E_FIELD },
	{ "cancel: TAB in token", sample_cancel, 0, 19, 1, '\t', OUCH_E_FIELD },
	{ "modify: NUL side", sample_modify, 0, 20, 15, 0x00, OUCH_E_FIELD },
};

static const struct bad_input bad_outbound[] = {
	{ "empty", NULL, 'A', 0, -1, 0, OUCH_E_EMPTY },
	{ "inbound Enter Order", sample_enter, 0, 49, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "inbound Cancel Order", sample_cancel, 0, 19, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "unknown type Q", sample_executed, 'Q', 40, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "lower-case a", sample_accepted, 'a', 66, -1, 0, OUCH_E_UNKNOWN_TYPE },
	{ "system event: short", sample_system_event, 0, 9, -1, 0, OUCH_E_LENGTH },
	{ "system event: long", sample_system_event, 0, 11, -1, 0, OUCH_E_LENGTH },
	{ "accepted: OUCH 4.1 (no BBO weight)", sample_accepted, 0, 65, -1, 0, OUCH_E_LENGTH },
	{ "accepted: long", sample_accepted, 0, 67, -1, 0, OUCH_E_LENGTH },
	{ "replaced: OUCH 4.1", sample_replaced, 0, 79, -1, 0, OUCH_E_LENGTH },
	{ "replaced: Replace Order's length", sample_replaced, 0, 47, -1, 0, OUCH_E_LENGTH },
	{ "canceled: short", sample_canceled, 0, 27, -1, 0, OUCH_E_LENGTH },
	{ "canceled: long", sample_canceled, 0, 29, -1, 0, OUCH_E_LENGTH },
	{ "aiq canceled: short", sample_aiq_canceled, 0, 36, -1, 0, OUCH_E_LENGTH },
	{ "aiq canceled: long", sample_aiq_canceled, 0, 38, -1, 0, OUCH_E_LENGTH },
	{ "executed: short", sample_executed, 0, 39, -1, 0, OUCH_E_LENGTH },
	{ "executed: long", sample_executed, 0, 41, -1, 0, OUCH_E_LENGTH },
	{ "executed: timestamp only", sample_executed, 0, 9, -1, 0, OUCH_E_LENGTH },
	{ "broken trade: short", sample_broken_trade, 0, 31, -1, 0, OUCH_E_LENGTH },
	{ "broken trade: long", sample_broken_trade, 0, 33, -1, 0, OUCH_E_LENGTH },
	{ "rejected: short", sample_rejected, 0, 23, -1, 0, OUCH_E_LENGTH },
	{ "rejected: long", sample_rejected, 0, 25, -1, 0, OUCH_E_LENGTH },
	{ "cancel pending: short", sample_cancel_pending, 0, 22, -1, 0, OUCH_E_LENGTH },
	{ "cancel reject: long", sample_cancel_reject, 0, 24, -1, 0, OUCH_E_LENGTH },
	{ "order modified: Modify Order's length", sample_order_modified, 0, 20, -1, 0,
	  OUCH_E_LENGTH },
	{ "order modified: long", sample_order_modified, 0, 29, -1, 0, OUCH_E_LENGTH },
	{ "system event: NUL code", sample_system_event, 0, 10, 9, 0x00, OUCH_E_FIELD },
	{ "accepted: NUL in token", sample_accepted, 0, 66, 9, 0x00, OUCH_E_FIELD },
	{ "accepted: DEL in stock", sample_accepted, 0, 66, 35, 0x7f, OUCH_E_FIELD },
	{ "accepted: 0x9b bbo weight", sample_accepted, 0, 66, 65, 0x9b, OUCH_E_FIELD },
	{ "replaced: ESC in previous token", sample_replaced, 0, 80, 70, 0x1b, OUCH_E_FIELD },
	{ "executed: NUL liquidity", sample_executed, 0, 40, 31, 0x00, OUCH_E_FIELD },
	{ "rejected: 0xff reason", sample_rejected, 0, 24, 23, 0xff, OUCH_E_FIELD },
	{ "canceled: CR in token", sample_canceled, 0, 28, 22, '\r', OUCH_E_FIELD },
};

START_TEST(malformed_inbound)
{
	run_bad(&bad_inbound[_i], 1);
}
END_TEST

START_TEST(malformed_outbound)
{
	run_bad(&bad_outbound[_i], 0);
}
END_TEST

START_TEST(binary_in_numeric_fields_is_fine)
{
	uint8_t buf[OUCH_ENTER_ORDER_LEN];
	struct ouch_msg m;

	memcpy(buf, enter_bytes, sizeof(buf));
	buf[16] = 0x00; /* shares */
	buf[17] = 0xff;
	buf[28] = 0x80; /* price */
	buf[43] = 0x0a; /* min qty */
	ck_assert_int_eq(ouch_decode_inbound(buf, sizeof(buf), &m), OUCH_OK);
	ck_assert_uint_eq(m.u.enter.shares, 0x00ff0064u);
	ck_assert_uint_eq(m.u.enter.price, 0x8016ed24u);
	ck_assert_uint_eq(m.u.enter.min_qty, 0x0a000000u);
}
END_TEST

/* --- encoder errors ----------------------------------------------------- */
START_TEST(encode_errors)
{
	uint8_t buf[OUCH_MAX_LEN], before[OUCH_MAX_LEN];
	struct ouch_msg m;

	memset(buf, 0xee, sizeof(buf));
	memcpy(before, buf, sizeof(buf));

	m = sample_enter();
	memset(m.u.enter.token, 'T', sizeof(m.u.enter.token)); /* 15 bytes, no NUL */
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);
	m = sample_enter();
	strcpy(m.u.enter.stock, "ABCDEFGH"); /* exactly 8: fine */
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_ENTER_ORDER_LEN);
	memcpy(buf, before, sizeof(buf));
	memset(m.u.enter.stock, 'S', sizeof(m.u.enter.stock)); /* 9 bytes */
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);
	m = sample_enter();
	memcpy(m.u.enter.firm, "FIRMX", 5); /* 5 bytes, no NUL */
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);
	m = sample_enter();
	m.u.enter.token[1] = '\x7f';
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);
	m = sample_enter();
	m.u.enter.side = '\x01';
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);
	m = sample_accepted();
	m.u.accepted.bbo_weight = (char)0xc3;
	ck_assert_int_eq(ouch_encode_outbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);
	m = sample_replaced();
	memset(m.u.replaced.previous_token, 'P', sizeof(m.u.replaced.previous_token));
	ck_assert_int_eq(ouch_encode_outbound(&m, buf, sizeof(buf)), OUCH_E_FIELD);

	/* direction and type */
	m = sample_accepted();
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_UNKNOWN_TYPE);
	m = sample_enter();
	ck_assert_int_eq(ouch_encode_outbound(&m, buf, sizeof(buf)), OUCH_E_UNKNOWN_TYPE);
	m.type = '\0';
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_UNKNOWN_TYPE);
	m.type = (char)0xcf;
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_E_UNKNOWN_TYPE);

	/* room */
	m = sample_enter();
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, OUCH_ENTER_ORDER_LEN - 1), OUCH_E_NOSPACE);
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, 0), OUCH_E_NOSPACE);
	m = sample_replaced();
	ck_assert_int_eq(ouch_encode_outbound(&m, buf, OUCH_REPLACED_LEN - 1), OUCH_E_NOSPACE);
	ck_assert_mem_eq(buf, before, sizeof(buf)); /* nothing written on error */
	ck_assert_int_eq(ouch_encode_outbound(&m, buf, OUCH_REPLACED_LEN), OUCH_REPLACED_LEN);
}
END_TEST

START_TEST(encode_nul_char_is_blank)
{
	struct ouch_msg m = sample_enter(), got;
	uint8_t buf[OUCH_MAX_LEN];

	m.u.enter.customer_type = '\0';
	ck_assert_int_eq(ouch_encode_inbound(&m, buf, sizeof(buf)), OUCH_ENTER_ORDER_LEN);
	ck_assert_int_eq(buf[48], ' ');
	ck_assert_int_eq(ouch_decode_inbound(buf, OUCH_ENTER_ORDER_LEN, &got), OUCH_OK);
	ck_assert_int_eq(got.u.enter.customer_type, OUCH_CUST_DEFAULT);
	ck_assert_int_eq(ouch_validate_enter(&got.u.enter, 1000), 0);
}
END_TEST

START_TEST(strerror_every_code)
{
	static const int codes[] = { OUCH_OK, OUCH_E_EMPTY, OUCH_E_UNKNOWN_TYPE,
				     OUCH_E_LENGTH, OUCH_E_FIELD, OUCH_E_NOSPACE };

	for (size_t i = 0; i < NELEM(codes); i++) {
		ck_assert_ptr_nonnull(ouch_strerror(codes[i]));
		ck_assert_str_ne(ouch_strerror(codes[i]), "unknown OUCH error");
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(ouch_strerror(codes[i]), ouch_strerror(codes[j]));
	}
	ck_assert_str_eq(ouch_strerror(-99), "unknown OUCH error");
	ck_assert_str_eq(ouch_strerror(7), "unknown OUCH error");
}
END_TEST

/* --- validation --------------------------------------------------------- */
#define MAXSH 10000u

struct vcase {
	const char *name;
	void (*edit)(struct ouch_enter_order *e);
	int want;
};

#define EDIT(fn, body) \
	static void fn(struct ouch_enter_order *e) { body; }
EDIT(e_none, (void)e)
EDIT(e_token_empty, e->token[0] = '\0')
EDIT(e_token_spaces, strcpy(e->token, "    "))
EDIT(e_token_ctrl, e->token[0] = '\x02')
EDIT(e_token_unterminated, memset(e->token, 'K', sizeof(e->token)))
EDIT(e_side_x, e->side = 'X')
EDIT(e_side_short, e->side = OUCH_SELL_SHORT)
EDIT(e_side_exempt, e->side = OUCH_SELL_SHORT_EXEMPT)
EDIT(e_side_nul, e->side = '\0')
EDIT(e_shares_0, e->shares = 0)
EDIT(e_shares_1, e->shares = 1)
EDIT(e_shares_max, e->shares = MAXSH)
EDIT(e_shares_over, e->shares = MAXSH + 1)
EDIT(e_price_0, e->price = 0)
EDIT(e_price_1, e->price = 1)
EDIT(e_price_max, e->price = OUCH_PRICE_MAX)
EDIT(e_price_over, e->price = OUCH_PRICE_MAX + 1)
EDIT(e_price_below_mkt, e->price = OUCH_PRICE_MARKET - 1)
EDIT(e_price_above_mkt, e->price = OUCH_PRICE_MARKET + 1)
EDIT(e_mkt_ioc, { e->price = OUCH_PRICE_MARKET; e->tif = OUCH_TIF_IOC; })
EDIT(e_mkt_day, { e->price = OUCH_PRICE_MARKET; e->tif = OUCH_TIF_SYSTEM_HOURS; })
EDIT(e_mkt_60s, { e->price = OUCH_PRICE_MARKET; e->tif = 60; })
EDIT(e_tif_0, e->tif = 0)
EDIT(e_tif_1, e->tif = 1)
EDIT(e_tif_day, e->tif = OUCH_TIF_MAX_SECONDS)
EDIT(e_tif_day_plus, e->tif = OUCH_TIF_MAX_SECONDS + 1)
EDIT(e_tif_99997, e->tif = 99997)
EDIT(e_tif_mkt_hours, e->tif = OUCH_TIF_MARKET_HOURS)
EDIT(e_tif_100000, e->tif = 100000)
EDIT(e_tif_huge, e->tif = UINT32_MAX)
EDIT(e_display_y, e->display = OUCH_DISPLAY_ANONYMOUS)
EDIT(e_display_n, e->display = OUCH_DISPLAY_NONDISPLAYED)
EDIT(e_display_p, e->display = OUCH_DISPLAY_POST_ONLY)
EDIT(e_display_m, e->display = OUCH_DISPLAY_MIDPOINT)
EDIT(e_display_i, e->display = OUCH_DISPLAY_IMBALANCE_ONLY)
EDIT(e_display_z, e->display = OUCH_DISPLAY_CHANGED_NONDISPLAYED)
EDIT(e_cap_p, e->capacity = OUCH_CAP_PRINCIPAL)
EDIT(e_cap_r, e->capacity = OUCH_CAP_RISKLESS)
EDIT(e_cap_o, e->capacity = OUCH_CAP_OTHER)
EDIT(e_cap_x, e->capacity = 'X')
EDIT(e_iso_y, e->iso = 'Y')
EDIT(e_iso_lower, e->iso = 'y')
EDIT(e_cross_open, e->cross_type = OUCH_CROSS_OPENING)
EDIT(e_cross_close, e->cross_type = OUCH_CROSS_CLOSING)
EDIT(e_cross_junk, e->cross_type = '#')
EDIT(e_cust_n, e->customer_type = OUCH_CUST_NOT_RETAIL)
EDIT(e_cust_blank, e->customer_type = OUCH_CUST_DEFAULT)
EDIT(e_cust_q, e->customer_type = 'Q')
EDIT(e_minqty_eq, e->min_qty = 100)
EDIT(e_minqty_over, e->min_qty = 101)
EDIT(e_two_bad, { e->side = 'X'; e->price = 0; }) /* the first check wins */

static const struct vcase enter_cases[] = {
	{ "valid", e_none, 0 },
	{ "token empty", e_token_empty, OUCH_REJ_INVALID_TOKEN },
	{ "token spaces", e_token_spaces, OUCH_REJ_INVALID_TOKEN },
	{ "token control byte", e_token_ctrl, OUCH_REJ_INVALID_TOKEN },
	{ "token unterminated", e_token_unterminated, OUCH_REJ_INVALID_TOKEN },
	{ "side X", e_side_x, OUCH_REJ_INVALID_SIDE },
	{ "side T", e_side_short, 0 },
	{ "side E", e_side_exempt, 0 },
	{ "side NUL", e_side_nul, OUCH_REJ_INVALID_SIDE },
	{ "shares 0", e_shares_0, OUCH_REJ_INVALID_SHARES },
	{ "shares 1", e_shares_1, 0 },
	{ "shares at max", e_shares_max, 0 },
	{ "shares over max", e_shares_over, OUCH_REJ_SHARES_EXCEED_THRESHOLD },
	{ "price 0", e_price_0, OUCH_REJ_INVALID_PRICE },
	{ "price $0.0001", e_price_1, 0 },
	{ "price max", e_price_max, 0 },
	{ "price over max", e_price_over, OUCH_REJ_INVALID_PRICE },
	{ "price just below market", e_price_below_mkt, OUCH_REJ_INVALID_PRICE },
	{ "price above market", e_price_above_mkt, OUCH_REJ_INVALID_PRICE },
	{ "market IOC", e_mkt_ioc, 0 },
	{ "market day", e_mkt_day, OUCH_REJ_INVALID_PRICE },
	{ "market 60s", e_mkt_60s, OUCH_REJ_INVALID_PRICE },
	{ "tif 0", e_tif_0, 0 },
	{ "tif 1", e_tif_1, 0 },
	{ "tif 86400", e_tif_day, 0 },
	{ "tif 86401", e_tif_day_plus, OUCH_REJ_INVALID_TIF },
	{ "tif 99997", e_tif_99997, OUCH_REJ_INVALID_TIF },
	{ "tif 99998", e_tif_mkt_hours, 0 },
	{ "tif 100000", e_tif_100000, OUCH_REJ_INVALID_TIF },
	{ "tif max", e_tif_huge, OUCH_REJ_INVALID_TIF },
	{ "display Y", e_display_y, 0 },
	{ "display N", e_display_n, 0 },
	{ "display P", e_display_p, 0 },
	{ "display M", e_display_m, OUCH_REJ_INVALID_DISPLAY },
	{ "display I", e_display_i, OUCH_REJ_INVALID_DISPLAY },
	{ "display Z", e_display_z, OUCH_REJ_INVALID_DISPLAY },
	{ "capacity P", e_cap_p, 0 },
	{ "capacity R", e_cap_r, 0 },
	{ "capacity O", e_cap_o, 0 },
	{ "capacity X", e_cap_x, OUCH_REJ_INVALID_CAPACITY },
	{ "iso Y", e_iso_y, 0 },
	{ "iso y (trade-at)", e_iso_lower, OUCH_REJ_INVALID_ISO },
	{ "cross O", e_cross_open, OUCH_REJ_CROSS_NOT_ALLOWED },
	{ "cross C", e_cross_close, OUCH_REJ_CROSS_NOT_ALLOWED },
	{ "cross #", e_cross_junk, OUCH_REJ_CROSS_NOT_ALLOWED },
	{ "customer N", e_cust_n, 0 },
	{ "customer blank", e_cust_blank, 0 },
	{ "customer Q", e_cust_q, OUCH_REJ_OTHER },
	{ "min qty = shares", e_minqty_eq, 0 },
	{ "min qty > shares", e_minqty_over, OUCH_REJ_INVALID_MIN_QTY },
	{ "side and price bad", e_two_bad, OUCH_REJ_INVALID_SIDE },
};

START_TEST(validate_enter_table)
{
	const struct vcase *c = &enter_cases[_i];
	struct ouch_msg m = sample_enter();
	int got;

	c->edit(&m.u.enter);
	got = ouch_validate_enter(&m.u.enter, MAXSH);
	ck_assert_msg(got == c->want, "%s: got '%c' (%d), want '%c' (%d)", c->name,
		      got ? got : '0', got, c->want ? c->want : '0', c->want);
}
END_TEST

START_TEST(validate_spec_share_cap)
{
	struct ouch_msg m = sample_enter();

	m.u.enter.shares = OUCH_SHARES_MAX;
	ck_assert_int_eq(ouch_validate_enter(&m.u.enter, UINT32_MAX), 0);
	m.u.enter.shares = OUCH_SHARES_MAX + 1;
	ck_assert_int_eq(ouch_validate_enter(&m.u.enter, UINT32_MAX),
			 OUCH_REJ_SHARES_EXCEED_THRESHOLD);
	m.u.enter.shares = 1;
	ck_assert_int_eq(ouch_validate_enter(&m.u.enter, 0), OUCH_REJ_SHARES_EXCEED_THRESHOLD);
}
END_TEST

struct rcase {
	const char *name;
	void (*edit)(struct ouch_replace_order *r);
	int want;
};

#define REDIT(fn, body) \
	static void fn(struct ouch_replace_order *r) { body; }
REDIT(r_none, (void)r)
REDIT(r_old_empty, strcpy(r->existing_token, " "))
REDIT(r_new_empty, r->replacement_token[0] = '\0')
REDIT(r_new_unterminated, memset(r->replacement_token, 'R', sizeof(r->replacement_token)))
REDIT(r_shares_0, r->shares = 0)
REDIT(r_shares_over, r->shares = MAXSH + 1)
REDIT(r_price_0, r->price = 0)
REDIT(r_price_over, r->price = OUCH_PRICE_MAX + 100)
REDIT(r_mkt_ioc, r->price = OUCH_PRICE_MARKET)
REDIT(r_mkt_day, { r->price = OUCH_PRICE_MARKET; r->tif = OUCH_TIF_MARKET_HOURS; })
REDIT(r_tif_bad, r->tif = 90000)
REDIT(r_display_bad, r->display = OUCH_DISPLAY_MIDPOINT_POST_ONLY)
REDIT(r_iso_bad, r->iso = ' ')
REDIT(r_minqty_eq, r->min_qty = 200)
REDIT(r_minqty_over, r->min_qty = 201)

static const struct rcase replace_cases[] = {
	{ "valid", r_none, 0 },
	{ "existing token blank", r_old_empty, OUCH_REJ_INVALID_TOKEN },
	{ "replacement token empty", r_new_empty, OUCH_REJ_INVALID_TOKEN },
	{ "replacement token unterminated", r_new_unterminated, OUCH_REJ_INVALID_TOKEN },
	{ "shares 0", r_shares_0, OUCH_REJ_INVALID_SHARES },
	{ "shares over max", r_shares_over, OUCH_REJ_SHARES_EXCEED_THRESHOLD },
	{ "price 0", r_price_0, OUCH_REJ_INVALID_PRICE },
	{ "price over max", r_price_over, OUCH_REJ_INVALID_PRICE },
	{ "market IOC", r_mkt_ioc, 0 },
	{ "market, market hours", r_mkt_day, OUCH_REJ_INVALID_PRICE },
	{ "tif 90000", r_tif_bad, OUCH_REJ_INVALID_TIF },
	{ "display W", r_display_bad, OUCH_REJ_INVALID_DISPLAY },
	{ "iso blank", r_iso_bad, OUCH_REJ_INVALID_ISO },
	{ "min qty = shares", r_minqty_eq, 0 },
	{ "min qty > shares", r_minqty_over, OUCH_REJ_INVALID_MIN_QTY },
};

START_TEST(validate_replace_table)
{
	const struct rcase *c = &replace_cases[_i];
	struct ouch_msg m = sample_replace();
	int got;

	c->edit(&m.u.replace);
	got = ouch_validate_replace(&m.u.replace, MAXSH);
	ck_assert_msg(got == c->want, "%s: got '%c' (%d), want '%c' (%d)", c->name,
		      got ? got : '0', got, c->want ? c->want : '0', c->want);
}
END_TEST

/* Every reason the validators can give is reached by some case above. */
START_TEST(validate_reaches_every_reason)
{
	static const int reasons[] = {
		OUCH_REJ_INVALID_TOKEN, OUCH_REJ_INVALID_SIDE, OUCH_REJ_INVALID_SHARES,
		OUCH_REJ_SHARES_EXCEED_THRESHOLD, OUCH_REJ_INVALID_PRICE, OUCH_REJ_INVALID_TIF,
		OUCH_REJ_INVALID_DISPLAY, OUCH_REJ_INVALID_CAPACITY, OUCH_REJ_INVALID_ISO,
		OUCH_REJ_CROSS_NOT_ALLOWED, OUCH_REJ_OTHER, OUCH_REJ_INVALID_MIN_QTY,
	};

	for (size_t i = 0; i < NELEM(reasons); i++) {
		int found = 0;

		for (size_t k = 0; k < NELEM(enter_cases); k++)
			found |= enter_cases[k].want == reasons[i];
		ck_assert_msg(found, "reason '%c' never reached", reasons[i]);
	}
}
END_TEST

START_TEST(reason_text)
{
	/* OUCH 4.2's list, then lockstep's own */
	static const char rej[] = "THZSDCLMRXNOWabcdefghijklmn" "stuvwxyp";
	static const char cxl[] = "UITSDQZCKHXEFG";
	static const char brk[] = "ECSX";

	for (const char *p = rej; *p; p++)
		ck_assert_msg(strcmp(ouch_reject_reason_str(*p), "unknown") != 0, "reject %c", *p);
	for (const char *p = cxl; *p; p++)
		ck_assert_msg(strcmp(ouch_cancel_reason_str(*p), "unknown") != 0, "cancel %c", *p);
	for (const char *p = brk; *p; p++)
		ck_assert_str_ne(ouch_broken_reason_str(*p), "unknown");
	/* lockstep's own codes stay clear of the spec's */
	for (const char *p = "stuvwxyp"; *p; p++)
		ck_assert_ptr_null(memchr(rej, *p, sizeof(rej) - 1 - 8));
	ck_assert_str_eq(ouch_reject_reason_str(OUCH_REJ_INVALID_PRICE), "invalid price");
	ck_assert_str_eq(ouch_reject_reason_str('a'), "reject all enabled");
	ck_assert_str_eq(ouch_reject_reason_str('?'), "unknown");
	ck_assert_str_eq(ouch_reject_reason_str('\0'), "unknown");
	ck_assert_str_eq(ouch_cancel_reason_str(OUCH_CXL_USER), "user requested");
	ck_assert_str_eq(ouch_cancel_reason_str('A'), "unknown");
	ck_assert_str_eq(ouch_broken_reason_str('Z'), "unknown");
	ck_assert_int_eq(OUCH_REJ_SUB_PENNY_NOT_ALLOWED, OUCH_REJ_INVALID_PRICE);
}
END_TEST

/* --- the tick rule ------------------------------------------------------ */
START_TEST(tick_rule_edges)
{
	ck_assert_int_eq(ouch_price_on_tick(1), 1);	      /* $0.0001 */
	ck_assert_int_eq(ouch_price_on_tick(9999), 1);	      /* $0.9999 */
	ck_assert_int_eq(ouch_price_on_tick(10000), 1);	      /* $1.00 */
	ck_assert_int_eq(ouch_price_on_tick(10001), 0);	      /* $1.0001 */
	ck_assert_int_eq(ouch_price_on_tick(10050), 0);	      /* $1.005 */
	ck_assert_int_eq(ouch_price_on_tick(10099), 0);
	ck_assert_int_eq(ouch_price_on_tick(10100), 1);	      /* $1.01 */
	ck_assert_int_eq(ouch_price_on_tick(1502500), 1);     /* $150.25 */
	ck_assert_int_eq(ouch_price_on_tick(1502501), 0);
	ck_assert_int_eq(ouch_price_on_tick(OUCH_PRICE_MAX), 1);
	ck_assert_int_eq(ouch_price_on_tick(OUCH_PRICE_MARKET), 1);
	ck_assert_int_eq(ouch_price_on_tick(OUCH_PRICE_MARKET - 1), 0);
}
END_TEST

/* --- formatting --------------------------------------------------------- */
static void check_format(struct ouch_msg m, const char *want)
{
	char line[256];
	int n;

	memset(line, 'x', sizeof(line));
	n = ouch_format(&m, line, sizeof(line));
	ck_assert_str_eq(line, want);
	ck_assert_int_eq(n, (int)strlen(want));
}

START_TEST(format_outbound)
{
	struct ouch_msg m;

	check_format(sample_accepted(),
		     "09:30:00.000000001 Accepted token=ORD1 B 100 AAPL @ 150.2500 tif=99999 "
		     "firm=FRMA display=A ref=12 state=L cap=A iso=N minqty=0 cross=N");
	check_format(sample_executed(),
		     "09:30:00.000000001 Executed token=ORD1 100 @ 150.2500 liq=A match=7");
	check_format(sample_rejected(),
		     "09:30:00.000000001 Rejected token=ORD9 reason=X (invalid price)");
	check_format(sample_canceled(),
		     "09:30:00.000000010 Canceled token=ORD1 dec=50 reason=U (user requested)");
	check_format(sample_system_event(), "04:00:00.000000000 SystemEvent code=S (start of day)");
	check_format(sample_replaced(),
		     "09:30:00.000000006 Replaced token=ORD2 prev=ORD1 S 300 MSFT @ 310.5000 "
		     "tif=60 firm=FRMB display=P ref=72623859790382856 state=D cap=P iso=Y "
		     "minqty=10 cross=N bbo=2");
	check_format(sample_aiq_canceled(),
		     "09:30:00.000000001 AIQCanceled token=ORD3 dec=40 reason=Q "
		     "(self-match prevention) prevented=30 @ 10.0000 liq=R");
	check_format(sample_broken_trade(),
		     "09:30:00.000000001 BrokenTrade token=ORD1 match=7 reason=E (erroneous)");
	check_format(sample_cancel_pending(), "09:30:00.000000001 CancelPending token=ORD1");
	check_format(sample_cancel_reject(), "09:30:00.000000001 CancelReject token=ORD1");
	check_format(sample_order_modified(), "09:30:00.000000001 OrderModified token=ORD1 S 25");

	m = sample_executed();
	m.u.executed.timestamp = 86399999999999ull;
	m.u.executed.price = OUCH_PRICE_MARKET;
	check_format(m, "23:59:59.999999999 Executed token=ORD1 100 @ MKT liq=A match=7");
	m = sample_rejected();
	m.u.rejected.reason = '!';
	check_format(m, "09:30:00.000000001 Rejected token=ORD9 reason=! (unknown)");
}
END_TEST

START_TEST(format_inbound)
{
	struct ouch_msg m;

	check_format(sample_enter(), "Enter token=ORD1 B 100 AAPL @ 150.2500 tif=99999 firm=FRMA "
				     "display=A cap=A iso=N minqty=0 cross=N cust=R");
	check_format(sample_replace(), "Replace token=ORD1 new=ORD2-REPLACE14 200 @ 150.2600 "
				       "tif=0 display=N iso=Y minqty=100");
	check_format(sample_cancel(), "Cancel token=ORD1 shares=0");
	check_format(sample_modify(), "Modify token=ORD1 T 50");
	/* 'U' and 'M' are told apart by the inbound flag; other types need none */
	{
		char line[256];

		m = sample_modify();
		m.inbound = 0; /* read as Order Modified (its union member) */
		ouch_format(&m, line, sizeof(line));
		ck_assert_msg(strstr(line, " OrderModified token=") != NULL, "%s", line);
		m = sample_replace();
		m.inbound = 0; /* read as Replaced */
		ouch_format(&m, line, sizeof(line));
		ck_assert_msg(strstr(line, " Replaced token=") != NULL, "%s", line);
	}
	m = sample_enter();
	m.inbound = 0;
	check_format(m, "Enter token=ORD1 B 100 AAPL @ 150.2500 tif=99999 firm=FRMA "
			"display=A cap=A iso=N minqty=0 cross=N cust=R");
	m = blank('?', 0);
	check_format(m, "Unknown type=0x3f");
}
END_TEST

START_TEST(format_decoded_and_truncated)
{
	struct ouch_msg m;
	char line[16];
	int n;

	ck_assert_int_eq(ouch_decode_outbound(executed_bytes, sizeof(executed_bytes), &m), OUCH_OK);
	n = ouch_format(&m, line, sizeof(line));
	ck_assert_int_eq(n, 15);
	ck_assert_str_eq(line, "09:30:00.000000");

	memset(line, 'x', sizeof(line));
	ck_assert_int_eq(ouch_format(&m, line, 1), 0);
	ck_assert_int_eq(line[0], '\0');
	ck_assert_int_eq(line[1], 'x');
	memset(line, 'x', sizeof(line));
	ck_assert_int_eq(ouch_format(&m, line, 0), 0);
	ck_assert_int_eq(line[0], 'x');

	/* a hand-made struct without NULs is read only within its arrays */
	m = sample_executed();
	memset(m.u.executed.token, 'Q', sizeof(m.u.executed.token));
	m.u.executed.liquidity = '\x01';
	{
		char big[128];

		ouch_format(&m, big, sizeof(big));
		ck_assert_str_eq(big, "09:30:00.000000001 Executed token=QQQQQQQQQQQQQQ 100 @ "
				      "150.2500 liq=? match=7");
	}
}
END_TEST

/* --- the straight-line outbound encoders against the table ------------------ */

/* Encodes m both ways, into cap bytes of two larger buffers filled alike, and
 * asserts the same return and the same bytes in the whole buffers (so also
 * nothing written on error or past cap). Returns what both returned. */
static int encode_both(const struct ouch_msg *m, size_t cap)
{
	uint8_t fast[OUCH_MAX_LEN + 16], table[OUCH_MAX_LEN + 16];
	int rf, rt;

	memset(fast, 0xa5, sizeof(fast));
	memset(table, 0xa5, sizeof(table));
	rf = ouch_encode_outbound(m, fast, cap);
	rt = ouch_encode_outbound_table(m, table, cap);
	/* ck_assert marks a point (a write to the runner) per call: too slow
	 * for a million calls, so only a failure reaches Check */
	if (rf != rt)
		ck_abort_msg("type 0x%02x cap %zu: %d, the table %d", (unsigned)(uint8_t)m->type,
			     cap, rf, rt);
	if (memcmp(fast, table, sizeof(fast)) != 0)
		ck_abort_msg("type 0x%02x cap %zu: bytes differ", (unsigned)(uint8_t)m->type, cap);
	return rf;
}

/* Each outbound sample with each byte of its union set to each value (a NUL
 * shortens a string, anything else may lengthen or spoil it), and with
 * every cap from 0 up. */
START_TEST(fast_encoders_every_byte_everywhere)
{
	const struct sample *sm = &samples[_i];
	struct ouch_msg m = sm->make();

	if (sm->inbound)
		return;
	ck_assert_int_eq(encode_both(&m, OUCH_MAX_LEN), sm->len);
	for (size_t cap = 0; cap <= OUCH_MAX_LEN; cap++)
		encode_both(&m, cap);
	for (size_t off = offsetof(struct ouch_msg, u); off < sizeof(m); off++)
		for (unsigned v = 0; v < 256; v++) {
			struct ouch_msg x = m;

			((uint8_t *)&x)[off] = (uint8_t)v;
			encode_both(&x, OUCH_MAX_LEN);
		}
}
END_TEST

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A byte of a random struct: a NUL one time in nul_in (so strings end at
 * every length, or not at all), one outside 0x20-0x7E one time in bad_in
 * (never when 0; the edges of the range most often), else printable. */
static uint8_t draw_byte(uint64_t *s, unsigned nul_in, unsigned bad_in)
{
	static const uint8_t edges[] = { 0x01, 0x09, 0x1f, 0x7f, 0x80, 0x9f, 0xa0, 0xff };
	uint64_t r = splitmix(s);

	if (r % nul_in == 0)
		return 0;
	r /= nul_in;
	if (bad_in && r % bad_in == 0)
		return r & 0x100 ? edges[(r >> 9) % NELEM(edges)] : (uint8_t)(0x80 | (r >> 9));
	return (uint8_t)(0x20 + (r >> 9) % 95);
}

/* Every outbound type, and type bytes that are none (the table's error). */
static const char encode_types[] = {
	OUCH_SYSTEM_EVENT, OUCH_ACCEPTED, OUCH_REPLACED, OUCH_CANCELED, OUCH_AIQ_CANCELED,
	OUCH_EXECUTED, OUCH_BROKEN_TRADE, OUCH_REJECTED, OUCH_CANCEL_PENDING, OUCH_CANCEL_REJECT,
	OUCH_ORDER_MODIFIED, OUCH_ENTER_ORDER, OUCH_CANCEL_ORDER, '\0', (char)0xc1,
};

/* A deterministic stream of random structs of every type (any byte anywhere,
 * strings of every length, a small cap now and then): the two paths agree
 * on each, a success decodes, and both successes and field errors are
 * common for every outbound type. */
START_TEST(fast_encoders_random_stream)
{
	static const unsigned nul_in[] = { 2, 4, 8, 16 }, bad_in[] = { 0, 64, 512 };
	unsigned ok[NELEM(encode_types)] = { 0 }, field[NELEM(encode_types)] = { 0 };
	uint64_t seed = 14;

	for (unsigned i = 0; i < 300000; i++) {
		unsigned t = i % NELEM(encode_types), mode = i / NELEM(encode_types);
		uint64_t r = splitmix(&seed);
		size_t cap = r % 8 ? OUCH_MAX_LEN : (r >> 8) % (OUCH_MAX_LEN + 1);
		struct ouch_msg m, back;
		int rc;

		for (size_t k = 0; k < sizeof(m); k++)
			((uint8_t *)&m)[k] = draw_byte(&seed, nul_in[mode % 4], bad_in[mode / 4 % 3]);
		m.type = encode_types[t];
		rc = encode_both(&m, cap);
		if (rc > 0) {
			uint8_t out[OUCH_MAX_LEN];

			if (ouch_encode_outbound(&m, out, sizeof(out)) != rc ||
			    ouch_decode_outbound(out, (size_t)rc, &back) != OUCH_OK)
				ck_abort_msg("type %c: encoded, does not decode", m.type);
			ok[t]++;
		}
		field[t] += rc == OUCH_E_FIELD;
	}
	for (unsigned t = 0; t < 11; t++) /* the outbound ones (System Event
					     * has one char field to spoil) */
		ck_assert_msg(ok[t] > 1000 && field[t] > 50, "type %c: %u encoded, %u refused",
			      encode_types[t], ok[t], field[t]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ouch");
	TCase *codec = tcase_create("codec");
	TCase *bad = tcase_create("malformed");
	TCase *valid = tcase_create("validate");
	TCase *fmt = tcase_create("format");

	tcase_add_loop_test(codec, round_trip_every_type, 0, (int)NELEM(samples));
	tcase_add_test(codec, exact_bytes_enter);
	tcase_add_test(codec, exact_bytes_accepted);
	tcase_add_test(codec, exact_bytes_executed);
	tcase_add_test(codec, big_endian_extremes);
	tcase_add_test(codec, alpha_trimming);
	tcase_add_test(codec, encode_errors);
	tcase_add_test(codec, encode_nul_char_is_blank);
	tcase_add_test(codec, strerror_every_code);
	tcase_add_loop_test(codec, fast_encoders_every_byte_everywhere, 0, (int)NELEM(samples));
	tcase_add_test(codec, fast_encoders_random_stream);
	suite_add_tcase(s, codec);

	tcase_add_loop_test(bad, malformed_inbound, 0, (int)NELEM(bad_inbound));
	tcase_add_loop_test(bad, malformed_outbound, 0, (int)NELEM(bad_outbound));
	tcase_add_test(bad, binary_in_numeric_fields_is_fine);
	suite_add_tcase(s, bad);

	tcase_add_loop_test(valid, validate_enter_table, 0, (int)NELEM(enter_cases));
	tcase_add_loop_test(valid, validate_replace_table, 0, (int)NELEM(replace_cases));
	tcase_add_test(valid, validate_spec_share_cap);
	tcase_add_test(valid, validate_reaches_every_reason);
	tcase_add_test(valid, reason_text);
	tcase_add_test(valid, tick_rule_edges);
	suite_add_tcase(s, valid);

	tcase_add_test(fmt, format_outbound);
	tcase_add_test(fmt, format_inbound);
	tcase_add_test(fmt, format_decoded_and_truncated);
	suite_add_tcase(s, fmt);

	return testutil_run(s, 0);
}
