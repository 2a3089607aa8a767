/* Durable replacement of files, and their gentle removal (durable.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "durable.h"

int durable_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int durable_sync_parent(const char *path)
{
	char dir[4096];
	char *slash;

	if ((size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir))
		return -ENAMETOOLONG;
	while ((slash = strrchr(dir, '/')) && slash[1] == '\0' && slash != dir)
		*slash = '\0'; /* trailing slashes */
	slash = strrchr(dir, '/');
	if (!slash)
		return durable_sync_dir(".");
	slash[slash == dir] = '\0'; /* "/name": the root */
	return durable_sync_dir(dir);
}

int durable_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The slice [off, off + len) of fd on disk now, and out of the page cache.
 * 0, or the -errno of a write that failed: its wait reports the error
 * once, and the final fsync would not see it again. Where the file system
 * has no such call, the final fsync does it all. */
static int slice_out(int fd, off_t off, off_t len)
{
	if (sync_file_range(fd, off, len,
			    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER) < 0 &&
	    errno != EINVAL && errno != ENOSYS && errno != ESPIPE && errno != EOPNOTSUPP)
		return -errno;
	(void)posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED);
	return 0;
}

/* Writes len bytes to fd at *off, each DURABLE_SLICE boundary crossed put
 * on disk (slice_out) before more is written. 0 or -errno. */
static int write_sliced(int fd, const char *p, size_t len, off_t *off)
{
	while (len) {
		size_t room = DURABLE_SLICE - (size_t)(*off % DURABLE_SLICE);
		size_t k = len < room ? len : room;
		int r = durable_write_all(fd, p, k);

		if (r < 0)
			return r;
		*off += (off_t)k;
		p += k;
		len -= k;
		if (*off % DURABLE_SLICE == 0 &&
		    (r = slice_out(fd, *off - DURABLE_SLICE, DURABLE_SLICE)) < 0)
			return r;
	}
	return 0;
}

/* Writes all of iov to fd. 0 or -errno. */
static int write_iov(int fd, const struct iovec *iov, int n)
{
	off_t off = 0;

	for (int i = 0; i < n; i++) {
		int r = write_sliced(fd, iov[i].iov_base, iov[i].iov_len, &off);

		if (r < 0)
			return r;
	}
	return 0;
}

int durable_write(const char *path, const struct iovec *iov, int n, mode_t mode)
{
	char tmp[4200];
	int fd, r;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	if (unlink(tmp) < 0 && errno != ENOENT)
		return -errno;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	r = write_iov(fd, iov, n);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	return durable_sync_parent(path);
}

int durable_remove(const char *path)
{
	struct timespec pause = { 0, DURABLE_REMOVE_PAUSE_NS };
	struct stat st;
	int fd = -1, r = 0;

	/* a regular file only is opened (not a device, a FIFO, a link) */
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
		fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (unlink(path) < 0)
		r = -errno;
	/* its last name gone (not a link's target, nor a file with another
	 * name): freed a slice at a time, and at once at the close */
	if (fd >= 0 && r == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0) {
		for (off_t size = st.st_size; size > (off_t)DURABLE_SLICE;) {
			size -= (size - 1) % DURABLE_SLICE + 1; /* down to a boundary */
			if (ftruncate(fd, size) < 0)
				break;
			nanosleep(&pause, NULL);
		}
	}
	if (fd >= 0)
		close(fd);
	return r;
}
