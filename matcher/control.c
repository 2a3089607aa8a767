/* The matcher's control side (common/daemon.h): STATUS, STATS with its
 * COUNTER/GAUGE tables, the SNAPSHOT operation, and the daemon_ops table
 * that daemon_main() runs the matcher from. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "counters.h"
#include "daemon.h"
#include "engine.h"
#include "glimpse.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "macros.h"
#include "matcher_private.h"
#include "net.h"
#include "rx.h"

/* STATS: struct matcher_stats in its order, then the receiver's, the
 * host's and the engine's values (matcher_stats()). */
static const struct counter_def stat_defs[] = {
	COUNTER(tape_packets), COUNTER(tape_malformed), COUNTER(tape_wrong_session),
	COUNTER(tape_duplicates), COUNTER(tape_gaps), COUNTER(tape_fenced),
	COUNTER(events_applied), COUNTER(events_other_partition), COUNTER(events_malformed),
	COUNTER(retrans_requests_sent), COUNTER(exec_blocks), COUNTER(exec_packets),
	COUNTER(exec_send_errors), COUNTER(exec_requests_served), COUNTER(exec_requests_too_old),
	COUNTER(exec_requests_bad), COUNTER(exec_blocks_resent), COUNTER(heartbeats_sent),
	COUNTER(rxq_dropped), COUNTER(tape_answers), COUNTER(tape_too_old),
	COUNTER(tape_unrecoverable), COUNTER(exec_requests_dropped), COUNTER(drops_injected),
	COUNTER(drops_injected_data), COUNTER(snapshots_written), COUNTER(snapshots_failed),
	COUNTER(snapshots_skipped_busy), COUNTER(snapshots_rejected), COUNTER(snapshots_off_rt),
	COUNTER(checkpoints_sent),
	COUNTER(checkpoint_send_errors), COUNTER(checkpoints_received), COUNTER(checkpoints_agreed),
	COUNTER(checkpoints_diverged), COUNTER(checkpoints_undecided), COUNTER(checkpoint_dissents),
	COUNTER(checkpoints_malformed), COUNTER(checkpoints_other_partition),
	COUNTER(checkpoints_not_member),
	COUNTER(checkpoints_out_of_window), COUNTER(checkpoints_ignored),
	COUNTER(exec_blocks_withheld), COUNTER(exec_requests_refused), COUNTER(exec_send_waits),
	COUNTER(flow_status_sent), COUNTER(retrans_budget_refused), COUNTER(tape_day_later),
	COUNTER(tape_first_a), COUNTER(tape_first_b), COUNTER(exec_b_packets),
	COUNTER(exec_b_send_errors), COUNTER(exec_packets_skipped_resuming),
};
_Static_assert(ARRAY_SIZE(stat_defs) == sizeof(struct matcher_stats) / sizeof(uint64_t),
	       "a name for every counter");

static const struct counter_def extra_defs[] = {
	COUNTER(tape_blocks_requested), COUNTER(tape_held), COUNTER(tape_overflow),
	COUNTER(tape_missing), COUNTER(kernel_rcvbuf_errors), COUNTER(rcvbuf_bytes),
	GAUGE(checkpoint_last_agreed), GAUGE(orders_open), COUNTER(accepted), COUNTER(rejects),
	COUNTER(canceled), COUNTER(matches), COUNTER(shares_matched), COUNTER(ignored_duplicates),
	GAUGE(tokens), COUNTER(tokens_forgotten), GAUGE(flow_cost_per_event), GAUGE(flow_window),
	GAUGE(snapshot_stall_us), GAUGE(snapshot_resume_us), COUNTER(tape_unbelievable),
	COUNTER(day_events),
	COUNTER(day_events_ignored), COUNTER(closed_cancels), COUNTER(closed_rejects),
	COUNTER(admin_events), COUNTER(admin_ignored), COUNTER(risk_rejects), COUNTER(risk_killed),
	COUNTER(risk_qty), COUNTER(risk_notional), COUNTER(risk_collar), COUNTER(risk_open),
	COUNTER(risk_credit), COUNTER(kill_cancels), COUNTER(user_tokens_forgotten),
	COUNTER(user_token_quota),
};

