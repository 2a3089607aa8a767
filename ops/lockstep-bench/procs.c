/* lockstep-bench: the CPU time and the minor page faults of the daemons
 * (from --pids or the NODE.pid files of --cluster) and the CPU time of the
 * bench itself, sampled at the start and the end of the measurement:
 * /proc/PID/stat's minflt, and utime + stime (in 1/CLK_TCK
 * ticks, 10 ms) and, for a single-threaded process, /proc/PID/schedstat's
 * time on a CPU (in ns), which is the finer and is used when it was read at
 * both ends; and the main thread's own time on a CPU
 * (/proc/PID/task/PID/schedstat): a daemon's event loop, where the rest of
 * a multi-threaded daemon's time is its helper threads' (the journals'
 * syncs, above all). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

struct proc procs[MAX_PROCS];
unsigned n_procs;

/* Reads the first line of a /proc file into buf: 0, or -1. */
static int proc_read(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* pid's user + system seconds (/proc/PID/stat), its threads and its minor
 * page faults; -1 when it cannot be read (the process is gone). */
static double proc_cpu(pid_t pid, long *threads, uint64_t *minflt)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0, mf = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (proc_read(path, buf, sizeof(buf)) < 0)
		return -1;
	/* after "pid (comm) ": state is field 3, minflt 10, utime 14, stime 15,
	 * num_threads 20 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %*u %*u %llu %llu %*d %*d %*d %*d %ld",
		   &mf, &ut, &st, threads) != 4)
		return -1;
	*minflt = mf;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The ns pid's main thread has spent on a CPU (/proc/PID/schedstat, first
 * field: the process's own when it has one thread); 0 when unreadable
 * (a kernel without CONFIG_SCHEDSTATS). */
static uint64_t proc_on_cpu(pid_t pid, int main_thread)
{
	char path[64], buf[256];
	unsigned long long ns = 0;

	if (main_thread)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if (proc_read(path, buf, sizeof(buf)) < 0 || sscanf(buf, "%llu", &ns) != 1)
		return 0;
	return ns;
}

struct proc *procs_add(const char *name, pid_t pid)
{
	if (n_procs == MAX_PROCS || pid <= 0)
		return NULL;
	/* a longer name is cut to fit */
	snprintf(procs[n_procs].name, sizeof(procs[n_procs].name), "%.*s",
		 (int)sizeof(procs[n_procs].name) - 1, name);
	procs[n_procs].pid = pid;
	return &procs[n_procs++];
}

static int proc_cmp(const void *a, const void *b)
{
	return strcmp(((const struct proc *)a)->name, ((const struct proc *)b)->name);
}

/* --pids NAME=PID,... and --cluster DIR (its NODE.pid files, as ops/cluster
 * writes them). */
int procs_load(void)
{
	if (opt.pids) {
		char buf[1024], *save, *t;

		snprintf(buf, sizeof(buf), "%s", opt.pids);
		for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(t, '=');

			if (eq)
				*eq = '\0';
			procs_add(eq ? t : "pid", (pid_t)atoi(eq ? eq + 1 : t));
		}
	}
	if (opt.cluster_dir) {
		DIR *d = opendir(opt.cluster_dir);
		struct dirent *e;

		if (!d) {
			fprintf(stderr, PROG ": --cluster %s: %s\n", opt.cluster_dir, strerror(errno));
			return -1;
		}
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);
			char path[512], name[64];
			FILE *f;
			int pid;

			if (n < 5 || n > 40 || strcmp(e->d_name + n - 4, ".pid") != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", opt.cluster_dir, e->d_name);
			snprintf(name, sizeof(name), "%.*s", (int)(n - 4), e->d_name);
			if ((f = fopen(path, "r"))) {
				struct proc *p;

				if (fscanf(f, "%d", &pid) == 1 && (p = procs_add(name, (pid_t)pid)))
					p->in_cluster = 1;
				fclose(f);
			}
		}
		closedir(d);
	}
	qsort(procs, n_procs, sizeof(procs[0]), proc_cmp);
	return 0;
}

void procs_sample(int end)
{
	for (unsigned i = 0; i < n_procs; i++) {
		struct proc *p = &procs[i];
		long threads = 0;
		uint64_t mf = 0;
		double c = proc_cpu(p->pid, &threads, &mf);
		uint64_t ns = threads == 1 ? proc_on_cpu(p->pid, 0) : 0;
		uint64_t loop = threads > 1 ? proc_on_cpu(p->pid, 1) : 0;

		if (c < 0) {
			p->gone = 1;
			continue;
		}
		if (end) {
			p->cpu1 = c;
			p->on_cpu1 = ns;
			p->loop1 = loop;
			p->minflt1 = mf;
			p->fine = p->fine && ns >= p->on_cpu0;
			p->loop_ok = p->loop_ok && loop >= p->loop0;
		} else {
			p->cpu0 = c;
			p->on_cpu0 = ns;
			p->loop0 = loop;
			p->minflt0 = mf;
			p->fine = ns > 0;
			p->loop_ok = loop > 0;
		}
	}
}

double procs_cpu_ns(const struct proc *p)
{
	if (p->gone)
		return 0;
	if (p->fine)
		return (double)(p->on_cpu1 - p->on_cpu0);
	return (p->cpu1 - p->cpu0) * 1e9;
}

double procs_loop_ns(const struct proc *p)
{
	return p->gone || !p->loop_ok ? -1 : (double)(p->loop1 - p->loop0);
}

uint64_t procs_minflt(const struct proc *p)
{
	return p->gone || p->minflt1 < p->minflt0 ? 0 : p->minflt1 - p->minflt0;
}

double procs_self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}
