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

int gw_cmd_unacked(const struct gw_cmd *c)
{
	return c->acked + 1 < c->next;
}

int gw_cmd_pending(const struct gw_cmd *c, uint64_t seq)
{
	return seq > c->acked && seq < c->next;
}

void gw_cmd_ack(struct gw_cmd *c, uint64_t seq)
{
	struct gw *g = c->g;

	if (seq <= c->acked)
		return;
	g->st.cmds_acked += seq - c->acked;
	c->acked = seq;
	c->resend_base = ev_now(g->loop);
}

/* ---- building datagrams -------------------------------------------------- */

/* The datagram in slot cmd_slot is complete, len bytes. One for every
 * sequencer (cmd_fan) is copied into the next n_seq - 1 slots, each with its
 * node's address: a copy of at most max_datagram bytes costs far less than
 * the send, and the slots keep owning their bytes as net_batch wants. */
static void cmd_end(struct gw_cmd *c, size_t len)
{
	struct gw *g = c->g;
	unsigned s = c->slot;

	len = auth_node_seal(AUTH_CMD, net_batch_slot(&c->out, s), len, c->out.size, 0);
	c->out.lens[s] = len;
	for (unsigned k = 0; k < (c->fan ? c->n_seq : 1); k++)
		c->slot_cmd[s + k] = c->build_last;
	c->build_last = 0;
	if (c->fan) {
		const uint8_t *src = net_batch_slot(&c->out, s);

		for (unsigned k = 1; k < c->n_seq; k++) {
			memcpy(net_batch_slot(&c->out, s + k), src, len);
			c->out.lens[s + k] = len;
			c->out.addrs[s + k] = c->seq_addrs[k];
		}
		c->slot += c->n_seq;
	} else {
		c->slot++;
	}
	c->building = 0;
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
static void cmd_send_batch(struct gw_cmd *c, unsigned count)
{
	struct gw *g = c->g;
	unsigned off = 0, sent = 0;
	int err = 0;

	while (off < count) {
		/* net_batch_send sends from slot 0: a view of the batch from off */
		struct net_batch v = c->out;
		int rc;

		v.n -= off;
		v.data += (size_t)off * v.size;
		v.msgs += off;
		v.iov += off;
		v.addrs += off;
		v.lens += off;
		rc = net_batch_send_wait(&v, c->fd, count - off, NET_SEND_WAIT_NS,
					 &g->st.cmd_send_waits);
		if (rc < 0) {
			char a[32];

			err = rc;
			if (c->n_seq == 1)
				break;
			net_format_addr(&c->out.addrs[off], a, sizeof(a));
			log_ratelimited(&gw_rl, LOG_LVL_WARNING, "command stream to %s: %s", a,
					strerror(-rc));
			off++; /* that datagram is lost; the others are not */
			continue;
		}
		sent += (unsigned)rc;
		off += (unsigned)rc;
		if (rc == 0 || c->n_seq == 1)
			break;
	}
	if (sent < count)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "command stream: %u of %u datagrams sent%s%s",
				sent, count, err ? ": " : "", err ? strerror(-err) : "");
}

/* Slots [k, slot) move to the front once [0, k) went. */
static void cmd_slots_shift(struct gw_cmd *c, unsigned k)
{
	struct net_batch *o = &c->out;
	unsigned left = c->slot - k;

	if (left) {
		memmove(o->data, net_batch_slot(o, k), (size_t)left * o->size);
		memmove(o->lens, o->lens + k, left * sizeof(*o->lens));
		memmove(o->addrs, o->addrs + k, left * sizeof(*o->addrs));
		memmove(c->slot_cmd, c->slot_cmd + k, left * sizeof(*c->slot_cmd));
	}
	c->slot = left;
}

/* Sends the slots whose commands the journal holds, in order: under fsync =
 * disk, those on disk (nothing leaves that a power cut could take back: the
 * gateway would number other commands the same); the rest wait for the
 * sync's end (on_cmd_sync), or, with `must` (the slots are full, or the
 * gateway stops), for the disk here. */
