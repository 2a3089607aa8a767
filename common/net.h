/* Sockets: UDP unicast and multicast set-up, interfaces resolved through
 * libnl-route, buffer sizing that reports what the kernel granted, and
 * recvmmsg/sendmmsg batches; TCP listeners for libev. Nothing here logs:
 * results and warnings come back to the caller. */
#ifndef LOCKSTEP_NET_H
#define LOCKSTEP_NET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* "host:port" or "port" (host 0.0.0.0); host is a dotted quad or a name. */
int net_parse_addr(const char *text, struct sockaddr_in *out);

/* 1 when a and b are the same IPv4 address and port. */
static inline int net_addr_same(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* "a.b.c.d:port" into out (at least 22 bytes). */
void net_format_addr(const struct sockaddr_in *a, char *out, size_t cap);

/* An interface as the kernel knows it (libnl-route). */
struct net_iface {
	char name[16];
	int ifindex;
	struct in_addr addr; /* its first IPv4 address */
	int up; /* IFF_UP and carrier */
	int multicast; /* IFF_MULTICAST */
};

/* Resolves an interface given by name ("lo", "eth0") or by one of its IPv4
 * addresses ("127.0.0.1"). -ENODEV when no such interface exists. */
int net_iface_lookup(const char *name_or_addr, struct net_iface *out);

/* What a buffer request got. */
struct net_bufsize {
	int requested, granted; /* bytes, as getsockopt reports them (doubled by Linux) */
	int capped; /* the kernel gave less than asked: raise net.core.[rw]mem_max */
	int forced; /* SO_RCVBUFFORCE / SO_SNDBUFFORCE worked (CAP_NET_ADMIN) */
};

/* Tries SO_RCVBUFFORCE, then SO_RCVBUF (capped by net.core.rmem_max). */
int net_set_rcvbuf(int fd, int bytes, struct net_bufsize *out);
int net_set_sndbuf(int fd, int bytes, struct net_bufsize *out);

struct net_udp_options {
	int rcvbuf, sndbuf; /* 0: leave the kernel's default */
	int reuseaddr; /* SO_REUSEADDR (several receivers of one group on a host) */
	int nonblock;
	int rxq_ovfl; /* SO_RXQ_OVFL: count drops in a control message */
	int busy_poll_us; /* SO_BUSY_POLL, 0: off */
};

/* A UDP socket bound to `bind` (port 0: any), for unicast. */
int net_udp_open(const struct sockaddr_in *bind, const struct net_udp_options *opt,
		 struct net_bufsize *rcv, struct net_bufsize *snd);
/* net_udp_open() bound to iface's address (a name or one of its
 * addresses), any port: a receiver's request socket, on the cluster's side
 * only, so that answers reach it there and nowhere else. -ENODEV when no
 * such interface exists. */
int net_udp_open_on(const char *iface, const struct net_udp_options *opt,
		    struct net_bufsize *rcv, struct net_bufsize *snd);
/* A UDP socket that receives `group` on `iface` (name or address): binds the
 * group's address and port with SO_REUSEADDR (so unicast to the port does
 * not reach it), joins the group on the interface's address
 * (IP_ADD_MEMBERSHIP with imr_interface = that address, which is what makes
 * multicast work on loopback). It cannot send: a datagram's source would be
 * the group's address. */
int net_mcast_recv_open(const struct sockaddr_in *group, const char *iface,
			const struct net_udp_options *opt, struct net_bufsize *rcv);
/* Makes a UDP socket send multicast out of `iface` (IP_MULTICAST_IF with
 * its address), with the given TTL and loopback on. */
int net_mcast_send_setup(int fd, const char *iface, int ttl);

/* The bound port of a socket (after binding port 0), or a negative errno. */
int net_local_port(int fd);

/* A non-blocking TCP listener with SO_REUSEADDR (and TCP_NODELAY inherited
 * by accepted sockets where the kernel does so). */
int net_tcp_listen(const struct sockaddr_in *bind, int backlog);
/* TCP_NODELAY and non-blocking on an accepted or connected socket. */
int net_tcp_tune(int fd);

/* A batch of datagrams for recvmmsg/sendmmsg: `n` slots of `size` bytes,
 * allocated once. Receive: net_batch_recv fills up to n slots and returns how
 * many; each slot's len and source address are set. Send: fill slots (data,
 * len, dst) then net_batch_send sends the first `count` in one sendmmsg,
 * retrying the remainder on a partial send; returns how many were sent. */
struct net_batch {
	unsigned n;
	size_t size;
	uint8_t *data; /* n * size bytes */
	struct mmsghdr *msgs;
	struct iovec *iov;
	struct sockaddr_in *addrs;
	size_t *lens; /* received/to-send length per slot */
	uint8_t *ctrl; /* control buffers for SO_RXQ_OVFL */
	uint32_t rxq_dropped; /* last SO_RXQ_OVFL value seen (kernel counter) */
};

int net_batch_init(struct net_batch *b, unsigned n, size_t size);
void net_batch_fini(struct net_batch *b);
static inline uint8_t *net_batch_slot(struct net_batch *b, unsigned i)
{
	return b->data + (size_t)i * b->size;
}
/* Returns slots received (0 when EAGAIN) or a negative errno. */
int net_batch_recv(struct net_batch *b, int fd);
/* net_batch_recv, keeping the socket's own SO_RXQ_OVFL count in *rxq
 * (several sockets share one batch; the kernel's counter is per socket). */
int net_batch_recv_counted(struct net_batch *b, int fd, uint64_t *rxq);

/* recvmmsg calls per wakeup on one socket, so that one busy stream cannot
 * starve the others on the loop (the same number as the default of the
 * sequencer's [sequencer] drain key). */
#define NET_DRAIN_ROUNDS 16
/* Sends slots [0, count) in one sendmmsg (more when the kernel takes part):
 * how many went (fewer when the socket buffer is full: EAGAIN), or a negative
 * errno when the first could not. */
int net_batch_send(struct net_batch *b, int fd, unsigned count);
/* net_batch_send that does not give up on a full socket buffer (EAGAIN) or
 * device queue (ENOBUFS): it waits for room (poll POLLOUT; for ENOBUFS, a
 * 50 us pause) and sends the rest, for at most wait_ns in all, so that a
 * burst is slowed down, not dropped. The wait is the slow path only (no
 * clock is read while the kernel takes everything). *waits (may be NULL)
 * counts the waits. Returns how many went, or a negative errno when none
 * did and the error was not one of those. */
int net_batch_send_wait(struct net_batch *b, int fd, unsigned count, uint64_t wait_ns,
			uint64_t *waits);
/* The two halves of net_batch_send_wait() for another sender (uring.h):
 * fills the message headers of slots [0, count) from lens and addrs; and
 * waits until fd can take a datagram (err EAGAIN) or a moment (ENOBUFS), at
 * most until `deadline` (mono_ns): 0, or -1 when the time is up. */
void net_batch_send_prepare(struct net_batch *b, unsigned count);
int net_send_room_wait(int fd, int err, uint64_t deadline);
/* How long the daemons' streams (tape, exec, commands) wait for room. */
#define NET_SEND_WAIT_NS (10 * 1000000ull)

/* Bytes the socket's receive queue holds as the kernel accounts them
 * (SO_MEMINFO's rmem_alloc: each datagram's skb truesize), or a negative
 * errno. One getsockopt: for sampling, not for every datagram. */
int64_t net_rmem_alloc(int fd);
/* The kernel's UDP counters (/proc/net/snmp): RcvbufErrors, InErrors. */
struct net_udp_stats {
	uint64_t in_datagrams, in_errors, rcvbuf_errors, sndbuf_errors;
};
int net_udp_stats_read(struct net_udp_stats *out);

#endif
