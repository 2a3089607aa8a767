/* The matcher daemon's core: the tape intake (on_tape, the receiver's ops
 * of common/rx.h, its timer), applying committed events to the engine (and
 * the test fault that makes a replica diverge), the tape's days on the wire
 * (common/tapeday.h), the state machine
 * (set_state), and matcher_open/stop/close. The execution stream is exec.c,
 * checkpoints checkpoint.c, the snapshot directory snapdir.c, STATUS and
 * STATS control.c, the [matcher] keys config.c (matcher_private.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addrlist.h"
#include "clock.h"
#include "convert.h"
#include "daemon_wait.h"
#include "engine.h"
#include "exec.h"
#include "glimpse.h"
#include "log.h"
#include "matcher.h"
#include "matcher_private.h"
#include "risk_admin.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "prealloc.h"
#include "rxpath.h"
#include "tape.h"
#include "tapeday.h"

const char *const matcher_state_names[M_STATE_MAX] = { "starting", "catching-up", "live",
							"stalled", "diverged" };

static struct log_ratelimit rl_malformed = LOG_RATELIMIT_INIT(5, 5);
static struct log_ratelimit rl_lost = LOG_RATELIMIT_INIT(1, 5);

void matcher_set_state(struct matcher *m, enum matcher_state s)
{
	if (m->state == s || m->state == M_DIVERGED)
		return;
	log_notice("%s -> %s at tape seq %llu", matcher_state_names[m->state],
		   matcher_state_names[s], (unsigned long long)matcher_applied(m));
	m->state = s;
}

/* --- applying the tape ------------------------------------------------------ */

/* A DayEvent (rare: twice a day), applied, and what it did logged. */
static void apply_day(struct matcher *m, uint64_t seq, uint64_t tape_ns,
		      const struct engine_cmd *cmd)
{
	const struct engine_day_cmd *c = &cmd->u.day;
	struct engine_stats before, after;
	struct engine_day d;

	engine_get_stats(m->engine, &before);
	engine_apply(m->engine, seq, tape_ns, cmd, matcher_exec_emit, m);
	m->st.events_applied++;
	engine_get_stats(m->engine, &after);
	engine_get_day(m->engine, &d);
	if (after.day_ignored != before.day_ignored)
		log_warn("tape seq %llu: %s of day %u ignored: the market is in day %u, %s",
			 (unsigned long long)seq,
			 c->kind == ENGINE_DAY_END ? "END_OF_DAY" : "START_OF_DAY", c->day, d.day,
			 d.open ? "open" : "closed");
	else
		log_notice("tape seq %llu: day %u %s, %llu resting orders canceled (reason E)",
			   (unsigned long long)seq, d.day, d.open ? "opened" : "closed",
			   (unsigned long long)(after.closed_cancels - before.closed_cancels));
	if (after.day_ignored == before.day_ignored && c->kind == ENGINE_DAY_START) {
		m->day_snapshot = 1;
		matcher_feed_day_started(m);
	}
}

/* An operator's risk command (rare), applied, and what it did logged. */
static void apply_admin(struct matcher *m, uint64_t seq, uint64_t tape_ns,
			const struct engine_cmd *cmd)
{
	struct engine_stats before, after;
	char what[200];

	engine_get_stats(m->engine, &before);
	engine_apply(m->engine, seq, tape_ns, cmd, matcher_exec_emit, m);
	m->st.events_applied++;
	engine_get_stats(m->engine, &after);
	risk_admin_describe(&cmd->u.admin, what, sizeof(what));
	if (after.admin_ignored != before.admin_ignored)
		log_warn("tape seq %llu: risk: %s: ignored", (unsigned long long)seq, what);
	else if (cmd->u.admin.kind == ENGINE_ADMIN_KILL && cmd->u.admin.cancel)
		log_notice("tape seq %llu: risk: %s: %llu canceled (reason S)",
			   (unsigned long long)seq, what,
			   (unsigned long long)(after.kill_cancels - before.kill_cancels));
	else
		log_notice("tape seq %llu: risk: %s", (unsigned long long)seq, what);
}

/* Applies the event at m->next_seq. Returns 0, -EAGAIN when it is not
 * committed yet (the caller stops and waits for the commit position), or
 * -ESTALE when its term cannot follow the last one (tape_term_fenced: a
 * deposed primary's, or forged): it is forgotten and asked for again. */
static int apply_event(struct matcher *m, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct tape_event_view v;
	struct engine_cmd cmd;

	if (tape_event_peek(data, len, &v) < 0 || v.seq != seq) {
		/* Every replica sees the same bytes, so skipping keeps them equal. */
		m->st.events_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_ERR,
				"tape seq %llu: malformed event skipped", (unsigned long long)seq);
		return 0;
	}
	if (tape_term_fenced(m->term, v.term)) {
		m->st.tape_fenced++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"tape seq %llu: term %llu cannot follow term %llu: refused",
				(unsigned long long)seq, (unsigned long long)v.term,
				(unsigned long long)m->term);
		return -ESTALE;
	}
	m->term = v.term;
	if (v.commit > m->commit)
		m->commit = v.commit;
	if (seq > m->commit)
		return -EAGAIN;
	m->cur_tape_seq = seq;
	m->last_tape_ns = v.timestamp;
	matcher_feed_begin(m, v.timestamp);
	/* The conversion lockstep-replay's rebuild shares (matcher/convert.h). */
	switch (convert_event(&v, m->cfg->partition, &cmd)) {
	case CONVERT_SKIP:
		m->st.events_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_ERR,
				"tape seq %llu: undecodable command skipped", (unsigned long long)seq);
		return 0;
	case CONVERT_OTHER_PARTITION:
		m->st.events_other_partition++;
		/* fall through */
	case CONVERT_TIME:
		engine_advance_time(m->engine, v.timestamp, matcher_exec_emit, m);
		return 0;
	case CONVERT_APPLY:
		break;
	}
	if (cmd.kind == ENGINE_DAY) {
		apply_day(m, seq, v.timestamp, &cmd);
		return 0;
	}
	if (cmd.kind == ENGINE_ADMIN) {
		apply_admin(m, seq, v.timestamp, &cmd);
		return 0;
	}
	engine_apply(m->engine, seq, v.timestamp, &cmd, matcher_exec_emit, m);
	m->st.events_applied++;
	return 0;
}

