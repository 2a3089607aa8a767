/* The protobuf schema (common/lockstep.proto) through protobuf-c and an
 * arena, and the hand-written tape codec (common/tape.c) against it. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "lockstep.pb-c.h"
#include "tape.h"

/* The fuzz target's invariants (peek vs protobuf-c, repacking), run below
 * on random and mutated inputs. */
#include "fuzz/fuzz_proto.c"
#include "testutil.h"

static struct arena arena;

static void setup(void)
{
	ck_assert_int_eq(arena_init(&arena, 1 << 20), 0);
}

static void teardown(void)
{
	arena_fini(&arena);
}

/* xorshift64*: deterministic, so a failure can be replayed. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Values that exercise every varint length, zero (left out) included. */
static uint64_t rnd_u64(void)
{
	switch (rnd() % 6) {
	case 0:
		return 0;
	case 1:
		return rnd() % 128;
	case 2:
		return 127 + rnd() % 3;
	case 3:
		return UINT64_MAX - rnd() % 2;
	default:
		return rnd() >> (rnd() % 64);
	}
}

static void rnd_string(char *s, size_t max)
{
	size_t n = rnd() % 4 == 0 ? 0 : rnd() % max;

	for (size_t i = 0; i < n; i++)
		s[i] = (char)('A' + rnd() % 26);
	s[n] = '\0';
}

/* --- commands of every kind ---------------------------------------------------- */

struct cmd_store {
	Lockstep__Command c;
	Lockstep__NewOrder no;
	Lockstep__CancelOrder cancel;
	Lockstep__ReplaceOrder replace;
	Lockstep__ModifyOrder modify;
	Lockstep__SessionEvent session;
	char s[6][40];
};

enum { CMD_KINDS = 8 };

/* Command kind k: 0 new order, 1 cancel, 2 replace, 3 modify, 4-6 session
 * events, 7 no body. */
static Lockstep__Command *make_command(struct cmd_store *st, int k)
{
	lockstep__command__init(&st->c);
	lockstep__new_order__init(&st->no);
	lockstep__cancel_order__init(&st->cancel);
	lockstep__replace_order__init(&st->replace);
	lockstep__modify_order__init(&st->modify);
	lockstep__session_event__init(&st->session);
	strcpy(st->s[0], "TRADR1");
	strcpy(st->s[1], "FRMA");
	st->c.user = st->s[0];
	st->c.firm = st->s[1];
	st->c.partition = 3;
	switch (k) {
	case 0:
		strcpy(st->s[2], "ORD0000000001");
		strcpy(st->s[3], "AAPL");
		st->no = (Lockstep__NewOrder)LOCKSTEP__NEW_ORDER__INIT;
		st->no.token = st->s[2];
		st->no.side = 'B';
		st->no.shares = 100;
		st->no.symbol = st->s[3];
		st->no.price = 1234500;
		st->no.tif = 99998;
		st->no.firm = st->s[1];
		st->no.display = 'Y';
		st->no.capacity = 'A';
		st->no.min_qty = 10;
		st->no.iso = 'N';
		st->no.cross_type = 'N';
		st->no.customer_type = 'R';
		st->c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
		st->c.new_order = &st->no;
		break;
	case 1:
		strcpy(st->s[2], "ORD0000000001");
		st->cancel.token = st->s[2];
		st->cancel.shares = 0;
		st->c.body_case = LOCKSTEP__COMMAND__BODY_CANCEL;
		st->c.cancel = &st->cancel;
		break;
	case 2:
		strcpy(st->s[2], "ORD0000000001");
		strcpy(st->s[3], "ORD0000000002");
		st->replace.existing_token = st->s[2];
		st->replace.replacement_token = st->s[3];
		st->replace.shares = 50;
		st->replace.price = UINT32_MAX;
		st->replace.tif = 0;
		st->replace.display = 'P';
		st->replace.iso = 'Y';
		st->replace.min_qty = 5;
		st->c.body_case = LOCKSTEP__COMMAND__BODY_REPLACE;
		st->c.replace = &st->replace;
		break;
	case 3:
		strcpy(st->s[2], "ORD0000000002");
		st->modify.token = st->s[2];
		st->modify.side = 'S';
		st->modify.shares = 25;
		st->c.body_case = LOCKSTEP__COMMAND__BODY_MODIFY;
		st->c.modify = &st->modify;
		break;
	case 4:
	case 5:
	case 6:
		st->session.kind = k == 4   ? LOCKSTEP__SESSION_EVENT__KIND__LOGOUT
				   : k == 5 ? LOCKSTEP__SESSION_EVENT__KIND__DISCONNECT
					    : LOCKSTEP__SESSION_EVENT__KIND__CANCEL_ALL;
		st->c.body_case = LOCKSTEP__COMMAND__BODY_SESSION;
		st->c.session = &st->session;
		break;
	default:
		break;
	}
	return &st->c;
}

