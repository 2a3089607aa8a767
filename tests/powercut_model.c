/* The power-cut shim's durable image, on disk in POWERCUT_SHADOW (SDIR), so
 * that a SIGKILL leaves all of it behind for tests/powercut_restore:
 *   SDIR/root            "powercut 1", the root directory's id, its path
 *   SDIR/objects/ID      the durable contents of the regular file ID
 *                        (absent: none yet, an empty file)
 *   SDIR/dirs/ID         the durable listing of the directory ID (absent:
 *                        empty): a line "powercut-dir 1", then one line per
 *                        entry: KIND MODE ID NAME [TARGET], KIND f (regular
 *                        file), d (directory), l (symbolic link, TARGET its
 *                        text) or o (socket, FIFO, device: not restored),
 *                        MODE octal permission bits, NAME and TARGET with
 *                        every byte outside [A-Za-z0-9._,+=@:~-] as %XX
 *   SDIR/tmp/            listings being written (then renamed into dirs/)
 *   SDIR/lock            flock()ed while a process changes the model
 * ID is DEV-INO-BSEC.BNSEC in hex (struct pc_id). An object is updated in
 * place from the lowest offset written since its last sync (the dirty
 * table, in memory: an inode it does not know is copied whole); a listing
 * is rewritten whole and renamed over the old one. SDIR itself is not made
 * crash-safe: only a SIGKILL of the process is simulated, not a real power
 * cut of the machine that runs the test. Every call is made with the shim's
 * lock held (powercut.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "powercut.h"

#define ID_LEN 64
#define DIRTY_BUCKETS 1024
#define COPY_CHUNK (256u << 10)
#define SDIR_MAX 2048 /* so that SDIR/SUB/ID always fits in PATH_MAX */

/* What the process knows of an inode's writes since its last sync. */
struct dirty {
	struct pc_id id;
	uint64_t lo; /* lowest offset written since, PC_CLEAN: none */
	int sticky; /* written unseen (stdio, mmap): always copied whole */
	struct dirty *next;
};

static struct {
	char root[PATH_MAX], sdir[SDIR_MAX];
	size_t root_len;
	struct pc_id root_id;
	int lockfd, locked; /* locked: lock_model() depth */
	int opened; /* root_id is known */
	struct dirty *dirty[DIRTY_BUCKETS];
	uint8_t buf[COPY_CHUNK];
} m = { .lockfd = -1 };

/* ---- identities, paths, the lock --------------------------------------- */

int pc_id_of(int dfd, const char *name, struct pc_id *id, mode_t *mode, uint64_t *size)
{
	struct statx sx;
	int flags = name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH;

	if (statx(dfd, name ? name : "", flags, STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE | STATX_BTIME,
		  &sx) < 0)
		return -errno;
	id->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	if (!(sx.stx_mask & STATX_BTIME) && (!m.opened || id->dev == m.root_id.dev))
		pc_die("%s: the filesystem reports no birth time (statx btime), which the model needs to tell "
		       "a reused inode number from the file it had",
		       m.root);
	if (!(sx.stx_mask & STATX_BTIME))
		return -ENODATA; /* elsewhere (a pipe, /proc): never modelled */
	id->ino = sx.stx_ino;
	id->bsec = sx.stx_btime.tv_sec;
	id->bnsec = sx.stx_btime.tv_nsec;
	if (mode)
		*mode = sx.stx_mode;
	if (size)
		*size = sx.stx_size;
	return 0;
}

static void id_str(char s[ID_LEN], const struct pc_id *id)
{
	snprintf(s, ID_LEN, "%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%" PRIx32, id->dev, id->ino, (uint64_t)id->bsec,
		 id->bnsec);
}

static int id_eq(const struct pc_id *a, const struct pc_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->bsec == b->bsec && a->bnsec == b->bnsec;
}

