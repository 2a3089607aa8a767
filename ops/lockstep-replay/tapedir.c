/* lockstep-replay: a journal directory opened read-only, and the range of
 * its good records a subcommand reads. A day archive (dayarc.h) stands in
 * for a directory: it is unpacked into a private temporary directory that
 * goes again when the journal is closed, or when a signal ends the
 * program first. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "dayarc.h"
#include "replay.h"

#define UNPACKED_MAX 2 /* diff opens two */

/* The files of an unpacked archive, for a signal handler to remove with
 * async-signal-safe calls only (unlinkat, rmdir): the names are stored as
 * they are made. */
struct unpacked {
	volatile sig_atomic_t used;
	int dfd;
	char path[4096];
	char (*names)[DAYARC_NAME_LEN + 1];
	volatile size_t n;
	size_t cap;
	int fd; /* the segment being written; -1: none */
};

static struct unpacked unpacked[UNPACKED_MAX];

static void unpacked_remove(struct unpacked *u)
{
	for (size_t i = 0; i < u->n; i++)
		unlinkat(u->dfd, u->names[i], 0);
	rmdir(u->path);
}

static void on_fatal_signal(int sig)
{
	for (int i = 0; i < UNPACKED_MAX; i++)
		if (unpacked[i].used)
			unpacked_remove(&unpacked[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int unpack_begin(void *ctx, const char *name, uint64_t len)
{
	struct unpacked *u = ctx;

	(void)len;
	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 64;
		void *p = malloc(cap * sizeof(*u->names)), *old = u->names;

		/* a new array filled before it replaces the old: the handler
		 * always sees names that were made */
		if (!p)
			return -ENOMEM;
		if (u->n)
			memcpy(p, u->names, u->n * sizeof(*u->names));
		u->names = p;
		u->cap = cap;
		free(old);
	}
	memcpy(u->names[u->n], name, DAYARC_NAME_LEN + 1);
	u->n++;
	u->fd = openat(u->dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return u->fd < 0 ? -errno : 0;
}

static int unpack_data(void *ctx, const uint8_t *p, size_t n)
{
	return durable_write_all(((struct unpacked *)ctx)->fd, p, n);
}

static int unpack_end(void *ctx)
{
	struct unpacked *u = ctx;
	int r = close(u->fd) < 0 ? -errno : 0;

	u->fd = -1;
	return r;
}

/* Unpacks the archive `file` into a new temporary directory (in t->tmp).
 * 0 or 2 (message printed; nothing left behind). */
static int tapedir_unpack(struct tapedir *t, const char *file)
{
	static const struct dayarc_ops ops = { unpack_begin, unpack_data, unpack_end };
	struct sigaction sa = { .sa_handler = on_fatal_signal };
	const char *tmp = getenv("TMPDIR"), *why = NULL;
	struct unpacked *u = NULL;
	int fd, r;

	for (int i = 0; i < UNPACKED_MAX && !u; i++)
		if (!unpacked[i].used)
			u = &unpacked[i];
	if (!u)
		return 2;
	memset(u, 0, sizeof(*u));
	u->fd = -1;
	snprintf(u->path, sizeof(u->path), "%s/lockstep-replay.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(u->path)) {
		fprintf(stderr, PROG ": %s: a temporary directory for the archive: %s\n", u->path,
			strerror(errno));
		return 2;
	}
	if ((u->dfd = open(u->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, PROG ": %s: %s\n", u->path, strerror(errno));
		rmdir(u->path);
		return 2;
	}
	u->used = 1;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	r = fd < 0 ? -errno : dayarc_unpack_fd(fd, &ops, u, &why);
	if (fd >= 0)
		close(fd);
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", file, why ? why : strerror(-r));
		unpacked_remove(u);
		close(u->dfd);
		free(u->names);
		u->used = 0;
		return 2;
	}
	snprintf(t->tmp, sizeof(t->tmp), "%s", u->path);
	return 0;
}

static void tapedir_unpacked_remove(struct tapedir *t)
{
	for (int i = 0; i < UNPACKED_MAX; i++) {
		struct unpacked *u = &unpacked[i];

		if (!u->used || strcmp(u->path, t->tmp) != 0)
			continue;
		unpacked_remove(u);
		u->used = 0;
		close(u->dfd);
		free(u->names);
		u->names = NULL;
	}
	t->tmp[0] = 0;
}

int tapedir_open(struct tapedir *t, const char *dir, int warn_bad, int index)
{
	/* Without the per-record index memory stays flat however long the
	 * journal; only send, which serves retransmissions by seq, wants it. */
	struct journal_options o = { .read_only = 1, .no_index = !index };
	struct stat st;
	int r;

	memset(t, 0, sizeof(*t));
	t->dir = dir;
	if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
		if (!dayarc_is_archive(dir)) {
			fprintf(stderr, PROG ": %s: neither a journal directory nor a day archive\n", dir);
			return 2;
		}
		if ((r = tapedir_unpack(t, dir)) != 0)
			return r;
	}
	r = journal_open(&t->j, t->tmp[0] ? t->tmp : dir, &o, &t->rep);
	if (r < 0) {
		if (r == -EBADMSG)
			fprintf(stderr, PROG ": %s: segment %s: %s (not a journal, or damaged)\n", dir,
				t->rep.bad_segment, t->rep.bad_reason ? t->rep.bad_reason : "bad header");
		else
			fprintf(stderr, PROG ": %s: %s\n", dir, strerror(-r));
		if (t->tmp[0])
			tapedir_unpacked_remove(t);
		return 2;
	}
	t->first = journal_first_seq(t->j);
	t->last = journal_last_seq(t->j);
	if (warn_bad && t->rep.bad_reason)
		fprintf(stderr,
			PROG ": warning: %s is bad from seq %llu (segment %s, offset %llu: %s); "
			"only seq %llu..%llu is used (see lockstep-replay verify)\n",
			dir, (unsigned long long)t->rep.bad_seq, t->rep.bad_segment,
			(unsigned long long)t->rep.bad_offset, t->rep.bad_reason,
			(unsigned long long)t->first, (unsigned long long)t->last);
	return 0;
}

void tapedir_close(struct tapedir *t)
{
	journal_close(t->j);
	t->j = NULL;
	if (t->tmp[0])
		tapedir_unpacked_remove(t);
}

/* Clamps [from, to] (to 0: the end) to the good records; 0 when that leaves
 * something, else 1 with a message. */
int tapedir_range(const struct tapedir *t, uint64_t *from, uint64_t *to)
{
	if (!t->last) {
		fprintf(stderr, PROG ": %s: no records\n", t->dir);
		return 1;
	}
	if (*from < t->first)
		*from = t->first;
	if (!*to || *to > t->last)
		*to = t->last;
	if (*from > *to) {
		fprintf(stderr, PROG ": %s: nothing in that range (the journal holds seq %llu..%llu)\n",
			t->dir, (unsigned long long)t->first, (unsigned long long)t->last);
		return 1;
	}
	return 0;
}
