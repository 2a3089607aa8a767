/* The journals' background syncer (journal_private.h): a thread of its own
 * per journal (under JOURNAL_FSYNC_INTERVAL and JOURNAL_FSYNC_DISK), so
 * that the event loop never waits for the disk (an fdatasync in the
 * sequencer's loop cost p99 1.6 ms at 100,000 orders/s).
 *
 * The syncer follows the writer: the loop writes records, then stores how
 * far it wrote (`want`, a seq) and, if the thread is idle, wakes it on its
 * eventfd `go`; the thread calls fdatasync on its own duplicate of the last
 * segment's descriptor while `want` is ahead of `done`, back to back,
 * storing `done` and signalling the journal's eventfd `efd` after each, so
 * the next sync starts as soon as the last ends, covering every batch
 * written meanwhile (group commit), with no round trip through the loop.
 * Under load the thread is nearly always syncing, so the loop's flushes
 * cost it no system call: `idle` is stored before the thread looks at
 * `want` a last time and blocks, and `want` before the loop looks at
 * `idle` (sequentially consistent, so one of the two sees the other's
 * store and no wakeup is lost). Under INTERVAL
 * journal_tick() moves `want` at most every interval; under DISK every
 * flush does, and journal_poll (or the next flush) takes `done` into the
 * durable seq.
 *
 * Nothing in the loop's path takes a lock. The thread syncs under a mutex
 * of its journal's that the loop takes only to change the descriptor (a new
 * segment, a cut) or to cut `done` back (a truncation): between two syncs.
 * (A queue under a mutex shared by all the journals of a process cost the
 * gateway's loop futex waits of up to 4.5 ms on two busy cores, a syncer
 * preempted while it held the lock.) journal_close stops and joins it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "journal_private.h"

/* Wakes whoever reads efd (an eventfd: a full counter is still readable,
 * so a failed write loses nothing). */
static void signal_fd(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, and readable */
	}
}

/* The thread: woken on `go`, it syncs while the loop wants more than is
 * done, back to back, under mu (so that the loop can change sfd or cut
 * `done` only between two syncs), and signals efd after each. It blocks on
 * `go` again only once idle (see above), or after a failed sync, until the
 * loop's retry: `idle` is stored before the error, so that the loop, which
 * retries once it has taken the error, sees it and signals. */
static void *sync_main(void *arg)
{
	struct journal_async *a = arg;
	int wait = 1;

	(void)pthread_setname_np(pthread_self(), "journal-sync"); /* for ps and /proc */
	for (;;) {
		uint64_t n, t;

		if (wait && read(a->go, &n, sizeof(n)) < 0 && errno != EAGAIN && errno != EINTR)
			break;
		atomic_store(&a->idle, 0);
		wait = 0;
		pthread_mutex_lock(&a->mu);
		while (!atomic_load(&a->stop) && (t = atomic_load(&a->want)) > atomic_load(&a->done)) {
			if (a->sfd < 0 || fdatasync(a->sfd) < 0) {
				atomic_store(&a->idle, 1);
				wait = 1;
				atomic_store(&a->err, a->sfd < 0 ? -EBADF : -errno);
				/* the loop hears of it at once (journal_poll), and its
				 * next journal_sync_start kicks a retry */
				if (a->efd >= 0)
					signal_fd(a->efd);
				break;
			}
			atomic_store(&a->done, t);
			if (a->efd >= 0)
				signal_fd(a->efd);
		}
		pthread_mutex_unlock(&a->mu);
		if (atomic_load(&a->stop))
			break;
		if (!wait) { /* idle, unless the loop wanted more meanwhile */
			atomic_store(&a->idle, 1);
			wait = atomic_load(&a->want) <= atomic_load(&a->done);
		}
	}
	return NULL;
}

