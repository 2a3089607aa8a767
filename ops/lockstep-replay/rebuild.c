/* lockstep-replay rebuild: the matcher's engine run offline over the tape,
 * its state hash, and optionally its snapshot. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "convert.h"
#include "engine.h"
#include "exec.h"
#include "feedgen.h"
#include "matcher.h"
#include "replay.h"
#include "risk_admin.h"
#include "snapshot.h"

#define MAX_OVERRIDES 64

/* Loads the [matcher] (and [node]) keys with the matcher's own table, so that
 * defaults and limits are the live matcher's. Keys that the daemon requires
 * but an offline run does not use (addresses, the node's name) default to
 * "" here. Returns 0 or 2 (message printed). */
int rebuild_load_config(struct matcher_config *mc, const char *path,
			const char *const *overrides, size_t n_overrides, char *symbol_store,
			const char **symbols, struct engine_config *ec)
{
	const struct config_key *src = matcher_config_spec.keys;
	struct config_spec spec = matcher_config_spec;
	struct config_key *keys;
	char err[512];
	size_t n = 0;
	int r;

	while (src[n].name)
		n++;
	keys = calloc(n + 1, sizeof(*keys));
	if (!keys)
		return 2;
	memcpy(keys, src, (n + 1) * sizeof(*keys));
	for (size_t i = 0; i < n; i++)
		if (!keys[i].def)
			keys[i].def = "";
	spec.keys = keys;
	r = config_load(&spec, mc, path, overrides, n_overrides, err, sizeof(err));
	free(keys);
	if (r < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	if (convert_engine_config(mc, symbol_store, symbols, ec) < 0) {
		fprintf(stderr, PROG ": [matcher] symbols: want 1..%d symbols of up to 8 characters\n",
			CONVERT_MAX_SYMBOLS);
		return 2;
	}
	return 0;
}

/* The engine's output, counted as the matcher's matcher_exec_emit counts exec
 * blocks (the same encoding, matcher/exec.h): a snapshot's exec_next is 1 +
 * this count. */
static void rebuild_emit(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct rebuild_result *x = ctx;
	uint8_t block[MATCHER_EXEC_SLOT - 2];

	if (matcher_exec_encode(block, x->seq, user, msg) >= 0)
		x->exec_blocks++;
}

/* Writes the rebuilt state as the matcher's snapshot of tape seq x->seq:
 * into OUT/snap-<seq>.lss when OUT is a directory (a matcher's
 * <state_dir>/snapshots), else to the file OUT. Returns 0 or 2. */
static int rebuild_snapshot(const char *out, const struct rebuild_result *x,
			    const struct matcher_config *mc, const struct engine *eng)
{
	struct matcher_snap_feed pos = { 0 };
	struct matcher_snap_hdr h = { .partition = (uint32_t)mc->partition, .seq = x->seq,
				      .exec_next = 1 + x->exec_blocks, .term = x->highest_term,
				      .commit = x->highest_commit };
	char dir[4096], path[4096];
	struct stat st;
	const char *slash;
	int is_dir = stat(out, &st) == 0 && S_ISDIR(st.st_mode), r;

	/* the feed's position as a replica with this config keeps it: none
	 * without a feed (all zero) */
	if (mc->feed_a_group[0] || mc->feed_b_group[0])
		pos = (struct matcher_snap_feed){
			.day = x->fg->st.day, .next = x->fg->st.next,
			.flags = MATCHER_SNAP_FEED_KNOWN |
				 (x->fg->st.started ? MATCHER_SNAP_FEED_STARTED : 0) |
				 (x->fg->st.ended ? MATCHER_SNAP_FEED_ENDED : 0),
		};
	if (is_dir)
		snprintf(dir, sizeof(dir), "%s", out);
	else if ((slash = strrchr(out, '/')) != NULL)
		snprintf(dir, sizeof(dir), "%.*s", slash > out ? (int)(slash - out) : 1, out);
	else
		snprintf(dir, sizeof(dir), ".");
	if ((r = matcher_snapshot_write(dir, &h, eng, &pos)) < 0) {
		fprintf(stderr, PROG ": --snapshot %s: %s\n", out, strerror(-r));
		return 2;
	}
	matcher_snapshot_path(path, sizeof(path), dir, x->seq);
	if (!is_dir && strcmp(path, out) != 0) {
		if (rename(path, out) < 0) {
			fprintf(stderr, PROG ": --snapshot: rename %s to %s: %s\n", path, out,
				strerror(errno));
			unlink(path);
			return 2;
		}
		snprintf(path, sizeof(path), "%s", out);
	}
	fprintf(stderr, PROG ": snapshot of tape seq %llu (exec seq %llu, hash %016llx) written to %s\n",
		(unsigned long long)h.seq, (unsigned long long)h.exec_next,
		(unsigned long long)h.hash, path);
	return 0;
}

static void print_rebuild(const struct rebuild_result *x, const struct engine_stats *es, int json)
{
	double total = x->open_s + x->apply_s;
	double rate = total > 0 ? (double)x->events / total : 0;
	double apply_rate = x->apply_s > 0 ? (double)x->events / x->apply_s : 0;

	if (json) {
		printf("{\"seq\":%llu,\"hash\":\"%016llx\",\"events\":%llu,\"applied\":%llu,"
		       "\"other_partition\":%llu,\"skipped\":%llu,\"highest_commit\":%llu,"
		       "\"orders_open\":%llu,\"accepted\":%llu,\"rejects\":%llu,\"canceled\":%llu,"
		       "\"matches\":%llu,\"shares_matched\":%llu,\"open_seconds\":%.6f,"
		       "\"apply_seconds\":%.6f,\"events_per_second\":%.0f,"
		       "\"apply_events_per_second\":%.0f,\"exec_next\":%llu}\n",
		       (unsigned long long)x->seq, (unsigned long long)x->hash,
		       (unsigned long long)x->events, (unsigned long long)x->applied,
		       (unsigned long long)x->other_partition, (unsigned long long)x->skipped,
		       (unsigned long long)x->highest_commit, (unsigned long long)es->orders_open,
		       (unsigned long long)es->accepted, (unsigned long long)es->rejects,
		       (unsigned long long)es->canceled, (unsigned long long)es->matches,
		       (unsigned long long)es->shares_matched, x->open_s, x->apply_s, rate,
		       apply_rate, (unsigned long long)(1 + x->exec_blocks));
		return;
	}
	printf("seq %llu hash %016llx\n", (unsigned long long)x->seq, (unsigned long long)x->hash);
	printf("events %llu: applied %llu, other partition %llu, skipped %llu; highest commit "
	       "%llu\n",
	       (unsigned long long)x->events, (unsigned long long)x->applied,
	       (unsigned long long)x->other_partition, (unsigned long long)x->skipped,
	       (unsigned long long)x->highest_commit);
	printf("book: %llu orders open; %llu accepted, %llu rejected, %llu canceled, %llu "
	       "matches, %llu shares matched\n",
	       (unsigned long long)es->orders_open, (unsigned long long)es->accepted,
	       (unsigned long long)es->rejects, (unsigned long long)es->canceled,
	       (unsigned long long)es->matches, (unsigned long long)es->shares_matched);
	printf("exec: %llu blocks (the next exec seq: %llu), highest term %llu\n",
	       (unsigned long long)x->exec_blocks, (unsigned long long)(1 + x->exec_blocks),
	       (unsigned long long)x->highest_term);
	printf("time: %.3f s opening the journal (CRC scan), %.3f s applying: %.0f events/s "
	       "overall, %.0f events/s applying\n",
	       x->open_s, x->apply_s, rate, apply_rate);
}

/* The feed's messages of a rebuild that does not want them. */
static void feed_discard(void *ctx, uint32_t day, uint64_t seq, const uint8_t *msg, size_t len)
{
	(void)ctx;
	(void)day;
	(void)seq;
	(void)msg;
	(void)len;
}

int rebuild_engine(const struct matcher_config *mc, struct engine_config *ec,
		   struct engine **eng, struct feedgen *fg, feedgen_out_fn out, void *ctx)
{
	struct feedgen_config gc = {
		.symbols = ec->symbols, .n_symbols = ec->n_symbols,
		.locate_base = (uint32_t)mc->feed_locate_base, .tracking = (uint16_t)mc->partition,
	};
	struct engine_admin_cmd *risk;
	char err[256];
	int r;

	if ((r = risk_file_load(mc->risk_file, &risk, &ec->n_risk, err, sizeof(err))) < 0) {
		fprintf(stderr, PROG ": [matcher] risk_file: %s\n", err);
		return 2;
	}
	ec->risk = risk;
	r = engine_create(eng, ec);
	free(risk);
	ec->risk = NULL;
	if (r < 0) {
		fprintf(stderr, PROG ": engine: %s\n", strerror(-r));
		return 2;
	}
	if (feedgen_init(fg, &gc, out ? out : feed_discard, ctx) < 0) {
		fprintf(stderr, PROG ": [feed] locate_base %llu: out of range for %zu symbols\n",
			(unsigned long long)mc->feed_locate_base, ec->n_symbols);
		engine_destroy(*eng);
		*eng = NULL;
		return 2;
	}
	engine_set_md(*eng, feedgen_md, fg);
	return 0;
}

/* One committed event, as matcher.c's apply_event takes it. */
static void rebuild_apply(struct engine *eng, const struct matcher_config *mc,
			  struct rebuild_result *x, uint64_t seq, const uint8_t *data, size_t len)
{
	struct tape_event_view v;
	struct engine_cmd cmd;

	x->events++;
	x->seq = seq; /* for rebuild_emit */
	if (tape_event_peek(data, len, &v) < 0 || v.seq != seq) {
		x->skipped++;
		return;
	}
	if (v.term > x->highest_term)
		x->highest_term = v.term;
	if (v.commit > x->highest_commit)
		x->highest_commit = v.commit;
	feedgen_begin(x->fg, v.timestamp);
	switch (convert_event(&v, mc->partition, &cmd)) {
	case CONVERT_SKIP:
		x->skipped++;
		break;
	case CONVERT_OTHER_PARTITION:
		x->other_partition++;
		engine_advance_time(eng, v.timestamp, rebuild_emit, x);
		break;
	case CONVERT_TIME:
		engine_advance_time(eng, v.timestamp, rebuild_emit, x);
		break;
	case CONVERT_APPLY:
		engine_apply(eng, seq, v.timestamp, &cmd, rebuild_emit, x);
		x->applied++;
		break;
	}
}

/* Applies the events from..to in order, printing the hash every `every`
 * seqs (0: never). Returns 0, a negative errno (journal), or 2 when out of
 * memory. */
int rebuild_walk(const struct tapedir *t, struct engine *eng, const struct matcher_config *mc,
		 uint64_t from, uint64_t to, uint64_t every, struct rebuild_result *x)
{
	struct journal_iter *it = NULL;
	struct progress pr;
	uint64_t seq = 0, term, t0;
	const uint8_t *data;
	size_t len;
	int r;

	t0 = mono_ns();
	progress_start(&pr, "rebuild", from, to);
	r = journal_iter_open(&it, t->j, from);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		r = 0;
		rebuild_apply(eng, mc, x, seq, data, len);
		if (every && seq % every == 0) {
			progress_end(&pr);
			printf("seq %llu hash %016llx\n", (unsigned long long)seq,
			       (unsigned long long)engine_hash(eng));
		}
		progress_tick(&pr, seq);
		if (seq >= to)
			break;
	}
	progress_end(&pr);
	x->apply_s = (double)(mono_ns() - t0) / 1e9;
	journal_iter_close(it);
	x->seq = seq;
	return r;
}