static void cmd_send_now(struct gw_cmd *c, int must)
{
	struct gw *g = c->g;
	uint64_t durable, last = 0;
	unsigned k = 0;
	int rc;

	if (c->building)
		cmd_end(c, mold_build_end(&c->b));
	if (c->slot == 0)
		return;
	rc = journal_flush(c->j);
	for (unsigned i = 0; i < c->slot; i++)
		last = c->slot_cmd[i] > last ? c->slot_cmd[i] : last;
	if (rc == 0 && must && journal_durable_seq(c->j) < last)
		rc = journal_await(c->j, last);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal: %s: commands held",
				strerror(-rc));
		gw_exec_disk_full(g, rc);
		if (must)
			c->slot = 0; /* unacknowledged: resent once the disk takes them */
		return;
	}
	durable = journal_durable_seq(c->j);
	last = 0;
	while (k < c->slot && c->slot_cmd[k] <= durable) {
		last = c->slot_cmd[k] > last ? c->slot_cmd[k] : last;
		k++;
	}
	if (k == 0)
		return;
	cmd_send_batch(c, k);
	gw_stages_sent(g, c->k, last);
	cmd_slots_shift(c, k);
	c->last_send = ev_now(g->loop);
}

/* Starts a datagram whose first block is `seq`, to dst, or to every
 * sequencer when dst is NULL. */
static void cmd_begin(struct gw_cmd *c, uint64_t seq, const struct sockaddr_in *dst)
{
	unsigned width = dst ? 1 : c->n_seq;

	if (c->building)
		cmd_end(c, mold_build_end(&c->b));
	if (c->slot + width > c->out.n)
		cmd_send_now(c, 1);
	mold_build_begin(&c->b, net_batch_slot(&c->out, c->slot),
			 c->out.size - auth_node_reserve(), &c->sess, seq);
	c->out.addrs[c->slot] = dst ? *dst : c->seq_addrs[0];
	c->fan = !dst;
	c->building = 1;
}

size_t gw_cmd_room(const struct gw *g)
{
	return throttle_cmd_room(g->cfg.max_datagram, auth_node_reserve());
}

/* -EMSGSIZE (nothing done) for a command larger than gw_cmd_room(). */
int gw_cmd_submit(struct gw *g, Lockstep__Command *cmd)
{
	struct gw_cmd *c = &g->cmd[cmd->partition < g->n_parts ? gw_part_tape(g, cmd->partition) : 0];
	size_t len = lockstep__command__get_packed_size(cmd);
	uint8_t *p = NULL;
	int rc;

	if (!throttle_cmd_fits(len, gw_cmd_room(g)))
		return -EMSGSIZE;
	/* A packet under construction holds new commands only, ending at
	 * cmd_next - 1 (cmd_emit() sends what it builds at once). */
	if (c->building)
		p = mold_build_reserve(&c->b, (uint16_t)len);
	if (!p) {
		cmd_begin(c, c->next, NULL);
		p = mold_build_reserve(&c->b, (uint16_t)len);
		if (!p)
			return -EMSGSIZE;
	}
	lockstep__command__pack(cmd, p);
	rc = journal_append(c->j, c->next, 0, p, len);
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal append %" PRIu64 ": %s",
				c->next, strerror(-rc));
		return rc; /* not committed to the packet: the block is dropped */
	}
	mold_build_commit(&c->b, (uint16_t)len);
	if (!gw_cmd_unacked(c))
		c->resend_base = ev_now(g->loop);
	c->build_last = c->next;
	gw_stages_submitted(g, c->k, c->next);
	c->next++;
	g->st.cmds_sent++;
	gw_flow_sent(g, c->k, c->next - 1, cmd->partition);
	return 0;
}

/* Emits journalled commands [from, to) to dst (NULL: every sequencer), at
 * most max_packets datagrams; returns how many commands went out. */
