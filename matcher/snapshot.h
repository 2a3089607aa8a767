/* The matcher's snapshot files (layout in matcher.h) and its exec block
 * encoding, shared by the daemon (matcher.c) and lockstep-replay rebuild
 * (ops/replay.c), so that an offline rebuild writes the very files, and
 * counts the very exec blocks, that a live matcher does. */
#ifndef LOCKSTEP_MATCHER_SNAPSHOT_H
#define LOCKSTEP_MATCHER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define MATCHER_SNAP_HDR_LEN 64
/* bytes per exec block in the matcher's ring: u16 length + 14 + OUCH_MAX_LEN */
#define MATCHER_EXEC_SLOT 128

/* The header's fields, in file order (little-endian hosts). */
struct matcher_snap_hdr {
	char magic[8];
	uint32_t version, partition;
	uint64_t seq, exec_next, term, commit, hash, body_len;
};

/* Writes <dir>/snap-<h->seq, 20 digits>.lss (through a .tmp file, fsynced,
 * renamed, the directory fsynced) of engine `e`. The caller sets partition,
 * seq, exec_next, term and commit; magic, version, hash and body_len are
 * filled here. Returns 0 or a negative errno (the .tmp file is removed). */
int matcher_snapshot_write(const char *dir, struct matcher_snap_hdr *h, const struct engine *e);

/* Checks the file at `path` (magic, version, partition, length, both CRCs)
 * and loads it into `e`, a freshly created engine, checking that the loaded
 * state's hash is the header's. Returns 0 with the header in *h, or a
 * negative errno with the reason in *why (e may then hold partial state). */
int matcher_snapshot_load(const char *path, uint32_t partition, struct engine *e,
			  struct matcher_snap_hdr *h, const char **why);

/* The file name of the snapshot of tape seq `seq` in `dir`. */
void matcher_snapshot_path(char *out, size_t cap, const char *dir, uint64_t seq);

/* Encodes one engine output as an exec block (wire.h's exec header and the
 * OUCH message) into block[MATCHER_EXEC_SLOT - 2]: its length, or a negative
 * OUCH error (the matcher then emits no block and its exec_next stays). */
struct ouch_msg;
int matcher_exec_encode(uint8_t *block, uint64_t tape_seq, const char *user,
			const struct ouch_msg *msg);

#endif
