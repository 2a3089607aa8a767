/* powercut_writer DIR MODE READY: the program tests/powercut.sh runs under
 * tests/libpowercut.so (POWERCUT_ROOT=DIR) and kills with SIGKILL. In DIR,
 * which the test filled beforehand (log.txt, target.txt, victim.txt,
 * trunc.txt, journal.bin, dup.txt, vec.txt, stdio.txt, otrunc.txt, dsync.txt,
 * old.txt, sub/keep.txt), it makes one change of every kind, some synced
 * and some not (each step says what the durable image must hold); then,
 * by MODE:
 *   nosync   nothing more: DIR itself is never fsynced
 *   dirsync  fsync(DIR): its new names, rename and unlinks become durable
 *   syncfs   syncfs(DIR): everything becomes durable
 * writes "ready" to the file READY (outside DIR) and sleeps until killed.
 * Any failing call exits 1 with a message. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "powercut_writer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int xopen(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0644);

	if (fd < 0)
		die(path);
	return fd;
}

static void xwrite(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		die("write");
}

static void xpwrite(int fd, const char *s, off_t off)
{
	if (pwrite(fd, s, strlen(s), off) != (ssize_t)strlen(s))
		die("pwrite");
}

static void xfsync(int fd, int data_only)
{
	if ((data_only ? fdatasync(fd) : fsync(fd)) < 0)
		die("fsync");
}

/* A new file holding s, synced; its name is left to the directory. */
static void new_synced(const char *path, const char *s)
{
	int fd = xopen(path, O_WRONLY | O_CREAT | O_EXCL);

	xwrite(fd, s);
	xfsync(fd, 0);
	close(fd);
}

/* log.txt "HEAD": "A" synced, "B" synced, "C" not. Durable: HEADAB (the
 * second sync copies what the first left behind, and only that). */
static void append_then_more(void)
{
	int fd = xopen("log.txt", O_WRONLY | O_APPEND);

	xwrite(fd, "A");
	xfsync(fd, 1);
	xwrite(fd, "B");
	xfsync(fd, 1);
	xwrite(fd, "C");
	close(fd);
}

/* repl.tmp "REPL" synced and renamed over target.txt "TARGET": durable only
 * with the directory's fsync. */
static void replace(void)
{
	new_synced("repl.tmp", "REPL");
	if (rename("repl.tmp", "target.txt") < 0)
		die("rename");
}

static void *sync_dup(void *arg)
{
	int fd = *(int *)arg;

	if (fdatasync(fd) < 0)
		die("fdatasync from the thread");
	close(fd);
	return NULL;
}

/* fdatasync of a duplicate of fd in another thread, as the journal's
 * syncer does. */
static void sync_in_thread(int fd)
{
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	pthread_t t;

	if (dup < 0)
		die("F_DUPFD_CLOEXEC");
	if (pthread_create(&t, NULL, sync_dup, &dup) != 0 || pthread_join(t, NULL) != 0)
		die("thread");
}

/* journal.bin "J0": "J1" and "J2" each synced by another thread, "J3" not.
 * Durable: J0J1J2. */
static void journal_like(void)
{
	int fd = xopen("journal.bin", O_RDWR);

	xpwrite(fd, "J1", 2);
	sync_in_thread(fd);
	xpwrite(fd, "J2", 4);
	sync_in_thread(fd);
	xpwrite(fd, "J3", 6);
	close(fd);
}

/* dup.txt "AAAA" synced as it is; "X" at 0 through an F_DUPFD_CLOEXEC,
 * synced through the original; "B" at 1 through a dup(), synced likewise;
 * "C" at 2 through a dup2(), not synced. Durable: XBAA. (Each write is
 * above the one before, so that a sync that copied from a lower offset
 * cannot hide a write the shim missed.) */
static void through_dups(void)
{
	int fd = xopen("dup.txt", O_RDWR), d, e;

	xfsync(fd, 1);
	d = dup(fd);
	e = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d < 0 || e < 0)
		die("dup");
	xpwrite(e, "X", 0);
	xfsync(fd, 1);
	xpwrite(d, "B", 1);
	xfsync(fd, 1);
	close(d);
	close(e);
	if (dup2(fd, 200) != 200)
		die("dup2");
	xpwrite(200, "C", 2);
	close(200);
	close(fd);
}

/* trunc.txt "0123456789": cut to 4, "xy" at 2, synced; cut to 3, grown
 * to 5 (zeros), "!" at 4, synced; then cut to 0 and "zz", not synced.
 * Durable: "01x\0!". */
static void truncate_rewrite(void)
{
	int fd = xopen("trunc.txt", O_RDWR);

	if (ftruncate(fd, 4) < 0)
		die("ftruncate");
	xpwrite(fd, "xy", 2);
	xfsync(fd, 1);
	if (ftruncate(fd, 3) < 0 || ftruncate(fd, 5) < 0)
		die("ftruncate");
	xpwrite(fd, "!", 4);
	xfsync(fd, 1);
	if (ftruncate(fd, 0) < 0)
		die("ftruncate");
	xwrite(fd, "zz");
	close(fd);
}