/* The test fault of [matcher] test_fault_diverge_at: an order that is not on
 * the tape (a sell of 1 share at the highest price, which nothing reaches,
 * of a login no gateway has) booked after the event at `seq`. Its own
 * messages are swallowed, so the execution stream keeps the others'
 * numbering (only the order reference numbers of later Accepted and
 * Replaced differ) and no client sees a message missing or doubled; the
 * book, the order count and so the state hash differ from here on. */
static void fault_diverge(struct matcher *m, uint64_t seq)
{
	struct engine_cmd cmd = { .kind = ENGINE_ENTER };
	struct ouch_enter_order *o = &cmd.u.enter;

	snprintf(cmd.user, sizeof(cmd.user), "LSFLT");
	snprintf(o->token, sizeof(o->token), "LSDIVERGE%05llu", (unsigned long long)(seq % 100000));
	snprintf(o->stock, sizeof(o->stock), "%s", m->symbols[0]);
	o->side = OUCH_SELL;
	o->shares = 1;
	o->price = OUCH_PRICE_MAX;
	o->tif = OUCH_TIF_SYSTEM_HOURS;
	o->display = OUCH_DISPLAY_ATTRIBUTABLE;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = OUCH_ISO_NOT_ELIGIBLE;
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = OUCH_CUST_RETAIL;
	m->fault_active = 1;
	m->fault_booked = 0;
	engine_apply(m->engine, seq, m->last_tape_ns, &cmd, matcher_exec_emit, m);
	m->fault_active = 0;
	if (m->fault_booked)
		log_warn("TEST FAULT: after tape seq %llu this replica booked an order that is not "
			 "on the tape (%s %s): its state hash is now %016llx, unlike the others'",
			 (unsigned long long)seq, o->token, o->stock,
			 (unsigned long long)engine_hash(m->engine));
	else
		log_err("TEST FAULT at tape seq %llu: the fault's order was not accepted; this "
			"replica may not diverge", (unsigned long long)seq);
}

/* --- the tape's loss recovery (common/rx.h) ------------------------------ */

static int on_event(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	/* Not committed yet: rx keeps the event and offers it again at
	 * rx_resume(), after the next packet or tick. */
	struct matcher *m = ctx;
	int r = apply_event(m, seq, data, len);

	if (r == -ESTALE)
		return RX_REJECT;
	if (r < 0)
		return RX_HOLD;
	if (seq == m->cfg->test_fault_diverge_at)
		fault_diverge(m, seq);
	/* a checkpoint may find this replica diverged: before the snapshot */
	if (m->cfg->checkpoint_interval && seq % m->cfg->checkpoint_interval == 0)
		matcher_checkpoint_own(m, seq);
	if (m->cfg->snapshot_interval && !m->diverged &&
	    (seq % m->cfg->snapshot_interval == m->snap_phase || m->day_snapshot) &&
	    matcher_snapshot_take(m, seq) != -EBUSY)
		m->day_snapshot = 0; /* a day's refused as busy: again at the next event */
	return RX_TAKEN;
}

/* rx asks in tape indices; the request names them in the session of the
 * known day that holds `seq` (a server maps it back and answers each index
 * in its own day's session, which teaches a day not known yet). */
static void send_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	struct matcher *m = ctx;
	struct mold_request r = { .count = count };
	uint8_t buf[AUTH_CONTROL_MAX];
	const struct sockaddr_in *dst = &m->tape_retrans[server % m->n_retrans];
	size_t n;

	/* tapeday_build_request's mapping, into the struct that the tagged
	 * request (auth_node_request) is built from */
	tapeday_wire(&m->tapeday, seq, &r.session, &r.seq);
	n = auth_node_request(buf, &r);

	if (sendto(m->req_fd, buf, n, 0, (const struct sockaddr *)dst, sizeof(*dst)) !=
	    (ssize_t)n)
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "tape request: %s",
				strerror(errno));
}

/* Nobody holds [from, to) any more. A replica must apply every event, so it
 * never skips: it keeps asking at the capped back-off, and says so. */
static int on_lost(void *ctx, uint64_t from, uint64_t to)
{
	struct matcher *m = ctx;

	m->st.tape_unrecoverable++;
	log_ratelimited(&rl_lost, LOG_LVL_ERR,
			"tape %llu..%llu is no longer held by any retransmission server: this "
			"replica cannot catch up by itself (rebuild it from a journal with "
			"lockstep-replay)",
			(unsigned long long)from, (unsigned long long)(to - 1));
	matcher_set_state(m, M_STALLED);
	return 0;
}

