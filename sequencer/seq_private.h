/* The sequencer's private header: the object every part of libsequencer
 * works on (struct sequencer, its gateway table and states) and what the
 * parts call of one another. Not for use outside sequencer/; the public
 * interface is sequencer.h.
 *
 * The parts: sequencer.c (batching and publishing the tape, open, stop,
 * close), gateways.c (the gateway table and command intake), retrans.c
 * (the tape retransmission server), group.c (the glue to raft.c: its I/O
 * table, the raft-state file, the roles), raft_wire.c (the LSRF codec),
 * control.c (the daemon table, STATUS, STATS, STEP_DOWN, the config keys
 * and counters), day.c (the trading day: end and start of day, the days'
 * sessions on the wire, retention). Every function here runs on the loop's thread. */
#ifndef LOCKSTEP_SEQ_PRIVATE_H
#define LOCKSTEP_SEQ_PRIVATE_H

#include <ev.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "flowtable.h"
#include "hist.h"
#include "abnet.h"
#include "addrlist.h"
#include "auth_node.h"
#include "iopath.h"
#include "journal.h"
#include "log.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "srcbudget.h"
#include "tape.h"
#include "tapeserve.h"
#include "tapeday.h"
#include "sequencer.h"

#define SEQ_DISK_ROOM (8u << 20) /* free bytes a node with a full disk waits for */
#define SEQ_GW_SLOTS 512 /* open addressing, load <= 1/2 at SEQ_MAX_GATEWAYS */

/* One gateway's command stream, keyed by its MoldUDP64 session. */
struct seq_gw {
	struct mold_session session;
	char name[MOLD_SESSION_LEN + 1]; /* trimmed: the events' origin */
	int used;
	uint64_t next; /* next gateway sequence number to sequence, from 1 */
	struct rx *rx; /* its gaps, held commands and requests */
	struct sequencer *s;
	struct sockaddr_in addr; /* where its last datagram came from */
};

/* standby: follows a known primary; waiting: knows none (yet); candidate:
 * an election (or its pre-vote round) is on. */
enum seq_state {
	SEQ_STARTING,
	SEQ_PRIMARY,
	SEQ_STANDBY,
	SEQ_WAITING,
	SEQ_CANDIDATE,
	SEQ_STOPPED,
	SEQ_STATE_MAX
};
extern const char *const seq_state_names[SEQ_STATE_MAX];
/* [sequencer] fsync's values (control.c), as journal policies */
extern const enum journal_fsync seq_fsync_modes[];

/* The tape's flow control (flow.c): the receivers' table, the limit. A
 * receiver behind after a pause is counted again after this many
 * flow_timeouts at most (flowtable.h, catchup_ns). */
#define SEQ_FLOW_CATCHUP_TIMEOUTS 4
struct seq_flow {
	struct flow_table t;
	uint64_t limit; /* the highest seq the tape may carry; UINT64_MAX: none */
	uint64_t since; /* the receivers it counts were heard since then */
	int holding; /* the last publish stopped at the limit */
};

enum { SEQ_TAG_CMD, SEQ_TAG_REQ };

struct sequencer {
	struct seq_config cfg;
	struct ev_loop *loop;
	enum seq_state state;
	int failed;

	struct journal *journal;
	uint64_t term;
	uint64_t next_seq; /* tape sequence number of the next event */

	int cmd_fd, tape_fd, retrans_fd;
	struct sockaddr_in group;
	struct ab_send tape_b; /* A/B: the tape on network B */
	struct mold_session tape_session;
	ev_io cmd_io, retrans_io;
	ev_timer cmd_poll; /* a non-primary's reads of cmd_fd ([sequencer] standby_poll) */
	int gw_started; /* seq_gw_start ran: cmd_io and cmd_poll are set up */
	int cmd_polling; /* cmd_fd is read by cmd_poll while datagrams keep coming */
	uint64_t cmd_woken_ns; /* the last datagram that woke a non-primary's cmd_io */
	ev_timer heartbeat;
	uint64_t last_tape_send_ns;
	uint64_t last_event_ns; /* when the last event was sequenced (a time event when idle) */

