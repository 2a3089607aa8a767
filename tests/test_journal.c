/* The journal (common/journal.c) and CRC32C (common/crc32c.c). Every test
 * works in a private mkdtemp directory under one per run, removed afterwards
 * (the per-run one also when a test fails). */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A second copy of the CRC32C code under another name, so that both its
 * paths can be run: have_sse42 picks one. The library's crc32c() is the one
 * declared by crc32c.h below. */
#define crc32c crc32c_copy
#include "crc32c.c"
#undef crc32c
#undef LOCKSTEP_CRC32C_H
#include "crc32c.h"
#include "journal.h"
#include "testutil.h"

#define SEG_HDR 16u
#define REC_OVERHEAD 24u

/* fdatasync, interposed for the whole program (the journal's syncer thread
 * calls this one): while fail_fdatasync > 0, that many calls fail with EIO. */
static _Atomic int fail_fdatasync;

int fdatasync(int fd)
{
	static int (*real)(int);

	if (atomic_load(&fail_fdatasync) > 0) {
		atomic_fetch_sub(&fail_fdatasync, 1);
		errno = EIO;
		return -1;
	}
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	return real(fd);
}

/* Sized so that every path made from them fits PATH_MAX. */
static char run_dir[1024]; /* one per run of this program */
static char test_dir[1040]; /* one per test, inside run_dir */
static char jdir[1050]; /* the journal, test_dir/j (journal_open creates it) */

/* ---- helpers ----------------------------------------------------------- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int fds_at_setup;

static void setup(void)
{
	ck_assert_int_eq(testutil_mkdtemp(test_dir, sizeof(test_dir), run_dir, "t"), 0);
	snprintf(jdir, sizeof(jdir), "%s/j", test_dir);
	fds_at_setup = count_fds();
}

/* Also: whatever a test opened, it closed (no descriptor leaks). */
static void teardown(void)
{
	testutil_rm_rf(test_dir);
	ck_assert_int_eq(count_fds(), fds_at_setup);
}

/* The record data of seq: 0 to 150 bytes that depend on seq. */
static size_t make_data(uint64_t seq, uint8_t *buf)
{
	size_t len = (size_t)(seq * 37 % 151);

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seq * 131 + i * 7 + (seq >> 8));
	return len;
}

static uint64_t term_of(uint64_t seq)
{
	return 1 + seq / 40;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A record as journal.h lays it out, written independently of journal.c. */
static size_t encode(uint8_t *out, uint64_t seq, uint64_t term, const uint8_t *data, size_t len)
{
	put_le32(out, (uint32_t)len);
	put_le64(out + 4, seq);
	put_le64(out + 12, term);
	memcpy(out + 20, data, len);
	put_le32(out + 20 + len, crc32c(0, out, 20 + len));
	return REC_OVERHEAD + len;
}

static size_t rec_size(uint64_t seq)
{
	uint8_t buf[256];

	return REC_OVERHEAD + make_data(seq, buf);
}

static struct journal *jopen_opt(const struct journal_options *o, struct journal_report *rep)
{
	struct journal *j = NULL;

	ck_assert_int_eq(journal_open(&j, jdir, o, rep), 0);
	ck_assert_ptr_nonnull(j);
	return j;
}

static struct journal *jopen(uint64_t segment_bytes, int read_only, struct journal_report *rep)
{
	struct journal_options o = { .segment_bytes = segment_bytes, .read_only = read_only };

	return jopen_opt(&o, rep);
}

static void append_range(struct journal *j, uint64_t from, uint64_t to)
{
	uint8_t buf[256];

	for (uint64_t s = from; s <= to; s++) {
		size_t len = make_data(s, buf);

		ck_assert_int_eq(journal_append(j, s, term_of(s), buf, len), 0);
	}
}

static void verify_range(struct journal *j, uint64_t from, uint64_t to)
{
	uint8_t want[256], got[256];

	for (uint64_t s = from; s <= to; s++) {
		size_t len = make_data(s, want);
		uint64_t term = 0;

		ck_assert_int_eq(journal_read(j, s, got, sizeof(got), &term), (int)len);
		ck_assert_mem_eq(got, want, len);
		ck_assert_uint_eq(term, term_of(s));
	}
}

/* Iterates from `from` to the end; the records must be first..last. */
static void verify_iter(struct journal *j, uint64_t from, uint64_t first, uint64_t last)
{
	struct journal_iter *it;
	uint64_t seq, term, next = first;
	const uint8_t *data;
	uint8_t want[256];
	size_t len;
	int r;

	ck_assert_int_eq(journal_iter_open(&it, j, from), 0);
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		ck_assert_uint_eq(seq, next);
		ck_assert_uint_eq(len, make_data(seq, want));
		ck_assert_mem_eq(data, want, len);
		ck_assert_uint_eq(term, term_of(seq));
		next++;
	}
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(next, last + 1);
	journal_iter_close(it);
}

static void seg_path(char *out, size_t cap, uint64_t first)
{
	snprintf(out, cap, "%s/%020llu.seg", jdir, (unsigned long long)first);
}

static off_t file_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -1;
	return st.st_size;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The first seqs of the segment files, sorted; returns how many. */
static size_t list_segs(uint64_t *out, size_t cap)
{
	DIR *d = opendir(jdir);
	struct dirent *e;
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) && n < cap) {
		unsigned long long v;
		char tail[8];

		if (strlen(e->d_name) == 24 && sscanf(e->d_name, "%20llu%7s", &v, tail) == 2 &&
		    strcmp(tail, ".seg") == 0)
			out[n++] = v;
	}
	closedir(d);
	qsort(out, n, sizeof(*out), cmp_u64);
	return n;
}

/* Where record seq starts in the segment that begins with first. */
static uint64_t rec_offset(uint64_t first, uint64_t seq)
{
	uint64_t off = SEG_HDR;

	for (uint64_t s = first; s < seq; s++)
		off += rec_size(s);
	return off;
}

/* The first seq of the segment holding seq. */
static uint64_t seg_of(uint64_t seq)
{
	uint64_t segs[512];
	size_t n = list_segs(segs, 512);

	ck_assert_uint_gt(n, 0);
	while (n > 1 && segs[n - 1] > seq)
		n--;
	return segs[n - 1];
}

static void xor_byte(const char *path, uint64_t off, uint8_t mask)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
	b ^= mask;
	ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static size_t read_whole(const char *path, uint8_t *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, cap);
	ck_assert_int_ge(n, 0);
	close(fd);
	return (size_t)n;
}

