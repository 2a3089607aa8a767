/* The tape recorder (recorder.h): the tape in (common/rx.h over one or two
 * networks), the journal, the retransmission server (common/tapeserve.h),
 * and the daemon's hooks. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abnet.h"
#include "addrlist.h"
#include "auth_node.h"
#include "clock.h"
#include "flowstatus.h"
#include "journal.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "recorder_private.h"
#include "rx.h"
#include "rxpath.h"
#include "tape.h"
#include "tapeday.h"
#include "tapeserve.h"

static struct log_ratelimit rl_rec = LOG_RATELIMIT_INIT(1, 5);

static const char *const rec_state_names[REC_STATE_MAX] = { "catching-up", "live" };

static const struct counter_def rec_stat_defs[] = {
	COUNTER(tape_packets), COUNTER(tape_malformed), COUNTER(tape_wrong_session),
	COUNTER(tape_fenced), COUNTER(tape_answers), COUNTER(tape_too_old),
	COUNTER(tape_unrecoverable), COUNTER(events_journalled), COUNTER(events_malformed),
	COUNTER(journal_errors), COUNTER(flow_status_ignored), COUNTER(retrans_auth_dropped),
	COUNTER(tape_first_a), COUNTER(tape_first_b), COUNTER(repair_heard),
	COUNTER(repair_answers), COUNTER(repair_answers_suppressed), COUNTER(repair_pending),
	COUNTER(repair_data), COUNTER(retrans_owed), COUNTER(tape_gaps),
	COUNTER(tape_duplicates), COUNTER(tape_held), COUNTER(requests_sent),
	COUNTER(blocks_requested), COUNTER(requests_suppressed), COUNTER(retrans_requests), COUNTER(retrans_bad_requests),
	COUNTER(retrans_blocks_sent), COUNTER(retrans_packets_sent), COUNTER(retrans_too_old),
	COUNTER(retrans_budget_refused), COUNTER(rxq_dropped), COUNTER(drops_injected),
	COUNTER(retrans_bytes_sent), COUNTER(drops_injected_data), COUNTER(retrans_answers),
};
_Static_assert(ARRAY_SIZE(rec_stat_defs) == sizeof(struct rec_stats) / sizeof(uint64_t),
	       "a name for every counter");

static const char *const fsync_names[] = { "interval", "none", NULL };
static const enum journal_fsync rec_fsync_modes[] = { JOURNAL_FSYNC_INTERVAL,
						      JOURNAL_FSYNC_NONE };

#define OFF(f) offsetof(struct rec_config, f)
#define STR_(x) #x
#define STR(x) STR_(x)
static const struct config_key rec_keys[] = {
	DAEMON_NODE_KEYS(struct rec_config, node),
	RXPATH_TAPE_KEYS(struct rec_config, "recorder"),
	{ "recorder", "tape_group", CONFIG_STRING, OFF(tape_group), 64, "239.255.0.1:9200", 0, 0,
	  NULL, "multicast group:port of the tape" },
	{ "recorder", "tape_iface", CONFIG_STRING, OFF(tape_iface), 64, "127.0.0.1", 0, 0, NULL,
	  "interface (name or address) to receive the tape on, and to ask and answer from" },
	{ "recorder", "tape_session", CONFIG_STRING, OFF(tape_session), 16, "TAPE", 0, 0, NULL,
	  "MoldUDP64 session of the tape's first day" },
	{ "recorder", "tape_group_b", CONFIG_STRING, OFF(tape_group_b), 64, "", 0, 0, NULL,
	  "A/B: the tape's group:port on network B, joined beside tape_group (empty: network "
	  "A only)" },
	{ "recorder", "tape_iface_b", CONFIG_STRING, OFF(tape_iface_b), 64, "", 0, 0, NULL,
	  "A/B: network B's interface (empty: tape_iface)" },
	{ "recorder", "upstream", CONFIG_STRING, OFF(upstream), 512, NULL, 0, 0, NULL,
	  "comma-separated host:port of the retransmission servers this recorder asks for what "
	  "it missed: the sequencers' retrans addresses, or a recorder nearer them (at most "
	  STR(RX_MAX_SERVERS) ", asked in turn)" },
	{ "recorder", "retrans", CONFIG_STRING, OFF(retrans), 64, NULL, 0, 0, NULL,
	  "host:port where this recorder answers the tape's retransmission requests (the "
	  "receivers' tape_recorders)" },
	{ "recorder", "fsync", CONFIG_ENUM, OFF(fsync), 0, "interval", 0, 0, fsync_names,
	  "interval: the journal is synced every fsync_interval (the sequencers hold every "
	  "event on a majority's disks already; a recorder that lost its tail asks again); "
	  "none: the page cache only" },
	{ "recorder", "fsync_interval", CONFIG_DURATION, OFF(fsync_interval_ns), 0, "100ms", 1e6,
	  60e9, NULL, "time between syncs under fsync = interval" },
	{ "recorder", "segment_size", CONFIG_SIZE, OFF(segment_size), 0, "64M", 1 << 16, 1ull << 40,
	  NULL, "roll the journal to a new segment past this size" },
	{ "recorder", "rcvbuf", CONFIG_SIZE, OFF(rcvbuf), 0, "64M", 0, 0, NULL,
	  "receive buffer of the tape sockets (SO_RCVBUFFORCE, else capped by rmem_max)" },
	{ "recorder", "sndbuf", CONFIG_SIZE, OFF(sndbuf), 0, "4M", 0, 0, NULL,
	  "send buffer of the retransmission socket" },
	{ "recorder", "batch", CONFIG_UINT, OFF(batch), 0, "64", 1, 1024, NULL,
	  "datagrams per recvmmsg" },
	{ "recorder", "max_datagram", CONFIG_UINT, OFF(max_datagram), 0, "1472", 64, 65507, NULL,
	  "largest answer datagram (the sequencers' max_datagram)" },
	{ "recorder", "retrans_packets", CONFIG_UINT, OFF(retrans_packets), 0, "64", 1, 1024,
	  NULL, "datagrams one answer holds at most" },
	{ "recorder", "repair_group", CONFIG_STRING, OFF(repair_group), 64, "", 0, 0, NULL,
	  "request suppression: a multicast group:port on tape_iface where receivers ask for "
	  "what they miss and hear each other ask (a gap someone else asked for waits for the "
	  "answer instead of asking again), and where repair_answer recorders answer, once a "
	  "range (empty: off)" },
	{ "recorder", "repair_ask", CONFIG_BOOL, OFF(repair_ask), 0, "yes", 0, 0, NULL,
	  "with repair_group: ask there first (three times), upstream only after" },
	{ "recorder", "repair_suppress", CONFIG_BOOL, OFF(repair_suppress), 0, "yes", 0, 0, NULL,
	  "with repair_group: a gap another receiver asked for there waits for the answer "
	  "instead of asking too (no: every receiver asks for itself, for comparison)" },
	{ "recorder", "repair_answer", CONFIG_BOOL, OFF(repair_answer), 0, "no", 0, 0, NULL,
	  "with repair_group: answer the requests heard there, by multicast to the group, one "
	  "answer a range per repair_holdoff (what is not journalled yet is answered once it is)" },
	{ "recorder", "repair_holdoff", CONFIG_DURATION, OFF(repair_holdoff_ns), 0, "5ms", 0, 1e9,
	  NULL, "with repair_answer: a range answered is not answered again this long" },
	CONFIG_END,
};
const struct config_spec rec_config_spec = { .keys = rec_keys };

static void set_state(struct recorder *r, enum rec_state s)
{
	if (r->state == s)
		return;
	log_notice("recorder: %s -> %s at tape seq %llu", rec_state_names[r->state],
		   rec_state_names[s], (unsigned long long)journal_last_seq(r->journal));
	r->state = s;
}

/* --- the journal --------------------------------------------------------- */

