/* The service manager notifications (common/notify.c): $NOTIFY_SOCKET as a
 * path and in the abstract namespace, what is refused, $WATCHDOG_USEC and
 * $WATCHDOG_PID, the readiness rule and STATUS= text, and struct notifier
 * on a real event loop with a real control server: READY=1 only once the
 * node's own STATUS says it has joined, STATUS= on changes, WATCHDOG=1 from
 * the loop, RELOADING=1 ... READY=1 around a reload, STOPPING=1. */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "notify.h"
#include "testutil.h"

static char dir[64];

/* A manager's socket: bound at path (or abstract when it starts with '@'),
 * $NOTIFY_SOCKET set to it. */
static int manager_open(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(sa.sun_path, name);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name) +
			  (name[0] == '@' ? 0 : 1));
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, len), 0);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", name, 1), 0);
	return fd;
}

/* The next message within ms, NUL-terminated into buf; 0 when none came. */
static size_t manager_recv(int fd, char *buf, size_t cap, int ms)
{
	ssize_t n;

	if (!testutil_wait_readable(fd, ms))
		return 0;
	n = recv(fd, buf, cap - 1, 0);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	return (size_t)n;
}

static void setup(void)
{
	ck_assert_int_eq(testutil_mkdtemp(dir, sizeof(dir), "/tmp", "lockstep-notify"), 0);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	notify_close();
}

static void teardown(void)
{
	notify_close();
	ck_assert_int_eq(testutil_rm_rf(dir), 0);
}

START_TEST(no_manager)
{
	ck_assert_int_eq(notify_open(), 0);
	ck_assert_int_eq(notify_enabled(), 0);
	ck_assert_int_eq(notify_send("READY=1", 7), 0);
	ck_assert_int_eq(notify_sendf("STATUS=%d", 1), 0);
	ck_assert_uint_eq(notify_watchdog_usec(), 0);
}
END_TEST

START_TEST(path_socket)
{
	char path[128], buf[NOTIFY_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = manager_open(path);
	ck_assert_int_eq(notify_open(), 1);
	ck_assert_int_eq(notify_open(), 1); /* idempotent */
	ck_assert_int_eq(notify_sendf("READY=1\nSTATUS=%s", "matcher live"), 0);
	ck_assert_uint_eq(manager_recv(fd, buf, sizeof(buf), 1000), 27);
	ck_assert_str_eq(buf, "READY=1\nSTATUS=matcher live");
	close(fd);
	/* The manager gone: an error, not a crash or a block. */
	ck_assert_int_lt(notify_send("WATCHDOG=1", 10), 0);
}
END_TEST

START_TEST(abstract_socket)
{
	char name[64], buf[64];
	int fd;

	snprintf(name, sizeof(name), "@lockstep-notify-test-%d", (int)getpid());
	fd = manager_open(name);
	ck_assert_int_eq(notify_open(), 1);
	ck_assert_int_eq(notify_send("WATCHDOG=1", 10), 0);
	ck_assert_uint_eq(manager_recv(fd, buf, sizeof(buf), 1000), 10);
	ck_assert_str_eq(buf, "WATCHDOG=1");
	close(fd);
}
END_TEST

START_TEST(refused_addresses)
{
	static const struct {
		const char *value;
		int err;
	} cases[] = {
		{ "relative/path", -EAFNOSUPPORT },
		{ "vsock:2:1234", -EAFNOSUPPORT },
		{ "@", -EINVAL },
		{ "/", -EINVAL },
	};
	char longpath[200];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		notify_close();
		setenv("NOTIFY_SOCKET", cases[i].value, 1);
		ck_assert_int_eq(notify_open(), cases[i].err);
		ck_assert_int_eq(notify_enabled(), 0);
		ck_assert_int_eq(notify_send("READY=1", 7), 0);
	}
	notify_close();
	memset(longpath, 'x', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	setenv("NOTIFY_SOCKET", longpath, 1);
	ck_assert_int_eq(notify_open(), -ENAMETOOLONG);
}
END_TEST

START_TEST(watchdog_env)
{
	char path[128], pid[32];
	int fd;

	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = manager_open(path);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());

	setenv("WATCHDOG_USEC", "5000000", 1);
	ck_assert_int_eq(notify_open(), 1);
	ck_assert_uint_eq(notify_watchdog_usec(), 5000000);

	notify_close();
	setenv("WATCHDOG_PID", pid, 1);
	ck_assert_int_eq(notify_open(), 1);
	ck_assert_uint_eq(notify_watchdog_usec(), 5000000);

	notify_close();
	setenv("WATCHDOG_PID", "1", 1); /* meant for another process */
	ck_assert_int_eq(notify_open(), 1);
	ck_assert_uint_eq(notify_watchdog_usec(), 0);

	static const char *const bad[] = { "", "0", "5s", "-1", "99999999999999999999999" };
	unsetenv("WATCHDOG_PID");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		notify_close();
		setenv("WATCHDOG_USEC", bad[i], 1);
		ck_assert_int_eq(notify_open(), 1);
		ck_assert_msg(notify_watchdog_usec() == 0, "WATCHDOG_USEC=%s accepted", bad[i]);
	}
	close(fd);
}
END_TEST

