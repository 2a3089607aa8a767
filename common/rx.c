/* Loss recovery for one MoldUDP64 stream, and the loss generator. See rx.h.
 *
 * Held blocks live in a byte ring, appended in arrival order as records of a
 * 16-byte header and the block (padded to 8 bytes); a record is marked free
 * when its block is delivered and the space is taken back from the oldest
 * record on. An index of `window` slots (sequence number modulo window) finds
 * a held block by its number. The missing ranges are a sorted array of
 * disjoint gaps, each with its own request schedule; when the array is full a
 * new range is merged into its neighbour, so a gap may then also cover held
 * blocks (a request skips them at its ends). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prealloc.h"
#include "rx.h"

#define REC_HDR 16
#define REC_FREE 0
#define REC_LIVE 1
#define REC_WRAP 2
#define RX_MAX_WINDOW (1u << 24)

struct rx_rec {
	uint64_t seq;
	uint16_t len;
	uint8_t state;
	uint8_t pad[5];
};

struct rx_slot {
	uint64_t seq;
	uint32_t off;
	uint16_t len;
	uint8_t used;
};

struct rx_gap {
	uint64_t lo, hi; /* [lo, hi) */
	uint64_t due; /* when to ask next */
	uint64_t backoff; /* the wait after the next request */
	uint32_t attempts; /* requests sent for it */
	int deferred; /* due, but past the window: asked for once the window moves */
};

struct rx {
	struct rx_config cfg;
	struct rx_ops ops;
	void *ctx;
	uint64_t mask; /* window - 1 */
	struct rx_slot *slot;
	uint8_t *ring;
	size_t cap, head, tail, used;
	uint64_t next, high, floor;
	int hold;
	struct rx_gap gap[RX_MAX_GAPS];
	unsigned n_gaps;
	unsigned n_deferred;
	uint64_t srv_oldest[RX_MAX_SERVERS];
	unsigned rr, rr_near; /* the next server in turn: of all, of the near ones */
	struct rx_stats st;
};

/* ---- PRNG --------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void rx_rng_seed(struct rx_rng *r, uint64_t seed)
{
	r->s = seed;
}

uint64_t rx_rng_next(struct rx_rng *r)
{
	return mix64(r->s += 0x9E3779B97F4A7C15ull);
}

uint64_t rx_rng_upto(struct rx_rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	if (n == UINT64_MAX)
		return rx_rng_next(r);
	return rx_rng_next(r) % (n + 1);
}

static uint64_t fnv1a(const uint8_t *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001B3ull;
	return h;
}

uint64_t rx_seed_of(const char *name, uint64_t salt)
{
	uint64_t h = fnv1a((const uint8_t *)name, name ? strlen(name) : 0, 0xCBF29CE484222325ull);

	return mix64(h ^ mix64(salt));
}

/* ---- the ring of held blocks ------------------------------------------- */

static size_t rec_size(uint16_t len)
{
	return REC_HDR + (((size_t)len + 7) & ~(size_t)7);
}

static struct rx_rec *rec_at(struct rx *rx, size_t off)
{
	return (struct rx_rec *)(void *)(rx->ring + off);
}

/* Offset of `need` free bytes, or -1 when the ring cannot take them. */
static long ring_alloc(struct rx *rx, size_t need)
{
	size_t off;

	if (rx->used == 0)
		rx->head = rx->tail = 0;
	else if (rx->tail == rx->head)
		return -1; /* full */
	if (need > rx->cap)
		return -1;
	if (rx->tail >= rx->head) {
		if (rx->cap - rx->tail >= need) {
			off = rx->tail;
			rx->tail += need;
			rx->used += need;
			if (rx->tail == rx->cap)
				rx->tail = 0;
			return (long)off;
		}
		if (rx->head < need)
			return -1;
		/* wrap: the end of the buffer is wasted until the head passes */
		if (rx->cap - rx->tail >= REC_HDR)
			rec_at(rx, rx->tail)->state = REC_WRAP;
		rx->used += rx->cap - rx->tail + need;
		rx->tail = need;
		return 0;
	}
	if (rx->head - rx->tail < need)
		return -1;
	off = rx->tail;
	rx->tail += need;
	rx->used += need;
	return (long)off;
}

