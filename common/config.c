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
 * Values: see config_value.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_private.h"

#define CFG_MAX_FILE (4u << 20) /* a config file larger than this is a mistake */

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
	if (config_value_parse(&spec->keys[i], value, p->scratch + spec->keys[i].offset, why,
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
		 config_value_quote(buf, q, sizeof(q)));
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
			 config_value_quote(arg, q, sizeof(q)));
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
		    config_value_parse(&keys[i], keys[i].def, p->scratch + keys[i].offset, why,
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

