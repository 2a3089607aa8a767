/* MoldUDP64: builders round-trip through the parser, every error is reached,
 * boundaries (count 0xFFFE, maximal packet, empty blocks, session names). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moldudp64.h"
#include "testutil.h"

/* A 20-byte header: session "SESSION1", sequence number seq, count. */
#define SEQ8(s)                                                                            \
	(uint8_t)((uint64_t)(s) >> 56), (uint8_t)((uint64_t)(s) >> 48),                    \
		(uint8_t)((uint64_t)(s) >> 40), (uint8_t)((uint64_t)(s) >> 32),            \
		(uint8_t)((uint64_t)(s) >> 24), (uint8_t)((uint64_t)(s) >> 16),            \
		(uint8_t)((uint64_t)(s) >> 8), (uint8_t)(s)
#define SESS 'S', 'E', 'S', 'S', 'I', 'O', 'N', '1', ' ', ' '
#define HDR(seq, count) SESS, SEQ8(seq), (uint8_t)((count) >> 8), (uint8_t)(count)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static struct mold_session session(const char *name)
{
	struct mold_session s;

	ck_assert_int_eq(mold_session_set(&s, name), MOLD_OK);
	return s;
}

static int seen_err[16]; /* which mold_err values the tests produced */

static void note(int err)
{
	if (err <= 0 && err > -16)
		seen_err[-err] = 1;
}

/* --- session names ---------------------------------------------------------- */

START_TEST(session_names_0_to_10)
{
	const char *full = "ABCDEFGHIJ";

	for (size_t n = 0; n <= MOLD_SESSION_LEN; n++) {
		char name[16], back[MOLD_SESSION_LEN + 1];
		struct mold_session s;

		memcpy(name, full, n);
		name[n] = '\0';
		ck_assert_int_eq(mold_session_set(&s, name), MOLD_OK);
		ck_assert_mem_eq(s.name, full, n);
		for (size_t i = n; i < MOLD_SESSION_LEN; i++)
			ck_assert_int_eq(s.name[i], ' ');
		mold_session_str(&s, back);
		ck_assert_str_eq(back, name);
	}
}
END_TEST

START_TEST(session_names_rejected)
{
	static const char *bad[] = {
		"ABCDEFGHIJK", "ABCDEFGHIJKLMNOP", "AB\tC", "\x01", "A\x7f", "caf\xc3\xa9",
		"\x80", "line\n", "\037ABC",
	};
	struct mold_session s, before;

	memset(&s, 'x', sizeof(s));
	before = s;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = mold_session_set(&s, bad[i]);

		note(err);
		ck_assert_int_eq(err, MOLD_E_BAD_SESSION_NAME);
		ck_assert_mem_eq(&s, &before, sizeof(s));
	}
	/* Printable punctuation and inner spaces are fine. */
	ck_assert_int_eq(mold_session_set(&s, "a b~!{}"), MOLD_OK);
}
END_TEST

START_TEST(session_str_trims_only_trailing_spaces)
{
	struct mold_session s;
	char out[MOLD_SESSION_LEN + 1];

	memcpy(s.name, "  AB  C   ", MOLD_SESSION_LEN);
	mold_session_str(&s, out);
	ck_assert_str_eq(out, "  AB  C");
	memcpy(s.name, "          ", MOLD_SESSION_LEN);
	mold_session_str(&s, out);
	ck_assert_str_eq(out, "");
	memcpy(s.name, "0123456789", MOLD_SESSION_LEN);
	mold_session_str(&s, out);
	ck_assert_str_eq(out, "0123456789");
}
END_TEST

/* --- round trips ------------------------------------------------------------- */

START_TEST(data_packet_round_trip)
{
	struct mold_session s = session("GW01");
	uint8_t buf[1500];
	struct mold_builder b;
	struct mold_packet pkt;
	struct mold_iter it;
	static const char *msgs[] = { "hello", "", "x", "a longer message block" };
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;
	size_t n;

	ck_assert_int_eq(mold_build_begin(&b, buf, sizeof(buf), &s, 1000), MOLD_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(mold_build_add(&b, msgs[i], (uint16_t)strlen(msgs[i])), MOLD_OK);
	n = mold_build_end(&b);
	ck_assert_uint_eq(n, 20 + 4 * 2 + 5 + 0 + 1 + 22);
	/* The header on the wire. */
	ck_assert_mem_eq(buf, "GW01      ", 10);
	ck_assert_mem_eq(buf + 10, "\0\0\0\0\0\0\x03\xe8\0\x04", 10);

	ck_assert_int_eq(mold_parse(buf, n, &s, 0, &pkt), MOLD_OK);
	ck_assert_int_eq(pkt.kind, MOLD_DATA);
	ck_assert_uint_eq(pkt.seq, 1000);
	ck_assert_uint_eq(pkt.count, 4);
	ck_assert_ptr_eq(pkt.blocks, buf + 20);
	ck_assert_uint_eq(pkt.blocks_len, n - 20);
	ck_assert_mem_eq(pkt.session.name, s.name, 10);

	mold_iter_init(&it, &pkt);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
		ck_assert_uint_eq(seq, 1000 + (uint64_t)i);
		ck_assert_uint_eq(len, strlen(msgs[i]));
		ck_assert(data > buf && data + len <= buf + n); /* zero copy */
		ck_assert(memcmp(data, msgs[i], len) == 0);
	}
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 0);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 0);
}
END_TEST

