/* The matcher's public ITCH feed (issue 18): the messages of feedgen.h
 * kept in a ring and published on feed A or B (MoldUDP64 multicast, no
 * tag: the feed is public), its heartbeats and end of session, the
 * takeover of a silent feed by a standby replica, and the retransmission
 * server that answers any subscriber from the ring.
 *
 * Who publishes: replica 0 feed A, replica 1 feed B, each while live and
 * not diverged. Every replica listens to both groups; a feed from which it
 * hears no other sender for [feed] takeover x its rank is taken over: for
 * feed A the ranks are replicas 2, 3, ... then replica 1 (which owns B);
 * for feed B replicas 2, 3, ... then replica 0. A replica that took a feed
 * over stands down when it hears another sender on it (the owner back, or
 * another standby: the next silence is then taken by the lower rank
 * first). Two senders of one feed for a moment send the same messages
 * under the same sequence numbers: a subscriber drops the second copy.
 *
 * Every replica, publishing or not, keeps the messages in its ring and
 * answers requests (feed_retrans.c): the streams are one, so any replica
 * serves any of them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "clock.h"
#include "feed_private.h"
#include "glimpse.h"
#include "hist.h"
#include "log.h"
#include "matcher_private.h"
#include "moldudp64.h"
#include "net.h"
#include "prealloc.h"
#include "srcbudget.h"
#include "tapeday.h"

static void restore(struct matcher *m);
static void session_sync(struct matcher_feed *f);

/* --- publishing ------------------------------------------------------------- */

static int publishing_any(const struct matcher_feed *f)
{
	return f->publishing[FEED_A] || f->publishing[FEED_B];
}

/* Closes the packet being built; sent with the next flush. */
static void end_packet(struct matcher_feed *f)
{
	f->tx.lens[f->pkt_slot] = mold_build_end(&f->pkt);
	f->pkt_slot = f->tx.n;
	f->tx_count++;
}

void matcher_feed_flush(struct matcher *m)
{
	struct matcher_feed *f = m->feed;
	unsigned total = 0;
	int sent;

	if (!f)
		return;
	if (f->pkt_slot < f->tx.n)
		end_packet(f);
	if (f->tx_count == 0)
		return;
	/* packets are built in the first half; a second group's copies
	 * follow them */
	for (int k = 0; k < FEEDS; k++) {
		if (!f->publishing[k])
			continue;
		for (unsigned i = 0; i < f->tx_count; i++) {
			unsigned dst = total + i;

			if (dst != i) {
				memcpy(net_batch_slot(&f->tx, dst), net_batch_slot(&f->tx, i),
				       f->tx.lens[i]);
				f->tx.lens[dst] = f->tx.lens[i];
			}
			f->tx.addrs[dst] = f->group[k];
		}
		total += f->tx_count;
	}
	if (total) {
		uint64_t wall;

		sent = net_batch_send_wait(&f->tx, f->send_fd, total, NET_SEND_WAIT_NS,
					   &f->st.send_waits);
		wall = wall_ns();
		for (int k = 0; k < FEEDS; k++)
			if (f->publishing[k]) {
				f->sent_day[k] = f->pkt_day;
				f->sent_next[k] = f->gen.st.next;
			}
		for (unsigned i = 0; i < f->n_runs; i++)
			hist_record_n(&f->latency,
				      wall > f->runs[i].tape_ns ? wall - f->runs[i].tape_ns : 0,
				      f->runs[i].n);
		if (sent < (int)total)
			f->st.send_errors += total - (unsigned)(sent < 0 ? 0 : sent);
		f->st.packets += total;
		f->last_send_ns = mono_ns();
	}
	f->tx_count = 0;
	f->n_runs = 0;
}

static void begin_packet(struct matcher_feed *f, struct matcher *m, uint32_t day, uint64_t seq)
{
	struct mold_session s;

	if (f->tx_count == f->tx.n / 2)
		matcher_feed_flush(m);
	tapeday_session(&f->days, day, &s);
	f->pkt_slot = f->tx_count;
	f->pkt_day = day;
	mold_build_begin(&f->pkt, net_batch_slot(&f->tx, f->pkt_slot), m->cfg->max_datagram, &s,
			 seq);
}

