/* lockstep-feed: a market data subscriber of lockstep's public ITCH 5.0
 * feed (MoldUDP64 on two multicast groups, A and B, the same message
 * stream; retransmission servers; GLIMPSE 5.0 snapshots over
 * SoupBinTCP 4.0), building order books (book.h).
 *
 *   main.c     options, set-up, the loop, the end (and --check)
 *   stream.c   the feeds: sockets, arbitration and gap repair through one
 *              common/rx.h receiver, trading days, delivery to the book
 *   glimpse.c  the GLIMPSE client
 *   report.c   counters, top of book, depth, the book dump (text, JSON)
 *
 * See ops/man/lockstep-feed.1. */
#ifndef LOCKSTEP_FEED_H
#define LOCKSTEP_FEED_H

#include <ev.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>

#include "book.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "soupbin.h"

#define PROG "lockstep-feed"
#define FEED_MAX_WATCH 16 /* --top and --depth symbols, each */

/* Where a datagram came from: feed A, feed B, or a retransmission server
 * (answers to our requests, on the request socket). */
enum feed_side { FEED_A, FEED_B, FEED_R, FEED_SIDES };

struct feed_opts {
	const char *group[2]; /* --a, --b */
	const char *iface;
	const char *retrans;
	const char *session;
	const char *glimpse, *login, *password;
	const char *record, *book_out;
	const char *top[FEED_MAX_WATCH], *depth[FEED_MAX_WATCH];
	unsigned n_top, n_depth, levels;
	double interval, duration, until_idle, give_up, glimpse_timeout;
	uint64_t retrans_wait_ns, arb_wait_ns;
	uint32_t max_orders, max_symbols;
	int check, stats, json, verbose;
};

/* Per side. For A and B, gaps and missed are that feed's own holes (the
 * other feed may have filled them); first + duplicates + overflow +
 * before_start = messages. */
struct feed_side_stats {
	uint64_t packets, messages;
	uint64_t first; /* messages this side delivered first (new to rx) */
	uint64_t duplicates; /* already had from another copy */
	uint64_t overflow; /* new, but past rx's reorder window or ring: asked again */
	uint64_t before_start; /* below the start (a snapshot's position) */
	uint64_t gaps, missed; /* holes in this side's own sequence, their messages */
	uint64_t heartbeats, end_of_session;
	uint64_t malformed, wrong_session, old_day, later_day, unbelievable;
	uint64_t too_old; /* R: a server said it no longer holds a range */
};

struct feed_stats {
	uint64_t delivered; /* messages delivered in sequence order */
	uint64_t applied; /* of those, decoded and given to the book */
	uint64_t unknown_type, undecodable; /* skipped */
	uint64_t recorded;
	uint64_t requests; /* request packets sent */
	uint64_t requests_held_back; /* not sent: the other feed may still fill it */
	uint64_t lost_ranges; /* ranges given up */
	uint64_t day_switches, day_end_assumed;
	uint64_t pending_dropped; /* datagrams not buffered during the first snapshot */
};

/* The GLIMPSE client (glimpse.c): one snapshot into `book`, then done(). */
enum glimpse_state { GL_IDLE, GL_CONNECTING, GL_LOGIN, GL_SNAPSHOT, GL_DONE, GL_FAILED };

struct glimpse {
	struct ev_loop *loop;
	ev_io io;
	ev_timer timer;
	int fd;
	enum glimpse_state state;
	struct sockaddr_in addr;
	struct soup_login login;
	double timeout;
	struct book *book; /* cleared, then filled */
	char session[SOUP_SESSION_LEN + 1]; /* Login Accepted's */
	uint64_t next_seq; /* End of Snapshot's */
	uint64_t messages, undecodable, anomalies;
	char error[160];
	void (*done)(struct glimpse *g); /* state GL_DONE or GL_FAILED */
	void *ctx;
	struct soup_parser parser;
	uint8_t rxbuf[3 + SOUP_MAX_PAYLOAD];
};

void glimpse_init(struct glimpse *g, struct ev_loop *loop, const struct sockaddr_in *addr,
		  const char *user, const char *password, double timeout);
/* Connects and logs in; done() is called once: from the loop, or before
 * glimpse_start() returns when no connection could even be tried. */
void glimpse_start(struct glimpse *g, struct book *book, void (*done)(struct glimpse *), void *ctx);
void glimpse_stop(struct glimpse *g); /* closes; no done() */
const char *glimpse_state_name(enum glimpse_state s);

struct feed {
	struct ev_loop *loop;
	struct feed_opts o;
	uint64_t now, started_ns;

	/* sockets */
	int fd[FEED_SIDES];
	ev_io io[FEED_SIDES];
	int joined[2];
	struct net_batch batch;
	struct sockaddr_in servers[RX_MAX_SERVERS];
	unsigned n_servers;

	/* the stream: one rx a trading day */
	struct mold_session first; /* day 1's session */
	uint32_t day; /* 0 until known */
	struct mold_session sess; /* the day's */
	uint64_t start_seq; /* the day's first sequence number applied */
	uint64_t eos_next; /* the day's End of Session (its next seq), 0: not seen */
	uint32_t later_day;
	uint64_t later_seen_ns; /* a later day heard while this one is incomplete */
	struct rx *rx;
	struct rx_stats rx_base; /* the days before this one */
	struct rx_rng rng;
	ev_timer rx_timer;
	uint64_t pos[2], advanced_ns[2]; /* per feed: one past the highest seen, when it moved */
	/* giving up: the lowest range asked since progress */
	int req_valid;
	uint64_t req_lo, req_hi, progress_next, progress_ns;

	/* delivery */
	struct book *book;
	FILE *record;
	int pause_all; /* hold every message (a --check snapshot is coming) */
	uint64_t pause_at; /* hold from this seq on, 0: no */
	uint64_t last_msg_ns;

	/* before the first snapshot: datagrams kept as they came */
	int buffering;
	uint8_t *pend;
	size_t pend_len, pend_cap;

	struct glimpse gl;
	struct sockaddr_in glimpse_addr;
	uint64_t start_snapshot_seq, start_snapshot_msgs; /* the first snapshot's */
	struct book *check_book;
	int check_phase; /* 0 none, 1 snapshot asked, 2 waiting for the feed, 3 done */
	unsigned check_tries;
	uint64_t check_deadline;
	int check_failed;
	char check_msg[400];

	ev_timer tick, stop_timer, retry_timer;
	ev_signal sigint, sigterm;
	double next_interval;
	int stopping, signals;
	int exit_code;

	struct feed_side_stats side[FEED_SIDES];
	struct feed_stats st;
};

/* stream.c */
int feed_stream_open(struct feed *f);
void feed_stream_close(struct feed *f);
/* The stream begins at (day, seq): a snapshot's position, or the first
 * packet's day from seq 1. */
void feed_stream_begin(struct feed *f, uint32_t day, uint64_t seq);
/* Replays the datagrams buffered during the first snapshot. */
void feed_stream_replay_pending(struct feed *f);
/* Every tick: giving up, the day change without an End of Session. */
void feed_stream_tick(struct feed *f);
/* After a change of pause: delivers what rx holds. */
void feed_stream_resume(struct feed *f);
void feed_stream_arm(struct feed *f);
uint64_t feed_stream_next(const struct feed *f); /* next seq to deliver, 0: none yet */
void feed_rx_stats(const struct feed *f, struct rx_stats *out); /* all days */

/* report.c */
void report_interval(struct feed *f, FILE *out);
void report_final(struct feed *f, FILE *out);
int report_book_out(const struct feed *f, const char *path);
const char *feed_side_name(enum feed_side s);

#endif