/* Checks --to against the journal and clamps the range; warns when the
 * journal does not start where a matcher does. Returns 0, or 1 with a
 * message. */
int rebuild_range(const struct tapedir *t, uint64_t *from, uint64_t *to)
{
	if (*to && (*to > t->last || *to < t->first)) {
		fprintf(stderr, PROG ": --to %llu: the journal's good records are seq %llu..%llu\n",
			(unsigned long long)*to, (unsigned long long)t->first,
			(unsigned long long)t->last);
		return 1;
	}
	if (tapedir_range(t, from, to))
		return 1;
	if (t->first != 1)
		fprintf(stderr, PROG ": warning: the journal starts at seq %llu; a matcher starts at 1\n",
			(unsigned long long)t->first);
	return 0;
}

/* Prints the result, checks the book and writes the snapshot; the exit
 * status. */
static int rebuild_finish(struct rebuild_result *x, const struct engine *eng,
			  const struct matcher_config *mc, const char *snapshot, int json)
{
	struct engine_stats es;

	x->hash = engine_hash(eng);
	engine_get_stats(eng, &es);
	print_rebuild(x, &es, json);
	if (engine_verify(eng) < 0) {
		fprintf(stderr, PROG ": the rebuilt book fails its consistency check (engine_verify)\n");
		return 1;
	}
	if (!snapshot)
		return 0;
	if (x->seq > x->highest_commit)
		fprintf(stderr,
			PROG ": warning: seq %llu is past the highest commit the tape "
			"carries (%llu): a matcher would not have applied it yet\n",
			(unsigned long long)x->seq, (unsigned long long)x->highest_commit);
	return rebuild_snapshot(snapshot, x, mc, eng);
}

