/* lockstepctl: talks to a lockstep daemon's control socket; `keygen` makes
 * and rotates cluster key files (ops/keygen.c); `passwd` hashes a login's
 * password for a credentials file, the gateway's or a matcher's GLIMPSE
 * logins (ops/passwd.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ctl_admin.h"
#include "keygen.h"
#include "passwd.h"

enum { EXIT_USAGE = 2, EXIT_CONNECT = 3 };

#define RUN_DIR "/run/lockstep" /* the units' RuntimeDirectory= root */

static void usage(FILE *out)
{
	fputs("Usage: lockstepctl [--socket PATH | --node NAME] [--json | --prometheus]\n"
	      "                   [--timeout MS] COMMAND [ARG]\n"
	      "       lockstepctl keygen [--add | --send ID | --remove ID] FILE\n"
	      "       lockstepctl passwd [LOGIN FIRM [cancel_on_disconnect]]\n"
	      "\n"
	      "Talks to one lockstep daemon through its control socket, writes the\n"
	      "cluster key file its [node] key_file names, or hashes a password for a\n"
	      "credentials file (a gateway's, or a matcher's GLIMPSE logins).\n"
	      "\n"
	      "Commands:\n"
	      "  status            role, state, term, positions, state hash, io path,\n"
	      "                    authentication (auth: the keys in use, or off), a\n"
	      "                    sequencer's disk (ok, or full: it stands down), the\n"
	      "                    trading day and whether its market is open\n"
	      "  stats             counters and latency histograms\n"
	      "  step-down [NODE]  a primary sequencer hands over to another member (NODE:\n"
	      "                    its node_id or peers address; default: the standby\n"
	      "                    furthest along) and waits until it has\n"
	      "  end-of-day        the primary sequencer closes the market: END_OF_DAY on\n"
	      "                    the tape (resting orders canceled, new ones rejected)\n"
	      "  start-of-day      the primary sequencer opens the next trading day: its\n"
	      "                    START_OF_DAY begins a new tape session at sequence 1\n",
	      out);
	ctl_admin_usage(out);
	fputs("  snapshot          a matcher writes a snapshot now\n"
	      "  loglevel LEVEL    err, warning, notice, info or debug\n"
	      "  reload            re-read what can change at run time (as SIGHUP)\n"
	      "\n"
	      "Options:\n"
	      "  -s, --socket PATH   the daemon's control socket (default $LOCKSTEP_CTL)\n"
	      "  -n, --node NAME     the socket of systemd unit lockstep-ROLE@NAME:\n"
	      "                      " RUN_DIR "/NAME/NAME.ctl\n"
	      "  -j, --json          print JSON (one object), errors included\n"
	      "  -p, --prometheus    stats in Prometheus' text format\n"
	      "  -t, --timeout MS    give up after MS milliseconds (default 2000)\n"
	      "      --cancel        kill-switch: cancel the open orders too\n"
	      "      --lift          kill-switch: lift it\n"
	      "  -h, --help          this text\n"
	      "\n",
	      out);
	keygen_usage(out);
	fputs("\n", out);
	passwd_usage(out);
	fputs("\n"
	      "Exit status: 0 success, 1 the daemon answered with an error (keygen,\n"
	      "passwd: it refused or failed), 2 usage, 3 no daemon answered on the socket.\n",
	      out);
}

/* Prints s as a JSON string. */
static void json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* " pools: orders 12/1048576 (0.0%), ...": how full each pool is. */
static void print_pools(const Lockstep__ControlReply *r)
{
	for (size_t i = 0; i < r->n_pools; i++) {
		const Lockstep__Pool *p = r->pools[i];

		printf("%s%s %llu/%llu (%.1f%%)", i ? ", " : " pools: ", p->name,
		       (unsigned long long)p->used, (unsigned long long)p->size,
		       p->size ? 100.0 * (double)p->used / (double)p->size : 0.0);
	}
}

