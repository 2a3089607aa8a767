/* lockstep-feed: a subscriber of lockstep's public market data feed. This
 * file: the options, the set-up in dependency order (and the tear-down in
 * reverse), the loop's timers and signals, the start from a GLIMPSE
 * snapshot, the end, and the --check at the end. See feed.h for the other
 * files and ops/man/lockstep-feed.1. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "feed.h"
#include "log.h"
#include "macros.h"
#include "tapeday.h"

#define CHECK_TRIES 5
#define CHECK_RETRY_S 0.2
#define TICK_S 0.05

static void usage(FILE *f)
{
	fputs("Usage: lockstep-feed (--a GROUP:PORT | --b GROUP:PORT)... [OPTIONS]\n"
	      "\n"
	      "Subscribes to a lockstep partition's ITCH 5.0 market data feed (MoldUDP64 on\n"
	      "multicast feeds A and B, the same message stream), arbitrates between the two\n"
	      "(the first copy of each sequence number wins), asks retransmission servers\n"
	      "for what both feeds missed, and builds the order books.\n"
	      "\n"
	      "Feeds:\n"
	      "  --a GROUP:PORT       feed A's multicast group (at least one of --a, --b)\n"
	      "  --b GROUP:PORT       feed B's multicast group\n"
	      "  --iface ADDR         the interface address to join on and to send requests\n"
	      "                       from (127.0.0.1)\n"
	      "  --retrans HOST:PORT[,HOST:PORT...]\n"
	      "                       retransmission servers (up to 9), asked in turn for\n"
	      "                       ranges both feeds missed\n"
	      "  --session NAME       day 1's MoldUDP64 session (ITCH); day d > 1 is NAME's\n"
	      "                       first 4 characters and d in 6 digits (ITCH000002)\n"
	      "  --retrans-wait MS    first wait for an answer before asking again (20),\n"
	      "                       doubling up to 16 times that\n"
	      "  --arb-wait MS        a range one feed missed is asked for only once the other\n"
	      "                       feed went past it too, or has not moved for MS (50)\n"
	      "  --give-up S          a range nobody answers for S seconds is given up and\n"
	      "                       counted lost (2)\n"
	      "\n"
	      "Start:\n"
	      "  Without --glimpse the day is read from sequence number 1 (what the feeds no\n"
	      "  longer carry is asked for).\n"
	      "  --glimpse HOST:PORT  start from a GLIMPSE 5.0 snapshot (SoupBinTCP): the feeds\n"
	      "                       are joined first and buffered, the snapshot taken, then\n"
	      "                       the feed applied from its End of Snapshot's sequence\n"
	      "                       number on\n"
	      "  --login USER --password PW\n"
	      "                       the GLIMPSE login (as for OUCH)\n"
	      "  --glimpse-timeout S  for a snapshot to complete (10)\n"
	      "\n"
	      "Output:\n"
	      "  --record FILE        every live message delivered, in sequence order, in\n"
	      "                       NASDAQ's ITCH file format (u16 big-endian length, then\n"
	      "                       the message); not the snapshot's\n"
	      "  --top SYMBOL         best bid and ask at the end (repeatable)\n"
	      "  --depth SYMBOL       price levels at the end (repeatable)\n"
	      "  --levels N           levels a side for --depth (5)\n"
	      "  --interval S         print --top and --depth every S seconds too\n"
	      "  --book-out FILE      the canonical dump of every book at the end: per\n"
	      "                       symbol (name order) \"SYMBOL state S locate L\", then\n"
	      "                       \"SYMBOL SIDE PRICE SHARES REF\" per order in book order\n"
	      "  --stats              the counters at the end\n"
	      "  --json               --stats, --top, --depth and --check as one JSON object\n"
	      "                       (--interval: one JSON line each time)\n"
	      "  -v, --verbose        log more (twice: debug)\n"
	      "\n"
	      "End:\n"
	      "  --duration S         run S seconds\n"
	      "  --until-idle S       stop after S seconds without a new message\n"
	      "  (else until SIGINT or SIGTERM; a second one stops at once)\n"
	      "  --check              at the end, take a new GLIMPSE snapshot, bring the\n"
	      "                       feed's book to the snapshot's position and compare the\n"
	      "                       two; the first difference is printed\n"
	      "\n"
	      "Limits:\n"
	      "  --max-orders N       resting orders the books hold (1000000)\n"
	      "  --max-symbols N      symbols (10000)\n"
	      "\n"
	      "Exit status: 0 success; 1 the check failed or messages were lost for good;\n"
	      "2 usage or set-up error.\n",
	      f);
}

__attribute__((format(printf, 1, 2))) static int fail_usage(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see lockstep-feed --help)\n", stderr);
	return 2;
}

static int parse_double(const char *s, double min, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > 1e9)
		return -1;
	*out = v;
	return 0;
}

static int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

enum {
	O_A = 256, O_B, O_IFACE, O_RETRANS, O_SESSION, O_GLIMPSE, O_LOGIN, O_PASSWORD, O_RECORD,
	O_TOP, O_DEPTH, O_LEVELS, O_INTERVAL, O_BOOK_OUT, O_CHECK, O_DURATION, O_UNTIL_IDLE,
	O_STATS, O_JSON, O_MAX_ORDERS, O_MAX_SYMBOLS, O_GIVE_UP, O_RETRANS_WAIT, O_ARB_WAIT,
	O_GLIMPSE_TIMEOUT, O_VERSION,
};

/* 0, 2 (usage error: said), or -1 (--help, --version: done). */
static int parse_opts(struct feed_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "a", required_argument, NULL, O_A },
		{ "b", required_argument, NULL, O_B },
		{ "iface", required_argument, NULL, O_IFACE },
		{ "retrans", required_argument, NULL, O_RETRANS },
		{ "session", required_argument, NULL, O_SESSION },
		{ "glimpse", required_argument, NULL, O_GLIMPSE },
		{ "login", required_argument, NULL, O_LOGIN },
		{ "password", required_argument, NULL, O_PASSWORD },
		{ "record", required_argument, NULL, O_RECORD },
		{ "top", required_argument, NULL, O_TOP },
		{ "depth", required_argument, NULL, O_DEPTH },
		{ "levels", required_argument, NULL, O_LEVELS },
		{ "interval", required_argument, NULL, O_INTERVAL },
		{ "book-out", required_argument, NULL, O_BOOK_OUT },
		{ "check", no_argument, NULL, O_CHECK },
		{ "duration", required_argument, NULL, O_DURATION },
		{ "until-idle", required_argument, NULL, O_UNTIL_IDLE },
		{ "stats", no_argument, NULL, O_STATS },
		{ "json", no_argument, NULL, O_JSON },
		{ "max-orders", required_argument, NULL, O_MAX_ORDERS },
		{ "max-symbols", required_argument, NULL, O_MAX_SYMBOLS },
		{ "give-up", required_argument, NULL, O_GIVE_UP },
		{ "retrans-wait", required_argument, NULL, O_RETRANS_WAIT },
		{ "arb-wait", required_argument, NULL, O_ARB_WAIT },
		{ "glimpse-timeout", required_argument, NULL, O_GLIMPSE_TIMEOUT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t u;
	int c;

	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
		switch (c) {
		case O_A: o->group[0] = optarg; break;
		case O_B: o->group[1] = optarg; break;
		case O_IFACE: o->iface = optarg; break;
		case O_RETRANS: o->retrans = optarg; break;
		case O_SESSION: o->session = optarg; break;
		case O_GLIMPSE: o->glimpse = optarg; break;
		case O_LOGIN: o->login = optarg; break;
		case O_PASSWORD: o->password = optarg; break;
		case O_RECORD: o->record = optarg; break;
		case O_BOOK_OUT: o->book_out = optarg; break;
		case O_CHECK: o->check = 1; break;
		case O_STATS: o->stats = 1; break;
		case O_JSON: o->json = 1; break;
		case 'v': o->verbose++; break;
		case O_TOP:
		case O_DEPTH: {
			unsigned *n = c == O_TOP ? &o->n_top : &o->n_depth;

			if (*n == FEED_MAX_WATCH)
				return fail_usage("%s: too many symbols (16 each for --top and --depth)",
						  optarg);
			if (!*optarg || strlen(optarg) > ITCH_STOCK_LEN)
				return fail_usage("%s: not a symbol (1 to 8 characters)", optarg);
			(c == O_TOP ? o->top : o->depth)[(*n)++] = optarg;
			break;
		}
		case O_LEVELS:
			if (parse_uint(optarg, 1, 1000, &u) < 0)
				return fail_usage("--levels %s: 1 to 1000", optarg);
			o->levels = (unsigned)u;
			break;
		case O_MAX_ORDERS:
			if (parse_uint(optarg, 1, 1u << 30, &u) < 0)
				return fail_usage("--max-orders %s: 1 to 1073741824", optarg);
			o->max_orders = (uint32_t)u;
			break;
		case O_MAX_SYMBOLS:
			if (parse_uint(optarg, 1, BOOK_MAX_SYMBOLS, &u) < 0)
				return fail_usage("--max-symbols %s: 1 to 65535", optarg);
			o->max_symbols = (uint32_t)u;
			break;
		case O_RETRANS_WAIT:
		case O_ARB_WAIT:
			if (parse_uint(optarg, c == O_ARB_WAIT ? 0 : 1, 60000, &u) < 0)
				return fail_usage("%s: milliseconds, up to 60000", optarg);
			*(c == O_ARB_WAIT ? &o->arb_wait_ns : &o->retrans_wait_ns) = u * 1000000;
			break;
		case O_INTERVAL:
		case O_DURATION:
		case O_UNTIL_IDLE:
		case O_GIVE_UP:
		case O_GLIMPSE_TIMEOUT: {
			double *d = c == O_INTERVAL ? &o->interval : c == O_DURATION ? &o->duration
				    : c == O_UNTIL_IDLE ? &o->until_idle : c == O_GIVE_UP ? &o->give_up
				    : &o->glimpse_timeout;

			if (parse_double(optarg, 0.001, d) < 0)
				return fail_usage("%s: seconds (> 0)", optarg);
			break;
		}
		case 'h': usage(stdout); return -1;
		case O_VERSION: puts(PROG " " LOCKSTEP_VERSION); return -1;
		default: return fail_usage("%s", "unknown option");
		}
	}
	if (optind < argc)
		return fail_usage("%s: unexpected argument", argv[optind]);
	if (!o->group[0] && !o->group[1])
		return fail_usage("%s", "which feed? (--a and/or --b)");
	if (o->glimpse && (!o->login || !o->password))
		return fail_usage("%s", "--glimpse needs --login and --password");
	if (o->check && !o->glimpse)
		return fail_usage("%s", "--check takes its snapshot from --glimpse HOST:PORT");
	if (o->glimpse) {
		struct soup_login l = { 0 };
		uint8_t pkt[64];

		if (strlen(o->login) > SOUP_USERNAME_LEN || strlen(o->password) > SOUP_PASSWORD_LEN)
			return fail_usage("%s", "--login: up to 6 characters, --password: up to 10");
		snprintf(l.username, sizeof(l.username), "%s", o->login);
		snprintf(l.password, sizeof(l.password), "%s", o->password);
		if (soup_build_login_request(pkt, sizeof(pkt), &l) < 0)
			return fail_usage("%s", "--login and --password: letters and digits only");
	}
	return 0;
}

