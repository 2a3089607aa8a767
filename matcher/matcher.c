#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addrlist.h"
#include "arena.h"
#include "clock.h"
#include "convert.h"
#include "crc32c.h"
#include "ctl.h"
#include "engine.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "matcher.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "rxpath.h"
#include "snapshot.h"
#include "tape.h"
#include "wire.h"

#define EXEC_SLOT MATCHER_EXEC_SLOT /* bytes per exec block in the ring (snapshot.h) */
#define RETRANS_PACKETS 64 /* packets answered per request at most */
#define CKPT_WINDOW 64 /* checkpoints remembered (others' hashes, votes) */
#define CKPT_PEERS 16 /* other replicas told apart by name; also the most [matcher] replicas */

#define OFF(f) offsetof(struct matcher_config, f)
#define STR_(x) #x
#define STR(x) STR_(x) /* a number macro's value, in a help string */
static const struct config_key matcher_keys[] = {
	DAEMON_NODE_KEYS(struct matcher_config, node),
	{ "matcher", "partition", CONFIG_UINT, OFF(partition), 0, "0", 0, 1023, NULL,
	  "the partition this replica serves" },
	{ "matcher", "tape_group", CONFIG_STRING, OFF(tape_group), 64, NULL, 0, 0, NULL,
	  "multicast group:port of the tape" },
	{ "matcher", "tape_iface", CONFIG_STRING, OFF(tape_iface), 64, "127.0.0.1", 0, 0, NULL,
	  "interface (name or address) to receive the tape and send executions on" },
	{ "matcher", "tape_session", CONFIG_STRING, OFF(tape_session), 16, "TAPE", 0, 0, NULL,
	  "MoldUDP64 session name of the tape" },
	{ "matcher", "tape_retrans", CONFIG_STRING, OFF(tape_retrans),
	  sizeof(((struct matcher_config *)0)->tape_retrans), NULL, 0, 0, NULL,
	  "comma-separated host:port of the tape's retransmission servers, each sequencer "
	  "node (at most " STR(RX_MAX_SERVERS) "), asked in turn" },
	{ "matcher", "exec_group", CONFIG_STRING, OFF(exec_group), 64, NULL, 0, 0, NULL,
	  "multicast group:port of this partition's execution stream" },
	{ "matcher", "exec_retrans", CONFIG_STRING, OFF(exec_retrans), 64, NULL, 0, 0, NULL,
	  "host:port where this replica serves execution retransmissions" },
	{ "matcher", "symbols", CONFIG_STRING, OFF(symbols), 512,
	  "AAPL MSFT AMZN GOOG META NVDA TSLA INTC", 0, 0, NULL,
	  "the symbols this partition trades, separated by spaces" },
	{ "matcher", "max_shares", CONFIG_UINT, OFF(max_shares), 0, "1000000", 1, 4294967295.0,
	  NULL, "largest order size; larger orders are rejected" },
	{ "matcher", "max_orders", CONFIG_UINT, OFF(max_orders), 0, "1048576", 16, 1 << 28, NULL,
	  "open orders at once (preallocated)" },
	{ "matcher", "max_tokens", CONFIG_UINT, OFF(max_tokens), 0, "4194304", 16, 1 << 30, NULL,
	  "order tokens remembered for the day (preallocated)" },
	{ "matcher", "max_levels", CONFIG_UINT, OFF(max_levels), 0, "4096", 4, 1 << 20, NULL,
	  "price levels per side per symbol" },
	{ "matcher", "ring", CONFIG_UINT, OFF(ring), 0, "1048576", 1024, 1 << 26, NULL,
	  "execution blocks kept in memory for retransmission" },
	{ "matcher", "rcvbuf", CONFIG_SIZE, OFF(rcvbuf), 0, "8M", 0, 0, NULL,
	  "receive buffer of the tape sockets (SO_RCVBUFFORCE, else capped by rmem_max)" },
	{ "matcher", "sndbuf", CONFIG_SIZE, OFF(sndbuf), 0, "4M", 0, 0, NULL,
	  "send buffer of the execution socket" },
	{ "matcher", "heartbeat", CONFIG_DURATION, OFF(heartbeat_ns), 0, "100ms", 0, 0, NULL,
	  "execution stream heartbeat interval when idle" },
	{ "matcher", "retrans_wait", CONFIG_DURATION, OFF(retrans_wait_ns), 0, "10ms", 1e5, 60e9,
	  NULL, "wait before asking again for a tape range still missing (doubles each time)" },
	{ "matcher", "retrans_wait_max", CONFIG_DURATION, OFF(retrans_wait_max_ns), 0, "1s", 1e5,
	  600e9, NULL, "longest wait between two requests for one range" },
	{ "matcher", "request_delay", CONFIG_DURATION, OFF(request_delay_ns), 0, "2ms", 0, 10e9,
	  NULL, "the first request for a new gap waits a random time up to this" },
	{ "matcher", "reorder_window", CONFIG_UINT, OFF(reorder_window), 0, "65536", 2, 1 << 24,
	  NULL, "tape events held ahead of a gap (sequence numbers)" },
	{ "matcher", "reorder_bytes", CONFIG_SIZE, OFF(reorder_bytes), 0, "16M", 4096,
	  4294967295.0, NULL, "memory for the tape events held ahead of a gap" },
	{ "matcher", "drop_rate", CONFIG_DOUBLE, OFF(drop_rate), 0, "0", 0, 1, NULL,
	  "loss generator for tests: fraction of received datagrams thrown away" },
	{ "matcher", "drop_seed", CONFIG_UINT, OFF(drop_seed), 0, "1", 0, 0, NULL,
	  "loss generator seed: the same seed loses the same packets" },
	{ "matcher", "batch", CONFIG_UINT, OFF(batch), 0, "64", 1, 1024, NULL,
	  "datagrams per recvmmsg/sendmmsg" },
	{ "matcher", "snapshot_interval", CONFIG_UINT, OFF(snapshot_interval), 0, "1000000", 0,
	  1e15, NULL, "write a snapshot every this many tape seqs (0: only on request)" },
	{ "matcher", "snapshot_keep", CONFIG_UINT, OFF(snapshot_keep), 0, "3", 1, 1000, NULL,
	  "snapshots kept in <state_dir>/snapshots (older ones are deleted)" },
	{ "matcher", "max_datagram", CONFIG_UINT, OFF(max_datagram), 0, "1472", 64, 65507, NULL,
	  "largest execution datagram" },
	{ "matcher", "checkpoint_interval", CONFIG_UINT, OFF(checkpoint_interval), 0, "1000", 0,
	  1e15, NULL,
	  "multicast the state hash every this many tape seqs and compare it with the other "
	  "replicas' (0: off)" },
	{ "matcher", "checkpoint_group", CONFIG_STRING, OFF(checkpoint_group), 64, "", 0, 0, NULL,
	  "multicast group:port the partition's replicas exchange checkpoints on (default: "
	  "exec_group's address + 1, exec_group's port)" },
	{ "matcher", "replicas", CONFIG_UINT, OFF(replicas), 0, "1", 1, CKPT_PEERS, NULL,
	  "replicas of this partition: a majority of them (replicas / 2 + 1) that agrees on "
	  "another state hash at a checkpoint stops this one (1: never outvoted)" },
	{ "matcher", "replica", CONFIG_UINT, OFF(replica), 0, "0", 0, CKPT_PEERS - 1, NULL,
	  "this replica's index in its partition (0..replicas-1): staggers the replicas' "
	  "snapshots over snapshot_interval, so that they never write one at once" },
	{ "matcher", "test_fault_diverge_at", CONFIG_UINT, OFF(test_fault_diverge_at), 0, "0", 0,
	  0, NULL,
	  "tests only: after the event at this tape seq, book an order that is not on the "
	  "tape, so that this replica diverges (0: off)" },
	CONFIG_END,
};

const struct config_spec matcher_config_spec = { .keys = matcher_keys };

/* stalled: a part of the tape that no retransmission server holds any more
 * is missing; the replica cannot go on by itself (logged as an error).
 * diverged: outvoted at a checkpoint; final (see diverge()). */
enum matcher_state { M_STARTING, M_CATCHING_UP, M_LIVE, M_STALLED, M_DIVERGED, M_STATE_MAX };
static const char *const state_names[M_STATE_MAX] = { "starting", "catching-up", "live",
						      "stalled", "diverged" };

