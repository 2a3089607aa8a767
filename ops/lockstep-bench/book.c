/* lockstep-bench: --book-out, the book the run's OUCH answers imply: every
 * order an Accepted or a Replaced put on the book live, less what its
 * Executed and Canceled took off since (the sessions keep that per token:
 * session.c), written one line per displayed order, for a test to set
 * beside the book an ITCH subscriber built. The flood session's orders
 * (IOC: none should rest) are kept here, in a table of their own. And what
 * the book still waits for once every order is answered: the end of an IOC
 * order and the resting side of an execution come after its Accepted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct book_shares book_shares;

/* ---- the flood's resting orders: open addressing, keyed by token index + 1 --- */

struct flood_ent {
	uint32_t key; /* the token's index + 1; 0: an empty slot */
	uint32_t open; /* open shares, > 0 */
	struct book_tok b;
};

static struct flood_ent *ft;
static uint32_t ft_cap, ft_n; /* ft_cap: 0 or a power of two, ft_n <= ft_cap / 2 */

static uint32_t ft_home(uint32_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (ft_cap - 1);
}

/* The slot of key, or UINT32_MAX. */
static uint32_t ft_find(uint32_t key)
{
	for (uint32_t h = ft_cap ? ft_home(key) : 0; ft_cap && ft[h].key; h = (h + 1) & (ft_cap - 1))
		if (ft[h].key == key)
			return h;
	return UINT32_MAX;
}

/* Room for one more entry: 0, or -ENOMEM (the table is left as it was). */
static int ft_grow(void)
{
	struct flood_ent *old = ft;
	uint32_t old_cap = ft_cap, cap = ft_cap ? ft_cap * 2 : 64;

	if ((ft_n + 1) * 2 <= ft_cap)
		return 0;
	if (!(ft = calloc(cap, sizeof(*ft)))) {
		ft = old;
		return -ENOMEM;
	}
	ft_cap = cap;
	for (uint32_t i = 0; i < old_cap; i++) {
		uint32_t h;

		if (!old[i].key)
			continue;
		for (h = ft_home(old[i].key); ft[h].key; h = (h + 1) & (ft_cap - 1))
			;
		ft[h] = old[i];
	}
	free(old);
	return 0;
}

/* Empties slot h, moving back the entries of its run that may not stay
 * past the hole (backward shift: no tombstones). */
static void ft_delete(uint32_t h)
{
	uint32_t mask = ft_cap - 1;

	for (uint32_t j = (h + 1) & mask; ft[j].key; j = (j + 1) & mask) {
		/* the entry at j may move to h when its home is not in (h, j] */
		if (((j - ft_home(ft[j].key)) & mask) >= ((j - h) & mask)) {
			ft[h] = ft[j];
			h = j;
		}
	}
	ft[h].key = 0;
	ft_n--;
}

/* Orders the table could not take, missing from the book: said once, and
 * the run fails (book_waiting's lost). */
static uint64_t ft_lost;

void book_flood_accepted(uint32_t index, const struct ouch_accepted *a)
{
	uint32_t key = index + 1, h;
	struct flood_ent *f;

	if (a->state != OUCH_STATE_LIVE || a->shares == 0)
		return;
	if ((h = ft_find(key)) == UINT32_MAX) {
		if (ft_grow() < 0) {
			if (!ft_lost++)
				fprintf(stderr, PROG ": --book-out: out of memory for the flood's orders\n");
			return;
		}
		for (h = ft_home(key); ft[h].key; h = (h + 1) & (ft_cap - 1))
			;
		ft_n++;
	}
	f = &ft[h];
	f->key = key;
	f->open = a->shares;
	f->b.ref = a->order_ref;
	f->b.price = a->price;
	memcpy(f->b.stock, a->stock, sizeof(f->b.stock));
	f->b.side = a->side;
	f->b.display = a->display;
	f->b.booked = 1;
	f->b.ioc = a->tif == OUCH_TIF_IOC;
}

