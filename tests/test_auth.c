/* Authentication of cluster datagrams (common/auth.h, common/auth_node.h):
 * seal/open round trips of every MoldUDP64 packet kind and of raw
 * datagrams, the count on the wire, every error code, a flipped bit
 * anywhere, other clusters and surfaces, a key rotation across three
 * nodes, authentication off, key files (parse errors, format round trip,
 * permissions) and auth_node's drops counted per surface and source. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "auth_node.h"
#include "counters.h"
#include "moldudp64.h"
#include "testutil.h"

#define CAP 4096
#define COUNT_AT 18 /* the count's offset in a MoldUDP64 header */
#define PREFIX 8 /* a datagram whose MoldUDP64 header follows 8 bytes of its own */

/* ---- helpers ------------------------------------------------------------- */

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Key id `id` is the same 32 bytes on every node that holds it. */
static void keyset(struct auth_keys *k, uint8_t send, const uint8_t *ids, unsigned n)
{
	memset(k, 0, sizeof(*k));
	k->n = n;
	k->send_id = send;
	for (unsigned i = 0; i < n; i++) {
		k->id[i] = ids[i];
		for (unsigned j = 0; j < AUTH_KEY_LEN; j++)
			k->key[i][j] = (uint8_t)(ids[i] * 31 + j);
	}
}

static void node(struct auth *a, const char *cluster, uint8_t send, const uint8_t *ids,
		 unsigned n)
{
	struct auth_keys k;

	keyset(&k, send, ids, n);
	ck_assert_int_eq(auth_init(a, cluster, &k), 0);
}

static const uint8_t ID1[] = { 1 }, ID2[] = { 2 }, ID12[] = { 1, 2 };

static struct mold_session session(void)
{
	struct mold_session s;

	ck_assert_int_eq(mold_session_set(&s, "TAPE"), MOLD_OK);
	return s;
}

/* A data packet of n blocks (block i: i % 40 bytes) at buf + off, after off
 * bytes of a prefix; its whole length. */
static size_t data_packet(uint8_t *buf, size_t off, unsigned n)
{
	struct mold_session s = session();
	struct mold_builder b;
	uint8_t block[40];

	memset(buf, 0xEE, off);
	ck_assert_int_eq(mold_build_begin(&b, buf + off, CAP - off, &s, 1000), MOLD_OK);
	for (unsigned i = 0; i < n; i++) {
		memset(block, (int)(i + 1), sizeof(block));
		ck_assert_int_eq(mold_build_add(&b, block, (uint16_t)(i % 40)), MOLD_OK);
	}
	return off + mold_build_end(&b);
}

/* Seals buf[0..len) with a for surface s, checks the trailer and the count
 * on the wire (wire), opens it with b and checks the bytes came back;
 * returns the sealed length. */
static size_t round_trip(const struct auth *a, const struct auth *b, enum auth_surface s,
			 uint8_t *buf, size_t len, size_t off, uint16_t wire)
{
	static uint8_t orig[CAP], sealed[CAP];
	size_t inner = 0;
	int64_t n;

	memcpy(orig, buf, len);
	n = auth_seal(a, s, buf, len, CAP, off);
	ck_assert_int_eq(n, (int64_t)(len + AUTH_TRAILER_LEN));
	if (off != AUTH_RAW)
		ck_assert_uint_eq(get16(buf + off + COUNT_AT), wire);
	ck_assert_uint_eq(get16(buf + len), AUTH_TRAILER_LEN - 2);
	ck_assert_uint_eq(buf[len + 2], AUTH_TRAILER_MAGIC);
	ck_assert_uint_eq(buf[len + 3], a->id[a->send]);
	ck_assert_uint_eq(auth_key_id_of(buf, (size_t)n), a->id[a->send]);
	memcpy(sealed, buf, (size_t)n);
	ck_assert_int_eq(auth_open(b, s, buf, (size_t)n, off, &inner, NULL), AUTH_OK);
	ck_assert_uint_eq(inner, len);
	ck_assert_mem_eq(buf, orig, len); /* the header's count is the packet's own again */
	if (off != AUTH_RAW)
		ck_assert_uint_eq(get16(buf + off + COUNT_AT), get16(sealed + len + 4));
	memcpy(buf, sealed, (size_t)n); /* back to the sealed datagram */
	return (size_t)n;
}

