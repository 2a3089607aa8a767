/* The execution streams (matchers -> gateway), one per partition, and the
 * per-login journals' positions in them.
 *
 * Every replica of a partition multicasts the same blocks under the same
 * numbers; the first copy of each number wins and later ones are counted as
 * duplicates. A gap is asked for from the partition's replicas'
 * retransmission addresses in turn. A block for one of our logins is
 * appended to that login's journal under the login's next SoupBinTCP
 * sequence number (record: u64 BE tag = partition and exec seq, see
 * GW_TAG, then the OUCH message) and offered to its reader (logins.c). A restart
 * resumes each partition's stream at the highest exec seq journalled for it
 * (or the progress file's, if later).
 *
 * With several partitions the streams also teach the token table: an
 * Accepted, Replaced or Rejected for one of our logins says which partition
 * holds its token, also for an order entered through another gateway, and
 * every message that takes shares says when its order dies, so that the
 * table can forget it in its turn. */
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

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

/* ---- the exec streams ---------------------------------------------------- */

/* Login l's highest exec seq journalled, per partition. */
static uint64_t *last_exec(struct gw *g, const struct gw_login *l)
{
	return g->exec.last_exec[gw_login_id(l)];
}

/* A message for login l from partition p: it says where a token lives
 * (an Accepted, Replaced or Rejected names one, also for an order entered
 * through another gateway) and when an order dies (route_tokens.c). */
static void learn_token(struct gw *g, struct gw_login *l, unsigned p, const uint8_t *msg,
			size_t len)
{
	struct ouch_msg m;

	if (ouch_decode_outbound(msg, len, &m) < 0)
		return; /* journalled and relayed as it is; nothing to learn */
	if (gw_route_learn(g->routes, gw_login_id(l), p, &m) == -ENOSPC) {
		g->st.tokens_full++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"token table full ([gateway] max_tokens live orders): %s's token "
				"%.14s not remembered", l->cred.login, (const char *)msg + 9);
	}
}

/* One block; 0, or -ENOSPC / -EDQUOT when its login's journal cannot take
 * it (the block is held: see exec_deliver). */
static int exec_block(struct gw_part *x, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct gw *g = x->gw;
	struct gw_login *l;
	size_t mlen;
	int rc;

	g->st.exec_blocks++;
	if (len <= WIRE_EXEC_HDR_LEN || len - WIRE_EXEC_HDR_LEN > GW_MAX_EXEC_MSG) {
		g->st.exec_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "exec %u: block %" PRIu64 " of %u bytes",
				x->index, seq, len);
		return 0;
	}
	/* whosever it is, it says how far the partition has applied the tape */
	gw_flow_on_exec(g, x->index, wire_get_u64(data));
	l = gw_login_find(&g->logins, data + 8, WIRE_USER_LEN);
	if (!l) {
		g->st.exec_foreign++;
		return 0;
	}
	if (seq <= last_exec(g, l)[x->index])
		return 0; /* journalled before a restart */
	mlen = len - WIRE_EXEC_HDR_LEN;
	if (g->n_parts > 1)
		learn_token(g, l, x->index, data + WIRE_EXEC_HDR_LEN, mlen);
	rc = gw_login_append(&g->logins, l, GW_TAG(x->index, seq), data + WIRE_EXEC_HDR_LEN, mlen);
	if (rc == -ENOSPC || rc == -EDQUOT)
		return rc;
	if (rc < 0)
		return 0; /* counted and logged: this client's message is lost */
	last_exec(g, l)[x->index] = seq;
	g->st.exec_routed++;
	return 0;
}

/* rx delivers exec block seq of partition ctx, the next in order. */
static int exec_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct gw_part *x = ctx;
	struct gw *g = x->gw;
	int rc = g->disk_full ? -ENOSPC : exec_block(x, seq, data, len);

	if (rc < 0) {
		/* A full disk: the stream stops here, nothing is lost and
		 * nothing reaches a client unjournalled; it goes on once the
		 * disk has room (gw_exec_disk_retry). */
		gw_exec_disk_full(g, rc);
		return RX_HOLD;
	}
	x->exec.next = seq + 1;
	return RX_TAKEN;
}

