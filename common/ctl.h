/* The control socket: a Unix stream socket per daemon (in its runtime
 * directory) carrying length-prefixed protobuf-c messages: a u32 big-endian
 * length, then a lockstep.ControlRequest; the reply the same way with a
 * lockstep.ControlReply. One request per connection. lockstepctl and
 * ops/cluster speak it. */
#ifndef LOCKSTEP_CTL_H
#define LOCKSTEP_CTL_H

#include <ev.h>

#include "lockstep.pb-c.h"

#define CTL_MAX_MESSAGE (1u << 20)

/* Fills `reply` (already initialised) for `req`. Strings and arrays the
 * handler points the reply at must stay valid until it returns: the server
 * packs the reply right after. */
typedef void (*ctl_handler_fn)(void *ctx, const Lockstep__ControlRequest *req,
			       Lockstep__ControlReply *reply);

struct ctl_server;

/* Access (issue 15): the socket file is mode 0660, so only the daemon's
 * user and group (and root) can connect; STATUS and STATS (ctl_op_reads)
 * are answered to any of them, any other operation only to root or the
 * daemon's own user (SO_PEERCRED), -EPERM otherwise. A client has
 * CTL_CLIENT_TIMEOUT (0.5 s) to send its request; one unprivileged user
 * holds at most a quarter of the 16 slots, and a privileged caller who
 * finds them all taken closes the oldest unprivileged one.
 *
 * Listens on `path` (an old socket file there is removed first). A path
 * longer than a Unix socket address holds works too (bound and reached
 * through its directory); -ENAMETOOLONG when the file name alone, after
 * the last '/', is longer than about 90 characters. ctl_call() takes the
 * same paths. */
int ctl_server_open(struct ctl_server **out, struct ev_loop *loop, const char *path,
		    ctl_handler_fn fn, void *ctx);
/* 1 for an operation that only reads (STATUS, STATS). */
int ctl_op_reads(int op);
/* Stops listening and removes the socket file; accepts NULL. */
void ctl_server_close(struct ctl_server *s);

/* Calls the handler of the control server this process opened last (a
 * daemon has one) directly, without the socket: how a daemon reads its own
 * STATUS (for the service manager's STATUS= lines). The same validity rule
 * for the reply's strings holds. -ENOTCONN when none is open. */
int ctl_self_call(const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply);

/* Client: sends one request and waits up to timeout_ms for the reply, which
 * the caller frees with lockstep__control_reply__free_unpacked(r, NULL). */
int ctl_call(const char *path, const Lockstep__ControlRequest *req, Lockstep__ControlReply **reply,
	     int timeout_ms);

#endif
