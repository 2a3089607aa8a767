/* The gateway's order token table (gateway/route_tokens.c): live tokens
 * are never forgotten, dead ones are forgotten oldest first and only when
 * the table is full, a small table takes a day of any length, and a long
 * random sequence agrees with a reference model at every step. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gateway.h"
#include "ouch.h"
#include "routes.h"
#include "testutil.h"

#define MAX_TOKENS 1024 /* the smallest [gateway] max_tokens: 2048 slots */
#define SLOTS 2048

static struct gw_routes *table(void)
{
	static const char *const ov[] = {
		"node.name=t",
		"gateway.partitions=3",
		"gateway.max_tokens=1024",
		"partition1.exec_group=239.255.9.3:1000",
		"partition1.exec_retrans=127.0.0.1:1001",
		"partition2.exec_group=239.255.9.4:1000",
		"partition2.exec_retrans=127.0.0.1:1002",
	};
	static struct gw_config cfg;
	struct config_spec spec = { gw_config_keys, NULL, NULL, NULL };
	struct gw_routes *r = NULL;
	char err[512];

	ck_assert_msg(config_load(&spec, &cfg, NULL, ov, sizeof(ov) / sizeof(ov[0]), err,
				  sizeof(err)) == 0, "%s", err);
	ck_assert_msg(gw_routes_open(&r, &cfg, err, sizeof(err)) == 0, "%s", err);
	return r;
}

/* ---- the execution streams' messages ---------------------------------------- */

static int accepted(struct gw_routes *r, uint32_t login, unsigned p, const char *tok,
		    uint32_t shares)
{
	struct ouch_msg m = { .type = OUCH_ACCEPTED };

	snprintf(m.u.accepted.token, sizeof(m.u.accepted.token), "%s", tok);
	m.u.accepted.shares = shares;
	m.u.accepted.state = OUCH_STATE_LIVE;
	return gw_route_learn(r, login, p, &m);
}

static int replaced(struct gw_routes *r, uint32_t login, unsigned p, const char *prev,
		    const char *tok, uint32_t shares)
{
	struct ouch_msg m = { .type = OUCH_REPLACED };

	snprintf(m.u.replaced.replacement_token, sizeof(m.u.replaced.replacement_token), "%s",
		 tok);
	snprintf(m.u.replaced.previous_token, sizeof(m.u.replaced.previous_token), "%s", prev);
	m.u.replaced.shares = shares;
	m.u.replaced.state = OUCH_STATE_LIVE;
	return gw_route_learn(r, login, p, &m);
}

/* type: Executed, Canceled, AIQ Canceled (n taken), Order Modified (n left)
 * or Rejected (n unused). */
static void takes(struct gw_routes *r, uint32_t login, unsigned p, char type, const char *tok,
		  uint32_t n)
{
	struct ouch_msg m = { .type = type };

	/* every one of them has its token first: the union's common start */
	snprintf(m.u.executed.token, sizeof(m.u.executed.token), "%s", tok);
	if (type == OUCH_EXECUTED)
		m.u.executed.shares = n;
	else if (type == OUCH_CANCELED)
		m.u.canceled.decrement = n;
	else if (type == OUCH_AIQ_CANCELED)
		m.u.aiq_canceled.decrement = n;
	else if (type == OUCH_ORDER_MODIFIED)
		m.u.order_modified.shares = n;
	ck_assert_int_eq(gw_route_learn(r, login, p, &m), 0);
}

static int known(const struct gw_routes *r, uint32_t login, const char *tok)
{
	return gw_route_token(r, login, tok, strlen(tok));
}

static struct gw_route_counts counts(const struct gw_routes *r)
{
	struct gw_route_counts c;

	gw_route_counts(r, &c);
	return c;
}

/* ---- the life of one order ---------------------------------------------------- */

