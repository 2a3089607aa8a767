/* SoupBinTCP 4.0 server sessions: login, heartbeats both ways, OUCH in (to
 * the command stream, routed to a partition), sequenced data out (live, or
 * replayed from the login's journal), logout and end of session. Output is
 * gathered per session and written once per loop iteration.
 *
 * The client edge: each login's Enter and Replace Orders take a token of
 * its bucket ([gateway] login_rate, login_burst); without one a message
 * waits in the session's queue (login_queue), drained as tokens come on a
 * timer of its own, and past the queue an Enter or Replace is Rejected
 * 'o'. Cancels and Modifies take no token and are never rejected: they
 * keep their place behind what the client sent before, and a full queue
 * leaves them in the socket (TCP pushes back). A message the codec refuses
 * for an unprintable field is answered (Rejected, Cancel Reject) and the
 * session stays; one whose type or length is wrong ends the session. */
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
#include "wire.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */
/* the throttle's own: a flooding login does not hide the other warnings */
static struct log_ratelimit throttle_rl = LOG_RATELIMIT_INIT(1, 5);

#define SESS_OF(w, member) ((struct gw_session *)((char *)(w) - offsetof(struct gw_session, member)))
#define SOUP_MAX_OUT (3 + 8 + OUCH_MAX_LEN) /* one sequenced packet, with room */

static const char *const state_names[GW_SESS_STATE_MAX] = { "login", "active", "closing",
							     "dead" };

static void set_state(struct gw_session *s, enum gw_sess_state st)
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
static uint8_t *out_room(struct gw_session *s, size_t need)
{
	if (s->out_cap - s->out_len < need && s->out_off > 0) {
		s->out_shift += s->out_off;
		memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
		s->out_len -= s->out_off;
		s->out_off = 0;
	}
	return s->out_cap - s->out_len >= need ? s->out + s->out_len : NULL;
}

/* Commits a packet that a soup_build_* call wrote at out_room(); n is its
 * result. 0, or -ENOSPC when it did not fit. */
static int out_commit(struct gw_session *s, int n)
{
	if (n <= 0)
		return -ENOSPC;
	s->out_len += (size_t)n;
	mark_dirty(s);
	return 0;
}

#define OUT_PACKET(s, build, ...) \
	out_commit((s), out_room((s), SOUP_MAX_OUT) \
				? build((s)->out + (s)->out_len, SOUP_MAX_OUT, ##__VA_ARGS__) \
				: -ENOSPC)

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
static void session_close(struct gw_session *s, int logout)
{
	struct gw *g = s->gw;

	if (s->state == GW_SESS_DEAD)
		return;
	if (s->login) {
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
	set_state(s, GW_SESS_DEAD);
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

static void protocol_error(struct gw_session *s, const char *what, int err)
{
	s->gw->st.protocol_errors++;
	log_ratelimited(&gw_rl, LOG_LVL_WARNING, "session %s%s%s: %s%s%s: disconnecting", s->peer,
			s->login ? " " : "", s->login ? s->login->cred.login : "", what,
			err ? ": " : "", err ? soup_strerror(err) : "");
	session_close(s, 0);
}

/* Stops reading and closes once the output is written. */
static void session_finish(struct gw_session *s, int logout)
{
	s->logout = logout;
	ev_io_stop(s->gw->loop, &s->rio);
	set_state(s, GW_SESS_CLOSING);
	mark_dirty(s);
}

static void login_reject(struct gw_session *s, char reason)
{
	s->gw->st.login_rejects++;
	log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: login rejected (%c)", s->peer,
			reason);
	OUT_PACKET(s, soup_build_login_rejected, reason);
	session_finish(s, 0);
}

/* ---- the login's reader --------------------------------------------------- */

/* The login's records below this may be read from its journal and sent:
 * written (flushed) and, under fsync = disk, on disk. */
static uint64_t readable_next(const struct gw_login *l)
{
	return l->flushed_next < l->durable_next ? l->flushed_next : l->durable_next;
}

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
	if (!(p = out_room(s, SOUP_MAX_OUT)))
		return;
	start = s->out_len; /* after out_room, which may move the output */
	if (out_commit(s, soup_build_sequenced(p, SOUP_MAX_OUT, msg, (uint16_t)len)) < 0)
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
	    (s->send_seq < readable_next(s->login) || s->gate_n))
		mark_dirty(s);
}

