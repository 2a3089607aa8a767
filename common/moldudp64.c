/* MoldUDP64 1.00: validation, zero-copy iteration and builders.
 *
 * mold_parse() checks, in this order: the caller's maximum length, the
 * 20-byte header, the session, control packets (exactly 20 bytes), sequence
 * wrap, then walks the blocks once. The first failing check is the error. */
#include <assert.h>
#include <endian.h>
#include <string.h>

#include "moldudp64.h"
#include "wire.h"

static inline uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

const char *mold_strerror(int err)
{
	switch (err) {
	case MOLD_OK:
		return "success";
	case MOLD_E_TRUNC_HEADER:
		return "packet shorter than the 20-byte header";
	case MOLD_E_BLOCK_HEADER:
		return "message block length cut off";
	case MOLD_E_BLOCK_PAST_END:
		return "message block runs past the end of the packet";
	case MOLD_E_COUNT_MISMATCH:
		return "bytes left over after the counted message blocks";
	case MOLD_E_SESSION:
		return "packet of another session";
	case MOLD_E_OVERSIZE:
		return "packet longer than the maximum";
	case MOLD_E_REQUEST_LEN:
		return "request packet is not 20 bytes";
	case MOLD_E_CONTROL_DATA:
		return "heartbeat or end of session carries data";
	case MOLD_E_SEQ_WRAP:
		return "sequence number plus count overflows 64 bits";
	case MOLD_E_NOSPACE:
		return "message block does not fit in the packet";
	case MOLD_E_BAD_SESSION_NAME:
		return "session name longer than 10 or not printable ASCII";
	}
	return "unknown MoldUDP64 error";
}

int mold_session_set(struct mold_session *s, const char *name)
{
	size_t n = 0;

	for (; name[n]; n++)
		if (n == MOLD_SESSION_LEN || (uint8_t)name[n] < 0x20 || (uint8_t)name[n] > 0x7e)
			return MOLD_E_BAD_SESSION_NAME;
	memcpy(s->name, name, n);
	memset(s->name + n, ' ', MOLD_SESSION_LEN - n);
	return MOLD_OK;
}

void mold_session_str(const struct mold_session *s, char out[MOLD_SESSION_LEN + 1])
{
	size_t n = MOLD_SESSION_LEN;

	while (n > 0 && s->name[n - 1] == ' ')
		n--;
	memcpy(out, s->name, n);
	out[n] = '\0';
}

/* seq + count > UINT64_MAX: the next expected sequence number would wrap. */
static inline int seq_wraps(uint64_t seq, uint16_t count)
{
	return seq > UINT64_MAX - count;
}

int mold_parse(const uint8_t *buf, size_t len, const struct mold_session *expect,
	       size_t max_len, struct mold_packet *out)
{
	const uint8_t *p, *end;
	uint16_t count;
	uint64_t seq;

	if (len > (max_len ? max_len : MOLD_MAX_PACKET))
		return MOLD_E_OVERSIZE;
	if (len < MOLD_HEADER_LEN)
		return MOLD_E_TRUNC_HEADER;
	if (expect && memcmp(buf, expect->name, MOLD_SESSION_LEN) != 0)
		return MOLD_E_SESSION;
	seq = get64(buf + MOLD_SESSION_LEN);
	count = wire_get_u16(buf + MOLD_SESSION_LEN + 8);
	p = buf + MOLD_HEADER_LEN;
	end = buf + len;
	if (count == 0 || count == MOLD_COUNT_EOS) {
		if (p != end)
			return MOLD_E_CONTROL_DATA;
	} else {
		if (seq_wraps(seq, count))
			return MOLD_E_SEQ_WRAP;
		for (unsigned i = count; i > 0; i--) {
			size_t blen;

			if (end - p < 2)
				return MOLD_E_BLOCK_HEADER;
			blen = wire_get_u16(p);
			p += 2;
			if ((size_t)(end - p) < blen)
				return MOLD_E_BLOCK_PAST_END;
			p += blen;
		}
		if (p != end)
			return MOLD_E_COUNT_MISMATCH;
	}
	memcpy(out->session.name, buf, MOLD_SESSION_LEN);
	out->seq = seq;
	if (count == 0) {
		out->kind = MOLD_HEARTBEAT;
		out->count = 0;
	} else if (count == MOLD_COUNT_EOS) {
		out->kind = MOLD_END_OF_SESSION;
		out->count = 0;
	} else {
		out->kind = MOLD_DATA;
		out->count = count;
	}
	out->blocks = buf + MOLD_HEADER_LEN;
	out->blocks_len = len - MOLD_HEADER_LEN;
	return MOLD_OK;
}

