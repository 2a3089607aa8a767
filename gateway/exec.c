/* The execution streams (matchers -> gateway), one per partition, and the
 * per-login journals.
 *
 * Every replica of a partition multicasts the same blocks under the same
 * numbers; the first copy of each number wins and later ones are counted as
 * duplicates. A gap is asked for from the partition's replicas'
 * retransmission addresses in turn. A block for one of our logins is
 * appended to that login's journal under the login's next SoupBinTCP
 * sequence number (record: u64 BE tag = partition and exec seq, see
 * GW_TAG, then the OUCH message) and offered to its session. A restart
 * resumes each partition's stream at the highest exec seq journalled for it
 * (or the progress file's, if later).
 *
 * With several partitions the streams also teach the token table: an
 * Accepted, Replaced or Rejected for one of our logins says which partition
 * holds its token, also for an order entered through another gateway. */
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

/* ---- the exec streams ---------------------------------------------------- */

/* Journals one message for login l under its next SoupBinTCP number and
 * offers it to its session. */
static int login_deliver(struct gw *g, struct gw_login *l, uint64_t tag, const uint8_t *msg,
			 size_t mlen)
{
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	int rc;

	if (mlen > GW_MAX_EXEC_MSG)
		return -EMSGSIZE;
	wire_put_u64(rec, tag);
	memcpy(rec + 8, msg, mlen);
	rc = journal_append(l->j, l->next_seq, 0, rec, 8 + mlen);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal append %" PRIu64 ": %s",
				l->cred.login, l->next_seq, strerror(-rc));
		return rc;
	}
	gw_session_offer(l, l->next_seq, rec + 8, mlen);
	l->next_seq++;
	if (!l->jdirty) {
		l->jdirty = 1;
		l->next_jdirty = g->jdirty;
		g->jdirty = l;
	}
	return 0;
}

int gw_exec_local(struct gw *g, struct gw_login *l, const uint8_t *msg, size_t len)
{
	return login_deliver(g, l, GW_TAG((uint64_t)GW_TAG_LOCAL, 0), msg, len);
}

/* An Accepted, Replaced or Rejected for login l from partition p: its
 * token (the replacement token of a Replaced) lives in p. The token is at
 * the same place in all three: type, u64 timestamp, token. */
static void learn_token(struct gw *g, struct gw_login *l, unsigned p, const uint8_t *msg,
			size_t len)
{
	int rc;

	if (len < 1 + 8 + 14 || (msg[0] != OUCH_ACCEPTED && msg[0] != OUCH_REPLACED &&
				 msg[0] != OUCH_REJECTED))
		return;
	rc = gw_route_add(g->routes, gw_login_id(g, l), (const char *)msg + 9, 14, p, 1);
	if (rc == -ENOSPC) {
		g->st.tokens_full++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"token table full ([gateway] max_tokens): %s's token %.14s "
				"not remembered", l->cred.login, (const char *)msg + 9);
	}
}

static void exec_block(struct gw_part *x, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct gw *g = x->gw;
	struct gw_login *l;
	size_t mlen;

	g->st.exec_blocks++;
	if (len <= WIRE_EXEC_HDR_LEN || len - WIRE_EXEC_HDR_LEN > GW_MAX_EXEC_MSG) {
		g->st.exec_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "exec %u: block %" PRIu64 " of %u bytes",
				x->index, seq, len);
		return;
	}
	l = gw_login_find(g, data + 8, WIRE_USER_LEN);
	if (!l) {
		g->st.exec_foreign++;
		return;
	}
	if (seq <= l->last_exec[x->index])
		return; /* journalled before a restart */
	mlen = len - WIRE_EXEC_HDR_LEN;
	if (g->n_parts > 1)
		learn_token(g, l, x->index, data + WIRE_EXEC_HDR_LEN, mlen);
	if (login_deliver(g, l, GW_TAG(x->index, seq), data + WIRE_EXEC_HDR_LEN, mlen) < 0)
		return;
	l->last_exec[x->index] = seq;
	g->st.exec_routed++;
}

/* rx delivers exec block seq of partition ctx, the next in order. */
static int exec_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct gw_part *x = ctx;

	exec_block(x, seq, data, len);
	x->exec.next = seq + 1;
	return RX_TAKEN;
}

static void exec_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	gw_stream_request(&((struct gw_part *)ctx)->exec, server, seq, count);
}

/* No replica's ring holds [from, to) any more: those clients' answers are
 * gone. Say so loudly and go on (the sessions keep their numbering). */
static int exec_lost(void *ctx, uint64_t from, uint64_t to)
{
	log_err("exec %u: %" PRIu64 "..%" PRIu64 ": no matcher replica holds them any more: "
		"the client answers among them are lost",
		((struct gw_part *)ctx)->index, from, to - 1);
	return 1;
}

static const struct rx_ops exec_ops = { exec_deliver, exec_request, exec_lost };

/* A datagram of partition x's exec stream, or (answer) on its request
 * socket from `from`: a retransmission, or the too-old answer (a heartbeat). */
