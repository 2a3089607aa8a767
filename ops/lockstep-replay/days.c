/* lockstep-replay: the tape's trading days as a journal holds them (found
 * from its DayEvents, common/tapeday.h), the `days` listing, --day N as a
 * range of indices, and the wire position (session, per-day sequence
 * number) of each index for dump, pcap and send. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"

int opt_day(const char *arg, uint32_t *day)
{
	uint64_t v;

	if (parse_u64(arg, &v) < 0 || v < 1 || v > TAPEDAY_MAX_DAY)
		return fail_usage("--day: a day number, 1..%u", TAPEDAY_MAX_DAY);
	*day = (uint32_t)v;
	return 0;
}

int wirepos_init(struct wirepos *w, const char *session)
{
	memset(w, 0, sizeof(*w));
	return tapeday_init(&w->td, session);
}

/* Learns the day a START_OF_DAY event opens; other records are left alone.
 * A DayEvent that contradicts the days before it (tapeday_learn refuses
 * it) is counted, not learned. */
void wirepos_note(struct wirepos *w, uint64_t seq, const uint8_t *data, size_t len)
{
	struct tape_event_view v;
	enum tape_day_kind kind;
	uint32_t day;

	if (tape_event_peek(data, len, &v) < 0 || v.body != TAPE_BODY_DAY ||
	    tape_day_peek(v.body_data, v.body_len, &kind, &day) < 0 || kind != TAPE_DAY_START)
		return;
	if (tapeday_learn(&w->td, day, seq) < 0)
		w->refused++;
}

void wirepos_of(const struct wirepos *w, uint64_t seq, uint32_t *day, struct mold_session *s,
		uint64_t *day_seq)
{
	uint64_t base;

	*day = tapeday_day_at(&w->td, seq, &base);
	tapeday_wire(&w->td, seq, s, day_seq);
}

/* Learns the days that begin before `to` (exclusive) from the journal's
 * first record on; prints a warning when the journal starts after seq 1
 * without a START_OF_DAY (its first day is not known: day 1's session). */
int wirepos_prime(struct wirepos *w, const struct tapedir *t, uint64_t to)
{
	struct journal_iter *it = NULL;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int r, first = 1;

	if (!t->last)
		return 0;
	r = journal_iter_open(&it, t->j, t->first);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		r = 0;
		if (seq >= to && !first)
			break;
		wirepos_note(w, seq, data, len);
		if (first && seq > 1 && tapeday_day_at(&w->td, seq, NULL) == 1)
			fprintf(stderr,
				PROG ": warning: %s starts at seq %llu without a START_OF_DAY: its "
				"events up to the next day go in day 1's session, numbered by index\n",
				t->dir, (unsigned long long)seq);
		first = 0;
	}
	journal_iter_close(it);
	return r;
}

/* Adds (or extends) the day of record seq to the list. */
static int daylist_note(struct daylist *l, uint64_t seq, const struct tape_event_view *v,
			int decoded)
{
	struct dayinfo *d = l->n ? &l->v[l->n - 1] : NULL;
	enum tape_day_kind kind = TAPE_DAY_NONE;
	uint32_t day = 0;

	if (decoded && v->body == TAPE_BODY_DAY &&
	    tape_day_peek(v->body_data, v->body_len, &kind, &day) < 0)
		kind = TAPE_DAY_NONE;
	if (!d || (kind == TAPE_DAY_START && (d->day != day || d->base != seq))) {
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 16;
			struct dayinfo *p = realloc(l->v, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			l->v = p;
			l->cap = cap;
		}
		d = &l->v[l->n++];
		memset(d, 0, sizeof(*d));
		d->base = seq;
		d->opened = kind == TAPE_DAY_START;
		/* the first record of a journal trimmed of earlier days, not a
		 * START_OF_DAY: the day is known only when the journal starts at 1 */
		d->day = kind == TAPE_DAY_START ? day : seq == 1 ? 1 : 0;
		d->first_ts = decoded ? v->timestamp : 0;
	}
	d->last = seq;
	d->count++;
	if (decoded && v->timestamp) {
		if (!d->first_ts)
			d->first_ts = v->timestamp;
		d->last_ts = v->timestamp;
	}
	if (kind == TAPE_DAY_END && (day == d->day || !d->day)) {
		d->ended = 1;
		if (!d->day)
			d->day = day;
	}
	return 0;
}

