/* What the client sessions' files share: session.c (the core: state,
 * output, close, reading and writing, the listener), session_login.c (the
 * Login Request) and session_ouch.c (OUCH in, and the login's throttle).
 * Included by those three only; the rest of the gateway sees gw_private.h. */
#ifndef LOCKSTEP_GW_SESSION_PRIVATE_H
#define LOCKSTEP_GW_SESSION_PRIVATE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_private.h"
#include "ouch.h"
#include "soupbin.h"

#define SESS_OF(w, member) ((struct gw_session *)((char *)(w) - offsetof(struct gw_session, member)))
#define SOUP_MAX_OUT (3 + 8 + OUCH_MAX_LEN) /* one sequenced packet, with room */

/* What became of an inbound packet: handled (EDGE_NOW), held or answered
 * by the throttle (EDGE_HELD), or to be put back, read no more for now
 * (EDGE_STALL). */
enum { EDGE_NOW, EDGE_HELD, EDGE_STALL };

/* session.c: the core */
/* Moves s to st, logged at debug level. */
void gw_sess_set_state(struct gw_session *s, enum gw_sess_state st);
/* Room for `need` more bytes at the end of s's output buffer (compacts
 * it), or NULL. */
uint8_t *gw_sess_out_room(struct gw_session *s, size_t need);
/* Commits a packet that a soup_build_* call wrote at gw_sess_out_room();
 * n is its result. 0, or -ENOSPC when it did not fit. */
int gw_sess_out_commit(struct gw_session *s, int n);
/* Appends one packet built by build(buf, cap, ...) to s's output: 0, or
 * -ENOSPC. */
#define OUT_PACKET(s, build, ...) \
	gw_sess_out_commit((s), gw_sess_out_room((s), SOUP_MAX_OUT) \
				? build((s)->out + (s)->out_len, SOUP_MAX_OUT, ##__VA_ARGS__) \
				: -ENOSPC)
/* Closes the connection at once (logout: after a Logout Request); s is
 * freed by gw_session_reap(). Accepts a closed session. */
void gw_sess_close(struct gw_session *s, int logout);
/* Counts and logs a protocol error (err: a SOUP_E_*, or 0), then closes. */
void gw_sess_protocol_error(struct gw_session *s, const char *what, int err);
/* Stops reading; s closes once its output is written. */
void gw_sess_finish(struct gw_session *s, int logout);
/* What a logged-in session is told by its login (gw_login_attach). */
extern const struct gw_reader_ops gw_sess_reader_ops;

/* session_login.c */
/* A Login Request (pkt) from a session in GW_SESS_LOGIN. */
void gw_sess_handle_login(struct gw_session *s, const struct soup_packet *pkt);
/* s->answer's callback: a held-back Login Rejected is sent. */
void gw_sess_on_answer(struct ev_loop *loop, ev_timer *w, int revents);

/* session_ouch.c */
/* One OUCH message (pkt) from a logged-in session: EDGE_*. */
int gw_sess_handle_ouch(struct gw_session *s, const struct soup_packet *pkt);
/* s->drain's callback: the throttle's queue is taken as tokens allow;
 * none while flow control holds the gateway (gw_session_pause). */
void gw_sess_on_drain(struct ev_loop *loop, ev_timer *w, int revents);
/* Flow control let go, or a drain ended: the queue drains again, and a
 * session a Cancel stalled reads again once the queue has room. */
void gw_sess_drain_resume(struct gw_session *s);
/* A session that ends (s->login still set): what its queue still holds
 * is answered, Rejected 'o' or Cancel Reject, into its login's journal
 * (its client reads them when it logs in again), and counted. */
void gw_sess_throttle_flush(struct gw_session *s);

#endif