/* SDIR/SUB/ID (id non-NULL) or SDIR/SUB. */
static void sdir_path(char *out, const char *sub, const struct pc_id *id)
{
	char s[ID_LEN];

	if (!id) {
		snprintf(out, PATH_MAX, "%s/%s", m.sdir, sub);
		return;
	}
	id_str(s, id);
	snprintf(out, PATH_MAX, "%s/%s/%s", m.sdir, sub, s);
}

uint64_t pc_model_dev(void)
{
	return m.root_id.dev;
}

int pc_model_under(const char *path)
{
	return strncmp(path, m.root, m.root_len) == 0 && (path[m.root_len] == '\0' || path[m.root_len] == '/');
}

int pc_model_has(const struct pc_id *id)
{
	char p[PATH_MAX];

	sdir_path(p, "objects", id);
	if (access(p, F_OK) == 0)
		return 1;
	sdir_path(p, "dirs", id);
	return access(p, F_OK) == 0;
}

/* lock_model(LOCK_EX) / lock_model(LOCK_UN), nested: only the outermost
 * pair takes and drops the flock (one open file holds one lock). */
static void lock_model(int op)
{
	if (op == LOCK_EX ? m.locked++ > 0 : --m.locked > 0)
		return;
	while (flock(m.lockfd, op) < 0)
		if (errno != EINTR)
			pc_die("flock %s/lock: %s", m.sdir, strerror(errno));
}

void pc_model_atfork_child(void)
{
	char p[PATH_MAX];

	pc_real_close(m.lockfd);
	m.locked = 0;
	sdir_path(p, "lock", NULL);
	m.lockfd = pc_real_openat(AT_FDCWD, p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (m.lockfd < 0)
		pc_die("%s: %s", p, strerror(errno));
}

/* ---- the dirty table ----------------------------------------------------- */

/* id's entry, made (as "unknown": copied whole) when there is none. */
static struct dirty *dirty_get(const struct pc_id *id)
{
	struct dirty **b = &m.dirty[(id->ino ^ (uint64_t)id->bnsec) % DIRTY_BUCKETS], *d;

	for (d = *b; d; d = d->next)
		if (id_eq(&d->id, id))
			return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		pc_die("out of memory");
	d->id = *id;
	d->lo = 0;
	d->next = *b;
	*b = d;
	return d;
}

void pc_dirty(const struct pc_id *id, uint64_t lo)
{
	struct dirty *d = dirty_get(id);

	if (lo < d->lo)
		d->lo = lo;
}

void pc_sticky(const struct pc_id *id)
{
	dirty_get(id)->sticky = 1;
}

/* ---- file contents --------------------------------------------------------- */

/* Copies [from, to) of rfd into ofd, at the same offsets. */
static void copy_range(int rfd, int ofd, uint64_t from, uint64_t to, const char *what)
{
	while (from < to) {
		size_t want = to - from < COPY_CHUNK ? (size_t)(to - from) : COPY_CHUNK;
		ssize_t n = pread(rfd, m.buf, want, (off_t)from), w;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			pc_die("%s: read: %s", what, strerror(errno));
		if (n == 0)
			return; /* shortened under us: the ftruncate that follows trims */
		for (ssize_t done = 0; done < n; done += w) {
			w = pc_real_pwrite(ofd, m.buf + done, (size_t)(n - done), (off_t)from + done);
			if (w < 0 && errno == EINTR)
				w = 0;
			else if (w < 0)
				pc_die("%s: write: %s", what, strerror(errno));
		}
		from += (uint64_t)n;
	}
}

void pc_sync_file(const struct pc_id *id, int rfd)
{
	struct dirty *d = dirty_get(id);
	uint64_t from = d->sticky ? 0 : d->lo;
	char p[PATH_MAX];
	struct stat ost, fst;
	int ofd;

	/* cleared before the copy reads: a write that lands during the copy
	 * marks the inode again and is copied by the next sync */
	d->lo = PC_CLEAN;
	sdir_path(p, "objects", id);
	lock_model(LOCK_EX);
	ofd = pc_real_openat(AT_FDCWD, p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (ofd < 0 || fstat(ofd, &ost) < 0 || fstat(rfd, &fst) < 0)
		pc_die("%s: %s", p, strerror(errno));
	if (from > (uint64_t)ost.st_size)
		from = (uint64_t)ost.st_size;
	copy_range(rfd, ofd, from, (uint64_t)fst.st_size, p);
	if (pc_real_ftruncate(ofd, fst.st_size) < 0)
		pc_die("%s: truncate: %s", p, strerror(errno));
	pc_real_close(ofd);
	lock_model(LOCK_UN);
}

/* ---- directories ------------------------------------------------------------- */

/* name as a listing field (see the top of the file). */
static void put_enc(FILE *f, const char *name)
{
	for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		    strchr("._,+=@:~-", *c))
			fputc(*c, f);
		else
			fprintf(f, "%%%02X", *c);
	}
}