/* round_trip, then the datagram opened in place for the caller. */
static void seal_open(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t len,
		      size_t off, uint16_t wire)
{
	size_t n = round_trip(a, a, s, buf, len, off, wire), inner;

	ck_assert_int_eq(auth_open(a, s, buf, n, off, &inner, NULL), AUTH_OK);
	ck_assert_uint_eq(inner, len);
}

/* ---- round trips ------------------------------------------------------- */

START_TEST(data_round_trip)
{
	static const unsigned counts[] = { 1, 2, 7, 60 };
	static const size_t offs[] = { 0, PREFIX };
	static uint8_t buf[CAP], orig[CAP];
	struct auth a;

	node(&a, "lockstep", 1, ID1, 1);
	for (size_t o = 0; o < 2; o++) {
		for (size_t c = 0; c < 4; c++) {
			size_t off = offs[o], len = data_packet(buf, off, counts[c]), n;
			struct mold_packet p;

			memcpy(orig, buf, len);
			n = round_trip(&a, &a, AUTH_TAPE, buf, len, off, (uint16_t)(counts[c] + 1));
			/* on the wire: one block more, the trailer (Wireshark's count) */
			ck_assert_int_eq(mold_parse(buf + off, n - off, NULL, 0, &p), MOLD_OK);
			ck_assert_uint_eq(p.count, counts[c] + 1);
			memcpy(buf, orig, len);
			seal_open(&a, AUTH_TAPE, buf, len, off, (uint16_t)(counts[c] + 1));
			ck_assert_mem_eq(buf, orig, len);
			ck_assert_int_eq(mold_parse(buf + off, len - off, NULL, 0, &p), MOLD_OK);
			ck_assert_uint_eq(p.count, counts[c]);
			ck_assert_int_eq(p.kind, MOLD_DATA);
		}
	}
}
END_TEST

START_TEST(control_round_trip)
{
	struct mold_session s = session();
	struct mold_request r = { .session = s, .seq = 77, .count = 64 }, back;
	uint8_t buf[CAP];
	struct mold_packet p;
	struct auth a;
	size_t n;

	node(&a, "lockstep", 1, ID1, 1);
	n = round_trip(&a, &a, AUTH_TAPE, buf, mold_build_heartbeat(buf, &s, 5), 0, 1);
	ck_assert_int_eq(mold_parse(buf, n, NULL, 0, &p), MOLD_OK); /* one block: the trailer */
	ck_assert_uint_eq(p.count, 1);
	seal_open(&a, AUTH_TAPE, buf, mold_build_heartbeat(buf, &s, 5), 0, 1);
	ck_assert_int_eq(mold_parse(buf, MOLD_HEADER_LEN, NULL, 0, &p), MOLD_OK);
	ck_assert_int_eq(p.kind, MOLD_HEARTBEAT);
	ck_assert_uint_eq(p.seq, 5);

	seal_open(&a, AUTH_EXEC, buf, mold_build_end_of_session(buf, &s, 9), 0, 1);
	ck_assert_int_eq(mold_parse(buf, MOLD_HEADER_LEN, NULL, 0, &p), MOLD_OK);
	ck_assert_int_eq(p.kind, MOLD_END_OF_SESSION);

	seal_open(&a, AUTH_REQUEST, buf, mold_build_request(buf, &r), 0, 1);
	ck_assert_int_eq(mold_parse_request(buf, MOLD_REQUEST_LEN, &s, &back), MOLD_OK);
	ck_assert_uint_eq(back.seq, 77);
	ck_assert_uint_eq(back.count, 64);

	/* behind a prefix too */
	memset(buf, 0xEE, PREFIX);
	seal_open(&a, AUTH_CMD, buf, PREFIX + mold_build_heartbeat(buf + PREFIX, &s, 3), PREFIX,
		  1);
	ck_assert_int_eq(mold_parse(buf + PREFIX, MOLD_HEADER_LEN, NULL, 0, &p), MOLD_OK);
	ck_assert_int_eq(p.kind, MOLD_HEARTBEAT);
}
END_TEST

START_TEST(raw_round_trip)
{
	static const size_t lens[] = { 0, 1, 19, 20, 21, 57, 1400 };
	uint8_t buf[CAP];
	struct auth a;

	node(&a, "lockstep", 1, ID1, 1);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (size_t j = 0; j < lens[i]; j++)
			buf[j] = (uint8_t)(j * 7 + i);
		/* the bytes are not a MoldUDP64 header: nothing of them moves */
		round_trip(&a, &a, AUTH_RAFT, buf, lens[i], AUTH_RAW, 0);
		round_trip(&a, &a, AUTH_VOTE, buf, lens[i], AUTH_RAW, 0);
	}
}
END_TEST

