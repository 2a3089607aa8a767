/* The sequencer's library: everything but main(). See sequencer.h.
 *
 * Hot path, per wakeup of the command socket: up to `drain` recvmmsg calls of
 * `batch` datagrams each; every accepted command is wrapped into an Event
 * directly inside the outgoing tape datagram (the command bytes are copied,
 * never decoded) and appended to the journal; at the end of each recvmmsg
 * batch the journal is flushed and then every tape datagram built goes out in
 * one sendmmsg. Nothing is allocated per message. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "sequencer.h"
#include "tape.h"
#include "wire.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

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
	CONFIG_END,
};
#undef K

const char *const seq_counter_names[SEQ_N_COUNTERS] = {
	"packets_received", "commands_received", "commands_sequenced", "duplicates", "gaps",
	"gap_requests_sent", "malformed_packets", "oversize_commands", "gateways_full",
	"heartbeats_received", "tape_packets_sent", "tape_heartbeats_sent", "tape_send_errors",
	"retrans_requests", "retrans_bad_requests", "retrans_blocks_sent", "retrans_packets_sent",
	"journal_bytes", "gateways", "rxq_dropped", "commands_held", "commands_overflow",
	"gap_blocks_requested", "gateway_answers", "gateway_too_old", "commands_lost",
	"retrans_too_old", "drops_injected", "kernel_rcvbuf_errors",
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

enum seq_state { SEQ_STARTING, SEQ_PRIMARY, SEQ_STOPPED, SEQ_STATE_MAX };
static const char *const seq_state_names[SEQ_STATE_MAX] = { "starting", "primary", "stopped" };

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
	struct rx_drop drop_cmd, drop_req, drop_retrans;
	uint64_t rxq_cmd, rxq_req, rxq_retrans;
	int fatal; /* a journal error inside a delivery: negative errno */

	struct seq_gw gw[SEQ_GW_SLOTS];
	struct seq_gw *gw_list[SEQ_MAX_GATEWAYS]; /* the used slots */
	struct seq_gw *gw_last; /* last one looked up: streams come in runs */
	unsigned n_gw;

	struct ctl_server *ctl;
	struct seq_stats st;
	struct log_ratelimit rl_malformed, rl_gap, rl_oversize, rl_retrans, rl_tape;
};

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

static void out_close_packet(struct sequencer *s)
{
	if (!s->out_open)
		return;
	s->out.lens[s->out_n] = mold_build_end(&s->builder);
	s->out.addrs[s->out_n] = s->group;
	s->out_n++;
	s->out_open = 0;
}

/* Durable before visible: flushes the journal, then sends every datagram
 * built. Returns 0 or a negative errno (journal failure: fatal). */
static int out_flush(struct sequencer *s)
{
	int r;

	out_close_packet(s);
	if (s->out_n == 0)
		return 0;
	r = journal_flush(s->journal);
	if (r < 0)
		return r;
	r = net_batch_send(&s->out, s->tape_fd, s->out_n);
	if (r < 0 || (unsigned)r < s->out_n) {
		s->st.tape_send_errors += s->out_n - (r < 0 ? 0 : (unsigned)r);
		log_ratelimited(&s->rl_tape, LOG_LVL_WARNING, "tape: sent %d of %u datagrams: %s",
				r < 0 ? 0 : r, s->out_n, r < 0 ? strerror(-r) : "short send");
	}
	if (r > 0)
		s->st.tape_packets_sent += (unsigned)r;
	s->out_n = 0;
	s->last_tape_send_ns = s->now_ns;
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
		mold_build_begin(&s->builder, net_batch_slot(&s->out, s->out_n), s->out.size,
				 &s->tape_session, s->next_seq);
		s->out_open = 1;
	}
	*room = out_room(s);
	*p = mold_build_reserve(&s->builder, (uint16_t)*room);
	return 0;
}

/* Journals the `len` bytes just written at the reserved place as event
 * next_seq and commits them to the datagram. */
static int out_commit(struct sequencer *s, const uint8_t *ev, size_t len)
{
	int r = journal_append(s->journal, s->next_seq, s->term, ev, len);

	if (r < 0)
		return r;
	mold_build_commit(&s->builder, (uint16_t)len);
	s->next_seq++;
	return 0;
}

/* Sequences one command. Returns 0, -EMSGSIZE when it cannot fit one tape
 * datagram, or another negative errno (journal: fatal). */
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

