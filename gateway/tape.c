/* The tape watcher: follows the sequencer's tape (MoldUDP64, common/tape.h)
 * for its term and commit position, acknowledges the commands of ours that
 * it has committed, and hands its DayEvents to day.c. The tape runs in one
 * MoldUDP64 session a day; everything here counts in tape indices, which
 * run on across days, and common/tapeday maps packets and requests. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "addrlist.h"
#include "clock.h"
#include "gw_private.h"
#include "tape.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

static void ack_push(struct gw_tape *t, uint64_t tape_seq, uint64_t origin_seq)
{
	unsigned i;

	if (t->ack_len == GW_ACK_RING) {
		/* full: the newest entry stands for both (later, never wrong) */
		i = (t->ack_head + t->ack_len - 1) % GW_ACK_RING;
	} else {
		i = (t->ack_head + t->ack_len) % GW_ACK_RING;
		t->ack_len++;
	}
	t->ack_ring[i].tape_seq = tape_seq;
	t->ack_ring[i].origin_seq = origin_seq;
}

static void ack_drain(struct gw_tape *t)
{
	while (t->ack_len > 0 && t->ack_ring[t->ack_head].tape_seq <= t->commit) {
		gw_cmd_ack(t->cmd, t->ack_ring[t->ack_head].origin_seq);
		t->ack_head = (t->ack_head + 1) % GW_ACK_RING;
		t->ack_len--;
	}
}

/* One block of the tape at seq; returns 0, or -1 when the packet is fenced
 * (an older term) and must be dropped from here on. */
static int tape_block(struct gw_tape *t, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct gw *g = t->g;
	struct tape_event_view v;
	size_t name_len = strlen(g->cfg.node.name);

	if (tape_event_peek(data, len, &v) < 0) {
		g->st.tape_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "tape %" PRIu64 ": malformed event", seq);
		t->s.next = seq + 1;
		return 0;
	}
	if (tape_term_fenced(t->term, v.term)) {
		g->st.tape_fenced++;
		return -1;
	}
	t->term = v.term;
	if (v.commit > t->commit)
		t->commit = v.commit;
	t->last = seq;
	t->s.next = seq + 1;
	if (v.body == TAPE_BODY_DAY) {
		if (t->k == 0) /* the trading day is tape 0's */
			gw_day_on_tape(g, seq, v.timestamp, v.body_data, v.body_len);
		return 0;
	}
	if (v.origin_len == name_len && memcmp(v.origin, g->cfg.node.name, name_len) == 0) {
		gw_flow_on_tape(g, t->k, v.origin_seq, seq);
		if (gw_cmd_pending(t->cmd, v.origin_seq))
			ack_push(t, seq, v.origin_seq);
	}
	return 0;
}

/* rx delivers tape event seq, the next in order. */
static int tape_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	/* a fenced event (older term) is forgotten and asked for again */
	return tape_block(ctx, seq, data, len) < 0 ? RX_REJECT : RX_TAKEN;
}

/* A request for indices [index, index + count), in the session of the
 * known day that holds index (tapeday_build_request's mapping; the request
 * is built here by auth_node_request, which tags it). A server maps it back
 * to indices and answers each block in its own day's session. */
static void tape_request(void *ctx, unsigned server, uint64_t index, uint16_t count)
{
	struct gw_tape *t = ctx;
	struct mold_request r = { .count = count };

	tapeday_wire(&t->days, index, &r.session, &r.seq);
	gw_stream_send_request(&t->s, server, &r);
}

/* The sequencer's journal no longer holds [from, to): go on after it. A
 * command of ours among them is resent after resend_timeout (the sequencer
 * drops it as a duplicate) and acknowledged by our next command's event. */
static int tape_lost(void *ctx, uint64_t from, uint64_t to)
{
	const struct gw_tape *t = ctx;

	log_ratelimited(&gw_rl, LOG_LVL_WARNING,
			"tape %u: %" PRIu64 "..%" PRIu64
			" is no longer held by any sequencer node: skipped",
			t->k, from, to - 1);
	return 1;
}

static const struct rx_ops tape_ops = { tape_deliver, tape_request, tape_lost };

/* Nothing of ours can be in a gap while nothing is unacknowledged: the tape
 * is followed from `upto` on without asking for what is missing. A day's
 * first event (START_OF_DAY, at its base) and a day event a restart has to
 * deliver again are never skipped (gw_day_skip_limit): the gap from there
 * is asked for. */
