/* Small files written so that a crash or a power cut leaves the old
 * contents or the new, never a mix nor nothing: a new temporary file beside
 * the file (PATH.tmp: a stale one is removed first; created with O_EXCL,
 * never opened through a link), the data, fsync, rename over the file,
 * fsync of the directory. The gateway's progress file, the sequencer's
 * term and vote, the matcher's snapshots. No logging, no allocation;
 * errors are negative errnos (the file is then untouched). */
#ifndef LOCKSTEP_DURABLE_H
#define LOCKSTEP_DURABLE_H

#include <sys/types.h>
#include <sys/uio.h>

/* Replaces path by the n buffers of iov, created with mode. */
int durable_write(const char *path, const struct iovec *iov, int n, mode_t mode);
/* Writes all n bytes to fd (short writes and EINTR retried). 0 or -errno. */
int durable_write_all(int fd, const void *buf, size_t n);
/* fsync of the directory dir, or of the directory holding path. */
int durable_sync_dir(const char *dir);
int durable_sync_parent(const char *path);

#endif
