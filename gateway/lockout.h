/* The failed-login table (lockout.c): back-off and temporary lockout per
 * (username, source address) pair and per source address, in a fixed table
 * allocated once. A pure module: no clock (time is passed in, ns on any
 * monotonic clock), no I/O, no logging, no allocation after lockout_new. */
#ifndef LOCKSTEP_GW_LOCKOUT_H
#define LOCKSTEP_GW_LOCKOUT_H

#include <stddef.h>
#include <stdint.h>

#define LOCKOUT_ANY 0xffffffffu /* the login of an address's own entry */
#define LOCKOUT_UNKNOWN 0xfffffffeu /* the login of every name that is no login */

struct lockout_config {
	uint32_t pair_max; /* failures of one login from one address that lock the pair */
	uint32_t addr_max; /* failures from one address (any login) that lock the address */
	uint64_t window_ns; /* failures further apart than this start the count again */
	uint64_t lockout_ns; /* how long a lock lasts */
	uint64_t backoff_ns; /* the delay after a first failure; doubled per failure */
	uint64_t backoff_max_ns; /* the longest delay, and a locked-out login's */
};

enum lockout_state {
	LOCKOUT_OPEN, /* may try */
	LOCKOUT_PAIR, /* this login is locked at this address */
	LOCKOUT_ADDR, /* every login is locked at this address */
};

struct lockout_counts {
	uint64_t entries, capacity; /* in use (failures remembered) and room */
	uint64_t evictions; /* entries dropped for room before they expired */
};

struct lockout;

/* A table of `entries` (rounded up to a power of two, at least 64); seed
 * keys its hash (random: addresses chosen to collide gain nothing). NULL
 * when out of memory. */
struct lockout *lockout_new(size_t entries, const struct lockout_config *cfg, uint64_t seed);
void lockout_free(struct lockout *t); /* accepts NULL */
/* Whether login (LOCKOUT_UNKNOWN for a name that is none) may try from
 * addr at now; *left: ns until the lock ends (when locked). */
enum lockout_state lockout_check(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now,
				 uint64_t *left);
/* A failed login: counted for the pair and the address. Returns the delay
 * before the answer (ns); *locked is set to what the failure locked now
 * (LOCKOUT_OPEN: nothing). */
uint64_t lockout_fail(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now,
		      enum lockout_state *locked);
/* A successful login: the pair's failures are forgotten (the address's
 * stay: they are every login's). */
void lockout_success(struct lockout *t, uint32_t addr, uint32_t login, uint64_t now);
void lockout_counts(const struct lockout *t, struct lockout_counts *out);

#endif
