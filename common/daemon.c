/* The daemon skeleton (daemon.h): command line and config, the control
 * socket's common operations, signals, notifications, and the run. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "daemon_wait.h"
#include "log.h"
#include "notify.h"

const char *const daemon_log_level_names[] = { "err", "warning", "notice", "info", "debug", NULL };

struct daemon_args {
	const char *config; /* --config FILE */
	const char *overrides[DAEMON_MAX_OVERRIDES]; /* --set section.key=value */
	size_t n_overrides;
	int check_config; /* --check-config: load, report, exit */
};

/* A node: the daemon's object and its control socket. */
struct daemon_node {
	const struct daemon_ops *ops;
	struct ev_loop *loop;
	void *self;
	struct ctl_server *ctl;
	void *fresh; /* scratch config for RELOAD, ops->cfg_size bytes */
	struct counters counters; /* the last STATS reply's storage */
	int stopped;
};

/* What daemon_main() loaded, for reload_config(): argv and the
 * daemon's spec live as long as main(). */
static const struct config_spec *loaded_spec;
static const struct daemon_args *loaded_args;

static struct node_config *node_of(const struct daemon_ops *ops, void *cfg)
{
	return (struct node_config *)((char *)cfg + ops->node_offset);
}

static void usage(FILE *out, const char *prog, const char *about, const struct config_spec *spec)
{
	fprintf(out,
		"Usage: %s --config FILE [--set SECTION.KEY=VALUE]... [--check-config]\n"
		"\n%s\n\n"
		"Options:\n"
		"  -c, --config FILE     read the configuration from FILE (INI)\n"
		"  -s, --set S.K=V       override one key of the file (repeatable)\n"
		"      --check-config    load the configuration, report errors, exit\n"
		"  -h, --help            this text and every configuration key\n"
		"  -V, --version         print the version\n"
		"\nConfiguration keys (section, key, type, default):\n",
		prog, about);
	config_print_keys(spec, out);
}

/* Parses the command line and loads the config into cfg. Returns 0 to run,
 * 1 when the program should exit 0 now (--help, --version, --check-config
 * passed), or -1 after printing the error. */
static int load_config(int argc, char **argv, const struct daemon_ops *ops, void *cfg,
		       struct daemon_args *args)
{
	const char *prog = ops->prog;
	const struct config_spec *spec = ops->spec;
	struct node_config *node = node_of(ops, cfg);
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "set", required_argument, NULL, 's' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	char err[512];
	int c;

