/* The matcher daemon's private part: struct matcher and what its files
 * share. matcher.c holds the tape intake and the state machine, exec.c the
 * execution stream, checkpoint.c the replicas' votes, snapdir.c the
 * snapshot directory, control.c STATUS, STATS and the daemon_ops table,
 * config.c the [matcher] keys, feed.c the ITCH feed and the GLIMPSE
 * images (the GLIMPSE server is a module of its own, glimpse.h). A
 * function shared among them is named matcher_<file>_...; only these
 * files include this header. */
#ifndef LOCKSTEP_MATCHER_PRIVATE_H
#define LOCKSTEP_MATCHER_PRIVATE_H

#include <ev.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/types.h>

#include "checkpoint.h"
#include "convert.h"
#include "engine.h"
#include "abnet.h"
#include "addrlist.h"
#include "auth_node.h"
#include "iopath.h"
#include "log.h"
#include "matcher.h"
#include "moldudp64.h"
#include "flowstatus.h"
#include "net.h"
#include "rx.h"
#include "snapshot.h"
#include "srcbudget.h"
#include "tapeday.h"

#define RETRANS_PACKETS 64 /* packets answered per request at most */
#define CKPT_WINDOW 64 /* checkpoints remembered (others' hashes, votes) */
#define CKPT_PEERS 16 /* other replicas told apart by name; also the most [matcher] replicas */

/* stalled: a part of the tape that no retransmission server holds any more
 * is missing; the replica cannot go on by itself (logged as an error).
 * diverged: outvoted at a checkpoint; final (see checkpoint.c). */
enum matcher_state { M_STARTING, M_CATCHING_UP, M_LIVE, M_STALLED, M_DIVERGED, M_STATE_MAX };
extern const char *const matcher_state_names[M_STATE_MAX];

/* STATS lists these in this order (control.c). */
struct matcher_stats {
	uint64_t tape_packets, tape_malformed, tape_wrong_session, tape_duplicates, tape_gaps;
	uint64_t tape_fenced, events_applied, events_other_partition, events_malformed;
	uint64_t retrans_requests_sent, exec_blocks, exec_packets, exec_send_errors;
	uint64_t exec_requests_served, exec_requests_too_old, exec_requests_bad;
	uint64_t exec_blocks_resent, heartbeats_sent, rxq_dropped;
	uint64_t tape_answers, tape_too_old, tape_unrecoverable, exec_requests_dropped;
	uint64_t drops_injected, drops_injected_data;
	uint64_t snapshots_written, snapshots_failed, snapshots_skipped_busy, snapshots_rejected;
	uint64_t snapshots_off_rt; /* serialized off SCHED_FIFO (rt_priority) */
	uint64_t checkpoints_sent, checkpoint_send_errors, checkpoints_received;
	uint64_t checkpoints_agreed, checkpoints_diverged, checkpoints_undecided;
	uint64_t checkpoint_dissents, checkpoints_malformed, checkpoints_other_partition;
	uint64_t checkpoints_not_member; /* well tagged, from a host not in replica_hosts */
	uint64_t checkpoints_out_of_window, checkpoints_ignored;
	uint64_t exec_blocks_withheld, exec_requests_refused;
	uint64_t exec_send_waits; /* sends that waited for room in the socket */
	uint64_t flow_status_sent; /* status messages to the sequencers */
	uint64_t retrans_budget_refused; /* answers cut short by [node] retrans_budget */
	uint64_t tape_day_later; /* heartbeats of a later day not known yet: more to fetch */
	/* A/B (common/abnet.h): tape datagrams whose copy from network A or B
	 * came first (brought new events); exec datagrams sent on B, refused */
	uint64_t tape_first_a, tape_first_b, exec_b_packets, exec_b_send_errors;
	/* after a snapshot's pause: exec packets not multicast while the
	 * replica caught up (the partition's others had sent them) */
	uint64_t exec_packets_skipped_resuming;
};

/* One checkpoint's votes: this replica's hash once it has applied the seq,
 * and the others' as they arrive (before or after). */
struct matcher_checkpoint_slot {
	uint64_t seq; /* 0: unused */
	uint64_t own; /* valid when own_known */
	uint64_t hash[CKPT_PEERS]; /* peer k's, valid when bit k of present is set */
	uint32_t present;
	uint8_t own_known;
	uint8_t vote; /* enum matcher_vote */
};

enum { MATCHER_TAG_TAPE, MATCHER_TAG_REQ, MATCHER_TAG_TAPE_B };

struct matcher {
	struct ev_loop *loop;
	const struct matcher_config *cfg;
	struct engine *engine;
	enum matcher_state state;
	char *symbol_store;
	const char *symbols[CONVERT_MAX_SYMBOLS];

