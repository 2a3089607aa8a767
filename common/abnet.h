/* A/B: a multicast stream (the tape, an execution stream) sent on two
 * networks, the same datagrams to group A through the stream's own socket
 * and to group B through a second socket that leaves by network B's
 * interface; receivers join both and take the first copy of each sequence
 * number (common/rx.h drops the second as a duplicate), so that a datagram
 * lost on one network is repaired by the other with no request. This file
 * is the sender's second network and the receivers' count of which network
 * delivered first. Nothing here logs or allocates; sends are the caller's
 * batches, one sendmmsg (or io_uring chain) per batch and network. */
#ifndef LOCKSTEP_ABNET_H
#define LOCKSTEP_ABNET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "iopath.h"
#include "net.h"
#include "rx.h"

/* The sender's network B. fd < 0: the stream goes on network A only. */
struct ab_send {
	int fd;
	struct sockaddr_in group;
	uint64_t packets; /* datagrams sent on B */
	uint64_t send_errors; /* datagrams B's socket refused (dropped: B is the spare copy) */
	uint64_t send_waits; /* sends that waited for room in B's socket */
};

/* Opens network B of a stream: group "" leaves it off (fd -1, 0). iface
 * is B's interface (name or address), ttl the multicast TTL, sndbuf the
 * send buffer (0: the kernel's). 0, or a negative errno with `why` saying
 * which step failed (a static string). */
int ab_send_open(struct ab_send *b, const char *group, const char *iface, int ttl, int sndbuf,
		 const char **why);
void ab_send_close(struct ab_send *b); /* accepts one never opened (fd -1) */
static inline int ab_send_on(const struct ab_send *b)
{
	return b->fd >= 0;
}
/* Sends datagrams [0, count) of batch `bt`, already sent on A, to group B
 * (each datagram's address is rewritten), through io's send path. */
void ab_send_batch(struct ab_send *b, struct iopath *io, struct net_batch *bt, unsigned count,
		   uint64_t wait_ns);
/* One datagram (a heartbeat, an end of session) to group B. */
void ab_send_one(struct ab_send *b, const void *pkt, size_t len);

/* A receiver's side: which network's copy of a datagram brought new
 * blocks (the first copy), A (0) or B (1). */
enum ab_side { AB_A = 0, AB_B = 1 };
struct ab_first {
	uint64_t first[2]; /* datagrams that brought at least one new block, per network */
};
/* Call before feeding a datagram of `side` to rx, then ab_first_after. */
static inline uint64_t ab_first_before(const struct rx *rx)
{
	return rx_fresh(rx);
}
static inline void ab_first_after(struct ab_first *f, const struct rx *rx, enum ab_side side,
				  uint64_t before)
{
	f->first[side] += rx_fresh(rx) != before;
}

#endif
