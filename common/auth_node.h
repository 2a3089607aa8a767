/* The process's cluster key and the checks at every surface, daemon-side:
 * [node] cluster, auth and key_file loaded at start and again on RELOAD
 * (how a key rotation reaches a running node), the tag added to each
 * datagram a node sends, and each datagram it receives checked before
 * anything reads it. A datagram that fails is dropped and counted per
 * surface and per source address (STATS auth_dropped_<surface>,
 * auth_dropped_from_<a>_<b>_<c>_<d>_<port>), with a rate-limited log line
 * naming its source, never applied.
 *
 * One key set per process (as one log): the daemons, lockstep-replay send
 * and lockstep-bench set it up once. Nothing here allocates; checking reads
 * the clock only to rate-limit the log line of a failure. */
#ifndef LOCKSTEP_AUTH_NODE_H
#define LOCKSTEP_AUTH_NODE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "counters.h"
#include "moldudp64.h"
#include "net.h"

enum auth_mode { AUTH_MODE_OFF, AUTH_MODE_ON };
extern const char *const auth_mode_names[]; /* "off", "on" */

/* Loads the key set: mode on reads key_file and derives the keys for
 * `cluster`; off warns loudly (once per load) that any host can speak for
 * a member. 0, or a negative errno with err saying why (nothing changed:
 * a reload with a bad file keeps the keys in use). */
int auth_node_setup(int mode, const char *cluster, const char *key_file, char *err,
		    size_t errlen);

/* The same from keys in memory (lockstep-bench's own cluster). */
int auth_node_setup_keys(const char *cluster, const struct auth_keys *k);

/* The key set in use (authentication off until auth_node_setup()). */
const struct auth *auth_node(void);

/* What a sender leaves free at the end of a datagram for the trailer:
 * AUTH_TRAILER_LEN, or 0 with authentication off. */
size_t auth_node_reserve(void);

/* auth_seal() with the process's keys: the new length. A buffer without
 * room for the trailer is the caller's bug: it is logged (rate-limited) and
 * the datagram goes untagged, so receivers drop it and count it. */
size_t auth_node_seal(enum auth_surface s, uint8_t *buf, size_t len, size_t cap,
		      size_t mold_off);

/* auth_node_seal() of slots [0, n) of b, in place (each slot's room is
 * b->size): the last step before a batch is sent. */
void auth_node_seal_batch(enum auth_surface s, struct net_batch *b, unsigned n, size_t mold_off);

/* A request (MoldUDP64, for surface AUTH_REQUEST), a heartbeat or an end
 * of session (for the stream's surface), built and tagged: the length. */
#define AUTH_CONTROL_MAX (MOLD_HEADER_LEN + AUTH_TRAILER_LEN)
size_t auth_node_request(uint8_t out[AUTH_CONTROL_MAX], const struct mold_request *r);
size_t auth_node_heartbeat(uint8_t out[AUTH_CONTROL_MAX], enum auth_surface s,
			   const struct mold_session *sess, uint64_t next_seq, int eos);

/* Checks a received datagram: 0 with *len its own length (trailer cut
 * off, count put back), or -1 when it failed (counted, logged). */
int auth_node_check(enum auth_surface s, uint8_t *buf, size_t *len, size_t mold_off,
		    const struct sockaddr_in *from);

/* Members by address: 1 when from's host is one of hosts[0..n) (n 0: any
 * host is), else counts in *refused, logs (rate-limited) that `what` from
 * there was refused, naming `key`, the config key that lists the hosts,
 * and returns 0. */
int auth_node_from_host(const struct sockaddr_in *hosts, int n, const struct sockaddr_in *from,
			const char *what, const char *key, uint64_t *refused);

/* Drops of a surface so far (tests, STATS). */
uint64_t auth_node_dropped(enum auth_surface s);

/* STATUS: "on (cluster NAME, tagging with key 2, accepting 1 2)" or the
 * warning that it is off; STATS: drops per surface and per source, and the
 * datagrams that passed under each key held (auth_rx_key_<id>), which tell
 * an operator when the old key of a rotation is no longer in use. */
const char *auth_node_describe(void);
void auth_node_stats(struct counters *out);

#endif
