/* lockstep-replay verify: every record's CRC, sequence, term and command,
 * and the first bad record named. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "command.h"
#include "convert.h"
#include "engine.h"
#include "replay.h"

/* The record header at the bad spot, to tell a duplicate from a gap (the
 * journal reports both as "sequence gap"): u32 LE length, u64 LE seq. */
static int peek_record_seq(const char *dir, const char *segment, uint64_t offset, uint64_t *seq)
{
	char path[4096];
	uint8_t h[12];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, segment);
	f = fopen(path, "rb");
	if (!f)
		return -1;
	ok = fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(h, 1, sizeof(h), f) == sizeof(h);
	fclose(f);
	if (!ok)
		return -1;
	*seq = 0;
	for (int i = 7; i >= 0; i--)
		*seq = *seq << 8 | h[4 + i];
	return 0;
}

static int verify_journal_report(const struct tapedir *t)
{
	const struct journal_report *r = &t->rep;
	uint64_t found;

	printf("FAIL: first bad record: seq %llu (segment %s, offset %llu): %s",
	       (unsigned long long)r->bad_seq, r->bad_segment, (unsigned long long)r->bad_offset,
	       r->bad_reason);
	if (r->bad_reason && strcmp(r->bad_reason, "sequence gap") == 0) {
		if (r->bad_offset == 0)
			printf(" (the segment starts at seq %llu; seq %llu..%llu are missing)",
			       (unsigned long long)strtoull(r->bad_segment, NULL, 10),
			       (unsigned long long)r->bad_seq,
			       (unsigned long long)strtoull(r->bad_segment, NULL, 10) - 1);
		else if (peek_record_seq(t->dir, r->bad_segment, r->bad_offset, &found) == 0)
			printf(" (%s: found seq %llu)",
			       found < r->bad_seq ? "a duplicate" : "a gap", (unsigned long long)found);
	}
	printf(r->damaged ? " -- damage: good records follow it, so a daemon refuses to start on "
			    "this journal rather than cut them (lockstep-replay repair)"
			  : " -- a torn tail: a daemon cuts it when it starts");
	printf("\n%llu good records before it (seq %llu..%llu); from it on %llu bytes (%llu whole "
	       "segments) cannot be trusted\n",
	       (unsigned long long)r->records, (unsigned long long)t->first,
	       (unsigned long long)t->last, (unsigned long long)r->cut_bytes,
	       (unsigned long long)r->cut_segments);
	return 1;
}

/* What a walk over the records found. */
struct verify_walk {
	uint64_t from, to; /* the range walked */
	uint32_t day; /* the day of the record walked last; 0: not known */
	uint64_t days; /* START_OF_DAY events */
	uint64_t n, starts, prev_term, bad_seq;
	const char *bad; /* the first bad record's fault; NULL: none */
	int r; /* 0, or a negative errno reading the journal */
};

/* Why a record (of term `term`, after records of prev_term) is bad; NULL when
 * it is not. */
static const char *verify_record(const struct event *e, uint64_t term, uint64_t prev_term)
{
	struct engine_cmd ecmd;
	uint32_t part;

	if (e->bad)
		return e->bad;
	if (e->v.term != term)
		return "the event's term is not the record's";
	if (term < prev_term)
		return "the term goes down";
	if (e->v.body == TAPE_BODY_COMMAND &&
	    command_decode(e->v.body_data, e->v.body_len, &ecmd, &part) < 0)
		return "a command the matcher cannot apply";
	return NULL;
}

/* Why a DayEvent does not fit the days before it (each day opens after
 * the one before, and ends as itself); NULL when it fits. Follows w->day. */
static const char *verify_day(const struct event *e, struct verify_walk *w)
{
	if (e->v.body != TAPE_BODY_DAY)
		return NULL;
	if (e->day_kind == TAPE_DAY_START) {
		if (e->day_of_event == 1 && e->seq != 1)
			return "day 1 opened after seq 1";
		if (e->day_of_event != 1 && w->day && e->day_of_event != w->day + 1)
			return "a START_OF_DAY that does not open the next day";
		w->day = e->day_of_event;
		w->days++;
	} else if (e->day_kind == TAPE_DAY_END && w->day && e->day_of_event != w->day) {
		return "an END_OF_DAY of another day than the current one";
	}
	return NULL;
}

