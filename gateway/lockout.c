/* The failed-login table: one entry per (login, address) pair and one per
 * address (login LOCKOUT_ANY) that failed lately, in an array allocated
 * once. An entry lives in one of LOCKOUT_PROBE slots after its hash; a new
 * one takes a free or expired slot there, else evicts the least useful
 * (unlocked before locked, then the oldest): every operation touches at
 * most LOCKOUT_PROBE slots, whatever the attack. */
#include <stdlib.h>
#include <string.h>

#include "lockout.h"

#define LOCKOUT_PROBE 8

struct lockout_entry {
	uint32_t addr, login;
	uint32_t failures; /* since first_fail, or since the last lock */
	uint32_t used;
	uint64_t first_fail, last_fail;
	uint64_t locked_until; /* 0: not locked */
};

struct lockout {
	struct lockout_config cfg;
	uint64_t seed, evictions, now; /* now: the latest time passed in */
	size_t mask;
	struct lockout_entry v[];
};

struct lockout *lockout_new(size_t entries, const struct lockout_config *cfg, uint64_t seed)
{
	size_t n = 64;
	struct lockout *t;

	while (n < entries && n < ((size_t)1 << 30))
		n *= 2;
	t = calloc(1, sizeof(*t) + n * sizeof(t->v[0]));
	if (!t)
		return NULL;
	t->cfg = *cfg;
	t->seed = seed;
	t->mask = n - 1;
	return t;
}

void lockout_free(struct lockout *t)
{
	free(t);
}

/* splitmix64's finaliser over the key and the seed */
static size_t slot_of(const struct lockout *t, uint32_t addr, uint32_t login)
{
	uint64_t x = ((uint64_t)addr << 32 | login) ^ t->seed;

	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return (size_t)(x ^ (x >> 31)) & t->mask;
}

/* An entry that says nothing any more: not locked, last failure out of
 * the window. */
static int expired(const struct lockout *t, const struct lockout_entry *e, uint64_t now)
{
	return !e->used || (e->locked_until <= now && now - e->last_fail > t->cfg.window_ns);
}

static struct lockout_entry *find(struct lockout *t, uint32_t addr, uint32_t login)
{
	size_t h = slot_of(t, addr, login);

	for (size_t i = 0; i < LOCKOUT_PROBE; i++) {
		struct lockout_entry *e = &t->v[(h + i) & t->mask];

		if (e->used && e->addr == addr && e->login == login)
			return e;
	}
	return NULL;
}

/* 1 when a is a better slot to give up than b. */
static int worse(const struct lockout_entry *a, const struct lockout_entry *b, uint64_t now)
{
	int la = a->locked_until > now, lb = b->locked_until > now;

	if (la != lb)
		return lb;
	return la ? a->locked_until < b->locked_until : a->last_fail < b->last_fail;
}

/* The key's entry, made (fresh) when it has none. */
static struct lockout_entry *take(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now)
{
	struct lockout_entry *e = find(t, addr, login), *victim = NULL;
	size_t h = slot_of(t, addr, login);

	if (e)
		return e;
	for (size_t i = 0; i < LOCKOUT_PROBE; i++) {
		struct lockout_entry *c = &t->v[(h + i) & t->mask];

		if (expired(t, c, now)) {
			victim = c;
			break;
		}
		if (!victim || worse(c, victim, now))
			victim = c;
	}
	if (!expired(t, victim, now))
		t->evictions++;
	memset(victim, 0, sizeof(*victim));
	victim->used = 1;
	victim->addr = addr;
	victim->login = login;
	victim->first_fail = now;
	return victim;
}

enum lockout_state lockout_check(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now,
				 uint64_t *left)
{
	const struct lockout_entry *a = find(t, addr, LOCKOUT_ANY), *p = find(t, addr, login);

	t->now = now;
	if (a && a->locked_until > now) {
		*left = a->locked_until - now;
		return LOCKOUT_ADDR;
	}
	if (p && p->locked_until > now) {
		*left = p->locked_until - now;
		return LOCKOUT_PAIR;
	}
	return LOCKOUT_OPEN;
}

/* One more failure on e; 1 when it locks e now. */
static int count(struct lockout *t, struct lockout_entry *e, uint32_t max, uint64_t now)
{
	if (now - e->first_fail > t->cfg.window_ns || e->failures == 0) {
		e->failures = 0;
		e->first_fail = now;
	}
	e->failures++;
	e->last_fail = now;
	if (e->failures < max || e->locked_until > now)
		return 0;
	e->locked_until = now + t->cfg.lockout_ns;
	e->failures = 0; /* after the lock: max more tries */
	return 1;
}

/* backoff * 2^(n - 1), at most backoff_max */
static uint64_t backoff(const struct lockout_config *c, uint32_t n)
{
	uint64_t d = c->backoff_ns;

	for (uint32_t i = 1; i < n && d < c->backoff_max_ns; i++)
		d *= 2;
	return d < c->backoff_max_ns ? d : c->backoff_max_ns;
}

uint64_t lockout_fail(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now,
		      enum lockout_state *locked)
{
	struct lockout_entry *p = take(t, addr, login, now);
	uint32_t np, na;
	int lp = count(t, p, t->cfg.pair_max, now);
	/* the address's entry may take p's slot: p is looked up again below */
	struct lockout_entry *a = take(t, addr, LOCKOUT_ANY, now);
	int la = count(t, a, t->cfg.addr_max, now);

	t->now = now;
	*locked = la ? LOCKOUT_ADDR : lp ? LOCKOUT_PAIR : LOCKOUT_OPEN;
	if (la || lp)
		return t->cfg.backoff_max_ns;
	p = find(t, addr, login);
	np = p ? p->failures : 1;
	na = a->failures;
	return backoff(&t->cfg, np > na ? np : na);
}

void lockout_success(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now)
{
	struct lockout_entry *p = find(t, addr, login);

	t->now = now;
	if (p && p->locked_until <= now)
		memset(p, 0, sizeof(*p));
}

void lockout_counts(const struct lockout *t, struct lockout_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i <= t->mask; i++)
		out->entries += !expired(t, &t->v[i], t->now);
	out->capacity = t->mask + 1;
	out->evictions = t->evictions;
}