/* ---- the end, and the check ---------------------------------------------- */

static void stop_now(struct feed *f)
{
	ev_break(f->loop, EVBREAK_ALL);
}

static void check_done(struct feed *f, int failed)
{
	f->check_phase = 3;
	f->check_failed = failed;
	if (failed)
		log_err("check: %s", f->check_msg);
	else
		log_notice("check: the book equals the snapshot at sequence number %llu",
			   (unsigned long long)f->pause_at);
	stop_now(f);
}

/* Waiting for the feed to reach the snapshot's position: compare there. */
static void check_progress(struct feed *f)
{
	char diff[256];
	uint64_t next = feed_stream_next(f);

	if (f->check_phase != 2)
		return;
	if (next == f->pause_at) {
		if (book_compare(f->book, f->check_book, diff, sizeof(diff)) == 0) {
			snprintf(f->check_msg, sizeof(f->check_msg),
				 "equal at sequence number %llu (%llu snapshot messages)",
				 (unsigned long long)f->pause_at,
				 (unsigned long long)f->gl.messages);
			check_done(f, 0);
		} else {
			snprintf(f->check_msg, sizeof(f->check_msg),
				 "the book differs from the snapshot at sequence number %llu: %s "
				 "(A: the feed's, B: the snapshot's)",
				 (unsigned long long)f->pause_at, diff);
			check_done(f, 1);
		}
		return;
	}
	if (f->now > f->check_deadline) {
		snprintf(f->check_msg, sizeof(f->check_msg),
			 "the feed did not reach the snapshot's sequence number %llu (next %llu)",
			 (unsigned long long)f->pause_at, (unsigned long long)next);
		check_done(f, 2);
	}
}

