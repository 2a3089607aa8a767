/* The logins' write-ahead journal (fsync = disk): one synced journal for
 * every login's outbound messages, so that a gateway syncs one file for all
 * its sessions instead of one a login.
 *
 * <state_dir>/sessions.wal holds a copy of each login journal record:
 *   u8 length of the login's name | the name | u64 BE SoupBin seq | record
 * (the record as the login's journal holds it: the u64 BE tag, then the
 * OUCH message). A message leaves for its client once the WAL holds it on
 * disk (its login's durable_next passes it); the login journals themselves
 * are written to the page cache and never synced in the path.
 *
 * A checkpoint makes them durable: every [gateway] wal_checkpoint (250 ms)
 * when the WAL grew, a thread syncs the journal of each login written since
 * the last (its segments from the one the last checkpoint reached, and its
 * directory when it has a new one), and then the WAL's segments whose
 * records all lie below what the login journals held when it began are
 * dropped. Only the gateway's files: not syncfs, whose flush of other
 * processes' data on a shared disk held back the command journal's syncs.
 *
 * At start (gw_wal_open), after a power cut a login journal may lack the
 * records it had not synced: the WAL's records give them back, in order;
 * a WAL record past a login journal's end (a hole neither holds) means the
 * state directory lost synced data, and the gateway refuses to start. Then
 * every login journal is synced once, so that whatever the open found is
 * on disk before a message of it leaves again. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "daemon_wait.h"
#include "gw_private.h"
#include "journal.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

/* ---- durability: each login's marks ------------------------------------- */

/* l's records below `next` are on disk once the WAL is up to `wal`. When the
 * ring is full the newest mark takes the new one (its records then wait for
 * the later sync). */
static void mark_push(struct gw_logins *t, struct gw_login *l, uint64_t wal, uint64_t next)
{
	unsigned i = l->wal_n == GW_WAL_MARKS ? (l->wal_head + GW_WAL_MARKS - 1) % GW_WAL_MARKS
					       : (l->wal_head + l->wal_n++) % GW_WAL_MARKS;

	l->wal_marks[i].wal = wal;
	l->wal_marks[i].next = next;
	if (!l->wal_waiting) {
		l->wal_waiting = 1;
		l->next_wal_wait = t->wal_wait;
		t->wal_wait = l;
	}
}

/* The WAL is on disk up to journal_durable_seq: each waiting login's
 * durable_next moves past the marks it covers, and its reader is woken. */
static void advance(struct gw_logins *t)
{
	if (t->wal_broken)
		return;
	uint64_t d = journal_durable_seq(t->wal);
	struct gw_login **pp = &t->wal_wait;

	if (t->stages && *pp)
		t->stages->now = mono_ns();
	while (*pp) {
		struct gw_login *l = *pp;
		uint64_t before = l->durable_next, readable = gw_login_readable(l);

		while (l->wal_n && l->wal_marks[l->wal_head].wal <= d) {
			if (l->wal_marks[l->wal_head].next > l->durable_next)
				l->durable_next = l->wal_marks[l->wal_head].next;
			l->wal_head = (l->wal_head + 1) % GW_WAL_MARKS;
			l->wal_n--;
		}
		if (t->stages)
			gw_stages_readable(t->stages, l, readable, gw_login_readable(l));
		if (l->durable_next != before && l->rops)
			l->rops->wake(l->reader);
		if (l->wal_n) {
			pp = &l->next_wal_wait;
			continue;
		}
		l->wal_waiting = 0;
		*pp = l->next_wal_wait;
	}
}

/* A sync of the WAL failed: the pages it covered may be gone from the page
 * cache as well as from the disk, so a later sync that succeeds proves
 * nothing about them. No message is released again in this run (the
 * readers wait; a restart replays what the WAL holds on disk). */
static void wal_broke(struct gw_logins *t, int rc)
{
	t->st->journal_errors++;
	if (!t->wal_broken)
		log_err("sessions.wal: fsync: %s: no message leaves for a client until a restart",
			strerror(-rc));
	t->wal_broken = 1;
}

static void on_wal_sync(struct ev_loop *loop, ev_io *w, int revents)
{
	struct gw_logins *t = w->data;
	int rc = journal_poll(t->wal);

	(void)loop;
	(void)revents;
	if (rc < 0)
		wal_broke(t, rc);
	else if (rc > 0)
		advance(t);
}

/* ---- the write path ------------------------------------------------------ */

