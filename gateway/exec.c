/* The execution stream (matchers -> gateway) and the per-login journals.
 *
 * Every replica of the partition multicasts the same blocks under the same
 * numbers; the first copy of each number wins and later ones are counted as
 * duplicates. A gap is asked for from the replicas' retransmission addresses
 * in turn. A block for one of our logins is appended to that login's journal
 * under the login's next SoupBinTCP sequence number (record: u64 BE exec seq,
 * then the OUCH message) and offered to its session. A restart resumes at
 * the highest exec seq journalled (or the progress file, if later). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "gw_private.h"
#include "journal.h"
#include "ouch.h"
#include "wire.h"

#define GW_MAX_EXEC_MSG 1024 /* OUCH outbound messages are at most 80 bytes */

/* ---- the receivers' common part ---------------------------------------- */

int gw_stream_open(struct gw *g, struct gw_stream *s, const struct rx_ops *ops,
		   size_t reorder_bytes, unsigned n_servers, uint64_t start)
{
	uint64_t wait = g->cfg.retrans_timeout ? g->cfg.retrans_timeout : 10000000u;
	struct rx_config c = {
		.window = g->cfg.reorder_window ? (uint32_t)g->cfg.reorder_window : 65536,
		.ring_bytes = reorder_bytes,
		.max_count = GW_REQ_MAX_COUNT,
		.delay_ns = g->cfg.request_delay,
		.retry_ns = wait,
		.retry_max_ns = g->cfg.retrans_timeout_max > wait ? g->cfg.retrans_timeout_max : wait,
		.settle_ns = wait / 4, /* answers in flight are not asked again */
		.n_servers = n_servers,
		.rng = &g->rng,
	};
	int rc = rx_create(&s->rx, &c, ops, g);

	if (rc < 0)
		return rc;
	rx_start(s->rx, start);
	return 0;
}

void gw_stream_request(struct gw_stream *s, unsigned server, uint64_t seq, uint16_t count)
{
	struct mold_request r = { s->sess, seq, count };
	uint8_t buf[MOLD_REQUEST_LEN];
	const struct sockaddr_in *dst = &s->retrans[server % s->n_retrans];

	if (s->req_fd < 0)
		return;
	mold_build_request(buf, &r);
	if (sendto(s->req_fd, buf, sizeof(buf), 0, (const struct sockaddr *)dst, sizeof(*dst)) < 0)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "retransmission request: %s",
				strerror(errno));
	log_debug("%.4s: asked for %" PRIu64 "+%u", s->sess.name, seq, count);
}

_Static_assert(GW_MAX_EXEC_RETRANS <= RX_MAX_SERVERS,
	       "an rx server per exec_retrans address");

unsigned gw_stream_server(const struct gw_stream *s, const struct sockaddr_in *from)
{
	unsigned k = 0;

	while (k < s->n_retrans && (s->retrans[k].sin_addr.s_addr != from->sin_addr.s_addr ||
				    s->retrans[k].sin_port != from->sin_port))
		k++;
	return k;
}

static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw *g = (struct gw *)((char *)w - offsetof(struct gw, rx_timer));
	uint64_t now = mono_ns();

	(void)loop;
	(void)revents;
	if (g->tape.rx)
		rx_tick(g->tape.rx, now);
	if (g->exec.rx)
		rx_tick(g->exec.rx, now);
	gw_stream_arm(g);
}

void gw_stream_arm(struct gw *g)
{
	uint64_t due = RX_NEVER, now = mono_ns();

	if (g->tape.rx)
		due = rx_due(g->tape.rx);
	if (g->exec.rx && rx_due(g->exec.rx) < due)
		due = rx_due(g->exec.rx);
	ev_timer_stop(g->loop, &g->rx_timer);
	if (due == RX_NEVER || g->stopping)
		return;
	ev_timer_set(&g->rx_timer, due > now ? (double)(due - now) / 1e9 : 0., 0.);
	ev_timer_start(g->loop, &g->rx_timer);
}

int gw_stream_recv(struct gw *g, int fd, uint64_t *rxq)
{
	int n;

	g->rx.rxq_dropped = 0;
	n = net_batch_recv(&g->rx, fd);
	if (g->rx.rxq_dropped > *rxq)
		*rxq = g->rx.rxq_dropped;
	return n;
}