static void print_status(const Lockstep__ControlReply *r, int json)
{
	if (json) {
		printf("{\"name\": ");
		json_str(r->name);
		printf(", \"role\": ");
		json_str(r->role);
		printf(", \"state\": ");
		json_str(r->state);
		printf(", \"term\": %llu, \"seq\": %llu, \"commit\": %llu",
		       (unsigned long long)r->term, (unsigned long long)r->seq,
		       (unsigned long long)r->commit);
		if (strcmp(r->role, "matcher") == 0)
			printf(", \"hash\": \"%016llx\", \"partition\": %u, \"snapshot_seq\": %llu",
			       (unsigned long long)r->hash, r->partition,
			       (unsigned long long)r->snapshot_seq);
		if (r->ouch && r->ouch[0]) {
			printf(", \"ouch\": ");
			json_str(r->ouch);
		}
		if (r->io && r->io[0]) {
			printf(", \"io\": ");
			json_str(r->io);
		}
		if (r->auth && r->auth[0]) {
			printf(", \"auth\": ");
			json_str(r->auth);
		}
		if (r->disk && r->disk[0]) {
			printf(", \"disk\": ");
			json_str(r->disk);
		}
		if (r->day)
			printf(", \"day\": %u", r->day);
		if (r->market && r->market[0]) {
			printf(", \"market\": ");
			json_str(r->market);
		}
		if (r->feed && r->feed[0]) {
			printf(", \"feed\": ");
			json_str(r->feed);
		}
		for (size_t i = 0; i < r->n_pools; i++) {
			printf("%s", i ? ", " : ", \"pools\": {");
			json_str(r->pools[i]->name);
			printf(": {\"used\": %llu, \"size\": %llu}",
			       (unsigned long long)r->pools[i]->used,
			       (unsigned long long)r->pools[i]->size);
		}
		if (r->n_pools)
			putchar('}');
		if (r->message && r->message[0]) {
			printf(", \"message\": ");
			json_str(r->message);
		}
		printf("}\n");
		return;
	}
	printf("%s: %s %s term=%llu seq=%llu commit=%llu", r->name, r->role, r->state,
	       (unsigned long long)r->term, (unsigned long long)r->seq,
	       (unsigned long long)r->commit);
	if (strcmp(r->role, "matcher") == 0)
		printf(" partition=%u hash=%016llx snapshot=%llu", r->partition,
		       (unsigned long long)r->hash, (unsigned long long)r->snapshot_seq);
	if (r->ouch && r->ouch[0])
		printf(" ouch=%s", r->ouch);
	if (r->io && r->io[0])
		printf(" io=%s", r->io);
	if (r->auth && r->auth[0])
		printf(" auth=%s", r->auth);
	if (r->disk && r->disk[0])
		printf(" disk=%s", r->disk);
	if (r->day)
		printf(" day=%u", r->day);
	if (r->market && r->market[0])
		printf(" market=%s", r->market);
	if (r->feed && r->feed[0])
		printf(" feed=\"%s\"", r->feed);
	print_pools(r);
	if (r->message && r->message[0])
		printf(" (%s)", r->message);
	putchar('\n');
}

/* Prints s as a Prometheus label value (backslash, quote, newline escaped). */
static void prom_label(const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
	}
}

/* Metric names are [a-zA-Z_:][a-zA-Z0-9_:]*: anything else becomes '_'. */
static void prom_name(const char *prefix, const char *name, const char *suffix)
{
	fputs(prefix, stdout);
	for (; name && *name; name++) {
		char c = *name;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '_' || c == ':';

		putchar(ok ? c : '_');
	}
	fputs(suffix, stdout);
}

static void prom_labels(const Lockstep__ControlReply *r, const char *extra_name, const char *extra)
{
	fputs("{node=\"", stdout);
	prom_label(r->name);
	fputs("\",role=\"", stdout);
	prom_label(r->role);
	putchar('"');
	if (extra_name) {
		printf(",%s=\"", extra_name);
		prom_label(extra);
		putchar('"');
	}
	putchar('}');
}

/* One metric family: HELP, TYPE, one sample. */
static void prom_family(const Lockstep__ControlReply *r, const char *name, const char *suffix,
			const char *type, const char *help, uint64_t value)
{
	fputs("# HELP ", stdout);
	prom_name("lockstep_", name, suffix);
	printf(" %s\n# TYPE ", help);
	prom_name("lockstep_", name, suffix);
	printf(" %s\n", type);
	prom_name("lockstep_", name, suffix);
	prom_labels(r, NULL, NULL);
	printf(" %llu\n", (unsigned long long)value);
}

/* Prometheus' text exposition format 0.0.4: every family with its HELP and
 * TYPE; counters end in _total, latencies are summaries in seconds. */