	memset(args, 0, sizeof(*args));
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:s:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			args->config = optarg;
			break;
		case 's':
			if (args->n_overrides == DAEMON_MAX_OVERRIDES) {
				fprintf(stderr, "%s: too many --set options\n", prog);
				return -1;
			}
			args->overrides[args->n_overrides++] = optarg;
			break;
		case 'C':
			args->check_config = 1;
			break;
		case 'h':
			usage(stdout, prog, ops->about, spec);
			return 1;
		case 'V':
			printf("%s (lockstep) %s\n", prog, LOCKSTEP_VERSION);
			return 1;
		default:
			usage(stderr, prog, ops->about, spec);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind]);
		return -1;
	}
	if (config_load(spec, cfg, args->config, args->overrides, args->n_overrides, err,
			sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return -1;
	}
	if (node->control[0] == '\0')
		snprintf(node->control, sizeof(node->control), "%s/%s.ctl", node->state_dir,
			 node->name);
	if (daemon_wait_check(node, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return -1;
	}
	if (args->check_config) {
		struct auth_keys keys;

		int kr = node->auth == AUTH_MODE_ON ?
				 auth_keyfile_load(node->key_file, &keys, err, sizeof(err)) : 0;

		explicit_bzero(&keys, sizeof(keys));
		if (kr < 0) {
			fprintf(stderr, "%s: [node] key_file: %s\n", prog, err);
			return -1;
		}
		if (ops->check && ops->check(cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s: %s\n", prog, err);
			return -1;
		}
		printf("%s: configuration OK\n", args->config ? args->config : "(defaults)");
		return 1;
	}
	log_init(node->name, LOG_LVL_ERR + node->log_level);
	log_set_timestamps(node->log_timestamps);
	loaded_spec = spec;
	loaded_args = args;
	return 0;
}

/* Re-reads the configuration daemon_main() loaded (the same file, the same
 * --set overrides) into cfg, a scratch config whose [node] part is node, and
 * applies [node] log_level and log_timestamps. 0 with msg saying what, or a
 * negative errno with msg saying why (file:line: key), nothing applied. */
static int reload_config(void *cfg, struct node_config *node, char *msg, size_t msglen)
{
	char err[512];
	int r;

	if (!loaded_spec) {
		snprintf(msg, msglen, "no configuration was loaded");
		return -ENOENT;
	}
	r = config_load(loaded_spec, cfg, loaded_args->config, loaded_args->overrides,
			loaded_args->n_overrides, err, sizeof(err));
	if (r < 0) {
		snprintf(msg, msglen, "%s", err);
		return r;
	}
	if ((r = auth_node_setup(node->auth, node->cluster, node->key_file, err, sizeof(err))) <
	    0) {
		snprintf(msg, msglen, "%s (the keys in use stay)", err);
		return r;
	}
	log_set_level(LOG_LVL_ERR + node->log_level);
	log_set_timestamps(node->log_timestamps);
	snprintf(msg, msglen, "log_level %s, auth %s", daemon_log_level_names[node->log_level],
		 auth_node_describe());
	return 0;
}

/* ---- the control socket ------------------------------------------------- */

/* RELOAD and SIGHUP: [node] log_level and log_timestamps, then the
 * daemon's own run-time keys. */
static int node_reload(struct daemon_node *d, char *msg, size_t msglen)
{
	size_t len;
	int r = reload_config(d->fresh, node_of(d->ops, d->fresh), msg, msglen);

	if (r < 0 || !d->ops->reload)
		return r;
	len = strlen(msg);
	if (len + 2 >= msglen)
		return 0;
	msg[len++] = ',';
	msg[len++] = ' ';
	msg[len] = '\0';
	r = d->ops->reload(d->self, d->fresh, msg + len, msglen - len);
	if (msg[len] == '\0')
		msg[len - 2] = '\0'; /* the daemon had nothing to add */
	return r;
}

static void ctl_loglevel(const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply,
			 char *msg, size_t msglen)
{
	int level = log_level_parse(req->arg);

	if (level < 0) {
		reply->error = -EINVAL;
		snprintf(msg, msglen, "unknown log level '%s' (err, warning, notice, info or debug)",
			 req->arg ? req->arg : "");
		return;
	}
	log_set_level(level);
	snprintf(msg, msglen, "log level %s", daemon_log_level_names[level - LOG_LVL_ERR]);
	log_notice("control: %s", msg);
}

static void on_control(void *ctx, const Lockstep__ControlRequest *req,
		       Lockstep__ControlReply *reply)
{
	static char msg[600]; /* packed by the control server after the handler */
	struct daemon_node *d = ctx;

	reply->role = (char *)d->ops->role;
	d->ops->status(d->self, reply);
	reply->auth = (char *)auth_node_describe();
	switch (req->op) {
	case LOCKSTEP__CONTROL_REQUEST__OP__STATUS:
		return;
	case LOCKSTEP__CONTROL_REQUEST__OP__STATS:
		counters_reset(&d->counters);
		d->ops->stats(d->self, &d->counters);
		auth_node_stats(&d->counters);
		counters_reply(&d->counters, reply);
		return;
	case LOCKSTEP__CONTROL_REQUEST__OP__LOGLEVEL:
		ctl_loglevel(req, reply, msg, sizeof(msg));
		break;
	case LOCKSTEP__CONTROL_REQUEST__OP__RELOAD:
		reply->error = node_reload(d, msg, sizeof(msg));
		if (reply->error < 0)
			log_err("control: reload failed: %s", msg);
		else
			log_notice("control: reloaded: %s", msg);
		break;
	default:
		if (d->ops->control && d->ops->control(d->self, req, reply))
			return;
		reply->error = -EOPNOTSUPP;
		snprintf(msg, sizeof(msg), "operation not supported by the %s", d->ops->role);
		break;
	}
	reply->message = msg;
}

/* ---- a node ------------------------------------------------------------- */

int daemon_node_open(struct daemon_node **out, const struct daemon_ops *ops,
		     struct ev_loop *loop, const void *cfg)
{
	const struct node_config *node = node_of(ops, (void *)cfg);
	const char *path = node->control;
	struct daemon_node *d;
	char err[512];
	int r;

	if ((r = auth_node_setup(node->auth, node->cluster, node->key_file, err, sizeof(err))) <
	    0) {
		log_err("cannot start: %s", err);
		return r;
	}
	if (!(d = calloc(1, sizeof(*d))) || !(d->fresh = calloc(1, ops->cfg_size))) {
		free(d);
		log_err("cannot start: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	d->ops = ops;
	d->loop = loop;
	if ((r = ops->open(&d->self, loop, cfg)) < 0) {
		log_err("cannot start: %s", strerror(-r));
		goto out_free;
	}
	if ((r = ctl_server_open(&d->ctl, loop, path, on_control, d)) < 0) {
		log_err("control socket %s: %s%s", path, strerror(-r),
			r == -ENAMETOOLONG ? " (its file name, after the last '/', must be "
					     "shorter than 100 characters)" : "");
		ops->close(d->self);
		goto out_free;
	}
	*out = d;
	return 0;

out_free:
	free(d->fresh);
	free(d);
	return r;
}

void *daemon_node_self(const struct daemon_node *d)
{
	return d->self;
}

void daemon_node_stop(struct daemon_node *d)
{
	if (d->stopped)
		return;
	d->stopped = 1;
	d->ops->stop(d->self);
	ctl_server_close(d->ctl);
	d->ctl = NULL;
	ev_break(d->loop, EVBREAK_ALL);
}

static int node_exit_status(const struct daemon_node *d)
{
	return d->ops->exit_status ? d->ops->exit_status(d->self) : DAEMON_EXIT_OK;
}

int daemon_node_close(struct daemon_node *d)
{
	int status;

	if (!d)
		return DAEMON_EXIT_OK;
	status = node_exit_status(d);
	/* the loop ran out rather than stopped by a signal: a node that
	 * failed has nothing more to flush */
	if (!d->stopped && status == DAEMON_EXIT_OK)
		daemon_node_stop(d);
	ctl_server_close(d->ctl);
	d->ops->close(d->self);
	free(d->fresh);
	free(d);
	return status;
}

/* ---- signals and the run ------------------------------------------------ */

/* libev signal watchers: SIGINT/SIGTERM stop the node once (a second one
 * exits at once), SIGHUP reloads, SIGPIPE is ignored. */
struct daemon_run {
	struct daemon_node *node;
	ev_idle spin; /* [node] wait = spin */
	struct notifier notifier; /* sd_notify: READY=1, STATUS=, WATCHDOG=1 */
	ev_signal sigint, sigterm, sighup;
	int stopping;
};

static void on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon_run *run = w->data;

	(void)loop;
	(void)revents;
	if (run->stopping) {
		log_warn("second signal %d: exiting at once", w->signum);
		_exit(DAEMON_EXIT_FAILURE);
	}
	run->stopping = 1;
	log_notice("signal %d: stopping", w->signum);
	notifier_stopping(&run->notifier);
	daemon_node_stop(run->node);
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon_run *run = w->data;

	(void)loop;
	(void)revents;
	log_notice("SIGHUP: reloading");
	notifier_reload(&run->notifier);
}

static void signals_start(struct daemon_run *run, struct ev_loop *loop)
{
	signal(SIGPIPE, SIG_IGN);
	ev_signal_init(&run->sigint, on_stop_signal, SIGINT);
	ev_signal_init(&run->sigterm, on_stop_signal, SIGTERM);
	ev_signal_init(&run->sighup, on_hup, SIGHUP);
	run->sigint.data = run->sigterm.data = run->sighup.data = run;
	ev_signal_start(loop, &run->sigint);
	ev_signal_start(loop, &run->sigterm);
	ev_signal_start(loop, &run->sighup);
	/* Signal watchers must not keep the loop alive on their own. */
	ev_unref(loop);
	ev_unref(loop);
	ev_unref(loop);
}

static void signals_stop(struct daemon_run *run, struct ev_loop *loop)
{
	ev_ref(loop);
	ev_ref(loop);
	ev_ref(loop);
	ev_signal_stop(loop, &run->sigint);
	ev_signal_stop(loop, &run->sigterm);
	ev_signal_stop(loop, &run->sighup);
}

static int run_node(const struct daemon_ops *ops, const void *cfg)
{
	static struct daemon_run run;
	struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
	int r, status;

	if (!loop) {
		log_err("cannot initialise the event loop");
		return DAEMON_EXIT_FAILURE;
	}
	if (daemon_wait_apply(node_of(ops, (void *)cfg), loop, &run.spin) < 0 ||
	    daemon_node_open(&run.node, ops, loop, cfg) < 0)
		return DAEMON_EXIT_FAILURE;
	signals_start(&run, loop);
	if ((r = notifier_start(&run.notifier, loop)) < 0)
		log_warn("NOTIFY_SOCKET: %s: not notifying the service manager", strerror(-r));
	ev_run(loop, 0);
	notifier_stopping(&run.notifier);
	notifier_stop(&run.notifier);
	signals_stop(&run, loop);
	daemon_wait_stop(node_of(ops, (void *)cfg), loop, &run.spin);
	status = daemon_node_close(run.node);
	ev_loop_destroy(loop);
	if (status == DAEMON_EXIT_OK)
		log_notice("stopped");
	else
		log_err("stopped: %s (exit status %d)",
			status == DAEMON_EXIT_DIVERGED ? "diverged" : "failed", status);
	return status;
}

int daemon_main(int argc, char **argv, const struct daemon_ops *ops)
{
	static struct daemon_args args;
	void *cfg = calloc(1, ops->cfg_size);
	int r;

	if (!cfg) {
		fprintf(stderr, "%s: %s\n", ops->prog, strerror(ENOMEM));
		return DAEMON_EXIT_FAILURE;
	}
	r = load_config(argc, argv, ops, cfg, &args);
	if (r == 0)
		r = run_node(ops, cfg);
	else
		r = r > 0 ? DAEMON_EXIT_OK : DAEMON_EXIT_USAGE;
	free(cfg);
	return r;
}
