/* The matcher daemon's snapshot directory (<state_dir>/snapshots): taking a
 * snapshot (the engine's image serialized on the event loop, then written
 * by a SCHED_IDLE thread), reaping it, pruning old ones, quarantining a
 * diverged replica's, and at start-up removing unfinished .tmp files and
 * loading the newest usable one. No fork: a fork write-protects every page
 * of the process, and the copy-on-write faults that follow (about 20 us per
 * 4 KiB page touched on the hosts measured, and the engine touches its
 * tables at random) stalled a replica for seconds after each snapshot. The
 * loop now pays for the serialization alone, in proportion to the state (a
 * million resting orders: about 100 MB), once. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "daemon_wait.h"
#include "durable.h"
#include "log.h"
#include "matcher_private.h"
#include "snapshot.h"

#define SNAP_LIST_MAX 1024 /* snapshots in the directory that are looked at */

/* a day's snapshot due while one is written is tried again at every event */
static struct log_ratelimit rl_busy = LOG_RATELIMIT_INIT(1, 5);

static int snap_name_seq(const char *name, uint64_t *seq)
{
	unsigned long long v;
	int end = 0;

	if (sscanf(name, "snap-%20llu.lss%n", &v, &end) != 1 || end == 0 || name[end] != '\0' ||
	    strlen(name) != 29)
		return -1;
	*seq = v;
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The tape seqs of the snapshots in the directory, newest first (at most cap). */
static size_t snap_list(const char *dir, uint64_t *seqs, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < cap) {
		uint64_t s;

		if (snap_name_seq(de->d_name, &s) == 0)
			seqs[n++] = s;
	}
	closedir(d);
	qsort(seqs, n, sizeof(*seqs), cmp_desc);
	return n;
}

/* All but the snapshot_keep newest removed, gently (durable_remove: an
 * unlink of a 100 MB file at once stalls the other daemons' syncs), by the
 * writer thread after it wrote a new one. */
static void snapshot_prune(struct matcher *m)
{
	uint64_t seqs[SNAP_LIST_MAX];
	size_t n = snap_list(m->snap_dir, seqs, SNAP_LIST_MAX);
	char path[340];

	for (size_t i = m->cfg->snapshot_keep; i < n; i++) {
		matcher_snapshot_path(path, sizeof(path), m->snap_dir, seqs[i]);
		(void)durable_remove(path);
	}
}

/* A diverged replica's snapshots after its last agreed checkpoint may hold
 * the wrong state, which a restart would load: they are renamed
 * snap-SEQ.lss.diverged (kept for a post-mortem, never loaded). At once,
 * and again when a snapshot being written is done (snapshot_done); the
 * writer thread may prune a file meanwhile (the rename then finds none). */
void matcher_snapshot_quarantine(struct matcher *m)
{
	uint64_t seqs[SNAP_LIST_MAX];
	size_t n;
	char path[340], to[360];

	n = snap_list(m->snap_dir, seqs, SNAP_LIST_MAX);

	for (size_t i = 0; i < n; i++) {
		if (seqs[i] <= m->ck_last_agreed)
			continue;
		matcher_snapshot_path(path, sizeof(path), m->snap_dir, seqs[i]);
		snprintf(to, sizeof(to), "%s.diverged", path);
		if (rename(path, to) == 0)
			log_warn("snapshot %s renamed %s: taken after the last agreed checkpoint "
				 "(%llu), it is not trusted", path, to,
				 (unsigned long long)m->ck_last_agreed);
		else if (errno != ENOENT) /* (the writer thread pruned it meanwhile) */
			log_err("snapshot %s: rename to %s: %s: delete it before restarting", path,
				to, strerror(errno));
	}
}

