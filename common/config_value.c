/* Configuration values: parsing a value by its key's type (string, integer,
 * boolean, double, enum, duration, size) and formatting bounds the way they
 * would be written.
 *
 * Durations need a unit (a bare "250" could be seconds or milliseconds, and
 * guessing wrong is a production incident); sizes take binary suffixes
 * (K = KiB = 1024) or plain bytes; "8MB" is refused as ambiguous (1000 or
 * 1024?). A fraction is allowed where the result is a whole number of the
 * base unit ("1.5s", "1.5K"). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_private.h"

struct cfg_unit {
	const char *name;
	uint64_t mult;
};

static const struct cfg_unit cfg_duration_units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "\xc2\xb5s", 1000 }, /* µs */
	{ "ms", 1000000 },
	{ "s", 1000000000ull },
	{ "m", 60000000000ull },
	{ "min", 60000000000ull },
	{ "h", 3600000000000ull },
	{ NULL, 0 },
};

static const struct cfg_unit cfg_size_units[] = {
	{ "", 1 },
	{ "B", 1 },
	{ "K", 1ull << 10 },
	{ "KiB", 1ull << 10 },
	{ "M", 1ull << 20 },
	{ "MiB", 1ull << 20 },
	{ "G", 1ull << 30 },
	{ "GiB", 1ull << 30 },
	{ "T", 1ull << 40 },
	{ "TiB", 1ull << 40 },
	{ NULL, 0 },
};

const char *config_value_quote(const char *value, char *buf, size_t len)
{
	size_t n = strlen(value);

	if (n > CFG_QUOTE_MAX)
		snprintf(buf, len, "\"%.*s...\"", CFG_QUOTE_MAX, value);
	else
		snprintf(buf, len, "\"%s\"", value);
	return buf;
}

static uint64_t cfg_u64(double d)
{
	if (d <= 0)
		return 0;
	if (d >= 18446744073709551615.0)
		return UINT64_MAX;
	return (uint64_t)d;
}

/* "1h", "250ms", ...: the largest unit that divides ns exactly. */
static void cfg_fmt_duration(uint64_t ns, char *buf, size_t len)
{
	static const struct cfg_unit units[] = {
		{ "h", 3600000000000ull }, { "m", 60000000000ull }, { "s", 1000000000ull },
		{ "ms", 1000000 },	   { "us", 1000 },	    { "ns", 1 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns != 0 && ns % units[i].mult == 0) {
			snprintf(buf, len, "%llu%s", (unsigned long long)(ns / units[i].mult),
				 units[i].name);
			return;
		}
	}
	snprintf(buf, len, "%llu%s", (unsigned long long)ns, ns ? "ns" : "s");
}

static void cfg_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const struct cfg_unit units[] = {
		{ "T", 1ull << 40 }, { "G", 1ull << 30 }, { "M", 1ull << 20 }, { "K", 1ull << 10 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (bytes != 0 && bytes % units[i].mult == 0) {
			snprintf(buf, len, "%llu%s", (unsigned long long)(bytes / units[i].mult),
				 units[i].name);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)bytes);
}

void config_value_bound(const struct config_key *k, double d, char *buf, size_t len)
{
	if (k->type == CONFIG_DURATION)
		cfg_fmt_duration(cfg_u64(d), buf, len);
	else if (k->type == CONFIG_SIZE)
		cfg_fmt_size(cfg_u64(d), buf, len);
	else if (d == (double)(long long)d && d > -9.2e18 && d < 9.2e18)
		snprintf(buf, len, "%lld", (long long)d);
	else
		snprintf(buf, len, "%g", d);
}

static void cfg_range_why(const struct config_key *k, const char *q, char *why, size_t len)
{
	char lo[48], hi[48];

	config_value_bound(k, k->min, lo, sizeof(lo));
	config_value_bound(k, k->max, hi, sizeof(hi));
	snprintf(why, len, "%s is out of range [%s, %s]", q, lo, hi);
}

enum cfg_scaled_err {
	CFG_SCALED_OK,
	CFG_SCALED_NAN, /* not a number */
	CFG_SCALED_NO_UNIT,
	CFG_SCALED_BAD_UNIT,
	CFG_SCALED_TOO_BIG,
	CFG_SCALED_NOT_WHOLE,
};

