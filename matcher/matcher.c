#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "clock.h"
#include "ctl.h"
#include "engine.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "matcher.h"
#include "moldudp64.h"
#include "net.h"
#include "tape.h"
#include "wire.h"

#define MAX_SYMBOLS 256
#define EXEC_SLOT 128 /* bytes per exec block in the ring: 14 + OUCH_MAX_LEN fits */
#define RETRANS_PACKETS 64 /* packets answered per request at most */
#define DRAIN_ROUNDS 16 /* recvmmsg calls per wakeup, so one stream cannot starve the rest */

#define OFF(f) offsetof(struct matcher_config, f)
static const struct config_key matcher_keys[] = {
	DAEMON_NODE_KEYS(struct matcher_config, node),
	{ "matcher", "partition", CONFIG_UINT, OFF(partition), 0, "0", 0, 1023, NULL,
	  "the partition this replica serves" },
	{ "matcher", "tape_group", CONFIG_STRING, OFF(tape_group), 64, NULL, 0, 0, NULL,
	  "multicast group:port of the tape" },
	{ "matcher", "tape_iface", CONFIG_STRING, OFF(tape_iface), 64, "127.0.0.1", 0, 0, NULL,
	  "interface (name or address) to receive the tape and send executions on" },
	{ "matcher", "tape_session", CONFIG_STRING, OFF(tape_session), 16, "TAPE", 0, 0, NULL,
	  "MoldUDP64 session name of the tape" },
	{ "matcher", "tape_retrans", CONFIG_STRING, OFF(tape_retrans), 64, NULL, 0, 0, NULL,
	  "host:port of the tape's retransmission server (a sequencer)" },
	{ "matcher", "exec_group", CONFIG_STRING, OFF(exec_group), 64, NULL, 0, 0, NULL,
	  "multicast group:port of this partition's execution stream" },
	{ "matcher", "exec_retrans", CONFIG_STRING, OFF(exec_retrans), 64, NULL, 0, 0, NULL,
	  "host:port where this replica serves execution retransmissions" },
	{ "matcher", "symbols", CONFIG_STRING, OFF(symbols), 512,
	  "AAPL MSFT AMZN GOOG META NVDA TSLA INTC", 0, 0, NULL,
	  "the symbols this partition trades, separated by spaces" },
	{ "matcher", "max_shares", CONFIG_UINT, OFF(max_shares), 0, "1000000", 1, 4294967295.0,
	  NULL, "largest order size; larger orders are rejected" },
	{ "matcher", "max_orders", CONFIG_UINT, OFF(max_orders), 0, "1048576", 16, 1 << 28, NULL,
	  "open orders at once (preallocated)" },
	{ "matcher", "max_tokens", CONFIG_UINT, OFF(max_tokens), 0, "4194304", 16, 1 << 30, NULL,
	  "order tokens remembered for the day (preallocated)" },
	{ "matcher", "max_levels", CONFIG_UINT, OFF(max_levels), 0, "4096", 4, 1 << 20, NULL,
	  "price levels per side per symbol" },
	{ "matcher", "ring", CONFIG_UINT, OFF(ring), 0, "1048576", 1024, 1 << 26, NULL,
	  "execution blocks kept in memory for retransmission" },
	{ "matcher", "rcvbuf", CONFIG_SIZE, OFF(rcvbuf), 0, "8M", 0, 0, NULL,
	  "receive buffer of the tape socket" },
	{ "matcher", "sndbuf", CONFIG_SIZE, OFF(sndbuf), 0, "4M", 0, 0, NULL,
	  "send buffer of the execution socket" },
	{ "matcher", "heartbeat", CONFIG_DURATION, OFF(heartbeat_ns), 0, "100ms", 0, 0, NULL,
	  "execution stream heartbeat interval when idle" },
	{ "matcher", "retrans_wait", CONFIG_DURATION, OFF(retrans_wait_ns), 0, "50ms", 0, 0, NULL,
	  "how long to wait for a retransmission before asking again" },
	{ "matcher", "batch", CONFIG_UINT, OFF(batch), 0, "64", 1, 1024, NULL,
	  "datagrams per recvmmsg/sendmmsg" },
	{ "matcher", "max_datagram", CONFIG_UINT, OFF(max_datagram), 0, "1472", 64, 65507, NULL,
	  "largest execution datagram" },
	CONFIG_END,
};