static uint64_t cmd_emit(struct gw_cmd *c, uint64_t from, uint64_t to, unsigned max_packets,
			 const struct sockaddr_in *dst, unsigned *sent_packets)
{
	uint64_t seq = from;
	unsigned packets = 0;

	cmd_send_now(c, 0); /* new commands already queued go first */
	while (seq < to) {
		int len = journal_read(c->j, seq, c->scratch, JOURNAL_MAX_RECORD, NULL);

		if (len < 0) {
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal read %" PRIu64 ": %s",
					seq, strerror(-len));
			break;
		}
		if (!c->building || mold_build_add(&c->b, c->scratch, (uint16_t)len) < 0) {
			if (packets == max_packets)
				break;
			cmd_begin(c, seq, dst);
			packets++;
			if (mold_build_add(&c->b, c->scratch, (uint16_t)len) < 0)
				break;
		}
		if (seq > c->build_last)
			c->build_last = seq;
		seq++;
	}
	cmd_send_now(c, 0);
	if (sent_packets)
		*sent_packets = packets;
	return seq - from;
}

/* ---- requests from the sequencer ---------------------------------------- */

/* Commands [from, to) to the requester at dst, as many datagrams as its
 * budget ([node] retrans_budget) holds, GW_RETRANS_MAX_PACKETS at most. */
static void cmd_answer(struct gw_cmd *c, uint64_t from, uint64_t to, const struct sockaddr_in *dst)
{
	struct gw *g = c->g;
	uint64_t now = mono_ns(), room = src_budget_room(&c->budget, dst->sin_addr.s_addr, now);
	uint64_t maxp = room / c->out.size, served;
	unsigned packets = 0;

	if (maxp > GW_RETRANS_MAX_PACKETS)
		maxp = GW_RETRANS_MAX_PACKETS;
	served = maxp ? cmd_emit(c, from, to, (unsigned)maxp, dst, &packets) : 0;
	src_budget_charge(&c->budget, dst->sin_addr.s_addr, (uint64_t)packets * c->out.size,
			  now);
	g->st.retrans_served += served;
	if (served < to - from && maxp < GW_RETRANS_MAX_PACKETS && packets >= maxp)
		g->st.retrans_budget_refused++;
}

static void on_cmd_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_cmd *c = w->data;
	struct gw *g = c->g;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n;

		c->in.rxq_dropped = 0;
		n = net_batch_recv(&c->in, c->fd);
		if (c->in.rxq_dropped > c->rxq)
			c->rxq = c->in.rxq_dropped;
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			struct mold_request r;
			uint64_t from, to, first = journal_first_seq(c->j);
			uint8_t *buf = net_batch_slot(&c->in, (unsigned)i);
			size_t len = c->in.lens[i];
			int rc;

			if (auth_node_check(AUTH_REQUEST, buf, &len, 0, &c->in.addrs[i]) < 0 ||
			    rx_drop(&c->drop, buf, len))
				continue;
			rc = mold_parse_request(buf, len, &c->sess, &r);
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
				size_t hb_len = rxpath_too_old_answer(hb, &c->sess,
								      "command stream", from, first);

				hb_len = auth_node_seal(AUTH_CMD, hb, hb_len, sizeof(hb), 0);
				g->st.retrans_too_old++;
				(void)sendto(c->fd, hb, hb_len, 0,
					     (const struct sockaddr *)&c->in.addrs[i],
					     sizeof(c->in.addrs[i]));
				from = first;
			}
			to = r.seq + r.count < c->next ? r.seq + r.count : c->next;
			if (from < to)
				cmd_answer(c, from, to, &c->in.addrs[i]);
		}
		if ((unsigned)n < c->in.n)
			return;
	}
}

void gw_cmd_flush(struct gw *g)
{
	for (unsigned k = 0; k < g->n_tapes; k++)
		if (g->cmd[k].fd >= 0)
			cmd_send_now(&g->cmd[k], 0);
}

/* fsync = disk: the command journal's sync ended; what waited for it goes. */
static void on_cmd_sync(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_cmd *c = w->data;
	struct gw *g = c->g;
	int rc = journal_poll(c->j);

	(void)loop;
	(void)revents;
	if (rc < 0) {
		g->st.journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "command journal fsync: %s: commands held",
				strerror(-rc));
		gw_exec_disk_full(g, rc);
		return;
	}
	if (rc > 0 && c->fd >= 0)
		cmd_send_now(c, 0);
}

