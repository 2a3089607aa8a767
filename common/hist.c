/* Log-linear histogram: values below 2^11 have a bucket each; above, every
 * power of two [2^k, 2^(k+1)) is cut into HIST_SUB buckets of width
 * 2^(k-10), so a bucket is at most 1/1024 of its lower bound wide.
 * Bucket b = g * HIST_SUB + s with group g = k - 9 (g = 0 and 1 are exact). */
#include <inttypes.h>
#include <string.h>

#include "hist.h"

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

unsigned hist_bucket(uint64_t v)
{
	unsigned k, g;

	if (v < 2 * HIST_SUB)
		return (unsigned)v;
	k = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS + 1 */
	g = k - HIST_SUB_BITS + 1;
	return g * HIST_SUB + (unsigned)((v >> (k - HIST_SUB_BITS)) - HIST_SUB);
}

uint64_t hist_bucket_low(unsigned b)
{
	unsigned g = b >> HIST_SUB_BITS, s = b & (HIST_SUB - 1);

	if (b >= HIST_BUCKETS)
		return UINT64_MAX;
	if (g == 0)
		return b;
	return ((uint64_t)HIST_SUB + s) << (g - 1);
}

uint64_t hist_bucket_high(unsigned b)
{
	unsigned g = b >> HIST_SUB_BITS;

	if (b >= HIST_BUCKETS)
		return UINT64_MAX;
	if (g == 0)
		return b;
	return hist_bucket_low(b) + ((1ull << (g - 1)) - 1);
}

void hist_record_n(struct hist *h, uint64_t v, uint64_t n)
{
	if (n == 0)
		return;
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count += n;
	h->sum += v * n; /* wraps after 2^64 ns (584 years) in total */
	h->buckets[hist_bucket(v)] += n;
}

void hist_record(struct hist *h, uint64_t v)
{
	hist_record_n(h, v, 1);
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	if (src->count == 0)
		return;
	if (dst->count == 0 || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum += src->sum;
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		dst->buckets[b] += src->buckets[b];
}

/* Nearest rank: the ceil(p/100 * count)-th smallest value, 1-based. */
static uint64_t rank_of(const struct hist *h, double p)
{
	double x = p / 100.0 * (double)h->count;
	uint64_t r = (uint64_t)x;

	if (x - (double)r > 1e-6)
		r++;
	if (r < 1)
		r = 1;
	if (r > h->count)
		r = h->count;
	return r;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
	uint64_t rank, seen = 0;

	if (h->count == 0)
		return 0;
	if (!(p > 0.0)) /* also NaN */
		return h->min;
	if (p >= 100.0)
		return h->max;
	rank = rank_of(h, p);
	for (unsigned b = hist_bucket(h->min); b <= hist_bucket(h->max); b++) {
		seen += h->buckets[b];
		if (seen >= rank) {
			uint64_t v = hist_bucket_high(b);

			if (v > h->max)
				v = h->max;
			return v < h->min ? h->min : v;
		}
	}
	return h->max;
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

void hist_print(const struct hist *h, FILE *out, const char *label, double unit)
{
	static const struct {
		const char *name;
		double p;
	} cols[] = {
		{ "p50", 50.0 }, { "p90", 90.0 }, { "p99", 99.0 }, { "p99.9", 99.9 }, { "p99.99", 99.99 },
	};
	int prec = unit > 1.0 ? 3 : 0;

	if (!(unit > 0.0))
		unit = 1.0;
	if (label && *label)
		fprintf(out, "%s: ", label);
	fprintf(out, "n=%" PRIu64 " min=%.*f", h->count, prec, (double)h->min / unit);
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		fprintf(out, " %s=%.*f", cols[i].name, prec, (double)hist_percentile(h, cols[i].p) / unit);
	fprintf(out, " max=%.*f\n", prec, (double)h->max / unit);
}
