/* The received MoldUDP64 streams (the tape, the exec streams): their
 * receivers (common/rx.h), requests, shared timer and counters. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "gw_private.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

int gw_stream_open(struct gw *g, struct gw_stream *s, const struct rx_ops *ops, void *ctx,
		   size_t reorder_bytes, unsigned n_servers, uint64_t start, int ab)
{
	uint64_t wait = g->cfg.retrans_timeout ? g->cfg.retrans_timeout : 10000000u;
	struct rx_config c = {
		.window = g->cfg.reorder_window ? (uint32_t)g->cfg.reorder_window : 65536,
		.ring_bytes = reorder_bytes,
		.max_count = GW_REQ_MAX_COUNT,
		/* A/B: B's copy first gets a chance to fill a gap */
		.hold_ns = ab ? g->cfg.ab_wait : 0,
		.delay_ns = g->cfg.request_delay,
		.retry_ns = wait,
		.retry_max_ns = g->cfg.retrans_timeout_max > wait ? g->cfg.retrans_timeout_max : wait,
		.settle_ns = wait / 4, /* answers in flight are not asked again */
		.n_servers = n_servers,
		.n_near = s->n_near,
		.rng = &g->streams.rng,
	};
	int rc = rx_create(&s->rx, &c, ops, ctx);

	if (rc < 0)
		return rc;
	rx_start(s->rx, start);
	return 0;
}

void gw_stream_send_request(struct gw_stream *s, unsigned server, const struct mold_request *r)
{
	uint8_t buf[AUTH_CONTROL_MAX];
	const struct sockaddr_in *dst = &s->retrans[server % s->n_retrans];
	size_t n;

	if (s->req_fd < 0)
		return;
	n = auth_node_request(buf, r);
	if (sendto(s->req_fd, buf, n, 0, (const struct sockaddr *)dst, sizeof(*dst)) < 0)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "retransmission request: %s",
				strerror(errno));
	log_debug("%.10s: asked for %" PRIu64 "+%u", r->session.name, r->seq, r->count);
}

void gw_stream_request(struct gw_stream *s, unsigned server, uint64_t seq, uint16_t count)
{
	struct mold_request r = { s->sess, seq, count };

	gw_stream_send_request(s, server, &r);
}

_Static_assert(GW_MAX_EXEC_RETRANS == RX_MAX_SERVERS,
	       "an rx server per exec_retrans address");

static void ab_drain(struct ev_loop *loop, struct gw_stream *s)
{
	if (s->fd_b < 0 || !s->rx)
		return;
	ev_invoke(loop, &s->io_b, EV_READ);
	ev_invoke(loop, &s->io, EV_READ);
}

static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw *g = container_of(w, struct gw, streams.timer);
	uint64_t now = mono_ns();

	(void)revents;
	/* A/B: what both networks' sockets hold is read first (the other
	 * network's copy may wait there behind a busy moment), so that only a
	 * datagram lost on both is asked for */
	for (unsigned k = 0; k < g->n_tapes; k++)
		ab_drain(loop, &g->tape[k].s);
	for (unsigned p = 0; p < g->n_parts; p++)
		ab_drain(loop, &g->exec.parts[p].exec);
	now = mono_ns();
	for (unsigned k = 0; k < g->n_tapes; k++)
		if (g->tape[k].s.rx)
			rx_tick(g->tape[k].s.rx, now);
	for (unsigned p = 0; p < g->n_parts; p++)
		if (g->exec.parts[p].exec.rx)
			rx_tick(g->exec.parts[p].exec.rx, now);
	gw_stream_arm(g);
}

int gw_stream_init(struct gw *g)
{
	/* the jitter of every stream; the loss generators are seeded from the
	 * same base by their owners (12 and up) */
	rxpath_loss_init(&g->streams.rng, NULL, 0, g->cfg.drop_rate, g->cfg.node.name,
			 g->cfg.drop_seed, 12);
	ev_init(&g->streams.timer, on_rx_timer);
	return net_batch_init(&g->streams.rx, (unsigned)g->cfg.recv_batch, MOLD_MAX_PACKET) < 0
		       ? -ENOMEM
		       : 0;
}

void gw_stream_fini(struct gw *g)
{
	ev_timer_stop(g->loop, &g->streams.timer);
	net_batch_fini(&g->streams.rx);
}

void gw_stream_arm(struct gw *g)
{
	uint64_t due = RX_NEVER;

	for (unsigned k = 0; k < g->n_tapes; k++)
		due = rxpath_due_min(due, g->tape[k].s.rx);

	for (unsigned p = 0; p < g->n_parts; p++)
		due = rxpath_due_min(due, g->exec.parts[p].exec.rx);
	rxpath_arm(g->loop, &g->streams.timer, g->stopping ? RX_NEVER : due, mono_ns());
}

