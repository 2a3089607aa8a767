/* The login table: the logins of the credentials file, found by name, each
 * with its outbound journal (<state_dir>/sessions/<LOGIN>/) and at most one
 * reader (its logged-in session), and the table's reload. Below the
 * sessions and the exec streams: it calls them only through the reader
 * ops and the opened() hook they register. Under fsync = disk the login
 * journals are not synced themselves: every record is also written to the
 * logins' one write-ahead journal, which is (wal.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "clock.h"
#include "gw_private.h"
#include "journal.h"
#include "wire.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

static uint32_t name_hash(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint32_t)(p[i] & 0xdf)) * 16777619u; /* case-folded */
	return h;
}

/* Indexes t->v[0..n) by name; a new table replaces the old one only when
 * it could be allocated. */
static int hash_build(struct gw_logins *t, size_t n)
{
	size_t size = 16;
	int32_t *hash;

	while (size < n * 2)
		size *= 2;
	hash = malloc(size * sizeof(*hash));
	if (!hash)
		return -ENOMEM;
	for (size_t i = 0; i < size; i++)
		hash[i] = -1;
	for (size_t i = 0; i < n; i++) {
		const char *name = t->v[i]->cred.login;
		size_t h = name_hash((const uint8_t *)name, strlen(name)) & (size - 1);

		while (hash[h] >= 0)
			h = (h + 1) & (size - 1);
		hash[h] = (int32_t)i;
	}
	free(t->hash);
	t->hash = hash;
	t->hash_mask = size - 1;
	return 0;
}

