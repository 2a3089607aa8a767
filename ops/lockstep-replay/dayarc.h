/* A day archive: journal segments (common/journal.h) packed into one
 * zstd-compressed file, as `lockstep-replay archive` writes it and every
 * lockstep-replay command reads it in place of a journal directory.
 *
 * The file is one or more zstd frames (with content checksums); what they
 * decompress to is the container, all integers little-endian:
 *   "LKSTDAY1"                       8 bytes, the magic
 *   u32 count                        segments that follow, 1..DAYARC_MAX_SEGMENTS
 *   count times:
 *     u16 name length                24
 *     name                           the segment's file name, "%020llu.seg",
 *                                    names ascending
 *     u64 length                     of the segment file, SEG_HDR..DAYARC_MAX_SEGMENT
 *                                    (up to its records: not the zeros a
 *                                    crash left after them)
 *     the segment file's bytes
 *   "LKSTEND1"                       8 bytes; nothing after it
 * The segments' records keep their own CRC32C, so a reader checks them as
 * the journal does when it opens the unpacked directory.
 *
 * The reader is a push parser with no I/O of its own (the fuzzer drives it
 * directly); dayarc_unpack_fd adds zstd in front of it. No logging. */
#ifndef LOCKSTEP_REPLAY_DAYARC_H
#define LOCKSTEP_REPLAY_DAYARC_H

#include <stddef.h>
#include <stdint.h>

#define DAYARC_MAGIC "LKSTDAY1"
#define DAYARC_END "LKSTEND1"
#define DAYARC_NAME_LEN 24
#define DAYARC_MAX_SEGMENTS (1u << 20)
#define DAYARC_MAX_SEGMENT ((uint64_t)UINT32_MAX) /* journal offsets are u32 */
#define DAYARC_SEG_HDR 16u

/* What the reader found, in order: a segment begins (its name, NUL
 * terminated, checked to be a segment name; its length), its bytes in
 * pieces, its end. A callback's negative return stops the reader with it. */
struct dayarc_ops {
	int (*begin)(void *ctx, const char *name, uint64_t len);
	int (*data)(void *ctx, const uint8_t *p, size_t n);
	int (*end)(void *ctx);
};

enum dayarc_state {
	DAYARC_MAGIC_S,
	DAYARC_COUNT_S,
	DAYARC_NAMELEN_S,
	DAYARC_NAME_S,
	DAYARC_LENGTH_S,
	DAYARC_BYTES_S,
	DAYARC_TRAILER_S,
	DAYARC_DONE_S,
	DAYARC_STATE_MAX,
};

struct dayarc_reader {
	const struct dayarc_ops *ops;
	void *ctx;
	enum dayarc_state state;
	uint8_t field[32]; /* the fixed-size field being gathered */
	size_t have, want;
	uint32_t count, seen; /* segments announced, begun */
	uint64_t left; /* bytes of the current segment still to come */
	char name[DAYARC_NAME_LEN + 1], prev[DAYARC_NAME_LEN + 1];
	const char *why; /* why the input was refused; NULL until then */
};

void dayarc_reader_init(struct dayarc_reader *r, const struct dayarc_ops *ops, void *ctx);
/* Takes the next n bytes of the container. 0, -EBADMSG (r->why says why;
 * also for bytes after the end), or a callback's error. */
int dayarc_reader_feed(struct dayarc_reader *r, const uint8_t *p, size_t n);
/* The input ended: 0 when the container was whole, else -EBADMSG. */
int dayarc_reader_finish(struct dayarc_reader *r);

/* Whether the file at fd starts like a zstd frame (an archive, not a
 * journal directory). */
int dayarc_is_archive(const char *path);

/* Decompresses the file open as fd and feeds the container to ops. 0,
 * -EBADMSG (*why says why: a zstd error, or the reader's), or -errno. */
int dayarc_unpack_fd(int fd, const struct dayarc_ops *ops, void *ctx, const char **why);

/* The writer: the container compressed with zstd into fd as it comes. */
struct dayarc_writer;
int dayarc_writer_open(struct dayarc_writer **out, int fd, int level, uint32_t count);
int dayarc_writer_segment(struct dayarc_writer *w, const char *name, uint64_t len);
int dayarc_writer_data(struct dayarc_writer *w, const void *p, size_t n);
/* Writes the trailer and ends the frame (no fsync: the caller's). 0 or
 * -errno; frees w either way. */
int dayarc_writer_close(struct dayarc_writer *w);
/* Frees a writer whose output is abandoned. Accepts NULL. */
void dayarc_writer_abort(struct dayarc_writer *w);

#endif
