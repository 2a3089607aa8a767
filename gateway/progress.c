/* The progress file, gateway.pos: where each stream resumes after a
 * restart, loaded at start and saved once a second off the event loop.
 *
 * A save captures the positions, then waits, without blocking, until every
 * login's journal holds on disk what it held at the capture (the exec
 * positions count only blocks journalled, so a power cut never leaves the
 * file ahead of the journals it skips by; the day key likewise), then hands
 * the text to a writer thread that replaces the file durably
 * (common/durable.h: a new file, fsync, rename, directory fsync). The
 * loop never waits for the disk here: a save used to wait for every
 * login's sync and then for three more, once a second. At stop,
 * gw_progress_save_now does it all in line. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "daemon_wait.h"
#include "durable.h"
#include "gw_private.h"
#include "journal.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

/* <state_dir>/gateway.pos: "cmd_acked N\ntape_next N\nexec_next N\n", then
 * "exec_next_P N\n" for each partition P >= 1, then the trading day's
 * "day_key K\nday_hold I\ntape_day D\ntape_day_base B\n" (a file without
 * them: day 1, nothing journalled), then for each tape K >= 1 its
 * "cmd_acked_K N\ntape_next_K N\ntape_day_K D\ntape_day_base_K B\n". A conservative position: resending
 * committed commands is harmless (the sequencer drops duplicates), exec
 * blocks already journalled for a login are skipped by partition and exec
 * sequence number, and day events by their key (day.c). tape_next (a tape
 * index) stays before a day event not yet journalled. v: GW_POS_*. */
static void progress_path(const struct gw *g, char *out, size_t cap, const char *suffix)
{
	snprintf(out, cap, "%s/gateway.pos%s", g->cfg.node.state_dir, suffix);
}

/* The key=value lines after the first three (an unknown key is left). */
static void progress_load_rest(FILE *f, uint64_t v[GW_N_POS])
{
	static const struct {
		const char *name;
		unsigned pos;
	} keys[] = {
		{ "day_key", GW_POS_DAY_KEY },
		{ "day_hold", GW_POS_DAY_HOLD },
		{ "tape_day", GW_POS_TAPE_DAY },
		{ "tape_day_base", GW_POS_TAPE_BASE },
	};
	static const char *const tape_keys[] = { "cmd_acked", "tape_next", "tape_day",
						 "tape_day_base" };
	static const unsigned tape_pos[] = { GW_POS_CMD, GW_POS_TAPE, GW_POS_TAPE_DAY,
					     GW_POS_TAPE_BASE };
	char key[32], extra;
	unsigned p;
	uint64_t n;

	while (fscanf(f, " %31[a-z_0-9] %" SCNu64, key, &n) == 2) {
		/* tapes >= 1; one no longer configured is forgotten */
		for (size_t i = 0; i < 4; i++) {
			size_t len = strlen(tape_keys[i]);

			if (strncmp(key, tape_keys[i], len) == 0 && key[len] == '_' &&
			    sscanf(key + len + 1, "%u%c", &p, &extra) == 1 && p >= 1 &&
			    p < GW_MAX_TAPES)
				v[gw_pos_of(p, tape_pos[i])] = n;
		}
		/* partitions >= 1; one no longer configured is forgotten */
		if (sscanf(key, "exec_next_%u%c", &p, &extra) == 1) {
			if (p >= 1 && p < GW_MAX_PARTITIONS)
				v[GW_POS_EXEC + p] = n;
			continue;
		}
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcmp(key, keys[i].name) == 0)
				v[keys[i].pos] = n;
	}
}