static size_t seg_header(uint8_t *out, uint64_t first)
{
	memcpy(out, "LKSTJRN1", 8);
	put_le64(out + 8, first);
	return SEG_HDR;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- CRC32C ------------------------------------------------------------ */

static uint32_t crc_bitwise(const uint8_t *p, size_t len)
{
	uint32_t c = 0xFFFFFFFFu;

	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

START_TEST(crc32c_known_vectors)
{
	uint8_t buf[32];

	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(crc32c(0, "", 0), 0);
	memset(buf, 0, sizeof(buf));
	ck_assert_uint_eq(crc32c(0, buf, 32), 0x8A9136AAu);
	/* RFC 3720 B.4 */
	memset(buf, 0xFF, sizeof(buf));
	ck_assert_uint_eq(crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	ck_assert_uint_eq(crc32c(0, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	ck_assert_uint_eq(crc32c(0, buf, 32), 0x113FDB5Cu);
	ck_assert_uint_eq(crc_bitwise((const uint8_t *)"123456789", 9), 0xE3069283u);
}
END_TEST

/* Every length to 300 and a few long ones, at 16 alignments, whole and split
 * in two (the second call extends the first). */
static void crc_against_reference(uint32_t (*fn)(uint32_t, const void *, size_t))
{
	static const size_t longs[] = { 511, 512, 1023, 1024, 4095, 4097, 65535 + 20 };
	static uint8_t buf[70000];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t len = 0; len < 300 + sizeof(longs) / sizeof(longs[0]); len++) {
		size_t n = len < 300 ? len : longs[len - 300];

		for (size_t align = 0; align < 16; align++) {
			const uint8_t *p = buf + align;
			uint32_t want = crc_bitwise(p, n);

			ck_assert_uint_eq(fn(0, p, n), want);
			ck_assert_uint_eq(fn(fn(0, p, n / 3), p + n / 3, n - n / 3), want);
		}
	}
}

START_TEST(crc32c_public_matches_bitwise)
{
	crc_against_reference(crc32c);
}
END_TEST

START_TEST(crc32c_software_and_hardware_paths)
{
	int cpu = have_sse42;

	ck_assert_int_ge(cpu, 0); /* the copy's constructor ran */
	have_sse42 = 0;
	crc_against_reference(crc32c_copy);
	if (cpu) {
		have_sse42 = 1;
		crc_against_reference(crc32c_copy);
	} else {
		fprintf(stderr, "crc32c: no SSE4.2 here, hardware path not run\n");
	}
	have_sse42 = cpu;
}
END_TEST

/* ---- journal: writing and reading -------------------------------------- */

START_TEST(roundtrip_across_reopen)
{
	static uint8_t big[JOURNAL_MAX_RECORD], got[JOURNAL_MAX_RECORD];
	struct journal_report rep;
	struct journal *j;
	uint64_t term;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	j = jopen(0, 0, &rep);
	ck_assert_uint_eq(rep.records, 0);
	ck_assert_uint_eq(journal_first_seq(j), 0);
	ck_assert_uint_eq(journal_last_seq(j), 0);
	append_range(j, 1, 300);
	ck_assert_int_eq(journal_append(j, 301, 9, big, sizeof(big)), 0);
	ck_assert_int_eq(journal_append(j, 302, 9, NULL, 0), 0);
	ck_assert_int_eq(journal_flush(j), 0);
	journal_close(j);

	j = jopen(0, 0, &rep);
	ck_assert_uint_eq(rep.records, 302);
	ck_assert_uint_eq(rep.first_seq, 1);
	ck_assert_uint_eq(rep.last_seq, 302);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.cut_bytes, 0);
	ck_assert_uint_eq(journal_next_seq(j), 303);
	verify_range(j, 1, 300);
	ck_assert_int_eq(journal_read(j, 301, got, sizeof(got), &term), (int)sizeof(big));
	ck_assert_mem_eq(got, big, sizeof(big));
	ck_assert_uint_eq(term, 9);
	ck_assert_int_eq(journal_read(j, 302, got, sizeof(got), NULL), 0);
	ck_assert_uint_eq(journal_segments(j), 1);
	{
		char path[PATH_MAX];

		seg_path(path, sizeof(path), 1);
		ck_assert_uint_eq(journal_bytes(j), (uint64_t)file_size(path));
	}
	journal_close(j);
}
END_TEST

START_TEST(file_format_matches_header)
{
	uint8_t want[4096], got[4096], data[256];
	char path[PATH_MAX];
	struct journal *j = jopen(0, 0, NULL);
	size_t n = seg_header(want, 42);

	append_range(j, 42, 60);
	journal_close(j);
	for (uint64_t s = 42; s <= 60; s++) {
		size_t len = make_data(s, data);

		n += encode(want + n, s, term_of(s), data, len);
	}
	seg_path(path, sizeof(path), 42);
	ck_assert_uint_eq(read_whole(path, got, sizeof(got)), n);
	ck_assert_mem_eq(got, want, n);
}
END_TEST

START_TEST(roundtrip_across_segment_rolls)
{
	uint64_t segs[512];
	struct journal_report rep;
	struct journal *j = jopen(1000, 0, NULL);
	size_t n;

	append_range(j, 1, 400);
	/* half flushed, half still buffered when it closes */
	ck_assert_int_eq(journal_flush(j), 0);
	append_range(j, 401, 800);
	verify_range(j, 1, 800);
	n = journal_segments(j);
	ck_assert_uint_gt(n, 20);
	journal_close(j);

	ck_assert_uint_eq(list_segs(segs, 512), n);
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		uint8_t hdr[SEG_HDR], want[SEG_HDR];
		uint64_t next = i + 1 < n ? segs[i + 1] : 801;
		uint64_t size = rec_offset(segs[i], next);

		seg_path(path, sizeof(path), segs[i]);
		ck_assert_uint_eq((uint64_t)file_size(path), size);
		/* rolled once past segment_bytes, not before */
		ck_assert_uint_ge(size, i + 1 < n ? 1000 : 0);
		ck_assert_uint_lt(size - rec_size(next - 1), 1000);
		read_whole(path, hdr, sizeof(hdr));
		seg_header(want, segs[i]);
		ck_assert_mem_eq(hdr, want, SEG_HDR);
	}

	j = jopen(1000, 0, &rep);
	ck_assert_uint_eq(rep.records, 800);
	ck_assert_uint_eq(journal_segments(j), n);
	verify_range(j, 1, 800);
	verify_iter(j, 1, 1, 800);
	append_range(j, 801, 900);
	journal_close(j);
	j = jopen(1000, 0, NULL);
	verify_range(j, 1, 900);
	journal_close(j);
}
END_TEST

START_TEST(read_records_still_buffered)
{
	uint8_t buf[256];
	struct journal *j = jopen(0, 0, NULL);
	char path[PATH_MAX];

	append_range(j, 1, 100);
	seg_path(path, sizeof(path), 1);
	ck_assert_int_eq(file_size(path), SEG_HDR); /* nothing written yet */
	verify_range(j, 1, 100);
	verify_iter(j, 1, 1, 100);
	ck_assert_int_eq(journal_flush(j), 0);
	append_range(j, 101, 150); /* some on file, some buffered */
	verify_range(j, 1, 150);
	verify_iter(j, 50, 50, 150);
	ck_assert_int_eq(journal_read(j, 151, buf, sizeof(buf), NULL), -ENOENT);
	journal_close(j);
}
END_TEST

START_TEST(read_errors)
{
	uint8_t buf[256];
	uint64_t term = 77;
	struct journal *j = jopen(0, 0, NULL);
	size_t len = make_data(5, buf);

	ck_assert_int_eq(journal_read(j, 1, buf, sizeof(buf), NULL), -ENOENT);
	append_range(j, 1, 10);
	ck_assert_int_eq(journal_read(j, 0, buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_int_eq(journal_read(j, 11, buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_uint_gt(len, 0);
	ck_assert_int_eq(journal_read(j, 5, buf, len - 1, &term), -ENOSPC);
	ck_assert_uint_eq(term, 77);
	ck_assert_int_eq(journal_read(j, 5, buf, len, &term), (int)len);
	journal_flush(j);
	ck_assert_int_eq(journal_read(j, 5, buf, len - 1, &term), -ENOSPC);
	ck_assert_int_eq(journal_read(j, 5, buf, len, &term), (int)len);
	journal_close(j);
}
END_TEST

START_TEST(append_wrong_seq_fails)
{
	static uint8_t big[JOURNAL_MAX_RECORD + 1];
	struct journal *j = jopen(0, 0, NULL);

	ck_assert_int_eq(journal_append(j, 0, 1, "x", 1), -EINVAL);
	ck_assert_int_eq(journal_append(j, UINT64_MAX, 1, "x", 1), -EINVAL);
	append_range(j, 1, 10);
	ck_assert_int_eq(journal_append(j, 12, 1, "x", 1), -EINVAL);
	ck_assert_int_eq(journal_append(j, 10, 1, "x", 1), -EINVAL);
	ck_assert_int_eq(journal_append(j, 1, 1, "x", 1), -EINVAL);
	ck_assert_int_eq(journal_append(j, 11, 1, big, sizeof(big)), -EINVAL);
	ck_assert_uint_eq(journal_last_seq(j), 10);
	ck_assert_uint_eq(journal_next_seq(j), 11);
	ck_assert_int_eq(journal_append(j, 11, 1, big, JOURNAL_MAX_RECORD), 0);
	journal_close(j);
	j = jopen(0, 0, NULL);
	ck_assert_uint_eq(journal_last_seq(j), 11);
	ck_assert_int_eq(journal_append(j, 13, 1, "x", 1), -EINVAL);
	journal_close(j);
}
END_TEST

START_TEST(journal_starting_at_1000)
{
	uint8_t buf[256], raw[SEG_HDR], want[SEG_HDR];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j = jopen(0, 0, NULL);

	ck_assert_int_eq(journal_append(j, 1000, term_of(1000), buf, make_data(1000, buf)), 0);
	append_range(j, 1001, 1099);
	ck_assert_uint_eq(journal_first_seq(j), 1000);
	journal_close(j);
	snprintf(path, sizeof(path), "%s/00000000000000001000.seg", jdir);
	ck_assert_int_gt(file_size(path), 0);
	read_whole(path, raw, sizeof(raw));
	seg_header(want, 1000);
	ck_assert_mem_eq(raw, want, SEG_HDR);

	j = jopen(0, 0, &rep);
	ck_assert_uint_eq(rep.first_seq, 1000);
	ck_assert_uint_eq(rep.last_seq, 1099);
	ck_assert_uint_eq(rep.records, 100);
	ck_assert_int_eq(journal_read(j, 999, buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_int_eq(journal_read(j, 1, buf, sizeof(buf), NULL), -ENOENT);
	verify_range(j, 1000, 1099);
	verify_iter(j, 1, 1000, 1099); /* from before the first: from the first */
	ck_assert_uint_eq(journal_term_at(j, 999), 0);
	ck_assert_uint_eq(journal_term_at(j, 1000), term_of(1000));
	journal_close(j);
}
END_TEST

START_TEST(term_at)
{
	struct journal *j = jopen(300, 0, NULL);

	ck_assert_uint_eq(journal_term_at(j, 1), 0);
	for (uint64_t s = 1; s <= 25; s++)
		ck_assert_int_eq(journal_append(j, s, s <= 10 ? 1 : s <= 20 ? 2 : 7, "abc", 3), 0);
	for (int pass = 0; pass < 2; pass++) {
		ck_assert_uint_eq(journal_term_at(j, 0), 0);
		ck_assert_uint_eq(journal_term_at(j, 1), 1);
		ck_assert_uint_eq(journal_term_at(j, 10), 1);
		ck_assert_uint_eq(journal_term_at(j, 11), 2);
		ck_assert_uint_eq(journal_term_at(j, 20), 2);
		ck_assert_uint_eq(journal_term_at(j, 21), 7);
		ck_assert_uint_eq(journal_term_at(j, 25), 7);
		ck_assert_uint_eq(journal_term_at(j, 26), 0);
		ck_assert_uint_eq(journal_term_at(j, UINT64_MAX), 0);
		journal_close(j);
		j = jopen(300, 0, NULL);
	}
	ck_assert_int_eq(journal_truncate_after(j, 15), 0);
	ck_assert_uint_eq(journal_term_at(j, 16), 0);
	for (uint64_t s = 16; s <= 18; s++)
		ck_assert_int_eq(journal_append(j, s, 3, "abc", 3), 0);
	ck_assert_uint_eq(journal_term_at(j, 15), 2);
	ck_assert_uint_eq(journal_term_at(j, 16), 3);
	ck_assert_uint_eq(journal_term_at(j, 18), 3);
	ck_assert_uint_eq(journal_term_at(j, 19), 0);
	journal_close(j);
	j = jopen(300, 0, NULL);
	ck_assert_uint_eq(journal_term_at(j, 10), 1);
	ck_assert_uint_eq(journal_term_at(j, 15), 2);
	ck_assert_uint_eq(journal_term_at(j, 16), 3);
	journal_close(j);
}
END_TEST

START_TEST(fsync_policies)
{
	static const enum journal_fsync pol[] = { JOURNAL_FSYNC_NONE, JOURNAL_FSYNC_INTERVAL,
						  JOURNAL_FSYNC_BATCH };

	for (unsigned p = 0; p < 3; p++) {
		struct journal_options o = { .segment_bytes = 2000, .fsync = pol[p], .interval_ms = 5 };
		struct journal *j;

		testutil_rm_rf(jdir);
		j = jopen_opt(&o, NULL);
		for (uint64_t s = 1; s <= 200; s += 20) {
			append_range(j, s, s + 19);
			ck_assert_int_eq(journal_flush(j), 0);
			ck_assert_int_eq(journal_tick(j, s), 0);
		}
		journal_close(j);
		j = jopen_opt(&o, NULL);
		ck_assert_uint_eq(journal_last_seq(j), 200);
		verify_range(j, 1, 200);
		journal_close(j);
	}
	{
		/* INTERVAL: a tick before the interval is up does nothing; a
		 * segment size past what u32 offsets allow is capped */
		struct journal_options o = { .segment_bytes = UINT64_MAX,
					     .fsync = JOURNAL_FSYNC_INTERVAL,
					     .interval_ms = 1000 };
		struct journal *j;

		testutil_rm_rf(jdir);
		j = jopen_opt(&o, NULL);
		append_range(j, 1, 10);
		ck_assert_int_eq(journal_tick(j, 5000), 0);
		append_range(j, 11, 20);
		ck_assert_int_eq(journal_tick(j, 5500), 0);
		ck_assert_int_eq(journal_tick(j, 6000), 0);
		journal_close(j);
		j = jopen_opt(&o, NULL);
		verify_range(j, 1, 20);
		journal_close(j);
	}
}
END_TEST

/* INTERVAL syncs in the background (journal_sync.c): ticks at every
 * batch while segments roll every few records and the tail is cut, with a
 * sync in flight most of the time; every record is there after a reopen,
 * and no descriptor is left behind (teardown counts them). */
START_TEST(interval_sync_in_background)
{
	struct journal_options o = { .segment_bytes = 4000, .fsync = JOURNAL_FSYNC_INTERVAL,
				     .interval_ms = 1 };
	struct journal *j = jopen_opt(&o, NULL);
	uint64_t now = 0;
	int cut = 0;

	for (uint64_t s = 1; s <= 600; s += 20) {
		append_range(j, s, s + 19);
		ck_assert_int_eq(journal_flush(j), 0);
		ck_assert_int_eq(journal_tick(j, now += 2), 0);
		if (s == 301 && !cut++) {
			ck_assert_int_eq(journal_truncate_after(j, 200), 0);
			s = 181; /* the next batch is 201.. */
		}
	}
	journal_close(j);
	j = jopen_opt(&o, NULL);
	ck_assert_uint_eq(journal_last_seq(j), 600);
	verify_range(j, 1, 600);
	journal_close(j);
}
END_TEST

/* Waits (bounded) for the DISK journal's background sync to end; polls it. */
static void disk_wait(struct journal *j)
{
	struct pollfd p = { .fd = journal_sync_fd(j), .events = POLLIN };

	ck_assert_int_ge(p.fd, 0);
	ck_assert_int_eq(poll(&p, 1, 5000), 1);
	ck_assert_int_ge(journal_poll(j), 0);
}

/* DISK: a background sync that fails is reported at once (the eventfd
 * wakes the loop, journal_poll returns the error) and what it was asked
 * for is synced again from the next journal_poll or flush on, without a new
 * record: a failed sync used to leave durable_seq behind until more was
 * written, and journal_await waiting for good. */
START_TEST(disk_failed_sync_reported_and_retried)
{
	struct journal_options o = { .fsync = JOURNAL_FSYNC_DISK };
	struct journal *j = jopen_opt(&o, NULL);
	struct pollfd p = { .fd = journal_sync_fd(j), .events = POLLIN };
	int r = 0;

	append_range(j, 1, 5);
	atomic_store(&fail_fdatasync, 1);
	ck_assert_int_eq(journal_flush(j), 0);
	for (int k = 0; k < 10 && r == 0; k++) {
		ck_assert_int_eq(poll(&p, 1, 5000), 1);
		r = journal_poll(j);
	}
	ck_assert_int_eq(r, -EIO);
	ck_assert_uint_eq(journal_durable_seq(j), 0);
	ck_assert_int_eq(atomic_load(&fail_fdatasync), 0);
	/* no more records: the next journal_poll asks for the sync again */
	for (int k = 0; k < 10 && journal_durable_seq(j) < 5; k++) {
		ck_assert_int_ge(journal_poll(j), 0);
		if (journal_durable_seq(j) < 5)
			ck_assert_int_eq(poll(&p, 1, 5000), 1);
	}
	ck_assert_uint_eq(journal_durable_seq(j), 5);
	/* journal_await: the error, then the retry */
	append_range(j, 6, 8);
	atomic_store(&fail_fdatasync, 1);
	ck_assert_int_eq(journal_flush(j), 0);
	r = journal_await(j, 8);
	if (r == -EIO)
		r = journal_await(j, 8);
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(journal_durable_seq(j), 8);
	journal_close(j);
}
END_TEST

/* DISK: a flush starts a background sync and nothing counts as durable
 * until it has ended (journal_poll after the eventfd); batches written while
 * one is in flight are covered by the next; a cut tail stops counting at
 * once, the sync in flight included; a reopen syncs what it found. */
START_TEST(disk_durable_after_background_sync)
{
	struct journal_options o = { .segment_bytes = 4000, .fsync = JOURNAL_FSYNC_DISK };
	struct journal *j = jopen_opt(&o, NULL);
	int moved = 0;

	ck_assert_int_ge(journal_sync_fd(j), 0);
	append_range(j, 1, 20);
	ck_assert_uint_eq(journal_durable_seq(j), 0); /* buffered */
	ck_assert_int_eq(journal_flush(j), 0);
	append_range(j, 21, 40);
	ck_assert_int_eq(journal_flush(j), 0); /* written; the first sync may still run */
	ck_assert_uint_le(journal_durable_seq(j), 20);
	for (int k = 0; k < 10 && journal_durable_seq(j) < 40; k++)
		disk_wait(j), moved++;
	ck_assert_uint_eq(journal_durable_seq(j), 40);
	ck_assert_int_ge(moved, 1);
	/* many batches, rolling segments, and a cut with a sync in flight */
	for (uint64_t s = 41; s <= 400; s += 20) {
		append_range(j, s, s + 19);
		ck_assert_int_eq(journal_flush(j), 0);
		ck_assert_uint_le(journal_durable_seq(j), s + 19);
		if (s == 301) {
			ck_assert_int_eq(journal_truncate_after(j, 250), 0);
			ck_assert_uint_le(journal_durable_seq(j), 250);
			append_range(j, 251, 320);
			ck_assert_int_eq(journal_flush(j), 0);
			s = 301;
		}
	}
	for (int k = 0; k < 50 && journal_durable_seq(j) < 400; k++)
		disk_wait(j);
	ck_assert_uint_eq(journal_durable_seq(j), 400);
	journal_close(j);
	j = jopen_opt(&o, NULL);
	ck_assert_uint_eq(journal_durable_seq(j), 400);
	verify_range(j, 1, 400);
	/* the other modes promise what is written: durable_seq is the last */
	journal_close(j);
	o.fsync = JOURNAL_FSYNC_INTERVAL;
	j = jopen_opt(&o, NULL);
	ck_assert_int_eq(journal_sync_fd(j), -1);
	append_range(j, 401, 410);
	ck_assert_uint_eq(journal_durable_seq(j), 410);
	ck_assert_int_eq(journal_poll(j), 0);
	journal_close(j);
}
END_TEST

/* A record that rots on disk after open: read and iteration say -EIO. */
START_TEST(corruption_after_open_is_eio)
{
	uint8_t buf[256];
	struct journal *j = jopen(0, 0, NULL);
	struct journal_iter *it;
	uint64_t seq, term;
	const uint8_t *data;
	char path[PATH_MAX];
	size_t len;
	int r;

	append_range(j, 1, 50);
	ck_assert_int_eq(journal_flush(j), 0);
	seg_path(path, sizeof(path), 1);
	xor_byte(path, rec_offset(1, 20) + 20, 0x04);
	ck_assert_int_eq(journal_read(j, 20, buf, sizeof(buf), NULL), -EIO);
	verify_range(j, 19, 19);
	verify_range(j, 21, 50);
	ck_assert_int_eq(journal_iter_open(&it, j, 1), 0);
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1)
		ck_assert_uint_lt(seq, 20);
	ck_assert_int_eq(r, -EIO);
	journal_iter_close(it);
	journal_close(j);
}
END_TEST

/* Records of up to JOURNAL_MAX_RECORD, several MiB in one segment: the
 * scan at open reads it in chunks that records straddle. */
START_TEST(large_records_across_scan_chunks)
{
	static uint8_t want[JOURNAL_MAX_RECORD], got[JOURNAL_MAX_RECORD];
	struct journal_report rep;
	struct journal *j = jopen(0, 0, NULL);
	uint64_t seq, term;
	struct journal_iter *it;
	const uint8_t *data;
	size_t len;

	for (uint64_t s = 1; s <= 120; s++) {
		len = s % 10 == 0 ? JOURNAL_MAX_RECORD : (size_t)(s * 7919 % JOURNAL_MAX_RECORD);
		memset(want, (int)s, len);
		ck_assert_int_eq(journal_append(j, s, s, want, len), 0);
	}
	journal_close(j);
	j = jopen(0, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.records, 120);
	ck_assert_uint_gt(journal_bytes(j), 3u << 20);
	ck_assert_int_eq(journal_iter_open(&it, j, 1), 0);
	for (uint64_t s = 1; s <= 120; s++) {
		len = s % 10 == 0 ? JOURNAL_MAX_RECORD : (size_t)(s * 7919 % JOURNAL_MAX_RECORD);
		memset(want, (int)s, len);
		ck_assert_int_eq(journal_read(j, s, got, sizeof(got), &term), (int)len);
		ck_assert_mem_eq(got, want, len);
		ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 1);
		ck_assert_uint_eq(seq, s);
		ck_assert_uint_eq(term, s);
		ck_assert_mem_eq(data, want, len);
	}
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0);
	journal_iter_close(it);
	journal_close(j);
}
END_TEST

/* ---- iterators ---------------------------------------------------------- */

START_TEST(iter_from_first_middle_last)
{
	uint64_t segs[512], seq, term;
	struct journal *j = jopen(700, 0, NULL);
	struct journal_iter *it;
	const uint8_t *data;
	size_t len, n;

	append_range(j, 1, 300);
	journal_close(j);
	j = jopen(700, 0, NULL);
	n = list_segs(segs, 512);
	ck_assert_uint_gt(n, 5);
	verify_iter(j, 1, 1, 300);
	verify_iter(j, 0, 1, 300);
	verify_iter(j, 150, 150, 300);
	verify_iter(j, 300, 300, 300);
	/* from each segment's first record and from the one before it */
	for (size_t i = 1; i < n; i++) {
		verify_iter(j, segs[i], segs[i], 300);
		verify_iter(j, segs[i] - 1, segs[i] - 1, 300);
	}

	/* from last + 1: nothing yet, then what is appended, also across a roll */
	ck_assert_int_eq(journal_iter_open(&it, j, 301), 0);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0);
	append_range(j, 301, 301);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 1);
	ck_assert_uint_eq(seq, 301);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0);
	append_range(j, 302, 360);
	journal_flush(j);
	append_range(j, 361, 380);
	for (uint64_t s = 302; s <= 380; s++) {
		uint8_t want[256];

		ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 1);
		ck_assert_uint_eq(seq, s);
		ck_assert_uint_eq(len, make_data(s, want));
		ck_assert_mem_eq(data, want, len);
	}
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0);
	journal_iter_close(it);
	ck_assert_uint_gt(journal_segments(j), n);
	journal_close(j);
}
END_TEST