static void print_prometheus(const Lockstep__ControlReply *r)
{
	char help[160];

	fputs("# HELP lockstep_node_info The node's name, role and state (always 1).\n"
	      "# TYPE lockstep_node_info gauge\nlockstep_node_info",
	      stdout);
	prom_labels(r, "state", r->state);
	fputs(" 1\n", stdout);
	prom_family(r, "term", "", "gauge", "The highest term the node has seen.", r->term);
	prom_family(r, "seq", "", "gauge",
		    "Tape position: last sequenced (sequencer), applied (matcher), seen (gateway).",
		    r->seq);
	prom_family(r, "commit", "", "gauge", "The commit position the node knows.", r->commit);
	for (size_t i = 0; i < r->n_counters; i++) {
		const Lockstep__Counter *c = r->counters[i];
		int gauge = c->gauge;

		snprintf(help, sizeof(help), "%s %s of a lockstep %s.", gauge ? "Gauge" : "Counter",
			 c->name, r->role);
		prom_family(r, c->name, gauge ? "" : "_total", gauge ? "gauge" : "counter", help,
			    c->value);
	}
	for (size_t i = 0; i < r->n_histograms; i++) {
		const Lockstep__Histogram *h = r->histograms[i];
		static const char *const q[] = { "0.5", "0.9", "0.99", "0.999", "0.9999" };
		uint64_t v[] = { h->p50, h->p90, h->p99, h->p999, h->p9999 };

		fputs("# HELP ", stdout);
		prom_name("lockstep_", h->name, "_seconds");
		printf(" Latency %s of a lockstep %s (quantiles since start).\n# TYPE ", h->name,
		       r->role);
		prom_name("lockstep_", h->name, "_seconds");
		fputs(" summary\n", stdout);
		for (int k = 0; k < 5; k++) {
			prom_name("lockstep_", h->name, "_seconds");
			prom_labels(r, "quantile", q[k]);
			printf(" %.9f\n", (double)v[k] / 1e9);
		}
		prom_name("lockstep_", h->name, "_seconds_count");
		prom_labels(r, NULL, NULL);
		printf(" %llu\n", (unsigned long long)h->count);
		fputs("# HELP ", stdout);
		prom_name("lockstep_", h->name, "_seconds_max");
		printf(" Largest %s of a lockstep %s since start.\n# TYPE ", h->name, r->role);
		prom_name("lockstep_", h->name, "_seconds_max");
		fputs(" gauge\n", stdout);
		prom_name("lockstep_", h->name, "_seconds_max");
		prom_labels(r, NULL, NULL);
		printf(" %.9f\n", (double)h->max / 1e9);
	}
}

static void print_stats(const Lockstep__ControlReply *r, int json, int prom)
{
	if (prom) {
		print_prometheus(r);
		return;
	}
	if (json) {
		printf("{\"name\": ");
		json_str(r->name);
		printf(", \"role\": ");
		json_str(r->role);
		printf(", \"counters\": {");
		for (size_t i = 0; i < r->n_counters; i++) {
			printf("%s", i ? ", " : "");
			json_str(r->counters[i]->name);
			printf(": %llu", (unsigned long long)r->counters[i]->value);
		}
		printf("}, \"histograms\": {");
		for (size_t i = 0; i < r->n_histograms; i++) {
			const Lockstep__Histogram *h = r->histograms[i];

			printf("%s", i ? ", " : "");
			json_str(h->name);
			printf(": {\"count\": %llu, \"p50\": %llu, \"p90\": %llu, \"p99\": %llu, "
			       "\"p99.9\": %llu, \"p99.99\": %llu, \"max\": %llu}",
			       (unsigned long long)h->count, (unsigned long long)h->p50,
			       (unsigned long long)h->p90, (unsigned long long)h->p99,
			       (unsigned long long)h->p999, (unsigned long long)h->p9999,
			       (unsigned long long)h->max);
		}
		printf("}}\n");
		return;
	}
	for (size_t i = 0; i < r->n_counters; i++)
		printf("%-32s %llu\n", r->counters[i]->name, (unsigned long long)r->counters[i]->value);
	for (size_t i = 0; i < r->n_histograms; i++) {
		const Lockstep__Histogram *h = r->histograms[i];

		printf("%-32s n=%llu p50=%.1fus p90=%.1fus p99=%.1fus p99.9=%.1fus max=%.1fus\n",
		       h->name, (unsigned long long)h->count, h->p50 / 1e3, h->p90 / 1e3,
		       h->p99 / 1e3, h->p999 / 1e3, h->max / 1e3);
	}
}

