/* The sequencer's core: batching the sequenced commands into tape
 * datagrams, journalling them and publishing the tape (multicast, tape
 * heartbeats, the end of session), and opening, stopping and closing the
 * whole node. The other parts are listed in seq_private.h; the interface is
 * sequencer.h.
 *
 * Hot path, per wakeup of the command socket: up to `drain` recvmmsg calls of
 * `batch` datagrams each; every accepted command is wrapped into an Event
 * directly inside the outgoing tape datagram (the command bytes are copied,
 * never decoded) and appended to the journal; at the end of each recvmmsg
 * batch the journal is flushed and then every tape datagram built goes out in
 * one sendmmsg. Nothing is allocated per message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "hist.h"
#include "journal.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "raft.h"
#include "rx.h"
#include "rxpath.h"
#include "seq_private.h"
#include "tape.h"
#include "wire.h"

/* the warnings this file logs, each kind at most 5 a second */
static struct log_ratelimit rl_tape = LOG_RATELIMIT_INIT(1, 5);

#define SEQ_RETRANS_SLOTS 16 /* requests taken per wakeup of the retrans socket */
#define SEQ_RETRANS_SLOT_SIZE 64 /* a request is 20 bytes; longer ones are refused */
#define SEQ_RAFT_SLOTS 64 /* raft datagrams taken per recvmmsg */

const char *const seq_state_names[SEQ_STATE_MAX] = { "starting", "primary", "standby",
						     "waiting",	 "candidate", "stopped" };

void seq_fail(struct sequencer *s, const char *what, int err)
{
	log_err("%s: %s: stopping", what, strerror(-err));
	s->failed = 1;
	ev_break(s->loop, EVBREAK_ALL);
}

int seq_journal_error(struct sequencer *s, const char *what, int err)
{
	if (err != -ENOSPC && err != -EDQUOT) {
		seq_fail(s, what, err);
		return 0;
	}
	if (!s->disk_full) {
		s->disk_full = 1;
		s->st.disk_full++;
		log_err("%s: %s: this node sequences and acknowledges nothing more until its disk "
			"has room again (%u MiB free); it stands down (STATUS disk=full)",
			what, strerror(-err), SEQ_DISK_ROOM >> 20);
	}
	return 1;
}

/* Written before anything leaves: every raft output and every tape
 * datagram leaves only after what the journal was given is written (under
 * fsync = disk a background sync starts, and events are committed, hence
 * multicast, only once on the disks of a majority: raft's durable_seq). A
 * no-op when nothing was appended since. */
int seq_tape_sync(struct sequencer *s)
{
	int r;

	if (!s->journal_dirty)
		return 0;
	r = journal_flush(s->journal);
	if (r == 0)
		s->journal_dirty = 0;
	return r;
}

void seq_tape_close_packet(struct sequencer *s)
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
	auth_node_seal_batch(AUTH_TAPE, b, n, 0); /* the batch is spent after this */
	r = iopath_send(&s->io, b, s->tape_fd, n, NET_SEND_WAIT_NS, &s->st.tape_send_waits);
	if (r < 0 || (unsigned)r < n) {
		s->st.tape_send_errors += n - (r < 0 ? 0 : (unsigned)r);
		log_ratelimited(&rl_tape, LOG_LVL_WARNING, "tape: sent %d of %u datagrams: %s",
				r < 0 ? 0 : r, n, r < 0 ? strerror(-r) : "short send");
	}
	if (r > 0)
		s->st.tape_packets_sent += (unsigned)r;
	ab_send_batch(&s->tape_b, &s->io, b, n, NET_SEND_WAIT_NS);
	s->last_tape_send_ns = s->now_ns;
}

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
 * the queue is full (no majority answers), the oldest copy goes:
 * seq_tape_publish() reads those events back from the journal. */
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
 * seq_tape_publish() multicasts them (a group of one). Returns 0 or a
 * negative errno (journal failure: fatal). */