static void ring_reclaim(struct rx *rx)
{
	while (rx->used > 0) {
		size_t left = rx->cap - rx->head;
		struct rx_rec *r;

		if (left < REC_HDR || (r = rec_at(rx, rx->head))->state == REC_WRAP) {
			rx->used -= left;
			rx->head = 0;
			continue;
		}
		if (r->state == REC_LIVE)
			break;
		rx->head += rec_size(r->len);
		rx->used -= rec_size(r->len);
		if (rx->head == rx->cap)
			rx->head = 0;
	}
	if (rx->used == 0)
		rx->head = rx->tail = 0;
}

static struct rx_slot *held(struct rx *rx, uint64_t seq)
{
	struct rx_slot *s = &rx->slot[seq & rx->mask];

	return s->used && s->seq == seq ? s : NULL;
}

static int store(struct rx *rx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	long off = ring_alloc(rx, rec_size(len));
	struct rx_slot *s = &rx->slot[seq & rx->mask];
	struct rx_rec *r;

	if (off < 0)
		return -1;
	r = rec_at(rx, (size_t)off);
	memset(r, 0, sizeof(*r));
	r->seq = seq;
	r->len = len;
	r->state = REC_LIVE;
	if (len)
		memcpy(rx->ring + off + REC_HDR, data, len);
	s->seq = seq;
	s->off = (uint32_t)off;
	s->len = len;
	s->used = 1;
	rx->st.held++;
	return 0;
}

static void release(struct rx *rx, struct rx_slot *s)
{
	rec_at(rx, s->off)->state = REC_FREE;
	s->used = 0;
	ring_reclaim(rx);
}

/* ---- missing ranges ---------------------------------------------------- */

static void gap_init(struct rx *rx, struct rx_gap *g, uint64_t lo, uint64_t hi, uint64_t now)
{
	g->lo = lo;
	g->hi = hi;
	g->due = now + rx->cfg.hold_ns +
		 (rx->cfg.delay_ns ? rx_rng_upto(rx->cfg.rng, rx->cfg.delay_ns) : 0);
	g->backoff = rx->cfg.retry_ns;
	g->attempts = 0;
	g->deferred = 0;
	rx->st.gaps++;
}

static void gap_remove(struct rx *rx, unsigned i)
{
	rx->n_deferred -= rx->gap[i].deferred;
	memmove(&rx->gap[i], &rx->gap[i + 1], (rx->n_gaps - i - 1) * sizeof(rx->gap[0]));
	rx->n_gaps--;
}

/* [lo, hi) is missing and lies at or past the end of every gap. */
static void gap_append(struct rx *rx, uint64_t lo, uint64_t hi, uint64_t now)
{
	struct rx_gap *last = rx->n_gaps ? &rx->gap[rx->n_gaps - 1] : NULL;

	if (last && ((last->hi == lo && last->attempts == 0) || rx->n_gaps == RX_MAX_GAPS)) {
		last->hi = hi; /* one range; or, when full, one gap over some held blocks */
		return;
	}
	gap_init(rx, &rx->gap[rx->n_gaps++], lo, hi, now);
}

/* The next expected number became missing again (a rejected or unstorable
 * block). */
static void gap_prepend(struct rx *rx, uint64_t seq, uint64_t now)
{
	struct rx_gap *first = rx->n_gaps ? &rx->gap[0] : NULL;

	if (first && first->lo <= seq)
		return; /* already missing */
	if (first && ((first->lo == seq + 1 && first->attempts == 0) || rx->n_gaps == RX_MAX_GAPS)) {
		first->lo = seq;
		return;
	}
	memmove(&rx->gap[1], &rx->gap[0], rx->n_gaps * sizeof(rx->gap[0]));
	rx->n_gaps++;
	gap_init(rx, &rx->gap[0], seq, seq + 1, now);
}

/* An answer (or a late copy) keeps coming: ask for what is left of this
 * range once it stops. */