	/* the tape */
	int tape_fd;
	struct net_batch rx;
	ev_io tape_io;
	int tape_b_fd; /* A/B: the tape on network B (-1: none) */
	ev_io tape_b_io;
	uint64_t rxq_tape_b;
	struct ab_first tape_first; /* which network's copy came first */
	/* the tape's days on the wire (common/tapeday.h): packets' sequence
	 * numbers become tape indices here, requests name indices through it */
	struct tapeday tapeday;
	/* rx_high() when a heartbeat of a later day made rx ask for one index
	 * more (0: never): not again until something else raises rx_high */
	uint64_t day_later_claim;
	/* every sequencer node serves the tape up to its own commit position;
	 * rx's server k is tape_retrans[k] */
	struct sockaddr_in tape_retrans[RX_MAX_SERVERS];
	unsigned n_retrans;
	unsigned n_near; /* the first n_near are [matcher] tape_recorders (asked first) */
	int req_fd; /* unicast: tape requests out, answers (and too-old answers) in */
	ev_io req_io;
	struct rx *tape_rx; /* gaps, reorder window, requests: the next event to apply */
	struct rx_rng rng;
	struct rx_drop drop_tape, drop_req, drop_retrans;
	ev_timer rx_timer; /* when rx wants its next tick */
	uint64_t now; /* mono time, read once per batch */
	uint64_t rxq_tape, rxq_req, rxq_retrans; /* SO_RXQ_OVFL per socket */
	uint64_t tick_applied; /* matcher_applied() at the last tick */
	uint64_t flow_sent_applied, flow_sent_ns; /* the last status message */
	/* what an event costs in the tape socket's buffer (flowstatus.h): the
	 * events of the tape datagrams of the current read, the last sample */
	struct flow_cost flow_cost;
	uint64_t flow_read_events, flow_read_data, flow_sampled_ns; /* data: its datagrams */
	int flow_drained[2]; /* by ab_side: the last read emptied the queue */
	int rcvbuf_granted;
	uint64_t term; /* highest term seen */
	uint64_t commit;
	int heard; /* a packet of the tape has arrived */
	/* [node] io: under uring the tape and request sockets are read
	 * through io.rx (tags MATCHER_TAG_*), the exec stream sent through io.tx */
	struct iopath io;

	/* the execution stream */
	int exec_fd, retrans_fd;
	struct sockaddr_in exec_group;
	struct ab_send exec_b; /* A/B: the stream on network B */
	struct mold_session exec_session;
	struct net_batch tx, req_rx, req_tx;
	struct src_budget req_budget; /* answer bytes per requester ([node] retrans_budget) */
	struct mold_builder pkt;
	unsigned pkt_slot; /* tx slot being built, or tx.n when none */
	unsigned tx_count;
	uint64_t exec_next; /* next exec sequence number */
	uint64_t cur_tape_seq; /* the event being applied, for exec headers */
	uint8_t *ring; /* cfg->ring slots of MATCHER_EXEC_SLOT bytes: u16 length + block */
	uint64_t last_exec_send_ns;
	ev_io retrans_io;

	uint64_t exec_first; /* the oldest exec seq this process has produced (ring) */

	/* snapshots */
	char snap_dir[300];
	/* the one being written: its image and header, the writer thread
	 * (snap_busy), its result, and its "done" on the loop */
	struct matcher_snap_image snap_image;
	struct matcher_snap_hdr snap_hdr;
	pthread_t snap_thread;
	int snap_busy, snap_result;
	ev_async snap_async;
	uint64_t snap_stall_ns; /* the last serialization: the loop's pause */
	/* after it, until the tape socket is drained (matcher_resume_*): the
	 * SCHED_FIFO priority to go back to, whether it went back already,
	 * and since when */
	int resuming, resume_prio, resume_back;
	uint64_t resume_from_ns, resume_ns; /* resume_ns: the last catch-up's length */
	uint64_t resume_skipped_from; /* exec_packets_skipped_resuming when it began */
	uint64_t snap_pending; /* its tape seq */
	uint64_t snap_last; /* the newest complete snapshot's tape seq (or loaded one) */
	uint64_t start_seq; /* the first tape seq to apply */
	/* the feed's position in the snapshot loaded (snap_feed_loaded) */
	struct matcher_snap_feed snap_feed;
	int snap_feed_loaded;

