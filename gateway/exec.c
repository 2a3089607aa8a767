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

#include "gw_private.h"
#include "journal.h"
#include "ouch.h"
#include "wire.h"

#define GW_MAX_EXEC_MSG 1024 /* OUCH outbound messages are at most 80 bytes */

void gw_stream_request(struct gw *g, struct gw_stream *s, ev_tstamp now)
{
	struct mold_request r = { s->sess, s->next, 0 };
	uint8_t buf[MOLD_REQUEST_LEN];
	const struct sockaddr_in *dst;
	uint64_t want = s->high - s->next;

	if (s->n_retrans == 0 || s->req_fd < 0 || s->next >= s->high)
		return;
	r.count = (uint16_t)(want < GW_REQ_MAX_COUNT ? want : GW_REQ_MAX_COUNT);
	dst = &s->retrans[s->rr++ % s->n_retrans];
	mold_build_request(buf, &r);
	if (sendto(s->req_fd, buf, sizeof(buf), 0, (const struct sockaddr *)dst, sizeof(*dst)) < 0)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "retransmission request: %s",
				strerror(errno));
	s->req_at = now;
	if (s == &g->tape)
		g->st.tape_requests++;
	else
		g->st.exec_requests++;
	log_debug("%s: asked for %" PRIu64 "+%u", s == &g->tape ? "tape" : "exec", r.seq, r.count);
}

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

static void exec_packet(struct gw *g, const uint8_t *buf, size_t len)
{
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq, end;
	uint16_t blen;
	int rc = mold_parse(buf, len, &g->exec.sess, 0, &pkt);

	if (rc < 0) {
		g->st.exec_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "exec: dropped packet: %s",
				mold_strerror(rc));
		return;
	}
	g->st.exec_packets++;
	g->exec.live = 1;
	end = pkt.kind == MOLD_DATA ? pkt.seq + pkt.count : pkt.seq;
	if (end > g->exec.high)
		g->exec.high = end;
	if (pkt.kind != MOLD_DATA)
		return;
	if (end <= g->exec.next) {
		g->st.exec_dups += pkt.count;
		return;
	}
	if (pkt.seq > g->exec.next) {
		/* go-back-N: the gap is asked for, this packet comes again */
		g->st.exec_gaps++;
		if (ev_now(g->loop) - g->exec.req_at >= (ev_tstamp)g->cfg.retrans_timeout / 1e9)
			gw_stream_request(g, &g->exec, ev_now(g->loop));
		return;
	}
	mold_iter_init(&it, &pkt);
	while (mold_iter_next(&it, &seq, &data, &blen)) {
		if (seq < g->exec.next) {
			g->st.exec_dups++;
			continue;
		}
		exec_block(g, seq, data, blen);
		g->exec.next = seq + 1;
	}
	if (g->exec.next >= g->exec.high)
		g->exec.req_at = 0;
}

void gw_exec_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;

	(void)loop;
	(void)revents;
	for (int round = 0; round < 8; round++) {
		int n = net_batch_recv(&g->rx, w->fd);

		if (n <= 0)
			return;
		for (int i = 0; i < n; i++)
			exec_packet(g, net_batch_slot(&g->rx, (unsigned)i), g->rx.lens[i]);
		if ((unsigned)n < g->rx.n)
			return;
	}
}

void gw_exec_tick(struct gw *g, ev_tstamp now)
{
	if (g->exec.next < g->exec.high &&
	    now - g->exec.req_at >= (ev_tstamp)g->cfg.retrans_timeout / 1e9)
		gw_stream_request(g, &g->exec, now);
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
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf };
	struct sockaddr_in group, any = { .sin_family = AF_INET };
	char list[sizeof(g->cfg.exec_retrans)], *save = NULL;

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
	g->exec.fd = net_mcast_recv_open(&group, g->cfg.tape_iface, &opt, NULL);
	if (g->exec.fd < 0) {
		log_err("exec %s on %s: %s", g->cfg.exec_group, g->cfg.tape_iface,
			strerror(-g->exec.fd));
		return g->exec.fd;
	}
	g->exec.req_fd = net_udp_open(&any, &opt, NULL, NULL);
	if (g->exec.req_fd < 0) {
		log_err("exec request socket: %s", strerror(-g->exec.req_fd));
		return g->exec.req_fd;
	}
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
	g->exec.high = g->exec.next;
	return open_exec_sockets(g);
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
}