static void on_check_snapshot(struct glimpse *g);

static void check_snapshot(struct feed *f)
{
	f->check_phase = 1;
	f->pause_all = 1;
	glimpse_start(&f->gl, f->check_book, on_check_snapshot, f);
}

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct feed *f = container_of(w, struct feed, retry_timer);

	(void)loop;
	(void)revents;
	check_snapshot(f);
}

static void on_check_snapshot(struct glimpse *g)
{
	struct feed *f = g->ctx;
	struct mold_session s;
	uint32_t day;
	uint64_t next = feed_stream_next(f);

	f->now = mono_ns();
	if (g->state == GL_FAILED) {
		snprintf(f->check_msg, sizeof(f->check_msg), "snapshot: %s", g->error);
		check_done(f, 2);
		return;
	}
	day = mold_session_set(&s, g->session) == 0 ? tapeday_day_of_session(&f->first, &s) : 0;
	if (day != f->day || g->next_seq < next) {
		/* the snapshot is behind what this subscriber applied (its
		 * server lags): the feed stays paused and a later one is asked */
		if (++f->check_tries < CHECK_TRIES) {
			log_info("check: snapshot of %s at %llu, the feed is at day %u %llu: again",
				 g->session, (unsigned long long)g->next_seq, f->day,
				 (unsigned long long)next);
			ev_timer_set(&f->retry_timer, CHECK_RETRY_S, 0);
			ev_timer_start(f->loop, &f->retry_timer);
			return;
		}
		snprintf(f->check_msg, sizeof(f->check_msg),
			 "no snapshot at or after the feed's position (day %u, next %llu): the "
			 "last was of session %s at %llu",
			 f->day, (unsigned long long)next, g->session,
			 (unsigned long long)g->next_seq);
		check_done(f, 2);
		return;
	}
	/* apply the live feed up to the snapshot's position, and hold there */
	f->pause_at = g->next_seq;
	f->pause_all = 0;
	f->check_phase = 2;
	f->check_deadline = f->now + (uint64_t)((f->o.give_up * 2 + 5) * 1e9);
	feed_stream_resume(f);
	check_progress(f);
}

