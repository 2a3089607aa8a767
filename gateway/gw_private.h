/* The gateway's private structures, shared by the gateway's files only. */
#ifndef LOCKSTEP_GW_PRIVATE_H
#define LOCKSTEP_GW_PRIVATE_H

#include <ev.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "gateway.h"
#include "journal.h"
#include "abnet.h"
#include "counters.h"
#include "hist.h"
#include "auth_node.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "srcbudget.h"
#include "rxpath.h"
#include "soupbin.h"
#include "tape.h"
#include "tapeday.h"
#include "throttle.h"
#include "lockout.h"

#define GW_IN_BUF 1024 /* client input: any valid inbound packet is < 64 bytes */
#define GW_MAX_IN_PAYLOAD 512 /* a longer client packet is a protocol error */
#define GW_READS_PER_EVENT 16 /* packets handled per read wakeup, per session */
#define GW_CATCHUP_PER_PUMP 4096 /* journal records replayed per loop iteration */
#define GW_ACK_RING 4096 /* our events seen on the tape, not yet committed */
#define GW_DRAIN_PER_WAKE 256 /* throttled messages taken per drain wakeup, per session */
#define GW_DRAIN_MIN 0.0005 /* s: the shortest wait for tokens (a wakeup per ~rate/2000) */
#define GW_STATS_LOGINS 8 /* logins listed by name in STATS (throttle_*_LOGIN) */

struct gw_stats;
struct gw_stages;
struct journal;
#define GW_REQ_MAX_COUNT 8192u /* blocks asked for in one gap request */

/* A login journal record starts with a u64 BE tag: the partition in its top
 * 16 bits, the exec sequence number of that partition's stream below (so a
 * partition 0 record reads as the plain exec seq it always was); the
 * gateway's own messages (a Rejected for a symbol no partition trades) are
 * tagged GW_TAG_LOCAL. */
#define GW_TAG_SHIFT 48
#define GW_TAG_SEQ_MASK ((UINT64_C(1) << GW_TAG_SHIFT) - 1)
#define GW_TAG_LOCAL 0xffffu
/* A System Event of the trading day (day.c), tagged with its day key: a
 * restart finds in a login's journal which ones it holds. */
#define GW_TAG_DAY 0xfffeu
#define GW_TAG(part, seq) ((uint64_t)(part) << GW_TAG_SHIFT | ((seq) & GW_TAG_SEQ_MASK))

/* gateway.pos: the positions a restart resumes from (gateway.c) */
enum {
	GW_POS_CMD, /* every command up to it is committed */
	GW_POS_TAPE, /* the tape index to resume from */
	GW_POS_EXEC, /* GW_MAX_PARTITIONS exec stream positions */
	GW_POS_DAY_KEY = GW_POS_EXEC + GW_MAX_PARTITIONS, /* struct gw_day's key */
	GW_POS_DAY_HOLD, /* a pending day event's tape index (0: none) */
	GW_POS_TAPE_DAY, /* the latest tape day known, and its base */
	GW_POS_TAPE_BASE,
	GW_POS_MORE_TAPES, /* tapes 1..: cmd_acked, tape_next, tape_day, tape_day_base each */
	GW_N_POS = GW_POS_MORE_TAPES + 4 * (GW_MAX_TAPES - 1),
};

#define GW_MAX_EXEC_MSG 1024 /* OUCH outbound messages are at most 80 bytes */

/* What a login tells its reader (its logged-in session); reader is what
 * gw_login_attach() was given. */
struct gw_reader_ops {
	/* Record seq (msg: its OUCH message) was just journalled. */
	void (*offer)(void *reader, uint64_t seq, const uint8_t *msg, size_t len);
	/* More of the journal is readable (gw_login_readable() grew). */
	void (*wake)(void *reader);
	/* The login is gone from the credentials file. */
	void (*end)(void *reader);
};

#define GW_WAL_MARKS 16 /* a login's flushes waiting for the WAL's sync */
#define GW_STAGE_LOGIN_RING 1024 /* a login's append times the stage clock keeps */

/* A login from the credentials file with its outbound journal (logins.c;
 * the others read it). Never moves nor goes away while the process runs. */
struct gw_login {
	uint32_t id; /* its number for the day: the token table's login */
	struct cred cred;
	int revoked; /* gone from the credentials file (reload): no new login */
	struct journal *j; /* <state_dir>/sessions/<LOGIN>/ */
	uint64_t next_seq; /* SoupBin seq of the next message journalled */
	uint64_t flushed_next; /* records below this are readable from the journal */
	/* fsync = disk: records below this are on disk (UINT64_MAX in a mode
	 * that does not wait for the disk); none goes to the client before */
	uint64_t durable_next;
	struct gw_logins *table;
	/* fsync = disk (wal.c): records below `next` are on disk once the
	 * logins' WAL is up to `wal`, oldest first; on the table's wal_wait
	 * while any are left */
	struct {
		uint64_t wal, next;
	} wal_marks[GW_WAL_MARKS];
	unsigned wal_head, wal_n;
	int wal_waiting;
	struct gw_login *next_wal_wait;
	uint64_t ckpt_from; /* its records from here on wait for a checkpoint */
	int jdirty; /* on the table's jdirty: appended to since the last flush */
	struct gw_login *next_jdirty;
	const struct gw_reader_ops *rops; /* the attached reader, or NULL */
	void *reader;
	/* the day key (gw_day_key) of the last System Event of the trading
	 * day its journal took: one is journalled only when its key is above */
	uint64_t day_sent;
	uint64_t prog_mark; /* next_seq when the progress file's positions were taken */
	/* [gateway] login_rate: its bucket (set at its first login, kept
	 * across reconnections) and what it held back (session_ouch.c) */
	struct throttle bucket;
	int bucket_set;
	uint64_t throttle_delayed, throttle_rejected;
	/* the stage clock (stages.c): when its last records were appended */
	uint64_t stage_t[GW_STAGE_LOGIN_RING];
};