void gw_progress_load(struct gw *g, uint64_t v[GW_N_POS])
{
	char path[300];
	FILE *f;

	progress_path(g, path, sizeof(path), "");
	memset(v, 0, GW_N_POS * sizeof(*v));
	f = fopen(path, "r");
	if (!f)
		return;
	if (fscanf(f, "cmd_acked %" SCNu64 " tape_next %" SCNu64 " exec_next %" SCNu64,
		   &v[GW_POS_CMD], &v[GW_POS_TAPE], &v[GW_POS_EXEC]) != 3) {
		log_warn("%s: unreadable, starting without it", path);
		memset(v, 0, GW_N_POS * sizeof(*v));
	} else {
		progress_load_rest(f, v);
	}
	fclose(f);
	/* a position no stream reaches (a file damaged, or saved by an older
	 * gateway that believed a forged heartbeat): not believed */
	for (unsigned i = 0; i < GW_N_POS; i++)
		if (v[i] >= RX_SEQ_LIMIT) {
			log_warn("%s: position %" PRIu64 " is beyond any stream's (%llu): starting "
				 "without the file",
				 path, v[i], (unsigned long long)RX_SEQ_LIMIT);
			memset(v, 0, GW_N_POS * sizeof(*v));
			return;
		}
}

/* The positions to save now (GW_POS_*). */
static void capture(struct gw *g, uint64_t v[GW_N_POS])
{
	uint64_t pend = gw_day_pending_from(g);

	memset(v, 0, GW_N_POS * sizeof(*v));
	for (unsigned k = 0; k < g->n_tapes; k++) {
		const struct gw_tape *t = &g->tape[k];

		v[gw_pos_of(k, GW_POS_CMD)] = g->cmd[k].acked;
		/* tape 0 stays before a day event not yet journalled */
		v[gw_pos_of(k, GW_POS_TAPE)] = k || t->s.next < pend ? t->s.next : pend;
		if (t->days.n > 0 && tapeday_last(&t->days)->day > 1) {
			v[gw_pos_of(k, GW_POS_TAPE_DAY)] = tapeday_last(&t->days)->day;
			v[gw_pos_of(k, GW_POS_TAPE_BASE)] = tapeday_last(&t->days)->base;
		}
	}
	for (unsigned p = 0; p < g->n_parts; p++)
		v[GW_POS_EXEC + p] = g->exec.parts[p].exec.next;
	v[GW_POS_DAY_KEY] = g->day.key;
	v[GW_POS_DAY_HOLD] = pend != UINT64_MAX ? pend : 0;
}

/* The file's text for v; its length. */
static size_t format(const struct gw *g, const uint64_t v[GW_N_POS], char *text, size_t cap)
{
	size_t n = (size_t)snprintf(text, cap,
				    "cmd_acked %" PRIu64 "\ntape_next %" PRIu64 "\nexec_next %" PRIu64
				    "\n",
				    v[GW_POS_CMD], v[GW_POS_TAPE], v[GW_POS_EXEC]);

	for (unsigned p = 1; p < g->n_parts && n < cap; p++)
		n += (size_t)snprintf(text + n, cap - n, "exec_next_%u %" PRIu64 "\n", p,
				      v[GW_POS_EXEC + p]);
	if (n < cap)
		n += (size_t)snprintf(text + n, cap - n,
				      "day_key %" PRIu64 "\nday_hold %" PRIu64 "\ntape_day %" PRIu64
				      "\ntape_day_base %" PRIu64 "\n",
				      v[GW_POS_DAY_KEY], v[GW_POS_DAY_HOLD], v[GW_POS_TAPE_DAY],
				      v[GW_POS_TAPE_BASE]);
	for (unsigned k = 1; k < g->n_tapes && n < cap; k++)
		n += (size_t)snprintf(text + n, cap - n,
				      "cmd_acked_%u %" PRIu64 "\ntape_next_%u %" PRIu64
				      "\ntape_day_%u %" PRIu64 "\ntape_day_base_%u %" PRIu64 "\n",
				      k, v[gw_pos_of(k, GW_POS_CMD)], k, v[gw_pos_of(k, GW_POS_TAPE)],
				      k, v[gw_pos_of(k, GW_POS_TAPE_DAY)], k,
				      v[gw_pos_of(k, GW_POS_TAPE_BASE)]);
	return n < cap ? n : cap - 1;
}

