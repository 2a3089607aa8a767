/* lockstep-replay itch: a partition's public ITCH feed regenerated from the
 * tape (matcher/feedgen.h), message for message and number for number what
 * its replicas published, in NASDAQ's ITCH file format (each message after
 * its u16 big-endian length), one day or every day. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "feedgen.h"
#include "matcher.h"
#include "replay.h"

#define MAX_OVERRIDES 64

struct itch_out {
	FILE *f;
	uint32_t day; /* 0: every day */
	uint64_t written, first, last;
	uint32_t days_seen;
	uint32_t last_day;
	int err;
};

static void itch_write(void *ctx, uint32_t day, uint64_t seq, const uint8_t *msg, size_t len)
{
	struct itch_out *o = ctx;
	uint8_t pfx[2] = { (uint8_t)(len >> 8), (uint8_t)len };

	if (o->day && day != o->day)
		return;
	if (day != o->last_day) {
		o->days_seen++;
		o->last_day = day;
		o->first = seq;
	}
	if (o->f && (fwrite(pfx, 1, 2, o->f) != 2 || fwrite(msg, 1, len, o->f) != len))
		o->err = errno ? errno : EIO;
	o->written++;
	o->last = seq;
}

static int itch_options(int argc, char **argv, const char **config, const char **out,
			const char **overrides, size_t *n_overrides, uint32_t *day, int *json)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "set", required_argument, NULL, 's' },
		{ "day", required_argument, NULL, 'd' }, { "out", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': *config = optarg; break;
		case 'o': *out = optarg; break;
		case 'd': if (opt_day(optarg, day)) return 2; break;
		case 'j': *json = 1; break;
		case 's':
			if (*n_overrides == MAX_OVERRIDES)
				return fail_usage("--set: at most %d", MAX_OVERRIDES);
			overrides[(*n_overrides)++] = optarg;
			break;
		case 'h': usage(stdout); exit(0);
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("itch: one journal directory or archive");
	return 0;
}

int cmd_itch(int argc, char **argv)
{
	static struct matcher_config mc;
	const char *overrides[MAX_OVERRIDES], *config = NULL, *out = NULL;
	const char *symbols[CONVERT_MAX_SYMBOLS];
	char symbol_store[sizeof(mc.symbols)];
	struct rebuild_result x = { 0 };
	struct itch_out o = { 0 };
	struct engine *eng = NULL;
	struct engine_config ec;
	struct feedgen fg;
	struct tapedir t;
	size_t n_overrides = 0;
	uint64_t from = 0, to = 0;
	int json = 0, r, rc;

	if ((rc = itch_options(argc, argv, &config, &out, overrides, &n_overrides, &o.day, &json)))
		return rc;
	if ((rc = rebuild_load_config(&mc, config, overrides, n_overrides, symbol_store, symbols,
				      &ec)) != 0)
		return rc;
	if (out && !(o.f = fopen(out, "wb"))) {
		fprintf(stderr, PROG ": --out %s: %s\n", out, strerror(errno));
		return 2;
	}
	if ((rc = tapedir_open(&t, argv[optind], 1, 0)) != 0)
		goto out_file;
	/* the whole tape up to the day's end: order numbers run on across days */
	if (o.day && (rc = days_range(&t, o.day, &from, &to)) != 0)
		goto out_close;
	from = 0;
	if ((rc = rebuild_range(&t, &from, &to)) != 0)
		goto out_close;
	rc = 2;
	if (rebuild_engine(&mc, &ec, &eng, &fg, itch_write, &o) != 0)
		goto out_close;
	x.fg = &fg;
	if ((r = rebuild_walk(&t, eng, &mc, from, to, 0, &x)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
		goto out_engine;
	}
	if (o.f && (fflush(o.f) != 0 || o.err)) {
		fprintf(stderr, PROG ": --out %s: %s\n", out, strerror(o.err ? o.err : errno));
		goto out_engine;
	}
	if (json)
		printf("{\"partition\":%llu,\"tape_seq\":%llu,\"messages\":%llu,\"days\":%u,"
		       "\"first\":%llu,\"last\":%llu,\"day\":%u,\"next\":%llu}\n",
		       (unsigned long long)mc.partition, (unsigned long long)x.seq,
		       (unsigned long long)o.written, o.days_seen, (unsigned long long)o.first,
		       (unsigned long long)o.last, fg.st.day, (unsigned long long)fg.st.next);
	else
		printf("partition %llu: tape seq 1..%llu: %llu ITCH messages written%s%s (%u "
		       "day(s); of the last, sequence numbers %llu..%llu); the feed is now in day "
		       "%u, next %llu\n",
		       (unsigned long long)mc.partition, (unsigned long long)x.seq,
		       (unsigned long long)o.written, out ? " to " : "", out ? out : "",
		       o.days_seen, (unsigned long long)o.first, (unsigned long long)o.last,
		       fg.st.day, (unsigned long long)fg.st.next);
	rc = 0;
out_engine:
	engine_destroy(eng);
out_close:
	tapedir_close(&t);
out_file:
	if (o.f)
		fclose(o.f);
	return rc;
}
