/* lockstep-bench: the load's report: the counts, throughput, latency
 * percentiles, CPU times and CPU per order (then losses.c's lines) as
 * text, the same as JSON (--json) with the percentile curves, the curves
 * plotted by gnuplot (--png), and the --check-matches summary. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <string.h>

#include "bench.h"

static void json_hist(FILE *f, const struct hist *h)
{
	fprintf(f,
		"{\"n\": %llu, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"p99.9\": %.1f, "
		"\"p99.99\": %.1f, \"max\": %.1f}",
		(unsigned long long)h->count, hist_percentile(h, 50) / 1e3,
		hist_percentile(h, 90) / 1e3, hist_percentile(h, 99) / 1e3,
		hist_percentile(h, 99.9) / 1e3, hist_percentile(h, 99.99) / 1e3, h->max / 1e3);
}

/* The percentile curve: points at 1 - 10^(-k/10), k = 0..50 (0% to
 * 99.999%), then the max; x is k / 10 (log10 of 1 / (1 - p)). */
#define CURVE_POINTS 51
static double curve_p(int k)
{
	return 100.0 * (1.0 - pow(10.0, -k / 10.0));
}

static void json_curve(FILE *f, const struct hist *h)
{
	fputc('[', f);
	for (int k = 0; k < CURVE_POINTS && h->count; k++) {
		double p = curve_p(k);

		if (k && (1.0 - p / 100.0) * (double)h->count < 1.0)
			break; /* past what this many samples can tell */
		fprintf(f, "%s[%.4f, %.1f]", k ? ", " : "", p, hist_percentile(h, p) / 1e3);
	}
	if (h->count)
		fprintf(f, ", [100, %.1f]", h->max / 1e3);
	fputc(']', f);
}

static void plot_png(const char *png, const char *title)
{
	FILE *g = popen("gnuplot 2>/dev/null", "w");
	int any = 0;

	if (!g) {
		fprintf(stderr, PROG ": --png: cannot run gnuplot\n");
		return;
	}
	for (int h = 0; h < H_N; h++) {
		if (!hists[h].count)
			continue;
		fprintf(g, "$%s << EOD\n", h_names[h]);
		for (int k = 0; k < CURVE_POINTS; k++) {
			double p = curve_p(k);

			if (k && (1.0 - p / 100.0) * (double)hists[h].count < 1.0)
				break;
			fprintf(g, "%.2f %.3f\n", k / 10.0, hist_percentile(&hists[h], p) / 1e3);
		}
		fprintf(g, "EOD\n");
	}
	fprintf(g,
		"set terminal png size 960,600\n"
		"set output '%s'\n"
		"set title \"%s\" noenhanced\n"
		"set xlabel 'percentile'\nset ylabel 'latency (us)'\n"
		"set logscale y\nset grid\nset key top left\n"
		"set xtics ('0%%%%' 0, '90%%%%' 1, '99%%%%' 2, '99.9%%%%' 3, '99.99%%%%' 4, '99.999%%%%' 5)\n"
		"set xrange [0:5]\nplot ",
		png, title);
	for (int h = 0; h < H_N; h++)
		if (hists[h].count)
			fprintf(g, "%s$%s using 1:2 with linespoints title '%s'", any++ ? ", " : "",
				h_names[h], h_names[h]);
	fputc('\n', g);
	if (pclose(g) != 0)
		fprintf(stderr, PROG ": --png: gnuplot failed (is gnuplot-nox installed?)\n");
}

/* v rounded, with a comma between thousands, in buf (32 bytes). */
static const char *thousands(double v, char *buf)
{
	char digits[32];
	int n, k = 0;

	n = snprintf(digits, sizeof(digits), "%.0f", v < 0 ? 0 : v);
	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			buf[k++] = ',';
		buf[k++] = digits[i];
	}
	buf[k] = '\0';
	return buf;
}

/* The target of the whole path (issue 14): CPU ns per order. */
#define CPU_NS_PER_ORDER_TARGET 2000

/* Each daemon's CPU time over the orders sent after the warm-up (Enter,
 * Cancel and Replace: the commands it was given to handle), and theirs in
 * all; a figure from /proc/PID/stat's 10 ms ticks says so. */
/* The seconds of the run that were measured (the last that has answers). */
static unsigned tl_seconds(void)
{
	unsigned n = 0;

	for (unsigned s = 0; s < TL_SECONDS; s++)
		if (tl_count[s])
			n = s + 1;
	return n;
}

