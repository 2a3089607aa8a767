/* Small macros every part of lockstep uses: container_of (from an embedded
 * libev watcher back to the object that holds it) and ARRAY_SIZE. */
#ifndef LOCKSTEP_MACROS_H
#define LOCKSTEP_MACROS_H

#include <stddef.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
