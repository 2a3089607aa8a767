/* Writes fuzz_snapshot's seed corpus: engine snapshots (engine_snapshot_write,
 * no file header) made by real commands on an engine with fuzz_snapshot's
 * configuration, into the directory given (tests/fuzz/corpus/snapshot/):
 *   empty      a fresh engine;
 *   book       resting orders of six users on several levels of both sides,
 *              displayed and not, after a partial fill, a replace and cancels;
 *   forgotten  the book, then more Enter + Cancel than max_tokens, so that the
 *              token table is full and has forgotten its oldest dead tokens;
 *   expiry     orders with TIFs in seconds, some expired before the snapshot
 *              and some that expire before fuzz_snapshot's first command;
 *   full       the order pool full (max_orders), all max_users users, every
 *              level of one side taken;
 *   closed     the book, then the end of day 1 (format 3: the day);
 *   day2       closed, then day 2 started and the book entered again;
 *   risk       the book, then operator commands (format 4: limits of a
 *              user, of a firm and of "*", kill switches with and without
 *              cancel, a lift, a reference price) and a trade;
 *   risk-admin the same, followed by operator commands as fuzz_snapshot
 *              reads them from the bytes after the snapshot.
 * The format 3 seeds of the same names are kept as v3-* (a version 3
 * snapshot still loads).
 * Users FZ1..FZ6 and tokens T2, T3, T6 are the ones fuzz_snapshot's commands
 * name. Tape time starts at 2024-01-02 14:30:00 UTC. Run again (see README)
 * when the snapshot format changes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "ouch.h"

#define GEN_NS 1000000000ull
#define GEN_T0 ((19724ull * 86400 + 14 * 3600 + 30 * 60) * GEN_NS)
#define GEN_CENTS(c) ((uint32_t)(c) * 100u)

static const char *const gen_symbols[] = { "AAPL", "MSFT", "ZVZZT" };

/* The engine being built and its tape. */
struct gen {
	struct engine *e;
	uint64_t seq, now;
};

static void die(const char *what)
{
	fprintf(stderr, "gen_snapshot: %s\n", what);
	exit(1);
}

static void gen_start(struct gen *g)
{
	const struct engine_config cfg = {
		.symbols = gen_symbols, .n_symbols = 3, .max_shares = 1000000,
		.max_orders = 64, .max_tokens = 128, .max_levels = 16, .max_users = 8,
	};

	if (engine_create(&g->e, &cfg) != 0)
		die("engine_create failed");
	g->seq = 0;
	g->now = GEN_T0;
}

static void gen_apply(struct gen *g, const struct engine_cmd *c)
{
	engine_apply(g->e, ++g->seq, g->now, c, NULL, NULL);
	g->now += GEN_NS / 1000; /* a microsecond between commands */
}

/* src into a field of cap bytes, truncated, NUL-padded. */
static void set_str(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memset(dst, 0, cap);
	memcpy(dst, src, n);
}

static struct engine_cmd cmd_base(enum engine_cmd_kind kind, const char *user)
{
	struct engine_cmd c;

	memset(&c, 0, sizeof(c));
	c.kind = kind;
	set_str(c.user, sizeof(c.user), user);
	/* firms F1, F2, F3 for FZ1/FZ4, FZ2/FZ5, FZ3/FZ6 (self-match pairs) */
	snprintf(c.firm, sizeof(c.firm), "F%c", user[2] ? '1' + (user[2] - '1') % 3 : '0');
	return c;
}

/* An Enter; display 'N' is non-displayed; tif as OUCH has it. */
static void enter(struct gen *g, const char *user, const char *token, char side, uint32_t shares,
		  const char *stock, uint32_t cents, uint32_t tif, char display)
{
	struct engine_cmd c = cmd_base(ENGINE_ENTER, user);
	struct ouch_enter_order *o = &c.u.enter;

	set_str(o->token, sizeof(o->token), token);
	o->side = side;
	o->shares = shares;
	set_str(o->stock, sizeof(o->stock), stock);
	o->price = GEN_CENTS(cents);
	o->tif = tif;
	memcpy(o->firm, c.firm, sizeof(c.firm));
	o->display = display;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = 'N';
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = ' ';
	gen_apply(g, &c);
}

/* A day order, displayed. */
static void lim(struct gen *g, const char *user, const char *token, char side, uint32_t shares,
		const char *stock, uint32_t cents)
{
	enter(g, user, token, side, shares, stock, cents, OUCH_TIF_SYSTEM_HOURS, 'Y');
}

static void cancel(struct gen *g, const char *user, const char *token, uint32_t shares)
{
	struct engine_cmd c = cmd_base(ENGINE_CANCEL, user);

	set_str(c.u.cancel.token, sizeof(c.u.cancel.token), token);
	c.u.cancel.shares = shares;
	gen_apply(g, &c);
}

