/* The matcher's execution stream: the encoding of one exec block, shared by
 * the daemon (matcher/exec.c) and lockstep-replay rebuild (ops/replay.c),
 * so that an offline rebuild counts the very exec blocks that a live
 * matcher emits (a snapshot's exec_next is 1 + that count). */
#ifndef LOCKSTEP_MATCHER_EXEC_H
#define LOCKSTEP_MATCHER_EXEC_H

#include <stdint.h>

/* bytes per exec block in the matcher's ring: u16 length + 14 + OUCH_MAX_LEN */
#define MATCHER_EXEC_SLOT 128

/* Encodes one engine output as an exec block (wire.h's exec header and the
 * OUCH message) into block[MATCHER_EXEC_SLOT - 2]: its length, or a negative
 * OUCH error (the matcher then emits no block and its exec_next stays). */
struct ouch_msg;
int matcher_exec_encode(uint8_t *block, uint64_t tape_seq, const char *user,
			const struct ouch_msg *msg);

#endif
