/* The journal: segment files of CRC32C-checked records (format in journal.h),
 * an in-memory index from sequence number to (segment, offset), a write
 * buffer in front of the last segment and the terms as runs.
 *
 * What journal.h leaves open, as this file settles it:
 * - sequence numbers are 1 .. UINT64_MAX - 1; a fresh journal's next_seq is 1;
 * - segment_bytes is capped a record short of 4 GiB (offsets are u32);
 * - journal_read and the iterator check each record's CRC again: -EIO if the
 *   file changed under them;
 * - the report's cut_bytes and cut_segments count the whole removed tail,
 *   later segments included; read-only, they count what would be removed;
 * - truncate_after(seq) with seq < first_seq - 1 is -EINVAL;
 * - an iterator starts at first_seq when from_seq is before it, sees records
 *   appended after it was opened, and fails with -ESTALE once records have
 *   been removed (truncate_after); close iterators before the journal;
 * - journal_tick writes the write buffer out before it syncs. */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crc32c.h"
#include "journal.h"

#define SEG_MAGIC "LKSTJRN1"
#define SEG_HDR 16u
#define REC_HDR 20u /* length, sequence number, term */
#define REC_OVERHEAD 24u /* REC_HDR and the CRC */
#define REC_MAX (REC_OVERHEAD + JOURNAL_MAX_RECORD)
#define WBUF_SIZE (256u << 10) /* holds several records of REC_MAX */
#define SCAN_CHUNK (1u << 20)
#define ITER_BUF (128u << 10)
#define DEFAULT_SEGMENT (64ull << 20)
/* Index offsets are u32: a record starts below the limit and ends within 4 GiB. */
#define SEGMENT_LIMIT ((uint64_t)UINT32_MAX - REC_MAX)
#define SEQ_MAX (UINT64_MAX - 1) /* so that last + 1 never wraps */

struct jseg {
	uint64_t first_seq; /* also the file name */
	uint64_t size; /* header and records, those still in the write buffer included */
	uint32_t *off; /* off[i]: where record first_seq + i starts */
	uint32_t n, cap;
};

/* Records from seq up to the next run's seq have this term. */
struct term_run {
	uint64_t seq, term;
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
	int unsynced; /* written since the last fdatasync */
	uint64_t next_sync_ms; /* INTERVAL: journal_tick() syncs from then on */
	int rfd; /* segment rseg read-only, for journal_read; -1 when none */
	unsigned rseg;
	struct term_run *runs;
	size_t nruns, runs_cap;
	unsigned gen; /* bumped whenever records are removed: iterators go stale */
};

struct journal_iter {
	struct journal *j;
	unsigned gen;
	int positioned; /* seg and off are valid for seq */
	unsigned seg;
	uint64_t seq; /* of the next record */
	uint64_t off; /* where it starts in seg */
	int fd; /* seg, read-only; -1 until needed */
	uint8_t *buf; /* bytes [bstart, bstart + blen) of seg */
	uint64_t bstart;
	size_t blen;
};

/* Where an open stops trusting the journal. */
struct cut {
	const char *reason; /* NULL: nothing is bad */
	uint64_t seq; /* first sequence number not kept */
	uint64_t offset; /* in the bad segment; 0: the whole file goes */
	int bad_header; /* the header is whole but wrong */
};

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static void seg_name(char name[32], uint64_t seq)
{
	snprintf(name, 32, "%020llu.seg", (unsigned long long)seq);
}

static int is_empty(const struct journal *j)
{
	return j->nsegs == 0 || j->segs[0].n == 0;
}

static struct jseg *tail(struct journal *j)
{
	return &j->segs[j->nsegs - 1];
}

