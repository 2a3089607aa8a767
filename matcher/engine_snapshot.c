/* The matching engine's snapshots: the whole state as a versioned byte
 * stream (engine_snapshot_write, engine_snapshot_read in engine.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_private.h"

/* Format (version ENGINE_SNAP_VERSION, little-endian host layout of fixed-width
 * integers; the matcher wraps it with its own header and a CRC32C):
 *   u32 magic 'LSEN', u32 version, u32 n_symbols, u32 n_users,
 *   u64 n_tokens, u64 n_orders, u64 next_ref, next_match, next_prio,
 *   u64 book_hash, u64 now_ns, the first SNAP_STATS_V2 fields of struct
 *     engine_stats as u64[] (those version 2 had),
 *   version 3: the day: u32 day, u32 closed, u64 day_base, then the rest of
 *     struct engine_stats as u64[] (struct snap_day),
 *   symbols: u64 packed name each (must equal the configuration's, in order),
 *   users: u64 packed login each, in id order (ids, and so token hashes,
 *     come out identical),
 *   tokens: { u32 user, u32 live, char token[14], u16 pad } each: the live
 *     ones user by user (id order), each user's in entry order, then the
 *     dead ones oldest first (the order in which the table forgets them;
 *     each user's, filtered, the order its quota forgets them),
 *   version 4: the risk part: struct snap_risk (the rest of struct
 *     engine_stats, the table sizes, the tape's "*" limits, the risk hash),
 *     then every firm (id order: the reader creates them in this order, so
 *     their ids come out identical) as struct snap_firm, every user named by
 *     limits or a kill switch as struct snap_ulim (with the tape's layer:
 *     the configuration's comes from the reader's own), u32 tape reference
 *     price per symbol (0: none),
 *   orders: in book order (symbol, side, level ascending key, displayed queue
 *     then hidden, head to tail) as struct snap_order,
 *   per user (id order): u32 count, then u32 order indices (into the order
 *     list) in the user's entry order (CANCEL_ALL's order),
 *   version 4: per firm (no firm first, then id order) u32 packed name, u32
 *     count and u32 order indices in the firm's entry order (a KILL's
 *     order). The per-user and per-firm open counts and notional are not
 *     written: the reader recomputes them as it books the orders. */
#define ENGINE_SNAP_MAGIC 0x4e45534cu /* "LSEN" */
/* 2: dead tokens in age order, tokens_forgotten; 3: the trading day; 4:
 * pre-trade risk (and the per-user token quota's counters, the last two of
 * struct engine_stats). A version 3 file still loads with no tape risk state
 * (it was written before an Admin could be applied) and each firm's orders
 * listed user by user (users in id order, each user's in entry order). */
#define ENGINE_SNAP_VERSION 4u
#define ENGINE_SNAP_VERSION_OLDEST 3u

/* struct engine_stats up to `messages`: version 2's, kept where they were;
 * then version 3's four (day_events .. closed_rejects), then version 4's */
#define SNAP_STATS_V2 20
#define SNAP_STATS_V3 4
#define SNAP_STATS_V4 (sizeof(struct engine_stats) / sizeof(uint64_t) - SNAP_STATS_V2 - SNAP_STATS_V3)
_Static_assert(offsetof(struct engine_stats, messages) == (SNAP_STATS_V2 - 1) * sizeof(uint64_t),
	       "version 2's counters come first in struct engine_stats");
_Static_assert(offsetof(struct engine_stats, admin_events) ==
		       (SNAP_STATS_V2 + SNAP_STATS_V3) * sizeof(uint64_t),
	       "version 3's counters come next in struct engine_stats");
_Static_assert(sizeof(struct engine_stats) % sizeof(uint64_t) == 0, "engine_stats is u64s");

struct snap_head {
	uint32_t magic, version, n_symbols, n_users;
	uint64_t n_tokens, n_orders, next_ref, next_match, next_prio, book_hash, now_ns;
	uint64_t st[SNAP_STATS_V2];
};

struct snap_day {
	uint32_t day, closed;
	uint64_t day_base;
	uint64_t st[SNAP_STATS_V3]; /* engine_stats after `messages` */
};

struct snap_risk {
	uint64_t st[SNAP_STATS_V4]; /* engine_stats from admin_events */
	uint32_t n_firms, n_ulims;
	struct risk_limits def_tape[2]; /* "*" of users, of firms */
	uint64_t risk_hash;
};

