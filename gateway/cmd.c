/* The command stream (gateway -> sequencer) and the tape watcher.
 *
 * Every command is journalled under its gateway sequence number before it is
 * sent; datagrams are built in place in a sendmmsg batch and sent once per
 * loop iteration. The tape tells which commands are committed: the sequencer
 * sequences a gateway's commands strictly in order, so an event of ours with
 * origin_seq n, once committed, acknowledges every command up to n. Commands
 * not acknowledged within resend_timeout are resent in order under their
 * original numbers (the sequencer drops duplicates).
 *
 * The sequencer is a group whose primary changes with elections, and the
 * gateway is not told which node it is: every datagram of the command
 * stream (data, resends and heartbeats) goes to every node listed in
 * [gateway] sequencer, the copies side by side in the same sendmmsg batch
 * (d1 to each node, then d2 to each node...), so that the primary, whichever
 * it is, waits for at most n_seq - 1 copies ahead of each datagram. The
 * standbys drop the commands and remember where they came from. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addrlist.h"
#include "clock.h"
#include "gw_private.h"
#include "journal.h"
#include "tape.h"

#define GW_RETRANS_MAX_PACKETS 64 /* packets answered per request */

static int unacked(const struct gw *g)
{
	return g->cmd_acked + 1 < g->cmd_next;
}

/* ---- building datagrams -------------------------------------------------- */

/* The datagram in slot cmd_slot is complete, len bytes. One for every
 * sequencer (cmd_fan) is copied into the next n_seq - 1 slots, each with its
 * node's address: a copy of at most max_datagram bytes costs far less than
 * the send, and the slots keep owning their bytes as net_batch wants. */
static void cmd_end(struct gw *g, size_t len)
{
	unsigned s = g->cmd_slot;

	g->cmd_out.lens[s] = len;
	if (g->cmd_fan) {
		const uint8_t *src = net_batch_slot(&g->cmd_out, s);

		for (unsigned k = 1; k < g->n_seq; k++) {
			memcpy(net_batch_slot(&g->cmd_out, s + k), src, len);
			g->cmd_out.lens[s + k] = len;
			g->cmd_out.addrs[s + k] = g->seq_addrs[k];
		}
		g->cmd_slot += g->n_seq;
	} else {
		g->cmd_slot++;
	}
	g->cmd_building = 0;
	g->st.cmd_packets++; /* datagrams of the stream, not copies */
}

/* Sends slots [0, cmd_slot): one sendmmsg when all goes well. With several
 * sequencers a datagram the kernel refuses outright (no route to one node,
 * a firewall rule) is skipped and the rest still goes, so that one
 * unreachable node does not silence the others: one more sendmmsg per
 * refused datagram. A full send buffer ends the round (what did not go is
 * resent after resend_timeout, or asked for). One sequencer: one call, as
 * it always was. */
static void cmd_send_batch(struct gw *g)
{
	unsigned count = g->cmd_slot, off = 0, sent = 0;
	int err = 0;

	while (off < count) {
		/* net_batch_send sends from slot 0: a view of the batch from off */
		struct net_batch v = g->cmd_out;
		int rc;

		v.n -= off;
		v.data += (size_t)off * v.size;
		v.msgs += off;
		v.iov += off;
		v.addrs += off;
		v.lens += off;
		rc = net_batch_send(&v, g->cmd_fd, count - off);
		if (rc < 0) {
			char a[32];

			err = rc;
			if (g->n_seq == 1)
				break;
			net_format_addr(&g->cmd_out.addrs[off], a, sizeof(a));
			log_ratelimited(&gw_rl, LOG_LVL_WARNING, "command stream to %s: %s", a,
					strerror(-rc));
			off++; /* that datagram is lost; the others are not */
			continue;
		}
		sent += (unsigned)rc;
		off += (unsigned)rc;
		if (rc == 0 || g->n_seq == 1)
			break;
	}
	if (sent < count)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "command stream: %u of %u datagrams sent%s%s",
				sent, count, err ? ": " : "", err ? strerror(-err) : "");
}