/* The login table (logins.c, and wal.c for its write-ahead journal). A new
 * journal is passed to opened() (set by gw_logins_open_journals), which may
 * read it. */
struct gw_logins {
	struct creds creds;
	struct gw_login **v; /* n, each allocated on its own */
	size_t n;
	int32_t *hash; /* open addressing: index into v, -1 empty */
	size_t hash_mask;
	struct gw_login *jdirty;
	struct ev_loop *loop; /* fsync = disk: the journals' sync watchers */
	const struct gw_config *cfg;
	struct gw_stats *st;
	struct gw_stages *stages;
	int (*opened)(void *ctx, struct gw_login *l, struct journal *j, const char *path);
	void *opened_ctx;
	/* fsync = disk: the logins' write-ahead journal (wal.c; NULL in the
	 * other modes), its sync watcher, the logins waiting for it, and the
	 * checkpoint (a thread's syncs of the login journals written since the
	 * last) */
	struct journal *wal;
	ev_io wal_io;
	struct gw_login *wal_wait;
	struct gw_ckpt_item {
		char name[CREDS_LOGIN_LEN + 1];
		uint64_t from, upto; /* its journal's records synced: [from, upto) */
		struct gw_login *l;
	} *ckpt_items; /* the checkpoint's logins (written since the last) */
	size_t ckpt_n, ckpt_cap;
	int ckpt_running;
	/* wal_ready: the start ended (the login journals whole and synced);
	 * wal_broken, ckpt_broken: a sync of the WAL, of a checkpoint, failed */
	int wal_ready, wal_broken, ckpt_broken;
	pthread_t ckpt_thread;
	_Atomic int ckpt_done, ckpt_err;
	uint64_t ckpt_upto; /* the WAL's last record when the checkpoint began */
	ev_tstamp ckpt_at; /* when the last one ended */
};

enum gw_sess_state {
	GW_SESS_LOGIN, /* connected, waiting for a Login Request */
	GW_SESS_ACTIVE, /* logged in */
	GW_SESS_CLOSING, /* writing its last packets, reads nothing */
	GW_SESS_DEAD, /* closed; freed at the end of the loop iteration */
	GW_SESS_STATE_MAX,
};

#define GW_DISK_ROOM (8u << 20) /* free bytes a gateway with a full disk waits for */
#define GW_GATE 4096 /* sequenced messages of a session waiting for the disk */

struct gw_session {
	struct gw *gw;
	ev_io rio, wio;
	ev_timer timer; /* heartbeat, idle and stall checks */
	int fd;
	enum gw_sess_state state;
	int logout; /* CLOSING after a Logout Request */
	struct gw_login *login; /* set once ACTIVE */
	uint64_t send_seq; /* SoupBin seq of the next sequenced message to send */
	ev_tstamp last_in, last_out, last_progress;
	ev_tstamp connected; /* a Login Request must come by connected + login_timeout */
	uint32_t addr; /* the peer's IPv4 address (network order): the per-address cap */
	/* a Login Request is being verified (verify_id: its job) or its
	 * rejection is held back (answer: the back-off); nothing more is read
	 * meanwhile */
	int login_wait, verify_id;
	char reject_reason;
	/* a plaintext entry's verdict (plain_ok), decided in line but given
	 * when a dummy verification ends, so that it takes a hash's time */
	int plain, plain_ok;
	ev_timer answer;
	struct soup_login req; /* that Login Request */
	int dirty; /* on gw->dirty: has output to write this iteration */
	struct gw_session *next_dirty;
	struct gw_session *prev, *next; /* gw->sessions */
	char peer[32];
	struct soup_parser parser;
	size_t out_off, out_len, out_cap;
	/* fsync = disk: sequenced messages in `out` not yet on disk, oldest
	 * first: their seq and where they start (out_shift + offset: out_shift
	 * counts the bytes gw_sess_out_room() moved out); nothing from the first of
	 * them on is written to the client before the login's durable_next
	 * passes it. */
	uint64_t out_shift;
	uint64_t gate_seq[GW_GATE], gate_pos[GW_GATE];
	unsigned gate_head, gate_n;
	/* [gateway] login_rate: messages waiting for the login's tokens
	 * (allocated the first time one waits), drained by `drain`; stalled:
	 * not read because a Cancel found the queue full (it waits in the
	 * socket rather than be rejected) */
	struct throttle_queue tq;
	ev_timer drain;
	int stalled;
	uint8_t in[GW_IN_BUF];
	uint8_t out[]; /* out_cap bytes */
};

