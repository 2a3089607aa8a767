/* Configuration: INI files through libinih, typed against a key table.
 *
 * Line numbers. Debian 12's libinih is built without INI_HANDLER_LINENO, so
 * its handler never sees a line number (and defining the macro on our side
 * would only change the prototype we compile against, not the call the
 * library makes). We therefore read the whole file ourselves and feed
 * ini_parse_stream() through cfg_reader(), which hands inih exactly one
 * physical line per call and counts them: while inih runs the handler for a
 * line, parse->lineno is that line's number. Handing out whole lines also lets
 * the reader refuse what inih would get wrong silently:
 *  - a line longer than inih's buffer (inih would split it in two and both
 *    the parse and the count would go wrong): "line too long";
 *  - a NUL byte (inih would cut the line there);
 *  - leading blanks are stripped, so an indented "key = value" is a key and
 *    never an inih continuation line glued to the previous value;
 *  - a [section] header is checked here, so an unknown section is reported
 *    at its own line even when no key follows it.
 * The reader stops the parse at the first error, so the first error in the
 * file is the one reported (inih itself carries on after a syntax error; its
 * return value then names the earliest bad line, and we compare).
 *
 * Order: defaults (each key's `def`, through the same parser as file values,
 * so a bad default is an error too), then the file, then the overrides.
 * Everything is applied to a scratch copy; the caller's struct is written
 * only when all of it succeeded, so a failed reload leaves the running
 * configuration as it was (on_free callbacks have run, though).
 *
 * Values: see cfg_parse_value(). Durations need a unit (a bare "250" could be
 * seconds or milliseconds, and guessing wrong is a production incident);
 * sizes take binary suffixes (K = KiB = 1024) or plain bytes; "8MB" is refused
 * as ambiguous (1000 or 1024?). A fraction is allowed where the result is a
 * whole number of the base unit ("1.5s", "1.5K"). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define CFG_MAX_FILE (4u << 20) /* a config file larger than this is a mistake */
#define CFG_QUOTE_MAX 48 /* longest value quoted in an error message */

struct cfg_parse {
	const struct config_spec *spec;
	unsigned char *scratch; /* the caller's struct, copied; written here */
	const char *source; /* file name, "command line" or "built-in default" */
	unsigned *file_line; /* per key: line that set it in the file, 0 none */
	bool *given; /* per key: set by the file or an override */
	const char *pos, *end; /* the part of the file not yet handed to inih */
	unsigned lineno; /* line inih is working on (0: not a file) */
	int rc; /* first error, 0 none */
	unsigned err_line;
	char *err;
	size_t errlen;
};

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

static const char *const cfg_type_names[] = {
	[CONFIG_STRING] = "string", [CONFIG_INT] = "int",
	[CONFIG_UINT] = "uint",	    [CONFIG_BOOL] = "bool",
	[CONFIG_DOUBLE] = "double", [CONFIG_ENUM] = "enum",
	[CONFIG_DURATION] = "duration", [CONFIG_SIZE] = "size",
};

/* --- errors ----------------------------------------------------------------- */

/* Records the first error: "source[:line]: [section] key: what". */
__attribute__((format(printf, 5, 6))) static void
cfg_fail(struct cfg_parse *p, unsigned line, const char *section, const char *key,
	 const char *fmt, ...)
{
	char what[512];
	char where[32] = "";
	va_list ap;

	if (p->rc)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (line)
		snprintf(where, sizeof(where), ":%u", line);
	if (section && key)
		snprintf(p->err, p->errlen, "%s%s: [%s] %s: %s", p->source, where, section, key,
			 what);
	else if (section)
		snprintf(p->err, p->errlen, "%s%s: [%s] %s", p->source, where, section, what);
	else
		snprintf(p->err, p->errlen, "%s%s: %s", p->source, where, what);
	p->rc = -EINVAL;
	p->err_line = line;
}

/* The value as it appears in messages: quoted, cut after CFG_QUOTE_MAX bytes. */
static const char *cfg_quote(const char *value, char *buf, size_t len)
{
	size_t n = strlen(value);

	if (n > CFG_QUOTE_MAX)
		snprintf(buf, len, "\"%.*s...\"", CFG_QUOTE_MAX, value);
	else
		snprintf(buf, len, "\"%s\"", value);
	return buf;
}