START_TEST(order_life)
{
	struct gw_routes *r = table();

	ck_assert_int_eq(gw_route_enter(r, 0, "A", 1, 1), 0);
	ck_assert_uint_eq(counts(r).live, 1); /* pending counts as live */
	ck_assert_int_eq(accepted(r, 0, 1, "A", 300), 0);
	takes(r, 0, 1, OUCH_EXECUTED, "A", 100);
	takes(r, 0, 1, OUCH_CANCELED, "A", 50);
	takes(r, 0, 1, OUCH_ORDER_MODIFIED, "A", 120); /* 150 left: now 120 */
	takes(r, 0, 1, OUCH_AIQ_CANCELED, "A", 20);
	ck_assert_uint_eq(counts(r).dead, 0);
	takes(r, 0, 1, OUCH_EXECUTED, "A", 100); /* the last 100 */
	ck_assert_uint_eq(counts(r).dead, 1);
	ck_assert_int_eq(known(r, 0, "A"), 1); /* dead, still routed */
	/* a replace: the new token is dead until its Replaced */
	ck_assert_int_eq(gw_route_enter(r, 0, "B", 1, 2), 0);
	ck_assert_int_eq(accepted(r, 0, 2, "B", 100), 0);
	ck_assert_int_eq(gw_route_maybe(r, 0, "B2", 2, 2), 0);
	ck_assert_uint_eq(counts(r).dead, 2);
	ck_assert_int_eq(replaced(r, 0, 2, "B", "B2", 80), 0);
	ck_assert_uint_eq(counts(r).dead, 2); /* B died, B2 lives */
	ck_assert_uint_eq(counts(r).live, 1);
	takes(r, 0, 2, OUCH_ORDER_MODIFIED, "B2", 0);
	ck_assert_uint_eq(counts(r).live, 0);
	/* rejected at once; a late Rejected does not kill a live order */
	ck_assert_int_eq(gw_route_enter(r, 0, "C", 1, 0), 0);
	takes(r, 0, 0, OUCH_REJECTED, "C", 0);
	ck_assert_int_eq(gw_route_enter(r, 1, "C", 1, 0), 0);
	ck_assert_int_eq(accepted(r, 1, 0, "C", 10), 0);
	takes(r, 1, 0, OUCH_REJECTED, "C", 0);
	ck_assert_uint_eq(counts(r).live, 1);
	/* learned from a stream only (another gateway, a replay): an Accepted
	 * adds a live token; what takes shares of an unknown token adds none */
	ck_assert_int_eq(accepted(r, 2, 1, "X", 10), 0);
	ck_assert_int_eq(known(r, 2, "X"), 1);
	takes(r, 2, 1, OUCH_EXECUTED, "Y", 10);
	ck_assert_int_eq(known(r, 2, "Y"), -ENOENT);
	ck_assert_int_eq(gw_route_verify(r), 0);
	gw_routes_close(r);
}
END_TEST

/* ---- forgetting ----------------------------------------------------------------- */

START_TEST(dead_forgotten_oldest_first)
{
	struct gw_routes *r = table();
	char tok[16];

	for (int i = 0; i < MAX_TOKENS; i++) {
		snprintf(tok, sizeof(tok), "D%d", i);
		ck_assert_int_eq(gw_route_enter(r, 0, tok, strlen(tok), (unsigned)i % 3), 0);
		takes(r, 0, (unsigned)i % 3, OUCH_REJECTED, tok, 0);
	}
	ck_assert_uint_eq(counts(r).tokens, MAX_TOKENS);
	ck_assert_uint_eq(counts(r).forgotten, 0); /* not before the table is full */
	ck_assert_int_eq(gw_route_full(r), 0);
	for (int k = 0; k < 10; k++) {
		snprintf(tok, sizeof(tok), "N%d", k);
		ck_assert_int_eq(gw_route_enter(r, 1, tok, strlen(tok), 2), 0);
		ck_assert_uint_eq(counts(r).forgotten, (uint64_t)k + 1);
		snprintf(tok, sizeof(tok), "D%d", k);
		ck_assert_int_eq(known(r, 0, tok), -ENOENT);
		snprintf(tok, sizeof(tok), "D%d", k + 1);
		ck_assert_int_eq(known(r, 0, tok), (k + 1) % 3);
	}
	ck_assert_uint_eq(counts(r).tokens, MAX_TOKENS);
	ck_assert_int_eq(gw_route_verify(r), 0);
	gw_routes_close(r);
}
END_TEST