static void replace(struct gen *g, const char *user, const char *old, const char *token,
		    uint32_t shares, uint32_t cents)
{
	struct engine_cmd c = cmd_base(ENGINE_REPLACE, user);
	struct ouch_replace_order *r = &c.u.replace;

	set_str(r->existing_token, sizeof(r->existing_token), old);
	set_str(r->replacement_token, sizeof(r->replacement_token), token);
	r->shares = shares;
	r->price = GEN_CENTS(cents);
	r->tif = OUCH_TIF_SYSTEM_HOURS;
	r->display = 'Y';
	r->iso = 'N';
	gen_apply(g, &c);
}

/* --- the seeds ------------------------------------------------------------ */

static void seed_book(struct gen *g)
{
	lim(g, "FZ1", "T1", OUCH_BUY, 100, "AAPL", 9800);
	lim(g, "FZ1", "T1B", OUCH_SELL, 100, "AAPL", 10500);
	lim(g, "FZ2", "T2", OUCH_BUY, 300, "AAPL", 10100);
	enter(g, "FZ3", "T3", OUCH_BUY, 200, "AAPL", 10000, OUCH_TIF_SYSTEM_HOURS, 'N');
	lim(g, "FZ4", "T4A", OUCH_BUY, 100, "AAPL", 10000);
	lim(g, "FZ4", "T4B", OUCH_SELL, 100, "MSFT", 5000);
	lim(g, "FZ4", "T4C", OUCH_SELL_SHORT, 200, "AAPL", 10300);
	lim(g, "FZ5", "T5", OUCH_SELL, 500, "AAPL", 10200);
	lim(g, "FZ5", "T5B", OUCH_BUY, 400, "MSFT", 4900);
	lim(g, "FZ6", "T6", OUCH_SELL, 100, "AAPL", 10400);
	lim(g, "FZ6", "T6B", OUCH_BUY, 1000, "ZVZZT", 1000);
	lim(g, "FZ6", "T6C", OUCH_BUY, 50, "AAPL", 10200); /* fills 50 of T5 */
	replace(g, "FZ1", "T1", "T1R", 120, 9850);
	lim(g, "FZ3", "T3B", OUCH_SELL, 70, "MSFT", 5100);
	cancel(g, "FZ3", "T3B", 0);
	cancel(g, "FZ5", "T5B", 150);
}

/* More Enter + Cancel than the token table holds. */
static void seed_forgotten(struct gen *g)
{
	char token[16];

	seed_book(g);
	for (int i = 0; i < 160; i++) {
		const char *user = i % 2 ? "FZ5" : "FZ6";

		snprintf(token, sizeof(token), "C%d", i);
		lim(g, user, token, OUCH_BUY, 10 + i, "MSFT", 4000 + i);
		cancel(g, user, token, 0);
	}
}

static void seed_expiry(struct gen *g)
{
	enter(g, "FZ1", "X1", OUCH_BUY, 100, "AAPL", 9900, 5, 'Y');
	enter(g, "FZ2", "T2", OUCH_BUY, 300, "AAPL", 10100, 300, 'Y');
	enter(g, "FZ3", "T3", OUCH_BUY, 200, "AAPL", 10000, 45, 'N');
	enter(g, "FZ4", "X4", OUCH_SELL, 100, "AAPL", 10300, 10, 'Y');
	enter(g, "FZ5", "X5", OUCH_SELL, 100, "AAPL", 10300, 90, 'A');
	enter(g, "FZ6", "T6", OUCH_SELL, 100, "MSFT", 5000, 3600, 'Y');
	lim(g, "FZ6", "X6", OUCH_BUY, 100, "MSFT", 4900);
	g->now += 6 * GEN_NS;
	engine_advance_time(g->e, g->now, NULL, NULL); /* X1 expires */
}

/* max_orders orders of max_users users; the bids of AAPL on max_levels levels. */
static void seed_full(struct gen *g)
{
	char user[8], token[16];

	for (int i = 0; i < 64; i++) {
		snprintf(user, sizeof(user), "FZ%d", i % 8 + 1);
		snprintf(token, sizeof(token), "T%d", i + 1);
		if (i < 40)
			lim(g, user, token, OUCH_BUY, 100 + i, "AAPL", 9000 + 100 * (i % 16));
		else
			lim(g, user, token, OUCH_SELL, 100 + i, i % 2 ? "MSFT" : "ZVZZT", 12000 + i);
	}
}

static void day_event(struct gen *g, uint32_t kind, uint32_t day)
{
	struct engine_cmd c;

	memset(&c, 0, sizeof(c));
	c.kind = ENGINE_DAY;
	c.u.day.kind = kind;
	c.u.day.day = day;
	gen_apply(g, &c);
}

