/* The io_uring datagram path (common/uring.h) on real loopback sockets:
 * every datagram received through the ring, in order, from its sender;
 * buffers recycled; a receive that ran out of buffers (ENOBUFS) re-armed;
 * SO_RXQ_OVFL read per socket; the eventfd re-signalled for what a wakeup
 * left; linked sends in order, a full socket waited out. Skips (77) where
 * the kernel refuses io_uring. Only 127.0.0.1 is used. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "testutil.h"
#include "uring.h"

static struct sockaddr_in bound(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return a;
}

static int udp(int rcvbuf)
{
	struct sockaddr_in lo;
	struct net_udp_options o = { .rcvbuf = rcvbuf, .nonblock = 1, .rxq_ovfl = 1 };
	int fd;

	ck_assert_int_eq(net_parse_addr("127.0.0.1:0", &lo), 0);
	fd = net_udp_open(&lo, &o, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	return fd;
}

/* Datagrams first..first+count-1 from tx to dst: each its number, then
 * (i % 200) bytes of a pattern. */
static void send_range(int tx, const struct sockaddr_in *dst, unsigned first, unsigned count)
{
	struct net_batch b;

	ck_assert_int_eq(net_batch_init(&b, count, 256), 0);
	for (unsigned k = 0; k < count; k++) {
		unsigned i = first + k;
		uint8_t *p = net_batch_slot(&b, k);

		memcpy(p, &i, sizeof(i));
		memset(p + sizeof(i), (int)(i & 0xff), i % 200);
		b.lens[k] = sizeof(i) + i % 200;
		b.addrs[k] = *dst;
	}
	ck_assert_int_eq(net_batch_send(&b, tx, count), (int)count);
	net_batch_fini(&b);
}

static void check_msg(const struct uring_msg *m, unsigned want, const struct sockaddr_in *src)
{
	unsigned i;

	ck_assert_uint_eq(m->len, sizeof(i) + want % 200);
	memcpy(&i, m->data, sizeof(i));
	ck_assert_uint_eq(i, want);
	for (size_t j = sizeof(i); j < m->len; j++)
		ck_assert_uint_eq(m->data[j], want & 0xff);
	ck_assert_uint_eq(m->from->sin_port, src->sin_port);
	ck_assert_uint_eq(m->from->sin_addr.s_addr, src->sin_addr.s_addr);
}

/* Reaps `count` datagrams numbered from `next` on as the daemons do: per
 * wakeup, reaps of `per` until one finds no datagram, each reap's buffers
 * given back before the next, then uring_rx_done() (a reap that found only
 * the end of a receive, ENOBUFS, must still lead to its re-arm). */
static void reap_all(struct uring_rx *u, unsigned next, unsigned count, unsigned per,
		     const struct sockaddr_in *src)
{
	uint64_t deadline = mono_ns() + 3000000000ull;
	unsigned end = next + count;

	while (next < end) {
		const struct uring_msg *m;
		int n;

		ck_assert_msg(mono_ns() < deadline, "got %u of %u", count - (end - next), count);
		if (!uring_rx_pending(u))
			ck_assert_int_eq(testutil_wait_readable(uring_rx_fd(u), 1000), 1);
		while ((n = uring_rx_reap(u, per, &m)) > 0) {
			ck_assert_uint_le((unsigned)n, per);
			for (int i = 0; i < n; i++)
				check_msg(&m[i], next++, src);
			ck_assert_int_eq(uring_rx_release(u), 0);
		}
		ck_assert_int_eq(n, 0);
		ck_assert_int_eq(uring_rx_done(u), 0);
	}
}

START_TEST(recv_in_order)
{
	struct uring_rx_config c = { .bufs = 64, .payload = 2048, .max_reap = 32 };
	struct uring_rx_stats st;
	struct uring_rx *u;
	struct sockaddr_in dst, src;
	int rx = udp(0), tx = udp(0);
	uint64_t rxq = 0;

	ck_assert_int_eq(uring_rx_create(&u, &c), 0);
	ck_assert_int_eq(uring_rx_add(u, rx, 7, &rxq), 0);
	dst = bound(rx);
	src = bound(tx);
	for (unsigned r = 0; r < 5; r++) /* 5 x 40: every buffer used three times over */
		send_range(tx, &dst, r * 40, 40);
	reap_all(u, 0, 200, 32, &src);
	uring_rx_stats(u, &st);
	ck_assert_uint_eq(st.datagrams, 200);
	ck_assert_uint_eq(st.truncated, 0);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(rxq, 0);
	/* nothing more: the eventfd stays quiet */
	ck_assert_int_eq(testutil_wait_readable(uring_rx_fd(u), 50), 0);
	uring_rx_destroy(u);
	close(rx);
	close(tx);
}
END_TEST

