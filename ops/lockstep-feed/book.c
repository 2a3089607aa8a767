/* The subscriber's order books. See book.h.
 *
 * Orders and price levels live in pools allocated at creation (a level
 * holds at least one order, so there are never more levels than orders),
 * found through two open-addressing hash tables with linear probing and
 * backward-shift deletion (no tombstones, so a long day does not slow
 * lookups down): orders by reference number, levels by (symbol, side,
 * price). A level's orders are a doubly linked queue, a side's levels a
 * doubly linked list from the best price down. Symbols are found by locate
 * through a 65,536-entry table and by name through an array kept sorted
 * (a 'R' inserts; symbols are few and 'R' is rare). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "book.h"
#include "prealloc.h"

#define NIL UINT32_MAX
#define NIL16 UINT16_MAX
#define BOOK_MAX_ORDERS (1u << 30)

enum { SIDE_BID = 0, SIDE_ASK = 1 };

struct order {
	uint64_t ref;
	uint32_t shares, price;
	uint32_t level; /* its price level */
	uint32_t prev, next; /* the level's queue; next: the free list too */
	uint16_t sym;
	uint8_t side;
};

struct level {
	uint64_t shares;
	uint32_t price, orders;
	uint32_t head, tail; /* oldest and newest order */
	uint32_t better, worse; /* the side's list; worse: the free list too */
	uint16_t sym;
	uint8_t side;
};

struct sym {
	char stock[ITCH_STOCK_LEN + 1];
	uint16_t locate;
	char state;
	char reason[5];
	uint32_t best[2]; /* best level per side */
	uint32_t orders;
	uint64_t volume, trades;
};

/* A table of pool indices (NIL: empty), keyed by what the pool entry holds. */
struct htab {
	uint32_t *t;
	uint32_t mask;
	unsigned shift; /* 64 - log2(size) */
};

enum htab_kind { H_ORDERS, H_LEVELS };

struct book {
	uint32_t max_orders, max_symbols;
	struct order *orders;
	struct level *levels;
	uint32_t free_order, free_level;
	struct htab oh, lh;
	struct sym *syms;
	uint16_t *by_name; /* symbol indices sorted by stock */
	uint16_t *loc; /* locate -> symbol index, NIL16: none */
	char last_event;
	struct book_stats st;
};

const char *book_anomaly_name(int a)
{
	static const char *const names[BOOK_A_MAX] = {
		[BOOK_OK] = "none",
		[BOOK_A_UNKNOWN_REF] = "unknown_ref",
		[BOOK_A_DUPLICATE_REF] = "duplicate_ref",
		[BOOK_A_OVER_EXECUTE] = "over_execute",
		[BOOK_A_OVER_CANCEL] = "over_cancel",
		[BOOK_A_UNKNOWN_LOCATE] = "unknown_locate",
		[BOOK_A_UNKNOWN_TYPE] = "unknown_type",
		[BOOK_A_BAD_FIELD] = "bad_field",
		[BOOK_A_SYMBOL_MISMATCH] = "symbol_mismatch",
		[BOOK_A_LOCATE_CONFLICT] = "locate_conflict",
		[BOOK_A_ORDERS_FULL] = "orders_full",
		[BOOK_A_SYMBOLS_FULL] = "symbols_full",
	};

	return a >= 0 && a < BOOK_A_MAX ? names[a] : "unknown";
}

/* ---- hash tables --------------------------------------------------------- */

static uint64_t level_key(uint16_t sym, uint8_t side, uint32_t price)
{
	return (uint64_t)sym << 33 | (uint64_t)side << 32 | price;
}

static uint64_t key_of(const struct book *b, enum htab_kind kind, uint32_t i)
{
	if (kind == H_ORDERS)
		return b->orders[i].ref;
	return level_key(b->levels[i].sym, b->levels[i].side, b->levels[i].price);
}

static uint32_t home(const struct htab *h, uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> h->shift);
}

static int htab_init(struct htab *h, uint32_t entries)
{
	uint64_t size = 2;
	unsigned bits = 1;

	while (size < 2 * (uint64_t)entries) { /* load factor at most 1/2 */
		size *= 2;
		bits++;
	}
	h->t = prealloc_zeroed(size, sizeof(*h->t));
	if (!h->t)
		return -ENOMEM;
	memset(h->t, 0xFF, size * sizeof(*h->t));
	h->mask = (uint32_t)(size - 1);
	h->shift = 64 - bits;
	return 0;
}

