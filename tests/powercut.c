/* libpowercut.so: power-cut tests without a power cut. Preloaded into a
 * process (LD_PRELOAD) with
 *   POWERCUT_ROOT=DIR     the tree whose durability is modelled (a node's
 *                         state directory; nothing outside it is)
 *   POWERCUT_SHADOW=SDIR  where the model lives (outside DIR)
 * it keeps in SDIR, on disk, what DIR would hold after a power cut at any
 * moment; the test kills the process with SIGKILL (the "cut") and
 * tests/powercut_restore DIR SDIR replaces DIR's contents with that image.
 * Neither variable set: the shim does nothing.
 *
 * The model is strict POSIX, the least a filesystem promises:
 *  - a regular file's contents (and size) become durable at fsync or
 *    fdatasync of any descriptor of it (a dup, another thread's), keyed by
 *    the inode (device, inode number and birth time, so that a reused
 *    inode number is a new file; the shim stops with a message on a
 *    filesystem that reports no birth time), not the descriptor; a
 *    write with O_SYNC/O_DSYNC or RWF_SYNC/RWF_DSYNC is durable when it
 *    returns;
 *  - a directory's entries (a new name, a rename, an unlink, a mkdir)
 *    become durable only at fsync of that directory, which records the
 *    whole listing as it is then (name -> inode); a new name that a synced
 *    directory holds but whose file was never synced is an empty file;
 *  - sync() and syncfs() on DIR's filesystem make everything under DIR
 *    durable;
 *  - at start, when SDIR holds no model yet, everything under DIR is taken
 *    as durable (a snapshot); when it does (a restart without a cut), the
 *    model goes on.
 * So renames, unlinks and mkdirs need no interception: a directory's state
 * is read from the directory at its fsync. What is intercepted: the opens
 * (open, openat, creat and their 64 and fortified variants; fopen, freopen,
 * fdopen), the descriptor table (close, dup, dup2, dup3, fcntl F_DUPFD*),
 * every write by descriptor (write, writev, pwrite, pwritev, pwritev2,
 * ftruncate, truncate, fallocate, posix_fallocate, copy_file_range,
 * sendfile: each notes the lowest offset it may have changed, so that a
 * sync copies only [that offset, size)) and mmap (a shared mapping of a
 * file under DIR), in powercut_write.c; fsync, fdatasync, syncfs, sync. Thread-safe (one mutex;
 * the model's files are also flock()ed, for several processes on one SDIR).
 * Descriptors inherited across exec are adopted at start. Files written
 * with stdio (fopen) are seen at fopen and copied whole at each sync, since
 * stdio's writes do not pass through the interposed write(). O_DIRECT is
 * a write like any other (durable at fsync, as POSIX has it).
 *
 * Not modelled (the daemons use none of them for files in a state
 * directory: no mmap, splice or O_DIRECT in common/ sequencer/ gateway/
 * matcher/; grep again before relying on one): writes through io_uring
 * (lockstep's rings carry datagrams only), splice, vmsplice, FICLONE
 * ioctls, opens by openat2 or raw syscall(2); data made durable by msync
 * alone (a file written through a shared mapping is copied whole at its
 * next fsync); chmod, chown, utimes (a listing keeps the mode it saw); one
 * file written by two processes at once (each tracks its own writes; an
 * inode new to a process is copied whole); a write racing an lseek on one
 * open file description.
 *
 * The image is one outcome a cut allows, the one where every change not
 * made durable is lost whole. It is stricter than ext4 or XFS in practice
 * (where an fsync of a new file usually makes its name durable too), and
 * it never produces the other outcomes a real cut may: part of an unsynced
 * write kept (a torn record), or some unsynced writes kept and not others.
 * A SIGKILL in the middle of an fsync may leave part of what that fsync
 * would have made durable, which a cut may too. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powercut.h"

/* Descriptors below this are looked up in the table; a file under DIR open
 * for writing at a higher one is copied whole at every sync. */
#define PC_FDS 65536

/* A descriptor open for writing on a regular file under DIR. */
struct pc_fd {
	atomic_int on;
	int sync; /* O_SYNC or O_DSYNC: each write is durable at once */
	struct pc_id id;
};

static struct pc_fd *fdtab;
static atomic_int active; /* the model is open */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int in_shim; /* the shim's own calls pass straight through */

