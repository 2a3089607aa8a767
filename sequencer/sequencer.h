/* The sequencer: merges the gateways' MoldUDP64 command streams into one
 * total order, stamps each command with sequence number, term, time and
 * origin, journals it and multicasts it as the tape; serves retransmissions
 * of the tape from the journal; answers the control socket.
 *
 * A group of N nodes ([sequencer] peers, node_id) runs Raft (sequencer/raft.h,
 * the pure state machine) over one UDP control socket per node: the
 * primary sequences, journals, and replicates every batch of tape datagrams
 * to the standbys as APPENDs (each one an LSRF header followed by the very
 * tape datagram); an event is committed once a majority has journalled it,
 * and only then is it multicast on the tape. So the tape carries committed
 * events only: no receiver ever sees an event that a failover could undo,
 * and the commit position reaches the matchers with the events themselves
 * (every event's commit field is its own seq). Every node serves tape
 * retransmissions up to the commit it knows. Standbys drop the gateways'
 * command datagrams (keeping their addresses); a new primary asks each
 * gateway for what it has not journalled, so a command caught in a failover
 * is sequenced exactly once. A group of one (no peers) commits at once, as
 * a single node. Each start of a primary opens a new term with a TermStart
 * event. */
#ifndef LOCKSTEP_SEQUENCER_H
#define LOCKSTEP_SEQUENCER_H

#include <ev.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "daemon.h"
#include "moldudp64.h"

#define SEQ_MAX_GATEWAYS 256 /* gateway sessions one sequencer tracks */
#define SEQ_MAX_PEERS 9 /* members of a sequencer group (RAFT_MAX_NODES) */

/* [sequencer] keys; the table is seq_config_keys. */
struct seq_config {
	struct node_config node;
	char listen[64]; /* gateway commands, UDP "host:port" (port 0: any) */
	char retrans[64]; /* tape retransmission requests, UDP "host:port" */
	char tape_group[64]; /* multicast "group:port" of the tape */
	char tape_iface[64]; /* interface name or address the tape leaves by */
	char tape_group_b[64]; /* A/B: the tape's group on network B ("": A only) */
	char tape_iface_b[64]; /* network B's interface ("": tape_iface) */
	char tape_session[MOLD_SESSION_LEN + 1]; /* MoldUDP64 session of the tape */
	uint64_t tape_ttl;
	uint64_t heartbeat_ns; /* tape heartbeat when idle this long */
	uint64_t time_event_ns; /* a time event when nothing was sequenced this long (0: none) */
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
	/* The sequencer group (sequencer/raft.h). peers: every member's raft
	 * control UDP address, comma separated, index = node id; empty or one
	 * address: a group of one (the single-node sequencer). */
	uint64_t node_id;
	char peers[SEQ_MAX_PEERS * 48];
	char gateways[1024]; /* the hosts commands may come from ("": any member) */
	uint64_t election_min_ns, election_max_ns; /* randomized election timeout */
	uint64_t raft_heartbeat_ns; /* the primary's HEARTBEAT when idle this long */
	uint64_t standby_poll_ns; /* a non-primary reads the command socket this often; 0: as it comes */
	/* the tape's flow control (flow.c) */
	uint64_t flow_window; /* events the tape may run ahead of a receiver; 0: off */
	uint64_t flow_timeout_ns; /* a receiver not heard this long is forgotten */
	/* the trading day (day.c) */
	char end_of_day[16], start_of_day[16]; /* "HH:MM:SS" UTC, "": by lockstepctl only */
	uint64_t retention; /* days the live journal keeps (today's included); 0: all */
	char archive_dir[256]; /* where older days' segments go ("": removed) */
};

extern const struct config_key seq_config_keys[];
extern const struct config_spec seq_config_spec;

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
	uint64_t commands_not_member; /* well tagged, from a host not in [sequencer] gateways */
	uint64_t heartbeats_received;
	uint64_t tape_packets_sent;
	uint64_t tape_heartbeats_sent;
	uint64_t time_events; /* events of time alone, sequenced on an idle tape */
	uint64_t day_events; /* end and start of day events this node sequenced */
	uint64_t admin_events; /* operators' risk commands this node sequenced (admin.c) */
	uint64_t days_dropped; /* days that left the live journal (retention) */
	uint64_t journal_syncs; /* fsync = disk: background syncs that moved journal_durable */
	uint64_t journal_durable; /* fsync = disk: the last seq on this node's disk */
	uint64_t disk_full; /* times the journal found its disk full (then it stands down) */
	uint64_t commands_disk_full; /* command datagrams not sequenced while the disk was full */
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
	uint64_t retrans_budget_refused; /* answers cut short by [node] retrans_budget */
	uint64_t drops_injected; /* thrown away by the loss generator */
	uint64_t kernel_rcvbuf_errors; /* the host's UDP RcvbufErrors (/proc/net/snmp) */
	/* the group */
	uint64_t commands_ignored; /* command datagrams that reached a standby */
	uint64_t cmd_reads; /* times the command socket was read (a wakeup, or a standby_poll) */
	uint64_t cmd_polling; /* 1: the command socket is read by standby_poll (not primary) */
	uint64_t raft_received; /* well-formed raft datagrams */
	uint64_t raft_malformed; /* raft datagrams refused */
	uint64_t raft_not_member; /* well tagged, but not from the address of the node they name */
	uint64_t raft_sent;
	uint64_t raft_send_errors;
	uint64_t elections; /* elections this node started (new terms) */
	uint64_t prevotes;
	uint64_t votes_granted;
	uint64_t appends_received;
	uint64_t entries_replicated; /* journalled on behalf of a primary */
	uint64_t raft_requests_sent;
	uint64_t raft_requests_served;
	uint64_t truncations;
	uint64_t stale_ignored; /* raft messages of an older term */
	uint64_t terms_refused; /* raft messages of an impossible term (RAFT_TERM_STEP_MAX) */
	uint64_t stepdowns; /* check-quorum */
	uint64_t commit; /* highest committed seq known */
	/* a group's primary: a replicated tape datagram until its commit (a
	 * majority journalled it) and its multicast, in us, since start */
	uint64_t commit_us_p50, commit_us_p99, commit_us_max;
	uint64_t handovers; /* step-downs asked of this primary (control socket) */
	uint64_t handovers_abandoned; /* the standby did not take over in time */
	uint64_t timeout_now; /* hand-overs to this node: elections at once */
	uint64_t commands_handover; /* command datagrams dropped while handing over */
	uint64_t tape_send_waits; /* tape sends that waited for room in the socket */
	/* flow control (flow.c) */
	uint64_t flow_status_received, flow_status_bad;
	uint64_t flow_holds; /* times the tape stopped at the receivers' limit */
	uint64_t flow_receivers; /* receivers heard now */
	uint64_t flow_held; /* committed events not yet published */
	uint64_t flow_receiver_pauses; /* planned pauses receivers announced */
	uint64_t flow_receivers_behind; /* of those, not in step (flowtable.h) */
	/* A/B: the tape's copy on network B (common/abnet.h) */
	uint64_t tape_b_packets_sent, tape_b_send_errors;
};