START_TEST(off_passes_through)
{
	uint8_t buf[CAP], orig[CAP];
	struct auth off;
	size_t len, inner = 0;

	auth_init_off(&off);
	ck_assert(!off.on);
	len = data_packet(buf, 0, 3);
	memcpy(orig, buf, len);
	ck_assert_int_eq(auth_seal(&off, AUTH_TAPE, buf, len, len, 0), (int64_t)len);
	ck_assert_mem_eq(buf, orig, len);
	ck_assert_int_eq(auth_open(&off, AUTH_TAPE, buf, len, 0, &inner, NULL), AUTH_OK);
	ck_assert_uint_eq(inner, len);
	ck_assert_int_eq(auth_open(&off, AUTH_RAFT, buf, 3, AUTH_RAW, &inner, NULL), AUTH_OK);
	ck_assert_uint_eq(inner, 3);
}
END_TEST

/* ---- errors --------------------------------------------------------------- */

/* auth_open fails with want and leaves buf[0..len) as it was. */
static void open_fails(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t len,
		       size_t off, int want)
{
	static uint8_t before[CAP];
	size_t inner = 12345;

	memcpy(before, buf, len);
	ck_assert_int_eq(auth_open(a, s, buf, len, off, &inner, NULL), want);
	ck_assert_uint_eq(inner, 12345);
	ck_assert_mem_eq(buf, before, len);
}

START_TEST(error_codes)
{
	static uint8_t big[0x10000 + AUTH_TRAILER_LEN];
	struct mold_session s = session();
	uint8_t buf[CAP], before[CAP];
	struct auth a, b;
	size_t len, n;

	memset(buf, 0, sizeof(buf));
	node(&a, "lockstep", 1, ID1, 1);
	node(&b, "lockstep", 2, ID2, 1);
	/* short: below a trailer, below a header and a trailer, an unsealed heartbeat */
	open_fails(&a, AUTH_RAFT, buf, AUTH_TRAILER_LEN - 1, AUTH_RAW, AUTH_E_SHORT);
	open_fails(&a, AUTH_TAPE, buf, MOLD_HEADER_LEN + AUTH_TRAILER_LEN - 1, 0, AUTH_E_SHORT);
	open_fails(&a, AUTH_TAPE, buf, mold_build_heartbeat(buf, &s, 1), 0, AUTH_E_SHORT);
	ck_assert_int_eq(auth_seal(&a, AUTH_TAPE, buf, 10, CAP, 0), AUTH_E_SHORT);
	/* trailer: an unsealed data packet */
	len = data_packet(buf, 0, 8);
	open_fails(&a, AUTH_TAPE, buf, len, 0, AUTH_E_TRAILER);
	/* unknown key */
	n = (size_t)auth_seal(&b, AUTH_TAPE, buf, len, CAP, 0);
	open_fails(&a, AUTH_TAPE, buf, n, 0, AUTH_E_KEY);
	/* count: a tag over a header whose count is not the trailer's plus one (a
	 * data packet sealed as if it were raw) */
	len = data_packet(buf, 0, 5);
	n = (size_t)auth_seal(&a, AUTH_TAPE, buf, len, CAP, AUTH_RAW);
	open_fails(&a, AUTH_TAPE, buf, n, 0, AUTH_E_COUNT);
	/* no space: the buffer, or the largest datagram, cannot take the trailer */
	len = data_packet(buf, 0, 5);
	memcpy(before, buf, len);
	ck_assert_int_eq(auth_seal(&a, AUTH_TAPE, buf, len, len + AUTH_TRAILER_LEN - 1, 0),
			 AUTH_E_NOSPACE);
	ck_assert_mem_eq(buf, before, len);
	ck_assert_int_eq(auth_seal(&a, AUTH_RAFT, big, 0xFFFF - AUTH_TRAILER_LEN + 1, sizeof(big),
				   AUTH_RAW),
			 AUTH_E_NOSPACE);
	ck_assert_int_eq(auth_seal(&a, AUTH_RAFT, big, 0xFFFF - AUTH_TRAILER_LEN, sizeof(big),
				   AUTH_RAW),
			 0xFFFF);
	for (int e = 0; e >= -AUTH_N_ERRORS; e--)
		ck_assert_str_ne(auth_strerror(e), "unknown error");
	ck_assert_str_eq(auth_strerror(-100), "unknown error");
}
END_TEST