/* More datagrams at once than buffers: the receive ends with ENOBUFS, is
 * re-armed at the release, and nothing is lost (the rest waited in the
 * socket). */
START_TEST(enobufs_rearm)
{
	struct uring_rx_config c = { .bufs = 8, .payload = 512, .max_reap = 8 };
	struct uring_rx_stats st;
	struct uring_rx *u;
	struct sockaddr_in dst, src;
	int rx = udp(1 << 20), tx = udp(0);

	ck_assert_int_eq(uring_rx_create(&u, &c), 0);
	ck_assert_int_eq(uring_rx_add(u, rx, 0, NULL), 0);
	dst = bound(rx);
	src = bound(tx);
	send_range(tx, &dst, 0, 300);
	reap_all(u, 0, 300, 8, &src);
	uring_rx_stats(u, &st);
	ck_assert_uint_eq(st.datagrams, 300);
	ck_assert_uint_ge(st.enobufs, 1);
	ck_assert_uint_ge(st.rearms, st.enobufs);
	/* and it still receives */
	send_range(tx, &dst, 300, 5);
	reap_all(u, 300, 5, 8, &src);
	uring_rx_destroy(u);
	close(rx);
	close(tx);
}
END_TEST

/* Two sockets on one ring keep their tags; a socket that overflowed says
 * how many it dropped (SO_RXQ_OVFL), in its own counter. */
START_TEST(two_sockets_rxq)
{
	struct uring_rx_config c = { .bufs = 128, .payload = 2048, .max_reap = 64 };
	struct uring_rx *u;
	struct sockaddr_in a, b;
	int ra = udp(4096), rb = udp(0), tx = udp(0);
	uint64_t rxq_a = 0, rxq_b = 0, deadline = mono_ns() + 2000000000ull;
	unsigned got_a = 0, got_b = 0;
	struct net_batch nb;

	ck_assert_int_eq(uring_rx_create(&u, &c), 0);
	ck_assert_int_eq(uring_rx_add(u, ra, 1, &rxq_a), 0);
	ck_assert_int_eq(uring_rx_add(u, rb, 2, &rxq_b), 0);
	a = bound(ra);
	b = bound(rb);
	/* a burst of 64 x 1400 bytes at a 4 KiB socket: most are dropped
	 * before the ring's task work runs */
	ck_assert_int_eq(net_batch_init(&nb, 65, 1400), 0);
	for (unsigned i = 0; i < 64; i++) {
		nb.lens[i] = 1400;
		nb.addrs[i] = a;
	}
	ck_assert_int_eq(net_batch_send(&nb, tx, 64), 64);
	nb.lens[0] = 10; /* one more to each: the count rides on it */
	nb.addrs[0] = a;
	nb.lens[1] = 10;
	nb.addrs[1] = b;
	ck_assert_int_eq(net_batch_send(&nb, tx, 2), 2);
	while (got_b < 1 || rxq_a == 0) {
		const struct uring_msg *m;
		int n;

		ck_assert(mono_ns() < deadline);
		if (!uring_rx_pending(u))
			(void)testutil_wait_readable(uring_rx_fd(u), 100);
		n = uring_rx_reap(u, 64, &m);
		for (int i = 0; i < n; i++) {
			ck_assert(m[i].tag == 1 || m[i].tag == 2);
			got_a += m[i].tag == 1;
			got_b += m[i].tag == 2;
		}
		ck_assert_int_eq(uring_rx_release(u), 0);
		ck_assert_int_eq(uring_rx_done(u), 0);
	}
	ck_assert_uint_eq(got_b, 1);
	ck_assert_uint_eq(rxq_b, 0);
	ck_assert_uint_lt(got_a, 65);
	ck_assert_uint_ge(rxq_a, 1);
	net_batch_fini(&nb);
	uring_rx_destroy(u);
	close(ra);
	close(rb);
	close(tx);
}
END_TEST