/* The end: at once, or after the check. */
static void feed_finish(struct feed *f)
{
	if (f->stopping)
		return;
	f->stopping = 1;
	if (f->o.check && !f->buffering) {
		log_info("check: taking a snapshot");
		check_snapshot(f);
		return;
	}
	if (f->o.check) {
		snprintf(f->check_msg, sizeof(f->check_msg), "the first snapshot never completed");
		f->check_phase = 3;
		f->check_failed = 2;
	}
	stop_now(f);
}

/* ---- the start from a snapshot -------------------------------------------- */

static void on_first_snapshot(struct glimpse *g)
{
	struct feed *f = g->ctx;
	struct mold_session s;
	uint32_t day;

	f->now = mono_ns();
	if (g->state == GL_FAILED) {
		log_err("GLIMPSE %s: %s", f->o.glimpse, g->error);
		f->exit_code = 2;
		stop_now(f);
		return;
	}
	day = mold_session_set(&s, g->session) == 0 ? tapeday_day_of_session(&f->first, &s) : 0;
	if (day == 0 || g->next_seq == 0) {
		log_err("GLIMPSE %s: session \"%s\" (next %llu) is not one of this feed's days "
			"(--session %s)",
			f->o.glimpse, g->session, (unsigned long long)g->next_seq, f->o.session);
		f->exit_code = 2;
		stop_now(f);
		return;
	}
	f->start_snapshot_seq = g->next_seq;
	f->start_snapshot_msgs = g->messages;
	log_notice("snapshot: %llu messages, session %s, live from %llu%s",
		   (unsigned long long)g->messages, g->session, (unsigned long long)g->next_seq,
		   g->anomalies ? " (with anomalies)" : "");
	feed_stream_begin(f, day, g->next_seq);
	f->last_msg_ns = f->now;
	feed_stream_replay_pending(f);
	feed_stream_arm(f);
}

