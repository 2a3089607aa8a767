/* raft: unit cases of the state machine, then a deterministic simulation of
 * a group of 1, 3 or 5 nodes on a simulated network and clock: seeded random
 * schedules of message loss, duplication, reordering and delay, crashes and
 * restarts, one- and two-way partitions, and clients that submit commands to
 * whoever is primary. Raft's safety properties are checked after every step,
 * and at the end, after healing, that the group makes progress within a
 * bounded simulated time. Deliberate bugs (RAFT_BUG_*) show that the checks
 * fail when they should. The failover time (primary crash to the first entry
 * of the new term committed) is measured for 150-300 ms election timeouts and
 * a 1 ms network.
 *
 * What is modelled of the disk: the term and vote are durable before any
 * message of the step that saved them is delivered. Journal records, in half
 * the schedules, too (a sync per batch); in the other half they reach the
 * disk by a background sync that takes up to sync_delay, raft learns it
 * through durable_seq and raft_durable (fsync = disk), and a crash is a
 * power cut: the node loses every record not yet synced. Either way a crash
 * loses the volatile state (the raft instance, the commit and apply
 * positions). The checker counts a committed entry as held by a node only
 * once it is on that node's disk.
 *
 * Environment: RAFT_SIM_SEEDS=N runs N chaos schedules (and N/4 hostile
 * ones) from seed RAFT_SIM_FIRST (default 1); RAFT_SIM_SEED=S replays one
 * (RAFT_SIM_BUGS=MASK with the RAFT_BUG_* bits and 0x10000 for the hostile
 * shape, RAFT_SIM_TRACE=1 to print its every step); RAFT_SIM_FAILOVERS=N
 * measures N failovers per group size. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft.h"
#include "testutil.h"

#define US 1000ull
#define MS 1000000ull
#define MAXN 5
#define TS_FLAG (1ull << 63) /* entry ids of term-start entries */
#define DEFAULT_SEEDS 5000
#define MAX_STEPS 4000000

/* The simulation's own assertions: Check's record every passing check
 * through a file, too slow for millions of steps. */
#define need(x)                                                                                    \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #x);                    \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* ---- a PRNG ---- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double unif(uint64_t *s)
{
	return (double)(splitmix(s) >> 11) * 0x1.0p-53;
}

static uint64_t between(uint64_t *s, uint64_t lo, uint64_t hi) /* inclusive */
{
	return lo + splitmix(s) % (hi - lo + 1);
}

/* a random interval of mean `mean` (uniform in [1, 2 mean]) */
static uint64_t around(uint64_t *s, uint64_t mean)
{
	return between(s, 1, 2 * mean);
}

static uint64_t mix(uint64_t h, uint64_t a, uint64_t b)
{
	uint64_t s = h ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);

	return splitmix(&s);
}

/* ---- the simulation ---- */

struct sim_ent {
	uint64_t term, id, hash; /* hash: of the log prefix up to this entry */
};

struct sim;

struct node {
	struct sim *sim;
	int id;
	struct raft *r; /* NULL while down */
	struct sim_ent *log;
	uint64_t len, cap;
	uint64_t term; /* persisted */
	int voted_for; /* persisted */
	uint64_t applied; /* volatile: handed to apply() by this instance */
	uint64_t kept_applied; /* what the "sequencer" had applied at its crash */
	uint64_t down_until;
	uint64_t crash_at; /* a targeted crash (0: none) */
	uint64_t rng;
	uint64_t checked_commit; /* commit already compared with the global one */
	/* with sync_delay: the log up to durable is on disk; a sync of the log
	 * up to sync_target ends at sync_at (0: none in flight) */
	uint64_t durable, sync_target, sync_at;
};

struct msg {
	uint64_t at, serial;
	struct raft_msg m;
	struct sim_ent *ents;
};

struct params {
	int n;
	uint64_t hb, emin, emax, req;
	uint32_t max_entries; /* per retransmission answer */
	int no_prevote, no_cq;
	unsigned bugs;
	double loss, dup;
	uint64_t delay, jitter;
	uint64_t crash_mean, down_max; /* 0: no crashes */
	uint64_t part_mean; /* 0: no partitions */
	/* targeted crashes: a new primary soon after its election, a voter
	 * soon after its vote (probabilities in per mille) */
	uint64_t crash_primary_pm, crash_voter_pm, crash_soon;
	uint64_t client_mean;
	uint64_t chaos; /* the faulty phase; then heal */
	uint64_t heal_limit; /* progress expected within this after healing (set by heal) */
	uint64_t failover_at; /* failover mode: crash the primary then, measure */
	uint64_t transfer_mean; /* hand-overs asked of a primary (0: none) */
	uint64_t sync_delay; /* a background sync takes up to this (0: records durable at once) */
};

struct committed {
	uint64_t term, id, hash;
};

struct lm_slot { /* (seq, term) -> prefix hash, for log matching */
	uint64_t seq, term, hash;
};

struct sim {
	uint64_t seed, rng, now, serial, steps;
	uint64_t stop_at; /* sim_run returns at the first event after this (0: never) */
	struct params p;
	struct node nodes[MAXN];
	int up[MAXN][MAXN]; /* link i -> j delivers */
	struct msg **heap;
	size_t n_heap, cap_heap;
	uint64_t crash_at, part_at, client_at, transfer_at;
	uint64_t xrng; /* the hand-overs' own PRNG: the other draws stay as they were */
	uint64_t next_id;
	int healed;
	uint64_t heal_time, first_heal_id, probe_seq;
	int done;
	/* the checker */
	int failed; /* 1: a safety property broke, 2: no progress (liveness) */
	char why[512];
	int trace;
	int *leader_of; /* per term; -1 none */
	uint64_t n_leader_of;
	struct committed *com; /* [seq - 1] */
	uint64_t n_com, cap_com;
	struct committed *app; /* what was applied at each seq, [seq - 1] */
	uint64_t n_app, cap_app;
	uint64_t dirty_from; /* lowest seq truncated this step (0: none) */
	struct lm_slot *lm;
	size_t lm_cap, lm_n;
	/* failover mode */
	uint64_t crashed_at, old_term, failover_ns;
	int crashed;
	/* counts */
	uint64_t msgs_sent, msgs_delivered, elections, max_term, transfers, handed_over;
};

static void vviolation(struct sim *s, int kind, const char *fmt, va_list ap)
{
	if (s->failed)
		return;
	s->failed = kind;
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	if (s->trace)
		printf("%10.3f ms VIOLATION %s\n", (double)s->now / MS, s->why);
}

static void violation(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vviolation(s, 1, fmt, ap);
	va_end(ap);
}

static void no_progress(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vviolation(s, 2, fmt, ap);
	va_end(ap);
}

static void trace(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->trace)
		return;
	printf("%10.3f ms ", (double)s->now / MS);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void *grow(void *p, uint64_t *cap, uint64_t need, size_t size)
{
	if (need <= *cap)
		return p;
	uint64_t c = *cap ? *cap : 64;

	while (c < need)
		c *= 2;
	p = realloc(p, c * size);
	need(p);
	memset((char *)p + *cap * size, 0, (c - *cap) * size);
	*cap = c;
	return p;
}

static int majority_of(const struct sim *s)
{
	return s->p.n / 2 + 1;
}

/* log matching: the first entry seen at (seq, term) fixes its prefix hash */
static void lm_check(struct sim *s, int node, uint64_t seq, uint64_t term, uint64_t hash)
{
	if (s->lm_n * 2 >= s->lm_cap) {
		size_t oc = s->lm_cap, nc = oc ? oc * 2 : 1024;
		struct lm_slot *old = s->lm, *t = calloc(nc, sizeof(*t));

		need(t);
		s->lm = t;
		s->lm_cap = nc;
		s->lm_n = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].seq)
				lm_check(s, -1, old[i].seq, old[i].term, old[i].hash);
		free(old);
	}
	size_t mask = s->lm_cap - 1, i = (size_t)mix(0, seq, term) & mask;

	for (;; i = (i + 1) & mask) {
		struct lm_slot *e = &s->lm[i];

		if (!e->seq) {
			e->seq = seq;
			e->term = term;
			e->hash = hash;
			s->lm_n++;
			return;
		}
		if (e->seq == seq && e->term == term) {
			if (e->hash != hash)
				violation(s,
					  "log matching: node %d has an entry at seq %" PRIu64
					  " term %" PRIu64
					  " whose log prefix differs from another's",
					  node, seq, term);
			return;
		}
	}
}

/* ---- storage callbacks ---- */

static uint64_t st_last_seq(void *ctx)
{
	return ((struct node *)ctx)->len;
}

static uint64_t st_term_at(void *ctx, uint64_t seq)
{
	struct node *n = ctx;

	return seq >= 1 && seq <= n->len ? n->log[seq - 1].term : 0;
}

static uint64_t st_durable_seq(void *ctx)
{
	struct node *n = ctx;

	return n->sim->p.sync_delay ? n->durable : n->len;
}

/* Entry seq is on node n's disk (what the checker counts as held). */
static int on_disk(const struct sim *s, const struct node *n, uint64_t seq)
{
	return n->len >= seq && (!s->p.sync_delay || n->durable >= seq);
}

static int push(struct node *n, uint64_t seq, uint64_t term, uint64_t id)
{
	struct sim *s = n->sim;
	uint64_t h;

	if (seq != n->len + 1) {
		violation(s, "node %d appended seq %" PRIu64 " after %" PRIu64, n->id, seq, n->len);
		return -22;
	}
	if (n->len && term < n->log[n->len - 1].term)
		violation(s, "node %d appended term %" PRIu64 " after term %" PRIu64, n->id, term,
			  n->log[n->len - 1].term);
	n->log = grow(n->log, &n->cap, seq, sizeof(*n->log));
	h = mix(n->len ? n->log[n->len - 1].hash : 0, term, id);
	n->log[n->len++] = (struct sim_ent){ term, id, h };
	lm_check(s, n->id, seq, term, h);
	return 0;
}

static int st_append(void *ctx, uint64_t seq, uint64_t term, const void *data, size_t len)
{
	uint64_t id;

	need(len == sizeof(id));
	memcpy(&id, data, sizeof(id));
	return push(ctx, seq, term, id);
}