static void cmd_send_now(struct gw *g)
{
	int rc;

	if (g->cmd_building)
		cmd_end(g, mold_build_end(&g->cmd_b));
	if (g->cmd_slot == 0)
		return;
	rc = journal_flush(g->cmd_j);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal: %s", strerror(-rc));
	}
	cmd_send_batch(g);
	g->cmd_slot = 0;
	g->cmd_last_send = ev_now(g->loop);
}

/* Starts a datagram whose first block is `seq`, to dst, or to every
 * sequencer when dst is NULL. */
static void cmd_begin(struct gw *g, uint64_t seq, const struct sockaddr_in *dst)
{
	unsigned width = dst ? 1 : g->n_seq;

	if (g->cmd_building)
		cmd_end(g, mold_build_end(&g->cmd_b));
	if (g->cmd_slot + width > g->cmd_out.n)
		cmd_send_now(g);
	mold_build_begin(&g->cmd_b, net_batch_slot(&g->cmd_out, g->cmd_slot), g->cmd_out.size,
			 &g->cmd_sess, seq);
	g->cmd_out.addrs[g->cmd_slot] = dst ? *dst : g->seq_addrs[0];
	g->cmd_fan = !dst;
	g->cmd_building = 1;
}

int gw_cmd_submit(struct gw *g, Lockstep__Command *cmd)
{
	size_t len = lockstep__command__get_packed_size(cmd);
	uint8_t *p = NULL;
	int rc;

	if (len + MOLD_HEADER_LEN + 2 > g->cmd_out.size)
		return -EMSGSIZE;
	/* A packet under construction holds new commands only, ending at
	 * cmd_next - 1 (cmd_emit() sends what it builds at once). */
	if (g->cmd_building)
		p = mold_build_reserve(&g->cmd_b, (uint16_t)len);
	if (!p) {
		cmd_begin(g, g->cmd_next, NULL);
		p = mold_build_reserve(&g->cmd_b, (uint16_t)len);
		if (!p)
			return -EMSGSIZE;
	}
	lockstep__command__pack(cmd, p);
	rc = journal_append(g->cmd_j, g->cmd_next, 0, p, len);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal append %" PRIu64 ": %s",
				g->cmd_next, strerror(-rc));
		return rc; /* not committed to the packet: the block is dropped */
	}
	mold_build_commit(&g->cmd_b, (uint16_t)len);
	if (!unacked(g))
		g->resend_base = ev_now(g->loop);
	g->cmd_next++;
	g->st.cmds_sent++;
	return 0;
}

/* Emits journalled commands [from, to) to dst (NULL: every sequencer), at
 * most max_packets datagrams; returns how many commands went out. */
static uint64_t cmd_emit(struct gw *g, uint64_t from, uint64_t to, unsigned max_packets,
			 const struct sockaddr_in *dst)
{
	uint64_t seq = from;
	unsigned packets = 0;

	cmd_send_now(g); /* new commands already queued go first */
	while (seq < to) {
		int len = journal_read(g->cmd_j, seq, g->cmd_scratch, JOURNAL_MAX_RECORD, NULL);

		if (len < 0) {
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal read %" PRIu64 ": %s",
					seq, strerror(-len));
			break;
		}
		if (!g->cmd_building || mold_build_add(&g->cmd_b, g->cmd_scratch, (uint16_t)len) < 0) {
			if (packets == max_packets)
				break;
			cmd_begin(g, seq, dst);
			packets++;
			if (mold_build_add(&g->cmd_b, g->cmd_scratch, (uint16_t)len) < 0)
				break;
		}
		seq++;
	}
	cmd_send_now(g);
	return seq - from;
}

/* ---- requests from the sequencer ---------------------------------------- */

