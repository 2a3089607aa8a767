/* lockstep-bench: the CPU time of the daemons (/proc/PID/stat, from --pids
 * or the NODE.pid files of --cluster) and of the bench itself, sampled at the
 * start and the end of the measurement. */
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

static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* after "pid (comm) ": state is field 3, utime 14, stime 15 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

void procs_add(const char *name, pid_t pid)
{
	if (n_procs == MAX_PROCS || pid <= 0)
		return;
	/* a longer name is cut to fit */
	snprintf(procs[n_procs].name, sizeof(procs[n_procs].name), "%.*s",
		 (int)sizeof(procs[n_procs].name) - 1, name);
	procs[n_procs++].pid = pid;
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
				if (fscanf(f, "%d", &pid) == 1)
					procs_add(name, (pid_t)pid);
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
		double c = proc_cpu(procs[i].pid);

		if (c < 0)
			procs[i].gone = 1;
		else if (end)
			procs[i].cpu1 = c;
		else
			procs[i].cpu0 = c;
	}
}

double procs_self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}