/* --- values ------------------------------------------------------------------ */

static bool cfg_bounded(const struct config_key *k)
{
	return k->min != 0 || k->max != 0;
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

/* A bound as it would be written in the file. */
static void cfg_fmt_bound(const struct config_key *k, double d, char *buf, size_t len)
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

	cfg_fmt_bound(k, k->min, lo, sizeof(lo));
	cfg_fmt_bound(k, k->max, hi, sizeof(hi));
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

	cfg_quote(text, q, sizeof(q));
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

	cfg_quote(text, q, sizeof(q));
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
	n = (size_t)snprintf(why, len, "%s is not one of:", cfg_quote(text, q, sizeof(q)));
	for (int i = 0; k->names[i] && n < len; i++)
		n += (size_t)snprintf(why + n, len - n, "%s %s", i ? "," : "", k->names[i]);
	return -EINVAL;
}

/* Parses text as k's type into dst (k's field in the scratch struct).
 * Returns 0, or -EINVAL with why saying what is wrong with the value. */
static int cfg_parse_value(const struct config_key *k, const char *text, unsigned char *dst,
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
				 cfg_quote(text, q, sizeof(q)), n, k->size - 1);
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
				 cfg_quote(text, q, sizeof(q)));
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

/* --- the key table -------------------------------------------------------------- */

/* Bytes of the caller's struct that key k owns. */
static size_t cfg_width(const struct config_key *k)
{
	switch (k->type) {
	case CONFIG_STRING:
		return k->size;
	case CONFIG_BOOL:
	case CONFIG_ENUM:
		return sizeof(int);
	case CONFIG_DOUBLE:
		return sizeof(double);
	default:
		return sizeof(uint64_t);
	}
}

static size_t cfg_nkeys(const struct config_spec *spec)
{
	size_t n = 0;

	while (spec->keys && spec->keys[n].name)
		n++;
	return n;
}

static bool cfg_is_free(const struct config_spec *spec, const char *section)
{
	for (size_t i = 0; spec->free_sections && spec->free_sections[i]; i++)
		if (!strcmp(spec->free_sections[i], section))
			return true;
	return false;
}

static bool cfg_section_known(const struct config_spec *spec, const char *section, size_t len)
{
	for (size_t i = 0; spec->keys && spec->keys[i].name; i++)
		if (strlen(spec->keys[i].section) == len &&
		    !memcmp(spec->keys[i].section, section, len))
			return true;
	for (size_t i = 0; spec->free_sections && spec->free_sections[i]; i++)
		if (strlen(spec->free_sections[i]) == len &&
		    !memcmp(spec->free_sections[i], section, len))
			return true;
	return false;
}

static int cfg_find(const struct config_spec *spec, const char *section, const char *name)
{
	for (size_t i = 0; spec->keys && spec->keys[i].name; i++)
		if (!strcmp(spec->keys[i].section, section) && !strcmp(spec->keys[i].name, name))
			return (int)i;
	return -1;
}

/* A table that cannot work is the programmer's error, reported like the rest. */
static int cfg_check_spec(struct cfg_parse *p)
{
	const struct config_spec *spec = p->spec;

	if (!spec->keys) {
		cfg_fail(p, 0, NULL, NULL, "no key table");
		return p->rc;
	}
	for (size_t i = 0; spec->keys[i].name; i++) {
		const struct config_key *k = &spec->keys[i];

		if (!k->section)
			cfg_fail(p, 0, "?", k->name, "key without a section");
		else if ((unsigned)k->type > CONFIG_SIZE)
			cfg_fail(p, 0, k->section, k->name, "unknown type %d", (int)k->type);
		else if (k->type == CONFIG_STRING && k->size == 0)
			cfg_fail(p, 0, k->section, k->name, "string key with size 0");
		else if (k->type == CONFIG_ENUM && (!k->names || !k->names[0]))
			cfg_fail(p, 0, k->section, k->name, "enum key without names");
		else if (cfg_bounded(k) && k->min > k->max)
			cfg_fail(p, 0, k->section, k->name, "min is above max");
		if (p->rc)
			return p->rc;
	}
	if (spec->free_sections && spec->free_sections[0] && !spec->on_free)
		cfg_fail(p, 0, NULL, NULL, "free sections without an on_free callback");
	return p->rc;
}