	struct net_batch in; /* command datagrams */
	struct net_batch out; /* tape datagrams being built */
	unsigned out_n; /* complete datagrams in `out` */
	int out_open; /* a datagram is being built in slot out_n */
	struct mold_builder builder;
	uint64_t now_ns, now_wall; /* read once per batch */

	struct net_batch rin; /* retransmission requests */
	struct tape_server srv; /* their answers (common/tapeserve.h) */

	/* Gap requests to the gateways leave from req_fd, so that what comes
	 * back there is an answer: data, or the too-old answer (common/rx.h). */
	int req_fd;
	ev_io req_io;
	ev_timer rx_timer; /* the earliest request any gateway's rx has due */
	/* [node] io: under uring cmd_fd and req_fd are read through io.rx
	 * (tags SEQ_TAG_*), the tape sent through io.tx */
	struct iopath io;
	struct rx_rng rng;
	struct rx_drop drop_cmd, drop_req, drop_retrans, drop_raft;
	uint64_t rxq_cmd, rxq_req, rxq_retrans, rxq_raft;
	uint64_t terms_refused_seen; /* raft_stats.terms_refused already logged */
	int fatal; /* a journal error inside a delivery: negative errno */

	struct seq_gw gw[SEQ_GW_SLOTS];
	struct seq_gw *gw_list[SEQ_MAX_GATEWAYS]; /* the used slots */
	struct seq_gw *gw_last; /* last one looked up: streams come in runs */
	unsigned n_gw;

	/* The group (sequencer/raft.h). n_peers 1: a group of one, no socket. */
	struct raft *raft;
	int n_peers, id;
	struct sockaddr_in peers[SEQ_MAX_PEERS];
	struct sockaddr_in gw_hosts[ADDRLIST_MAX]; /* [sequencer] gateways */
	int n_gw_hosts; /* 0: any */
	int raft_fd;
	ev_io raft_io;
	ev_io sync_io; /* fsync = disk: the journal's background sync ended */
	ev_timer raft_timer;
	struct net_batch raft_in; /* raft datagrams received */
	struct net_batch rq; /* raft datagrams to send, after the journal is flushed */
	unsigned rq_n;
	struct net_batch jb; /* tape datagrams built from the journal */
	/* A group's primary: tape datagrams replicated and not yet committed,
	 * in seq order, slots [0, pend_n); seq_tape_publish() multicasts them
	 * from here once committed (from the journal what is not here). */
	struct net_batch pend;
	uint64_t *pend_first, *pend_last;
	uint64_t *pend_t; /* when each was replicated (mono ns) */
	unsigned pend_n;
	struct hist commit_ns; /* replicated -> committed and multicast, per datagram */
	struct raft_entry *entries; /* a received APPEND's */
	unsigned max_entries;
	size_t tape_cap; /* bytes of a tape datagram built live: room for the LSRF header */
	uint64_t out_first; /* seq of the first event in `out` */
	uint64_t published; /* the primary multicast every event up to here */
	uint64_t commit; /* highest committed seq known */
	int journal_dirty; /* appended or cut since the last journal_flush */
	int gw_dirty; /* the journal was cut: the gateways' next numbers need a rescan */
	int primary_id; /* the primary we know, or RAFT_NOBODY */
	struct seq_flow flow;
	/* The journal cannot be written (ENOSPC, EDQUOT): no command is
	 * sequenced, and raft stands down (stood_down follows disk_full at the
	 * next heartbeat tick, outside any raft call) until the disk has room. */
	int disk_full, stood_down;

	/* The trading day (day.c), as the journal says: the days' first
	 * indices (the wire's sessions), whether the market is closed (an
	 * END_OF_DAY after the last START_OF_DAY), and when the current day
	 * opened and last closed (the events' timestamps, for the schedule). */
	struct tapeday days;
	int closed;
	uint64_t opened_ns, closed_ns;
	int emitting_day; /* the primary is proposing a day event: note it */