struct matcher_stats {
	uint64_t tape_packets, tape_malformed, tape_wrong_session, tape_duplicates, tape_gaps;
	uint64_t tape_fenced, events_applied, events_other_partition, events_malformed;
	uint64_t retrans_requests_sent, exec_blocks, exec_packets, exec_send_errors;
	uint64_t exec_requests_served, exec_requests_too_old, exec_requests_bad;
	uint64_t exec_blocks_resent, heartbeats_sent, rxq_dropped;
	uint64_t tape_answers, tape_too_old, tape_unrecoverable, exec_requests_dropped;
	uint64_t drops_injected, drops_injected_data;
	uint64_t snapshots_written, snapshots_failed, snapshots_skipped_busy, snapshots_rejected;
	uint64_t checkpoints_sent, checkpoint_send_errors, checkpoints_received;
	uint64_t checkpoints_agreed, checkpoints_diverged, checkpoints_undecided;
	uint64_t checkpoint_dissents, checkpoints_malformed, checkpoints_other_partition;
	uint64_t checkpoints_out_of_window, checkpoints_ignored;
	uint64_t exec_blocks_withheld, exec_requests_refused;
};

/* STATS: struct matcher_stats in its order, then the receiver's, the
 * host's and the engine's values (matcher_stats()). */
static const struct counter_def stat_defs[] = {
	COUNTER(tape_packets), COUNTER(tape_malformed), COUNTER(tape_wrong_session),
	COUNTER(tape_duplicates), COUNTER(tape_gaps), COUNTER(tape_fenced),
	COUNTER(events_applied), COUNTER(events_other_partition), COUNTER(events_malformed),
	COUNTER(retrans_requests_sent), COUNTER(exec_blocks), COUNTER(exec_packets),
	COUNTER(exec_send_errors), COUNTER(exec_requests_served), COUNTER(exec_requests_too_old),
	COUNTER(exec_requests_bad), COUNTER(exec_blocks_resent), COUNTER(heartbeats_sent),
	COUNTER(rxq_dropped), COUNTER(tape_answers), COUNTER(tape_too_old),
	COUNTER(tape_unrecoverable), COUNTER(exec_requests_dropped), COUNTER(drops_injected),
	COUNTER(drops_injected_data), COUNTER(snapshots_written), COUNTER(snapshots_failed),
	COUNTER(snapshots_skipped_busy), COUNTER(snapshots_rejected), COUNTER(checkpoints_sent),
	COUNTER(checkpoint_send_errors), COUNTER(checkpoints_received), COUNTER(checkpoints_agreed),
	COUNTER(checkpoints_diverged), COUNTER(checkpoints_undecided), COUNTER(checkpoint_dissents),
	COUNTER(checkpoints_malformed), COUNTER(checkpoints_other_partition),
	COUNTER(checkpoints_out_of_window), COUNTER(checkpoints_ignored),
	COUNTER(exec_blocks_withheld), COUNTER(exec_requests_refused),
};
_Static_assert(sizeof(stat_defs) / sizeof(stat_defs[0]) ==
		       sizeof(struct matcher_stats) / sizeof(uint64_t),
	       "a name for every counter");

static const struct counter_def extra_defs[] = {
	COUNTER(tape_blocks_requested), COUNTER(tape_held), COUNTER(tape_overflow),
	COUNTER(tape_missing), COUNTER(kernel_rcvbuf_errors), COUNTER(rcvbuf_bytes),
	GAUGE(checkpoint_last_agreed), GAUGE(orders_open), COUNTER(accepted), COUNTER(rejects),
	COUNTER(canceled), COUNTER(matches), COUNTER(shares_matched), COUNTER(ignored_duplicates),
};

/* One checkpoint's votes: this replica's hash once it has applied the seq,
 * and the others' as they arrive (before or after). */
struct ckpt_slot {
	uint64_t seq; /* 0: unused */
	uint64_t own; /* valid when own_known */
	uint64_t hash[CKPT_PEERS]; /* peer k's, valid when bit k of present is set */
	uint32_t present;
	uint8_t own_known;
	uint8_t vote; /* enum matcher_vote */
};

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
	struct mold_session tape_session;
	/* every sequencer node serves the tape up to its own commit position;
	 * rx's server k is tape_retrans[k] */
	struct sockaddr_in tape_retrans[RX_MAX_SERVERS];
	unsigned n_retrans;
	int req_fd; /* unicast: tape requests out, answers (and too-old answers) in */
	ev_io req_io;
	struct rx *tape_rx; /* gaps, reorder window, requests: the next event to apply */
	struct rx_rng rng;
	struct rx_drop drop_tape, drop_req, drop_retrans;
	ev_timer rx_timer; /* when rx wants its next tick */
	uint64_t now; /* mono time, read once per batch */
	uint64_t rxq_tape, rxq_req, rxq_retrans; /* SO_RXQ_OVFL per socket */
	uint64_t tick_applied; /* applied() at the last tick */
	int rcvbuf_granted;
	uint64_t term; /* highest term seen */
	uint64_t commit;
	int heard; /* a packet of the tape has arrived */
	struct arena arena;

	/* the execution stream */
	int exec_fd, retrans_fd;
	struct sockaddr_in exec_group;
	struct mold_session exec_session;
	struct net_batch tx, req_rx, req_tx;
	struct mold_builder pkt;
	unsigned pkt_slot; /* tx slot being built, or tx.n when none */
	unsigned tx_count;
	uint64_t exec_next; /* next exec sequence number */
	uint64_t cur_tape_seq; /* the event being applied, for exec headers */
	uint8_t *ring; /* cfg->ring slots of EXEC_SLOT bytes: u16 length + block */
	uint64_t last_exec_send_ns;
	ev_io retrans_io;

	uint64_t exec_first; /* the oldest exec seq this process has produced (ring) */

	/* snapshots */
	char snap_dir[300];
	pid_t snap_pid; /* the child writing one, 0: none */
	ev_child snap_child; /* libev's default loop reaps children: its status comes here */
	uint64_t snap_pending; /* its tape seq */
	uint64_t snap_last; /* the newest complete snapshot's tape seq (or loaded one) */
	uint64_t start_seq; /* the first tape seq to apply */

	/* checkpoints: peer k is ck_peer[k] (names in order of first report) */
	int ck_fd;
	ev_io ck_io;
	struct sockaddr_in ck_group;
	struct net_batch ck_rx;
	char ck_peer[CKPT_PEERS][MATCHER_CKPT_NAME_LEN + 1];
	unsigned n_peers;
	struct ckpt_slot ck[CKPT_WINDOW]; /* checkpoint seq C in ck[C / interval % CKPT_WINDOW] */
	uint64_t ck_last_agreed; /* the newest checkpoint seq agreed at, 0: none */
	int ck_warned; /* the replicas-count warning was logged */
	/* seq % snapshot_interval at which this replica writes a snapshot: a
	 * snapshot slows its writer (fork's copy-on-write, a core for the
	 * child), so the replicas take turns and one of them is always at full
	 * speed for the gateways' first-copy arbitration */
	uint64_t snap_phase;

	/* divergence (final) and the test fault that causes it */
	int diverged;
	char div_msg[400]; /* the STATUS message once diverged */
	uint64_t last_tape_ns; /* tape time of the last event applied */
	int fault_active; /* the fault's order is being booked: its messages are swallowed */
	int fault_booked; /* ... and was Accepted */

	ev_timer tick;
	struct matcher_stats st;
};

static struct log_ratelimit rl_malformed = LOG_RATELIMIT_INIT(5, 5);
static struct log_ratelimit rl_lost = LOG_RATELIMIT_INIT(1, 5);
static struct log_ratelimit rl_ckpt = LOG_RATELIMIT_INIT(5, 5);

/* The last tape seq applied. */
static uint64_t applied(const struct matcher *m)
{
	uint64_t next = m->tape_rx ? rx_next(m->tape_rx) : 1;

	return next ? next - 1 : 0;
}

/* diverged is final: catching up or going live again does not undo it. */
static void set_state(struct matcher *m, enum matcher_state s)
{
	if (m->state == s || m->state == M_DIVERGED)
		return;
	log_notice("%s -> %s at tape seq %llu", state_names[m->state], state_names[s],
		   (unsigned long long)applied(m));
	m->state = s;
}

/* --- the execution stream ------------------------------------------------- */

static void exec_flush(struct matcher *m)
{
	if (m->pkt_slot < m->tx.n) {
		m->tx.lens[m->pkt_slot] = mold_build_end(&m->pkt);
		m->tx.addrs[m->pkt_slot] = m->exec_group;
		m->tx_count++;
		m->pkt_slot = m->tx.n;
	}
	if (m->tx_count == 0)
		return;
	int sent = net_batch_send(&m->tx, m->exec_fd, m->tx_count);
	if (sent < (int)m->tx_count)
		m->st.exec_send_errors += m->tx_count - (unsigned)(sent < 0 ? 0 : sent);
	m->st.exec_packets += m->tx_count;
	m->tx_count = 0;
	m->last_exec_send_ns = mono_ns();
}

static void exec_begin_packet(struct matcher *m)
{
	if (m->tx_count == m->tx.n)
		exec_flush(m);
	m->pkt_slot = m->tx_count;
	mold_build_begin(&m->pkt, net_batch_slot(&m->tx, m->pkt_slot), m->cfg->max_datagram,
			 &m->exec_session, m->exec_next);
}