	/* checkpoints: peer k is ck_peer[k] (names in order of first report) */
	int ck_fd;
	ev_io ck_io;
	struct sockaddr_in ck_group;
	struct sockaddr_in ck_hosts[ADDRLIST_MAX]; /* [matcher] replica_hosts */
	int n_ck_hosts; /* 0: any */
	struct net_batch ck_rx;
	char ck_peer[CKPT_PEERS][MATCHER_CKPT_NAME_LEN + 1];
	unsigned n_peers;
	/* checkpoint seq C in ck[C / interval % CKPT_WINDOW] */
	struct matcher_checkpoint_slot ck[CKPT_WINDOW];
	uint64_t ck_last_agreed; /* the newest checkpoint seq agreed at, 0: none */
	/* the highest checkpoint seq each peer reported (within
	 * MATCHER_CKPT_AHEAD_MAX of this one), and the peers that dissented
	 * from an agreed checkpoint (a diverged one withholds its blocks) */
	uint64_t ck_peer_seq[CKPT_PEERS];
	uint32_t ck_peer_dissent;
	int ck_warned; /* the replicas-count warning was logged */
	/* seq % snapshot_interval at which this replica writes a snapshot: a
	 * snapshot pauses its writer (the serialization) and its writer thread
	 * takes idle CPU, so the replicas take turns and one of them is always at full
	 * speed for the gateways' first-copy arbitration */
	uint64_t snap_phase;
	/* a START_OF_DAY was applied: a snapshot at it, so that a restart
	 * needs nothing of the days before ([sequencer] retention drops them) */
	int day_snapshot;

	/* divergence (final) and the test fault that causes it */
	int diverged;
	char div_msg[400]; /* the STATUS message once diverged */
	uint64_t last_tape_ns; /* tape time of the last event applied */
	int fault_active; /* the fault's order is being booked: its messages are swallowed */
	int fault_booked; /* ... and was Accepted */

	ev_timer tick;
	struct matcher_stats st;

	struct matcher_feed *feed; /* NULL: no feed configured */
	struct glimpse *glimpse; /* NULL: no [feed] glimpse */
};

/* --- matcher.c: the tape intake and the state machine --- */


/* The last tape seq applied. */
static inline uint64_t matcher_applied(const struct matcher *m)
{
	uint64_t next = m->tape_rx ? rx_next(m->tape_rx) : 1;

	return next ? next - 1 : 0;
}

/* Logs a change of state; diverged is final: catching up or going live
 * again does not undo it. */
void matcher_set_state(struct matcher *m, enum matcher_state s);
/* The events the tape socket holds beyond what was applied (the window the
 * status messages state): 3/4 of its buffer at the measured cost per event. */
uint64_t matcher_flow_window(const struct matcher *m);
/* Tells the sequencers (FLOW_STATUS_PAUSING) that this replica stops
 * reading the tape for a planned pause, so that the tape does not wait for
 * it while its partition's other replicas keep up. While live only. */
void matcher_flow_pause(struct matcher *m);
/* After a snapshot's pause (prio: daemon_pause_begin()'s): the replica is
 * behind by what came meanwhile and reads it from its socket. Until the
 * tape sockets are empty it stays under the normal scheduler (the daemons
 * on the orders' path go first; MATCHER_RESUME_MAX_NS after the first pause,
 * or once its tape buffer is half full, it goes back to its priority, for
 * the normal scheduler may leave it too little to catch up), its flow
 * statuses keep FLOW_STATUS_PAUSING, it sends no heartbeat, and (for at most
 * MATCHER_RESUME_SKIP_MAX_NS) multicasts no execution packet answering
 * a tape seq that another replica of the partition has reported a
 * checkpoint beyond (matcher_checkpoint_peers_high): that one has sent
 * them, and a burst of duplicates would queue in every gateway ahead of the
 * live ones. The blocks stay in the ring for a gateway that asks. With no
 * other replica ahead (checkpoints off, the others dead, dissenting or
 * behind) it multicasts as it catches up. Alone in its partition
 * (replicas 1), or after a day's snapshot (every replica's, at one seq), it
 * goes straight back to its priority and multicasts: the tape waits for
 * it. */
void matcher_resume_begin(struct matcher *m, int prio);
#define MATCHER_RESUME_MAX_NS (2 * 1000000000ull)
#define MATCHER_RESUME_SKIP_MAX_NS (4 * 1000000000ull)

/* --- exec.c: the execution stream out and its retransmissions --- */

/* Opens the exec socket (multicast out on [matcher] tape_iface) and the
 * retransmission server's, bound to `local` ([matcher] exec_retrans). */
int matcher_exec_open(struct matcher *m, const struct sockaddr_in *local);
/* Starts serving retransmissions. */
void matcher_exec_start(struct matcher *m);
/* The engine's output callback (ctx: the matcher): one exec block per
 * message, into the current packet and the retransmission ring. */
void matcher_exec_emit(void *ctx, const char *user, const struct ouch_msg *msg);
/* Sends the packets built so far. */
void matcher_exec_flush(struct matcher *m);
/* Drops the packets built and not sent yet (a replica found diverged). */
void matcher_exec_drop_unsent(struct matcher *m);
/* A heartbeat when nothing went out for [matcher] heartbeat (and the
 * replica has not diverged). */
