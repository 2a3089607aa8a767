/* lockstepctl: talks to a lockstep daemon's control socket. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

enum { EXIT_USAGE = 2, EXIT_CONNECT = 3 };

static void usage(FILE *out)
{
	fputs("Usage: lockstepctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARG]\n"
	      "\n"
	      "Talks to one lockstep daemon through its control socket.\n"
	      "\n"
	      "Commands:\n"
	      "  status            role, state, term, positions, state hash\n"
	      "  stats             counters and latency histograms\n"
	      "  step-down         a primary sequencer hands over to another node\n"
	      "  snapshot          a matcher writes a snapshot now\n"
	      "  loglevel LEVEL    err, warning, notice, info or debug\n"
	      "  reload            re-read what can change at run time (as SIGHUP)\n"
	      "\n"
	      "Options:\n"
	      "  -s, --socket PATH   the daemon's control socket (default $LOCKSTEP_CTL)\n"
	      "  -j, --json          print JSON (one object)\n"
	      "  -p, --prometheus    stats in Prometheus' text format\n"
	      "  -t, --timeout MS    give up after MS milliseconds (default 2000)\n"
	      "  -h, --help          this text\n"
	      "\n"
	      "Exit status: 0 success, 1 the daemon answered with an error, 2 usage,\n"
	      "3 no daemon answered on the socket.\n",
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
		printf(" partition=%u hash=%016llx", r->partition, (unsigned long long)r->hash);
	if (r->ouch && r->ouch[0])
		printf(" ouch=%s", r->ouch);
	if (r->message && r->message[0])
		printf(" (%s)", r->message);
	putchar('\n');
}

static void print_stats(const Lockstep__ControlReply *r, int json, int prom)
{
	if (prom) {
		for (size_t i = 0; i < r->n_counters; i++)
			printf("lockstep_%s{node=\"%s\",role=\"%s\"} %llu\n", r->counters[i]->name,
			       r->name, r->role, (unsigned long long)r->counters[i]->value);
		for (size_t i = 0; i < r->n_histograms; i++) {
			const Lockstep__Histogram *h = r->histograms[i];
			static const char *const q[] = { "0.5", "0.9", "0.99", "0.999", "0.9999" };
			uint64_t v[] = { h->p50, h->p90, h->p99, h->p999, h->p9999 };

			for (int k = 0; k < 5; k++)
				printf("lockstep_%s_ns{node=\"%s\",quantile=\"%s\"} %llu\n", h->name,
				       r->name, q[k], (unsigned long long)v[k]);
			printf("lockstep_%s_ns_count{node=\"%s\"} %llu\n", h->name, r->name,
			       (unsigned long long)h->count);
		}
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *name;
		Lockstep__ControlRequest__Op op;
		int arg;
	} cmds[] = {
		{ "status", LOCKSTEP__CONTROL_REQUEST__OP__STATUS, 0 },
		{ "stats", LOCKSTEP__CONTROL_REQUEST__OP__STATS, 0 },
		{ "step-down", LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN, 0 },
		{ "snapshot", LOCKSTEP__CONTROL_REQUEST__OP__SNAPSHOT, 0 },
		{ "loglevel", LOCKSTEP__CONTROL_REQUEST__OP__LOGLEVEL, 1 },
		{ "reload", LOCKSTEP__CONTROL_REQUEST__OP__RELOAD, 0 },
	};
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *reply = NULL;
	const char *sock = getenv("LOCKSTEP_CTL");
	int json = 0, prom = 0, timeout = 2000, c, err, found = -1;

	while ((c = getopt_long(argc, argv, "s:jpt:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'p':
			prom = 1;
			break;
		case 't':
			timeout = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc || !sock) {
		fprintf(stderr, "lockstepctl: %s\n",
			!sock ? "no socket: give --socket PATH" : "no command (see --help)");
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[optind], cmds[i].name) == 0)
			found = (int)i;
	if (found < 0 || argc - optind - 1 != cmds[found].arg) {
		fprintf(stderr, "lockstepctl: %s '%s' (see --help)\n",
			found < 0 ? "unknown command" : "wrong arguments for", argv[optind]);
		return EXIT_USAGE;
	}
	req.op = cmds[found].op;
	if (cmds[found].arg)
		req.arg = argv[optind + 1];
	err = ctl_call(sock, &req, &reply, timeout);
	if (err < 0) {
		fprintf(stderr, "lockstepctl: %s: %s\n", sock, strerror(-err));
		return EXIT_CONNECT;
	}
	if (reply->error) {
		fprintf(stderr, "lockstepctl: %s: %s\n", reply->name,
			reply->message && reply->message[0] ? reply->message : strerror(-reply->error));
		lockstep__control_reply__free_unpacked(reply, NULL);
		return 1;
	}
	if (req.op == LOCKSTEP__CONTROL_REQUEST__OP__STATS)
		print_stats(reply, json, prom);
	else if (req.op == LOCKSTEP__CONTROL_REQUEST__OP__STATUS)
		print_status(reply, json);
	else if (json)
		printf("{\"ok\": true, \"message\": \"%s\"}\n", reply->message ? reply->message : "");
	else
		printf("%s\n", reply->message && reply->message[0] ? reply->message : "ok");
	lockstep__control_reply__free_unpacked(reply, NULL);
	return 0;
}
