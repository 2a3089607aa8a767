/* The matching engine (see engine.h for the semantics).
 *
 * Layout, all allocated once:
 *  - orders: a pool of struct order with a free list; an order sits in one
 *    price level's queue and in its user's list of open orders.
 *  - levels: a pool of struct level (two FIFO queues each: displayed, then
 *    non-displayed); per symbol and side a sorted array of (key, level) with
 *    the best price last, so that matching pops from the end. The key is the
 *    price for bids and ~price for asks, so both arrays ascend.
 *  - tokens: an open-addressing table of (user, token) -> order, never
 *    deleted from during the day (day-unique tokens); a slot's index is
 *    stable, and an order refers to its token by slot.
 *  - users and symbols: small open-addressing tables.
 *  - expiry: a binary min-heap of orders with a TIF in seconds, keyed by
 *    (expiry time, order reference number); each order knows its position.
 *
 * Nothing depends on pointer values: pools are addressed by index, hashes
 * are of contents, ties are broken by counters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine.h"

#define NONE UINT32_MAX
#define NO_EXPIRY UINT64_MAX
#define NS_PER_SEC 1000000000ull
#define NS_PER_DAY (86400ull * NS_PER_SEC)
#define DEFAULT_MAX_USERS 65536u

enum { BID = 0, ASK = 1 };
enum { Q_DISPLAYED = 0, Q_HIDDEN = 1 };
enum { STOP_NONE = 0, STOP_SELF_MATCH = 1 };

struct order {
	uint32_t next, prev; /* the level's queue; next is the free-list link */
	uint32_t unext, uprev; /* the user's open orders, in order of entry */
	uint32_t level; /* level pool index while in the book */
	uint32_t shares; /* open shares */
	uint32_t price;
	uint32_t tok; /* token table slot */
	uint32_t user; /* user id (1..) */
	uint32_t firm; /* the login's firm, packed; 0: none (no self-match check) */
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

struct token_slot {
	char token[OUCH_TOKEN_LEN]; /* NUL-padded, not terminated */
	uint16_t fp; /* fingerprint: bits of the hash */
	uint32_t user; /* 0: empty slot */
	uint32_t order; /* NONE once the order died (or was rejected) */
};

struct user {
	uint64_t name; /* packed login */
	char str[8]; /* NUL-terminated login */
	uint32_t head, tail; /* open orders */
};

struct symbol {
	uint64_t name; /* packed */
	char str[OUCH_STOCK_LEN + 1];
	uint32_t n[2]; /* levels per side */
};

/* What the state hash covers of one order; zero-filled before use. */
struct order_image {
	uint64_t ref, prio, expire_ns, sym_name, user_name;
	uint32_t price, shares, firm, pad0;
	char token[OUCH_TOKEN_LEN];
	char side, display, capacity, cross_type;
	char ofirm[OUCH_FIRM_LEN];
	char pad1[4];
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
	uint32_t level_free;
	struct lvl_ent *lv; /* n_symbols * 2 * max_levels */

	struct token_slot *tokens;
	uint32_t token_cap, n_tokens;

	struct user *users; /* [0] unused */
	uint32_t *user_slots; /* user id, 0 empty */
	uint32_t user_mask, n_users;

	uint32_t *heap;
	uint32_t n_heap;

	uint64_t next_ref, next_match, next_prio;
	uint64_t book_hash;

	/* the call in progress */
	uint64_t now_ns, ts;
	engine_emit_fn emit;
	void *ctx;

	struct engine_stats st;
};

/* --- small helpers ------------------------------------------------------- */