struct gw_stats {
	uint64_t accepted, refused, logins, login_rejects, logouts, disconnects, idle_drops,
		slow_drops, protocol_errors, ouch_in, ouch_malformed, cmds_sent, cmd_packets,
		cmds_resent, retrans_requests, retrans_served, cmd_heartbeats, session_events,
		tape_packets, tape_malformed, tape_gaps, tape_requests, tape_fenced, cmds_acked,
		exec_packets, exec_malformed, exec_dups, exec_gaps, exec_requests, exec_blocks,
		exec_routed, exec_foreign, out_msgs, replayed, journal_errors;
	/* loss recovery (common/rx.h); the receivers' counters are copied in
	 * by gw_stream_stats() */
	uint64_t tape_held, tape_too_old, tape_skipped, exec_held, exec_too_old, exec_lost,
		retrans_too_old, drops_injected, rxq_dropped, kernel_rcvbuf_errors;
	uint64_t unbelievable; /* tape and exec positions no stream reaches (rx.h) */
	/* routing: Enter Orders the gateway rejected itself (a full token
	 * table); tokens not remembered; Enter Orders for a symbol no
	 * partition trades (sent to partition 0, whose matcher rejects them) */
	uint64_t local_rejects, tokens_full, unrouted_symbols;
	uint64_t cmd_send_waits; /* command sends that waited for room in the socket */
	uint64_t retrans_budget_refused; /* answers cut short by [node] retrans_budget */
	uint64_t disk_full; /* times a login's journal found the disk full (exec streams held) */
	/* the trading day: System Events journalled (one per login each), and
	 * day events implied because the tape's was not seen (skipped) */
	uint64_t day_events, day_implied;
	/* the client edge: connections closed for not logging in within
	 * login_timeout, and refused past max_sessions_per_address */
	uint64_t login_timeouts, address_refused;
	/* messages held in a login's throttle queue, and rejected with it
	 * full (OUCH_REJ_THROTTLED); malformed OUCH answered with a Rejected
	 * or Cancel Reject (the session stays); commands too large for a
	 * datagram, rejected (OUCH_REJ_TOO_LARGE) */
	uint64_t throttle_delayed, throttle_rejected, malformed_rejects, oversize_rejects;
	/* logins: failed (a wrong password or no such login), locks begun
	 * (a pair or an address), rejected unverified while locked,
	 * refused for a full verification queue, verifications done and
	 * their time */
	uint64_t login_failures, login_lockouts, login_locked_out_rejects, login_verify_busy,
		login_verifications, login_verify_ns;
	/* A/B (common/abnet.h): datagrams whose copy from network A or B came
	 * first (brought new blocks), the tape's and the exec streams' summed */
	uint64_t tape_first_a, tape_first_b, exec_first_a, exec_first_b;
	/* fsync = disk (wal.c): checkpoints ended (the WAL's older segments
	 * dropped), and messages the WAL gave back to login journals at start */
	uint64_t wal_checkpoints, wal_restored;
};

/* A received MoldUDP64 stream (the tape, an exec stream): its gaps, held
 * blocks and requests are rx's; answers and the too-old answer (a
 * heartbeat, common/rx.h) come back on req_fd only. */
struct gw_stream {
	int fd; /* multicast receiver */
	int req_fd; /* unicast: requests out, retransmissions back */
	ev_io io, req_io;
	struct mold_session sess;
	struct rx *rx;
	uint64_t next; /* next sequence number expected (0: not known yet) */
	int live; /* heard a packet or heartbeat */
	struct sockaddr_in retrans[RX_MAX_SERVERS]; /* rx's server k is retrans[k] */
	unsigned n_retrans;
	unsigned n_near; /* the first n_near are near (tape recorders): asked first */
	struct rx_drop drop, req_drop; /* the loss generator, per socket (B's copies: drop) */
	uint64_t rxq, req_rxq; /* SO_RXQ_OVFL, per socket */
	int fd_b; /* A/B: the stream on network B (-1: none) */
	ev_io io_b;
	uint64_t rxq_b;
	struct ab_first first; /* which network's copy brought new blocks first */
	enum auth_surface surface; /* what its datagrams are tagged as */
};

/* A matcher partition: its execution stream, arbitrated among its replicas. */
struct gw_part {
	struct gw *gw;
	unsigned index;
	struct gw_stream exec;
};

/* The sessions and their listener (session*.c only). */
struct gw_sessions {
	char soup_session[SOUP_SESSION_LEN + 1];
	int listen_fd;
	ev_io listen_io;
	char ouch_addr[32];
	struct gw_session *list, *dirty, *dead;
	size_t n;
	int stopping; /* no new connection nor login */
};