static void gap_progress(struct rx *rx, struct rx_gap *g, uint64_t now)
{
	if (g->attempts == 0)
		return;
	g->due = now + rx->cfg.settle_ns;
	g->backoff = rx->cfg.retry_ns;
}

/* seq, missing until now, arrived (held or delivered). */
static void gap_fill(struct rx *rx, uint64_t seq, uint64_t now)
{
	unsigned i;
	struct rx_gap *g;

	for (i = 0; i < rx->n_gaps && rx->gap[i].hi <= seq; i++)
		;
	if (i == rx->n_gaps || rx->gap[i].lo > seq)
		return;
	g = &rx->gap[i];
	if (g->lo == seq) {
		g->lo++;
		if (g->lo == g->hi) {
			gap_remove(rx, i);
			return;
		}
	} else if (g->hi == seq + 1) {
		g->hi--;
	} else if (rx->n_gaps < RX_MAX_GAPS) {
		memmove(&rx->gap[i + 1], &rx->gap[i], (rx->n_gaps - i) * sizeof(rx->gap[0]));
		rx->n_gaps++;
		rx->gap[i].hi = seq;
		rx->gap[i + 1].lo = seq + 1;
		rx->n_deferred += rx->gap[i].deferred;
		gap_progress(rx, &rx->gap[i + 1], now);
	}
	gap_progress(rx, g, now);
}

/* Drops the gaps (or their parts) below next; a gap that waited for the
 * window to move is due now if it has. */
static void gaps_trim(struct rx *rx, uint64_t now)
{
	while (rx->n_gaps && rx->gap[0].hi <= rx->next)
		gap_remove(rx, 0);
	if (rx->n_gaps && rx->gap[0].lo < rx->next)
		rx->gap[0].lo = rx->next;
	for (unsigned i = 0; rx->n_deferred && i < rx->n_gaps; i++) {
		struct rx_gap *g = &rx->gap[i];

		if (g->deferred && g->lo < rx->next + rx->mask + 1) {
			g->deferred = 0;
			rx->n_deferred--;
			if (g->due > now)
				g->due = now;
		}
	}
}

/* ---- delivery ----------------------------------------------------------- */

/* Delivers held blocks from next on (and skips holes below floor). */
static void drain(struct rx *rx, uint64_t now)
{
	while (!rx->hold) {
		struct rx_slot *s = held(rx, rx->next);
		int v;

		if (!s) {
			if (rx->next >= rx->floor)
				break;
			if (rx->used == 0) { /* nothing held: jump the whole hole */
				rx->st.lost += rx->floor - rx->next;
				rx->next = rx->floor;
				break;
			}
			rx->st.lost++;
			rx->next++;
			continue;
		}
		v = rx->ops.deliver(rx->ctx, rx->next, rx->ring + s->off + REC_HDR, s->len);
		if (v == RX_HOLD) {
			rx->hold = 1;
			break;
		}
		release(rx, s);
		if (v == RX_REJECT) {
			rx->st.rejected++;
			if (rx->next < rx->floor) {
				rx->st.lost++;
				rx->next++;
				continue;
			}
			gap_prepend(rx, rx->next, now);
			break;
		}
		rx->st.delivered++;
		rx->next++;
	}
	gaps_trim(rx, now);
}

static void start_at(struct rx *rx, uint64_t seq)
{
	rx->next = seq;
	if (rx->high < seq)
		rx->high = seq;
}

