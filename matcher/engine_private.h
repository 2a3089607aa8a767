/* The matching engine's insides, shared by its files (engine.h is the public
 * interface; see it for the semantics):
 *  - engine.c: the commands (Enter, Replace, Cancel, Modify, Cancel All),
 *    matching, expiry and the outbound messages;
 *  - engine_book.c: the tables and lookups (symbols, users, tokens, orders,
 *    price levels, expiry heap, state hash), life cycle and self-check;
 *  - engine_snapshot.c: the snapshot format;
 *  - engine_risk.c: pre-trade risk (the firm table, the limits of firms and
 *    users in two layers, kill switches, reference prices, ENGINE_ADMIN).
 *
 * Layout, all allocated once:
 *  - orders: a pool of struct order with a free list; an order sits in one
 *    price level's queue and in its user's list of open orders.
 *  - levels: a pool of struct level (two FIFO queues each: displayed, then
 *    non-displayed); per symbol and side a sorted array of (key, level) with
 *    the best price last, so that matching pops from the end. The key is the
 *    price for bids and ~price for asks, so both arrays ascend.
 *  - tokens: an open-addressing table (linear probing) of (user, token) ->
 *    order: the live orders' tokens and the most recently dead ones, at most
 *    max_tokens in all. A dead token (its order canceled, filled, replaced,
 *    or its Enter rejected) takes an entry of the `dead` pool (max_tokens
 *    entries, a free list), linked at the end of two lists, oldest first:
 *    the global one (doubly linked) and its user's (singly: a user's oldest
 *    dead token is always the first of its list, whichever way it goes).
 *    When the table is full the globally oldest dead token is forgotten;
 *    when a user holds max_user_tokens, its own oldest (taken out of the
 *    middle of the global list). Forgetting deletes by backward shift, so
 *    the table never fills and a day of any length runs in the memory the
 *    config gives. A slot moves only when a deletion shifts it, and then its
 *    order's `tok` or its dead entry's `slot` follows it; dead entries never
 *    move, so the lists need no mending. Each user counts its remembered
 *    tokens (n_tok: live and dead).
 *  - users and symbols: small open-addressing tables.
 *  - expiry: a binary min-heap of orders with a TIF in seconds, keyed by
 *    (expiry time, order reference number); each order knows its position.
 *  - firms: a table like the users' (id 0: no firm), each with its open
 *    orders in entry order, its limits and kill switch; users named by
 *    limits or a kill switch have an entry in the `ulim` table, which their
 *    user (once a login) points to. Every user and firm keeps its resting
 *    orders' count and notional, changed where an order rests, leaves the
 *    book or loses shares while booked (risk_rest, risk_unrest,
 *    risk_release below).
 *
 * Nothing depends on pointer values: pools are addressed by index, hashes
 * are of contents, ties are broken by counters. */
#ifndef LOCKSTEP_ENGINE_PRIVATE_H
#define LOCKSTEP_ENGINE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "engine.h"
#include "ouch.h"

#define NONE UINT32_MAX
#define NO_EXPIRY UINT64_MAX
#define NS_PER_SEC 1000000000ull
#define NS_PER_DAY (86400ull * NS_PER_SEC)

enum { BID = 0, ASK = 1 };
enum { Q_DISPLAYED = 0, Q_HIDDEN = 1 };

struct order {
	uint32_t next, prev; /* the level's queue; next is the free-list link */
	uint32_t unext, uprev; /* the user's open orders, in order of entry */
	uint32_t level; /* level pool index while in the book */
	uint32_t shares; /* open shares */
	uint32_t price;
	uint32_t tok; /* token table slot */
	uint32_t user; /* user id (1..) */
	uint32_t firm; /* the login's firm: firm id, 0: none (no self-match check) */
	uint32_t fnext, fprev; /* the firm's open orders, in order of entry */
	uint32_t sym;
	uint32_t heap_pos; /* NONE unless in the expiry heap */
	uint64_t ref, prio, expire_ns;
	uint64_t hash; /* XXH3 of the state, XORed into book_hash while booked */
	char side, display, capacity, cross_type;
	char ofirm[OUCH_FIRM_LEN]; /* the Enter's firm field, echoed */
};

