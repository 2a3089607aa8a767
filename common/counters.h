/* STATS replies from a table, and STATUS's pools: a daemon lists its counters once, each a name
 * and whether it is a gauge (a level that goes up and down, exported to
 * Prometheus without _total) or a counter (only grows while the daemon
 * runs); the reply carries that flag, so lockstepctl needs no list of its
 * own. No allocation: a struct counters holds the reply's storage and
 * stays valid until the next counters_reset(). */
#ifndef LOCKSTEP_COUNTERS_H
#define LOCKSTEP_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep.pb-c.h"

#define COUNTERS_MAX 192 /* values in one STATS reply */

struct counter_def {
	const char *name; /* [a-z0-9_]+, unique within a daemon */
	int gauge;
};

/* Table rows: COUNTER(name) and GAUGE(name), for a struct of uint64_t
 * fields listed in the same order. */
#define COUNTER(name) { #name, 0 }
#define GAUGE(name) { #name, 1 }

struct counters {
	size_t n;
	Lockstep__Counter c[COUNTERS_MAX];
	Lockstep__Counter *p[COUNTERS_MAX];
};

void counters_reset(struct counters *cs);
/* Adds one value; name must outlive the reply. Past COUNTERS_MAX values
 * are left out (a daemon's table is checked against that in its tests). */
void counters_add(struct counters *cs, const char *name, uint64_t value, int gauge);
/* Adds n values named by defs[0..n-1]. */
void counters_add_table(struct counters *cs, const struct counter_def *defs,
			const uint64_t *values, size_t n);
/* Points the reply at the values. */
void counters_reply(struct counters *cs, Lockstep__ControlReply *reply);

/* STATUS's pools: how full each preallocated pool is. A daemon's status hook
 * fills one struct pools (its own storage, valid until the next call) and
 * points the reply at it. */
#define POOLS_MAX 8

struct pools {
	size_t n;
	Lockstep__Pool c[POOLS_MAX];
	Lockstep__Pool *p[POOLS_MAX];
};

/* Starts over; name must outlive the reply. Past POOLS_MAX, left out. */
void pools_reset(struct pools *ps);
void pools_add(struct pools *ps, const char *name, uint64_t used, uint64_t size);
void pools_reply(struct pools *ps, Lockstep__ControlReply *reply);

#endif
