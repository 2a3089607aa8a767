/* Flow control: the status message (common/flowstatus.h): its bytes, the
 * round trip, and what the decoder refuses; the cost per event; and the
 * sequencer's table of receivers (sequencer/flowtable.h): who counts in
 * the publisher limit, through pauses, rejoins and expiry. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "flowstatus.h"
#include "flowtable.h"
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
	ck_assert_uint_eq(out.flags, 0);
	st.flags = FLOW_STATUS_PAUSING; /* a planned pause */
	flow_status_encode(b, &st);
	ck_assert_uint_eq(b[5], 1);
	ck_assert_int_eq(flow_status_decode(b, sizeof(b), &out), 0);
	ck_assert_uint_eq(out.flags, FLOW_STATUS_PAUSING);
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
	c[5] = 2; /* a flag this version does not know */
	ck_assert_int_eq(flow_status_decode(c, sizeof(c), &out), -EBADMSG);
	c[5] = 0x81;
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


/* --- the sequencer's table ---------------------------------------------- */

static struct sockaddr_in addr_of(int k)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(9000 + k)) };

	a.sin_addr.s_addr = htonl(0x7f000001);
	return a;
}

/* A status from receiver k (named m<k>) of partition p; its change bits. */
static unsigned hear(struct flow_table *t, int k, uint16_t p, uint64_t applied, uint8_t flags,
		     uint64_t now, uint64_t published)
{
	struct flow_status st = { .applied = applied, .window = 0, .partition = p,
				  .flags = flags };
	struct sockaddr_in a = addr_of(k);
	unsigned changes;

	snprintf(st.name, sizeof(st.name), "m%d", k);
	ck_assert_ptr_nonnull(flow_table_status(t, &st, &a, now, published, &changes));
	return changes;
}

/* Two replicas of a partition: one announces a pause (a snapshot) and the
 * tape runs on at the other's pace, bounded only by the paused one's
 * buffer (4/3 of its window); back behind, it is not waited for until its
 * window reaches what the tape carried. */
START_TEST(table_pause)
{
	static struct flow_table t = { .window = 1000, .catchup_ns = 1000 };

	ck_assert_uint_eq(hear(&t, 1, 0, 100, 0, 10, 100), FLOW_JOINED | FLOW_IN_STEP);
	ck_assert_uint_eq(hear(&t, 2, 0, 100, 0, 10, 100), FLOW_JOINED | FLOW_IN_STEP);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1100);
	ck_assert_uint_eq(hear(&t, 2, 0, 150, FLOW_STATUS_PAUSING, 20, 1100), FLOW_PAUSED);
	ck_assert_uint_eq(hear(&t, 2, 0, 150, FLOW_STATUS_PAUSING, 21, 1100), 0); /* once */
	ck_assert_uint_eq(flow_table_behind(&t), 1);
	/* without the pause the limit would stay at 150 + 1000 */
	ck_assert_uint_eq(hear(&t, 1, 0, 1200, 0, 30, 1200), 0);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 150 + 1333);
	/* back, behind by more than its window: still not counted */
	ck_assert_uint_eq(hear(&t, 2, 0, 160, 0, 40, 1483), 0);
	ck_assert_uint_eq(t.r[1].state, FLOW_RCV_JOINING);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 160 + 1333);
	/* within its window of the tape: counted again */
	ck_assert_uint_eq(hear(&t, 2, 0, 600, 0, 50, 1493), FLOW_IN_STEP);
	ck_assert_uint_eq(flow_table_behind(&t), 0);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1600);
	ck_assert_uint_eq(hear(&t, 1, 0, 1500, 0, 60, 1600), 0);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1600); /* the slower one, in step */
}
END_TEST

/* A replica forgotten during a long pause comes back flagged while it
 * catches up: not counted, even within its window, until a status without
 * the flag; flow_table_bound names who sets the limit, and whether it is
 * waited for or only its buffer bounds the tape. */