/* "timeline:" the longest Accepted of each second, in ms, and the wall
 * clock of the worst one (to set beside the daemons' logs). */
static void text_timeline(void)
{
	unsigned n = tl_seconds(), worst = 0;
	time_t t;
	struct tm tm;
	char when[16];

	if (!n)
		return;
	printf("timeline:    longest Accepted each second (ms):");
	for (unsigned s = 0; s < n; s++) {
		printf(" %.1f", (double)tl_max_ns[s] / 1e6);
		if (tl_max_ns[s] > tl_max_ns[worst])
			worst = s;
	}
	t = (time_t)((measure_start_wall + worst * 1000000000ull) / 1000000000ull);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	printf("; the worst, second %u, began %s UTC\n", worst + 1, when);
}

static void text_cpu_per_order(void)
{
	double n = (double)counts.measured_sent, total = 0;
	char a[32], b[32];

	if (!n_procs)
		return;
	printf("cpu/order:  ");
	if (!counts.measured_sent) {
		printf(" no order sent after the warm-up\n");
		return;
	}
	for (unsigned i = 0; i < n_procs; i++) {
		double ns = procs_cpu_ns(&procs[i]);

		if (procs[i].gone) {
			printf(" %s exited ", procs[i].name);
			continue;
		}
		total += ns;
		printf(" %s %s ns%s", procs[i].name, thousands(ns / n, a),
		       procs[i].fine ? "" : " (10 ms ticks)");
		if (procs_loop_ns(&procs[i]) >= 0)
			printf(" (loop %s)", thousands(procs_loop_ns(&procs[i]) / n, b));
		printf(" ");
	}
	printf("total %s ns", thousands(total / n, a));
	if (!opt.baseline)
		printf(" (target %s)", thousands(CPU_NS_PER_ORDER_TARGET, b));
	printf(" over the %s orders sent after the warm-up (Enter+Cancel+Replace)\n",
	       thousands(n, a));
	printf("faults:     ");
	for (unsigned i = 0; i < n_procs; i++)
		if (!procs[i].gone)
			printf(" %s %llu", procs[i].name, (unsigned long long)procs_minflt(&procs[i]));
	printf(" minor page faults over the measurement (memory touched for the first time)\n");
}

void report_text(const struct load *l, const struct load_figures *f)
{
	uint64_t ans_enter = counts.accepted + counts.rejected;
	uint64_t ans_cxl = counts.canceled + counts.cancel_rejects;
	uint64_t ans_repl = counts.replaced + counts.replace_dead;

	printf("orders:      %llu sent, %llu answered (%llu rejected), %llu unanswered\n",
	       (unsigned long long)counts.enters, (unsigned long long)ans_enter,
	       (unsigned long long)counts.rejected, (unsigned long long)(counts.enters - ans_enter));
	printf("cancels:     %llu sent, %llu answered (%llu Cancel Reject), %llu unanswered\n",
	       (unsigned long long)counts.cancels, (unsigned long long)ans_cxl,
	       (unsigned long long)counts.cancel_rejects, (unsigned long long)(counts.cancels - ans_cxl));
	printf("replaces:    %llu sent, %llu answered (%llu on orders that had left the book), "
	       "%llu unanswered\n",
	       (unsigned long long)counts.replaces, (unsigned long long)ans_repl,
	       (unsigned long long)counts.replace_dead, (unsigned long long)(counts.replaces - ans_repl));
	printf("executions:  %llu Executed messages, %llu other cancels (IOC rest, self-match)\n",
	       (unsigned long long)counts.executions, (unsigned long long)counts.canceled_other);
	if (counts.undecodable || counts.unexpected)
		printf("unexpected:  %llu undecodable messages, %llu answers to nothing pending\n",
		       (unsigned long long)counts.undecodable, (unsigned long long)counts.unexpected);
	if (l->closed_loop)
		printf("throughput:  offered closed loop (%u in flight per session%s), achieved %.0f "
		       "orders/s over %.2f s",
		       l->window, opt.max ? ", --max" : "", f->achieved, f->secs);
	else
		printf("throughput:  offered %.0f orders/s open loop, achieved %.0f orders/s over %.2f s",
		       opt.rate, f->achieved, f->secs);
	printf(" (%u sessions, %u %s%s)\n", n_sessions, l->n_gw,
	       opt.baseline ? "relays" : "gateways", opt.warmup > 0 ? ", after the warm-up" : "");
	if (l->first)
		printf("flood:       session 0 (%s) %.0f Enters/s open loop, unmeasured: %llu sent, "
		       "%llu accepted, %llu throttled (Rejected 'o'), %llu rejected otherwise, %llu "
		       "skipped (send buffer full); the latencies below are the other %u sessions'\n",
		       flood.login, opt.flood, (unsigned long long)flood.sent,
		       (unsigned long long)flood.accepted, (unsigned long long)flood.throttled,
		       (unsigned long long)flood.rejected, (unsigned long long)flood.skipped,
		       n_sessions - 1);
	printf("mix:        ");
	for (int k = 0; k < MIX_N; k++)
		printf(" %s %u", mix_names[k], opt.mix[k]);
	printf(" (weights); at most %u resting per session\n", opt.depth);
	if (opt.book_out && f->book_orders >= 0)
		printf("book:        %ld displayed orders resting by the answers, written to %s\n",
		       f->book_orders, opt.book_out);
	for (int h = 0; h < H_N; h++)
		if (hists[h].count || h == H_ACCEPTED)
			hist_print(&hists[h], stdout, h_labels[h], 1000.0);
	text_timeline();
	printf("cpu:        ");
	for (unsigned i = 0; i < n_procs; i++)
		printf(" %s %.2f s (%.0f%%)%s", procs[i].name, procs_cpu_ns(&procs[i]) / 1e9,
		       100 * procs_cpu_ns(&procs[i]) / 1e9 / (f->wall > 0 ? f->wall : 1),
		       procs[i].gone ? " (exited)" : "");
	printf(" bench %.2f s (%.0f%%)\n", f->cpu_self, 100 * f->cpu_self / (f->wall > 0 ? f->wall : 1));
	text_cpu_per_order();
	losses_text(stdout);
}

