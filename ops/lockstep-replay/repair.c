/* lockstep-replay repair: a damaged journal (a bad record with good records
 * after it, which a daemon refuses to open: common/journal.h) cut before its
 * first bad record. Every segment from the bad one on is first copied aside,
 * to DIR.damaged-SEQ/, synced, so that nothing an operator may want back is
 * lost; then the journal is opened with cut_damaged. A sequencer started on
 * the repaired journal fetches the cut range from its group. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay.h"

/* Copies dir/name into dest/name and syncs it. 0 or -errno. */
static int copy_file(const char *dir, const char *dest, const char *name)
{
	char from[4096], to[4096], buf[1 << 16];
	int in, out, r = 0;
	ssize_t n;

	snprintf(from, sizeof(from), "%s/%s", dir, name);
	snprintf(to, sizeof(to), "%s/%s", dest, name);
	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0) {
		r = -errno;
		close(in);
		return r;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			r = -EIO;
			break;
		}
	if (n < 0)
		r = -errno;
	if (r == 0 && fsync(out) < 0)
		r = -errno;
	close(in);
	close(out);
	return r;
}

/* The segments of dir named at or after `bad` (names sort as numbers), into
 * dest, which is made anew. 0 or 2 (message printed). */
static int copy_aside(const char *dir, const char *dest, const char *bad)
{
	char names[1024][32];
	size_t n = 0;
	struct dirent *e;
	DIR *d;
	int dfd, r = 0;

	if (mkdir(dest, 0755) < 0) {
		fprintf(stderr, PROG ": %s: %s\n", dest, strerror(errno));
		return 2;
	}
	if (!(d = opendir(dir))) {
		fprintf(stderr, PROG ": %s: %s\n", dir, strerror(errno));
		return 2;
	}
	while ((e = readdir(d)) && n < 1024)
		if (strlen(e->d_name) == 24 && strcmp(e->d_name + 20, ".seg") == 0 &&
		    strcmp(e->d_name, bad) >= 0)
			snprintf(names[n++], sizeof(names[0]), "%s", e->d_name);
	closedir(d);
	for (size_t i = 0; i < n && r == 0; i++)
		r = copy_file(dir, dest, names[i]);
	if (r == 0 && (dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (fsync(dfd) < 0)
			r = -errno;
		close(dfd);
	}
	if (r < 0) {
		fprintf(stderr, PROG ": copying %s aside to %s: %s (the journal is untouched)\n",
			dir, dest, strerror(-r));
		return 2;
	}
	printf("copied %zu segment(s) from %s on to %s\n", n, bad, dest);
	return 0;
}

int cmd_repair(int argc, char **argv)
{
	struct journal_options o = { .fsync = JOURNAL_FSYNC_INTERVAL, .cut_damaged = 1 };
	struct journal_report rep;
	struct tapedir t;
	struct journal *j;
	char dest[4096];
	const char *dir;
	struct stat st;
	int r;

	if (argc != 2)
		return fail_usage("repair DIR");
	dir = argv[1];
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
		return fail_usage("repair: %s is not a journal directory (an archive is read-only)",
				  dir);
	if ((r = tapedir_open(&t, dir, 0, 0)) != 0)
		return r;
	rep = t.rep;
	tapedir_close(&t);
	if (!rep.bad_reason) {
		printf("ok: %s has no bad record; nothing to repair\n", dir);
		return 0;
	}
	snprintf(dest, sizeof(dest), "%s.damaged-%llu", dir, (unsigned long long)rep.bad_seq);
	printf("%s: seq %llu (segment %s, offset %llu) is bad (%s)%s\n", dir,
	       (unsigned long long)rep.bad_seq, rep.bad_segment, (unsigned long long)rep.bad_offset,
	       rep.bad_reason, rep.damaged ? ", good records follow it" : ", a torn tail");
	if ((r = copy_aside(dir, dest, rep.bad_segment)) != 0)
		return r;
	if ((r = journal_open(&j, dir, &o, &rep)) < 0) {
		fprintf(stderr, PROG ": %s: %s\n", dir, strerror(-r));
		return 2;
	}
	printf("repaired: %s holds seq %llu..%llu; %llu bytes (%llu whole segments) from seq %llu "
	       "on were cut (a copy is in %s). A sequencer fetches them from its group when it "
	       "starts\n",
	       dir, (unsigned long long)journal_first_seq(j), (unsigned long long)journal_last_seq(j),
	       (unsigned long long)rep.cut_bytes, (unsigned long long)rep.cut_segments,
	       (unsigned long long)rep.bad_seq, dest);
	journal_close(j);
	return 0;
}
