/* lockstep-replay archive: the segments of whole trading days of a journal
 * packed into one zstd-compressed day archive (dayarc.h), every record's
 * CRC checked first, the archive synced and read back; with --remove the
 * archived segments then leave the journal directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "crc32c.h"
#include "dayarc.h"
#include "durable.h"
#include "replay.h"

#define REC_HDR 20u /* journal.h: length, sequence number, term; then data, CRC */
#define REC_OVERHEAD 24u

struct aseg {
	uint64_t first; /* its name */
	char name[32];
	dev_t dev;
	ino_t ino;
	uint64_t size;
	/* bytes archived: size, or less the zeros a writer's crash left after
	 * its records ([node] journal_ahead) */
	uint64_t packed;
	uint64_t hash; /* XXH3 of its bytes as archived */
};

struct archive_job {
	const char *dir, *out;
	struct aseg *segs; /* every segment of dir, ascending */
	size_t nsegs;
	size_t lo_k, hi_k; /* the archived ones: segs[lo_k..hi_k] */
	uint64_t lo, hi; /* their index range */
	uint64_t bytes;
	/* read back */
	size_t at;
	XXH3_state_t *xs;
};

static int cmp_seg(const void *a, const void *b)
{
	uint64_t x = ((const struct aseg *)a)->first, y = ((const struct aseg *)b)->first;

	return x < y ? -1 : x > y;
}

/* The segment files of dir (names as journal_seg_name makes them). */
static int list_segments(struct archive_job *job)
{
	DIR *d = opendir(job->dir);
	struct dirent *e;
	size_t cap = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char digits[21];
		uint64_t v;

		if (strlen(e->d_name) != 24 || strcmp(e->d_name + 20, ".seg") != 0 ||
		    strspn(e->d_name, "0123456789") != 20)
			continue;
		memcpy(digits, e->d_name, 20);
		digits[20] = 0;
		if (parse_u64(digits, &v) < 0)
			continue;
		if (job->nsegs == cap) {
			struct aseg *p = realloc(job->segs, (cap = cap ? cap * 2 : 64) * sizeof(*p));

			if (!p) {
				closedir(d);
				return -ENOMEM;
			}
			job->segs = p;
		}
		memset(&job->segs[job->nsegs], 0, sizeof(*job->segs));
		job->segs[job->nsegs].first = v;
		snprintf(job->segs[job->nsegs].name, 32, "%s", e->d_name);
		job->nsegs++;
	}
	closedir(d);
	if (job->nsegs)
		qsort(job->segs, job->nsegs, sizeof(*job->segs), cmp_seg);
	return 0;
}

/* Which segments hold exactly [lo, hi]: 0, or 1 with a message. */
static int pick_segments(struct archive_job *job, const struct tapedir *t, int all)
{
	size_t k;

	for (k = 0; k < job->nsegs && job->segs[k].first < job->lo; k++)
		;
	if (k == job->nsegs || job->segs[k].first != job->lo) {
		fprintf(stderr, PROG ": %s: seq %llu does not start a segment (a journal written "
			"before days rolled segments): not archived\n", job->dir,
			(unsigned long long)job->lo);
		return 1;
	}
	job->lo_k = k;
	while (k + 1 < job->nsegs && job->segs[k + 1].first <= job->hi)
		k++;
	job->hi_k = k;
	if (k + 1 < job->nsegs ? job->segs[k + 1].first != job->hi + 1 : (!all || job->hi != t->last)) {
		fprintf(stderr, PROG ": %s: seq %llu does not end a segment (%s): not archived\n",
			job->dir, (unsigned long long)job->hi,
			k + 1 < job->nsegs ? "the next day does not start a segment"
					   : "the last segment is still written");
		return 1;
	}
	return 0;
}

/* Checks every record of segment s (mapped at p) and that its records run
 * from s->first to `last`, up to *end (the file's size, or where zeros run
 * to its end). NULL, or what is wrong. */
