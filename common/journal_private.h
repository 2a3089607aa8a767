/* The journal's insides, shared by its files (journal.h is the interface and
 * the file format):
 *  - journal.c: segments, the write buffer and the term runs; append, flush,
 *    tick, truncate, and the helpers the other files share;
 *  - journal_open.c: open (the segment scan that builds the index and cuts a
 *    torn or corrupt tail) and close;
 *  - journal_read.c: lookups, random reads, iterators and counts;
 *  - journal_drop.c: retention (whole segments removed at the head).
 *
 * What journal.h leaves open, as these files settle it:
 * - sequence numbers are 1 .. UINT64_MAX - 1; a fresh journal's next_seq is 1;
 * - segment_bytes is capped a record short of 4 GiB (offsets are u32);
 * - journal_read and the iterator check each record's CRC again: -EIO if the
 *   file changed under them;
 * - the report's cut_bytes and cut_segments count the whole removed tail,
 *   later segments included; read-only, they count what would be removed;
 * - truncate_after(seq) with seq < first_seq - 1 is -EINVAL;
 * - an iterator starts at first_seq when from_seq is before it, sees records
 *   appended after it was opened, and fails with -ESTALE once records have
 *   been removed (truncate_after, drop_before); close iterators before the journal;
 * - journal_tick writes the write buffer out before it syncs. */
#ifndef LOCKSTEP_JOURNAL_PRIVATE_H
#define LOCKSTEP_JOURNAL_PRIVATE_H

#include <endian.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "journal.h"

#define SEG_MAGIC "LKSTJRN1"
#define SEG_HDR 16u
#define REC_HDR 20u /* length, sequence number, term */
#define REC_OVERHEAD 24u /* REC_HDR and the CRC */
#define REC_MAX (REC_OVERHEAD + JOURNAL_MAX_RECORD)
#define WBUF_SIZE (256u << 10) /* holds several records of REC_MAX */
#define SEQ_MAX (UINT64_MAX - 1) /* so that last + 1 never wraps */
#define JOURNAL_AHEAD_MAX (16u << 20) /* journal_options.ahead's cap */

/* The index is sparse: where every IDX_EVERY-th record of a segment starts
 * (about 0.06 bytes a record); a lookup steps over at most IDX_EVERY - 1
 * record headers from there, through the read cache. */
#define IDX_SHIFT 6
#define IDX_EVERY (1u << IDX_SHIFT)
#define RCACHE_SIZE (128u << 10) /* journal_read's cache of one segment's bytes (> REC_MAX) */
#define RCACHE_FILL (8u << 10) /* what a miss reads, unless a record needs more */

_Static_assert(RCACHE_SIZE >= REC_MAX, "a record fits the read cache");

struct jseg {
	uint64_t first_seq; /* also the file name */
	uint64_t size; /* header and records, those still in the write buffer included */
	uint32_t *off; /* off[k]: where record first_seq + k * IDX_EVERY starts */
	uint32_t n, cap; /* records; entries of off allocated */
};

/* Records from seq up to the next run's seq have this term. */
struct term_run {
	uint64_t seq, term;
};

/* The journal's syncer thread (journal_sync.c): the loop sets `want` (the
 * last seq written) and wakes it on `go`; it syncs sfd (under mu) until
 * `done` reaches `want`, signalling efd (DISK; -1 otherwise) after each
 * sync; err: the last failed sync's (0: none). */
struct journal_async {
	_Atomic uint64_t want, done;
	_Atomic int err, stop;
	/* the thread's: it may be blocked on `go` (the loop signals `go` only
	 * then: while the thread is syncing it finds the new `want` itself) */
	_Atomic int idle;
	int efd, go;
	pthread_mutex_t mu;
	int sfd; /* the thread's descriptor of the last segment, under mu */
	int mu_made, started;
	int retry; /* the loop's: a sync failed, kick the thread again */
	pthread_t thread;
};

struct journal {
	int dfd;
	struct journal_options opt;
	struct jseg *segs; /* in sequence order; only the last may hold no record */
	unsigned nsegs, segs_cap;
	uint64_t want; /* last + 1, or what an empty journal expects */
	int wfd; /* the last segment, read-write; -1 when read-only or no segment */
	uint8_t *wbuf; /* unwritten records of the last segment, from offset wbase;
			* WBUF_SIZE bytes from the first append */
	size_t wlen;
	uint64_t wbase;
	/* how far the last segment's file is written, records and zeros ahead
	 * (journal_options.ahead): at least wbase */
	uint64_t zhi;
	int wrote; /* the file was written since the open (a close cuts the zeros) */
	/* journal_refresh: where the last segment read as a whole wrong record
	 * (rbad: seen once; a second look there is -EIO) */
	uint64_t rbad_at, rbad_seg;
	int rbad;
	/* read-only: the last record taken in (seq rlast_seq at rlast_off of
	 * its segment), which journal_refresh reads again to see that its
	 * writer did not cut it (a file as long as before can hold another) */
	uint64_t rlast_seq, rlast_off;
	uint32_t rlast_crc;
	int unsynced; /* written since the last fdatasync */
	int roll_next; /* journal_roll: the next append starts a segment */
	uint64_t written; /* the last seq written out of the write buffer (0: none) */
	uint64_t durable; /* DISK: the last seq a finished sync covered */
	uint64_t polled; /* DISK: durable as the last journal_poll reported it */
	uint64_t next_sync_ms; /* INTERVAL: journal_tick() syncs from then on */
	struct journal_async async; /* INTERVAL: the syncer thread's sync */
	int rfd; /* segment rseg read-only, for journal_read; -1 when none */
	unsigned rseg;
	/* bytes [rc_off, rc_off + rc_len) of segment rc_seg as written, for
	 * lookups and journal_read (RCACHE_SIZE from the first read); valid
	 * while rc_gen == gen */
	uint8_t *rc;
	uint64_t rc_off;
	size_t rc_len;
	unsigned rc_seg, rc_gen;
	struct term_run *runs;
	size_t nruns, runs_cap;
	unsigned gen; /* bumped whenever records are removed: iterators go stale */
};


