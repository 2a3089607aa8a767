/* Authentication of cluster datagrams: key files, key derivation, the
 * trailer (auth.h says why it is a message block and what it covers). */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "moldudp64.h"
#include "wire.h"

const char *const auth_surface_names[AUTH_N_SURFACES] = {
	"commands", "tape", "exec", "raft", "votes", "requests", "flow",
};

const char *auth_strerror(int err)
{
	switch (err) {
	case AUTH_OK:
		return "ok";
	case AUTH_E_SHORT:
		return "no authentication trailer";
	case AUTH_E_TRAILER:
		return "last block is not an authentication trailer";
	case AUTH_E_KEY:
		return "unknown key id";
	case AUTH_E_TAG:
		return "bad tag";
	case AUTH_E_COUNT:
		return "message count does not match the trailer";
	case AUTH_E_NOSPACE:
		return "no room for the trailer";
	}
	return "unknown error";
}

/* ---- key files ---------------------------------------------------------- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Splits line[0..len) into at most 3 words; returns how many (4: too many). */
static unsigned split_words(const char *p, size_t len, const char *w[3], size_t wl[3])
{
	unsigned n = 0;
	size_t i = 0;

	while (i < len) {
		while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
			i++;
		if (i == len || p[i] == '#')
			break;
		if (n == 3)
			return 4;
		w[n] = p + i;
		while (i < len && p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '#')
			i++;
		wl[n] = (size_t)(p + i - w[n]);
		n++;
	}
	return n;
}

static int parse_id(const char *w, size_t wl, uint8_t *out)
{
	unsigned v = 0;

	if (wl == 0 || wl > 3)
		return -1;
	for (size_t i = 0; i < wl; i++) {
		if (w[i] < '0' || w[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(w[i] - '0');
	}
	if (v < 1 || v > 255)
		return -1;
	*out = (uint8_t)v;
	return 0;
}

static int find_id(const struct auth_keys *k, uint8_t id)
{
	for (unsigned i = 0; i < k->n; i++)
		if (k->id[i] == id)
			return (int)i;
	return -1;
}

static int parse_key_line(struct auth_keys *k, const char *const w[3], const size_t wl[3],
			  unsigned line, char *err, size_t errlen)
{
	uint8_t id;

	if (parse_id(w[1], wl[1], &id) < 0) {
		snprintf(err, errlen, "line %u: a key id is a number from 1 to 255", line);
		return -EINVAL;
	}
	if (find_id(k, id) >= 0) {
		snprintf(err, errlen, "line %u: key id %u given twice", line, id);
		return -EINVAL;
	}
	if (k->n == AUTH_MAX_KEYS) {
		snprintf(err, errlen, "line %u: more than %d keys", line, AUTH_MAX_KEYS);
		return -EINVAL;
	}
	if (wl[2] != 2 * AUTH_KEY_LEN) {
		snprintf(err, errlen, "line %u: a key is %d hex digits", line, 2 * AUTH_KEY_LEN);
		return -EINVAL;
	}
	for (size_t i = 0; i < AUTH_KEY_LEN; i++) {
		int hi = hexval(w[2][2 * i]), lo = hexval(w[2][2 * i + 1]);

		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "line %u: a key is %d hex digits", line,
				 2 * AUTH_KEY_LEN);
			return -EINVAL;
		}
		k->key[k->n][i] = (uint8_t)(hi << 4 | lo);
	}
	k->id[k->n++] = id;
	return 0;
}

static int parse_line(struct auth_keys *k, const char *p, size_t len, unsigned line, int *send_line,
		      char *err, size_t errlen)
{
	const char *w[3];
	size_t wl[3];
	unsigned n = split_words(p, len, w, wl);

	if (n == 0)
		return 0;
	if (n == 3 && wl[0] == 11 && memcmp(w[0], "cluster-key", 11) == 0)
		return parse_key_line(k, w, wl, line, err, errlen);
	if (n == 2 && wl[0] == 4 && memcmp(w[0], "send", 4) == 0) {
		if (*send_line) {
			snprintf(err, errlen, "line %u: send given twice", line);
			return -EINVAL;
		}
		if (parse_id(w[1], wl[1], &k->send_id) < 0) {
			snprintf(err, errlen, "line %u: a key id is a number from 1 to 255", line);
			return -EINVAL;
		}
		*send_line = (int)line;
		return 0;
	}
	snprintf(err, errlen, "line %u: expected 'cluster-key ID HEX' or 'send ID'", line);
	return -EINVAL;
}