static int st_append_term_start(void *ctx, uint64_t seq, uint64_t term)
{
	struct node *n = ctx;

	return push(n, seq, term, TS_FLAG | term << 8 | (uint64_t)n->id);
}

static int st_truncate_after(void *ctx, uint64_t seq)
{
	struct node *n = ctx;
	struct sim *s = n->sim;

	if (seq >= n->len)
		return 0;
	for (uint64_t q = seq + 1; q <= n->len && q <= s->n_com; q++)
		if (s->com[q - 1].term == n->log[q - 1].term)
			violation(s,
				  "node %d truncated committed seq %" PRIu64 " (term %" PRIu64 ")",
				  n->id, q, s->com[q - 1].term);
	trace(s, "node %d truncates after %" PRIu64 " (had %" PRIu64 ")", n->id, seq, n->len);
	if (!s->dirty_from || seq + 1 < s->dirty_from)
		s->dirty_from = seq + 1;
	n->len = seq;
	if (n->durable > seq)
		n->durable = seq;
	if (n->sync_target > seq)
		n->sync_target = seq; /* the sync in flight covers no more than that */
	return 0;
}

static int st_save_state(void *ctx, uint64_t term, int voted_for)
{
	struct node *n = ctx;

	if (term < n->term)
		violation(n->sim, "node %d saved term %" PRIu64 " below %" PRIu64, n->id, term,
			  n->term);
	n->term = term;
	n->voted_for = voted_for;
	return 0;
}

/* ---- output callbacks ---- */

static void heap_push(struct sim *s, struct msg *x)
{
	size_t i;

	if (s->n_heap == s->cap_heap) {
		s->cap_heap = s->cap_heap ? s->cap_heap * 2 : 256;
		s->heap = realloc(s->heap, s->cap_heap * sizeof(*s->heap));
		need(s->heap);
	}
	i = s->n_heap++;
	while (i > 0) {
		size_t up = (i - 1) / 2;
		struct msg *p = s->heap[up];

		if (p->at < x->at || (p->at == x->at && p->serial < x->serial))
			break;
		s->heap[i] = p;
		i = up;
	}
	s->heap[i] = x;
}

static struct msg *heap_pop(struct sim *s)
{
	struct msg *top = s->heap[0], *last = s->heap[--s->n_heap];
	size_t i = 0, n = s->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && (s->heap[c + 1]->at < s->heap[c]->at ||
				  (s->heap[c + 1]->at == s->heap[c]->at &&
				   s->heap[c + 1]->serial < s->heap[c]->serial)))
			c++;
		if (last->at < s->heap[c]->at ||
		    (last->at == s->heap[c]->at && last->serial < s->heap[c]->serial))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (n)
		s->heap[i] = last;
	return top;
}

static void net_send_one(struct sim *s, int dest, const struct raft_msg *m,
			 const struct sim_ent *ents)
{
	int copies;

	if (!s->p.n || !s->up[m->from][dest])
		return;
	if (s->p.loss > 0 && unif(&s->rng) < s->p.loss)
		return;
	copies = s->p.dup > 0 && unif(&s->rng) < s->p.dup ? 2 : 1;
	for (int c = 0; c < copies; c++) {
		struct msg *x = calloc(1, sizeof(*x));

		need(x);
		x->m = *m;
		x->m.entries = NULL;
		x->m.to = dest; /* RAFT_ALL is delivered as a copy per node */
		if (m->n_entries) {
			x->ents = malloc(m->n_entries * sizeof(*x->ents));
			need(x->ents);
			memcpy(x->ents, ents, m->n_entries * sizeof(*x->ents));
		}
		x->at = s->now + s->p.delay + (s->p.jitter ? between(&s->rng, 0, s->p.jitter) : 0);
		x->serial = s->serial++;
		heap_push(s, x);
		s->msgs_sent++;
	}
}

static void cb_send(void *ctx, const struct raft_msg *m)
{
	struct node *n = ctx;
	struct sim *s = n->sim;
	const struct sim_ent *ents = NULL;

	if (m->from != n->id || m->term < n->term) {
		violation(s, "node %d sent a message as %d, term %" PRIu64 " < %" PRIu64, n->id,
			  m->from, m->term, n->term);
		return;
	}
	if (m->type == RAFT_MSG_APPEND && m->n_entries) {
		if (m->seq + m->n_entries > n->len) {
			violation(s,
				  "node %d sent entries up to %" PRIu64 " beyond its log (%" PRIu64
				  ")",
				  n->id, m->seq + m->n_entries, n->len);
			return;
		}
		ents = &n->log[m->seq];
	}
	if (m->seq_term != (m->seq >= 1 && m->seq <= n->len ? n->log[m->seq - 1].term : 0) &&
	    m->type != RAFT_MSG_VOTE_REPLY && m->type != RAFT_MSG_REQUEST && m->seq) {
		violation(s, "node %d sent %s seq %" PRIu64 " with a wrong seq_term", n->id,
			  raft_msg_name(m->type), m->seq);
		return;
	}
	trace(s,
	      "node %d -> %d %s term %" PRIu64 " seq %" PRIu64 "/%" PRIu64 " n %u commit %" PRIu64
	      "%s%s",
	      n->id, m->to, raft_msg_name(m->type), m->term, m->seq, m->seq_term, m->n_entries,
	      m->commit, m->flags & RAFT_F_PRE ? " pre" : "",
	      m->flags & RAFT_F_GRANTED ? " granted" : "");
	if (!s->healed && m->type == RAFT_MSG_VOTE_REPLY && (m->flags & RAFT_F_GRANTED) &&
	    !(m->flags & RAFT_F_PRE) && !n->crash_at &&
	    splitmix(&s->rng) % 1000 < s->p.crash_voter_pm)
		n->crash_at = s->now + between(&s->rng, 1, s->p.crash_soon);
	if (m->to == RAFT_ALL) {
		for (int i = 0; i < s->p.n; i++)
			if (i != n->id)
				net_send_one(s, i, m, ents);
	} else if (m->to >= 0 && m->to < s->p.n && m->to != n->id) {
		net_send_one(s, m->to, m, ents);
	} else {
		violation(s, "node %d sent to %d", n->id, m->to);
	}
}

static void cb_role(void *ctx, enum raft_role role, uint64_t term, int primary)
{
	struct node *n = ctx;
	struct sim *s = n->sim;

	trace(s, "node %d is %s in term %" PRIu64 " (primary %d)", n->id, raft_role_name(role),
	      term, primary);
	if (term > s->max_term)
		s->max_term = term;
	if (role != RAFT_PRIMARY)
		return;
	s->elections++;
	if (!s->healed && !n->crash_at && splitmix(&s->rng) % 1000 < s->p.crash_primary_pm)
		n->crash_at = s->now + between(&s->rng, 1, s->p.crash_soon);
	s->leader_of = grow(s->leader_of, &s->n_leader_of, term + 1, sizeof(*s->leader_of));
	if (s->leader_of[term] && s->leader_of[term] != n->id + 1)
		violation(s, "two primaries in term %" PRIu64 ": nodes %d and %d", term,
			  s->leader_of[term] - 1, n->id);
	s->leader_of[term] = n->id + 1;
	if (s->n_com &&
	    (n->len < s->n_com || n->log[s->n_com - 1].hash != s->com[s->n_com - 1].hash))
		violation(s,
			  "leader completeness: node %d became primary of term %" PRIu64
			  " without committed seq %" PRIu64,
			  n->id, term, s->n_com);
}

static void cb_apply(void *ctx, uint64_t from, uint64_t to)
{
	struct node *n = ctx;
	struct sim *s = n->sim;

	if (from != n->applied + 1 || to < from) {
		violation(s, "node %d applies %" PRIu64 "..%" PRIu64 " after %" PRIu64, n->id, from,
			  to, n->applied);
		return;
	}
	for (uint64_t q = from; q <= to; q++) {
		if (q > n->len) {
			violation(s, "node %d applies seq %" PRIu64 " beyond its log", n->id, q);
			return;
		}
		const struct sim_ent *e = &n->log[q - 1];

		s->app = grow(s->app, &s->cap_app, q, sizeof(*s->app));
		if (q > s->n_app)
			s->n_app = q;
		if (!s->app[q - 1].term) {
			s->app[q - 1] = (struct committed){ e->term, e->id, e->hash };
		} else if (s->app[q - 1].term != e->term || s->app[q - 1].id != e->id) {
			violation(s,
				  "state machine safety: node %d applies %" PRIx64 " (term %" PRIu64
				  ") at seq %" PRIu64 ", another applied %" PRIx64 " (term %" PRIu64
				  ")",
				  n->id, e->id, e->term, q, s->app[q - 1].id, s->app[q - 1].term);
			return;
		}
	}
	n->applied = to;
}

static uint64_t cb_random(void *ctx)
{
	return splitmix(&((struct node *)ctx)->rng);
}

static const struct raft_io sim_io = {
	.last_seq = st_last_seq,
	.durable_seq = st_durable_seq,
	.term_at = st_term_at,
	.append = st_append,
	.append_term_start = st_append_term_start,
	.truncate_after = st_truncate_after,
	.save_state = st_save_state,
	.send = cb_send,
	.role = cb_role,
	.apply = cb_apply,
	.random = cb_random,
};

/* ---- the checker, after every step ---- */

static void check_majority(struct sim *s, uint64_t q)
{
	int k = 0;

	for (int i = 0; i < s->p.n; i++) {
		const struct node *n = &s->nodes[i];

		if (on_disk(s, n, q) && n->log[q - 1].term == s->com[q - 1].term)
			k++;
	}
	if (k < majority_of(s))
		violation(s,
			  "committed seq %" PRIu64 " (term %" PRIu64
			  ") is journalled by %d nodes only",
			  q, s->com[q - 1].term, k);
}

static void record_commit(struct sim *s, const struct node *n, uint64_t q)
{
	const struct sim_ent *e = &n->log[q - 1];

	if (q <= s->n_com) {
		if (s->com[q - 1].term != e->term || s->com[q - 1].id != e->id)
			violation(s,
				  "committed seq %" PRIu64 " changed: node %d has %" PRIx64
				  " (term %" PRIu64 "), was %" PRIx64 " (term %" PRIu64 ")",
				  q, n->id, e->id, e->term, s->com[q - 1].id, s->com[q - 1].term);
		return;
	}
	if (q != s->n_com + 1) {
		violation(s, "checker: commit recorded out of order");
		return;
	}
	s->com = grow(s->com, &s->cap_com, q, sizeof(*s->com));
	s->com[q - 1] = (struct committed){ e->term, e->id, e->hash };
	s->n_com = q;
	check_majority(s, q);
	if (s->healed && !s->probe_seq && !(e->id & TS_FLAG) && e->id >= s->first_heal_id)
		s->probe_seq = q;
}