/* End of Session to one client, then the connection closes (a revoked login). */
static void session_end(void *reader)
{
	struct gw_session *s = reader;

	if (s->state != GW_SESS_ACTIVE)
		return;
	OUT_PACKET(s, soup_build_end_of_session);
	session_finish(s, 0);
}

static const struct gw_reader_ops reader_ops = { session_offer, session_wake, session_end };

/* ---- login ------------------------------------------------------------- */

static struct log_ratelimit lock_rl = LOG_RATELIMIT_INIT(1, 5); /* lockout lines */

/* Reads again after a Login Request was answered. */
static void login_resume(struct gw_session *s)
{
	s->login_wait = 0;
	s->verify_id = -1;
	if (s->state > GW_SESS_ACTIVE || s->gw->flow.paused)
		return; /* closing, or gw_session_pause() starts it */
	ev_io_start(s->gw->loop, &s->rio);
	ev_feed_event(s->gw->loop, &s->rio, EV_READ); /* what came meanwhile */
}

static void on_answer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw_session *s = SESS_OF(w, answer);

	(void)loop;
	(void)revents;
	s->login_wait = 0;
	login_reject(s, s->reject_reason);
}

/* Login Rejected (reason) after delay ns; nothing is read meanwhile. */
static void reject_after(struct gw_session *s, char reason, uint64_t delay)
{
	if (delay == 0) {
		s->login_wait = 0;
		login_reject(s, reason);
		return;
	}
	s->login_wait = 1;
	s->reject_reason = reason;
	ev_io_stop(s->gw->loop, &s->rio);
	ev_timer_set(&s->answer, (ev_tstamp)delay / 1e9, 0.);
	ev_timer_start(s->gw->loop, &s->answer);
}

/* A login that failed (wrong password, no such login, revoked): counted
 * for its username at its address and for its address, answered after
 * the back-off. */
static void login_failed(struct gw_session *s, const struct gw_login *l)
{
	struct gw *g = s->gw;
	enum lockout_state locked;
	uint64_t delay = lockout_fail(g->lockout, s->addr, l ? gw_login_id(l) : LOCKOUT_UNKNOWN,
				      mono_ns(), &locked);

	g->st.login_failures++;
	log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: login %s not authorized%s",
			s->peer, s->req.username, !l ? " (no such login)" : "");
	if (locked != LOCKOUT_OPEN) {
		g->st.login_lockouts++;
		log_ratelimited(&lock_rl, LOG_LVL_WARNING,
				"session %s: login %s: %s locked out for %.0fs after repeated "
				"failures", s->peer, s->req.username,
				locked == LOCKOUT_ADDR ? "its address" : "this login at its address",
				(double)g->cfg.login_lockout / 1e9);
	}
	reject_after(s, SOUP_REJECT_NOT_AUTHORIZED, delay);
}

/* Logs in: the password was right. */
static void login_accept(struct gw_session *s, struct gw_login *l)
{
	struct gw *g = s->gw;

	lockout_success(g->lockout, s->addr, gw_login_id(l), mono_ns());
	if ((s->req.session[0] && strcmp(s->req.session, g->sess.soup_session) != 0) ||
	    l->rops || g->sess.stopping) {
		s->login_wait = 0;
		login_reject(s, SOUP_REJECT_SESSION_UNAVAILABLE);
		return;
	}
	/* SoupBinTCP: 0 asks for new messages only; n >= 1 replays from n. A
	 * number past the end means "from the next one". */
	s->send_seq = (s->req.seq == 0 || s->req.seq > l->next_seq) ? l->next_seq : s->req.seq;
	s->login = l;
	if (!l->bucket_set) {
		throttle_init(&l->bucket, (double)g->cfg.login_rate, (double)g->cfg.login_burst,
			      ev_now(g->loop));
		l->bucket_set = 1;
	}
	gw_login_attach(l, &reader_ops, s);
	g->st.logins++;
	set_state(s, GW_SESS_ACTIVE);
	OUT_PACKET(s, soup_build_login_accepted, g->sess.soup_session, s->send_seq);
	log_info("session %s: %s logged in, next seq %" PRIu64 " of %" PRIu64, s->peer,
		 l->cred.login, s->send_seq, l->next_seq);
	login_resume(s);
}

