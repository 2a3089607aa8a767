/* CRC32C (Castagnoli), the checksum of journal records and snapshots.
 * Uses the SSE4.2 instruction when the CPU has it, a table otherwise. */
#ifndef LOCKSTEP_CRC32C_H
#define LOCKSTEP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c(0, data, len) is the CRC of data; pass a previous result to extend. */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
