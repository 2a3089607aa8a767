/* The sequencer's library: everything but main(). See sequencer.h.
 *
 * Hot path, per wakeup of the command socket: up to `drain` recvmmsg calls of
 * `batch` datagrams each; every accepted command is wrapped into an Event
 * directly inside the outgoing tape datagram (the command bytes are copied,
 * never decoded) and appended to the journal; at the end of each recvmmsg
 * batch the journal is flushed and then every tape datagram built goes out in
 * one sendmmsg. Nothing is allocated per message. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addrlist.h"
#include "clock.h"
#include "ctl.h"
#include "daemon.h"
#include "hist.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "raft.h"
#include "rx.h"
#include "rxpath.h"
#include "sequencer.h"
#include "tape.h"
#include "wire.h"

#define SEQ_GW_SLOTS 512 /* open addressing, load <= 1/2 at SEQ_MAX_GATEWAYS */
#define SEQ_RETRANS_SLOTS 16 /* requests taken per wakeup of the retrans socket */
#define SEQ_RETRANS_SLOT_SIZE 64 /* a request is 20 bytes; longer ones are refused */

static const char *const fsync_names[] = { "none", "interval", "batch", NULL };

#define K(name, type, member, size, def, min, max, names, help) \
	{ "sequencer", name, type, offsetof(struct seq_config, member), size, def, min, max, \
	  names, help }
const struct config_key seq_config_keys[] = {
	DAEMON_NODE_KEYS(struct seq_config, node),
	K("listen", CONFIG_STRING, listen, sizeof(((struct seq_config *)0)->listen),
	  "127.0.0.1:9100", 0, 0, NULL, "UDP address for the gateways' command streams"),
	K("retrans", CONFIG_STRING, retrans, sizeof(((struct seq_config *)0)->retrans),
	  "127.0.0.1:9101", 0, 0, NULL, "UDP address for tape retransmission requests"),
	K("tape_group", CONFIG_STRING, tape_group, sizeof(((struct seq_config *)0)->tape_group),
	  "239.255.0.1:9200", 0, 0, NULL, "multicast group:port of the tape"),
	K("tape_iface", CONFIG_STRING, tape_iface, sizeof(((struct seq_config *)0)->tape_iface),
	  "127.0.0.1", 0, 0, NULL, "interface (name or address) the tape is sent from"),
	K("tape_session", CONFIG_STRING, tape_session,
	  sizeof(((struct seq_config *)0)->tape_session), "TAPE", 0, 0, NULL,
	  "MoldUDP64 session name of the tape"),
	K("tape_ttl", CONFIG_UINT, tape_ttl, 0, "1", 0, 255, NULL, "multicast TTL of the tape"),
	K("heartbeat", CONFIG_DURATION, heartbeat_ns, 0, "100ms", 1e6, 60e9, NULL,
	  "send a tape heartbeat when nothing was sent for this long"),
	K("fsync", CONFIG_ENUM, fsync, 0, "interval", 0, 0, fsync_names,
	  "journal fsync policy: none, interval or batch (every received batch)"),
	K("fsync_interval", CONFIG_DURATION, fsync_interval_ns, 0, "100ms", 1e6, 60e9, NULL,
	  "fsync period under fsync=interval"),
	K("segment_size", CONFIG_SIZE, segment_size, 0, "64M", 1 << 16, 1ull << 40, NULL,
	  "roll the journal to a new segment past this size"),
	K("rcvbuf", CONFIG_SIZE, rcvbuf, 0, "8M", 0, 1 << 30, NULL,
	  "receive buffer of the command socket"),
	K("sndbuf", CONFIG_SIZE, sndbuf, 0, "4M", 0, 1 << 30, NULL,
	  "send buffer of the tape and retransmission sockets"),
	K("max_datagram", CONFIG_SIZE, max_datagram, 0, "1472", 256, 65507, NULL,
	  "largest datagram taken from gateways and sent on the tape"),
	K("batch", CONFIG_UINT, batch, 0, "64", 1, 1024, NULL, "datagrams per recvmmsg call"),
	K("drain", CONFIG_UINT, drain, 0, "16", 1, 1024, NULL,
	  "recvmmsg calls per wakeup at most (then the other sockets get a turn)"),
	K("request_interval", CONFIG_DURATION, request_interval_ns, 0, "10ms", 1e5, 10e9, NULL,
	  "wait before asking a gateway again for commands still missing (doubles each time)"),
	K("request_interval_max", CONFIG_DURATION, request_interval_max_ns, 0, "1s", 1e5, 600e9,
	  NULL, "longest wait between two requests for one gap"),
	K("request_delay", CONFIG_DURATION, request_delay_ns, 0, "2ms", 0, 10e9, NULL,
	  "the first request for a new gap waits a random time up to this"),
	K("reorder_window", CONFIG_UINT, reorder_window, 0, "8192", 2, 1 << 24, NULL,
	  "commands held ahead of a gap, per gateway"),
	K("reorder_bytes", CONFIG_SIZE, reorder_bytes, 0, "1M", 4096, 4294967295.0, NULL,
	  "memory for the commands held ahead of a gap, per gateway"),
	K("drop_rate", CONFIG_DOUBLE, drop_rate, 0, "0", 0, 1, NULL,
	  "loss generator for tests: fraction of received datagrams thrown away"),
	K("drop_seed", CONFIG_UINT, drop_seed, 0, "1", 0, 0, NULL,
	  "loss generator seed: the same seed loses the same packets"),
	K("retrans_packets", CONFIG_UINT, retrans_packets, 0, "64", 1, 1024, NULL,
	  "datagrams in one retransmission answer at most"),
	K("node_id", CONFIG_UINT, node_id, 0, "0", 0, SEQ_MAX_PEERS - 1, NULL,
	  "this sequencer's index in peers (0..n-1)"),
	K("peers", CONFIG_STRING, peers, sizeof(((struct seq_config *)0)->peers), "", 0, 0, NULL,
	  "every group member's raft control UDP host:port, comma separated, index = node_id "
	  "(empty: a group of one)"),
	K("election_min", CONFIG_DURATION, election_min_ns, 0, "150ms", 1e6, 60e9, NULL,
	  "shortest randomized election timeout of a group"),
	K("election_max", CONFIG_DURATION, election_max_ns, 0, "300ms", 1e6, 60e9, NULL,
	  "longest randomized election timeout of a group"),
	K("raft_heartbeat", CONFIG_DURATION, raft_heartbeat_ns, 0, "50ms", 1e5, 60e9, NULL,
	  "a group's primary tells the standbys it is alive when idle this long"),
	CONFIG_END,
};
#undef K

const struct config_spec seq_config_spec = { .keys = seq_config_keys };

const struct counter_def seq_counters[SEQ_N_COUNTERS] = {
	COUNTER(packets_received), COUNTER(commands_received), COUNTER(commands_sequenced),
	COUNTER(duplicates), COUNTER(gaps), COUNTER(gap_requests_sent),
	COUNTER(malformed_packets), COUNTER(oversize_commands), COUNTER(gateways_full),
	COUNTER(heartbeats_received), COUNTER(tape_packets_sent), COUNTER(tape_heartbeats_sent),
	COUNTER(tape_send_errors), COUNTER(retrans_requests), COUNTER(retrans_bad_requests),
	COUNTER(retrans_blocks_sent), COUNTER(retrans_packets_sent), GAUGE(journal_bytes),
	GAUGE(gateways), COUNTER(rxq_dropped), COUNTER(commands_held), COUNTER(commands_overflow),
	COUNTER(gap_blocks_requested), COUNTER(gateway_answers), COUNTER(gateway_too_old),
	COUNTER(commands_lost), COUNTER(retrans_too_old), COUNTER(drops_injected),
	COUNTER(kernel_rcvbuf_errors), COUNTER(commands_ignored), COUNTER(raft_received),
	COUNTER(raft_malformed), COUNTER(raft_sent), COUNTER(raft_send_errors),
	COUNTER(elections), COUNTER(prevotes), COUNTER(votes_granted), COUNTER(appends_received),
	COUNTER(entries_replicated), COUNTER(raft_requests_sent), COUNTER(raft_requests_served),
	COUNTER(truncations), COUNTER(stale_ignored), COUNTER(stepdowns), GAUGE(commit),
	GAUGE(commit_us_p50), GAUGE(commit_us_p99), GAUGE(commit_us_max), COUNTER(handovers),
	COUNTER(handovers_abandoned), COUNTER(timeout_now), COUNTER(commands_handover),
};

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
static const char *const seq_state_names[SEQ_STATE_MAX] = { "starting",	 "primary",
							     "standby",	 "waiting",
							     "candidate", "stopped" };

#define SEQ_RAFT_SLOTS 64 /* raft datagrams taken per recvmmsg */
#define SEQ_RAFT_MAX_ENTRIES 2048 /* entries in one answer to a standby's REQUEST */

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
	struct mold_session tape_session;
	ev_io cmd_io, retrans_io;
	ev_timer heartbeat;
	uint64_t last_tape_send_ns;

	struct net_batch in; /* command datagrams */
	struct net_batch out; /* tape datagrams being built */
	unsigned out_n; /* complete datagrams in `out` */
	int out_open; /* a datagram is being built in slot out_n */
	struct mold_builder builder;
	uint64_t now_ns, now_wall; /* read once per batch */

	struct net_batch rin, rout; /* retransmission requests, answers */

	/* Gap requests to the gateways leave from req_fd, so that what comes
	 * back there is an answer: data, or the too-old answer (common/rx.h). */
	int req_fd;
	ev_io req_io;
	ev_timer rx_timer; /* the earliest request any gateway's rx has due */
	struct rx_rng rng;
	struct rx_drop drop_cmd, drop_req, drop_retrans, drop_raft;
	uint64_t rxq_cmd, rxq_req, rxq_retrans, rxq_raft;
	int fatal; /* a journal error inside a delivery: negative errno */

	struct seq_gw gw[SEQ_GW_SLOTS];
	struct seq_gw *gw_list[SEQ_MAX_GATEWAYS]; /* the used slots */
	struct seq_gw *gw_last; /* last one looked up: streams come in runs */
	unsigned n_gw;

	/* The group (sequencer/raft.h). n_peers 1: a group of one, no socket. */
	struct raft *raft;
	int n_peers, id;
	struct sockaddr_in peers[SEQ_MAX_PEERS];
	int raft_fd;
	ev_io raft_io;
	ev_timer raft_timer;
	struct net_batch raft_in; /* raft datagrams received */
	struct net_batch rq; /* raft datagrams to send, after the journal is flushed */
	unsigned rq_n;
	struct net_batch jb; /* tape datagrams built from the journal */
	/* A group's primary: tape datagrams replicated and not yet committed,
	 * in seq order, slots [0, pend_n); publish() multicasts them from
	 * here once committed (from the journal what is not here). */
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

	struct seq_stats st;
	struct log_ratelimit rl_malformed, rl_gap, rl_oversize, rl_retrans, rl_tape;
};

