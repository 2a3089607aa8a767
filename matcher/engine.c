/* The matching engine's commands (semantics in engine.h): Enter, Replace,
 * Cancel, Modify and Cancel All, matching in price-time priority, expiry,
 * the trading day's END and START, and the outbound messages they answer
 * with. The tables they work on are engine_book.c's (engine_private.h);
 * the risk checks and ENGINE_ADMIN are engine_risk.c's. */
#include <stddef.h>
#include <string.h>
#include <xxhash.h>

#include "engine_private.h"

enum { STOP_NONE = 0, STOP_SELF_MATCH = 1 };

static uint64_t expiry_of(uint64_t now_ns, uint32_t tif)
{
	if (tif >= 1 && tif <= OUCH_TIF_MAX_SECONDS)
		return now_ns + (uint64_t)tif * NS_PER_SEC;
	return NO_EXPIRY;
}

/* --- outbound messages --------------------------------------------------- */

static void emit(struct engine *e, const char *user, const struct ouch_msg *m)
{
	e->st.messages++;
	if (e->emit)
		e->emit(e->ctx, user, m);
}

static void copy_token(char dst[OUCH_TOKEN_LEN + 1], const char src[OUCH_TOKEN_LEN])
{
	memcpy(dst, src, OUCH_TOKEN_LEN);
	dst[OUCH_TOKEN_LEN] = '\0';
}

static const char *owner(const struct engine *e, const struct order *o)
{
	return e->users[o->user].str;
}

static void emit_rejected(struct engine *e, const char *user, const char *token, int reason)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_REJECTED;
	m.u.rejected.timestamp = e->ts;
	token_key(m.u.rejected.token, token);
	m.u.rejected.reason = (char)reason;
	e->st.rejects++;
	emit(e, user, &m);
}

static void emit_canceled(struct engine *e, const struct order *o, uint32_t decrement, char reason)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_CANCELED;
	m.u.canceled.timestamp = e->ts;
	copy_token(m.u.canceled.token, e->tokens[o->tok].token);
	m.u.canceled.decrement = decrement;
	m.u.canceled.reason = reason;
	e->st.canceled++;
	emit(e, owner(e, o), &m);
}

static void emit_executed(struct engine *e, const struct order *o, uint32_t shares, uint32_t price,
			  char liquidity, uint64_t match)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_EXECUTED;
	m.u.executed.timestamp = e->ts;
	copy_token(m.u.executed.token, e->tokens[o->tok].token);
	m.u.executed.shares = shares;
	m.u.executed.price = price;
	m.u.executed.liquidity = liquidity;
	m.u.executed.match = match;
	emit(e, owner(e, o), &m);
}

/* Accepted and Replaced begin alike (timestamp .. state: a common initial
 * sequence of the union's two structs), so order_msg() fills that part of
 * either through m->u.accepted. */
_Static_assert(offsetof(struct ouch_accepted, token) ==
		       offsetof(struct ouch_replaced, replacement_token) &&
		       sizeof(((struct ouch_accepted *)0)->token) ==
			       sizeof(((struct ouch_replaced *)0)->replacement_token) &&
		       offsetof(struct ouch_accepted, state) == offsetof(struct ouch_replaced, state),
	       "Accepted and Replaced share their leading fields");

/* The order as it now stands (its side, shares, price and display just set
 * from the Enter or Replace), with the command's tif, iso and min_qty. */
static struct ouch_accepted *order_msg(struct engine *e, struct ouch_msg *m, char type,
				       const struct order *o, uint32_t tif, char iso,
				       uint32_t min_qty)
{
	struct ouch_accepted *a = &m->u.accepted;

	memset(m, 0, sizeof(*m));
	m->type = type;
	a->timestamp = e->ts;
	copy_token(a->token, e->tokens[o->tok].token);
	a->side = o->side;
	a->shares = o->shares;
	memcpy(a->stock, e->syms[o->sym].str, sizeof(a->stock));
	a->price = o->price;
	a->tif = tif;
	a->display = o->display;
	a->order_ref = o->ref;
	a->capacity = o->capacity;
	a->iso = iso;
	a->min_qty = min_qty;
	a->cross_type = o->cross_type;
	a->state = OUCH_STATE_LIVE;
	return a;
}

