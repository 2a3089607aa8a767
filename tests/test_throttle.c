/* The client edge's pure parts (gateway/throttle.h): the token bucket,
 * the bounded queue, the command size check against the configured
 * datagram; and the answer the codec finds for a malformed inbound OUCH
 * message (ouch_inbound_bad_field). */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "auth.h"
#include "moldudp64.h"
#include "ouch.h"
#include "throttle.h"
#include "testutil.h"

START_TEST(bucket)
{
	struct throttle t;
	int n = 0;

	throttle_init(&t, 1000, 10, 100.0); /* 1,000 a second, a burst of 10 */
	while (throttle_take(&t, 100.0))
		n++;
	ck_assert_int_eq(n, 10); /* the burst, then none */
	ck_assert(!throttle_take(&t, 100.0));
	ck_assert(throttle_wait(&t, 100.0) > 0.0009 && throttle_wait(&t, 100.0) <= 0.001);
	ck_assert(!throttle_take(&t, 100.0005)); /* half a token */
	ck_assert(throttle_take(&t, 100.001)); /* a whole one */
	ck_assert(!throttle_take(&t, 100.001));
	/* a second: 1,000 tokens, but never more than the burst */
	for (n = 0; throttle_take(&t, 101.001); n++)
		;
	ck_assert_int_eq(n, 10);
	/* time that goes backwards adds nothing */
	ck_assert(!throttle_take(&t, 50.0));
	ck_assert(!throttle_take(&t, 101.001));
	ck_assert(throttle_wait(&t, 200.0) == 0);
}
END_TEST

START_TEST(bucket_rate)
{
	struct throttle t;
	uint64_t taken = 0;

	/* a flood twice the rate for 2 s, one try every 50 us: the burst and
	 * the rate get through, to the token */
	throttle_init(&t, 10000, 100, 0.0);
	for (int i = 0; i < 40000; i++)
		taken += (uint64_t)throttle_take(&t, i * 50e-6);
	ck_assert_uint_ge(taken, 100 + 19999 - 1);
	ck_assert_uint_le(taken, 100 + 20000);
	/* rate 0: off */
	throttle_init(&t, 0, 1, 0.0);
	for (int i = 0; i < 100000; i++)
		ck_assert(throttle_take(&t, 0.0));
	ck_assert(throttle_wait(&t, 0.0) == 0);
}
END_TEST

START_TEST(queue)
{
	struct throttle_queue q;
	uint8_t m[THROTTLE_MSG_MAX + 1];
	const uint8_t *p;
	size_t len;

	ck_assert_int_eq(throttle_queue_init(&q, 3), 0);
	ck_assert_ptr_null(throttle_queue_peek(&q, &len));
	for (int round = 0; round < 5; round++) { /* wraps around */
		for (uint8_t i = 0; i < 3; i++) {
			memset(m, 'a' + i, sizeof(m));
			ck_assert_int_eq(throttle_queue_push(&q, m, 10u + i), 0);
		}
		ck_assert_int_eq(throttle_queue_push(&q, m, 1), -ENOSPC);
		for (uint8_t i = 0; i < 3; i++) {
			p = throttle_queue_peek(&q, &len);
			ck_assert_ptr_nonnull(p);
			ck_assert_uint_eq(len, 10u + i);
			ck_assert_int_eq(p[0], 'a' + i);
			ck_assert_int_eq(p[len - 1], 'a' + i);
			throttle_queue_pop(&q);
		}
		ck_assert_ptr_null(throttle_queue_peek(&q, &len));
		throttle_queue_pop(&q); /* empty: nothing */
		ck_assert_uint_eq(q.n, 0);
	}
	ck_assert_int_eq(throttle_queue_push(&q, m, THROTTLE_MSG_MAX + 1), -ENOSPC);
	ck_assert_int_eq(throttle_queue_push(&q, m, OUCH_ENTER_ORDER_LEN), 0);
	throttle_queue_fini(&q);
	throttle_queue_fini(&q); /* a zeroed queue */
	ck_assert_int_eq(throttle_queue_init(&q, 0), 0); /* holds nothing */
	ck_assert_int_eq(throttle_queue_push(&q, m, 1), -ENOSPC);
	throttle_queue_fini(&q);
}
END_TEST

