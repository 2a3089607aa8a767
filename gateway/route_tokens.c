/* The order token table: per login, order token -> partition, for the
 * orders that live and the ones that died most recently (routes.h).
 *
 * A token is pending from its Enter Order until its partition answers,
 * live (with its remaining shares) from its Accepted or Replaced, dead from
 * its Rejected, the Replaced that replaces it, or the Canceled, Executed or
 * Order Modified that leaves it no shares. Every message of one token comes
 * from one partition's execution stream, in order, once (the streams drop
 * duplicates), so the count stays exact. Dead tokens join the dead ring,
 * oldest first, and are forgotten only to make room: the table remembers
 * max_tokens tokens, live and dead, and never forgets a live or pending
 * one. A dead token that an Accepted or Replaced names comes back to life
 * (a replacement token is remembered as dead until its Replaced, since a
 * Replace may be ignored; so is every token of the command journal at
 * start); its ring place becomes a hole, skipped when it is reached.
 *
 * No allocation after gw_tokens_alloc, no system call, no clock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ouch.h"
#include "prealloc.h"
#include "routes.h"
#include "routes_private.h"

/* len bytes without the trailing blanks and NULs (OUCH pads with spaces). */
static size_t trimmed(const char *p, size_t len)
{
	len = strnlen(p, len < TOKEN_LEN ? len : TOKEN_LEN);
	while (len > 0 && p[len - 1] == ' ')
		len--;
	return len;
}

static void tok_key(char key[TOKEN_LEN], const char *token, size_t len)
{
	memset(key, 0, TOKEN_LEN);
	memcpy(key, token, trimmed(token, len));
}

static size_t tok_home(const struct gw_routes *r, uint32_t login1, const char key[TOKEN_LEN])
{
	return (size_t)(XXH3_64bits_withSeed(key, TOKEN_LEN, login1 - 1) & r->tok_mask);
}

/* The slot of (login, key), or the empty slot where it would go. */
static size_t tok_slot(const struct gw_routes *r, uint32_t login, const char key[TOKEN_LEN])
{
	size_t h = tok_home(r, login + 1, key);

	while (r->tok[h].login &&
	       (r->tok[h].login != login + 1 || memcmp(r->tok[h].token, key, TOKEN_LEN) != 0))
		h = (h + 1) & r->tok_mask;
	return h;
}

/* ---- deletion and the dead ring -------------------------------------------- */

/* 1 when slot j's token, whose search starts at home, may move back to the
 * hole at i: home does not lie cyclically in (i, j]. */
static int may_fill(size_t i, size_t j, size_t home)
{
	return i <= j ? (home <= i || home > j) : (home <= i && home > j);
}

/* Deletes the token in slot i by backward shift (as the matcher's
 * token_delete): each later token of the run whose search would pass the
 * hole moves into it, a dead one's ring place following it. */
static void tok_delete(struct gw_routes *r, size_t i)
{
	size_t j = i;

	for (;;) {
		const struct gw_token *t;

		j = (j + 1) & r->tok_mask;
		t = &r->tok[j];
		if (t->login == 0)
			break;
		if (may_fill(i, j, tok_home(r, t->login, t->token))) {
			r->tok[i] = *t;
			if (t->state == GW_TOK_DEAD)
				r->dead[t->n] = (uint32_t)i;
			i = j;
		}
	}
	memset(&r->tok[i], 0, sizeof(r->tok[i]));
	r->n_tok--;
}

/* Drops the ring's oldest place: a hole, or the oldest dead token, which is
 * forgotten. Slots may move. */
static void ring_pop(struct gw_routes *r)
{
	uint32_t s = r->dead[r->head & r->tok_mask];

	r->head++;
	if (s == GW_RING_HOLE)
		return;
	r->n_dead--;
	r->forgotten++;
	tok_delete(r, s);
}

/* Room in the ring for k more places (holes count until reached). Slots
 * may move: call before looking any up. */
static void ring_reserve(struct gw_routes *r, uint32_t k)
{
	while (r->tail - r->head > (uint32_t)r->tok_mask + 1 - k)
		ring_pop(r);
}

/* Forgets the oldest dead tokens while max_tokens are remembered. Slots
 * may move: call before looking any up. */
static void make_room(struct gw_routes *r)
{
	while (r->n_tok >= r->max_tok && r->n_dead > 0)
		ring_pop(r);
}

/* Token i dies: the ring's newest place (reserved by the caller). */
static void tok_kill(struct gw_routes *r, size_t i)
{
	uint32_t at = r->tail & (uint32_t)r->tok_mask;

	r->dead[at] = (uint32_t)i;
	r->tail++;
	r->tok[i].state = GW_TOK_DEAD;
	r->tok[i].n = at;
	r->n_dead++;
}

/* Dead token i lives again with shares (its place becomes a hole), or
 * pending (shares 0) i lives with them. */
static void tok_revive(struct gw_routes *r, size_t i, unsigned part, uint32_t shares)
{
	if (r->tok[i].state == GW_TOK_DEAD) {
		r->dead[r->tok[i].n] = GW_RING_HOLE;
		r->n_dead--;
	}
	r->tok[i].state = GW_TOK_LIVE;
	r->tok[i].part = (uint8_t)part;
	r->tok[i].n = shares;
}