const struct config_spec matcher_config_spec = { .keys = matcher_keys };

enum matcher_state { M_STARTING, M_CATCHING_UP, M_LIVE, M_STATE_MAX };
static const char *const state_names[M_STATE_MAX] = { "starting", "catching-up", "live" };

struct matcher_stats {
	uint64_t tape_packets, tape_malformed, tape_wrong_session, tape_duplicates, tape_gaps;
	uint64_t tape_fenced, events_applied, events_other_partition, events_malformed;
	uint64_t retrans_requests_sent, exec_blocks, exec_packets, exec_send_errors;
	uint64_t exec_requests_served, exec_requests_too_old, exec_requests_bad;
	uint64_t exec_blocks_resent, heartbeats_sent, rxq_dropped;
};

struct matcher {
	struct ev_loop *loop;
	const struct matcher_config *cfg;
	struct engine *engine;
	enum matcher_state state;
	char *symbol_store;
	const char *symbols[MAX_SYMBOLS];

	/* the tape */
	int tape_fd;
	struct net_batch rx;
	ev_io tape_io;
	struct mold_session tape_session;
	struct sockaddr_in tape_retrans;
	uint64_t next_seq; /* next tape seq to apply */
	uint64_t highest_seen; /* highest tape seq known to exist */
	uint64_t term; /* highest term seen */
	uint64_t commit;
	uint64_t last_request_ns;
	int heard; /* a packet of the tape has arrived */
	struct arena arena;

	/* the execution stream */
	int exec_fd, retrans_fd;
	struct sockaddr_in exec_group;
	struct mold_session exec_session;
	struct net_batch tx, req_rx, req_tx;
	struct mold_builder pkt;
	unsigned pkt_slot; /* tx slot being built, or tx.n when none */
	unsigned tx_count;
	uint64_t exec_next; /* next exec sequence number */
	uint64_t cur_tape_seq; /* the event being applied, for exec headers */
	uint8_t *ring; /* cfg->ring slots of EXEC_SLOT bytes: u16 length + block */
	uint64_t last_exec_send_ns;
	ev_io retrans_io;

	ev_timer tick;
	struct ctl_server *ctl;
	struct matcher_stats st;
};

static struct log_ratelimit rl_malformed = LOG_RATELIMIT_INIT(5, 5);

static void set_state(struct matcher *m, enum matcher_state s)
{
	if (m->state == s)
		return;
	log_notice("%s -> %s at tape seq %llu", state_names[m->state], state_names[s],
		   (unsigned long long)(m->next_seq - 1));
	m->state = s;
}

/* --- the execution stream ------------------------------------------------- */

static void exec_flush(struct matcher *m)
{
	if (m->pkt_slot < m->tx.n) {
		m->tx.lens[m->pkt_slot] = mold_build_end(&m->pkt);
		m->tx.addrs[m->pkt_slot] = m->exec_group;
		m->tx_count++;
		m->pkt_slot = m->tx.n;
	}
	if (m->tx_count == 0)
		return;
	int sent = net_batch_send(&m->tx, m->exec_fd, m->tx_count);
	if (sent < (int)m->tx_count)
		m->st.exec_send_errors += m->tx_count - (unsigned)(sent < 0 ? 0 : sent);
	m->st.exec_packets += m->tx_count;
	m->tx_count = 0;
	m->last_exec_send_ns = mono_ns();
}

static void exec_begin_packet(struct matcher *m)
{
	if (m->tx_count == m->tx.n)
		exec_flush(m);
	m->pkt_slot = m->tx_count;
	mold_build_begin(&m->pkt, net_batch_slot(&m->tx, m->pkt_slot), m->cfg->max_datagram,
			 &m->exec_session, m->exec_next);
}

/* The engine's output: one exec block per message, into the current packet
 * and the retransmission ring. */