/* ---- timers and signals ----------------------------------------------------- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct feed *f = container_of(w, struct feed, tick);
	double t;

	(void)loop;
	(void)revents;
	f->now = mono_ns();
	feed_stream_tick(f);
	check_progress(f);
	if (f->stopping)
		return;
	t = (double)(f->now - f->started_ns) / 1e9;
	if (f->o.interval > 0 && t >= f->next_interval) {
		report_interval(f, stdout);
		f->next_interval += f->o.interval;
	}
	if (f->o.until_idle > 0 && !f->buffering &&
	    (double)(f->now - f->last_msg_ns) / 1e9 >= f->o.until_idle) {
		log_info("no new message for %.1f s: stopping", f->o.until_idle);
		feed_finish(f);
	}
}

static void on_stop_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct feed *f = container_of(w, struct feed, stop_timer);

	(void)loop;
	(void)revents;
	feed_finish(f);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct feed *f = w->data;

	(void)loop;
	(void)revents;
	if (f->signals++) {
		stop_now(f);
		return;
	}
	log_notice("signal %d: stopping", w->signum);
	feed_finish(f);
}

/* ---- set-up and tear-down --------------------------------------------------- */

static void defaults(struct feed_opts *o)
{
	o->iface = "127.0.0.1";
	o->session = "ITCH";
	o->levels = 5;
	o->give_up = 2;
	o->glimpse_timeout = 10;
	o->retrans_wait_ns = 20 * 1000000ull;
	o->arb_wait_ns = 50 * 1000000ull;
	o->max_orders = 1000000;
	o->max_symbols = 10000;
}

