/* The service manager's notification protocol (sd_notify(3)), spoken
 * directly rather than through libsystemd: one AF_UNIX datagram of
 * newline-separated VAR=VALUE lines to the socket named by $NOTIFY_SOCKET
 * (a path, or "@name" for the abstract namespace). Why not libsystemd: the
 * protocol is documented and stable, lockstep needs six messages of it, and
 * the library would be one more dependency for every build and host (also
 * those without systemd); libsystemd's sd_notify() also opens and closes a
 * socket on every call, where this keeps one. Without $NOTIFY_SOCKET every
 * call is a no-op that succeeds, so the daemons run the same by hand.
 * Nothing here allocates; a send is one non-blocking sendto().
 *
 * struct notifier ties it to a daemon's event loop: READY=1 once the node's
 * own STATUS (its control handler, through ctl_self_call()) says it has
 * joined, STATUS= lines when role, state, term or positions change (polled
 * every 100 ms until ready, then once a second), WATCHDOG=1 from an ev_timer
 * at half $WATCHDOG_USEC (a hung loop stops feeding it), RELOADING=1 and
 * STOPPING=1. */
#ifndef LOCKSTEP_NOTIFY_H
#define LOCKSTEP_NOTIFY_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "lockstep.pb-c.h"

#define NOTIFY_MAX 512 /* longest message notify_sendf() formats */

/* Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID and opens the
 * socket. Returns 1 when a service manager listens, 0 when none does (not
 * an error), or a negative errno (a malformed $NOTIFY_SOCKET: -EINVAL,
 * -ENAMETOOLONG, -EAFNOSUPPORT; socket() failed). Idempotent. */
int notify_open(void);
void notify_close(void);
int notify_enabled(void);

/* Sends one message (len bytes, no NUL needed). 0 when sent or when no
 * manager listens; -EAGAIN when its queue is full (try again later). */
int notify_send(const char *msg, size_t len);
int notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* $WATCHDOG_USEC when it is meant for this process, else 0. */
uint64_t notify_watchdog_usec(void);

/* 1 when a node of `role` in `state` has joined its cluster: a sequencer
 * that is the primary or knows it (primary, standby, follower), a matcher
 * that is live (caught up to the commit position), a gateway that is ready
 * (the tape and the execution stream are live). */
int notify_state_ready(const char *role, const char *state);

/* Formats the STATUS= text of a node ("matcher live term=3 seq=120
 * commit=120 partition=0"); returns its length (truncated to cap - 1). */
size_t notify_format_status(char *out, size_t cap, const Lockstep__ControlReply *r);

struct notifier {
	struct ev_loop *loop;
	ev_timer watchdog; /* repeats at half $WATCHDOG_USEC */
	ev_timer status; /* 100 ms until ready, then 1 s */
	int started;
	int ready; /* READY=1 was sent */
	int stopping; /* STOPPING=1 was sent */
	int resend; /* the next poll sends STATUS= even if unchanged */
	uint64_t last_seq; /* seq at the last STATUS= (progress while starting) */
	ev_tstamp last_sent; /* when the last STATUS= went */
	char last[NOTIFY_MAX]; /* the last STATUS= text sent */
};

/* Opens the socket (notify_open) and starts the timers; they do not keep
 * the loop alive. The first status poll runs on the loop's next iteration.
 * Returns notify_open()'s value (an error is worth one log line, no more). */
int notifier_start(struct notifier *n, struct ev_loop *loop);
/* Sends STOPPING=1 with a last STATUS=; the watchdog keeps being fed while
 * the loop runs. Idempotent. */
void notifier_stopping(struct notifier *n);
/* For SIGHUP: RELOADING=1, then the daemon's RELOAD through its own control
 * handler (ctl_self_call(), so that SIGHUP and `lockstepctl reload` do the
 * same, and the handler logs the outcome), then READY=1 again (if the node
 * was ready) with a STATUS= saying how it went. Reloads without a service
 * manager too. Returns the reload's result (0 or a negative errno). */
int notifier_reload(struct notifier *n);
/* Stops the timers (before ev_run returns for good or after); accepts a
 * notifier that was never started. */
void notifier_stop(struct notifier *n);

#endif
