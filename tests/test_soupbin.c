/* SoupBinTCP 4.0: builders round-trip through the parser and decoders, any
 * split of a stream gives the same packets, direction and length checks,
 * sticky errors, compaction, and tables of malformed input. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "soupbin.h"
#include "testutil.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* --- a record of what a parser produced ----------------------------------------- */

/* Each packet as type, length (2), payload; then the final return code. */
struct trace {
	uint8_t b[1 << 17];
	size_t len;
	int rc;
	unsigned packets;
};

static void trace_packet(struct trace *t, const struct soup_packet *pkt)
{
	ck_assert_uint_le(t->len + 3 + pkt->len, sizeof(t->b));
	t->b[t->len++] = (uint8_t)pkt->type;
	t->b[t->len++] = (uint8_t)(pkt->len >> 8);
	t->b[t->len++] = (uint8_t)pkt->len;
	memcpy(t->b + t->len, pkt->payload, pkt->len);
	t->len += pkt->len;
	t->packets++;
}

/* Reads packets until the parser wants more bytes or fails. */
static int drain(struct soup_parser *p, struct trace *t)
{
	struct soup_packet pkt;
	int rc;

	while ((rc = soup_parser_next(p, &pkt)) == SOUP_OK) {
		ck_assert(pkt.payload >= p->buf && pkt.payload + pkt.len <= p->buf + p->cap);
		trace_packet(t, &pkt);
	}
	return rc;
}

/* Feeds one chunk, alternately through push() and through space()/feed() as
 * a read() would, draining after each step. */
static void feed_chunk(struct soup_parser *p, const uint8_t *d, size_t n, struct trace *t)
{
	while (n > 0) {
		size_t room, k;
		uint8_t *dst;

		if (rnd() & 1) {
			k = soup_parser_push(p, d, n);
		} else {
			dst = soup_parser_space(p, &room);
			k = n < room ? n : room;
			memcpy(dst, d, k);
			soup_parser_feed(p, k);
		}
		d += k;
		n -= k;
		t->rc = drain(p, t);
		if (k == 0) {
			/* Only a failed parser may stop taking bytes. */
			ck_assert_int_lt(t->rc, SOUP_E_AGAIN);
			return;
		}
	}
}

static uint8_t pbuf[SOUP_MAX_PAYLOAD + 3 + 4096];

/* Runs `stream` through a fresh parser cut at the offsets in cuts[]. */
static void run_cuts(enum soup_direction dir, uint16_t max, size_t cap, const uint8_t *stream,
		     size_t n, const size_t *cuts, size_t ncuts, struct trace *t)
{
	struct soup_parser p;
	size_t at = 0;

	ck_assert_uint_le(cap, sizeof(pbuf));
	soup_parser_init(&p, pbuf, cap, max, dir);
	t->len = 0;
	t->packets = 0;
	t->rc = SOUP_E_AGAIN;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : n;

		feed_chunk(&p, stream + at, to - at, t);
		at = to;
	}
	t->rc = drain(&p, t);
}

static void run_whole(enum soup_direction dir, uint16_t max, size_t cap, const uint8_t *stream,
		      size_t n, struct trace *t)
{
	run_cuts(dir, max, cap, stream, n, NULL, 0, t);
}

static void assert_same(const struct trace *a, const struct trace *b, const char *how)
{
	ck_assert_msg(a->rc == b->rc, "%s: rc %d vs %d", how, a->rc, b->rc);
	ck_assert_msg(a->packets == b->packets, "%s: %u vs %u packets", how, a->packets,
		      b->packets);
	ck_assert_msg(a->len == b->len && memcmp(a->b, b->b, a->len) == 0, "%s: packets differ",
		      how);
}

/* --- streams of mixed packets --------------------------------------------------- */

#define MAXP 300 /* max_payload of the split tests */

static size_t add(uint8_t *s, size_t at, int n)
{
	ck_assert_int_gt(n, 0);
	return at + (size_t)n;
}

static void fill(uint8_t *m, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		m[i] = (uint8_t)(seed + i * 31);
}

/* Thirteen packets a server sends: every server type, empty and maximal
 * payloads. */
static size_t server_stream(uint8_t *s, size_t cap)
{
	static uint8_t m[MAXP];
	size_t n = 0;

	fill(m, sizeof(m), 1);
	n = add(s, n, soup_build_login_accepted(s + n, cap - n, "SESS01", 1));
	n = add(s, n, soup_build_sequenced(s + n, cap - n, m, 0));
	n = add(s, n, soup_build_sequenced(s + n, cap - n, m, 1));
	n = add(s, n, soup_build_sequenced(s + n, cap - n, m, MAXP));
	n = add(s, n, soup_build_server_heartbeat(s + n, cap - n));
	n = add(s, n, soup_build_debug(s + n, cap - n, "hello"));
	n = add(s, n, soup_build_sequenced(s + n, cap - n, m + 3, 57));
	n = add(s, n, soup_build_server_heartbeat(s + n, cap - n));
	n = add(s, n, soup_build_sequenced(s + n, cap - n, m + 9, 2));
	n = add(s, n, soup_build_debug(s + n, cap - n, ""));
	n = add(s, n, soup_build_sequenced(s + n, cap - n, m + 1, MAXP - 1));
	n = add(s, n, soup_build_login_rejected(s + n, cap - n, SOUP_REJECT_NOT_AUTHORIZED));
	n = add(s, n, soup_build_end_of_session(s + n, cap - n));
	return n;
}

/* Twelve packets a client sends. */
static size_t client_stream(uint8_t *s, size_t cap)
{
	static uint8_t m[MAXP];
	struct soup_login l = { "USER1", "PASSWORD", "", 1 };
	size_t n = 0;

	fill(m, sizeof(m), 7);
	n = add(s, n, soup_build_login_request(s + n, cap - n, &l));
	n = add(s, n, soup_build_unsequenced(s + n, cap - n, m, 0));
	n = add(s, n, soup_build_unsequenced(s + n, cap - n, m, 10));
	n = add(s, n, soup_build_client_heartbeat(s + n, cap - n));
	n = add(s, n, soup_build_debug(s + n, cap - n, "debug text"));
	n = add(s, n, soup_build_unsequenced(s + n, cap - n, m, MAXP));
	n = add(s, n, soup_build_client_heartbeat(s + n, cap - n));
	n = add(s, n, soup_build_unsequenced(s + n, cap - n, m + 5, 1));
	n = add(s, n, soup_build_unsequenced(s + n, cap - n, m + 2, 49));
	n = add(s, n, soup_build_login_request(s + n, cap - n, &l));
	n = add(s, n, soup_build_unsequenced(s + n, cap - n, m, MAXP - 2));
	n = add(s, n, soup_build_logout_request(s + n, cap - n));
	return n;
}