static int setup(struct feed *f)
{
	int err;

	f->loop = ev_default_loop(EVFLAG_AUTO);
	if (!f->loop) {
		log_err("libev: no event loop");
		return -ENOMEM;
	}
	f->now = f->started_ns = f->last_msg_ns = mono_ns();
	if ((err = book_create(&f->book, f->o.max_orders, f->o.max_symbols)) < 0 ||
	    (f->o.check &&
	     (err = book_create(&f->check_book, f->o.max_orders, f->o.max_symbols)) < 0)) {
		log_err("books of %u orders and %u symbols: %s", f->o.max_orders, f->o.max_symbols,
			strerror(-err));
		return err;
	}
	if (f->o.glimpse && (err = net_parse_addr(f->o.glimpse, &f->glimpse_addr)) < 0) {
		log_err("--glimpse %s: not a HOST:PORT", f->o.glimpse);
		return err;
	}
	if (f->o.record) {
		f->record = fopen(f->o.record, "w");
		if (!f->record) {
			err = -errno;
			log_err("--record %s: %s", f->o.record, strerror(errno));
			return err;
		}
		setvbuf(f->record, NULL, _IOFBF, 1 << 20);
	}
	if ((err = feed_stream_open(f)) < 0)
		return err;
	/* the books took a while to fault in: the timers count from now */
	ev_now_update(f->loop);
	f->now = f->started_ns = f->last_msg_ns = mono_ns();
	if (f->o.glimpse)
		glimpse_init(&f->gl, f->loop, &f->glimpse_addr, f->o.login, f->o.password,
			     f->o.glimpse_timeout);
	ev_timer_init(&f->tick, on_tick, TICK_S, TICK_S);
	ev_timer_start(f->loop, &f->tick);
	ev_init(&f->stop_timer, on_stop_timer);
	if (f->o.duration > 0) {
		ev_timer_set(&f->stop_timer, f->o.duration, 0);
		ev_timer_start(f->loop, &f->stop_timer);
	}
	ev_init(&f->retry_timer, on_retry);
	f->next_interval = f->o.interval;
	ev_signal_init(&f->sigint, on_signal, SIGINT);
	ev_signal_init(&f->sigterm, on_signal, SIGTERM);
	f->sigint.data = f->sigterm.data = f;
	ev_signal_start(f->loop, &f->sigint);
	ev_signal_start(f->loop, &f->sigterm);
	signal(SIGPIPE, SIG_IGN);
	log_notice("ready: feed%s%s%s%s on %s, %u retransmission server%s%s",
		   f->o.group[0] ? " A " : "", f->o.group[0] ? f->o.group[0] : "",
		   f->o.group[1] ? " B " : "", f->o.group[1] ? f->o.group[1] : "", f->o.iface,
		   f->n_servers, f->n_servers == 1 ? "" : "s",
		   f->o.glimpse ? ", snapshot first" : "");
	if (f->o.glimpse)
		glimpse_start(&f->gl, f->book, on_first_snapshot, f);
	return 0;
}

static void teardown(struct feed *f)
{
	if (f->loop) {
		ev_signal_stop(f->loop, &f->sigterm);
		ev_signal_stop(f->loop, &f->sigint);
		ev_timer_stop(f->loop, &f->retry_timer);
		ev_timer_stop(f->loop, &f->stop_timer);
		ev_timer_stop(f->loop, &f->tick);
		if (f->o.glimpse)
			glimpse_stop(&f->gl);
		feed_stream_close(f);
	}
	book_destroy(f->check_book);
	book_destroy(f->book);
}

int main(int argc, char **argv)
{
	static struct feed f; /* large (the GLIMPSE buffer): not on the stack */
	struct rx_stats rs;
	int rc;

	defaults(&f.o);
	rc = parse_opts(&f.o, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc;
	log_init(PROG, f.o.verbose >= 2 ? LOG_LVL_DEBUG
		       : f.o.verbose	 ? LOG_LVL_INFO
					 : LOG_LVL_NOTICE);
	for (int s = 0; s < FEED_SIDES; s++)
		f.fd[s] = -1;
	if (setup(&f) < 0) {
		teardown(&f);
		if (f.record)
			fclose(f.record);
		return 2;
	}
	ev_run(f.loop, 0);

	report_final(&f, stdout);
	rc = f.exit_code;
	if (!rc && f.o.book_out) {
		int err = report_book_out(&f, f.o.book_out);

		if (err < 0) {
			log_err("--book-out %s: %s", f.o.book_out, strerror(-err));
			rc = 2;
		}
	}
	if (f.record && (ferror(f.record) | fclose(f.record))) {
		log_err("--record %s: write error", f.o.record);
		rc = 2;
	}
	feed_rx_stats(&f, &rs);
	if (!rc && (rs.lost || f.check_failed))
		rc = 1;
	teardown(&f);
	return rc;
}
