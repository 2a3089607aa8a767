/* SoupBinTCP: input = [config byte][n][n chunk-size bytes][stream]. The
 * stream goes to a parser of each direction whole, in chunks whose sizes
 * cycle through the chunk-size bytes, and (when short) byte by byte; all must
 * give the same packets and the same final code. Every packet is rebuilt
 * into its own bytes, and login packets are decoded, rebuilt and decoded
 * again to the same fields. Aborts on a broken invariant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "soupbin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

static const uint16_t max_payloads[] = { 0, 1, 30, 46, 100, 300, 4096, SOUP_MAX_PAYLOAD };

/* What one run produced: packets as type, length (2), payload; final code. */
struct trace {
	uint8_t *b;
	size_t len, cap;
	int rc;
};

static void decode_logins(const struct soup_packet *pkt)
{
	uint8_t out[64];
	int n;

	if (pkt->type == SOUP_LOGIN_REQUEST) {
		struct soup_login l, l2;
		struct soup_packet again;

		if (soup_decode_login(pkt, &l) != SOUP_OK)
			return;
		n = soup_build_login_request(out, sizeof(out), &l);
		check(n == SOUP_LOGIN_REQUEST_LEN + 2);
		again = (struct soup_packet){ SOUP_LOGIN_REQUEST, out + 3, (uint16_t)(n - 3) };
		check(soup_decode_login(&again, &l2) == SOUP_OK);
		check(strcmp(l.username, l2.username) == 0 && strcmp(l.password, l2.password) == 0 &&
		      strcmp(l.session, l2.session) == 0 && l.seq == l2.seq);
	} else if (pkt->type == SOUP_LOGIN_ACCEPTED) {
		char s[SOUP_SESSION_LEN + 1], s2[SOUP_SESSION_LEN + 1];
		uint64_t seq, seq2;
		struct soup_packet again;

		if (soup_decode_login_accepted(pkt, s, &seq) != SOUP_OK)
			return;
		n = soup_build_login_accepted(out, sizeof(out), s, seq);
		check(n == SOUP_LOGIN_ACCEPTED_LEN + 2);
		again = (struct soup_packet){ SOUP_LOGIN_ACCEPTED, out + 3, (uint16_t)(n - 3) };
		check(soup_decode_login_accepted(&again, s2, &seq2) == SOUP_OK);
		check(strcmp(s, s2) == 0 && seq == seq2);
	}
}

/* Drains the parser into the trace; checks each packet against the stream
 * bytes it came from (`at` is the offset of the next packet in it). */
static int drain(struct soup_parser *p, struct trace *t, const uint8_t *stream, size_t *at)
{
	struct soup_packet pkt;
	int rc;

	while ((rc = soup_parser_next(p, &pkt)) == SOUP_OK) {
		const uint8_t *wire = stream + *at;
		uint8_t rebuilt[3 + 64];

		check(pkt.len <= p->max_payload);
		check(pkt.payload >= p->buf && pkt.payload + pkt.len <= p->buf + p->cap);
		check(wire[0] == (uint8_t)((pkt.len + 1) >> 8) && wire[1] == (uint8_t)(pkt.len + 1) &&
		      wire[2] == (uint8_t)pkt.type && memcmp(wire + 3, pkt.payload, pkt.len) == 0);
		if (pkt.len <= 64) {
			int n = soup_build(rebuilt, sizeof(rebuilt), pkt.type, pkt.payload, pkt.len);

			check(n == 3 + pkt.len && memcmp(rebuilt, wire, (size_t)n) == 0);
		}
		*at += 3 + (size_t)pkt.len;
		decode_logins(&pkt);
		check(t->len + 3 + pkt.len <= t->cap);
		t->b[t->len++] = (uint8_t)pkt.type;
		t->b[t->len++] = (uint8_t)(pkt.len >> 8);
		t->b[t->len++] = (uint8_t)pkt.len;
		memcpy(t->b + t->len, pkt.payload, pkt.len);
		t->len += pkt.len;
	}
	check(rc == SOUP_E_AGAIN || (rc <= SOUP_E_ZERO_LENGTH && rc >= SOUP_E_BAD_LENGTH));
	if (rc != SOUP_E_AGAIN)
		check(soup_parser_next(p, &pkt) == rc); /* sticky */
	return rc;
}

/* Feeds the stream in chunks of sizes[i % nsizes] (0: one byte), alternating
 * push() with space()/feed(). */
static void run(enum soup_direction dir, uint16_t max, size_t cap, const uint8_t *stream,
		size_t n, const uint8_t *sizes, size_t nsizes, struct trace *t)
{
	uint8_t *buf = malloc(cap);
	struct soup_parser p;
	size_t off = 0, at = 0, i = 0;

	check(buf != NULL);
	soup_parser_init(&p, buf, cap, max, dir);
	t->len = 0;
	t->rc = SOUP_E_AGAIN;
	while (off < n) {
		size_t want = nsizes ? sizes[i % nsizes] : n - off, room, k;
		uint8_t *dst;

		if (want == 0)
			want = 1;
		if (want > n - off)
			want = n - off;
		if (i & 1) {
			k = soup_parser_push(&p, stream + off, want);
		} else {
			dst = soup_parser_space(&p, &room);
			k = want < room ? want : room;
			memcpy(dst, stream + off, k);
			soup_parser_feed(&p, k);
		}
		i++;
		off += k;
		t->rc = drain(&p, t, stream, &at);
		if (k == 0) {
			/* A drained parser always has room unless it failed. */
			check(t->rc != SOUP_E_AGAIN);
			break;
		}
	}
	free(buf);
}

static void same(const struct trace *a, const struct trace *b)
{
	check(a->rc == b->rc && a->len == b->len && memcmp(a->b, b->b, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t one = 1;
	const uint8_t *sizes, *stream;
	size_t nsizes, n, cap;
	uint16_t max;
	struct trace whole, chunked, bytes;

	if (size < 2)
		return 0;
	max = max_payloads[data[0] % (sizeof(max_payloads) / sizeof(max_payloads[0]))];
	/* The smallest buffer allowed, or a roomier one. */
	cap = 3 + (size_t)max + (data[0] & 0x80 ? (size_t)data[0] * 7 : 0);
	nsizes = data[1] % 17;
	if (size < 2 + nsizes)
		return 0;
	sizes = data + 2;
	stream = data + 2 + nsizes;
	n = size - 2 - nsizes;

	whole.cap = chunked.cap = bytes.cap = n + 3;
	whole.b = malloc(whole.cap);
	chunked.b = malloc(chunked.cap);
	bytes.b = malloc(bytes.cap);
	check(whole.b && chunked.b && bytes.b);
	for (int d = 0; d < 2; d++) {
		enum soup_direction dir = d ? SOUP_FROM_SERVER : SOUP_FROM_CLIENT;

		run(dir, max, cap, stream, n, NULL, 0, &whole);
		run(dir, max, cap, stream, n, sizes, nsizes, &chunked);
		same(&whole, &chunked);
		if (n <= 512) {
			run(dir, max, cap, stream, n, &one, 1, &bytes);
			same(&whole, &bytes);
		}
	}
	free(whole.b);
	free(chunked.b);
	free(bytes.b);
	return 0;
}
