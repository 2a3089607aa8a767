/* The journals' background syncer (journal_private.h): under
 * JOURNAL_FSYNC_INTERVAL, journal_tick() hands a duplicate of the last
 * segment's descriptor to one thread per process, which calls fdatasync on
 * it, so that the event loop never waits for the disk (an fdatasync in the
 * sequencer's loop cost p99 1.6 ms at 100,000 orders/s). One sync in
 * flight per journal: a tick that finds the last one still running skips.
 * SYNC_THREADS threads take the queue, so that one slow file does not hold
 * the others'.
 * Under JOURNAL_FSYNC_DISK every flush starts one (journal_sync_start) and
 * the thread signals the journal's eventfd when it ends; journal_poll, on
 * the loop, moves the durable seq and starts the next, which covers every
 * batch written meanwhile (group commit). The thread touches only the
 * descriptors and each journal's atomics and eventfd; journal_close waits
 * for its journal's sync before freeing it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "journal_private.h"

#define SYNC_QUEUE 64
/* Syncs of different files run side by side (a gateway syncs its command
 * journal and every login's at once); one journal has one in flight. */
#define SYNC_THREADS 4

struct sync_req {
	int fd;
	struct journal_async *st;
};

static struct {
	pthread_once_t once;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sync_req q[SYNC_QUEUE];
	unsigned head, len;
	int started; /* threads running (0: none could be started) */
} syncer = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
	     .cv = PTHREAD_COND_INITIALIZER };

/* Wakes the loop that watches efd (an eventfd: a full counter is still
 * readable, so a failed write loses nothing). */
static void signal_fd(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, and readable */
	}
}

static void *sync_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct sync_req r;

		pthread_mutex_lock(&syncer.mu);
		while (!syncer.len)
			pthread_cond_wait(&syncer.cv, &syncer.mu);
		r = syncer.q[syncer.head];
		syncer.head = (syncer.head + 1) % SYNC_QUEUE;
		syncer.len--;
		pthread_mutex_unlock(&syncer.mu);
		if (fdatasync(r.fd) < 0)
			atomic_store(&r.st->err, -errno);
		close(r.fd);
		atomic_store(&r.st->inflight, 0);
		if (r.st->efd >= 0)
			signal_fd(r.st->efd);
	}
	return NULL;
}

static void sync_start(void)
{
	pthread_t t;
	pthread_attr_t a;

	if (pthread_attr_init(&a) != 0)
		return;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < SYNC_THREADS; i++)
		syncer.started += pthread_create(&t, &a, sync_main, NULL) == 0;
	pthread_attr_destroy(&a);
}

/* Queues an fdatasync of fd for st: 1, or 0 when the syncer cannot take it
 * (no thread, a full queue): the caller syncs inline. */
static int sync_submit(int fd, struct journal_async *st)
{
	int ok = 0;

	pthread_once(&syncer.once, sync_start);
	if (!syncer.started)
		return 0;
	pthread_mutex_lock(&syncer.mu);
	if (syncer.len < SYNC_QUEUE) {
		syncer.q[(syncer.head + syncer.len) % SYNC_QUEUE] = (struct sync_req){ fd, st };
		syncer.len++;
		atomic_store(&st->inflight, 1);
		ok = 1;
		pthread_cond_signal(&syncer.cv);
	}
	pthread_mutex_unlock(&syncer.mu);
	return ok;
}

int journal_sync_async(struct journal *j)
{
	int err = atomic_exchange(&j->async.err, 0), fd;

	if (err < 0)
		return err; /* the last background sync failed */
	if (!j->unsynced || atomic_load(&j->async.inflight))
		return 0; /* nothing new, or the last one is still at it */
	fd = fcntl(j->wfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0 || !sync_submit(fd, &j->async)) {
		if (fd >= 0)
			close(fd);
		return journal_data_sync(j);
	}
	j->unsynced = 0; /* what is written now is covered by that sync */
	return 0;
}

int journal_sync_start(struct journal *j)
{
	int fd, r;

	if (j->sync_target || j->written <= j->durable)
		return 0; /* one in flight (its end starts the next), or nothing new */
	fd = fcntl(j->wfd, F_DUPFD_CLOEXEC, 0);
	if (fd >= 0 && sync_submit(fd, &j->async)) {
		j->sync_target = j->written;
		j->unsynced = 0;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	j->unsynced = 1;
	r = journal_data_sync(j); /* no thread, or its queue is full */
	if (r == 0)
		signal_fd(j->async.efd);
	return r;
}

int journal_poll(struct journal *j)
{
	uint64_t n, before = j->durable;
	int err, r;

	if (j->opt.fsync != JOURNAL_FSYNC_DISK || j->opt.read_only)
		return 0;
	while (read(j->async.efd, &n, sizeof(n)) > 0) {
		/* drained: one wakeup takes every end so far */
	}
	if (j->sync_target && !atomic_load(&j->async.inflight)) {
		if ((err = atomic_exchange(&j->async.err, 0)) < 0) {
			j->sync_target = 0;
			return err;
		}
		if (j->sync_target > j->durable)
			j->durable = j->sync_target;
		j->sync_target = 0;
	}
	if ((r = journal_sync_start(j)) < 0)
		return r;
	return j->durable > before;
}

int journal_await(struct journal *j, uint64_t seq)
{
	int r;

	if (j->opt.fsync != JOURNAL_FSYNC_DISK || j->opt.read_only || seq > j->written)
		return journal_durable_seq(j) >= seq ? 0 : -EINVAL;
	while (j->durable < seq) {
		struct pollfd p = { .fd = j->async.efd, .events = POLLIN };

		if ((r = journal_sync_start(j)) < 0)
			return r;
		/* bounded by the disk: a sync returns or the machine is gone */
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
		if ((r = journal_poll(j)) < 0)
			return r;
	}
	return 0;
}

void journal_durable_cut(struct journal *j, uint64_t seq)
{
	if (j->durable > seq)
		j->durable = seq;
	if (j->sync_target > seq)
		j->sync_target = seq; /* what it covers after seq was removed */
	if (j->written > seq)
		j->written = seq;
}

void journal_sync_wait(struct journal *j)
{
	/* bounded by the disk: an fdatasync returns or the machine is gone */
	while (atomic_load(&j->async.inflight))
		usleep(1000);
}