static void on_cmd_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n;

		g->cmd_in.rxq_dropped = 0;
		n = net_batch_recv(&g->cmd_in, g->cmd_fd);
		if (g->cmd_in.rxq_dropped > g->cmd_rxq)
			g->cmd_rxq = g->cmd_in.rxq_dropped;
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			struct mold_request r;
			uint64_t from, to, first = journal_first_seq(g->cmd_j);
			const uint8_t *buf = net_batch_slot(&g->cmd_in, (unsigned)i);
			int rc;

			if (rx_drop(&g->cmd_drop, buf, g->cmd_in.lens[i]))
				continue;
			rc = mold_parse_request(buf, g->cmd_in.lens[i], &g->cmd_sess, &r);
			if (rc < 0) {
				log_ratelimited(&gw_rl, LOG_LVL_WARNING,
						"command socket: bad request: %s", mold_strerror(rc));
				continue;
			}
			g->st.retrans_requests++;
			from = r.seq ? r.seq : 1;
			if (first && from < first && r.count) {
				/* The too-old answer (common/rx.h): a heartbeat to the
				 * requester whose seq is the oldest command journalled. */
				uint8_t hb[MOLD_HEADER_LEN];
				size_t hb_len = rxpath_too_old_answer(hb, &g->cmd_sess,
								      "command stream", from, first);

				g->st.retrans_too_old++;
				(void)sendto(g->cmd_fd, hb, hb_len, 0,
					     (const struct sockaddr *)&g->cmd_in.addrs[i],
					     sizeof(g->cmd_in.addrs[i]));
				from = first;
			}
			to = r.seq + r.count < g->cmd_next ? r.seq + r.count : g->cmd_next;
			if (from < to)
				g->st.retrans_served += cmd_emit(g, from, to, GW_RETRANS_MAX_PACKETS,
								 &g->cmd_in.addrs[i]);
		}
		if ((unsigned)n < g->cmd_in.n)
			return;
	}
}

void gw_cmd_flush(struct gw *g)
{
	if (g->cmd_fd >= 0)
		cmd_send_now(g);
}

void gw_cmd_tick(struct gw *g, ev_tstamp now)
{
	if (unacked(g) && now - g->resend_base >= (ev_tstamp)g->cfg.resend_timeout / 1e9) {
		uint64_t to = g->cmd_next, from = g->cmd_acked + 1;

		if (to - from > g->cfg.resend_max)
			to = from + g->cfg.resend_max;
		log_debug("resending commands %" PRIu64 "..%" PRIu64, from, to - 1);
		g->st.cmds_resent += cmd_emit(g, from, to, UINT32_MAX, NULL);
		g->resend_base = now;
	}
	if (!g->cmd_building && g->cmd_slot == 0 &&
	    now - g->cmd_last_send >= (ev_tstamp)g->cfg.cmd_heartbeat / 1e9) {
		uint8_t *p = net_batch_slot(&g->cmd_out, 0);

		/* to every sequencer: a standby learns the address from it too */
		g->cmd_out.addrs[0] = g->seq_addrs[0];
		g->cmd_fan = 1;
		cmd_end(g, mold_build_heartbeat(p, &g->cmd_sess, g->cmd_next));
		g->st.cmd_heartbeats++;
		cmd_send_now(g);
	}
}

/* ---- the tape ----------------------------------------------------------- */

static void ack_push(struct gw *g, uint64_t tape_seq, uint64_t origin_seq)
{
	unsigned i;

	if (g->ack_len == GW_ACK_RING) {
		/* full: the newest entry stands for both (later, never wrong) */
		i = (g->ack_head + g->ack_len - 1) % GW_ACK_RING;
	} else {
		i = (g->ack_head + g->ack_len) % GW_ACK_RING;
		g->ack_len++;
	}
	g->ack_ring[i].tape_seq = tape_seq;
	g->ack_ring[i].origin_seq = origin_seq;
}

static void ack_drain(struct gw *g)
{
	while (g->ack_len > 0 && g->ack_ring[g->ack_head].tape_seq <= g->tape_commit) {
		uint64_t o = g->ack_ring[g->ack_head].origin_seq;

		if (o > g->cmd_acked) {
			g->st.cmds_acked += o - g->cmd_acked;
			g->cmd_acked = o;
			g->resend_base = ev_now(g->loop);
		}
		g->ack_head = (g->ack_head + 1) % GW_ACK_RING;
		g->ack_len--;
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
		g->tape.next = seq + 1;
		return 0;
	}
	if (v.term < g->tape_term) {
		g->st.tape_fenced++;
		return -1;
	}
	g->tape_term = v.term;
	if (v.commit > g->tape_commit)
		g->tape_commit = v.commit;
	g->tape_last = seq;
	g->tape.next = seq + 1;
	if (v.origin_len == name_len && memcmp(v.origin, g->cfg.node.name, name_len) == 0 &&
	    v.origin_seq > g->cmd_acked && v.origin_seq < g->cmd_next)
		ack_push(g, seq, v.origin_seq);
	return 0;
}

