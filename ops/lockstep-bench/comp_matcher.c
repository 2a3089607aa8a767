/* lockstep-bench --component matcher: the matcher's engine replaying a tape
 * from memory, a synthetic one of the load's mix or a journal's (--journal),
 * with each outbound message encoded as the matcher would send it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "bench.h"
#include "clock.h"
#include "convert.h"
#include "engine.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "risk_admin.h"
#include "tape.h"
#include "wire.h"

struct tape_mem {
	uint8_t *buf;
	size_t len, cap;
	uint64_t events;
};

static int tape_mem_add(struct tape_mem *t, const uint8_t *ev, size_t len)
{
	if (t->len + len + 4 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1 << 24;
		uint8_t *p = realloc(t->buf, cap);

		if (!p)
			return -ENOMEM;
		t->buf = p;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, &(uint32_t){ (uint32_t)len }, 4);
	memcpy(t->buf + t->len + 4, ev, len);
	t->len += len + 4;
	t->events++;
	return 0;
}

/* A synthetic tape with the load's mix, for three logins on two firms (as
 * ops/cluster's): passive and marketable Enters, Cancels and Replaces of
 * recent orders (some of which have died meanwhile, as in real traffic). */
#define SYNTH_USERS 3
#define SYNTH_RECENT 256

struct synth {
	uint32_t recent[SYNTH_USERS][SYNTH_RECENT];
	uint32_t next_tok[SYNTH_USERS];
	char tok[OUCH_TOKEN_LEN + 1], tok2[OUCH_TOKEN_LEN + 1], sym[OUCH_STOCK_LEN + 1];
	Lockstep__NewOrder no;
	Lockstep__CancelOrder co;
	Lockstep__ReplaceOrder ro;
};

static const char *const synth_firms[SYNTH_USERS] = { "FRMA", "FRMB", "FRMA" };

/* An Enter of user u (kind k: passive or marketable) into c. */
static void synth_enter(struct synth *y, Lockstep__Command *c, unsigned u, enum mix_kind k,
			uint64_t r)
{
	Lockstep__NewOrder no = LOCKSTEP__NEW_ORDER__INIT;
	uint32_t id = y->next_tok[u]++;
	int buy = r & 1;

	snprintf(y->tok, sizeof(y->tok), "SYNTH%u%08X", u, id);
	snprintf(y->sym, sizeof(y->sym), "%s", symbols[(r >> 8) % n_symbols]);
	no.token = y->tok;
	no.side = (uint32_t)(buy ? OUCH_BUY : OUCH_SELL);
	no.shares = mix_lot(r >> 1);
	no.symbol = y->sym;
	no.price = k == MIX_MARKETABLE ? (buy ? MID_PRICE + 5 * TICK : MID_PRICE - 5 * TICK)
				       : mix_passive_price(buy, r >> 16);
	no.tif = k == MIX_MARKETABLE ? OUCH_TIF_IOC : OUCH_TIF_SYSTEM_HOURS;
	no.firm = (char *)synth_firms[u];
	no.display = OUCH_DISPLAY_ATTRIBUTABLE;
	no.capacity = OUCH_CAP_AGENCY;
	no.iso = OUCH_ISO_NOT_ELIGIBLE;
	no.cross_type = OUCH_CROSS_NONE;
	no.customer_type = OUCH_CUST_RETAIL;
	y->no = no;
	c->body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
	c->new_order = &y->no;
	if (k == MIX_PASSIVE)
		y->recent[u][id % SYNTH_RECENT] = id;
}

/* A Cancel or a Replace (kind k) of a recent order of user u into c. */
static void synth_amend(struct synth *y, Lockstep__Command *c, unsigned u, enum mix_kind k,
			uint64_t r)
{
	uint32_t slot = (uint32_t)((r >> 24) % SYNTH_RECENT), id, nid;
	Lockstep__ReplaceOrder ro = LOCKSTEP__REPLACE_ORDER__INIT;
	int buy = r & 1;

	id = y->recent[u][slot < y->next_tok[u] ? slot : 0];
	snprintf(y->tok, sizeof(y->tok), "SYNTH%u%08X", u, id);
	if (k == MIX_CANCEL) {
		y->co = (Lockstep__CancelOrder)LOCKSTEP__CANCEL_ORDER__INIT;
		y->co.token = y->tok;
		c->body_case = LOCKSTEP__COMMAND__BODY_CANCEL;
		c->cancel = &y->co;
		return;
	}
	nid = y->next_tok[u]++;
	snprintf(y->tok2, sizeof(y->tok2), "SYNTH%u%08X", u, nid);
	ro.existing_token = y->tok;
	ro.replacement_token = y->tok2;
	ro.shares = mix_lot(r);
	ro.price = mix_passive_price(buy, r >> 8);
	ro.tif = OUCH_TIF_SYSTEM_HOURS;
	ro.display = OUCH_DISPLAY_ATTRIBUTABLE;
	ro.iso = OUCH_ISO_NOT_ELIGIBLE;
	y->ro = ro;
	c->body_case = LOCKSTEP__COMMAND__BODY_REPLACE;
	c->replace = &y->ro;
	y->recent[u][slot] = nid;
}

