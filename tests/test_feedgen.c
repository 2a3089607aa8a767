/* Unit tests for matcher/feedgen.c: the ITCH feed of a partition from the
 * engine's market data reports: the day's opening and closing messages,
 * each book message, the numbering per day, and the GLIMPSE messages. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "feedgen.h"
#include "itch.h"
#include "testutil.h"

#define T0 (1700000000ull * 1000000000ull + 9ull * 3600 * 1000000000ull) /* 09:00 of a day */
#define NS_DAY (86400ull * 1000000000ull)

static const char *const syms[] = { "AAPL", "MSFT" };

struct got {
	struct itch_msg m[256];
	uint32_t day[256];
	uint64_t seq[256];
	size_t n;
};

static struct engine *E;
static struct feedgen G;
static struct got O;
static uint64_t SEQ;

static void out(void *ctx, uint32_t day, uint64_t seq, const uint8_t *msg, size_t len)
{
	struct got *g = ctx;

	ck_assert_uint_lt(g->n, 256);
	ck_assert_uint_eq(len, itch_len((char)msg[0]));
	ck_assert_int_eq(itch_decode(msg, len, &g->m[g->n]), 0);
	g->day[g->n] = day;
	g->seq[g->n] = seq;
	g->n++;
}

static void setup(void)
{
	struct engine_config ec = {
		.symbols = syms, .n_symbols = 2, .max_shares = 1000000, .max_orders = 64,
		.max_tokens = 256, .max_levels = 16, .partition = 3,
	};
	struct feedgen_config fc = { .symbols = syms, .n_symbols = 2, .locate_base = 7, .tracking = 3 };

	ck_assert_int_eq(engine_create(&E, &ec), 0);
	ck_assert_int_eq(feedgen_init(&G, &fc, out, &O), 0);
	engine_set_md(E, feedgen_md, &G);
	memset(&O, 0, sizeof(O));
	SEQ = 0;
}

static void teardown(void)
{
	engine_destroy(E);
}

static void apply(struct engine_cmd *c, uint64_t t)
{
	feedgen_begin(&G, t);
	engine_apply(E, ++SEQ, t, c, NULL, NULL);
}

static struct engine_cmd enter(const char *user, const char *firm, const char *token, char side,
			       uint32_t shares, const char *stock, uint32_t price, char display)
{
	struct engine_cmd c;

	testutil_enter(&c, user, firm, token, side, shares, stock, price, display);
	return c;
}

static struct engine_cmd day(uint32_t kind, uint32_t d)
{
	struct engine_cmd c;

	memset(&c, 0, sizeof(c));
	c.kind = ENGINE_DAY;
	c.u.day.kind = kind;
	c.u.day.day = d;
	return c;
}

static const struct itch_msg *at(size_t i, char type, uint32_t d, uint64_t seq)
{
	ck_assert_msg(i < O.n, "message %zu of %zu missing", i, O.n);
	ck_assert_msg(O.m[i].type == type, "message %zu: %c, expected %c", i, O.m[i].type, type);
	ck_assert_uint_eq(O.day[i], d);
	ck_assert_uint_eq(O.seq[i], seq);
	return &O.m[i];
}

/* The day's opening: O, S, R and H per symbol, Q; at the first event, with
 * its time; locates from locate_base; then the book. */