void book_flood_reduce(uint32_t index, uint32_t shares, int gone)
{
	uint32_t h = ft_find(index + 1);

	if (h == UINT32_MAX)
		return;
	ft[h].open = ft[h].open > shares ? ft[h].open - shares : 0;
	if (gone || ft[h].open == 0)
		ft_delete(h);
}

/* ---- waiting, and writing ------------------------------------------------------- */

int book_waiting(struct bsession *ss, unsigned n, struct book_wait *w)
{
	struct book_wait x = { 0 };
	uint64_t answered = flood.accepted + flood.throttled + flood.rejected;

	for (unsigned i = 0; i < n; i++)
		x.ioc_open += session_book_ioc_open(&ss[i]);
	for (uint32_t h = 0; h < ft_cap; h++)
		x.ioc_open += ft[h].key && ft[h].b.ioc;
	if (book_shares.removed > book_shares.added)
		x.one_sided = book_shares.removed - book_shares.added;
	if (flood.sent > answered)
		x.flood_unanswered = flood.sent - answered;
	x.lost = ft_lost;
	if (w)
		*w = x;
	return x.ioc_open || x.one_sided || x.flood_unanswered;
}

/* One line of the file. */
struct book_line {
	uint64_t ref;
	uint32_t price, shares;
	char stock[OUCH_STOCK_LEN];
	char side; /* 'B' or 'S' */
};

struct book_lines {
	struct book_line *v;
	size_t n, cap;
	int nomem;
};

static void collect(void *ctx, const struct book_tok *b, uint32_t open)
{
	struct book_lines *l = ctx;
	struct book_line *e;

	if (b->display == OUCH_DISPLAY_NONDISPLAYED || l->nomem)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		struct book_line *v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			l->nomem = 1;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n++];
	e->ref = b->ref;
	e->price = b->price;
	e->shares = open;
	memcpy(e->stock, b->stock, sizeof(e->stock));
	e->side = b->side == OUCH_BUY ? 'B' : 'S'; /* S, T and E: ITCH has one sell side */
}

/* By symbol (bytes, NUL-padded: as LC_ALL=C orders the trimmed text), side,
 * price and reference. */
static int line_cmp(const void *pa, const void *pb)
{
	const struct book_line *a = pa, *b = pb;
	int c = memcmp(a->stock, b->stock, sizeof(a->stock));

	if (c)
		return c;
	if (a->side != b->side)
		return a->side < b->side ? -1 : 1;
	if (a->price != b->price)
		return a->price < b->price ? -1 : 1;
	return a->ref < b->ref ? -1 : a->ref > b->ref;
}

long book_write(struct bsession *ss, unsigned n)
{
	struct book_lines l = { 0 };
	FILE *f;
	int bad;

	for (unsigned i = 0; i < n; i++)
		session_book_each(&ss[i], collect, &l);
	for (uint32_t h = 0; h < ft_cap; h++)
		if (ft[h].key)
			collect(&l, &ft[h].b, ft[h].open);
	if (l.nomem) {
		fprintf(stderr, PROG ": --book-out: out of memory for %zu lines\n", l.n);
		free(l.v);
		return -1;
	}
	qsort(l.v, l.n, sizeof(*l.v), line_cmp);
	if (!(f = fopen(opt.book_out, "w"))) {
		fprintf(stderr, PROG ": --book-out %s: %s\n", opt.book_out, strerror(errno));
		free(l.v);
		return -1;
	}
	for (size_t i = 0; i < l.n; i++)
		fprintf(f, "%.*s %c %u %u %llu\n", (int)strnlen(l.v[i].stock, sizeof(l.v[i].stock)),
			l.v[i].stock, l.v[i].side, l.v[i].price, l.v[i].shares,
			(unsigned long long)l.v[i].ref);
	bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		fprintf(stderr, PROG ": --book-out %s: write failed\n", opt.book_out);
		free(l.v);
		return -1;
	}
	free(l.v);
	return (long)l.n;
}

void book_fini(void)
{
	free(ft);
	ft = NULL;
	ft_cap = ft_n = 0;
}
