/* The client edge's pure parts: a login's token bucket, the bounded queue
 * of a throttled session, and the size of a command against one command
 * datagram (see throttle.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds.h"
#include "gateway.h"
#include "lockstep.pb-c.h"
#include "moldudp64.h"
#include "ouch.h"
#include "throttle.h"

void throttle_init(struct throttle *t, double rate, double burst, double now)
{
	t->rate = rate;
	t->burst = burst < 1 ? 1 : burst;
	t->tokens = t->burst;
	t->last = now;
}

static void refill(struct throttle *t, double now)
{
	if (now <= t->last)
		return;
	t->tokens += (now - t->last) * t->rate;
	if (t->tokens > t->burst)
		t->tokens = t->burst;
	t->last = now;
}

int throttle_take(struct throttle *t, double now)
{
	if (t->rate <= 0)
		return 1;
	refill(t, now);
	if (t->tokens < 1)
		return 0;
	t->tokens -= 1;
	return 1;
}

double throttle_wait(struct throttle *t, double now)
{
	if (t->rate <= 0)
		return 0;
	refill(t, now);
	return t->tokens >= 1 ? 0 : (1 - t->tokens) / t->rate;
}

int throttle_queue_init(struct throttle_queue *q, uint32_t cap)
{
	memset(q, 0, sizeof(*q));
	if (cap && !(q->slot = calloc(cap, sizeof(*q->slot))))
		return -ENOMEM;
	q->cap = cap;
	return 0;
}

void throttle_queue_fini(struct throttle_queue *q)
{
	free(q->slot);
	memset(q, 0, sizeof(*q));
}

int throttle_queue_push(struct throttle_queue *q, const uint8_t *msg, size_t len)
{
	uint8_t *s;

	if (q->n == q->cap || len > THROTTLE_MSG_MAX)
		return -ENOSPC;
	s = q->slot[(q->head + q->n) % q->cap];
	s[0] = (uint8_t)len;
	memcpy(s + 1, msg, len);
	q->n++;
	return 0;
}

const uint8_t *throttle_queue_peek(const struct throttle_queue *q, size_t *len)
{
	if (q->n == 0)
		return NULL;
	*len = q->slot[q->head][0];
	return q->slot[q->head] + 1;
}

void throttle_queue_pop(struct throttle_queue *q)
{
	if (q->n == 0)
		return;
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

size_t throttle_cmd_room(uint64_t max_datagram, size_t auth_reserve)
{
	uint64_t around = MOLD_HEADER_LEN + 2 + (uint64_t)auth_reserve;

	return max_datagram > around ? (size_t)(max_datagram - around) : 0;
}

/* Every string at its longest, every number at its widest varint. */
size_t throttle_max_ouch_command(void)
{
	static char login[] = "WWWWWW", firm[] = "WWWW", tok[] = "WWWWWWWWWWWWWW",
		    sym[] = "WWWWWWWW";
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__NewOrder no = LOCKSTEP__NEW_ORDER__INIT;
	Lockstep__ReplaceOrder ro = LOCKSTEP__REPLACE_ORDER__INIT;
	size_t enter, replace;

	_Static_assert(sizeof(login) - 1 >= CREDS_LOGIN_LEN && sizeof(firm) - 1 >= CREDS_FIRM_LEN &&
			       sizeof(tok) - 1 == OUCH_TOKEN_LEN &&
			       sizeof(sym) - 1 == OUCH_STOCK_LEN,
		       "the widest fields");
	c.user = login;
	c.firm = firm;
	c.partition = GW_MAX_PARTITIONS - 1;
	no.token = tok;
	no.symbol = sym;
	no.firm = firm;
	no.side = no.display = no.capacity = no.iso = no.cross_type = no.customer_type = 255;
	no.shares = no.price = no.tif = no.min_qty = UINT32_MAX;
	c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
	c.new_order = &no;
	enter = lockstep__command__get_packed_size(&c);
	ro.existing_token = ro.replacement_token = tok;
	ro.shares = ro.price = ro.tif = ro.min_qty = UINT32_MAX;
	ro.display = ro.iso = 255;
	c.body_case = LOCKSTEP__COMMAND__BODY_REPLACE;
	c.replace = &ro;
	replace = lockstep__command__get_packed_size(&c);
	return enter > replace ? enter : replace; /* Cancel and Modify are smaller */
}