int auth_keyfile_parse(const char *text, size_t len, struct auth_keys *out, char *err,
		       size_t errlen)
{
	struct auth_keys k = { 0 };
	unsigned line = 1;
	int send_line = 0, r;
	size_t i = 0;

	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;

		if (memchr(text + i, '\0', end - i)) {
			snprintf(err, errlen, "line %u: a NUL byte", line);
			return -EINVAL;
		}
		if ((r = parse_line(&k, text + i, end - i, line, &send_line, err, errlen)) < 0)
			return r;
		i = end + 1;
		line++;
	}
	if (k.n == 0) {
		snprintf(err, errlen, "no cluster-key line (make one with: lockstepctl keygen)");
		return -EINVAL;
	}
	if (!send_line) {
		if (k.n > 1) {
			snprintf(err, errlen, "%u keys and no 'send ID' line saying which to tag with",
				 k.n);
			return -EINVAL;
		}
		k.send_id = k.id[0];
	} else if (find_id(&k, k.send_id) < 0) {
		snprintf(err, errlen, "line %d: send %u names no key of the file", send_line,
			 k.send_id);
		return -EINVAL;
	}
	*out = k;
	sodium_memzero(&k, sizeof(k));
	return 0;
}

int auth_keyfile_load(const char *path, struct auth_keys *out, char *err, size_t errlen)
{
	char buf[2048], perr[160];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & 007)) {
		r = (st.st_mode & 007) ? -EPERM : -errno;
		close(fd);
		snprintf(err, errlen, "%s: %s", path,
			 r == -EPERM ? "others may read it (chmod 0640; lockstepctl keygen makes "
				       "it so)" : strerror(-r));
		return r;
	}
	n = read(fd, buf, sizeof(buf));
	r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0 || n == (ssize_t)sizeof(buf)) {
		snprintf(err, errlen, "%s: %s", path, r < 0 ? strerror(-r) : "longer than 2 KiB");
		return r < 0 ? r : -EINVAL;
	}
	r = auth_keyfile_parse(buf, (size_t)n, out, perr, sizeof(perr));
	sodium_memzero(buf, sizeof(buf));
	if (r < 0)
		snprintf(err, errlen, "%s: %s", path, perr);
	return r;
}

void auth_keys_generate(struct auth_keys *k)
{
	memset(k, 0, sizeof(*k));
	if (sodium_init() < 0)
		abort(); /* no entropy: nothing safe to do */
	k->n = 1;
	k->id[0] = 1;
	k->send_id = 1;
	randombytes_buf(k->key[0], AUTH_KEY_LEN);
}

size_t auth_keyfile_format(const struct auth_keys *k, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = 0;
	int w;

	w = snprintf(out, cap, "# lockstep cluster key (lockstepctl keygen): the same file on "
			       "every member, mode 0640, group lockstep\n");
	if (w < 0 || (size_t)w >= cap)
		return 0;
	len = (size_t)w;
	for (unsigned i = 0; i < k->n; i++) {
		if (len + 20 + 2 * AUTH_KEY_LEN >= cap)
			return 0;
		len += (size_t)snprintf(out + len, cap - len, "cluster-key %u ", k->id[i]);
		for (size_t j = 0; j < AUTH_KEY_LEN; j++) {
			out[len++] = hex[k->key[i][j] >> 4];
			out[len++] = hex[k->key[i][j] & 15];
		}
		out[len++] = '\n';
	}
	w = snprintf(out + len, cap - len, "send %u\n", k->send_id);
	if (w < 0 || (size_t)w >= cap - len)
		return 0;
	return len + (size_t)w;
}

/* ---- keys --------------------------------------------------------------- */

static int cluster_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= AUTH_CLUSTER_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (name[i] <= ' ' || name[i] > '~')
			return 0;
	return 1;
}

/* sub = BLAKE2b-128 keyed by the cluster key over "lockstep auth 1",
 * the surface's name and the cluster's name, NUL-separated. */
static void derive(uint8_t sub[AUTH_SUBKEY_LEN], const uint8_t key[AUTH_KEY_LEN],
		   enum auth_surface s, const char *cluster)
{
	crypto_generichash_state st;
	static const char label[] = "lockstep auth 1";

	crypto_generichash_init(&st, key, AUTH_KEY_LEN, AUTH_SUBKEY_LEN);
	crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label));
	crypto_generichash_update(&st, (const uint8_t *)auth_surface_names[s],
				  strlen(auth_surface_names[s]) + 1);
	crypto_generichash_update(&st, (const uint8_t *)cluster, strlen(cluster) + 1);
	crypto_generichash_final(&st, sub, AUTH_SUBKEY_LEN);
}