START_TEST(cmd_size)
{
	size_t big = throttle_max_ouch_command(), room;

	/* the header, a block's length and the trailer come off the datagram */
	ck_assert_uint_eq(throttle_cmd_room(1472, 0), 1472 - MOLD_HEADER_LEN - 2);
	ck_assert_uint_eq(throttle_cmd_room(1472, AUTH_TRAILER_LEN),
			  1472 - MOLD_HEADER_LEN - 2 - AUTH_TRAILER_LEN);
	ck_assert_uint_eq(throttle_cmd_room(10, AUTH_TRAILER_LEN), 0);
	/* an Enter Order's command, widest, is more than the message, and
	 * fits the default datagram with room to spare */
	ck_assert_uint_gt(big, OUCH_ENTER_ORDER_LEN);
	ck_assert_uint_lt(big, 128);
	ck_assert(throttle_cmd_fits(big, throttle_cmd_room(1472, AUTH_TRAILER_LEN)));
	/* the boundary: the smallest datagram that holds it, and one less */
	room = throttle_cmd_room(big + MOLD_HEADER_LEN + 2 + AUTH_TRAILER_LEN, AUTH_TRAILER_LEN);
	ck_assert(throttle_cmd_fits(big, room));
	ck_assert(!throttle_cmd_fits(big + 1, room));
	room = throttle_cmd_room(big + MOLD_HEADER_LEN + 2 + AUTH_TRAILER_LEN - 1, AUTH_TRAILER_LEN);
	ck_assert(!throttle_cmd_fits(big, room));
	ck_assert(throttle_cmd_fits(0, 0));
}
END_TEST

/* A valid Enter Order on the wire. */
static void enter_bytes(uint8_t out[OUCH_ENTER_ORDER_LEN])
{
	struct ouch_msg m = { .type = OUCH_ENTER_ORDER, .inbound = 1 };
	struct ouch_enter_order *e = &m.u.enter;

	strcpy(e->token, "TOK1");
	e->side = 'B';
	e->shares = 100;
	strcpy(e->stock, "AAPL");
	e->price = 1500000;
	e->tif = 99999;
	strcpy(e->firm, "FRM1");
	e->display = 'A';
	e->capacity = 'A';
	e->iso = 'N';
	e->cross_type = 'N';
	e->customer_type = 'R';
	ck_assert_int_eq(ouch_encode_inbound(&m, out, OUCH_ENTER_ORDER_LEN), OUCH_ENTER_ORDER_LEN);
}

START_TEST(malformed)
{
	static const struct {
		unsigned at;
		char reason;
	} fields[] = {
		{ 1, 'x' }, { 14, 'x' }, { 15, 's' }, { 20, 'S' }, { 36, 'L' }, { 40, 'D' },
		{ 41, 'u' }, { 42, 'y' }, { 47, 'R' }, { 48, 'O' },
	};
	uint8_t b[OUCH_ENTER_ORDER_LEN];
	char reason = 0, tok[OUCH_TOKEN_LEN + 1];

	enter_bytes(b);
	ck_assert_int_eq(ouch_inbound_bad_field(b, sizeof(b), &reason, tok), OUCH_E_FIELD);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		enter_bytes(b);
		b[fields[i].at] = 0x01;
		reason = 0;
		ck_assert_int_eq(ouch_inbound_bad_field(b, sizeof(b), &reason, tok), OUCH_OK);
		ck_assert_int_eq(reason, fields[i].reason);
		ck_assert_str_eq(tok, fields[i].at == 1 ? "?OK1" : fields[i].at == 14 ? "TOK1         ?"
											: "TOK1");
	}
	/* two bad fields: the first one's reason */
	enter_bytes(b);
	b[40] = 0x7f;
	b[15] = 0x80;
	ck_assert_int_eq(ouch_inbound_bad_field(b, sizeof(b), &reason, tok), OUCH_OK);
	ck_assert_int_eq(reason, 's');
	/* a price is a number: never unprintable */
	enter_bytes(b);
	b[28] = 0x01;
	ck_assert_int_eq(ouch_inbound_bad_field(b, sizeof(b), &reason, tok), OUCH_E_FIELD);
	/* no answer fits a wrong length or an unknown type */
	enter_bytes(b);
	b[1] = 0x01;
	ck_assert_int_eq(ouch_inbound_bad_field(b, sizeof(b) - 1, &reason, tok), OUCH_E_LENGTH);
	b[0] = 'Q';
	ck_assert_int_eq(ouch_inbound_bad_field(b, sizeof(b), &reason, tok), OUCH_E_UNKNOWN_TYPE);
	ck_assert_int_eq(ouch_inbound_bad_field(b, 0, &reason, tok), OUCH_E_EMPTY);
}
END_TEST

