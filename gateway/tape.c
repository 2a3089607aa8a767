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

static void ack_push(struct gw *g, uint64_t tape_seq, uint64_t origin_seq)
{
	unsigned i;

	if (g->tape.ack_len == GW_ACK_RING) {
		/* full: the newest entry stands for both (later, never wrong) */
		i = (g->tape.ack_head + g->tape.ack_len - 1) % GW_ACK_RING;
	} else {
		i = (g->tape.ack_head + g->tape.ack_len) % GW_ACK_RING;
		g->tape.ack_len++;
	}
	g->tape.ack_ring[i].tape_seq = tape_seq;
	g->tape.ack_ring[i].origin_seq = origin_seq;
}

static void ack_drain(struct gw *g)
{
	while (g->tape.ack_len > 0 && g->tape.ack_ring[g->tape.ack_head].tape_seq <= g->tape.commit) {
		gw_cmd_ack(g, g->tape.ack_ring[g->tape.ack_head].origin_seq);
		g->tape.ack_head = (g->tape.ack_head + 1) % GW_ACK_RING;
		g->tape.ack_len--;
	}
}

/* One block of the tape at seq; returns 0, or -1 when the packet is fenced
 * (an older term) and must be dropped from here on. */
static int tape_block(struct gw *g, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct tape_event_view v;
	size_t name_len = strlen(g->cfg.node.name);

	if (tape_event_peek(data, len, &v) < 0) {
		g->st.tape_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "tape %" PRIu64 ": malformed event", seq);
		g->tape.s.next = seq + 1;
		return 0;
	}
	if (tape_term_fenced(g->tape.term, v.term)) {
		g->st.tape_fenced++;
		return -1;
	}
	g->tape.term = v.term;
	if (v.commit > g->tape.commit)
		g->tape.commit = v.commit;
	g->tape.last = seq;
	g->tape.s.next = seq + 1;
	if (v.body == TAPE_BODY_DAY) {
		gw_day_on_tape(g, seq, v.timestamp, v.body_data, v.body_len);
		return 0;
	}
	if (v.origin_len == name_len && memcmp(v.origin, g->cfg.node.name, name_len) == 0) {
		gw_flow_on_tape(g, v.origin_seq, seq);
		if (gw_cmd_pending(g, v.origin_seq))
			ack_push(g, seq, v.origin_seq);
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
	struct gw *g = ctx;
	struct mold_request r = { .count = count };

	tapeday_wire(&g->tape.days, index, &r.session, &r.seq);
	gw_stream_send_request(&g->tape.s, server, &r);
}

/* The sequencer's journal no longer holds [from, to): go on after it. A
 * command of ours among them is resent after resend_timeout (the sequencer
 * drops it as a duplicate) and acknowledged by our next command's event. */
static int tape_lost(void *ctx, uint64_t from, uint64_t to)
{
	(void)ctx;
	log_ratelimited(&gw_rl, LOG_LVL_WARNING,
			"tape %" PRIu64 "..%" PRIu64
			" is no longer held by any sequencer node: skipped",
			from, to - 1);
	return 1;
}

static const struct rx_ops tape_ops = { tape_deliver, tape_request, tape_lost };

/* Nothing of ours can be in a gap while nothing is unacknowledged: the tape
 * is followed from `upto` on without asking for what is missing. A day's
 * first event (START_OF_DAY, at its base) and a day event a restart has to
 * deliver again are never skipped (gw_day_skip_limit): the gap from there
 * is asked for. */
static void tape_skip(struct gw *g, uint64_t upto, uint64_t now)
{
	if (!gw_cmd_unacked(g) && rx_next(g->tape.s.rx))
		upto = gw_day_skip_limit(g, rx_next(g->tape.s.rx), upto);
	if (!gw_cmd_unacked(g) && rx_next(g->tape.s.rx) && upto > rx_next(g->tape.s.rx)) {
		rx_skip(g->tape.s.rx, upto, now);
		g->tape.s.next = rx_next(g->tape.s.rx);
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
static void tape_later(struct gw *g, int answer, uint64_t now)
{
	struct rx *rx = g->tape.s.rx;

	if (answer)
		return;
	g->tape.s.live = 1;
	if (rx_next(rx) == 0 && gw_cmd_unacked(g))
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
	struct gw *g = ctx;
	struct mold_packet pkt;
	int rc;

	if (rx_drop(answer ? &g->tape.s.req_drop : &g->tape.s.drop, buf, len))
		return;
	rc = tapeday_parse(&g->tape.days, buf, len, 0, &pkt);
	if (rc < 0) {
		g->st.tape_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "tape: dropped packet: %s",
				mold_strerror(rc));
		return;
	}
	g->st.tape_packets++;
	if (rc == TAPEDAY_LATER) {
		tape_later(g, answer, now);
		return;
	}
	if (answer) {
		if (pkt.kind == MOLD_END_OF_SESSION)
			return;
		if (pkt.kind == MOLD_HEARTBEAT) {
			/* the server that sent it no longer holds what is
			 * below pkt.seq; the others may */
			g->st.tape_too_old++;
			rxpath_too_old(g->tape.s.rx, rxpath_server(g->tape.s.retrans, g->tape.s.n_retrans, from),
				       "tape", from, pkt.seq, now);
			g->tape.s.next = rx_next(g->tape.s.rx);
			return;
		}
	} else {
		g->tape.s.live = 1;
	}
	if (rx_next(g->tape.s.rx) == 0 && gw_cmd_unacked(g))
		rx_start(g->tape.s.rx, 1); /* ours may be anywhere: read it all */
	if (!rx_believable(g->tape.s.rx, pkt.seq, pkt.kind == MOLD_DATA ? pkt.count : 0)) {
		rx_packet(g->tape.s.rx, &pkt, now); /* counts it, adopts nothing */
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"tape: a packet at seq %llu, beyond any tape's position: ignored",
				(unsigned long long)pkt.seq);
		return;
	}
	tape_skip(g, pkt.seq, now);
	rx_packet(g->tape.s.rx, &pkt, now);
	ack_drain(g);
	gw_day_drain(g);
}