struct snap_firm {
	uint32_t name, killed;
	struct risk_limits tape;
};

struct snap_ulim {
	uint64_t name;
	uint32_t killed, pad;
	struct risk_limits tape;
};

struct snap_token {
	uint32_t user, live;
	char token[OUCH_TOKEN_LEN];
	uint16_t pad;
};

struct snap_order {
	uint64_t ref, prio, expire_ns;
	uint32_t price, shares, user, firm, sym;
	char token[OUCH_TOKEN_LEN];
	char side, display, capacity, cross_type;
	char ofirm[OUCH_FIRM_LEN];
	char pad[2];
};

#define SNAP_CHUNK 512
#define LIVE_PENDING (TOKEN_DEAD - 1) /* a live token whose order is not loaded yet */

/* --- writing ------------------------------------------------------------------ */

/* The writer, and how many elements of the caller's chunk array (SNAP_CHUNK
 * long) are filled: each full chunk is one fn call. */
struct snap_out {
	engine_write_fn fn;
	void *ctx;
	uint32_t n;
};

/* Writes the chunk's elements (elem bytes each) out, if any. */
static int chunk_flush(struct snap_out *out, const void *chunk, size_t elem)
{
	int r = 0;

	if (out->n)
		r = out->fn(out->ctx, chunk, elem * out->n);
	out->n = 0;
	return r < 0 ? r : 0;
}

/* After element out->n of the chunk was filled. */
static int chunk_add(struct snap_out *out, const void *chunk, size_t elem)
{
	if (++out->n < SNAP_CHUNK)
		return 0;
	return chunk_flush(out, chunk, elem);
}

/* The header, the symbols and the users. */
static int snap_write_head(const struct engine *e, struct snap_out *out)
{
	struct snap_head h;
	struct snap_day d;
	int r;

	memset(&h, 0, sizeof(h));
	h.magic = ENGINE_SNAP_MAGIC;
	h.version = ENGINE_SNAP_VERSION;
	h.n_symbols = e->n_symbols;
	h.n_users = e->n_users;
	h.n_tokens = e->n_tokens;
	h.n_orders = e->orders_open;
	h.next_ref = e->next_ref;
	h.next_match = e->next_match;
	h.next_prio = e->next_prio;
	h.book_hash = e->book_hash;
	h.now_ns = e->now_ns;
	memcpy(h.st, &e->st, sizeof(h.st));
	memset(&d, 0, sizeof(d));
	d.day = e->day;
	d.closed = (uint32_t)e->closed;
	d.day_base = e->day_base;
	memcpy(d.st, (const uint64_t *)&e->st + SNAP_STATS_V2, sizeof(d.st));
	if ((r = out->fn(out->ctx, &h, sizeof(h))) < 0 || (r = out->fn(out->ctx, &d, sizeof(d))) < 0)
		return r;
	for (uint32_t s = 0; s < e->n_symbols; s++)
		if ((r = out->fn(out->ctx, &e->syms[s].name, sizeof(uint64_t))) < 0)
			return r;
	for (uint32_t u = 1; u <= e->n_users; u++)
		if ((r = out->fn(out->ctx, &e->users[u].name, sizeof(uint64_t))) < 0)
			return r;
	return 0;
}

/* One token into the chunk tb. */
static int snap_put_token(struct snap_out *out, struct snap_token *tb, const struct token_slot *t)
{
	struct snap_token *st = &tb[out->n];

	memset(st, 0, sizeof(*st));
	st->user = t->user;
	st->live = token_live(t);
	memcpy(st->token, t->token, OUCH_TOKEN_LEN);
	return chunk_add(out, tb, sizeof(tb[0]));
}

#define SNAP_PREFETCH 16 /* dead tokens fetched ahead of the one written */