/* feedgen's output: into the ring, and into the packet when publishing. */
static void feed_out(void *ctx, uint32_t day, uint64_t seq, const uint8_t *msg, size_t len)
{
	struct matcher *m = ctx;
	struct matcher_feed *f = m->feed;

	ring_put(f, day, seq, msg, len);
	f->st.messages++;
	if (!publishing_any(f))
		return;
	if (f->n_runs && f->runs[f->n_runs - 1].tape_ns == f->cur_tape_ns)
		f->runs[f->n_runs - 1].n++;
	else if (f->n_runs < FEED_RUNS)
		f->runs[f->n_runs++] = (struct feed_run){ f->cur_tape_ns, 1 };
	else
		f->runs[FEED_RUNS - 1].n++; /* counted at a later time: a little more */
	if (f->pkt_slot < f->tx.n && f->pkt_day != day)
		end_packet(f);
	if (f->pkt_slot == f->tx.n)
		begin_packet(f, m, day, seq);
	if (mold_build_add(&f->pkt, msg, (uint16_t)len) < 0) {
		end_packet(f);
		begin_packet(f, m, day, seq);
		mold_build_add(&f->pkt, msg, (uint16_t)len);
	}
}

/* The engine's reports, but none of the diverge fault's order: its
 * replica's feed stays the others' until the vote stops it. */
static void feed_md(void *ctx, const struct engine_md *md)
{
	struct matcher *m = ctx;

	if (m->fault_active)
		return;
	feedgen_md(&m->feed->gen, md);
}

void matcher_feed_begin(struct matcher *m, uint64_t tape_ns)
{
	if (m->feed) {
		m->feed->cur_tape_ns = tape_ns;
		feedgen_begin(&m->feed->gen, tape_ns);
	}
}

/* Heartbeat, or end of session once the day's end went out, to the feeds
 * this replica publishes. */
static void heartbeat(struct matcher_feed *f, uint64_t now)
{
	uint8_t hb[MOLD_HEADER_LEN];
	struct mold_session s;
	size_t n;

	tapeday_session(&f->days, f->gen.st.day, &s);
	n = f->gen.st.ended ? mold_build_end_of_session(hb, &s, f->gen.st.next)
			    : mold_build_heartbeat(hb, &s, f->gen.st.next);
	for (int k = 0; k < FEEDS; k++)
		if (f->publishing[k] &&
		    sendto(f->send_fd, hb, n, 0, (struct sockaddr *)&f->group[k],
			   sizeof(f->group[k])) == (ssize_t)n)
			f->st.heartbeats++;
	f->last_send_ns = now;
}

/* Starts publishing feed k: first, from the ring, what the feed has not
 * carried of the day: the messages from the next sequence number the last
 * packet heard on it announced (from the day's first when none was heard,
 * as at the cluster's start, when no replica was live yet), at most
 * FEED_CATCHUP of them (a subscriber asks for older ones). */
static void start_publishing(struct matcher *m, int k)
{
	struct matcher_feed *f = m->feed;
	uint64_t next = f->gen.st.next, seq = f->heard_next[k];
	struct mold_session s;
	struct mold_builder b;
	unsigned n = 0;

	matcher_feed_flush(m);
	if (f->sent_day[k] == f->gen.st.day && f->sent_next[k] > seq)
		seq = f->sent_next[k]; /* this replica sent them itself */
	if (seq == 0)
		seq = 1;
	if (next > FEED_CATCHUP && seq < next - FEED_CATCHUP)
		seq = next - FEED_CATCHUP;
	tapeday_session(&f->days, f->gen.st.day, &s);
	while (seq < next) {
		uint16_t len;
		const uint8_t *msg = ring_get(f, f->gen.st.day, seq, &len);

		if (!msg) {
			seq++;
			continue;
		}
		mold_build_begin(&b, net_batch_slot(&f->req_tx, n), m->cfg->max_datagram, &s, seq);
		for (; msg && mold_build_add(&b, msg, len) == 0; msg = ring_get(f, f->gen.st.day, seq, &len))
			if (++seq == next)
				break;
		f->req_tx.lens[n] = mold_build_end(&b);
		f->req_tx.addrs[n] = f->group[k];
		f->st.caught_up += b.count;
		if (++n == f->req_tx.n || seq == next) {
			int sent = net_batch_send_wait(&f->req_tx, f->send_fd, n, NET_SEND_WAIT_NS,
						       &f->st.send_waits);

			if (sent < (int)n)
				f->st.send_errors += n - (unsigned)(sent < 0 ? 0 : sent);
			f->st.packets += n;
			n = 0;
		}
	}
	f->publishing[k] = 1;
	f->last_send_ns = mono_ns();
}

