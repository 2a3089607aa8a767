/* Loss recovery for one received MoldUDP64 stream, and the loss generator.
 *
 * The receiver feeds every downstream packet (or block) it gets, from the
 * stream and from retransmission answers alike; rx delivers the blocks to a
 * callback exactly once each and in sequence order, keeps the blocks that
 * arrive ahead of a gap in a bounded reorder window (copied into a ring
 * allocated at creation; what does not fit is dropped and asked for again),
 * keeps the set of missing ranges, and asks for them through a callback:
 *
 *  - one request per missing range (up to max_count blocks; a longer range
 *    is asked for in pieces, the next piece once the answer to the previous
 *    one stops arriving, settle_ns after its last block);
 *  - the first request for a new range waits hold_ns and then a random
 *    time in [0, delay_ns] drawn from the caller's seeded PRNG, so that
 *    many receivers that lost the same packet do not all ask at once (a
 *    stream received on two networks, A/B, holds: the other network's
 *    copy usually fills the gap before anyone asks);
 *  - a range still missing is asked for again after retry_ns, then 2x, 4x...
 *    up to retry_max_ns (exponential back-off), each time from the next of
 *    the n_servers retransmission servers (rotation); when the first
 *    n_near of them are near (tape recorders), a range's first
 *    RX_NEAR_TRIES requests go to those only, so that the far ones (the
 *    sequencers) hear only from receivers whose recorders cannot answer;
 *  - every range has its own schedule: later gaps never wait for an earlier
 *    one;
 *  - a heartbeat (or end of session) carries the stream's next sequence
 *    number and so reveals a lost tail (rx_tail).
 *
 * The "too old" answer. MoldUDP64 has no negative answer, so lockstep
 * defines one inside the format: a retransmission server asked for a
 * sequence number older than the oldest it still holds answers, to the
 * requester's address only (never on the stream), with a heartbeat packet
 * (message count 0) whose sequence number is the OLDEST sequence number it
 * holds, and then serves whatever part of the request it does hold. A
 * receiver sends its requests from a unicast socket that carries nothing but
 * answers, so a heartbeat arriving there can only mean this; it calls
 * rx_too_old(). rx then asks the other servers (those that have not said
 * they are past it); when no server holds a missing range any longer it
 * calls the `lost` callback, whose answer decides: give the range up (the
 * stream goes on after a hole, counted in lost) or keep asking at the capped
 * back-off (a matcher, which must never skip an event, does that and reports
 * loudly).
 *
 * Delivery callback verdicts: RX_TAKEN (consumed), RX_HOLD (not now: rx
 * keeps the block, stops delivering and tries again at rx_resume(); a matcher
 * waiting for the commit position), RX_REJECT (the bytes are not acceptable,
 * e.g. of a fenced term: rx forgets them and asks for that sequence number
 * again). Callbacks may not call back into the same rx.
 *
 * Time is the caller's monotonic clock in ns, passed in; nothing here reads
 * a clock, allocates after rx_create(), logs or makes a system call. */
#ifndef LOCKSTEP_RX_H
#define LOCKSTEP_RX_H

#include <stddef.h>
#include <stdint.h>

#include "moldudp64.h"

#define RX_MAX_SERVERS 9 /* a sequencer group of 9, or 9 matcher replicas */
#define RX_MAX_GAPS 64 /* missing ranges scheduled apart; more are merged */
#define RX_NEVER UINT64_MAX
#define RX_MAX_HOLD_NS 10000000000ull /* 10 s */
#define RX_NEAR_TRIES 3 /* requests for a range to the near servers before the rest */

/* A small PRNG (splitmix64): reproducible for a given seed. One may serve
 * several rx instances. */
struct rx_rng {
	uint64_t s;
};

void rx_rng_seed(struct rx_rng *r, uint64_t seed);
uint64_t rx_rng_next(struct rx_rng *r);
/* Uniform in [0, n]; 0 when n is 0. */
uint64_t rx_rng_upto(struct rx_rng *r, uint64_t n);
/* A seed from a string (a node name) mixed with a number (drop_seed). */
uint64_t rx_seed_of(const char *name, uint64_t salt);

