/* Contracts between lockstep's roles that are not a public format: the
 * execution stream's message block, stream names and limits. */
#ifndef LOCKSTEP_WIRE_H
#define LOCKSTEP_WIRE_H

#include <stdint.h>
#include <string.h>

/* A MoldUDP64 datagram that lockstep sends stays under this size, so that it
 * fits one Ethernet frame with room for IP and UDP headers. Loopback and
 * GSO could carry more; a config key may raise it. */
#define WIRE_MAX_DATAGRAM 1472u

/* The execution stream (matcher -> gateways), one MoldUDP64 stream per
 * partition, session "EXEC<partition>" (e.g. "EXEC0"); every replica of a
 * partition sends the same blocks under the same sequence numbers. A block:
 *   u64 BE  tape sequence number of the event that produced it
 *   char[6] the SoupBinTCP login it is for, space padded
 *   ...     one OUCH 4.2 outbound message (type byte first)
 */
#define WIRE_EXEC_HDR_LEN 14u
#define WIRE_USER_LEN 6u

static inline void wire_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline uint16_t wire_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void wire_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t wire_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void wire_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline uint64_t wire_get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Writes the exec block header; user is NUL-terminated, at most 6 chars. */
static inline void wire_exec_header(uint8_t out[WIRE_EXEC_HDR_LEN], uint64_t tape_seq,
				    const char *user)
{
	size_t n = strnlen(user, WIRE_USER_LEN);

	wire_put_u64(out, tape_seq);
	memset(out + 8, ' ', WIRE_USER_LEN);
	memcpy(out + 8, user, n);
}

/* Reads the user (trimmed, NUL-terminated) of an exec block header. */
static inline void wire_exec_user(const uint8_t hdr[WIRE_EXEC_HDR_LEN], char user[WIRE_USER_LEN + 1])
{
	size_t n = WIRE_USER_LEN;

	memcpy(user, hdr + 8, WIRE_USER_LEN);
	while (n > 0 && user[n - 1] == ' ')
		n--;
	user[n] = '\0';
}

#endif
