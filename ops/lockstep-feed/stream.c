/* The feeds: A and B (multicast) and the retransmission answers (the
 * request socket) all go into one common/rx.h receiver, block by block, so
 * that the first copy of each sequence number is delivered and every
 * later one dropped; rx asks the retransmission servers, in turn, for the
 * ranges both feeds missed.
 *
 * Arbitration: rx sees a range missing as soon as the faster feed skips
 * it, while the slower feed's copy may be on its way. A request is sent
 * only when every joined feed has gone past the range (it is missing
 * there too) or has not moved for --arb-wait (it is down, or far behind):
 * until then rx's request is held back and rx asks again after its
 * back-off. So a loss on one feed alone costs no request.
 *
 * Giving up: the feed's servers do not answer for a range they no longer
 * hold. When delivery has not moved for --give-up seconds with a range
 * missing, the subscriber tells rx that no server holds the first missing
 * range as last asked for (up to FEED_MAX_COUNT messages: rx_too_old for
 * each server), and rx gives it up through the `lost` callback: the hole
 * is counted and the stream goes on. A server that does answer with
 * lockstep's too-old heartbeat (rxpath.h) saves the wait.
 *
 * Trading days: day 1 is --session, day d > 1 the session tapeday.h
 * names; each begins at sequence number 1, so each day gets a fresh rx.
 * A packet of a later day switches when the current day is complete (its
 * End of Session was seen and everything before it delivered); until then
 * it is dropped (it will be asked for again). A day whose End of Session
 * never came is taken as complete once nothing is missing and a later day
 * has been heard for --give-up seconds (counted: day_end_assumed). A new
 * day clears the book: a day's feed describes its book from its first
 * message, so that a subscriber starting that day builds the same one. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addrlist.h"
#include "clock.h"
#include "feed.h"
#include "itch.h"
#include "log.h"
#include "macros.h"
#include "rxpath.h"
#include "tapeday.h"

#define FEED_BATCH 32
#define FEED_RCVBUF (8 << 20)
#define FEED_WINDOW 65536
#define FEED_RING (16u << 20)
#define FEED_MAX_COUNT 4096 /* messages a request asks for */
#define FEED_PEND_BYTES (32u << 20) /* datagrams kept during the first snapshot */

static struct log_ratelimit rl_bad = LOG_RATELIMIT_INIT(1, 10);
static struct log_ratelimit rl_lost = LOG_RATELIMIT_INIT(1, 10);

const char *feed_side_name(enum feed_side s)
{
	return s == FEED_A ? "a" : s == FEED_B ? "b" : "retrans";
}

/* ---- delivery ------------------------------------------------------------ */

static void record_msg(struct feed *f, const uint8_t *data, uint16_t len)
{
	uint8_t pfx[ITCH_FILE_PREFIX] = { (uint8_t)(len >> 8), (uint8_t)len };

	if (fwrite(pfx, 1, sizeof(pfx), f->record) == sizeof(pfx) &&
	    fwrite(data, 1, len, f->record) == len)
		f->st.recorded++;
}

static int on_deliver(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len)
{
	struct feed *f = ctx;
	struct itch_msg m;
	int err, a;

	if (f->pause_all || (f->pause_at && seq >= f->pause_at))
		return RX_HOLD;
	f->st.delivered++;
	f->last_msg_ns = f->now;
	if (f->record)
		record_msg(f, data, len);
	err = itch_decode(data, len, &m);
	if (err == ITCH_E_TYPE) {
		f->st.unknown_type++;
		log_debug("seq %" PRIu64 ": ITCH type '%c' not published here: skipped", seq,
			  len ? data[0] : '?');
		return RX_TAKEN;
	}
	if (err < 0) {
		f->st.undecodable++;
		log_ratelimited(&rl_bad, LOG_LVL_WARNING, "seq %" PRIu64 ": undecodable ITCH "
				"message (%u bytes): %s", seq, len, itch_strerror(err));
		return RX_TAKEN;
	}
	f->st.applied++;
	a = book_apply(f->book, &m);
	if (a != BOOK_OK)
		log_ratelimited(&rl_bad, LOG_LVL_INFO, "seq %" PRIu64 ": '%c' message: %s", seq,
				m.type, book_anomaly_name(a));
	return RX_TAKEN;
}

/* ---- requests and giving up ---------------------------------------------- */

