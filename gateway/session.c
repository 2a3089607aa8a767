/* SoupBinTCP 4.0 server sessions, the core: a session's states, its
 * output (gathered per session, written once per loop iteration; under
 * fsync = disk nothing passes what its login's journal holds on disk), its
 * close and finish, the login's reader (sequenced data out, live or
 * replayed from the journal; end of session), reading packets,
 * heartbeats both ways, idle and slow clients, and the listener. The
 * Login Request is session_login.c's, OUCH in and the login's throttle
 * session_ouch.c's (session_private.h). */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "gw_private.h"
#include "journal.h"
#include "ouch.h"
#include "session_private.h"
#include "wire.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

static const char *const state_names[GW_SESS_STATE_MAX] = { "login", "active", "closing",
							     "dead" };

void gw_sess_set_state(struct gw_session *s, enum gw_sess_state st)
{
	if (s->state == st)
		return;
	log_debug("session %s: %s -> %s", s->peer, state_names[s->state], state_names[st]);
	s->state = st;
}

static void mark_dirty(struct gw_session *s)
{
	if (s->dirty || s->state == GW_SESS_DEAD)
		return;
	s->dirty = 1;
	s->next_dirty = s->gw->sess.dirty;
	s->gw->sess.dirty = s;
}

/* Room for `need` more bytes at the end of the output buffer (compacts). */
uint8_t *gw_sess_out_room(struct gw_session *s, size_t need)
{
	if (s->out_cap - s->out_len < need && s->out_off > 0) {
		s->out_shift += s->out_off;
		memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
		s->out_len -= s->out_off;
		s->out_off = 0;
	}
	return s->out_cap - s->out_len >= need ? s->out + s->out_len : NULL;
}

/* Commits a packet that a soup_build_* call wrote at gw_sess_out_room(); n
 * is its result. 0, or -ENOSPC when it did not fit. */
int gw_sess_out_commit(struct gw_session *s, int n)
{
	if (n <= 0)
		return -ENOSPC;
	s->out_len += (size_t)n;
	mark_dirty(s);
	return 0;
}

/* A login's orders may be in any partition: one command for each. */
static void send_session_event(struct gw *g, struct gw_login *l,
			       Lockstep__SessionEvent__Kind kind)
{
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__SessionEvent ev = LOCKSTEP__SESSION_EVENT__INIT;

	ev.kind = kind;
	c.user = l->cred.login;
	c.firm = l->cred.firm;
	c.body_case = LOCKSTEP__COMMAND__BODY_SESSION;
	c.session = &ev;
	for (unsigned p = 0; p < g->n_parts; p++) {
		c.partition = p;
		if (gw_cmd_submit(g, &c) == 0)
			g->st.session_events++;
	}
}

/* Closes the connection at once; the struct is freed by gw_session_reap().
 * A logged-in login with cancel_on_disconnect gets its session event. */
void gw_sess_close(struct gw_session *s, int logout)
{
	struct gw *g = s->gw;

	if (s->state == GW_SESS_DEAD)
		return;
	if (s->login) {
		gw_sess_throttle_flush(s);
		if (s->login->cred.cancel_on_disconnect)
			send_session_event(g, s->login,
					   logout ? LOCKSTEP__SESSION_EVENT__KIND__CANCEL_ALL
						  : LOCKSTEP__SESSION_EVENT__KIND__DISCONNECT);
		log_info("session %s: %s %s", s->peer, s->login->cred.login,
			 logout ? "logged out" : "disconnected");
		gw_login_detach(s->login);
		s->login = NULL;
	}
	if (!logout)
		g->st.disconnects++;
	if (s->verify_id >= 0)
		gw_verify_cancel(g, s->verify_id);
	ev_timer_stop(g->loop, &s->answer);
	ev_io_stop(g->loop, &s->rio);
	ev_io_stop(g->loop, &s->wio);
	ev_timer_stop(g->loop, &s->timer);
	ev_timer_stop(g->loop, &s->drain);
	close(s->fd);
	s->fd = -1;
	gw_sess_set_state(s, GW_SESS_DEAD);
	if (s->prev)
		s->prev->next = s->next;
	else
		g->sess.list = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = g->sess.dead;
	g->sess.dead = s;
	g->sess.n--;
}

void gw_sess_protocol_error(struct gw_session *s, const char *what, int err)
{
	s->gw->st.protocol_errors++;
	log_ratelimited(&gw_rl, LOG_LVL_WARNING, "session %s%s%s: %s%s%s: disconnecting", s->peer,
			s->login ? " " : "", s->login ? s->login->cred.login : "", what,
			err ? ": " : "", err ? soup_strerror(err) : "");
	gw_sess_close(s, 0);
}

