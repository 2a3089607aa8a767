/* The matcher's hand decoder of the tape's Command (matcher/command.c)
 * against protobuf-c's unpack and convert_command(), the reference: equal
 * on every Command a gateway can send (random ones of every body, strings
 * of every length up to one past their field), and the wire rules it keeps
 * on what no gateway sends. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "convert.h"
#include "lockstep.pb-c.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A random string of 0..max characters (sometimes empty, sometimes one
 * too long for its field). */
static char *rstr(char *buf, size_t max)
{
	size_t n = rnd() % (max + 2);

	for (size_t i = 0; i < n; i++)
		buf[i] = (char)('A' + rnd() % 26);
	buf[n] = '\0';
	return buf;
}

static uint32_t ru32(void)
{
	switch (rnd() % 4) {
	case 0:
		return 0;
	case 1:
		return (uint32_t)(rnd() % 128);
	default:
		return (uint32_t)rnd();
	}
}

struct strings {
	char s[6][32];
};

/* A random Command into c (its strings in st), with one of the five bodies. */
static void random_command(Lockstep__Command *c, Lockstep__NewOrder *no, Lockstep__CancelOrder *co,
			   Lockstep__ReplaceOrder *ro, Lockstep__ModifyOrder *mo,
			   Lockstep__SessionEvent *se, struct strings *st)
{
	lockstep__command__init(c);
	c->user = rstr(st->s[0], 6);
	c->firm = rstr(st->s[1], 4);
	c->partition = ru32();
	switch (rnd() % 5) {
	case 0:
		lockstep__new_order__init(no);
		no->token = rstr(st->s[2], 14);
		no->symbol = rstr(st->s[3], 8);
		no->firm = rstr(st->s[4], 4);
		no->side = ru32(), no->shares = ru32(), no->price = ru32(), no->tif = ru32();
		no->display = ru32(), no->capacity = ru32(), no->min_qty = ru32();
		no->iso = ru32(), no->cross_type = ru32(), no->customer_type = ru32();
		c->body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
		c->new_order = no;
		break;
	case 1:
		lockstep__cancel_order__init(co);
		co->token = rstr(st->s[2], 14);
		co->shares = ru32();
		c->body_case = LOCKSTEP__COMMAND__BODY_CANCEL;
		c->cancel = co;
		break;
	case 2:
		lockstep__replace_order__init(ro);
		ro->existing_token = rstr(st->s[2], 14);
		ro->replacement_token = rstr(st->s[3], 14);
		ro->shares = ru32(), ro->price = ru32(), ro->tif = ru32(), ro->display = ru32();
		ro->iso = ru32(), ro->min_qty = ru32();
		c->body_case = LOCKSTEP__COMMAND__BODY_REPLACE;
		c->replace = ro;
		break;
	case 3:
		lockstep__modify_order__init(mo);
		mo->token = rstr(st->s[2], 14);
		mo->side = ru32(), mo->shares = ru32();
		c->body_case = LOCKSTEP__COMMAND__BODY_MODIFY;
		c->modify = mo;
		break;
	default:
		lockstep__session_event__init(se);
		se->kind = (Lockstep__SessionEvent__Kind)(rnd() % 4);
		c->body_case = LOCKSTEP__COMMAND__BODY_SESSION;
		c->session = se;
		break;
	}
}

/* Both decoders on buf: the same verdict, and the same command. */
static void expect_same(const uint8_t *buf, size_t len)
{
	Lockstep__Command *ref = lockstep__command__unpack(NULL, len, buf);
	struct engine_cmd a, b;
	uint32_t part;
	int ra, rb;

	ck_assert_ptr_nonnull(ref);
	memset(&a, 0, sizeof(a));
	ra = convert_command(ref, &a);
	rb = command_decode(buf, len, &b, &part);
	ck_assert_int_eq(ra, rb);
	if (ra == 0) {
		ck_assert_mem_eq(&a, &b, sizeof(a));
		ck_assert_uint_eq(part, ref->partition);
	}
	lockstep__command__free_unpacked(ref, NULL);
}