/* ---- the group's wire -------------------------------------------------- */

int seq_parse_peers(const char *peers, struct sockaddr_in *out, int max)
{
	int n;

	if (peers[strspn(peers, " \t")] == '\0')
		return 0; /* a group of one */
	n = net_parse_addr_list(peers, out, max);
	if (n == -E2BIG)
		return n;
	if (n < 0)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (out[i].sin_port == 0)
			return -EINVAL;
	return n;
}

static const uint8_t raft_magic[4] = { 'L', 'S', 'R', 'F' };

size_t seq_raft_encode(uint8_t *out, const struct raft_msg *m, const struct mold_session *sess)
{
	memcpy(out, raft_magic, 4);
	out[4] = 1;
	out[5] = (uint8_t)m->type;
	out[6] = (uint8_t)m->flags;
	out[7] = (uint8_t)m->from;
	out[8] = m->to == RAFT_ALL ? 0xff : (uint8_t)m->to;
	out[9] = 0;
	memcpy(out + 10, sess->name, MOLD_SESSION_LEN);
	wire_put_u64(out + 20, m->term);
	wire_put_u64(out + 28, m->seq);
	wire_put_u64(out + 36, m->seq_term);
	wire_put_u64(out + 44, m->commit);
	return SEQ_RAFT_WIRE_LEN;
}

int seq_raft_decode(const uint8_t *buf, size_t len, const struct mold_session *sess, int n_nodes,
		    struct raft_msg *m)
{
	if (len < SEQ_RAFT_WIRE_LEN || memcmp(buf, raft_magic, 4) != 0 || buf[4] != 1 ||
	    buf[9] != 0 || memcmp(buf + 10, sess->name, MOLD_SESSION_LEN) != 0)
		return -EBADMSG;
	if (len > SEQ_RAFT_WIRE_LEN && buf[5] != RAFT_MSG_APPEND)
		return -EBADMSG;
	switch (buf[5]) {
	case RAFT_MSG_APPEND:
	case RAFT_MSG_VOTE:
	case RAFT_MSG_VOTE_REPLY:
	case RAFT_MSG_ACK:
	case RAFT_MSG_REQUEST:
	case RAFT_MSG_HEARTBEAT:
	case RAFT_MSG_TIMEOUT_NOW:
		break;
	default:
		return -EBADMSG;
	}
	if (buf[7] >= n_nodes || (buf[8] != 0xff && buf[8] >= n_nodes) || buf[6] & ~7u)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	m->type = (enum raft_msg_type)buf[5];
	m->flags = buf[6];
	m->from = buf[7];
	m->to = buf[8] == 0xff ? RAFT_ALL : buf[8];
	m->term = wire_get_u64(buf + 20);
	m->seq = wire_get_u64(buf + 28);
	m->seq_term = wire_get_u64(buf + 36);
	m->commit = wire_get_u64(buf + 44);
	return 0;
}

int seq_raft_decode_entries(const uint8_t *buf, size_t len, const struct mold_session *sess,
			    struct raft_msg *m, struct raft_entry *out, unsigned max)
{
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t blen;
	unsigned n = 0;
	int r;

	m->entries = out;
	m->n_entries = 0;
	if (len == SEQ_RAFT_WIRE_LEN)
		return 0; /* an APPEND with no entries */
	if (mold_parse(buf + SEQ_RAFT_WIRE_LEN, len - SEQ_RAFT_WIRE_LEN, sess, 0, &pkt) < 0 ||
	    pkt.kind != MOLD_DATA || pkt.seq != m->seq + 1 || pkt.count > max)
		return -EBADMSG;
	mold_iter_init(&it, &pkt);
	while ((r = mold_iter_next(&it, &seq, &data, &blen)) == 1) {
		struct tape_event_view v;

		if (tape_event_peek(data, blen, &v) < 0 || v.seq != seq || v.term == 0)
			return -EBADMSG;
		out[n].term = v.term;
		out[n].data = data;
		out[n].len = blen;
		n++;
	}
	if (r < 0 || n != pkt.count)
		return -EBADMSG;
	m->n_entries = n;
	return 0;
}

/* ---- gateways ---------------------------------------------------------- */

static unsigned gw_hash(const struct mold_session *s)
{
	uint32_t h = 2166136261u;

	for (unsigned i = 0; i < MOLD_SESSION_LEN; i++)
		h = (h ^ (uint8_t)s->name[i]) * 16777619u;
	return h & (SEQ_GW_SLOTS - 1);
}

/* 1 when the session is a name that survives the trip through an event's
 * origin and back: printable ASCII, not blank, padded with spaces only. */
static int gw_name_ok(const struct mold_session *sess)
{
	struct mold_session back;
	char name[MOLD_SESSION_LEN + 1];

	mold_session_str(sess, name);
	return name[0] != '\0' && name[0] != ' ' && mold_session_set(&back, name) == 0 &&
	       memcmp(back.name, sess->name, MOLD_SESSION_LEN) == 0;
}

static int gw_rx_open(struct sequencer *s, struct seq_gw *g);

/* The gateway of session `s`, added when new; NULL when the table is full
 * or its receiver cannot be made (*bad 0) or the name is unusable (*bad 1). */
static struct seq_gw *gw_get(struct sequencer *s, const struct mold_session *sess, int *bad)
{
	unsigned i;

	if (s->gw_last && memcmp(s->gw_last->session.name, sess->name, MOLD_SESSION_LEN) == 0)
		return s->gw_last;
	for (i = gw_hash(sess);; i = (i + 1) & (SEQ_GW_SLOTS - 1)) {
		struct seq_gw *g = &s->gw[i];

		if (g->used && memcmp(g->session.name, sess->name, MOLD_SESSION_LEN) == 0)
			return s->gw_last = g;
		if (!g->used)
			break;
	}
	*bad = !gw_name_ok(sess);
	if (*bad || s->n_gw >= SEQ_MAX_GATEWAYS)
		return NULL;
	s->gw[i] = (struct seq_gw){ .session = *sess, .used = 1, .next = 1, .s = s };
	mold_session_str(sess, s->gw[i].name);
	if (gw_rx_open(s, &s->gw[i]) < 0) {
		s->gw[i].used = 0;
		return NULL;
	}
	s->gw_list[s->n_gw++] = &s->gw[i];
	return s->gw_last = &s->gw[i];
}


/* ---- the tape ---------------------------------------------------------- */

static void fail(struct sequencer *s, const char *what, int err)
{
	log_err("%s: %s: stopping", what, strerror(-err));
	s->failed = 1;
	ev_break(s->loop, EVBREAK_ALL);
}

/* Durable before visible: every raft output and every tape datagram leaves
 * only after what the journal was given is written (and synced, under
 * fsync=batch). A no-op when nothing was appended since. */
static int journal_sync(struct sequencer *s)
{
	int r;

	if (!s->journal_dirty)
		return 0;
	r = journal_flush(s->journal);
	if (r == 0)
		s->journal_dirty = 0;
	return r;
}

static void out_close_packet(struct sequencer *s)
{
	if (!s->out_open)
		return;
	s->out.lens[s->out_n] = mold_build_end(&s->builder);
	s->out.addrs[s->out_n] = s->group;
	s->out_n++;
	s->out_open = 0;
}

/* Multicasts datagrams [0, n) of batch b on the tape. */
static void tape_send(struct sequencer *s, struct net_batch *b, unsigned n)
{
	int r;

	if (n == 0)
		return;
	for (unsigned i = 0; i < n; i++)
		b->addrs[i] = s->group;
	r = net_batch_send(b, s->tape_fd, n);
	if (r < 0 || (unsigned)r < n) {
		s->st.tape_send_errors += n - (r < 0 ? 0 : (unsigned)r);
		log_ratelimited(&s->rl_tape, LOG_LVL_WARNING, "tape: sent %d of %u datagrams: %s",
				r < 0 ? 0 : r, n, r < 0 ? strerror(-r) : "short send");
	}
	if (r > 0)
		s->st.tape_packets_sent += (unsigned)r;
	s->last_tape_send_ns = s->now_ns;
}

static void rq_send(struct sequencer *s);

/* Drops the first k pending datagrams (sent, or to be read back from the
 * journal instead). */
static void pend_drop(struct sequencer *s, unsigned k)
{
	unsigned left = s->pend_n - k;

	if (left > 0) {
		memmove(s->pend.data, net_batch_slot(&s->pend, k), (size_t)left * s->pend.size);
		memmove(s->pend.lens, s->pend.lens + k, left * sizeof(*s->pend.lens));
		memmove(s->pend_first, s->pend_first + k, left * sizeof(*s->pend_first));
		memmove(s->pend_last, s->pend_last + k, left * sizeof(*s->pend_last));
		memmove(s->pend_t, s->pend_t + k, left * sizeof(*s->pend_t));
	}
	s->pend_n = left;
}