static void htab_clear(struct htab *h)
{
	memset(h->t, 0xFF, ((size_t)h->mask + 1) * sizeof(*h->t));
}

/* The slot holding key, or the empty slot where it would go. */
static uint32_t htab_slot(const struct book *b, const struct htab *h, enum htab_kind kind,
			  uint64_t key)
{
	uint32_t i = home(h, key);

	while (h->t[i] != NIL && key_of(b, kind, h->t[i]) != key)
		i = (i + 1) & h->mask;
	return i;
}

static uint32_t htab_find(const struct book *b, const struct htab *h, enum htab_kind kind,
			  uint64_t key)
{
	return h->t[htab_slot(b, h, kind, key)];
}

/* idx's key is not in the table. */
static void htab_insert(struct book *b, struct htab *h, enum htab_kind kind, uint32_t idx)
{
	h->t[htab_slot(b, h, kind, key_of(b, kind, idx))] = idx;
}

/* Removes key (present): the entries after it in its run move back into
 * the hole where their home allows. */
static void htab_remove(struct book *b, struct htab *h, enum htab_kind kind, uint64_t key)
{
	uint32_t i = htab_slot(b, h, kind, key), j = i;

	for (;;) {
		uint32_t k;

		j = (j + 1) & h->mask;
		if (h->t[j] == NIL)
			break;
		k = home(h, key_of(b, kind, h->t[j]));
		/* stays when its home lies cyclically in (i, j] */
		if (i < j ? (k > i && k <= j) : (k > i || k <= j))
			continue;
		h->t[i] = h->t[j];
		i = j;
	}
	h->t[i] = NIL;
}

/* ---- life cycle ---------------------------------------------------------- */

static void pools_reset(struct book *b)
{
	for (uint32_t i = 0; i < b->max_orders; i++) {
		b->orders[i].next = i + 1 < b->max_orders ? i + 1 : NIL;
		b->levels[i].worse = i + 1 < b->max_orders ? i + 1 : NIL;
	}
	b->free_order = b->free_level = 0;
	htab_clear(&b->oh);
	htab_clear(&b->lh);
	memset(b->loc, 0xFF, 65536 * sizeof(*b->loc));
	b->st.orders = b->st.levels = b->st.symbols = 0;
	b->last_event = 0;
}

int book_create(struct book **out, uint32_t max_orders, uint32_t max_symbols)
{
	struct book *b;

	if (max_orders == 0 || max_orders > BOOK_MAX_ORDERS || max_symbols == 0 ||
	    max_symbols > BOOK_MAX_SYMBOLS)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->max_orders = max_orders;
	b->max_symbols = max_symbols;
	b->orders = prealloc_zeroed(max_orders, sizeof(*b->orders));
	b->levels = prealloc_zeroed(max_orders, sizeof(*b->levels));
	b->syms = prealloc_zeroed(max_symbols, sizeof(*b->syms));
	b->by_name = prealloc_zeroed(max_symbols, sizeof(*b->by_name));
	b->loc = prealloc_zeroed(65536, sizeof(*b->loc));
	if (!b->orders || !b->levels || !b->syms || !b->by_name || !b->loc ||
	    htab_init(&b->oh, max_orders) < 0 || htab_init(&b->lh, max_orders) < 0) {
		book_destroy(b);
		return -ENOMEM;
	}
	pools_reset(b);
	*out = b;
	return 0;
}

void book_destroy(struct book *b)
{
	if (!b)
		return;
	free(b->lh.t);
	free(b->oh.t);
	free(b->loc);
	free(b->by_name);
	free(b->syms);
	free(b->levels);
	free(b->orders);
	free(b);
}

void book_clear(struct book *b)
{
	pools_reset(b);
}

/* ---- symbols ------------------------------------------------------------- */