START_TEST(control_packets_round_trip)
{
	struct mold_session s = session("TAPE");
	uint8_t buf[MOLD_HEADER_LEN];
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;

	ck_assert_uint_eq(mold_build_heartbeat(buf, &s, 42), 20);
	ck_assert_mem_eq(buf + 18, "\0\0", 2);
	ck_assert_int_eq(mold_parse(buf, 20, &s, 0, &pkt), MOLD_OK);
	ck_assert_int_eq(pkt.kind, MOLD_HEARTBEAT);
	ck_assert_uint_eq(pkt.seq, 42);
	ck_assert_uint_eq(pkt.count, 0);
	ck_assert_uint_eq(pkt.blocks_len, 0);
	mold_iter_init(&it, &pkt);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 0);

	ck_assert_uint_eq(mold_build_end_of_session(buf, &s, UINT64_MAX), 20);
	ck_assert_mem_eq(buf + 18, "\xff\xff", 2);
	ck_assert_int_eq(mold_parse(buf, 20, NULL, 0, &pkt), MOLD_OK);
	ck_assert_int_eq(pkt.kind, MOLD_END_OF_SESSION);
	ck_assert_uint_eq(pkt.seq, UINT64_MAX); /* control packets cannot wrap */
	ck_assert_uint_eq(pkt.count, 0);
	mold_iter_init(&it, &pkt);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 0);

	/* A builder that got no block writes a heartbeat. */
	struct mold_builder b;
	uint8_t hb[MOLD_HEADER_LEN];

	ck_assert_int_eq(mold_build_begin(&b, buf, sizeof(buf), &s, 7), MOLD_OK);
	ck_assert_uint_eq(mold_build_end(&b), 20);
	mold_build_heartbeat(hb, &s, 7);
	ck_assert_mem_eq(buf, hb, 20);
}
END_TEST

START_TEST(request_round_trip)
{
	struct mold_request r = { .session = session("GW7"), .seq = 123456789012345ull, .count = 77 };
	struct mold_request back;
	uint8_t buf[MOLD_REQUEST_LEN];

	ck_assert_uint_eq(mold_build_request(buf, &r), 20);
	ck_assert_mem_eq(buf, "GW7       ", 10);
	ck_assert_int_eq(mold_parse_request(buf, 20, &r.session, &back), MOLD_OK);
	ck_assert_mem_eq(back.session.name, r.session.name, 10);
	ck_assert_uint_eq(back.seq, r.seq);
	ck_assert_uint_eq(back.count, 77);
	/* The largest request that does not wrap. */
	r.count = 0xFFFF;
	r.seq = UINT64_MAX - 0xFFFF;
	mold_build_request(buf, &r);
	ck_assert_int_eq(mold_parse_request(buf, 20, NULL, &back), MOLD_OK);
	ck_assert_uint_eq(back.seq, UINT64_MAX - 0xFFFF);
	ck_assert_uint_eq(back.count, 0xFFFF);
}
END_TEST

START_TEST(reserve_commit_in_place)
{
	struct mold_session s = session("SEQ");
	uint8_t buf[64], ref[64];
	struct mold_builder b, r, before;
	struct mold_packet pkt;
	uint8_t *w;
	size_t n;

	ck_assert_int_eq(mold_build_begin(&b, buf, sizeof(buf), &s, 5), MOLD_OK);
	w = mold_build_reserve(&b, 30);
	ck_assert_ptr_eq(w, buf + 22);
	memcpy(w, "abc", 3);
	mold_build_commit(&b, 3); /* shorter than reserved */
	ck_assert_uint_eq(b.count, 1);
	/* A reservation never committed leaves nothing behind. */
	before = b;
	ck_assert_ptr_nonnull(mold_build_reserve(&b, 10));
	ck_assert_mem_eq(&b, &before, sizeof(b));
	/* Too big: NULL, builder unchanged. 64 - 25 - 2 = 37 bytes are left. */
	ck_assert_ptr_null(mold_build_reserve(&b, 38));
	ck_assert_mem_eq(&b, &before, sizeof(b));
	w = mold_build_reserve(&b, 37);
	ck_assert_ptr_nonnull(w);
	memset(w, 'z', 37);
	mold_build_commit(&b, 37);
	ck_assert_uint_eq(b.len, 64);
	ck_assert_ptr_null(mold_build_reserve(&b, 0));
	n = mold_build_end(&b);

	/* The same packet through mold_build_add. */
	uint8_t z[37];

	memset(z, 'z', sizeof(z));
	mold_build_begin(&r, ref, sizeof(ref), &s, 5);
	mold_build_add(&r, "abc", 3);
	mold_build_add(&r, z, sizeof(z));
	ck_assert_uint_eq(mold_build_end(&r), n);
	ck_assert_mem_eq(buf, ref, n);
	ck_assert_int_eq(mold_parse(buf, n, &s, 0, &pkt), MOLD_OK);
	ck_assert_uint_eq(pkt.count, 2);
}
END_TEST

