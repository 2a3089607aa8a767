/* The routing tables' layout, shared by routes.c (symbols, open and close)
 * and route_tokens.c (the order token table). */
#ifndef LOCKSTEP_GW_ROUTES_PRIVATE_H
#define LOCKSTEP_GW_ROUTES_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#define TOKEN_LEN 14 /* OUCH order token */

/* What a remembered token's order is. */
enum gw_tok_state {
	GW_TOK_LIVE = 0, /* accepted, n = its remaining shares (> 0) */
	GW_TOK_PENDING, /* entered here, not answered yet: live, shares unknown */
	GW_TOK_DEAD, /* dead (or not known to live): n = its place in the dead ring */
	GW_TOK_STATE_MAX
};

/* One remembered order token: 24 bytes, open addressing with linear
 * probing; deleted by backward shift (no tombstones). */
struct gw_token {
	uint32_t login; /* login number + 1; 0: empty slot */
	uint32_t n; /* see enum gw_tok_state */
	uint8_t part;
	uint8_t state; /* enum gw_tok_state */
	char token[TOKEN_LEN]; /* NUL-padded */
};

struct gw_routes {
	unsigned n_parts;
	int listed;
	/* symbols (listed): packed 8-byte names, 0 = empty slot */
	uint64_t *sym_key;
	uint8_t *sym_part;
	size_t sym_mask;
	/* tokens (n_parts > 1): tok_mask + 1 slots, a power of two */
	struct gw_token *tok;
	size_t tok_mask;
	/* the dead ring, oldest first: slot numbers, or GW_RING_HOLE where a
	 * token came back to life; head and tail run free (mod 2^32) and
	 * index it through tok_mask (as many places as slots) */
	uint32_t *dead;
	uint32_t head, tail;
	uint64_t n_tok, n_dead, max_tok, max_slack, forgotten;
};

#define GW_RING_HOLE UINT32_MAX

/* route_tokens.c: allocates the token table for max_tokens (0 or -ENOMEM). */
int gw_tokens_alloc(struct gw_routes *r, uint64_t max_tokens);
void gw_tokens_free(struct gw_routes *r);

#endif