static void check_step(struct sim *s)
{
	for (int i = 0; i < s->p.n && !s->failed; i++) {
		struct node *n = &s->nodes[i];
		uint64_t c;

		if (!n->r)
			continue;
		c = raft_commit(n->r);
		if (c > n->len) {
			violation(s, "node %d commit %" PRIu64 " beyond its log (%" PRIu64 ")", i,
				  c, n->len);
			return;
		}
		for (uint64_t q = n->checked_commit + 1; q <= c && !s->failed; q++)
			record_commit(s, n, q);
		n->checked_commit = c;
		if (s->crashed && !s->failover_ns && c && n->log[c - 1].term > s->old_term) {
			s->failover_ns = s->now - s->crashed_at;
			s->done = 1;
		}
	}
	if (s->dirty_from) {
		for (uint64_t q = s->dirty_from; q <= s->n_com && !s->failed; q++)
			check_majority(s, q);
		s->dirty_from = 0;
	}
}

/* ---- nodes up and down ---- */

static void node_open(struct sim *s, int i)
{
	struct node *n = &s->nodes[i];
	struct raft_config cfg = {
		.id = i,
		.n_nodes = s->p.n,
		.term = n->term,
		.voted_for = n->voted_for,
		.applied = n->kept_applied,
		.heartbeat_ns = s->p.hb,
		.election_min_ns = s->p.emin,
		.election_max_ns = s->p.emax,
		.request_ns = s->p.req,
		.max_entries = s->p.max_entries,
		.no_prevote = s->p.no_prevote,
		.no_check_quorum = s->p.no_cq,
		.bugs = s->p.bugs,
	};
	struct raft_io io = sim_io;

	io.ctx = n;
	n->applied = n->kept_applied;
	n->checked_commit = n->kept_applied;
	n->down_until = 0;
	n->durable = n->len; /* the journal's open syncs what it finds */
	need(raft_open(&n->r, &cfg, &io, s->now) == 0);
	trace(s,
	      "node %d starts (term %" PRIu64 ", voted %d, log %" PRIu64 ", applied %" PRIu64 ")",
	      i, n->term, n->voted_for, n->len, n->kept_applied);
}

/* Elections started by TIMEOUT_NOW, counted before an instance goes. */
static void count_handovers(struct sim *s, const struct node *n)
{
	struct raft_stats st;

	raft_get_stats(n->r, &st);
	s->handed_over += st.timeout_now;
}

static void node_crash(struct sim *s, int i, uint64_t down)
{
	struct node *n = &s->nodes[i];

	trace(s, "node %d crashes (%s, term %" PRIu64 ") for %.3f ms", i,
	      raft_role_name(raft_role(n->r)), raft_term(n->r), (double)down / MS);
	/* half the time the "sequencer" remembers what it applied */
	n->kept_applied = splitmix(&s->rng) & 1 ? n->applied : 0;
	if (s->p.sync_delay && n->len > n->durable) { /* a power cut */
		trace(s, "node %d loses its log after %" PRIu64 " (not on disk; had %" PRIu64 ")",
		      i, n->durable, n->len);
		if (!s->dirty_from || n->durable + 1 < s->dirty_from)
			s->dirty_from = n->durable + 1;
		n->len = n->durable;
	}
	if (n->kept_applied > n->len)
		n->kept_applied = 0; /* applied before its own copy was on disk */
	n->sync_at = n->sync_target = 0;
	count_handovers(s, n);
	raft_close(n->r);
	n->r = NULL;
	n->crash_at = 0;
	n->down_until = down == UINT64_MAX ? UINT64_MAX : s->now + down;
}

static int find_primary(struct sim *s)
{
	int best = -1;

	for (int i = 0; i < s->p.n; i++) {
		struct raft *r = s->nodes[i].r;

		if (r && raft_role(r) == RAFT_PRIMARY &&
		    (best < 0 || raft_term(r) > raft_term(s->nodes[best].r)))
			best = i;
	}
	return best;
}

static void fault_crash(struct sim *s)
{
	int up[MAXN], k = 0, p = find_primary(s);

	for (int i = 0; i < s->p.n; i++)
		if (s->nodes[i].r)
			up[k++] = i;
	if (k) {
		int i = p >= 0 && (splitmix(&s->rng) & 1) ? p : up[splitmix(&s->rng) % (uint64_t)k];

		node_crash(s, i, between(&s->rng, 1, s->p.down_max));
	}
	s->crash_at = s->now + around(&s->rng, s->p.crash_mean);
}

static void links_all(struct sim *s, int v)
{
	for (int i = 0; i < MAXN; i++)
		for (int j = 0; j < MAXN; j++)
			s->up[i][j] = v;
}

static void fault_partition(struct sim *s)
{
	int n = s->p.n, kind = (int)(splitmix(&s->rng) % 5), a;

	links_all(s, 1);
	switch (kind) {
	case 0: /* healed */
		trace(s, "network heals");
		break;
	case 1: /* one node cut off both ways */
		a = (int)(splitmix(&s->rng) % (uint64_t)n);
		for (int j = 0; j < n; j++)
			s->up[a][j] = s->up[j][a] = 0;
		trace(s, "node %d cut off", a);
		break;
	case 2: { /* two sides */
		unsigned side = (unsigned)splitmix(&s->rng);

		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				s->up[i][j] = ((side >> i) & 1) == ((side >> j) & 1);
		trace(s, "network split %#x", side & ((1u << n) - 1));
		break;
	}
	case 3: /* one way */
		a = (int)(splitmix(&s->rng) % (uint64_t)n);
		for (int j = 0; j < n; j++)
			s->up[a][j] = 0;
		trace(s, "node %d can receive but not send", a);
		break;
	default: /* random links */
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				s->up[i][j] = unif(&s->rng) >= 0.3;
		trace(s, "random links down");
		break;
	}
	s->part_at = s->now + around(&s->rng, s->p.part_mean);
}

static void client(struct sim *s)
{
	int cand[MAXN], k = 0;

	for (int i = 0; i < s->p.n; i++)
		if (s->nodes[i].r && raft_role(s->nodes[i].r) == RAFT_PRIMARY &&
		    raft_transfer_target(s->nodes[i].r) == RAFT_NOBODY)
			cand[k++] = i;
	if (k) {
		struct node *n = &s->nodes[cand[splitmix(&s->rng) % (uint64_t)k]];
		int batch = (int)between(&s->rng, 1, 4), e;

		for (int b = 0; b < batch; b++) {
			uint64_t id = ++s->next_id, seq;

			if ((e = raft_propose(n->r, &id, sizeof(id), &seq)) < 0) {
				violation(s, "propose on primary %d: %d", n->id, e);
				return;
			}
			trace(s, "client: command %" PRIu64 " at node %d seq %" PRIu64, id, n->id,
			      seq);
		}
		if ((e = raft_flush(n->r, s->now)) < 0)
			violation(s, "flush on %d: %d", n->id, e);
	}
	s->client_at = s->now + around(&s->rng, s->p.client_mean);
}

/* An operator's step-down: a primary asked to hand over, to a random node
 * (itself and "any" included). */
static void transfer(struct sim *s)
{
	int cand[MAXN], k = 0;

	for (int i = 0; i < s->p.n; i++)
		if (s->nodes[i].r && raft_role(s->nodes[i].r) == RAFT_PRIMARY)
			cand[k++] = i;
	if (k) {
		struct node *n = &s->nodes[cand[splitmix(&s->xrng) % (uint64_t)k]];
		int to = (int)(splitmix(&s->xrng) % (uint64_t)(s->p.n + 1)) - 1;
		int busy = raft_transfer_target(n->r) != RAFT_NOBODY;
		int e = raft_transfer(n->r, to, s->now);

		trace(s, "node %d asked to hand over to %d: %d", n->id, to, e);
		if (e == 0)
			s->transfers++;
		else if (!(e == -EALREADY && busy) && !(e == -EINVAL && to == n->id) &&
			 e != -EHOSTUNREACH)
			violation(s, "node %d: raft_transfer(%d): %d", n->id, to, e);
		else if (e == -EALREADY && raft_transfer_target(n->r) == RAFT_NOBODY)
			violation(s, "node %d: -EALREADY with no hand-over under way", n->id);
	}
	s->transfer_at = s->now + around(&s->xrng, s->p.transfer_mean);
}

static void heal(struct sim *s)
{
	s->healed = 1;
	s->heal_time = s->now;
	s->first_heal_id = s->next_id + 1;
	s->p.loss = 0;
	s->p.dup = 0;
	for (int i = 0; i < s->p.n; i++)
		s->nodes[i].crash_at = 0;
	if (s->p.jitter > s->p.emin / 10)
		s->p.jitter = s->p.emin / 10;
	links_all(s, 1);
	{ /* time to elect, then to fetch the longest log at max_entries per round trip */
		uint64_t longest = 0;

		for (int i = 0; i < s->p.n; i++)
			if (s->nodes[i].len > longest)
				longest = s->nodes[i].len;
		s->p.heal_limit = 60 * s->p.emax + (longest / s->p.max_entries + 10) * 4 *
							   (s->p.delay + s->p.jitter);
	}
	trace(s, "heal: every node up, no loss, every link up");
	for (int i = 0; i < s->p.n; i++)
		if (!s->nodes[i].r)
			node_open(s, i);
}

static void deliver(struct sim *s)
{
	struct msg *x = heap_pop(s);
	struct node *n = &s->nodes[x->m.to];
	struct raft_entry ents[256], *big = NULL, *e = ents;

	if (n->r && s->up[x->m.from][x->m.to]) {
		if (x->m.n_entries > 256) {
			big = malloc(x->m.n_entries * sizeof(*big));
			need(big);
			e = big;
		}
		for (uint32_t k = 0; k < x->m.n_entries; k++)
			e[k] = (struct raft_entry){ x->ents[k].term, &x->ents[k].id,
						    sizeof(uint64_t) };
		x->m.entries = e;
		s->msgs_delivered++;
		trace(s, "node %d <- %d %s term %" PRIu64, n->id, x->m.from,
		      raft_msg_name(x->m.type), x->m.term);
		int r = raft_receive(n->r, &x->m, s->now);

		if (r < 0)
			violation(s, "node %d receive: %d", n->id, r);
		free(big);
	}
	free(x->ents);
	free(x);
}