/* Live orders fill the table: then only Enter Orders are refused, and
 * nothing live is forgotten for them. */
START_TEST(live_never_forgotten)
{
	struct gw_routes *r = table();
	char tok[16];

	for (int i = 0; i < MAX_TOKENS; i++) {
		snprintf(tok, sizeof(tok), "L%d", i);
		ck_assert_int_eq(gw_route_enter(r, 3, tok, strlen(tok), (unsigned)i % 3), 0);
		if (i % 2)
			ck_assert_int_eq(accepted(r, 3, (unsigned)i % 3, tok, 5), 0);
	}
	ck_assert_int_eq(gw_route_full(r), 1);
	ck_assert_int_eq(gw_route_enter(r, 3, "MORE", 4, 0), -ENOSPC);
	ck_assert_int_eq(gw_route_maybe(r, 3, "R", 1, 0), 0); /* the slack */
	ck_assert_int_eq(gw_route_maybe(r, 3, "R2", 2, 0), 0); /* forgets R */
	ck_assert_int_eq(known(r, 3, "R"), -ENOENT);
	ck_assert_uint_eq(counts(r).forgotten, 1);
	for (int i = 0; i < MAX_TOKENS; i++) {
		snprintf(tok, sizeof(tok), "L%d", i);
		ck_assert_int_eq(known(r, 3, tok), i % 3);
	}
	/* one dies: one Enter fits again */
	takes(r, 3, 1, OUCH_EXECUTED, "L1", 5);
	ck_assert_int_eq(gw_route_full(r), 0);
	ck_assert_int_eq(gw_route_enter(r, 3, "MORE", 4, 0), 0);
	ck_assert_int_eq(gw_route_verify(r), 0);
	gw_routes_close(r);
}
END_TEST

/* A table of SLOTS slots takes 10 x SLOTS orders (enter, accept, fill,
 * cancel, replace) with 900 resting all day, never refusing one. */
START_TEST(day_of_cycles)
{
	struct gw_routes *r = table();
	char tok[16], rep[16];

	for (int i = 0; i < 900; i++) {
		snprintf(tok, sizeof(tok), "REST%d", i);
		ck_assert_int_eq(gw_route_enter(r, 1, tok, strlen(tok), (unsigned)i % 3), 0);
		ck_assert_int_eq(accepted(r, 1, (unsigned)i % 3, tok, 100), 0);
	}
	for (int i = 0; i < 10 * SLOTS; i++) {
		unsigned p = (unsigned)i % 3;

		snprintf(tok, sizeof(tok), "O%d", i);
		ck_assert_int_eq(gw_route_full(r), 0);
		ck_assert_int_eq(gw_route_enter(r, 0, tok, strlen(tok), p), 0);
		ck_assert_int_eq(accepted(r, 0, p, tok, 100), 0);
		takes(r, 0, p, OUCH_EXECUTED, tok, 30);
		if (i % 3 == 0) {
			snprintf(rep, sizeof(rep), "P%d", i);
			ck_assert_int_eq(gw_route_maybe(r, 0, rep, strlen(rep), p), 0);
			ck_assert_int_eq(replaced(r, 0, p, tok, rep, 50), 0);
			takes(r, 0, p, OUCH_EXECUTED, rep, 50);
		} else {
			takes(r, 0, p, OUCH_CANCELED, tok, 70);
		}
		if (i % 1000 == 0)
			ck_assert_int_eq(gw_route_verify(r), 0);
	}
	ck_assert_uint_eq(counts(r).live, 900);
	ck_assert_uint_gt(counts(r).forgotten, 8 * SLOTS);
	for (int i = 0; i < 900; i++) {
		snprintf(tok, sizeof(tok), "REST%d", i);
		ck_assert_int_eq(known(r, 1, tok), i % 3);
	}
	snprintf(tok, sizeof(tok), "O%d", 10 * SLOTS - 1); /* just dead: still routed */
	ck_assert_int_eq(known(r, 0, tok), (10 * SLOTS - 1) % 3);
	ck_assert_int_eq(gw_route_verify(r), 0);
	gw_routes_close(r);
}
END_TEST

