/* Logging: the "<N>ident: message" lines on stderr, level filtering, level
 * names, timestamps, one write per line, and the rate limiter. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "testutil.h"

/* ---- capturing stderr ------------------------------------------------- */

static FILE *cap_file;
static int cap_saved_fd = -1;

static void capture_begin(void)
{
	fflush(stderr);
	cap_file = tmpfile();
	ck_assert_ptr_nonnull(cap_file);
	cap_saved_fd = dup(STDERR_FILENO);
	ck_assert_int_ge(cap_saved_fd, 0);
	ck_assert_int_eq(dup2(fileno(cap_file), STDERR_FILENO), STDERR_FILENO);
}

/* What was written to stderr since capture_begin; the caller frees it. */
static char *capture_end(void)
{
	long len;
	char *buf;

	ck_assert_int_eq(dup2(cap_saved_fd, STDERR_FILENO), STDERR_FILENO);
	close(cap_saved_fd);
	cap_saved_fd = -1;
	ck_assert_int_eq(fseek(cap_file, 0, SEEK_END), 0);
	len = ftell(cap_file);
	rewind(cap_file);
	buf = calloc(1, (size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)len, cap_file), (size_t)len);
	fclose(cap_file);
	cap_file = NULL;
	return buf;
}

static void assert_captured(const char *want)
{
	char *got = capture_end();

	ck_assert_str_eq(got, want);
	free(got);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- format and levels -------------------------------------------------- */

START_TEST(format_each_level)
{
	log_init("sequencer-1", LOG_LVL_DEBUG);
	capture_begin();
	log_err("disk %s", "full");
	log_warn("gap at %d", 42);
	log_notice("term %u", 7u);
	log_info("ready");
	log_debug("state %s -> %s", "a", "b");
	log_msg(LOG_LVL_ERR, "%s", "");
	assert_captured("<3>sequencer-1: disk full\n"
			"<4>sequencer-1: gap at 42\n"
			"<5>sequencer-1: term 7\n"
			"<6>sequencer-1: ready\n"
			"<7>sequencer-1: state a -> b\n"
			"<3>sequencer-1: \n");
}
END_TEST

START_TEST(level_filtering)
{
	log_init("gw", LOG_LVL_WARNING);
	ck_assert_int_eq(log_get_level(), LOG_LVL_WARNING);
	capture_begin();
	log_debug("no");
	log_info("no");
	log_notice("no");
	log_warn("yes %d", 1);
	log_err("yes %d", 2);
	log_set_level(LOG_LVL_INFO);
	log_info("now %s", "yes");
	log_debug("still no");
	assert_captured("<4>gw: yes 1\n<3>gw: yes 2\n<6>gw: now yes\n");

	/* Out-of-range levels are clamped to err..debug. */
	log_set_level(0);
	ck_assert_int_eq(log_get_level(), LOG_LVL_ERR);
	log_set_level(99);
	ck_assert_int_eq(log_get_level(), LOG_LVL_DEBUG);
	log_init(NULL, LOG_LVL_ERR);
	capture_begin();
	log_warn("hidden");
	log_err("shown");
	assert_captured("<3>lockstep: shown\n");
}
END_TEST

START_TEST(level_names)
{
	static const struct {
		const char *name;
		int level;
	} t[] = {
		{ "err", 3 }, { "error", 3 }, { "ERR", 3 }, { "warning", 4 }, { "warn", 4 },
		{ "Warning", 4 }, { "notice", 5 }, { "info", 6 }, { "INFO", 6 }, { "debug", 7 },
		{ "3", 3 }, { "4", 4 }, { "5", 5 }, { "6", 6 }, { "7", 7 },
		{ "", -1 }, { "2", -1 }, { "8", -1 }, { "0", -1 }, { "37", -1 }, { "3x", -1 },
		{ "inf", -1 }, { "infos", -1 }, { "verbose", -1 }, { " info", -1 }, { "crit", -1 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(log_level_parse(t[i].name) == t[i].level, "\"%s\" gave %d, want %d",
			      t[i].name, log_level_parse(t[i].name), t[i].level);
	ck_assert_int_eq(log_level_parse(NULL), -1);
}
END_TEST

START_TEST(timestamps)
{
	unsigned hh, mm, ss, us;
	int end = 0;
	char *got;

	log_init("m", LOG_LVL_INFO);
	log_set_timestamps(1);
	capture_begin();
	log_info("tick");
	got = capture_end();
	log_set_timestamps(0);
	/* "<6>HH:MM:SS.uuuuuu m: tick\n" */
	ck_assert_uint_eq(strlen(got), strlen("<6>00:00:00.000000 m: tick\n"));
	ck_assert_int_eq(sscanf(got, "<6>%2u:%2u:%2u.%6u m: tick\n%n", &hh, &mm, &ss, &us, &end), 4);
	ck_assert_int_eq(end, (int)strlen(got));
	ck_assert_uint_lt(hh, 24);
	ck_assert_uint_lt(mm, 60);
	ck_assert_uint_lt(ss, 61);
	free(got);
}
END_TEST

START_TEST(long_line_truncated)
{
	char big[3000];
	char *got;
	size_t len;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_init("t", LOG_LVL_INFO);
	capture_begin();
	log_info("%s", big);
	log_info("after");
	got = capture_end();
	len = strcspn(got, "\n") + 1; /* first line with its newline */
	ck_assert_uint_le(len, 1024);
	ck_assert_uint_gt(len, 1000);
	ck_assert_int_eq(strncmp(got, "<6>t: xxx", 9), 0);
	ck_assert_str_eq(got + len, "<6>t: after\n");
	free(got);
}
END_TEST

START_TEST(errno_preserved)
{
	log_init("t", LOG_LVL_INFO);
	capture_begin();
	errno = EADDRINUSE;
	log_err("bind: %s", strerror(errno));
	ck_assert_int_eq(errno, EADDRINUSE);
	assert_captured("<3>t: bind: Address already in use\n");
}
END_TEST

/* Several processes sharing one pipe: every line arrives whole. */
START_TEST(one_write_per_line)
{
	enum { CHILDREN = 4, LINES = 300 };
	int p[2], status, counts[CHILDREN] = { 0 };
	char pad[600];
	FILE *in;
	char line[2048];

	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	ck_assert_int_eq(pipe(p), 0);
	for (int c = 0; c < CHILDREN; c++) {
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			char ident[16];

			close(p[0]);
			dup2(p[1], STDERR_FILENO);
			snprintf(ident, sizeof(ident), "child-%d", c);
			log_init(ident, LOG_LVL_INFO);
			for (int i = 0; i < LINES; i++)
				log_info("%d %.*s|", i, (i * 37) % 590, pad);
			_exit(0);
		}
	}
	close(p[1]);
	in = fdopen(p[0], "r");
	ck_assert_ptr_nonnull(in);
	while (fgets(line, sizeof(line), in)) {
		int c, i, n = 0;
		size_t len = strlen(line);

		ck_assert_int_eq(sscanf(line, "<6>child-%d: %d %n", &c, &i, &n), 2);
		ck_assert_int_ge(c, 0);
		ck_assert_int_lt(c, CHILDREN);
		ck_assert_int_eq(i, counts[c]); /* each child's lines in its order */
		ck_assert_uint_eq(len, (size_t)n + (size_t)((i * 37) % 590) + 2);
		ck_assert_int_eq(strspn(line + n, "p"), (i * 37) % 590);
		ck_assert_str_eq(line + len - 2, "|\n");
		counts[c]++;
	}
	fclose(in);
	for (int c = 0; c < CHILDREN; c++) {
		ck_assert_int_ge(wait(&status), 0);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ck_assert_int_eq(counts[c], LINES);
	}
}
END_TEST

/* ---- rate limiting ----------------------------------------------------- */

START_TEST(ratelimit_burst_then_suppressed)
{
	struct log_ratelimit rl = { .interval_ns = 50 * 1000000ull, .burst = 3 };

	log_init("mx", LOG_LVL_INFO);
	capture_begin();
	for (int i = 0; i < 10; i++)
		log_ratelimited(&rl, LOG_LVL_WARNING, "bad datagram %d", i);
	ck_assert_uint_eq(rl.suppressed, 7);
	sleep_ms(80); /* past the interval */
	for (int i = 10; i < 14; i++)
		log_ratelimited(&rl, LOG_LVL_WARNING, "bad datagram %d", i);
	assert_captured("<4>mx: bad datagram 0\n"
			"<4>mx: bad datagram 1\n"
			"<4>mx: bad datagram 2\n"
			"<4>mx: (7 similar messages suppressed)\n"
			"<4>mx: bad datagram 10\n"
			"<4>mx: bad datagram 11\n"
			"<4>mx: bad datagram 12\n");
	ck_assert_uint_eq(rl.suppressed, 1);

	/* A quiet spell with nothing suppressed says nothing extra. */
	rl = (struct log_ratelimit){ .interval_ns = 50 * 1000000ull, .burst = 1 };
	capture_begin();
	log_ratelimited(&rl, LOG_LVL_ERR, "one");
	sleep_ms(80);
	log_ratelimited(&rl, LOG_LVL_ERR, "two");
	assert_captured("<3>mx: one\n<3>mx: two\n");
}
END_TEST

START_TEST(ratelimit_filtered_level)
{
	struct log_ratelimit rl = LOG_RATELIMIT_INIT(1, 5);

	ck_assert_uint_eq(rl.interval_ns, 1000000000ull);
	ck_assert_uint_eq(rl.burst, 5);
	log_init("mx", LOG_LVL_WARNING);
	capture_begin();
	for (int i = 0; i < 20; i++)
		log_ratelimited(&rl, LOG_LVL_DEBUG, "hidden %d", i);
	log_ratelimited(&rl, LOG_LVL_ERR, "shown");
	assert_captured("<3>mx: shown\n");
	ck_assert_uint_eq(rl.suppressed, 0); /* filtered lines are not counted */
	ck_assert_uint_eq(rl.printed, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, format_each_level);
	tcase_add_test(tc, level_filtering);
	tcase_add_test(tc, level_names);
	tcase_add_test(tc, timestamps);
	tcase_add_test(tc, long_line_truncated);
	tcase_add_test(tc, errno_preserved);
	tcase_add_test(tc, one_write_per_line);
	tcase_add_test(tc, ratelimit_burst_then_suppressed);
	tcase_add_test(tc, ratelimit_filtered_level);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
