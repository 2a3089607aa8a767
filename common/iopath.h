/* A daemon's datagram path, [node] io = mmsg | uring, on its event loop:
 * the io_uring rings of common/uring.h when asked for and the kernel
 * allows them, else recvmmsg/sendmmsg; what STATUS and STATS say of it.
 * Daemon-side: it logs (once, at start, when it falls back); nothing here
 * allocates after iopath_open(). */
#ifndef LOCKSTEP_IOPATH_H
#define LOCKSTEP_IOPATH_H

#include <ev.h>
#include <stdint.h>

#include "counters.h"
#include "net.h"
#include "uring.h"

struct iopath {
	int io; /* enum uring_io: the path in use */
	struct uring_rx *rx; /* NULL under mmsg */
	struct uring_tx *tx; /* NULL under mmsg, or where sends stay on sendmmsg */
	ev_io watcher; /* the receive ring's eventfd */
};

/* Sets p up for `want` (enum uring_io): with URING_IO_URING, a receive
 * ring (rc) and, when tx_slots > 0, a send ring of that many slots. When
 * the kernel refuses io_uring (no support, kernel.io_uring_disabled,
 * seccomp) it warns, naming `who`, and p falls back to mmsg: 0 all the
 * same. A negative errno only for a bad argument or no memory. */
int iopath_open(struct iopath *p, int want, const struct uring_rx_config *rc, unsigned tx_slots,
		const char *who);
/* Puts socket fd (tag, SO_RXQ_OVFL into *rxq) on the receive ring; under
 * mmsg, nothing. A socket the ring cannot take sends the whole path back
 * to mmsg (with a warning) before any watcher started: 0. */
int iopath_rx_add(struct iopath *p, int fd, unsigned tag, uint64_t *rxq, const char *who);
/* 1 when datagrams come through the receive ring (watch it with
 * iopath_start), 0 when the caller's own ev_io watchers read its sockets. */
static inline int iopath_uring(const struct iopath *p)
{
	return p->rx != NULL;
}
void iopath_start(struct iopath *p, struct ev_loop *loop,
		  void (*cb)(struct ev_loop *, ev_io *, int), void *data);
void iopath_stop(struct iopath *p, struct ev_loop *loop);
void iopath_close(struct iopath *p); /* accepts a zeroed or closed p */
/* net_batch_send_wait() through the send ring when there is one. */
int iopath_send(struct iopath *p, struct net_batch *b, int fd, unsigned count, uint64_t wait_ns,
		uint64_t *waits);
/* "mmsg" or "uring" (STATUS). */
const char *iopath_name(const struct iopath *p);
/* STATS: io_uring (gauge, 1 when in use) and the receive ring's counters,
 * IOPATH_N_COUNTERS values. */
#define IOPATH_N_COUNTERS 7
void iopath_counters(const struct iopath *p, struct counters *out);

#endif
