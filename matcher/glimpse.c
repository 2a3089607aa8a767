/* The GLIMPSE 5.0 snapshot server (glimpse.h): its thread and loop, the
 * sessions (a state each, set_state), the logins, and the hand-over of the
 * image with the owner's loop (the image itself: glimpse_image.c). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "clock.h"
#include "daemon_wait.h"
#include "creds.h"
#include "glimpse.h"
#include "log.h"
#include "macros.h"
#include "net.h"

#define ACCEPT_PER_WAKEUP 16
#define IN_MAX_PAYLOAD 64 /* a client sends Login (47), heartbeats, logout */
#define IN_BUF (3 + 2 * IN_MAX_PAYLOAD)
#define NS_TO_S(ns) ((double)(ns) / 1e9)

enum phase { PH_IDLE, PH_BUILDING, PH_READY };

/* A session's life: LOGIN (until its Login Request is verified) -> WAIT
 * (logged in, for the next image) -> SNAPSHOT (Login Accepted and the
 * image being written) -> HEARTBEAT (the image written; heartbeats until
 * logout). Any state may end in a close; a rejected login is written out
 * first (closing). */
enum gs_state { GS_LOGIN, GS_WAIT, GS_SNAPSHOT, GS_HEARTBEAT, GS_STATE_MAX };
static const char *const gs_names[GS_STATE_MAX] = { "login", "wait", "snapshot", "heartbeat" };

struct glimpse_session {
	struct glimpse *g;
	int fd; /* -1: free (on the free list) */
	enum gs_state state;
	int closing; /* a Login Rejected is being written; closed after it */
	/* counted in g->readers: of the image of generation gen (WAIT: being
	 * built; SNAPSHOT: being written) */
	int attached;
	uint64_t gen;
	char peer[32], user[CREDS_LOGIN_LEN + 1];
	ev_io rio, wio;
	/* LOGIN: the login deadline; from Login Accepted: the client's
	 * silence (stopped in WAIT) */
	ev_timer timer;
	ev_timer hb; /* from Login Accepted: heartbeats, a stalled write */
	uint64_t written_ns; /* the last write that took a byte (or the start) */
	struct soup_parser in;
	uint8_t inbuf[IN_BUF];
	uint8_t out[48]; /* one small packet: Login Accepted (33), Rejected, heartbeat */
	size_t out_len, out_off;
	size_t img_off; /* SNAPSHOT: the image's next byte to write */
	struct glimpse_session *next_free;
};

#define NSTATS (sizeof(struct glimpse_stats) / sizeof(uint64_t))
#define ST(field) (offsetof(struct glimpse_stats, field) / sizeof(uint64_t))

struct glimpse {
	/* set by glimpse_open, read-only after */
	struct creds creds;
	int has_logins;
	char dummy[CREDS_HASH_LEN]; /* verified for a name that is no login */
	unsigned max_sessions;
	uint64_t login_ns, idle_ns; /* glimpse_config's, defaults applied */
	int listen_fd;
	struct ev_loop *owner, *loop;
	glimpse_build_fn build;
	void *ctx;

	/* the hand-over (glimpse.h): img belongs to the thread phase names */
	_Atomic int phase;
	struct glimpse_image img;
	ev_async want; /* on the owner's loop */
	ev_async ready, stop; /* on the server's loop */

	/* the server thread's */
	pthread_t thread;
	int started, stopping;
	ev_io accept_io;
	struct glimpse_session *sess; /* max_sessions of them, allocated once */
	struct glimpse_session *free_list;
	unsigned n_open;
	unsigned readers; /* sessions attached to the image (see the session) */
	unsigned waiting; /* WAIT sessions not attached: for the next image */
	uint64_t gen; /* the generation of the image last asked for */

	_Atomic uint64_t st[NSTATS];
};

/* log lines about clients: the server's thread only */
static struct log_ratelimit rl_client = LOG_RATELIMIT_INIT(5, 10);

static void count(struct glimpse *g, size_t i, uint64_t n)
{
	atomic_fetch_add_explicit(&g->st[i], n, memory_order_relaxed);
}

static void gauge(struct glimpse *g, size_t i, uint64_t v)
{
	atomic_store_explicit(&g->st[i], v, memory_order_relaxed);
}