static void sim_init(struct sim *s, uint64_t seed, const struct params *p)
{
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	s->rng = seed * 0x2545f4914f6cdd1dull + 1;
	s->p = *p;
	links_all(s, 1);
	for (int i = 0; i < p->n; i++) {
		struct node *n = &s->nodes[i];

		n->sim = s;
		n->id = i;
		n->voted_for = RAFT_NOBODY;
		n->rng = seed ^ (0x1234567ull * (uint64_t)(i + 1));
	}
	s->crash_at = p->crash_mean ? around(&s->rng, p->crash_mean) : UINT64_MAX;
	s->part_at = p->part_mean ? around(&s->rng, p->part_mean) : UINT64_MAX;
	s->client_at = around(&s->rng, p->client_mean);
	s->xrng = seed ^ 0x7a5f3e2d1c0bull;
	s->transfer_at = p->transfer_mean ? around(&s->xrng, p->transfer_mean) : UINT64_MAX;
}

static void sim_start(struct sim *s)
{
	for (int i = 0; i < s->p.n; i++)
		node_open(s, i);
}

static void sim_free(struct sim *s)
{
	for (int i = 0; i < MAXN; i++) {
		raft_close(s->nodes[i].r);
		free(s->nodes[i].log);
	}
	while (s->n_heap) {
		struct msg *x = heap_pop(s);

		free(x->ents);
		free(x);
	}
	free(s->heap);
	free(s->leader_of);
	free(s->com);
	free(s->app);
	free(s->lm);
}

/* Progress after healing: a command submitted since is committed at every
 * node, and some node is primary. */
static int progressed(struct sim *s)
{
	if (!s->probe_seq || find_primary(s) < 0)
		return 0;
	for (int i = 0; i < s->p.n; i++)
		if (!s->nodes[i].r || raft_commit(s->nodes[i].r) < s->probe_seq)
			return 0;
	return 1;
}

enum {
	EV_NONE,
	EV_MSG,
	EV_TICK,
	EV_RESTART,
	EV_CRASH,
	EV_NODE_CRASH,
	EV_PART,
	EV_CLIENT,
	EV_HEAL,
	EV_FAILOVER,
	EV_TRANSFER,
	EV_SYNC
};

/* sync_delay: every node with records not on disk and no sync in flight
 * starts one, for its whole log, ending within sync_delay. */
static void start_syncs(struct sim *s)
{
	for (int i = 0; i < s->p.n && s->p.sync_delay; i++) {
		struct node *n = &s->nodes[i];

		if (n->r && !n->sync_at && n->len > n->durable) {
			n->sync_target = n->len;
			n->sync_at = s->now + between(&s->rng, 1, s->p.sync_delay);
		}
	}
}

static void sync_done(struct sim *s, int i)
{
	struct node *n = &s->nodes[i];
	int e;

	if (n->sync_target > n->durable)
		n->durable = n->sync_target;
	n->sync_at = n->sync_target = 0;
	trace(s, "node %d has its log up to %" PRIu64 " on disk", i, n->durable);
	if ((e = raft_durable(n->r, s->now)) < 0)
		violation(s, "node %d durable: %d", i, e);
}

static void sim_run(struct sim *s)
{
	uint64_t chaos_end = s->p.chaos;

	while (!s->failed && !s->done && !(s->stop_at && s->now > s->stop_at)) {
		uint64_t t = UINT64_MAX;
		int what = EV_NONE, who = -1;

		if (++s->steps > MAX_STEPS) {
			no_progress(s, "step limit reached at %.3f ms", (double)s->now / MS);
			break;
		}
		if (s->n_heap) {
			t = s->heap[0]->at;
			what = EV_MSG;
		}
		for (int i = 0; i < s->p.n; i++) {
			struct node *n = &s->nodes[i];
			uint64_t d = n->r ? raft_deadline(n->r) : n->down_until;

			if (d < t) {
				t = d;
				what = n->r ? EV_TICK : EV_RESTART;
				who = i;
			}
			if (n->r && n->crash_at && n->crash_at < t) {
				t = n->crash_at;
				what = EV_NODE_CRASH;
				who = i;
			}
			if (n->r && n->sync_at && n->sync_at < t) {
				t = n->sync_at;
				what = EV_SYNC;
				who = i;
			}
		}
		if (!s->healed && s->crash_at < t) {
			t = s->crash_at;
			what = EV_CRASH;
		}
		if (!s->healed && s->part_at < t) {
			t = s->part_at;
			what = EV_PART;
		}
		if (s->client_at < t) {
			t = s->client_at;
			what = EV_CLIENT;
		}
		if (!s->healed && s->transfer_at < t) {
			t = s->transfer_at;
			what = EV_TRANSFER;
		}
		if (!s->healed && chaos_end < t) {
			t = chaos_end;
			what = EV_HEAL;
		}
		if (s->p.failover_at && !s->crashed && s->p.failover_at < t) {
			t = s->p.failover_at;
			what = EV_FAILOVER;
		}
		if (t > s->now)
			s->now = t;
		switch (what) {
		case EV_MSG:
			deliver(s);
			break;
		case EV_TICK: {
			int e = raft_tick(s->nodes[who].r, s->now);

			if (e < 0)
				violation(s, "node %d tick: %d", who, e);
			else if (raft_deadline(s->nodes[who].r) <= s->now)
				violation(s, "node %d: tick left its deadline in the past", who);
			break;
		}
		case EV_RESTART:
			node_open(s, who);
			break;
		case EV_CRASH:
			fault_crash(s);
			break;
		case EV_NODE_CRASH:
			node_crash(s, who, between(&s->rng, 1, s->p.down_max));
			break;
		case EV_PART:
			fault_partition(s);
			break;
		case EV_CLIENT:
			client(s);
			break;
		case EV_HEAL:
			heal(s);
			break;
		case EV_TRANSFER:
			transfer(s);
			break;
		case EV_SYNC:
			sync_done(s, who);
			break;
		case EV_FAILOVER: {
			int p = find_primary(s);

			if (p < 0) {
				s->p.failover_at = s->now + MS;
				break;
			}
			s->crashed = 1;
			s->crashed_at = s->now;
			s->old_term = raft_term(s->nodes[p].r);
			node_crash(s, p, UINT64_MAX);
			break;
		}
		default:
			violation(s, "nothing left to do at %.3f ms", (double)s->now / MS);
			break;
		}
		start_syncs(s);
		check_step(s);
		if (s->healed && progressed(s))
			s->done = 1;
		if (s->healed && !s->done && s->now > s->heal_time + s->p.heal_limit)
			no_progress(s,
				    "no progress within %.0f ms of healing (max term %" PRIu64 ")",
				    (double)s->p.heal_limit / MS, s->max_term);
		if (s->crashed && !s->done && s->now > s->crashed_at + 10000 * MS)
			no_progress(s, "no new primary within 10 s of the crash");
	}
}

/* ---- schedules ---- */

static uint64_t pick(uint64_t *g, const uint64_t *v, size_t n)
{
	return v[splitmix(g) % n];
}

/* Everything about a chaos schedule follows from its seed. */
static void chaos_params(struct params *p, uint64_t seed)
{
	uint64_t g = seed ^ 0xc0ffee5eedull, u;
	static const int sizes[] = { 1, 3, 3, 3, 5, 5, 5 };
	static const uint64_t loss_pm[] = { 0, 0, 10, 50, 150, 300 }; /* per mille */
	static const uint64_t dup_pm[] = { 0, 0, 20, 100 };
	double scale = unif(&g);

	memset(p, 0, sizeof(*p));
	p->n = sizes[splitmix(&g) % 7];
	if (scale < 0.2) { /* lockstep's timeouts */
		u = 10 * MS;
		p->hb = 50 * MS;
		p->emin = 150 * MS;
		p->emax = 300 * MS;
		p->req = 20 * MS;
	} else { /* the same shape, compressed: more elections per step */
		u = scale < 0.8 ? 1 * MS : 300 * US;
		p->hb = 5 * u;
		p->emin = 15 * u;
		p->emax = 30 * u;
		p->req = 2 * u;
	}
	{
		const uint64_t me[] = { 2, 4, 16, 64, 256 };

		p->max_entries = (uint32_t)pick(&g, me, 5);
	}
	p->no_prevote = unif(&g) < 0.2;
	p->no_cq = unif(&g) < 0.2;
	p->loss = (double)pick(&g, loss_pm, 6) / 1000;
	p->dup = (double)pick(&g, dup_pm, 4) / 1000;
	p->delay = between(&g, u / 20, u);
	{
		const uint64_t jit[] = { 0, u / 10, u, 5 * u, 20 * u };

		p->jitter = pick(&g, jit, 5);
	}
	{
		const uint64_t crash[] = { 0, 30 * u, 80 * u, 200 * u };

		p->crash_mean = pick(&g, crash, 4);
		p->down_max = between(&g, u, 60 * u);
	}
	{
		const uint64_t part[] = { 0, 0, 30 * u, 100 * u };

		p->part_mean = pick(&g, part, 4);
	}
	{
		const uint64_t pm[] = { 0, 0, 100, 300 };

		p->crash_primary_pm = pick(&g, pm, 4);
		p->crash_voter_pm = pick(&g, pm, 4);
		p->crash_soon = between(&g, u / 10, 5 * u);
	}
	p->client_mean = between(&g, u / 2, 3 * u);
	p->chaos = between(&g, 150 * u, 400 * u);
	{
		const uint64_t tr[] = { 0, 0, 20 * u, 60 * u };

		p->transfer_mean = pick(&g, tr, 4);
	}
	{
		/* its own draws: the schedules of before stay as they were */
		uint64_t d = seed ^ 0xd15cd15cull;

		p->sync_delay = splitmix(&d) & 1 ? between(&d, u / 20, 2 * u) : 0;
	}
}

/* The schedules the deliberate bugs are hunted with: elections in a storm,
 * new primaries and voters crashing soon, short retransmission answers. */
