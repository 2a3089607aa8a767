/* The tape's Command decoded by hand into an engine command (command.h):
 * the matcher's hot path, without protobuf-c's unpack (an allocation per
 * field into an arena and a second copy into struct engine_cmd). */
#include <stddef.h>
#include <string.h>

#include "command.h"
#include "tape.h"

struct pb {
	const uint8_t *p, *end;
};

/* The field that starts at b->p (tape_next_field(), the tape's own reader):
 * its number and wire type, for a varint its value, for a length-delimited
 * field its bytes. 0, or -1 when malformed (groups included). */
struct pb_field {
	uint32_t num;
	unsigned type;
	uint64_t v;
	const uint8_t *data;
	size_t len;
};

static int pb_next(struct pb *b, struct pb_field *f)
{
	f->data = NULL;
	if (tape_next_field(&b->p, b->end, &f->num, &f->type, &f->v, &f->data) < 0)
		return -1;
	f->len = f->type == TAPE_WIRE_LEN ? (size_t)f->v : 0;
	return 0;
}

/* A string field into dst (cap bytes with the NUL). As protobuf-c's copy
 * read with strlen: up to the first NUL; -1 when it does not fit. */
static int pb_str(const struct pb_field *f, char *dst, size_t cap)
{
	size_t n;

	if (f->type != TAPE_WIRE_LEN)
		return -1;
	n = strnlen((const char *)f->data, f->len);
	if (n >= cap)
		return -1;
	memcpy(dst, f->data, n);
	dst[n] = '\0';
	return 0;
}

static int pb_u32(const struct pb_field *f, uint32_t *out)
{
	if (f->type != TAPE_WIRE_VARINT)
		return -1;
	*out = (uint32_t)f->v;
	return 0;
}

static int pb_char(const struct pb_field *f, char *out)
{
	uint32_t v;

	if (pb_u32(f, &v) < 0)
		return -1;
	*out = (char)v;
	return 0;
}

/* How one field of a message lands in its engine struct: by field number
 * (the index of the table), what it is and where it goes. A number past
 * the table or with kind PB_UNKNOWN is stepped over. */
enum pb_kind { PB_UNKNOWN, PB_STR, PB_U32, PB_CHAR, PB_VARINT };

struct pb_rule {
	uint8_t kind;
	uint16_t off, cap; /* cap: a string's field size, with its NUL */
};

#define STR(type, f) { PB_STR, offsetof(type, f), sizeof(((type *)0)->f) }
#define U32(type, f) { PB_U32, offsetof(type, f), 0 }
#define CHR(type, f) { PB_CHAR, offsetof(type, f), 0 }

#define E struct ouch_enter_order
static const struct pb_rule new_order_rules[] = {
	[1] = STR(E, token), [2] = CHR(E, side), [3] = U32(E, shares), [4] = STR(E, stock),
	[5] = U32(E, price), [6] = U32(E, tif), [7] = STR(E, firm), [8] = CHR(E, display),
	[9] = CHR(E, capacity), [10] = U32(E, min_qty), [11] = CHR(E, iso),
	[12] = CHR(E, cross_type), [13] = CHR(E, customer_type),
};
#undef E
#define C struct ouch_cancel_order
static const struct pb_rule cancel_rules[] = { [1] = STR(C, token), [2] = U32(C, shares) };
#undef C
#define R struct ouch_replace_order
static const struct pb_rule replace_rules[] = {
	[1] = STR(R, existing_token), [2] = STR(R, replacement_token), [3] = U32(R, shares),
	[4] = U32(R, price), [5] = U32(R, tif), [6] = CHR(R, display), [7] = CHR(R, iso),
	[8] = U32(R, min_qty),
};
#undef R
#define M struct ouch_modify_order
static const struct pb_rule modify_rules[] = {
	[1] = STR(M, token), [2] = CHR(M, side), [3] = U32(M, shares),
};
#undef M
/* a SessionEvent: only its well-formedness matters (every kind cancels all) */
static const struct pb_rule session_rules[] = { [1] = { PB_VARINT, 0, 0 } };

/* Decodes the message buf[0..len) into out by its rules. */
static int decode_fields(const uint8_t *buf, size_t len, const struct pb_rule *rules,
			 size_t n_rules, void *out)
{
	struct pb b = { buf, buf + len };
	struct pb_field f;
	char *base = out;

	while (b.p < b.end) {
		const struct pb_rule *r;
		int rc = 0;

		if (pb_next(&b, &f) < 0)
			return -1;
		r = f.num < n_rules ? &rules[f.num] : NULL;
		if (!r || r->kind == PB_UNKNOWN)
			continue;
		switch (r->kind) {
		case PB_STR:
			rc = pb_str(&f, base + r->off, r->cap);
			break;
		case PB_U32:
			rc = pb_u32(&f, (uint32_t *)(void *)(base + r->off));
			break;
		case PB_CHAR:
			rc = pb_char(&f, base + r->off);
			break;
		default:
			rc = f.type == TAPE_WIRE_VARINT ? 0 : -1;
			break;
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

#define DECODE(buf, len, rules, out) \
	decode_fields(buf, len, rules, sizeof(rules) / sizeof(rules[0]), out)

/* One body field of the oneof: the last one in the message counts. */
static int decode_body(const struct pb_field *f, struct engine_cmd *e)
{
	if (f->type != TAPE_WIRE_LEN)
		return -1;
	memset(&e->u, 0, sizeof(e->u));
	switch (f->num) {
	case 10:
		e->kind = ENGINE_ENTER;
		return DECODE(f->data, f->len, new_order_rules, &e->u.enter);
	case 11:
		e->kind = ENGINE_CANCEL;
		return DECODE(f->data, f->len, cancel_rules, &e->u.cancel);
	case 12:
		e->kind = ENGINE_REPLACE;
		return DECODE(f->data, f->len, replace_rules, &e->u.replace);
	case 13:
		e->kind = ENGINE_MODIFY;
		return DECODE(f->data, f->len, modify_rules, &e->u.modify);
	default:
		e->kind = ENGINE_CANCEL_ALL;
		return DECODE(f->data, f->len, session_rules, NULL);
	}
}

int command_decode(const uint8_t *buf, size_t len, struct engine_cmd *e, uint32_t *partition)
{
	struct pb b = { buf, buf + len };
	struct pb_field f;
	int have_body = 0;

	memset(e, 0, sizeof(*e));
	*partition = 0;
	while (b.p < b.end) {
		if (pb_next(&b, &f) < 0)
			return -1;
		switch (f.num) {
		case 1:
			if (pb_str(&f, e->user, sizeof(e->user)) < 0)
				return -1;
			break;
		case 2:
			if (pb_str(&f, e->firm, sizeof(e->firm)) < 0)
				return -1;
			break;
		case 3:
			if (pb_u32(&f, partition) < 0)
				return -1;
			break;
		case 10: case 11: case 12: case 13: case 14:
			if (decode_body(&f, e) < 0)
				return -1;
			have_body = 1;
			break;
		default:
			break;
		}
	}
	return have_body ? 0 : -1;
}
