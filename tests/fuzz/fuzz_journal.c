/* Fuzzes journal_open's scan: the input becomes segment files, the journal is
 * opened read-only and then read-write, and everything it returns is checked
 * against the files themselves.
 *
 * Input: byte 0 picks the layout, the rest is file content.
 *   bit 0     1: prepend a valid header (first seq 1 + (byte0 >> 5)); 0: the
 *             content starts with its own header (or none)
 *   bits 1-2  segment_bytes for appends: 64 << bits
 * The content is split into one file per occurrence of the magic; each file
 * is named after the u64 that follows its magic (1 when it has none). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "journal.h"

#define MAGIC "LKSTJRN1"
#define MAX_FILES 64

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: broken: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                         \
		}                                                                        \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64]; /* per process, under /dev/shm when there is one */
static char jdir[96];

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void clear_dir(void)
{
	DIR *d = opendir(jdir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(jdir);
}

static void remove_base(void)
{
	clear_dir();
	rmdir(base);
}

static void init_dirs(void)
{
	if (base[0])
		return;
	snprintf(base, sizeof(base), "/dev/shm/fuzz_journal.XXXXXX");
	if (!mkdtemp(base)) {
		snprintf(base, sizeof(base), "/tmp/fuzz_journal.XXXXXX");
		CHECK(mkdtemp(base));
	}
	snprintf(jdir, sizeof(jdir), "%s/j", base);
	atexit(remove_base);
}

static void write_seg(uint64_t name, const uint8_t *p, size_t len)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/%020llu.seg", jdir, (unsigned long long)name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, p, len) == (ssize_t)len);
	close(fd);
}

/* The segment files as they are on disk, in name order. */
struct files {
	unsigned n;
	uint64_t name[MAX_FILES];
	uint8_t *bytes[MAX_FILES];
	size_t len[MAX_FILES];
	uint64_t total;
};

static void load_files(struct files *f)
{
	DIR *d = opendir(jdir);
	struct dirent *e;

	memset(f, 0, sizeof(*f));
	CHECK(d);
	while ((e = readdir(d))) {
		unsigned long long v;
		char path[160];
		struct stat st;
		unsigned i;
		int fd;

		if (strlen(e->d_name) != 24 || sscanf(e->d_name, "%20llu", &v) != 1)
			continue;
		CHECK(f->n < MAX_FILES);
		for (i = f->n; i > 0 && f->name[i - 1] > v; i--) {
			f->name[i] = f->name[i - 1];
			f->bytes[i] = f->bytes[i - 1];
			f->len[i] = f->len[i - 1];
		}
		snprintf(path, sizeof(path), "%s/%s", jdir, e->d_name);
		fd = open(path, O_RDONLY);
		CHECK(fd >= 0 && fstat(fd, &st) == 0);
		f->name[i] = v;
		f->len[i] = (size_t)st.st_size;
		f->bytes[i] = malloc(f->len[i] + 1);
		CHECK(f->bytes[i]);
		CHECK(read(fd, f->bytes[i], f->len[i]) == (ssize_t)f->len[i]);
		close(fd);
		f->total += f->len[i];
		f->n++;
	}
	closedir(d);
}

static void free_files(struct files *f)
{
	for (unsigned i = 0; i < f->n; i++)
		free(f->bytes[i]);
}

/* Iterates the whole journal; every record must lie in the files, in order
 * from the first file's header on, whole, with a good CRC, and agree with
 * journal_read and journal_term_at. Returns the number of records. */
static uint64_t walk(struct journal *j, const struct files *f)
{
	struct journal_iter *it;
	uint64_t seq, term, expect = journal_first_seq(j), count = 0, off = 16;
	const uint8_t *d;
	static uint8_t buf[JOURNAL_MAX_RECORD];
	unsigned k = 0;
	size_t len;
	int r;

	CHECK(journal_iter_open(&it, j, 0) == 0);
	while ((r = journal_iter_next(it, &seq, &term, &d, &len)) == 1) {
		const uint8_t *p;
		uint64_t t2;

		CHECK(seq == expect);
		CHECK(seq >= journal_first_seq(j) && seq <= journal_last_seq(j));
		while (k < f->n && off >= f->len[k]) {
			k++;
			off = 16;
		}
		CHECK(k < f->n);
		CHECK(off + 24 + len <= f->len[k]);
		p = f->bytes[k] + off;
		CHECK(le(p, 4) == len && le(p + 4, 8) == seq && le(p + 12, 8) == term);
		CHECK(memcmp(p + 20, d, len) == 0);
		CHECK(crc32c(0, p, 20 + len) == le(p + 20 + len, 4));
		CHECK(journal_read(j, seq, buf, sizeof(buf), &t2) == (int)len);
		CHECK(t2 == term && memcmp(buf, d, len) == 0);
		CHECK(journal_term_at(j, seq) == term);
		off += 24 + len;
		expect++;
		count++;
	}
	CHECK(r == 0);
	journal_iter_close(it);
	CHECK(count == (journal_last_seq(j) ? journal_last_seq(j) - journal_first_seq(j) + 1 : 0));
	return count;
}

