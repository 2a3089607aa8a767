/* The sequencer's flow-control table (sequencer/flowtable.h), driven by
 * a script of 16-byte steps: a status from one of 8 receivers in 3
 * partitions (plain or pausing, with its applied seq and window), an
 * expiry, or the tape publishing up to the limit; the clock moves on at
 * each. After every step: the limit equals one computed here from its
 * definition (a model), and the count of receivers behind is right; a
 * pausing status leaves its receiver paused, a plain one leaves it in step
 * or joining behind within catchup_ns, and a late one was behind for longer
 * than that; nothing not heard since the expiry stays. Aborts on a broken
 * invariant. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowtable.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STEP 16
#define TIMEOUT 500000u

static void check(int ok)
{
	if (!ok)
		abort();
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t window_of(const struct flow_table *t, const struct flow_rcv *r)
{
	return r->window ? r->window : t->window;
}

static uint64_t limit_of(const struct flow_table *t, const struct flow_rcv *r)
{
	return sat_add(r->applied, window_of(t, r));
}

/* The limit, computed here again from the definition (flowtable.h): every
 * receiver heard since `since` bounds the tape at applied + window when it
 * counts (in step, or no other receiver of its partition heard since is),
 * else at applied + 4/3 of its window (its whole buffer). */
/* Receiver i's own bound, and whether it counts. */
static uint64_t model_bound(const struct flow_table *t, unsigned i, uint64_t since, int *counted)
{
	const struct flow_rcv *r = &t->r[i];
	int partner = 0;
	uint64_t w = window_of(t, r);

	for (unsigned j = 0; j < t->n; j++)
		partner |= j != i && t->r[j].partition == r->partition &&
			   t->r[j].state == FLOW_RCV_IN_STEP && t->r[j].heard_ns >= since;
	*counted = !(r->state != FLOW_RCV_IN_STEP && partner);
	return *counted ? limit_of(t, r)
			: sat_add(r->applied, w > UINT64_MAX / 4 ? UINT64_MAX : w + w / 3);
}

static uint64_t model_limit(const struct flow_table *t, uint64_t since)
{
	uint64_t limit = UINT64_MAX;

	if (t->window == 0)
		return UINT64_MAX;
	for (unsigned i = 0; i < t->n; i++) {
		int counted;
		uint64_t l;

		if (t->r[i].heard_ns < since)
			continue;
		l = model_bound(t, i, since, &counted);
		if (l < limit)
			limit = l;
	}
	return limit;
}

static void check_limit(const struct flow_table *t, uint64_t since)
{
	unsigned behind = 0;

	check(t->n <= FLOW_TABLE_RECEIVERS);
	for (unsigned i = 0; i < t->n; i++)
		behind += t->r[i].state != FLOW_RCV_IN_STEP;
	check(flow_table_behind(t) == behind);
	check(flow_table_limit(t, since) == model_limit(t, since));
	{ /* who sets it: a receiver heard since, whose own bound it is */
		uint64_t l;
		int counted;
		const struct flow_rcv *r = flow_table_bound(t, since, &l, &counted);

		check(l == model_limit(t, since));
		check((r == NULL) == (l == UINT64_MAX));
		check(!r || (r->heard_ns >= since && r >= t->r && r < t->r + t->n));
		if (r) {
			int mc;

			check(model_bound(t, (unsigned)(r - t->r), since, &mc) == l);
			check(mc == counted);
		}
	}
}

static void status(struct flow_table *t, const uint8_t *p, uint64_t now, uint64_t published)
{
	struct flow_status st = { .partition = (uint16_t)(p[1] % 3),
				  .flags = p[2] % 4 == 1 ? FLOW_STATUS_PAUSING : 0,
				  .applied = wire_get_u32(p + 4),
				  .window = wire_get_u32(p + 8) % 5000 };
	struct sockaddr_in from = { .sin_family = AF_INET,
				    .sin_port = htons((uint16_t)(9000 + p[0] % 8)) };
	const struct flow_rcv *r;
	uint64_t behind_before = 0;
	unsigned changes;

	snprintf(st.name, sizeof(st.name), "m%u", p[0] % 8);
	for (unsigned i = 0; i < t->n; i++)
		if (t->r[i].addr.sin_port == from.sin_port)
			behind_before = t->r[i].behind_ns;
	r = flow_table_status(t, &st, &from, now, published, &changes);
	check(r != NULL);
	if (st.flags) {
		check(r->state == FLOW_RCV_PAUSED);
		return;
	}
	check(r->state == FLOW_RCV_IN_STEP ||
	      (r->state == FLOW_RCV_JOINING && limit_of(t, r) < published &&
	       now - r->behind_ns <= t->catchup_ns));
	/* late: in step by the clock alone, still behind */
	check(!(changes & FLOW_LATE) ||
	      ((changes & FLOW_IN_STEP) && limit_of(t, r) < published &&
	       now - (behind_before ? behind_before : now) > t->catchup_ns));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct flow_table t;
	uint64_t now = 1, published = 0;

	memset(&t, 0, sizeof(t));
	t.window = 1000;
	t.catchup_ns = 4 * TIMEOUT;
	for (size_t off = 0; off + STEP <= size; off += STEP) {
		const uint8_t *p = data + off;
		uint64_t since, limit, next;

		now += (uint64_t)p[3] * 1000;
		since = now > TIMEOUT ? now - TIMEOUT : 0;
		switch (p[2] % 4) {
		case 0:
		case 1:
			status(&t, p, now, published);
			break;
		case 2:
			flow_table_expire(&t, since, NULL, NULL);
			for (unsigned i = 0; i < t.n; i++)
				check(t.r[i].heard_ns >= since);
			break;
		default: /* the tape goes as far as the limit lets it */
			limit = flow_table_limit(&t, since);
			next = published + wire_get_u32(p + 12) % 10000;
			if (next > limit)
				next = limit;
			if (next > published)
				published = next;
		}
		check_limit(&t, since);
	}
	return 0;
}
