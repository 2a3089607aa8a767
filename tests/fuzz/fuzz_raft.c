/* The sequencer group's datagrams (LSRF header, and an APPEND's tape
 * datagram after it): the input is one datagram as it arrives on a member's
 * raft socket. The session expected is the one the datagram names (bytes
 * 10..19), so that the fuzzer gets past that check; the group has
 * RAFT_MAX_NODES members. Whatever seq_raft_decode() accepts re-encodes
 * into the identical header; an APPEND's entries are decoded with the
 * daemon's limit and each lies inside the datagram, in order. Aborts on a
 * broken invariant. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moldudp64.h"
#include "raft.h"
#include "sequencer.h"

#define FUZZ_MAX_ENTRIES MOLD_MAX_COUNT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct raft_entry ents[FUZZ_MAX_ENTRIES];
	struct mold_session sess;
	struct raft_msg m, again;
	uint8_t out[SEQ_RAFT_WIRE_LEN];
	int rc;

	memset(&sess, ' ', sizeof(sess));
	if (size >= 10 + MOLD_SESSION_LEN)
		memcpy(sess.name, data + 10, MOLD_SESSION_LEN);
	rc = seq_raft_decode(data, size, &sess, RAFT_MAX_NODES, &m);
	if (rc < 0) {
		check(rc == -EBADMSG);
		return 0;
	}
	check(size >= SEQ_RAFT_WIRE_LEN);
	check((unsigned)m.type < RAFT_MSG_MAX);
	check(m.from >= 0 && m.from < RAFT_MAX_NODES);
	check(m.to == RAFT_ALL || (m.to >= 0 && m.to < RAFT_MAX_NODES));
	check(m.n_entries == 0 && m.entries == NULL);
	check(size == SEQ_RAFT_WIRE_LEN || m.type == RAFT_MSG_APPEND);
	check(seq_raft_encode(out, &m, &sess) == SEQ_RAFT_WIRE_LEN);
	check(memcmp(out, data, SEQ_RAFT_WIRE_LEN) == 0);
	check(seq_raft_decode(out, sizeof(out), &sess, RAFT_MAX_NODES, &again) == 0);
	check(again.type == m.type && again.term == m.term && again.seq == m.seq &&
	      again.seq_term == m.seq_term && again.commit == m.commit && again.flags == m.flags);
	/* a smaller group refuses a sender or receiver outside it */
	if (m.from >= 3 || (m.to != RAFT_ALL && m.to >= 3))
		check(seq_raft_decode(data, size, &sess, 3, &again) == -EBADMSG);
	if (m.type != RAFT_MSG_APPEND)
		return 0;
	rc = seq_raft_decode_entries(data, size, &sess, &m, ents, FUZZ_MAX_ENTRIES);
	if (rc < 0) {
		check(rc == -EBADMSG);
		return 0;
	}
	check(rc == 0 && m.entries == ents && m.n_entries <= FUZZ_MAX_ENTRIES);
	check(size > SEQ_RAFT_WIRE_LEN || m.n_entries == 0);
	for (uint32_t i = 0; i < m.n_entries; i++) {
		const uint8_t *p = ents[i].data;

		check(ents[i].term != 0);
		check(p >= data + SEQ_RAFT_WIRE_LEN && p + ents[i].len <= data + size);
		check(i == 0 || p > (const uint8_t *)ents[i - 1].data);
	}
	return 0;
}