/* ---- a random day against a reference model ------------------------------------ */

/* The model: the same policy over plain arrays (no hashing, no moving). */
#define U 100000 /* tokens of the random day */
#define SLACK (SLOTS / 4 * 3)

enum { M_NONE, M_PENDING, M_LIVE, M_DEAD };

static struct model {
	struct {
		uint8_t state, part;
		uint32_t shares, at;
	} t[U];
	int ring[SLOTS]; /* token, or -1: a hole */
	uint32_t head, tail;
	uint64_t n, dead, forgotten;
} M;

static void m_pop(void)
{
	int k = M.ring[M.head++ % SLOTS];

	if (k < 0)
		return;
	M.t[k].state = M_NONE;
	M.n--;
	M.dead--;
	M.forgotten++;
}

static void m_reserve(uint32_t k)
{
	while (M.tail - M.head > SLOTS - k)
		m_pop();
}

static void m_kill(int k)
{
	M.t[k].state = M_DEAD;
	M.t[k].at = M.tail % SLOTS;
	M.ring[M.tail++ % SLOTS] = k;
	M.dead++;
}

static int m_add(int k, unsigned p, int st, uint32_t shares, uint64_t limit)
{
	while (M.n >= MAX_TOKENS && M.dead > 0)
		m_pop();
	if (M.n >= limit)
		return -ENOSPC;
	M.t[k].state = (uint8_t)st;
	M.t[k].part = (uint8_t)p;
	M.t[k].shares = shares;
	M.n++;
	if (st == M_DEAD)
		m_kill(k);
	return 0;
}

static int m_live(int k, unsigned p, uint32_t shares)
{
	if (M.t[k].state == M_NONE)
		return shares ? m_add(k, p, M_LIVE, shares, SLACK)
			      : (m_add(k, p, M_DEAD, 0, SLACK), 0);
	if (M.t[k].state == M_LIVE)
		return 0;
	if (M.t[k].state == M_DEAD) {
		M.ring[M.t[k].at] = -1;
		M.dead--;
	}
	M.t[k].state = M_LIVE;
	M.t[k].part = (uint8_t)p;
	M.t[k].shares = shares;
	if (!shares)
		m_kill(k);
	return 0;
}

static void m_take(int k, uint32_t n)
{
	if (M.t[k].state != M_LIVE)
		return;
	if (n >= M.t[k].shares)
		m_kill(k);
	else
		M.t[k].shares -= n;
}

/* ---- the random day ---------------------------------------------------------- */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull; /* a fixed seed: every run alike */

static uint32_t rnd(uint32_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state % n);
}

static char *name(int k)
{
	static char buf[4][16];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "K%d", k);
	return buf[i];
}

#define LOGIN(k) ((uint32_t)(k) % 4)
#define PART(k) ((unsigned)((k) / 7) % 3)

/* A Replace: fresh token k2 replaces a live order of its login and
 * partition when there is one near; the matcher ignores a quarter. */
static void replace_step(struct gw_routes *r, int k2, uint32_t n)
{
	uint32_t l = LOGIN(k2);
	unsigned p = PART(k2);
	int k = -1, want;

	for (int j = k2 - 4; j >= 0 && j > k2 - 400; j -= 4) {
		if (PART(j) == p && M.t[j].state == M_LIVE) {
			k = j;
			break;
		}
	}
	m_reserve(1);
	want = M.t[k2].state ? -EEXIST : m_add(k2, p, M_DEAD, 0, SLACK);
	ck_assert_int_eq(gw_route_maybe(r, l, name(k2), strlen(name(k2)), p), want);
	if (k < 0 || rnd(4) == 0)
		return;
	m_reserve(2);
	m_kill(k);
	want = m_live(k2, p, n);
	ck_assert_int_eq(replaced(r, l, p, name(k), name(k2), n), want);
}

