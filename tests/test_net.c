/* Sockets: address parsing, interfaces, buffer sizing, recvmmsg/sendmmsg
 * batches over loopback unicast and multicast, TCP. Only 127.0.0.0/8 and
 * groups joined on 127.0.0.1 are used. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "testutil.h"

#define LOOPBACK "127.0.0.1"

static struct sockaddr_in addr_of(const char *text)
{
	struct sockaddr_in a;

	ck_assert_int_eq(net_parse_addr(text, &a), 0);
	return a;
}

/* The address a socket is bound to. */
static struct sockaddr_in bound_addr(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return a;
}

/* Datagram i: its index, then a pattern; 8 + 3i bytes. */
static size_t fill_datagram(uint8_t *p, unsigned i)
{
	size_t len = 8 + 3 * (size_t)i;

	memcpy(p, &i, sizeof(i));
	for (size_t j = sizeof(i); j < len; j++)
		p[j] = (uint8_t)(i * 7 + j);
	return len;
}

static void check_datagram(const uint8_t *p, size_t len, unsigned want)
{
	unsigned i;

	ck_assert_uint_eq(len, 8 + 3 * (size_t)want);
	memcpy(&i, p, sizeof(i));
	ck_assert_uint_eq(i, want);
	for (size_t j = sizeof(i); j < len; j++)
		ck_assert_uint_eq(p[j], (uint8_t)(i * 7 + j));
}

/* Sends datagrams 0..count-1 from `fd` to `dst` (NULL: connected). */
static void send_datagrams(int fd, const struct sockaddr_in *dst, unsigned count)
{
	struct net_batch b;

	ck_assert_int_eq(net_batch_init(&b, count, 512), 0);
	for (unsigned i = 0; i < count; i++) {
		b.lens[i] = fill_datagram(net_batch_slot(&b, i), i);
		if (dst)
			b.addrs[i] = *dst;
		else
			memset(&b.addrs[i], 0, sizeof(b.addrs[i]));
	}
	ck_assert_int_eq(net_batch_send(&b, fd, count), (int)count);
	net_batch_fini(&b);
}

/* Receives datagrams 0..count-1 in order on `fd`, each from `src`. */
static void recv_datagrams(int fd, const struct sockaddr_in *src, unsigned count)
{
	struct net_batch b;
	unsigned next = 0;
	uint64_t deadline = mono_ns() + 2000000000ull;

	ck_assert_int_eq(net_batch_init(&b, 16, 512), 0);
	while (next < count) {
		int n;

		ck_assert_msg(mono_ns() < deadline, "got %u of %u datagrams", next, count);
		ck_assert_int_eq(testutil_wait_readable(fd, 1000), 1);
		n = net_batch_recv(&b, fd);
		ck_assert_int_ge(n, 1);
		for (int i = 0; i < n; i++, next++) {
			check_datagram(net_batch_slot(&b, (unsigned)i), b.lens[i], next);
			ck_assert_int_eq(b.addrs[i].sin_family, AF_INET);
			ck_assert_uint_eq(b.addrs[i].sin_addr.s_addr, src->sin_addr.s_addr);
			ck_assert_uint_eq(b.addrs[i].sin_port, src->sin_port);
		}
	}
	ck_assert_uint_eq(next, count);
	ck_assert_int_eq(net_batch_recv(&b, fd), 0); /* nothing more: EAGAIN */
	net_batch_fini(&b);
}

/* ---- addresses ------------------------------------------------------- */

