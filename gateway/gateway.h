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
#include "daemon.h"

#define GW_LOGIN_LEN 6 /* SoupBinTCP username */
#define GW_PASSWORD_LEN 10 /* SoupBinTCP password */
#define GW_FIRM_LEN 4 /* OUCH firm */
#define GW_MAX_EXEC_RETRANS 8 /* addresses in [gateway] exec_retrans */
#define GW_MAX_SEQUENCERS 9 /* addresses in [gateway] sequencer: a group of up to 9 */
#define GW_MAX_PARTITIONS 16 /* [gateway] partitions; [partition1]..[partition15] */
#define GW_SYMBOLS_LEN 512 /* a partition's symbols list */

/* One matcher partition as the gateway sees it: partition 0's keys are
 * [gateway] symbols, exec_group, exec_session and exec_retrans, partition
 * N's (1 <= N < partitions) the same keys in section [partitionN]. */
struct gw_part_config {
	char symbols[GW_SYMBOLS_LEN]; /* separated by blanks or commas; "" : not listed */
	char exec_group[64]; /* its execution stream's multicast group:port */
	char exec_session[16]; /* its MoldUDP64 session, EXEC<N> */
	char exec_retrans[512]; /* its replicas' retransmission host:port list */
};

/* [gateway] and [node]; durations in ns, sizes in bytes. */
struct gw_config {
	struct node_config node;
	char ouch_listen[64]; /* host:port of the SoupBinTCP listener (port 0: any) */
	char sequencer[512]; /* comma-separated host:port of each sequencer node's
				command listener (1..GW_MAX_SEQUENCERS) */
	char cmd_bind[64]; /* local address of the command socket */
	char tape_group[64];
	char tape_iface[64];
	char tape_session[16];
	char tape_retrans[512]; /* comma-separated host:port list (1..RX_MAX_SERVERS) */
	uint64_t partitions; /* 1..GW_MAX_PARTITIONS */
	struct gw_part_config part[GW_MAX_PARTITIONS]; /* [0]: the [gateway] keys */
	uint64_t max_tokens; /* order tokens remembered for routing (partitions > 1) */
	char soup_session[16]; /* "" : "LS" + YYYYMMDD of the start day */
	char credentials[256];
	uint64_t heartbeat; /* SoupBinTCP server heartbeat interval */
	uint64_t idle_timeout; /* a silent client is dropped after this */
	uint64_t cmd_heartbeat; /* command stream heartbeat when idle */
	uint64_t resend_timeout; /* a command not on the tape by then is resent */
	uint64_t retrans_timeout; /* first back-off of a gap request (then doubled) */
	uint64_t retrans_timeout_max; /* back-off cap */
	uint64_t request_delay; /* first request of a gap: random in [0, this] */
	uint64_t reorder_window, reorder_bytes; /* blocks held ahead of a gap, per stream */
	double drop_rate; /* loss generator on every receive path, 0: off */
	uint64_t drop_seed;
	uint64_t max_sessions;
	uint64_t max_datagram;
	uint64_t send_batch; /* datagrams per sendmmsg */
	uint64_t recv_batch; /* datagrams per recvmmsg */
	uint64_t out_buffer; /* per-session output buffer */
	uint64_t resend_max; /* commands resent per round */
	uint64_t rcvbuf;
	int fsync; /* journal fsync policy: none, interval, batch */
};

/* The key table of [node] and [gateway], CONFIG_END terminated. */
extern const struct config_key gw_config_keys[];
extern const struct config_spec gw_config_spec;

/* One line of the credentials file's [logins] section:
 *     LOGIN = PASSWORD FIRM [cancel_on_disconnect]
 * LOGIN: 1..6 alphanumerics, PASSWORD: 1..10 alphanumerics, FIRM: 1..4
 * alphanumerics. Login and firm are kept upper-case; SoupBinTCP compares
 * usernames and passwords without regard to case. */
struct gw_cred {
	char login[GW_LOGIN_LEN + 1];
	char password[GW_PASSWORD_LEN + 1];
	char firm[GW_FIRM_LEN + 1];
	int cancel_on_disconnect;
};

struct gw_creds {
	struct gw_cred *v;
	size_t n, cap;
};

/* Parses one entry into *out; -EINVAL with err set when malformed. */
int gw_cred_parse(const char *login, const char *value, struct gw_cred *out, char *err,
		  size_t errlen);
/* Adds one entry (duplicate logins are an error). */
int gw_creds_add(struct gw_creds *c, const char *login, const char *value, char *err,
		 size_t errlen);
/* Loads the INI file at path (a [logins] section, nothing else); err says
 * file:line: what is wrong. An empty file is valid (no logins). */
int gw_creds_load(struct gw_creds *c, const char *path, char *err, size_t errlen);
/* The entry for a username (case-insensitive, trailing spaces ignored), or NULL. */
const struct gw_cred *gw_creds_find(const struct gw_creds *c, const char *login);
void gw_creds_fini(struct gw_creds *c); /* accepts a zeroed struct */

/* ---- routing (creds.c) ----------------------------------------------------
 * Which partition a command goes to. An Enter Order goes to the partition
 * whose symbols list its symbol; when no partition lists symbols, to
 * gw_symbol_hash(symbol) % partitions. Cancel, Replace and Modify carry no
 * symbol: they go where their order token went, which the token table
 * remembers per login (partitions > 1 only; one partition needs no table). */
struct gw_routes;

/* Checks the partitions of cfg (every partition below `partitions` has an
 * exec_group and exec_retrans, none above is configured, symbols listed
 * for every partition or for none, no symbol twice, distinct exec groups)
 * and builds the tables; err says what is wrong ([section] key: why). */
int gw_routes_open(struct gw_routes **out, const struct gw_config *cfg, char *err,
		   size_t errlen);
void gw_routes_close(struct gw_routes *r); /* accepts NULL */
unsigned gw_routes_parts(const struct gw_routes *r);
/* 1 when the partitions list their symbols (a symbol listed nowhere is
 * refused), 0 when symbols are spread by hash. */
int gw_routes_listed(const struct gw_routes *r);
/* FNV-1a (32 bits) of the symbol's characters without trailing blanks. */
uint32_t gw_symbol_hash(const char *stock, size_t len);
/* The partition of a symbol (len bytes, trailing blanks or NULs ignored),
 * or -ENOENT when symbols are listed and no partition lists it. */
int gw_route_symbol(const struct gw_routes *r, const char *stock, size_t len);
/* The partition remembered for (login, token), or -ENOENT. login: any
 * number that names the login for the day (the gateway's login index);
 * token: len bytes, trailing blanks or NULs ignored. */
int gw_route_token(const struct gw_routes *r, uint32_t login, const char *token, size_t len);
/* Remembers (login, token) -> part: 0, -EEXIST when known (the first
 * partition stays), -ENOSPC when the table is full (`slack` 0: an
 * Enter Order, which may fill max_tokens; 1: a replacement token or one
 * learned from an execution stream, which may use the table's slack, up
 * to 3/4 of its slots), -EINVAL with one partition (no table). */
int gw_route_add(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		 unsigned part, int slack);
/* 1 when an Enter Order's new token cannot be remembered. */
int gw_route_full(const struct gw_routes *r);
uint64_t gw_route_count(const struct gw_routes *r); /* tokens remembered */

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
