/* A session's Login Request (session.c holds the rest of the session):
 * refused at once while its username at its address, or its address, is
 * locked out (lockout.c); a hash (and a name that is no login, against a
 * dummy hash) verified by verify.c's threads, nothing read meanwhile; a
 * plaintext entry's password compared in line, its verdict given when a
 * dummy verification ends. A name that is no login has a lockout entry of
 * its own, as a login has: whatever the name, the answer takes the same
 * time and counts the same. A failure is answered after its back-off; the
 * verdict logs the session in or rejects it. */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "clock.h"
#include "gw_private.h"
#include "session_private.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */
static struct log_ratelimit lock_rl = LOG_RATELIMIT_INIT(1, 5); /* lockout lines */

/* Login Rejected (reason), then the session closes once it is written. */
static void login_reject(struct gw_session *s, char reason)
{
	s->gw->st.login_rejects++;
	log_ratelimited(&gw_rl, LOG_LVL_NOTICE, "session %s: login rejected (%c)", s->peer,
			reason);
	OUT_PACKET(s, soup_build_login_rejected, reason);
	gw_sess_finish(s, 0);
}

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

void gw_sess_on_answer(struct ev_loop *loop, ev_timer *w, int revents)
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

/* The lockout table's login of a Login Request: its login's id, or for a
 * name that is no login a keyed hash of it (above every id, never
 * LOCKOUT_ANY or LOCKOUT_UNKNOWN), so that no name shares another's entry. */
static uint32_t lockout_login(const struct gw_session *s, const struct gw_login *l)
{
	char name[sizeof(s->req.username)];
	size_t n = strlen(s->req.username);

	if (l)
		return gw_login_id(l);
	for (size_t i = 0; i <= n; i++) /* SoupBinTCP names have no case */
		name[i] = s->req.username[i] >= 'a' && s->req.username[i] <= 'z'
				  ? (char)(s->req.username[i] - 'a' + 'A')
				  : s->req.username[i];
	return 0x80000000u | (uint32_t)(XXH3_64bits_withSeed(name, n, s->gw->unknown_seed) %
					0x7ffffffeu);
}

/* A login that failed (wrong password, no such login, revoked): counted
 * for its username at its address and for its address, answered after
 * the back-off. */
static void login_failed(struct gw_session *s, const struct gw_login *l)
{
	struct gw *g = s->gw;
	enum lockout_state locked;
	uint64_t delay = lockout_fail(g->lockout, s->addr, lockout_login(s, l), mono_ns(), &locked);

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
	gw_login_attach(l, &gw_sess_reader_ops, s);
	g->st.logins++;
	gw_sess_set_state(s, GW_SESS_ACTIVE);
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
	if (s->plain) /* the dummy's time has passed: the plaintext's verdict */
		ok = s->plain_ok;
	s->plain = 0;
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

/* A Login Request: refused at once while locked out; a hash (and a name
 * that is no login, against a dummy hash: the time of the answer tells
 * nothing of which logins exist) verified by verify.c's threads, nothing
 * read meanwhile; a plaintext entry's password (or an empty one) decided
 * in line and answered after a dummy verification, for the same reason. */
void gw_sess_handle_login(struct gw_session *s, const struct soup_packet *pkt)
{
	struct gw *g = s->gw;
	struct gw_login *l;
	char pw[CREDS_PASSWORD_LEN + 1];
	enum lockout_state ls;
	uint64_t left = 0;
	int empty, rc = soup_decode_login(pkt, &s->req);

	if (rc < 0) {
		gw_sess_protocol_error(s, "bad Login Request", rc);
		return;
	}
	l = gw_login_find(&g->logins, (const uint8_t *)s->req.username, strlen(s->req.username));
	s->login_wait = 1; /* from here on, until it is answered */
	ev_io_stop(g->loop, &s->rio);
	ls = lockout_check(g->lockout, s->addr, lockout_login(s, l), mono_ns(), &left);
	if (ls != LOCKOUT_OPEN) {
		login_locked(s, ls, left);
		return;
	}
	/* an empty password is none; it and a plaintext entry are decided here
	 * and answered when a verification of the dummy hash ends */
	empty = creds_password_normalise(s->req.password, pw) < 0;
	if (empty)
		pw[0] = '\0';
	s->plain = empty || (l && !l->cred.hash[0]);
	s->plain_ok = !empty && l && !l->cred.hash[0] &&
		      creds_password_ok(&l->cred, s->req.password);
	rc = gw_verify_submit(g, l && !s->plain ? l->cred.hash : NULL, pw, s);
	explicit_bzero(pw, sizeof(pw));
	if (rc < 0) {
		g->st.login_verify_busy++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"session %s: login %s: %" PRIu64 " logins being verified already "
				"(max_pending_logins): closed", s->peer, s->req.username,
				g->cfg.max_pending_logins);
		gw_sess_close(s, 0);
		return;
	}
	s->verify_id = rc;
}
