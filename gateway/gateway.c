/* The gateway's top: configuration, opening the parts bottom up and closing
 * them top down, the per-iteration flush, the tick and control (the progress
 * file: progress.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include <sodium.h>

#include "ctl.h"
#include "gw_private.h"
#include "journal.h"

/* [gateway] fsync, by what each promises (lockstep-gateway(8)) */
static const char *const fsync_names[] = { "disk", "none", NULL };
const enum journal_fsync gw_fsync_modes[] = { JOURNAL_FSYNC_DISK, JOURNAL_FSYNC_NONE };

#define GW_STR_(x) #x
#define GW_STR(x) GW_STR_(x) /* a number macro's value, in a help string */

#define GWS(key, def, help) \
	{ "gateway", #key, CONFIG_STRING, offsetof(struct gw_config, key), \
	  sizeof(((struct gw_config *)0)->key), def, 0, 0, NULL, help }
#define GWD(key, def, help) \
	{ "gateway", #key, CONFIG_DURATION, offsetof(struct gw_config, key), 0, def, 0, 0, \
	  NULL, help }
#define GWU(key, def, lo, hi, help) \
	{ "gateway", #key, CONFIG_UINT, offsetof(struct gw_config, key), 0, def, lo, hi, NULL, \
	  help }
#define GWZ(key, def, lo, hi, help) \
	{ "gateway", #key, CONFIG_SIZE, offsetof(struct gw_config, key), 0, def, lo, hi, NULL, \
	  help }

/* A key of partition n's, in section sec (partition 0: [gateway]). */
#define GWP(sec, n, key, def, help) \
	{ sec, #key, CONFIG_STRING, offsetof(struct gw_config, part[n].key), \
	  sizeof(((struct gw_part_config *)0)->key), def, 0, 0, NULL, help }