int auth_init(struct auth *a, const char *cluster, const struct auth_keys *k)
{
	int send;

	if (!cluster_name_ok(cluster) || k->n == 0 || k->n > AUTH_MAX_KEYS ||
	    (send = find_id(k, k->send_id)) < 0)
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	memset(a, 0, sizeof(*a));
	a->on = 1;
	memcpy(a->cluster, cluster, strlen(cluster) + 1);
	a->n = k->n;
	a->send = (unsigned)send;
	for (unsigned i = 0; i < k->n; i++) {
		a->id[i] = k->id[i];
		for (int s = 0; s < AUTH_N_SURFACES; s++)
			derive(a->sub[i][s], k->key[i], (enum auth_surface)s, cluster);
	}
	return 0;
}

void auth_init_off(struct auth *a)
{
	memset(a, 0, sizeof(*a));
}

/* ---- the trailer --------------------------------------------------------- */

#define MOLD_COUNT_AT (MOLD_SESSION_LEN + 8) /* after the session and the sequence number */

int64_t auth_seal(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t len,
		  size_t cap, size_t mold_off)
{
	uint8_t *t = buf + len;
	uint16_t count = 0;

	if (!a->on)
		return (int64_t)len;
	if (len + AUTH_TRAILER_LEN > cap || len + AUTH_TRAILER_LEN > 0xFFFF)
		return AUTH_E_NOSPACE;
	if (mold_off != AUTH_RAW) {
		if (len < mold_off + MOLD_HEADER_LEN)
			return AUTH_E_SHORT;
		count = wire_get_u16(buf + mold_off + MOLD_COUNT_AT);
		/* blocks follow: one more; a heartbeat, an end of session or a
		 * request: the trailer alone */
		if (len > mold_off + MOLD_HEADER_LEN && count >= 0xFFFE)
			return AUTH_E_NOSPACE;
		wire_put_u16(buf + mold_off + MOLD_COUNT_AT,
		      len > mold_off + MOLD_HEADER_LEN ? (uint16_t)(count + 1) : 1);
	}
	wire_put_u16(t, AUTH_TRAILER_LEN - 2);
	t[2] = AUTH_TRAILER_MAGIC;
	t[3] = a->id[a->send];
	wire_put_u16(t + 4, count);
	crypto_shorthash_siphashx24(t + 6, buf, len + 6, a->sub[a->send][s]);
	return (int64_t)(len + AUTH_TRAILER_LEN);
}

static int key_index(const struct auth *a, uint8_t id)
{
	for (unsigned i = 0; i < a->n; i++)
		if (a->id[i] == id)
			return (int)i;
	return -1;
}

int auth_open(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t len,
	      size_t mold_off, size_t *inner, unsigned *key_idx)
{
	uint8_t tag[AUTH_TAG_LEN];
	const uint8_t *t;
	size_t body;
	uint16_t count;
	int k;

	if (!a->on) {
		*inner = len;
		return AUTH_OK;
	}
	if (len < AUTH_TRAILER_LEN ||
	    (mold_off != AUTH_RAW && len < mold_off + MOLD_HEADER_LEN + AUTH_TRAILER_LEN))
		return AUTH_E_SHORT;
	body = len - AUTH_TRAILER_LEN;
	t = buf + body;
	if (wire_get_u16(t) != AUTH_TRAILER_LEN - 2 || t[2] != AUTH_TRAILER_MAGIC)
		return AUTH_E_TRAILER;
	if ((k = key_index(a, t[3])) < 0)
		return AUTH_E_KEY;
	crypto_shorthash_siphashx24(tag, buf, body + 6, a->sub[k][s]);
	if (sodium_memcmp(tag, t + 6, AUTH_TAG_LEN) != 0)
		return AUTH_E_TAG;
	count = wire_get_u16(t + 4);
	if (mold_off != AUTH_RAW) {
		uint16_t hdr = wire_get_u16(buf + mold_off + MOLD_COUNT_AT);
		uint16_t want = body > mold_off + MOLD_HEADER_LEN ? (uint16_t)(count + 1) : 1;

		if (hdr != want || (body > mold_off + MOLD_HEADER_LEN && count >= 0xFFFE))
			return AUTH_E_COUNT;
		wire_put_u16(buf + mold_off + MOLD_COUNT_AT, count);
	}
	*inner = body;
	if (key_idx)
		*key_idx = (unsigned)k;
	return AUTH_OK;
}

unsigned auth_key_id_of(const uint8_t *buf, size_t len)
{
	const uint8_t *t;

	if (len < AUTH_TRAILER_LEN)
		return 0;
	t = buf + len - AUTH_TRAILER_LEN;
	if (wire_get_u16(t) != AUTH_TRAILER_LEN - 2 || t[2] != AUTH_TRAILER_MAGIC)
		return 0;
	return t[3];
}