void rx_block(struct rx *rx, uint64_t seq, const uint8_t *data, uint16_t len, uint64_t now)
{
	int tail = 0, v;

	rx->st.blocks++;
	if (rx->next == 0)
		start_at(rx, seq);
	if (seq < rx->next) {
		rx->st.duplicates++;
		return;
	}
	if (seq >= rx->high) {
		if (seq > rx->high)
			gap_append(rx, rx->high, seq, now);
		rx->high = seq + 1;
		tail = 1;
	} else if (held(rx, seq)) {
		rx->st.duplicates++;
		return;
	}
	if (seq == rx->next && !rx->hold) {
		v = rx->ops.deliver(rx->ctx, seq, data, len);
		if (v == RX_TAKEN) {
			rx->st.delivered++;
			if (!tail)
				gap_fill(rx, seq, now);
			rx->next++;
			drain(rx, now);
			return;
		}
		if (v == RX_REJECT) {
			rx->st.rejected++;
			if (tail)
				gap_append(rx, seq, seq + 1, now);
			return; /* otherwise it is still inside its gap */
		}
		rx->hold = 1;
	}
	if (seq - rx->next >= rx->mask + 1 || store(rx, seq, data, len) < 0) {
		rx->st.overflow++;
		if (tail)
			gap_append(rx, seq, seq + 1, now);
		return;
	}
	if (!tail)
		gap_fill(rx, seq, now);
}

int rx_believable(const struct rx *rx, uint64_t seq, uint64_t count)
{
	uint64_t known = rx->high > rx->next ? rx->high : rx->next;

	if (seq >= RX_SEQ_LIMIT || count >= RX_SEQ_LIMIT - seq)
		return 0;
	return rx->next == 0 || seq + count <= known + RX_MAX_JUMP;
}

void rx_packet(struct rx *rx, const struct mold_packet *p, uint64_t now)
{
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;

	if (!rx_believable(rx, p->seq, p->kind == MOLD_DATA ? p->count : 0)) {
		rx->st.unbelievable++;
		return;
	}
	if (p->kind != MOLD_DATA) {
		rx_tail(rx, p->seq, now);
		return;
	}
	mold_iter_init(&it, p);
	while (mold_iter_next(&it, &seq, &data, &len))
		rx_block(rx, seq, data, len, now);
}

void rx_tail(struct rx *rx, uint64_t next_seq, uint64_t now)
{
	if (next_seq == 0)
		return;
	if (rx->next == 0) {
		start_at(rx, next_seq);
		return;
	}
	if (next_seq > rx->high) {
		gap_append(rx, rx->high, next_seq, now);
		rx->high = next_seq;
	}
}

void rx_resume(struct rx *rx, uint64_t now)
{
	if (!rx->hold)
		return;
	rx->hold = 0;
	drain(rx, now);
}

void rx_skip(struct rx *rx, uint64_t upto, uint64_t now)
{
	if (upto <= rx->next)
		return;
	if (upto > rx->high)
		rx->high = upto;
	if (upto > rx->floor)
		rx->floor = upto;
	drain(rx, now);
}

/* ---- requests ----------------------------------------------------------- */

/* The server for a request at lo, the range's attempt-th: in turn among
 * those that have not said they are past lo; the first RX_NEAR_TRIES
 * attempts only among the near ones (servers [0, n_near)), when some
 * are. */
static unsigned pick_server(struct rx *rx, uint64_t lo, unsigned attempt)
{
	unsigned n = rx->cfg.n_servers, s;

	if (rx->cfg.n_near && attempt < RX_NEAR_TRIES) {
		for (unsigned k = 0; k < rx->cfg.n_near; k++) {
			s = (rx->rr_near + k) % rx->cfg.n_near;
			if (rx->srv_oldest[s] <= lo) {
				rx->rr_near = s + 1;
				return s;
			}
		}
	}
	for (unsigned k = 0; k < n; k++) {
		s = (rx->rr + k) % n;
		if (rx->srv_oldest[s] <= lo) {
			rx->rr = s + 1;
			return s;
		}
	}
	s = rx->rr % n; /* nobody holds it: ask anyway, the answer says so again */
	rx->rr = s + 1;
	return s;
}

void rx_heard(struct rx *rx, uint64_t seq, uint64_t count, uint64_t now)
{
	if (count == 0 || !rx_believable(rx, seq, count))
		return;
	for (unsigned i = 0; i < rx->n_gaps; i++) {
		struct rx_gap *g = &rx->gap[i];
		uint64_t due = now + g->backoff;

		if (g->lo < seq + count && seq < g->hi && g->due < due) {
			g->due = due;
			rx->st.suppressed++;
		}
	}
}

