/* The command stream (gateway -> sequencer) and the tape watcher.
 *
 * Every command is journalled under its gateway sequence number before it is
 * sent, and under [gateway] fsync = disk it leaves only once on disk (a
 * power cut must not make the gateway number another command the same);
 * datagrams are built in place in a sendmmsg batch and sent once per loop
 * iteration, or when the journal's sync ends. The tape tells which commands are committed: the sequencer
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

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

#define GW_RETRANS_MAX_PACKETS 64 /* packets answered per request */

int gw_cmd_unacked(const struct gw *g)
{
	return g->cmd.acked + 1 < g->cmd.next;
}

int gw_cmd_pending(const struct gw *g, uint64_t seq)
{
	return seq > g->cmd.acked && seq < g->cmd.next;
}

void gw_cmd_ack(struct gw *g, uint64_t seq)
{
	if (seq <= g->cmd.acked)
		return;
	g->st.cmds_acked += seq - g->cmd.acked;
	g->cmd.acked = seq;
	g->cmd.resend_base = ev_now(g->loop);
}

/* ---- building datagrams -------------------------------------------------- */

/* The datagram in slot cmd_slot is complete, len bytes. One for every
 * sequencer (cmd_fan) is copied into the next n_seq - 1 slots, each with its
 * node's address: a copy of at most max_datagram bytes costs far less than
 * the send, and the slots keep owning their bytes as net_batch wants. */
static void cmd_end(struct gw *g, size_t len)
{
	unsigned s = g->cmd.slot;

	len = auth_node_seal(AUTH_CMD, net_batch_slot(&g->cmd.out, s), len, g->cmd.out.size, 0);
	g->cmd.out.lens[s] = len;
	for (unsigned k = 0; k < (g->cmd.fan ? g->cmd.n_seq : 1); k++)
		g->cmd.slot_cmd[s + k] = g->cmd.build_last;
	g->cmd.build_last = 0;
	if (g->cmd.fan) {
		const uint8_t *src = net_batch_slot(&g->cmd.out, s);

		for (unsigned k = 1; k < g->cmd.n_seq; k++) {
			memcpy(net_batch_slot(&g->cmd.out, s + k), src, len);
			g->cmd.out.lens[s + k] = len;
			g->cmd.out.addrs[s + k] = g->cmd.seq_addrs[k];
		}
		g->cmd.slot += g->cmd.n_seq;
	} else {
		g->cmd.slot++;
	}
	g->cmd.building = 0;
	g->st.cmd_packets++; /* datagrams of the stream, not copies */
}

/* Sends slots [0, cmd_slot): one sendmmsg when all goes well. With several
 * sequencers a datagram the kernel refuses outright (no route to one node,
 * a firewall rule) is skipped and the rest still goes, so that one
 * unreachable node does not silence the others: one more sendmmsg per
 * refused datagram. A full send buffer is waited out (NET_SEND_WAIT_NS,
 * cmd_send_waits); past that the round ends (what did not go is resent
 * after resend_timeout, or asked for). One sequencer: one call, as it
 * always was. */
static void cmd_send_batch(struct gw *g, unsigned count)
{
	unsigned off = 0, sent = 0;
	int err = 0;

	while (off < count) {
		/* net_batch_send sends from slot 0: a view of the batch from off */
		struct net_batch v = g->cmd.out;
		int rc;

		v.n -= off;
		v.data += (size_t)off * v.size;
		v.msgs += off;
		v.iov += off;
		v.addrs += off;
		v.lens += off;
		rc = net_batch_send_wait(&v, g->cmd.fd, count - off, NET_SEND_WAIT_NS,
					 &g->st.cmd_send_waits);
		if (rc < 0) {
			char a[32];

			err = rc;
			if (g->cmd.n_seq == 1)
				break;
			net_format_addr(&g->cmd.out.addrs[off], a, sizeof(a));
			log_ratelimited(&gw_rl, LOG_LVL_WARNING, "command stream to %s: %s", a,
					strerror(-rc));
			off++; /* that datagram is lost; the others are not */
			continue;
		}
		sent += (unsigned)rc;
		off += (unsigned)rc;
		if (rc == 0 || g->cmd.n_seq == 1)
			break;
	}
	if (sent < count)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "command stream: %u of %u datagrams sent%s%s",
				sent, count, err ? ": " : "", err ? strerror(-err) : "");
}