START_TEST(ready_rule)
{
	ck_assert_int_eq(notify_state_ready("sequencer", "primary"), 1);
	ck_assert_int_eq(notify_state_ready("sequencer", "standby"), 1);
	ck_assert_int_eq(notify_state_ready("sequencer", "starting"), 0);
	ck_assert_int_eq(notify_state_ready("sequencer", "stopped"), 0);
	ck_assert_int_eq(notify_state_ready("matcher", "live"), 1);
	ck_assert_int_eq(notify_state_ready("matcher", "catching-up"), 0);
	ck_assert_int_eq(notify_state_ready("matcher", "starting"), 0);
	ck_assert_int_eq(notify_state_ready("gateway", "ready"), 1);
	ck_assert_int_eq(notify_state_ready("gateway", "starting"), 0);
	ck_assert_int_eq(notify_state_ready("gateway", "live"), 0);
	ck_assert_int_eq(notify_state_ready(NULL, "live"), 0);
	ck_assert_int_eq(notify_state_ready("matcher", NULL), 0);
}
END_TEST

START_TEST(status_text)
{
	Lockstep__ControlReply r = LOCKSTEP__CONTROL_REPLY__INIT;
	char buf[NOTIFY_MAX], small[12];

	r.role = "matcher";
	r.state = "live";
	r.term = 3;
	r.seq = 120;
	r.commit = 121;
	r.partition = 2;
	ck_assert_uint_eq(notify_format_status(buf, sizeof(buf), &r), strlen(buf));
	ck_assert_str_eq(buf, "matcher live term=3 seq=120 commit=121 partition=2");
	r.role = "gateway";
	r.state = "ready";
	r.ouch = "127.0.0.1:15000";
	notify_format_status(buf, sizeof(buf), &r);
	ck_assert_str_eq(buf, "gateway ready term=3 seq=120 commit=121 ouch=127.0.0.1:15000");
	ck_assert_uint_eq(notify_format_status(small, sizeof(small), &r), sizeof(small) - 1);
	ck_assert_str_eq(small, "gateway rea");
	r.day = 2;
	r.market = "closed";
	notify_format_status(buf, sizeof(buf), &r);
	ck_assert_str_eq(buf,
			 "gateway ready term=3 seq=120 commit=121 ouch=127.0.0.1:15000 day=2 market=closed");
}
END_TEST

/* ---- struct notifier on a loop, against a control server --------------- */

static struct {
	const char *state;
	uint64_t seq;
	int reloads;
	const char *reload_msg;
	int reload_err;
} node = { "starting", 0, 0, "", 0 };

static void on_ctl(void *ctx, const Lockstep__ControlRequest *req, Lockstep__ControlReply *r)
{
	(void)ctx;
	r->name = "m1";
	r->role = "matcher";
	r->state = (char *)node.state;
	r->term = 1;
	r->seq = node.seq;
	r->commit = node.seq;
	if (req->op == LOCKSTEP__CONTROL_REQUEST__OP__RELOAD) {
		node.reloads++;
		r->error = node.reload_err;
		r->message = (char *)node.reload_msg;
	}
}

struct script {
	int fd; /* the manager's socket */
	int step, stop_step;
	int live, reloads;
	char log[16][NOTIFY_MAX]; /* every message but WATCHDOG=1 */
	int n, watchdogs;
	struct notifier *nt;
	ev_timer t;
};

static void collect(struct script *s)
{
	char buf[NOTIFY_MAX];

	while (manager_recv(s->fd, buf, sizeof(buf), 0) > 0) {
		if (strcmp(buf, "WATCHDOG=1") == 0)
			s->watchdogs++;
		else if (s->n < 16)
			strcpy(s->log[s->n++], buf);
	}
}

/* Every 50 ms: reads what the manager got and moves the node along, each
 * step once the manager has heard the previous one (at most 10 s). */
