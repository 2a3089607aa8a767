/* Control: the sequencer as a daemon (common/daemon.h): its config keys,
 * its counters, STATUS, STATS and STEP_DOWN, what the tests read of it,
 * and the daemon_ops table over seq_open, seq_stop and seq_close. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "counters.h"
#include "daemon.h"
#include "hist.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "net.h"
#include "raft.h"
#include "rx.h"
#include "seq_private.h"

/* [sequencer] fsync, by what each promises (lockstep-sequencer(8)) */
static const char *const fsync_names[] = { "disk", "majority-memory", "none", NULL };
const enum journal_fsync seq_fsync_modes[] = { JOURNAL_FSYNC_DISK, JOURNAL_FSYNC_INTERVAL,
					       JOURNAL_FSYNC_NONE };

#define K(name, type, member, size, def, min, max, names, help) \
	{ "sequencer", name, type, offsetof(struct seq_config, member), size, def, min, max, \
	  names, help }
const struct config_key seq_config_keys[] = {
	DAEMON_NODE_KEYS(struct seq_config, node),
	K("listen", CONFIG_STRING, listen, sizeof(((struct seq_config *)0)->listen),
	  "127.0.0.1:9100", 0, 0, NULL, "UDP address for the gateways' command streams"),
	K("retrans", CONFIG_STRING, retrans, sizeof(((struct seq_config *)0)->retrans),
	  "127.0.0.1:9101", 0, 0, NULL, "UDP address for tape retransmission requests"),
	K("tape_group", CONFIG_STRING, tape_group, sizeof(((struct seq_config *)0)->tape_group),
	  "239.255.0.1:9200", 0, 0, NULL, "multicast group:port of the tape"),
	K("tape_iface", CONFIG_STRING, tape_iface, sizeof(((struct seq_config *)0)->tape_iface),
	  "127.0.0.1", 0, 0, NULL, "interface (name or address) the tape is sent from"),
	K("tape_group_b", CONFIG_STRING, tape_group_b,
	  sizeof(((struct seq_config *)0)->tape_group_b), "", 0, 0, NULL,
	  "A/B: the tape's multicast group:port on network B, every datagram sent on both "
	  "(receivers take the first copy); empty: network A only"),
	K("tape_iface_b", CONFIG_STRING, tape_iface_b,
	  sizeof(((struct seq_config *)0)->tape_iface_b), "", 0, 0, NULL,
	  "A/B: interface (name or address) of network B (empty: tape_iface)"),
	K("tape_session", CONFIG_STRING, tape_session,
	  sizeof(((struct seq_config *)0)->tape_session), "TAPE", 0, 0, NULL,
	  "MoldUDP64 session name of the tape"),
	K("tape_ttl", CONFIG_UINT, tape_ttl, 0, "1", 0, 255, NULL, "multicast TTL of the tape"),
	K("heartbeat", CONFIG_DURATION, heartbeat_ns, 0, "100ms", 1e6, 60e9, NULL,
	  "send a tape heartbeat when nothing was sent for this long"),
	K("time_event", CONFIG_DURATION, time_event_ns, 0, "100ms", 0, 60e9, NULL,
	  "sequence an event of time alone when nothing was sequenced for this long, so that "
	  "orders expire on an idle market (the matchers' only clock is the tape): an expiry "
	  "is applied within time_event + heartbeat / 2 of its time (0s: never)"),
	K("fsync", CONFIG_ENUM, fsync, 0, "disk", 0, 0, fsync_names,
	  "what an event survives before it is acknowledged and multicast: disk (on the disks of "
	  "a majority: a power cut of every member), majority-memory (written on a majority, "
	  "synced every fsync_interval: a power cut of a minority), none (a lab: written, never "
	  "synced; refused in a group)"),
	K("fsync_interval", CONFIG_DURATION, fsync_interval_ns, 0, "100ms", 1e6, 60e9, NULL,
	  "fsync period under fsync = majority-memory"),
	K("segment_size", CONFIG_SIZE, segment_size, 0, "64M", 1 << 16, 1ull << 40, NULL,
	  "roll the journal to a new segment past this size"),
	K("rcvbuf", CONFIG_SIZE, rcvbuf, 0, "8M", 0, 1 << 30, NULL,
	  "receive buffer of the command socket"),
	K("sndbuf", CONFIG_SIZE, sndbuf, 0, "4M", 0, 1 << 30, NULL,
	  "send buffer of the tape and retransmission sockets"),
	K("max_datagram", CONFIG_SIZE, max_datagram, 0, "1472", 256, 65507, NULL,
	  "largest datagram taken from gateways and sent on the tape"),
	K("batch", CONFIG_UINT, batch, 0, "64", 1, 1024, NULL, "datagrams per recvmmsg call"),
	K("drain", CONFIG_UINT, drain, 0, "16", 1, 1024, NULL,
	  "recvmmsg calls per wakeup at most (then the other sockets get a turn)"),
	K("request_interval", CONFIG_DURATION, request_interval_ns, 0, "10ms", 1e5, 10e9, NULL,
	  "wait before asking a gateway again for commands still missing (doubles each time)"),
	K("request_interval_max", CONFIG_DURATION, request_interval_max_ns, 0, "1s", 1e5, 600e9,
	  NULL, "longest wait between two requests for one gap"),
	K("request_delay", CONFIG_DURATION, request_delay_ns, 0, "2ms", 0, 10e9, NULL,
	  "the first request for a new gap waits a random time up to this"),
	K("reorder_window", CONFIG_UINT, reorder_window, 0, "8192", 2, 1 << 24, NULL,
	  "commands held ahead of a gap, per gateway"),
	K("reorder_bytes", CONFIG_SIZE, reorder_bytes, 0, "1M", 4096, 4294967295.0, NULL,
	  "memory for the commands held ahead of a gap, per gateway"),
	K("drop_rate", CONFIG_DOUBLE, drop_rate, 0, "0", 0, 1, NULL,
	  "loss generator for tests: fraction of received datagrams thrown away"),
	K("drop_seed", CONFIG_UINT, drop_seed, 0, "1", 0, 0, NULL,
	  "loss generator seed: the same seed loses the same packets"),
	K("retrans_packets", CONFIG_UINT, retrans_packets, 0, "64", 1, 1024, NULL,
	  "datagrams in one retransmission answer at most"),
	K("node_id", CONFIG_UINT, node_id, 0, "0", 0, SEQ_MAX_PEERS - 1, NULL,
	  "this sequencer's index in peers (0..n-1)"),
	K("gateways", CONFIG_STRING, gateways, sizeof(((struct seq_config *)0)->gateways), "", 0, 0,
	  NULL,
	  "the hosts gateways send commands from, comma separated (their cmd_bind or "
	  "tape_iface addresses); commands from any other host are dropped and counted "
	  "(commands_not_member) even when their tag is good (empty: any host with the key)"),
	K("peers", CONFIG_STRING, peers, sizeof(((struct seq_config *)0)->peers), "", 0, 0, NULL,
	  "every group member's raft control UDP host:port, comma separated, index = node_id "
	  "(empty: a group of one)"),
	K("election_min", CONFIG_DURATION, election_min_ns, 0, "150ms", 1e6, 60e9, NULL,
	  "shortest randomized election timeout of a group"),
	K("election_max", CONFIG_DURATION, election_max_ns, 0, "300ms", 1e6, 60e9, NULL,
	  "longest randomized election timeout of a group"),
	K("raft_heartbeat", CONFIG_DURATION, raft_heartbeat_ns, 0, "50ms", 1e5, 60e9, NULL,
	  "a group's primary tells the standbys it is alive when idle this long"),
	K("standby_poll", CONFIG_DURATION, standby_poll_ns, 0, "5ms", 0, 100e6, NULL,
	  "a member that is not primary reads the gateways' commands (which it drops, noting "
	  "where they came from) this often while they come closer together than this, instead "
	  "of waking for each datagram; 0: as they come. The primary always reads them as they "
	  "come"),
	K("flow_window", CONFIG_UINT, flow_window, 0, "32768", 0, 1 << 30, NULL,
	  "events the tape may run ahead of a live receiver that states no window of its own (a "
	  "matcher states what its rcvbuf holds); 0: no flow control at all"),
	K("flow_timeout", CONFIG_DURATION, flow_timeout_ns, 0, "500ms", 1e6, 60e9, NULL,
	  "a tape receiver not heard this long no longer holds the tape back"),
	K("end_of_day", CONFIG_STRING, end_of_day, sizeof(((struct seq_config *)0)->end_of_day),
	  "", 0, 0, NULL,
	  "HH:MM:SS UTC: the primary closes the market (END_OF_DAY on the tape) when this time "
	  "passes with the market open since before it (empty: only lockstepctl end-of-day)"),
	K("start_of_day", CONFIG_STRING, start_of_day,
	  sizeof(((struct seq_config *)0)->start_of_day), "", 0, 0, NULL,
	  "HH:MM:SS UTC: the primary opens the next day (START_OF_DAY, a new tape session) when "
	  "this time passes with the market closed since before it (empty: only lockstepctl "
	  "start-of-day)"),
	K("retention", CONFIG_UINT, retention, 0, "0", 0, 100000, NULL,
	  "trading days the live journal keeps, today's included: at each start of day the "
	  "older days leave it, into archive_dir or removed (0: keep every day)"),
	K("archive_dir", CONFIG_STRING, archive_dir, sizeof(((struct seq_config *)0)->archive_dir),
	  "", 0, 0, NULL,
	  "where the days retention takes out of the live journal go, one directory per day's "
	  "session, on the journal's filesystem (lockstep-replay reads them and archives them "
	  "compressed); empty: they are removed"),
	CONFIG_END,
};
#undef K