static void tape_skip(struct gw_tape *t, uint64_t upto, uint64_t now)
{
	if (!gw_cmd_unacked(t->cmd) && rx_next(t->s.rx) && t->k == 0)
		upto = gw_day_skip_limit(t->g, rx_next(t->s.rx), upto);
	if (!gw_cmd_unacked(t->cmd) && rx_next(t->s.rx) && upto > rx_next(t->s.rx)) {
		rx_skip(t->s.rx, upto, now);
		t->s.next = rx_next(t->s.rx);
	}
}

/* A heartbeat or end of session of a later day whose first index is not
 * known: the day before ended, and what we have may not be all of it. The
 * next index exists (at least the new day's START_OF_DAY is there), so rx
 * is told so once it has delivered all it knows of, and asks for it: the
 * answer comes in the session of the day that holds it and, from the new
 * day's, teaches its base. While a gap is open rx is asking already. An
 * answer of this kind (a too-old answer from a day we do not know) says
 * nothing we can place: the other servers are asked as usual. */
static void tape_later(struct gw_tape *t, int answer, uint64_t now)
{
	struct rx *rx = t->s.rx;

	if (answer)
		return;
	t->s.live = 1;
	if (rx_next(rx) == 0 && gw_cmd_unacked(t->cmd))
		rx_start(rx, 1); /* ours may be anywhere: read it all */
	if (rx_next(rx) && rx_gap_count(rx) == 0 && rx_next(rx) == rx_high(rx) &&
	    rx_believable(rx, rx_high(rx), 1))
		rx_tail(rx, rx_high(rx) + 1, now);
}

/* A datagram of the tape, or (answer) on the request socket from `from`: a
 * retransmission, or the too-old answer (a heartbeat). */
static void tape_packet(void *ctx, const uint8_t *buf, size_t len, int answer,
			const struct sockaddr_in *from, uint64_t now)
{
	struct gw_tape *t = ctx;
	struct gw *g = t->g;
	struct mold_packet pkt;
	int rc;

	if (rx_drop(answer ? &t->s.req_drop : &t->s.drop, buf, len))
		return;
	rc = tapeday_parse(&t->days, buf, len, 0, &pkt);
	if (rc < 0) {
		g->st.tape_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "tape: dropped packet: %s",
				mold_strerror(rc));
		return;
	}
	g->st.tape_packets++;
	if (rc == TAPEDAY_LATER) {
		tape_later(t, answer, now);
		return;
	}
	if (answer) {
		if (pkt.kind == MOLD_END_OF_SESSION)
			return;
		if (pkt.kind == MOLD_HEARTBEAT) {
			/* the server that sent it no longer holds what is
			 * below pkt.seq; the others may */
			g->st.tape_too_old++;
			rxpath_too_old(t->s.rx, rxpath_server(t->s.retrans, t->s.n_retrans, from),
				       "tape", from, pkt.seq, now);
			t->s.next = rx_next(t->s.rx);
			return;
		}
	} else {
		t->s.live = 1;
	}
	if (rx_next(t->s.rx) == 0 && gw_cmd_unacked(t->cmd))
		rx_start(t->s.rx, 1); /* ours may be anywhere: read it all */
	if (!rx_believable(t->s.rx, pkt.seq, pkt.kind == MOLD_DATA ? pkt.count : 0)) {
		rx_packet(t->s.rx, &pkt, now); /* counts it, adopts nothing */
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"tape: a packet at seq %llu, beyond any tape's position: ignored",
				(unsigned long long)pkt.seq);
		return;
	}
	tape_skip(t, pkt.seq, now);
	rx_packet(t->s.rx, &pkt, now);
	ack_drain(t);
	if (t->k == 0)
		gw_day_drain(g);
}

static void tape_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_tape *t = w->data;

	(void)loop;
	(void)revents;
	gw_stream_drain(t->g, &t->s, w, tape_packet, t);
}

void gw_tape_tick(struct gw *g, ev_tstamp now)
{
	(void)now;
	for (unsigned k = 0; k < g->n_tapes; k++) {
		struct gw_tape *t = &g->tape[k];

		if (t->s.rx && rx_gap_count(t->s.rx) > 0 && !gw_cmd_unacked(t->cmd)) {
			tape_skip(t, rx_high(t->s.rx), mono_ns());
			gw_stream_arm(g);
		}
	}
}

