/* What lockstep-feed prints: the counters (--stats), top of book (--top),
 * depth (--depth), the check's result, as text or as one JSON object
 * (--json); and the canonical book dump (--book-out). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "feed.h"

#define U(x) ((unsigned long long)(x))

static void price_str(uint32_t p, char out[16])
{
	snprintf(out, 16, "%u.%04u", p / 10000, p % 10000);
}

/* ---- top and depth ------------------------------------------------------- */

static void json_level(FILE *out, int has, const struct book_level *l)
{
	char p[16];

	if (!has) {
		fputs("null", out);
		return;
	}
	price_str(l->price, p);
	fprintf(out, "{\"price\": %s, \"shares\": %llu, \"orders\": %u}", p, U(l->shares),
		l->orders);
}

static void top_json(const struct feed *f, FILE *out, const char *sym)
{
	struct book_top t;
	struct book_symbol y;

	if (book_top(f->book, sym, &t) < 0 || book_symbol(f->book, sym, &y) < 0) {
		fprintf(out, "{\"symbol\": \"%s\", \"known\": false}", sym);
		return;
	}
	fprintf(out, "{\"symbol\": \"%s\", \"known\": true, \"state\": \"%c\", \"bid\": ", sym,
		y.state ? y.state : '-');
	json_level(out, t.has_bid, &t.bid);
	fputs(", \"ask\": ", out);
	json_level(out, t.has_ask, &t.ask);
	fprintf(out, ", \"orders\": %u, \"volume\": %llu, \"trades\": %llu}", y.orders,
		U(y.volume), U(y.trades));
}

static void top_text(const struct feed *f, FILE *out, const char *sym)
{
	struct book_top t;
	struct book_symbol y;
	char bp[16], ap[16];

	if (book_top(f->book, sym, &t) < 0 || book_symbol(f->book, sym, &y) < 0) {
		fprintf(out, "top %s: not in the stock directory\n", sym);
		return;
	}
	price_str(t.bid.price, bp);
	price_str(t.ask.price, ap);
	fprintf(out, "top %-8s bid ", sym);
	if (t.has_bid)
		fprintf(out, "%llu @ %s (%u)", U(t.bid.shares), bp, t.bid.orders);
	else
		fputs("-", out);
	fputs("  ask ", out);
	if (t.has_ask)
		fprintf(out, "%llu @ %s (%u)", U(t.ask.shares), ap, t.ask.orders);
	else
		fputs("-", out);
	fprintf(out, "  state %c volume %llu trades %llu\n", y.state ? y.state : '-', U(y.volume),
		U(y.trades));
}

static int depth_get(const struct feed *f, const char *sym, struct book_level *bid, int *nb,
		     struct book_level *ask, int *na)
{
	unsigned n = f->o.levels;

	*nb = book_depth(f->book, sym, 'B', bid, n);
	*na = book_depth(f->book, sym, 'S', ask, n);
	return *nb < 0 || *na < 0 ? -ENOENT : 0;
}

#define DEPTH_MAX 1000

static void depth_json(const struct feed *f, FILE *out, const char *sym)
{
	static struct book_level bid[DEPTH_MAX], ask[DEPTH_MAX];
	int nb, na;

	if (depth_get(f, sym, bid, &nb, ask, &na) < 0) {
		fprintf(out, "{\"symbol\": \"%s\", \"known\": false}", sym);
		return;
	}
	fprintf(out, "{\"symbol\": \"%s\", \"known\": true, \"bids\": [", sym);
	for (int i = 0; i < nb; i++) {
		fputs(i ? ", " : "", out);
		json_level(out, 1, &bid[i]);
	}
	fputs("], \"asks\": [", out);
	for (int i = 0; i < na; i++) {
		fputs(i ? ", " : "", out);
		json_level(out, 1, &ask[i]);
	}
	fputs("]}", out);
}

static void depth_text(const struct feed *f, FILE *out, const char *sym)
{
	static struct book_level bid[DEPTH_MAX], ask[DEPTH_MAX];
	int nb, na;

	if (depth_get(f, sym, bid, &nb, ask, &na) < 0) {
		fprintf(out, "depth %s: not in the stock directory\n", sym);
		return;
	}
	fprintf(out, "depth %-8s %6s %10s %12s | %-12s %10s %6s\n", sym, "orders", "shares", "bid",
		"ask", "shares", "orders");
	for (int i = 0; i < nb || i < na; i++) {
		char p[16];

		fprintf(out, "%14s", "");
		if (i < nb) {
			price_str(bid[i].price, p);
			fprintf(out, " %6u %10llu %12s", bid[i].orders, U(bid[i].shares), p);
		} else {
			fprintf(out, " %6s %10s %12s", "", "", "");
		}
		fputs(" | ", out);
		if (i < na) {
			price_str(ask[i].price, p);
			fprintf(out, "%-12s %10llu %6u", p, U(ask[i].shares), ask[i].orders);
		}
		fputs("\n", out);
	}
}

