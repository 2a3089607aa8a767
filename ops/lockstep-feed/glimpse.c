/* The GLIMPSE 5.0 client: SoupBinTCP 4.0 (common/soupbin.h) to one
 * replica's snapshot server. Login Request (user and password, requested
 * session blank, sequence 0); Login Accepted names the feed's current
 * session; then one ITCH message a Sequenced Data packet, applied to the
 * target book, up to the End of Snapshot ('G', the live feed's next
 * sequence number); then a Logout Request, and the socket is closed.
 * Non-blocking on the loop, so that the feeds are read meanwhile; bounded
 * by a timeout. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "feed.h"
#include "itch.h"
#include "log.h"
#include "macros.h"

const char *glimpse_state_name(enum glimpse_state s)
{
	static const char *const names[] = { "idle", "connecting", "login", "snapshot", "done",
					     "failed" };

	return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "?";
}

static void gl_close(struct glimpse *g)
{
	ev_io_stop(g->loop, &g->io);
	ev_timer_stop(g->loop, &g->timer);
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
}

static void gl_set_state(struct glimpse *g, enum glimpse_state s)
{
	log_debug("glimpse: %s -> %s", glimpse_state_name(g->state), glimpse_state_name(s));
	g->state = s;
}

__attribute__((format(printf, 2, 3))) static void gl_fail(struct glimpse *g, const char *fmt,
							   ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->error, sizeof(g->error), fmt, ap);
	va_end(ap);
	gl_close(g);
	gl_set_state(g, GL_FAILED);
	g->done(g);
}

/* Small packets on a socket just connected: the kernel takes them whole. */
static int gl_send(struct glimpse *g, const uint8_t *p, int n)
{
	return n > 0 && send(g->fd, p, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

static void gl_finish(struct glimpse *g)
{
	uint8_t out[8];

	(void)gl_send(g, out, soup_build_logout_request(out, sizeof(out)));
	gl_close(g);
	gl_set_state(g, GL_DONE);
	g->done(g);
}

/* One packet; 1 when the snapshot is over (done or failed). */
static int gl_packet(struct glimpse *g, const struct soup_packet *p)
{
	struct itch_msg m;
	int err;

	switch (p->type) {
	case SOUP_LOGIN_ACCEPTED:
		if (g->state != GL_LOGIN ||
		    soup_decode_login_accepted(p, g->session, &g->next_seq) < 0) {
			gl_fail(g, "unexpected or malformed Login Accepted");
			return 1;
		}
		g->next_seq = 0;
		book_clear(g->book);
		gl_set_state(g, GL_SNAPSHOT);
		return 0;
	case SOUP_LOGIN_REJECTED:
		gl_fail(g, "login rejected (%s)",
			p->len && p->payload[0] == SOUP_REJECT_NOT_AUTHORIZED ? "not authorized"
			: p->len && p->payload[0] == SOUP_REJECT_SESSION_UNAVAILABLE
				? "session unavailable"
				: "no reason given");
		return 1;
	case SOUP_SEQUENCED_DATA:
		if (g->state != GL_SNAPSHOT) {
			gl_fail(g, "sequenced data before Login Accepted");
			return 1;
		}
		err = itch_decode(p->payload, p->len, &m);
		if (err < 0) {
			g->undecodable++;
			log_warn("glimpse: undecodable message (%u bytes): %s", p->len,
				 itch_strerror(err));
			return 0;
		}
		if (m.type == ITCH_END_OF_SNAPSHOT) {
			g->next_seq = m.u.end_of_snapshot.seq;
			gl_finish(g);
			return 1;
		}
		g->messages++;
		if (book_apply(g->book, &m) != BOOK_OK)
			g->anomalies++;
		return 0;
	case SOUP_END_OF_SESSION:
		gl_fail(g, "End of Session before the End of Snapshot");
		return 1;
	default: /* heartbeats, debug */
		return 0;
	}
}

static void gl_readable(struct glimpse *g)
{
	struct soup_packet p;
	long n;
	int err;

	for (;;) {
		n = soup_parser_recv(&g->parser, g->fd, NULL);
		if (n == -ECONNRESET) {
			gl_fail(g, "the server closed the connection (%s)",
				g->state == GL_LOGIN ? "before the login was answered"
						     : "before the End of Snapshot");
			return;
		}
		if (n < 0) {
			gl_fail(g, "read: %s", strerror((int)-n));
			return;
		}
		while ((err = soup_parser_next(&g->parser, &p)) == SOUP_OK)
			if (gl_packet(g, &p))
				return;
		if (err != SOUP_E_AGAIN) {
			gl_fail(g, "SoupBinTCP: %s", soup_strerror(err));
			return;
		}
		if (n == 0)
			return;
	}
}

static void gl_connected(struct glimpse *g)
{
	uint8_t out[64];
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (getsockopt(g->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
		gl_fail(g, "connect: %s", strerror(soerr ? soerr : errno));
		return;
	}
	if (gl_send(g, out, soup_build_login_request(out, sizeof(out), &g->login)) < 0) {
		gl_fail(g, "sending the login: %s", strerror(errno));
		return;
	}
	gl_set_state(g, GL_LOGIN);
	ev_io_stop(g->loop, &g->io);
	ev_io_set(&g->io, g->fd, EV_READ);
	ev_io_start(g->loop, &g->io);
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct glimpse *g = container_of(w, struct glimpse, io);

	(void)loop;
	(void)revents;
	if (g->state == GL_CONNECTING)
		gl_connected(g);
	else
		gl_readable(g);
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct glimpse *g = container_of(w, struct glimpse, timer);

	(void)loop;
	(void)revents;
	gl_fail(g, "no End of Snapshot within %.1f s (%s)", g->timeout,
		glimpse_state_name(g->state));
}

void glimpse_init(struct glimpse *g, struct ev_loop *loop, const struct sockaddr_in *addr,
		  const char *user, const char *password, double timeout)
{
	memset(&g->login, 0, sizeof(g->login));
	g->loop = loop;
	g->fd = -1;
	g->state = GL_IDLE;
	g->addr = *addr;
	g->timeout = timeout;
	snprintf(g->login.username, sizeof(g->login.username), "%s", user);
	snprintf(g->login.password, sizeof(g->login.password), "%s", password);
	ev_init(&g->io, on_io);
	ev_init(&g->timer, on_timeout);
}

void glimpse_start(struct glimpse *g, struct book *book, void (*done)(struct glimpse *), void *ctx)
{
	gl_close(g);
	g->book = book;
	g->done = done;
	g->ctx = ctx;
	g->session[0] = 0;
	g->next_seq = 0;
	g->messages = g->undecodable = g->anomalies = 0;
	g->error[0] = 0;
	soup_parser_init(&g->parser, g->rxbuf, sizeof(g->rxbuf), SOUP_MAX_PAYLOAD, SOUP_FROM_SERVER);
	gl_set_state(g, GL_CONNECTING);
	ev_timer_set(&g->timer, g->timeout, 0);
	ev_timer_start(g->loop, &g->timer);
	g->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (g->fd < 0) {
		gl_fail(g, "socket: %s", strerror(errno));
		return;
	}
	(void)net_tcp_tune(g->fd);
	if (connect(g->fd, (const struct sockaddr *)&g->addr, sizeof(g->addr)) < 0 &&
	    errno != EINPROGRESS) {
		gl_fail(g, "connect: %s", strerror(errno));
		return;
	}
	ev_io_set(&g->io, g->fd, EV_WRITE);
	ev_io_start(g->loop, &g->io);
}

void glimpse_stop(struct glimpse *g)
{
	gl_close(g);
	if (g->state != GL_DONE && g->state != GL_FAILED)
		gl_set_state(g, GL_IDLE);
}