const struct config_spec seq_config_spec = { .keys = seq_config_keys };

const struct counter_def seq_counters[SEQ_N_COUNTERS] = {
	COUNTER(packets_received), COUNTER(commands_received), COUNTER(commands_sequenced),
	COUNTER(duplicates), COUNTER(gaps), COUNTER(gap_requests_sent),
	COUNTER(malformed_packets), COUNTER(oversize_commands), COUNTER(gateways_full),
	COUNTER(commands_not_member),
	COUNTER(heartbeats_received), COUNTER(tape_packets_sent), COUNTER(tape_heartbeats_sent),
	COUNTER(time_events), COUNTER(day_events), COUNTER(admin_events), COUNTER(days_dropped), COUNTER(journal_syncs), GAUGE(journal_durable), COUNTER(disk_full),
	COUNTER(commands_disk_full),
	COUNTER(tape_send_errors), COUNTER(retrans_requests), COUNTER(retrans_bad_requests),
	COUNTER(retrans_blocks_sent), COUNTER(retrans_packets_sent), GAUGE(journal_bytes),
	GAUGE(gateways), COUNTER(rxq_dropped), COUNTER(commands_held), COUNTER(commands_overflow),
	COUNTER(gap_blocks_requested), COUNTER(gateway_answers), COUNTER(gateway_too_old),
	COUNTER(commands_lost), COUNTER(retrans_too_old), COUNTER(retrans_budget_refused),
	COUNTER(drops_injected),
	COUNTER(kernel_rcvbuf_errors), COUNTER(commands_ignored), COUNTER(cmd_reads), GAUGE(cmd_polling),
	COUNTER(raft_received),
	COUNTER(raft_malformed), COUNTER(raft_not_member), COUNTER(raft_sent), COUNTER(raft_send_errors),
	COUNTER(elections), COUNTER(prevotes), COUNTER(votes_granted), COUNTER(appends_received),
	COUNTER(entries_replicated), COUNTER(raft_requests_sent), COUNTER(raft_requests_served),
	COUNTER(truncations), COUNTER(stale_ignored), COUNTER(terms_refused), COUNTER(stepdowns),
	GAUGE(commit),
	GAUGE(commit_us_p50), GAUGE(commit_us_p99), GAUGE(commit_us_max), COUNTER(handovers),
	COUNTER(handovers_abandoned), COUNTER(timeout_now), COUNTER(commands_handover),
	COUNTER(tape_send_waits), COUNTER(flow_status_received), COUNTER(flow_status_bad),
	COUNTER(flow_holds), GAUGE(flow_receivers), GAUGE(flow_held), COUNTER(flow_receiver_pauses),
	GAUGE(flow_receivers_behind),
	COUNTER(tape_b_packets_sent), COUNTER(tape_b_send_errors),
};