static uint64_t pack8(const char *s, size_t max)
{
	uint64_t v = 0;

	memcpy(&v, s, strnlen(s, max));
	return v;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

static int is_sell(char side)
{
	return side == OUCH_SELL || side == OUCH_SELL_SHORT || side == OUCH_SELL_SHORT_EXEMPT;
}

static int book_side(char side)
{
	return side == OUCH_BUY ? BID : ASK;
}

static int queue_of(char display)
{
	return display == OUCH_DISPLAY_NONDISPLAYED ? Q_HIDDEN : Q_DISPLAYED;
}

static uint32_t price_key(int side, uint32_t price)
{
	return side == BID ? price : ~price;
}

static void token_key(char key[OUCH_TOKEN_LEN], const char *token)
{
	memset(key, 0, OUCH_TOKEN_LEN);
	memcpy(key, token, strnlen(token, OUCH_TOKEN_LEN));
}

static uint64_t expiry_of(uint64_t now_ns, uint32_t tif)
{
	if (tif >= 1 && tif <= OUCH_TIF_MAX_SECONDS)
		return now_ns + (uint64_t)tif * NS_PER_SEC;
	return NO_EXPIRY;
}

/* --- symbols and users --------------------------------------------------- */

static uint32_t symbol_find(const struct engine *e, const char *stock)
{
	uint64_t name = pack8(stock, OUCH_STOCK_LEN);
	uint32_t i = (uint32_t)mix64(name) & e->sym_mask;

	for (;; i = (i + 1) & e->sym_mask) {
		uint32_t s = e->sym_slots[i];

		if (s == 0)
			return NONE;
		if (e->syms[s - 1].name == name)
			return s - 1;
	}
}

/* The user's id, creating it when asked and there is room; 0 if none. */
static uint32_t user_find(struct engine *e, const char *login, int create)
{
	uint64_t name = pack8(login, 6);
	uint32_t i = (uint32_t)mix64(name) & e->user_mask;
	struct user *u;

	for (;; i = (i + 1) & e->user_mask) {
		uint32_t id = e->user_slots[i];

		if (id == 0)
			break;
		if (e->users[id].name == name)
			return id;
	}
	if (!create || e->n_users >= e->max_users)
		return 0;
	e->user_slots[i] = ++e->n_users;
	u = &e->users[e->n_users];
	u->name = name;
	memcpy(u->str, &name, sizeof(name) < sizeof(u->str) ? sizeof(name) : sizeof(u->str));
	u->str[7] = '\0';
	u->head = u->tail = NONE;
	return e->n_users;
}

/* --- tokens -------------------------------------------------------------- */

static uint64_t token_hash(uint32_t user, const char key[OUCH_TOKEN_LEN])
{
	return XXH3_64bits_withSeed(key, OUCH_TOKEN_LEN, user);
}

static uint32_t token_home(const struct engine *e, uint64_t h)
{
	return (uint32_t)(((h >> 32) * e->token_cap) >> 32);
}

/* The slot holding (user, key) (h: its token_hash), or the empty slot where
 * it would go. */
static uint32_t token_find(const struct engine *e, uint32_t user, uint64_t h,
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

static void token_insert(struct engine *e, uint32_t slot, uint32_t user, uint64_t h,
			 const char key[OUCH_TOKEN_LEN], uint32_t order)
{
	struct token_slot *t = &e->tokens[slot];

	memcpy(t->token, key, OUCH_TOKEN_LEN);
	t->fp = (uint16_t)h;
	t->user = user;
	t->order = order;
	e->n_tokens++;
}

/* The live order of (user, token), or NONE. */
static uint32_t live_order(struct engine *e, const char *login, const char *token)
{
	char key[OUCH_TOKEN_LEN];
	uint32_t user = user_find(e, login, 0), slot;
	int found;

	if (user == 0)
		return NONE;
	token_key(key, token);
	slot = token_find(e, user, token_hash(user, key), key, &found);
	return found ? e->tokens[slot].order : NONE;
}

/* --- state hash ---------------------------------------------------------- */

static uint64_t order_hash(const struct engine *e, const struct order *o)
{
	struct order_image im;

	memset(&im, 0, sizeof(im));
	im.ref = o->ref;
	im.prio = o->prio;
	im.expire_ns = o->expire_ns;
	im.sym_name = e->syms[o->sym].name;
	im.user_name = e->users[o->user].name;
	im.price = o->price;
	im.shares = o->shares;
	im.firm = o->firm;
	memcpy(im.token, e->tokens[o->tok].token, OUCH_TOKEN_LEN);
	im.side = o->side;
	im.display = o->display;
	im.capacity = o->capacity;
	im.cross_type = o->cross_type;
	memcpy(im.ofirm, o->ofirm, OUCH_FIRM_LEN);
	return XXH3_64bits(&im, sizeof(im));
}

/* After a change to a booked order. */
static void order_rehash(struct engine *e, struct order *o)
{
	e->book_hash ^= o->hash;
	o->hash = order_hash(e, o);
	e->book_hash ^= o->hash;
}

/* --- expiry heap --------------------------------------------------------- */

static int heap_less(const struct engine *e, uint32_t a, uint32_t b)
{
	const struct order *x = &e->orders[a], *y = &e->orders[b];

	return x->expire_ns < y->expire_ns || (x->expire_ns == y->expire_ns && x->ref < y->ref);
}

static void heap_set(struct engine *e, uint32_t pos, uint32_t oi)
{
	e->heap[pos] = oi;
	e->orders[oi].heap_pos = pos;
}

static void heap_up(struct engine *e, uint32_t pos)
{
	uint32_t oi = e->heap[pos];

	while (pos > 0) {
		uint32_t parent = (pos - 1) / 2;

		if (!heap_less(e, oi, e->heap[parent]))
			break;
		heap_set(e, pos, e->heap[parent]);
		pos = parent;
	}
	heap_set(e, pos, oi);
}

static void heap_down(struct engine *e, uint32_t pos)
{
	uint32_t oi = e->heap[pos];

	for (;;) {
		uint32_t c = 2 * pos + 1;

		if (c >= e->n_heap)
			break;
		if (c + 1 < e->n_heap && heap_less(e, e->heap[c + 1], e->heap[c]))
			c++;
		if (!heap_less(e, e->heap[c], oi))
			break;
		heap_set(e, pos, e->heap[c]);
		pos = c;
	}
	heap_set(e, pos, oi);
}

static void heap_push(struct engine *e, uint32_t oi)
{
	heap_set(e, e->n_heap++, oi);
	heap_up(e, e->n_heap - 1);
}

static void heap_remove(struct engine *e, uint32_t oi)
{
	uint32_t pos = e->orders[oi].heap_pos, last = e->heap[--e->n_heap];

	e->orders[oi].heap_pos = NONE;
	if (last == oi)
		return;
	heap_set(e, pos, last);
	heap_up(e, pos);
	heap_down(e, e->orders[last].heap_pos);
}

/* --- price levels -------------------------------------------------------- */

static struct lvl_ent *side_ents(const struct engine *e, uint32_t sym, int side)
{
	return e->lv + ((size_t)sym * 2 + (size_t)side) * e->max_levels;
}

/* The first index whose key is >= key. */
static uint32_t lower_bound(const struct lvl_ent *a, uint32_t n, uint32_t key)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* 1 when an order at price can rest on this side (its level exists or there
 * is room for one). */
static int side_has_room(const struct engine *e, uint32_t sym, int side, uint32_t price)
{
	const struct lvl_ent *a = side_ents(e, sym, side);
	uint32_t n = e->syms[sym].n[side], key = price_key(side, price), i;

	if (n < e->max_levels)
		return 1;
	i = lower_bound(a, n, key);
	return i < n && a[i].key == key;
}

/* The level at price on this side, created if needed; NONE when full. */
static uint32_t level_get(struct engine *e, uint32_t sym, int side, uint32_t price)
{
	struct lvl_ent *a = side_ents(e, sym, side);
	uint32_t *n = &e->syms[sym].n[side], key = price_key(side, price), i, li;
	struct level *l;

	if (*n > 0 && a[*n - 1].key <= key)
		i = a[*n - 1].key == key ? *n - 1 : *n; /* at or beyond the best */
	else
		i = lower_bound(a, *n, key);
	if (i < *n && a[i].key == key)
		return a[i].level;
	if (*n >= e->max_levels || e->level_free == NONE)
		return NONE;
	li = e->level_free;
	l = &e->levels[li];
	e->level_free = l->next_free;
	l->price = price;
	l->head[0] = l->head[1] = l->tail[0] = l->tail[1] = NONE;
	memmove(&a[i + 1], &a[i], (size_t)(*n - i) * sizeof(*a));
	a[i].key = key;
	a[i].level = li;
	(*n)++;
	return li;
}

static void level_drop(struct engine *e, uint32_t sym, int side, uint32_t li)
{
	struct lvl_ent *a = side_ents(e, sym, side);
	uint32_t *n = &e->syms[sym].n[side], i;

	if (a[*n - 1].level == li)
		i = *n - 1;
	else
		i = lower_bound(a, *n, price_key(side, e->levels[li].price));
	memmove(&a[i], &a[i + 1], (size_t)(*n - i - 1) * sizeof(*a));
	(*n)--;
	e->levels[li].next_free = e->level_free;
	e->level_free = li;
}

/* --- orders -------------------------------------------------------------- */

static uint32_t order_alloc(struct engine *e, uint32_t user)
{
	uint32_t oi = e->order_free;
	struct order *o = &e->orders[oi];
	struct user *u = &e->users[user];

	e->order_free = o->next;
	memset(o, 0, sizeof(*o));
	o->next = o->prev = o->level = o->heap_pos = NONE;
	o->user = user;
	o->unext = NONE;
	o->uprev = u->tail;
	if (u->tail != NONE)
		e->orders[u->tail].unext = oi;
	else
		u->head = oi;
	u->tail = oi;
	e->orders_open++;
	return oi;
}

/* The order is dead: its token stays used, its slot is free. */
static void order_release(struct engine *e, uint32_t oi)
{
	struct order *o = &e->orders[oi];
	struct user *u = &e->users[o->user];

	e->tokens[o->tok].order = NONE;
	if (o->uprev != NONE)
		e->orders[o->uprev].unext = o->unext;
	else
		u->head = o->unext;
	if (o->unext != NONE)
		e->orders[o->unext].uprev = o->uprev;
	else
		u->tail = o->uprev;
	o->next = e->order_free;
	e->order_free = oi;
	e->orders_open--;
}

/* Links order oi at the back of queue q of level li. */
static void level_append(struct engine *e, uint32_t li, int q, uint32_t oi)
{
	struct level *l = &e->levels[li];
	struct order *o = &e->orders[oi];

	o->level = li;
	o->next = NONE;
	o->prev = l->tail[q];
	if (l->tail[q] != NONE)
		e->orders[l->tail[q]].next = oi;
	else
		l->head[q] = oi;
	l->tail[q] = oi;
}

/* Puts the order at the back of its price level; -1 when there is no room. */
static int book_insert(struct engine *e, uint32_t oi)
{
	struct order *o = &e->orders[oi];
	int side = book_side(o->side), q = queue_of(o->display);
	uint32_t li = level_get(e, o->sym, side, o->price);

	if (li == NONE)
		return -1;
	level_append(e, li, q, oi);
	o->prio = e->next_prio++;
	o->hash = order_hash(e, o);
	e->book_hash ^= o->hash;
	if (o->expire_ns != NO_EXPIRY)
		heap_push(e, oi);
	return 0;
}

static void book_remove(struct engine *e, uint32_t oi)
{
	struct order *o = &e->orders[oi];
	struct level *l = &e->levels[o->level];
	int q = queue_of(o->display);

	if (o->prev != NONE)
		e->orders[o->prev].next = o->next;
	else
		l->head[q] = o->next;
	if (o->next != NONE)
		e->orders[o->next].prev = o->prev;
	else
		l->tail[q] = o->prev;
	if (l->head[Q_DISPLAYED] == NONE && l->head[Q_HIDDEN] == NONE)
		level_drop(e, o->sym, book_side(o->side), o->level);
	o->level = NONE;
	e->book_hash ^= o->hash;
	if (o->heap_pos != NONE)
		heap_remove(e, oi);
}

/* --- outbound messages --------------------------------------------------- */

static void emit(struct engine *e, const char *user, const struct ouch_msg *m)
{
	e->st.messages++;
	if (e->emit)
		e->emit(e->ctx, user, m);
}

static void copy_token(char dst[OUCH_TOKEN_LEN + 1], const char src[OUCH_TOKEN_LEN])
{
	memcpy(dst, src, OUCH_TOKEN_LEN);
	dst[OUCH_TOKEN_LEN] = '\0';
}

static const char *owner(const struct engine *e, const struct order *o)
{
	return e->users[o->user].str;
}

static void emit_rejected(struct engine *e, const char *user, const char *token, int reason)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_REJECTED;
	m.u.rejected.timestamp = e->ts;
	token_key(m.u.rejected.token, token);
	m.u.rejected.reason = (char)reason;
	e->st.rejects++;
	emit(e, user, &m);
}

static void emit_canceled(struct engine *e, const struct order *o, uint32_t decrement, char reason)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_CANCELED;
	m.u.canceled.timestamp = e->ts;
	copy_token(m.u.canceled.token, e->tokens[o->tok].token);
	m.u.canceled.decrement = decrement;
	m.u.canceled.reason = reason;
	e->st.canceled++;
	emit(e, owner(e, o), &m);
}