static struct trace ref, got;

/* Every single split offset, byte by byte, and random splits, in a roomy
 * buffer and in the smallest one allowed (3 + max_payload). */
static void check_splits(enum soup_direction dir, const uint8_t *s, size_t n,
			 unsigned want_packets, int want_rc)
{
	static const size_t caps[] = { 3 + MAXP, 3 + MAXP + 1, 4 * MAXP, 65536 };
	size_t cuts[64];

	run_whole(dir, MAXP, sizeof(pbuf), s, n, &ref);
	ck_assert_uint_eq(ref.packets, want_packets);
	ck_assert_int_eq(ref.rc, want_rc);
	for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		for (size_t k = 0; k <= n; k++) {
			run_cuts(dir, MAXP, caps[c], s, n, &k, 1, &got);
			assert_same(&ref, &got, "one split");
		}
		/* Byte by byte. */
		{
			size_t *all = malloc(n * sizeof(*all));

			for (size_t k = 0; k < n; k++)
				all[k] = k + 1;
			run_cuts(dir, MAXP, caps[c], s, n, all, n, &got);
			assert_same(&ref, &got, "byte by byte");
			free(all);
		}
		for (int round = 0; round < 300; round++) {
			size_t ncuts = rnd() % 64, at = 0;

			for (size_t i = 0; i < ncuts; i++) {
				/* Mostly small steps, sometimes big jumps. */
				at += rnd() % 4 ? rnd() % 16 : rnd() % (n + 1);
				cuts[i] = at < n ? at : n;
			}
			run_cuts(dir, MAXP, caps[c], s, n, cuts, ncuts, &got);
			assert_same(&ref, &got, "random splits");
		}
	}
}

START_TEST(split_invariance_server_stream)
{
	static uint8_t s[4096];
	size_t n = server_stream(s, sizeof(s));

	check_splits(SOUP_FROM_SERVER, s, n, 13, SOUP_E_AGAIN);
}
END_TEST

START_TEST(split_invariance_client_stream)
{
	static uint8_t s[4096];
	size_t n = client_stream(s, sizeof(s));

	check_splits(SOUP_FROM_CLIENT, s, n, 12, SOUP_E_AGAIN);
}
END_TEST

/* A stream that goes bad part way: the same packets come out before the
 * error whatever the split, and the error is the same. */
START_TEST(split_invariance_with_errors)
{
	static uint8_t s[4096];
	static const uint8_t tails[][4] = {
		{ 0, 0 }, /* zero length */
		{ 0x01, 0x2d, 'S', 0 }, /* payload 300 = MAXP: fine, then incomplete */
		{ 0x01, 0x2e, 'S', 0 }, /* payload 301 > MAXP */
		{ 0, 3, 'L', 0 }, /* client type at a client */
		{ 0, 2, 'H', 0 }, /* heartbeat with a payload */
		{ 0, 30, 'A', 0 }, /* login accepted of 29 */
	};
	static const int want[] = { SOUP_E_ZERO_LENGTH, SOUP_E_AGAIN, SOUP_E_OVERSIZE,
				    SOUP_E_UNKNOWN_TYPE, SOUP_E_BAD_LENGTH, SOUP_E_BAD_LENGTH };

	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		size_t n = server_stream(s, sizeof(s));

		/* The bad packet, then a good one that must never come out. */
		memcpy(s + n, tails[i], 4);
		n += 4;
		n += (size_t)soup_build_server_heartbeat(s + n, sizeof(s) - n);
		check_splits(SOUP_FROM_SERVER, s, n, 13, want[i]);
	}
}
END_TEST

/* Random streams of random packets, cut at random: the parser gives back
 * exactly what the builders wrote. */
START_TEST(random_streams_round_trip)
{
	static uint8_t s[1 << 16], m[MAXP + 1];
	static struct trace want;
	size_t cuts[128];

	for (int round = 0; round < 300; round++) {
		enum soup_direction dir = round & 1 ? SOUP_FROM_SERVER : SOUP_FROM_CLIENT;
		size_t n = 0;

		want.len = 0;
		want.packets = 0;
		for (int k = 0; k < 40; k++) {
			struct soup_packet pkt;
			uint16_t len = (uint16_t)(rnd() % 3 ? rnd() % 20 : rnd() % (MAXP + 1));
			size_t at = n, room = sizeof(s) - n;
			int server = dir == SOUP_FROM_SERVER, r;

			fill(m, len, (unsigned)rnd());
			switch (rnd() % 4) {
			case 0:
				r = server ? soup_build_sequenced(s + n, room, m, len)
					   : soup_build_unsequenced(s + n, room, m, len);
				break;
			case 1:
				r = server ? soup_build_server_heartbeat(s + n, room)
					   : soup_build_client_heartbeat(s + n, room);
				break;
			case 2:
				memset(m, 'd', len);
				m[len] = '\0';
				r = soup_build_debug(s + n, room, (const char *)m);
				break;
			default:
				if (server) {
					r = soup_build_login_accepted(s + n, room, "S1", rnd());
				} else {
					struct soup_login l = { "U", "P", "S", rnd() };

					r = soup_build_login_request(s + n, room, &l);
				}
				break;
			}
			ck_assert_int_gt(r, 0);
			n += (size_t)r;
			pkt.type = (char)s[at + 2];
			pkt.payload = s + at + 3;
			pkt.len = (uint16_t)(r - 3);
			trace_packet(&want, &pkt);
		}
		size_t ncuts = rnd() % 128, at = 0;

		for (size_t i = 0; i < ncuts; i++) {
			at += rnd() % 64;
			cuts[i] = at < n ? at : n;
		}
		run_cuts(dir, MAXP, 3 + MAXP + rnd() % 600, s, n, cuts, ncuts, &got);
		ck_assert_int_eq(got.rc, SOUP_E_AGAIN);
		ck_assert_uint_eq(got.packets, 40);
		ck_assert(got.len == want.len && memcmp(got.b, want.b, got.len) == 0);
	}
}
END_TEST

/* --- builders through the parser and decoders -------------------------------------- */

/* Parses one whole packet with a fresh parser; returns its rc. */
static int parse_one(enum soup_direction dir, const uint8_t *b, size_t n, struct soup_packet *pkt)
{
	static uint8_t buf[SOUP_MAX_PAYLOAD + 3];
	struct soup_parser p;
	int rc;

	soup_parser_init(&p, buf, sizeof(buf), SOUP_MAX_PAYLOAD, dir);
	ck_assert_uint_eq(soup_parser_push(&p, b, n), n);
	rc = soup_parser_next(&p, pkt);
	if (rc == SOUP_OK) {
		struct soup_packet extra;

		ck_assert_int_eq(soup_parser_next(&p, &extra), SOUP_E_AGAIN);
	}
	return rc;
}