/* --- applying one value ------------------------------------------------------------ */

/* section/name = value from p->source at line (0: not from a file). */
static void cfg_set(struct cfg_parse *p, const char *section, const char *name,
		    const char *value, unsigned line)
{
	const struct config_spec *spec = p->spec;
	char why[512];
	int i;

	if (cfg_is_free(spec, section)) {
		why[0] = '\0';
		if (spec->on_free(spec->ctx, section, name, value, why, sizeof(why)))
			cfg_fail(p, line, section, name, "%s", why[0] ? why : "rejected");
		return;
	}
	i = cfg_find(spec, section, name);
	if (i < 0) {
		if (!*section)
			cfg_fail(p, line, NULL, NULL, "%s: key outside any [section]", name);
		else if (cfg_section_known(spec, section, strlen(section)))
			cfg_fail(p, line, section, name, "unknown key");
		else
			cfg_fail(p, line, section, NULL, "unknown section");
		return;
	}
	if (line && p->file_line[i]) {
		cfg_fail(p, line, section, name, "set twice (first on line %u)", p->file_line[i]);
		return;
	}
	if (cfg_parse_value(&spec->keys[i], value, p->scratch + spec->keys[i].offset, why,
			    sizeof(why))) {
		cfg_fail(p, line, section, name, "%s", why);
		return;
	}
	if (line)
		p->file_line[i] = line;
	p->given[i] = true;
}

/* --- the file, through inih ---------------------------------------------------------- */

/* Hands inih the next line (see the comment at the top). */
static char *cfg_reader(char *str, int num, void *stream)
{
	struct cfg_parse *p = stream;
	const char *s = p->pos, *eol, *nl;
	size_t n;

	if (p->rc || p->pos >= p->end)
		return NULL;
	nl = memchr(s, '\n', (size_t)(p->end - s));
	eol = nl ? nl : p->end;
	p->pos = nl ? nl + 1 : p->end;
	p->lineno++;
	if (p->lineno == 1 && eol - s >= 3 && !memcmp(s, "\xef\xbb\xbf", 3))
		s += 3; /* UTF-8 byte order mark */
	while (s < eol && (*s == ' ' || *s == '\t'))
		s++;
	n = (size_t)(eol - s);
	if (memchr(s, '\0', n)) {
		cfg_fail(p, p->lineno, NULL, NULL, "line contains a NUL byte");
		return NULL;
	}
	if (num < 4 || n > (size_t)num - 3) {
		cfg_fail(p, p->lineno, NULL, NULL, "line too long (at most %d characters)",
			 num < 4 ? 0 : num - 3);
		return NULL;
	}
	if (n && *s == '[') {
		const char *close = memchr(s, ']', n);

		if (close && !cfg_section_known(p->spec, s + 1, (size_t)(close - s - 1))) {
			char name[64];

			snprintf(name, sizeof(name), "%.*s", (int)(close - s - 1), s + 1);
			cfg_fail(p, p->lineno, name, NULL, "unknown section");
			return NULL;
		}
	}
	memcpy(str, s, n);
	str[n] = '\0';
	return str;
}

static int cfg_handler(void *user, const char *section, const char *name, const char *value)
{
	struct cfg_parse *p = user;

	cfg_set(p, section, name, value, p->lineno);
	return p->rc == 0;
}