/* 1 when no joined feed may still bring [.., hi): each has gone past it
 * or has not moved for arb_wait. */
static int arbitration_clear(const struct feed *f, uint64_t hi)
{
	for (int s = 0; s < 2; s++)
		if (f->joined[s] && f->pos[s] < hi && f->now - f->advanced_ns[s] < f->o.arb_wait_ns)
			return 0;
	return 1;
}

static void on_request(void *ctx, unsigned server, uint64_t seq, uint16_t count)
{
	struct feed *f = ctx;
	struct mold_request r = { .session = f->sess, .seq = seq, .count = count };
	uint8_t pkt[MOLD_REQUEST_LEN];
	const struct sockaddr_in *dst;
	size_t n;

	if (!f->req_valid || seq <= f->req_lo) {
		f->req_valid = 1;
		f->req_lo = seq;
		f->req_hi = seq + count;
	}
	if (f->n_servers == 0) /* rx has one pretend server: nobody to ask */
		return;
	if (!arbitration_clear(f, seq + count)) {
		f->st.requests_held_back++;
		return;
	}
	dst = &f->servers[server % f->n_servers];
	n = mold_build_request(pkt, &r);
	if (sendto(f->fd[FEED_R], pkt, n, 0, (const struct sockaddr *)dst, sizeof(*dst)) !=
	    (ssize_t)n) {
		log_ratelimited(&rl_bad, LOG_LVL_WARNING, "retransmission request: %s",
				strerror(errno));
		return;
	}
	f->st.requests++;
	log_debug("asked server %u for %" PRIu64 "+%u", server, seq, count);
}

static int on_lost(void *ctx, uint64_t from, uint64_t to)
{
	struct feed *f = ctx;
	char s[MOLD_SESSION_LEN + 1];

	mold_session_str(&f->sess, s);
	f->st.lost_ranges++;
	log_ratelimited(&rl_lost, LOG_LVL_ERR,
			"%s %" PRIu64 "..%" PRIu64 ": missed by both feeds and not answered by "
			"any retransmission server: given up (%" PRIu64 " messages lost)",
			s, from, to - 1, to - from);
	return 1;
}

static const struct rx_ops feed_rx_ops = { on_deliver, on_request, on_lost };

static void stats_add(struct rx_stats *a, const struct rx_stats *b)
{
	a->blocks += b->blocks;
	a->delivered += b->delivered;
	a->duplicates += b->duplicates;
	a->held += b->held;
	a->overflow += b->overflow;
	a->gaps += b->gaps;
	a->requests += b->requests;
	a->requested += b->requested;
	a->too_old += b->too_old;
	a->lost += b->lost;
	a->rejected += b->rejected;
	a->unbelievable += b->unbelievable;
}

void feed_rx_stats(const struct feed *f, struct rx_stats *out)
{
	*out = f->rx_base;
	if (f->rx) {
		struct rx_stats s;

		rx_get_stats(f->rx, &s);
		stats_add(out, &s);
	}
}

/* A fresh receiver for a day (the servers' too-old positions of the day
 * before mean nothing in the new day's numbering). */
static int rx_new(struct feed *f)
{
	struct rx_config c = {
		.window = FEED_WINDOW,
		.ring_bytes = FEED_RING,
		.max_count = FEED_MAX_COUNT,
		.delay_ns = 1000000, /* jitter: subscribers that lost a packet do not ask at once */
		.retry_ns = f->o.retrans_wait_ns,
		.retry_max_ns = f->o.retrans_wait_ns * 16,
		.settle_ns = f->o.retrans_wait_ns / 4,
		/* without servers, one pretend server all the same: its requests
		 * tell on_request which range is missing, for giving up */
		.n_servers = f->n_servers ? f->n_servers : 1,
		.rng = &f->rng,
	};
	struct rx_stats s;

	if (f->rx) {
		rx_get_stats(f->rx, &s);
		stats_add(&f->rx_base, &s);
		rx_destroy(f->rx);
		f->rx = NULL;
	}
	return rx_create(&f->rx, &c, &feed_rx_ops, f);
}

