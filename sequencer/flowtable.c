/* The tape's flow-control table (flowtable.h). */
#include <string.h>

#include "flowtable.h"
#include "net.h"

/* The receiver that sent from `from`, or a free entry for it; NULL when the
 * table is full. */
static struct flow_rcv *rcv_find(struct flow_table *t, const struct sockaddr_in *from)
{
	for (unsigned i = 0; i < t->n; i++)
		if (net_addr_same(&t->r[i].addr, from))
			return &t->r[i];
	if (t->n == FLOW_TABLE_RECEIVERS)
		return NULL;
	memset(&t->r[t->n], 0, sizeof(t->r[0]));
	t->r[t->n].addr = *from;
	return &t->r[t->n++];
}

static uint64_t rcv_window(const struct flow_table *t, const struct flow_rcv *r)
{
	return r->window ? r->window : t->window;
}

/* applied + window, saturated */
static uint64_t rcv_limit(const struct flow_table *t, const struct flow_rcv *r)
{
	uint64_t w = rcv_window(t, r);

	return r->applied + w < r->applied ? UINT64_MAX : r->applied + w;
}

/* applied + its whole buffer (the window is 3/4 of it), saturated: how far
 * the tape may run ahead of a receiver that is not counted */
static uint64_t rcv_buffer_limit(const struct flow_table *t, const struct flow_rcv *r)
{
	uint64_t w = rcv_window(t, r), b = w > UINT64_MAX / 4 ? UINT64_MAX : w + w / 3;

	return r->applied + b < r->applied ? UINT64_MAX : r->applied + b;
}

/* Whether another receiver of r's partition, heard since `since`, is in
 * step. */
static int partner_in_step(const struct flow_table *t, const struct flow_rcv *r, uint64_t since)
{
	for (unsigned i = 0; i < t->n; i++) {
		const struct flow_rcv *o = &t->r[i];

		if (o != r && o->partition == r->partition && o->state == FLOW_RCV_IN_STEP &&
		    o->heard_ns >= since)
			return 1;
	}
	return 0;
}

/* The receiver's state after its status at `now`: a pause announced, or
 * back within its window of what the tape has carried, or behind for too
 * long. */
static unsigned rcv_step(const struct flow_table *t, struct flow_rcv *r, uint8_t flags,
			 uint64_t now, uint64_t published)
{
	if (flags & FLOW_STATUS_PAUSING) {
		unsigned c = r->state != FLOW_RCV_PAUSED ? FLOW_PAUSED : 0;

		if (r->state == FLOW_RCV_IN_STEP)
			r->behind_ns = 0; /* a new catch-up; one under way keeps its clock */
		else if (r->behind_ns == 0 && rcv_limit(t, r) < published)
			r->behind_ns = now ? now : 1; /* catching up, flagged: the clock runs */
		r->state = FLOW_RCV_PAUSED;
		return c;
	}
	if (r->state == FLOW_RCV_IN_STEP)
		return 0;
	if (rcv_limit(t, r) >= published) {
		r->state = FLOW_RCV_IN_STEP;
		return FLOW_IN_STEP;
	}
	r->state = FLOW_RCV_JOINING; /* back from its pause, still behind */
	if (r->behind_ns == 0)
		r->behind_ns = now ? now : 1;
	if (now - r->behind_ns <= t->catchup_ns)
		return 0;
	r->state = FLOW_RCV_IN_STEP;
	return FLOW_IN_STEP | FLOW_LATE;
}

struct flow_rcv *flow_table_status(struct flow_table *t, const struct flow_status *st,
				   const struct sockaddr_in *from, uint64_t now,
				   uint64_t published, unsigned *changes)
{
	struct flow_rcv *r = rcv_find(t, from);

	*changes = 0;
	if (!r)
		return NULL;
	if (r->heard_ns == 0) {
		*changes |= FLOW_JOINED;
		r->state = FLOW_RCV_JOINING;
		r->applied = st->applied;
		r->behind_ns = now ? now : 1;
	}
	memcpy(r->name, st->name, sizeof(r->name));
	r->partition = st->partition;
	if (st->applied > r->applied)
		r->applied = st->applied;
	r->window = st->window;
	r->heard_ns = now ? now : 1; /* 0 marks a new entry */
	*changes |= rcv_step(t, r, st->flags, now, published);
	return r;
}

/* Receiver r's bound on the tape; *counted: whether it is waited for. */
static uint64_t rcv_bound(const struct flow_table *t, const struct flow_rcv *r, uint64_t since,
			  int *counted)
{
	/* not counted: only its buffer bounds the tape */
	*counted = !(r->state != FLOW_RCV_IN_STEP && partner_in_step(t, r, since));
	return *counted ? rcv_limit(t, r) : rcv_buffer_limit(t, r);
}

const struct flow_rcv *flow_table_bound(const struct flow_table *t, uint64_t since,
					uint64_t *limit, int *counted)
{
	const struct flow_rcv *who = NULL;

	*limit = UINT64_MAX;
	*counted = 0;
	if (t->window == 0)
		return NULL;
	for (unsigned i = 0; i < t->n; i++) {
		const struct flow_rcv *r = &t->r[i];
		uint64_t l;
		int c;

		if (r->heard_ns < since)
			continue;
		l = rcv_bound(t, r, since, &c);
		if (l < *limit) {
			*limit = l;
			*counted = c;
			who = r;
		}
	}
	return who;
}

uint64_t flow_table_limit(const struct flow_table *t, uint64_t since)
{
	uint64_t limit;
	int counted;

	flow_table_bound(t, since, &limit, &counted);
	return limit;
}

void flow_table_expire(struct flow_table *t, uint64_t since,
		       void (*forgot)(void *ctx, const struct flow_rcv *r), void *ctx)
{
	unsigned k = 0;

	for (unsigned i = 0; i < t->n; i++) {
		if (t->r[i].heard_ns >= since) {
			t->r[k++] = t->r[i];
			continue;
		}
		if (forgot)
			forgot(ctx, &t->r[i]);
	}
	t->n = k;
}

unsigned flow_table_behind(const struct flow_table *t)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->n; i++)
		n += t->r[i].state != FLOW_RCV_IN_STEP;
	return n;
}
