/* lockstep-bench: what a load run lost: the machine's UDP receive-buffer
 * drops and send-buffer errors (/proc/net/snmp's Udp line) and, for each
 * daemon of --cluster, the STATS counters (asked over its control socket)
 * whose names end in _dropped, _send_errors or rcvbuf_errors; and, from
 * the same replies, where a gateway's commands spent their time (its stage
 * clock: stage_<name>_count and stage_<name>_ns, a mean over the run).
 * Sampled before the first order and after the last answer, so the warm-up
 * counts too and no control call falls inside the measurement. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "ctl.h"

#define LOSS_COUNTERS 16 /* per daemon; the daemons have at most 7 */
#define LOSS_CTL_TIMEOUT_MS 1000

struct loss_counter {
	char name[48];
	uint64_t v[2]; /* at the start, at the end */
};

#define STAGES 4 /* a gateway's stage clock: disk, tape, match, answer */

/* The loss counters of procs[i] (one of --cluster), and its stage clock's
 * (count and ns of each stage, in the order STATS lists them). */
struct daemon_loss {
	int answered[2]; /* its STATS came at the start, at the end */
	unsigned n;
	struct loss_counter c[LOSS_COUNTERS];
	unsigned n_stages;
	struct stage {
		char name[16];
		uint64_t count[2], ns[2];
	} st[STAGES];
};

static struct daemon_loss dloss[MAX_PROCS];
static struct net_udp_stats udp[2];
static int udp_read[2];

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_loss_counter(const Lockstep__Counter *c)
{
	return !c->gauge && c->name && (ends_with(c->name, "_dropped") ||
					ends_with(c->name, "_send_errors") ||
					ends_with(c->name, "rcvbuf_errors"));
}

/* Keeps value v of counter `name` as its start (end 0) or end figure. */
static void loss_record(struct daemon_loss *d, const char *name, uint64_t v, int end)
{
	unsigned i;

	for (i = 0; i < d->n && strcmp(d->c[i].name, name) != 0; i++)
		;
	if (i == d->n) {
		if (d->n == LOSS_COUNTERS)
			return;
		snprintf(d->c[d->n++].name, sizeof(d->c[0].name), "%s", name);
	}
	d->c[i].v[end] = v;
}

/* Keeps a stage clock counter (stage_NAME_count, stage_NAME_ns). */
static void stage_record(struct daemon_loss *d, const char *name, uint64_t v, int end)
{
	const char *u = strrchr(name, '_');
	size_t len;
	unsigned i;

	if (strncmp(name, "stage_", 6) != 0 || !u || (strcmp(u, "_count") && strcmp(u, "_ns")))
		return;
	len = (size_t)(u - name - 6);
	if (len == 0 || len >= sizeof(d->st[0].name))
		return;
	for (i = 0; i < d->n_stages && (strlen(d->st[i].name) != len ||
					 strncmp(d->st[i].name, name + 6, len)); i++)
		;
	if (i == d->n_stages) {
		if (d->n_stages == STAGES)
			return;
		memcpy(d->st[i].name, name + 6, len);
		d->st[d->n_stages++].name[len] = 0;
	}
	if (strcmp(u, "_count") == 0)
		d->st[i].count[end] = v;
	else
		d->st[i].ns[end] = v;
}

/* Asks procs[k] for its STATS. */
static void daemon_sample(unsigned k, int end)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *r = NULL;
	struct daemon_loss *d = &dloss[k];
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s/%s.ctl", opt.cluster_dir, procs[k].name, procs[k].name);
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STATS;
	if (ctl_call(path, &req, &r, LOSS_CTL_TIMEOUT_MS) < 0)
		return;
	if (r->error == 0) {
		for (size_t i = 0; i < r->n_counters; i++)
			if (is_loss_counter(r->counters[i]))
				loss_record(d, r->counters[i]->name, r->counters[i]->value, end);
			else if (!r->counters[i]->gauge && r->counters[i]->name)
				stage_record(d, r->counters[i]->name, r->counters[i]->value, end);
		d->answered[end] = 1;
	}
	lockstep__control_reply__free_unpacked(r, NULL);
}

void losses_sample(int end)
{
	udp_read[end] = net_udp_stats_read(&udp[end]) == 0;
	for (unsigned k = 0; opt.cluster_dir && k < n_procs; k++)
		if (procs[k].in_cluster && !procs[k].gone)
			daemon_sample(k, end);
}

/* A counter's growth over the run (a daemon that restarted began again
 * from 0). */
static uint64_t loss_delta(const struct loss_counter *c)
{
	return c->v[1] >= c->v[0] ? c->v[1] - c->v[0] : c->v[1];
}

static int daemon_answered(unsigned k)
{
	return dloss[k].answered[0] && dloss[k].answered[1];
}

