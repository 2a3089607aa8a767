/* The journal: an append-only, segmented log of MoldUDP64 message blocks.
 *
 * A journal is a directory of segment files named after the sequence number
 * of their first record (`%020llu.seg`). Each segment starts with a 16-byte
 * header (magic "LKSTJRN1", u64 LE first sequence number); each record is
 *   u32 LE length of data | u64 LE sequence number | u64 LE term | data |
 *   u32 LE CRC32C over the length, sequence number, term and data.
 * Sequence numbers are contiguous across segments, starting at any number.
 * Opening a journal scans every segment, builds the in-memory index (sparse:
 * the offset of every 64th record, so that memory does not grow with the
 * day: about 0.06 bytes a record), and cuts a torn tail: a last
 * segment that ends in a record that is torn or fails its CRC, with no good
 * record after it (the last write, which a crash left half done). A bad
 * record with good records after it (in its segment, or in later
 * segments) is damage, not a torn tail: the open refuses (-EUCLEAN, the
 * report says where) rather than cut what follows; cut_damaged (a repair)
 * cuts it as a tail. Under JOURNAL_FSYNC_NONE nothing was ever synced, any
 * bad spot is a tail and is cut. A first segment whose header is wrong is
 * not cut but refused (-EBADMSG), so that a stray file cannot wipe a
 * journal.
 * Nothing here logs: the open report says what was
 * cut, and the caller logs it.
 *
 * Zeros ahead (journal_options.ahead): a syncing writer keeps that many bytes
 * of zeros written past its last segment's records, so that most syncs
 * cover blocks the file already had (an overwrite: ext4 then commits no new
 * size or block through its own journal: 59 -> 21 us of CPU a sync here). A
 * reader takes zeros where a record header should be, and nothing but zeros
 * after, as the segment's end (not a cut: the report's zero_bytes); a clean
 * close and a roll cut them off. The price is the order in which a power cut
 * keeps an overwrite's sectors: the disk may keep later sectors of the last
 * unfinished sync and lose earlier ones, which then still read as zeros. So
 * in the last segment a bad record is a torn tail, cut with whatever good
 * records follow it, when its part in one 512-byte sector reads as zeros,
 * and so does the rest of that sector, and either
 *  - that part is its start: 8 bytes or more (its length and its seq's low
 *    half), or fewer with the rest of its header naming the seq expected
 *    and its CRC right once the bytes lost are put back (the length: one of
 *    256 for one byte lost, else the one that ends it where the next seq's
 *    record starts); or
 *  - its length is one a lost sector leaves (in range, within the file), no
 *    good record of the next seq starts inside it, what follows it is the
 *    next seq's header or zeros, and the part is 32 bytes or more, or its
 *    CRC on, or the last 1-3 bytes of a CRC whose other bytes are right.
 * That is what an overwritten sector that did not reach the disk looks
 * like, and a bit flipped (in a length too) does not. A bad record without
 * it is damage as before (refused: lockstep-replay repair); a lost write of
 * synced data that reads back as zeros in the last segment cannot be told
 * from a torn tail (it is cut). A read-only open (of a live writer's
 * journal, perhaps) reports a bad last record whose header or CRC reads
 * zero as a torn tail, not damage.
 * A reader that follows a live writer (journal_refresh) takes a bad record
 * whose header or CRC still reads as zeros as one being written, and any
 * other bad record as -EIO only when a second refresh finds it again; it
 * reads its last record again at each refresh, so that a writer that cut
 * it and wrote others (and zeros) past it is -ESTALE, as a shorter file
 * was. */
#ifndef LOCKSTEP_JOURNAL_H
#define LOCKSTEP_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define JOURNAL_MAX_RECORD 65535u

enum journal_fsync {
	JOURNAL_FSYNC_NONE, /* leave it to the page cache */
	JOURNAL_FSYNC_INTERVAL, /* journal_tick() syncs at most every interval_ms */
	JOURNAL_FSYNC_BATCH, /* journal_flush() syncs every batch, inline */
	/* journal_flush() writes the batch and starts a background fdatasync
	 * (one in flight; the next starts when it ends, covering everything
	 * written meanwhile); journal_durable_seq() says how far the syncs have
	 * reached, and journal_sync_fd() becomes readable when one ends. */
	JOURNAL_FSYNC_DISK,
};

