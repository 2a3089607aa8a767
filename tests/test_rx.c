/* rx: in-order delivery, duplicates, several gaps at once, the reorder
 * window and its overflow, the request schedule (jitter, back-off, settle),
 * the heartbeat-revealed tail, holds and rejects, the too-old answer, a
 * randomized lossy channel against a model, and the loss generator. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rx.h"
#include "testutil.h"

#define MS 1000000ull
#define MAXREQ 4096
#define MAXSEQ 20000

struct req {
	unsigned server;
	uint64_t seq, at;
	uint16_t count;
};

/* What the callbacks saw. */
static struct {
	uint64_t got[MAXSEQ]; /* delivered sequence numbers in order */
	size_t n_got;
	int bad_data;
	struct req req[MAXREQ];
	size_t n_req;
	uint64_t now;
	uint64_t hold_below; /* RX_HOLD for seq >= this (0: never) */
	uint64_t reject_once; /* RX_REJECT this seq the first time */
	int lost_answer; /* what `lost` returns */
	uint64_t lost_from, lost_to;
	int lost_calls;
} T;

/* Block bytes are a function of the sequence number. */
static uint16_t fill(uint8_t *buf, uint64_t seq)
{
	uint16_t len = (uint16_t)(1 + seq % 37);

	for (uint16_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seq * 31 + i);
	return len;
}

static int deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	uint8_t want[64];
	uint16_t wlen = fill(want, seq);

	(void)ctx;
	if (T.hold_below && seq >= T.hold_below)
		return RX_HOLD;
	if (T.reject_once == seq) {
		T.reject_once = 0;
		return RX_REJECT;
	}
	if (len != wlen || memcmp(data, want, len) != 0)
		T.bad_data++;
	ck_assert_uint_lt(T.n_got, MAXSEQ);
	T.got[T.n_got++] = seq;
	return RX_TAKEN;
}

static void request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	(void)ctx;
	ck_assert_uint_lt(T.n_req, MAXREQ);
	T.req[T.n_req++] = (struct req){ server, seq, T.now, count };
}

static int lost(void *ctx, uint64_t from, uint64_t to)
{
	(void)ctx;
	T.lost_from = from;
	T.lost_to = to;
	T.lost_calls++;
	return T.lost_answer;
}

static const struct rx_ops ops = { deliver, request, lost };
static struct rx_rng rng;

static struct rx_config config(void)
{
	struct rx_config c = {
		.window = 1024,
		.ring_bytes = 1 << 20,
		.max_count = 1000,
		.delay_ns = 0,
		.retry_ns = 10 * MS,
		.retry_max_ns = 80 * MS,
		.settle_ns = 1 * MS,
		.n_servers = 1,
		.rng = &rng,
	};
	return c;
}

static struct rx *make(const struct rx_config *c, uint64_t start)
{
	struct rx *rx;

	memset(&T, 0, sizeof(T));
	rx_rng_seed(&rng, 7);
	ck_assert_int_eq(rx_create(&rx, c, &ops, NULL), 0);
	rx_start(rx, start);
	return rx;
}

static void feed(struct rx *rx, uint64_t seq)
{
	uint8_t b[64];
	uint16_t len = fill(b, seq);

	rx_block(rx, seq, b, len, T.now);
}

static void feed_range(struct rx *rx, uint64_t lo, uint64_t hi)
{
	for (uint64_t s = lo; s < hi; s++)
		feed(rx, s);
}

static void tick_at(struct rx *rx, uint64_t t)
{
	T.now = t;
	rx_tick(rx, t);
}

/* Delivered exactly first..last, in order. */
static void expect_delivered(uint64_t first, uint64_t last)
{
	ck_assert_uint_eq(T.n_got, last - first + 1);
	for (size_t i = 0; i < T.n_got; i++)
		ck_assert_uint_eq(T.got[i], first + i);
	ck_assert_int_eq(T.bad_data, 0);
}

START_TEST(in_order)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);
	struct rx_stats st;

	feed_range(rx, 1, 501);
	tick_at(rx, 100 * MS);
	expect_delivered(1, 500);
	ck_assert_uint_eq(T.n_req, 0);
	ck_assert_uint_eq(rx_next(rx), 501);
	ck_assert_uint_eq(rx_gap_count(rx), 0);
	ck_assert_uint_eq(rx_due(rx), RX_NEVER);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.delivered, 500);
	ck_assert_uint_eq(st.held, 0);
	ck_assert_uint_eq(st.gaps, 0);
	rx_destroy(rx);
}
END_TEST