/* The password of s->req is right (ok) or not. */
static void login_verdict(struct gw_session *s, int ok)
{
	struct gw_login *l = gw_login_find(&s->gw->logins, (const uint8_t *)s->req.username,
					   strlen(s->req.username));

	if (ok && l && !l->revoked)
		login_accept(s, l);
	else
		login_failed(s, l);
}

void gw_session_verdict(struct gw *g, void *owner, int ok)
{
	struct gw_session *s = owner;

	(void)g;
	s->verify_id = -1;
	if (s->state == GW_SESS_LOGIN)
		login_verdict(s, ok);
}

/* A Login Request while its username at its address, or its address, is
 * locked out: rejected without its password being verified. */
static void login_locked(struct gw_session *s, enum lockout_state ls, uint64_t left)
{
	struct gw *g = s->gw;

	g->st.login_locked_out_rejects++;
	log_ratelimited(&lock_rl, LOG_LVL_NOTICE,
			"session %s: login %s rejected unverified: %s locked out for %.0fs more",
			s->peer, s->req.username,
			ls == LOCKOUT_ADDR ? "its address" : "this login at its address",
			(double)left / 1e9);
	reject_after(s, SOUP_REJECT_NOT_AUTHORIZED, g->cfg.login_backoff_max);
}

/* A Login Request: refused at once while locked out; a plaintext entry's
 * password compared in line; a hash (and a name that is no login,
 * against a dummy hash: the time of the answer tells nothing of which
 * logins exist) verified by verify.c's threads, nothing read meanwhile. */
static void handle_login(struct gw_session *s, const struct soup_packet *pkt)
{
	struct gw *g = s->gw;
	struct gw_login *l;
	char pw[GW_PASSWORD_LEN + 1];
	enum lockout_state ls;
	uint64_t left = 0;
	int rc = soup_decode_login(pkt, &s->req);

	if (rc < 0) {
		protocol_error(s, "bad Login Request", rc);
		return;
	}
	l = gw_login_find(&g->logins, (const uint8_t *)s->req.username, strlen(s->req.username));
	s->login_wait = 1; /* from here on, until it is answered */
	ev_io_stop(g->loop, &s->rio);
	ls = lockout_check(g->lockout, s->addr, l ? gw_login_id(l) : LOCKOUT_UNKNOWN, mono_ns(),
			   &left);
	if (ls != LOCKOUT_OPEN) {
		login_locked(s, ls, left);
		return;
	}
	if (l && !l->cred.hash[0]) {
		login_verdict(s, gw_cred_password_ok(&l->cred, s->req.password));
		return;
	}
	if (gw_password_normalise(s->req.password, pw) < 0) {
		login_verdict(s, 0); /* empty: no password is */
		return;
	}
	rc = gw_verify_submit(g, l ? l->cred.hash : NULL, pw, s);
	explicit_bzero(pw, sizeof(pw));
	if (rc < 0) {
		g->st.login_verify_busy++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"session %s: login %s: %" PRIu64 " logins being verified already "
				"(max_pending_logins): closed", s->peer, s->req.username,
				g->cfg.max_pending_logins);
		session_close(s, 0);
		return;
	}
	s->verify_id = rc;
}

static void put_enter(Lockstep__NewOrder *o, const struct ouch_enter_order *e)
{
	o->token = (char *)e->token;
	o->side = (uint8_t)e->side;
	o->shares = e->shares;
	o->symbol = (char *)e->stock;
	o->price = e->price;
	o->tif = e->tif;
	o->firm = (char *)e->firm;
	o->display = (uint8_t)e->display;
	o->capacity = (uint8_t)e->capacity;
	o->min_qty = e->min_qty;
	o->iso = (uint8_t)e->iso;
	o->cross_type = (uint8_t)e->cross_type;
	o->customer_type = (uint8_t)e->customer_type;
}

