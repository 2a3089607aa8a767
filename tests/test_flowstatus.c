/* The flow-control status message (common/flowstatus.h): its bytes, the
 * round trip, and what the decoder refuses. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "flowstatus.h"
#include "testutil.h"

START_TEST(round_trip)
{
	struct flow_status st = { .applied = 0x0102030405060708ull, .window = 4096,
				  .partition = 513 }, out;
	uint8_t b[FLOW_STATUS_LEN];

	strcpy(st.name, "matcher-1");
	ck_assert_uint_eq(flow_status_encode(b, &st), FLOW_STATUS_LEN);
	ck_assert_mem_eq(b, "LSFS\1\0\2\1\1\2\3\4\5\6\7\10", 16);
	ck_assert_mem_eq(b + 24, "matcher-1\0\0\0\0\0\0\0", 16);
	ck_assert(flow_status_is(b, sizeof(b)));
	ck_assert_int_eq(flow_status_decode(b, sizeof(b), &out), 0);
	ck_assert_uint_eq(out.applied, st.applied);
	ck_assert_uint_eq(out.window, 4096);
	ck_assert_uint_eq(out.partition, 513);
	ck_assert_str_eq(out.name, "matcher-1");
	/* a 16-byte name fills the field; a longer one is cut */
	strcpy(st.name, "ABCDEFGHIJKLMNOP");
	flow_status_encode(b, &st);
	ck_assert_int_eq(flow_status_decode(b, sizeof(b), &out), 0);
	ck_assert_str_eq(out.name, "ABCDEFGHIJKLMNOP");
}
END_TEST

START_TEST(refused)
{
	struct flow_status st = { .applied = 7 }, out;
	uint8_t b[FLOW_STATUS_LEN + 1], c[FLOW_STATUS_LEN];

	strcpy(st.name, "m");
	flow_status_encode(b, &st);
	/* length: a MoldUDP64 request is 20 bytes; one byte more or less */
	ck_assert(!flow_status_is(b, 20));
	ck_assert_int_eq(flow_status_decode(b, FLOW_STATUS_LEN - 1, &out), -EBADMSG);
	ck_assert_int_eq(flow_status_decode(b, FLOW_STATUS_LEN + 1, &out), -EBADMSG);
	memcpy(c, b, sizeof(c));
	c[0] = 'X'; /* magic */
	ck_assert(!flow_status_is(c, sizeof(c)));
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EBADMSG);
	memcpy(c, b, sizeof(c));
	c[4] = 2; /* version */
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EPROTO);
	memcpy(c, b, sizeof(c));
	c[5] = 1; /* flags */
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EBADMSG);
	memcpy(c, b, sizeof(c));
	c[24] = 0; /* an empty name */
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EBADMSG);
	memcpy(c, b, sizeof(c));
	c[30] = 'x'; /* a byte after the padding began */
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EBADMSG);
	memcpy(c, b, sizeof(c));
	c[24] = ' '; /* not printable without a blank */
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EBADMSG);
}
END_TEST

/* The cost per event rises to a larger sample at once and falls slowly;
 * the window is 3/4 of the buffer at that cost. */
START_TEST(cost)
{
	struct flow_cost c = { 0 };

	ck_assert_uint_eq(flow_cost_window(&c, 4352 * 4), 3); /* the default cost */
	flow_cost_sample(&c, 0, 5); /* an empty queue: no news */
	flow_cost_sample(&c, 2304, 0); /* no events: no news */
	ck_assert_uint_eq(c.samples, 0);
	flow_cost_sample(&c, 2304 * 10, 100); /* 10 datagrams of 10 events */
	ck_assert_uint_eq(c.per_event, 231); /* rounded up */
	flow_cost_sample(&c, 2304 * 4, 4); /* one event a datagram: at once */
	ck_assert_uint_eq(c.per_event, 2304);
	ck_assert_uint_eq(flow_cost_window(&c, 2304 * 400), 300);
	for (int i = 0; i < 64; i++)
		flow_cost_sample(&c, 832, 1);
	ck_assert_uint_lt(c.per_event, 2304); /* falls */
	ck_assert_uint_gt(c.per_event, 1200); /* but slowly */
	for (int i = 0; i < 2000; i++)
		flow_cost_sample(&c, 832, 1);
	ck_assert_uint_eq(c.per_event, 832);
	ck_assert_uint_eq(flow_cost_window(&c, 100), 1); /* never 0 */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("flowstatus");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, cost);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