void gw_rcvbuf_check(const char *what, const struct net_bufsize *b)
{
	if (b->capped)
		log_warn("%s: receive buffer capped at %d bytes (asked %d): raise "
			 "net.core.rmem_max", what, b->granted, b->requested);
}

void gw_stream_stats(struct gw *g)
{
	struct rx_stats t = { 0 }, e = { 0 };
	struct net_udp_stats us = { 0 };

	if (g->tape.rx)
		rx_get_stats(g->tape.rx, &t);
	if (g->exec.rx)
		rx_get_stats(g->exec.rx, &e);
	g->st.tape_gaps = t.gaps;
	g->st.tape_requests = t.requests;
	g->st.tape_held = t.held;
	g->st.tape_skipped = t.lost;
	g->st.exec_gaps = e.gaps;
	g->st.exec_requests = e.requests;
	g->st.exec_dups = e.duplicates;
	g->st.exec_held = e.held;
	g->st.exec_lost = e.lost;
	g->st.drops_injected = g->tape.drop.dropped + g->tape.req_drop.dropped +
			       g->exec.drop.dropped + g->exec.req_drop.dropped + g->cmd_drop.dropped;
	g->st.rxq_dropped = g->tape.rxq + g->tape.req_rxq + g->exec.rxq + g->exec.req_rxq +
			    g->cmd_rxq;
	if (net_udp_stats_read(&us) == 0)
		g->st.kernel_rcvbuf_errors = us.rcvbuf_errors;
}

/* ---- the exec stream ------------------------------------------------------ */

static void exec_block(struct gw *g, uint64_t seq, const uint8_t *data, uint16_t len)
{
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	struct gw_login *l;
	size_t mlen;
	int rc;

	g->st.exec_blocks++;
	if (len <= WIRE_EXEC_HDR_LEN || len - WIRE_EXEC_HDR_LEN > GW_MAX_EXEC_MSG) {
		g->st.exec_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "exec %" PRIu64 ": block of %u bytes", seq,
				len);
		return;
	}
	l = gw_login_find(g, data + 8, WIRE_USER_LEN);
	if (!l) {
		g->st.exec_foreign++;
		return;
	}
	if (seq <= l->last_exec)
		return; /* journalled before a restart */
	mlen = len - WIRE_EXEC_HDR_LEN;
	wire_put_u64(rec, seq);
	memcpy(rec + 8, data + WIRE_EXEC_HDR_LEN, mlen);
	rc = journal_append(l->j, l->next_seq, 0, rec, 8 + mlen);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal append %" PRIu64 ": %s",
				l->cred.login, l->next_seq, strerror(-rc));
		return;
	}
	gw_session_offer(l, l->next_seq, rec + 8, mlen);
	l->next_seq++;
	l->last_exec = seq;
	if (!l->jdirty) {
		l->jdirty = 1;
		l->next_jdirty = g->jdirty;
		g->jdirty = l;
	}
	g->st.exec_routed++;
}

/* rx delivers exec block seq, the next in order. */
static int exec_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct gw *g = ctx;

	exec_block(g, seq, data, len);
	g->exec.next = seq + 1;
	return RX_TAKEN;
}

static void exec_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	gw_stream_request(&((struct gw *)ctx)->exec, server, seq, count);
}

/* No replica's ring holds [from, to) any more: those clients' answers are
 * gone. Say so loudly and go on (the sessions keep their numbering). */
static int exec_lost(void *ctx, uint64_t from, uint64_t to)
{
	(void)ctx;
	log_err("exec %" PRIu64 "..%" PRIu64 ": no matcher replica holds them any more: "
		"the client answers among them are lost",
		from, to - 1);
	return 1;
}

static const struct rx_ops exec_ops = { exec_deliver, exec_request, exec_lost };

/* A datagram of the exec stream, or (answer) on the request socket from
 * `from`: a retransmission, or the too-old answer (a heartbeat). */