/* Stops reading and closes once the output is written. */
void gw_sess_finish(struct gw_session *s, int logout)
{
	s->logout = logout;
	ev_io_stop(s->gw->loop, &s->rio);
	gw_sess_set_state(s, GW_SESS_CLOSING);
	mark_dirty(s);
}

/* ---- the login's reader --------------------------------------------------- */

/* Forgets the gated messages the disk now holds. */
static void gate_pop(struct gw_session *s)
{
	while (s->gate_n && s->gate_seq[s->gate_head] < s->login->durable_next) {
		s->gate_head = (s->gate_head + 1) % GW_GATE;
		s->gate_n--;
	}
}

/* Where writing to the client stops: before the first sequenced message
 * not yet on disk (fsync = disk), else at the end of the output. */
static size_t out_limit(struct gw_session *s)
{
	if (s->login)
		gate_pop(s);
	return s->gate_n ? (size_t)(s->gate_pos[s->gate_head] - s->out_shift) : s->out_len;
}

static void session_offer(void *reader, uint64_t seq, const uint8_t *msg, size_t len)
{
	struct gw_session *s = reader;
	int gated = seq >= s->login->durable_next;
	uint8_t *p;
	size_t start;

	if (s->state != GW_SESS_ACTIVE || s->send_seq != seq)
		return; /* behind: catch_up() reads it from the journal */
	if (gated && s->gate_n == GW_GATE)
		return; /* too many wait for the disk: catch_up() sends it later */
	if (!(p = gw_sess_out_room(s, SOUP_MAX_OUT)))
		return;
	start = s->out_len; /* after gw_sess_out_room, which may move the output */
	if (gw_sess_out_commit(s, soup_build_sequenced(p, SOUP_MAX_OUT, msg, (uint16_t)len)) < 0)
		return;
	if (gated) {
		unsigned i = (s->gate_head + s->gate_n++) % GW_GATE;

		s->gate_seq[i] = seq;
		s->gate_pos[i] = s->out_shift + start;
	}
	s->send_seq++;
	s->gw->st.out_msgs++;
}

static void session_wake(void *reader)
{
	struct gw_session *s = reader;

	if (s->state == GW_SESS_ACTIVE &&
	    (s->send_seq < gw_login_readable(s->login) || s->gate_n))
		mark_dirty(s);
}

/* End of Session to one client, then the connection closes (a revoked login). */
static void session_end(void *reader)
{
	struct gw_session *s = reader;

	if (s->state != GW_SESS_ACTIVE)
		return;
	OUT_PACKET(s, soup_build_end_of_session);
	gw_sess_finish(s, 0);
}

const struct gw_reader_ops gw_sess_reader_ops = { session_offer, session_wake, session_end };
/* EDGE_STALL when the packet is to be put back (see gw_sess_handle_ouch). */
static int handle_packet(struct gw_session *s, const struct soup_packet *pkt)
{
	if (pkt->type == SOUP_DEBUG)
		return EDGE_NOW;
	if (s->state == GW_SESS_LOGIN) {
		if (pkt->type == SOUP_LOGIN_REQUEST)
			gw_sess_handle_login(s, pkt);
		else
			gw_sess_protocol_error(s, "packet before login", 0);
		return EDGE_NOW;
	}
	switch (pkt->type) {
	case SOUP_UNSEQUENCED_DATA:
		return gw_sess_handle_ouch(s, pkt);
	case SOUP_CLIENT_HEARTBEAT:
		break;
	case SOUP_LOGOUT_REQUEST:
		s->gw->st.logouts++;
		gw_sess_finish(s, 1);
		break;
	default:
		gw_sess_protocol_error(s, "second Login Request", 0);
		break;
	}
	return EDGE_NOW;
}

/* Handles the packets the parser holds, until it needs more bytes or flow
 * control pauses the sessions (the rest waits in the buffer: see
 * gw_session_pause). 1 to go on reading, 0 when the session is closing or
 * paused. */
