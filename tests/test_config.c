/* config: typed INI files, overrides, defaults, and errors that name
 * file:line: [section] key. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "testutil.h"

struct tcfg {
	char name[16];
	int64_t count;
	uint64_t limit;
	int flag;
	double ratio;
	int fsync;
	uint64_t timeout, interval;
	uint64_t segment, buffer;
	char group[32];
};

static const char *const fsync_names[] = { "none", "interval", "batch", NULL };

#define F(m) offsetof(struct tcfg, m)
#define SZ(m) sizeof(((struct tcfg *)0)->m)

static const struct config_key keys[] = {
	{ "main", "name", CONFIG_STRING, F(name), SZ(name), "gw1", 0, 0, NULL, "node name" },
	{ "main", "count", CONFIG_INT, F(count), 0, "-5", -100, 100, NULL, "a bounded int" },
	{ "main", "limit", CONFIG_UINT, F(limit), 0, "10", 0, 0, NULL, "an unbounded uint" },
	{ "main", "flag", CONFIG_BOOL, F(flag), 0, "no", 0, 0, NULL, "a switch" },
	{ "main", "ratio", CONFIG_DOUBLE, F(ratio), 0, "0.5", 0, 1, NULL, "a fraction" },
	{ "journal", "fsync", CONFIG_ENUM, F(fsync), 0, "interval", 0, 0, fsync_names, "policy" },
	{ "journal", "timeout", CONFIG_DURATION, F(timeout), 0, "250ms", 0, 0, NULL, "any" },
	{ "journal", "interval", CONFIG_DURATION, F(interval), 0, "10ms", 1e6, 60e9, NULL, "b" },
	{ "journal", "segment", CONFIG_SIZE, F(segment), 0, "64M", 0, 0, NULL, "segment size" },
	{ "journal", "buffer", CONFIG_SIZE, F(buffer), 0, "4K", 4096, 1 << 20, NULL, "bounded" },
	{ "net", "group", CONFIG_STRING, F(group), SZ(group), NULL, 0, 0, NULL, "required" },
	CONFIG_END
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]) - 1)

/* Collects [logins] entries: "name = password firm=FIRM". */
struct logins {
	unsigned n;
	char name[8][16], value[8][64];
};

static int on_login(void *ctx, const char *section, const char *name, const char *value,
		    char *err, size_t errlen)
{
	struct logins *l = ctx;

	ck_assert_str_eq(section, "logins");
	if (!strstr(value, "firm=")) {
		snprintf(err, errlen, "no firm= in \"%s\"", value);
		return -EINVAL;
	}
	if (l->n == 8)
		return -ENOSPC; /* no message: config says "rejected" */
	snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
	snprintf(l->value[l->n], sizeof(l->value[0]), "%s", value);
	l->n++;
	return 0;
}

static const char *const free_sections[] = { "logins", NULL };
static struct logins logins;
static const struct config_spec spec = { keys, free_sections, on_login, &logins };

static char dir[64];
static char err[512];
static struct tcfg cfg;

static void setup(void)
{
	ck_assert_int_eq(testutil_mkdtemp(dir, sizeof(dir), "/tmp", "test_config"), 0);
	memset(&logins, 0, sizeof(logins));
	memset(&cfg, 0, sizeof(cfg));
	memset(err, 0, sizeof(err));
}

