/* Checkpoints between the replicas of a partition: the LSCK datagram that
 * carries one replica's state hash, its codec, and the majority vote. Pure
 * functions (no socket, no log), fuzzed and unit-tested; the daemon's side,
 * sending, receiving and counting votes, is matcher/checkpoint.c. */
#ifndef LOCKSTEP_MATCHER_CHECKPOINT_H
#define LOCKSTEP_MATCHER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

/* Checkpoints: after applying every tape seq that is a multiple of
 * checkpoint_interval, a replica multicasts its state hash on
 * checkpoint_group in a datagram of MATCHER_CKPT_LEN bytes (big-endian):
 * { char magic[4] "LSCK", u16 version (1), u16 partition, char name[32]
 * (the replica's [node] name, space padded), u64 tape seq, u64 state hash
 * (engine_hash) }. Every replica compares its own hash with the others'
 * (matcher_checkpoint_vote); one that a majority of the partition's replicas
 * outvotes is diverged: it stops publishing (see lockstep-matcher(8)). */
#define MATCHER_CKPT_LEN 56
#define MATCHER_CKPT_VERSION 1u
#define MATCHER_CKPT_NAME_LEN 32

struct matcher_checkpoint {
	uint32_t partition; /* 0..65535 on the wire */
	char name[MATCHER_CKPT_NAME_LEN + 1]; /* NUL-terminated, no padding */
	uint64_t seq; /* the tape seq applied last, > 0 */
	uint64_t hash;
};

/* Encodes c into out: MATCHER_CKPT_LEN, or -EINVAL when the name is empty,
 * longer than MATCHER_CKPT_NAME_LEN, ends with a space or holds a byte that
 * is not printable ASCII, or the partition or seq cannot be sent. */
int matcher_checkpoint_encode(uint8_t out[MATCHER_CKPT_LEN], const struct matcher_checkpoint *c);
/* Decodes one datagram: 0, -EMSGSIZE (not MATCHER_CKPT_LEN bytes),
 * -EBADMSG (magic, name, seq 0) or -EPROTONOSUPPORT (another version).
 * *out is untouched on failure. */
int matcher_checkpoint_decode(const uint8_t *buf, size_t len, struct matcher_checkpoint *out);

enum matcher_vote {
	MATCHER_VOTE_PENDING, /* no majority (yet) */
	MATCHER_VOTE_AGREED, /* a majority, this replica in it */
	MATCHER_VOTE_DIVERGED, /* a majority for another hash */
};

/* The vote at one checkpoint: own hash, the hashes that n other replicas
 * reported, and the partition's number of replicas (>= 1; 0 gives PENDING).
 * A majority is replicas / 2 + 1 votes, this replica's own included.
 * AGREED when own has one (*majority = own); DIVERGED when another value
 * has one (*majority set to it), never when more replicas voted than there
 * are (1 + n > replicas: a wrong count must not stop a replica); PENDING
 * otherwise. majority may be NULL. */
enum matcher_vote matcher_checkpoint_vote(uint64_t own, const uint64_t *others, size_t n,
					  unsigned replicas, uint64_t *majority);

#endif