void matcher_exec_heartbeat(struct matcher *m, uint64_t now);
/* The end of session on the exec group. */
void matcher_exec_end(struct matcher *m);

/* --- feed.c: the public ITCH feed (feedgen.h), feeds A and B --- */

struct matcher_feed;
/* STATS lists these (control.c). */
struct matcher_feed_stats {
	uint64_t messages, packets, send_errors, send_waits, heartbeats;
	uint64_t requests, requests_bad, requests_not_held, requests_too_old, requests_refused;
	uint64_t resent;
	uint64_t budget_refused, takeovers, stood_down, foreign_malformed;
	uint64_t caught_up; /* messages sent again from the ring on becoming a publisher */
	uint64_t listen_dropped; /* datagrams of the feeds heard, dropped by the kernel */
	uint64_t heard[2]; /* packets of another sender on feed A, on feed B */
	/* messages sent, and their latency since start: from the tape time of
	 * the event that made each (the sequencer's clock) to the sendmmsg of
	 * its datagram (this host's: the same clock on one host, else as
	 * synchronised as PTP makes them) */
	uint64_t latency_count, latency_p50_ns, latency_p99_ns, latency_p999_ns, latency_max_ns;
	uint64_t encode_errors; /* reports feedgen could not encode (none expected) */
};

/* Sets up the feed when [feed] names a group (else m->feed stays NULL and
 * every call below does nothing): its generator, its ring, its sockets,
 * and the engine's market data reports. 0 or a negative errno (logged). */
int matcher_feed_open(struct matcher *m, const struct engine_config *ec);
void matcher_feed_start(struct matcher *m);
void matcher_feed_close(struct matcher *m);
/* Before each tape event is applied, with its tape time. */
void matcher_feed_begin(struct matcher *m, uint64_t tape_ns);
/* Sends the packets built (end of a wakeup, like the exec stream). */
void matcher_feed_flush(struct matcher *m);
/* Every tick: who publishes what (takeover), heartbeats. */
void matcher_feed_tick(struct matcher *m, uint64_t now);
/* At a stop: the last packets and a heartbeat. */
void matcher_feed_end(struct matcher *m);
/* The stream's position for a snapshot: out, or NULL (no feed, or the
 * position unknown). At open the feed takes m->snap_feed's when a snapshot
 * was loaded. */
const struct matcher_snap_feed *matcher_feed_position(const struct matcher *m,
						     struct matcher_snap_feed *out);
/* A START_OF_DAY was applied: an unknown position is known again. */
void matcher_feed_day_started(struct matcher *m);
const struct matcher_feed_stats *matcher_feed_stats(const struct matcher *m);
/* One line for STATUS. */
void matcher_feed_describe(const struct matcher *m, char *out, size_t cap);
/* GLIMPSE's build (glimpse_build_fn; ctx: the matcher): the snapshot of
 * the displayed book and the feed's position, or none when the feed would
 * not be published (position unknown, not live, diverged). */
struct glimpse_image;
void matcher_feed_glimpse_image(void *ctx, struct glimpse_image *img);

/* --- checkpoint.c: this replica's votes and the others' --- */

/* Opens the checkpoint group's socket (logs why not). */
int matcher_checkpoint_open(struct matcher *m);
/* Starts receiving the others' checkpoints, when the socket is open. */
void matcher_checkpoint_start(struct matcher *m);
/* This replica has applied checkpoint seq: multicast its hash, and vote
 * (which may find it diverged). */
void matcher_checkpoint_own(struct matcher *m, uint64_t seq);
/* The highest checkpoint seq a replica of the partition that never
 * dissented from an agreed checkpoint has reported: it has applied (and
 * multicast the executions of) the tape that far. 0: none. */
uint64_t matcher_checkpoint_peers_high(const struct matcher *m);
#define MATCHER_CKPT_AHEAD_MAX (1ull << 24) /* a report further ahead is not believed */

/* --- snapdir.c: the snapshot directory (<state_dir>/snapshots) --- */

/* At start-up: removes unfinished snapshots, then loads the newest valid
 * one into m->engine (recreated from ec after a failed load), else none
 * (replay from seq 1). 0 or a negative errno (logged). */
int matcher_snapshot_load_newest(struct matcher *m, const struct engine_config *ec);
/* Takes a snapshot of the state after tape seq `seq` (the state now):
 * serializes it at once (snapshot_stall_us), then a thread writes the file.
 * 0, -ESTALE (diverged), -EBUSY (one is being written), or a negative errno
 * (out of memory, no thread). */
int matcher_snapshot_take(struct matcher *m, uint64_t seq);
/* At a stop: waits for a snapshot being written. */
void matcher_snapshot_reap(struct matcher *m);
/* A diverged replica's snapshots after its last agreed checkpoint are
 * renamed so that a restart does not load them. */
void matcher_snapshot_quarantine(struct matcher *m);

#endif
