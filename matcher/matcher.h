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
	char tape_recorders[512]; /* the tape recorders near it, asked first ("": none) */
	char exec_group[64], exec_retrans[64];
	/* A/B: the tape's and this partition's exec stream's groups on network
	 * B, its interface ("": A only; "": tape_iface), the wait for B's copy */
	char tape_group_b[64], tape_iface_b[64], exec_group_b[64];
	uint64_t ab_wait_ns;
	uint64_t partition;
	char symbols[512];
	char risk_file[256]; /* pre-trade limits and reference prices (risk.h), "": none */
	uint64_t max_shares, max_orders, max_tokens, max_levels, max_user_tokens;
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
	char replica_hosts[512]; /* hosts votes may come from ("": any member) */
	uint64_t replicas; /* replicas of the partition: a majority is replicas / 2 + 1 */
	/* this replica's index in its partition, 0..replicas-1: replica r writes
	 * its snapshots at seq % snapshot_interval == r * snapshot_interval /
	 * replicas, so that the replicas never write at once */
	uint64_t replica;
	uint64_t test_fault_diverge_at; /* tests: tape seq of the diverge fault, 0: off */
	uint64_t test_snapshot_pause_ns; /* tests: a snapshot's pause this much longer */
	/* flow control: a status message to the sequencers every this many
	 * events applied while live (0: none: this replica never holds the
	 * tape back) */
	uint64_t flow_status_every;
	/* the public ITCH feed (matcher/feed.c): none when both groups are "" */
	char feed_a_group[64], feed_b_group[64], feed_session[16], feed_retrans[64];
	char feed_glimpse[64], feed_logins[256];
	uint64_t feed_locate_base, feed_ring, feed_takeover_ns, feed_glimpse_max;
	uint64_t feed_glimpse_login_timeout_ns, feed_glimpse_idle_timeout_ns;
};

/* The [node] and [matcher] keys (matcher/config.c). */
extern const struct config_spec matcher_config_spec;
/* Checks across keys (--check-config, and before the matcher opens): 0, or
 * -EINVAL with err saying what is wrong. */
int matcher_config_check(const void *cfg, char *err, size_t errlen);

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