/* The node a STEP_DOWN names into *to: arg "" or NULL (RAFT_NOBODY: the
 * standby furthest along), a node_id or a peers address. Returns 0, or
 * -EINVAL with msg saying why. */
static int step_down_target(const struct sequencer *s, const char *arg, int *to, char *msg,
			    size_t msglen)
{
	char a[32], *end;
	long v;

	*to = RAFT_NOBODY;
	if (!arg || !arg[0])
		return 0;
	v = strtol(arg, &end, 10);
	if (end != arg && *end == '\0' && v >= 0 && v < s->n_peers) {
		*to = (int)v;
		return 0;
	}
	for (int i = 0; i < s->n_peers; i++) {
		net_format_addr(&s->peers[i], a, sizeof(a));
		if (strcmp(a, arg) == 0)
			*to = i;
	}
	if (*to != RAFT_NOBODY)
		return 0;
	snprintf(msg, msglen, "'%s': not a member (a node_id 0..%d or a peers address)", arg,
		 s->n_peers - 1);
	return -EINVAL;
}

/* What STEP_DOWN answers when raft_transfer(to) returned r. */
static void step_down_message(const struct sequencer *s, int r, int to, char *msg, size_t msglen)
{
	char a[32];

	switch (r) {
	case 0:
		to = raft_transfer_target(s->raft);
		net_format_addr(&s->peers[to], a, sizeof(a));
		snprintf(msg, msglen, "handing over to node %d (%s) after term %llu", to, a,
			 (unsigned long long)s->term);
		log_notice("step-down asked: %s", msg);
		break;
	case -EPERM:
		snprintf(msg, msglen, "not the primary (%s in term %llu)",
			 seq_state_names[s->state], (unsigned long long)s->term);
		break;
	case -EALREADY:
		snprintf(msg, msglen, "already handing over to node %d",
			 raft_transfer_target(s->raft));
		break;
	case -EINVAL:
		snprintf(msg, msglen, "node %d is this node", to);
		break;
	case -EHOSTUNREACH:
		snprintf(msg, msglen, "%s has not been heard from lately",
			 to == RAFT_NOBODY ? "no standby" : "that standby");
		break;
	default:
		snprintf(msg, msglen, "%s", strerror(-r));
		break;
	}
}