/* The engine's output: one exec block per message, into the current packet
 * and the retransmission ring. */
static void on_emit(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct matcher *m = ctx;
	uint8_t block[EXEC_SLOT - 2];
	/* shared with lockstep-replay rebuild, which counts exec blocks alike */
	int len;
	uint8_t *slot;

	if (m->fault_active) {
		/* the diverge fault's order is for nobody: no message of it
		 * goes out, so the stream keeps the others' numbering */
		m->fault_booked |= msg->type == OUCH_ACCEPTED;
		return;
	}
	if (m->diverged) {
		m->exec_next++;
		m->st.exec_blocks_withheld++;
		return;
	}
	len = matcher_exec_encode(block, m->cur_tape_seq, user, msg);
	if (len < 0) {
		log_err("cannot encode an outbound %c message: %s", msg->type, ouch_strerror(len));
		return;
	}
	slot = m->ring + (m->exec_next % m->cfg->ring) * EXEC_SLOT;
	slot[0] = (uint8_t)(len >> 8);
	slot[1] = (uint8_t)len;
	memcpy(slot + 2, block, (size_t)len);
	if (m->pkt_slot == m->tx.n)
		exec_begin_packet(m);
	if (mold_build_add(&m->pkt, block, (uint16_t)len) < 0) {
		m->tx.lens[m->pkt_slot] = mold_build_end(&m->pkt);
		m->tx.addrs[m->pkt_slot] = m->exec_group;
		m->tx_count++;
		exec_begin_packet(m);
		mold_build_add(&m->pkt, block, (uint16_t)len);
	}
	m->exec_next++;
	m->st.exec_blocks++;
}

/* --- snapshots (layout in matcher.h) -------------------------------------- */

/* Runs in the forked child: writes the state as it was at the fork. */
static int snapshot_write_file(struct matcher *m, uint64_t seq)
{
	struct matcher_snap_hdr h = { .partition = (uint32_t)m->cfg->partition, .seq = seq,
				      .exec_next = m->exec_next, .term = m->term,
				      .commit = m->commit };

	return matcher_snapshot_write(m->snap_dir, &h, m->engine);
}

static int snap_name_seq(const char *name, uint64_t *seq)
{
	unsigned long long v;
	int end = 0;

	if (sscanf(name, "snap-%20llu.lss%n", &v, &end) != 1 || end == 0 || name[end] != '\0' ||
	    strlen(name) != 29)
		return -1;
	*seq = v;
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The tape seqs of the snapshots in the directory, newest first (at most cap). */
static size_t snap_list(const char *dir, uint64_t *seqs, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < cap) {
		uint64_t s;

		if (snap_name_seq(de->d_name, &s) == 0)
			seqs[n++] = s;
	}
	closedir(d);
	qsort(seqs, n, sizeof(*seqs), cmp_desc);
	return n;
}

static void snapshot_prune(struct matcher *m)
{
	uint64_t seqs[1024];
	size_t n = snap_list(m->snap_dir, seqs, 1024);
	char path[340];

	for (size_t i = m->cfg->snapshot_keep; i < n; i++) {
		snprintf(path, sizeof(path), "%s/snap-%020llu.lss", m->snap_dir,
			 (unsigned long long)seqs[i]);
		unlink(path);
	}
}

/* Starts a snapshot of the state after tape seq `seq` (the state now): 0,
 * -EBUSY (one is being written) or a fork error. */
static void on_snap_child(struct ev_loop *loop, ev_child *w, int revents);

static int snapshot_take(struct matcher *m, uint64_t seq)
{
	pid_t pid, parent = getpid();

	if (m->diverged)
		return -ESTALE; /* the state is wrong: a snapshot of it would be loaded later */
	if (m->snap_pid > 0) {
		m->st.snapshots_skipped_busy++;
		log_warn("snapshot at tape seq %llu skipped: the one at %llu is still being written",
			 (unsigned long long)seq, (unsigned long long)m->snap_pending);
		return -EBUSY;
	}
	pid = fork();
	if (pid < 0) {
		m->st.snapshots_failed++;
		log_err("snapshot at tape seq %llu: fork: %s", (unsigned long long)seq,
			strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		/* The child runs only on CPU time nobody else wants: on a busy
		 * host a snapshot then takes longer, but does not take a core
		 * from the replicas, the gateways or the sequencer. */
		struct sched_param sp = { .sched_priority = 0 };
		int r;

		/* A writer outliving a SIGKILLed matcher would race the restarted
		 * one (which removes its temporary file): it dies with its parent. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(1);
		(void)sched_setscheduler(0, SCHED_IDLE, &sp);
		r = snapshot_write_file(m, seq);

		if (r < 0)
			log_err("snapshot at tape seq %llu: %s", (unsigned long long)seq, strerror(-r));
		_exit(r < 0 ? 1 : 0);
	}
	m->snap_pid = pid;
	m->snap_pending = seq;
	ev_child_init(&m->snap_child, on_snap_child, pid, 0);
	m->snap_child.data = m;
	ev_child_start(m->loop, &m->snap_child);
	log_info("snapshot at tape seq %llu: being written by pid %d", (unsigned long long)seq,
		 (int)pid);
	return 0;
}

static void snapshot_quarantine(struct matcher *m);

static void snapshot_done(struct matcher *m, int status)
{
	ev_child_stop(m->loop, &m->snap_child);
	m->snap_pid = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		m->st.snapshots_written++;
		m->snap_last = m->snap_pending;
		log_notice("snapshot at tape seq %llu written", (unsigned long long)m->snap_pending);
		snapshot_prune(m);
		if (m->diverged)
			snapshot_quarantine(m); /* it may postdate the last agreed checkpoint */
	} else {
		m->st.snapshots_failed++;
		log_err("snapshot at tape seq %llu failed (see %s)",
			(unsigned long long)m->snap_pending, m->snap_dir);
	}
}

static void on_snap_child(struct ev_loop *loop, ev_child *w, int revents)
{
	(void)loop;
	(void)revents;
	snapshot_done(w->data, w->rstatus);
}

/* A diverged replica's snapshots after its last agreed checkpoint may hold
 * the wrong state, which a restart would load: they are renamed
 * snap-SEQ.lss.diverged (kept for a post-mortem, never loaded). */
static void snapshot_quarantine(struct matcher *m)
{
	uint64_t seqs[1024];
	size_t n = snap_list(m->snap_dir, seqs, 1024);
	char path[340], to[360];

	for (size_t i = 0; i < n; i++) {
		if (seqs[i] <= m->ck_last_agreed)
			continue;
		snprintf(path, sizeof(path), "%s/snap-%020llu.lss", m->snap_dir,
			 (unsigned long long)seqs[i]);
		snprintf(to, sizeof(to), "%s.diverged", path);
		if (rename(path, to) == 0)
			log_warn("snapshot %s renamed %s: taken after the last agreed checkpoint "
				 "(%llu), it is not trusted", path, to,
				 (unsigned long long)m->ck_last_agreed);
		else
			log_err("snapshot %s: rename to %s: %s: delete it before restarting", path,
				to, strerror(errno));
	}
}

/* At a stop: waits for a snapshot being written. */
static void snapshot_reap(struct matcher *m)
{
	int status;

	if (m->snap_pid <= 0)
		return;
	if (waitpid(m->snap_pid, &status, 0) == m->snap_pid)
		snapshot_done(m, status);
	else
		m->snap_pid = 0;
}

/* Loads one snapshot file into a fresh engine: 0, or a negative errno with
 * why in `why`. */
static int snapshot_load_file(struct matcher *m, const char *path, struct matcher_snap_hdr *h,
			      const char **why)
{
	return matcher_snapshot_load(path, (uint32_t)m->cfg->partition, m->engine, h, why);
}

/* At start-up: a snap-SEQ.lss.tmp is what a writer killed mid-write left
 * (never renamed, so never loaded): removed, with a line in the log. */
static void snapshot_remove_temporaries(struct matcher *m)
{
	DIR *d = opendir(m->snap_dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char path[600];

		if (strncmp(de->d_name, "snap-", 5) != 0 || len < 9 ||
		    strcmp(de->d_name + len - 8, ".lss.tmp") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", m->snap_dir, de->d_name);
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			log_warn("removed %s: an unfinished snapshot", path);
	}
	closedir(d);
}

/* At start-up: the newest valid snapshot, else none (replay from seq 1). */
static int snapshot_load(struct matcher *m, const struct engine_config *ec)
{
	uint64_t seqs[1024];
	size_t n;

	if (mkdir(m->snap_dir, 0750) < 0 && errno != EEXIST) {
		log_err("snapshot directory %s: %s", m->snap_dir, strerror(errno));
		return -errno;
	}
	snapshot_remove_temporaries(m);
	n = snap_list(m->snap_dir, seqs, 1024);
	for (size_t i = 0; i < n; i++) {
		char path[340];
		struct matcher_snap_hdr h;
		const char *why = "";
		int r;

		snprintf(path, sizeof(path), "%s/snap-%020llu.lss", m->snap_dir,
			 (unsigned long long)seqs[i]);
		r = snapshot_load_file(m, path, &h, &why);
		if (r == 0 && h.seq != seqs[i]) {
			r = -EBADMSG;
			why = "its name and header disagree";
		}
		if (r == 0) {
			m->start_seq = h.seq + 1;
			m->exec_next = m->exec_first = h.exec_next;
			m->term = h.term;
			m->commit = h.commit;
			m->snap_last = h.seq;
			log_notice("loaded snapshot %s: tape seq %llu, exec seq %llu, hash %016llx; "
				   "replaying the tape from %llu",
				   path, (unsigned long long)h.seq, (unsigned long long)h.exec_next,
				   (unsigned long long)h.hash, (unsigned long long)h.seq + 1);
			return 0;
		}
		m->st.snapshots_rejected++;
		log_warn("snapshot %s skipped, not trusted: %s (%s)", path, why, strerror(-r));
		/* a failed load may have left state behind: start from a fresh engine */
		engine_destroy(m->engine);
		m->engine = NULL;
		if ((r = engine_create(&m->engine, ec)) < 0)
			return r;
	}
	if (n)
		log_warn("no usable snapshot in %s: replaying the whole tape", m->snap_dir);
	return 0;
}

/* --- applying the tape ------------------------------------------------------ */

/* Applies the event at m->next_seq. Returns 0, or -EAGAIN when it is not
 * committed yet (the caller stops and waits for the commit position). */
static int apply_event(struct matcher *m, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct tape_event_view v;
	struct engine_cmd cmd;

	if (tape_event_peek(data, len, &v) < 0 || v.seq != seq) {
		/* Every replica sees the same bytes, so skipping keeps them equal. */
		m->st.events_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_ERR, "tape seq %llu: malformed event skipped",
				(unsigned long long)seq);
		return 0;
	}
	if (v.term > m->term)
		m->term = v.term;
	if (v.commit > m->commit)
		m->commit = v.commit;
	if (seq > m->commit)
		return -EAGAIN;
	m->cur_tape_seq = seq;
	m->last_tape_ns = v.timestamp;
	/* The conversion lockstep-replay's rebuild shares (matcher/convert.h). */
	switch (convert_event(&v, m->cfg->partition, &m->arena, &cmd)) {
	case CONVERT_SKIP:
		m->st.events_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_ERR,
				"tape seq %llu: undecodable command skipped", (unsigned long long)seq);
		return 0;
	case CONVERT_OTHER_PARTITION:
		m->st.events_other_partition++;
		/* fall through */
	case CONVERT_TIME:
		engine_advance_time(m->engine, v.timestamp, on_emit, m);
		return 0;
	case CONVERT_APPLY:
		break;
	}
	engine_apply(m->engine, seq, v.timestamp, &cmd, on_emit, m);
	m->st.events_applied++;
	return 0;
}

