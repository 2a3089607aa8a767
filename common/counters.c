/* STATS replies from a table, and STATUS's pools (counters.h). */
#include "counters.h"

void counters_reset(struct counters *cs)
{
	cs->n = 0;
}

void counters_add(struct counters *cs, const char *name, uint64_t value, int gauge)
{
	Lockstep__Counter *c;

	if (cs->n >= COUNTERS_MAX)
		return;
	c = &cs->c[cs->n];
	lockstep__counter__init(c);
	c->name = (char *)name;
	c->value = value;
	c->gauge = gauge != 0;
	cs->p[cs->n++] = c;
}

void counters_add_table(struct counters *cs, const struct counter_def *defs,
			const uint64_t *values, size_t n)
{
	for (size_t i = 0; i < n; i++)
		counters_add(cs, defs[i].name, values[i], defs[i].gauge);
}

void counters_reply(struct counters *cs, Lockstep__ControlReply *reply)
{
	reply->n_counters = cs->n;
	reply->counters = cs->p;
}

void pools_reset(struct pools *ps)
{
	ps->n = 0;
}

void pools_add(struct pools *ps, const char *name, uint64_t used, uint64_t size)
{
	Lockstep__Pool *c;

	if (ps->n >= POOLS_MAX)
		return;
	c = &ps->c[ps->n];
	lockstep__pool__init(c);
	c->name = (char *)name;
	c->used = used;
	c->size = size;
	ps->p[ps->n++] = c;
}

void pools_reply(struct pools *ps, Lockstep__ControlReply *reply)
{
	reply->n_pools = ps->n;
	reply->pools = ps->p;
}