void glimpse_get_stats(const struct glimpse *g, struct glimpse_stats *out)
{
	uint64_t v[NSTATS];

	for (size_t i = 0; i < NSTATS; i++)
		v[i] = atomic_load_explicit(&((struct glimpse *)g)->st[i], memory_order_relaxed);
	memcpy(out, v, sizeof(*out));
}

/* --- sessions ------------------------------------------------------------ */

static void set_state(struct glimpse_session *s, enum gs_state to)
{
	static const unsigned char allowed[GS_STATE_MAX][GS_STATE_MAX] = {
		[GS_LOGIN][GS_WAIT] = 1,
		[GS_WAIT][GS_SNAPSHOT] = 1,
		[GS_SNAPSHOT][GS_HEARTBEAT] = 1,
	};

	if (!allowed[s->state][to]) {
		log_err("GLIMPSE %s: %s -> %s is no transition (not reached)", s->peer,
			gs_names[s->state], gs_names[to]);
		return;
	}
	log_debug("GLIMPSE %s: %s -> %s", s->peer, gs_names[s->state], gs_names[to]);
	s->state = to;
}

static void maybe_request(struct glimpse *g);

/* The server's image is done with: the owner may have it again. */
static void image_done(struct glimpse *g)
{
	atomic_store_explicit(&g->phase, PH_IDLE, memory_order_release);
	maybe_request(g);
}

/* s no longer needs the image (written out, or closed). */
static void detach(struct glimpse_session *s)
{
	struct glimpse *g = s->g;

	if (!s->attached)
		return;
	s->attached = 0;
	if (--g->readers == 0 &&
	    atomic_load_explicit(&g->phase, memory_order_relaxed) == PH_READY)
		image_done(g);
}

static void session_close(struct glimpse_session *s)
{
	struct glimpse *g = s->g;

	if (s->fd < 0)
		return;
	if (s->state == GS_WAIT && !s->attached && !s->closing)
		g->waiting--;
	detach(s);
	ev_io_stop(g->loop, &s->rio);
	ev_io_stop(g->loop, &s->wio);
	ev_timer_stop(g->loop, &s->timer);
	ev_timer_stop(g->loop, &s->hb);
	close(s->fd);
	s->fd = -1;
	s->next_free = g->free_list;
	g->free_list = s;
	g->n_open--;
	gauge(g, ST(sessions), g->n_open);
}

/* The image's bytes s still owes (at *p), or 0. In SNAPSHOT, s is
 * attached: the image is READY, the server's. */
static size_t image_owed(const struct glimpse_session *s, const uint8_t **p)
{
	const struct glimpse_image *img = &s->g->img;

	if (s->state != GS_SNAPSHOT || s->img_off >= img->len)
		return 0;
	*p = img->buf + s->img_off;
	return img->len - s->img_off;
}

static int owes(const struct glimpse_session *s)
{
	const uint8_t *p;

	return s->out_len > 0 || image_owed(s, &p) > 0;
}

/* Writes what s owes, its small packet first, then the image: at most
 * GLIMPSE_WRITE_BUDGET bytes, until the socket is full. EV_WRITE is armed
 * while something is owed. 0, or -1 when s was closed. */
static int session_write(struct glimpse_session *s)
{
	struct glimpse *g = s->g;
	size_t budget = GLIMPSE_WRITE_BUDGET, total = 0;
	int full = 0;

	while (budget && !full) {
		const uint8_t *p;
		int from_out = s->out_off < s->out_len;
		size_t n;
		ssize_t r;

		if (from_out) {
			p = s->out + s->out_off;
			n = s->out_len - s->out_off;
		} else if (!(n = image_owed(s, &p))) {
			break;
		}
		if (n > budget)
			n = budget;
		r = send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			log_ratelimited(&rl_client, LOG_LVL_INFO, "GLIMPSE %s: %s: closed", s->peer,
					strerror(errno));
			session_close(s);
			return -1;
		}
		full = (size_t)r < n;
		budget -= (size_t)r;
		total += (size_t)r;
		if (from_out)
			s->out_off += (size_t)r;
		else
			s->img_off += (size_t)r;
	}
	if (total) {
		s->written_ns = mono_ns();
		count(g, ST(bytes), total);
	}
	if (s->out_off == s->out_len) {
		s->out_off = s->out_len = 0;
		if (s->closing) {
			session_close(s);
			return -1;
		}
		if (s->state == GS_SNAPSHOT && s->img_off == g->img.len) {
			count(g, ST(snapshots_sent), 1);
			log_info("GLIMPSE %s: %s: snapshot sent (%zu bytes)", s->peer, s->user,
				 g->img.len);
			set_state(s, GS_HEARTBEAT);
			detach(s);
		}
	}
	if (owes(s))
		ev_io_start(g->loop, &s->wio);
	else
		ev_io_stop(g->loop, &s->wio);
	return 0;
}

