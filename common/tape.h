/* The tape's Event (common/lockstep.proto) encoded and read by hand, for the
 * hot paths: the sequencer wraps a gateway's Command bytes in an Event
 * without decoding them, and a receiver reads an Event's header fields and
 * finds the Command's bytes without allocating.
 *
 * tape_event_encode() writes exactly the bytes that protobuf-c's
 * lockstep__event__pack() writes for the same Event (fields in number order,
 * zero and empty fields left out), so either side can use either.
 *
 * tape_event_peek() accepts what lockstep__event__unpack() accepts at the top
 * level and gives the same values (the last occurrence of a repeated field
 * wins, unknown fields are skipped, the body is the last of command and
 * term_start on the wire), with two deliberate differences:
 *  - the body is not decoded: a malformed Command or TermStart inside an
 *    otherwise valid Event (or in a body field overridden by a later one) is
 *    accepted here, and protobuf-c refuses the whole Event;
 *  - origin is the raw bytes: protobuf-c's C string stops at an embedded NUL.
 * Neither checks that strings are UTF-8. */
#ifndef LOCKSTEP_TAPE_H
#define LOCKSTEP_TAPE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* Numbered as the oneof's field numbers (and protobuf-c's body_case). */
enum tape_body {
	TAPE_BODY_NONE = 0,
	TAPE_BODY_COMMAND = 10,
	TAPE_BODY_TERM_START = 11,
	TAPE_BODY_DAY = 12,
	TAPE_BODY_ADMIN = 13,
};

struct tape_event_view {
	uint64_t term, seq, timestamp, origin_seq, commit;
	const char *origin; /* into the buffer, not NUL-terminated; "" when absent */
	size_t origin_len;
	enum tape_body body;
	/* The body's bytes, into the buffer: a packed Command when body is
	 * TAPE_BODY_COMMAND, a packed TermStart for TAPE_BODY_TERM_START, a
	 * packed DayEvent for TAPE_BODY_DAY, a packed Admin for TAPE_BODY_ADMIN
	 * (unpack those with protobuf-c, or a DayEvent with tape_day_peek: those
	 * paths are rare); NULL/0 for none. */
	const uint8_t *body_data;
	size_t body_len;
};

/* The most a tape event's term may exceed the term of the event before it
 * (the same bound as a raft message's, RAFT_TERM_STEP_MAX: a million
 * elections). A receiver refuses an event further ahead as forged or broken,
 * as it refuses one of an older term than the event before it (fencing:
 * terms never decrease along the tape, so such an event is a deposed
 * primary's or a stale journal's), and asks for it again. */
#define TAPE_TERM_STEP_MAX (1ull << 20)

/* 1 when an event of term `term` cannot follow one of term `prev` on the
 * tape (prev 0: nothing before it is known). */
static inline int tape_term_fenced(uint64_t prev, uint64_t term)
{
	return term < prev || (prev && term - prev > TAPE_TERM_STEP_MAX);
}

/* The largest encoding of an Event without its command, origin bytes
 * included: six 10-byte varints with their tags, the origin's tag and
 * length, and the command's tag and length. */
#define TAPE_EVENT_OVERHEAD(origin_len) (6 * 11 + 1 + 10 + 1 + 10 + (origin_len))

/* Writes the Event {term, seq, timestamp, origin, origin_seq, commit,
 * command} to out: origin NULL or "" leaves the field out; command NULL means
 * no body, command with command_len 0 an empty Command. Returns the number of
 * bytes written, or 0 (out untouched) when they do not fit in cap. No
 * allocation, no protobuf-c. */
size_t tape_event_encode(uint8_t *out, size_t cap, uint64_t term, uint64_t seq,
			 uint64_t timestamp, const char *origin, uint64_t origin_seq,
			 uint64_t commit, const uint8_t *command, size_t command_len);

/* The same with the body in field `body` (a TAPE_BODY_*) instead of the
 * command. */
