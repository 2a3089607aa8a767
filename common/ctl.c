/* The control socket: server and client (ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"

#define CTL_MAX_CLIENTS 16
#define CTL_CLIENT_TIMEOUT 0.5 /* seconds a client may take to send its request */
/* Slots one unprivileged user may hold at once: a local process of the
 * group cannot take them all, and a privileged caller (root, the daemon's
 * own user) gets one by closing the oldest unprivileged client. */
#define CTL_USER_SLOTS (CTL_MAX_CLIENTS / 4)

struct ctl_client {
	ev_io io;
	ev_timer timer;
	struct ctl_server *srv;
	int fd;
	uid_t uid; /* the peer's (SO_PEERCRED) */
	int privileged; /* root or the daemon's own user: may change things */
	uint64_t since; /* accept order: the oldest unprivileged one goes first */
	uint32_t want; /* request length, once the prefix is in */
	uint32_t have;
	uint8_t *buf;
};

struct ctl_server {
	struct ev_loop *loop;
	ev_io io;
	int fd;
	char path[PATH_MAX]; /* for unlink() at close */
	ctl_handler_fn fn;
	void *ctx;
	struct ctl_client clients[CTL_MAX_CLIENTS];
	uint64_t accepted;
};

static struct ctl_server *self_server; /* the last one opened: ctl_self_call() */

static void client_close(struct ctl_client *c)
{
	ev_io_stop(c->srv->loop, &c->io);
	ev_timer_stop(c->srv->loop, &c->timer);
	close(c->fd);
	free(c->buf);
	c->buf = NULL;
	c->fd = -1;
}

/* Writes all of buf to a non-blocking socket, waiting at most timeout_ms. */
static int write_all(int fd, const uint8_t *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000ull;

	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		uint64_t now = mono_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
	}
	return 0;
}

static void client_answer(struct ctl_client *c)
{
	Lockstep__ControlRequest *req;
	Lockstep__ControlReply reply = LOCKSTEP__CONTROL_REPLY__INIT;
	uint8_t *out;
	size_t len;

	req = lockstep__control_request__unpack(NULL, c->want, c->buf + 4);
	if (!req) {
		reply.error = -EBADMSG;
		reply.message = "malformed control request";
	} else if (!ctl_op_reads(req->op) && !c->privileged) {
		reply.error = -EPERM;
		reply.message = "reading status and stats needs the daemon's group; changing "
				"anything needs its user or root";
	} else {
		c->srv->fn(c->srv->ctx, req, &reply);
	}
	len = lockstep__control_reply__get_packed_size(&reply);
	out = malloc(len + 4);
	if (out) {
		out[0] = (uint8_t)(len >> 24);
		out[1] = (uint8_t)(len >> 16);
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		lockstep__control_reply__pack(&reply, out + 4);
		write_all(c->fd, out, len + 4, 500);
		free(out);
	}
	if (req)
		lockstep__control_request__free_unpacked(req, NULL);
	client_close(c);
}

static void on_client(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_client *c = w->data;
	size_t room = c->want ? c->want + 4 - c->have : 4 - c->have;
	ssize_t n = read(c->fd, c->buf + c->have, room);

	(void)loop;
	(void)revents;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c);
		return;
	}
	c->have += (uint32_t)n;
	if (!c->want && c->have == 4) {
		uint32_t len = (uint32_t)c->buf[0] << 24 | (uint32_t)c->buf[1] << 16 |
			       (uint32_t)c->buf[2] << 8 | c->buf[3];
		uint8_t *nb;

		if (len > CTL_MAX_MESSAGE || !(nb = realloc(c->buf, (size_t)len + 4))) {
			client_close(c);
			return;
		}
		c->buf = nb;
		c->want = len;
	}
	if (c->have == 4 + c->want && (c->want || c->have == 4))
		client_answer(c);
}

static void on_client_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	client_close(w->data);
}

int ctl_op_reads(int op)
{
	return op == LOCKSTEP__CONTROL_REQUEST__OP__STATUS ||
	       op == LOCKSTEP__CONTROL_REQUEST__OP__STATS;
}

/* A free slot for a peer of uid (privileged or not), or NULL: an
 * unprivileged user past CTL_USER_SLOTS gets none; with every slot taken, a
 * privileged peer gets the oldest unprivileged client's. */
static struct ctl_client *client_slot(struct ctl_server *s, uid_t uid, int privileged)
{
	struct ctl_client *free_slot = NULL, *oldest = NULL;
	unsigned same = 0;

	for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
		struct ctl_client *c = &s->clients[i];

		if (c->fd < 0) {
			free_slot = free_slot ? free_slot : c;
			continue;
		}
		same += c->uid == uid;
		if (!c->privileged && (!oldest || c->since < oldest->since))
			oldest = c;
	}
	if (!privileged && same >= CTL_USER_SLOTS)
		return NULL;
	if (!free_slot && privileged && oldest) {
		client_close(oldest);
		free_slot = oldest;
	}
	return free_slot;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_server *s = w->data;
	int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct ctl_client *c;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	int privileged;

	(void)revents;
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		close(fd);
		return;
	}
	privileged = cr.uid == 0 || cr.uid == geteuid();
	c = client_slot(s, cr.uid, privileged);
	if (!c || !(c->buf = malloc(4))) {
		close(fd); /* too many at once: the client retries */
		return;
	}
	c->srv = s;
	c->fd = fd;
	c->uid = cr.uid;
	c->privileged = privileged;
	c->since = ++s->accepted;
	c->want = c->have = 0;
	ev_io_init(&c->io, on_client, fd, EV_READ);
	c->io.data = c;
	ev_timer_init(&c->timer, on_client_timeout, CTL_CLIENT_TIMEOUT, 0);
	c->timer.data = c;
	ev_io_start(loop, &c->io);
	ev_timer_start(loop, &c->timer);
}