void rx_too_old(struct rx *rx, unsigned server, uint64_t oldest, uint64_t now)
{
	uint64_t least = UINT64_MAX, first, upto;

	if (!rx_believable(rx, oldest, 0)) {
		rx->st.unbelievable++;
		return;
	}
	rx->st.too_old++;
	if (server < rx->cfg.n_servers && oldest > rx->srv_oldest[server])
		rx->srv_oldest[server] = oldest;
	if (rx->n_gaps == 0 || rx->cfg.n_servers == 0)
		return;
	for (unsigned s = 0; s < rx->cfg.n_servers; s++)
		if (rx->srv_oldest[s] < least)
			least = rx->srv_oldest[s];
	first = rx->gap[0].lo;
	if (least > first) {
		upto = least < rx->high ? least : rx->high;
		if (rx->ops.lost && rx->ops.lost(rx->ctx, first, upto))
			rx_skip(rx, upto, now);
	}
	/* what another server still holds is asked for from it at once */
	for (unsigned i = 0; i < rx->n_gaps; i++) {
		struct rx_gap *g = &rx->gap[i];

		if (g->attempts && g->lo >= least && server < rx->cfg.n_servers &&
		    g->lo < rx->srv_oldest[server] && g->due > now)
			g->due = now;
	}
}

/* Asks for (part of) gap i; returns 0, or -1 when the gap turned out to be
 * all held and was removed. */
static int gap_request(struct rx *rx, unsigned i, uint64_t now)
{
	struct rx_gap *g = &rx->gap[i];
	uint64_t limit = rx->next + rx->mask + 1, lo = g->lo < rx->next ? rx->next : g->lo, hi;
	unsigned server;

	while (lo < g->hi && lo < limit && held(rx, lo))
		lo++;
	if (lo >= g->hi) {
		gap_remove(rx, i);
		return -1;
	}
	if (lo >= limit) { /* past the window: wait for it to move */
		g->due = now + rx->cfg.retry_max_ns;
		if (!g->deferred) {
			g->deferred = 1;
			rx->n_deferred++;
		}
		return 0;
	}
	hi = g->hi < limit ? g->hi : limit;
	if (hi - lo > rx->cfg.max_count)
		hi = lo + rx->cfg.max_count;
	while (hi - 1 > lo && held(rx, hi - 1))
		hi--;
	server = pick_server(rx, lo, g->attempts);
	rx->ops.request(rx->ctx, server, lo, (uint16_t)(hi - lo));
	rx->st.requests++;
	rx->st.requested += hi - lo;
	g->attempts++;
	g->due = now + g->backoff;
	g->backoff = g->backoff * 2 < rx->cfg.retry_max_ns ? g->backoff * 2 : rx->cfg.retry_max_ns;
	return 0;
}

void rx_tick(struct rx *rx, uint64_t now)
{
	if (rx->cfg.n_servers == 0)
		return;
	for (unsigned i = 0; i < rx->n_gaps; i++)
		if (rx->gap[i].due <= now && gap_request(rx, i, now) < 0)
			i--;
}

uint64_t rx_due(const struct rx *rx)
{
	uint64_t due = RX_NEVER;

	if (rx->cfg.n_servers == 0)
		return RX_NEVER;
	for (unsigned i = 0; i < rx->n_gaps; i++)
		if (rx->gap[i].due < due)
			due = rx->gap[i].due;
	return due;
}

/* ---- life cycle and queries -------------------------------------------- */

