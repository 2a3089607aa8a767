/* lockstep-sequencer: configuration, signals and the event loop around
 * libsequencer. */
#include <ev.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "notify.h"
#include "sequencer.h"

static const char about[] =
	"Merges the gateways' MoldUDP64 command streams into one total order, journals\n"
	"every event and multicasts it as the tape; serves tape retransmissions.";

static struct notifier notifier; /* sd_notify: READY=1, STATUS=, WATCHDOG=1 */

static void on_stop(struct ev_loop *loop, void *ctx)
{
	notifier_stopping(&notifier);
	seq_shutdown(ctx);
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
	static struct seq_config cfg;
	const struct config_spec spec = { .keys = seq_config_keys };
	struct daemon_args args;
	struct daemon_signals sig = { .on_stop = on_stop, .on_reload = on_reload };
	struct sequencer *s;
	struct ev_loop *loop;
	int r, failed;

	r = daemon_start(argc, argv, "lockstep-sequencer", about, &spec, &cfg, &cfg.node, &args);
	if (r != 0)
		return r > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	loop = ev_default_loop(EVFLAG_AUTO);
	if (!loop) {
		log_err("cannot initialise the event loop");
		return EXIT_FAILURE;
	}
	if (seq_open(&s, loop, &cfg) < 0)
		return EXIT_FAILURE;
	sig.ctx = s;
	daemon_signals_start(&sig, loop);
	if ((r = notifier_start(&notifier, loop)) < 0)
		log_warn("NOTIFY_SOCKET: %s: not notifying the service manager", strerror(-r));
	ev_run(loop, 0);
	notifier_stopping(&notifier);
	notifier_stop(&notifier);
	failed = seq_failed(s);
	if (!failed)
		seq_shutdown(s); /* when the loop ran out rather than by a signal */
	daemon_signals_stop(&sig, loop);
	seq_close(s);
	ev_loop_destroy(loop);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
