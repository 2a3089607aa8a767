/* lockstep-bench: the load generator and benchmark. This file: the usage
 * text, the options, and the dispatch to a mode:
 *
 *  - load (the default, load.c): drives a running cluster through its
 *    gateways as real OUCH sessions, open loop at a fixed offered rate (each
 *    request's latency counts from its planned send time, so a stall is not
 *    hidden), closed loop (--window) or flat out (--max); reports latency
 *    percentiles per outcome, throughput, the daemons' CPU time in all and
 *    per order (procs.c), what the run lost in kernel buffers and failed
 *    sends (losses.c), and every request left without an answer (report.c);
 *  - --baseline: the same load through a trivial relay with the same hops
 *    (client -TCP-> relay -UDP-> echo -UDP-> relay -TCP-> client), the
 *    processes forked here (--relay and --echo run one by hand: relay.c,
 *    echo.c, baseline.c);
 *  - --component: the sequencer alone (in-process, on loopback), the
 *    matcher's engine replaying a tape from memory, and the codecs
 *    (comp_*.c). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "wire.h"

struct bench_options opt = {
	.connect = "127.0.0.1:15000",
	.logins = "TRADR1:pw1,TRADR2:pw2,TRADR3:pw3",
	.symbols_text = "AAPL,MSFT,AMZN,GOOG",
	.sessions = 2,
	.window = 32,
	.timeout = 10,
	.seed = 1,
	.mix = { 48, 12, 25, 15 },
	.depth = 200,
	.streams = 1,
	.datagram = WIRE_MAX_DATAGRAM,
};

/* --relay, --to and --echo, and whether --orders was given. */
struct modes {
	const char *relay, *to, *echo;
	int orders_given;
};

