/* The matching engine's pre-trade risk (semantics in engine.h, "Pre-trade
 * risk"): the firm table, the limits of users and firms in two layers (the
 * configuration's and the tape's) over the "*" defaults, kill switches,
 * reference prices and the collar, ENGINE_ADMIN, the risk part of the
 * state hash, engine_get_risk and the self-check of the per-user and
 * per-firm aggregates (which engine_private.h's risk_rest and friends keep). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine_private.h"
#include "prealloc.h"

#define DEFAULT_MAX_FIRMS 4096u

enum { DEF_USER = 0, DEF_FIRM = 1 };

/* What a check found, in the order of the checks (engine.h). */
enum { RK_OK, RK_KILLED, RK_QTY, RK_NOTIONAL, RK_COLLAR, RK_OPEN, RK_CREDIT };

/* What the state hash covers of one name's layer; zero-filled before use. */
struct risk_image {
	uint64_t name;
	uint32_t scope, killed;
	struct risk_limits l;
};

_Static_assert(sizeof(struct risk_limits) == 32, "risk_limits has no padding");

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

/* --- the firm and named-user tables --------------------------------------- */

static uint32_t pack_firm(const char *firm)
{
	uint32_t v = 0;

	memcpy(&v, firm, strnlen(firm, OUCH_FIRM_LEN));
	return v;
}

static uint32_t firm_slot(const struct engine *e, uint32_t name)
{
	uint32_t i = (uint32_t)mix64(name) & e->firm_mask;

	for (;; i = (i + 1) & e->firm_mask) {
		uint32_t id = e->firm_slots[i];

		if (id == 0 || e->firms[id].name == name)
			return i;
	}
}

uint32_t engine_risk_firm(struct engine *e, const char *firm, int create)
{
	uint32_t name = pack_firm(firm), i, id;
	struct firm *f;

	if (name == 0)
		return 0;
	i = firm_slot(e, name);
	if (e->firm_slots[i] != 0)
		return e->firm_slots[i];
	if (!create || e->n_firms >= e->max_firms)
		return NONE;
	id = ++e->n_firms;
	e->firm_slots[i] = id;
	f = &e->firms[id];
	f->name = name;
	memcpy(f->str, &name, OUCH_FIRM_LEN);
	f->str[OUCH_FIRM_LEN] = '\0';
	f->head = f->tail = NONE;
	return id;
}

static uint32_t ulim_slot(const struct engine *e, uint64_t name)
{
	uint32_t i = (uint32_t)mix64(name) & e->ulim_mask;

	for (;; i = (i + 1) & e->ulim_mask) {
		uint32_t k = e->ulim_slots[i];

		if (k == 0 || e->ulims[k].name == name)
			return i;
	}
}

/* The named user's entry, created (and tied to its user) when asked and
 * there is room; 0 if none. */
static uint32_t ulim_get(struct engine *e, uint64_t name, int create)
{
	uint32_t i = ulim_slot(e, name), k, u;

	if (e->ulim_slots[i] != 0)
		return e->ulim_slots[i];
	if (!create || e->n_ulims >= e->max_users)
		return 0;
	k = ++e->n_ulims;
	e->ulim_slots[i] = k;
	e->ulims[k].name = name;
	u = engine_book_user_find(e, name);
	if (u != 0) {
		e->users[u].lim = k;
		e->ulims[k].user = u;
	}
	return k;
}

void engine_risk_user_new(struct engine *e, uint32_t user)
{
	uint32_t k = e->ulim_slots[ulim_slot(e, e->users[user].name)];

	if (k != 0) {
		e->users[user].lim = k;
		e->ulims[k].user = user;
	}
}

/* A firm or user name of an Admin (NUL-terminated, at most 8), packed, and
 * its layers, created when asked; NULL for a bad name or a full table.
 * "*" is the default of its scope. */