START_TEST(parse_good)
{
	static const struct {
		const char *text, *ip;
		unsigned port;
	} t[] = {
		{ "127.0.0.1:5000", "127.0.0.1", 5000 },
		{ "5000", "0.0.0.0", 5000 },
		{ "0", "0.0.0.0", 0 },
		{ "65535", "0.0.0.0", 65535 },
		{ "239.255.1.2:30001", "239.255.1.2", 30001 },
		{ "0.0.0.0:0", "0.0.0.0", 0 },
		{ "10.1.2.3:00080", "10.1.2.3", 80 },
		{ "localhost:80", "127.0.0.1", 80 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct sockaddr_in a;
		char ip[INET_ADDRSTRLEN];

		ck_assert_msg(net_parse_addr(t[i].text, &a) == 0, "%s", t[i].text);
		ck_assert_int_eq(a.sin_family, AF_INET);
		ck_assert_uint_eq(ntohs(a.sin_port), t[i].port);
		ck_assert_ptr_nonnull(inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip)));
		ck_assert_str_eq(ip, t[i].ip);
	}
}
END_TEST

START_TEST(parse_bad)
{
	static const char *const bad[] = {
		"1.2.3.4:99999", "x", ":", "", "1.2.3.4:", ":80", "1.2.3.4:-1", "1.2.3.4:+5",
		"1.2.3.4:12a", "1.2.3.4: 80", "65536", "-1", "1.2.3.4:65536", "80 ",
		"1.2.3.4:0x10", "1.2.3.4:99999999999999999999",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sockaddr_in a;

		memset(&a, 0xa5, sizeof(a));
		ck_assert_msg(net_parse_addr(bad[i], &a) < 0, "accepted \"%s\"", bad[i]);
		for (size_t j = 0; j < sizeof(a); j++) /* untouched on failure */
			ck_assert_uint_eq(((uint8_t *)&a)[j], 0xa5);
	}
	ck_assert_int_eq(net_parse_addr(NULL, &(struct sockaddr_in){ 0 }), -EINVAL);
}
END_TEST