/* Line `line` of text, for a syntax error message. */
static void cfg_syntax_error(struct cfg_parse *p, const char *text, size_t len, unsigned line)
{
	const char *s = text, *end = text + len, *eol;
	char buf[CFG_QUOTE_MAX + 1];
	char q[CFG_QUOTE_MAX + 8];

	for (unsigned l = 1; l < line && s < end; l++) {
		eol = memchr(s, '\n', (size_t)(end - s));
		s = eol ? eol + 1 : end;
	}
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	eol = memchr(s, '\n', (size_t)(end - s));
	len = (size_t)((eol ? eol : end) - s);
	while (len && (s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	snprintf(buf, sizeof(buf), "%.*s", (int)(len < CFG_QUOTE_MAX ? len : CFG_QUOTE_MAX), s);
	p->rc = 0; /* an earlier line than the error recorded, if any */
	cfg_fail(p, line, NULL, NULL, "syntax error: %s is neither [section] nor key = value",
		 cfg_quote(buf, q, sizeof(q)));
}

static int cfg_parse_text(struct cfg_parse *p, const char *text, size_t len)
{
	int r;

	p->pos = text;
	p->end = text + len;
	p->lineno = 0;
	r = ini_parse_stream(cfg_reader, p, cfg_handler, p);
	if (r == -2) {
		cfg_fail(p, 0, NULL, NULL, "out of memory");
		p->rc = -ENOMEM;
	} else if (r > 0 && (!p->rc || (unsigned)r < p->err_line)) {
		cfg_syntax_error(p, text, len, (unsigned)r);
	}
	p->lineno = 0;
	return p->rc;
}

/* --- overrides and defaults --------------------------------------------------------- */

static void cfg_override(struct cfg_parse *p, const char *arg)
{
	char q[CFG_QUOTE_MAX + 8];
	char *copy = strdup(arg);
	char *section, *eq, *dot, *key, *value, *e;

	if (!copy) {
		cfg_fail(p, 0, NULL, NULL, "out of memory");
		p->rc = -ENOMEM;
		return;
	}
	section = copy;
	while (isspace((unsigned char)*section))
		section++;
	eq = strchr(section, '=');
	dot = eq ? memchr(section, '.', (size_t)(eq - section)) : NULL;
	if (!eq || !dot || dot == section || dot + 1 == eq) {
		cfg_fail(p, 0, NULL, NULL, "%s is not section.key=value",
			 cfg_quote(arg, q, sizeof(q)));
		free(copy);
		return;
	}
	*dot = *eq = '\0';
	key = dot + 1;
	value = eq + 1;
	for (e = eq; e > key && isspace((unsigned char)e[-1]); e--)
		e[-1] = '\0';
	while (isspace((unsigned char)*value))
		value++;
	for (e = value + strlen(value); e > value && isspace((unsigned char)e[-1]); e--)
		e[-1] = '\0';
	cfg_set(p, section, key, value, 0);
	free(copy);
}

static void cfg_defaults(struct cfg_parse *p)
{
	const struct config_key *keys = p->spec->keys;
	char why[512];

	for (size_t i = 0; keys[i].name && !p->rc; i++) {
		if (keys[i].def &&
		    cfg_parse_value(&keys[i], keys[i].def, p->scratch + keys[i].offset, why,
				    sizeof(why)))
			cfg_fail(p, 0, keys[i].section, keys[i].name, "%s", why);
	}
}

static void cfg_required(struct cfg_parse *p, const char *path)
{
	const struct config_key *keys = p->spec->keys;

	for (size_t i = 0; keys[i].name && !p->rc; i++) {
		if (!keys[i].def && !p->given[i]) {
			p->source = path ? path : "command line";
			cfg_fail(p, 0, keys[i].section, keys[i].name,
				 "required, but not set%s", path ? "" : " (and no file given)");
		}
	}
}

/* Reads a whole file; -errno with err filled on failure. */
static int cfg_read_file(struct cfg_parse *p, const char *path, char **text, size_t *len)
{
	struct stat st;
	size_t cap, n = 0;
	char *buf = NULL;
	ssize_t r;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto out_errno;
	if (fstat(fd, &st) < 0)
		goto out_close;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		goto out_close;
	}
	cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
	for (;;) {
		if (n + 1 >= cap || !buf) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > CFG_MAX_FILE + 1)
				cap = CFG_MAX_FILE + 1;
			nb = realloc(buf, cap);
			if (!nb)
				goto out_close;
			buf = nb;
		}
		if (n >= CFG_MAX_FILE) {
			errno = EFBIG;
			goto out_close;
		}
		r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto out_close;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;

out_close:
	rc = errno;
	close(fd);
	errno = rc;
out_errno:
	rc = -errno;
	free(buf);
	p->source = path;
	cfg_fail(p, 0, NULL, NULL, "cannot read: %s", strerror(-rc));
	p->rc = rc;
	return rc;
}

/* Everything config_load() does, with the file already in memory (text NULL:
 * no file); name is what errors call it. */