static void emit_accepted(struct engine *e, const struct order *o, const struct ouch_enter_order *in)
{
	struct ouch_msg m;
	struct ouch_accepted *a = order_msg(e, &m, OUCH_ACCEPTED, o, in->tif, in->iso, in->min_qty);

	memcpy(a->firm, in->firm, sizeof(a->firm));
	a->firm[OUCH_FIRM_LEN] = '\0';
	a->bbo_weight = ' ';
	e->st.accepted++;
	emit(e, owner(e, o), &m);
}

/* After the replacement took over o (its token, shares, display and price). */
static void emit_replaced(struct engine *e, const struct order *o, const struct ouch_replace_order *rp,
			  const char prev_token[OUCH_TOKEN_LEN])
{
	struct ouch_msg m;
	struct ouch_replaced *r = &m.u.replaced;

	order_msg(e, &m, OUCH_REPLACED, o, rp->tif, rp->iso, rp->min_qty);
	memcpy(r->firm, o->ofirm, OUCH_FIRM_LEN);
	copy_token(r->previous_token, prev_token);
	r->bbo_weight = ' ';
	e->st.replaced++;
	emit(e, owner(e, o), &m);
}

static void emit_modified(struct engine *e, const struct order *o)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_ORDER_MODIFIED;
	m.u.order_modified.timestamp = e->ts;
	copy_token(m.u.order_modified.token, e->tokens[o->tok].token);
	m.u.order_modified.side = o->side;
	m.u.order_modified.shares = o->shares;
	e->st.modified++;
	emit(e, owner(e, o), &m);
}

static void emit_cancel_reject(struct engine *e, const char *user, const char *token)
{
	struct ouch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OUCH_CANCEL_REJECT;
	m.u.cancel_reject.timestamp = e->ts;
	token_key(m.u.cancel_reject.token, token);
	e->st.cancel_rejects++;
	emit(e, user, &m);
}

void engine_cancel_booked(struct engine *e, uint32_t oi, char reason)
{
	struct order *o = &e->orders[oi];

	engine_md_delete(e, o);
	engine_book_remove(e, oi);
	emit_canceled(e, o, o->shares, reason);
	engine_book_order_release(e, oi);
}

/* --- matching ------------------------------------------------------------ */

static int crosses(const struct order *o, uint32_t resting_price)
{
	if (o->price == OUCH_PRICE_MARKET)
		return 1;
	return o->side == OUCH_BUY ? resting_price <= o->price : resting_price >= o->price;
}

/* 1 when an order of this side and price would execute on arrival (ignoring
 * self-match prevention): the other side's best price crosses it. */
static int would_cross(const struct engine *e, const struct order *o)
{
	int other = !book_side(o->side);
	uint32_t n = e->syms[o->sym].n[other];

	if (n == 0)
		return 0;
	return crosses(o, e->levels[side_ents(e, o->sym, other)[n - 1].level].price);
}

/* The shares executable at once for o, counted up to need, stopping at the
 * first resting order of o's firm. */
static uint32_t liquidity(const struct engine *e, const struct order *o, uint32_t need)
{
	int other = !book_side(o->side);
	const struct lvl_ent *a = side_ents(e, o->sym, other);
	uint64_t sum = 0;

	for (uint32_t i = e->syms[o->sym].n[other]; i-- > 0;) {
		const struct level *l = &e->levels[a[i].level];

		if (!crosses(o, l->price))
			break;
		for (int q = 0; q < 2; q++) {
			for (uint32_t ri = l->head[q]; ri != NONE; ri = e->orders[ri].next) {
				const struct order *r = &e->orders[ri];

				if (o->firm != 0 && r->firm == o->firm)
					return (uint32_t)sum;
				sum += r->shares;
				if (sum >= need)
					return need;
			}
		}
	}
	return (uint32_t)sum;
}

