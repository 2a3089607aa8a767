/* The gateway's stage clock: where a command's time goes between the read
 * of its order off a client's socket and its answer, as four histograms
 * that STATS reports (stage_<name>_us_p50 ... and, for a run's mean, the
 * counters stage_<name>_count and stage_<name>_ns):
 *
 *   disk    submitted (the client's bytes read and the command journalled)
 *           -> sent to the sequencers: the command journal's write and,
 *           under fsync = disk, its sync, and the wait for the batch;
 *   tape    sent -> our event read off the tape: the sequencer group
 *           (receipt, replication, commit, multicast) and our read;
 *   match   read off the tape -> an exec block of its partition that passes
 *           it (flow.c's FIFO): the matcher; an answer read before its
 *           tape event counts 0;
 *   answer  an exec message journalled in its login -> readable there (on
 *           disk under fsync = disk, written otherwise), when the session
 *           may send it: the login journals and their WAL.
 *
 * Times come from the clock read at each loop iteration's start (an
 * ev_check) and again by the wakeups that handle a batch (gw->stages.now: a
 * session's read, a batch of datagrams, a send, a flush): no system call
 * and no allocation per command. Memory is allocated at open, beside flow
 * control's ring and FIFOs and indexed the same way; each login keeps its
 * last GW_STAGE_LOGIN_RING append times (gw_login.stage_t). A command sent
 * before a restart has no disk or tape time; a command whose times its ring
 * no longer holds, an answer older than its login's ring, and the commands
 * a flow stall took as answered are counted in stage_untimed instead. */
#include <errno.h>

#include "clock.h"
#include "gw_private.h"
#include "macros.h"
#include "prealloc.h"

static const char *const stage_names[GW_N_STAGES] = { "disk", "tape", "match", "answer" };

int gw_stages_open(struct gw *g)
{
	struct gw_stages *s = &g->stages;

	s->cap = g->flow.cap;
	for (unsigned i = 0; i < GW_N_STAGES; i++)
		hist_init(&s->h[i]);
	s->on_tape = prealloc_zeroed((size_t)s->cap * g->n_parts, sizeof(*s->on_tape));
	for (unsigned k = 0; k < g->n_tapes; k++) {
		s->sub[k] = prealloc_zeroed(s->cap, sizeof(*s->sub[k]));
		s->sent[k] = prealloc_zeroed(s->cap, sizeof(*s->sent[k]));
		if (!s->sub[k] || !s->sent[k])
			break;
		/* what a restart left unacknowledged is resent untimed */
		s->sent_upto[k] = g->cmd[k].next - 1;
	}
	if (!s->on_tape || !s->sub[g->n_tapes - 1] || !s->sent[g->n_tapes - 1]) {
		log_err("stage clock: no memory for %u commands", s->cap);
		return -ENOMEM;
	}
	s->now = mono_ns();
	return 0;
}

void gw_stages_close(struct gw *g)
{
	struct gw_stages *s = &g->stages;

	if (ev_is_active(&s->check))
		ev_check_stop(g->loop, &s->check);
	for (unsigned k = 0; k < GW_MAX_TAPES; k++) {
		free(s->sub[k]);
		free(s->sent[k]);
		s->sub[k] = s->sent[k] = NULL;
	}
	free(s->on_tape);
	s->on_tape = NULL;
}

static void stage_record(struct gw_stages *s, enum gw_stage st, uint64_t from, uint64_t to)
{
	hist_record(&s->h[st], to > from ? to - from : 0);
}

void gw_stages_submitted(struct gw *g, unsigned k, uint64_t seq)
{
	g->stages.sub[k][seq & (g->stages.cap - 1)] = g->stages.now;
}

