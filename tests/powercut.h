/* The power-cut shim's insides (tests/libpowercut.so), shared by its three
 * files: powercut.c (the opens, syncs and descriptor table it interposes,
 * the lock, start), powercut_write.c (the writes it interposes) and
 * powercut_model.c (the durable image on disk in POWERCUT_SHADOW). The
 * model and its limits are described at the top of powercut.c. Test code:
 * never linked into a daemon. */
#ifndef LOCKSTEP_POWERCUT_H
#define LOCKSTEP_POWERCUT_H

#include <stdint.h>
#include <sys/types.h>

/* None of this is exported: the shim's only symbols are the libc calls it
 * interposes. */
#pragma GCC visibility push(hidden)

/* What names a file's contents in the model: the device, the inode and its
 * birth time (statx btime), so that an inode number the filesystem reuses
 * for a new file is a new object, never the old one's. */
struct pc_id {
	uint64_t dev, ino;
	int64_t bsec;
	uint32_t bnsec;
};

/* "Nothing written since the last sync" as a lowest dirty offset. */
#define PC_CLEAN UINT64_MAX

/* ---- powercut.c -------------------------------------------------------- */

/* The next definition of name after the shim's (libc's, or a sanitizer's). */
void *pc_real_sym(const char *name);
/* REAL(name): that of name, looked up once. */
#define REAL(name)                                                             \
	({                                                                     \
		static __typeof__(name) *real_##name;                          \
		if (!real_##name)                                              \
			real_##name = (__typeof__(name) *)pc_real_sym(#name);  \
		real_##name;                                                   \
	})

/* The shim's lock (a mutex; in_shim set, so that the shim's own calls go
 * straight to libc). */
void pc_enter(void);
void pc_leave(void);
/* 1 when the model is open and the caller is not the shim itself. */
int pc_modelling(void);
/* 1 when fd is in the table: a regular file under DIR open for writing. */
int pc_tracked(int fd);
/* With the lock held: the inode of a tracked fd, and whether its writes
 * are synchronous (O_SYNC, O_DSYNC). */
void pc_fd_get(int fd, struct pc_id *id, int *sync);
/* With the lock held: the durable contents of fd's file (id) become its
 * contents now. */
void pc_sync_fd(int fd, const struct pc_id *id);

/* The real libc functions the model uses. */
int pc_real_openat(int dfd, const char *path, int flags, mode_t mode);
int pc_real_close(int fd);
ssize_t pc_real_pwrite(int fd, const void *buf, size_t len, off_t off);
int pc_real_ftruncate(int fd, off_t len);

/* Prints "powercut: MSG" on stderr and aborts: a model that cannot be kept
 * must not let a test believe it was. */
__attribute__((noreturn, format(printf, 1, 2))) void pc_die(const char *fmt, ...);

/* ---- powercut_model.c (every call with the model's lock held) ----------- */

/* Opens (creating it if needed) the model in sdir for the tree at root
 * (both absolute, resolved paths); snapshots the tree when sdir holds no
 * model yet. Dies on failure. */
void pc_model_open(const char *root, const char *sdir);
/* The model's root device (only files on it are modelled). */
uint64_t pc_model_dev(void);
/* 1 when path (absolute, resolved; " (deleted)" stripped) is root or under it. */
int pc_model_under(const char *path);

/* The identity of fd's file, or of name in dfd (not followed) when name is
 * non-NULL; also its mode (type and permission bits) and size. -errno on
 * failure, -ENODATA for a file with no birth time on another device than
 * the root's (a pipe, /proc); dies for one on the root's device. */
int pc_id_of(int dfd, const char *name, struct pc_id *id, mode_t *mode, uint64_t *size);
/* 1 when the model has contents or a listing for id (it was synced or
 * snapshotted). */
int pc_model_has(const struct pc_id *id);

/* Notes that id's bytes from lo on may differ from its durable contents. */
void pc_dirty(const struct pc_id *id, uint64_t lo);
/* Notes that id is written by ways the shim does not see (stdio, a shared
 * mapping): every sync copies it whole. */
void pc_sticky(const struct pc_id *id);

/* fsync/fdatasync of the regular file id, open (readable) as rfd: its
 * durable contents become what rfd reads now. */
void pc_sync_file(const struct pc_id *id, int rfd);
/* fsync of the directory id, open as dfd: its durable listing becomes what
 * it holds now. */
void pc_sync_dir(const struct pc_id *id, int dfd);
/* sync/syncfs: everything under root becomes durable. */
void pc_sync_all(void);
/* In a child after fork: its own lock on the model (flock is per open file). */
void pc_model_atfork_child(void);

#pragma GCC visibility pop

#endif