static void execute(struct engine *e, uint32_t ri, struct order *o, uint32_t shares)
{
	struct order *r = &e->orders[ri];
	uint64_t match = e->next_match++;

	risk_release(e, r, shares);
	r->shares -= shares;
	o->shares -= shares;
	engine_risk_trade(e, r->sym, r->price);
	e->st.matches++;
	e->st.shares_matched += shares;
	emit_executed(e, r, shares, r->price, OUCH_LIQ_ADDED, match);
	emit_executed(e, o, shares, r->price, OUCH_LIQ_REMOVED, match);
	engine_md_exec(e, r, shares, match);
	if (r->shares == 0) {
		engine_book_remove(e, ri);
		engine_book_order_release(e, ri);
	} else {
		engine_book_rehash(e, r);
	}
}

/* Executes incoming order o (not booked) against the other side in price-time
 * priority; STOP_SELF_MATCH when it reached an order of its own firm. */
static int match(struct engine *e, struct order *o)
{
	int other = !book_side(o->side);
	const struct lvl_ent *a = side_ents(e, o->sym, other);
	const uint32_t *n = &e->syms[o->sym].n[other];

	while (o->shares > 0 && *n > 0) {
		const struct level *l = &e->levels[a[*n - 1].level];
		uint32_t ri = l->head[Q_DISPLAYED] != NONE ? l->head[Q_DISPLAYED] : l->head[Q_HIDDEN];
		const struct order *r = &e->orders[ri];

		if (!crosses(o, l->price))
			break;
		if (o->firm != 0 && r->firm == o->firm)
			return STOP_SELF_MATCH;
		execute(e, ri, o, r->shares < o->shares ? r->shares : o->shares);
	}
	return STOP_NONE;
}

/* After the executions: the rest of the incoming order dies or is booked. */
static void settle_incoming(struct engine *e, uint32_t oi, int stop, int ioc)
{
	struct order *o = &e->orders[oi];

	if (o->shares == 0) {
		engine_md_flush(e);
		engine_book_order_release(e, oi);
	} else if (stop == STOP_SELF_MATCH) {
		engine_md_flush(e);
		e->st.self_match_cancels++;
		emit_canceled(e, o, o->shares, OUCH_CXL_SELF_MATCH);
		engine_book_order_release(e, oi);
	} else if (ioc) {
		engine_md_flush(e);
		emit_canceled(e, o, o->shares, OUCH_CXL_IOC);
		engine_book_order_release(e, oi);
	} else if (engine_book_insert(e, oi) != 0) {
		/* not reached: the caller checked that the side has room */
		engine_md_flush(e);
		emit_canceled(e, o, o->shares, OUCH_CXL_SYSTEM);
		engine_book_order_release(e, oi);
	} else {
		engine_md_rest(e, o);
	}
}

/* An accepted order arriving (Enter, or a Replace that lost priority). */
static void run_incoming(struct engine *e, uint32_t oi, uint32_t min_qty, int ioc)
{
	struct order *o = &e->orders[oi];
	int stop = STOP_NONE;

	if (min_qty <= 1 || liquidity(e, o, min_qty) >= min_qty)
		stop = match(e, o);
	settle_incoming(e, oi, stop, ioc);
}

/* --- validation ---------------------------------------------------------- */

static int valid_tif(uint32_t tif)
{
	return tif <= OUCH_TIF_MAX_SECONDS || tif == OUCH_TIF_MARKET_HOURS || tif == OUCH_TIF_SYSTEM_HOURS;
}

static int valid_display(char d)
{
	return d == OUCH_DISPLAY_ATTRIBUTABLE || d == OUCH_DISPLAY_ANONYMOUS ||
	       d == OUCH_DISPLAY_NONDISPLAYED || d == OUCH_DISPLAY_POST_ONLY;
}