static void on_emit(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct matcher *m = ctx;
	uint8_t block[EXEC_SLOT - 2];
	int len = ouch_encode_outbound(msg, block + WIRE_EXEC_HDR_LEN,
				       sizeof(block) - WIRE_EXEC_HDR_LEN);
	uint8_t *slot;

	if (len < 0) {
		log_err("cannot encode an outbound %c message: %s", msg->type, ouch_strerror(len));
		return;
	}
	wire_exec_header(block, m->cur_tape_seq, user);
	len += WIRE_EXEC_HDR_LEN;
	slot = m->ring + (m->exec_next % m->cfg->ring) * EXEC_SLOT;
	slot[0] = (uint8_t)(len >> 8);
	slot[1] = (uint8_t)len;
	memcpy(slot + 2, block, (size_t)len);
	if (m->pkt_slot == m->tx.n)
		exec_begin_packet(m);
	if (mold_build_add(&m->pkt, block, (uint16_t)len) < 0) {
		m->tx.lens[m->pkt_slot] = mold_build_end(&m->pkt);
		m->tx.addrs[m->pkt_slot] = m->exec_group;
		m->tx_count++;
		exec_begin_packet(m);
		mold_build_add(&m->pkt, block, (uint16_t)len);
	}
	m->exec_next++;
	m->st.exec_blocks++;
}

/* --- applying the tape ------------------------------------------------------ */

static int copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= cap)
		return -1;
	memcpy(dst, src ? src : "", n + 1);
	return 0;
}

/* Command -> engine command; -1 when a field cannot be what a gateway sends. */
static int to_engine_cmd(const Lockstep__Command *c, struct engine_cmd *e)
{
	memset(e, 0, sizeof(*e));
	if (copy_str(e->user, sizeof(e->user), c->user) < 0 ||
	    copy_str(e->firm, sizeof(e->firm), c->firm) < 0)
		return -1;
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
		const Lockstep__NewOrder *o = c->new_order;
		struct ouch_enter_order *x = &e->u.enter;

		e->kind = ENGINE_ENTER;
		if (copy_str(x->token, sizeof(x->token), o->token) < 0 ||
		    copy_str(x->stock, sizeof(x->stock), o->symbol) < 0 ||
		    copy_str(x->firm, sizeof(x->firm), o->firm) < 0)
			return -1;
		x->side = (char)o->side;
		x->shares = o->shares;
		x->price = o->price;
		x->tif = o->tif;
		x->display = (char)o->display;
		x->capacity = (char)o->capacity;
		x->iso = (char)o->iso;
		x->min_qty = o->min_qty;
		x->cross_type = (char)o->cross_type;
		x->customer_type = (char)o->customer_type;
		return 0;
	}
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		e->kind = ENGINE_CANCEL;
		e->u.cancel.shares = c->cancel->shares;
		return copy_str(e->u.cancel.token, sizeof(e->u.cancel.token), c->cancel->token);
	case LOCKSTEP__COMMAND__BODY_REPLACE: {
		const Lockstep__ReplaceOrder *r = c->replace;
		struct ouch_replace_order *x = &e->u.replace;

		e->kind = ENGINE_REPLACE;
		if (copy_str(x->existing_token, sizeof(x->existing_token), r->existing_token) < 0 ||
		    copy_str(x->replacement_token, sizeof(x->replacement_token),
			     r->replacement_token) < 0)
			return -1;
		x->shares = r->shares;
		x->price = r->price;
		x->tif = r->tif;
		x->display = (char)r->display;
		x->iso = (char)r->iso;
		x->min_qty = r->min_qty;
		return 0;
	}
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		e->kind = ENGINE_MODIFY;
		e->u.modify.side = (char)c->modify->side;
		e->u.modify.shares = c->modify->shares;
		return copy_str(e->u.modify.token, sizeof(e->u.modify.token), c->modify->token);
	case LOCKSTEP__COMMAND__BODY_SESSION:
		e->kind = ENGINE_CANCEL_ALL;
		return 0;
	default:
		return -1;
	}
}

/* Applies the event at m->next_seq. Returns 0, or -EAGAIN when it is not
 * committed yet (the caller stops and waits for the commit position). */