static void put_replace(Lockstep__ReplaceOrder *o, const struct ouch_replace_order *r)
{
	o->existing_token = (char *)r->existing_token;
	o->replacement_token = (char *)r->replacement_token;
	o->shares = r->shares;
	o->price = r->price;
	o->tif = r->tif;
	o->display = (uint8_t)r->display;
	o->iso = (uint8_t)r->iso;
	o->min_qty = r->min_qty;
}

/* A Cancel for the order in partition p (< 0: unknown, partition 0). */
static void put_cancel(Lockstep__Command *c, int p, Lockstep__CancelOrder *o,
		       struct ouch_cancel_order *m)
{
	c->partition = p >= 0 ? (uint32_t)p : 0;
	o->token = m->token;
	o->shares = m->shares;
	c->body_case = LOCKSTEP__COMMAND__BODY_CANCEL;
	c->cancel = o;
}

/* A Modify for the order in partition p (< 0: unknown, partition 0). */
static void put_modify(Lockstep__Command *c, int p, Lockstep__ModifyOrder *o,
		       struct ouch_modify_order *m)
{
	c->partition = p >= 0 ? (uint32_t)p : 0;
	o->token = m->token;
	o->side = (uint8_t)m->side;
	o->shares = m->shares;
	c->body_case = LOCKSTEP__COMMAND__BODY_MODIFY;
	c->modify = o;
}

/* The gateway's own answer m (its timestamp set here, from the loop's
 * clock), journalled for the login like a matcher's. 0 or -1. */
static int answer_local(struct gw_session *s, struct ouch_msg *m, uint64_t *timestamp)
{
	struct gw *g = s->gw;
	uint8_t buf[OUCH_MAX_LEN];
	int n;

	/* as a matcher: ns of the UTC day */
	*timestamp = (uint64_t)(ev_now(g->loop) * 1e9) % (86400ull * 1000000000ull);
	n = ouch_encode_outbound(m, buf, sizeof(buf));
	if (n <= 0 || gw_login_append(&g->logins, s->login, GW_TAG((uint64_t)GW_TAG_LOCAL, 0), buf,
				      (size_t)n) < 0)
		return -1;
	g->st.local_rejects++;
	return 0;
}

/* Rejected (token: NUL-terminated, at most OUCH_TOKEN_LEN) with reason. */
static void reject_token(struct gw_session *s, const char *token, char reason)
{
	struct ouch_msg m = { .type = OUCH_REJECTED };

	snprintf(m.u.rejected.token, sizeof(m.u.rejected.token), "%s", token);
	m.u.rejected.reason = reason;
	answer_local(s, &m, &m.u.rejected.timestamp);
}

/* Cancel Reject: the order that token names was not changed. */
static void cancel_reject(struct gw_session *s, const char *token)
{
	struct ouch_msg m = { .type = OUCH_CANCEL_REJECT };

	snprintf(m.u.cancel_reject.token, sizeof(m.u.cancel_reject.token), "%s", token);
	answer_local(s, &m, &m.u.cancel_reject.timestamp);
}

/* The gateway refuses inbound message m: an Enter is Rejected, a Replace
 * Rejected under its replacement token (the order it names is left as it
 * was: the gateway does not hold it), a Cancel or Modify gets a Cancel
 * Reject. */
static void refuse(struct gw_session *s, const struct ouch_msg *m, char reason)
{
	switch (m->type) {
	case OUCH_ENTER_ORDER:
		reject_token(s, m->u.enter.token, reason);
		break;
	case OUCH_REPLACE_ORDER:
		reject_token(s, m->u.replace.replacement_token, reason);
		break;
	case OUCH_CANCEL_ORDER:
		cancel_reject(s, m->u.cancel.token);
		break;
	default:
		cancel_reject(s, m->u.modify.token);
		break;
	}
}

static void reject_enter(struct gw_session *s, const struct ouch_enter_order *e, char reason)
{
	reject_token(s, e->token, reason);
}