/* ---- the real functions -------------------------------------------------- */

void *pc_real_sym(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (!f)
		pc_die("no %s after the shim: %s", name, dlerror());
	return f;
}

void pc_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dprintf(2, "powercut: ");
	vdprintf(2, fmt, ap);
	dprintf(2, "\n");
	va_end(ap);
	abort();
}

int pc_real_openat(int dfd, const char *path, int flags, mode_t mode)
{
	return REAL(openat)(dfd, path, flags, mode);
}

int pc_real_close(int fd)
{
	return REAL(close)(fd);
}

ssize_t pc_real_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return REAL(pwrite)(fd, buf, len, off);
}

int pc_real_ftruncate(int fd, off_t len)
{
	return REAL(ftruncate)(fd, len);
}

/* ---- the lock --------------------------------------------------------------- */

void pc_enter(void)
{
	pthread_mutex_lock(&mu);
	in_shim++;
}

void pc_leave(void)
{
	in_shim--;
	pthread_mutex_unlock(&mu);
}

int pc_modelling(void)
{
	return atomic_load_explicit(&active, memory_order_acquire) && !in_shim;
}

/* ---- which files are modelled ------------------------------------------------ */

/* 1 when fd's file (regular or directory, as id and mode say) is under DIR:
 * its path is, or (unlinked, renamed away) the model already has it. */
static int fd_under(int fd, const struct pc_id *id)
{
	char link[64], path[PATH_MAX + 16];
	ssize_t n;
	size_t l;

	if (id->dev != pc_model_dev())
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0 && (errno == ENOENT || errno == EBADF))
		return 0; /* closed by another thread meanwhile: nothing to model */
	if (n < 0)
		pc_die("%s: %s", link, strerror(errno));
	path[n] = '\0';
	l = strlen(" (deleted)");
	if ((size_t)n > l && !strcmp(path + n - l, " (deleted)"))
		path[n - l] = '\0';
	return pc_model_under(path) || pc_model_has(id);
}

void pc_fd_get(int fd, struct pc_id *id, int *sync)
{
	*id = fdtab[fd].id;
	*sync = fdtab[fd].sync;
}

int pc_tracked(int fd)
{
	return fd >= 0 && fd < PC_FDS && fdtab && atomic_load_explicit(&fdtab[fd].on, memory_order_acquire);
}

static void fd_clear(int fd)
{
	if (fd >= 0 && fd < PC_FDS && fdtab)
		atomic_store(&fdtab[fd].on, 0);
}

/* After a successful open of fd with flags: fd enters the table when it is
 * a regular file under DIR open for writing. */
static int opened(int fd, int flags)
{
	struct pc_id id;
	mode_t mode;
	int e = errno;

	if (fd < 0 || !pc_modelling())
		return fd;
	fd_clear(fd); /* a number fclose() or closedir() gave back */
	if (pc_id_of(fd, NULL, &id, &mode, NULL) == 0 && S_ISREG(mode) && fd_under(fd, &id)) {
		pc_enter();
		if (flags & O_TRUNC)
			pc_dirty(&id, 0);
		if ((flags & O_ACCMODE) != O_RDONLY) {
			if (fd < PC_FDS) {
				fdtab[fd].id = id;
				fdtab[fd].sync = !!(flags & (O_SYNC | O_DSYNC));
				atomic_store(&fdtab[fd].on, 1);
			} else {
				pc_sticky(&id);
			}
		}
		pc_leave();
	}
	errno = e;
	return fd;
}

/* After stdio opened fd with mode: its writes will not pass through
 * write(), so a file under DIR is copied whole at every sync. */
static void stdio_opened(int fd, const char *mode)
{
	struct pc_id id;
	mode_t m;
	int e = errno;

	if (!pc_modelling())
		return;
	fd_clear(fd);
	if (strpbrk(mode, "wa+") && pc_id_of(fd, NULL, &id, &m, NULL) == 0 && S_ISREG(m) && fd_under(fd, &id)) {
		pc_enter();
		pc_dirty(&id, 0);
		pc_sticky(&id);
		pc_leave();
	}
	errno = e;
}