static int apply_event(struct matcher *m, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct tape_event_view v;
	struct engine_cmd cmd;
	Lockstep__Command *c;

	if (tape_event_peek(data, len, &v) < 0 || v.seq != seq) {
		/* Every replica sees the same bytes, so skipping keeps them equal. */
		m->st.events_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_ERR, "tape seq %llu: malformed event skipped",
				(unsigned long long)seq);
		return 0;
	}
	if (v.term > m->term)
		m->term = v.term;
	if (v.commit > m->commit)
		m->commit = v.commit;
	if (seq > m->commit)
		return -EAGAIN;
	m->cur_tape_seq = seq;
	if (v.body != TAPE_BODY_COMMAND) {
		engine_advance_time(m->engine, v.timestamp, on_emit, m);
		return 0;
	}
	arena_reset(&m->arena);
	c = lockstep__command__unpack(&m->arena.allocator, v.body_len, v.body_data);
	if (!c || to_engine_cmd(c, &cmd) < 0) {
		m->st.events_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_ERR,
				"tape seq %llu: undecodable command skipped", (unsigned long long)seq);
		return 0;
	}
	if (c->partition != m->cfg->partition) {
		m->st.events_other_partition++;
		engine_advance_time(m->engine, v.timestamp, on_emit, m);
		return 0;
	}
	engine_apply(m->engine, seq, v.timestamp, &cmd, on_emit, m);
	m->st.events_applied++;
	return 0;
}

static void request_gap(struct matcher *m, uint64_t now)
{
	uint8_t buf[MOLD_REQUEST_LEN];
	struct mold_request r = { .session = m->tape_session, .seq = m->next_seq };
	uint64_t want = m->highest_seen - m->next_seq + 1;

	if (m->highest_seen < m->next_seq || now - m->last_request_ns < m->cfg->retrans_wait_ns)
		return;
	r.count = want > 0xFFFE ? 0xFFFE : (uint16_t)want;
	mold_build_request(buf, &r);
	if (sendto(m->tape_fd, buf, sizeof(buf), 0, (struct sockaddr *)&m->tape_retrans,
		   sizeof(m->tape_retrans)) == (ssize_t)sizeof(buf))
		m->st.retrans_requests_sent++;
	m->last_request_ns = now;
}

static void on_tape_packet(struct matcher *m, const uint8_t *buf, size_t len)
{
	struct mold_packet p;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t blen;
	int err = mold_parse(buf, len, &m->tape_session, 0, &p);

	m->st.tape_packets++;
	if (err == MOLD_E_SESSION) {
		m->st.tape_wrong_session++;
		return;
	}
	if (err < 0) {
		m->st.tape_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "malformed tape packet (%zu bytes): %s",
				len, mold_strerror(err));
		return;
	}
	m->heard = 1;
	if (p.kind != MOLD_DATA) {
		if (p.seq > 0 && p.seq - 1 > m->highest_seen)
			m->highest_seen = p.seq - 1;
		return;
	}
	if (p.seq + p.count - 1 > m->highest_seen)
		m->highest_seen = p.seq + p.count - 1;
	mold_iter_init(&it, &p);
	while (mold_iter_next(&it, &seq, &data, &blen)) {
		if (seq < m->next_seq) {
			m->st.tape_duplicates++;
			continue;
		}
		if (seq > m->next_seq) { /* go-back-N: the gap is requested, this waits */
			m->st.tape_gaps++;
			return;
		}
		if (apply_event(m, seq, data, blen) < 0)
			return;
		m->next_seq++;
	}
}

static void on_tape(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	int n;

	(void)loop;
	(void)revents;
	for (int round = 0; round < DRAIN_ROUNDS; round++) {
		n = net_batch_recv(&m->rx, m->tape_fd);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			on_tape_packet(m, net_batch_slot(&m->rx, (unsigned)i), m->rx.lens[i]);
		if ((unsigned)n < m->rx.n)
			break;
	}
	m->st.rxq_dropped = m->rx.rxq_dropped;
	exec_flush(m);
	if (m->highest_seen >= m->next_seq)
		request_gap(m, mono_ns());
	else if (m->heard)
		set_state(m, M_LIVE);
}

/* --- execution retransmissions ------------------------------------------- */

