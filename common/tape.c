/* The tape's Event encoded and read by hand (see tape.h). Wire format:
 * each field is a varint key (field number << 3 | wire type) and a value:
 * wire type 0 a varint, 2 a varint length and that many bytes, 1 and 5
 * eight and four bytes. Event's fields: 1 term, 2 seq, 3 timestamp,
 * 5 origin_seq, 6 commit (varints), 4 origin, 10 command, 11 term_start
 * (length-delimited). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tape.h"

/* Tags as protobuf-c writes them: (field << 3) | wire type, one byte each. */
enum {
	TAPE_TAG_TERM = 0x08,
	TAPE_TAG_SEQ = 0x10,
	TAPE_TAG_TIMESTAMP = 0x18,
	TAPE_TAG_ORIGIN = 0x22,
	TAPE_TAG_ORIGIN_SEQ = 0x28,
	TAPE_TAG_COMMIT = 0x30,
	TAPE_TAG_COMMAND = 0x52,
};

static inline size_t tape_varint_len(uint64_t v)
{
	return 1 + (size_t)(63 - __builtin_clzll(v | 1)) / 7;
}

static inline uint8_t *tape_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* A uint64 field as protobuf-c packs a proto3 scalar: left out when 0. */
static inline size_t tape_u64_len(uint64_t v)
{
	return v ? 1 + tape_varint_len(v) : 0;
}

static inline uint8_t *tape_put_u64(uint8_t *p, uint8_t tag, uint64_t v)
{
	if (!v)
		return p;
	*p++ = tag;
	return tape_put_varint(p, v);
}

static inline uint8_t *tape_put_bytes(uint8_t *p, uint8_t tag, const void *data, size_t len)
{
	*p++ = tag;
	p = tape_put_varint(p, len);
	memcpy(p, data, len);
	return p + len;
}

size_t tape_event_encode(uint8_t *out, size_t cap, uint64_t term, uint64_t seq,
			 uint64_t timestamp, const char *origin, uint64_t origin_seq,
			 uint64_t commit, const uint8_t *command, size_t command_len)
{
	return tape_event_encode_body(out, cap, term, seq, timestamp, origin, origin_seq, commit,
				      TAPE_BODY_COMMAND, command, command_len);
}

size_t tape_event_encode_body(uint8_t *out, size_t cap, uint64_t term, uint64_t seq,
			      uint64_t timestamp, const char *origin, uint64_t origin_seq,
			      uint64_t commit, enum tape_body body, const uint8_t *command,
			      size_t command_len)
{
	size_t origin_len = origin ? strlen(origin) : 0;
	size_t need;
	uint8_t *p = out;

	if (origin_len > cap || (command && command_len > cap))
		return 0;
	need = tape_u64_len(term) + tape_u64_len(seq) + tape_u64_len(timestamp) +
	       tape_u64_len(origin_seq) + tape_u64_len(commit);
	if (origin_len)
		need += 1 + tape_varint_len(origin_len) + origin_len;
	if (command)
		need += 1 + tape_varint_len(command_len) + command_len;
	if (need > cap)
		return 0;
	p = tape_put_u64(p, TAPE_TAG_TERM, term);
	p = tape_put_u64(p, TAPE_TAG_SEQ, seq);
	p = tape_put_u64(p, TAPE_TAG_TIMESTAMP, timestamp);
	if (origin_len)
		p = tape_put_bytes(p, TAPE_TAG_ORIGIN, origin, origin_len);
	p = tape_put_u64(p, TAPE_TAG_ORIGIN_SEQ, origin_seq);
	p = tape_put_u64(p, TAPE_TAG_COMMIT, commit);
	if (command)
		p = tape_put_bytes(p, (uint8_t)((unsigned)body << 3 | TAPE_WIRE_LEN), command,
				   command_len);
	return (size_t)(p - out);
}

int tape_day_peek(const uint8_t *buf, size_t len, enum tape_day_kind *kind, uint32_t *day)
{
	const uint8_t *p = buf, *end = buf + len;
	uint64_t k = 0, d = 0;

	while (p < end) {
		const uint8_t *data = NULL;
		uint64_t val = 0;
		uint32_t field;
		unsigned wire;
		int rc = tape_next_field(&p, end, &field, &wire, &val, &data);

		if (rc)
			return rc;
		if (field == 1 || field == 2) {
			if (wire != TAPE_WIRE_VARINT)
				return -EPROTO;
			*(field == 1 ? &k : &d) = val;
		}
	}
	*kind = k == TAPE_DAY_END || k == TAPE_DAY_START ? (enum tape_day_kind)k : TAPE_DAY_NONE;
	*day = (uint32_t)d;
	return 0;
}

int tape_event_peek(const uint8_t *buf, size_t len, struct tape_event_view *out)
{
	struct tape_event_view v = { .origin = "" };
	const uint8_t *p = buf, *end = buf + len;

	while (p < end) {
		const uint8_t *data = NULL;
		uint64_t val = 0;
		uint32_t field;
		unsigned wire;
		int rc = tape_next_field(&p, end, &field, &wire, &val, &data);

		if (rc)
			return rc;
		switch (field) {
		case 1: case 2: case 3: case 5: case 6:
			if (wire != TAPE_WIRE_VARINT)
				return -EPROTO;
			if (field == 1)
				v.term = val;
			else if (field == 2)
				v.seq = val;
			else if (field == 3)
				v.timestamp = val;
			else if (field == 5)
				v.origin_seq = val;
			else
				v.commit = val;
			break;
		case 4:
			if (wire != TAPE_WIRE_LEN)
				return -EPROTO;
			v.origin = (const char *)data;
			v.origin_len = (size_t)val;
			break;
		case TAPE_BODY_COMMAND:
		case TAPE_BODY_TERM_START:
		case TAPE_BODY_DAY:
		case TAPE_BODY_ADMIN:
			if (wire != TAPE_WIRE_LEN)
				return -EPROTO;
			v.body = (enum tape_body)field;
			v.body_data = data;
			v.body_len = (size_t)val;
			break;
		default:
			break; /* unknown: skipped */
		}
	}
	*out = v;
	return 0;
}