static void snapshot_done(struct matcher *m, int r)
{
	if (r == 0) {
		m->st.snapshots_written++;
		m->snap_last = m->snap_pending;
		log_notice("snapshot at tape seq %llu written", (unsigned long long)m->snap_pending);
	} else {
		m->st.snapshots_failed++;
		log_err("snapshot at tape seq %llu failed: %s (in %s)",
			(unsigned long long)m->snap_pending, strerror(-r), m->snap_dir);
	}
	/* a diverged replica's may postdate the last agreed checkpoint (the
	 * one just written among them) */
	if (m->diverged)
		matcher_snapshot_quarantine(m);
}

/* The writer thread: the file from the image, at idle priority (on a busy
 * host a snapshot then takes longer, but does not take a core from the
 * replicas, the gateways or the sequencer), a slice at a time
 * (durable.h), then the old ones pruned. It touches the image, the header
 * and the snapshot directory, which the loop leaves alone while snap_busy,
 * and nothing else. */
static void *snapshot_writer(void *arg)
{
	struct matcher *m = arg;
	struct sched_param sp = { .sched_priority = 0 };

	(void)pthread_setname_np(pthread_self(), "snap-writer");
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	m->snap_result = matcher_snapshot_write_image(m->snap_dir, &m->snap_hdr, &m->snap_image);
	if (m->snap_result == 0)
		snapshot_prune(m);
	ev_async_send(m->loop, &m->snap_async);
	return NULL;
}

static void snapshot_join(struct matcher *m)
{
	pthread_join(m->snap_thread, NULL);
	m->snap_busy = 0;
	snapshot_done(m, m->snap_result);
}

static void on_snap_written(struct ev_loop *loop, ev_async *w, int revents)
{
	struct matcher *m = w->data;

	(void)loop;
	(void)revents;
	if (m->snap_busy)
		snapshot_join(m);
}

/* The image of the state now, in m->snap_image: the loop's one pause,
 * announced to the sequencers first, so that the tape does not wait for
 * this replica (the partition's other replicas carry the executions
 * meanwhile; it catches up from its kernel buffer after, quietly:
 * matcher_resume_begin). Under rt_priority it runs under the normal
 * scheduler: a real-time pause of ~100 ms would hold a core against every
 * other daemon. */
static int snapshot_serialize(struct matcher *m, uint64_t seq)
{
	struct matcher_snap_feed pos;
	uint64_t t0 = mono_ns();
	int prio, r;

	matcher_flow_pause(m);
	prio = daemon_pause_begin();
	r = matcher_snapshot_image(&m->snap_image, m->engine, matcher_feed_position(m, &pos));
	if (m->cfg->test_snapshot_pause_ns) {
		struct timespec ts = { (time_t)(m->cfg->test_snapshot_pause_ns / 1000000000u),
				       (long)(m->cfg->test_snapshot_pause_ns % 1000000000u) };

		nanosleep(&ts, NULL);
	}

	matcher_resume_begin(m, prio);
	m->st.snapshots_off_rt += prio > 0;
	m->snap_stall_ns = mono_ns() - t0;
	if (r < 0)
		return r;
	m->snap_hdr = (struct matcher_snap_hdr){ .partition = (uint32_t)m->cfg->partition,
						 .seq = seq, .exec_next = m->exec_next,
						 .term = m->term, .commit = m->commit,
						 .hash = engine_hash(m->engine) };
	return 0;
}

int matcher_snapshot_take(struct matcher *m, uint64_t seq)
{
	int r;

	if (m->diverged)
		return -ESTALE; /* the state is wrong: a snapshot of it would be loaded later */
	if (m->snap_busy) {
		m->st.snapshots_skipped_busy++;
		log_ratelimited(&rl_busy, LOG_LVL_WARNING,
				"snapshot at tape seq %llu skipped: the one at %llu is still being "
				"written", (unsigned long long)seq,
				(unsigned long long)m->snap_pending);
		return -EBUSY;
	}
	if (!ev_is_active(&m->snap_async)) {
		ev_async_init(&m->snap_async, on_snap_written);
		m->snap_async.data = m;
		ev_async_start(m->loop, &m->snap_async);
	}
	m->snap_pending = seq;
	if ((r = snapshot_serialize(m, seq)) < 0 ||
	    (r = -pthread_create(&m->snap_thread, NULL, snapshot_writer, m)) < 0) {
		m->st.snapshots_failed++;
		log_err("snapshot at tape seq %llu: %s", (unsigned long long)seq, strerror(-r));
		return r;
	}
	m->snap_busy = 1;
	log_info("snapshot at tape seq %llu: %zu bytes serialized in %.1f ms, being written",
		 (unsigned long long)seq, m->snap_image.len, (double)m->snap_stall_ns / 1e6);
	return 0;
}