/* Slots [k, slot) move to the front once [0, k) went. */
static void cmd_slots_shift(struct gw *g, unsigned k)
{
	struct net_batch *o = &g->cmd.out;
	unsigned left = g->cmd.slot - k;

	if (left) {
		memmove(o->data, net_batch_slot(o, k), (size_t)left * o->size);
		memmove(o->lens, o->lens + k, left * sizeof(*o->lens));
		memmove(o->addrs, o->addrs + k, left * sizeof(*o->addrs));
		memmove(g->cmd.slot_cmd, g->cmd.slot_cmd + k, left * sizeof(*g->cmd.slot_cmd));
	}
	g->cmd.slot = left;
}

/* Sends the slots whose commands the journal holds, in order: under fsync =
 * disk, those on disk (nothing leaves that a power cut could take back: the
 * gateway would number other commands the same); the rest wait for the
 * sync's end (on_cmd_sync), or, with `must` (the slots are full, or the
 * gateway stops), for the disk here. */
static void cmd_send_now(struct gw *g, int must)
{
	uint64_t durable, last = 0;
	unsigned k = 0;
	int rc;

	if (g->cmd.building)
		cmd_end(g, mold_build_end(&g->cmd.b));
	if (g->cmd.slot == 0)
		return;
	rc = journal_flush(g->cmd.j);
	for (unsigned i = 0; i < g->cmd.slot; i++)
		last = g->cmd.slot_cmd[i] > last ? g->cmd.slot_cmd[i] : last;
	if (rc == 0 && must && journal_durable_seq(g->cmd.j) < last)
		rc = journal_await(g->cmd.j, last);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal: %s: commands held",
				strerror(-rc));
		gw_exec_disk_full(g, rc);
		if (must)
			g->cmd.slot = 0; /* unacknowledged: resent once the disk takes them */
		return;
	}
	durable = journal_durable_seq(g->cmd.j);
	while (k < g->cmd.slot && g->cmd.slot_cmd[k] <= durable)
		k++;
	if (k == 0)
		return;
	cmd_send_batch(g, k);
	cmd_slots_shift(g, k);
	g->cmd.last_send = ev_now(g->loop);
}

/* Starts a datagram whose first block is `seq`, to dst, or to every
 * sequencer when dst is NULL. */
static void cmd_begin(struct gw *g, uint64_t seq, const struct sockaddr_in *dst)
{
	unsigned width = dst ? 1 : g->cmd.n_seq;

	if (g->cmd.building)
		cmd_end(g, mold_build_end(&g->cmd.b));
	if (g->cmd.slot + width > g->cmd.out.n)
		cmd_send_now(g, 1);
	mold_build_begin(&g->cmd.b, net_batch_slot(&g->cmd.out, g->cmd.slot),
			 g->cmd.out.size - auth_node_reserve(), &g->cmd.sess, seq);
	g->cmd.out.addrs[g->cmd.slot] = dst ? *dst : g->cmd.seq_addrs[0];
	g->cmd.fan = !dst;
	g->cmd.building = 1;
}

size_t gw_cmd_room(const struct gw *g)
{
	return throttle_cmd_room(g->cfg.max_datagram, auth_node_reserve());
}

/* -EMSGSIZE (nothing done) for a command larger than gw_cmd_room(). */
int gw_cmd_submit(struct gw *g, Lockstep__Command *cmd)
{
	size_t len = lockstep__command__get_packed_size(cmd);
	uint8_t *p = NULL;
	int rc;

	if (!throttle_cmd_fits(len, gw_cmd_room(g)))
		return -EMSGSIZE;
	/* A packet under construction holds new commands only, ending at
	 * cmd_next - 1 (cmd_emit() sends what it builds at once). */
	if (g->cmd.building)
		p = mold_build_reserve(&g->cmd.b, (uint16_t)len);
	if (!p) {
		cmd_begin(g, g->cmd.next, NULL);
		p = mold_build_reserve(&g->cmd.b, (uint16_t)len);
		if (!p)
			return -EMSGSIZE;
	}
	lockstep__command__pack(cmd, p);
	rc = journal_append(g->cmd.j, g->cmd.next, 0, p, len);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal append %" PRIu64 ": %s",
				g->cmd.next, strerror(-rc));
		return rc; /* not committed to the packet: the block is dropped */
	}
	mold_build_commit(&g->cmd.b, (uint16_t)len);
	if (!gw_cmd_unacked(g))
		g->cmd.resend_base = ev_now(g->loop);
	g->cmd.build_last = g->cmd.next;
	g->cmd.next++;
	g->st.cmds_sent++;
	gw_flow_sent(g, g->cmd.next - 1, cmd->partition);
	return 0;
}