/* Keeps a copy of a replicated tape datagram until it is committed. When
 * the queue is full (no majority answers), the oldest copy goes: publish()
 * reads those events back from the journal. */
static void pend_push(struct sequencer *s, const uint8_t *dg, size_t len)
{
	uint64_t first = wire_get_u64(dg + MOLD_SESSION_LEN);
	uint16_t count = (uint16_t)(dg[MOLD_SESSION_LEN + 8] << 8 | dg[MOLD_SESSION_LEN + 9]);

	if (s->pend_n == s->pend.n)
		pend_drop(s, s->pend.n / 4);
	memcpy(net_batch_slot(&s->pend, s->pend_n), dg, len);
	s->pend.lens[s->pend_n] = len;
	s->pend_first[s->pend_n] = first;
	s->pend_last[s->pend_n] = first + count - 1;
	s->pend_t[s->pend_n] = s->now_ns;
	s->pend_n++;
}

/* The end of a batch: the journal is flushed, then raft_flush replicates the
 * batch's datagrams to the standbys (a group) or commits them at once and
 * publish() multicasts them (a group of one). Returns 0 or a negative errno
 * (journal failure: fatal). */
static int out_flush(struct sequencer *s)
{
	int r;

	out_close_packet(s);
	if (s->out_n == 0)
		return 0;
	if ((r = journal_sync(s)) < 0 || (r = raft_flush(s->raft, s->now_ns)) < 0)
		return r;
	/* A group of one: publish() sent them. A group: io_send() copied them
	 * to the standbys; they wait in `pend` for their commit. */
	for (unsigned k = 0; k < s->out_n && s->n_peers > 1; k++)
		pend_push(s, net_batch_slot(&s->out, k), s->out.lens[k]);
	s->out_n = 0;
	rq_send(s);
	return 0;
}

/* Room left for one more block in the open datagram (0 when none is open). */
static size_t out_room(const struct sequencer *s)
{
	const struct mold_builder *b = &s->builder;

	if (!s->out_open || b->count >= MOLD_MAX_COUNT || b->cap - b->len < 2)
		return 0;
	return b->cap - b->len - 2;
}

/* Where the next event's bytes go (*p NULL when the open datagram is full):
 * opens a datagram when needed, sending the batch first when every slot is
 * full. Returns 0 or a negative errno (journal failure). */
static int out_reserve(struct sequencer *s, uint8_t **p, size_t *room)
{
	int r;

	if (!s->out_open) {
		if (s->out_n == s->out.n && (r = out_flush(s)) < 0)
			return r;
		if (s->out_n == 0)
			s->out_first = s->next_seq;
		mold_build_begin(&s->builder, net_batch_slot(&s->out, s->out_n), s->tape_cap,
				 &s->tape_session, s->next_seq);
		s->out_open = 1;
	}
	*room = out_room(s);
	*p = mold_build_reserve(&s->builder, (uint16_t)*room);
	return 0;
}

/* Proposes the `len` bytes just written at the reserved place as event
 * next_seq (raft journals it) and commits them to the datagram. */
static int out_commit(struct sequencer *s, const uint8_t *ev, size_t len)
{
	uint64_t seq = 0;
	int r = raft_propose(s->raft, ev, len, &seq);

	if (r < 0)
		return r;
	if (seq != s->next_seq) {
		log_err("raft proposed seq %llu where %llu was built", (unsigned long long)seq,
			(unsigned long long)s->next_seq);
		return -EPROTO;
	}
	mold_build_commit(&s->builder, (uint16_t)len);
	s->next_seq++;
	return 0;
}

/* Sequences one command. Returns 0, -EMSGSIZE when it cannot fit one tape
 * datagram, or another negative errno (journal: fatal). The event's commit
 * field is its own seq: it is multicast only once committed. */
static int emit_command(struct sequencer *s, const struct seq_gw *g, uint64_t origin_seq,
			const uint8_t *cmd, size_t len)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		size_t room = 0, n = 0;
		uint8_t *p;
		int r = out_reserve(s, &p, &room);

		if (r < 0)
			return r;
		if (p)
			n = tape_event_encode(p, room, s->term, s->next_seq, s->now_wall, g->name,
					      origin_seq, s->next_seq, cmd, len);
		if (n > 0)
			return out_commit(s, p, n);
		if (s->builder.count == 0)
			return -EMSGSIZE;
		out_close_packet(s);
	}
	return -EMSGSIZE;
}

/* The first event of a term, at seq, journalled directly (raft sends it to
 * the standbys from the journal). Packed with protobuf-c: once per term. */
static int journal_term_start(struct sequencer *s, uint64_t seq, uint64_t term)
{
	Lockstep__TermStart ts = LOCKSTEP__TERM_START__INIT;
	Lockstep__Event ev = LOCKSTEP__EVENT__INIT;
	uint8_t buf[256];
	size_t n;
	int r;

	ts.node = s->cfg.node.name;
	ev.term = term;
	ev.seq = seq;
	ev.timestamp = wall_ns();
	ev.commit = seq;
	ev.body_case = LOCKSTEP__EVENT__BODY_TERM_START;
	ev.term_start = &ts;
	n = lockstep__event__get_packed_size(&ev);
	if (n > sizeof(buf) || n > s->tape_cap - MOLD_HEADER_LEN - 2)
		return -EMSGSIZE;
	lockstep__event__pack(&ev, buf);
	r = journal_append(s->journal, seq, term, buf, n);
	if (r == 0)
		s->journal_dirty = 1;
	return r;
}

/* Multicasts committed events [from, to] that this primary has not sent:
 * straight from `out` when the batch just built is exactly them (a group
 * of one), else rebuilt from the journal. */
static unsigned tape_build(struct sequencer *s, struct net_batch *b, size_t cap, uint64_t from,
			   uint64_t to, uint64_t *blocks);

/* Multicasts events [from, to] from the journal. */
static void publish_journal(struct sequencer *s, uint64_t from, uint64_t to)
{
	if (journal_sync(s) < 0)
		return; /* fatal elsewhere; nothing unjournalled leaves */
	while (from <= to) {
		uint64_t blocks = 0;
		unsigned n = tape_build(s, &s->jb, s->jb.size, from, to, &blocks);

		if (n == 0 || blocks == 0) {
			log_ratelimited(&s->rl_tape, LOG_LVL_WARNING,
					"tape: cannot read events %llu..%llu back from the journal",
					(unsigned long long)from, (unsigned long long)to);
			return;
		}
		tape_send(s, &s->jb, n);
		from += blocks;
		s->published = from - 1;
	}
}

static void publish(struct sequencer *s, uint64_t from, uint64_t to)
{
	if (from <= s->published)
		from = s->published + 1;
	if (from > to)
		return;
	out_close_packet(s);
	if (s->n_peers == 1 && s->out_n > 0 && s->out_first == from && s->next_seq - 1 == to) {
		tape_send(s, &s->out, s->out_n);
		s->out_n = 0;
		s->published = to;
		return;
	}
	while (s->published < to) {
		uint64_t next = s->published + 1;
		unsigned k = 0;

		while (s->pend_n > 0 && s->pend_last[0] < next)
			pend_drop(s, 1); /* published from the journal already */
		if (s->pend_n == 0 || s->pend_first[0] > next) {
			/* not kept (the term start, older terms, evicted) */
			uint64_t hi = s->pend_n && s->pend_first[0] - 1 < to ? s->pend_first[0] - 1 : to;

			publish_journal(s, next, hi);
			if (s->published < hi)
				return;
			continue;
		}
		if (s->pend_first[0] < next) {
			/* the head was partly published from the journal */
			publish_journal(s, next, s->pend_last[0] < to ? s->pend_last[0] : to);
			continue;
		}
		while (k < s->pend_n && s->pend_last[k] <= to &&
		       s->pend_first[k] == (k ? s->pend_last[k - 1] + 1 : next))
			k++;
		if (k == 0)
			return; /* the head is committed only in part: wait for the rest */
		tape_send(s, &s->pend, k);
		for (unsigned i = 0; i < k; i++)
			hist_record(&s->commit_ns, s->now_ns - s->pend_t[i]);
		s->published = s->pend_last[k - 1];
		pend_drop(s, k);
	}
}

static void send_tape_control(struct sequencer *s, int eos)
{
	uint8_t pkt[MOLD_HEADER_LEN];
	uint64_t next = (s->published < s->commit ? s->published : s->commit) + 1;
	size_t n = eos ? mold_build_end_of_session(pkt, &s->tape_session, next)
		       : mold_build_heartbeat(pkt, &s->tape_session, next);

	if (sendto(s->tape_fd, pkt, n, 0, (const struct sockaddr *)&s->group, sizeof(s->group)) < 0) {
		s->st.tape_send_errors++;
		log_ratelimited(&s->rl_tape, LOG_LVL_WARNING, "tape: %s: %s",
				eos ? "end of session" : "heartbeat", strerror(errno));
		return;
	}
	s->st.tape_heartbeats_sent += !eos;
	s->last_tape_send_ns = mono_ns();
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, heartbeat);
	uint64_t now = mono_ns();
	int r;

	(void)loop;
	(void)revents;
	r = journal_tick(s->journal, now / 1000000u);
	if (r < 0) {
		fail(s, "journal fsync", r);
		return;
	}
	/* only the primary speaks on the tape */
	if (s->state == SEQ_PRIMARY && now - s->last_tape_send_ns >= s->cfg.heartbeat_ns)
		send_tape_control(s, 0);
}

/* ---- the command streams ---------------------------------------------- */

/* Each gateway's stream goes through its own rx (common/rx.h): commands are
 * sequenced in the gateway's order, those after a gap are held, and every
 * missing range is asked for from the gateway with a request packet. The
 * command bytes are copied, never decoded. */

