/* The ITCH feed of a partition from the engine's market data reports
 * (feedgen.h): the messages, their day and sequence numbers. */
#include <errno.h>
#include <string.h>

#include "feedgen.h"

#define NS_PER_DAY (86400ull * 1000000000ull)

int feedgen_init(struct feedgen *g, const struct feedgen_config *cfg, feedgen_out_fn out,
		 void *ctx)
{
	if (cfg->n_symbols == 0 || cfg->n_symbols > FEEDGEN_MAX_SYMBOLS || cfg->locate_base == 0 ||
	    cfg->locate_base + cfg->n_symbols - 1 > UINT16_MAX)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_symbols; i++) {
		size_t n = strlen(cfg->symbols[i]);

		if (n == 0 || n > ITCH_STOCK_LEN)
			return -EINVAL;
	}
	memset(g, 0, sizeof(*g));
	g->cfg = *cfg;
	g->st.day = 1;
	g->st.next = 1;
	g->out = out;
	g->ctx = ctx;
	return 0;
}

static void msg_init(const struct feedgen *g, struct itch_msg *m, char type, uint32_t sym,
		     uint64_t ts)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->locate = sym == UINT32_MAX ? 0 : (uint16_t)(g->cfg.locate_base + sym);
	m->tracking = g->cfg.tracking;
	m->timestamp = ts % NS_PER_DAY;
}

/* Encodes m and hands it out with seq (0: not numbered, a snapshot's). */
static void put(const struct feedgen *g, struct feedgen *numbered, const struct itch_msg *m,
		feedgen_out_fn out, void *ctx)
{
	uint8_t buf[ITCH_MAX_LEN];
	int len = itch_encode(m, buf, sizeof(buf));

	if (len < 0) {
		if (numbered)
			numbered->encode_errors++;
		return;
	}
	if (!numbered) {
		out(ctx, g->st.day, 0, buf, (size_t)len);
		return;
	}
	out(ctx, numbered->st.day, numbered->st.next++, buf, (size_t)len);
	numbered->messages++;
}

static void emit(struct feedgen *g, const struct itch_msg *m)
{
	put(g, g, m, g->out, g->ctx);
}

static void system_event(struct feedgen *g, char code, uint64_t ts)
{
	struct itch_msg m;

	msg_init(g, &m, ITCH_SYSTEM_EVENT, UINT32_MAX, ts);
	m.u.system_event.event_code = code;
	emit(g, &m);
}

/* The symbol's Stock Directory and Trading Action. */
static void directory(const struct feedgen *g, struct feedgen *numbered, uint32_t sym,
		      uint64_t ts, feedgen_out_fn out, void *ctx)
{
	struct itch_msg m;

	msg_init(g, &m, ITCH_STOCK_DIRECTORY, sym, ts);
	strcpy(m.u.stock_directory.stock, g->cfg.symbols[sym]);
	m.u.stock_directory.market_category = 'Q';
	m.u.stock_directory.financial_status = 'N';
	m.u.stock_directory.round_lot_size = 100;
	m.u.stock_directory.round_lots_only = 'N';
	m.u.stock_directory.issue_classification = 'C';
	strcpy(m.u.stock_directory.issue_subtype, "Z");
	m.u.stock_directory.authenticity = 'P';
	m.u.stock_directory.short_sale_threshold = 'N';
	m.u.stock_directory.ipo_flag = 'N';
	m.u.stock_directory.luld_tier = '1';
	m.u.stock_directory.etp_flag = 'N';
	m.u.stock_directory.inverse = 'N';
	put(g, numbered, &m, out, ctx);
	msg_init(g, &m, ITCH_TRADING_ACTION, sym, ts);
	strcpy(m.u.trading_action.stock, g->cfg.symbols[sym]);
	m.u.trading_action.state = ITCH_STATE_TRADING;
	m.u.trading_action.reserved = ' ';
	put(g, numbered, &m, out, ctx);
}

static void day_start(struct feedgen *g, uint64_t ts)
{
	g->st.started = 1;
	system_event(g, ITCH_EVENT_START_OF_MESSAGES, ts);
	system_event(g, ITCH_EVENT_START_OF_SYSTEM, ts);
	for (uint32_t i = 0; i < g->cfg.n_symbols; i++)
		directory(g, g, i, ts, g->out, g->ctx);
	system_event(g, ITCH_EVENT_START_OF_MARKET, ts);
}

