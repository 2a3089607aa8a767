/* lockstep-matcher: the daemon skeleton (common/daemon.h) around one
 * replica of one partition's matching engine (libmatcher). */
#include "daemon.h"
#include "matcher.h"

int main(int argc, char **argv)
{
	return daemon_main(argc, argv, &matcher_daemon);
}
