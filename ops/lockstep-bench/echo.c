/* lockstep-bench --baseline: the echo. It answers each order in the relay's
 * datagrams, in datagrams back to it: an Enter with Accepted (an IOC also
 * with a full Executed), a Cancel with Canceled, a Replace with Replaced.
 * It batches with recvmmsg/sendmmsg, and waits in poll() or, with --spin,
 * spins. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "bench.h"
#include "wire.h"

struct echo {
	int fd;
	struct net_batch in, out;
	unsigned n_out; /* datagrams in `out` */
	struct mold_session sess;
	uint64_t seq, match;
};

static int echo_answer(const uint8_t *in, uint16_t len, uint64_t *match,
		       uint8_t out[2][2 + OUCH_MAX_LEN], uint16_t out_len[2])
{
	struct ouch_msg m, a;
	int n = 0, l;

	if (len < 3 || ouch_decode_inbound(in + 2, (size_t)len - 2, &m) < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	switch (m.type) {
	case OUCH_ENTER_ORDER:
		a.type = OUCH_ACCEPTED;
		mix_accept(&m.u.enter, ++*match, &a.u.accepted);
		break;
	case OUCH_CANCEL_ORDER:
		a.type = OUCH_CANCELED;
		memcpy(a.u.canceled.token, m.u.cancel.token, sizeof(a.u.canceled.token));
		a.u.canceled.decrement = 100;
		a.u.canceled.reason = OUCH_CXL_USER;
		break;
	case OUCH_REPLACE_ORDER:
		a.type = OUCH_REPLACED;
		memcpy(a.u.replaced.replacement_token, m.u.replace.replacement_token,
		       sizeof(a.u.replaced.replacement_token));
		memcpy(a.u.replaced.previous_token, m.u.replace.existing_token,
		       sizeof(a.u.replaced.previous_token));
		a.u.replaced.side = OUCH_BUY;
		a.u.replaced.shares = m.u.replace.shares;
		memcpy(a.u.replaced.stock, "AAPL", 5);
		a.u.replaced.price = m.u.replace.price;
		a.u.replaced.tif = m.u.replace.tif;
		a.u.replaced.display = m.u.replace.display;
		a.u.replaced.order_ref = ++*match;
		a.u.replaced.capacity = OUCH_CAP_AGENCY;
		a.u.replaced.iso = m.u.replace.iso;
		a.u.replaced.cross_type = OUCH_CROSS_NONE;
		a.u.replaced.state = OUCH_STATE_LIVE;
		a.u.replaced.bbo_weight = '0';
		break;
	default:
		return 0;
	}
	for (;;) {
		l = ouch_encode_outbound(&a, out[n] + 2, OUCH_MAX_LEN);
		if (l < 0)
			return n;
		out[n][0] = in[0];
		out[n][1] = in[1];
		out_len[n++] = (uint16_t)(l + 2);
		if (n == 2 || m.type != OUCH_ENTER_ORDER || m.u.enter.tif != OUCH_TIF_IOC)
			return n;
		/* a marketable order: filled in full, as the aggressor */
		memset(&a, 0, sizeof(a));
		a.type = OUCH_EXECUTED;
		memcpy(a.u.executed.token, m.u.enter.token, sizeof(a.u.executed.token));
		a.u.executed.shares = m.u.enter.shares;
		a.u.executed.price = m.u.enter.price;
		a.u.executed.liquidity = OUCH_LIQ_REMOVED;
		a.u.executed.match = *match;
	}
}

/* The answers to the orders of received datagram k, in datagrams back to
 * its sender. */
static void echo_datagram(void *ctx, unsigned k)
{
	struct echo *e = ctx;
	struct mold_builder b;
	struct mold_iter it;
	const uint8_t *d;
	uint64_t sq;
	uint16_t len;

	if (bench_mold_iter(&e->in, k, &it) < 0)
		return;
	mold_build_begin(&b, net_batch_slot(&e->out, e->n_out), e->out.size, &e->sess, e->seq);
	while (mold_iter_next(&it, &sq, &d, &len)) {
		uint8_t a[2][2 + OUCH_MAX_LEN];
		uint16_t al[2];
		int na = echo_answer(d, len, &e->match, a, al);

		for (int j = 0; j < na; j++) {
			if (mold_build_add(&b, a[j], al[j]) == 0) {
				e->seq++;
				continue;
			}
			bench_batch_push(&e->out, &e->n_out, &b, &e->in.addrs[k], e->fd);
			mold_build_begin(&b, net_batch_slot(&e->out, e->n_out), e->out.size, &e->sess,
					 e->seq);
			mold_build_add(&b, a[j], al[j]);
			e->seq++;
		}
	}
	if (b.count)
		bench_batch_push(&e->out, &e->n_out, &b, &e->in.addrs[k], e->fd);
}

int echo_run(int ufd)
{
	struct echo e = { .fd = ufd, .seq = 1 };

	if (net_batch_init(&e.in, RELAY_BATCH, WIRE_MAX_DATAGRAM) < 0 ||
	    net_batch_init(&e.out, RELAY_BATCH * 3, WIRE_MAX_DATAGRAM) < 0)
		return 1;
	mold_session_set(&e.sess, "ECHO");
	for (;;) {
		struct pollfd pf = { .fd = ufd, .events = POLLIN };

		if (poll(&pf, 1, opt.spin ? 0 : -1) < 0 && errno != EINTR)
			return 1;
		e.n_out = 0;
		bench_batch_each(&e.in, ufd, echo_datagram, &e);
		if (e.n_out)
			net_batch_send(&e.out, ufd, e.n_out);
	}
}
