/* Opening and closing a journal: the segment files are listed and scanned
 * record by record to build the index, and the tail is cut at the first
 * record that is torn or fails its CRC (journal.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "durable.h"
#include "journal_private.h"

#define SCAN_CHUNK (1u << 20)
#define DEFAULT_SEGMENT (64ull << 20)
/* Index offsets are u32: a record starts below the limit and ends within 4 GiB. */
#define SEGMENT_LIMIT ((uint64_t)UINT32_MAX - REC_MAX)

/* Where an open stops trusting the journal. */
struct cut {
	const char *reason; /* NULL: nothing is bad */
	uint64_t seq; /* first sequence number not kept */
	uint64_t offset; /* in the bad segment; 0: the whole file goes */
	int bad_header; /* the header is whole but wrong */
	/* the bad record may be one its writer is still writing (journal_refresh) */
	int unfinished;
	/* a zeroed record: what the scan read after it was zeros to the end of
	 * the file (1, and the file's size then: end), not only zeros (0), or
	 * zeros as far as it read (-1) */
	int zeros_to_eof;
	uint64_t scan_end;
};

#define SECTOR 512u
/* Zeros in one sector that make a bad record torn by themselves (journal.h):
 * TORN_ZEROS of it (with its extent right), or TORN_ZEROS_AT_START from its
 * start (its length, and its seq's low half: never all zero in a record).
 * Fewer need the rest of the record to agree: torn_head, torn_crc. */
#define TORN_ZEROS 32u
#define TORN_ZEROS_AT_START 8u