/* The engine's own checks, after ouch_validate_*: what the book relies on
 * (and the display values it supports). 0 or a Rejected reason. */
static int check_fields(const struct engine *e, uint32_t shares, uint32_t price, uint32_t tif,
			char display, uint32_t min_qty)
{
	if (shares == 0)
		return OUCH_REJ_INVALID_SHARES;
	if (shares > e->max_shares)
		return OUCH_REJ_SHARES_EXCEED_THRESHOLD;
	if (price == 0 || (price > OUCH_PRICE_MAX && price != OUCH_PRICE_MARKET))
		return OUCH_REJ_INVALID_PRICE;
	if (!ouch_price_on_tick(price))
		return OUCH_REJ_INVALID_PRICE;
	if (!valid_tif(tif))
		return OUCH_REJ_INVALID_TIF;
	if (!valid_display(display))
		return OUCH_REJ_INVALID_DISPLAY;
	if (min_qty > shares)
		return OUCH_REJ_INVALID_MIN_QTY;
	return 0;
}

static int check_enter(const struct engine *e, const struct ouch_enter_order *in, uint32_t *sym)
{
	int r;

	*sym = engine_book_symbol(e, in->stock);
	if (*sym == NONE)
		return OUCH_REJ_INVALID_STOCK;
	r = ouch_validate_enter(in, e->max_shares);
	if (r)
		return r;
	if (in->side != OUCH_BUY && !is_sell(in->side))
		return OUCH_REJ_INVALID_SIDE;
	return check_fields(e, in->shares, in->price, in->tif, in->display, in->min_qty);
}

static int is_ioc(uint32_t price, uint32_t tif)
{
	return tif == OUCH_TIF_IOC || price == OUCH_PRICE_MARKET;
}

/* Pools, post-only and level room for an Enter that passed validation. */
static int check_enter_room(const struct engine *e, uint32_t user, uint32_t firm, uint32_t sym,
			    const struct ouch_enter_order *in)
{
	struct order probe;

	if (user == 0 || firm == NONE || e->n_tokens >= e->max_tokens || e->order_free == NONE)
		return OUCH_REJ_OTHER;
	probe.side = in->side;
	probe.price = in->price;
	probe.sym = sym;
	if (in->display == OUCH_DISPLAY_POST_ONLY && would_cross(e, &probe))
		return OUCH_REJ_POST_ONLY_WOULD_TAKE;
	if (!is_ioc(in->price, in->tif) && !engine_book_has_room(e, sym, book_side(in->side), in->price))
		return OUCH_REJ_OTHER;
	return 0;
}

/* --- commands ------------------------------------------------------------ */

/* The login as a NUL-terminated string (cmd->user may lack the NUL). */
static void login_str(char out[8], const char *user)
{
	uint64_t v = pack8(user, 6);

	memcpy(out, &v, 8);
	out[7] = '\0';
}

/* The firm id of the user's login firm (cached in the user: a login keeps
 * its firm); NONE when the firm table is full. */
static uint32_t firm_of(struct engine *e, uint32_t user, const char *firm)
{
	struct user *u = &e->users[user];
	uint32_t name = 0, id;

	memcpy(&name, firm, strnlen(firm, OUCH_FIRM_LEN));
	if (u->fid != NONE && u->fname == name)
		return u->fid;
	id = engine_risk_firm(e, firm, 1);
	if (id != NONE) {
		u->fname = name;
		u->fid = id;
	}
	return id;
}