/* Tape k's position `what` (GW_POS_CMD, GW_POS_TAPE, GW_POS_TAPE_DAY or
 * GW_POS_TAPE_BASE) in the progress file's values: tape 0's where they
 * always were, the others' after them. */
static inline unsigned gw_pos_of(unsigned k, unsigned what)
{
	unsigned i = what == GW_POS_CMD ? 0 : what == GW_POS_TAPE ? 1 : what == GW_POS_TAPE_DAY ? 2 : 3;

	return k == 0 ? what : GW_POS_MORE_TAPES + 4 * (k - 1) + i;
}

/* Tape k's configuration section: "gateway" (k = 0) or "tapeK". */
static inline void gw_tape_section(unsigned k, char *buf, size_t cap)
{
	if (k == 0)
		snprintf(buf, cap, "gateway");
	else
		snprintf(buf, cap, "tape%u", k);
}

/* A tape's command stream (cmd.c only): one per sequencer group. */
struct gw_cmd {
	struct gw *g;
	unsigned k; /* the tape's index */
	int fd;
	ev_io io;
	/* every node of the sequencer group: only the primary takes commands,
	 * and which node that is changes with elections, so every command
	 * datagram and heartbeat goes to each (requests are answered to the
	 * asker only) */
	struct sockaddr_in seq_addrs[GW_MAX_SEQUENCERS];
	unsigned n_seq;
	struct mold_session sess;
	struct journal *j;
	uint64_t next; /* seq of the next new command */
	uint64_t acked; /* every command <= this is committed on the tape */
	struct net_batch out, in;
	unsigned slot; /* slot being built, when building */
	int building;
	int fan; /* the datagram being built goes to every sequencer (out
		    holds it n_seq times: send_batch * n_seq slots) */
	struct mold_builder b;
	ev_tstamp last_send, resend_base;
	uint8_t *scratch; /* one record, for journal reads */
	/* fsync = disk: the highest command in each of `out`'s slots (0: none,
	 * a heartbeat); the slots leave in order, each once the journal holds
	 * its commands on disk. build_last: the datagram being built's. */
	uint64_t *slot_cmd;
	uint64_t build_last;
	ev_io sync_io; /* fsync = disk: the journal's background sync ended */
	struct rx_drop drop; /* requests from the sequencer */
	uint64_t rxq;
	struct src_budget budget; /* answer bytes per requester ([node] retrans_budget) */
};

/* A tape's watcher (tape.c only). Positions (s.next, last, commit) are
 * tape indices, continuous across days; `days` maps them to each day's
 * MoldUDP64 session and sequence numbers (common/tapeday.h). Tape 0's
 * day events make the trading day (day.c); the others' are not read. */
struct gw_tape {
	struct gw *g;
	unsigned k;
	struct gw_cmd *cmd; /* the same tape's command stream */
	struct gw_stream s;
	struct tapeday days;
	uint64_t term, commit, last;
	struct {
		uint64_t tape_seq, origin_seq;
	} ack_ring[GW_ACK_RING]; /* our events seen on the tape, not yet committed */
	unsigned ack_head, ack_len;
};

/* The receivers' shared parts (stream.c only). */
struct gw_streams {
	struct rx_rng rng; /* request jitter of every stream */
	ev_timer timer; /* the earliest request any stream has due */
	struct net_batch rx; /* one receive batch for every stream */
};

/* The partitions' exec streams (exec.c only). */
struct gw_exec {
	struct gw_part *parts; /* n_parts */
	uint64_t (*last_exec)[GW_MAX_PARTITIONS]; /* per login id: highest exec seq
						     journalled, per partition */
	size_t n_last;
	int running; /* opened: a login added later leaves the streams' positions */
};

/* A day key orders the day events: START_OF_DAY of day d is 2d, its
 * END_OF_DAY 2d + 1 (0: none seen). */
static inline uint64_t gw_day_key(uint32_t day, enum tape_day_kind kind)
{
	return 2 * (uint64_t)day + (kind == TAPE_DAY_END);
}

#define GW_DAY_PENDING 16 /* day events delivered, not yet journalled */

/* The trading day (day.c only). */
struct gw_day {
	/* the last day event every login's journal took (persisted in
	 * gateway.pos); the day and market follow from it */
	uint64_t key;
	/* day events from the tape waiting to be journalled: not committed
	 * yet, or the disk full; oldest first */
	struct gw_day_pend {
		uint64_t index, key, timestamp;
	} pend[GW_DAY_PENDING];
	unsigned head, n;
	/* a restart's: the tape index of a day event that was pending when
	 * the progress file was saved (0: none); the tape is not skipped past
	 * it before it is delivered again */
	uint64_t hold_at;
};

/* Flow control (flow.c only): the commands in flight. */
struct gw_flow {
	uint64_t window; /* [gateway] max_in_flight */
	uint32_t cap; /* a power of two: commands the ring and each FIFO hold */
	uint8_t *part[GW_MAX_TAPES]; /* per tape, by command seq % cap: its partition */
	uint64_t *tape_seq; /* per partition, a FIFO of cap tape seqs */
	uint32_t head[GW_MAX_PARTITIONS], len[GW_MAX_PARTITIONS];
	uint64_t passed[GW_MAX_PARTITIONS]; /* highest tape seq each has published */
	uint64_t queued; /* the FIFOs' entries */
	uint64_t seen[GW_MAX_TAPES]; /* our highest command seen on each tape */
	int paused; /* the sessions are not read */
	ev_tstamp paused_at;
	ev_timer stall;
	uint64_t pauses, stalls, paused_ns;
};

