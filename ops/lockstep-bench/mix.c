/* lockstep-bench: the orders the bench makes. The load's mix (passive and
 * marketable Enters, Cancels and Replaces by weight, from a seeded random
 * sequence reproducible for a given --seed), their prices and lots, the
 * symbols, and a sample Enter with the Command a gateway packs for it and
 * the Accepted that answers it. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "lockstep.pb-c.h"

const char *const mix_names[MIX_N] = { "passive", "marketable", "cancel", "replace" };
const char *symbols[MAX_SYMBOLS];
size_t symbol_len[MAX_SYMBOLS];
unsigned n_symbols;

static uint64_t rng_state;

void mix_seed(uint64_t seed)
{
	rng_state = seed;
}

uint64_t mix_rnd(void)
{
	/* splitmix64: reproducible for a given --seed */
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

enum mix_kind mix_pick(uint64_t r)
{
	unsigned total = 0, x;

	for (int k = 0; k < MIX_N; k++)
		total += opt.mix[k];
	x = (unsigned)(r % total);
	for (int k = 0; k < MIX_N; k++) {
		if (x < opt.mix[k])
			return (enum mix_kind)k;
		x -= opt.mix[k];
	}
	return MIX_PASSIVE;
}

/* A passive price, most often at the touch (MID_PRICE and TICK: bench.h). */
uint32_t mix_passive_price(int buy, uint64_t r)
{
	static const uint8_t ticks[8] = { 1, 1, 1, 2, 2, 3, 4, 5 };
	uint32_t off = ticks[r & 7] * TICK;

	return buy ? MID_PRICE - off : MID_PRICE + off;
}

uint32_t mix_lot(uint64_t r)
{
	return (uint32_t)(r % 10 + 1) * 100;
}

void mix_sample_enter(struct ouch_enter_order *o, uint32_t i)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->token, sizeof(o->token), "BENCH0%08X", i);
	o->side = OUCH_BUY;
	o->shares = 300;
	memcpy(o->stock, "AAPL", 5);
	o->price = MID_PRICE - TICK;
	o->tif = OUCH_TIF_SYSTEM_HOURS;
	memcpy(o->firm, "FRMA", 5);
	o->display = OUCH_DISPLAY_ATTRIBUTABLE;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = OUCH_ISO_NOT_ELIGIBLE;
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = OUCH_CUST_RETAIL;
}

/* The Command a gateway packs for an Enter. */
size_t mix_pack_enter(const struct ouch_enter_order *e, const char *user, const char *firm,
		      uint8_t *out)
{
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__NewOrder no = LOCKSTEP__NEW_ORDER__INIT;

	no.token = (char *)e->token;
	no.side = (uint8_t)e->side;
	no.shares = e->shares;
	no.symbol = (char *)e->stock;
	no.price = e->price;
	no.tif = e->tif;
	no.firm = (char *)e->firm;
	no.display = (uint8_t)e->display;
	no.capacity = (uint8_t)e->capacity;
	no.min_qty = e->min_qty;
	no.iso = (uint8_t)e->iso;
	no.cross_type = (uint8_t)e->cross_type;
	no.customer_type = (uint8_t)e->customer_type;
	c.user = (char *)user;
	c.firm = (char *)firm;
	c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
	c.new_order = &no;
	return lockstep__command__pack(&c, out);
}


void mix_accept(const struct ouch_enter_order *e, uint64_t order_ref, struct ouch_accepted *a)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->token, e->token, sizeof(a->token));
	a->side = e->side;
	a->shares = e->shares;
	memcpy(a->stock, e->stock, sizeof(a->stock));
	a->price = e->price;
	a->tif = e->tif;
	memcpy(a->firm, e->firm, sizeof(a->firm));
	a->display = e->display;
	a->order_ref = order_ref;
	a->capacity = e->capacity;
	a->iso = e->iso;
	a->cross_type = e->cross_type;
	a->state = OUCH_STATE_LIVE;
	a->bbo_weight = '0';
}