struct level {
	uint32_t price;
	uint32_t head[2], tail[2]; /* [Q_DISPLAYED], [Q_HIDDEN] */
	uint32_t next_free;
};

struct lvl_ent {
	uint32_t key; /* bids: price; asks: ~price (ascending, best last) */
	uint32_t level;
};

/* token_slot.order of a dead token: TOKEN_DEAD | its entry in the dead pool */
#define TOKEN_DEAD 0x80000000u

struct token_slot {
	char token[OUCH_TOKEN_LEN]; /* NUL-padded, not terminated */
	uint16_t fp; /* fingerprint: bits of the hash */
	uint32_t user; /* 0: empty slot */
	uint32_t order; /* the live order, or TOKEN_DEAD | dead pool entry */
};

/* A dead token remembered: an entry of the dead pool. */
struct dead_ent {
	uint32_t slot; /* its token slot; when free, the next free entry */
	uint32_t next, prev; /* the global list: younger, older (NONE at the ends) */
	uint32_t unext; /* its user's list: younger */
};

/* One layer pair of limits (engine.h, Pre-trade risk): the configuration's
 * and the tape's (ENGINE_ADMIN LIMITS), and the tape's kill switch. A
 * field whose bit is clear in set is zero. */
struct rlim {
	struct risk_limits cfg, tape;
	uint32_t killed;
};

/* A sum of notionals (price units x shares): one order's takes up to 64
 * bits, so a sum of many takes more. */
typedef unsigned __int128 risk_sum;

