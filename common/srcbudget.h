/* A byte budget per source address for the retransmission servers (issue
 * 15, "no amplification"): a 20-byte request may ask for ~94 KB of answer,
 * to whatever address it claims, so each server answers one source address
 * at most `rate` bytes a second (a token bucket of `burst` bytes). The
 * table holds a fixed number of addresses; a new one takes the slot of the
 * least recently charged. Pure: no clock (the caller passes now), no
 * allocation after create, no logging, no system call. */
#ifndef LOCKSTEP_SRCBUDGET_H
#define LOCKSTEP_SRCBUDGET_H

#include <stdint.h>

#define SRC_BUDGET_SLOTS 64

struct src_budget_slot {
	uint32_t addr; /* network order; 0 with last_ns 0: free */
	uint64_t tokens; /* bytes it may still be sent */
	uint64_t last_ns; /* when tokens were last filled */
};

struct src_budget {
	uint64_t rate; /* bytes per second per address; 0: no limit */
	uint64_t burst; /* the bucket's size */
	uint64_t refused; /* answers (datagrams) refused */
	struct src_budget_slot slot[SRC_BUDGET_SLOTS];
};

/* rate 0 turns the budget off (every take succeeds); burst 0 means one
 * second of rate. */
void src_budget_init(struct src_budget *b, uint64_t rate, uint64_t burst);
/* 1 and the bytes charged when `addr` may be sent `bytes` more at `now`
 * (monotonic ns); 0 (and refused counted) when not. */
int src_budget_take(struct src_budget *b, uint32_t addr, uint64_t bytes, uint64_t now);
/* The bytes `addr` may be sent at `now` (UINT64_MAX when off), and the
 * charge for what was: for an answer of several datagrams, which sends as
 * many as the room holds. */
uint64_t src_budget_room(struct src_budget *b, uint32_t addr, uint64_t now);
void src_budget_charge(struct src_budget *b, uint32_t addr, uint64_t bytes, uint64_t now);
/* An answer of n datagrams of lens[i] bytes to addr: how many of the first
 * ones the budget lets go (all when off), charged. */
unsigned src_budget_prefix(struct src_budget *b, uint32_t addr, const size_t *lens, unsigned n,
			   uint64_t now);

#endif
