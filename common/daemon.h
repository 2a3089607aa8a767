/* The daemon skeleton: what every lockstep daemon shares, written once. The
 * command line (--config, --set, --check-config, --help, --version), the
 * [node] section of the config, the event loop, signals through it, the
 * service manager's notifications and watchdog, the control socket with its
 * common operations (STATUS, STATS, LOGLEVEL, RELOAD), and the exit status.
 * A daemon fills a struct daemon_ops and its main() is one call to
 * daemon_main(). Tests and benchmarks run a node on their own loop with
 * daemon_node_open() (the node and its control socket, no signals). */
#ifndef LOCKSTEP_DAEMON_H
#define LOCKSTEP_DAEMON_H

#include <ev.h>
#include <stddef.h>

#include "config.h"
#include "counters.h"
#include "ctl.h"
#include "auth_node.h"
#include "uring.h"

#define DAEMON_MAX_OVERRIDES 64

/* Exit statuses, the same for every daemon (their man pages list them). */
enum daemon_exit {
	DAEMON_EXIT_OK = 0, /* a clean stop, --help, --version, --check-config passed */
	DAEMON_EXIT_FAILURE = 1, /* start-up or run-time failure, or a second stop signal */
	DAEMON_EXIT_USAGE = 2, /* a bad command line or configuration */
	DAEMON_EXIT_DIVERGED = 3, /* a matcher outvoted at a checkpoint */
};

/* [node] name, state_dir (journals, snapshots), control (socket path),
 * log_level. Embed it in a daemon's config struct and list its keys with
 * DAEMON_NODE_KEYS(struct_type, member). `control` may be longer than a
 * Unix socket address holds: the control socket then binds through the
 * directory (common/ctl.h). */
struct node_config {
	char name[32];
	char state_dir[256];
	char control[320];
	int log_level;
	int log_timestamps;
	/* the wait mode (daemon_wait.c): the CPUs the process may run on
	 * ("": any), and how its loop waits for work */
	char cpus[64];
	int wait; /* enum daemon_wait */
	/* 1-99: the process runs under SCHED_FIFO at that priority (its
	 * threads too); 0: the normal scheduler */
	uint64_t rt_priority;
	int io; /* enum uring_io: the datagram path asked for (iopath.h) */
	/* bytes a second each retransmission server of the node answers one
	 * source address (common/srcbudget.h; 0: no limit) */
	uint64_t retrans_budget;
	/* bytes of zeros a synced journal keeps written ahead of its records
	 * (journal_options.ahead; 0: plain appends) */
	uint64_t journal_ahead;
	/* the cluster key (common/auth_node.h) */
	char cluster[32];
	int auth; /* enum auth_mode */
	char key_file[256];
};

enum daemon_wait {
	DAEMON_WAIT_BLOCK, /* sleep in epoll until something happens */
	DAEMON_WAIT_SPIN, /* poll without sleeping: no wake-up latency, a whole core */
};

extern const char *const daemon_log_level_names[]; /* indexes 0..4 = levels 3..7 */
extern const char *const daemon_wait_names[]; /* "block", "spin" */

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
	  0, NULL, "prefix log lines with the time (for log files, not journald)" }, \
	{ "node", "cpus", CONFIG_STRING, offsetof(type, member.cpus), \
	  sizeof(((type *)0)->member.cpus), "", 0, 0, NULL, \
	  "CPUs the process runs on, e.g. 3 or 2,3 or 0-3 (empty: any)" }, \
	{ "node", "wait", CONFIG_ENUM, offsetof(type, member.wait), 0, "block", 0, 0, \
	  daemon_wait_names, \
	  "block (sleep until there is work) or spin (poll without sleeping: lower latency, a " \
	  "whole core; needs cpus, and one core per spinning daemon)" }, \
	{ "node", "rt_priority", CONFIG_UINT, offsetof(type, member.rt_priority), 0, "0", 0, 99, \
	  NULL, \
	  "1-99: the loop and its sync threads run under SCHED_FIFO at this priority (a wake-up " \
	  "preempts normal processes at once; needs root, CAP_SYS_NICE or RLIMIT_RTPRIO, and " \
	  "wait = block); 0: the normal scheduler" }, \
	{ "node", "io", CONFIG_ENUM, offsetof(type, member.io), 0, "mmsg", 0, 0, uring_io_names, \
	  "datagram path: mmsg (recvmmsg/sendmmsg) or uring (io_uring: multishot receive " \
	  "into provided buffers, batched sends; falls back to mmsg where the kernel refuses it)" }, \
	{ "node", "retrans_budget", CONFIG_SIZE, offsetof(type, member.retrans_budget), 0, "64M", \
	  0, 0, NULL, \
	  "bytes a second a retransmission server answers one source address (a burst of as " \
	  "much); requests past it go unanswered, counted as retrans_budget_refused (0: no " \
	  "limit)" }, \
	{ "node", "journal_ahead", CONFIG_SIZE, offsetof(type, member.journal_ahead), 0, "256K", \
	  0, 16u << 20, NULL, \
	  "zeros a synced journal keeps written ahead of its records, so that a sync overwrites " \
	  "blocks the file has (no new size or block for the filesystem to commit: cheaper " \
	  "syncs); at most 16M, 0: plain appends" }, \
	{ "node", "cluster", CONFIG_STRING, offsetof(type, member.cluster), \
	  sizeof(((type *)0)->member.cluster), "lockstep", 0, 0, NULL, \
	  "the cluster's name, part of every datagram's tag: two clusters never mix, even " \
	  "with one key (1 to 31 characters, no spaces)" }, \
	{ "node", "auth", CONFIG_ENUM, offsetof(type, member.auth), 0, "on", 0, 0, \
	  auth_mode_names, \
	  "on: every datagram between members carries a tag under the cluster key, and one " \
	  "that fails is dropped and counted; off: any host can speak for a member (a lab " \
	  "only; warned at start and in status)" }, \
	{ "node", "key_file", CONFIG_STRING, offsetof(type, member.key_file), \
	  sizeof(((type *)0)->member.key_file), "/etc/lockstep/cluster.key", 0, 0, NULL, \
	  "the cluster key file (lockstepctl keygen; mode 0640, group lockstep), read at " \
	  "start and on reload" }

