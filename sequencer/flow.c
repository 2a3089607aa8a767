/* The tape's flow control: the publisher limit. Each live tape receiver (a
 * matcher replica) sends a status message (common/flowstatus.h) saying how
 * far it has applied the tape; the primary multicasts no event beyond the
 * slowest receiver heard within flow_timeout plus its window (flow_window
 * events, or the window the receiver states), so that a receiver that falls
 * behind finds the tape waiting in the sequencer's journal instead of lost
 * in its kernel receive buffer. What is held is published as the receivers
 * catch up (from `pend`, or read back from the journal). The gateways'
 * windows (gateway/flow.c) then fill and stop the clients: the whole chain
 * slows to its slowest live receiver, and no datagram is dropped on the way.
 *
 * A receiver that stops sending (dead, or catching up by retransmission,
 * which does not need the tape) is forgotten after flow_timeout, so a dead
 * replica cannot stop the exchange. No receivers, or flow_window 0: no
 * limit. */
#include <string.h>

#include "flowstatus.h"
#include "log.h"
#include "clock.h"
#include "seq_private.h"

static struct log_ratelimit rl_flow = LOG_RATELIMIT_INIT(1, 5);

/* The receiver that sent from `from`, or a free entry for it; NULL when the
 * table is full. */
static struct seq_flow_rcv *flow_find(struct seq_flow *f, const struct sockaddr_in *from)
{
	for (unsigned i = 0; i < f->n; i++)
		if (net_addr_same(&f->r[i].addr, from))
			return &f->r[i];
	if (f->n == SEQ_FLOW_RECEIVERS)
		return NULL;
	memset(&f->r[f->n], 0, sizeof(f->r[0]));
	f->r[f->n].addr = *from;
	return &f->r[f->n++];
}

/* The limit from the receivers heard since `since`: min(applied + window). */
static uint64_t flow_compute(const struct sequencer *s, uint64_t since)
{
	const struct seq_flow *f = &s->flow;
	uint64_t limit = UINT64_MAX;

	if (s->cfg.flow_window == 0)
		return UINT64_MAX;
	for (unsigned i = 0; i < f->n; i++) {
		const struct seq_flow_rcv *r = &f->r[i];
		uint64_t w = r->window ? r->window : s->cfg.flow_window, l;

		if (r->heard_ns < since)
			continue;
		l = r->applied + w < r->applied ? UINT64_MAX : r->applied + w;
		if (l < limit)
			limit = l;
	}
	return limit;
}

/* Forgets the receivers not heard since `since` (keeping the order). */
static void flow_expire(struct seq_flow *f, uint64_t since)
{
	unsigned k = 0;

	for (unsigned i = 0; i < f->n; i++) {
		if (f->r[i].heard_ns >= since) {
			f->r[k++] = f->r[i];
			continue;
		}
		log_notice("flow control: receiver %s not heard for a while: forgotten",
			   f->r[i].name);
	}
	f->n = k;
}

/* Receivers heard before this are no longer counted. */
static uint64_t flow_since(const struct sequencer *s, uint64_t now)
{
	return now > s->cfg.flow_timeout_ns ? now - s->cfg.flow_timeout_ns : 0;
}

/* A new limit: what it lets out goes now. */
static void flow_update(struct sequencer *s, uint64_t now)
{
	uint64_t old = s->flow.limit;

	s->flow.limit = flow_compute(s, flow_since(s, now));
	if (s->flow.limit > old && s->state == SEQ_PRIMARY && s->published < s->commit)
		seq_tape_publish(s, s->published + 1, s->commit);
}

void seq_flow_status(struct sequencer *s, const uint8_t *buf, size_t len,
		     const struct sockaddr_in *from)
{
	struct flow_status st;
	struct seq_flow_rcv *r;
	uint64_t now = mono_ns();

	if (flow_status_decode(buf, len, &st) < 0) {
		s->st.flow_status_bad++;
		return;
	}
	s->st.flow_status_received++;
	if (!(r = flow_find(&s->flow, from))) {
		log_ratelimited(&rl_flow, LOG_LVL_WARNING,
				"flow control: more than %d receivers: %s not counted",
				SEQ_FLOW_RECEIVERS, st.name);
		return;
	}
	if (r->heard_ns == 0)
		log_notice("flow control: receiver %s (partition %u) at tape seq %llu", st.name,
			   (unsigned)st.partition, (unsigned long long)st.applied);
	memcpy(r->name, st.name, sizeof(r->name));
	if (st.applied > r->applied || r->heard_ns == 0)
		r->applied = st.applied;
	r->window = st.window;
	r->heard_ns = now;
	flow_update(s, now);
}

void seq_flow_tick(struct sequencer *s, uint64_t now)
{
	flow_expire(&s->flow, flow_since(s, now));
	flow_update(s, now);
}

uint64_t seq_flow_cap(struct sequencer *s, uint64_t to)
{
	if (to <= s->flow.limit) {
		s->flow.holding = 0;
		return to;
	}
	if (!s->flow.holding && s->published < to)
		s->st.flow_holds++;
	s->flow.holding = 1;
	return s->flow.limit;
}
