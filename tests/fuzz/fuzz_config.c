/* Fuzzes the configuration reader: the input is an INI file's text, read
 * against a small table of every type. Aborts when:
 *  - the result is neither 0 nor -EINVAL, or the error is not one line that
 *    names the source ("fuzz:LINE: ..." with LINE within the input);
 *  - a failed load changed the caller's struct;
 *  - a successful load, written back out as INI text and read again, gives
 *    other values (every type's parser and printer agree). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz_cfg {
	char name[8];
	int64_t count;
	uint64_t limit;
	int flag;
	double ratio;
	int mode;
	uint64_t timeout;
	uint64_t size;
	char path[64];
};

static const char *const fz_modes[] = { "none", "interval", "batch", NULL };

#define FZ_F(m) offsetof(struct fz_cfg, m)

static const struct config_key fz_keys[] = {
	{ "a", "name", CONFIG_STRING, FZ_F(name), 8, "x", 0, 0, NULL, NULL },
	{ "a", "count", CONFIG_INT, FZ_F(count), 0, "1", -10, 1000, NULL, NULL },
	{ "a", "limit", CONFIG_UINT, FZ_F(limit), 0, "0", 0, 0, NULL, NULL },
	{ "a", "flag", CONFIG_BOOL, FZ_F(flag), 0, "no", 0, 0, NULL, NULL },
	{ "a", "ratio", CONFIG_DOUBLE, FZ_F(ratio), 0, "0.5", 0, 0, NULL, NULL },
	{ "b", "mode", CONFIG_ENUM, FZ_F(mode), 0, "none", 0, 0, fz_modes, NULL },
	{ "b", "timeout", CONFIG_DURATION, FZ_F(timeout), 0, "1s", 1000, 3600e9, NULL, NULL },
	{ "b", "size", CONFIG_SIZE, FZ_F(size), 0, "4K", 0, 0, NULL, NULL },
	{ "b", "path", CONFIG_STRING, FZ_F(path), 64, "", 0, 0, NULL, NULL },
	CONFIG_END
};

static int fz_on_free(void *ctx, const char *section, const char *name, const char *value,
		      char *err, size_t errlen)
{
	(void)ctx;
	(void)section;
	(void)name;
	if (strstr(value, "bad")) {
		snprintf(err, errlen, "refused");
		return -EINVAL;
	}
	return 0;
}

static const char *const fz_free[] = { "logins", NULL };
static const struct config_spec fz_spec = { fz_keys, fz_free, fz_on_free, NULL };

static void fz_check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_config: invariant broken: %s\n", what);
		abort();
	}
}

/* The configuration as INI text, each value as the parser reads it back. */
static size_t fz_print(const struct fz_cfg *c, char *out, size_t cap)
{
	return (size_t)snprintf(out, cap,
				"[a]\nname=%s\ncount=%lld\nlimit=%llu\nflag=%s\nratio=%.17g\n"
				"[b]\nmode=%s\ntimeout=%lluns\nsize=%llu\npath=%s\n",
				c->name, (long long)c->count, (unsigned long long)c->limit,
				c->flag ? "yes" : "no", c->ratio, fz_modes[c->mode],
				(unsigned long long)c->timeout, (unsigned long long)c->size,
				c->path);
}

static void fz_check_error(const char *err, const uint8_t *data, size_t size)
{
	unsigned long line;
	size_t lines = 1;
	char *end;

	fz_check(err[0] != '\0', "an error without a message");
	fz_check(strchr(err, '\n') == NULL, "an error of more than one line");
	if (strncmp(err, "fuzz:", 5) != 0) {
		fz_check(!strncmp(err, "fuzz: ", 6) || !strncmp(err, "built-in default: ", 18),
			 "an error that does not name its source");
		return;
	}
	line = strtoul(err + 5, &end, 10);
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	fz_check(end != err + 5 && *end == ':' && line >= 1 && line <= lines,
		 "an error line outside the input");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_cfg cfg, before, again;
	char err[256], text[512];
	size_t n;
	int rc;

	memset(&cfg, 0x5a, sizeof(cfg));
	memcpy(&before, &cfg, sizeof(cfg));
	rc = config_load_buffer(&fz_spec, &cfg, "fuzz", (const char *)data, size, NULL, 0, err,
				sizeof(err));
	fz_check(rc == 0 || rc == -EINVAL, "an unexpected return value");
	if (rc) {
		fz_check_error(err, data, size);
		fz_check(memcmp(&cfg, &before, sizeof(cfg)) == 0, "a failed load wrote the struct");
		return 0;
	}
	fz_check(err[0] == '\0', "success with an error message");
	n = fz_print(&cfg, text, sizeof(text));
	fz_check(n < sizeof(text), "printed configuration too long");
	memset(&again, 0, sizeof(again));
	rc = config_load_buffer(&fz_spec, &again, "again", text, n, NULL, 0, err, sizeof(err));
	if (rc)
		fprintf(stderr, "%s\n--\n%s", err, text);
	fz_check(rc == 0, "printed configuration does not load");
	fz_check(!strcmp(cfg.name, again.name) && !strcmp(cfg.path, again.path) &&
			 cfg.count == again.count && cfg.limit == again.limit &&
			 cfg.flag == again.flag && cfg.mode == again.mode &&
			 cfg.timeout == again.timeout && cfg.size == again.size &&
			 memcmp(&cfg.ratio, &again.ratio, sizeof(cfg.ratio)) == 0,
		 "printed configuration reads back different");
	return 0;
}