START_TEST(packets_and_late_start)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 0); /* learns where to start */
	struct mold_session s;
	struct mold_builder b;
	struct mold_packet p;
	uint8_t pkt[1500], blk[64];

	mold_session_set(&s, "TAPE");
	mold_build_begin(&b, pkt, sizeof(pkt), &s, 1000);
	for (uint64_t q = 1000; q < 1010; q++)
		mold_build_add(&b, blk, fill(blk, q));
	ck_assert_int_eq(mold_parse(pkt, mold_build_end(&b), &s, 0, &p), 0);
	rx_packet(rx, &p, 0);
	expect_delivered(1000, 1009);
	ck_assert_uint_eq(rx_high(rx), 1010);
	/* a heartbeat at the head of the stream says nothing is missing */
	ck_assert_int_eq(mold_parse(pkt, mold_build_heartbeat(pkt, &s, 1010), &s, 0, &p), 0);
	rx_packet(rx, &p, 0);
	ck_assert_uint_eq(rx_gap_count(rx), 0);
	rx_destroy(rx);
}
END_TEST

START_TEST(duplicates)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);
	struct rx_stats st;

	feed_range(rx, 1, 11);
	feed_range(rx, 5, 11); /* already delivered */
	feed_range(rx, 13, 16);
	feed_range(rx, 13, 16); /* already held */
	feed_range(rx, 11, 13);
	feed_range(rx, 1, 16);
	expect_delivered(1, 15);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.duplicates, 6 + 3 + 15);
	ck_assert_uint_eq(st.held, 3);
	ck_assert_uint_eq(st.delivered, 15);
	rx_destroy(rx);
}
END_TEST

START_TEST(several_gaps_at_once)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);
	struct rx_stats st;

	feed_range(rx, 1, 11); /* 11, 12 lost */
	feed_range(rx, 13, 21); /* 21 lost */
	feed_range(rx, 22, 31); /* 31..35 lost */
	feed_range(rx, 36, 41);
	ck_assert_uint_eq(rx_gap_count(rx), 3);
	ck_assert_uint_eq(rx_missing(rx), 8);
	tick_at(rx, 1);
	/* one request per range, all at once: none waits for another */
	ck_assert_uint_eq(T.n_req, 3);
	ck_assert_uint_eq(T.req[0].seq, 11);
	ck_assert_uint_eq(T.req[0].count, 2);
	ck_assert_uint_eq(T.req[1].seq, 21);
	ck_assert_uint_eq(T.req[1].count, 1);
	ck_assert_uint_eq(T.req[2].seq, 31);
	ck_assert_uint_eq(T.req[2].count, 5);
	/* answers in any order; later ones are held until the first gap fills */
	feed_range(rx, 31, 36);
	feed(rx, 21);
	ck_assert_uint_eq(T.n_got, 10);
	feed_range(rx, 11, 13);
	expect_delivered(1, 40);
	ck_assert_uint_eq(rx_gap_count(rx), 0);
	ck_assert_uint_eq(rx_due(rx), RX_NEVER);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.gaps, 3);
	ck_assert_uint_eq(st.requests, 3);
	ck_assert_uint_eq(st.requested, 8);
	rx_destroy(rx);
}
END_TEST

START_TEST(answer_in_the_middle_splits)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);

	feed(rx, 1);
	feed(rx, 20); /* 2..19 missing */
	tick_at(rx, 0);
	ck_assert_uint_eq(T.n_req, 1);
	ck_assert_uint_eq(T.req[0].count, 18);
	/* the answer comes, less 5..9 */
	T.now = 1 * MS;
	feed_range(rx, 2, 5);
	feed_range(rx, 10, 20);
	ck_assert_uint_eq(rx_gap_count(rx), 1);
	/* asked again once the answer has settled, not after the back-off */
	ck_assert_uint_eq(rx_due(rx), 2 * MS);
	tick_at(rx, 2 * MS);
	ck_assert_uint_eq(T.n_req, 2);
	ck_assert_uint_eq(T.req[1].seq, 5);
	ck_assert_uint_eq(T.req[1].count, 5);
	feed_range(rx, 5, 10);
	expect_delivered(1, 20);
	rx_destroy(rx);
}
END_TEST