/* A sum as a check or a view sees it: saturated to 64 bits. */
static inline uint64_t risk_sum64(risk_sum v)
{
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

struct user {
	uint64_t name; /* packed login */
	char str[8]; /* NUL-terminated login */
	uint32_t head, tail; /* open orders */
	uint32_t lim; /* ulim index, or NONE: no limits of its own */
	uint32_t open; /* resting orders */
	risk_sum notional; /* their open shares x price */
	uint32_t fname, fid; /* the firm (packed, id) of its last Enter */
	uint32_t n_tok; /* tokens remembered: live and dead */
	uint32_t dhead, dtail; /* its dead tokens' entries, oldest first; NONE: none */
};

/* A user named by limits or a kill switch (configuration or tape). */
struct ulim {
	uint64_t name; /* packed login */
	uint32_t user; /* its user id once it logged in, else 0 */
	struct rlim r;
};

struct firm {
	uint32_t name; /* packed, never 0 */
	char str[OUCH_FIRM_LEN + 1];
	uint32_t head, tail; /* open orders */
	uint32_t open;
	risk_sum notional;
	struct rlim r;
};

struct symbol {
	uint64_t name; /* packed */
	char str[OUCH_STOCK_LEN + 1];
	uint32_t n[2]; /* levels per side */
	uint32_t ref_cfg, ref; /* reference price: the configuration's, the tape's (0: none) */
};

struct engine {
	uint32_t max_shares, max_orders, max_tokens, max_levels, max_users;
	uint32_t n_symbols;

	struct symbol *syms;
	uint32_t *sym_slots; /* sym index + 1, 0 empty */
	uint32_t sym_mask;

	struct order *orders;
	uint32_t order_free, orders_open;

	struct level *levels;
	uint32_t level_free, level_cap, levels_used;
	struct lvl_ent *lv; /* n_symbols * 2 * max_levels */

	struct token_slot *tokens;
	uint32_t token_cap, n_tokens;
	uint32_t max_user_tokens; /* 0: no per-user quota */
	struct dead_ent *dead; /* pool of max_tokens entries: the dead tokens */
	uint32_t dead_head, dead_tail; /* the global list, oldest first; NONE: empty */
	uint32_t dead_free, n_dead; /* free entries' list; dead tokens remembered */

	struct user *users; /* [0] unused */
	uint32_t *user_slots; /* user id, 0 empty */
	uint32_t user_mask, n_users;

	uint32_t *heap;
	uint32_t n_heap;

	/* pre-trade risk (engine_risk.c) */
	struct firm *firms; /* [0]: no firm (all zero) */
	uint32_t *firm_slots; /* firm id, 0 empty */
	uint32_t firm_mask, n_firms, max_firms;
	struct ulim *ulims; /* [0] unused */
	uint32_t *ulim_slots; /* ulim index, 0 empty */
	uint32_t ulim_mask, n_ulims;
	struct rlim def[2]; /* "*": [0] of users, [1] of firms */
	int risk_cfg; /* the configuration has risk entries */
	int risk_on; /* any risk entry in the configuration, or an Admin applied:
		      * checks run and the risk state is hashed (else neither) */
	uint64_t risk_hash; /* XOR of the tape layer's items (engine_risk.c) */
	uint64_t cfg_hash; /* the configuration layer's, fixed at create */

	uint64_t next_ref, next_match, next_prio;
	uint64_t book_hash;

	/* the trading day (engine.h): day >= 1, day_base its START's tape seq
	 * (1 for day 1); closed between an END_OF_DAY and the next START, when
	 * no order rests */
	uint32_t day;
	int closed;
	uint64_t day_base;

	/* the call in progress */
	uint64_t now_ns, ts;
	engine_emit_fn emit;
	void *ctx;

	/* market data (engine_md.c): the reports' receiver, and a displayed
	 * order being replaced away from its place (md_pending: its old ref,
	 * 0 for none): reported as a REPLACE if its replacement rests
	 * displayed at once, else as a DELETE before anything else */
	engine_md_fn md;
	void *md_ctx;
	uint64_t md_pending;
	uint32_t md_pending_sym;

	struct engine_stats st;
};

/* --- small helpers and the token table (inline: every command uses them) -- */

/* Up to max bytes of s (fewer at a NUL), packed into an integer. */
static inline uint64_t pack8(const char *s, size_t max)
{
	uint64_t v = 0;

	memcpy(&v, s, strnlen(s, max));
	return v;
}

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static inline int is_sell(char side)
{
	return side == OUCH_SELL || side == OUCH_SELL_SHORT || side == OUCH_SELL_SHORT_EXEMPT;
}

static inline int book_side(char side)
{
	return side == OUCH_BUY ? BID : ASK;
}

static inline int queue_of(char display)
{
	return display == OUCH_DISPLAY_NONDISPLAYED ? Q_HIDDEN : Q_DISPLAYED;
}

static inline uint32_t price_key(int side, uint32_t price)
{
	return side == BID ? price : ~price;
}

/* The (sym, side) array of levels: e->syms[sym].n[side] entries, best last. */
static inline struct lvl_ent *side_ents(const struct engine *e, uint32_t sym, int side)
{
	return e->lv + ((size_t)sym * 2 + (size_t)side) * e->max_levels;
}

/* The token as the table keeps it: NUL-padded to OUCH_TOKEN_LEN. */
static inline void token_key(char key[OUCH_TOKEN_LEN], const char *token)
{
	memset(key, 0, OUCH_TOKEN_LEN);
	memcpy(key, token, strnlen(token, OUCH_TOKEN_LEN));
}

static inline uint64_t token_hash(uint32_t user, const char key[OUCH_TOKEN_LEN])
{
	return XXH3_64bits_withSeed(key, OUCH_TOKEN_LEN, user);
}

/* The slot where the search for a token of hash h starts. */
static inline uint32_t token_home(const struct engine *e, uint64_t h)
{
	return (uint32_t)(((h >> 32) * e->token_cap) >> 32);
}

/* The slot holding (user, key) (h: its token_hash), or the empty slot where
 * it would go; *found says which. */
static inline uint32_t token_find(const struct engine *e, uint32_t user, uint64_t h,
				  const char key[OUCH_TOKEN_LEN], int *found)
{
	uint32_t i = token_home(e, h);
	uint16_t fp = (uint16_t)h;

	for (;;) {
		const struct token_slot *t = &e->tokens[i];

		if (t->user == 0) {
			*found = 0;
			return i;
		}
		if (t->fp == fp && t->user == user && memcmp(t->token, key, OUCH_TOKEN_LEN) == 0) {
			*found = 1;
			return i;
		}
		if (++i == e->token_cap)
			i = 0;
	}
}

static inline int token_live(const struct token_slot *t)
{
	return !(t->order & TOKEN_DEAD);
}

/* The token in `slot` is dead from now on: the newest in the global list
 * and in its user's. The pool has a free entry: there are at most
 * max_tokens tokens and this one was not dead. */
static inline void token_kill(struct engine *e, uint32_t slot)
{
	uint32_t d = e->dead_free;
	struct dead_ent *x = &e->dead[d];
	struct user *u = &e->users[e->tokens[slot].user];

	e->dead_free = x->slot;
	x->slot = slot;
	x->next = NONE;
	x->prev = e->dead_tail;
	x->unext = NONE;
	if (e->dead_tail != NONE)
		e->dead[e->dead_tail].next = d;
	else
		e->dead_head = d;
	e->dead_tail = d;
	if (u->dtail != NONE)
		e->dead[u->dtail].unext = d;
	else
		u->dhead = d;
	u->dtail = d;
	e->n_dead++;
	e->tokens[slot].order = TOKEN_DEAD | d;
}

/* Fills the empty slot that token_find() gave: with a live order, or with
 * NONE for a dead token (a rejected Enter's). */
static inline void token_insert(struct engine *e, uint32_t slot, uint32_t user, uint64_t h,
				const char key[OUCH_TOKEN_LEN], uint32_t order)
{
	struct token_slot *t = &e->tokens[slot];

	memcpy(t->token, key, OUCH_TOKEN_LEN);
	t->fp = (uint16_t)h;
	t->user = user;
	t->order = order;
	e->n_tokens++;
	e->users[user].n_tok++;
	if (order == NONE)
		token_kill(e, slot);
}

/* Before a command that may add a token: when the table holds max_tokens,
 * the oldest dead token is forgotten (engine_book.c). Slots found before
 * this call may have moved. */
void engine_book_token_room(struct engine *e);

/* Before a command that may add a token of user (id, not 0): while the user
 * holds max_user_tokens or more, its oldest dead token is forgotten. 0 when
 * the user may add one, -1 when its quota is full of live tokens (the
 * command is then Rejected 'q'). Slots found before this call may have
 * moved. */
int engine_book_user_token_room_slow(struct engine *e, uint32_t user);
static inline int engine_book_user_token_room(struct engine *e, uint32_t user)
{
	if (e->max_user_tokens == 0 || e->users[user].n_tok < e->max_user_tokens)
		return 0;
	return engine_book_user_token_room_slow(e, user);
}

/* At a START_OF_DAY: forgets every token (all dead: no order rests while
 * closed), clearing their slots through the dead list, so O(tokens of the
 * day + users) and not of the table's size. */
void engine_book_tokens_forget_all(struct engine *e);

/* Order oi (its firm set, fnext NONE) at the end of its firm's list. */
static inline void engine_firm_append(struct engine *e, uint32_t oi)
{
	struct order *o = &e->orders[oi];
	struct firm *f = &e->firms[o->firm];

	o->fprev = f->tail;
	if (f->tail != NONE)
		e->orders[f->tail].fnext = oi;
	else
		f->head = oi;
	f->tail = oi;
}

/* --- risk aggregates (inline: every rest, fill and cancel) ---------------- */

/* Order o starts resting. */
static inline void risk_rest(struct engine *e, const struct order *o)
{
	uint64_t n = (uint64_t)o->shares * o->price;

	e->users[o->user].open++;
	e->users[o->user].notional += n;
	e->firms[o->firm].open++; /* firm 0 (none) counts too: never checked */
	e->firms[o->firm].notional += n;
}

/* Booked order o loses `shares` of its open shares (still resting). */
static inline void risk_release(struct engine *e, const struct order *o, uint32_t shares)
{
	uint64_t n = (uint64_t)shares * o->price;

	e->users[o->user].notional -= n;
	e->firms[o->firm].notional -= n;
}

/* Order o leaves the book with its open shares. */
static inline void risk_unrest(struct engine *e, const struct order *o)
{
	risk_release(e, o, o->shares);
	e->users[o->user].open--;
	e->firms[o->firm].open--;
}

/* --- pre-trade risk (engine_risk.c) ---------------------------------------- */

int engine_risk_alloc(struct engine *e, const struct engine_config *cfg);
/* The configuration's entries into the base layer; 0 or -EINVAL. */
int engine_risk_configure(struct engine *e, const struct engine_config *cfg);
void engine_risk_free(struct engine *e);

/* The firm id of a login's firm (0 for none: empty), created when asked and
 * there is room; NONE when absent (or the table is full). */
uint32_t engine_risk_firm(struct engine *e, const char *firm, int create);
/* A new user: points it to its limits, if any. */
void engine_risk_user_new(struct engine *e, uint32_t user);

/* 0, or the Rejected reason of an order of shares at price on sym for user
 * and firm (ids); own: the order it replaces (not counted), or NULL.
 * Counts the rejection. */
int engine_risk_check_slow(struct engine *e, uint32_t user, uint32_t firm, uint32_t sym,
			   uint32_t shares, uint32_t price, const struct order *own);
static inline int engine_risk_check(struct engine *e, uint32_t user, uint32_t firm, uint32_t sym,
				    uint32_t shares, uint32_t price, const struct order *own)
{
	if (!e->risk_on)
		return 0;
	return engine_risk_check_slow(e, user, firm, sym, shares, price, own);
}

/* The tape's reference price of sym becomes price (an execution, an Admin). */
void engine_risk_set_ref(struct engine *e, uint32_t sym, uint32_t price);
static inline void engine_risk_trade(struct engine *e, uint32_t sym, uint32_t price)
{
	/* only once risk is on: a snapshot of before (format 3) has none, and
	 * every replica must agree on the references whenever it loaded one */
	if (e->risk_on && e->syms[sym].ref != price)
		engine_risk_set_ref(e, sym, price);
}

void engine_risk_admin(struct engine *e, const struct engine_admin_cmd *a);

/* The hash item of a name's tape state (0 when it has none), and of a
 * symbol's tape reference price. */
uint64_t engine_risk_item(uint32_t scope, uint64_t name, const struct rlim *r);
uint64_t engine_risk_ref_item(uint64_t sym_name, uint32_t price);

/* The layers of a firm (packed name) or named user (packed login), found
 * or created; NULL for a bad name or a full table (snapshots). */
struct rlim *engine_risk_layers(struct engine *e, uint32_t scope, uint64_t packed);
/* The tape layer's hash (risk_hash) from scratch. */
uint64_t engine_risk_rehash(const struct engine *e);

/* The per-user and per-firm aggregates and lists, and the risk hash,
 * recomputed: 0 or -EUCLEAN. */
int engine_risk_verify(const struct engine *e);

/* --- market data (engine_md.c; engine.h) ------------------------------------ */

static inline int md_displayed(const struct order *o)
{
	return queue_of(o->display) == Q_DISPLAYED;
}

void engine_md_report(struct engine *e, enum engine_md_kind kind, const struct order *o,
		      uint32_t shares, uint64_t match);
void engine_md_rest_slow(struct engine *e, const struct order *o);
void engine_md_flush_slow(struct engine *e);
void engine_md_day(struct engine *e, enum engine_md_kind kind);

/* Order o (booked) executed shares: EXEC or TRADE. */
static inline void engine_md_exec(struct engine *e, const struct order *o, uint32_t shares,
				  uint64_t match)
{
	if (e->md)
		engine_md_report(e, md_displayed(o) ? ENGINE_MD_EXEC : ENGINE_MD_TRADE, o, shares,
				 match);
}
/* Booked order o lost shares (CANCEL), or is leaving the book (DELETE). */
static inline void engine_md_cancel(struct engine *e, const struct order *o, uint32_t shares)
{
	if (e->md && md_displayed(o) && shares)
		engine_md_report(e, ENGINE_MD_CANCEL, o, shares, 0);
}
static inline void engine_md_delete(struct engine *e, const struct order *o)
{
	if (e->md && md_displayed(o))
		engine_md_report(e, ENGINE_MD_DELETE, o, 0, 0);
}
/* Order o, replaced in place (same level, time priority kept). */
static inline void engine_md_replace_in_place(struct engine *e, const struct order *o,
					      uint64_t old_ref)
{
	if (e->md && md_displayed(o)) {
		e->md_pending = old_ref;
		engine_md_rest_slow(e, o);
	}
}
/* Order o, displayed before its Replace moves it (its old ref): pending. */
static inline void engine_md_moving(struct engine *e, const struct order *o)
{
	if (e->md && md_displayed(o)) {
		e->md_pending = o->ref;
		e->md_pending_sym = o->sym;
	}
}
/* Order o starts resting (after its executions, if any). */
static inline void engine_md_rest(struct engine *e, const struct order *o)
{
	if (e->md)
		engine_md_rest_slow(e, o);
}
/* A pending moved order's DELETE, before anything else is reported. */
static inline void engine_md_flush(struct engine *e)
{
	if (e->md_pending)
		engine_md_flush_slow(e);
}

/* --- engine.c, for engine_risk.c -------------------------------------------- */

/* Removes a booked order with a Canceled message. */
void engine_cancel_booked(struct engine *e, uint32_t oi, char reason);

/* --- the book (engine_book.c) --------------------------------------------- */

/* The symbol's index, or NONE. */
uint32_t engine_book_symbol(const struct engine *e, const char *stock);
/* The user's id, creating it when asked and there is room; 0 if none. */
uint32_t engine_book_user(struct engine *e, const char *login, int create);
/* The user's id, or 0. */
uint32_t engine_book_user_find(const struct engine *e, uint64_t packed_login);

/* The live order of (user, token), or NONE. */
uint32_t engine_book_live_order(struct engine *e, const char *login, const char *token);

/* After a change to a booked order. */
void engine_book_rehash(struct engine *e, struct order *o);

void engine_book_heap_push(struct engine *e, uint32_t oi);
void engine_book_heap_remove(struct engine *e, uint32_t oi);

/* 1 when an order at price can rest on this side (its level exists or there
 * is room for one). */
int engine_book_has_room(const struct engine *e, uint32_t sym, int side, uint32_t price);
/* The level at price on this side, created if needed; NONE when full. */
uint32_t engine_book_level(struct engine *e, uint32_t sym, int side, uint32_t price);

/* A pool slot for a new order of the user and firm (ids), at the end of
 * their lists; the pool must not be empty. */
uint32_t engine_book_order_alloc(struct engine *e, uint32_t user, uint32_t firm);
/* The order is dead: its token joins the dead ring, its slot is free. */
void engine_book_order_release(struct engine *e, uint32_t oi);

/* Puts the order at the back of its price level with the next priority;
 * -1 when there is no room. */
int engine_book_insert(struct engine *e, uint32_t oi);
/* Puts the order (its priority set) at the back of level li: hashed, and in
 * the expiry heap when it has an expiry. */
void engine_book_place(struct engine *e, uint32_t oi, uint32_t li);
/* Takes a booked order out of its level (and the heap); the order stays
 * allocated. */
void engine_book_remove(struct engine *e, uint32_t oi);

#endif