/* A header count of 0xFFFE or more with blocks after it: no count to add
 * one to when sealing, and no valid trailer count when opening. */
START_TEST(count_limits)
{
	uint8_t buf[CAP], tag_in[CAP];
	struct auth a;
	size_t len = data_packet(buf, 0, 1);

	node(&a, "lockstep", 1, ID1, 1);
	buf[COUNT_AT] = 0xFF;
	buf[COUNT_AT + 1] = 0xFE;
	ck_assert_int_eq(auth_seal(&a, AUTH_TAPE, buf, len, CAP, 0), AUTH_E_NOSPACE);
	ck_assert_uint_eq(get16(buf + COUNT_AT), 0xFFFE);
	/* forged with the right key: header 0xFFFF, trailer 0xFFFE */
	buf[COUNT_AT + 1] = 0xFF;
	memcpy(tag_in, buf, len);
	tag_in[len] = 0;
	tag_in[len + 1] = AUTH_TRAILER_LEN - 2;
	tag_in[len + 2] = AUTH_TRAILER_MAGIC;
	tag_in[len + 3] = 1;
	tag_in[len + 4] = 0xFF;
	tag_in[len + 5] = 0xFE;
	crypto_shorthash_siphashx24(tag_in + len + 6, tag_in, len + 6, a.sub[0][AUTH_TAPE]);
	open_fails(&a, AUTH_TAPE, tag_in, len + AUTH_TRAILER_LEN, 0, AUTH_E_COUNT);
}
END_TEST

/* Every single flipped bit of a sealed datagram fails: the tag, except in
 * the trailer's length and magic (not a trailer) and its key id (a key
 * this node does not hold). */
static void flip_all(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t n,
		     size_t off)
{
	size_t t = n - AUTH_TRAILER_LEN;

	for (size_t i = 0; i < n; i++) {
		for (int bit = 0; bit < 8; bit++) {
			int want = AUTH_E_TAG;

			if (i >= t && i < t + 3)
				want = AUTH_E_TRAILER;
			else if (i == t + 3)
				want = AUTH_E_KEY;
			buf[i] ^= (uint8_t)(1u << bit);
			open_fails(a, s, buf, n, off, want);
			buf[i] ^= (uint8_t)(1u << bit);
		}
	}
}

START_TEST(flipped_bits)
{
	struct mold_session s = session();
	uint8_t buf[CAP];
	struct auth a;
	size_t n;

	node(&a, "lockstep", 1, ID1, 1);
	n = (size_t)auth_seal(&a, AUTH_TAPE, buf, data_packet(buf, 0, 3), CAP, 0);
	flip_all(&a, AUTH_TAPE, buf, n, 0);
	n = (size_t)auth_seal(&a, AUTH_CMD, buf, mold_build_heartbeat(buf, &s, 7), CAP, 0);
	flip_all(&a, AUTH_CMD, buf, n, 0);
	n = (size_t)auth_seal(&a, AUTH_EXEC, buf, data_packet(buf, PREFIX, 2), CAP, PREFIX);
	flip_all(&a, AUTH_EXEC, buf, n, PREFIX);
	memset(buf, 0x5A, 33);
	n = (size_t)auth_seal(&a, AUTH_RAFT, buf, 33, CAP, AUTH_RAW);
	flip_all(&a, AUTH_RAFT, buf, n, AUTH_RAW);
}
END_TEST

START_TEST(other_cluster_or_surface)
{
	uint8_t buf[CAP];
	struct auth a, other, wrong;
	struct auth_keys k;
	size_t n;

	node(&a, "lockstep", 1, ID1, 1);
	node(&other, "lockstep2", 1, ID1, 1); /* the same key, another cluster */
	keyset(&k, 1, ID1, 1);
	k.key[0][5] ^= 1; /* the same id, another key */
	ck_assert_int_eq(auth_init(&wrong, "lockstep", &k), 0);
	n = (size_t)auth_seal(&a, AUTH_TAPE, buf, data_packet(buf, 0, 4), CAP, 0);
	open_fails(&other, AUTH_TAPE, buf, n, 0, AUTH_E_TAG);
	open_fails(&wrong, AUTH_TAPE, buf, n, 0, AUTH_E_TAG);
	for (int s = 0; s < AUTH_N_SURFACES; s++)
		if (s != AUTH_TAPE)
			open_fails(&a, (enum auth_surface)s, buf, n, 0, AUTH_E_TAG);
	n = (size_t)auth_seal(&a, AUTH_RAFT, buf, 30, CAP, AUTH_RAW);
	open_fails(&a, AUTH_VOTE, buf, n, AUTH_RAW, AUTH_E_TAG);
}
END_TEST