START_TEST(window_overflow)
{
	struct rx_config c = config();
	struct rx *rx;
	struct rx_stats st;

	c.window = 8;
	rx = make(&c, 1);
	feed_range(rx, 2, 21); /* 1 lost; 2..8 fit the window, 9..20 do not */
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.held, 7);
	ck_assert_uint_eq(st.overflow, 12);
	tick_at(rx, 0);
	/* only what fits the window is asked for */
	ck_assert_uint_eq(T.n_req, 1);
	ck_assert_uint_eq(T.req[0].seq, 1);
	ck_assert_uint_eq(T.req[0].count, 1);
	feed(rx, 1);
	ck_assert_uint_eq(T.n_got, 8);
	tick_at(rx, 1 * MS);
	ck_assert_uint_eq(T.n_req, 2);
	ck_assert_uint_eq(T.req[1].seq, 9);
	ck_assert_uint_eq(T.req[1].count, 8);
	feed_range(rx, 9, 17);
	tick_at(rx, 3 * MS); /* settled: the rest */
	ck_assert_uint_eq(T.n_req, 3);
	ck_assert_uint_eq(T.req[2].seq, 17);
	ck_assert_uint_eq(T.req[2].count, 4);
	feed_range(rx, 17, 21);
	expect_delivered(1, 20);
	rx_destroy(rx);
}
END_TEST

START_TEST(ring_overflow)
{
	struct rx_config c = config();
	struct rx *rx;
	struct rx_stats st;

	c.ring_bytes = 256; /* 16 + 8..48 bytes per block: a handful fit */
	rx = make(&c, 1);
	feed_range(rx, 2, 40);
	rx_get_stats(rx, &st);
	ck_assert_uint_gt(st.held, 2);
	ck_assert_uint_gt(st.overflow, 20);
	ck_assert_uint_eq(st.held + st.overflow, 38);
	/* whatever did not fit is asked for again, until everything is in */
	for (uint64_t t = 0; t < 2000 && rx_next(rx) < 40; t++) {
		size_t k = T.n_req;

		tick_at(rx, t * MS);
		for (; k < T.n_req; k++)
			feed_range(rx, T.req[k].seq, T.req[k].seq + T.req[k].count);
	}
	expect_delivered(1, 39);
	rx_destroy(rx);
}
END_TEST

START_TEST(backoff_sequence)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);
	/* retry 10 ms, doubling, capped at 80 ms */
	static const uint64_t want[] = { 0, 10, 30, 70, 150, 230, 310 };

	feed(rx, 1);
	feed(rx, 3);
	for (uint64_t t = 0; t <= 320; t++)
		tick_at(rx, t * MS);
	ck_assert_uint_eq(T.n_req, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < T.n_req; i++) {
		ck_assert_uint_eq(T.req[i].at, want[i] * MS);
		ck_assert_uint_eq(T.req[i].seq, 2);
		ck_assert_uint_eq(T.req[i].count, 1);
	}
	ck_assert_uint_eq(rx_due(rx), 390 * MS);
	rx_destroy(rx);
}
END_TEST

/* A/B: the first request for a gap waits hold_ns, in which the other
 * network's copy fills it (no request at all); a gap it does not fill is
 * asked for at hold_ns + up to delay_ns, not before. */
START_TEST(hold_lets_the_other_copy_fill)
{
	struct rx_config c = config();
	struct rx *rx;

	c.hold_ns = 1 * MS;
	c.delay_ns = 1 * MS;
	rx = make(&c, 1);
	feed_range(rx, 1, 3);
	feed_range(rx, 4, 20); /* network A lost 3 */
	feed_range(rx, 21, 30); /* and 20 */
	ck_assert_uint_eq(rx_gap_count(rx), 2);
	ck_assert_uint_ge(rx_due(rx), 1 * MS);
	for (uint64_t t = 0; t < 1 * MS; t += 10000)
		tick_at(rx, t);
	ck_assert_uint_eq(T.n_req, 0);
	{
		uint64_t fresh = rx_fresh(rx);

		feed(rx, 3); /* B's copy, 0.99 ms later: new */
		ck_assert_uint_eq(rx_fresh(rx), fresh + 1);
		feed(rx, 4); /* B's copy of one A brought: not new */
		ck_assert_uint_eq(rx_fresh(rx), fresh + 1);
	}
	for (uint64_t t = 1 * MS; t <= 2 * MS; t += 10000)
		tick_at(rx, t);
	ck_assert_uint_eq(T.n_req, 1);
	ck_assert_uint_eq(T.req[0].seq, 20);
	ck_assert_uint_ge(T.req[0].at, 1 * MS);
	ck_assert_uint_le(T.req[0].at, 2 * MS);
	rx_destroy(rx);
	c.hold_ns = RX_MAX_HOLD_NS + 1;
	ck_assert_int_eq(rx_create(&rx, &c, &ops, NULL), -EINVAL);
}
END_TEST

