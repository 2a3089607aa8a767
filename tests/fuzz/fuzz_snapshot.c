/* The matching engine's snapshot reader (engine_snapshot_read in
 * matcher/engine_snapshot.c): the input is the byte stream that the matcher's
 * snapshot file wraps (its header and CRC32C are not part of it), read into
 * a fresh engine small enough that the order, token, level and user tables
 * fill up (an input refused for its book hash alone is read again with the
 * hash repaired). Whatever the reader returns is 0 or a negative errno.
 * The bytes after the snapshot, if any, are operator commands
 * (ENGINE_ADMIN: limits, kill switches, lifts, references; FZ_ADMIN_LEN
 * bytes each, see admin_of), applied after the first round of commands.
 * When it accepts the input: engine_verify() passes, and still passes after an
 * Enter, a Replace, a Cancel, a Cancel All and each Admin; every message the engine then
 * emits is one the OUCH codec can send; the engine's snapshot reads back into
 * a second engine with the same engine_hash() and counters; and the two
 * engines answer the same further commands, then an end and a start of
 * day, with the same messages and hashes (nothing rests after the end). Aborts on a broken invariant. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_private.h" /* the book hash, to repair it */
#include "ouch.h"

/* 2024-01-02 14:31:00 UTC: a minute after the seeds' tape time (see README),
 * so that their shortest expiries have passed. */
#define FZ_NS 1000000000ull
#define FZ_TAPE_NS ((19724ull * 86400 + 14 * 3600 + 31 * 60) * FZ_NS)
#define FZ_PRICE(d) ((uint32_t)(d) * 10000u) /* whole dollars */
/* Where the header keeps book_hash (the format in engine_snapshot.c): after
 * four u32 and five u64. */
#define FZ_BOOK_HASH_AT 56

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fz_symbols[] = { "AAPL", "MSFT", "ZVZZT" };

static void check(int ok)
{
	if (!ok)
		abort();
}

static struct engine *new_engine(void)
{
	/* the configuration's risk layer: limits of a firm and of every user,
	 * a reference price */
	static const struct engine_admin_cmd risk[] = {
		{ .kind = ENGINE_ADMIN_LIMITS, .scope = ENGINE_SCOPE_FIRM, .name = "F2",
		  .limits = { .set = RISK_MAX_QTY | RISK_COLLAR, .max_qty = 400, .collar_bp = 500 } },
		{ .kind = ENGINE_ADMIN_LIMITS, .scope = ENGINE_SCOPE_USER, .name = "*",
		  .limits = { .set = RISK_MAX_OPEN, .max_open = 20 } },
		{ .kind = ENGINE_ADMIN_REFERENCE, .scope = ENGINE_SCOPE_SYMBOL, .name = "AAPL",
		  .price = FZ_PRICE(101) },
	};
	const struct engine_config cfg = {
		.symbols = fz_symbols, .n_symbols = 3, .max_shares = 1000000,
		.max_orders = 64, .max_tokens = 128, .max_levels = 16, .max_users = 8,
		.max_firms = 6, .risk = risk, .n_risk = sizeof(risk) / sizeof(risk[0]),
	};
	struct engine *e = NULL;

	check(engine_create(&e, &cfg) == 0);
	return e;
}

/* --- the byte stream ------------------------------------------------------ */

/* A snapshot in memory: the input (read from at off), or one being written
 * (grown as needed). */
struct fz_buf {
	uint8_t *p;
	size_t len, cap, off;
};

static int buf_read(void *ctx, void *out, size_t len)
{
	struct fz_buf *b = ctx;

	if (len > b->len - b->off)
		return -ENODATA;
	memcpy(out, b->p + b->off, len);
	b->off += len;
	return 0;
}

static int buf_write(void *ctx, const void *in, size_t len)
{
	struct fz_buf *b = ctx;

	if (len > b->cap - b->len) {
		size_t cap = 2 * (b->len + len);
		uint8_t *p = realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, in, len);
	b->len += len;
	return 0;
}

/* --- commands ------------------------------------------------------------- */

/* The outbound messages of a run of commands, folded into a digest. */
static void digest_msg(void *ctx, const char *user, const struct ouch_msg *m)
{
	uint64_t *d = ctx;
	uint8_t wire[OUCH_MAX_LEN];
	int len = ouch_encode_outbound(m, wire, sizeof(wire));

	check(len > 0 && user != NULL);
	for (int i = 0; i < len; i++)
		*d = (*d ^ wire[i]) * 0x100000001b3ull;
	for (; *user; user++)
		*d = (*d ^ (uint8_t)*user) * 0x100000001b3ull;
}

/* src into a field of cap bytes, truncated, NUL-padded. */
static void set_str(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memset(dst, 0, cap);
	memcpy(dst, src, n);
}

static struct engine_cmd cmd_base(enum engine_cmd_kind kind, const char *user, const char *firm)
{
	struct engine_cmd c;