/* A random command (any kind, random values). */
static Lockstep__Command *random_command(struct cmd_store *st)
{
	Lockstep__Command *c = make_command(st, (int)(rnd() % CMD_KINDS));

	rnd_string(st->s[0], 12);
	rnd_string(st->s[1], 6);
	c->partition = (uint32_t)rnd_u64();
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER:
		rnd_string(st->s[2], 15);
		rnd_string(st->s[3], 9);
		st->no.shares = (uint32_t)rnd_u64();
		st->no.price = (uint32_t)rnd_u64();
		st->no.tif = (uint32_t)rnd_u64();
		break;
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		rnd_string(st->s[2], 15);
		st->cancel.shares = (uint32_t)rnd_u64();
		break;
	case LOCKSTEP__COMMAND__BODY_REPLACE:
		rnd_string(st->s[3], 15);
		st->replace.price = (uint32_t)rnd_u64();
		break;
	default:
		break;
	}
	return c;
}

static size_t pack_command(const Lockstep__Command *c, uint8_t *buf, size_t cap)
{
	size_t n = lockstep__command__get_packed_size(c);

	ck_assert_uint_le(n, cap);
	ck_assert_uint_eq(lockstep__command__pack(c, buf), n);
	return n;
}

#define STR_EQ(a, b) ck_assert_str_eq((a), (b))