/* A day event journalled at index seq: its day's base (and, for a day's
 * START, its own segment). before: about to be appended. */
static void note_day(struct recorder *r, uint64_t seq, const struct tape_event_view *v, int before)
{
	enum tape_day_kind kind;
	uint32_t day;

	if (v->body != TAPE_BODY_DAY ||
	    tape_day_peek(v->body_data, v->body_len, &kind, &day) < 0 || kind != TAPE_DAY_START)
		return;
	if (before)
		journal_roll(r->journal);
	else
		(void)tapeday_learn(&r->days, day, seq);
}

static int flush(struct recorder *r)
{
	int e;

	if (!r->dirty)
		return 0;
	e = journal_flush(r->journal);
	if (e < 0) {
		r->st.journal_errors++;
		log_ratelimited(&rl_rec, LOG_LVL_ERR, "journal: %s", strerror(-e));
		return e;
	}
	r->dirty = 0;
	r->written = journal_last_seq(r->journal);
	return 0;
}

/* The days and the last term, from what the journal holds. */
static int rescan(struct recorder *r)
{
	struct journal_iter *it;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int e;

	if (journal_last_seq(r->journal) == 0)
		return 0;
	if ((e = journal_iter_open(&it, r->journal, journal_first_seq(r->journal))) < 0)
		return e;
	while ((e = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		struct tape_event_view v;

		r->term = term;
		if (tape_event_peek(data, len, &v) == 0)
			note_day(r, seq, &v, 0);
	}
	journal_iter_close(it);
	return e;
}

static int open_journal(struct recorder *r)
{
	const struct rec_config *c = r->cfg;
	struct journal_options jo = {
		.segment_bytes = c->segment_size,
		.fsync = rec_fsync_modes[c->fsync],
		.interval_ms = (uint32_t)(c->fsync_interval_ns / 1000000u),
		.ahead = (uint32_t)c->node.journal_ahead,
	};
	struct journal_report rep;
	char dir[300];
	int e;

	snprintf(dir, sizeof(dir), "%s/journal", c->node.state_dir);
	memset(&rep, 0, sizeof(rep));
	e = journal_open(&r->journal, dir, &jo, &rep);
	if (e == -EUCLEAN) {
		char why[1024];

		log_err("journal %s: %s", dir, journal_damage_text(&rep, dir, why, sizeof(why)));
		return e;
	}
	if (e < 0) {
		log_err("journal %s: %s", dir, strerror(-e));
		return e;
	}
	if (rep.cut_bytes)
		log_warn("journal %s: cut %llu bytes of a torn tail", dir,
			 (unsigned long long)rep.cut_bytes);
	if ((e = rescan(r)) < 0) {
		log_err("journal %s: reading: %s", dir, strerror(-e));
		return e;
	}
	r->written = journal_last_seq(r->journal);
	log_info("journal %s: %llu records, seq %llu..%llu", dir, (unsigned long long)rep.records,
		 (unsigned long long)rep.first_seq, (unsigned long long)rep.last_seq);
	return 0;
}

/* --- the tape in (common/rx.h) ------------------------------------------- */

static int on_event(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct recorder *r = ctx;
	struct tape_event_view v;
	int e;

	if (tape_event_peek(data, len, &v) < 0 || v.seq != seq) {
		r->st.events_malformed++;
		log_ratelimited(&rl_rec, LOG_LVL_WARNING, "tape seq %llu: not an event of that seq",
				(unsigned long long)seq);
		return RX_REJECT;
	}
	if (tape_term_fenced(r->term, v.term)) {
		r->st.tape_fenced++;
		log_ratelimited(&rl_rec, LOG_LVL_WARNING,
				"tape seq %llu: term %llu cannot follow term %llu: refused",
				(unsigned long long)seq, (unsigned long long)v.term,
				(unsigned long long)r->term);
		return RX_REJECT;
	}
	note_day(r, seq, &v, 1);
	e = journal_append(r->journal, seq, v.term, data, len);
	if (e < 0) {
		r->st.journal_errors++;
		log_ratelimited(&rl_rec, LOG_LVL_ERR, "journal: seq %llu: %s",
				(unsigned long long)seq, strerror(-e));
		return RX_HOLD; /* again at the next wakeup */
	}
	note_day(r, seq, &v, 0);
	r->term = v.term;
	r->dirty = 1;
	r->st.events_journalled++;
	return RX_TAKEN;
}

static void send_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	struct recorder *r = ctx;
	struct mold_request q = { .count = count };
	const struct sockaddr_in *dst = &r->upstream[server % r->n_upstream];
	uint8_t buf[AUTH_CONTROL_MAX];
	size_t n;

	tapeday_wire(&r->days, seq, &q.session, &q.seq);
	n = auth_node_request(buf, &q);
	if (sendto(r->req_fd, buf, n, 0, (const struct sockaddr *)dst, sizeof(*dst)) != (ssize_t)n)
		log_ratelimited(&rl_rec, LOG_LVL_WARNING, "tape request: %s", strerror(errno));
}

