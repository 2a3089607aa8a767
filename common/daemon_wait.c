/* The daemon skeleton's wait mode: [node] cpus pins the process to a set
 * of CPUs (sched_setaffinity), and [node] wait = spin keeps its event loop
 * polling without ever sleeping (an ev_idle watcher: libev then polls with a
 * zero timeout), which removes the scheduler's wake-up latency from every
 * message at the price of a whole core. A spinning daemon must be pinned,
 * and each to a core of its own: a spinning loop that shares its CPU with
 * another process takes that process's time. [node] rt_priority puts the
 * process under SCHED_FIFO: a daemon woken by a datagram or a sync's end
 * runs at once instead of waiting its turn behind normal processes (the
 * bench, a compiler, a matcher's long batch), which is what a hop costs on
 * a machine with fewer cores than busy processes. A real-time loop must
 * block: a spinning one would take its CPU from everything else; and a
 * thread whose work is off the orders' path goes back to the normal
 * scheduler (daemon_thread_off_path). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_wait.h"
#include "log.h"

const char *const daemon_wait_names[] = { "block", "spin", NULL };

/* One item of a CPU list: "N" or "N-M", into set. 0 or -1. */
static int cpus_item(const char *item, cpu_set_t *set)
{
	char *end;
	long lo = strtol(item, &end, 10), hi = lo;

	if (end == item || lo < 0)
		return -1;
	if (*end == '-') {
		const char *p = end + 1;

		hi = strtol(p, &end, 10);
		if (end == p || hi < lo)
			return -1;
	}
	if (*end != '\0' || hi >= CPU_SETSIZE)
		return -1;
	for (long c = lo; c <= hi; c++)
		CPU_SET((int)c, set);
	return 0;
}

int daemon_cpus_parse(const char *list, cpu_set_t *set)
{
	char buf[64], *save = NULL;
	int n = 0;

	CPU_ZERO(set);
	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return -EINVAL;
	for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save), n++)
		if (cpus_item(t, set) < 0)
			return -EINVAL;
	return n ? 0 : -EINVAL;
}

int daemon_wait_check(const struct node_config *node, char *err, size_t errlen)
{
	cpu_set_t want, have;

	if (node->rt_priority > 0 && node->wait == DAEMON_WAIT_SPIN) {
		snprintf(err, errlen, "[node] rt_priority with wait = spin: a real-time loop that "
				      "never sleeps takes its CPU from everything else (use block)");
		return -EINVAL;
	}
	if (node->cpus[0] == '\0') {
		if (node->wait == DAEMON_WAIT_SPIN) {
			snprintf(err, errlen, "[node] wait = spin needs [node] cpus: a spinning "
					      "loop takes a core, which must be its own");
			return -EINVAL;
		}
		return 0;
	}
	if (daemon_cpus_parse(node->cpus, &want) < 0) {
		snprintf(err, errlen, "[node] cpus: \"%s\" is not a CPU list (e.g. 3, 2,3 or 0-3)",
			 node->cpus);
		return -EINVAL;
	}
	if (sched_getaffinity(0, sizeof(have), &have) == 0) {
		CPU_AND(&want, &want, &have);
		if (CPU_COUNT(&want) == 0) {
			snprintf(err, errlen, "[node] cpus: none of %s is available to this process "
					      "(%ld online)", node->cpus, sysconf(_SC_NPROCESSORS_ONLN));
			return -EINVAL;
		}
	}
	return 0;
}

static void on_idle(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Whether rt_apply put this process under SCHED_FIFO: only then does a
 * pause leave it (and may come back: the process had the privilege). */
static int rt_applied;

/* [node] rt_priority: SCHED_FIFO for the calling thread, which every
 * thread it starts later inherits (pthreads' default; SCHED_RESET_ON_FORK
 * would reset the threads too, and the daemons fork nothing) but those
 * that call daemon_thread_off_path(). 0 or a negative errno (logged). */
static int rt_apply(const struct node_config *node)
{
	struct sched_param sp = { .sched_priority = (int)node->rt_priority };

	if (node->rt_priority == 0)
		return 0;
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
		int e = errno;

		log_err("[node] rt_priority %d: SCHED_FIFO: %s%s", sp.sched_priority, strerror(e),
			e == EPERM ? " (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO as high, and no "
				     "seccomp filter or RestrictRealtime= against it)" : "");
		return -e;
	}
	log_info("rt_priority %d: SCHED_FIFO", sp.sched_priority);
	rt_applied = 1;
	return 0;
}

int daemon_wait_apply(const struct node_config *node, struct ev_loop *loop, ev_idle *spin)
{
	cpu_set_t set;
	int r;

	if (node->cpus[0] != '\0') {
		if (daemon_cpus_parse(node->cpus, &set) < 0 ||
		    sched_setaffinity(0, sizeof(set), &set) < 0) {
			int e = errno ? errno : EINVAL;

			log_err("[node] cpus %s: %s", node->cpus, strerror(e));
			return -e;
		}
		log_info("running on CPUs %s", node->cpus);
	}
	if ((r = rt_apply(node)) < 0)
		return r;
	if (node->wait == DAEMON_WAIT_SPIN) {
		ev_idle_init(spin, on_idle);
		ev_idle_start(loop, spin);
		/* spinning must not keep a finished loop alive */
		ev_unref(loop);
		log_info("wait = spin: the loop polls without sleeping");
	}
	return 0;
}

/* The calling thread from SCHED_FIFO to the normal scheduler: the priority
 * it had, or 0 when it was not under SCHED_FIFO or could not leave it. */
static int leave_fifo(void)
{
	struct sched_param sp = { .sched_priority = 0 };
	int policy, prio;

	if (pthread_getschedparam(pthread_self(), &policy, &sp) != 0 || policy != SCHED_FIFO)
		return 0;
	prio = sp.sched_priority;
	sp.sched_priority = 0;
	return pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp) == 0 ? prio : 0;
}

void daemon_thread_off_path(const char *name)
{
	(void)pthread_setname_np(pthread_self(), name);
	(void)leave_fifo();
}

int daemon_pause_begin(void)
{
	return rt_applied ? leave_fifo() : 0;
}

void daemon_pause_end(int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	int e;

	if (prio > 0 && (e = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp)) != 0)
		log_warn("back to SCHED_FIFO %d after a pause: %s (the loop stays under the normal "
			 "scheduler)", prio, strerror(e));
}

void daemon_wait_stop(const struct node_config *node, struct ev_loop *loop, ev_idle *spin)
{
	if (node->wait != DAEMON_WAIT_SPIN || !ev_is_active(spin))
		return;
	ev_ref(loop);
	ev_idle_stop(loop, spin);
}
