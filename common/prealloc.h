/* Memory for the hot paths: allocated once, at start, and faulted in at
 * once. calloc() of a large block maps zero pages that the kernel only
 * backs on the first write, so the first messages of the day (or the first
 * deep book) would pay a page fault per 4 KiB; prealloc_zeroed() writes
 * every page now. A block of PREALLOC_HUGE or more is aligned to 2 MiB and
 * asked for transparent huge pages (madvise MADV_HUGEPAGE; the kernel's
 * "madvise" mode gives them only to who asks): one TLB entry covers 2 MiB
 * of a pool that lookups hit at random (the token table, the order pool),
 * and fork() (the matcher's snapshots) copies one page-table entry per
 * 2 MiB instead of 512. */
#ifndef LOCKSTEP_PREALLOC_H
#define LOCKSTEP_PREALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PREALLOC_PAGE 4096
#define PREALLOC_HUGE (2u << 20)

/* n zeroed elements of size bytes, every page touched; NULL on overflow or
 * when out of memory. Free with free(). */
static inline void *prealloc_zeroed(size_t n, size_t size)
{
	size_t total;
	volatile char *p;

	if (n != 0 && size > SIZE_MAX / n)
		return NULL;
	total = n * size != 0 ? n * size : 1;
	if (total >= PREALLOC_HUGE && total <= SIZE_MAX - PREALLOC_HUGE) {
		size_t round = (total + PREALLOC_HUGE - 1) & ~(size_t)(PREALLOC_HUGE - 1);
		void *h = aligned_alloc(PREALLOC_HUGE, round);

		if (!h)
			return NULL;
		(void)madvise(h, round, MADV_HUGEPAGE); /* a hint: 4 KiB pages if refused */
		memset(h, 0, round);
		return h;
	}
	/* (not malloc + memset: the compiler may turn the pair into calloc) */
	p = calloc(1, total);
	if (!p)
		return NULL;
	for (size_t off = 0; off < total; off += PREALLOC_PAGE)
		p[off] = 0;
	return (void *)p;
}

#endif