/* The feed's (struct matcher_feed_stats, in its order), when it has one. */
static const struct counter_def feed_defs[] = {
	COUNTER(feed_messages), COUNTER(feed_packets), COUNTER(feed_send_errors),
	COUNTER(feed_send_waits), COUNTER(feed_heartbeats), COUNTER(feed_requests),
	COUNTER(feed_requests_bad), COUNTER(feed_requests_not_held), COUNTER(feed_requests_too_old),
	COUNTER(feed_requests_refused), COUNTER(feed_resent), COUNTER(feed_budget_refused),
	COUNTER(feed_takeovers), COUNTER(feed_stood_down), COUNTER(feed_foreign_malformed),
	COUNTER(feed_caught_up), COUNTER(feed_listen_dropped),
	COUNTER(feed_a_heard), COUNTER(feed_b_heard), COUNTER(feed_latency_count),
	GAUGE(feed_latency_p50_ns), GAUGE(feed_latency_p99_ns), GAUGE(feed_latency_p999_ns),
	GAUGE(feed_latency_max_ns), COUNTER(feed_encode_errors),
};
_Static_assert(ARRAY_SIZE(feed_defs) == sizeof(struct matcher_feed_stats) / sizeof(uint64_t),
	       "a name for every feed counter");

/* GLIMPSE's (struct glimpse_stats, in its order), when it serves. */
static const struct counter_def glimpse_defs[] = {
	COUNTER(feed_glimpse_connections), GAUGE(feed_glimpse_sessions),
	COUNTER(feed_glimpse_refused_full), COUNTER(feed_glimpse_logins),
	COUNTER(feed_glimpse_logins_rejected), COUNTER(feed_glimpse_logins_unavailable),
	COUNTER(feed_glimpse_login_timeouts), COUNTER(feed_glimpse_idle_timeouts),
	COUNTER(feed_glimpse_write_stalls), COUNTER(feed_glimpse_protocol_errors),
	COUNTER(feed_glimpse_logouts), COUNTER(feed_glimpse_snapshots),
	COUNTER(feed_glimpse_snapshots_sent), COUNTER(feed_glimpse_bytes),
	GAUGE(feed_glimpse_build_us), GAUGE(feed_glimpse_build_max_us),
	GAUGE(feed_glimpse_image_bytes), GAUGE(feed_glimpse_image_messages),
	COUNTER(feed_glimpse_verify_us),
};
_Static_assert(ARRAY_SIZE(glimpse_defs) == sizeof(struct glimpse_stats) / sizeof(uint64_t),
	       "a name for every GLIMPSE counter");

/* STATUS's pools: the engine's. */
static void matcher_pools(const struct matcher *m, Lockstep__ControlReply *r)
{
	static struct pools ps;
	struct engine_pool ep[ENGINE_POOLS];

	engine_get_pools(m->engine, ep);
	pools_reset(&ps);
	for (unsigned i = 0; i < ENGINE_POOLS; i++)
		pools_add(&ps, ep[i].name, ep[i].used, ep[i].size);
	pools_reply(&ps, r);
}

static void matcher_status(void *self, Lockstep__ControlReply *r)
{
	struct matcher *m = self;
	struct engine_day d;

	r->name = (char *)m->cfg->node.name;
	r->state = (char *)matcher_state_names[m->state];
	r->term = m->term;
	r->seq = matcher_applied(m);
	r->commit = m->commit;
	r->hash = engine_hash(m->engine);
	r->partition = (uint32_t)m->cfg->partition;
	r->snapshot_seq = m->snap_last;
	r->io = (char *)iopath_name(&m->io);
	/* the day as applied (the engine's), not as the wire last showed it */
	engine_get_day(m->engine, &d);
	r->day = d.day;
	r->market = (char *)(d.open ? "open" : "closed");
	if (m->diverged)
		r->message = m->div_msg;
	if (m->feed) {
		static char feed[200];

		matcher_feed_describe(m, feed, sizeof(feed));
		r->feed = feed;
	}
	matcher_pools(m, r);
}

