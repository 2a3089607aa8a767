/* lockstep-gateway: the client-facing gateway daemon (see gateway.h). */
#include <ev.h>
#include <stdlib.h>

#include "daemon.h"
#include "gateway.h"
#include "log.h"

static void on_stop(struct ev_loop *loop, void *ctx)
{
	(void)loop;
	gw_stop(ctx);
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
	sig.ctx = g;
	daemon_signals_start(&sig, loop);
	ev_run(loop, 0);
	daemon_signals_stop(&sig, loop);
	gw_close(g);
	log_notice("stopped");
	return EXIT_SUCCESS;
}