struct journal_options {
	uint64_t segment_bytes; /* roll to a new segment past this size; 0: 64 MiB */
	enum journal_fsync fsync;
	uint32_t interval_ms; /* for JOURNAL_FSYNC_INTERVAL; 0: 100 ms */
	int read_only; /* open without cutting or writing (lockstep-replay verify) */
	/* With read_only: keep no index at all, only each
	 * segment's record count and size, so that memory does not grow with the
	 * journal. The open still checks every record (the report is the same);
	 * iterators start at a segment's first record and step to from_seq;
	 * journal_read falls back to such a walk through its segment (slow:
	 * for occasional reads only). -EINVAL without read_only. */
	int no_index;
	/* A repair: a damaged journal is cut at its first bad record, as a
	 * torn tail would be, instead of refused (-EUCLEAN). */
	int cut_damaged;
	/* Bytes of zeros kept written ahead of the records in the last segment
	 * (rounded to 4 KiB, at most 16 MiB; 0: plain appends). Only for a
	 * policy that syncs; ignored under JOURNAL_FSYNC_NONE and read-only. */
	uint32_t ahead;
};

/* What journal_open found. */
struct journal_report {
	uint64_t records; /* good records kept */
	uint64_t first_seq, last_seq; /* 0, 0 when empty */
	uint64_t cut_bytes; /* bytes removed from the tail (torn or corrupt) */
	uint64_t cut_segments; /* whole segments removed after a bad record */
	/* zeros after the last segment's records (a writer's zeros ahead, left
	 * by a crash): not a cut; a writer writes over them. Read-only, as far
	 * as the scan read (it does not read a live writer's file twice) */
	uint64_t zero_bytes;
	uint64_t bad_seq; /* first sequence number not kept (0: nothing cut) */
	uint64_t bad_offset; /* where the bad record started in its segment */
	char bad_segment[64]; /* file name of that segment */
	const char *bad_reason; /* "torn record", "crc mismatch", "sequence gap", ... */
	/* The bad record has good records after it (later segments, or later
	 * in its own): damage, refused unless cut_damaged. */
	int damaged;
};

struct journal;

/* Opens (creating the directory when missing) a journal. In read_only mode a
 * bad record is reported, not cut, and the index stops before it. Returns 0
 * or a negative errno (-EBADMSG for a bad segment header in read_only,
 * -EUCLEAN for a damaged journal: see the report and journal_damage_text). */
int journal_open(struct journal **out, const char *dir, const struct journal_options *opt,
		 struct journal_report *report);
void journal_close(struct journal *j); /* flushes; accepts NULL */
/* What an operator needs after -EUCLEAN: where the damage is, what it is,
 * and the commands that look at it and repair it. Returns buf. */
const char *journal_damage_text(const struct journal_report *rep, const char *dir, char *buf,
				size_t cap);

/* Appends one record at exactly seq == journal_next_seq() (or any seq when the
 * journal is empty). -EINVAL for a wrong seq or len > JOURNAL_MAX_RECORD.
 * Records are buffered; journal_flush() writes them (and syncs for BATCH). */
int journal_append(struct journal *j, uint64_t seq, uint64_t term, const void *data, size_t len);
int journal_flush(struct journal *j);
/* The next append starts a new segment (a day's first record: a day's
 * records then lie in whole segments of their own). Unless the last
 * segment is empty. */
void journal_roll(struct journal *j);
/* Call from a timer: syncs under the INTERVAL policy when due. now_ms is any
 * monotonic clock. */
int journal_tick(struct journal *j, uint64_t now_ms);

/* JOURNAL_FSYNC_DISK: an eventfd that becomes readable when a background
 * sync ends (watch it for reading, then call journal_poll); -1 in the other
 * modes. */
