/* The flow-control status message (flowstatus.h). */
#include <errno.h>
#include <string.h>

#include "flowstatus.h"
#include "wire.h"

#define FLOW_STATUS_VERSION 1

static const uint8_t magic[4] = { 'L', 'S', 'F', 'S' };

size_t flow_status_encode(uint8_t out[FLOW_STATUS_LEN], const struct flow_status *st)
{
	memset(out, 0, FLOW_STATUS_LEN);
	memcpy(out, magic, sizeof(magic));
	out[4] = FLOW_STATUS_VERSION;
	out[5] = st->flags;
	out[6] = (uint8_t)(st->partition >> 8);
	out[7] = (uint8_t)st->partition;
	wire_put_u64(out + 8, st->applied);
	wire_put_u64(out + 16, st->window);
	memcpy(out + 24, st->name, strnlen(st->name, FLOW_STATUS_NAME_LEN));
	return FLOW_STATUS_LEN;
}

int flow_status_is(const uint8_t *buf, size_t len)
{
	return len == FLOW_STATUS_LEN && memcmp(buf, magic, sizeof(magic)) == 0;
}

/* The name field: printable ASCII, then only NULs; its length, or -1. */
static int name_len(const uint8_t *p)
{
	int n = 0;

	while (n < FLOW_STATUS_NAME_LEN && p[n] >= 0x21 && p[n] <= 0x7e)
		n++;
	for (int i = n; i < FLOW_STATUS_NAME_LEN; i++)
		if (p[i] != 0)
			return -1;
	return n;
}

int flow_status_decode(const uint8_t *buf, size_t len, struct flow_status *out)
{
	int n;

	if (!flow_status_is(buf, len))
		return -EBADMSG;
	if (buf[4] != FLOW_STATUS_VERSION)
		return -EPROTO;
	if ((buf[5] & ~FLOW_STATUS_PAUSING) != 0 || (n = name_len(buf + 24)) <= 0)
		return -EBADMSG;
	out->flags = buf[5];
	out->partition = (uint16_t)(buf[6] << 8 | buf[7]);
	out->applied = wire_get_u64(buf + 8);
	out->window = wire_get_u64(buf + 16);
	memcpy(out->name, buf + 24, (size_t)n);
	out->name[n] = '\0';
	return 0;
}

void flow_cost_sample(struct flow_cost *c, uint64_t rmem_bytes, uint64_t events)
{
	uint64_t v;

	if (!events || !rmem_bytes)
		return; /* nothing was queued (or nothing that counts): no news */
	v = (rmem_bytes + events - 1) / events;
	if (!c->per_event || v >= c->per_event)
		c->per_event = v;
	else
		c->per_event -= (c->per_event - v + 63) / 64;
	c->samples++;
}

uint64_t flow_cost_window(const struct flow_cost *c, uint64_t bytes)
{
	uint64_t per = c->per_event ? c->per_event : FLOW_COST_DEFAULT;
	uint64_t w = bytes / 4 * 3 / per;

	return w ? w : 1;
}