/* Near servers (recorders): a range's first RX_NEAR_TRIES requests go to
 * servers [0, n_near) in turn, later ones to every server in turn; a near
 * server past the range (too old) sends it to the others at once. */
START_TEST(near_servers_first)
{
	struct rx_config c = config();
	struct rx *rx;
	uint64_t t = 0;

	c.n_servers = 4;
	c.n_near = 2;
	rx = make(&c, 1);
	feed(rx, 1);
	feed(rx, 5); /* 2..4 missing */
	for (int k = 0; k < RX_NEAR_TRIES + 3; k++) {
		t += c.retry_max_ns;
		tick_at(rx, t);
	}
	ck_assert_uint_eq(T.n_req, RX_NEAR_TRIES + 3);
	for (size_t i = 0; i < RX_NEAR_TRIES; i++)
		ck_assert_uint_lt(T.req[i].server, 2);
	ck_assert_uint_ne(T.req[0].server, T.req[1].server); /* in turn */
	{
		int far = 0;

		for (size_t i = RX_NEAR_TRIES; i < T.n_req; i++)
			far += T.req[i].server >= 2;
		ck_assert_int_gt(far, 0);
	}
	rx_destroy(rx);

	rx = make(&c, 1);
	feed(rx, 1);
	feed(rx, 5);
	tick_at(rx, 0);
	ck_assert_uint_eq(T.n_req, 1);
	rx_too_old(rx, 0, 100, 0); /* near server 0 holds nothing below 100 */
	rx_too_old(rx, 1, 100, 0); /* nor does 1 */
	tick_at(rx, 1);
	ck_assert_uint_ge(T.n_req, 2);
	ck_assert_uint_ge(T.req[T.n_req - 1].server, 2);
	rx_destroy(rx);

	c.n_near = 5;
	ck_assert_int_eq(rx_create(&rx, &c, &ops, NULL), -EINVAL);
}
END_TEST

/* Suppression: a request heard for an overlapping range puts this
 * receiver's own off by the back-off; a range nobody else asks for is
 * asked for as before. */
START_TEST(heard_request_suppresses)
{
	struct rx_config c = config();
	struct rx *rx;
	struct rx_stats st;

	c.delay_ns = 0;
	rx = make(&c, 1);
	feed(rx, 1);
	feed(rx, 5); /* 2..4 missing */
	feed(rx, 9); /* 6..8 missing */
	rx_heard(rx, 3, 1, 0); /* someone asked for 3 */
	tick_at(rx, 0);
	ck_assert_uint_eq(T.n_req, 1); /* only 6..8 */
	ck_assert_uint_eq(T.req[0].seq, 6);
	tick_at(rx, c.retry_ns - 1);
	ck_assert_uint_eq(T.n_req, 1);
	feed_range(rx, 2, 5); /* the answer to the other's request: filled, never asked */
	tick_at(rx, c.retry_ns);
	ck_assert_uint_eq(T.n_req, 2); /* 6..8 again, nothing for 2..4 */
	ck_assert_uint_eq(T.req[1].seq, 6);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.suppressed, 1);
	rx_heard(rx, 100, 0, 0); /* nothing */
	rx_heard(rx, UINT64_MAX - 1, 1, 0); /* unbelievable: ignored */
	rx_destroy(rx);
}
END_TEST

START_TEST(jitter_bounds)
{
	struct rx_config c = config();
	uint64_t first[2][60];

	c.delay_ns = 5 * MS;
	for (int run = 0; run < 2; run++) {
		struct rx *rx = make(&c, 1);
		uint64_t min = UINT64_MAX, max = 0;

		/* 60 separate gaps found at t = 0 */
		for (uint64_t g = 0; g < 60; g++)
			feed(rx, 1 + g * 2);
		ck_assert_uint_eq(rx_gap_count(rx), 59);
		feed(rx, 200); /* and the 60th */
		for (uint64_t t = 0; t <= 5 * MS; t += 10000)
			tick_at(rx, t);
		ck_assert_uint_eq(T.n_req, 60);
		for (size_t i = 0; i < T.n_req; i++) {
			ck_assert_uint_le(T.req[i].at, 5 * MS);
			min = T.req[i].at < min ? T.req[i].at : min;
			max = T.req[i].at > max ? T.req[i].at : max;
		}
		for (size_t i = 0; i < 60; i++)
			first[run][i] = T.req[i].at;
		/* spread over the interval, not bunched */
		ck_assert_uint_lt(min, 1 * MS);
		ck_assert_uint_gt(max, 4 * MS);
		rx_destroy(rx);
	}
	/* the same seed gives the same delays */
	ck_assert_mem_eq(first[0], first[1], sizeof(first[0]));
}
END_TEST