static void check_report(const struct journal *j, const struct journal_report *rep,
			 const struct files *f)
{
	CHECK(rep->first_seq == journal_first_seq(j));
	CHECK(rep->last_seq == journal_last_seq(j));
	CHECK(rep->records == (rep->last_seq ? rep->last_seq - rep->first_seq + 1 : 0));
	CHECK((rep->first_seq == 0) == (rep->last_seq == 0));
	if (!rep->bad_reason)
		CHECK(rep->cut_bytes == 0 && rep->cut_segments == 0 && rep->bad_seq == 0);
	else
		CHECK(rep->bad_seq == journal_next_seq(j));
	/* every byte is either kept or counted as cut */
	CHECK(journal_bytes(j) + rep->cut_bytes + rep->zero_bytes == f->total);
	CHECK(journal_segments(j) + rep->cut_segments <= f->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t content[1 << 16];
	struct journal_options opt = { 0 };
	struct journal_report ro_rep, rep;
	struct journal *j;
	struct files f;
	uint64_t n_ro = 0, last_ro = 0, first_ro = 0;
	size_t len = 0, start;
	int r, ro_ok;

	if (size < 1 || size > sizeof(content) - 16)
		return 0;
	init_dirs();
	CHECK(mkdir(jdir, 0755) == 0);
	if (data[0] & 1) {
		memcpy(content, MAGIC, 8);
		memset(content + 8, 0, 8);
		content[8] = (uint8_t)(1 + (data[0] >> 5));
		len = 16;
	}
	memcpy(content + len, data + 1, size - 1);
	len += size - 1;
	/* one file per magic */
	start = 0;
	for (size_t i = 1; i <= len; i++) {
		if (i < len && (i + 8 > len || memcmp(content + i, MAGIC, 8) != 0))
			continue;
		write_seg(i - start >= 16 ? le(content + start + 8, 8) : 1, content + start, i - start);
		start = i;
	}

	/* read-only: reports, cuts nothing */
	load_files(&f);
	opt.read_only = 1;
	r = journal_open(&j, jdir, &opt, &ro_rep);
	CHECK(r == 0 || r == -EBADMSG);
	ro_ok = r == 0;
	if (ro_ok) {
		check_report(j, &ro_rep, &f);
		n_ro = walk(j, &f);
		first_ro = journal_first_seq(j);
		last_ro = journal_last_seq(j);
		CHECK(journal_append(j, journal_next_seq(j), 1, "x", 1) == -EROFS);
		journal_close(j);
	} else {
		CHECK(ro_rep.bad_reason && strcmp(ro_rep.bad_reason, "bad segment header") == 0);
	}
	{
		struct files again;

		load_files(&again);
		CHECK(again.n == f.n && again.total == f.total);
		free_files(&again);
	}

	/* read-write: the same records, the bad tail cut */
	opt.read_only = 0;
	opt.segment_bytes = 64u << ((data[0] >> 1) & 3);
	r = journal_open(&j, jdir, &opt, &rep);
	if (r == -EBADMSG) {
		/* a wrong header on the first segment is refused, never cut */
		CHECK(!ro_ok && rep.bad_reason && strcmp(rep.bad_reason, "bad segment header") == 0);
		CHECK(rep.bad_seq == 0 || rep.bad_seq == ro_rep.bad_seq);
		struct files same;

		load_files(&same);
		CHECK(same.n == f.n && same.total == f.total);
		free_files(&same);
		free_files(&f);
		clear_dir();
		return 0;
	}
	CHECK(r == 0);
	check_report(j, &rep, &f);
	if (ro_ok) {
		CHECK(rep.first_seq == first_ro && rep.last_seq == last_ro && rep.records == n_ro);
		CHECK(rep.cut_bytes == ro_rep.cut_bytes && rep.bad_seq == ro_rep.bad_seq);
	}
	free_files(&f);
	load_files(&f);
	CHECK(f.total == journal_bytes(j) + rep.zero_bytes && f.n == journal_segments(j));
	walk(j, &f);
	free_files(&f);

	/* what is left opens clean; appends and a truncation keep it so */
	journal_close(j);
	CHECK(journal_open(&j, jdir, &opt, &rep) == 0);
	CHECK(!rep.bad_reason && rep.cut_bytes == 0);
	if (journal_next_seq(j) < UINT64_MAX - 8) {
		uint64_t next = journal_next_seq(j), first;

		for (int i = 0; i < 4; i++)
			CHECK(journal_append(j, next + (uint64_t)i, 7, data, size < 100 ? size : 100) == 0);
		first = journal_first_seq(j);
		CHECK(journal_truncate_after(j, first + (next - first) / 2) == 0);
		CHECK(journal_last_seq(j) == first + (next - first) / 2);
		CHECK(journal_flush(j) == 0);
		load_files(&f);
		walk(j, &f);
		free_files(&f);
		journal_close(j);
		CHECK(journal_open(&j, jdir, &opt, &rep) == 0);
		CHECK(!rep.bad_reason && rep.last_seq == first + (next - first) / 2);
	}
	journal_close(j);
	clear_dir();
	return 0;
}