/* The book, then the end of day 1: nothing rests, the market is closed. */
static void seed_closed(struct gen *g)
{
	seed_book(g);
	day_event(g, ENGINE_DAY_END, 1);
}

/* Closed, then day 2 opened (tokens forgotten), and a new book on it that
 * reuses day 1's tokens. */
static void seed_day2(struct gen *g)
{
	seed_closed(g);
	day_event(g, ENGINE_DAY_START, 2);
	seed_book(g);
}

static void admin(struct gen *g, uint32_t kind, uint32_t scope, const char *name, int cancel,
		  const struct risk_limits *l, uint32_t price)
{
	struct engine_cmd c;

	memset(&c, 0, sizeof(c));
	c.kind = ENGINE_ADMIN;
	c.u.admin.kind = kind;
	c.u.admin.scope = scope;
	set_str(c.u.admin.name, sizeof(c.u.admin.name), name);
	c.u.admin.cancel = cancel;
	if (l)
		c.u.admin.limits = *l;
	c.u.admin.price = price;
	gen_apply(g, &c);
}

/* The book under an operator's limits, switches and references. */
static void seed_risk(struct gen *g)
{
	const struct risk_limits user = { .set = RISK_MAX_QTY | RISK_CREDIT, .max_qty = 150,
					  .credit = 5000000000ull };
	const struct risk_limits star = { .set = RISK_MAX_OPEN | RISK_COLLAR, .max_open = 4,
					  .collar_bp = 300 };

	seed_book(g);
	admin(g, ENGINE_ADMIN_LIMITS, ENGINE_SCOPE_USER, "FZ1", 0, &user, 0);
	admin(g, ENGINE_ADMIN_LIMITS, ENGINE_SCOPE_FIRM, "*", 0, &star, 0);
	admin(g, ENGINE_ADMIN_KILL, ENGINE_SCOPE_USER, "FZ5", 0, NULL, 0);
	admin(g, ENGINE_ADMIN_KILL, ENGINE_SCOPE_FIRM, "F3", 1, NULL, 0);
	admin(g, ENGINE_ADMIN_KILL, ENGINE_SCOPE_FIRM, "F9", 0, NULL, 0);
	admin(g, ENGINE_ADMIN_LIFT, ENGINE_SCOPE_FIRM, "F9", 0, NULL, 0);
	admin(g, ENGINE_ADMIN_REFERENCE, ENGINE_SCOPE_SYMBOL, "MSFT", 0, NULL, GEN_CENTS(5000));
	lim(g, "FZ2", "T2T", OUCH_SELL, 20, "AAPL", 10100); /* a trade: AAPL's reference */
}

/* --- output --------------------------------------------------------------- */

static int file_write(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* Operator commands as fuzz_snapshot reads them after a snapshot: kind,
 * scope, name index, cancel | given limits << 1, two u32. */
static const uint8_t admin_tail[] = {
	1, 1, 0, 0x3f, 100, 0, 0, 0, 200, 0, 0, 0, /* LIMITS F1, all given */
	2, 2, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, /* KILL FZ1, cancel */
	3, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* LIFT FZ1 */
	4, 3, 11, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, /* REFERENCE AAPL $100 */
	2, 1, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* KILL "*": ignored */
	1, 2, 10, 0x08, 0, 0, 0, 0, 5, 0, 0, 0, /* LIMITS user "*" max_open */
};

static void gen_seed_tail(const char *dir, const char *name, void (*fill)(struct gen *),
			  const uint8_t *tail, size_t tail_len)
{
	char path[4096];
	struct gen g;
	FILE *f;

	gen_start(&g);
	fill(&g);
	if (engine_verify(g.e) != 0)
		die("engine_verify failed");
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || engine_snapshot_write(g.e, file_write, f) != 0 ||
	    (tail_len && fwrite(tail, 1, tail_len, f) != tail_len) || fclose(f) != 0)
		die(path);
	engine_destroy(g.e);
}

static void gen_seed(const char *dir, const char *name, void (*fill)(struct gen *))
{
	gen_seed_tail(dir, name, fill, NULL, 0);
}

static void seed_empty(struct gen *g)
{
	(void)g;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_snapshot DIR\n");
		return 2;
	}
	gen_seed(argv[1], "empty", seed_empty);
	gen_seed(argv[1], "book", seed_book);
	gen_seed(argv[1], "forgotten", seed_forgotten);
	gen_seed(argv[1], "expiry", seed_expiry);
	gen_seed(argv[1], "full", seed_full);
	gen_seed(argv[1], "closed", seed_closed);
	gen_seed(argv[1], "day2", seed_day2);
	gen_seed(argv[1], "risk", seed_risk);
	gen_seed_tail(argv[1], "risk-admin", seed_risk, admin_tail, sizeof(admin_tail));
	return 0;
}