static const struct rx_ops tape_ops = { on_event, send_request, on_lost };

/* Arms the timer for rx's next scheduled request. */
static void rx_arm(struct matcher *m)
{
	rxpath_arm(m->loop, &m->rx_timer, rx_due(m->tape_rx), m->now);
}

/* A/B: before a request is due, what both networks' sockets hold is read
 * (the other network's copy may wait there behind a busy moment), so
 * that only a datagram lost on both is asked for. */
static void ab_drain(struct matcher *m)
{
	if (m->tape_b_fd < 0)
		return;
	if (iopath_uring(&m->io)) {
		ev_invoke(m->loop, &m->io.watcher, EV_READ);
	} else {
		ev_invoke(m->loop, &m->tape_b_io, EV_READ);
		ev_invoke(m->loop, &m->tape_io, EV_READ);
	}
}

static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct matcher *m = w->data;

	(void)loop;
	(void)revents;
	ab_drain(m);
	m->now = mono_ns();
	rx_tick(m->tape_rx, m->now);
	rx_arm(m);
}

/* A heartbeat (or end of session, or too-old answer) of a later day whose
 * base is not known: the day rx is in has ended, and at least the next
 * day's START_OF_DAY exists at index rx_high(), the first index past all
 * that a known day holds. rx is told so and asks for it (in the last known
 * day's session); the answer comes in the new day's session and teaches
 * its base. Claimed once per rx_high: a second heartbeat of the same day
 * must not claim the index after it, which may not exist yet. */
static void day_later(struct matcher *m)
{
	uint64_t high = rx_high(m->tape_rx);

	m->st.tape_day_later++;
	if (high == 0 || high == m->day_later_claim)
		return;
	rx_tail(m->tape_rx, high + 1, m->now);
	m->day_later_claim = rx_high(m->tape_rx);
}

/* A datagram of the tape (answer 0; from network `side`, A or B) or on the
 * request socket (answer 1, from `from`: retransmissions, and the too-old
 * answer, a heartbeat). Sequence numbers become tape indices
 * (tapeday_parse) before rx sees them. */
static void on_tape_packet(struct matcher *m, uint8_t *buf, size_t len, int answer,
			   enum ab_side side, const struct sockaddr_in *from)
{
	uint64_t fresh;

	struct mold_packet p;
	int err;

	/* the loss generator after the check: it draws on the packet as built */
	if (auth_node_check(AUTH_TAPE, buf, &len, 0, from) < 0 ||
	    rx_drop(answer ? &m->drop_req : &m->drop_tape, buf, len))
		return;
	m->st.tape_packets++;
	err = tapeday_parse(&m->tapeday, buf, len, 0, &p);
	if (err == TAPEDAY_LATER) {
		day_later(m);
		return;
	}
	if (err == MOLD_E_SESSION) {
		m->st.tape_wrong_session++;
		return;
	}
	if (err < 0) {
		m->st.tape_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"malformed tape packet (%zu bytes): %s", len, mold_strerror(err));
		return;
	}
	if (answer) {
		m->st.tape_answers++;
		if (p.kind == MOLD_HEARTBEAT) {
			m->st.tape_too_old++;
			rxpath_too_old(m->tape_rx, rxpath_server(m->tape_retrans, m->n_retrans, from),
				       "tape", from, p.seq, m->now);
			return;
		}
		if (p.kind != MOLD_DATA)
			return;
		rx_packet(m->tape_rx, &p, m->now);
		return;
	}
	m->heard = 1;
	if (p.kind == MOLD_DATA) {
		m->flow_read_events += p.count;
		m->flow_read_data++;
	}
	fresh = ab_first_before(m->tape_rx);
	rx_packet(m->tape_rx, &p, m->now);
	ab_first_after(&m->tape_first, m->tape_rx, side, fresh);
}

/* --- flow control ---------------------------------------------------------- */

uint64_t matcher_flow_window(const struct matcher *m)
{
	return flow_cost_window(&m->flow_cost,
				(uint64_t)(m->rcvbuf_granted > 0 ? m->rcvbuf_granted : 0));
}

/* At most once a millisecond, a read of the tape socket is measured: its
 * buffer use before the read (one getsockopt) over the events the read took,
 * when the read and the one before it emptied the queue. Returns the buffer
 * use, or -1 when this read is not sampled. */
static int64_t flow_sample_begin(struct matcher *m, int fd, enum ab_side side)
{
	/* only after a read that emptied the queue: while datagrams remain
	 * queued, the kernel leaves what was read charged to the socket (up
	 * to a quarter of its buffer, released at once when the queue
	 * empties), and a sample would count those bytes against the few
	 * events that remain */
	if (!m->flow_drained[side] || m->now - m->flow_sampled_ns < 1000000)
		return -1;
	m->flow_sampled_ns = m->now;
	return net_rmem_alloc(fd);
}

static void flow_sample_end(struct matcher *m, int64_t rmem, int n)
{
	/* every datagram read held events: a heartbeat, or one dropped (bad
	 * auth, malformed, the loss generator), took buffer for none */
	if (rmem > 0 && n >= 0 && (unsigned)n < m->rx.n && m->flow_read_data == (uint64_t)n)
		flow_cost_sample(&m->flow_cost, (uint64_t)rmem, m->flow_read_events);
}