/* A stage's mean over the run in ns, or -1 with nothing counted. */
static double stage_mean(const struct stage *st)
{
	uint64_t n = st->count[1] - st->count[0];

	if (st->count[1] < st->count[0] || st->ns[1] < st->ns[0] || n == 0)
		return -1; /* restarted, or idle */
	return (double)(st->ns[1] - st->ns[0]) / (double)n;
}

/* The "stages:" line: each gateway's stage means (none: no line). */
static void stages_text(FILE *f)
{
	int any = 0;

	for (unsigned k = 0; k < n_procs; k++) {
		const struct daemon_loss *d = &dloss[k];

		if (!procs[k].in_cluster || !daemon_answered(k) || !d->n_stages)
			continue;
		fprintf(f, "%s %s", any++ ? ";" : "stages:     ", procs[k].name);
		for (unsigned i = 0; i < d->n_stages; i++) {
			double m = stage_mean(&d->st[i]);

			if (m >= 0)
				fprintf(f, "%s %s %.2f", i ? "," : "", d->st[i].name, m / 1e6);
			else
				fprintf(f, "%s %s -", i ? "," : "", d->st[i].name);
		}
	}
	if (any)
		fprintf(f, " (ms, each stage's mean over the run: the gateway's stage clock)\n");
}

void losses_text(FILE *f)
{
	if (udp_read[0] && udp_read[1]) {
		uint64_t rcv = udp[1].rcvbuf_errors - udp[0].rcvbuf_errors;
		uint64_t in = udp[1].in_errors - udp[0].in_errors;

		fprintf(f, "kernel udp:  %llu receive-buffer drops, %llu send-buffer errors over the run",
			(unsigned long long)rcv,
			(unsigned long long)(udp[1].sndbuf_errors - udp[0].sndbuf_errors));
		if (in > rcv)
			fprintf(f, ", %llu other receive errors", (unsigned long long)(in - rcv));
		fprintf(f, " (whole machine)\n");
	} else
		fprintf(f, "kernel udp:  /proc/net/snmp unreadable\n");
	if (!opt.cluster_dir)
		return;
	fprintf(f, "losses:     ");
	for (unsigned k = 0, first = 1; k < n_procs; k++) {
		int any = 0;

		if (!procs[k].in_cluster)
			continue;
		fprintf(f, "%s %s", first ? "" : ";", procs[k].name);
		first = 0;
		if (!daemon_answered(k)) {
			fprintf(f, " no answer");
			continue;
		}
		for (unsigned i = 0; i < dloss[k].n; i++)
			if (loss_delta(&dloss[k].c[i]))
				fprintf(f, "%s %s %llu", any++ ? "," : "", dloss[k].c[i].name,
					(unsigned long long)loss_delta(&dloss[k].c[i]));
		if (!any)
			fprintf(f, " none");
	}
	fprintf(f, " (over the run)\n");
	stages_text(f);
}

void losses_json(FILE *f)
{
	unsigned first = 1;

	if (udp_read[0] && udp_read[1])
		fprintf(f,
			"\"kernel_udp\": {\"rcvbuf_errors\": %llu, \"sndbuf_errors\": %llu, "
			"\"in_errors\": %llu}",
			(unsigned long long)(udp[1].rcvbuf_errors - udp[0].rcvbuf_errors),
			(unsigned long long)(udp[1].sndbuf_errors - udp[0].sndbuf_errors),
			(unsigned long long)(udp[1].in_errors - udp[0].in_errors));
	else
		fprintf(f, "\"kernel_udp\": null");
	fprintf(f, ",\n \"daemon_losses\": {");
	for (unsigned k = 0; k < n_procs; k++) {
		if (!procs[k].in_cluster)
			continue;
		fprintf(f, "%s\"%s\": ", first ? "" : ", ", procs[k].name);
		first = 0;
		if (!daemon_answered(k)) {
			fprintf(f, "null");
			continue;
		}
		fputc('{', f);
		for (unsigned i = 0; i < dloss[k].n; i++)
			fprintf(f, "%s\"%s\": %llu", i ? ", " : "", dloss[k].c[i].name,
				(unsigned long long)loss_delta(&dloss[k].c[i]));
		fputc('}', f);
	}
	fputc('}', f);
	fprintf(f, ",\n \"gateway_stages_ns\": {");
	first = 1;
	for (unsigned k = 0; k < n_procs; k++) {
		const struct daemon_loss *d = &dloss[k];

		if (!procs[k].in_cluster || !daemon_answered(k) || !d->n_stages)
			continue;
		fprintf(f, "%s\"%s\": {", first ? "" : ", ", procs[k].name);
		first = 0;
		for (unsigned i = 0; i < d->n_stages; i++) {
			double m = stage_mean(&d->st[i]);

			fprintf(f, "%s\"%s\": ", i ? ", " : "", d->st[i].name);
			if (m >= 0)
				fprintf(f, "%.0f", m);
			else
				fprintf(f, "null");
		}
		fputc('}', f);
	}
	fputc('}', f);
}
