/* Pre-trade risk's decoders: byte 0 picks which, the rest is the input.
 *  0: a limits text (common/risk.h risk_limits_parse): aborts when a parse
 *     that succeeds formats into text that does not parse back into the same
 *     limits, when a failed parse has no one-line error, or when it sets a
 *     bit outside RISK_ALL;
 *  1: a risk file (matcher/risk_admin.h risk_text_load): aborts when the
 *     result is not 0, -EINVAL or -E2BIG, an error has no one-line message
 *     naming the file, or an entry breaks the file's rules (a kind and scope
 *     that go together, a name NUL-terminated within its scope's length);
 *  2: an Admin body of the tape (risk_admin_decode): aborts when a decoded
 *     name is not NUL-terminated in its field, and describes every decoded
 *     command (which reads every field). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "risk.h"
#include "risk_admin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_risk: invariant broken: %s\n", what);
		abort();
	}
}

static void one_line(const char *err)
{
	check(err[0] != '\0' && strchr(err, '\n') == NULL, "an error of no line or several");
}

static void fuzz_limits(const char *text, size_t size)
{
	char *s = malloc(size + 1), err[200] = "", out[256];
	struct risk_limits a, b;

	if (!s)
		return;
	memcpy(s, text, size);
	s[size] = '\0';
	if (risk_limits_parse(s, &a, err, sizeof(err)) == 0) {
		check((a.set & ~(uint32_t)RISK_ALL) == 0, "a bit outside RISK_ALL");
		check(risk_limits_format(&a, out, sizeof(out)) < (int)sizeof(out), "format too long");
		check(risk_limits_parse(out, &b, err, sizeof(err)) == 0, "formatted text does not parse");
		check(memcmp(&a, &b, sizeof(a)) == 0, "formatted text parses into other limits");
	} else {
		one_line(err);
	}
	free(s);
}

static void check_entry(const struct engine_admin_cmd *a)
{
	size_t len = strnlen(a->name, sizeof(a->name));

	check(len > 0 && len < sizeof(a->name), "a name not NUL-terminated, or empty");
	if (a->kind == ENGINE_ADMIN_REFERENCE)
		check(a->scope == ENGINE_SCOPE_SYMBOL && a->price > 0 && strcmp(a->name, "*"),
		      "a reference of no symbol or no price");
	else
		check(a->kind == ENGINE_ADMIN_LIMITS &&
			      (a->scope == ENGINE_SCOPE_FIRM ? len <= 4
			       : a->scope == ENGINE_SCOPE_USER ? len <= 6
								: 0),
		      "limits of no firm or user, or a name too long");
}

static void fuzz_file(const char *text, size_t size)
{
	struct engine_admin_cmd *a;
	char err[300] = "";
	size_t n;
	int r = risk_text_load("fuzz.conf", text, size, &a, &n, err, sizeof(err));

	check(r == 0 || r == -EINVAL || r == -E2BIG, "an unexpected error");
	if (r < 0) {
		one_line(err);
		check(strncmp(err, "fuzz.conf:", 10) == 0, "an error that does not name the file");
		check(a == NULL && n == 0, "entries left after an error");
		return;
	}
	for (size_t i = 0; i < n; i++)
		check_entry(&a[i]);
	free(a);
}

static void fuzz_admin(const uint8_t *data, size_t size)
{
	struct engine_cmd cmd;
	char text[300];

	if (risk_admin_decode(data, size, &cmd) < 0)
		return;
	check(cmd.kind == ENGINE_ADMIN, "not an admin command");
	check(strnlen(cmd.u.admin.name, sizeof(cmd.u.admin.name)) < sizeof(cmd.u.admin.name),
	      "a name not NUL-terminated");
	risk_admin_describe(&cmd.u.admin, text, sizeof(text));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0: fuzz_limits((const char *)data + 1, size - 1); break;
	case 1: fuzz_file((const char *)data + 1, size - 1); break;
	default: fuzz_admin(data + 1, size - 1); break;
	}
	return 0;
}