/* Whether this replica should publish feed k now: it starts only when
 * live; it stops when diverged, stalled or its position is unknown, not
 * for a moment of catching up (a gap in the tape being repaired: what it
 * sends is still the stream, only later). */
static void decide(struct matcher *m, int k, uint64_t now)
{
	struct matcher_feed *f = m->feed;
	int live = m->state == M_LIVE && !m->diverged && f->known;
	int stop = m->diverged || !f->known || m->state == M_STALLED || m->state == M_STARTING;
	uint64_t wait = m->cfg->feed_takeover_ns * (uint64_t)f->rank[k];

	if (!f->has[k])
		return;
	if (f->publishing[k] && stop) {
		log_warn("feed %c: stopped publishing (%s)", feed_name[k],
			 m->diverged ? "diverged" : !f->known ? "position unknown" : "stalled");
		f->publishing[k] = 0;
		return;
	}
	if (f->publishing[k] || !live)
		return;
	if (f->owner == k) {
		log_notice("feed %c: publishing from sequence number %llu (the feed had %llu)",
			   feed_name[k], (unsigned long long)f->gen.st.next,
			   (unsigned long long)f->heard_next[k]);
		start_publishing(m, k);
		return;
	}
	/* at start, the owner gets FEED_BOOT_GRACE_NS more to come up */
	if (f->rank[k] > 0 && now - f->heard_ns[k] > wait &&
	    (f->ever_heard[k] || now - f->start_ns > wait + FEED_BOOT_GRACE_NS)) {
		start_publishing(m, k);
		f->st.takeovers++;
		log_warn("feed %c: no publisher heard for %llu ms: this replica publishes it "
			 "from sequence number %llu",
			 feed_name[k], (unsigned long long)((now - f->heard_ns[k]) / 1000000),
			 (unsigned long long)f->gen.st.next);
	}
}

void matcher_feed_tick(struct matcher *m, uint64_t now)
{
	struct matcher_feed *f = m->feed;
	int was;

	if (!f)
		return;
	was = publishing_any(f);
	session_sync(f);
	for (int k = 0; k < FEEDS; k++)
		decide(m, k, now);
	if (!publishing_any(f) && was)
		f->pkt_slot = f->tx.n, f->tx_count = 0, f->n_runs = 0;
	if (publishing_any(f) && now - f->last_send_ns >= m->cfg->heartbeat_ns)
		heartbeat(f, now);
}

void matcher_feed_end(struct matcher *m)
{
	struct matcher_feed *f = m->feed;

	if (!f)
		return;
	matcher_feed_flush(m);
	if (publishing_any(f))
		heartbeat(f, mono_ns());
}

/* --- listening: is another replica publishing? ------------------------------ */

/* The current day's session, for what is heard: a new day forgets the
 * positions heard on the last. */
static void session_sync(struct matcher_feed *f)
{
	if (f->session_day == f->gen.st.day)
		return;
	f->session_day = f->gen.st.day;
	tapeday_session(&f->days, f->session_day, &f->session_now);
	f->heard_next[FEED_A] = f->heard_next[FEED_B] = 0;
}

/* One batch of what is heard on feed k; its size. */
static int listen_batch(struct matcher_feed *f, int k, uint64_t now)
{
	int n = net_batch_recv_counted(&f->lrx, f->listen_fd[k], &f->rxq_listen[k]);

	for (int i = 0; i < n; i++) {
		const struct sockaddr_in *a = &f->lrx.addrs[i];
		struct mold_packet p;

		if (net_addr_same(a, &f->self))
			continue; /* our own, looped back */
		if (mold_parse(net_batch_slot(&f->lrx, (unsigned)i), f->lrx.lens[i], NULL, 0, &p) < 0) {
			f->st.foreign_malformed++;
			continue;
		}
		f->heard_ns[k] = now;
		f->ever_heard[k] = 1;
		session_sync(f);
		if (memcmp(&p.session, &f->session_now, sizeof(p.session)) == 0) {
			uint64_t nx = p.kind == MOLD_DATA ? p.seq + p.count : p.seq;

			if (nx > f->heard_next[k])
				f->heard_next[k] = nx;
		}
		f->st.heard[k]++;
		if (f->publishing[k] && f->owner != k) {
			f->publishing[k] = 0;
			f->st.stood_down++;
			log_notice("feed %c: another publisher heard (%s:%u): standing down",
				   feed_name[k], inet_ntoa(a->sin_addr), ntohs(a->sin_port));
		}
	}
	return n;
}

