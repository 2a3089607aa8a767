/* STATS replies from a table (counters.h). */
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
