/* The matcher's snapshots: the file format (snapshot.h), which
 * lockstep-replay rebuild writes too, and the daemon's snapshot directory
 * (<state_dir>/snapshots): taking a snapshot in a SCHED_IDLE child, reaping
 * it, pruning old ones, quarantining a diverged replica's, and at start-up
 * removing unfinished .tmp files and loading the newest usable one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"
#include "matcher_private.h"
#include "snapshot.h"

#define SNAP_MAGIC "LSSNAP\0\1"
#define SNAP_BUF (1 << 20)

_Static_assert(sizeof(struct matcher_snap_hdr) <= MATCHER_SNAP_HDR_LEN, "snapshot header");

struct snap_io {
	int fd;
	uint32_t crc;
	uint64_t n; /* body bytes so far */
	uint64_t left; /* reading: body bytes left */
	size_t len, off;
	uint8_t *buf;
};

void matcher_snapshot_path(char *out, size_t cap, const char *dir, uint64_t seq)
{
	snprintf(out, cap, "%s/snap-%020llu.lss", dir, (unsigned long long)seq);
}

static int snap_flush(struct snap_io *io)
{
	size_t done = 0;

	while (done < io->len) {
		ssize_t w = write(io->fd, io->buf + done, io->len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (size_t)w;
	}
	io->len = 0;
	return 0;
}

static int snap_put(void *ctx, const void *p, size_t len)
{
	struct snap_io *io = ctx;
	int r;

	io->crc = crc32c(io->crc, p, len);
	io->n += len;
	while (len) {
		size_t k = SNAP_BUF - io->len < len ? SNAP_BUF - io->len : len;

		memcpy(io->buf + io->len, p, k);
		io->len += k;
		p = (const uint8_t *)p + k;
		len -= k;
		if (io->len == SNAP_BUF && (r = snap_flush(io)) < 0)
			return r;
	}
	return 0;
}

int matcher_snapshot_write(const char *dir, struct matcher_snap_hdr *h, const struct engine *e)
{
	char tmp[4200], path[4096];
	struct snap_io io = { .fd = -1 };
	uint8_t hdr[MATCHER_SNAP_HDR_LEN] = { 0 };
	int r, dfd;

	matcher_snapshot_path(path, sizeof(path), dir, h->seq);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	io.buf = malloc(SNAP_BUF);
	if (!io.buf)
		return -ENOMEM;
	io.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (io.fd < 0) {
		r = -errno;
		goto out_free;
	}
	/* the header goes last (body_len is known then); reserve its room */
	if (lseek(io.fd, MATCHER_SNAP_HDR_LEN, SEEK_SET) < 0) {
		r = -errno;
		goto out_close;
	}
	if ((r = engine_snapshot_write(e, snap_put, &io)) < 0 || (r = snap_flush(&io)) < 0)
		goto out_close;
	memcpy(h->magic, SNAP_MAGIC, 8);
	h->version = MATCHER_SNAP_VERSION;
	h->hash = engine_hash(e);
	h->body_len = io.n;
	memcpy(hdr, h, sizeof(*h));
	/* the body is written before the header, so the trailer holds two
	 * CRC32Cs: u32 crc32c(header), u32 crc32c(body) */
	{
		uint32_t crcs[2] = { crc32c(0, hdr, sizeof(hdr)), io.crc };

		if (pwrite(io.fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
		    pwrite(io.fd, crcs, sizeof(crcs), (off_t)(MATCHER_SNAP_HDR_LEN + io.n)) !=
			    (ssize_t)sizeof(crcs)) {
			r = -EIO;
			goto out_close;
		}
	}
	if (fsync(io.fd) < 0) {
		r = -errno;
		goto out_close;
	}
	close(io.fd);
	io.fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto out_unlink;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(io.buf);
	return 0;

out_close:
	close(io.fd);
out_unlink:
	unlink(tmp);
out_free:
	free(io.buf);
	return r;
}

static int snap_get(void *ctx, void *p, size_t len)
{
	struct snap_io *io = ctx;

	if (len > io->left)
		return -EBADMSG;
	while (len) {
		size_t k;

		if (io->off == io->len) {
			size_t want = io->left < SNAP_BUF ? (size_t)io->left : SNAP_BUF;
			ssize_t got = read(io->fd, io->buf, want);

			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				return got < 0 ? -errno : -EBADMSG;
			io->len = (size_t)got;
			io->off = 0;
		}
		k = io->len - io->off < len ? io->len - io->off : len;
		memcpy(p, io->buf + io->off, k);
		io->crc = crc32c(io->crc, io->buf + io->off, k);
		io->off += k;
		p = (uint8_t *)p + k;
		len -= k;
		io->left -= k;
	}
	return 0;
}

int matcher_snapshot_load(const char *path, uint32_t partition, struct engine *e,
			  struct matcher_snap_hdr *h, const char **why)
{
	uint8_t hdr[MATCHER_SNAP_HDR_LEN];
	uint32_t crcs[2];
	struct snap_io io = { .fd = -1 };
	struct stat sb;
	int r;

	io.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (io.fd < 0) {
		*why = "cannot open";
		return -errno;
	}
	r = -EBADMSG;
	*why = "short or damaged header";
	if (fstat(io.fd, &sb) < 0 || read(io.fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		goto out_close;
	memcpy(h, hdr, sizeof(*h));
	if (memcmp(h->magic, SNAP_MAGIC, 8) != 0)
		goto out_close;
	*why = "another format version";
	if (h->version != MATCHER_SNAP_VERSION)
		goto out_close;
	*why = "another partition's";
	if (h->partition != partition)
		goto out_close;
	*why = "truncated or of the wrong length";
	if ((uint64_t)sb.st_size != MATCHER_SNAP_HDR_LEN + h->body_len + sizeof(crcs) ||
	    pread(io.fd, crcs, sizeof(crcs), (off_t)(MATCHER_SNAP_HDR_LEN + h->body_len)) !=
		    (ssize_t)sizeof(crcs))
		goto out_close;
	*why = "header CRC mismatch";
	if (crc32c(0, hdr, sizeof(hdr)) != crcs[0])
		goto out_close;
	/* the body's CRC first, in one pass, so that nothing damaged is parsed */
	io.buf = malloc(SNAP_BUF);
	if (!io.buf) {
		r = -ENOMEM;
		*why = "out of memory";
		goto out_close;
	}
	io.left = h->body_len;
	r = 0;
	while (io.left) {
		uint8_t scratch[4096];
		size_t k = io.left < sizeof(scratch) ? (size_t)io.left : sizeof(scratch);

		if ((r = snap_get(&io, scratch, k)) < 0)
			break;
	}
	*why = "body CRC mismatch";
	if (r < 0 || io.crc != crcs[1]) {
		r = -EBADMSG;
		goto out_close;
	}
	lseek(io.fd, MATCHER_SNAP_HDR_LEN, SEEK_SET);
	io.left = h->body_len;
	io.len = io.off = 0;
	io.crc = 0;
	*why = "content does not load (another symbol list or limits?)";
	if ((r = engine_snapshot_read(e, snap_get, &io)) < 0)
		goto out_close;
	*why = "loaded state's hash differs from the header's";
	r = -EBADMSG;
	if (io.left != 0 || engine_hash(e) != h->hash)
		goto out_close;
	r = 0;
out_close:
	free(io.buf);
	close(io.fd);
	return r;
}

/* --- the snapshot directory ---------------------------------------------- */

#define SNAP_LIST_MAX 1024 /* snapshots in the directory that are looked at */

/* Runs in the forked child: writes the state as it was at the fork. */
static int snapshot_write_file(struct matcher *m, uint64_t seq)
{
	struct matcher_snap_hdr h = { .partition = (uint32_t)m->cfg->partition, .seq = seq,
				      .exec_next = m->exec_next, .term = m->term,
				      .commit = m->commit };

	return matcher_snapshot_write(m->snap_dir, &h, m->engine);
}

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

static void snapshot_prune(struct matcher *m)
{
	uint64_t seqs[SNAP_LIST_MAX];
	size_t n = snap_list(m->snap_dir, seqs, SNAP_LIST_MAX);
	char path[340];

	for (size_t i = m->cfg->snapshot_keep; i < n; i++) {
		matcher_snapshot_path(path, sizeof(path), m->snap_dir, seqs[i]);
		unlink(path);
	}
}

/* A diverged replica's snapshots after its last agreed checkpoint may hold
 * the wrong state, which a restart would load: they are renamed
 * snap-SEQ.lss.diverged (kept for a post-mortem, never loaded). */
void matcher_snapshot_quarantine(struct matcher *m)
{
	uint64_t seqs[SNAP_LIST_MAX];
	size_t n = snap_list(m->snap_dir, seqs, SNAP_LIST_MAX);
	char path[340], to[360];

	for (size_t i = 0; i < n; i++) {
		if (seqs[i] <= m->ck_last_agreed)
			continue;
		matcher_snapshot_path(path, sizeof(path), m->snap_dir, seqs[i]);
		snprintf(to, sizeof(to), "%s.diverged", path);
		if (rename(path, to) == 0)
			log_warn("snapshot %s renamed %s: taken after the last agreed checkpoint "
				 "(%llu), it is not trusted", path, to,
				 (unsigned long long)m->ck_last_agreed);
		else
			log_err("snapshot %s: rename to %s: %s: delete it before restarting", path,
				to, strerror(errno));
	}
}

static void snapshot_done(struct matcher *m, int status)
{
	ev_child_stop(m->loop, &m->snap_child);
	m->snap_pid = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		m->st.snapshots_written++;
		m->snap_last = m->snap_pending;
		log_notice("snapshot at tape seq %llu written", (unsigned long long)m->snap_pending);
		snapshot_prune(m);
		/* a diverged replica's may postdate the last agreed checkpoint */
		if (m->diverged)
			matcher_snapshot_quarantine(m);
	} else {
		m->st.snapshots_failed++;
		log_err("snapshot at tape seq %llu failed (see %s)",
			(unsigned long long)m->snap_pending, m->snap_dir);
	}
}

static void on_snap_child(struct ev_loop *loop, ev_child *w, int revents)
{
	(void)loop;
	(void)revents;
	snapshot_done(w->data, w->rstatus);
}

/* The forked child: writes the snapshot and exits. */
static _Noreturn void snapshot_child(struct matcher *m, uint64_t seq, pid_t parent)
{
	/* The child runs only on CPU time nobody else wants: on a busy
	 * host a snapshot then takes longer, but does not take a core
	 * from the replicas, the gateways or the sequencer. */
	struct sched_param sp = { .sched_priority = 0 };
	int r;

	/* It needs none of the parent's descriptors (it opens its file by
	 * name; logging is stderr): closed at once, so that no socket of the
	 * matcher's (the exec_retrans port...) stays bound in a child that a
	 * busy host leaves unscheduled after its parent died, where a
	 * restarted matcher would find it in use. */
	(void)close_range(3, ~0u, 0);
	/* A writer outliving a SIGKILLed matcher would race the restarted
	 * one (which removes its temporary file): it dies with its parent. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	(void)sched_setscheduler(0, SCHED_IDLE, &sp);
	r = snapshot_write_file(m, seq);

	if (r < 0)
		log_err("snapshot at tape seq %llu: %s", (unsigned long long)seq, strerror(-r));
	_exit(r < 0 ? 1 : 0);
}

int matcher_snapshot_take(struct matcher *m, uint64_t seq)
{
	pid_t pid, parent = getpid();

	if (m->diverged)
		return -ESTALE; /* the state is wrong: a snapshot of it would be loaded later */
	if (m->snap_pid > 0) {
		m->st.snapshots_skipped_busy++;
		log_warn("snapshot at tape seq %llu skipped: the one at %llu is still being written",
			 (unsigned long long)seq, (unsigned long long)m->snap_pending);
		return -EBUSY;
	}
	pid = fork();
	if (pid < 0) {
		m->st.snapshots_failed++;
		log_err("snapshot at tape seq %llu: fork: %s", (unsigned long long)seq,
			strerror(errno));
		return -errno;
	}
	if (pid == 0)
		snapshot_child(m, seq, parent);
	m->snap_pid = pid;
	m->snap_pending = seq;
	ev_child_init(&m->snap_child, on_snap_child, pid, 0);
	m->snap_child.data = m;
	ev_child_start(m->loop, &m->snap_child);
	log_info("snapshot at tape seq %llu: being written by pid %d", (unsigned long long)seq,
		 (int)pid);
	return 0;
}

void matcher_snapshot_reap(struct matcher *m)
{
	int status;

	if (m->snap_pid <= 0)
		return;
	if (waitpid(m->snap_pid, &status, 0) == m->snap_pid)
		snapshot_done(m, status);
	else
		m->snap_pid = 0;
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
	int r = matcher_snapshot_load(path, (uint32_t)m->cfg->partition, m->engine, &h, why);

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