/* no_index: the same records through the iterator (from anywhere) and
 * journal_read's fallback walk, the same report; refused read-write. */
START_TEST(no_index_iterates_the_same)
{
	struct journal_options o = { .read_only = 1, .no_index = 1 };
	struct journal_options rw = { .no_index = 1 };
	struct journal_report a, b;
	struct journal *j = jopen(700, 0, NULL), *k = NULL;
	uint64_t segs[512];
	size_t n;

	append_range(j, 1, 300);
	journal_close(j);
	n = list_segs(segs, 512);
	ck_assert_uint_gt(n, 5);
	j = jopen(700, 1, &a);
	k = jopen_opt(&o, &b);
	ck_assert_uint_eq(b.records, a.records);
	ck_assert_uint_eq(b.first_seq, 1);
	ck_assert_uint_eq(b.last_seq, 300);
	ck_assert_uint_eq(journal_last_seq(k), 300);
	ck_assert_uint_eq(journal_segments(k), journal_segments(j));
	ck_assert_uint_eq(journal_bytes(k), journal_bytes(j));
	verify_iter(k, 0, 1, 300);
	verify_iter(k, 150, 150, 300);
	verify_iter(k, 300, 300, 300);
	for (size_t i = 1; i < n; i++) {
		verify_iter(k, segs[i], segs[i], 300);
		verify_iter(k, segs[i] - 1, segs[i] - 1, 300);
	}
	verify_range(k, 1, 300);
	for (uint64_t s = 1; s <= 300; s++)
		ck_assert_uint_eq(journal_term_at(k, s), term_of(s));
	journal_close(k);
	journal_close(j);
	k = NULL;
	ck_assert_int_eq(journal_open(&k, jdir, &rw, NULL), -EINVAL);
	ck_assert_ptr_null(k);
}
END_TEST

START_TEST(iter_on_empty_and_stale)
{
	uint64_t seq, term;
	struct journal *j = jopen(700, 0, NULL);
	struct journal_iter *it;
	const uint8_t *data;
	size_t len;

	ck_assert_int_eq(journal_iter_open(&it, j, 0), 0);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0);
	append_range(j, 50, 60);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 1);
	ck_assert_uint_eq(seq, 50);
	ck_assert_int_eq(journal_truncate_after(j, 55), 0);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), -ESTALE);
	journal_iter_close(it);
	journal_iter_close(NULL);
	journal_close(j);
	journal_close(NULL);
}
END_TEST

/* ---- cutting the tail at open ------------------------------------------ */

START_TEST(torn_tail_every_offset)
{
	static uint8_t full[8192];
	uint8_t buf[256];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j = jopen(0, 0, NULL);
	uint64_t off = rec_offset(1, 20), rec = rec_size(20);
	size_t n;

	append_range(j, 1, 20);
	journal_close(j);
	seg_path(path, sizeof(path), 1);
	n = read_whole(path, full, sizeof(full));
	ck_assert_uint_eq(n, off + rec);
	ck_assert_uint_gt(rec, REC_OVERHEAD);
	for (uint64_t b = 0; b < rec; b++) {
		write_file(path, full, off + b);
		j = jopen(0, 0, &rep);
		ck_assert_uint_eq(rep.records, 19);
		ck_assert_uint_eq(rep.last_seq, 19);
		ck_assert_uint_eq(journal_next_seq(j), 20);
		if (b == 0) {
			ck_assert_ptr_null(rep.bad_reason);
			ck_assert_uint_eq(rep.cut_bytes, 0);
			ck_assert_uint_eq(rep.bad_seq, 0);
		} else {
			ck_assert_str_eq(rep.bad_reason, "torn record");
			ck_assert_uint_eq(rep.cut_bytes, b);
			ck_assert_uint_eq(rep.bad_seq, 20);
			ck_assert_uint_eq(rep.bad_offset, off);
			ck_assert_str_eq(rep.bad_segment, "00000000000000000001.seg");
			ck_assert_uint_eq(rep.cut_segments, 0);
		}
		ck_assert_int_eq(file_size(path), (off_t)off);
		ck_assert_int_eq(journal_read(j, 20, buf, sizeof(buf), NULL), -ENOENT);
		verify_range(j, 19, 19);
		append_range(j, 20, 20);
		journal_close(j);
		j = jopen(0, 0, &rep);
		ck_assert_ptr_null(rep.bad_reason);
		ck_assert_uint_eq(rep.last_seq, 20);
		verify_range(j, 1, 20);
		journal_close(j);
	}
}
END_TEST

