/* lockstep-replay: consecutive records packed into MoldUDP64 datagrams as
 * the sequencer sent them, each in its trading day's session (pcap and
 * send). */
#include "replay.h"

uint64_t packer_record(struct packer *p, uint64_t seq, const uint8_t *data, size_t len)
{
	struct tape_event_view v;

	wirepos_note(&p->w, seq, data, len);
	if (tape_event_peek(data, len, &v) == 0)
		p->last_ts = v.timestamp;
	return p->last_ts;
}

int packer_add(struct packer *p, uint64_t seq, uint64_t ts, const uint8_t *data, size_t len)
{
	if (!p->open || ts != p->ts || tapeday_day_at(&p->w.td, seq, NULL) != p->day)
		return 0; /* a datagram never spans two days */
	return mold_build_add(&p->b, data, (uint16_t)len) == 0;
}

void packer_start(struct packer *p, uint8_t *buf, uint64_t seq, uint64_t ts,
		  const uint8_t *data, size_t len)
{
	size_t cap = p->max;
	uint64_t day_seq;

	if (MOLD_HEADER_LEN + 2 + len > cap)
		cap = MOLD_HEADER_LEN + 2 + len;
	wirepos_of(&p->w, seq, &p->day, &p->session, &day_seq);
	mold_build_begin(&p->b, buf, cap, &p->session, day_seq);
	mold_build_add(&p->b, data, (uint16_t)len);
	p->open = 1;
	p->ts = ts;
}

size_t packer_end(struct packer *p)
{
	p->open = 0;
	return mold_build_end(&p->b);
}

int packer_fits(size_t len)
{
	return MOLD_HEADER_LEN + 2 + len <= MOLD_MAX_PACKET;
}