/* A recorder keeps every event: it never skips a hole, it keeps asking. */
static int on_lost(void *ctx, uint64_t from, uint64_t to)
{
	struct recorder *r = ctx;

	r->st.tape_unrecoverable++;
	log_ratelimited(&rl_rec, LOG_LVL_ERR,
			"tape %llu..%llu is no longer held upstream: this recorder cannot "
			"complete its journal (copy the range from a sequencer's journal)",
			(unsigned long long)from, (unsigned long long)(to - 1));
	return 0;
}

static const struct rx_ops rec_rx_ops = { on_event, send_request, on_lost };

static void tape_packet(struct recorder *r, uint8_t *buf, size_t len, int answer,
			enum ab_side side, const struct sockaddr_in *from)
{
	struct mold_packet p;
	uint64_t fresh;
	int e;

	if (auth_node_check(AUTH_TAPE, buf, &len, 0, from) < 0 ||
	    rx_drop(answer ? &r->drop_req : &r->drop_tape, buf, len))
		return;
	r->st.tape_packets++;
	e = tapeday_parse(&r->days, buf, len, 0, &p);
	if (e == TAPEDAY_LATER) {
		/* a later day began: at least its START exists past rx_high */
		if (rx_high(r->rx))
			rx_tail(r->rx, rx_high(r->rx) + 1, r->now);
		return;
	}
	if (e == MOLD_E_SESSION) {
		r->st.tape_wrong_session++;
		return;
	}
	if (e < 0) {
		r->st.tape_malformed++;
		return;
	}
	if (answer) {
		r->st.tape_answers++;
		if (p.kind == MOLD_HEARTBEAT) {
			r->st.tape_too_old++;
			rxpath_too_old(r->rx, rxpath_server(r->upstream, r->n_upstream, from), "tape",
				       from, p.seq, r->now);
		} else if (p.kind == MOLD_DATA) {
			rx_packet(r->rx, &p, r->now);
		}
		return;
	}
	r->heard = 1;
	fresh = ab_first_before(r->rx);
	rx_packet(r->rx, &p, r->now);
	ab_first_after(&r->first, r->rx, side, fresh);
}