START_TEST(torn_tail_of_last_segment)
{
	static uint8_t full[4096];
	uint64_t segs[512];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j = jopen(600, 0, NULL);
	uint64_t last, off, rec;
	size_t n, len;

	append_range(j, 1, 100);
	journal_close(j);
	n = list_segs(segs, 512);
	ck_assert_uint_gt(n, 3);
	last = segs[n - 1];
	seg_path(path, sizeof(path), last);
	len = read_whole(path, full, sizeof(full));
	off = rec_offset(last, 100);
	rec = rec_size(100);
	ck_assert_uint_eq(len, off + rec);
	for (uint64_t b = 1; b < rec; b += 7) {
		write_file(path, full, off + b);
		j = jopen(600, 0, &rep);
		ck_assert_str_eq(rep.bad_reason, "torn record");
		ck_assert_uint_eq(rep.last_seq, 99);
		ck_assert_uint_eq(rep.cut_bytes, b);
		ck_assert_uint_eq(journal_segments(j), n);
		append_range(j, 100, 100);
		journal_close(j);
	}
	/* a torn segment header: the segment goes, the one before stays */
	for (size_t b = 0; b < SEG_HDR; b++) {
		write_file(path, full, b);
		j = jopen(600, 0, &rep);
		ck_assert_str_eq(rep.bad_reason, "torn segment header");
		ck_assert_uint_eq(rep.last_seq, last - 1);
		ck_assert_uint_eq(rep.bad_seq, last);
		ck_assert_uint_eq(rep.bad_offset, 0);
		ck_assert_uint_eq(rep.cut_segments, 1);
		ck_assert_uint_eq(rep.cut_bytes, b);
		ck_assert_int_eq(file_size(path), -1);
		ck_assert_uint_eq(journal_segments(j), n - 1);
		append_range(j, last, 100);
		verify_range(j, 1, 100);
		journal_close(j);
		ck_assert_int_eq((int)list_segs(segs, 512), (int)n);
		seg_path(path, sizeof(path), segs[n - 1]);
		ck_assert_uint_eq(segs[n - 1], last);
	}
}
END_TEST

/* A byte of record R flipped: the record and all after it are cut. */
struct flip {
	const char *field;
	int where; /* offset in the record; -1: the first data byte, -2: the CRC */
	uint8_t mask;
	const char *reason; /* NULL: any */
};

static const struct flip flips[] = {
	{ "data", -1, 0x01, "crc mismatch" },
	{ "data", -1, 0x80, "crc mismatch" },
	{ "length (low byte)", 0, 0x01, NULL },
	{ "length (low byte, longer)", 0, 0x40, NULL },
	{ "length (high byte)", 3, 0x10, "bad length" },
	{ "length (third byte)", 2, 0x01, "bad length" },
	{ "seq", 4, 0x01, "crc mismatch" },
	{ "seq (high byte)", 11, 0x80, "crc mismatch" },
	{ "term", 12, 0x02, "crc mismatch" },
	{ "crc", -2, 0x01, "crc mismatch" },
	{ "crc (last byte)", -2 - 3, 0x80, "crc mismatch" },
};

#define R 123u
#define LAST 250u

/* Builds 1..LAST in segments of ~1000 bytes, flips one byte of R, opens;
 * returns the segment of R and fills its offset and the sizes it expects. */
static void corrupt(const struct flip *f, uint64_t *seg, uint64_t *off, uint64_t *cut_bytes,
		    uint64_t *later)
{
	uint64_t segs[512], len;
	char path[PATH_MAX];
	struct journal *j = jopen(1000, 0, NULL);
	size_t n, i;
	int where = f->where;

	append_range(j, 1, LAST);
	journal_close(j);
	n = list_segs(segs, 512);
	*seg = seg_of(R);
	ck_assert_uint_ne(*seg, R); /* R is inside its segment */
	ck_assert_uint_ne(*seg, segs[n - 1]); /* and segments follow */
	*off = rec_offset(*seg, R);
	len = rec_size(R) - REC_OVERHEAD;
	ck_assert_uint_gt(len, 0);
	if (where == -1)
		where = 20;
	else if (where <= -2)
		where = (int)(20 + len) + (-2 - where);
	seg_path(path, sizeof(path), *seg);
	*cut_bytes = (uint64_t)file_size(path) - *off;
	*later = 0;
	for (i = 0; i < n; i++) {
		if (segs[i] <= *seg)
			continue;
		(*later)++;
		seg_path(path, sizeof(path), segs[i]);
		*cut_bytes += (uint64_t)file_size(path);
	}
	seg_path(path, sizeof(path), *seg);
	xor_byte(path, *off + (uint64_t)where, f->mask);
}

static void check_report(const struct flip *f, const struct journal_report *rep, uint64_t seg,
			 uint64_t off, uint64_t cut_bytes, uint64_t later)
{
	char name[64];

	snprintf(name, sizeof(name), "%020llu.seg", (unsigned long long)seg);
	ck_assert_ptr_nonnull(rep->bad_reason);
	if (f->reason)
		ck_assert_str_eq(rep->bad_reason, f->reason);
	ck_assert_uint_eq(rep->records, R - 1);
	ck_assert_uint_eq(rep->first_seq, 1);
	ck_assert_uint_eq(rep->last_seq, R - 1);
	ck_assert_uint_eq(rep->bad_seq, R);
	ck_assert_uint_eq(rep->bad_offset, off);
	ck_assert_str_eq(rep->bad_segment, name);
	ck_assert_uint_eq(rep->cut_segments, later);
	ck_assert_uint_eq(rep->cut_bytes, cut_bytes);
}