/* --- checkpoints (format in matcher.h) ------------------------------------ */

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static int ckpt_printable(uint8_t c)
{
	return c >= 0x20 && c <= 0x7e;
}

int matcher_checkpoint_encode(uint8_t out[MATCHER_CKPT_LEN], const struct matcher_checkpoint *c)
{
	size_t len = strnlen(c->name, MATCHER_CKPT_NAME_LEN + 1);

	if (len == 0 || len > MATCHER_CKPT_NAME_LEN || c->name[len - 1] == ' ' ||
	    c->partition > 0xffff || c->seq == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!ckpt_printable((uint8_t)c->name[i]))
			return -EINVAL;
	memcpy(out, "LSCK", 4);
	put_u16(out + 4, MATCHER_CKPT_VERSION);
	put_u16(out + 6, (uint16_t)c->partition);
	memset(out + 8, ' ', MATCHER_CKPT_NAME_LEN);
	memcpy(out + 8, c->name, len);
	wire_put_u64(out + 40, c->seq);
	wire_put_u64(out + 48, c->hash);
	return MATCHER_CKPT_LEN;
}

int matcher_checkpoint_decode(const uint8_t *buf, size_t len, struct matcher_checkpoint *out)
{
	size_t n = MATCHER_CKPT_NAME_LEN;
	uint64_t seq;

	if (len != MATCHER_CKPT_LEN)
		return -EMSGSIZE;
	if (memcmp(buf, "LSCK", 4) != 0)
		return -EBADMSG;
	if (get_u16(buf + 4) != MATCHER_CKPT_VERSION)
		return -EPROTONOSUPPORT;
	while (n > 0 && buf[8 + n - 1] == ' ')
		n--;
	if (n == 0)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++)
		if (!ckpt_printable(buf[8 + i]))
			return -EBADMSG;
	seq = wire_get_u64(buf + 40);
	if (seq == 0)
		return -EBADMSG;
	out->partition = get_u16(buf + 6);
	memcpy(out->name, buf + 8, n);
	out->name[n] = '\0';
	out->seq = seq;
	out->hash = wire_get_u64(buf + 48);
	return 0;
}

enum matcher_vote matcher_checkpoint_vote(uint64_t own, const uint64_t *others, size_t n,
					  unsigned replicas, uint64_t *majority)
{
	size_t need = replicas / 2 + 1, mine = 1;

	if (replicas == 0)
		return MATCHER_VOTE_PENDING;
	for (size_t i = 0; i < n; i++)
		mine += others[i] == own;
	if (mine >= need) {
		if (majority)
			*majority = own;
		return MATCHER_VOTE_AGREED;
	}
	/* More voters than replicas: the count is wrong, and so could be any
	 * majority computed from it. */
	if (1 + n > replicas)
		return MATCHER_VOTE_PENDING;
	for (size_t i = 0; i < n; i++) {
		size_t same = 0;

		for (size_t j = 0; j < n; j++)
			same += others[j] == others[i];
		if (same >= need) {
			if (majority)
				*majority = others[i];
			return MATCHER_VOTE_DIVERGED;
		}
	}
	return MATCHER_VOTE_PENDING;
}

/* The slot of checkpoint `seq` (a multiple of the interval), recycled from
 * an older checkpoint if need be; NULL when it holds a newer one. */
static struct ckpt_slot *ckpt_slot(struct matcher *m, uint64_t seq)
{
	struct ckpt_slot *s = &m->ck[seq / m->cfg->checkpoint_interval % CKPT_WINDOW];

	if (s->seq == seq)
		return s;
	if (s->seq > seq)
		return NULL;
	if (s->seq && s->own_known && s->vote == MATCHER_VOTE_PENDING) {
		m->st.checkpoints_undecided++;
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint at tape seq %llu undecided: %u other replica(s) of %llu "
				"reported it, no majority agreed",
				(unsigned long long)s->seq, (unsigned)__builtin_popcount(s->present),
				(unsigned long long)m->cfg->replicas);
	}
	memset(s, 0, sizeof(*s));
	s->seq = seq;
	return s;
}

/* The names of the peers of slot s whose hash is h, comma-separated. */
static void ckpt_names(const struct matcher *m, const struct ckpt_slot *s, uint64_t h, char *out,
		       size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < m->n_peers && n < cap; k++)
		if ((s->present & (1u << k)) && s->hash[k] == h)
			n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", m->ck_peer[k]);
}

static void ckpt_dissent(struct matcher *m, const struct ckpt_slot *s, unsigned k)
{
	m->st.checkpoint_dissents++;
	if (m->cfg->replicas == 1) /* no majority to speak of: say only what differs */
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint at tape seq %llu: %s reports state hash %016llx, this "
				"replica has %016llx ([matcher] replicas = 1: no vote)",
				(unsigned long long)s->seq, m->ck_peer[k],
				(unsigned long long)s->hash[k], (unsigned long long)s->own);
	else
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint at tape seq %llu: %s reports state hash %016llx, the "
				"majority (this replica among it) %016llx: %s has diverged",
				(unsigned long long)s->seq, m->ck_peer[k],
				(unsigned long long)s->hash[k], (unsigned long long)s->own,
				m->ck_peer[k]);
}

/* Outvoted: the state is wrong from some event after the last agreed
 * checkpoint on. Nothing of it may reach a client any more: no execution
 * blocks, heartbeats or end of session, no retransmissions (the ring holds
 * the wrong blocks too), no snapshots (a restart would load them). The
 * replica keeps following the tape, answers STATUS ("diverged") and exits
 * with DAEMON_EXIT_DIVERGED when stopped. */