static void rx_arm(struct recorder *r)
{
	rxpath_arm(r->loop, &r->rx_timer, rx_due(r->rx), r->now);
}

/* The end of a wakeup: what was journalled is written (and may be served),
 * held events are offered again, the state, the request timer. */
void rec_wakeup_end(struct recorder *r)
{
	if (rx_holding(r->rx))
		rx_resume(r->rx, r->now);
	(void)flush(r);
	if (r->n_pending)
		rec_owed_drain(r, r->now);
	if (r->heard && rx_missing(r->rx) == 0 && !rx_holding(r->rx))
		set_state(r, REC_LIVE);
	else if (rx_missing(r->rx) > 0 && r->state == REC_LIVE && rx_gap_count(r->rx) > 1)
		set_state(r, REC_CATCHING_UP);
	rx_arm(r);
}

static void on_tape(struct ev_loop *loop, ev_io *w, int revents)
{
	struct recorder *r = w->data;
	int answer = w == &r->req_io, n;
	enum ab_side side = w == &r->tape_b_io ? AB_B : AB_A;
	uint64_t *rxq = answer ? &r->rxq_req : side == AB_B ? &r->rxq_tape_b : &r->rxq_tape;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		n = net_batch_recv_counted(&r->in, w->fd, rxq);
		if (n <= 0)
			break;
		r->now = mono_ns();
		for (int i = 0; i < n; i++)
			tape_packet(r, net_batch_slot(&r->in, (unsigned)i), r->in.lens[i], answer, side,
				    &r->in.addrs[i]);
		if ((unsigned)n < r->in.n)
			break;
	}
	rec_wakeup_end(r);
}