/* The partition of an Enter Order, or -1 when the gateway rejected it. A
 * token this login used before goes where it went then, so that the
 * matcher there ignores the duplicate (as one partition always did); a new
 * one goes to its symbol's partition and is remembered once the command is
 * journalled (see remember()). */
static int enter_partition(struct gw_session *s, const struct ouch_enter_order *e)
{
	struct gw *g = s->gw;
	int p;

	if (g->n_parts > 1) {
		p = gw_route_token(g->routes, gw_login_id(s->login), e->token, sizeof(e->token));
		if (p >= 0)
			return p;
	}
	p = gw_route_symbol(g->routes, e->stock, sizeof(e->stock));
	if (p < 0) {
		/* No partition trades it: partition 0's matcher rejects it (invalid
		 * stock), on the tape like every other answer (DESIGN.md, invariant
		 * 2); the gateway does not answer for a matcher. */
		g->st.unrouted_symbols++;
		log_ratelimited(&gw_rl, LOG_LVL_INFO, "session %s %s: %.8s: no partition trades it: "
				"sent to partition 0 to be rejected",
				s->peer, s->login->cred.login, e->stock);
		p = 0;
	}
	if (g->n_parts > 1 && gw_route_full(g->routes)) {
		g->st.tokens_full++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "token table full ([gateway] max_tokens "
				"%" PRIu64 " live orders): Enter Order rejected", g->cfg.max_tokens);
		reject_enter(s, e, OUCH_REJ_OTHER);
		return -1;
	}
	return p;
}

/* The partition remembered for the order that `token` names, or -ENOENT
 * (its command then goes to partition 0, whose matcher answers as for any
 * unknown token). One partition: 0. */
static int token_partition(struct gw_session *s, const char *token, size_t len)
{
	struct gw *g = s->gw;

	if (g->n_parts == 1)
		return 0;
	return gw_route_token(g->routes, gw_login_id(s->login), token, len);
}

/* After a command is journalled: its new token lives in its partition
 * (enter: pending its answer; else a replacement token, remembered dead
 * until its Replaced, since the matcher may ignore the Replace). */
static void remember(struct gw_session *s, const char *token, size_t len, unsigned p, int enter)
{
	struct gw *g = s->gw;
	uint32_t id = gw_login_id(s->login);

	if (g->n_parts > 1 && (enter ? gw_route_enter(g->routes, id, token, len, p)
				     : gw_route_maybe(g->routes, id, token, len, p)) == -ENOSPC) {
		g->st.tokens_full++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "token table full ([gateway] max_tokens "
				"%" PRIu64 " live orders): %s's token %.14s not remembered",
				g->cfg.max_tokens, s->login->cred.login, token);
	}
}

/* Routes one decoded OUCH message and submits it as a Command. Values are
 * not judged here: the matcher accepts or rejects, on the tape; only an
 * Enter Order that no partition can take (the token table full) and a
 * command too large for a datagram are refused here. */
