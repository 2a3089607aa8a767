/* The gateway's flow control: a window of commands in flight, and the
 * client sockets left unread while it is full.
 *
 * A command is in flight from its send until its partition's matcher has
 * applied it: the tape says at which tape seq it was sequenced (our event
 * with its origin_seq), and every exec block a partition publishes carries
 * the tape seq of the event that produced it; the matchers apply the tape
 * in order, so a block of partition p at tape seq X answers every command of
 * ours to p at or below X, whether or not that command had an answer of its
 * own (a duplicate is ignored silently). The two streams come on their own
 * sockets, so an answer may be read before the tape event it answers: each
 * partition's highest tape seq published is kept, and an event at or below
 * it is never counted. So
 *
 *   in flight = commands sent but not yet seen on the tape
 *             + commands seen on the tape that their partition has not passed.
 *
 * At [gateway] max_in_flight the sessions stop being read: their bytes wait
 * in the kernel, TCP's window closes, and the firm's sender blocks, as at an
 * exchange. The sessions are read again once half the window has drained.
 * That bounds what this gateway puts in front of the sequencer and the
 * matchers, and so what their kernel receive buffers must hold, whatever a
 * client offers.
 *
 * A partition that publishes nothing (a dead partition, or a tail of
 * commands it ignored), or a tape whose group has no primary, must not
 * hold the sessions forever: after flow_stall without progress the
 * sessions are read again, and every command in flight is taken as
 * answered (flow_stalls counts it).
 *
 * Memory is allocated at open: per tape, a ring of each command's
 * partition, indexed by the tape's command seq, and per partition a FIFO
 * of the tape seqs (its tape's) of our commands it has not passed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_private.h"
#include "log.h"
#include "prealloc.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

static void flow_on_stall(struct ev_loop *loop, ev_timer *w, int revents);

/* The ring of partitions and the FIFOs: room for this many commands. */
static uint32_t flow_capacity(uint64_t window)
{
	uint32_t n = 1u << 16;

	while (n < 2 * window && n < (1u << 30))
		n <<= 1;
	return n;
}

int gw_flow_open(struct gw *g)
{
	struct gw_flow *f = &g->flow;

	f->window = g->cfg.max_in_flight;
	f->cap = flow_capacity(f->window);
	f->tape_seq = prealloc_zeroed((size_t)f->cap * g->n_parts, sizeof(*f->tape_seq));
	for (unsigned k = 0; k < g->n_tapes; k++) {
		f->part[k] = prealloc_zeroed(f->cap, sizeof(*f->part[k]));
		if (!f->part[k])
			break;
		/* what was sent before a restart and is not acknowledged yet
		 * is counted in flight until the tape shows it */
		f->seen[k] = g->cmd[k].acked;
	}
	if (!f->part[g->n_tapes - 1] || !f->tape_seq) {
		log_err("flow control: no memory for %u commands in flight", f->cap);
		return -ENOMEM;
	}
	/* re-armed by each sign of progress while paused (ev_timer_again) */
	ev_timer_init(&f->stall, flow_on_stall, 0., (ev_tstamp)g->cfg.flow_stall / 1e9);
	f->stall.data = g;
	return 0;
}

void gw_flow_close(struct gw *g)
{
	if (g->flow.tape_seq && ev_is_active(&g->flow.stall))
		ev_timer_stop(g->loop, &g->flow.stall);
	for (unsigned k = 0; k < GW_MAX_TAPES; k++) {
		free(g->flow.part[k]);
		g->flow.part[k] = NULL;
	}
	free(g->flow.tape_seq);
	g->flow.tape_seq = NULL;
}

uint64_t gw_flow_in_flight(const struct gw *g)
{
	const struct gw_flow *f = &g->flow;
	uint64_t unseen = 0;

	for (unsigned k = 0; k < g->n_tapes; k++)
		if (g->cmd[k].next - 1 > f->seen[k])
			unseen += g->cmd[k].next - 1 - f->seen[k];
	return unseen + f->queued;
}

/* Stops reading the sessions; the stall timer starts. */
static void flow_pause(struct gw *g)
{
	struct gw_flow *f = &g->flow;

	f->paused = 1;
	f->pauses++;
	f->paused_at = ev_now(g->loop);
	gw_session_pause(g, 1);
	ev_timer_again(g->loop, &f->stall);
}