START_TEST(flipped_byte_is_cut)
{
	const struct flip *f = &flips[_i];
	uint64_t seg, off, cut_bytes, later, segs[512];
	struct journal_report rep;
	char path[PATH_MAX];
	uint8_t buf[256];
	struct journal *j;

	corrupt(f, &seg, &off, &cut_bytes, &later);
	j = jopen(1000, 0, &rep);
	check_report(f, &rep, seg, off, cut_bytes, later);
	ck_assert_uint_eq(journal_last_seq(j), R - 1);
	ck_assert_int_eq(journal_read(j, R, buf, sizeof(buf), NULL), -ENOENT);
	verify_range(j, 1, R - 1);
	verify_iter(j, 1, 1, R - 1);
	journal_close(j);
	/* on disk: the later segments are gone, R's segment ends before R */
	j = jopen(1000, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(list_segs(segs, 512), journal_segments(j));
	ck_assert_uint_eq(segs[journal_segments(j) - 1], seg);
	seg_path(path, sizeof(path), seg);
	ck_assert_int_eq(file_size(path), (off_t)off);
	append_range(j, R, LAST + 10);
	journal_close(j);
	j = jopen(1000, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	verify_range(j, 1, LAST + 10);
	journal_close(j);
}
END_TEST

/* A journal that was synced (any policy but NONE): a bad record with good
 * records after it is damage. The open refuses it (-EUCLEAN) and removes
 * nothing, a read-only open and journal_damage_text say where it is, and a
 * repair (cut_damaged) cuts it as before. In the last segment the same,
 * while a torn last record (the crash's half-written batch) is cut as a
 * tail. */
START_TEST(damage_is_refused_not_cut)
{
	const struct flip *f = &flips[_i];
	struct journal_options o = { .segment_bytes = 1000, .fsync = JOURNAL_FSYNC_INTERVAL };
	uint64_t seg, off, cut_bytes, later, segs[512], segs2[512], last;
	struct journal_report rep;
	char path[PATH_MAX], text[1024];
	struct journal *j = NULL;
	size_t n;
	off_t size;

	corrupt(f, &seg, &off, &cut_bytes, &later);
	n = list_segs(segs, 512);
	seg_path(path, sizeof(path), seg);
	size = file_size(path);
	ck_assert_int_eq(journal_open(&j, jdir, &o, &rep), -EUCLEAN);
	ck_assert_ptr_null(j);
	check_report(f, &rep, seg, off, cut_bytes, later);
	ck_assert_int_eq(rep.damaged, 1);
	ck_assert_uint_eq(list_segs(segs2, 512), n); /* nothing removed */
	ck_assert_mem_eq(segs, segs2, n * sizeof(*segs));
	ck_assert_int_eq(file_size(path), size);
	journal_damage_text(&rep, jdir, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(text, "seq 123 "));
	ck_assert_ptr_nonnull(strstr(text, "lockstep-replay repair"));
	o.read_only = 1;
	j = jopen_opt(&o, &rep);
	ck_assert_int_eq(rep.damaged, 1);
	ck_assert_uint_eq(journal_last_seq(j), R - 1);
	journal_close(j);
	o.read_only = 0;
	o.cut_damaged = 1;
	j = jopen_opt(&o, &rep);
	ck_assert_uint_eq(journal_last_seq(j), R - 1);
	journal_close(j);
	o.cut_damaged = 0;
	j = jopen_opt(&o, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	/* the last segment: damage in its middle, then a torn last record */
	append_range(j, R, LAST);
	journal_close(j);
	n = list_segs(segs, 512);
	last = segs[n - 1];
	ck_assert_uint_lt(last + 1, LAST); /* two records or more in it */
	seg_path(path, sizeof(path), last);
	xor_byte(path, rec_offset(last, last) + 20, 0x01);
	ck_assert_int_eq(journal_open(&j, jdir, &o, &rep), -EUCLEAN);
	ck_assert_uint_eq(rep.bad_seq, last);
	xor_byte(path, rec_offset(last, last) + 20, 0x01);
	ck_assert_int_eq(truncate(path, (off_t)rec_offset(last, LAST) + 7), 0);
	j = jopen_opt(&o, &rep);
	ck_assert_int_eq(rep.damaged, 0);
	ck_assert_str_eq(rep.bad_reason, "torn record");
	ck_assert_uint_eq(journal_last_seq(j), LAST - 1);
	journal_close(j);
}
END_TEST

START_TEST(read_only_reports_without_cutting)
{
	const struct flip *f = &flips[_i];
	uint64_t seg, off, cut_bytes, later, segs[512], segs2[512];
	struct journal_report rep;
	char path[PATH_MAX];
	uint8_t buf[256];
	struct journal *j;
	size_t n;
	off_t size;

	corrupt(f, &seg, &off, &cut_bytes, &later);
	n = list_segs(segs, 512);
	seg_path(path, sizeof(path), seg);
	size = file_size(path);
	for (int pass = 0; pass < 2; pass++) {
		j = jopen(1000, 1, &rep);
		check_report(f, &rep, seg, off, cut_bytes, later);
		ck_assert_uint_eq(journal_last_seq(j), R - 1);
		ck_assert_int_eq(journal_read(j, R, buf, sizeof(buf), NULL), -ENOENT);
		verify_range(j, 1, R - 1);
		verify_iter(j, 1, 1, R - 1);
		ck_assert_int_eq(journal_append(j, R, 1, "x", 1), -EROFS);
		ck_assert_int_eq(journal_truncate_after(j, 5), -EROFS);
		ck_assert_int_eq(journal_flush(j), 0);
		journal_close(j);
		ck_assert_uint_eq(list_segs(segs2, 512), n);
		ck_assert_mem_eq(segs2, segs, n * sizeof(segs[0]));
		ck_assert_int_eq(file_size(path), size);
	}
	j = jopen(1000, 0, &rep);
	check_report(f, &rep, seg, off, cut_bytes, later);
	journal_close(j);
	ck_assert_int_eq(file_size(path), (off_t)off);
}
END_TEST

/* Malformed tails after five good records in one segment: what each one
 * is reported as, and what is kept. */
struct bad_tail {
	const char *name;
	const char *reason;
	uint64_t last; /* last seq kept */
};

static const struct bad_tail bad_tails[] = {
	{ "one zero byte", NULL, 5 }, /* zeros: the end (zeros ahead), not a cut */
	{ "length, seq and term less a byte", "torn record", 5 },
	{ "length, seq and term only", "torn record", 5 },
	{ "no crc", "torn record", 5 },
	{ "crc less a byte", "torn record", 5 },
	{ "length 65536", "bad length", 5 },
	{ "length 0xffffffff", "bad length", 5 },
	{ "length 0x80000000", "bad length", 5 },
	{ "seq skips one, crc good", "sequence gap", 5 },
	{ "seq repeats, crc good", "sequence gap", 5 },
	{ "seq 0, crc good", "sequence gap", 5 },
	{ "seq UINT64_MAX, crc good", "sequence gap", 5 },
	{ "crc off by a bit", "crc mismatch", 5 },
	{ "crc zero", "crc mismatch", 5 },
	{ "crc over the data only", "crc mismatch", 5 },
	{ "crc big-endian", "crc mismatch", 5 },
	{ "24 zero bytes", NULL, 5 },
	{ "4096 bytes of 0xff", "bad length", 5 },
	{ "a good record and a stray byte", "torn record", 6 },
	{ "term changed after the crc", "crc mismatch", 5 },
	{ "data changed after the crc", "crc mismatch", 5 },
	{ "length one short", "crc mismatch", 5 },
	{ "a segment header inside the segment", "bad length", 5 },
};

/* The bytes of bad_tails[i], appended after record 5. */
static size_t bad_tail_bytes(int i, uint8_t *out)
{
	uint8_t data[256];
	size_t dlen = make_data(6, data);
	size_t n = encode(out, 6, term_of(6), data, dlen);

	ck_assert_uint_gt(dlen, 1);
	switch (i) {
	case 0: out[0] = 0; return 1;
	case 1: return 19;
	case 2: return 20;
	case 3: return 20 + dlen;
	case 4: return n - 1;
	case 5: put_le32(out, 65536); return n;
	case 6: put_le32(out, 0xffffffffu); return n;
	case 7: put_le32(out, 0x80000000u); return n;
	case 8: return encode(out, 7, 1, data, dlen);
	case 9: return encode(out, 5, 1, data, dlen);
	case 10: return encode(out, 0, 1, data, dlen);
	case 11: return encode(out, UINT64_MAX, 1, data, dlen);
	case 12: out[n - 4] ^= 1; return n;
	case 13: put_le32(out + n - 4, 0); return n;
	case 14: put_le32(out + n - 4, crc32c(0, data, dlen)); return n;
	case 15: {
		uint32_t c = crc32c(0, out, 20 + dlen);

		for (int k = 0; k < 4; k++)
			out[n - 4 + k] = (uint8_t)(c >> (24 - 8 * k));
		return n;
	}
	case 16: memset(out, 0, 24); return 24;
	case 17: memset(out, 0xff, 4096); return 4096;
	case 18: out[n] = 0x5a; return n + 1;
	case 19: out[12] ^= 0x40; return n;
	case 20: out[20 + dlen - 1] ^= 0x40; return n;
	case 21: put_le32(out, (uint32_t)dlen - 1); return n;
	case 22:
		memmove(out + SEG_HDR, out, n);
		return seg_header(out, 6) + n;
	}
	ck_abort_msg("no case %d", i);
	return 0;
}

START_TEST(malformed_tails)
{
	const struct bad_tail *t = &bad_tails[_i];
	static uint8_t file[8192];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j = jopen(0, 0, NULL);
	size_t good, tail;
	uint64_t kept_end;

	append_range(j, 1, 5);
	journal_close(j);
	seg_path(path, sizeof(path), 1);
	good = read_whole(path, file, sizeof(file));
	tail = bad_tail_bytes(_i, file + good);
	write_file(path, file, good + tail);
	kept_end = t->last == 6 ? good + rec_size(6) : good;

	j = jopen(0, 0, &rep);
	if (!t->reason) {
		ck_assert_msg(!rep.bad_reason, "%s: got %s", t->name, rep.bad_reason);
		ck_assert_uint_eq(rep.zero_bytes, tail);
		ck_assert_uint_eq(rep.cut_bytes, 0);
		ck_assert_uint_eq(rep.last_seq, t->last);
		journal_close(j); /* untouched: nothing was written */
		ck_assert_int_eq(file_size(path), (off_t)(good + tail));
		j = jopen(0, 0, &rep);
		append_range(j, 6, 6);
		journal_close(j); /* written: ends at its records */
		ck_assert_int_eq(file_size(path), (off_t)(good + rec_size(6)));
		return;
	}
	ck_assert_msg(rep.bad_reason && strcmp(rep.bad_reason, t->reason) == 0, "%s: got %s",
		      t->name, rep.bad_reason ? rep.bad_reason : "nothing");
	ck_assert_uint_eq(rep.last_seq, t->last);
	ck_assert_uint_eq(rep.bad_seq, t->last + 1);
	ck_assert_uint_eq(rep.bad_offset, kept_end);
	ck_assert_uint_eq(rep.cut_bytes, good + tail - kept_end);
	ck_assert_uint_eq(rep.cut_segments, 0);
	verify_range(j, 1, t->last);
	journal_close(j);
	ck_assert_int_eq(file_size(path), (off_t)kept_end);
}
END_TEST

START_TEST(read_only_missing_dir)
{
	struct journal_options o = { .read_only = 1 };
	struct journal *j = NULL;

	ck_assert_int_eq(journal_open(&j, jdir, &o, NULL), -ENOENT);
	ck_assert_ptr_null(j);
	ck_assert_int_eq(file_size(jdir), -1);
}
END_TEST

START_TEST(sequence_gap_inside_segment)
{
	uint8_t file[4096], data[256];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j;
	size_t n, at = 0;

	ck_assert_int_eq(mkdir(jdir, 0755), 0);
	n = seg_header(file, 1);
	for (uint64_t s = 1; s <= 6; s++) {
		uint64_t seq = s < 4 ? s : s + 1; /* 1 2 3 5 6 7, every CRC good */

		if (s == 4)
			at = n;
		n += encode(file + n, seq, 1, data, make_data(seq, data));
	}
	seg_path(path, sizeof(path), 1);
	write_file(path, file, n);
	j = jopen(0, 0, &rep);
	ck_assert_str_eq(rep.bad_reason, "sequence gap");
	ck_assert_uint_eq(rep.last_seq, 3);
	ck_assert_uint_eq(rep.bad_seq, 4);
	ck_assert_uint_eq(rep.bad_offset, at);
	ck_assert_uint_eq(rep.cut_bytes, n - at);
	ck_assert_uint_eq(journal_next_seq(j), 4);
	journal_close(j);
	ck_assert_int_eq(file_size(path), (off_t)at);
}
END_TEST

START_TEST(missing_segment_is_a_gap)
{
	uint64_t segs[512];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j = jopen(800, 0, NULL);
	size_t n;

	append_range(j, 1, 200);
	journal_close(j);
	n = list_segs(segs, 512);
	ck_assert_uint_gt(n, 5);
	seg_path(path, sizeof(path), segs[2]);
	ck_assert_int_eq(unlink(path), 0);
	j = jopen(800, 0, &rep);
	ck_assert_str_eq(rep.bad_reason, "sequence gap");
	ck_assert_uint_eq(rep.last_seq, segs[2] - 1);
	ck_assert_uint_eq(rep.bad_seq, segs[2]);
	ck_assert_uint_eq(rep.bad_offset, 0);
	ck_assert_uint_eq(rep.cut_segments, n - 3);
	ck_assert_uint_eq(journal_segments(j), 2);
	journal_close(j);
	ck_assert_uint_eq(list_segs(segs, 512), 2);
}
END_TEST

START_TEST(bad_segment_header)
{
	uint64_t segs[512];
	struct journal_options ro = { .segment_bytes = 800, .read_only = 1 };
	struct journal_report rep;
	struct journal *j = jopen(800, 0, NULL);
	char path[PATH_MAX];
	size_t n;

	append_range(j, 1, 200);
	journal_close(j);
	n = list_segs(segs, 512);
	ck_assert_uint_gt(n, 5);
	/* a header whose seq is not its file name's */
	seg_path(path, sizeof(path), segs[3]);
	xor_byte(path, 8, 0x01);
	j = NULL;
	ck_assert_int_eq(journal_open(&j, jdir, &ro, &rep), -EBADMSG);
	ck_assert_ptr_null(j);
	ck_assert_str_eq(rep.bad_reason, "bad segment header");
	ck_assert_uint_eq(list_segs(segs, 512), n);
	xor_byte(path, 8, 0x01);
	/* a bad magic */
	xor_byte(path, 0, 0x20);
	ck_assert_int_eq(journal_open(&j, jdir, &ro, &rep), -EBADMSG);
	ck_assert_uint_eq(list_segs(segs, 512), n);
	j = jopen(800, 0, &rep);
	ck_assert_str_eq(rep.bad_reason, "bad segment header");
	ck_assert_uint_eq(rep.last_seq, segs[3] - 1);
	ck_assert_uint_eq(rep.bad_seq, segs[3]);
	ck_assert_uint_eq(rep.cut_segments, n - 3);
	append_range(j, segs[3], 210);
	journal_close(j);
	j = jopen(800, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	verify_range(j, 1, 210);
	journal_close(j);
	/* a wrong header on the FIRST segment is refused, not cut: a stray
	 * file must not wipe the whole journal */
	struct journal_options rw = { .segment_bytes = 800 };
	n = list_segs(segs, 512);
	seg_path(path, sizeof(path), segs[0]);
	xor_byte(path, 0, 0x20);
	j = NULL;
	ck_assert_int_eq(journal_open(&j, jdir, &rw, &rep), -EBADMSG);
	ck_assert_ptr_null(j);
	ck_assert_str_eq(rep.bad_reason, "bad segment header");
	ck_assert_uint_eq(list_segs(segs, 512), n);
	xor_byte(path, 0, 0x20);
	j = jopen(800, 0, &rep);
	verify_range(j, 1, 210);
	journal_close(j);
}
END_TEST

START_TEST(empty_segments)
{
	uint8_t hdr[SEG_HDR];
	uint64_t segs[512];
	struct journal_report rep;
	char path[PATH_MAX];
	struct journal *j;
	size_t n;

	/* the only segment, header only: an empty journal that wants its seq */
	ck_assert_int_eq(mkdir(jdir, 0755), 0);
	seg_path(path, sizeof(path), 500);
	write_file(path, hdr, seg_header(hdr, 500));
	j = jopen(0, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.records, 0);
	ck_assert_uint_eq(journal_first_seq(j), 0);
	ck_assert_uint_eq(journal_last_seq(j), 0);
	ck_assert_uint_eq(journal_next_seq(j), 500);
	ck_assert_uint_eq(journal_term_at(j, 500), 0);
	verify_iter(j, 0, 500, 499);
	/* an empty journal takes any seq: the segment is renamed with it */
	append_range(j, 7, 9);
	journal_close(j);
	ck_assert_int_eq(file_size(path), -1);
	ck_assert_uint_eq(list_segs(segs, 512), 1);
	ck_assert_uint_eq(segs[0], 7);

	/* an empty last segment (a crash right after a roll) is kept */
	testutil_rm_rf(jdir);
	j = jopen(600, 0, NULL);
	append_range(j, 1, 100);
	journal_close(j);
	n = list_segs(segs, 512);
	seg_path(path, sizeof(path), 101);
	write_file(path, hdr, seg_header(hdr, 101));
	j = jopen(600, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.last_seq, 100);
	ck_assert_uint_eq(journal_segments(j), n + 1);
	append_range(j, 101, 105);
	journal_close(j);
	j = jopen(600, 0, &rep);
	ck_assert_uint_eq(journal_segments(j), n + 1);
	verify_range(j, 1, 105);
	journal_close(j);

	/* an empty segment that does not follow on is a gap */
	seg_path(path, sizeof(path), 200);
	write_file(path, hdr, seg_header(hdr, 200));
	j = jopen(600, 0, &rep);
	ck_assert_str_eq(rep.bad_reason, "sequence gap");
	ck_assert_uint_eq(rep.cut_segments, 1);
	ck_assert_uint_eq(rep.cut_bytes, SEG_HDR);
	ck_assert_uint_eq(rep.last_seq, 105);
	journal_close(j);
	ck_assert_int_eq(file_size(path), -1);

	/* files that are not segments are left alone */
	snprintf(path, sizeof(path), "%s/notes.txt", jdir);
	write_file(path, "hello", 5);
	snprintf(path, sizeof(path), "%s/0000000000000000010x.seg", jdir);
	write_file(path, "hello", 5);
	snprintf(path, sizeof(path), "%s/99999999999999999999.seg", jdir);
	write_file(path, "hello", 5);
	snprintf(path, sizeof(path), "%s/123.seg", jdir);
	write_file(path, "hello", 5);
	j = jopen(600, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.last_seq, 105);
	journal_close(j);
	ck_assert_int_eq(file_size(path), 5);
}
END_TEST

/* ---- truncate_after ------------------------------------------------------ */

static void truncate_case(uint64_t keep_last, int flush_first)
{
	uint64_t segs[512];
	struct journal_report rep;
	struct journal *j = jopen(1000, 0, NULL);
	uint8_t buf[256];
	size_t n;

	append_range(j, 1, LAST);
	if (flush_first)
		journal_flush(j);
	ck_assert_int_eq(journal_truncate_after(j, keep_last), 0);
	ck_assert_uint_eq(journal_last_seq(j), keep_last);
	ck_assert_uint_eq(journal_next_seq(j), keep_last + 1);
	ck_assert_int_eq(journal_read(j, keep_last + 1, buf, sizeof(buf), NULL), -ENOENT);
	verify_range(j, 1, keep_last);
	verify_iter(j, 1, 1, keep_last);
	n = list_segs(segs, 512);
	ck_assert_uint_eq(n, journal_segments(j));
	ck_assert_uint_le(segs[n - 1], keep_last);
	{
		char path[PATH_MAX];

		seg_path(path, sizeof(path), segs[n - 1]);
		ck_assert_int_eq(file_size(path), (off_t)rec_offset(segs[n - 1], keep_last + 1));
	}
	append_range(j, keep_last + 1, LAST + 20);
	verify_range(j, 1, LAST + 20);
	journal_close(j);
	j = jopen(1000, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.last_seq, LAST + 20);
	verify_range(j, 1, LAST + 20);
	verify_iter(j, 1, 1, LAST + 20);
	journal_close(j);
}

START_TEST(truncate_middle_of_last_segment)
{
	struct journal *j = jopen(1000, 0, NULL);
	uint64_t last_seg;

	append_range(j, 1, LAST);
	journal_close(j);
	last_seg = seg_of(LAST);
	testutil_rm_rf(jdir);
	truncate_case(last_seg + (LAST - last_seg) / 2, 1);
}
END_TEST

START_TEST(truncate_across_segments)
{
	truncate_case(R, 1);
	testutil_rm_rf(jdir);
	truncate_case(37, 0);
}
END_TEST

START_TEST(truncate_at_segment_boundary)
{
	struct journal *j = jopen(1000, 0, NULL);
	uint64_t s;

	append_range(j, 1, LAST);
	journal_close(j);
	s = seg_of(R);
	testutil_rm_rf(jdir);
	truncate_case(s - 1, 1); /* segment s goes whole */
	testutil_rm_rf(jdir);
	truncate_case(s, 1); /* segment s keeps one record */
}
END_TEST

START_TEST(truncate_buffered_records)
{
	struct journal *j = jopen(0, 0, NULL);

	append_range(j, 1, 50);
	ck_assert_int_eq(journal_truncate_after(j, 30), 0);
	verify_range(j, 1, 30);
	append_range(j, 31, 60);
	journal_close(j);
	j = jopen(0, 0, NULL);
	ck_assert_uint_eq(journal_last_seq(j), 60);
	verify_range(j, 1, 60);
	journal_close(j);
}
END_TEST

START_TEST(truncate_everything_and_limits)
{
	struct journal_report rep;
	struct journal *j = jopen(1000, 0, NULL);
	uint8_t buf[256];

	ck_assert_int_eq(journal_truncate_after(j, 5), 0); /* empty: nothing to do */
	ck_assert_int_eq(journal_append(j, 1000, term_of(1000), buf, make_data(1000, buf)), 0);
	append_range(j, 1001, 1200);
	ck_assert_int_eq(journal_truncate_after(j, 1200), 0);
	ck_assert_int_eq(journal_truncate_after(j, 5000), 0);
	ck_assert_uint_eq(journal_last_seq(j), 1200);
	ck_assert_int_eq(journal_truncate_after(j, 998), -EINVAL);
	ck_assert_uint_eq(journal_last_seq(j), 1200);
	ck_assert_int_eq(journal_truncate_after(j, 999), 0);
	ck_assert_uint_eq(journal_first_seq(j), 0);
	ck_assert_uint_eq(journal_last_seq(j), 0);
	ck_assert_uint_eq(journal_next_seq(j), 1000);
	ck_assert_uint_eq(journal_segments(j), 1);
	ck_assert_int_eq(journal_read(j, 1000, buf, sizeof(buf), NULL), -ENOENT);
	journal_close(j);
	j = jopen(1000, 0, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.records, 0);
	ck_assert_uint_eq(journal_next_seq(j), 1000);
	ck_assert_int_eq(journal_append(j, 1000, term_of(1000), buf, make_data(1000, buf)), 0);
	append_range(j, 1001, 1100);
	journal_close(j);
	j = jopen(1000, 0, &rep);
	ck_assert_uint_eq(rep.first_seq, 1000);
	ck_assert_uint_eq(rep.last_seq, 1100);
	verify_range(j, 1000, 1100);
	journal_close(j);
}
END_TEST

/* ---- a million records ---------------------------------------------------- */

#define BIG_N 1000000u

START_TEST(million_records)
{
	uint8_t buf[64], got[64];
	struct journal_report rep;
	struct journal *j = jopen(0, 0, NULL);
	double t0, t_append, t_open, t_read;
	uint64_t x = 0x9E3779B97F4A7C15ull;

	t0 = now_s();
	for (uint64_t s = 1; s <= BIG_N; s++) {
		memset(buf, (int)(s & 0xff), sizeof(buf));
		memcpy(buf, &s, sizeof(s));
		/* no ck_assert per record: each passing one costs Check a write */
		if (journal_append(j, s, 1 + s / 100000, buf, 36 + s % 9) < 0 ||
		    (s % 64 == 0 && journal_flush(j) < 0))
			ck_abort_msg("append %llu failed", (unsigned long long)s);
	}
	journal_close(j);
	t_append = now_s() - t0;

	t0 = now_s();
	j = jopen(0, 0, &rep);
	t_open = now_s() - t0;
	ck_assert_uint_eq(rep.records, BIG_N);
	ck_assert_ptr_null(rep.bad_reason);

	t0 = now_s();
	for (unsigned i = 0; i < BIG_N; i++) {
		uint64_t s, term, v;
		int len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		s = 1 + x % BIG_N;
		len = journal_read(j, s, got, sizeof(got), &term);
		if (len != (int)(36 + s % 9) || term != 1 + s / 100000)
			ck_abort_msg("seq %llu: len %d term %llu", (unsigned long long)s, len,
				     (unsigned long long)term);
		memcpy(&v, got, sizeof(v));
		if (v != s)
			ck_abort_msg("seq %llu: wrong record", (unsigned long long)s);
	}
	t_read = now_s() - t0;
	printf("journal: %u records of 36-44 bytes, %llu bytes in %u segment(s)\n", BIG_N,
	       (unsigned long long)journal_bytes(j), journal_segments(j));
	printf("journal: append+flush/64 %.0f ns/record; open (scan) %.1f ms; "
	       "journal_read random %.0f ns/lookup\n",
	       t_append * 1e9 / BIG_N, t_open * 1e3, t_read * 1e9 / BIG_N);
	fflush(stdout);
	journal_close(j);
}
END_TEST

/* ---- roll and retention ------------------------------------------------ */

/* journal_roll: the next record starts a segment of its own (a trading
 * day's first record), whatever segment_bytes says; a roll on an empty
 * last segment makes none; the records read back across a reopen. */
/* A reader follows a live journal: journal_refresh takes in what the
 * writer appended since (records, then segments it rolled to), never a
 * record that is not whole yet, and an iterator opened before goes on over
 * it; with and without the index. Not for a writer's journal. */
START_TEST(refresh_follows_a_writer)
{
	struct journal_options ro = { .read_only = 1, .no_index = _i };
	struct journal *w = jopen(1 << 20, 0, NULL), *r;
	struct journal_iter *it;
	uint64_t seq, term, next = 1;
	const uint8_t *data;
	size_t len;
	char path[1100];
	int fd;

	ck_assert_int_eq(journal_refresh(w), -EINVAL);
	ck_assert_int_eq(journal_flush(w), 0);
	r = jopen_opt(&ro, NULL); /* empty still: the writer made no segment */
	ck_assert_uint_eq(journal_last_seq(r), 0);
	ck_assert_int_eq(journal_iter_open(&it, r, 1), 0);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0);
	append_range(w, 1, 100);
	ck_assert_int_eq(journal_flush(w), 0);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 0); /* not before */
	ck_assert_int_eq(journal_refresh(r), 100);
	ck_assert_int_eq(journal_refresh(r), 0);
	append_range(w, 101, 150);
	ck_assert_int_eq(journal_flush(w), 0);
	ck_assert_int_eq(journal_refresh(r), 50);
	journal_roll(w);
	append_range(w, 151, 170);
	journal_roll(w);
	append_range(w, 171, 200);
	ck_assert_int_eq(journal_flush(w), 0);
	/* half a record at the end of the last segment: its writer is at it */
	seg_path(path, sizeof(path), 171);
	fd = open(path, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "\x40\0\0\0\xc9\0\0", 7), 7);
	close(fd);
	ck_assert_int_eq(journal_refresh(r), 50);
	ck_assert_uint_eq(journal_last_seq(r), 200);
	ck_assert_uint_eq(journal_segments(r), 3);
	while (journal_iter_next(it, &seq, &term, &data, &len) == 1) {
		uint8_t want[256];

		ck_assert_uint_eq(seq, next);
		ck_assert_uint_eq(len, make_data(seq, want));
		ck_assert_mem_eq(data, want, len);
		ck_assert_uint_eq(term, term_of(seq));
		next++;
	}
	ck_assert_uint_eq(next, 201);
	journal_iter_close(it);
	if (!_i)
		verify_range(r, 1, 200);
	/* the file cut below what was read: not the journal it followed */
	ck_assert_int_eq(truncate(path, 100), 0);
	ck_assert_int_eq(journal_refresh(r), -ESTALE);
	journal_close(r);
	journal_close(w);
}
END_TEST

/* ---- zeros ahead (journal_options.ahead) -------------------------------- */

static void write_at(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* Reads every record of j from `from` with it, checking each. */
static uint64_t iter_check(struct journal_iter *it, uint64_t next)
{
	uint64_t seq, term;
	const uint8_t *data;
	uint8_t want[256];
	size_t len;
	int r;

	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		ck_assert_uint_eq(seq, next);
		ck_assert_uint_eq(len, make_data(seq, want));
		ck_assert_mem_eq(data, want, len);
		next++;
	}
	ck_assert_int_eq(r, 0);
	return next;
}

START_TEST(ahead_zeros_follow_the_records)
{
	struct journal_options o = { .segment_bytes = 1 << 20, .fsync = JOURNAL_FSYNC_BATCH,
				     .ahead = 100000 };
	struct journal_options ro = { .read_only = 1 };
	struct journal_iter *wit, *rit;
	struct journal_report rep;
	struct journal *w, *r;
	uint8_t rec[256 + REC_OVERHEAD], data[256];
	char path[PATH_MAX], first[PATH_MAX];
	uint64_t wnext = 1, rnext = 1, segs[8];
	size_t len;
	pid_t pid;
	int st;

	w = jopen_opt(&o, NULL);
	ck_assert_int_eq(journal_iter_open(&wit, w, 1), 0);
	append_range(w, 1, 100);
	ck_assert_int_eq(journal_flush(w), 0);
	seg_path(path, sizeof(path), 1);
	/* 100,000 rounded up to 4 KiB of zeros after the records */
	ck_assert_int_eq(file_size(path), (off_t)(rec_offset(1, 101) + 102400));
	r = jopen_opt(&ro, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.zero_bytes, 102400);
	ck_assert_uint_eq(journal_last_seq(r), 100);
	ck_assert_int_eq(journal_iter_open(&rit, r, 1), 0);
	wnext = iter_check(wit, wnext);
	rnext = iter_check(rit, rnext);
	ck_assert_uint_eq(wnext, 101);
	ck_assert_uint_eq(rnext, 101);
	/* records still in the write buffer where the iterator read zeros */
	append_range(w, 101, 120);
	wnext = iter_check(wit, wnext);
	ck_assert_uint_eq(wnext, 121);
	verify_range(w, 1, 120);
	ck_assert_int_eq(journal_flush(w), 0);
	ck_assert_int_eq(journal_refresh(r), 20);
	rnext = iter_check(rit, rnext);
	ck_assert_uint_eq(rnext, 121);
	verify_range(r, 95, 120);
	/* a record being copied in over the zeros: its CRC still zero */
	len = encode(rec, 121, term_of(121), data, make_data(121, data));
	memset(rec + len - 4, 0, 4);
	write_at(path, rec_offset(1, 121), rec, len);
	ck_assert_int_eq(journal_refresh(r), 0);
	append_range(w, 121, 121);
	ck_assert_int_eq(journal_flush(w), 0);
	ck_assert_int_eq(journal_refresh(r), 1);
	rnext = iter_check(rit, rnext);
	ck_assert_uint_eq(rnext, 122);
	/* a whole record that is wrong is not one being written */
	len = encode(rec, 122, term_of(122), data, make_data(122, data));
	rec[len - 4] ^= 0x5a;
	write_at(path, rec_offset(1, 122), rec, len);
	ck_assert_int_eq(journal_refresh(r), 0); /* once: a page seen before the one before it */
	ck_assert_int_eq(journal_refresh(r), -EIO);
	journal_iter_close(rit);
	journal_close(r);
	/* a roll cuts the zeros off the segment before */
	journal_roll(w);
	append_range(w, 122, 130);
	ck_assert_int_eq(journal_flush(w), 0);
	ck_assert_int_eq(file_size(path), (off_t)rec_offset(1, 122));
	seg_path(path, sizeof(path), 122);
	ck_assert_int_eq(file_size(path), (off_t)(rec_offset(122, 131) + 102400));
	wnext = iter_check(wit, wnext);
	ck_assert_uint_eq(wnext, 131);
	journal_iter_close(wit);
	/* so does a clean close */
	journal_close(w);
	ck_assert_int_eq(file_size(path), (off_t)rec_offset(122, 131));
	/* a writer that dies leaves them: the next open takes them as the end */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct journal *c = NULL;

		if (journal_open(&c, jdir, &o, NULL) < 0)
			_exit(1);
		append_range(c, 131, 140);
		_exit(journal_flush(c) == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(st, 0);
	ck_assert_int_eq(file_size(path), (off_t)(rec_offset(122, 141) + 102400));
	w = jopen_opt(&o, &rep);
	ck_assert_ptr_null(rep.bad_reason);
	ck_assert_uint_eq(rep.cut_bytes, 0);
	ck_assert_uint_eq(rep.zero_bytes, 102400);
	ck_assert_uint_eq(journal_last_seq(w), 140);
	/* kept as the zeros ahead of the next records */
	ck_assert_int_eq(file_size(path), (off_t)(rec_offset(122, 141) + 102400));
	append_range(w, 141, 150);
	ck_assert_int_eq(journal_flush(w), 0);
	ck_assert_int_eq(file_size(path), (off_t)(rec_offset(122, 141) + 102400));
	verify_range(w, 1, 150);
	journal_close(w);
	ck_assert_int_eq(file_size(path), (off_t)rec_offset(122, 151));
	ck_assert_uint_eq(list_segs(segs, 8), 2);
	seg_path(first, sizeof(first), 1);
	ck_assert_int_eq(file_size(first), (off_t)rec_offset(1, 122));
}
END_TEST

/* The size of what sector k (512 bytes) and record seq of the segment
 * starting at `first` have in common; *from: where in the record it starts. */
static uint64_t overlap(uint64_t first, uint64_t k, uint64_t seq, uint64_t *from)
{
	uint64_t a = rec_offset(first, seq), b = rec_offset(first, seq + 1), lo = k * 512, hi = lo + 512;

	lo = lo > a ? lo : a;
	hi = hi < b ? hi : b;
	*from = lo - a;
	return hi > lo ? hi - lo : 0;
}

/* A power cut during the sync of an overwrite keeps any of its sectors: one
 * lost, the records of the last sync after it kept. Every sector of the
 * unsynced records in turn reads as zeros again (its bytes before them as
 * synced): the open cuts a torn tail there, good records after it too, also
 * where the sector held only a record's first byte or last CRC bytes
 * (journal.h); a byte flipped in the same place is still damage. */
START_TEST(ahead_torn_overwrite_is_a_tail)
{
	struct journal_options o = { .segment_bytes = 1 << 20, .fsync = JOURNAL_FSYNC_BATCH,
				     .ahead = 64 << 10 };
	static uint8_t image[256 << 10], zeros[512];
	struct journal_report rep;
	struct journal *j;
	char path[PATH_MAX];
	uint64_t S = 1 + 37 * (uint64_t)_i; /* other lengths, other boundaries */
	uint64_t start, end, k, torn = 0;
	size_t size;
	int fd;

	j = jopen_opt(&o, NULL);
	append_range(j, S, S + 199);
	ck_assert_int_eq(journal_flush(j), 0); /* synced */
	append_range(j, S + 200, S + 259);
	ck_assert_int_eq(journal_flush(j), 0); /* the sync the cut interrupts */
	seg_path(path, sizeof(path), S);
	size = read_whole(path, image, sizeof(image));
	ck_assert_uint_eq(size, rec_offset(S, S + 200) + (64 << 10)); /* not grown: 3/4 left */
	journal_close(j);
	start = rec_offset(S, S + 200);
	end = rec_offset(S, S + 260);
	for (k = start / 512; k * 512 < end; k++) {
		uint64_t lo = k * 512 > start ? k * 512 : start, hi = (k + 1) * 512, seq, from, n;

		fd = open(path, O_WRONLY | O_TRUNC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, image, size), (ssize_t)size);
		ck_assert_int_eq(pwrite(fd, zeros, hi - lo, (off_t)lo), (ssize_t)(hi - lo));
		close(fd);
		for (seq = S + 200; rec_offset(S, seq + 1) <= lo; seq++)
			;
		n = overlap(S, k, seq, &from);
		ck_assert_uint_gt(n, 0);
		memset(&rep, 0, sizeof(rep));
		ck_assert_msg(journal_open(&j, jdir, &o, &rep) == 0,
			      "sector %llu lost (seq %llu has %llu bytes from its byte %llu in it): %s",
			      (unsigned long long)k, (unsigned long long)seq, (unsigned long long)n,
			      (unsigned long long)from, rep.bad_reason ? rep.bad_reason : "?");
		ck_assert_int_eq(rep.damaged, 0);
		/* (zeros from there to the end: the end, nothing cut) */
		ck_assert_uint_eq(rep.bad_reason ? rep.bad_seq : seq, seq);
		ck_assert(rep.bad_reason || rep.zero_bytes > 0);
		ck_assert_uint_eq(journal_last_seq(j), seq - 1);
		verify_range(j, S, seq - 1);
		journal_close(j);
		torn++;
	}
	ck_assert_uint_gt(torn, 10);
	/* garbage, not zeros, where synced records were: damage, refused */
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, image, size), (ssize_t)size);
	close(fd);
	xor_byte(path, rec_offset(S, S + 149) + 21, 0x10);
	ck_assert_int_eq(journal_open(&j, jdir, &o, &rep), -EUCLEAN);
	ck_assert_uint_eq(rep.bad_seq, S + 149);
	xor_byte(path, rec_offset(S, S + 149) + 21, 0x10);
	/* a length flipped, out of range or into the next records or the zeros
	 * ahead: damage, not a torn tail (its extent covers the next record) */
	for (uint64_t s = S + 239; s <= S + 257; s += 18) {
		static const uint8_t flip[][2] = { { 2, 0x10 }, { 1, 0x10 }, { 1, 0x01 },
						   { 0, 0x80 }, { 0, 0x08 }, { 0, 0x01 } };

		for (size_t f = 0; f < sizeof(flip) / sizeof(*flip); f++) {
			xor_byte(path, rec_offset(S, s) + flip[f][0], flip[f][1]);
			ck_assert_msg(journal_open(&j, jdir, &o, &rep) == -EUCLEAN,
				      "seq %llu, byte %u ^ %#x: %s", (unsigned long long)s,
				      flip[f][0], flip[f][1], rep.bad_reason ? rep.bad_reason : "opened");
			ck_assert_uint_eq(rep.bad_seq, s);
			xor_byte(path, rec_offset(S, s) + flip[f][0], flip[f][1]);
		}
	}
	/* zeros inside a segment before the last: damage too */
	j = jopen_opt(&o, &rep);
	ck_assert_uint_eq(journal_last_seq(j), S + 259);
	journal_roll(j);
	append_range(j, S + 260, S + 269);
	journal_close(j);
	write_at(path, rec_offset(S, S + 229), zeros, 64);
	ck_assert_int_eq(journal_open(&j, jdir, &o, &rep), -EUCLEAN);
	ck_assert_uint_eq(rep.bad_seq, S + 229);
}
END_TEST

