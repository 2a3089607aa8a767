/* The daemon skeleton's wait mode (daemon_wait.c): [node] cpus, [node]
 * wait and [node] rt_priority. */
#ifndef LOCKSTEP_DAEMON_WAIT_H
#define LOCKSTEP_DAEMON_WAIT_H

#include <ev.h>
#include <sched.h>
#include <stddef.h>

#include "daemon.h"

/* "3", "2,3", "0-3" (items separated by commas or blanks) into set: 0, or
 * -EINVAL. */
int daemon_cpus_parse(const char *list, cpu_set_t *set);
/* --check-config and start: cpus parses and names an available CPU, spin
 * comes with cpus and without rt_priority. 0, or -EINVAL with err saying
 * why. */
int daemon_wait_check(const struct node_config *node, char *err, size_t errlen);
/* Pins the process, puts it under SCHED_FIFO for rt_priority (before it
 * starts a thread: they inherit it) and, for spin, starts `spin` (an idle
 * watcher that does not keep the loop alive). 0 or a negative errno
 * (logged). */
int daemon_wait_apply(const struct node_config *node, struct ev_loop *loop, ev_idle *spin);
void daemon_wait_stop(const struct node_config *node, struct ev_loop *loop, ev_idle *spin);
/* Called first by a thread whose work is off the orders' path (bulk
 * writes, login verification, a public snapshot server): names it (at
 * most 15 characters, for ps and /proc) and, under rt_priority, puts it
 * back under the normal scheduler, so that a login flood or a large file
 * cannot hold a CPU against the daemons' real-time loops (SCHED_FIFO has
 * no time slice). */
void daemon_thread_off_path(const char *name);
/* Around a long pause of the loop's own work that nothing waits for in
 * real time (the matcher's snapshot serialization: a replica's other
 * copies carry the path meanwhile): under rt_priority the calling thread
 * leaves SCHED_FIFO for the normal scheduler, so that the other real-time
 * daemons preempt it, and daemon_pause_end() puts it back (the matcher: once
 * it has caught up after the pause). Only a process
 * that rt_priority put under SCHED_FIFO pauses (one made real-time from
 * outside, chrt or a unit, might not be allowed back). begin returns the
 * priority to restore (0: nothing to undo). */
int daemon_pause_begin(void);
void daemon_pause_end(int prio);

#endif
