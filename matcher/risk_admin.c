/* The matcher's risk plumbing: the risk file, the tape's Admin, and their
 * descriptions (risk_admin.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockstep.pb-c.h"
#include "ouch.h"
#include "risk_admin.h"

static const char *const scope_words[] = { "?", "firm", "user", "symbol" };

/* A name of 1..cap-1 printable characters into dst, a login's or firm's
 * (login) upper-cased as the credentials file has it and then letters and
 * digits only, or "*"; 0 or -1. */
static int copy_name(char *dst, size_t cap, const char *src, int login)
{
	size_t n = src ? strlen(src) : 0;

	if (n == 0 || n >= cap)
		return -1;
	if (n == 1 && src[0] == '*') {
		memcpy(dst, "*", 2);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char c = login && src[i] >= 'a' && src[i] <= 'z' ? (char)(src[i] - 'a' + 'A') : src[i];

		if (login ? !((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			  : (c <= ' ' || c > '~'))
			return -1;
		dst[i] = c;
	}
	dst[n] = '\0';
	return 0;
}

/* One line's words: the first three split off, the rest (the limits) left
 * whole in *rest. Returns how many of the three were found. */
static int split3(char *line, char *w[3], char **rest)
{
	int n = 0;
	char *p = line;

	*rest = NULL;
	while (n < 3) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		w[n++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = '\0';
	}
	while (*p == ' ' || *p == '\t')
		p++;
	*rest = p;
	return n;
}

/* One line (NUL-terminated, no newline) into *a; 0, or -1 with why. */
static int line_parse(char *line, struct engine_admin_cmd *a, char *why, size_t cap)
{
	char *w[3], *rest;
	int n = split3(line, w, &rest);
	size_t namecap;

	memset(a, 0, sizeof(*a));
	if (n >= 1 && !strcmp(w[0], "reference")) {
		if (n != 3 || *rest || risk_price_parse(w[2], &a->price) < 0 || !a->price ||
		    a->price > OUCH_PRICE_MAX || copy_name(a->name, 9, w[1], 0) < 0 ||
		    !strcmp(w[1], "*")) {
			snprintf(why, cap, "reference SYMBOL PRICE (1..8 characters, dollars above 0 "
					   "and at most 199999.99)");
			return -1;
		}
		a->kind = ENGINE_ADMIN_REFERENCE;
		a->scope = ENGINE_SCOPE_SYMBOL;
		return 0;
	}
	if (n < 1 || (strcmp(w[0], "firm") && strcmp(w[0], "user"))) {
		snprintf(why, cap, "want firm NAME LIMIT..., user NAME LIMIT... or reference "
				   "SYMBOL PRICE");
		return -1;
	}
	a->scope = w[0][0] == 'f' ? ENGINE_SCOPE_FIRM : ENGINE_SCOPE_USER;
	namecap = a->scope == ENGINE_SCOPE_FIRM ? 5 : 7;
	if (n < 3 || copy_name(a->name, namecap, w[1], 1) < 0) {
		snprintf(why, cap, "%s NAME LIMIT...: a name of 1..%zu letters or digits, or *",
			 w[0], namecap - 1);
		return -1;
	}
	/* the third word is the first limit: put it back in front of the rest */
	if (*rest)
		w[2][strlen(w[2])] = ' ';
	if (risk_limits_parse(w[2], &a->limits, why, cap) < 0)
		return -1;
	a->kind = ENGINE_ADMIN_LIMITS;
	return 0;
}

static int same_entry(const struct engine_admin_cmd *a, const struct engine_admin_cmd *b)
{
	return a->scope == b->scope && !strcmp(a->name, b->name);
}

/* The entries of text (NUL-terminated, modified) into out[] (cap entries). */
static int parse_text(const char *path, char *text, struct engine_admin_cmd *out, size_t cap,
		      size_t *n, char *err, size_t errlen)
{
	unsigned lineno = 0;
	char *save = NULL;

	*n = 0;
	for (char *line = text; line; line = save) {
		char why[200], *p;

		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		for (p = line; *p == ' ' || *p == '\t'; p++)
			;
		if (!*p || *p == '#' || *p == '\r')
			continue;
		p[strcspn(p, "\r")] = '\0';
		if (*n == cap) {
			snprintf(err, errlen, "%s:%u: more than %zu entries", path, lineno, cap);
			return -E2BIG;
		}
		if (line_parse(p, &out[*n], why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
			return -EINVAL;
		}
		for (size_t i = 0; i < *n; i++)
			if (same_entry(&out[i], &out[*n])) {
				snprintf(err, errlen, "%s:%u: %s %s given twice", path, lineno,
					 scope_words[out[i].scope], out[i].name);
				return -EINVAL;
			}
		(*n)++;
	}
	return 0;
}

int risk_text_load(const char *name, const char *text, size_t len, struct engine_admin_cmd **out,
		   size_t *n, char *err, size_t errlen)
{
	struct engine_admin_cmd *a;
	size_t lines = 1;
	char *copy;
	int r;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	if (memchr(text, '\0', len)) {
		snprintf(err, errlen, "%s: a NUL byte in the file", name);
		return -EINVAL;
	}
	if (lines > RISK_FILE_MAX)
		lines = RISK_FILE_MAX;
	copy = malloc(len + 1);
	a = calloc(lines, sizeof(*a));
	if (!copy || !a) {
		free(copy);
		free(a);
		return -ENOMEM;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	r = parse_text(name, copy, a, lines, n, err, errlen);
	free(copy);
	if (r < 0 || *n == 0) {
		free(a);
		a = NULL;
		if (r < 0)
			*n = 0;
	}
	*out = a;
	return r;
}

int risk_file_load(const char *path, struct engine_admin_cmd **out, size_t *n, char *err,
		   size_t errlen)
{
	char *text = NULL;
	size_t len = 0, cap = 0, got;
	FILE *f;
	int r = 0;

	*out = NULL;
	*n = 0;
	if (!path || !path[0])
		return 0;
	if (!(f = fopen(path, "r"))) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	do {
		if (len == cap) {
			char *t = cap < (64u << 20) ? realloc(text, cap ? cap * 2 : 4096) : NULL;

			if (!t) {
				r = cap ? -EFBIG : -ENOMEM;
				break;
			}
			text = t;
			cap = cap ? cap * 2 : 4096;
		}
		got = fread(text + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	if (r == 0 && ferror(f))
		r = -EIO;
	fclose(f);
	if (r == 0)
		r = risk_text_load(path, text ? text : "", len, out, n, err, errlen);
	else
		snprintf(err, errlen, "%s: %s", path, r == -EFBIG ? "too big" : "cannot be read");
	free(text);
	return r;
}

int risk_admin_decode(const uint8_t *buf, size_t len, struct engine_cmd *out)
{
	Lockstep__Admin *a = lockstep__admin__unpack(NULL, len, buf);
	struct engine_admin_cmd *x = &out->u.admin;
	int r = 0;

	if (!a)
		return -1;
	memset(out, 0, sizeof(*out));
	out->kind = ENGINE_ADMIN;
	x->kind = (uint32_t)a->kind;
	x->scope = (uint32_t)a->scope;
	x->cancel = a->cancel;
	x->price = a->price;
	risk_limits_from_pb(a->limits, &x->limits);
	if (a->name && strlen(a->name) < sizeof(x->name))
		memcpy(x->name, a->name, strlen(a->name) + 1);
	else
		r = -1;
	lockstep__admin__free_unpacked(a, NULL);
	return r;
}

int risk_admin_describe(const struct engine_admin_cmd *a, char *buf, size_t len)
{
	return risk_describe(buf, len, a->kind, a->scope, a->name, a->cancel, &a->limits, a->price);
}
