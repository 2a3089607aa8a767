/* The tape's flow-control table: the receivers (matcher replicas) heard,
 * and the publisher limit they make. Pure: no clock (times are passed
 * in), no allocation, no logging, no system call; sequencer/flow.c does
 * the I/O around it, and tests drive it directly.
 *
 * The limit is min(applied + window) over the receivers that count, heard
 * since a given time. A receiver in step counts. One that has just joined
 * (or come back after being forgotten) behind what the tape has carried,
 * or that announced a planned pause (FLOW_STATUS_PAUSING: a snapshot, and
 * every status while it catches up after it), does not while another
 * receiver of its partition is in step: the
 * replicas of a partition carry the same executions, so one of them is
 * enough to pace the tape, and waiting for the one that paused would stop
 * the exchange for as long as it takes it to catch up, every snapshot. Its
 * buffer still bounds the tape (applied + 4/3 of its window, the window
 * being 3/4 of the buffer): past that the tape waits rather than let its
 * datagrams drop (the matcher reads at its full priority once that buffer
 * is half full: the kernel charges read datagrams until the queue empties,
 * up to a quarter of the buffer, and that must fit too).
 * It is in step again from the first status without the flag in which its
 * window reaches what the tape has carried (`published`), or once
 * catchup_ns have passed since its first status behind, pauses and flagged
 * statuses on the way included (one
 * slower than its partner would never catch up with a tape paced by the
 * partner: it is waited for again, as before its pause). A receiver in
 * step that falls behind stays counted: that is the slow receiver the
 * limit is for. A partition with no receiver in step counts all of its
 * own. */
#ifndef LOCKSTEP_FLOWTABLE_H
#define LOCKSTEP_FLOWTABLE_H

#include <netinet/in.h>
#include <stdint.h>

#include "flowstatus.h"

#define FLOW_TABLE_RECEIVERS 256 /* 16 partitions x 16 replicas */

enum flow_rcv_state { FLOW_RCV_JOINING, FLOW_RCV_PAUSED, FLOW_RCV_IN_STEP };

struct flow_rcv {
	struct sockaddr_in addr; /* where its status comes from */
	char name[FLOW_STATUS_NAME_LEN + 1];
	uint16_t partition;
	uint8_t state; /* enum flow_rcv_state */
	uint64_t applied, window, heard_ns;
	uint64_t behind_ns; /* its first status behind since it was in step (0: none) */
};

struct flow_table {
	struct flow_rcv r[FLOW_TABLE_RECEIVERS];
	unsigned n;
	uint64_t window; /* for a receiver that states none (0: no limit at all) */
	uint64_t catchup_ns; /* how long a receiver may stay behind uncounted */
};

/* What a status changed, for the caller's log and counters. */
enum flow_change {
	FLOW_JOINED = 1, /* a receiver not in the table */
	FLOW_PAUSED = 2, /* a pause announced (not already paused) */
	FLOW_IN_STEP = 4, /* counted again (or for the first time) */
	FLOW_LATE = 8, /* with FLOW_IN_STEP: catchup_ns passed, still behind */
};

/* A status from `from` heard at `now`, the tape having carried up to
 * `published`. The receiver's entry, or NULL when the table is full;
 * *changes: the flow_change bits. */
struct flow_rcv *flow_table_status(struct flow_table *t, const struct flow_status *st,
				   const struct sockaddr_in *from, uint64_t now,
				   uint64_t published, unsigned *changes);
/* The limit from the receivers heard since `since`: UINT64_MAX when none
 * counts, or the table's window is 0. */
uint64_t flow_table_limit(const struct flow_table *t, uint64_t since);
/* The receiver that sets that limit (NULL: none), the limit, and whether
 * the receiver is counted (else only its buffer bounds the tape). */
const struct flow_rcv *flow_table_bound(const struct flow_table *t, uint64_t since,
					uint64_t *limit, int *counted);
/* Forgets the receivers not heard since `since` (keeping the order),
 * calling forgot() for each first. */
void flow_table_expire(struct flow_table *t, uint64_t since,
		       void (*forgot)(void *ctx, const struct flow_rcv *r), void *ctx);
/* The receivers not in step now. */
unsigned flow_table_behind(const struct flow_table *t);

#endif