static void serve_request(struct matcher *m, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	struct mold_request r;
	struct mold_builder b;
	uint64_t oldest = m->exec_next > m->cfg->ring ? m->exec_next - m->cfg->ring : 1;
	uint64_t seq, end;
	unsigned k = 0;

	if (mold_parse_request(buf, len, &m->exec_session, &r) < 0) {
		m->st.exec_requests_bad++;
		return;
	}
	m->st.exec_requests_served++;
	if (r.seq < oldest) {
		m->st.exec_requests_too_old++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"exec retransmission of %llu asked, oldest held is %llu",
				(unsigned long long)r.seq, (unsigned long long)oldest);
		return;
	}
	seq = r.seq;
	end = r.seq + r.count < m->exec_next ? r.seq + r.count : m->exec_next;
	while (seq < end && k < m->req_tx.n && k < RETRANS_PACKETS) {
		mold_build_begin(&b, net_batch_slot(&m->req_tx, k), m->cfg->max_datagram,
				 &m->exec_session, seq);
		for (; seq < end; seq++) {
			const uint8_t *slot = m->ring + (seq % m->cfg->ring) * EXEC_SLOT;
			uint16_t blen = (uint16_t)(slot[0] << 8 | slot[1]);

			if (mold_build_add(&b, slot + 2, blen) < 0)
				break;
			m->st.exec_blocks_resent++;
		}
		m->req_tx.lens[k] = mold_build_end(&b);
		m->req_tx.addrs[k] = *from;
		k++;
	}
	if (k)
		net_batch_send(&m->req_tx, m->retrans_fd, k);
}

static void on_retrans(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	int n = net_batch_recv(&m->req_rx, m->retrans_fd);

	(void)loop;
	(void)revents;
	for (int i = 0; i < n; i++)
		serve_request(m, net_batch_slot(&m->req_rx, (unsigned)i), m->req_rx.lens[i],
			      &m->req_rx.addrs[i]);
}

/* --- timers and control ----------------------------------------------------- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct matcher *m = w->data;
	uint64_t now = mono_ns();

	(void)loop;
	(void)revents;
	if (m->highest_seen >= m->next_seq) {
		if (m->state == M_LIVE || m->state == M_STARTING)
			set_state(m, M_CATCHING_UP);
		request_gap(m, now);
	}
	if (now - m->last_exec_send_ns >= m->cfg->heartbeat_ns) {
		uint8_t hb[MOLD_HEADER_LEN];

		mold_build_heartbeat(hb, &m->exec_session, m->exec_next);
		sendto(m->exec_fd, hb, sizeof(hb), 0, (struct sockaddr *)&m->exec_group,
		       sizeof(m->exec_group));
		m->last_exec_send_ns = now;
		m->st.heartbeats_sent++;
	}
}

#define COUNTER(name) { PROTOBUF_C_MESSAGE_INIT(&lockstep__counter__descriptor), #name, m->st.name }

static void on_control(void *ctx, const Lockstep__ControlRequest *req, Lockstep__ControlReply *r)
{
	struct matcher *m = ctx;
	static char msg[128];

	r->name = (char *)m->cfg->node.name;
	r->role = "matcher";
	r->state = (char *)state_names[m->state];
	r->term = m->term;
	r->seq = m->next_seq - 1;
	r->commit = m->commit;
	r->hash = engine_hash(m->engine);
	r->partition = (uint32_t)m->cfg->partition;
	switch (req->op) {
	case LOCKSTEP__CONTROL_REQUEST__OP__STATUS:
		break;
	case LOCKSTEP__CONTROL_REQUEST__OP__STATS: {
		static Lockstep__Counter c[32];
		static Lockstep__Counter *cp[32];
		struct engine_stats es;
		size_t n = 0;

		engine_get_stats(m->engine, &es);
		Lockstep__Counter all[] = {
			COUNTER(tape_packets), COUNTER(tape_malformed), COUNTER(tape_wrong_session),
			COUNTER(tape_duplicates), COUNTER(tape_gaps), COUNTER(tape_fenced),
			COUNTER(events_applied), COUNTER(events_other_partition),
			COUNTER(events_malformed), COUNTER(retrans_requests_sent),
			COUNTER(exec_blocks), COUNTER(exec_packets), COUNTER(exec_send_errors),
			COUNTER(exec_requests_served), COUNTER(exec_requests_too_old),
			COUNTER(exec_requests_bad), COUNTER(exec_blocks_resent),
			COUNTER(heartbeats_sent), COUNTER(rxq_dropped),
		};
		for (; n < sizeof(all) / sizeof(all[0]); n++) {
			c[n] = all[n];
			cp[n] = &c[n];
		}
		static const char *const en[] = { "orders_open", "accepted", "rejects", "canceled",
						  "matches", "shares_matched", "ignored_duplicates" };
		uint64_t ev[] = { es.orders_open, es.accepted, es.rejects, es.canceled,
				  es.matches, es.shares_matched, es.ignored_duplicates };
		for (size_t i = 0; i < 7 && n < 32; i++, n++) {
			lockstep__counter__init(&c[n]);
			c[n].name = (char *)en[i];
			c[n].value = ev[i];
			cp[n] = &c[n];
		}
		r->counters = cp;
		r->n_counters = n;
		break;
	}
	default:
		snprintf(msg, sizeof(msg), "not supported by the matcher yet");
		r->error = -EOPNOTSUPP;
		r->message = msg;
	}
}

/* --- set-up ---------------------------------------------------------------- */