static const char *check_segment(const struct aseg *s, const uint8_t *p, uint64_t last,
				 uint64_t *end)
{
	uint64_t off = DAYARC_SEG_HDR, seq = s->first;

	if (s->size < DAYARC_SEG_HDR || memcmp(p, "LKSTJRN1", 8) != 0)
		return "bad segment header";
	for (int i = 7; i >= 0; i--)
		if (p[8 + i] != (uint8_t)(s->first >> (8 * i)))
			return "segment header names another seq";
	while (off < s->size) {
		uint32_t len, crc;
		uint64_t rseq = 0, z = off;

		/* zeros to the end: a writer's zeros ahead ([node] journal_ahead)
		 * that a crash left; not archived */
		while (z < s->size && p[z] == 0)
			z++;
		if (z == s->size)
			break;

		if (s->size - off < REC_OVERHEAD)
			return "torn record";
		len = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
		      (uint32_t)p[off + 3] << 24;
		if (len > JOURNAL_MAX_RECORD || s->size - off < REC_OVERHEAD + (uint64_t)len)
			return "torn record";
		for (int i = 7; i >= 0; i--)
			rseq = rseq << 8 | p[off + 4 + i];
		crc = 0;
		for (int i = 3; i >= 0; i--)
			crc = crc << 8 | p[off + REC_HDR + len + i];
		if (crc32c(0, p + off, REC_HDR + len) != crc)
			return "crc mismatch";
		if (rseq != seq)
			return "sequence gap";
		seq++;
		off += REC_OVERHEAD + len;
	}
	*end = off;
	return seq - 1 == last ? NULL : "records missing at the segment's end";
}

/* Checks and packs one segment into w; notes its identity and hash. */
static int pack_segment(struct archive_job *job, struct dayarc_writer *w, struct aseg *s,
			uint64_t last)
{
	char path[4096];
	struct stat st;
	const char *bad;
	uint64_t end = 0;
	uint8_t *p;
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", job->dir, s->name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(-r));
		if (fd >= 0)
			close(fd);
		return r;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (uint64_t)st.st_size;
	p = s->size ? mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, PROG ": %s: %s\n", path, s->size ? strerror(errno) : "empty");
		return -EIO;
	}
	madvise(p, s->size, MADV_SEQUENTIAL);
	if ((bad = check_segment(s, p, last, &end)) != NULL) {
		fprintf(stderr, PROG ": %s: %s: not archived\n", path, bad);
		munmap(p, s->size);
		return -EBADMSG;
	}
	s->packed = end;
	s->hash = XXH3_64bits(p, end);
	r = dayarc_writer_segment(w, s->name, end);
	if (r == 0)
		r = dayarc_writer_data(w, p, end);
	munmap(p, s->size);
	job->bytes += end;
	return r;
}

/* Writes the archive to OUT.tmp, syncs it, renames it to OUT (never over an
 * existing file) and syncs the directory. 0, or 2 (message printed). */
static int write_archive(struct archive_job *job, int level)
{
	char tmp[4096];
	struct dayarc_writer *w = NULL;
	int fd, r;

	snprintf(tmp, sizeof(tmp), "%s.tmp", job->out);
	if (unlink(tmp) < 0 && errno != ENOENT) {
		fprintf(stderr, PROG ": %s: %s\n", tmp, strerror(errno));
		return 2;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, PROG ": %s: %s\n", tmp, strerror(errno));
		return 2;
	}
	r = dayarc_writer_open(&w, fd, level, (uint32_t)(job->hi_k - job->lo_k + 1));
	for (size_t k = job->lo_k; r == 0 && k <= job->hi_k; k++)
		r = pack_segment(job, w, &job->segs[k],
				 k < job->hi_k ? job->segs[k + 1].first - 1 : job->hi);
	if (r == 0) {
		r = dayarc_writer_close(w);
		w = NULL;
	}
	dayarc_writer_abort(w);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, job->out, RENAME_NOREPLACE) < 0)
		r = -errno;
	if (r == 0)
		r = durable_sync_parent(job->out);
	if (r < 0) {
		if (r != -EBADMSG)
			fprintf(stderr, PROG ": writing %s: %s\n", job->out, strerror(-r));
		unlink(tmp);
		return 2;
	}
	return 0;
}

static int back_begin(void *ctx, const char *name, uint64_t len)
{
	struct archive_job *job = ctx;
	const struct aseg *s = &job->segs[job->lo_k + job->at];

	if (job->lo_k + job->at > job->hi_k || strcmp(name, s->name) != 0 || len != s->packed)
		return -EBADMSG;
	return XXH3_64bits_reset(job->xs) == XXH_OK ? 0 : -ENOMEM;
}