int gw_wal_append(struct gw_logins *t, const struct gw_login *l, uint64_t seq, const uint8_t *rec,
		  size_t len)
{
	uint8_t buf[GW_WAL_RECORD_MAX];
	int rc;

	if (len > 8 + GW_MAX_EXEC_MSG)
		return -EMSGSIZE;
	rc = journal_append(t->wal, journal_next_seq(t->wal), 0, buf,
			    gw_wal_encode(buf, l->cred.login, seq, rec, len));
	if (rc < 0) {
		t->st->journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "sessions.wal: append (%s %" PRIu64 "): %s",
				l->cred.login, seq, strerror(-rc));
	}
	return rc;
}

int gw_wal_flush(struct gw_logins *t)
{
	int rc = journal_flush(t->wal);

	if (rc < 0) {
		t->st->journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "sessions.wal: write: %s", strerror(-rc));
	}
	return rc;
}

void gw_wal_flushed(struct gw_logins *t, struct gw_login *l)
{
	if (l->next_seq > l->durable_next)
		mark_push(t, l, journal_last_seq(t->wal), l->next_seq);
}

void gw_wal_poll(struct gw_logins *t)
{
	int rc = journal_poll(t->wal);

	if (rc < 0)
		wal_broke(t, rc);
	else if (rc > 0)
		advance(t);
}

int gw_wal_await(struct gw_logins *t)
{
	uint64_t last = journal_last_seq(t->wal);
	int rc = last ? journal_await(t->wal, last) : 0;

	if (rc < 0) {
		wal_broke(t, rc);
		return rc;
	}
	gw_wal_poll(t);
	return t->wal_broken ? -EIO : 0;
}

/* ---- checkpoints --------------------------------------------------------- */

/* 1 when name is a journal segment's (common/journal.h: %020llu.seg), and
 * its first record. */
static int seg_first(const char *name, uint64_t *first)
{
	char *end;

	*first = strtoull(name, &end, 10);
	return end == name + 20 && strcmp(end, ".seg") == 0;
}

/* Puts login `name`'s journal on disk from its record `from` on (0: all of
 * it): every segment file that may hold such a record, and the directory
 * when one was made since (its first record is `from` or later). On
 * the checkpoint's thread, or at start and close. 0 or -errno. */
static int sync_login(const char *sessions, const char *name, uint64_t from)
{
	char path[320];
	uint64_t base = 0, first;
	unsigned newer = 0;
	int rc = 0;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/%s", sessions, name);
	if (!(d = opendir(path)))
		return errno == ENOENT ? 0 : -errno; /* never written: nothing to sync */
	/* the segment `from` is in: the last whose first record is <= from */
	while ((e = readdir(d)) != NULL)
		if (seg_first(e->d_name, &first) && first <= from && first > base)
			base = first;
	rewinddir(d);
	while (rc == 0 && (e = readdir(d)) != NULL) {
		int fd;

		if (!seg_first(e->d_name, &first) || first < base)
			continue;
		newer += first >= from; /* made since the last checkpoint */
		if ((fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC)) < 0) {
			rc = errno == ENOENT ? 0 : -errno;
			continue;
		}
		if (fdatasync(fd) < 0)
			rc = -errno;
		close(fd);
	}
	if (rc == 0 && (newer || from == 0) && fsync(dirfd(d)) < 0)
		rc = -errno;
	closedir(d);
	return rc;
}

/* The checkpoint's logins (ckpt_items), then the sessions directory (a
 * login journal's directory made since). 0 or -errno. */
