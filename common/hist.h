/* A log-linear histogram of unsigned 64-bit values (latencies in ns) with 3
 * significant decimal digits: every recorded value is counted in a bucket
 * whose width is at most 1/1024 of its lower bound (2^10 sub-buckets per power
 * of two), so a percentile is within 0.1% of the true value. Fixed memory,
 * no allocation when recording; merging adds bucket by bucket. */
#ifndef LOCKSTEP_HIST_H
#define LOCKSTEP_HIST_H

#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BITS 10
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
	uint64_t count, sum, min, max;
	uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t v);
void hist_record_n(struct hist *h, uint64_t v, uint64_t n);
void hist_merge(struct hist *dst, const struct hist *src);
/* The value at percentile p (0..100): the highest value of the bucket that
 * holds the p-th percentile, capped at max. 0 for an empty histogram. */
uint64_t hist_percentile(const struct hist *h, double p);
double hist_mean(const struct hist *h);
/* One line: "n=... min=... p50=... p90=... p99=... p99.9=... p99.99=... max=..."
 * with values divided by `unit` (1000 for ns -> us). */
void hist_print(const struct hist *h, FILE *out, const char *label, double unit);

/* Bucket index of a value and the lowest/highest value of a bucket. */
unsigned hist_bucket(uint64_t v);
uint64_t hist_bucket_low(unsigned b);
uint64_t hist_bucket_high(unsigned b);

#endif
