/* The tape event -> engine command conversion (see convert.h). */
#include <errno.h>
#include <string.h>

#include "command.h"
#include "convert.h"
#include "risk_admin.h"

static int copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= cap)
		return -1;
	memcpy(dst, src ? src : "", n + 1);
	return 0;
}

int convert_command(const Lockstep__Command *c, struct engine_cmd *e)
{
	memset(e, 0, sizeof(*e));
	if (copy_str(e->user, sizeof(e->user), c->user) < 0 ||
	    copy_str(e->firm, sizeof(e->firm), c->firm) < 0)
		return -1;
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
		const Lockstep__NewOrder *o = c->new_order;
		struct ouch_enter_order *x = &e->u.enter;

		e->kind = ENGINE_ENTER;
		if (copy_str(x->token, sizeof(x->token), o->token) < 0 ||
		    copy_str(x->stock, sizeof(x->stock), o->symbol) < 0 ||
		    copy_str(x->firm, sizeof(x->firm), o->firm) < 0)
			return -1;
		x->side = (char)o->side;
		x->shares = o->shares;
		x->price = o->price;
		x->tif = o->tif;
		x->display = (char)o->display;
		x->capacity = (char)o->capacity;
		x->iso = (char)o->iso;
		x->min_qty = o->min_qty;
		x->cross_type = (char)o->cross_type;
		x->customer_type = (char)o->customer_type;
		return 0;
	}
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		e->kind = ENGINE_CANCEL;
		e->u.cancel.shares = c->cancel->shares;
		return copy_str(e->u.cancel.token, sizeof(e->u.cancel.token), c->cancel->token);
	case LOCKSTEP__COMMAND__BODY_REPLACE: {
		const Lockstep__ReplaceOrder *r = c->replace;
		struct ouch_replace_order *x = &e->u.replace;

		e->kind = ENGINE_REPLACE;
		if (copy_str(x->existing_token, sizeof(x->existing_token), r->existing_token) < 0 ||
		    copy_str(x->replacement_token, sizeof(x->replacement_token),
			     r->replacement_token) < 0)
			return -1;
		x->shares = r->shares;
		x->price = r->price;
		x->tif = r->tif;
		x->display = (char)r->display;
		x->iso = (char)r->iso;
		x->min_qty = r->min_qty;
		return 0;
	}
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		e->kind = ENGINE_MODIFY;
		e->u.modify.side = (char)c->modify->side;
		e->u.modify.shares = c->modify->shares;
		return copy_str(e->u.modify.token, sizeof(e->u.modify.token), c->modify->token);
	case LOCKSTEP__COMMAND__BODY_SESSION:
		e->kind = ENGINE_CANCEL_ALL;
		return 0;
	default:
		return -1;
	}
}

enum convert_result convert_event(const struct tape_event_view *v, uint64_t partition,
				  struct engine_cmd *cmd)
{
	enum tape_day_kind kind;
	uint32_t part, day;

	if (v->body == TAPE_BODY_DAY) {
		if (tape_day_peek(v->body_data, v->body_len, &kind, &day) < 0)
			return CONVERT_SKIP;
		if (kind != TAPE_DAY_END && kind != TAPE_DAY_START)
			return CONVERT_TIME;
		memset(cmd, 0, sizeof(*cmd));
		cmd->kind = ENGINE_DAY;
		cmd->u.day.kind = kind == TAPE_DAY_END ? ENGINE_DAY_END : ENGINE_DAY_START;
		cmd->u.day.day = day;
		return CONVERT_APPLY;
	}
	if (v->body == TAPE_BODY_ADMIN)
		return risk_admin_decode(v->body_data, v->body_len, cmd) < 0 ? CONVERT_SKIP
									      : CONVERT_APPLY;
	if (v->body != TAPE_BODY_COMMAND)
		return CONVERT_TIME;
	if (command_decode(v->body_data, v->body_len, cmd, &part) < 0)
		return CONVERT_SKIP;
	if (part != partition)
		return CONVERT_OTHER_PARTITION;
	return CONVERT_APPLY;
}

int convert_engine_config(const struct matcher_config *cfg, char *store,
			  const char *symbols[CONVERT_MAX_SYMBOLS], struct engine_config *out)
{
	struct engine_config ec = { 0 };
	char *save = NULL;

	memcpy(store, cfg->symbols, sizeof(cfg->symbols));
	store[sizeof(cfg->symbols) - 1] = '\0';
	for (char *t = strtok_r(store, " \t,", &save); t; t = strtok_r(NULL, " \t,", &save)) {
		if (ec.n_symbols == CONVERT_MAX_SYMBOLS || strlen(t) > 8)
			return -EINVAL;
		symbols[ec.n_symbols++] = t;
	}
	if (!ec.n_symbols)
		return -EINVAL;
	ec.symbols = symbols;
	ec.max_shares = (uint32_t)cfg->max_shares;
	ec.max_orders = (uint32_t)cfg->max_orders;
	ec.max_tokens = (uint32_t)cfg->max_tokens;
	ec.max_user_tokens = (uint32_t)cfg->max_user_tokens;
	ec.max_levels = (uint32_t)cfg->max_levels;
	ec.partition = (uint32_t)cfg->partition;
	*out = ec;
	return 0;
}