static void usage(FILE *f)
{
	fputs("Usage: lockstep-bench [OPTIONS]                      load a running cluster\n"
	      "       lockstep-bench --baseline [OPTIONS]           the same load through a relay\n"
	      "       lockstep-bench --component codecs|matcher|sequencer|all [OPTIONS]\n"
	      "       lockstep-bench --relay LISTEN --to ECHO | --echo LISTEN [--spin]\n"
	      "\n"
	      "Sends orders (Enter, Cancel and Replace: each one order here, one command on\n"
	      "the tape) through running lockstep gateways as real OUCH sessions, and reports\n"
	      "the latency from each order's planned send time to its answer, per outcome\n"
	      "(Accepted, Executed, Canceled, Replaced), the throughput offered and achieved,\n"
	      "the CPU time of each daemon in all and per order sent (cpu/order: ns over the\n"
	      "Enters, Cancels and Replaces sent after the warm-up, and the daemons' total;\n"
	      "(loop N): a multi-threaded daemon's main thread's share, the rest its sync\n"
	      "threads')\n"
	      "and its minor page faults over that time (faults: memory touched for the first\n"
	      "time, which a hot path should not do),\n"
	      "the machine's UDP receive-buffer drops and send-buffer errors over the run\n"
	      "(kernel udp), each daemon's drop and send-error counters (losses, with\n"
	      "--cluster), each gateway's mean time per stage of a command's path (stages,\n"
	      "with --cluster: disk, tape, match, answer), and every order without an\n"
	      "answer (must be none).\n"
	      "\n"
	      "Load:\n"
	      "  -c, --connect H:P[,H:P]  gateways; sessions are spread over them\n"
	      "                           (default 127.0.0.1:15000)\n"
	      "  -l, --logins U:P,...     logins, one per session, reused round robin\n"
	      "                           (default TRADR1:pw1,TRADR2:pw2,TRADR3:pw3)\n"
	      "  -s, --sessions N         sessions (default 2)\n"
	      "  -r, --rate R             open loop: R orders/s over all sessions\n"
	      "  -w, --window W           closed loop: W orders in flight per session\n"
	      "                           (the default, W = 32, without --rate)\n"
	      "      --max                flat out: closed loop, W = 256 unless given\n"
	      "  -n, --orders N           orders per session (default 10000 without --duration)\n"
	      "  -d, --duration S         measure for S seconds (instead of --orders);\n"
	      "                           SIGUSR1 ends the sending sooner, answers awaited\n"
	      "      --warmup S           load for S seconds first, not measured\n"
	      "      --mix P:M:C:R        weights of passive limit orders, marketable (IOC)\n"
	      "                           orders, cancels and replaces (default 48:12:25:15)\n"
	      "      --flood R            session 0 sends R Enter Orders/s open loop (IOC, a\n"
	      "                           dollar under the book), unmeasured, while sessions\n"
	      "                           1.. run the load above: the latencies reported are\n"
	      "                           theirs; the flood's answers are counted (accepted,\n"
	      "                           throttled: Rejected 'o', [gateway] login_rate)\n"
	      "      --depth N            resting orders per session at most (default 200):\n"
	      "                           past it a cancel is sent instead of a passive order\n"
	      "      --symbols A,B,...    symbols (default AAPL,MSFT,AMZN,GOOG)\n"
	      "      --seed S             the order mix's seed (default 1)\n"
	      "  -t, --timeout S          wait for answers S s after the last order (default 10)\n"
	      "  -m, --check-matches      both sides of every match must be answered once each,\n"
	      "                           with the same shares and price (bench only trader)\n"
	      "      --cluster DIR        report the CPU time of the daemons whose DIR/*.pid\n"
	      "                           ops/cluster wrote, the losses each counts and the\n"
	      "                           gateways' stage clocks (its control socket\n"
	      "                           DIR/NODE/NODE.ctl)\n"
	      "      --pids NAME=PID,...  ... or the CPU time of these processes\n"
	      "      --baseline           run the load through relays forked here (one per\n"
	      "                           --connect address) and an echo instead of a cluster\n"
	      "      --spin               the relays and the echo spin instead of sleeping\n"
	      "                           (a core each; the daemons sleep in epoll)\n"
	      "  -j, --json FILE          also write the results as JSON (cpu_ns_per_order,\n"
	      "                           kernel_udp, daemon_losses and more: man page)\n"
	      "      --book-out FILE      after the run, the book the sessions' OUCH answers\n"
	      "                           imply: a line SYMBOL SIDE PRICE SHARES REF per order\n"
	      "                           resting and displayed (Display not 'N'); SIDE B or S\n"
	      "                           (S, T, E), PRICE as in OUCH (4 decimals implied),\n"
	      "                           SHARES open, REF the Accepted's or Replaced's order\n"
	      "                           reference number; sorted by symbol (bytes), side,\n"
	      "                           price and REF (numbers: sort both files with\n"
	      "                           LC_ALL=C sort before a diff). The drain also waits\n"
	      "                           for each IOC order's end and the resting side of\n"
	      "                           each execution (the bench the only trader); exit 1\n"
	      "                           when the book may be incomplete\n"
	      "      --png FILE           and the latency percentile curves (gnuplot)\n"
	      "  -q, --quiet              (accepted for compatibility; the report is short)\n"
	      "\n"
	      "Components (--component; --json and --seed as above):\n"
	      "  codecs                   ns per message of each codec (--events N, default 2M)\n"
	      "  matcher                  the engine replaying a synthetic tape of --events N\n"
	      "                           (default 2M) events of the --mix, or --journal DIR,\n"
	      "                           over a book of --resting N orders far from the\n"
	      "                           market (default 0: the cost per event of a deep book),\n"
	      "                           with --risk-file FILE's pre-trade limits (the\n"
	      "                           matcher's risk_file: every order checked) and\n"
	      "                           --max-user-tokens N (the matcher's; default 0: off);\n"
	      "                           --max-tokens N: a token table of N (the matcher's\n"
	      "                           max_tokens, above 1048576), full once N tokens were\n"
	      "                           seen: the cost of forgetting (default: never full)\n"
	      "  sequencer                libsequencer in a thread fed by --streams K synthetic\n"
	      "                           gateway streams of --batch B commands per datagram of\n"
	      "                           --datagram BYTES (default: as many as fit in 1472)\n"
	      "                           for --duration S (default 3); every datagram tagged\n"
	      "                           under a key of its own as a cluster's, or untagged\n"
	      "                           with --auth off; journalled under fsync = disk, or\n"
	      "                           --fsync none\n"
	      "  all                      the three\n"
	      "\n"
	      "  -h, --help               this text\n"
	      "\n"
	      "Exit status: 0 when every order was answered (and, with --check-matches, both\n"
	      "sides of every match agree), 1 otherwise, 2 usage.\n",
	      f);
}

enum {
	O_MAX = 256, O_DURATION, O_WARMUP, O_MIX, O_DEPTH, O_CLUSTER, O_PIDS, O_BASELINE, O_SPIN,
	O_PNG, O_COMPONENT, O_JOURNAL, O_EVENTS, O_RESTING,
	O_MAX_USER_TOKENS, O_MAX_TOKENS, O_RISK_FILE, O_BATCH, O_STREAMS, O_DATAGRAM, O_RELAY, O_TO,
	O_ECHO, O_AUTH, O_FSYNC, O_FLOOD, O_BOOK_OUT,
};