enum rx_verdict { RX_TAKEN = 0, RX_HOLD = 1, RX_REJECT = 2 };

struct rx_ops {
	/* Block `seq` in order; returns an enum rx_verdict. */
	int (*deliver)(void *ctx, uint64_t seq, const uint8_t *data, uint16_t len);
	/* Send one request packet for [seq, seq + count) to server `server`. */
	void (*request)(void *ctx, unsigned server, uint64_t seq, uint16_t count);
	/* No server holds [from, to) any more: return 1 to give it up (the
	 * stream goes on after the hole), 0 to keep asking. NULL: keep asking. */
	int (*lost)(void *ctx, uint64_t from, uint64_t to);
};

struct rx_config {
	uint32_t window; /* sequence numbers held ahead of the next expected one
			    (rounded up to a power of two, at least 2) */
	size_t ring_bytes; /* bytes for held blocks (16 bytes of overhead each) */
	uint16_t max_count; /* blocks per request, 1..MOLD_MAX_COUNT */
	uint64_t hold_ns; /* first request of a new range: after hold_ns (0..RX_MAX_HOLD_NS) */
	uint64_t delay_ns; /* and a random time in [0, delay_ns] */
	uint64_t retry_ns; /* first back-off (> 0) */
	uint64_t retry_max_ns; /* back-off cap (>= retry_ns) */
	uint64_t settle_ns; /* ask for the rest of a range this long after its answer stops */
	unsigned n_servers; /* 0..RX_MAX_SERVERS; 0: never request */
	/* servers [0, n_near) are near (tape recorders beside the receiver):
	 * a range's first RX_NEAR_TRIES requests go to them in turn, later
	 * ones to every server in turn (the fall-back); 0: all alike */
	unsigned n_near;
	struct rx_rng *rng; /* needed when delay_ns > 0; owned by the caller */
};

struct rx_stats {
	uint64_t blocks; /* blocks fed */
	uint64_t delivered; /* blocks taken by the callback */
	uint64_t duplicates; /* blocks already delivered or held */
	uint64_t held; /* blocks copied into the reorder ring */
	uint64_t overflow; /* blocks dropped: past the window or the ring full */
	uint64_t gaps; /* missing ranges found (a range revealed at once counts once) */
	uint64_t requests; /* request packets sent */
	uint64_t requested; /* blocks asked for, summed over requests */
	uint64_t too_old; /* too-old answers received */
	uint64_t lost; /* sequence numbers given up (holes the stream went on after) */
	uint64_t rejected; /* blocks the callback rejected */
	uint64_t unbelievable; /* packets and answers claiming a position no stream reaches */
	uint64_t suppressed; /* requests put off because another receiver asked (rx_heard) */
};

struct rx;

/* -EINVAL for a config out of range, -ENOMEM. The ops and ctx are kept. */
int rx_create(struct rx **out, const struct rx_config *cfg, const struct rx_ops *ops,
	      void *ctx);
void rx_destroy(struct rx *rx); /* accepts NULL */

/* Forgets every held block and missing range; `next` is the next sequence
 * number to deliver (0: the first block, heartbeat or end of session fed
 * decides). */
void rx_start(struct rx *rx, uint64_t next);

/* A parsed downstream packet (data, heartbeat or end of session) from the
 * stream or from an answer. */
void rx_packet(struct rx *rx, const struct mold_packet *p, uint64_t now);
/* One block. */
void rx_block(struct rx *rx, uint64_t seq, const uint8_t *data, uint16_t len, uint64_t now);
/* The stream's next sequence number is `next_seq` (a heartbeat). */
void rx_tail(struct rx *rx, uint64_t next_seq, uint64_t now);
/* Another receiver asked for [seq, seq + count) (its request heard on a
 * repair group): every missing range it overlaps waits for the answer as
 * if this receiver had asked, its next request put off by the range's
 * current back-off (request suppression, as SRM and PGM do: the repair
 * traffic of a loss that many receivers share does not grow with their
 * number). */