/* The first event of a term. Packed with protobuf-c: once per start. */
static int emit_term_start(struct sequencer *s)
{
	Lockstep__TermStart ts = LOCKSTEP__TERM_START__INIT;
	Lockstep__Event ev = LOCKSTEP__EVENT__INIT;
	size_t room = 0, n;
	uint8_t *p;
	int r;

	ts.node = s->cfg.node.name;
	ev.term = s->term;
	ev.seq = s->next_seq;
	ev.timestamp = s->now_wall;
	ev.commit = s->next_seq;
	ev.body_case = LOCKSTEP__EVENT__BODY_TERM_START;
	ev.term_start = &ts;
	n = lockstep__event__get_packed_size(&ev);
	r = out_reserve(s, &p, &room);
	if (r < 0)
		return r;
	if (!p || n > room)
		return -EMSGSIZE;
	lockstep__event__pack(&ev, p);
	return out_commit(s, p, n);
}

static void send_tape_control(struct sequencer *s, int eos)
{
	uint8_t pkt[MOLD_HEADER_LEN];
	size_t n = eos ? mold_build_end_of_session(pkt, &s->tape_session, s->next_seq)
		       : mold_build_heartbeat(pkt, &s->tape_session, s->next_seq);

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
	if (now - s->last_tape_send_ns >= s->cfg.heartbeat_ns)
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
	uint64_t due = RX_NEVER, now = mono_ns();

	for (unsigned i = 0; i < s->n_gw; i++) {
		uint64_t d = rx_due(s->gw_list[i]->rx);

		if (d < due)
			due = d;
	}
	ev_timer_stop(s->loop, &s->rx_timer);
	if (due == RX_NEVER || s->state != SEQ_PRIMARY)
		return;
	ev_timer_set(&s->rx_timer, due > now ? (double)(due - now) / 1e9 : 0., 0.);
	ev_timer_start(s->loop, &s->rx_timer);
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
			s->st.gateway_too_old++;
			log_ratelimited(&s->rl_gap, LOG_LVL_WARNING,
					"gateway %s: its journal holds nothing below %llu", g->name,
					(unsigned long long)pkt.seq);
			rx_too_old(g->rx, 0, pkt.seq, s->now_ns);
			return s->fatal;
		}
	} else {
		g->addr = *from;
	}
	if (pkt.kind == MOLD_DATA)
		s->st.commands_received += pkt.count;
	else if (!answer)
		s->st.heartbeats_received++;
	rx_packet(g->rx, &pkt, s->now_ns);
	return s->fatal;
}

/* recvmmsg, keeping the socket's own SO_RXQ_OVFL count (the batch is shared). */
static int recv_counted(struct net_batch *b, int fd, uint64_t *rxq)
{
	int n;

	b->rxq_dropped = 0;
	n = net_batch_recv(b, fd);
	if (b->rxq_dropped > *rxq)
		*rxq = b->rxq_dropped;
	return n;
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
		int n = recv_counted(&s->in, w->fd, answer ? &s->rxq_req : &s->rxq_cmd);

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

/* Fills s->rout with consecutive journalled events [from, to]; returns the
 * number of datagrams and the blocks through *blocks. */
static unsigned retrans_build(struct sequencer *s, uint64_t from, uint64_t to, uint64_t *blocks)
{
	struct journal_iter *it;
	struct mold_builder b;
	unsigned np = 0;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int r;

	*blocks = 0;
	if (journal_iter_open(&it, s->journal, from) < 0)
		return 0;
	mold_build_begin(&b, net_batch_slot(&s->rout, 0), s->rout.size, &s->tape_session, from);
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1 && seq <= to) {
		if (mold_build_add(&b, data, (uint16_t)len) == MOLD_OK) {
			(*blocks)++;
			continue;
		}
		if (b.count == 0)
			break; /* a record longer than a datagram: cannot be served */
		s->rout.lens[np++] = mold_build_end(&b);
		if (np == s->rout.n)
			break;
		mold_build_begin(&b, net_batch_slot(&s->rout, np), s->rout.size, &s->tape_session,
				 seq);
		if (mold_build_add(&b, data, (uint16_t)len) != MOLD_OK)
			break;
		(*blocks)++;
	}
	if (r < 0)
		log_ratelimited(&s->rl_retrans, LOG_LVL_WARNING, "retrans: journal read: %s",
				strerror(-r));
	if (np < s->rout.n && b.count > 0)
		s->rout.lens[np++] = mold_build_end(&b);
	journal_iter_close(it);
	return np;
}