#define SIM_HOSTILE 0x10000u /* with the RAFT_BUG_* bits: the hostile shape */

static void hostile_params(struct params *p, uint64_t seed, unsigned bugs)
{
	uint64_t g = seed ^ 0xbadbadull;

	chaos_params(p, seed);
	p->bugs = bugs & ~SIM_HOSTILE;
	if (!(bugs & SIM_HOSTILE))
		return;
	p->n = splitmix(&g) & 1 ? 5 : 3;
	p->no_prevote = splitmix(&g) & 1;
	p->crash_primary_pm = 300;
	p->crash_voter_pm = 300;
	p->crash_soon = between(&g, p->delay, 3 * p->delay + p->jitter + 1);
	p->crash_mean = 3 * p->emax;
	p->down_max = 2 * p->emax;
	p->max_entries = 2;
}

static unsigned env_bugs(void)
{
	const char *b = getenv("RAFT_SIM_BUGS");

	return b ? (unsigned)strtoul(b, NULL, 0) : 0;
}

/* Runs one chaos schedule; 0 if every check held, 1 when a safety property
 * broke, 2 without progress after healing. */
static int run_seed(uint64_t seed, unsigned bugs, int trace_on, struct sim *out_stats, char *why,
		    size_t why_len)
{
	struct sim *s = malloc(sizeof(*s));
	struct params p;
	int failed;

	need(s);
	hostile_params(&p, seed, bugs);
	sim_init(s, seed, &p);
	s->trace = trace_on;
	sim_start(s);
	sim_run(s);
	failed = s->failed;
	if (why)
		snprintf(why, why_len, "%s", s->why);
	if (out_stats) {
		out_stats->steps += s->steps;
		out_stats->msgs_sent += s->msgs_sent;
		out_stats->elections += s->elections;
		out_stats->transfers += s->transfers;
		for (int i = 0; i < s->p.n; i++)
			if (s->nodes[i].r)
				count_handovers(s, &s->nodes[i]);
		out_stats->handed_over += s->handed_over;
		out_stats->n_com += s->n_com;
		if (s->max_term > out_stats->max_term)
			out_stats->max_term = s->max_term;
	}
	sim_free(s);
	free(s);
	return failed;
}

static void describe(uint64_t seed, unsigned bugs)
{
	struct params p;

	hostile_params(&p, seed, bugs);
	printf("  n=%d heartbeat=%.1fms election=%.1f-%.1fms prevote=%s check_quorum=%s loss=%.3f "
	       "dup=%.3f max_entries=%u delay=%.2fms jitter=%.2fms crashes=%s partitions=%s "
	       "targeted=%.1f%%/%.1f%% hand-overs=%s sync=%.2fms chaos=%.0fms\n",
	       p.n, (double)p.hb / MS, (double)p.emin / MS, (double)p.emax / MS,
	       p.no_prevote ? "no" : "yes", p.no_cq ? "no" : "yes", p.loss, p.dup, p.max_entries,
	       (double)p.delay / MS, (double)p.jitter / MS, p.crash_mean ? "yes" : "no",
	       p.part_mean ? "yes" : "no", (double)p.crash_primary_pm / 10,
	       (double)p.crash_voter_pm / 10, p.transfer_mean ? "yes" : "no",
	       (double)p.sync_delay / MS, (double)p.chaos / MS);
}

static const char *prog = "tests/test_raft";

/* ---- unit cases: one node driven by hand ---- */

static struct sim *bench(int n)
{
	struct sim *s = malloc(sizeof(*s));
	struct params p = {
		.n = n,
		.hb = 50 * MS,
		.emin = 150 * MS,
		.emax = 300 * MS,
		.req = 20 * MS,
		.max_entries = 64,
		.delay = 1 * MS,
		.client_mean = 1000000 * MS,
	};

	ck_assert_ptr_nonnull(s);
	sim_init(s, 1, &p);
	return s;
}

static void bench_free(struct sim *s)
{
	sim_free(s);
	free(s);
}

/* Gives node i a log of the given terms (ids are seq * 100 + term). */
static void give_log(struct sim *s, int i, const uint64_t *terms, size_t k)
{
	for (size_t q = 0; q < k; q++)
		ck_assert_int_eq(push(&s->nodes[i], q + 1, terms[q], (q + 1) * 100 + terms[q]), 0);
}

static void free_msg(struct msg *x)
{
	free(x->ents);
	free(x);
}

/* The next message sent, in order; fails when there is none. */
static struct msg *next_msg(struct sim *s)
{
	ck_assert_uint_gt(s->n_heap, 0);
	return heap_pop(s);
}

static void drop_msgs(struct sim *s)
{
	while (s->n_heap) {
		struct msg *x = heap_pop(s);

		free_msg(x);
	}
}

static int recv_msg(struct sim *s, int i, struct raft_msg m, const struct raft_entry *ents)
{
	m.entries = ents;
	return raft_receive(s->nodes[i].r, &m, s->now);
}

START_TEST(single_node_elects_itself_and_commits)
{
	struct sim *s = bench(1);
	struct node *n = &s->nodes[0];
	uint64_t id = 7, seq;

	sim_start(s);
	ck_assert_uint_eq(raft_deadline(n->r), 0);
	ck_assert_int_eq(raft_tick(n->r, 0), 0);
	ck_assert_int_eq(raft_role(n->r), RAFT_PRIMARY);
	ck_assert_uint_eq(raft_term(n->r), 1);
	ck_assert_uint_eq(n->term, 1); /* persisted */
	ck_assert_int_eq(n->voted_for, 0);
	ck_assert_uint_eq(n->len, 1); /* the term-start entry */
	ck_assert_uint_eq(n->log[0].id, TS_FLAG | 1 << 8);
	ck_assert_uint_eq(raft_commit(n->r), 1);
	ck_assert_uint_eq(n->applied, 1);
	ck_assert_int_eq(raft_propose(n->r, &id, sizeof(id), &seq), 0);
	ck_assert_uint_eq(seq, 2);
	ck_assert_uint_eq(raft_commit(n->r), 1); /* not before the flush */
	ck_assert_int_eq(raft_flush(n->r, 0), 0);
	ck_assert_uint_eq(raft_commit(n->r), 2);
	ck_assert_uint_eq(n->applied, 2);
	ck_assert_uint_eq(s->n_heap, 0); /* nobody to talk to */
	/* a restart opens term 2 after the journal */
	raft_close(n->r);
	n->r = NULL;
	node_open(s, 0);
	ck_assert_int_eq(raft_tick(n->r, 0), 0);
	ck_assert_uint_eq(raft_term(n->r), 2);
	ck_assert_uint_eq(n->len, 3);
	ck_assert_uint_eq(raft_commit(n->r), 3);
	bench_free(s);
}
END_TEST

START_TEST(vote_needs_an_up_to_date_log_and_one_per_term)
{
	static const uint64_t terms[] = { 1, 1, 2 };
	struct sim *s = bench(5);
	struct msg *x;

	give_log(s, 0, terms, 3);
	s->nodes[0].term = 2;
	sim_start(s);
	/* last term 1 < 2: refused, although its log is longer */
	ck_assert_int_eq(recv_msg(s, 0,
				  (struct raft_msg){ .type = RAFT_MSG_VOTE,
						     .from = 1,
						     .term = 3,
						     .seq = 9,
						     .seq_term = 1 },
				  NULL),
			 0);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_VOTE_REPLY);
	ck_assert_uint_eq(x->m.term, 3);
	ck_assert(!(x->m.flags & RAFT_F_GRANTED));
	free_msg(x);
	ck_assert_uint_eq(s->nodes[0].term, 3);
	ck_assert_int_eq(s->nodes[0].voted_for, RAFT_NOBODY);
	/* same last term, shorter: refused; as long: granted and persisted */
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 2, .term = 3, .seq = 2, .seq_term = 2 },
		 NULL);
	x = next_msg(s);
	ck_assert(!(x->m.flags & RAFT_F_GRANTED));
	free_msg(x);
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 3, .term = 3, .seq = 3, .seq_term = 2 },
		 NULL);
	x = next_msg(s);
	ck_assert(x->m.flags & RAFT_F_GRANTED);
	ck_assert_int_eq(x->m.to, 3);
	free_msg(x);
	ck_assert_int_eq(s->nodes[0].voted_for, 3);
	/* one vote per term, even for a better log; the same candidate again: yes */
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 4, .term = 3, .seq = 5, .seq_term = 3 },
		 NULL);
	x = next_msg(s);
	ck_assert(!(x->m.flags & RAFT_F_GRANTED));
	free_msg(x);
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 3, .term = 3, .seq = 3, .seq_term = 2 },
		 NULL);
	x = next_msg(s);
	ck_assert(x->m.flags & RAFT_F_GRANTED);
	free_msg(x);
	/* a pre-vote changes nothing, and is refused while a primary is heard */
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE,
				    .from = 4,
				    .term = 4,
				    .seq = 5,
				    .seq_term = 3,
				    .flags = RAFT_F_PRE },
		 NULL);
	x = next_msg(s);
	ck_assert(x->m.flags & RAFT_F_GRANTED);
	ck_assert(x->m.flags & RAFT_F_PRE);
	ck_assert_uint_eq(x->m.term, 4);
	free_msg(x);
	ck_assert_uint_eq(raft_term(s->nodes[0].r), 3);
	recv_msg(
		s, 0,
		(struct raft_msg){
			.type = RAFT_MSG_HEARTBEAT, .from = 3, .term = 3, .seq = 3, .seq_term = 2 },
		NULL);
	drop_msgs(s);
	ck_assert_int_eq(raft_primary(s->nodes[0].r), 3);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE,
				    .from = 4,
				    .term = 4,
				    .seq = 5,
				    .seq_term = 3,
				    .flags = RAFT_F_PRE },
		 NULL);
	x = next_msg(s);
	ck_assert(!(x->m.flags & RAFT_F_GRANTED));
	ck_assert_uint_eq(x->m.term, 3);
	free_msg(x);
	bench_free(s);
}
END_TEST