static void cmd_tick(struct gw_cmd *c, ev_tstamp now)
{
	struct gw *g = c->g;

	if (gw_cmd_unacked(c) && now - c->resend_base >= (ev_tstamp)g->cfg.resend_timeout / 1e9) {
		uint64_t to = c->next, from = c->acked + 1;

		if (to - from > g->cfg.resend_max)
			to = from + g->cfg.resend_max;
		log_debug("resending commands %" PRIu64 "..%" PRIu64, from, to - 1);
		g->st.cmds_resent += cmd_emit(c, from, to, UINT32_MAX, NULL, NULL);
		c->resend_base = now;
	}
	if (!c->building && c->slot == 0 &&
	    now - c->last_send >= (ev_tstamp)g->cfg.cmd_heartbeat / 1e9) {
		uint8_t *p = net_batch_slot(&c->out, 0);

		/* to every sequencer: a standby learns the address from it too */
		c->out.addrs[0] = c->seq_addrs[0];
		c->fan = 1;
		cmd_end(c, mold_build_heartbeat(p, &c->sess, c->next));
		g->st.cmd_heartbeats++;
		cmd_send_now(c, 0);
	}
}

void gw_cmd_tick(struct gw *g, ev_tstamp now)
{
	for (unsigned k = 0; k < g->n_tapes; k++)
		cmd_tick(&g->cmd[k], now);
}

/* ---- open and close ------------------------------------------------------ */

/* Several partitions: the token table learns again, from every command
 * journalled, where each order token of ours went (the same decisions as
 * handle_ouch made: an Enter's token to its partition, a Replace's new
 * token to the partition of the order it replaces, when that is known).
 * A login gone from the credentials file is skipped: it cannot log in. */