	memset(&c, 0, sizeof(c));
	c.kind = kind;
	set_str(c.user, sizeof(c.user), user);
	set_str(c.firm, sizeof(c.firm), firm);
	return c;
}

/* A sell of 250 AAPL at $100, resting 30 s: it trades with the seeds' bids
 * at $100 and above, and what is left has an expiry. */
static struct engine_cmd cmd_enter(const char *user, const char *token)
{
	struct engine_cmd c = cmd_base(ENGINE_ENTER, user, "F1");
	struct ouch_enter_order *o = &c.u.enter;

	set_str(o->token, sizeof(o->token), token);
	o->side = OUCH_SELL;
	o->shares = 250;
	set_str(o->stock, sizeof(o->stock), "AAPL");
	o->price = FZ_PRICE(100);
	o->tif = 30;
	set_str(o->firm, sizeof(o->firm), "F1");
	o->display = OUCH_DISPLAY_ANONYMOUS;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = 'N';
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = ' ';
	return c;
}

static struct engine_cmd cmd_replace(const char *user, const char *old, const char *token)
{
	struct engine_cmd c = cmd_base(ENGINE_REPLACE, user, "");
	struct ouch_replace_order *r = &c.u.replace;

	set_str(r->existing_token, sizeof(r->existing_token), old);
	set_str(r->replacement_token, sizeof(r->replacement_token), token);
	r->shares = 150;
	r->price = FZ_PRICE(99);
	r->tif = OUCH_TIF_SYSTEM_HOURS;
	r->display = OUCH_DISPLAY_ANONYMOUS;
	r->iso = 'N';
	return c;
}

static struct engine_cmd cmd_cancel(const char *user, const char *token, uint32_t shares)
{
	struct engine_cmd c = cmd_base(ENGINE_CANCEL, user, "");

	set_str(c.u.cancel.token, sizeof(c.u.cancel.token), token);
	c.u.cancel.shares = shares;
	return c;
}

/* Round 0 works on the seeds' orders (users FZ1..FZ4, tokens T2 and T3);
 * round 1 on what round 0 left and on others (FZ5, FZ6). Returns the
 * messages' digest; the engine is verified after each command. */
static uint64_t run_round(struct engine *e, int round, uint64_t *seq)
{
	struct engine_cmd v[4];
	uint64_t d = 0xcbf29ce484222325ull;

	if (round == 0) {
		v[0] = cmd_enter("FZ1", "E0");
		v[1] = cmd_replace("FZ2", "T2", "R0");
		v[2] = cmd_cancel("FZ3", "T3", 10);
		v[3] = cmd_base(ENGINE_CANCEL_ALL, "FZ4", "");
	} else {
		v[0] = cmd_enter("FZ5", "E1");
		v[1] = cmd_replace("FZ2", "R0", "R1");
		v[2] = cmd_cancel("FZ6", "T6", 0);
		v[3] = cmd_base(ENGINE_CANCEL_ALL, "FZ1", "");
	}
	for (int i = 0; i < 4; i++) {
		engine_apply(e, ++*seq, FZ_TAPE_NS + (uint64_t)(4 * round + i) * FZ_NS, &v[i],
			     digest_msg, &d);
		check(engine_verify(e) == 0);
	}
	return d;
}

/* --- operator commands from the input's tail ------------------------------ */

#define FZ_ADMIN_LEN 12
#define FZ_ADMIN_MAX 16

static const char *const fz_names[] = {
	"F1", "F2", "F3", "F0", "FZ1", "FZ2", "FZ3", "FZ4", "FZ5", "FZ6",
	"*", "AAPL", "MSFT", "ZVZZT", "NOPE", "", "LONGNAME",
};

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* An Admin from FZ_ADMIN_LEN bytes: kind, scope, name, cancel and which
 * limits are given, then two u32 that the values derive from. Kinds and
 * scopes run one past the valid ones, to reach the ignored paths. */
static struct engine_cmd admin_of(const uint8_t *p)
{
	struct engine_cmd c = cmd_base(ENGINE_ADMIN, "", "");
	struct engine_admin_cmd *a = &c.u.admin;
	uint32_t x = get32(p + 4), y = get32(p + 8);

	a->kind = p[0] % 6;
	a->scope = p[1] % 5;
	set_str(a->name, sizeof(a->name), fz_names[p[2] % (sizeof(fz_names) / sizeof(fz_names[0]))]);
	a->cancel = p[3] & 1;
	a->limits.set = (uint32_t)(p[3] >> 1) & RISK_ALL;
	a->limits.max_qty = a->limits.set & RISK_MAX_QTY ? x % 2000 : 0;
	a->limits.max_notional = a->limits.set & RISK_MAX_NOTIONAL ? (uint64_t)y * 100 : 0;
	a->limits.collar_bp = a->limits.set & RISK_COLLAR ? x >> 20 : 0;
	a->limits.max_open = a->limits.set & RISK_MAX_OPEN ? y % 64 : 0;
	a->limits.credit = a->limits.set & RISK_CREDIT ? (uint64_t)x * y : 0;
	a->price = x;
	return c;
}

