/* lockstep-gateway: the client-facing gateway daemon (see gateway.h). */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "gateway.h"
#include "log.h"
#include "notify.h"

static struct notifier notifier; /* sd_notify: READY=1, STATUS=, WATCHDOG=1 */

static void on_stop(struct ev_loop *loop, void *ctx)
{
	(void)loop;
	notifier_stopping(&notifier);
	gw_stop(ctx);
}

static void on_reload(struct ev_loop *loop, void *ctx)
{
	(void)loop;
	(void)ctx;
	notifier_reload(&notifier);
}

int main(int argc, char **argv)
{
	static struct gw_config cfg;
	struct config_spec spec = { gw_config_keys, NULL, NULL, NULL };
	struct daemon_signals sig = { 0 };
	struct daemon_args args;
	struct ev_loop *loop;
	struct gw *g;
	int rc;

	rc = daemon_start(argc, argv, "lockstep-gateway",
			  "The client-facing gateway of a lockstep cluster: SoupBinTCP 4.0 / "
			  "OUCH 4.2 sessions in, the command stream to the sequencer out, "
			  "executions back to the owning sessions.",
			  &spec, &cfg, &cfg.node, &args);
	if (rc > 0 && args.check_config) {
		/* the partitions are checked together, beyond each key's own check
		 * (daemon_start has said "configuration OK" for the keys) */
		struct gw_routes *r;
		char err[512];

		if (gw_routes_open(&r, &cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "lockstep-gateway: %s\n", err);
			return EXIT_FAILURE;
		}
		gw_routes_close(r);
	}
	if (rc != 0)
		return rc > 0 ? EXIT_SUCCESS : 2;
	loop = ev_default_loop(EVFLAG_AUTO);
	if (!loop) {
		log_err("cannot initialise libev");
		return EXIT_FAILURE;
	}
	if (gw_open(&g, loop, &cfg) < 0)
		return EXIT_FAILURE;
	sig.on_stop = on_stop;
	sig.on_reload = on_reload;
	sig.ctx = g;
	daemon_signals_start(&sig, loop);
	if ((rc = notifier_start(&notifier, loop)) < 0)
		log_warn("NOTIFY_SOCKET: %s: not notifying the service manager", strerror(-rc));
	ev_run(loop, 0);
	notifier_stopping(&notifier);
	notifier_stop(&notifier);
	daemon_signals_stop(&sig, loop);
	gw_close(g);
	log_notice("stopped");
	return EXIT_SUCCESS;
}