static int tape_synthesize(struct tape_mem *t, uint64_t n)
{
	static const char *const users[SYNTH_USERS] = { "TRADR1", "TRADR2", "TRADR3" };
	static struct synth y;
	uint8_t cmd[256], ev[512];

	memset(y.next_tok, 0, sizeof(y.next_tok));

	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = mix_rnd();
		unsigned u = (unsigned)(r % SYNTH_USERS);
		enum mix_kind k = mix_pick(r >> 2);
		Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
		size_t cl, el;

		r >>= 16;
		if (y.next_tok[u] < 16 && (k == MIX_CANCEL || k == MIX_REPLACE))
			k = MIX_PASSIVE;
		c.user = (char *)users[u];
		c.firm = (char *)synth_firms[u];
		if (k == MIX_PASSIVE || k == MIX_MARKETABLE)
			synth_enter(&y, &c, u, k, r);
		else
			synth_amend(&y, &c, u, k, r);
		cl = lockstep__command__pack(&c, cmd);
		el = tape_event_encode(ev, sizeof(ev), 1, i + 1, 1700000000000000000ull + i * 1000, "gw-1",
				       i + 1, i + 1, cmd, cl);
		if (!el || tape_mem_add(t, ev, el) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int tape_from_journal(struct tape_mem *t, const char *dir)
{
	struct journal_options o = { .read_only = 1 };
	struct journal_report rep;
	struct journal *j;
	struct journal_iter *it;
	const uint8_t *data;
	uint64_t seq, term;
	size_t len;
	int r;

	if ((r = journal_open(&j, dir, &o, &rep)) < 0)
		return r;
	if (!journal_last_seq(j) || (r = journal_iter_open(&it, j, journal_first_seq(j))) < 0) {
		journal_close(j);
		return r < 0 ? r : -ENOENT;
	}
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1)
		if ((r = tape_mem_add(t, data, len)) < 0)
			break;
	journal_iter_close(it);
	journal_close(j);
	return r < 0 ? r : 0;
}

struct emit_ctx {
	uint8_t block[2 + WIRE_EXEC_HDR_LEN + OUCH_MAX_LEN];
	uint64_t seq, messages, bytes;
};

/* What the matcher does with each outbound message, less the socket: an
 * exec block (header + encoded OUCH). */
static void emit_encode(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct emit_ctx *e = ctx;
	int len = ouch_encode_outbound(msg, e->block + 2 + WIRE_EXEC_HDR_LEN, OUCH_MAX_LEN);

	wire_exec_header(e->block + 2, e->seq, user);
	e->messages++;
	e->bytes += (uint64_t)(len > 0 ? len : 0) + WIRE_EXEC_HDR_LEN;
}


/* The tape: --journal's, or synthetic of n events. 0, or 1 with a message. */
static int comp_matcher_tape(struct tape_mem *t, uint64_t n)
{
	int r;

	if (opt.journal) {
		r = tape_from_journal(t, opt.journal);
		if (r < 0) {
			fprintf(stderr, PROG ": --journal %s: %s\n", opt.journal, strerror(-r));
			return 1;
		}
	} else if (tape_synthesize(t, n) < 0) {
		fprintf(stderr, PROG ": out of memory for %llu events\n", (unsigned long long)n);
		return 1;
	}
	return 0;
}

/* Applies the tape as the matcher does; the events applied. */
static uint64_t comp_matcher_replay(struct engine *e, const struct tape_mem *t,
				    struct emit_ctx *em)
{
	uint64_t applied = 0;

	for (size_t off = 0; off < t->len;) {
		uint32_t len;
		struct tape_event_view v;
		struct engine_cmd cmd;

		memcpy(&len, t->buf + off, 4);
		if (tape_event_peek(t->buf + off + 4, len, &v) == 0) {
			em->seq = v.seq;
			switch (convert_event(&v, 0, &cmd)) {
			case CONVERT_APPLY:
				engine_apply(e, v.seq, v.timestamp, &cmd, emit_encode, em);
				applied++;
				break;
			case CONVERT_TIME:
			case CONVERT_OTHER_PARTITION:
				engine_advance_time(e, v.timestamp, emit_encode, em);
				break;
			case CONVERT_SKIP:
				break;
			}
		}
		off += 4 + len;
	}
	return applied;
}

static void comp_matcher_report(struct engine *e, const struct tape_mem *t,
				const struct emit_ctx *em, uint64_t applied, uint64_t ns)
{
	struct engine_stats es;
	double secs = (double)ns / 1e9;
	FILE *f;

	engine_get_stats(e, &es);
	printf("matcher: %llu events (%s, over %llu resting orders), %llu applied in %.3f s: "
	       "%.0f events/s, %.0f ns/event\n",
	       (unsigned long long)t->events, opt.journal ? opt.journal : "synthetic",
	       (unsigned long long)opt.resting,
	       (unsigned long long)applied, secs, (double)t->events / secs,
	       (double)ns / (double)t->events);
	printf("matcher: %llu outbound messages (%.0f/s); accepted %llu, replaced %llu, canceled %llu, "
	       "cancel rejects %llu, rejects %llu, matches %llu, open orders %llu, tokens forgotten "
	       "%llu; hash %016llx\n",
	       (unsigned long long)em->messages, (double)em->messages / secs,
	       (unsigned long long)es.accepted, (unsigned long long)es.replaced,
	       (unsigned long long)es.canceled, (unsigned long long)es.cancel_rejects,
	       (unsigned long long)es.rejects, (unsigned long long)es.matches,
	       (unsigned long long)es.orders_open, (unsigned long long)es.tokens_forgotten,
	       (unsigned long long)engine_hash(e));
	if (!opt.json || !(f = fopen(opt.json, "w")))
		return;
	fprintf(f,
		"{\"component\": \"matcher\", \"events\": %llu, \"resting\": %llu, "
		"\"seconds\": %.4f, "
		"\"events_per_s\": %.0f, \"ns_per_event\": %.1f, \"messages\": %llu, "
		"\"matches\": %llu, \"tokens_forgotten\": %llu, \"hash\": \"%016llx\"}\n",
		(unsigned long long)t->events, (unsigned long long)opt.resting, secs,
		(double)t->events / secs, (double)ns / (double)t->events,
		(unsigned long long)em->messages,
		(unsigned long long)es.matches, (unsigned long long)es.tokens_forgotten,
		(unsigned long long)engine_hash(e));
	fclose(f);
}

/* --resting N: a deep book before the replay, N passive orders of a login
 * of its own, 100 to 1,099 ticks from the middle (never reached by the
 * mix), a few hundred levels per symbol and side: the replay's cost per
 * event should not depend on it. */
static void comp_matcher_deep_book(struct engine *e, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct engine_cmd c = { .kind = ENGINE_ENTER };
		struct ouch_enter_order *o = &c.u.enter;
		int buy = (int)(i & 1);
		uint32_t away = (uint32_t)(100 + (i >> 1) % 1000) * TICK;

		snprintf(c.user, sizeof(c.user), "DEEP01");
		snprintf(c.firm, sizeof(c.firm), "FRMD");
		snprintf(o->token, sizeof(o->token), "DEEP%010u", (unsigned)i);
		snprintf(o->stock, sizeof(o->stock), "%s", symbols[(i >> 1) % n_symbols]);
		o->side = buy ? OUCH_BUY : OUCH_SELL;
		o->shares = 100;
		o->price = buy ? MID_PRICE - away : MID_PRICE + away;
		o->tif = OUCH_TIF_SYSTEM_HOURS;
		snprintf(o->firm, sizeof(o->firm), "FRMD");
		o->display = OUCH_DISPLAY_ATTRIBUTABLE;
		o->capacity = OUCH_CAP_AGENCY;
		o->iso = OUCH_ISO_NOT_ELIGIBLE;
		o->cross_type = OUCH_CROSS_NONE;
		o->customer_type = OUCH_CUST_RETAIL;
		engine_apply(e, 0, 1700000000000000000ull, &c, NULL, NULL);
	}
}