/* The tail's Admin commands (at most FZ_ADMIN_MAX), each verified after. */
static void run_admin(struct engine *e, const uint8_t *tail, size_t len, uint64_t *seq)
{
	uint64_t d = 0;

	for (size_t i = 0; i < FZ_ADMIN_MAX && len >= FZ_ADMIN_LEN * (i + 1); i++) {
		struct engine_cmd c = admin_of(tail + FZ_ADMIN_LEN * i);

		engine_apply(e, ++*seq, FZ_TAPE_NS + 5 * FZ_NS, &c, digest_msg, &d);
		check(engine_verify(e) == 0);
	}
}

static struct engine_cmd cmd_day(uint32_t kind, uint32_t day)
{
	struct engine_cmd c = cmd_base(ENGINE_DAY, "", "");

	c.u.day.kind = kind;
	c.u.day.day = day;
	return c;
}

/* The end of the input's day (every order canceled, whatever the book
 * held), an Enter while closed, the next day's start and an Enter in it.
 * Returns the messages' digest; the engine is verified after each. */
static uint64_t run_day(struct engine *e, uint64_t *seq)
{
	struct engine_cmd v[4];
	struct engine_stats st;
	struct engine_day day;
	uint64_t d = 0xcbf29ce484222325ull;

	engine_get_day(e, &day);
	v[0] = cmd_day(ENGINE_DAY_END, day.day);
	v[1] = cmd_enter("FZ1", "D0");
	v[2] = cmd_day(ENGINE_DAY_START, day.day + 1);
	v[3] = cmd_enter("FZ1", "D0");
	for (int i = 0; i < 4; i++) {
		engine_apply(e, ++*seq, FZ_TAPE_NS + (uint64_t)(8 + i) * FZ_NS, &v[i], digest_msg, &d);
		check(engine_verify(e) == 0);
		engine_get_stats(e, &st);
		check(i != 0 || st.orders_open == 0);
	}
	return d;
}

/* --- the checks ----------------------------------------------------------- */

/* a's state, written and read into a fresh engine, which is returned. */
static struct engine *copy_engine(const struct engine *a)
{
	struct fz_buf b = { 0 };
	struct engine *c = new_engine();
	struct engine_stats sa, sc;

	check(engine_snapshot_write(a, buf_write, &b) == 0);
	check(engine_snapshot_read(c, buf_read, &b) == 0 && b.off == b.len);
	free(b.p);
	check(engine_verify(c) == 0 && engine_hash(c) == engine_hash(a));
	engine_get_stats(a, &sa);
	engine_get_stats(c, &sc);
	check(memcmp(&sa, &sc, sizeof(sa)) == 0);
	return c;
}

/* The input read into a fresh engine: NULL when the reader refuses it.
 * The header's book_hash, an XXH3 of every order, stops a mutated order
 * short of the checks that follow it; so an input refused with -EBADMSG is
 * read again with the book hash that the first reader computed, as a
 * fuzzer of a file format repairs its checksum. */
static struct engine *read_input(const uint8_t *data, size_t size, size_t *used)
{
	struct fz_buf in = { .p = (uint8_t *)data, .len = size };
	struct engine *e = new_engine();
	uint64_t h;
	int r = engine_snapshot_read(e, buf_read, &in);

	check(r == 0 || (r < 0 && r > -4096));
	*used = in.off;
	if (r == 0)
		return e;
	h = e->book_hash;
	engine_destroy(e);
	if (r != -EBADMSG || size < FZ_BOOK_HASH_AT + sizeof(h))
		return NULL;
	in.p = malloc(size);
	check(in.p != NULL);
	memcpy(in.p, data, size);
	memcpy(in.p + FZ_BOOK_HASH_AT, &h, sizeof(h));
	e = new_engine();
	in.off = 0;
	r = engine_snapshot_read(e, buf_read, &in);
	*used = in.off;
	free(in.p);
	check(r == 0 || (r < 0 && r > -4096));
	if (r == 0)
		return e;
	engine_destroy(e);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t used = 0;
	struct engine *a = read_input(data, size, &used), *c;
	uint64_t seq_a, seq_c;

	if (!a)
		return 0;
	check(engine_verify(a) == 0);
	seq_a = 1000;
	run_round(a, 0, &seq_a);
	run_admin(a, data + used, size - used, &seq_a);
	c = copy_engine(a);
	seq_c = seq_a;
	check(run_round(a, 1, &seq_a) == run_round(c, 1, &seq_c));
	check(engine_hash(a) == engine_hash(c));
	check(run_day(a, &seq_a) == run_day(c, &seq_c));
	check(engine_hash(a) == engine_hash(c));
	engine_destroy(c);
	engine_destroy(a);
	return 0;
}
