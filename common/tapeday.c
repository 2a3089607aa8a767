/* The tape's trading days on the wire (tapeday.h): session names per day,
 * the table of days' first indices, and the mapping between a MoldUDP64
 * (session, sequence number) and the tape index. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tape.h"
#include "tapeday.h"

int tapeday_init(struct tapeday *t, const char *name)
{
	size_t n = strlen(name);

	memset(t, 0, sizeof(*t));
	if (mold_session_set(&t->first, name) < 0 || n == 0)
		return -EINVAL;
	memcpy(t->prefix, name, n < TAPEDAY_PREFIX ? n : TAPEDAY_PREFIX);
	t->known[0] = (struct tapeday_day){ .day = 1, .base = 1 };
	t->n = 1;
	return 0;
}

void tapeday_session(const struct tapeday *t, uint32_t day, struct mold_session *out)
{
	char name[MOLD_SESSION_LEN + 8];

	if (day <= 1) {
		*out = t->first;
		return;
	}
	if (day > TAPEDAY_MAX_DAY)
		day = TAPEDAY_MAX_DAY;
	snprintf(name, sizeof(name), "%s%0*u", t->prefix, TAPEDAY_DIGITS, day);
	(void)mold_session_set(out, name); /* at most 4 + 6 printable characters */
}

uint32_t tapeday_day_of_session(const struct mold_session *first, const struct mold_session *s)
{
	size_t np = 0;
	uint32_t day = 0;

	if (memcmp(s->name, first->name, MOLD_SESSION_LEN) == 0)
		return 1;
	while (np < TAPEDAY_PREFIX && first->name[np] != ' ')
		np++;
	if (memcmp(s->name, first->name, np) != 0)
		return 0;
	for (size_t i = np; i < np + TAPEDAY_DIGITS; i++) {
		if (s->name[i] < '0' || s->name[i] > '9')
			return 0;
		day = day * 10 + (uint32_t)(s->name[i] - '0');
	}
	for (size_t i = np + TAPEDAY_DIGITS; i < MOLD_SESSION_LEN; i++)
		if (s->name[i] != ' ')
			return 0;
	return day >= 2 ? day : 0;
}

uint32_t tapeday_day_of(const struct tapeday *t, const struct mold_session *s)
{
	return tapeday_day_of_session(&t->first, s);
}

int tapeday_learn(struct tapeday *t, uint32_t day, uint64_t base)
{
	unsigned i, keep;

	if (day == 0 || base == 0 || (day > 1 && base == 1))
		return -EINVAL;
	if (day == 1)
		return base == 1 ? 0 : -EINVAL;
	/* drop what the new day contradicts: the same day, later days that do
	 * not start after it, earlier days that do not start before it */
	keep = 0;
	for (i = 0; i < t->n; i++) {
		const struct tapeday_day *k = &t->known[i];

		if (k->day != 1 && (k->day == day || (k->day > day && k->base <= base) ||
				    (k->day < day && k->base >= base)))
			continue;
		t->known[keep++] = *k;
	}
	t->n = keep;
	if (t->n == TAPEDAY_KNOWN) { /* forget the oldest after day 1 */
		if (day < t->known[1].day)
			return 0;
		memmove(&t->known[1], &t->known[2], (t->n - 2) * sizeof(t->known[0]));
		t->n--;
	}
	for (i = t->n; i > 0 && t->known[i - 1].day > day; i--)
		t->known[i] = t->known[i - 1];
	t->known[i] = (struct tapeday_day){ .day = day, .base = base };
	t->n++;
	return 0;
}

void tapeday_forget_after(struct tapeday *t, uint64_t index)
{
	while (t->n > 1 && t->known[t->n - 1].base > index)
		t->n--;
}

uint64_t tapeday_base(const struct tapeday *t, uint32_t day)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->known[i].day == day)
			return t->known[i].base;
	return 0;
}

