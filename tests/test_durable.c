/* Durable files (common/durable.h): a file replaced whole through its
 * temporary, written a slice at a time (contents across slice and buffer
 * boundaries, nothing left behind), and removed a slice at a time (the
 * file gone, never a link's target touched). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "testutil.h"

static char dir[1024];

static void setup(void)
{
	ck_assert_int_eq(testutil_mkdtemp(dir, sizeof(dir), testutil_tmp_parent(), "test_durable"),
			 0);
}

static void teardown(void)
{
	testutil_rm_rf(dir);
}

/* n bytes that depend on their offset and a seed */
static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 11));
}

/* The whole file at path, in a buffer of at most cap bytes; its size. */
static ssize_t slurp(const char *path, uint8_t *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n, total = 0;

	ck_assert_int_ge(fd, 0);
	while ((n = read(fd, buf + total, cap - (size_t)total)) > 0)
		total += n;
	close(fd);
	return total;
}

static void make_file(const char *path, size_t n)
{
	uint8_t *b = malloc(n);
	struct iovec iov = { b, n };

	fill(b, n, 7);
	ck_assert_int_eq(durable_write(path, &iov, 1, 0644), 0);
	free(b);
}

/* 2.5 slices and 7 bytes in three buffers that end off the slice
 * boundaries, over an older file: the new contents exactly, no .tmp. */
START_TEST(write_sliced)
{
	size_t a = DURABLE_SLICE / 3, b = 2 * DURABLE_SLICE, c = DURABLE_SLICE / 6 + 7;
	uint8_t *src = malloc(a + b + c), *got = malloc(a + b + c + 1);
	struct iovec iov[3] = { { src, a }, { src + a, b }, { src + a + b, c } };
	char path[1100], tmp[1200];
	struct stat st;

	fill(src, a + b + c, 3);
	snprintf(path, sizeof(path), "%s/snap", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	make_file(path, 100);
	ck_assert_int_eq(durable_write(path, iov, 3, 0640), 0);
	ck_assert_int_eq(slurp(path, got, a + b + c + 1), (ssize_t)(a + b + c));
	ck_assert(memcmp(got, src, a + b + c) == 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);
	ck_assert_int_eq(stat(tmp, &st), -1);
	free(src);
	free(got);
}
END_TEST

/* A file of several slices, one of less than a slice, an empty one: gone.
 * A missing file: -ENOENT. A symbolic link: the link gone, its target
 * whole. A second (hard) link to a file: that name gone, the file whole
 * under its other (a backup made with cp -al keeps its copy). */
START_TEST(remove_gently)
{
	size_t sizes[] = { 3 * DURABLE_SLICE + 5, DURABLE_SLICE - 1, 0 };
	char path[1100], target[1100];
	struct stat st;

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(path, sizeof(path), "%s/f%u", dir, i);
		make_file(path, sizes[i]);
		ck_assert_int_eq(durable_remove(path), 0);
		ck_assert_int_eq(stat(path, &st), -1);
		ck_assert_int_eq(errno, ENOENT);
	}
	ck_assert_int_eq(durable_remove(path), -ENOENT);
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(path, sizeof(path), "%s/link", dir);
	make_file(target, 2 * DURABLE_SLICE + 1);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_int_eq(durable_remove(path), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
	ck_assert_int_eq(stat(target, &st), 0);
	ck_assert_int_eq(st.st_size, 2 * DURABLE_SLICE + 1);
	snprintf(path, sizeof(path), "%s/hard", dir);
	ck_assert_int_eq(link(target, path), 0);
	ck_assert_int_eq(durable_remove(path), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
	ck_assert_int_eq(stat(target, &st), 0);
	ck_assert_int_eq(st.st_size, 2 * DURABLE_SLICE + 1);
	ck_assert_int_eq(st.st_nlink, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("durable");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, write_sliced);
	tcase_add_test(tc, remove_gently);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