/* A wakeup that stops at its limit leaves the eventfd readable. */
START_TEST(done_resignals)
{
	struct uring_rx_config c = { .bufs = 64, .payload = 512, .max_reap = 64 };
	struct uring_rx *u;
	struct sockaddr_in dst, src;
	const struct uring_msg *m;
	int rx = udp(0), tx = udp(0);

	ck_assert_int_eq(uring_rx_create(&u, &c), 0);
	ck_assert_int_eq(uring_rx_add(u, rx, 0, NULL), 0);
	dst = bound(rx);
	src = bound(tx);
	send_range(tx, &dst, 0, 20);
	ck_assert_int_eq(testutil_wait_readable(uring_rx_fd(u), 1000), 1);
	ck_assert_int_eq(uring_rx_reap(u, 5, &m), 5);
	check_msg(&m[0], 0, &src);
	ck_assert_int_eq(uring_rx_done(u), 0);
	ck_assert_int_eq(testutil_wait_readable(uring_rx_fd(u), 0), 1);
	reap_all(u, 5, 15, 64, &src);
	ck_assert_int_eq(testutil_wait_readable(uring_rx_fd(u), 20), 0);
	uring_rx_destroy(u);
	close(rx);
	close(tx);
}
END_TEST

/* Linked sends: every datagram, in order. */
START_TEST(send_in_order)
{
	enum { N = 100 };
	struct uring_tx *t;
	struct net_batch b, r;
	struct sockaddr_in dst;
	int rx = udp(1 << 20), tx = udp(0);
	unsigned next = 0;

	ck_assert_int_eq(uring_tx_create(&t, 32), 0); /* 100 in four chains */
	ck_assert_int_eq(net_batch_init(&b, N, 64), 0);
	ck_assert_int_eq(net_batch_init(&r, 32, 64), 0);
	dst = bound(rx);
	for (unsigned i = 0; i < N; i++) {
		memcpy(net_batch_slot(&b, i), &i, sizeof(i));
		b.lens[i] = sizeof(i);
		b.addrs[i] = dst;
	}
	ck_assert_int_eq(uring_tx_send(t, &b, tx, N, 1000000, NULL), N);
	while (next < N) {
		int n;

		ck_assert_int_eq(testutil_wait_readable(rx, 1000), 1);
		n = net_batch_recv(&r, rx);
		for (int i = 0; i < n; i++, next++) {
			unsigned v;

			memcpy(&v, net_batch_slot(&r, (unsigned)i), sizeof(v));
			ck_assert_uint_eq(v, next);
		}
	}
	ck_assert_int_eq(uring_tx_send(t, &b, tx, N + 1, 0, NULL), -EINVAL);
	net_batch_fini(&b);
	net_batch_fini(&r);
	uring_tx_destroy(t);
	close(rx);
	close(tx);
}
END_TEST

/* A full socket is waited out, not dropped, and nothing is reordered: an
 * AF_UNIX datagram pair with the least send buffer and a late reader. */
START_TEST(send_waits_full_socket)
{
	enum { N = 200 };
	struct uring_tx *t;
	struct net_batch b;
	uint64_t waits = 0;
	int sv[2], status, small = 1;
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(uring_tx_create(&t, N), 0);
	ck_assert_int_eq(net_batch_init(&b, N, 64), 0);
	for (unsigned i = 0; i < N; i++) {
		memcpy(net_batch_slot(&b, i), &i, sizeof(i));
		b.lens[i] = sizeof(i);
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
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
	ck_assert_int_eq(uring_tx_send(t, &b, sv[0], N, 5000000000ull, &waits), N);
	ck_assert_uint_ge(waits, 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* nobody reads: the wait gives up at its limit with what fit */
	ck_assert_int_lt(uring_tx_send(t, &b, sv[0], N, 5000000ull, NULL), N);
	net_batch_fini(&b);
	uring_tx_destroy(t);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

int main(void)
{
	struct uring_rx_config c = { .bufs = 2, .payload = 64, .max_reap = 1 };
	struct uring_rx *probe;
	Suite *s = suite_create("uring");
	TCase *tc = tcase_create("core");
	int r = uring_rx_create(&probe, &c);

	if (r < 0) {
		printf("io_uring unavailable here (%s): skipped\n", strerror(-r));
		suite_add_tcase(s, tc); /* freed with the suite */
		srunner_free(srunner_create(s));
		return 77;
	}
	uring_rx_destroy(probe);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, recv_in_order);
	tcase_add_test(tc, enobufs_rearm);
	tcase_add_test(tc, two_sockets_rxq);
	tcase_add_test(tc, done_resignals);
	tcase_add_test(tc, send_in_order);
	tcase_add_test(tc, send_waits_full_socket);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
