/* Cluster datagram authentication (common/auth.h): the input is one
 * datagram, under fixed keys (ids 1 and 2, sending with 1, cluster "fuzz").
 *  - auth_open() of the input as it came, for every surface, with the
 *    MoldUDP64 header at 0, behind an 8-byte prefix and as a raw datagram:
 *    an auth_err that open can give, the buffer untouched on failure; on
 *    success the trailer cut off and its key id one that is held.
 *  - the input sealed (same surfaces and offsets): refused only for what
 *    auth_seal() refuses (too short a header, a count that cannot take one
 *    more, too long), else it opens again into the very input; under
 *    another surface or by a node without the key it fails; a packet that
 *    mold_parse() took before sealing it takes after with one block more
 *    (the trailer: Wireshark's count).
 * Aborts on a broken invariant. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "moldudp64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX 8
#define COUNT_AT 18 /* the count in a MoldUDP64 header */
#define N_OFFS 3

static const size_t offs[N_OFFS] = { 0, PREFIX, AUTH_RAW };

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_auth: invariant broken: %s\n", what);
		abort();
	}
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* keys[0]: ids 1 and 2, sending with 1; keys[1]: id 2 only. */
static const struct auth *fuzz_keys(int which)
{
	static struct auth a[2];
	static int ready;

	if (!ready) {
		struct auth_keys k = { .n = 2, .id = { 1, 2 }, .send_id = 1 };

		for (unsigned j = 0; j < AUTH_KEY_LEN; j++) {
			k.key[0][j] = (uint8_t)(0x10 + j);
			k.key[1][j] = (uint8_t)(0x80 + j);
		}
		check(auth_init(&a[0], "fuzz", &k) == 0, "auth_init");
		k.n = 1;
		k.id[0] = 2;
		k.send_id = 2;
		memcpy(k.key[0], k.key[1], AUTH_KEY_LEN);
		check(auth_init(&a[1], "fuzz", &k) == 0, "auth_init of key 2");
		ready = 1;
	}
	return &a[which];
}

/* auth_open() of the input as it came. */
static void open_as_is(const uint8_t *data, size_t size, uint8_t *buf, enum auth_surface s,
		       size_t off)
{
	const struct auth *a = fuzz_keys(0);
	size_t inner = 7;
	unsigned ki = 99;
	int r;

	memcpy(buf, data, size);
	r = auth_open(a, s, buf, size, off, &inner, &ki);
	check(r <= AUTH_OK && r >= AUTH_E_COUNT, "open: an error open cannot give");
	if (r != AUTH_OK) {
		check(memcmp(buf, data, size) == 0 && inner == 7, "open: failed, yet wrote");
		return;
	}
	check(inner == size - AUTH_TRAILER_LEN && ki < a->n, "open: inner length or key");
	check(auth_key_id_of(data, size) == a->id[ki], "open: key id of the trailer");
	if (off == AUTH_RAW) {
		check(memcmp(buf, data, inner) == 0, "open: changed a raw datagram");
		return;
	}
	/* nothing but the header's count */
	check(memcmp(buf, data, off + COUNT_AT) == 0 &&
		      memcmp(buf + off + COUNT_AT + 2, data + off + COUNT_AT + 2,
			     inner - off - COUNT_AT - 2) == 0,
	      "open: changed more than the count");
}

/* What auth_seal() must refuse of the input, or AUTH_OK. */
static int seal_refuses(const uint8_t *data, size_t size, size_t off)
{
	if (size + AUTH_TRAILER_LEN > 0xFFFF)
		return AUTH_E_NOSPACE;
	if (off == AUTH_RAW)
		return AUTH_OK;
	if (size < off + MOLD_HEADER_LEN)
		return AUTH_E_SHORT;
	if (size > off + MOLD_HEADER_LEN && get16(data + off + COUNT_AT) >= 0xFFFE)
		return AUTH_E_NOSPACE;
	return AUTH_OK;
}

/* The sealed packet is a MoldUDP64 packet with one block more. */
static void one_block_more(const uint8_t *data, size_t size, const uint8_t *sealed, size_t off)
{
	struct mold_packet p, q;
	uint16_t want;
	int r;

	if (off == AUTH_RAW || size + AUTH_TRAILER_LEN > MOLD_MAX_PACKET + off ||
	    mold_parse(data + off, size - off, NULL, 0, &p) != MOLD_OK)
		return;
	want = p.kind == MOLD_DATA ? (uint16_t)(p.count + 1) : 1;
	r = mold_parse(sealed + off, size + AUTH_TRAILER_LEN - off, NULL, 0, &q);
	if (p.seq > UINT64_MAX - want) {
		check(r == MOLD_E_SEQ_WRAP, "sealed: the sequence number wraps");
		return;
	}
	check(r == MOLD_OK && q.kind == MOLD_DATA && q.count == want, "sealed: not one block more");
}

/* Seals the input, then opens it: the input again. */
static void seal_open(const uint8_t *data, size_t size, uint8_t *buf, enum auth_surface s,
		      size_t off)
{
	const struct auth *a = fuzz_keys(0), *only2 = fuzz_keys(1);
	size_t n, inner = 0;
	unsigned ki = 99;
	int64_t r, want = seal_refuses(data, size, off);

	memcpy(buf, data, size);
	r = auth_seal(a, s, buf, size, size + AUTH_TRAILER_LEN, off);
	check(r == (want < 0 ? want : (int64_t)(size + AUTH_TRAILER_LEN)),
	      "seal: not what auth_seal gives");
	if (r < 0) {
		check(memcmp(buf, data, size) == 0, "seal: refused, yet wrote");
		return;
	}
	n = (size_t)r;
	one_block_more(data, size, buf, off);
	check(auth_open(only2, s, buf, n, off, &inner, NULL) == AUTH_E_KEY, "open without key 1");
	check(auth_open(a, (enum auth_surface)((s + 1) % AUTH_N_SURFACES), buf, n, off, &inner,
			NULL) == AUTH_E_TAG,
	      "open on another surface");
	check(auth_open(a, s, buf, n, off, &inner, &ki) == AUTH_OK, "sealed, then refused");
	check(inner == size && ki == a->send && memcmp(buf, data, size) == 0,
	      "sealed and opened: not the input");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size + AUTH_TRAILER_LEN);

	check(buf != NULL, "malloc");
	for (int s = 0; s < AUTH_N_SURFACES; s++) {
		for (int o = 0; o < N_OFFS; o++) {
			open_as_is(data, size, buf, (enum auth_surface)s, offs[o]);
			seal_open(data, size, buf, (enum auth_surface)s, offs[o]);
		}
	}
	free(buf);
	return 0;
}