static int snap_write_tokens(const struct engine *e, struct snap_out *out)
{
	struct snap_token tb[SNAP_CHUNK];
	uint32_t ahead = e->dead_head;
	int r;

	uint32_t live = 0;

	/* the live ones user by user, in entry order: O(open orders), where a
	 * walk of the table would read all of it (max_tokens x 1.5 slots) */
	for (uint32_t u = 1; u <= e->n_users; u++)
		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext, live++)
			if ((r = snap_put_token(out, tb, &e->tokens[e->orders[oi].tok])) < 0)
				return r;
	if (live + e->n_dead != e->n_tokens)
		return -EPROTO; /* a live token without its order: a bug */
	/* the global list: each user's dead ones come out in its own order, so
	 * the reader's token_kill() rebuilds the per-user lists too */
	for (uint32_t k = 0; k < SNAP_PREFETCH && ahead != NONE; k++)
		ahead = e->dead[ahead].next;
	for (uint32_t d = e->dead_head; d != NONE; d = e->dead[d].next) {
		/* the dead tokens' slots are all over the table: fetch ahead */
		if (ahead != NONE) {
			__builtin_prefetch(&e->tokens[e->dead[ahead].slot]);
			ahead = e->dead[ahead].next;
		}
		if ((r = snap_put_token(out, tb, &e->tokens[e->dead[d].slot])) < 0)
			return r;
	}
	return chunk_flush(out, tb, sizeof(tb[0]));
}

static void snap_order_of(const struct engine *e, const struct order *o, struct snap_order *so)
{
	memset(so, 0, sizeof(*so));
	so->ref = o->ref;
	so->prio = o->prio;
	so->expire_ns = o->expire_ns;
	so->price = o->price;
	so->shares = o->shares;
	so->user = o->user;
	so->firm = e->firms[o->firm].name;
	so->sym = o->sym;
	memcpy(so->token, e->tokens[o->tok].token, OUCH_TOKEN_LEN);
	so->side = o->side;
	so->display = o->display;
	so->capacity = o->capacity;
	so->cross_type = o->cross_type;
	memcpy(so->ofirm, o->ofirm, OUCH_FIRM_LEN);
}

/* The orders of one level into the chunk ob; rank[oi] gets each one's place
 * in the list (*k counts them). */
static int snap_write_level(const struct engine *e, const struct level *l, struct snap_out *out,
			    struct snap_order *ob, uint32_t *rank, uint32_t *k)
{
	int r;

	for (int q = 0; q < 2; q++) {
		for (uint32_t oi = l->head[q]; oi != NONE; oi = e->orders[oi].next) {
			snap_order_of(e, &e->orders[oi], &ob[out->n]);
			rank[oi] = (*k)++;
			if ((r = chunk_add(out, ob, sizeof(ob[0]))) < 0)
				return r;
		}
	}
	return 0;
}

static int snap_write_orders(const struct engine *e, struct snap_out *out, uint32_t *rank)
{
	struct snap_order ob[SNAP_CHUNK];
	uint32_t k = 0;
	int r;

	for (uint32_t sym = 0; sym < e->n_symbols; sym++) {
		for (int side = 0; side < 2; side++) {
			const struct lvl_ent *a = side_ents(e, sym, side);

			for (uint32_t i = 0; i < e->syms[sym].n[side]; i++) {
				r = snap_write_level(e, &e->levels[a[i].level], out, ob, rank, &k);
				if (r < 0)
					return r;
			}
		}
	}
	return chunk_flush(out, ob, sizeof(ob[0]));
}

/* The ranks of a list of orders (a user's, through unext, or a firm's,
 * through fnext), in its order. */
static int snap_write_ranks(const struct engine *e, struct snap_out *out, const uint32_t *rank,
			    uint32_t head, int firm)
{
	uint32_t buf[SNAP_CHUNK];
	int r;

	for (uint32_t oi = head; oi != NONE; oi = firm ? e->orders[oi].fnext : e->orders[oi].unext) {
		buf[out->n] = rank[oi];
		if ((r = chunk_add(out, buf, sizeof(buf[0]))) < 0)
			return r;
	}
	return chunk_flush(out, buf, sizeof(buf[0]));
}

/* Per user: the count, then the ranks of its orders in entry order. */
static int snap_write_users(const struct engine *e, struct snap_out *out, const uint32_t *rank)
{
	int r;

	for (uint32_t u = 1; u <= e->n_users; u++) {
		uint32_t cnt = 0;

		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext)
			cnt++;
		if ((r = out->fn(out->ctx, &cnt, sizeof(cnt))) < 0 ||
		    (r = snap_write_ranks(e, out, rank, e->users[u].head, 0)) < 0)
			return r;
	}
	return 0;
}

