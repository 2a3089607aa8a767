/* Pre-trade risk limits: their text, read and written, their protobuf form,
 * and an operator's risk command described (risk.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lockstep.pb-c.h"
#include "risk.h"

/* An unsigned decimal with up to `decimals` digits after a point, scaled by
 * 10^decimals, at most max; 0 or -1. */
static int decimal_parse(const char *s, size_t n, unsigned decimals, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	unsigned frac = 0, digits = 0;
	int point = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.' && !point) {
			point = 1;
			continue;
		}
		if (c < '0' || c > '9' || (point && frac == decimals))
			return -1;
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(c - '0');
		digits++;
		if (point)
			frac++;
	}
	if (!digits)
		return -1;
	for (; frac < decimals; frac++) {
		if (v > UINT64_MAX / 10)
			return -1;
		v *= 10;
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

int risk_price_parse(const char *text, uint32_t *out)
{
	uint64_t v;

	if (decimal_parse(text, strlen(text), 4, UINT32_MAX, &v) < 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

struct risk_key {
	const char *name;
	uint32_t bit;
	const char *what;
};

static const struct risk_key risk_keys[] = {
	{ "max_qty", RISK_MAX_QTY, "shares (an integer)" },
	{ "max_notional", RISK_MAX_NOTIONAL, "dollars, up to 4 decimals" },
	{ "collar", RISK_COLLAR, "a percentage (5%, 0.25%) or basis points (25bp)" },
	{ "max_open", RISK_MAX_OPEN, "orders (an integer)" },
	{ "credit", RISK_CREDIT, "dollars, up to 4 decimals" },
};

/* One value of the limit `bit` into *l; 0 or -1. */
static int value_parse(uint32_t bit, const char *v, size_t n, struct risk_limits *l)
{
	uint64_t x = 0;

	if (n == 4 && !memcmp(v, "none", 4))
		x = 0;
	else if (bit == RISK_MAX_QTY || bit == RISK_MAX_OPEN) {
		if (decimal_parse(v, n, 0, UINT32_MAX, &x) < 0)
			return -1;
	} else if (bit == RISK_COLLAR) {
		if (n > 2 && !memcmp(v + n - 2, "bp", 2)) {
			if (decimal_parse(v, n - 2, 0, 1000000, &x) < 0)
				return -1;
		} else if (n > 1 && v[n - 1] == '%') {
			if (decimal_parse(v, n - 1, 2, 1000000, &x) < 0)
				return -1;
		} else
			return -1;
		if (x == 0)
			return -1; /* a collar of 0 would refuse every price: say none */
	} else if (decimal_parse(v, n, 4, UINT64_MAX, &x) < 0)
		return -1;
	switch (bit) {
	case RISK_MAX_QTY: l->max_qty = (uint32_t)x; break;
	case RISK_MAX_NOTIONAL: l->max_notional = x; break;
	case RISK_COLLAR: l->collar_bp = (uint32_t)x; break;
	case RISK_MAX_OPEN: l->max_open = (uint32_t)x; break;
	default: l->credit = x; break;
	}
	l->set |= bit;
	return 0;
}

/* A word of the input as an error may quote it: at most 40 characters,
 * each unprintable one as '?'. */
static void quote_word(char out[48], const char *w, size_t n)
{
	size_t k = n < 40 ? n : 40;

	for (size_t i = 0; i < k; i++)
		out[i] = w[i] > ' ' && w[i] <= '~' ? w[i] : '?';
	if (n > k)
		memcpy(out + k, "...", 3), k += 3;
	out[k] = '\0';
}

int risk_limits_parse(const char *text, struct risk_limits *out, char *err, size_t errlen)
{
	char q[48];
	struct risk_limits l = { 0 };
	const char *p = text;

	for (;;) {
		const char *w, *eq;
		size_t n, k;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			break;
		w = p;
		while (*p && *p != ' ' && *p != '\t' && *p != ',')
			p++;
		n = (size_t)(p - w);
		eq = memchr(w, '=', n);
		for (k = 0; eq && k < sizeof(risk_keys) / sizeof(risk_keys[0]); k++)
			if (strlen(risk_keys[k].name) == (size_t)(eq - w) &&
			    !memcmp(w, risk_keys[k].name, (size_t)(eq - w)))
				break;
		quote_word(q, w, n);
		if (!eq || k == sizeof(risk_keys) / sizeof(risk_keys[0])) {
			snprintf(err, errlen,
				 "\"%s\": not a limit (max_qty=, max_notional=, collar=, "
				 "max_open=, credit=)",
				 q);
			return -EINVAL;
		}
		if (l.set & risk_keys[k].bit) {
			snprintf(err, errlen, "%s given twice", risk_keys[k].name);
			return -EINVAL;
		}
		if (value_parse(risk_keys[k].bit, eq + 1, (size_t)(w + n - eq - 1), &l) < 0) {
			snprintf(err, errlen, "\"%s\": %s wants %s, or none", q, risk_keys[k].name,
				 risk_keys[k].what);
			return -EINVAL;
		}
	}
	*out = l;
	return 0;
}

/* price units as dollars, without trailing zeros. */
static int dollars(char *buf, size_t len, uint64_t v)
{
	char frac[8];
	int n;

	if (v % 10000 == 0)
		return snprintf(buf, len, "%" PRIu64, v / 10000);
	n = snprintf(frac, sizeof(frac), "%04u", (unsigned)(v % 10000));
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	return snprintf(buf, len, "%" PRIu64 ".%s", v / 10000, frac);
}

int risk_limits_format(const struct risk_limits *l, char *buf, size_t len)
{
	size_t used = 0;
	int total = 0;

	if (len)
		buf[0] = '\0';
	for (size_t k = 0; k < sizeof(risk_keys) / sizeof(risk_keys[0]); k++) {
		const struct risk_key *r = &risk_keys[k];
		char v[32];
		uint64_t x;
		int n;

		if (!(l->set & r->bit))
			continue;
		x = r->bit == RISK_MAX_QTY ? l->max_qty
		    : r->bit == RISK_MAX_NOTIONAL ? l->max_notional
		    : r->bit == RISK_COLLAR ? l->collar_bp
		    : r->bit == RISK_MAX_OPEN ? l->max_open
					       : l->credit;
		if (x == 0)
			snprintf(v, sizeof(v), "none");
		else if (r->bit == RISK_MAX_NOTIONAL || r->bit == RISK_CREDIT)
			dollars(v, sizeof(v), x);
		else if (r->bit == RISK_COLLAR)
			snprintf(v, sizeof(v), "%" PRIu64 "bp", x);
		else
			snprintf(v, sizeof(v), "%" PRIu64, x);
		n = snprintf(buf + used, used < len ? len - used : 0, "%s%s=%s", total ? " " : "",
			     r->name, v);
		total += n;
		used = (size_t)total < len ? (size_t)total : len;
	}
	return total;
}

void risk_limits_from_pb(const struct Lockstep__RiskLimits *pb, struct risk_limits *out)
{
	struct risk_limits l = { 0 };

	if (pb) {
		l.set = pb->set;
		l.max_qty = pb->max_qty;
		l.max_notional = pb->max_notional;
		l.collar_bp = pb->collar_bp;
		l.max_open = pb->max_open;
		l.credit = pb->credit;
	}
	*out = l;
}

void risk_limits_to_pb(const struct risk_limits *l, struct Lockstep__RiskLimits *pb)
{
	lockstep__risk_limits__init(pb);
	pb->set = l->set;
	pb->max_qty = l->max_qty;
	pb->max_notional = l->max_notional;
	pb->collar_bp = l->collar_bp;
	pb->max_open = l->max_open;
	pb->credit = l->credit;
}

int risk_describe(char *buf, size_t len, uint32_t kind, uint32_t scope, const char *name,
		  int cancel, const struct risk_limits *l, uint32_t price)
{
	static const char *const scopes[] = { "?", "firm", "user", "symbol" };
	const char *sc = scopes[scope <= 3 ? scope : 0];
	char text[160];

	switch (kind) {
	case LOCKSTEP__ADMIN__KIND__LIMITS:
		risk_limits_format(l, text, sizeof(text));
		return snprintf(buf, len, "%s %s: %s", sc, name, text);
	case LOCKSTEP__ADMIN__KIND__KILL:
		return snprintf(buf, len, "%s %s: kill switch%s", sc, name,
				cancel ? ", open orders canceled" : "");
	case LOCKSTEP__ADMIN__KIND__LIFT:
		return snprintf(buf, len, "%s %s: kill switch lifted", sc, name);
	case LOCKSTEP__ADMIN__KIND__REFERENCE:
		return snprintf(buf, len, "%s %s: reference %u.%04u", sc, name, price / 10000,
				price % 10000);
	default:
		return snprintf(buf, len, "%s %s: unknown kind %u", sc, name, kind);
	}
}