void feedgen_begin(struct feedgen *g, uint64_t tape_ns)
{
	if (!g->st.started && !g->st.ended)
		day_start(g, tape_ns);
}

static char itch_side(char ouch_side)
{
	return ouch_side == 'B' ? 'B' : 'S';
}

/* An ADD report as 'A', or 'F' when attributed. */
static void add_msg(const struct feedgen *g, struct itch_msg *m, const struct engine_md *md,
		    uint64_t ts)
{
	msg_init(g, m, md->firm[0] ? ITCH_ADD_ORDER_MPID : ITCH_ADD_ORDER, md->sym, ts);
	m->u.add.ref = md->ref;
	m->u.add.side = itch_side(md->side);
	m->u.add.shares = md->shares;
	strcpy(m->u.add.stock, md->stock);
	m->u.add.price = md->price;
	memcpy(m->u.add.attribution, md->firm, sizeof(m->u.add.attribution));
}

static void book_msg(struct feedgen *g, const struct engine_md *md)
{
	struct itch_msg m;

	switch (md->kind) {
	case ENGINE_MD_ADD:
		add_msg(g, &m, md, md->ts);
		break;
	case ENGINE_MD_EXEC:
		msg_init(g, &m, ITCH_ORDER_EXECUTED, md->sym, md->ts);
		m.u.executed.ref = md->ref;
		m.u.executed.shares = md->shares;
		m.u.executed.match = md->match;
		break;
	case ENGINE_MD_TRADE:
		msg_init(g, &m, ITCH_TRADE, md->sym, md->ts);
		m.u.trade.ref = 0;
		m.u.trade.side = itch_side(md->side);
		m.u.trade.shares = md->shares;
		strcpy(m.u.trade.stock, md->stock);
		m.u.trade.price = md->price;
		m.u.trade.match = md->match;
		break;
	case ENGINE_MD_CANCEL:
		msg_init(g, &m, ITCH_ORDER_CANCEL, md->sym, md->ts);
		m.u.cancel.ref = md->ref;
		m.u.cancel.shares = md->shares;
		break;
	case ENGINE_MD_DELETE:
		msg_init(g, &m, ITCH_ORDER_DELETE, md->sym, md->ts);
		m.u.del.ref = md->ref;
		break;
	case ENGINE_MD_REPLACE:
		msg_init(g, &m, ITCH_ORDER_REPLACE, md->sym, md->ts);
		m.u.replace.old_ref = md->old_ref;
		m.u.replace.new_ref = md->ref;
		m.u.replace.shares = md->shares;
		m.u.replace.price = md->price;
		break;
	default:
		return;
	}
	emit(g, &m);
}

void feedgen_md(void *ctx, const struct engine_md *md)
{
	struct feedgen *g = ctx;

	switch (md->kind) {
	case ENGINE_MD_DAY_END:
		if (g->st.ended)
			return;
		if (!g->st.started)
			day_start(g, md->ts);
		system_event(g, ITCH_EVENT_END_OF_MARKET, md->ts);
		system_event(g, ITCH_EVENT_END_OF_SYSTEM, md->ts);
		system_event(g, ITCH_EVENT_END_OF_MESSAGES, md->ts);
		g->st.ended = 1;
		return;
	case ENGINE_MD_DAY_START:
		g->st.day = md->day;
		g->st.next = 1;
		g->st.started = 0;
		g->st.ended = 0;
		day_start(g, md->ts);
		return;
	default:
		/* the engine reports nothing while closed; a report before the
		 * day's start (not reached: feedgen_begin came first) starts it */
		if (!g->st.started)
			day_start(g, md->ts);
		book_msg(g, md);
	}
}

struct glimpse_walk {
	const struct feedgen *g;
	uint64_t ts;
	feedgen_out_fn out;
	void *ctx;
};

static void glimpse_add(void *ctx, const struct engine_md *md)
{
	struct glimpse_walk *w = ctx;
	struct itch_msg m;

	add_msg(w->g, &m, md, w->ts);
	put(w->g, NULL, &m, w->out, w->ctx);
}

void feedgen_glimpse(const struct feedgen *g, const struct engine *e, uint64_t ts,
		     feedgen_out_fn out, void *ctx)
{
	struct glimpse_walk w = { g, ts, out, ctx };

	for (uint32_t i = 0; i < g->cfg.n_symbols; i++)
		directory(g, NULL, i, ts, out, ctx);
	engine_md_walk(e, glimpse_add, &w);
}
