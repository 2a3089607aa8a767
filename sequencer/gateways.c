/* The gateways: the table of their command streams (one rx each, keyed by
 * MoldUDP64 session), the intake of their datagrams on the command and
 * request sockets, the requests for what is missing, and the rebuild of
 * each gateway's next number from the journal. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
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

/* the warnings this file logs, each kind at most 5 a second */
static struct log_ratelimit rl_malformed = LOG_RATELIMIT_INIT(1, 5);
static struct log_ratelimit rl_gap = LOG_RATELIMIT_INIT(1, 5);
static struct log_ratelimit rl_oversize = LOG_RATELIMIT_INIT(1, 5);

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

	if (s->fatal || s->disk_full)
		return RX_HOLD;
	r = len ? seq_tape_emit(s, g, seq, data, len) : -EMSGSIZE;
	if (r == -EMSGSIZE) {
		/* Refused, not sequenced: the number stays expected. */
		s->st.oversize_commands++;
		log_ratelimited(&rl_oversize, LOG_LVL_WARNING,
				"gateway %s: command %llu of %u bytes refused (empty or too long for "
				"one tape datagram)",
				g->name, (unsigned long long)seq, len);
		return RX_REJECT;
	}
	if (r == -ENOSPC || r == -EDQUOT) {
		seq_journal_error(s, "journal", r); /* not sequenced: still expected */
		return RX_HOLD;
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
	uint8_t pkt[AUTH_CONTROL_MAX];
	size_t n;

	(void)server;
	if (g->addr.sin_family != AF_INET)
		return; /* never heard from: nowhere to ask */
	n = auth_node_request(pkt, &req);
	if (sendto(s->req_fd, pkt, n, 0, (const struct sockaddr *)&g->addr,
		   sizeof(g->addr)) < 0) {
		log_ratelimited(&rl_gap, LOG_LVL_WARNING, "gateway %s: request: %s", g->name,
				strerror(errno));
		return;
	}
	log_ratelimited(&rl_gap, LOG_LVL_INFO, "gateway %s: gap, asked for %u from %llu",
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

/* Arms rx_timer for the earliest request due on any gateway's stream. */
static void gw_rx_arm(struct sequencer *s)
{
	uint64_t due = RX_NEVER;

	for (unsigned i = 0; i < s->n_gw; i++)
		due = rxpath_due_min(due, s->gw_list[i]->rx);
	rxpath_arm(s->loop, &s->rx_timer, s->state == SEQ_PRIMARY ? due : RX_NEVER, mono_ns());
}

/* The gateway of session sess, made when new; NULL (counted and logged)
 * when the name is unusable or the table full. */
static struct seq_gw *gw_lookup(struct sequencer *s, const struct mold_session *sess)
{
	int bad = 0;
	struct seq_gw *g = gw_get(s, sess, &bad);

	if (!g && bad) {
		s->st.malformed_packets++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"command datagram with an unusable session name dropped");
		return NULL;
	}
	if (!g) {
		s->st.gateways_full++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"more than %d gateways: datagram dropped", SEQ_MAX_GATEWAYS);
	}
	return g;
}