START_TEST(init_refuses)
{
	struct auth_keys k;
	struct auth a;

	keyset(&k, 1, ID1, 1);
	ck_assert_int_eq(auth_init(&a, "", &k), -EINVAL);
	ck_assert_int_eq(auth_init(&a, "two words", &k), -EINVAL);
	ck_assert_int_eq(auth_init(&a, "abcdefghijklmnopqrstuvwxyz012345", &k), -EINVAL);
	ck_assert_int_eq(auth_init(&a, "abcdefghijklmnopqrstuvwxyz01234", &k), 0);
	k.send_id = 2;
	ck_assert_int_eq(auth_init(&a, "lockstep", &k), -EINVAL);
	k.n = 0;
	ck_assert_int_eq(auth_init(&a, "lockstep", &k), -EINVAL);
}
END_TEST

/* ---- a rotation ------------------------------------------------------------ */

/* What b makes of what a sealed: AUTH_OK (with the index of the key that
 * matched in *ki) or the error. */
static int accepts(const struct auth *a, const struct auth *b, unsigned *ki)
{
	uint8_t buf[CAP];
	size_t len = data_packet(buf, 0, 2), inner;
	size_t n = (size_t)auth_seal(a, AUTH_EXEC, buf, len, CAP, 0);

	return auth_open(b, AUTH_EXEC, buf, n, 0, &inner, ki);
}

START_TEST(rotation)
{
	struct auth A, B, C; /* 1,2 sending 1; 1,2 sending 2; 2 only */
	unsigned ki = 99;

	node(&A, "lockstep", 1, ID12, 2);
	node(&B, "lockstep", 2, ID12, 2);
	node(&C, "lockstep", 2, ID2, 1);
	/* A sends with key 1: A and B accept it, C (key 1 gone) does not */
	ck_assert_int_eq(accepts(&A, &A, &ki), AUTH_OK);
	ck_assert_uint_eq(ki, 0);
	ck_assert_int_eq(accepts(&A, &B, &ki), AUTH_OK);
	ck_assert_uint_eq(ki, 0);
	ck_assert_int_eq(accepts(&A, &C, &ki), AUTH_E_KEY);
	/* B and C send with key 2: everyone accepts */
	ck_assert_int_eq(accepts(&B, &A, &ki), AUTH_OK);
	ck_assert_uint_eq(ki, 1);
	ck_assert_int_eq(accepts(&B, &B, &ki), AUTH_OK);
	ck_assert_int_eq(accepts(&B, &C, &ki), AUTH_OK);
	ck_assert_uint_eq(ki, 0);
	ck_assert_int_eq(accepts(&C, &A, &ki), AUTH_OK);
	ck_assert_uint_eq(ki, 1);
	ck_assert_int_eq(accepts(&C, &B, &ki), AUTH_OK);
	ck_assert_int_eq(accepts(&C, &C, &ki), AUTH_OK);
}
END_TEST

/* ---- key files -------------------------------------------------------------- */

#define HEX1 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HEX2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

/* The parser refuses text[0..len) saying `why`. */
static void refused(const char *text, size_t len, const char *why)
{
	struct auth_keys k;
	char err[160] = "";

	ck_assert_int_eq(auth_keyfile_parse(text, len, &k, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, why), "'%s': '%s' does not say '%s'", text, err, why);
}
#define REFUSED(text, why) refused(text, sizeof(text) - 1, why)

