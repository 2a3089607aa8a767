/* lockstep-replay: consecutive records packed into MoldUDP64 datagrams as
 * the sequencer sent them (pcap and send). */
#include "replay.h"

/* The timestamp a record's event carries (the previous one's when it does
 * not decode). */
uint64_t packer_record_ts(struct packer *p, const uint8_t *data, size_t len)
{
	struct tape_event_view v;

	if (tape_event_peek(data, len, &v) == 0)
		p->last_ts = v.timestamp;
	return p->last_ts;
}

/* Whether the record (with timestamp ts) belongs to the open packet, and
 * fits in it: then it is added. */
int packer_add(struct packer *p, uint64_t ts, const uint8_t *data, size_t len)
{
	if (!p->open || ts != p->ts)
		return 0;
	return mold_build_add(&p->b, data, (uint16_t)len) == 0;
}

/* Starts a packet in buf (cap >= MOLD_MAX_PACKET) with the record at seq. */
void packer_start(struct packer *p, uint8_t *buf, uint64_t seq, uint64_t ts,
		  const uint8_t *data, size_t len)
{
	size_t cap = p->max;

	if (MOLD_HEADER_LEN + 2 + len > cap)
		cap = MOLD_HEADER_LEN + 2 + len;
	mold_build_begin(&p->b, buf, cap, &p->session, seq);
	mold_build_add(&p->b, data, (uint16_t)len);
	p->open = 1;
	p->ts = ts;
}

/* Closes the open packet; its length. */
size_t packer_end(struct packer *p)
{
	p->open = 0;
	return mold_build_end(&p->b);
}

/* A record too large for any MoldUDP64 packet (a block length is 16 bits and
 * a UDP payload at most 65507 bytes) cannot go out. */
int packer_fits(size_t len)
{
	return MOLD_HEADER_LEN + 2 + len <= MOLD_MAX_PACKET;
}