START_TEST(opening_and_book)
{
	struct engine_cmd c = enter("U1", "FA", "a", 'B', 100, "MSFT", 1000000, 'A');
	const struct itch_msg *m;
	uint64_t t = T0 + 5;

	apply(&c, t);
	ck_assert_int_eq(at(0, 'S', 1, 1)->u.system_event.event_code, 'O');
	ck_assert_uint_eq(O.m[0].timestamp, t % NS_DAY);
	ck_assert_uint_eq(O.m[0].locate, 0);
	ck_assert_uint_eq(O.m[0].tracking, 3);
	ck_assert_int_eq(at(1, 'S', 1, 2)->u.system_event.event_code, 'S');
	m = at(2, 'R', 1, 3);
	ck_assert_str_eq(m->u.stock_directory.stock, "AAPL");
	ck_assert_uint_eq(m->locate, 7);
	ck_assert_uint_eq(m->u.stock_directory.round_lot_size, 100);
	ck_assert_int_eq(at(3, 'H', 1, 4)->u.trading_action.state, 'T');
	ck_assert_str_eq(at(4, 'R', 1, 5)->u.stock_directory.stock, "MSFT");
	ck_assert_uint_eq(O.m[4].locate, 8);
	at(5, 'H', 1, 6);
	ck_assert_int_eq(at(6, 'S', 1, 7)->u.system_event.event_code, 'Q');
	/* attributed: 'F' with the login's firm; the order reference the engine's */
	m = at(7, 'F', 1, 8);
	ck_assert_uint_eq(m->locate, 8);
	ck_assert_uint_eq(m->u.add.ref, (3ull << 48) + 1);
	ck_assert_int_eq(m->u.add.side, 'B');
	ck_assert_str_eq(m->u.add.attribution, "FA");
	ck_assert_str_eq(m->u.add.stock, "MSFT");
	ck_assert_uint_eq(O.n, 8);

	/* anonymous 'A'; a sell short is 'S'; non-displayed: nothing */
	c = enter("U2", "FB", "b", 'T', 50, "MSFT", 1000100, 'Y');
	apply(&c, t + 1);
	ck_assert_int_eq(at(8, 'A', 1, 9)->u.add.side, 'S');
	c = enter("U2", "FB", "h", 'S', 30, "MSFT", 1000200, 'N');
	apply(&c, t + 2);
	ck_assert_uint_eq(O.n, 9);
	/* a buy of 80 at 100.01 takes the displayed 50 ('E') and rests 30 */
	c = enter("U3", "FC", "x", 'B', 80, "MSFT", 1000100, 'Y');
	apply(&c, t + 3);
	m = at(9, 'E', 1, 10);
	ck_assert_uint_eq(m->u.executed.shares, 50);
	ck_assert_uint_eq(m->u.executed.ref, O.m[8].u.add.ref);
	ck_assert_uint_eq(m->u.executed.match, (3ull << 48) + 1);
	ck_assert_uint_eq(at(10, 'A', 1, 11)->u.add.shares, 30);
	/* a buy of 40 at 100.02 takes the hidden 30 ('P', ref 0), rests 10 */
	c = enter("U4", "FD", "y", 'B', 40, "MSFT", 1000200, 'Y');
	apply(&c, t + 4);
	m = at(11, 'P', 1, 12);
	ck_assert_uint_eq(m->u.trade.ref, 0);
	ck_assert_uint_eq(m->u.trade.shares, 30);
	ck_assert_int_eq(m->u.trade.side, 'S');
	ck_assert_uint_eq(m->u.trade.price, 1000200);
	ck_assert_str_eq(m->u.trade.stock, "MSFT");
	ck_assert_uint_eq(m->u.trade.match, (3ull << 48) + 2);
	ck_assert_uint_eq(at(12, 'A', 1, 13)->u.add.shares, 10);
	/* a sell of 200 at 99.00 takes the bids best first, rests 60 */
	c = enter("U5", "FE", "z", 'S', 200, "MSFT", 990000, 'Y');
	apply(&c, t + 5);
	ck_assert_uint_eq(at(13, 'E', 1, 14)->u.executed.shares, 10);
	ck_assert_uint_eq(at(14, 'E', 1, 15)->u.executed.shares, 30);
	ck_assert_uint_eq(at(15, 'E', 1, 16)->u.executed.shares, 100);
	ck_assert_uint_eq(O.m[15].u.executed.ref, O.m[7].u.add.ref);
	ck_assert_uint_eq(at(16, 'A', 1, 17)->u.add.shares, 60);
	ck_assert_uint_eq(O.n, 17);
	ck_assert_uint_eq(G.messages, 17);
}
END_TEST

/* END_OF_DAY: the deletes, then M, E, C; START_OF_DAY of day 2: a new
 * numbering from 1 with the opening again. */
START_TEST(days)
{
	struct engine_cmd c = enter("U1", "", "a", 'B', 100, "AAPL", 1000000, 'Y');
	struct engine_cmd d = day(ENGINE_DAY_END, 1);

	apply(&c, T0);
	ck_assert_uint_eq(O.n, 8);
	apply(&d, T0 + 10);
	ck_assert_uint_eq(at(8, 'D', 1, 9)->u.del.ref, O.m[7].u.add.ref);
	ck_assert_int_eq(at(9, 'S', 1, 10)->u.system_event.event_code, 'M');
	ck_assert_int_eq(at(10, 'S', 1, 11)->u.system_event.event_code, 'E');
	ck_assert_int_eq(at(11, 'S', 1, 12)->u.system_event.event_code, 'C');
	ck_assert_int_eq(G.st.ended, 1);
	/* closed: a rejected Enter says nothing */
	c = enter("U1", "", "b", 'B', 100, "AAPL", 1000000, 'Y');
	apply(&c, T0 + 11);
	ck_assert_uint_eq(O.n, 12);
	d = day(ENGINE_DAY_START, 2);
	apply(&d, T0 + NS_DAY);
	ck_assert_int_eq(at(12, 'S', 2, 1)->u.system_event.event_code, 'O');
	ck_assert_int_eq(at(18, 'S', 2, 7)->u.system_event.event_code, 'Q');
	ck_assert_uint_eq(G.st.day, 2);
	ck_assert_uint_eq(G.st.next, 8);
	ck_assert_int_eq(G.st.ended, 0);
	/* the same token again on the new day: a new order */
	c = enter("U1", "", "a", 'S', 10, "AAPL", 1010000, 'Y');
	apply(&c, T0 + NS_DAY + 1);
	ck_assert_uint_eq(at(19, 'A', 2, 8)->u.add.shares, 10);
}
END_TEST