static void submit_ouch(struct gw_session *s, struct ouch_msg *m)
{
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__NewOrder no = LOCKSTEP__NEW_ORDER__INIT;
	Lockstep__ReplaceOrder ro = LOCKSTEP__REPLACE_ORDER__INIT;
	Lockstep__CancelOrder co = LOCKSTEP__CANCEL_ORDER__INIT;
	Lockstep__ModifyOrder mo = LOCKSTEP__MODIFY_ORDER__INIT;
	int rc, known = 0;

	c.user = s->login->cred.login;
	c.firm = s->login->cred.firm;
	switch (m->type) {
	case OUCH_ENTER_ORDER:
		rc = enter_partition(s, &m->u.enter);
		if (rc < 0)
			return;
		c.partition = (uint32_t)rc;
		put_enter(&no, &m->u.enter);
		c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
		c.new_order = &no;
		break;
	case OUCH_REPLACE_ORDER:
		/* the replacement token lives where the order does; a replace
		 * of an unknown order creates no token */
		rc = token_partition(s, m->u.replace.existing_token,
				     sizeof(m->u.replace.existing_token));
		known = rc >= 0;
		c.partition = known ? (uint32_t)rc : 0;
		put_replace(&ro, &m->u.replace);
		c.body_case = LOCKSTEP__COMMAND__BODY_REPLACE;
		c.replace = &ro;
		break;
	case OUCH_CANCEL_ORDER:
		rc = token_partition(s, m->u.cancel.token, sizeof(m->u.cancel.token));
		put_cancel(&c, rc, &co, &m->u.cancel);
		break;
	case OUCH_MODIFY_ORDER:
		rc = token_partition(s, m->u.modify.token, sizeof(m->u.modify.token));
		put_modify(&c, rc, &mo, &m->u.modify);
		break;
	default:
		protocol_error(s, "unexpected OUCH type", 0);
		return;
	}
	if ((rc = gw_cmd_submit(s->gw, &c)) == -EMSGSIZE) {
		/* unreachable with OUCH 4.2's fixed sizes and a max_datagram
		 * that the configuration check let through */
		s->gw->st.oversize_rejects++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "session %s %s: command larger than a "
				"datagram holds (%zu bytes): refused", s->peer,
				s->login->cred.login, gw_cmd_room(s->gw));
		refuse(s, m, OUCH_REJ_TOO_LARGE);
		return;
	}
	if (rc < 0) {
		protocol_error(s, "command could not be journalled", 0);
		return;
	}
	if (m->type == OUCH_ENTER_ORDER)
		remember(s, m->u.enter.token, sizeof(m->u.enter.token), c.partition, 1);
	else if (known)
		remember(s, m->u.replace.replacement_token, sizeof(m->u.replace.replacement_token),
			 c.partition, 0);
}

/* A message the codec refused (rc): answered when it is a known type of
 * the right length with an unprintable field (Rejected with the field's
 * reason, or Cancel Reject), else the session ends. */
static void handle_malformed(struct gw_session *s, const struct soup_packet *pkt, int rc)
{
	struct ouch_msg m = { 0 };
	char reason = OUCH_REJ_OTHER, token[OUCH_TOKEN_LEN + 1];

	s->gw->st.ouch_malformed++;
	if (rc != OUCH_E_FIELD || ouch_inbound_bad_field(pkt->payload, pkt->len, &reason, token) < 0) {
		s->gw->st.protocol_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"session %s %s: undecodable OUCH (%s, type 0x%02x, %u bytes): "
				"disconnecting", s->peer, s->login->cred.login, ouch_strerror(rc),
				pkt->len ? pkt->payload[0] : 0, pkt->len);
		session_close(s, 0);
		return;
	}
	s->gw->st.malformed_rejects++;
	log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s %s: OUCH '%c' with an unprintable "
			"field: refused (%c, token %s)", s->peer, s->login->cred.login,
			pkt->payload[0], reason, token);
	m.type = (char)pkt->payload[0];
	/* refuse() reads the token where each type keeps it */
	if (m.type == OUCH_REPLACE_ORDER)
		memcpy(m.u.replace.replacement_token, token, sizeof(token));
	else
		memcpy(m.u.enter.token, token, sizeof(token));
	_Static_assert(offsetof(struct ouch_msg, u.enter.token) ==
				       offsetof(struct ouch_msg, u.cancel.token) &&
			       offsetof(struct ouch_msg, u.enter.token) ==
				       offsetof(struct ouch_msg, u.modify.token),
		       "one place for the token");
	refuse(s, &m, reason);
}

/* ---- the throttle ---------------------------------------------------------- */

enum { EDGE_NOW, EDGE_HELD, EDGE_STALL };

/* Whether a message takes a token: Enter and Replace do. A Cancel or
 * Modify (which only reduces) is never charged, so that a throttled
 * client can always pull its orders. */
static int charged(char type)
{
	return type == OUCH_ENTER_ORDER || type == OUCH_REPLACE_ORDER;
}

/* Arms the drain for when the login's next token is there (at least
 * GW_DRAIN_MIN from now: a wakeup takes what came meanwhile). */
static void drain_arm(struct gw_session *s)
{
	struct ev_loop *loop = s->gw->loop;
	double w;

	if (ev_is_active(&s->drain))
		return;
	w = throttle_wait(&s->login->bucket, ev_now(loop));
	ev_timer_set(&s->drain, w > GW_DRAIN_MIN ? w : GW_DRAIN_MIN, 0.);
	ev_timer_start(loop, &s->drain);
}