/* A status message (common/flowstatus.h) to every sequencer node. */
static void flow_status_put(struct matcher *m, uint64_t now, uint64_t applied, uint64_t window,
			    uint8_t flags)
{
	struct flow_status st = { .partition = (uint16_t)m->cfg->partition, .applied = applied,
				  .window = window, .flags = flags };
	uint8_t buf[FLOW_STATUS_LEN + AUTH_TRAILER_LEN];
	size_t n;

	memcpy(st.name, m->cfg->node.name, strnlen(m->cfg->node.name, FLOW_STATUS_NAME_LEN));
	n = auth_node_seal(AUTH_FLOW, buf, flow_status_encode(buf, &st), sizeof(buf), AUTH_RAW);
	for (unsigned i = m->n_near; i < m->n_retrans; i++) /* the sequencers, not the recorders */
		(void)sendto(m->req_fd, buf, n, 0,
			     (const struct sockaddr *)&m->tape_retrans[i], sizeof(m->tape_retrans[i]));
	m->flow_sent_applied = applied;
	m->flow_sent_ns = now;
	m->st.flow_status_sent++;
}

/* While live: a status when flow_status_every events (at most a quarter of
 * the window) were applied since the last, or FLOW_STATUS_INTERVAL_NS has
 * passed. A replica that is catching up says nothing: it reads what it
 * misses by retransmission and must not hold the tape back meanwhile. */
static void flow_status_send(struct matcher *m, uint64_t now)
{
	uint64_t applied = matcher_applied(m), window = matcher_flow_window(m);
	uint64_t every = m->cfg->flow_status_every;

	/* a small window (a small buffer) is reported four times over, or
	 * the tape would wait for the 100 ms status */
	if (every > window / 4)
		every = window / 4 ? window / 4 : 1;
	if (!m->cfg->flow_status_every || m->state != M_LIVE ||
	    (applied - m->flow_sent_applied < every &&
	     now - m->flow_sent_ns < FLOW_STATUS_INTERVAL_NS))
		return;
	/* still catching up after a pause: not to be waited for while
	 * another replica keeps up (its buffer still bounds the tape) */
	flow_status_put(m, now, applied, window, m->resuming ? FLOW_STATUS_PAUSING : 0);
}

void matcher_flow_pause(struct matcher *m)
{
	if (m->cfg->flow_status_every && m->state == M_LIVE)
		flow_status_put(m, m->now, matcher_applied(m), matcher_flow_window(m),
				FLOW_STATUS_PAUSING);
}

void matcher_resume_begin(struct matcher *m, int prio)
{
	if (m->resuming) { /* a pause within a resume: its priority and clock go on */
		if (prio > 0) { /* it had gone back to its priority (resume_check) */
			m->resume_prio = prio;
			m->resume_back = 0;
		}
		return;
	}
	/* alone, or after a day's snapshot (every replica's, at one seq): no
	 * other replica is ahead, and the tape waits for this one */
	if (m->cfg->replicas < 2 || m->day_snapshot) {
		daemon_pause_end(prio);
		return;
	}
	m->resume_prio = prio;
	m->resume_back = 0;
	m->resume_skipped_from = m->st.exec_packets_skipped_resuming;
	m->resuming = 1;
	m->resume_from_ns = mono_ns();
}

/* The loop back to its SCHED_FIFO priority (if rt_priority had it there),
 * once. */
static void resume_back(struct matcher *m)
{
	if (!m->resume_back)
		daemon_pause_end(m->resume_prio);
	m->resume_back = 1;
}

/* Executions multicast again, and the loop at its priority: the tape
 * sockets are empty (caught_up 1), or MATCHER_RESUME_SKIP_MAX_NS passed (0:
 * a tape that never drains must not keep it from sending for long), or the
 * matcher stops (-1: no line). */
static void resume_end(struct matcher *m, uint64_t now, int caught_up)
{
	uint64_t skipped = m->st.exec_packets_skipped_resuming - m->resume_skipped_from;

	m->resuming = 0;
	m->resume_ns = now - m->resume_from_ns;
	resume_back(m);
	if (caught_up > 0)
		log_info("snapshot at tape seq %llu: caught up in %.1f ms after the pause (%llu "
			 "exec packets left to the other replicas)",
			 (unsigned long long)m->snap_pending, (double)m->resume_ns / 1e6,
			 (unsigned long long)skipped);
	else if (caught_up == 0)
		log_warn("snapshot at tape seq %llu: not caught up %.1f ms after the pause: it "
			 "multicasts again (%llu exec packets left to the other replicas)",
			 (unsigned long long)m->snap_pending, (double)m->resume_ns / 1e6,
			 (unsigned long long)skipped);
}

/* The larger buffer use of the tape sockets (A and B): 0 once the backlog
 * of a pause is read. A getsockopt each, while resuming only. */
static int64_t tape_sockets_use(const struct matcher *m)
{
	int64_t a = net_rmem_alloc(m->tape_fd), b = m->tape_b_fd < 0 ? 0 : net_rmem_alloc(m->tape_b_fd);

	return a > b ? a : b;
}