/* rx delivers tape event seq, the next in order. */
static int tape_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	/* a fenced event (older term) is forgotten and asked for again */
	return tape_block(ctx, seq, data, len) < 0 ? RX_REJECT : RX_TAKEN;
}

static void tape_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	gw_stream_request(&((struct gw *)ctx)->tape, server, seq, count);
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
 * is followed from `upto` on without asking for what is missing. */
static void tape_skip(struct gw *g, uint64_t upto, uint64_t now)
{
	if (!unacked(g) && rx_next(g->tape.rx) && upto > rx_next(g->tape.rx)) {
		rx_skip(g->tape.rx, upto, now);
		g->tape.next = rx_next(g->tape.rx);
	}
}

/* A datagram of the tape, or (answer) on the request socket from `from`: a
 * retransmission, or the too-old answer (a heartbeat). */
static void tape_packet(struct gw *g, const uint8_t *buf, size_t len, int answer,
			const struct sockaddr_in *from, uint64_t now)
{
	struct mold_packet pkt;
	int rc;

	if (rx_drop(answer ? &g->tape.req_drop : &g->tape.drop, buf, len))
		return;
	rc = mold_parse(buf, len, &g->tape.sess, 0, &pkt);
	if (rc < 0) {
		g->st.tape_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "tape: dropped packet: %s",
				mold_strerror(rc));
		return;
	}
	g->st.tape_packets++;
	if (answer) {
		if (pkt.kind == MOLD_END_OF_SESSION)
			return;
		if (pkt.kind == MOLD_HEARTBEAT) {
			/* the server that sent it no longer holds what is
			 * below pkt.seq; the others may */
			g->st.tape_too_old++;
			rxpath_too_old(g->tape.rx, rxpath_server(g->tape.retrans, g->tape.n_retrans, from),
				       "tape", from, pkt.seq, now);
			g->tape.next = rx_next(g->tape.rx);
			return;
		}
	} else {
		g->tape.live = 1;
	}
	if (rx_next(g->tape.rx) == 0 && unacked(g))
		rx_start(g->tape.rx, 1); /* ours may be anywhere: read it all */
	tape_skip(g, pkt.seq, now);
	rx_packet(g->tape.rx, &pkt, now);
	ack_drain(g);
}

void gw_tape_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;
	int answer = w == &g->tape.req_io;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n = net_batch_recv_counted(&g->rx, w->fd, answer ? &g->tape.req_rxq : &g->tape.rxq);
		uint64_t now = mono_ns();

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			tape_packet(g, net_batch_slot(&g->rx, (unsigned)i), g->rx.lens[i], answer,
				    &g->rx.addrs[i], now);
		if ((unsigned)n < g->rx.n)
			break;
	}
	gw_stream_arm(g);
}

void gw_tape_tick(struct gw *g, ev_tstamp now)
{
	(void)now;
	if (g->tape.rx && rx_gap_count(g->tape.rx) > 0 && !unacked(g)) {
		tape_skip(g, rx_high(g->tape.rx), mono_ns());
		gw_stream_arm(g);
	}
}

/* ---- open and close ------------------------------------------------------ */

/* Several partitions: the token table learns again, from every command
 * journalled, where each order token of ours went (the same decisions as
 * handle_ouch made: an Enter's token to its partition, a Replace's new
 * token to the partition of the order it replaces, when that is known).
 * A login gone from the credentials file is skipped: it cannot log in. */
