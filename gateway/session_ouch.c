/* OUCH in, from a logged-in session (session.c holds the rest of the
 * session): each message is decoded, routed to a partition and submitted
 * to the command stream as a Command, now or once the login's throttle
 * lets it go.
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
#include <string.h>

#include "clock.h"
#include "gw_private.h"
#include "ouch.h"
#include "session_private.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */
/* the throttle's own: a flooding login does not hide the other warnings */
static struct log_ratelimit throttle_rl = LOG_RATELIMIT_INIT(1, 5);

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

/* m's command, for partition p, was submitted (rc: gw_cmd_submit's): one
 * too large for a datagram is refused, one not journalled ends the
 * session, a journalled one's new token is remembered (known: the order a
 * Replace names is). */
static void submitted(struct gw_session *s, const struct ouch_msg *m, uint32_t p, int known,
		      int rc)
{
	if (rc == -EMSGSIZE) {
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
		gw_sess_protocol_error(s, "command could not be journalled", 0);
		return;
	}
	if (m->type == OUCH_ENTER_ORDER)
		remember(s, m->u.enter.token, sizeof(m->u.enter.token), p, 1);
	else if (known)
		remember(s, m->u.replace.replacement_token, sizeof(m->u.replace.replacement_token),
			 p, 0);
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
		gw_sess_protocol_error(s, "unexpected OUCH type", 0);
		return;
	}
	submitted(s, m, c.partition, known, gw_cmd_submit(s->gw, &c));
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
		gw_sess_close(s, 0);
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
void gw_sess_on_drain(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw_session *s = SESS_OF(w, drain);
	struct gw *g = s->gw;

	(void)revents;
	g->stages.now = mono_ns(); /* the commands' submit time */
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
	if (s->state != GW_SESS_ACTIVE || g->flow.paused)
		return; /* gw_session_pause(g, 0) resumes it: gw_sess_drain_resume */
	gw_sess_drain_resume(s);
}

void gw_sess_drain_resume(struct gw_session *s)
{
	struct ev_loop *loop = s->gw->loop;

	if (s->tq.n)
		drain_arm(s);
	if (s->stalled && s->tq.n < s->tq.cap) {
		s->stalled = 0;
		s->last_in = ev_now(loop); /* it waited on us, not on its client */
		ev_io_start(loop, &s->rio);
		ev_feed_event(loop, &s->rio, EV_READ);
	}
}

void gw_sess_throttle_flush(struct gw_session *s)
{
	struct gw *g = s->gw;
	const uint8_t *p;
	size_t len;

	while ((p = throttle_queue_peek(&s->tq, &len)) != NULL) {
		struct ouch_msg m;

		if (ouch_decode_inbound(p, len, &m) == 0) {
			held(&s->login->throttle_rejected, &g->st.throttle_rejected);
			refuse(s, &m, OUCH_REJ_THROTTLED);
		}
		throttle_queue_pop(&s->tq);
	}
}

/* ---- a message in ------------------------------------------------------- */

/* Decodes one OUCH message and submits it, now or once the login's rate
 * allows. EDGE_STALL: put it back, read no more for now. */
int gw_sess_handle_ouch(struct gw_session *s, const struct soup_packet *pkt)
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