static void do_enter(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_enter_order *in = &cmd->u.enter;
	char key[OUCH_TOKEN_LEN], login[8];
	uint32_t user = engine_book_user(e, cmd->user, 1), slot = NONE, sym = NONE, firm = NONE, oi;
	int found = 0, reason, quota = 0;
	uint64_t h;
	struct order *o;

	token_key(key, in->token);
	h = token_hash(user, key);
	engine_book_token_room(e);
	if (user != 0)
		quota = engine_book_user_token_room(e, user);
	/* the token slot is a likely cache miss: fetch it while validating */
	__builtin_prefetch(&e->tokens[token_home(e, h)]);
	/* closed: the same path as any rejection, so the token is consumed */
	reason = e->closed ? OUCH_REJ_CLOSED : check_enter(e, in, &sym);
	if (user != 0) {
		slot = token_find(e, user, h, key, &found);
		if (found) {
			e->st.ignored_duplicates++;
			return;
		}
	}
	if (!reason && user != 0)
		firm = firm_of(e, user, cmd->firm);
	if (!reason && firm != NONE)
		reason = engine_risk_check(e, user, firm, sym, in->shares, in->price, NULL);
	if (!reason && quota) {
		reason = OUCH_REJ_OPEN_QUOTA;
		e->st.user_token_quota++;
	}
	if (!reason)
		reason = check_enter_room(e, user, firm, sym, in);
	if (reason) {
		/* consumed when there is room (not past the user's quota) */
		if (user != 0 && !quota && e->n_tokens < e->max_tokens)
			token_insert(e, slot, user, h, key, NONE);
		if (reason == OUCH_REJ_CLOSED)
			e->st.closed_rejects++;
		login_str(login, cmd->user);
		emit_rejected(e, login, in->token, reason);
		return;
	}
	oi = engine_book_order_alloc(e, user, firm);
	o = &e->orders[oi];
	o->price = in->price;
	o->shares = in->shares;
	o->sym = sym;
	o->side = in->side;
	o->display = in->display;
	o->capacity = in->capacity;
	o->cross_type = in->cross_type;
	memcpy(o->ofirm, in->firm, strnlen(in->firm, OUCH_FIRM_LEN));
	o->expire_ns = is_ioc(in->price, in->tif) ? NO_EXPIRY : expiry_of(e->now_ns, in->tif);
	o->ref = e->next_ref++;
	token_insert(e, slot, user, h, key, oi);
	o->tok = slot;
	emit_accepted(e, o, in);
	run_incoming(e, oi, in->min_qty, is_ioc(in->price, in->tif));
}

/* 0 when the replace's fields are valid, else why not. */
static int check_replace(const struct engine *e, const struct ouch_replace_order *rp)
{
	int r = ouch_validate_replace(rp, e->max_shares);

	if (!r)
		r = check_fields(e, rp->shares, rp->price, rp->tif, rp->display, rp->min_qty);
	return r;
}

/* 0 when the valid replace that passed the risk checks can be applied to
 * o (pools, post-only), else why not. */
static int check_replace_room(const struct engine *e, const struct ouch_replace_order *rp,
			      const struct order *o, int keep)
{
	struct order probe;

	if (e->n_tokens >= e->max_tokens)
		return OUCH_REJ_OTHER;
	probe = *o;
	probe.price = rp->price;
	if (!keep && rp->display == OUCH_DISPLAY_POST_ONLY && would_cross(e, &probe))
		return OUCH_REJ_POST_ONLY_WOULD_TAKE;
	return 0;
}

/* 0 when the replace goes on; else it was answered: Rejected by the risk
 * checks or the user's token quota (quota: no room for the replacement
 * token; the order stays as it was, no token is consumed), or invalid (the
 * order is Canceled 'Z'). */
static int replace_gate(struct engine *e, uint32_t oi, const struct ouch_replace_order *rp, int keep,
			int quota)
{
	const struct order *o = &e->orders[oi];
	int reason;

	if (check_replace(e, rp) == 0) {
		reason = engine_risk_check(e, o->user, o->firm, o->sym, rp->shares, rp->price, o);
		if (!reason && quota) {
			reason = OUCH_REJ_OPEN_QUOTA;
			e->st.user_token_quota++;
		}
		if (reason) {
			emit_rejected(e, owner(e, o), rp->replacement_token, reason);
			return -1;
		}
		if (check_replace_room(e, rp, o, keep) == 0)
			return 0;
	}
	e->st.rejects++;
	engine_cancel_booked(e, oi, OUCH_CXL_SYSTEM);
	return -1;
}