static int tokens_rebuild(struct gw *g, const char *path)
{
	struct journal_iter *it;
	const uint8_t *data;
	uint64_t seq, term, n = 0;
	size_t len;
	int rc = journal_iter_open(&it, g->cmd_j, journal_first_seq(g->cmd_j));

	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	while ((rc = journal_iter_next(it, &seq, &term, &data, &len)) > 0) {
		Lockstep__Command *c = lockstep__command__unpack(NULL, len, data);
		struct gw_login *l = c && c->user ? gw_login_find(g, (const uint8_t *)c->user,
								  strlen(c->user))
						  : NULL;
		const char *tok = NULL;

		if (l && c->partition < g->n_parts) {
			uint32_t id = gw_login_id(g, l);

			if (c->body_case == LOCKSTEP__COMMAND__BODY_NEW_ORDER)
				tok = c->new_order->token;
			else if (c->body_case == LOCKSTEP__COMMAND__BODY_REPLACE &&
				 gw_route_token(g->routes, id, c->replace->existing_token,
						strlen(c->replace->existing_token)) >= 0)
				tok = c->replace->replacement_token;
			if (tok && gw_route_add(g->routes, id, tok, strlen(tok), c->partition, 1) == 0)
				n++;
		}
		if (c)
			lockstep__command__free_unpacked(c, NULL);
	}
	journal_iter_close(it);
	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	log_info("routing: %" PRIu64 " order tokens (%" PRIu64 " from the command journal)",
		 gw_route_count(g->routes), n);
	return 0;
}

/* Why net_parse_addr_list refused a list. */
static const char *addr_list_error(int rc, char *buf, size_t cap, int max)
{
	if (rc == -E2BIG)
		snprintf(buf, cap, "more than %d addresses", max);
	else if (rc == -EINVAL)
		snprintf(buf, cap, "not a comma-separated list of host:port");
	else
		snprintf(buf, cap, "%s", strerror(-rc));
	return buf;
}

static int open_tape(struct gw *g)
{
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct sockaddr_in group, any = { .sin_family = AF_INET };
	struct net_bufsize rcv;
	char why[64];
	int rc;

	if (net_parse_addr(g->cfg.tape_group, &group) < 0) {
		log_err("[gateway] tape_group \"%s\": not host:port", g->cfg.tape_group);
		return -EINVAL;
	}
	/* every sequencer node serves the tape up to its own commit position */
	rc = net_parse_addr_list(g->cfg.tape_retrans, g->tape.retrans, RX_MAX_SERVERS);
	if (rc < 0) {
		log_err("[gateway] tape_retrans \"%s\": %s", g->cfg.tape_retrans,
			addr_list_error(rc, why, sizeof(why), RX_MAX_SERVERS));
		return rc;
	}
	g->tape.n_retrans = (unsigned)rc;
	/* from the progress file's position (0: the first packet decides) */
	rc = gw_stream_open(g, &g->tape, &tape_ops, g,
			    g->cfg.reorder_bytes ? g->cfg.reorder_bytes : 8u << 20,
			    g->tape.n_retrans, g->tape.next);
	if (rc < 0) {
		log_err("tape receiver: %s", strerror(-rc));
		return rc;
	}
	g->tape.fd = net_mcast_recv_open(&group, g->cfg.tape_iface, &opt, &rcv);
	if (g->tape.fd < 0) {
		log_err("tape %s on %s: %s", g->cfg.tape_group, g->cfg.tape_iface,
			strerror(-g->tape.fd));
		return g->tape.fd;
	}
	rxpath_bufsize_check("tape", &rcv);
	g->tape.req_fd = net_udp_open(&any, &opt, &rcv, NULL);
	if (g->tape.req_fd < 0) {
		log_err("tape request socket: %s", strerror(-g->tape.req_fd));
		return g->tape.req_fd;
	}
	rxpath_bufsize_check("tape request socket", &rcv);
	ev_io_init(&g->tape.io, gw_tape_read, g->tape.fd, EV_READ);
	ev_io_init(&g->tape.req_io, gw_tape_read, g->tape.req_fd, EV_READ);
	g->tape.io.data = g->tape.req_io.data = g;
	ev_io_start(g->loop, &g->tape.io);
	ev_io_start(g->loop, &g->tape.req_io);
	return 0;
}