static void watch_json(const struct feed *f, FILE *out)
{
	if (f->o.n_top) {
		fputs(",\n \"top\": [", out);
		for (unsigned i = 0; i < f->o.n_top; i++) {
			fputs(i ? ", " : "", out);
			top_json(f, out, f->o.top[i]);
		}
		fputs("]", out);
	}
	if (f->o.n_depth) {
		fputs(",\n \"depth\": [", out);
		for (unsigned i = 0; i < f->o.n_depth; i++) {
			fputs(i ? ", " : "", out);
			depth_json(f, out, f->o.depth[i]);
		}
		fputs("]", out);
	}
}

static void watch_text(const struct feed *f, FILE *out)
{
	for (unsigned i = 0; i < f->o.n_top; i++)
		top_text(f, out, f->o.top[i]);
	for (unsigned i = 0; i < f->o.n_depth; i++)
		depth_text(f, out, f->o.depth[i]);
}

static double seconds(const struct feed *f)
{
	return (double)(mono_ns() - f->started_ns) / 1e9;
}

void report_interval(struct feed *f, FILE *out)
{
	if (f->o.json) {
		fprintf(out, "{\"seconds\": %.3f, \"next_seq\": %llu", seconds(f),
			U(feed_stream_next(f)));
		watch_json(f, out);
		fputs("}\n", out);
	} else {
		fprintf(out, "-- %.1f s, next %llu\n", seconds(f), U(feed_stream_next(f)));
		watch_text(f, out);
	}
	fflush(out);
}

/* ---- the counters -------------------------------------------------------- */

static void side_json(FILE *out, const struct feed_side_stats *s)
{
	fprintf(out,
		"{\"packets\": %llu, \"messages\": %llu, \"first\": %llu, \"duplicates\": %llu, "
		"\"overflow\": %llu, \"before_start\": %llu, \"gaps\": %llu, \"missed\": %llu, "
		"\"heartbeats\": %llu, \"end_of_session\": %llu, \"malformed\": %llu, "
		"\"wrong_session\": %llu, \"old_day\": %llu, \"later_day\": %llu, "
		"\"unbelievable\": %llu, \"too_old\": %llu}",
		U(s->packets), U(s->messages), U(s->first), U(s->duplicates), U(s->overflow),
		U(s->before_start), U(s->gaps), U(s->missed), U(s->heartbeats),
		U(s->end_of_session), U(s->malformed), U(s->wrong_session), U(s->old_day),
		U(s->later_day), U(s->unbelievable), U(s->too_old));
}

static void stats_json(const struct feed *f, FILE *out)
{
	struct rx_stats r;
	struct book_stats b;
	char sess[MOLD_SESSION_LEN + 1];

	feed_rx_stats(f, &r);
	book_get_stats(f->book, &b);
	mold_session_str(&f->sess, sess);
	fprintf(out,
		",\n \"session\": \"%s\", \"day\": %u, \"next_seq\": %llu, \"delivered\": %llu, "
		"\"applied\": %llu, \"unknown_type\": %llu, \"undecodable\": %llu, "
		"\"recorded\": %llu,\n \"requests\": %llu, \"requests_held_back\": %llu, "
		"\"gaps\": %llu, \"lost\": %llu, \"lost_ranges\": %llu, "
		"\"overflow\": %llu, \"day_switches\": %llu, \"day_end_assumed\": %llu, "
		"\"pending_dropped\": %llu,\n \"feeds\": {",
		f->day ? sess : "", f->day, U(feed_stream_next(f)), U(f->st.delivered),
		U(f->st.applied), U(f->st.unknown_type), U(f->st.undecodable), U(f->st.recorded),
		U(f->st.requests), U(f->st.requests_held_back), U(r.gaps),
		U(r.lost), U(f->st.lost_ranges), U(r.overflow), U(f->st.day_switches),
		U(f->st.day_end_assumed), U(f->st.pending_dropped));
	for (int s = 0; s < FEED_SIDES; s++) {
		fprintf(out, "%s\"%s\": ", s ? ", " : "", feed_side_name((enum feed_side)s));
		side_json(out, &f->side[s]);
	}
	fprintf(out,
		"},\n \"book\": {\"orders\": %u, \"levels\": %u, \"symbols\": %u, "
		"\"orders_high\": %u, \"messages\": %llu, \"adds\": %llu, \"executions\": %llu, "
		"\"cancels\": %llu, \"deletes\": %llu, \"replaces\": %llu, \"trades\": %llu, "
		"\"system_events\": %llu, \"executed_shares\": %llu, \"anomalies_total\": %llu, "
		"\"anomalies\": {",
		b.orders, b.levels, b.symbols, b.orders_high, U(b.messages), U(b.adds),
		U(b.executions), U(b.cancels), U(b.deletes), U(b.replaces), U(b.trades),
		U(b.system_events), U(b.executed_shares), U(b.anomalies_total));
	for (int a = 1; a < BOOK_A_MAX; a++)
		fprintf(out, "%s\"%s\": %llu", a > 1 ? ", " : "", book_anomaly_name(a),
			U(b.anomalies[a]));
	fputs("}}", out);
	if (f->o.glimpse)
		fprintf(out,
			",\n \"snapshot\": {\"session\": \"%s\", \"next_seq\": %llu, "
			"\"messages\": %llu}",
			f->gl.session, U(f->start_snapshot_seq), U(f->start_snapshot_msgs));
}