START_TEST(heartbeat_reveals_tail)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);

	feed_range(rx, 1, 6);
	tick_at(rx, 50 * MS);
	ck_assert_uint_eq(T.n_req, 0);
	rx_tail(rx, 6, T.now); /* nothing lost */
	ck_assert_uint_eq(rx_gap_count(rx), 0);
	rx_tail(rx, 9, T.now); /* 6, 7, 8 were sent and lost */
	ck_assert_uint_eq(rx_high(rx), 9);
	tick_at(rx, 50 * MS);
	ck_assert_uint_eq(T.n_req, 1);
	ck_assert_uint_eq(T.req[0].seq, 6);
	ck_assert_uint_eq(T.req[0].count, 3);
	/* more of the tail is revealed while the first part is asked for: its
	 * own range, its own schedule */
	rx_tail(rx, 12, T.now);
	ck_assert_uint_eq(rx_gap_count(rx), 2);
	tick_at(rx, 51 * MS);
	ck_assert_uint_eq(T.n_req, 2);
	ck_assert_uint_eq(T.req[1].seq, 9);
	ck_assert_uint_eq(T.req[1].count, 3);
	feed_range(rx, 6, 12);
	expect_delivered(1, 11);
	rx_destroy(rx);
}
END_TEST

/* A heartbeat or too-old answer at a position no stream reaches is
 * counted and adopted nowhere: no gap, no request, no skip. */
START_TEST(unbelievable_positions)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);
	struct mold_packet hb = { .kind = MOLD_HEARTBEAT };
	struct rx_stats st;

	feed_range(rx, 1, 6);
	hb.seq = UINT64_MAX;
	rx_packet(rx, &hb, T.now);
	hb.seq = 6 + RX_MAX_JUMP + 1;
	rx_packet(rx, &hb, T.now);
	hb.seq = RX_SEQ_LIMIT;
	rx_packet(rx, &hb, T.now);
	rx_too_old(rx, 0, UINT64_MAX - 5, T.now);
	ck_assert_uint_eq(rx_high(rx), 6);
	ck_assert_uint_eq(rx_next(rx), 6);
	ck_assert_uint_eq(rx_gap_count(rx), 0);
	tick_at(rx, 500 * MS);
	ck_assert_uint_eq(T.n_req, 0);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.unbelievable, 4);
	ck_assert_uint_eq(st.lost, 0);
	/* a long way ahead, but within the jump: believed */
	hb.seq = 6 + RX_MAX_JUMP;
	rx_packet(rx, &hb, T.now);
	ck_assert_uint_eq(rx_high(rx), 6 + RX_MAX_JUMP);
	ck_assert(rx_believable(rx, 7, 10));
	ck_assert(!rx_believable(rx, RX_SEQ_LIMIT - 5, 10));
	rx_destroy(rx);
}
END_TEST

START_TEST(hold_and_resume)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);

	T.hold_below = 4;
	feed_range(rx, 1, 10);
	ck_assert_uint_eq(T.n_got, 3);
	ck_assert_int_eq(rx_holding(rx), 1);
	feed(rx, 4); /* a copy of the held one: a duplicate */
	rx_resume(rx, 0);
	ck_assert_uint_eq(T.n_got, 3);
	T.hold_below = 0;
	rx_resume(rx, 0);
	ck_assert_int_eq(rx_holding(rx), 0);
	feed(rx, 10);
	expect_delivered(1, 10);
	ck_assert_uint_eq(T.n_req, 0);
	rx_destroy(rx);
}
END_TEST

START_TEST(reject_asks_again)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);
	struct rx_stats st;

	T.reject_once = 3;
	feed_range(rx, 1, 8); /* 3 refused: 4..7 held */
	ck_assert_uint_eq(T.n_got, 2);
	tick_at(rx, 1);
	ck_assert_uint_eq(T.n_req, 1);
	ck_assert_uint_eq(T.req[0].seq, 3);
	ck_assert_uint_eq(T.req[0].count, 1);
	feed(rx, 3);
	expect_delivered(1, 7);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.rejected, 1);
	rx_destroy(rx);
}
END_TEST

