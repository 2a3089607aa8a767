/* Files written so that a crash or a power cut leaves the old contents or
 * the new, never a mix nor nothing: a new temporary file beside the file
 * (PATH.tmp: a stale one is removed first; created with O_EXCL, never
 * opened through a link), the data, fsync, rename over the file, fsync of
 * the directory. The gateway's progress file, the sequencer's term and
 * vote, the matcher's snapshots. No logging, no allocation; errors are
 * negative errnos (durable_write's leave the file untouched).
 *
 * Large files are written, and removed, without stalling the other
 * processes' syncs on the same disk. Another process's fdatasync waits
 * behind the writes already queued (and its cache flush behind those in
 * the device's cache), and an unlink frees, and with discard discards, all
 * of a file's blocks at once: a 60 MB file written and then fsynced at once
 * held another process's 100-byte fdatasync for 50-59 ms, and unlinking
 * one for 15-27 ms (measured on this project's virtio machines, ext4;
 * 2-4 ms otherwise). So the data goes out DURABLE_SLICE at
 * a time, each slice on disk (sync_file_range) before the next is written
 * (the same fdatasync: under 4 ms), and a large file is freed by cutting
 * it down a slice at a time, a pause between cuts, after its unlink
 * (under 5 ms; a crash midway leaves nothing: the kernel frees an
 * unlinked file at the next mount). Both are for threads off the orders'
 * path: they take longer (a 60 MB file: ~90 ms to write, ~0.4 s to
 * remove). */
#ifndef LOCKSTEP_DURABLE_H
#define LOCKSTEP_DURABLE_H

#include <sys/types.h>
#include <sys/uio.h>

#define DURABLE_SLICE (1u << 20)

/* Replaces path by the n buffers of iov, created with mode. */
int durable_write(const char *path, const struct iovec *iov, int n, mode_t mode);
#define DURABLE_REMOVE_PAUSE_NS (5 * 1000000L)

/* Removes the name path (a link itself, never its target); when that was
 * a regular file's last name, frees a large one a slice at a time
 * (DURABLE_SLICE, DURABLE_REMOVE_PAUSE_NS between) through a descriptor
 * opened before the unlink (a reader that holds it open sees it shrink).
 * 0 or -errno of the unlink. */
int durable_remove(const char *path);
/* Writes all n bytes to fd (short writes and EINTR retried). 0 or -errno. */
int durable_write_all(int fd, const void *buf, size_t n);
/* fsync of the directory dir, or of the directory holding path. */
int durable_sync_dir(const char *dir);
int durable_sync_parent(const char *path);

#endif