/* STEP_DOWN: arg "" (the standby furthest along), a node_id, or a peers
 * address. Answers at once; the hand-over takes a round trip or two, and
 * lockstepctl waits for the state to change. */
static void ctl_step_down(struct sequencer *s, const char *arg, Lockstep__ControlReply *reply)
{
	static char msg[160];
	int to, r;

	if (!s->raft || s->n_peers <= 1) {
		reply->error = -EOPNOTSUPP;
		reply->message = (char *)"not in a group (no peers): nobody to hand over to";
		return;
	}
	r = step_down_target(s, arg, &to, msg, sizeof(msg));
	if (r < 0) {
		reply->error = r;
		reply->message = msg;
		return;
	}
	s->now_ns = mono_ns();
	r = raft_transfer(s->raft, to, s->now_ns);
	step_down_message(s, r, to, msg, sizeof(msg));
	reply->error = r;
	reply->message = msg;
	seq_group_done(s, 0);
}

/* The answer to a request only the primary serves: r and msg, or where the
 * primary is when this node is not it. */
static void ctl_primary_reply(struct sequencer *s, int r, char *msg, size_t cap,
			      Lockstep__ControlReply *reply)
{
	if (r == -EAGAIN && s->state != SEQ_PRIMARY && s->primary_id != RAFT_NOBODY) {
		char a[32];

		net_format_addr(&s->peers[s->primary_id], a, sizeof(a));
		snprintf(msg, cap, "not the primary: node %d (%s) is", s->primary_id, a);
	}
	reply->error = r;
	reply->message = msg;
	seq_group_done(s, 0);
}