START_TEST(table_resume_flagged)
{
	static struct flow_table t = { .window = 1000, .catchup_ns = 1000 };
	const struct flow_rcv *r;
	uint64_t limit;
	int counted;

	ck_assert_uint_eq(hear(&t, 1, 0, 900, 0, 10, 1000), FLOW_JOINED | FLOW_IN_STEP);
	ck_assert_uint_eq(hear(&t, 2, 0, 100, FLOW_STATUS_PAUSING, 20, 1000),
			  FLOW_JOINED | FLOW_PAUSED);
	ck_assert_uint_eq(flow_table_behind(&t), 1);
	/* counted, it would hold the tape at 100 + 1000 */
	ck_assert_uint_eq(flow_table_limit(&t, 0), 100 + 1333);
	r = flow_table_bound(&t, 0, &limit, &counted);
	ck_assert_str_eq(r->name, "m2");
	ck_assert_uint_eq(limit, 100 + 1333);
	ck_assert_int_eq(counted, 0);
	ck_assert_uint_eq(hear(&t, 2, 0, 950, 0, 30, 1433), FLOW_IN_STEP);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1900);
	r = flow_table_bound(&t, 0, &limit, &counted);
	ck_assert_str_eq(r->name, "m1");
	ck_assert_int_eq(counted, 1);
	/* none heard lately: nobody bounds */
	ck_assert_ptr_null(flow_table_bound(&t, 100, &limit, &counted));
	ck_assert_uint_eq(limit, UINT64_MAX);
}
END_TEST

/* Flagged statuses from a replica behind run its catch-up clock: it stays
 * uncounted while flagged, and its first status without the flag, past
 * catchup_ns, counts it again at once (late). */
START_TEST(table_resume_clock)
{
	static struct flow_table t = { .window = 1000, .catchup_ns = 1000 };

	hear(&t, 1, 0, 100, 0, 10, 100);
	hear(&t, 2, 0, 100, 0, 10, 100);
	ck_assert_uint_eq(hear(&t, 2, 0, 100, FLOW_STATUS_PAUSING, 20, 100), FLOW_PAUSED);
	ck_assert_uint_eq(t.r[1].behind_ns, 0); /* in step when it paused */
	ck_assert_uint_eq(hear(&t, 2, 0, 200, FLOW_STATUS_PAUSING, 30, 2000), 0);
	ck_assert_uint_eq(t.r[1].behind_ns, 30); /* behind: the clock runs */
	ck_assert_uint_eq(hear(&t, 2, 0, 300, FLOW_STATUS_PAUSING, 2000, 3000), 0);
	ck_assert_uint_eq(t.r[1].state, FLOW_RCV_PAUSED); /* flagged: never late */
	ck_assert_uint_eq(hear(&t, 2, 0, 400, 0, 2010, 3000), FLOW_IN_STEP | FLOW_LATE);
}
END_TEST

/* A receiver in step that falls behind stays counted (the slow receiver
 * the limit is for); one alone in its partition is counted even paused
 * or behind, and so is one whose partner was not heard lately. */
START_TEST(table_counted)
{
	static struct flow_table t = { .window = 1000, .catchup_ns = 1000 };

	hear(&t, 1, 0, 100, 0, 10, 100);
	hear(&t, 2, 0, 100, 0, 10, 100);
	ck_assert_uint_eq(hear(&t, 2, 0, 120, 0, 20, 1100), 0);
	ck_assert_uint_eq(hear(&t, 1, 0, 1100, 0, 20, 1100), 0);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1120); /* waits for the slow one */
	ck_assert_uint_eq(hear(&t, 3, 1, 100, 0, 20, 1100), FLOW_JOINED | FLOW_IN_STEP);
	ck_assert_uint_eq(hear(&t, 3, 1, 110, FLOW_STATUS_PAUSING, 30, 1100), FLOW_PAUSED);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1110); /* alone in partition 1 */
	/* partition 0: m2 pauses, but m1 was last heard before `since` */
	hear(&t, 2, 0, 130, FLOW_STATUS_PAUSING, 40, 1100);
	hear(&t, 3, 1, 1100, 0, 40, 1100);
	ck_assert_uint_eq(flow_table_limit(&t, 30), 1130);
	/* m1 heard: m2 is bounded by its buffer only */
	ck_assert_uint_eq(flow_table_limit(&t, 10), 130 + 1333);
}
END_TEST