/* A held message: counted for its login and in all. */
static void held(uint64_t *login_count, uint64_t *total)
{
	(*login_count)++;
	(*total)++;
}

/* EDGE_NOW when m (pkt's payload) may go at once: nothing waits before it
 * and it has its token. Else it is queued (EDGE_HELD), Rejected with the
 * queue full (EDGE_HELD), or, a Cancel or Modify with the queue full, left
 * for later (EDGE_STALL: the caller puts it back and stops reading). */
static int edge_throttle(struct gw_session *s, const struct soup_packet *pkt,
			 const struct ouch_msg *m)
{
	struct gw *g = s->gw;
	struct gw_login *l = s->login;

	if (s->tq.n == 0 && (!charged(m->type) || throttle_take(&l->bucket, ev_now(g->loop))))
		return EDGE_NOW;
	if (!s->tq.slot && g->cfg.login_queue &&
	    throttle_queue_init(&s->tq, (uint32_t)g->cfg.login_queue) < 0)
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "session %s %s: no memory for its queue",
				s->peer, l->cred.login);
	if (throttle_queue_push(&s->tq, pkt->payload, pkt->len) == 0) {
		held(&l->throttle_delayed, &g->st.throttle_delayed);
		drain_arm(s);
		return EDGE_HELD;
	}
	if (!charged(m->type))
		return EDGE_STALL;
	held(&l->throttle_rejected, &g->st.throttle_rejected);
	log_ratelimited(&throttle_rl, LOG_LVL_NOTICE, "session %s %s: over its rate (login_rate "
			"%" PRIu64 "/s, %u queued): '%c' rejected", s->peer, l->cred.login,
			g->cfg.login_rate, s->tq.n, m->type);
	refuse(s, m, OUCH_REJ_THROTTLED);
	return EDGE_HELD;
}

/* Takes queued messages as the login's tokens allow, GW_DRAIN_PER_WAKE at
 * most; then waits for more tokens, and reads again a session that a
 * Cancel stalled once the queue has room. */
static void on_drain(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw_session *s = SESS_OF(w, drain);
	struct gw *g = s->gw;

	(void)revents;
	for (int i = 0; i < GW_DRAIN_PER_WAKE && s->state == GW_SESS_ACTIVE && !g->flow.paused;
	     i++) {
		size_t len;
		const uint8_t *p = throttle_queue_peek(&s->tq, &len);
		struct ouch_msg m;

		if (!p)
			break;
		if (ouch_decode_inbound(p, len, &m) < 0) { /* it decoded when queued */
			throttle_queue_pop(&s->tq);
			continue;
		}
		if (charged(m.type) && !throttle_take(&s->login->bucket, ev_now(loop)))
			break;
		throttle_queue_pop(&s->tq);
		submit_ouch(s, &m);
	}
	if (s->state != GW_SESS_ACTIVE)
		return;
	if (s->tq.n)
		drain_arm(s);
	if (s->stalled && s->tq.n < s->tq.cap && !g->flow.paused) {
		s->stalled = 0;
		ev_io_start(loop, &s->rio);
		ev_feed_event(loop, &s->rio, EV_READ);
	}
}

/* Decodes one OUCH message and submits it, now or once the login's rate
 * allows. EDGE_STALL: put it back, read no more for now. */
static int handle_ouch(struct gw_session *s, const struct soup_packet *pkt)
{
	struct ouch_msg m;
	int rc = ouch_decode_inbound(pkt->payload, pkt->len, &m);

	if (rc < 0) {
		handle_malformed(s, pkt, rc);
		return EDGE_HELD;
	}
	rc = edge_throttle(s, pkt, &m);
	if (rc == EDGE_STALL)
		return rc;
	s->gw->st.ouch_in++;
	if (rc == EDGE_NOW)
		submit_ouch(s, &m);
	return rc;
}