/* After a dup of from as to (to >= 0): to is what from is. */
static int duped(int from, int to)
{
	if (to < 0 || !pc_modelling())
		return to;
	pc_enter();
	if (pc_tracked(from) && to < PC_FDS) {
		fdtab[to].id = fdtab[from].id;
		fdtab[to].sync = fdtab[from].sync;
		atomic_store(&fdtab[to].on, 1);
	} else if (pc_tracked(from)) {
		pc_sticky(&fdtab[from].id);
	} else {
		fd_clear(to);
	}
	pc_leave();
	return to;
}

/* ---- syncs ----------------------------------------------------------------------- */

/* A readable descriptor of fd's file: fd itself, or the file opened anew
 * through /proc (an O_WRONLY descriptor, a deleted file too). */
static int readable(int fd)
{
	char link[64];
	int fl = fcntl(fd, F_GETFL), r;

	if (fl >= 0 && (fl & O_ACCMODE) != O_WRONLY && !(fl & O_PATH))
		return fd;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	r = pc_real_openat(AT_FDCWD, link, O_RDONLY | O_CLOEXEC, 0);
	if (r < 0)
		pc_die("%s: reopen to read: %s", link, strerror(errno));
	return r;
}

void pc_sync_fd(int fd, const struct pc_id *id)
{
	int rfd = readable(fd);

	pc_sync_file(id, rfd);
	if (rfd != fd)
		pc_real_close(rfd);
}

/* After a successful fsync/fdatasync of fd. */
static void synced(int fd)
{
	struct pc_id id;
	mode_t mode;
	int e = errno;

	if (!pc_modelling())
		return;
	if (pc_id_of(fd, NULL, &id, &mode, NULL) == 0 && (S_ISREG(mode) || S_ISDIR(mode)) && fd_under(fd, &id)) {
		pc_enter();
		if (S_ISREG(mode))
			pc_sync_fd(fd, &id);
		else
			pc_sync_dir(&id, fd);
		pc_leave();
	}
	errno = e;
}

static void synced_all(void)
{
	int e = errno;

	if (!pc_modelling())
		return;
	pc_enter();
	pc_sync_all();
	pc_leave();
	errno = e;
}

/* ---- syncs ------------------------------------------------------------------------ */

int fsync(int fd)
{
	int r = REAL(fsync)(fd);

	if (r == 0)
		synced(fd);
	return r;
}

int fdatasync(int fd)
{
	int r = REAL(fdatasync)(fd);

	if (r == 0)
		synced(fd);
	return r;
}

int syncfs(int fd)
{
	struct stat st;
	int r = REAL(syncfs)(fd);

	if (r == 0 && pc_modelling() && fstat(fd, &st) == 0 && st.st_dev == pc_model_dev())
		synced_all();
	return r;
}

void sync(void)
{
	REAL(sync)();
	synced_all();
}

/* ---- opens --------------------------------------------------------------------------- */

/* The mode argument of an open with flags, from the caller's va_list. */
#define OPEN_MODE(flags, last)                                                  \
	({                                                                      \
		mode_t mode_ = 0;                                               \
		if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
			va_list ap_;                                            \
			va_start(ap_, last);                                    \
			mode_ = (mode_t)va_arg(ap_, unsigned);                  \
			va_end(ap_);                                            \
		}                                                               \
		mode_;                                                          \
	})

int open(const char *path, int flags, ...)
{
	return opened(REAL(open)(path, flags, OPEN_MODE(flags, flags)), flags);
}

int open64(const char *path, int flags, ...)
{
	return opened(REAL(open64)(path, flags, OPEN_MODE(flags, flags)), flags);
}

int openat(int dfd, const char *path, int flags, ...)
{
	return opened(REAL(openat)(dfd, path, flags, OPEN_MODE(flags, flags)), flags);
}

int openat64(int dfd, const char *path, int flags, ...)
{
	return opened(REAL(openat64)(dfd, path, flags, OPEN_MODE(flags, flags)), flags);
}

int creat(const char *path, mode_t mode)
{
	return opened(REAL(creat)(path, mode), O_CREAT | O_WRONLY | O_TRUNC);
}

int creat64(const char *path, mode_t mode)
{
	return opened(REAL(creat64)(path, mode), O_CREAT | O_WRONLY | O_TRUNC);
}