/* A Login Rejected, then the close; nothing more is read. */
static void reject(struct glimpse_session *s, char reason)
{
	s->out_len = (size_t)soup_build_login_rejected(s->out, sizeof(s->out), reason);
	s->out_off = 0;
	s->closing = 1;
	ev_io_stop(s->g->loop, &s->rio);
	(void)session_write(s);
}

static int protocol_error(struct glimpse_session *s, const char *what)
{
	count(s->g, ST(protocol_errors), 1);
	log_ratelimited(&rl_client, LOG_LVL_NOTICE, "GLIMPSE %s: %s (in state %s): closed",
			s->peer, what, gs_names[s->state]);
	session_close(s);
	return -1;
}

/* A Login Request: one password verification whatever is wrong with it
 * (an unknown name or a plaintext entry: against the dummy hash), on this
 * thread: an attempt costs the verification's time, and the server takes
 * one at a time. */
static int login(struct glimpse_session *s, const struct soup_packet *p)
{
	struct glimpse *g = s->g;
	struct soup_login l;
	const struct cred *c = NULL;
	char pw[CREDS_PASSWORD_LEN + 1] = "";
	uint64_t t0;
	int ok, verified, empty;

	if (soup_decode_login(p, &l) < 0)
		return protocol_error(s, "malformed Login Request");
	snprintf(s->user, sizeof(s->user), "%s", l.username);
	if (g->has_logins)
		c = creds_find(&g->creds, l.username);
	empty = creds_password_normalise(l.password, pw) < 0;
	if (empty)
		pw[0] = '\0';
	t0 = mono_ns();
	verified = creds_password_verify(c && c->hash[0] ? c->hash : g->dummy, pw);
	ok = c && !empty && (c->hash[0] ? verified : creds_password_ok(c, l.password));
	count(g, ST(verify_us), (mono_ns() - t0) / 1000);
	sodium_memzero(pw, sizeof(pw));
	sodium_memzero(l.password, sizeof(l.password));
	if (!ok) {
		count(g, ST(logins_rejected), 1);
		log_ratelimited(&rl_client, LOG_LVL_NOTICE, "GLIMPSE %s: login %s rejected: %s",
				s->peer, s->user,
				g->has_logins ? "unknown username or wrong password"
					      : "no [feed] logins file");
		reject(s, SOUP_REJECT_NOT_AUTHORIZED);
		return -1;
	}
	count(g, ST(logins), 1);
	log_info("GLIMPSE %s: %s logged in", s->peer, s->user);
	/* waiting for the image is the server's doing: the client's silence
	 * counts from its Login Accepted */
	ev_timer_stop(g->loop, &s->timer);
	set_state(s, GS_WAIT);
	g->waiting++;
	maybe_request(g);
	return 0;
}

/* 0, or -1 when s was closed (or is closing). */
static int on_packet(struct glimpse_session *s, const struct soup_packet *p)
{
	if (s->state == GS_LOGIN) {
		if (p->type == SOUP_LOGIN_REQUEST)
			return login(s, p);
		if (p->type == SOUP_DEBUG)
			return 0;
		return protocol_error(s, "not a Login Request");
	}
	switch (p->type) {
	case SOUP_LOGOUT_REQUEST:
		count(s->g, ST(logouts), 1);
		log_info("GLIMPSE %s: %s logged out", s->peer, s->user);
		session_close(s);
		return -1;
	case SOUP_LOGIN_REQUEST:
		return protocol_error(s, "a second Login Request");
	default: /* heartbeats, debug, unsequenced data: the client is there */
		return 0;
	}
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct glimpse_session *s = container_of(w, struct glimpse_session, rio);
	struct soup_packet p;
	long r = soup_parser_recv(&s->in, s->fd, NULL);
	int rc;

	(void)revents;
	if (r < 0) {
		log_debug("GLIMPSE %s: %s", s->peer,
			  r == -ECONNRESET ? "closed by the client" : strerror((int)-r));
		session_close(s);
		return;
	}
	if (r == 0)
		return;
	if (s->state != GS_LOGIN && s->state != GS_WAIT)
		ev_timer_again(loop, &s->timer);
	/* the buffer holds a few packets at most: all of them */
	while ((rc = soup_parser_next(&s->in, &p)) != SOUP_E_AGAIN) {
		if (rc < 0) {
			protocol_error(s, soup_strerror(rc));
			return;
		}
		if (on_packet(s, &p) < 0)
			return;
	}
}