/* One datagram from a gateway; answer: it came to the request socket. */
static int handle_packet(struct sequencer *s, uint8_t *buf, size_t len,
			 const struct sockaddr_in *from, int answer)
{
	struct mold_packet pkt;
	struct seq_gw *g;
	int r;

	s->st.packets_received++;
	/* the loss generator after the check: it draws on the packet as built */
	if (auth_node_check(AUTH_CMD, buf, &len, 0, from) < 0 ||
	    rx_drop(answer ? &s->drop_req : &s->drop_cmd, buf, len))
		return 0;
	if (!auth_node_from_host(s->gw_hosts, s->n_gw_hosts, from, "command datagram",
				 "[sequencer] gateways", &s->st.commands_not_member))
		return 0;
	r = mold_parse(buf, len, NULL, s->cfg.max_datagram, &pkt);
	if (r < 0) {
		char a[32];

		s->st.malformed_packets++;
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"malformed command datagram (%zu bytes) from %s: %s", len, a,
				mold_strerror(r));
		return 0;
	}
	g = gw_lookup(s, &pkt.session);
	if (!g)
		return 0;
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
	if (s->disk_full) {
		/* Nothing can be journalled: the gateway resends it, to the
		 * next primary once this one has stood down. */
		s->st.commands_disk_full++;
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

/* The end of a round of received datagrams: the tape is flushed. 0, or
 * -1 after a fatal journal error (the node is stopping). */
static int cmd_round_end(struct sequencer *s, int r)
{
	if (r == 0)
		r = seq_tape_flush(s);
	if (r < 0 && !seq_journal_error(s, "journal", r))
		return -1;
	return 0;
}

static void cmd_wakeup_end(struct sequencer *s)
{
	int r;

	gw_rx_arm(s);
	r = journal_tick(s->journal, s->now_ns / 1000000u);
	if (r < 0)
		seq_journal_error(s, "journal fsync", r);
}

/* Datagrams from the gateways: their streams on cmd_fd, answers to our
 * requests on req_fd (answer). The datagrams read (-1 after a fatal
 * journal error), *more set when the drain limit ended the read before the
 * socket was empty. */
static int cmd_read(struct sequencer *s, int fd, int answer, int *more)
{
	int r, got = 0;

	if (!answer)
		s->st.cmd_reads++;
	for (uint64_t round = 0; round < s->cfg.drain; round++) {
		int n = net_batch_recv_counted(&s->in, fd, answer ? &s->rxq_req : &s->rxq_cmd);

		r = 0;
		if (n <= 0) {
			if (n < 0)
				log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "recvmmsg: %s",
						strerror(-n));
			break;
		}
		got += n;
		s->now_ns = mono_ns();
		s->now_wall = wall_ns();
		for (int i = 0; i < n && r == 0; i++)
			r = handle_packet(s, net_batch_slot(&s->in, (unsigned)i), s->in.lens[i],
					  &s->in.addrs[i], answer);
		if (cmd_round_end(s, r) < 0)
			return -1;
		if ((unsigned)n < s->in.n)
			break;
		*more = round + 1 == s->cfg.drain;
	}
	cmd_wakeup_end(s);
	return got;
}

/* A non-primary's next read of cmd_fd: in standby_poll (at once when
 * the last one left datagrams behind). */
static void cmd_poll_arm(struct sequencer *s, int now)
{
	ev_io_stop(s->loop, &s->cmd_io);
	ev_timer_set(&s->cmd_poll, now ? 0. : (ev_tstamp)s->cfg.standby_poll_ns / 1e9, 0.);
	ev_timer_start(s->loop, &s->cmd_poll);
}

static void on_cmd_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = w->data;
	uint64_t last = s->cmd_woken_ns;
	int got, more = 0;

	(void)loop;
	(void)revents;
	got = cmd_read(s, w->fd, w == &s->req_io, &more);
	if (got <= 0 || w != &s->cmd_io || !s->cmd_polling)
		return;
	/* datagrams closer together than standby_poll: read by the timer
	 * while they keep coming; sparse ones (heartbeats) wake us each */
	s->cmd_woken_ns = s->now_ns;
	if (more || s->now_ns - last < s->cfg.standby_poll_ns)
		cmd_poll_arm(s, more);
}

static void on_cmd_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, cmd_poll);
	int got, more = 0;

	(void)w;
	(void)revents;
	got = cmd_read(s, s->cmd_fd, 0, &more);
	if (got < 0)
		return;
	if (got > 0 && s->cmd_polling)
		cmd_poll_arm(s, more);
	else
		ev_io_start(loop, &s->cmd_io); /* quiet, or primary now: each datagram wakes us */
}

/* [node] io = uring: both sockets through the ring, a batch a round, each
 * round flushed to the tape as a recvmmsg round is. */
static void on_cmd_uring(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = w->data;
	const struct uring_msg *m;
	int r;

	(void)loop;
	(void)revents;
	for (uint64_t round = 0; round < s->cfg.drain; round++) {
		int n = uring_rx_reap(s->io.rx, s->in.n, &m);

		if (n <= 0)
			break;
		s->now_ns = mono_ns();
		s->now_wall = wall_ns();
		r = 0;
		for (int i = 0; i < n && r == 0; i++)
			r = handle_packet(s, (uint8_t *)m[i].data, m[i].len, m[i].from, m[i].tag == SEQ_TAG_REQ);
		if (cmd_round_end(s, r) < 0)
			return;
		if ((r = uring_rx_release(s->io.rx)) < 0)
			log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "io_uring re-arm: %s",
					strerror(-r));
		if ((unsigned)n < s->in.n)
			break;
	}
	if ((r = uring_rx_done(s->io.rx)) < 0)
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "io_uring re-arm: %s",
				strerror(-r));
	cmd_wakeup_end(s);
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