START_TEST(keyfile_errors)
{
	REFUSED("", "no cluster-key line");
	REFUSED("# nothing\n\n", "no cluster-key line");
	REFUSED("cluster-key 1 " HEX1 "x\n", "line 1: a key is 64 hex digits");
	REFUSED("cluster-key 1 zz112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
		"line 1: a key is 64 hex digits");
	REFUSED("cluster-key 1 00112233\n", "a key is 64 hex digits");
	REFUSED("cluster-key 1 " HEX1 "\ncluster-key 1 " HEX2 "\nsend 1\n",
		"line 2: key id 1 given twice");
	REFUSED("cluster-key 0 " HEX1 "\n", "line 1: a key id is a number from 1 to 255");
	REFUSED("cluster-key 256 " HEX1 "\n", "a key id is a number from 1 to 255");
	REFUSED("cluster-key -1 " HEX1 "\n", "a key id is a number from 1 to 255");
	REFUSED("cluster-key 1 " HEX1 "\nsend 2\n", "line 2: send 2 names no key of the file");
	REFUSED("cluster-key 1 " HEX1 "\nsend 0\n", "line 2: a key id");
	REFUSED("cluster-key 1 " HEX1 "\ncluster-key 2 " HEX2 "\n",
		"2 keys and no 'send ID' line");
	REFUSED("cluster-key 1 " HEX1 "\n\0\n", "line 2: a NUL byte");
	REFUSED("cluster-key 1 " HEX1 "\0", "line 1: a NUL byte");
	REFUSED("cluster-key 1 " HEX1 "\ncluster-key 2 " HEX1 "\ncluster-key 3 " HEX1
		"\ncluster-key 4 " HEX1 "\ncluster-key 5 " HEX1 "\nsend 1\n",
		"line 5: more than 4 keys");
	REFUSED("cluster-key 1 " HEX1 "\nsend 1\nsend 1\n", "line 3: send given twice");
	REFUSED("cluster-key 1 " HEX1 " extra\n", "line 1: expected");
	REFUSED("key 1 " HEX1 "\n", "line 1: expected 'cluster-key ID HEX' or 'send ID'");
	REFUSED("send\n", "expected");
}
END_TEST

START_TEST(keyfile_accepts)
{
	/* comments, blank lines, CRs, tabs, upper-case hex, no newline at the end */
	static const char text[] =
		"# a comment\r\n\n  cluster-key\t7  " HEX1 "  # old\r\n"
		"cluster-key 255 FFEEDDCCBBAA99887766554433221100ffeeddccbbaa99887766554433221100\n"
		"send 255";
	struct auth_keys k;
	char err[160];

	ck_assert_int_eq(auth_keyfile_parse(text, sizeof(text) - 1, &k, err, sizeof(err)), 0);
	ck_assert_uint_eq(k.n, 2);
	ck_assert_uint_eq(k.id[0], 7);
	ck_assert_uint_eq(k.id[1], 255);
	ck_assert_uint_eq(k.send_id, 255);
	ck_assert_uint_eq(k.key[0][0], 0x00);
	ck_assert_uint_eq(k.key[0][31], 0xff);
	ck_assert_uint_eq(k.key[1][0], 0xff);
	ck_assert_uint_eq(k.key[1][31], 0x00);
	/* one key: send is that key */
	ck_assert_int_eq(auth_keyfile_parse("cluster-key 9 " HEX2, 14 + 64, &k, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(k.send_id, 9);
}
END_TEST

START_TEST(keyfile_round_trip)
{
	static const uint8_t ids[] = { 7, 255, 1, 100 };
	struct auth_keys k, back;
	char text[2048], err[160];

	for (unsigned n = 1; n <= AUTH_MAX_KEYS; n++) {
		for (unsigned s = 0; s < n; s++) {
			size_t len;

			memset(&k, 0, sizeof(k));
			k.n = n;
			memcpy(k.id, ids, n);
			randombytes_buf(k.key, sizeof(k.key[0]) * n);
			k.send_id = ids[s];
			len = auth_keyfile_format(&k, text, sizeof(text));
			ck_assert_uint_gt(len, 0);
			ck_assert_int_eq(auth_keyfile_parse(text, len, &back, err, sizeof(err)), 0);
			ck_assert_uint_eq(back.n, n);
			ck_assert_uint_eq(back.send_id, k.send_id);
			ck_assert_mem_eq(back.id, k.id, n);
			ck_assert_mem_eq(back.key, k.key, sizeof(k.key[0]) * n);
		}
	}
	ck_assert_uint_eq(auth_keyfile_format(&k, text, 100), 0); /* too small */
	ck_assert_uint_eq(auth_keyfile_format(&k, text, 20), 0);
}
END_TEST

/* Writes text into dir/name with mode; its path in path. */
static void write_file(char *path, size_t cap, const char *dir, const char *name,
		       const char *text, size_t len, mode_t mode)
{
	int fd;

	snprintf(path, cap, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

START_TEST(keyfile_load)
{
	static const char good[] = "cluster-key 1 " HEX1 "\n";
	static char big[3000];
	char dir[1024], path[1200], err[512];
	struct auth_keys k;

	ck_assert_int_eq(testutil_mkdtemp(dir, sizeof(dir), testutil_tmp_parent(), "auth"), 0);
	write_file(path, sizeof(path), dir, "k", good, sizeof(good) - 1, 0640);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), 0);
	ck_assert_uint_eq(k.id[0], 1);
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "others may read it"));
	ck_assert_int_eq(chmod(path, 0602), 0);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), 0);
	write_file(path, sizeof(path), dir, "bad", "bogus\n", 6, 0600);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "/bad: line 1"));
	memset(big, '#', sizeof(big));
	write_file(path, sizeof(path), dir, "big", big, sizeof(big), 0600);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), -EINVAL);
	snprintf(path, sizeof(path), "%s/none", dir);
	ck_assert_int_eq(auth_keyfile_load(path, &k, err, sizeof(err)), -ENOENT);
	ck_assert_int_eq(testutil_rm_rf(dir), 0);
}
END_TEST

