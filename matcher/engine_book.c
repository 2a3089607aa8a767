/* The matching engine's book: the tables and lookups (symbols, users,
 * tokens, the state hash, the expiry heap, price levels, orders), the
 * self-check and the life cycle that allocates them all (layout in
 * engine_private.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine_private.h"
#include "prealloc.h"

#define DEFAULT_MAX_USERS 65536u

/* What the state hash covers of one order; zero-filled before use. */
struct order_image {
	uint64_t ref, prio, expire_ns, sym_name, user_name;
	uint32_t price, shares, firm, pad0;
	char token[OUCH_TOKEN_LEN];
	char side, display, capacity, cross_type;
	char ofirm[OUCH_FIRM_LEN];
	char pad1[4];
};

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

/* --- symbols and users --------------------------------------------------- */

uint32_t engine_book_symbol(const struct engine *e, const char *stock)
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

/* The slot of the user table holding name, or the empty one where it goes. */
static uint32_t user_slot(const struct engine *e, uint64_t name)
{
	uint32_t i = (uint32_t)mix64(name) & e->user_mask;

	for (;; i = (i + 1) & e->user_mask) {
		uint32_t id = e->user_slots[i];

		if (id == 0 || e->users[id].name == name)
			return i;
	}
}

uint32_t engine_book_user_find(const struct engine *e, uint64_t packed_login)
{
	return e->user_slots[user_slot(e, packed_login)];
}

uint32_t engine_book_user(struct engine *e, const char *login, int create)
{
	uint64_t name = pack8(login, 6);
	uint32_t i = user_slot(e, name);
	struct user *u;

	if (e->user_slots[i] != 0)
		return e->user_slots[i];
	if (!create || e->n_users >= e->max_users)
		return 0;
	e->user_slots[i] = ++e->n_users;
	u = &e->users[e->n_users];
	u->name = name;
	memcpy(u->str, &name, sizeof(name) < sizeof(u->str) ? sizeof(name) : sizeof(u->str));
	u->str[7] = '\0';
	u->head = u->tail = NONE;
	u->lim = NONE;
	u->fid = NONE; /* no firm resolved yet */
	u->dhead = u->dtail = NONE;
	if (e->n_ulims)
		engine_risk_user_new(e, e->n_users);
	return e->n_users;
}

/* --- tokens -------------------------------------------------------------- */

uint32_t engine_book_live_order(struct engine *e, const char *login, const char *token)
{
	char key[OUCH_TOKEN_LEN];
	uint32_t user = engine_book_user(e, login, 0), slot;
	int found;

	if (user == 0)
		return NONE;
	token_key(key, token);
	slot = token_find(e, user, token_hash(user, key), key, &found);
	return found && token_live(&e->tokens[slot]) ? e->tokens[slot].order : NONE;
}

/* Slot `to` (empty) takes the token in slot `from`; its order or its dead
 * entry follows. */
static void token_move(struct engine *e, uint32_t from, uint32_t to)
{
	struct token_slot *t = &e->tokens[to];

	*t = e->tokens[from];
	if (token_live(t))
		e->orders[t->order].tok = to;
	else
		e->dead[t->order & ~TOKEN_DEAD].slot = to;
}

/* 1 when slot j's token, whose search starts at home, may move back to the
 * hole at i: home does not lie cyclically in (i, j]. */
static int may_fill(uint32_t i, uint32_t j, uint32_t home)
{
	return i <= j ? (home <= i || home > j) : (home <= i && home > j);
}

/* Deletes the token in slot i by backward shift (linear probing keeps no
 * tombstones): each later token of the run whose search would pass the hole
 * moves into it. */
static void token_delete(struct engine *e, uint32_t i)
{
	uint32_t j = i;

	for (;;) {
		const struct token_slot *t;

		if (++j == e->token_cap)
			j = 0;
		t = &e->tokens[j];
		if (t->user == 0)
			break;
		if (may_fill(i, j, token_home(e, token_hash(t->user, t->token)))) {
			token_move(e, j, i);
			i = j;
		}
	}
	memset(&e->tokens[i], 0, sizeof(e->tokens[i]));
	e->n_tokens--;
}