/* The address of the socket at `path`. A path longer than sun_path holds
 * is reached through its directory: *dirfd is opened on it (O_PATH) and the
 * address is /proc/self/fd/N/NAME, which the kernel resolves at bind() and
 * connect(); the caller closes *dirfd (-1 when not opened) afterwards.
 * -ENAMETOOLONG when even the file name does not fit. */
static int unix_addr(const char *path, struct sockaddr_un *sa, int *dirfd)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dirfd = -1;
	if (strlen(path) < sizeof(sa->sun_path)) {
		strcpy(sa->sun_path, path);
		return 0;
	}
	if (!slash || (size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*dirfd = open(dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return -errno;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dirfd, slash + 1);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path)) {
		close(*dirfd);
		*dirfd = -1;
		return -ENAMETOOLONG;
	}
	return 0;
}

int ctl_server_open(struct ctl_server **out, struct ev_loop *loop, const char *path,
		    ctl_handler_fn fn, void *ctx)
{
	struct sockaddr_un sa;
	struct ctl_server *s;
	int err, dirfd;

	if (strlen(path) >= sizeof(s->path))
		return -ENAMETOOLONG;
	if ((err = unix_addr(path, &sa, &dirfd)) < 0)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s) {
		err = -ENOMEM;
		goto out_dir;
	}
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		err = -errno;
		goto out_free;
	}
	unlink(path);
	/* 0660 before anyone may connect (listen): the daemon's user and
	 * group (lockstep under the units). A socket file is created 0777 less
	 * the umask; chmod, not umask, which is the whole process's. */
	if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0660) < 0 ||
	    listen(s->fd, 16) < 0) {
		err = -errno;
		goto out_close;
	}
	if (dirfd >= 0)
		close(dirfd);
	strcpy(s->path, path);
	s->loop = loop;
	s->fn = fn;
	s->ctx = ctx;
	for (int i = 0; i < CTL_MAX_CLIENTS; i++)
		s->clients[i].fd = -1;
	ev_io_init(&s->io, on_accept, s->fd, EV_READ);
	s->io.data = s;
	ev_io_start(loop, &s->io);
	self_server = s;
	*out = s;
	return 0;

out_close:
	close(s->fd);
out_free:
	free(s);
out_dir:
	if (dirfd >= 0)
		close(dirfd);
	return err;
}

void ctl_server_close(struct ctl_server *s)
{
	if (!s)
		return;
	if (self_server == s)
		self_server = NULL;
	for (int i = 0; i < CTL_MAX_CLIENTS; i++)
		if (s->clients[i].fd >= 0)
			client_close(&s->clients[i]);
	ev_io_stop(s->loop, &s->io);
	close(s->fd);
	unlink(s->path);
	free(s);
}

int ctl_self_call(const Lockstep__ControlRequest *req, Lockstep__ControlReply *reply)
{
	if (!self_server)
		return -ENOTCONN;
	self_server->fn(self_server->ctx, req, reply);
	return 0;
}

/* Reads exactly len bytes before the deadline. */
static int read_all(int fd, uint8_t *buf, size_t len, uint64_t deadline)
{
	while (len > 0) {
		uint64_t now = mono_ns();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1) < 0 && errno != EINTR)
			return -errno;
		n = read(fd, buf, len);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int ctl_call(const char *path, const Lockstep__ControlRequest *req, Lockstep__ControlReply **reply,
	     int timeout_ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct sockaddr_un sa;
	uint8_t hdr[4], *buf;
	size_t len;
	uint32_t rlen;
	int fd, err, dirfd;

	if ((err = unix_addr(path, &sa, &dirfd)) < 0)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		if (dirfd >= 0)
			close(dirfd);
		return err;
	}
	err = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	if (dirfd >= 0)
		close(dirfd);
	if (err < 0)
		goto out_close;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	len = lockstep__control_request__get_packed_size(req);
	buf = malloc(len + 4);
	if (!buf) {
		err = -ENOMEM;
		goto out_close;
	}
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	lockstep__control_request__pack(req, buf + 4);
	err = write_all(fd, buf, len + 4, timeout_ms);
	free(buf);
	if (err < 0)
		goto out_close;
	if ((err = read_all(fd, hdr, 4, deadline)) < 0)
		goto out_close;
	rlen = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
	if (rlen > CTL_MAX_MESSAGE) {
		err = -EBADMSG;
		goto out_close;
	}
	buf = malloc(rlen ? rlen : 1);
	if (!buf) {
		err = -ENOMEM;
		goto out_close;
	}
	if ((err = read_all(fd, buf, rlen, deadline)) == 0) {
		*reply = lockstep__control_reply__unpack(NULL, rlen, buf);
		if (!*reply)
			err = -EBADMSG;
	}
	free(buf);
out_close:
	close(fd);
	return err;
}