static void matcher_stats(void *self, struct counters *out)
{
	struct matcher *m = self;
	struct engine_stats es;
	struct rx_stats rs;
	struct net_udp_stats us = { 0 };

	engine_get_stats(m->engine, &es);
	rx_get_stats(m->tape_rx, &rs);
	net_udp_stats_read(&us); /* the host's (namespace's) UDP counters */
	m->st.tape_duplicates = rs.duplicates;
	m->st.tape_gaps = rs.gaps;
	m->st.retrans_requests_sent = rs.requests;
	m->st.rxq_dropped = m->rxq_tape + m->rxq_tape_b + m->rxq_req + m->rxq_retrans;
	m->st.tape_first_a = m->tape_first.first[AB_A];
	m->st.tape_first_b = m->tape_first.first[AB_B];
	m->st.exec_b_packets = m->exec_b.packets;
	m->st.exec_b_send_errors = m->exec_b.send_errors;
	m->st.drops_injected = m->drop_tape.dropped + m->drop_req.dropped + m->drop_retrans.dropped;
	m->st.drops_injected_data = m->drop_tape.dropped_data + m->drop_req.dropped_data;
	counters_add_table(out, stat_defs, (const uint64_t *)&m->st, ARRAY_SIZE(stat_defs));
	const uint64_t extra[] = {
		rs.requested, rs.held, rs.overflow, rx_missing(m->tape_rx), us.rcvbuf_errors,
		(uint64_t)m->rcvbuf_granted, m->ck_last_agreed, es.orders_open, es.accepted,
		es.rejects, es.canceled, es.matches, es.shares_matched, es.ignored_duplicates,
		es.tokens, es.tokens_forgotten, m->flow_cost.per_event, matcher_flow_window(m),
		m->snap_stall_ns / 1000, m->resume_ns / 1000, rs.unbelievable, es.day_events, es.day_ignored,
		es.closed_cancels, es.closed_rejects, es.admin_events, es.admin_ignored,
		es.risk_rejects, es.risk_killed, es.risk_qty, es.risk_notional, es.risk_collar,
		es.risk_open, es.risk_credit, es.kill_cancels, es.user_tokens_forgotten,
		es.user_token_quota,
	};
	_Static_assert(ARRAY_SIZE(extra) == ARRAY_SIZE(extra_defs), "a name for every value");
	counters_add_table(out, extra_defs, extra, ARRAY_SIZE(extra));
	if (matcher_feed_stats(m))
		counters_add_table(out, feed_defs, (const uint64_t *)matcher_feed_stats(m),
				   ARRAY_SIZE(feed_defs));
	if (m->glimpse) {
		struct glimpse_stats gs;

		glimpse_get_stats(m->glimpse, &gs);
		counters_add_table(out, glimpse_defs, (const uint64_t *)&gs, ARRAY_SIZE(glimpse_defs));
	}
	iopath_counters(&m->io, out);
}

/* SNAPSHOT: one now, of the state as applied. */
static int matcher_control(void *self, const Lockstep__ControlRequest *req,
			   Lockstep__ControlReply *r)
{
	static char msg[400];
	struct matcher *m = self;

	if (req->op != LOCKSTEP__CONTROL_REQUEST__OP__SNAPSHOT)
		return 0;
	if ((r->error = matcher_snapshot_take(m, matcher_applied(m))) < 0)
		snprintf(msg, sizeof(msg), "snapshot not started: %s",
			 m->diverged ? "this replica has diverged" : strerror(-r->error));
	else
		snprintf(msg, sizeof(msg), "snapshot of tape seq %llu being written to %s",
			 (unsigned long long)matcher_applied(m), m->snap_dir);
	r->message = msg;
	return 1;
}

DAEMON_LIFECYCLE(matcher, matcher, matcher_config)

static int matcher_exit_status(const void *self)
{
	return matcher_diverged(self) ? DAEMON_EXIT_DIVERGED : DAEMON_EXIT_OK;
}

const struct daemon_ops matcher_daemon = {
	.prog = "lockstep-matcher",
	.role = "matcher",
	.about = "Applies the committed tape to the order books of one partition, in order, and\n"
		 "publishes the executions as a MoldUDP64 stream; replicas of a partition\n"
		 "publish identical streams and compare their state hashes at checkpoints.\n"
		 "Exit status: 0 after a clean stop, 1 on a start-up or run-time failure, 2 on\n"
		 "a usage or configuration error, 3 when the replica was outvoted at a\n"
		 "checkpoint (diverged).",
	.spec = &matcher_config_spec,
	.cfg_size = sizeof(struct matcher_config),
	.node_offset = offsetof(struct matcher_config, node),
	.check = matcher_config_check,
	DAEMON_OPS_LIFECYCLE(matcher),
	.exit_status = matcher_exit_status,
	.status = matcher_status,
	.stats = matcher_stats,
	.control = matcher_control,
};