int journal_sync_fd(const struct journal *j);
/* JOURNAL_FSYNC_DISK: takes the end of the background sync, if it ended,
 * and starts the next when records were written since (journal_flush does
 * both too, so that the next sync need not wait for the loop). Returns 1
 * when journal_durable_seq() moved since the last journal_poll, 0 when not,
 * or the negative errno of a failed sync (the records it covered are not
 * known to be on disk: fatal for a writer that promised them). A no-op
 * returning 0 in the other modes. */
int journal_poll(struct journal *j);
/* The last seq known to be on disk under JOURNAL_FSYNC_DISK (what an open
 * found is synced by the open: all of it is). In the other modes the last
 * seq: their promise is only that the records are written (flushed) before
 * anything that depends on them leaves, which the caller does. */
uint64_t journal_durable_seq(const struct journal *j);
/* JOURNAL_FSYNC_DISK: blocks until the records up to seq, written already
 * (journal_flush), are on disk: for a writer that cannot go on otherwise
 * (its output buffer is full of records waiting for the sync). 0, -EINVAL
 * when seq was not written (or, in another mode, is beyond the last), or
 * the error of a failed sync. */
int journal_await(struct journal *j, uint64_t seq);

uint64_t journal_first_seq(const struct journal *j); /* 0 when empty */
uint64_t journal_last_seq(const struct journal *j); /* 0 when empty */
uint64_t journal_next_seq(const struct journal *j); /* last + 1, or first wanted */
/* Term of the record at seq; 0 when absent. */
uint64_t journal_term_at(const struct journal *j, uint64_t seq);

/* Copies the record at seq into buf. Returns its length, -ENOENT when seq is
 * outside the journal, -ENOSPC when cap is too small, -EIO on a read error. */
int journal_read(struct journal *j, uint64_t seq, void *buf, size_t cap, uint64_t *term);

/* Removes every record after `seq` (Raft: a divergent uncommitted tail).
 * truncate_after(first_seq - 1) empties the journal. */
int journal_truncate_after(struct journal *j, uint64_t seq);

/* Retention: removes every whole segment all of whose records are below
 * seq (never the last segment, so never a record at or above seq, and a
 * journal never becomes empty this way). With move_to non-NULL the segment
 * files are renamed into that directory (made when missing; on the same
 * filesystem, else -EXDEV; a file of the same name there: -EEXIST) instead
 * of unlinked. Oldest first, and both directories synced: a crash leaves
 * a contiguous journal. journal_first_seq() moves up; a read of a removed
 * seq is -ENOENT; open iterators go stale (-ESTALE) as after truncation;
 * a journal opened afterwards starts at the new first seq. Returns 0
 * (also when nothing could go), -EROFS read-only, or a negative errno
 * (what went before the failure stays gone). */
int journal_drop_before(struct journal *j, uint64_t seq, const char *move_to);

/* Sequential reader from any sequence number, reading segments with a
 * buffered reader (no index lookup per record). */
struct journal_iter;
int journal_iter_open(struct journal_iter **out, struct journal *j, uint64_t from_seq);
/* 1 and the next record (data valid until the next call), 0 at the end,
 * negative on error. */
int journal_iter_next(struct journal_iter *it, uint64_t *seq, uint64_t *term, const uint8_t **data,
		      size_t *len);
void journal_iter_close(struct journal_iter *it);

/* Bytes free for the journal's writer on its filesystem (statvfs), or a
 * negative errno. */
int64_t journal_free_bytes(const struct journal *j);

/* Read-only: takes in what the journal's writer (another process) has
 * appended since the open or the last refresh, new segments included, up
 * to the first record not whole yet (the next refresh takes it); its
 * iterators then go on over it. The records added, or a negative errno:
 * -EINVAL when not read-only; -ESTALE or -EIO when the writer cut what
 * was read (a sequencer standby cuts an uncommitted tail; a recorder's
 * journal holds committed events only and is never cut), and then only
 * journal_close is left to do. For a reader that follows a live journal
 * (lockstep-replay dump --follow). */
int journal_refresh(struct journal *j);

/* Counts for statistics. */
uint64_t journal_bytes(const struct journal *j);
unsigned journal_segments(const struct journal *j);

#endif