START_TEST(builder_nospace_leaves_builder_unchanged)
{
	struct mold_session s = session("X");
	uint8_t buf[40], copy[40];
	struct mold_builder b, before;
	int err;

	memset(&b, 0x5a, sizeof(b));
	before = b;
	err = mold_build_begin(&b, buf, MOLD_HEADER_LEN - 1, &s, 1);
	note(err);
	ck_assert_int_eq(err, MOLD_E_NOSPACE);
	ck_assert_mem_eq(&b, &before, sizeof(b));

	/* Exactly the header: no block fits, not even an empty one. */
	ck_assert_int_eq(mold_build_begin(&b, buf, MOLD_HEADER_LEN, &s, 1), MOLD_OK);
	ck_assert_int_eq(mold_build_add(&b, "", 0), MOLD_E_NOSPACE);
	ck_assert_ptr_null(mold_build_reserve(&b, 0));

	/* 40 bytes: an 18-byte block fills it exactly. */
	ck_assert_int_eq(mold_build_begin(&b, buf, sizeof(buf), &s, 1), MOLD_OK);
	before = b;
	memcpy(copy, buf, sizeof(buf));
	ck_assert_int_eq(mold_build_add(&b, "0123456789abcdefghi", 19), MOLD_E_NOSPACE);
	ck_assert_mem_eq(&b, &before, sizeof(b));
	ck_assert_mem_eq(buf, copy, sizeof(buf));
	ck_assert_int_eq(mold_build_add(&b, "0123456789abcdefgh", 18), MOLD_OK);
	ck_assert_uint_eq(b.len, 40);
	ck_assert_int_eq(mold_build_add(&b, "", 0), MOLD_E_NOSPACE);
	ck_assert_uint_eq(mold_build_end(&b), 40);
}
END_TEST

/* --- boundaries -------------------------------------------------------------- */

START_TEST(count_0xfffe)
{
	struct mold_session s = session("BIG");
	size_t cap = MOLD_HEADER_LEN + 2 * (size_t)MOLD_MAX_COUNT + 2;
	uint8_t *buf = malloc(cap);
	struct mold_builder b, before;
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;
	size_t n;
	unsigned blocks = 0;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(mold_build_begin(&b, buf, cap, &s, 1), MOLD_OK);
	for (unsigned i = 0; i < MOLD_MAX_COUNT; i++)
		ck_assert_int_eq(mold_build_add(&b, NULL, 0), MOLD_OK);
	/* Room is left, but 0xFFFF would mean end of session. */
	before = b;
	ck_assert_int_eq(mold_build_add(&b, NULL, 0), MOLD_E_NOSPACE);
	ck_assert_ptr_null(mold_build_reserve(&b, 0));
	ck_assert_mem_eq(&b, &before, sizeof(b));
	n = mold_build_end(&b);
	ck_assert_uint_eq(n, cap - 2);
	ck_assert_mem_eq(buf + 18, "\xff\xfe", 2);

	/* Over a UDP datagram's size: only a caller's larger maximum takes it. */
	ck_assert_int_eq(mold_parse(buf, n, &s, 0, &pkt), MOLD_E_OVERSIZE);
	ck_assert_int_eq(mold_parse(buf, n, &s, n, &pkt), MOLD_OK);
	ck_assert_int_eq(pkt.kind, MOLD_DATA);
	ck_assert_uint_eq(pkt.count, 0xFFFE);
	mold_iter_init(&it, &pkt);
	while (mold_iter_next(&it, &seq, &data, &len)) {
		ck_assert_uint_eq(len, 0);
		blocks++;
	}
	ck_assert_uint_eq(blocks, 0xFFFE);
	ck_assert_uint_eq(seq, 0xFFFE);
	/* One block short. */
	ck_assert_int_eq(mold_parse(buf, n - 2, &s, n, &pkt), MOLD_E_BLOCK_HEADER);
	/* The last block number that does not wrap. */
	memset(buf + 10, 0xff, 6);
	buf[16] = 0x00;
	buf[17] = 0x01; /* seq = UINT64_MAX - 0xFFFE */
	ck_assert_int_eq(mold_parse(buf, n, &s, n, &pkt), MOLD_OK);
	buf[17] = 0x02;
	ck_assert_int_eq(mold_parse(buf, n, &s, n, &pkt), MOLD_E_SEQ_WRAP);
	free(buf);
}
END_TEST