START_TEST(login_request_round_trip)
{
	static const struct soup_login cases[] = {
		{ "USER1", "PASSWORD", "", 1 },
		{ "", "", "", 0 },
		{ "ABCDEF", "0123456789", "SESSION123", UINT64_MAX },
		{ "a", "b", "c", 18446744073709551614ull },
		{ "X1", "pw", "S", 10000000000000000000ull },
	};
	uint8_t b[64];
	struct soup_packet pkt;
	struct soup_login back;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = soup_build_login_request(b, sizeof(b), &cases[i]);

		ck_assert_int_eq(n, SOUP_LOGIN_REQUEST_LEN + 2);
		ck_assert_int_eq(b[0], 0);
		ck_assert_int_eq(b[1], SOUP_LOGIN_REQUEST_LEN);
		ck_assert_int_eq(parse_one(SOUP_FROM_CLIENT, b, (size_t)n, &pkt), SOUP_OK);
		ck_assert_int_eq(pkt.type, SOUP_LOGIN_REQUEST);
		ck_assert_uint_eq(pkt.len, 46);
		memset(&back, 0x55, sizeof(back));
		ck_assert_int_eq(soup_decode_login(&pkt, &back), SOUP_OK);
		ck_assert_str_eq(back.username, cases[i].username);
		ck_assert_str_eq(back.password, cases[i].password);
		ck_assert_str_eq(back.session, cases[i].session);
		ck_assert_uint_eq(back.seq, cases[i].seq);
	}
	/* The wire: right-padded credentials, left-padded session and number. */
	soup_build_login_request(b, sizeof(b), &(struct soup_login){ "BOB", "PW1", "S7", 42 });
	ck_assert_mem_eq(b, "\x00\x2fL"
			    "BOB   "
			    "PW1       "
			    "        S7"
			    "                  42",
			 49);
	soup_build_login_request(b, sizeof(b), &(struct soup_login){ "", "", "", 0 });
	for (int i = 0; i < 45; i++)
		ck_assert_int_eq(b[3 + i], ' ');
	ck_assert_int_eq(b[48], '0');
}
END_TEST

START_TEST(login_field_lengths_0_to_max)
{
	const char *src = "ABCDEFGHIJK";
	uint8_t b[64];
	struct soup_packet pkt;

	for (size_t n = 0; n <= 11; n++) {
		struct soup_login l = { "", "", "", 5 }, back;
		char sess[16];
		int r;

		memcpy(sess, src, n);
		sess[n] = '\0';
		memcpy(l.session, sess, n <= SOUP_SESSION_LEN ? n : 0);
		if (n > SOUP_SESSION_LEN) {
			/* Build by hand: the struct cannot hold 11. */
			ck_assert_int_eq(soup_build_login_accepted(b, sizeof(b), sess, 5),
					 SOUP_E_BAD_FIELD);
			continue;
		}
		r = soup_build_login_request(b, sizeof(b), &l);
		ck_assert_int_eq(r, 49);
		ck_assert_int_eq(parse_one(SOUP_FROM_CLIENT, b, 49, &pkt), SOUP_OK);
		ck_assert_int_eq(soup_decode_login(&pkt, &back), SOUP_OK);
		ck_assert_str_eq(back.session, sess);

		char s2[SOUP_SESSION_LEN + 1];
		uint64_t seq;

		ck_assert_int_eq(soup_build_login_accepted(b, sizeof(b), sess, n), 33);
		for (size_t i = 0; i < SOUP_SESSION_LEN - n; i++)
			ck_assert_int_eq(b[3 + i], ' ');
		ck_assert_int_eq(parse_one(SOUP_FROM_SERVER, b, 33, &pkt), SOUP_OK);
		ck_assert_int_eq(soup_decode_login_accepted(&pkt, s2, &seq), SOUP_OK);
		ck_assert_str_eq(s2, sess);
		ck_assert_uint_eq(seq, n);
	}
	/* Usernames of 0..6 and passwords of 0..10. */
	for (size_t n = 0; n <= SOUP_PASSWORD_LEN; n++) {
		struct soup_login l = { "", "", "", 1 }, back;

		memcpy(l.username, src, n <= SOUP_USERNAME_LEN ? n : SOUP_USERNAME_LEN);
		memcpy(l.password, src, n);
		ck_assert_int_eq(soup_build_login_request(b, sizeof(b), &l), 49);
		ck_assert_int_eq(parse_one(SOUP_FROM_CLIENT, b, 49, &pkt), SOUP_OK);
		ck_assert_int_eq(soup_decode_login(&pkt, &back), SOUP_OK);
		ck_assert_str_eq(back.username, l.username);
		ck_assert_str_eq(back.password, l.password);
	}
}
END_TEST

START_TEST(login_builders_reject_bad_fields)
{
	static const struct soup_login bad[] = {
		{ "US ER", "pw", "", 1 },  { "US-ER", "pw", "", 1 },  { "\x01", "pw", "", 1 },
		{ "U", "pass word", "", 1 }, { "U", "pass\xff", "", 1 }, { "U", "p", "S 1", 1 },
		{ "U", "p", "S.1", 1 },     { "U", "p", "\t", 1 },
	};
	struct soup_login unterminated;
	uint8_t b[64], before[64];

	memset(b, 0xee, sizeof(b));
	memcpy(before, b, sizeof(b));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(soup_build_login_request(b, sizeof(b), &bad[i]), SOUP_E_BAD_FIELD);
		ck_assert_mem_eq(b, before, sizeof(b));
	}
	memset(&unterminated, 'A', sizeof(unterminated));
	ck_assert_int_eq(soup_build_login_request(b, sizeof(b), &unterminated), SOUP_E_BAD_FIELD);
	ck_assert_int_eq(soup_build_login_accepted(b, sizeof(b), "TOOLONGNAME", 1),
			 SOUP_E_BAD_FIELD);
	ck_assert_int_eq(soup_build_login_accepted(b, sizeof(b), "A B", 1), SOUP_E_BAD_FIELD);
	ck_assert_int_eq(soup_build_login_accepted(b, sizeof(b), "\x7f", 1), SOUP_E_BAD_FIELD);
	ck_assert_mem_eq(b, before, sizeof(b));
	/* NULL is a blank session. */
	ck_assert_int_eq(soup_build_login_accepted(b, sizeof(b), NULL, 1), 33);
	ck_assert_mem_eq(b + 3, "          ", 10);
}
END_TEST