static void diverge(struct matcher *m, const struct ckpt_slot *s, uint64_t majority)
{
	char who[256];

	ckpt_names(m, s, majority, who, sizeof(who));
	m->diverged = 1;
	m->st.checkpoints_diverged++;
	/* the blocks built but not sent yet stay unsent */
	m->pkt_slot = m->tx.n;
	m->tx_count = 0;
	set_state(m, M_DIVERGED);
	snprintf(m->div_msg, sizeof(m->div_msg),
		 "DIVERGED at checkpoint %llu: own state hash %016llx, majority %016llx (%s); "
		 "last agreed checkpoint %llu",
		 (unsigned long long)s->seq, (unsigned long long)s->own,
		 (unsigned long long)majority, who, (unsigned long long)m->ck_last_agreed);
	log_err("%s", m->div_msg);
	log_err("DIVERGED: this replica applied the tape differently from the majority of the "
		"partition's %llu replicas somewhere after tape seq %llu; it no longer publishes "
		"executions, serves their retransmissions or writes snapshots, and exits with "
		"status %d when stopped. Restart it to rebuild its state from a snapshot at or "
		"before %llu, or from the tape",
		(unsigned long long)m->cfg->replicas, (unsigned long long)m->ck_last_agreed,
		DAEMON_EXIT_DIVERGED, (unsigned long long)m->ck_last_agreed);
	snapshot_quarantine(m);
}

/* Decides slot s if it can be: called when its own hash or a report
 * arrives. */
static void ckpt_decide(struct matcher *m, struct ckpt_slot *s)
{
	uint64_t others[CKPT_PEERS], majority = 0;
	size_t n = 0;
	unsigned k;

	if (!s->own_known || s->vote != MATCHER_VOTE_PENDING)
		return;
	for (k = 0; k < m->n_peers; k++)
		if (s->present & (1u << k))
			others[n++] = s->hash[k];
	if (!m->ck_warned && 1 + n > m->cfg->replicas) {
		m->ck_warned = 1;
		if (m->cfg->replicas == 1)
			log_notice("other replicas report checkpoints, but [matcher] replicas = 1: "
				   "their hashes are compared with this one's, no vote can stop it");
		else
			log_warn("%zu replicas reported the checkpoint at tape seq %llu, but "
				 "[matcher] replicas = %llu: no replica is outvoted until it is "
				 "set to the partition's number of replicas",
				 1 + n, (unsigned long long)s->seq,
				 (unsigned long long)m->cfg->replicas);
	}
	s->vote = (uint8_t)matcher_checkpoint_vote(s->own, others, n, (unsigned)m->cfg->replicas,
						   &majority);
	if (s->vote == MATCHER_VOTE_AGREED) {
		m->st.checkpoints_agreed++;
		if (s->seq > m->ck_last_agreed)
			m->ck_last_agreed = s->seq;
		log_debug("checkpoint at tape seq %llu agreed: hash %016llx",
			  (unsigned long long)s->seq, (unsigned long long)s->own);
		for (k = 0; k < m->n_peers; k++)
			if ((s->present & (1u << k)) && s->hash[k] != s->own)
				ckpt_dissent(m, s, k);
	} else if (s->vote == MATCHER_VOTE_DIVERGED && !m->diverged) {
		diverge(m, s, majority);
	}
}

/* This replica has applied checkpoint seq: multicast its hash, and vote. */
static void ckpt_own(struct matcher *m, uint64_t seq)
{
	struct matcher_checkpoint c = { .partition = (uint32_t)m->cfg->partition, .seq = seq,
					.hash = engine_hash(m->engine) };
	uint8_t buf[MATCHER_CKPT_LEN];
	struct ckpt_slot *s;

	snprintf(c.name, sizeof(c.name), "%s", m->cfg->node.name);
	if (matcher_checkpoint_encode(buf, &c) == MATCHER_CKPT_LEN &&
	    sendto(m->ck_fd, buf, sizeof(buf), 0, (const struct sockaddr *)&m->ck_group,
		   sizeof(m->ck_group)) == (ssize_t)sizeof(buf))
		m->st.checkpoints_sent++;
	else
		m->st.checkpoint_send_errors++;
	s = ckpt_slot(m, seq);
	if (!s) { /* the others are a whole window ahead: nothing to compare with */
		m->st.checkpoints_out_of_window++;
		return;
	}
	s->own = c.hash;
	s->own_known = 1;
	ckpt_decide(m, s);
}

/* Peer k for `name`, added if new; -1 when the table is full. */
static int ckpt_peer(struct matcher *m, const char *name)
{
	for (unsigned k = 0; k < m->n_peers; k++)
		if (strcmp(m->ck_peer[k], name) == 0)
			return (int)k;
	if (m->n_peers == CKPT_PEERS)
		return -1;
	snprintf(m->ck_peer[m->n_peers], sizeof(m->ck_peer[0]), "%s", name);
	log_info("checkpoints: replica %s heard", name);
	return (int)m->n_peers++;
}

static void on_ckpt_packet(struct matcher *m, const uint8_t *buf, size_t len,
			   const struct sockaddr_in *from)
{
	uint64_t k_ivl = m->cfg->checkpoint_interval;
	struct matcher_checkpoint c;
	struct ckpt_slot *s;
	int err, k;

	err = matcher_checkpoint_decode(buf, len, &c);
	if (err < 0) {
		char a[32];

		net_format_addr(from, a, sizeof(a));
		m->st.checkpoints_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"malformed checkpoint datagram (%zu bytes) from %s dropped: %s", len,
				a, strerror(-err));
		return;
	}
	if (c.partition != m->cfg->partition) {
		m->st.checkpoints_other_partition++;
		return;
	}
	if (strcmp(c.name, m->cfg->node.name) == 0)
		return; /* our own, looped back */
	if (c.seq % k_ivl != 0) {
		m->st.checkpoints_ignored++;
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint of %s at tape seq %llu ignored: not a multiple of this "
				"replica's checkpoint_interval %llu",
				c.name, (unsigned long long)c.seq, (unsigned long long)k_ivl);
		return;
	}
	m->st.checkpoints_received++;
	/* Beyond a window ahead it could only push out checkpoints still to
	 * be voted on, and would be pushed out itself before it is reached. */
	if (c.seq >= applied(m) + CKPT_WINDOW * k_ivl || !(s = ckpt_slot(m, c.seq))) {
		m->st.checkpoints_out_of_window++;
		return;
	}
	if ((k = ckpt_peer(m, c.name)) < 0) {
		m->st.checkpoints_ignored++;
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint of %s ignored: already %d other replicas heard", c.name,
				CKPT_PEERS);
		return;
	}
	s->hash[k] = c.hash; /* a restarted replica may report a checkpoint again */
	s->present |= 1u << k;
	if (!s->own_known)
		return;
	if (s->vote == MATCHER_VOTE_PENDING)
		ckpt_decide(m, s);
	else if (s->vote == MATCHER_VOTE_AGREED && c.hash != s->own)
		ckpt_dissent(m, s, (unsigned)k);
}

static void on_ckpt(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n = net_batch_recv(&m->ck_rx, m->ck_fd);

		for (int i = 0; i < n; i++)
			on_ckpt_packet(m, net_batch_slot(&m->ck_rx, (unsigned)i), m->ck_rx.lens[i],
				       &m->ck_rx.addrs[i]);
		if (n < (int)m->ck_rx.n)
			break;
	}
}

/* The test fault of [matcher] test_fault_diverge_at: an order that is not on
 * the tape (a sell of 1 share at the highest price, which nothing reaches,
 * of a login no gateway has) booked after the event at `seq`. Its own
 * messages are swallowed, so the execution stream keeps the others'
 * numbering (only the order reference numbers of later Accepted and
 * Replaced differ) and no client sees a message missing or doubled; the
 * book, the order count and so the state hash differ from here on. */
static void fault_diverge(struct matcher *m, uint64_t seq)
{
	struct engine_cmd cmd = { .kind = ENGINE_ENTER };
	struct ouch_enter_order *o = &cmd.u.enter;

	snprintf(cmd.user, sizeof(cmd.user), "LSFLT");
	snprintf(o->token, sizeof(o->token), "LSDIVERGE%05llu", (unsigned long long)(seq % 100000));
	snprintf(o->stock, sizeof(o->stock), "%s", m->symbols[0]);
	o->side = OUCH_SELL;
	o->shares = 1;
	o->price = OUCH_PRICE_MAX;
	o->tif = OUCH_TIF_SYSTEM_HOURS;
	o->display = OUCH_DISPLAY_ATTRIBUTABLE;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = OUCH_ISO_NOT_ELIGIBLE;
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = OUCH_CUST_RETAIL;
	m->fault_active = 1;
	m->fault_booked = 0;
	engine_apply(m->engine, seq, m->last_tape_ns, &cmd, on_emit, m);
	m->fault_active = 0;
	if (m->fault_booked)
		log_warn("TEST FAULT: after tape seq %llu this replica booked an order that is not "
			 "on the tape (%s %s): its state hash is now %016llx, unlike the others'",
			 (unsigned long long)seq, o->token, o->stock,
			 (unsigned long long)engine_hash(m->engine));
	else
		log_err("TEST FAULT at tape seq %llu: the fault's order was not accepted; this "
			"replica may not diverge", (unsigned long long)seq);
}