static int back_data(void *ctx, const uint8_t *p, size_t n)
{
	struct archive_job *job = ctx;

	return XXH3_64bits_update(job->xs, p, n) == XXH_OK ? 0 : -EIO;
}

static int back_end(void *ctx)
{
	struct archive_job *job = ctx;

	return XXH3_64bits_digest(job->xs) == job->segs[job->lo_k + job->at++].hash ? 0 : -EBADMSG;
}

/* Reads the archive back and compares it with the segments as packed. */
static int read_back(struct archive_job *job)
{
	static const struct dayarc_ops ops = { back_begin, back_data, back_end };
	const char *why = NULL;
	int fd = open(job->out, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	job->at = 0;
	job->xs = XXH3_createState();
	r = job->xs ? dayarc_unpack_fd(fd, &ops, job, &why) : -ENOMEM;
	close(fd);
	XXH3_freeState(job->xs);
	job->xs = NULL;
	if (r == 0 && job->lo_k + job->at != job->hi_k + 1)
		r = -EBADMSG;
	return r;
}

/* 1 when bytes [from, size) of file `name` (in dfd) are all zero: what was
 * left out of the archive is still nothing but zeros. */
static int zeros_still(int dfd, const char *name, uint64_t from, uint64_t size)
{
	uint8_t buf[65536];
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), zero = fd >= 0;

	while (zero && from < size) {
		size_t want = size - from < sizeof(buf) ? (size_t)(size - from) : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)from);

		zero = n > 0;
		for (ssize_t i = 0; zero && i < n; i++)
			zero = buf[i] == 0;
		from += n > 0 ? (uint64_t)n : 0;
	}
	if (fd >= 0)
		close(fd);
	return zero;
}

/* Unlinks the archived segments, oldest first, each only while it is still
 * the file that was archived (records written over its zeros since count
 * as a change); then syncs the directory. 0, or 2. */
