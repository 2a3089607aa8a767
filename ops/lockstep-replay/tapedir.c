/* lockstep-replay: a journal directory opened read-only, and the range of
 * its good records a subcommand reads. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "replay.h"

/* Opens `dir` read-only (with the per-record index when `index`). A bad
 * record is a warning here (only verify fails on it): the records before it
 * are used. Returns 0 or 2 (message printed). */
int tapedir_open(struct tapedir *t, const char *dir, int warn_bad, int index)
{
	/* Without the per-record index memory stays flat however long the
	 * journal; only send, which serves retransmissions by seq, wants it. */
	struct journal_options o = { .read_only = 1, .no_index = !index };
	int r;

	memset(t, 0, sizeof(*t));
	t->dir = dir;
	r = journal_open(&t->j, dir, &o, &t->rep);
	if (r < 0) {
		if (r == -EBADMSG)
			fprintf(stderr, PROG ": %s: segment %s: %s (not a journal, or damaged)\n", dir,
				t->rep.bad_segment, t->rep.bad_reason ? t->rep.bad_reason : "bad header");
		else
			fprintf(stderr, PROG ": %s: %s\n", dir, strerror(-r));
		return 2;
	}
	t->first = journal_first_seq(t->j);
	t->last = journal_last_seq(t->j);
	if (warn_bad && t->rep.bad_reason)
		fprintf(stderr,
			PROG ": warning: %s is bad from seq %llu (segment %s, offset %llu: %s); "
			"only seq %llu..%llu is used (see lockstep-replay verify)\n",
			dir, (unsigned long long)t->rep.bad_seq, t->rep.bad_segment,
			(unsigned long long)t->rep.bad_offset, t->rep.bad_reason,
			(unsigned long long)t->first, (unsigned long long)t->last);
	return 0;
}

void tapedir_close(struct tapedir *t)
{
	journal_close(t->j);
	t->j = NULL;
}

/* Clamps [from, to] (to 0: the end) to the good records; 0 when that leaves
 * something, else 1 with a message. */
int tapedir_range(const struct tapedir *t, uint64_t *from, uint64_t *to)
{
	if (!t->last) {
		fprintf(stderr, PROG ": %s: no records\n", t->dir);
		return 1;
	}
	if (*from < t->first)
		*from = t->first;
	if (!*to || *to > t->last)
		*to = t->last;
	if (*from > *to) {
		fprintf(stderr, PROG ": %s: nothing in that range (the journal holds seq %llu..%llu)\n",
			t->dir, (unsigned long long)t->first, (unsigned long long)t->last);
		return 1;
	}
	return 0;
}
