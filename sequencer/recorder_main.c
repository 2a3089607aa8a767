/* lockstep-recorder: the daemon skeleton (common/daemon.h) around a tape
 * recorder (sequencer/recorder.c). */
#include "daemon.h"
#include "recorder.h"

int main(int argc, char **argv)
{
	return daemon_main(argc, argv, &recorder_daemon);
}
