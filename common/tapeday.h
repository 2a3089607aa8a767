/* The tape's trading days on the wire: one MoldUDP64 session a day, its
 * sequence numbers from 1.
 *
 * Inside the cluster the tape is one continuous log: an event's index (the
 * Event's seq, raft's log index, the journal's sequence number) runs on
 * across days, so that replication, positions, checkpoints and snapshots
 * need not know about days. Only the wire does. Day d begins at the index
 * of its START_OF_DAY event (its base; day 1's base is 1), and an event of
 * day d goes out in day d's session with the MoldUDP64 sequence number
 * index - base + 1. A datagram never holds events of two days.
 *
 * Session names: day 1 is the configured tape_session itself (a cluster
 * that never closes a day keeps it); day d > 1 is the configured name's
 * first TAPEDAY_PREFIX characters followed by d in TAPEDAY_DIGITS digits,
 * e.g. "TAPE000002".
 *
 * A receiver learns a day's base from the tape itself: every Event carries
 * its index, so the first data packet of a new session gives it
 * (tapeday_parse peeks at the first block). A heartbeat of a later day
 * whose base is not known yet says only that the day before ended, and
 * that there is more to fetch. Requests name a known day: a server maps
 * (session, sequence number) back to an index, and answers with the
 * blocks of each index in its own day's session. Day 1's base is always
 * known, so a request in day 1's session names an index directly.
 *
 * Pure: no allocation, no clock, no logging, no system call. */
#ifndef LOCKSTEP_TAPEDAY_H
#define LOCKSTEP_TAPEDAY_H

#include <stddef.h>
#include <stdint.h>

#include "moldudp64.h"

#define TAPEDAY_PREFIX 4 /* characters of the configured name kept from day 2 */
#define TAPEDAY_DIGITS 6 /* the day number: up to 999,999 days */
#define TAPEDAY_MAX_DAY 999999u
#define TAPEDAY_KNOWN 64 /* days whose base a table keeps (the latest) */

/* tapeday_parse's answer for a heartbeat (or end of session) of a later
 * day whose base is not known yet: the day before ended, ask for more. */
#define TAPEDAY_LATER 1

struct tapeday_day {
	uint32_t day;
	uint64_t base; /* index of the day's first event */
};

struct tapeday {
	struct mold_session first; /* day 1's session: the configured name */
	char prefix[TAPEDAY_PREFIX + 1];
	unsigned n; /* known days, ascending by day and base */
	struct tapeday_day known[TAPEDAY_KNOWN];
};

/* Day 1 (base 1) known. -EINVAL when `name` is not a session name. */
int tapeday_init(struct tapeday *t, const char *name);
/* The session of day `day` (>= 1). */
void tapeday_session(const struct tapeday *t, uint32_t day, struct mold_session *out);
/* The day a session names, 0 when it is none of this tape's. */
uint32_t tapeday_day_of(const struct tapeday *t, const struct mold_session *s);
/* The same from day 1's session alone. */
uint32_t tapeday_day_of_session(const struct mold_session *first, const struct mold_session *s);
/* Day `day` begins at index `base`. A day already known with another base
 * takes the new one; days known after it with a base not above it are
 * forgotten (a table stays ascending). Keeps the latest TAPEDAY_KNOWN days
 * (day 1 always). -EINVAL for day 0, base 0, or a day before day 1's end
 * that would break the order (day > 1 with base 1). */
int tapeday_learn(struct tapeday *t, uint32_t day, uint64_t base);
/* Forgets every day whose base is above `index` (a journal cut after it). */
void tapeday_forget_after(struct tapeday *t, uint64_t index);
/* The base of day `day`, 0 when not known. */
uint64_t tapeday_base(const struct tapeday *t, uint32_t day);
/* The latest known day whose base is at most `index` (index >= 1), and its
 * base. */
uint32_t tapeday_day_at(const struct tapeday *t, uint64_t index, uint64_t *base);
/* The latest known day. */
static inline const struct tapeday_day *tapeday_last(const struct tapeday *t)
{
	return &t->known[t->n - 1];
}
/* Where index `index` goes on the wire: the session of the known day that
 * holds it and its sequence number there. */
/* The last index of the day that holds `index`: one before the next known
 * day's base (UINT64_MAX: no later day is known). */
uint64_t tapeday_day_end(const struct tapeday *t, uint64_t index);
void tapeday_wire(const struct tapeday *t, uint64_t index, struct mold_session *session,
		  uint64_t *seq);
/* The index a (session, sequence number) names: 0 when the session is not
 * a known day of this tape (or the sum overflows). */
uint64_t tapeday_index(const struct tapeday *t, const struct mold_session *s, uint64_t seq);

/* Parses a downstream packet of any day of this tape and rewrites its seq
 * into an index (for data: the first block's; for a heartbeat or end of
 * session: the next), so that mold_iter and rx see indices. A data packet
 * of a day whose base is not known teaches it (from its first block's
 * Event seq). Returns 0, TAPEDAY_LATER (see above: *out holds the packet
 * as parsed), or a negative MOLD_E_* (MOLD_E_SESSION: not this tape's, or a
 * day older than the known ones; MOLD_E_SEQ_WRAP for a data packet whose
 * first block does not name an index its day can hold). */
int tapeday_parse(struct tapeday *t, const uint8_t *buf, size_t len, size_t max_len,
		  struct mold_packet *out);

/* Maps a request packet to indices: *out's seq becomes an index.
 * MOLD_E_SESSION for a session not known (not this tape's, or a day whose
 * base this table does not hold). */
int tapeday_parse_request(const struct tapeday *t, const uint8_t *buf, size_t len,
			  struct mold_request *out);
/* Builds a request for [index, index + count) in the session of the known
 * day that holds index. */
size_t tapeday_build_request(const struct tapeday *t, uint8_t out[MOLD_REQUEST_LEN],
			     uint64_t index, uint16_t count);

#endif