/* Reads the good records up to the first bad one. Returns 0, or 2 when out
 * of memory. */
static int verify_walk(const struct tapedir *t, struct verify_walk *w)
{
	struct journal_iter *it = NULL;
	struct arena arena;
	struct progress pr;
	struct event e;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int r;

	if (arena_init(&arena, ARENA_BYTES) < 0)
		return 2;
	w->day = w->from == 1;
	progress_start(&pr, "verify", w->from, w->to);
	r = t->last ? journal_iter_open(&it, t->j, w->from) : 0;
	while (r == 0 && it && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		r = 0;
		w->n++;
		event_decode(&e, seq, term, data, len, &arena);
		if ((w->bad = verify_record(&e, term, w->prev_term)) != NULL ||
		    (w->bad = verify_day(&e, w)) != NULL) {
			w->bad_seq = seq;
			break;
		}
		if (e.term_start)
			w->starts++;
		w->prev_term = term;
		progress_tick(&pr, seq);
		if (seq == w->to)
			break;
	}
	progress_end(&pr);
	journal_iter_close(it);
	arena_fini(&arena);
	w->r = r;
	return 0;
}

/* Prints the verdict; the exit status. */
static int verify_verdict(const struct tapedir *t, const struct verify_walk *w, int allow_trimmed,
			  uint32_t day)
{
	if (w->r < 0) {
		printf("FAIL: reading seq %llu: %s\n", (unsigned long long)(w->from + w->n),
		       strerror(-w->r));
		return 1;
	}
	if (w->bad) {
		printf("FAIL: first bad record: seq %llu: %s\n", (unsigned long long)w->bad_seq, w->bad);
		return 1;
	}
	if (t->rep.bad_reason)
		return verify_journal_report(t);
	if (!t->last) {
		printf("FAIL: %s holds no journal records\n", t->dir);
		return 1;
	}
	if (day) {
		printf("ok: day %u: %llu records, seq %llu..%llu, terms up to %llu (%llu term "
		       "starts)\n", day, (unsigned long long)w->n, (unsigned long long)w->from,
		       (unsigned long long)w->to, (unsigned long long)w->prev_term,
		       (unsigned long long)w->starts);
		return 0;
	}
	if (t->first != 1 && !allow_trimmed) {
		printf("FAIL: the journal starts at seq %llu: seq 1..%llu are missing "
		       "(--allow-trimmed accepts that)\n",
		       (unsigned long long)t->first, (unsigned long long)t->first - 1);
		return 1;
	}
	printf("ok: %llu records, seq %llu..%llu, terms up to %llu (%llu term starts), "
	       "%llu days opened, %u segments, %llu bytes\n",
	       (unsigned long long)w->n, (unsigned long long)t->first, (unsigned long long)t->last,
	       (unsigned long long)w->prev_term, (unsigned long long)w->starts,
	       (unsigned long long)w->days,
	       journal_segments(t->j), (unsigned long long)journal_bytes(t->j));
	return 0;
}

int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "allow-trimmed", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' },
		{ "day", required_argument, NULL, 'd' }, { NULL, 0, NULL, 0 },
	};
	struct verify_walk w = { 0 };
	struct tapedir t;
	uint32_t day = 0;
	int allow_trimmed = 0, c, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': allow_trimmed = 1; break;
		case 'd': if (opt_day(optarg, &day)) return 2; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("verify: one journal directory or archive");
	rc = tapedir_open(&t, argv[optind], 0, 0);
	if (rc) {
		if (t.rep.bad_reason) /* a bad segment header: still name it */
			return verify_journal_report(&t);
		return rc;
	}
	w.from = t.first;
	w.to = t.last;
	/* one day: its records only. The journal's bad spot, if any, is this
	 * day's when the day runs up to it (the last good record). */
	if (day && (rc = days_range(&t, day, &w.from, &w.to)) != 0) {
		tapedir_close(&t);
		return rc;
	}
	if (day && t.rep.bad_reason && w.to < t.last)
		t.rep.bad_reason = NULL;
	if ((rc = verify_walk(&t, &w)) != 0) {
		tapedir_close(&t);
		return rc;
	}
	rc = verify_verdict(&t, &w, allow_trimmed, day);
	tapedir_close(&t);
	return rc;
}