START_TEST(maximal_packet)
{
	struct mold_session s = session("MAX");
	static uint8_t buf[MOLD_MAX_PACKET + 16], big[MOLD_MAX_PACKET];
	uint16_t blen = MOLD_MAX_PACKET - MOLD_HEADER_LEN - 2;
	struct mold_builder b;
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;
	size_t n;
	int err;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	ck_assert_int_eq(mold_build_begin(&b, buf, MOLD_MAX_PACKET, &s, 9), MOLD_OK);
	ck_assert_int_eq(mold_build_add(&b, big, blen + 1), MOLD_E_NOSPACE);
	ck_assert_int_eq(mold_build_add(&b, big, blen), MOLD_OK);
	n = mold_build_end(&b);
	ck_assert_uint_eq(n, MOLD_MAX_PACKET);
	ck_assert_int_eq(mold_parse(buf, n, &s, 0, &pkt), MOLD_OK);
	mold_iter_init(&it, &pkt);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
	ck_assert_uint_eq(len, blen);
	ck_assert(memcmp(data, big, blen) == 0);

	/* One byte more than a datagram holds. */
	ck_assert_int_eq(mold_build_begin(&b, buf, sizeof(buf), &s, 9), MOLD_OK);
	ck_assert_int_eq(mold_build_add(&b, big, blen + 1), MOLD_OK);
	n = mold_build_end(&b);
	err = mold_parse(buf, n, &s, 0, &pkt);
	note(err);
	ck_assert_int_eq(err, MOLD_E_OVERSIZE);
	ck_assert_int_eq(mold_parse(buf, n, &s, n, &pkt), MOLD_OK);
	ck_assert_int_eq(mold_parse(buf, n, &s, n - 1, &pkt), MOLD_E_OVERSIZE);

	/* The largest block length, 0xFFFF, in a caller-sized packet. */
	static uint8_t huge[MOLD_HEADER_LEN + 2 + 0xFFFF];
	uint8_t *w;

	ck_assert_int_eq(mold_build_begin(&b, huge, sizeof(huge), &s, 1), MOLD_OK);
	w = mold_build_reserve(&b, 0xFFFF);
	ck_assert_ptr_nonnull(w);
	memset(w, 0xab, 0xFFFF);
	mold_build_commit(&b, 0xFFFF);
	n = mold_build_end(&b);
	ck_assert_uint_eq(n, sizeof(huge));
	ck_assert_int_eq(mold_parse(huge, n, NULL, n, &pkt), MOLD_OK);
	mold_iter_init(&it, &pkt);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
	ck_assert_uint_eq(len, 0xFFFF);
	ck_assert_int_eq(mold_parse(huge, n - 1, NULL, n, &pkt), MOLD_E_BLOCK_PAST_END);
}
END_TEST

START_TEST(zero_length_blocks)
{
	static const uint8_t pkt_bytes[] = { HDR(1, 3), 0, 0, 0, 1, 'q', 0, 0 };
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;

	ck_assert_int_eq(mold_parse(pkt_bytes, sizeof(pkt_bytes), NULL, 0, &pkt), MOLD_OK);
	mold_iter_init(&it, &pkt);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
	ck_assert_uint_eq(seq, 1);
	ck_assert_uint_eq(len, 0);
	ck_assert_ptr_eq(data, pkt_bytes + 22);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
	ck_assert_uint_eq(seq, 2);
	ck_assert_uint_eq(len, 1);
	ck_assert_int_eq(data[0], 'q');
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
	ck_assert_uint_eq(seq, 3);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 0);
}
END_TEST

