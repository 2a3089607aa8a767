/* The unit tests' shared helpers: running a suite, private temporary
 * directories and bounded waits on descriptors (tests/testutil.h). */
#include "engine.h"
#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int testutil_run(Suite *s, int nofork)
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

const char *testutil_tmp_parent(void)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp || strlen(tmp) > 900)
		return "/tmp";
	return tmp;
}

int testutil_mkdtemp(char *dir, size_t cap, const char *parent, const char *name)
{
	int n = snprintf(dir, cap, "%s/%s.XXXXXX", parent, name);

	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	return mkdtemp(dir) ? 0 : -errno;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int testutil_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 && errno == ENOENT)
		return 0;
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

int testutil_wait_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

void testutil_enter(struct engine_cmd *c, const char *user, const char *firm, const char *token,
		    char side, uint32_t shares, const char *stock, uint32_t price, char display)
{
	struct ouch_enter_order *o = &c->u.enter;

	memset(c, 0, sizeof(*c));
	c->kind = ENGINE_ENTER;
	snprintf(c->user, sizeof(c->user), "%s", user);
	snprintf(c->firm, sizeof(c->firm), "%s", firm);
	snprintf(o->token, sizeof(o->token), "%s", token);
	o->side = side;
	o->shares = shares;
	snprintf(o->stock, sizeof(o->stock), "%s", stock);
	o->price = price;
	o->tif = OUCH_TIF_SYSTEM_HOURS;
	snprintf(o->firm, sizeof(o->firm), "%s", firm);
	o->display = display;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = 'N';
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = ' ';
}