/* Tape t->k's watcher. */
static int tape_open(struct gw_tape *t, const uint64_t *pos)
{
	struct gw *g = t->g;
	const struct gw_tape_config *tc = &g->cfg.tape[t->k];
	uint64_t next = pos[gw_pos_of(t->k, GW_POS_TAPE)];
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group;
	struct net_bufsize rcv;
	char why[64], sec[16];
	int rc;

	gw_tape_section(t->k, sec, sizeof(sec));
	if (net_parse_addr(tc->tape_group, &group) < 0) {
		log_err("[%s] tape_group \"%s\": not host:port", sec, tc->tape_group);
		return -EINVAL;
	}
	/* every sequencer node serves the tape up to its own commit position */
	rc = addrlist_parse_near(tc->tape_recorders, tc->tape_retrans, t->s.retrans,
				 RX_MAX_SERVERS, &t->s.n_near);
	if (rc < 0) {
		log_err("[%s] tape_recorders \"%s\" and tape_retrans \"%s\": %s", sec,
			tc->tape_recorders, tc->tape_retrans,
			gw_stream_addr_error(rc, why, sizeof(why), RX_MAX_SERVERS));
		return rc;
	}
	t->s.n_retrans = (unsigned)rc;
	t->s.next = next;
	/* the loss generator's seeds (tape 0's after the command socket's, see
	 * cmd_open; the other tapes' from 63 on, past the partitions') */
	rx_drop_init(&t->s.drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + (t->k ? 60 + 3 * t->k : 12));
	rx_drop_init(&t->s.req_drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + (t->k ? 61 + 3 * t->k : 13));
	if (mold_session_set(&t->s.sess, tc->tape_session) < 0 ||
	    tapeday_init(&t->days, tc->tape_session) < 0)
		return -EINVAL; /* checked by gw_open */
	/* the day the tape was in: requests name it; a later day is learnt
	 * from the tape (a wrong base is replaced by the next packet's) */
	uint64_t day = pos[gw_pos_of(t->k, GW_POS_TAPE_DAY)];

	if (day > 1 && day <= TAPEDAY_MAX_DAY)
		(void)tapeday_learn(&t->days, (uint32_t)day, pos[gw_pos_of(t->k, GW_POS_TAPE_BASE)]);
	t->s.surface = AUTH_TAPE;
	/* from the progress file's position (0: the first packet decides) */
	rc = gw_stream_open(g, &t->s, &tape_ops, t,
			    g->cfg.reorder_bytes ? g->cfg.reorder_bytes : 8u << 20,
			    t->s.n_retrans, t->s.next, *tc->tape_group_b != 0);
	if (rc < 0) {
		log_err("tape receiver: %s", strerror(-rc));
		return rc;
	}
	t->s.fd = net_mcast_recv_open(&group, g->cfg.tape_iface, &opt, &rcv);
	if (t->s.fd < 0) {
		log_err("tape %s on %s: %s", tc->tape_group, g->cfg.tape_iface,
			strerror(-t->s.fd));
		return t->s.fd;
	}
	rxpath_bufsize_check("tape", &rcv);
	t->s.req_fd = net_udp_open_on(g->cfg.tape_iface, &opt, &rcv, NULL);
	if (t->s.req_fd < 0) {
		log_err("tape request socket: %s", strerror(-t->s.req_fd));
		return t->s.req_fd;
	}
	rxpath_bufsize_check("tape request socket", &rcv);
	ev_io_init(&t->s.io, tape_read, t->s.fd, EV_READ);
	ev_io_init(&t->s.req_io, tape_read, t->s.req_fd, EV_READ);
	t->s.io.data = t->s.req_io.data = t;
	/* read before the exec streams when both are ready: a tape event is
	 * on the tape before its answer, and flow control and the stage
	 * clock count it so (an answer read first counts 0 for the matcher) */
	ev_set_priority(&t->s.io, 1);
	ev_set_priority(&t->s.req_io, 1);
	ev_io_start(g->loop, &t->s.io);
	ev_io_start(g->loop, &t->s.req_io);
	return gw_stream_open_b(g, &t->s, tc->tape_group_b, "tape", tape_read, t);
}

int gw_tape_open(struct gw *g, const uint64_t *pos)
{
	int rc;

	for (unsigned k = 0; k < g->n_tapes; k++)
		if ((rc = tape_open(&g->tape[k], pos)) < 0)
			return rc;
	return 0;
}

void gw_tape_close(struct gw *g)
{
	for (unsigned k = 0; k < g->n_tapes; k++)
		gw_stream_close(g, &g->tape[k].s);
}
