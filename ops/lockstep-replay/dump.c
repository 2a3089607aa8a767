/* lockstep-replay dump: one line (or JSON object) per event, with its place
 * on the wire (trading day, session, per-day sequence number), filtered by
 * seq range, day, symbol or login; with --follow, on as the journal's
 * writer (a sequencer, a recorder) appends: a live drop copy. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "replay.h"

/* The orders of one symbol, by (login, token): a set of 64-bit hashes (open
 * addressing, 0 marks a free slot), grown as orders come. */
struct tokset {
	uint64_t *v;
	size_t cap, n;
};

static uint64_t tok_key(const char *user, const char *token)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%s%c%s", user, 0, token);
	uint64_t h = XXH3_64bits(buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf));

	return h ? h : 1;
}

static int tokset_has(const struct tokset *s, uint64_t k)
{
	if (!s->cap)
		return 0;
	for (size_t i = k & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == k)
			return 1;
		if (!s->v[i])
			return 0;
	}
}

static int tokset_add(struct tokset *s, uint64_t k)
{
	if ((s->n + 1) * 2 > s->cap) {
		struct tokset bigger = { .cap = s->cap ? s->cap * 2 : 1024 };

		bigger.v = calloc(bigger.cap, sizeof(uint64_t));
		if (!bigger.v)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				tokset_add(&bigger, s->v[i]);
		free(s->v);
		*s = bigger;
	}
	for (size_t i = k & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == k)
			return 0;
		if (!s->v[i]) {
			s->v[i] = k;
			s->n++;
			return 0;
		}
	}
}

struct dump_filter {
	const char *symbol, *user;
	struct tokset orders; /* of `symbol` */
};

/* Whether a filtered dump shows e; tracks the symbol's orders as it goes. */
static int dump_match(struct dump_filter *d, const struct event *e)
{
	const Lockstep__Command *c = e->cmd;

	if (!d->symbol && !d->user)
		return 1;
	if (!c || (d->user && strcmp(c->user, d->user) != 0))
		return 0;
	if (!d->symbol)
		return 1;
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER:
		if (strcmp(c->new_order->symbol, d->symbol) != 0)
			return 0;
		tokset_add(&d->orders, tok_key(c->user, c->new_order->token));
		return 1;
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		return tokset_has(&d->orders, tok_key(c->user, c->cancel->token));
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		return tokset_has(&d->orders, tok_key(c->user, c->modify->token));
	case LOCKSTEP__COMMAND__BODY_REPLACE:
		if (!tokset_has(&d->orders, tok_key(c->user, c->replace->existing_token)))
			return 0;
		tokset_add(&d->orders, tok_key(c->user, c->replace->replacement_token));
		return 1;
	default:
		return 0;
	}
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' }, { "to", required_argument, NULL, 't' },
		{ "symbol", required_argument, NULL, 's' }, { "session", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ "day", required_argument, NULL, 'd' },
		{ "tape-session", required_argument, NULL, 'n' },
		{ "follow", no_argument, NULL, 'F' }, { NULL, 0, NULL, 0 },
	};
	const char *session = "TAPE";
	struct dump_filter d = { 0 };
	struct wirepos w;
	uint32_t day = 0;
	struct journal_iter *it = NULL;
	struct arena arena;
	struct progress pr;
	struct event e;
	struct tapedir t;
	uint64_t from = 0, to = 0, seq = 0, term, start, shown = 0;
	const uint8_t *data;
	size_t len;
	int json = 0, follow = 0, done = 0, c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': if (opt_from(optarg, &from)) return 2; break;
		case 't': if (opt_to(optarg, &to)) return 2; break;
		case 's': d.symbol = optarg; break;
		case 'u': d.user = optarg; break;
		case 'j': json = 1; break;
		case 'd': if (opt_day(optarg, &day)) return 2; break;
		case 'n': session = optarg; break;
		case 'F': follow = 1; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("dump: one journal directory or archive");
	if (wirepos_init(&w, session) < 0)
		return fail_usage("--tape-session %s: up to 10 printable characters", session);
	if (follow && day)
		return fail_usage("dump: --follow reads on past the end: no --day");
	if ((rc = tapedir_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	if (follow && t.tmp[0]) {
		tapedir_close(&t);
		return fail_usage("dump: --follow follows a journal directory, not an archive");
	}
	if (follow && !to)
		to = UINT64_MAX; /* until killed (or the reader of a pipe leaves) */
	if ((day && (rc = days_range(&t, day, &from, &to)) != 0) ||
	    (!follow && (rc = tapedir_range(&t, &from, &to)) != 0)) {
		tapedir_close(&t);
		return rc;
	}
	if (follow && from < t.first)
		from = t.first; /* tapedir_range's, which wants records already */
	if (follow && from > to) {
		tapedir_close(&t);
		return fail_usage("dump: --from %llu is past --to %llu", (unsigned long long)from,
				  (unsigned long long)to);
	}
	/* A symbol's cancels and replaces name orders by token only: follow its
	 * orders from the start, show from `from`. */
	start = d.symbol ? t.first : from;
	/* following, a --from past the end: the events before it are read
	 * (not shown) as they come, so that their days are known */
	if (follow && start > t.last + 1)
		start = t.last + 1;
	if ((r = wirepos_prime(&w, &t, start)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
		tapedir_close(&t);
		return 2;
	}
	if (arena_init(&arena, ARENA_BYTES) < 0) {
		tapedir_close(&t);
		return 2;
	}
	progress_start(&pr, "dump", start, to);
	pr.on = pr.on && !follow;
	r = journal_iter_open(&it, t.j, start);
	while (r == 0 && !done) {
		while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
			r = 0;
			wirepos_note(&w, seq, data, len);
			event_decode(&e, seq, term, data, len, &arena);
			event_wire(&e, &w);
			if (dump_match(&d, &e) && seq >= from) {
				if (json)
					event_print_json(stdout, &e);
				else
					event_print_text(stdout, &e);
				shown++;
			}
			progress_tick(&pr, seq);
			if (seq >= to)
				break;
		}
		done = r < 0 || !follow || seq >= to;
		if (!done) { /* the end for now: hand it on, then look again */
			if (fflush(stdout) != 0)
				break;
			nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
			r = journal_refresh(t.j);
			r = r < 0 ? r : 0;
		}
	}
	progress_end(&pr);
	if (r < 0)
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
	journal_iter_close(it);
	arena_fini(&arena);
	free(d.orders.v);
	tapedir_close(&t);
	if (fflush(stdout) != 0) {
		fprintf(stderr, PROG ": writing: %s\n", strerror(errno));
		return 2;
	}
	return r < 0 ? 2 : 0;
}

