/* Log-linear histogram: bucket layout, precision, percentiles, merge, print. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "testutil.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* A value of 1..2^60 whose bit length is itself uniform. */
static uint64_t rng_value(void)
{
	unsigned bits = 1 + (unsigned)(rng() % 60);
	uint64_t v = rng() & ((1ull << bits) - 1);

	return v ? v : 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A histogram is large (440 KiB): keep it off the stack. */
static struct hist *hist_new(void)
{
	struct hist *h = malloc(sizeof(*h));

	ck_assert_ptr_nonnull(h);
	hist_init(h);
	return h;
}

START_TEST(exact_below_1024)
{
	struct hist *h = hist_new();

	for (uint64_t v = 0; v < 2 * HIST_SUB; v++) {
		unsigned b = hist_bucket(v);

		ck_assert_uint_eq(hist_bucket_low(b), v);
		ck_assert_uint_eq(hist_bucket_high(b), v);
	}
	for (uint64_t v = 0; v < 1024; v++)
		hist_record(h, v);
	for (uint64_t k = 1; k <= 1024; k++) /* the k-th smallest is k - 1 */
		ck_assert_uint_eq(hist_percentile(h, 100.0 * (double)k / 1024.0), k - 1);
	free(h);
}
END_TEST

/* Buckets tile 0..2^64-1 in order, each at most 1/1024 of its low end wide. */
START_TEST(bucket_layout)
{
	ck_assert_uint_eq(hist_bucket(0), 0);
	ck_assert_uint_eq(hist_bucket(UINT64_MAX), HIST_BUCKETS - 1);
	ck_assert_uint_eq(hist_bucket_high(HIST_BUCKETS - 1), UINT64_MAX);
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		uint64_t lo = hist_bucket_low(b), hi = hist_bucket_high(b);

		ck_assert_uint_le(lo, hi);
		ck_assert_uint_eq(hist_bucket(lo), b);
		ck_assert_uint_eq(hist_bucket(hi), b);
		if (b + 1 < HIST_BUCKETS)
			ck_assert_uint_eq(hist_bucket_low(b + 1), hi + 1);
		if (lo >= HIST_SUB) /* width <= lo / 1024 */
			ck_assert_uint_le(hi - lo + 1, lo >> HIST_SUB_BITS);
	}
}
END_TEST