static void on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	(void)session_write(container_of(w, struct glimpse_session, wio));
}

/* The login deadline, then the client's silence. */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct glimpse_session *s = container_of(w, struct glimpse_session, timer);
	int login = s->state == GS_LOGIN;

	(void)loop;
	(void)revents;
	count(s->g, login ? ST(login_timeouts) : ST(idle_timeouts), 1);
	log_ratelimited(&rl_client, LOG_LVL_INFO, "GLIMPSE %s: %s for %g s: closed", s->peer,
			login ? "no login" : "nothing heard",
			NS_TO_S(login ? s->g->login_ns : s->g->idle_ns));
	session_close(s);
}

/* Every second from Login Accepted: a heartbeat when all is written; a
 * socket that took nothing for idle_ns closes the session (a
 * client that does not read holds the image from the next logins). */
static void on_hb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct glimpse_session *s = container_of(w, struct glimpse_session, hb);
	uint64_t now = mono_ns();

	(void)loop;
	(void)revents;
	if (owes(s)) {
		if (now - s->written_ns < s->g->idle_ns)
			return;
		count(s->g, ST(write_stalls), 1);
		log_ratelimited(&rl_client, LOG_LVL_NOTICE,
				"GLIMPSE %s: %s: nothing written for %g s (it does not read): "
				"closed", s->peer, s->user, NS_TO_S(s->g->idle_ns));
		session_close(s);
		return;
	}
	s->out_len = (size_t)soup_build_server_heartbeat(s->out, sizeof(s->out));
	s->out_off = 0;
	(void)session_write(s);
}

/* The image is here: Login Accepted and the image to s, or Login Rejected
 * 'S' when there is none. */
static void session_start(struct glimpse_session *s)
{
	struct glimpse *g = s->g;

	s->timer.repeat = NS_TO_S(g->idle_ns);
	ev_timer_again(g->loop, &s->timer); /* also bounds a Login Rejected's write */
	if (!g->img.available) {
		count(g, ST(logins_unavailable), 1);
		detach(s);
		reject(s, SOUP_REJECT_SESSION_UNAVAILABLE);
		return;
	}
	s->out_len = (size_t)soup_build_login_accepted(s->out, sizeof(s->out), g->img.session, 1);
	s->out_off = 0;
	s->img_off = 0;
	s->written_ns = mono_ns();
	set_state(s, GS_SNAPSHOT);
	ev_timer_start(g->loop, &s->hb);
	(void)session_write(s);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct glimpse *g = container_of(w, struct glimpse, accept_io);

	(void)revents;
	for (int i = 0; i < ACCEPT_PER_WAKEUP; i++) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(g->listen_fd, (struct sockaddr *)&peer, &plen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct glimpse_session *s;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_ratelimited(&rl_client, LOG_LVL_WARNING, "GLIMPSE: accept: %s",
						strerror(errno));
			return;
		}
		count(g, ST(connections), 1);
		if (!(s = g->free_list) || g->stopping) {
			count(g, ST(refused_full), 1);
			log_ratelimited(&rl_client, LOG_LVL_WARNING,
					"GLIMPSE: connection refused: %u sessions open ([feed] "
					"glimpse_max)", g->n_open);
			close(fd);
			continue;
		}
		g->free_list = s->next_free;
		(void)net_tcp_tune(fd);
		s->fd = fd;
		s->state = GS_LOGIN;
		s->closing = s->attached = 0;
		s->out_len = s->out_off = s->img_off = 0;
		s->user[0] = '\0';
		s->written_ns = mono_ns();
		net_format_addr(&peer, s->peer, sizeof(s->peer));
		soup_parser_init(&s->in, s->inbuf, sizeof(s->inbuf), IN_MAX_PAYLOAD,
				 SOUP_FROM_CLIENT);
		ev_io_init(&s->rio, on_read, fd, EV_READ);
		ev_io_init(&s->wio, on_write, fd, EV_WRITE);
		ev_timer_init(&s->timer, on_timer, NS_TO_S(g->login_ns), 0.);
		ev_timer_init(&s->hb, on_hb, NS_TO_S(GLIMPSE_HEARTBEAT_NS),
			      NS_TO_S(GLIMPSE_HEARTBEAT_NS));
		ev_io_start(loop, &s->rio);
		ev_timer_start(loop, &s->timer);
		g->n_open++;
		gauge(g, ST(sessions), g->n_open);
		log_debug("GLIMPSE %s: connected", s->peer);
	}
}