/* The position of stock in by_name (found: *found = 1) or where it would go. */
static uint32_t name_pos(const struct book *b, const char *stock, int *found)
{
	uint32_t lo = 0, hi = b->st.symbols;

	*found = 0;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(b->syms[b->by_name[mid]].stock, stock);

		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct sym *sym_by_name(const struct book *b, const char *stock)
{
	int found;
	uint32_t pos = name_pos(b, stock, &found);

	return found ? &b->syms[b->by_name[pos]] : NULL;
}

static int apply_directory(struct book *b, uint16_t locate, const char *stock)
{
	uint16_t s = b->loc[locate];
	uint32_t pos;
	struct sym *y;
	int found;

	if (!stock[0])
		return BOOK_A_BAD_FIELD;
	if (s != NIL16)
		return strcmp(b->syms[s].stock, stock) == 0 ? BOOK_OK : BOOK_A_LOCATE_CONFLICT;
	pos = name_pos(b, stock, &found);
	if (found)
		return BOOK_A_LOCATE_CONFLICT; /* the symbol has another locate */
	if (b->st.symbols == b->max_symbols)
		return BOOK_A_SYMBOLS_FULL;
	s = (uint16_t)b->st.symbols;
	y = &b->syms[s];
	memset(y, 0, sizeof(*y));
	memcpy(y->stock, stock, strnlen(stock, ITCH_STOCK_LEN));
	y->locate = locate;
	y->best[SIDE_BID] = y->best[SIDE_ASK] = NIL;
	b->loc[locate] = s;
	memmove(&b->by_name[pos + 1], &b->by_name[pos],
		(b->st.symbols - pos) * sizeof(*b->by_name));
	b->by_name[pos] = s;
	b->st.symbols++;
	return BOOK_OK;
}

/* The symbol of `locate`, checked against the message's stock (NULL: none
 * to check): its index, or NIL16 with the anomaly in *a. */
static uint16_t sym_of(const struct book *b, uint16_t locate, const char *stock, int *a)
{
	uint16_t s = b->loc[locate];

	if (s == NIL16) {
		*a = BOOK_A_UNKNOWN_LOCATE;
		return NIL16;
	}
	if (stock && strcmp(b->syms[s].stock, stock) != 0) {
		*a = BOOK_A_SYMBOL_MISMATCH;
		return NIL16;
	}
	return s;
}

/* ---- levels and queues --------------------------------------------------- */

static int better(uint8_t side, uint32_t p, uint32_t q)
{
	return side == SIDE_BID ? p > q : p < q;
}

/* The level of (sym, side, price), opened in its place when there is none
 * (a free level always exists: levels never outnumber orders). */
static uint32_t level_get(struct book *b, uint16_t sym, uint8_t side, uint32_t price)
{
	struct sym *y = &b->syms[sym];
	uint32_t l = htab_find(b, &b->lh, H_LEVELS, level_key(sym, side, price));
	uint32_t prev = NIL, cur = y->best[side];
	struct level *v;

	if (l != NIL)
		return l;
	l = b->free_level;
	v = &b->levels[l];
	b->free_level = v->worse;
	while (cur != NIL && better(side, b->levels[cur].price, price)) {
		prev = cur;
		cur = b->levels[cur].worse;
	}
	memset(v, 0, sizeof(*v));
	v->price = price;
	v->sym = sym;
	v->side = side;
	v->head = v->tail = NIL;
	v->better = prev;
	v->worse = cur;
	if (prev != NIL)
		b->levels[prev].worse = l;
	else
		y->best[side] = l;
	if (cur != NIL)
		b->levels[cur].better = l;
	htab_insert(b, &b->lh, H_LEVELS, l);
	b->st.levels++;
	return l;
}

static void level_release(struct book *b, uint32_t l)
{
	struct level *v = &b->levels[l];

	if (v->better != NIL)
		b->levels[v->better].worse = v->worse;
	else
		b->syms[v->sym].best[v->side] = v->worse;
	if (v->worse != NIL)
		b->levels[v->worse].better = v->better;
	htab_remove(b, &b->lh, H_LEVELS, level_key(v->sym, v->side, v->price));
	v->worse = b->free_level;
	b->free_level = l;
	b->st.levels--;
}

/* Joins o to the back of its (sym, side, price) level. */
static void queue_append(struct book *b, uint32_t o)
{
	struct order *r = &b->orders[o];
	uint32_t l = level_get(b, r->sym, r->side, r->price);
	struct level *v = &b->levels[l];

	r->level = l;
	r->prev = v->tail;
	r->next = NIL;
	if (v->tail != NIL)
		b->orders[v->tail].next = o;
	else
		v->head = o;
	v->tail = o;
	v->orders++;
	v->shares += r->shares;
}

/* Takes o out of its level (released when it empties). */
static void queue_remove(struct book *b, uint32_t o)
{
	struct order *r = &b->orders[o];
	struct level *v = &b->levels[r->level];

	if (r->prev != NIL)
		b->orders[r->prev].next = r->next;
	else
		v->head = r->next;
	if (r->next != NIL)
		b->orders[r->next].prev = r->prev;
	else
		v->tail = r->prev;
	v->orders--;
	v->shares -= r->shares;
	if (v->orders == 0)
		level_release(b, r->level);
}

/* Removes order o from the book altogether. */
static void order_remove(struct book *b, uint32_t o)
{
	struct order *r = &b->orders[o];

	queue_remove(b, o);
	htab_remove(b, &b->oh, H_ORDERS, r->ref);
	b->syms[r->sym].orders--;
	r->next = b->free_order;
	b->free_order = o;
	b->st.orders--;
}

/* Takes `shares` off order o in place (it keeps its place), removing it
 * at 0. */
static void order_reduce(struct book *b, uint32_t o, uint32_t shares)
{
	struct order *r = &b->orders[o];

	if (shares >= r->shares) {
		order_remove(b, o);
		return;
	}
	r->shares -= shares;
	b->levels[r->level].shares -= shares;
}

/* ---- messages ------------------------------------------------------------ */

static int side_of(char c, uint8_t *side)
{
	if (c != 'B' && c != 'S')
		return -1;
	*side = c == 'B' ? SIDE_BID : SIDE_ASK;
	return 0;
}

static int apply_add(struct book *b, const struct itch_msg *m)
{
	uint8_t side;
	uint16_t s;
	uint32_t o;
	struct order *r;
	int a = BOOK_OK;

	if (side_of(m->u.add.side, &side) < 0 || m->u.add.shares == 0)
		return BOOK_A_BAD_FIELD;
	if ((s = sym_of(b, m->locate, m->u.add.stock, &a)) == NIL16)
		return a;
	if (htab_find(b, &b->oh, H_ORDERS, m->u.add.ref) != NIL)
		return BOOK_A_DUPLICATE_REF;
	if ((o = b->free_order) == NIL)
		return BOOK_A_ORDERS_FULL;
	r = &b->orders[o];
	b->free_order = r->next;
	r->ref = m->u.add.ref;
	r->shares = m->u.add.shares;
	r->price = m->u.add.price;
	r->sym = s;
	r->side = side;
	htab_insert(b, &b->oh, H_ORDERS, o);
	queue_append(b, o);
	b->syms[s].orders++;
	if (++b->st.orders > b->st.orders_high)
		b->st.orders_high = b->st.orders;
	return BOOK_OK;
}

static int apply_executed(struct book *b, uint64_t ref, uint32_t shares)
{
	uint32_t o = htab_find(b, &b->oh, H_ORDERS, ref);
	struct sym *y;
	int a = BOOK_OK;

	if (o == NIL)
		return BOOK_A_UNKNOWN_REF;
	if (shares == 0)
		return BOOK_A_BAD_FIELD;
	y = &b->syms[b->orders[o].sym];
	if (shares > b->orders[o].shares) {
		shares = b->orders[o].shares;
		a = BOOK_A_OVER_EXECUTE;
	}
	y->volume += shares;
	y->trades++;
	b->st.executed_shares += shares;
	order_reduce(b, o, shares);
	return a;
}

static int apply_cancel(struct book *b, uint64_t ref, uint32_t shares)
{
	uint32_t o = htab_find(b, &b->oh, H_ORDERS, ref);

	if (o == NIL)
		return BOOK_A_UNKNOWN_REF;
	if (shares == 0)
		return BOOK_A_BAD_FIELD;
	if (shares > b->orders[o].shares) {
		order_remove(b, o);
		return BOOK_A_OVER_CANCEL;
	}
	order_reduce(b, o, shares);
	return BOOK_OK;
}

static int apply_delete(struct book *b, uint64_t ref)
{
	uint32_t o = htab_find(b, &b->oh, H_ORDERS, ref);

	if (o == NIL)
		return BOOK_A_UNKNOWN_REF;
	order_remove(b, o);
	return BOOK_OK;
}

/* new_ref takes old_ref's side and symbol with the new shares and price;
 * same price and no more shares: the same place in the queue. */
static int apply_replace(struct book *b, const struct itch_msg *m)
{
	uint64_t old_ref = m->u.replace.old_ref, new_ref = m->u.replace.new_ref;
	uint32_t shares = m->u.replace.shares, price = m->u.replace.price;
	uint32_t o = htab_find(b, &b->oh, H_ORDERS, old_ref);
	struct order *r;

	if (o == NIL)
		return BOOK_A_UNKNOWN_REF;
	if (new_ref != old_ref && htab_find(b, &b->oh, H_ORDERS, new_ref) != NIL)
		return BOOK_A_DUPLICATE_REF;
	if (shares == 0)
		return BOOK_A_BAD_FIELD;
	r = &b->orders[o];
	htab_remove(b, &b->oh, H_ORDERS, old_ref);
	r->ref = new_ref;
	htab_insert(b, &b->oh, H_ORDERS, o);
	if (price == r->price && shares <= r->shares) {
		b->levels[r->level].shares -= r->shares - shares;
		r->shares = shares;
		return BOOK_OK;
	}
	queue_remove(b, o);
	r->shares = shares;
	r->price = price;
	queue_append(b, o);
	return BOOK_OK;
}

static int apply_trade(struct book *b, const struct itch_msg *m)
{
	int a = BOOK_OK;
	uint16_t s = sym_of(b, m->locate, m->u.trade.stock, &a);

	if (s == NIL16)
		return a;
	b->syms[s].volume += m->u.trade.shares;
	b->syms[s].trades++;
	b->st.executed_shares += m->u.trade.shares;
	return BOOK_OK;
}

static int apply_trading_action(struct book *b, const struct itch_msg *m)
{
	int a = BOOK_OK;
	uint16_t s = sym_of(b, m->locate, m->u.trading_action.stock, &a);
	struct sym *y;

	if (s == NIL16)
		return a;
	y = &b->syms[s];
	y->state = m->u.trading_action.state;
	memcpy(y->reason, m->u.trading_action.reason, sizeof(y->reason));
	y->reason[sizeof(y->reason) - 1] = 0;
	return BOOK_OK;
}

int book_apply(struct book *b, const struct itch_msg *m)
{
	int a;

	b->st.messages++;
	switch (m->type) {
	case ITCH_SYSTEM_EVENT:
		b->st.system_events++;
		b->last_event = m->u.system_event.event_code;
		a = BOOK_OK;
		break;
	case ITCH_STOCK_DIRECTORY:
		b->st.directory++;
		a = apply_directory(b, m->locate, m->u.stock_directory.stock);
		break;
	case ITCH_TRADING_ACTION:
		b->st.trading_actions++;
		a = apply_trading_action(b, m);
		break;
	case ITCH_ADD_ORDER:
	case ITCH_ADD_ORDER_MPID:
		b->st.adds++;
		a = apply_add(b, m);
		break;
	case ITCH_ORDER_EXECUTED:
	case ITCH_ORDER_EXECUTED_PRICE:
		b->st.executions++;
		a = apply_executed(b, m->u.executed.ref, m->u.executed.shares);
		break;
	case ITCH_ORDER_CANCEL:
		b->st.cancels++;
		a = apply_cancel(b, m->u.cancel.ref, m->u.cancel.shares);
		break;
	case ITCH_ORDER_DELETE:
		b->st.deletes++;
		a = apply_delete(b, m->u.del.ref);
		break;
	case ITCH_ORDER_REPLACE:
		b->st.replaces++;
		a = apply_replace(b, m);
		break;
	case ITCH_TRADE:
		b->st.trades++;
		a = apply_trade(b, m);
		break;
	case ITCH_END_OF_SNAPSHOT:
		b->st.other++;
		a = BOOK_OK;
		break;
	default:
		b->st.other++;
		a = BOOK_A_UNKNOWN_TYPE;
		break;
	}
	if (a != BOOK_OK) {
		b->st.anomalies[a]++;
		b->st.anomalies_total++;
	}
	return a;
}

/* ---- queries ------------------------------------------------------------- */

void book_get_stats(const struct book *b, struct book_stats *out)
{
	*out = b->st;
}

char book_last_event(const struct book *b)
{
	return b->last_event;
}

int book_symbol(const struct book *b, const char *stock, struct book_symbol *out)
{
	const struct sym *y = sym_by_name(b, stock);

	if (!y)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	memcpy(out->stock, y->stock, sizeof(out->stock));
	out->locate = y->locate;
	out->state = y->state;
	memcpy(out->reason, y->reason, sizeof(out->reason));
	out->orders = y->orders;
	out->volume = y->volume;
	out->trades = y->trades;
	return 0;
}

static void level_out(const struct level *v, struct book_level *out)
{
	out->price = v->price;
	out->shares = v->shares;
	out->orders = v->orders;
}

int book_top(const struct book *b, const char *stock, struct book_top *out)
{
	const struct sym *y = sym_by_name(b, stock);

	if (!y)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	if (y->best[SIDE_BID] != NIL) {
		out->has_bid = 1;
		level_out(&b->levels[y->best[SIDE_BID]], &out->bid);
	}
	if (y->best[SIDE_ASK] != NIL) {
		out->has_ask = 1;
		level_out(&b->levels[y->best[SIDE_ASK]], &out->ask);
	}
	return 0;
}

int book_depth(const struct book *b, const char *stock, char side, struct book_level *out,
	       unsigned n)
{
	const struct sym *y = sym_by_name(b, stock);
	uint8_t s;
	unsigned k = 0;

	if (!y)
		return -ENOENT;
	if (side_of(side, &s) < 0)
		return -EINVAL;
	for (uint32_t l = y->best[s]; l != NIL && k < n; l = b->levels[l].worse)
		level_out(&b->levels[l], &out[k++]);
	return (int)k;
}

/* ---- the canonical dump -------------------------------------------------- */

void book_cursor_init(struct book_cursor *c)
{
	c->sym_pos = 0;
	c->side = -1;
	c->order = NIL;
}

static uint32_t first_order(const struct book *b, const struct sym *y, int side)
{
	uint32_t l = y->best[side];

	return l == NIL ? NIL : b->levels[l].head;
}

static uint32_t next_order(const struct book *b, uint32_t o)
{
	const struct order *r = &b->orders[o];
	uint32_t worse;

	if (r->next != NIL)
		return r->next;
	worse = b->levels[r->level].worse;
	return worse == NIL ? NIL : b->levels[worse].head;
}

static size_t line_len(int n)
{
	return n < 0 ? 0 : (size_t)n >= BOOK_LINE_MAX ? BOOK_LINE_MAX - 1 : (size_t)n;
}

size_t book_cursor_next(const struct book *b, struct book_cursor *c, char line[BOOK_LINE_MAX])
{
	while (c->sym_pos < b->st.symbols) {
		const struct sym *y = &b->syms[b->by_name[c->sym_pos]];

		if (c->side < 0) {
			c->side = SIDE_BID;
			c->order = first_order(b, y, SIDE_BID);
			return line_len(snprintf(line, BOOK_LINE_MAX, "%s state %c locate %u",
						 y->stock, y->state ? y->state : '-',
						 y->locate));
		}
		if (c->order != NIL) {
			const struct order *r = &b->orders[c->order];

			c->order = next_order(b, c->order);
			return line_len(snprintf(line, BOOK_LINE_MAX, "%s %c %u.%04u %u %llu",
						 y->stock, r->side == SIDE_BID ? 'B' : 'S',
						 r->price / 10000, r->price % 10000, r->shares,
						 (unsigned long long)r->ref));
		}
		if (c->side == SIDE_BID) {
			c->side = SIDE_ASK;
			c->order = first_order(b, y, SIDE_ASK);
			continue;
		}
		c->sym_pos++;
		c->side = -1;
	}
	line[0] = 0;
	return 0;
}

int book_compare(const struct book *a, const struct book *b, char *diff, size_t cap)
{
	struct book_cursor ca, cb;
	char la[BOOK_LINE_MAX], lb[BOOK_LINE_MAX];
	uint64_t n = 0;

	book_cursor_init(&ca);
	book_cursor_init(&cb);
	for (;;) {
		size_t na = book_cursor_next(a, &ca, la), nb = book_cursor_next(b, &cb, lb);

		n++;
		if (na == 0 && nb == 0)
			return 0;
		if (na != nb || memcmp(la, lb, na) != 0) {
			if (cap)
				snprintf(diff, cap, "line %llu: A %s / B %s", (unsigned long long)n,
					 na ? la : "(end)", nb ? lb : "(end)");
			return 1;
		}
	}
}