static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct recorder *r = w->data;

	(void)revents;
	if (r->tape_b_fd >= 0) { /* A/B: both networks read before asking */
		ev_invoke(loop, &r->tape_b_io, EV_READ);
		ev_invoke(loop, &r->tape_io, EV_READ);
	}
	/* the others' requests waiting in the repair group's socket are heard
	 * before this one asks (on a busy host the wait is the scheduler's) */
	if (r->rep_fd >= 0)
		ev_invoke(loop, &r->rep_io, EV_READ);
	r->now = mono_ns();
	rx_tick(r->rx, r->now);
	rec_wakeup_end(r);
}

/* --- the retransmission server ------------------------------------------- */

/* A request reaching past what the journal holds: that part is owed, and
 * goes to the requester as soon as the journal holds it (this recorder
 * usually missed the same datagram and is fetching it), so that the
 * requester need not ask again. */
static void owe_unheld(struct recorder *r, const uint8_t *buf, size_t len,
		       const struct sockaddr_in *from)
{
	struct mold_request q;
	uint64_t hi;

	if (tapeday_parse_request(&r->days, buf, len, &q) < 0 || q.count == 0)
		return;
	hi = q.seq + q.count - 1;
	if (hi > r->written)
		rec_owe(r, q.seq > r->written ? q.seq : r->written + 1, hi, from, mono_ns());
}

static void on_srv(struct ev_loop *loop, ev_io *w, int revents)
{
	struct recorder *r = w->data;
	int n;

	(void)loop;
	(void)revents;
	(void)flush(r); /* what is journalled can be served */
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		n = net_batch_recv_counted(&r->in, r->srv_fd, &r->rxq_srv);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			uint8_t *buf = net_batch_slot(&r->in, (unsigned)i);
			const struct sockaddr_in *from = &r->in.addrs[i];
			size_t len = r->in.lens[i], tag = auth_node_reserve();

			/* a receiver's flow status: for the sequencers, not for us */
			if (len >= tag && flow_status_is(buf, len - tag)) {
				r->st.flow_status_ignored++;
				continue;
			}
			if (auth_node_check(AUTH_REQUEST, buf, &len, 0, from) < 0) {
				r->st.retrans_auth_dropped++;
				continue;
			}
			if (rx_drop(&r->drop_srv, buf, len))
				continue;
			owe_unheld(r, buf, len, from);
			tape_server_serve(&r->srv, r->journal, &r->days, buf, len, from, r->written,
					  mono_ns());
		}
		if ((unsigned)n < r->in.n)
			break;
	}
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct recorder *r = w->data;
	int e;

	(void)loop;
	(void)revents;
	(void)flush(r);
	if ((e = journal_tick(r->journal, mono_ns() / 1000000u)) < 0) {
		r->st.journal_errors++;
		log_ratelimited(&rl_rec, LOG_LVL_ERR, "journal sync: %s", strerror(-e));
	}
}

