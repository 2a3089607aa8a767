/* io_uring datagram I/O beside recvmmsg/sendmmsg ([node] io = uring).
 *
 * Receive (struct uring_rx): one ring per daemon holds a multishot recvmsg
 * on each hot receive socket, all drawing from one ring of provided
 * buffers. The kernel posts a completion per datagram into a buffer of
 * that ring and signals an eventfd, which the daemon watches with an ev_io
 * on its own libev loop: libev stays the loop. uring_rx_reap() takes up to
 * `max` completions into a view (no copy: each datagram is read where the
 * kernel wrote it), the daemon hands every datagram to the same handler its
 * recvmmsg path calls, and uring_rx_release() gives the buffers back (one
 * store) and re-arms every receive the kernel ended (buffers exhausted:
 * ENOBUFS, counted; or any other end). The datagrams left in the socket
 * meanwhile wait in its receive buffer, as with recvmmsg. SO_RXQ_OVFL is
 * read from each datagram's control message, per socket.
 *
 * Send (struct uring_tx): a ring of its own (its completions never mix with
 * the receive ring's), used synchronously: uring_tx_send() queues a
 * sendmsg per datagram of a struct net_batch, linked in order, and submits
 * them with one io_uring_enter; a full socket buffer ends the chain there,
 * and the rest is waited out as net_batch_send_wait() does (poll POLLOUT,
 * at most wait_ns in all), never dropped early and never reordered.
 *
 * Contract: memory is allocated only at create; nothing here logs; no
 * system call per datagram (the receive path makes none at all while the
 * kernel has buffers; a re-arm is one io_uring_enter for every socket that
 * needs one). Errors are negative errnos. Not thread-safe: one loop. */
#ifndef LOCKSTEP_URING_H
#define LOCKSTEP_URING_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"

/* [node] io: the datagram path of a daemon. */
enum uring_io {
	URING_IO_MMSG, /* recvmmsg / sendmmsg */
	URING_IO_URING, /* io_uring: multishot recvmsg, batched sendmsg */
};
extern const char *const uring_io_names[]; /* "mmsg", "uring", NULL */

#define URING_MAX_SOCKETS 8

struct uring_rx_config {
	unsigned bufs; /* provided buffers, a power of two, 2..32768 */
	size_t payload; /* the largest datagram taken whole (longer: truncated) */
	unsigned max_reap; /* completions per uring_rx_reap() at most */
};

/* One datagram of a reap. data points into a provided buffer, valid until
 * uring_rx_release(). */
struct uring_msg {
	const uint8_t *data;
	size_t len;
	unsigned tag; /* the socket's tag (uring_rx_add) */
	const struct sockaddr_in *from;
};

struct uring_rx_stats {
	uint64_t datagrams; /* completions with a datagram */
	uint64_t enobufs; /* receives ended because every buffer was in use */
	uint64_t rearms; /* receives submitted again (after ENOBUFS or another end) */
	uint64_t truncated; /* datagrams longer than payload (cut) */
	uint64_t errors; /* completions with another error */
	uint64_t wakeups; /* eventfd reads that found the kernel's signal */
};

struct uring_rx;

/* 0, or a negative errno: -ENOSYS (no io_uring in this kernel), -EPERM
 * (kernel.io_uring_disabled, seccomp), -EINVAL (a kernel without multishot
 * recvmsg or provided-buffer rings), -ENOMEM. */
int uring_rx_create(struct uring_rx **out, const struct uring_rx_config *cfg);
void uring_rx_destroy(struct uring_rx *u); /* accepts NULL; closes no socket */
/* The eventfd to watch for reading (EV_READ); uring_rx_reap() clears it. */
int uring_rx_fd(const struct uring_rx *u);
/* A multishot recvmsg on fd (a UDP socket; not closed here), its datagrams
 * tagged `tag`; *rxq (may be NULL) is raised to the socket's SO_RXQ_OVFL
 * count as it is seen, as net_batch_recv_counted() does. Submitted at once.
 * 0, -E2BIG beyond URING_MAX_SOCKETS, or a negative errno. */
int uring_rx_add(struct uring_rx *u, int fd, unsigned tag, uint64_t *rxq);
/* Up to `max` (at most cfg.max_reap) datagrams into *msgs, oldest first:
 * how many (0: none waiting). The first reap after uring_rx_done() clears
 * the eventfd (one read). Buffers stay the caller's until
 * uring_rx_release(). */
int uring_rx_reap(struct uring_rx *u, unsigned max, const struct uring_msg **msgs);
/* Gives back the buffers of every reap since the last release and re-arms
 * the receives that ended. 0, or a negative errno from the submit (the
 * re-arm is tried again at the next release). */
int uring_rx_release(struct uring_rx *u);
/* The end of a wakeup's reaps, before returning to the loop, whatever the
 * reaps returned (one that returned 0 may have seen a receive end): does
 * what uring_rx_release() does (a reap can find only the end of a receive,
 * and no datagram to release), then, when completions are left (the caller
 * stopped at its limit, as recvmmsg callers stop at NET_DRAIN_ROUNDS),
 * makes the eventfd readable again, so that the loop comes back to them
 * after its other watchers. Returns what the release returned. */
int uring_rx_done(struct uring_rx *u);
/* 1 when completions are waiting. */
int uring_rx_pending(const struct uring_rx *u);
void uring_rx_stats(const struct uring_rx *u, struct uring_rx_stats *out);

struct uring_tx;

/* A send ring that submits up to `slots` datagrams a system call (a larger
 * batch goes in several chains, in order). Errors as uring_rx_create. */
int uring_tx_create(struct uring_tx **out, unsigned slots);
void uring_tx_destroy(struct uring_tx *t); /* accepts NULL */
/* net_batch_send_wait() through the ring: slots [0, count) of b on fd, in
 * order, waiting out a full socket buffer (EAGAIN) or device queue
 * (ENOBUFS) for at most wait_ns in all; *waits (may be NULL) counts the
 * sends that waited. How many went, or a negative errno when none did and
 * the error was not one of those. count <= b->n. */
int uring_tx_send(struct uring_tx *t, struct net_batch *b, int fd, unsigned count,
		  uint64_t wait_ns, uint64_t *waits);

#endif