static void emit_executed(struct engine *e, const struct order *o, uint32_t shares, uint32_t price,
			  char liquidity, uint64_t match)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_EXECUTED;
	m.u.executed.timestamp = e->ts;
	copy_token(m.u.executed.token, e->tokens[o->tok].token);
	m.u.executed.shares = shares;
	m.u.executed.price = price;
	m.u.executed.liquidity = liquidity;
	m.u.executed.match = match;
	emit(e, owner(e, o), &m);
}

static void emit_accepted(struct engine *e, const struct order *o, const struct ouch_enter_order *in)
{
	struct ouch_msg m;
	struct ouch_accepted *a = &m.u.accepted;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_ACCEPTED;
	a->timestamp = e->ts;
	copy_token(a->token, e->tokens[o->tok].token);
	a->side = in->side;
	a->shares = in->shares;
	memcpy(a->stock, e->syms[o->sym].str, sizeof(a->stock));
	a->price = in->price;
	a->tif = in->tif;
	memcpy(a->firm, in->firm, sizeof(a->firm));
	a->firm[OUCH_FIRM_LEN] = '\0';
	a->display = in->display;
	a->order_ref = o->ref;
	a->capacity = in->capacity;
	a->iso = in->iso;
	a->min_qty = in->min_qty;
	a->cross_type = in->cross_type;
	a->state = OUCH_STATE_LIVE;
	a->bbo_weight = ' ';
	e->st.accepted++;
	emit(e, owner(e, o), &m);
}

static void emit_replaced(struct engine *e, const struct order *o, const struct ouch_replace_order *rp,
			  const char prev_token[OUCH_TOKEN_LEN])
{
	struct ouch_msg m;
	struct ouch_replaced *r = &m.u.replaced;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_REPLACED;
	r->timestamp = e->ts;
	copy_token(r->replacement_token, e->tokens[o->tok].token);
	r->side = o->side;
	r->shares = rp->shares;
	memcpy(r->stock, e->syms[o->sym].str, sizeof(r->stock));
	r->price = rp->price;
	r->tif = rp->tif;
	memcpy(r->firm, o->ofirm, OUCH_FIRM_LEN);
	r->display = rp->display;
	r->order_ref = o->ref;
	r->capacity = o->capacity;
	r->iso = rp->iso;
	r->min_qty = rp->min_qty;
	r->cross_type = o->cross_type;
	r->state = OUCH_STATE_LIVE;
	copy_token(r->previous_token, prev_token);
	r->bbo_weight = ' ';
	e->st.replaced++;
	emit(e, owner(e, o), &m);
}

static void emit_modified(struct engine *e, const struct order *o)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_ORDER_MODIFIED;
	m.u.order_modified.timestamp = e->ts;
	copy_token(m.u.order_modified.token, e->tokens[o->tok].token);
	m.u.order_modified.side = o->side;
	m.u.order_modified.shares = o->shares;
	e->st.modified++;
	emit(e, owner(e, o), &m);
}

static void emit_cancel_reject(struct engine *e, const char *user, const char *token)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_CANCEL_REJECT;
	m.u.cancel_reject.timestamp = e->ts;
	token_key(m.u.cancel_reject.token, token);
	e->st.cancel_rejects++;
	emit(e, user, &m);
}

/* Removes a booked order with a Canceled message. */
static void cancel_booked(struct engine *e, uint32_t oi, char reason)
{
	struct order *o = &e->orders[oi];

	book_remove(e, oi);
	emit_canceled(e, o, o->shares, reason);
	order_release(e, oi);
}

/* --- matching ------------------------------------------------------------ */

static int crosses(const struct order *o, uint32_t resting_price)
{
	if (o->price == OUCH_PRICE_MARKET)
		return 1;
	return o->side == OUCH_BUY ? resting_price <= o->price : resting_price >= o->price;
}

/* 1 when an order of this side and price would execute on arrival (ignoring
 * self-match prevention): the other side's best price crosses it. */
