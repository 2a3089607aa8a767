/* The matching engine: exact outbound messages for each order kind, every
 * reject reason, expiry, pool exhaustion, the trading day (END and START),
 * snapshots, and determinism over a long random tape (with a throughput
 * figure printed, not asserted). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "engine.h"
#include "risk.h"
#include "testutil.h"

#define NS 1000000000ull

/* The sanitizer build runs several times slower: its long loops and random
 * tapes are half as long, and the counts asserted on them scaled (R_MIN). */
#ifdef __SANITIZE_ADDRESS__
#define R_SHORTER 2
#else
#define R_SHORTER 1
#endif

#define DAY (86400ull * NS)
/* 2024-01-02 14:30:00 UTC */
#define T0 (19724ull * DAY + (14ull * 3600 + 30 * 60) * NS)
#define P(d, c) ((uint32_t)((d) * 10000u + (c) * 100u)) /* dollars, cents */

/* Copies a C string into a fixed field, truncating, always terminated. */
static void scopy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* --- capture -------------------------------------------------------------- */

struct out {
	char user[8];
	struct ouch_msg m;
};

struct cap {
	struct out *v;
	size_t n, cap;
	int store; /* keep messages (else only digest) */
	XXH3_state_t *digest;
	uint64_t total;
};

static void capture(void *ctx, const char *user, const struct ouch_msg *m)
{
	struct cap *c = ctx;
	char u[8] = { 0 };
	uint8_t wire[OUCH_MAX_LEN];
	int len = ouch_encode_outbound(m, wire, sizeof(wire));

	/* every message the engine emits is one the OUCH codec can send */
	ck_assert_msg(len > 0, "type %c: encode error %d", m->type, len);
	scopy(u, sizeof(u), user);
	c->total++;
	if (c->digest) {
		XXH3_64bits_update(c->digest, u, sizeof(u));
		XXH3_64bits_update(c->digest, m, sizeof(*m));
	}
	if (!c->store)
		return;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		ck_assert_ptr_nonnull(c->v);
	}
	memcpy(c->v[c->n].user, u, sizeof(u));
	c->v[c->n].m = *m;
	c->n++;
}

/* --- a small engine and command builders ---------------------------------- */

static const char *const syms[] = { "AAPL", "MSFT", "ZVZZT" };
static struct engine *E;
static struct cap C;
static uint64_t T, SEQ;

static void setup_with(uint32_t max_orders, uint32_t max_tokens, uint32_t max_levels, uint32_t max_users)
{
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = max_orders,
		.max_tokens = max_tokens, .max_levels = max_levels, .max_users = max_users,
	};

	ck_assert_int_eq(engine_create(&E, &cfg), 0);
	memset(&C, 0, sizeof(C));
	C.store = 1;
	T = T0;
	SEQ = 0;
}

static void setup(void)
{
	setup_with(1024, 4096, 64, 0);
}

/* An engine like setup_with's with a per-user token quota. */
static void setup_quota(uint32_t max_orders, uint32_t max_tokens, uint32_t max_user_tokens)
{
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = max_orders,
		.max_tokens = max_tokens, .max_levels = 16, .max_user_tokens = max_user_tokens,
	};

	ck_assert_int_eq(engine_create(&E, &cfg), 0);
	memset(&C, 0, sizeof(C));
	C.store = 1;
	T = T0;
	SEQ = 0;
}

static void teardown(void)
{
	ck_assert_int_eq(engine_verify(E), 0);
	engine_destroy(E);
	free(C.v);
	E = NULL;
}

static struct engine_cmd base(enum engine_cmd_kind kind, const char *user, const char *firm)
{
	struct engine_cmd c;

	memset(&c, 0, sizeof(c));
	c.kind = kind;
	scopy(c.user, sizeof(c.user), user);
	scopy(c.firm, sizeof(c.firm), firm);
	return c;
}

static struct engine_cmd enter_full(const char *user, const char *firm, const char *token, char side,
				    uint32_t shares, const char *stock, uint32_t price, uint32_t tif,
				    char display, uint32_t min_qty)
{
	struct engine_cmd c = base(ENGINE_ENTER, user, firm);
	struct ouch_enter_order *o = &c.u.enter;

	scopy(o->token, sizeof(o->token), token);
	o->side = side;
	o->shares = shares;
	scopy(o->stock, sizeof(o->stock), stock);
	o->price = price;
	o->tif = tif;
	scopy(o->firm, sizeof(o->firm), firm);
	o->display = display;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = 'N';
	o->min_qty = min_qty;
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = ' ';
	return c;
}

/* A day limit order, displayed, on AAPL. */
static struct engine_cmd lim(const char *user, const char *firm, const char *token, char side,
			     uint32_t shares, uint32_t price)
{
	return enter_full(user, firm, token, side, shares, "AAPL", price, OUCH_TIF_SYSTEM_HOURS, 'Y', 0);
}

static struct engine_cmd replace(const char *user, const char *old, const char *new, uint32_t shares,
				 uint32_t price, uint32_t tif, char display, uint32_t min_qty)
{
	struct engine_cmd c = base(ENGINE_REPLACE, user, "");
	struct ouch_replace_order *r = &c.u.replace;

	scopy(r->existing_token, sizeof(r->existing_token), old);
	scopy(r->replacement_token, sizeof(r->replacement_token), new);
	r->shares = shares;
	r->price = price;
	r->tif = tif;
	r->display = display;
	r->iso = 'N';
	r->min_qty = min_qty;
	return c;
}

static struct engine_cmd cxl(const char *user, const char *token, uint32_t shares)
{
	struct engine_cmd c = base(ENGINE_CANCEL, user, "");

	scopy(c.u.cancel.token, sizeof(c.u.cancel.token), token);
	c.u.cancel.shares = shares;
	return c;
}

static struct engine_cmd mod(const char *user, const char *token, char side, uint32_t shares)
{
	struct engine_cmd c = base(ENGINE_MODIFY, user, "");

	scopy(c.u.modify.token, sizeof(c.u.modify.token), token);
	c.u.modify.side = side;
	c.u.modify.shares = shares;
	return c;
}

/* Applies one command at the current tape time; C holds only its messages. */
static void apply(struct engine_cmd c)
{
	C.n = 0;
	engine_apply(E, ++SEQ, T, &c, capture, &C);
}

static void advance(uint64_t ns)
{
	T += ns;
	C.n = 0;
	engine_advance_time(E, T, capture, &C);
}

/* --- expectations ---------------------------------------------------------- */

static const struct ouch_msg *msg_at(size_t i, const char *user, char type)
{
	ck_assert_msg(i < C.n, "message %zu of %zu missing", i, C.n);
	ck_assert_str_eq(C.v[i].user, user);
	ck_assert_msg(C.v[i].m.type == type, "message %zu: type %c, expected %c", i, C.v[i].m.type, type);
	return &C.v[i].m;
}

static void n_msgs(size_t n)
{
	ck_assert_msg(C.n == n, "%zu messages, expected %zu", C.n, n);
}

static uint64_t accepted(size_t i, const char *user, const char *token)
{
	const struct ouch_accepted *a = &msg_at(i, user, OUCH_ACCEPTED)->u.accepted;

	ck_assert_str_eq(a->token, token);
	ck_assert_uint_eq(a->timestamp, T % DAY);
	ck_assert_int_eq(a->state, OUCH_STATE_LIVE);
	return a->order_ref;
}

static void executed(size_t i, const char *user, const char *token, uint32_t shares, uint32_t price,
		     char liq, uint64_t match)
{
	const struct ouch_executed *x = &msg_at(i, user, OUCH_EXECUTED)->u.executed;

	ck_assert_str_eq(x->token, token);
	ck_assert_uint_eq(x->shares, shares);
	ck_assert_uint_eq(x->price, price);
	ck_assert_int_eq(x->liquidity, liq);
	ck_assert_uint_eq(x->match, match);
	ck_assert_uint_eq(x->timestamp, T % DAY);
}

/* Both sides of match number m: the resting order's message, then the taker's. */
static void fill(size_t i, const char *ruser, const char *rtoken, const char *tuser, const char *ttoken,
		 uint32_t shares, uint32_t price, uint64_t match)
{
	executed(i, ruser, rtoken, shares, price, OUCH_LIQ_ADDED, match);
	executed(i + 1, tuser, ttoken, shares, price, OUCH_LIQ_REMOVED, match);
}

static void canceled(size_t i, const char *user, const char *token, uint32_t dec, char reason)
{
	const struct ouch_canceled *x = &msg_at(i, user, OUCH_CANCELED)->u.canceled;

	ck_assert_str_eq(x->token, token);
	ck_assert_uint_eq(x->decrement, dec);
	ck_assert_int_eq(x->reason, reason);
	ck_assert_uint_eq(x->timestamp, T % DAY);
}

static void rejected(size_t i, const char *user, const char *token, char reason)
{
	const struct ouch_rejected *x = &msg_at(i, user, OUCH_REJECTED)->u.rejected;

	ck_assert_str_eq(x->token, token);
	ck_assert_msg(x->reason == reason, "reject reason %c, expected %c", x->reason, reason);
}

static uint64_t replaced(size_t i, const char *user, const char *token, const char *prev,
			 uint32_t shares, uint32_t price)
{
	const struct ouch_replaced *x = &msg_at(i, user, OUCH_REPLACED)->u.replaced;

	ck_assert_str_eq(x->replacement_token, token);
	ck_assert_str_eq(x->previous_token, prev);
	ck_assert_uint_eq(x->shares, shares);
	ck_assert_uint_eq(x->price, price);
	ck_assert_int_eq(x->state, OUCH_STATE_LIVE);
	return x->order_ref;
}

/* Enters a resting order that must be accepted without executing. */
static void rest(struct engine_cmd c)
{
	apply(c);
	n_msgs(1);
	accepted(0, c.user, c.u.enter.token);
}

static struct engine_stats stats(void)
{
	struct engine_stats s;

	engine_get_stats(E, &s);
	return s;
}

/* --- crosses and priority ------------------------------------------------- */

/* Partition p numbers its orders and matches from p << 48: two partitions
 * never hand out the same order reference or match number. */
START_TEST(partition_numbers)
{
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = 1024,
		.max_tokens = 4096, .max_levels = 64, .partition = 5,
	};
	const uint64_t base = 5ull << 48;
	struct engine *f = NULL;

	engine_destroy(E);
	ck_assert_int_eq(engine_create(&E, &cfg), 0);
	rest(lim("alice", "FA", "a1", 'S', 100, P(10, 0)));
	ck_assert_uint_eq(C.v[0].m.u.accepted.order_ref, base + 1);
	apply(lim("bob", "FB", "b1", 'B', 30, P(10, 0)));
	n_msgs(3);
	ck_assert_uint_eq(accepted(0, "bob", "b1"), base + 2);
	fill(1, "alice", "a1", "bob", "b1", 30, P(10, 0), base + 1);
	cfg.partition = 0x10000;
	ck_assert_int_eq(engine_create(&f, &cfg), -EINVAL);
}
END_TEST

START_TEST(cross_and_partial_fill)
{
	const struct ouch_accepted *a;

	rest(lim("alice", "FA", "a1", 'S', 100, P(10, 0)));
	a = &C.v[0].m.u.accepted;
	ck_assert_uint_eq(a->order_ref, 1);
	ck_assert_int_eq(a->side, 'S');
	ck_assert_uint_eq(a->shares, 100);
	ck_assert_str_eq(a->stock, "AAPL");
	ck_assert_uint_eq(a->price, P(10, 0));
	ck_assert_uint_eq(a->tif, OUCH_TIF_SYSTEM_HOURS);
	ck_assert_str_eq(a->firm, "FA");
	ck_assert_int_eq(a->display, 'Y');
	ck_assert_int_eq(a->capacity, 'A');
	ck_assert_int_eq(a->cross_type, 'N');

	/* a buy for 30 at the same price: one match at the resting price */
	apply(lim("bob", "FB", "b1", 'B', 30, P(10, 0)));
	n_msgs(3);
	ck_assert_uint_eq(accepted(0, "bob", "b1"), 2);
	fill(1, "alice", "a1", "bob", "b1", 30, P(10, 0), 1);

	/* a buy for 100 at 10.01 takes the 70 left at 10.00 and rests 30 */
	apply(lim("bob", "FB", "b2", 'B', 100, P(10, 1)));
	n_msgs(3);
	accepted(0, "bob", "b2");
	fill(1, "alice", "a1", "bob", "b2", 70, P(10, 0), 2);
	ck_assert_uint_eq(stats().orders_open, 1);

	/* the rest of b2 is at 10.01 */
	apply(lim("carol", "FC", "c1", 'S', 50, P(10, 1)));
	n_msgs(3);
	accepted(0, "carol", "c1");
	fill(1, "bob", "b2", "carol", "c1", 30, P(10, 1), 3);
	/* and c1 rests 20 at 10.01: a sell at 10.02 does not cross a bid */
	ck_assert_uint_eq(stats().orders_open, 1);
	ck_assert_uint_eq(stats().matches, 3);
	ck_assert_uint_eq(stats().shares_matched, 130);
}
END_TEST

START_TEST(time_priority_at_one_price)
{
	rest(lim("u1", "F1", "t1", 'S', 100, P(10, 0)));
	rest(lim("u2", "F2", "t2", 'S', 100, P(10, 0)));
	rest(lim("u3", "F3", "t3", 'S', 100, P(10, 0)));
	apply(lim("bob", "FB", "b1", 'B', 250, P(10, 0)));
	n_msgs(7);
	fill(1, "u1", "t1", "bob", "b1", 100, P(10, 0), 1);
	fill(3, "u2", "t2", "bob", "b1", 100, P(10, 0), 2);
	fill(5, "u3", "t3", "bob", "b1", 50, P(10, 0), 3);
}
END_TEST

START_TEST(price_priority_across_prices)
{
	rest(lim("u1", "F1", "t1", 'S', 100, P(10, 2)));
	rest(lim("u2", "F2", "t2", 'S', 100, P(10, 0)));
	rest(lim("u3", "F3", "t3", 'S', 100, P(10, 1)));
	rest(lim("u4", "F4", "t4", 'S', 100, P(10, 0)));
	/* best price first, then time: t2, t4 at 10.00, t3 at 10.01; t1 not reached */
	apply(lim("bob", "FB", "b1", 'B', 350, P(10, 1)));
	n_msgs(7);
	fill(1, "u2", "t2", "bob", "b1", 100, P(10, 0), 1);
	fill(3, "u4", "t4", "bob", "b1", 100, P(10, 0), 2);
	fill(5, "u3", "t3", "bob", "b1", 100, P(10, 1), 3);
	/* the remaining 50 rest at 10.01, below t1 at 10.02 */
	ck_assert_uint_eq(stats().orders_open, 2);
	apply(lim("u5", "F5", "t5", 'S', 80, P(10, 1)));
	n_msgs(3);
	fill(1, "bob", "b1", "u5", "t5", 50, P(10, 1), 4);
	ck_assert_uint_eq(stats().orders_open, 2);
}
END_TEST

/* --- cancel, replace, modify ---------------------------------------------- */

START_TEST(cancel_and_partial_cancel)
{
	rest(lim("u1", "F1", "x", 'S', 100, P(10, 0)));
	rest(lim("u2", "F2", "y", 'S', 100, P(10, 0)));
	/* partial cancel: down to 60, keeps its place */
	apply(cxl("u1", "x", 60));
	n_msgs(1);
	canceled(0, "u1", "x", 40, OUCH_CXL_USER);
	/* a size at or above the open size does nothing */
	apply(cxl("u1", "x", 60));
	n_msgs(0);
	apply(cxl("u1", "x", 100));
	n_msgs(0);
	apply(lim("bob", "FB", "b", 'B', 70, P(10, 0)));
	n_msgs(5);
	fill(1, "u1", "x", "bob", "b", 60, P(10, 0), 1);
	fill(3, "u2", "y", "bob", "b", 10, P(10, 0), 2);
	/* x is dead: a cancel of it is refused */
	apply(cxl("u1", "x", 0));
	n_msgs(1);
	ck_assert_str_eq(msg_at(0, "u1", OUCH_CANCEL_REJECT)->u.cancel_reject.token, "x");
	/* full cancel */
	apply(cxl("u2", "y", 0));
	n_msgs(1);
	canceled(0, "u2", "y", 90, OUCH_CXL_USER);
	/* unknown token, and another user's token */
	apply(cxl("u2", "nope", 0));
	n_msgs(1);
	msg_at(0, "u2", OUCH_CANCEL_REJECT);
	rest(lim("u1", "F1", "z", 'S', 100, P(10, 0)));
	apply(cxl("u2", "z", 0));
	n_msgs(1);
	msg_at(0, "u2", OUCH_CANCEL_REJECT);
	ck_assert_uint_eq(stats().orders_open, 1);
	ck_assert_uint_eq(stats().cancel_rejects, 3);
}
END_TEST

