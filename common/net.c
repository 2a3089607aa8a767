/* Sockets for lockstep: address parsing, interfaces through libnl-route,
 * buffer sizing, UDP unicast and multicast, recvmmsg/sendmmsg batches and
 * TCP listeners. Library code: nothing here logs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/cache.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <linux/if.h>
#include <linux/sock_diag.h>

#include "clock.h"
#include "net.h"
#include "prealloc.h"

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif
#ifndef IFA_F_SECONDARY
#define IFA_F_SECONDARY 0x01
#endif
#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif

/* Room for one SO_RXQ_OVFL control message per batch slot. */
#define NET_CTRL_SPACE CMSG_SPACE(sizeof(uint32_t))

/* ---- addresses ------------------------------------------------------- */

/* A decimal port 0..65535, digits only. */
static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (*s == '\0')
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*port = (uint16_t)v;
	return 0;
}

/* A dotted quad, or a name resolved with getaddrinfo (AF_INET). */
static int parse_host(const char *host, struct in_addr *out)
{
	struct addrinfo hints, *res;
	int rc;

	if (*host == '\0')
		return -EINVAL;
	if (inet_pton(AF_INET, host, out) == 1)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc == EAI_AGAIN)
		return -EAGAIN;
	if (rc == EAI_MEMORY)
		return -ENOMEM;
	if (rc != 0 || !res)
		return -ENOENT;
	*out = ((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

int net_parse_addr(const char *text, struct sockaddr_in *out)
{
	char host[NI_MAXHOST];
	const char *colon;
	struct in_addr ip = { .s_addr = htonl(INADDR_ANY) };
	uint16_t port;
	int rc;

	if (!text || !out)
		return -EINVAL;
	colon = strrchr(text, ':');
	rc = parse_port(colon ? colon + 1 : text, &port);
	if (rc < 0)
		return rc;
	if (colon) {
		size_t len = (size_t)(colon - text);

		if (len == 0 || len >= sizeof(host))
			return -EINVAL;
		memcpy(host, text, len);
		host[len] = '\0';
		rc = parse_host(host, &ip);
		if (rc < 0)
			return rc;
	}
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_addr = ip;
	out->sin_port = htons(port);
	return 0;
}

void net_format_addr(const struct sockaddr_in *a, char *out, size_t cap)
{
	char ip[INET_ADDRSTRLEN];

	if (!out || cap == 0)
		return;
	if (!a || !inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	snprintf(out, cap, "%s:%u", ip, a ? (unsigned)ntohs(a->sin_port) : 0u);
}

/* ---- interfaces (libnl-route) ---------------------------------------- */

/* libnl's NLE_* codes as a negative errno. */
static int nl_to_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_NOACCESS:
		return -EACCES;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_INTR:
		return -EINTR;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/* The IPv4 address held by `ifindex` (primary preferred), or INADDR_ANY
 * when it holds none. */
static struct in_addr iface_first_addr(struct nl_cache *addrs, int ifindex)
{
	struct in_addr found = { .s_addr = htonl(INADDR_ANY) };
	int have = 0;

	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		struct nl_addr *local = rtnl_addr_get_local(a);

		if (rtnl_addr_get_family(a) != AF_INET || rtnl_addr_get_ifindex(a) != ifindex ||
		    !local || nl_addr_get_len(local) != sizeof(struct in_addr))
			continue;
		if (have && (rtnl_addr_get_flags(a) & IFA_F_SECONDARY))
			continue;
		memcpy(&found, nl_addr_get_binary_addr(local), sizeof(found));
		if (!(rtnl_addr_get_flags(a) & IFA_F_SECONDARY))
			break;
		have = 1;
	}
	return found;
}

/* The interface index holding IPv4 address `ip`, or 0. */
static int iface_index_of_addr(struct nl_cache *addrs, struct in_addr ip)
{
	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		struct nl_addr *local = rtnl_addr_get_local(a);

		if (rtnl_addr_get_family(a) == AF_INET && local &&
		    nl_addr_get_len(local) == sizeof(ip) &&
		    memcmp(nl_addr_get_binary_addr(local), &ip, sizeof(ip)) == 0)
			return rtnl_addr_get_ifindex(a);
	}
	return 0;
}

static void iface_fill(struct rtnl_link *link, struct nl_cache *addrs, struct net_iface *out)
{
	unsigned int flags = rtnl_link_get_flags(link);
	const char *name = rtnl_link_get_name(link);
	int carrier = (flags & IFF_LOWER_UP) || rtnl_link_get_carrier(link) == 1;

	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", name ? name : "");
	out->ifindex = rtnl_link_get_ifindex(link);
	out->addr = iface_first_addr(addrs, out->ifindex);
	out->up = (flags & IFF_UP) && carrier;
	out->multicast = (flags & IFF_MULTICAST) != 0;
}

static int iface_resolve(struct nl_cache *links, struct nl_cache *addrs, const char *what,
			 struct net_iface *out)
{
	struct rtnl_link *link;
	struct in_addr ip;
	int by_addr = inet_pton(AF_INET, what, &ip) == 1;

	if (by_addr) {
		int ifindex = iface_index_of_addr(addrs, ip);

		link = ifindex > 0 ? rtnl_link_get(links, ifindex) : NULL;
	} else {
		link = strlen(what) < IFNAMSIZ ? rtnl_link_get_by_name(links, what) : NULL;
	}
	if (!link)
		return -ENODEV;
	iface_fill(link, addrs, out);
	if (by_addr)
		out->addr = ip; /* the address the caller named, of the ones it holds */
	rtnl_link_put(link);
	return 0;
}

int net_udp_open_on(const char *iface, const struct net_udp_options *opt,
		    struct net_bufsize *rcv, struct net_bufsize *snd)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct net_iface ifc;
	int r = net_iface_lookup(iface, &ifc);

	if (r < 0)
		return r;
	a.sin_addr = ifc.addr;
	return net_udp_open(&a, opt, rcv, snd);
}