static int would_cross(const struct engine *e, const struct order *o)
{
	int other = !book_side(o->side);
	uint32_t n = e->syms[o->sym].n[other];

	if (n == 0)
		return 0;
	return crosses(o, e->levels[side_ents(e, o->sym, other)[n - 1].level].price);
}

/* The shares executable at once for o, counted up to need, stopping at the
 * first resting order of o's firm. */
static uint32_t liquidity(const struct engine *e, const struct order *o, uint32_t need)
{
	int other = !book_side(o->side);
	const struct lvl_ent *a = side_ents(e, o->sym, other);
	uint64_t sum = 0;

	for (uint32_t i = e->syms[o->sym].n[other]; i-- > 0;) {
		const struct level *l = &e->levels[a[i].level];

		if (!crosses(o, l->price))
			break;
		for (int q = 0; q < 2; q++) {
			for (uint32_t ri = l->head[q]; ri != NONE; ri = e->orders[ri].next) {
				const struct order *r = &e->orders[ri];

				if (o->firm != 0 && r->firm == o->firm)
					return (uint32_t)sum;
				sum += r->shares;
				if (sum >= need)
					return need;
			}
		}
	}
	return (uint32_t)sum;
}

static void execute(struct engine *e, uint32_t ri, struct order *o, uint32_t shares)
{
	struct order *r = &e->orders[ri];
	uint64_t match = e->next_match++;

	r->shares -= shares;
	o->shares -= shares;
	e->st.matches++;
	e->st.shares_matched += shares;
	emit_executed(e, r, shares, r->price, OUCH_LIQ_ADDED, match);
	emit_executed(e, o, shares, r->price, OUCH_LIQ_REMOVED, match);
	if (r->shares == 0) {
		book_remove(e, ri);
		order_release(e, ri);
	} else {
		order_rehash(e, r);
	}
}

/* Executes incoming order o (not booked) against the other side in price-time
 * priority; STOP_SELF_MATCH when it reached an order of its own firm. */
static int match(struct engine *e, struct order *o)
{
	int other = !book_side(o->side);
	const struct lvl_ent *a = side_ents(e, o->sym, other);
	const uint32_t *n = &e->syms[o->sym].n[other];

	while (o->shares > 0 && *n > 0) {
		const struct level *l = &e->levels[a[*n - 1].level];
		uint32_t ri = l->head[Q_DISPLAYED] != NONE ? l->head[Q_DISPLAYED] : l->head[Q_HIDDEN];
		const struct order *r = &e->orders[ri];

		if (!crosses(o, l->price))
			break;
		if (o->firm != 0 && r->firm == o->firm)
			return STOP_SELF_MATCH;
		execute(e, ri, o, r->shares < o->shares ? r->shares : o->shares);
	}
	return STOP_NONE;
}

/* After the executions: the rest of the incoming order dies or is booked. */
static void settle_incoming(struct engine *e, uint32_t oi, int stop, int ioc)
{
	struct order *o = &e->orders[oi];

	if (o->shares == 0) {
		order_release(e, oi);
	} else if (stop == STOP_SELF_MATCH) {
		e->st.self_match_cancels++;
		emit_canceled(e, o, o->shares, OUCH_CXL_SELF_MATCH);
		order_release(e, oi);
	} else if (ioc) {
		emit_canceled(e, o, o->shares, OUCH_CXL_IOC);
		order_release(e, oi);
	} else if (book_insert(e, oi) != 0) {
		/* not reached: the caller checked that the side has room */
		emit_canceled(e, o, o->shares, OUCH_CXL_SYSTEM);
		order_release(e, oi);
	}
}

/* An accepted order arriving (Enter, or a Replace that lost priority). */
static void run_incoming(struct engine *e, uint32_t oi, uint32_t min_qty, int ioc)
{
	struct order *o = &e->orders[oi];
	int stop = STOP_NONE;

	if (min_qty <= 1 || liquidity(e, o, min_qty) >= min_qty)
		stop = match(e, o);
	settle_incoming(e, oi, stop, ioc);
}

/* --- validation ---------------------------------------------------------- */

static int valid_tif(uint32_t tif)
{
	return tif <= OUCH_TIF_MAX_SECONDS || tif == OUCH_TIF_MARKET_HOURS || tif == OUCH_TIF_SYSTEM_HOURS;
}

static int valid_display(char d)
{
	return d == OUCH_DISPLAY_ATTRIBUTABLE || d == OUCH_DISPLAY_ANONYMOUS ||
	       d == OUCH_DISPLAY_NONDISPLAYED || d == OUCH_DISPLAY_POST_ONLY;
}

/* The engine's own checks, after ouch_validate_*: what the book relies on
 * (and the display values it supports). 0 or a Rejected reason. */
static int check_fields(const struct engine *e, uint32_t shares, uint32_t price, uint32_t tif,
			char display, uint32_t min_qty)
{
	if (shares == 0)
		return OUCH_REJ_INVALID_SHARES;
	if (shares > e->max_shares)
		return OUCH_REJ_SHARES_EXCEED_THRESHOLD;
	if (price == 0 || (price > OUCH_PRICE_MAX && price != OUCH_PRICE_MARKET))
		return OUCH_REJ_INVALID_PRICE;
	if (!ouch_price_on_tick(price))
		return OUCH_REJ_INVALID_PRICE;
	if (!valid_tif(tif))
		return OUCH_REJ_INVALID_TIF;
	if (!valid_display(display))
		return OUCH_REJ_INVALID_DISPLAY;
	if (min_qty > shares)
		return OUCH_REJ_INVALID_MIN_QTY;
	return 0;
}

static int check_enter(const struct engine *e, const struct ouch_enter_order *in, uint32_t *sym)
{
	int r;

	*sym = symbol_find(e, in->stock);
	if (*sym == NONE)
		return OUCH_REJ_INVALID_STOCK;
	r = ouch_validate_enter(in, e->max_shares);
	if (r)
		return r;
	if (in->side != OUCH_BUY && !is_sell(in->side))
		return OUCH_REJ_INVALID_SIDE;
	return check_fields(e, in->shares, in->price, in->tif, in->display, in->min_qty);
}

static int is_ioc(uint32_t price, uint32_t tif)
{
	return tif == OUCH_TIF_IOC || price == OUCH_PRICE_MARKET;
}

/* Pools, post-only and level room for an Enter that passed validation. */
static int check_enter_room(const struct engine *e, uint32_t user, uint32_t sym,
			    const struct ouch_enter_order *in)
{
	struct order probe;

	if (user == 0 || e->n_tokens >= e->max_tokens || e->order_free == NONE)
		return OUCH_REJ_OTHER;
	probe.side = in->side;
	probe.price = in->price;
	probe.sym = sym;
	if (in->display == OUCH_DISPLAY_POST_ONLY && would_cross(e, &probe))
		return OUCH_REJ_POST_ONLY_WOULD_TAKE;
	if (!is_ioc(in->price, in->tif) && !side_has_room(e, sym, book_side(in->side), in->price))
		return OUCH_REJ_OTHER;
	return 0;
}