int comp_matcher_run(void)
{
	struct tape_mem t = { 0 };
	struct engine_config ec = {
		.symbols = symbols, .n_symbols = n_symbols, .max_shares = 1000000,
		.max_orders = 1 << 20, .max_tokens = 1 << 23, .max_levels = 4096,
	};
	struct engine *e = NULL;
	struct engine_admin_cmd *risk;
	char err[256];
	struct emit_ctx em = { .seq = 0 };
	uint64_t applied, t0, t1;
	int r;

	if (comp_matcher_tape(&t, opt.events ? opt.events : 2000000))
		return 1;
	if (opt.resting) {
		ec.max_orders = (uint32_t)(opt.resting + (1u << 20));
		ec.max_levels = 16384;
	}
	if (t.events + opt.resting >= ec.max_tokens)
		ec.max_tokens = (uint32_t)(t.events + opt.resting + t.events / 2 > (1u << 30)
						   ? 1u << 30
						   : t.events + opt.resting + t.events / 2);
	if (opt.max_tokens) {
		if (opt.max_tokens <= ec.max_orders) {
			fprintf(stderr, PROG ": --max-tokens: above %u (the open orders) please\n",
				ec.max_orders);
			return 1;
		}
		ec.max_tokens = opt.max_tokens;
	}
	if ((r = risk_file_load(opt.risk_file, &risk, &ec.n_risk, err, sizeof(err))) < 0) {
		fprintf(stderr, PROG ": --risk-file: %s\n", err);
		return 1;
	}
	ec.risk = risk;
	ec.max_user_tokens = opt.max_user_tokens;
	r = engine_create(&e, &ec);
	free(risk);
	if (r < 0) {
		fprintf(stderr, PROG ": engine: %s\n", strerror(-r));
		return 1;
	}
	comp_matcher_deep_book(e, opt.resting);
	t0 = mono_ns();
	applied = comp_matcher_replay(e, &t, &em);
	t1 = mono_ns();
	comp_matcher_report(e, &t, &em, applied, t1 - t0);
	engine_destroy(e);
	free(t.buf);
	return 0;
}
