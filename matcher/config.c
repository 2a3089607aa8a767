/* The matcher's configuration: the [node] and [matcher] keys of
 * struct matcher_config (matcher.h), with their defaults, ranges and help. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "creds.h"
#include "matcher_private.h"
#include "risk_admin.h"
#include "rxpath.h"

#define OFF(f) offsetof(struct matcher_config, f)
#define STR_(x) #x
#define STR(x) STR_(x) /* a number macro's value, in a help string */
static const struct config_key matcher_keys[] = {
	DAEMON_NODE_KEYS(struct matcher_config, node),
	RXPATH_TAPE_KEYS(struct matcher_config, "matcher"),
	{ "matcher", "partition", CONFIG_UINT, OFF(partition), 0, "0", 0, 1023, NULL,
	  "the partition this replica serves" },
	{ "matcher", "tape_group", CONFIG_STRING, OFF(tape_group), 64, NULL, 0, 0, NULL,
	  "multicast group:port of the tape" },
	{ "matcher", "tape_iface", CONFIG_STRING, OFF(tape_iface), 64, "127.0.0.1", 0, 0, NULL,
	  "interface (name or address) to receive the tape and send executions on" },
	{ "matcher", "tape_session", CONFIG_STRING, OFF(tape_session), 16, "TAPE", 0, 0, NULL,
	  "MoldUDP64 session name of the tape" },
	{ "matcher", "tape_retrans", CONFIG_STRING, OFF(tape_retrans),
	  sizeof(((struct matcher_config *)0)->tape_retrans), NULL, 0, 0, NULL,
	  "comma-separated host:port of the tape's retransmission servers, each sequencer "
	  "node (at most " STR(RX_MAX_SERVERS) "), asked in turn" },
	{ "matcher", "tape_group_b", CONFIG_STRING, OFF(tape_group_b), 64, "", 0, 0, NULL,
	  "A/B: the tape's multicast group:port on network B, joined beside tape_group; the "
	  "first copy of each datagram is taken (empty: network A only)" },
	{ "matcher", "tape_iface_b", CONFIG_STRING, OFF(tape_iface_b), 64, "", 0, 0, NULL,
	  "A/B: interface (name or address) of network B, receiving tape_group_b and sending "
	  "exec_group_b (empty: tape_iface)" },
	{ "matcher", "exec_group_b", CONFIG_STRING, OFF(exec_group_b), 64, "", 0, 0, NULL,
	  "A/B: multicast group:port of this partition's execution stream on network B, every "
	  "datagram sent on both (empty: network A only)" },
	{ "matcher", "tape_recorders", CONFIG_STRING, OFF(tape_recorders),
	  sizeof(((struct matcher_config *)0)->tape_recorders), "", 0, 0, NULL,
	  "comma-separated host:port of the tape recorders near this replica (lockstep-recorder's "
	  "retrans): a gap is asked of them first, of tape_retrans (the sequencers) only when "
	  "they cannot answer; with tape_retrans at most " STR(RX_MAX_SERVERS) " (empty: none)" },
	{ "matcher", "exec_group", CONFIG_STRING, OFF(exec_group), 64, NULL, 0, 0, NULL,
	  "multicast group:port of this partition's execution stream" },
	{ "matcher", "exec_retrans", CONFIG_STRING, OFF(exec_retrans), 64, NULL, 0, 0, NULL,
	  "host:port where this replica serves execution retransmissions" },
	{ "matcher", "symbols", CONFIG_STRING, OFF(symbols), 512,
	  "AAPL MSFT AMZN GOOG META NVDA TSLA INTC", 0, 0, NULL,
	  "the symbols this partition trades, separated by spaces" },
	{ "matcher", "risk_file", CONFIG_STRING, OFF(risk_file), 256, "", 0, 0, NULL,
	  "pre-trade limits per firm and per user and reference prices, one a line: "
	  "firm NAME LIMIT..., user NAME LIMIT..., reference SYMBOL PRICE (read at start; "
	  "every replica of a partition holds the same; change them at run time with "
	  "lockstepctl risk, through the tape)" },
	{ "matcher", "max_shares", CONFIG_UINT, OFF(max_shares), 0, "1000000", 1, 4294967295.0,
	  NULL, "largest order size; larger orders are rejected" },
	{ "matcher", "max_orders", CONFIG_UINT, OFF(max_orders), 0, "1048576", 16, 1 << 28, NULL,
	  "open orders at once (preallocated)" },
	{ "matcher", "max_tokens", CONFIG_UINT, OFF(max_tokens), 0, "4194304", 16, 1 << 30, NULL,
	  "order tokens remembered, live and recently dead, above max_orders (preallocated); "
	  "when full the oldest dead token is forgotten" },
	{ "matcher", "max_user_tokens", CONFIG_UINT, OFF(max_user_tokens), 0, "0", 0, 1 << 30,
	  NULL,
	  "order tokens remembered per login, live and dead (0: no quota); a login holding "
	  "this many forgets its own oldest dead token for a new one, so that its churn does "
	  "not forget other logins' tokens, and is rejected 'q' when all are live; every "
	  "replica of a partition must have the same" },
	{ "matcher", "max_levels", CONFIG_UINT, OFF(max_levels), 0, "4096", 4, 1 << 20, NULL,
	  "price levels per side per symbol" },
	{ "matcher", "ring", CONFIG_UINT, OFF(ring), 0, "1048576", 1024, 1 << 26, NULL,
	  "execution blocks kept in memory for retransmission" },
	{ "matcher", "rcvbuf", CONFIG_SIZE, OFF(rcvbuf), 0, "64M", 0, 0, NULL,
	  "receive buffer of the tape sockets (SO_RCVBUFFORCE, else capped by rmem_max): what "
	  "absorbs a replica's slow moments (a snapshot) before flow control holds the tape" },
	{ "matcher", "sndbuf", CONFIG_SIZE, OFF(sndbuf), 0, "4M", 0, 0, NULL,
	  "send buffer of the execution socket" },
	{ "matcher", "heartbeat", CONFIG_DURATION, OFF(heartbeat_ns), 0, "100ms", 0, 0, NULL,
	  "execution stream heartbeat interval when idle" },
	{ "matcher", "batch", CONFIG_UINT, OFF(batch), 0, "64", 1, 1024, NULL,
	  "datagrams per recvmmsg/sendmmsg" },
	{ "matcher", "snapshot_interval", CONFIG_UINT, OFF(snapshot_interval), 0, "1000000", 0,
	  1e15, NULL, "write a snapshot every this many tape seqs (0: only on request)" },
	{ "matcher", "snapshot_keep", CONFIG_UINT, OFF(snapshot_keep), 0, "3", 1, 1000, NULL,
	  "snapshots kept in <state_dir>/snapshots (older ones are deleted)" },
	{ "matcher", "max_datagram", CONFIG_UINT, OFF(max_datagram), 0, "1472", 64, 65507, NULL,
	  "largest execution datagram" },
	{ "matcher", "checkpoint_interval", CONFIG_UINT, OFF(checkpoint_interval), 0, "1000", 0,
	  1e15, NULL,
	  "multicast the state hash every this many tape seqs and compare it with the other "
	  "replicas' (0: off)" },
	{ "matcher", "checkpoint_group", CONFIG_STRING, OFF(checkpoint_group), 64, "", 0, 0, NULL,
	  "multicast group:port the partition's replicas exchange checkpoints on (default: "
	  "exec_group's address + 1, exec_group's port)" },
	{ "matcher", "replica_hosts", CONFIG_STRING, OFF(replica_hosts), 512, "", 0, 0, NULL,
	  "the hosts of this partition's replicas (their tape_iface addresses), comma "
	  "separated: checkpoint votes from any other host are dropped and counted "
	  "(checkpoints_not_member) even when their tag is good (empty: any host with the key)" },
	{ "matcher", "replicas", CONFIG_UINT, OFF(replicas), 0, "1", 1, CKPT_PEERS, NULL,
	  "replicas of this partition: a majority of them (replicas / 2 + 1) that agrees on "
	  "another state hash at a checkpoint stops this one (1: never outvoted)" },
	{ "matcher", "replica", CONFIG_UINT, OFF(replica), 0, "0", 0, CKPT_PEERS - 1, NULL,
	  "this replica's index in its partition (0..replicas-1): staggers the replicas' "
	  "snapshots over snapshot_interval, so that they never write one at once" },
	{ "matcher", "flow_status_every", CONFIG_UINT, OFF(flow_status_every), 0, "2048", 0,
	  1 << 24, NULL,
	  "while live, tell the sequencers how far this replica has applied the tape every this "
	  "many events (and every 100 ms), so that the tape never runs further ahead of it than "
	  "their flow_window (0: never: this replica may drop tape datagrams when it falls behind)" },
	{ "feed", "a_group", CONFIG_STRING, OFF(feed_a_group), 64, "", 0, 0, NULL,
	  "multicast group:port of this partition's ITCH 5.0 feed A (replica 0 publishes it; "
	  "empty, with b_group, for no feed)" },
	{ "feed", "b_group", CONFIG_STRING, OFF(feed_b_group), 64, "", 0, 0, NULL,
	  "multicast group:port of feed B, the same stream (replica 1 publishes it)" },
	{ "feed", "session", CONFIG_STRING, OFF(feed_session), 16, "ITCH", 0, 0, NULL,
	  "MoldUDP64 session of the feed's first trading day (later days: its first 4 "
	  "characters and the day in 6 digits)" },
	{ "feed", "retrans", CONFIG_STRING, OFF(feed_retrans), 64, "", 0, 0, NULL,
	  "host:port where this replica answers the feed's MoldUDP64 retransmission requests "
	  "(empty: none)" },
	{ "feed", "glimpse", CONFIG_STRING, OFF(feed_glimpse), 64, "", 0, 0, NULL,
	  "host:port (TCP) of this replica's GLIMPSE 5.0 snapshot server: SoupBinTCP, the "
	  "displayed book and the feed's next sequence number (needs a_group or b_group; "
	  "empty: none)" },
	{ "feed", "logins", CONFIG_STRING, OFF(feed_logins), 256, "", 0, 0, NULL,
	  "GLIMPSE logins: a credentials file as the gateway's (lockstepctl passwd; "
	  "empty: every login is rejected)" },
	{ "feed", "glimpse_max", CONFIG_UINT, OFF(feed_glimpse_max), 0, "16", 1, 1024, NULL,
	  "GLIMPSE sessions at once (one more connection is closed at once)" },
	{ "feed", "glimpse_login_timeout", CONFIG_DURATION, OFF(feed_glimpse_login_timeout_ns), 0,
	  "5s", 1e8, 3600e9, NULL,
	  "a GLIMPSE connection that has not sent its Login Request this long after it "
	  "connected is closed (feed_glimpse_login_timeouts)" },
	{ "feed", "glimpse_idle_timeout", CONFIG_DURATION, OFF(feed_glimpse_idle_timeout_ns), 0,
	  "15s", 1e8, 3600e9, NULL,
	  "a GLIMPSE session whose client is silent this long, or whose socket takes nothing "
	  "of what it is owed this long (a client that does not read), is closed "
	  "(feed_glimpse_idle_timeouts, feed_glimpse_write_stalls)" },
	{ "feed", "locate_base", CONFIG_UINT, OFF(feed_locate_base), 0, "1", 1, 65535, NULL,
	  "stock locate code of the first of [matcher] symbols (the others follow in order); "
	  "give each partition its own range" },
	{ "feed", "ring", CONFIG_UINT, OFF(feed_ring), 0, "1048576", 1024, 1 << 26, NULL,
	  "feed messages kept in memory for retransmission" },
	{ "feed", "takeover", CONFIG_DURATION, OFF(feed_takeover_ns), 0, "500ms", 1e6, 600e9,
	  NULL,
	  "a feed silent this long (times this replica's rank among its standbys) is taken "
	  "over by this replica; it stands down when it hears another publisher" },
	{ "matcher", "test_fault_diverge_at", CONFIG_UINT, OFF(test_fault_diverge_at), 0, "0", 0,
	  0, NULL,
	  "tests only: after the event at this tape seq, book an order that is not on the "
	  "tape, so that this replica diverges (0: off)" },
	{ "matcher", "test_snapshot_pause", CONFIG_DURATION, OFF(test_snapshot_pause_ns), 0, "0s",
	  0, 10e9, NULL,
	  "tests only: every snapshot stops the loop this much longer, as a large book's "
	  "serialization does (0: off)" },
	CONFIG_END,
};