/* Forgets the dead token of entry d, the oldest of its user's: out of both
 * lists, the entry freed, the slot deleted. */
static void dead_forget(struct engine *e, uint32_t d)
{
	struct dead_ent *x = &e->dead[d];
	uint32_t slot = x->slot;
	struct user *u = &e->users[e->tokens[slot].user];

	if (x->prev != NONE)
		e->dead[x->prev].next = x->next;
	else
		e->dead_head = x->next;
	if (x->next != NONE)
		e->dead[x->next].prev = x->prev;
	else
		e->dead_tail = x->prev;
	u->dhead = x->unext;
	if (u->dhead == NONE)
		u->dtail = NONE;
	u->n_tok--;
	x->slot = e->dead_free;
	e->dead_free = d;
	e->n_dead--;
	token_delete(e, slot);
}

void engine_book_token_room(struct engine *e)
{
	if (e->n_tokens < e->max_tokens || e->n_dead == 0)
		return;
	/* the globally oldest is its user's oldest too: lists keep death order */
	dead_forget(e, e->dead_head);
	e->st.tokens_forgotten++;
	/* The next to go is the next new token's: its slot lies anywhere in
	 * the table, a cache miss that was a sixth of a full table's matcher
	 * (perf, dead_forget); fetched now, it arrives while this event and
	 * the next are applied. (dead[dead_head] was just written.) */
	if (e->dead_head != NONE)
		__builtin_prefetch(&e->tokens[e->dead[e->dead_head].slot]);
}

int engine_book_user_token_room_slow(struct engine *e, uint32_t user)
{
	struct user *u = &e->users[user];

	/* more than one only after a snapshot of a larger quota was loaded */
	while (u->n_tok >= e->max_user_tokens) {
		if (u->dhead == NONE)
			return -1;
		dead_forget(e, u->dhead);
		e->st.user_tokens_forgotten++;
	}
	return 0;
}

/* The dead pool as created: every entry free, in index order. */
static void dead_pool_reset(struct engine *e)
{
	for (uint32_t i = 0; i < e->max_tokens; i++)
		e->dead[i].slot = i + 1 < e->max_tokens ? i + 1 : NONE;
	e->dead_free = 0;
	e->dead_head = e->dead_tail = NONE;
	e->n_dead = 0;
}

void engine_book_tokens_forget_all(struct engine *e)
{
	/* every token is dead (no live order: the caller checks), and emptying
	 * every slot leaves no probe chain to mend, so no backward shift; each
	 * entry goes back to the free list (in another order than at create:
	 * entry numbers are never seen, not in hashes nor snapshots) */
	for (uint32_t d = e->dead_head, next; d != NONE; d = next) {
		next = e->dead[d].next;
		memset(&e->tokens[e->dead[d].slot], 0, sizeof(e->tokens[0]));
		e->dead[d].slot = e->dead_free;
		e->dead_free = d;
	}
	for (uint32_t u = 1; u <= e->n_users; u++) {
		e->users[u].n_tok = 0;
		e->users[u].dhead = e->users[u].dtail = NONE;
	}
	e->n_tokens = 0;
	e->n_dead = 0;
	e->dead_head = e->dead_tail = NONE;
}

/* --- state hash ---------------------------------------------------------- */

/* XXH3 of what the state hash covers of the order. */
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
	im.firm = e->firms[o->firm].name;
	memcpy(im.token, e->tokens[o->tok].token, OUCH_TOKEN_LEN);
	im.side = o->side;
	im.display = o->display;
	im.capacity = o->capacity;
	im.cross_type = o->cross_type;
	memcpy(im.ofirm, o->ofirm, OUCH_FIRM_LEN);
	return XXH3_64bits(&im, sizeof(im));
}

void engine_book_rehash(struct engine *e, struct order *o)
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