START_TEST(format)
{
	struct sockaddr_in a = addr_of("192.168.100.200:65535");
	char buf[32], small[8];

	net_format_addr(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "192.168.100.200:65535");
	ck_assert_uint_eq(strlen(buf), 21); /* the longest: fits 22 bytes */
	a = addr_of("7");
	net_format_addr(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0.0.0.0:7");
	/* Truncated, still terminated. */
	net_format_addr(&a, small, sizeof(small));
	ck_assert_str_eq(small, "0.0.0.0");
	/* Round trip. */
	a = addr_of("127.0.0.1:4242");
	net_format_addr(&a, buf, sizeof(buf));
	struct sockaddr_in b = addr_of(buf);
	ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
}
END_TEST

/* ---- interfaces ------------------------------------------------------- */

START_TEST(iface_lo)
{
	struct net_iface by_name, by_addr;

	ck_assert_int_eq(net_iface_lookup("lo", &by_name), 0);
	ck_assert_str_eq(by_name.name, "lo");
	ck_assert_int_gt(by_name.ifindex, 0);
	ck_assert_uint_eq(by_name.addr.s_addr, htonl(INADDR_LOOPBACK));
	ck_assert_int_eq(by_name.up, 1);

	ck_assert_int_eq(net_iface_lookup(LOOPBACK, &by_addr), 0);
	ck_assert_str_eq(by_addr.name, "lo");
	ck_assert_int_eq(by_addr.ifindex, by_name.ifindex);
	ck_assert_uint_eq(by_addr.addr.s_addr, htonl(INADDR_LOOPBACK));
	ck_assert_int_eq(by_addr.up, by_name.up);
	ck_assert_int_eq(by_addr.multicast, by_name.multicast);
}
END_TEST

START_TEST(iface_unknown)
{
	struct net_iface i;

	memset(&i, 0x5a, sizeof(i));
	ck_assert_int_eq(net_iface_lookup("nosuchif0", &i), -ENODEV);
	ck_assert_int_eq(net_iface_lookup("an-interface-name-too-long", &i), -ENODEV);
	/* An address in 127/8 that lo routes but does not hold. */
	ck_assert_int_eq(net_iface_lookup("127.31.41.59", &i), -ENODEV);
	ck_assert_uint_eq(((uint8_t *)&i)[0], 0x5a); /* untouched */
	ck_assert_int_eq(net_iface_lookup("", &i), -EINVAL);
	ck_assert_int_eq(net_iface_lookup(NULL, &i), -EINVAL);
}
END_TEST

/* ---- buffers ---------------------------------------------------------- */

START_TEST(bufsize)
{
	struct net_bufsize r, s;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(net_set_rcvbuf(fd, 256 * 1024, &r), 0);
	ck_assert_int_eq(r.requested, 256 * 1024);
	ck_assert_int_gt(r.granted, 0);
	ck_assert_int_eq(r.capped, r.granted < 2 * 256 * 1024);
	if (r.forced) /* root or CAP_NET_ADMIN: exactly doubled */
		ck_assert_int_eq(r.granted, 2 * 256 * 1024);

	/* More than any kernel grants: 1 GiB asks 2 GiB, beyond INT_MAX. */
	ck_assert_int_eq(net_set_rcvbuf(fd, 1 << 30, &r), 0);
	ck_assert_int_eq(r.requested, 1 << 30);
	ck_assert_int_eq(r.capped, 1);
	ck_assert_int_lt(r.granted, INT32_MAX);

	ck_assert_int_eq(net_set_sndbuf(fd, 128 * 1024, &s), 0);
	ck_assert_int_eq(s.requested, 128 * 1024);
	ck_assert_int_eq(s.capped, s.granted < 2 * 128 * 1024);

	ck_assert_int_eq(net_set_rcvbuf(fd, 0, &r), -EINVAL);
	ck_assert_int_eq(net_set_rcvbuf(fd, -5, &r), -EINVAL);
	close(fd);
	ck_assert_int_lt(net_set_rcvbuf(fd, 4096, &r), 0); /* closed fd */
}
END_TEST

START_TEST(udp_open_options)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .rcvbuf = 300000, .sndbuf = 200000, .nonblock = 1,
				     .reuseaddr = 1, .rxq_ovfl = 1 };
	struct net_bufsize r, s;
	int v, fd;
	socklen_t len = sizeof(v);

	fd = net_udp_open(&lo, &o, &r, &s);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(net_local_port(fd), 0);
	ck_assert_int_eq(r.requested, 300000);
	ck_assert_int_eq(s.requested, 200000);
	ck_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, &len), 0);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &v, &len), 0);
	ck_assert_int_eq(v, 1);
	close(fd);

	/* Defaults: blocking, buffers reported as the kernel set them. */
	fd = net_udp_open(&lo, NULL, &r, &s);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(r.requested, 0);
	ck_assert_int_gt(r.granted, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);

	o = (struct net_udp_options){ .busy_poll_us = -1 };
	ck_assert_int_eq(net_udp_open(&lo, &o, NULL, NULL), -EINVAL);
	/* A port in use, without SO_REUSEADDR on either socket. */
	fd = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in taken = bound_addr(fd);
	ck_assert_int_eq(net_udp_open(&taken, NULL, NULL, NULL), -EADDRINUSE);
	close(fd);
	ck_assert_int_eq(net_local_port(-1), -EBADF);
}
END_TEST

/* ---- batches over loopback -------------------------------------------- */

START_TEST(batch_init_bad)
{
	struct net_batch b;

	ck_assert_int_eq(net_batch_init(&b, 0, 100), -EINVAL);
	ck_assert_int_eq(net_batch_init(&b, 4, 0), -EINVAL);
	ck_assert_int_eq(net_batch_init(&b, 4, SIZE_MAX / 2), -EINVAL);
	ck_assert_int_eq(net_batch_init(&b, 4, 64), 0);
	ck_assert_int_eq(net_batch_send(&b, 0, 5), -EINVAL); /* more than n */
	net_batch_fini(&b);
	net_batch_fini(&b); /* idempotent */
	net_batch_fini(NULL);
}
END_TEST