void mold_iter_init(struct mold_iter *it, const struct mold_packet *pkt)
{
	it->p = pkt->blocks;
	it->end = pkt->blocks + pkt->blocks_len;
	it->seq = pkt->seq;
	it->left = pkt->count;
}

int mold_iter_next(struct mold_iter *it, uint64_t *seq, const uint8_t **data, uint16_t *len)
{
	uint16_t n;

	if (it->left == 0)
		return 0;
	/* mold_parse() proved every block lies inside [blocks, end). */
	n = wire_get_u16(it->p);
	*seq = it->seq++;
	*data = it->p + 2;
	*len = n;
	it->p += 2 + (size_t)n;
	it->left--;
	return 1;
}

static void put_header(uint8_t *out, const struct mold_session *s, uint64_t seq, uint16_t count)
{
	memcpy(out, s->name, MOLD_SESSION_LEN);
	put64(out + MOLD_SESSION_LEN, seq);
	wire_put_u16(out + MOLD_SESSION_LEN + 8, count);
}

int mold_build_begin(struct mold_builder *b, uint8_t *buf, size_t cap,
		     const struct mold_session *s, uint64_t seq)
{
	if (cap < MOLD_HEADER_LEN)
		return MOLD_E_NOSPACE;
	put_header(buf, s, seq, 0);
	b->buf = buf;
	b->cap = cap;
	b->len = MOLD_HEADER_LEN;
	b->count = 0;
	return MOLD_OK;
}

/* Whether one more block of `len` bytes fits. */
static inline int block_fits(const struct mold_builder *b, size_t len)
{
	return b->count < MOLD_MAX_COUNT && b->cap - b->len >= 2 && b->cap - b->len - 2 >= len;
}

int mold_build_add(struct mold_builder *b, const void *data, uint16_t len)
{
	if (!block_fits(b, len))
		return MOLD_E_NOSPACE;
	wire_put_u16(b->buf + b->len, len);
	if (len)
		memcpy(b->buf + b->len + 2, data, len);
	b->len += 2 + (size_t)len;
	b->count++;
	return MOLD_OK;
}

/* The reservation changes nothing: the block exists only once committed, so
 * a caller that gives up on it simply does not commit. */
uint8_t *mold_build_reserve(struct mold_builder *b, uint16_t max)
{
	if (!block_fits(b, max))
		return NULL;
	return b->buf + b->len + 2;
}

void mold_build_commit(struct mold_builder *b, uint16_t len)
{
	/* len must not exceed the reservation; one that does not fit at all is
	 * a caller bug, refused rather than written past the buffer. */
	if (!block_fits(b, len)) {
		assert(!"mold_build_commit: block larger than reserved");
		return;
	}
	wire_put_u16(b->buf + b->len, len);
	b->len += 2 + (size_t)len;
	b->count++;
}

size_t mold_build_end(struct mold_builder *b)
{
	wire_put_u16(b->buf + MOLD_SESSION_LEN + 8, b->count);
	return b->len;
}

size_t mold_build_heartbeat(uint8_t out[MOLD_HEADER_LEN], const struct mold_session *s,
			    uint64_t next_seq)
{
	put_header(out, s, next_seq, 0);
	return MOLD_HEADER_LEN;
}

size_t mold_build_end_of_session(uint8_t out[MOLD_HEADER_LEN], const struct mold_session *s,
				 uint64_t next_seq)
{
	put_header(out, s, next_seq, MOLD_COUNT_EOS);
	return MOLD_HEADER_LEN;
}

size_t mold_build_request(uint8_t out[MOLD_REQUEST_LEN], const struct mold_request *r)
{
	put_header(out, &r->session, r->seq, r->count);
	return MOLD_REQUEST_LEN;
}

int mold_parse_request(const uint8_t *buf, size_t len, const struct mold_session *expect,
		       struct mold_request *out)
{
	uint64_t seq;
	uint16_t count;

	if (len != MOLD_REQUEST_LEN)
		return MOLD_E_REQUEST_LEN;
	if (expect && memcmp(buf, expect->name, MOLD_SESSION_LEN) != 0)
		return MOLD_E_SESSION;
	seq = get64(buf + MOLD_SESSION_LEN);
	count = wire_get_u16(buf + MOLD_SESSION_LEN + 8);
	if (seq_wraps(seq, count))
		return MOLD_E_SEQ_WRAP;
	memcpy(out->session.name, buf, MOLD_SESSION_LEN);
	out->seq = seq;
	out->count = count;
	return MOLD_OK;
}