static void resume_check(struct matcher *m, uint64_t now)
{
	int64_t use = tape_sockets_use(m);
	uint64_t took = now - m->resume_from_ns;
	/* half the buffer: what the kernel still charges for datagrams read
	 * (up to a quarter, until the queue empties) and the tape the
	 * sequencer lets run ahead of an uncounted replica must still fit */
	int half = m->rcvbuf_granted > 0 && use > m->rcvbuf_granted / 2;

	if (use <= 0) {
		resume_end(m, now, 1);
	} else if (took > MATCHER_RESUME_SKIP_MAX_NS) {
		resume_end(m, now, 0);
	} else if ((half || took > MATCHER_RESUME_MAX_NS) && !m->resume_back) {
		/* the normal scheduler leaves it too little to catch up: its
		 * priority back, still quiet (a burst of duplicates at
		 * real-time priority is what the quiet resume avoids) */
		resume_back(m);
		if (m->resume_prio > 0)
			log_notice("snapshot at tape seq %llu: not caught up %.1f ms after the pause "
				   "(%s): back to its priority, still leaving to the other replicas "
				   "what they sent", (unsigned long long)m->snap_pending,
				   (double)took / 1e6, half ? "its tape buffer half full" : "2 s");
	}
}

/* The end of a wakeup of the tape: held events, the executions, the
 * state, the flow status, the request timer. */
static void tape_wakeup_end(struct matcher *m)
{
	if (rx_holding(m->tape_rx))
		rx_resume(m->tape_rx, m->now);
	if (m->resuming)
		resume_check(m, mono_ns());
	matcher_exec_flush(m);
	matcher_feed_flush(m);
	if (m->heard && rx_missing(m->tape_rx) == 0 && !rx_holding(m->tape_rx))
		matcher_set_state(m, M_LIVE);
	flow_status_send(m, m->now);
	rx_arm(m);
}

static void on_tape(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	int answer = w == &m->req_io, n;
	enum ab_side side = w == &m->tape_b_io ? AB_B : AB_A;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int64_t rmem = answer ? -1 : flow_sample_begin(m, w->fd, side);

		n = net_batch_recv_counted(&m->rx, w->fd,
					   answer ? &m->rxq_req
					   : side == AB_B ? &m->rxq_tape_b
							  : &m->rxq_tape);
		if (!answer) /* (0: EAGAIN, empty; EINTR cannot stop a read that does not wait) */
			m->flow_drained[side] = n >= 0 && (unsigned)n < m->rx.n;
		if (n <= 0)
			break;
		m->now = mono_ns();
		m->flow_read_events = m->flow_read_data = 0;
		for (int i = 0; i < n; i++)
			on_tape_packet(m, net_batch_slot(&m->rx, (unsigned)i), m->rx.lens[i], answer,
				       side, &m->rx.addrs[i]);
		flow_sample_end(m, rmem, n);
		if ((unsigned)n < m->rx.n)
			break;
	}
	tape_wakeup_end(m);
}

/* [node] io = uring: the tape and the request socket through the ring,
 * as many datagrams a round as a recvmmsg of the batch. */
static void on_tape_uring(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	const struct uring_msg *msg;
	int n, r;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		n = uring_rx_reap(m->io.rx, m->rx.n, &msg);
		if (n <= 0)
			break;
		m->now = mono_ns();
		for (int i = 0; i < n; i++)
			on_tape_packet(m, (uint8_t *)msg[i].data, msg[i].len, msg[i].tag == MATCHER_TAG_REQ,
				       msg[i].tag == MATCHER_TAG_TAPE_B ? AB_B : AB_A, msg[i].from);
		if ((r = uring_rx_release(m->io.rx)) < 0)
			log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "io_uring re-arm: %s",
					strerror(-r));
		if ((unsigned)n < m->rx.n)
			break;
	}
	if ((r = uring_rx_done(m->io.rx)) < 0)
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING, "io_uring re-arm: %s",
				strerror(-r));
	tape_wakeup_end(m);
}

/* --- the tick ------------------------------------------------------------- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct matcher *m = w->data;
	uint64_t now = mono_ns();

	(void)loop;
	(void)revents;
	m->now = now;
	if (rx_holding(m->tape_rx))
		rx_resume(m->tape_rx, now);
	/* Behind: at once when starting, after a tick without progress when live
	 * (a gap repaired within a tick is not worth a state change). */
	if (rx_missing(m->tape_rx) > 0 &&
	    (m->state == M_STARTING ||
	     (m->state == M_LIVE && matcher_applied(m) == m->tick_applied)))
		matcher_set_state(m, M_CATCHING_UP);
	m->tick_applied = matcher_applied(m);
	if (m->resuming) /* (not `now`: rx_resume may have applied a snapshot's event) */
		resume_check(m, mono_ns());
	matcher_exec_flush(m);
	matcher_feed_flush(m);
	flow_status_send(m, now);
	rx_arm(m);
	matcher_exec_heartbeat(m, now);
	matcher_feed_tick(m, now);
}

/* --- set-up ---------------------------------------------------------------- */

/* [node] io = uring: the tape and request sockets on a receive ring of
 * at least twice the batch of buffers (a round of reaping gives them back
 * while the kernel fills the rest), the exec stream on a send ring. */
static int open_io(struct matcher *m)
{
	unsigned bufs = 64;
	struct uring_rx_config rc = { .payload = 65536, .max_reap = m->rx.n };
	int err;

	while (bufs < 2 * m->rx.n)
		bufs *= 2;
	rc.bufs = bufs;
	err = iopath_open(&m->io, m->cfg->node.io, &rc, m->tx.n, "matcher");
	if (err < 0) {
		log_err("io_uring: %s", strerror(-err));
		return err;
	}
	(void)iopath_rx_add(&m->io, m->tape_fd, MATCHER_TAG_TAPE, &m->rxq_tape, "matcher");
	(void)iopath_rx_add(&m->io, m->req_fd, MATCHER_TAG_REQ, &m->rxq_req, "matcher");
	if (m->tape_b_fd >= 0)
		(void)iopath_rx_add(&m->io, m->tape_b_fd, MATCHER_TAG_TAPE_B, &m->rxq_tape_b,
				    "matcher");
	if (iopath_uring(&m->io))
		log_info("io = uring: the tape through io_uring (%u buffers)", bufs);
	return 0;
}

