/* The unit tests' shared helpers (tests/testutil.c): running a suite,
 * private temporary directories and bounded waits on descriptors. */
#ifndef LOCKSTEP_TESTUTIL_H
#define LOCKSTEP_TESTUTIL_H

#include <check.h>
#include <stddef.h>

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

#endif