/* "cpu_ns_per_order": each daemon's and the total, as the text has them
 * (no daemon that exited; empty when no order was measured);
 * "cpu_ns_per_order_loop": each multi-threaded daemon's main thread's. */
static void json_cpu_per_order(FILE *f)
{
	double n = (double)counts.measured_sent, total = 0;

	fprintf(f, " \"measured_sent\": %llu, \"cpu_ns_per_order\": {",
		(unsigned long long)counts.measured_sent);
	for (unsigned i = 0; counts.measured_sent && i < n_procs; i++) {
		if (procs[i].gone)
			continue;
		total += procs_cpu_ns(&procs[i]);
		fprintf(f, "\"%s\": %.0f, ", procs[i].name, procs_cpu_ns(&procs[i]) / n);
	}
	if (counts.measured_sent && n_procs)
		fprintf(f, "\"total\": %.0f", total / n);
	fprintf(f, "},\n \"cpu_ns_per_order_loop\": {");
	for (unsigned i = 0, first = 1; counts.measured_sent && i < n_procs; i++) {
		if (procs_loop_ns(&procs[i]) < 0)
			continue;
		fprintf(f, "%s\"%s\": %.0f", first ? "" : ", ", procs[i].name,
			procs_loop_ns(&procs[i]) / n);
		first = 0;
	}
	fprintf(f, "},\n \"page_faults\": {");
	for (unsigned i = 0, first = 1; i < n_procs; i++) {
		if (procs[i].gone)
			continue;
		fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", procs[i].name,
			(unsigned long long)procs_minflt(&procs[i]));
		first = 0;
	}
	fprintf(f, "},\n ");
}