static struct rlim *named(struct engine *e, uint32_t scope, const char *name, int create,
			  uint64_t *packed)
{
	size_t len = strnlen(name, 8);
	uint32_t id;

	if (len == 1 && name[0] == '*') {
		*packed = '*';
		return scope == ENGINE_SCOPE_USER ? &e->def[DEF_USER]
		       : scope == ENGINE_SCOPE_FIRM ? &e->def[DEF_FIRM] : NULL;
	}
	if (scope == ENGINE_SCOPE_FIRM && len >= 1 && len <= OUCH_FIRM_LEN) {
		id = engine_risk_firm(e, name, create);
		if (id == NONE)
			return NULL;
		*packed = e->firms[id].name;
		return &e->firms[id].r;
	}
	if (scope == ENGINE_SCOPE_USER && len >= 1 && len <= 6) {
		*packed = pack8(name, 6);
		id = ulim_get(e, *packed, create);
		return id ? &e->ulims[id].r : NULL;
	}
	return NULL;
}

struct rlim *engine_risk_layers(struct engine *e, uint32_t scope, uint64_t packed)
{
	char name[9];
	uint64_t again = 0;
	struct rlim *r;

	memcpy(name, &packed, 8);
	name[8] = '\0';
	r = named(e, scope, name, 1, &again);
	return again == packed ? r : NULL; /* a name that packs back the same */
}

/* --- limits --------------------------------------------------------------- */

/* The limits given in src replace dst's (the fields whose bit is set). */
static void put(struct risk_limits *dst, const struct risk_limits *src)
{
	uint32_t set = src->set & RISK_ALL;

	if (set & RISK_MAX_QTY)
		dst->max_qty = src->max_qty;
	if (set & RISK_MAX_NOTIONAL)
		dst->max_notional = src->max_notional;
	if (set & RISK_COLLAR)
		dst->collar_bp = src->collar_bp;
	if (set & RISK_MAX_OPEN)
		dst->max_open = src->max_open;
	if (set & RISK_CREDIT)
		dst->credit = src->credit;
	dst->set |= set;
}

/* The fields of l that out has not decided yet. */
static void merge(struct risk_limits *out, const struct risk_limits *l)
{
	struct risk_limits take = *l;

	take.set &= ~out->set;
	if (take.set)
		put(out, &take);
}

/* The effective limits of a name (own: its layers, or NULL) of scope def:
 * tape[name], config[name], tape["*"], config["*"], field by field; 0 is
 * none. */
static void effective(const struct engine *e, const struct rlim *own, int def,
		      struct risk_limits *out)
{
	memset(out, 0, sizeof(*out));
	if (own) {
		merge(out, &own->tape);
		merge(out, &own->cfg);
	}
	merge(out, &e->def[def].tape);
	merge(out, &e->def[def].cfg);
}

/* --- the checks ----------------------------------------------------------- */

struct risk_order {
	uint32_t shares, price, ref; /* ref: the symbol's reference, 0 none */
	uint64_t notional;
};

static int outside_collar(const struct risk_order *ro, uint32_t collar_bp)
{
	uint64_t diff;

	if (ro->price == OUCH_PRICE_MARKET || ro->ref == 0)
		return 0;
	diff = ro->price > ro->ref ? ro->price - ro->ref : ro->ref - ro->price;
	return diff * 10000 > (uint64_t)ro->ref * collar_bp;
}

/* One party's limits l and kill switch against the order; open and
 * notional: its resting orders, not counting a replaced one. */
static int check_party(const struct risk_limits *l, uint32_t killed, const struct risk_order *ro,
		       uint32_t open, uint64_t notional)
{
	if (killed)
		return RK_KILLED;
	if (l->set == 0)
		return RK_OK;
	if (l->max_qty && ro->shares > l->max_qty)
		return RK_QTY;
	if (l->max_notional && ro->notional > l->max_notional)
		return RK_NOTIONAL;
	if (l->collar_bp && outside_collar(ro, l->collar_bp))
		return RK_COLLAR;
	if (l->max_open && open >= l->max_open)
		return RK_OPEN;
	if (l->credit && (ro->notional > l->credit || notional > l->credit - ro->notional))
		return RK_CREDIT;
	return RK_OK;
}