int cmd_rebuild(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "to", required_argument, NULL, 't' }, { "config", required_argument, NULL, 'c' },
		{ "set", required_argument, NULL, 's' }, { "every", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' }, { "snapshot", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' }, { "day", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	static struct matcher_config mc;
	const char *overrides[MAX_OVERRIDES], *config = NULL, *snapshot = NULL;
	const char *symbols[CONVERT_MAX_SYMBOLS];
	char symbol_store[sizeof(mc.symbols)];
	struct rebuild_result x = { 0 };
	struct engine *eng = NULL;
	struct engine_config ec;
	struct feedgen fg;
	struct tapedir t;
	size_t n_overrides = 0;
	uint64_t from = 0, to = 0, every = 0, t0;
	uint32_t day = 0;
	int json = 0, c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't': if (opt_to(optarg, &to)) return 2; break;
		case 'd': if (opt_day(optarg, &day)) return 2; break;
		case 'c': config = optarg; break;
		case 's':
			if (n_overrides == MAX_OVERRIDES)
				return fail_usage("--set: at most %d", MAX_OVERRIDES);
			overrides[n_overrides++] = optarg;
			break;
		case 'e':
			if (parse_u64(optarg, &every) < 0 || !every)
				return fail_usage("--every: a number of events");
			break;
		case 'j': json = 1; break;
		case 'S': snapshot = optarg; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("rebuild: one journal directory or archive");
	if ((rc = rebuild_load_config(&mc, config, overrides, n_overrides, symbol_store, symbols,
				      &ec)) != 0)
		return rc;
	t0 = mono_ns();
	if ((rc = tapedir_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	x.open_s = (double)(mono_ns() - t0) / 1e9;
	/* --day N: the state at the end of day N (its last index) */
	if (day && (rc = days_range(&t, day, &from, &to)) != 0)
		goto out_close;
	from = 0;
	if ((rc = rebuild_range(&t, &from, &to)) != 0)
		goto out_close;
	rc = 2;
	if (rebuild_engine(&mc, &ec, &eng, &fg, NULL, NULL) != 0)
		goto out_close;
	x.fg = &fg;
	r = rebuild_walk(&t, eng, &mc, from, to, json ? 0 : every, &x);
	if (r < 0)
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
	else if (r == 0)
		rc = rebuild_finish(&x, eng, &mc, snapshot, json);
	engine_destroy(eng);
out_close:
	tapedir_close(&t);
	return rc;
}