/* One random step on token k (new: a token never used); both sides. */
static void step(struct gw_routes *r, int k, int fresh, int k2)
{
	uint32_t l = LOGIN(k), n = 1 + rnd(100);
	unsigned p = PART(k);
	int want, got;

	switch (fresh ? rnd(3) : 3 + rnd(7)) {
	case 0: /* Enter Order */
	case 1:
		m_reserve(1);
		want = M.t[k].state ? -EEXIST : m_add(k, p, M_PENDING, 0, MAX_TOKENS);
		got = gw_route_enter(r, l, name(k), strlen(name(k)), p);
		break;
	case 2: /* learned from a stream only */
		m_reserve(2);
		want = m_live(k, p, n % 10 ? n : 0);
		got = accepted(r, l, p, name(k), n % 10 ? n : 0);
		break;
	case 3: /* its answer */
	case 4:
		m_reserve(2);
		want = m_live(k, p, n);
		got = accepted(r, l, p, name(k), n);
		break;
	case 5: /* fills and cancels */
	case 6:
		m_reserve(2);
		m_take(k, n / 2 + 1);
		takes(r, l, p, rnd(2) ? OUCH_EXECUTED : OUCH_CANCELED, name(k), n / 2 + 1);
		return;
	case 7:
		replace_step(r, k2, n);
		return;
	case 8: /* Rejected */
		m_reserve(2);
		if (M.t[k].state == M_NONE)
			(void)m_add(k, p, M_DEAD, 0, SLACK);
		else if (M.t[k].state == M_PENDING)
			m_kill(k);
		takes(r, l, p, OUCH_REJECTED, name(k), 0);
		return;
	default: /* Order Modified: n left */
		m_reserve(2);
		if (M.t[k].state == M_LIVE)
			m_take(k, n < M.t[k].shares ? M.t[k].shares - n : M.t[k].shares);
		takes(r, l, p, OUCH_ORDER_MODIFIED, name(k), n);
		return;
	}
	ck_assert_int_eq(got, want);
}

static void compare(const struct gw_routes *r, int upto)
{
	struct gw_route_counts c = counts(r);

	ck_assert_int_eq(gw_route_verify(r), 0);
	ck_assert_uint_eq(c.tokens, M.n);
	ck_assert_uint_eq(c.dead, M.dead);
	ck_assert_uint_eq(c.forgotten, M.forgotten);
	for (int k = 0; k < upto; k++) {
		int got = known(r, LOGIN(k), name(k)), want = M.t[k].state ? M.t[k].part : -ENOENT;

		if (got != want) /* (one ck_assert a token would cost a write each) */
			ck_abort_msg("token K%d: partition %d, the model's %d", k, got, want);
	}
}

START_TEST(random_day)
{
	struct gw_routes *r = table();
	int next = 0;

	memset(&M, 0, sizeof(M));
	for (int i = 0; i < 200000 && next < U - 8; i++) {
		int fresh = rnd(3) == 0, k;

		k = fresh ? next++ : (next ? next - 1 - (int)rnd(next < 2500 ? (uint32_t)next : 2500)
					   : next++);
		step(r, k, fresh, next);
		if (M.t[next].state)
			next++; /* used as a replacement token */
		if (i % 2000 == 0)
			compare(r, next);
	}
	compare(r, next);
	ck_assert_uint_gt(M.forgotten, 2000);
	gw_routes_close(r);
}
END_TEST

static Suite *routes_suite(void)
{
	Suite *s = suite_create("routes");
	TCase *tc = tcase_create("tokens");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, order_life);
	tcase_add_test(tc, dead_forgotten_oldest_first);
	tcase_add_test(tc, live_never_forgotten);
	tcase_add_test(tc, day_of_cycles);
	tcase_add_test(tc, random_day);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run(routes_suite(), 0);
}