int seq_tape_flush(struct sequencer *s)
{
	int r;

	seq_tape_close_packet(s);
	if (s->out_n == 0)
		return 0;
	if ((r = seq_tape_sync(s)) < 0 || (r = raft_flush(s->raft, s->now_ns)) < 0)
		return r;
	/* A group of one with its journal written: seq_tape_publish() sent
	 * them. A group: raft's send() (group.c) copied them to the standbys.
	 * Under fsync = disk, or in a group, they wait in `pend` for their
	 * commit. */
	for (unsigned k = 0; k < s->out_n; k++)
		pend_push(s, net_batch_slot(&s->out, k), s->out.lens[k]);
	s->out_n = 0;
	seq_group_send(s);
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
		if (s->out_n == s->out.n && (r = seq_tape_flush(s)) < 0)
			return r;
		if (s->out_n == 0)
			s->out_first = s->next_seq;
		struct mold_session sess;
		uint64_t wire;

		/* in its day's session (day.c): a datagram never spans two days */
		seq_day_wire(s, s->next_seq, &sess, &wire);
		mold_build_begin(&s->builder, net_batch_slot(&s->out, s->out_n), s->tape_cap,
				 &sess, wire);
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
	s->last_event_ns = s->now_ns;
	return 0;
}

/* Sequences one event: a command (body TAPE_BODY_COMMAND) or one of the
 * sequencer's own. Returns 0, -EMSGSIZE when it cannot fit one tape
 * datagram, or another negative errno (journal: fatal). The event's commit
 * field is its own seq: it is multicast only once committed. */
static int emit_event(struct sequencer *s, const char *origin, uint64_t origin_seq,
		      enum tape_body body, const uint8_t *cmd, size_t len)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		size_t room = 0, n = 0;
		uint8_t *p;
		int r = out_reserve(s, &p, &room);

		if (r < 0)
			return r;
		if (p)
			n = tape_event_encode_body(p, room, s->term, s->next_seq, s->now_wall, origin,
						   origin_seq, s->next_seq, body, cmd, len);
		if (n > 0)
			return out_commit(s, p, n);
		if (s->builder.count == 0)
			return -EMSGSIZE;
		seq_tape_close_packet(s);
	}
	return -EMSGSIZE;
}

int seq_tape_emit(struct sequencer *s, const struct seq_gw *g, uint64_t origin_seq,
		  const uint8_t *cmd, size_t len)
{
	return emit_event(s, g->name, origin_seq, TAPE_BODY_COMMAND, cmd, len);
}

int seq_tape_emit_own(struct sequencer *s, enum tape_body body, const uint8_t *data, size_t len)
{
	int r;

	s->now_ns = mono_ns();
	s->now_wall = wall_ns();
	if ((r = emit_event(s, NULL, 0, body, data, len)) < 0)
		return r;
	return seq_tape_flush(s);
}

/* Time on an idle tape: the matchers' only clock is the tape, so when
 * nothing was sequenced for [sequencer] time_event the primary sequences an
 * event with a time and no command (orders expire by it; it is journalled
 * and replayed like any other), and sends it at once. */
static void tape_time_event(struct sequencer *s, uint64_t now)
{
	int r;

	s->now_ns = now;
	s->now_wall = wall_ns();
	if ((r = emit_event(s, NULL, 0, TAPE_BODY_NONE, NULL, 0)) < 0 ||
	    (r = seq_tape_flush(s)) < 0) {
		seq_journal_error(s, "time event", r);
		return;
	}
	s->st.time_events++;
}

/* Multicasts events [from, to] from the journal. */
static void publish_journal(struct sequencer *s, uint64_t from, uint64_t to)
{
	if (seq_tape_sync(s) < 0)
		return; /* fatal elsewhere; nothing unjournalled leaves */
	while (from <= to) {
		uint64_t blocks = 0;
		unsigned n = seq_retrans_read(s, &s->jb, s->jb.size - auth_node_reserve(), from,
					      to, &blocks);

		if (n == 0 || blocks == 0) {
			log_ratelimited(&rl_tape, LOG_LVL_WARNING,
					"tape: cannot read events %llu..%llu back from the journal",
					(unsigned long long)from, (unsigned long long)to);
			return;
		}
		tape_send(s, &s->jb, n);
		from += blocks;
		s->published = from - 1;
	}
}

/* Multicasts committed events [from, to] that this primary has not sent:
 * straight from `out` when the batch just built is exactly them (a group
 * of one), else rebuilt from the journal. */
void seq_tape_publish(struct sequencer *s, uint64_t from, uint64_t to)
{
	to = seq_flow_cap(s, to);
	if (from <= s->published)
		from = s->published + 1;
	if (from > to)
		return;
	seq_tape_close_packet(s);
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
		if (k == 0) {
			if (s->pend_last[0] > s->commit)
				return; /* the head is committed only in part: wait for the rest */
			/* committed, but flow control stops inside it: its
			 * first events from the journal; the rest later */
			publish_journal(s, next, to);
			return;
		}
		tape_send(s, &s->pend, k);
		for (unsigned i = 0; i < k; i++)
			hist_record(&s->commit_ns, s->now_ns - s->pend_t[i]);
		s->published = s->pend_last[k - 1];
		pend_drop(s, k);
	}
}

