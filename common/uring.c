/* io_uring datagram I/O (uring.h): the receive ring (multishot recvmsg over
 * a ring of provided buffers, an eventfd for the daemon's libev loop) and
 * the send ring (linked sendmsg batches). Library code: nothing here logs,
 * nothing allocates after create. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include "clock.h"
#include "prealloc.h"
#include "uring.h"

const char *const uring_io_names[] = { "mmsg", "uring", NULL };

#define URING_BGID 0
/* What the kernel writes before each payload: the recvmsg_out header, the
 * sender's address, one SO_RXQ_OVFL control message. */
#define URING_NAME_LEN ((unsigned)sizeof(struct sockaddr_in))
#define URING_CTRL_LEN ((unsigned)CMSG_SPACE(sizeof(uint32_t)))
#define URING_HEAD (sizeof(struct io_uring_recvmsg_out) + URING_NAME_LEN + URING_CTRL_LEN)

struct uring_sock {
	int fd;
	unsigned tag;
	uint64_t *rxq; /* the caller's SO_RXQ_OVFL high-water mark */
	struct msghdr mh; /* only namelen and controllen matter to the kernel */
	int need_arm; /* its multishot receive ended */
};

struct uring_rx {
	struct io_uring ring;
	int efd;
	struct io_uring_buf_ring *br; /* page-aligned, nbufs entries */
	uint8_t *bufs; /* nbufs * buf_size bytes */
	size_t buf_size;
	unsigned nbufs;
	uint16_t *held; /* buffer ids reaped and not yet given back */
	unsigned n_held;
	struct uring_msg *msgs; /* max_reap views */
	unsigned max_reap;
	struct uring_sock socks[URING_MAX_SOCKETS];
	unsigned n_socks;
	int rearm; /* some receive needs re-arming */
	int cleared; /* the eventfd was read since the last uring_rx_done() */
	struct uring_rx_stats st;
};

/* ---- receive: set-up --------------------------------------------------- */

static int rx_ring_init(struct uring_rx *u)
{
	struct io_uring_params p = { 0 };

	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER;
	/* every buffer can hold a completion, plus each socket's last */
	p.cq_entries = u->nbufs * 2 + URING_MAX_SOCKETS;
	return io_uring_queue_init_params(URING_MAX_SOCKETS * 2, &u->ring, &p);
}

/* The provided-buffer ring, by hand (liburing 2.3 has no
 * io_uring_setup_buf_ring): page-aligned entries, registered, filled. */
static int rx_bufs_init(struct uring_rx *u)
{
	struct io_uring_buf_reg reg = { 0 };
	size_t ring_bytes = (size_t)u->nbufs * sizeof(struct io_uring_buf);
	int r;

	ring_bytes = (ring_bytes + PREALLOC_PAGE - 1) & ~(size_t)(PREALLOC_PAGE - 1);
	u->br = aligned_alloc(PREALLOC_PAGE, ring_bytes);
	if (!u->br)
		return -ENOMEM;
	memset(u->br, 0, ring_bytes);
	reg.ring_addr = (uint64_t)(uintptr_t)u->br;
	reg.ring_entries = u->nbufs;
	reg.bgid = URING_BGID;
	r = io_uring_register_buf_ring(&u->ring, &reg, 0);
	if (r < 0)
		return r;
	io_uring_buf_ring_init(u->br);
	for (unsigned i = 0; i < u->nbufs; i++)
		io_uring_buf_ring_add(u->br, u->bufs + (size_t)i * u->buf_size,
				      (unsigned)u->buf_size, (unsigned short)i,
				      io_uring_buf_ring_mask(u->nbufs), (int)i);
	io_uring_buf_ring_advance(u->br, (int)u->nbufs);
	return 0;
}

static int rx_eventfd_init(struct uring_rx *u)
{
	u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->efd < 0)
		return -errno;
	return io_uring_register_eventfd(&u->ring, u->efd);
}

static int rx_check_config(const struct uring_rx_config *cfg)
{
	if (!cfg || cfg->bufs < 2 || cfg->bufs > 32768 || (cfg->bufs & (cfg->bufs - 1)) ||
	    cfg->payload == 0 || cfg->payload > 65536 || cfg->max_reap == 0)
		return -EINVAL;
	return 0;
}

int uring_rx_create(struct uring_rx **out, const struct uring_rx_config *cfg)
{
	struct uring_rx *u;
	int r = rx_check_config(cfg);

	if (r < 0)
		return r;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->efd = -1;
	u->ring.ring_fd = -1;
	u->nbufs = cfg->bufs;
	u->max_reap = cfg->max_reap;
	/* a multiple of a cache line that is not a power of two, so that the
	 * buffers' headers do not all fall into the same cache sets */
	u->buf_size = (URING_HEAD + cfg->payload + 63) & ~(size_t)63;
	u->bufs = prealloc_zeroed(u->nbufs, u->buf_size);
	u->held = calloc(u->nbufs, sizeof(*u->held));
	u->msgs = calloc(u->max_reap, sizeof(*u->msgs));
	if (!u->bufs || !u->held || !u->msgs) {
		uring_rx_destroy(u);
		return -ENOMEM;
	}
	if ((r = rx_ring_init(u)) < 0 || (r = rx_bufs_init(u)) < 0 ||
	    (r = rx_eventfd_init(u)) < 0) {
		uring_rx_destroy(u);
		return r;
	}
	*out = u;
	return 0;
}