int net_iface_lookup(const char *name_or_addr, struct net_iface *out)
{
	struct nl_cache *links = NULL, *addrs = NULL;
	struct net_iface iface;
	struct nl_sock *sk;
	int rc;

	if (!name_or_addr || !*name_or_addr || !out)
		return -EINVAL;
	sk = nl_socket_alloc();
	if (!sk)
		return -ENOMEM;
	rc = nl_connect(sk, NETLINK_ROUTE);
	if (rc < 0)
		goto out_free_sock;
	rc = rtnl_link_alloc_cache(sk, AF_UNSPEC, &links);
	if (rc < 0)
		goto out_close_sock;
	rc = rtnl_addr_alloc_cache(sk, &addrs);
	if (rc < 0)
		goto out_free_links;
	rc = iface_resolve(links, addrs, name_or_addr, &iface);
	if (rc == 0)
		*out = iface;
	nl_cache_free(addrs);
	nl_cache_free(links);
	nl_close(sk);
	nl_socket_free(sk);
	return rc;

out_free_links:
	nl_cache_free(links);
out_close_sock:
	nl_close(sk);
out_free_sock:
	nl_socket_free(sk);
	return nl_to_errno(rc);
}

/* ---- buffers --------------------------------------------------------- */

static int set_buf(int fd, int force_opt, int opt, int bytes, struct net_bufsize *out)
{
	struct net_bufsize r = { .requested = bytes };
	socklen_t len = sizeof(r.granted);

	if (bytes <= 0)
		return -EINVAL;
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0)
		r.forced = 1;
	else if (setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes)) < 0)
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, opt, &r.granted, &len) < 0)
		return -errno;
	r.capped = (long long)r.granted < 2LL * bytes;
	if (out)
		*out = r;
	return 0;
}

int net_set_rcvbuf(int fd, int bytes, struct net_bufsize *out)
{
	return set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes, out);
}

int net_set_sndbuf(int fd, int bytes, struct net_bufsize *out)
{
	return set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes, out);
}

/* What the kernel gives a socket when nobody asks (requested 0). */
static int get_buf(int fd, int opt, struct net_bufsize *out)
{
	struct net_bufsize r = { 0 };
	socklen_t len = sizeof(r.granted);

	if (getsockopt(fd, SOL_SOCKET, opt, &r.granted, &len) < 0)
		return -errno;
	if (out)
		*out = r;
	return 0;
}

/* ---- UDP ------------------------------------------------------------- */

static int set_int(int fd, int level, int opt, int val)
{
	return setsockopt(fd, level, opt, &val, sizeof(val)) < 0 ? -errno : 0;
}

static int udp_apply(int fd, const struct net_udp_options *opt, struct net_bufsize *rcv,
		     struct net_bufsize *snd)
{
	int rc;