START_TEST(udp_unicast_batch)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .rcvbuf = 1 << 20, .nonblock = 1 };
	struct sockaddr_in rx_addr, tx_addr;
	struct net_udp_stats before, after;
	int rx, tx;

	rx = net_udp_open(&lo, &o, NULL, NULL);
	tx = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_ge(rx, 0);
	ck_assert_int_ge(tx, 0);
	rx_addr = bound_addr(rx);
	tx_addr = bound_addr(tx);
	ck_assert_uint_eq(ntohs(rx_addr.sin_port), (unsigned)net_local_port(rx));

	ck_assert_int_eq(net_udp_stats_read(&before), 0);
	send_datagrams(tx, &rx_addr, 64);
	recv_datagrams(rx, &tx_addr, 64);
	ck_assert_int_eq(net_udp_stats_read(&after), 0);
	ck_assert_uint_ge(after.in_datagrams, before.in_datagrams + 64);

	/* Connected sender: slots without a destination. */
	ck_assert_int_eq(connect(tx, (struct sockaddr *)&rx_addr, sizeof(rx_addr)), 0);
	send_datagrams(tx, NULL, 40);
	recv_datagrams(rx, &tx_addr, 40);
	close(tx);
	close(rx);
}
END_TEST

/* sendmmsg sends at most UIO_MAXIOV (1024) messages a call: the rest of a
 * larger batch goes out on the retry. */
START_TEST(udp_batch_partial_send)
{
	enum { N = 1500 };
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .rcvbuf = 8 << 20, .nonblock = 1 };
	struct sockaddr_in rx_addr;
	struct net_batch b;
	unsigned next = 0;
	int rx, tx;

	rx = net_udp_open(&lo, &o, NULL, NULL);
	tx = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_ge(rx, 0);
	ck_assert_int_ge(tx, 0);
	rx_addr = bound_addr(rx);
	ck_assert_int_eq(net_batch_init(&b, N, 16), 0);
	for (unsigned i = 0; i < N; i++) {
		memcpy(net_batch_slot(&b, i), &i, sizeof(i));
		b.lens[i] = sizeof(i);
		b.addrs[i] = rx_addr;
	}
	ck_assert_int_eq(net_batch_send(&b, tx, N), N);
	while (next < N) {
		int n;

		ck_assert_int_eq(testutil_wait_readable(rx, 1000), 1);
		n = net_batch_recv(&b, rx);
		ck_assert_int_ge(n, 1);
		for (int i = 0; i < n; i++, next++) {
			unsigned got;

			ck_assert_uint_eq(b.lens[i], sizeof(got));
			memcpy(&got, net_batch_slot(&b, (unsigned)i), sizeof(got));
			ck_assert_uint_eq(got, next);
		}
	}
	net_batch_fini(&b);
	close(tx);
	close(rx);
}
END_TEST

/* net_batch_send_wait waits out a full socket instead of dropping: an
 * AF_UNIX datagram pair with the least send buffer holds a few datagrams;
 * with a reader that starts late every datagram goes, after waiting; with
 * none, the wait ends at its limit with what fit. */