/* END_OF_DAY, START_OF_DAY: the primary sequences the day event (day.c);
 * the answer says at which seq, or why not. */
static void ctl_day(struct sequencer *s, int start, Lockstep__ControlReply *reply)
{
	static char msg[160];

	ctl_primary_reply(s, seq_day_emit(s, start, msg, sizeof(msg)), msg, sizeof(msg), reply);
}

/* ADMIN: the primary sequences the operator's risk command (admin.c). */
static void ctl_admin(struct sequencer *s, const Lockstep__Admin *a, Lockstep__ControlReply *reply)
{
	static char msg[256];

	ctl_primary_reply(s, seq_admin_emit(s, a, msg, sizeof(msg)), msg, sizeof(msg), reply);
}

static void seq_status(void *self, Lockstep__ControlReply *reply)
{
	static char msg[64];
	struct sequencer *s = self;

	reply->day = tapeday_last(&s->days)->day;
	reply->market = (char *)(s->closed ? "closed" : "open");
	reply->name = s->cfg.node.name;
	reply->state = (char *)seq_state_names[s->state];
	reply->term = s->term;
	reply->seq = journal_last_seq(s->journal);
	reply->commit = s->commit;
	reply->io = (char *)iopath_name(&s->io);
	reply->disk = (char *)(s->disk_full ? "full" : "ok");
	if (s->raft && raft_transfer_target(s->raft) != RAFT_NOBODY) {
		snprintf(msg, sizeof(msg), "handing over to node %d",
			 raft_transfer_target(s->raft));
		reply->message = msg;
	}
}

static void seq_stats(void *self, struct counters *out)
{
	struct seq_stats st;

	seq_get_stats(self, &st);
	counters_add_table(out, seq_counters, (const uint64_t *)&st, SEQ_N_COUNTERS);
	iopath_counters(&((struct sequencer *)self)->io, out);
}

static int seq_control(void *self, const Lockstep__ControlRequest *req,
		       Lockstep__ControlReply *reply)
{
	switch (req->op) {
	case LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN:
		ctl_step_down(self, req->arg, reply);
		return 1;
	case LOCKSTEP__CONTROL_REQUEST__OP__END_OF_DAY:
	case LOCKSTEP__CONTROL_REQUEST__OP__START_OF_DAY:
		ctl_day(self, req->op == LOCKSTEP__CONTROL_REQUEST__OP__START_OF_DAY, reply);
		return 1;
	case LOCKSTEP__CONTROL_REQUEST__OP__ADMIN:
		ctl_admin(self, req->admin, reply);
		return 1;
	default:
		return 0;
	}
}

int seq_failed(const struct sequencer *s)
{
	return s->failed;
}

uint64_t seq_term(const struct sequencer *s)
{
	return s->term;
}

uint64_t seq_last_seq(const struct sequencer *s)
{
	return journal_last_seq(s->journal);
}

int seq_listen_port(const struct sequencer *s)
{
	return net_local_port(s->cmd_fd);
}

int seq_retrans_port(const struct sequencer *s)
{
	return net_local_port(s->retrans_fd);
}