/* The risk trailer's fixed part, the firms, named users and references. */
static int snap_write_risk(const struct engine *e, struct snap_out *out)
{
	struct snap_risk rk;
	int r;

	memset(&rk, 0, sizeof(rk));
	memcpy(rk.st, (const uint64_t *)&e->st + SNAP_STATS_V2 + SNAP_STATS_V3, sizeof(rk.st));
	rk.n_firms = e->n_firms;
	rk.n_ulims = e->n_ulims;
	rk.def_tape[0] = e->def[0].tape;
	rk.def_tape[1] = e->def[1].tape;
	rk.risk_hash = e->risk_hash;
	if ((r = out->fn(out->ctx, &rk, sizeof(rk))) < 0)
		return r;
	for (uint32_t f = 1; f <= e->n_firms; f++) {
		struct snap_firm sf = { .name = e->firms[f].name, .killed = e->firms[f].r.killed,
					.tape = e->firms[f].r.tape };

		if ((r = out->fn(out->ctx, &sf, sizeof(sf))) < 0)
			return r;
	}
	for (uint32_t k = 1; k <= e->n_ulims; k++) {
		struct snap_ulim su = { .name = e->ulims[k].name, .killed = e->ulims[k].r.killed,
					.tape = e->ulims[k].r.tape };

		if ((r = out->fn(out->ctx, &su, sizeof(su))) < 0)
			return r;
	}
	for (uint32_t s = 0; s < e->n_symbols; s++)
		if ((r = out->fn(out->ctx, &e->syms[s].ref, sizeof(uint32_t))) < 0)
			return r;
	return 0;
}

/* Per firm (none, then id order): its name, count and order ranks. */
static int snap_write_firms(const struct engine *e, struct snap_out *out, const uint32_t *rank)
{
	int r;

	for (uint32_t f = 0; f <= e->n_firms; f++) {
		uint32_t head[2] = { e->firms[f].name, e->firms[f].open };

		if ((r = out->fn(out->ctx, head, sizeof(head))) < 0 ||
		    (r = snap_write_ranks(e, out, rank, e->firms[f].head, 1)) < 0)
			return r;
	}
	return 0;
}

int engine_snapshot_write(const struct engine *e, engine_write_fn fn, void *ctx)
{
	struct snap_out out = { .fn = fn, .ctx = ctx };
	uint32_t *rank;
	int r;

	if ((r = snap_write_head(e, &out)) < 0 || (r = snap_write_tokens(e, &out)) < 0)
		return r;
	/* the order's place in the list, for the users' lists (in heap slots: the
	 * heap array holds only the orders with an expiry, so use a scratch
	 * array) */
	rank = malloc(((size_t)e->max_orders + 1) * sizeof(*rank));
	if (!rank)
		return -ENOMEM;
	/* the firms before the orders, so that a reader gives them the ids
	 * they have here (and writes the same bytes again) */
	r = snap_write_risk(e, &out);
	if (r == 0)
		r = snap_write_orders(e, &out, rank);
	if (r == 0)
		r = snap_write_users(e, &out, rank);
	if (r == 0)
		r = snap_write_firms(e, &out, rank);
	free(rank);
	return r;
}

/* --- reading ------------------------------------------------------------------ */

/* The header (into h), the day (into d) and the symbols, checked against
 * the engine. */
static int snap_read_head(struct engine *e, struct snap_head *h, struct snap_day *d,
			  engine_read_fn fn, void *ctx)
{
	int r;

	if ((r = fn(ctx, h, sizeof(*h))) < 0)
		return r;
	if (h->magic != ENGINE_SNAP_MAGIC || h->version < ENGINE_SNAP_VERSION_OLDEST ||
	    h->version > ENGINE_SNAP_VERSION)
		return -EPROTO;
	if ((r = fn(ctx, d, sizeof(*d))) < 0)
		return r;
	if (h->n_symbols != e->n_symbols || h->n_users > e->max_users ||
	    h->n_tokens > e->max_tokens || h->n_orders > e->max_orders || h->n_orders > h->n_tokens ||
	    d->day == 0 || d->day_base == 0 || d->closed > 1 || (d->closed && h->n_orders))
		return -EBADMSG;
	for (uint32_t s = 0; s < e->n_symbols; s++) {
		uint64_t name;

		if ((r = fn(ctx, &name, sizeof(name))) < 0)
			return r;
		if (name != e->syms[s].name)
			return -EBADMSG; /* another partition's symbols */
	}
	return 0;
}

