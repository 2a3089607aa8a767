/* Matcher checkpoints: the datagram's encoding (byte for byte), every way a
 * decode can refuse one, and the majority vote of matcher_checkpoint_vote. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "testutil.h"

static const struct matcher_checkpoint ck1 = {
	.partition = 7, .name = "matcher-1", .seq = 0x0102030405060708ull,
	.hash = 0xa1b2c3d4e5f60718ull,
};

START_TEST(encode_layout)
{
	uint8_t b[MATCHER_CKPT_LEN];
	static const uint8_t want[MATCHER_CKPT_LEN] = {
		'L', 'S', 'C', 'K', 0, 1, 0, 7, /* magic, version, partition */
		'm', 'a', 't', 'c', 'h', 'e', 'r', '-', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ',
		' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ',
		1, 2, 3, 4, 5, 6, 7, 8, /* seq */
		0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18, /* hash */
	};

	ck_assert_int_eq(matcher_checkpoint_encode(b, &ck1), MATCHER_CKPT_LEN);
	ck_assert_mem_eq(b, want, MATCHER_CKPT_LEN);
}
END_TEST

START_TEST(round_trip)
{
	struct matcher_checkpoint c = ck1, d;
	uint8_t b[MATCHER_CKPT_LEN];

	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), MATCHER_CKPT_LEN);
	memset(&d, 0x55, sizeof(d));
	ck_assert_int_eq(matcher_checkpoint_decode(b, sizeof(b), &d), 0);
	ck_assert_uint_eq(d.partition, 7);
	ck_assert_str_eq(d.name, "matcher-1");
	ck_assert_uint_eq(d.seq, c.seq);
	ck_assert_uint_eq(d.hash, c.hash);
	/* the longest name, inner spaces, the extreme partition */
	memset(c.name, 'x', MATCHER_CKPT_NAME_LEN);
	c.name[3] = ' ';
	c.name[MATCHER_CKPT_NAME_LEN] = '\0';
	c.partition = 65535;
	c.seq = 1;
	c.hash = 0;
	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), MATCHER_CKPT_LEN);
	ck_assert_int_eq(matcher_checkpoint_decode(b, sizeof(b), &d), 0);
	ck_assert_str_eq(d.name, c.name);
	ck_assert_uint_eq(d.partition, 65535);
	ck_assert_uint_eq(d.seq, 1);
	ck_assert_uint_eq(d.hash, 0);
}
END_TEST

START_TEST(encode_refuses)
{
	struct matcher_checkpoint c = ck1;
	uint8_t b[MATCHER_CKPT_LEN];

	c.name[0] = '\0';
	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), -EINVAL);
	strcpy(c.name, "trailing ");
	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), -EINVAL);
	strcpy(c.name, "tab\there");
	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), -EINVAL);
	strcpy(c.name, "ok");
	c.partition = 65536;
	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), -EINVAL);
	c.partition = 0;
	c.seq = 0;
	ck_assert_int_eq(matcher_checkpoint_encode(b, &c), -EINVAL);
}
END_TEST

START_TEST(decode_refuses)
{
	struct matcher_checkpoint d, before;
	uint8_t b[MATCHER_CKPT_LEN + 1], x[MATCHER_CKPT_LEN];

	ck_assert_int_eq(matcher_checkpoint_encode(b, &ck1), MATCHER_CKPT_LEN);
	memset(&d, 0x5a, sizeof(d));
	before = d;
	ck_assert_int_eq(matcher_checkpoint_decode(b, MATCHER_CKPT_LEN - 1, &d), -EMSGSIZE);
	ck_assert_int_eq(matcher_checkpoint_decode(b, MATCHER_CKPT_LEN + 1, &d), -EMSGSIZE);
	ck_assert_int_eq(matcher_checkpoint_decode(b, 0, &d), -EMSGSIZE);
	memcpy(x, b, sizeof(x));
	x[0] = 'X';
	ck_assert_int_eq(matcher_checkpoint_decode(x, sizeof(x), &d), -EBADMSG);
	memcpy(x, b, sizeof(x));
	x[5] = 2;
	ck_assert_int_eq(matcher_checkpoint_decode(x, sizeof(x), &d), -EPROTONOSUPPORT);
	memcpy(x, b, sizeof(x));
	memset(x + 8, ' ', MATCHER_CKPT_NAME_LEN); /* no name */
	ck_assert_int_eq(matcher_checkpoint_decode(x, sizeof(x), &d), -EBADMSG);
	memcpy(x, b, sizeof(x));
	x[10] = 0; /* a NUL inside the name */
	ck_assert_int_eq(matcher_checkpoint_decode(x, sizeof(x), &d), -EBADMSG);
	memcpy(x, b, sizeof(x));
	x[9] = 0x80;
	ck_assert_int_eq(matcher_checkpoint_decode(x, sizeof(x), &d), -EBADMSG);
	memcpy(x, b, sizeof(x));
	memset(x + 40, 0, 8); /* seq 0 */
	ck_assert_int_eq(matcher_checkpoint_decode(x, sizeof(x), &d), -EBADMSG);
	/* untouched on failure */
	ck_assert_mem_eq(&d, &before, sizeof(d));
}
END_TEST

START_TEST(vote_three)
{
	uint64_t maj = 0, o[4] = { 0 };

	/* alone of three: no majority yet */
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 0, 3, &maj), MATCHER_VOTE_PENDING);
	o[0] = 5;
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 1, 3, &maj), MATCHER_VOTE_AGREED);
	ck_assert_uint_eq(maj, 5);
	/* one other, different: nobody has two */
	o[0] = 6;
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 1, 3, &maj), MATCHER_VOTE_PENDING);
	/* two others agree on another value: outvoted */
	o[1] = 6;
	maj = 0;
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 2, 3, &maj), MATCHER_VOTE_DIVERGED);
	ck_assert_uint_eq(maj, 6);
	/* the odd one out is the other: still agreed */
	o[0] = 5;
	o[1] = 6;
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 2, 3, NULL), MATCHER_VOTE_AGREED);
	/* three different values: no majority */
	o[0] = 6;
	o[1] = 7;
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 2, 3, &maj), MATCHER_VOTE_PENDING);
}
END_TEST

START_TEST(vote_counts)
{
	uint64_t maj = 0, o[8] = { 9, 9, 9, 9, 9, 9, 9, 9 };

	/* replicas = 1: never outvoted, always agreed */
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 0, 1, &maj), MATCHER_VOTE_AGREED);
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 2, 1, &maj), MATCHER_VOTE_AGREED);
	/* two replicas: both must agree; a disagreement decides nothing */
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 1, 2, &maj), MATCHER_VOTE_PENDING);
	/* more voters than replicas: never diverged */
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 3, 3, &maj), MATCHER_VOTE_PENDING);
	/* five: three others on 9 outvote, two do not */
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 2, 5, &maj), MATCHER_VOTE_PENDING);
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 3, 5, &maj), MATCHER_VOTE_DIVERGED);
	ck_assert_uint_eq(maj, 9);
	o[0] = 5;
	o[1] = 5;
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 4, 5, &maj), MATCHER_VOTE_AGREED);
	/* 0 replicas is no configuration */
	ck_assert_int_eq(matcher_checkpoint_vote(5, o, 0, 0, &maj), MATCHER_VOTE_PENDING);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("checkpoint");
	TCase *tc = tcase_create("checkpoint");

	tcase_add_test(tc, encode_layout);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, encode_refuses);
	tcase_add_test(tc, decode_refuses);
	tcase_add_test(tc, vote_three);
	tcase_add_test(tc, vote_counts);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