START_TEST(other_builders_round_trip)
{
	static uint8_t b[SOUP_MAX_PAYLOAD + 3], msg[SOUP_MAX_PAYLOAD];
	struct soup_packet pkt;
	char sess[SOUP_SESSION_LEN + 1];
	uint64_t seq;
	int n;

	fill(msg, sizeof(msg), 3);
	n = soup_build_login_accepted(b, sizeof(b), "TAPE1", 1234567);
	ck_assert_mem_eq(b, "\x00\x1f" "A     TAPE1             1234567", 33);
	ck_assert_int_eq(parse_one(SOUP_FROM_SERVER, b, (size_t)n, &pkt), SOUP_OK);
	ck_assert_int_eq(soup_decode_login_accepted(&pkt, sess, &seq), SOUP_OK);
	ck_assert_str_eq(sess, "TAPE1");
	ck_assert_uint_eq(seq, 1234567);

	n = soup_build_login_rejected(b, sizeof(b), SOUP_REJECT_SESSION_UNAVAILABLE);
	ck_assert_int_eq(n, 4);
	ck_assert_mem_eq(b, "\x00\x02JS", 4);
	ck_assert_int_eq(parse_one(SOUP_FROM_SERVER, b, 4, &pkt), SOUP_OK);
	ck_assert_int_eq(pkt.type, 'J');
	ck_assert_uint_eq(pkt.len, 1);
	ck_assert_int_eq(pkt.payload[0], 'S');

	static const struct {
		int (*build)(uint8_t *, size_t);
		enum soup_direction dir;
		char type;
	} empty[] = {
		{ soup_build_server_heartbeat, SOUP_FROM_SERVER, 'H' },
		{ soup_build_end_of_session, SOUP_FROM_SERVER, 'Z' },
		{ soup_build_client_heartbeat, SOUP_FROM_CLIENT, 'R' },
		{ soup_build_logout_request, SOUP_FROM_CLIENT, 'O' },
	};
	for (size_t i = 0; i < 4; i++) {
		n = empty[i].build(b, sizeof(b));
		ck_assert_int_eq(n, 3);
		ck_assert_int_eq(b[0], 0);
		ck_assert_int_eq(b[1], 1);
		ck_assert_int_eq(b[2], empty[i].type);
		ck_assert_int_eq(parse_one(empty[i].dir, b, 3, &pkt), SOUP_OK);
		ck_assert_int_eq(pkt.type, empty[i].type);
		ck_assert_uint_eq(pkt.len, 0);
		/* And the other direction does not know it. */
		ck_assert_int_eq(parse_one(!empty[i].dir, b, 3, &pkt), SOUP_E_UNKNOWN_TYPE);
	}

	static const uint16_t lens[] = { 0, 1, 2, 255, 256, 1000, SOUP_MAX_PAYLOAD };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		n = soup_build_sequenced(b, sizeof(b), msg, lens[i]);
		ck_assert_int_eq(n, 3 + lens[i]);
		ck_assert_int_eq(parse_one(SOUP_FROM_SERVER, b, (size_t)n, &pkt), SOUP_OK);
		ck_assert_int_eq(pkt.type, 'S');
		ck_assert_uint_eq(pkt.len, lens[i]);
		ck_assert(memcmp(pkt.payload, msg, lens[i]) == 0);
		n = soup_build_unsequenced(b, sizeof(b), msg, lens[i]);
		ck_assert_int_eq(parse_one(SOUP_FROM_CLIENT, b, (size_t)n, &pkt), SOUP_OK);
		ck_assert_int_eq(pkt.type, 'U');
		ck_assert_uint_eq(pkt.len, lens[i]);
		ck_assert(memcmp(pkt.payload, msg, lens[i]) == 0);
	}
	/* The maximal packet: length field 0xFFFF. */
	n = soup_build_sequenced(b, sizeof(b), msg, SOUP_MAX_PAYLOAD);
	ck_assert_int_eq(b[0], 0xff);
	ck_assert_int_eq(b[1], 0xff);

	n = soup_build_debug(b, sizeof(b), "a debug line");
	ck_assert_int_eq(n, 15);
	for (int d = 0; d < 2; d++) {
		ck_assert_int_eq(parse_one((enum soup_direction)d, b, 15, &pkt), SOUP_OK);
		ck_assert_int_eq(pkt.type, '+');
		ck_assert_uint_eq(pkt.len, 12);
		ck_assert_mem_eq(pkt.payload, "a debug line", 12);
	}
}
END_TEST

START_TEST(builders_nospace_and_oversize)
{
	static uint8_t b[SOUP_MAX_PAYLOAD + 8], msg[SOUP_MAX_PAYLOAD + 1];
	static char text[SOUP_MAX_PAYLOAD + 2];
	struct soup_login l = { "U", "P", "", 1 };

	ck_assert_int_eq(soup_build_login_request(b, 48, &l), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_login_request(b, 49, &l), 49);
	ck_assert_int_eq(soup_build_login_accepted(b, 32, "S", 1), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_login_accepted(b, 33, "S", 1), 33);
	ck_assert_int_eq(soup_build_login_rejected(b, 3, 'A'), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_login_rejected(b, 4, 'A'), 4);
	ck_assert_int_eq(soup_build_sequenced(b, 12, msg, 10), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_sequenced(b, 13, msg, 10), 13);
	ck_assert_int_eq(soup_build_unsequenced(b, 2, msg, 0), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_unsequenced(b, 3, msg, 0), 3);
	ck_assert_int_eq(soup_build_server_heartbeat(b, 2), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_client_heartbeat(b, 0), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_end_of_session(b, 1), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_logout_request(b, 2), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_debug(b, 4, "ab"), SOUP_E_NOSPACE);
	ck_assert_int_eq(soup_build_debug(b, 5, "ab"), 5);
	/* A payload of 65535 cannot be framed: the length would be 65536. */
	ck_assert_int_eq(soup_build(b, sizeof(b), 'S', msg, 0xFFFF), SOUP_E_OVERSIZE);
	memset(text, 'x', sizeof(text) - 1);
	ck_assert_int_eq(soup_build_debug(b, sizeof(b), text), SOUP_E_OVERSIZE);
	text[SOUP_MAX_PAYLOAD] = '\0';
	ck_assert_int_eq(soup_build_debug(b, sizeof(b), text), SOUP_MAX_PAYLOAD + 3);
}
END_TEST

