/* The bump allocator (arena.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "arena.h"

static void *arena_pb_alloc(void *data, size_t size)
{
	return arena_alloc(data, size);
}

static void arena_pb_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr;
}

int arena_init(struct arena *a, size_t cap)
{
	unsigned char *base = aligned_alloc(16, (cap + 15) & ~(size_t)15);

	if (!base)
		return -ENOMEM;
	a->base = base;
	a->cap = cap;
	a->used = 0;
	a->high_water = 0;
	a->allocator.alloc = arena_pb_alloc;
	a->allocator.free = arena_pb_free;
	a->allocator.allocator_data = a;
	return 0;
}

void arena_fini(struct arena *a)
{
	if (!a)
		return;
	free(a->base);
	a->base = NULL;
	a->cap = a->used = 0;
}

void *arena_alloc(struct arena *a, size_t size)
{
	size_t need = (size + 15) & ~(size_t)15;
	void *p;

	if (need < size || need > a->cap - a->used)
		return NULL;
	p = a->base + a->used;
	a->used += need;
	if (a->used > a->high_water)
		a->high_water = a->used;
	return p;
}
