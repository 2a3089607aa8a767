/* lockstep-replay: one journal record decoded for reading, and its dump line
 * as text or JSON. */
#include <stdio.h>
#include <string.h>

#include "ouch.h"
#include "replay.h"
#include "risk_admin.h"

void event_decode(struct event *e, uint64_t seq, uint64_t term, const uint8_t *data,
		  size_t len, struct arena *a)
{
	memset(e, 0, sizeof(*e));
	e->seq = seq;
	e->term = term;
	arena_reset(a);
	if (tape_event_peek(data, len, &e->v) < 0) {
		memset(&e->v, 0, sizeof(e->v));
		e->bad = "the event does not decode";
		return;
	}
	if (e->v.seq != seq) {
		e->bad = "the event's seq is not the record's";
		return;
	}
	if (e->v.body == TAPE_BODY_COMMAND) {
		e->cmd = lockstep__command__unpack(&a->allocator, e->v.body_len, e->v.body_data);
		if (!e->cmd)
			e->bad = "the command does not decode";
	} else if (e->v.body == TAPE_BODY_TERM_START) {
		e->term_start =
			lockstep__term_start__unpack(&a->allocator, e->v.body_len, e->v.body_data);
		if (!e->term_start)
			e->bad = "the term start does not decode";
	} else if (e->v.body == TAPE_BODY_DAY) {
		if (tape_day_peek(e->v.body_data, e->v.body_len, &e->day_kind, &e->day_of_event) < 0)
			e->bad = "the day event does not decode";
	} else if (e->v.body == TAPE_BODY_ADMIN) {
		if (risk_admin_decode(e->v.body_data, e->v.body_len, &e->admin) < 0)
			e->bad = "the risk command does not decode";
	}
}

void event_wire(struct event *e, const struct wirepos *w)
{
	struct mold_session s;

	wirepos_of(w, e->seq, &e->wire_day, &s, &e->day_seq);
	mold_session_str(&s, e->session);
}

static const char *day_kind_name(enum tape_day_kind k)
{
	return k == TAPE_DAY_END ? "END-OF-DAY" : k == TAPE_DAY_START ? "START-OF-DAY" : "DAY-EVENT";
}

/* " RISK firm FRM1: max_qty=100", " RISK user TRADR1: kill switch, ..." */
static void print_admin(FILE *f, const struct engine_admin_cmd *a)
{
	char what[200];

	risk_admin_describe(a, what, sizeof(what));
	fprintf(f, " RISK %s", what);
}

/* "HH:MM:SS.nnnnnnnnn", UTC. */
static void fmt_time(char out[32], uint64_t ns)
{
	uint64_t s = ns / 1000000000u, tod = s % 86400u;

	snprintf(out, 32, "%02u:%02u:%02u.%09u", (unsigned)(tod / 3600), (unsigned)(tod / 60 % 60),
		 (unsigned)(tod % 60), (unsigned)(ns % 1000000000u));
}

static void fmt_price(char out[24], uint32_t price)
{
	if (price == OUCH_PRICE_MARKET)
		snprintf(out, 24, "MKT");
	else
		snprintf(out, 24, "%u.%04u", price / 10000u, price % 10000u);
}

static void fmt_tif(char out[24], uint32_t tif)
{
	if (tif == OUCH_TIF_IOC)
		snprintf(out, 24, "IOC");
	else if (tif == OUCH_TIF_MARKET_HOURS)
		snprintf(out, 24, "MKT-HOURS");
	else if (tif == OUCH_TIF_SYSTEM_HOURS)
		snprintf(out, 24, "DAY");
	else
		snprintf(out, 24, "TIF=%us", tif);
}

/* A name for a value, from a table that ends with { 0, NULL }; dflt when the
 * value is not in it. */
struct name {
	uint32_t value;
	const char *name;
};

static const char *name_of(const struct name *t, uint32_t value, const char *dflt)
{
	for (; t->name; t++)
		if (t->value == value)
			return t->name;
	return dflt;
}

static const struct name side_names[] = {
	{ 'B', "BUY" }, { 'S', "SELL" }, { 'T', "SHORT" }, { 'E', "SHORT-EXEMPT" }, { 0, NULL },
};

static const struct name session_kind_names[] = {
	{ LOCKSTEP__SESSION_EVENT__KIND__LOGOUT, "LOGOUT" },
	{ LOCKSTEP__SESSION_EVENT__KIND__DISCONNECT, "DISCONNECT" },
	{ LOCKSTEP__SESSION_EVENT__KIND__CANCEL_ALL, "CANCEL-ALL" }, { 0, NULL },
};