/* Parses the options into opt and m: -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct modes *m)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'c' }, { "logins", required_argument, NULL, 'l' },
		{ "sessions", required_argument, NULL, 's' }, { "orders", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' }, { "window", required_argument, NULL, 'w' },
		{ "symbols", required_argument, NULL, 'S' }, { "seed", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' }, { "json", required_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' }, { "help", no_argument, NULL, 'h' },
		{ "check-matches", no_argument, NULL, 'm' }, { "duration", required_argument, NULL, 'd' },
		{ "max", no_argument, NULL, O_MAX }, { "warmup", required_argument, NULL, O_WARMUP },
		{ "mix", required_argument, NULL, O_MIX }, { "depth", required_argument, NULL, O_DEPTH },
		{ "cluster", required_argument, NULL, O_CLUSTER },
		{ "pids", required_argument, NULL, O_PIDS }, { "baseline", no_argument, NULL, O_BASELINE },
		{ "spin", no_argument, NULL, O_SPIN }, { "png", required_argument, NULL, O_PNG },
		{ "component", required_argument, NULL, O_COMPONENT },
		{ "journal", required_argument, NULL, O_JOURNAL },
		{ "events", required_argument, NULL, O_EVENTS },
		{ "resting", required_argument, NULL, O_RESTING },
		{ "max-user-tokens", required_argument, NULL, O_MAX_USER_TOKENS },
		{ "max-tokens", required_argument, NULL, O_MAX_TOKENS },
		{ "risk-file", required_argument, NULL, O_RISK_FILE },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "streams", required_argument, NULL, O_STREAMS },
		{ "datagram", required_argument, NULL, O_DATAGRAM },
		{ "auth", required_argument, NULL, O_AUTH },
		{ "fsync", required_argument, NULL, O_FSYNC },
		{ "flood", required_argument, NULL, O_FLOOD },
		{ "book-out", required_argument, NULL, O_BOOK_OUT },
		{ "relay", required_argument, NULL, O_RELAY }, { "to", required_argument, NULL, O_TO },
		{ "echo", required_argument, NULL, O_ECHO },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:l:s:n:r:w:t:j:qhmd:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': snprintf(opt.connect, sizeof(opt.connect), "%s", optarg); break;
		case 'l': snprintf(opt.logins, sizeof(opt.logins), "%s", optarg); break;
		case 's': opt.sessions = (unsigned)atoi(optarg); break;
		case 'n': opt.orders = strtoull(optarg, NULL, 10); m->orders_given = 1; break;
		case 'r': opt.rate = atof(optarg); break;
		case 'w': opt.window = (unsigned)atoi(optarg); break;
		case 'S': snprintf(opt.symbols_text, sizeof(opt.symbols_text), "%s", optarg); break;
		case 'e': opt.seed = strtoull(optarg, NULL, 10); break;
		case 't': opt.timeout = atof(optarg); break;
		case 'j': opt.json = optarg; break;
		case 'q': opt.quiet = 1; break;
		case 'm': opt.check_matches = 1; break;
		case 'd': opt.duration = atof(optarg); break;
		case O_MAX: opt.max = 1; break;
		case O_WARMUP: opt.warmup = atof(optarg); break;
		case O_MIX:
			if (sscanf(optarg, "%u:%u:%u:%u", &opt.mix[0], &opt.mix[1], &opt.mix[2],
				   &opt.mix[3]) != 4 ||
			    opt.mix[0] + opt.mix[1] + opt.mix[2] + opt.mix[3] == 0 ||
			    opt.mix[0] + opt.mix[1] == 0) {
				fprintf(stderr, PROG ": --mix P:M:C:R, four weights, some orders new\n");
				return 2;
			}
			break;
		case O_DEPTH: opt.depth = (unsigned)atoi(optarg); break;
		case O_CLUSTER: opt.cluster_dir = optarg; break;
		case O_PIDS: opt.pids = optarg; break;
		case O_BASELINE: opt.baseline = 1; break;
		case O_SPIN: opt.spin = 1; break;
		case O_PNG: opt.png = optarg; break;
		case O_COMPONENT: opt.component = optarg; break;
		case O_JOURNAL: opt.journal = optarg; break;
		case O_EVENTS: opt.events = strtoull(optarg, NULL, 10); break;
		case O_RESTING: opt.resting = strtoull(optarg, NULL, 10); break;
		case O_MAX_USER_TOKENS: opt.max_user_tokens = (uint32_t)strtoul(optarg, NULL, 10); break;
		case O_MAX_TOKENS: opt.max_tokens = (uint32_t)strtoul(optarg, NULL, 10); break;
		case O_RISK_FILE: opt.risk_file = optarg; break;
		case O_BATCH: opt.batch = (unsigned)atoi(optarg); break;
		case O_STREAMS: opt.streams = (unsigned)atoi(optarg); break;
		case O_DATAGRAM: opt.datagram = (unsigned)atoi(optarg); break;
		case O_AUTH:
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, PROG ": --auth: on or off\n");
				return 2;
			}
			opt.auth_off = strcmp(optarg, "off") == 0;
			break;
		case O_FSYNC:
			if (strcmp(optarg, "disk") && strcmp(optarg, "none")) {
				fprintf(stderr, PROG ": --fsync: disk or none (one sequencer)\n");
				return 2;
			}
			snprintf(opt.fsync, sizeof(opt.fsync), "%s", optarg);
			break;
		case O_FLOOD: opt.flood = atof(optarg); break;
		case O_BOOK_OUT: opt.book_out = optarg; break;
		case O_RELAY: m->relay = optarg; break;
		case O_TO: m->to = optarg; break;
		case O_ECHO: m->echo = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument %s\n", argv[optind]);
		return 2;
	}
	return -1;
}

/* Splits --symbols into symbols[]: 0, or 2 with a message. */
static int parse_symbols(void)
{
	static char syms[sizeof(opt.symbols_text)];
	char *tmp[MAX_SYMBOLS];

	snprintf(syms, sizeof(syms), "%s", opt.symbols_text);
	n_symbols = (unsigned)bench_split(syms, tmp, MAX_SYMBOLS);
	for (unsigned i = 0; i < n_symbols; i++) {
		symbols[i] = tmp[i];
		symbol_len[i] = strlen(tmp[i]);
		if (symbol_len[i] > OUCH_STOCK_LEN) {
			fprintf(stderr, PROG ": symbol %s: at most %d characters\n", tmp[i],
				OUCH_STOCK_LEN);
			return 2;
		}
	}
	if (!n_symbols) {
		fprintf(stderr, PROG ": need a symbol\n");
		return 2;
	}
	return 0;
}