START_TEST(malformed_others)
{
	uint8_t r[OUCH_REPLACE_ORDER_LEN], c[OUCH_CANCEL_ORDER_LEN], m[OUCH_MODIFY_ORDER_LEN];
	char reason = 0, tok[OUCH_TOKEN_LEN + 1];

	/* Replace: the answer names the replacement token */
	memset(r, ' ', sizeof(r));
	r[0] = 'U';
	memcpy(r + 1, "OLD", 3);
	memcpy(r + 15, "NEW", 3);
	memset(r + 29, 0, 12); /* shares, price, tif */
	memset(r + 43, 0, 4); /* min qty */
	r[41] = 0x02; /* display */
	ck_assert_int_eq(ouch_inbound_bad_field(r, sizeof(r), &reason, tok), OUCH_OK);
	ck_assert_int_eq(reason, 'D');
	ck_assert_str_eq(tok, "NEW");
	r[41] = 'A';
	r[42] = 0x02; /* iso */
	ck_assert_int_eq(ouch_inbound_bad_field(r, sizeof(r), &reason, tok), OUCH_OK);
	ck_assert_int_eq(reason, 'y');
	r[2] = 0x02; /* the existing token */
	ck_assert_int_eq(ouch_inbound_bad_field(r, sizeof(r), &reason, tok), OUCH_OK);
	ck_assert_int_eq(reason, 'x');
	ck_assert_str_eq(tok, "NEW");
	/* Cancel and Modify: their token, sanitised */
	memset(c, ' ', sizeof(c));
	c[0] = 'X';
	memcpy(c + 1, "C\x01Z", 3);
	memset(c + 15, 0, 4);
	ck_assert_int_eq(ouch_inbound_bad_field(c, sizeof(c), &reason, tok), OUCH_OK);
	ck_assert_int_eq(reason, 'x');
	ck_assert_str_eq(tok, "C?Z");
	memset(m, ' ', sizeof(m));
	m[0] = 'M';
	memcpy(m + 1, "MOD", 3);
	m[15] = 0x03;
	memset(m + 16, 0, 4);
	ck_assert_int_eq(ouch_inbound_bad_field(m, sizeof(m), &reason, tok), OUCH_OK);
	ck_assert_int_eq(reason, 's');
	ck_assert_str_eq(tok, "MOD");
	ck_assert_str_eq(ouch_reject_reason_str(OUCH_REJ_THROTTLED), "message rate exceeded");
	ck_assert_str_eq(ouch_reject_reason_str(OUCH_REJ_TOO_LARGE), "command too large");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("throttle");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, bucket);
	tcase_add_test(tc, bucket_rate);
	tcase_add_test(tc, queue);
	tcase_add_test(tc, cmd_size);
	tcase_add_test(tc, malformed);
	tcase_add_test(tc, malformed_others);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
