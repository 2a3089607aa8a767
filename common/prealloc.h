/* Memory for the hot paths: allocated once, at start, and faulted in at
 * once. calloc() of a large block maps zero pages that the kernel only
 * backs on the first write, so the first messages of the day (or the first
 * deep book) would pay a page fault per 4 KiB; prealloc_zeroed() writes one
 * byte of every page now. (A memset after malloc would not do: the compiler
 * may turn the pair into calloc.) */
#ifndef LOCKSTEP_PREALLOC_H
#define LOCKSTEP_PREALLOC_H

#include <stdint.h>
#include <stdlib.h>

#define PREALLOC_PAGE 4096

/* n zeroed elements of size bytes, every page touched; NULL on overflow or
 * when out of memory. Free with free(). */
static inline void *prealloc_zeroed(size_t n, size_t size)
{
	size_t total;
	volatile char *p;

	if (n != 0 && size > SIZE_MAX / n)
		return NULL;
	total = n * size != 0 ? n * size : 1;
	p = calloc(1, total);
	if (!p)
		return NULL;
	for (size_t off = 0; off < total; off += PREALLOC_PAGE)
		p[off] = 0;
	return (void *)p;
}

#endif