static int session_take(struct gw_session *s)
{
	struct soup_packet pkt;
	int rc = SOUP_E_AGAIN;

	while (s->state <= GW_SESS_ACTIVE && !s->gw->flow.paused && !s->login_wait &&
	       (rc = soup_parser_next(&s->parser, &pkt)) == SOUP_OK) {
		if (handle_packet(s, &pkt) == EDGE_STALL) {
			soup_parser_unread(&s->parser, &pkt);
			s->stalled = 1;
			ev_io_stop(s->gw->loop, &s->rio);
			return 0;
		}
	}
	if (s->state > GW_SESS_ACTIVE || s->gw->flow.paused || s->login_wait)
		return 0;
	if (rc != SOUP_E_AGAIN) {
		gw_sess_protocol_error(s, "bad packet", rc);
		return 0;
	}
	return 1;
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_session *s = SESS_OF(w, rio);

	(void)revents;
	s->gw->stages.now = mono_ns(); /* the commands' submit time */
	/* first what a pause left in the buffer */
	if (!session_take(s))
		return;
	for (int i = 0; i < GW_READS_PER_EVENT && s->state <= GW_SESS_ACTIVE; i++) {
		size_t room;
		uint8_t *space = soup_parser_space(&s->parser, &room);
		ssize_t n = room ? read(s->fd, space, room) : 0;

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0) {
			if (n < 0)
				log_ratelimited(&gw_rl, LOG_LVL_INFO, "session %s: %s", s->peer,
						strerror(errno));
			gw_sess_close(s, 0);
			return;
		}
		s->last_in = ev_now(loop);
		soup_parser_feed(&s->parser, (size_t)n);
		if (!session_take(s) || (size_t)n < room)
			return;
	}
}

/* Replays journalled messages the client has not had, as far as the output
 * buffer and the flushed part of the journal allow. */
static void catch_up(struct gw_session *s)
{
	struct gw_login *l = s->login;
	uint8_t rec[8 + OUCH_MAX_LEN + 16];

	for (int i = 0; i < GW_CATCHUP_PER_PUMP && s->send_seq < gw_login_readable(l); i++) {
		uint8_t *p = gw_sess_out_room(s, SOUP_MAX_OUT);
		int n, len;

		if (!p)
			return;
		len = gw_login_read(l, s->send_seq, rec, sizeof(rec));
		if (len < 9) {
			s->gw->st.journal_errors++;
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal record %" PRIu64 ": %s",
					l->cred.login, s->send_seq,
					len < 0 ? strerror(-len) : "too short");
			gw_sess_close(s, 0);
			return;
		}
		n = soup_build_sequenced(p, SOUP_MAX_OUT, rec + 8, (uint16_t)(len - 8));
		if (n < 0)
			return;
		s->out_len += (size_t)n;
		s->send_seq++;
		s->gw->st.replayed++;
	}
}

/* Writes what is buffered; keeps the write watcher on while anything is left
 * (unwritten bytes, or journal records still to replay). */
static void session_write(struct gw_session *s)
{
	struct gw *g = s->gw;

	size_t lim;

	if (s->state == GW_SESS_ACTIVE)
		catch_up(s);
	lim = out_limit(s);
	while (s->out_off < lim) {
		ssize_t n = write(s->fd, s->out + s->out_off, lim - s->out_off);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			log_ratelimited(&gw_rl, LOG_LVL_INFO, "session %s: write: %s", s->peer,
					strerror(errno));
			gw_sess_close(s, 0);
			return;
		}
		s->out_off += (size_t)n;
		s->last_out = s->last_progress = ev_now(g->loop);
	}
	if (s->out_off == s->out_len) {
		s->out_shift += s->out_off;
		s->out_off = s->out_len = 0;
	}
	if (s->state == GW_SESS_CLOSING && s->out_len == 0) {
		gw_sess_close(s, s->logout);
		return;
	}
	/* output waiting for the disk waits for the login's wake, not for the
	 * socket */
	if (s->out_off < out_limit(s) ||
	    (s->state == GW_SESS_ACTIVE && s->send_seq < gw_login_readable(s->login)))
		ev_io_start(g->loop, &s->wio);
	else
		ev_io_stop(g->loop, &s->wio);
}

static void on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	session_write(SESS_OF(w, wio));
}

