/* MoldUDP64 (NASDAQ, version 1.00): downstream packets, heartbeats, end of
 * session and request packets.
 *
 * Downstream packet: session (10 bytes, alphanumeric, right-padded with
 * spaces), sequence number of the first block (u64 BE), message count (u16
 * BE), then `count` message blocks of (length u16 BE, data).  Count 0 is a
 * heartbeat, count 0xFFFF the end of session; both carry the next expected
 * sequence number and no blocks.
 *
 * Request packet (receiver -> retransmission server): session (10), first
 * sequence number wanted (u64 BE), count wanted (u16 BE): exactly 20 bytes.
 *
 * Parsing validates the whole packet up front and then iterates zero-copy
 * over the caller's buffer: an iterator's pointers are valid while the buffer
 * is. Nothing here allocates or logs. */
#ifndef LOCKSTEP_MOLDUDP64_H
#define LOCKSTEP_MOLDUDP64_H

#include <stddef.h>
#include <stdint.h>

#define MOLD_SESSION_LEN 10
#define MOLD_HEADER_LEN 20 /* session + sequence + count */
#define MOLD_REQUEST_LEN 20
#define MOLD_COUNT_EOS 0xFFFFu
#define MOLD_MAX_PACKET 65507u /* largest UDP payload over IPv4 */
#define MOLD_MAX_COUNT 0xFFFEu /* largest count that means "blocks follow" */

enum mold_err {
	MOLD_OK = 0,
	MOLD_E_TRUNC_HEADER = -1, /* shorter than the 20-byte header */
	MOLD_E_BLOCK_HEADER = -2, /* a block's 2-byte length is cut off */
	MOLD_E_BLOCK_PAST_END = -3, /* a block's length runs past the end */
	MOLD_E_COUNT_MISMATCH = -4, /* bytes left over after `count` blocks */
	MOLD_E_SESSION = -5, /* not the stream the caller expects */
	MOLD_E_OVERSIZE = -6, /* longer than the caller's maximum */
	MOLD_E_REQUEST_LEN = -7, /* a request packet that is not 20 bytes */
	MOLD_E_CONTROL_DATA = -8, /* a heartbeat/end of session carrying bytes */
	MOLD_E_SEQ_WRAP = -9, /* seq + count overflows 64 bits */
	MOLD_E_NOSPACE = -10, /* builder: the block does not fit */
	MOLD_E_BAD_SESSION_NAME = -11, /* session name longer than 10 or not printable */
};

const char *mold_strerror(int err);

/* A session name as it stands on the wire (10 bytes, space padded). */
struct mold_session {
	char name[MOLD_SESSION_LEN];
};

/* Pads `name` with spaces; MOLD_E_BAD_SESSION_NAME when it is longer than 10
 * characters or holds a byte outside printable ASCII. */
int mold_session_set(struct mold_session *s, const char *name);
/* Writes the name without trailing spaces, NUL-terminated; out must hold 11. */
void mold_session_str(const struct mold_session *s, char out[MOLD_SESSION_LEN + 1]);

enum mold_kind {
	MOLD_DATA, /* count >= 1 */
	MOLD_HEARTBEAT, /* count == 0 */
	MOLD_END_OF_SESSION, /* count == 0xFFFF */
};

/* A parsed downstream packet; points into the parsed buffer. */
struct mold_packet {
	struct mold_session session;
	uint64_t seq; /* sequence number of the first block (next expected for control) */
	uint16_t count; /* blocks in the packet: 0 for heartbeat and end of session */
	enum mold_kind kind;
	const uint8_t *blocks; /* first block header */
	size_t blocks_len;
};

/* Validates buf[0..len). `expect` may be NULL (any session); `max_len` 0
 * means MOLD_MAX_PACKET. On error *out is untouched. */
int mold_parse(const uint8_t *buf, size_t len, const struct mold_session *expect,
	       size_t max_len, struct mold_packet *out);

struct mold_iter {
	const uint8_t *p, *end;
	uint64_t seq; /* sequence number of the next block */
	uint16_t left;
};

void mold_iter_init(struct mold_iter *it, const struct mold_packet *pkt);
/* Returns 1 and the next block (its sequence number, data, length), or 0 at
 * the end. Only valid on a packet mold_parse() accepted. */
int mold_iter_next(struct mold_iter *it, uint64_t *seq, const uint8_t **data, uint16_t *len);

/* Builds a downstream packet in a caller-owned buffer. */
struct mold_builder {
	uint8_t *buf;
	size_t cap, len;
	uint16_t count;
};

/* Starts a packet whose first block will carry `seq`. cap < MOLD_HEADER_LEN
 * gives MOLD_E_NOSPACE. */
int mold_build_begin(struct mold_builder *b, uint8_t *buf, size_t cap,
		     const struct mold_session *s, uint64_t seq);
/* Appends one block; MOLD_E_NOSPACE (builder unchanged) when it does not fit
 * or the packet already holds MOLD_MAX_COUNT blocks. */
int mold_build_add(struct mold_builder *b, const void *data, uint16_t len);
/* Reserves room for a block of up to `max` bytes and returns where to write
 * it (NULL when it does not fit); mold_build_commit() then fixes its length. */
uint8_t *mold_build_reserve(struct mold_builder *b, uint16_t max);
void mold_build_commit(struct mold_builder *b, uint16_t len);
/* Writes the count into the header; returns the packet length. */
size_t mold_build_end(struct mold_builder *b);

/* Heartbeat (count 0) and end of session (count 0xFFFF): 20 bytes each.
 * `next_seq` is the sequence number of the next message the stream will send. */
size_t mold_build_heartbeat(uint8_t out[MOLD_HEADER_LEN], const struct mold_session *s,
			    uint64_t next_seq);
size_t mold_build_end_of_session(uint8_t out[MOLD_HEADER_LEN], const struct mold_session *s,
				 uint64_t next_seq);

struct mold_request {
	struct mold_session session;
	uint64_t seq;
	uint16_t count;
};

size_t mold_build_request(uint8_t out[MOLD_REQUEST_LEN], const struct mold_request *r);
/* MOLD_E_REQUEST_LEN unless len == 20; MOLD_E_SESSION when `expect` is
 * given and differs; MOLD_E_SEQ_WRAP when seq + count overflows. */
int mold_parse_request(const uint8_t *buf, size_t len, const struct mold_session *expect,
		       struct mold_request *out);

#endif
