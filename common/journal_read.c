/* Reading the journal: lookups by sequence number, random reads of one
 * record, sequential iterators and counts. */
#include <errno.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "journal_private.h"

#define ITER_BUF (128u << 10)

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

/* A descriptor to read segment k from. */
static int seg_fd(struct journal *j, unsigned k)
{
	char name[32];
	int fd;

	if (k == j->nsegs - 1 && j->wfd >= 0)
		return j->wfd;
	if (j->rfd >= 0 && j->rseg == k)
		return j->rfd;
	journal_seg_name(name, j->segs[k].first_seq);
	fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	journal_rfd_drop(j);
	j->rfd = fd;
	j->rseg = k;
	return fd;
}

uint64_t journal_first_seq(const struct journal *j)
{
	return is_empty(j) ? 0 : j->segs[0].first_seq;
}

uint64_t journal_last_seq(const struct journal *j)
{
	return is_empty(j) ? 0 : j->want - 1;
}

uint64_t journal_durable_seq(const struct journal *j)
{
	uint64_t last = journal_last_seq(j);

	if (j->opt.fsync != JOURNAL_FSYNC_DISK || j->opt.read_only)
		return last;
	return j->durable < last ? j->durable : last;
}

int64_t journal_free_bytes(const struct journal *j)
{
	struct statvfs v;

	if (fstatvfs(j->dfd, &v) < 0)
		return -errno;
	return (int64_t)(v.f_bavail * v.f_frsize);
}

int journal_sync_fd(const struct journal *j)
{
	return j->async.efd;
}

uint64_t journal_next_seq(const struct journal *j)
{
	return j->want;
}

uint64_t journal_term_at(const struct journal *j, uint64_t seq)
{
	if (is_empty(j) || seq < j->segs[0].first_seq || seq >= j->want || !j->nruns)
		return 0;
	return j->runs[journal_last_at(j->runs, j->nruns, sizeof(*j->runs), seq)].term;
}

/* Of n bytes read from segment k at off, those of records known: not past
 * what is written (the rest is the write buffer's) nor past the records
 * taken in (beyond them a writer's zeros ahead or records not yet
 * refreshed: kept in no cache). */
static ssize_t seg_known(const struct journal *j, unsigned k, uint64_t off, ssize_t n)
{
	uint64_t end = k == j->nsegs - 1 && j->wfd >= 0 ? j->wbase : j->segs[k].size;

	if (off >= end)
		return 0;
	return off + (uint64_t)n > end ? (ssize_t)(end - off) : n;
}

int journal_bytes_at(struct journal *j, unsigned k, uint64_t off, size_t need, const uint8_t **p)
{
	ssize_t n;
	int fd;

	if (k == j->nsegs - 1 && j->wfd >= 0 && off >= j->wbase) {
		if (off + need > j->wbase + j->wlen)
			return -EIO;
		*p = j->wbuf + (off - j->wbase);
		return 0;
	}
	if (j->rc && j->rc_gen == j->gen && j->rc_seg == k && off >= j->rc_off &&
	    off + need <= j->rc_off + j->rc_len) {
		*p = j->rc + (off - j->rc_off);
		return 0;
	}
	if (need > RCACHE_SIZE)
		return -EIO;
	if (!j->rc && !(j->rc = malloc(RCACHE_SIZE)))
		return -ENOMEM;
	if ((fd = seg_fd(j, k)) < 0)
		return fd;
	/* a lookup's steps and its record fit RCACHE_FILL for most records;
	 * a bigger record reads what it needs */
	n = journal_pread_full(fd, j->rc, need > RCACHE_FILL ? need : RCACHE_FILL, off);
	if (n < 0)
		return (int)n;
	n = seg_known(j, k, off, n);
	j->rc_seg = k;
	j->rc_gen = j->gen;
	j->rc_off = off;
	j->rc_len = (size_t)n;
	if ((size_t)n < need)
		return -EIO;
	*p = j->rc;
	return 0;
}

int journal_rec_off(struct journal *j, unsigned k, uint64_t i, uint64_t *off)
{
	struct jseg *s = &j->segs[k];
	uint64_t at;
	const uint8_t *p;
	int r;

	if (i >= s->n) {
		*off = s->size;
		return 0;
	}
	at = j->opt.no_index ? SEG_HDR : s->off[i >> IDX_SHIFT];
	for (uint64_t skip = j->opt.no_index ? i : (i & (IDX_EVERY - 1)); skip; skip--) {
		if ((r = journal_bytes_at(j, k, at, REC_HDR, &p)) < 0)
			return r;
		if (get_le32(p) > JOURNAL_MAX_RECORD)
			return -EIO;
		at += REC_OVERHEAD + get_le32(p);
	}
	*off = at;
	return 0;
}

int journal_read(struct journal *j, uint64_t seq, void *buf, size_t cap, uint64_t *term)
{
	const uint8_t *p;
	uint64_t off;
	unsigned k;
	size_t len;
	int r;

	if (is_empty(j) || seq < j->segs[0].first_seq || seq >= j->want)
		return -ENOENT;
	k = seg_find(j, seq);
	if ((r = journal_rec_off(j, k, seq - j->segs[k].first_seq, &off)) < 0 ||
	    (r = journal_bytes_at(j, k, off, REC_HDR, &p)) < 0)
		return r;
	len = get_le32(p);
	if (len > JOURNAL_MAX_RECORD)
		return -EIO;
	if (cap < len)
		return -ENOSPC;
	if ((r = journal_bytes_at(j, k, off, REC_OVERHEAD + len, &p)) < 0)
		return r;
	if (get_le64(p + 4) != seq || crc32c(0, p, REC_HDR + len) != get_le32(p + REC_HDR + len))
		return -EIO;
	if (len)
		memcpy(buf, p + REC_HDR, len);
	if (term)
		*term = get_le64(p + 12);
	return (int)len;
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

			journal_seg_name(name, j->segs[it->seg].first_seq);
			it->fd = openat(j->dfd, name, O_RDONLY | O_CLOEXEC);
			if (it->fd < 0)
				return -errno;
		}
		n = journal_pread_full(it->fd, it->buf, ITER_BUF, it->off);
		if (n < 0)
			return (int)n;
		n = seg_known(j, it->seg, it->off, n);
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
		/* from the index entry at or before it, step over the records
		 * between (without an index, from the segment's start) */
		it->off = j->opt.no_index ? SEG_HDR : s->off[(it->seq - s->first_seq) >> IDX_SHIFT];
		for (uint64_t k = j->opt.no_index ? s->first_seq
						 : it->seq - ((it->seq - s->first_seq) & (IDX_EVERY - 1));
		     k < it->seq; k++) {
			if ((r = iter_fill(it, REC_HDR)) < 0)
				return r;
			n = get_le32(it->buf + (it->off - it->bstart));
			if (n > JOURNAL_MAX_RECORD)
				return -EIO;
			it->off += REC_OVERHEAD + n;
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