int report_json(const struct load *l, const struct load_figures *fg)
{
	uint64_t ans_enter = counts.accepted + counts.rejected;
	uint64_t ans_cxl = counts.canceled + counts.cancel_rejects;
	FILE *f = fopen(opt.json, "w");

	if (!f) {
		fprintf(stderr, PROG ": %s: %s\n", opt.json, strerror(errno));
		return -1;
	}
	fprintf(f,
		"{\"target\": \"%s\", \"mode\": \"%s\", \"sessions\": %u, \"gateways\": %u, "
		"\"offered_per_s\": %.0f, \"window\": %u, \"achieved_per_s\": %.0f, "
		"\"seconds\": %.3f, \"warmup\": %.3f, \"seed\": %llu,\n",
		opt.baseline ? "baseline" : "lockstep",
		opt.max ? "max" : l->closed_loop ? "closed" : "open", n_sessions, l->n_gw,
		l->closed_loop ? 0 : opt.rate, l->closed_loop ? l->window : 0, fg->achieved, fg->secs,
		opt.warmup, (unsigned long long)opt.seed);
	fprintf(f,
		" \"sent\": {\"enter\": %llu, \"cancel\": %llu, \"replace\": %llu}, "
		"\"unanswered\": %llu, \"rejected\": %llu, \"cancel_rejects\": %llu, "
		"\"replace_dead\": %llu, \"executions\": %llu,\n",
		(unsigned long long)counts.enters, (unsigned long long)counts.cancels,
		(unsigned long long)counts.replaces, (unsigned long long)fg->in_flight,
		(unsigned long long)counts.rejected, (unsigned long long)counts.cancel_rejects,
		(unsigned long long)counts.replace_dead, (unsigned long long)counts.executions);
	/* the first version's keys, kept */
	fprintf(f,
		" \"orders\": %llu, \"answered\": %llu, \"cancels\": %llu, "
		"\"cancels_unanswered\": %llu, \"orders_per_s\": %.0f, \"accept_us\": ",
		(unsigned long long)counts.enters, (unsigned long long)ans_enter,
		(unsigned long long)counts.cancels, (unsigned long long)(counts.cancels - ans_cxl),
		fg->achieved);
	json_hist(f, &hists[H_ACCEPTED]);
	fprintf(f, ",\n \"latency_us\": {");
	for (int h = 0; h < H_N; h++) {
		fprintf(f, "%s\"%s\": ", h ? ", " : "", h_names[h]);
		json_hist(f, &hists[h]);
	}
	fprintf(f, "},\n \"curve_us\": {");
	for (int h = 0; h < H_N; h++) {
		fprintf(f, "%s\"%s\": ", h ? ", " : "", h_names[h]);
		json_curve(f, &hists[h]);
	}
	fprintf(f, "},\n \"accepted_max_us_per_s\": [");
	for (unsigned s = 0, n = tl_seconds(); s < n; s++)
		fprintf(f, "%s%.0f", s ? ", " : "", (double)tl_max_ns[s] / 1e3);
	fprintf(f, "],\n \"mix\": {");
	for (int k = 0; k < MIX_N; k++)
		fprintf(f, "%s\"%s\": %u", k ? ", " : "", mix_names[k], opt.mix[k]);
	fprintf(f, "},\n \"cpu_s\": {");
	for (unsigned i = 0; i < n_procs; i++)
		fprintf(f, "\"%s\": %.3f, ", procs[i].name, procs_cpu_ns(&procs[i]) / 1e9);
	fprintf(f, "\"bench\": %.3f}, \"wall_s\": %.3f,\n", fg->cpu_self, fg->wall);
	if (l->first)
		fprintf(f, " \"flood\": {\"session\": 0, \"login\": \"%s\", \"offered_per_s\": %.0f, "
			"\"sent\": %llu, \"accepted\": %llu, \"throttled\": %llu, \"rejected\": %llu, "
			"\"skipped\": %llu},\n",
			flood.login, opt.flood, (unsigned long long)flood.sent,
			(unsigned long long)flood.accepted, (unsigned long long)flood.throttled,
			(unsigned long long)flood.rejected, (unsigned long long)flood.skipped);
	if (opt.book_out && fg->book_orders >= 0)
		fprintf(f, " \"book_orders\": %ld,\n", fg->book_orders);
	else if (opt.book_out)
		fprintf(f, " \"book_orders\": null,\n");
	json_cpu_per_order(f);
	losses_json(f);
	fprintf(f, "}\n");
	fclose(f);
	return 0;
}

void report_png(const struct load *l, const struct load_figures *f)
{
	char title[160];

	snprintf(title, sizeof(title), "%s: %s %.0f orders/s, %u sessions",
		 opt.baseline ? "baseline relay" : "lockstep",
		 l->closed_loop ? "closed loop, achieved" : "open loop",
		 l->closed_loop ? f->achieved : opt.rate, n_sessions);
	plot_png(opt.png, title);
}

int report_matches(void)
{
	uint64_t pairs = 0, one_sided = 0, bad = 0;

	for (uint64_t h = 0; h <= match_mask; h++) {
		const struct match_slot *m = &matches[h];

		if (!m->match)
			continue;
		if (m->bad)
			bad++;
		else if (m->seen != 15)
			one_sided++;
		else
			pairs++;
	}
	printf("matches:     %llu with both sides agreeing, %llu with one side only, "
	       "%llu disagreeing or doubled\n",
	       (unsigned long long)pairs, (unsigned long long)one_sided,
	       (unsigned long long)bad);
	return one_sided + bad ? 1 : 0;
}