/* The stage clock (stages.c): where a command's time goes. */
enum gw_stage { GW_STAGE_DISK, GW_STAGE_TAPE, GW_STAGE_MATCH, GW_STAGE_ANSWER, GW_N_STAGES };

struct gw_stages {
	uint64_t now; /* CLOCK_MONOTONIC ns at the latest wakeup that read it */
	struct hist h[GW_N_STAGES];
	uint32_t cap; /* flow control's: the rings below are indexed as its */
	uint64_t *sub[GW_MAX_TAPES], *sent[GW_MAX_TAPES]; /* per tape, by command seq */
	uint64_t sent_upto[GW_MAX_TAPES]; /* commands up to it have their send time */
	uint64_t *on_tape; /* per partition, beside flow's FIFO: when the tape showed it */
	uint64_t untimed; /* commands and answers left out (stages.c) */
	ev_check check; /* sets now at each loop iteration */
};

/* The progress file's save (progress.c): the positions taken and waiting
 * for the logins' journals, and the writer thread's one job. */
struct gw_progress {
	uint64_t v[GW_N_POS];
	int waiting;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int made, started, job, stop, err; /* job, stop, err, text, len under mu */
	char path[300];
	char text[64 * GW_N_POS];
	size_t len;
};

#define GW_VERIFY_MAX_THREADS 16 /* [gateway] login_verify_threads */

/* A password verification (verify.c): the threads own hash, pw, ok and
 * ns while it is queued; owner (the session, NULL once it is gone) is the
 * loop's. */
struct gw_vjob {
	char hash[CREDS_HASH_LEN];
	char pw[CREDS_PASSWORD_LEN + 1]; /* normalised; wiped once verified */
	int ok;
	uint64_t ns; /* the verification's time */
	void *owner;
};

/* The verification threads and their queues (verify.c only). */
struct gw_verify {
	struct ev_loop *loop;
	ev_async async; /* a verdict is done */
	pthread_t threads[GW_VERIFY_MAX_THREADS];
	unsigned n_threads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int made, stop; /* stop under mu */
	struct gw_vjob *jobs; /* cap: [gateway] max_pending_logins */
	uint32_t cap, n_free, pending; /* the loop's */
	uint32_t *free_ids; /* the loop's */
	uint32_t *todo, todo_head, todo_n; /* rings of cap job ids, under mu */
	uint32_t *done, done_head, done_n;
	char dummy[CREDS_HASH_LEN]; /* verified for a name that is no login */
};

struct gw {
	struct ev_loop *loop;
	struct gw_config cfg;
	/* routing: symbol -> partition, (login, token) -> partition */
	struct gw_routes *routes;
	unsigned n_parts;
	struct gw_logins logins;
	struct gw_streams streams;
	struct gw_exec exec;
	unsigned n_tapes;
	struct gw_cmd cmd[GW_MAX_TAPES];
	struct gw_tape tape[GW_MAX_TAPES];
	struct gw_sessions sess;
	struct gw_flow flow;
	struct gw_stages stages;
	struct gw_day day;
	struct gw_progress prog;
	struct gw_verify verify;
	struct lockout *lockout; /* failed logins: back-off and lockouts */
	uint64_t unknown_seed; /* keys a name that is no login into its own lockout entry */

	ev_prepare prepare;
	ev_timer tick;
	ev_tstamp last_persist;
	/* A journal could not be written (ENOSPC, EDQUOT): the exec streams
	 * hold what the logins' journals cannot take and commands wait in
	 * theirs (nothing is lost, nothing leaves unjournalled) until the
	 * journals are written and GW_DISK_ROOM is free (gw_exec_disk_retry). */
	int disk_full;
	/* cmd acked, tape next, exec next[], day key, day hold, tape day and its base */
	uint64_t persisted[GW_N_POS];
	struct gw_stats st; /* every part counts in it; STATS reads it */
	int stopping;
};


/* logins.c: the login table, below every part that reads a login */
/* journal_open, with what it found logged (a cut tail: a warning; damage
 * or a failure: an error). 0 or -errno. */
int gw_journal_open(struct journal **j, const char *path, const struct journal_options *jo);
/* Loads [gateway] credentials (none: nobody can log in) into the table.
 * 0 or -errno (logged). */
int gw_logins_open(struct gw_logins *t, const struct gw_config *cfg, struct gw_stats *st);
/* Opens every login's journal under <state_dir>/sessions; opened(ctx, ...)
 * is told of each, now and for a login added by a reload. Under fsync =
 * disk each journal's sync is watched on loop: when it ends, the login's
 * durable_next moves and its reader is woken. */