START_TEST(send_wait_full_socket)
{
	enum { N = 200 };
	struct net_batch b;
	uint64_t waits = 0, t0;
	int sv[2], status, small = 1; /* SO_SNDBUF: the kernel's least */
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(net_batch_init(&b, N, 64), 0);
	for (unsigned i = 0; i < N; i++) {
		memcpy(net_batch_slot(&b, i), &i, sizeof(i));
		b.lens[i] = sizeof(i);
	}
	/* without waiting, a burst does not fit */
	ck_assert_int_lt(net_batch_send(&b, sv[0], N), N);
	while (recv(sv[1], &status, sizeof(status), 0) > 0)
		;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* the late reader: every datagram, in order */
		struct timespec late = { 0, 20 * 1000000 };
		unsigned got, want = 0;

		nanosleep(&late, NULL);
		while (want < N) {
			struct pollfd p = { .fd = sv[1], .events = POLLIN };

			if (poll(&p, 1, 2000) != 1 || recv(sv[1], &got, sizeof(got), 0) != sizeof(got) ||
			    got != want++)
				_exit(1);
		}
		_exit(0);
	}
	ck_assert_int_eq(net_batch_send_wait(&b, sv[0], N, 5000000000ull, &waits), N);
	ck_assert_uint_ge(waits, 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* nobody reads: the wait gives up after its limit */
	t0 = mono_ns();
	ck_assert_int_lt(net_batch_send_wait(&b, sv[0], N, 5000000ull, NULL), N);
	ck_assert_uint_ge(mono_ns() - t0, 5000000ull);
	net_batch_fini(&b);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* A receiver too small for a burst counts its drops (SO_RXQ_OVFL). */
START_TEST(udp_rxq_overflow)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .rcvbuf = 4096, .nonblock = 1, .rxq_ovfl = 1 };
	struct net_udp_stats before, after;
	struct sockaddr_in rx_addr;
	struct net_batch b;
	int rx, tx, n, total = 0;

	rx = net_udp_open(&lo, &o, NULL, NULL);
	tx = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_ge(rx, 0);
	ck_assert_int_ge(tx, 0);
	rx_addr = bound_addr(rx);
	ck_assert_int_eq(net_udp_stats_read(&before), 0);
	ck_assert_int_eq(net_batch_init(&b, 64, 1400), 0);
	for (unsigned i = 0; i < 64; i++) {
		memset(net_batch_slot(&b, i), (int)i, 1400);
		b.lens[i] = 1400;
		b.addrs[i] = rx_addr;
	}
	ck_assert_int_eq(net_batch_send(&b, tx, 64), 64);
	while ((n = net_batch_recv(&b, rx)) > 0)
		total += n;
	ck_assert_int_ge(n, 0);
	ck_assert_int_lt(total, 64);
	/* The next datagram carries the drop count. */
	b.lens[0] = 10;
	b.addrs[0] = rx_addr;
	ck_assert_int_eq(net_batch_send(&b, tx, 1), 1);
	ck_assert_int_eq(testutil_wait_readable(rx, 1000), 1);
	ck_assert_int_eq(net_batch_recv(&b, rx), 1);
	ck_assert_uint_eq(b.lens[0], 10);
	ck_assert_uint_eq(b.rxq_dropped, 64u - (unsigned)total);
	ck_assert_int_eq(net_udp_stats_read(&after), 0);
	ck_assert_uint_ge(after.rcvbuf_errors, before.rcvbuf_errors + b.rxq_dropped);
	net_batch_fini(&b);
	close(tx);
	close(rx);
}
END_TEST

/* ---- multicast on loopback --------------------------------------------- */

static struct sockaddr_in random_group(void)
{
	struct sockaddr_in g = { .sin_family = AF_INET };
	unsigned r;

	srand((unsigned)(mono_ns() ^ (uint64_t)getpid() << 16));
	r = (unsigned)rand();
	g.sin_addr.s_addr = htonl(0xefff0000u | (r & 0xfffe) | 1u); /* 239.255.x.y, y odd */
	/* below the ephemeral range (32768 up): no other process's socket there */
	g.sin_port = htons((uint16_t)(20000 + (unsigned)rand() % 12000));
	return g;
}

