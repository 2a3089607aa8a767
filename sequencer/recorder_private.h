/* The tape recorder's parts (recorder.h): recorder.c the tape in, the
 * journal, the retransmission server and the daemon; recorder_repair.c the
 * repair group (request suppression). */
#ifndef LOCKSTEP_RECORDER_PRIVATE_H
#define LOCKSTEP_RECORDER_PRIVATE_H

#include <ev.h>
#include <netinet/in.h>
#include <stdint.h>

#include "abnet.h"
#include "journal.h"
#include "net.h"
#include "recorder.h"
#include "rx.h"
#include "tapeday.h"
#include "tapeserve.h"

enum rec_state { REC_CATCHING_UP, REC_LIVE, REC_STATE_MAX };

/* STATS, in this order (rec_stat_defs). */
struct rec_stats {
	uint64_t tape_packets, tape_malformed, tape_wrong_session, tape_fenced, tape_answers;
	uint64_t tape_too_old, tape_unrecoverable, events_journalled, events_malformed;
	uint64_t journal_errors, flow_status_ignored, retrans_auth_dropped;
	uint64_t tape_first_a, tape_first_b; /* A/B: whose copy came first */
	/* the repair group: requests heard (others'), answers multicast, heard
	 * requests not answered (a range answered within the hold-off), answers
	 * waiting for the journal, answer datagrams received from the group */
	uint64_t repair_heard, repair_answers, repair_answers_suppressed, repair_pending;
	uint64_t repair_data;
	uint64_t retrans_owed; /* unicast requests answered once the journal held them */
	/* the receiver's (rx) and the server's (tapeserve), copied in by rec_stats */
	uint64_t tape_gaps, tape_duplicates, tape_held, requests_sent, blocks_requested;
	uint64_t requests_suppressed;
	uint64_t retrans_requests, retrans_bad_requests, retrans_blocks_sent, retrans_packets_sent;
	uint64_t retrans_too_old, retrans_budget_refused, rxq_dropped, drops_injected;
	uint64_t retrans_bytes_sent, drops_injected_data, retrans_answers;
};


#define REC_RANGES 64 /* ranges remembered as answered, and waiting for the journal */

struct recorder {
	struct ev_loop *loop;
	const struct rec_config *cfg;
	enum rec_state state;
	struct journal *journal;
	uint64_t written; /* the last event written to the journal's file (served up to it) */
	int dirty; /* appended since the last flush */
	struct tapeday days; /* the wire's days: learnt from the journal and the tape */
	uint64_t term; /* the last event's */
	int heard;
	uint64_t now;

	int tape_fd, tape_b_fd, req_fd, srv_fd;
	ev_io tape_io, tape_b_io, req_io, srv_io;
	ev_timer rx_timer, tick;
	struct net_batch in; /* every socket's receive batch */
	struct rx *rx;
	struct rx_rng rng;
	struct rx_drop drop_tape, drop_req, drop_srv;
	struct sockaddr_in upstream[RX_MAX_SERVERS];
	unsigned n_upstream;
	uint64_t rxq_tape, rxq_tape_b, rxq_req, rxq_srv;
	struct ab_first first;
	struct tape_server srv;
	/* the repair group */
	int rep_fd;
	ev_io rep_io;
	struct sockaddr_in rep_group;
	struct sockaddr_in own; /* req_fd's address: our own requests, heard back, are not others' */
	struct rec_range {
		uint64_t lo, hi; /* [lo, hi] */
		uint64_t t; /* answered at, or owed since (mono ns) */
		struct sockaddr_in to; /* to whom (the repair group, or a requester) */
	} answered[REC_RANGES], pending[REC_RANGES]; /* pending: answers owed */
	unsigned answered_next, n_pending;
	struct rec_stats st;
};

/* recorder.c: the end of a wakeup (the journal written, held events offered
 * again, the state, the request timer; what waited for the journal sent). */
void rec_wakeup_end(struct recorder *r);

/* recorder_repair.c */
/* Joins [recorder] repair_group, when set (req_fd then sends multicast too). */
int rec_repair_open(struct recorder *r, const struct net_udp_options *o);
/* rep_fd's watcher. */
void rec_repair_read(struct ev_loop *loop, ev_io *w, int revents);
/* An answer owed: [lo, hi] to `to` once the journal holds it (at most
 * REC_RANGES, each for a second). */
void rec_owe(struct recorder *r, uint64_t lo, uint64_t hi, const struct sockaddr_in *to,
	     uint64_t now);
/* Sends the answers owed that the journal now holds. */
void rec_owed_drain(struct recorder *r, uint64_t now);

#endif