void matcher_snapshot_reap(struct matcher *m)
{
	if (m->snap_busy)
		snapshot_join(m);
	if (m->loop && ev_is_active(&m->snap_async))
		ev_async_stop(m->loop, &m->snap_async);
}

/* At start-up: a snap-SEQ.lss.tmp is what a writer killed mid-write left
 * (never renamed, so never loaded): removed, with a line in the log. */
static void snapshot_remove_temporaries(struct matcher *m)
{
	DIR *d = opendir(m->snap_dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char path[600];

		if (strncmp(de->d_name, "snap-", 5) != 0 || len < 9 ||
		    strcmp(de->d_name + len - 8, ".lss.tmp") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", m->snap_dir, de->d_name);
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			log_warn("removed %s: an unfinished snapshot", path);
	}
	closedir(d);
}

/* Loads the snapshot of tape seq `seq` into m->engine: 0, or a negative
 * errno with why in `why` (m->engine may then hold partial state). */
static int snapshot_load_seq(struct matcher *m, uint64_t seq, const char *path,
			     const char **why)
{
	struct matcher_snap_hdr h;
	int r = matcher_snapshot_load(path, (uint32_t)m->cfg->partition, m->engine, &h,
				      &m->snap_feed, why);

	if (r == 0 && h.seq != seq) {
		r = -EBADMSG;
		*why = "its name and header disagree";
	}
	if (r < 0)
		return r;
	m->start_seq = h.seq + 1;
	m->exec_next = m->exec_first = h.exec_next;
	m->term = h.term;
	m->commit = h.commit;
	m->snap_last = h.seq;
	m->snap_feed_loaded = 1;
	log_notice("loaded snapshot %s: tape seq %llu, exec seq %llu, hash %016llx; "
		   "replaying the tape from %llu",
		   path, (unsigned long long)h.seq, (unsigned long long)h.exec_next,
		   (unsigned long long)h.hash, (unsigned long long)h.seq + 1);
	return 0;
}

int matcher_snapshot_load_newest(struct matcher *m, const struct engine_config *ec)
{
	uint64_t seqs[SNAP_LIST_MAX];
	size_t n;

	if (mkdir(m->snap_dir, 0750) < 0 && errno != EEXIST) {
		log_err("snapshot directory %s: %s", m->snap_dir, strerror(errno));
		return -errno;
	}
	snapshot_remove_temporaries(m);
	n = snap_list(m->snap_dir, seqs, SNAP_LIST_MAX);
	for (size_t i = 0; i < n; i++) {
		char path[340];
		const char *why = "";
		int r;

		matcher_snapshot_path(path, sizeof(path), m->snap_dir, seqs[i]);
		if ((r = snapshot_load_seq(m, seqs[i], path, &why)) == 0)
			return 0;
		m->st.snapshots_rejected++;
		log_warn("snapshot %s skipped, not trusted: %s (%s)", path, why, strerror(-r));
		/* a failed load may have left state behind: start from a fresh engine */
		engine_destroy(m->engine);
		m->engine = NULL;
		if ((r = engine_create(&m->engine, ec)) < 0)
			return r;
	}
	if (n)
		log_warn("no usable snapshot in %s: replaying the whole tape", m->snap_dir);
	return 0;
}