/* --- commands ------------------------------------------------------------ */

/* The login as a NUL-terminated string (cmd->user may lack the NUL). */
static void login_str(char out[8], const char *user)
{
	uint64_t v = pack8(user, 6);

	memcpy(out, &v, 8);
	out[7] = '\0';
}

static uint32_t pack_firm(const char *firm)
{
	uint32_t v = 0;

	memcpy(&v, firm, strnlen(firm, OUCH_FIRM_LEN));
	return v;
}

static void do_enter(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_enter_order *in = &cmd->u.enter;
	char key[OUCH_TOKEN_LEN], login[8];
	uint32_t user = user_find(e, cmd->user, 1), slot = NONE, sym, oi;
	int found = 0, reason;
	uint64_t h;
	struct order *o;

	token_key(key, in->token);
	h = token_hash(user, key);
	/* the token slot is a likely cache miss: fetch it while validating */
	__builtin_prefetch(&e->tokens[token_home(e, h)]);
	reason = check_enter(e, in, &sym);
	if (user != 0) {
		slot = token_find(e, user, h, key, &found);
		if (found) {
			e->st.ignored_duplicates++;
			return;
		}
	}
	if (!reason)
		reason = check_enter_room(e, user, sym, in);
	if (reason) {
		if (user != 0 && e->n_tokens < e->max_tokens)
			token_insert(e, slot, user, h, key, NONE);
		login_str(login, cmd->user);
		emit_rejected(e, login, in->token, reason);
		return;
	}
	oi = order_alloc(e, user);
	o = &e->orders[oi];
	o->price = in->price;
	o->shares = in->shares;
	o->sym = sym;
	o->side = in->side;
	o->display = in->display;
	o->capacity = in->capacity;
	o->cross_type = in->cross_type;
	o->firm = pack_firm(cmd->firm);
	memcpy(o->ofirm, in->firm, strnlen(in->firm, OUCH_FIRM_LEN));
	o->expire_ns = is_ioc(in->price, in->tif) ? NO_EXPIRY : expiry_of(e->now_ns, in->tif);
	o->ref = e->next_ref++;
	token_insert(e, slot, user, h, key, oi);
	o->tok = slot;
	emit_accepted(e, o, in);
	run_incoming(e, oi, in->min_qty, is_ioc(in->price, in->tif));
}

/* 0 when the replace can be applied to o, else why not. */
static int check_replace(const struct engine *e, const struct ouch_replace_order *rp,
			 const struct order *o, int keep)
{
	struct order probe;
	int r = ouch_validate_replace(rp, e->max_shares);

	if (!r)
		r = check_fields(e, rp->shares, rp->price, rp->tif, rp->display, rp->min_qty);
	if (r)
		return r;
	if (e->n_tokens >= e->max_tokens)
		return OUCH_REJ_OTHER;
	probe = *o;
	probe.price = rp->price;
	if (!keep && rp->display == OUCH_DISPLAY_POST_ONLY && would_cross(e, &probe))
		return OUCH_REJ_POST_ONLY_WOULD_TAKE;
	return 0;
}

/* The replacement takes over the order's pool slot and user-list place. */
static void apply_replacement(struct engine *e, uint32_t oi, const struct ouch_replace_order *rp,
			      uint32_t user, uint32_t slot_new, uint64_t h_new,
			      const char key_new[OUCH_TOKEN_LEN])
{
	struct order *o = &e->orders[oi];

	e->tokens[o->tok].order = NONE;
	token_insert(e, slot_new, user, h_new, key_new, oi);
	o->tok = slot_new;
	o->ref = e->next_ref++;
	o->shares = rp->shares;
	o->display = rp->display;
	o->expire_ns = is_ioc(rp->price, rp->tif) ? NO_EXPIRY : expiry_of(e->now_ns, rp->tif);
}

static void do_replace(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_replace_order *rp = &cmd->u.replace;
	char key_old[OUCH_TOKEN_LEN], key_new[OUCH_TOKEN_LEN];
	uint32_t user = user_find(e, cmd->user, 0), slot_old, slot_new, oi;
	int found = 0, keep, ioc;
	uint64_t h_old, h_new;
	struct order *o;

	if (user == 0) {
		e->st.ignored_dead++;
		return;
	}
	token_key(key_old, rp->existing_token);
	token_key(key_new, rp->replacement_token);
	h_old = token_hash(user, key_old);
	h_new = token_hash(user, key_new);
	__builtin_prefetch(&e->tokens[token_home(e, h_new)]);
	slot_old = token_find(e, user, h_old, key_old, &found);
	if (!found || e->tokens[slot_old].order == NONE) {
		e->st.ignored_dead++;
		return;
	}
	slot_new = token_find(e, user, h_new, key_new, &found);
	if (found) {
		e->st.ignored_duplicates++;
		return;
	}
	oi = e->tokens[slot_old].order;
	o = &e->orders[oi];
	ioc = is_ioc(rp->price, rp->tif);
	keep = !ioc && rp->price == o->price && rp->shares <= o->shares &&
	       queue_of(rp->display) == queue_of(o->display);
	if (check_replace(e, rp, o, keep) != 0) {
		e->st.rejects++;
		cancel_booked(e, oi, OUCH_CXL_SYSTEM);
		return;
	}
	if (keep) {
		/* in place: same level, queue and priority */
		if (o->heap_pos != NONE)
			heap_remove(e, oi);
		apply_replacement(e, oi, rp, user, slot_new, h_new, key_new);
		if (o->expire_ns != NO_EXPIRY)
			heap_push(e, oi);
		order_rehash(e, o);
		emit_replaced(e, o, rp, key_old);
		return;
	}
	book_remove(e, oi);
	if (!ioc && !side_has_room(e, o->sym, book_side(o->side), rp->price)) {
		e->st.rejects++;
		emit_canceled(e, o, o->shares, OUCH_CXL_SYSTEM);
		order_release(e, oi);
		return;
	}
	apply_replacement(e, oi, rp, user, slot_new, h_new, key_new);
	o->price = rp->price;
	emit_replaced(e, o, rp, key_old);
	run_incoming(e, oi, rp->min_qty, ioc);
}

static void do_cancel(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_cancel_order *c = &cmd->u.cancel;
	uint32_t oi = live_order(e, cmd->user, c->token), decrement;
	char login[8];
	struct order *o;

	if (oi == NONE) {
		login_str(login, cmd->user);
		emit_cancel_reject(e, login, c->token);
		return;
	}
	o = &e->orders[oi];
	if (c->shares >= o->shares)
		return;
	if (c->shares == 0) {
		cancel_booked(e, oi, OUCH_CXL_USER);
		return;
	}
	decrement = o->shares - c->shares;
	o->shares = c->shares;
	order_rehash(e, o);
	emit_canceled(e, o, decrement, OUCH_CXL_USER);
}

