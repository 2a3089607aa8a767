/* lockstep-sequencer: the daemon skeleton (common/daemon.h) around
 * libsequencer. */
#include "daemon.h"
#include "sequencer.h"

int main(int argc, char **argv)
{
	return daemon_main(argc, argv, &seq_daemon);
}