/* The Rejected reason of a check's finding, counted. */
static int reason_of(struct engine *e, int rk)
{
	e->st.risk_rejects++;
	switch (rk) {
	case RK_KILLED:
		e->st.risk_killed++;
		return OUCH_REJ_REJECT_ALL;
	case RK_QTY:
		e->st.risk_qty++;
		return OUCH_REJ_EXCEEDED_SHARES_LIMIT;
	case RK_NOTIONAL:
		e->st.risk_notional++;
		return OUCH_REJ_EXCEEDED_DOLLAR_LIMIT;
	case RK_COLLAR:
		e->st.risk_collar++;
		return OUCH_REJ_INVALID_PRICE;
	case RK_OPEN:
		e->st.risk_open++;
		return OUCH_REJ_OPEN_QUOTA;
	default:
		e->st.risk_credit++;
		return OUCH_REJ_CREDIT;
	}
}

static uint32_t ref_of(const struct symbol *s)
{
	return s->ref ? s->ref : s->ref_cfg;
}

int engine_risk_check_slow(struct engine *e, uint32_t user, uint32_t firm, uint32_t sym,
			   uint32_t shares, uint32_t price, const struct order *own)
{
	const struct user *u = &e->users[user];
	const struct firm *f = &e->firms[firm];
	const struct rlim *ur = u->lim != NONE ? &e->ulims[u->lim].r : NULL;
	uint32_t own_open = own ? 1 : 0;
	uint64_t own_notional = own ? (uint64_t)own->shares * own->price : 0;
	struct risk_order ro = { .shares = shares, .price = price, .ref = ref_of(&e->syms[sym]) };
	struct risk_limits l;
	int rk;

	/* the kill switches first, the user's then the firm's (engine.h) */
	if ((ur && ur->killed) || (firm != 0 && f->r.killed))
		return reason_of(e, RK_KILLED);
	ro.notional = risk_notional(shares, price == OUCH_PRICE_MARKET ? ro.ref : price);
	effective(e, ur, DEF_USER, &l);
	rk = check_party(&l, 0, &ro, u->open - own_open, risk_sum64(u->notional - own_notional));
	if (rk == RK_OK && firm != 0) {
		effective(e, &f->r, DEF_FIRM, &l);
		rk = check_party(&l, 0, &ro, f->open - own_open, risk_sum64(f->notional - own_notional));
	}
	return rk == RK_OK ? 0 : reason_of(e, rk);
}

/* --- the hash ------------------------------------------------------------- */

uint64_t engine_risk_item(uint32_t scope, uint64_t name, const struct rlim *r)
{
	struct risk_image im;

	if (r->tape.set == 0 && !r->killed)
		return 0;
	memset(&im, 0, sizeof(im));
	im.name = name;
	im.scope = scope;
	im.killed = r->killed;
	im.l = r->tape;
	return XXH3_64bits_withSeed(&im, sizeof(im), 'T');
}

uint64_t engine_risk_ref_item(uint64_t sym_name, uint32_t price)
{
	uint64_t v[2] = { sym_name, price };

	return price ? XXH3_64bits_withSeed(v, sizeof(v), 'R') : 0;
}

/* The per-user token quota's part of cfg_hash: it changes which orders are
 * taken, as limits do, so a replica configured otherwise hashes otherwise. */
static uint64_t quota_item(uint32_t max_user_tokens)
{
	return max_user_tokens ? XXH3_64bits_withSeed(&max_user_tokens, sizeof(max_user_tokens), 'Q')
			       : 0;
}

/* The configuration layer of one name, for cfg_hash. */
static uint64_t cfg_item(uint32_t scope, uint64_t name, const struct rlim *r)
{
	struct risk_image im;

	if (r->cfg.set == 0)
		return 0;
	memset(&im, 0, sizeof(im));
	im.name = name;
	im.scope = scope;
	im.l = r->cfg;
	return XXH3_64bits_withSeed(&im, sizeof(im), 'C');
}

