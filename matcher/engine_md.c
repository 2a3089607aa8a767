/* The matching engine's market data reports (engine.h, "Market data"):
 * what the displayed book does, for the ITCH feed; and the walk of the
 * displayed book that a GLIMPSE snapshot gives. The engine's state is
 * never changed here (md_pending aside, which is the reports' own). */
#include <string.h>

#include "engine_private.h"

void engine_set_md(struct engine *e, engine_md_fn fn, void *ctx)
{
	e->md = fn;
	e->md_ctx = ctx;
	e->md_pending = 0;
}

static void md_fill(const struct engine *e, struct engine_md *md, enum engine_md_kind kind,
		    const struct order *o)
{
	memset(md, 0, sizeof(*md));
	md->kind = kind;
	md->ts = e->ts;
	md->sym = o->sym;
	md->stock = e->syms[o->sym].str;
	md->side = o->side;
	md->shares = o->shares;
	md->price = o->price;
	md->ref = o->ref;
}

/* The attribution of an ADD: the login's firm, for Display 'A' only. */
static void md_attribution(const struct engine *e, struct engine_md *md, const struct order *o)
{
	if (o->display == OUCH_DISPLAY_ATTRIBUTABLE && o->firm != 0)
		memcpy(md->firm, e->firms[o->firm].str, OUCH_FIRM_LEN);
}

void engine_md_flush_slow(struct engine *e)
{
	struct engine_md md;

	memset(&md, 0, sizeof(md));
	md.kind = ENGINE_MD_DELETE;
	md.ts = e->ts;
	md.sym = e->md_pending_sym;
	md.stock = e->syms[md.sym].str;
	md.ref = e->md_pending;
	e->md_pending = 0;
	e->md(e->md_ctx, &md);
}

void engine_md_report(struct engine *e, enum engine_md_kind kind, const struct order *o,
		      uint32_t shares, uint64_t match)
{
	struct engine_md md;

	engine_md_flush(e);
	md_fill(e, &md, kind, o);
	md.shares = shares;
	md.match = match;
	if (kind == ENGINE_MD_TRADE)
		md.ref = 0;
	e->md(e->md_ctx, &md);
}

void engine_md_rest_slow(struct engine *e, const struct order *o)
{
	struct engine_md md;

	if (!md_displayed(o)) {
		engine_md_flush(e);
		return;
	}
	if (e->md_pending) {
		md_fill(e, &md, ENGINE_MD_REPLACE, o);
		md.old_ref = e->md_pending;
		e->md_pending = 0;
	} else {
		md_fill(e, &md, ENGINE_MD_ADD, o);
		md_attribution(e, &md, o);
	}
	e->md(e->md_ctx, &md);
}

void engine_md_day(struct engine *e, enum engine_md_kind kind)
{
	struct engine_md md;

	if (!e->md)
		return;
	engine_md_flush(e);
	memset(&md, 0, sizeof(md));
	md.kind = kind;
	md.ts = e->ts;
	md.day = e->day;
	e->md(e->md_ctx, &md);
}

void engine_md_walk(const struct engine *e, engine_md_fn fn, void *ctx)
{
	struct engine_md md;

	for (uint32_t sym = 0; sym < e->n_symbols; sym++) {
		for (int side = 0; side < 2; side++) {
			const struct lvl_ent *a = side_ents(e, sym, side);

			for (uint32_t i = e->syms[sym].n[side]; i-- > 0;) {
				const struct level *l = &e->levels[a[i].level];

				for (uint32_t oi = l->head[Q_DISPLAYED]; oi != NONE;
				     oi = e->orders[oi].next) {
					const struct order *o = &e->orders[oi];

					md_fill(e, &md, ENGINE_MD_ADD, o);
					md_attribution(e, &md, o);
					fn(ctx, &md);
				}
			}
		}
	}
}