/* ---- adding --------------------------------------------------------------- */

/* Puts (login, key) in empty slot i (found after the last deletion). */
static void tok_put(struct gw_routes *r, size_t i, uint32_t login, const char key[TOKEN_LEN],
		    unsigned part, enum gw_tok_state st, uint32_t shares)
{
	struct gw_token *t = &r->tok[i];

	t->login = login + 1;
	t->part = (uint8_t)part;
	memcpy(t->token, key, TOKEN_LEN);
	t->state = (uint8_t)st;
	t->n = shares;
	r->n_tok++;
	if (st == GW_TOK_DEAD)
		tok_kill(r, i);
}

/* Adds an unknown token after making room; limit: how many tokens the
 * table may hold then (max_tokens, or the slack). */
static int tok_add(struct gw_routes *r, uint32_t login, const char key[TOKEN_LEN], unsigned part,
		   enum gw_tok_state st, uint32_t shares, uint64_t limit)
{
	make_room(r);
	if (r->n_tok >= limit)
		return -ENOSPC;
	tok_put(r, tok_slot(r, login, key), login, key, part, st, shares);
	return 0;
}

static int args_ok(const struct gw_routes *r, uint32_t login, unsigned part)
{
	return r->tok && part < r->n_parts && login != UINT32_MAX;
}

/* A token not yet known: in `state`, the table filled up to `limit`. */
static int route_new(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		     unsigned part, int state, uint64_t limit)
{
	char key[TOKEN_LEN];

	if (!args_ok(r, login, part))
		return -EINVAL;
	ring_reserve(r, 1);
	tok_key(key, token, len);
	if (r->tok[tok_slot(r, login, key)].login)
		return -EEXIST;
	return tok_add(r, login, key, part, state, 0, limit);
}

int gw_route_enter(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		   unsigned part)
{
	return route_new(r, login, token, len, part, GW_TOK_PENDING, r->max_tok);
}

int gw_route_maybe(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		   unsigned part)
{
	return route_new(r, login, token, len, part, GW_TOK_DEAD, r->max_slack);
}

/* ---- what the execution streams say ---------------------------------------- */

/* An Accepted or Replaced: the token lives in part with shares (state 'D',
 * or no shares: it died at once). The ring has room for one. */
static int learn_live(struct gw_routes *r, uint32_t login, const char *token, unsigned part,
		      uint32_t shares, char state)
{
	char key[TOKEN_LEN];
	size_t i;
	int dead = shares == 0 || state == OUCH_STATE_DEAD;

	tok_key(key, token, TOKEN_LEN);
	i = tok_slot(r, login, key);
	if (!r->tok[i].login && dead) { /* learned from the stream only */
		(void)tok_add(r, login, key, part, GW_TOK_DEAD, 0, r->max_slack);
		return 0;
	}
	if (!r->tok[i].login)
		return tok_add(r, login, key, part, GW_TOK_LIVE, shares, r->max_slack);
	if (r->tok[i].state == GW_TOK_LIVE)
		return 0; /* answered twice: not from one matcher */
	tok_revive(r, i, part, shares);
	if (dead)
		tok_kill(r, i);
	return 0;
}

/* The token dies unless it is dead already (ring room reserved). */
static void learn_dead(struct gw_routes *r, uint32_t login, const char *token)
{
	char key[TOKEN_LEN];
	size_t i;

	tok_key(key, token, TOKEN_LEN);
	i = tok_slot(r, login, key);
	if (r->tok[i].login && r->tok[i].state != GW_TOK_DEAD)
		tok_kill(r, i);
}

/* A live token's shares drop by dec (set: to dec): none left, it dies. */
static void learn_shares(struct gw_routes *r, uint32_t login, const char *token, uint32_t dec,
			 int set)
{
	char key[TOKEN_LEN];
	size_t i;

	tok_key(key, token, TOKEN_LEN);
	i = tok_slot(r, login, key);
	if (!r->tok[i].login || r->tok[i].state != GW_TOK_LIVE)
		return; /* forgotten, or never known: nothing to count */
	if (set)
		dec = dec < r->tok[i].n ? r->tok[i].n - dec : r->tok[i].n;
	if (dec >= r->tok[i].n)
		tok_kill(r, i);
	else
		r->tok[i].n -= dec;
}

/* A Rejected: a pending token dies; an unknown one is remembered dead
 * (where a late Cancel should go). A live one stays: the matcher rejects
 * no live token (a duplicate Enter is ignored). */
static void learn_rejected(struct gw_routes *r, uint32_t login, const char *token, unsigned part)
{
	char key[TOKEN_LEN];
	size_t i;

	tok_key(key, token, TOKEN_LEN);
	i = tok_slot(r, login, key);
	if (!r->tok[i].login)
		(void)tok_add(r, login, key, part, GW_TOK_DEAD, 0, r->max_slack);
	else if (r->tok[i].state == GW_TOK_PENDING)
		tok_kill(r, i);
}

