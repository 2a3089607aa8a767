/* Time, read through the vDSO (clock_gettime costs no syscall). */
#ifndef LOCKSTEP_CLOCK_H
#define LOCKSTEP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Monotonic ns, for timers and latencies. */
static inline uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* Wall-clock ns since the epoch, for the tape's timestamps. */
static inline uint64_t wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

/* ns since local midnight of a wall-clock time (OUCH timestamps); callers
 * pass the offset of midnight they computed once a day. */
static inline uint64_t ns_since_midnight(uint64_t wall, uint64_t midnight)
{
	return wall >= midnight ? wall - midnight : 0;
}

#endif