int gw_logins_open_journals(struct gw_logins *t, struct ev_loop *loop,
			    int (*opened)(void *ctx, struct gw_login *l, struct journal *j,
					  const char *path),
			    void *ctx);
/* Flushes and closes the journals (then nothing is journalled). */
void gw_logins_close_journals(struct gw_logins *t);
void gw_logins_fini(struct gw_logins *t); /* accepts a zeroed table */
/* Re-reads the credentials file at path (see logins.c); msg says what
 * changed, or what is wrong. 0 or -errno. */
int gw_logins_reload(struct gw_logins *t, const char *path, char *msg, size_t msglen);
/* name: len bytes, trailing spaces allowed. */
struct gw_login *gw_login_find(const struct gw_logins *t, const uint8_t *name, size_t len);
static inline uint32_t gw_login_id(const struct gw_login *l)
{
	return l->id;
}
/* The login's records below this may be read from its journal and sent:
 * written (flushed) and, under fsync = disk, on disk. */
static inline uint64_t gw_login_readable(const struct gw_login *l)
{
	return l->flushed_next < l->durable_next ? l->flushed_next : l->durable_next;
}
/* Journals msg under l's next SoupBinTCP number (record: u64 BE tag, see
 * GW_TAG, then msg) and offers it to l's reader. 0 or -errno. */
int gw_login_append(struct gw_logins *t, struct gw_login *l, uint64_t tag, const uint8_t *msg,
		    size_t len);
/* Writes the journals appended to since the last flush (under fsync = disk
 * their syncs start), then wakes their readers. Returns 0, or the negative
 * errno of the last journal that could not be written (it stays dirty and
 * is written at the next flush). */
int gw_logins_flush(struct gw_logins *t);
/* fsync = disk: blocks until every login's journal holds on disk what it
 * was given (before a position that counts on it is saved). */
void gw_logins_await(struct gw_logins *t);
/* Writes what the journals buffer and marks how far each goes (the
 * progress file's capture); gw_logins_marked_durable: 1 once every journal
 * holds on disk what it held at the mark, without waiting. */
void gw_logins_mark(struct gw_logins *t);
int gw_logins_marked_durable(const struct gw_logins *t);
/* wal.c: the logins' write-ahead journal, under fsync = disk. */
/* Opens <state_dir>/sessions.wal, gives the login journals (open, not yet
 * passed to opened()) back what they lost, syncs every login journal and
 * watches the WAL's syncs on loop. 0 or -errno (logged;
 * -EUCLEAN when a login journal lost what the WAL no longer holds). */
int gw_wal_open(struct gw_logins *t, struct ev_loop *loop);
/* A WAL record: u8 length of the login's name (1..CREDS_LOGIN_LEN, letters
 * and digits), the name, u64 BE SoupBin seq, then the login journal's record
 * (the u64 BE tag and the message). gw_wal_encode writes one into out
 * (GW_WAL_RECORD_MAX bytes) and returns its length; gw_wal_parse reads one:
 * 0, or -EBADMSG when it is not one. */
#define GW_WAL_RECORD_MAX (1 + CREDS_LOGIN_LEN + 8 + 8 + GW_MAX_EXEC_MSG)
size_t gw_wal_encode(uint8_t *out, const char *name, uint64_t seq, const uint8_t *rec, size_t len);
int gw_wal_parse(const uint8_t *p, size_t len, char name[CREDS_LOGIN_LEN + 1], uint64_t *seq,
		 const uint8_t **rec, size_t *rec_len);
/* Copies l's record `seq` (rec: the tag and the message) into the WAL. */
int gw_wal_append(struct gw_logins *t, const struct gw_login *l, uint64_t seq, const uint8_t *rec,
		  size_t len);
/* Writes the WAL and starts its sync. 0 or -errno (logged). */
int gw_wal_flush(struct gw_logins *t);
/* l's journal was just written up to l->next_seq: it is durable once the
 * WAL's records written so far are. */
void gw_wal_flushed(struct gw_logins *t, struct gw_login *l);
/* Takes a sync that ended; gw_wal_await: blocks until the WAL is on disk. */
void gw_wal_poll(struct gw_logins *t);
int gw_wal_await(struct gw_logins *t);
/* From a timer: starts or ends a checkpoint. */
void gw_wal_tick(struct gw_logins *t, ev_tstamp now);
void gw_wal_close(struct gw_logins *t); /* accepts a table without a WAL */
/* The journals' policy under [gateway] fsync (gateway.c). */
extern const enum journal_fsync gw_fsync_modes[];
/* Record seq of l's journal into buf: its length, or -errno. */
int gw_login_read(const struct gw_login *l, uint64_t seq, uint8_t *buf, size_t cap);
/* Makes reader the login's one reader: 0, or -EBUSY when it has one. */
int gw_login_attach(struct gw_login *l, const struct gw_reader_ops *ops, void *reader);
void gw_login_detach(struct gw_login *l);

/* session.c */
/* Listens on [gateway] ouch_listen. 0 or -errno (logged). */
int gw_session_listen(struct gw *g);
void gw_session_flush_all(struct gw *g);
void gw_session_reap(struct gw *g);
/* Shutdown: no new connection; End of Session to every client, then
 * every connection closes. */