void feed_stream_begin(struct feed *f, uint32_t day, uint64_t seq)
{
	char s[MOLD_SESSION_LEN + 1];
	struct tapeday td;

	(void)tapeday_init(&td, f->o.session); /* checked at open */
	if (rx_new(f) < 0) {
		log_err("out of memory for the receiver");
		exit(2);
	}
	f->day = day;
	tapeday_session(&td, day, &f->sess);
	f->start_seq = seq;
	f->eos_next = 0;
	f->later_day = 0;
	f->later_seen_ns = 0;
	f->pos[0] = f->pos[1] = 0;
	f->req_valid = 0;
	f->progress_next = seq;
	f->progress_ns = f->now;
	rx_start(f->rx, seq);
	mold_session_str(&f->sess, s);
	log_notice("day %u (session %s) from sequence number %" PRIu64, day, s, seq);
}

static void day_switch(struct feed *f, uint32_t day)
{
	book_clear(f->book);
	f->st.day_switches++;
	feed_stream_begin(f, day, 1);
}

/* The current day is over and all of it delivered. */
static int day_complete(const struct feed *f)
{
	return f->eos_next && rx_next(f->rx) >= f->eos_next;
}

/* ---- packets ------------------------------------------------------------- */

static void feed_block(struct feed *f, enum feed_side side, uint64_t seq, const uint8_t *data,
		       uint16_t len)
{
	struct feed_side_stats *ss = &f->side[side];
	struct rx_stats b, a;

	ss->messages++;
	if (seq < f->start_seq) {
		ss->before_start++;
		return;
	}
	rx_get_stats(f->rx, &b);
	rx_block(f->rx, seq, data, len, f->now);
	rx_get_stats(f->rx, &a);
	if (a.duplicates > b.duplicates)
		ss->duplicates++;
	else if (a.overflow > b.overflow)
		ss->overflow++;
	else
		ss->first++;
}

/* A's and B's own sequence: holes and position (for arbitration). */
static void side_position(struct feed *f, enum feed_side side, const struct mold_packet *p)
{
	struct feed_side_stats *ss = &f->side[side];
	uint64_t end = p->kind == MOLD_DATA ? p->seq + p->count : p->seq;

	if (side == FEED_R)
		return;
	if (f->pos[side] && p->seq > f->pos[side]) {
		ss->gaps++;
		ss->missed += p->seq - f->pos[side];
	}
	if (end > f->pos[side]) {
		f->pos[side] = end;
		f->advanced_ns[side] = f->now;
	}
}

static void keep_pending(struct feed *f, enum feed_side side, const uint8_t *buf, size_t len)
{
	size_t need = 3 + len;

	if (side == FEED_R) /* nothing was asked yet */
		return;
	if (!f->pend || f->pend_len + need > f->pend_cap) {
		f->st.pending_dropped++;
		return;
	}
	f->pend[f->pend_len] = (uint8_t)side;
	f->pend[f->pend_len + 1] = (uint8_t)(len >> 8);
	f->pend[f->pend_len + 2] = (uint8_t)len;
	memcpy(f->pend + f->pend_len + 3, buf, len);
	f->pend_len += need;
}

static void on_packet(struct feed *f, enum feed_side side, const uint8_t *buf, size_t len,
		      const struct sockaddr_in *from)
{
	struct feed_side_stats *ss = &f->side[side];
	struct mold_packet p;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t blen;
	uint32_t day;
	int err = mold_parse(buf, len, NULL, 0, &p);

	if (err < 0) {
		ss->malformed++;
		log_ratelimited(&rl_bad, LOG_LVL_WARNING, "feed %s: malformed datagram (%zu bytes): %s",
				feed_side_name(side), len, mold_strerror(err));
		return;
	}
	day = tapeday_day_of_session(&f->first, &p.session);
	if (day == 0) {
		ss->wrong_session++;
		return;
	}
	if (f->buffering) {
		keep_pending(f, side, buf, len);
		return;
	}
	ss->packets++;
	if (f->day == 0) {
		if (side == FEED_R)
			return;
		feed_stream_begin(f, day, 1);
	}
	if (day < f->day) {
		ss->old_day++;
		return;
	}
	if (day > f->day) {
		if (side == FEED_R || !day_complete(f)) {
			ss->later_day++;
			if (side != FEED_R && !f->later_seen_ns) {
				f->later_seen_ns = f->now;
				f->later_day = day;
			}
			return;
		}
		day_switch(f, day);
	}
	if (!rx_believable(f->rx, p.seq, p.kind == MOLD_DATA ? p.count : 0)) {
		ss->unbelievable++;
		return;
	}
	side_position(f, side, &p);
	switch (p.kind) {
	case MOLD_HEARTBEAT:
		ss->heartbeats++;
		if (side == FEED_R) { /* the too-old answer: nothing older than p.seq held */
			ss->too_old++;
			rxpath_too_old(f->rx, rxpath_server(f->servers, f->n_servers, from), "feed",
				       from, p.seq, f->now);
			return;
		}
		rx_tail(f->rx, p.seq, f->now);
		return;
	case MOLD_END_OF_SESSION:
		ss->end_of_session++;
		if (side == FEED_R)
			return;
		if (!f->eos_next)
			log_info("feed %s: end of session, next %" PRIu64, feed_side_name(side), p.seq);
		f->eos_next = p.seq;
		rx_tail(f->rx, p.seq, f->now);
		return;
	case MOLD_DATA:
		mold_iter_init(&it, &p);
		while (mold_iter_next(&it, &seq, &data, &blen))
			feed_block(f, side, seq, data, blen);
		return;
	}
}

