/* The public market data feed of a partition as a pure function of the
 * tape: the engine's market data reports (engine.h, "Market data") turned
 * into ITCH 5.0 messages (common/itch.h), numbered per trading day. Every
 * replica of a partition, and lockstep-replay itch from the journal, gives
 * the very same messages with the very same sequence numbers: feed A and
 * feed B are one stream, whichever replica sends it.
 *
 * The stream of a day d (its MoldUDP64 session: day 1 the configured name,
 * day d > 1 named as the tape's days are, common/tapeday.h; sequence
 * numbers from 1):
 *  - at the first tape event of the day (day 1: the first event applied;
 *    day d > 1: its START_OF_DAY), with that event's time: System Event
 *    'O' (start of messages) and 'S' (start of system hours), then for
 *    each symbol in configuration order a Stock Directory 'R' and a Stock
 *    Trading Action 'H' (trading), then System Event 'Q' (start of market
 *    hours);
 *  - the book: ADD -> 'A' (or 'F' with the attribution), EXEC -> 'E',
 *    TRADE -> 'P' (order reference 0), CANCEL -> 'X', DELETE -> 'D',
 *    REPLACE -> 'U'. 'C' (executed with price) does not occur: an
 *    execution is always at the resting order's displayed price;
 *  - at END_OF_DAY, after its deletes: System Event 'M' (end of market
 *    hours), 'E' (end of system hours), 'C' (end of messages). The day's
 *    session then ends.
 * Stock locate: locate_base + the symbol's index; tracking number: the
 * configured one (the partition); timestamps: the tape's, in ns since
 * midnight; order reference and match numbers: the engine's (distinct
 * across partitions).
 *
 * Its state (struct feedgen_state) is part of a matcher's snapshot.
 * Pure: no allocation, no clock, no logging, no system call. */
#ifndef LOCKSTEP_MATCHER_FEEDGEN_H
#define LOCKSTEP_MATCHER_FEEDGEN_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "itch.h"

#define FEEDGEN_MAX_SYMBOLS 64 /* CONVERT_MAX_SYMBOLS's bound as well */

struct feedgen_config {
	const char *const *symbols; /* as the engine's */
	size_t n_symbols;
	uint32_t locate_base; /* the first symbol's stock locate, >= 1 */
	uint16_t tracking;
};

/* Where the stream is: day `day`'s session, whose next message takes
 * sequence number `next`; `started`: its start messages went out;
 * `ended`: its end messages too (nothing more until the next day's). */
struct feedgen_state {
	uint32_t day;
	uint64_t next;
	int started, ended;
};

/* One message out: of day `day`'s session, at sequence number seq. msg is
 * valid during the call. */
typedef void (*feedgen_out_fn)(void *ctx, uint32_t day, uint64_t seq, const uint8_t *msg,
			       size_t len);

struct feedgen {
	struct feedgen_config cfg;
	struct feedgen_state st;
	feedgen_out_fn out;
	void *ctx;
	uint64_t messages; /* sent through out, all days */
	uint64_t encode_errors; /* not reached: every report encodes */
};

/* Day 1, nothing sent. -EINVAL for no symbols, more than
 * FEEDGEN_MAX_SYMBOLS, a name that is no ITCH stock, or locates beyond
 * 65535. */
int feedgen_init(struct feedgen *g, const struct feedgen_config *cfg, feedgen_out_fn out,
		 void *ctx);

/* Before each tape event is applied (a command, a DayEvent, an Admin, a
 * time event: every index), with its tape time. */
void feedgen_begin(struct feedgen *g, uint64_t tape_ns);

/* The engine's market data callback (engine_set_md(e, feedgen_md, g)). */
void feedgen_md(void *ctx, const struct engine_md *md);

/* The messages a GLIMPSE snapshot of the book gives (ctx: the feedgen, for
 * its configuration; out receives them with seq 0): for each symbol 'R'
 * and 'H', then the engine's walk as 'A'/'F' messages, at time ts (ns
 * since midnight). The End of Snapshot is the caller's. */
void feedgen_glimpse(const struct feedgen *g, const struct engine *e, uint64_t ts,
		     feedgen_out_fn out, void *ctx);

#endif
