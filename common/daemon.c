#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"

const char *const daemon_log_level_names[] = { "err", "warning", "notice", "info", "debug", NULL };

/* What daemon_start() loaded, for daemon_reload_config(): argv and the
 * daemon's spec live as long as main(). */
static const struct config_spec *loaded_spec;
static const struct daemon_args *loaded_args;

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

int daemon_start(int argc, char **argv, const char *prog, const char *about,
		 const struct config_spec *spec, void *cfg, struct node_config *node,
		 struct daemon_args *args)
{
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
			usage(stdout, prog, about, spec);
			return 1;
		case 'V':
			printf("%s (lockstep) %s\n", prog, LOCKSTEP_VERSION);
			return 1;
		default:
			usage(stderr, prog, about, spec);
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
		snprintf(node->control, sizeof(node->control), "%.60s/%.40s.ctl", node->state_dir,
			 node->name);
	if (args->check_config) {
		printf("%s: configuration OK\n", args->config ? args->config : "(defaults)");
		return 1;
	}
	log_init(node->name, LOG_LVL_ERR + node->log_level);
	log_set_timestamps(node->log_timestamps);
	loaded_spec = spec;
	loaded_args = args;
	return 0;
}

int daemon_reload_config(void *cfg, struct node_config *node, char *msg, size_t msglen)
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
	log_set_level(LOG_LVL_ERR + node->log_level);
	log_set_timestamps(node->log_timestamps);
	snprintf(msg, msglen, "log_level %s", daemon_log_level_names[node->log_level]);
	return 0;
}

int daemon_ctl_runtime(const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply,
		       daemon_reload_fn reload, void *ctx)
{
	static char msg[600]; /* packed by the control server after the handler */
	int level;

	switch (req->op) {
	case LOCKSTEP__CONTROL_REQUEST__OP__LOGLEVEL:
		level = log_level_parse(req->arg);
		if (level < 0) {
			reply->error = -EINVAL;
			snprintf(msg, sizeof(msg), "unknown log level '%s' (err, warning, notice, "
				 "info or debug)", req->arg ? req->arg : "");
		} else {
			log_set_level(level);
			snprintf(msg, sizeof(msg), "log level %s",
				 daemon_log_level_names[level - LOG_LVL_ERR]);
			log_notice("control: %s", msg);
		}
		break;
	case LOCKSTEP__CONTROL_REQUEST__OP__RELOAD:
		reply->error = reload(ctx, msg, sizeof(msg));
		if (reply->error < 0)
			log_err("control: reload failed: %s", msg);
		else
			log_notice("control: reloaded: %s", msg);
		break;
	default:
		return 0;
	}
	reply->message = msg;
	return 1;
}

static void on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon_signals *s = w->data;

	(void)revents;
	if (s->stopping) {
		log_warn("second signal %d: exiting at once", w->signum);
		_exit(1);
	}
	s->stopping = 1;
	log_notice("signal %d: stopping", w->signum);
	if (s->on_stop)
		s->on_stop(loop, s->ctx);
	else
		ev_break(loop, EVBREAK_ALL);
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon_signals *s = w->data;

	(void)revents;
	log_notice("SIGHUP: reloading");
	if (s->on_reload)
		s->on_reload(loop, s->ctx);
}

void daemon_signals_start(struct daemon_signals *s, struct ev_loop *loop)
{
	signal(SIGPIPE, SIG_IGN);
	ev_signal_init(&s->sigint, on_stop_signal, SIGINT);
	ev_signal_init(&s->sigterm, on_stop_signal, SIGTERM);
	ev_signal_init(&s->sighup, on_hup, SIGHUP);
	s->sigint.data = s->sigterm.data = s->sighup.data = s;
	s->stopping = 0;
	ev_signal_start(loop, &s->sigint);
	ev_signal_start(loop, &s->sigterm);
	ev_signal_start(loop, &s->sighup);
	/* Signal watchers must not keep the loop alive on their own. */
	ev_unref(loop);
	ev_unref(loop);
	ev_unref(loop);
}

void daemon_signals_stop(struct daemon_signals *s, struct ev_loop *loop)
{
	ev_ref(loop);
	ev_ref(loop);
	ev_ref(loop);
	ev_signal_stop(loop, &s->sigint);
	ev_signal_stop(loop, &s->sigterm);
	ev_signal_stop(loop, &s->sighup);
}