static const struct name cmd_type_names[] = {
	{ LOCKSTEP__COMMAND__BODY_NEW_ORDER, "enter" }, { LOCKSTEP__COMMAND__BODY_CANCEL, "cancel" },
	{ LOCKSTEP__COMMAND__BODY_REPLACE, "replace" }, { LOCKSTEP__COMMAND__BODY_MODIFY, "modify" },
	{ LOCKSTEP__COMMAND__BODY_SESSION, "session" }, { 0, NULL },
};

static const char *side_name(uint32_t side)
{
	return name_of(side_names, side, "SIDE?");
}

static const char *session_kind_name(const Lockstep__SessionEvent *s)
{
	return name_of(session_kind_names, (uint32_t)s->kind, "SESSION");
}

static const char *cmd_type(const Lockstep__Command *c)
{
	return name_of(cmd_type_names, (uint32_t)c->body_case, "unknown");
}

/* The command part of a dump line (after the origin). */
static void print_command(FILE *f, const Lockstep__Command *c)
{
	char price[24], tif[24];

	fprintf(f, " %s%s%s", *c->user ? c->user : "-", *c->firm ? "/" : "", c->firm);
	if (c->partition)
		fprintf(f, " part=%u", c->partition);
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
		const Lockstep__NewOrder *o = c->new_order;

		fmt_price(price, o->price);
		fmt_tif(tif, o->tif);
		fprintf(f, " ENTER %s %u %s @ %s %s token=%s", side_name(o->side), o->shares,
			o->symbol, price, tif, o->token);
		if (o->display && o->display != 'A')
			fprintf(f, " display=%c", (char)o->display);
		if (o->min_qty)
			fprintf(f, " min=%u", o->min_qty);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		fprintf(f, " CANCEL token=%s shares=%u", c->cancel->token, c->cancel->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_REPLACE: {
		const Lockstep__ReplaceOrder *r = c->replace;

		fmt_price(price, r->price);
		fmt_tif(tif, r->tif);
		fprintf(f, " REPLACE token=%s -> %s %u @ %s %s", r->existing_token,
			r->replacement_token, r->shares, price, tif);
		if (r->display && r->display != 'A')
			fprintf(f, " display=%c", (char)r->display);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		fprintf(f, " MODIFY token=%s %s %u", c->modify->token, side_name(c->modify->side),
			c->modify->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_SESSION:
		fprintf(f, " %s", session_kind_name(c->session));
		break;
	default:
		fprintf(f, " UNKNOWN-COMMAND");
	}
}

void event_print_text(FILE *f, const struct event *e)
{
	char t[32];

	fmt_time(t, e->v.timestamp);
	fprintf(f, "%s seq=%llu", t, (unsigned long long)e->seq);
	if (e->wire_day)
		fprintf(f, " day=%u %s#%llu", e->wire_day, e->session, (unsigned long long)e->day_seq);
	fprintf(f, " term=%llu", (unsigned long long)e->term);
	if (e->bad) {
		fprintf(f, " BAD: %s\n", e->bad);
		return;
	}
	if (e->v.origin_len)
		fprintf(f, " %.*s#%llu", (int)e->v.origin_len, e->v.origin,
			(unsigned long long)e->v.origin_seq);
	else
		fputs(" -", f);
	if (e->term_start)
		fprintf(f, " TERM-START %s", e->term_start->node);
	else if (e->v.body == TAPE_BODY_DAY)
		fprintf(f, " %s %u", day_kind_name(e->day_kind), e->day_of_event);
	else if (e->v.body == TAPE_BODY_ADMIN)
		print_admin(f, &e->admin.u.admin);
	else if (e->cmd)
		print_command(f, e->cmd);
	else
		fputs(" EMPTY", f);
	fputc('\n', f);
}

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch); /* bytes, not UTF-8: a gateway sends ASCII */
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_field_str(FILE *f, const char *name, const char *s)
{
	fprintf(f, ",\"%s\":", name);
	json_str(f, s ? s : "", s ? strlen(s) : 0);
}

static void json_field_char(FILE *f, const char *name, uint32_t ch)
{
	char s[2] = { (char)ch, 0 };

	fprintf(f, ",\"%s\":", name);
	json_str(f, s, ch ? 1 : 0);
}

/* The command part of a JSON dump line. */
static void json_command(FILE *f, const Lockstep__Command *c)
{
	fprintf(f, ",\"type\":\"%s\"", cmd_type(c));
	json_field_str(f, "user", c->user);
	json_field_str(f, "firm", c->firm);
	fprintf(f, ",\"partition\":%u", c->partition);
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
		const Lockstep__NewOrder *o = c->new_order;

		json_field_str(f, "token", o->token);
		json_field_char(f, "side", o->side);
		fprintf(f, ",\"shares\":%u", o->shares);
		json_field_str(f, "symbol", o->symbol);
		fprintf(f, ",\"price\":%u,\"tif\":%u", o->price, o->tif);
		json_field_str(f, "order_firm", o->firm);
		json_field_char(f, "display", o->display);
		json_field_char(f, "capacity", o->capacity);
		fprintf(f, ",\"min_qty\":%u", o->min_qty);
		json_field_char(f, "iso", o->iso);
		json_field_char(f, "cross_type", o->cross_type);
		json_field_char(f, "customer_type", o->customer_type);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		json_field_str(f, "token", c->cancel->token);
		fprintf(f, ",\"shares\":%u", c->cancel->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_REPLACE: {
		const Lockstep__ReplaceOrder *r = c->replace;

		json_field_str(f, "token", r->existing_token);
		json_field_str(f, "replacement_token", r->replacement_token);
		fprintf(f, ",\"shares\":%u,\"price\":%u,\"tif\":%u", r->shares, r->price, r->tif);
		json_field_char(f, "display", r->display);
		json_field_char(f, "iso", r->iso);
		fprintf(f, ",\"min_qty\":%u", r->min_qty);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		json_field_str(f, "token", c->modify->token);
		json_field_char(f, "side", c->modify->side);
		fprintf(f, ",\"shares\":%u", c->modify->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_SESSION:
		json_field_str(f, "session_event", session_kind_name(c->session));
		break;
	default:
		break;
	}
}

/* The risk command part of a JSON dump line. */
static void json_admin(FILE *f, const struct engine_admin_cmd *a)
{
	static const char *const kinds[] = { "admin", "risk_limits", "kill_switch",
					     "kill_switch_lift", "reference" };
	static const char *const scopes[] = { "", "firm", "user", "symbol" };
	char text[200];

	fprintf(f, ",\"type\":\"%s\"", kinds[a->kind <= 4 ? a->kind : 0]);
	json_field_str(f, "scope", scopes[a->scope <= 3 ? a->scope : 0]);
	json_field_str(f, "name", a->name);
	if (a->kind == ENGINE_ADMIN_KILL)
		fprintf(f, ",\"cancel\":%s", a->cancel ? "true" : "false");
	if (a->kind == ENGINE_ADMIN_REFERENCE)
		fprintf(f, ",\"price\":%u", a->price);
	if (a->kind == ENGINE_ADMIN_LIMITS) {
		risk_limits_format(&a->limits, text, sizeof(text));
		json_field_str(f, "limits", text);
	}
}

void event_print_json(FILE *f, const struct event *e)
{
	char t[32];

	fmt_time(t, e->v.timestamp);
	fprintf(f, "{\"seq\":%llu,\"term\":%llu,\"timestamp\":%llu,\"time\":\"%s\"",
		(unsigned long long)e->seq, (unsigned long long)e->term,
		(unsigned long long)e->v.timestamp, t);
	if (e->wire_day) {
		fprintf(f, ",\"day\":%u,\"session\":", e->wire_day);
		json_str(f, e->session, strlen(e->session));
		fprintf(f, ",\"day_seq\":%llu", (unsigned long long)e->day_seq);
	}
	if (e->bad) {
		json_field_str(f, "bad", e->bad);
		fputs("}\n", f);
		return;
	}
	fputs(",\"origin\":", f);
	json_str(f, e->v.origin, e->v.origin_len);
	fprintf(f, ",\"origin_seq\":%llu,\"commit\":%llu", (unsigned long long)e->v.origin_seq,
		(unsigned long long)e->v.commit);
	if (e->term_start) {
		fputs(",\"type\":\"term_start\"", f);
		json_field_str(f, "node", e->term_start->node);
	} else if (e->v.body == TAPE_BODY_DAY) {
		fprintf(f, ",\"type\":\"%s\",\"day_event\":%u",
			e->day_kind == TAPE_DAY_END ? "end_of_day"
			: e->day_kind == TAPE_DAY_START ? "start_of_day" : "day_event",
			e->day_of_event);
	} else if (e->v.body == TAPE_BODY_ADMIN) {
		json_admin(f, &e->admin.u.admin);
	} else if (e->cmd) {
		json_command(f, e->cmd);
	} else {
		fputs(",\"type\":\"empty\"", f);
	}
	fputs("}\n", f);
}

