/* A daemon's datagram path ([node] io): the io_uring rings when asked for
 * and allowed, else recvmmsg/sendmmsg; the fall-back warning; STATUS and
 * STATS. */
#include <errno.h>
#include <string.h>

#include "iopath.h"
#include "log.h"
#include "macros.h"

static void fall_back(struct iopath *p, const char *who, const char *what, int err)
{
	log_warn("%s: io = uring refused (%s: %s): using recvmmsg/sendmmsg", who, what,
		 strerror(-err));
	iopath_close(p);
	p->io = URING_IO_MMSG;
}

int iopath_open(struct iopath *p, int want, const struct uring_rx_config *rc, unsigned tx_slots,
		const char *who)
{
	int r;

	memset(p, 0, sizeof(*p));
	p->io = URING_IO_MMSG;
	if (want != URING_IO_URING)
		return 0;
	r = uring_rx_create(&p->rx, rc);
	if (r == -EINVAL || r == -ENOMEM)
		return r;
	if (r < 0) {
		fall_back(p, who, "receive ring", r);
		return 0;
	}
	if (tx_slots && (r = uring_tx_create(&p->tx, tx_slots)) < 0) {
		if (r == -EINVAL || r == -ENOMEM) {
			iopath_close(p);
			return r;
		}
		fall_back(p, who, "send ring", r);
		return 0;
	}
	p->io = URING_IO_URING;
	return 0;
}

int iopath_rx_add(struct iopath *p, int fd, unsigned tag, uint64_t *rxq, const char *who)
{
	int r;

	if (!p->rx)
		return 0;
	r = uring_rx_add(p->rx, fd, tag, rxq);
	if (r < 0)
		fall_back(p, who, "multishot receive", r);
	return 0;
}

void iopath_start(struct iopath *p, struct ev_loop *loop,
		  void (*cb)(struct ev_loop *, ev_io *, int), void *data)
{
	if (!p->rx)
		return;
	ev_io_init(&p->watcher, cb, uring_rx_fd(p->rx), EV_READ);
	p->watcher.data = data;
	ev_io_start(loop, &p->watcher);
}

void iopath_stop(struct iopath *p, struct ev_loop *loop)
{
	if (p->rx)
		ev_io_stop(loop, &p->watcher);
}

void iopath_close(struct iopath *p)
{
	uring_rx_destroy(p->rx);
	uring_tx_destroy(p->tx);
	p->rx = NULL;
	p->tx = NULL;
}

int iopath_send(struct iopath *p, struct net_batch *b, int fd, unsigned count, uint64_t wait_ns,
		uint64_t *waits)
{
	if (p->tx)
		return uring_tx_send(p->tx, b, fd, count, wait_ns, waits);
	return net_batch_send_wait(b, fd, count, wait_ns, waits);
}

const char *iopath_name(const struct iopath *p)
{
	return uring_io_names[p->io == URING_IO_URING ? URING_IO_URING : URING_IO_MMSG];
}

void iopath_counters(const struct iopath *p, struct counters *out)
{
	static const struct counter_def defs[] = {
		GAUGE(io_uring), COUNTER(uring_datagrams), COUNTER(uring_enobufs),
		COUNTER(uring_rearms), COUNTER(uring_truncated), COUNTER(uring_errors),
		COUNTER(uring_wakeups),
	};
	struct uring_rx_stats s = { 0 };

	if (p->rx)
		uring_rx_stats(p->rx, &s);
	const uint64_t v[] = { p->rx != NULL, s.datagrams, s.enobufs, s.rearms,
			       s.truncated, s.errors, s.wakeups };
	_Static_assert(ARRAY_SIZE(v) == ARRAY_SIZE(defs), "a name for every value");
	_Static_assert(ARRAY_SIZE(v) == IOPATH_N_COUNTERS, "IOPATH_N_COUNTERS");
	counters_add_table(out, defs, v, ARRAY_SIZE(defs));
}