/* Drained at every wakeup, so that the socket never overflows (its
 * buffer is the tape's, [matcher] rcvbuf, for the same slow moments). */
static void on_listen(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	struct matcher_feed *f = m->feed;
	int k = w == &f->listen_io[FEED_A] ? FEED_A : FEED_B;
	uint64_t now = mono_ns();

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++)
		if (listen_batch(f, k, now) < (int)f->lrx.n)
			break;
	f->st.listen_dropped = f->rxq_listen[FEED_A] + f->rxq_listen[FEED_B];
}

/* --- life cycle ---------------------------------------------------------------- */

/* The takeover ranks (see the top): 0 for the feed this replica owns. */
static void ranks(struct matcher_feed *f, uint64_t replica, uint64_t replicas)
{
	f->owner = replica == 0 ? FEED_A : replica == 1 ? FEED_B : -1;
	for (int k = 0; k < FEEDS; k++) {
		if (f->owner == k)
			f->rank[k] = 0;
		else if (replica >= 2)
			f->rank[k] = (int)replica - 1;
		else /* the other feed's owner: the last resort */
			f->rank[k] = replicas > 2 ? (int)replicas - 1 : 1;
	}
}

static int open_groups(struct matcher *m, struct matcher_feed *f)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options so = { .sndbuf = (int)c->sndbuf, .nonblock = 1 };
	struct net_udp_options lo = { .rcvbuf = (int)c->rcvbuf, .nonblock = 1, .reuseaddr = 1,
				      .rxq_ovfl = 1 };
	const char *g[FEEDS] = { c->feed_a_group, c->feed_b_group };
	socklen_t sl = sizeof(f->self);
	int err;

	f->send_fd = net_udp_open_on(c->tape_iface, &so, NULL, NULL);
	if (f->send_fd < 0 ||
	    (err = net_mcast_send_setup(f->send_fd, c->tape_iface, 1)) < 0 ||
	    getsockname(f->send_fd, (struct sockaddr *)&f->self, &sl) < 0) {
		err = f->send_fd < 0 ? f->send_fd : -errno;
		log_err("feed: send socket on %s: %s", c->tape_iface, strerror(-err));
		return err;
	}
	for (int k = 0; k < FEEDS; k++) {
		f->listen_fd[k] = -1;
		if (!g[k][0])
			continue;
		if ((err = net_parse_addr(g[k], &f->group[k])) < 0) {
			log_err("[feed] %c_group %s: %s", "ab"[k], g[k], strerror(-err));
			return err;
		}
		f->has[k] = 1;
		if (f->owner == k)
			continue; /* never taken over from its owner: not listened to */
		f->listen_fd[k] = net_mcast_recv_open(&f->group[k], c->tape_iface, &lo, NULL);
		if (f->listen_fd[k] < 0) {
			log_err("feed %c: %s on %s: %s", feed_name[k], g[k], c->tape_iface,
				strerror(-f->listen_fd[k]));
			return f->listen_fd[k];
		}
	}
	return 0;
}