static int write_file(const char *path, const char *text, size_t len)
{
	struct iovec iov = { (void *)text, len };

	return durable_write(path, &iov, 1, 0644);
}

/* The writer thread: one file at a time, what the loop handed it last. */
static void *writer_main(void *arg)
{
	struct gw_progress *p = arg;

	daemon_thread_off_path("progress-save");
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->job && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (!p->job)
			break;
		pthread_mutex_unlock(&p->mu);
		/* text and path are the thread's while job is set */
		int rc = write_file(p->path, p->text, p->len);

		pthread_mutex_lock(&p->mu);
		p->err = rc;
		p->job = 0;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int gw_progress_open(struct gw *g)
{
	struct gw_progress *p = &g->prog;

	progress_path(g, p->path, sizeof(p->path), "");
	if (pthread_mutex_init(&p->mu, NULL) != 0)
		return -ENOMEM;
	if (pthread_cond_init(&p->cv, NULL) != 0) {
		pthread_mutex_destroy(&p->mu);
		return -ENOMEM;
	}
	p->made = 1;
	if (pthread_create(&p->thread, NULL, writer_main, p) == 0)
		p->started = 1; /* else every save is in line */
	return 0;
}

/* Ends the writer thread after the file it is writing. */
static void writer_stop(struct gw_progress *p)
{
	if (!p->started)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	p->started = 0;
}

void gw_progress_close(struct gw *g)
{
	struct gw_progress *p = &g->prog;

	writer_stop(p);
	if (p->made) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		p->made = 0;
	}
}

/* Hands v's file to the writer: 0, or -EBUSY while it writes the one before. */
static int hand_off(struct gw *g, const uint64_t v[GW_N_POS])
{
	struct gw_progress *p = &g->prog;
	int err;

	if (!p->started) {
		char text[sizeof(p->text)];
		int rc = write_file(p->path, text, format(g, v, text, sizeof(text)));

		if (rc < 0)
			log_ratelimited(&gw_rl, LOG_LVL_WARNING, "%s: %s", p->path, strerror(-rc));
		return 0;
	}
	pthread_mutex_lock(&p->mu);
	if (p->job) {
		pthread_mutex_unlock(&p->mu);
		return -EBUSY;
	}
	err = p->err;
	p->err = 0;
	p->len = format(g, v, p->text, sizeof(p->text));
	p->job = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (err < 0) /* the one before: this one replaces it */
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "%s: %s", p->path, strerror(-err));
	return 0;
}

void gw_progress_tick(struct gw *g)
{
	struct gw_progress *p = &g->prog;

	if (!p->waiting) {
		capture(g, p->v);
		if (memcmp(p->v, g->persisted, sizeof(p->v)) == 0)
			return;
		gw_logins_mark(&g->logins);
		p->waiting = 1;
	}
	if (!gw_logins_marked_durable(&g->logins) || hand_off(g, p->v) < 0)
		return; /* at the next tick */
	memcpy(g->persisted, p->v, sizeof(p->v));
	p->waiting = 0;
}

void gw_progress_save_now(struct gw *g)
{
	uint64_t v[GW_N_POS];
	char text[sizeof(g->prog.text)];
	int rc;

	writer_stop(&g->prog); /* its file first: ours is newer */
	gw_logins_await(&g->logins);
	capture(g, v);
	if (memcmp(v, g->persisted, sizeof(v)) == 0)
		return;
	rc = write_file(g->prog.path, text, format(g, v, text, sizeof(text)));
	if (rc < 0) {
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "%s: %s", g->prog.path, strerror(-rc));
		return;
	}
	memcpy(g->persisted, v, sizeof(v));
	g->prog.waiting = 0;
}