static void exec_packet(struct gw *g, const uint8_t *buf, size_t len, int answer,
			const struct sockaddr_in *from, uint64_t now)
{
	struct mold_packet pkt;
	int rc;

	if (rx_drop(answer ? &g->exec.req_drop : &g->exec.drop, buf, len))
		return;
	rc = mold_parse(buf, len, &g->exec.sess, 0, &pkt);
	if (rc < 0) {
		g->st.exec_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "exec: dropped packet: %s",
				mold_strerror(rc));
		return;
	}
	g->st.exec_packets++;
	if (answer) {
		if (pkt.kind == MOLD_END_OF_SESSION)
			return;
		if (pkt.kind == MOLD_HEARTBEAT) {
			/* an unknown sender is counted, and tells rx nothing */
			unsigned server = gw_stream_server(&g->exec, from);

			g->st.exec_too_old++;
			log_ratelimited(&gw_rl, LOG_LVL_WARNING,
					"exec: a replica holds nothing below %" PRIu64, pkt.seq);
			rx_too_old(g->exec.rx, server, pkt.seq, now);
			if (rx_next(g->exec.rx) > g->exec.next)
				g->exec.next = rx_next(g->exec.rx); /* past a hole given up */
			return;
		}
	} else {
		g->exec.live = 1;
	}
	rx_packet(g->exec.rx, &pkt, now);
}

void gw_exec_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;
	int answer = w == &g->exec.req_io;

	(void)loop;
	(void)revents;
	for (int round = 0; round < 8; round++) {
		int n = gw_stream_recv(g, w->fd, answer ? &g->exec.req_rxq : &g->exec.rxq);
		uint64_t now = mono_ns();

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			exec_packet(g, net_batch_slot(&g->rx, (unsigned)i), g->rx.lens[i], answer,
				    &g->rx.addrs[i], now);
		if ((unsigned)n < g->rx.n)
			break;
	}
	gw_stream_arm(g);
}

/* Writes the journals appended to in this iteration, then lets their
 * sessions replay what became readable. */
void gw_exec_flush(struct gw *g)
{
	while (g->jdirty) {
		struct gw_login *l = g->jdirty;
		int rc = journal_flush(l->j);

		g->jdirty = l->next_jdirty;
		l->jdirty = 0;
		if (rc < 0) {
			g->st.journal_errors++;
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal flush: %s", l->cred.login,
					strerror(-rc));
			continue;
		}
		l->flushed_next = l->next_seq;
		if (l->sess)
			gw_session_wake(l->sess);
	}
}

/* ---- open and close ------------------------------------------------------ */

static int open_login(struct gw *g, struct gw_login *l, const char *dir)
{
	struct journal_options jo = { .fsync = (enum journal_fsync)g->cfg.fsync };
	struct journal_report rep;
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	char path[320];
	uint64_t last;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, l->cred.login);
	rc = journal_open(&l->j, path, &jo, &rep);
	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (rep.cut_bytes || rep.cut_segments)
		log_warn("%s: cut %" PRIu64 " bytes at seq %" PRIu64 " (%s)", path, rep.cut_bytes,
			 rep.bad_seq, rep.bad_reason ? rep.bad_reason : "?");
	last = journal_last_seq(l->j);
	l->next_seq = l->flushed_next = last + 1;
	if (last) {
		rc = journal_read(l->j, last, rec, sizeof(rec), NULL);
		if (rc < 8) {
			log_err("%s: last record %" PRIu64 " unreadable", path, last);
			return rc < 0 ? rc : -EBADMSG;
		}
		l->last_exec = wire_get_u64(rec);
	}
	if (l->last_exec + 1 > g->exec.next)
		g->exec.next = l->last_exec + 1;
	return 0;
}

