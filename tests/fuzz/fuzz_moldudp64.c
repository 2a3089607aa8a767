/* MoldUDP64: the input is one datagram. It goes through mold_parse() with no
 * expected session, with the session it carries, with another one and with a
 * small maximum, and through mold_parse_request(). Whatever parses is
 * iterated to its end and rebuilt, with mold_build_add() and with
 * reserve/commit, into the identical bytes. Aborts on a broken invariant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moldudp64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SMALL_MAX 64

static void check(int ok)
{
	if (!ok)
		abort();
}

/* Iterates every block and rebuilds the packet both ways. */
static void rebuild(const uint8_t *data, size_t size, const struct mold_packet *pkt)
{
	struct mold_builder b, r;
	struct mold_iter it;
	const uint8_t *block;
	uint64_t seq, next = pkt->seq;
	uint16_t len;
	unsigned n = 0;
	uint8_t *out = malloc(size), *out2 = malloc(size);
	size_t built;

	check(out && out2 && size >= MOLD_HEADER_LEN);
	check(pkt->blocks == data + MOLD_HEADER_LEN && pkt->blocks_len == size - MOLD_HEADER_LEN);
	check(memcmp(pkt->session.name, data, MOLD_SESSION_LEN) == 0);
	if (pkt->kind != MOLD_DATA) {
		check(size == MOLD_HEADER_LEN && pkt->count == 0);
		if (pkt->kind == MOLD_HEARTBEAT)
			built = mold_build_heartbeat(out, &pkt->session, pkt->seq);
		else
			built = mold_build_end_of_session(out, &pkt->session, pkt->seq);
		check(built == size && memcmp(out, data, size) == 0);
		mold_iter_init(&it, pkt);
		check(!mold_iter_next(&it, &seq, &block, &len));
		goto out;
	}
	check(pkt->count >= 1 && pkt->count <= MOLD_MAX_COUNT);
	check(mold_build_begin(&b, out, size, &pkt->session, pkt->seq) == MOLD_OK);
	check(mold_build_begin(&r, out2, size, &pkt->session, pkt->seq) == MOLD_OK);
	mold_iter_init(&it, pkt);
	while (mold_iter_next(&it, &seq, &block, &len)) {
		uint8_t *w;

		check(seq == next++);
		check(block >= data + MOLD_HEADER_LEN + 2 && block + len <= data + size);
		check(mold_build_add(&b, block, len) == MOLD_OK);
		w = mold_build_reserve(&r, len);
		check(w != NULL);
		memcpy(w, block, len);
		mold_build_commit(&r, len);
		n++;
	}
	check(n == pkt->count);
	/* The rebuilt packet filled the buffer exactly: nothing more fits. */
	check(mold_build_add(&b, NULL, 0) == MOLD_E_NOSPACE);
	built = mold_build_end(&b);
	check(built == size && memcmp(out, data, size) == 0);
	check(mold_build_end(&r) == size && memcmp(out2, data, size) == 0);
out:
	free(out);
	free(out2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mold_packet pkt, sentinel;
	struct mold_session same, other;
	struct mold_request req, req2;
	int rc, rc2;

	memset(&sentinel, 0xa5, sizeof(sentinel));

	/* Any session. */
	pkt = sentinel;
	rc = mold_parse(data, size, NULL, 0, &pkt);
	check(rc <= 0 && rc >= MOLD_E_SEQ_WRAP && rc != MOLD_E_SESSION && rc != MOLD_E_REQUEST_LEN);
	if (rc == MOLD_OK)
		rebuild(data, size, &pkt);
	else
		check(memcmp(&pkt, &sentinel, sizeof(pkt)) == 0);

	/* The session it carries: the same answer. Another: refused. */
	memset(same.name, ' ', MOLD_SESSION_LEN);
	memcpy(same.name, data, size < MOLD_SESSION_LEN ? size : MOLD_SESSION_LEN);
	other = same;
	other.name[size % MOLD_SESSION_LEN] ^= 0x20;
	rc2 = mold_parse(data, size, &same, 0, &pkt);
	check(size < MOLD_SESSION_LEN || rc2 == rc);
	rc2 = mold_parse(data, size, &other, 0, &pkt);
	if (size > MOLD_MAX_PACKET)
		check(rc2 == MOLD_E_OVERSIZE);
	else if (size < MOLD_HEADER_LEN)
		check(rc2 == MOLD_E_TRUNC_HEADER);
	else
		check(rc2 == MOLD_E_SESSION);

	/* A small maximum. */
	pkt = sentinel;
	rc2 = mold_parse(data, size, NULL, SMALL_MAX, &pkt);
	check(size > SMALL_MAX ? rc2 == MOLD_E_OVERSIZE : rc2 == rc);
	if (rc2 == MOLD_OK)
		rebuild(data, size, &pkt);

	/* As a request. */
	memset(&req, 0x5a, sizeof(req));
	req2 = req;
	rc = mold_parse_request(data, size, NULL, &req);
	if (size != MOLD_REQUEST_LEN) {
		check(rc == MOLD_E_REQUEST_LEN && memcmp(&req, &req2, sizeof(req)) == 0);
	} else if (rc == MOLD_OK) {
		uint8_t out[MOLD_REQUEST_LEN];

		check(req.seq <= UINT64_MAX - req.count);
		check(mold_build_request(out, &req) == MOLD_REQUEST_LEN);
		check(memcmp(out, data, MOLD_REQUEST_LEN) == 0);
		check(mold_parse_request(data, size, &req.session, &req2) == MOLD_OK);
	} else {
		check(rc == MOLD_E_SEQ_WRAP);
	}
	return 0;
}