const struct config_spec matcher_config_spec = { .keys = matcher_keys };

int matcher_config_check(const void *config, char *err, size_t errlen)
{
	const struct matcher_config *cfg = config;
	struct engine_admin_cmd *risk;
	size_t n;
	int r;

	if (cfg->max_tokens <= cfg->max_orders) {
		snprintf(err, errlen,
			 "[matcher] max_tokens (%" PRIu64 ") must be above max_orders (%" PRIu64
			 "): the tokens of the live orders and of the recently dead ones share "
			 "the table",
			 cfg->max_tokens, cfg->max_orders);
		return -EINVAL;
	}
	if (cfg->feed_glimpse[0] && !cfg->feed_a_group[0] && !cfg->feed_b_group[0]) {
		snprintf(err, errlen, "[feed] glimpse needs the feed: a_group or b_group");
		return -EINVAL;
	}
	/* the risk file reads (risk.h): --check-config catches a bad one */
	if ((r = risk_file_load(cfg->risk_file, &risk, &n, err, errlen)) < 0)
		return r;
	free(risk);
	/* and the GLIMPSE logins (creds.h) */
	if (cfg->feed_glimpse[0] && cfg->feed_logins[0]) {
		struct creds c = { 0 };
		char why[512];

		r = creds_load(&c, cfg->feed_logins, why, sizeof(why));
		creds_fini(&c);
		if (r < 0) {
			snprintf(err, errlen, "[feed] logins: %s", why);
			return r;
		}
	}
	return 0;
}