int rx_create(struct rx **out, const struct rx_config *cfg, const struct rx_ops *ops, void *ctx)
{
	struct rx *rx;
	uint64_t window = 2;

	if (!cfg || !ops || !ops->deliver || cfg->window < 2 || cfg->window > RX_MAX_WINDOW ||
	    cfg->ring_bytes < 64 || cfg->ring_bytes > UINT32_MAX || cfg->max_count == 0 ||
	    cfg->max_count > MOLD_MAX_COUNT || cfg->retry_ns == 0 ||
	    cfg->retry_max_ns < cfg->retry_ns || cfg->n_servers > RX_MAX_SERVERS ||
	    cfg->hold_ns > RX_MAX_HOLD_NS || cfg->n_near > cfg->n_servers ||
	    (cfg->n_servers && !ops->request) || (cfg->delay_ns && !cfg->rng))
		return -EINVAL;
	while (window < cfg->window)
		window *= 2;
	rx = calloc(1, sizeof(*rx));
	if (!rx)
		return -ENOMEM;
	rx->cfg = *cfg;
	rx->ops = *ops;
	rx->ctx = ctx;
	rx->mask = window - 1;
	rx->cap = cfg->ring_bytes & ~(size_t)7;
	rx->slot = prealloc_zeroed(window, sizeof(*rx->slot));
	rx->ring = prealloc_zeroed(1, rx->cap);
	if (!rx->slot || !rx->ring) {
		rx_destroy(rx);
		return -ENOMEM;
	}
	*out = rx;
	return 0;
}

void rx_destroy(struct rx *rx)
{
	if (!rx)
		return;
	free(rx->slot);
	free(rx->ring);
	free(rx);
}

void rx_start(struct rx *rx, uint64_t next)
{
	memset(rx->slot, 0, (rx->mask + 1) * sizeof(*rx->slot));
	rx->head = rx->tail = rx->used = 0;
	rx->n_gaps = 0;
	rx->n_deferred = 0;
	rx->hold = 0;
	rx->floor = 0;
	rx->next = rx->high = next;
}

uint64_t rx_next(const struct rx *rx)
{
	return rx->next;
}

uint64_t rx_high(const struct rx *rx)
{
	return rx->high;
}

uint64_t rx_missing(const struct rx *rx)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < rx->n_gaps; i++)
		n += rx->gap[i].hi - rx->gap[i].lo;
	return n;
}

unsigned rx_gap_count(const struct rx *rx)
{
	return rx->n_gaps;
}

int rx_holding(const struct rx *rx)
{
	return rx->hold;
}

uint64_t rx_fresh(const struct rx *rx)
{
	return rx->st.blocks - rx->st.duplicates;
}

void rx_get_stats(const struct rx *rx, struct rx_stats *out)
{
	*out = rx->st;
}

/* ---- the loss generator ------------------------------------------------- */

void rx_drop_init(struct rx_drop *d, double rate, uint64_t seed)
{
	memset(d, 0, sizeof(*d));
	d->seed = mix64(seed ^ 0x5DEECE66Dull);
	if (!(rate > 0))
		return; /* 0, negative or NaN: off */
	if (rate >= 1 || rate * 18446744073709551616.0 >= 18446744073709551615.0) {
		d->all = 1;
		return;
	}
	d->threshold = (uint64_t)(rate * 18446744073709551616.0);
	if (d->threshold == 0)
		d->threshold = 1;
}

int rx_drop_slow(struct rx_drop *d, const uint8_t *pkt, size_t len)
{
	uint64_t h = mix64(fnv1a(pkt, len < MOLD_HEADER_LEN ? len : MOLD_HEADER_LEN,
				 0xCBF29CE484222325ull));
	unsigned set = (unsigned)(h & (RX_DROP_SLOTS / RX_DROP_WAYS - 1)) * RX_DROP_WAYS, i, old;
	uint64_t k;

	for (i = set, old = set; i < set + RX_DROP_WAYS; i++) {
		if (d->slot[i].key == h && d->slot[i].count)
			break;
		if (d->slot[i].last < d->slot[old].last)
			old = i;
	}
	d->seen++;
	if (i < set + RX_DROP_WAYS) {
		k = d->slot[i].count++;
	} else {
		i = old; /* the least recently seen of the set makes room */
		d->slot[i].key = h;
		d->slot[i].count = 1;
		k = 0;
	}
	d->slot[i].last = d->seen;
	if (d->all || mix64(h ^ d->seed ^ ((k + 1) * 0x9E3779B97F4A7C15ull)) < d->threshold) {
		d->dropped++;
		d->dropped_data += len > MOLD_HEADER_LEN;
		return 1;
	}
	return 0;
}