void engine_book_heap_push(struct engine *e, uint32_t oi)
{
	heap_set(e, e->n_heap++, oi);
	heap_up(e, e->n_heap - 1);
}

void engine_book_heap_remove(struct engine *e, uint32_t oi)
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

int engine_book_has_room(const struct engine *e, uint32_t sym, int side, uint32_t price)
{
	const struct lvl_ent *a = side_ents(e, sym, side);
	uint32_t n = e->syms[sym].n[side], key = price_key(side, price), i;

	if (n < e->max_levels)
		return 1;
	i = lower_bound(a, n, key);
	return i < n && a[i].key == key;
}

uint32_t engine_book_level(struct engine *e, uint32_t sym, int side, uint32_t price)
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
	e->levels_used++;
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
	e->levels_used--;
	e->levels[li].next_free = e->level_free;
	e->level_free = li;
}

/* --- orders -------------------------------------------------------------- */

uint32_t engine_book_order_alloc(struct engine *e, uint32_t user, uint32_t firm)
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
	o->firm = firm;
	o->fnext = NONE;
	engine_firm_append(e, oi);
	e->orders_open++;
	return oi;
}

void engine_book_order_release(struct engine *e, uint32_t oi)
{
	struct order *o = &e->orders[oi];
	struct user *u = &e->users[o->user];
	struct firm *f = &e->firms[o->firm];

	token_kill(e, o->tok);
	if (o->uprev != NONE)
		e->orders[o->uprev].unext = o->unext;
	else
		u->head = o->unext;
	if (o->unext != NONE)
		e->orders[o->unext].uprev = o->uprev;
	else
		u->tail = o->uprev;
	if (o->fprev != NONE)
		e->orders[o->fprev].fnext = o->fnext;
	else
		f->head = o->fnext;
	if (o->fnext != NONE)
		e->orders[o->fnext].fprev = o->fprev;
	else
		f->tail = o->fprev;
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

/* engine_book_place(), for engine_book_insert() too (inline: the hot path). */
static inline void book_link(struct engine *e, uint32_t oi, uint32_t li)
{
	struct order *o = &e->orders[oi];

	level_append(e, li, queue_of(o->display), oi);
	risk_rest(e, o);
	o->hash = order_hash(e, o);
	e->book_hash ^= o->hash;
	if (o->expire_ns != NO_EXPIRY)
		engine_book_heap_push(e, oi);
}

void engine_book_place(struct engine *e, uint32_t oi, uint32_t li)
{
	book_link(e, oi, li);
}

int engine_book_insert(struct engine *e, uint32_t oi)
{
	struct order *o = &e->orders[oi];
	uint32_t li = engine_book_level(e, o->sym, book_side(o->side), o->price);

	if (li == NONE)
		return -1;
	o->prio = e->next_prio++;
	book_link(e, oi, li);
	return 0;
}

void engine_book_remove(struct engine *e, uint32_t oi)
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
	risk_unrest(e, o);
	e->book_hash ^= o->hash;
	if (o->heap_pos != NONE)
		engine_book_heap_remove(e, oi);
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

/* Every entry of the global dead list names a dead token that names it
 * back, and each can still be found from its home slot; each user's list is
 * the global one's entries of that user, in the same order, and its count
 * is its live and dead tokens. cursor: n_users + 1 scratch. */
static int verify_dead(const struct engine *e, uint32_t *cursor)
{
	uint32_t prev = NONE, k = 0, free = 0;

	if (e->n_dead > e->n_tokens || e->n_tokens > e->max_tokens)
		return -EUCLEAN;
	for (uint32_t u = 1; u <= e->n_users; u++)
		cursor[u] = e->users[u].dhead;
	for (uint32_t d = e->dead_head; d != NONE; prev = d, d = e->dead[d].next) {
		const struct dead_ent *x = &e->dead[d];
		const struct token_slot *t;
		uint32_t slot;
		int found;

		if (d >= e->max_tokens || ++k > e->n_dead || x->prev != prev ||
		    x->slot >= e->token_cap)
			return -EUCLEAN;
		t = &e->tokens[x->slot];
		if (t->user == 0 || t->user > e->n_users || t->order != (TOKEN_DEAD | d) ||
		    cursor[t->user] != d)
			return -EUCLEAN;
		cursor[t->user] = x->unext;
		if (x->unext == NONE && e->users[t->user].dtail != d)
			return -EUCLEAN;
		slot = token_find(e, t->user, token_hash(t->user, t->token), t->token, &found);
		if (!found || slot != x->slot)
			return -EUCLEAN;
	}
	if (k != e->n_dead || e->dead_tail != prev)
		return -EUCLEAN;
	for (uint32_t u = 1; u <= e->n_users; u++) {
		if (cursor[u] != NONE || (e->users[u].dhead == NONE) != (e->users[u].dtail == NONE))
			return -EUCLEAN;
	}
	for (uint32_t d = e->dead_free; d != NONE; d = e->dead[d].slot) {
		if (d >= e->max_tokens || ++free > e->max_tokens - e->n_dead)
			return -EUCLEAN;
	}
	return free == e->max_tokens - e->n_dead ? 0 : -EUCLEAN;
}

/* Each user's count of remembered tokens: its open orders' (one live token
 * each) and its dead ones. cursor: n_users + 1 scratch. */
static int verify_user_tokens(const struct engine *e, uint32_t *cursor)
{
	uint64_t sum = 0;

	for (uint32_t u = 1; u <= e->n_users; u++)
		cursor[u] = 0;
	for (uint32_t d = e->dead_head; d != NONE; d = e->dead[d].next)
		cursor[e->tokens[e->dead[d].slot].user]++;
	for (uint32_t u = 1; u <= e->n_users; u++) {
		for (uint32_t oi = e->users[u].head; oi != NONE; oi = e->orders[oi].unext)
			cursor[u]++;
		if (cursor[u] != e->users[u].n_tok)
			return -EUCLEAN;
		sum += cursor[u];
	}
	return sum == e->n_tokens ? 0 : -EUCLEAN;
}

int engine_verify(const struct engine *e)
{
	uint64_t hash = 0;
	uint32_t count = 0, listed = 0, *cursor;
	int r;

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
	if (count != e->orders_open || listed != count || hash != e->book_hash ||
	    e->n_tokens != e->n_dead + count)
		return -EUCLEAN;
	cursor = malloc(((size_t)e->n_users + 1) * sizeof(*cursor));
	if (!cursor)
		return -ENOMEM;
	r = verify_dead(e, cursor);
	if (!r)
		r = verify_user_tokens(e, cursor);
	free(cursor);
	if (r)
		return r;
	/* the day: nothing rests while the market is closed */
	if (e->day == 0 || e->day_base == 0 || (e->closed && count != 0))
		return -EUCLEAN;
	return engine_risk_verify(e);
}

/* --- life cycle ---------------------------------------------------------- */

static int check_config(const struct engine_config *cfg)
{
	if (!cfg || !cfg->symbols || cfg->n_symbols == 0 || cfg->n_symbols > (1u << 24))
		return -EINVAL;
	if (cfg->max_shares == 0 || cfg->max_orders == 0 || cfg->max_orders >= (1u << 31) ||
	    cfg->max_tokens <= cfg->max_orders || cfg->max_tokens >= (1u << 31) || cfg->max_levels == 0 ||
	    cfg->max_levels > (1u << 24) || cfg->max_users >= (1u << 30) ||
	    cfg->max_firms >= (1u << 30) || cfg->partition > 0xffff || (cfg->n_risk && !cfg->risk))
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_symbols; i++) {
		size_t len = cfg->symbols[i] ? strnlen(cfg->symbols[i], OUCH_STOCK_LEN + 1) : 0;

		if (len == 0 || len > OUCH_STOCK_LEN)
			return -EINVAL;
	}
	return 0;
}

