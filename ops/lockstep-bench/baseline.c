/* lockstep-bench --baseline: the echo and one relay per gateway of --connect,
 * forked here (and ended with the load), in place of a cluster. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static pid_t spawn(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		_exit(fn(arg));
	}
	return pid;
}

struct relay_args {
	int lfd, ufd;
	struct sockaddr_in echo;
};
static int relay_thunk(void *p)
{
	struct relay_args *a = p;

	return relay_run(a->lfd, a->ufd, &a->echo);
}
static int echo_thunk(void *p)
{
	return echo_run(*(int *)p);
}

static pid_t children[MAX_GATEWAYS + 1];
static unsigned n_children;

int baseline_start(unsigned n_gw)
{
	struct sockaddr_in echo_addr, any;
	char list[sizeof(opt.connect)] = "", name[24];
	int efd = bench_udp_bound("127.0.0.1:0", &echo_addr);
	size_t used = 0;
	pid_t pid;

	if (efd < 0)
		return efd;
	pid = spawn(echo_thunk, &efd);
	close(efd);
	if (pid < 0)
		return -errno;
	children[n_children++] = pid;
	procs_add("echo", pid);
	for (unsigned g = 0; g < n_gw; g++) {
		struct relay_args a = { .echo = echo_addr };
		socklen_t sl = sizeof(any);

		net_parse_addr("127.0.0.1:0", &any);
		if ((a.lfd = net_tcp_listen(&any, 128)) < 0)
			return a.lfd;
		if ((a.ufd = bench_udp_bound("127.0.0.1:0", &any)) < 0)
			return a.ufd;
		getsockname(a.lfd, (struct sockaddr *)&any, &sl);
		pid = spawn(relay_thunk, &a);
		close(a.lfd);
		close(a.ufd);
		if (pid < 0)
			return -errno;
		children[n_children++] = pid;
		snprintf(name, sizeof(name), "relay-%u", g + 1);
		procs_add(name, pid);
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s127.0.0.1:%d",
					 g ? "," : "", ntohs(any.sin_port));
	}
	memcpy(opt.connect, list, sizeof(list));
	return 0;
}

void baseline_stop(void)
{
	for (unsigned i = 0; i < n_children; i++)
		kill(children[i], SIGTERM);
	for (unsigned i = 0; i < n_children; i++)
		waitpid(children[i], NULL, 0);
	n_children = 0;
}