int matcher_feed_open(struct matcher *m, const struct engine_config *ec)
{
	const struct matcher_config *c = m->cfg;
	struct feedgen_config gc = {
		.symbols = ec->symbols, .n_symbols = ec->n_symbols,
		.locate_base = (uint32_t)c->feed_locate_base, .tracking = (uint16_t)c->partition,
	};
	struct matcher_feed *f;
	int err;

	if (!c->feed_a_group[0] && !c->feed_b_group[0])
		return 0;
	if (!(f = calloc(1, sizeof(*f))))
		return -ENOMEM;
	m->feed = f;
	f->send_fd = f->listen_fd[0] = f->listen_fd[1] = f->retrans_fd = -1;
	f->known = 1;
	f->ring_n = c->feed_ring;
	if ((err = tapeday_init(&f->days, c->feed_session)) < 0) {
		log_err("[feed] session %s: not a MoldUDP64 session name", c->feed_session);
		return err;
	}
	if ((err = feedgen_init(&f->gen, &gc, feed_out, m)) < 0) {
		log_err("[feed]: %zu symbols from stock locate %llu: out of range", ec->n_symbols,
			(unsigned long long)c->feed_locate_base);
		return err;
	}
	/* faulted in now: the feed's first pass over the ring would pay a
	 * page fault every 64 messages in the replica's loop */
	if (!(f->ring = prealloc_zeroed(f->ring_n, FEED_SLOT)) ||
	    net_batch_init(&f->tx, 2 * (unsigned)c->batch, c->max_datagram) < 0 ||
	    net_batch_init(&f->lrx, (unsigned)c->batch, c->max_datagram) < 0 ||
	    net_batch_init(&f->req_rx, 16, 64) < 0 ||
	    net_batch_init(&f->req_tx, RETRANS_PACKETS, c->max_datagram) < 0)
		return -ENOMEM;
	f->pkt_slot = f->tx.n;
	hist_init(&f->latency);
	src_budget_init(&f->budget, c->node.retrans_budget, 0);
	ranks(f, c->replica, c->replicas);
	restore(m);
	if ((err = open_groups(m, f)) < 0 || (err = matcher_feed_retrans_open(m, f)) < 0)
		return err;
	engine_set_md(m->engine, feed_md, m);
	return 0;
}

void matcher_feed_start(struct matcher *m)
{
	struct matcher_feed *f = m->feed;

	if (!f)
		return;
	f->start_ns = f->last_send_ns = mono_ns();
	for (int k = 0; k < FEEDS; k++) {
		f->heard_ns[k] = f->start_ns;
		if (f->listen_fd[k] < 0)
			continue;
		ev_io_init(&f->listen_io[k], on_listen, f->listen_fd[k], EV_READ);
		f->listen_io[k].data = m;
		ev_io_start(m->loop, &f->listen_io[k]);
	}
	matcher_feed_retrans_start(m, f);
	log_notice("feed: %s%s%s%s, session %s, stock locates %llu..%llu, retransmissions on %s; "
		   "owner of %s",
		   f->has[FEED_A] ? "A " : "", f->has[FEED_A] ? m->cfg->feed_a_group : "",
		   f->has[FEED_B] ? " B " : "", f->has[FEED_B] ? m->cfg->feed_b_group : "",
		   m->cfg->feed_session, (unsigned long long)m->cfg->feed_locate_base,
		   (unsigned long long)(m->cfg->feed_locate_base + f->gen.cfg.n_symbols - 1),
		   m->cfg->feed_retrans[0] ? m->cfg->feed_retrans : "(none)",
		   f->owner < 0 ? "neither feed (standby)" : f->owner == FEED_A ? "feed A" : "feed B");
}

void matcher_feed_close(struct matcher *m)
{
	struct matcher_feed *f = m->feed;

	if (!f)
		return;
	if (m->loop) {
		for (int k = 0; k < FEEDS; k++)
			if (f->listen_fd[k] >= 0)
				ev_io_stop(m->loop, &f->listen_io[k]);
		if (f->retrans_fd >= 0)
			ev_io_stop(m->loop, &f->retrans_io);
	}
	for (int k = 0; k < FEEDS; k++)
		if (f->listen_fd[k] >= 0)
			close(f->listen_fd[k]);
	if (f->send_fd >= 0)
		close(f->send_fd);
	if (f->retrans_fd >= 0)
		close(f->retrans_fd);
	net_batch_fini(&f->tx);
	net_batch_fini(&f->lrx);
	net_batch_fini(&f->req_rx);
	net_batch_fini(&f->req_tx);
	free(f->ring);
	free(f);
	m->feed = NULL;
}

/* --- GLIMPSE: the snapshot's image (glimpse.h) ---------------------------- */

static void glimpse_out(void *ctx, uint32_t day, uint64_t seq, const uint8_t *msg, size_t len)
{
	(void)day;
	(void)seq;
	(void)glimpse_image_add(ctx, msg, len);
}

/* On the matcher's loop, between two tape events: the book as feeds A and
 * B stand now, at the engine's time (every replica at this tape position
 * gives the same bytes). None while the feed would not be published: the
 * stream's position unknown, the replica not live or diverged. */