/* A replica slower than its partner, back from a pause, would never catch
 * up with a tape paced by the partner: catchup_ns after its first status
 * behind it is counted again, and the tape waits for it. A pause during
 * the catch-up does not restart the clock; one from in step does. */
START_TEST(table_late)
{
	static struct flow_table t = { .window = 1000, .catchup_ns = 1000 };

	hear(&t, 1, 0, 100, 0, 10, 100);
	hear(&t, 2, 0, 100, 0, 10, 100);
	hear(&t, 2, 0, 100, FLOW_STATUS_PAUSING, 20, 1100);
	ck_assert_uint_eq(hear(&t, 1, 0, 1400, 0, 90, 1400), 0);
	ck_assert_uint_eq(hear(&t, 2, 0, 200, 0, 100, 1400), 0); /* back, behind */
	ck_assert_uint_eq(flow_table_limit(&t, 0), 200 + 1333);
	ck_assert_uint_eq(hear(&t, 2, 0, 300, 0, 1100, 1533), 0); /* 1000 after: not yet */
	ck_assert_uint_eq(hear(&t, 2, 0, 400, 0, 1101, 1633), FLOW_IN_STEP | FLOW_LATE);
	ck_assert_uint_eq(hear(&t, 1, 0, 1700, 0, 1101, 1633), 0);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 1400); /* waited for again */
	/* a pause from in step: a new clock */
	hear(&t, 2, 0, 450, FLOW_STATUS_PAUSING, 1200, 1633);
	ck_assert_uint_eq(hear(&t, 2, 0, 500, 0, 1300, 1700), 0);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 500 + 1333);
	/* a pause during the catch-up: the clock runs on */
	ck_assert_uint_eq(hear(&t, 2, 0, 550, FLOW_STATUS_PAUSING, 1400, 1800), FLOW_PAUSED);
	ck_assert_uint_eq(hear(&t, 2, 0, 600, 0, 2300, 1800), 0);
	ck_assert_uint_eq(hear(&t, 2, 0, 650, 0, 2301, 1800), FLOW_IN_STEP | FLOW_LATE);
}
END_TEST

static int forgotten;

static void count_forgot(void *ctx, const struct flow_rcv *r)
{
	(void)ctx;
	ck_assert_str_eq(r->name, "m2");
	forgotten++;
}

/* Forgotten, then heard again far behind: it joins behind, and is not
 * waited for while its partner keeps up. A full table; window 0. */
START_TEST(table_rejoin)
{
	static struct flow_table t = { .window = 1000, .catchup_ns = 1000 };
	struct flow_status st = { .applied = 1 };
	struct sockaddr_in a;
	unsigned changes;

	hear(&t, 1, 0, 100, 0, 10, 100);
	hear(&t, 2, 0, 100, 0, 10, 100);
	hear(&t, 1, 0, 900, 0, 500, 900);
	flow_table_expire(&t, 400, count_forgot, NULL);
	ck_assert_int_eq(forgotten, 1);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_uint_eq(hear(&t, 1, 0, 9000, 0, 600, 9000), 0);
	ck_assert_uint_eq(hear(&t, 2, 0, 200, 0, 600, 9000), FLOW_JOINED);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 200 + 1333); /* its buffer */
	ck_assert_uint_eq(flow_table_behind(&t), 1);
	ck_assert_uint_eq(hear(&t, 2, 0, 8500, 0, 700, 9000), FLOW_IN_STEP);
	ck_assert_uint_eq(flow_table_limit(&t, 0), 9500);
	for (int k = 3; k <= FLOW_TABLE_RECEIVERS; k++)
		hear(&t, k, 2, 9000, 0, 700, 9000);
	strcpy(st.name, "late");
	a = addr_of(FLOW_TABLE_RECEIVERS + 1);
	ck_assert_ptr_null(flow_table_status(&t, &st, &a, 700, 9000, &changes));
	t.window = 0;
	ck_assert_uint_eq(flow_table_limit(&t, 0), UINT64_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("flowstatus");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, cost);
	tcase_add_test(tc, table_pause);
	tcase_add_test(tc, table_resume_flagged);
	tcase_add_test(tc, table_resume_clock);
	tcase_add_test(tc, table_counted);
	tcase_add_test(tc, table_rejoin);
	tcase_add_test(tc, table_late);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