static void tape_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;

	(void)loop;
	(void)revents;
	gw_stream_drain(g, &g->tape.s, w, tape_packet, g);
}

void gw_tape_tick(struct gw *g, ev_tstamp now)
{
	(void)now;
	if (g->tape.s.rx && rx_gap_count(g->tape.s.rx) > 0 && !gw_cmd_unacked(g)) {
		tape_skip(g, rx_high(g->tape.s.rx), mono_ns());
		gw_stream_arm(g);
	}
}

int gw_tape_open(struct gw *g, const uint64_t *pos)
{
	uint64_t next = pos[GW_POS_TAPE];
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group;
	struct net_bufsize rcv;
	char why[64];
	int rc;

	if (net_parse_addr(g->cfg.tape_group, &group) < 0) {
		log_err("[gateway] tape_group \"%s\": not host:port", g->cfg.tape_group);
		return -EINVAL;
	}
	/* every sequencer node serves the tape up to its own commit position */
	rc = addrlist_parse_near(g->cfg.tape_recorders, g->cfg.tape_retrans, g->tape.s.retrans,
				 RX_MAX_SERVERS, &g->tape.s.n_near);
	if (rc < 0) {
		log_err("[gateway] tape_recorders \"%s\" and tape_retrans \"%s\": %s",
			g->cfg.tape_recorders, g->cfg.tape_retrans,
			gw_stream_addr_error(rc, why, sizeof(why), RX_MAX_SERVERS));
		return rc;
	}
	g->tape.s.n_retrans = (unsigned)rc;
	g->tape.s.next = next;
	/* the loss generator's seeds (after the command socket's, see gw_cmd_open) */
	rx_drop_init(&g->tape.s.drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 12);
	rx_drop_init(&g->tape.s.req_drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 13);
	if (mold_session_set(&g->tape.s.sess, g->cfg.tape_session) < 0 ||
	    tapeday_init(&g->tape.days, g->cfg.tape_session) < 0)
		return -EINVAL; /* checked by gw_open */
	/* the day the tape was in: requests name it; a later day is learnt
	 * from the tape (a wrong base is replaced by the next packet's) */
	if (pos[GW_POS_TAPE_DAY] > 1 && pos[GW_POS_TAPE_DAY] <= TAPEDAY_MAX_DAY)
		(void)tapeday_learn(&g->tape.days, (uint32_t)pos[GW_POS_TAPE_DAY],
				    pos[GW_POS_TAPE_BASE]);
	g->tape.s.surface = AUTH_TAPE;
	/* from the progress file's position (0: the first packet decides) */
	rc = gw_stream_open(g, &g->tape.s, &tape_ops, g,
			    g->cfg.reorder_bytes ? g->cfg.reorder_bytes : 8u << 20,
			    g->tape.s.n_retrans, g->tape.s.next, *g->cfg.tape_group_b != 0);
	if (rc < 0) {
		log_err("tape receiver: %s", strerror(-rc));
		return rc;
	}
	g->tape.s.fd = net_mcast_recv_open(&group, g->cfg.tape_iface, &opt, &rcv);
	if (g->tape.s.fd < 0) {
		log_err("tape %s on %s: %s", g->cfg.tape_group, g->cfg.tape_iface,
			strerror(-g->tape.s.fd));
		return g->tape.s.fd;
	}
	rxpath_bufsize_check("tape", &rcv);
	g->tape.s.req_fd = net_udp_open_on(g->cfg.tape_iface, &opt, &rcv, NULL);
	if (g->tape.s.req_fd < 0) {
		log_err("tape request socket: %s", strerror(-g->tape.s.req_fd));
		return g->tape.s.req_fd;
	}
	rxpath_bufsize_check("tape request socket", &rcv);
	ev_io_init(&g->tape.s.io, tape_read, g->tape.s.fd, EV_READ);
	ev_io_init(&g->tape.s.req_io, tape_read, g->tape.s.req_fd, EV_READ);
	g->tape.s.io.data = g->tape.s.req_io.data = g;
	ev_io_start(g->loop, &g->tape.s.io);
	ev_io_start(g->loop, &g->tape.s.req_io);
	return gw_stream_open_b(g, &g->tape.s, g->cfg.tape_group_b, "tape", tape_read, g);
}

void gw_tape_close(struct gw *g)
{
	gw_stream_close(g, &g->tape.s);
}