/* A writer that cuts its tail and writes other records in its place, zeros
 * ahead again after them: the file is as long as before, and a follower
 * that had read the cut records gets -ESTALE, not the new history after
 * the old. */
START_TEST(ahead_follower_sees_a_cut)
{
	struct journal_options o = { .segment_bytes = 1 << 20, .fsync = JOURNAL_FSYNC_BATCH,
				     .ahead = 64 << 10 };
	struct journal_options ro = { .read_only = 1 };
	struct journal *w = jopen_opt(&o, NULL), *r;
	uint8_t data[256];
	char path[PATH_MAX];

	append_range(w, 1, 50);
	ck_assert_int_eq(journal_flush(w), 0);
	r = jopen_opt(&ro, NULL);
	ck_assert_uint_eq(journal_last_seq(r), 50);
	ck_assert_int_eq(journal_refresh(r), 0);
	ck_assert_int_eq(journal_truncate_after(w, 40), 0);
	for (uint64_t s = 41; s <= 60; s++)
		ck_assert_int_eq(journal_append(w, s, 99, data, make_data(s, data)), 0);
	ck_assert_int_eq(journal_flush(w), 0);
	seg_path(path, sizeof(path), 1);
	ck_assert_int_gt(file_size(path), (off_t)rec_offset(1, 61));
	ck_assert_int_eq(journal_refresh(r), -ESTALE);
	journal_close(r);
	r = jopen_opt(&ro, NULL);
	ck_assert_uint_eq(journal_last_seq(r), 60);
	ck_assert_uint_eq(journal_term_at(r, 50), 99);
	journal_close(r);
	journal_close(w);
}
END_TEST