static void do_modify(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_modify_order *md = &cmd->u.modify;
	uint32_t oi = live_order(e, cmd->user, md->token);
	struct order *o;

	if (oi == NONE) {
		e->st.ignored_dead++;
		return;
	}
	o = &e->orders[oi];
	if ((md->side != o->side && !(is_sell(o->side) && is_sell(md->side))) || md->shares > o->shares) {
		e->st.ignored_invalid++;
		return;
	}
	o->side = md->side;
	o->shares = md->shares;
	if (md->shares == 0) {
		book_remove(e, oi);
		emit_modified(e, o);
		order_release(e, oi);
		return;
	}
	order_rehash(e, o);
	emit_modified(e, o);
}

static void do_cancel_all(struct engine *e, const struct engine_cmd *cmd)
{
	uint32_t user = user_find(e, cmd->user, 0), oi, next;

	if (user == 0)
		return;
	for (oi = e->users[user].head; oi != NONE; oi = next) {
		next = e->orders[oi].unext;
		cancel_booked(e, oi, OUCH_CXL_USER);
	}
}

/* Cancels (reason 'T') every order whose expiry time is at or before now. */
static void expire(struct engine *e)
{
	while (e->n_heap > 0 && e->orders[e->heap[0]].expire_ns <= e->now_ns) {
		e->st.expired++;
		cancel_booked(e, e->heap[0], OUCH_CXL_TIMEOUT);
	}
}

static void begin(struct engine *e, uint64_t tape_ns, engine_emit_fn fn, void *ctx)
{
	e->now_ns = tape_ns;
	e->ts = tape_ns % NS_PER_DAY;
	e->emit = fn;
	e->ctx = ctx;
}

void engine_apply(struct engine *e, uint64_t seq, uint64_t tape_ns, const struct engine_cmd *cmd,
		  engine_emit_fn emit_fn, void *ctx)
{
	begin(e, tape_ns, emit_fn, ctx);
	e->st.commands++;
	e->st.last_seq = seq;
	expire(e);
	switch (cmd->kind) {
	case ENGINE_ENTER:
		do_enter(e, cmd);
		break;
	case ENGINE_REPLACE:
		do_replace(e, cmd);
		break;
	case ENGINE_CANCEL:
		do_cancel(e, cmd);
		break;
	case ENGINE_MODIFY:
		do_modify(e, cmd);
		break;
	case ENGINE_CANCEL_ALL:
		do_cancel_all(e, cmd);
		break;
	default:
		e->st.ignored_invalid++;
		break;
	}
}

void engine_advance_time(struct engine *e, uint64_t tape_ns, engine_emit_fn emit_fn, void *ctx)
{
	begin(e, tape_ns, emit_fn, ctx);
	expire(e);
}

uint64_t engine_hash(const struct engine *e)
{
	uint64_t s[6] = {
		e->book_hash, e->next_ref, e->next_match, e->next_prio, e->n_tokens, e->orders_open,
	};

	return XXH3_64bits(s, sizeof(s));
}

void engine_get_stats(const struct engine *e, struct engine_stats *out)
{
	*out = e->st;
	out->orders_open = e->orders_open;
	out->tokens = e->n_tokens;
	out->users = e->n_users;
}

/* --- self-check ---------------------------------------------------------- */

static int verify_level(const struct engine *e, uint32_t sym, int side, uint32_t li, uint64_t *hash,
			uint32_t *count)
{
	const struct level *l = &e->levels[li];

	if (l->head[Q_DISPLAYED] == NONE && l->head[Q_HIDDEN] == NONE)
		return -EUCLEAN;
	for (int q = 0; q < 2; q++) {
		uint32_t prev = NONE;

		for (uint32_t oi = l->head[q]; oi != NONE; prev = oi, oi = e->orders[oi].next) {
			const struct order *o = &e->orders[oi];

			if (o->prev != prev || o->level != li || o->sym != sym || o->price != l->price ||
			    book_side(o->side) != side || queue_of(o->display) != q || o->shares == 0 ||
			    e->tokens[o->tok].order != oi || o->hash != order_hash(e, o) ||
			    (o->expire_ns != NO_EXPIRY) != (o->heap_pos != NONE) ||
			    (o->heap_pos != NONE && e->heap[o->heap_pos] != oi) || ++*count > e->max_orders)
				return -EUCLEAN;
			*hash ^= o->hash;
		}
		if (l->tail[q] != prev)
			return -EUCLEAN;
	}
	return 0;
}

int engine_verify(const struct engine *e)
{
	uint64_t hash = 0;
	uint32_t count = 0, listed = 0;

	for (uint32_t sym = 0; sym < e->n_symbols; sym++) {
		for (int side = 0; side < 2; side++) {
			const struct lvl_ent *a = side_ents(e, sym, side);

			for (uint32_t i = 0; i < e->syms[sym].n[side]; i++) {
				if ((i > 0 && a[i - 1].key >= a[i].key) ||
				    a[i].key != price_key(side, e->levels[a[i].level].price) ||
				    verify_level(e, sym, side, a[i].level, &hash, &count) != 0)
					return -EUCLEAN;
			}
		}
	}
	for (uint32_t u = 1; u <= e->n_users; u++) {
		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext) {
			if (e->orders[oi].user != u || ++listed > count)
				return -EUCLEAN;
		}
	}
	for (uint32_t i = 1; i < e->n_heap; i++) {
		if (heap_less(e, e->heap[i], e->heap[(i - 1) / 2]))
			return -EUCLEAN;
	}
	if (count != e->orders_open || listed != count || hash != e->book_hash)
		return -EUCLEAN;
	return 0;
}

/* --- life cycle ---------------------------------------------------------- */

static int check_config(const struct engine_config *cfg)
{
	if (!cfg || !cfg->symbols || cfg->n_symbols == 0 || cfg->n_symbols > (1u << 24))
		return -EINVAL;
	if (cfg->max_shares == 0 || cfg->max_orders == 0 || cfg->max_orders >= (1u << 31) ||
	    cfg->max_tokens == 0 || cfg->max_tokens >= (1u << 31) || cfg->max_levels == 0 ||
	    cfg->max_levels > (1u << 24) || cfg->max_users >= (1u << 30) || cfg->partition > 0xffff)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_symbols; i++) {
		size_t len = cfg->symbols[i] ? strnlen(cfg->symbols[i], OUCH_STOCK_LEN + 1) : 0;

		if (len == 0 || len > OUCH_STOCK_LEN)
			return -EINVAL;
	}
	return 0;
}

/* Allocates n zeroed elements and touches every page now, so that no page
 * fault lands on the hot path later. */
static void *alloc_zeroed(size_t n, size_t size)
{
	void *p;

	if (n != 0 && size > SIZE_MAX / n)
		return NULL;
	p = malloc(n * size != 0 ? n * size : 1);
	if (p)
		memset(p, 0, n * size);
	return p;
}