	rc = opt->rcvbuf > 0 ? net_set_rcvbuf(fd, opt->rcvbuf, rcv) : get_buf(fd, SO_RCVBUF, rcv);
	if (rc < 0)
		return rc;
	rc = opt->sndbuf > 0 ? net_set_sndbuf(fd, opt->sndbuf, snd) : get_buf(fd, SO_SNDBUF, snd);
	if (rc < 0)
		return rc;
	if (opt->reuseaddr && (rc = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1)) < 0)
		return rc;
	if (opt->rxq_ovfl && (rc = set_int(fd, SOL_SOCKET, SO_RXQ_OVFL, 1)) < 0)
		return rc;
	if (opt->busy_poll_us < 0)
		return -EINVAL;
	if (opt->busy_poll_us > 0 &&
	    (rc = set_int(fd, SOL_SOCKET, SO_BUSY_POLL, opt->busy_poll_us)) < 0)
		return rc;
	return 0;
}

/* A UDP socket with `opt` applied, not yet bound. */
static int udp_socket(const struct net_udp_options *opt, struct net_bufsize *rcv,
		      struct net_bufsize *snd)
{
	static const struct net_udp_options none;
	int type = SOCK_DGRAM | SOCK_CLOEXEC;
	int fd, rc;

	if (!opt)
		opt = &none;
	if (opt->nonblock)
		type |= SOCK_NONBLOCK;
	fd = socket(AF_INET, type, 0);
	if (fd < 0)
		return -errno;
	rc = udp_apply(fd, opt, rcv, snd);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int net_udp_open(const struct sockaddr_in *bind_addr, const struct net_udp_options *opt,
		 struct net_bufsize *rcv, struct net_bufsize *snd)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct net_bufsize r, s;
	int fd = udp_socket(opt, &r, &s);

	if (fd < 0)
		return fd;
	if (!bind_addr)
		bind_addr = &any;
	if (bind(fd, (const struct sockaddr *)bind_addr, sizeof(*bind_addr)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	if (rcv)
		*rcv = r;
	if (snd)
		*snd = s;
	return fd;
}

/* The IPv4 address to name `iface` by in socket options; INADDR_ANY when
 * iface is NULL (the kernel picks by route). */
static int iface_addr(const char *iface, struct net_iface *out)
{
	memset(out, 0, sizeof(*out));
	if (!iface)
		return 0;
	return net_iface_lookup(iface, out);
}

static int mcast_join(int fd, struct in_addr group, const struct net_iface *ifc)
{
	struct ip_mreqn m = { .imr_multiaddr = group, .imr_address = ifc->addr };

	/* An interface without an IPv4 address is named by its index. */
	if (ifc->addr.s_addr == htonl(INADDR_ANY))
		m.imr_ifindex = ifc->ifindex;
	if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)) < 0)
		return -errno;
	return 0;
}

int net_mcast_recv_open(const struct sockaddr_in *group, const char *iface,
			const struct net_udp_options *opt, struct net_bufsize *rcv)
{
	struct net_udp_options o = { 0 };
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct net_iface ifc;
	struct net_bufsize r;
	int fd, rc;

	if (!group || !IN_MULTICAST(ntohl(group->sin_addr.s_addr)))
		return -EINVAL;
	rc = iface_addr(iface, &ifc);
	if (rc < 0)
		return rc;
	if (opt)
		o = *opt;
	o.reuseaddr = 1;
	fd = udp_socket(&o, &r, NULL);
	if (fd < 0)
		return fd;
	/* Only the groups this socket joined, not every group of this port
	 * that another socket of the host joined. */
	(void)set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);
	/* bound to the group's address, not 0.0.0.0: a unicast datagram to
	 * the port (from anyone who can reach the host) does not get in */
	local.sin_addr = group->sin_addr;
	local.sin_port = group->sin_port;
	if (bind(fd, (const struct sockaddr *)&local, sizeof(local)) < 0) {
		rc = -errno;
		goto out_close_fd;
	}
	rc = mcast_join(fd, group->sin_addr, &ifc);
	if (rc < 0)
		goto out_close_fd;
	if (rcv)
		*rcv = r;
	return fd;

out_close_fd:
	close(fd);
	return rc;
}

int net_mcast_send_setup(int fd, const char *iface, int ttl)
{
	struct net_iface ifc;
	struct ip_mreqn m = { 0 };
	int rc;

	if (ttl < 0 || ttl > 255)
		return -EINVAL;
	rc = iface_addr(iface, &ifc);
	if (rc < 0)
		return rc;
	m.imr_address = ifc.addr;
	if (ifc.addr.s_addr == htonl(INADDR_ANY))
		m.imr_ifindex = ifc.ifindex;
	if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof(m)) < 0)
		return -errno;
	rc = set_int(fd, IPPROTO_IP, IP_MULTICAST_TTL, ttl);
	if (rc < 0)
		return rc;
	return set_int(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1);
}