/* Decimal digits, an optional fraction, optional blanks and a unit from the
 * table ("" matches a bare number when the table has it). The fraction must
 * give a whole number of the base unit. */
static enum cfg_scaled_err cfg_parse_scaled(const char *s, const struct cfg_unit *units,
					    bool fold_case, uint64_t *out, const char **unit)
{
	const unsigned char *p = (const unsigned char *)s;
	uint64_t ip = 0, frac = 0, scale = 1, mult = 0;
	unsigned __int128 whole, part;

	if (!isdigit(*p))
		return CFG_SCALED_NAN;
	for (; isdigit(*p); p++)
		if (__builtin_mul_overflow(ip, 10, &ip) || __builtin_add_overflow(ip, *p - '0', &ip))
			return CFG_SCALED_TOO_BIG;
	if (*p == '.') {
		if (!isdigit(*++p))
			return CFG_SCALED_NAN;
		for (; isdigit(*p); p++) {
			if (scale >= 1000000000000000000ull)
				return CFG_SCALED_NOT_WHOLE; /* more than 18 decimals */
			frac = frac * 10 + (*p - '0');
			scale *= 10;
		}
	}
	while (*p == ' ' || *p == '\t')
		p++;
	*unit = (const char *)p;
	for (const struct cfg_unit *u = units; u->name; u++) {
		if (fold_case ? !strcasecmp(u->name, *unit) : !strcmp(u->name, *unit)) {
			mult = u->mult;
			break;
		}
	}
	if (!mult)
		return **unit ? CFG_SCALED_BAD_UNIT : CFG_SCALED_NO_UNIT;
	whole = (unsigned __int128)ip * mult;
	part = (unsigned __int128)frac * mult;
	if (part % scale)
		return CFG_SCALED_NOT_WHOLE;
	whole += part / scale;
	if (whole > UINT64_MAX)
		return CFG_SCALED_TOO_BIG;
	*out = (uint64_t)whole;
	return CFG_SCALED_OK;
}

static int cfg_parse_unit_value(const struct config_key *k, const char *text, uint64_t *out,
				char *why, size_t len)
{
	bool dur = k->type == CONFIG_DURATION;
	const char *unit = "";
	char q[CFG_QUOTE_MAX + 8];

	config_value_quote(text, q, sizeof(q));
	switch (cfg_parse_scaled(text, dur ? cfg_duration_units : cfg_size_units, !dur, out,
				 &unit)) {
	case CFG_SCALED_OK:
		if (cfg_bounded(k) && ((double)*out < k->min || (double)*out > k->max)) {
			cfg_range_why(k, q, why, len);
			return -EINVAL;
		}
		return 0;
	case CFG_SCALED_NAN:
		snprintf(why, len, "%s is not a %s", q,
			 dur ? "duration (e.g. 250ms, 1s, 2m)" : "size (e.g. 4096, 64K, 8M, 1G)");
		break;
	case CFG_SCALED_NO_UNIT:
		snprintf(why, len, "%s needs a unit (ns, us, ms, s, m, h)", q);
		break;
	case CFG_SCALED_BAD_UNIT:
		snprintf(why, len, "%s has an unknown unit \"%.16s\" (%s)", q, unit,
			 dur ? "ns, us, ms, s, m, h" : "B, K, KiB, M, MiB, G, GiB, T, TiB");
		break;
	case CFG_SCALED_TOO_BIG:
		snprintf(why, len, "%s is too large", q);
		break;
	case CFG_SCALED_NOT_WHOLE:
		snprintf(why, len, "%s is not a whole number of %s", q,
			 dur ? "nanoseconds" : "bytes");
		break;
	}
	return -EINVAL;
}

/* Decimal, or hexadecimal after 0x; a sign only where `sign`. */
static int cfg_parse_integer(const char *text, bool sign, int64_t *i, uint64_t *u)
{
	const char *s = text;
	bool neg = false;
	int base = 10;
	char *end;

	if (sign && (*s == '-' || *s == '+'))
		neg = *s++ == '-';
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!isxdigit((unsigned char)*s) || (base == 10 && !isdigit((unsigned char)*s)))
		return -EINVAL;
	errno = 0;
	*u = strtoull(s, &end, base);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	if (!sign)
		return 0;
	if (neg ? *u > (uint64_t)INT64_MAX + 1 : *u > INT64_MAX)
		return -ERANGE;
	*i = neg ? (int64_t)(0 - *u) : (int64_t)*u;
	return 0;
}