/* ---- auth_node ---------------------------------------------------------------- */

/* A counter of auth_node_stats(), or UINT64_MAX when there is none. */
static uint64_t stat_of(const char *name)
{
	static struct counters cs;

	counters_reset(&cs);
	auth_node_stats(&cs);
	for (size_t i = 0; i < cs.n; i++)
		if (strcmp(cs.c[i].name, name) == 0)
			return cs.c[i].value;
	return UINT64_MAX;
}

/* A key file of keys ids[0..n) sending with send in dir/name (its path). */
static void key_file(char *path, size_t cap, const char *dir, const char *name, uint8_t send,
		     const uint8_t *ids, unsigned n)
{
	struct auth_keys k;
	char text[2048];

	keyset(&k, send, ids, n);
	write_file(path, cap, dir, name, text, auth_keyfile_format(&k, text, sizeof(text)),
		   0640);
}

/* A sealed heartbeat of surface s in buf: its length. */
static size_t sealed_heartbeat(enum auth_surface s, uint8_t *buf)
{
	struct mold_session ses = session();

	return auth_node_seal(s, buf, mold_build_heartbeat(buf, &ses, 1), CAP, 0);
}

static void node_drops(void)
{
	struct sockaddr_in from = { .sin_family = AF_INET, .sin_port = htons(4000) };
	uint8_t buf[CAP];
	size_t len;

	from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	len = sealed_heartbeat(AUTH_CMD, buf);
	ck_assert_uint_eq(len, MOLD_HEADER_LEN + AUTH_TRAILER_LEN);
	ck_assert_int_eq(auth_node_check(AUTH_CMD, buf, &len, 0, &from), 0);
	ck_assert_uint_eq(len, MOLD_HEADER_LEN);
	len = sealed_heartbeat(AUTH_CMD, buf);
	buf[len - 1] ^= 0x80;
	ck_assert_int_eq(auth_node_check(AUTH_CMD, buf, &len, 0, &from), -1);
	ck_assert_uint_eq(len, MOLD_HEADER_LEN + AUTH_TRAILER_LEN); /* untouched */
	len = sealed_heartbeat(AUTH_CMD, buf);
	ck_assert_int_eq(auth_node_check(AUTH_TAPE, buf, &len, 0, &from), -1);
	len = MOLD_HEADER_LEN; /* unsealed */
	ck_assert_int_eq(auth_node_check(AUTH_REQUEST, buf, &len, 0, NULL), -1);
	ck_assert_uint_eq(auth_node_dropped(AUTH_CMD), 1);
	ck_assert_uint_eq(auth_node_dropped(AUTH_TAPE), 1);
	ck_assert_uint_eq(auth_node_dropped(AUTH_REQUEST), 1);
	ck_assert_uint_eq(auth_node_dropped(AUTH_EXEC), 0);
	ck_assert_uint_eq(auth_node_dropped(AUTH_RAFT), 0);
	ck_assert_uint_eq(auth_node_dropped(AUTH_VOTE), 0);
	ck_assert_uint_eq(stat_of("auth_dropped_commands"), 1);
	ck_assert_uint_eq(stat_of("auth_dropped_tape"), 1);
	ck_assert_uint_eq(stat_of("auth_dropped_requests"), 1);
	ck_assert_uint_eq(stat_of("auth_dropped_from_127_0_0_1_4000"), 2);
	ck_assert_uint_eq(stat_of("auth_dropped_from_others"), 1); /* no address */
	ck_assert_uint_eq(stat_of("auth_rx_key_1"), 1);
	ck_assert_uint_eq(stat_of("auth_on"), 1);
}