/* After a step-down was accepted: polls STATUS until this node is no
 * longer primary (0) or the timeout passes (1: the hand-over was
 * abandoned or is slow; the node goes on as primary). */
static int wait_step_down(const char *sock, const Lockstep__ControlReply *asked, int json,
			  int timeout_ms)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	struct timespec t0, t;
	double ms = 0;
	int done = 0;

	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STATUS;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!done && ms < timeout_ms) {
		Lockstep__ControlReply *st = NULL;
		struct timespec pause = { 0, 5000000 };

		if (ctl_call(sock, &req, &st, timeout_ms) == 0) {
			if (strcmp(st->state, "primary") != 0 || st->term > asked->term) {
				done = 1;
				clock_gettime(CLOCK_MONOTONIC, &t);
				ms = (double)(t.tv_sec - t0.tv_sec) * 1e3 +
				     (double)(t.tv_nsec - t0.tv_nsec) / 1e6;
				if (json) {
					printf("{\"ok\": true, \"name\": ");
					json_str(st->name);
					printf(", \"state\": ");
					json_str(st->state);
					printf(", \"term\": %llu, \"ms\": %.1f}\n",
					       (unsigned long long)st->term, ms);
				} else
					printf("%s: %s; now %s in term %llu (%.1f ms)\n", st->name,
					       asked->message, st->state,
					       (unsigned long long)st->term, ms);
			}
			lockstep__control_reply__free_unpacked(st, NULL);
		}
		if (!done)
			nanosleep(&pause, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) / 1e6;
	}
	if (done)
		return 0;
	fprintf(stderr, "lockstepctl: %s: %s, but still primary after %d ms (a hand-over "
			"not taken within election_max is abandoned)\n",
		asked->name, asked->message, timeout_ms);
	if (json)
		printf("{\"ok\": false, \"error\": %d, \"message\": \"still primary\"}\n",
		       -ETIMEDOUT);
	return 1;
}

struct ctl_args {
	const char *sock;
	int json, prom, timeout;
	int admin_flags; /* kill-switch's --cancel, --lift: CTL_ADMIN_* */
};

/* Options into a; returns -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, struct ctl_args *a)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "node", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "cancel", no_argument, NULL, 'C' },
		{ "lift", no_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	static char node_sock[256];
	char *end;
	int c, n;

	while ((c = getopt_long(argc, argv, "s:n:jpt:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			a->sock = optarg;
			break;
		case 'n':
			n = snprintf(node_sock, sizeof(node_sock), RUN_DIR "/%s/%s.ctl", optarg, optarg);
			if (!optarg[0] || strchr(optarg, '/') || n < 0 || (size_t)n >= sizeof(node_sock)) {
				fprintf(stderr, "lockstepctl: --node '%s': not a node name\n", optarg);
				return EXIT_USAGE;
			}
			a->sock = node_sock;
			break;
		case 'j':
			a->json = 1;
			break;
		case 'p':
			a->prom = 1;
			break;
		case 't':
			errno = 0;
			a->timeout = (int)strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || a->timeout <= 0) {
				fprintf(stderr, "lockstepctl: --timeout '%s': milliseconds, > 0\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'C':
			a->admin_flags |= CTL_ADMIN_CANCEL;
			break;
		case 'L':
			a->admin_flags |= CTL_ADMIN_LIFT;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	return -1;
}

/* The request the command line names (argv[optind] and its argument);
 * -1 after saying why not. */
