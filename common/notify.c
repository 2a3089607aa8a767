/* sd_notify(3)'s protocol written directly (notify.h says why). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "notify.h"

#define NOTIFY_EXTEND_USEC 30000000ull /* start-up timeout extension while progressing */

/* One per process: there is one service manager to talk to. */
static struct {
	int opened; /* notify_open() ran */
	int fd; /* -1: no manager */
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t watchdog_usec;
} nt = { .fd = -1 };

static uint64_t parse_u64(const char *s, int *ok)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	*ok = s[0] >= '0' && s[0] <= '9' && *end == '\0' && errno == 0;
	return v;
}

static void read_watchdog(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	uint64_t v;
	int ok;

	nt.watchdog_usec = 0;
	if (!usec)
		return;
	v = parse_u64(usec, &ok);
	if (!ok || v == 0)
		return;
	if (pid) {
		uint64_t p = parse_u64(pid, &ok);

		if (!ok || p != (uint64_t)getpid())
			return; /* meant for another process (our parent, say) */
	}
	nt.watchdog_usec = v;
}

int notify_open(void)
{
	const char *path;
	size_t len;
	int fd;

	if (nt.opened)
		return nt.fd >= 0;
	nt.opened = 1;
	path = getenv("NOTIFY_SOCKET");
	if (!path || !path[0])
		return 0;
	if (path[0] != '/' && path[0] != '@')
		return -EAFNOSUPPORT; /* vsock: and the like: not from systemd 252 */
	len = strlen(path);
	if (len < 2)
		return -EINVAL;
	if (len >= sizeof(nt.addr.sun_path))
		return -ENAMETOOLONG;
	memset(&nt.addr, 0, sizeof(nt.addr));
	nt.addr.sun_family = AF_UNIX;
	memcpy(nt.addr.sun_path, path, len);
	if (path[0] == '@') {
		nt.addr.sun_path[0] = '\0'; /* abstract: the name is exactly len bytes */
		nt.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		nt.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	nt.fd = fd;
	read_watchdog();
	return 1;
}

void notify_close(void)
{
	if (nt.fd >= 0)
		close(nt.fd);
	nt.fd = -1;
	nt.opened = 0;
	nt.watchdog_usec = 0;
}

int notify_enabled(void)
{
	return nt.fd >= 0;
}

uint64_t notify_watchdog_usec(void)
{
	return nt.fd >= 0 ? nt.watchdog_usec : 0;
}

int notify_send(const char *msg, size_t len)
{
	ssize_t n;

	if (nt.fd < 0)
		return 0;
	do
		n = sendto(nt.fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT,
			   (const struct sockaddr *)&nt.addr, nt.addr_len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return 0;
}

int notify_sendf(const char *fmt, ...)
{
	char buf[NOTIFY_MAX];
	va_list ap;
	int n;

	if (nt.fd < 0)
		return 0;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	return notify_send(buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

int notify_state_ready(const char *role, const char *state)
{
	static const char *const ready[][2] = {
		{ "sequencer", "primary" }, { "sequencer", "standby" }, { "sequencer", "follower" },
		{ "matcher", "live" },	    { "gateway", "ready" },	    { "recorder", "live" },
	};

	if (!role || !state)
		return 0;
	for (size_t i = 0; i < sizeof(ready) / sizeof(ready[0]); i++)
		if (strcmp(role, ready[i][0]) == 0 && strcmp(state, ready[i][1]) == 0)
			return 1;
	return 0;
}

size_t notify_format_status(char *out, size_t cap, const Lockstep__ControlReply *r)
{
	size_t len;
	int n;

	if (cap == 0)
		return 0;
	n = snprintf(out, cap, "%s %s term=%llu seq=%llu commit=%llu", r->role ? r->role : "?",
		     r->state ? r->state : "?", (unsigned long long)r->term,
		     (unsigned long long)r->seq, (unsigned long long)r->commit);
	len = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
	if (r->role && strcmp(r->role, "matcher") == 0 && len < cap) {
		n = snprintf(out + len, cap - len, " partition=%u", r->partition);
		len += n < 0 ? 0 : (size_t)n < cap - len ? (size_t)n : cap - len - 1;
	}
	if (r->ouch && r->ouch[0] && len < cap) {
		n = snprintf(out + len, cap - len, " ouch=%s", r->ouch);
		len += n < 0 ? 0 : (size_t)n < cap - len ? (size_t)n : cap - len - 1;
	}
	if (r->disk && r->disk[0] && strcmp(r->disk, "ok") != 0 && len < cap) {
		n = snprintf(out + len, cap - len, " disk=%s", r->disk);
		len += n < 0 ? 0 : (size_t)n < cap - len ? (size_t)n : cap - len - 1;
	}
	/* the trading day, from a node that keeps one */
	if (r->market && r->market[0] && len < cap) {
		n = snprintf(out + len, cap - len, " day=%u market=%s", r->day, r->market);
		len += n < 0 ? 0 : (size_t)n < cap - len ? (size_t)n : cap - len - 1;
	}
	return len;
}

/* ---- the event loop side ------------------------------------------------ */

#define NOTIFIER_OF(w, member) \
	((struct notifier *)((char *)(w) - offsetof(struct notifier, member)))

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	notify_send("WATCHDOG=1", 10);
}

static void on_status(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct notifier *n = NOTIFIER_OF(w, status);
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply rep = LOCKSTEP__CONTROL_REPLY__INIT;
	char text[NOTIFY_MAX - 64];
	ev_tstamp now = ev_now(loop);
	int state_changed, progress;

	(void)revents;
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STATUS;
	if (n->stopping || ctl_self_call(&req, &rep) < 0)
		return;
	notify_format_status(text, sizeof(text), &rep);
	if (!n->ready && notify_state_ready(rep.role, rep.state)) {
		if (notify_sendf("READY=1\nSTATUS=%s", text) < 0)
			return; /* the next poll tries again */
		n->ready = 1;
		snprintf(n->last, sizeof(n->last), "%s", text);
		n->last_sent = now;
		w->repeat = 1.0;
		ev_timer_again(loop, w);
		return;
	}
	if (!n->resend && strcmp(text, n->last) == 0)
		return;
	/* The state word is what follows the role: a change of it goes out at
	 * once, a change of positions at most once a second. */
	state_changed = n->resend || strncmp(text, n->last, strcspn(text, "=")) != 0;
	if (!state_changed && now - n->last_sent < 1.0)
		return;
	progress = !n->ready && rep.seq > n->last_seq;
	/* Still starting but moving (a matcher catching up): give it time. */
	if (progress ? notify_sendf("STATUS=%s\nEXTEND_TIMEOUT_USEC=%llu", text,
				    NOTIFY_EXTEND_USEC) < 0
		     : notify_sendf("STATUS=%s", text) < 0)
		return;
	snprintf(n->last, sizeof(n->last), "%s", text);
	n->last_sent = now;
	n->last_seq = rep.seq;
	n->resend = 0;
}

int notifier_start(struct notifier *n, struct ev_loop *loop)
{
	uint64_t usec;
	int r;

	memset(n, 0, sizeof(*n));
	n->loop = loop;
	r = notify_open();
	if (r <= 0)
		return r;
	usec = notify_watchdog_usec();
	if (usec) {
		ev_timer_init(&n->watchdog, on_watchdog, 0., (double)usec / 2e6);
		ev_timer_start(loop, &n->watchdog);
		ev_unref(loop); /* the timers never keep the loop alive */
	}
	ev_timer_init(&n->status, on_status, 0., 0.1);
	ev_timer_start(loop, &n->status);
	ev_unref(loop);
	n->started = 1;
	return r;
}

static void stop_timer(struct notifier *n, ev_timer *w)
{
	if (!ev_is_active(w))
		return;
	ev_ref(n->loop);
	ev_timer_stop(n->loop, w);
}

void notifier_stopping(struct notifier *n)
{
	if (!n->started || n->stopping)
		return;
	n->stopping = 1;
	stop_timer(n, &n->status);
	notify_sendf("STOPPING=1\nSTATUS=stopping (%s)", n->last[0] ? n->last : "not ready");
}

int notifier_reload(struct notifier *n)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply rep = LOCKSTEP__CONTROL_REPLY__INIT;
	int r;

	if (n->started)
		notify_sendf("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
			     (unsigned long long)(mono_ns() / 1000u));
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__RELOAD;
	r = ctl_self_call(&req, &rep);
	if (r == 0)
		r = rep.error;
	if (n->started) {
		notify_sendf("%sSTATUS=%s: %s", n->ready ? "READY=1\n" : "",
			     r < 0 ? "reload failed" : "reloaded",
			     rep.message && rep.message[0] ? rep.message : strerror(-r));
		n->resend = 1; /* the next poll puts the node's status back */
	}
	return r;
}

void notifier_stop(struct notifier *n)
{
	if (!n->started)
		return;
	stop_timer(n, &n->watchdog);
	stop_timer(n, &n->status);
	n->started = 0;
}