static int alloc_tables(struct engine *e, const struct engine_config *cfg)
{
	size_t n_lv = cfg->n_symbols * 2 * (size_t)e->max_levels;
	size_t n_levels = n_lv < e->max_orders ? n_lv : e->max_orders;

	e->sym_mask = pow2_at_least(2 * (uint64_t)cfg->n_symbols) - 1;
	e->user_mask = pow2_at_least(2 * (uint64_t)e->max_users) - 1;
	/* At most 2/3 full: a search for an absent token (every new Enter's)
	 * probes ~5 slots. Twice max_tokens slots (at most half full) were
	 * measured against this (lockstep-bench --component matcher, --events
	 * 12000000 --max-tokens 4194304 for a full table, the default 2M
	 * events for a fresh one, interleaved): one hour 3 rounds had the
	 * larger table ~100 ns an event dearer fresh (678-704 against 560-589),
	 * the next 5 rounds showed no difference out of the noise either way
	 * (full 556-711 against 600-746, fresh 538-763 against 598-762): no
	 * gain worth 50 MB more a matcher, so the table stays at 1.5. */
	e->token_cap = e->max_tokens + e->max_tokens / 2 + 1;
	e->syms = prealloc_zeroed(cfg->n_symbols, sizeof(*e->syms));
	e->sym_slots = prealloc_zeroed((size_t)e->sym_mask + 1, sizeof(*e->sym_slots));
	e->orders = prealloc_zeroed(e->max_orders, sizeof(*e->orders));
	e->level_cap = (uint32_t)n_levels;
	e->levels = prealloc_zeroed(n_levels, sizeof(*e->levels));
	e->lv = prealloc_zeroed(n_lv, sizeof(*e->lv));
	e->tokens = prealloc_zeroed(e->token_cap, sizeof(*e->tokens));
	e->dead = prealloc_zeroed(e->max_tokens, sizeof(*e->dead));
	e->users = prealloc_zeroed((size_t)e->max_users + 1, sizeof(*e->users));
	e->user_slots = prealloc_zeroed((size_t)e->user_mask + 1, sizeof(*e->user_slots));
	e->heap = prealloc_zeroed(e->max_orders, sizeof(*e->heap));
	if (!e->syms || !e->sym_slots || !e->orders || !e->levels || !e->lv || !e->tokens ||
	    !e->dead || !e->users || !e->user_slots || !e->heap)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->max_orders; i++)
		e->orders[i].next = i + 1 < e->max_orders ? i + 1 : NONE;
	for (size_t i = 0; i < n_levels; i++)
		e->levels[i].next_free = i + 1 < n_levels ? (uint32_t)i + 1 : NONE;
	e->order_free = 0;
	e->level_free = 0;
	dead_pool_reset(e);
	return engine_risk_alloc(e, cfg);
}

static int add_symbols(struct engine *e, const struct engine_config *cfg)
{
	for (size_t i = 0; i < cfg->n_symbols; i++) {
		struct symbol *s = &e->syms[i];
		uint32_t slot;

		if (engine_book_symbol(e, cfg->symbols[i]) != NONE)
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
	e->max_user_tokens = cfg->max_user_tokens;
	e->max_levels = cfg->max_levels;
	e->max_users = cfg->max_users ? cfg->max_users : DEFAULT_MAX_USERS;
	e->next_ref = ((uint64_t)cfg->partition << 48) + 1;
	e->next_match = ((uint64_t)cfg->partition << 48) + 1;
	e->next_prio = 1;
	e->day = 1;
	e->day_base = 1;
	r = alloc_tables(e, cfg);
	if (!r)
		r = add_symbols(e, cfg);
	if (!r)
		r = engine_risk_configure(e, cfg);
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
	engine_risk_free(e);
	free(e->heap);
	free(e->user_slots);
	free(e->users);
	free(e->dead);
	free(e->tokens);
	free(e->lv);
	free(e->levels);
	free(e->orders);
	free(e->sym_slots);
	free(e->syms);
	free(e);
}