START_TEST(session_with_nonprintable_bytes_on_the_wire)
{
	/* The parser compares bytes; it does not judge the name. */
	uint8_t buf[] = { 0, 1, 2, 0xff, 'A', ' ', ' ', ' ', ' ', ' ', SEQ8(3), 0, 0 };
	struct mold_packet pkt;
	struct mold_session expect, other;
	char str[MOLD_SESSION_LEN + 1];

	memcpy(expect.name, buf, 10);
	memcpy(other.name, buf, 10);
	other.name[3] = (char)0xfe;
	ck_assert_int_eq(mold_parse(buf, sizeof(buf), &expect, 0, &pkt), MOLD_OK);
	ck_assert_mem_eq(pkt.session.name, buf, 10);
	ck_assert_int_eq(mold_parse(buf, sizeof(buf), &other, 0, &pkt), MOLD_E_SESSION);
	buf[0] = 'Z';
	buf[1] = 0;
	memcpy(expect.name, buf, 10);
	ck_assert_int_eq(mold_parse(buf, sizeof(buf), &expect, 0, &pkt), MOLD_OK);
	mold_session_str(&pkt.session, str);
	ck_assert_uint_eq(strlen(str), 1); /* stops at the NUL byte */
}
END_TEST

START_TEST(seq_wrap_boundaries)
{
	uint8_t ok1[] = { HDR(UINT64_MAX - 1, 1), 0, 0 };
	uint8_t bad1[] = { HDR(UINT64_MAX, 1), 0, 0 };
	uint8_t ok2[] = { HDR(UINT64_MAX - 2, 2), 0, 0, 0, 0 };
	uint8_t bad2[] = { HDR(UINT64_MAX - 1, 2), 0, 0, 0, 0 };
	uint8_t hb[] = { HDR(UINT64_MAX, 0) };
	struct mold_packet pkt;

	ck_assert_int_eq(mold_parse(ok1, sizeof(ok1), NULL, 0, &pkt), MOLD_OK);
	ck_assert_uint_eq(pkt.seq, UINT64_MAX - 1);
	ck_assert_int_eq(mold_parse(bad1, sizeof(bad1), NULL, 0, &pkt), MOLD_E_SEQ_WRAP);
	ck_assert_int_eq(mold_parse(ok2, sizeof(ok2), NULL, 0, &pkt), MOLD_OK);
	ck_assert_int_eq(mold_parse(bad2, sizeof(bad2), NULL, 0, &pkt), MOLD_E_SEQ_WRAP);
	ck_assert_int_eq(mold_parse(hb, sizeof(hb), NULL, 0, &pkt), MOLD_OK);
}
END_TEST

/* --- malformed inputs ---------------------------------------------------------- */

struct bad_packet {
	const char *what;
	uint8_t b[48];
	size_t len;
	int expect_session; /* compare against "SESSION1" */
	size_t max_len;
	int err;
};

