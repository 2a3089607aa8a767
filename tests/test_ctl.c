/* The control socket's access rules (common/ctl.h, issue 15): the socket
 * file is 0660; a peer that may connect reads STATUS and STATS, only root or
 * the daemon's user changes anything; an unprivileged user holds at most a
 * quarter of the slots and a silent client is dropped within 0.5 s. The
 * peers that are not root are child processes that drop to nobody (65534),
 * so those cases need root (skipped, with a line, otherwise). */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"
#include "testutil.h"

#define NOBODY 65534

static int changes; /* operations that reached the handler, other than reads */

static void handler(void *ctx, const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply)
{
	(void)ctx;
	if (!ctl_op_reads(req->op))
		changes++;
	reply->role = "test";
}

struct fixture {
	char dir[256], path[300];
	struct ev_loop *loop;
	struct ctl_server *srv;
};

static void fixture_open(struct fixture *f)
{
	ck_assert_int_eq(testutil_mkdtemp(f->dir, sizeof(f->dir), testutil_tmp_parent(), "ctl"), 0);
	chmod(f->dir, 0755); /* nobody must reach the socket file's permission check */
	snprintf(f->path, sizeof(f->path), "%s/t.ctl", f->dir);
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_int_eq(ctl_server_open(&f->srv, f->loop, f->path, handler, NULL), 0);
	changes = 0;
}

static void fixture_close(struct fixture *f)
{
	ctl_server_close(f->srv);
	ev_loop_destroy(f->loop);
	testutil_rm_rf(f->dir);
}

/* op's reply error through the socket, or the call's own error. */
static int call(const char *path, int op)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *r = NULL;
	int e;

	req.op = op;
	if ((e = ctl_call(path, &req, &r, 2000)) < 0)
		return e;
	e = r->error;
	lockstep__control_reply__free_unpacked(r, NULL);
	return e;
}

/* Runs fn(path) in a child that became nobody while the server answers;
 * returns the child's exit status. */
static int as_nobody(struct fixture *f, int (*fn)(const char *path))
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
			_exit(100);
		_exit(fn(f->path));
	}
	/* the loop answers while the child calls (libev reaps children on
	 * the default loop only: waitpid here) */
	for (int i = 0; i < 400; i++) {
		int st;

		ev_run(f->loop, EVRUN_NOWAIT);
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 98;
}

START_TEST(socket_mode)
{
	struct fixture f;
	struct stat sb;

	fixture_open(&f);
	ck_assert_int_eq(stat(f.path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0660);
	fixture_close(&f);
}
END_TEST

static int nobody_status(const char *path)
{
	return call(path, LOCKSTEP__CONTROL_REQUEST__OP__STATUS) == -EACCES ? 0 : 1;
}

static int nobody_reads_not_changes(const char *path)
{
	if (call(path, LOCKSTEP__CONTROL_REQUEST__OP__STATUS) != 0 ||
	    call(path, LOCKSTEP__CONTROL_REQUEST__OP__STATS) != 0)
		return 1;
	if (call(path, LOCKSTEP__CONTROL_REQUEST__OP__SNAPSHOT) != -EPERM ||
	    call(path, LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN) != -EPERM ||
	    call(path, LOCKSTEP__CONTROL_REQUEST__OP__LOGLEVEL) != -EPERM ||
	    call(path, LOCKSTEP__CONTROL_REQUEST__OP__RELOAD) != -EPERM)
		return 2;
	return 0;
}

/* Outside the group: no connection at all. In it (the file opened to all,
 * standing for a member of the group): reads, never changes. */
START_TEST(reads_and_changes)
{
	struct fixture f;

	if (geteuid() != 0) {
		printf("test_ctl: not root: the unprivileged peer cases are skipped\n");
		return;
	}
	fixture_open(&f);
	ck_assert_int_eq(as_nobody(&f, nobody_status), 0);
	chmod(f.path, 0666);
	ck_assert_int_eq(as_nobody(&f, nobody_reads_not_changes), 0);
	ck_assert_int_eq(changes, 0);
	fixture_close(&f);
}
END_TEST

/* Connects without speaking, n times; returns how many the server kept
 * open (not closed at once), and waits for those to be closed. */
static int hold_slots(const char *path, int n, int fds[])
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int kept = 0;
	char c;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return -1;
	}
	usleep(200000); /* the server has accepted them by now */
	for (int i = 0; i < n; i++)
		kept += !(testutil_wait_readable(fds[i], 0) == 1 && read(fds[i], &c, 1) == 0);
	return kept;
}

static int nobody_hogs(const char *path)
{
	int fds[8], kept = hold_slots(path, 8, fds);

	if (kept != 4)
		return 10 + (kept < 0 ? 9 : kept);
	for (int i = 0; i < 8; i++) /* silent ones are dropped within 0.5 s */
		if (testutil_wait_readable(fds[i], 1500) != 1)
			return 2;
	return 0;
}

START_TEST(silent_clients_and_slots)
{
	struct fixture f;

	if (geteuid() != 0) {
		printf("test_ctl: not root: the slot cases are skipped\n");
		return;
	}
	fixture_open(&f);
	chmod(f.path, 0666);
	ck_assert_int_eq(as_nobody(&f, nobody_hogs), 0);
	fixture_close(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("access");

	tcase_add_test(tc, socket_mode);
	tcase_add_test(tc, reads_and_changes);
	tcase_add_test(tc, silent_clients_and_slots);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