START_TEST(journal_newer_than_saved_vote_refuses_that_term)
{
	static const uint64_t terms[] = { 1, 4 };
	struct sim *s = bench(3);
	struct msg *x;

	give_log(s, 1, terms, 2);
	s->nodes[1].term = 2; /* the state file is older than the journal */
	sim_start(s);
	ck_assert_uint_eq(raft_term(s->nodes[1].r), 4);
	recv_msg(s, 1,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 0, .term = 4, .seq = 9, .seq_term = 4 },
		 NULL);
	x = next_msg(s);
	ck_assert(!(x->m.flags & RAFT_F_GRANTED));
	free_msg(x);
	recv_msg(s, 1,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 0, .term = 5, .seq = 9, .seq_term = 4 },
		 NULL);
	x = next_msg(s);
	ck_assert(x->m.flags & RAFT_F_GRANTED);
	free_msg(x);
	ck_assert_uint_eq(s->nodes[1].term, 5);
	ck_assert_int_eq(s->nodes[1].voted_for, 0);
	bench_free(s);
}
END_TEST

START_TEST(new_term_truncates_a_divergent_tail)
{
	static const uint64_t terms[] = { 1, 2, 2 };
	struct sim *s = bench(3);
	struct node *n = &s->nodes[1];
	uint64_t id = 999;
	struct raft_entry e = { 3, &id, sizeof(id) };
	struct msg *x;

	give_log(s, 1, terms, 3);
	n->term = 2;
	sim_start(s);
	/* the primary of term 3 has seq 1 (term 1) then its term start */
	recv_msg(s, 1,
		 (struct raft_msg){ .type = RAFT_MSG_APPEND,
				    .from = 0,
				    .term = 3,
				    .seq = 1,
				    .seq_term = 1,
				    .n_entries = 1,
				    .commit = 1 },
		 &e);
	ck_assert_uint_eq(n->len, 2);
	ck_assert_uint_eq(n->log[1].term, 3);
	ck_assert_uint_eq(n->log[1].id, 999);
	ck_assert_uint_eq(raft_commit(n->r), 1);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_ACK);
	ck_assert_uint_eq(x->m.seq, 2);
	ck_assert_uint_eq(x->m.seq_term, 3);
	ck_assert_int_eq(x->m.to, 0);
	free_msg(x);
	bench_free(s);
}
END_TEST

START_TEST(mismatch_cuts_and_asks_from_the_previous_run)
{
	static const uint64_t terms[] = { 1, 1, 2, 2, 2 };
	struct sim *s = bench(3);
	struct node *n = &s->nodes[2];
	struct msg *x;
	struct raft_stats st;

	give_log(s, 2, terms, 5);
	n->term = 2;
	sim_start(s);
	/* the primary's seq 5 is of term 3: ours (term 2) is not committed */
	recv_msg(
		s, 2,
		(struct raft_msg){
			.type = RAFT_MSG_HEARTBEAT, .from = 1, .term = 3, .seq = 5, .seq_term = 3 },
		NULL);
	ck_assert_uint_eq(n->len, 4);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_REQUEST);
	ck_assert_uint_eq(x->m.seq, 3); /* the start of the term-2 run */
	ck_assert_int_eq(x->m.to, 1);
	free_msg(x);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_ACK);
	ck_assert_uint_eq(x->m.seq, 0);
	free_msg(x);
	raft_get_stats(n->r, &st);
	ck_assert_uint_eq(st.truncations, 1);
	ck_assert_uint_eq(st.requests_sent, 1);
	bench_free(s);
}
END_TEST

START_TEST(gap_asks_for_a_retransmission_and_repeats)
{
	struct sim *s = bench(3);
	struct node *n = &s->nodes[1];
	uint64_t ids[3] = { 11, 12, 13 };
	struct raft_entry e[3];
	struct msg *x;

	sim_start(s);
	for (int i = 0; i < 3; i++)
		e[i] = (struct raft_entry){ 1, &ids[i], sizeof(ids[i]) };
	recv_msg(s, 1,
		 (struct raft_msg){ .type = RAFT_MSG_APPEND,
				    .from = 0,
				    .term = 1,
				    .seq = 5,
				    .seq_term = 1,
				    .n_entries = 1,
				    .commit = 5 },
		 e);
	ck_assert_uint_eq(n->len, 0); /* go-back-N: nothing journalled past a gap */
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_REQUEST);
	ck_assert_uint_eq(x->m.seq, 1);
	free_msg(x);
	drop_msgs(s);
	/* more live traffic does not repeat the question at once */
	recv_msg(s, 1,
		 (struct raft_msg){ .type = RAFT_MSG_APPEND,
				    .from = 0,
				    .term = 1,
				    .seq = 6,
				    .seq_term = 1,
				    .n_entries = 1,
				    .commit = 5 },
		 e);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_ACK);
	free_msg(x);
	ck_assert_uint_eq(raft_deadline(n->r), s->now + 20 * MS);
	s->now += 20 * MS;
	ck_assert_int_eq(raft_tick(n->r, s->now), 0);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_REQUEST);
	ck_assert_uint_eq(x->m.seq, 1);
	free_msg(x);
	/* the answer: 1..3 of 7; commit follows what matches; the rest is asked
	 * at once when the answer says it ended (RAFT_F_END) */
	recv_msg(s, 1,
		 (struct raft_msg){ .type = RAFT_MSG_APPEND,
				    .from = 0,
				    .term = 1,
				    .seq = 0,
				    .seq_term = 0,
				    .n_entries = 3,
				    .commit = 5,
				    .flags = RAFT_F_END },
		 e);
	ck_assert_uint_eq(n->len, 3);
	ck_assert_uint_eq(raft_commit(n->r), 3);
	ck_assert_uint_eq(n->applied, 3);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_REQUEST);
	ck_assert_uint_eq(x->m.seq, 4);
	free_msg(x);
	drop_msgs(s);
	bench_free(s);
}
END_TEST

START_TEST(older_term_is_fenced)
{
	struct sim *s = bench(3);
	struct node *n = &s->nodes[1];
	uint64_t id = 5;
	struct raft_entry e = { 4, &id, sizeof(id) };
	struct msg *x;
	struct raft_stats st;

	n->term = 5;
	sim_start(s);
	recv_msg(s, 1,
		 (struct raft_msg){ .type = RAFT_MSG_APPEND,
				    .from = 2,
				    .term = 4,
				    .seq = 0,
				    .n_entries = 1,
				    .commit = 1 },
		 &e);
	ck_assert_uint_eq(n->len, 0);
	ck_assert_uint_eq(raft_commit(n->r), 0);
	x = next_msg(s); /* tells the deposed primary the news */
	ck_assert_int_eq(x->m.type, RAFT_MSG_ACK);
	ck_assert_uint_eq(x->m.term, 5);
	ck_assert_int_eq(x->m.to, 2);
	free_msg(x);
	raft_get_stats(n->r, &st);
	ck_assert_uint_eq(st.stale_ignored, 1);
	bench_free(s);
}
END_TEST

/* A term far beyond any history of elections (a forged VOTE with term
 * 2^64-1, an APPEND whose entries are newer than itself) is refused and
 * counted: the node keeps its term and vote, sends nothing, and a state
 * already at the limit does not open (issue 15: one datagram left a group
 * without a primary for good). */
START_TEST(insane_terms_are_refused)
{
	struct sim *s = bench(3);
	struct node *n = &s->nodes[0];
	uint64_t id = 7;
	struct raft_entry e = { 9, &id, sizeof(id) };
	struct raft_stats st;
	struct raft *r2;
	struct raft_config cfg = { .id = 0, .n_nodes = 3, .term = RAFT_TERM_LIMIT,
				   .voted_for = RAFT_NOBODY };
	struct raft_io io = sim_io;

	n->term = 5;
	sim_start(s);
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_VOTE, .from = 1, .term = UINT64_MAX, .seq = 9, .seq_term = 5 },
		 NULL);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_HEARTBEAT,
				    .from = 2,
				    .term = 5 + RAFT_TERM_STEP_MAX + 1 },
		 NULL);
	/* entries of term 9 in an APPEND of term 6 */
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_APPEND, .from = 2, .term = 6, .seq = 0, .n_entries = 1 },
		 &e);
	ck_assert_uint_eq(s->n_heap, 0); /* no answer to any */
	ck_assert_uint_eq(raft_term(n->r), 5);
	ck_assert_uint_eq(n->term, 5); /* nothing persisted */
	ck_assert_uint_eq(n->len, 0);
	raft_get_stats(n->r, &st);
	ck_assert_uint_eq(st.terms_refused, 3);
	/* the largest step allowed is taken */
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_HEARTBEAT, .from = 2, .term = 5 + RAFT_TERM_STEP_MAX },
		 NULL);
	ck_assert_uint_eq(raft_term(n->r), 5 + RAFT_TERM_STEP_MAX);
	drop_msgs(s);
	io.ctx = &s->nodes[1];
	ck_assert_int_eq(raft_open(&r2, &cfg, &io, s->now), -ERANGE);
	bench_free(s);
}
END_TEST