/* The tape's days: day 1 is [matcher] tape_session; after a snapshot, the
 * engine's day (its START's index) is known too, so that requests for what
 * follows the snapshot name that day's session. Later days are learnt from
 * the tape. */
static int open_tapeday(struct matcher *m)
{
	struct engine_day d;

	if (tapeday_init(&m->tapeday, m->cfg->tape_session) < 0) {
		log_err("[matcher] tape_session \"%s\": not a MoldUDP64 session name",
			m->cfg->tape_session);
		return -EINVAL;
	}
	engine_get_day(m->engine, &d);
	if (d.day > 1 && tapeday_learn(&m->tapeday, d.day, d.base) < 0) {
		log_err("the snapshot's day %u (tape seq %llu) is not a day of the tape",
			d.day, (unsigned long long)d.base);
		return -EINVAL;
	}
	return 0;
}

/* A/B: the tape on network B, when tape_group_b is set. */
static int open_tape_b(struct matcher *m, const struct net_udp_options *o)
{
	const struct matcher_config *c = m->cfg;
	const char *iface = *c->tape_iface_b ? c->tape_iface_b : c->tape_iface;
	struct sockaddr_in group;
	struct net_bufsize rcv;
	int err;

	if (!*c->tape_group_b)
		return 0;
	if ((err = net_parse_addr(c->tape_group_b, &group)) < 0) {
		log_err("[matcher] tape_group_b \"%s\": %s", c->tape_group_b, strerror(-err));
		return err;
	}
	m->tape_b_fd = net_mcast_recv_open(&group, iface, o, &rcv);
	if (m->tape_b_fd < 0) {
		log_err("tape B %s on %s: %s", c->tape_group_b, iface, strerror(-m->tape_b_fd));
		return m->tape_b_fd;
	}
	rxpath_bufsize_check("tape B", &rcv);
	log_info("A/B: the tape from %s on %s and %s on %s (a gap waits %llu us for the other)",
		 c->tape_group, c->tape_iface, c->tape_group_b, iface,
		 (unsigned long long)(c->ab_wait_ns / 1000));
	return 0;
}

/* The [matcher] addresses, then the sockets: the tape's, the tape request
 * socket, the execution stream's (exec.c), the checkpoints' (checkpoint.c). */
static int open_sockets(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options o = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1,
				     .reuseaddr = 1 };
	struct net_udp_options ro = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .rxq_ovfl = 1 };
	struct sockaddr_in group, local;
	struct net_bufsize rcv, rrcv;
	int err;

	if ((err = net_parse_addr(c->tape_group, &group)) < 0 ||
	    (err = net_parse_addr(c->exec_group, &m->exec_group)) < 0 ||
	    (err = net_parse_addr(c->exec_retrans, &local)) < 0) {
		log_err("bad address in the [matcher] section: %s", strerror(-err));
		return err;
	}
	if ((err = open_tapeday(m)) < 0)
		return err;
	m->tape_fd = net_mcast_recv_open(&group, c->tape_iface, &o, &rcv);
	if (m->tape_fd < 0) {
		log_err("tape %s on %s: %s", c->tape_group, c->tape_iface, strerror(-m->tape_fd));
		return m->tape_fd;
	}
	rxpath_bufsize_check("tape", &rcv);
	m->rcvbuf_granted = rcv.granted;
	if ((err = open_tape_b(m, &o)) < 0)
		return err;
	/* Requests leave from here and answers come back here, never to the
	 * group's port, which other replicas on this host share. */
	m->req_fd = net_udp_open_on(c->tape_iface, &ro, &rrcv, NULL);
	if (m->req_fd < 0) {
		log_err("tape request socket: %s", strerror(-m->req_fd));
		return m->req_fd;
	}
	rxpath_bufsize_check("tape request socket", &rrcv);
	if ((err = matcher_exec_open(m, &local)) < 0)
		return err;
	if ((err = open_io(m)) < 0)
		return err;
	return c->checkpoint_interval ? matcher_checkpoint_open(m) : 0;
}

/* The tape's receiver: from seq 1 (a replica applies the whole tape), the
 * retransmission servers of [matcher] tape_retrans in turn, the loss
 * generator when configured. The jitter's seed differs per node so that
 * replicas do not ask in step. */