/* The exec counters are the sums over the partitions. */
void gw_stream_stats(struct gw *g)
{
	struct net_udp_stats us = { 0 };

	g->st.tape_gaps = g->st.tape_requests = g->st.tape_held = g->st.tape_skipped = 0;
	g->st.unbelievable = g->st.drops_injected = g->st.rxq_dropped = 0;
	g->st.tape_first_a = g->st.tape_first_b = 0;
	for (unsigned k = 0; k < g->n_tapes; k++) {
		const struct gw_stream *x = &g->tape[k].s;
		const struct gw_cmd *c = &g->cmd[k];
		struct rx_stats t = { 0 };

		if (x->rx)
			rx_get_stats(x->rx, &t);
		g->st.tape_gaps += t.gaps;
		g->st.tape_requests += t.requests;
		g->st.tape_held += t.held;
		g->st.tape_skipped += t.lost;
		g->st.unbelievable += t.unbelievable;
		g->st.drops_injected += x->drop.dropped + x->req_drop.dropped + c->drop.dropped;
		g->st.rxq_dropped += x->rxq + x->req_rxq + x->rxq_b + c->rxq;
		g->st.tape_first_a += x->first.first[AB_A];
		g->st.tape_first_b += x->first.first[AB_B];
	}
	g->st.exec_gaps = g->st.exec_requests = g->st.exec_dups = 0;
	g->st.exec_held = g->st.exec_lost = 0;
	g->st.exec_first_a = g->st.exec_first_b = 0;
	for (unsigned p = 0; p < g->n_parts; p++) {
		const struct gw_stream *x = &g->exec.parts[p].exec;
		struct rx_stats e = { 0 };

		if (x->rx)
			rx_get_stats(x->rx, &e);
		g->st.exec_gaps += e.gaps;
		g->st.exec_requests += e.requests;
		g->st.exec_dups += e.duplicates;
		g->st.exec_held += e.held;
		g->st.unbelievable += e.unbelievable;
		g->st.exec_lost += e.lost;
		g->st.drops_injected += x->drop.dropped + x->req_drop.dropped;
		g->st.rxq_dropped += x->rxq + x->req_rxq + x->rxq_b;
		g->st.exec_first_a += x->first.first[AB_A];
		g->st.exec_first_b += x->first.first[AB_B];
	}
	if (net_udp_stats_read(&us) == 0)
		g->st.kernel_rcvbuf_errors = us.rcvbuf_errors;
}

void gw_stream_drain(struct gw *g, struct gw_stream *s, const ev_io *w,
		     gw_stream_packet_fn *packet, void *ctx)
{
	struct net_batch *rx = &g->streams.rx;
	int answer = w == &s->req_io;
	enum ab_side side = w == &s->io_b ? AB_B : AB_A;
	uint64_t *rxq = answer ? &s->req_rxq : side == AB_B ? &s->rxq_b : &s->rxq;

	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n = net_batch_recv_counted(rx, w->fd, rxq);
		uint64_t now = g->stages.now = mono_ns();

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			uint8_t *buf = net_batch_slot(rx, (unsigned)i);
			size_t len = rx->lens[i];
			uint64_t fresh;

			if (auth_node_check(s->surface, buf, &len, 0, &rx->addrs[i]) < 0)
				continue;
			fresh = ab_first_before(s->rx);
			packet(ctx, buf, len, answer, &rx->addrs[i], now);
			if (!answer)
				ab_first_after(&s->first, s->rx, side, fresh);
		}
		if ((unsigned)n < rx->n)
			break;
	}
	gw_stream_arm(g);
}

int gw_stream_open_b(struct gw *g, struct gw_stream *s, const char *group_text, const char *what,
		     void (*cb)(struct ev_loop *, ev_io *, int), void *data)
{
	const char *iface = *g->cfg.tape_iface_b ? g->cfg.tape_iface_b : g->cfg.tape_iface;
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group;
	struct net_bufsize rcv;
	char label[64];

	s->fd_b = -1;
	if (!*group_text)
		return 0;
	if (net_parse_addr(group_text, &group) < 0) {
		log_err("%s: group \"%s\" on network B: not host:port", what, group_text);
		return -EINVAL;
	}
	s->fd_b = net_mcast_recv_open(&group, iface, &opt, &rcv);
	if (s->fd_b < 0) {
		log_err("%s: %s on %s (network B): %s", what, group_text, iface, strerror(-s->fd_b));
		return s->fd_b;
	}
	snprintf(label, sizeof(label), "%s on network B", what);
	rxpath_bufsize_check(label, &rcv);
	ev_io_init(&s->io_b, cb, s->fd_b, EV_READ);
	ev_set_priority(&s->io_b, ev_priority(&s->io)); /* as network A's */
	s->io_b.data = data;
	ev_io_start(g->loop, &s->io_b);
	log_info("A/B: %s also from %s on %s", what, group_text, iface);
	return 0;
}

/* Why addrlist_parse refused a list. */
const char *gw_stream_addr_error(int rc, char *buf, size_t cap, int max)
{
	if (rc == -E2BIG)
		snprintf(buf, cap, "more than %d addresses", max);
	else if (rc == -EINVAL)
		snprintf(buf, cap, "not a comma-separated list of host:port");
	else
		snprintf(buf, cap, "%s", strerror(-rc));
	return buf;
}

void gw_stream_close(struct gw *g, struct gw_stream *e)
{
	if (e->fd >= 0) {
		ev_io_stop(g->loop, &e->io);
		close(e->fd);
		e->fd = -1;
	}
	if (e->req_fd >= 0) {
		ev_io_stop(g->loop, &e->req_io);
		close(e->req_fd);
		e->req_fd = -1;
	}
	if (e->fd_b >= 0) {
		ev_io_stop(g->loop, &e->io_b);
		close(e->fd_b);
		e->fd_b = -1;
	}
	rx_destroy(e->rx);
	e->rx = NULL;
}