void seq_get_stats(const struct sequencer *s, struct seq_stats *out)
{
	struct net_udp_stats us = { 0 };

	*out = s->st;
	out->journal_bytes = s->journal ? journal_bytes(s->journal) : 0;
	out->journal_durable = s->journal ? journal_durable_seq(s->journal) : 0;
	out->gateways = s->n_gw;
	out->duplicates = out->gaps = out->gap_requests_sent = 0;
	for (unsigned i = 0; i < s->n_gw; i++) {
		struct rx_stats rs;

		rx_get_stats(s->gw_list[i]->rx, &rs);
		out->duplicates += rs.duplicates;
		out->gaps += rs.gaps;
		out->gap_requests_sent += rs.requests;
		out->gap_blocks_requested += rs.requested;
		out->commands_held += rs.held;
		out->commands_overflow += rs.overflow;
		out->commands_lost += rs.lost;
	}
	out->rxq_dropped = s->rxq_cmd + s->rxq_req + s->rxq_retrans + s->rxq_raft;
	out->retrans_requests = s->srv.st.requests;
	out->retrans_bad_requests = s->srv.st.bad_requests;
	out->retrans_blocks_sent = s->srv.st.blocks_sent;
	out->retrans_packets_sent = s->srv.st.packets_sent;
	out->retrans_too_old = s->srv.st.too_old;
	out->retrans_budget_refused = s->srv.st.budget_refused;
	out->tape_b_packets_sent = s->tape_b.packets;
	out->tape_b_send_errors = s->tape_b.send_errors;
	out->flow_receivers = s->flow.t.n;
	out->flow_receivers_behind = flow_table_behind(&s->flow.t);
	out->flow_held = s->state == SEQ_PRIMARY && s->commit > s->published
				 ? s->commit - s->published : 0;
	out->drops_injected = s->drop_cmd.dropped + s->drop_req.dropped + s->drop_retrans.dropped +
			      s->drop_raft.dropped;
	if (s->raft) {
		struct raft_stats rs;

		raft_get_stats(s->raft, &rs);
		out->elections = rs.elections;
		out->prevotes = rs.prevotes;
		out->votes_granted = rs.votes_granted;
		out->appends_received = rs.appends_received;
		out->entries_replicated = rs.entries_appended;
		out->raft_requests_sent = rs.requests_sent;
		out->raft_requests_served = rs.requests_served;
		out->truncations = rs.truncations;
		out->stale_ignored = rs.stale_ignored;
		out->terms_refused = rs.terms_refused;
		out->stepdowns = rs.stepdowns;
		out->handovers = rs.transfers;
		out->handovers_abandoned = rs.transfers_abandoned;
		out->timeout_now = rs.timeout_now;
	}
	out->commit = s->commit;
	out->cmd_polling = (uint64_t)s->cmd_polling;
	out->commit_us_p50 = hist_percentile(&s->commit_ns, 50) / 1000;
	out->commit_us_p99 = hist_percentile(&s->commit_ns, 99) / 1000;
	out->commit_us_max = s->commit_ns.max / 1000;
	if (net_udp_stats_read(&us) == 0)
		out->kernel_rcvbuf_errors = us.rcvbuf_errors;
}

DAEMON_LIFECYCLE(seq, sequencer, seq_config)

static int seq_exit_status(const void *self)
{
	return seq_failed(self) ? DAEMON_EXIT_FAILURE : DAEMON_EXIT_OK;
}

const struct daemon_ops seq_daemon = {
	.prog = "lockstep-sequencer",
	.role = "sequencer",
	.about = "Merges the gateways' MoldUDP64 command streams into one total order, journals\n"
		 "every event and multicasts it as the tape; serves tape retransmissions.",
	.spec = &seq_config_spec,
	.cfg_size = sizeof(struct seq_config),
	.node_offset = offsetof(struct seq_config, node),
	DAEMON_OPS_LIFECYCLE(seq),
	.exit_status = seq_exit_status,
	.status = seq_status,
	.stats = seq_stats,
	.control = seq_control,
};