static int alloc_tables(struct engine *e, const struct engine_config *cfg)
{
	size_t n_lv = cfg->n_symbols * 2 * (size_t)e->max_levels;
	size_t n_levels = n_lv < e->max_orders ? n_lv : e->max_orders;

	e->sym_mask = pow2_at_least(2 * (uint64_t)cfg->n_symbols) - 1;
	e->user_mask = pow2_at_least(2 * (uint64_t)e->max_users) - 1;
	e->token_cap = e->max_tokens + e->max_tokens / 4 + 1;
	e->syms = alloc_zeroed(cfg->n_symbols, sizeof(*e->syms));
	e->sym_slots = alloc_zeroed((size_t)e->sym_mask + 1, sizeof(*e->sym_slots));
	e->orders = alloc_zeroed(e->max_orders, sizeof(*e->orders));
	e->levels = alloc_zeroed(n_levels, sizeof(*e->levels));
	e->lv = alloc_zeroed(n_lv, sizeof(*e->lv));
	e->tokens = alloc_zeroed(e->token_cap, sizeof(*e->tokens));
	e->users = alloc_zeroed((size_t)e->max_users + 1, sizeof(*e->users));
	e->user_slots = alloc_zeroed((size_t)e->user_mask + 1, sizeof(*e->user_slots));
	e->heap = alloc_zeroed(e->max_orders, sizeof(*e->heap));
	if (!e->syms || !e->sym_slots || !e->orders || !e->levels || !e->lv || !e->tokens ||
	    !e->users || !e->user_slots || !e->heap)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->max_orders; i++)
		e->orders[i].next = i + 1 < e->max_orders ? i + 1 : NONE;
	for (size_t i = 0; i < n_levels; i++)
		e->levels[i].next_free = i + 1 < n_levels ? (uint32_t)i + 1 : NONE;
	e->order_free = 0;
	e->level_free = 0;
	return 0;
}

static int add_symbols(struct engine *e, const struct engine_config *cfg)
{
	for (size_t i = 0; i < cfg->n_symbols; i++) {
		struct symbol *s = &e->syms[i];
		uint32_t slot;

		if (symbol_find(e, cfg->symbols[i]) != NONE)
			return -EINVAL; /* listed twice */
		s->name = pack8(cfg->symbols[i], OUCH_STOCK_LEN);
		memcpy(s->str, &s->name, OUCH_STOCK_LEN);
		s->str[OUCH_STOCK_LEN] = '\0';
		for (slot = (uint32_t)mix64(s->name) & e->sym_mask; e->sym_slots[slot] != 0;
		     slot = (slot + 1) & e->sym_mask)
			;
		e->sym_slots[slot] = (uint32_t)i + 1;
		e->n_symbols++;
	}
	return 0;
}

int engine_create(struct engine **out, const struct engine_config *cfg)
{
	struct engine *e;
	int r = check_config(cfg);

	if (r)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->max_shares = cfg->max_shares;
	e->max_orders = cfg->max_orders;
	e->max_tokens = cfg->max_tokens;
	e->max_levels = cfg->max_levels;
	e->max_users = cfg->max_users ? cfg->max_users : DEFAULT_MAX_USERS;
	e->next_ref = ((uint64_t)cfg->partition << 48) + 1;
	e->next_match = ((uint64_t)cfg->partition << 48) + 1;
	e->next_prio = 1;
	r = alloc_tables(e, cfg);
	if (!r)
		r = add_symbols(e, cfg);
	if (r) {
		engine_destroy(e);
		return r;
	}
	*out = e;
	return 0;
}

void engine_destroy(struct engine *e)
{
	if (!e)
		return;
	free(e->heap);
	free(e->user_slots);
	free(e->users);
	free(e->tokens);
	free(e->lv);
	free(e->levels);
	free(e->orders);
	free(e->sym_slots);
	free(e->syms);
	free(e);
}

/* --- snapshots ------------------------------------------------------------ */

/* Format (version ENGINE_SNAP_VERSION, little-endian host layout of fixed-width
 * integers; the matcher wraps it with its own header and a CRC32C):
 *   u32 magic 'LSEN', u32 version, u32 n_symbols, u32 n_users,
 *   u64 n_tokens, u64 n_orders, u64 next_ref, next_match, next_prio,
 *   u64 book_hash, u64 now_ns, struct engine_stats as u64[],
 *   symbols: u64 packed name each (must equal the configuration's, in order),
 *   users: u64 packed login each, in id order (ids, and so token hashes,
 *     come out identical),
 *   tokens: { u32 user, u32 live, char token[14], u16 pad } each, in slot order,
 *   orders: in book order (symbol, side, level ascending key, displayed queue
 *     then hidden, head to tail) as struct snap_order,
 *   per user (id order): u32 count, then u32 order indices (into the order
 *     list) in the user's entry order (CANCEL_ALL's order). */
#define ENGINE_SNAP_MAGIC 0x4e45534cu /* "LSEN" */
#define ENGINE_SNAP_VERSION 1u

struct snap_head {
	uint32_t magic, version, n_symbols, n_users;
	uint64_t n_tokens, n_orders, next_ref, next_match, next_prio, book_hash, now_ns;
	struct engine_stats st;
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
#define LIVE_PENDING (NONE - 1) /* a live token whose order is not loaded yet */

int engine_snapshot_write(const struct engine *e, engine_write_fn fn, void *ctx)
{
	struct snap_head h;
	struct snap_order ob[SNAP_CHUNK];
	struct snap_token tb[SNAP_CHUNK];
	uint32_t nb = 0, k = 0, *rank;
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
	h.st = e->st;
	if ((r = fn(ctx, &h, sizeof(h))) < 0)
		return r;
	for (uint32_t s = 0; s < e->n_symbols; s++)
		if ((r = fn(ctx, &e->syms[s].name, sizeof(uint64_t))) < 0)
			return r;
	for (uint32_t u = 1; u <= e->n_users; u++)
		if ((r = fn(ctx, &e->users[u].name, sizeof(uint64_t))) < 0)
			return r;
	for (uint32_t i = 0; i < e->token_cap; i++) {
		const struct token_slot *t = &e->tokens[i];

		if (t->user == 0)
			continue;
		memset(&tb[nb], 0, sizeof(tb[nb]));
		tb[nb].user = t->user;
		tb[nb].live = t->order != NONE;
		memcpy(tb[nb].token, t->token, OUCH_TOKEN_LEN);
		if (++nb == SNAP_CHUNK) {
			if ((r = fn(ctx, tb, sizeof(tb[0]) * nb)) < 0)
				return r;
			nb = 0;
		}
	}
	if (nb && (r = fn(ctx, tb, sizeof(tb[0]) * nb)) < 0)
		return r;
	/* the order's place in the list, for the users' lists (in heap slots: the
	 * heap array holds only the orders with an expiry, so use a scratch
	 * array) */
	rank = malloc(((size_t)e->max_orders + 1) * sizeof(*rank));
	if (!rank)
		return -ENOMEM;
	nb = 0;
	for (uint32_t sym = 0; sym < e->n_symbols; sym++) {
		for (int side = 0; side < 2; side++) {
			const struct lvl_ent *a = side_ents(e, sym, side);

			for (uint32_t i = 0; i < e->syms[sym].n[side]; i++) {
				const struct level *l = &e->levels[a[i].level];

				for (int q = 0; q < 2; q++) {
					for (uint32_t oi = l->head[q]; oi != NONE; oi = e->orders[oi].next) {
						const struct order *o = &e->orders[oi];
						struct snap_order *so = &ob[nb];

						memset(so, 0, sizeof(*so));
						so->ref = o->ref;
						so->prio = o->prio;
						so->expire_ns = o->expire_ns;
						so->price = o->price;
						so->shares = o->shares;
						so->user = o->user;
						so->firm = o->firm;
						so->sym = o->sym;
						memcpy(so->token, e->tokens[o->tok].token, OUCH_TOKEN_LEN);
						so->side = o->side;
						so->display = o->display;
						so->capacity = o->capacity;
						so->cross_type = o->cross_type;
						memcpy(so->ofirm, o->ofirm, OUCH_FIRM_LEN);
						rank[oi] = k++;
						if (++nb == SNAP_CHUNK) {
							if ((r = fn(ctx, ob, sizeof(ob[0]) * nb)) < 0)
								goto out_free;
							nb = 0;
						}
					}
				}
			}
		}
	}
	if (nb && (r = fn(ctx, ob, sizeof(ob[0]) * nb)) < 0)
		goto out_free;
	for (uint32_t u = 1; u <= e->n_users; u++) {
		uint32_t cnt = 0, buf[SNAP_CHUNK];

		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext)
			cnt++;
		if ((r = fn(ctx, &cnt, sizeof(cnt))) < 0)
			goto out_free;
		nb = 0;
		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext) {
			buf[nb++] = rank[oi];
			if (nb == SNAP_CHUNK) {
				if ((r = fn(ctx, buf, sizeof(buf[0]) * nb)) < 0)
					goto out_free;
				nb = 0;
			}
		}
		if (nb && (r = fn(ctx, buf, sizeof(buf[0]) * nb)) < 0)
			goto out_free;
	}
	r = 0;