static int open_tape_rx(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct rx_config rc = rxpath_tape_config(c->reorder_window, c->reorder_bytes,
						 *c->tape_group_b != 0, c->ab_wait_ns,
						 c->request_delay_ns, c->retrans_wait_ns,
						 c->retrans_wait_max_ns, &m->rng);
	int err;

	err = addrlist_parse_near(c->tape_recorders, c->tape_retrans, m->tape_retrans,
				  RX_MAX_SERVERS, &m->n_near);
	if (err == -E2BIG) {
		log_err("[matcher] tape_recorders and tape_retrans: more than %d addresses",
			RX_MAX_SERVERS);
		return err;
	}
	if (err == -EINVAL) {
		log_err("[matcher] tape_recorders \"%s\" or tape_retrans \"%s\": not a "
			"comma-separated list of host:port", c->tape_recorders, c->tape_retrans);
		return err;
	}
	if (err < 0) {
		log_err("[matcher] tape_recorders \"%s\" or tape_retrans \"%s\": %s",
			c->tape_recorders, c->tape_retrans, strerror(-err));
		return err;
	}
	m->n_retrans = (unsigned)err;
	rc.n_servers = m->n_retrans;
	rc.n_near = m->n_near;

	/* each node (and socket) its own pattern: replicas lose independently */
	rxpath_loss_init(&m->rng,
			 (struct rx_drop *const[]){ &m->drop_tape, &m->drop_req, &m->drop_retrans },
			 3, c->drop_rate, c->node.name, c->drop_seed, 0);
	err = rx_create(&m->tape_rx, &rc, &tape_ops, m);
	if (err < 0) {
		log_err("tape receiver: %s", strerror(-err));
		return err;
	}
	rx_start(m->tape_rx, m->start_seq);
	return 0;
}

/* The engine with [matcher] symbols, limits and risk file (ec), loaded from
 * the newest usable snapshot if there is one. */
static int open_engine(struct matcher *m, struct engine_config *ec)
{
	const struct matcher_config *cfg = m->cfg;
	struct engine_admin_cmd *risk = NULL;
	char why[256];
	int err;

	if ((err = matcher_config_check(cfg, why, sizeof(why))) < 0) {
		log_err("%s", why);
		return err;
	}
	m->symbol_store = malloc(sizeof(cfg->symbols));
	if (!m->symbol_store)
		return -ENOMEM;
	if ((err = convert_engine_config(cfg, m->symbol_store, m->symbols, ec)) < 0) {
		log_err("[matcher] symbols: want 1..%d symbols of up to 8 characters",
			CONVERT_MAX_SYMBOLS);
		return err;
	}
	if ((err = risk_file_load(cfg->risk_file, &risk, &ec->n_risk, why, sizeof(why))) < 0) {
		log_err("[matcher] risk_file: %s", why);
		return err;
	}
	ec->risk = risk;
	if (ec->n_risk)
		log_notice("risk: %zu entries from %s", ec->n_risk, cfg->risk_file);
	if ((err = engine_create(&m->engine, ec)) < 0)
		log_err("engine: %s", strerror(-err));
	else
		err = matcher_snapshot_load_newest(m, ec);
	free(risk); /* the engine keeps a copy */
	ec->risk = NULL;
	ec->n_risk = 0;
	return err;
}

/* The exec ring and the datagram batches. */
static int open_buffers(struct matcher *m)
{
	const struct matcher_config *cfg = m->cfg;

	m->ring = prealloc_zeroed(cfg->ring, MATCHER_EXEC_SLOT);
	if (!m->ring ||
	    net_batch_init(&m->rx, (unsigned)cfg->batch, 65536) < 0 ||
	    net_batch_init(&m->tx, (unsigned)cfg->batch, cfg->max_datagram) < 0 ||
	    net_batch_init(&m->req_rx, 16, 64) < 0 ||
	    (src_budget_init(&m->req_budget, cfg->node.retrans_budget, 0),
	     net_batch_init(&m->req_tx, RETRANS_PACKETS, cfg->max_datagram) < 0) ||
	    net_batch_init(&m->ck_rx, 16, 128) < 0)
		return -ENOMEM;
	m->pkt_slot = m->tx.n;
	return 0;
}

/* [feed] glimpse: the GLIMPSE server (glimpse.h), its images built by
 * feed.c on this loop. */
static int open_glimpse(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct glimpse_config gc = {
		.listen = c->feed_glimpse, .logins = c->feed_logins,
		.max_sessions = (unsigned)c->feed_glimpse_max,
		.login_ns = c->feed_glimpse_login_timeout_ns,
		.idle_ns = c->feed_glimpse_idle_timeout_ns,
	};
	char why[600];
	int err;

	if (!c->feed_glimpse[0])
		return 0;
	err = glimpse_open(&m->glimpse, &gc, m->loop, matcher_feed_glimpse_image, m, why,
			   sizeof(why));
	if (err < 0)
		log_err("[feed] glimpse: %s", why);
	return err;
}

static void start_glimpse(struct matcher *m)
{
	int err;

	if (!m->glimpse)
		return;
	if ((err = glimpse_start(m->glimpse)) < 0) {
		log_err("GLIMPSE: no thread (%s): no snapshots", strerror(-err));
		glimpse_close(m->glimpse);
		m->glimpse = NULL;
		return;
	}
	log_notice("GLIMPSE: snapshots on %s (TCP port %d), at most %llu sessions, logins %s",
		   m->cfg->feed_glimpse, glimpse_port(m->glimpse),
		   (unsigned long long)m->cfg->feed_glimpse_max,
		   m->cfg->feed_logins[0] ? m->cfg->feed_logins : "(none: every login rejected)");
}