/* What a daemon is to the skeleton. `self` is the daemon's own object, made
 * by open. Every hook runs on the loop's thread. */
struct daemon_ops {
	const char *prog; /* "lockstep-sequencer": --help, --version, errors */
	const char *role; /* "sequencer": STATUS role, error texts */
	const char *about; /* the paragraph --help prints */
	const struct config_spec *spec;
	size_t cfg_size; /* sizeof the daemon's config struct */
	size_t node_offset; /* offsetof its struct node_config */
	/* --check-config, beyond each key's own check: 0, or a negative errno
	 * with err saying why. May be NULL. */
	int (*check)(const void *cfg, char *err, size_t errlen);
	/* Makes the node on `loop`, logging why when it cannot (a negative
	 * errno). cfg stays valid until close. */
	int (*open)(void **self, struct ev_loop *loop, const void *cfg);
	/* A graceful stop: flush what is owed, stop every watcher. Called once,
	 * on SIGTERM/SIGINT or when the loop ran out of work. */
	void (*stop)(void *self);
	/* Frees everything open made; accepts NULL. */
	void (*close)(void *self);
	/* DAEMON_EXIT_OK, or why the node cannot go on (it then breaks the
	 * loop itself): DAEMON_EXIT_FAILURE, DAEMON_EXIT_DIVERGED. May be NULL. */
	int (*exit_status)(const void *self);
	/* Applies the run-time keys of a freshly loaded config (the skeleton
	 * has applied [node] log_level and log_timestamps); msg says what, or
	 * why not (a negative errno, nothing applied). May be NULL. */
	int (*reload)(void *self, const void *fresh, char *msg, size_t msglen);
	/* Fills the reply's node fields: name, state, term, seq, commit (and a
	 * message that STATUS shows, where there is one). */
	void (*status)(void *self, Lockstep__ControlReply *reply);
	/* Adds the node's counters (counters.h) for STATS. */
	void (*stats)(void *self, struct counters *out);
	/* The daemon's own control operations: 1 when it answered req, 0 for an
	 * operation it does not know. May be NULL. */
	int (*control)(void *self, const Lockstep__ControlRequest *req,
		       Lockstep__ControlReply *reply);
};

/* The open, stop and close hooks of a daemon whose object is `struct type`
 * and whose lifecycle is prefix_open(struct type **, struct ev_loop *, const
 * struct cfgtype *), prefix_stop(struct type *), prefix_close(struct type *):
 * defines prefix_daemon_open/_stop/_close; DAEMON_OPS_LIFECYCLE(prefix) puts
 * them in a struct daemon_ops initialiser. */
#define DAEMON_LIFECYCLE(prefix, type, cfgtype) \
	static int prefix##_daemon_open(void **self, struct ev_loop *loop, const void *cfg) \
	{ \
		return prefix##_open((struct type **)self, loop, (const struct cfgtype *)cfg); \
	} \
	static void prefix##_daemon_stop(void *self) \
	{ \
		prefix##_stop(self); \
	} \
	static void prefix##_daemon_close(void *self) \
	{ \
		prefix##_close(self); \
	}
#define DAEMON_OPS_LIFECYCLE(prefix) \
	.open = prefix##_daemon_open, .stop = prefix##_daemon_stop, .close = prefix##_daemon_close

/* The whole of a daemon's main(): parses the command line, loads the
 * config, runs the node until it stops, returns the exit status. */
int daemon_main(int argc, char **argv, const struct daemon_ops *ops);

/* A node on a loop the caller runs: ops->open, then its control socket at
 * the config's [node] control. The config must outlive the node. Returns 0,
 * or a negative errno after logging why. */
struct daemon_node;
int daemon_node_open(struct daemon_node **out, const struct daemon_ops *ops,
		     struct ev_loop *loop, const void *cfg);
/* The daemon's own object (ops->open's self). */
void *daemon_node_self(const struct daemon_node *d);
/* ops->stop (once) and closes the control socket; breaks the loop. */
void daemon_node_stop(struct daemon_node *d);
/* Stops the node if that has not happened, frees it and returns its exit
 * status (enum daemon_exit). Accepts NULL (returns DAEMON_EXIT_OK). */
int daemon_node_close(struct daemon_node *d);

#endif
