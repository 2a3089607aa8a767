/* What every lockstep daemon shares: the command line (--config, --set,
 * --check-config, --help, --version), the [node] section of its config,
 * signals through the event loop, and its control socket. */
#ifndef LOCKSTEP_DAEMON_H
#define LOCKSTEP_DAEMON_H

#include <ev.h>
#include <stddef.h>

#include "config.h"
#include "ctl.h"

#define DAEMON_MAX_OVERRIDES 64

/* [node] name, state_dir (journals, snapshots), control (socket path),
 * log_level. Embed it in a daemon's config struct and list its keys with
 * DAEMON_NODE_KEYS(struct_type, member). */
struct node_config {
	char name[32];
	char state_dir[256];
	char control[108];
	int log_level;
	int log_timestamps;
};

extern const char *const daemon_log_level_names[]; /* indexes 0..4 = levels 3..7 */

#define DAEMON_NODE_KEYS(type, member) \
	{ "node", "name", CONFIG_STRING, offsetof(type, member.name), \
	  sizeof(((type *)0)->member.name), NULL, 0, 0, NULL, "node name, unique in the cluster" }, \
	{ "node", "state_dir", CONFIG_STRING, offsetof(type, member.state_dir), \
	  sizeof(((type *)0)->member.state_dir), ".", 0, 0, NULL, \
	  "directory for journals and snapshots" }, \
	{ "node", "control", CONFIG_STRING, offsetof(type, member.control), \
	  sizeof(((type *)0)->member.control), "", 0, 0, NULL, \
	  "control socket path (default: <state_dir>/<name>.ctl)" }, \
	{ "node", "log_level", CONFIG_ENUM, offsetof(type, member.log_level), 0, "info", 0, 0, \
	  daemon_log_level_names, "err, warning, notice, info or debug" }, \
	{ "node", "log_timestamps", CONFIG_BOOL, offsetof(type, member.log_timestamps), 0, "no", 0, \
	  0, NULL, "prefix log lines with the time (for log files, not journald)" }

struct daemon_args {
	const char *config; /* --config FILE */
	const char *overrides[DAEMON_MAX_OVERRIDES]; /* --set section.key=value */
	size_t n_overrides;
	int check_config; /* --check-config: load, report, exit */
};

/* Parses the command line and loads the config into cfg. Returns 0 to run,
 * 1 when the program should exit 0 now (--help, --version, --check-config
 * passed), or -1 after printing the error (exit 2 for usage, 1 for config).
 * `about` is the one-paragraph description --help prints. */
int daemon_start(int argc, char **argv, const char *prog, const char *about,
		 const struct config_spec *spec, void *cfg, struct node_config *node,
		 struct daemon_args *args);

/* Re-reads the configuration daemon_start() loaded (the same file, the same
 * --set overrides) into `cfg`, a scratch struct of the daemon's config type
 * whose [node] part is `node`, and applies what every daemon can change at
 * run time: [node] log_level and log_timestamps. Returns 0 with msg saying
 * what it applied, or a negative errno with msg saying why (file:line: key),
 * nothing applied. The daemon then applies its own run-time keys from cfg. */
int daemon_reload_config(void *cfg, struct node_config *node, char *msg, size_t msglen);

/* The control operations every daemon answers alike: LOGLEVEL (req->arg:
 * err, warning, notice, info or debug) and RELOAD (calls `reload`, the
 * daemon's own, which starts with daemon_reload_config(); SIGHUP calls the
 * same one). Fills reply->error and reply->message and returns 1 for those
 * two operations, 0 for any other (reply untouched). */
typedef int (*daemon_reload_fn)(void *ctx, char *msg, size_t msglen);
int daemon_ctl_runtime(const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply,
		       daemon_reload_fn reload, void *ctx);

/* libev signal watchers: SIGINT/SIGTERM call on_stop once (a second one exits
 * at once), SIGHUP calls on_reload (may be NULL), SIGPIPE is ignored. */
struct daemon_signals {
	ev_signal sigint, sigterm, sighup;
	void (*on_stop)(struct ev_loop *loop, void *ctx);
	void (*on_reload)(struct ev_loop *loop, void *ctx);
	void *ctx;
	int stopping;
};

void daemon_signals_start(struct daemon_signals *s, struct ev_loop *loop);
void daemon_signals_stop(struct daemon_signals *s, struct ev_loop *loop);

#endif