#define GW_PART(n) \
	GWP("partition" #n, n, symbols, "", "partition " #n "'s symbols (as [gateway] symbols)"), \
	GWP("partition" #n, n, exec_group, "", \
	    "partition " #n "'s execution stream group:port (required below partitions)"), \
	GWP("partition" #n, n, exec_session, "EXEC" #n, "partition " #n "'s MoldUDP64 session"), \
	GWP("partition" #n, n, exec_retrans, "", \
	    "partition " #n "'s replicas' retransmission host:port list (required below " \
	    "partitions)"), \
	GWP("partition" #n, n, exec_group_b, "", \
	    "A/B: partition " #n "'s execution stream group:port on network B (empty: A only)"), \
	{ "partition" #n, "tape", CONFIG_UINT, offsetof(struct gw_config, part[n].tape), 0, "0", 0, \
	  GW_MAX_TAPES - 1, NULL, \
	  "partition " #n "'s tape: the sequencer group its commands go to (below [gateway] tapes)" }

/* A key of tape k's, in section sec (tape 0: [gateway]). */
#define GWT(sec, k, key, def, help) \
	{ sec, #key, CONFIG_STRING, offsetof(struct gw_config, tape[k].key), \
	  sizeof(((struct gw_tape_config *)0)->key), def, 0, 0, NULL, help }
#define GW_TAPE(k) \
	GWT("tape" #k, k, sequencer, "", \
	    "tape " #k "'s sequencer group: command listener host:port of each node " \
	    "(required below tapes)"), \
	GWT("tape" #k, k, tape_group, "", "tape " #k "'s multicast group:port (required below tapes)"), \
	GWT("tape" #k, k, tape_session, "TAP" #k, "tape " #k "'s MoldUDP64 session (day d > 1: its first 4 characters and d)"), \
	GWT("tape" #k, k, tape_retrans, "", \
	    "tape " #k "'s retransmission host:port of each of its sequencer nodes (required below " \
	    "tapes)"), \
	GWT("tape" #k, k, tape_recorders, "", "tape " #k "'s recorders near this gateway"), \
	GWT("tape" #k, k, tape_group_b, "", "A/B: tape " #k "'s group:port on network B")

const struct config_key gw_config_keys[] = {
	DAEMON_NODE_KEYS(struct gw_config, node),
	GWS(ouch_listen, "127.0.0.1:15000", "SoupBinTCP/OUCH listener host:port (port 0: any)"),
	GWU(tapes, "1", 1, GW_MAX_TAPES,
	    "tapes (sequencer groups) the partitions are spread over; tape 0 is configured here, "
	    "tape K >= 1 in [tapeK], and [partitionN] tape names a partition's"),
	GWT("gateway", 0, sequencer, "127.0.0.1:16000",
	    "comma-separated command listener host:port of each sequencer node (at most "
	    GW_STR(GW_MAX_SEQUENCERS) "); every command datagram goes to each"),
	GWS(cmd_bind, "", "local address of the command stream socket (default: tape_iface's "
			  "address, any port: the cluster side only)"),
	GWT("gateway", 0, tape_group, "239.255.0.1:17000", "the tape's multicast group:port"),
	GWS(tape_iface, "127.0.0.1", "interface (name or address) receiving the multicast"),
	GWT("gateway", 0, tape_session, "TAPE", "the tape's MoldUDP64 session"),
	GWT("gateway", 0, tape_retrans, "127.0.0.1:17001",
	    "comma-separated tape retransmission host:port of each sequencer node (at most "
	    GW_STR(RX_MAX_SERVERS) "), asked in turn"),
	GWT("gateway", 0, tape_recorders, "",
	    "comma-separated host:port of the tape recorders near this gateway (lockstep-recorder's "
	    "retrans): a gap is asked of them first, of tape_retrans (the sequencers) only when "
	    "they cannot answer; with tape_retrans at most " GW_STR(RX_MAX_SERVERS) " (empty: none)"),
	GWT("gateway", 0, tape_group_b, "", "A/B: the tape's multicast group:port on network B, joined beside "
			      "tape_group; the first copy of each datagram is taken (empty: network "
			      "A only)"),
	GWS(tape_iface_b, "", "A/B: interface (name or address) of network B, receiving "
			      "tape_group_b and every exec_group_b (empty: tape_iface)"),
	GWD(ab_wait, "1ms", "A/B: a gap of a stream received on both networks waits this long for "
			    "the other network's copy before its first request (then "
			    "request_delay's random wait)"),
	GWU(partitions, "1", 1, GW_MAX_PARTITIONS,
	    "matcher partitions; partition N >= 1 is configured in [partitionN]"),
	GWP("gateway", 0, symbols, "",
	    "partition 0's symbols (blanks or commas between them); list every partition's, or "
	    "none: then a symbol goes to partition FNV-1a(symbol) % partitions"),
	GWP("gateway", 0, exec_group, "239.255.0.2:18000",
	    "partition 0's execution stream multicast group:port"),
	GWP("gateway", 0, exec_group_b, "",
	    "A/B: partition 0's execution stream group:port on network B (empty: network A "
	    "only)"),
	GWP("gateway", 0, exec_session, "EXEC0",
	    "partition 0's execution stream MoldUDP64 session"),
	GWP("gateway", 0, exec_retrans, "127.0.0.1:18001",
	    "comma-separated retransmission host:port of each replica of partition 0 (at most "
	    GW_STR(GW_MAX_EXEC_RETRANS) ")"),
	GWU(max_tokens, "1048576", 1024, 1 << 28,
	    "order tokens remembered for routing cancels and replaces (partitions > 1)"),
	GWS(soup_session, "", "SoupBinTCP session name (default: LS + YYYYMMDD)"),
	GWS(credentials, "", "credentials file: [logins] LOGIN = HASH FIRM [cancel_on_disconnect], "
			     "HASH from lockstepctl passwd (a plaintext password still loads, with "
			     "a warning)"),
	GWD(heartbeat, "1s", "SoupBinTCP server heartbeat after this long without output"),
	GWD(idle_timeout, "15s", "a client silent this long (or not reading) is dropped"),
	GWD(cmd_heartbeat, "100ms", "command stream heartbeat when idle"),
	GWD(resend_timeout, "200ms", "commands not seen on the tape by then are resent"),
	GWD(wal_checkpoint, "250ms",
	    "fsync = disk: how often the login journals are put on disk and sessions.wal cut"),
	GWZ(wal_segment, "32MiB", 64ull << 10, 1ull << 30,
	    "fsync = disk: sessions.wal's segments (whole ones are removed)"),
	{ "gateway", "retrans_timeout", CONFIG_DURATION, offsetof(struct gw_config, retrans_timeout),
	  0, "10ms", 1e5, 60e9, NULL,
	  "wait before asking again for a range still missing (doubles each time)" },
	{ "gateway", "retrans_timeout_max", CONFIG_DURATION,
	  offsetof(struct gw_config, retrans_timeout_max), 0, "1s", 1e5, 600e9, NULL,
	  "longest wait between two requests for one range" },
	GWD(request_delay, "2ms", "the first request for a new gap waits a random time up to this"),
	GWU(reorder_window, "65536", 2, 1 << 24, "blocks held ahead of a gap, per stream"),
	GWZ(reorder_bytes, "8M", 4096, 4294967295.0, "memory for the blocks held, per stream"),
	{ "gateway", "drop_rate", CONFIG_DOUBLE, offsetof(struct gw_config, drop_rate), 0, "0", 0,
	  1, NULL, "loss generator for tests: fraction of received datagrams thrown away" },
	GWU(drop_seed, "1", 0, 0, "loss generator seed: the same seed loses the same packets"),
	GWU(max_sessions, "1024", 1, 1000000, "simultaneous client connections"),
	GWU(max_sessions_per_address, "16", 1, 1000000,
	    "simultaneous client connections from one IPv4 address (more are refused and "
	    "counted in address_refused), so that one host cannot take every session"),
	GWD(login_timeout, "5s",
	    "a connection that has not logged in this long after it connected is closed, "
	    "whatever it sends meanwhile (login_timeouts)"),
	GWU(login_rate, "50000", 0, 100000000,
	    "Enter and Replace Orders a second per login (a token bucket; 0: no limit); past it "
	    "they wait in a queue, then are Rejected 'o'; Cancels and Modifies are never charged"),
	GWU(login_burst, "5000", 1, 100000000, "the bucket's depth: orders a login may send at once"),
	GWU(login_queue, "2048", 0, 1 << 20,
	    "a login's messages held waiting for its rate; past it Enters and Replaces are "
	    "Rejected 'o' (throttle_rejected) and a Cancel waits in the socket"),
	GWU(login_failures_before_lockout, "5", 1, 1000000,
	    "failed logins of one username from one address (within login_failure_window) "
	    "that lock that username at that address for login_lockout; the username still "
	    "logs in from elsewhere (login_lockouts)"),
	GWU(login_address_failures_before_lockout, "20", 1, 1000000,
	    "failed logins from one address, whatever the username, that lock the address "
	    "for login_lockout"),
	GWD(login_failure_window, "10min",
	    "failures further apart than this are counted afresh"),
	GWD(login_lockout, "60s",
	    "how long a lock lasts; a locked-out login is rejected ('A') without its password "
	    "being verified (login_locked_out_rejects)"),
	GWD(login_backoff, "100ms",
	    "the delay before the answer to a failed login, doubled with each failure of its "
	    "username at its address (or of its address) up to login_backoff_max"),
	GWD(login_backoff_max, "2s",
	    "the longest delay before a failed login's answer, and a locked-out one's; below "
	    "login_timeout"),
	GWU(login_lockout_entries, "65536", 64, 1 << 24,
	    "failed (username, address) pairs and addresses remembered (a fixed table; the "
	    "oldest unlocked entries make room)"),
	GWU(max_pending_logins, "64", 1, 65536,
	    "Login Requests being verified or waiting for it; a connection whose login "
	    "finds them all taken is closed (login_verify_busy)"),
	GWU(login_verify_threads, "2", 1, GW_VERIFY_MAX_THREADS,
	    "threads verifying password hashes (Argon2id, tens of ms each), off the event loop"),
	GWU(max_in_flight, "8192", 16, 1 << 20,
	    "commands in flight (sent, not yet applied by their partition's matcher): at this "
	    "many the sessions are not read until half have been answered"),
	{ "gateway", "flow_stall", CONFIG_DURATION, offsetof(struct gw_config, flow_stall), 0,
	  "2s", 1e6, 600e9, NULL,
	  "a full window that sees no progress this long is taken as answered (flow_stalls)" },
	GWZ(max_datagram, "1472", 64, 65507, "largest datagram sent"),
	GWU(send_batch, "64", 1, 1024,
	    "datagrams per sendmmsg (each command datagram counts once, whatever the sequencers)"),
	GWU(recv_batch, "64", 1, 1024, "datagrams per recvmmsg"),
	GWZ(out_buffer, "64KiB", 4096, 64ull << 20, "output buffer per client session"),
	GWU(resend_max, "4096", 1, 1000000, "commands resent per round"),
	GWZ(rcvbuf, "4M", 0, 1ull << 30,
	    "UDP receive buffers (SO_RCVBUFFORCE, else capped by rmem_max; 0: kernel default)"),
	{ "gateway", "fsync", CONFIG_ENUM, offsetof(struct gw_config, fsync), 0, "disk", 0, 0,
	  fsync_names, "disk: a command leaves for the sequencer, and a message for its client, "
	  "only once journalled on disk (the logins' messages in one write-ahead journal, "
	  "sessions.wal; a power cut loses nothing that left); none: a lab, never synced" },
	GW_PART(1), GW_PART(2), GW_PART(3), GW_PART(4), GW_PART(5),
	GW_PART(6), GW_PART(7), GW_PART(8), GW_PART(9), GW_PART(10),
	GW_PART(11), GW_PART(12), GW_PART(13), GW_PART(14), GW_PART(15),
	GW_TAPE(1), GW_TAPE(2), GW_TAPE(3),
	CONFIG_END,
};

const struct config_spec gw_config_spec = { .keys = gw_config_keys };

_Static_assert(GW_MAX_PARTITIONS == 16, "a GW_PART() above for each partition but 0");
_Static_assert(GW_MAX_TAPES == 4, "a GW_TAPE() above for each tape but 0");

void gw_default_session(char out[11], time_t t)
{
	struct tm tm;
	char buf[32];

	localtime_r(&t, &tm);
	snprintf(buf, sizeof(buf), "LS%04d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday);
	memcpy(out, buf, 10);
	out[10] = '\0';
}

/* RELOAD and SIGHUP: the logins of [gateway] credentials (the skeleton
 * has applied [node] log_level and log_timestamps). */
static int gw_reload(void *self, const void *fresh_cfg, char *msg, size_t msglen)
{
	const struct gw_config *fresh = fresh_cfg;
	struct gw *g = self;
	int rc = gw_logins_reload(&g->logins, fresh->credentials, msg, msglen);

	if (rc == 0)
		memcpy(g->cfg.credentials, fresh->credentials, sizeof(g->cfg.credentials));
	g->cfg.node.log_level = fresh->node.log_level;
	g->cfg.node.log_timestamps = fresh->node.log_timestamps;
	return rc;
}

/* ---- the loop ----------------------------------------------------------- */

/* Once per loop iteration, before the loop blocks: journals first (a command
 * is durable before it is sent, a login's message before a replay reads it),
 * then the batched datagrams and the sessions' output. */
static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct gw *g = container_of(w, struct gw, prepare);

	(void)loop;
	(void)revents;
	gw_exec_disk_full(g, gw_logins_flush(&g->logins));
	gw_cmd_flush(g);
	gw_session_flush_all(g);
	gw_session_reap(g);
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw *g = container_of(w, struct gw, tick);
	ev_tstamp now = ev_now(loop);

	(void)revents;
	gw_cmd_tick(g, now);
	gw_tape_tick(g, now);
	gw_exec_disk_retry(g);
	gw_wal_tick(&g->logins, now);
	if (now - g->last_persist >= 1.0) {
		gw_progress_tick(g);
		g->last_persist = now;
	}
}

/* ---- control ----------------------------------------------------------- */

/* STATS: struct gw_stats in its order, then the gauges: sessions,
 * cmd_next, exec_next (partition 0), tokens, and exec_next_P of each other
 * partition. */
static const struct counter_def stat_defs[] = {
	COUNTER(accepted), COUNTER(refused), COUNTER(logins), COUNTER(login_rejects),
	COUNTER(logouts), COUNTER(disconnects), COUNTER(idle_drops), COUNTER(slow_drops),
	COUNTER(protocol_errors), COUNTER(ouch_in), COUNTER(ouch_malformed), COUNTER(cmds_sent),
	COUNTER(cmd_packets), COUNTER(cmds_resent), COUNTER(retrans_requests),
	COUNTER(retrans_served), COUNTER(cmd_heartbeats), COUNTER(session_events),
	COUNTER(tape_packets), COUNTER(tape_malformed), COUNTER(tape_gaps),
	COUNTER(tape_requests), COUNTER(tape_fenced), COUNTER(cmds_acked), COUNTER(exec_packets),
	COUNTER(exec_malformed), COUNTER(exec_dups), COUNTER(exec_gaps), COUNTER(exec_requests),
	COUNTER(exec_blocks), COUNTER(exec_routed), COUNTER(exec_foreign), COUNTER(out_msgs),
	COUNTER(replayed), COUNTER(journal_errors), COUNTER(tape_held), COUNTER(tape_too_old),
	COUNTER(tape_skipped), COUNTER(exec_held), COUNTER(exec_too_old), COUNTER(exec_lost),
	COUNTER(retrans_too_old), COUNTER(drops_injected), COUNTER(rxq_dropped),
	COUNTER(kernel_rcvbuf_errors), COUNTER(unbelievable), COUNTER(local_rejects), COUNTER(tokens_full),
	COUNTER(unrouted_symbols), COUNTER(cmd_send_waits), COUNTER(retrans_budget_refused),
	COUNTER(disk_full), COUNTER(day_events), COUNTER(day_implied), COUNTER(login_timeouts),
	COUNTER(address_refused), COUNTER(throttle_delayed), COUNTER(throttle_rejected),
	COUNTER(malformed_rejects), COUNTER(oversize_rejects), COUNTER(login_failures),
	COUNTER(login_lockouts),
	COUNTER(login_locked_out_rejects), COUNTER(login_verify_busy),
	COUNTER(login_verifications), COUNTER(login_verify_ns), COUNTER(tape_first_a),
	COUNTER(tape_first_b), COUNTER(exec_first_a), COUNTER(exec_first_b),
	COUNTER(wal_checkpoints), COUNTER(wal_restored),
};

_Static_assert(sizeof(stat_defs) / sizeof(stat_defs[0]) ==
		       sizeof(struct gw_stats) / sizeof(uint64_t),
	       "a name for every counter");

/* STATUS's pools: the sessions, and the token routes (with partitions). */
static void gw_pools(const struct gw *g, Lockstep__ControlReply *reply)
{
	static struct pools ps;

	pools_reset(&ps);
	pools_add(&ps, "sessions", g->sess.n, g->cfg.max_sessions);
	pools_add(&ps, "in_flight", gw_flow_in_flight(g), g->flow.window);
	pools_add(&ps, "logins_pending", g->verify.pending, g->verify.cap);
	if (g->n_parts > 1) {
		struct gw_route_counts c;

		gw_route_counts(g->routes, &c);
		pools_add(&ps, "tokens", c.tokens, c.max); /* live and recently dead */
		pools_add(&ps, "tokens_live", c.live, c.max);
	}
	pools_reply(&ps, reply);
}

/* Every tape heard. */
static int gw_tapes_live(const struct gw *g)
{
	for (unsigned k = 0; k < g->n_tapes; k++)
		if (!g->tape[k].s.live)
			return 0;
	return 1;
}

static void gw_status(void *self, Lockstep__ControlReply *reply)
{
	struct gw *g = self;

	reply->name = g->cfg.node.name;
	reply->state = g->stopping ? "stopping"
		       : (gw_tapes_live(g) && gw_exec_live(g)) ? "ready" : "starting";
	/* tape 0's; the others' positions are in STATS (tape_commit_K) */
	reply->term = g->tape[0].term;
	reply->seq = g->tape[0].last;
	reply->commit = g->tape[0].commit;
	reply->ouch = g->sess.ouch_addr;
	/* the gateway's streams are few and its load is TCP: it stays on
	 * recvmmsg/sendmmsg whatever [node] io says */
	reply->io = (char *)uring_io_names[URING_IO_MMSG];
	reply->disk = (char *)(g->disk_full ? "full" : "ok");
	gw_day_status(g, reply);
	gw_pools(g, reply);
}

/* The logins the throttle held back, by name: the first GW_STATS_LOGINS
 * of the table (so a reply stays bounded), and how many there are in all
 * (throttle_logins). */
static void gw_stats_logins(const struct gw *g, struct counters *out)
{
	static char names[2 * GW_STATS_LOGINS][40]; /* "throttle_rejected_" and a login */
	unsigned k = 0;
	uint64_t n = 0;

	for (size_t i = 0; i < g->logins.n; i++) {
		const struct gw_login *l = g->logins.v[i];

		if (!l->throttle_delayed && !l->throttle_rejected)
			continue;
		n++;
		if (k == GW_STATS_LOGINS)
			continue;
		snprintf(names[2 * k], sizeof(names[0]), "throttle_delayed_%s", l->cred.login);
		snprintf(names[2 * k + 1], sizeof(names[0]), "throttle_rejected_%s", l->cred.login);
		counters_add(out, names[2 * k], l->throttle_delayed, 0);
		counters_add(out, names[2 * k + 1], l->throttle_rejected, 0);
		k++;
	}
	counters_add(out, "throttle_logins", n, 1);
}

static void gw_stats_add(void *self, struct counters *out)
{
	static char names[GW_MAX_PARTITIONS][24]; /* "exec_next_" and a u32 */
	static char tnames[GW_MAX_TAPES][3][24]; /* cmd_next_K, cmd_acked_K, tape_commit_K */
	struct gw *g = self;
	struct gw_route_counts rc;

	gw_stream_stats(g);
	counters_add_table(out, stat_defs, (const uint64_t *)&g->st,
			   sizeof(stat_defs) / sizeof(stat_defs[0]));
	counters_add(out, "sessions", g->sess.n, 1);
	counters_add(out, "cmd_next", g->cmd[0].next, 1);
	counters_add(out, "exec_next", g->exec.parts[0].exec.next, 1);
	gw_route_counts(g->routes, &rc);
	counters_add(out, "tokens", rc.tokens, 1);
	counters_add(out, "tokens_live", rc.live, 1);
	counters_add(out, "tokens_forgotten", rc.forgotten, 0);
	counters_add(out, "in_flight", gw_flow_in_flight(g), 1);
	counters_add(out, "flow_pauses", g->flow.pauses, 0);
	counters_add(out, "flow_paused_ns", g->flow.paused_ns, 0);
	counters_add(out, "flow_stalls", g->flow.stalls, 0);
	if (g->lockout) {
		struct lockout_counts lc;

		lockout_counts(g->lockout, &lc);
		counters_add(out, "login_lockout_entries", lc.entries, 1);
		counters_add(out, "login_lockout_evictions", lc.evictions, 0);
	}
	for (unsigned p = 1; p < g->n_parts; p++) {
		snprintf(names[p], sizeof(names[p]), "exec_next_%u", p);
		counters_add(out, names[p], g->exec.parts[p].exec.next, 1);
	}
	for (unsigned k = 1; k < g->n_tapes; k++) {
		snprintf(tnames[k][0], sizeof(tnames[k][0]), "cmd_next_%u", k);
		snprintf(tnames[k][1], sizeof(tnames[k][1]), "cmd_acked_%u", k);
		snprintf(tnames[k][2], sizeof(tnames[k][2]), "tape_commit_%u", k);
		counters_add(out, tnames[k][0], g->cmd[k].next, 1);
		counters_add(out, tnames[k][1], g->cmd[k].acked, 1);
		counters_add(out, tnames[k][2], g->tape[k].commit, 1);
	}
	gw_stages_stats(g, out);
	gw_stats_logins(g, out);
}

/* ---- open and close ------------------------------------------------------ */

/* The partitions' routes (their receivers are exec.c's). */
static int open_routes(struct gw *g)
{
	char err[512];
	int rc = gw_routes_open(&g->routes, &g->cfg, err, sizeof(err));

	if (rc < 0) {
		log_err("%s", err);
		return rc;
	}
	g->n_parts = gw_routes_parts(g->routes);
	if (g->n_parts > 1)
		log_info("%u partitions, symbols %s; %" PRIu64 " order tokens remembered, live and "
			 "recently dead",
			 g->n_parts, gw_routes_listed(g->routes) ? "listed" : "spread by hash",
			 g->cfg.max_tokens);
	return 0;
}

/* The MoldUDP64 session names of the command streams and the tapes. */
static int check_names(const struct gw *g)
{
	struct mold_session cmd, tape;

	if (mold_session_set(&cmd, g->cfg.node.name) < 0) {
		log_err("[node] name must be 1 to 10 printable characters");
		return -EINVAL;
	}
	for (unsigned k = 0; k < g->n_tapes; k++)
		if (mold_session_set(&tape, g->cfg.tape[k].tape_session) < 0) {
			log_err("tape %u's tape_session must be 1 to 10 printable characters", k);
			return -EINVAL;
		}
	return 0;
}

/* [gateway] max_datagram must hold the largest command an OUCH message
 * makes, with the authentication trailer (whether or not [node] auth is
 * on: a cluster may turn it on later). */
static int check_datagram(const struct gw_config *cfg, char *err, size_t errlen)
{
	size_t room = throttle_cmd_room(cfg->max_datagram, AUTH_TRAILER_LEN);
	size_t need = throttle_max_ouch_command();

	if (throttle_cmd_fits(need, room))
		return 0;
	snprintf(err, errlen, "[gateway] max_datagram %" PRIu64 " is too small: the largest "
		 "OUCH command takes %zu bytes, and a datagram of that size leaves %zu "
		 "(header, length and authentication trailer: %zu)",
		 cfg->max_datagram, need, room, (size_t)(MOLD_HEADER_LEN + 2 + AUTH_TRAILER_LEN));
	return -EINVAL;
}

/* [gateway] tapes: each tape beyond 0 has its sequencers, group and
 * retransmission servers, each partition's tape is one of them and each
 * tape has a partition, and no two tapes share a multicast group. */
static int check_tapes(const struct gw_config *cfg, char *err, size_t errlen)
{
	unsigned parts = (unsigned)cfg->partitions, n = (unsigned)cfg->tapes;

	for (unsigned p = 1; p < parts; p++)
		if (cfg->part[p].tape >= n) {
			snprintf(err, errlen, "[partition%u] tape = %" PRIu64 ": [gateway] tapes is %u",
				 p, cfg->part[p].tape, n);
			return -EINVAL;
		}
	for (unsigned k = 1; k < n; k++) {
		const struct gw_tape_config *t = &cfg->tape[k];
		unsigned used = 0;

		if (!*t->sequencer || !*t->tape_group || !*t->tape_retrans) {
			snprintf(err, errlen, "[tape%u] sequencer, tape_group and tape_retrans are "
				 "required ([gateway] tapes = %u)", k, n);
			return -EINVAL;
		}
		for (unsigned p = 1; p < parts; p++)
			used += cfg->part[p].tape == k;
		if (!used) {
			snprintf(err, errlen, "tape %u has no partition ([partitionN] tape = %u)", k, k);
			return -EINVAL;
		}
		for (unsigned j = 0; j < k; j++)
			if (strcmp(cfg->tape[j].tape_group, t->tape_group) == 0) {
				snprintf(err, errlen, "tapes %u and %u share tape_group %s", j, k,
					 t->tape_group);
				return -EINVAL;
			}
	}
	return 0;
}

/* The failed-login table and the verification threads. */
static int open_login_checks(struct gw *g)
{
	const struct gw_config *c = &g->cfg;
	struct lockout_config lc = {
		.pair_max = (uint32_t)c->login_failures_before_lockout,
		.addr_max = (uint32_t)c->login_address_failures_before_lockout,
		.window_ns = c->login_failure_window,
		.lockout_ns = c->login_lockout,
		.backoff_ns = c->login_backoff,
		.backoff_max_ns = c->login_backoff_max,
	};
	uint64_t seed;

	randombytes_buf(&seed, sizeof(seed));
	randombytes_buf(&g->unknown_seed, sizeof(g->unknown_seed));
	g->lockout = lockout_new(c->login_lockout_entries, &lc, seed);
	if (!g->lockout) {
		log_err("login lockout table: out of memory");
		return -ENOMEM;
	}
	return gw_verify_open(g);
}

/* Every part, from the bottom up: the logins, the routes, the exec
 * streams, the command stream, the tape, the sessions. */
static int open_parts(struct gw *g)
{
	uint64_t pos[GW_N_POS];
	char err[256];
	int rc = check_names(g);

	if (rc == 0 && ((rc = check_datagram(&g->cfg, err, sizeof(err))) < 0 ||
			(rc = check_tapes(&g->cfg, err, sizeof(err))) < 0))
		log_err("%s", err);

	if (rc < 0 || (rc = gw_logins_open(&g->logins, &g->cfg, &g->st)) < 0 ||
	    (rc = open_login_checks(g)) < 0)
		return rc;
	gw_progress_load(g, pos);
	memcpy(g->persisted, pos, sizeof(pos));
	if ((rc = gw_progress_open(g)) < 0)
		return rc;
	gw_day_init(g, pos); /* before the logins' journals: they read it */
	if ((rc = open_routes(g)) < 0 || (rc = gw_exec_open(g, pos + GW_POS_EXEC)) < 0 ||
	    (rc = gw_cmd_open(g, pos)) < 0 || (rc = gw_flow_open(g)) < 0 ||
	    (rc = gw_stages_open(g)) < 0 || (rc = gw_tape_open(g, pos)) < 0)
		return rc;
	g->logins.stages = &g->stages;
	gw_stages_start(g);
	return gw_session_listen(g);
}

int gw_open(struct gw **out, struct ev_loop *loop, const struct gw_config *cfg)
{
	struct gw *g = calloc(1, sizeof(*g));
	int rc;

	if (!g)
		return -ENOMEM;
	g->loop = loop;
	g->cfg = *cfg;
	/* what gw_close closes must say "not open" */
	g->sess.listen_fd = -1;
	g->n_tapes = (unsigned)cfg->tapes;
	for (unsigned k = 0; k < GW_MAX_TAPES; k++) {
		g->cmd[k] = (struct gw_cmd){ .g = g, .k = k, .fd = -1 };
		g->tape[k].g = g;
		g->tape[k].k = k;
		g->tape[k].cmd = &g->cmd[k];
		g->tape[k].s.fd = g->tape[k].s.req_fd = g->tape[k].s.fd_b = -1;
	}
	if (mkdir(cfg->node.state_dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		log_err("%s: %s", cfg->node.state_dir, strerror(errno));
		goto out_free;
	}
	rc = open_parts(g);
	if (rc < 0)
		goto out_free;
	if (cfg->node.io == URING_IO_URING)
		log_info("io = uring: the gateway's datagrams stay on recvmmsg/sendmmsg");
	ev_prepare_init(&g->prepare, on_prepare);
	ev_prepare_start(loop, &g->prepare);
	ev_timer_init(&g->tick, on_tick, 0.01, 0.01);
	ev_timer_start(loop, &g->tick);
	g->last_persist = ev_now(loop);
	log_notice("gateway %s: OUCH on %s, session %s, %zu logins, command seq %" PRIu64
		   " (acked %" PRIu64 "), %u partition%s, exec from %" PRIu64 "%s",
		   cfg->node.name, g->sess.ouch_addr, g->sess.soup_session, g->logins.n, g->cmd[0].next,
		   g->cmd[0].acked, g->n_parts, g->n_parts > 1 ? "s" : "", g->exec.parts[0].exec.next,
		   g->n_parts > 1 ? " (partition 0)" : "");
	*out = g;
	return 0;

out_free:
	gw_close(g);
	return rc;
}

int gw_ouch_port(const struct gw *g)
{
	return g->sess.listen_fd >= 0 ? net_local_port(g->sess.listen_fd) : -EBADF;
}

/* Flushes what the loop's prepare watcher would, then closes every part
 * from the top down. */
static void close_parts(struct gw *g)
{
	gw_exec_disk_full(g, gw_logins_flush(&g->logins));
	gw_cmd_flush(g);
	gw_session_flush_all(g);
	gw_session_reap(g);
	if (ev_is_active(&g->prepare))
		ev_prepare_stop(g->loop, &g->prepare);
	if (ev_is_active(&g->tick))
		ev_timer_stop(g->loop, &g->tick);
	gw_flow_close(g);
	gw_cmd_close(g);
	gw_tape_close(g);
	gw_exec_close(g);
	gw_logins_close_journals(&g->logins);
	gw_stream_fini(g);
	g->logins.stages = NULL;
	gw_stages_close(g);
}

void gw_stop(struct gw *g)
{
	if (g->stopping)
		return;
	g->stopping = 1;
	gw_session_close_listener(g);
	gw_session_end_all(g);
	close_parts(g);
	gw_progress_save_now(g);
	ev_break(g->loop, EVBREAK_ALL);
}

void gw_close(struct gw *g)
{
	if (!g)
		return;
	if (!g->stopping) {
		gw_session_end_all(g);
		close_parts(g);
	}
	gw_session_close_listener(g);
	gw_progress_close(g);
	gw_verify_close(g);
	lockout_free(g->lockout);
	gw_exec_free(g);
	gw_routes_close(g->routes);
	gw_logins_fini(&g->logins);
	free(g);
}

/* --check-config: the credentials file (parse errors and bad hashes;
 * plaintext passwords are a warning). */
static int check_creds(const struct gw_config *c, char *err, size_t errlen)
{
	struct creds cr = { 0 };
	char e[512], names[256];
	size_t n;
	int rc;

	if (c->credentials[0] == '\0')
		return 0;
	if ((rc = creds_load(&cr, c->credentials, e, sizeof(e))) < 0) {
		snprintf(err, errlen, "credentials: %s", e);
		creds_fini(&cr);
		return rc;
	}
	if ((n = creds_plaintext(&cr, names, sizeof(names))) > 0)
		fprintf(stderr, "lockstep-gateway: warning: %s: %zu plaintext password%s (%s): "
			"rehash with lockstepctl passwd\n",
			c->credentials, n, n > 1 ? "s" : "", names);
	creds_fini(&cr);
	return 0;
}

/* --check-config: the partitions are checked together, beyond each key's
 * own check; the credentials file; the login delays against the login
 * deadline. */
static int gw_check(const void *cfg, char *err, size_t errlen)
{
	const struct gw_config *c = cfg;
	struct gw_routes *r;
	int rc = check_datagram(cfg, err, errlen);

	if (rc < 0 || (rc = check_tapes(cfg, err, errlen)) < 0)
		return rc;
	rc = gw_routes_open(&r, cfg, err, errlen);

	if (rc < 0)
		return rc;
	gw_routes_close(r);
	if (c->login_backoff_max >= c->login_timeout || c->login_backoff > c->login_backoff_max) {
		snprintf(err, errlen, "[gateway] login_backoff <= login_backoff_max < login_timeout, "
			 "else a rejected login is never answered");
		return -EINVAL;
	}
	return check_creds(c, err, errlen);
}

DAEMON_LIFECYCLE(gw, gw, gw_config)

const struct daemon_ops gw_daemon = {
	.prog = "lockstep-gateway",
	.role = "gateway",
	.about = "The client-facing gateway of a lockstep cluster: SoupBinTCP 4.0 / OUCH 4.2\n"
		 "sessions in, the command stream to the sequencer out, executions back to\n"
		 "the owning sessions.",
	.spec = &gw_config_spec,
	.cfg_size = sizeof(struct gw_config),
	.node_offset = offsetof(struct gw_config, node),
	.check = gw_check,
	DAEMON_OPS_LIFECYCLE(gw),
	.reload = gw_reload,
	.status = gw_status,
	.stats = gw_stats_add,
};