/* The users, which must come out with the ids they had. */
static int snap_read_users(struct engine *e, uint32_t n_users, engine_read_fn fn, void *ctx)
{
	for (uint32_t u = 1; u <= n_users; u++) {
		uint64_t name;
		char login[8];
		int r;

		if ((r = fn(ctx, &name, sizeof(name))) < 0)
			return r;
		memcpy(login, &name, sizeof(name) < sizeof(login) ? sizeof(name) : sizeof(login));
		login[7] = '\0';
		if (engine_book_user(e, login, 0) != 0 || engine_book_user(e, login, 1) != u)
			return -EBADMSG;
	}
	return 0;
}

/* The tokens; a live one waits for its order (LIVE_PENDING). */
static int snap_read_tokens(struct engine *e, uint64_t n_tokens, engine_read_fn fn, void *ctx)
{
	for (uint64_t i = 0; i < n_tokens; i++) {
		struct snap_token t;
		uint32_t slot;
		uint64_t th;
		int found, r;

		if ((r = fn(ctx, &t, sizeof(t))) < 0)
			return r;
		if (t.user == 0 || t.user > e->n_users)
			return -EBADMSG;
		th = token_hash(t.user, t.token);
		slot = token_find(e, t.user, th, t.token, &found);
		if (found)
			return -EBADMSG;
		token_insert(e, slot, t.user, th, t.token, t.live ? LIVE_PENDING : NONE);
	}
	return 0;
}

/* One order, booked at the back of its level (not yet in its user's list);
 * *out is its pool index. */
/* An order's characters as an Accepted left them (its price too is a limit
 * price, checked by the caller): printable, the padding
 * of the token and the firm NUL (what an encoder would refuse later, in a
 * Replaced or an Executed, is refused here). */
static int snap_order_printable(const struct snap_order *so)
{
	const char one[] = { so->display, so->capacity, so->cross_type };

	for (size_t i = 0; i < sizeof(one); i++)
		if (one[i] < ' ' || one[i] > '~')
			return 0;
	for (size_t i = 0; i < OUCH_TOKEN_LEN; i++)
		if (so->token[i] && (so->token[i] < ' ' || so->token[i] > '~'))
			return 0;
	for (size_t i = 0; i < OUCH_FIRM_LEN; i++)
		if (so->ofirm[i] && (so->ofirm[i] < ' ' || so->ofirm[i] > '~'))
			return 0;
	return 1;
}

static int snap_read_order(struct engine *e, const struct snap_order *so, uint32_t *out)
{
	uint32_t oi = e->order_free, li, slot, firm;
	char fname[OUCH_FIRM_LEN + 1];
	struct order *o;
	int found;

	memcpy(fname, &so->firm, OUCH_FIRM_LEN);
	fname[OUCH_FIRM_LEN] = '\0';
	firm = engine_risk_firm(e, fname, 1);
	if (oi == NONE || firm == NONE || so->sym >= e->n_symbols || so->user == 0 || so->user > e->n_users ||
	    so->shares == 0 || (so->side != OUCH_BUY && !is_sell(so->side)) ||
	    so->price == 0 || so->price > OUCH_PRICE_MAX || !snap_order_printable(so))
		return -EBADMSG;
	slot = token_find(e, so->user, token_hash(so->user, so->token), so->token,
				      &found);
	if (!found || e->tokens[slot].order != LIVE_PENDING)
		return -EBADMSG;
	li = engine_book_level(e, so->sym, book_side(so->side), so->price);
	if (li == NONE)
		return -EBADMSG;
	e->order_free = e->orders[oi].next;
	o = &e->orders[oi];
	memset(o, 0, sizeof(*o));
	o->heap_pos = NONE;
	o->unext = o->uprev = NONE;
	o->fnext = o->fprev = NONE;
	o->ref = so->ref;
	o->prio = so->prio;
	o->expire_ns = so->expire_ns;
	o->price = so->price;
	o->shares = so->shares;
	o->user = so->user;
	o->firm = firm;
	o->sym = so->sym;
	o->tok = slot;
	o->side = so->side;
	o->display = so->display;
	o->capacity = so->capacity;
	o->cross_type = so->cross_type;
	memcpy(o->ofirm, so->ofirm, OUCH_FIRM_LEN);
	e->tokens[slot].order = oi;
	engine_book_place(e, oi, li);
	e->orders_open++;
	*out = oi;
	return 0;
}