/* --- the tape's loss recovery (common/rx.h) ------------------------------ */

static int on_event(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	/* Not committed yet: rx keeps the event and offers it again at
	 * rx_resume(), after the next packet or tick. */
	struct matcher *m = ctx;

	if (apply_event(m, seq, data, len) < 0)
		return RX_HOLD;
	if (seq == m->cfg->test_fault_diverge_at)
		fault_diverge(m, seq);
	if (m->cfg->checkpoint_interval && seq % m->cfg->checkpoint_interval == 0)
		ckpt_own(m, seq); /* may find this replica diverged: before the snapshot */
	if (m->cfg->snapshot_interval && seq % m->cfg->snapshot_interval == m->snap_phase &&
	    !m->diverged)
		snapshot_take(m, seq);
	return RX_TAKEN;
}

static void send_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	struct matcher *m = ctx;
	struct mold_request r = { .session = m->tape_session, .seq = seq, .count = count };
	uint8_t buf[MOLD_REQUEST_LEN];

	const struct sockaddr_in *dst = &m->tape_retrans[server % m->n_retrans];

	mold_build_request(buf, &r);
	if (sendto(m->req_fd, buf, sizeof(buf), 0, (const struct sockaddr *)dst, sizeof(*dst)) !=
	    (ssize_t)sizeof(buf))
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "tape request: %s", strerror(errno));
}

/* Nobody holds [from, to) any more. A replica must apply every event, so it
 * never skips: it keeps asking at the capped back-off, and says so. */
static int on_lost(void *ctx, uint64_t from, uint64_t to)
{
	struct matcher *m = ctx;

	m->st.tape_unrecoverable++;
	log_ratelimited(&rl_lost, LOG_LVL_ERR,
			"tape %llu..%llu is no longer held by any retransmission server: this "
			"replica cannot catch up by itself (rebuild it from a journal with "
			"lockstep-replay)",
			(unsigned long long)from, (unsigned long long)(to - 1));
	set_state(m, M_STALLED);
	return 0;
}

static const struct rx_ops tape_ops = { on_event, send_request, on_lost };

/* Arms the timer for rx's next scheduled request. */
static void rx_arm(struct matcher *m)
{
	rxpath_arm(m->loop, &m->rx_timer, rx_due(m->tape_rx), m->now);
}

static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct matcher *m = w->data;

	(void)loop;
	(void)revents;
	m->now = mono_ns();
	rx_tick(m->tape_rx, m->now);
	rx_arm(m);
}

/* A datagram of the tape (answer 0) or on the request socket (answer 1, from
 * `from`: retransmissions, and the too-old answer, a heartbeat). */
static void on_tape_packet(struct matcher *m, const uint8_t *buf, size_t len, int answer,
			   const struct sockaddr_in *from)
{
	struct mold_packet p;
	int err;

	if (rx_drop(answer ? &m->drop_req : &m->drop_tape, buf, len))
		return;
	m->st.tape_packets++;
	err = mold_parse(buf, len, &m->tape_session, 0, &p);
	if (err == MOLD_E_SESSION) {
		m->st.tape_wrong_session++;
		return;
	}
	if (err < 0) {
		m->st.tape_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "malformed tape packet (%zu bytes): %s",
				len, mold_strerror(err));
		return;
	}
	if (answer) {
		m->st.tape_answers++;
		if (p.kind == MOLD_HEARTBEAT) {
			m->st.tape_too_old++;
			rxpath_too_old(m->tape_rx, rxpath_server(m->tape_retrans, m->n_retrans, from),
				       "tape", from, p.seq, m->now);
			return;
		}
		if (p.kind != MOLD_DATA)
			return;
	} else {
		m->heard = 1;
	}
	rx_packet(m->tape_rx, &p, m->now);
}

static void on_tape(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	int answer = w == &m->req_io, n;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		n = net_batch_recv_counted(&m->rx, w->fd, answer ? &m->rxq_req : &m->rxq_tape);
		if (n <= 0)
			break;
		m->now = mono_ns();
		for (int i = 0; i < n; i++)
			on_tape_packet(m, net_batch_slot(&m->rx, (unsigned)i), m->rx.lens[i], answer,
				       &m->rx.addrs[i]);
		if ((unsigned)n < m->rx.n)
			break;
	}
	if (rx_holding(m->tape_rx))
		rx_resume(m->tape_rx, m->now);
	exec_flush(m);
	if (m->heard && rx_missing(m->tape_rx) == 0 && !rx_holding(m->tape_rx))
		set_state(m, M_LIVE);
	rx_arm(m);
}

/* --- execution retransmissions ------------------------------------------- */

static void serve_request(struct matcher *m, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	struct mold_request r;
	struct mold_builder b;
	uint64_t oldest = m->exec_next > m->cfg->ring ? m->exec_next - m->cfg->ring : 1;

	if (oldest < m->exec_first)
		oldest = m->exec_first; /* what came before the snapshot we started from */
	uint64_t seq, end;
	unsigned k = 0;

	if (mold_parse_request(buf, len, &m->exec_session, &r) < 0) {
		m->st.exec_requests_bad++;
		return;
	}
	m->st.exec_requests_served++;
	seq = r.seq;
	if (r.seq < oldest) {
		/* The too-old answer (common/rx.h): a heartbeat to the requester
		 * whose seq is the oldest block held; then what is held. */
		m->st.exec_requests_too_old++;
		m->req_tx.lens[k] = rxpath_too_old_answer(net_batch_slot(&m->req_tx, k),
							  &m->exec_session, "exec", r.seq, oldest);
		m->req_tx.addrs[k++] = *from;
		seq = oldest;
	}
	end = r.seq + r.count < m->exec_next ? r.seq + r.count : m->exec_next;
	while (seq < end && k < m->req_tx.n && k < RETRANS_PACKETS) {
		mold_build_begin(&b, net_batch_slot(&m->req_tx, k), m->cfg->max_datagram,
				 &m->exec_session, seq);
		for (; seq < end; seq++) {
			const uint8_t *slot = m->ring + (seq % m->cfg->ring) * EXEC_SLOT;
			uint16_t blen = (uint16_t)(slot[0] << 8 | slot[1]);

			if (mold_build_add(&b, slot + 2, blen) < 0)
				break;
			m->st.exec_blocks_resent++;
		}
		m->req_tx.lens[k] = mold_build_end(&b);
		m->req_tx.addrs[k] = *from;
		k++;
	}
	if (k)
		net_batch_send(&m->req_tx, m->retrans_fd, k);
}

static void on_retrans(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	int n = net_batch_recv_counted(&m->req_rx, m->retrans_fd, &m->rxq_retrans);

	(void)loop;
	(void)revents;
	for (int i = 0; i < n; i++) {
		const uint8_t *buf = net_batch_slot(&m->req_rx, (unsigned)i);

		if (rx_drop(&m->drop_retrans, buf, m->req_rx.lens[i])) {
			m->st.exec_requests_dropped++;
			continue;
		}
		if (m->diverged) { /* silence: the gateway asks another replica */
			m->st.exec_requests_refused++;
			continue;
		}
		serve_request(m, buf, m->req_rx.lens[i], &m->req_rx.addrs[i]);
	}
}

/* --- timers and control ----------------------------------------------------- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct matcher *m = w->data;
	uint64_t now = mono_ns();

	(void)loop;
	(void)revents;
	m->now = now;
	if (rx_holding(m->tape_rx))
		rx_resume(m->tape_rx, now);
	/* Behind: at once when starting, after a tick without progress when live
	 * (a gap repaired within a tick is not worth a state change). */
	if (rx_missing(m->tape_rx) > 0 &&
	    (m->state == M_STARTING || (m->state == M_LIVE && applied(m) == m->tick_applied)))
		set_state(m, M_CATCHING_UP);
	m->tick_applied = applied(m);
	exec_flush(m);
	rx_arm(m);
	if (now - m->last_exec_send_ns >= m->cfg->heartbeat_ns && !m->diverged) {
		uint8_t hb[MOLD_HEADER_LEN];

		mold_build_heartbeat(hb, &m->exec_session, m->exec_next);
		sendto(m->exec_fd, hb, sizeof(hb), 0, (struct sockaddr *)&m->exec_group,
		       sizeof(m->exec_group));
		m->last_exec_send_ns = now;
		m->st.heartbeats_sent++;
	}
}