START_TEST(replace_keeps_priority)
{
	uint64_t ref;

	rest(lim("u1", "F1", "x", 'S', 100, P(10, 0)));
	rest(lim("u2", "F2", "y", 'S', 100, P(10, 0)));
	/* same price, fewer shares: keeps its place, new reference number */
	apply(replace("u1", "x", "x2", 80, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(1);
	ref = replaced(0, "u1", "x2", "x", 80, P(10, 0));
	ck_assert_uint_eq(ref, 3);
	ck_assert_str_eq(C.v[0].m.u.replaced.stock, "AAPL");
	ck_assert_int_eq(C.v[0].m.u.replaced.side, 'S');
	apply(lim("bob", "FB", "b", 'B', 90, P(10, 0)));
	n_msgs(5);
	fill(1, "u1", "x2", "bob", "b", 80, P(10, 0), 1);
	fill(3, "u2", "y", "bob", "b", 10, P(10, 0), 2);
	/* the old token is dead now */
	apply(cxl("u1", "x", 0));
	msg_at(0, "u1", OUCH_CANCEL_REJECT);
}
END_TEST

START_TEST(replace_loses_priority)
{
	rest(lim("u1", "F1", "x", 'S', 100, P(10, 0)));
	rest(lim("u2", "F2", "y", 'S', 100, P(10, 0)));
	/* more shares: to the back */
	apply(replace("u1", "x", "x2", 150, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(1);
	replaced(0, "u1", "x2", "x", 150, P(10, 0));
	apply(lim("bob", "FB", "b", 'B', 120, P(10, 0)));
	n_msgs(5);
	fill(1, "u2", "y", "bob", "b", 100, P(10, 0), 1);
	fill(3, "u1", "x2", "bob", "b", 20, P(10, 0), 2);
	/* a price change, here to a marketable one, executes like a new order */
	rest(lim("u3", "F3", "bid", 'B', 50, P(9, 95)));
	apply(replace("u1", "x2", "x3", 100, P(9, 95), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(3);
	replaced(0, "u1", "x3", "x2", 100, P(9, 95));
	fill(1, "u3", "bid", "u1", "x3", 50, P(9, 95), 3);
	ck_assert_uint_eq(stats().orders_open, 1); /* x3: 50 at 9.95 */
	/* a display change from displayed to non-displayed also goes to the back */
	rest(lim("u4", "F4", "w", 'S', 10, P(9, 95)));
	apply(replace("u1", "x3", "x4", 50, P(9, 95), OUCH_TIF_SYSTEM_HOURS, 'N', 0));
	replaced(0, "u1", "x4", "x3", 50, P(9, 95));
	apply(lim("bob", "FB", "b2", 'B', 20, P(9, 95)));
	n_msgs(5);
	fill(1, "u4", "w", "bob", "b2", 10, P(9, 95), 4);
	fill(3, "u1", "x4", "bob", "b2", 10, P(9, 95), 5);
}
END_TEST

START_TEST(replace_ignored_and_invalid)
{
	struct engine_stats s;

	rest(lim("u1", "F1", "x", 'S', 100, P(10, 0)));
	rest(lim("u1", "F1", "used", 'S', 100, P(10, 5)));
	/* replacement token already used: silently ignored */
	apply(replace("u1", "x", "used", 50, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(0);
	apply(replace("u1", "x", "x", 50, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(0);
	/* existing order unknown: silently ignored */
	apply(replace("u1", "nope", "n2", 50, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(0);
	apply(replace("u9", "x", "n3", 50, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(0);
	s = stats();
	ck_assert_uint_eq(s.ignored_duplicates, 2);
	ck_assert_uint_eq(s.ignored_dead, 2);
	/* live but invalid (off tick): the existing order is canceled, and the
	 * replacement token is not consumed */
	apply(replace("u1", "x", "x2", 50, P(10, 0) + 50, OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(1);
	canceled(0, "u1", "x", 100, OUCH_CXL_SYSTEM);
	rest(lim("u1", "F1", "x2", 'S', 10, P(10, 0)));
	/* dead existing order: ignored */
	apply(replace("u1", "x", "x3", 50, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(0);
	/* a post-only replacement that would take: canceled */
	rest(lim("u2", "F2", "bid", 'B', 10, P(9, 90)));
	apply(replace("u1", "x2", "x4", 10, P(9, 90), OUCH_TIF_SYSTEM_HOURS, 'P', 0));
	n_msgs(1);
	canceled(0, "u1", "x2", 10, OUCH_CXL_SYSTEM);
	/* IOC replacement that does not execute: Replaced then Canceled 'I' */
	apply(replace("u1", "used", "u2", 30, P(10, 5), OUCH_TIF_IOC, 'Y', 0));
	n_msgs(2);
	replaced(0, "u1", "u2", "used", 30, P(10, 5));
	canceled(1, "u1", "u2", 30, OUCH_CXL_IOC);
	ck_assert_uint_eq(stats().orders_open, 1);
}
END_TEST

START_TEST(modify_side_and_shares)
{
	rest(lim("u1", "F1", "s", 'S', 100, P(10, 0)));
	rest(lim("u2", "F2", "s2", 'S', 100, P(10, 0)));
	apply(mod("u1", "s", 'T', 60));
	n_msgs(1);
	{
		const struct ouch_order_modified *m = &msg_at(0, "u1", OUCH_ORDER_MODIFIED)->u.order_modified;

		ck_assert_str_eq(m->token, "s");
		ck_assert_int_eq(m->side, 'T');
		ck_assert_uint_eq(m->shares, 60);
	}
	/* a sell cannot become a buy; shares cannot grow; unknown is ignored */
	apply(mod("u1", "s", 'B', 60));
	n_msgs(0);
	apply(mod("u1", "s", 'E', 61));
	n_msgs(0);
	apply(mod("u1", "zz", 'E', 10));
	n_msgs(0);
	ck_assert_uint_eq(stats().ignored_invalid, 2);
	ck_assert_uint_eq(stats().ignored_dead, 1);
	/* kept its priority */
	apply(lim("bob", "FB", "b", 'B', 70, P(10, 0)));
	n_msgs(5);
	fill(1, "u1", "s", "bob", "b", 60, P(10, 0), 1);
	fill(3, "u2", "s2", "bob", "b", 10, P(10, 0), 2);
	/* to zero: Order Modified and the order leaves the book */
	apply(mod("u2", "s2", 'E', 0));
	n_msgs(1);
	ck_assert_uint_eq(msg_at(0, "u2", OUCH_ORDER_MODIFIED)->u.order_modified.shares, 0);
	ck_assert_uint_eq(stats().orders_open, 0);
}
END_TEST

/* --- order kinds ----------------------------------------------------------- */

START_TEST(ioc_partial_fill)
{
	rest(lim("u1", "F1", "s", 'S', 50, P(10, 0)));
	apply(enter_full("bob", "FB", "b", 'B', 80, "AAPL", P(10, 0), OUCH_TIF_IOC, 'Y', 0));
	n_msgs(4);
	accepted(0, "bob", "b");
	fill(1, "u1", "s", "bob", "b", 50, P(10, 0), 1);
	canceled(3, "bob", "b", 30, OUCH_CXL_IOC);
	ck_assert_uint_eq(stats().orders_open, 0);
}
END_TEST

START_TEST(market_orders_walk_levels)
{
	rest(lim("u1", "F1", "s1", 'S', 100, P(10, 2)));
	rest(lim("u2", "F2", "s2", 'S', 100, P(10, 0)));
	rest(lim("u3", "F3", "s3", 'S', 100, P(10, 1)));
	apply(enter_full("bob", "FB", "mb", 'B', 250, "AAPL", OUCH_PRICE_MARKET, OUCH_TIF_IOC, 'Y', 0));
	n_msgs(7);
	fill(1, "u2", "s2", "bob", "mb", 100, P(10, 0), 1);
	fill(3, "u3", "s3", "bob", "mb", 100, P(10, 1), 2);
	fill(5, "u1", "s1", "bob", "mb", 50, P(10, 2), 3);

	rest(lim("u1", "F1", "b1", 'B', 100, P(9, 98)));
	rest(lim("u2", "F2", "b2", 'B', 100, P(9, 99)));
	apply(enter_full("bob", "FB", "ms", 'S', 300, "AAPL", OUCH_PRICE_MARKET, OUCH_TIF_IOC, 'Y', 0));
	n_msgs(6);
	fill(1, "u2", "b2", "bob", "ms", 100, P(9, 99), 4);
	fill(3, "u1", "b1", "bob", "ms", 100, P(9, 98), 5);
	canceled(5, "bob", "ms", 100, OUCH_CXL_IOC);
	ck_assert_uint_eq(stats().orders_open, 1); /* s1's 50 */
}
END_TEST

START_TEST(market_order_empty_book)
{
	apply(enter_full("bob", "FB", "m", 'B', 100, "MSFT", OUCH_PRICE_MARKET, OUCH_TIF_IOC, 'Y', 0));
	n_msgs(2);
	accepted(0, "bob", "m");
	canceled(1, "bob", "m", 100, OUCH_CXL_IOC);
	ck_assert_uint_eq(stats().orders_open, 0);
}
END_TEST

START_TEST(all_or_none_ioc)
{
	rest(lim("u1", "F1", "s1", 'S', 50, P(10, 0)));
	/* 50 available, 100 needed: nothing executes */
	apply(enter_full("bob", "FB", "f1", 'B', 100, "AAPL", P(10, 0), OUCH_TIF_IOC, 'Y', 100));
	n_msgs(2);
	accepted(0, "bob", "f1");
	canceled(1, "bob", "f1", 100, OUCH_CXL_IOC);
	/* with 100 available it fills completely */
	rest(lim("u2", "F2", "s2", 'S', 70, P(10, 1)));
	apply(enter_full("bob", "FB", "f2", 'B', 100, "AAPL", P(10, 1), OUCH_TIF_IOC, 'Y', 100));
	n_msgs(5);
	fill(1, "u1", "s1", "bob", "f2", 50, P(10, 0), 1);
	fill(3, "u2", "s2", "bob", "f2", 50, P(10, 1), 2);
}
END_TEST

START_TEST(min_qty_resting)
{
	rest(lim("u1", "F1", "s1", 'S', 50, P(10, 0)));
	/* min 80 not available: rests in full at 10.00, no execution */
	apply(enter_full("bob", "FB", "b", 'B', 100, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 80));
	n_msgs(1);
	accepted(0, "bob", "b");
	ck_assert_uint_eq(stats().orders_open, 2);
	/* min qty applies on entry only: an incoming sell takes the bid */
	apply(lim("u2", "F2", "s2", 'S', 10, P(10, 0)));
	n_msgs(3);
	fill(1, "bob", "b", "u2", "s2", 10, P(10, 0), 1);
	/* min 40 of 50 available: executes */
	apply(enter_full("u3", "F3", "b3", 'B', 60, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 40));
	n_msgs(3);
	fill(1, "u1", "s1", "u3", "b3", 50, P(10, 0), 2);
}
END_TEST

START_TEST(post_only)
{
	rest(lim("u1", "F1", "s1", 'S', 50, P(10, 0)));
	/* below the offer: rests */
	rest(enter_full("bob", "FB", "p1", 'B', 100, "AAPL", P(9, 99), OUCH_TIF_SYSTEM_HOURS, 'P', 0));
	/* at the offer: would take, rejected */
	apply(enter_full("bob", "FB", "p2", 'B', 100, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'P', 0));
	n_msgs(1);
	rejected(0, "bob", "p2", OUCH_REJ_POST_ONLY_WOULD_TAKE);
	ck_assert_uint_eq(stats().orders_open, 2);
	/* the resting post-only order is displayed: a sell takes it */
	apply(lim("u2", "F2", "s2", 'S', 100, P(9, 99)));
	n_msgs(3);
	fill(1, "bob", "p1", "u2", "s2", 100, P(9, 99), 1);
}
END_TEST

START_TEST(non_displayed_behind_displayed)
{
	rest(enter_full("u1", "F1", "h", 'S', 100, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'N', 0));
	rest(lim("u2", "F2", "d1", 'S', 100, P(10, 0)));
	rest(enter_full("u3", "F3", "h2", 'S', 100, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'N', 0));
	rest(enter_full("u4", "F4", "d2", 'S', 100, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'A', 0));
	apply(lim("bob", "FB", "b", 'B', 350, P(10, 0)));
	n_msgs(9);
	fill(1, "u2", "d1", "bob", "b", 100, P(10, 0), 1);
	fill(3, "u4", "d2", "bob", "b", 100, P(10, 0), 2);
	fill(5, "u1", "h", "bob", "b", 100, P(10, 0), 3);
	fill(7, "u3", "h2", "bob", "b", 50, P(10, 0), 4);
}
END_TEST

START_TEST(self_match_prevention)
{
	rest(lim("other", "FO", "o1", 'S', 100, P(10, 0)));
	rest(lim("mine", "FX", "m1", 'S', 100, P(10, 1)));
	rest(lim("other", "FO", "o2", 'S', 100, P(10, 2)));
	/* another login of firm FX buys through: fills o1, stops at m1 */
	apply(lim("mine2", "FX", "b", 'B', 300, P(10, 2)));
	n_msgs(4);
	accepted(0, "mine2", "b");
	fill(1, "other", "o1", "mine2", "b", 100, P(10, 0), 1);
	canceled(3, "mine2", "b", 200, OUCH_CXL_SELF_MATCH);
	ck_assert_uint_eq(stats().orders_open, 2);
	ck_assert_uint_eq(stats().self_match_cancels, 1);
	/* the resting own-firm order is untouched; another firm takes it */
	apply(lim("third", "FT", "t", 'B', 100, P(10, 1)));
	n_msgs(3);
	fill(1, "mine", "m1", "third", "t", 100, P(10, 1), 2);
}
END_TEST

/* --- rejects and duplicates ------------------------------------------------ */

START_TEST(reject_reasons)
{
	struct engine_cmd c;
	struct {
		struct engine_cmd cmd;
		char reason;
	} cases[14];
	size_t n = 0;

#define CASE(expr, r) do { cases[n].cmd = (expr); cases[n].reason = (r); n++; } while (0)
	CASE(enter_full("u", "F", "r1", 'B', 100, "NOPE", P(10, 0), 0, 'Y', 0), OUCH_REJ_INVALID_STOCK);
	CASE(lim("u", "F", "r2", 'B', 100, P(10, 0) + 50), OUCH_REJ_INVALID_PRICE); /* $10.005 */
	CASE(lim("u", "F", "r3", 'B', 100, P(1, 0) + 1), OUCH_REJ_INVALID_PRICE); /* $1.0001 */
	CASE(lim("u", "F", "r4", 'B', 100, 0), OUCH_REJ_INVALID_PRICE);
	CASE(lim("u", "F", "r5", 'B', 0, P(10, 0)), OUCH_REJ_INVALID_SHARES);
	CASE(lim("u", "F", "r6", 'B', 1000001, P(10, 0)), OUCH_REJ_SHARES_EXCEED_THRESHOLD);
	CASE(enter_full("u", "F", "r7", 'B', 100, "AAPL", P(10, 0), 0, 'X', 0), OUCH_REJ_INVALID_DISPLAY);
	CASE(enter_full("u", "F", "r8", 'B', 100, "AAPL", P(10, 0), 0, 'M', 0), OUCH_REJ_INVALID_DISPLAY);
	CASE(lim("u", "F", "r9", 'X', 100, P(10, 0)), OUCH_REJ_INVALID_SIDE);
	CASE(enter_full("u", "F", "r10", 'B', 100, "AAPL", P(10, 0), 99997, 'Y', 0), OUCH_REJ_INVALID_TIF);
	CASE(enter_full("u", "F", "r11", 'B', 100, "AAPL", P(10, 0), 86401, 'Y', 0), OUCH_REJ_INVALID_TIF);
	CASE(enter_full("u", "F", "r12", 'B', 100, "AAPL", P(10, 0), 0, 'Y', 101), OUCH_REJ_INVALID_MIN_QTY);
	CASE(lim("u", "F", "r13", 'B', 100, OUCH_PRICE_MAX + 100), OUCH_REJ_INVALID_PRICE);
	c = lim("u", "F", "r14", 'B', 100, P(10, 0));
	c.u.enter.capacity = 'Z';
	CASE(c, OUCH_REJ_INVALID_CAPACITY);
#undef CASE
	for (size_t i = 0; i < n; i++) {
		apply(cases[i].cmd);
		n_msgs(1);
		rejected(0, "u", cases[i].cmd.u.enter.token, cases[i].reason);
		ck_assert_uint_eq(C.v[0].m.u.rejected.timestamp, T % DAY);
	}
	ck_assert_uint_eq(stats().rejects, n);
	ck_assert_uint_eq(stats().orders_open, 0);
	/* below $1 the tick is $0.0001: accepted; the largest shares too */
	rest(lim("u", "F", "ok1", 'B', 100, 5001));
	rest(lim("u", "F", "ok2", 'B', 999999, P(1, 0)));
	/* a rejected order's token is used up */
	apply(lim("u", "F", "r5", 'B', 100, P(10, 0)));
	n_msgs(0);
}
END_TEST

START_TEST(duplicate_token_ignored)
{
	rest(lim("u1", "F1", "t", 'S', 100, P(10, 0)));
	/* live duplicate */
	apply(lim("u1", "F1", "t", 'S', 100, P(10, 0)));
	n_msgs(0);
	/* the same token of another user is fine */
	rest(lim("u2", "F2", "t", 'S', 100, P(10, 5)));
	/* after t died (filled), still ignored */
	apply(lim("bob", "FB", "b", 'B', 100, P(10, 0)));
	n_msgs(3);
	apply(lim("u1", "F1", "t", 'B', 5, P(9, 0)));
	n_msgs(0);
	/* and after a cancel */
	apply(cxl("u2", "t", 0));
	n_msgs(1);
	apply(lim("u2", "F2", "t", 'S', 100, P(10, 5)));
	n_msgs(0);
	/* a replacement token that was used is ignored too */
	rest(lim("u1", "F1", "t2", 'S', 100, P(10, 0)));
	apply(replace("u1", "t2", "t", 100, P(10, 1), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(0);
	ck_assert_uint_eq(stats().ignored_duplicates, 4);
	ck_assert_uint_eq(stats().orders_open, 1);
}
END_TEST

/* --- time ----------------------------------------------------------------- */

START_TEST(tif_expiry_on_command)
{
	rest(enter_full("u1", "F1", "e5", 'S', 100, "AAPL", P(10, 0), 5, 'Y', 0));
	T += 5 * NS - 1;
	apply(lim("u2", "F2", "x", 'S', 10, P(11, 0)));
	n_msgs(1);
	/* at entry + 5 s the order expires, before the command applies */
	T += 1;
	apply(lim("bob", "FB", "b", 'B', 100, P(10, 0)));
	n_msgs(2);
	canceled(0, "u1", "e5", 100, OUCH_CXL_TIMEOUT);
	accepted(1, "bob", "b");
	ck_assert_uint_eq(stats().expired, 1);
	ck_assert_uint_eq(stats().orders_open, 2);
}
END_TEST

START_TEST(tif_expiry_on_advance)
{
	rest(enter_full("u1", "F1", "late", 'S', 100, "AAPL", P(10, 0), 20, 'Y', 0));
	T += NS;
	rest(enter_full("u2", "F2", "e1", 'S', 100, "AAPL", P(10, 1), 10, 'Y', 0));
	rest(enter_full("u3", "F3", "e2", 'B', 100, "MSFT", P(10, 1), 10, 'N', 0));
	rest(lim("u4", "F4", "day", 'S', 100, P(10, 2)));
	advance(9 * NS);
	n_msgs(0);
	/* e1 and e2 expire together: in order of reference number */
	advance(2 * NS);
	n_msgs(2);
	canceled(0, "u2", "e1", 100, OUCH_CXL_TIMEOUT);
	canceled(1, "u3", "e2", 100, OUCH_CXL_TIMEOUT);
	/* a partially filled order expires with what is left */
	apply(lim("bob", "FB", "b", 'B', 30, P(10, 0)));
	n_msgs(3);
	advance(10 * NS);
	n_msgs(1);
	canceled(0, "u1", "late", 70, OUCH_CXL_TIMEOUT);
	/* a replace restarts the clock */
	rest(enter_full("u5", "F5", "r", 'S', 100, "AAPL", P(10, 3), 10, 'Y', 0));
	advance(8 * NS);
	apply(replace("u5", "r", "r2", 90, P(10, 3), 10, 'Y', 0));
	n_msgs(1);
	advance(8 * NS);
	n_msgs(0);
	advance(2 * NS);
	n_msgs(1);
	canceled(0, "u5", "r2", 90, OUCH_CXL_TIMEOUT);
	ck_assert_uint_eq(stats().orders_open, 1);
	ck_assert_uint_eq(stats().expired, 4);
}
END_TEST

START_TEST(cancel_all)
{
	rest(lim("u1", "F1", "a", 'S', 100, P(10, 0)));
	rest(enter_full("u1", "F1", "b", 'B', 200, "MSFT", P(20, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	rest(lim("u2", "F2", "x", 'S', 100, P(10, 0)));
	rest(enter_full("u1", "F1", "c", 'S', 300, "ZVZZT", P(5, 0), OUCH_TIF_SYSTEM_HOURS, 'N', 0));
	apply(base(ENGINE_CANCEL_ALL, "u1", ""));
	n_msgs(3);
	canceled(0, "u1", "a", 100, OUCH_CXL_USER);
	canceled(1, "u1", "b", 200, OUCH_CXL_USER);
	canceled(2, "u1", "c", 300, OUCH_CXL_USER);
	ck_assert_uint_eq(stats().orders_open, 1);
	apply(base(ENGINE_CANCEL_ALL, "u1", ""));
	n_msgs(0);
	apply(base(ENGINE_CANCEL_ALL, "nobody", ""));
	n_msgs(0);
}
END_TEST

START_TEST(hash_tracks_state)
{
	uint64_t h0 = engine_hash(E), h1, h2;

	rest(lim("u1", "F1", "a", 'S', 100, P(10, 0)));
	h1 = engine_hash(E);
	ck_assert_uint_ne(h0, h1);
	apply(cxl("u1", "a", 99));
	h2 = engine_hash(E);
	ck_assert_uint_ne(h1, h2);
	ck_assert_int_eq(engine_verify(E), 0);
	/* a read does not change it */
	ck_assert_uint_eq(h2, engine_hash(E));
}
END_TEST

/* --- the trading day ---------------------------------------------------------- */

static struct engine_cmd dayev(uint32_t kind, uint32_t day)
{
	struct engine_cmd c = base(ENGINE_DAY, "", "");

	c.u.day.kind = kind;
	c.u.day.day = day;
	return c;
}

static void day_is(uint32_t day, uint64_t base_seq, int open)
{
	struct engine_day d;

	engine_get_day(E, &d);
	ck_assert_uint_eq(d.day, day);
	ck_assert_uint_eq(d.base, base_seq);
	ck_assert_int_eq(d.open, open);
}

/* END_OF_DAY cancels every resting order, reason 'E', in book order
 * (symbol, bids then asks, best price first, displayed before hidden, time
 * priority); while closed Enter and Replace are Rejected 'C'; START_OF_DAY
 * opens day 2 at its seq, and the day's tokens may be used again. */
START_TEST(day_end_cancels_and_start_reopens)
{
	struct engine_stats st;

	day_is(1, 1, 1);
	rest(lim("alice", "FA", "a1", 'S', 100, P(10, 0)));
	rest(lim("bob", "FB", "b1", 'B', 100, P(9, 0)));
	rest(enter_full("bob", "FB", "b2", 'S', 50, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'N', 0));
	rest(enter_full("carol", "FC", "c1", 'B', 10, "MSFT", P(20, 0), 60, 'Y', 0));
	rest(lim("alice", "FA", "a2", 'S', 100, P(10, 1)));
	rest(lim("bob", "FB", "b3", 'B', 70, P(9, 50)));
	apply(cxl("alice", "a1", 60)); /* 40 off: 60 left */
	T += NS;
	apply(dayev(ENGINE_DAY_END, 1));
	n_msgs(6);
	canceled(0, "bob", "b3", 70, OUCH_CXL_CLOSED);
	canceled(1, "bob", "b1", 100, OUCH_CXL_CLOSED);
	canceled(2, "alice", "a1", 60, OUCH_CXL_CLOSED);
	canceled(3, "bob", "b2", 50, OUCH_CXL_CLOSED);
	canceled(4, "alice", "a2", 100, OUCH_CXL_CLOSED);
	canceled(5, "carol", "c1", 10, OUCH_CXL_CLOSED);
	day_is(1, 1, 0);
	st = stats();
	ck_assert_uint_eq(st.orders_open, 0);
	ck_assert_uint_eq(st.closed_cancels, 6);
	ck_assert_uint_eq(st.day_events, 1);
	ck_assert_int_eq(engine_verify(E), 0);
	/* closed: Enter and Replace are Rejected 'C' */
	apply(lim("alice", "FA", "a3", 'S', 100, P(10, 0)));
	n_msgs(1);
	rejected(0, "alice", "a3", OUCH_REJ_CLOSED);
	apply(lim("alice", "FA", "a3", 'S', 100, P(10, 0))); /* its token is used */
	n_msgs(0);
	apply(lim("dave", "FD", "d1", 'B', 1, P(1, 0))); /* a login not seen before */
	rejected(0, "dave", "d1", OUCH_REJ_CLOSED);
	apply(replace("bob", "b1", "b9", 10, P(9, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(1);
	rejected(0, "bob", "b9", OUCH_REJ_CLOSED);
	/* Cancel, Modify, Cancel All find no live order, as always */
	apply(cxl("bob", "b1", 0));
	n_msgs(1);
	msg_at(0, "bob", OUCH_CANCEL_REJECT);
	apply(mod("alice", "a2", 'S', 10));
	n_msgs(0);
	apply(base(ENGINE_CANCEL_ALL, "carol", "FC"));
	n_msgs(0);
	/* a time that passes while closed expires nothing: nothing rests */
	advance(120 * NS);
	n_msgs(0);
	st = stats();
	ck_assert_uint_eq(st.closed_rejects, 3);
	/* START of day 2, at this seq: open, tokens of day 1 usable again */
	apply(dayev(ENGINE_DAY_START, 2));
	n_msgs(0);
	day_is(2, SEQ, 1);
	ck_assert_uint_eq(stats().tokens, 0);
	rest(lim("alice", "FA", "a1", 'S', 100, P(10, 0)));
	rest(lim("alice", "FA", "a3", 'S', 100, P(10, 1)));
	apply(lim("bob", "FB", "b1", 'B', 100, P(10, 0)));
	n_msgs(3);
	accepted(0, "bob", "b1");
	fill(1, "alice", "a1", "bob", "b1", 100, P(10, 0), 1);
	ck_assert_uint_eq(stats().day_events, 2);
}
END_TEST

/* Day events out of order change nothing but day_ignored (and not the
 * hash); a START while the day is still open ends it first. */
START_TEST(day_events_out_of_order)
{
	uint64_t h;
	uint64_t start_seq;

	rest(lim("alice", "FA", "a1", 'S', 100, P(10, 0)));
	h = engine_hash(E);
	apply(dayev(ENGINE_DAY_END, 2)); /* not the current day */
	apply(dayev(ENGINE_DAY_START, 3)); /* not the next */
	apply(dayev(ENGINE_DAY_START, 1));
	apply(dayev(ENGINE_DAY_END, 0));
	apply(dayev(7, 2)); /* a kind not known */
	n_msgs(0);
	ck_assert_uint_eq(stats().day_ignored, 5);
	ck_assert_uint_eq(stats().day_events, 0);
	ck_assert_uint_eq(engine_hash(E), h);
	day_is(1, 1, 1);
	apply(dayev(ENGINE_DAY_END, 1));
	n_msgs(1);
	h = engine_hash(E);
	apply(dayev(ENGINE_DAY_END, 1)); /* closed already */
	n_msgs(0);
	ck_assert_uint_eq(stats().day_ignored, 6);
	ck_assert_uint_eq(engine_hash(E), h);
	apply(dayev(ENGINE_DAY_START, 2));
	start_seq = SEQ;
	day_is(2, start_seq, 1);
	apply(dayev(ENGINE_DAY_START, 2)); /* day 2 is open already */
	ck_assert_uint_eq(stats().day_ignored, 7);
	day_is(2, start_seq, 1);
	/* START of day 3 while day 2 is open: day 2 ends first */
	rest(lim("bob", "FB", "b1", 'B', 100, P(9, 0)));
	apply(dayev(ENGINE_DAY_START, 3));
	n_msgs(1);
	canceled(0, "bob", "b1", 100, OUCH_CXL_CLOSED);
	day_is(3, SEQ, 1);
	ck_assert_uint_eq(stats().day_events, 3);
	ck_assert_uint_eq(stats().orders_open, 0);
}
END_TEST

/* The state hash tells open from closed, and one day from another, even
 * with an empty book. */
START_TEST(day_in_hash)
{
	uint64_t h_open = engine_hash(E), h_closed, h_day2, h_day2_closed;

	apply(dayev(ENGINE_DAY_END, 1));
	h_closed = engine_hash(E);
	ck_assert_uint_ne(h_closed, h_open);
	apply(dayev(ENGINE_DAY_START, 2));
	h_day2 = engine_hash(E);
	ck_assert_uint_ne(h_day2, h_open);
	ck_assert_uint_ne(h_day2, h_closed);
	apply(dayev(ENGINE_DAY_END, 2));
	h_day2_closed = engine_hash(E);
	ck_assert_uint_ne(h_day2_closed, h_closed);
	ck_assert_uint_ne(h_day2_closed, h_day2);
	ck_assert_int_eq(engine_verify(E), 0);
}
END_TEST

/* --- pools ------------------------------------------------------------------ */

START_TEST(pool_exhaustion)
{
	engine_destroy(E);
	setup_with(3, 8, 2, 3);
	rest(lim("u1", "F1", "a", 'S', 100, P(10, 0)));
	rest(lim("u1", "F1", "b", 'S', 100, P(10, 1)));
	/* a third level on the ask side: no room */
	apply(lim("u1", "F1", "c", 'S', 100, P(10, 2)));
	rejected(0, "u1", "c", OUCH_REJ_OTHER);
	/* an existing level is fine, and fills the order pool */
	rest(lim("u1", "F1", "d", 'S', 100, P(10, 1)));
	apply(lim("u2", "F2", "e", 'B', 100, P(9, 0)));
	rejected(0, "u2", "e", OUCH_REJ_OTHER);
	/* users: u1, u2, u3; a fourth login cannot be remembered */
	apply(lim("u3", "F3", "f", 'B', 100, P(9, 0)));
	rejected(0, "u3", "f", OUCH_REJ_OTHER);
	apply(lim("u4", "F4", "g", 'B', 100, P(9, 0)));
	rejected(0, "u4", "g", OUCH_REJ_OTHER);
	/* a marketable IOC needs no level; a free slot appears */
	apply(cxl("u1", "a", 0));
	apply(enter_full("u2", "F2", "h", 'B', 50, "AAPL", P(10, 1), OUCH_TIF_IOC, 'Y', 0));
	n_msgs(3);
	/* tokens: a b c d e f h remembered (7 of 8); dead, oldest first: c e f a h */
	rest(lim("u2", "F2", "i", 'B', 10, P(9, 0)));
	ck_assert_uint_eq(stats().tokens, 8);
	/* a full token table forgets its oldest dead token (c); j is rejected
	 * for the order pool, not for the tokens */
	apply(lim("u2", "F2", "j", 'B', 10, P(9, 0)));
	rejected(0, "u2", "j", OUCH_REJ_OTHER);
	ck_assert_uint_eq(stats().tokens_forgotten, 1);
	/* a replace still finds room (e is forgotten) */
	apply(replace("u2", "i", "k", 5, P(9, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	replaced(0, "u2", "k", "i", 5, P(9, 0));
	ck_assert_uint_eq(stats().tokens, 8);
	ck_assert_uint_eq(stats().tokens_forgotten, 2);
	/* j, dead but remembered, is a duplicate; c, forgotten, is new again */
	apply(lim("u2", "F2", "j", 'B', 10, P(9, 0)));
	n_msgs(0);
	apply(lim("u1", "F1", "c", 'S', 100, P(10, 2)));
	rejected(0, "u1", "c", OUCH_REJ_OTHER);
	ck_assert_uint_eq(stats().tokens_forgotten, 3);
	ck_assert_int_eq(engine_verify(E), 0);
}
END_TEST

/* A day far longer than the token table: 200,000 orders through a table of
 * 64 tokens, every one accepted; the most recent dead tokens are still
 * duplicates, the old ones are forgotten, and the book stays consistent. */
START_TEST(tokens_bounded)
{
	char tok[OUCH_TOKEN_LEN + 1];
	const uint32_t n = 200000 / R_SHORTER;

	engine_destroy(E);
	setup_with(16, 64, 8, 4);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(tok, sizeof(tok), "T%08u", i);
		apply(lim("u1", "F1", tok, i % 2 ? 'S' : 'B', 100, P(10, i % 2 ? 5 : 0)));
		accepted(0, "u1", tok);
		if (i % 3 == 0) /* a third stay until later */
			continue;
		apply(cxl("u1", tok, 0));
		canceled(0, "u1", tok, 100, OUCH_CXL_USER);
		if (i % 3 == 2) {
			snprintf(tok, sizeof(tok), "T%08u", i - 2);
			apply(cxl("u1", tok, 0));
		}
		if (i % 4096 == 0)
			ck_assert_int_eq(engine_verify(E), 0);
	}
	ck_assert_uint_eq(stats().accepted, n);
	ck_assert_uint_le(stats().tokens, 64);
	ck_assert_uint_ge(stats().tokens_forgotten, n - 64);
	/* the last token died a moment ago: still a duplicate */
	apply(lim("u1", "F1", tok, 'B', 100, P(10, 0)));
	n_msgs(0);
	ck_assert_uint_eq(stats().ignored_duplicates, 1);
	/* the first one is long forgotten: new again */
	apply(lim("u1", "F1", "T00000000", 'B', 100, P(10, 0)));
	accepted(0, "u1", "T00000000");
	ck_assert_int_eq(engine_verify(E), 0);
}
END_TEST

/* Issue 17: a user churning orders through a table of 64 tokens. Without a
 * quota it makes the engine forget another user's dead tokens; with a
 * quota of 4 it forgets only its own oldest, and the other's stay
 * duplicates. */
static void churn(const char *user, uint32_t n)
{
	char tok[OUCH_TOKEN_LEN + 1];

	for (uint32_t i = 0; i < n; i++) {
		snprintf(tok, sizeof(tok), "c%u", i);
		apply(lim(user, "F1", tok, 'B', 100, P(9, 0)));
		accepted(0, user, tok);
		apply(cxl(user, tok, 0));
		canceled(0, user, tok, 100, OUCH_CXL_USER);
	}
}

START_TEST(user_token_quota_forgets_own)
{
	/* without a quota: u1's churn forgets u2's x1 */
	engine_destroy(E);
	setup_quota(16, 64, 0);
	rest(lim("u2", "F2", "x1", 'S', 100, P(10, 0)));
	apply(cxl("u2", "x1", 0));
	churn("u1", 100);
	ck_assert_uint_gt(stats().tokens_forgotten, 0);
	apply(lim("u2", "F2", "x1", 'S', 100, P(10, 0)));
	accepted(0, "u2", "x1");
	ck_assert_int_eq(engine_verify(E), 0);
	engine_destroy(E);
	free(C.v);

	/* with a quota of 4: u1 forgets its own, u2's are remembered */
	setup_quota(16, 64, 4);
	rest(lim("u2", "F2", "x1", 'S', 100, P(10, 0)));
	apply(cxl("u2", "x1", 0));
	rest(lim("u2", "F2", "x2", 'S', 100, P(10, 0)));
	apply(cxl("u2", "x2", 0));
	churn("u1", 100);
	ck_assert_uint_eq(stats().tokens_forgotten, 0);
	ck_assert_uint_eq(stats().user_tokens_forgotten, 96);
	ck_assert_uint_eq(stats().tokens, 2 + 4);
	ck_assert_int_eq(engine_verify(E), 0);
	/* u2's old dead tokens are still duplicates */
	apply(lim("u2", "F2", "x1", 'S', 100, P(10, 0)));
	n_msgs(0);
	apply(lim("u2", "F2", "x2", 'S', 100, P(10, 0)));
	n_msgs(0);
	ck_assert_uint_eq(stats().ignored_duplicates, 2);
	/* u1's oldest is forgotten: c0 is new again (room for it forgets c96) */
	apply(lim("u1", "F1", "c0", 'B', 100, P(9, 0)));
	accepted(0, "u1", "c0");
	ck_assert_uint_eq(stats().user_tokens_forgotten, 97);
	/* its most recent dead one is still a duplicate (room made first: c97
	 * goes) */
	apply(lim("u1", "F1", "c99", 'B', 100, P(9, 0)));
	n_msgs(0);
	ck_assert_uint_eq(stats().ignored_duplicates, 3);
	ck_assert_uint_eq(stats().user_tokens_forgotten, 98);
	apply(lim("u1", "F1", "c97", 'B', 100, P(9, 0)));
	accepted(0, "u1", "c97");
	ck_assert_uint_eq(stats().user_token_quota, 0);
	ck_assert_int_eq(engine_verify(E), 0);
}
END_TEST

/* A user whose quota is all live tokens gets 'q' (its token not consumed);
 * a Replace then is Rejected 'q' under the replacement token and the order
 * stays; a duplicate is still ignored; once one dies there is room. */
START_TEST(user_token_quota_all_live)
{
	engine_destroy(E);
	setup_quota(16, 64, 3);
	rest(lim("u3", "F3", "q1", 'S', 100, P(10, 0)));
	rest(lim("u3", "F3", "q2", 'S', 100, P(10, 1)));
	rest(lim("u3", "F3", "q3", 'S', 100, P(10, 2)));
	apply(lim("u3", "F3", "q4", 'S', 100, P(10, 3)));
	rejected(0, "u3", "q4", OUCH_REJ_OPEN_QUOTA);
	ck_assert_uint_eq(stats().user_token_quota, 1);
	ck_assert_uint_eq(stats().risk_rejects, 0);
	ck_assert_uint_eq(stats().tokens, 3);
	/* not consumed: the same again is rejected again, not ignored */
	apply(lim("u3", "F3", "q4", 'S', 100, P(10, 3)));
	rejected(0, "u3", "q4", OUCH_REJ_OPEN_QUOTA);
	/* another rejection (unknown symbol) takes precedence, and consumes
	 * nothing either */
	apply(enter_full("u3", "F3", "q5", 'S', 100, "NOPE", P(10, 3), OUCH_TIF_SYSTEM_HOURS,
			 'Y', 0));
	rejected(0, "u3", "q5", OUCH_REJ_INVALID_STOCK);
	ck_assert_uint_eq(stats().tokens, 3);
	/* a live duplicate is ignored, not rejected */
	apply(lim("u3", "F3", "q2", 'S', 100, P(10, 3)));
	n_msgs(0);
	/* Replace: Rejected under the replacement token, the order untouched */
	apply(replace("u3", "q2", "q6", 50, P(10, 1), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	rejected(0, "u3", "q6", OUCH_REJ_OPEN_QUOTA);
	ck_assert_uint_eq(stats().user_token_quota, 3);
	ck_assert_uint_eq(stats().orders_open, 3);
	/* other users are not limited by u3's quota */
	rest(lim("u4", "F4", "q4", 'B', 100, P(9, 0)));
	/* once q1 dies, q4 takes its place (q1 forgotten) */
	apply(cxl("u3", "q1", 0));
	canceled(0, "u3", "q1", 100, OUCH_CXL_USER);
	rest(lim("u3", "F3", "q4", 'S', 100, P(10, 3)));
	ck_assert_uint_eq(stats().user_tokens_forgotten, 1);
	apply(lim("u3", "F3", "q1", 'S', 100, P(10, 4)));
	rejected(0, "u3", "q1", OUCH_REJ_OPEN_QUOTA);
	/* and the replace goes through once there is a dead token to forget */
	apply(cxl("u3", "q3", 0));
	apply(replace("u3", "q2", "q6", 50, P(10, 1), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	replaced(0, "u3", "q6", "q2", 50, P(10, 1));
	ck_assert_int_eq(engine_verify(E), 0);
}
END_TEST

START_TEST(bad_config)
{
	struct engine *e = (struct engine *)&C;
	const char *const dup[] = { "AAPL", "AAPL" };
	const char *const longname[] = { "TOOLONGXX" };
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = 8,
		.max_tokens = 16, .max_levels = 8,
	};

	cfg.max_orders = 0;
	ck_assert_int_eq(engine_create(&e, &cfg), -EINVAL);
	/* the tokens must outnumber the orders: room for a dead one */
	cfg.max_orders = 16;
	ck_assert_int_eq(engine_create(&e, &cfg), -EINVAL);
	cfg.max_orders = 8;
	ck_assert_int_eq(engine_create(&e, &cfg), 0);
	engine_destroy(e);
	e = (struct engine *)&C;
	cfg.symbols = dup;
	cfg.n_symbols = 2;
	ck_assert_int_eq(engine_create(&e, &cfg), -EINVAL);
	cfg.symbols = longname;
	cfg.n_symbols = 1;
	ck_assert_int_eq(engine_create(&e, &cfg), -EINVAL);
	ck_assert_ptr_eq(e, (struct engine *)&C);
	engine_destroy(NULL);
}
END_TEST

/* --- pre-trade risk ----------------------------------------------------------- */

static struct engine_cmd adm(uint32_t kind, uint32_t scope, const char *name)
{
	struct engine_cmd c = base(ENGINE_ADMIN, "", "");

	c.u.admin.kind = kind;
	c.u.admin.scope = scope;
	scopy(c.u.admin.name, sizeof(c.u.admin.name), name);
	return c;
}

/* LIMITS of a firm or user, the limits as risk.h's text. */
static struct engine_cmd adm_limits(uint32_t scope, const char *name, const char *text)
{
	struct engine_cmd c = adm(ENGINE_ADMIN_LIMITS, scope, name);
	char err[128];

	ck_assert_msg(risk_limits_parse(text, &c.u.admin.limits, err, sizeof(err)) == 0, "%s", err);
	return c;
}

static struct engine_cmd adm_kill(uint32_t scope, const char *name, int cancel)
{
	struct engine_cmd c = adm(ENGINE_ADMIN_KILL, scope, name);

	c.u.admin.cancel = cancel;
	return c;
}

static struct engine_cmd adm_ref(const char *sym, uint32_t price)
{
	struct engine_cmd c = adm(ENGINE_ADMIN_REFERENCE, ENGINE_SCOPE_SYMBOL, sym);

	c.u.admin.price = price;
	return c;
}

/* E replaced by an engine with these configuration risk entries. */
static void recreate(const struct engine_cmd *entries, size_t n)
{
	struct engine_admin_cmd a[16];
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = 1024,
		.max_tokens = 4096, .max_levels = 64, .risk = a, .n_risk = n,
	};

	ck_assert_uint_le(n, 16);
	for (size_t i = 0; i < n; i++)
		a[i] = entries[i].u.admin;
	engine_destroy(E);
	ck_assert_int_eq(engine_create(&E, &cfg), 0);
}

/* An Enter that must be Rejected with reason, and one that must rest. */
static void refused(struct engine_cmd c, char reason)
{
	apply(c);
	n_msgs(1);
	rejected(0, c.user, c.u.enter.token, reason);
}

static struct engine_risk_view risk_of(uint32_t scope, const char *name)
{
	struct engine_risk_view v;

	memset(&v, 0xa5, sizeof(v));
	ck_assert_int_eq(engine_get_risk(E, scope, name, &v), 0);
	ck_assert_uint_eq(v.limits.set, RISK_ALL);
	return v;
}

/* A day limit order, displayed, on MSFT. */
static struct engine_cmd msft(const char *user, const char *firm, const char *token, char side,
			      uint32_t shares, uint32_t price)
{
	return enter_full(user, firm, token, side, shares, "MSFT", price, OUCH_TIF_SYSTEM_HOURS, 'Y', 0);
}

/* Each limit rejects with its reason just past its bound and passes at it. */
START_TEST(risk_limits_each_reason)
{
	struct engine_stats st;

	apply(adm_limits(ENGINE_SCOPE_USER, "UQ", "max_qty=100"));
	apply(adm_limits(ENGINE_SCOPE_USER, "UN", "max_notional=10000"));
	apply(adm_limits(ENGINE_SCOPE_USER, "UC", "collar=5%"));
	apply(adm_limits(ENGINE_SCOPE_USER, "UO", "max_open=2"));
	apply(adm_limits(ENGINE_SCOPE_USER, "UR", "credit=20000"));
	apply(adm_ref("AAPL", P(100, 0)));
	ck_assert_uint_eq(stats().admin_events, 6);
	/* max_qty: shares */
	refused(lim("UQ", "F1", "q1", 'B', 101, P(90, 0)), 'm');
	rest(lim("UQ", "F1", "q2", 'B', 100, P(90, 0)));
	apply(lim("UQ", "F1", "q1", 'B', 1, P(90, 0))); /* the rejected token was consumed */
	n_msgs(0);
	ck_assert_uint_eq(stats().ignored_duplicates, 1);
	/* max_notional: $100 x 100 = $10,000 */
	refused(lim("UN", "F1", "n1", 'B', 101, P(99, 1)), 'n');
	rest(lim("UN", "F1", "n2", 'B', 100, P(99, 0)));
	rest(lim("UN", "F1", "n3", 'B', 10000, P(1, 0)));
	/* collar: 5% of the $100 reference, both ways */
	refused(lim("UC", "F1", "c1", 'S', 10, P(105, 1)), 'X');
	refused(lim("UC", "F1", "c2", 'B', 10, P(94, 99)), 'X');
	rest(lim("UC", "F1", "c3", 'S', 10, P(105, 0)));
	rest(lim("UC", "F1", "c4", 'B', 10, P(95, 0)));
	/* a market order is never collared */
	apply(enter_full("UC", "F1", "c5", 'B', 5, "MSFT", OUCH_PRICE_MARKET, 0, 'Y', 0));
	accepted(0, "UC", "c5");
	canceled(1, "UC", "c5", 5, OUCH_CXL_IOC);
	/* max_open: resting orders at once */
	rest(lim("UO", "F1", "o1", 'B', 1, P(80, 0)));
	rest(lim("UO", "F1", "o2", 'B', 1, P(80, 0)));
	refused(lim("UO", "F1", "o3", 'B', 1, P(80, 0)), 'q');
	apply(cxl("UO", "o1", 0));
	rest(lim("UO", "F1", "o4", 'B', 1, P(80, 0)));
	/* credit: resting notional plus this one's */
	rest(msft("UR", "F2", "r1", 'B', 100, P(90, 0)));
	rest(msft("UR", "F2", "r2", 'B', 100, P(110, 0)));
	refused(msft("UR", "F2", "r3", 'B', 1, P(1, 0)), 'r');
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "UR").open_notional, 100ull * P(200, 0));
	/* a fill releases credit: UX's sell takes 60 of r2 at $110 */
	apply(msft("UX", "F3", "x1", 'S', 60, P(110, 0)));
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "UR").open_notional, 100ull * P(90, 0) + 40ull * P(110, 0));
	refused(msft("UR", "F2", "r4", 'B', 67, P(100, 0)), 'r');
	rest(msft("UR", "F2", "r5", 'B', 66, P(100, 0))); /* $20,000 exactly */
	/* and a cancel, partial ($5,400 back) then full */
	apply(cxl("UR", "r1", 40));
	refused(msft("UR", "F2", "r7", 'B', 55, P(100, 0)), 'r');
	rest(msft("UR", "F2", "r6", 'B', 54, P(100, 0)));
	apply(cxl("UR", "r6", 0));
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "UR").open_orders, 3);
	st = stats();
	ck_assert_uint_eq(st.risk_qty, 1);
	ck_assert_uint_eq(st.risk_notional, 1);
	ck_assert_uint_eq(st.risk_collar, 2);
	ck_assert_uint_eq(st.risk_open, 1);
	ck_assert_uint_eq(st.risk_credit, 3);
	ck_assert_uint_eq(st.risk_killed, 0);
	ck_assert_uint_eq(st.risk_rejects, 8);
	ck_assert_uint_eq(st.rejects, 8);
}
END_TEST

/* Field by field: tape[name], config[name], tape["*"], config["*"]; the
 * user's limits before the firm's; a given 0 is no limit. */
START_TEST(risk_precedence)
{
	const struct engine_cmd cfg[] = {
		adm_limits(ENGINE_SCOPE_FIRM, "F1", "max_qty=500 max_open=3"),
		adm_limits(ENGINE_SCOPE_USER, "*", "max_qty=300"),
		adm_limits(ENGINE_SCOPE_FIRM, "*", "max_qty=1000 max_notional=1000000"),
		adm_limits(ENGINE_SCOPE_USER, "U2", "max_qty=50"),
		adm_ref("NOPE", P(1, 0)), /* another partition's symbol */
	};
	struct engine_risk_view v;

	recreate(cfg, 5);
	refused(lim("U1", "F1", "a1", 'B', 301, P(10, 0)), 'm'); /* config "*" */
	rest(lim("U1", "F1", "a2", 'B', 300, P(10, 0)));
	refused(lim("U2", "F1", "b1", 'B', 51, P(10, 0)), 'm'); /* config[name] */
	apply(adm_limits(ENGINE_SCOPE_USER, "*", "max_qty=200"));
	refused(lim("U1", "F1", "a3", 'B', 201, P(10, 0)), 'm'); /* tape "*" over config "*" */
	refused(lim("U2", "F1", "b2", 'B', 51, P(10, 0)), 'm'); /* config[name] over tape "*" */
	apply(adm_limits(ENGINE_SCOPE_USER, "U2", "max_qty=none"));
	rest(lim("U2", "F1", "b3", 'B', 500, P(10, 0))); /* no user limit: the firm's 500 */
	refused(lim("U2", "F1", "b4", 'B', 501, P(10, 0)), 'm');
	apply(adm_limits(ENGINE_SCOPE_FIRM, "F1", "max_qty=800"));
	rest(lim("U2", "F1", "b5", 'B', 800, P(10, 0))); /* tape[firm] over config[firm] */
	refused(lim("U2", "F1", "b6", 'B', 1, P(10, 0)), 'q'); /* config max_open=3 still */
	/* another firm: the firms' "*" */
	refused(lim("U3", "F2", "c1", 'B', 150, P(10000, 0)), 'n');
	rest(lim("U3", "F2", "c2", 'B', 100, P(10000, 0)));
	v = risk_of(ENGINE_SCOPE_FIRM, "F1");
	ck_assert_uint_eq(v.limits.max_qty, 800);
	ck_assert_uint_eq(v.limits.max_open, 3);
	ck_assert_uint_eq(v.limits.max_notional, 1000000ull * 10000);
	ck_assert_uint_eq(v.limits.credit, 0);
	ck_assert_uint_eq(v.open_orders, 3);
	ck_assert_uint_eq(v.open_notional, 1600ull * P(10, 0));
	ck_assert_int_eq(v.killed, 0);
	v = risk_of(ENGINE_SCOPE_USER, "U2");
	ck_assert_uint_eq(v.limits.max_qty, 0);
	ck_assert_uint_eq(v.open_orders, 2);
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "U3").limits.max_qty, 200);
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "*").limits.max_qty, 200);
	ck_assert_int_eq(engine_get_risk(E, ENGINE_SCOPE_USER, "NOBODY", &v), -ENOENT);
	ck_assert_int_eq(engine_get_risk(E, ENGINE_SCOPE_FIRM, "F9", &v), -ENOENT);
	ck_assert_int_eq(engine_get_risk(E, ENGINE_SCOPE_SYMBOL, "AAPL", &v), -EINVAL);
	/* LIMITS of a symbol, a kill switch of "*", an unknown symbol, a bad
	 * name: ignored */
	apply(adm_limits(ENGINE_SCOPE_SYMBOL, "AAPL", "max_qty=1"));
	apply(adm_kill(ENGINE_SCOPE_FIRM, "*", 0));
	apply(adm_ref("NOPE", P(1, 0)));
	apply(adm_ref("*", P(1, 0)));
	apply(adm_limits(ENGINE_SCOPE_FIRM, "TOOLONG", "max_qty=1"));
	apply(adm(9, ENGINE_SCOPE_FIRM, "F1"));
	ck_assert_uint_eq(stats().admin_ignored, 6);
	ck_assert_uint_eq(stats().admin_events, 3);
}
END_TEST

/* A kill switch rejects 'a'; with cancel it cancels exactly that firm's
 * open orders ('S', entry order, each to its user); Cancel still works;
 * LIFT restores. */
START_TEST(risk_kill_switch)
{
	struct engine_risk_view v;

	rest(lim("U1", "F1", "A", 'B', 100, P(10, 0)));
	rest(lim("U2", "F2", "B", 'B', 100, P(10, 0)));
	rest(lim("U4", "F1", "C", 'S', 100, P(20, 0)));
	rest(lim("U1", "F1", "D", 'B', 100, P(9, 0)));
	apply(replace("U1", "A", "A2", 50, P(11, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	replaced(0, "U1", "A2", "A", 50, P(11, 0));
	apply(adm_kill(ENGINE_SCOPE_FIRM, "F1", 1));
	n_msgs(3);
	canceled(0, "U1", "A2", 50, OUCH_CXL_SUPERVISORY);
	canceled(1, "U4", "C", 100, OUCH_CXL_SUPERVISORY);
	canceled(2, "U1", "D", 100, OUCH_CXL_SUPERVISORY);
	v = risk_of(ENGINE_SCOPE_FIRM, "F1");
	ck_assert_int_eq(v.killed, 1);
	ck_assert_uint_eq(v.open_orders, 0);
	ck_assert_uint_eq(v.open_notional, 0);
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_FIRM, "F2").open_orders, 1);
	ck_assert_uint_eq(stats().orders_open, 1);
	ck_assert_uint_eq(stats().kill_cancels, 3);
	refused(lim("U1", "F1", "E", 'B', 1, P(10, 0)), 'a');
	refused(lim("U5", "F1", "E", 'B', 1, P(10, 0)), 'a'); /* a new login of the firm */
	rest(lim("U2", "F2", "E", 'S', 1, P(30, 0)));
	/* a user's switch without cancel: its orders stay, Cancel and Modify work */
	apply(adm_kill(ENGINE_SCOPE_USER, "U2", 0));
	n_msgs(0);
	refused(lim("U2", "F2", "F", 'B', 1, P(10, 0)), 'a');
	apply(replace("U2", "B", "B2", 50, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	rejected(0, "U2", "B2", 'a');
	apply(cxl("U2", "B", 60));
	canceled(0, "U2", "B", 40, OUCH_CXL_USER);
	apply(mod("U2", "E", 'T', 1));
	msg_at(0, "U2", OUCH_ORDER_MODIFIED);
	ck_assert_int_eq(risk_of(ENGINE_SCOPE_USER, "U2").killed, 1);
	/* LIFT restores; LIFT of a name never killed is harmless */
	apply(adm(ENGINE_ADMIN_LIFT, ENGINE_SCOPE_FIRM, "F1"));
	apply(adm(ENGINE_ADMIN_LIFT, ENGINE_SCOPE_USER, "U2"));
	apply(adm(ENGINE_ADMIN_LIFT, ENGINE_SCOPE_USER, "NOBODY"));
	rest(lim("U1", "F1", "G", 'B', 1, P(10, 0)));
	rest(lim("U2", "F2", "H", 'B', 1, P(10, 0)));
	ck_assert_int_eq(risk_of(ENGINE_SCOPE_FIRM, "F1").killed, 0);
	ck_assert_uint_eq(stats().risk_killed, 4);
	ck_assert_uint_eq(stats().admin_events, 5);
	/* a user's kill with cancel: that user's orders only, in entry order */
	rest(lim("U4", "F1", "I", 'B', 1, P(10, 0)));
	apply(adm_kill(ENGINE_SCOPE_USER, "U2", 1));
	n_msgs(3);
	canceled(0, "U2", "B", 60, OUCH_CXL_SUPERVISORY);
	canceled(1, "U2", "E", 1, OUCH_CXL_SUPERVISORY);
	canceled(2, "U2", "H", 1, OUCH_CXL_SUPERVISORY);
	ck_assert_uint_eq(stats().orders_open, 2);
}
END_TEST

/* A Replace is checked as an Enter of its new shares and price, without
 * its own order; a failing one leaves the order as it was. */
START_TEST(risk_replace)
{
	uint64_t ref;

	apply(adm_limits(ENGINE_SCOPE_USER, "U1", "max_qty=100 max_open=1 credit=12000"));
	apply(lim("U1", "F1", "A", 'B', 100, P(100, 0)));
	ref = accepted(0, "U1", "A");
	apply(replace("U1", "A", "A2", 101, P(100, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	n_msgs(1);
	rejected(0, "U1", "A2", 'm');
	/* own order not counted: max_open 1 and credit $12,000 pass */
	apply(replace("U1", "A", "A3", 100, P(120, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	ck_assert_uint_gt(replaced(0, "U1", "A3", "A", 100, P(120, 0)), ref);
	apply(replace("U1", "A3", "A4", 100, P(120, 1), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	rejected(0, "U1", "A4", 'r');
	/* the order is as it was: A3, 100 at $120, and the rejected token is free */
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "U1").open_notional, 100ull * P(120, 0));
	apply(replace("U1", "A3", "A4", 90, P(120, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	replaced(0, "U1", "A4", "A3", 90, P(120, 0));
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "U1").open_notional, 90ull * P(120, 0));
	/* a Replace's price is collared too */
	apply(adm_limits(ENGINE_SCOPE_FIRM, "F1", "collar=1%"));
	apply(adm_ref("AAPL", P(120, 0)));
	apply(replace("U1", "A4", "A5", 90, P(125, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	rejected(0, "U1", "A5", 'X');
	apply(cxl("U1", "A4", 0));
	canceled(0, "U1", "A4", 90, OUCH_CXL_USER);
	ck_assert_uint_eq(stats().risk_rejects, 3);
}
END_TEST

/* The reference price: the configuration's, then the last execution's,
 * then ADMIN REFERENCE's; none: no collar. A market order's notional is
 * taken at it. */
START_TEST(risk_collar_reference)
{
	const struct engine_cmd cfg[] = {
		adm_limits(ENGINE_SCOPE_USER, "*", "collar=10%"),
		adm_ref("AAPL", P(100, 0)),
		adm_limits(ENGINE_SCOPE_USER, "UM", "max_notional=1000"),
	};

	recreate(cfg, 3);
	refused(lim("U1", "F1", "a", 'S', 10, P(110, 1)), 'X');
	rest(lim("U1", "F1", "b", 'S', 10, P(110, 0)));
	/* a trade at $110: the reference follows it */
	apply(lim("U2", "F2", "c", 'B', 10, P(110, 0)));
	fill(1, "U1", "b", "U2", "c", 10, P(110, 0), 1);
	rest(lim("U1", "F1", "d", 'S', 10, P(121, 0)));
	refused(lim("U1", "F1", "e", 'S', 10, P(121, 1)), 'X');
	apply(adm_ref("AAPL", P(50, 0)));
	refused(lim("U1", "F1", "f", 'B', 10, P(55, 1)), 'X');
	rest(lim("U1", "F1", "g", 'B', 10, P(55, 0)));
	/* no reference on MSFT: no collar */
	rest(enter_full("U1", "F1", "h", 'B', 10, "MSFT", P(1, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	/* market: notional at the reference ($50 x 21 > $1,000), never collared */
	refused(enter_full("UM", "F3", "m1", 'B', 21, "AAPL", OUCH_PRICE_MARKET, 0, 'Y', 0), 'n');
	apply(enter_full("UM", "F3", "m2", 'S', 20, "AAPL", OUCH_PRICE_MARKET, 0, 'Y', 0));
	accepted(0, "UM", "m2");
	/* no reference: a market order's notional is 0 */
	apply(enter_full("UM", "F3", "m3", 'S', 1000, "MSFT", OUCH_PRICE_MARKET, 0, 'Y', 0));
	accepted(0, "UM", "m3");
	ck_assert_uint_eq(stats().risk_collar, 3);
}
END_TEST

/* The day: END cancels and releases; START keeps limits, kill switches and
 * references. */
/* Both kill switches come before any limit: a killed firm's order that
 * also breaks its user's max_qty is Rejected 'a'. */
START_TEST(risk_kill_before_limits)
{
	apply(adm_limits(ENGINE_SCOPE_USER, "U1", "max_qty=10"));
	apply(adm_kill(ENGINE_SCOPE_FIRM, "F1", 0));
	refused(lim("U1", "F1", "a", 'B', 11, P(10, 0)), 'a');
	apply(adm(ENGINE_ADMIN_LIFT, ENGINE_SCOPE_FIRM, "F1"));
	refused(lim("U1", "F1", "b", 'B', 11, P(10, 0)), 'm');
	rest(lim("U1", "F1", "c", 'B', 10, P(10, 0)));
}
END_TEST

START_TEST(risk_across_days)
{
	struct engine_cmd end = base(ENGINE_DAY, "", ""), start = base(ENGINE_DAY, "", "");

	end.u.day.kind = ENGINE_DAY_END;
	end.u.day.day = 1;
	start.u.day.kind = ENGINE_DAY_START;
	start.u.day.day = 2;
	apply(adm_limits(ENGINE_SCOPE_USER, "U1", "max_qty=10 collar=1%"));
	apply(adm_kill(ENGINE_SCOPE_FIRM, "F2", 0));
	apply(adm_ref("AAPL", P(10, 0)));
	rest(lim("U1", "F1", "a", 'B', 10, P(10, 0)));
	apply(end);
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_USER, "U1").open_orders, 0);
	ck_assert_uint_eq(risk_of(ENGINE_SCOPE_FIRM, "F1").open_notional, 0);
	apply(start);
	refused(lim("U1", "F1", "a", 'B', 11, P(10, 0)), 'm');
	refused(lim("U1", "F1", "b", 'B', 10, P(10, 11)), 'X');
	refused(lim("U3", "F2", "c", 'B', 10, P(10, 0)), 'a');
	rest(lim("U1", "F1", "d", 'B', 10, P(10, 0)));
}
END_TEST

/* The firm table: max_firms, counted in the pools; a full table rejects 'O'. */
START_TEST(risk_firm_table)
{
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = 64,
		.max_tokens = 256, .max_levels = 16, .max_firms = 2,
	};
	struct engine_pool pools[ENGINE_POOLS];

	engine_get_pools(E, pools);
	ck_assert_str_eq(pools[4].name, "firms");
	ck_assert_uint_eq(pools[4].size, 4096);
	engine_destroy(E);
	ck_assert_int_eq(engine_create(&E, &cfg), 0);
	rest(lim("U1", "F1", "a", 'B', 1, P(10, 0)));
	rest(lim("U2", "", "a", 'B', 1, P(10, 0))); /* no firm: no entry */
	apply(adm_kill(ENGINE_SCOPE_FIRM, "F2", 0));
	refused(lim("U3", "F3", "a", 'B', 1, P(10, 0)), 'O');
	apply(adm_kill(ENGINE_SCOPE_FIRM, "F4", 0));
	ck_assert_uint_eq(stats().admin_ignored, 1);
	engine_get_pools(E, pools);
	ck_assert_uint_eq(pools[4].used, 2);
	ck_assert_uint_eq(pools[4].size, 2);
}
END_TEST

/* Configuration entries: bad ones refused, KILL/LIFT and other partitions'
 * symbols not taken; the configuration is in the hash, in any order. */
START_TEST(risk_config_and_hash)
{
	struct engine_cmd a[3] = {
		adm_limits(ENGINE_SCOPE_FIRM, "F1", "max_qty=5"),
		adm_ref("AAPL", P(10, 0)),
		adm_limits(ENGINE_SCOPE_USER, "*", "credit=100"),
	};
	struct engine_cmd b[3] = { a[2], a[0], a[1] };
	struct engine_cmd bad = adm_limits(ENGINE_SCOPE_SYMBOL, "AAPL", "max_qty=5");
	struct engine_cmd kill = adm_kill(ENGINE_SCOPE_FIRM, "F1", 1);
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = 64,
		.max_tokens = 256, .max_levels = 16, .risk = &bad.u.admin, .n_risk = 1,
	};
	struct engine *x;
	uint64_t h0 = engine_hash(E), ha, hb;

	ck_assert_int_eq(engine_create(&x, &cfg), -EINVAL);
	bad = adm_ref("AAPL", 0);
	ck_assert_int_eq(engine_create(&x, &cfg), -EINVAL);
	cfg.risk = &kill.u.admin; /* not taken: as no configuration */
	ck_assert_int_eq(engine_create(&x, &cfg), 0);
	ck_assert_uint_eq(engine_hash(x), h0);
	engine_destroy(x);
	recreate(a, 3);
	ha = engine_hash(E);
	recreate(b, 3);
	hb = engine_hash(E);
	ck_assert_uint_eq(ha, hb);
	ck_assert_uint_ne(ha, h0);
	b[0] = adm_limits(ENGINE_SCOPE_USER, "*", "credit=101");
	recreate(b, 3);
	ck_assert_uint_ne(engine_hash(E), ha);
	/* a configuration's limit and the tape's */
	refused(lim("U1", "F1", "x", 'B', 6, P(1, 0)), 'm');
}
END_TEST

/* --- determinism over a random tape ----------------------------------------- */

#define R_N (200000 / R_SHORTER)
#define R_MIN(n) ((n) / R_SHORTER)
#define R_SYMS 64
#define R_USERS 40
#define R_FIRMS 8

struct rcmd {
	struct engine_cmd c;
	uint64_t t;
	int advance; /* a heartbeat: engine_advance_time instead of a command */
	int fresh; /* a valid Enter with a new token */
};

static char rsym_names[R_SYMS][OUCH_STOCK_LEN + 1];
static const char *rsyms[R_SYMS];

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static uint32_t rprice(uint64_t *s, uint32_t sym)
{
	int off = (int)(rnd(s) % 21) - 10;

	if (sym < 4)
		return (uint32_t)(5000 + 7 * off); /* under $1: sub-penny ticks */
	return (uint32_t)((2000 + (int)sym * 10 + off) * 100);
}

static void rtoken(char *out, uint32_t user, uint32_t k)
{
	snprintf(out, OUCH_TOKEN_LEN + 1, "T%u.%u", user, k);
}

static void gen_enter(struct rcmd *r, uint64_t *s, uint32_t u, uint32_t *next_tok, int market)
{
	uint32_t sym = (uint32_t)(rnd(s) % R_SYMS), shares = 1 + (uint32_t)(rnd(s) % 500);
	uint32_t x = (uint32_t)(rnd(s) % 100), tif = OUCH_TIF_SYSTEM_HOURS, min_qty = 0;
	char token[OUCH_TOKEN_LEN + 1], display = 'Y';
	const char *disp = "YYYYYYYAAN";

	rtoken(token, u, next_tok[u]++);
	if (x < 10)
		tif = OUCH_TIF_IOC;
	else if (x < 25)
		tif = 1 + (uint32_t)(rnd(s) % 120);
	display = disp[rnd(s) % 10];
	if (rnd(s) % 12 == 0)
		display = 'P';
	if (rnd(s) % 10 == 0)
		min_qty = 1 + (uint32_t)(rnd(s) % shares);
	r->c = enter_full(r->c.user, r->c.firm, token, "BSST"[rnd(s) % 4], shares, rsyms[sym],
			  market ? OUCH_PRICE_MARKET : rprice(s, sym), market ? OUCH_TIF_IOC : tif,
			  display, min_qty);
}

static void gen_one(struct rcmd *r, uint64_t *s, uint32_t *next_tok)
{
	uint32_t u = (uint32_t)(rnd(s) % R_USERS), x = (uint32_t)(rnd(s) % 100), back;
	char user[8], firm[8], tok[OUCH_TOKEN_LEN + 1], tok2[OUCH_TOKEN_LEN + 1];

	snprintf(user, sizeof(user), "U%02u", u);
	snprintf(firm, sizeof(firm), "F%u", u % R_FIRMS);
	r->c = base(ENGINE_ENTER, user, firm);
	back = next_tok[u] ? (uint32_t)(rnd(s) % (next_tok[u] < 30 ? next_tok[u] : 30)) + 1 : 1;
	rtoken(tok, u, next_tok[u] >= back ? next_tok[u] - back : 0);
	if (x < 50) {
		gen_enter(r, s, u, next_tok, 0);
		r->fresh = 1;
	} else if (x < 54) {
		gen_enter(r, s, u, next_tok, 1);
	} else if (x < 69) {
		r->c = cxl(user, tok, rnd(s) % 2 ? 0 : (uint32_t)(rnd(s) % 300));
	} else if (x < 84) {
		uint32_t sym = (uint32_t)(rnd(s) % R_SYMS);

		rtoken(tok2, u, next_tok[u]++);
		r->c = replace(user, tok, tok2, 1 + (uint32_t)(rnd(s) % 400), rprice(s, sym),
			       rnd(s) % 8 ? OUCH_TIF_SYSTEM_HOURS : (uint32_t)(rnd(s) % 60),
			       "YYYAN"[rnd(s) % 5], 0);
	} else if (x < 90) {
		r->c = mod(user, tok, "SSTEB"[rnd(s) % 5], (uint32_t)(rnd(s) % 300));
	} else if (x < 91) {
		r->c = base(ENGINE_CANCEL_ALL, user, firm);
	} else if (x < 94) {
		gen_enter(r, s, u, next_tok, 0);
		r->c.u.enter.price += 50; /* off tick, or another reject */
		if (rnd(s) % 2)
			strcpy(r->c.u.enter.stock, "NOPE");
	} else if (x < 97) {
		gen_enter(r, s, u, next_tok, 0);
		strcpy(r->c.u.enter.token, tok); /* a used token */
	} else {
		r->advance = 1;
	}
	strcpy(r->c.user, user);
	strcpy(r->c.firm, firm);
}

/* An operator's command: limits, a kill switch (with cancel or not), a
 * lift (most often: switches do not stay on long) or a reference price. */
static void gen_admin(struct rcmd *r, uint64_t *s)
{
	uint32_t x = (uint32_t)(rnd(s) % 100), scope = rnd(s) % 2 ? ENGINE_SCOPE_FIRM : ENGINE_SCOPE_USER;
	char name[8];
	struct risk_limits *l;

	if (scope == ENGINE_SCOPE_FIRM)
		snprintf(name, sizeof(name), "F%u", (uint32_t)(rnd(s) % R_FIRMS));
	else
		snprintf(name, sizeof(name), "U%02u", (uint32_t)(rnd(s) % R_USERS));
	if (rnd(s) % 8 == 0)
		strcpy(name, "*");
	if (x < 40) {
		r->c = adm(ENGINE_ADMIN_LIMITS, scope, name);
		l = &r->c.u.admin.limits;
		l->set = (uint32_t)(rnd(s) % 32);
		l->max_qty = l->set & RISK_MAX_QTY ? (uint32_t)(rnd(s) % 5) * 100 : 0;
		l->max_notional = l->set & RISK_MAX_NOTIONAL ? (rnd(s) % 5) * 2000ull * 10000 : 0;
		l->collar_bp = l->set & RISK_COLLAR ? (uint32_t)(rnd(s) % 4) * 20 : 0;
		l->max_open = l->set & RISK_MAX_OPEN ? (uint32_t)(rnd(s) % 5) * 8 : 0;
		l->credit = l->set & RISK_CREDIT ? (rnd(s) % 5) * 100000ull * 10000 : 0;
	} else if (x < 55) {
		r->c = adm_kill(scope, name, (int)(rnd(s) % 2));
	} else if (x < 85) {
		r->c = adm(ENGINE_ADMIN_LIFT, scope, name);
	} else {
		uint32_t sym = (uint32_t)(rnd(s) % R_SYMS);

		r->c = adm_ref(rsyms[sym], rprice(s, sym));
	}
}

static int r_risk; /* gen_tape writes Admin commands too */

static struct rcmd *gen_tape(size_t n, uint64_t seed)
{
	struct rcmd *v = calloc(n, sizeof(*v));
	uint32_t next_tok[R_USERS] = { 0 };
	uint64_t s = seed, t = T0;

	ck_assert_ptr_nonnull(v);
	for (int i = 0; i < R_SYMS; i++) {
		snprintf(rsym_names[i], sizeof(rsym_names[i]), "S%03u", (unsigned)i % 1000);
		rsyms[i] = rsym_names[i];
	}
	for (size_t i = 0; i < n; i++) {
		t += rnd(&s) % 2000000; /* up to 2 ms between events */
		v[i].t = t;
		gen_one(&v[i], &s, next_tok);
		if (r_risk && rnd(&s) % 200 == 0) {
			v[i].advance = 0;
			v[i].fresh = 0;
			gen_admin(&v[i], &s);
		}
	}
	return v;
}

static uint32_t r_user_tokens; /* rengine_with's max_user_tokens */

static struct engine *rengine_with(uint32_t max_orders, uint32_t max_tokens)
{
	struct engine *e;
	struct engine_config cfg = {
		.symbols = rsyms, .n_symbols = R_SYMS, .max_shares = 1000000,
		.max_orders = max_orders, .max_tokens = max_tokens, .max_levels = 256,
		.max_users = 1024, .max_user_tokens = r_user_tokens,
	};

	ck_assert_int_eq(engine_create(&e, &cfg), 0);
	return e;
}

/* The random tape's engine with a risk configuration (variant 0 or 1). */
static struct engine *rengine_risk(int variant)
{
	struct engine *e;
	struct engine_cmd c[4] = {
		adm_limits(ENGINE_SCOPE_USER, "*", variant ? "max_open=31" : "max_open=30"),
		adm_limits(ENGINE_SCOPE_FIRM, "F1", "max_qty=300 collar=2%"),
		adm_limits(ENGINE_SCOPE_USER, "U03", "credit=500000"),
		adm_ref("S010", 210000),
	};
	struct engine_admin_cmd a[4];
	struct engine_config cfg = {
		.symbols = rsyms, .n_symbols = R_SYMS, .max_shares = 1000000,
		.max_orders = 1u << 16, .max_tokens = 1u << 19, .max_levels = 256,
		.max_users = 1024, .risk = a, .n_risk = 4,
	};

	for (int i = 0; i < 4; i++)
		a[i] = c[i].u.admin;
	ck_assert_int_eq(engine_create(&e, &cfg), 0);
	return e;
}

static struct engine *rengine(void)
{
	return rengine_with(1u << 16, 1u << 19);
}

static uint64_t run_tape(struct engine *e, const struct rcmd *v, size_t n, struct cap *c, size_t verify_every)
{
	c->digest = XXH3_createState();
	ck_assert_ptr_nonnull(c->digest);
	XXH3_64bits_reset(c->digest);
	for (size_t i = 0; i < n; i++) {
		if (v[i].advance)
			engine_advance_time(e, v[i].t, capture, c);
		else
			engine_apply(e, i + 1, v[i].t, &v[i].c, capture, c);
		if (verify_every && i % verify_every == 0)
			ck_assert_int_eq(engine_verify(e), 0);
	}
	{
		uint64_t d = XXH3_64bits_digest(c->digest);

		XXH3_freeState(c->digest);
		c->digest = NULL;
		return d;
	}
}

/* A valid day limit order with a fresh token (never rejected for fields). */
static int plain_enter(const struct rcmd *r)
{
	const struct ouch_enter_order *o = &r->c.u.enter;

	return !r->advance && r->c.kind == ENGINE_ENTER && o->tif == OUCH_TIF_SYSTEM_HOURS &&
	       o->price != OUCH_PRICE_MARKET && o->display != 'P' && o->min_qty == 0 &&
	       r->fresh;
}

static void count_only(void *ctx, const char *user, const struct ouch_msg *msg)
{
	(*(uint64_t *)ctx)++;
}

static double now_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(determinism_random_tape)
{
	struct rcmd *v = gen_tape(R_N, 0x9e3779b97f4a7c15ull);
	struct engine *e1 = rengine(), *e2 = rengine(), *e3 = rengine(), *e4 = rengine(), *e5 = rengine();
	struct cap c1 = { 0 }, c2 = { 0 }, c3 = { 0 }, c5 = { 0 };
	struct engine_stats s;
	uint64_t d1, d2, d3, d5, msgs = 0;
	size_t k;
	double t0, c0, dt, dc;

	d1 = run_tape(e1, v, R_N, &c1, 20000);
	d2 = run_tape(e2, v, R_N, &c2, 0);
	ck_assert_int_eq(engine_verify(e1), 0);
	ck_assert_uint_eq(c1.total, c2.total);
	ck_assert_uint_eq(d1, d2);
	ck_assert_uint_eq(engine_hash(e1), engine_hash(e2));

	engine_get_stats(e1, &s);
	printf("random tape: final state hash %016llx\n", (unsigned long long)engine_hash(e1));
	printf("random tape: %zu events, %llu messages, %llu matches, %llu open, %llu rejects, "
	       "%llu expired, %llu self-match, %llu replaced, %llu modified, %llu duplicates ignored\n",
	       (size_t)R_N, (unsigned long long)s.messages, (unsigned long long)s.matches,
	       (unsigned long long)s.orders_open, (unsigned long long)s.rejects,
	       (unsigned long long)s.expired, (unsigned long long)s.self_match_cancels,
	       (unsigned long long)s.replaced, (unsigned long long)s.modified,
	       (unsigned long long)s.ignored_duplicates);
	ck_assert_uint_gt(s.matches, R_MIN(10000));
	ck_assert_uint_gt(s.orders_open, R_MIN(100));
	ck_assert_uint_gt(s.rejects, R_MIN(1000));
	ck_assert_uint_gt(s.expired, R_MIN(100));
	ck_assert_uint_gt(s.self_match_cancels, R_MIN(100));
	ck_assert_uint_gt(s.replaced, R_MIN(1000));
	ck_assert_uint_gt(s.modified, R_MIN(100));
	ck_assert_uint_gt(s.ignored_duplicates, R_MIN(1000));
	ck_assert_uint_gt(s.cancel_rejects, R_MIN(100));

	/* throughput (printed, not asserted) */
	t0 = now_s(CLOCK_MONOTONIC);
	c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
	for (size_t i = 0; i < R_N; i++) {
		if (v[i].advance)
			engine_advance_time(e4, v[i].t, count_only, &msgs);
		else
			engine_apply(e4, i + 1, v[i].t, &v[i].c, count_only, &msgs);
	}
	dt = now_s(CLOCK_MONOTONIC) - t0;
	dc = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	ck_assert_uint_eq(engine_hash(e4), engine_hash(e1));
	printf("engine throughput: %.0f events/s wall, %.0f events/s of CPU time "
	       "(%d events in %.3f s, %llu messages)\n",
	       R_N / dt, R_N / dc, R_N, dt, (unsigned long long)msgs);

	/* the last Enter whose order is still open at the end (a Cancel to a
	 * size above the open size is a silent no-op; a dead one is refused) */
	for (k = R_N; k-- > 0;) {
		struct engine_cmd probe;
		uint64_t before = msgs;

		if (!plain_enter(&v[k]))
			continue;
		probe = cxl(v[k].c.user, v[k].c.u.enter.token, UINT32_MAX);
		engine_apply(e4, R_N + 1, v[R_N - 1].t, &probe, count_only, &msgs);
		if (msgs == before)
			break;
	}
	ck_assert_uint_gt(k, R_N / 2);
	/* one share more on that order: a different book at the end */
	v[k].c.u.enter.shares++;
	d3 = run_tape(e3, v, R_N, &c3, 0);
	v[k].c.u.enter.shares--;
	ck_assert_uint_ne(d1, d3);
	ck_assert_uint_ne(engine_hash(e1), engine_hash(e3));
	ck_assert_int_eq(engine_verify(e3), 0);
	/* one Enter fewer in the middle: different counters at least */
	for (k = R_N / 2; !plain_enter(&v[k]); k++)
		;
	v[k].advance = 1;
	d5 = run_tape(e5, v, R_N, &c5, 0);
	v[k].advance = 0;
	ck_assert_uint_ne(d1, d5);
	ck_assert_uint_ne(engine_hash(e1), engine_hash(e5));

	engine_destroy(e1);
	engine_destroy(e2);
	engine_destroy(e3);
	engine_destroy(e4);
	engine_destroy(e5);
	free(v);
}
END_TEST

/* --- snapshots ---------------------------------------------------------------- */

struct membuf {
	uint8_t *p;
	size_t len, cap, off;
};

static int mem_write(void *ctx, const void *buf, size_t len)
{
	struct membuf *m = ctx;

	if (m->len + len > m->cap) {
		m->cap = (m->len + len) * 2;
		m->p = realloc(m->p, m->cap);
		ck_assert_ptr_nonnull(m->p);
	}
	memcpy(m->p + m->len, buf, len);
	m->len += len;
	return 0;
}

static int mem_read(void *ctx, void *buf, size_t len)
{
	struct membuf *m = ctx;

	if (m->off + len > m->len)
		return -ENODATA;
	memcpy(buf, m->p + m->off, len);
	m->off += len;
	return 0;
}

static uint64_t run_range(struct engine *e, const struct rcmd *v, size_t from, size_t to, struct cap *c)
{
	uint64_t d;

	c->digest = XXH3_createState();
	XXH3_64bits_reset(c->digest);
	for (size_t i = from; i < to; i++) {
		if (v[i].advance)
			engine_advance_time(e, v[i].t, capture, c);
		else
			engine_apply(e, i + 1, v[i].t, &v[i].c, capture, c);
	}
	d = XXH3_64bits_digest(c->digest);
	XXH3_freeState(c->digest);
	c->digest = NULL;
	return d;
}

/* A snapshot taken mid-tape, loaded into a fresh engine, gives the same hash,
 * and both engines then answer the rest of the tape message for message. */
static void round_trip(uint32_t max_orders, uint32_t max_tokens)
{
	const size_t n = 60000, cut = 35000;
	struct rcmd *v = gen_tape(n, 0x5eed5eedull);
	struct engine *a = rengine_with(max_orders, max_tokens), *b = rengine_with(max_orders, max_tokens), *c;
	struct cap ca = { 0 }, cb = { 0 };
	struct membuf mb = { 0 };
	struct engine_stats sa, sb;
	uint64_t da, db, h;

	run_range(a, v, 0, cut, &ca);
	ck_assert_int_eq(engine_snapshot_write(a, mem_write, &mb), 0);
	h = engine_hash(a);
	ck_assert_int_eq(engine_snapshot_read(b, mem_read, &mb), 0);
	ck_assert_uint_eq(mb.off, mb.len);
	ck_assert_uint_eq(engine_hash(b), h);
	ck_assert_int_eq(engine_verify(b), 0);
	engine_get_stats(a, &sa);
	engine_get_stats(b, &sb);
	ck_assert_uint_eq(sa.orders_open, sb.orders_open);
	ck_assert_uint_gt(sa.orders_open, 100);
	ck_assert_uint_eq(sa.tokens, sb.tokens);
	ck_assert_uint_eq(sa.matches, sb.matches);
	/* a loaded engine refuses a second load */
	mb.off = 0;
	ck_assert_int_eq(engine_snapshot_read(b, mem_read, &mb), -EBUSY);
	da = run_range(a, v, cut, n, &ca);
	db = run_range(b, v, cut, n, &cb);
	ck_assert_uint_eq(da, db);
	ck_assert_uint_eq(engine_hash(a), engine_hash(b));
	ck_assert_int_eq(engine_verify(b), 0);
	engine_get_stats(a, &sa);
	engine_get_stats(b, &sb);
	ck_assert_uint_eq(sa.tokens_forgotten, sb.tokens_forgotten);
	ck_assert_uint_eq(sa.ignored_duplicates, sb.ignored_duplicates);
	/* another version, and a truncated stream, are refused */
	mb.off = 0;
	mb.p[4] ^= 0x7f;
	c = rengine();
	ck_assert_int_eq(engine_snapshot_read(c, mem_read, &mb), -EPROTO);
	engine_destroy(c);
	mb.p[4] ^= 0x7f;
	mb.off = 0;
	mb.len -= 9;
	c = rengine();
	ck_assert_int_lt(engine_snapshot_read(c, mem_read, &mb), 0);
	engine_destroy(c);
	engine_destroy(a);
	engine_destroy(b);
	free(mb.p);
	free(v);
}

/* A version 4 stream made into version 3's (the risk part and the firms'
 * lists cut out): the layout of engine_snapshot.c, where the risk part,
 * between the tokens and the orders, is struct snap_risk (12
 * u64 of counters, 2 u32, 2 risk_limits of 32 bytes, a u64), a snap_firm
 * (2 u32 and a risk_limits) per firm, a snap_ulim (48 bytes) per named
 * user, a u32 per symbol; after the orders (72 bytes each) and the users'
 * lists, per firm and for no firm 2 u32 and the order indices. Only an engine that never saw an Admin can be written so,
 * and the version 3 reader takes it with no risk state. */
#define SNAP_RISK_LEN (12 * 8 + 2 * 4 + 2 * 32 + 8) /* struct snap_risk */
#define SNAP_ORDER_LEN 72 /* struct snap_order */
static void snap_to_v3(struct membuf *mb, const struct engine *e, uint32_t n_symbols)
{
	struct engine_pool pools[ENGINE_POOLS];
	struct engine_stats st;
	uint32_t v = 3;
	size_t risk, tail, at;

	engine_get_pools(e, pools);
	engine_get_stats(e, &st);
	ck_assert_uint_eq(st.admin_events, 0);
	/* version 4 has the risk part before the orders (no user named by
	 * limits here) and the firms' lists at the end */
	risk = SNAP_RISK_LEN + pools[4].used * 40 + (size_t)n_symbols * 4;
	tail = st.orders_open * (SNAP_ORDER_LEN + 4) + pools[3].used * 4 +
	       (pools[4].used + 1) * 8 + st.orders_open * 4;
	ck_assert_uint_gt(mb->len, risk + tail);
	at = mb->len - tail - risk;
	memmove(mb->p + at, mb->p + at + risk, mb->len - at - risk);
	mb->len -= risk + (pools[4].used + 1) * 8 + st.orders_open * 4;
	memcpy(mb->p + 4, &v, sizeof(v));
	mb->off = 0;
}

/* A random tape with day events written over some of its commands: END
 * of day 1, START of day 2, END of day 2, START of day 3. A snapshot in
 * each phase (open, closed, the next day) loads with the same day, hash and
 * counters, and the rest of the tape gives both engines the same messages;
 * an older (version 3) snapshot loads with the same day. */
START_TEST(snapshot_day_round_trip)
{
	const size_t n = 30000;
	const size_t at[] = { 8000, 8300, 20000, 20050 };
	const uint32_t kinds[] = { ENGINE_DAY_END, ENGINE_DAY_START, ENGINE_DAY_END,
				   ENGINE_DAY_START };
	const uint32_t days[] = { 1, 2, 2, 3 };
	const size_t cuts[] = { 5000, 8100, 12000, 20020, 25000 };
	struct rcmd *v = gen_tape(n, 0xda7da7ull);

	for (size_t k = 0; k < 4; k++) {
		memset(&v[at[k]].c, 0, sizeof(v[at[k]].c));
		v[at[k]].advance = 0;
		v[at[k]].c.kind = ENGINE_DAY;
		v[at[k]].c.u.day.kind = kinds[k];
		v[at[k]].c.u.day.day = days[k];
	}
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		struct engine *a = rengine(), *b = rengine();
		struct cap ca = { 0 }, cb = { 0 };
		struct membuf mb = { 0 };
		struct engine_stats sa, sb;
		struct engine_day da, db;

		run_range(a, v, 0, cuts[k], &ca);
		ck_assert_int_eq(engine_snapshot_write(a, mem_write, &mb), 0);
		ck_assert_int_eq(engine_snapshot_read(b, mem_read, &mb), 0);
		ck_assert_uint_eq(mb.off, mb.len);
		{
			/* what was read writes the same bytes again (firm ids included) */
			struct membuf again = { 0 };

			ck_assert_int_eq(engine_snapshot_write(b, mem_write, &again), 0);
			ck_assert_uint_eq(again.len, mb.len);
			ck_assert_int_eq(memcmp(again.p, mb.p, mb.len), 0);
			free(again.p);
		}
		engine_get_day(a, &da);
		engine_get_day(b, &db);
		ck_assert_uint_eq(da.day, db.day);
		ck_assert_uint_eq(da.base, db.base);
		ck_assert_int_eq(da.open, db.open);
		ck_assert_uint_eq(da.day, k < 2 ? 1 : k < 4 ? 2 : 3);
		ck_assert_int_eq(da.open, k != 1 && k != 3);
		ck_assert_uint_eq(da.base, k < 2 ? 1 : k < 4 ? at[1] + 1 : at[3] + 1);
		ck_assert_uint_eq(engine_hash(b), engine_hash(a));
		engine_get_stats(a, &sa);
		engine_get_stats(b, &sb);
		ck_assert_int_eq(memcmp(&sa, &sb, sizeof(sa)), 0);
		ck_assert_uint_eq(run_range(a, v, cuts[k], n, &ca), run_range(b, v, cuts[k], n, &cb));
		ck_assert_uint_eq(engine_hash(b), engine_hash(a));
		ck_assert_int_eq(engine_verify(b), 0);
		engine_get_stats(a, &sa);
		ck_assert_uint_eq(sa.day_events, 4);
		ck_assert_uint_gt(sa.closed_cancels, 10);
		engine_destroy(b);
		if (k == 0 || k == 4) {
			/* version 3 (no risk trailer) loads with the same state */
			struct engine *c = rengine(), *d = rengine();

			run_range(c, v, 0, cuts[k], &ca);
			free(mb.p);
			memset(&mb, 0, sizeof(mb));
			ck_assert_int_eq(engine_snapshot_write(c, mem_write, &mb), 0);
			snap_to_v3(&mb, c, R_SYMS);
			ck_assert_int_eq(engine_snapshot_read(d, mem_read, &mb), 0);
			ck_assert_uint_eq(mb.off, mb.len);
			engine_get_day(d, &db);
			engine_get_day(c, &da);
			ck_assert_uint_eq(db.day, da.day);
			ck_assert_uint_eq(db.base, da.base);
			ck_assert_int_eq(db.open, da.open);
			ck_assert_uint_eq(engine_hash(d), engine_hash(c));
			ck_assert_int_eq(engine_verify(d), 0);
			ck_assert_uint_eq(run_range(c, v, cuts[k], n, &ca),
					  run_range(d, v, cuts[k], n, &cb));
			ck_assert_uint_eq(engine_hash(d), engine_hash(a));
			{
				/* risk turned on after the load: the one that ran the
				 * whole tape and the one from format 3 agree (no
				 * reference price came from executions before) */
				struct engine_cmd on = adm_limits(ENGINE_SCOPE_USER, "*", "collar=5%");
				struct engine *x = rengine_risk(0);

				engine_apply(c, n + 1, 0, &on, NULL, NULL);
				engine_apply(d, n + 1, 0, &on, NULL, NULL);
				ck_assert_uint_eq(engine_hash(d), engine_hash(c));
				/* an engine configured with risk refuses format 3 */
				mb.off = 0;
				ck_assert_int_eq(engine_snapshot_read(x, mem_read, &mb), -EPROTO);
				engine_destroy(x);
			}
			engine_destroy(c);
			engine_destroy(d);
		}
		engine_destroy(a);
		free(mb.p);
	}
	free(v);
}
END_TEST

START_TEST(snapshot_round_trip)
{
	round_trip(1u << 16, 1u << 19);
}
END_TEST

/* The same with a token table that forgets all through the tape: the
 * snapshot keeps the dead tokens' age order, so both engines forget the
 * same ones afterwards. */
START_TEST(snapshot_round_trip_forgetting)
{
	struct rcmd *v = gen_tape(60000, 0x5eed5eedull); /* first: it names the symbols */
	struct engine *e = rengine_with(4096, 6000);
	struct cap c = { 0 };
	struct engine_stats st;

	run_range(e, v, 0, 35000, &c);
	engine_get_stats(e, &st);
	ck_assert_uint_gt(st.tokens_forgotten, 1000);
	engine_destroy(e);
	free(v);
	round_trip(4096, 6000);
}
END_TEST

/* A snapshot keeps each user's dead tokens in order: write, read, write
 * gives the same bytes, and both engines forget the same tokens after. */
START_TEST(user_token_quota_snapshot)
{
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 3, .max_shares = 1000000, .max_orders = 16,
		.max_tokens = 64, .max_levels = 16, .max_user_tokens = 5,
	};
	struct membuf mb = { 0 }, again = { 0 };
	struct engine *a, *b;
	const char *users[] = { "u1", "u2", "u3" };
	char tok[OUCH_TOKEN_LEN + 1];
	struct engine_stats sa, sb;

	engine_destroy(E);
	setup_quota(16, 64, 5);
	a = E;
	for (uint32_t i = 0; i < 40; i++) {
		const char *u = users[i % 3];

		snprintf(tok, sizeof(tok), "s%u", i);
		apply(lim(u, "F1", tok, 'B', 100, P(9, 0)));
		if (i % 4 != 0)
			apply(cxl(u, tok, 0));
	}
	ck_assert_uint_gt(stats().user_tokens_forgotten, 0);
	ck_assert_int_eq(engine_snapshot_write(a, mem_write, &mb), 0);
	ck_assert_int_eq(engine_create(&b, &cfg), 0);
	ck_assert_int_eq(engine_snapshot_read(b, mem_read, &mb), 0);
	ck_assert_int_eq(engine_verify(b), 0);
	ck_assert_uint_eq(engine_hash(b), engine_hash(a));
	ck_assert_int_eq(engine_snapshot_write(b, mem_write, &again), 0);
	ck_assert_uint_eq(again.len, mb.len);
	ck_assert_int_eq(memcmp(again.p, mb.p, mb.len), 0);
	/* the same later behaviour: every old token tried again on both */
	for (uint32_t i = 0; i < 40; i++) {
		struct engine_cmd c;
		struct cap ca = { .store = 1 }, cb = { .store = 1 };

		snprintf(tok, sizeof(tok), "s%u", i);
		c = lim(users[(i * 7) % 3], "F1", tok, 'S', 100, P(10, 0));
		engine_apply(a, 100 + i, T0, &c, capture, &ca);
		engine_apply(b, 100 + i, T0, &c, capture, &cb);
		ck_assert_uint_eq(ca.n, cb.n);
		ck_assert(ca.n == 0 || memcmp(ca.v, cb.v, ca.n * sizeof(*ca.v)) == 0);
		free(ca.v);
		free(cb.v);
	}
	ck_assert_uint_eq(engine_hash(b), engine_hash(a));
	engine_get_stats(a, &sa);
	engine_get_stats(b, &sb);
	ck_assert_int_eq(memcmp(&sa, &sb, sizeof(sa)), 0);
	ck_assert_int_eq(engine_verify(a), 0);
	ck_assert_int_eq(engine_verify(b), 0);
	engine_destroy(b);
	free(mb.p);
	free(again.p);
}
END_TEST

/* A small per-user quota on the random tape: engine_verify (the per-user
 * counts and lists) passes throughout, two engines agree message for
 * message, users are Rejected 'q' and forget their own tokens, and a
 * snapshot mid-tape round-trips (also under global forgetting). */
START_TEST(user_token_quota_random_tape)
{
	const size_t n = 60000;
	struct rcmd *v = gen_tape(n, 0x17171717ull);
	struct engine *e1, *e2;
	struct cap c1 = { 0 }, c2 = { 0 };
	struct engine_stats s1, s2;
	uint64_t d1, d2;

	r_user_tokens = 48;
	e1 = rengine();
	e2 = rengine();
	d1 = run_tape(e1, v, n, &c1, 2000);
	d2 = run_tape(e2, v, n, &c2, 0);
	ck_assert_uint_eq(d1, d2);
	ck_assert_uint_eq(c1.total, c2.total);
	ck_assert_uint_eq(engine_hash(e1), engine_hash(e2));
	ck_assert_int_eq(engine_verify(e1), 0);
	ck_assert_int_eq(engine_verify(e2), 0);
	engine_get_stats(e1, &s1);
	engine_get_stats(e2, &s2);
	ck_assert_int_eq(memcmp(&s1, &s2, sizeof(s1)), 0);
	printf("quota tape: %llu user tokens forgotten, %llu rejected 'q', %llu forgotten globally\n",
	       (unsigned long long)s1.user_tokens_forgotten, (unsigned long long)s1.user_token_quota,
	       (unsigned long long)s1.tokens_forgotten);
	ck_assert_uint_gt(s1.user_tokens_forgotten, 1000);
	ck_assert_uint_gt(s1.user_token_quota, 0);
	engine_destroy(e1);
	engine_destroy(e2);
	free(c1.v);
	free(c2.v);
	free(v);
	round_trip(1u << 16, 1u << 19);
	round_trip(1024, 1500); /* the table forgets too */
	r_user_tokens = 0;
}
END_TEST

static int null_write(void *ctx, const void *buf, size_t len)
{
	(void)buf;
	*(size_t *)ctx += len;
	return 0;
}

/* One million resting orders: how long a snapshot's serialization takes and
 * how big it is (printed, not asserted). */
START_TEST(snapshot_million_orders)
{
	static const char *msyms[] = { "AAPL", "MSFT", "AMZN", "GOOG", "META", "NVDA", "TSLA", "INTC" };
	struct engine_config cfg = { .symbols = msyms, .n_symbols = 8, .max_shares = 1000000,
				     .max_orders = 1u << 20, .max_tokens = 1u << 21,
				     .max_levels = 4096, .max_users = 64 };
	struct engine *e, *f;
	struct membuf mb = { 0 };
	size_t bytes = 0;
	double t0, t1, t2;

	const uint32_t n = 1000000 / R_SHORTER;

	ck_assert_int_eq(engine_create(&e, &cfg), 0);
	for (uint32_t i = 0; i < n; i++) {
		char user[8], token[OUCH_TOKEN_LEN + 1];
		struct engine_cmd c;

		snprintf(user, sizeof(user), "U%02u", i % 50);
		snprintf(token, sizeof(token), "M%u", i);
		c = enter_full(user, "", token, i % 2 ? 'S' : 'B', 100, msyms[i % 8],
			       i % 2 ? 200000 + (i % 2000) * 100 : 100000 + (i % 2000) * 100,
			       i % 10 ? OUCH_TIF_SYSTEM_HOURS : 3600, 'Y', 0);
		strcpy(c.user, user);
		engine_apply(e, i + 1, T0, &c, NULL, NULL);
	}
	{
		struct engine_stats st;

		engine_get_stats(e, &st);
		ck_assert_uint_eq(st.orders_open, n);
	}
	t0 = now_s(CLOCK_MONOTONIC);
	ck_assert_int_eq(engine_snapshot_write(e, null_write, &bytes), 0);
	t1 = now_s(CLOCK_MONOTONIC);
	ck_assert_int_eq(engine_snapshot_write(e, mem_write, &mb), 0);
	ck_assert_int_eq(engine_create(&f, &cfg), 0);
	t2 = now_s(CLOCK_MONOTONIC);
	ck_assert_int_eq(engine_snapshot_read(f, mem_read, &mb), 0);
	printf("snapshot of %u resting orders: %zu bytes, serialized in %.1f ms, "
	       "loaded (with verification) in %.1f ms\n",
	       n, bytes, (t1 - t0) * 1e3, (now_s(CLOCK_MONOTONIC) - t2) * 1e3);
	ck_assert_uint_eq(engine_hash(f), engine_hash(e));
	engine_destroy(f);
	engine_destroy(e);
	free(mb.p);
}
END_TEST

/* A day's worth of dead tokens: the table full of tokens of canceled
 * orders (the dead ring), a few thousand resting. Prints what the
 * serialization costs: the dead ring's slots are spread over the table. */
START_TEST(snapshot_dead_tokens)
{
	struct engine_config cfg = { .symbols = syms, .n_symbols = 2, .max_shares = 1000000,
				     .max_orders = 1u << 16, .max_tokens = (1u << 21) / R_SHORTER,
				     .max_levels = 4096, .max_users = 64 };
	struct engine *e, *f;
	struct membuf mb = { 0 };
	struct engine_stats st;
	size_t bytes = 0;
	double t0, t1;

	ck_assert_int_eq(engine_create(&e, &cfg), 0);
	for (uint32_t i = 0; i < cfg.max_tokens + 5000; i++) {
		char user[8], token[OUCH_TOKEN_LEN + 1];
		struct engine_cmd c;

		snprintf(user, sizeof(user), "U%02u", i % 50);
		snprintf(token, sizeof(token), "D%u", i);
		c = lim(user, "", token, i % 2 ? 'S' : 'B', 100,
			i % 2 ? 200000 + (i % 500) * 100 : 100000 + (i % 500) * 100);
		strcpy(c.user, user);
		engine_apply(e, 2 * (uint64_t)i + 1, T0, &c, NULL, NULL);
		if (i % 1000 == 0)
			continue; /* this one rests */
		c = cxl(user, token, 0);
		strcpy(c.user, user);
		engine_apply(e, 2 * (uint64_t)i + 2, T0, &c, NULL, NULL);
	}
	engine_get_stats(e, &st);
	ck_assert_uint_gt(st.tokens_forgotten, 0); /* the ring came round */
	t0 = now_s(CLOCK_MONOTONIC);
	ck_assert_int_eq(engine_snapshot_write(e, null_write, &bytes), 0);
	t1 = now_s(CLOCK_MONOTONIC);
	printf("snapshot of %llu tokens (%llu orders resting): %zu bytes, serialized in %.1f ms\n",
	       (unsigned long long)st.tokens, (unsigned long long)st.orders_open, bytes,
	       (t1 - t0) * 1e3);
	ck_assert_int_eq(engine_snapshot_write(e, mem_write, &mb), 0);
	ck_assert_int_eq(engine_create(&f, &cfg), 0);
	ck_assert_int_eq(engine_snapshot_read(f, mem_read, &mb), 0);
	ck_assert_uint_eq(engine_hash(f), engine_hash(e));
	engine_destroy(f);
	engine_destroy(e);
	free(mb.p);
}
END_TEST

/* A random tape with Admin commands (limits, kill switches with and without
 * cancel, lifts, references) on a configured engine: two engines agree
 * message for message and hash for hash, engine_verify (which recomputes
 * the per-user and per-firm aggregates) passes throughout, every risk
 * reason occurs; a snapshot mid-tape keeps the hash and the risk state and
 * both engines answer the rest alike; an engine configured otherwise loads
 * it but hashes differently. */
START_TEST(risk_random_tape)
{
	const size_t n = 100000, cut = 60000;
	struct rcmd *v;
	struct engine *a, *b, *c, *d;
	struct cap ca = { 0 }, cb = { 0 }, cc = { 0 };
	struct membuf mb = { 0 };
	struct engine_stats sa, sc;
	uint64_t da, db;

	r_risk = 1;
	v = gen_tape(n, 0x715c0ffeeull);
	r_risk = 0;
	a = rengine_risk(0);
	b = rengine_risk(0);
	c = rengine_risk(0);
	d = rengine_risk(1);
	da = run_tape(a, v, n, &ca, 5000);
	db = run_tape(b, v, n, &cb, 0);
	ck_assert_uint_eq(da, db);
	ck_assert_uint_eq(engine_hash(a), engine_hash(b));
	ck_assert_int_eq(engine_verify(a), 0);
	engine_get_stats(a, &sa);
	printf("risk tape: %llu admin (%llu ignored), %llu risk rejects (a %llu, m %llu, n %llu, "
	       "X %llu, q %llu, r %llu), %llu kill cancels, %llu matches\n",
	       (unsigned long long)sa.admin_events, (unsigned long long)sa.admin_ignored,
	       (unsigned long long)sa.risk_rejects, (unsigned long long)sa.risk_killed,
	       (unsigned long long)sa.risk_qty, (unsigned long long)sa.risk_notional,
	       (unsigned long long)sa.risk_collar, (unsigned long long)sa.risk_open,
	       (unsigned long long)sa.risk_credit, (unsigned long long)sa.kill_cancels,
	       (unsigned long long)sa.matches);
	ck_assert_uint_gt(sa.admin_events, 200);
	ck_assert_uint_gt(sa.risk_killed, 10);
	ck_assert_uint_gt(sa.risk_qty, 10);
	ck_assert_uint_gt(sa.risk_notional, 10);
	ck_assert_uint_gt(sa.risk_collar, 10);
	ck_assert_uint_gt(sa.risk_open, 10);
	ck_assert_uint_gt(sa.risk_credit, 0);
	ck_assert_uint_gt(sa.kill_cancels, 10);
	ck_assert_uint_eq(sa.risk_rejects, sa.risk_killed + sa.risk_qty + sa.risk_notional +
						   sa.risk_collar + sa.risk_open + sa.risk_credit);
	ck_assert_uint_gt(sa.matches, 500);
	/* the snapshot mid-tape */
	run_range(c, v, 0, cut, &cc);
	ck_assert_int_eq(engine_snapshot_write(c, mem_write, &mb), 0);
	engine_destroy(b);
	b = rengine_risk(0);
	ck_assert_int_eq(engine_snapshot_read(b, mem_read, &mb), 0);
	ck_assert_uint_eq(mb.off, mb.len);
	ck_assert_uint_eq(engine_hash(b), engine_hash(c));
	ck_assert_int_eq(engine_verify(b), 0);
	engine_get_stats(c, &sc);
	engine_get_stats(b, &sa);
	ck_assert_int_eq(memcmp(&sa, &sc, sizeof(sa)), 0);
	for (uint32_t k = 0; k < R_USERS + R_FIRMS; k++) {
		struct engine_risk_view vc, vb;
		uint32_t scope = k < R_USERS ? ENGINE_SCOPE_USER : ENGINE_SCOPE_FIRM;
		char name[8];
		int rc;

		if (k < R_USERS)
			snprintf(name, sizeof(name), "U%02u", k);
		else
			snprintf(name, sizeof(name), "F%u", k - R_USERS);
		memset(&vc, 0, sizeof(vc));
		memset(&vb, 0, sizeof(vb));
		rc = engine_get_risk(c, scope, name, &vc);
		ck_assert_int_eq(engine_get_risk(b, scope, name, &vb), rc);
		ck_assert_int_eq(memcmp(&vc, &vb, sizeof(vc)), 0);
	}
	mb.off = 0;
	ck_assert_int_eq(engine_snapshot_read(d, mem_read, &mb), 0);
	ck_assert_uint_ne(engine_hash(d), engine_hash(c)); /* another configuration */
	ck_assert_uint_eq(run_range(b, v, cut, n, &cb), run_range(c, v, cut, n, &cc));
	ck_assert_uint_eq(engine_hash(b), engine_hash(c));
	ck_assert_uint_eq(engine_hash(b), engine_hash(a));
	ck_assert_int_eq(engine_verify(b), 0);
	engine_destroy(a);
	engine_destroy(b);
	engine_destroy(c);
	engine_destroy(d);
	free(mb.p);
	free(v);
}
END_TEST

/* --- market data: the reports mirror the displayed book ------------------------ */

/* A subscriber's book built from the reports alone (the ITCH rules of
 * engine.h's "Market data"), indexed by order reference number. */
struct mdo {
	uint64_t prio; /* 0: not in the book */
	uint32_t sym, price, shares;
	char side; /* 'B' or 'S' */
};

struct mdmodel {
	struct mdo *o; /* by ref */
	size_t cap;
	uint64_t prio, adds, execs, trades, cancels, deletes, replaces, in_place, days;
	uint64_t seen_shares; /* executed shares reported (EXEC and TRADE) */
};

static char md_side(char s)
{
	return s == OUCH_BUY ? 'B' : 'S';
}

static struct mdo *md_at(struct mdmodel *m, uint64_t ref)
{
	ck_assert_uint_lt(ref, m->cap);
	return &m->o[ref];
}

static void md_model(void *ctx, const struct engine_md *md)
{
	struct mdmodel *m = ctx;
	struct mdo *o, *n;

	switch (md->kind) {
	case ENGINE_MD_ADD:
		o = md_at(m, md->ref);
		ck_assert_uint_eq(o->prio, 0);
		*o = (struct mdo){ ++m->prio, md->sym, md->price, md->shares, md_side(md->side) };
		ck_assert_uint_gt(md->shares, 0);
		m->adds++;
		break;
	case ENGINE_MD_EXEC:
	case ENGINE_MD_CANCEL:
		o = md_at(m, md->ref);
		ck_assert_uint_ne(o->prio, 0);
		ck_assert_uint_le(md->shares, o->shares);
		ck_assert_uint_gt(md->shares, 0);
		o->shares -= md->shares;
		if (md->kind == ENGINE_MD_EXEC) {
			ck_assert_uint_eq(md->price, o->price);
			m->execs++;
			m->seen_shares += md->shares;
			if (o->shares == 0)
				o->prio = 0;
		} else {
			ck_assert_uint_gt(o->shares, 0); /* a cancel leaves some */
			m->cancels++;
		}
		break;
	case ENGINE_MD_TRADE:
		ck_assert_uint_eq(md->ref, 0);
		ck_assert_uint_gt(md->match, 0);
		m->trades++;
		m->seen_shares += md->shares;
		break;
	case ENGINE_MD_DELETE:
		o = md_at(m, md->ref);
		ck_assert_uint_ne(o->prio, 0);
		o->prio = 0;
		m->deletes++;
		break;
	case ENGINE_MD_REPLACE:
		o = md_at(m, md->old_ref);
		n = md_at(m, md->ref);
		ck_assert_uint_ne(o->prio, 0);
		ck_assert_uint_eq(n->prio, 0);
		*n = *o;
		o->prio = 0;
		if (md->price == n->price && md->shares <= n->shares)
			m->in_place++;
		else
			n->prio = ++m->prio;
		n->price = md->price;
		n->shares = md->shares;
		m->replaces++;
		break;
	case ENGINE_MD_DAY_END:
	case ENGINE_MD_DAY_START:
		m->days++;
		break;
	}
}

struct mdwalk {
	struct mdmodel *m;
	uint64_t n, last_prio;
	uint32_t last_sym, last_price;
	char last_side;
};

/* The engine's walk, in book order, checked against the model. */
static void md_walk_check(void *ctx, const struct engine_md *md)
{
	struct mdwalk *w = ctx;
	struct mdo *o = md_at(w->m, md->ref);
	char side = md_side(md->side);

	ck_assert_int_eq(md->kind, ENGINE_MD_ADD);
	ck_assert_uint_ne(o->prio, 0);
	ck_assert_uint_eq(o->sym, md->sym);
	ck_assert_uint_eq(o->price, md->price);
	ck_assert_uint_eq(o->shares, md->shares);
	ck_assert_int_eq(o->side, side);
	/* time priority within a level: the model's order too */
	if (w->n && w->last_sym == md->sym && w->last_side == side && w->last_price == md->price)
		ck_assert_uint_gt(o->prio, w->last_prio);
	w->last_sym = md->sym;
	w->last_side = side;
	w->last_price = md->price;
	w->last_prio = o->prio;
	w->n++;
}

static void md_compare(struct engine *e, struct mdmodel *m)
{
	struct mdwalk w = { .m = m };
	uint64_t live = 0;

	engine_md_walk(e, md_walk_check, &w);
	for (size_t i = 0; i < m->cap; i++)
		live += m->o[i].prio != 0;
	ck_assert_uint_eq(w.n, live);
}

/* The reports of a few commands, one by one. */
struct mdlog {
	struct engine_md v[32];
	size_t n;
};

static void md_log(void *ctx, const struct engine_md *md)
{
	struct mdlog *l = ctx;

	ck_assert_uint_lt(l->n, 32);
	l->v[l->n++] = *md;
}

static const struct engine_md *md_is(const struct mdlog *l, size_t i, enum engine_md_kind kind,
				     uint64_t ref, uint32_t shares, uint32_t price)
{
	ck_assert_uint_lt(i, l->n);
	ck_assert_int_eq(l->v[i].kind, kind);
	ck_assert_uint_eq(l->v[i].ref, ref);
	ck_assert_uint_eq(l->v[i].shares, shares);
	ck_assert_uint_eq(l->v[i].price, price);
	return &l->v[i];
}

START_TEST(md_reports)
{
	struct mdlog l = { .n = 0 };
	uint64_t a, b, h, r1, r2;

	engine_set_md(E, md_log, &l);
	/* attribution: Display 'A' and a login's firm only */
	apply(enter_full("U1", "FA", "a", 'B', 100, "AAPL", P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'A', 0));
	a = accepted(0, "U1", "a");
	ck_assert_str_eq(md_is(&l, 0, ENGINE_MD_ADD, a, 100, P(10, 0))->firm, "FA");
	ck_assert_str_eq(l.v[0].stock, "AAPL");
	apply(lim("U2", "FB", "b", 'S', 50, P(10, 5)));
	b = accepted(0, "U2", "b");
	ck_assert_str_eq(md_is(&l, 1, ENGINE_MD_ADD, b, 50, P(10, 5))->firm, "");
	ck_assert_int_eq(l.v[1].side, 'S');
	/* non-displayed: never added; its execution is a TRADE */
	apply(enter_full("U3", "FC", "h", 'S', 30, "AAPL", P(10, 1), OUCH_TIF_SYSTEM_HOURS, 'N', 0));
	h = accepted(0, "U3", "h");
	ck_assert_uint_ne(h, 0);
	ck_assert_uint_eq(l.n, 2);
	/* partial cancel, then in place (same price, fewer shares) */
	apply(cxl("U1", "a", 80));
	md_is(&l, 2, ENGINE_MD_CANCEL, a, 20, P(10, 0));
	apply(replace("U1", "a", "a2", 70, P(10, 0), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	r1 = replaced(0, "U1", "a2", "a", 70, P(10, 0));
	ck_assert_uint_eq(md_is(&l, 3, ENGINE_MD_REPLACE, r1, 70, P(10, 0))->old_ref, a);
	/* moved and marketable: DELETE first, then the executions (hidden
	 * first at 10.01, then displayed at 10.05), then what rests: ADD */
	l.n = 0;
	apply(replace("U1", "a2", "a3", 100, P(10, 5), OUCH_TIF_SYSTEM_HOURS, 'Y', 0));
	r2 = replaced(0, "U1", "a3", "a2", 100, P(10, 5));
	md_is(&l, 0, ENGINE_MD_DELETE, r1, 0, 0);
	ck_assert_int_eq(md_is(&l, 1, ENGINE_MD_TRADE, 0, 30, P(10, 1))->side, 'S');
	ck_assert_uint_gt(l.v[1].match, 0);
	md_is(&l, 2, ENGINE_MD_EXEC, b, 50, P(10, 5));
	ck_assert_uint_eq(l.v[2].match, l.v[1].match + 1);
	md_is(&l, 3, ENGINE_MD_ADD, r2, 20, P(10, 5));
	ck_assert_uint_eq(l.n, 4);
	/* modify down, then to 0 */
	apply(mod("U1", "a3", 'B', 15));
	md_is(&l, 4, ENGINE_MD_CANCEL, r2, 5, P(10, 5));
	apply(mod("U1", "a3", 'B', 0));
	md_is(&l, 5, ENGINE_MD_DELETE, r2, 0, P(10, 5));
	/* the walk: nothing displayed rests */
	l.n = 0;
	engine_md_walk(E, md_log, &l);
	ck_assert_uint_eq(l.n, 0);
	engine_set_md(E, NULL, NULL);
}
END_TEST

START_TEST(md_mirrors_displayed_book)
{
	struct rcmd *v = gen_tape(R_N, 0x5851f42d4c957f2dull);
	struct engine *e = rengine(), *plain = rengine();
	struct mdmodel m = { .cap = 2 * R_N + 16 };
	struct cap c = { 0 }, cp = { 0 };
	struct engine_stats s;
	struct engine_cmd d;
	uint64_t day = 1;

	m.o = calloc(m.cap, sizeof(*m.o));
	ck_assert_ptr_nonnull(m.o);
	engine_set_md(e, md_model, &m);
	for (size_t i = 0; i < R_N; i++) {
		if (i % 50000 == 49999) {
			/* a day's end and the next day's start: every order deleted */
			d = dayev(ENGINE_DAY_END, (uint32_t)day);
			engine_apply(e, i + 1, v[i].t, &d, NULL, NULL);
			engine_apply(plain, i + 1, v[i].t, &d, NULL, NULL);
			md_compare(e, &m);
			d = dayev(ENGINE_DAY_START, (uint32_t)++day);
			engine_apply(e, i + 1, v[i].t, &d, NULL, NULL);
			engine_apply(plain, i + 1, v[i].t, &d, NULL, NULL);
		}
		if (v[i].advance) {
			engine_advance_time(e, v[i].t, capture, &c);
			engine_advance_time(plain, v[i].t, capture, &cp);
		} else {
			engine_apply(e, i + 1, v[i].t, &v[i].c, capture, &c);
			engine_apply(plain, i + 1, v[i].t, &v[i].c, capture, &cp);
		}
		if (i % 10000 == 0)
			md_compare(e, &m);
	}
	md_compare(e, &m);
	engine_get_stats(e, &s);
	printf("market data: %llu adds, %llu executions, %llu trades, %llu cancels, %llu deletes, "
	       "%llu replaces (%llu in place), %llu day reports\n",
	       (unsigned long long)m.adds, (unsigned long long)m.execs,
	       (unsigned long long)m.trades, (unsigned long long)m.cancels,
	       (unsigned long long)m.deletes, (unsigned long long)m.replaces,
	       (unsigned long long)m.in_place, (unsigned long long)m.days);
	/* every execution reported once, on its resting side */
	ck_assert_uint_eq(m.execs + m.trades, s.matches);
	ck_assert_uint_eq(m.seen_shares, s.shares_matched);
	ck_assert_uint_gt(m.adds, R_MIN(10000));
	ck_assert_uint_gt(m.trades, R_MIN(100));
	ck_assert_uint_gt(m.cancels, R_MIN(100));
	ck_assert_uint_gt(m.deletes, R_MIN(1000));
	ck_assert_uint_gt(m.in_place, 0); /* rare in this mix: the price is drawn anew */
	ck_assert_uint_gt(m.replaces - m.in_place, R_MIN(100));
	ck_assert_uint_eq(m.days, 2 * (R_N / 50000));
	/* the reports change nothing: same answers, same hash as without */
	ck_assert_uint_eq(c.total, cp.total);
	ck_assert_uint_eq(engine_hash(e), engine_hash(plain));
	ck_assert_int_eq(engine_verify(e), 0);
	engine_destroy(e);
	engine_destroy(plain);
	free(m.o);
	free(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("book");
	TCase *tr = tcase_create("random");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, cross_and_partial_fill);
	tcase_add_test(tc, partition_numbers);
	tcase_add_test(tc, time_priority_at_one_price);
	tcase_add_test(tc, price_priority_across_prices);
	tcase_add_test(tc, cancel_and_partial_cancel);
	tcase_add_test(tc, replace_keeps_priority);
	tcase_add_test(tc, replace_loses_priority);
	tcase_add_test(tc, replace_ignored_and_invalid);
	tcase_add_test(tc, modify_side_and_shares);
	tcase_add_test(tc, ioc_partial_fill);
	tcase_add_test(tc, market_orders_walk_levels);
	tcase_add_test(tc, market_order_empty_book);
	tcase_add_test(tc, all_or_none_ioc);
	tcase_add_test(tc, min_qty_resting);
	tcase_add_test(tc, post_only);
	tcase_add_test(tc, non_displayed_behind_displayed);
	tcase_add_test(tc, self_match_prevention);
	tcase_add_test(tc, reject_reasons);
	tcase_add_test(tc, duplicate_token_ignored);
	tcase_add_test(tc, tif_expiry_on_command);
	tcase_add_test(tc, tif_expiry_on_advance);
	tcase_add_test(tc, cancel_all);
	tcase_add_test(tc, hash_tracks_state);
	tcase_add_test(tc, day_end_cancels_and_start_reopens);
	tcase_add_test(tc, day_events_out_of_order);
	tcase_add_test(tc, day_in_hash);
	tcase_add_test(tc, pool_exhaustion);
	tcase_add_test(tc, tokens_bounded);
	tcase_add_test(tc, user_token_quota_forgets_own);
	tcase_add_test(tc, user_token_quota_all_live);
	tcase_add_test(tc, user_token_quota_snapshot);
	tcase_add_test(tc, bad_config);
	tcase_add_test(tc, risk_limits_each_reason);
	tcase_add_test(tc, risk_precedence);
	tcase_add_test(tc, risk_kill_switch);
	tcase_add_test(tc, risk_replace);
	tcase_add_test(tc, risk_collar_reference);
	tcase_add_test(tc, risk_across_days);
	tcase_add_test(tc, risk_kill_before_limits);
	tcase_add_test(tc, risk_firm_table);
	tcase_add_test(tc, risk_config_and_hash);
	tcase_add_test(tc, md_reports);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tr, 300);
	tcase_add_test(tr, determinism_random_tape);
	tcase_add_test(tr, snapshot_round_trip);
	tcase_add_test(tr, snapshot_round_trip_forgetting);
	tcase_add_test(tr, snapshot_day_round_trip);
	tcase_add_test(tr, snapshot_million_orders);
	tcase_add_test(tr, snapshot_dead_tokens);
	tcase_add_test(tr, risk_random_tape);
	tcase_add_test(tr, user_token_quota_random_tape);
	tcase_add_test(tr, md_mirrors_displayed_book);
	suite_add_tcase(s, tr);
	return testutil_run(s, 0);
}