/* rx delivers gateway command `seq`, the next in order. */
static int gw_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct seq_gw *g = ctx;
	struct sequencer *s = g->s;
	int r;

	if (s->fatal)
		return RX_HOLD;
	r = len ? emit_command(s, g, seq, data, len) : -EMSGSIZE;
	if (r == -EMSGSIZE) {
		/* Refused, not sequenced: the number stays expected. */
		s->st.oversize_commands++;
		log_ratelimited(&s->rl_oversize, LOG_LVL_WARNING,
				"gateway %s: command %llu of %u bytes refused (empty or too long for "
				"one tape datagram)",
				g->name, (unsigned long long)seq, len);
		return RX_REJECT;
	}
	if (r < 0) {
		s->fatal = r;
		return RX_HOLD;
	}
	g->next = seq + 1;
	s->st.commands_sequenced++;
	return RX_TAKEN;
}

/* Asks gateway g for [seq, seq + count) at the address it sends from. */
static void gw_send_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	struct seq_gw *g = ctx;
	struct sequencer *s = g->s;
	struct mold_request req = { .session = g->session, .seq = seq, .count = count };
	uint8_t pkt[MOLD_REQUEST_LEN];

	(void)server;
	if (g->addr.sin_family != AF_INET)
		return; /* never heard from: nowhere to ask */
	mold_build_request(pkt, &req);
	if (sendto(s->req_fd, pkt, sizeof(pkt), 0, (const struct sockaddr *)&g->addr,
		   sizeof(g->addr)) < 0) {
		log_ratelimited(&s->rl_gap, LOG_LVL_WARNING, "gateway %s: request: %s", g->name,
				strerror(errno));
		return;
	}
	log_ratelimited(&s->rl_gap, LOG_LVL_INFO, "gateway %s: gap, asked for %u from %llu",
			g->name, (unsigned)count, (unsigned long long)seq);
}

/* The gateway's journal no longer holds [from, to): nobody can send them,
 * so the stream goes on after them, loudly. */
static int gw_lost(void *ctx, uint64_t from, uint64_t to)
{
	struct seq_gw *g = ctx;

	log_err("gateway %s: commands %llu..%llu are no longer in its journal: they are lost "
		"and will never be sequenced",
		g->name, (unsigned long long)from, (unsigned long long)(to - 1));
	return 1;
}

static const struct rx_ops gw_rx_ops = { gw_deliver, gw_send_request, gw_lost };

static int gw_rx_open(struct sequencer *s, struct seq_gw *g)
{
	const struct seq_config *c = &s->cfg;
	uint64_t wait = c->request_interval_ns ? c->request_interval_ns : 10000000u;
	struct rx_config rc = {
		.window = c->reorder_window ? (uint32_t)c->reorder_window : 8192,
		.ring_bytes = c->reorder_bytes ? c->reorder_bytes : 1u << 20,
		.max_count = MOLD_MAX_COUNT,
		.delay_ns = c->request_delay_ns,
		.retry_ns = wait,
		.retry_max_ns = c->request_interval_max_ns > wait ? c->request_interval_max_ns : wait,
		.settle_ns = wait / 4, /* answers in flight are not asked again */
		.n_servers = 1,
		.rng = &s->rng,
	};
	int r = rx_create(&g->rx, &rc, &gw_rx_ops, g);

	if (r < 0) {
		log_err("gateway %s: receiver: %s", g->name, strerror(-r));
		return r;
	}
	rx_start(g->rx, g->next);
	return 0;
}

/* Arms rx_timer for the earliest request due on any gateway's stream. */
static void gw_rx_arm(struct sequencer *s)
{
	uint64_t due = RX_NEVER;

	for (unsigned i = 0; i < s->n_gw; i++)
		due = rxpath_due_min(due, s->gw_list[i]->rx);
	rxpath_arm(s->loop, &s->rx_timer, s->state == SEQ_PRIMARY ? due : RX_NEVER, mono_ns());
}

/* One datagram from a gateway; answer: it came to the request socket. */
static int handle_packet(struct sequencer *s, const uint8_t *buf, size_t len,
			 const struct sockaddr_in *from, int answer)
{
	struct mold_packet pkt;
	struct seq_gw *g;
	int bad = 0, r;

	if (rx_drop(answer ? &s->drop_req : &s->drop_cmd, buf, len))
		return 0;
	s->st.packets_received++;
	r = mold_parse(buf, len, NULL, s->cfg.max_datagram, &pkt);
	if (r < 0) {
		char a[32];

		s->st.malformed_packets++;
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&s->rl_malformed, LOG_LVL_WARNING,
				"malformed command datagram (%zu bytes) from %s: %s", len, a,
				mold_strerror(r));
		return 0;
	}
	g = gw_get(s, &pkt.session, &bad);
	if (!g && bad) {
		s->st.malformed_packets++;
		log_ratelimited(&s->rl_malformed, LOG_LVL_WARNING,
				"command datagram with an unusable session name dropped");
		return 0;
	}
	if (!g) {
		s->st.gateways_full++;
		log_ratelimited(&s->rl_malformed, LOG_LVL_WARNING,
				"more than %d gateways: datagram dropped", SEQ_MAX_GATEWAYS);
		return 0;
	}
	if (answer) {
		s->st.gateway_answers++;
		if (pkt.kind == MOLD_HEARTBEAT) {
			char what[MOLD_SESSION_LEN + 16];

			s->st.gateway_too_old++;
			snprintf(what, sizeof(what), "gateway %s", g->name);
			rxpath_too_old(g->rx, 0, what, from, pkt.seq, s->now_ns);
			return s->fatal;
		}
	} else {
		g->addr = *from;
	}
	if (s->state != SEQ_PRIMARY) {
		/* A standby: the primary sequences this; a new primary will ask
		 * the gateway for whatever it has not journalled. */
		s->st.commands_ignored++;
		return 0;
	}
	if (raft_transfer_target(s->raft) != RAFT_NOBODY) {
		/* Handing over: nothing new is sequenced here; the next
		 * primary asks the gateway for it (or this one does, if the
		 * hand-over is abandoned: the rx sees the gap). */
		s->st.commands_handover++;
		return 0;
	}
	if (pkt.kind == MOLD_DATA)
		s->st.commands_received += pkt.count;
	else if (!answer)
		s->st.heartbeats_received++;
	rx_packet(g->rx, &pkt, s->now_ns);
	return s->fatal;
}

/* Datagrams from the gateways: their streams on cmd_fd, answers to our
 * requests on req_fd. */
static void on_cmd_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = w->data;
	int answer = w == &s->req_io;
	int r;

	(void)loop;
	(void)revents;
	for (uint64_t round = 0; round < s->cfg.drain; round++) {
		int n = net_batch_recv_counted(&s->in, w->fd, answer ? &s->rxq_req : &s->rxq_cmd);

		r = 0;
		if (n <= 0) {
			if (n < 0)
				log_ratelimited(&s->rl_malformed, LOG_LVL_WARNING, "recvmmsg: %s",
						strerror(-n));
			break;
		}
		s->now_ns = mono_ns();
		s->now_wall = wall_ns();
		for (int i = 0; i < n && r == 0; i++)
			r = handle_packet(s, net_batch_slot(&s->in, (unsigned)i), s->in.lens[i],
					  &s->in.addrs[i], answer);
		if (r == 0)
			r = out_flush(s);
		if (r < 0) {
			fail(s, "journal", r);
			return;
		}
		if ((unsigned)n < s->in.n)
			break;
	}
	gw_rx_arm(s);
	r = journal_tick(s->journal, s->now_ns / 1000000u);
	if (r < 0)
		fail(s, "journal fsync", r);
}

/* Sends the gap requests that are due. */
static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, rx_timer);

	(void)loop;
	(void)revents;
	s->now_ns = mono_ns();
	for (unsigned i = 0; i < s->n_gw; i++)
		rx_tick(s->gw_list[i]->rx, s->now_ns);
	gw_rx_arm(s);
}

/* ---- retransmission ---------------------------------------------------- */

/* Fills batch b with tape datagrams of at most cap bytes holding consecutive
 * journalled events [from, to]; returns the number of datagrams and the
 * blocks through *blocks. */
static unsigned tape_build(struct sequencer *s, struct net_batch *b, size_t cap, uint64_t from,
			   uint64_t to, uint64_t *blocks)
{
	struct journal_iter *it;
	struct mold_builder mb;
	unsigned np = 0;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int r;

	*blocks = 0;
	if (journal_iter_open(&it, s->journal, from) < 0)
		return 0;
	mold_build_begin(&mb, net_batch_slot(b, 0), cap, &s->tape_session, from);
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1 && seq <= to) {
		if (mold_build_add(&mb, data, (uint16_t)len) == MOLD_OK) {
			(*blocks)++;
			continue;
		}
		if (mb.count == 0)
			break; /* a record longer than a datagram: cannot be served */
		b->lens[np++] = mold_build_end(&mb);
		if (np == b->n)
			break;
		mold_build_begin(&mb, net_batch_slot(b, np), cap, &s->tape_session,
				 seq);
		if (mold_build_add(&mb, data, (uint16_t)len) != MOLD_OK)
			break;
		(*blocks)++;
	}
	if (r < 0)
		log_ratelimited(&s->rl_retrans, LOG_LVL_WARNING, "retrans: journal read: %s",
				strerror(-r));
	if (np < b->n && mb.count > 0)
		b->lens[np++] = mold_build_end(&mb);
	journal_iter_close(it);
	return np;
}