void gw_session_end_all(struct gw *g);
/* Closes the listener (accepts a closed one). */
void gw_session_close_listener(struct gw *g);

/* cmd.c */
/* Every tape's command stream; pos: the progress file's values (each
 * tape's GW_POS_CMD: every command up to it is committed). */
int gw_cmd_open(struct gw *g, const uint64_t *pos);
void gw_cmd_close(struct gw *g);
/* Journals and queues one command, on its partition's tape, for this
 * iteration's datagrams. */
int gw_cmd_submit(struct gw *g, Lockstep__Command *cmd);
/* The room one command may take in a command datagram (throttle_cmd_room
 * of [gateway] max_datagram and the authentication trailer). */
size_t gw_cmd_room(const struct gw *g);
void gw_cmd_flush(struct gw *g);
void gw_cmd_tick(struct gw *g, ev_tstamp now);
/* 1 while a command sent on c is not yet acknowledged by its tape. */
int gw_cmd_unacked(const struct gw_cmd *c);
/* 1 when command seq is sent on c and not yet acknowledged. */
int gw_cmd_pending(const struct gw_cmd *c, uint64_t seq);
/* c's tape committed every command up to seq. */
void gw_cmd_ack(struct gw_cmd *c, uint64_t seq);
/* The tape partition p's commands go to. */
static inline unsigned gw_part_tape(const struct gw *g, unsigned p)
{
	return (unsigned)g->cfg.part[p].tape;
}

/* progress.c: the progress file, gateway.pos */
/* Its positions (GW_POS_*; zeros without a file or with a bad one). */
void gw_progress_load(struct gw *g, uint64_t v[GW_N_POS]);
/* Starts the writer thread (0, or -ENOMEM; without a thread every save is
 * in line); gw_progress_close ends it. */
int gw_progress_open(struct gw *g);
void gw_progress_close(struct gw *g);
/* Once a second (and after a day event): takes the positions, and once the
 * logins' journals hold what they held then on disk, has the file written
 * off the loop. */
void gw_progress_tick(struct gw *g);
/* At stop: the same, in line, waiting for the disk. */
void gw_progress_save_now(struct gw *g);

/* tape.c */
/* Every tape's watcher; pos: the progress file's (gw_pos_of; tape index
 * 0: the first packet decides). */
int gw_tape_open(struct gw *g, const uint64_t *pos);
void gw_tape_close(struct gw *g);
void gw_tape_tick(struct gw *g, ev_tstamp now);

/* exec.c */
/* next[p]: partition p's position from the progress file (0: unknown). */
int gw_exec_open(struct gw *g, const uint64_t *next);
void gw_exec_close(struct gw *g);
void gw_exec_free(struct gw *g);
/* 1 when every partition's exec stream has been heard. */
int gw_exec_live(const struct gw *g);
/* A journal (a login's, the commands') could not be written: on ENOSPC or
 * EDQUOT, disk_full (logged once); other errors are left to the caller. */
void gw_exec_disk_full(struct gw *g, int err);
/* While disk_full: once the logins' journals are written and GW_DISK_ROOM is
 * free, the exec streams deliver again. */
void gw_exec_disk_retry(struct gw *g);

/* day.c: the trading day's System Events */
/* From the progress file's GW_POS_DAY_* values. */
void gw_day_init(struct gw *g, const uint64_t *pos);
/* A login's journal opened: which day events it holds. */
void gw_day_login_opened(struct gw *g, struct gw_login *l, struct journal *j);
/* The tape delivered a DayEvent (body: its bytes) at index, with the
 * event's timestamp (ns since the epoch). */
void gw_day_on_tape(struct gw *g, uint64_t index, uint64_t timestamp, const uint8_t *body,
		    size_t len);
/* Journals the pending day events that the tape committed (and the disk
 * takes). */
void gw_day_drain(struct gw *g);
/* The tape index below which nothing is pending (UINT64_MAX: none), for
 * the progress file's tape position; the index the tape may not be
 * skipped past (UINT64_MAX: any). */
uint64_t gw_day_pending_from(const struct gw *g);
uint64_t gw_day_skip_limit(const struct gw *g, uint64_t next, uint64_t upto);
/* STATUS: day and market. */
void gw_day_status(const struct gw *g, Lockstep__ControlReply *reply);

/* stream.c: common to the tape and exec receivers */
/* The shared receive batch and request timer. 0 or -ENOMEM. */
int gw_stream_init(struct gw *g);
void gw_stream_fini(struct gw *g);
/* ctx is what s's rx_ops callbacks get; ab: the stream comes on two
 * networks as well (a gap waits [gateway] ab_wait before a request). */
int gw_stream_open(struct gw *g, struct gw_stream *s, const struct rx_ops *ops, void *ctx,
		   size_t reorder_bytes, unsigned n_servers, uint64_t start, int ab);