/* The lost sector held the synced records' end and only the first m < 8
 * bytes of the next sync's first record (its length's low bytes, m > 4:
 * part of its seq): still a torn tail, with records after it. */
START_TEST(ahead_torn_record_head)
{
	struct journal_options o = { .segment_bytes = 1 << 20, .fsync = JOURNAL_FSYNC_BATCH,
				     .ahead = 256 << 10 };
	static uint8_t zeros[8];
	uint64_t S = 1 + 37 * (uint64_t)_i, q = 0, at = 0;
	unsigned m = 0, tried = 0;
	struct journal_report rep;
	struct journal *j;
	char path[PATH_MAX];

	seg_path(path, sizeof(path), S);
	for (m = 1; m < 8; m++) {
		for (q = S; q < S + 1000 && 512 - rec_offset(S, q) % 512 != m; q++)
			;
		if (q == S + 1000)
			continue;
		testutil_rm_rf(jdir);
		j = jopen_opt(&o, NULL);
		append_range(j, S, q - 1);
		ck_assert_int_eq(journal_flush(j), 0);
		append_range(j, q, q + 40);
		ck_assert_int_eq(journal_flush(j), 0);
		journal_close(j);
		at = rec_offset(S, q);
		write_at(path, at, zeros, m);
		memset(&rep, 0, sizeof(rep));
		ck_assert_msg(journal_open(&j, jdir, &o, &rep) == 0, "m %u: %s", m,
			      rep.bad_reason ? rep.bad_reason : "?");
		ck_assert_int_eq(rep.damaged, 0);
		ck_assert_uint_eq(rep.bad_seq, q);
		ck_assert_uint_eq(journal_last_seq(j), q - 1);
		journal_close(j);
		tried++;
		/* the same, and a bit of its seq flipped: damage */
		testutil_rm_rf(jdir);
		j = jopen_opt(&o, NULL);
		append_range(j, S, q - 1);
		ck_assert_int_eq(journal_flush(j), 0);
		append_range(j, q, q + 40);
		journal_close(j);
		write_at(path, at, zeros, m);
		xor_byte(path, at + 11, 0x01);
		ck_assert_int_eq(journal_open(&j, jdir, &o, &rep), -EUCLEAN);
	}
	ck_assert_uint_ge(tried, 3);
}
END_TEST