/* Reads until len bytes or the end of the file; returns the count or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

static int seg_reserve(struct jseg *s)
{
	size_t cap = s->cap;
	void *p = s->off;
	int r;

	if (s->n < s->cap)
		return 0;
	if (s->cap == UINT32_MAX)
		return -ENOMEM;
	r = grow(&p, &cap, (size_t)s->n + 1, sizeof(uint32_t));
	if (r < 0)
		return r;
	s->off = p;
	s->cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
	return 0;
}

static int segs_reserve(struct journal *j)
{
	size_t cap = j->segs_cap;
	void *p = j->segs;
	int r = grow(&p, &cap, (size_t)j->nsegs + 1, sizeof(struct jseg));

	if (r < 0)
		return r;
	j->segs = p;
	j->segs_cap = (unsigned)cap;
	return 0;
}

/* Makes room for a run in case term starts a new one. */
static int runs_reserve(struct journal *j, uint64_t term)
{
	void *p = j->runs;
	int r;

	if (j->nruns && j->runs[j->nruns - 1].term == term)
		return 0;
	r = grow(&p, &j->runs_cap, j->nruns + 1, sizeof(struct term_run));
	if (r < 0)
		return r;
	j->runs = p;
	return 0;
}

/* After runs_reserve(). */
static void runs_note(struct journal *j, uint64_t seq, uint64_t term)
{
	if (j->nruns && j->runs[j->nruns - 1].term == term)
		return;
	j->runs[j->nruns].seq = seq;
	j->runs[j->nruns].term = term;
	j->nruns++;
}

/* The segment holding seq, which must be in the journal. */
static unsigned seg_find(const struct journal *j, uint64_t seq)
{
	unsigned lo = 0, hi = j->nsegs - 1;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo + 1) / 2;

		if (j->segs[mid].first_seq <= seq)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static void rfd_drop(struct journal *j)
{
	if (j->rfd >= 0)
		close(j->rfd);
	j->rfd = -1;
}

/* A descriptor to read segment k from. */
static int seg_fd(struct journal *j, unsigned k)
{
	char name[32];
	int fd;

	if (k == j->nsegs - 1 && j->wfd >= 0)
		return j->wfd;
	if (j->rfd >= 0 && j->rseg == k)
		return j->rfd;
	seg_name(name, j->segs[k].first_seq);
	fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rfd_drop(j);
	j->rfd = fd;
	j->rseg = k;
	return fd;
}

static int dir_sync(struct journal *j)
{
	if (j->opt.fsync != JOURNAL_FSYNC_NONE && fsync(j->dfd) < 0)
		return -errno;
	return 0;
}

static int data_sync(struct journal *j)
{
	if (!j->unsynced)
		return 0;
	if (fdatasync(j->wfd) < 0)
		return -errno;
	j->unsynced = 0;
	return 0;
}

/* Writes the write buffer out (no sync). On failure the buffer is kept and a
 * later call writes it again at the same offset. */
static int wbuf_write(struct journal *j)
{
	int r;

	if (!j->wlen)
		return 0;
	r = pwrite_full(j->wfd, j->wbuf, j->wlen, j->wbase);
	if (r < 0)
		return r;
	j->wbase += j->wlen;
	j->wlen = 0;
	j->unsynced = 1;
	return 0;
}