/* sub/deep.txt "DEEP", synced with sub/: durable in every mode. newdir/f
 * "F", synced with newdir/: durable once DIR is synced. */
static void subdirs(void)
{
	int fd;

	new_synced("sub/deep.txt", "DEEP");
	fd = xopen("sub", O_RDONLY | O_DIRECTORY);
	xfsync(fd, 0);
	close(fd);
	if (mkdir("newdir", 0755) < 0)
		die("mkdir");
	new_synced("newdir/f", "F");
	fd = xopen("newdir", O_RDONLY | O_DIRECTORY);
	xfsync(fd, 0);
	close(fd);
}

/* vec.txt "": writev "V1" "V2" synced, pwritev "v" at 0 synced, pwritev
 * "W" at 3 not. Durable: v1V2. */
static void vectors(void)
{
	struct iovec v[2] = { { "V1", 2 }, { "V2", 2 } }, p = { "v", 1 }, q = { "W", 1 };
	int fd = xopen("vec.txt", O_RDWR);

	if (writev(fd, v, 2) != 4)
		die("writev");
	xfsync(fd, 1);
	if (pwritev(fd, &p, 1, 0) != 1)
		die("pwritev");
	xfsync(fd, 1);
	if (pwritev(fd, &q, 1, 3) != 1)
		die("pwritev");
	close(fd);
}

/* stdio.txt "S0": fopen "w", "S1" synced, rewound and overwritten with
 * "T1", synced, then "S3" flushed only (stdio's writes do not pass through
 * write(): the shim must copy the whole file at each sync). Durable: T1. */
static void with_stdio(void)
{
	FILE *f = fopen("stdio.txt", "w");

	if (!f)
		die("fopen");
	if (fputs("S1", f) < 0 || fflush(f) != 0)
		die("fputs");
	xfsync(fileno(f), 0);
	rewind(f);
	if (fputs("T1", f) < 0 || fflush(f) != 0)
		die("fputs");
	xfsync(fileno(f), 0);
	if (fputs("S3", f) < 0 || fflush(f) != 0)
		die("fputs");
	/* left open: the process is killed */
}

/* otrunc.txt "LONGCONTENT" synced as it is, then opened with O_TRUNC,
 * "s" synced. dsync.txt "": "D" and "E" through O_DSYNC, never fsynced.
 * Durable: s, DE. */
static void open_flags(void)
{
	int fd = xopen("otrunc.txt", O_WRONLY);

	xfsync(fd, 0);
	close(fd);
	fd = xopen("otrunc.txt", O_WRONLY | O_TRUNC);
	xwrite(fd, "s");
	xfsync(fd, 0);
	close(fd);
	fd = xopen("dsync.txt", O_WRONLY | O_DSYNC);
	xwrite(fd, "D");
	xwrite(fd, "E");
	close(fd);
}

/* old.txt "OLD" unlinked, then reuse.txt "REUSE" made and synced (the
 * filesystem may give it old.txt's inode number): until DIR is synced
 * old.txt still holds OLD. empty.txt "X", never synced: absent, or empty
 * once DIR is synced. victim.txt unlinked. */
static void names(void)
{
	struct stat a, b;
	int fd;

	if (stat("old.txt", &a) < 0 || unlink("old.txt") < 0 || unlink("victim.txt") < 0)
		die("unlink");
	new_synced("reuse.txt", "REUSE");
	if (stat("reuse.txt", &b) < 0)
		die("reuse.txt");
	printf("reuse.txt has inode %llu, old.txt had %llu%s\n", (unsigned long long)b.st_ino,
	       (unsigned long long)a.st_ino, a.st_ino == b.st_ino ? " (reused)" : "");
	fflush(stdout);
	fd = xopen("empty.txt", O_WRONLY | O_CREAT | O_EXCL);
	xwrite(fd, "X");
	close(fd);
}

/* Files and descriptors outside DIR, on filesystems with no birth time
 * (/proc, a pipe): the shim must let them be. */
static void outside(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	int p[2];

	if (!f || pipe(p) < 0 || write(p[1], "x", 1) != 1 || fsync(p[1]) != -1)
		die("outside DIR");
	fclose(f);
	close(p[0]);
	close(p[1]);
}

int main(int argc, char **argv)
{
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: powercut_writer DIR nosync|dirsync|syncfs READY\n");
		return 2;
	}
	if (chdir(argv[1]) < 0)
		die(argv[1]);
	outside();
	append_then_more();
	new_synced("new.txt", "NEW");
	replace();
	journal_like();
	through_dups();
	truncate_rewrite();
	subdirs();
	vectors();
	with_stdio();
	open_flags();
	names();
	fd = xopen(".", O_RDONLY | O_DIRECTORY);
	if (!strcmp(argv[2], "dirsync"))
		xfsync(fd, 0);
	else if (!strcmp(argv[2], "syncfs") && syncfs(fd) < 0)
		die("syncfs");
	fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "ready\n", 6) != 6)
		die(argv[3]);
	close(fd);
	for (;;)
		pause();
}