static int ckpt_run(struct gw_logins *t)
{
	char sessions[300];
	int rc = 0, dfd;

	snprintf(sessions, sizeof(sessions), "%s/sessions", t->cfg->node.state_dir);
	for (size_t i = 0; i < t->ckpt_n && rc == 0; i++)
		rc = sync_login(sessions, t->ckpt_items[i].name, t->ckpt_items[i].from);
	if (rc == 0 && (dfd = open(sessions, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (fsync(dfd) < 0)
			rc = -errno;
		close(dfd);
	}
	return rc;
}

static void *ckpt_main(void *arg)
{
	struct gw_logins *t = arg;

	daemon_thread_off_path("wal-checkpoint");
	atomic_store(&t->ckpt_err, ckpt_run(t));
	atomic_store(&t->ckpt_done, 1);
	return NULL;
}

/* The logins written since the last checkpoint become its items, after
 * every login journal was written up to the WAL's last record. 0, or
 * -errno (nothing to start). */
static int ckpt_collect(struct gw_logins *t)
{
	int rc = gw_logins_flush(t);

	if (rc < 0)
		return rc;
	if (t->ckpt_cap < t->n) {
		struct gw_ckpt_item *v = realloc(t->ckpt_items, t->n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->ckpt_items = v;
		t->ckpt_cap = t->n;
	}
	t->ckpt_n = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct gw_login *l = t->v[i];
		struct gw_ckpt_item *it = &t->ckpt_items[t->ckpt_n];

		if (!l->j || l->next_seq <= l->ckpt_from)
			continue;
		snprintf(it->name, sizeof(it->name), "%s", l->cred.login);
		it->from = l->ckpt_from;
		it->upto = l->next_seq;
		it->l = l;
		t->ckpt_n++;
	}
	t->ckpt_upto = journal_last_seq(t->wal);
	return 0;
}

/* The checkpoint that ended (rc: its result): each login's journal is on
 * disk up to where it was taken, and the WAL's segments below what it
 * covered go. */
static void ckpt_end(struct gw_logins *t, int rc)
{
	if (rc < 0) {
		/* as with the WAL's: a later sync's success would prove nothing
		 * about the pages this one lost, so the WAL keeps all */
		t->st->journal_errors++;
		log_err("sessions: checkpoint: %s: sessions.wal is not cut again until a restart",
			strerror(-rc));
		t->ckpt_broken = 1;
		return;
	}
	for (size_t i = 0; i < t->ckpt_n; i++)
		t->ckpt_items[i].l->ckpt_from = t->ckpt_items[i].upto;
	rc = journal_drop_before(t->wal, t->ckpt_upto + 1, NULL);
	if (rc < 0)
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "sessions.wal: drop: %s", strerror(-rc));
	t->st->wal_checkpoints++;
}

void gw_wal_tick(struct gw_logins *t, ev_tstamp now)
{
	if (!t->wal)
		return;
	if (t->ckpt_running) {
		if (atomic_load(&t->ckpt_done)) {
			pthread_join(t->ckpt_thread, NULL);
			t->ckpt_running = 0;
			ckpt_end(t, atomic_load(&t->ckpt_err));
			t->ckpt_at = now;
		}
		return;
	}
	/* [gateway] wal_checkpoint: each writes what the login journals took
	 * since the last, a small burst for the disk rather than a large one */
	if (t->ckpt_broken || now - t->ckpt_at < (ev_tstamp)t->cfg->wal_checkpoint / 1e9 ||
	    journal_last_seq(t->wal) <= t->ckpt_upto || ckpt_collect(t) < 0)
		return;
	atomic_store(&t->ckpt_done, 0);
	if (pthread_create(&t->ckpt_thread, NULL, ckpt_main, t) != 0) {
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "sessions: checkpoint thread: %s",
				strerror(errno));
		return;
	}
	t->ckpt_running = 1;
	log_debug("sessions: checkpoint of %zu logins, up to WAL record %" PRIu64, t->ckpt_n,
		  t->ckpt_upto);
}

/* At start: every login journal under sessions/ (those of logins gone from
 * the credentials file too: the replay may have written them) on disk. */