static void start_watchers(struct matcher *m)
{
	ev_io_init(&m->tape_io, on_tape, m->tape_fd, EV_READ);
	m->tape_io.data = m;
	ev_io_init(&m->req_io, on_tape, m->req_fd, EV_READ);
	m->req_io.data = m;
	ev_io_init(&m->tape_b_io, on_tape, m->tape_b_fd, EV_READ);
	m->tape_b_io.data = m;
	if (iopath_uring(&m->io)) {
		iopath_start(&m->io, m->loop, on_tape_uring, m);
	} else {
		ev_io_start(m->loop, &m->tape_io);
		ev_io_start(m->loop, &m->req_io);
		if (m->tape_b_fd >= 0)
			ev_io_start(m->loop, &m->tape_b_io);
	}
	ev_init(&m->rx_timer, on_rx_timer);
	m->rx_timer.data = m;
	matcher_exec_start(m);
	matcher_feed_start(m);
	start_glimpse(m);
	matcher_checkpoint_start(m);
	if (m->cfg->test_fault_diverge_at)
		log_warn("TEST FAULT ARMED: [matcher] test_fault_diverge_at = %llu: this replica "
			 "will apply the tape wrongly after that seq and diverge from the others "
			 "(for tests only, never in production)",
			 (unsigned long long)m->cfg->test_fault_diverge_at);
	if (m->cfg->test_snapshot_pause_ns)
		log_warn("TEST PAUSE ARMED: [matcher] test_snapshot_pause: every snapshot stops "
			 "this replica %.0f ms longer (for tests only, never in production)",
			 (double)m->cfg->test_snapshot_pause_ns / 1e6);
	ev_timer_init(&m->tick, on_tick, 0.01, 0.01);
	m->tick.data = m;
	ev_timer_start(m->loop, &m->tick);
}

int matcher_open(struct matcher **out, struct ev_loop *loop, const struct matcher_config *cfg)
{
	struct matcher *m = calloc(1, sizeof(*m));
	struct engine_config ec = { 0 };
	int err;

	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->cfg = cfg;
	m->tape_fd = m->exec_fd = m->retrans_fd = m->req_fd = m->ck_fd = -1;
	m->tape_b_fd = m->exec_b.fd = -1;
	m->exec_next = m->exec_first = 1;
	m->start_seq = 1;
	if (cfg->snapshot_interval && cfg->replicas > 1)
		m->snap_phase = cfg->replica % cfg->replicas * cfg->snapshot_interval / cfg->replicas;
	snprintf(m->snap_dir, sizeof(m->snap_dir), "%s/snapshots", cfg->node.state_dir);
	if ((err = open_engine(m, &ec)) < 0 || (err = open_buffers(m)) < 0 ||
	    (err = open_tape_rx(m)) < 0 || (err = open_sockets(m)) < 0 ||
	    (err = matcher_feed_open(m, &ec)) < 0 || (err = open_glimpse(m)) < 0) {
		matcher_close(m);
		return err;
	}
	start_watchers(m);
	log_notice("partition %llu, %zu symbols, tape %s, executions %s (retransmissions on %s)",
		   (unsigned long long)cfg->partition, ec.n_symbols, cfg->tape_group, cfg->exec_group,
		   cfg->exec_retrans);
	*out = m;
	return 0;
}

void matcher_stop(struct matcher *m)
{
	if (m->resuming) /* what it holds goes out: the others may be gone too */
		resume_end(m, mono_ns(), -1);
	matcher_exec_flush(m);
	matcher_snapshot_reap(m);
	if (m->diverged) {
		log_err("tape seq %llu applied, hash %016llx; %s: exiting with status %d",
			(unsigned long long)matcher_applied(m),
			(unsigned long long)engine_hash(m->engine), m->div_msg, DAEMON_EXIT_DIVERGED);
		return;
	}
	matcher_exec_end(m);
	matcher_feed_end(m);
	log_notice("tape seq %llu applied, hash %016llx", (unsigned long long)matcher_applied(m),
		   (unsigned long long)engine_hash(m->engine));
}

int matcher_diverged(const struct matcher *m)
{
	return m && m->diverged;
}

void matcher_close(struct matcher *m)
{
	if (!m)
		return;
	glimpse_close(m->glimpse); /* its thread first: it asks this loop for images */
	matcher_snapshot_reap(m);
	matcher_snapshot_image_free(&m->snap_image);
	if (m->loop) {
		ev_io_stop(m->loop, &m->tape_io);
		ev_io_stop(m->loop, &m->req_io);
		ev_io_stop(m->loop, &m->tape_b_io);
		iopath_stop(&m->io, m->loop);
		ev_io_stop(m->loop, &m->retrans_io);
		ev_io_stop(m->loop, &m->ck_io);
		ev_timer_stop(m->loop, &m->tick);
		ev_timer_stop(m->loop, &m->rx_timer);
	}
	matcher_feed_close(m);
	iopath_close(&m->io); /* before the sockets it reads */
	if (m->tape_fd >= 0)
		close(m->tape_fd);
	if (m->tape_b_fd >= 0)
		close(m->tape_b_fd);
	ab_send_close(&m->exec_b);
	if (m->exec_fd >= 0)
		close(m->exec_fd);
	if (m->retrans_fd >= 0)
		close(m->retrans_fd);
	if (m->req_fd >= 0)
		close(m->req_fd);
	if (m->ck_fd >= 0)
		close(m->ck_fd);
	rx_destroy(m->tape_rx);
	net_batch_fini(&m->rx);
	net_batch_fini(&m->tx);
	net_batch_fini(&m->req_rx);
	net_batch_fini(&m->req_tx);
	net_batch_fini(&m->ck_rx);
	engine_destroy(m->engine);
	free(m->ring);
	free(m->symbol_store);
	free(m);
}