uint32_t tapeday_day_at(const struct tapeday *t, uint64_t index, uint64_t *base)
{
	unsigned i = t->n;

	while (i > 1 && t->known[i - 1].base > index)
		i--;
	if (base)
		*base = t->known[i - 1].base;
	return t->known[i - 1].day;
}

void tapeday_wire(const struct tapeday *t, uint64_t index, struct mold_session *session,
		  uint64_t *seq)
{
	uint64_t base;
	uint32_t day = tapeday_day_at(t, index, &base);

	tapeday_session(t, day, session);
	*seq = index >= base ? index - base + 1 : 0;
}

uint64_t tapeday_index(const struct tapeday *t, const struct mold_session *s, uint64_t seq)
{
	uint32_t day = tapeday_day_of(t, s);
	uint64_t base = day ? tapeday_base(t, day) : 0;

	if (!base || seq == 0 || seq > UINT64_MAX - (base - 1))
		return 0;
	return base - 1 + seq;
}

/* The index of a data packet's first block, from its Event. */
static int first_block_index(const struct mold_packet *p, uint64_t *index)
{
	struct mold_iter it;
	struct tape_event_view v;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;

	mold_iter_init(&it, p);
	if (!mold_iter_next(&it, &seq, &data, &len) || tape_event_peek(data, len, &v) < 0)
		return MOLD_E_SEQ_WRAP; /* no index to learn the day from */
	if (v.seq < p->seq || v.seq == 0)
		return MOLD_E_SEQ_WRAP;
	*index = v.seq;
	return 0;
}

int tapeday_parse(struct tapeday *t, const uint8_t *buf, size_t len, size_t max_len,
		  struct mold_packet *out)
{
	struct mold_packet p;
	uint64_t base, index;
	uint32_t day;
	int rc = mold_parse(buf, len, NULL, max_len, &p);

	if (rc < 0)
		return rc;
	day = tapeday_day_of(t, &p.session);
	if (day == 0)
		return MOLD_E_SESSION;
	base = tapeday_base(t, day);
	if (!base) {
		if (p.kind != MOLD_DATA) {
			if (day < tapeday_last(t)->day)
				return MOLD_E_SESSION; /* an old day's: nothing to learn */
			*out = p;
			return TAPEDAY_LATER;
		}
		if ((rc = first_block_index(&p, &index)) < 0)
			return rc;
		base = index - p.seq + 1;
		if (base < 2 || tapeday_learn(t, day, base) < 0)
			return MOLD_E_SEQ_WRAP;
	}
	/* day 1 maps as it is: a position no stream reaches is the
	 * receiver's to judge (rx_believable) */
	if (p.seq > UINT64_MAX - (base - 1))
		return MOLD_E_SEQ_WRAP;
	p.seq = base - 1 + p.seq;
	*out = p;
	return 0;
}

int tapeday_parse_request(const struct tapeday *t, const uint8_t *buf, size_t len,
			  struct mold_request *out)
{
	struct mold_request r;
	uint64_t index;
	int rc = mold_parse_request(buf, len, NULL, &r);

	if (rc < 0)
		return rc;
	index = tapeday_index(t, &r.session, r.seq);
	if (index == 0)
		return MOLD_E_SESSION;
	if (index > UINT64_MAX - r.count)
		return MOLD_E_SEQ_WRAP;
	r.seq = index;
	*out = r;
	return 0;
}

size_t tapeday_build_request(const struct tapeday *t, uint8_t out[MOLD_REQUEST_LEN],
			     uint64_t index, uint16_t count)
{
	struct mold_request r = { .count = count };

	tapeday_wire(t, index, &r.session, &r.seq);
	return mold_build_request(out, &r);
}

uint64_t tapeday_day_end(const struct tapeday *t, uint64_t index)
{
	uint64_t base;
	uint32_t day = tapeday_day_at(t, index, &base);

	for (unsigned i = 0; i < t->n; i++)
		if (t->known[i].day > day && t->known[i].base > index)
			return t->known[i].base - 1;
	return UINT64_MAX;
}