START_TEST(mcast_two_receivers)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .nonblock = 1, .rcvbuf = 1 << 20 };
	struct sockaddr_in g = random_group(), tx_addr;
	int rx1, rx2, rx3, tx;

	rx1 = net_mcast_recv_open(&g, LOOPBACK, &o, NULL);
	rx2 = net_mcast_recv_open(&g, LOOPBACK, &o, NULL);
	rx3 = net_mcast_recv_open(&g, "lo", &o, NULL); /* by name: same interface */
	ck_assert_int_ge(rx1, 0);
	ck_assert_int_ge(rx2, 0);
	ck_assert_int_ge(rx3, 0);
	ck_assert_int_eq(net_local_port(rx1), ntohs(g.sin_port));
	ck_assert_int_eq(net_local_port(rx2), ntohs(g.sin_port));

	tx = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_ge(tx, 0);
	ck_assert_int_eq(net_mcast_send_setup(tx, LOOPBACK, 1), 0);
	tx_addr = bound_addr(tx);

	send_datagrams(tx, &g, 32);
	recv_datagrams(rx1, &tx_addr, 32);
	recv_datagrams(rx2, &tx_addr, 32);
	recv_datagrams(rx3, &tx_addr, 32);
	close(tx);
	close(rx3);
	close(rx2);
	close(rx1);
}
END_TEST

/* A receiver of one group does not hear another group on the same port. */
START_TEST(mcast_other_group)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .nonblock = 1 };
	struct sockaddr_in g = random_group(), h = g, tx_addr;
	int rx_g, rx_h, tx;

	h.sin_addr.s_addr = htonl(ntohl(g.sin_addr.s_addr) + 1); /* y even */
	rx_g = net_mcast_recv_open(&g, LOOPBACK, &o, NULL);
	rx_h = net_mcast_recv_open(&h, LOOPBACK, &o, NULL);
	ck_assert_int_ge(rx_g, 0);
	ck_assert_int_ge(rx_h, 0);
	tx = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_eq(net_mcast_send_setup(tx, "lo", 0), 0);
	tx_addr = bound_addr(tx);
	send_datagrams(tx, &h, 8);
	recv_datagrams(rx_h, &tx_addr, 8);
	struct net_batch b;
	ck_assert_int_eq(net_batch_init(&b, 4, 64), 0);
	ck_assert_int_eq(net_batch_recv(&b, rx_g), 0);
	net_batch_fini(&b);
	close(tx);
	close(rx_h);
	close(rx_g);
}
END_TEST

/* A group's receiver is bound to the group's address: a unicast datagram
 * to its port on the host's address does not reach it (issue 15: any host
 * that reached the port could feed the tape). */
START_TEST(mcast_no_unicast)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0");
	struct net_udp_options o = { .nonblock = 1 };
	struct sockaddr_in g = random_group(), uni = lo, tx_addr;
	struct net_batch b;
	int rx, tx;

	rx = net_mcast_recv_open(&g, LOOPBACK, &o, NULL);
	ck_assert_int_ge(rx, 0);
	tx = net_udp_open(&lo, NULL, NULL, NULL);
	ck_assert_int_eq(net_mcast_send_setup(tx, "lo", 0), 0);
	tx_addr = bound_addr(tx);
	uni.sin_port = g.sin_port;
	send_datagrams(tx, &uni, 4); /* nobody listens there: dropped */
	send_datagrams(tx, &g, 2);
	recv_datagrams(rx, &tx_addr, 2); /* the group's, and only those */
	ck_assert_int_eq(net_batch_init(&b, 8, 64), 0);
	ck_assert_int_eq(net_batch_recv(&b, rx), 0);
	net_batch_fini(&b);
	close(tx);
	close(rx);
}
END_TEST

START_TEST(mcast_bad)
{
	struct sockaddr_in uni = addr_of(LOOPBACK ":30000"), g = random_group();
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_int_eq(net_mcast_recv_open(&uni, LOOPBACK, NULL, NULL), -EINVAL);
	ck_assert_int_eq(net_mcast_recv_open(NULL, LOOPBACK, NULL, NULL), -EINVAL);
	ck_assert_int_eq(net_mcast_recv_open(&g, "nosuchif0", NULL, NULL), -ENODEV);
	ck_assert_int_eq(net_mcast_send_setup(fd, "nosuchif0", 1), -ENODEV);
	ck_assert_int_eq(net_mcast_send_setup(fd, LOOPBACK, 256), -EINVAL);
	ck_assert_int_eq(net_mcast_send_setup(fd, LOOPBACK, -1), -EINVAL);
	close(fd);
}
END_TEST

