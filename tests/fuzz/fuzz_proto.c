/* Fuzzes the tape's decoders: the input is unpacked as a Command and as an
 * Event through an arena (protobuf-c), and read with tape_event_peek().
 * Aborts when:
 *  - something protobuf-c unpacked does not pack, unpack and pack again to
 *    the same bytes (except for protobuf-c's own quirk with field number 0,
 *    see fz_has_field_zero());
 *  - protobuf-c accepts an Event and peek refuses it, or gives other values;
 *  - peek accepts an Event that protobuf-c refuses, unless one of the body
 *    fields (command, term_start or day, any occurrence) is itself malformed:
 *    peek does not decode bodies, protobuf-c decodes every occurrence. That
 *    is the one legitimate disagreement; an origin with a NUL byte is
 *    compared as protobuf-c's C string (cut at the NUL). Duplicate fields
 *    and unknown fields are not a difference: both take the last occurrence
 *    (protobuf-c 1.4 does not merge repeated oneof messages) and both skip
 *    unknown fields;
 *  - tape_event_encode() of the values peek read (when there are no unknown
 *    fields and the body is a Command or none) differs from protobuf-c's
 *    packing of what it unpacked.
 * tests/test_proto.c includes this file to run the same checks on random
 * inputs under `make check`. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "lockstep.pb-c.h"
#include "tape.h"

#define FZ_MAX_INPUT (256u << 10)
#define FZ_ARENA (64u << 20) /* well above what an FZ_MAX_INPUT input can use */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct arena fz_arena;

#define FZ_CHECK(cond)                \
	do {                          \
		if (!(cond))          \
			fz_fail(#cond, __LINE__); \
	} while (0)

static void fz_fail(const char *what, int line)
{
	fprintf(stderr, "fuzz_proto.c:%d: invariant broken: %s\n", line, what);
	abort();
}

/* Packs msg into arena memory. */
static uint8_t *fz_pack(const ProtobufCMessage *msg, size_t *len)
{
	uint8_t *buf;

	*len = protobuf_c_message_get_packed_size(msg);
	buf = arena_alloc(&fz_arena, *len ? *len : 1);
	FZ_CHECK(buf != NULL);
	FZ_CHECK(protobuf_c_message_pack(msg, buf) == *len);
	return buf;
}

/* Does msg, or a message inside it, keep an unknown field numbered 0?
 * protobuf-c accepts one written in two or more bytes (0x80 0x00) but packs
 * it back as the single byte 0x00, which it then refuses: such a message
 * does not survive pack -> unpack. */
static int fz_has_field_zero(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		if (m->unknown_fields[i].tag == 0)
			return 1;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m;
		const ProtobufCMessage *sub;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue;
		memcpy(&sub, base + f->offset, sizeof(sub));
		if (sub && fz_has_field_zero(sub))
			return 1;
	}
	return 0;
}

/* pack -> unpack -> pack gives the same bytes. */
static void fz_repack(const ProtobufCMessage *msg)
{
	size_t n1, n2;
	uint8_t *b1 = fz_pack(msg, &n1);
	ProtobufCMessage *again =
		protobuf_c_message_unpack(msg->descriptor, &fz_arena.allocator, n1, b1);
	uint8_t *b2;

	if (!again && fz_has_field_zero(msg))
		return;
	FZ_CHECK(again != NULL);
	b2 = fz_pack(again, &n2);
	FZ_CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
}

/* A varint at *p, for the independent walk below: 0, or -1 when it runs
 * past end or past 10 bytes. */
static int fz_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned i = 0; i < 10 && *p < end; i++) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* An independent walk over the top-level fields of a buffer that peek
 * accepted (its framing must hold up here too): does some command or
 * term_start occurrence fail to unpack? */
static int fz_some_body_malformed(const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;

	while (p < end) {
		uint64_t key, v;

		FZ_CHECK(fz_varint(&p, end, &key) == 0);
		switch (key & 7) {
		case 0:
			FZ_CHECK(fz_varint(&p, end, &v) == 0);
			break;
		case 1:
		case 5:
			FZ_CHECK((size_t)(end - p) >= ((key & 7) == 1 ? 8u : 4u));
			p += (key & 7) == 1 ? 8 : 4;
			break;
		case 2:
			FZ_CHECK(fz_varint(&p, end, &v) == 0 && v <= (size_t)(end - p));
			if ((key >> 3) == 10 &&
			    !lockstep__command__unpack(&fz_arena.allocator, (size_t)v, p))
				return 1;
			if ((key >> 3) == 11 &&
			    !lockstep__term_start__unpack(&fz_arena.allocator, (size_t)v, p))
				return 1;
			if ((key >> 3) == 12 &&
			    !lockstep__day_event__unpack(&fz_arena.allocator, (size_t)v, p))
				return 1;
			if ((key >> 3) == 13 &&
			    !lockstep__admin__unpack(&fz_arena.allocator, (size_t)v, p))
				return 1;
			p += v;
			break;
		default:
			fz_fail("peek accepted a wire type it should not", __LINE__);
		}
	}
	return 0;
}

