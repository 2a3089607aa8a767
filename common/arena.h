/* A bump allocator for protobuf-c unpacking on hot paths: allocation is a
 * pointer increment, free is a no-op, and arena_reset() releases everything
 * at once (once per received batch). Memory comes from one block allocated at
 * init; an allocation that does not fit fails (protobuf-c then returns NULL,
 * which the caller counts as a malformed message). */
#ifndef LOCKSTEP_ARENA_H
#define LOCKSTEP_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

struct arena {
	unsigned char *base;
	size_t cap, used, high_water;
	ProtobufCAllocator allocator; /* pass &arena.allocator to *__unpack */
};

int arena_init(struct arena *a, size_t cap);
void arena_fini(struct arena *a);
void *arena_alloc(struct arena *a, size_t size); /* 16-byte aligned; NULL when full */
static inline void arena_reset(struct arena *a)
{
	a->used = 0;
}

#endif