static int parse_symbols(struct matcher *m, size_t *n)
{
	char *save = NULL;

	m->symbol_store = strdup(m->cfg->symbols);
	if (!m->symbol_store)
		return -ENOMEM;
	*n = 0;
	for (char *t = strtok_r(m->symbol_store, " \t,", &save); t;
	     t = strtok_r(NULL, " \t,", &save)) {
		if (*n == MAX_SYMBOLS || strlen(t) > 8)
			return -EINVAL;
		m->symbols[(*n)++] = t;
	}
	return *n ? 0 : -EINVAL;
}

static int open_sockets(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options o = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1,
				     .reuseaddr = 1 };
	struct net_udp_options so = { .sndbuf = (int)c->sndbuf, .nonblock = 1 };
	struct sockaddr_in group, local;
	struct net_bufsize rcv;
	char session[16];
	int err;

	if ((err = net_parse_addr(c->tape_group, &group)) < 0 ||
	    (err = net_parse_addr(c->tape_retrans, &m->tape_retrans)) < 0 ||
	    (err = net_parse_addr(c->exec_group, &m->exec_group)) < 0 ||
	    (err = net_parse_addr(c->exec_retrans, &local)) < 0) {
		log_err("bad address in the [matcher] section: %s", strerror(-err));
		return err;
	}
	if (mold_session_set(&m->tape_session, c->tape_session) < 0)
		return -EINVAL;
	snprintf(session, sizeof(session), "EXEC%llu", (unsigned long long)c->partition);
	mold_session_set(&m->exec_session, session);
	m->tape_fd = net_mcast_recv_open(&group, c->tape_iface, &o, &rcv);
	if (m->tape_fd < 0) {
		log_err("tape %s on %s: %s", c->tape_group, c->tape_iface, strerror(-m->tape_fd));
		return m->tape_fd;
	}
	if (rcv.capped)
		log_warn("tape receive buffer capped at %d bytes (asked %d): raise net.core.rmem_max",
			 rcv.granted, rcv.requested);
	struct sockaddr_in any = { .sin_family = AF_INET };
	m->exec_fd = net_udp_open(&any, &so, NULL, NULL);
	if (m->exec_fd < 0)
		return m->exec_fd;
	if ((err = net_mcast_send_setup(m->exec_fd, c->tape_iface, 1)) < 0) {
		log_err("exec stream on %s: %s", c->tape_iface, strerror(-err));
		return err;
	}
	m->retrans_fd = net_udp_open(&local, &so, NULL, NULL);
	if (m->retrans_fd < 0) {
		log_err("exec_retrans %s: %s", c->exec_retrans, strerror(-m->retrans_fd));
		return m->retrans_fd;
	}
	return 0;
}