/* ---- TCP ------------------------------------------------------------- */

static void check_tuned(int fd)
{
	int v;
	socklen_t len = sizeof(v);

	ck_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
	ck_assert_int_ne(v, 0);
}

START_TEST(tcp_listen_accept)
{
	struct sockaddr_in lo = addr_of(LOOPBACK ":0"), srv;
	int l, c, a, v;
	socklen_t len = sizeof(v);
	char buf[8];

	l = net_tcp_listen(&lo, 16);
	ck_assert_int_ge(l, 0);
	ck_assert_int_ne(fcntl(l, F_GETFL) & O_NONBLOCK, 0);
	ck_assert_int_eq(getsockopt(l, SOL_SOCKET, SO_REUSEADDR, &v, &len), 0);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(accept(l, NULL, NULL), -1); /* nothing pending */
	ck_assert_int_eq(errno, EAGAIN);
	srv = bound_addr(l);
	ck_assert_int_gt(net_local_port(l), 0);

	c = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(c, 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&srv, sizeof(srv)), 0);
	ck_assert_int_eq(testutil_wait_readable(l, 1000), 1);
	a = accept(l, NULL, NULL);
	ck_assert_int_ge(a, 0);
	ck_assert_int_eq(net_tcp_tune(a), 0);
	ck_assert_int_eq(net_tcp_tune(c), 0);
	check_tuned(a);
	check_tuned(c);
	ck_assert_int_eq(write(c, "ping", 4), 4);
	ck_assert_int_eq(testutil_wait_readable(a, 1000), 1);
	ck_assert_int_eq(read(a, buf, sizeof(buf)), 4);
	ck_assert_int_eq(memcmp(buf, "ping", 4), 0);
	ck_assert_int_eq(read(a, buf, sizeof(buf)), -1); /* non-blocking now */
	ck_assert_int_eq(errno, EAGAIN);

	/* A second listener on the same port is refused (no SO_REUSEPORT). */
	ck_assert_int_eq(net_tcp_listen(&srv, 0), -EADDRINUSE);
	close(a);
	close(c);
	close(l);
	ck_assert_int_eq(net_tcp_tune(-1), -EBADF);
}
END_TEST

START_TEST(udp_stats)
{
	struct net_udp_stats s;

	memset(&s, 0xff, sizeof(s));
	ck_assert_int_eq(net_udp_stats_read(&s), 0);
	ck_assert_uint_ne(s.in_datagrams, UINT64_MAX);
	ck_assert_uint_ne(s.rcvbuf_errors, UINT64_MAX);
	ck_assert_uint_le(s.rcvbuf_errors, s.in_errors);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, parse_good);
	tcase_add_test(tc, parse_bad);
	tcase_add_test(tc, format);
	tcase_add_test(tc, iface_lo);
	tcase_add_test(tc, iface_unknown);
	tcase_add_test(tc, bufsize);
	tcase_add_test(tc, udp_open_options);
	tcase_add_test(tc, batch_init_bad);
	tcase_add_test(tc, udp_unicast_batch);
	tcase_add_test(tc, udp_batch_partial_send);
	tcase_add_test(tc, send_wait_full_socket);
	tcase_add_test(tc, udp_rxq_overflow);
	tcase_add_test(tc, mcast_two_receivers);
	tcase_add_test(tc, mcast_other_group);
	tcase_add_test(tc, mcast_no_unicast);
	tcase_add_test(tc, mcast_bad);
	tcase_add_test(tc, tcp_listen_accept);
	tcase_add_test(tc, udp_stats);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