/* User u's list: a count, then indices into map (the orders as read). */
static int snap_read_user_list(struct engine *e, uint32_t u, const uint32_t *map, uint64_t n_orders,
			       engine_read_fn fn, void *ctx)
{
	struct user *us = &e->users[u];
	uint32_t cnt, idx;
	int r;

	if ((r = fn(ctx, &cnt, sizeof(cnt))) < 0)
		return r;
	for (uint32_t j = 0; j < cnt; j++) {
		struct order *o;

		if ((r = fn(ctx, &idx, sizeof(idx))) < 0)
			return r;
		if (idx >= n_orders)
			return -EBADMSG;
		o = &e->orders[map[idx]];
		if (o->user != u || o->uprev != NONE || us->head == map[idx])
			return -EBADMSG;
		o->uprev = us->tail;
		if (us->tail != NONE)
			e->orders[us->tail].unext = map[idx];
		else
			us->head = map[idx];
		us->tail = map[idx];
	}
	return 0;
}

/* Version 3's firm lists: user by user, each in its entry order. */
static void snap_v3_firm_lists(struct engine *e)
{
	for (uint32_t u = 1; u <= e->n_users; u++)
		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext)
			engine_firm_append(e, oi);
}

/* A limits layer as written: only given fields are set. */
static int limits_ok(const struct risk_limits *l)
{
	return !(l->set & ~RISK_ALL) && ((l->set & RISK_MAX_QTY) || !l->max_qty) &&
	       ((l->set & RISK_MAX_NOTIONAL) || !l->max_notional) &&
	       ((l->set & RISK_COLLAR) || !l->collar_bp) && ((l->set & RISK_MAX_OPEN) || !l->max_open) &&
	       ((l->set & RISK_CREDIT) || !l->credit);
}

/* The tape layer of a firm or named user: its entry (found or created)
 * takes it. */
static int snap_put_layer(struct engine *e, uint32_t scope, uint64_t name, uint32_t killed,
			  const struct risk_limits *tape)
{
	struct rlim *r;

	if (killed > 1 || !limits_ok(tape) || name == '*')
		return -EBADMSG;
	r = engine_risk_layers(e, scope, name);
	if (!r)
		return -EBADMSG;
	r->tape = *tape;
	r->killed = killed;
	return 0;
}

/* The risk trailer up to the firm lists (into rk). */
static int snap_read_risk(struct engine *e, struct snap_risk *rk, engine_read_fn fn, void *ctx)
{
	int r;

	if ((r = fn(ctx, rk, sizeof(*rk))) < 0)
		return r;
	if (rk->n_firms > e->max_firms || rk->n_ulims > e->max_users || !limits_ok(&rk->def_tape[0]) ||
	    !limits_ok(&rk->def_tape[1]))
		return -EBADMSG;
	e->def[0].tape = rk->def_tape[0];
	e->def[1].tape = rk->def_tape[1];
	for (uint32_t f = 0; f < rk->n_firms; f++) {
		struct snap_firm sf;

		if ((r = fn(ctx, &sf, sizeof(sf))) < 0 ||
		    (r = snap_put_layer(e, ENGINE_SCOPE_FIRM, sf.name, sf.killed, &sf.tape)) < 0)
			return r;
	}
	for (uint32_t k = 0; k < rk->n_ulims; k++) {
		struct snap_ulim su;

		if ((r = fn(ctx, &su, sizeof(su))) < 0 ||
		    (r = snap_put_layer(e, ENGINE_SCOPE_USER, su.name, su.killed, &su.tape)) < 0)
			return r;
	}
	for (uint32_t s = 0; s < e->n_symbols; s++) {
		if ((r = fn(ctx, &e->syms[s].ref, sizeof(uint32_t))) < 0)
			return r;
		if (e->syms[s].ref > OUCH_PRICE_MAX)
			return -EBADMSG;
	}
	return 0;
}

