/* The public feed's retransmission server (matcher/feed.c has the rest):
 * MoldUDP64 requests from any subscriber, for any day the ring still holds,
 * answered from the ring under the requester's byte budget ([node]
 * retrans_budget); a request older than the ring gets the too-old answer
 * (common/rx.h) and then what is held. */
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "feed_private.h"
#include "log.h"
#include "rxpath.h"

static void serve(struct matcher *m, const uint8_t *buf, size_t len,
		  const struct sockaddr_in *from)
{
	struct matcher_feed *f = m->feed;
	struct mold_request r;
	struct mold_builder b;
	uint32_t day;
	uint64_t seq, end;
	unsigned k = 0, n;

	if (mold_parse_request(buf, len, NULL, &r) < 0 ||
	    !(day = tapeday_day_of(&f->days, &r.session)) || r.seq == 0) {
		f->st.requests_bad++;
		return;
	}
	f->st.requests++;
	seq = r.seq;
	end = r.seq + r.count;
	if (day == f->gen.st.day && f->gen.st.next > f->ring_n && seq < f->gen.st.next - f->ring_n) {
		/* the too-old answer (common/rx.h): a heartbeat carrying the
		 * oldest held, then what is held */
		uint64_t oldest = f->gen.st.next - f->ring_n;

		f->st.requests_too_old++;
		f->req_tx.lens[k] = rxpath_too_old_answer(net_batch_slot(&f->req_tx, k), &r.session,
							  "feed", seq, oldest);
		f->req_tx.addrs[k++] = *from;
		seq = oldest;
	}
	while (seq < end && k < f->req_tx.n && k < RETRANS_PACKETS) {
		uint16_t mlen;
		const uint8_t *msg = ring_get(f, day, seq, &mlen);

		if (!msg)
			break;
		mold_build_begin(&b, net_batch_slot(&f->req_tx, k), m->cfg->max_datagram,
				 &r.session, seq);
		for (; seq < end && msg; seq++, msg = ring_get(f, day, seq, &mlen)) {
			if (mold_build_add(&b, msg, mlen) < 0)
				break;
			f->st.resent++;
		}
		f->req_tx.lens[k] = mold_build_end(&b);
		f->req_tx.addrs[k++] = *from;
		if (!msg)
			break;
	}
	if (k == 0) {
		f->st.requests_not_held++;
		return;
	}
	n = src_budget_prefix(&f->budget, from->sin_addr.s_addr, f->req_tx.lens, k, m->now);
	if (n < k)
		f->st.budget_refused++;
	if (n)
		net_batch_send(&f->req_tx, f->retrans_fd, n);
}

static void on_retrans(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	struct matcher_feed *f = m->feed;
	int n = net_batch_recv(&f->req_rx, f->retrans_fd);

	(void)loop;
	(void)revents;
	if (n > 0)
		m->now = mono_ns();
	for (int i = 0; i < n; i++) {
		if (m->diverged) {
			f->st.requests_refused++;
			continue;
		}
		serve(m, net_batch_slot(&f->req_rx, (unsigned)i), f->req_rx.lens[i],
		      &f->req_rx.addrs[i]);
	}
}

int matcher_feed_retrans_open(struct matcher *m, struct matcher_feed *f)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options o = { .nonblock = 1 };
	struct sockaddr_in local;
	int err;

	f->retrans_fd = -1;
	if (!c->feed_retrans[0])
		return 0;
	if ((err = net_parse_addr(c->feed_retrans, &local)) < 0 ||
	    (f->retrans_fd = net_udp_open(&local, &o, NULL, NULL)) < 0) {
		err = err < 0 ? err : f->retrans_fd;
		log_err("[feed] retrans %s: %s", c->feed_retrans, strerror(-err));
		return err;
	}
	return 0;
}

void matcher_feed_retrans_start(struct matcher *m, struct matcher_feed *f)
{
	if (f->retrans_fd < 0)
		return;
	ev_io_init(&f->retrans_io, on_retrans, f->retrans_fd, EV_READ);
	f->retrans_io.data = m;
	ev_io_start(m->loop, &f->retrans_io);
}