void gw_stages_sent(struct gw *g, unsigned k, uint64_t upto)
{
	struct gw_stages *s = &g->stages;
	uint64_t seq = s->sent_upto[k] + 1, next = g->cmd[k].next;

	if (upto <= s->sent_upto[k] || !s->sub[k] || !s->sent[k])
		return; /* nothing new, or a gateway closing that never opened its clock */
	s->now = mono_ns();
	if (upto - s->sent_upto[k] > s->cap) {
		seq = upto - s->cap + 1; /* their slots are newer commands' now */
		s->untimed += seq - s->sent_upto[k] - 1;
	}
	for (; seq <= upto; seq++) {
		uint32_t i = (uint32_t)(seq & (s->cap - 1));

		/* a submit time cap commands back is a newer command's */
		if (next - seq <= s->cap)
			stage_record(s, GW_STAGE_DISK, s->sub[k][i], s->now);
		else
			s->untimed++;
		s->sent[k][i] = s->now;
	}
	s->sent_upto[k] = upto;
}

uint64_t gw_stages_on_tape(struct gw *g, unsigned k, uint64_t seq)
{
	struct gw_stages *s = &g->stages;
	uint64_t sent;

	if (seq > s->sent_upto[k] || s->sent_upto[k] - seq >= s->cap)
		return s->now;
	/* 0: sent before this start (resent since, untimed) */
	if ((sent = s->sent[k][seq & (s->cap - 1)]) != 0)
		stage_record(s, GW_STAGE_TAPE, sent, s->now);
	return s->now;
}

void gw_stages_slot(struct gw *g, size_t slot, uint64_t on_tape)
{
	g->stages.on_tape[slot] = on_tape;
}

void gw_stages_matched(struct gw *g, size_t slot)
{
	if (slot == SIZE_MAX) /* answered before the tape showed it */
		hist_record(&g->stages.h[GW_STAGE_MATCH], 0);
	else
		stage_record(&g->stages, GW_STAGE_MATCH, g->stages.on_tape[slot], g->stages.now);
}

void gw_stages_readable(struct gw_stages *s, const struct gw_login *l, uint64_t from,
			uint64_t to)
{
	/* the ring holds the last GW_STAGE_LOGIN_RING appends: older slots
	 * hold newer records' times (appends go on while records wait) */
	if (l->next_seq - from > GW_STAGE_LOGIN_RING) {
		uint64_t keep = l->next_seq - GW_STAGE_LOGIN_RING;

		s->untimed += (to < keep ? to : keep) - from;
		from = keep;
	}
	if (to <= from)
		return;
	for (uint64_t seq = from; seq < to; seq++)
		stage_record(s, GW_STAGE_ANSWER, l->stage_t[seq & (GW_STAGE_LOGIN_RING - 1)],
			     s->now);
}

static void on_stage_check(struct ev_loop *loop, ev_check *w, int revents)
{
	struct gw_stages *s = container_of(w, struct gw_stages, check);

	(void)loop;
	(void)revents;
	s->now = mono_ns();
}

void gw_stages_start(struct gw *g)
{
	/* every wakeup's first reading, timers' included (the drains and
	 * reads read the clock again for their own batches) */
	ev_check_init(&g->stages.check, on_stage_check);
	ev_set_priority(&g->stages.check, EV_MAXPRI);
	ev_check_start(g->loop, &g->stages.check);
}

void gw_stages_untimed(struct gw *g, uint64_t n)
{
	g->stages.untimed += n;
}

void gw_stages_stats(const struct gw *g, struct counters *out)
{
	static char names[GW_N_STAGES][6][32];

	for (unsigned i = 0; i < GW_N_STAGES; i++) {
		const struct hist *h = &g->stages.h[i];
		static const char *const what[6] = { "count", "ns", "us_p50", "us_p99",
						     "us_p999", "us_max" };
		uint64_t v[6] = { h->count, h->sum, hist_percentile(h, 50) / 1000,
				  hist_percentile(h, 99) / 1000, hist_percentile(h, 99.9) / 1000,
				  h->count ? h->max / 1000 : 0 };

		for (unsigned j = 0; j < 6; j++) {
			snprintf(names[i][j], sizeof(names[i][j]), "stage_%s_%s", stage_names[i],
				 what[j]);
			counters_add(out, names[i][j], v[j], j >= 2);
		}
	}
	counters_add(out, "stage_untimed", g->stages.untimed, 0);
}