void uring_rx_destroy(struct uring_rx *u)
{
	if (!u)
		return;
	if (u->ring.ring_fd >= 0)
		io_uring_queue_exit(&u->ring); /* ends the receives, frees the registrations */
	if (u->efd >= 0)
		close(u->efd);
	free(u->br);
	free(u->bufs);
	free(u->held);
	free(u->msgs);
	free(u);
}

int uring_rx_fd(const struct uring_rx *u)
{
	return u->efd;
}

/* ---- receive: arming --------------------------------------------------- */

/* Queues socket i's multishot receive (submitted by the caller). */
static int rx_arm(struct uring_rx *u, unsigned i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		int r = io_uring_submit(&u->ring);

		if (r < 0)
			return r;
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_recvmsg_multishot(sqe, u->socks[i].fd, &u->socks[i].mh, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = URING_BGID;
	io_uring_sqe_set_data64(sqe, (uint64_t)i + 1);
	u->socks[i].need_arm = 0;
	return 0;
}

int uring_rx_add(struct uring_rx *u, int fd, unsigned tag, uint64_t *rxq)
{
	struct uring_sock *s;
	int r;

	if (u->n_socks == URING_MAX_SOCKETS)
		return -E2BIG;
	s = &u->socks[u->n_socks];
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->tag = tag;
	s->rxq = rxq;
	s->mh.msg_namelen = URING_NAME_LEN;
	s->mh.msg_controllen = URING_CTRL_LEN;
	r = rx_arm(u, u->n_socks);
	if (r < 0)
		return r;
	u->n_socks++;
	r = io_uring_submit(&u->ring);
	return r < 0 ? r : 0;
}

/* ---- receive: completions ---------------------------------------------- */

/* The SO_RXQ_OVFL count in a received datagram's control message. */
static void rx_read_ctrl(struct uring_sock *s, struct io_uring_recvmsg_out *o)
{
	for (struct cmsghdr *c = io_uring_recvmsg_cmsg_firsthdr(o, &s->mh); c;
	     c = io_uring_recvmsg_cmsg_nexthdr(o, &s->mh, c)) {
		uint32_t v;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL ||
		    c->cmsg_len < CMSG_LEN(sizeof(v)))
			continue;
		memcpy(&v, CMSG_DATA(c), sizeof(v));
		if (s->rxq && v > *s->rxq)
			*s->rxq = v;
	}
}

/* The end of a multishot receive, or an error without a datagram. */
static void rx_ended(struct uring_rx *u, struct uring_sock *s, int res)
{
	if (res == -ENOBUFS)
		u->st.enobufs++;
	else if (res < 0)
		u->st.errors++;
	s->need_arm = 1;
	u->rearm = 1;
}

/* One completion into *m: 1 when it carries a datagram, else 0. */
static int rx_take(struct uring_rx *u, const struct io_uring_cqe *cqe, struct uring_msg *m)
{
	uint64_t idx = io_uring_cqe_get_data64(cqe) - 1;
	struct uring_sock *s;
	struct io_uring_recvmsg_out *o;
	unsigned bid;
	uint8_t *buf;

	if (idx >= u->n_socks)
		return 0;
	s = &u->socks[idx];
	if (!(cqe->flags & IORING_CQE_F_MORE) || cqe->res < 0)
		rx_ended(u, s, cqe->res);
	if (cqe->res < 0 || !(cqe->flags & IORING_CQE_F_BUFFER))
		return 0;
	bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
	u->held[u->n_held++] = (uint16_t)bid;
	buf = u->bufs + (size_t)bid * u->buf_size;
	o = io_uring_recvmsg_validate(buf, cqe->res, &s->mh);
	if (!o || o->namelen < sizeof(struct sockaddr_in)) {
		u->st.errors++;
		return 0;
	}
	if (o->flags & MSG_TRUNC)
		u->st.truncated++;
	if (o->controllen)
		rx_read_ctrl(s, o);
	m->data = io_uring_recvmsg_payload(o, &s->mh);
	m->len = io_uring_recvmsg_payload_length(o, cqe->res, &s->mh);
	m->tag = s->tag;
	m->from = io_uring_recvmsg_name(o);
	u->st.datagrams++;
	return 1;
}

