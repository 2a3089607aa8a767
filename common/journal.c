/* The journal's segments and writing: the write buffer in front of the last
 * segment, new segments, the index and term runs as records come, append,
 * flush, the INTERVAL sync, truncation; and the helpers the other journal
 * files share (journal_private.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crc32c.h"
#include "journal_private.h"

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

void journal_seg_name(char name[32], uint64_t seq)
{
	snprintf(name, 32, "%020llu.seg", (unsigned long long)seq);
}

ssize_t journal_pread_full(int fd, void *buf, size_t len, uint64_t off)
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

int journal_grow(void **arr, size_t *cap, size_t need, size_t elem)
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

int journal_seg_reserve(struct jseg *s)
{
	size_t cap = s->cap, need = ((size_t)s->n >> IDX_SHIFT) + 1;
	void *p = s->off;
	int r;

	if (s->n == UINT32_MAX)
		return -ENOMEM;
	if (need <= s->cap)
		return 0;
	r = journal_grow(&p, &cap, need, sizeof(uint32_t));
	if (r < 0)
		return r;
	s->off = p;
	s->cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
	return 0;
}

int journal_segs_reserve(struct journal *j)
{
	size_t cap = j->segs_cap;
	void *p = j->segs;
	int r = journal_grow(&p, &cap, (size_t)j->nsegs + 1, sizeof(struct jseg));

	if (r < 0)
		return r;
	j->segs = p;
	j->segs_cap = (unsigned)cap;
	return 0;
}

int journal_runs_reserve(struct journal *j, uint64_t term)
{
	void *p = j->runs;
	int r;

	if (j->nruns && j->runs[j->nruns - 1].term == term)
		return 0;
	r = journal_grow(&p, &j->runs_cap, j->nruns + 1, sizeof(struct term_run));
	if (r < 0)
		return r;
	j->runs = p;
	return 0;
}

void journal_runs_note(struct journal *j, uint64_t seq, uint64_t term)
{
	if (j->nruns && j->runs[j->nruns - 1].term == term)
		return;
	j->runs[j->nruns].seq = seq;
	j->runs[j->nruns].term = term;
	j->nruns++;
}

_Static_assert(offsetof(struct jseg, first_seq) == 0 && offsetof(struct term_run, seq) == 0,
	       "journal_last_at() finds segments and runs by their first member");

size_t journal_last_at(const void *arr, size_t n, size_t stride, uint64_t key)
{
	size_t lo = 0, hi = n - 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;
		uint64_t k;

		memcpy(&k, (const uint8_t *)arr + mid * stride, sizeof(k));
		if (k <= key)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

void journal_rfd_drop(struct journal *j)
{
	if (j->rfd >= 0)
		close(j->rfd);
	j->rfd = -1;
}

int journal_dir_sync(struct journal *j)
{
	if (j->opt.fsync != JOURNAL_FSYNC_NONE && fsync(j->dfd) < 0)
		return -errno;
	return 0;
}

int journal_data_sync(struct journal *j)
{
	if (!j->unsynced)
		return 0;
	if (fdatasync(j->wfd) < 0)
		return -errno;
	j->unsynced = 0;
	if (j->written > j->durable)
		j->durable = j->written;
	return 0;
}

int journal_all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zero[64];

	for (; n >= sizeof(zero); p += sizeof(zero), n -= sizeof(zero))
		if (memcmp(p, zero, sizeof(zero)) != 0)
			return 0;
	return n == 0 || memcmp(p, zero, n) == 0;
}

#define ZERO_CHUNK (64u << 10)

/* Keeps journal_options.ahead bytes of zeros written past the records: one
 * pwritev of a static zero chunk, when less than a quarter is left. A
 * failure (a full disk) is left to the records' own writes; a short write
 * counts what it wrote. */
static void zeros_ahead(struct journal *j)
{
	static const uint8_t zero[ZERO_CHUNK];
	struct iovec iov[JOURNAL_AHEAD_MAX / ZERO_CHUNK];
	uint64_t want = j->opt.ahead, left = j->zhi - j->wbase;
	size_t n = 0;
	ssize_t w;

	if (!want || j->opt.fsync == JOURNAL_FSYNC_NONE || left >= want / 4)
		return;
	for (uint64_t add = want - left; add && n < sizeof(iov) / sizeof(*iov); n++) {
		iov[n].iov_base = (void *)zero;
		iov[n].iov_len = add < ZERO_CHUNK ? (size_t)add : ZERO_CHUNK;
		add -= iov[n].iov_len;
	}
	w = pwritev(j->wfd, iov, (int)n, (off_t)j->zhi);
	if (w > 0) {
		j->zhi += (uint64_t)w;
		j->wrote = 1; /* a close cuts them */
	}
}