static void matcher_status(void *self, Lockstep__ControlReply *r)
{
	struct matcher *m = self;

	r->name = (char *)m->cfg->node.name;
	r->state = (char *)state_names[m->state];
	r->term = m->term;
	r->seq = applied(m);
	r->commit = m->commit;
	r->hash = engine_hash(m->engine);
	r->partition = (uint32_t)m->cfg->partition;
	r->snapshot_seq = m->snap_last;
	if (m->diverged)
		r->message = m->div_msg;
}

static void matcher_stats(void *self, struct counters *out)
{
	struct matcher *m = self;
	struct engine_stats es;
	struct rx_stats rs;
	struct net_udp_stats us = { 0 };

	engine_get_stats(m->engine, &es);
	rx_get_stats(m->tape_rx, &rs);
	net_udp_stats_read(&us); /* the host's (namespace's) UDP counters */
	m->st.tape_duplicates = rs.duplicates;
	m->st.tape_gaps = rs.gaps;
	m->st.retrans_requests_sent = rs.requests;
	m->st.rxq_dropped = m->rxq_tape + m->rxq_req + m->rxq_retrans;
	m->st.drops_injected = m->drop_tape.dropped + m->drop_req.dropped + m->drop_retrans.dropped;
	m->st.drops_injected_data = m->drop_tape.dropped_data + m->drop_req.dropped_data;
	counters_add_table(out, stat_defs, (const uint64_t *)&m->st,
			   sizeof(stat_defs) / sizeof(stat_defs[0]));
	const uint64_t extra[] = {
		rs.requested, rs.held, rs.overflow, rx_missing(m->tape_rx), us.rcvbuf_errors,
		(uint64_t)m->rcvbuf_granted, m->ck_last_agreed, es.orders_open, es.accepted,
		es.rejects, es.canceled, es.matches, es.shares_matched, es.ignored_duplicates,
	};
	_Static_assert(sizeof(extra) / sizeof(extra[0]) ==
			       sizeof(extra_defs) / sizeof(extra_defs[0]), "a name for every value");
	counters_add_table(out, extra_defs, extra, sizeof(extra) / sizeof(extra[0]));
}

/* SNAPSHOT: one now, of the state as applied. */
static int matcher_control(void *self, const Lockstep__ControlRequest *req,
			   Lockstep__ControlReply *r)
{
	static char msg[400];
	struct matcher *m = self;

	if (req->op != LOCKSTEP__CONTROL_REQUEST__OP__SNAPSHOT)
		return 0;
	if ((r->error = snapshot_take(m, applied(m))) < 0)
		snprintf(msg, sizeof(msg), "snapshot not started: %s",
			 m->diverged ? "this replica has diverged" : strerror(-r->error));
	else
		snprintf(msg, sizeof(msg), "snapshot of tape seq %llu being written to %s",
			 (unsigned long long)applied(m), m->snap_dir);
	r->message = msg;
	return 1;
}

/* --- set-up ---------------------------------------------------------------- */

/* The checkpoint group: [matcher] checkpoint_group, or the exec group's
 * address + 1 on its port (239.255.0.2:P gives 239.255.0.3:P), so that
 * clusters side by side on one host, which differ in their ports, do not
 * hear each other; sent and received on one socket, loopback on so that
 * replicas of one host hear each other (their own datagrams come back too,
 * and are told apart by name). */
static int open_checkpoints(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options o = { .nonblock = 1 };
	struct matcher_checkpoint probe = { .partition = (uint32_t)c->partition, .seq = 1 };
	uint8_t buf[MATCHER_CKPT_LEN];
	char g[32];
	int err;

	snprintf(probe.name, sizeof(probe.name), "%s", c->node.name);
	if (matcher_checkpoint_encode(buf, &probe) < 0) {
		log_err("[node] name \"%s\": a checkpoint carries a name of 1..%d printable "
			"characters, not ending in a space", c->node.name, MATCHER_CKPT_NAME_LEN);
		return -EINVAL;
	}
	if (c->checkpoint_group[0]) {
		if ((err = net_parse_addr(c->checkpoint_group, &m->ck_group)) < 0) {
			log_err("[matcher] checkpoint_group \"%s\": %s", c->checkpoint_group,
				strerror(-err));
			return err;
		}
	} else {
		m->ck_group = m->exec_group;
		m->ck_group.sin_addr.s_addr = htonl(ntohl(m->exec_group.sin_addr.s_addr) + 1);
	}
	net_format_addr(&m->ck_group, g, sizeof(g));
	if (!IN_MULTICAST(ntohl(m->ck_group.sin_addr.s_addr))) {
		log_err("checkpoint group %s is not a multicast address: set [matcher] "
			"checkpoint_group", g);
		return -EINVAL;
	}
	m->ck_fd = net_mcast_recv_open(&m->ck_group, c->tape_iface, &o, NULL);
	if (m->ck_fd < 0) {
		log_err("checkpoint group %s on %s: %s", g, c->tape_iface, strerror(-m->ck_fd));
		return m->ck_fd;
	}
	if ((err = net_mcast_send_setup(m->ck_fd, c->tape_iface, 1)) < 0) {
		log_err("checkpoint group %s on %s: %s", g, c->tape_iface, strerror(-err));
		return err;
	}
	log_notice("checkpoints every %llu tape seqs on %s; %llu replica(s), a majority is %llu%s",
		   (unsigned long long)c->checkpoint_interval, g, (unsigned long long)c->replicas,
		   (unsigned long long)(c->replicas / 2 + 1),
		   c->replicas == 1 ? " (this replica alone: never outvoted)" : "");
	return 0;
}

static int open_sockets(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options o = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1,
				     .reuseaddr = 1 };
	struct net_udp_options so = { .sndbuf = (int)c->sndbuf, .nonblock = 1, .rxq_ovfl = 1 };
	struct net_udp_options ro = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1 };
	struct sockaddr_in group, local;
	struct net_bufsize rcv, rrcv;
	char session[16];
	int err;

	if ((err = net_parse_addr(c->tape_group, &group)) < 0 ||
	    (err = net_parse_addr(c->exec_group, &m->exec_group)) < 0 ||
	    (err = net_parse_addr(c->exec_retrans, &local)) < 0) {
		log_err("bad address in the [matcher] section: %s", strerror(-err));
		return err;
	}
	if (mold_session_set(&m->tape_session, c->tape_session) < 0)
		return -EINVAL;
	snprintf(session, sizeof(session), "EXEC%llu", (unsigned long long)c->partition);
	mold_session_set(&m->exec_session, session);
	m->tape_fd = net_mcast_recv_open(&group, c->tape_iface, &o, &rcv);
	if (m->tape_fd < 0) {
		log_err("tape %s on %s: %s", c->tape_group, c->tape_iface, strerror(-m->tape_fd));
		return m->tape_fd;
	}
	rxpath_bufsize_check("tape", &rcv);
	m->rcvbuf_granted = rcv.granted;
	struct sockaddr_in any = { .sin_family = AF_INET };
	/* Requests leave from here and answers come back here, never to the
	 * group's port, which other replicas on this host share. */
	m->req_fd = net_udp_open(&any, &ro, &rrcv, NULL);
	if (m->req_fd < 0) {
		log_err("tape request socket: %s", strerror(-m->req_fd));
		return m->req_fd;
	}
	rxpath_bufsize_check("tape request socket", &rrcv);
	m->exec_fd = net_udp_open(&any, &so, NULL, NULL);
	if (m->exec_fd < 0)
		return m->exec_fd;
	if ((err = net_mcast_send_setup(m->exec_fd, c->tape_iface, 1)) < 0) {
		log_err("exec stream on %s: %s", c->tape_iface, strerror(-err));
		return err;
	}
	m->retrans_fd = net_udp_open(&local, &so, NULL, NULL);
	if (m->retrans_fd < 0) {
		log_err("exec_retrans %s: %s", c->exec_retrans, strerror(-m->retrans_fd));
		return m->retrans_fd;
	}
	return c->checkpoint_interval ? open_checkpoints(m) : 0;
}

/* The tape's receiver: from seq 1 (a replica applies the whole tape), the
 * retransmission servers of [matcher] tape_retrans in turn, the loss
 * generator when configured. The jitter's seed differs per node so that
 * replicas do not ask in step. */