	struct seq_stats st;
};

/* ---- sequencer.c: the tape, start and stop ---- */

/* A fatal error: logs "what: error: stopping", marks the node failed and
 * breaks the loop. */
void seq_fail(struct sequencer *s, const char *what, int err);
/* A journal error: a full disk (ENOSPC, EDQUOT) sets disk_full (logged
 * once) and returns 1; anything else is fatal (seq_fail) and returns 0. */
int seq_journal_error(struct sequencer *s, const char *what, int err);
/* Opens the UDP socket `what` at addr into *fd (logging why it cannot).
 * Returns 0 or a negative errno. */
int seq_open_udp(const char *what, const char *addr, const struct net_udp_options *o, int *fd);
/* Flushes the journal when anything was appended since the last flush.
 * Returns 0 or a negative errno. */
int seq_tape_sync(struct sequencer *s);
/* Ends the tape datagram being built in `out`, if one is. */
void seq_tape_close_packet(struct sequencer *s);
/* Sequences one command of gateway g as event next_seq. Returns 0,
 * -EMSGSIZE (refused: it cannot fit one tape datagram) or another negative
 * errno (journal: fatal). */
int seq_tape_emit(struct sequencer *s, const struct seq_gw *g, uint64_t origin_seq,
		  const uint8_t *cmd, size_t len);
/* Sequences an event of the sequencer's own (no origin) with body `body`
 * (a TAPE_BODY_*), and sends it at once. Returns 0 or a negative errno. */
int seq_tape_emit_own(struct sequencer *s, enum tape_body body, const uint8_t *data, size_t len);
/* The end of a batch: journal, replicate or publish what `out` holds.
 * Returns 0 or a negative errno (journal: fatal). */
int seq_tape_flush(struct sequencer *s);
/* Multicasts the committed events [from, to] that have not been. */
void seq_tape_publish(struct sequencer *s, uint64_t from, uint64_t to);

/* ---- gateways.c: the gateway table and command intake ---- */

/* Starts the command and request sockets' watchers; sets up the request
 * timer. */
void seq_gw_start(struct sequencer *s);
/* After a change of role: the primary reads the command socket as
 * datagrams come (cmd_io); any other member does too while they come
 * further apart than standby_poll (a gateway's heartbeats), and when they
 * come closer together reads it every standby_poll instead (cmd_poll,
 * at once while a read leaves some behind), back on cmd_io after a read
 * that found none: the gateways' commands, sent to every member, wake a
 * busy standby about once a standby_poll, not once a datagram. Not under
 * [node] io = uring (the ring reads both sockets as they come). */
void seq_gw_mode(struct sequencer *s);
/* Raises the next expected number of the gateway that sent the command in
 * a journalled event (peeked once by the caller, who also notes its day).
 * Returns 0, or -1 for an origin not understood. */
int seq_gw_note(struct sequencer *s, const struct tape_event_view *v);
/* Rebuilds the gateways' next expected numbers (from scratch with reset:
 * after a cut) and the last term from the journal; restarts their streams
 * there. Returns 0 or a negative errno. */
int seq_gw_rebuild(struct sequencer *s, int reset);
/* Every gateway's stream starts again at its next expected number. */
void seq_gw_restart(struct sequencer *s);
/* Frees every gateway's receiver. */
void seq_gw_close(struct sequencer *s);

/* ---- retrans.c: the tape retransmission server ---- */

/* Starts the retransmission socket's watcher. */
void seq_retrans_start(struct sequencer *s);
/* Fills batch b with tape datagrams of at most cap bytes holding consecutive
 * journalled events [from, to]; returns the number of datagrams and the
 * blocks through *blocks. */
unsigned seq_retrans_read(struct sequencer *s, struct net_batch *b, size_t cap, uint64_t from,
			  uint64_t to, uint64_t *blocks);