static void teardown(void)
{
	if (testutil_rm_rf(dir) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* Writes text to dir/name; returns the path (static buffer). */
static const char *write_file(const char *name, const char *text, size_t len)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

#define WRITE(name, text) write_file(name, text, strlen(text))

/* Loads a file whose text is given, and expects the exact error
 * "<path>:<rest>" (rest starts with ":" or " "). */
static void expect_file_error(const char *text, const char *rest)
{
	const char *path = WRITE("t.conf", text);
	char want[512];

	ck_assert_int_eq(config_load(&spec, &cfg, path, NULL, 0, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s%s", path, rest);
	ck_assert_str_eq(err, want);
}

static int load_override(const char *o)
{
	const char *ov[] = { "net.group=239.1.1.1", o };

	return config_load(&spec, &cfg, NULL, ov, 2, err, sizeof(err));
}

/* --- defaults ------------------------------------------------------------------- */

START_TEST(defaults_applied)
{
	const char *ov[] = { "net.group=239.1.1.1" };

	ck_assert_int_eq(config_load(&spec, &cfg, NULL, ov, 1, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_str_eq(cfg.name, "gw1");
	ck_assert_int_eq(cfg.count, -5);
	ck_assert_uint_eq(cfg.limit, 10);
	ck_assert_int_eq(cfg.flag, 0);
	ck_assert_double_eq(cfg.ratio, 0.5);
	ck_assert_int_eq(cfg.fsync, 1);
	ck_assert_uint_eq(cfg.timeout, 250000000);
	ck_assert_uint_eq(cfg.interval, 10000000);
	ck_assert_uint_eq(cfg.segment, 64u << 20);
	ck_assert_uint_eq(cfg.buffer, 4096);
	ck_assert_str_eq(cfg.group, "239.1.1.1");
}
END_TEST

START_TEST(bad_default_is_an_error)
{
	struct config_key bad[] = {
		{ "main", "count", CONFIG_INT, F(count), 0, "abc", 0, 0, NULL, NULL },
		CONFIG_END,
	};
	struct config_spec s = { bad, NULL, NULL, NULL };

	ck_assert_int_eq(config_load(&s, &cfg, NULL, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "built-in default: [main] count: \"abc\" is not a number");
}
END_TEST

START_TEST(every_default_in_table_parses)
{
	/* The table's own defaults through the same parser: only the required
	 * key is missing. */
	ck_assert_int_eq(config_load(&spec, &cfg, NULL, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "command line: [net] group: required, but not set "
			      "(and no file given)");
}
END_TEST

START_TEST(bad_specs_rejected)
{
	struct config_key enum_no_names[] = {
		{ "a", "b", CONFIG_ENUM, 0, 0, "x", 0, 0, NULL, NULL },
		CONFIG_END,
	};
	struct config_key min_above_max[] = {
		{ "a", "b", CONFIG_INT, 0, 0, "1", 5, 1, NULL, NULL },
		CONFIG_END,
	};
	struct config_key string_no_size[] = {
		{ "a", "b", CONFIG_STRING, 0, 0, "x", 0, 0, NULL, NULL },
		CONFIG_END,
	};
	struct config_spec s1 = { enum_no_names, NULL, NULL, NULL };
	struct config_spec s2 = { min_above_max, NULL, NULL, NULL };
	struct config_spec s3 = { string_no_size, NULL, NULL, NULL };
	struct config_spec s4 = { keys, free_sections, NULL, NULL };

	ck_assert_int_eq(config_load(&s1, &cfg, NULL, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "config: [a] b: enum key without names");
	ck_assert_int_eq(config_load(&s2, &cfg, NULL, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "config: [a] b: min is above max");
	ck_assert_int_eq(config_load(&s3, &cfg, NULL, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "config: [a] b: string key with size 0");
	ck_assert_int_eq(config_load(&s4, &cfg, NULL, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "config: free sections without an on_free callback");
}
END_TEST

/* --- values of every type ----------------------------------------------------------- */

struct good {
	const char *set; /* override */
	size_t off; /* field */
	int kind; /* 'i' int64, 'u' uint64, 'b' int, 'd' double, 's' string */
	int64_t i;
	uint64_t u;
	double d;
	const char *s;
};

static const struct good goods[] = {
	{ "main.count=42", F(count), 'i', 42, 0, 0, NULL },
	{ "main.count=-100", F(count), 'i', -100, 0, 0, NULL },
	{ "main.count=100", F(count), 'i', 100, 0, 0, NULL },
	{ "main.count=+7", F(count), 'i', 7, 0, 0, NULL },
	{ "main.count=0x10", F(count), 'i', 16, 0, 0, NULL },
	{ "main.count = 3 ", F(count), 'i', 3, 0, 0, NULL },
	{ "main.limit=0", F(limit), 'u', 0, 0, 0, NULL },
	{ "main.limit=18446744073709551615", F(limit), 'u', 0, UINT64_MAX, 0, NULL },
	{ "main.limit=0xffffffffffffffff", F(limit), 'u', 0, UINT64_MAX, 0, NULL },
	{ "main.flag=yes", F(flag), 'b', 1, 0, 0, NULL },
	{ "main.flag=no", F(flag), 'b', 0, 0, 0, NULL },
	{ "main.flag=true", F(flag), 'b', 1, 0, 0, NULL },
	{ "main.flag=false", F(flag), 'b', 0, 0, 0, NULL },
	{ "main.flag=on", F(flag), 'b', 1, 0, 0, NULL },
	{ "main.flag=off", F(flag), 'b', 0, 0, 0, NULL },
	{ "main.flag=1", F(flag), 'b', 1, 0, 0, NULL },
	{ "main.flag=0", F(flag), 'b', 0, 0, 0, NULL },
	{ "main.flag=YES", F(flag), 'b', 1, 0, 0, NULL },
	{ "main.flag=Off", F(flag), 'b', 0, 0, 0, NULL },
	{ "main.ratio=0.25", F(ratio), 'd', 0, 0, 0.25, NULL },
	{ "main.ratio=1", F(ratio), 'd', 0, 0, 1, NULL },
	{ "main.ratio=0", F(ratio), 'd', 0, 0, 0, NULL },
	{ "main.ratio=1e-3", F(ratio), 'd', 0, 0, 0.001, NULL },
	{ "main.ratio=1e-400", F(ratio), 'd', 0, 0, 0, NULL },
	{ "journal.fsync=none", F(fsync), 'b', 0, 0, 0, NULL },
	{ "journal.fsync=interval", F(fsync), 'b', 1, 0, 0, NULL },
	{ "journal.fsync=batch", F(fsync), 'b', 2, 0, 0, NULL },
	{ "journal.fsync=BATCH", F(fsync), 'b', 2, 0, 0, NULL },
	{ "journal.timeout=250ms", F(timeout), 'u', 0, 250000000, 0, NULL },
	{ "journal.timeout=1s", F(timeout), 'u', 0, 1000000000, 0, NULL },
	{ "journal.timeout=500us", F(timeout), 'u', 0, 500000, 0, NULL },
	{ "journal.timeout=500\xc2\xb5s", F(timeout), 'u', 0, 500000, 0, NULL },
	{ "journal.timeout=100ns", F(timeout), 'u', 0, 100, 0, NULL },
	{ "journal.timeout=2m", F(timeout), 'u', 0, 120000000000ull, 0, NULL },
	{ "journal.timeout=2min", F(timeout), 'u', 0, 120000000000ull, 0, NULL },
	{ "journal.timeout=1h", F(timeout), 'u', 0, 3600000000000ull, 0, NULL },
	{ "journal.timeout=1.5s", F(timeout), 'u', 0, 1500000000, 0, NULL },
	{ "journal.timeout=0.001ms", F(timeout), 'u', 0, 1000, 0, NULL },
	{ "journal.timeout=0s", F(timeout), 'u', 0, 0, 0, NULL },
	{ "journal.timeout=250 ms", F(timeout), 'u', 0, 250000000, 0, NULL },
	{ "journal.timeout=18446744073709551615ns", F(timeout), 'u', 0, UINT64_MAX, 0, NULL },
	{ "journal.interval=1ms", F(interval), 'u', 0, 1000000, 0, NULL },
	{ "journal.interval=1m", F(interval), 'u', 0, 60000000000ull, 0, NULL },
	{ "journal.segment=8M", F(segment), 'u', 0, 8u << 20, 0, NULL },
	{ "journal.segment=8MiB", F(segment), 'u', 0, 8u << 20, 0, NULL },
	{ "journal.segment=8m", F(segment), 'u', 0, 8u << 20, 0, NULL },
	{ "journal.segment=64K", F(segment), 'u', 0, 64u << 10, 0, NULL },
	{ "journal.segment=64KiB", F(segment), 'u', 0, 64u << 10, 0, NULL },
	{ "journal.segment=1G", F(segment), 'u', 0, 1u << 30, 0, NULL },
	{ "journal.segment=1GiB", F(segment), 'u', 0, 1u << 30, 0, NULL },
	{ "journal.segment=2T", F(segment), 'u', 0, 2ull << 40, 0, NULL },
	{ "journal.segment=4096", F(segment), 'u', 0, 4096, 0, NULL },
	{ "journal.segment=4096B", F(segment), 'u', 0, 4096, 0, NULL },
	{ "journal.segment=1.5K", F(segment), 'u', 0, 1536, 0, NULL },
	{ "journal.segment=8 M", F(segment), 'u', 0, 8u << 20, 0, NULL },
	{ "journal.segment=0", F(segment), 'u', 0, 0, 0, NULL },
	{ "journal.buffer=1M", F(buffer), 'u', 0, 1u << 20, 0, NULL },
	{ "main.name=", F(name), 's', 0, 0, 0, "" },
	{ "main.name=123456789012345", F(name), 's', 0, 0, 0, "123456789012345" },
	{ "main.name=a b;c", F(name), 's', 0, 0, 0, "a b;c" },
};

START_TEST(good_values)
{
	const struct good *g = &goods[_i];
	const unsigned char *field = (const unsigned char *)&cfg + g->off;
	int64_t i;
	uint64_t u;
	double d;
	int b;

	ck_assert_msg(load_override(g->set) == 0, "%s: %s", g->set, err);
	switch (g->kind) {
	case 'i':
		memcpy(&i, field, sizeof(i));
		ck_assert_int_eq(i, g->i);
		break;
	case 'u':
		memcpy(&u, field, sizeof(u));
		ck_assert_uint_eq(u, g->u);
		break;
	case 'b':
		memcpy(&b, field, sizeof(b));
		ck_assert_int_eq(b, g->i);
		break;
	case 'd':
		memcpy(&d, field, sizeof(d));
		ck_assert_double_eq_tol(d, g->d, 1e-12);
		break;
	default:
		ck_assert_str_eq((const char *)field, g->s);
	}
}
END_TEST

struct bad {
	const char *set;
	const char *err;
};

static const struct bad bads[] = {
	{ "main.count=abc", "[main] count: \"abc\" is not a number" },
	{ "main.count=", "[main] count: \"\" is not a number" },
	{ "main.count=12x", "[main] count: \"12x\" is not a number" },
	{ "main.count=1.5", "[main] count: \"1.5\" is not a number" },
	{ "main.count=0x", "[main] count: \"0x\" is not a number" },
	{ "main.count=- 1", "[main] count: \"- 1\" is not a number" },
	{ "main.count=101", "[main] count: \"101\" is out of range [-100, 100]" },
	{ "main.count=-101", "[main] count: \"-101\" is out of range [-100, 100]" },
	{ "main.count=99999999999999999999", "[main] count: \"99999999999999999999\" is too large" },
	{ "main.limit=-1", "[main] limit: \"-1\" is negative" },
	{ "main.limit=18446744073709551616", "[main] limit: \"18446744073709551616\" is too large" },
	{ "main.limit=ten", "[main] limit: \"ten\" is not a number" },
	{ "main.flag=maybe",
	  "[main] flag: \"maybe\" is not a boolean (yes/no, true/false, on/off, 1/0)" },
	{ "main.flag=2", "[main] flag: \"2\" is not a boolean (yes/no, true/false, on/off, 1/0)" },
	{ "main.flag=", "[main] flag: \"\" is not a boolean (yes/no, true/false, on/off, 1/0)" },
	{ "main.ratio=1.5", "[main] ratio: \"1.5\" is out of range [0, 1]" },
	{ "main.ratio=-0.1", "[main] ratio: \"-0.1\" is out of range [0, 1]" },
	{ "main.ratio=abc", "[main] ratio: \"abc\" is not a number" },
	{ "main.ratio=0.5x", "[main] ratio: \"0.5x\" is not a number" },
	{ "main.ratio=nan", "[main] ratio: \"nan\" is not a number" },
	{ "main.ratio=inf", "[main] ratio: \"inf\" is not a number" },
	{ "main.ratio=1e999", "[main] ratio: \"1e999\" is too large" },
	{ "main.ratio=", "[main] ratio: \"\" is not a number" },
	{ "journal.fsync=always",
	  "[journal] fsync: \"always\" is not one of: none, interval, batch" },
	{ "journal.fsync=", "[journal] fsync: \"\" is not one of: none, interval, batch" },
	{ "journal.timeout=250", "[journal] timeout: \"250\" needs a unit (ns, us, ms, s, m, h)" },
	{ "journal.timeout=0", "[journal] timeout: \"0\" needs a unit (ns, us, ms, s, m, h)" },
	{ "journal.timeout=ms",
	  "[journal] timeout: \"ms\" is not a duration (e.g. 250ms, 1s, 2m)" },
	{ "journal.timeout=-1s",
	  "[journal] timeout: \"-1s\" is not a duration (e.g. 250ms, 1s, 2m)" },
	{ "journal.timeout=.5s",
	  "[journal] timeout: \".5s\" is not a duration (e.g. 250ms, 1s, 2m)" },
	{ "journal.timeout=1.s",
	  "[journal] timeout: \"1.s\" is not a duration (e.g. 250ms, 1s, 2m)" },
	{ "journal.timeout=1.5ns",
	  "[journal] timeout: \"1.5ns\" is not a whole number of nanoseconds" },
	{ "journal.timeout=5 parsecs", "[journal] timeout: \"5 parsecs\" has an unknown unit "
				       "\"parsecs\" (ns, us, ms, s, m, h)" },
	{ "journal.timeout=1MS",
	  "[journal] timeout: \"1MS\" has an unknown unit \"MS\" (ns, us, ms, s, m, h)" },
	{ "journal.timeout=1.2.3s", "[journal] timeout: \"1.2.3s\" has an unknown unit \".3s\" "
				    "(ns, us, ms, s, m, h)" },
	{ "journal.timeout=9999999999h", "[journal] timeout: \"9999999999h\" is too large" },
	{ "journal.timeout=18446744073709551616ns",
	  "[journal] timeout: \"18446744073709551616ns\" is too large" },
	{ "journal.interval=2m", "[journal] interval: \"2m\" is out of range [1ms, 1m]" },
	{ "journal.interval=999us", "[journal] interval: \"999us\" is out of range [1ms, 1m]" },
	{ "journal.segment=8MB", "[journal] segment: \"8MB\" has an unknown unit \"MB\" "
				 "(B, K, KiB, M, MiB, G, GiB, T, TiB)" },
	{ "journal.segment=1.1", "[journal] segment: \"1.1\" is not a whole number of bytes" },
	{ "journal.segment=-1",
	  "[journal] segment: \"-1\" is not a size (e.g. 4096, 64K, 8M, 1G)" },
	{ "journal.segment=abc",
	  "[journal] segment: \"abc\" is not a size (e.g. 4096, 64K, 8M, 1G)" },
	{ "journal.segment=99999999T", "[journal] segment: \"99999999T\" is too large" },
	{ "journal.buffer=2M", "[journal] buffer: \"2M\" is out of range [4K, 1M]" },
	{ "journal.buffer=4095", "[journal] buffer: \"4095\" is out of range [4K, 1M]" },
	{ "main.name=1234567890123456",
	  "[main] name: \"1234567890123456\" is too long (16 characters, at most 15)" },
	{ "main.nope=1", "[main] nope: unknown key" },
	{ "nowhere.key=1", "[nowhere] unknown section" },
	{ "main.count", "\"main.count\" is not section.key=value" },
	{ "count=1", "\"count=1\" is not section.key=value" },
	{ ".count=1", "\".count=1\" is not section.key=value" },
	{ "main.=1", "\"main.=1\" is not section.key=value" },
};

START_TEST(bad_values)
{
	const struct bad *b = &bads[_i];
	char want[512];

	snprintf(want, sizeof(want), "command line: %s", b->err);
	ck_assert_int_eq(load_override(b->set), -EINVAL);
	ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(long_value_is_cut_in_message)
{
	char o[300];

	memset(o, 'x', sizeof(o));
	memcpy(o, "main.name=", 10);
	o[sizeof(o) - 1] = '\0';
	ck_assert_int_eq(load_override(o), -EINVAL);
	ck_assert_str_eq(err, "command line: [main] name: "
			      "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\" "
			      "is too long (289 characters, at most 15)");
}
END_TEST

/* --- files ---------------------------------------------------------------------------- */

static const char good_file[] =
	"\xef\xbb\xbf; lockstep test configuration\r\n"
	"# comments of both kinds\n"
	"\n"
	"[main]\n"
	"name = gw7 ; inline comment\n"
	"  count = 17\n"
	"\tlimit=123456789\r\n"
	"flag = on\n"
	"ratio: 0.75\n"
	"[journal]\n"
	"fsync = batch\n"
	"timeout = 2s\n"
	"segment = 128M\n"
	"[logins]\n"
	"TRADR1 = pw1 firm=FRMA\n"
	"TRADR2 = pw2 firm=FRMB\n"
	"[net]\n"
	"group = 239.1.1.1";

START_TEST(good_file_all_values)
{
	const char *path = write_file("good.conf", good_file, sizeof(good_file) - 1);

	ck_assert_msg(config_load(&spec, &cfg, path, NULL, 0, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(cfg.name, "gw7");
	ck_assert_int_eq(cfg.count, 17);
	ck_assert_uint_eq(cfg.limit, 123456789);
	ck_assert_int_eq(cfg.flag, 1);
	ck_assert_double_eq(cfg.ratio, 0.75);
	ck_assert_int_eq(cfg.fsync, 2);
	ck_assert_uint_eq(cfg.timeout, 2000000000);
	ck_assert_uint_eq(cfg.interval, 10000000); /* default */
	ck_assert_uint_eq(cfg.segment, 128u << 20);
	ck_assert_str_eq(cfg.group, "239.1.1.1");
	ck_assert_uint_eq(logins.n, 2);
	ck_assert_str_eq(logins.name[0], "TRADR1");
	ck_assert_str_eq(logins.value[0], "pw1 firm=FRMA");
	ck_assert_str_eq(logins.name[1], "TRADR2");
	ck_assert_str_eq(logins.value[1], "pw2 firm=FRMB");
}
END_TEST

START_TEST(bad_value_names_file_line_key)
{
	expect_file_error("# gateway\n[net]\ngroup = g\n[main]\nname = gw7\ncount = abc\n",
			  ":6: [main] count: \"abc\" is not a number");
}
END_TEST

START_TEST(bad_value_after_many_lines)
{
	char text[4096] = "[net]\ngroup = g\n[main]\n";

	for (int i = 0; i < 100; i++)
		strcat(text, "; filler\n");
	strcat(text, "flag = perhaps\n");
	expect_file_error(text, ":104: [main] flag: \"perhaps\" is not a boolean "
				"(yes/no, true/false, on/off, 1/0)");
}
END_TEST

START_TEST(unknown_key)
{
	expect_file_error("[main]\nname = a\nbatch_size = 3\n", ":3: [main] batch_size: unknown key");
}
END_TEST

START_TEST(unknown_section_without_keys)
{
	expect_file_error("[main]\nname = a\n\n; next\n[gatway]\n", ":5: [gatway] unknown section");
}
END_TEST

START_TEST(unknown_section_with_keys)
{
	expect_file_error("[net]\ngroup = g\n[gatway]\nbatch = 1\n", ":3: [gatway] unknown section");
}
END_TEST

START_TEST(key_outside_section)
{
	expect_file_error("; top\nname = a\n[main]\n", ":2: name: key outside any [section]");
}
END_TEST

START_TEST(missing_required_key)
{
	expect_file_error("[main]\nname = a\n", ": [net] group: required, but not set");
}
END_TEST

START_TEST(too_long_string)
{
	expect_file_error("[main]\nname = abcdefghijklmnopqrstuvwxyz\n",
			  ":2: [main] name: \"abcdefghijklmnopqrstuvwxyz\" is too long "
			  "(26 characters, at most 15)");
}
END_TEST

START_TEST(syntax_error_line)
{
	expect_file_error("[main]\nname = a\njust some words\n",
			  ":3: syntax error: \"just some words\" is neither [section] nor key = value");
	expect_file_error("[main\nname = a\n",
			  ":1: syntax error: \"[main\" is neither [section] nor key = value");
}
END_TEST

START_TEST(first_error_wins)
{
	/* a syntax error before a bad value, and a bad value before a syntax error */
	expect_file_error("[main]\noops\nname = a\ncount = x\n",
			  ":2: syntax error: \"oops\" is neither [section] nor key = value");
	expect_file_error("[main]\ncount = x\noops\n", ":2: [main] count: \"x\" is not a number");
}
END_TEST

START_TEST(duplicate_key)
{
	expect_file_error("[main]\nname = a\n[net]\ngroup = g\n[main]\nname = b\n",
			  ":6: [main] name: set twice (first on line 2)");
}
END_TEST

START_TEST(line_too_long)
{
	char text[512] = "[main]\nname = ";

	memset(text + strlen(text), 'y', 300);
	expect_file_error(text, ":2: line too long (at most 197 characters)");
}
END_TEST

START_TEST(nul_byte)
{
	static const char text[] = "[main]\nname = a\0b\n";
	const char *path = write_file("nul.conf", text, sizeof(text) - 1);
	char want[256];

	ck_assert_int_eq(config_load(&spec, &cfg, path, NULL, 0, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: line contains a NUL byte", path);
	ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(free_section_error)
{
	expect_file_error("[net]\ngroup = g\n[logins]\nTRADR1 = pw1 firm=A\nTRADR2 = pw2\n",
			  ":5: [logins] TRADR2: no firm= in \"pw2\"");
	ck_assert_uint_eq(logins.n, 1);
}
END_TEST

START_TEST(free_section_rejected_without_message)
{
	char text[1024] = "[net]\ngroup = g\n[logins]\n";

	for (int i = 0; i < 9; i++)
		sprintf(text + strlen(text), "T%d = p firm=F\n", i);
	expect_file_error(text, ":12: [logins] T8: rejected");
}
END_TEST

START_TEST(free_section_override)
{
	const char *ov[] = { "net.group=g", "logins.TRADR9 = pw9 firm=FRMZ" };

	ck_assert_int_eq(config_load(&spec, &cfg, NULL, ov, 2, err, sizeof(err)), 0);
	ck_assert_uint_eq(logins.n, 1);
	ck_assert_str_eq(logins.name[0], "TRADR9");
	ck_assert_str_eq(logins.value[0], "pw9 firm=FRMZ");
}
END_TEST

START_TEST(free_sections_only)
{
	static const struct config_key none[] = { CONFIG_END };
	struct config_spec s = { none, free_sections, on_login, &logins };
	const char *path = WRITE("creds.conf", "[logins]\nA = a firm=F\nB = b firm=G\n");
	char dummy = 'd';

	ck_assert_int_eq(config_load(&s, &dummy, path, NULL, 0, err, sizeof(err)), 0);
	ck_assert_uint_eq(logins.n, 2);
	ck_assert_int_eq(dummy, 'd');
	path = WRITE("creds2.conf", "[logins]\nA = a firm=F\n[main]\nname = x\n");
	ck_assert_int_eq(config_load(&s, &dummy, path, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, ":3: [main] unknown section"));
}
END_TEST

START_TEST(overrides_win)
{
	const char *path = WRITE("o.conf", "[main]\ncount = 1\nname = file\n[net]\ngroup = g\n");
	const char *ov[] = { "main.count=2", "main.name = cli", "main.count=3" };

	ck_assert_int_eq(config_load(&spec, &cfg, path, ov, 3, err, sizeof(err)), 0);
	ck_assert_int_eq(cfg.count, 3);
	ck_assert_str_eq(cfg.name, "cli");
	ck_assert_str_eq(cfg.group, "g");
}
END_TEST

START_TEST(override_supplies_required_key)
{
	const char *path = WRITE("r.conf", "[main]\nname = a\n");
	const char *ov[] = { "net.group=239.0.0.9" };

	ck_assert_int_eq(config_load(&spec, &cfg, path, ov, 1, err, sizeof(err)), 0);
	ck_assert_str_eq(cfg.group, "239.0.0.9");
}
END_TEST

START_TEST(bad_override_says_command_line)
{
	const char *path = WRITE("c.conf", "[net]\ngroup = g\n");
	const char *ov[] = { "main.count=7", "main.flag=sometimes" };

	ck_assert_int_eq(config_load(&spec, &cfg, path, ov, 2, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "command line: [main] flag: \"sometimes\" is not a boolean "
			      "(yes/no, true/false, on/off, 1/0)");
}
END_TEST

START_TEST(missing_file)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/absent.conf", dir);
	ck_assert_int_eq(config_load(&spec, &cfg, path, NULL, 0, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, "No such file or directory"));
	/* and without an error buffer */
	ck_assert_int_eq(config_load(&spec, &cfg, path, NULL, 0, NULL, 0), -ENOENT);
}
END_TEST

START_TEST(directory_is_not_a_file)
{
	char want[256];

	ck_assert_int_eq(config_load(&spec, &cfg, dir, NULL, 0, err, sizeof(err)), -EISDIR);
	snprintf(want, sizeof(want), "%s: cannot read: Is a directory", dir);
	ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(failure_leaves_config_untouched)
{
	const char *path = WRITE("f.conf", "[main]\nname = new\ncount = 9\n[net]\ngroup = g\n"
					   "[journal]\nfsync = sometimes\n");
	struct tcfg before;

	memset(&cfg, 0xa5, sizeof(cfg));
	memcpy(&before, &cfg, sizeof(cfg));
	ck_assert_int_eq(config_load(&spec, &cfg, path, NULL, 0, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(memcmp(&before, &cfg, sizeof(cfg)), 0);
}
END_TEST

START_TEST(reload_keeps_fields_outside_table)
{
	struct {
		struct tcfg c;
		int other;
	} big;
	const char *ov[] = { "net.group=g" };

	memset(&big, 0, sizeof(big));
	big.other = 77;
	ck_assert_int_eq(config_load(&spec, &big, NULL, ov, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(big.other, 77);
	ck_assert_str_eq(big.c.group, "g");
}
END_TEST

START_TEST(buffer_not_nul_terminated)
{
	static const char text[] = "[net]\ngroup = abc\ncount = 1";

	/* only "[net]\ngroup = ab" is given */
	ck_assert_int_eq(config_load_buffer(&spec, &cfg, "mem", text, 16, NULL, 0, err,
					    sizeof(err)), 0);
	ck_assert_str_eq(cfg.group, "ab");
	ck_assert_int_eq(config_load_buffer(&spec, &cfg, "mem", "[net]\nx = 1\n", 12, NULL, 0, err,
					    sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "mem:2: [net] x: unknown key");
}
END_TEST

START_TEST(empty_file)
{
	const char *path = WRITE("e.conf", "");
	const char *ov[] = { "net.group=g" };

	ck_assert_int_eq(config_load(&spec, &cfg, path, ov, 1, err, sizeof(err)), 0);
	ck_assert_str_eq(cfg.name, "gw1");
}
END_TEST

START_TEST(print_keys)
{
	char *text = NULL;
	size_t len = 0, lines = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	config_print_keys(&spec, f);
	fclose(f);
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	ck_assert_uint_eq(lines, NKEYS + 1);
	for (size_t i = 0; i < NKEYS; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s.%s = ", keys[i].section, keys[i].name);
		ck_assert_msg(strstr(text, name), "%s missing from:\n%s", name, text);
		ck_assert_ptr_nonnull(strstr(text, keys[i].help));
	}
	ck_assert_ptr_nonnull(strstr(text, "main.count = -5  # int in [-100, 100]: a bounded int\n"));
	ck_assert_ptr_nonnull(strstr(text, "journal.fsync = interval  # enum: none|interval|batch"));
	ck_assert_ptr_nonnull(strstr(text, "journal.interval = 10ms  # duration in [1ms, 1m]"));
	ck_assert_ptr_nonnull(strstr(text, "net.group = (required)  # string (at most 31 "));
	ck_assert_ptr_nonnull(strstr(text, "[logins]"));
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, defaults_applied);
	tcase_add_test(tc, bad_default_is_an_error);
	tcase_add_test(tc, every_default_in_table_parses);
	tcase_add_test(tc, bad_specs_rejected);
	tcase_add_loop_test(tc, good_values, 0, sizeof(goods) / sizeof(goods[0]));
	tcase_add_loop_test(tc, bad_values, 0, sizeof(bads) / sizeof(bads[0]));
	tcase_add_test(tc, long_value_is_cut_in_message);
	tcase_add_test(tc, good_file_all_values);
	tcase_add_test(tc, bad_value_names_file_line_key);
	tcase_add_test(tc, bad_value_after_many_lines);
	tcase_add_test(tc, unknown_key);
	tcase_add_test(tc, unknown_section_without_keys);
	tcase_add_test(tc, unknown_section_with_keys);
	tcase_add_test(tc, key_outside_section);
	tcase_add_test(tc, missing_required_key);
	tcase_add_test(tc, too_long_string);
	tcase_add_test(tc, syntax_error_line);
	tcase_add_test(tc, first_error_wins);
	tcase_add_test(tc, duplicate_key);
	tcase_add_test(tc, line_too_long);
	tcase_add_test(tc, nul_byte);
	tcase_add_test(tc, free_section_error);
	tcase_add_test(tc, free_section_rejected_without_message);
	tcase_add_test(tc, free_section_override);
	tcase_add_test(tc, free_sections_only);
	tcase_add_test(tc, overrides_win);
	tcase_add_test(tc, override_supplies_required_key);
	tcase_add_test(tc, bad_override_says_command_line);
	tcase_add_test(tc, missing_file);
	tcase_add_test(tc, directory_is_not_a_file);
	tcase_add_test(tc, failure_leaves_config_untouched);
	tcase_add_test(tc, reload_keeps_fields_outside_table);
	tcase_add_test(tc, buffer_not_nul_terminated);
	tcase_add_test(tc, empty_file);
	tcase_add_test(tc, print_keys);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