START_TEST(primary_commits_on_a_majority_of_its_term)
{
	static const uint64_t terms[] = { 1, 1 };
	struct sim *s = bench(3);
	struct node *n = &s->nodes[0];
	struct msg *x;
	uint64_t id = 42, seq;

	give_log(s, 0, terms, 2);
	n->term = 1;
	sim_start(s);
	s->now = raft_deadline(n->r);
	raft_tick(n->r, s->now); /* pre-vote */
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_VOTE);
	ck_assert(x->m.flags & RAFT_F_PRE);
	ck_assert_uint_eq(x->m.term, 2);
	ck_assert_uint_eq(raft_term(n->r), 1);
	free_msg(x);
	drop_msgs(s);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE_REPLY,
				    .from = 2,
				    .term = 2,
				    .flags = RAFT_F_PRE | RAFT_F_GRANTED },
		 NULL);
	ck_assert_int_eq(raft_role(n->r), RAFT_CANDIDATE);
	ck_assert_uint_eq(n->term, 2);
	ck_assert_int_eq(n->voted_for, 0);
	drop_msgs(s);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE_REPLY,
				    .from = 1,
				    .term = 2,
				    .flags = RAFT_F_GRANTED },
		 NULL);
	ck_assert_int_eq(raft_role(n->r), RAFT_PRIMARY);
	ck_assert_uint_eq(n->len, 3);
	x = next_msg(s); /* the term start goes to all */
	ck_assert_int_eq(x->m.type, RAFT_MSG_APPEND);
	ck_assert_uint_eq(x->m.seq, 2);
	ck_assert_uint_eq(x->m.seq_term, 1);
	ck_assert_uint_eq(x->m.n_entries, 1);
	free_msg(x);
	drop_msgs(s);
	ck_assert_int_eq(raft_propose(n->r, &id, sizeof(id), &seq), 0);
	ck_assert_int_eq(raft_flush(n->r, s->now), 0);
	drop_msgs(s);
	/* an ack of seq 2 (term 1) commits nothing: not of our term */
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_ACK, .from = 1, .term = 2, .seq = 2, .seq_term = 1 },
		 NULL);
	ck_assert_uint_eq(raft_commit(n->r), 0);
	/* a wrong ack (term mismatch) counts for nothing */
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_ACK, .from = 1, .term = 2, .seq = 4, .seq_term = 1 },
		 NULL);
	ck_assert_uint_eq(raft_commit(n->r), 0);
	recv_msg(s, 0,
		 (struct raft_msg){
			 .type = RAFT_MSG_ACK, .from = 2, .term = 2, .seq = 3, .seq_term = 2 },
		 NULL);
	ck_assert_uint_eq(raft_commit(n->r), 3);
	ck_assert_uint_eq(n->applied, 3);
	x = next_msg(s); /* announced at once */
	ck_assert_int_eq(x->m.type, RAFT_MSG_HEARTBEAT);
	ck_assert_uint_eq(x->m.commit, 3);
	ck_assert_uint_eq(x->m.seq, 4);
	free_msg(x);
	drop_msgs(s);
	/* a retransmission request is served from the journal */
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_REQUEST, .from = 1, .term = 2, .seq = 2 },
		 NULL);
	x = next_msg(s);
	ck_assert_int_eq(x->m.type, RAFT_MSG_APPEND);
	ck_assert_int_eq(x->m.to, 1);
	ck_assert_uint_eq(x->m.seq, 1);
	ck_assert_uint_eq(x->m.n_entries, 3);
	ck_assert_uint_eq(x->ents[2].id, 42);
	free_msg(x);
	bench_free(s);
}
END_TEST

START_TEST(primary_cut_off_steps_down)
{
	struct sim *s = bench(3);
	struct node *n = &s->nodes[0];
	struct raft_stats st;

	sim_start(s);
	s->now = raft_deadline(n->r);
	raft_tick(n->r, s->now);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE_REPLY,
				    .from = 1,
				    .term = 1,
				    .flags = RAFT_F_PRE | RAFT_F_GRANTED },
		 NULL);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE_REPLY,
				    .from = 1,
				    .term = 1,
				    .flags = RAFT_F_GRANTED },
		 NULL);
	ck_assert_int_eq(raft_role(n->r), RAFT_PRIMARY);
	/* nobody answers: heartbeats until the maximum election timeout */
	for (int i = 0; i < 100 && raft_role(n->r) == RAFT_PRIMARY; i++) {
		s->now = raft_deadline(n->r);
		raft_tick(n->r, s->now);
	}
	ck_assert_int_eq(raft_role(n->r), RAFT_STANDBY);
	ck_assert_uint_eq(raft_term(n->r), 1);
	raft_get_stats(n->r, &st);
	ck_assert_uint_eq(st.stepdowns, 1);
	drop_msgs(s);
	bench_free(s);
}
END_TEST

/* A 3-node group under a steady client: the primary hands over to the
 * standby asked for, well within one election timeout, with nothing lost;
 * a hand-over to a dead node is abandoned and the primary goes on. */
START_TEST(hand_over_to_a_standby)
{
	struct sim *s = bench(3);
	struct raft_stats st;
	uint64_t term, before, t0;
	int p, to;

	s->p.client_mean = 2 * MS;
	s->client_at = 2 * MS;
	s->p.chaos = 100000 * MS; /* never heals: quiet all along */
	sim_start(s);
	s->stop_at = 1000 * MS;
	sim_run(s);
	ck_assert_msg(!s->failed, "%s", s->why);
	p = find_primary(s);
	ck_assert_int_ge(p, 0);
	term = raft_term(s->nodes[p].r);
	before = s->n_com;
	ck_assert_uint_gt(before, 100);
	to = (p + 2) % 3;
	ck_assert_int_eq(raft_transfer(s->nodes[p].r, p, s->now), -EINVAL);
	ck_assert_int_eq(raft_transfer(s->nodes[to].r, p, s->now), -EPERM);
	ck_assert_int_eq(raft_transfer(s->nodes[p].r, to, s->now), 0);
	ck_assert_int_eq(raft_transfer(s->nodes[p].r, RAFT_NOBODY, s->now), -EALREADY);
	ck_assert_int_eq(raft_transfer_target(s->nodes[p].r), to);
	{
		uint64_t id = 1, seq;

		ck_assert_int_eq(raft_propose(s->nodes[p].r, &id, sizeof(id), &seq), -EBUSY);
	}
	t0 = s->now;
	/* a few network delays, far below the 150 ms election timeout */
	while (!s->failed && s->now < t0 + 100 * MS &&
	       (find_primary(s) != to || raft_term(s->nodes[to].r) <= term)) {
		s->stop_at = s->now + MS / 10;
		sim_run(s);
	}
	ck_assert_msg(!s->failed, "%s", s->why);
	ck_assert_int_eq(find_primary(s), to);
	ck_assert_uint_eq(raft_term(s->nodes[to].r), term + 1);
	ck_assert_uint_lt(s->now - t0, 20 * MS);
	ck_assert_int_eq(raft_role(s->nodes[p].r), RAFT_STANDBY);
	raft_get_stats(s->nodes[to].r, &st);
	ck_assert_uint_eq(st.timeout_now, 1);
	/* orders go on in the new term, everything committed before is kept
	 * (the checker compares every commit with the first one seen) */
	s->stop_at = s->now + 500 * MS;
	sim_run(s);
	ck_assert_msg(!s->failed, "%s", s->why);
	ck_assert_uint_gt(s->n_com, before + 100);
	ck_assert_uint_eq(s->elections, 2);

	/* a hand-over to a node that has just died: accepted (it was heard
	 * lately), abandoned after election_max, and the primary goes on */
	p = to;
	to = (p + 1) % 3;
	node_crash(s, to, UINT64_MAX);
	term = raft_term(s->nodes[p].r);
	ck_assert_int_eq(raft_transfer(s->nodes[p].r, to, s->now), 0);
	s->stop_at = s->now + 250 * MS;
	sim_run(s);
	ck_assert_int_eq(raft_transfer_target(s->nodes[p].r), to); /* still trying */
	before = s->n_com;
	s->stop_at = s->now + 400 * MS;
	sim_run(s);
	ck_assert_msg(!s->failed, "%s", s->why);
	ck_assert_int_eq(find_primary(s), p);
	ck_assert_uint_eq(raft_term(s->nodes[p].r), term);
	ck_assert_int_eq(raft_transfer_target(s->nodes[p].r), RAFT_NOBODY);
	raft_get_stats(s->nodes[p].r, &st);
	ck_assert_uint_eq(st.transfers_abandoned, 1);
	ck_assert_uint_gt(s->n_com, before + 50);
	/* and now it has not been heard for longer than election_max */
	ck_assert_int_eq(raft_transfer(s->nodes[p].r, to, s->now), -EHOSTUNREACH);
	drop_msgs(s);
	bench_free(s);
}
END_TEST

/* A vote request lost on the way (UDP, under load) is sent again every
 * heartbeat interval: the election is won in the same term, long before
 * the election timeout would start another (the drill's step-down expects
 * the target primary in the next term, not the one after). */
START_TEST(lost_vote_request_is_asked_again)
{
	struct sim *s = bench(3);
	struct node *n = &s->nodes[0];
	struct msg *x;
	uint64_t t0;

	sim_start(s);
	s->now = raft_deadline(n->r);
	raft_tick(n->r, s->now); /* pre-vote, lost */
	drop_msgs(s);
	t0 = s->now;
	ck_assert_uint_eq(raft_deadline(n->r), t0 + s->p.hb);
	s->now = raft_deadline(n->r);
	raft_tick(n->r, s->now);
	ck_assert_int_eq(raft_role(n->r), RAFT_PRECANDIDATE);
	x = next_msg(s); /* asked again, the same pre-vote */
	ck_assert_int_eq(x->m.type, RAFT_MSG_VOTE);
	ck_assert(x->m.flags & RAFT_F_PRE);
	ck_assert_uint_eq(x->m.term, 1);
	free_msg(x);
	drop_msgs(s);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE_REPLY,
				    .from = 1,
				    .term = 1,
				    .flags = RAFT_F_PRE | RAFT_F_GRANTED },
		 NULL);
	ck_assert_int_eq(raft_role(n->r), RAFT_CANDIDATE);
	ck_assert_uint_eq(raft_term(n->r), 1);
	drop_msgs(s); /* the real vote request, lost */
	t0 = s->now;
	/* the voters: node 1 grants the repeat as it would the first */
	for (int k = 0; k < 2; k++) {
		s->now = raft_deadline(n->r);
		ck_assert_uint_lt(s->now, t0 + s->p.emin);
		raft_tick(n->r, s->now);
		ck_assert_int_eq(raft_role(n->r), RAFT_CANDIDATE);
		x = next_msg(s);
		ck_assert_int_eq(x->m.type, RAFT_MSG_VOTE);
		ck_assert(!(x->m.flags & RAFT_F_PRE));
		ck_assert_uint_eq(x->m.term, 1);
		ck_assert_int_eq(recv_msg(s, 1, x->m, NULL), 0);
		free_msg(x);
		x = next_msg(s);
		if (x->m.type != RAFT_MSG_VOTE_REPLY)
			free_msg(x), x = next_msg(s); /* node 2's copy, not delivered */
		ck_assert_int_eq(x->m.type, RAFT_MSG_VOTE_REPLY);
		ck_assert_int_eq(x->m.from, 1);
		ck_assert(x->m.flags & RAFT_F_GRANTED);
		free_msg(x);
		drop_msgs(s); /* the grant, lost the first time */
	}
	ck_assert_int_eq(s->nodes[1].voted_for, 0);
	recv_msg(s, 0,
		 (struct raft_msg){ .type = RAFT_MSG_VOTE_REPLY,
				    .from = 1,
				    .term = 1,
				    .flags = RAFT_F_GRANTED },
		 NULL);
	ck_assert_int_eq(raft_role(n->r), RAFT_PRIMARY);
	ck_assert_uint_eq(raft_term(n->r), 1);
	drop_msgs(s);
	bench_free(s);
}
END_TEST