static inline uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline int is_empty(const struct journal *j)
{
	return j->nsegs == 0 || j->segs[0].n == 0;
}

static inline struct jseg *tail(struct journal *j)
{
	return &j->segs[j->nsegs - 1];
}

/* --- shared helpers (journal.c) ------------------------------------------- */

/* The file name of the segment whose first record is seq. */
void journal_seg_name(char name[32], uint64_t seq);
/* Reads until len bytes or the end of the file; returns the count or -errno. */
ssize_t journal_pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Grows *arr (of *cap elements of elem bytes) to hold need; 0 or -ENOMEM. */
int journal_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* Room in s's index for its next record, one more segment in j. */
int journal_seg_reserve(struct jseg *s);
/* Notes that record s->n (the segment's next) starts at `at`; after
 * journal_seg_reserve. */
static inline void journal_seg_note(struct jseg *s, uint32_t at)
{
	if ((s->n & (IDX_EVERY - 1)) == 0)
		s->off[s->n >> IDX_SHIFT] = at;
	s->n++;
}
/* Where record first_seq + i of segment k starts (i < its n, or i == n:
 * its end). 0 or -EIO. */
int journal_rec_off(struct journal *j, unsigned k, uint64_t i, uint64_t *off);
/* Makes bytes [off, off + need) of segment k readable at *p: from the write
 * buffer, or the read cache (refilled from the file). 0, -EIO when the
 * segment ends sooner, or -errno. */
int journal_bytes_at(struct journal *j, unsigned k, uint64_t off, size_t need, const uint8_t **p);
int journal_segs_reserve(struct journal *j);
/* Makes room for a run in case term starts a new one. */
int journal_runs_reserve(struct journal *j, uint64_t term);
/* Notes that record seq has term (after journal_runs_reserve()). */
void journal_runs_note(struct journal *j, uint64_t seq, uint64_t term);
/* In an array of n >= 1 elements of stride bytes, each starting with a u64
 * key, ascending: the last element whose key is <= key (0 if none is). */
size_t journal_last_at(const void *arr, size_t n, size_t stride, uint64_t key);
/* Closes the read descriptor (rfd), if any. */
void journal_rfd_drop(struct journal *j);
/* fsync of the directory, unless the policy is NONE. */
int journal_dir_sync(struct journal *j);
/* The journal's syncer thread (INTERVAL, DISK): started at open, stopped
 * (after the sync under way) at close. 0 or -errno; without a thread every
 * sync is inline. */
int journal_sync_init(struct journal *j);
void journal_sync_fini(struct journal *j);
/* The last segment's descriptor changed (a new segment, a reopen): the
 * thread gets a duplicate of the new one, between two syncs. */
void journal_sync_fd_set(struct journal *j);
/* fdatasync of the last segment when something was written since the last
 * (then everything written is durable: earlier segments were synced when
 * they were closed). */
int journal_data_sync(struct journal *j);
/* INTERVAL (from journal_tick) and DISK: takes the thread's progress into
 * the durable seq and asks it for everything written (inline when there is
 * no thread; journal_sync_fd() is signalled either way). 0 or a negative
 * errno (a sync that failed). */
int journal_sync_start(struct journal *j);
/* After records after seq were removed: nothing after seq is durable. */
void journal_durable_cut(struct journal *j, uint64_t seq);
/* Writes the write buffer out (no sync; journal_flush and journal_tick then
 * write zeros ahead when they run short: journal_options.ahead). On failure
 * the buffer is kept and a later call writes it again at the same offset. */
int journal_wbuf_write(struct journal *j);
/* Cuts the zeros ahead off the last segment's file (a close; a roll cuts
 * them before its own sync), so that it ends at its records, and syncs it
 * unless the policy is NONE. 0 or -errno. */
int journal_zeros_cut(struct journal *j);
/* 1 when the n bytes at p are all zero. */
int journal_all_zero(const uint8_t *p, size_t n);

/* The segment holding seq, which must be in the journal. */
static inline unsigned seg_find(const struct journal *j, uint64_t seq)
{
	return (unsigned)journal_last_at(j->segs, j->nsegs, sizeof(*j->segs), seq);
}

#endif