/* ---- day.c: the trading day ---- */

/* An event about to be journalled at seq (every role; `v` peeked from it):
 * a START_OF_DAY starts a journal segment of its own. */
void seq_day_before_append(struct sequencer *s, uint64_t seq, const struct tape_event_view *v);
/* The same event, journalled: the day's base, the market's state. */
void seq_day_note(struct sequencer *s, uint64_t seq, const struct tape_event_view *v);
/* Forgets the day state before a rescan of the journal. */
void seq_day_reset(struct sequencer *s);
/* The journal's first event, at a rescan: the day it opens (a journal
 * whose earlier days retention removed begins with a START_OF_DAY, whose
 * gateways' numbers it takes), or day 1's opening time. */
void seq_day_first(struct sequencer *s, const struct tape_event_view *v);
/* Raises gateway `name`'s next expected number to at least `next`. */
void seq_gw_raise(struct sequencer *s, const char *name, uint64_t next);
/* Whether io_append must peek at the event (a standby's, or the primary's
 * own day event). */
static inline int seq_day_peeks(const struct sequencer *s)
{
	return s->state != SEQ_PRIMARY || s->emitting_day;
}
/* The session and sequence number on the wire of tape index `index`. */
void seq_day_wire(const struct sequencer *s, uint64_t index, struct mold_session *session,
		  uint64_t *wire);
/* The primary sequences END_OF_DAY (start = 0) or START_OF_DAY (1), with
 * the current time. Returns 0, -EALREADY (the market is already closed,
 * or open), -EAGAIN (not the primary, or the disk is full), or another
 * negative errno (journal: fatal). What it did goes into msg. */
int seq_day_emit(struct sequencer *s, int start, char *msg, size_t cap);
/* The primary sequences an operator's risk command (admin.c) after
 * checking it: 0, -EINVAL (what is wrong in msg), -EAGAIN (not the
 * primary, or the disk is full), or another negative errno. */
int seq_admin_emit(struct sequencer *s, const Lockstep__Admin *a, char *msg, size_t cap);
/* At the heartbeat tick: the days beyond [sequencer] retention leave the
 * journal once the last START_OF_DAY is committed. */
void seq_day_retain(struct sequencer *s);
/* Checks [sequencer] end_of_day and start_of_day (logging what is wrong).
 * 0 or -EINVAL. */
int seq_day_check_config(const struct seq_config *c);
/* At the heartbeat tick: the primary closes or opens the market when
 * [sequencer] end_of_day / start_of_day has passed since the day opened
 * or closed. */
void seq_day_tick(struct sequencer *s);

/* ---- flow.c: the tape's flow control ---- */

/* A status message from a tape receiver at `from` (retrans socket). */
void seq_flow_status(struct sequencer *s, const uint8_t *buf, size_t len,
		     const struct sockaddr_in *from);
/* Forgets the receivers not heard for flow_timeout; publishes what a
 * higher limit lets out. */
void seq_flow_tick(struct sequencer *s, uint64_t now);
/* `to`, or the limit when it is lower (counted in flow_holds). */
uint64_t seq_flow_cap(struct sequencer *s, uint64_t to);

/* ---- group.c: the glue to raft ---- */

/* Checks [sequencer] peers, node_id and the election timeouts; sets
 * n_peers, id, peers and tape_cap. Returns 0 or -EINVAL (logged). */
int seq_group_check(struct sequencer *s);
/* Raft over the journal and the state file; the raft socket. Returns 0 or
 * a negative errno (logged). */
int seq_group_open(struct sequencer *s);
/* Sets up the raft timer and starts the raft socket's watcher. */
void seq_group_start(struct sequencer *s);
/* Sends the raft datagrams queued (after the journal is flushed). */
void seq_group_send(struct sequencer *s);
/* After every call into raft (r: what it returned): its messages leave,
 * its timer moves; a negative r is fatal. */
void seq_group_done(struct sequencer *s, int r);

#endif