static void retrans_serve(struct sequencer *s, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	struct mold_request req;
	/* Committed events only: a standby's tail may yet be cut. */
	uint64_t first = journal_first_seq(s->journal), last = s->commit;
	uint64_t lo, hi, blocks = 0;
	unsigned np;
	int r = mold_parse_request(buf, len, &s->tape_session, &req);

	if (r < 0) {
		char a[32];

		s->st.retrans_bad_requests++;
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&s->rl_retrans, LOG_LVL_WARNING, "retrans request from %s: %s", a,
				mold_strerror(r));
		return;
	}
	s->st.retrans_requests++;
	if (req.count == 0 || last == 0)
		return;
	if (req.seq < first) {
		/* The too-old answer (common/rx.h): a heartbeat to the requester
		 * whose seq is the oldest event journalled; then what is held. */
		uint8_t hb[MOLD_HEADER_LEN];
		size_t n = rxpath_too_old_answer(hb, &s->tape_session, "tape", req.seq, first);

		s->st.retrans_too_old++;
		(void)sendto(s->retrans_fd, hb, n, 0, (const struct sockaddr *)from, sizeof(*from));
	}
	lo = req.seq < first ? first : req.seq;
	hi = req.seq + req.count - 1;
	if (hi > last)
		hi = last;
	if (lo > hi)
		return;
	np = tape_build(s, &s->rout, s->rout.size, lo, hi, &blocks);
	for (unsigned i = 0; i < np; i++)
		s->rout.addrs[i] = *from;
	r = np ? net_batch_send(&s->rout, s->retrans_fd, np) : 0;
	if (r > 0)
		s->st.retrans_packets_sent += (unsigned)r;
	if (r >= 0 && (unsigned)r == np)
		s->st.retrans_blocks_sent += blocks;
}

static void on_retrans_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, retrans_io);
	int n;

	(void)loop;
	(void)revents;
	n = net_batch_recv_counted(&s->rin, s->retrans_fd, &s->rxq_retrans);
	for (int i = 0; i < n; i++) {
		const uint8_t *buf = net_batch_slot(&s->rin, (unsigned)i);

		if (!rx_drop(&s->drop_retrans, buf, s->rin.lens[i]))
			retrans_serve(s, buf, s->rin.lens[i], &s->rin.addrs[i]);
	}
}

/* ---- the group ---------------------------------------------------------- */

/* Raft (sequencer/raft.h) decides; this section gives it the journal, the
 * state file and the network. Its outputs queue in s->rq and leave by one
 * sendmmsg after the journal is flushed (rq_send), at the end of whatever
 * event-loop callback called it. */

static void rq_send(struct sequencer *s)
{
	int r;

	if (s->rq_n == 0)
		return;
	r = journal_sync(s);
	if (r < 0) {
		s->rq_n = 0; /* nothing leaves that the journal does not hold */
		fail(s, "journal", r);
		return;
	}
	r = net_batch_send(&s->rq, s->raft_fd, s->rq_n);
	if (r > 0)
		s->st.raft_sent += (unsigned)r;
	if (r < 0 || (unsigned)r < s->rq_n)
		s->st.raft_send_errors += s->rq_n - (r < 0 ? 0 : (unsigned)r);
	s->rq_n = 0;
}

/* The next slot of the queue, addressed to `to`. */
static uint8_t *rq_slot(struct sequencer *s, const struct sockaddr_in *to)
{
	if (s->rq_n == s->rq.n)
		rq_send(s);
	s->rq.addrs[s->rq_n] = *to;
	return net_batch_slot(&s->rq, s->rq_n);
}

/* Queues an APPEND for every destination: the header for the tape
 * datagram dg (whose first event follows prev), then dg itself. */
static void rq_append(struct sequencer *s, const struct raft_msg *m, const int *dst, int nd,
		      const uint8_t *dg, size_t len, int last)
{
	struct raft_msg h = *m;

	if (!last)
		h.flags &= ~RAFT_F_END;
	h.seq = wire_get_u64(dg + MOLD_SESSION_LEN) - 1;
	h.seq_term = journal_term_at(s->journal, h.seq);
	for (int i = 0; i < nd; i++) {
		uint8_t *p = rq_slot(s, &s->peers[dst[i]]);

		seq_raft_encode(p, &h, &s->tape_session);
		memcpy(p + SEQ_RAFT_WIRE_LEN, dg, len);
		s->rq.lens[s->rq_n++] = SEQ_RAFT_WIRE_LEN + len;
	}
}

/* raft's send(). An APPEND's entries are the batch just built in `out` (the
 * live path: each tape datagram goes to each standby behind a header) or
 * are read back from the journal (answers to REQUESTs, the term start). */
static void io_send(void *ctx, const struct raft_msg *m)
{
	struct sequencer *s = ctx;
	int dst[SEQ_MAX_PEERS], nd = 0;
	uint64_t from, to;

	for (int i = 0; i < s->n_peers; i++)
		if (i != s->id && (m->to == RAFT_ALL || m->to == i))
			dst[nd++] = i;
	if (m->type != RAFT_MSG_APPEND || m->n_entries == 0) {
		for (int i = 0; i < nd; i++) {
			uint8_t *p = rq_slot(s, &s->peers[dst[i]]);

			s->rq.lens[s->rq_n++] = seq_raft_encode(p, m, &s->tape_session);
		}
		return;
	}
	from = m->seq + 1;
	to = m->seq + m->n_entries;
	out_close_packet(s);
	if (s->out_n > 0 && s->out_first == from && s->next_seq - 1 == to) {
		for (unsigned k = 0; k < s->out_n; k++)
			rq_append(s, m, dst, nd, net_batch_slot(&s->out, k), s->out.lens[k],
				  k + 1 == s->out_n);
		return;
	}
	if (journal_sync(s) < 0)
		return;
	while (from <= to) {
		uint64_t blocks = 0;
		unsigned n = tape_build(s, &s->jb, s->jb.size - SEQ_RAFT_WIRE_LEN, from, to, &blocks);

		if (n == 0 || blocks == 0)
			break;
		from += blocks;
		for (unsigned k = 0; k < n; k++)
			rq_append(s, m, dst, nd, net_batch_slot(&s->jb, k), s->jb.lens[k],
				  k + 1 == n && from > to);
	}
}

static uint64_t io_last_seq(void *ctx)
{
	return journal_last_seq(((struct sequencer *)ctx)->journal);
}

static uint64_t io_term_at(void *ctx, uint64_t seq)
{
	return journal_term_at(((struct sequencer *)ctx)->journal, seq);
}

static int gw_note(struct sequencer *s, const uint8_t *data, size_t len);

static int io_append(void *ctx, uint64_t seq, uint64_t term, const void *data, size_t len)
{
	struct sequencer *s = ctx;
	int r = journal_append(s->journal, seq, term, data, len);

	if (r < 0)
		return r;
	s->journal_dirty = 1;
	if (s->state != SEQ_PRIMARY) /* replicated: the primary's command numbers */
		gw_note(s, data, len);
	return 0;
}

static int io_append_term_start(void *ctx, uint64_t seq, uint64_t term)
{
	struct sequencer *s = ctx;
	int r = journal_term_start(s, seq, term);

	if (r == 0)
		s->next_seq = seq + 1;
	return r;
}

static int io_truncate_after(void *ctx, uint64_t seq)
{
	struct sequencer *s = ctx;
	int r = journal_truncate_after(s->journal, seq);

	if (r < 0)
		return r;
	log_warn("journal: uncommitted events after %llu cut (they differ from the primary's)",
		 (unsigned long long)seq);
	s->gw_dirty = 1;
	s->next_seq = seq + 1;
	return 0;
}

/* The term and vote, in state_dir/raft-state: written to a temporary file,
 * synced and renamed, so that a crash leaves the old or the new one. */
static int io_save_state(void *ctx, uint64_t term, int voted_for)
{
	struct sequencer *s = ctx;
	char path[320], tmp[330], text[64];
	int fd, n, r = 0;

	snprintf(path, sizeof(path), "%s/raft-state", s->cfg.node.state_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	n = snprintf(text, sizeof(text), "%llu %d\n", (unsigned long long)term, voted_for);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)n) != n || fsync(fd) < 0)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r == 0) {
		fd = open(s->cfg.node.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			(void)fsync(fd);
			close(fd);
		}
	}
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	return r;
}

/* Reads what io_save_state wrote; a missing file is a first start. */
static int load_state(struct sequencer *s, uint64_t *term, int *voted_for)
{
	char path[320];
	unsigned long long t;
	int v;
	FILE *f;

	*term = 0;
	*voted_for = RAFT_NOBODY;
	snprintf(path, sizeof(path), "%s/raft-state", s->cfg.node.state_dir);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	if (fscanf(f, "%llu %d", &t, &v) != 2 || v < RAFT_NOBODY || v >= s->n_peers) {
		fclose(f);
		log_err("%s: not 'TERM VOTE': remove it only if this node's vote does not matter",
			path);
		return -EINVAL;
	}
	fclose(f);
	*term = t;
	*voted_for = v;
	return 0;
}

static int rebuild(struct sequencer *s, int reset);

/* This node has just won its term: the gateways' streams start again from
 * what the journal holds (a cut tail is forgotten), the tape goes on after
 * what the journal holds (entries of older terms that were never multicast
 * are fetched by the receivers through retransmission), and raft appends
 * the TermStart next. */
static void become_primary(struct sequencer *s, uint64_t term)
{
	if (s->gw_dirty) {
		int r = rebuild(s, 1);

		if (r < 0)
			log_err("journal: rescanning the gateways' numbers: %s", strerror(-r));
		s->gw_dirty = 0;
	}
	for (unsigned i = 0; i < s->n_gw; i++)
		rx_start(s->gw_list[i]->rx, s->gw_list[i]->next);
	s->published = journal_last_seq(s->journal);
	s->next_seq = s->published + 1;
	s->pend_n = 0;
	s->out_n = 0;
	s->out_open = 0;
	log_notice("primary: term %llu from seq %llu, tape %s session %s, commands on port %d, "
		   "retransmissions on port %d (group of %d)",
		   (unsigned long long)term, (unsigned long long)s->next_seq, s->cfg.tape_group,
		   s->cfg.tape_session, net_local_port(s->cmd_fd), net_local_port(s->retrans_fd),
		   s->n_peers);
}