/* --- set-up ------------------------------------------------------------- */

static int open_sockets(struct recorder *r)
{
	const struct rec_config *c = r->cfg;
	struct net_udp_options o = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1,
				     .reuseaddr = 1 };
	struct net_udp_options ro = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1 };
	struct net_udp_options so = { .sndbuf = (int)c->sndbuf, .nonblock = 1, .rxq_ovfl = 1 };
	struct sockaddr_in group, local;
	struct net_bufsize rcv;
	const char *iface_b = *c->tape_iface_b ? c->tape_iface_b : c->tape_iface;

	if (net_parse_addr(c->tape_group, &group) < 0 || net_parse_addr(c->retrans, &local) < 0) {
		log_err("[recorder] tape_group \"%s\" or retrans \"%s\": not host:port", c->tape_group,
			c->retrans);
		return -EINVAL;
	}
	if ((r->tape_fd = net_mcast_recv_open(&group, c->tape_iface, &o, &rcv)) < 0) {
		log_err("tape %s on %s: %s", c->tape_group, c->tape_iface, strerror(-r->tape_fd));
		return r->tape_fd;
	}
	rxpath_bufsize_check("tape", &rcv);
	if (*c->tape_group_b) {
		if (net_parse_addr(c->tape_group_b, &group) < 0) {
			log_err("[recorder] tape_group_b \"%s\": not host:port", c->tape_group_b);
			return -EINVAL;
		}
		if ((r->tape_b_fd = net_mcast_recv_open(&group, iface_b, &o, &rcv)) < 0) {
			log_err("tape B %s on %s: %s", c->tape_group_b, iface_b,
				strerror(-r->tape_b_fd));
			return r->tape_b_fd;
		}
		rxpath_bufsize_check("tape B", &rcv);
	}
	if ((r->req_fd = net_udp_open_on(c->tape_iface, &ro, &rcv, NULL)) < 0) {
		log_err("tape request socket: %s", strerror(-r->req_fd));
		return r->req_fd;
	}
	if ((r->srv_fd = net_udp_open(&local, &so, NULL, NULL)) < 0) {
		log_err("retrans %s: %s", c->retrans, strerror(-r->srv_fd));
		return r->srv_fd;
	}
	r->srv.fd = r->srv_fd;
	return rec_repair_open(r, &o);
}

static int open_rx(struct recorder *r)
{
	const struct rec_config *c = r->cfg;
	struct rx_config rc = rxpath_tape_config(c->reorder_window, c->reorder_bytes,
						 *c->tape_group_b != 0, c->ab_wait_ns,
						 c->request_delay_ns, c->retrans_wait_ns,
						 c->retrans_wait_max_ns, &r->rng);
	/* with repair_ask the group is the near server: asked first */
	unsigned near = r->rep_fd >= 0 && c->repair_ask;
	int e = addrlist_parse(c->upstream, r->upstream + near, RX_MAX_SERVERS - (int)near);

	if (e <= 0) {
		log_err("[recorder] upstream \"%s\": not a list of 1 to %d host:port", c->upstream,
			RX_MAX_SERVERS - (int)near);
		return e < 0 ? e : -EINVAL;
	}
	if (near)
		r->upstream[0] = r->rep_group;
	r->n_upstream = (unsigned)e + near;
	rc.n_servers = r->n_upstream;
	rc.n_near = near;
	rxpath_loss_init(&r->rng,
			 (struct rx_drop *const[]){ &r->drop_tape, &r->drop_req, &r->drop_srv }, 3,
			 c->drop_rate, c->node.name, c->drop_seed, 0);
	if ((e = rx_create(&r->rx, &rc, &rec_rx_ops, r)) < 0) {
		log_err("tape receiver: %s", strerror(-e));
		return e;
	}
	/* from where the journal ends; an empty one from the tape's start */
	rx_start(r->rx, journal_last_seq(r->journal) + 1);
	return 0;
}

