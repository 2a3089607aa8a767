/* The matcher daemon around the engine: receives the tape, repairs its gaps
 * (common/rx.h), applies committed events in order, publishes the execution stream and
 * serves its retransmissions. */
#ifndef LOCKSTEP_MATCHER_H
#define LOCKSTEP_MATCHER_H

#include <ev.h>
#include <stdint.h>

#include "config.h"
#include "daemon.h"

struct matcher_config {
	struct node_config node;
	char tape_group[64], tape_iface[64], tape_session[16];
	char tape_retrans[512]; /* comma-separated host:port, 1..RX_MAX_SERVERS */
	char exec_group[64], exec_retrans[64];
	uint64_t partition;
	char symbols[512];
	uint64_t max_shares, max_orders, max_tokens, max_levels;
	uint64_t ring; /* exec blocks kept for retransmission */
	uint64_t rcvbuf, sndbuf;
	uint64_t heartbeat_ns, retrans_wait_ns, retrans_wait_max_ns, request_delay_ns;
	uint64_t reorder_window, reorder_bytes; /* tape events held ahead of a gap */
	double drop_rate; /* loss generator, 0: off */
	uint64_t drop_seed;
	uint64_t batch, max_datagram;
	uint64_t snapshot_interval; /* tape seqs between snapshots, 0: only on request */
	uint64_t snapshot_keep; /* snapshots kept in <state_dir>/snapshots */
};

/* Snapshots: <state_dir>/snapshots/snap-<tape seq, 20 digits>.lss, written by
 * a forked child (copy-on-write: the event loop does not wait for it) to a
 * .tmp file, fsynced and renamed. Layout (little-endian): a 64-byte header
 * { char magic[8] "LSSNAP\0\1", u32 version (1), u32 partition, u64 tape
 * seq (the last event applied), u64 exec_next (the next exec stream
 * sequence number), u64 term, u64 commit, u64 engine_hash, u64 body length },
 * the engine's snapshot (engine_snapshot_write), then two u32 CRC32Cs: of
 * the header, and of the body. At start-up the newest snapshot that passes every check
 * (magic, version, partition, length, CRC, a loaded state whose hash equals
 * the header's) is loaded and the tape is replayed from the next seq through
 * retransmission; any other is skipped with a warning. */
#define MATCHER_SNAP_VERSION 1u

extern const struct config_spec matcher_config_spec;

struct matcher;

int matcher_create(struct matcher **out, struct ev_loop *loop, const struct matcher_config *cfg);
void matcher_destroy(struct matcher *m);
/* Flushes and says goodbye on the exec stream (end of session). */
void matcher_stop(struct matcher *m);

#endif