static int remove_segments(const struct archive_job *job)
{
	int dfd = open(job->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
	size_t k;

	if (dfd < 0) {
		fprintf(stderr, PROG ": %s: %s\n", job->dir, strerror(errno));
		return 2;
	}
	for (k = job->lo_k; k <= job->hi_k; k++) {
		const struct aseg *s = &job->segs[k];
		struct stat st;

		if (fstatat(dfd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != s->dev ||
		    st.st_ino != s->ino || (uint64_t)st.st_size != s->size ||
		    (s->packed < s->size && !zeros_still(dfd, s->name, s->packed, s->size))) {
			fprintf(stderr, PROG ": %s/%s changed since it was archived: kept\n", job->dir,
				s->name);
			r = 2;
			break;
		}
		if (unlinkat(dfd, s->name, 0) < 0) {
			fprintf(stderr, PROG ": %s/%s: %s\n", job->dir, s->name, strerror(errno));
			r = 2;
			break;
		}
	}
	if (k > job->lo_k && fsync(dfd) < 0) {
		fprintf(stderr, PROG ": %s: fsync: %s\n", job->dir, strerror(errno));
		r = 2;
	}
	close(dfd);
	if (k > job->lo_k)
		printf("removed %zu segment(s) from %s: it now starts at seq %llu\n", k - job->lo_k,
		       job->dir,
		       (unsigned long long)(k <= job->hi_k ? job->segs[k].first : job->hi + 1));
	return r;
}

/* The index range the options name: 0, or 1/2 with a message. */
static int archive_range(struct archive_job *job, const struct tapedir *t, uint32_t day,
			 uint32_t before, int all)
{
	const struct dayinfo *d;
	struct daylist l;
	int r, rc = 0;

	if (all) {
		job->lo = t->first;
		job->hi = t->last;
		return 0;
	}
	if ((r = daylist_scan(&l, t)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t->dir, strerror(-r));
		return 2;
	}
	d = daylist_find(&l, day ? day : before);
	if (!d) {
		fprintf(stderr, PROG ": %s: no day %u (lockstep-replay days lists them)\n", t->dir,
			day ? day : before);
		rc = 1;
	} else if (day && d == &l.v[l.n - 1]) {
		/* its last records may still be coming: a day is over once the
		 * next one has opened */
		fprintf(stderr, PROG ": %s: day %u is the journal's last (not over until the next "
			"day opens): not archived\n", t->dir, day);
		rc = 1;
	} else if (day) {
		job->lo = d->base;
		job->hi = d->last;
	} else if (d->base <= t->first) {
		fprintf(stderr, PROG ": %s: nothing before day %u\n", t->dir, before);
		rc = 1;
	} else {
		job->lo = t->first;
		job->hi = d->base - 1;
	}
	daylist_free(&l);
	return rc;
}

int cmd_archive(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "day", required_argument, NULL, 'd' }, { "all-before", required_argument, NULL, 'b' },
		{ "all", no_argument, NULL, 'a' }, { "out", required_argument, NULL, 'o' },
		{ "level", required_argument, NULL, 'l' }, { "remove", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct archive_job job = { 0 };
	uint32_t day = 0, before = 0;
	uint64_t level = 3;
	int all = 0, remove = 0, c, r, rc;
	struct tapedir t;
	struct stat st;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': if (opt_day(optarg, &day)) return 2; break;
		case 'b': if (opt_day(optarg, &before)) return 2; break;
		case 'a': all = 1; break;
		case 'o': job.out = optarg; break;
		case 'l':
			if (parse_u64(optarg, &level) < 0 || level < 1 || level > 19)
				return fail_usage("--level: 1..19");
			break;
		case 'r': remove = 1; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("archive: one journal directory");
	if (!!day + !!before + all != 1)
		return fail_usage("archive: one of --day N, --all-before N, --all");
	if (!job.out)
		return fail_usage("archive: --out FILE");
	job.dir = argv[optind];
	if (stat(job.dir, &st) == 0 && !S_ISDIR(st.st_mode))
		return fail_usage("archive: %s is not a journal directory", job.dir);
	if (lstat(job.out, &st) == 0) {
		fprintf(stderr, PROG ": %s exists: not overwritten\n", job.out);
		return 2;
	}
	if ((rc = tapedir_open(&t, job.dir, 1, 0)) != 0)
		return rc;
	if (!t.last) {
		fprintf(stderr, PROG ": %s: no records\n", job.dir);
		tapedir_close(&t);
		return 1;
	}
	rc = archive_range(&job, &t, day, before, all);
	if (rc == 0 && t.rep.bad_reason && t.rep.bad_seq <= job.hi) {
		fprintf(stderr, PROG ": %s: seq %llu is bad (%s): not archived (lockstep-replay "
			"verify)\n", job.dir, (unsigned long long)t.rep.bad_seq, t.rep.bad_reason);
		rc = 1;
	}
	if (rc == 0 && (r = list_segments(&job)) < 0) {
		fprintf(stderr, PROG ": %s: %s\n", job.dir, strerror(-r));
		rc = 2;
	}
	tapedir_close(&t);
	if (rc == 0)
		rc = pick_segments(&job, &t, all);
	if (rc == 0 && remove && job.lo_k != 0) {
		/* a journal is contiguous: it can lose days at its head only */
		fprintf(stderr, PROG ": %s: --remove would leave a gap before seq %llu (the journal "
			"starts at %llu): archive with --all-before %u, or the days before first\n",
			job.dir, (unsigned long long)job.lo, (unsigned long long)t.first, day + 1);
		rc = 1;
	}
	if (rc == 0)
		rc = write_archive(&job, (int)level);
	if (rc == 0 && (r = read_back(&job)) < 0) {
		fprintf(stderr, PROG ": %s: reading it back: %s; the journal is untouched\n", job.out,
			strerror(-r));
		rc = 2;
	}
	if (rc == 0) {
		if (stat(job.out, &st) < 0)
			st.st_size = 0;
		printf("archived seq %llu..%llu (%zu segment(s), %llu bytes) to %s: %llu bytes\n",
		       (unsigned long long)job.lo, (unsigned long long)job.hi,
		       job.hi_k - job.lo_k + 1, (unsigned long long)job.bytes, job.out,
		       (unsigned long long)st.st_size);
	}
	if (rc == 0 && remove)
		rc = remove_segments(&job);
	free(job.segs);
	return rc;
}