void rx_heard(struct rx *rx, uint64_t seq, uint64_t count, uint64_t now);
/* Server `server` holds nothing older than `oldest` (the too-old answer). */
void rx_too_old(struct rx *rx, unsigned server, uint64_t oldest, uint64_t now);
/* Delivers again after an RX_HOLD. */
void rx_resume(struct rx *rx, uint64_t now);
/* Gives up every missing sequence number below `upto` (counted in lost);
 * delivers the held blocks on the way. */
void rx_skip(struct rx *rx, uint64_t upto, uint64_t now);
/* Sends the requests that are due. */
void rx_tick(struct rx *rx, uint64_t now);
/* When rx_tick has something to do next (RX_NEVER: nothing scheduled). */
uint64_t rx_due(const struct rx *rx);

uint64_t rx_next(const struct rx *rx); /* next sequence number to deliver, 0: not started */
uint64_t rx_high(const struct rx *rx); /* one past the highest known to exist */
uint64_t rx_missing(const struct rx *rx); /* sequence numbers missing below rx_high */
unsigned rx_gap_count(const struct rx *rx);
int rx_holding(const struct rx *rx); /* 1 after an RX_HOLD until delivery resumes */
/* Blocks fed that were new: neither delivered nor held before (blocks -
 * duplicates in rx_stats), for telling which copy of a datagram came first. */
uint64_t rx_fresh(const struct rx *rx);
void rx_get_stats(const struct rx *rx, struct rx_stats *out);

/* Sanity: no stream of a trading day reaches RX_SEQ_LIMIT (2^48), and none
 * moves more than RX_MAX_JUMP (2^40) past what a receiver has seen, so a
 * packet, heartbeat or too-old answer that claims such a position (a
 * member gone wrong; 2^64 - 1 would wrap the arithmetic) is counted
 * (unbelievable) and neither adopted nor asked for. A day of a billion
 * events a second for a day stays under both. */
#define RX_SEQ_LIMIT (1ull << 48)
#define RX_MAX_JUMP (1ull << 40)
/* 1 when a packet whose positions run from seq to seq + count may be
 * believed (count: its blocks, 0 for a heartbeat or an end of session). */
int rx_believable(const struct rx *rx, uint64_t seq, uint64_t count);

/* ---- the loss generator --------------------------------------------------
 *
 * Off by default (rate 0). When on, rx_drop() says whether to throw away a
 * received datagram before it is parsed. The decision is a hash of the seed,
 * the datagram's first 20 bytes (a MoldUDP64 header: session, sequence
 * number, count; or a whole request packet) and how many times a datagram
 * with those bytes was seen before (a table of 1024 recent ones, 4-way
 * set-associative, the least recently seen evicted), compared with the
 * rate. So a given seed throws away the same packets in every run of the
 * same workload whatever the timing (heartbeats and retransmissions do not
 * shift the pattern), and a retransmitted copy gets a fresh draw: two
 * datagrams that alternate (the parts of one retransmission answer) keep
 * their own counts even when they hash to the same set, so neither is lost
 * on every repeat. */
#define RX_DROP_SLOTS 1024
#define RX_DROP_WAYS 4

struct rx_drop {
	uint64_t seed;
	uint64_t threshold; /* drop when the draw is below; 0 with all == 0: off */
	int all; /* rate 1 */
	uint64_t seen, dropped;
	uint64_t dropped_data; /* of those, longer than a header: data, not heartbeats,
				  end of session or requests, whose number depends on timing */
	struct {
		uint64_t key;
		uint64_t last; /* `seen` when last hit: the set's LRU order */
		uint32_t count;
	} slot[RX_DROP_SLOTS];
};

/* rate in [0, 1] (clamped). */
void rx_drop_init(struct rx_drop *d, double rate, uint64_t seed);
int rx_drop_slow(struct rx_drop *d, const uint8_t *pkt, size_t len);
/* 1: pretend this datagram was lost. */
static inline int rx_drop(struct rx_drop *d, const uint8_t *pkt, size_t len)
{
	if (!d->threshold && !d->all)
		return 0;
	return rx_drop_slow(d, pkt, len);
}

#endif