/* glibc's _FORTIFY_SOURCE entry points (no mode: never O_CREAT). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dfd, const char *path, int flags);
int __openat64_2(int dfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
	return opened(REAL(__open_2)(path, flags), flags);
}

int __open64_2(const char *path, int flags)
{
	return opened(REAL(__open64_2)(path, flags), flags);
}

int __openat_2(int dfd, const char *path, int flags)
{
	return opened(REAL(__openat_2)(dfd, path, flags), flags);
}

int __openat64_2(int dfd, const char *path, int flags)
{
	return opened(REAL(__openat64_2)(dfd, path, flags), flags);
}

FILE *fopen(const char *path, const char *mode)
{
	FILE *f = REAL(fopen)(path, mode);

	if (f)
		stdio_opened(fileno(f), mode);
	return f;
}

FILE *fopen64(const char *path, const char *mode)
{
	FILE *f = REAL(fopen64)(path, mode);

	if (f)
		stdio_opened(fileno(f), mode);
	return f;
}

FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	FILE *f = REAL(freopen)(path, mode, stream);

	if (f)
		stdio_opened(fileno(f), mode);
	return f;
}

FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	FILE *f = REAL(freopen64)(path, mode, stream);

	if (f)
		stdio_opened(fileno(f), mode);
	return f;
}

FILE *fdopen(int fd, const char *mode)
{
	FILE *f = REAL(fdopen)(fd, mode);

	if (f)
		stdio_opened(fd, mode);
	return f;
}

/* ---- the descriptor table ------------------------------------------------------- */

int close(int fd)
{
	fd_clear(fd); /* first: the number may be reused as soon as it is closed */
	return REAL(close)(fd);
}

int dup(int fd)
{
	return duped(fd, REAL(dup)(fd));
}

int dup2(int fd, int to)
{
	return duped(fd, REAL(dup2)(fd, to));
}

int dup3(int fd, int to, int flags)
{
	return duped(fd, REAL(dup3)(fd, to, flags));
}

/* fcntl's third argument, whatever its type (an int or a pointer, passed
 * the same way by the ABIs glibc supports, as glibc's own fcntl reads it). */
static int fcntl_any(int (*f)(int, int, ...), int fd, int cmd, void *arg)
{
	int r = f(fd, cmd, arg);

	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return duped(fd, r);
	return r;
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(REAL(fcntl), fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(REAL(fcntl64), fd, cmd, arg);
}

/* ---- start ----------------------------------------------------------------------------- */

/* The descriptors the process started with (inherited across exec) enter
 * the table as if opened now. */
static void adopt_inherited(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int fd, fl;

	if (!d)
		pc_die("/proc/self/fd: %s", strerror(errno));
	while ((de = readdir(d))) {
		fd = atoi(de->d_name);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd == dirfd(d))
			continue;
		fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			opened(fd, fl & ~O_TRUNC);
	}
	closedir(d);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&mu);
}

static void fork_child(void)
{
	if (atomic_load(&active))
		pc_model_atfork_child();
	pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void pc_start(void)
{
	const char *root = getenv("POWERCUT_ROOT"), *sdir = getenv("POWERCUT_SHADOW");
	char r[PATH_MAX], s[PATH_MAX];

	if (!root && !sdir)
		return;
	if (!root || !sdir || !*root || !*sdir)
		pc_die("set both POWERCUT_ROOT and POWERCUT_SHADOW, or neither");
	in_shim++;
	if (!realpath(root, r))
		pc_die("POWERCUT_ROOT=%s: %s", root, strerror(errno));
	if (mkdir(sdir, 0700) < 0 && errno != EEXIST)
		pc_die("POWERCUT_SHADOW=%s: %s", sdir, strerror(errno));
	if (!realpath(sdir, s))
		pc_die("POWERCUT_SHADOW=%s: %s", sdir, strerror(errno));
	if (!strncmp(s, r, strlen(r)) && (s[strlen(r)] == '/' || !s[strlen(r)]))
		pc_die("POWERCUT_SHADOW=%s is under POWERCUT_ROOT=%s", s, r);
	if (!strncmp(r, s, strlen(s)) && r[strlen(s)] == '/')
		pc_die("POWERCUT_ROOT=%s is under POWERCUT_SHADOW=%s", r, s);
	pc_model_open(r, s);
	fdtab = calloc(PC_FDS, sizeof(*fdtab));
	if (!fdtab || pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
		pc_die("out of memory");
	in_shim--;
	atomic_store(&active, 1);
	adopt_inherited();
}