static void io_role(void *ctx, enum raft_role role, uint64_t term, int primary)
{
	struct sequencer *s = ctx;
	enum seq_state st = role == RAFT_PRIMARY ? SEQ_PRIMARY
			    : role != RAFT_STANDBY ? SEQ_CANDIDATE
			    : primary == RAFT_NOBODY ? SEQ_WAITING
						     : SEQ_STANDBY;

	if (s->state == SEQ_STOPPED)
		return;
	s->term = term;
	if (st == SEQ_PRIMARY && s->state != SEQ_PRIMARY) {
		s->state = st;
		s->primary_id = primary;
		become_primary(s, term);
		return;
	}
	if (s->state == SEQ_PRIMARY && st != SEQ_PRIMARY) {
		/* Deposed: what was built and not replicated is dropped (never
		 * multicast: it was not committed); the gateways keep it. */
		s->out_n = 0;
		s->out_open = 0;
		s->pend_n = 0;
		ev_timer_stop(s->loop, &s->rx_timer);
		log_warn("no longer primary: term %llu, %s", (unsigned long long)term,
			 seq_state_names[st]);
	}
	if (st == SEQ_STANDBY && (s->state != SEQ_STANDBY || s->primary_id != primary)) {
		char a[32];

		net_format_addr(&s->peers[primary], a, sizeof(a));
		log_notice("standby: term %llu, primary is node %d (%s)", (unsigned long long)term,
			   primary, a);
	} else if (st == SEQ_CANDIDATE && s->state != SEQ_CANDIDATE)
		log_info("election: no primary heard in term %llu, asking for votes",
			 (unsigned long long)term);
	s->state = st;
	s->primary_id = primary;
}

static void io_apply(void *ctx, uint64_t from, uint64_t to)
{
	struct sequencer *s = ctx;

	s->commit = to;
	if (s->state == SEQ_PRIMARY)
		publish(s, from, to);
}

static uint64_t io_random(void *ctx)
{
	return rx_rng_next(&((struct sequencer *)ctx)->rng);
}

static void raft_arm(struct sequencer *s)
{
	uint64_t d = raft_deadline(s->raft), now = mono_ns();

	ev_timer_stop(s->loop, &s->raft_timer);
	ev_timer_set(&s->raft_timer, d > now ? (double)(d - now) / 1e9 : 0., 0.);
	ev_timer_start(s->loop, &s->raft_timer);
}

/* After every call into raft: its messages leave, its timer moves. */
static void raft_done(struct sequencer *s, int r)
{
	if (r < 0) {
		fail(s, "raft (journal or state file)", r);
		return;
	}
	rq_send(s);
	raft_arm(s);
}

static void on_raft_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, raft_timer);

	(void)loop;
	(void)revents;
	s->now_ns = mono_ns();
	s->now_wall = wall_ns();
	raft_done(s, raft_tick(s->raft, s->now_ns));
}

static void on_raft_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, raft_io);
	int r = 0;

	(void)loop;
	(void)revents;
	for (uint64_t round = 0; round < s->cfg.drain && r == 0; round++) {
		int n = net_batch_recv_counted(&s->raft_in, s->raft_fd, &s->rxq_raft);

		if (n <= 0)
			break;
		s->now_ns = mono_ns();
		s->now_wall = wall_ns();
		for (int i = 0; i < n && r == 0; i++) {
			const uint8_t *buf = net_batch_slot(&s->raft_in, (unsigned)i);
			size_t len = s->raft_in.lens[i];
			struct raft_msg m;

			if (rx_drop(&s->drop_raft, buf, len))
				continue;
			if (seq_raft_decode(buf, len, &s->tape_session, s->n_peers, &m) < 0 ||
			    (m.to != RAFT_ALL && m.to != s->id) || m.from == s->id ||
			    (m.type == RAFT_MSG_APPEND &&
			     seq_raft_decode_entries(buf, len, &s->tape_session, &m, s->entries,
						     s->max_entries) < 0)) {
				char a[32];

				s->st.raft_malformed++;
				net_format_addr(&s->raft_in.addrs[i], a, sizeof(a));
				log_ratelimited(&s->rl_malformed, LOG_LVL_WARNING,
						"raft datagram (%zu bytes) from %s refused", len, a);
				continue;
			}
			s->st.raft_received++;
			r = raft_receive(s->raft, &m, s->now_ns);
		}
		if ((unsigned)n < s->raft_in.n)
			break;
	}
	raft_done(s, r);
}

/* ---- control ------------------------------------------------------------ */

/* STEP_DOWN: arg "" (the standby furthest along), a node_id, or a peers
 * address. Answers at once; the hand-over takes a round trip or two, and
 * lockstepctl waits for the state to change. */
static void ctl_step_down(struct sequencer *s, const char *arg, Lockstep__ControlReply *reply)
{
	static char msg[160];
	int to = RAFT_NOBODY, r;
	char a[32];

	if (!s->raft || s->n_peers <= 1) {
		reply->error = -EOPNOTSUPP;
		reply->message = (char *)"not in a group (no peers): nobody to hand over to";
		return;
	}
	if (arg && arg[0]) {
		char *end;
		long v = strtol(arg, &end, 10);

		if (end != arg && *end == '\0' && v >= 0 && v < s->n_peers) {
			to = (int)v;
		} else {
			for (int i = 0; i < s->n_peers; i++) {
				net_format_addr(&s->peers[i], a, sizeof(a));
				if (strcmp(a, arg) == 0)
					to = i;
			}
			if (to == RAFT_NOBODY) {
				reply->error = -EINVAL;
				snprintf(msg, sizeof(msg),
					 "'%s': not a member (a node_id 0..%d or a peers address)",
					 arg, s->n_peers - 1);
				reply->message = msg;
				return;
			}
		}
	}
	s->now_ns = mono_ns();
	r = raft_transfer(s->raft, to, s->now_ns);
	switch (r) {
	case 0:
		to = raft_transfer_target(s->raft);
		net_format_addr(&s->peers[to], a, sizeof(a));
		snprintf(msg, sizeof(msg), "handing over to node %d (%s) after term %llu", to, a,
			 (unsigned long long)s->term);
		log_notice("step-down asked: %s", msg);
		break;
	case -EPERM:
		snprintf(msg, sizeof(msg), "not the primary (%s in term %llu)",
			 seq_state_names[s->state], (unsigned long long)s->term);
		break;
	case -EALREADY:
		snprintf(msg, sizeof(msg), "already handing over to node %d",
			 raft_transfer_target(s->raft));
		break;
	case -EINVAL:
		snprintf(msg, sizeof(msg), "node %d is this node", to);
		break;
	case -EHOSTUNREACH:
		snprintf(msg, sizeof(msg), "%s has not been heard from lately",
			 to == RAFT_NOBODY ? "no standby" : "that standby");
		break;
	default:
		snprintf(msg, sizeof(msg), "%s", strerror(-r));
		break;
	}
	reply->error = r;
	reply->message = msg;
	raft_done(s, 0);
}

static void seq_status(void *self, Lockstep__ControlReply *reply)
{
	static char msg[64];
	struct sequencer *s = self;

	reply->name = s->cfg.node.name;
	reply->state = (char *)seq_state_names[s->state];
	reply->term = s->term;
	reply->seq = journal_last_seq(s->journal);
	reply->commit = s->commit;
	if (s->raft && raft_transfer_target(s->raft) != RAFT_NOBODY) {
		snprintf(msg, sizeof(msg), "handing over to node %d",
			 raft_transfer_target(s->raft));
		reply->message = msg;
	}
}

static void seq_stats(void *self, struct counters *out)
{
	struct seq_stats st;

	seq_get_stats(self, &st);
	counters_add_table(out, seq_counters, (const uint64_t *)&st, SEQ_N_COUNTERS);
}

static int seq_control(void *self, const Lockstep__ControlRequest *req,
		       Lockstep__ControlReply *reply)
{
	if (req->op != LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN)
		return 0;
	ctl_step_down(self, req->arg, reply);
	return 1;
}

/* ---- start and stop ----------------------------------------------------- */

static void log_journal_report(const struct seq_config *cfg, const struct journal_report *rep)
{
	if (rep->cut_bytes || rep->cut_segments)
		log_warn("journal %s/journal: cut %llu bytes and %llu segments from seq %llu "
			 "(%s at %s offset %llu)",
			 cfg->node.state_dir, (unsigned long long)rep->cut_bytes,
			 (unsigned long long)rep->cut_segments, (unsigned long long)rep->bad_seq,
			 rep->bad_reason ? rep->bad_reason : "bad record", rep->bad_segment,
			 (unsigned long long)rep->bad_offset);
	log_info("journal: %llu records, seq %llu..%llu", (unsigned long long)rep->records,
		 (unsigned long long)rep->first_seq, (unsigned long long)rep->last_seq);
}

/* Raises the next expected number of the gateway that sent the command in
 * journalled event data. Returns 0, or -1 for an event not understood. */
static int gw_note(struct sequencer *s, const uint8_t *data, size_t len)
{
	struct tape_event_view v;
	struct mold_session sess;
	char origin[MOLD_SESSION_LEN + 1];
	struct seq_gw *g;
	int bad_name = 0;

	if (tape_event_peek(data, len, &v) < 0)
		return -1;
	if (v.body != TAPE_BODY_COMMAND || v.origin_len == 0 || v.origin_len > MOLD_SESSION_LEN)
		return 0;
	memcpy(origin, v.origin, v.origin_len);
	origin[v.origin_len] = '\0';
	if (mold_session_set(&sess, origin) < 0 || !(g = gw_get(s, &sess, &bad_name)))
		return -1;
	if (v.origin_seq + 1 > g->next)
		g->next = v.origin_seq + 1;
	return 0;
}

/* Rebuilds the gateways' next expected numbers (from scratch with reset:
 * after a cut) and the last term from the journal. */