START_TEST(too_old_rotates_then_gives_up)
{
	struct rx_config c = config();
	struct rx *rx;
	struct rx_stats st;

	c.n_servers = 2;
	rx = make(&c, 10);
	feed(rx, 60); /* 10..59 missing */
	tick_at(rx, 0);
	ck_assert_uint_eq(T.n_req, 1);
	ck_assert_uint_eq(T.req[0].server, 0);
	/* server 0 holds nothing below 50: server 1 is asked at once */
	rx_too_old(rx, 0, 50, 1);
	ck_assert_int_eq(T.lost_calls, 0);
	tick_at(rx, 1);
	ck_assert_uint_eq(T.n_req, 2);
	ck_assert_uint_eq(T.req[1].server, 1);
	ck_assert_uint_eq(T.req[1].seq, 10);
	/* server 1 holds nothing below 40: nobody has 10..39 */
	T.lost_answer = 0; /* keep asking */
	rx_too_old(rx, 1, 40, 2);
	ck_assert_int_eq(T.lost_calls, 1);
	ck_assert_uint_eq(T.lost_from, 10);
	ck_assert_uint_eq(T.lost_to, 40);
	ck_assert_uint_eq(rx_next(rx), 10);
	/* the answer part server 1 holds arrives; give the rest up this time */
	feed_range(rx, 40, 46);
	T.lost_answer = 1;
	rx_too_old(rx, 1, 40, 3);
	ck_assert_int_eq(T.lost_calls, 2);
	ck_assert_uint_eq(rx_next(rx), 46);
	expect_delivered(40, 45);
	/* the rest, 46..59, is asked for from server 1, which holds it */
	tick_at(rx, 10 * MS);
	ck_assert_uint_eq(T.req[T.n_req - 1].server, 1);
	ck_assert_uint_eq(T.req[T.n_req - 1].seq, 46);
	ck_assert_uint_eq(T.req[T.n_req - 1].count, 14);
	feed_range(rx, 46, 60);
	ck_assert_uint_eq(rx_next(rx), 61);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.lost, 30);
	ck_assert_uint_eq(st.too_old, 3);
	rx_destroy(rx);
}
END_TEST

START_TEST(skip_delivers_what_is_held)
{
	struct rx_config c = config();
	struct rx *rx = make(&c, 1);

	feed_range(rx, 1, 3);
	feed_range(rx, 5, 7);
	feed_range(rx, 9, 11);
	rx_skip(rx, 8, 0);
	ck_assert_uint_eq(rx_next(rx), 8);
	ck_assert_uint_eq(T.n_got, 4);
	ck_assert_uint_eq(T.got[2], 5);
	ck_assert_uint_eq(T.got[3], 6);
	feed(rx, 8);
	ck_assert_uint_eq(rx_next(rx), 11);
	ck_assert_uint_eq(rx_gap_count(rx), 0);
	rx_destroy(rx);
}
END_TEST

/* A lossy, reordering, duplicating channel and a server that answers every
 * request through the same channel: everything arrives, once, in order. */
START_TEST(random_channel)
{
	struct rx_config c = config();
	uint64_t x = 12345 + (uint64_t)_i * 7919;
	uint64_t total = 5000, sent = 1, now = 0;
	struct rx *rx;
	struct rx_stats st;

	c.window = 64;
	c.ring_bytes = 2048;
	c.max_count = 50;
	c.delay_ns = 2 * MS;
	c.n_servers = 3;
	rx = make(&c, 1);
	for (int step = 0; step < 200000 && rx_next(rx) <= total; step++) {
		size_t k = T.n_req;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (sent <= total && x % 3 != 0) {
			uint64_t s = sent++;

			if (x % 10 == 1 && s > 1)
				feed(rx, s - 1 - x % (s - 1 < 20 ? s - 1 : 20)); /* a late copy */
			if (x % 7 != 0) /* ~14% lost */
				feed(rx, s);
		} else if (sent > total && x % 50 == 0) {
			rx_tail(rx, sent, now); /* heartbeats at the end */
		}
		now += 100000;
		tick_at(rx, now);
		for (; k < T.n_req; k++)
			for (uint64_t s = T.req[k].seq; s < T.req[k].seq + T.req[k].count; s++) {
				x = x * 6364136223846793005ull + 1442695040888963407ull;
				if ((x >> 33) % 10 != 0 && s < sent)
					feed(rx, s);
			}
	}
	expect_delivered(1, total);
	rx_get_stats(rx, &st);
	ck_assert_uint_eq(st.lost, 0);
	ck_assert_uint_gt(st.requests, 0);
	rx_destroy(rx);
}
END_TEST