/* The replacement takes over the order's pool slot and user-list place. */
static void apply_replacement(struct engine *e, uint32_t oi, const struct ouch_replace_order *rp,
			      uint32_t user, uint32_t slot_new, uint64_t h_new,
			      const char key_new[OUCH_TOKEN_LEN])
{
	struct order *o = &e->orders[oi];

	token_kill(e, o->tok);
	token_insert(e, slot_new, user, h_new, key_new, oi);
	o->tok = slot_new;
	o->ref = e->next_ref++;
	o->shares = rp->shares;
	o->display = rp->display;
	o->expire_ns = is_ioc(rp->price, rp->tif) ? NO_EXPIRY : expiry_of(e->now_ns, rp->tif);
}

static void do_replace(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_replace_order *rp = &cmd->u.replace;
	char key_old[OUCH_TOKEN_LEN], key_new[OUCH_TOKEN_LEN];
	uint32_t user = engine_book_user(e, cmd->user, 0), slot_old, slot_new, oi;
	int found = 0, keep, ioc, quota;
	uint64_t h_old, h_new;
	struct order *o;

	if (e->closed) {
		/* no order is live to replace: said plainly, not ignored */
		char login[8];

		login_str(login, cmd->user);
		e->st.closed_rejects++;
		emit_rejected(e, login, rp->replacement_token, OUCH_REJ_CLOSED);
		return;
	}
	if (user == 0) {
		e->st.ignored_dead++;
		return;
	}
	engine_book_token_room(e);
	quota = engine_book_user_token_room(e, user);
	token_key(key_old, rp->existing_token);
	token_key(key_new, rp->replacement_token);
	h_old = token_hash(user, key_old);
	h_new = token_hash(user, key_new);
	__builtin_prefetch(&e->tokens[token_home(e, h_new)]);
	slot_old = token_find(e, user, h_old, key_old, &found);
	if (!found || !token_live(&e->tokens[slot_old])) {
		e->st.ignored_dead++;
		return;
	}
	slot_new = token_find(e, user, h_new, key_new, &found);
	if (found) {
		e->st.ignored_duplicates++;
		return;
	}
	oi = e->tokens[slot_old].order;
	o = &e->orders[oi];
	ioc = is_ioc(rp->price, rp->tif);
	keep = !ioc && rp->price == o->price && rp->shares <= o->shares &&
	       queue_of(rp->display) == queue_of(o->display);
	if (replace_gate(e, oi, rp, keep, quota) != 0)
		return;
	if (keep) {
		/* in place: same level, queue and priority */
		uint64_t old_ref = o->ref;

		if (o->heap_pos != NONE)
			engine_book_heap_remove(e, oi);
		risk_release(e, o, o->shares - rp->shares);
		apply_replacement(e, oi, rp, user, slot_new, h_new, key_new);
		if (o->expire_ns != NO_EXPIRY)
			engine_book_heap_push(e, oi);
		engine_book_rehash(e, o);
		emit_replaced(e, o, rp, key_old);
		engine_md_replace_in_place(e, o, old_ref);
		return;
	}
	engine_md_moving(e, o);
	engine_book_remove(e, oi);
	if (!ioc && !engine_book_has_room(e, o->sym, book_side(o->side), rp->price)) {
		engine_md_flush(e);
		e->st.rejects++;
		emit_canceled(e, o, o->shares, OUCH_CXL_SYSTEM);
		engine_book_order_release(e, oi);
		return;
	}
	apply_replacement(e, oi, rp, user, slot_new, h_new, key_new);
	o->price = rp->price;
	emit_replaced(e, o, rp, key_old);
	run_incoming(e, oi, rp->min_qty, ioc);
}