/* --- the hand-over ----------------------------------------------------------- */

/* Server: when the image is free and logins wait, they are attached to
 * the next one and the owner is asked for it. */
static void maybe_request(struct glimpse *g)
{
	if (g->stopping || !g->waiting ||
	    atomic_load_explicit(&g->phase, memory_order_relaxed) != PH_IDLE)
		return;
	g->gen++;
	for (unsigned i = 0; i < g->max_sessions; i++) {
		struct glimpse_session *s = &g->sess[i];

		if (s->fd >= 0 && s->state == GS_WAIT && !s->attached && !s->closing) {
			s->attached = 1;
			s->gen = g->gen;
			g->readers++;
		}
	}
	g->waiting = 0;
	atomic_store_explicit(&g->phase, PH_BUILDING, memory_order_release);
	ev_async_send(g->owner, &g->want);
}

/* Owner: the image, built between two of the owner loop's callbacks. */
static void on_want(struct ev_loop *loop, ev_async *w, int revents)
{
	struct glimpse *g = container_of(w, struct glimpse, want);
	uint64_t t0;

	(void)loop;
	(void)revents;
	if (atomic_load_explicit(&g->phase, memory_order_acquire) != PH_BUILDING)
		return;
	t0 = mono_ns();
	glimpse_image_reset(&g->img);
	g->build(g->ctx, &g->img);
	if (g->img.err)
		g->img.available = 0;
	g->img.build_ns = mono_ns() - t0;
	atomic_store_explicit(&g->phase, PH_READY, memory_order_release);
	ev_async_send(g->loop, &g->ready);
}

/* Server: the image is here; the sessions attached to it start. */
static void on_ready(struct ev_loop *loop, ev_async *w, int revents)
{
	struct glimpse *g = container_of(w, struct glimpse, ready);
	const struct glimpse_image *img = &g->img;
	uint64_t gen = g->gen, us;

	(void)loop;
	(void)revents;
	if (atomic_load_explicit(&g->phase, memory_order_acquire) != PH_READY)
		return;
	us = img->build_ns / 1000;
	gauge(g, ST(build_us), us);
	if (us > atomic_load_explicit(&g->st[ST(build_max_us)], memory_order_relaxed))
		gauge(g, ST(build_max_us), us);
	if (img->available) {
		count(g, ST(snapshots), 1);
		gauge(g, ST(image_bytes), img->len);
		gauge(g, ST(image_messages), img->messages);
		log_info("GLIMPSE: snapshot of %llu messages (%zu bytes), session %s, next sequence "
			 "number %llu, built in %llu us (the matcher's pause), for %u sessions",
			 (unsigned long long)img->messages, img->len, img->session,
			 (unsigned long long)img->next, (unsigned long long)us, g->readers);
	} else {
		log_notice("GLIMPSE: no snapshot (%s): %u logins answered 'S'",
			   img->err ? strerror(-img->err)
				    : "the feed's position is unknown, or the replica is not live",
			   g->readers);
	}
	/* a session that ends here may let the next image be asked for,
	 * whose sessions (a later gen) wait for it */
	for (unsigned i = 0; i < g->max_sessions; i++) {
		struct glimpse_session *s = &g->sess[i];

		if (s->fd >= 0 && s->attached && s->gen == gen && s->state == GS_WAIT)
			session_start(s);
	}
	if (g->readers == 0 && atomic_load_explicit(&g->phase, memory_order_relaxed) == PH_READY)
		image_done(g);
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	struct glimpse *g = container_of(w, struct glimpse, stop);

	(void)revents;
	g->stopping = 1;
	ev_break(loop, EVBREAK_ALL);
}

static void *server_main(void *arg)
{
	struct glimpse *g = arg;

	daemon_thread_off_path("glimpse"); /* its clients are the public's */
	ev_run(g->loop, 0);
	g->stopping = 1;
	for (unsigned i = 0; i < g->max_sessions; i++)
		session_close(&g->sess[i]);
	return NULL;
}

