/* Durable replacement of small files (durable.h). */
#include <errno.h>
#include <fcntl.h>
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

/* Writes all of iov to fd. 0 or -errno. */
static int write_iov(int fd, const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++) {
		int r = durable_write_all(fd, iov[i].iov_base, iov[i].iov_len);

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