#define SEQ_N_COUNTERS (sizeof(struct seq_stats) / sizeof(uint64_t))
extern const struct counter_def seq_counters[SEQ_N_COUNTERS];

/* Parses `peers` ("host:port,host:port,...", blanks around commas allowed)
 * into out[0..max-1]. Returns the number of members (0 for an empty list) or
 * -EINVAL (a bad address, an empty item) or -E2BIG (more than max). */
int seq_parse_peers(const char *peers, struct sockaddr_in *out, int max);

/* The raft control datagram between the members of a group: a fixed
 * SEQ_RAFT_WIRE_LEN-byte header, integers big-endian, followed for an
 * APPEND by one MoldUDP64 tape datagram (its entries: seq + 1 onwards):
 *   0  "LSRF"            magic
 *   4  u8 version (1)    5  u8 type (enum raft_msg_type)
 *   6  u8 flags          7  u8 from (node id)
 *   8  u8 to (node id, 0xff: every member)    9  u8 zero
 *   10 session[10]       the tape session, space padded: fences other clusters
 *   20 u64 term   28 u64 seq   36 u64 seq_term   44 u64 commit
 * Datagrams of another length (only an APPEND is longer), magic, version,
 * session, type, or a node id >= n_nodes are refused. */
#define SEQ_RAFT_WIRE_LEN 52
struct raft_msg;
size_t seq_raft_encode(uint8_t *out, const struct raft_msg *m, const struct mold_session *sess);
/* Decodes the header. Returns 0 or -EBADMSG; m->entries is NULL,
 * m->n_entries 0 (an APPEND's entries: seq_raft_decode_entries). */
int seq_raft_decode(const uint8_t *buf, size_t len, const struct mold_session *sess, int n_nodes,
		    struct raft_msg *m);
/* The entries of an APPEND datagram (buf, len: the whole datagram, decoded
 * by seq_raft_decode into m): the tape datagram after the header must be in
 * a day's session of the tape whose day 1 is sess (common/tapeday.h), and
 * hold well-formed events whose seq run from m->seq + 1, each entry's term
 * the event's. Fills out[0..max-1] (pointing into buf) and sets
 * m->entries and m->n_entries. Returns 0 or -EBADMSG. */
struct raft_entry;
/* The index (Event seq) of a tape datagram's first event; 0 when it has
 * none readable. */
uint64_t seq_dgram_first_index(const uint8_t *dg, size_t len);
int seq_raft_decode_entries(const uint8_t *buf, size_t len, const struct mold_session *sess,
			    struct raft_msg *m, struct raft_entry *out, unsigned max);

struct sequencer;

/* Opens the journal (logging what was cut), rebuilds the gateways' expected
 * sequence numbers from it, binds the sockets, journals and multicasts the TermStart of a new term and starts the
 * watchers on `loop`. cfg is copied. Returns 0 or a negative errno (logged). */
int seq_open(struct sequencer **out, struct ev_loop *loop, const struct seq_config *cfg);
/* Clean stop: sends what is built, flushes the journal, multicasts the end of
 * session and stops the watchers (the loop then has nothing left to run).
 * Idempotent. */
void seq_stop(struct sequencer *s);
/* Closes everything seq_open opened; accepts NULL. */
void seq_close(struct sequencer *s);

/* 1 after a fatal error (journal write failed): the daemon must exit 1. */
int seq_failed(const struct sequencer *s);

/* The sequencer as a daemon (common/daemon.h): seq_open, seq_stop and
 * seq_close, its control socket (STATUS, STATS, STEP_DOWN and the common
 * operations). */
extern const struct daemon_ops seq_daemon;
uint64_t seq_term(const struct sequencer *s);
uint64_t seq_last_seq(const struct sequencer *s); /* last sequenced, 0: none */
/* Bound ports (useful after configuring port 0). */
int seq_listen_port(const struct sequencer *s);
int seq_retrans_port(const struct sequencer *s);
void seq_get_stats(const struct sequencer *s, struct seq_stats *out);

#endif