START_TEST(quiet_network_elects_one_primary)
{
	static const int sizes[] = { 3, 5 };
	struct sim *s = bench(sizes[_i]);

	s->p.client_mean = 5 * MS;
	s->client_at = 5 * MS;
	s->p.chaos = 3000 * MS;
	sim_start(s);
	sim_run(s);
	ck_assert_msg(!s->failed, "%s", s->why);
	ck_assert_int_ge(find_primary(s), 0);
	ck_assert_uint_eq(s->elections, 1); /* one election, never another */
	ck_assert_uint_gt(s->n_com, 100);
	for (int i = 1; i < s->p.n; i++)
		ck_assert_uint_eq(s->nodes[i].log[s->n_com - 1].hash,
				  s->nodes[0].log[s->n_com - 1].hash);
	bench_free(s);
}
END_TEST

/* ---- the simulation ---- */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

/* Runs n schedules from seed first in a shape (0 or SIM_HOSTILE); prints
 * each failure with the command line that replays it. */
static uint64_t run_schedules(const char *what, unsigned shape, uint64_t first, uint64_t n)
{
	struct sim tot;
	char why[512];
	uint64_t failures = 0;

	memset(&tot, 0, sizeof(tot));
	for (uint64_t seed = first; seed < first + n; seed++) {
		if (run_seed(seed, shape, 0, &tot, why, sizeof(why))) {
			printf("raft sim: %s seed %" PRIu64 " FAILED: %s\n", what, seed, why);
			describe(seed, shape);
			printf("  replay: RAFT_SIM_SEED=%" PRIu64 "%s RAFT_SIM_TRACE=1 %s\n", seed,
			       shape ? " RAFT_SIM_BUGS=0x10000" : "", prog);
			if (++failures >= 5)
				break;
		}
	}
	printf("raft sim: %" PRIu64 " %s schedules from seed %" PRIu64 ", %" PRIu64
	       " failed; %" PRIu64 " steps, %" PRIu64 " messages, %" PRIu64
	       " primaries elected, %" PRIu64 " entries committed, highest term %" PRIu64
	       ", %" PRIu64 " hand-overs asked, %" PRIu64 " done\n",
	       n, what, first, failures, tot.steps, tot.msgs_sent, tot.elections, tot.n_com,
	       tot.max_term, tot.transfers, tot.handed_over);
	fflush(stdout);
	return failures;
}

START_TEST(sim_random_schedules)
{
	uint64_t n = env_u64("RAFT_SIM_SEEDS", DEFAULT_SEEDS), first = env_u64("RAFT_SIM_FIRST", 1);

	ck_assert_uint_eq(run_schedules("chaos", 0, first, n), 0);
}
END_TEST

/* The schedules the bugs are hunted with must pass without the bugs. */
START_TEST(sim_hostile_schedules)
{
	uint64_t n = env_u64("RAFT_SIM_SEEDS", DEFAULT_SEEDS) / 4 + 1;
	uint64_t first = env_u64("RAFT_SIM_FIRST", 1);

	ck_assert_uint_eq(run_schedules("hostile", SIM_HOSTILE, first, n), 0);
}
END_TEST

/* A deliberate bug must be reported by the checker as a safety violation
 * within some schedules, and the schedule that shows it must pass without
 * the bug. */
static const struct {
	unsigned bug;
	const char *name;
	uint64_t max_seeds;
} bugs[] = {
	{ RAFT_BUG_VOTE_ANY_LOG, "votes without the up-to-date check", 3000 },
	{ RAFT_BUG_COMMIT_OLD_TERM, "commits older terms' entries by counting", 10000 },
	{ RAFT_BUG_FORGET_VOTE, "forgets its vote across a crash", 10000 },
	{ RAFT_BUG_COUNT_VOLATILE, "counts entries not yet on disk", 3000 },
};

START_TEST(sim_catches_a_deliberate_bug)
{
	unsigned bug = bugs[_i].bug | SIM_HOSTILE;
	char why[512], why2[512];
	uint64_t seed;

	for (seed = 1; seed <= bugs[_i].max_seeds; seed++)
		if (run_seed(seed, bug, 0, NULL, why, sizeof(why)) == 1)
			break; /* a safety violation, not just slowness */
	if (seed <= bugs[_i].max_seeds) {
		printf("raft sim: bug \"%s\" caught by schedule %" PRIu64 ": %s\n  replay: "
		       "RAFT_SIM_SEED=%" PRIu64 " RAFT_SIM_BUGS=%#x RAFT_SIM_TRACE=1 %s\n",
		       bugs[_i].name, seed, why, seed, bug, prog);
	} else {
		printf("raft sim: bug \"%s\" NOT caught in %" PRIu64 " schedules\n", bugs[_i].name,
		       bugs[_i].max_seeds);
	}
	fflush(stdout);
	ck_assert_uint_le(seed, bugs[_i].max_seeds);
	ck_assert_msg(run_seed(seed, SIM_HOSTILE, 0, NULL, why2, sizeof(why2)) == 0,
		      "schedule %" PRIu64 " fails without the bug too: %s", seed, why2);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Primary crash to the first entry of the new term committed, 150-300 ms
 * election timeouts, 50 ms heartbeats, a 1 ms network, commands every 1-9
 * ms. */
START_TEST(sim_failover_time)
{
	static const int sizes[] = { 3, 5 };
	uint64_t n = env_u64("RAFT_SIM_FAILOVERS", 300), *v = calloc(n, sizeof(*v));
	uint64_t over = 0, sum = 0;

	ck_assert_ptr_nonnull(v);
	for (uint64_t k = 0; k < n; k++) {
		struct sim *s = malloc(sizeof(*s));
		struct params p = {
			.n = sizes[_i],
			.hb = 50 * MS,
			.emin = 150 * MS,
			.emax = 300 * MS,
			.req = 20 * MS,
			.max_entries = 64,
			.delay = 1 * MS,
			.client_mean = 5 * MS,
			.chaos = UINT64_MAX / 2,
		};

		ck_assert_ptr_nonnull(s);
		p.failover_at = 1000 * MS + (k * 7919 % 100) * MS;
		sim_init(s, 1000000 + k, &p);
		sim_start(s);
		sim_run(s);
		ck_assert_msg(!s->failed, "failover seed %" PRIu64 ": %s", 1000000 + k, s->why);
		ck_assert(s->failover_ns > 0);
		v[k] = s->failover_ns;
		sum += v[k];
		over += v[k] > 500 * MS;
		sim_free(s);
		free(s);
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("raft sim: failover of %d nodes (election 150-300 ms, heartbeat 50 ms, 1 ms "
	       "network), "
	       "%" PRIu64
	       " runs: min %.1f p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f mean %.1f ms; "
	       "%" PRIu64 " over 500 ms\n",
	       sizes[_i], n, (double)v[0] / MS, (double)v[n / 10] / MS, (double)v[n / 2] / MS,
	       (double)v[n * 9 / 10] / MS, (double)v[n * 99 / 100] / MS, (double)v[n - 1] / MS,
	       (double)sum / (double)n / MS, over);
	fflush(stdout);
	free(v);
}
END_TEST

/* RAFT_SIM_SEED=S: replays one schedule (with RAFT_SIM_BUGS, RAFT_SIM_TRACE). */
START_TEST(sim_replay)
{
	uint64_t seed = env_u64("RAFT_SIM_SEED", 1);
	char why[512];
	unsigned b = env_bugs();
	int failed;

	printf("raft sim: replaying seed %" PRIu64 " (bugs %#x)\n", seed, b);
	describe(seed, b);
	failed = run_seed(seed, b, getenv("RAFT_SIM_TRACE") != NULL, NULL, why, sizeof(why));
	printf("raft sim: seed %" PRIu64 ": %s\n", seed, failed ? why : "every check held");
	fflush(stdout);
	ck_assert_msg(!failed, "seed %" PRIu64 ": %s", seed, why);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s = suite_create("raft");
	TCase *unit = tcase_create("unit");
	TCase *sim = tcase_create("sim");
	TCase *bug = tcase_create("bugs");
	TCase *fo = tcase_create("failover");
	const char *one = getenv("RAFT_SIM_SEED");

	if (argc > 0)
		prog = argv[0];
	if (one && *one) {
		TCase *rp = tcase_create("replay");

		tcase_set_timeout(rp, 3600);
		tcase_add_test(rp, sim_replay);
		suite_add_tcase(s, rp);
		goto run;
	}

	tcase_add_test(unit, single_node_elects_itself_and_commits);
	tcase_add_test(unit, vote_needs_an_up_to_date_log_and_one_per_term);
	tcase_add_test(unit, journal_newer_than_saved_vote_refuses_that_term);
	tcase_add_test(unit, new_term_truncates_a_divergent_tail);
	tcase_add_test(unit, mismatch_cuts_and_asks_from_the_previous_run);
	tcase_add_test(unit, gap_asks_for_a_retransmission_and_repeats);
	tcase_add_test(unit, older_term_is_fenced);
	tcase_add_test(unit, insane_terms_are_refused);
	tcase_add_test(unit, primary_commits_on_a_majority_of_its_term);
	tcase_add_test(unit, primary_cut_off_steps_down);
	tcase_add_test(unit, hand_over_to_a_standby);
	tcase_add_test(unit, lost_vote_request_is_asked_again);
	tcase_add_loop_test(unit, quiet_network_elects_one_primary, 0, 2);
	suite_add_tcase(s, unit);

	tcase_set_timeout(sim, 600);
	tcase_add_test(sim, sim_random_schedules);
	tcase_add_test(sim, sim_hostile_schedules);
	suite_add_tcase(s, sim);

	tcase_set_timeout(bug, 300);
	tcase_add_loop_test(bug, sim_catches_a_deliberate_bug, 0,
			    (int)(sizeof(bugs) / sizeof(bugs[0])));
	suite_add_tcase(s, bug);

	tcase_set_timeout(fo, 300);
	tcase_add_loop_test(fo, sim_failover_time, 0, 2);
	suite_add_tcase(s, fo);

run:
	return testutil_run(s, 0);
}
