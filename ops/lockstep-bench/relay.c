/* lockstep-bench --baseline: the relay. It takes SoupBinTCP sessions like a
 * gateway (any login is accepted), puts every OUCH message into MoldUDP64
 * datagrams to the echo (block: u16 BE client number, then the message), and
 * writes the echo's answers back to each client as sequenced data. It
 * batches with recvmmsg/sendmmsg, and waits in poll() or, with --spin,
 * spins. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "wire.h"

#define RELAY_CLIENTS 256

struct rclient {
	int fd;
	struct soup_parser parser;
	uint8_t rx[1 << 16];
	uint8_t *tx;
	size_t txlen;
};

struct relay {
	int lfd, ufd;
	struct sockaddr_in echo;
	struct rclient cl[RELAY_CLIENTS];
	unsigned n_cl;
	struct pollfd pf[RELAY_CLIENTS + 2];
	struct net_batch out, in;
	unsigned n_out; /* datagrams in `out` */
	struct mold_session sess;
	struct mold_builder b; /* the datagram being built, when `building` */
	int building;
	uint64_t seq;
};

static void relay_close(struct rclient *c)
{
	close(c->fd);
	c->fd = -1;
}

/* A new client, if any: 0, or -1 when out of memory. */
static int relay_accept(struct relay *r)
{
	int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rclient *c;

	if (fd < 0)
		return 0;
	if (r->n_cl == RELAY_CLIENTS) {
		close(fd);
		return 0;
	}
	c = &r->cl[r->n_cl++];
	net_tcp_tune(fd);
	c->fd = fd;
	c->txlen = 0;
	if (!c->tx && !(c->tx = malloc(TXBUF)))
		return -1;
	soup_parser_init(&c->parser, c->rx, sizeof(c->rx), SOUP_MAX_PAYLOAD, SOUP_FROM_CLIENT);
	return 0;
}

/* Client i's message (p.len <= OUCH_MAX_LEN) into the datagram to the echo. */
static void relay_forward(struct relay *r, unsigned i, const struct soup_packet *p)
{
	uint8_t blk[2 + OUCH_MAX_LEN];

	blk[0] = (uint8_t)(i >> 8);
	blk[1] = (uint8_t)i;
	memcpy(blk + 2, p->payload, p->len);
	if (r->building && mold_build_add(&r->b, blk, (uint16_t)(p->len + 2)) == 0)
		return;
	if (r->building)
		bench_batch_push(&r->out, &r->n_out, &r->b, &r->echo, r->ufd);
	mold_build_begin(&r->b, net_batch_slot(&r->out, r->n_out), r->out.size, &r->sess, r->seq);
	mold_build_add(&r->b, blk, (uint16_t)(p->len + 2));
	r->seq++;
	r->building = 1;
}

/* client -> echo: what client i sent. */
static void relay_read_client(struct relay *r, unsigned i)
{
	struct rclient *c = &r->cl[i];
	struct soup_packet p;
	long n;
	int err;

	if (c->fd < 0)
		return;
	n = soup_parser_recv(&c->parser, c->fd, NULL);
	if (n < 0) {
		relay_close(c);
		return;
	}
	if (n == 0)
		return;
	while ((err = soup_parser_next(&c->parser, &p)) == SOUP_OK) {
		if (p.type == SOUP_LOGIN_REQUEST) {
			int l = soup_build_login_accepted(c->tx + c->txlen, TXBUF - c->txlen, "BASELINE", 1);

			if (l > 0)
				c->txlen += (size_t)l;
		} else if (p.type == SOUP_UNSEQUENCED_DATA && p.len <= OUCH_MAX_LEN) {
			relay_forward(r, i, &p);
		}
	}
	if (err != SOUP_E_AGAIN)
		relay_close(c);
}

/* echo -> clients: the answers in received datagram k, to their clients'
 * send buffers. */
static void relay_from_echo(void *ctx, unsigned k)
{
	struct relay *r = ctx;
	struct mold_iter it;
	const uint8_t *d;
	uint64_t sq;
	uint16_t len;

	if (bench_mold_iter(&r->in, k, &it) < 0)
		return;
	while (mold_iter_next(&it, &sq, &d, &len)) {
		unsigned ci = (unsigned)(d[0] << 8 | d[1]);
		struct rclient *c = &r->cl[ci];
		int l;

		if (len < 3 || ci >= r->n_cl || c->fd < 0)
			continue;
		l = soup_build_sequenced(c->tx + c->txlen, TXBUF - c->txlen, d + 2, (uint16_t)(len - 2));
		if (l > 0)
			c->txlen += (size_t)l;
	}
}

static void relay_write_client(struct rclient *c)
{
	size_t off = 0;

	while (c->fd >= 0 && off < c->txlen) {
		ssize_t n = send(c->fd, c->tx + off, c->txlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			relay_close(c);
			break;
		}
		off += (size_t)n;
	}
	memmove(c->tx, c->tx + off, c->txlen - off);
	c->txlen -= off;
}

/* Waits for the listener, the echo's socket and the clients. */
static int relay_poll(struct relay *r)
{
	unsigned np = 2;

	r->pf[0] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
	r->pf[1] = (struct pollfd){ .fd = r->ufd, .events = POLLIN };
	for (unsigned i = 0; i < r->n_cl; i++)
		r->pf[np++] = (struct pollfd){ .fd = r->cl[i].fd,
					      .events = (short)(POLLIN | (r->cl[i].txlen ? POLLOUT : 0)) };
	return poll(r->pf, np, opt.spin ? 0 : -1);
}

int relay_run(int lfd, int ufd, const struct sockaddr_in *echo)
{
	static struct relay r;

	r.lfd = lfd;
	r.ufd = ufd;
	r.echo = *echo;
	r.seq = 1;
	if (net_batch_init(&r.out, RELAY_BATCH, WIRE_MAX_DATAGRAM) < 0 ||
	    net_batch_init(&r.in, RELAY_BATCH, WIRE_MAX_DATAGRAM) < 0)
		return 1;
	mold_session_set(&r.sess, "RELAY");
	for (unsigned i = 0; i < RELAY_CLIENTS; i++)
		r.cl[i].fd = -1;
	for (;;) {
		if (relay_poll(&r) < 0 && errno != EINTR)
			return 1;
		if ((r.pf[0].revents & POLLIN) && relay_accept(&r) < 0)
			return 1;
		for (unsigned i = 0; i < r.n_cl; i++)
			relay_read_client(&r, i);
		if (r.building) {
			bench_batch_push(&r.out, &r.n_out, &r.b, &r.echo, ufd);
			r.building = 0;
		}
		if (r.n_out) {
			net_batch_send(&r.out, ufd, r.n_out);
			r.n_out = 0;
		}
		bench_batch_each(&r.in, ufd, relay_from_echo, &r);
		for (unsigned i = 0; i < r.n_cl; i++)
			relay_write_client(&r.cl[i]);
	}
}