/* The tape layer's hash from scratch (want 0) or the configuration's (1). */
static uint64_t hash_all(const struct engine *e, int cfg)
{
	uint64_t (*item)(uint32_t, uint64_t, const struct rlim *) = cfg ? cfg_item : engine_risk_item;
	uint64_t h = item(ENGINE_SCOPE_USER, '*', &e->def[DEF_USER]) ^
		     item(ENGINE_SCOPE_FIRM, '*', &e->def[DEF_FIRM]);

	for (uint32_t f = 1; f <= e->n_firms; f++)
		h ^= item(ENGINE_SCOPE_FIRM, e->firms[f].name, &e->firms[f].r);
	for (uint32_t k = 1; k <= e->n_ulims; k++)
		h ^= item(ENGINE_SCOPE_USER, e->ulims[k].name, &e->ulims[k].r);
	for (uint32_t s = 0; s < e->n_symbols; s++) {
		const struct symbol *sy = &e->syms[s];

		h ^= cfg ? engine_risk_ref_item(~sy->name, sy->ref_cfg)
			 : engine_risk_ref_item(sy->name, sy->ref);
	}
	return h;
}

uint64_t engine_risk_rehash(const struct engine *e)
{
	return hash_all(e, 0);
}

void engine_risk_set_ref(struct engine *e, uint32_t sym, uint32_t price)
{
	struct symbol *s = &e->syms[sym];

	e->risk_hash ^= engine_risk_ref_item(s->name, s->ref) ^ engine_risk_ref_item(s->name, price);
	s->ref = price;
}

/* --- ENGINE_ADMIN ---------------------------------------------------------- */

/* Cancels (reason 'S') every open order of a user or a firm, in entry order. */
static void kill_cancel(struct engine *e, uint32_t scope, uint32_t id)
{
	uint32_t oi = scope == ENGINE_SCOPE_USER ? e->users[id].head : e->firms[id].head, next;

	for (; oi != NONE; oi = next) {
		next = scope == ENGINE_SCOPE_USER ? e->orders[oi].unext : e->orders[oi].fnext;
		e->st.kill_cancels++;
		engine_cancel_booked(e, oi, OUCH_CXL_SUPERVISORY);
	}
}

/* 1 when name (NUL-terminated) can name a firm or user of scope. */
static int valid_name(uint32_t scope, const char *name)
{
	size_t len = strlen(name);

	if (len == 1 && name[0] == '*')
		return 1;
	return len >= 1 && len <= (scope == ENGINE_SCOPE_FIRM ? OUCH_FIRM_LEN : 6);
}

/* LIMITS, KILL or LIFT of a firm or user; 0, or -1 when not taken. */
static int admin_name(struct engine *e, const struct engine_admin_cmd *a, const char *name)
{
	int star = name[0] == '*' && name[1] == '\0';
	uint64_t packed = 0, before;
	struct rlim *r;
	uint32_t id;

	if ((a->scope != ENGINE_SCOPE_FIRM && a->scope != ENGINE_SCOPE_USER) ||
	    !valid_name(a->scope, name) || (star && a->kind != ENGINE_ADMIN_LIMITS))
		return -1;
	r = named(e, a->scope, name, a->kind != ENGINE_ADMIN_LIFT, &packed);
	if (!r) /* a LIFT of a name without a switch lifts nothing; else full */
		return a->kind == ENGINE_ADMIN_LIFT ? 0 : -1;
	before = engine_risk_item(a->scope, packed, r);
	if (a->kind == ENGINE_ADMIN_LIMITS)
		put(&r->tape, &a->limits);
	else
		r->killed = a->kind == ENGINE_ADMIN_KILL;
	e->risk_hash ^= before ^ engine_risk_item(a->scope, packed, r);
	if (a->kind == ENGINE_ADMIN_KILL && a->cancel) {
		if (a->scope == ENGINE_SCOPE_FIRM)
			kill_cancel(e, a->scope, e->firm_slots[firm_slot(e, (uint32_t)packed)]);
		else if ((id = engine_book_user_find(e, packed)) != 0)
			kill_cancel(e, a->scope, id);
	}
	return 0;
}