static const struct bad_packet bad_packets[] = {
	{ "empty", { 0 }, 0, 0, 0, MOLD_E_TRUNC_HEADER },
	{ "one byte", { 'S' }, 1, 0, 0, MOLD_E_TRUNC_HEADER },
	{ "session only", { SESS }, 10, 0, 0, MOLD_E_TRUNC_HEADER },
	{ "cut in the sequence number", { HDR(1, 1) }, 14, 0, 0, MOLD_E_TRUNC_HEADER },
	{ "no count", { HDR(1, 1) }, 18, 0, 0, MOLD_E_TRUNC_HEADER },
	{ "half a count", { HDR(1, 1) }, 19, 0, 0, MOLD_E_TRUNC_HEADER },
	{ "short header, session checked after", { HDR(1, 1) }, 19, 1, 0, MOLD_E_TRUNC_HEADER },
	{ "count 1, no block", { HDR(1, 1) }, 20, 0, 0, MOLD_E_BLOCK_HEADER },
	{ "count 1, half a block length", { HDR(1, 1), 0 }, 21, 0, 0, MOLD_E_BLOCK_HEADER },
	{ "block of 5 with no data", { HDR(1, 1), 0, 5 }, 22, 0, 0, MOLD_E_BLOCK_PAST_END },
	{ "block of 5 with 4 bytes", { HDR(1, 1), 0, 5, 1, 2, 3, 4 }, 26, 0, 0,
	  MOLD_E_BLOCK_PAST_END },
	{ "block length 0xFFFF", { HDR(1, 1), 0xff, 0xff, 1 }, 23, 0, 0, MOLD_E_BLOCK_PAST_END },
	{ "count 2, second block missing", { HDR(1, 2), 0, 1, 'a' }, 23, 0, 0,
	  MOLD_E_BLOCK_HEADER },
	{ "count 2, second length cut", { HDR(1, 2), 0, 1, 'a', 0 }, 24, 0, 0,
	  MOLD_E_BLOCK_HEADER },
	{ "count 2, second block short", { HDR(1, 2), 0, 1, 'a', 0, 2, 'b' }, 26, 0, 0,
	  MOLD_E_BLOCK_PAST_END },
	{ "count 0xFFFE, one block", { HDR(1, 0xFFFE), 0, 0 }, 22, 0, 0, MOLD_E_BLOCK_HEADER },
	{ "one stray byte after the block", { HDR(1, 1), 0, 1, 'a', 'b' }, 24, 0, 0,
	  MOLD_E_COUNT_MISMATCH },
	{ "two blocks, count 1", { HDR(1, 1), 0, 1, 'a', 0, 1, 'b' }, 26, 0, 0,
	  MOLD_E_COUNT_MISMATCH },
	{ "zero-length blocks, count 1 of 3", { HDR(1, 1), 0, 0, 0, 0, 0, 0 }, 26, 0, 0,
	  MOLD_E_COUNT_MISMATCH },
	{ "heartbeat with a byte", { HDR(1, 0), 0 }, 21, 0, 0, MOLD_E_CONTROL_DATA },
	{ "heartbeat with a block", { HDR(1, 0), 0, 1, 'a' }, 23, 0, 0, MOLD_E_CONTROL_DATA },
	{ "end of session with a block", { HDR(1, 0xFFFF), 0, 0 }, 22, 0, 0,
	  MOLD_E_CONTROL_DATA },
	{ "other session", { 'S', 'E', 'S', 'S', 'I', 'O', 'N', '2', ' ', ' ', SEQ8(1), 0, 0 }, 20,
	  1, 0, MOLD_E_SESSION },
	{ "session case differs", { 's', 'E', 'S', 'S', 'I', 'O', 'N', '1', ' ', ' ', SEQ8(1), 0,
				    0 },
	  20, 1, 0, MOLD_E_SESSION },
	{ "session padded with NULs", { 'S', 'E', 'S', 'S', 'I', 'O', 'N', '1', 0, 0, SEQ8(1), 0,
					0 },
	  20, 1, 0, MOLD_E_SESSION },
	{ "session left-padded", { ' ', ' ', 'S', 'E', 'S', 'S', 'I', 'O', 'N', '1', SEQ8(1), 0,
				   0 },
	  20, 1, 0, MOLD_E_SESSION },
	{ "other session, bad blocks too", { 'X', 'E', 'S', 'S', 'I', 'O', 'N', '1', ' ', ' ',
					     SEQ8(1), 0, 1 },
	  20, 1, 0, MOLD_E_SESSION },
	{ "seq UINT64_MAX, count 1", { HDR(UINT64_MAX, 1), 0, 0 }, 22, 0, 0, MOLD_E_SEQ_WRAP },
	{ "seq UINT64_MAX - 1, count 2", { HDR(UINT64_MAX - 1, 2), 0, 0, 0, 0 }, 24, 0, 0,
	  MOLD_E_SEQ_WRAP },
	{ "wrap is found before the blocks", { HDR(UINT64_MAX, 3) }, 20, 0, 0, MOLD_E_SEQ_WRAP },
	{ "longer than the caller's 23", { HDR(1, 1), 0, 2, 'a', 'b' }, 24, 0, 23,
	  MOLD_E_OVERSIZE },
	{ "oversize before truncation", { HDR(1, 1) }, 15, 0, 10, MOLD_E_OVERSIZE },
	{ "oversize before session", { HDR(1, 0) }, 20, 1, 19, MOLD_E_OVERSIZE },
};

START_TEST(malformed_packets)
{
	struct mold_session expect = session("SESSION1");
	const struct bad_packet *c = &bad_packets[_i];
	struct mold_packet out, before;
	int err;

	memset(&out, 0xa5, sizeof(out));
	before = out;
	err = mold_parse(c->b, c->len, c->expect_session ? &expect : NULL, c->max_len, &out);
	note(err);
	ck_assert_msg(err == c->err, "%s: got %d (%s), want %d (%s)", c->what, err,
		      mold_strerror(err), c->err, mold_strerror(c->err));
	ck_assert_msg(memcmp(&out, &before, sizeof(out)) == 0, "%s: output touched", c->what);
	/* The same bytes at the end of a larger buffer, so ASan sees any
	 * read past them. */
	uint8_t *copy = malloc(c->len ? c->len : 1);

	memcpy(copy, c->b, c->len);
	ck_assert_int_eq(mold_parse(copy, c->len, c->expect_session ? &expect : NULL, c->max_len,
				    &out),
			 c->err);
	free(copy);
}
END_TEST

struct bad_request {
	const char *what;
	uint8_t b[48];
	size_t len;
	int expect_session;
	int err;
};

