/* The raft wire codec: the LSRF header of the control datagrams between the
 * members of a sequencer group, and the tape datagram an APPEND carries
 * (the format is in sequencer.h). Pure: no socket, no clock, no logging. */
#include <errno.h>
#include <string.h>

#include "moldudp64.h"
#include "raft.h"
#include "sequencer.h"
#include "tape.h"
#include "tapeday.h"
#include "wire.h"

_Static_assert(RAFT_TERM_STEP_MAX == TAPE_TERM_STEP_MAX,
	       "a term moves as far on the tape as in the group");

static const uint8_t raft_magic[4] = { 'L', 'S', 'R', 'F' };

size_t seq_raft_encode(uint8_t *out, const struct raft_msg *m, const struct mold_session *sess)
{
	memcpy(out, raft_magic, 4);
	out[4] = 1;
	out[5] = (uint8_t)m->type;
	out[6] = (uint8_t)m->flags;
	out[7] = (uint8_t)m->from;
	out[8] = m->to == RAFT_ALL ? 0xff : (uint8_t)m->to;
	out[9] = 0;
	memcpy(out + 10, sess->name, MOLD_SESSION_LEN);
	wire_put_u64(out + 20, m->term);
	wire_put_u64(out + 28, m->seq);
	wire_put_u64(out + 36, m->seq_term);
	wire_put_u64(out + 44, m->commit);
	return SEQ_RAFT_WIRE_LEN;
}

int seq_raft_decode(const uint8_t *buf, size_t len, const struct mold_session *sess, int n_nodes,
		    struct raft_msg *m)
{
	if (len < SEQ_RAFT_WIRE_LEN || memcmp(buf, raft_magic, 4) != 0 || buf[4] != 1 ||
	    buf[9] != 0 || memcmp(buf + 10, sess->name, MOLD_SESSION_LEN) != 0)
		return -EBADMSG;
	if (len > SEQ_RAFT_WIRE_LEN && buf[5] != RAFT_MSG_APPEND)
		return -EBADMSG;
	switch (buf[5]) {
	case RAFT_MSG_APPEND:
	case RAFT_MSG_VOTE:
	case RAFT_MSG_VOTE_REPLY:
	case RAFT_MSG_ACK:
	case RAFT_MSG_REQUEST:
	case RAFT_MSG_HEARTBEAT:
	case RAFT_MSG_TIMEOUT_NOW:
		break;
	default:
		return -EBADMSG;
	}
	if (buf[7] >= n_nodes || (buf[8] != 0xff && buf[8] >= n_nodes) || buf[6] & ~7u)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	m->type = (enum raft_msg_type)buf[5];
	m->flags = buf[6];
	m->from = buf[7];
	m->to = buf[8] == 0xff ? RAFT_ALL : buf[8];
	m->term = wire_get_u64(buf + 20);
	m->seq = wire_get_u64(buf + 28);
	m->seq_term = wire_get_u64(buf + 36);
	m->commit = wire_get_u64(buf + 44);
	return 0;
}

uint64_t seq_dgram_first_index(const uint8_t *dg, size_t len)
{
	struct mold_packet pkt;
	struct mold_iter it;
	struct tape_event_view v;
	const uint8_t *data;
	uint64_t seq;
	uint16_t blen;

	if (mold_parse(dg, len, NULL, 0, &pkt) < 0 || pkt.kind != MOLD_DATA)
		return 0;
	mold_iter_init(&it, &pkt);
	if (mold_iter_next(&it, &seq, &data, &blen) != 1 || tape_event_peek(data, blen, &v) < 0)
		return 0;
	return v.seq;
}

int seq_raft_decode_entries(const uint8_t *buf, size_t len, const struct mold_session *sess,
			    struct raft_msg *m, struct raft_entry *out, unsigned max)
{
	struct mold_packet pkt;
	struct mold_iter it;
	const uint8_t *data;
	uint64_t seq;
	uint16_t blen;
	unsigned n = 0;
	int r;

	m->entries = out;
	m->n_entries = 0;
	if (len == SEQ_RAFT_WIRE_LEN)
		return 0; /* an APPEND with no entries */
	/* The tape datagram is in its day's session (common/tapeday.h), its
	 * sequence number the day's: the events' own seq must follow m->seq. */
	if (mold_parse(buf + SEQ_RAFT_WIRE_LEN, len - SEQ_RAFT_WIRE_LEN, NULL, 0, &pkt) < 0 ||
	    !tapeday_day_of_session(sess, &pkt.session) || pkt.kind != MOLD_DATA ||
	    pkt.count > max)
		return -EBADMSG;
	pkt.seq = m->seq + 1;
	mold_iter_init(&it, &pkt);
	while ((r = mold_iter_next(&it, &seq, &data, &blen)) == 1) {
		struct tape_event_view v;

		if (tape_event_peek(data, blen, &v) < 0 || v.seq != seq || v.term == 0)
			return -EBADMSG;
		out[n].term = v.term;
		out[n].data = data;
		out[n].len = blen;
		n++;
	}
	if (r < 0 || n != pkt.count)
		return -EBADMSG;
	m->n_entries = n;
	return 0;
}