int daylist_scan(struct daylist *l, const struct tapedir *t)
{
	struct journal_iter *it = NULL;
	struct tape_event_view v;
	struct progress pr;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int r;

	memset(l, 0, sizeof(*l));
	if (!t->last)
		return 0;
	progress_start(&pr, "days", t->first, t->last);
	r = journal_iter_open(&it, t->j, t->first);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		int ok = tape_event_peek(data, len, &v) == 0;

		r = daylist_note(l, seq, &v, ok);
		progress_tick(&pr, seq);
		if (seq >= t->last)
			break;
	}
	progress_end(&pr);
	journal_iter_close(it);
	return r < 0 ? r : 0;
}

const struct dayinfo *daylist_find(const struct daylist *l, uint32_t day)
{
	const struct dayinfo *found = NULL;

	/* a day sequenced twice (a day reopened after a failover): the last */
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].day == day)
			found = &l->v[i];
	return found;
}

void daylist_free(struct daylist *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int days_range(const struct tapedir *t, uint32_t day, uint64_t *from, uint64_t *to)
{
	const struct dayinfo *d;
	struct daylist l;
	int r;

	if ((r = daylist_scan(&l, t)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t->dir, strerror(-r));
		return 2;
	}
	d = daylist_find(&l, day);
	if (!d) {
		fprintf(stderr, PROG ": %s: no day %u (lockstep-replay days lists them)\n", t->dir, day);
		daylist_free(&l);
		return 1;
	}
	*from = d->base;
	*to = d->last;
	daylist_free(&l);
	return 0;
}

/* "YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ", UTC; "-" for 0. */
static void fmt_utc(char out[96], uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;

	if (!ns || !gmtime_r(&s, &tm)) {
		snprintf(out, 96, "-");
		return;
	}
	snprintf(out, 96, "%04d-%02d-%02dT%02d:%02d:%02d.%09uZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(ns % 1000000000u));
}

static void days_print(const struct daylist *l, const struct wirepos *w, int json)
{
	char sess[MOLD_SESSION_LEN + 1], a[96], b[96];
	struct mold_session s;

	if (!json)
		printf("%-7s %-10s %-25s %10s  %-30s  %-30s  %s\n", "day", "session", "index",
		       "events", "first (UTC)", "last (UTC)", "ended");
	for (size_t i = 0; i < l->n; i++) {
		const struct dayinfo *d = &l->v[i];
		char idx[48], num[16];

		if (d->day) {
			tapeday_session(&w->td, d->day, &s);
			mold_session_str(&s, sess);
		} else {
			snprintf(sess, sizeof(sess), "?");
		}
		fmt_utc(a, d->first_ts);
		fmt_utc(b, d->last_ts);
		if (json) {
			printf("{\"day\":%u,\"session\":\"%s\",\"first\":%llu,\"last\":%llu,"
			       "\"events\":%llu,\"first_time\":\"%s\",\"last_time\":\"%s\","
			       "\"ended\":%s,\"opened\":%s}\n",
			       d->day, sess, (unsigned long long)d->base, (unsigned long long)d->last,
			       (unsigned long long)d->count, a, b, d->ended ? "true" : "false",
			       d->opened ? "true" : "false");
			continue;
		}
		snprintf(idx, sizeof(idx), "%llu..%llu", (unsigned long long)d->base,
			 (unsigned long long)d->last);
		snprintf(num, sizeof(num), d->day ? "%u" : "?", d->day);
		printf("%-7s %-10s %-25s %10llu  %-30s  %-30s  %s\n", num, sess, idx,
		       (unsigned long long)d->count, a, b,
		       d->ended ? "yes" : (i + 1 < l->n ? "no (next day opened)" : "no"));
	}
}

int cmd_days(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tape-session", required_argument, NULL, 'n' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *session = "TAPE";
	struct wirepos w;
	struct daylist l;
	struct tapedir t;
	int json = 0, c, r, rc, any;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': session = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("days: one journal directory or archive");
	if (wirepos_init(&w, session) < 0)
		return fail_usage("--tape-session %s: up to 10 printable characters", session);
	if ((rc = tapedir_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	r = daylist_scan(&l, &t);
	if (r < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
		tapedir_close(&t);
		return 2;
	}
	if (!l.n)
		fprintf(stderr, PROG ": %s: no records\n", t.dir);
	days_print(&l, &w, json);
	any = l.n > 0;
	daylist_free(&l);
	tapedir_close(&t);
	if (fflush(stdout) != 0)
		return 2;
	return any ? 0 : 1;
}
