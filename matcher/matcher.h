/* The matcher daemon around the engine: receives the tape, repairs its gaps
 * (common/rx.h), applies committed events in order, publishes the execution stream and
 * serves its retransmissions. */
#ifndef LOCKSTEP_MATCHER_H
#define LOCKSTEP_MATCHER_H

#include <ev.h>
#include <stddef.h>
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
	uint64_t checkpoint_interval; /* tape seqs between checkpoints, 0: none */
	char checkpoint_group[64]; /* "": exec_group's address + 1, its port */
	uint64_t replicas; /* replicas of the partition: a majority is replicas / 2 + 1 */
	/* this replica's index in its partition, 0..replicas-1: replica r writes
	 * its snapshots at seq % snapshot_interval == r * snapshot_interval /
	 * replicas, so that the replicas never write at once */
	uint64_t replica;
	uint64_t test_fault_diverge_at; /* tests: tape seq of the diverge fault, 0: off */
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

/* Checkpoints: after applying every tape seq that is a multiple of
 * checkpoint_interval, a replica multicasts its state hash on
 * checkpoint_group in a datagram of MATCHER_CKPT_LEN bytes (big-endian):
 * { char magic[4] "LSCK", u16 version (1), u16 partition, char name[32]
 * (the replica's [node] name, space padded), u64 tape seq, u64 state hash
 * (engine_hash) }. Every replica compares its own hash with the others'
 * (matcher_checkpoint_vote); one that a majority of the partition's replicas
 * outvotes is diverged: it stops publishing (see lockstep-matcher(8)). */
#define MATCHER_CKPT_LEN 56
#define MATCHER_CKPT_VERSION 1u
#define MATCHER_CKPT_NAME_LEN 32

struct matcher_checkpoint {
	uint32_t partition; /* 0..65535 on the wire */
	char name[MATCHER_CKPT_NAME_LEN + 1]; /* NUL-terminated, no padding */
	uint64_t seq; /* the tape seq applied last, > 0 */
	uint64_t hash;
};

/* Encodes c into out: MATCHER_CKPT_LEN, or -EINVAL when the name is empty,
 * longer than MATCHER_CKPT_NAME_LEN, ends with a space or holds a byte that
 * is not printable ASCII, or the partition or seq cannot be sent. */
int matcher_checkpoint_encode(uint8_t out[MATCHER_CKPT_LEN], const struct matcher_checkpoint *c);
/* Decodes one datagram: 0, -EMSGSIZE (not MATCHER_CKPT_LEN bytes),
 * -EBADMSG (magic, name, seq 0) or -EPROTONOSUPPORT (another version).
 * *out is untouched on failure. */
int matcher_checkpoint_decode(const uint8_t *buf, size_t len, struct matcher_checkpoint *out);

enum matcher_vote {
	MATCHER_VOTE_PENDING, /* no majority (yet) */
	MATCHER_VOTE_AGREED, /* a majority, this replica in it */
	MATCHER_VOTE_DIVERGED, /* a majority for another hash */
};

/* The vote at one checkpoint: own hash, the hashes that n other replicas
 * reported, and the partition's number of replicas (>= 1; 0 gives PENDING).
 * A majority is replicas / 2 + 1 votes, this replica's own included.
 * AGREED when own has one (*majority = own); DIVERGED when another value
 * has one (*majority set to it), never when more replicas voted than there
 * are (1 + n > replicas: a wrong count must not stop a replica); PENDING
 * otherwise. majority may be NULL. */
enum matcher_vote matcher_checkpoint_vote(uint64_t own, const uint64_t *others, size_t n,
					  unsigned replicas, uint64_t *majority);

extern const struct config_spec matcher_config_spec;

struct matcher;

/* Loads the newest usable snapshot, binds the sockets and starts the
 * watchers on `loop`. cfg must outlive the matcher. Returns 0 or a negative
 * errno (logged). */
int matcher_open(struct matcher **out, struct ev_loop *loop, const struct matcher_config *cfg);
/* Frees everything matcher_open made; accepts NULL. */
void matcher_close(struct matcher *m);
/* Flushes and says goodbye on the exec stream (end of session); a
 * diverged replica says nothing. */
void matcher_stop(struct matcher *m);
/* 1 once a checkpoint found this replica outvoted (state "diverged"): the
 * process then exits with DAEMON_EXIT_DIVERGED. */
int matcher_diverged(const struct matcher *m);

/* The matcher as a daemon (common/daemon.h): STATUS, STATS, SNAPSHOT and
 * the common operations on its control socket. */
extern const struct daemon_ops matcher_daemon;

#endif
