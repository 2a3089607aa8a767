/* The tape's flow control: the publisher limit. Each live tape receiver (a
 * matcher replica) sends a status message (common/flowstatus.h) saying how
 * far it has applied the tape; the primary multicasts no event beyond the
 * slowest receiver heard within flow_timeout plus its window (flow_window
 * events, or the window the receiver states), so that a receiver that falls
 * behind finds the tape waiting in the sequencer's journal instead of lost
 * in its kernel receive buffer. What is held is published as the receivers
 * catch up (from `pend`, or read back from the journal). The gateways'
 * windows (gateway/flow.c) then fill and stop the clients: the whole chain
 * slows to its slowest receiver in step, and no datagram is dropped on the way
 * (a replica that paused, not counted, still bounds the tape by its whole
 * buffer, which holds seconds of it).
 *
 * A receiver that stops sending (dead, or catching up by retransmission,
 * which does not need the tape) is forgotten after flow_timeout, so a dead
 * replica cannot stop the exchange. No receivers, or flow_window 0: no
 * limit.
 *
 * The limit counts the receivers in step (flowtable.h): a replica that
 * announced a planned pause (a snapshot), or came back behind, is not
 * waited for while another replica of its partition keeps up. */
#include "flowstatus.h"
#include "log.h"
#include "clock.h"
#include "seq_private.h"

static struct log_ratelimit rl_flow = LOG_RATELIMIT_INIT(1, 5);

/* Receivers heard before this are no longer counted. */
static uint64_t flow_since(const struct sequencer *s, uint64_t now)
{
	return now > s->cfg.flow_timeout_ns ? now - s->cfg.flow_timeout_ns : 0;
}

/* A new limit: what it lets out goes now. */
static void flow_update(struct sequencer *s, uint64_t now)
{
	uint64_t old = s->flow.limit;

	s->flow.since = flow_since(s, now);
	s->flow.limit = flow_table_limit(&s->flow.t, s->flow.since);
	if (s->flow.limit > old && s->state == SEQ_PRIMARY && s->published < s->commit)
		seq_tape_publish(s, s->published + 1, s->commit);
}

/* A receiver counted again, on the primary. */
static void flow_log_step(const struct sequencer *s, const struct flow_rcv *r, unsigned changes)
{
	if (changes & FLOW_LATE)
		log_notice("flow control: receiver %s counted again, still %llu behind the tape "
			   "after %.1f s: the tape waits for it", r->name,
			   (unsigned long long)(s->published - r->applied),
			   (double)s->flow.t.catchup_ns / 1e9);
	else if ((changes & FLOW_IN_STEP) && !(changes & FLOW_JOINED))
		log_info("flow control: receiver %s in step again at tape seq %llu", r->name,
			 (unsigned long long)r->applied);
}

void seq_flow_status(struct sequencer *s, const uint8_t *buf, size_t len,
		     const struct sockaddr_in *from)
{
	struct flow_status st;
	const struct flow_rcv *r;
	uint64_t now = mono_ns(), carried;
	unsigned changes;

	if (flow_status_decode(buf, len, &st) < 0) {
		s->st.flow_status_bad++;
		return;
	}
	s->st.flow_status_received++;
	/* what the tape has carried: a standby knows what is committed */
	carried = s->state == SEQ_PRIMARY ? s->published : s->commit;
	if (!(r = flow_table_status(&s->flow.t, &st, from, now, carried, &changes))) {
		log_ratelimited(&rl_flow, LOG_LVL_WARNING,
				"flow control: more than %d receivers: %s not counted",
				FLOW_TABLE_RECEIVERS, st.name);
		return;
	}
	if (changes & FLOW_JOINED)
		log_notice("flow control: receiver %s (partition %u) at tape seq %llu", r->name,
			   (unsigned)r->partition, (unsigned long long)r->applied);
	if ((changes & FLOW_PAUSED) && !(changes & FLOW_JOINED)) /* (a rejoin, flagged) */
		s->st.flow_receiver_pauses++;
	if (s->state == SEQ_PRIMARY) /* a standby's `published` says nothing */
		flow_log_step(s, r, changes);
	flow_update(s, now);
}

static void flow_forgot(void *ctx, const struct flow_rcv *r)
{
	(void)ctx;
	log_notice("flow control: receiver %s not heard for a while: forgotten", r->name);
}

void seq_flow_tick(struct sequencer *s, uint64_t now)
{
	flow_table_expire(&s->flow.t, flow_since(s, now), flow_forgot, NULL);
	flow_update(s, now);
}

static const char *const rcv_state_names[] = { "joining behind", "paused", "in step" };

/* Who the tape waits for, as a hold begins (rate-limited). */
static void flow_log_hold(struct sequencer *s)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(1, 1);
	const struct flow_rcv *r;
	uint64_t limit;
	int counted;

	if (s->state != SEQ_PRIMARY || !log_ratelimit_ok(&rl, LOG_LVL_NOTICE) ||
	    !(r = flow_table_bound(&s->flow.t, s->flow.since, &limit, &counted)))
		return;
	log_notice("flow control: the tape waits at seq %llu for receiver %s (%s, %s, applied "
		   "%llu, window %llu)",
		   (unsigned long long)s->flow.limit, r->name, rcv_state_names[r->state],
		   counted ? "counted" : "not counted: its buffer", (unsigned long long)r->applied,
		   (unsigned long long)(r->window ? r->window : s->flow.t.window));
}

uint64_t seq_flow_cap(struct sequencer *s, uint64_t to)
{
	if (to <= s->flow.limit) {
		s->flow.holding = 0;
		return to;
	}
	if (!s->flow.holding && s->published < to) {
		s->st.flow_holds++;
		flow_log_hold(s);
	}
	s->flow.holding = 1;
	return s->flow.limit;
}