static void do_cancel(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_cancel_order *c = &cmd->u.cancel;
	uint32_t oi = engine_book_live_order(e, cmd->user, c->token), decrement;
	char login[8];
	struct order *o;

	if (oi == NONE) {
		login_str(login, cmd->user);
		emit_cancel_reject(e, login, c->token);
		return;
	}
	o = &e->orders[oi];
	if (c->shares >= o->shares)
		return;
	if (c->shares == 0) {
		engine_cancel_booked(e, oi, OUCH_CXL_USER);
		return;
	}
	decrement = o->shares - c->shares;
	engine_md_cancel(e, o, decrement);
	risk_release(e, o, decrement);
	o->shares = c->shares;
	engine_book_rehash(e, o);
	emit_canceled(e, o, decrement, OUCH_CXL_USER);
}

static void do_modify(struct engine *e, const struct engine_cmd *cmd)
{
	const struct ouch_modify_order *md = &cmd->u.modify;
	uint32_t oi = engine_book_live_order(e, cmd->user, md->token);
	struct order *o;

	if (oi == NONE) {
		e->st.ignored_dead++;
		return;
	}
	o = &e->orders[oi];
	if ((md->side != o->side && !(is_sell(o->side) && is_sell(md->side))) || md->shares > o->shares) {
		e->st.ignored_invalid++;
		return;
	}
	if (md->shares == 0)
		engine_md_delete(e, o);
	else
		engine_md_cancel(e, o, o->shares - md->shares);
	risk_release(e, o, o->shares - md->shares);
	o->side = md->side;
	o->shares = md->shares;
	if (md->shares == 0) {
		engine_book_remove(e, oi);
		emit_modified(e, o);
		engine_book_order_release(e, oi);
		return;
	}
	engine_book_rehash(e, o);
	emit_modified(e, o);
}

static void do_cancel_all(struct engine *e, const struct engine_cmd *cmd)
{
	uint32_t user = engine_book_user(e, cmd->user, 0), oi, next;

	if (user == 0)
		return;
	for (oi = e->users[user].head; oi != NONE; oi = next) {
		next = e->orders[oi].unext;
		engine_cancel_booked(e, oi, OUCH_CXL_USER);
	}
}

/* --- the trading day ----------------------------------------------------- */

/* Cancels every resting order (reason 'E') and closes the market. Book
 * order, best price first within a side: what the snapshot keeps (pool
 * indices are not) and what needs no sorting, so no allocation. */
static void close_day(struct engine *e)
{
	for (uint32_t sym = 0; sym < e->n_symbols; sym++) {
		for (int side = 0; side < 2; side++) {
			const struct lvl_ent *a = side_ents(e, sym, side);

			/* each cancel may free the best level, which is the last entry */
			while (e->syms[sym].n[side] > 0) {
				const struct level *l = &e->levels[a[e->syms[sym].n[side] - 1].level];
				uint32_t oi = l->head[Q_DISPLAYED] != NONE ? l->head[Q_DISPLAYED]
									  : l->head[Q_HIDDEN];

				e->st.closed_cancels++;
				engine_cancel_booked(e, oi, OUCH_CXL_CLOSED);
			}
		}
	}
	e->closed = 1;
}

static void do_day(struct engine *e, uint64_t seq, const struct engine_day_cmd *d)
{
	if (d->kind == ENGINE_DAY_END && !e->closed && d->day == e->day) {
		close_day(e);
		engine_md_day(e, ENGINE_MD_DAY_END);
	} else if (d->kind == ENGINE_DAY_START && e->day < UINT32_MAX && d->day == e->day + 1) {
		/* a START without the END before it ends the day all the same:
		 * the tape has moved on to the next session */
		if (!e->closed) {
			close_day(e);
			engine_md_day(e, ENGINE_MD_DAY_END);
		}
		engine_book_tokens_forget_all(e);
		e->day = d->day;
		e->day_base = seq;
		e->closed = 0;
		engine_md_day(e, ENGINE_MD_DAY_START);
	} else {
		e->st.day_ignored++;
		return;
	}
	e->st.day_events++;
}