/* Room for n logins in t->v; 0 or -ENOMEM. */
static int table_grow(struct gw_logins *t, size_t n)
{
	struct gw_login **v = realloc(t->v, (n ? n : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	t->v = v;
	return 0;
}

/* Once per load of the file: the logins whose password is not hashed. */
static void warn_plaintext(const struct creds *c, const char *path)
{
	char names[256];
	size_t n = creds_plaintext(c, names, sizeof(names));

	if (n)
		log_warn("credentials %s: %zu plaintext password%s (%s): rehash with lockstepctl "
			 "passwd", path, n, n > 1 ? "s" : "", names);
}

/* A new login t->v[t->n] (not counted yet) for cred. */
static struct gw_login *login_new(struct gw_logins *t, const struct cred *cred)
{
	struct gw_login *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->id = (uint32_t)t->n;
	l->cred = *cred;
	t->v[t->n] = l;
	return l;
}

int gw_logins_open(struct gw_logins *t, const struct gw_config *cfg, struct gw_stats *st)
{
	char err[512];
	int rc;

	t->cfg = cfg;
	t->st = st;
	if (cfg->credentials[0] == '\0') {
		log_warn("no [gateway] credentials file: nobody can log in");
	} else if ((rc = creds_load(&t->creds, cfg->credentials, err, sizeof(err))) < 0) {
		log_err("credentials: %s", err);
		return rc;
	} else {
		warn_plaintext(&t->creds, cfg->credentials);
	}
	if (table_grow(t, t->creds.n) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < t->creds.n; i++, t->n++)
		if (!login_new(t, &t->creds.v[i]))
			return -ENOMEM;
	return hash_build(t, t->n);
}

struct gw_login *gw_login_find(const struct gw_logins *t, const uint8_t *name, size_t len)
{
	size_t h;

	while (len > 0 && name[len - 1] == ' ')
		len--;
	if (len == 0 || len > CREDS_LOGIN_LEN || !t->hash)
		return NULL;
	h = name_hash(name, len) & t->hash_mask;
	while (t->hash[h] >= 0) {
		struct gw_login *l = t->v[t->hash[h]];

		if (strlen(l->cred.login) == len && strncasecmp(l->cred.login, (const char *)name,
								 len) == 0)
			return l;
		h = (h + 1) & t->hash_mask;
	}
	return NULL;
}

/* ---- journals ------------------------------------------------------------ */

int gw_journal_open(struct journal **j, const char *path, const struct journal_options *jo)
{
	struct journal_report rep;
	int rc = journal_open(j, path, jo, &rep);

	if (rc == -EUCLEAN) {
		char why[1024];

		log_err("%s: %s", path, journal_damage_text(&rep, path, why, sizeof(why)));
		return rc;
	}
	if (rc < 0) {
		log_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (rep.cut_bytes || rep.cut_segments)
		log_warn("%s: cut %" PRIu64 " bytes, %" PRIu64 " segments at seq %" PRIu64 " (%s)",
			 path, rep.cut_bytes, rep.cut_segments, rep.bad_seq,
			 rep.bad_reason ? rep.bad_reason : "?");
	return 0;
}

static void sessions_dir(const struct gw_logins *t, char *out, size_t cap)
{
	snprintf(out, cap, "%s/sessions", t->cfg->node.state_dir);
}

/* Opens l's journal; under fsync = disk it is written, not synced: the WAL
 * (wal.c) is. Not yet passed to opened(): login_ready. */
static int journal_open_login(struct gw_logins *t, struct gw_login *l)
{
	enum journal_fsync mode = gw_fsync_modes[t->cfg->fsync];
	struct journal_options jo = { .fsync = mode == JOURNAL_FSYNC_DISK ? JOURNAL_FSYNC_NONE
									  : mode };
	char dir[300], path[320];
	int rc;

	sessions_dir(t, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, l->cred.login);
	if ((rc = gw_journal_open(&l->j, path, &jo)) < 0)
		return rc;
	l->table = t;
	return 0;
}

/* l's journal is whole (the WAL gave back what it lost): its positions,
 * and opened(). Everything it holds is on disk (gw_wal_open synced it). */
static int login_ready(struct gw_logins *t, struct gw_login *l)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/sessions/%s", t->cfg->node.state_dir, l->cred.login);
	l->next_seq = l->flushed_next = journal_last_seq(l->j) + 1;
	l->durable_next = t->wal ? l->next_seq : UINT64_MAX;
	return t->opened ? t->opened(t->opened_ctx, l, l->j, path) : 0;
}

int gw_logins_open_journals(struct gw_logins *t, struct ev_loop *loop,
			    int (*opened)(void *ctx, struct gw_login *l, struct journal *j,
					  const char *path),
			    void *ctx)
{
	char dir[300];
	int rc;

	sessions_dir(t, dir, sizeof(dir));
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		log_err("%s: %s", dir, strerror(errno));
		return -errno;
	}
	t->opened = opened;
	t->opened_ctx = ctx;
	t->loop = loop;
	for (size_t i = 0; i < t->n; i++) {
		rc = journal_open_login(t, t->v[i]);
		if (rc < 0)
			return rc;
	}
	if (gw_fsync_modes[t->cfg->fsync] == JOURNAL_FSYNC_DISK && (rc = gw_wal_open(t, loop)) < 0)
		return rc;
	for (size_t i = 0; i < t->n; i++) {
		rc = login_ready(t, t->v[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int gw_login_append(struct gw_logins *t, struct gw_login *l, uint64_t tag, const uint8_t *msg,
		    size_t len)
{
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	int rc;

	if (len > GW_MAX_EXEC_MSG)
		return -EMSGSIZE;
	wire_put_u64(rec, tag);
	memcpy(rec + 8, msg, len);
	rc = journal_append(l->j, l->next_seq, 0, rec, 8 + len);
	if (rc < 0) {
		t->st->journal_errors++;
		log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal append %" PRIu64 ": %s",
				l->cred.login, l->next_seq, strerror(-rc));
		return rc;
	}
	if (t->wal && (rc = gw_wal_append(t, l, l->next_seq, rec, 8 + len)) < 0) {
		/* not in the WAL, so not in the login's journal either */
		int cut = journal_truncate_after(l->j, l->next_seq - 1);

		if (cut < 0)
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal cut at %" PRIu64 ": %s",
					l->cred.login, l->next_seq - 1, strerror(-cut));
		return rc;
	}
	if (l->rops)
		l->rops->offer(l->reader, l->next_seq, rec + 8, len);
	if (t->stages)
		l->stage_t[l->next_seq & (GW_STAGE_LOGIN_RING - 1)] = t->stages->now;
	l->next_seq++;
	if (!l->jdirty) {
		l->jdirty = 1;
		l->next_jdirty = t->jdirty;
		t->jdirty = l;
	}
	return 0;
}

int gw_logins_flush(struct gw_logins *t)
{
	struct gw_login *failed = NULL;
	int err = 0;

	/* the WAL first: a login's records count as written with it */
	if (t->wal && t->jdirty && (err = gw_wal_flush(t)) < 0)
		return err;
	if (t->stages && t->jdirty)
		t->stages->now = mono_ns();
	while (t->jdirty) {
		struct gw_login *l = t->jdirty;
		uint64_t before = gw_login_readable(l);
		int rc = journal_flush(l->j);

		t->jdirty = l->next_jdirty;
		l->jdirty = 0;
		if (rc < 0) {
			t->st->journal_errors++;
			log_ratelimited(&gw_rl, LOG_LVL_ERR, "%s: journal flush: %s", l->cred.login,
					strerror(-rc));
			l->next_jdirty = failed; /* dirty still: written at the next flush */
			failed = l;
			err = rc;
			continue;
		}
		l->flushed_next = l->next_seq;
		if (t->stages)
			gw_stages_readable(t->stages, l, before, gw_login_readable(l));
		if (t->wal)
			gw_wal_flushed(t, l);
		if (l->rops)
			l->rops->wake(l->reader);
	}
	/* a sync that ended meanwhile counts now, not at the eventfd */
	if (t->wal)
		gw_wal_poll(t);
	while (failed) {
		struct gw_login *l = failed;

		failed = l->next_jdirty;
		l->jdirty = 1;
		l->next_jdirty = t->jdirty;
		t->jdirty = l;
	}
	return err;
}

int gw_login_read(const struct gw_login *l, uint64_t seq, uint8_t *buf, size_t cap)
{
	return journal_read(l->j, seq, buf, cap, NULL);
}

int gw_login_attach(struct gw_login *l, const struct gw_reader_ops *ops, void *reader)
{
	if (l->rops)
		return -EBUSY;
	l->rops = ops;
	l->reader = reader;
	return 0;
}

void gw_login_detach(struct gw_login *l)
{
	l->rops = NULL;
	l->reader = NULL;
}

void gw_logins_await(struct gw_logins *t)
{
	gw_logins_flush(t);
	if (t->wal)
		gw_wal_await(t);
}

void gw_logins_mark(struct gw_logins *t)
{
	gw_logins_flush(t); /* its errors are the exec path's (gw_exec_disk_full) */
	for (size_t i = 0; i < t->n; i++)
		t->v[i]->prog_mark = t->v[i]->next_seq;
}

int gw_logins_marked_durable(const struct gw_logins *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i]->j && t->v[i]->durable_next < t->v[i]->prog_mark)
			return 0;
	return 1;
}

void gw_logins_close_journals(struct gw_logins *t)
{
	gw_logins_flush(t);
	gw_wal_close(t);
	for (size_t i = 0; i < t->n; i++) {
		journal_close(t->v[i]->j);
		t->v[i]->j = NULL;
	}
}

void gw_logins_fini(struct gw_logins *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->hash);
	creds_fini(&t->creds);
	t->v = NULL;
	t->hash = NULL;
	t->n = 0;
}