/* EDGE_STALL when the packet is to be put back (see handle_ouch). */
static int handle_packet(struct gw_session *s, const struct soup_packet *pkt)
{
	if (pkt->type == SOUP_DEBUG)
		return EDGE_NOW;
	if (s->state == GW_SESS_LOGIN) {
		if (pkt->type == SOUP_LOGIN_REQUEST)
			handle_login(s, pkt);
		else
			protocol_error(s, "packet before login", 0);
		return EDGE_NOW;
	}
	switch (pkt->type) {
	case SOUP_UNSEQUENCED_DATA:
		return handle_ouch(s, pkt);
	case SOUP_CLIENT_HEARTBEAT:
		break;
	case SOUP_LOGOUT_REQUEST:
		s->gw->st.logouts++;
		session_finish(s, 1);
		break;
	default:
		protocol_error(s, "second Login Request", 0);
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
		protocol_error(s, "bad packet", rc);
		return 0;
	}
	return 1;
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_session *s = SESS_OF(w, rio);

	(void)revents;
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
			session_close(s, 0);
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

	for (int i = 0; i < GW_CATCHUP_PER_PUMP && s->send_seq < readable_next(l); i++) {
		uint8_t *p = out_room(s, SOUP_MAX_OUT);
		int n, len;

		if (!p)
			return;
		len = gw_login_read(l, s->send_seq, rec, sizeof(rec));
		if (len < 9) {
			s->gw->st.journal_errors++;
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal record %" PRIu64 ": %s",
					l->cred.login, s->send_seq,
					len < 0 ? strerror(-len) : "too short");
			session_close(s, 0);
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
			session_close(s, 0);
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
		session_close(s, s->logout);
		return;
	}
	/* output waiting for the disk waits for the login's wake, not for the
	 * socket */
	if (s->out_off < out_limit(s) ||
	    (s->state == GW_SESS_ACTIVE && s->send_seq < readable_next(s->login)))
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
	/* while flow control leaves the sessions unread, a client's
	 * heartbeats wait in the kernel: its silence is ours */
	if ((g->flow.paused || s->stalled) && s->state <= GW_SESS_ACTIVE)
		s->last_in = now;
	if (s->state == GW_SESS_LOGIN && now - s->connected >= login) {
		/* whatever it sent: Debug packets or bytes that reset the
		 * idle clock do not hold a session that never logs in */
		g->st.login_timeouts++;
		log_ratelimited(&gw_rl, LOG_LVL_NOTICE,
				"session %s: not logged in within %.1fs: closed", s->peer,
				now - s->connected);
		session_close(s, 0);
		return;
	}
	if (now - s->last_in >= idle) {
		g->st.idle_drops++;
		log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: silent for %.1fs: dropped",
				s->peer, now - s->last_in);
		session_close(s, 0);
		return;
	}
	if (s->out_len > s->out_off && now - s->last_progress >= idle) {
		g->st.slow_drops++;
		log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: not reading: dropped",
				s->peer);
		session_close(s, 0);
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
		/* its drain reads it again; a login being answered, after login_resume */
		if (s->state > GW_SESS_ACTIVE || s->stalled || s->login_wait)
			continue;
		if (on) {
			ev_io_stop(g->loop, &s->rio);
		} else {
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
		(void)net_tcp_tune(fd);
		s->gw = g;
		s->fd = fd;
		s->out_cap = g->cfg.out_buffer;
		s->state = GW_SESS_LOGIN;
		s->last_in = s->last_out = s->last_progress = s->connected = ev_now(loop);
		s->addr = peer.sin_addr.s_addr;
		net_format_addr(&peer, s->peer, sizeof(s->peer));
		soup_parser_init(&s->parser, s->in, sizeof(s->in), GW_MAX_IN_PAYLOAD,
				 SOUP_FROM_CLIENT);
		ev_io_init(&s->rio, on_read, fd, EV_READ);
		ev_io_init(&s->wio, on_write, fd, EV_WRITE);
		ev_timer_init(&s->timer, on_timer, (ev_tstamp)g->cfg.heartbeat / 1e9, 0.);
		ev_timer_init(&s->drain, on_drain, 0., 0.);
		ev_timer_init(&s->answer, on_answer, 0., 0.);
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
		session_close(g->sess.list, 0);
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