typedef void entry_fn(int dfd, const char *name, const struct pc_id *id, mode_t mode, void *ctx);

/* Calls fn for every entry of the directory open as dfd (dfd is left as
 * it was: the entries are read through a descriptor of their own). */
static void each_entry(int dfd, entry_fn *fn, void *ctx)
{
	int fd = pc_real_openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	struct dirent *de;
	struct pc_id id;
	mode_t mode;
	DIR *d;
	int r;

	if (fd < 0 || !(d = fdopendir(fd)))
		pc_die("a directory under %s: %s", m.root, strerror(errno));
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		r = pc_id_of(fd, de->d_name, &id, &mode, NULL);
		if (r == -ENOENT || r == -ENODATA)
			continue; /* removed since readdir saw it; another filesystem */
		if (r < 0)
			pc_die("%s: %s", de->d_name, strerror(-r));
		fn(fd, de->d_name, &id, mode, ctx);
	}
	if (errno)
		pc_die("readdir under %s: %s", m.root, strerror(errno));
	closedir(d);
}

static void list_entry(int dfd, const char *name, const struct pc_id *id, mode_t mode, void *ctx)
{
	char ids[ID_LEN], target[PATH_MAX];
	FILE *f = ctx;
	ssize_t n;
	char kind;

	switch (mode & S_IFMT) {
	case S_IFREG: kind = 'f'; break;
	case S_IFDIR: kind = 'd'; break;
	case S_IFLNK: kind = 'l'; break;
	default: kind = 'o'; break;
	}
	id_str(ids, id);
	fprintf(f, "%c %04o %s ", kind, (unsigned)(mode & 07777), ids);
	put_enc(f, name);
	if (kind == 'l') {
		n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			pc_die("%s: readlink: %s", name, strerror(errno));
		target[n] = '\0';
		fputc(' ', f);
		put_enc(f, target);
	}
	fputc('\n', f);
}