static const struct bad_request bad_requests[] = {
	{ "empty", { 0 }, 0, 0, MOLD_E_REQUEST_LEN },
	{ "one byte", { 'S' }, 1, 0, MOLD_E_REQUEST_LEN },
	{ "session cut", { SESS }, 9, 0, MOLD_E_REQUEST_LEN },
	{ "session only", { SESS }, 10, 0, MOLD_E_REQUEST_LEN },
	{ "sequence cut", { HDR(5, 1) }, 17, 0, MOLD_E_REQUEST_LEN },
	{ "no count", { HDR(5, 1) }, 18, 0, MOLD_E_REQUEST_LEN },
	{ "half a count", { HDR(5, 1) }, 19, 0, MOLD_E_REQUEST_LEN },
	{ "one byte extra", { HDR(5, 1), 0 }, 21, 0, MOLD_E_REQUEST_LEN },
	{ "two bytes extra", { HDR(5, 1), 0, 0 }, 22, 0, MOLD_E_REQUEST_LEN },
	{ "a data packet", { HDR(5, 1), 0, 1, 'x' }, 23, 0, MOLD_E_REQUEST_LEN },
	{ "two requests", { HDR(5, 1), HDR(6, 1) }, 40, 0, MOLD_E_REQUEST_LEN },
	{ "short and other session", { 'X' }, 19, 1, MOLD_E_REQUEST_LEN },
	{ "long and other session", { 'X' }, 21, 1, MOLD_E_REQUEST_LEN },
	{ "other session", { 'S', 'E', 'S', 'S', 'I', 'O', 'N', '9', ' ', ' ', SEQ8(5), 0, 1 }, 20, 1,
	  MOLD_E_SESSION },
	{ "all-space session", { ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', SEQ8(5), 0, 1 }, 20,
	  1, MOLD_E_SESSION },
	{ "session with a NUL", { 'S', 'E', 'S', 'S', 'I', 'O', 'N', '1', 0, ' ', SEQ8(5), 0, 1 }, 20,
	  1, MOLD_E_SESSION },
	{ "session byte 0xff", { 0xff, 'E', 'S', 'S', 'I', 'O', 'N', '1', ' ', ' ', SEQ8(5), 0, 1 },
	  20, 1, MOLD_E_SESSION },
	{ "other session, wrapping", { 'Q', 'E', 'S', 'S', 'I', 'O', 'N', '1', ' ', ' ',
				       SEQ8(UINT64_MAX), 0, 9 },
	  20, 1, MOLD_E_SESSION },
	{ "seq UINT64_MAX, count 1", { HDR(UINT64_MAX, 1) }, 20, 0, MOLD_E_SEQ_WRAP },
	{ "seq UINT64_MAX - 1, count 2", { HDR(UINT64_MAX - 1, 2) }, 20, 1, MOLD_E_SEQ_WRAP },
	{ "count 0xFFFF one too far", { HDR(UINT64_MAX - 0xFFFE, 0xFFFF) }, 20, 0,
	  MOLD_E_SEQ_WRAP },
	{ "seq 2^63, count 0xFFFF, no wrap: fine", { HDR(1ull << 63, 0xFFFF) }, 20, 0, MOLD_OK },
};

START_TEST(malformed_requests)
{
	struct mold_session expect = session("SESSION1");
	const struct bad_request *c = &bad_requests[_i];
	struct mold_request out, before;
	int err;

	memset(&out, 0xa5, sizeof(out));
	before = out;
	err = mold_parse_request(c->b, c->len, c->expect_session ? &expect : NULL, &out);
	note(err);
	ck_assert_msg(err == c->err, "%s: got %d (%s), want %d (%s)", c->what, err,
		      mold_strerror(err), c->err, mold_strerror(c->err));
	if (err != MOLD_OK)
		ck_assert_msg(memcmp(&out, &before, sizeof(out)) == 0, "%s: output touched",
			      c->what);
}
END_TEST

START_TEST(oversize_default_limit)
{
	static uint8_t buf[MOLD_MAX_PACKET + 1];
	struct mold_packet pkt;

	memcpy(buf, (uint8_t[]){ HDR(1, 0) }, 20);
	ck_assert_int_eq(mold_parse(buf, sizeof(buf), NULL, 0, &pkt), MOLD_E_OVERSIZE);
	ck_assert_int_eq(mold_parse(buf, sizeof(buf) - 1, NULL, 0, &pkt), MOLD_E_CONTROL_DATA);
}
END_TEST

/* Random packets: built, parsed, iterated and compared; random mutations of
 * them never crash the parser and anything it accepts iterates to its end. */
START_TEST(random_round_trips)
{
	static uint8_t buf[2048], msgs[64][64];
	uint16_t lens[64];

	for (int round = 0; round < 2000; round++) {
		struct mold_session s;
		char name[11];
		size_t nlen = rnd() % 11;
		uint64_t seq0 = rnd() % 4 == 0 ? UINT64_MAX - 100 : rnd() >> (rnd() % 64);
		unsigned count = (unsigned)(rnd() % 20);
		struct mold_builder b;
		struct mold_packet pkt;
		struct mold_iter it;
		const uint8_t *data;
		uint64_t seq;
		uint16_t len;
		size_t n;
		int err;

		for (size_t i = 0; i < nlen; i++)
			name[i] = (char)(0x20 + rnd() % 95);
		name[nlen] = '\0';
		ck_assert_int_eq(mold_session_set(&s, name), MOLD_OK);
		ck_assert_int_eq(mold_build_begin(&b, buf, sizeof(buf), &s, seq0), MOLD_OK);
		for (unsigned i = 0; i < count; i++) {
			lens[i] = (uint16_t)(rnd() % 64);
			for (unsigned k = 0; k < lens[i]; k++)
				msgs[i][k] = (uint8_t)rnd();
			ck_assert_int_eq(mold_build_add(&b, msgs[i], lens[i]), MOLD_OK);
		}
		n = mold_build_end(&b);
		err = mold_parse(buf, n, &s, 0, &pkt);
		if (count && seq0 > UINT64_MAX - count) {
			ck_assert_int_eq(err, MOLD_E_SEQ_WRAP);
			continue;
		}
		ck_assert_int_eq(err, MOLD_OK);
		ck_assert_int_eq(pkt.kind, count ? MOLD_DATA : MOLD_HEARTBEAT);
		mold_iter_init(&it, &pkt);
		for (unsigned i = 0; i < count; i++) {
			ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 1);
			ck_assert_uint_eq(seq, seq0 + i);
			ck_assert_uint_eq(len, lens[i]);
			ck_assert(len == 0 || memcmp(data, msgs[i], len) == 0);
		}
		ck_assert_int_eq(mold_iter_next(&it, &seq, &data, &len), 0);

		/* Flip a byte and cut: whatever parses iterates within bounds. */
		buf[rnd() % n] ^= (uint8_t)(1 + rnd() % 255);
		n -= rnd() % 3 == 0 ? rnd() % n : 0;
		if (mold_parse(buf, n, NULL, 0, &pkt) == MOLD_OK) {
			size_t total = 0;
			unsigned k = 0;

			mold_iter_init(&it, &pkt);
			while (mold_iter_next(&it, &seq, &data, &len)) {
				ck_assert(data >= buf + 22 && data + len <= buf + n);
				total += 2 + (size_t)len;
				k++;
			}
			ck_assert_uint_eq(k, pkt.count);
			ck_assert_uint_eq(total, pkt.kind == MOLD_DATA ? n - 20 : 0);
		}
	}
}
END_TEST