static void exec_packet(struct gw_part *x, const uint8_t *buf, size_t len, int answer,
			const struct sockaddr_in *from, uint64_t now)
{
	struct gw *g = x->gw;
	struct gw_stream *e = &x->exec;
	struct mold_packet pkt;
	int rc;

	if (rx_drop(answer ? &e->req_drop : &e->drop, buf, len))
		return;
	rc = mold_parse(buf, len, &e->sess, 0, &pkt);
	if (rc < 0) {
		g->st.exec_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "exec %u: dropped packet: %s", x->index,
				mold_strerror(rc));
		return;
	}
	g->st.exec_packets++;
	if (answer) {
		if (pkt.kind == MOLD_END_OF_SESSION)
			return;
		if (pkt.kind == MOLD_HEARTBEAT) {
			char what[24];

			g->st.exec_too_old++;
			snprintf(what, sizeof(what), "exec %u", x->index);
			rxpath_too_old(e->rx, rxpath_server(e->retrans, e->n_retrans, from), what, from,
				       pkt.seq, now);
			if (rx_next(e->rx) > e->next)
				e->next = rx_next(e->rx); /* past a hole given up */
			return;
		}
	} else {
		e->live = 1;
	}
	rx_packet(e->rx, &pkt, now);
}

void gw_exec_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_part *x = w->data;
	struct gw *g = x->gw;
	int answer = w == &x->exec.req_io;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n = net_batch_recv_counted(&g->rx, w->fd, answer ? &x->exec.req_rxq : &x->exec.rxq);
		uint64_t now = mono_ns();

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			exec_packet(x, net_batch_slot(&g->rx, (unsigned)i), g->rx.lens[i], answer,
				    &g->rx.addrs[i], now);
		if ((unsigned)n < g->rx.n)
			break;
	}
	gw_stream_arm(g);
}