int gw_route_learn(struct gw_routes *r, uint32_t login, unsigned part, const struct ouch_msg *m)
{
	if (!args_ok(r, login, part) || m->inbound)
		return -EINVAL;
	ring_reserve(r, 2);
	switch (m->type) {
	case OUCH_ACCEPTED:
		return learn_live(r, login, m->u.accepted.token, part, m->u.accepted.shares,
				  m->u.accepted.state);
	case OUCH_REPLACED:
		learn_dead(r, login, m->u.replaced.previous_token);
		return learn_live(r, login, m->u.replaced.replacement_token, part,
				  m->u.replaced.shares, m->u.replaced.state);
	case OUCH_REJECTED:
		learn_rejected(r, login, m->u.rejected.token, part);
		return 0;
	case OUCH_CANCELED:
		learn_shares(r, login, m->u.canceled.token, m->u.canceled.decrement, 0);
		return 0;
	case OUCH_AIQ_CANCELED:
		learn_shares(r, login, m->u.aiq_canceled.token, m->u.aiq_canceled.decrement, 0);
		return 0;
	case OUCH_EXECUTED:
		learn_shares(r, login, m->u.executed.token, m->u.executed.shares, 0);
		return 0;
	case OUCH_ORDER_MODIFIED:
		learn_shares(r, login, m->u.order_modified.token, m->u.order_modified.shares, 1);
		return 0;
	default:
		return 0; /* no order changes its shares */
	}
}

/* ---- lookups, counts and the self-check ------------------------------------ */

int gw_route_token(const struct gw_routes *r, uint32_t login, const char *token, size_t len)
{
	char key[TOKEN_LEN];
	size_t h;

	if (!r->tok || login == UINT32_MAX)
		return -ENOENT;
	tok_key(key, token, len);
	h = tok_slot(r, login, key);
	return r->tok[h].login ? r->tok[h].part : -ENOENT;
}

int gw_route_full(const struct gw_routes *r)
{
	return r->tok && r->n_tok - r->n_dead >= r->max_tok;
}

uint64_t gw_route_count(const struct gw_routes *r)
{
	return r->n_tok;
}

void gw_route_counts(const struct gw_routes *r, struct gw_route_counts *c)
{
	c->tokens = r->n_tok;
	c->dead = r->n_dead;
	c->live = r->n_tok - r->n_dead;
	c->forgotten = r->forgotten;
	c->max = r->max_tok;
	c->slots = r->tok ? r->tok_mask + 1 : 0;
}

/* Every token is found from its home, and a dead one names its ring place,
 * which names it back. */
static int verify_slots(const struct gw_routes *r, uint64_t *n, uint64_t *dead)
{
	for (size_t i = 0; i <= r->tok_mask; i++) {
		const struct gw_token *t = &r->tok[i];

		if (!t->login)
			continue;
		(*n)++;
		if (t->state >= GW_TOK_STATE_MAX || t->part >= r->n_parts ||
		    tok_slot(r, t->login - 1, t->token) != i)
			return -EBADMSG;
		if (t->state == GW_TOK_LIVE && t->n == 0)
			return -EBADMSG;
		if (t->state == GW_TOK_DEAD) {
			(*dead)++;
			if (t->n > r->tok_mask || r->dead[t->n] != i)
				return -EBADMSG;
		}
	}
	return 0;
}

int gw_route_verify(const struct gw_routes *r)
{
	uint64_t n = 0, dead = 0, ring = 0;

	if (!r->tok)
		return 0;
	if (verify_slots(r, &n, &dead) < 0)
		return -EBADMSG;
	if (r->tail - r->head > r->tok_mask + 1)
		return -EBADMSG;
	for (uint32_t p = r->head; p != r->tail; p++) {
		uint32_t s = r->dead[p & r->tok_mask];

		if (s == GW_RING_HOLE)
			continue;
		if (s > r->tok_mask || r->tok[s].state != GW_TOK_DEAD || !r->tok[s].login ||
		    r->tok[s].n != (p & r->tok_mask))
			return -EBADMSG;
		ring++;
	}
	if (n != r->n_tok || dead != r->n_dead || ring != dead || n > r->max_slack)
		return -EBADMSG;
	return 0;
}

/* ---- allocation ------------------------------------------------------------ */

int gw_tokens_alloc(struct gw_routes *r, uint64_t max_tokens)
{
	/* at most half full with max_tokens tokens; the slack up to 3/4 keeps
	 * probes short for the tokens an execution stream names beyond them */
	size_t size = 1024;

	while (size < max_tokens * 2)
		size *= 2;
	if (size > (size_t)1 << 31)
		return -ENOMEM; /* ring places are 32 bits */
	r->tok = prealloc_zeroed(size, sizeof(*r->tok));
	r->dead = prealloc_zeroed(size, sizeof(*r->dead));
	if (!r->tok || !r->dead)
		return -ENOMEM;
	r->tok_mask = size - 1;
	r->max_tok = max_tokens;
	r->max_slack = size / 4 * 3;
	return 0;
}

void gw_tokens_free(struct gw_routes *r)
{
	free(r->tok);
	free(r->dead);
	r->tok = NULL;
	r->dead = NULL;
}