/* A finite double; "nan" and "inf" are refused, an overflow is -ERANGE (an
 * underflow gives 0 or a denormal, which is fine). */
static int cfg_parse_double(const char *text, double *d)
{
	char *end;

	if (!*text || isspace((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	*d = strtod(text, &end);
	if (*end)
		return -EINVAL;
	if (isinf(*d) && errno == ERANGE)
		return -ERANGE;
	return isfinite(*d) ? 0 : -EINVAL;
}

static int cfg_parse_number(const struct config_key *k, const char *text, void *dst, char *why,
			    size_t len)
{
	char q[CFG_QUOTE_MAX + 8];
	int64_t i = 0;
	uint64_t u = 0;
	double d;
	int rc;

	config_value_quote(text, q, sizeof(q));
	if (k->type == CONFIG_DOUBLE) {
		rc = cfg_parse_double(text, &d);
	} else {
		rc = cfg_parse_integer(text, k->type == CONFIG_INT, &i, &u);
		d = k->type == CONFIG_INT ? (double)i : (double)u;
	}
	if (rc == -EINVAL && k->type == CONFIG_UINT && text[0] == '-')
		snprintf(why, len, "%s is negative", q);
	else if (rc == -EINVAL)
		snprintf(why, len, "%s is not a number", q);
	else if (rc == -ERANGE)
		snprintf(why, len, "%s is too large", q);
	if (rc)
		return -EINVAL;
	if (cfg_bounded(k) && (d < k->min || d > k->max)) {
		cfg_range_why(k, q, why, len);
		return -EINVAL;
	}
	if (k->type == CONFIG_DOUBLE)
		memcpy(dst, &d, sizeof(d));
	else if (k->type == CONFIG_INT)
		memcpy(dst, &i, sizeof(i));
	else
		memcpy(dst, &u, sizeof(u));
	return 0;
}

static int cfg_parse_bool(const char *text, int *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(text, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(text, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

static int cfg_parse_enum(const struct config_key *k, const char *text, int *out, char *why,
			  size_t len)
{
	char q[CFG_QUOTE_MAX + 8];
	size_t n;

	for (int i = 0; k->names[i]; i++) {
		if (!strcasecmp(k->names[i], text)) {
			*out = i;
			return 0;
		}
	}
	n = (size_t)snprintf(why, len, "%s is not one of:", config_value_quote(text, q, sizeof(q)));
	for (int i = 0; k->names[i] && n < len; i++)
		n += (size_t)snprintf(why + n, len - n, "%s %s", i ? "," : "", k->names[i]);
	return -EINVAL;
}

int config_value_parse(const struct config_key *k, const char *text, unsigned char *dst,
		       char *why, size_t len)
{
	char q[CFG_QUOTE_MAX + 8];
	size_t n;
	int b;

	switch (k->type) {
	case CONFIG_STRING:
		n = strlen(text);
		if (n >= k->size) {
			snprintf(why, len, "%s is too long (%zu characters, at most %zu)",
				 config_value_quote(text, q, sizeof(q)), n, k->size - 1);
			return -EINVAL;
		}
		memcpy(dst, text, n + 1);
		return 0;
	case CONFIG_INT:
	case CONFIG_UINT:
	case CONFIG_DOUBLE:
		return cfg_parse_number(k, text, dst, why, len);
	case CONFIG_BOOL:
		if (cfg_parse_bool(text, &b)) {
			snprintf(why, len, "%s is not a boolean (yes/no, true/false, on/off, 1/0)",
				 config_value_quote(text, q, sizeof(q)));
			return -EINVAL;
		}
		memcpy(dst, &b, sizeof(b));
		return 0;
	case CONFIG_ENUM:
		if (cfg_parse_enum(k, text, &b, why, len))
			return -EINVAL;
		memcpy(dst, &b, sizeof(b));
		return 0;
	case CONFIG_DURATION:
	case CONFIG_SIZE: {
		uint64_t u;

		if (cfg_parse_unit_value(k, text, &u, why, len))
			return -EINVAL;
		memcpy(dst, &u, sizeof(u));
		return 0;
	}
	}
	snprintf(why, len, "has an unknown type %d", (int)k->type);
	return -EINVAL;
}