START_TEST(random_commands_decode_as_protobuf_c)
{
	Lockstep__Command c;
	Lockstep__NewOrder no;
	Lockstep__CancelOrder co;
	Lockstep__ReplaceOrder ro;
	Lockstep__ModifyOrder mo;
	Lockstep__SessionEvent se;
	struct strings st;
	uint8_t buf[512];
	int decoded = 0;

	for (int i = 0; i < 50000; i++) {
		size_t len;
		struct engine_cmd e;
		uint32_t part;

		random_command(&c, &no, &co, &ro, &mo, &se, &st);
		len = lockstep__command__pack(&c, buf);
		expect_same(buf, len);
		decoded += command_decode(buf, len, &e, &part) == 0;
	}
	/* most fit their fields; some are one character too long */
	ck_assert_int_gt(decoded, 20000);
	ck_assert_int_lt(decoded, 45000);
}
END_TEST

/* A Command with user "U1", a Cancel of token "T" for 5 shares, partition 2. */
static const uint8_t cancel_cmd[] = {
	0x0a, 2, 'U', '1', /* 1: user */
	0x18, 2, /* 3: partition */
	0x5a, 5, 0x0a, 1, 'T', 0x10, 5, /* 11: cancel { 1: token, 2: shares } */
};

START_TEST(wire_rules)
{
	uint8_t buf[64];
	struct engine_cmd e;
	uint32_t part;
	size_t n = sizeof(cancel_cmd);

	ck_assert_int_eq(command_decode(cancel_cmd, n, &e, &part), 0);
	ck_assert_int_eq(e.kind, ENGINE_CANCEL);
	ck_assert_str_eq(e.user, "U1");
	ck_assert_str_eq(e.u.cancel.token, "T");
	ck_assert_uint_eq(e.u.cancel.shares, 5);
	ck_assert_uint_eq(part, 2);
	expect_same(cancel_cmd, n);
	/* unknown fields of every wire type are skipped */
	memcpy(buf, cancel_cmd, n);
	memcpy(buf + n, (const uint8_t[]){ 0xa0, 0x06, 7, /* 100: varint */
					   0xaa, 0x06, 2, 'x', 'y', /* 101: bytes */
					   0xb5, 0x06, 1, 2, 3, 4, /* 102: fixed32 */
					   0xb9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8 }, /* 103: fixed64 */
	       24);
	ck_assert_int_eq(command_decode(buf, n + 24, &e, &part), 0);
	ck_assert_str_eq(e.u.cancel.token, "T");
	expect_same(buf, n + 24);
	/* a scalar given twice: the last value */
	memcpy(buf + n, (const uint8_t[]){ 0x18, 7 }, 2);
	ck_assert_int_eq(command_decode(buf, n + 2, &e, &part), 0);
	ck_assert_uint_eq(part, 7);
	expect_same(buf, n + 2);
	/* every truncation is refused, none read past the end */
	for (size_t k = 0; k < n; k++)
		ck_assert_int_eq(command_decode(cancel_cmd, k, &e, &part), -1);
	/* no body */
	ck_assert_int_eq(command_decode(cancel_cmd, 6, &e, &part), -1);
	/* a known field of the wrong wire type: user as a varint */
	memcpy(buf, cancel_cmd, n);
	buf[0] = 0x08;
	ck_assert_int_eq(command_decode(buf, n, &e, &part), -1);
	/* a group (wire type 3) */
	memcpy(buf + n, (const uint8_t[]){ 0xa3, 0x06 }, 2);
	memcpy(buf, cancel_cmd, n);
	ck_assert_int_eq(command_decode(buf, n + 2, &e, &part), -1);
	/* a varint of 11 bytes */
	memset(buf, 0x80, 11);
	ck_assert_int_eq(command_decode(buf, 11, &e, &part), -1);
	/* a string read to its first NUL, as protobuf-c's copy is */
	memcpy(buf, cancel_cmd, n);
	buf[3] = '\0';
	ck_assert_int_eq(command_decode(buf, n, &e, &part), 0);
	ck_assert_str_eq(e.user, "U");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("command");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, random_commands_decode_as_protobuf_c);
	tcase_add_test(tc, wire_rules);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
