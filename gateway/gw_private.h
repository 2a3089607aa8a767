/* The gateway's private structures, shared by the gateway's files only. */
#ifndef LOCKSTEP_GW_PRIVATE_H
#define LOCKSTEP_GW_PRIVATE_H

#include <ev.h>
#include <netinet/in.h>
#include <stdint.h>

#include "gateway.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "rxpath.h"
#include "soupbin.h"

#define GW_IN_BUF 1024 /* client input: any valid inbound packet is < 64 bytes */
#define GW_MAX_IN_PAYLOAD 512 /* a longer client packet is a protocol error */
#define GW_READS_PER_EVENT 16 /* packets handled per read wakeup, per session */
#define GW_CATCHUP_PER_PUMP 4096 /* journal records replayed per loop iteration */
#define GW_ACK_RING 4096 /* our events seen on the tape, not yet committed */
#define GW_REQ_MAX_COUNT 8192u /* blocks asked for in one gap request */

/* A login journal record starts with a u64 BE tag: the partition in its top
 * 16 bits, the exec sequence number of that partition's stream below (so a
 * partition 0 record reads as the plain exec seq it always was); the
 * gateway's own messages (a Rejected for a symbol no partition trades) are
 * tagged GW_TAG_LOCAL. */
#define GW_TAG_SHIFT 48
#define GW_TAG_SEQ_MASK ((UINT64_C(1) << GW_TAG_SHIFT) - 1)
#define GW_TAG_LOCAL 0xffffu
#define GW_TAG(part, seq) ((uint64_t)(part) << GW_TAG_SHIFT | ((seq) & GW_TAG_SEQ_MASK))

/* A login from the credentials file with its outbound journal. */
struct gw_login {
	struct gw_cred cred;
	struct journal *j; /* <state_dir>/sessions/<LOGIN>/ */
	uint64_t next_seq; /* SoupBin seq of the next message journalled */
	uint64_t last_exec[GW_MAX_PARTITIONS]; /* highest exec seq journalled, per partition */
	uint64_t flushed_next; /* records below this are readable from the journal */
	int jdirty; /* on gw->jdirty: appended to since the last flush */
	struct gw_login *next_jdirty;
	struct gw_session *sess; /* the logged-in session, or NULL */
	int revoked; /* gone from the credentials file (reload): no new login */
};

enum gw_sess_state {
	GW_SESS_LOGIN, /* connected, waiting for a Login Request */
	GW_SESS_ACTIVE, /* logged in */
	GW_SESS_CLOSING, /* writing its last packets, reads nothing */
	GW_SESS_DEAD, /* closed; freed at the end of the loop iteration */
	GW_SESS_STATE_MAX,
};

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
	int dirty; /* on gw->dirty: has output to write this iteration */
	struct gw_session *next_dirty;
	struct gw_session *prev, *next; /* gw->sessions */
	char peer[32];
	struct soup_parser parser;
	size_t out_off, out_len, out_cap;
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
	/* routing: Enter Orders the gateway rejected itself (a full token
	 * table); tokens not remembered; Enter Orders for a symbol no
	 * partition trades (sent to partition 0, whose matcher rejects them) */
	uint64_t local_rejects, tokens_full, unrouted_symbols;
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
	struct rx_drop drop, req_drop; /* the loss generator, per socket */
	uint64_t rxq, req_rxq; /* SO_RXQ_OVFL, per socket */
};

/* A matcher partition: its execution stream, arbitrated among its replicas. */
struct gw_part {
	struct gw *gw;
	unsigned index;
	struct gw_stream exec;
};

struct gw {
	struct ev_loop *loop;
	struct gw_config cfg;
	char soup_session[SOUP_SESSION_LEN + 1];
	struct gw_creds creds;
	struct gw_login *logins;
	size_t n_logins;
	struct gw_login *jdirty;
	int32_t *hash; /* open addressing: index into logins, -1 empty */
	size_t hash_mask;

	/* clients */
	int listen_fd;
	ev_io listen_io;
	char ouch_addr[32];
	struct gw_session *sessions, *dirty, *dead;
	size_t n_sessions;

	/* command stream */
	int cmd_fd;
	ev_io cmd_io;
	/* every node of the sequencer group: only the primary takes commands,
	 * and which node that is changes with elections, so every command
	 * datagram and heartbeat goes to each (requests are answered to the
	 * asker only) */
	struct sockaddr_in seq_addrs[GW_MAX_SEQUENCERS];
	unsigned n_seq;
	struct mold_session cmd_sess;
	struct journal *cmd_j;
	uint64_t cmd_next; /* seq of the next new command */
	uint64_t cmd_acked; /* every command <= this is committed on the tape */
	uint64_t cmd_resend_next; /* next command of an ongoing resend round */
	struct net_batch cmd_out, cmd_in;
	unsigned cmd_slot; /* slot being built, when cmd_building */
	int cmd_building;
	int cmd_fan; /* the datagram being built goes to every sequencer (cmd_out
			holds it n_seq times: send_batch * n_seq slots) */
	struct mold_builder cmd_b;
	ev_tstamp cmd_last_send, resend_base;
	uint8_t *cmd_scratch; /* one record, for journal reads */
	struct {
		uint64_t tape_seq, origin_seq;
	} ack_ring[GW_ACK_RING];
	unsigned ack_head, ack_len;