int gw_cmd_open(struct gw *g)
{
	struct journal_options jo = { .fsync = (enum journal_fsync)g->cfg.fsync };
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct net_bufsize rcv;
	struct journal_report rep;
	struct sockaddr_in bind_addr;
	char path[300], why[64];
	int rc;

	rc = net_parse_addr_list(g->cfg.sequencer, g->seq_addrs, GW_MAX_SEQUENCERS);
	if (rc < 0) {
		log_err("[gateway] sequencer \"%s\": %s", g->cfg.sequencer,
			addr_list_error(rc, why, sizeof(why), GW_MAX_SEQUENCERS));
		return rc;
	}
	g->n_seq = (unsigned)rc;
	if (g->n_seq > 1)
		log_info("command stream to %u sequencer nodes: %s", g->n_seq, g->cfg.sequencer);
	if (net_parse_addr(g->cfg.cmd_bind, &bind_addr) < 0) {
		log_err("[gateway] cmd_bind \"%s\": not host:port", g->cfg.cmd_bind);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/commands", g->cfg.node.state_dir);
	rc = journal_open(&g->cmd_j, path, &jo, &rep);
	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (rep.cut_bytes || rep.cut_segments)
		log_warn("%s: cut %" PRIu64 " bytes, %" PRIu64 " segments at seq %" PRIu64 " (%s)",
			 path, rep.cut_bytes, rep.cut_segments, rep.bad_seq,
			 rep.bad_reason ? rep.bad_reason : "?");
	if (g->n_parts > 1 && journal_last_seq(g->cmd_j) && (rc = tokens_rebuild(g, path)) < 0)
		return rc;
	g->cmd_next = journal_last_seq(g->cmd_j) ? journal_last_seq(g->cmd_j) + 1 : 1;
	if (g->cmd_acked >= g->cmd_next)
		g->cmd_acked = g->cmd_next - 1;
	if (journal_first_seq(g->cmd_j) && g->cmd_acked + 1 < journal_first_seq(g->cmd_j))
		g->cmd_acked = journal_first_seq(g->cmd_j) - 1;
	g->cmd_scratch = malloc(JOURNAL_MAX_RECORD);
	if (!g->cmd_scratch ||
	    net_batch_init(&g->cmd_out, (unsigned)g->cfg.send_batch * g->n_seq,
			   g->cfg.max_datagram) < 0 ||
	    net_batch_init(&g->cmd_in, 32, 256) < 0 ||
	    net_batch_init(&g->rx, (unsigned)g->cfg.recv_batch, MOLD_MAX_PACKET) < 0)
		return -ENOMEM;
	g->cmd_fd = net_udp_open(&bind_addr, &opt, &rcv, NULL);
	if (g->cmd_fd < 0) {
		log_err("command socket %s: %s", g->cfg.cmd_bind, strerror(-g->cmd_fd));
		return g->cmd_fd;
	}
	rxpath_bufsize_check("command socket", &rcv);
	ev_io_init(&g->cmd_io, on_cmd_read, g->cmd_fd, EV_READ);
	g->cmd_io.data = g;
	ev_io_start(g->loop, &g->cmd_io);
	g->resend_base = g->cmd_last_send = ev_now(g->loop);
	return open_tape(g);
}

static void close_fd(struct gw *g, ev_io *w, int *fd)
{
	if (*fd < 0)
		return;
	ev_io_stop(g->loop, w);
	close(*fd);
	*fd = -1;
}

void gw_cmd_close(struct gw *g)
{
	if (g->cmd_fd >= 0)
		cmd_send_now(g);
	close_fd(g, &g->cmd_io, &g->cmd_fd);
	close_fd(g, &g->tape.io, &g->tape.fd);
	close_fd(g, &g->tape.req_io, &g->tape.req_fd);
	rx_destroy(g->tape.rx);
	g->tape.rx = NULL;
	journal_close(g->cmd_j);
	g->cmd_j = NULL;
	net_batch_fini(&g->cmd_out);
	net_batch_fini(&g->cmd_in);
	net_batch_fini(&g->rx);
	free(g->cmd_scratch);
	g->cmd_scratch = NULL;
}
