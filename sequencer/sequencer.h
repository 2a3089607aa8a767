/* The sequencer: merges the gateways' MoldUDP64 command streams into one
 * total order, stamps each command with sequence number, term, time and
 * origin, journals it and multicasts it as the tape; serves retransmissions
 * of the tape from the journal; answers the control socket.
 *
 * Single node for now: the node is always the primary, an event is committed
 * once it is journalled (commit == its own seq), and every start opens a new
 * term (last journalled term + 1) with a TermStart event. */
#ifndef LOCKSTEP_SEQUENCER_H
#define LOCKSTEP_SEQUENCER_H

#include <ev.h>
#include <stdint.h>

#include "config.h"
#include "daemon.h"
#include "moldudp64.h"

#define SEQ_MAX_GATEWAYS 256 /* gateway sessions one sequencer tracks */

/* [sequencer] keys; the table is seq_config_keys. */
struct seq_config {
	struct node_config node;
	char listen[64]; /* gateway commands, UDP "host:port" (port 0: any) */
	char retrans[64]; /* tape retransmission requests, UDP "host:port" */
	char tape_group[64]; /* multicast "group:port" of the tape */
	char tape_iface[64]; /* interface name or address the tape leaves by */
	char tape_session[MOLD_SESSION_LEN + 1]; /* MoldUDP64 session of the tape */
	uint64_t tape_ttl;
	uint64_t heartbeat_ns; /* tape heartbeat when idle this long */
	int fsync; /* enum journal_fsync */
	uint64_t fsync_interval_ns;
	uint64_t segment_size;
	uint64_t rcvbuf, sndbuf;
	uint64_t max_datagram; /* largest tape datagram sent and command datagram taken */
	uint64_t batch; /* recvmmsg slots per call */
	uint64_t drain; /* recvmmsg calls per wakeup at most */
	uint64_t request_interval_ns; /* first back-off of a gap request (then doubled) */
	uint64_t retrans_packets; /* packets per retransmission answer at most */
	/* the gateways' streams' loss recovery (common/rx.h); 0: a default */
	uint64_t request_interval_max_ns; /* back-off cap */
	uint64_t request_delay_ns; /* first request of a gap: random in [0, this] */
	uint64_t reorder_window; /* commands held ahead of a gap, per gateway */
	uint64_t reorder_bytes; /* their memory, per gateway */
	double drop_rate; /* loss generator on every receive path, 0: off */
	uint64_t drop_seed;
};

extern const struct config_key seq_config_keys[];

/* Every counter, in the order STATS reports them (seq_counter_names). */
struct seq_stats {
	uint64_t packets_received; /* command datagrams, including malformed */
	uint64_t commands_received; /* message blocks in well-formed datagrams */
	uint64_t commands_sequenced;
	uint64_t duplicates; /* blocks already sequenced or held */
	uint64_t gaps; /* missing ranges found in the gateways' streams */
	uint64_t gap_requests_sent; /* request packets to gateways */
	uint64_t malformed_packets;
	uint64_t oversize_commands; /* empty, or too long for one tape datagram */
	uint64_t gateways_full; /* datagrams from a gateway past SEQ_MAX_GATEWAYS */
	uint64_t heartbeats_received;
	uint64_t tape_packets_sent;
	uint64_t tape_heartbeats_sent;
	uint64_t tape_send_errors;
	uint64_t retrans_requests; /* well-formed requests served */
	uint64_t retrans_bad_requests; /* wrong length or session */
	uint64_t retrans_blocks_sent;
	uint64_t retrans_packets_sent;
	uint64_t journal_bytes;
	uint64_t gateways; /* sessions in the table */
	uint64_t rxq_dropped; /* kernel drops on our sockets (SO_RXQ_OVFL) */
	uint64_t commands_held; /* blocks kept ahead of a gap */
	uint64_t commands_overflow; /* blocks that did not fit the reorder window */
	uint64_t gap_blocks_requested; /* commands asked for, summed over requests */
	uint64_t gateway_answers; /* datagrams on the request socket */
	uint64_t gateway_too_old; /* a gateway's too-old answer (common/rx.h) */
	uint64_t commands_lost; /* given up: no gateway journal holds them any more */
	uint64_t retrans_too_old; /* tape requests older than the journal, told so */
	uint64_t drops_injected; /* thrown away by the loss generator */
	uint64_t kernel_rcvbuf_errors; /* the host's UDP RcvbufErrors (/proc/net/snmp) */
};

#define SEQ_N_COUNTERS (sizeof(struct seq_stats) / sizeof(uint64_t))
extern const char *const seq_counter_names[SEQ_N_COUNTERS];

struct sequencer;

/* Opens the journal (logging what was cut), rebuilds the gateways' expected
 * sequence numbers from it, binds the sockets, opens the control socket,
 * journals and multicasts the TermStart of a new term and starts the
 * watchers on `loop`. cfg is copied. Returns 0 or a negative errno (logged). */
int seq_open(struct sequencer **out, struct ev_loop *loop, const struct seq_config *cfg);
/* Clean stop: sends what is built, flushes the journal, multicasts the end of
 * session and stops the watchers (the loop then has nothing left to run).
 * Idempotent. */
void seq_shutdown(struct sequencer *s);
/* Closes everything seq_open opened; accepts NULL. */
void seq_close(struct sequencer *s);

/* 1 after a fatal error (journal write failed): the daemon must exit 1. */
int seq_failed(const struct sequencer *s);
uint64_t seq_term(const struct sequencer *s);
uint64_t seq_last_seq(const struct sequencer *s); /* last sequenced, 0: none */
/* Bound ports (useful after configuring port 0). */
int seq_listen_port(const struct sequencer *s);
int seq_retrans_port(const struct sequencer *s);
void seq_get_stats(const struct sequencer *s, struct seq_stats *out);

#endif