/* --echo LISTEN, or --relay LISTEN --to ECHO: runs until killed. */
static int run_relay_or_echo(const struct modes *m)
{
	struct sockaddr_in a, e;
	int fd, ufd;

	if (m->echo) {
		if ((ufd = bench_udp_bound(m->echo, &a)) < 0) {
			fprintf(stderr, PROG ": --echo %s: %s\n", m->echo, strerror(-ufd));
			return 1;
		}
		return echo_run(ufd);
	}
	if (!m->to || net_parse_addr(m->to, &e) < 0 || net_parse_addr(m->relay, &a) < 0) {
		fprintf(stderr, PROG ": --relay H:P --to ECHO_H:P\n");
		return 2;
	}
	if ((fd = net_tcp_listen(&a, 128)) < 0 || (ufd = bench_udp_bound("127.0.0.1:0", &a)) < 0) {
		fprintf(stderr, PROG ": --relay %s: cannot listen\n", m->relay);
		return 1;
	}
	return relay_run(fd, ufd, &e);
}

static int run_components(void)
{
	int all = strcmp(opt.component, "all") == 0, rc = 0, any = 0;

	if (all && opt.json) {
		fprintf(stderr, PROG ": --json takes one component, not all\n");
		return 2;
	}
	signal(SIGINT, bench_on_signal);
	if (all || strcmp(opt.component, "codecs") == 0) {
		rc |= comp_codecs_run(opt.events ? opt.events : 2000000);
		any = 1;
	}
	if (all || strcmp(opt.component, "matcher") == 0) {
		rc |= comp_matcher_run();
		any = 1;
	}
	if (all || strcmp(opt.component, "sequencer") == 0) {
		rc |= comp_sequencer_run();
		any = 1;
	}
	if (!any) {
		fprintf(stderr, PROG ": --component codecs, matcher, sequencer or all\n");
		return 2;
	}
	return rc;
}

/* The load's options: 0, or 2 with a message. */
static int check_load_options(const struct modes *m)
{
	if (opt.sessions < 1 || opt.sessions > MAX_SESSIONS || opt.window < 1 || opt.rate < 0 ||
	    opt.duration < 0 || opt.warmup < 0 || opt.flood < 0 ||
	    (m->orders_given && opt.orders < 1)) {
		fprintf(stderr, PROG ": sessions 1..%d, orders >= 1, window >= 1\n", MAX_SESSIONS);
		return 2;
	}
	if (opt.duration > 0 && m->orders_given) {
		fprintf(stderr, PROG ": --orders or --duration, not both\n");
		return 2;
	}
	if (opt.book_out && opt.baseline) {
		fprintf(stderr, PROG ": --book-out: the baseline's echo keeps no book\n");
		return 2;
	}
	if (opt.duration <= 0 && !m->orders_given)
		opt.orders = 10000;
	return 0;
}

int main(int argc, char **argv)
{
	struct modes m = { 0 };
	int rc;

	if ((rc = parse_options(argc, argv, &m)) >= 0)
		return rc;
	mix_seed(opt.seed);
	if ((rc = parse_symbols()) != 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	if (m.relay || m.echo)
		return run_relay_or_echo(&m);
	if (opt.component)
		return run_components();
	if ((rc = check_load_options(&m)) != 0)
		return rc;
	return load_run();
}