START_TEST(node_setup_and_drops)
{
	char dir[1024], path[1200], bad[1200], err[512];
	uint8_t buf[CAP];
	size_t len;

	ck_assert_int_eq(testutil_mkdtemp(dir, sizeof(dir), testutil_tmp_parent(), "auth"), 0);
	key_file(path, sizeof(path), dir, "k1", 1, ID1, 1);
	ck_assert_int_eq(auth_node_setup(AUTH_MODE_ON, "lockstep", path, err, sizeof(err)), 0);
	ck_assert(auth_node()->on);
	ck_assert_uint_eq(auth_node_reserve(), AUTH_TRAILER_LEN);
	ck_assert_str_eq(auth_node_describe(),
			 "on (cluster lockstep, tagging with key 1, accepting 1)");
	node_drops();
	/* no room for the trailer: sent untagged */
	ck_assert_uint_eq(auth_node_seal(AUTH_CMD, buf, MOLD_HEADER_LEN, MOLD_HEADER_LEN, 0),
			  MOLD_HEADER_LEN);
	/* a file that does not load: the keys in use stay */
	snprintf(bad, sizeof(bad), "%s/none", dir);
	ck_assert_int_eq(auth_node_setup(AUTH_MODE_ON, "lockstep", bad, err, sizeof(err)),
			 -ENOENT);
	ck_assert_int_lt(auth_node_setup(AUTH_MODE_ON, "a b", path, err, sizeof(err)), 0);
	ck_assert_str_eq(auth_node_describe(),
			 "on (cluster lockstep, tagging with key 1, accepting 1)");
	/* a rotation's step: key 1's count carries over */
	key_file(path, sizeof(path), dir, "k12", 2, ID12, 2);
	ck_assert_int_eq(auth_node_setup(AUTH_MODE_ON, "lockstep", path, err, sizeof(err)), 0);
	ck_assert_str_eq(auth_node_describe(),
			 "on (cluster lockstep, tagging with key 2, accepting 1 2)");
	ck_assert_uint_eq(stat_of("auth_rx_key_1"), 1);
	ck_assert_uint_eq(stat_of("auth_rx_key_2"), 0);
	/* off: anything passes, the drops so far stay counted */
	ck_assert_int_eq(auth_node_setup(AUTH_MODE_OFF, "lockstep", bad, err, sizeof(err)), 0);
	ck_assert_uint_eq(auth_node_reserve(), 0);
	ck_assert_ptr_nonnull(strstr(auth_node_describe(), "OFF"));
	len = 3;
	ck_assert_int_eq(auth_node_check(AUTH_RAFT, buf, &len, AUTH_RAW, NULL), 0);
	ck_assert_uint_eq(len, 3);
	ck_assert_uint_eq(auth_node_dropped(AUTH_CMD), 1);
	ck_assert_uint_eq(stat_of("auth_on"), 0);
	ck_assert_int_eq(testutil_rm_rf(dir), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("core");

	if (sodium_init() < 0)
		return 1;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, data_round_trip);
	tcase_add_test(tc, control_round_trip);
	tcase_add_test(tc, raw_round_trip);
	tcase_add_test(tc, off_passes_through);
	tcase_add_test(tc, error_codes);
	tcase_add_test(tc, count_limits);
	tcase_add_test(tc, flipped_bits);
	tcase_add_test(tc, other_cluster_or_surface);
	tcase_add_test(tc, init_refuses);
	tcase_add_test(tc, rotation);
	tcase_add_test(tc, keyfile_errors);
	tcase_add_test(tc, keyfile_accepts);
	tcase_add_test(tc, keyfile_round_trip);
	tcase_add_test(tc, keyfile_load);
	tcase_add_test(tc, node_setup_and_drops);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