START_TEST(bad_config)
{
	struct rx_config c = config();
	struct rx *rx;

	c.window = 1;
	ck_assert_int_lt(rx_create(&rx, &c, &ops, NULL), 0);
	c = config();
	c.retry_ns = 0;
	ck_assert_int_lt(rx_create(&rx, &c, &ops, NULL), 0);
	c = config();
	c.retry_max_ns = c.retry_ns - 1;
	ck_assert_int_lt(rx_create(&rx, &c, &ops, NULL), 0);
	c = config();
	c.n_servers = RX_MAX_SERVERS + 1;
	ck_assert_int_lt(rx_create(&rx, &c, &ops, NULL), 0);
	c = config();
	c.delay_ns = 1;
	c.rng = NULL;
	ck_assert_int_lt(rx_create(&rx, &c, &ops, NULL), 0);
	c = config();
	c.max_count = 0;
	ck_assert_int_lt(rx_create(&rx, &c, &ops, NULL), 0);
	c = config();
	c.window = 1000; /* rounded up */
	ck_assert_int_eq(rx_create(&rx, &c, &ops, NULL), 0);
	rx_destroy(rx);
	rx_destroy(NULL);
}
END_TEST

/* ---- the loss generator ---------------------------------------------------- */

static void header(uint8_t out[20], uint64_t seq, uint16_t count)
{
	memcpy(out, "TAPE      ", 10);
	for (int i = 0; i < 8; i++)
		out[10 + i] = (uint8_t)(seq >> (56 - 8 * i));
	out[18] = (uint8_t)(count >> 8);
	out[19] = (uint8_t)count;
}

START_TEST(drop_deterministic)
{
	static struct rx_drop a, b, other;
	uint8_t pkt[64];
	unsigned same = 0, n = 20000;

	rx_drop_init(&a, 0.05, 42);
	rx_drop_init(&b, 0.05, 42);
	rx_drop_init(&other, 0.05, 43);
	for (unsigned i = 0; i < n; i++) {
		int da, db, dc;

		header(pkt, 1 + i, 1);
		memset(pkt + 20, (int)i, sizeof(pkt) - 20); /* the body does not count */
		da = rx_drop(&a, pkt, sizeof(pkt));
		memset(pkt + 20, 0, sizeof(pkt) - 20);
		db = rx_drop(&b, pkt, sizeof(pkt));
		dc = rx_drop(&other, pkt, sizeof(pkt));
		ck_assert_int_eq(da, db);
		same += da && dc;
	}
	ck_assert_uint_eq(a.seen, n);
	ck_assert_uint_eq(a.dropped, b.dropped);
	ck_assert_uint_gt(a.dropped, n / 20 - n / 100); /* 5% +- 1% */
	ck_assert_uint_lt(a.dropped, n / 20 + n / 100);
	ck_assert_uint_lt(same, a.dropped / 4); /* another seed, another pattern */
}
END_TEST

START_TEST(drop_interleaving_does_not_matter)
{
	static struct rx_drop a, b;
	uint8_t pkt[20], hb[20];
	int pa[3000], pb[3000];

	rx_drop_init(&a, 0.2, 9);
	rx_drop_init(&b, 0.2, 9);
	header(hb, 77, 0);
	for (unsigned i = 0; i < 3000; i++) {
		header(pkt, 1 + i, 1);
		pa[i] = rx_drop(&a, pkt, sizeof(pkt));
		/* b sees a different number of heartbeats in between */
		for (unsigned k = 0; k < i % 3; k++)
			rx_drop(&b, hb, sizeof(hb));
		pb[i] = rx_drop(&b, pkt, sizeof(pkt));
	}
	ck_assert_mem_eq(pa, pb, sizeof(pa));
}
END_TEST

START_TEST(drop_copies_get_fresh_draws)
{
	static struct rx_drop d;
	uint8_t pkt[20];
	unsigned dropped = 0;

	rx_drop_init(&d, 0.5, 1);
	header(pkt, 5, 1);
	for (int i = 0; i < 64; i++)
		dropped += (unsigned)rx_drop(&d, pkt, sizeof(pkt));
	ck_assert_uint_gt(dropped, 10);
	ck_assert_uint_lt(dropped, 54);
}
END_TEST