static void start_watchers(struct recorder *r)
{
	double tick = (double)r->cfg->fsync_interval_ns / 2e9;

	ev_io_init(&r->tape_io, on_tape, r->tape_fd, EV_READ);
	ev_io_init(&r->tape_b_io, on_tape, r->tape_b_fd, EV_READ);
	ev_io_init(&r->req_io, on_tape, r->req_fd, EV_READ);
	ev_io_init(&r->srv_io, on_srv, r->srv_fd, EV_READ);
	r->tape_io.data = r->tape_b_io.data = r->req_io.data = r->srv_io.data = r;
	ev_io_start(r->loop, &r->tape_io);
	if (r->tape_b_fd >= 0)
		ev_io_start(r->loop, &r->tape_b_io);
	ev_io_start(r->loop, &r->req_io);
	ev_io_start(r->loop, &r->srv_io);
	if (r->rep_fd >= 0) {
		ev_io_init(&r->rep_io, rec_repair_read, r->rep_fd, EV_READ);
		r->rep_io.data = r;
		ev_io_start(r->loop, &r->rep_io);
	}
	ev_init(&r->rx_timer, on_rx_timer);
	r->rx_timer.data = r;
	ev_timer_init(&r->tick, on_tick, tick, tick);
	r->tick.data = r;
	ev_timer_start(r->loop, &r->tick);
	/* a tape that is idle still has heartbeats: a gap at the end is asked
	 * for once one comes; an empty journal asks from the start at once */
	r->now = mono_ns();
	if (journal_last_seq(r->journal) == 0)
		rx_tail(r->rx, 1, r->now);
	rx_arm(r);
}

static int open_steps(struct recorder *r)
{
	const struct rec_config *cfg = r->cfg;
	int e;

	if (tapeday_init(&r->days, cfg->tape_session) < 0 || !cfg->tape_session[0]) {
		log_err("[recorder] tape_session '%s': 1 to 10 printable characters",
			cfg->tape_session);
		return -EINVAL;
	}
	if (net_batch_init(&r->in, (unsigned)cfg->batch, MOLD_MAX_PACKET) < 0 ||
	    tape_server_init(&r->srv, (unsigned)cfg->retrans_packets, cfg->max_datagram,
			     cfg->node.retrans_budget) < 0) {
		log_err("out of memory for the datagram batches");
		return -ENOMEM;
	}
	if ((e = open_journal(r)) < 0 || (e = open_sockets(r)) < 0 || (e = open_rx(r)) < 0)
		return e;
	start_watchers(r);
	log_notice("recorder %s: the tape %s on %s%s%s, asking %s, answering on %s; journal "
		   "from seq %llu", cfg->node.name, cfg->tape_group, cfg->tape_iface,
		   *cfg->tape_group_b ? " and " : "", cfg->tape_group_b, cfg->upstream,
		   cfg->retrans, (unsigned long long)journal_next_seq(r->journal));
	return 0;
}

static void rec_stop(struct recorder *r);
static void rec_close(struct recorder *r);

/* Makes the recorder; on failure (logged) nothing is left behind. */
static int rec_open(struct recorder **out, struct ev_loop *loop, const struct rec_config *cfg)
{
	struct recorder *r = calloc(1, sizeof(*r));
	int e;

	if (!r)
		return -ENOMEM;
	r->loop = loop;
	r->cfg = cfg;
	r->tape_fd = r->tape_b_fd = r->req_fd = r->srv_fd = r->rep_fd = -1;
	if ((e = open_steps(r)) < 0) {
		rec_stop(r);
		rec_close(r);
		return e;
	}
	*out = r;
	return 0;
}