void engine_risk_admin(struct engine *e, const struct engine_admin_cmd *a)
{
	char name[9];
	size_t len = strnlen(a->name, 8);
	int r = -1;

	memcpy(name, a->name, len);
	name[len] = '\0';
	if (a->kind == ENGINE_ADMIN_LIMITS || a->kind == ENGINE_ADMIN_KILL ||
	    a->kind == ENGINE_ADMIN_LIFT) {
		r = admin_name(e, a, name);
	} else if (a->kind == ENGINE_ADMIN_REFERENCE && a->scope == ENGINE_SCOPE_SYMBOL &&
		   a->price != 0 && a->price <= OUCH_PRICE_MAX && len > 0) {
		uint32_t sym = engine_book_symbol(e, name);

		if (sym != NONE) {
			if (e->syms[sym].ref != a->price)
				engine_risk_set_ref(e, sym, a->price);
			r = 0;
		}
	}
	if (r) {
		e->st.admin_ignored++;
		return;
	}
	e->st.admin_events++;
	e->risk_on = 1;
}

/* --- life cycle ------------------------------------------------------------ */

int engine_risk_alloc(struct engine *e, const struct engine_config *cfg)
{
	e->max_firms = cfg->max_firms ? cfg->max_firms : DEFAULT_MAX_FIRMS;
	e->firm_mask = pow2_at_least(2 * (uint64_t)e->max_firms) - 1;
	e->ulim_mask = pow2_at_least(2 * (uint64_t)e->max_users) - 1;
	e->firms = prealloc_zeroed((size_t)e->max_firms + 1, sizeof(*e->firms));
	e->firm_slots = prealloc_zeroed((size_t)e->firm_mask + 1, sizeof(*e->firm_slots));
	e->ulims = prealloc_zeroed((size_t)e->max_users + 1, sizeof(*e->ulims));
	e->ulim_slots = prealloc_zeroed((size_t)e->ulim_mask + 1, sizeof(*e->ulim_slots));
	if (!e->firms || !e->firm_slots || !e->ulims || !e->ulim_slots)
		return -ENOMEM;
	e->firms[0].head = e->firms[0].tail = NONE; /* the orders of no firm */
	return 0;
}

/* One entry of the configuration: 0, 1 when not taken here, -EINVAL. */
static int configure_one(struct engine *e, const struct engine_admin_cmd *a)
{
	char name[9];
	size_t len = strnlen(a->name, 8);
	uint64_t packed;
	struct rlim *r;
	uint32_t sym;

	memcpy(name, a->name, len);
	name[len] = '\0';
	switch (a->kind) {
	case ENGINE_ADMIN_LIMITS:
		if ((a->limits.set & ~RISK_ALL) || !valid_name(a->scope, name))
			return -EINVAL;
		r = named(e, a->scope, name, 1, &packed);
		if (!r)
			return -EINVAL;
		put(&r->cfg, &a->limits);
		return 0;
	case ENGINE_ADMIN_REFERENCE:
		if (a->scope != ENGINE_SCOPE_SYMBOL || len == 0 || a->price == 0 ||
		    a->price > OUCH_PRICE_MAX)
			return -EINVAL;
		sym = engine_book_symbol(e, name);
		if (sym == NONE)
			return 1; /* another partition's */
		e->syms[sym].ref_cfg = a->price;
		return 0;
	case ENGINE_ADMIN_KILL:
	case ENGINE_ADMIN_LIFT:
		return 1; /* operator's acts, not configuration */
	default:
		return -EINVAL;
	}
}

int engine_risk_configure(struct engine *e, const struct engine_config *cfg)
{
	for (size_t i = 0; i < cfg->n_risk; i++) {
		int r = configure_one(e, &cfg->risk[i]);

		if (r < 0)
			return r;
		if (r == 0)
			e->risk_cfg = 1;
	}
	e->risk_on = e->risk_cfg;
	e->cfg_hash = hash_all(e, 1);
	e->cfg_hash ^= quota_item(cfg->max_user_tokens);
	return 0;
}