/* Accepts exactly the names journal_seg_name() makes. */
static int seg_parse(const char *name, uint64_t *seq)
{
	uint64_t v = 0;
	int i;

	if (strlen(name) != 24 || strcmp(name + 20, ".seg") != 0)
		return 0;
	for (i = 0; i < 20; i++) {
		unsigned d = (unsigned)(name[i] - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	*seq = v;
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The first sequence numbers of the segment files in the directory open
 * as dfd, sorted. */
static int list_segments(int dfd, uint64_t **out, size_t *count)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	uint64_t *v = NULL, seq;
	size_t n = 0, cap = 0;

	if (!d) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		return -err;
	}
	while ((e = readdir(d))) {
		void *p = v;

		if (!seg_parse(e->d_name, &seq))
			continue;
		if (journal_grow(&p, &cap, n + 1, sizeof(*v)) < 0) {
			closedir(d);
			free(v);
			return -ENOMEM;
		}
		v = p;
		v[n++] = seq;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_u64);
	*out = v;
	*count = n;
	return 0;
}

static const char *check_record(const uint8_t *p, size_t avail, uint64_t at, uint64_t seq)
{
	uint32_t len;

	if (journal_all_zero(p, avail < REC_OVERHEAD ? avail : REC_OVERHEAD))
		return "zeroed record"; /* (a good record's header holds its seq, >= 1) */
	if (avail < REC_HDR)
		return "torn record";
	len = get_le32(p);
	if (len > JOURNAL_MAX_RECORD)
		return "bad length";
	if (avail < REC_OVERHEAD + len)
		return "torn record";
	if (crc32c(0, p, REC_HDR + len) != get_le32(p + REC_HDR + len))
		return "crc mismatch";
	if (get_le64(p + 4) != seq)
		return "sequence gap";
	if (seq > SEQ_MAX)
		return "sequence overflow";
	if (at + REC_OVERHEAD + len > UINT32_MAX)
		return "segment too large";
	return NULL;
}

/* Whether the bad record at p (avail bytes on) may be one a writer is still
 * copying in over zeros ahead, or past the end of the file: torn, its
 * header zero, or its CRC still zero. */
static int record_unfinished(const uint8_t *p, size_t avail)
{
	uint32_t len;

	if (avail < REC_OVERHEAD || journal_all_zero(p, REC_HDR))
		return 1;
	len = get_le32(p);
	if (len > JOURNAL_MAX_RECORD)
		return 0;
	return avail < REC_OVERHEAD + len || journal_all_zero(p + REC_HDR + len, 4);
}

/* The scan's reader: the buffer (SCAN_CHUNK bytes, or less for a smaller
 * file) is kept from one segment to the next; it holds bytes
 * [base, base + have) of the segment open as fd, and pos is where the next
 * record starts in it. */
struct scan_buf {
	uint8_t *p;
	size_t cap;
	int fd;
	uint64_t base;
	size_t have, pos;
	int eof; /* the buffer reaches the end of the file */
};

static int scan_buf_reserve(struct scan_buf *b, size_t want)
{
	void *p;

	if (want <= b->cap)
		return 0;
	p = realloc(b->p, want);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = want;
	return 0;
}

/* Reads the start of the segment open as fd: all of a small file at once
 * (cap > size tells the end of the file), else a chunk; pos is after the
 * header. */
static int scan_start(struct scan_buf *b, int fd)
{
	struct stat st;
	ssize_t n;
	int r;

	if (fstat(fd, &st) < 0)
		return -errno;
	r = scan_buf_reserve(b, (uint64_t)st.st_size < SCAN_CHUNK ? (size_t)st.st_size + 1 : SCAN_CHUNK);
	if (r < 0)
		return r;
	n = journal_pread_full(fd, b->p, b->cap, 0);
	if (n < 0)
		return (int)n;
	b->fd = fd;
	b->base = 0;
	b->have = (size_t)n;
	b->pos = SEG_HDR;
	b->eof = b->have < b->cap;
	return 0;
}

/* Keeps a whole record's worth (REC_MAX) after pos in the buffer, unless the
 * file ends sooner: moves the rest to the front and reads on in full chunks
 * (the buffer is smaller only when the file has grown since fstat). */
static int scan_refill(struct scan_buf *b)
{
	ssize_t n;
	int r;

	if (b->eof || b->have - b->pos >= REC_MAX)
		return 0;
	if ((r = scan_buf_reserve(b, SCAN_CHUNK)) < 0)
		return r;
	memmove(b->p, b->p + b->pos, b->have - b->pos);
	b->base += b->pos;
	b->have -= b->pos;
	b->pos = 0;
	n = journal_pread_full(b->fd, b->p + b->have, b->cap - b->have, b->base + b->have);
	if (n < 0)
		return (int)n;
	b->eof = (size_t)n < b->cap - b->have;
	b->have += (size_t)n;
	return 0;
}

/* The header of segment `name`, which should start at seq; sets cut->reason
 * when it is not right. */
static void scan_header(const struct scan_buf *b, uint64_t name, uint64_t seq, struct cut *cut)
{
	if (b->have < SEG_HDR) {
		cut->reason = "torn segment header";
	} else if (memcmp(b->p, SEG_MAGIC, 8) != 0 || get_le64(b->p + 8) != name || name == 0 ||
		   name > SEQ_MAX) {
		cut->reason = "bad segment header";
		cut->bad_header = 1;
	} else if (name != seq) {
		cut->reason = "sequence gap";
	}
}

/* Adds the good record p (record seq, at offset `at` of segment s) to the
 * index (or only counts it, without one) and to the term runs. */
static int scan_note(struct journal *j, struct jseg *s, const uint8_t *p, uint32_t at, uint64_t seq)
{
	int r;

	if ((!j->opt.no_index && (r = journal_seg_reserve(s)) < 0) ||
	    (r = journal_runs_reserve(j, get_le64(p + 12))) < 0)
		return r;
	if (j->opt.no_index) {
		if (s->n == UINT32_MAX)
			return -ENOMEM;
		s->n++;
	} else {
		journal_seg_note(s, at);
	}
	journal_runs_note(j, seq, get_le64(p + 12));
	j->rlast_seq = seq;
	j->rlast_off = at;
	j->rlast_crc = get_le32(p + REC_HDR + get_le32(p));
	return 0;
}

/* Read-only: whether the last record taken in is still where it was, as
 * it was (its CRC the same: the writer did not cut it and write another
 * there); 0, -ESTALE, or -errno. */
static int last_still_there(struct journal *j, int fd)
{
	struct jseg *s = tail(j);
	uint8_t buf[REC_MAX];
	size_t len;
	ssize_t n;

	if (!s->n || j->rlast_seq != j->want - 1 || j->rlast_seq < s->first_seq ||
	    s->size - j->rlast_off > sizeof(buf))
		return 0;
	len = (size_t)(s->size - j->rlast_off);
	n = journal_pread_full(fd, buf, len, j->rlast_off);
	if (n < 0)
		return (int)n;
	if ((size_t)n < len || len < REC_OVERHEAD || get_le32(buf) != len - REC_OVERHEAD ||
	    get_le64(buf + 4) != j->rlast_seq || get_le32(buf + len - 4) != j->rlast_crc ||
	    crc32c(0, buf, REC_HDR + (len - REC_OVERHEAD)) != j->rlast_crc)
		return -ESTALE;
	return 0;
}

/* Adds segment `name` (open as fd) to the index, reading it in chunks of
 * SCAN_CHUNK through b; sets cut->reason where it goes bad. */
static int scan_segment(struct journal *j, int fd, uint64_t name, struct scan_buf *b,
			struct cut *cut)
{
	uint64_t seq = j->nsegs ? j->want : name;
	struct jseg *s;
	int r;

	cut->seq = seq;
	cut->offset = 0;
	if ((r = scan_start(b, fd)) < 0)
		return r;
	scan_header(b, name, seq, cut);
	if (cut->reason)
		return 0;
	if ((r = journal_segs_reserve(j)) < 0)
		return r;
	s = &j->segs[j->nsegs++];
	memset(s, 0, sizeof(*s));
	s->first_seq = name;
	for (;;) {
		const uint8_t *p;

		if ((r = scan_refill(b)) < 0)
			return r;
		if (b->pos == b->have)
			break;
		p = b->p + b->pos;
		cut->offset = b->base + b->pos;
		cut->seq = seq;
		cut->reason = check_record(p, b->have - b->pos, cut->offset, seq);
		if (cut->reason) {
			cut->unfinished = record_unfinished(p, b->have - b->pos);
			if (journal_all_zero(p, b->have - b->pos))
				cut->zeros_to_eof = b->eof ? 1 : -1;
			cut->scan_end = b->base + b->have;
			break;
		}
		if ((r = scan_note(j, s, p, (uint32_t)cut->offset, seq)) < 0)
			return r;
		seq++;
		b->pos += REC_OVERHEAD + get_le32(p);
	}
	s->size = cut->reason ? cut->offset : b->base + b->pos;
	j->want = seq;
	return 0;
}

/* Removes (ro: only counts) what follows the bad spot in segment
 * names[bad]: the later segments last first, so that a crash midway leaves a
 * contiguous journal, then the bad segment's tail or, at offset 0, all of it. */
static int cut_tail(struct journal *j, const uint64_t *names, size_t count, size_t bad,
		    const struct cut *cut, struct journal_report *rep, int ro)
{	char name[32];
	struct stat st;

	for (size_t i = count; i-- > bad;) {
		journal_seg_name(name, names[i]);
		if (fstatat(j->dfd, name, &st, 0) < 0)
			return -errno;
		if (i == bad && cut->offset) {
			int fd, r = 0;

			rep->cut_bytes += (uint64_t)st.st_size - cut->offset;
			if (ro)
				continue;
			fd = openat(j->dfd, name, O_WRONLY | O_CLOEXEC);
			if (fd < 0)
				return -errno;
			if (ftruncate(fd, (off_t)cut->offset) < 0 ||
			    (j->opt.fsync != JOURNAL_FSYNC_NONE && fdatasync(fd) < 0))
				r = -errno;
			close(fd);
			if (r < 0)
				return r;
			continue;
		}
		rep->cut_bytes += (uint64_t)st.st_size;
		rep->cut_segments++;
		if (!ro && unlinkat(j->dfd, name, 0) < 0)
			return -errno;
	}
	return ro ? 0 : journal_dir_sync(j);
}

/* Where the first good record of a seq in [lo, hi] starts in [from, to) of
 * the n bytes at p (0: nowhere). */
static size_t record_at(const uint8_t *p, size_t n, size_t from, size_t to, uint64_t lo,
			uint64_t hi)
{
	for (size_t at = from; at < to && at + REC_OVERHEAD <= n; at++) {
		uint32_t len = get_le32(p + at);
		uint64_t seq = get_le64(p + at + 4);

		if (len <= JOURNAL_MAX_RECORD && at + REC_OVERHEAD + len <= n && seq >= lo &&
		    seq <= hi && crc32c(0, p + at, REC_HDR + len) == get_le32(p + at + REC_HDR + len))
			return at;
	}
	return 0;
}

/* 1 when a good record of a later seq follows the bad spot in segment
 * `name` (damage inside the journal, not a torn tail), 0 when not, or a
 * negative errno. Reads the rest of the segment once: an open that found a
 * bad record only. A segment too large to read at once counts as damaged. */
static int good_record_after(struct journal *j, uint64_t name, const struct cut *cut)
{
	char fname[32];
	struct stat st;
	uint8_t *p;
	ssize_t n;
	int fd, found = 0;

	journal_seg_name(fname, name);
	fd = openat(j->dfd, fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size <= cut->offset) {
		close(fd);
		return 0;
	}
	p = malloc((size_t)st.st_size - cut->offset);
	if (!p) {
		close(fd);
		return 1;
	}
	n = journal_pread_full(fd, p, (size_t)st.st_size - cut->offset, cut->offset);
	close(fd);
	if (n > 0)
		found = record_at(p, (size_t)n, 1, (size_t)n, cut->seq + 1,
				  cut->seq + (1ull << 32)) != 0;
	free(p);
	return n < 0 ? (int)n : found;
}

static uint8_t seq_byte(uint64_t seq, size_t i)
{
	return (uint8_t)(seq >> (8 * i));
}

/* A sector lost the bad record's first m (< TORN_ZEROS_AT_START) bytes:
 * the rest of its header says seq, and the record is right with the bytes
 * lost put back: its seq's, and a length that makes its CRC right (one
 * byte lost: one of 256; more: the one that ends it where the record of
 * seq + 1 starts). */
static int torn_head(const uint8_t *p, size_t n, size_t m, uint64_t seq)
{
	uint8_t hdr[REC_HDR];
	size_t next;
	uint32_t len;

	for (size_t i = m > 4 ? m : 4; i < 12; i++)
		if (p[i] != seq_byte(seq, i - 4))
			return 0;
	memcpy(hdr, p, REC_HDR);
	for (size_t i = 4; i < m; i++)
		hdr[i] = seq_byte(seq, i - 4);
	for (unsigned c = 0; m == 1 && c < 256; c++) {
		len = (get_le32(p) & ~0xffu) | c;
		hdr[0] = (uint8_t)c;
		if (len <= JOURNAL_MAX_RECORD && REC_OVERHEAD + len <= n &&
		    crc32c(crc32c(0, hdr, REC_HDR), p + REC_HDR, len) == get_le32(p + REC_HDR + len))
			return 1;
	}
	if (m == 1 || !(next = record_at(p, n, REC_OVERHEAD, REC_MAX, seq + 1, seq + 1)))
		return 0;
	len = (uint32_t)(next - REC_OVERHEAD);
	if (len > JOURNAL_MAX_RECORD)
		return 0;
	for (size_t i = 0; i < 4; i++) {
		if (i >= m && p[i] != (uint8_t)(len >> (8 * i)))
			return 0; /* a length byte kept that says otherwise */
		hdr[i] = (uint8_t)(len >> (8 * i));
	}
	return crc32c(crc32c(0, hdr, REC_HDR), p + REC_HDR, len) == get_le32(p + REC_HDR + len);
}

/* A sector lost the last k (< 4) bytes of the bad record's CRC (ext bytes
 * long): its other bytes are those of the CRC of what it holds. */
static int torn_crc(const uint8_t *p, size_t ext, size_t k)
{
	uint32_t want = crc32c(0, p, ext - 4), got = get_le32(p + ext - 4);
	uint32_t keep = 0xffffffffu >> (8 * k);

	return (got & keep) == (want & keep) && (got & ~keep) == 0;
}

/* Whether the bad record's extent (ext bytes) can be its real one: no good
 * record of the next seq starts inside it, and what follows it is the next
 * seq's header or zeros (byte by byte: a sector may have lost part of it).
 * A length damaged, not lost, fails one or the other. */
static int extent_fits(const uint8_t *p, size_t n, size_t ext, uint64_t seq)
{
	if (record_at(p, n, 1, ext, seq + 1, seq + 1))
		return 0;
	for (size_t i = 0; ext + 12 <= n && i < 8; i++)
		if (p[ext + 4 + i] != 0 && p[ext + 4 + i] != seq_byte(seq + 1, i))
			return 0;
	return 1;
}

/* Whether the bad record of seq at p (n bytes of its segment from offset
 * `off` on) reads as an overwrite that a power cut tore: a lost sector's
 * zeros in it, as journal.h sets out. */
static int torn_in_sector(const uint8_t *p, size_t n, uint64_t off, uint64_t seq)
{
	size_t ext;

	/* a lost sector only zeroes bytes: a length it leaves is a real one
	 * (its high half is zero anyway), and the record lies within the file */
	if (n < 4 || get_le32(p) > JOURNAL_MAX_RECORD || REC_OVERHEAD + get_le32(p) > n)
		return 0;
	ext = REC_OVERHEAD + get_le32(p);
	for (size_t a = 0, b, e; a < ext; a = b) {
		e = (size_t)(((off + a) / SECTOR + 1) * SECTOR - off); /* the sector's end */
		b = e < ext ? e : ext;
		/* the record's part, and the rest of the sector after it, zero */
		if (!journal_all_zero(p + a, (e < n ? e : n) - a))
			continue;
		/* its start lost: its length too, and with 8 bytes its seq's low
		 * half, never zero in a record */
		if (a == 0)
			return b >= TORN_ZEROS_AT_START || torn_head(p, n, b, seq);
		if ((b - a >= TORN_ZEROS || (b == ext && b - a >= 4) ||
		     (b == ext && torn_crc(p, ext, b - a))) &&
		    extent_fits(p, n, ext, seq))
			return 1;
	}
	return 0;
}

/* Reads what follows offset `off` in segment `name`: up to cap bytes into
 * buf (*n of them), and the file's size. */
static int seg_read_after(struct journal *j, uint64_t name, uint64_t off, uint8_t *buf, size_t cap,
			  size_t *n, uint64_t *size)
{
	char fname[32];
	struct stat st;
	ssize_t got = 0;
	int fd;

	journal_seg_name(fname, name);
	fd = openat(j->dfd, fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		got = -errno;
	else if ((uint64_t)st.st_size > off)
		got = journal_pread_full(fd, buf, cap, off);
	close(fd);
	if (got < 0)
		return (int)got;
	*n = (size_t)got;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* 1 when segment `name` holds nothing but zeros from the cut's offset to
 * its end (the zeros ahead of a writer that did not close): the segment
 * ends there (a writer writes its records over them, and keeps them as its
 * zeros ahead); 0 when something else follows; or -errno. What the scan
 * read decides it when it read to the end: read again, a live writer's
 * next records (a read-only open) would look like records after zeros. */
static int zero_tail(struct journal *j, uint64_t name, const struct cut *cut,
		     struct journal_report *rep)
{
	uint64_t off = cut->offset, at = off, size = off + 1;
	uint8_t *buf;
	size_t n = 1;
	int r, zero = 1;

	if (cut->zeros_to_eof >= 0 || j->opt.read_only) {
		/* (read-only, zeros as far as the scan read: the end too; read
		 * again, a live writer's next records would count against it) */
		if (cut->zeros_to_eof)
			rep->zero_bytes = cut->scan_end - off;
		return cut->zeros_to_eof ? 1 : 0;
	}
	buf = malloc(SCAN_CHUNK);
	r = buf ? 0 : -ENOMEM;

	while (r == 0 && zero && at < size && n > 0) {
		r = seg_read_after(j, name, at, buf, SCAN_CHUNK, &n, &size);
		zero = r == 0 && journal_all_zero(buf, n);
		at += n;
	}
	free(buf);
	if (r < 0 || !zero)
		return r;
	rep->zero_bytes = size - off;
	return 1;
}

/* Whether the bad spot in segment names[bad] of count is damage (see
 * journal.h) rather than a torn tail. */
static int is_damage(struct journal *j, const uint64_t *names, size_t count, size_t bad,
		     const struct cut *cut)
{
	if (j->opt.fsync == JOURNAL_FSYNC_NONE && !j->opt.read_only)
		return 0; /* never synced: after a power cut anything is a tail */
	if (bad + 1 < count)
		return 1; /* segments after it: a segment is synced before the next */
	if (strcmp(cut->reason, "sequence gap") == 0 && cut->offset == 0)
		return 1; /* a missing segment */
	if (strcmp(cut->reason, "torn segment header") == 0)
		return 0; /* the crash came as the segment was made */
	if (cut->unfinished && j->opt.read_only)
		return 0; /* may be a live writer's: cut short, its header or CRC zero */
	if (cut->offset) { /* an overwrite torn by a power cut, whatever follows */
		uint8_t *p = malloc(REC_MAX);
		uint64_t size;
		size_t n = 0;
		int r = p ? seg_read_after(j, names[bad], cut->offset, p, REC_MAX, &n, &size)
			  : -ENOMEM;

		if (r == 0)
			r = torn_in_sector(p, n, cut->offset, cut->seq);
		free(p);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	return good_record_after(j, names[bad], cut);
}

/* Builds the index from the segment files, cutting at the first bad spot. */
static int scan_segments(struct journal *j, const uint64_t *names, size_t count,
			struct journal_report *rep)
{
	struct scan_buf buf = { 0 };
	struct cut cut = { 0 };
	size_t i;
	int r = 0;

	for (i = 0; i < count && !cut.reason; i++) {
		char name[32];
		int fd;

		journal_seg_name(name, names[i]);
		fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			break;
		}
		r = scan_segment(j, fd, names[i], &buf, &cut);
		close(fd);
		if (r < 0)
			break;
	}
	free(buf.p);
	if (r < 0 || !cut.reason)
		return r;
	i--;
	if (i + 1 == count && strcmp(cut.reason, "zeroed record") == 0 &&
	    (r = zero_tail(j, names[i], &cut, rep)) != 0)
		return r < 0 ? r : 0; /* the end of the records, not a cut */
	rep->bad_seq = cut.seq;
	rep->bad_offset = cut.offset;
	rep->bad_reason = cut.reason;
	journal_seg_name(rep->bad_segment, names[i]);
	j->want = cut.seq;
	/* A wrong header on the first segment is not a torn tail but a file
	 * that is not ours (or a damaged journal): refuse rather than cut the
	 * whole journal away. */
	if (cut.bad_header && (j->opt.read_only || i == 0))
		return -EBADMSG;
	if ((r = is_damage(j, names, count, i, &cut)) < 0)
		return r;
	rep->damaged = r;
	if (rep->damaged && !j->opt.read_only && !j->opt.cut_damaged) {
		r = cut_tail(j, names, count, i, &cut, rep, 1); /* counts only */
		return r < 0 ? r : -EUCLEAN;
	}
	return cut_tail(j, names, count, i, &cut, rep, j->opt.read_only);
}

/* Reads the segment open as fd from offset `from` on: a refresh of a
 * segment's tail (scan_refill reads on). */
static int scan_from(struct scan_buf *b, int fd, uint64_t from)
{
	ssize_t n;
	int r = scan_buf_reserve(b, SCAN_CHUNK);

	if (r < 0)
		return r;
	n = journal_pread_full(fd, b->p, b->cap, from);
	if (n < 0)
		return (int)n;
	b->fd = fd;
	b->base = from;
	b->have = (size_t)n;
	b->pos = 0;
	b->eof = (size_t)n < b->cap;
	return 0;
}

/* The last segment's records written since it was scanned, up to the
 * first that is not whole yet (its writer is at it; the next refresh
 * takes it: record_unfinished). A record whole but wrong at the same place
 * in two refreshes is -EIO; a file shorter than what was read, or whose
 * last record read is no longer there (its writer cut the tail and wrote
 * others: a sequencer's standby), -ESTALE: what was read is no longer the
 * journal. The index moves record by record, so an error leaves it whole. */
static int refresh_tail(struct journal *j, struct scan_buf *b)
{
	struct jseg *s = tail(j);
	struct stat st;
	char name[32];
	int fd, r;

	journal_seg_name(name, s->first_seq);
	fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if ((uint64_t)st.st_size < s->size)
		r = -ESTALE;
	else if ((r = last_still_there(j, fd)) == 0)
		r = scan_from(b, fd, s->size);
	while (r == 0 && (r = scan_refill(b)) == 0 && b->pos < b->have) {
		const uint8_t *p = b->p + b->pos;
		const char *bad = check_record(p, b->have - b->pos, b->base + b->pos, j->want);

		if (bad) {
			/* A whole wrong record twice in a row at one place: a reader
			 * can see a later page of an overwrite before an earlier one,
			 * so once is not enough. */
			if (!record_unfinished(p, b->have - b->pos)) {
				if (j->rbad && j->rbad_at == b->base + b->pos &&
				    j->rbad_seg == s->first_seq)
					r = -EIO;
				j->rbad = 1;
				j->rbad_at = b->base + b->pos;
				j->rbad_seg = s->first_seq;
			}
			break;
		}
		j->rbad = 0;
		if ((r = scan_note(j, s, p, (uint32_t)(b->base + b->pos), j->want)) < 0)
			break;
		j->want++;
		b->pos += REC_OVERHEAD + get_le32(p);
		s->size = b->base + b->pos;
	}
	close(fd);
	return r;
}

int journal_refresh(struct journal *j)
{
	struct scan_buf b = { 0 };
	uint64_t *names = NULL, before = j->nsegs ? j->want : 0;
	size_t count = 0;
	int r;

	if (!j->opt.read_only)
		return -EINVAL;
	r = j->nsegs ? refresh_tail(j, &b) : 0;
	if (r == 0)
		r = list_segments(j->dfd, &names, &count);
	/* segments begun since: each starts where the journal ends, or the
	 * one before is not whole yet (a later refresh) */
	for (size_t i = 0; r == 0 && i < count; i++) {
		struct cut cut = { 0 };
		char name[32];
		int fd;

		if (j->nsegs && names[i] <= tail(j)->first_seq)
			continue;
		if (j->nsegs && names[i] != j->want)
			break; /* (an empty journal takes its writer's first, wherever it starts) */
		journal_seg_name(name, names[i]);
		fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			break;
		}
		r = scan_segment(j, fd, names[i], &b, &cut);
		close(fd);
		if (r == 0 && cut.reason && cut.offset == 0 &&
		    strcmp(cut.reason, "torn segment header") != 0)
			r = -EIO; /* a wrong header: not a writer at work */
		if (cut.reason)
			break; /* a record not written yet, or wrong: refresh_tail looks again */
	}
	free(names);
	free(b.p);
	if (r < 0)
		return r;
	if (!before) /* it was empty: the records from its first */
		before = j->nsegs ? j->segs[0].first_seq : j->want;
	return (int)(j->want - before > INT32_MAX ? INT32_MAX : j->want - before);
}

/* Every segment and the directory to disk (an open under DISK). */
static int journal_data_sync_all(struct journal *j)
{
	for (unsigned i = 0; i < j->nsegs; i++) {
		char name[32];
		int fd, r = 0;

		journal_seg_name(name, j->segs[i].first_seq);
		fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (fdatasync(fd) < 0)
			r = -errno;
		close(fd);
		if (r < 0)
			return r;
	}
	if (fsync(j->dfd) < 0)
		return -errno;
	j->durable = j->polled = j->written;
	return 0;
}

static void free_journal(struct journal *j)
{
	journal_sync_fini(j); /* idempotent */
	for (unsigned i = 0; i < j->nsegs; i++)
		free(j->segs[i].off);
	if (j->wfd >= 0)
		close(j->wfd);
	if (j->async.efd >= 0)
		close(j->async.efd);
	journal_rfd_drop(j);
	if (j->dfd >= 0)
		close(j->dfd);
	free(j->segs);
	free(j->runs);
	free(j->wbuf);
	free(j->rc);
	free(j);
}

int journal_open(struct journal **out, const char *dir, const struct journal_options *opt,
		 struct journal_report *report)
{
	struct journal_report spare;
	uint64_t *names = NULL;
	struct journal *j;
	size_t count = 0;
	int r;

	if (!report)
		report = &spare;
	memset(report, 0, sizeof(*report));
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	if (opt)
		j->opt = *opt;
	if (!j->opt.segment_bytes)
		j->opt.segment_bytes = DEFAULT_SEGMENT;
	if (j->opt.segment_bytes > SEGMENT_LIMIT)
		j->opt.segment_bytes = SEGMENT_LIMIT;
	if (!j->opt.interval_ms)
		j->opt.interval_ms = 100;
	if (j->opt.read_only || j->opt.fsync == JOURNAL_FSYNC_NONE)
		j->opt.ahead = 0;
	if (j->opt.ahead > JOURNAL_AHEAD_MAX)
		j->opt.ahead = JOURNAL_AHEAD_MAX;
	j->opt.ahead = (j->opt.ahead + 4095u) & ~4095u;
	j->dfd = j->wfd = j->rfd = j->async.efd = j->async.go = j->async.sfd = -1;
	j->want = 1;
	if (j->opt.no_index && !j->opt.read_only) {
		r = -EINVAL;
		goto out_free;
	}
	if (!j->opt.read_only && mkdir(dir, 0755) == 0) {
		/* a directory just made lasts once its parent is synced */
		if (j->opt.fsync != JOURNAL_FSYNC_NONE && (r = durable_sync_parent(dir)) < 0)
			goto out_free;
	} else if (!j->opt.read_only && errno != EEXIST) {
		r = -errno;
		goto out_free;
	}
	j->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dfd < 0) {
		r = -errno;
		goto out_free;
	}
	r = list_segments(j->dfd, &names, &count);
	if (r == 0)
		r = scan_segments(j, names, count, report);
	free(names);
	if (r == -EUCLEAN) { /* what is good before the damage, for the report */
		report->first_seq = journal_first_seq(j);
		report->last_seq = journal_last_seq(j);
		report->records = is_empty(j) ? 0 : report->last_seq - report->first_seq + 1;
	}
	if (r < 0)
		goto out_free;
	if (!j->opt.read_only && j->nsegs) {
		char name[32];

		journal_seg_name(name, tail(j)->first_seq);
		j->wfd = openat(j->dfd, name, O_RDWR | O_CLOEXEC);
		if (j->wfd < 0) {
			r = -errno;
			goto out_free;
		}
		j->wbase = tail(j)->size;
		j->zhi = j->wbase + report->zero_bytes;
		j->written = journal_last_seq(j);
		/* What a crash left in the page cache is on disk from now on. */
		if (j->opt.fsync == JOURNAL_FSYNC_DISK &&
		    ((r = journal_data_sync_all(j)) < 0))
			goto out_free;
	}
	if (!j->opt.read_only && j->opt.fsync == JOURNAL_FSYNC_DISK &&
	    (j->async.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		r = -errno;
		goto out_free;
	}
	if (!j->opt.read_only &&
	    (j->opt.fsync == JOURNAL_FSYNC_DISK || j->opt.fsync == JOURNAL_FSYNC_INTERVAL) &&
	    (r = journal_sync_init(j)) < 0)
		goto out_free;
	report->first_seq = journal_first_seq(j);
	report->last_seq = journal_last_seq(j);
	report->records = is_empty(j) ? 0 : report->last_seq - report->first_seq + 1;
	*out = j;
	return 0;

out_free:
	free_journal(j);
	return r;
}

const char *journal_damage_text(const struct journal_report *rep, const char *dir, char *buf,
				size_t cap)
{
	snprintf(buf, cap,
		 "damaged: seq %llu (segment %s, offset %llu) is bad (%s) and good records follow "
		 "it (%llu bytes, %llu later segments); not cut. See it with `lockstep-replay "
		 "verify %s`; `lockstep-replay repair %s` moves the damaged part aside and cuts the "
		 "journal before it (a sequencer then fetches the rest from its group: repair only "
		 "while the others hold it)",
		 (unsigned long long)rep->bad_seq, rep->bad_segment,
		 (unsigned long long)rep->bad_offset, rep->bad_reason ? rep->bad_reason : "?",
		 (unsigned long long)rep->cut_bytes, (unsigned long long)rep->cut_segments, dir, dir);
	return buf;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	journal_sync_fini(j);
	/* what the thread was asked for and had not synced when it stopped */
	if (j->written > atomic_load(&j->async.done) && j->written > j->durable)
		j->unsynced = 1;
	if (!j->opt.read_only && journal_wbuf_write(j) == 0) {
		/* the records on disk first: a failed cut of the zeros after
		 * them (they read as the end) loses nothing; a journal only
		 * opened and closed is left as it was */
		if (j->opt.fsync != JOURNAL_FSYNC_NONE)
			journal_data_sync(j);
		if (j->wrote)
			journal_zeros_cut(j);
	}
	free_journal(j);
}
