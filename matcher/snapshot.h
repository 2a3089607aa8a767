/* The matcher's snapshot files, shared by the daemon (matcher/snapshot.c
 * also holds its snapshot directory) and lockstep-replay rebuild
 * (ops/replay.c), so that an offline rebuild writes the very files that a
 * live matcher does. */
#ifndef LOCKSTEP_MATCHER_SNAPSHOT_H
#define LOCKSTEP_MATCHER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* Snapshots: <state_dir>/snapshots/snap-<tape seq, 20 digits>.lss: the
 * engine's image, serialized in memory, then written by a thread to a .tmp
 * file, fsynced and renamed. Layout (little-endian): a 64-byte header
 * { char magic[8] "LSSNAP\0\1", u32 version (1), u32 partition, u64 tape
 * seq (the last event applied), u64 exec_next (the next exec stream
 * sequence number), u64 term, u64 commit, u64 engine_hash, u64 body length },
 * the engine's snapshot (engine_snapshot_write), then two u32 CRC32Cs: of
 * the header, and of the body. At start-up the newest snapshot that passes every check
 * (magic, version, partition, length, CRC, a loaded state whose hash equals
 * the header's) is loaded and the tape is replayed from the next seq through
 * retransmission; any other is skipped with a warning. */
#define MATCHER_SNAP_VERSION 2u
#define MATCHER_SNAP_HDR_LEN 64

/* Version 2 (version 1 is still read): the body is the engine's snapshot
 * followed by the public feed's position (feedgen.h), 32 bytes
 * (little-endian): u32 day, u32 flags (MATCHER_SNAP_FEED_*), u64 next, 16
 * bytes zero. A version 1 file has none: loaded, its position is unknown
 * (flags 0). */
#define MATCHER_SNAP_FEED_KNOWN 1u /* the position below is the feed's */
#define MATCHER_SNAP_FEED_STARTED 2u
#define MATCHER_SNAP_FEED_ENDED 4u
struct matcher_snap_feed {
	uint32_t day, flags;
	uint64_t next;
	uint64_t zero[2];
};

/* The header's fields, in file order (little-endian hosts). */
struct matcher_snap_hdr {
	char magic[8];
	uint32_t version, partition;
	uint64_t seq, exec_next, term, commit, hash, body_len;
};

/* Writes <dir>/snap-<h->seq, 20 digits>.lss (through a .tmp file, fsynced,
 * renamed, the directory fsynced) of engine `e`. The caller sets partition,
 * seq, exec_next, term and commit; magic, version, hash and body_len are
 * filled here. Returns 0 or a negative errno (the .tmp file is removed).
 * matcher_snapshot_image() then matcher_snapshot_write_image(). */
int matcher_snapshot_write(const char *dir, struct matcher_snap_hdr *h, const struct engine *e,
			   const struct matcher_snap_feed *feed);

/* A snapshot's body in memory: the engine's image and its CRC32C. Built in
 * the engine's thread (it reads the engine), written from any (it reads
 * nothing else), so that the daemon pauses for the serialization alone and
 * a thread does the file. buf grows as needed and is kept for the next. */
struct matcher_snap_image {
	uint8_t *buf;
	size_t len, cap;
	uint32_t crc;
};
/* 0, or a negative errno (-ENOMEM). feed: the feed's position (NULL:
 * unknown, or no feed). */
int matcher_snapshot_image(struct matcher_snap_image *im, const struct engine *e,
			   const struct matcher_snap_feed *feed);
/* matcher_snapshot_write's file from an image; the caller sets h as there,
 * and h->hash (engine_hash at the image). */
int matcher_snapshot_write_image(const char *dir, struct matcher_snap_hdr *h,
				 const struct matcher_snap_image *im);
void matcher_snapshot_image_free(struct matcher_snap_image *im);

/* Checks the file at `path` (magic, version, partition, length, both CRCs)
 * and loads it into `e`, a freshly created engine, checking that the loaded
 * state's hash is the header's. Returns 0 with the header in *h, or a
 * negative errno with the reason in *why (e may then hold partial state).
 * *feed (may be NULL) gets the feed's position, flags 0 when none. */
int matcher_snapshot_load(const char *path, uint32_t partition, struct engine *e,
			  struct matcher_snap_hdr *h, struct matcher_snap_feed *feed,
			  const char **why);

/* The file name of the snapshot of tape seq `seq` in `dir`. */
void matcher_snapshot_path(char *out, size_t cap, const char *dir, uint64_t seq);

#endif