/* protobuf-c accepted e; peek must have read the same values. */
static void fz_compare(const Lockstep__Event *e, const struct tape_event_view *v,
		       const uint8_t *data, size_t size)
{
	size_t olen = strnlen(v->origin, v->origin_len);

	FZ_CHECK(e->term == v->term && e->seq == v->seq && e->timestamp == v->timestamp);
	FZ_CHECK(e->origin_seq == v->origin_seq && e->commit == v->commit);
	FZ_CHECK(strlen(e->origin) == olen && memcmp(e->origin, v->origin, olen) == 0);
	FZ_CHECK((int)e->body_case == (int)v->body);
	FZ_CHECK(v->origin_len == 0 ||
		 ((const uint8_t *)v->origin >= data &&
		  (const uint8_t *)v->origin + v->origin_len <= data + size));
	if (v->body != TAPE_BODY_NONE)
		FZ_CHECK(v->body_data >= data && v->body_data + v->body_len <= data + size);
	if (e->body_case == LOCKSTEP__EVENT__BODY_COMMAND) {
		size_t n1, n2;
		uint8_t *b1 = fz_pack(&e->command->base, &n1);
		Lockstep__Command *c =
			lockstep__command__unpack(&fz_arena.allocator, v->body_len, v->body_data);
		uint8_t *b2;

		FZ_CHECK(c != NULL);
		b2 = fz_pack(&c->base, &n2);
		FZ_CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
	}
	if (e->body_case == LOCKSTEP__EVENT__BODY_TERM_START) {
		Lockstep__TermStart *t = lockstep__term_start__unpack(&fz_arena.allocator,
								      v->body_len, v->body_data);

		FZ_CHECK(t != NULL && strcmp(t->node, e->term_start->node) == 0);
	}
}

/* Without unknown fields, tape_event_encode() of what was read packs like
 * protobuf-c. */
static void fz_reencode(const Lockstep__Event *e, const struct tape_event_view *v)
{
	size_t n1, n2, cmd_len = 0;
	uint8_t *b1, *b2, *cmd = NULL;

	if (e->base.n_unknown_fields || e->body_case == LOCKSTEP__EVENT__BODY_TERM_START ||
	    e->body_case == LOCKSTEP__EVENT__BODY_DAY ||
	    e->body_case == LOCKSTEP__EVENT__BODY_ADMIN ||
	    (e->body_case == LOCKSTEP__EVENT__BODY_COMMAND &&
	     e->command->base.n_unknown_fields))
		return;
	b1 = fz_pack(&e->base, &n1);
	if (e->body_case == LOCKSTEP__EVENT__BODY_COMMAND)
		cmd = fz_pack(&e->command->base, &cmd_len); /* non-NULL even when empty */
	b2 = arena_alloc(&fz_arena, n1 + 1);
	FZ_CHECK(b2 != NULL);
	n2 = tape_event_encode(b2, n1 + 1, v->term, v->seq, v->timestamp, e->origin,
			       v->origin_seq, v->commit, cmd, cmd_len);
	FZ_CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
	/* and one byte less does not fit */
	FZ_CHECK(tape_event_encode(b2, n1 - 1, v->term, v->seq, v->timestamp, e->origin,
				   v->origin_seq, v->commit, cmd, cmd_len) == 0 || n1 == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tape_event_view v;
	Lockstep__Command *c;
	Lockstep__Event *e;
	int rc;

	if (size > FZ_MAX_INPUT)
		return 0;
	if (!fz_arena.base && arena_init(&fz_arena, FZ_ARENA))
		abort();

	arena_reset(&fz_arena);
	c = lockstep__command__unpack(&fz_arena.allocator, size, data);
	if (c)
		fz_repack(&c->base);

	arena_reset(&fz_arena);
	e = lockstep__event__unpack(&fz_arena.allocator, size, data);
	rc = tape_event_peek(data, size, &v);
	FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EOVERFLOW || rc == -EPROTO);
	if (e) {
		FZ_CHECK(rc == 0);
		fz_compare(e, &v, data, size);
		fz_repack(&e->base);
		fz_reencode(e, &v);
	} else if (rc == 0) {
		FZ_CHECK(fz_some_body_malformed(data, size));
	}
	arena_reset(&fz_arena);
	return 0;
}