int journal_sync_init(struct journal *j)
{
	struct journal_async *a = &j->async;

	atomic_store(&a->want, j->written);
	atomic_store(&a->done, j->written);
	a->sfd = -1;
	if (pthread_mutex_init(&a->mu, NULL) != 0)
		return -ENOMEM;
	a->mu_made = 1;
	journal_sync_fd_set(j);
	a->go = eventfd(0, EFD_CLOEXEC);
	if (a->go < 0)
		return -errno;
	atomic_store(&a->idle, 1);
	if (pthread_create(&a->thread, NULL, sync_main, a) == 0)
		a->started = 1; /* else every sync is inline */
	return 0;
}

void journal_sync_fini(struct journal *j)
{
	struct journal_async *a = &j->async;

	if (a->started) { /* the sync under way ends first */
		atomic_store(&a->stop, 1);
		signal_fd(a->go);
		pthread_join(a->thread, NULL);
		a->started = 0;
	}
	if (a->go >= 0)
		close(a->go);
	a->go = -1;
	if (a->sfd >= 0)
		close(a->sfd);
	a->sfd = -1;
	if (a->mu_made)
		pthread_mutex_destroy(&a->mu);
	a->mu_made = 0;
}

void journal_sync_fd_set(struct journal *j)
{
	struct journal_async *a = &j->async;

	if (!a->mu_made)
		return;
	pthread_mutex_lock(&a->mu); /* waits for a sync under way (a roll, a cut: rare) */
	if (a->sfd >= 0)
		close(a->sfd);
	a->sfd = j->wfd >= 0 ? fcntl(j->wfd, F_DUPFD_CLOEXEC, 0) : -1;
	pthread_mutex_unlock(&a->mu);
}

/* The thread's progress into the loop's view; 0, or the error of a sync
 * that failed (once). */
static int sync_pull(struct journal *j)
{
	int err = atomic_exchange(&j->async.err, 0);
	uint64_t done = atomic_load(&j->async.done);

	if (done > j->durable)
		j->durable = done;
	if (err)
		j->async.retry = 1; /* what it was asked for is still wanted */
	return err;
}

/* Asks the thread for everything written; inline when there is no thread.
 * 0 or -errno. */
static int sync_push(struct journal *j)
{
	int r;

	if (j->written <= atomic_load(&j->async.want) && !j->async.retry)
		return 0;
	j->async.retry = 0;
	if (j->async.started) {
		atomic_store(&j->async.want, j->written);
		if (atomic_load(&j->async.idle))
			signal_fd(j->async.go);
		j->unsynced = 0;
		return 0;
	}
	j->unsynced = 1;
	r = journal_data_sync(j);
	if (r == 0) {
		atomic_store(&j->async.want, j->written);
		atomic_store(&j->async.done, j->written);
		if (j->async.efd >= 0)
			signal_fd(j->async.efd);
	}
	return r;
}

int journal_sync_start(struct journal *j)
{
	int r = sync_pull(j);

	return r < 0 ? r : sync_push(j);
}

int journal_poll(struct journal *j)
{
	uint64_t n;
	int r;

	if (j->opt.fsync != JOURNAL_FSYNC_DISK || j->opt.read_only)
		return 0;
	/* one read takes the counter, every end so far (not a second read
	 * to find it empty: a system call per poll) */
	if (read(j->async.efd, &n, sizeof(n)) < 0) {
		/* EAGAIN: nothing new signalled; `done` is read anyway */
	}
	if ((r = journal_sync_start(j)) < 0)
		return r;
	if (j->durable <= j->polled)
		return 0;
	j->polled = j->durable;
	return 1;
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
		if (j->durable >= seq)
			break;
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
	struct journal_async *a = &j->async;

	if (j->durable > seq)
		j->durable = seq;
	if (j->written > seq)
		j->written = seq;
	if (j->polled > seq)
		j->polled = seq;
	if (!a->mu_made)
		return;
	/* between two syncs: one under way stores its `done` first */
	pthread_mutex_lock(&a->mu);
	if (atomic_load(&a->done) > seq)
		atomic_store(&a->done, seq);
	if (atomic_load(&a->want) > seq)
		atomic_store(&a->want, seq);
	pthread_mutex_unlock(&a->mu);
}