static int sync_all(struct gw_logins *t)
{
	char sessions[300];
	struct dirent *e;
	DIR *d;
	int rc = 0;

	snprintf(sessions, sizeof(sessions), "%s/sessions", t->cfg->node.state_dir);
	if (!(d = opendir(sessions)))
		return -errno;
	while (rc == 0 && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			rc = sync_login(sessions, e->d_name, 0);
	closedir(d);
	t->ckpt_n = 0;
	return rc < 0 ? rc : ckpt_run(t);
}

/* ---- open: the login journals made whole again --------------------------- */

/* The journal a WAL record of `name` goes to: the login's, or for a login
 * gone from the credentials file its directory's, opened for the replay
 * (*tmp, closed by the caller or the next call for another name). */
static struct journal *target(struct gw_logins *t, const char *name, struct journal **tmp,
			      char *tmp_name)
{
	struct gw_login *l = gw_login_find(t, (const uint8_t *)name, strlen(name));
	struct journal_options jo = { .fsync = JOURNAL_FSYNC_NONE };
	struct journal_report rep;
	char path[320];

	if (l)
		return l->j;
	if (*tmp && strcmp(tmp_name, name) == 0)
		return *tmp;
	journal_close(*tmp);
	*tmp = NULL;
	snprintf(path, sizeof(path), "%s/sessions/%s", t->cfg->node.state_dir, name);
	if (journal_open(tmp, path, &jo, &rep) < 0)
		return NULL;
	snprintf(tmp_name, CREDS_LOGIN_LEN + 1, "%s", name);
	return *tmp;
}

/* Gives each login journal back the WAL's records it lacks. */
static int replay(struct gw_logins *t, const char *path)
{
	struct journal_iter *it;
	struct journal *tmp = NULL;
	char tmp_name[CREDS_LOGIN_LEN + 1] = "", name[CREDS_LOGIN_LEN + 1];
	const uint8_t *data, *rec;
	uint64_t wseq, term, seq, restored = 0;
	size_t len, rec_len;
	int rc = journal_iter_open(&it, t->wal, journal_first_seq(t->wal));

	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	while ((rc = journal_iter_next(it, &wseq, &term, &data, &len)) > 0) {
		struct journal *j;
		uint64_t next;

		if ((rc = gw_wal_parse(data, len, name, &seq, &rec, &rec_len)) < 0) {
			log_err("%s: record %" PRIu64 " does not parse", path, wseq);
			break;
		}
		if (!(j = target(t, name, &tmp, tmp_name))) {
			rc = -EIO;
			log_err("%s: record %" PRIu64 ": login %s's journal cannot be opened", path,
				wseq, name);
			break;
		}
		next = journal_last_seq(j) + 1;
		if (seq < next)
			continue;
		if (seq > next) {
			rc = -EUCLEAN;
			log_err("%s: record %" PRIu64 " is login %s's message %" PRIu64
				" but its journal ends at %" PRIu64 ": messages %" PRIu64 "..%" PRIu64
				" are in neither (synced data lost under %s/sessions/%s); not started",
				path, wseq, name, seq, next - 1, next, seq - 1, t->cfg->node.state_dir,
				name);
			break;
		}
		if ((rc = journal_append(j, seq, 0, rec, rec_len)) < 0 ||
		    (rc = journal_flush(j)) < 0) {
			log_err("%s/sessions/%s: %s", t->cfg->node.state_dir, name, strerror(-rc));
			break;
		}
		restored++;
	}
	journal_iter_close(it);
	journal_close(tmp);
	if (rc < 0)
		return rc;
	if (restored)
		log_warn("%s: %" PRIu64 " messages the login journals had lost given back to them",
			 path, restored);
	t->st->wal_restored += restored;
	return 0;
}

int gw_wal_open(struct gw_logins *t, struct ev_loop *loop)
{
	struct journal_options jo = { .fsync = JOURNAL_FSYNC_DISK,
				      .segment_bytes = t->cfg->wal_segment,
				      .ahead = (uint32_t)t->cfg->node.journal_ahead };
	char path[300];
	int rc;

	snprintf(path, sizeof(path), "%s/sessions.wal", t->cfg->node.state_dir);
	if ((rc = gw_journal_open(&t->wal, path, &jo)) < 0)
		return rc;
	if (journal_last_seq(t->wal) && (rc = replay(t, path)) < 0)
		return rc;
	if ((rc = sync_all(t)) < 0) {
		log_err("%s/sessions: sync: %s", t->cfg->node.state_dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < t->n; i++)
		t->v[i]->ckpt_from = journal_last_seq(t->v[i]->j) + 1;
	t->wal_ready = 1;
	ev_io_init(&t->wal_io, on_wal_sync, journal_sync_fd(t->wal), EV_READ);
	t->wal_io.data = t;
	ev_io_start(loop, &t->wal_io);
	return 0;
}

void gw_wal_close(struct gw_logins *t)
{
	if (!t->wal)
		return;
	if (t->ckpt_running) {
		pthread_join(t->ckpt_thread, NULL);
		t->ckpt_running = 0;
	}
	/* a last checkpoint, so that the next start replays little; none
	 * after a start that did not end (the login journals may lack what
	 * the WAL holds: it is their only copy) or a failed sync */
	if (t->wal_ready && !t->ckpt_broken && gw_wal_await(t) == 0 && ckpt_collect(t) == 0)
		ckpt_end(t, ckpt_run(t));
	ev_io_stop(t->loop, &t->wal_io);
	journal_close(t->wal);
	t->wal = NULL;
	free(t->ckpt_items);
	t->ckpt_items = NULL;
	t->ckpt_n = t->ckpt_cap = 0;
}