static int cfg_load(const struct config_spec *spec, void *cfg, const char *name,
		    const char *text, size_t len, const char *const *overrides,
		    size_t n_overrides, char *err, size_t errlen)
{
	char dummy[1];
	struct cfg_parse p = {
		.spec = spec,
		.source = "config",
		.err = err && errlen ? err : dummy,
		.errlen = err && errlen ? errlen : sizeof(dummy),
	};
	size_t nkeys = cfg_nkeys(spec), span = 1;

	p.err[0] = '\0';
	if (cfg_check_spec(&p))
		return p.rc;
	for (size_t i = 0; i < nkeys; i++)
		if (spec->keys[i].offset + cfg_width(&spec->keys[i]) > span)
			span = spec->keys[i].offset + cfg_width(&spec->keys[i]);
	p.scratch = malloc(span);
	p.file_line = calloc(nkeys + 1, sizeof(*p.file_line));
	p.given = calloc(nkeys + 1, sizeof(*p.given));
	if (!p.scratch || !p.file_line || !p.given) {
		cfg_fail(&p, 0, NULL, NULL, "out of memory");
		p.rc = -ENOMEM;
		goto out_free;
	}
	memcpy(p.scratch, cfg, span);

	p.source = "built-in default";
	cfg_defaults(&p);
	p.source = name ? name : "config";
	if (!p.rc && text)
		cfg_parse_text(&p, text, len);
	p.source = "command line";
	for (size_t i = 0; i < n_overrides && !p.rc; i++)
		cfg_override(&p, overrides[i]);
	if (!p.rc)
		cfg_required(&p, text ? name : NULL);
	if (!p.rc)
		for (size_t i = 0; i < nkeys; i++)
			memcpy((unsigned char *)cfg + spec->keys[i].offset,
			       p.scratch + spec->keys[i].offset, cfg_width(&spec->keys[i]));
out_free:
	free(p.given);
	free(p.file_line);
	free(p.scratch);
	return p.rc;
}

int config_load(const struct config_spec *spec, void *cfg, const char *path,
		const char *const *overrides, size_t n_overrides, char *err, size_t errlen)
{
	struct cfg_parse p = { .err = err, .errlen = errlen };
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (path && cfg_read_file(&p, path, &text, &len))
		return p.rc;
	rc = cfg_load(spec, cfg, path, path ? text : NULL, len, overrides, n_overrides, err,
		      errlen);
	free(text);
	return rc;
}

int config_load_buffer(const struct config_spec *spec, void *cfg, const char *name,
		       const char *text, size_t len, const char *const *overrides,
		       size_t n_overrides, char *err, size_t errlen)
{
	return cfg_load(spec, cfg, name, text, text ? len : 0, overrides,
			n_overrides, err, errlen);
}

/* "uint in [1, 1000]", "enum: none|interval|batch", "string (at most 31)" */
static void cfg_describe(const struct config_key *k, char *buf, size_t len)
{
	char lo[48], hi[48];
	size_t n;

	n = (size_t)snprintf(buf, len, "%s", cfg_type_names[k->type]);
	if (k->type == CONFIG_STRING) {
		snprintf(buf + n, len - n, " (at most %zu characters)", k->size ? k->size - 1 : 0);
	} else if (k->type == CONFIG_ENUM) {
		for (int i = 0; k->names && k->names[i] && n < len; i++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : ": ",
					      k->names[i]);
	} else if (k->type != CONFIG_BOOL && cfg_bounded(k)) {
		cfg_fmt_bound(k, k->min, lo, sizeof(lo));
		cfg_fmt_bound(k, k->max, hi, sizeof(hi));
		snprintf(buf + n, len - n, " in [%s, %s]", lo, hi);
	}
}

void config_print_keys(const struct config_spec *spec, FILE *out)
{
	char type[256];

	for (size_t i = 0; spec->keys && spec->keys[i].name; i++) {
		const struct config_key *k = &spec->keys[i];

		if ((unsigned)k->type > CONFIG_SIZE)
			continue;
		cfg_describe(k, type, sizeof(type));
		fprintf(out, "%s.%s = %s  # %s%s%s\n", k->section, k->name,
			!k->def ? "(required)" : *k->def ? k->def : "\"\"", type,
			k->help ? ": " : "", k->help ? k->help : "");
	}
	for (size_t i = 0; spec->free_sections && spec->free_sections[i]; i++)
		fprintf(out, "[%s]  # free section: any key = value\n", spec->free_sections[i]);
}