void feed_stream_replay_pending(struct feed *f)
{
	size_t off = 0;

	f->buffering = 0;
	while (off + 3 <= f->pend_len) {
		enum feed_side side = (enum feed_side)f->pend[off];
		size_t len = (size_t)f->pend[off + 1] << 8 | f->pend[off + 2];

		on_packet(f, side, f->pend + off + 3, len, NULL);
		off += 3 + len;
	}
	free(f->pend);
	f->pend = NULL;
	f->pend_len = f->pend_cap = 0;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct feed *f = w->data;
	enum feed_side side = (enum feed_side)(w - f->io);

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n = net_batch_recv(&f->batch, w->fd);

		if (n <= 0)
			break;
		f->now = mono_ns();
		for (int i = 0; i < n; i++)
			on_packet(f, side, net_batch_slot(&f->batch, (unsigned)i), f->batch.lens[i],
				  &f->batch.addrs[i]);
		if ((unsigned)n < f->batch.n)
			break;
	}
	feed_stream_arm(f);
}

/* ---- the request timer and the tick --------------------------------------- */

void feed_stream_arm(struct feed *f)
{
	if (f->rx)
		rxpath_arm(f->loop, &f->rx_timer, rx_due(f->rx), f->now);
}

static void on_rx_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct feed *f = w->data;

	(void)loop;
	(void)revents;
	f->now = mono_ns();
	rx_tick(f->rx, f->now);
	feed_stream_arm(f);
}

void feed_stream_resume(struct feed *f)
{
	if (f->rx && rx_holding(f->rx))
		rx_resume(f->rx, f->now);
	feed_stream_arm(f);
}

uint64_t feed_stream_next(const struct feed *f)
{
	return f->rx ? rx_next(f->rx) : 0;
}

void feed_stream_tick(struct feed *f)
{
	uint64_t give_up = (uint64_t)(f->o.give_up * 1e9);
	uint64_t next;

	if (!f->rx || f->buffering)
		return;
	next = rx_next(f->rx);
	if (rx_missing(f->rx) == 0 || rx_holding(f->rx) || next != f->progress_next) {
		/* progress: the range to give up next is the one asked for next */
		f->progress_next = next;
		f->progress_ns = f->now;
		f->req_valid = 0;
	} else if (f->now - f->progress_ns >= give_up) {
		/* nobody answered for the first missing range: as if every
		 * server had said it no longer holds it (rx then calls on_lost) */
		uint64_t upto = f->req_valid && f->req_lo <= next && next < f->req_hi ? f->req_hi
										      : next + 1;

		for (unsigned s = 0; s < (f->n_servers ? f->n_servers : 1); s++)
			rx_too_old(f->rx, s, upto, f->now);
		f->progress_ns = f->now;
		f->req_valid = 0;
	}
	if (f->later_seen_ns && !day_complete(f) && !f->eos_next && rx_missing(f->rx) == 0 &&
	    !rx_holding(f->rx) && f->now - f->later_seen_ns >= give_up) {
		char s[MOLD_SESSION_LEN + 1];

		mold_session_str(&f->sess, s);
		log_warn("day %u (%s) ended without an End of Session heard on either feed: "
			 "taken as complete at %" PRIu64 " (a lost tail would go unnoticed)",
			 f->day, s, next - 1);
		f->st.day_end_assumed++;
		day_switch(f, f->later_day);
	}
	feed_stream_arm(f);
}