int net_local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -errno;
	if (a.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	return ntohs(a.sin_port);
}

/* ---- TCP ------------------------------------------------------------- */

int net_tcp_listen(const struct sockaddr_in *bind_addr, int backlog)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	int fd, rc;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (!bind_addr)
		bind_addr = &any;
	rc = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (rc < 0)
		goto out_close_fd;
	(void)set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	if (bind(fd, (const struct sockaddr *)bind_addr, sizeof(*bind_addr)) < 0 ||
	    listen(fd, backlog > 0 ? backlog : SOMAXCONN) < 0) {
		rc = -errno;
		goto out_close_fd;
	}
	return fd;

out_close_fd:
	close(fd);
	return rc;
}

int net_tcp_tune(int fd)
{
	int flags, rc;

	rc = set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	if (rc < 0)
		return rc;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -errno;
	if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* ---- batches ---------------------------------------------------------- */

int net_batch_init(struct net_batch *b, unsigned n, size_t size)
{
	struct net_batch nb = { .n = n, .size = size };

	if (!b || n == 0 || size == 0 || size > SIZE_MAX / n || n > INT_MAX)
		return -EINVAL;
	nb.data = prealloc_zeroed(n, size);
	nb.msgs = calloc(n, sizeof(*nb.msgs));
	nb.iov = calloc(n, sizeof(*nb.iov));
	nb.addrs = calloc(n, sizeof(*nb.addrs));
	nb.lens = calloc(n, sizeof(*nb.lens));
	nb.ctrl = calloc(n, NET_CTRL_SPACE);
	if (!nb.data || !nb.msgs || !nb.iov || !nb.addrs || !nb.lens || !nb.ctrl) {
		net_batch_fini(&nb);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		nb.iov[i].iov_base = net_batch_slot(&nb, i);
		nb.msgs[i].msg_hdr.msg_iov = &nb.iov[i];
		nb.msgs[i].msg_hdr.msg_iovlen = 1;
	}
	*b = nb;
	return 0;
}

void net_batch_fini(struct net_batch *b)
{
	if (!b)
		return;
	free(b->data);
	free(b->msgs);
	free(b->iov);
	free(b->addrs);
	free(b->lens);
	free(b->ctrl);
	memset(b, 0, sizeof(*b));
}

/* Takes the SO_RXQ_OVFL counter out of a received message, if present. */
static void batch_read_ctrl(struct net_batch *b, struct msghdr *h)
{
	if (h->msg_controllen == 0)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
		    c->cmsg_len >= CMSG_LEN(sizeof(uint32_t)))
			memcpy(&b->rxq_dropped, CMSG_DATA(c), sizeof(uint32_t));
	}
}

int net_batch_recv(struct net_batch *b, int fd)
{
	int got;

	for (unsigned i = 0; i < b->n; i++) {
		struct msghdr *h = &b->msgs[i].msg_hdr;

		b->iov[i].iov_len = b->size;
		h->msg_name = &b->addrs[i];
		h->msg_namelen = sizeof(b->addrs[i]);
		h->msg_control = b->ctrl + (size_t)i * NET_CTRL_SPACE;
		h->msg_controllen = NET_CTRL_SPACE;
		h->msg_flags = 0;
	}
	got = recvmmsg(fd, b->msgs, b->n, MSG_DONTWAIT, NULL);
	if (got < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
	for (int i = 0; i < got; i++) {
		b->lens[i] = b->msgs[i].msg_len;
		batch_read_ctrl(b, &b->msgs[i].msg_hdr);
	}
	return got;
}

int net_batch_recv_counted(struct net_batch *b, int fd, uint64_t *rxq)
{
	int n;

	b->rxq_dropped = 0;
	n = net_batch_recv(b, fd);
	if (b->rxq_dropped > *rxq)
		*rxq = b->rxq_dropped;
	return n;
}

void net_batch_send_prepare(struct net_batch *b, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		struct msghdr *h = &b->msgs[i].msg_hdr;
		int has_dst = b->addrs[i].sin_family != 0;

		b->iov[i].iov_len = b->lens[i] <= b->size ? b->lens[i] : b->size;
		h->msg_name = has_dst ? &b->addrs[i] : NULL;
		h->msg_namelen = has_dst ? sizeof(b->addrs[i]) : 0;
		h->msg_control = NULL;
		h->msg_controllen = 0;
		h->msg_flags = 0;
	}
}