/* The firms' lists (n_firms + 1 of them), of the orders as read (map). */
static int snap_read_firm_lists(struct engine *e, uint32_t n_firms, const uint32_t *map,
				uint64_t n_orders, engine_read_fn fn, void *ctx)
{
	for (uint32_t i = 0; i <= n_firms; i++) {
		uint32_t head[2], idx, id;
		char fname[OUCH_FIRM_LEN + 1];
		int r;

		if ((r = fn(ctx, head, sizeof(head))) < 0)
			return r;
		memcpy(fname, &head[0], OUCH_FIRM_LEN);
		fname[OUCH_FIRM_LEN] = '\0';
		id = engine_risk_firm(e, fname, 0);
		if (id == NONE || e->firms[id].name != head[0] || (i == 0) != (id == 0))
			return -EBADMSG;
		for (uint32_t j = 0; j < head[1]; j++) {
			const struct order *o;

			if ((r = fn(ctx, &idx, sizeof(idx))) < 0)
				return r;
			if (idx >= n_orders)
				return -EBADMSG;
			o = &e->orders[map[idx]];
			if (o->firm != id || o->fprev != NONE || e->firms[id].head == map[idx])
				return -EBADMSG;
			engine_firm_append(e, map[idx]);
		}
	}
	return 0;
}

/* The orders and the users' lists; map: room for n_orders pool indices. */
static int snap_read_orders(struct engine *e, uint64_t n_orders, uint32_t *map,
			    engine_read_fn fn, void *ctx)
{
	int r;

	for (uint64_t i = 0; i < n_orders; i++) {
		struct snap_order so;

		if ((r = fn(ctx, &so, sizeof(so))) < 0 || (r = snap_read_order(e, &so, &map[i])) < 0)
			return r;
	}
	for (uint32_t u = 1; u <= e->n_users; u++)
		if ((r = snap_read_user_list(e, u, map, n_orders, fn, ctx)) < 0)
			return r;
	return 0;
}

/* The counters and the day, once every token has found its order and the
 * book checks. */
static int snap_read_finish(struct engine *e, const struct snap_head *h, const struct snap_day *d,
			    const struct snap_risk *rk)
{
	for (uint32_t i = 0; i < e->token_cap; i++)
		if (e->tokens[i].user != 0 && e->tokens[i].order == LIVE_PENDING)
			return -EBADMSG; /* a live token without its order */
	e->next_ref = h->next_ref;
	e->next_match = h->next_match;
	e->next_prio = h->next_prio;
	e->now_ns = h->now_ns;
	e->ts = h->now_ns % NS_PER_DAY;
	memcpy(&e->st, h->st, sizeof(h->st));
	memcpy((uint64_t *)&e->st + SNAP_STATS_V2, d->st, sizeof(d->st));
	memcpy((uint64_t *)&e->st + SNAP_STATS_V2 + SNAP_STATS_V3, rk->st, sizeof(rk->st));
	e->risk_on = e->risk_cfg || e->st.admin_events > 0;
	e->risk_hash = engine_risk_rehash(e);
	if (e->risk_hash != rk->risk_hash)
		return -EBADMSG;
	e->day = d->day;
	e->closed = (int)d->closed;
	e->day_base = d->day_base;
	if (e->book_hash != h->book_hash || engine_verify(e) != 0)
		return -EBADMSG;
	return 0;
}

int engine_snapshot_read(struct engine *e, engine_read_fn fn, void *ctx)
{
	struct snap_head h;
	struct snap_day d;
	struct snap_risk rk;
	uint32_t *map;
	int r;

	if (e->n_users || e->n_tokens || e->orders_open)
		return -EBUSY;
	if ((r = snap_read_head(e, &h, &d, fn, ctx)) < 0)
		return r;
	/* format 3 predates risk: it knows no reference price of before, which
	 * an engine configured with risk has tracked since seq 1 */
	if (h.version < 4 && e->risk_cfg)
		return -EPROTO;
	if ((r = snap_read_users(e, h.n_users, fn, ctx)) < 0 ||
	    (r = snap_read_tokens(e, h.n_tokens, fn, ctx)) < 0)
		return r;
	memset(&rk, 0, sizeof(rk));
	if (h.version >= 4 && (r = snap_read_risk(e, &rk, fn, ctx)) < 0)
		return r;
	map = malloc((h.n_orders + 1) * sizeof(*map));
	if (!map)
		return -ENOMEM;
	r = snap_read_orders(e, h.n_orders, map, fn, ctx);
	if (r == 0 && h.version < 4) {
		snap_v3_firm_lists(e);
		rk.risk_hash = engine_risk_rehash(e); /* none */
	} else if (r == 0) {
		r = snap_read_firm_lists(e, rk.n_firms, map, h.n_orders, fn, ctx);
	}
	if (r == 0)
		r = snap_read_finish(e, &h, &d, &rk);
	free(map);
	return r;
}