static int parse_command(int argc, char **argv, const struct ctl_args *a,
			 Lockstep__ControlRequest *req)
{
	static struct ctl_admin admin;
	static const struct {
		const char *name;
		Lockstep__ControlRequest__Op op;
		int arg, arg_max;
	} cmds[] = {
		{ "status", LOCKSTEP__CONTROL_REQUEST__OP__STATUS, 0, 0 },
		{ "stats", LOCKSTEP__CONTROL_REQUEST__OP__STATS, 0, 0 },
		{ "step-down", LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN, 0, 1 },
		{ "snapshot", LOCKSTEP__CONTROL_REQUEST__OP__SNAPSHOT, 0, 0 },
		{ "loglevel", LOCKSTEP__CONTROL_REQUEST__OP__LOGLEVEL, 1, 1 },
		{ "reload", LOCKSTEP__CONTROL_REQUEST__OP__RELOAD, 0, 0 },
		{ "end-of-day", LOCKSTEP__CONTROL_REQUEST__OP__END_OF_DAY, 0, 0 },
		{ "start-of-day", LOCKSTEP__CONTROL_REQUEST__OP__START_OF_DAY, 0, 0 },
	};
	int found = -1, nargs = argc - optind - 1;

	if (ctl_admin_is(argv[optind])) {
		if (ctl_admin_parse(nargs + 1, argv + optind, a->admin_flags, &admin) < 0)
			return -1;
		req->op = LOCKSTEP__CONTROL_REQUEST__OP__ADMIN;
		req->admin = &admin.admin;
		return 0;
	}
	if (a->admin_flags) {
		fprintf(stderr, "lockstepctl: --cancel and --lift are kill-switch's\n");
		return -1;
	}

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[optind], cmds[i].name) == 0)
			found = (int)i;
	if (found < 0 || nargs < cmds[found].arg || nargs > cmds[found].arg_max) {
		fprintf(stderr, "lockstepctl: %s '%s' (see --help)\n",
			found < 0 ? "unknown command" : "wrong arguments for", argv[optind]);
		return -1;
	}
	req->op = cmds[found].op;
	if (nargs > 0)
		req->arg = argv[optind + 1];
	return 0;
}

/* A failure, on stderr and (with --json) as {"ok": false, ...} with one
 * more string field. */
static void print_failure(int json, int err, const char *why, const char *key, const char *val)
{
	fprintf(stderr, "lockstepctl: %s: %s\n", val, why);
	if (!json)
		return;
	printf("{\"ok\": false, \"error\": %d, \"message\": ", err);
	json_str(why);
	printf(", \"%s\": ", key);
	json_str(val);
	printf("}\n");
}

/* A successful reply to anything but STEP_DOWN. */
static void print_reply(const Lockstep__ControlRequest *req, const Lockstep__ControlReply *reply,
			const struct ctl_args *a)
{
	if (req->op == LOCKSTEP__CONTROL_REQUEST__OP__STATS) {
		print_stats(reply, a->json, a->prom);
	} else if (req->op == LOCKSTEP__CONTROL_REQUEST__OP__STATUS) {
		print_status(reply, a->json);
	} else if (a->json) {
		printf("{\"ok\": true, \"message\": ");
		json_str(reply->message);
		printf(", \"name\": ");
		json_str(reply->name);
		printf("}\n");
	} else {
		printf("%s\n", reply->message && reply->message[0] ? reply->message : "ok");
	}
}

int main(int argc, char **argv)
{
	struct ctl_args a = { .sock = getenv("LOCKSTEP_CTL"), .timeout = 2000 };
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *reply = NULL;
	int err, rc;

	if (argc > 1 && strcmp(argv[1], "keygen") == 0)
		return keygen_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "passwd") == 0)
		return passwd_main(argc - 1, argv + 1);
	if ((rc = parse_options(argc, argv, &a)) >= 0)
		return rc;
	if (optind < argc && strcmp(argv[optind], "keygen") == 0) {
		fprintf(stderr, "lockstepctl: keygen takes no other option before it: "
				"lockstepctl keygen [--add | --send ID | --remove ID] FILE\n");
		return EXIT_USAGE;
	}
	if (optind >= argc || !a.sock) {
		fprintf(stderr, "lockstepctl: %s\n",
			!a.sock ? "no socket: give --socket PATH or --node NAME"
				: "no command (see --help)");
		return EXIT_USAGE;
	}
	if (parse_command(argc, argv, &a, &req) < 0)
		return EXIT_USAGE;
	err = ctl_call(a.sock, &req, &reply, a.timeout);
	if (err < 0) {
		print_failure(a.json, err, strerror(-err), "socket", a.sock);
		return EXIT_CONNECT;
	}
	if (reply->error) {
		print_failure(a.json, reply->error,
			      reply->message && reply->message[0] ? reply->message
								  : strerror(-reply->error),
			      "name", reply->name);
		rc = 1;
	} else if (req.op == LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN) {
		rc = wait_step_down(a.sock, reply, a.json, a.timeout);
	} else {
		print_reply(&req, reply, &a);
		rc = 0;
	}
	lockstep__control_reply__free_unpacked(reply, NULL);
	return rc;
}