START_TEST(seq_number_boundaries)
{
	static const struct {
		const char *field;
		int err;
		uint64_t v;
	} nums[] = {
		{ "                   0", SOUP_OK, 0 },
		{ "00000000000000000000", SOUP_OK, 0 },
		{ "00000000000000000001", SOUP_OK, 1 },
		{ "18446744073709551615", SOUP_OK, UINT64_MAX },
		{ "  184467440737095516", SOUP_OK, 184467440737095516ull },
		{ "18446744073709551616", SOUP_E_BAD_FIELD, 0 },
		{ "18446744073709551620", SOUP_E_BAD_FIELD, 0 },
		{ "99999999999999999999", SOUP_E_BAD_FIELD, 0 },
		{ "                    ", SOUP_E_BAD_FIELD, 0 },
	};
	uint8_t payload[30];
	struct soup_packet pkt = { 'A', payload, 30 };

	memcpy(payload, "    SESS01", 10);
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		char s[SOUP_SESSION_LEN + 1] = "unchanged";
		uint64_t v = 77;

		memcpy(payload + 10, nums[i].field, 20);
		ck_assert_int_eq(soup_decode_login_accepted(&pkt, s, &v), nums[i].err);
		if (nums[i].err == SOUP_OK) {
			ck_assert_uint_eq(v, nums[i].v);
			ck_assert_str_eq(s, "SESS01");
		} else {
			ck_assert_uint_eq(v, 77);
			ck_assert_str_eq(s, "unchanged");
		}
	}
}
END_TEST

/* --- parser behaviour --------------------------------------------------------- */

START_TEST(direction_is_enforced)
{
	static const char server_types[] = "AJSHZ", client_types[] = "LURO";
	static const char filler[] = "0123456789012345678901234567890123456789012345";
	uint8_t b[64];
	struct soup_packet pkt;

	for (int t = 0; t < 256; t++) {
		int in_server = t && strchr(server_types, t) != NULL;
		int in_client = t && strchr(client_types, t) != NULL;
		int is_debug = t == '+';

		for (int d = 0; d < 2; d++) {
			enum soup_direction dir = d ? SOUP_FROM_SERVER : SOUP_FROM_CLIENT;
			int known = is_debug || (d ? in_server : in_client);
			int want_len = t == 'L' ? 46 : t == 'A' ? 30 : t == 'J' ? 1 : 0;
			int n = soup_build(b, sizeof(b), (char)t, filler, (uint16_t)want_len);
			int rc = parse_one(dir, b, (size_t)n, &pkt);

			if (known)
				ck_assert_msg(rc == SOUP_OK, "type %d dir %d: %d", t, d, rc);
			else
				ck_assert_msg(rc == SOUP_E_UNKNOWN_TYPE, "type %d dir %d: %d", t, d, rc);
		}
	}
}
END_TEST

START_TEST(max_payload_is_enforced)
{
	static uint8_t buf[200], b[256], msg[200];
	struct soup_parser p;
	struct soup_packet pkt;
	int n;

	soup_parser_init(&p, buf, sizeof(buf), 100, SOUP_FROM_SERVER);
	n = soup_build_sequenced(b, sizeof(b), msg, 100);
	soup_parser_push(&p, b, (size_t)n);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_OK);
	ck_assert_uint_eq(pkt.len, 100);
	/* 101 is refused from the length field alone. */
	n = soup_build_sequenced(b, sizeof(b), msg, 101);
	soup_parser_push(&p, b, 1);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_AGAIN);
	soup_parser_push(&p, b + 1, 1);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_OVERSIZE);

	/* max_payload 0: only empty packets. */
	soup_parser_init(&p, buf, sizeof(buf), 0, SOUP_FROM_SERVER);
	n = soup_build_server_heartbeat(b, sizeof(b));
	soup_parser_push(&p, b, (size_t)n);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_OK);
	n = soup_build_login_rejected(b, sizeof(b), 'A');
	soup_parser_push(&p, b, (size_t)n);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_OVERSIZE);

	/* A buffer smaller than 3 + max_payload lowers the maximum. */
	soup_parser_init(&p, buf, 53, 1000, SOUP_FROM_SERVER);
	ck_assert_uint_eq(p.max_payload, 50);
	soup_parser_init(&p, buf, sizeof(buf), 0xFFFF, SOUP_FROM_SERVER);
	ck_assert_uint_eq(p.max_payload, 197);
	soup_parser_init(&p, buf, 2, 10, SOUP_FROM_SERVER);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_NOSPACE);

	/* The full SOUP_MAX_PAYLOAD in a buffer of exactly 3 + 65534. */
	static uint8_t big[SOUP_MAX_PAYLOAD + 3], wire[SOUP_MAX_PAYLOAD + 3],
		huge[SOUP_MAX_PAYLOAD];
	size_t off = 0;

	soup_parser_init(&p, big, sizeof(big), SOUP_MAX_PAYLOAD, SOUP_FROM_CLIENT);
	ck_assert_uint_eq(p.max_payload, SOUP_MAX_PAYLOAD);
	fill(huge, sizeof(huge), 9);
	n = soup_build_unsequenced(wire, sizeof(wire), huge, SOUP_MAX_PAYLOAD);
	ck_assert_int_eq(n, (int)sizeof(wire));
	while (off < (size_t)n)
		off += soup_parser_push(&p, wire + off, (size_t)n - off);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_OK);
	ck_assert_uint_eq(pkt.len, SOUP_MAX_PAYLOAD);
	ck_assert(memcmp(pkt.payload, huge, SOUP_MAX_PAYLOAD) == 0);
}
END_TEST

START_TEST(errors_are_sticky)
{
	static uint8_t buf[256], b[64];
	struct soup_parser p;
	struct soup_packet pkt;
	int n;

	soup_parser_init(&p, buf, sizeof(buf), 200, SOUP_FROM_CLIENT);
	n = soup_build_client_heartbeat(b, sizeof(b));
	soup_parser_push(&p, b, (size_t)n);
	soup_parser_push(&p, "\x00\x01H", 3); /* a server type */
	soup_parser_push(&p, b, (size_t)n);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_OK);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_UNKNOWN_TYPE);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_UNKNOWN_TYPE);
	for (int i = 0; i < 100; i++) {
		size_t room;

		soup_parser_space(&p, &room);
		if (room >= (size_t)n)
			soup_parser_push(&p, b, (size_t)n);
		ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_UNKNOWN_TYPE);
	}
	ck_assert_int_eq(p.err, SOUP_E_UNKNOWN_TYPE);
}
END_TEST

/* soup_parser_space() compacts so that a maximal packet always fits, and
 * never offers 0 bytes to a drained parser. */