static void send_tape_control(struct sequencer *s, int eos)
{
	uint8_t pkt[AUTH_CONTROL_MAX];
	uint64_t next = (s->published < s->commit ? s->published : s->commit) + 1;
	struct mold_session sess;
	uint64_t wire;
	size_t n;

	/* in the session of the last event sent: a receiver learns a new
	 * day's base from its first data (common/tapeday.h) */
	seq_day_wire(s, next > 1 ? next - 1 : 1, &sess, &wire);
	n = auth_node_heartbeat(pkt, AUTH_TAPE, &sess, wire + (next > 1), eos);

	if (sendto(s->tape_fd, pkt, n, 0, (const struct sockaddr *)&s->group, sizeof(s->group)) < 0) {
		s->st.tape_send_errors++;
		log_ratelimited(&rl_tape, LOG_LVL_WARNING, "tape: %s: %s",
				eos ? "end of session" : "heartbeat", strerror(errno));
		return;
	}
	ab_send_one(&s->tape_b, pkt, n);
	s->st.tape_heartbeats_sent += !eos;
	s->last_tape_send_ns = mono_ns();
}

/* A full disk: once what waits in the journal's buffer is written and
 * SEQ_DISK_ROOM is free, the node stands again. */
static void disk_retry(struct sequencer *s)
{
	int r = journal_flush(s->journal);

	if (r < 0 || journal_free_bytes(s->journal) < SEQ_DISK_ROOM)
		return;
	s->disk_full = 0;
	log_notice("journal: the disk has room again (%llu MiB free): this node stands again",
		   (unsigned long long)(journal_free_bytes(s->journal) >> 20));
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, heartbeat);
	uint64_t now = mono_ns();
	int r;

	(void)loop;
	(void)revents;
	r = journal_tick(s->journal, now / 1000000u);
	if (r < 0 && !seq_journal_error(s, "journal fsync", r))
		return;
	if (s->disk_full)
		disk_retry(s);
	if (s->disk_full != s->stood_down) {
		s->stood_down = s->disk_full;
		s->now_ns = now;
		seq_group_done(s, raft_stand_down(s->raft, s->disk_full, now));
	}
	seq_flow_tick(s, now);
	/* only the primary speaks on the tape; handing over, it sequences
	 * nothing new (raft_propose() refuses it), time events included */
	if (s->state == SEQ_PRIMARY && !s->disk_full && s->cfg.time_event_ns &&
	    now - s->last_event_ns >= s->cfg.time_event_ns &&
	    raft_transfer_target(s->raft) == RAFT_NOBODY)
		tape_time_event(s, now);
	if (s->state == SEQ_PRIMARY && raft_transfer_target(s->raft) == RAFT_NOBODY)
		seq_day_tick(s);
	seq_day_retain(s);
	if (s->state == SEQ_PRIMARY && now - s->last_tape_send_ns >= s->cfg.heartbeat_ns)
		send_tape_control(s, 0);
}

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

static int open_journal(struct sequencer *s)
{
	struct journal_options jo = {
		.segment_bytes = s->cfg.segment_size,
		.fsync = seq_fsync_modes[s->cfg.fsync],
		.interval_ms = (uint32_t)(s->cfg.fsync_interval_ns / 1000000u),
		.ahead = (uint32_t)s->cfg.node.journal_ahead,
	};
	struct journal_report rep;
	char dir[300];
	int r;

	snprintf(dir, sizeof(dir), "%s/journal", s->cfg.node.state_dir);
	memset(&rep, 0, sizeof(rep));
	r = journal_open(&s->journal, dir, &jo, &rep);
	if (r == -EUCLEAN) {
		char why[1024];

		log_err("journal %s: %s", dir, journal_damage_text(&rep, dir, why, sizeof(why)));
		return r;
	}
	if (r < 0) {
		log_err("journal %s: %s", dir, strerror(-r));
		return r;
	}
	log_journal_report(&s->cfg, &rep);
	r = seq_gw_rebuild(s, 0);
	if (r < 0) {
		log_err("journal %s: reading: %s", dir, strerror(-r));
		return r;
	}
	s->next_seq = journal_last_seq(s->journal) + 1;
	log_info("journal: %u gateways, last term %llu, next seq %llu", s->n_gw,
		 (unsigned long long)s->term, (unsigned long long)s->next_seq);
	return 0;
}

int seq_open_udp(const char *what, const char *addr, const struct net_udp_options *o, int *fd)
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