START_TEST(strerror_names_every_error)
{
	for (int e = MOLD_OK; e >= MOLD_E_BAD_SESSION_NAME; e--) {
		const char *msg = mold_strerror(e);

		ck_assert_ptr_nonnull(msg);
		ck_assert_str_ne(msg, mold_strerror(-100));
		for (int f = e - 1; f >= MOLD_E_BAD_SESSION_NAME; f--)
			ck_assert_str_ne(msg, mold_strerror(f));
	}
}
END_TEST

/* Runs last, in the same process (CK_NOFORK is forced for this suite): every
 * error code was produced by the tests above. */
START_TEST(every_error_reached)
{
	for (int e = 1; e <= -MOLD_E_BAD_SESSION_NAME; e++)
		ck_assert_msg(seen_err[e], "error %d (%s) never produced", -e, mold_strerror(-e));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("moldudp64");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, session_names_0_to_10);
	tcase_add_test(tc, session_names_rejected);
	tcase_add_test(tc, session_str_trims_only_trailing_spaces);
	tcase_add_test(tc, data_packet_round_trip);
	tcase_add_test(tc, control_packets_round_trip);
	tcase_add_test(tc, request_round_trip);
	tcase_add_test(tc, reserve_commit_in_place);
	tcase_add_test(tc, builder_nospace_leaves_builder_unchanged);
	tcase_add_test(tc, count_0xfffe);
	tcase_add_test(tc, maximal_packet);
	tcase_add_test(tc, zero_length_blocks);
	tcase_add_test(tc, session_with_nonprintable_bytes_on_the_wire);
	tcase_add_test(tc, seq_wrap_boundaries);
	tcase_add_loop_test(tc, malformed_packets, 0,
			    (int)(sizeof(bad_packets) / sizeof(bad_packets[0])));
	tcase_add_loop_test(tc, malformed_requests, 0,
			    (int)(sizeof(bad_requests) / sizeof(bad_requests[0])));
	tcase_add_test(tc, oversize_default_limit);
	tcase_add_test(tc, random_round_trips);
	tcase_add_test(tc, strerror_names_every_error);
	tcase_add_test(tc, every_error_reached);
	suite_add_tcase(s, tc);
	/* In one process, so that every_error_reached sees what the others
	 * produced. */
	return testutil_run(s, 1);
}