START_TEST(space_compacts)
{
	enum { MAX = 100, CAP = MAX + 3 };
	static uint8_t buf[CAP], stream[1 << 16], msg[MAX];
	struct soup_parser p;
	struct soup_packet pkt;
	size_t n = 0, off = 0;
	unsigned packets = 0, want = 0;

	for (int i = 0; n + CAP < sizeof(stream); i++, want++) {
		uint16_t len = (uint16_t)(i % 5 == 0 ? MAX : rnd() % (MAX + 1));

		fill(msg, len, (unsigned)i);
		n += (size_t)soup_build_sequenced(stream + n, sizeof(stream) - n, msg, len);
	}
	soup_parser_init(&p, buf, CAP, MAX, SOUP_FROM_SERVER);
	while (off < n) {
		size_t room, k;
		uint8_t *dst = soup_parser_space(&p, &room);
		int rc;

		ck_assert_uint_gt(room, 0);
		ck_assert_ptr_eq(dst, buf + p.end);
		/* The packet under way fits between start and the end. */
		ck_assert_uint_ge(CAP - p.start, (size_t)MAX + 3);
		k = 1 + rnd() % 150;
		if (k > room)
			k = room;
		if (k > n - off)
			k = n - off;
		memcpy(dst, stream + off, k);
		soup_parser_feed(&p, k);
		off += k;
		while ((rc = soup_parser_next(&p, &pkt)) == SOUP_OK)
			packets++;
		ck_assert_int_eq(rc, SOUP_E_AGAIN);
	}
	ck_assert_uint_eq(packets, want);
	/* An emptied buffer starts again at the front. */
	size_t room;

	ck_assert_ptr_eq(soup_parser_space(&p, &room), buf);
	ck_assert_uint_eq(room, CAP);
}
END_TEST

START_TEST(push_takes_what_fits)
{
	static uint8_t buf[16], b[64];
	struct soup_parser p;
	struct soup_packet pkt;

	soup_parser_init(&p, buf, sizeof(buf), 13, SOUP_FROM_SERVER);
	memset(b, 0, sizeof(b));
	ck_assert_uint_eq(soup_parser_push(&p, b, 40), 16);
	ck_assert_uint_eq(soup_parser_push(&p, b, 40), 0);
	ck_assert_int_eq(soup_parser_next(&p, &pkt), SOUP_E_ZERO_LENGTH);
	/* feed() never goes past the buffer. */
	soup_parser_init(&p, buf, sizeof(buf), 13, SOUP_FROM_SERVER);
	soup_parser_feed(&p, 1000);
	ck_assert_uint_eq(p.end, sizeof(buf));
}
END_TEST

/* --- malformed streams ---------------------------------------------------------- */

struct bad_stream {
	const char *what;
	enum soup_direction dir;
	uint16_t max;
	uint8_t b[64];
	size_t len;
	unsigned good; /* packets before the error */
	int err;
};

#define C SOUP_FROM_CLIENT
#define S SOUP_FROM_SERVER