/* A/B: the tape's second network, when tape_group_b is set. */
static int seq_open_tape_b(struct sequencer *s)
{
	const char *iface = *s->cfg.tape_iface_b ? s->cfg.tape_iface_b : s->cfg.tape_iface;
	const char *why = "";
	int r = ab_send_open(&s->tape_b, s->cfg.tape_group_b, iface, (int)s->cfg.tape_ttl,
			     (int)s->cfg.sndbuf, &why);

	if (r < 0) {
		log_err("tape_group_b %s on %s: %s: %s", s->cfg.tape_group_b, iface, why,
			strerror(-r));
		return r;
	}
	if (ab_send_on(&s->tape_b))
		log_info("A/B: the tape goes to %s on %s and to %s on %s", s->cfg.tape_group,
			 s->cfg.tape_iface, s->cfg.tape_group_b, iface);
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
	if ((r = seq_open_udp("listen", s->cfg.listen, &cmd, &s->cmd_fd)) < 0 ||
	    (r = seq_open_udp("requests", req, &cmd, &s->req_fd)) < 0 ||
	    (r = seq_open_udp("retrans", s->cfg.retrans, &rtx, &s->retrans_fd)) < 0 ||
	    (r = seq_open_udp("tape", "0.0.0.0:0", &snd, &s->tape_fd)) < 0)
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
	return seq_open_tape_b(s);
}

static int open_batches(struct sequencer *s)
{
	size_t dg = s->cfg.max_datagram;
	/* A tape datagram per received one, and room for the larger events. */
	unsigned out_n = (unsigned)s->cfg.batch * 2 + 2;

	if (net_batch_init(&s->in, (unsigned)s->cfg.batch, dg) < 0 ||
	    net_batch_init(&s->out, out_n, dg) < 0 ||
	    net_batch_init(&s->rin, SEQ_RETRANS_SLOTS, SEQ_RETRANS_SLOT_SIZE) < 0 ||
	    tape_server_init(&s->srv, (unsigned)s->cfg.retrans_packets, dg,
			     s->cfg.node.retrans_budget) < 0 ||
	    net_batch_init(&s->jb, 64, dg) < 0) {
		log_err("out of memory for the datagram batches");
		return -ENOMEM;
	}
	/* datagrams waiting for their commit (a group's, or the disk's) */
	s->pend_first = calloc(out_n * 4, sizeof(*s->pend_first));
	s->pend_last = calloc(out_n * 4, sizeof(*s->pend_last));
	s->pend_t = calloc(out_n * 4, sizeof(*s->pend_t));
	if (!s->pend_first || !s->pend_last || !s->pend_t ||
	    net_batch_init(&s->pend, out_n * 4, dg) < 0) {
		log_err("out of memory for the datagram batches");
		return -ENOMEM;
	}
	if (s->n_peers > 1) {
		/* every datagram of a full batch to every standby, and the rest */
		unsigned rq_n = (out_n + 64) * (unsigned)(s->n_peers - 1);

		s->max_entries = (unsigned)(dg / 4);
		s->entries = calloc(s->max_entries, sizeof(*s->entries));
		if (!s->entries || net_batch_init(&s->raft_in, SEQ_RAFT_SLOTS, dg) < 0 ||
		    net_batch_init(&s->rq, rq_n, dg) < 0) {
			log_err("out of memory for the group's datagram batches");
			return -ENOMEM;
		}
	}
	return 0;
}

/* [node] io = uring: the command and request sockets on a receive ring
 * (buffers: twice the batch, payloads of max_datagram as the recvmmsg
 * slots), the tape on a send ring. */
static int open_io(struct sequencer *s)
{
	unsigned bufs = 64;
	struct uring_rx_config rc = { .payload = s->cfg.max_datagram, .max_reap = s->in.n };
	int r;

	while (bufs < 2 * s->in.n)
		bufs *= 2;
	rc.bufs = bufs;
	r = iopath_open(&s->io, s->cfg.node.io, &rc, s->out.n, "sequencer");
	if (r < 0) {
		log_err("io_uring: %s", strerror(-r));
		return r;
	}
	(void)iopath_rx_add(&s->io, s->cmd_fd, SEQ_TAG_CMD, &s->rxq_cmd, "sequencer");
	(void)iopath_rx_add(&s->io, s->req_fd, SEQ_TAG_REQ, &s->rxq_req, "sequencer");
	if (iopath_uring(&s->io))
		log_info("io = uring: commands through io_uring (%u buffers)", bufs);
	return 0;
}