/* sendmmsg of slots [from, count) until the kernel stops taking them: the
 * slots sent from `from`; *err is the error that stopped it (0: none). */
static unsigned batch_send_from(struct net_batch *b, int fd, unsigned from, unsigned count,
				int *err)
{
	unsigned sent = from;

	*err = 0;
	while (sent < count) {
		int r = sendmmsg(fd, b->msgs + sent, count - sent, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			*err = errno;
			break;
		}
		if (r == 0)
			break;
		sent += (unsigned)r;
	}
	return sent - from;
}

int net_batch_send(struct net_batch *b, int fd, unsigned count)
{
	unsigned sent;
	int err;

	if (count > b->n)
		return -EINVAL;
	net_batch_send_prepare(b, count);
	sent = batch_send_from(b, fd, 0, count, &err);
	if (sent == 0 && err && err != EAGAIN && err != EWOULDBLOCK)
		return -err;
	return (int)sent;
}

int net_send_room_wait(int fd, int err, uint64_t deadline)
{
	uint64_t now = mono_ns();
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	if (now >= deadline)
		return -1;
	if (err == ENOBUFS) {
		struct timespec pause = { 0, 50000 };

		nanosleep(&pause, NULL);
		return 0;
	}
	/* poll's resolution is a millisecond: round up */
	(void)poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
	return 0;
}

int net_batch_send_wait(struct net_batch *b, int fd, unsigned count, uint64_t wait_ns,
			uint64_t *waits)
{
	uint64_t deadline = 0;
	unsigned sent = 0;
	int err = 0;

	if (count > b->n)
		return -EINVAL;
	net_batch_send_prepare(b, count);
	for (;;) {
		sent += batch_send_from(b, fd, sent, count, &err);
		if (sent == count || (err != EAGAIN && err != EWOULDBLOCK && err != ENOBUFS))
			break;
		if (!deadline) {
			deadline = mono_ns() + wait_ns;
			if (waits)
				(*waits)++; /* sends that waited, not rounds */
		}
		if (net_send_room_wait(fd, err, deadline) < 0)
			break;
	}
	if (sent == 0 && err && err != EAGAIN && err != EWOULDBLOCK && err != ENOBUFS)
		return -err;
	return (int)sent;
}

/* ---- kernel counters -------------------------------------------------- */

/* Matches the columns of a "Udp:" header line to its values line. */
static void udp_stats_match(char *names, char *values, struct net_udp_stats *s)
{
	char *sn, *sv;
	char *n = strtok_r(names, " \t\n", &sn);
	char *v = strtok_r(values, " \t\n", &sv);

	/* Skip the "Udp:" labels. */
	n = strtok_r(NULL, " \t\n", &sn);
	v = strtok_r(NULL, " \t\n", &sv);
	for (; n && v; n = strtok_r(NULL, " \t\n", &sn), v = strtok_r(NULL, " \t\n", &sv)) {
		uint64_t x = strtoull(v, NULL, 10);

		if (strcmp(n, "InDatagrams") == 0)
			s->in_datagrams = x;
		else if (strcmp(n, "InErrors") == 0)
			s->in_errors = x;
		else if (strcmp(n, "RcvbufErrors") == 0)
			s->rcvbuf_errors = x;
		else if (strcmp(n, "SndbufErrors") == 0)
			s->sndbuf_errors = x;
	}
}

int64_t net_rmem_alloc(int fd)
{
	uint32_t mi[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mi);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) < 0)
		return -errno;
	if (len <= SK_MEMINFO_RMEM_ALLOC * sizeof(mi[0]))
		return -EPROTO;
	return mi[SK_MEMINFO_RMEM_ALLOC];
}

int net_udp_stats_read(struct net_udp_stats *out)
{
	char names[1024], values[1024];
	struct net_udp_stats s = { 0 };
	int found = 0;
	FILE *f;

	if (!out)
		return -EINVAL;
	f = fopen("/proc/net/snmp", "re");
	if (!f)
		return -errno;
	while (fgets(names, sizeof(names), f)) {
		if (strncmp(names, "Udp: ", 5) != 0)
			continue;
		if (!fgets(values, sizeof(values), f) || strncmp(values, "Udp: ", 5) != 0)
			break;
		udp_stats_match(names, values, &s);
		found = 1;
		break;
	}
	fclose(f);
	if (!found)
		return -ENODATA;
	*out = s;
	return 0;
}