int gw_exec_live(const struct gw *g)
{
	for (unsigned p = 0; p < g->n_parts; p++)
		if (!g->parts[p].exec.live)
			return 0;
	return g->n_parts > 0;
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

/* One partition: the highest exec seq journalled for each partition, from
 * the last record of that partition (usually the last record: the
 * gateway's own messages are skipped). */
static int scan_back(struct gw *g, struct gw_login *l, const char *path)
{
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	uint64_t first = journal_first_seq(l->j);

	for (uint64_t seq = journal_last_seq(l->j); seq && seq >= first; seq--) {
		int rc = journal_read(l->j, seq, rec, sizeof(rec), NULL);
		uint64_t tag;

		if (rc < 8) {
			log_err("%s: record %" PRIu64 " unreadable", path, seq);
			return rc < 0 ? rc : -EBADMSG;
		}
		tag = wire_get_u64(rec);
		if (tag >> GW_TAG_SHIFT == 0) {
			l->last_exec[0] = tag;
			return 0;
		}
	}
	return 0;
}

/* Several partitions: every record, for the highest exec seq of each
 * partition (their records interleave) and the tokens the partitions
 * answered for (see learn_token). Start-up only: journal_open has just
 * read all of it once to check it. */
static int scan_all(struct gw *g, struct gw_login *l, const char *path)
{
	struct journal_iter *it;
	const uint8_t *data;
	uint64_t seq, term;
	size_t len;
	int rc = journal_iter_open(&it, l->j, journal_first_seq(l->j));

	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	while ((rc = journal_iter_next(it, &seq, &term, &data, &len)) > 0) {
		uint64_t tag;
		unsigned p;

		if (len < 8)
			continue;
		tag = wire_get_u64(data);
		p = (unsigned)(tag >> GW_TAG_SHIFT);
		if (p >= g->n_parts)
			continue; /* ours, or a partition no longer configured */
		if ((tag & GW_TAG_SEQ_MASK) > l->last_exec[p])
			l->last_exec[p] = tag & GW_TAG_SEQ_MASK;
		learn_token(g, l, p, data + 8, len - 8);
	}
	journal_iter_close(it);
	if (rc < 0)
		log_err("%s: %s", path, strerror(-rc));
	return rc;
}

static int open_login(struct gw *g, struct gw_login *l, const char *dir)
{
	struct journal_options jo = { .fsync = (enum journal_fsync)g->cfg.fsync };
	struct journal_report rep;
	char path[320];
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
	l->next_seq = l->flushed_next = journal_last_seq(l->j) + 1;
	if (journal_last_seq(l->j)) {
		rc = g->n_parts > 1 ? scan_all(g, l, path) : scan_back(g, l, path);
		if (rc < 0)
			return rc;
	}
	for (unsigned p = 0; p < g->n_parts; p++)
		if (l->last_exec[p] + 1 > g->parts[p].exec.next)
			g->parts[p].exec.next = l->last_exec[p] + 1;
	return 0;
}

static int open_exec_sockets(struct gw_part *x)
{
	struct gw *g = x->gw;
	const struct gw_part_config *pc = &g->cfg.part[x->index];
	struct gw_stream *e = &x->exec;
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group, any = { .sin_family = AF_INET };
	char list[sizeof(pc->exec_retrans)], *save = NULL, what[48];
	struct net_bufsize rcv;
	int rc;

	if (net_parse_addr(pc->exec_group, &group) < 0) {
		log_err("partition %u: exec_group \"%s\": not host:port", x->index, pc->exec_group);
		return -EINVAL;
	}
	memcpy(list, pc->exec_retrans, sizeof(list));
	for (char *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		if (e->n_retrans == GW_MAX_EXEC_RETRANS ||
		    net_parse_addr(t, &e->retrans[e->n_retrans]) < 0) {
			log_err("partition %u: exec_retrans: \"%s\": not host:port (at most %d)",
				x->index, t, GW_MAX_EXEC_RETRANS);
			return -EINVAL;
		}
		e->n_retrans++;
	}
	if (e->n_retrans == 0) {
		log_err("partition %u: exec_retrans: no address", x->index);
		return -EINVAL;
	}
	rc = gw_stream_open(g, e, &exec_ops, x, g->cfg.reorder_bytes ? g->cfg.reorder_bytes
								    : 8u << 20,
			    e->n_retrans, e->next);
	if (rc < 0) {
		log_err("exec %u receiver: %s", x->index, strerror(-rc));
		return rc;
	}
	e->fd = net_mcast_recv_open(&group, g->cfg.tape_iface, &opt, &rcv);
	if (e->fd < 0) {
		log_err("exec %u: %s on %s: %s", x->index, pc->exec_group, g->cfg.tape_iface,
			strerror(-e->fd));
		return e->fd;
	}
	snprintf(what, sizeof(what), "exec stream %u", x->index);
	rxpath_bufsize_check(what, &rcv);
	e->req_fd = net_udp_open(&any, &opt, &rcv, NULL);
	if (e->req_fd < 0) {
		log_err("exec %u request socket: %s", x->index, strerror(-e->req_fd));
		return e->req_fd;
	}
	snprintf(what, sizeof(what), "exec %u request socket", x->index);
	rxpath_bufsize_check(what, &rcv);
	ev_io_init(&e->io, gw_exec_read, e->fd, EV_READ);
	ev_io_init(&e->req_io, gw_exec_read, e->req_fd, EV_READ);
	e->io.data = e->req_io.data = x;
	ev_io_start(g->loop, &e->io);
	ev_io_start(g->loop, &e->req_io);
	return 0;
}

/* The loss generator of partition p's two sockets: partition 0 keeps the
 * seeds it always had. */
static uint64_t exec_drop_seed(const struct gw *g, unsigned p, unsigned k)
{
	uint64_t base = rx_seed_of(g->cfg.node.name, g->cfg.drop_seed);

	return p == 0 ? base + 10 + k : base + 20 + 2 * p + k;
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
	for (unsigned p = 0; p < g->n_parts; p++) {
		struct gw_part *x = &g->parts[p];

		if (x->exec.next == 0)
			x->exec.next = 1;
		if (mold_session_set(&x->exec.sess, g->cfg.part[p].exec_session) < 0) {
			log_err("partition %u: exec_session \"%s\": 1 to 10 printable characters",
				p, g->cfg.part[p].exec_session);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < g->n_logins; i++) {
		rc = open_login(g, &g->logins[i], dir);
		if (rc < 0)
			return rc;
	}
	/* the loss generator and the jitter of every stream (the tape's is
	 * opened by gw_cmd_open, after this) */
	rxpath_loss_init(&g->rng,
			 (struct rx_drop *const[]){ &g->tape.drop, &g->tape.req_drop, &g->cmd_drop },
			 3, g->cfg.drop_rate, g->cfg.node.name, g->cfg.drop_seed, 12);
	for (unsigned p = 0; p < g->n_parts; p++) {
		rx_drop_init(&g->parts[p].exec.drop, g->cfg.drop_rate, exec_drop_seed(g, p, 0));
		rx_drop_init(&g->parts[p].exec.req_drop, g->cfg.drop_rate, exec_drop_seed(g, p, 1));
	}
	gw_stream_timer_init(g);
	for (unsigned p = 0; p < g->n_parts; p++) {
		rc = open_exec_sockets(&g->parts[p]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int gw_exec_open_login(struct gw *g, struct gw_login *l)
{
	uint64_t next[GW_MAX_PARTITIONS];
	char dir[300];
	int rc;

	for (unsigned p = 0; p < g->n_parts; p++)
		next[p] = g->parts[p].exec.next;
	snprintf(dir, sizeof(dir), "%s/sessions", g->cfg.node.state_dir);
	rc = open_login(g, l, dir);
	for (unsigned p = 0; p < g->n_parts; p++)
		g->parts[p].exec.next = next[p];
	return rc;
}

void gw_exec_close(struct gw *g)
{
	gw_exec_flush(g);
	for (size_t i = 0; g->logins && i < g->n_logins; i++) {
		journal_close(g->logins[i].j);
		g->logins[i].j = NULL;
	}
	for (unsigned p = 0; g->parts && p < g->n_parts; p++)
		gw_stream_close(g, &g->parts[p].exec);
	ev_timer_stop(g->loop, &g->rx_timer);
}