void gw_exec_disk_full(struct gw *g, int err)
{
	if (g->disk_full || (err != -ENOSPC && err != -EDQUOT))
		return;
	g->disk_full = 1;
	g->st.disk_full++;
	log_err("a journal: %s: the execution streams and the commands wait (STATUS disk=full) "
		"until the disk has room again (%u MiB free)",
		strerror(-err), GW_DISK_ROOM >> 20);
}

void gw_exec_disk_retry(struct gw *g)
{
	int64_t room;

	if (!g->disk_full || gw_logins_flush(&g->logins) < 0)
		return;
	for (unsigned k = 0; k < g->n_tapes; k++)
		if (journal_flush(g->cmd[k].j) < 0)
			return;
	room = journal_free_bytes(g->cmd[0].j); /* one state_dir: one file system */
	if (room < (int64_t)GW_DISK_ROOM)
		return;
	g->disk_full = 0;
	log_notice("the disk has room again (%lld MiB free): the execution streams go on",
		   (long long)(room >> 20));
	for (unsigned p = 0; p < g->n_parts; p++)
		rx_resume(g->exec.parts[p].exec.rx, mono_ns());
	gw_day_drain(g); /* the trading day's System Events that waited */
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
static void exec_packet(void *ctx, const uint8_t *buf, size_t len, int answer,
			const struct sockaddr_in *from, uint64_t now)
{
	struct gw_part *x = ctx;
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

static void exec_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_part *x = w->data;

	(void)loop;
	(void)revents;
	gw_stream_drain(x->gw, &x->exec, w, exec_packet, x);
}

int gw_exec_live(const struct gw *g)
{
	for (unsigned p = 0; p < g->n_parts; p++)
		if (!g->exec.parts[p].exec.live)
			return 0;
	return g->n_parts > 0;
}

/* ---- open and close ------------------------------------------------------ */

/* One partition: the highest exec seq journalled for each partition, from
 * the last record of that partition (usually the last record: the
 * gateway's own messages are skipped). */
static int scan_back(struct journal *j, uint64_t *last, const char *path)
{
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	uint64_t first = journal_first_seq(j);

	for (uint64_t seq = journal_last_seq(j); seq && seq >= first; seq--) {
		int rc = journal_read(j, seq, rec, sizeof(rec), NULL);
		uint64_t tag;

		if (rc < 8) {
			log_err("%s: record %" PRIu64 " unreadable", path, seq);
			return rc < 0 ? rc : -EBADMSG;
		}
		tag = wire_get_u64(rec);
		if (tag >> GW_TAG_SHIFT == 0) {
			last[0] = tag;
			return 0;
		}
	}
	return 0;
}

/* Several partitions: every record, for the highest exec seq of each
 * partition (their records interleave) and the tokens the partitions
 * answered for (see learn_token). Start-up only: journal_open has just
 * read all of it once to check it. */
static int scan_all(struct gw *g, struct gw_login *l, struct journal *j, const char *path)
{
	uint64_t *last = last_exec(g, l);
	struct journal_iter *it;
	const uint8_t *data;
	uint64_t seq, term;
	size_t len;
	int rc = journal_iter_open(&it, j, journal_first_seq(j));

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
		if ((tag & GW_TAG_SEQ_MASK) > last[p])
			last[p] = tag & GW_TAG_SEQ_MASK;
		learn_token(g, l, p, data + 8, len - 8);
	}
	journal_iter_close(it);
	if (rc < 0)
		log_err("%s: %s", path, strerror(-rc));
	return rc;
}

/* The login table's opened() hook: a login's journal, at start or added by
 * a reload. At start each partition's stream resumes after the highest
 * exec seq journalled for it; later its position stays where it is. */