static void start_watchers(struct sequencer *s)
{
	double hb = (double)s->cfg.heartbeat_ns / 1e9;

	seq_gw_start(s);
	seq_retrans_start(s);
	/* Ticks at half the heartbeat so an idle tape is never silent longer. */
	ev_timer_init(&s->heartbeat, on_heartbeat, hb / 2, hb / 2);
	ev_timer_start(s->loop, &s->heartbeat);
	seq_group_start(s);
}

/* Every watcher of the node; stopping one that never started is a no-op. */
static void stop_watchers(struct sequencer *s)
{
	ev_io_stop(s->loop, &s->raft_io);
	ev_io_stop(s->loop, &s->sync_io);
	ev_timer_stop(s->loop, &s->raft_timer);
	ev_io_stop(s->loop, &s->cmd_io);
	ev_timer_stop(s->loop, &s->cmd_poll);
	ev_io_stop(s->loop, &s->req_io);
	iopath_stop(&s->io, s->loop);
	ev_io_stop(s->loop, &s->retrans_io);
	ev_timer_stop(s->loop, &s->heartbeat);
	ev_timer_stop(s->loop, &s->rx_timer);
}

static int seq_open_steps(struct sequencer *s)
{
	int r;

	if (mold_session_set(&s->tape_session, s->cfg.tape_session) < 0 ||
	    !s->cfg.tape_session[0]) {
		log_err("tape_session '%s': 1 to 10 printable characters", s->cfg.tape_session);
		return -EINVAL;
	}
	seq_day_reset(s);
	if ((r = seq_day_check_config(&s->cfg)) < 0 || (r = seq_group_check(s)) < 0)
		return r;
	if ((r = open_journal(s)) < 0 || (r = open_sockets(s)) < 0 || (r = open_batches(s)) < 0 ||
	    (r = open_io(s)) < 0)
		return r;
	s->now_ns = mono_ns();
	s->now_wall = wall_ns();
	s->state = SEQ_WAITING;
	if ((r = seq_group_open(s)) < 0)
		return r;
	start_watchers(s);
	/* a group of one is the primary from here on */
	s->now_ns = mono_ns();
	r = raft_tick(s->raft, s->now_ns);
	if (r < 0) {
		log_err("raft: %s", strerror(-r));
		return r;
	}
	seq_group_done(s, 0);
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
	s->tape_b.fd = -1;
	s->primary_id = RAFT_NOBODY;
	s->flow.limit = UINT64_MAX;
	s->flow.t.window = cfg->flow_window;
	s->flow.t.catchup_ns = SEQ_FLOW_CATCHUP_TIMEOUTS * cfg->flow_timeout_ns;
	rxpath_loss_init(&s->rng,
			 (struct rx_drop *const[]){ &s->drop_cmd, &s->drop_req, &s->drop_retrans,
						    &s->drop_raft },
			 4, cfg->drop_rate, cfg->node.name, cfg->drop_seed, 0);
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
	r = s->state == SEQ_PRIMARY ? seq_tape_flush(s) : 0;
	seq_group_send(s);
	if (r == 0)
		r = journal_flush(s->journal);
	if (r < 0)
		log_err("journal flush at stop: %s", strerror(-r));
	else if (s->n_peers == 1)
		send_tape_control(s, 1); /* a group goes on without this node */
	stop_watchers(s);
	s->state = SEQ_STOPPED;
	log_notice("stopped: term %llu, last seq %llu, commit %llu", (unsigned long long)s->term,
		   (unsigned long long)journal_last_seq(s->journal), (unsigned long long)s->commit);
}

static void close_sockets(struct sequencer *s)
{
	const int fds[] = { s->tape_fd, s->retrans_fd, s->cmd_fd, s->req_fd, s->raft_fd };

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	ab_send_close(&s->tape_b);
}

void seq_close(struct sequencer *s)
{
	if (!s)
		return;
	if (s->state != SEQ_STOPPED)
		stop_watchers(s);
	raft_close(s->raft);
	free(s->entries);
	free(s->pend_first);
	free(s->pend_last);
	free(s->pend_t);
	net_batch_fini(&s->pend);
	net_batch_fini(&s->raft_in);
	net_batch_fini(&s->rq);
	net_batch_fini(&s->jb);
	tape_server_fini(&s->srv);
	net_batch_fini(&s->rin);
	net_batch_fini(&s->out);
	net_batch_fini(&s->in);
	iopath_close(&s->io); /* before the sockets it reads */
	close_sockets(s);
	seq_gw_close(s);
	journal_close(s->journal);
	free(s);
}