void matcher_feed_glimpse_image(void *ctx, struct glimpse_image *img)
{
	struct matcher *m = ctx;
	struct matcher_feed *f = m->feed;
	char name[MOLD_SESSION_LEN + 1];
	struct engine_stats es;
	struct mold_session ms;

	if (!f || !f->known || m->state != M_LIVE || m->diverged)
		return;
	/* an upper bound (every open order displayed, with attribution): the
	 * buffer grows at most once */
	engine_get_stats(m->engine, &es);
	(void)glimpse_image_reserve(
		img, es.orders_open * (SOUP_HEADER_LEN + ITCH_ADD_ORDER_MPID_LEN) +
			     f->gen.cfg.n_symbols * (2 * SOUP_HEADER_LEN + ITCH_STOCK_DIRECTORY_LEN +
						     ITCH_TRADING_ACTION_LEN) +
			     SOUP_HEADER_LEN + ITCH_END_OF_SNAPSHOT_LEN);
	feedgen_glimpse(&f->gen, m->engine, engine_time(m->engine), glimpse_out, img);
	tapeday_session(&f->days, f->gen.st.day, &ms);
	mold_session_str(&ms, name);
	(void)glimpse_image_end(img, name, f->gen.st.next);
}

/* --- the position, for snapshots; what STATUS and STATS say ------------------ */

const struct matcher_snap_feed *matcher_feed_position(const struct matcher *m,
						     struct matcher_snap_feed *out)
{
	const struct feedgen_state *st;

	if (!m->feed || !m->feed->known)
		return NULL;
	st = &m->feed->gen.st;
	*out = (struct matcher_snap_feed){
		.day = st->day, .next = st->next,
		.flags = MATCHER_SNAP_FEED_KNOWN | (st->started ? MATCHER_SNAP_FEED_STARTED : 0) |
			 (st->ended ? MATCHER_SNAP_FEED_ENDED : 0),
	};
	return out;
}

/* The position a loaded snapshot gave (m->snap_feed), or its absence. */
static void restore(struct matcher *m)
{
	struct matcher_feed *f = m->feed;
	const struct matcher_snap_feed *p = &m->snap_feed;

	if (!m->snap_feed_loaded)
		return;
	if (!(p->flags & MATCHER_SNAP_FEED_KNOWN) || p->day == 0 || p->next == 0) {
		/* a snapshot of before the feed: the position is unknown until
		 * the next day starts the stream anew */
		f->known = 0;
		log_warn("feed: the snapshot loaded holds no feed position: the feed is withheld "
			 "until the next trading day starts");
		return;
	}
	f->gen.st = (struct feedgen_state){
		.day = p->day, .next = p->next,
		.started = !!(p->flags & MATCHER_SNAP_FEED_STARTED),
		.ended = !!(p->flags & MATCHER_SNAP_FEED_ENDED),
	};
	f->known = 1;
}

void matcher_feed_day_started(struct matcher *m)
{
	if (m->feed && !m->feed->known) {
		m->feed->known = 1;
		log_notice("feed: a new day: its position is known again");
	}
}

const struct matcher_feed_stats *matcher_feed_stats(const struct matcher *m)
{
	struct matcher_feed *f = m->feed;

	if (!f)
		return NULL;
	f->st.latency_p50_ns = hist_percentile(&f->latency, 50);
	f->st.latency_p99_ns = hist_percentile(&f->latency, 99);
	f->st.latency_p999_ns = hist_percentile(&f->latency, 99.9);
	f->st.latency_max_ns = f->latency.count ? f->latency.max : 0;
	f->st.latency_count = f->latency.count;
	f->st.encode_errors = f->gen.encode_errors;
	return &f->st;
}

void matcher_feed_describe(const struct matcher *m, char *out, size_t cap)
{
	const struct matcher_feed *f = m->feed;
	char s[MOLD_SESSION_LEN + 1];
	struct mold_session ms;

	if (!f) {
		snprintf(out, cap, "off");
		return;
	}
	tapeday_session(&f->days, f->gen.st.day, &ms);
	mold_session_str(&ms, s);
	snprintf(out, cap, "%s%s%s, session %s, next %llu%s%s",
		 f->publishing[FEED_A] ? "publishing A" : "",
		 f->publishing[FEED_A] && f->publishing[FEED_B] ? " and " : "",
		 f->publishing[FEED_B] ? (f->publishing[FEED_A] ? "B" : "publishing B")
				       : (f->publishing[FEED_A] ? "" : "standby"),
		 s, (unsigned long long)f->gen.st.next, f->gen.st.ended ? ", day ended" : "",
		 f->known ? "" : ", position unknown (withheld)");
}