/* Cancels (reason 'T') every order whose expiry time is at or before now. */
static void expire(struct engine *e)
{
	while (e->n_heap > 0 && e->orders[e->heap[0]].expire_ns <= e->now_ns) {
		e->st.expired++;
		engine_cancel_booked(e, e->heap[0], OUCH_CXL_TIMEOUT);
	}
}

static void begin(struct engine *e, uint64_t tape_ns, engine_emit_fn fn, void *ctx)
{
	e->now_ns = tape_ns;
	e->ts = tape_ns % NS_PER_DAY;
	e->emit = fn;
	e->ctx = ctx;
}

void engine_apply(struct engine *e, uint64_t seq, uint64_t tape_ns, const struct engine_cmd *cmd,
		  engine_emit_fn emit_fn, void *ctx)
{
	begin(e, tape_ns, emit_fn, ctx);
	e->st.commands++;
	e->st.last_seq = seq;
	expire(e);
	switch (cmd->kind) {
	case ENGINE_ENTER:
		do_enter(e, cmd);
		break;
	case ENGINE_REPLACE:
		do_replace(e, cmd);
		break;
	case ENGINE_CANCEL:
		do_cancel(e, cmd);
		break;
	case ENGINE_MODIFY:
		do_modify(e, cmd);
		break;
	case ENGINE_CANCEL_ALL:
		do_cancel_all(e, cmd);
		break;
	case ENGINE_DAY:
		do_day(e, seq, &cmd->u.day);
		break;
	case ENGINE_ADMIN:
		engine_risk_admin(e, &cmd->u.admin);
		break;
	default:
		e->st.ignored_invalid++;
		break;
	}
}

void engine_advance_time(struct engine *e, uint64_t tape_ns, engine_emit_fn emit_fn, void *ctx)
{
	begin(e, tape_ns, emit_fn, ctx);
	expire(e);
}

uint64_t engine_hash(const struct engine *e)
{
	uint64_t s[11] = {
		e->book_hash, e->next_ref, e->next_match, e->next_prio, e->n_tokens, e->orders_open,
		e->day, e->day_base, (uint64_t)e->closed, e->risk_hash, e->cfg_hash,
	};
	/* Day 1, open, hashes as before days existed, so that a replica of this
	 * version agrees with an older one at checkpoints until the first
	 * DayEvent (which the older one cannot apply) during a rolling upgrade;
	 * so does risk until the configuration has some (a per-user token
	 * quota included) or an Admin applies (until then no check runs and
	 * reference prices change nothing). */
	size_t n = e->risk_on || e->max_user_tokens ? 11
		   : e->day == 1 && e->day_base == 1 && !e->closed ? 6
								     : 9;

	return XXH3_64bits(s, n * sizeof(s[0]));
}

void engine_get_day(const struct engine *e, struct engine_day *out)
{
	out->day = e->day;
	out->open = !e->closed;
	out->base = e->day_base;
}

uint64_t engine_time(const struct engine *e)
{
	return e->now_ns;
}

void engine_get_stats(const struct engine *e, struct engine_stats *out)
{
	*out = e->st;
	out->orders_open = e->orders_open;
	out->tokens = e->n_tokens;
	out->users = e->n_users;
}

void engine_get_pools(const struct engine *e, struct engine_pool out[ENGINE_POOLS])
{
	out[0] = (struct engine_pool){ "orders", e->orders_open, e->max_orders };
	out[1] = (struct engine_pool){ "tokens", e->n_tokens, e->max_tokens };
	out[2] = (struct engine_pool){ "levels", e->levels_used, e->level_cap };
	out[3] = (struct engine_pool){ "users", e->n_users, e->max_users };
	out[4] = (struct engine_pool){ "firms", e->n_firms, e->max_firms };
}