static const struct bad_stream bad_streams[] = {
	{ "zero length", S, 100, { 0, 0 }, 2, 0, SOUP_E_ZERO_LENGTH },
	{ "zero length, client side", C, 100, { 0, 0, 'R' }, 3, 0, SOUP_E_ZERO_LENGTH },
	{ "zero length after a heartbeat", S, 100, { 0, 1, 'H', 0, 0 }, 5, 1, SOUP_E_ZERO_LENGTH },
	{ "length 0xFFFF", S, 100, { 0xff, 0xff }, 2, 0, SOUP_E_OVERSIZE },
	{ "payload max + 1", S, 100, { 0, 102, 'S' }, 3, 0, SOUP_E_OVERSIZE },
	{ "oversize known from 2 bytes", C, 100, { 0x01, 0x00 }, 2, 0, SOUP_E_OVERSIZE },
	{ "login larger than max", C, 40, { 0, 47, 'L' }, 3, 0, SOUP_E_OVERSIZE },
	{ "login accepted at a server", C, 100, { 0, 31, 'A' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "sequenced data at a server", C, 100, { 0, 2, 'S', 'x' }, 4, 0, SOUP_E_UNKNOWN_TYPE },
	{ "server heartbeat at a server", C, 100, { 0, 1, 'H' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "end of session at a server", C, 100, { 0, 1, 'Z' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "login rejected at a server", C, 100, { 0, 2, 'J', 'A' }, 4, 0, SOUP_E_UNKNOWN_TYPE },
	{ "login request at a client", S, 100, { 0, 47, 'L' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "unsequenced data at a client", S, 100, { 0, 1, 'U' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "client heartbeat at a client", S, 100, { 0, 1, 'R' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "logout at a client", S, 100, { 0, 1, 'O' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "type 0", S, 100, { 0, 1, 0 }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "lower-case s", S, 100, { 0, 1, 's' }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "type 0xFF", C, 100, { 0, 1, 0xff }, 3, 0, SOUP_E_UNKNOWN_TYPE },
	{ "login request of 45", C, 100, { 0, 46, 'L' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "login request of 47", C, 100, { 0, 48, 'L' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "login request of 0", C, 100, { 0, 1, 'L' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "login accepted of 29", S, 100, { 0, 30, 'A' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "login accepted of 31", S, 100, { 0, 32, 'A' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "login rejected of 0", S, 100, { 0, 1, 'J' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "login rejected of 2", S, 100, { 0, 3, 'J', 'A', 'A' }, 5, 0, SOUP_E_BAD_LENGTH },
	{ "server heartbeat of 1", S, 100, { 0, 2, 'H', 0 }, 4, 0, SOUP_E_BAD_LENGTH },
	{ "end of session of 1", S, 100, { 0, 2, 'Z', 0 }, 4, 0, SOUP_E_BAD_LENGTH },
	{ "client heartbeat of 1", C, 100, { 0, 2, 'R', 0 }, 4, 0, SOUP_E_BAD_LENGTH },
	{ "logout of 5", C, 100, { 0, 6, 'O' }, 3, 0, SOUP_E_BAD_LENGTH },
	{ "bad length after two good packets", C, 100,
	  { 0, 1, 'R', 0, 3, 'U', 'a', 'b', 0, 3, 'R' }, 11, 2, SOUP_E_BAD_LENGTH },
	{ "error hides the good packet after it", S, 100, { 0, 0, 0, 1, 'H' }, 5, 0,
	  SOUP_E_ZERO_LENGTH },
	{ "cut in the length: waits", S, 100, { 0 }, 1, 0, SOUP_E_AGAIN },
	{ "cut in the payload: waits", S, 100, { 0, 5, 'S', 1, 2 }, 5, 0, SOUP_E_AGAIN },
	{ "cut after a good packet: waits", C, 100, { 0, 1, 'R', 0, 47 }, 5, 1, SOUP_E_AGAIN },
};

#undef C
#undef S

START_TEST(malformed_streams)
{
	const struct bad_stream *c = &bad_streams[_i];
	struct soup_parser p;
	struct soup_packet pkt;
	static uint8_t buf[512];
	unsigned good = 0;
	int rc;

	/* Whole. */
	soup_parser_init(&p, buf, sizeof(buf), c->max, c->dir);
	ck_assert_uint_eq(soup_parser_push(&p, c->b, c->len), c->len);
	while ((rc = soup_parser_next(&p, &pkt)) == SOUP_OK)
		good++;
	ck_assert_msg(rc == c->err, "%s: got %d (%s), want %d (%s)", c->what, rc,
		      soup_strerror(rc), c->err, soup_strerror(c->err));
	ck_assert_msg(good == c->good, "%s: %u good packets, want %u", c->what, good, c->good);
	if (rc != SOUP_E_AGAIN)
		ck_assert_int_eq(soup_parser_next(&p, &pkt), rc);

	/* Byte by byte: the same packets and the same end. */
	soup_parser_init(&p, buf, sizeof(buf), c->max, c->dir);
	good = 0;
	for (size_t i = 0; i < c->len; i++) {
		soup_parser_push(&p, c->b + i, 1);
		while ((rc = soup_parser_next(&p, &pkt)) == SOUP_OK)
			good++;
	}
	ck_assert_msg(rc == c->err && good == c->good, "%s: byte by byte %d/%u", c->what, rc,
		      good);
}
END_TEST

/* --- malformed login payloads ------------------------------------------------------ */

/* Fields are given at their wire width; a literal one short would end in a
 * NUL, which only the cases marked nul mean. */
struct bad_login {
	const char *what;
	char type;
	char user[SOUP_USERNAME_LEN + 1];
	char pass[SOUP_PASSWORD_LEN + 1];
	char sess[SOUP_SESSION_LEN + 1];
	char seq[SOUP_SEQNUM_LEN + 1];
	int len_delta; /* payload bytes off 46 */
	int nul;
	int err;
};

#define U_OK "USER1 "
#define P_OK "PASSWORD  "
#define S_OK "     SESS1"
#define N_OK "                   1"

static const struct bad_login bad_logins[] = {
	{ "login accepted type", 'A', U_OK, P_OK, S_OK, N_OK, 0, 0, SOUP_E_UNKNOWN_TYPE },
	{ "unsequenced type", 'U', U_OK, P_OK, S_OK, N_OK, 0, 0, SOUP_E_UNKNOWN_TYPE },
	{ "45 bytes", 'L', U_OK, P_OK, S_OK, N_OK, -1, 0, SOUP_E_BAD_LENGTH },
	{ "47 bytes", 'L', U_OK, P_OK, S_OK, N_OK, 1, 0, SOUP_E_BAD_LENGTH },
	{ "empty", 'L', U_OK, P_OK, S_OK, N_OK, -46, 0, SOUP_E_BAD_LENGTH },
	{ "username with a space inside", 'L', "US ER ", P_OK, S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "username left-padded", 'L', " USER1", P_OK, S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "username with '-'", 'L', "US-ER ", P_OK, S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "username with NUL", 'L', "USER\0 ", P_OK, S_OK, N_OK, 0, 1, SOUP_E_BAD_FIELD },
	{ "username with 0xff", 'L', "USER\xff ", P_OK, S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "password with '!'", 'L', U_OK, "PASS!WORD ", S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "password left-padded", 'L', U_OK, "  PASSWORD", S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "password with a tab", 'L', U_OK, "PASS\tWORD ", S_OK, N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "password NUL-padded", 'L', U_OK, "PASSWORD\0\0", S_OK, N_OK, 0, 1, SOUP_E_BAD_FIELD },
	{ "session right-padded", 'L', U_OK, P_OK, "SESS1     ", N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "session with a space inside", 'L', U_OK, P_OK, "    SE SS1", N_OK, 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "session with '_'", 'L', U_OK, P_OK, "    SESS_1", N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "session with 0x80", 'L', U_OK, P_OK, "     SESS\x80", N_OK, 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence all spaces", 'L', U_OK, P_OK, S_OK, "                    ", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence right-padded", 'L', U_OK, P_OK, S_OK, "1                   ", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence with a space inside", 'L', U_OK, P_OK, S_OK, "                 1 2", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence with '+'", 'L', U_OK, P_OK, S_OK, "                  +1", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence negative", 'L', U_OK, P_OK, S_OK, "                  -1", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence 2^64", 'L', U_OK, P_OK, S_OK, "18446744073709551616", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence twenty nines", 'L', U_OK, P_OK, S_OK, "99999999999999999999", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence in hex", 'L', U_OK, P_OK, S_OK, "                0x10", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence NUL-padded", 'L', U_OK, P_OK, S_OK, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
							"1",
	  0, 1, SOUP_E_BAD_FIELD },
	{ "control: the good one", 'L', U_OK, P_OK, S_OK, N_OK, 0, 0, SOUP_OK },
	{ "control: blank fields", 'L', "      ", "          ", "          ",
	  "                   0", 0, 0, SOUP_OK },
};

START_TEST(malformed_logins)
{
	const struct bad_login *c = &bad_logins[_i];
	uint8_t payload[64];
	struct soup_packet pkt = { c->type, payload, (uint16_t)(46 + c->len_delta) };
	struct soup_login out, before;
	int rc;

	if (!c->nul)
		ck_assert_msg(strlen(c->user) == 6 && strlen(c->pass) == 10 &&
				      strlen(c->sess) == 10 && strlen(c->seq) == 20,
			      "%s: a field is not at its wire width", c->what);
	memcpy(payload, c->user, 6);
	memcpy(payload + 6, c->pass, 10);
	memcpy(payload + 16, c->sess, 10);
	memcpy(payload + 26, c->seq, 20);
	payload[46] = '7';
	memset(&out, 0x5c, sizeof(out));
	before = out;
	rc = soup_decode_login(&pkt, &out);
	ck_assert_msg(rc == c->err, "%s: got %d (%s), want %d", c->what, rc, soup_strerror(rc),
		      c->err);
	if (rc != SOUP_OK) {
		ck_assert_msg(memcmp(&out, &before, sizeof(out)) == 0, "%s: output touched",
			      c->what);
	} else if (c->user[0] == 'U') {
		ck_assert_str_eq(out.username, "USER1");
		ck_assert_str_eq(out.password, "PASSWORD");
		ck_assert_str_eq(out.session, "SESS1");
		ck_assert_uint_eq(out.seq, 1);
	} else {
		ck_assert_str_eq(out.username, "");
		ck_assert_str_eq(out.password, "");
		ck_assert_str_eq(out.session, "");
		ck_assert_uint_eq(out.seq, 0);
	}
}
END_TEST

struct bad_accept {
	const char *what;
	char type;
	char sess[SOUP_SESSION_LEN + 1];
	char seq[SOUP_SEQNUM_LEN + 1];
	int len_delta; /* payload bytes off 30 */
	int nul;
	int err;
};

#define N42 "                  42"

static const struct bad_accept bad_accepts[] = {
	{ "login request type", 'L', S_OK, N42, 0, 0, SOUP_E_UNKNOWN_TYPE },
	{ "sequenced type", 'S', S_OK, N42, 0, 0, SOUP_E_UNKNOWN_TYPE },
	{ "rejected type", 'J', S_OK, N42, 0, 0, SOUP_E_UNKNOWN_TYPE },
	{ "29 bytes", 'A', S_OK, N42, -1, 0, SOUP_E_BAD_LENGTH },
	{ "31 bytes", 'A', S_OK, N42, 1, 0, SOUP_E_BAD_LENGTH },
	{ "10 bytes", 'A', S_OK, N42, -20, 0, SOUP_E_BAD_LENGTH },
	{ "empty", 'A', S_OK, N42, -30, 0, SOUP_E_BAD_LENGTH },
	{ "session right-padded", 'A', "SESS1     ", N42, 0, 0, SOUP_E_BAD_FIELD },
	{ "session with a space inside", 'A', "   SES S1 ", N42, 0, 0, SOUP_E_BAD_FIELD },
	{ "session with '.'", 'A', "     SES.1", N42, 0, 0, SOUP_E_BAD_FIELD },
	{ "session NUL-padded", 'A', "\0\0\0\0\0SESS1", N42, 0, 1, SOUP_E_BAD_FIELD },
	{ "session with 0x7f", 'A', "     SESS\x7f", N42, 0, 0, SOUP_E_BAD_FIELD },
	{ "session with a newline", 'A', "    \nSESS1", N42, 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence all spaces", 'A', S_OK, "                    ", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence right-padded", 'A', S_OK, "42                  ", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence with a space inside", 'A', S_OK, "                 4 2", 0, 0,
	  SOUP_E_BAD_FIELD },
	{ "sequence with a letter", 'A', S_OK, "                 42a", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence negative", 'A', S_OK, "                 -42", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence 2^64", 'A', S_OK, "18446744073709551616", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence 10^20 - 1", 'A', S_OK, "99999999999999999999", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence with a tab", 'A', S_OK, "\t                 42", 0, 0, SOUP_E_BAD_FIELD },
	{ "sequence with 0xff", 'A', S_OK, "                 \xff" "42", 0, 0, SOUP_E_BAD_FIELD },
	{ "control: the good one", 'A', S_OK, N42, 0, 0, SOUP_OK },
	{ "control: blank session", 'A', "          ", "                   0", 0, 0, SOUP_OK },
};

START_TEST(malformed_login_accepted)
{
	const struct bad_accept *c = &bad_accepts[_i];
	uint8_t payload[64];
	struct soup_packet pkt = { c->type, payload, (uint16_t)(30 + c->len_delta) };
	char sess[SOUP_SESSION_LEN + 1] = "untouched";
	uint64_t seq = 99;
	int rc;

	if (!c->nul)
		ck_assert_msg(strlen(c->sess) == 10 && strlen(c->seq) == 20,
			      "%s: a field is not at its wire width", c->what);
	memcpy(payload, c->sess, 10);
	memcpy(payload + 10, c->seq, 20);
	payload[30] = '1';
	rc = soup_decode_login_accepted(&pkt, sess, &seq);
	ck_assert_msg(rc == c->err, "%s: got %d (%s), want %d", c->what, rc, soup_strerror(rc),
		      c->err);
	if (rc != SOUP_OK) {
		ck_assert_str_eq(sess, "untouched");
		ck_assert_uint_eq(seq, 99);
	} else if (c->sess[5] == 'S') {
		ck_assert_str_eq(sess, "SESS1");
		ck_assert_uint_eq(seq, 42);
	} else {
		ck_assert_str_eq(sess, "");
		ck_assert_uint_eq(seq, 0);
	}
}
END_TEST

START_TEST(strerror_names_every_error)
{
	for (int e = SOUP_OK; e >= SOUP_E_NOSPACE; e--) {
		ck_assert_str_ne(soup_strerror(e), soup_strerror(-100));
		for (int f = e - 1; f >= SOUP_E_NOSPACE; f--)
			ck_assert_str_ne(soup_strerror(e), soup_strerror(f));
	}
}
END_TEST

/* soup_parser_recv on a real stream socket: nothing yet, a packet, the
 * peer gone. */
START_TEST(recv_from_a_socket)
{
	uint8_t buf[256], pkt[64];
	struct soup_parser p;
	struct soup_packet out;
	int sv[2], len;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	soup_parser_init(&p, buf, sizeof(buf), 100, SOUP_FROM_SERVER);
	ck_assert_int_eq(soup_parser_recv(&p, sv[0], NULL), 0); /* nothing there */
	len = soup_build_sequenced(pkt, sizeof(pkt), "hello", 5);
	ck_assert_int_eq(write(sv[1], pkt, (size_t)len), len);
	ck_assert_int_eq(soup_parser_recv(&p, sv[0], NULL), len);
	ck_assert_int_eq(soup_parser_next(&p, &out), SOUP_OK);
	ck_assert_int_eq(out.type, SOUP_SEQUENCED_DATA);
	ck_assert_int_eq(out.len, 5);
	ck_assert_mem_eq(out.payload, "hello", 5);
	close(sv[1]);
	ck_assert_int_eq(soup_parser_recv(&p, sv[0], NULL), -ECONNRESET);
	close(sv[0]);
	ck_assert_int_eq(soup_parser_recv(&p, sv[0], NULL), -EBADF);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("soupbin");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, split_invariance_server_stream);
	tcase_add_test(tc, split_invariance_client_stream);
	tcase_add_test(tc, split_invariance_with_errors);
	tcase_add_test(tc, random_streams_round_trip);
	tcase_add_test(tc, login_request_round_trip);
	tcase_add_test(tc, login_field_lengths_0_to_max);
	tcase_add_test(tc, login_builders_reject_bad_fields);
	tcase_add_test(tc, other_builders_round_trip);
	tcase_add_test(tc, builders_nospace_and_oversize);
	tcase_add_test(tc, seq_number_boundaries);
	tcase_add_test(tc, direction_is_enforced);
	tcase_add_test(tc, max_payload_is_enforced);
	tcase_add_test(tc, errors_are_sticky);
	tcase_add_test(tc, space_compacts);
	tcase_add_test(tc, push_takes_what_fits);
	tcase_add_test(tc, recv_from_a_socket);
	tcase_add_loop_test(tc, malformed_streams, 0,
			    (int)(sizeof(bad_streams) / sizeof(bad_streams[0])));
	tcase_add_loop_test(tc, malformed_logins, 0,
			    (int)(sizeof(bad_logins) / sizeof(bad_logins[0])));
	tcase_add_loop_test(tc, malformed_login_accepted, 0,
			    (int)(sizeof(bad_accepts) / sizeof(bad_accepts[0])));
	tcase_add_test(tc, strerror_names_every_error);
	suite_add_tcase(s, tc);
	/* One process: forking per test costs more than the tests under ASan. */
	return testutil_run(s, 1);
}