START_TEST(roll_starts_a_segment)
{
	struct journal *j = jopen(1 << 20, 0, NULL);
	uint64_t segs[8];

	append_range(j, 1, 10);
	journal_roll(j);
	append_range(j, 11, 20);
	ck_assert_int_eq(journal_flush(j), 0);
	ck_assert_uint_eq(list_segs(segs, 8), 2);
	ck_assert_uint_eq(segs[0], 1);
	ck_assert_uint_eq(segs[1], 11);
	journal_roll(j);
	journal_roll(j); /* twice: still one new segment */
	append_range(j, 21, 21);
	ck_assert_int_eq(journal_flush(j), 0);
	ck_assert_uint_eq(list_segs(segs, 8), 3);
	ck_assert_uint_eq(segs[2], 21);
	journal_close(j);
	j = jopen(1 << 20, 0, NULL);
	ck_assert_uint_eq(journal_segments(j), 3);
	verify_range(j, 1, 21);
	journal_close(j);
}
END_TEST

/* Three "days" in segments of their own (rolled), days 1 and 2 spanning
 * several segments by size: drop_before(base of day 3) removes days 1 and
 * 2 and nothing of day 3; reads below are -ENOENT, reads at or above are
 * unchanged, an iterator opened before is stale, a new one starts at the
 * new first seq, appends go on, and a reopen agrees. */
START_TEST(drop_before_whole_segments)
{
	struct journal *j = jopen(2048, 0, NULL);
	struct journal_iter *it;
	uint64_t segs[64], seq, term;
	const uint8_t *data;
	uint8_t buf[256];
	size_t n, len;

	append_range(j, 1, 100);
	journal_roll(j);
	append_range(j, 101, 250);
	journal_roll(j);
	append_range(j, 251, 300);
	ck_assert_int_eq(journal_flush(j), 0);
	n = list_segs(segs, 64);
	ck_assert_uint_gt(n, 4);
	verify_range(j, 1, 300); /* fills the read cache of early segments */
	ck_assert_int_eq(journal_iter_open(&it, j, 1), 0);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), 1);
	/* below any segment boundary past the first: nothing goes */
	ck_assert_int_eq(journal_drop_before(j, 1, NULL), 0);
	ck_assert_uint_eq(journal_first_seq(j), 1);
	ck_assert_int_eq(journal_drop_before(j, 251, NULL), 0);
	ck_assert_uint_eq(journal_first_seq(j), 251);
	ck_assert_uint_eq(journal_last_seq(j), 300);
	ck_assert_int_eq(journal_iter_next(it, &seq, &term, &data, &len), -ESTALE);
	journal_iter_close(it);
	ck_assert_int_eq(journal_read(j, 250, buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_int_eq(journal_read(j, 1, buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_uint_eq(journal_term_at(j, 250), 0);
	verify_range(j, 251, 300);
	verify_iter(j, 1, 251, 300);
	ck_assert_uint_eq(list_segs(segs, 64), journal_segments(j));
	ck_assert_uint_eq(segs[0], 251);
	append_range(j, 301, 320);
	ck_assert_int_eq(journal_flush(j), 0);
	journal_close(j);
	j = jopen(2048, 0, NULL);
	ck_assert_uint_eq(journal_first_seq(j), 251);
	verify_range(j, 251, 320);
	verify_iter(j, 0, 251, 320);
	journal_close(j);
}
END_TEST

/* A seq inside a segment keeps that segment (never a record at or above
 * seq goes); the last segment stays even when seq is past the end; a
 * read-only journal refuses. */
START_TEST(drop_before_keeps_partial_and_last)
{
	struct journal *j = jopen(1024, 0, NULL);
	uint64_t segs[64], first;
	size_t n;

	append_range(j, 1, 200);
	ck_assert_int_eq(journal_flush(j), 0);
	n = list_segs(segs, 64);
	ck_assert_uint_gt(n, 3);
	ck_assert_int_eq(journal_drop_before(j, segs[2] + 1, NULL), 0);
	ck_assert_uint_eq(journal_first_seq(j), segs[2]);
	ck_assert_int_eq(journal_drop_before(j, 1000, NULL), 0);
	first = segs[n - 1];
	ck_assert_uint_eq(journal_first_seq(j), first);
	ck_assert_uint_eq(journal_segments(j), 1);
	verify_range(j, first, 200);
	journal_close(j);
	j = jopen(1024, 1, NULL);
	ck_assert_int_eq(journal_drop_before(j, 1000, NULL), -EROFS);
	journal_close(j);
}
END_TEST

/* move_to: the segments are renamed into the directory (made), byte for
 * byte, instead of removed; a name already there is -EEXIST and leaves
 * the journal as it was. */
START_TEST(drop_before_moves_segments)
{
	struct journal_options o = { .segment_bytes = 1 << 20, .fsync = JOURNAL_FSYNC_BATCH };
	struct journal *j = jopen_opt(&o, NULL);
	char aside[1100], path[1200], orig[1200];
	static uint8_t before[1 << 16], after[1 << 16];
	size_t n1, n2;

	snprintf(aside, sizeof(aside), "%s/aside", test_dir);
	append_range(j, 1, 50);
	journal_roll(j);
	append_range(j, 51, 90);
	journal_roll(j);
	append_range(j, 91, 95);
	ck_assert_int_eq(journal_flush(j), 0);
	seg_path(orig, sizeof(orig), 1);
	n1 = read_whole(orig, before, sizeof(before));
	ck_assert_int_eq(journal_drop_before(j, 51, aside), 0);
	ck_assert_uint_eq(journal_first_seq(j), 51);
	snprintf(path, sizeof(path), "%s/%020llu.seg", aside, 1ull);
	n2 = read_whole(path, after, sizeof(after));
	ck_assert_uint_eq(n1, n2);
	ck_assert_mem_eq(before, after, n1);
	ck_assert_int_eq(file_size(orig), -1);
	/* a segment 51 already aside: refused, nothing moved */
	snprintf(path, sizeof(path), "%s/%020llu.seg", aside, 51ull);
	write_file(path, "x", 1);
	ck_assert_int_eq(journal_drop_before(j, 91, aside), -EEXIST);
	ck_assert_uint_eq(journal_first_seq(j), 51);
	verify_range(j, 51, 95);
	journal_close(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("journal");
	TCase *crc = tcase_create("crc32c");
	TCase *io = tcase_create("journal");
	TCase *big = tcase_create("million");
	int failed;

	if (testutil_mkdtemp(run_dir, sizeof(run_dir), testutil_tmp_parent(), "test_journal") < 0) {
		perror(run_dir);
		return EXIT_FAILURE;
	}
	tcase_add_test(crc, crc32c_known_vectors);
	tcase_add_test(crc, crc32c_public_matches_bitwise);
	tcase_add_test(crc, crc32c_software_and_hardware_paths);
	suite_add_tcase(s, crc);

	tcase_add_checked_fixture(io, setup, teardown);
	tcase_set_timeout(io, 60);
	tcase_add_test(io, roundtrip_across_reopen);
	tcase_add_test(io, file_format_matches_header);
	tcase_add_test(io, roundtrip_across_segment_rolls);
	tcase_add_loop_test(io, refresh_follows_a_writer, 0, 2);
	tcase_add_test(io, read_records_still_buffered);
	tcase_add_test(io, read_errors);
	tcase_add_test(io, append_wrong_seq_fails);
	tcase_add_test(io, journal_starting_at_1000);
	tcase_add_test(io, term_at);
	tcase_add_test(io, fsync_policies);
	tcase_add_test(io, interval_sync_in_background);
	tcase_add_test(io, disk_durable_after_background_sync);
	tcase_add_test(io, disk_failed_sync_reported_and_retried);
	tcase_add_test(io, large_records_across_scan_chunks);
	tcase_add_test(io, corruption_after_open_is_eio);
	tcase_add_test(io, iter_from_first_middle_last);
	tcase_add_test(io, iter_on_empty_and_stale);
	tcase_add_test(io, no_index_iterates_the_same);
	tcase_add_test(io, torn_tail_every_offset);
	tcase_add_test(io, torn_tail_of_last_segment);
	tcase_add_loop_test(io, flipped_byte_is_cut, 0, (int)(sizeof(flips) / sizeof(flips[0])));
	tcase_add_loop_test(io, damage_is_refused_not_cut, 0, (int)(sizeof(flips) / sizeof(flips[0])));
	tcase_add_loop_test(io, read_only_reports_without_cutting, 0,
			    (int)(sizeof(flips) / sizeof(flips[0])));
	tcase_add_loop_test(io, malformed_tails, 0, (int)(sizeof(bad_tails) / sizeof(bad_tails[0])));
	tcase_add_test(io, read_only_missing_dir);
	tcase_add_test(io, sequence_gap_inside_segment);
	tcase_add_test(io, missing_segment_is_a_gap);
	tcase_add_test(io, bad_segment_header);
	tcase_add_test(io, empty_segments);
	tcase_add_test(io, truncate_middle_of_last_segment);
	tcase_add_test(io, truncate_across_segments);
	tcase_add_test(io, truncate_at_segment_boundary);
	tcase_add_test(io, truncate_buffered_records);
	tcase_add_test(io, truncate_everything_and_limits);
	tcase_add_test(io, roll_starts_a_segment);
	tcase_add_test(io, ahead_zeros_follow_the_records);
	tcase_add_loop_test(io, ahead_torn_overwrite_is_a_tail, 0, 8);
	tcase_add_test(io, ahead_follower_sees_a_cut);
	tcase_add_loop_test(io, ahead_torn_record_head, 0, 8);
	tcase_add_test(io, drop_before_whole_segments);
	tcase_add_test(io, drop_before_keeps_partial_and_last);
	tcase_add_test(io, drop_before_moves_segments);
	suite_add_tcase(s, io);

	tcase_add_checked_fixture(big, setup, teardown);
	tcase_set_timeout(big, 600);
	tcase_add_test(big, million_records);
	suite_add_tcase(s, big);

	failed = testutil_run(s, 0);
	testutil_rm_rf(run_dir);
	return failed;
}