static int open_tape_rx(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct rx_config rc = {
		.window = (uint32_t)c->reorder_window,
		.ring_bytes = c->reorder_bytes,
		.max_count = MOLD_MAX_COUNT,
		.delay_ns = c->request_delay_ns,
		.retry_ns = c->retrans_wait_ns,
		.retry_max_ns = c->retrans_wait_max_ns > c->retrans_wait_ns ? c->retrans_wait_max_ns
									  : c->retrans_wait_ns,
		.settle_ns = c->retrans_wait_ns / 4, /* answers in flight are not asked again */
		.rng = &m->rng,
	};
	int err;

	err = net_parse_addr_list(c->tape_retrans, m->tape_retrans, RX_MAX_SERVERS);
	if (err == -E2BIG) {
		log_err("[matcher] tape_retrans \"%s\": more than %d addresses", c->tape_retrans,
			RX_MAX_SERVERS);
		return err;
	}
	if (err == -EINVAL) {
		log_err("[matcher] tape_retrans \"%s\": not a comma-separated list of host:port",
			c->tape_retrans);
		return err;
	}
	if (err < 0) {
		log_err("[matcher] tape_retrans \"%s\": %s", c->tape_retrans, strerror(-err));
		return err;
	}
	m->n_retrans = (unsigned)err;
	rc.n_servers = m->n_retrans;

	/* each node (and socket) its own pattern: replicas lose independently */
	rxpath_loss_init(&m->rng,
			 (struct rx_drop *const[]){ &m->drop_tape, &m->drop_req, &m->drop_retrans },
			 3, c->drop_rate, c->node.name, c->drop_seed, 0);
	err = rx_create(&m->tape_rx, &rc, &tape_ops, m);
	if (err < 0) {
		log_err("tape receiver: %s", strerror(-err));
		return err;
	}
	rx_start(m->tape_rx, m->start_seq);
	return 0;
}

int matcher_open(struct matcher **out, struct ev_loop *loop, const struct matcher_config *cfg)
{
	struct matcher *m = calloc(1, sizeof(*m));
	struct engine_config ec = { 0 };
	int err;

	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->cfg = cfg;
	m->tape_fd = m->exec_fd = m->retrans_fd = m->req_fd = m->ck_fd = -1;
	m->exec_next = m->exec_first = 1;
	m->start_seq = 1;
	if (cfg->snapshot_interval && cfg->replicas > 1)
		m->snap_phase = cfg->replica % cfg->replicas * cfg->snapshot_interval / cfg->replicas;
	snprintf(m->snap_dir, sizeof(m->snap_dir), "%s/snapshots", cfg->node.state_dir);
	m->symbol_store = malloc(sizeof(cfg->symbols));
	if (!m->symbol_store) {
		err = -ENOMEM;
		goto out_free;
	}
	if ((err = convert_engine_config(cfg, m->symbol_store, m->symbols, &ec)) < 0) {
		log_err("[matcher] symbols: want 1..%d symbols of up to 8 characters",
			CONVERT_MAX_SYMBOLS);
		goto out_free;
	}
	if ((err = engine_create(&m->engine, &ec)) < 0) {
		log_err("engine: %s", strerror(-err));
		goto out_free;
	}
	if ((err = snapshot_load(m, &ec)) < 0)
		goto out_free;
	m->ring = malloc(cfg->ring * EXEC_SLOT);
	if (!m->ring || arena_init(&m->arena, 1 << 16) < 0 ||
	    net_batch_init(&m->rx, (unsigned)cfg->batch, 65536) < 0 ||
	    net_batch_init(&m->tx, (unsigned)cfg->batch, cfg->max_datagram) < 0 ||
	    net_batch_init(&m->req_rx, 16, 64) < 0 ||
	    net_batch_init(&m->req_tx, RETRANS_PACKETS, cfg->max_datagram) < 0 ||
	    net_batch_init(&m->ck_rx, 16, 128) < 0) {
		err = -ENOMEM;
		goto out_free;
	}
	m->pkt_slot = m->tx.n;
	if ((err = open_tape_rx(m)) < 0)
		goto out_free;
	if ((err = open_sockets(m)) < 0)
		goto out_free;
	ev_io_init(&m->tape_io, on_tape, m->tape_fd, EV_READ);
	m->tape_io.data = m;
	ev_io_start(loop, &m->tape_io);
	ev_io_init(&m->req_io, on_tape, m->req_fd, EV_READ);
	m->req_io.data = m;
	ev_io_start(loop, &m->req_io);
	ev_init(&m->rx_timer, on_rx_timer);
	m->rx_timer.data = m;
	ev_io_init(&m->retrans_io, on_retrans, m->retrans_fd, EV_READ);
	m->retrans_io.data = m;
	ev_io_start(loop, &m->retrans_io);
	if (m->ck_fd >= 0) {
		ev_io_init(&m->ck_io, on_ckpt, m->ck_fd, EV_READ);
		m->ck_io.data = m;
		ev_io_start(loop, &m->ck_io);
	}
	if (cfg->test_fault_diverge_at)
		log_warn("TEST FAULT ARMED: [matcher] test_fault_diverge_at = %llu: this replica "
			 "will apply the tape wrongly after that seq and diverge from the others "
			 "(for tests only, never in production)",
			 (unsigned long long)cfg->test_fault_diverge_at);
	ev_timer_init(&m->tick, on_tick, 0.01, 0.01);
	m->tick.data = m;
	ev_timer_start(loop, &m->tick);
	log_notice("partition %llu, %zu symbols, tape %s, executions %s (retransmissions on %s)",
		   (unsigned long long)cfg->partition, ec.n_symbols, cfg->tape_group, cfg->exec_group,
		   cfg->exec_retrans);
	*out = m;
	return 0;

out_free:
	matcher_close(m);
	return err;
}

void matcher_stop(struct matcher *m)
{
	uint8_t eos[MOLD_HEADER_LEN];

	exec_flush(m);
	snapshot_reap(m);
	if (m->diverged) {
		log_err("tape seq %llu applied, hash %016llx; %s: exiting with status %d",
			(unsigned long long)applied(m), (unsigned long long)engine_hash(m->engine),
			m->div_msg, DAEMON_EXIT_DIVERGED);
		return;
	}
	mold_build_end_of_session(eos, &m->exec_session, m->exec_next);
	if (m->exec_fd >= 0)
		sendto(m->exec_fd, eos, sizeof(eos), 0, (struct sockaddr *)&m->exec_group,
		       sizeof(m->exec_group));
	log_notice("tape seq %llu applied, hash %016llx", (unsigned long long)applied(m),
		   (unsigned long long)engine_hash(m->engine));
}

int matcher_diverged(const struct matcher *m)
{
	return m && m->diverged;
}

void matcher_close(struct matcher *m)
{
	if (!m)
		return;
	snapshot_reap(m);
	if (m->loop) {
		ev_io_stop(m->loop, &m->tape_io);
		ev_io_stop(m->loop, &m->req_io);
		ev_io_stop(m->loop, &m->retrans_io);
		ev_io_stop(m->loop, &m->ck_io);
		ev_timer_stop(m->loop, &m->tick);
		ev_timer_stop(m->loop, &m->rx_timer);
	}
	if (m->tape_fd >= 0)
		close(m->tape_fd);
	if (m->exec_fd >= 0)
		close(m->exec_fd);
	if (m->retrans_fd >= 0)
		close(m->retrans_fd);
	if (m->req_fd >= 0)
		close(m->req_fd);
	if (m->ck_fd >= 0)
		close(m->ck_fd);
	rx_destroy(m->tape_rx);
	net_batch_fini(&m->rx);
	net_batch_fini(&m->tx);
	net_batch_fini(&m->req_rx);
	net_batch_fini(&m->req_tx);
	net_batch_fini(&m->ck_rx);
	arena_fini(&m->arena);
	engine_destroy(m->engine);
	free(m->ring);
	free(m->symbol_store);
	free(m);
}

static int matcher_daemon_open(void **self, struct ev_loop *loop, const void *cfg)
{
	int err = matcher_open((struct matcher **)self, loop, cfg);

	if (err < 0)
		log_err("cannot start: %s", strerror(-err));
	return err;
}

static void matcher_daemon_stop(void *self)
{
	matcher_stop(self);
}

static void matcher_daemon_close(void *self)
{
	matcher_close(self);
}

static int matcher_exit_status(const void *self)
{
	return matcher_diverged(self) ? DAEMON_EXIT_DIVERGED : DAEMON_EXIT_OK;
}

const struct daemon_ops matcher_daemon = {
	.prog = "lockstep-matcher",
	.role = "matcher",
	.about = "Applies the committed tape to the order books of one partition, in order, and\n"
		 "publishes the executions as a MoldUDP64 stream; replicas of a partition\n"
		 "publish identical streams and compare their state hashes at checkpoints.\n"
		 "Exit status: 0 after a clean stop, 1 on a start-up or run-time failure, 2 on\n"
		 "a usage or configuration error, 3 when the replica was outvoted at a\n"
		 "checkpoint (diverged).",
	.spec = &matcher_config_spec,
	.cfg_size = sizeof(struct matcher_config),
	.node_offset = offsetof(struct matcher_config, node),
	.open = matcher_daemon_open,
	.stop = matcher_daemon_stop,
	.close = matcher_daemon_close,
	.exit_status = matcher_exit_status,
	.status = matcher_status,
	.stats = matcher_stats,
	.control = matcher_control,
};
