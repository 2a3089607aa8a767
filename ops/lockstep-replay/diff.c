/* lockstep-replay diff: two tapes compared record by record, and where they
 * part. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "replay.h"

/* What differs between two events at one seq, as words. */
static void diff_fields(const uint8_t *a, size_t alen, uint64_t aterm, const uint8_t *b,
			size_t blen, uint64_t bterm, char *out, size_t cap)
{
	struct tape_event_view va, vb;
	size_t n = 0;

	out[0] = '\0';
#define NOTE(what) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? ", " : "", what)
	if (aterm != bterm)
		NOTE("term");
	if (tape_event_peek(a, alen, &va) < 0 || tape_event_peek(b, blen, &vb) < 0) {
		NOTE("event bytes");
		return;
	}
	if (va.timestamp != vb.timestamp)
		NOTE("timestamp");
	if (va.origin_len != vb.origin_len || memcmp(va.origin, vb.origin, va.origin_len) != 0 ||
	    va.origin_seq != vb.origin_seq)
		NOTE("origin");
	if (va.commit != vb.commit)
		NOTE("commit");
	if (va.body != vb.body || va.body_len != vb.body_len ||
	    (va.body_len && memcmp(va.body_data, vb.body_data, va.body_len) != 0))
		NOTE("command");
	if (!n)
		NOTE("encoding");
#undef NOTE
}

/* One record of a tape. */
struct diff_rec {
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
};

/* Tells where two records at one seq differ, and shows both. */
static void diff_print_part(const struct diff_rec *a, const struct diff_rec *b, uint64_t same,
			    struct arena *arena)
{
	const struct diff_rec *rec[2] = { a, b };
	char what[128];
	struct event e;

	diff_fields(a->data, a->len, a->term, b->data, b->len, b->term, what, sizeof(what));
	printf("the tapes part at seq %llu (%s differ; %llu records equal before it)\n",
	       (unsigned long long)a->seq, what, (unsigned long long)same);
	for (int i = 0; i < 2; i++) {
		event_decode(&e, rec[i]->seq, rec[i]->term, rec[i]->data, rec[i]->len, arena);
		fputs(i ? "B: " : "A: ", stdout);
		event_print_text(stdout, &e);
	}
}

/* Reads both tapes while their records are equal, counting them in *same.
 * Returns 1 when they part (told), else 0 with *ra and *rb what the two
 * iterators last returned (0: the end, or a negative errno). */
static int diff_walk(struct journal_iter *ia, struct journal_iter *ib, uint64_t from,
		     uint64_t last, struct arena *arena, uint64_t *same, int *ra, int *rb)
{
	struct diff_rec a = { 0 }, b = { 0 };
	struct progress pr;

	progress_start(&pr, "diff", from, last);
	for (;;) {
		*ra = journal_iter_next(ia, &a.seq, &a.term, &a.data, &a.len);
		*rb = journal_iter_next(ib, &b.seq, &b.term, &b.data, &b.len);
		if (*ra <= 0 || *rb <= 0)
			break;
		if (a.term != b.term || a.len != b.len || memcmp(a.data, b.data, a.len) != 0) {
			progress_end(&pr);
			diff_print_part(&a, &b, *same, arena);
			return 1;
		}
		(*same)++;
		progress_tick(&pr, a.seq);
	}
	progress_end(&pr);
	return 0;
}

/* Tells how two tapes equal from `from` on end (ra: A's last iterator
 * result, 1 when A goes on); the exit status. */
static int diff_ends(const struct tapedir *a, const struct tapedir *b, uint64_t from,
		     uint64_t same, int ra, int rb)
{
	const struct tapedir *longer = ra ? a : b;

	if (ra == 0 && rb == 0) {
		if (a->first == b->first) {
			printf("identical: seq %llu..%llu (%llu records)\n", (unsigned long long)from,
			       (unsigned long long)a->last, (unsigned long long)same);
			return 0;
		}
		printf("equal from seq %llu to %llu (%llu records); they start apart\n",
		       (unsigned long long)from, (unsigned long long)a->last, (unsigned long long)same);
		return 1;
	}
	printf("equal through seq %llu (%llu records), then %s (%s) goes on to seq %llu and "
	       "%s ends\n",
	       (unsigned long long)(from + same - 1), (unsigned long long)same, ra ? "A" : "B",
	       longer->dir, (unsigned long long)longer->last, ra ? "B" : "A");
	return 1;
}

int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct journal_iter *ia = NULL, *ib = NULL;
	struct tapedir a, b;
	struct arena arena;
	uint64_t from, same = 0;
	int c, ra = 0, rb = 0, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 2)
		return fail_usage("diff: two journal directories");
	if ((rc = tapedir_open(&a, argv[optind], 1, 0)) != 0)
		return rc;
	if ((rc = tapedir_open(&b, argv[optind + 1], 1, 0)) != 0) {
		tapedir_close(&a);
		return rc;
	}
	if (arena_init(&arena, ARENA_BYTES) < 0)
		return 2;
	rc = 1;
	if (!a.last || !b.last) {
		printf("%s holds no records\n", !a.last ? a.dir : b.dir);
		rc = a.last == b.last ? 0 : 1;
		goto out;
	}
	from = a.first > b.first ? a.first : b.first;
	if (a.first != b.first)
		printf("A starts at seq %llu, B at seq %llu: comparing from seq %llu\n",
		       (unsigned long long)a.first, (unsigned long long)b.first,
		       (unsigned long long)from);
	if ((ra = journal_iter_open(&ia, a.j, from)) < 0 || (rb = journal_iter_open(&ib, b.j, from)) < 0)
		goto out_err;
	if (diff_walk(ia, ib, from, a.last < b.last ? a.last : b.last, &arena, &same, &ra, &rb))
		goto out;
	if (ra < 0 || rb < 0)
		goto out_err;
	rc = diff_ends(&a, &b, from, same, ra, rb);
	goto out;
out_err:
	fprintf(stderr, PROG ": reading %s: %s\n", ra < 0 ? a.dir : b.dir, strerror(-(ra < 0 ? ra : rb)));
	rc = 2;
out:
	journal_iter_close(ia);
	journal_iter_close(ib);
	arena_fini(&arena);
	tapedir_close(&a);
	tapedir_close(&b);
	return rc;
}