static void retrans_serve(struct sequencer *s, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	struct mold_request req;
	uint64_t first = journal_first_seq(s->journal), last = journal_last_seq(s->journal);
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

		s->st.retrans_too_old++;
		log_ratelimited(&s->rl_retrans, LOG_LVL_WARNING,
				"retrans request for %llu: the journal starts at %llu: told so",
				(unsigned long long)req.seq, (unsigned long long)first);
		mold_build_heartbeat(hb, &s->tape_session, first);
		(void)sendto(s->retrans_fd, hb, sizeof(hb), 0, (const struct sockaddr *)from,
			     sizeof(*from));
	}
	lo = req.seq < first ? first : req.seq;
	hi = req.seq + req.count - 1;
	if (hi > last)
		hi = last;
	if (lo > hi)
		return;
	np = retrans_build(s, lo, hi, &blocks);
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
	n = recv_counted(&s->rin, s->retrans_fd, &s->rxq_retrans);
	for (int i = 0; i < n; i++) {
		const uint8_t *buf = net_batch_slot(&s->rin, (unsigned)i);

		if (!rx_drop(&s->drop_retrans, buf, s->rin.lens[i]))
			retrans_serve(s, buf, s->rin.lens[i], &s->rin.addrs[i]);
	}
}

/* ---- control ------------------------------------------------------------ */

/* RELOAD and SIGHUP: of the sequencer's keys only [node] log_level and
 * log_timestamps change at run time. */
static int seq_reload(void *ctx, char *msg, size_t msglen)
{
	static struct seq_config fresh;
	struct sequencer *s = ctx;
	int r = daemon_reload_config(&fresh, &fresh.node, msg, msglen);

	if (r == 0) {
		s->cfg.node.log_level = fresh.node.log_level;
		s->cfg.node.log_timestamps = fresh.node.log_timestamps;
	}
	return r;
}