int matcher_create(struct matcher **out, struct ev_loop *loop, const struct matcher_config *cfg)
{
	struct matcher *m = calloc(1, sizeof(*m));
	struct engine_config ec = { 0 };
	int err;

	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->cfg = cfg;
	m->tape_fd = m->exec_fd = m->retrans_fd = -1;
	m->next_seq = 1;
	m->exec_next = 1;
	if ((err = parse_symbols(m, &ec.n_symbols)) < 0) {
		log_err("[matcher] symbols: want 1..%d symbols of up to 8 characters", MAX_SYMBOLS);
		goto out_free;
	}
	ec.symbols = m->symbols;
	ec.max_shares = (uint32_t)cfg->max_shares;
	ec.max_orders = (uint32_t)cfg->max_orders;
	ec.max_tokens = (uint32_t)cfg->max_tokens;
	ec.max_levels = (uint32_t)cfg->max_levels;
	if ((err = engine_create(&m->engine, &ec)) < 0) {
		log_err("engine: %s", strerror(-err));
		goto out_free;
	}
	m->ring = malloc(cfg->ring * EXEC_SLOT);
	if (!m->ring || arena_init(&m->arena, 1 << 16) < 0 ||
	    net_batch_init(&m->rx, (unsigned)cfg->batch, 65536) < 0 ||
	    net_batch_init(&m->tx, (unsigned)cfg->batch, cfg->max_datagram) < 0 ||
	    net_batch_init(&m->req_rx, 16, 64) < 0 ||
	    net_batch_init(&m->req_tx, RETRANS_PACKETS, cfg->max_datagram) < 0) {
		err = -ENOMEM;
		goto out_free;
	}
	m->pkt_slot = m->tx.n;
	if ((err = open_sockets(m)) < 0)
		goto out_free;
	if ((err = ctl_server_open(&m->ctl, loop, cfg->node.control, on_control, m)) < 0) {
		log_err("control socket %s: %s", cfg->node.control, strerror(-err));
		goto out_free;
	}
	ev_io_init(&m->tape_io, on_tape, m->tape_fd, EV_READ);
	m->tape_io.data = m;
	ev_io_start(loop, &m->tape_io);
	ev_io_init(&m->retrans_io, on_retrans, m->retrans_fd, EV_READ);
	m->retrans_io.data = m;
	ev_io_start(loop, &m->retrans_io);
	ev_timer_init(&m->tick, on_tick, 0.01, 0.01);
	m->tick.data = m;
	ev_timer_start(loop, &m->tick);
	log_notice("partition %llu, %zu symbols, tape %s, executions %s (retransmissions on %s)",
		   (unsigned long long)cfg->partition, ec.n_symbols, cfg->tape_group, cfg->exec_group,
		   cfg->exec_retrans);
	*out = m;
	return 0;

out_free:
	matcher_destroy(m);
	return err;
}

void matcher_stop(struct matcher *m)
{
	uint8_t eos[MOLD_HEADER_LEN];

	exec_flush(m);
	mold_build_end_of_session(eos, &m->exec_session, m->exec_next);
	if (m->exec_fd >= 0)
		sendto(m->exec_fd, eos, sizeof(eos), 0, (struct sockaddr *)&m->exec_group,
		       sizeof(m->exec_group));
	log_notice("tape seq %llu applied, hash %016llx", (unsigned long long)(m->next_seq - 1),
		   (unsigned long long)engine_hash(m->engine));
}

void matcher_destroy(struct matcher *m)
{
	if (!m)
		return;
	ctl_server_close(m->ctl);
	if (m->loop) {
		ev_io_stop(m->loop, &m->tape_io);
		ev_io_stop(m->loop, &m->retrans_io);
		ev_timer_stop(m->loop, &m->tick);
	}
	if (m->tape_fd >= 0)
		close(m->tape_fd);
	if (m->exec_fd >= 0)
		close(m->exec_fd);
	if (m->retrans_fd >= 0)
		close(m->retrans_fd);
	net_batch_fini(&m->rx);
	net_batch_fini(&m->tx);
	net_batch_fini(&m->req_rx);
	net_batch_fini(&m->req_tx);
	arena_fini(&m->arena);
	engine_destroy(m->engine);
	free(m->ring);
	free(m->symbol_store);
	free(m);
}
