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

#include <stddef.h>
#include <stdint.h>

/* Numbered as the oneof's field numbers (and protobuf-c's body_case). */
enum tape_body {
	TAPE_BODY_NONE = 0,
	TAPE_BODY_COMMAND = 10,
	TAPE_BODY_TERM_START = 11,
};

struct tape_event_view {
	uint64_t term, seq, timestamp, origin_seq, commit;
	const char *origin; /* into the buffer, not NUL-terminated; "" when absent */
	size_t origin_len;
	enum tape_body body;
	/* The body's bytes, into the buffer: a packed Command when body is
	 * TAPE_BODY_COMMAND, a packed TermStart for TAPE_BODY_TERM_START
	 * (unpack it with protobuf-c: that path is rare); NULL/0 for none. */
	const uint8_t *body_data;
	size_t body_len;
};

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

/* Reads the Event in buf[0, len) into *out, pointing into buf. Returns 0, or
 * on malformed input (out untouched):
 *  -EBADMSG   a field or length runs past the end of the buffer;
 *  -EOVERFLOW a varint longer than 10 bytes (a tag or length longer than 5);
 *  -EPROTO    tag 0, a group or unknown wire type, or a known field with the
 *             wrong wire type. */
int tape_event_peek(const uint8_t *buf, size_t len, struct tape_event_view *out);

#endif