/* Stops the stream's watchers, closes its sockets, frees its receiver. */
void gw_stream_close(struct gw *g, struct gw_stream *s);
void gw_stream_request(struct gw_stream *s, unsigned server, uint64_t seq, uint16_t count);
/* Sends request r (any session) to s's server `server`. */
void gw_stream_send_request(struct gw_stream *s, unsigned server, const struct mold_request *r);
/* One datagram of a stream (answer: from its request socket, sent by from). */
typedef void gw_stream_packet_fn(void *ctx, const uint8_t *buf, size_t len, int answer,
				 const struct sockaddr_in *from, uint64_t now);
/* Reads what the socket of s's watcher w (io, io_b: network A or B;
 * req_io: answers) holds, a batch at a time, passing each datagram to
 * packet(ctx, ...) and counting which network's copy came first; then arms
 * the timer. */
void gw_stream_drain(struct gw *g, struct gw_stream *s, const ev_io *w,
		     gw_stream_packet_fn *packet, void *ctx);
/* A/B: s's multicast group on network B ([gateway] tape_iface_b), read by
 * cb with `data` (group "": none, fd_b -1). 0 or a negative errno (logged). */
int gw_stream_open_b(struct gw *g, struct gw_stream *s, const char *group, const char *what,
		     void (*cb)(struct ev_loop *, ev_io *, int), void *data);
/* Arms the streams' timer for the earliest request due. */
void gw_stream_arm(struct gw *g);
/* Copies the receivers' counters into g->st (for STATS). */
void gw_stream_stats(struct gw *g);
/* Why addrlist_parse refused a list (rc), in buf. */
const char *gw_stream_addr_error(int rc, char *buf, size_t cap, int max);

/* flow.c: the window of commands in flight (see there) */
int gw_flow_open(struct gw *g); /* after gw_cmd_open; 0 or -ENOMEM (logged) */
void gw_flow_close(struct gw *g); /* accepts a gateway whose flow never opened */
uint64_t gw_flow_in_flight(const struct gw *g);
/* Command cmd_seq of tape k went to partition; may stop reading the sessions. */
void gw_flow_sent(struct gw *g, unsigned k, uint64_t cmd_seq, unsigned partition);
/* Our command origin_seq is on tape k at tape_seq. */
void gw_flow_on_tape(struct gw *g, unsigned k, uint64_t origin_seq, uint64_t tape_seq);
/* Partition p has published a block of the event at tape_seq. */
void gw_flow_on_exec(struct gw *g, unsigned p, uint64_t tape_seq);

/* stages.c: the stage clock (see there); its times are stages.now, which
 * the wakeups that submit and receive set (mono_ns) */
int gw_stages_open(struct gw *g); /* after gw_flow_open; 0 or -ENOMEM (logged) */
void gw_stages_start(struct gw *g); /* its clock reading at each loop iteration */
/* n commands (a flow stall's) are left out of the stages. */
void gw_stages_untimed(struct gw *g, uint64_t n);
void gw_stages_close(struct gw *g); /* accepts a gateway whose clock never opened */
/* Command seq of tape k was journalled now. */
void gw_stages_submitted(struct gw *g, unsigned k, uint64_t seq);
/* Tape k's commands up to upto have been sent (reads the clock). */
void gw_stages_sent(struct gw *g, unsigned k, uint64_t upto);
/* Our command seq of tape k is on the tape now; returns now for the FIFO. */
uint64_t gw_stages_on_tape(struct gw *g, unsigned k, uint64_t seq);
/* FIFO slot `slot` (flow.c's index) holds a command the tape showed at on_tape. */
void gw_stages_slot(struct gw *g, size_t slot, uint64_t on_tape);
/* The command in FIFO slot `slot` is answered now (SIZE_MAX: before the
 * tape showed it). */
void gw_stages_matched(struct gw *g, size_t slot);
/* Login l's records [from, to) are readable from now (s->now, set by the
 * caller). */
void gw_stages_readable(struct gw_stages *s, const struct gw_login *l, uint64_t from,
			uint64_t to);
/* STATS: stage_<name>_count, _ns (counters), _us_p50, _us_p99, _us_p999,
 * _us_max (gauges, since start), stage_untimed (counter). */
void gw_stages_stats(const struct gw *g, struct counters *out);

/* session.c: stops (on) or resumes reading every session. */
void gw_session_pause(struct gw *g, int on);

/* verify.c: password verification off the loop */
/* Starts [gateway] login_verify_threads threads and a queue of
 * max_pending_logins jobs. 0 or -errno (logged). */
int gw_verify_open(struct gw *g);
void gw_verify_close(struct gw *g); /* accepts one never opened */
/* Queues the verification of pw (normalised) against hash (NULL: the
 * dummy hash, for a name that is no login); owner's verdict comes through
 * gw_session_verdict. The job's id, or -EBUSY when max_pending_logins are
 * pending. */
int gw_verify_submit(struct gw *g, const char *hash, const char *pw, void *owner);
/* Its owner is gone: the verdict is dropped. */
void gw_verify_cancel(struct gw *g, int id);
/* session_login.c: the verdict of a session's verification (ok: 1 or 0). */
void gw_session_verdict(struct gw *g, void *owner, int ok);

#endif