int journal_wbuf_write(struct journal *j)
{
	int r;

	if (!j->wlen)
		return 0;
	r = pwrite_full(j->wfd, j->wbuf, j->wlen, j->wbase);
	if (r < 0)
		return r;
	j->wbase += j->wlen;
	j->wrote = 1;
	if (j->zhi < j->wbase)
		j->zhi = j->wbase;
	j->wlen = 0;
	j->unsynced = 1;
	j->written = j->want - 1;
	return 0;
}

/* The zeros ahead off the file (no sync). */
static int zeros_drop(struct journal *j)
{
	if (j->wfd < 0 || j->zhi <= j->wbase)
		return 0;
	if (ftruncate(j->wfd, (off_t)j->wbase) < 0)
		return -errno;
	j->zhi = j->wbase;
	j->unsynced = 1;
	return 0;
}

int journal_zeros_cut(struct journal *j)
{
	int r = zeros_drop(j);

	return r < 0 || j->opt.fsync == JOURNAL_FSYNC_NONE ? r : journal_data_sync(j);
}

/* Creates segment `first`, its header written, as the new last segment. */
static int seg_create(struct journal *j, uint64_t first)
{
	uint8_t hdr[SEG_HDR];
	char name[32];
	struct jseg *s;
	int fd, r;

	r = journal_segs_reserve(j);
	if (r < 0)
		return r;
	journal_seg_name(name, first);
	fd = openat(j->dfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	memcpy(hdr, SEG_MAGIC, 8);
	put_le64(hdr + 8, first);
	r = pwrite_full(fd, hdr, SEG_HDR, 0);
	/* the header on disk before the name: a crash never leaves a named
	 * segment without its header (the first one would be refused) */
	if (r == 0 && j->opt.fsync != JOURNAL_FSYNC_NONE && fdatasync(fd) < 0)
		r = -errno;
	if (r == 0)
		r = journal_dir_sync(j);
	if (r < 0) {
		close(fd);
		unlinkat(j->dfd, name, 0);
		return r;
	}
	if (j->wfd >= 0)
		close(j->wfd);
	j->wfd = fd;
	journal_sync_fd_set(j);
	j->wbase = j->zhi = SEG_HDR;
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
	int r = journal_wbuf_write(j);

	/* A segment before the last ends at its records (an open takes zeros
	 * only at the last one's end), synced before the next has a name. */
	if (r == 0)
		r = zeros_drop(j);
	/* Inline, whatever the thread was asked for: once the thread's
	 * descriptor moves to the new segment (seg_create), a sync it had not
	 * begun would land there and count the old segment's tail as synced. */
	if (r == 0 && j->opt.fsync != JOURNAL_FSYNC_NONE) {
		j->unsynced = 1;
		r = journal_data_sync(j);
	}
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
		journal_seg_name(name, j->segs[0].first_seq);
		if (unlinkat(j->dfd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		close(j->wfd);
		j->wfd = -1;
		j->unsynced = 0;
		free(j->segs[0].off);
		j->nsegs = 0;
		journal_rfd_drop(j);
		j->gen++; /* another file under segment 0: the read cache goes */
	}
	journal_durable_cut(j, 0);
	return seg_create(j, first);
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
	} else if (tail(j)->n && (tail(j)->size >= j->opt.segment_bytes || j->roll_next)) {
		r = seg_roll(j);
	}
	j->roll_next = 0;
	if (r < 0)
		return r;
	s = tail(j);
	if ((r = journal_seg_reserve(s)) < 0 || (r = journal_runs_reserve(j, term)) < 0)
		return r;
	if (!j->wbuf && !(j->wbuf = malloc(WBUF_SIZE)))
		return -ENOMEM;
	if (j->wlen + rec > WBUF_SIZE && (r = journal_wbuf_write(j)) < 0)
		return r;
	p = j->wbuf + j->wlen;
	put_le32(p, (uint32_t)len);
	put_le64(p + 4, seq);
	put_le64(p + 12, term);
	if (len)
		memcpy(p + REC_HDR, data, len);
	put_le32(p + REC_HDR + len, crc32c(0, p, REC_HDR + len));
	journal_seg_note(s, (uint32_t)s->size);
	s->size += rec;
	j->wlen += rec;
	j->want = seq + 1;
	journal_runs_note(j, seq, term);
	return 0;
}

void journal_roll(struct journal *j)
{
	j->roll_next = 1;
}

int journal_flush(struct journal *j)
{
	int r;

	if (j->opt.read_only)
		return 0;
	r = journal_wbuf_write(j);
	if (r == 0)
		zeros_ahead(j); /* (not on a roll or a close, which cut them) */
	if (r == 0 && j->opt.fsync == JOURNAL_FSYNC_BATCH)
		r = journal_data_sync(j);
	if (r == 0 && j->opt.fsync == JOURNAL_FSYNC_DISK)
		r = journal_sync_start(j);
	return r;
}

int journal_tick(struct journal *j, uint64_t now_ms)
{
	int r;

	if (!j->opt.read_only && j->opt.fsync == JOURNAL_FSYNC_DISK)
		return journal_sync_start(j); /* a safety net: flushes start them */
	if (j->opt.read_only || j->opt.fsync != JOURNAL_FSYNC_INTERVAL)
		return 0;
	if (now_ms < j->next_sync_ms)
		return 0;
	r = journal_wbuf_write(j);
	if (r == 0) {
		zeros_ahead(j);
		r = journal_sync_start(j);
	}
	if (r == 0)
		j->next_sync_ms = now_ms + j->opt.interval_ms;
	return r;
}

/* Cuts the last segment, s, to s->size: records still in the write buffer
 * go from it without being written (so that a full disk can still cut a
 * tail), records written go from the file (then it is synced). 0 or -errno. */
static int cut_last(struct journal *j, struct jseg *s)
{
	if (s->size >= j->wbase) {
		j->wlen = (size_t)(s->size - j->wbase);
		return 0;
	}
	j->wlen = 0;
	/* what is cut, zeros ahead included, goes from the file: records cut
	 * must not read back after a crash, and zeros are made again */
	j->wbase = j->zhi = s->size;
	if (ftruncate(j->wfd, (off_t)s->size) < 0)
		return -errno;
	if (j->opt.fsync != JOURNAL_FSYNC_NONE && fdatasync(j->wfd) < 0)
		return -errno;
	return 0;
}

int journal_truncate_after(struct journal *j, uint64_t seq)
{
	char name[32];
	struct jseg *s;
	unsigned keep, removed;
	uint64_t n;
	int fd, r = 0;

	if (j->opt.read_only)
		return -EROFS;
	if (is_empty(j) || seq >= j->want - 1)
		return 0;
	if (seq + 1 < j->segs[0].first_seq)
		return -EINVAL;
	keep = seg_find(j, seq + 1);
	if (keep == 0 || j->segs[keep].first_seq != seq + 1)
		keep++; /* segment `keep` keeps a prefix (or, the first, its header) */
	removed = j->nsegs - keep;
	j->gen++;
	journal_rfd_drop(j);
	if (removed) { /* the last segment goes, and its write buffer */
		close(j->wfd);
		j->wfd = -1;
		j->wlen = 0;
		j->unsynced = 0;
	}
	while (j->nsegs > keep) {
		journal_seg_name(name, tail(j)->first_seq);
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
		uint64_t at;

		r = journal_rec_off(j, j->nsegs - 1, n, &at);
		if (r == 0) {
			s->size = at;
			s->n = (uint32_t)n;
		}
	}
	j->want = s->first_seq + s->n;
	journal_durable_cut(j, j->want - 1);
	while (j->nruns && j->runs[j->nruns - 1].seq >= j->want)
		j->nruns--;
	if (j->wfd < 0) { /* a segment written whole before the next began */
		journal_seg_name(name, s->first_seq);
		fd = openat(j->dfd, name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return r ? r : -errno;
		j->wfd = fd;
		journal_sync_fd_set(j);
		j->wbase = j->zhi = s->size + 1; /* cut_last truncates the file */
	}
	if (r == 0)
		r = cut_last(j, s);
	if (r == 0 && removed)
		r = journal_dir_sync(j);
	return r;
}