static void on_ctl(void *ctx, const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply)
{
	static Lockstep__Counter counters[SEQ_N_COUNTERS];
	static Lockstep__Counter *ptrs[SEQ_N_COUNTERS];
	struct sequencer *s = ctx;
	struct seq_stats st;
	const uint64_t *v = (const uint64_t *)&st;

	reply->name = s->cfg.node.name;
	reply->role = (char *)"sequencer";
	reply->state = (char *)seq_state_names[s->state];
	reply->term = s->term;
	reply->seq = s->next_seq - 1;
	reply->commit = s->next_seq - 1;
	switch (req->op) {
	case LOCKSTEP__CONTROL_REQUEST__OP__STATUS:
		break;
	case LOCKSTEP__CONTROL_REQUEST__OP__STATS:
		seq_get_stats(s, &st);
		for (size_t i = 0; i < SEQ_N_COUNTERS; i++) {
			lockstep__counter__init(&counters[i]);
			counters[i].name = (char *)seq_counter_names[i];
			counters[i].value = v[i];
			ptrs[i] = &counters[i];
		}
		reply->n_counters = SEQ_N_COUNTERS;
		reply->counters = ptrs;
		break;
	case LOCKSTEP__CONTROL_REQUEST__OP__LOGLEVEL:
	case LOCKSTEP__CONTROL_REQUEST__OP__RELOAD:
		daemon_ctl_runtime(req, reply, seq_reload, s);
		break;
	default:
		reply->error = -EOPNOTSUPP;
		reply->message = (char *)"operation not supported by the sequencer";
		break;
	}
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

/* Rebuilds the gateways' next expected numbers and the last term. */
static int rebuild(struct sequencer *s)
{
	struct journal_iter *it;
	uint64_t seq, term, bad = 0;
	const uint8_t *data;
	size_t len;
	int r;

	if (journal_last_seq(s->journal) == 0)
		return 0;
	r = journal_iter_open(&it, s->journal, journal_first_seq(s->journal));
	if (r < 0)
		return r;
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		struct tape_event_view v;
		struct mold_session sess;
		char origin[MOLD_SESSION_LEN + 1];
		struct seq_gw *g;
		int bad_name = 0;

		if (term > s->term)
			s->term = term;
		if (tape_event_peek(data, len, &v) < 0) {
			bad++;
			continue;
		}
		if (v.body != TAPE_BODY_COMMAND || v.origin_len == 0 || v.origin_len > MOLD_SESSION_LEN)
			continue;
		memcpy(origin, v.origin, v.origin_len);
		origin[v.origin_len] = '\0';
		if (mold_session_set(&sess, origin) < 0 || !(g = gw_get(s, &sess, &bad_name))) {
			bad++;
			continue;
		}
		if (v.origin_seq + 1 > g->next)
			g->next = v.origin_seq + 1;
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
	r = rebuild(s);
	if (r < 0) {
		log_err("journal %s: reading: %s", dir, strerror(-r));
		return r;
	}
	s->next_seq = journal_next_seq(s->journal);
	if (s->next_seq == 0)
		s->next_seq = 1;
	s->term++;
	log_info("journal: %u gateways, last term %llu, next seq %llu", s->n_gw,
		 (unsigned long long)(s->term - 1), (unsigned long long)s->next_seq);
	return 0;
}

static void log_bufsize(const char *what, const struct net_bufsize *b)
{
	if (b->capped)
		log_warn("%s: asked for %d bytes, got %d: raise net.core.[rw]mem_max", what,
			 b->requested, b->granted);
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
	log_bufsize(what, o->rcvbuf ? &rcv : &snd);
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
	    net_batch_init(&s->rout, (unsigned)s->cfg.retrans_packets, dg) < 0) {
		log_err("out of memory for the datagram batches");
		return -ENOMEM;
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
}

static int seq_open_steps(struct sequencer *s)
{
	int r;

	if (mold_session_set(&s->tape_session, s->cfg.tape_session) < 0) {
		log_err("tape_session '%s': at most 10 printable characters", s->cfg.tape_session);
		return -EINVAL;
	}
	if ((r = open_journal(s)) < 0 || (r = open_sockets(s)) < 0 || (r = open_batches(s)) < 0)
		return r;
	r = ctl_server_open(&s->ctl, s->loop, s->cfg.node.control, on_ctl, s);
	if (r < 0) {
		log_err("control socket %s: %s", s->cfg.node.control, strerror(-r));
		return r;
	}
	s->now_ns = mono_ns();
	s->now_wall = wall_ns();
	if ((r = emit_term_start(s)) < 0 || (r = out_flush(s)) < 0) {
		log_err("term start: %s", strerror(-r));
		return r;
	}
	s->state = SEQ_PRIMARY;
	log_notice("primary: term %llu from seq %llu, tape %s session %s, commands on port %d, "
		   "retransmissions on port %d",
		   (unsigned long long)s->term, (unsigned long long)(s->next_seq - 1),
		   s->cfg.tape_group, s->cfg.tape_session, net_local_port(s->cmd_fd),
		   net_local_port(s->retrans_fd));
	start_watchers(s);
	return 0;
}

int seq_open(struct sequencer **out, struct ev_loop *loop, const struct seq_config *cfg)
{
	struct sequencer *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->loop = loop;
	s->cmd_fd = s->tape_fd = s->retrans_fd = s->req_fd = -1;
	rx_rng_seed(&s->rng, rx_seed_of(cfg->node.name, cfg->drop_seed));
	rx_drop_init(&s->drop_cmd, cfg->drop_rate, rx_seed_of(cfg->node.name, cfg->drop_seed));
	rx_drop_init(&s->drop_req, cfg->drop_rate, rx_seed_of(cfg->node.name, cfg->drop_seed) + 1);
	rx_drop_init(&s->drop_retrans, cfg->drop_rate,
		     rx_seed_of(cfg->node.name, cfg->drop_seed) + 2);
	if (cfg->drop_rate > 0)
		log_warn("loss generator on: %.4f of received datagrams thrown away (seed %llu)",
			 cfg->drop_rate, (unsigned long long)cfg->drop_seed);
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

void seq_shutdown(struct sequencer *s)
{
	int r;

	if (!s || s->state == SEQ_STOPPED)
		return;
	s->now_ns = mono_ns();
	r = out_flush(s);
	if (r == 0)
		r = journal_flush(s->journal);
	if (r < 0)
		log_err("journal flush at stop: %s", strerror(-r));
	else
		send_tape_control(s, 1);
	ev_io_stop(s->loop, &s->cmd_io);
	ev_io_stop(s->loop, &s->req_io);
	ev_io_stop(s->loop, &s->retrans_io);
	ev_timer_stop(s->loop, &s->heartbeat);
	ev_timer_stop(s->loop, &s->rx_timer);
	ctl_server_close(s->ctl);
	s->ctl = NULL;
	s->state = SEQ_STOPPED;
	log_notice("stopped: term %llu, last seq %llu", (unsigned long long)s->term,
		   (unsigned long long)(s->next_seq - 1));
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
	}
	ctl_server_close(s->ctl);
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
	return s->next_seq - 1;
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
	out->rxq_dropped = s->rxq_cmd + s->rxq_req + s->rxq_retrans;
	out->drops_injected = s->drop_cmd.dropped + s->drop_req.dropped + s->drop_retrans.dropped;
	if (net_udp_stats_read(&us) == 0)
		out->kernel_rcvbuf_errors = us.rcvbuf_errors;
}