/* One timer per session, re-armed for its nearest deadline: idle input,
 * heartbeat output, and output that makes no progress. */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw_session *s = SESS_OF(w, timer);
	struct gw *g = s->gw;
	ev_tstamp now = ev_now(loop), idle = (ev_tstamp)g->cfg.idle_timeout / 1e9;
	ev_tstamp hb = (ev_tstamp)g->cfg.heartbeat / 1e9, next;
	ev_tstamp login = (ev_tstamp)g->cfg.login_timeout / 1e9;

	(void)revents;
	/* while flow control leaves the sessions unread, or its Login Request
	 * is being verified or its rejection held back, a client's heartbeats
	 * wait in the kernel (or it waits for us): its silence is ours */
	if ((g->flow.paused || s->stalled || s->login_wait) && s->state <= GW_SESS_ACTIVE)
		s->last_in = now;
	if (s->state == GW_SESS_LOGIN && now - s->connected >= login) {
		/* whatever it sent: Debug packets or bytes that reset the
		 * idle clock do not hold a session that never logs in */
		g->st.login_timeouts++;
		log_ratelimited(&gw_rl, LOG_LVL_NOTICE,
				"session %s: not logged in within %.1fs: closed", s->peer,
				now - s->connected);
		gw_sess_close(s, 0);
		return;
	}
	if (now - s->last_in >= idle) {
		g->st.idle_drops++;
		log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: silent for %.1fs: dropped",
				s->peer, now - s->last_in);
		gw_sess_close(s, 0);
		return;
	}
	if (s->out_len > s->out_off && now - s->last_progress >= idle) {
		g->st.slow_drops++;
		log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: not reading: dropped",
				s->peer);
		gw_sess_close(s, 0);
		return;
	}
	if (s->state == GW_SESS_ACTIVE && now - s->last_out >= hb && s->out_len == 0 &&
	    OUT_PACKET(s, soup_build_server_heartbeat) == 0)
		s->last_out = now; /* counts as output from now on */
	next = s->last_in + idle;
	if (s->state == GW_SESS_LOGIN && s->connected + login < next)
		next = s->connected + login;
	if (s->state == GW_SESS_ACTIVE && s->out_len == 0 && s->last_out + hb < next)
		next = s->last_out + hb;
	if (s->out_len > s->out_off && s->last_progress + idle < next)
		next = s->last_progress + idle;
	ev_timer_set(w, next - now > 0.001 ? next - now : 0.001, 0.);
	ev_timer_start(loop, w);
}

void gw_session_pause(struct gw *g, int on)
{
	ev_tstamp now = ev_now(g->loop);

	for (struct gw_session *s = g->sess.list; s; s = s->next) {
		/* a login being answered reads again after login_resume */
		if (s->state > GW_SESS_ACTIVE || s->login_wait)
			continue;
		if (on) {
			ev_io_stop(g->loop, &s->rio);
		} else if (s->stalled) {
			/* its queue drains again; it reads once the queue has room */
			gw_sess_drain_resume(s);
		} else {
			if (s->tq.n)
				gw_sess_drain_resume(s); /* its queue drains again */
			/* what the client sent meanwhile waited on us, not on it */
			s->last_in = now;
			ev_io_start(g->loop, &s->rio);
			/* packets left in the buffer are taken at the next
			 * iteration, even if the socket has nothing more */
			ev_feed_event(g->loop, &s->rio, EV_READ);
		}
	}
}

/* Live sessions from IPv4 address addr (a walk of the list: once per
 * connection accepted, bounded by max_sessions). */
static uint64_t from_address(const struct gw *g, uint32_t addr)
{
	uint64_t n = 0;

	for (const struct gw_session *s = g->sess.list; s; s = s->next)
		n += s->addr == addr && s->state != GW_SESS_DEAD;
	return n;
}

/* s (zeroed, out_buffer bytes of output) takes the connection fd just
 * accepted from peer: it waits for a Login Request. */