/* Creates segment `first`, its header written, as the new last segment. */
static int seg_create(struct journal *j, uint64_t first)
{
	uint8_t hdr[SEG_HDR];
	char name[32];
	struct jseg *s;
	int fd, r;

	r = segs_reserve(j);
	if (r < 0)
		return r;
	seg_name(name, first);
	fd = openat(j->dfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	memcpy(hdr, SEG_MAGIC, 8);
	put_le64(hdr + 8, first);
	r = pwrite_full(fd, hdr, SEG_HDR, 0);
	if (r == 0)
		r = dir_sync(j);
	if (r < 0) {
		close(fd);
		unlinkat(j->dfd, name, 0);
		return r;
	}
	if (j->wfd >= 0)
		close(j->wfd);
	j->wfd = fd;
	j->wbase = SEG_HDR;
	j->wlen = 0;
	j->unsynced = 1;
	s = &j->segs[j->nsegs++];
	memset(s, 0, sizeof(*s));
	s->first_seq = first;
	s->size = SEG_HDR;
	return 0;
}

/* The last segment is full: write it out (and sync it unless the policy is
 * NONE, since later syncs only reach the new segment) and start the next. */
static int seg_roll(struct journal *j)
{
	int r = wbuf_write(j);

	if (r == 0 && j->opt.fsync != JOURNAL_FSYNC_NONE)
		r = data_sync(j);
	if (r == 0)
		r = seg_create(j, j->want);
	return r;
}

/* An empty journal takes any first sequence number: its (empty) segment is
 * made anew under that name. */
static int seg_restart(struct journal *j, uint64_t first)
{
	char name[32];

	if (j->nsegs) {
		seg_name(name, j->segs[0].first_seq);
		if (unlinkat(j->dfd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		close(j->wfd);
		j->wfd = -1;
		j->unsynced = 0;
		free(j->segs[0].off);
		j->nsegs = 0;
		rfd_drop(j);
	}
	return seg_create(j, first);
}

/* Accepts exactly the names seg_name() makes. */
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

/* The first sequence numbers of the segment files in dir, sorted. */
static int list_segments(const char *dir, uint64_t **out, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint64_t *v = NULL, seq;
	size_t n = 0, cap = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		void *p = v;

		if (!seg_parse(e->d_name, &seq))
			continue;
		if (grow(&p, &cap, n + 1, sizeof(*v)) < 0) {
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

/* The scan's read buffer: SCAN_CHUNK bytes, or less for a smaller file. */
struct scan_buf {
	uint8_t *p;
	size_t cap;
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

/* Adds segment `name` (open as fd) to the index, reading it in chunks of
 * SCAN_CHUNK through b; sets cut->reason where it goes bad. */
static int scan_segment(struct journal *j, int fd, uint64_t name, struct scan_buf *b,
			struct cut *cut)
{
	uint64_t base = 0, seq = j->nsegs ? j->want : name;
	size_t have, pos = SEG_HDR;
	struct stat st;
	struct jseg *s;
	uint8_t *buf;
	ssize_t n;
	int eof, r;

	cut->seq = seq;
	cut->offset = 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* a whole small file at once; cap > size tells the end of the file */
	r = scan_buf_reserve(b, (uint64_t)st.st_size < SCAN_CHUNK ? (size_t)st.st_size + 1 : SCAN_CHUNK);
	if (r < 0)
		return r;
	buf = b->p;
	n = pread_full(fd, buf, b->cap, 0);
	if (n < 0)
		return (int)n;
	have = (size_t)n;
	eof = have < b->cap;
	if (have < SEG_HDR) {
		cut->reason = "torn segment header";
		return 0;
	}
	if (memcmp(buf, SEG_MAGIC, 8) != 0 || get_le64(buf + 8) != name || name == 0 ||
	    name > SEQ_MAX) {
		cut->reason = "bad segment header";
		cut->bad_header = 1;
		return 0;
	}
	if (name != seq) {
		cut->reason = "sequence gap";
		return 0;
	}
	r = segs_reserve(j);
	if (r < 0)
		return r;
	s = &j->segs[j->nsegs++];
	memset(s, 0, sizeof(*s));
	s->first_seq = name;
	for (;;) {
		const uint8_t *p;
		uint32_t len;

		if (!eof && have - pos < REC_MAX) {
			/* read on in full chunks (the buffer is smaller only
			 * when the file has grown since fstat) */
			if ((r = scan_buf_reserve(b, SCAN_CHUNK)) < 0)
				return r;
			buf = b->p;
			memmove(buf, buf + pos, have - pos);
			base += pos;
			have -= pos;
			pos = 0;
			n = pread_full(fd, buf + have, b->cap - have, base + have);
			if (n < 0)
				return (int)n;
			eof = (size_t)n < b->cap - have;
			have += (size_t)n;
		}
		if (pos == have)
			break;
		p = buf + pos;
		cut->offset = base + pos;
		cut->seq = seq;
		cut->reason = check_record(p, have - pos, cut->offset, seq);
		if (cut->reason)
			break;
		len = get_le32(p);
		if ((!j->opt.no_index && (r = seg_reserve(s)) < 0) ||
		    (r = runs_reserve(j, get_le64(p + 12))) < 0)
			return r;
		if (j->opt.no_index) {
			if (s->n == UINT32_MAX)
				return -ENOMEM;
			s->n++;
		} else {
			s->off[s->n++] = (uint32_t)cut->offset;
		}
		runs_note(j, seq, get_le64(p + 12));
		seq++;
		pos += REC_OVERHEAD + len;
	}
	s->size = cut->reason ? cut->offset : base + pos;
	j->want = seq;
	return 0;
}

/* Removes (read-only: only counts) what follows the bad spot in segment
 * names[bad]: the later segments last first, so that a crash midway leaves a
 * contiguous journal, then the bad segment's tail or, at offset 0, all of it. */
static int cut_tail(struct journal *j, const uint64_t *names, size_t count, size_t bad,
		    const struct cut *cut, struct journal_report *rep)
{
	int ro = j->opt.read_only;
	char name[32];
	struct stat st;

	for (size_t i = count; i-- > bad;) {
		seg_name(name, names[i]);
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
	return ro ? 0 : dir_sync(j);
}

/* Builds the index from the segment files, cutting at the first bad spot. */
static int journal_scan(struct journal *j, const uint64_t *names, size_t count,
			struct journal_report *rep)
{
	struct scan_buf buf = { 0 };
	struct cut cut = { 0 };
	size_t i;
	int r = 0;

	for (i = 0; i < count && !cut.reason; i++) {
		char name[32];
		int fd;

		seg_name(name, names[i]);
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
	rep->bad_seq = cut.seq;
	rep->bad_offset = cut.offset;
	rep->bad_reason = cut.reason;
	seg_name(rep->bad_segment, names[i]);
	j->want = cut.seq;
	/* A wrong header on the first segment is not a torn tail but a file
	 * that is not ours (or a damaged journal): refuse rather than cut the
	 * whole journal away. */
	if (cut.bad_header && (j->opt.read_only || i == 0))
		return -EBADMSG;
	return cut_tail(j, names, count, i, &cut, rep);
}

static void journal_free(struct journal *j)
{
	for (unsigned i = 0; i < j->nsegs; i++)
		free(j->segs[i].off);
	if (j->wfd >= 0)
		close(j->wfd);
	rfd_drop(j);
	if (j->dfd >= 0)
		close(j->dfd);
	free(j->segs);
	free(j->runs);
	free(j->wbuf);
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
	j->dfd = j->wfd = j->rfd = -1;
	j->want = 1;
	if (j->opt.no_index && !j->opt.read_only) {
		r = -EINVAL;
		goto out_free;
	}
	if (!j->opt.read_only && mkdir(dir, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		goto out_free;
	}
	j->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dfd < 0) {
		r = -errno;
		goto out_free;
	}
	r = list_segments(dir, &names, &count);
	if (r == 0)
		r = journal_scan(j, names, count, report);
	free(names);
	if (r < 0)
		goto out_free;
	if (!j->opt.read_only && j->nsegs) {
		char name[32];

		seg_name(name, tail(j)->first_seq);
		j->wfd = openat(j->dfd, name, O_RDWR | O_CLOEXEC);
		if (j->wfd < 0) {
			r = -errno;
			goto out_free;
		}
		j->wbase = tail(j)->size;
	}
	report->first_seq = journal_first_seq(j);
	report->last_seq = journal_last_seq(j);
	report->records = is_empty(j) ? 0 : report->last_seq - report->first_seq + 1;
	*out = j;
	return 0;

out_free:
	journal_free(j);
	return r;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	if (!j->opt.read_only && wbuf_write(j) == 0 && j->opt.fsync != JOURNAL_FSYNC_NONE)
		data_sync(j);
	journal_free(j);
}

int journal_append(struct journal *j, uint64_t seq, uint64_t term, const void *data, size_t len)
{
	size_t rec = REC_OVERHEAD + len;
	struct jseg *s;
	uint8_t *p;
	int r = 0;

	if (j->opt.read_only)
		return -EROFS;
	if (len > JOURNAL_MAX_RECORD || seq == 0 || seq > SEQ_MAX)
		return -EINVAL;
	if (is_empty(j)) {
		if (!j->nsegs || j->segs[0].first_seq != seq)
			r = seg_restart(j, seq);
	} else if (seq != j->want) {
		return -EINVAL;
	} else if (tail(j)->n && tail(j)->size >= j->opt.segment_bytes) {
		r = seg_roll(j);
	}
	if (r < 0)
		return r;
	s = tail(j);
	if ((r = seg_reserve(s)) < 0 || (r = runs_reserve(j, term)) < 0)
		return r;
	if (!j->wbuf && !(j->wbuf = malloc(WBUF_SIZE)))
		return -ENOMEM;
	if (j->wlen + rec > WBUF_SIZE && (r = wbuf_write(j)) < 0)
		return r;
	p = j->wbuf + j->wlen;
	put_le32(p, (uint32_t)len);
	put_le64(p + 4, seq);
	put_le64(p + 12, term);
	if (len)
		memcpy(p + REC_HDR, data, len);
	put_le32(p + REC_HDR + len, crc32c(0, p, REC_HDR + len));
	s->off[s->n++] = (uint32_t)s->size;
	s->size += rec;
	j->wlen += rec;
	j->want = seq + 1;
	runs_note(j, seq, term);
	return 0;
}

int journal_flush(struct journal *j)
{
	int r;

	if (j->opt.read_only)
		return 0;
	r = wbuf_write(j);
	if (r == 0 && j->opt.fsync == JOURNAL_FSYNC_BATCH)
		r = data_sync(j);
	return r;
}

int journal_tick(struct journal *j, uint64_t now_ms)
{
	int r;

	if (j->opt.read_only || j->opt.fsync != JOURNAL_FSYNC_INTERVAL)
		return 0;
	if (now_ms < j->next_sync_ms)
		return 0;
	r = wbuf_write(j);
	if (r == 0)
		r = data_sync(j);
	if (r == 0)
		j->next_sync_ms = now_ms + j->opt.interval_ms;
	return r;
}

uint64_t journal_first_seq(const struct journal *j)
{
	return is_empty(j) ? 0 : j->segs[0].first_seq;
}

uint64_t journal_last_seq(const struct journal *j)
{
	return is_empty(j) ? 0 : j->want - 1;
}

uint64_t journal_next_seq(const struct journal *j)
{
	return j->want;
}

uint64_t journal_term_at(const struct journal *j, uint64_t seq)
{
	size_t lo = 0, hi;

	if (is_empty(j) || seq < j->segs[0].first_seq || seq >= j->want || !j->nruns)
		return 0;
	hi = j->nruns - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;

		if (j->runs[mid].seq <= seq)
			lo = mid;
		else
			hi = mid - 1;
	}
	return j->runs[lo].term;
}

int journal_read(struct journal *j, uint64_t seq, void *buf, size_t cap, uint64_t *term)
{
	uint8_t hdr[REC_HDR], crc[4];
	struct iovec iov[3];
	uint64_t off, end, i;
	struct jseg *s;
	unsigned k;
	size_t len;
	ssize_t n;
	int fd;

	if (is_empty(j) || seq < j->segs[0].first_seq || seq >= j->want)
		return -ENOENT;
	k = seg_find(j, seq);
	s = &j->segs[k];
	i = seq - s->first_seq;
	if (j->opt.no_index) {
		/* no index: walk the record headers from the segment's start */
		fd = seg_fd(j, k);
		if (fd < 0)
			return fd;
		for (off = SEG_HDR;; off += REC_OVERHEAD + get_le32(hdr)) {
			if (pread_full(fd, hdr, REC_HDR, off) != (ssize_t)REC_HDR ||
			    get_le32(hdr) > JOURNAL_MAX_RECORD)
				return -EIO;
			if (i-- == 0)
				break;
		}
		end = off + REC_OVERHEAD + get_le32(hdr);
	} else {
		off = s->off[i];
		end = i + 1 < s->n ? s->off[i + 1] : s->size;
	}
	len = (size_t)(end - off) - REC_OVERHEAD;
	if (cap < len)
		return -ENOSPC;
	if (k == j->nsegs - 1 && j->wfd >= 0 && off >= j->wbase) {
		const uint8_t *p = j->wbuf + (off - j->wbase);

		if (len)
			memcpy(buf, p + REC_HDR, len);
		if (term)
			*term = get_le64(p + 12);
		return (int)len;
	}
	fd = seg_fd(j, k);
	if (fd < 0)
		return fd;
	iov[0] = (struct iovec){ hdr, REC_HDR };
	iov[1] = (struct iovec){ buf, len };
	iov[2] = (struct iovec){ crc, 4 };
	do
		n = preadv(fd, iov, 3, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)(len + REC_OVERHEAD) || get_le32(hdr) != len || get_le64(hdr + 4) != seq ||
	    crc32c(crc32c(0, hdr, REC_HDR), buf, len) != get_le32(crc))
		return -EIO;
	if (term)
		*term = get_le64(hdr + 12);
	return (int)len;
}

int journal_truncate_after(struct journal *j, uint64_t seq)
{
	char name[32];
	struct jseg *s;
	unsigned keep;
	uint64_t n;
	int fd, r;

	if (j->opt.read_only)
		return -EROFS;
	if (is_empty(j) || seq >= j->want - 1)
		return 0;
	if (seq + 1 < j->segs[0].first_seq)
		return -EINVAL;
	r = wbuf_write(j);
	if (r < 0)
		return r;
	keep = seg_find(j, seq + 1);
	if (keep == 0 || j->segs[keep].first_seq != seq + 1)
		keep++; /* segment `keep` keeps a prefix (or, the first, its header) */
	j->gen++;
	rfd_drop(j);
	close(j->wfd);
	j->wfd = -1;
	j->unsynced = 0;
	while (j->nsegs > keep) {
		seg_name(name, tail(j)->first_seq);
		if (unlinkat(j->dfd, name, 0) < 0 && errno != ENOENT) {
			r = -errno;
			break;
		}
		free(tail(j)->off);
		j->nsegs--;
	}
	s = tail(j);
	n = seq + 1 - s->first_seq;
	if (r == 0 && n < s->n) {
		s->size = s->off[n];
		s->n = (uint32_t)n;
	}
	j->want = s->first_seq + s->n;
	while (j->nruns && j->runs[j->nruns - 1].seq >= j->want)
		j->nruns--;
	seg_name(name, s->first_seq);
	fd = openat(j->dfd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return r ? r : -errno;
	j->wfd = fd;
	j->wbase = s->size;
	if (r == 0 && ftruncate(fd, (off_t)s->size) < 0)
		r = -errno;
	if (r == 0 && j->opt.fsync != JOURNAL_FSYNC_NONE && fdatasync(fd) < 0)
		r = -errno;
	if (r == 0)
		r = dir_sync(j);
	return r;
}

int journal_iter_open(struct journal_iter **out, struct journal *j, uint64_t from_seq)
{
	struct journal_iter *it = calloc(1, sizeof(*it));

	if (!it)
		return -ENOMEM;
	it->buf = malloc(ITER_BUF);
	if (!it->buf) {
		free(it);
		return -ENOMEM;
	}
	it->j = j;
	it->gen = j->gen;
	it->seq = from_seq;
	it->fd = -1;
	*out = it;
	return 0;
}

/* Makes bytes [off, off + need) of the iterator's segment readable in buf:
 * from the file, or from the write buffer for records not yet written. */
static int iter_fill(struct journal_iter *it, size_t need)
{
	struct journal *j = it->j;
	ssize_t n;

	if (it->off >= it->bstart && it->off + need <= it->bstart + it->blen)
		return 0;
	if (it->seg == j->nsegs - 1 && j->wfd >= 0 && it->off >= j->wbase) {
		size_t avail = (size_t)(j->wbase + j->wlen - it->off);

		n = (ssize_t)(avail < ITER_BUF ? avail : ITER_BUF);
		memcpy(it->buf, j->wbuf + (it->off - j->wbase), (size_t)n);
	} else {
		if (it->fd < 0) {
			char name[32];

			seg_name(name, j->segs[it->seg].first_seq);
			it->fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
			if (it->fd < 0)
				return -errno;
		}
		n = pread_full(it->fd, it->buf, ITER_BUF, it->off);
		if (n < 0)
			return (int)n;
	}
	it->bstart = it->off;
	it->blen = (size_t)n;
	return (size_t)n < need ? -EIO : 0;
}

int journal_iter_next(struct journal_iter *it, uint64_t *seq, uint64_t *term, const uint8_t **data,
		      size_t *len)
{
	struct journal *j = it->j;
	const uint8_t *p;
	uint32_t n;
	int r;

	if (it->gen != j->gen)
		return -ESTALE;
	if (is_empty(j) || it->seq >= j->want)
		return 0;
	if (!it->positioned) {
		struct jseg *s;

		if (it->seq < j->segs[0].first_seq)
			it->seq = j->segs[0].first_seq;
		it->seg = seg_find(j, it->seq);
		s = &j->segs[it->seg];
		if (j->opt.no_index) {
			/* no index: step over the segment's records before it */
			it->off = SEG_HDR;
			for (uint64_t k = s->first_seq; k < it->seq; k++) {
				if ((r = iter_fill(it, REC_HDR)) < 0)
					return r;
				n = get_le32(it->buf + (it->off - it->bstart));
				if (n > JOURNAL_MAX_RECORD)
					return -EIO;
				it->off += REC_OVERHEAD + n;
			}
		} else {
			it->off = s->off[it->seq - s->first_seq];
		}
		it->positioned = 1;
	}
	while (it->seq - j->segs[it->seg].first_seq >= j->segs[it->seg].n) {
		it->seg++;
		it->off = SEG_HDR;
		it->blen = 0;
		if (it->fd >= 0)
			close(it->fd);
		it->fd = -1;
	}
	r = iter_fill(it, REC_HDR);
	if (r < 0)
		return r;
	n = get_le32(it->buf + (it->off - it->bstart));
	if (n > JOURNAL_MAX_RECORD)
		return -EIO;
	r = iter_fill(it, REC_OVERHEAD + n);
	if (r < 0)
		return r;
	p = it->buf + (it->off - it->bstart);
	if (get_le64(p + 4) != it->seq || crc32c(0, p, REC_HDR + n) != get_le32(p + REC_HDR + n))
		return -EIO;
	*seq = it->seq;
	*term = get_le64(p + 12);
	*data = p + REC_HDR;
	*len = n;
	it->seq++;
	it->off += REC_OVERHEAD + n;
	return 1;
}

void journal_iter_close(struct journal_iter *it)
{
	if (!it)
		return;
	if (it->fd >= 0)
		close(it->fd);
	free(it->buf);
	free(it);
}

uint64_t journal_bytes(const struct journal *j)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < j->nsegs; i++)
		sum += j->segs[i].size;
	return sum;
}

unsigned journal_segments(const struct journal *j)
{
	return j->nsegs;
}