static int open_exec_sockets(struct gw *g)
{
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group, any = { .sin_family = AF_INET };
	char list[sizeof(g->cfg.exec_retrans)], *save = NULL;
	struct net_bufsize rcv;
	int rc;

	if (net_parse_addr(g->cfg.exec_group, &group) < 0) {
		log_err("[gateway] exec_group \"%s\": not host:port", g->cfg.exec_group);
		return -EINVAL;
	}
	memcpy(list, g->cfg.exec_retrans, sizeof(list));
	for (char *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		if (g->exec.n_retrans == GW_MAX_EXEC_RETRANS ||
		    net_parse_addr(t, &g->exec.retrans[g->exec.n_retrans]) < 0) {
			log_err("[gateway] exec_retrans: \"%s\": not host:port (at most %d)", t,
				GW_MAX_EXEC_RETRANS);
			return -EINVAL;
		}
		g->exec.n_retrans++;
	}
	rc = gw_stream_open(g, &g->exec, &exec_ops, g->cfg.reorder_bytes ? g->cfg.reorder_bytes
									  : 8u << 20,
			    g->exec.n_retrans, g->exec.next);
	if (rc < 0) {
		log_err("exec receiver: %s", strerror(-rc));
		return rc;
	}
	g->exec.fd = net_mcast_recv_open(&group, g->cfg.tape_iface, &opt, &rcv);
	if (g->exec.fd < 0) {
		log_err("exec %s on %s: %s", g->cfg.exec_group, g->cfg.tape_iface,
			strerror(-g->exec.fd));
		return g->exec.fd;
	}
	gw_rcvbuf_check("exec stream", &rcv);
	g->exec.req_fd = net_udp_open(&any, &opt, &rcv, NULL);
	if (g->exec.req_fd < 0) {
		log_err("exec request socket: %s", strerror(-g->exec.req_fd));
		return g->exec.req_fd;
	}
	gw_rcvbuf_check("exec request socket", &rcv);
	ev_io_init(&g->exec.io, gw_exec_read, g->exec.fd, EV_READ);
	ev_io_init(&g->exec.req_io, gw_exec_read, g->exec.req_fd, EV_READ);
	g->exec.io.data = g->exec.req_io.data = g;
	ev_io_start(g->loop, &g->exec.io);
	ev_io_start(g->loop, &g->exec.req_io);
	return 0;
}

int gw_exec_open(struct gw *g)
{
	char dir[300];
	int rc;

	snprintf(dir, sizeof(dir), "%s/sessions", g->cfg.node.state_dir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		log_err("%s: %s", dir, strerror(errno));
		return -errno;
	}
	if (g->exec.next == 0)
		g->exec.next = 1;
	for (size_t i = 0; i < g->n_logins; i++) {
		rc = open_login(g, &g->logins[i], dir);
		if (rc < 0)
			return rc;
	}
	/* the loss generator and the jitter of both streams (the tape's is
	 * opened by gw_cmd_open, after this) */
	rx_rng_seed(&g->rng, rx_seed_of(g->cfg.node.name, g->cfg.drop_seed));
	rx_drop_init(&g->exec.drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 10);
	rx_drop_init(&g->exec.req_drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 11);
	rx_drop_init(&g->tape.drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 12);
	rx_drop_init(&g->tape.req_drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 13);
	rx_drop_init(&g->cmd_drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 14);
	if (g->cfg.drop_rate > 0)
		log_warn("loss generator on: %.4f of received datagrams thrown away (seed %" PRIu64
			 ")", g->cfg.drop_rate, g->cfg.drop_seed);
	ev_init(&g->rx_timer, on_rx_timer);
	return open_exec_sockets(g);
}

int gw_exec_open_login(struct gw *g, struct gw_login *l)
{
	uint64_t next = g->exec.next;
	char dir[300];
	int rc;

	snprintf(dir, sizeof(dir), "%s/sessions", g->cfg.node.state_dir);
	rc = open_login(g, l, dir);
	g->exec.next = next;
	return rc;
}

void gw_exec_close(struct gw *g)
{
	gw_exec_flush(g);
	for (size_t i = 0; g->logins && i < g->n_logins; i++) {
		journal_close(g->logins[i].j);
		g->logins[i].j = NULL;
	}
	if (g->exec.fd >= 0) {
		ev_io_stop(g->loop, &g->exec.io);
		close(g->exec.fd);
		g->exec.fd = -1;
	}
	if (g->exec.req_fd >= 0) {
		ev_io_stop(g->loop, &g->exec.req_io);
		close(g->exec.req_fd);
		g->exec.req_fd = -1;
	}
	ev_timer_stop(g->loop, &g->rx_timer);
	rx_destroy(g->exec.rx);
	g->exec.rx = NULL;
}
