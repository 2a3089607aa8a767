/* Matcher checkpoints: the input is one datagram of the checkpoint group.
 * Whatever matcher_checkpoint_decode() accepts is re-encoded into the
 * identical bytes and decodes again to the same values; whatever it refuses
 * leaves the output untouched; and the vote over hashes taken from the input
 * stays within its contract. Aborts on a broken invariant. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

#define CKPT_FUZZ_PEERS 24 /* more than a matcher tells apart: the vote takes any n */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct matcher_checkpoint c, again, sentinel;
	uint8_t out[MATCHER_CKPT_LEN];
	uint64_t others[CKPT_FUZZ_PEERS], maj = 0;
	int rc;

	memset(&c, 0xa5, sizeof(c));
	sentinel = c;
	rc = matcher_checkpoint_decode(data, size, &c);
	if (rc < 0) {
		check(rc == -EMSGSIZE || rc == -EBADMSG || rc == -EPROTONOSUPPORT);
		check(memcmp(&c, &sentinel, sizeof(c)) == 0);
	} else {
		check(rc == 0 && size == MATCHER_CKPT_LEN);
		check(c.seq != 0 && c.partition <= 0xffff);
		check(strlen(c.name) >= 1 && strlen(c.name) <= MATCHER_CKPT_NAME_LEN);
		check(matcher_checkpoint_encode(out, &c) == MATCHER_CKPT_LEN);
		check(memcmp(out, data, MATCHER_CKPT_LEN) == 0);
		check(matcher_checkpoint_decode(out, sizeof(out), &again) == 0);
		check(again.seq == c.seq && again.hash == c.hash &&
		      again.partition == c.partition && strcmp(again.name, c.name) == 0);
	}

	/* The vote: the first byte is the number of replicas, then u64 hashes
	 * (the first is this replica's). */
	if (size >= 9) {
		unsigned replicas = data[0] % 20;
		size_t n = (size - 9) / 8;
		uint64_t own = get64(data + 1);
		enum matcher_vote v;

		if (n > CKPT_FUZZ_PEERS)
			n = CKPT_FUZZ_PEERS;
		for (size_t i = 0; i < n; i++)
			others[i] = get64(data + 9 + 8 * i);
		v = matcher_checkpoint_vote(own, others, n, replicas, &maj);
		size_t need = replicas / 2 + 1, mine = 1, best = 0;

		for (size_t i = 0; i < n; i++) {
			size_t same = 0;

			mine += others[i] == own;
			for (size_t j = 0; j < n; j++)
				same += others[j] == others[i];
			if (others[i] != own && same > best)
				best = same;
		}
		if (replicas == 0)
			check(v == MATCHER_VOTE_PENDING);
		else if (v == MATCHER_VOTE_AGREED)
			check(mine >= need && maj == own);
		else if (v == MATCHER_VOTE_DIVERGED)
			check(mine < need && 1 + n <= replicas && maj != own && best >= need);
		else
			check(mine < need && (best < need || 1 + n > replicas));
	}
	return 0;
}