/* Raises the next expected number of the gateway that sent the command in
 * journalled event data. Returns 0, or -1 for an event not understood. */
int seq_gw_note(struct sequencer *s, const struct tape_event_view *v)
{
	struct mold_session sess;
	char origin[MOLD_SESSION_LEN + 1];
	struct seq_gw *g;
	int bad_name = 0;

	if (v->body != TAPE_BODY_COMMAND || v->origin_len == 0 ||
	    v->origin_len > MOLD_SESSION_LEN)
		return 0;
	memcpy(origin, v->origin, v->origin_len);
	origin[v->origin_len] = '\0';
	if (mold_session_set(&sess, origin) < 0 || !(g = gw_get(s, &sess, &bad_name)))
		return -1;
	if (v->origin_seq + 1 > g->next)
		g->next = v->origin_seq + 1;
	return 0;
}

void seq_gw_raise(struct sequencer *s, const char *name, uint64_t next)
{
	struct mold_session sess;
	struct seq_gw *g;
	int bad = 0;

	if (mold_session_set(&sess, name) < 0 || !(g = gw_get(s, &sess, &bad)))
		return;
	if (next > g->next)
		g->next = next;
}

/* Rebuilds the gateways' next expected numbers (from scratch with reset:
 * after a cut) and the last term from the journal. */
int seq_gw_rebuild(struct sequencer *s, int reset)
{
	struct journal_iter *it;
	uint64_t seq, term, bad = 0;
	const uint8_t *data;
	size_t len;
	int r;

	if (reset)
		for (unsigned i = 0; i < s->n_gw; i++)
			s->gw_list[i]->next = 1;
	seq_day_reset(s);
	if (journal_last_seq(s->journal) == 0)
		return 0;
	r = journal_iter_open(&it, s->journal, journal_first_seq(s->journal));
	if (r < 0)
		return r;
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		struct tape_event_view v;

		if (term > s->term)
			s->term = term;
		if (tape_event_peek(data, len, &v) < 0) {
			bad++;
			continue;
		}
		if (seq == journal_first_seq(s->journal))
			seq_day_first(s, &v); /* earlier days may have left */
		seq_day_note(s, seq, &v);
		if (seq_gw_note(s, &v) < 0)
			bad++;
	}
	journal_iter_close(it);
	if (bad)
		log_warn("journal: %llu events not understood while rebuilding",
			 (unsigned long long)bad);
	seq_gw_restart(s);
	return r;
}

void seq_gw_restart(struct sequencer *s)
{
	for (unsigned i = 0; i < s->n_gw; i++)
		rx_start(s->gw_list[i]->rx, s->gw_list[i]->next);
}

void seq_gw_start(struct sequencer *s)
{
	ev_io_init(&s->cmd_io, on_cmd_readable, s->cmd_fd, EV_READ);
	ev_io_init(&s->req_io, on_cmd_readable, s->req_fd, EV_READ);
	s->cmd_io.data = s->req_io.data = s;
	ev_init(&s->rx_timer, on_rx_timer);
	ev_init(&s->cmd_poll, on_cmd_poll);
	s->gw_started = 1;
	if (iopath_uring(&s->io)) {
		iopath_start(&s->io, s->loop, on_cmd_uring, s);
		return;
	}
	ev_io_start(s->loop, &s->cmd_io);
	ev_io_start(s->loop, &s->req_io);
	seq_gw_mode(s);
}

void seq_gw_mode(struct sequencer *s)
{
	int polling = s->state != SEQ_PRIMARY && s->cfg.standby_poll_ns > 0;

	if (!s->gw_started || iopath_uring(&s->io) || s->state == SEQ_STOPPED ||
	    polling == s->cmd_polling)
		return;
	s->cmd_polling = polling;
	if (polling)
		return; /* cmd_io waits for the next datagram */
	ev_timer_stop(s->loop, &s->cmd_poll);
	if (ev_is_active(&s->cmd_io))
		return;
	ev_io_start(s->loop, &s->cmd_io);
	/* what the last poll left is read now, not at the next datagram */
	ev_feed_event(s->loop, &s->cmd_io, EV_READ);
}

void seq_gw_close(struct sequencer *s)
{
	for (unsigned i = 0; i < s->n_gw; i++)
		rx_destroy(s->gw_list[i]->rx);
}