static void flow_resume(struct gw *g)
{
	struct gw_flow *f = &g->flow;

	f->paused = 0;
	f->paused_ns += (uint64_t)((ev_now(g->loop) - f->paused_at) * 1e9);
	ev_timer_stop(g->loop, &f->stall);
	gw_session_pause(g, 0);
}

/* Progress while paused: the sessions are read again once half the window
 * has drained; until then the stall timer starts over. */
static void flow_progress(struct gw *g)
{
	if (!g->flow.paused)
		return;
	if (gw_flow_in_flight(g) <= g->flow.window / 2)
		flow_resume(g);
	else
		ev_timer_again(g->loop, &g->flow.stall);
}

void gw_flow_sent(struct gw *g, unsigned k, uint64_t cmd_seq, unsigned partition)
{
	struct gw_flow *f = &g->flow;

	f->part[k][cmd_seq & (f->cap - 1)] = (uint8_t)partition;
	if (!f->paused && gw_flow_in_flight(g) >= f->window)
		flow_pause(g);
}

/* Where partition p's FIFO slot i is in the FIFOs (the stage clock's
 * times are kept at the same index). */
static size_t fifo_index(const struct gw_flow *f, unsigned p, uint32_t i)
{
	return (size_t)p * f->cap + (i & (f->cap - 1));
}

static uint64_t *fifo_at(struct gw_flow *f, unsigned p, uint32_t i)
{
	return &f->tape_seq[fifo_index(f, p, i)];
}

void gw_flow_on_tape(struct gw *g, unsigned k, uint64_t origin_seq, uint64_t tape_seq)
{
	struct gw_flow *f = &g->flow;

	/* commands the tape skipped (a gap given up on) stand at this seq */
	for (uint64_t c = f->seen[k] + 1; c <= origin_seq; c++) {
		unsigned p = f->part[k][c & (f->cap - 1)];
		uint64_t at;

		if (p >= g->n_parts || gw_part_tape(g, p) != k)
			continue; /* a restart's ring (zeros, partition 0) on another tape: not counted */
		at = gw_stages_on_tape(g, k, c);
		if (tape_seq <= f->passed[p]) {
			gw_stages_matched(g, SIZE_MAX);
			continue; /* its answer came in before the tape did */
		}
		if (f->len[p] == f->cap) { /* cannot happen with a sane window */
			f->head[p]++;
			f->len[p]--;
			f->queued--;
		}
		*fifo_at(f, p, f->head[p] + f->len[p]) = tape_seq;
		gw_stages_slot(g, fifo_index(f, p, f->head[p] + f->len[p]), at);
		f->len[p]++;
		f->queued++;
	}
	if (origin_seq > f->seen[k]) {
		f->seen[k] = origin_seq;
		flow_progress(g);
	}
}

void gw_flow_on_exec(struct gw *g, unsigned p, uint64_t tape_seq)
{
	struct gw_flow *f = &g->flow;
	uint32_t before = f->len[p];

	if (tape_seq > f->passed[p])
		f->passed[p] = tape_seq;
	while (f->len[p] > 0 && *fifo_at(f, p, f->head[p]) <= tape_seq) {
		gw_stages_matched(g, fifo_index(f, p, f->head[p]));
		f->head[p]++;
		f->len[p]--;
		f->queued--;
	}
	if (f->len[p] != before)
		flow_progress(g);
}

/* The window has seen no progress for flow_stall: what the partitions hold
 * is taken as answered, and the sessions are read again. */
static void flow_on_stall(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct gw *g = w->data;
	struct gw_flow *f = &g->flow;

	(void)loop;
	(void)revents;
	f->stalls++;
	log_ratelimited(&gw_rl, LOG_LVL_WARNING,
			"flow control: %llu commands in flight, no progress for %.0f ms: "
			"reading the sessions again",
			(unsigned long long)gw_flow_in_flight(g), (double)g->cfg.flow_stall / 1e6);
	for (unsigned p = 0; p < g->n_parts; p++) {
		gw_stages_untimed(g, f->len[p]);
		f->queued -= f->len[p];
		f->head[p] += f->len[p];
		f->len[p] = 0;
	}
	/* and what no tape has shown yet: a tape whose group has no primary
	 * for long must not hold the other tapes' partitions (its commands
	 * are resent all the same, and not counted when they appear) */
	for (unsigned k = 0; k < g->n_tapes; k++)
		if (g->cmd[k].next - 1 > f->seen[k]) {
			gw_stages_untimed(g, g->cmd[k].next - 1 - f->seen[k]);
			f->seen[k] = g->cmd[k].next - 1;
		}
	flow_resume(g);
}