out_free:
	free(rank);
	return r;
}

static int snap_read_order(struct engine *e, const struct snap_order *so, uint32_t *out)
{
	uint32_t oi = e->order_free, li, slot;
	struct order *o;
	uint64_t th;
	int found, q, side;

	if (oi == NONE || so->sym >= e->n_symbols || so->user == 0 || so->user > e->n_users ||
	    so->shares == 0 || (so->side != OUCH_BUY && !is_sell(so->side)))
		return -EBADMSG;
	th = token_hash(so->user, so->token);
	slot = token_find(e, so->user, th, so->token, &found);
	if (!found || e->tokens[slot].order != LIVE_PENDING)
		return -EBADMSG;
	side = book_side(so->side);
	q = queue_of(so->display);
	li = level_get(e, so->sym, side, so->price);
	if (li == NONE)
		return -EBADMSG;
	e->order_free = e->orders[oi].next;
	o = &e->orders[oi];
	memset(o, 0, sizeof(*o));
	o->heap_pos = NONE;
	o->unext = o->uprev = NONE;
	o->ref = so->ref;
	o->prio = so->prio;
	o->expire_ns = so->expire_ns;
	o->price = so->price;
	o->shares = so->shares;
	o->user = so->user;
	o->firm = so->firm;
	o->sym = so->sym;
	o->tok = slot;
	o->side = so->side;
	o->display = so->display;
	o->capacity = so->capacity;
	o->cross_type = so->cross_type;
	memcpy(o->ofirm, so->ofirm, OUCH_FIRM_LEN);
	e->tokens[slot].order = oi;
	level_append(e, li, q, oi);
	o->hash = order_hash(e, o);
	e->book_hash ^= o->hash;
	if (o->expire_ns != NO_EXPIRY)
		heap_push(e, oi);
	e->orders_open++;
	*out = oi;
	return 0;
}

int engine_snapshot_read(struct engine *e, engine_read_fn fn, void *ctx)
{
	struct snap_head h;
	uint32_t *map = NULL;
	int r;

	if (e->n_users || e->n_tokens || e->orders_open)
		return -EBUSY;
	if ((r = fn(ctx, &h, sizeof(h))) < 0)
		return r;
	if (h.magic != ENGINE_SNAP_MAGIC || h.version != ENGINE_SNAP_VERSION)
		return -EPROTO;
	if (h.n_symbols != e->n_symbols || h.n_users > e->max_users || h.n_tokens > e->max_tokens ||
	    h.n_orders > e->max_orders || h.n_orders > h.n_tokens)
		return -EBADMSG;
	for (uint32_t s = 0; s < e->n_symbols; s++) {
		uint64_t name;

		if ((r = fn(ctx, &name, sizeof(name))) < 0)
			return r;
		if (name != e->syms[s].name)
			return -EBADMSG; /* another partition's symbols */
	}
	for (uint32_t u = 1; u <= h.n_users; u++) {
		uint64_t name;
		char login[8];

		if ((r = fn(ctx, &name, sizeof(name))) < 0)
			return r;
		memcpy(login, &name, sizeof(name) < sizeof(login) ? sizeof(name) : sizeof(login));
		login[7] = '\0';
		if (user_find(e, login, 0) != 0 || user_find(e, login, 1) != u)
			return -EBADMSG;
	}
	for (uint64_t i = 0; i < h.n_tokens; i++) {
		struct snap_token t;
		uint32_t slot;
		uint64_t th;
		int found;

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
	map = malloc((h.n_orders + 1) * sizeof(*map));
	if (!map)
		return -ENOMEM;
	for (uint64_t i = 0; i < h.n_orders; i++) {
		struct snap_order so;

		if ((r = fn(ctx, &so, sizeof(so))) < 0 || (r = snap_read_order(e, &so, &map[i])) < 0)
			goto out_free;
	}
	for (uint32_t u = 1; u <= e->n_users; u++) {
		struct user *us = &e->users[u];
		uint32_t cnt, idx;

		if ((r = fn(ctx, &cnt, sizeof(cnt))) < 0)
			goto out_free;
		for (uint32_t j = 0; j < cnt; j++) {
			struct order *o;

			if ((r = fn(ctx, &idx, sizeof(idx))) < 0)
				goto out_free;
			r = -EBADMSG;
			if (idx >= h.n_orders)
				goto out_free;
			o = &e->orders[map[idx]];
			if (o->user != u || o->uprev != NONE || us->head == map[idx])
				goto out_free;
			o->uprev = us->tail;
			if (us->tail != NONE)
				e->orders[us->tail].unext = map[idx];
			else
				us->head = map[idx];
			us->tail = map[idx];
		}
	}
	r = -EBADMSG;
	for (uint32_t i = 0; i < e->token_cap; i++)
		if (e->tokens[i].user != 0 && e->tokens[i].order == LIVE_PENDING)
			goto out_free; /* a live token without its order */
	e->next_ref = h.next_ref;
	e->next_match = h.next_match;
	e->next_prio = h.next_prio;
	e->now_ns = h.now_ns;
	e->ts = h.now_ns % NS_PER_DAY;
	e->st = h.st;
	if (e->book_hash != h.book_hash || engine_verify(e) != 0)
		goto out_free;
	r = 0;
out_free:
	free(map);
	return r;
}