static void session_start(struct ev_loop *loop, struct gw *g, struct gw_session *s, int fd,
			  const struct sockaddr_in *peer)
{
	(void)net_tcp_tune(fd);
	s->gw = g;
	s->fd = fd;
	s->out_cap = g->cfg.out_buffer;
	s->state = GW_SESS_LOGIN;
	s->last_in = s->last_out = s->last_progress = s->connected = ev_now(loop);
	s->addr = peer->sin_addr.s_addr;
	net_format_addr(peer, s->peer, sizeof(s->peer));
	soup_parser_init(&s->parser, s->in, sizeof(s->in), GW_MAX_IN_PAYLOAD, SOUP_FROM_CLIENT);
	ev_io_init(&s->rio, on_read, fd, EV_READ);
	ev_io_init(&s->wio, on_write, fd, EV_WRITE);
	ev_timer_init(&s->timer, on_timer, (ev_tstamp)g->cfg.heartbeat / 1e9, 0.);
	ev_timer_init(&s->drain, gw_sess_on_drain, 0., 0.);
	ev_timer_init(&s->answer, gw_sess_on_answer, 0., 0.);
	s->verify_id = -1;
	if (!g->flow.paused) /* else gw_session_pause() starts it */
		ev_io_start(loop, &s->rio);
	ev_timer_start(loop, &s->timer);
	s->next = g->sess.list;
	if (g->sess.list)
		g->sess.list->prev = s;
	g->sess.list = s;
	g->sess.n++;
	g->st.accepted++;
	log_debug("session %s: connected", s->peer);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw *g = w->data;

	(void)revents;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(g->sess.listen_fd, (struct sockaddr *)&peer, &plen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct gw_session *s;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_ratelimited(&gw_rl, LOG_LVL_WARNING, "accept: %s",
						strerror(errno));
			return;
		}
		if (from_address(g, peer.sin_addr.s_addr) >= g->cfg.max_sessions_per_address) {
			char a[32];

			g->st.address_refused++;
			net_format_addr(&peer, a, sizeof(a));
			log_ratelimited(&gw_rl, LOG_LVL_WARNING,
					"connection from %s refused: %" PRIu64
					" sessions from its address already (max_sessions_per_address)",
					a, g->cfg.max_sessions_per_address);
			close(fd);
			continue;
		}
		if (g->sess.n >= g->cfg.max_sessions || g->sess.stopping ||
		    !(s = calloc(1, sizeof(*s) + g->cfg.out_buffer))) {
			g->st.refused++;
			log_ratelimited(&gw_rl, LOG_LVL_WARNING,
					"connection refused: %zu sessions (max %" PRIu64 ")",
					g->sess.n, g->cfg.max_sessions);
			close(fd);
			continue;
		}
		session_start(loop, g, s, fd, &peer);
	}
}

void gw_session_flush_all(struct gw *g)
{
	while (g->sess.dirty) {
		struct gw_session *s = g->sess.dirty;

		g->sess.dirty = s->next_dirty;
		s->dirty = 0;
		s->next_dirty = NULL;
		if (s->state != GW_SESS_DEAD)
			session_write(s);
	}
}

void gw_session_reap(struct gw *g)
{
	while (g->sess.dead) {
		struct gw_session *s = g->sess.dead;

		g->sess.dead = s->next;
		if (s->dirty) {
			/* still on the dirty list: unlink it first */
			struct gw_session **pp = &g->sess.dirty;

			while (*pp && *pp != s)
				pp = &(*pp)->next_dirty;
			if (*pp)
				*pp = s->next_dirty;
		}
		throttle_queue_fini(&s->tq);
		free(s);
	}
}

/* Shutdown: End of Session to every logged-in client, one write attempt
 * each, then every connection is closed. */
void gw_session_end_all(struct gw *g)
{
	g->sess.stopping = 1;
	for (struct gw_session *s = g->sess.list; s; s = s->next)
		session_end(s);
	gw_session_flush_all(g);
	while (g->sess.list)
		gw_sess_close(g->sess.list, 0);
}

/* ---- the listener -------------------------------------------------------- */

int gw_session_listen(struct gw *g)
{
	struct sockaddr_in a;
	int rc = net_parse_addr(g->cfg.ouch_listen, &a);

	if (g->cfg.soup_session[0])
		snprintf(g->sess.soup_session, sizeof(g->sess.soup_session), "%.10s",
			 g->cfg.soup_session);
	else
		gw_default_session(g->sess.soup_session, time(NULL));
	if (rc < 0) {
		log_err("[gateway] ouch_listen \"%s\": %s", g->cfg.ouch_listen, strerror(-rc));
		return rc;
	}
	g->sess.listen_fd = net_tcp_listen(&a, 128);
	if (g->sess.listen_fd < 0) {
		log_err("listen on %s: %s", g->cfg.ouch_listen, strerror(-g->sess.listen_fd));
		return g->sess.listen_fd;
	}
	a.sin_port = htons((uint16_t)net_local_port(g->sess.listen_fd));
	net_format_addr(&a, g->sess.ouch_addr, sizeof(g->sess.ouch_addr));
	ev_io_init(&g->sess.listen_io, on_accept, g->sess.listen_fd, EV_READ);
	g->sess.listen_io.data = g;
	ev_io_start(g->loop, &g->sess.listen_io);
	return 0;
}

void gw_session_close_listener(struct gw *g)
{
	if (g->sess.listen_fd < 0)
		return;
	ev_io_stop(g->loop, &g->sess.listen_io);
	close(g->sess.listen_fd);
	g->sess.listen_fd = -1;
}