/* Replace in place ('U'), cancel ('X'), delete ('D'); the GLIMPSE
 * messages of the book left. */
static void gl_out(void *ctx, uint32_t d, uint64_t seq, const uint8_t *msg, size_t len)
{
	ck_assert_uint_eq(seq, 0);
	out(ctx, d, seq, msg, len);
}

START_TEST(replace_cancel_glimpse)
{
	struct engine_cmd c = enter("U1", "FA", "a", 'B', 100, "AAPL", 1000000, 'A');
	struct engine_cmd r, x;
	struct got snap = { .n = 0 };

	apply(&c, T0);
	c = enter("U2", "FB", "b", 'S', 10, "MSFT", 2000000, 'Y');
	apply(&c, T0);
	memset(&r, 0, sizeof(r));
	r.kind = ENGINE_REPLACE;
	strcpy(r.user, "U1");
	strcpy(r.u.replace.existing_token, "a");
	strcpy(r.u.replace.replacement_token, "a2");
	r.u.replace.shares = 60;
	r.u.replace.price = 1000000;
	r.u.replace.tif = OUCH_TIF_SYSTEM_HOURS;
	r.u.replace.display = 'A';
	r.u.replace.iso = 'N';
	apply(&r, T0 + 1);
	ck_assert_uint_eq(at(9, 'U', 1, 10)->u.replace.old_ref, O.m[7].u.add.ref);
	ck_assert_uint_eq(O.m[9].u.replace.shares, 60);
	memset(&x, 0, sizeof(x));
	x.kind = ENGINE_CANCEL;
	strcpy(x.user, "U1");
	strcpy(x.u.cancel.token, "a2");
	x.u.cancel.shares = 20;
	apply(&x, T0 + 2);
	ck_assert_uint_eq(at(10, 'X', 1, 11)->u.cancel.shares, 40);
	/* GLIMPSE: R H R H, then the book: AAPL's bid (attributed, 20 shares,
	 * its ref the replacement's), MSFT's ask */
	feedgen_glimpse(&G, E, 12345, gl_out, &snap);
	ck_assert_uint_eq(snap.n, 6);
	ck_assert_int_eq(snap.m[0].type, 'R');
	ck_assert_int_eq(snap.m[3].type, 'H');
	ck_assert_int_eq(snap.m[4].type, 'F');
	ck_assert_uint_eq(snap.m[4].u.add.shares, 20);
	ck_assert_uint_eq(snap.m[4].u.add.ref, O.m[9].u.replace.new_ref);
	ck_assert_uint_eq(snap.m[4].timestamp, 12345);
	ck_assert_int_eq(snap.m[5].type, 'A');
	ck_assert_int_eq(snap.m[5].u.add.side, 'S');
	x.u.cancel.shares = 0;
	apply(&x, T0 + 3);
	ck_assert_uint_eq(at(11, 'D', 1, 12)->u.del.ref, O.m[9].u.replace.new_ref);
}
END_TEST

START_TEST(bad_config)
{
	const char *const bad[] = { "TOOLONGNAME" };
	struct feedgen g;
	struct feedgen_config fc = { .symbols = syms, .n_symbols = 2, .locate_base = 0 };

	ck_assert_int_eq(feedgen_init(&g, &fc, out, &O), -EINVAL);
	fc.locate_base = 65535; /* the second symbol would be 65536 */
	ck_assert_int_eq(feedgen_init(&g, &fc, out, &O), -EINVAL);
	fc.locate_base = 65534;
	ck_assert_int_eq(feedgen_init(&g, &fc, out, &O), 0);
	fc.symbols = bad;
	fc.n_symbols = 1;
	ck_assert_int_eq(feedgen_init(&g, &fc, out, &O), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("feedgen");
	TCase *tc = tcase_create("feedgen");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, opening_and_book);
	tcase_add_test(tc, days);
	tcase_add_test(tc, replace_cancel_glimpse);
	tcase_add_test(tc, bad_config);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
