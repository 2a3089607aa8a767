/* The end of every unit test's main(): runs the suite (in one process with
 * nofork, where cases share what they found), frees the runner and turns
 * the failures into the exit status. */
#ifndef LOCKSTEP_CHECK_MAIN_H
#define LOCKSTEP_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s, int nofork)
{
	SRunner *sr = srunner_create(s);
	int failed;

	if (nofork)
		srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