static int tokens_rebuild(struct gw_cmd *cs, const char *path)
{
	struct gw *g = cs->g;
	struct journal_iter *it;
	const uint8_t *data;
	uint64_t seq, term, n = 0;
	size_t len;
	int rc = journal_iter_open(&it, cs->j, journal_first_seq(cs->j));

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

/* Tape c->k's command stream: to its sequencer group, journalled in
 * state_dir/commands (tape 0) or commands-tapeK. */
static int cmd_open(struct gw_cmd *c, uint64_t acked)
{
	struct gw *g = c->g;
	const struct gw_tape_config *tc = &g->cfg.tape[c->k];
	struct journal_options jo = { .fsync = gw_fsync_modes[g->cfg.fsync],
				      .ahead = (uint32_t)g->cfg.node.journal_ahead };
	struct net_udp_options opt = { .nonblock = 1, .rcvbuf = (int)g->cfg.rcvbuf,
				       .rxq_ovfl = 1 };
	struct net_bufsize rcv;
	struct sockaddr_in bind_addr;
	char path[300], why[64];
	int rc;

	char sec[16];

	gw_tape_section(c->k, sec, sizeof(sec));
	rc = addrlist_parse(tc->sequencer, c->seq_addrs, GW_MAX_SEQUENCERS);
	if (rc < 0) {
		log_err("[%s] sequencer \"%s\": %s", sec, tc->sequencer,
			gw_stream_addr_error(rc, why, sizeof(why), GW_MAX_SEQUENCERS));
		return rc;
	}
	c->n_seq = (unsigned)rc;
	c->acked = acked;
	if (mold_session_set(&c->sess, g->cfg.node.name) < 0)
		return -EINVAL; /* checked by gw_open */
	/* the loss generator's seed (the tape's are 12 and 13) */
	rx_drop_init(&c->drop, g->cfg.drop_rate,
		     rx_seed_of(g->cfg.node.name, g->cfg.drop_seed) + (c->k ? 62 + 3 * c->k : 14));
	if (c->n_seq > 1 || g->n_tapes > 1)
		log_info("command stream (tape %u) to %u sequencer nodes: %s", c->k, c->n_seq,
			 tc->sequencer);
	if ((rc = cmd_bind_addr(g, &bind_addr)) < 0)
		return rc;
	if (c->k)
		bind_addr.sin_port = 0; /* cmd_bind's port is tape 0's */
	if (c->k)
		snprintf(path, sizeof(path), "%s/commands-tape%u", g->cfg.node.state_dir, c->k);
	else
		snprintf(path, sizeof(path), "%s/commands", g->cfg.node.state_dir);
	if ((rc = gw_journal_open(&c->j, path, &jo)) < 0)
		return rc;
	if (g->n_parts > 1 && journal_last_seq(c->j) && (rc = tokens_rebuild(c, path)) < 0)
		return rc;
	c->next = journal_last_seq(c->j) ? journal_last_seq(c->j) + 1 : 1;
	if (c->acked >= c->next)
		c->acked = c->next - 1;
	if (journal_first_seq(c->j) && c->acked + 1 < journal_first_seq(c->j))
		c->acked = journal_first_seq(c->j) - 1;
	c->scratch = malloc(JOURNAL_MAX_RECORD);
	c->slot_cmd = calloc((size_t)g->cfg.send_batch * c->n_seq, sizeof(*c->slot_cmd));
	if (!c->scratch || !c->slot_cmd ||
	    net_batch_init(&c->out, (unsigned)g->cfg.send_batch * c->n_seq,
			   g->cfg.max_datagram) < 0 ||
	    (src_budget_init(&c->budget, g->cfg.node.retrans_budget, 0),
	     net_batch_init(&c->in, 32, 256) < 0))
		return -ENOMEM;
	c->fd = net_udp_open(&bind_addr, &opt, &rcv, NULL);
	if (c->fd < 0) {
		char a[32];

		net_format_addr(&bind_addr, a, sizeof(a));
		log_err("command socket %s: %s", a, strerror(-c->fd));
		return c->fd;
	}
	rxpath_bufsize_check("command socket", &rcv);
	{ /* where sequencers' requests for the command stream come to */
		char a[32];

		bind_addr.sin_port = htons((uint16_t)net_local_port(c->fd));
		net_format_addr(&bind_addr, a, sizeof(a));
		if (c->k)
			log_info("tape %u's command stream from %s (its retransmission server)", c->k, a);
		else
			log_info("command stream from %s (its retransmission server)", a);
	}
	ev_io_init(&c->io, on_cmd_read, c->fd, EV_READ);
	c->io.data = c;
	ev_io_start(g->loop, &c->io);
	if (journal_sync_fd(c->j) >= 0) {
		ev_io_init(&c->sync_io, on_cmd_sync, journal_sync_fd(c->j), EV_READ);
		c->sync_io.data = c;
		ev_io_start(g->loop, &c->sync_io);
	}
	c->resend_base = c->last_send = ev_now(g->loop);
	return 0;
}

static void cmd_close(struct gw_cmd *c)
{
	struct gw *g = c->g;

	if (c->fd >= 0) {
		cmd_send_now(c, 1);
		ev_io_stop(g->loop, &c->io);
		ev_io_stop(g->loop, &c->sync_io);
		close(c->fd);
		c->fd = -1;
	}
	journal_close(c->j);
	c->j = NULL;
	net_batch_fini(&c->out);
	net_batch_fini(&c->in);
	free(c->scratch);
	c->scratch = NULL;
	free(c->slot_cmd);
	c->slot_cmd = NULL;
}

int gw_cmd_open(struct gw *g, const uint64_t *pos)
{
	int rc;

	for (unsigned k = 0; k < g->n_tapes; k++)
		if ((rc = cmd_open(&g->cmd[k], pos[gw_pos_of(k, GW_POS_CMD)])) < 0)
			return rc;
	return 0;
}

void gw_cmd_close(struct gw *g)
{
	for (unsigned k = 0; k < g->n_tapes; k++)
		cmd_close(&g->cmd[k]);
}