START_TEST(relative_error_random)
{
	enum { N = 20000 };
	uint64_t *v = malloc(N * sizeof(*v));
	struct hist *h = hist_new();

	ck_assert_ptr_nonnull(v);
	for (unsigned i = 0; i < N; i++) {
		unsigned b;

		v[i] = rng_value();
		b = hist_bucket(v[i]);
		ck_assert_uint_le(hist_bucket_low(b), v[i]);
		ck_assert_uint_ge(hist_bucket_high(b), v[i]);
		/* (high - v) / v <= 1/1024 */
		ck_assert_uint_le(hist_bucket_high(b) - v[i], v[i] >> HIST_SUB_BITS);
		hist_record(h, v[i]);
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	for (unsigned k = 1; k <= N; k += 7) {
		double p = 100.0 * (double)k / N;
		uint64_t got = hist_percentile(h, p), want = v[k - 1];

		ck_assert_uint_ge(got, want);
		ck_assert_msg(got - want <= want / 1024, "p%.4f: %llu vs %llu", p,
			      (unsigned long long)got, (unsigned long long)want);
	}
	ck_assert_uint_eq(h->min, v[0]);
	ck_assert_uint_eq(h->max, v[N - 1]);
	ck_assert_uint_eq(hist_percentile(h, 100.0), v[N - 1]);
	ck_assert_uint_eq(hist_percentile(h, 0.0), v[0]);
	free(h);
	free(v);
}
END_TEST

static void assert_near(uint64_t got, double want)
{
	double err = ((double)got - want) / want;

	ck_assert_msg(err >= -0.001 && err <= 0.001, "%llu is not within 0.1%% of %.1f",
		      (unsigned long long)got, want);
}

START_TEST(uniform_percentiles)
{
	struct hist *h = hist_new();

	for (uint64_t v = 1; v <= 100000; v++)
		hist_record(h, v);
	ck_assert_uint_eq(h->count, 100000);
	ck_assert_uint_eq(h->min, 1);
	ck_assert_uint_eq(h->max, 100000);
	ck_assert_uint_eq(h->sum, 5000050000ull);
	ck_assert_double_eq_tol(hist_mean(h), 50000.5, 1e-9);
	assert_near(hist_percentile(h, 50.0), 50000);
	assert_near(hist_percentile(h, 90.0), 90000);
	assert_near(hist_percentile(h, 99.0), 99000);
	assert_near(hist_percentile(h, 99.9), 99900);
	assert_near(hist_percentile(h, 99.99), 99990);
	ck_assert_uint_ge(hist_percentile(h, 50.0), 50000);
	ck_assert_uint_ge(hist_percentile(h, 99.9), 99900);
	ck_assert_uint_eq(hist_percentile(h, 0.0), 1);
	ck_assert_uint_eq(hist_percentile(h, 100.0), 100000);
	ck_assert_uint_eq(hist_percentile(h, 150.0), 100000);
	ck_assert_uint_eq(hist_percentile(h, -3.0), 1);
	ck_assert_uint_eq(hist_percentile(h, 0.001), 1);
	free(h);
}
END_TEST

/* The p-th percentile is the ceil(p/100 * n)-th smallest value. */
START_TEST(nearest_rank)
{
	static const struct {
		double p;
		uint64_t want;
	} t[] = {
		{ 1.0, 10 }, { 25.0, 10 }, { 25.01, 20 }, { 26.0, 20 }, { 50.0, 20 },
		{ 50.5, 30 }, { 75.0, 30 }, { 76.0, 40 }, { 99.0, 40 }, { 100.0, 40 },
	};
	struct hist *h = hist_new();

	for (uint64_t v = 10; v <= 40; v += 10)
		hist_record(h, v);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(hist_percentile(h, t[i].p) == t[i].want, "p%g gave %llu, want %llu",
			      t[i].p, (unsigned long long)hist_percentile(h, t[i].p),
			      (unsigned long long)t[i].want);
	free(h);
}
END_TEST

/* Percentiles stay within [min, max] even in a wide bucket. */
START_TEST(capped_at_min_max)
{
	struct hist *h = hist_new();
	uint64_t v = 1000000007ull; /* bucket width 2^19 */

	hist_record(h, v);
	ck_assert_uint_gt(hist_bucket_high(hist_bucket(v)), v);
	ck_assert_uint_eq(hist_percentile(h, 50.0), v);
	ck_assert_uint_eq(hist_percentile(h, 99.99), v);
	hist_record(h, v + 3);
	ck_assert_uint_eq(hist_percentile(h, 50.0), v + 3); /* one bucket: its high, capped */
	ck_assert_uint_eq(h->min, v);
	ck_assert_uint_eq(h->max, v + 3);
	hist_record(h, UINT64_MAX);
	ck_assert_uint_eq(hist_percentile(h, 100.0), UINT64_MAX);
	ck_assert_uint_eq(hist_percentile(h, 99.0), UINT64_MAX);
	free(h);
}
END_TEST

START_TEST(merge_equals_both)
{
	struct hist *a = hist_new(), *b = hist_new(), *both = hist_new(), *empty = hist_new();

	for (unsigned i = 0; i < 5000; i++) {
		uint64_t v = rng_value();

		hist_record(i % 3 ? a : b, v);
		hist_record(both, v);
	}
	hist_merge(a, b);
	ck_assert_int_eq(memcmp(a, both, sizeof(*a)), 0);
	hist_merge(a, empty); /* no-op */
	ck_assert_int_eq(memcmp(a, both, sizeof(*a)), 0);
	hist_merge(empty, both); /* into empty: a copy */
	ck_assert_int_eq(memcmp(empty, both, sizeof(*a)), 0);
	free(empty);
	free(both);
	free(b);
	free(a);
}
END_TEST

START_TEST(record_n)
{
	struct hist *a = hist_new(), *b = hist_new();

	for (unsigned i = 0; i < 1000; i++)
		hist_record(a, 123456);
	hist_record(a, 7);
	hist_record_n(b, 123456, 1000);
	hist_record_n(b, 999, 0); /* nothing */
	hist_record_n(b, 7, 1);
	ck_assert_int_eq(memcmp(a, b, sizeof(*a)), 0);
	ck_assert_uint_eq(b->count, 1001);
	ck_assert_uint_eq(b->min, 7);
	free(b);
	free(a);
}
END_TEST

START_TEST(empty)
{
	struct hist *h = hist_new();

	ck_assert_uint_eq(h->count, 0);
	ck_assert_uint_eq(hist_percentile(h, 50.0), 0);
	ck_assert_uint_eq(hist_percentile(h, 100.0), 0);
	ck_assert_double_eq(hist_mean(h), 0.0);
	hist_record(h, 0);
	ck_assert_uint_eq(h->count, 1);
	ck_assert_uint_eq(hist_percentile(h, 50.0), 0);
	free(h);
}
END_TEST

/* hist_print's line, into a memory stream. */
static char *print_to_string(const struct hist *h, const char *label, double unit)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	hist_print(h, f, label, unit);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

START_TEST(print_format)
{
	struct hist *h = hist_new();
	char *s;

	s = print_to_string(h, "empty", 1000.0);
	ck_assert_str_eq(s, "empty: n=0 min=0.000 p50=0.000 p90=0.000 p99=0.000 p99.9=0.000 "
			    "p99.99=0.000 max=0.000\n");
	free(s);

	for (uint64_t v = 1; v <= 1000; v++)
		hist_record(h, v * 1000); /* 1..1000 us in ns */
	s = print_to_string(h, "rtt", 1000.0);
	/* p50 = 500000 ns sits in a bucket of width 2^9: its high is 500223. */
	ck_assert_uint_eq(hist_percentile(h, 50.0), 500223);
	ck_assert_str_eq(s, "rtt: n=1000 min=1.000 p50=500.223 p90=900.095 p99=990.207 "
			    "p99.9=999.423 p99.99=1000.000 max=1000.000\n");
	free(s);

	s = print_to_string(h, NULL, 1.0);
	ck_assert_str_eq(s, "n=1000 min=1000 p50=500223 p90=900095 p99=990207 "
			    "p99.9=999423 p99.99=1000000 max=1000000\n");
	free(s);
	free(h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hist");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, exact_below_1024);
	tcase_add_test(tc, bucket_layout);
	tcase_add_test(tc, relative_error_random);
	tcase_add_test(tc, uniform_percentiles);
	tcase_add_test(tc, nearest_rank);
	tcase_add_test(tc, capped_at_min_max);
	tcase_add_test(tc, merge_equals_both);
	tcase_add_test(tc, record_n);
	tcase_add_test(tc, empty);
	tcase_add_test(tc, print_format);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
