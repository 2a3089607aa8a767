/* The tape's Command (common/lockstep.proto) decoded by hand, straight into
 * an engine command: what the matcher and lockstep-replay apply. No
 * allocation, no clock; the input is untrusted (fuzzed, and compared with
 * protobuf-c's unpack in tests/test_command.c). */
#ifndef LOCKSTEP_COMMAND_H
#define LOCKSTEP_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* Decodes a packed Command into *out (zeroed first) and its partition.
 * The rules are protobuf's (proto3) as protobuf-c applies them, for what a
 * gateway sends: unknown fields are skipped, a scalar given twice takes the
 * last value, a string is read up to its first NUL; and, beyond what a
 * gateway sends, a body given twice takes the last one whole (protobuf-c
 * would merge them). -1 (out undefined) when malformed, when a known field
 * has the wrong wire type, when a string does not fit its engine field, or
 * when there is no body. */
int command_decode(const uint8_t *buf, size_t len, struct engine_cmd *out, uint32_t *partition);

#endif
