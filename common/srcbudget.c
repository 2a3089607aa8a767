/* A byte budget per source address (srcbudget.h). */
#include <stddef.h>
#include <string.h>

#include "srcbudget.h"

void src_budget_init(struct src_budget *b, uint64_t rate, uint64_t burst)
{
	memset(b, 0, sizeof(*b));
	b->rate = rate;
	b->burst = burst ? burst : rate;
}

/* addr's slot, or the least recently used one, taken over (full bucket). */
static struct src_budget_slot *slot_of(struct src_budget *b, uint32_t addr, uint64_t now)
{
	struct src_budget_slot *lru = &b->slot[0];

	for (unsigned i = 0; i < SRC_BUDGET_SLOTS; i++) {
		struct src_budget_slot *s = &b->slot[i];

		if (s->last_ns && s->addr == addr)
			return s;
		if (s->last_ns < lru->last_ns)
			lru = s;
	}
	lru->addr = addr;
	lru->tokens = b->burst;
	lru->last_ns = now ? now : 1;
	return lru;
}

/* addr's slot, its bucket filled up to now. */
static struct src_budget_slot *refill(struct src_budget *b, uint32_t addr, uint64_t now)
{
	struct src_budget_slot *s = slot_of(b, addr, now);

	if (now > s->last_ns) {
		unsigned __int128 add = (unsigned __int128)(now - s->last_ns) * b->rate / 1000000000u;

		s->tokens = b->burst - s->tokens < add ? b->burst : s->tokens + (uint64_t)add;
		s->last_ns = now;
	}
	return s;
}

uint64_t src_budget_room(struct src_budget *b, uint32_t addr, uint64_t now)
{
	return b->rate ? refill(b, addr, now)->tokens : UINT64_MAX;
}

void src_budget_charge(struct src_budget *b, uint32_t addr, uint64_t bytes, uint64_t now)
{
	struct src_budget_slot *s;

	if (!b->rate)
		return;
	s = refill(b, addr, now);
	s->tokens = s->tokens > bytes ? s->tokens - bytes : 0;
}

int src_budget_take(struct src_budget *b, uint32_t addr, uint64_t bytes, uint64_t now)
{
	if (src_budget_room(b, addr, now) < bytes) {
		b->refused++;
		return 0;
	}
	src_budget_charge(b, addr, bytes, now);
	return 1;
}

unsigned src_budget_prefix(struct src_budget *b, uint32_t addr, const size_t *lens, unsigned n,
			   uint64_t now)
{
	uint64_t room = src_budget_room(b, addr, now), bytes = 0;
	unsigned k = 0;

	while (k < n && bytes + lens[k] <= room)
		bytes += lens[k++];
	src_budget_charge(b, addr, bytes, now);
	return k;
}