void pc_sync_dir(const struct pc_id *id, int dfd)
{
	char tmp[PATH_MAX], p[PATH_MAX];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/tmp/dir.%ld.%ld", m.sdir, (long)getpid(), (long)gettid());
	sdir_path(p, "dirs", id);
	lock_model(LOCK_EX);
	fd = pc_real_openat(AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w")))
		pc_die("%s: %s", tmp, strerror(errno));
	fputs("powercut-dir 1\n", f);
	each_entry(dfd, list_entry, f);
	if (fclose(f) != 0 || rename(tmp, p) < 0)
		pc_die("%s: %s", p, strerror(errno));
	lock_model(LOCK_UN);
}

/* ---- the whole tree ---------------------------------------------------------- */

static void walk(int dfd, const struct pc_id *id);

static void walk_entry(int dfd, const char *name, const struct pc_id *id, mode_t mode, void *ctx)
{
	int fd;

	if (!S_ISREG(mode) && !S_ISDIR(mode))
		return;
	fd = pc_real_openat(dfd, name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (S_ISDIR(mode) ? O_DIRECTORY : 0), 0);
	if (fd < 0 && errno == ENOENT)
		return;
	if (fd < 0)
		pc_die("%s: %s", name, strerror(errno));
	if (S_ISREG(mode))
		pc_sync_file(id, fd);
	else
		walk(fd, id);
	pc_real_close(fd);
}

/* Makes the directory dfd (id) and everything under it durable. */
static void walk(int dfd, const struct pc_id *id)
{
	pc_sync_dir(id, dfd);
	each_entry(dfd, walk_entry, NULL);
}

void pc_sync_all(void)
{
	int fd = pc_real_openat(AT_FDCWD, m.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);

	if (fd < 0)
		pc_die("%s: %s", m.root, strerror(errno));
	walk(fd, &m.root_id);
	pc_real_close(fd);
}

/* ---- the model's start ----------------------------------------------------------- */

static void mkdir_in_sdir(const char *sub)
{
	char p[PATH_MAX];

	sdir_path(p, sub, NULL);
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		pc_die("%s: %s", p, strerror(errno));
}

/* 1 when SDIR/root describes the tree at root (a model to go on with), 0
 * when there is none; dies when it is another tree's. */
static int model_exists(void)
{
	char p[PATH_MAX], ids[ID_LEN], line[PATH_MAX + 2], want[ID_LEN];
	FILE *f;

	sdir_path(p, "root", NULL);
	f = fopen(p, "re");
	if (!f && errno == ENOENT)
		return 0;
	if (!f)
		pc_die("%s: %s", p, strerror(errno));
	id_str(want, &m.root_id);
	if (!fgets(line, sizeof(line), f) || strcmp(line, "powercut 1\n") != 0 || fscanf(f, "%63s", ids) != 1)
		pc_die("%s: not a powercut model", p);
	fclose(f);
	if (strcmp(ids, want) != 0)
		pc_die("%s holds the model of another tree (root %s; %s is %s): remove it", m.sdir, ids, m.root,
		       want);
	return 1;
}

static void write_root(void)
{
	char p[PATH_MAX], tmp[PATH_MAX], ids[ID_LEN];
	FILE *f;

	sdir_path(p, "root", NULL);
	snprintf(tmp, sizeof(tmp), "%s/root.tmp", m.sdir);
	id_str(ids, &m.root_id);
	f = fopen(tmp, "we");
	if (!f || fprintf(f, "powercut 1\n%s\n%s\n", ids, m.root) < 0 || fclose(f) != 0 || rename(tmp, p) < 0)
		pc_die("%s: %s", p, strerror(errno));
}

void pc_model_open(const char *root, const char *sdir)
{
	char p[PATH_MAX];
	int r;

	if (strlen(sdir) >= sizeof(m.sdir))
		pc_die("POWERCUT_SHADOW=%s: a path of %zu bytes at most", sdir, sizeof(m.sdir) - 1);
	snprintf(m.root, sizeof(m.root), "%s", root);
	snprintf(m.sdir, sizeof(m.sdir), "%s", sdir);
	m.root_len = strlen(m.root);
	r = pc_id_of(AT_FDCWD, m.root, &m.root_id, NULL, NULL);
	if (r < 0)
		pc_die("%s: %s", m.root, strerror(-r));
	m.opened = 1;
	mkdir_in_sdir("objects");
	mkdir_in_sdir("dirs");
	mkdir_in_sdir("tmp");
	sdir_path(p, "lock", NULL);
	m.lockfd = pc_real_openat(AT_FDCWD, p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (m.lockfd < 0)
		pc_die("%s: %s", p, strerror(errno));
	/* one snapshot, whoever of several processes comes first; root is
	 * written last, so a snapshot cut short is made again */
	lock_model(LOCK_EX);
	if (!model_exists()) {
		pc_sync_all();
		write_root();
	}
	lock_model(LOCK_UN);
}
