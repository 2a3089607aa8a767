/* Cluster key files (common/auth.h): the input is a key file's text, read
 * by auth_keyfile_parse(). Aborts when:
 *  - the result is neither 0 nor -EINVAL, an error has no message or more
 *    than one line, or names a line past the input's;
 *  - a failed parse wrote the caller's keys;
 *  - what parsed breaks the file's rules (1 to AUTH_MAX_KEYS keys, ids 1 to
 *    255 each once, `send` one of them) or does not derive keys;
 *  - auth_keyfile_format() of it does not parse into the same keys, or
 *    formats again into other text. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_keyfile: invariant broken: %s\n", what);
		abort();
	}
}

static int same_keys(const struct auth_keys *a, const struct auth_keys *b)
{
	return a->n == b->n && a->send_id == b->send_id && memcmp(a->id, b->id, a->n) == 0 &&
	       memcmp(a->key, b->key, sizeof(a->key[0]) * a->n) == 0;
}

static void check_error(const char *err, const uint8_t *data, size_t size)
{
	unsigned long line, lines = 1;
	char *end;

	check(err[0] != '\0' && strchr(err, '\n') == NULL, "an error of no line or several");
	if (strncmp(err, "line ", 5) != 0)
		return;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	line = strtoul(err + 5, &end, 10);
	check(end != err + 5 && *end == ':' && line >= 1 && line <= lines,
	      "an error line outside the input");
}

/* The file's rules hold for k, and it derives keys. */
static void check_rules(const struct auth_keys *k)
{
	struct auth a;
	int send = 0;

	check(k->n >= 1 && k->n <= AUTH_MAX_KEYS, "key count");
	for (unsigned i = 0; i < k->n; i++) {
		check(k->id[i] >= 1, "key id 0");
		send += k->id[i] == k->send_id;
		for (unsigned j = 0; j < i; j++)
			check(k->id[i] != k->id[j], "a key id twice");
	}
	check(send == 1, "send names no key");
	check(auth_init(&a, "fuzz", k) == 0 && a.id[a.send] == k->send_id, "auth_init");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char text[4096], again[4096];
	struct auth_keys k, sentinel, back;
	char err[256] = "";
	size_t len;
	int rc;

	memset(&k, 0x5a, sizeof(k));
	sentinel = k;
	rc = auth_keyfile_parse((const char *)data, size, &k, err, sizeof(err));
	check(rc == 0 || rc == -EINVAL, "an unexpected return value");
	if (rc) {
		check_error(err, data, size);
		check(memcmp(&k, &sentinel, sizeof(k)) == 0, "a failed parse wrote the keys");
		return 0;
	}
	check_rules(&k);
	len = auth_keyfile_format(&k, text, sizeof(text));
	check(len > 0 && len < sizeof(text), "format");
	rc = auth_keyfile_parse(text, len, &back, err, sizeof(err));
	if (rc)
		fprintf(stderr, "%s\n--\n%.*s", err, (int)len, text);
	check(rc == 0 && same_keys(&k, &back), "formatted keys read back different");
	check(auth_keyfile_format(&back, again, sizeof(again)) == len &&
		      memcmp(text, again, len) == 0,
	      "formatted twice into other text");
	return 0;
}