static int rebuild(struct sequencer *s, int reset)
{
	struct journal_iter *it;
	uint64_t seq, term, bad = 0;
	const uint8_t *data;
	size_t len;
	int r;

	if (reset)
		for (unsigned i = 0; i < s->n_gw; i++)
			s->gw_list[i]->next = 1;
	if (journal_last_seq(s->journal) == 0)
		return 0;
	r = journal_iter_open(&it, s->journal, journal_first_seq(s->journal));
	if (r < 0)
		return r;
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		if (term > s->term)
			s->term = term;
		if (gw_note(s, data, len) < 0)
			bad++;
	}
	journal_iter_close(it);
	if (bad)
		log_warn("journal: %llu events not understood while rebuilding",
			 (unsigned long long)bad);
	for (unsigned i = 0; i < s->n_gw; i++)
		rx_start(s->gw_list[i]->rx, s->gw_list[i]->next);
	return r;
}

static int open_journal(struct sequencer *s)
{
	struct journal_options jo = {
		.segment_bytes = s->cfg.segment_size,
		.fsync = (enum journal_fsync)s->cfg.fsync,
		.interval_ms = (uint32_t)(s->cfg.fsync_interval_ns / 1000000u),
	};
	struct journal_report rep;
	char dir[300];
	int r;

	snprintf(dir, sizeof(dir), "%s/journal", s->cfg.node.state_dir);
	memset(&rep, 0, sizeof(rep));
	r = journal_open(&s->journal, dir, &jo, &rep);
	if (r < 0) {
		log_err("journal %s: %s", dir, strerror(-r));
		return r;
	}
	log_journal_report(&s->cfg, &rep);
	r = rebuild(s, 0);
	if (r < 0) {
		log_err("journal %s: reading: %s", dir, strerror(-r));
		return r;
	}
	s->next_seq = journal_last_seq(s->journal) + 1;
	log_info("journal: %u gateways, last term %llu, next seq %llu", s->n_gw,
		 (unsigned long long)s->term, (unsigned long long)s->next_seq);
	return 0;
}

static int open_udp(const char *what, const char *addr, const struct net_udp_options *o, int *fd)
{
	struct sockaddr_in a;
	struct net_bufsize rcv = { 0 }, snd = { 0 };
	int r = net_parse_addr(addr, &a);

	if (r < 0) {
		log_err("%s: bad address '%s'", what, addr);
		return r;
	}
	r = net_udp_open(&a, o, &rcv, &snd);
	if (r < 0) {
		log_err("%s %s: %s", what, addr, strerror(-r));
		return r;
	}
	rxpath_bufsize_check(what, o->rcvbuf ? &rcv : &snd);
	*fd = r;
	return 0;
}

static int open_sockets(struct sequencer *s)
{
	struct net_udp_options cmd = { .rcvbuf = (int)s->cfg.rcvbuf, .sndbuf = 0, .nonblock = 1,
				       .rxq_ovfl = 1 };
	struct net_udp_options snd = { .sndbuf = (int)s->cfg.sndbuf, .nonblock = 1 };
	struct net_udp_options rtx = { .sndbuf = (int)s->cfg.sndbuf, .nonblock = 1, .rxq_ovfl = 1 };
	char req[sizeof(s->cfg.listen) + 2], *colon;
	int r;

	/* gap requests leave from the listen address's host, any port */
	snprintf(req, sizeof(req), "%s", s->cfg.listen);
	colon = strrchr(req, ':');
	snprintf(colon ? colon + 1 : req, colon ? 2 : sizeof(req), "%s", colon ? "0" : "0.0.0.0:0");
	if ((r = open_udp("listen", s->cfg.listen, &cmd, &s->cmd_fd)) < 0 ||
	    (r = open_udp("requests", req, &cmd, &s->req_fd)) < 0 ||
	    (r = open_udp("retrans", s->cfg.retrans, &rtx, &s->retrans_fd)) < 0 ||
	    (r = open_udp("tape", "0.0.0.0:0", &snd, &s->tape_fd)) < 0)
		return r;
	r = net_parse_addr(s->cfg.tape_group, &s->group);
	if (r < 0 || !IN_MULTICAST(ntohl(s->group.sin_addr.s_addr))) {
		log_err("tape_group '%s' is not a multicast group:port", s->cfg.tape_group);
		return -EINVAL;
	}
	r = net_mcast_send_setup(s->tape_fd, s->cfg.tape_iface, (int)s->cfg.tape_ttl);
	if (r < 0) {
		log_err("tape_iface %s: %s", s->cfg.tape_iface, strerror(-r));
		return r;
	}
	return 0;
}

static int open_batches(struct sequencer *s)
{
	size_t dg = s->cfg.max_datagram;
	/* A tape datagram per received one, and room for the larger events. */
	unsigned out_n = (unsigned)s->cfg.batch * 2 + 2;

	if (net_batch_init(&s->in, (unsigned)s->cfg.batch, dg) < 0 ||
	    net_batch_init(&s->out, out_n, dg) < 0 ||
	    net_batch_init(&s->rin, SEQ_RETRANS_SLOTS, SEQ_RETRANS_SLOT_SIZE) < 0 ||
	    net_batch_init(&s->rout, (unsigned)s->cfg.retrans_packets, dg) < 0 ||
	    net_batch_init(&s->jb, 64, dg) < 0) {
		log_err("out of memory for the datagram batches");
		return -ENOMEM;
	}
	if (s->n_peers > 1) {
		/* every datagram of a full batch to every standby, and the rest */
		unsigned rq_n = (out_n + 64) * (unsigned)(s->n_peers - 1);

		s->max_entries = (unsigned)(dg / 4);
		s->entries = calloc(s->max_entries, sizeof(*s->entries));
		s->pend_first = calloc(out_n * 4, sizeof(*s->pend_first));
		s->pend_last = calloc(out_n * 4, sizeof(*s->pend_last));
		s->pend_t = calloc(out_n * 4, sizeof(*s->pend_t));
		if (!s->entries || !s->pend_first || !s->pend_last || !s->pend_t ||
		    net_batch_init(&s->pend, out_n * 4, dg) < 0 ||
		    net_batch_init(&s->raft_in, SEQ_RAFT_SLOTS, dg) < 0 ||
		    net_batch_init(&s->rq, rq_n, dg) < 0) {
			log_err("out of memory for the group's datagram batches");
			return -ENOMEM;
		}
	}
	return 0;
}

static void start_watchers(struct sequencer *s)
{
	double hb = (double)s->cfg.heartbeat_ns / 1e9;

	ev_io_init(&s->cmd_io, on_cmd_readable, s->cmd_fd, EV_READ);
	ev_io_init(&s->req_io, on_cmd_readable, s->req_fd, EV_READ);
	s->cmd_io.data = s->req_io.data = s;
	ev_io_init(&s->retrans_io, on_retrans_readable, s->retrans_fd, EV_READ);
	/* Ticks at half the heartbeat so an idle tape is never silent longer. */
	ev_timer_init(&s->heartbeat, on_heartbeat, hb / 2, hb / 2);
	ev_init(&s->rx_timer, on_rx_timer);
	ev_io_start(s->loop, &s->cmd_io);
	ev_io_start(s->loop, &s->req_io);
	ev_io_start(s->loop, &s->retrans_io);
	ev_timer_start(s->loop, &s->heartbeat);
	ev_init(&s->raft_timer, on_raft_timer);
	if (s->raft_fd >= 0) {
		ev_io_init(&s->raft_io, on_raft_readable, s->raft_fd, EV_READ);
		ev_io_start(s->loop, &s->raft_io);
	}
}

/* The group: peers, node_id, the election timeouts. */
static int check_group(struct sequencer *s)
{
	const struct seq_config *c = &s->cfg;
	int n = seq_parse_peers(c->peers, s->peers, SEQ_MAX_PEERS);

	if (n < 0) {
		log_err("peers '%s': %s", c->peers,
			n == -E2BIG ? "more than 9 members" : "expected host:port,host:port,...");
		return -EINVAL;
	}
	if (c->node_id >= (uint64_t)(n ? n : 1)) {
		log_err("node_id %llu: not an index of peers (%d members)",
			(unsigned long long)c->node_id, n ? n : 1);
		return -EINVAL;
	}
	if (c->election_max_ns < c->election_min_ns) {
		log_err("election_max is shorter than election_min");
		return -EINVAL;
	}
	if (n > 1 && c->fsync == JOURNAL_FSYNC_NONE) {
		log_err("fsync = none in a group of %d: a vote or an acknowledgement could be "
			"forgotten by a crash; use interval or batch",
			n);
		return -EINVAL;
	}
	if (n > 1 && c->max_datagram < 512) {
		log_err("max_datagram %llu: a group needs at least 512 (the raft header "
			"rides on each tape datagram)",
			(unsigned long long)c->max_datagram);
		return -EINVAL;
	}
	s->n_peers = n ? n : 1;
	s->id = (int)c->node_id;
	s->tape_cap = c->max_datagram - (n > 1 ? SEQ_RAFT_WIRE_LEN : 0);
	return 0;
}

/* Raft's state machine over the journal and the state file; the raft
 * socket. A group of one becomes the primary at the first tick. */