static void on_step(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct script *s = w->data;

	(void)revents;
	collect(s);
	s->step++;
	if (s->step == 4) /* still starting, but progressing */
		node.seq = 10;
	if (!s->live && s->n >= 2) { /* the progress was heard: caught up */
		node.state = "live";
		s->live = 1;
	}
	if (s->reloads == 0 && s->n >= 3) { /* READY=1 heard: SIGHUP */
		node.reload_msg = "log_level debug";
		ck_assert_int_eq(notifier_reload(s->nt), 0);
		ck_assert_int_eq(node.reloads, 1);
		s->reloads = 1;
	} else if (s->reloads == 1 && s->n >= 5) { /* a reload that fails */
		node.reload_msg = "bad.conf:3: [node] log_level: \"loud\" is not one of ...";
		node.reload_err = -EINVAL;
		ck_assert_int_eq(notifier_reload(s->nt), -EINVAL);
		s->reloads = 2;
	} else if (s->reloads == 2 && s->n >= 7 && !s->stop_step) {
		notifier_stopping(s->nt);
		notifier_stopping(s->nt); /* once */
		s->stop_step = s->step;
	}
	if ((s->stop_step && s->step >= s->stop_step + 4) || s->step >= 200)
		ev_break(loop, EVBREAK_ALL);
}

START_TEST(notifier_lifecycle)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct ctl_server *srv;
	struct notifier n;
	struct script s = { 0 };
	char path[128], sock[128];

	snprintf(path, sizeof(path), "%s/notify", dir);
	snprintf(sock, sizeof(sock), "%s/m1.ctl", dir);
	s.fd = manager_open(path);
	setenv("WATCHDOG_USEC", "200000", 1); /* a ping every 100 ms */
	ck_assert_int_eq(ctl_server_open(&srv, loop, sock, on_ctl, NULL), 0);
	ck_assert_int_eq(notifier_start(&n, loop), 1);
	s.nt = &n;
	ev_timer_init(&s.t, on_step, 0.05, 0.05);
	s.t.data = &s;
	ev_timer_start(loop, &s.t);
	ev_run(loop, 0);
	notifier_stop(&n);
	notifier_stop(&n);
	collect(&s);
	ctl_server_close(srv);
	ev_loop_destroy(loop);

	/* starting (a state: at once), the progress a second later (positions:
	 * at most once a second; with more time for the start-up), READY=1 with
	 * the status, a reload (RELOADING=1, then READY=1 again since the node
	 * was ready), a failed one, perhaps the status back, STOPPING=1. */
	/* The status lines a poll may put back between the others (after a
	 * reload) are set aside; the rest come in this order. */
	static const char live[] = "STATUS=matcher live term=1 seq=10 commit=10 partition=0";
	const char *m[16];
	int k = 0;

	for (int i = 0; i < s.n; i++)
		if (i < 3 || strcmp(s.log[i], live) != 0)
			m[k++] = s.log[i];
	ck_assert_int_eq(k, 8);
	ck_assert_str_eq(m[0], "STATUS=matcher starting term=1 seq=0 commit=0 partition=0");
	ck_assert_str_eq(m[1], "STATUS=matcher starting term=1 seq=10 commit=10 partition=0\n"
			       "EXTEND_TIMEOUT_USEC=30000000");
	ck_assert_str_eq(m[2], "READY=1\nSTATUS=matcher live term=1 seq=10 commit=10 partition=0");
	ck_assert_msg(strncmp(m[3], "RELOADING=1\nMONOTONIC_USEC=", 27) == 0, "%s", m[3]);
	ck_assert_msg(strstr(m[3], "\nSTATUS=reloading") != NULL, "%s", m[3]);
	ck_assert_str_eq(m[4], "READY=1\nSTATUS=reloaded: log_level debug");
	ck_assert_msg(strncmp(m[5], "RELOADING=1\n", 12) == 0, "%s", m[5]);
	ck_assert_str_eq(m[6], "READY=1\nSTATUS=reload failed: bad.conf:3: [node] log_level: "
			       "\"loud\" is not one of ...");
	ck_assert_str_eq(m[7], "STOPPING=1\nSTATUS=stopping (matcher live term=1 seq=10 "
			       "commit=10 partition=0)");
	/* Over a second of loop at a ping per 100 ms: not asserting a rate,
	 * only that the loop fed it. */
	ck_assert_int_gt(s.watchdogs, 2);
	close(s.fd);
}
END_TEST

/* The timers never keep a loop alive: one with nothing else returns. */
START_TEST(notifier_does_not_hold_the_loop)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct notifier n;
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = manager_open(path);
	setenv("WATCHDOG_USEC", "1000000", 1);
	ck_assert_int_eq(notifier_start(&n, loop), 1);
	ev_run(loop, 0); /* returns at once */
	notifier_stop(&n);
	ev_loop_destroy(loop);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("notify");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, no_manager);
	tcase_add_test(tc, path_socket);
	tcase_add_test(tc, abstract_socket);
	tcase_add_test(tc, refused_addresses);
	tcase_add_test(tc, watchdog_env);
	tcase_add_test(tc, ready_rule);
	tcase_add_test(tc, status_text);
	tcase_add_test(tc, notifier_lifecycle);
	tcase_add_test(tc, notifier_does_not_hold_the_loop);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
