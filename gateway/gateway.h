/* lockstep-gateway: terminates the clients' SoupBinTCP 4.0 / OUCH 4.2
 * sessions, turns each inbound OUCH message into a lockstep.Command in the
 * gateway's MoldUDP64 command stream to the sequencer (journalled, resent
 * until seen on the tape), routed to the matcher partition that trades its
 * symbol, and relays the partitions' execution streams back to the owning
 * login as SoupBinTCP sequenced data (journalled per login, so a client can
 * resume after a disconnect or a gateway restart). */
#ifndef LOCKSTEP_GATEWAY_H
#define LOCKSTEP_GATEWAY_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "creds.h"
#include "daemon.h"
#include "routes.h"

#define GW_MAX_EXEC_RETRANS 9 /* addresses in [gateway] exec_retrans: a partition of up to 9 replicas (RX_MAX_SERVERS) */
#define GW_MAX_SEQUENCERS 9 /* addresses in [gateway] sequencer: a group of up to 9 */
#define GW_MAX_PARTITIONS 16 /* [gateway] partitions; [partition1]..[partition15] */
#define GW_SYMBOLS_LEN 512 /* a partition's symbols list */
#define GW_MAX_TAPES 4 /* [gateway] tapes; [tape1]..[tape3] */

/* One tape: a sequencer group, the command stream to it and the tape it
 * multicasts. Tape 0's keys are in [gateway], tape K's (1 <= K < tapes)
 * the same keys in section [tapeK]. */
struct gw_tape_config {
	char sequencer[512]; /* comma-separated host:port of each sequencer node's
				command listener (1..GW_MAX_SEQUENCERS) */
	char tape_group[64];
	char tape_session[16];
	char tape_retrans[512]; /* comma-separated host:port list (1..RX_MAX_SERVERS) */
	char tape_recorders[512]; /* the tape recorders near it, asked first ("": none) */
	char tape_group_b[64]; /* A/B: the tape's group on network B ("": A only) */
};

/* One matcher partition as the gateway sees it: partition 0's keys are
 * [gateway] symbols, exec_group, exec_session and exec_retrans, partition
 * N's (1 <= N < partitions) the same keys in section [partitionN]. */
struct gw_part_config {
	char symbols[GW_SYMBOLS_LEN]; /* separated by blanks or commas; "" : not listed */
	char exec_group[64]; /* its execution stream's multicast group:port */
	char exec_session[16]; /* its MoldUDP64 session, EXEC<N> */
	char exec_retrans[512]; /* its replicas' retransmission host:port list */
	char exec_group_b[64]; /* A/B: the stream's group on network B ("": A only) */
	uint64_t tape; /* the tape (sequencer group) its commands go to; partition 0: 0 */
};

/* [gateway] and [node]; durations in ns, sizes in bytes. */
struct gw_config {
	struct node_config node;
	char ouch_listen[64]; /* host:port of the SoupBinTCP listener (port 0: any) */
	uint64_t tapes; /* 1..GW_MAX_TAPES */
	struct gw_tape_config tape[GW_MAX_TAPES]; /* [0]: the [gateway] keys */
	char cmd_bind[64]; /* local address of the command sockets */
	char tape_iface[64];
	char tape_iface_b[64]; /* network B's interface ("": tape_iface) */
	uint64_t ab_wait; /* A/B: a gap waits this long for the other network's copy */
	uint64_t partitions; /* 1..GW_MAX_PARTITIONS */
	struct gw_part_config part[GW_MAX_PARTITIONS]; /* [0]: the [gateway] keys */
	uint64_t max_tokens; /* order tokens remembered for routing (partitions > 1) */
	char soup_session[16]; /* "" : "LS" + YYYYMMDD of the start day */
	char credentials[256];
	uint64_t heartbeat; /* SoupBinTCP server heartbeat interval */
	uint64_t idle_timeout; /* a silent client is dropped after this */
	uint64_t cmd_heartbeat; /* command stream heartbeat when idle */
	uint64_t resend_timeout; /* a command not on the tape by then is resent */
	uint64_t wal_checkpoint; /* fsync = disk: login journals synced this often (wal.c) */
	uint64_t wal_segment; /* fsync = disk: sessions.wal's segment size */
	uint64_t retrans_timeout; /* first back-off of a gap request (then doubled) */
	uint64_t retrans_timeout_max; /* back-off cap */
	uint64_t request_delay; /* first request of a gap: random in [0, this] */
	uint64_t reorder_window, reorder_bytes; /* blocks held ahead of a gap, per stream */
	double drop_rate; /* loss generator on every receive path, 0: off */
	uint64_t drop_seed;
	uint64_t max_sessions;
	uint64_t max_sessions_per_address; /* connections from one IPv4 address at once */
	uint64_t login_timeout; /* a connection not logged in by then is closed */
	uint64_t login_rate; /* Enter and Replace Orders a second per login (0: no limit) */
	uint64_t login_burst; /* the token bucket's depth */
	uint64_t login_queue; /* messages held past the rate before Rejected */
	/* failed logins (lockout.h): failures that lock a (login, address)
	 * pair and an address, within login_failure_window, for login_lockout;
	 * the delay before a failure's answer, doubled per failure up to
	 * login_backoff_max; the table's entries */
	uint64_t login_failures_before_lockout, login_address_failures_before_lockout;
	uint64_t login_failure_window, login_lockout, login_backoff, login_backoff_max;
	uint64_t login_lockout_entries;
	uint64_t max_pending_logins; /* Login Requests in or waiting for verification */
	uint64_t login_verify_threads;
	uint64_t max_in_flight; /* commands sent and not yet applied by their matcher */
	uint64_t flow_stall; /* the window may stay full this long without progress */
	uint64_t max_datagram;
	uint64_t send_batch; /* datagrams per sendmmsg */
	uint64_t recv_batch; /* datagrams per recvmmsg */
	uint64_t out_buffer; /* per-session output buffer */
	uint64_t resend_max; /* commands resent per round */
	uint64_t rcvbuf;
	int fsync; /* [gateway] fsync: index into gw_fsync_modes (disk, none) */
};

/* The key table of [node] and [gateway], CONFIG_END terminated. */
extern const struct config_key gw_config_keys[];
extern const struct config_spec gw_config_spec;

/* "LS" + YYYYMMDD of the local day of `t` (out holds 11). */
void gw_default_session(char out[11], time_t t);

struct gw;

/* Opens every socket and journal and starts the watchers on loop; cfg is
 * copied. Returns 0 or a negative errno (the cause is logged). */
int gw_open(struct gw **out, struct ev_loop *loop, const struct gw_config *cfg);
/* Sends End of Session to every client, flushes, stops the watchers so the
 * loop can return. */
void gw_stop(struct gw *g);
/* Flushes the journals and the progress file and frees; accepts NULL. */
void gw_close(struct gw *g);
/* The bound SoupBinTCP port (for port 0 in ouch_listen). */
int gw_ouch_port(const struct gw *g);

/* The gateway as a daemon (common/daemon.h): STATUS, STATS and the common
 * operations on its control socket; --check-config checks the partitions. */
extern const struct daemon_ops gw_daemon;

#endif