static void rec_stop(struct recorder *r)
{
	ev_io_stop(r->loop, &r->tape_io);
	ev_io_stop(r->loop, &r->tape_b_io);
	ev_io_stop(r->loop, &r->req_io);
	ev_io_stop(r->loop, &r->srv_io);
	ev_io_stop(r->loop, &r->rep_io);
	ev_timer_stop(r->loop, &r->rx_timer);
	ev_timer_stop(r->loop, &r->tick);
	if (r->journal)
		(void)flush(r);
}

static void rec_close(struct recorder *r)
{
	if (!r)
		return;
	const int fds[] = { r->tape_fd, r->tape_b_fd, r->req_fd, r->srv_fd, r->rep_fd };

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	rx_destroy(r->rx);
	if (r->journal)
		journal_close(r->journal);
	tape_server_fini(&r->srv);
	net_batch_fini(&r->in);
	free(r);
}

DAEMON_LIFECYCLE(rec, recorder, rec_config)

/* --- the control socket -------------------------------------------------- */

static void rec_status(void *self, Lockstep__ControlReply *reply)
{
	struct recorder *r = self;
	uint64_t high = rx_high(r->rx);

	reply->name = (char *)r->cfg->node.name;
	reply->state = (char *)rec_state_names[r->state];
	reply->term = r->term;
	reply->seq = journal_last_seq(r->journal);
	reply->commit = high > 0 ? high - 1 : 0;
	reply->day = tapeday_last(&r->days)->day;
	reply->io = (char *)"mmsg";
}

static void rec_stats(void *self, struct counters *out)
{
	struct recorder *r = self;
	struct rx_stats rs;

	rx_get_stats(r->rx, &rs);
	r->st.tape_first_a = r->first.first[AB_A];
	r->st.tape_first_b = r->first.first[AB_B];
	r->st.tape_gaps = rs.gaps;
	r->st.tape_duplicates = rs.duplicates;
	r->st.tape_held = rs.held;
	r->st.requests_sent = rs.requests;
	r->st.blocks_requested = rs.requested;
	r->st.requests_suppressed = rs.suppressed;
	r->st.retrans_requests = r->srv.st.requests;
	r->st.retrans_bad_requests = r->srv.st.bad_requests;
	r->st.retrans_blocks_sent = r->srv.st.blocks_sent;
	r->st.retrans_packets_sent = r->srv.st.packets_sent;
	r->st.retrans_too_old = r->srv.st.too_old;
	r->st.retrans_budget_refused = r->srv.st.budget_refused;
	r->st.retrans_bytes_sent = r->srv.st.bytes_sent;
	r->st.retrans_answers = r->srv.st.answers;
	r->st.drops_injected_data = r->drop_tape.dropped_data + r->drop_req.dropped_data +
				    r->drop_srv.dropped_data;
	r->st.rxq_dropped = r->rxq_tape + r->rxq_tape_b + r->rxq_req + r->rxq_srv;
	r->st.drops_injected = r->drop_tape.dropped + r->drop_req.dropped + r->drop_srv.dropped;
	counters_add_table(out, rec_stat_defs, (const uint64_t *)&r->st, ARRAY_SIZE(rec_stat_defs));
}

const struct daemon_ops recorder_daemon = {
	.prog = "lockstep-recorder",
	.role = "recorder",
	.about = "Records the tape near its receivers: joins it, recovers what it misses from\n"
		 "its upstream servers, journals every event in the sequencer's journal format,\n"
		 "and answers the tape's retransmission requests from that journal, so that the\n"
		 "receivers configured with it (tape_recorders) ask it and not the sequencers.\n"
		 "Exit status: 0 after a clean stop, 1 on a start-up or run-time failure, 2 on\n"
		 "a usage or configuration error.",
	.spec = &rec_config_spec,
	.cfg_size = sizeof(struct rec_config),
	.node_offset = offsetof(struct rec_config, node),
	DAEMON_OPS_LIFECYCLE(rec),
	.status = rec_status,
	.stats = rec_stats,
};