/* ---- reload -------------------------------------------------------------- */

/* Adds the logins of nc that the table lacks (each with its journal);
 * a login whose journal cannot be opened is left out. */
static int add_new(struct gw_logins *t, const struct creds *nc, size_t n_new)
{
	if (table_grow(t, t->n + n_new) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < nc->n; i++) {
		struct gw_login *l;
		int rc;

		if (gw_login_find(t, (const uint8_t *)nc->v[i].login, strlen(nc->v[i].login)))
			continue;
		l = login_new(t, &nc->v[i]);
		if (!l)
			return -ENOMEM;
		if ((rc = journal_open_login(t, l)) < 0 || (rc = login_ready(t, l)) < 0) {
			journal_close(l->j);
			free(l);
			log_err("credentials: login %s: journal: %s", nc->v[i].login,
				strerror(-rc));
			continue;
		}
		t->n++;
	}
	return 0;
}

/* Logins from a re-read credentials file. A login never moves and never
 * goes away: one gone from the file is revoked (no new login; its reader
 * is told to end; executions of its orders are still journalled for it),
 * one kept or back takes its new password, firm and options, one new gets
 * a journal. */
int gw_logins_reload(struct gw_logins *t, const char *path, char *msg, size_t msglen)
{
	struct creds nc = { 0 };
	size_t n_new = 0, n_old = t->n, revoked = 0;
	char err[512];
	int rc = 0;

	if (path[0] && (rc = creds_load(&nc, path, err, sizeof(err))) < 0) {
		snprintf(msg, msglen, "credentials: %s", err);
		creds_fini(&nc);
		return rc;
	}
	warn_plaintext(&nc, path);
	for (size_t i = 0; i < nc.n; i++)
		if (!gw_login_find(t, (const uint8_t *)nc.v[i].login, strlen(nc.v[i].login)))
			n_new++;
	if (n_new && (rc = add_new(t, &nc, n_new)) == 0 && t->n != n_old)
		rc = hash_build(t, t->n);
	if (n_new && rc < 0) {
		for (size_t i = n_old; i < t->n; i++) {
			journal_close(t->v[i]->j); /* the new ones cannot be found: drop them */
			free(t->v[i]);
		}
		t->n = n_old;
		creds_fini(&nc);
		snprintf(msg, msglen, "credentials: out of memory");
		return rc;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct gw_login *l = t->v[i];
		const struct cred *c = creds_find(&nc, l->cred.login);

		l->revoked = !c;
		if (c) {
			l->cred = *c;
			continue;
		}
		revoked++;
		if (l->rops)
			l->rops->end(l->reader);
	}
	creds_fini(&t->creds);
	t->creds = nc;
	snprintf(msg, msglen, "%zu logins (%zu new, %zu revoked)", t->n - revoked, t->n - n_old,
		 revoked);
	return 0;
}
