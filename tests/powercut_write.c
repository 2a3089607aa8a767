/* libpowercut.so's writes (the model: tests/powercut.c): every call that
 * changes a file's contents by descriptor, and mmap. Each notes, for a
 * descriptor in the table (a regular file under DIR open for writing), the
 * lowest offset it may have changed, so that the next sync copies only
 * [that offset, size); a write through O_SYNC/O_DSYNC or with
 * RWF_SYNC/RWF_DSYNC is made durable before it returns; a shared mapping
 * makes its file one copied whole at every sync. Any other descriptor goes
 * straight to libc after one load of its table entry. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "powercut.h"

/* A write to a tracked descriptor, between before() and after(). */
struct wr {
	int on, sync;
	struct pc_id id;
	uint64_t lo; /* the lowest offset it may change */
};

/* Before a write to fd at off (-1: at the file position, or the end with
 * O_APPEND). The lowest offset is taken below the size too: pwrite on an
 * O_APPEND descriptor writes at the end, whatever off says. */
static void before(int fd, int64_t off, struct wr *w)
{
	struct stat st;
	int e = errno;
	off_t pos;

	w->on = 0;
	if (!pc_modelling() || !pc_tracked(fd))
		return;
	pc_enter();
	pc_fd_get(fd, &w->id, &w->sync);
	pc_leave();
	w->on = 1;
	w->lo = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	if (off < 0)
		off = (pos = lseek(fd, 0, SEEK_CUR)) < 0 ? 0 : pos;
	if ((uint64_t)off < w->lo)
		w->lo = (uint64_t)off;
	errno = e;
}

/* After it: ok when it changed anything; n bytes written at the file
 * position when positional (the position moved past them). */
static void after(int fd, struct wr *w, int ok, int positional, ssize_t n, int sync)
{
	int e = errno;
	off_t pos;

	if (!w->on || !ok)
		return;
	if (positional && (pos = lseek(fd, 0, SEEK_CUR)) >= n && (uint64_t)(pos - n) < w->lo)
		w->lo = (uint64_t)(pos - n);
	pc_enter();
	pc_dirty(&w->id, w->lo);
	if (w->sync || sync)
		pc_sync_fd(fd, &w->id);
	pc_leave();
	errno = e;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	struct wr w;
	ssize_t r;

	before(fd, -1, &w);
	r = REAL(write)(fd, buf, len);
	after(fd, &w, r > 0, 1, r, 0);
	return r;
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct wr w;
	ssize_t r;

	before(fd, -1, &w);
	r = REAL(writev)(fd, iov, n);
	after(fd, &w, r > 0, 1, r, 0);
	return r;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	struct wr w;
	ssize_t r;

	before(fd, off, &w);
	r = REAL(pwrite)(fd, buf, len, off);
	after(fd, &w, r > 0, 0, r, 0);
	return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	struct wr w;
	ssize_t r;

	before(fd, off, &w);
	r = REAL(pwrite64)(fd, buf, len, off);
	after(fd, &w, r > 0, 0, r, 0);
	return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	struct wr w;
	ssize_t r;

	before(fd, off, &w);
	r = REAL(pwritev)(fd, iov, n, off);
	after(fd, &w, r > 0, 0, r, 0);
	return r;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t off)
{
	struct wr w;
	ssize_t r;

	before(fd, off, &w);
	r = REAL(pwritev64)(fd, iov, n, off);
	after(fd, &w, r > 0, 0, r, 0);
	return r;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	struct wr w;
	ssize_t r;

	before(fd, off, &w);
	r = REAL(pwritev2)(fd, iov, n, off, flags);
	after(fd, &w, r > 0, off < 0, r, !!(flags & (RWF_SYNC | RWF_DSYNC)));
	return r;
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags)
{
	struct wr w;
	ssize_t r;

	before(fd, off, &w);
	r = REAL(pwritev64v2)(fd, iov, n, off, flags);
	after(fd, &w, r > 0, off < 0, r, !!(flags & (RWF_SYNC | RWF_DSYNC)));
	return r;
}

ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct wr w;
	ssize_t r;

	before(out, -1, &w);
	r = REAL(sendfile)(out, in, off, count);
	after(out, &w, r > 0, 1, r, 0);
	return r;
}

ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
	struct wr w;
	ssize_t r;

	before(out, -1, &w);
	r = REAL(sendfile64)(out, in, off, count);
	after(out, &w, r > 0, 1, r, 0);
	return r;
}

ssize_t copy_file_range(int in, off64_t *off_in, int out, off64_t *off_out, size_t len, unsigned flags)
{
	struct wr w;
	ssize_t r;

	before(out, off_out ? *off_out : -1, &w);
	r = REAL(copy_file_range)(in, off_in, out, off_out, len, flags);
	after(out, &w, r > 0, !off_out, r, 0);
	return r;
}

int ftruncate(int fd, off_t len)
{
	struct wr w;
	int r;

	before(fd, len, &w);
	r = REAL(ftruncate)(fd, len);
	after(fd, &w, r == 0, 0, 0, 0);
	return r;
}

int ftruncate64(int fd, off64_t len)
{
	struct wr w;
	int r;

	before(fd, len, &w);
	r = REAL(ftruncate64)(fd, len);
	after(fd, &w, r == 0, 0, 0, 0);
	return r;
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	struct wr w;
	int r;

	before(fd, off, &w);
	r = REAL(fallocate)(fd, mode, off, len);
	after(fd, &w, r == 0, 0, 0, 0);
	return r;
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	struct wr w;
	int r;

	before(fd, off, &w);
	r = REAL(fallocate64)(fd, mode, off, len);
	after(fd, &w, r == 0, 0, 0, 0);
	return r;
}

int posix_fallocate(int fd, off_t off, off_t len)
{
	struct wr w;
	int r;

	before(fd, off, &w);
	r = REAL(posix_fallocate)(fd, off, len);
	after(fd, &w, r == 0, 0, 0, 0);
	return r;
}

int posix_fallocate64(int fd, off64_t off, off64_t len)
{
	struct wr w;
	int r;

	before(fd, off, &w);
	r = REAL(posix_fallocate64)(fd, off, len);
	after(fd, &w, r == 0, 0, 0, 0);
	return r;
}

/* truncate(path): the file opened for the while, so that the descriptor
 * code above applies (a file not under DIR is left alone). */
static int truncate_path(const char *path, off64_t len)
{
	int fd, r, e;

	if (!pc_modelling())
		return REAL(truncate64)(path, len);
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return REAL(truncate64)(path, len); /* its errno, e.g. EISDIR */
	r = ftruncate64(fd, len);
	e = errno;
	close(fd);
	errno = e;
	return r;
}

int truncate(const char *path, off_t len)
{
	return truncate_path(path, len);
}

int truncate64(const char *path, off64_t len)
{
	return truncate_path(path, len);
}

/* A shared mapping of a tracked file: its writes are unseen. */
static void mapped(int fd, int flags)
{
	struct pc_id id;
	int sync;

	if (!(flags & MAP_SHARED) || !pc_modelling() || !pc_tracked(fd))
		return;
	pc_enter();
	pc_fd_get(fd, &id, &sync);
	pc_sticky(&id);
	pc_leave();
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	mapped(fd, flags);
	return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	mapped(fd, flags);
	return REAL(mmap64)(addr, len, prot, flags, fd, off);
}