/* Two datagrams that alternate (the two parts of one retransmission
 * answer, asked for again and again) each get fresh draws, even when they
 * land in the same set of the table: neither may be lost on every repeat.
 * Among 2,000 pairs some do share a set (256 sets). */
START_TEST(drop_alternating_pair_is_not_lost_forever)
{
	static struct rx_drop d;
	uint8_t a[20], b[20];

	for (unsigned p = 0; p < 2000; p++) {
		unsigned lost_a = 0, lost_b = 0;

		rx_drop_init(&d, 0.5, 13);
		header(a, 188 + p, 21);
		header(b, 100000 + p, 12);
		for (int i = 0; i < 40; i++) {
			lost_a += (unsigned)rx_drop(&d, a, sizeof(a));
			lost_b += (unsigned)rx_drop(&d, b, sizeof(b));
		}
		ck_assert_msg(lost_a < 40 && lost_b < 40, "pair %u: %u and %u of 40 copies lost", p,
			      lost_a, lost_b);
	}
}
END_TEST

START_TEST(drop_off_and_all)
{
	static struct rx_drop d;
	uint8_t pkt[20];

	header(pkt, 1, 1);
	rx_drop_init(&d, 0, 1);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(rx_drop(&d, pkt, sizeof(pkt)), 0);
	ck_assert_uint_eq(d.seen, 0); /* off: not even looked at */
	rx_drop_init(&d, 1, 1);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(rx_drop(&d, pkt, sizeof(pkt)), 1);
	rx_drop_init(&d, 0.5, 1);
	ck_assert_int_ge(rx_drop(&d, pkt, 3), 0); /* shorter than a header: fine */
}
END_TEST

START_TEST(rng_and_seed)
{
	struct rx_rng a, b;

	rx_rng_seed(&a, 5);
	rx_rng_seed(&b, 5);
	for (int i = 0; i < 100; i++) {
		uint64_t v = rx_rng_upto(&a, 9);

		ck_assert_uint_le(v, 9);
		ck_assert_uint_eq(v, rx_rng_upto(&b, 9));
	}
	ck_assert_uint_eq(rx_rng_upto(&a, 0), 0);
	ck_assert_uint_ne(rx_seed_of("matcher-1", 1), rx_seed_of("matcher-2", 1));
	ck_assert_uint_ne(rx_seed_of("matcher-1", 1), rx_seed_of("matcher-1", 2));
	ck_assert_uint_eq(rx_seed_of("matcher-1", 1), rx_seed_of("matcher-1", 1));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rx");
	TCase *tc = tcase_create("core");
	TCase *td = tcase_create("drop");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, in_order);
	tcase_add_test(tc, packets_and_late_start);
	tcase_add_test(tc, duplicates);
	tcase_add_test(tc, several_gaps_at_once);
	tcase_add_test(tc, answer_in_the_middle_splits);
	tcase_add_test(tc, window_overflow);
	tcase_add_test(tc, ring_overflow);
	tcase_add_test(tc, backoff_sequence);
	tcase_add_test(tc, jitter_bounds);
	tcase_add_test(tc, hold_lets_the_other_copy_fill);
	tcase_add_test(tc, near_servers_first);
	tcase_add_test(tc, heard_request_suppresses);
	tcase_add_test(tc, heartbeat_reveals_tail);
	tcase_add_test(tc, unbelievable_positions);
	tcase_add_test(tc, hold_and_resume);
	tcase_add_test(tc, reject_asks_again);
	tcase_add_test(tc, too_old_rotates_then_gives_up);
	tcase_add_test(tc, skip_delivers_what_is_held);
	tcase_add_loop_test(tc, random_channel, 0, 8);
	tcase_add_test(tc, bad_config);
	suite_add_tcase(s, tc);
	tcase_add_test(td, drop_deterministic);
	tcase_add_test(td, drop_interleaving_does_not_matter);
	tcase_add_test(td, drop_copies_get_fresh_draws);
	tcase_add_test(td, drop_alternating_pair_is_not_lost_forever);
	tcase_add_test(td, drop_off_and_all);
	tcase_add_test(td, rng_and_seed);
	suite_add_tcase(s, td);
	return testutil_run(s, 0);
}
