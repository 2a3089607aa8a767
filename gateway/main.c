/* lockstep-gateway: the daemon skeleton (common/daemon.h) around the
 * client-facing gateway (libgateway, gateway.h). */
#include "daemon.h"
#include "gateway.h"

int main(int argc, char **argv)
{
	return daemon_main(argc, argv, &gw_daemon);
}