/* Emits journalled commands [from, to) to dst (NULL: every sequencer), at
 * most max_packets datagrams; returns how many commands went out. */
static uint64_t cmd_emit(struct gw *g, uint64_t from, uint64_t to, unsigned max_packets,
			 const struct sockaddr_in *dst, unsigned *sent_packets)
{
	uint64_t seq = from;
	unsigned packets = 0;

	cmd_send_now(g, 0); /* new commands already queued go first */
	while (seq < to) {
		int len = journal_read(g->cmd.j, seq, g->cmd.scratch, JOURNAL_MAX_RECORD, NULL);

		if (len < 0) {
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal read %" PRIu64 ": %s",
					seq, strerror(-len));
			break;
		}
		if (!g->cmd.building || mold_build_add(&g->cmd.b, g->cmd.scratch, (uint16_t)len) < 0) {
			if (packets == max_packets)
				break;
			cmd_begin(g, seq, dst);
			packets++;
			if (mold_build_add(&g->cmd.b, g->cmd.scratch, (uint16_t)len) < 0)
				break;
		}
		if (seq > g->cmd.build_last)
			g->cmd.build_last = seq;
		seq++;
	}
	cmd_send_now(g, 0);
	if (sent_packets)
		*sent_packets = packets;
	return seq - from;
}

/* ---- requests from the sequencer ---------------------------------------- */

/* Commands [from, to) to the requester at dst, as many datagrams as its
 * budget ([node] retrans_budget) holds, GW_RETRANS_MAX_PACKETS at most. */
static void cmd_answer(struct gw *g, uint64_t from, uint64_t to, const struct sockaddr_in *dst)
{
	uint64_t now = mono_ns(), room = src_budget_room(&g->cmd.budget, dst->sin_addr.s_addr, now);
	uint64_t maxp = room / g->cmd.out.size, served;
	unsigned packets = 0;

	if (maxp > GW_RETRANS_MAX_PACKETS)
		maxp = GW_RETRANS_MAX_PACKETS;
	served = maxp ? cmd_emit(g, from, to, (unsigned)maxp, dst, &packets) : 0;
	src_budget_charge(&g->cmd.budget, dst->sin_addr.s_addr, (uint64_t)packets * g->cmd.out.size,
			  now);
	g->st.retrans_served += served;
	if (served < to - from && maxp < GW_RETRANS_MAX_PACKETS && packets >= maxp)
		g->st.retrans_budget_refused++;
}

static void on_cmd_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n;

		g->cmd.in.rxq_dropped = 0;
		n = net_batch_recv(&g->cmd.in, g->cmd.fd);
		if (g->cmd.in.rxq_dropped > g->cmd.rxq)
			g->cmd.rxq = g->cmd.in.rxq_dropped;
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			struct mold_request r;
			uint64_t from, to, first = journal_first_seq(g->cmd.j);
			uint8_t *buf = net_batch_slot(&g->cmd.in, (unsigned)i);
			size_t len = g->cmd.in.lens[i];
			int rc;

			if (auth_node_check(AUTH_REQUEST, buf, &len, 0, &g->cmd.in.addrs[i]) < 0 ||
			    rx_drop(&g->cmd.drop, buf, len))
				continue;
			rc = mold_parse_request(buf, len, &g->cmd.sess, &r);
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
				uint8_t hb[AUTH_CONTROL_MAX];
				size_t hb_len = rxpath_too_old_answer(hb, &g->cmd.sess,
								      "command stream", from, first);

				hb_len = auth_node_seal(AUTH_CMD, hb, hb_len, sizeof(hb), 0);
				g->st.retrans_too_old++;
				(void)sendto(g->cmd.fd, hb, hb_len, 0,
					     (const struct sockaddr *)&g->cmd.in.addrs[i],
					     sizeof(g->cmd.in.addrs[i]));
				from = first;
			}
			to = r.seq + r.count < g->cmd.next ? r.seq + r.count : g->cmd.next;
			if (from < to)
				cmd_answer(g, from, to, &g->cmd.in.addrs[i]);
		}
		if ((unsigned)n < g->cmd.in.n)
			return;
	}
}

void gw_cmd_flush(struct gw *g)
{
	if (g->cmd.fd >= 0)
		cmd_send_now(g, 0);
}