	/* routing: symbol -> partition, (login, token) -> partition */
	struct gw_routes *routes;
	unsigned n_parts;

	/* the tape and the partitions' exec streams */
	struct gw_stream tape;
	struct gw_part *parts; /* n_parts */
	struct rx_rng rng; /* request jitter of every stream */
	ev_timer rx_timer; /* the earliest request any stream has due */
	struct rx_drop cmd_drop; /* requests from the sequencer */
	uint64_t cmd_rxq;
	struct net_batch rx;
	uint64_t tape_term, tape_commit, tape_last;

	ev_prepare prepare;
	ev_timer tick;
	ev_tstamp last_persist;
	uint64_t persisted[2 + GW_MAX_PARTITIONS]; /* cmd_acked, tape_next, exec_next[] */
	struct gw_stats st;
	int stopping;
};

extern struct log_ratelimit gw_rl;

/* logins.c */
/* The login table from g->creds; 0 or -ENOMEM. */
int gw_logins_build(struct gw *g);
/* Re-reads the credentials file at path (see logins.c); msg says what
 * changed, or what is wrong. 0 or -errno. */
int gw_logins_reload(struct gw *g, const char *path, char *msg, size_t msglen);
struct gw_login *gw_login_find(struct gw *g, const uint8_t *name, size_t len);
/* The login's number for the token table: its index, stable for the
 * process's life (logins never move nor go away, see gw_logins_reload). */
static inline uint32_t gw_login_id(const struct gw *g, const struct gw_login *l)
{
	return (uint32_t)(l - g->logins);
}

/* session.c */
void gw_session_accept(struct ev_loop *loop, ev_io *w, int revents);
void gw_session_flush_all(struct gw *g);
void gw_session_reap(struct gw *g);
void gw_session_end_all(struct gw *g);
/* End of Session to one client, then the connection closes (a revoked login). */
void gw_session_end(struct gw_session *s);
/* Schedules a write (and journal replay) for this iteration. */
void gw_session_wake(struct gw_session *s);
/* Offers journal record `seq` of login (its bytes: u64 exec seq + OUCH) to
 * the login's session; the session takes it when it is caught up. */
void gw_session_offer(struct gw_login *l, uint64_t seq, const uint8_t *msg, size_t len);

/* cmd.c */
int gw_cmd_open(struct gw *g);
void gw_cmd_close(struct gw *g);
/* Journals and queues one command for this iteration's datagrams. */
int gw_cmd_submit(struct gw *g, Lockstep__Command *cmd);
void gw_cmd_flush(struct gw *g);
void gw_cmd_tick(struct gw *g, ev_tstamp now);
/* 1 while a command sent is not yet acknowledged by the tape. */
int gw_cmd_unacked(const struct gw *g);

/* tape.c */
int gw_tape_open(struct gw *g);
void gw_tape_close(struct gw *g);
void gw_tape_read(struct ev_loop *loop, ev_io *w, int revents);
void gw_tape_tick(struct gw *g, ev_tstamp now);

/* exec.c */
int gw_exec_open(struct gw *g);
void gw_exec_close(struct gw *g);
void gw_exec_read(struct ev_loop *loop, ev_io *w, int revents);
void gw_exec_flush(struct gw *g);
/* Journals one message of the gateway's own (tag GW_TAG_LOCAL) for login l
 * and offers it to its session, as an execution would be. 0 or -errno. */
int gw_exec_local(struct gw *g, struct gw_login *l, const uint8_t *msg, size_t len);
/* 1 when every partition's exec stream has been heard. */
int gw_exec_live(const struct gw *g);
/* Opens the journal of a login added at run time (credentials reload);
 * unlike at start, the exec stream's position stays where it is. */
int gw_exec_open_login(struct gw *g, struct gw_login *l);

/* stream.c: common to the tape and exec receivers */
/* ctx is what s's rx_ops callbacks get. */
int gw_stream_open(struct gw *g, struct gw_stream *s, const struct rx_ops *ops, void *ctx,
		   size_t reorder_bytes, unsigned n_servers, uint64_t start);
/* Stops the stream's watchers, closes its sockets, frees its receiver. */
void gw_stream_close(struct gw *g, struct gw_stream *s);
void gw_stream_request(struct gw_stream *s, unsigned server, uint64_t seq, uint16_t count);
/* Sets up g->rx_timer (not started). */
void gw_stream_timer_init(struct gw *g);
/* Arms g->rx_timer for the earliest request due. */
void gw_stream_arm(struct gw *g);
/* Copies the receivers' counters into g->st (for STATS). */
void gw_stream_stats(struct gw *g);
/* Why net_parse_addr_list refused a list (rc), in buf. */
const char *gw_stream_addr_error(int rc, char *buf, size_t cap, int max);

#endif