/* --- life cycle ---------------------------------------------------------------- */

int glimpse_open(struct glimpse **out, const struct glimpse_config *cfg, struct ev_loop *owner,
		 glimpse_build_fn build, void *ctx, char *err, size_t errlen)
{
	struct glimpse *g = calloc(1, sizeof(*g));
	struct sockaddr_in a;
	char why[512];
	int rc;

	if (!g)
		return -ENOMEM;
	g->listen_fd = -1;
	g->owner = owner;
	g->build = build;
	g->ctx = ctx;
	g->max_sessions = cfg->max_sessions ? cfg->max_sessions : 1;
	g->login_ns = cfg->login_ns ? cfg->login_ns : GLIMPSE_LOGIN_NS;
	g->idle_ns = cfg->idle_ns ? cfg->idle_ns : GLIMPSE_IDLE_NS;
	if ((rc = net_parse_addr(cfg->listen, &a)) < 0) {
		snprintf(err, errlen, "%s: not host:port", cfg->listen);
		goto out_free;
	}
	if (cfg->logins && cfg->logins[0]) {
		if ((rc = creds_load(&g->creds, cfg->logins, why, sizeof(why))) < 0) {
			snprintf(err, errlen, "logins: %s", why);
			goto out_free;
		}
		g->has_logins = 1;
	}
	rc = -ENOMEM;
	if (creds_dummy_hash(g->dummy) < 0) {
		snprintf(err, errlen, "libsodium cannot start");
		goto out_free;
	}
	if (!(g->sess = calloc(g->max_sessions, sizeof(*g->sess))) ||
	    !(g->loop = ev_loop_new(EVFLAG_AUTO))) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		goto out_free;
	}
	for (unsigned i = g->max_sessions; i-- > 0;) {
		g->sess[i].g = g;
		g->sess[i].fd = -1;
		g->sess[i].next_free = g->free_list;
		g->free_list = &g->sess[i];
	}
	if ((g->listen_fd = net_tcp_listen(&a, 64)) < 0) {
		rc = g->listen_fd;
		snprintf(err, errlen, "listen on %s: %s", cfg->listen, strerror(-rc));
		goto out_free;
	}
	atomic_init(&g->phase, PH_IDLE);
	*out = g;
	return 0;
out_free:
	glimpse_close(g);
	return rc;
}

int glimpse_start(struct glimpse *g)
{
	static const int sync_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP };
	sigset_t mask, old;
	int rc;

	ev_io_init(&g->accept_io, on_accept, g->listen_fd, EV_READ);
	ev_io_start(g->loop, &g->accept_io);
	ev_async_init(&g->ready, on_ready);
	ev_async_start(g->loop, &g->ready);
	ev_async_init(&g->stop, on_stop);
	ev_async_start(g->loop, &g->stop);
	ev_async_init(&g->want, on_want);
	ev_async_start(g->owner, &g->want);
	/* the daemon's signals stay the main thread's (its loop's watchers);
	 * the thread inherits this mask */
	sigfillset(&mask);
	for (size_t i = 0; i < ARRAY_SIZE(sync_signals); i++)
		sigdelset(&mask, sync_signals[i]);
	pthread_sigmask(SIG_SETMASK, &mask, &old);
	rc = pthread_create(&g->thread, NULL, server_main, g);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		ev_async_stop(g->owner, &g->want);
		return -rc;
	}
	g->started = 1;
	if (!g->has_logins)
		log_warn("GLIMPSE: no [feed] logins file: every login is rejected");
	return 0;
}

int glimpse_port(const struct glimpse *g)
{
	return net_local_port(g->listen_fd);
}

void glimpse_close(struct glimpse *g)
{
	if (!g)
		return;
	if (g->started) {
		ev_async_send(g->loop, &g->stop);
		pthread_join(g->thread, NULL);
		ev_async_stop(g->owner, &g->want);
		ev_io_stop(g->loop, &g->accept_io);
		ev_async_stop(g->loop, &g->ready);
		ev_async_stop(g->loop, &g->stop);
	}
	if (g->loop)
		ev_loop_destroy(g->loop);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	creds_fini(&g->creds);
	sodium_memzero(g->dummy, sizeof(g->dummy));
	glimpse_image_free(&g->img);
	free(g->sess);
	free(g);
}