/* ---- set-up -------------------------------------------------------------- */

static int open_group(struct feed *f, int s)
{
	struct net_udp_options o = { .rcvbuf = FEED_RCVBUF, .nonblock = 1, .reuseaddr = 1 };
	struct sockaddr_in group;
	struct net_bufsize rcv;
	char what[32];
	int err = net_parse_addr(f->o.group[s], &group);

	if (err < 0) {
		log_err("--%s %s: not a GROUP:PORT", s ? "b" : "a", f->o.group[s]);
		return err;
	}
	if (!IN_MULTICAST(ntohl(group.sin_addr.s_addr))) {
		log_err("--%s %s: not a multicast group", s ? "b" : "a", f->o.group[s]);
		return -EINVAL;
	}
	f->fd[s] = net_mcast_recv_open(&group, f->o.iface, &o, &rcv);
	if (f->fd[s] < 0) {
		log_err("feed %s %s on %s: %s", s ? "B" : "A", f->o.group[s], f->o.iface,
			strerror(-f->fd[s]));
		return f->fd[s];
	}
	snprintf(what, sizeof(what), "feed %s", s ? "B" : "A");
	rxpath_bufsize_check(what, &rcv);
	f->joined[s] = 1;
	log_info("feed %s: joined %s on %s", s ? "B" : "A", f->o.group[s], f->o.iface);
	return 0;
}

int feed_stream_open(struct feed *f)
{
	struct net_udp_options ro = { .rcvbuf = FEED_RCVBUF, .nonblock = 1 };
	struct tapeday td;
	int err;

	for (int s = 0; s < FEED_SIDES; s++)
		f->fd[s] = -1;
	if (tapeday_init(&td, f->o.session) < 0) {
		log_err("--session %s: not a MoldUDP64 session name", f->o.session);
		return -EINVAL;
	}
	f->first = td.first;
	if (f->o.retrans) {
		err = addrlist_parse(f->o.retrans, f->servers, RX_MAX_SERVERS);
		if (err < 0) {
			log_err("--retrans %s: %s", f->o.retrans,
				err == -E2BIG ? "more than 9 servers" : "not a list of HOST:PORT");
			return err;
		}
		f->n_servers = (unsigned)err;
	}
	rx_rng_seed(&f->rng, rx_seed_of("lockstep-feed", (uint64_t)getpid() ^ mono_ns()));
	if (net_batch_init(&f->batch, FEED_BATCH, MOLD_MAX_PACKET) < 0)
		return -ENOMEM;
	for (int s = 0; s < 2; s++)
		if (f->o.group[s] && (err = open_group(f, s)) < 0)
			return err;
	/* requests leave from here, answers come back here only */
	f->fd[FEED_R] = net_udp_open_on(f->o.iface, &ro, NULL, NULL);
	if (f->fd[FEED_R] < 0) {
		log_err("request socket on %s: %s", f->o.iface, strerror(-f->fd[FEED_R]));
		return f->fd[FEED_R];
	}
	if (f->o.glimpse) {
		f->buffering = 1;
		f->pend_cap = FEED_PEND_BYTES;
		f->pend = malloc(f->pend_cap);
		if (!f->pend)
			return -ENOMEM;
	}
	for (int s = 0; s < FEED_SIDES; s++) {
		if (f->fd[s] < 0)
			continue;
		ev_io_init(&f->io[s], on_readable, f->fd[s], EV_READ);
		f->io[s].data = f;
		ev_io_start(f->loop, &f->io[s]);
	}
	ev_init(&f->rx_timer, on_rx_timer);
	f->rx_timer.data = f;
	return 0;
}

void feed_stream_close(struct feed *f)
{
	ev_timer_stop(f->loop, &f->rx_timer);
	for (int s = FEED_SIDES - 1; s >= 0; s--) {
		if (f->fd[s] < 0)
			continue;
		ev_io_stop(f->loop, &f->io[s]);
		close(f->fd[s]);
		f->fd[s] = -1;
	}
	if (f->rx) {
		struct rx_stats s;

		rx_get_stats(f->rx, &s);
		stats_add(&f->rx_base, &s);
		rx_destroy(f->rx);
		f->rx = NULL;
	}
	free(f->pend);
	f->pend = NULL;
	net_batch_fini(&f->batch);
}