static void stats_text(const struct feed *f, FILE *out)
{
	struct rx_stats r;
	struct book_stats b;
	char sess[MOLD_SESSION_LEN + 1];
	int any = 0;

	feed_rx_stats(f, &r);
	book_get_stats(f->book, &b);
	mold_session_str(&f->sess, sess);
	fprintf(out, "day %u, session %s, next sequence number %llu, %.1f s\n", f->day,
		f->day ? sess : "-", U(feed_stream_next(f)), seconds(f));
	fprintf(out,
		"delivered %llu messages (applied %llu, unknown type %llu, undecodable %llu), "
		"recorded %llu\n",
		U(f->st.delivered), U(f->st.applied), U(f->st.unknown_type), U(f->st.undecodable),
		U(f->st.recorded));
	fprintf(out, "%-8s %9s %9s %9s %9s %8s %6s %7s %9s %9s\n", "", "packets", "messages",
		"first", "dupl", "overflow", "gaps", "missed", "malformed", "wrong_ses");
	for (int s = 0; s < FEED_SIDES; s++) {
		const struct feed_side_stats *x = &f->side[s];

		fprintf(out, "%-8s %9llu %9llu %9llu %9llu %8llu %6llu %7llu %9llu %9llu\n",
			feed_side_name((enum feed_side)s), U(x->packets), U(x->messages),
			U(x->first), U(x->duplicates), U(x->overflow), U(x->gaps), U(x->missed),
			U(x->malformed), U(x->wrong_session));
	}
	fprintf(out,
		"gaps both feeds missed %llu; requests sent %llu (held back %llu), too-old "
		"answers %llu; lost for good %llu (%llu ranges)\n",
		U(r.gaps), U(f->st.requests), U(f->st.requests_held_back),
		U(f->side[FEED_R].too_old), U(r.lost), U(f->st.lost_ranges));
	if (f->st.day_switches || f->st.day_end_assumed)
		fprintf(out, "day changes %llu (without an End of Session: %llu)\n",
			U(f->st.day_switches), U(f->st.day_end_assumed));
	fprintf(out, "book: %u orders (at most %u), %u levels, %u symbols; anomalies %llu", b.orders,
		b.orders_high, b.levels, b.symbols, U(b.anomalies_total));
	for (int a = 1; a < BOOK_A_MAX; a++)
		if (b.anomalies[a])
			fprintf(out, "%s%s %llu", any++ ? ", " : " (", book_anomaly_name(a),
				U(b.anomalies[a]));
	fputs(any ? ")\n" : "\n", out);
}

static const char *check_result(const struct feed *f)
{
	if (f->check_phase != 3)
		return "not made";
	return f->check_failed == 0 ? "equal" : f->check_failed == 1 ? "differ" : "failed";
}

void report_final(struct feed *f, FILE *out)
{
	if (f->o.json) {
		fprintf(out, "{\"seconds\": %.3f", seconds(f));
		if (f->o.stats)
			stats_json(f, out);
		watch_json(f, out);
		if (f->o.check) {
			fprintf(out, ",\n \"check\": {\"result\": \"%s\", \"seq\": %llu, \"detail\": \"",
				check_result(f), U(f->pause_at));
			for (const char *p = f->check_msg; *p; p++)
				fprintf(out, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
			fputs("\"}", out);
		}
		fputs("}\n", out);
	} else {
		if (f->o.stats)
			stats_text(f, out);
		watch_text(f, out);
		if (f->o.check)
			fprintf(out, "check: %s%s%s\n", check_result(f), f->check_msg[0] ? ": " : "",
				f->check_msg);
	}
	fflush(out);
}

int report_book_out(const struct feed *f, const char *path)
{
	FILE *out = fopen(path, "w");
	struct book_cursor c;
	char line[BOOK_LINE_MAX];
	size_t n;
	int err = 0;

	if (!out)
		return -errno;
	book_cursor_init(&c);
	while ((n = book_cursor_next(f->book, &c, line)) > 0) {
		line[n] = '\n';
		if (fwrite(line, 1, n + 1, out) != n + 1) {
			err = -EIO;
			break;
		}
	}
	if (fclose(out) != 0 && !err)
		err = -errno;
	return err;
}
