/* lockstep-matcher: one replica of one partition's matching engine. */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "matcher.h"
#include "notify.h"

static struct notifier notifier; /* sd_notify: READY=1, STATUS=, WATCHDOG=1 */

static void on_stop(struct ev_loop *loop, void *ctx)
{
	notifier_stopping(&notifier);
	matcher_stop(ctx);
	ev_break(loop, EVBREAK_ALL);
}

static void on_reload(struct ev_loop *loop, void *ctx)
{
	(void)loop;
	(void)ctx;
	notifier_reload(&notifier);
}

int main(int argc, char **argv)
{
	static struct matcher_config cfg;
	struct daemon_args args;
	struct daemon_signals sig = { .on_stop = on_stop, .on_reload = on_reload };
	struct ev_loop *loop = EV_DEFAULT;
	struct matcher *m;
	int r, err, diverged;

	r = daemon_start(argc, argv, "lockstep-matcher",
			 "Applies the committed tape to the order books of one partition, in order, and\n"
			 "publishes the executions as a MoldUDP64 stream; replicas of a partition\n"
			 "publish identical streams and compare their state hashes at checkpoints.\n"
			 "Exit status: 0 after a clean stop, 1 on a start-up error, 3 when the\n"
			 "replica was outvoted at a checkpoint (diverged).",
			 &matcher_config_spec, &cfg, &cfg.node, &args);
	if (r != 0)
		return r > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	err = matcher_create(&m, loop, &cfg);
	if (err < 0) {
		log_err("cannot start: %s", strerror(-err));
		return EXIT_FAILURE;
	}
	sig.ctx = m;
	daemon_signals_start(&sig, loop);
	if ((err = notifier_start(&notifier, loop)) < 0)
		log_warn("NOTIFY_SOCKET: %s: not notifying the service manager", strerror(-err));
	ev_run(loop, 0);
	notifier_stopping(&notifier);
	notifier_stop(&notifier);
	daemon_signals_stop(&sig, loop);
	/* outvoted at a checkpoint: the service manager (and the drill) must
	 * see that this replica's state was wrong, not a clean stop */
	diverged = matcher_diverged(m);
	matcher_destroy(m);
	if (diverged) {
		log_err("stopped: diverged (exit status %d)", MATCHER_EXIT_DIVERGED);
		return MATCHER_EXIT_DIVERGED;
	}
	log_notice("stopped");
	return EXIT_SUCCESS;
}