size_t tape_event_encode_body(uint8_t *out, size_t cap, uint64_t term, uint64_t seq,
			      uint64_t timestamp, const char *origin, uint64_t origin_seq,
			      uint64_t commit, enum tape_body body, const uint8_t *data,
			      size_t len);

/* A DayEvent's kind and day (the gateways' numbers are left to protobuf-c),
 * read without allocating. 0, or a negative errno as tape_event_peek. */
enum tape_day_kind { TAPE_DAY_NONE = 0, TAPE_DAY_END = 1, TAPE_DAY_START = 2 };
int tape_day_peek(const uint8_t *buf, size_t len, enum tape_day_kind *kind, uint32_t *day);

/* Reads the Event in buf[0, len) into *out, pointing into buf. Returns 0, or
 * on malformed input (out untouched):
 *  -EBADMSG   a field or length runs past the end of the buffer;
 *  -EOVERFLOW a varint longer than 10 bytes (a tag or length longer than 5);
 *  -EPROTO    tag 0, a group or unknown wire type, or a known field with the
 *             wrong wire type. */
int tape_event_peek(const uint8_t *buf, size_t len, struct tape_event_view *out);

/* ---- protobuf wire format, read by hand --------------------------------- */

enum {
	TAPE_WIRE_VARINT = 0,
	TAPE_WIRE_FIXED64 = 1,
	TAPE_WIRE_LEN = 2,
	TAPE_WIRE_FIXED32 = 5,
};

/* A varint of at most max bytes at *p; bits past the 64th are dropped, as
 * protobuf-c does. */
static inline int tape_get_varint(const uint8_t **p, const uint8_t *end, unsigned max,
				  uint64_t *v)
{
	const uint8_t *q = *p;
	uint64_t x = 0;

	for (unsigned i = 0; i < max; i++) {
		if (q + i >= end)
			return -EBADMSG;
		x |= (uint64_t)(q[i] & 0x7f) << (7 * i);
		if (!(q[i] & 0x80)) {
			*p = q + i + 1;
			*v = x;
			return 0;
		}
	}
	return -EOVERFLOW;
}

/* One field of a protobuf message at *p (before end): its number, wire type,
 * and value (a varint's value, or a length-delimited field's length, with
 * *data its bytes; fixed-size fields are stepped over). Moves *p past it.
 * 0, or -EBADMSG, -EOVERFLOW, -EPROTO as tape_event_peek() says. For the
 * hand decoders of the tape's messages (this file, matcher/command.c). */
static inline int tape_next_field(const uint8_t **p, const uint8_t *end, uint32_t *field,
			   unsigned *wire, uint64_t *val, const uint8_t **data)
{
	uint64_t key;
	int rc;

	/* A one-byte key with field number 0: protobuf-c refuses it (and
	 * skips a longer encoding of 0 as an unknown field: so do we). */
	if ((**p & 0xf8) == 0)
		return -EPROTO;
	rc = tape_get_varint(p, end, 5, &key);
	if (rc)
		return rc;
	*field = (uint32_t)(key >> 3);
	*wire = key & 7;
	switch (*wire) {
	case TAPE_WIRE_VARINT:
		return tape_get_varint(p, end, 10, val);
	case TAPE_WIRE_FIXED64:
	case TAPE_WIRE_FIXED32:
		*val = *wire == TAPE_WIRE_FIXED64 ? 8 : 4;
		if ((size_t)(end - *p) < *val)
			return -EBADMSG;
		*p += *val;
		return 0;
	case TAPE_WIRE_LEN:
		rc = tape_get_varint(p, end, 5, val);
		if (rc)
			return rc;
		if (*val > (size_t)(end - *p))
			return -EBADMSG;
		*data = *p;
		*p += *val;
		return 0;
	default:
		return -EPROTO; /* groups (3, 4), 6, 7 */
	}
}

#endif