/* fsync = disk: the command journal's sync ended; what waited for it goes. */
static void on_cmd_sync(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;
	int rc = journal_poll(g->cmd.j);

	(void)loop;
	(void)revents;
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal fsync: %s: commands held",
				strerror(-rc));
		gw_exec_disk_full(g, rc);
		return;
	}
	if (rc > 0 && g->cmd.fd >= 0)
		cmd_send_now(g, 0);
}

void gw_cmd_tick(struct gw *g, ev_tstamp now)
{
	if (gw_cmd_unacked(g) && now - g->cmd.resend_base >= (ev_tstamp)g->cfg.resend_timeout / 1e9) {
		uint64_t to = g->cmd.next, from = g->cmd.acked + 1;

		if (to - from > g->cfg.resend_max)
			to = from + g->cfg.resend_max;
		log_debug("resending commands %" PRIu64 "..%" PRIu64, from, to - 1);
		g->st.cmds_resent += cmd_emit(g, from, to, UINT32_MAX, NULL, NULL);
		g->cmd.resend_base = now;
	}
	if (!g->cmd.building && g->cmd.slot == 0 &&
	    now - g->cmd.last_send >= (ev_tstamp)g->cfg.cmd_heartbeat / 1e9) {
		uint8_t *p = net_batch_slot(&g->cmd.out, 0);

		/* to every sequencer: a standby learns the address from it too */
		g->cmd.out.addrs[0] = g->cmd.seq_addrs[0];
		g->cmd.fan = 1;
		cmd_end(g, mold_build_heartbeat(p, &g->cmd.sess, g->cmd.next));
		g->st.cmd_heartbeats++;
		cmd_send_now(g, 0);
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
	int rc = journal_iter_open(&it, g->cmd.j, journal_first_seq(g->cmd.j));

	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	while ((rc = journal_iter_next(it, &seq, &term, &data, &len)) > 0) {
		Lockstep__Command *c = lockstep__command__unpack(NULL, len, data);
		struct gw_login *l = c && c->user ? gw_login_find(&g->logins, (const uint8_t *)c->user,
								  strlen(c->user))
						  : NULL;
		const char *tok = NULL;

		if (l && c->partition < g->n_parts) {
			uint32_t id = gw_login_id(l);

			if (c->body_case == LOCKSTEP__COMMAND__BODY_NEW_ORDER)
				tok = c->new_order->token;
			else if (c->body_case == LOCKSTEP__COMMAND__BODY_REPLACE &&
				 gw_route_token(g->routes, id, c->replace->existing_token,
						strlen(c->replace->existing_token)) >= 0)
				tok = c->replace->replacement_token;
			/* dead until an answer says it lives: a token whose
			 * order died and was forgotten must not come back live */
			if (tok && gw_route_maybe(g->routes, id, tok, strlen(tok), c->partition) == 0)
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

/* [gateway] cmd_bind, or by default the address of tape_iface (the
 * cluster's side) with any port: the command stream's server, which hands
 * out every firm's orders to the sequencer that asks, is not bound to
 * 0.0.0.0 (issue 15). */
static int cmd_bind_addr(struct gw *g, struct sockaddr_in *out)
{
	struct net_iface ifc;
	int rc;

	if (g->cfg.cmd_bind[0]) {
		if (net_parse_addr(g->cfg.cmd_bind, out) < 0) {
			log_err("[gateway] cmd_bind \"%s\": not host:port", g->cfg.cmd_bind);
			return -EINVAL;
		}
		return 0;
	}
	if ((rc = net_iface_lookup(g->cfg.tape_iface, &ifc)) < 0) {
		log_err("[gateway] tape_iface \"%s\" (the command socket's default address): %s",
			g->cfg.tape_iface, strerror(-rc));
		return rc;
	}
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_addr = ifc.addr;
	return 0;
}

int gw_cmd_open(struct gw *g, uint64_t acked)
{
	struct journal_options jo = { .fsync = gw_fsync_modes[g->cfg.fsync] };
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct net_bufsize rcv;
	struct journal_report rep;
	struct sockaddr_in bind_addr;
	char path[300], why[64];
	int rc;

	rc = addrlist_parse(g->cfg.sequencer, g->cmd.seq_addrs, GW_MAX_SEQUENCERS);
	if (rc < 0) {
		log_err("[gateway] sequencer \"%s\": %s", g->cfg.sequencer,
			gw_stream_addr_error(rc, why, sizeof(why), GW_MAX_SEQUENCERS));
		return rc;
	}
	g->cmd.n_seq = (unsigned)rc;
	g->cmd.acked = acked;
	if (mold_session_set(&g->cmd.sess, g->cfg.node.name) < 0)
		return -EINVAL; /* checked by gw_open */
	/* the loss generator's seed (the tape's are 12 and 13) */
	rx_drop_init(&g->cmd.drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + 14);
	if (g->cmd.n_seq > 1)
		log_info("command stream to %u sequencer nodes: %s", g->cmd.n_seq, g->cfg.sequencer);
	if ((rc = cmd_bind_addr(g, &bind_addr)) < 0)
		return rc;
	snprintf(path, sizeof(path), "%s/commands", g->cfg.node.state_dir);
	rc = journal_open(&g->cmd.j, path, &jo, &rep);
	if (rc == -EUCLEAN) {
		char text[1024];

		log_err("%s: %s", path, journal_damage_text(&rep, path, text, sizeof(text)));
		return rc;
	}
	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (rep.cut_bytes || rep.cut_segments)
		log_warn("%s: cut %" PRIu64 " bytes, %" PRIu64 " segments at seq %" PRIu64 " (%s)",
			 path, rep.cut_bytes, rep.cut_segments, rep.bad_seq,
			 rep.bad_reason ? rep.bad_reason : "?");
	if (g->n_parts > 1 && journal_last_seq(g->cmd.j) && (rc = tokens_rebuild(g, path)) < 0)
		return rc;
	g->cmd.next = journal_last_seq(g->cmd.j) ? journal_last_seq(g->cmd.j) + 1 : 1;
	if (g->cmd.acked >= g->cmd.next)
		g->cmd.acked = g->cmd.next - 1;
	if (journal_first_seq(g->cmd.j) && g->cmd.acked + 1 < journal_first_seq(g->cmd.j))
		g->cmd.acked = journal_first_seq(g->cmd.j) - 1;
	g->cmd.scratch = malloc(JOURNAL_MAX_RECORD);
	g->cmd.slot_cmd = calloc((size_t)g->cfg.send_batch * g->cmd.n_seq, sizeof(*g->cmd.slot_cmd));
	if (!g->cmd.scratch || !g->cmd.slot_cmd ||
	    net_batch_init(&g->cmd.out, (unsigned)g->cfg.send_batch * g->cmd.n_seq,
			   g->cfg.max_datagram) < 0 ||
	    (src_budget_init(&g->cmd.budget, g->cfg.node.retrans_budget, 0),
	     net_batch_init(&g->cmd.in, 32, 256) < 0))
		return -ENOMEM;
	g->cmd.fd = net_udp_open(&bind_addr, &opt, &rcv, NULL);
	if (g->cmd.fd < 0) {
		char a[32];

		net_format_addr(&bind_addr, a, sizeof(a));
		log_err("command socket %s: %s", a, strerror(-g->cmd.fd));
		return g->cmd.fd;
	}
	rxpath_bufsize_check("command socket", &rcv);
	{ /* where sequencers' requests for the command stream come to */
		char a[32];

		bind_addr.sin_port = htons((uint16_t)net_local_port(g->cmd.fd));
		net_format_addr(&bind_addr, a, sizeof(a));
		log_info("command stream from %s (its retransmission server)", a);
	}
	ev_io_init(&g->cmd.io, on_cmd_read, g->cmd.fd, EV_READ);
	g->cmd.io.data = g;
	ev_io_start(g->loop, &g->cmd.io);
	if (journal_sync_fd(g->cmd.j) >= 0) {
		ev_io_init(&g->cmd.sync_io, on_cmd_sync, journal_sync_fd(g->cmd.j), EV_READ);
		g->cmd.sync_io.data = g;
		ev_io_start(g->loop, &g->cmd.sync_io);
	}
	g->cmd.resend_base = g->cmd.last_send = ev_now(g->loop);
	return 0;
}

void gw_cmd_close(struct gw *g)
{
	if (g->cmd.fd >= 0) {
		cmd_send_now(g, 1);
		ev_io_stop(g->loop, &g->cmd.io);
		ev_io_stop(g->loop, &g->cmd.sync_io);
		close(g->cmd.fd);
		g->cmd.fd = -1;
	}
	journal_close(g->cmd.j);
	g->cmd.j = NULL;
	net_batch_fini(&g->cmd.out);
	net_batch_fini(&g->cmd.in);
	free(g->cmd.scratch);
	g->cmd.scratch = NULL;
	free(g->cmd.slot_cmd);
	g->cmd.slot_cmd = NULL;
}
