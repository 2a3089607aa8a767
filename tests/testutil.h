/* The unit tests' shared helpers (tests/testutil.c): running a suite,
 * private temporary directories, bounded waits on descriptors, an engine
 * command. */
#ifndef LOCKSTEP_TESTUTIL_H
#define LOCKSTEP_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* Check's ck_assert_msg (under every ck_assert_*) records the location of
 * each assertion that passes, a write(2) to the runner's message file: the
 * engine's random tapes made 3.9 million of them, most of test_engine's
 * time and more under the sanitizers. Here a passing assertion costs its
 * comparison only; a failing one reports as before. What is lost: a test
 * that crashes is reported at its last mark_point() (or its start), not at
 * its last passing assertion; the sanitizers' stack traces say where. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
	((expr) ? (void)0 \
		: _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

/* The end of every unit test's main(): runs the suite (in one process with
 * nofork, where cases share what they found), frees the runner and turns
 * the failures into the exit status (EXIT_SUCCESS or EXIT_FAILURE). */
int testutil_run(Suite *s, int nofork);

/* The directory for a test program's own temporary directories: $TMPDIR
 * when set, not empty and at most 900 bytes long, else "/tmp". */
const char *testutil_tmp_parent(void);

/* Makes a new directory PARENT/NAME.XXXXXX (mkdtemp) and writes its path
 * into dir (cap bytes); 0, -ENAMETOOLONG when the path does not fit, or
 * -errno of mkdtemp. dir is left undefined on failure. */
int testutil_mkdtemp(char *dir, size_t cap, const char *parent, const char *name);

/* Removes path and everything below it (symbolic links are removed, never
 * followed); 0 (also when path does not exist), or -1 when something
 * could not be removed. */
int testutil_rm_rf(const char *path);

/* 1 when fd is readable within ms milliseconds (poll), else 0. */
int testutil_wait_readable(int fd, int ms);

/* An engine's Enter command (matcher/engine.h): a day limit order of user
 * and firm (the Enter's firm field too), capacity agency, not ISO, no
 * cross, min_qty 0. */
struct engine_cmd;
void testutil_enter(struct engine_cmd *c, const char *user, const char *firm, const char *token,
		    char side, uint32_t shares, const char *stock, uint32_t price, char display);

#endif
