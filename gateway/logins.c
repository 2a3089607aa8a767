/* The login table: the logins of the credentials file, found by name, and
 * its reload. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_private.h"
#include "journal.h"

static uint32_t name_hash(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint32_t)(p[i] & 0xdf)) * 16777619u; /* case-folded */
	return h;
}

/* Indexes g->logins[0..n) by name; a new table replaces the old one only
 * when it could be allocated. */
static int hash_build(struct gw *g, size_t n)
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
		const char *name = g->logins[i].cred.login;
		size_t h = name_hash((const uint8_t *)name, strlen(name)) & (size - 1);

		while (hash[h] >= 0)
			h = (h + 1) & (size - 1);
		hash[h] = (int32_t)i;
	}
	free(g->hash);
	g->hash = hash;
	g->hash_mask = size - 1;
	return 0;
}

int gw_logins_build(struct gw *g)
{
	g->logins = calloc(g->creds.n ? g->creds.n : 1, sizeof(*g->logins));
	if (!g->logins)
		return -ENOMEM;
	for (size_t i = 0; i < g->creds.n; i++)
		g->logins[i].cred = g->creds.v[i];
	g->n_logins = g->creds.n;
	return hash_build(g, g->n_logins);
}

/* name: len bytes, trailing spaces allowed (exec block user, Login Request). */
struct gw_login *gw_login_find(struct gw *g, const uint8_t *name, size_t len)
{
	size_t h;

	while (len > 0 && name[len - 1] == ' ')
		len--;
	if (len == 0 || len > GW_LOGIN_LEN)
		return NULL;
	h = name_hash(name, len) & g->hash_mask;
	while (g->hash[h] >= 0) {
		struct gw_login *l = &g->logins[g->hash[h]];

		if (strlen(l->cred.login) == len && strncasecmp(l->cred.login, (const char *)name,
								 len) == 0)
			return l;
		h = (h + 1) & g->hash_mask;
	}
	return NULL;
}

/* Logins from a re-read credentials file. A login never moves while its
 * session or the journal flush list may point at it, and never goes away:
 * one gone from the file is revoked (no new login; its session gets End of
 * Session; executions of its orders are still journalled for it), one kept
 * or back takes its new password, firm and options, one new gets a journal
 * (the table grows by a copy, the sessions' pointers follow). */
int gw_logins_reload(struct gw *g, const char *path, char *msg, size_t msglen)
{
	struct gw_creds nc = { 0 };
	struct gw_login *nl;
	size_t n_new = 0, n_old = g->n_logins, revoked = 0;
	char err[512];
	int rc;

	if (path[0] && (rc = gw_creds_load(&nc, path, err, sizeof(err))) < 0) {
		snprintf(msg, msglen, "credentials: %s", err);
		gw_creds_fini(&nc);
		return rc;
	}
	for (size_t i = 0; i < nc.n; i++)
		if (!gw_login_find(g, (const uint8_t *)nc.v[i].login, strlen(nc.v[i].login)))
			n_new++;
	if (n_new) {
		gw_exec_flush(g); /* empties the flush list, which points at logins */
		nl = calloc(n_old + n_new, sizeof(*nl));
		if (!nl) {
			gw_creds_fini(&nc);
			snprintf(msg, msglen, "credentials: out of memory");
			return -ENOMEM;
		}
		memcpy(nl, g->logins, n_old * sizeof(*nl));
		for (struct gw_session *s = g->sessions; s; s = s->next)
			if (s->login)
				s->login = nl + (s->login - g->logins);
		free(g->logins);
		g->logins = nl;
	}
	for (size_t i = 0; i < n_old; i++)
		g->logins[i].revoked = 1;
	for (size_t i = 0; i < nc.n; i++) {
		struct gw_login *l = gw_login_find(g, (const uint8_t *)nc.v[i].login,
						   strlen(nc.v[i].login));

		if (!l) {
			l = &g->logins[g->n_logins];
			memset(l, 0, sizeof(*l));
			l->cred = nc.v[i];
			if ((rc = gw_exec_open_login(g, l)) < 0) {
				journal_close(l->j);
				memset(l, 0, sizeof(*l));
				log_err("credentials: login %s: journal: %s", nc.v[i].login,
					strerror(-rc));
				continue;
			}
			g->n_logins++;
		}
		l->cred = nc.v[i];
		l->revoked = 0;
	}
	if (g->n_logins != n_old && (rc = hash_build(g, g->n_logins)) < 0) {
		g->n_logins = n_old; /* the new ones cannot be found: drop them */
		for (size_t i = n_old; i < n_old + n_new; i++)
			journal_close(g->logins[i].j);
		gw_creds_fini(&nc);
		snprintf(msg, msglen, "credentials: out of memory");
		return rc;
	}
	for (size_t i = 0; i < g->n_logins; i++) {
		if (!g->logins[i].revoked)
			continue;
		revoked++;
		if (g->logins[i].sess)
			gw_session_end(g->logins[i].sess);
	}
	gw_creds_fini(&g->creds);
	g->creds = nc;
	snprintf(msg, msglen, "%zu logins (%zu new, %zu revoked)", g->n_logins - revoked,
		 g->n_logins - n_old, revoked);
	return 0;
}