void engine_risk_free(struct engine *e)
{
	free(e->ulim_slots);
	free(e->ulims);
	free(e->firm_slots);
	free(e->firms);
}

/* --- views and self-check ---------------------------------------------------- */

int engine_get_risk(const struct engine *e, uint32_t scope, const char *name,
		    struct engine_risk_view *out)
{
	size_t len = strnlen(name, 8);
	const struct rlim *r = NULL;
	uint32_t open = 0, id;
	risk_sum notional = 0;

	if (scope != ENGINE_SCOPE_USER && scope != ENGINE_SCOPE_FIRM)
		return -EINVAL;
	if (len == 1 && name[0] == '*') {
		/* the defaults */
	} else if (scope == ENGINE_SCOPE_FIRM) {
		id = len >= 1 && len <= OUCH_FIRM_LEN ? e->firm_slots[firm_slot(e, pack_firm(name))] : 0;
		if (id == 0)
			return -ENOENT;
		r = &e->firms[id].r;
		open = e->firms[id].open;
		notional = e->firms[id].notional;
	} else {
		uint64_t packed = pack8(name, 6);
		uint32_t k = e->ulim_slots[ulim_slot(e, packed)];

		id = len >= 1 && len <= 6 ? engine_book_user_find(e, packed) : 0;
		if (id == 0 && (k == 0 || len > 6))
			return -ENOENT;
		r = k ? &e->ulims[k].r : NULL;
		if (id) {
			open = e->users[id].open;
			notional = e->users[id].notional;
		}
	}
	effective(e, r, scope == ENGINE_SCOPE_USER ? DEF_USER : DEF_FIRM, &out->limits);
	out->limits.set = RISK_ALL;
	out->killed = r ? (int)r->killed : 0;
	out->open_orders = open;
	out->open_notional = risk_sum64(notional);
	return 0;
}

/* The resting orders' count and notional, from the lists: a user's (unext)
 * or a firm's (fnext, its links checked); -1 when a list is broken. */
static int list_sums(const struct engine *e, uint32_t head, int firm, uint32_t id, uint32_t *count,
		     risk_sum *notional)
{
	uint32_t prev = NONE;

	*count = 0;
	*notional = 0;
	for (uint32_t oi = head; oi != NONE; prev = oi, oi = firm ? e->orders[oi].fnext : e->orders[oi].unext) {
		const struct order *o = &e->orders[oi];

		if (++*count > e->orders_open || (firm && (o->firm != id || o->fprev != prev)))
			return -1;
		*notional += (uint64_t)o->shares * o->price;
	}
	return firm && e->firms[id].tail != prev ? -1 : 0;
}

int engine_risk_verify(const struct engine *e)
{
	uint64_t listed = 0;
	risk_sum notional;
	uint32_t count;

	for (uint32_t u = 1; u <= e->n_users; u++) {
		const struct user *us = &e->users[u];

		if (list_sums(e, us->head, 0, u, &count, &notional) != 0 || count != us->open ||
		    notional != us->notional)
			return -EUCLEAN;
		if (us->lim != NONE && (us->lim > e->n_ulims || e->ulims[us->lim].user != u ||
					e->ulims[us->lim].name != us->name))
			return -EUCLEAN;
	}
	for (uint32_t f = 0; f <= e->n_firms; f++) {
		const struct firm *fm = &e->firms[f];

		if (list_sums(e, fm->head, 1, f, &count, &notional) != 0 || count != fm->open ||
		    notional != fm->notional)
			return -EUCLEAN;
		listed += count;
	}
	for (uint32_t k = 1; k <= e->n_ulims; k++) {
		uint32_t u = e->ulims[k].user;

		if (u != 0 ? u > e->n_users || e->users[u].lim != k
			   : engine_book_user_find(e, e->ulims[k].name) != 0)
			return -EUCLEAN;
	}
	if (listed != e->orders_open || hash_all(e, 0) != e->risk_hash ||
	    (hash_all(e, 1) ^ quota_item(e->max_user_tokens)) != e->cfg_hash)
		return -EUCLEAN;
	return 0;
}