int uring_rx_reap(struct uring_rx *u, unsigned max, const struct uring_msg **msgs)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0, n = 0;
	uint64_t v;

	if (!u->cleared) {
		/* before looking: a completion posted after this signals again */
		if (read(u->efd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			u->st.wakeups++;
		u->cleared = 1;
	}
	if (max > u->max_reap)
		max = u->max_reap;
	io_uring_for_each_cqe(&u->ring, head, cqe) {
		if (n == max)
			break;
		n += (unsigned)rx_take(u, cqe, &u->msgs[n]);
		seen++;
	}
	io_uring_cq_advance(&u->ring, seen);
	*msgs = u->msgs;
	return (int)n;
}

int uring_rx_release(struct uring_rx *u)
{
	int mask = io_uring_buf_ring_mask(u->nbufs), r;

	for (unsigned i = 0; i < u->n_held; i++)
		io_uring_buf_ring_add(u->br, u->bufs + (size_t)u->held[i] * u->buf_size,
				      (unsigned)u->buf_size, u->held[i], mask, (int)i);
	if (u->n_held)
		io_uring_buf_ring_advance(u->br, (int)u->n_held);
	u->n_held = 0;
	if (!u->rearm)
		return 0;
	for (unsigned i = 0; i < u->n_socks; i++) {
		if (!u->socks[i].need_arm)
			continue;
		if ((r = rx_arm(u, i)) < 0)
			return r;
		u->st.rearms++;
	}
	r = io_uring_submit(&u->ring);
	if (r < 0)
		return r;
	u->rearm = 0;
	return 0;
}

int uring_rx_pending(const struct uring_rx *u)
{
	return io_uring_cq_ready(&u->ring) > 0;
}

int uring_rx_done(struct uring_rx *u)
{
	uint64_t one = 1;
	/* a reap that found only the end of a receive (ENOBUFS) returned 0
	 * datagrams, and its caller stopped without a release: re-arm here,
	 * or that socket would never be read again */
	int r = uring_rx_release(u);

	u->cleared = 0;
	if (uring_rx_pending(u))
		(void)!write(u->efd, &one, sizeof(one));
	return r;
}

void uring_rx_stats(const struct uring_rx *u, struct uring_rx_stats *out)
{
	*out = u->st;
}

/* ---- send --------------------------------------------------------------- */

struct uring_tx {
	struct io_uring ring;
	unsigned slots;
};

int uring_tx_create(struct uring_tx **out, unsigned slots)
{
	struct io_uring_params p = { 0 };
	struct uring_tx *t;
	int r;

	if (slots == 0 || slots > 4096)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->slots = slots;
	p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER;
	r = io_uring_queue_init_params(slots, &t->ring, &p);
	if (r < 0) {
		free(t);
		return r;
	}
	*out = t;
	return 0;
}

void uring_tx_destroy(struct uring_tx *t)
{
	if (!t)
		return;
	io_uring_queue_exit(&t->ring);
	free(t);
}

/* Slots [from, count) (at most t->slots) in one linked chain, one io_uring_enter that also
 * waits for their completions (the kernel completes a datagram send
 * inline): how many in a row went from `from`; *err is what stopped the
 * chain (0: nothing). */
static unsigned tx_round(struct uring_tx *t, struct net_batch *b, int fd, unsigned from,
			 unsigned count, int *err)
{
	unsigned n = count - from, ok = 0, first_bad = n, head, seen = 0;
	struct io_uring_cqe *cqe;
	int r;

	*err = 0;
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

		io_uring_prep_sendmsg(sqe, fd, &b->msgs[from + i].msg_hdr, MSG_DONTWAIT);
		io_uring_sqe_set_data64(sqe, i);
		if (i + 1 < n)
			sqe->flags |= IOSQE_IO_LINK;
	}
	do
		r = io_uring_submit_and_wait(&t->ring, n);
	while (r == -EINTR);
	if (r < 0) {
		*err = -r;
		return 0;
	}
	io_uring_for_each_cqe(&t->ring, head, cqe) {
		unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);

		seen++;
		if (cqe->res >= 0 || i >= first_bad)
			continue;
		first_bad = i;
		*err = -cqe->res;
	}
	io_uring_cq_advance(&t->ring, seen);
	ok = first_bad;
	return ok;
}

int uring_tx_send(struct uring_tx *t, struct net_batch *b, int fd, unsigned count,
		  uint64_t wait_ns, uint64_t *waits)
{
	uint64_t deadline = 0;
	unsigned sent = 0;
	int err = 0;

	if (count > b->n)
		return -EINVAL;
	net_batch_send_prepare(b, count);
	while (sent < count) {
		unsigned end = count - sent > t->slots ? sent + t->slots : count;

		sent += tx_round(t, b, fd, sent, end, &err);
		if (sent < count && sent == end && err == 0)
			continue; /* the next chain */
		if (sent == count || (err != EAGAIN && err != ENOBUFS && err != ECANCELED))
			break;
		if (!deadline) {
			deadline = mono_ns() + wait_ns;
			if (waits)
				(*waits)++;
		}
		if (net_send_room_wait(fd, err == ECANCELED ? EAGAIN : err, deadline) < 0)
			break;
	}
	if (sent == 0 && err && err != EAGAIN && err != ENOBUFS && err != ECANCELED)
		return -err;
	return (int)sent;
}