static int login_opened(void *ctx, struct gw_login *l, struct journal *j, const char *path)
{
	struct gw *g = ctx;
	size_t id = gw_login_id(l);
	int rc;

	if (id >= g->exec.n_last) {
		size_t n = id + 1 > 2 * g->exec.n_last ? id + 1 : 2 * g->exec.n_last;
		uint64_t(*v)[GW_MAX_PARTITIONS] = realloc(g->exec.last_exec, n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		memset(v + g->exec.n_last, 0, (n - g->exec.n_last) * sizeof(*v));
		g->exec.last_exec = v;
		g->exec.n_last = n;
	}
	memset(last_exec(g, l), 0, sizeof(*g->exec.last_exec));
	gw_day_login_opened(g, l, j);
	if (journal_last_seq(j)) {
		rc = g->n_parts > 1 ? scan_all(g, l, j, path) : scan_back(j, last_exec(g, l), path);
		if (rc < 0)
			return rc;
	}
	for (unsigned p = 0; p < g->n_parts && !g->exec.running; p++)
		if (last_exec(g, l)[p] + 1 > g->exec.parts[p].exec.next)
			g->exec.parts[p].exec.next = last_exec(g, l)[p] + 1;
	return 0;
}

static int open_exec_sockets(struct gw_part *x)
{
	struct gw *g = x->gw;
	const struct gw_part_config *pc = &g->cfg.part[x->index];
	struct gw_stream *e = &x->exec;
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group;
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
	e->surface = AUTH_EXEC;
	rc = gw_stream_open(g, e, &exec_ops, x, g->cfg.reorder_bytes ? g->cfg.reorder_bytes
								    : 8u << 20,
			    e->n_retrans, e->next, *pc->exec_group_b != 0);
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
	e->req_fd = net_udp_open_on(g->cfg.tape_iface, &opt, &rcv, NULL);
	if (e->req_fd < 0) {
		log_err("exec %u request socket: %s", x->index, strerror(-e->req_fd));
		return e->req_fd;
	}
	snprintf(what, sizeof(what), "exec %u request socket", x->index);
	rxpath_bufsize_check(what, &rcv);
	ev_io_init(&e->io, exec_read, e->fd, EV_READ);
	ev_io_init(&e->req_io, exec_read, e->req_fd, EV_READ);
	e->io.data = e->req_io.data = x;
	ev_io_start(g->loop, &e->io);
	ev_io_start(g->loop, &e->req_io);
	snprintf(what, sizeof(what), "exec stream %u", x->index);
	return gw_stream_open_b(g, e, pc->exec_group_b, what, exec_read, x);
}

/* The loss generator of partition p's two sockets: partition 0 keeps the
 * seeds it always had. */
static uint64_t exec_drop_seed(const struct gw *g, unsigned p, unsigned k)
{
	uint64_t base = rx_seed_of(g->cfg.node.name, g->cfg.drop_seed);

	return p == 0 ? base + 10 + k : base + 20 + 2 * p + k;
}

/* The partitions, each at its position next[p] (0: unknown). */
static int parts_init(struct gw *g, const uint64_t *next)
{
	g->exec.parts = calloc(g->n_parts, sizeof(*g->exec.parts));
	if (!g->exec.parts)
		return -ENOMEM;
	for (unsigned p = 0; p < g->n_parts; p++) {
		struct gw_part *x = &g->exec.parts[p];

		x->gw = g;
		x->index = p;
		x->exec.fd = x->exec.req_fd = x->exec.fd_b = -1;
		x->exec.next = next[p] ? next[p] : 1;
		if (mold_session_set(&x->exec.sess, g->cfg.part[p].exec_session) < 0) {
			log_err("partition %u: exec_session \"%s\": 1 to 10 printable characters",
				p, g->cfg.part[p].exec_session);
			return -EINVAL;
		}
		rx_drop_init(&x->exec.drop, g->cfg.drop_rate, exec_drop_seed(g, p, 0));
		rx_drop_init(&x->exec.req_drop, g->cfg.drop_rate, exec_drop_seed(g, p, 1));
	}
	return 0;
}

int gw_exec_open(struct gw *g, const uint64_t *next)
{
	int rc = parts_init(g, next);

	if (rc < 0)
		return rc;
	rc = gw_logins_open_journals(&g->logins, g->loop, login_opened, g);
	if (rc < 0)
		return rc;
	rc = gw_stream_init(g);
	if (rc < 0)
		return rc;
	for (unsigned p = 0; p < g->n_parts; p++) {
		rc = open_exec_sockets(&g->exec.parts[p]);
		if (rc < 0)
			return rc;
	}
	g->exec.running = 1;
	return 0;
}

void gw_exec_close(struct gw *g)
{
	for (unsigned p = 0; g->exec.parts && p < g->n_parts; p++)
		gw_stream_close(g, &g->exec.parts[p].exec);
}

void gw_exec_free(struct gw *g)
{
	free(g->exec.parts);
	free(g->exec.last_exec);
	g->exec.parts = NULL;
	g->exec.last_exec = NULL;
	g->exec.n_last = 0;
}