static void check_command_eq(const Lockstep__Command *a, const Lockstep__Command *b)
{
	STR_EQ(a->user, b->user);
	STR_EQ(a->firm, b->firm);
	ck_assert_uint_eq(a->partition, b->partition);
	ck_assert_int_eq(a->body_case, b->body_case);
	switch (a->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
		const Lockstep__NewOrder *x = a->new_order, *y = b->new_order;

		STR_EQ(x->token, y->token);
		STR_EQ(x->symbol, y->symbol);
		STR_EQ(x->firm, y->firm);
		ck_assert_uint_eq(x->side, y->side);
		ck_assert_uint_eq(x->shares, y->shares);
		ck_assert_uint_eq(x->price, y->price);
		ck_assert_uint_eq(x->tif, y->tif);
		ck_assert_uint_eq(x->display, y->display);
		ck_assert_uint_eq(x->capacity, y->capacity);
		ck_assert_uint_eq(x->min_qty, y->min_qty);
		ck_assert_uint_eq(x->iso, y->iso);
		ck_assert_uint_eq(x->cross_type, y->cross_type);
		ck_assert_uint_eq(x->customer_type, y->customer_type);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		STR_EQ(a->cancel->token, b->cancel->token);
		ck_assert_uint_eq(a->cancel->shares, b->cancel->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_REPLACE: {
		const Lockstep__ReplaceOrder *x = a->replace, *y = b->replace;

		STR_EQ(x->existing_token, y->existing_token);
		STR_EQ(x->replacement_token, y->replacement_token);
		ck_assert_uint_eq(x->shares, y->shares);
		ck_assert_uint_eq(x->price, y->price);
		ck_assert_uint_eq(x->tif, y->tif);
		ck_assert_uint_eq(x->display, y->display);
		ck_assert_uint_eq(x->iso, y->iso);
		ck_assert_uint_eq(x->min_qty, y->min_qty);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		STR_EQ(a->modify->token, b->modify->token);
		ck_assert_uint_eq(a->modify->side, b->modify->side);
		ck_assert_uint_eq(a->modify->shares, b->modify->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_SESSION:
		ck_assert_int_eq(a->session->kind, b->session->kind);
		break;
	default:
		break;
	}
}

START_TEST(command_round_trip)
{
	struct cmd_store st;
	Lockstep__Command *c = make_command(&st, _i), *u;
	uint8_t buf[512], again[512];
	size_t n = pack_command(c, buf, sizeof(buf));

	arena_reset(&arena);
	u = lockstep__command__unpack(&arena.allocator, n, buf);
	ck_assert_ptr_nonnull(u);
	check_command_eq(c, u);
	ck_assert_uint_eq(u->base.n_unknown_fields, 0);
	ck_assert_uint_eq(pack_command(u, again, sizeof(again)), n);
	ck_assert_int_eq(memcmp(buf, again, n), 0);
}
END_TEST

/* --- events ----------------------------------------------------------------------- */

START_TEST(event_with_command_round_trip)
{
	struct cmd_store st;
	Lockstep__Event e = LOCKSTEP__EVENT__INIT, *u;
	char origin[] = "gw-a";
	uint8_t buf[512];
	size_t n;

	e.term = 7;
	e.seq = 1000001;
	e.timestamp = 1733212800123456789ull;
	e.origin = origin;
	e.origin_seq = 42;
	e.commit = 1000000;
	e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
	e.command = make_command(&st, 0);
	n = lockstep__event__get_packed_size(&e);
	ck_assert_uint_le(n, sizeof(buf));
	ck_assert_uint_eq(lockstep__event__pack(&e, buf), n);

	u = lockstep__event__unpack(&arena.allocator, n, buf);
	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(u->term, 7);
	ck_assert_uint_eq(u->seq, 1000001);
	ck_assert_uint_eq(u->timestamp, 1733212800123456789ull);
	STR_EQ(u->origin, "gw-a");
	ck_assert_uint_eq(u->origin_seq, 42);
	ck_assert_uint_eq(u->commit, 1000000);
	ck_assert_int_eq(u->body_case, LOCKSTEP__EVENT__BODY_COMMAND);
	check_command_eq(e.command, u->command);
}
END_TEST

START_TEST(event_with_term_start_round_trip)
{
	Lockstep__Event e = LOCKSTEP__EVENT__INIT, *u;
	Lockstep__TermStart ts = LOCKSTEP__TERM_START__INIT;
	struct tape_event_view v;
	char node[] = "seq-2";
	uint8_t buf[128];
	size_t n;

	ts.node = node;
	e.term = 8;
	e.seq = 1000002;
	e.timestamp = 5;
	e.body_case = LOCKSTEP__EVENT__BODY_TERM_START;
	e.term_start = &ts;
	n = lockstep__event__pack(&e, buf);

	u = lockstep__event__unpack(&arena.allocator, n, buf);
	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(u->term, 8);
	ck_assert_uint_eq(u->seq, 1000002);
	STR_EQ(u->origin, "");
	ck_assert_int_eq(u->body_case, LOCKSTEP__EVENT__BODY_TERM_START);
	STR_EQ(u->term_start->node, "seq-2");

	ck_assert_int_eq(tape_event_peek(buf, n, &v), 0);
	ck_assert_uint_eq(v.term, 8);
	ck_assert_uint_eq(v.seq, 1000002);
	ck_assert_uint_eq(v.origin_len, 0);
	ck_assert_int_eq(v.body, TAPE_BODY_TERM_START);
	ck_assert_uint_eq(v.body_len, 2 + strlen(node));
	ck_assert_int_eq(memcmp(v.body_data, "\x0a\x05seq-2", v.body_len), 0);
}
END_TEST

START_TEST(control_messages_round_trip)
{
	Lockstep__ControlReply r = LOCKSTEP__CONTROL_REPLY__INIT, *u;
	Lockstep__Counter c1 = LOCKSTEP__COUNTER__INIT, c2 = LOCKSTEP__COUNTER__INIT;
	Lockstep__Counter *cs[] = { &c1, &c2 };
	Lockstep__Histogram h = LOCKSTEP__HISTOGRAM__INIT, *hs[] = { &h };
	uint8_t buf[512];
	size_t n;

	c1.name = (char *)"rx";
	c1.value = 10;
	c2.name = (char *)"tx";
	c2.value = UINT64_MAX;
	h.name = (char *)"latency";
	h.count = 3;
	h.p50 = 1;
	h.max = 9;
	r.error = -ENOENT;
	r.role = (char *)"primary";
	r.n_counters = 2;
	r.counters = cs;
	r.n_histograms = 1;
	r.histograms = hs;
	r.partition = 4;
	n = lockstep__control_reply__pack(&r, buf);
	u = lockstep__control_reply__unpack(&arena.allocator, n, buf);
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->error, -ENOENT);
	STR_EQ(u->role, "primary");
	ck_assert_uint_eq(u->n_counters, 2);
	STR_EQ(u->counters[1]->name, "tx");
	ck_assert_uint_eq(u->counters[1]->value, UINT64_MAX);
	ck_assert_uint_eq(u->n_histograms, 1);
	ck_assert_uint_eq(u->histograms[0]->max, 9);
	ck_assert_uint_eq(u->partition, 4);
}
END_TEST

/* --- the arena ------------------------------------------------------------------------ */

START_TEST(arena_100k_events_no_growth)
{
	struct cmd_store st;
	Lockstep__Event e = LOCKSTEP__EVENT__INIT;
	struct mallinfo2 before, after;
	uint8_t buf[512];
	size_t n, high = 0;
	unsigned ok = 0, grew = 0;

	e.term = 3;
	e.seq = 1;
	e.origin = (char *)"gw-a";
	e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
	e.command = make_command(&st, 0);
	n = lockstep__event__pack(&e, buf);

	before = mallinfo2();
	for (unsigned i = 0; i < 100000; i++) {
		Lockstep__Event *u;

		arena_reset(&arena);
		u = lockstep__event__unpack(&arena.allocator, n, buf);
		ok += u != NULL && u->command->new_order->shares == 100;
		if (i == 0)
			high = arena.high_water;
		grew += arena.high_water != high;
	}
	after = mallinfo2();
	ck_assert_uint_eq(ok, 100000);
	ck_assert_uint_eq(grew, 0);
	ck_assert_uint_gt(high, 0);
	ck_assert_uint_lt(high, 4096); /* one event needs well under a page */
	ck_assert_uint_eq(arena.cap, 1 << 20);
	/* protobuf-c took nothing from malloc */
	ck_assert_uint_eq(after.uordblks, before.uordblks);
}
END_TEST

START_TEST(arena_full_fails_cleanly)
{
	struct arena small;
	struct cmd_store st;
	Lockstep__Event e = LOCKSTEP__EVENT__INIT;
	uint8_t buf[512];
	size_t n;
	unsigned ok = 0;

	ck_assert_int_eq(arena_init(&small, 2048), 0);
	e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
	e.command = make_command(&st, 0);
	n = lockstep__event__pack(&e, buf);
	/* without a reset, the arena fills up and unpack says NULL */
	for (int i = 0; i < 100; i++)
		ok += lockstep__event__unpack(&small.allocator, n, buf) != NULL;
	ck_assert_uint_gt(ok, 0);
	ck_assert_uint_lt(ok, 100);
	ck_assert_uint_le(small.used, small.cap);
	arena_reset(&small);
	ck_assert_ptr_nonnull(lockstep__event__unpack(&small.allocator, n, buf));
	arena_fini(&small);
}
END_TEST

/* --- unknown fields ----------------------------------------------------------------------- */

START_TEST(unknown_fields_preserved)
{
	struct cmd_store st;
	Lockstep__Command *u;
	uint8_t buf[512], again[512];
	size_t n = pack_command(make_command(&st, 1), buf, sizeof(buf)), base = n;
	/* field 99 varint 300, field 100 bytes "xyz", field 101 fixed32,
	 * field 102 fixed64: a newer node's additions */
	static const uint8_t extra[] = {
		0x98, 0x06, 0xac, 0x02,				/* 99: 300 */
		0xa2, 0x06, 0x03, 'x', 'y', 'z',		/* 100: "xyz" */
		0xad, 0x06, 1, 2, 3, 4,				/* 101: fixed32 */
		0xb1, 0x06, 1, 2, 3, 4, 5, 6, 7, 8,		/* 102: fixed64 */
	};

	memcpy(buf + n, extra, sizeof(extra));
	n += sizeof(extra);
	u = lockstep__command__unpack(&arena.allocator, n, buf);
	ck_assert_ptr_nonnull(u);
	check_command_eq(&st.c, u);
	ck_assert_uint_eq(u->base.n_unknown_fields, 4);
	ck_assert_uint_eq(u->base.unknown_fields[0].tag, 99);
	ck_assert_uint_eq(u->base.unknown_fields[1].tag, 100);
	ck_assert_uint_eq(u->base.unknown_fields[1].wire_type, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
	/* packed again, they come back byte for byte (after the known ones) */
	ck_assert_uint_eq(pack_command(u, again, sizeof(again)), n);
	ck_assert_int_eq(memcmp(buf, again, n), 0);
	ck_assert_uint_gt(n, base);
}
END_TEST

START_TEST(unknown_fields_in_event_skipped_by_peek)
{
	/* term 5, unknown 20 varint, origin "g", unknown 21 bytes, unknown 22
	 * fixed32, unknown 23 fixed64, seq 6, an unknown field number 0 in two
	 * bytes (protobuf-c skips it too), an empty command */
	static const uint8_t ev[] = {
		0x08, 0x05, 0xa0, 0x01, 0x80, 0x01, 0x22, 0x01, 'g', 0xaa, 0x01, 0x02, 'h',
		'i',  0xb5, 0x01, 1,	2,    3,    4,	  0xb9, 0x01, 1,   2,	 3,    4,
		5,    6,    7,	  8,	0x10, 0x06, 0x80, 0x00, 0x07, 0x52, 0x00,
	};
	struct tape_event_view v;
	Lockstep__Event *u = lockstep__event__unpack(&arena.allocator, sizeof(ev), ev);

	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(u->base.n_unknown_fields, 5);
	ck_assert_int_eq(tape_event_peek(ev, sizeof(ev), &v), 0);
	ck_assert_uint_eq(v.term, 5);
	ck_assert_uint_eq(v.seq, 6);
	ck_assert_uint_eq(v.origin_len, 1);
	ck_assert_int_eq(v.origin[0], 'g');
	ck_assert_int_eq(v.body, TAPE_BODY_COMMAND);
	ck_assert_uint_eq(v.body_len, 0);
	LLVMFuzzerTestOneInput(ev, sizeof(ev));
}
END_TEST

/* --- malformed input --------------------------------------------------------------------- */

struct malformed {
	const char *what;
	uint8_t bytes[16];
	size_t len;
	int peek; /* tape_event_peek() on it */
	int event_ok, command_ok; /* what protobuf-c says */
};

#define B(...) { __VA_ARGS__ }, sizeof((uint8_t[]){ __VA_ARGS__ })

static const struct malformed malformed[] = {
	{ "varint value missing", B(0x08), -EBADMSG, 0, 0 },
	{ "varint cut in the middle", B(0x08, 0x80), -EBADMSG, 0, 0 },
	{ "varint of 11 bytes",
	  B(0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), -EOVERFLOW, 0, 0 },
	{ "tag cut in the middle", B(0x88, 0x80), -EBADMSG, 0, 0 },
	{ "tag of 6 bytes", B(0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01), -EOVERFLOW, 0, 0 },
	{ "tag 0", B(0x00, 0x01), -EPROTO, 0, 0 },
	{ "tag 0, wire type 7", B(0x07), -EPROTO, 0, 0 },
	{ "origin length missing", B(0x22), -EBADMSG, 0, 0 },
	{ "origin length cut", B(0x22, 0x80), -EBADMSG, 0, 0 },
	{ "origin past the end", B(0x22, 0x05, 'a', 'b'), -EBADMSG, 0, 0 },
	{ "length prefix of 6 bytes", B(0x22, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), -EOVERFLOW, 0, 0 },
	{ "length 2^32 - 1", B(0x22, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'), -EBADMSG, 0, 0 },
	{ "length 2^32", B(0x22, 0x80, 0x80, 0x80, 0x80, 0x10, 0x08, 0x01), -EBADMSG, 0, 0 },
	{ "command past the end", B(0x52, 0x10, 0x0a, 0x01, 'a'), -EBADMSG, 0, 0 },
	{ "group start", B(0x0b, 0x0c), -EPROTO, 0, 0 },
	{ "group end", B(0x0c), -EPROTO, 0, 0 },
	{ "wire type 6", B(0x0e, 0x00), -EPROTO, 0, 0 },
	{ "wire type 7", B(0x0f, 0x00), -EPROTO, 0, 0 },
	{ "term as fixed64", B(0x09, 1, 2, 3, 4, 5, 6, 7, 8), -EPROTO, 0, 0 },
	{ "term as fixed32", B(0x0d, 1, 2, 3, 4), -EPROTO, 0, 0 },
	{ "term as bytes", B(0x0a, 0x01, 0x00), -EPROTO, 0, 1 },
	{ "origin as varint", B(0x20, 0x01), -EPROTO, 0, 1 },
	{ "command as varint", B(0x50, 0x01), -EPROTO, 0, 0 },
	{ "term_start as fixed32", B(0x5d, 1, 2, 3, 4), -EPROTO, 0, 0 },
	{ "unknown fixed64 cut", B(0x79, 1, 2, 3), -EBADMSG, 0, 0 },
	{ "unknown fixed32 cut", B(0x7d, 1, 2), -EBADMSG, 0, 0 },
	{ "unknown varint field, value missing", B(0xf8, 0x07), -EBADMSG, 0, 0 },
	{ "valid field, then a cut one", B(0x08, 0x01, 0x10, 0x02, 0x18), -EBADMSG, 0, 0 },
	/* The body is not decoded by peek: these are its one difference. */
	{ "command with a malformed body", B(0x52, 0x02, 0x08, 0x01), 0, 0, 0 },
	{ "command whose field runs past it", B(0x52, 0x02, 0x0a, 0x05), 0, 0, 0 },
	{ "malformed command, then a good one", B(0x52, 0x01, 0x08, 0x52, 0x00), 0, 0, 0 },
	{ "term_start with a malformed body", B(0x5a, 0x01, 0x0a), 0, 0, 0 },
	/* Command-only malformations (the Event reads them as its fields) */
	{ "new order token past its end", B(0x52, 0x02, 0x0a, 0x05), 0, 0, 0 },
	{ "cancel shares cut", B(0x5a, 0x01, 0x10), 0, 0, 0 },
	{ "session kind cut (unknown field 14 to an Event)", B(0x72, 0x02, 0x08, 0x80), 0, 1, 0 },
	{ "new order with a group", B(0x52, 0x01, 0x0b), 0, 0, 0 },
	{ "user as varint", B(0x08, 0x01), 0, 1, 0 },
	{ "partition (timestamp) as bytes", B(0x1a, 0x00), -EPROTO, 0, 0 },
};

START_TEST(malformed_rejected)
{
	const struct malformed *m = &malformed[_i];
	struct tape_event_view v, untouched;
	uint8_t *copy = malloc(m->len); /* exact size: ASan sees any overread */
	Lockstep__Event *e;
	Lockstep__Command *c;

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, m->bytes, m->len);
	memset(&v, 0x5a, sizeof(v));
	memcpy(&untouched, &v, sizeof(v));
	arena_reset(&arena);
	e = lockstep__event__unpack(&arena.allocator, m->len, copy);
	c = lockstep__command__unpack(&arena.allocator, m->len, copy);
	ck_assert_msg((e != NULL) == m->event_ok, "%s: Event %s", m->what, e ? "accepted" : "refused");
	ck_assert_msg((c != NULL) == m->command_ok, "%s: Command %s", m->what,
		      c ? "accepted" : "refused");
	ck_assert_msg(tape_event_peek(copy, m->len, &v) == m->peek, "%s: peek %d, expected %d",
		      m->what, tape_event_peek(copy, m->len, &v), m->peek);
	if (m->peek)
		ck_assert_int_eq(memcmp(&v, &untouched, sizeof(v)), 0);
	LLVMFuzzerTestOneInput(copy, m->len);
	free(copy);
}
END_TEST

/* Every prefix of an Event: those that end on a field boundary are valid
 * Events with fewer fields; every other one is refused by both decoders. */
START_TEST(truncation_at_every_offset)
{
	struct cmd_store st;
	Lockstep__Event e = LOCKSTEP__EVENT__INIT;
	uint8_t full[512];
	size_t bounds[8], nb = 0, n;

	e.term = 300;
	e.seq = 1ull << 40;
	e.timestamp = UINT64_MAX;
	e.origin = (char *)"gateway-0001";
	e.origin_seq = 1;
	e.commit = 128;
	e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
	e.command = make_command(&st, 2);
	n = lockstep__event__pack(&e, full);
	/* field boundaries: encodings of the first k fields are prefixes */
	{
		Lockstep__Event p = LOCKSTEP__EVENT__INIT;
		uint8_t tmp[512];

		bounds[nb++] = lockstep__event__pack(&p, tmp);
		p.term = e.term;
		bounds[nb++] = lockstep__event__pack(&p, tmp);
		p.seq = e.seq;
		bounds[nb++] = lockstep__event__pack(&p, tmp);
		p.timestamp = e.timestamp;
		bounds[nb++] = lockstep__event__pack(&p, tmp);
		p.origin = e.origin;
		bounds[nb++] = lockstep__event__pack(&p, tmp);
		p.origin_seq = e.origin_seq;
		bounds[nb++] = lockstep__event__pack(&p, tmp);
		p.commit = e.commit;
		bounds[nb++] = lockstep__event__pack(&p, tmp);
		bounds[nb++] = n;
	}
	for (size_t len = 0; len <= n; len++) {
		uint8_t *copy = malloc(len ? len : 1);
		struct tape_event_view v;
		int boundary = 0;
		Lockstep__Event *u;

		for (size_t i = 0; i < nb; i++)
			boundary |= bounds[i] == len;
		memcpy(copy, full, len);
		arena_reset(&arena);
		u = lockstep__event__unpack(&arena.allocator, len, copy);
		ck_assert_msg((u != NULL) == boundary, "prefix %zu of %zu", len, n);
		ck_assert_int_eq(tape_event_peek(copy, len, &v) == 0, boundary);
		if (!boundary)
			ck_assert_int_eq(tape_event_peek(copy, len, &v), -EBADMSG);
		LLVMFuzzerTestOneInput(copy, len);
		free(copy);
	}
	ck_assert_uint_eq(nb, 8);
}
END_TEST

START_TEST(command_truncation_at_every_offset)
{
	struct cmd_store st;
	uint8_t full[512];
	size_t n = pack_command(make_command(&st, 0), full, sizeof(full));
	unsigned ok = 0;

	for (size_t len = 0; len < n; len++) {
		uint8_t *copy = malloc(len ? len : 1);

		memcpy(copy, full, len);
		arena_reset(&arena);
		/* user(0..8) firm(..14) partition(..16) are boundaries; the
		 * new order after them is cut everywhere else */
		ok += lockstep__command__unpack(&arena.allocator, len, copy) != NULL;
		LLVMFuzzerTestOneInput(copy, len);
		free(copy);
	}
	ck_assert_uint_eq(ok, 4); /* empty, user, user+firm, user+firm+partition */
}
END_TEST

START_TEST(random_bytes)
{
	uint8_t buf[96];

	for (int i = 0; i < 20000; i++) {
		size_t len = rnd() % sizeof(buf);

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rnd();
		LLVMFuzzerTestOneInput(buf, len);
	}
}
END_TEST

/* --- the embedded command: Event bytes + field 10 by hand --------------------------------- */

START_TEST(embedded_without_decoding)
{
	struct cmd_store st;
	Lockstep__Command *c = make_command(&st, 0), *got;
	Lockstep__Event e = LOCKSTEP__EVENT__INIT, *u;
	uint8_t cmd[512], by_hand[1024], by_pbc[1024], by_tape[1024];
	size_t clen, n, npbc, ntape;

	c->user = (char *)"a-login-long-enough-to-need-a-two-byte-command-length-"
			  "in-the-hand-made-event-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
	clen = pack_command(c, cmd, sizeof(cmd));

	/* the header fields by protobuf-c, with no body... */
	e.term = 2;
	e.seq = 99;
	e.timestamp = 1733212800000000000ull;
	e.origin = (char *)"gw-b";
	e.origin_seq = 17;
	e.commit = 98;
	n = lockstep__event__pack(&e, by_hand);
	/* ...then field 10, wire type 2: tag 0x52, varint length, the bytes */
	by_hand[n++] = 0x52;
	for (size_t v = clen; ; v >>= 7) {
		by_hand[n++] = (uint8_t)(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
		if (v < 0x80)
			break;
	}
	memcpy(by_hand + n, cmd, clen);
	n += clen;
	ck_assert_uint_gt(clen, 127); /* a two-byte length */

	u = lockstep__event__unpack(&arena.allocator, n, by_hand);
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->body_case, LOCKSTEP__EVENT__BODY_COMMAND);
	check_command_eq(c, u->command);
	ck_assert_uint_eq(u->seq, 99);

	/* the same bytes as protobuf-c packing the whole Event */
	e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
	e.command = c;
	npbc = lockstep__event__pack(&e, by_pbc);
	ck_assert_uint_eq(npbc, n);
	ck_assert_int_eq(memcmp(by_pbc, by_hand, n), 0);

	/* and as tape_event_encode() */
	ntape = tape_event_encode(by_tape, sizeof(by_tape), 2, 99, 1733212800000000000ull, "gw-b",
				  17, 98, cmd, clen);
	ck_assert_uint_eq(ntape, n);
	ck_assert_int_eq(memcmp(by_tape, by_hand, n), 0);

	/* peek finds the command's bytes where they are */
	{
		struct tape_event_view v;

		ck_assert_int_eq(tape_event_peek(by_hand, n, &v), 0);
		ck_assert_int_eq(v.body, TAPE_BODY_COMMAND);
		ck_assert_uint_eq(v.body_len, clen);
		ck_assert_ptr_eq(v.body_data, by_hand + n - clen);
		got = lockstep__command__unpack(&arena.allocator, v.body_len, v.body_data);
		ck_assert_ptr_nonnull(got);
		check_command_eq(c, got);
	}
}
END_TEST

/* --- tape_event_encode / tape_event_peek against protobuf-c -------------------------------- */

START_TEST(encode_matches_protobuf_c)
{
	for (int i = 0; i < 20000; i++) {
		struct cmd_store st;
		Lockstep__Event e = LOCKSTEP__EVENT__INIT, *u;
		struct tape_event_view v;
		char origin[400];
		uint8_t cmd[512], pbc[1024], tape[1024];
		size_t clen = 0, npbc, ntape, olen;
		int body = (int)(rnd() % 3);

		rnd_string(origin, rnd() % 8 == 0 ? sizeof(origin) : 20);
		olen = strlen(origin);
		e.term = rnd_u64();
		e.seq = rnd_u64();
		e.timestamp = rnd_u64();
		e.origin = origin;
		e.origin_seq = rnd_u64();
		e.commit = rnd_u64();
		if (body) {
			e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
			e.command = random_command(&st);
			clen = pack_command(e.command, cmd, sizeof(cmd));
		}
		npbc = lockstep__event__pack(&e, pbc);
		ntape = tape_event_encode(tape, sizeof(tape), e.term, e.seq, e.timestamp,
					  rnd() % 2 || olen ? origin : NULL, e.origin_seq, e.commit,
					  body ? cmd : NULL, clen);
		ck_assert_uint_eq(ntape, npbc);
		ck_assert_int_eq(memcmp(tape, pbc, npbc), 0);

		ck_assert_int_eq(tape_event_peek(tape, ntape, &v), 0);
		ck_assert_uint_eq(v.term, e.term);
		ck_assert_uint_eq(v.seq, e.seq);
		ck_assert_uint_eq(v.timestamp, e.timestamp);
		ck_assert_uint_eq(v.origin_seq, e.origin_seq);
		ck_assert_uint_eq(v.commit, e.commit);
		ck_assert_uint_eq(v.origin_len, olen);
		ck_assert_int_eq(memcmp(v.origin, origin, olen), 0);
		ck_assert_int_eq(v.body, body ? TAPE_BODY_COMMAND : TAPE_BODY_NONE);
		ck_assert_uint_eq(v.body_len, clen);
		if (body)
			ck_assert_int_eq(memcmp(v.body_data, cmd, clen), 0);

		arena_reset(&arena);
		u = lockstep__event__unpack(&arena.allocator, ntape, tape);
		ck_assert_ptr_nonnull(u);
		if (body)
			check_command_eq(e.command, u->command);
		if (i % 8 == 0)
			LLVMFuzzerTestOneInput(tape, ntape);
	}
}
END_TEST

START_TEST(encode_needs_room)
{
	static const uint8_t cmd[] = { 0x18, 0x05 };
	uint8_t out[128];
	size_t need = tape_event_encode(out, sizeof(out), 1, 2, 3, "gw", 4, 5, cmd, sizeof(cmd));

	ck_assert_uint_eq(need, 2 + 2 + 2 + 4 + 2 + 2 + 4);
	for (size_t cap = 0; cap < need; cap++) {
		memset(out, 0xee, sizeof(out));
		ck_assert_uint_eq(tape_event_encode(out, cap, 1, 2, 3, "gw", 4, 5, cmd, sizeof(cmd)),
				  0);
		for (size_t i = 0; i < sizeof(out); i++)
			ck_assert_uint_eq(out[i], 0xee); /* untouched */
	}
	memset(out, 0xee, sizeof(out));
	ck_assert_uint_eq(tape_event_encode(out, need, 1, 2, 3, "gw", 4, 5, cmd, sizeof(cmd)), need);
	ck_assert_uint_eq(out[need], 0xee);
	/* an empty Event is zero bytes; an empty command is its tag and 0 */
	ck_assert_uint_eq(tape_event_encode(out, 0, 0, 0, 0, NULL, 0, 0, NULL, 0), 0);
	ck_assert_uint_eq(tape_event_encode(out, 2, 0, 0, 0, "", 0, 0, cmd, 0), 2);
	ck_assert_int_eq(memcmp(out, "\x52\x00", 2), 0);
	ck_assert_uint_le(need, TAPE_EVENT_OVERHEAD(2) + sizeof(cmd));
}
END_TEST

START_TEST(peek_empty_and_duplicates)
{
	/* term twice, origin twice, command then term_start then command:
	 * the last of each wins, as in protobuf-c */
	static const uint8_t dup[] = {
		0x08, 0x01, 0x22, 0x01, 'a', 0x08, 0x02, 0x22, 0x02, 'b', 'c',
		0x52, 0x02, 0x18, 0x07, 0x5a, 0x00, 0x52, 0x03, 0x0a, 0x01, 'u',
	};
	struct tape_event_view v;
	Lockstep__Event *u;

	ck_assert_int_eq(tape_event_peek(NULL, 0, &v), 0);
	ck_assert_uint_eq(v.term, 0);
	ck_assert_int_eq(v.body, TAPE_BODY_NONE);
	ck_assert_ptr_null(v.body_data);
	ck_assert_uint_eq(v.origin_len, 0);
	ck_assert_str_eq(v.origin, "");

	ck_assert_int_eq(tape_event_peek(dup, sizeof(dup), &v), 0);
	u = lockstep__event__unpack(&arena.allocator, sizeof(dup), dup);
	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(v.term, 2);
	ck_assert_uint_eq(u->term, 2);
	ck_assert_uint_eq(v.origin_len, 2);
	ck_assert_str_eq(u->origin, "bc");
	ck_assert_int_eq(v.body, TAPE_BODY_COMMAND);
	ck_assert_int_eq(u->body_case, LOCKSTEP__EVENT__BODY_COMMAND);
	ck_assert_uint_eq(v.body_len, 3);
	ck_assert_str_eq(u->command->user, "u");
	ck_assert_uint_eq(u->command->partition, 0); /* not merged with the first */
	LLVMFuzzerTestOneInput(dup, sizeof(dup));
}
END_TEST

START_TEST(mutated_events_agree)
{
	for (int i = 0; i < 20000; i++) {
		struct cmd_store st;
		Lockstep__Event e = LOCKSTEP__EVENT__INIT;
		uint8_t buf[640];
		size_t n;

		e.term = rnd_u64();
		e.seq = rnd_u64();
		e.origin = (char *)"gw";
		e.commit = rnd_u64();
		e.body_case = LOCKSTEP__EVENT__BODY_COMMAND;
		e.command = random_command(&st);
		n = lockstep__event__pack(&e, buf);
		for (int k = 1 + (int)(rnd() % 3); k > 0 && n; k--) {
			switch (rnd() % 4) {
			case 0: /* flip a byte */
				buf[rnd() % n] ^= (uint8_t)(1 + rnd() % 255);
				break;
			case 1: /* cut */
				n = rnd() % n;
				break;
			case 2: /* duplicate a slice at the end */
			{
				size_t from = rnd() % n, len = rnd() % (n - from + 1);

				if (n + len <= sizeof(buf)) {
					memmove(buf + n, buf + from, len);
					n += len;
				}
				break;
			}
			default: /* a random byte somewhere */
				buf[rnd() % n] = (uint8_t)rnd();
			}
		}
		LLVMFuzzerTestOneInput(buf, n);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, command_round_trip, 0, CMD_KINDS);
	tcase_add_test(tc, event_with_command_round_trip);
	tcase_add_test(tc, event_with_term_start_round_trip);
	tcase_add_test(tc, control_messages_round_trip);
	tcase_add_test(tc, arena_100k_events_no_growth);
	tcase_add_test(tc, arena_full_fails_cleanly);
	tcase_add_test(tc, unknown_fields_preserved);
	tcase_add_test(tc, unknown_fields_in_event_skipped_by_peek);
	tcase_add_loop_test(tc, malformed_rejected, 0, sizeof(malformed) / sizeof(malformed[0]));
	tcase_add_test(tc, truncation_at_every_offset);
	tcase_add_test(tc, command_truncation_at_every_offset);
	tcase_add_test(tc, random_bytes);
	tcase_add_test(tc, embedded_without_decoding);
	tcase_add_test(tc, encode_matches_protobuf_c);
	tcase_add_test(tc, encode_needs_room);
	tcase_add_test(tc, peek_empty_and_duplicates);
	tcase_add_test(tc, mutated_events_agree);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
