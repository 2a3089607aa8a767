/* The public feed's insides (matcher/feed.c), shared with its
 * retransmission server (matcher/feed_retrans.c): struct matcher_feed and
 * its ring. Only those two files include this header. */
#ifndef LOCKSTEP_MATCHER_FEED_PRIVATE_H
#define LOCKSTEP_MATCHER_FEED_PRIVATE_H

#include <ev.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "feedgen.h"
#include "hist.h"
#include "matcher_private.h"
#include "moldudp64.h"
#include "net.h"
#include "srcbudget.h"
#include "tapeday.h"

#define FEED_SLOT 64 /* ring slot: u64 seq, u32 day, u16 length, the message */
#define FEED_SLOT_MSG 14
#define FEED_CATCHUP 4096 /* messages a new publisher sends again at most */
#define FEED_RUNS 64 /* tape times remembered per flush (latency) */
#define FEED_BOOT_GRACE_NS (3 * 1000000000ull) /* the owner's start, after ours */
_Static_assert(FEED_SLOT_MSG + ITCH_MAX_LEN <= FEED_SLOT, "feed ring slot");

enum { FEED_A, FEED_B, FEEDS };
static const char feed_name[FEEDS] __attribute__((unused)) = { 'A', 'B' };

struct matcher_feed {
	struct feedgen gen;
	int known; /* the stream's position is known (not so after an old snapshot) */
	struct tapeday days; /* the sessions' names */
	uint8_t *ring;
	uint64_t ring_n;

	/* publishing */
	int send_fd;
	struct sockaddr_in self; /* the send socket's address: our own packets */
	struct sockaddr_in group[FEEDS];
	int has[FEEDS]; /* the group is configured */
	int owner; /* FEED_A, FEED_B or -1 */
	int publishing[FEEDS];
	int rank[FEEDS]; /* 0: owner; else the takeover's rank */
	struct net_batch tx; /* 2 x batch slots: each packet once per group */
	struct mold_builder pkt;
	unsigned pkt_slot, tx_count; /* packet being built (tx_count: none), packets built */
	uint32_t pkt_day;
	uint64_t last_send_ns, start_ns;

	/* listening to both groups */
	int listen_fd[FEEDS];
	ev_io listen_io[FEEDS];
	struct net_batch lrx;
	uint64_t heard_ns[FEEDS];
	uint64_t rxq_listen[FEEDS]; /* SO_RXQ_OVFL of each listening socket */
	int ever_heard[FEEDS];
	/* the next sequence number the packets heard on each feed announced,
	 * in the current day's session (session_now); 0: none heard */
	uint64_t heard_next[FEEDS];
	/* the next sequence number after what this replica last sent on each
	 * feed, and its day */
	uint64_t sent_next[FEEDS];
	uint32_t sent_day[FEEDS];
	struct mold_session session_now;
	uint32_t session_day;

	/* retransmissions */
	int retrans_fd;
	ev_io retrans_io;
	struct net_batch req_rx, req_tx;
	struct src_budget budget;

	/* latency, tape time to ITCH datagram sent: the messages of the
	 * packets being built, as runs of one tape time */
	uint64_t cur_tape_ns;
	struct feed_run {
		uint64_t tape_ns, n;
	} runs[FEED_RUNS];
	unsigned n_runs;
	struct hist latency;

	struct matcher_feed_stats st;
};

/* --- the ring -------------------------------------------------------------- */

static inline uint8_t *ring_slot(const struct matcher_feed *f, uint64_t seq)
{
	return f->ring + (seq % f->ring_n) * FEED_SLOT;
}

/* The message of (day, seq) held in the ring, or NULL. */
static inline const uint8_t *ring_get(const struct matcher_feed *f, uint32_t day, uint64_t seq,
			       uint16_t *len)
{
	const uint8_t *s = ring_slot(f, seq);
	uint64_t sseq;
	uint32_t sday;

	memcpy(&sseq, s, 8);
	memcpy(&sday, s + 8, 4);
	if (sseq != seq || sday != day)
		return NULL;
	memcpy(len, s + 12, 2);
	return s + FEED_SLOT_MSG;
}

static inline void ring_put(struct matcher_feed *f, uint32_t day, uint64_t seq, const uint8_t *msg,
		     size_t len)
{
	uint8_t *s = ring_slot(f, seq);
	uint16_t l = (uint16_t)len;

	memcpy(s, &seq, 8);
	memcpy(s + 8, &day, 4);
	memcpy(s + 12, &l, 2);
	memcpy(s + FEED_SLOT_MSG, msg, len);
}

/* --- feed_retrans.c -------------------------------------------------------------- */

/* The retransmission server's socket ([feed] retrans; none when empty):
 * 0 or a negative errno (logged). */
int matcher_feed_retrans_open(struct matcher *m, struct matcher_feed *f);
void matcher_feed_retrans_start(struct matcher *m, struct matcher_feed *f);

#endif
