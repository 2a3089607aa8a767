/* The GLIMPSE 5.0 snapshot server of a matcher replica (issue 18): the
 * displayed book of its partition, over SoupBinTCP 4.0 on [feed] glimpse.
 *
 * A session: the client sends a Login Request within login_ns of
 * connecting (username and password of the [feed] logins file, the
 * gateway's format, common/creds.h; the requested session and sequence
 * number are not looked at: a snapshot is always of now). A bad login is
 * answered Login Rejected 'A' and closed, after a password verification
 * whatever was wrong (a name that is no login is verified against a
 * dummy hash): each attempt costs its sender the verification's time. A
 * good one waits for the next image (below), then gets Login Accepted
 * (the feed's current MoldUDP64 session, sequence number 1) and the
 * image: Sequenced Data packets of one ITCH message each, the End of
 * Snapshot 'G' last (the feed's next sequence number at the image's
 * position). Login Rejected 'S' instead when the replica cannot give one
 * (the build says so: the feed's position unknown, the replica not live).
 * Then server heartbeats every GLIMPSE_HEARTBEAT_NS until the client's
 * Logout Request (closed). From Login Accepted on, idle_ns
 * without a byte from the client, or with bytes owed and none taken by
 * its socket (a client that does not read), closes the session. At most
 * max_sessions connections at once: one more is accepted and closed at
 * once.
 *
 * Threads. The server is a thread with a libev loop of its own: accept,
 * SoupBinTCP, password verification (Argon2id, ~30 ms) and non-blocking
 * writes (at most GLIMPSE_WRITE_BUDGET bytes per session per wakeup; a
 * full socket waits for EV_WRITE: TCP slows a slow reader, nobody else)
 * never run on the owner's loop. Only the image is built there, by
 * build(), since it reads the engine: an ev_async on the owner's loop
 * runs it between two callbacks of that loop, so between two tape
 * events. The hand-over:
 *
 *   server thread                          owner's thread (the matcher)
 *   logins wait; phase IDLE -> BUILDING
 *   (release), ev_async_send(owner) ------> phase == BUILDING (acquire):
 *                                           reset, build(ctx, image), timed;
 *                                           phase -> READY (release),
 *   phase == READY (acquire) <------------- ev_async_send(server)
 *   stream it to the sessions that waited;
 *   the last one done: phase -> IDLE, and
 *   again if others logged in meanwhile
 *
 * The image belongs to the thread the phase names (BUILDING: the owner's;
 * IDLE, READY: the server's); what one side wrote before its release store
 * is what the other reads after its acquire load. No lock: the owner's
 * loop never waits for the server. Sessions that log in while an image is
 * built or streamed share the next one; one image at a time, its buffer
 * reused (grown, never shrunk). The counters (struct glimpse_stats) are
 * atomics the owner reads at any time. */
#ifndef LOCKSTEP_MATCHER_GLIMPSE_H
#define LOCKSTEP_MATCHER_GLIMPSE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "soupbin.h"

/* the defaults of struct glimpse_config's login_ns and idle_ns */
#define GLIMPSE_LOGIN_NS (5 * 1000000000ull) /* connect to Login Request */
#define GLIMPSE_IDLE_NS (15 * 1000000000ull) /* the client's silence; a write stalled */
#define GLIMPSE_HEARTBEAT_NS 1000000000ull
#define GLIMPSE_WRITE_BUDGET (64u << 10) /* bytes per session per wakeup */

/* A snapshot's answer, ready-made: SoupBinTCP Sequenced Data packets
 * (u16 length, 'S', one ITCH message), the End of Snapshot last. */
struct glimpse_image {
	uint8_t *buf; /* len bytes of packets; cap allocated */
	size_t len, cap;
	uint64_t messages; /* packets in buf, the End of Snapshot included */
	int available; /* 1: complete (glimpse_image_end); 0: none can be given */
	int err; /* 0, or -ENOMEM when the buffer could not grow (not available) */
	char session[SOUP_SESSION_LEN + 1]; /* the feed's MoldUDP64 session, trimmed */
	uint64_t next; /* the End of Snapshot's sequence number */
	uint64_t build_ns; /* the build's time: the owner's pause */
};

/* Empties img for a build (its buffer kept). */
void glimpse_image_reset(struct glimpse_image *img);
/* Room for `bytes` more without growing again: 0, or -ENOMEM (in err). */
int glimpse_image_reserve(struct glimpse_image *img, size_t bytes);
/* Appends one ITCH message (1..ITCH_MAX_LEN bytes) as a Sequenced Data
 * packet: 0, or -ENOMEM / -EINVAL (sticky in err: the image is dropped). */
int glimpse_image_add(struct glimpse_image *img, const uint8_t *msg, size_t len);
/* Appends the End of Snapshot of `next` and makes the image available
 * under session (a MoldUDP64 session name, trimmed): 0, or err. */
int glimpse_image_end(struct glimpse_image *img, const char *session, uint64_t next);
void glimpse_image_free(struct glimpse_image *img); /* accepts a zeroed one */

/* The owner's build: on its thread, between two of its callbacks; img is
 * reset. It ends the image (glimpse_image_end), or leaves it unavailable. */
typedef void (*glimpse_build_fn)(void *ctx, struct glimpse_image *img);

struct glimpse_config {
	const char *listen; /* host:port */
	const char *logins; /* a credentials file; "" or NULL: every login rejected */
	unsigned max_sessions; /* >= 1 */
	uint64_t login_ns; /* connect to Login Request (0: GLIMPSE_LOGIN_NS) */
	uint64_t idle_ns; /* the client's silence, a write stalled (0: GLIMPSE_IDLE_NS) */
};

/* STATS (matcher/control.c lists them in this order). */
struct glimpse_stats {
	uint64_t connections; /* accepted */
	uint64_t sessions; /* open now (a gauge) */
	uint64_t refused_full; /* closed at once: max_sessions open */
	uint64_t logins, logins_rejected, logins_unavailable;
	uint64_t login_timeouts, idle_timeouts, write_stalls, protocol_errors, logouts;
	uint64_t snapshots; /* images built (available ones) */
	uint64_t snapshots_sent; /* to a session, to the End of Snapshot */
	uint64_t bytes; /* written to clients, everything */
	uint64_t build_us, build_max_us; /* the last build's time, the longest */
	uint64_t image_bytes, image_messages; /* the last image's */
	uint64_t verify_us; /* password verifications' total time */
};

struct glimpse;

/* Binds the listener, reads the logins file, makes the dummy hash and the
 * server's loop; nothing runs yet. build(ctx, ...) will run on `owner`.
 * 0 or a negative errno, with why in err. */
int glimpse_open(struct glimpse **out, const struct glimpse_config *cfg, struct ev_loop *owner,
		 glimpse_build_fn build, void *ctx, char *err, size_t errlen);
/* Starts the server's thread (signals blocked in it) and the owner's
 * ev_async: 0 or a negative errno. */
int glimpse_start(struct glimpse *g);
/* The bound port (tests bind port 0). */
int glimpse_port(const struct glimpse *g);
/* On the owner's thread: stops and joins the server's thread, closes every
 * session, frees everything. Accepts NULL. */
void glimpse_close(struct glimpse *g);
/* The counters, read on any thread (each one atomically). */
void glimpse_get_stats(const struct glimpse *g, struct glimpse_stats *out);

#endif