static int open_raft(struct sequencer *s)
{
	struct raft_config rc = {
		.id = s->id,
		.n_nodes = s->n_peers,
		.heartbeat_ns = s->cfg.raft_heartbeat_ns,
		.election_min_ns = s->cfg.election_min_ns,
		.election_max_ns = s->cfg.election_max_ns,
		.max_entries = SEQ_RAFT_MAX_ENTRIES,
	};
	struct raft_io io = {
		.ctx = s,
		.last_seq = io_last_seq,
		.term_at = io_term_at,
		.append = io_append,
		.append_term_start = io_append_term_start,
		.truncate_after = io_truncate_after,
		.save_state = io_save_state,
		.send = io_send,
		.role = io_role,
		.apply = io_apply,
		.random = io_random,
	};
	int r;

	if ((r = load_state(s, &rc.term, &rc.voted_for)) < 0)
		return r;
	if (s->n_peers > 1) {
		struct net_udp_options o = { .rcvbuf = 4 << 20, .sndbuf = (int)s->cfg.sndbuf,
					     .nonblock = 1, .rxq_ovfl = 1 };
		char a[32];

		net_format_addr(&s->peers[s->id], a, sizeof(a));
		if ((r = open_udp("raft (peers[node_id])", a, &o, &s->raft_fd)) < 0)
			return r;
	}
	r = raft_open(&s->raft, &rc, &io, mono_ns());
	if (r < 0) {
		log_err("raft: %s", strerror(-r));
		return r;
	}
	if (s->n_peers > 1)
		log_notice("group of %d, node %d: term %llu, journal up to seq %llu; waiting for a "
			   "primary",
			   s->n_peers, s->id, (unsigned long long)raft_term(s->raft),
			   (unsigned long long)journal_last_seq(s->journal));
	return 0;
}

static int seq_open_steps(struct sequencer *s)
{
	int r;

	if (mold_session_set(&s->tape_session, s->cfg.tape_session) < 0) {
		log_err("tape_session '%s': at most 10 printable characters", s->cfg.tape_session);
		return -EINVAL;
	}
	if ((r = check_group(s)) < 0)
		return r;
	if ((r = open_journal(s)) < 0 || (r = open_sockets(s)) < 0 || (r = open_batches(s)) < 0)
		return r;
	s->now_ns = mono_ns();
	s->now_wall = wall_ns();
	s->state = SEQ_WAITING;
	if ((r = open_raft(s)) < 0)
		return r;
	start_watchers(s);
	/* a group of one is the primary from here on */
	s->now_ns = mono_ns();
	r = raft_tick(s->raft, s->now_ns);
	if (r < 0) {
		log_err("raft: %s", strerror(-r));
		return r;
	}
	raft_done(s, 0);
	return s->failed ? -EIO : 0;
}

int seq_open(struct sequencer **out, struct ev_loop *loop, const struct seq_config *cfg)
{
	struct sequencer *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	hist_init(&s->commit_ns);
	s->cfg = *cfg;
	s->loop = loop;
	s->cmd_fd = s->tape_fd = s->retrans_fd = s->req_fd = s->raft_fd = -1;
	s->primary_id = RAFT_NOBODY;
	rxpath_loss_init(&s->rng,
			 (struct rx_drop *const[]){ &s->drop_cmd, &s->drop_req, &s->drop_retrans,
						    &s->drop_raft },
			 4, cfg->drop_rate, cfg->node.name, cfg->drop_seed, 0);
	s->rl_malformed = (struct log_ratelimit)LOG_RATELIMIT_INIT(1, 5);
	s->rl_gap = (struct log_ratelimit)LOG_RATELIMIT_INIT(1, 5);
	s->rl_oversize = (struct log_ratelimit)LOG_RATELIMIT_INIT(1, 5);
	s->rl_retrans = (struct log_ratelimit)LOG_RATELIMIT_INIT(1, 5);
	s->rl_tape = (struct log_ratelimit)LOG_RATELIMIT_INIT(1, 5);
	r = seq_open_steps(s);
	if (r < 0) {
		seq_close(s);
		return r;
	}
	*out = s;
	return 0;
}

void seq_stop(struct sequencer *s)
{
	int r;

	if (!s || s->state == SEQ_STOPPED)
		return;
	s->now_ns = mono_ns();
	r = s->state == SEQ_PRIMARY ? out_flush(s) : 0;
	rq_send(s);
	if (r == 0)
		r = journal_flush(s->journal);
	if (r < 0)
		log_err("journal flush at stop: %s", strerror(-r));
	else if (s->n_peers == 1)
		send_tape_control(s, 1); /* a group goes on without this node */
	ev_io_stop(s->loop, &s->raft_io);
	ev_timer_stop(s->loop, &s->raft_timer);
	ev_io_stop(s->loop, &s->cmd_io);
	ev_io_stop(s->loop, &s->req_io);
	ev_io_stop(s->loop, &s->retrans_io);
	ev_timer_stop(s->loop, &s->heartbeat);
	ev_timer_stop(s->loop, &s->rx_timer);
	s->state = SEQ_STOPPED;
	log_notice("stopped: term %llu, last seq %llu, commit %llu", (unsigned long long)s->term,
		   (unsigned long long)journal_last_seq(s->journal), (unsigned long long)s->commit);
}

void seq_close(struct sequencer *s)
{
	if (!s)
		return;
	if (s->state != SEQ_STOPPED) {
		ev_io_stop(s->loop, &s->cmd_io);
		ev_io_stop(s->loop, &s->req_io);
		ev_io_stop(s->loop, &s->retrans_io);
		ev_timer_stop(s->loop, &s->heartbeat);
		ev_timer_stop(s->loop, &s->rx_timer);
		ev_io_stop(s->loop, &s->raft_io);
		ev_timer_stop(s->loop, &s->raft_timer);
	}
	raft_close(s->raft);
	free(s->entries);
	free(s->pend_first);
	free(s->pend_last);
	free(s->pend_t);
	net_batch_fini(&s->pend);
	net_batch_fini(&s->raft_in);
	net_batch_fini(&s->rq);
	net_batch_fini(&s->jb);
	net_batch_fini(&s->rout);
	net_batch_fini(&s->rin);
	net_batch_fini(&s->out);
	net_batch_fini(&s->in);
	if (s->tape_fd >= 0)
		close(s->tape_fd);
	if (s->retrans_fd >= 0)
		close(s->retrans_fd);
	if (s->cmd_fd >= 0)
		close(s->cmd_fd);
	if (s->req_fd >= 0)
		close(s->req_fd);
	if (s->raft_fd >= 0)
		close(s->raft_fd);
	for (unsigned i = 0; i < s->n_gw; i++)
		rx_destroy(s->gw_list[i]->rx);
	journal_close(s->journal);
	free(s);
}

int seq_failed(const struct sequencer *s)
{
	return s->failed;
}

uint64_t seq_term(const struct sequencer *s)
{
	return s->term;
}

uint64_t seq_last_seq(const struct sequencer *s)
{
	return journal_last_seq(s->journal);
}

int seq_listen_port(const struct sequencer *s)
{
	return net_local_port(s->cmd_fd);
}

int seq_retrans_port(const struct sequencer *s)
{
	return net_local_port(s->retrans_fd);
}

void seq_get_stats(const struct sequencer *s, struct seq_stats *out)
{
	struct net_udp_stats us = { 0 };

	*out = s->st;
	out->journal_bytes = s->journal ? journal_bytes(s->journal) : 0;
	out->gateways = s->n_gw;
	out->duplicates = out->gaps = out->gap_requests_sent = 0;
	for (unsigned i = 0; i < s->n_gw; i++) {
		struct rx_stats rs;

		rx_get_stats(s->gw_list[i]->rx, &rs);
		out->duplicates += rs.duplicates;
		out->gaps += rs.gaps;
		out->gap_requests_sent += rs.requests;
		out->gap_blocks_requested += rs.requested;
		out->commands_held += rs.held;
		out->commands_overflow += rs.overflow;
		out->commands_lost += rs.lost;
	}
	out->rxq_dropped = s->rxq_cmd + s->rxq_req + s->rxq_retrans + s->rxq_raft;
	out->drops_injected = s->drop_cmd.dropped + s->drop_req.dropped + s->drop_retrans.dropped +
			      s->drop_raft.dropped;
	if (s->raft) {
		struct raft_stats rs;

		raft_get_stats(s->raft, &rs);
		out->elections = rs.elections;
		out->prevotes = rs.prevotes;
		out->votes_granted = rs.votes_granted;
		out->appends_received = rs.appends_received;
		out->entries_replicated = rs.entries_appended;
		out->raft_requests_sent = rs.requests_sent;
		out->raft_requests_served = rs.requests_served;
		out->truncations = rs.truncations;
		out->stale_ignored = rs.stale_ignored;
		out->stepdowns = rs.stepdowns;
		out->handovers = rs.transfers;
		out->handovers_abandoned = rs.transfers_abandoned;
		out->timeout_now = rs.timeout_now;
	}
	out->commit = s->commit;
	out->commit_us_p50 = hist_percentile(&s->commit_ns, 50) / 1000;
	out->commit_us_p99 = hist_percentile(&s->commit_ns, 99) / 1000;
	out->commit_us_max = s->commit_ns.max / 1000;
	if (net_udp_stats_read(&us) == 0)
		out->kernel_rcvbuf_errors = us.rcvbuf_errors;
}

static int seq_daemon_open(void **self, struct ev_loop *loop, const void *cfg)
{
	return seq_open((struct sequencer **)self, loop, cfg);
}

static void seq_daemon_stop(void *self)
{
	seq_stop(self);
}

static void seq_daemon_close(void *self)
{
	seq_close(self);
}

static int seq_exit_status(const void *self)
{
	return seq_failed(self) ? DAEMON_EXIT_FAILURE : DAEMON_EXIT_OK;
}

const struct daemon_ops seq_daemon = {
	.prog = "lockstep-sequencer",
	.role = "sequencer",
	.about = "Merges the gateways' MoldUDP64 command streams into one total order, journals\n"
		 "every event and multicasts it as the tape; serves tape retransmissions.",
	.spec = &seq_config_spec,
	.cfg_size = sizeof(struct seq_config),
	.node_offset = offsetof(struct seq_config, node),
	.open = seq_daemon_open,
	.stop = seq_daemon_stop,
	.close = seq_daemon_close,
	.exit_status = seq_exit_status,
	.status = seq_status,
	.stats = seq_stats,
	.control = seq_control,
};
