/* The credentials file: an INI file whose [logins] section maps each
 * SoupBinTCP username to its password, firm and options. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "config.h"
#include "creds.h"

_Static_assert(CREDS_HASH_LEN == crypto_pwhash_STRBYTES, "a hash string's room");

#define ARGON2ID_PREFIX "$argon2id$"

/* Copies an alphanumeric word of 1..max characters, upper-cased when `upper`. */
static int take_word(const char *w, size_t n, size_t max, int upper, char *out)
{
	if (n == 0 || n > max)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isalnum((unsigned char)w[i]))
			return -EINVAL;
		out[i] = upper ? (char)toupper((unsigned char)w[i]) : w[i];
	}
	out[n] = '\0';
	return 0;
}

int creds_parse(const char *login, const char *value, struct cred *out, char *err,
		  size_t errlen)
{
	struct cred c = { 0 };
	const char *p = value;
	const char *words[4];
	size_t lens[4], n = 0;

	if (take_word(login, strlen(login), CREDS_LOGIN_LEN, 1, c.login) < 0) {
		snprintf(err, errlen, "login \"%s\": 1 to %d letters or digits", login,
			 CREDS_LOGIN_LEN);
		return -EINVAL;
	}
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (n == 4) {
			snprintf(err, errlen, "login %s: too many words", c.login);
			return -EINVAL;
		}
		words[n] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		lens[n] = (size_t)(p - words[n]);
		n++;
	}
	if (n < 2) {
		snprintf(err, errlen, "login %s: want \"PASSWORD FIRM [cancel_on_disconnect]\"",
			 c.login);
		return -EINVAL;
	}
	if (lens[0] > strlen(ARGON2ID_PREFIX) &&
	    strncmp(words[0], ARGON2ID_PREFIX, strlen(ARGON2ID_PREFIX)) == 0) {
		char why[128];

		if (lens[0] >= CREDS_HASH_LEN) {
			snprintf(err, errlen, "login %s: password hash longer than %d characters",
				 c.login, CREDS_HASH_LEN - 1);
			return -EINVAL;
		}
		memcpy(c.hash, words[0], lens[0]);
		c.hash[lens[0]] = '\0';
		if (creds_hash_check(c.hash, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "login %s: password hash: %s", c.login, why);
			return -EINVAL;
		}
	} else if (words[0][0] == '$') {
		snprintf(err, errlen, "login %s: password hash: not an Argon2id hash "
			 "(lockstepctl passwd makes one)", c.login);
		return -EINVAL;
	} else if (take_word(words[0], lens[0], CREDS_PASSWORD_LEN, 0, c.password) < 0) {
		snprintf(err, errlen, "login %s: password: 1 to %d letters or digits", c.login,
			 CREDS_PASSWORD_LEN);
		return -EINVAL;
	}
	if (take_word(words[1], lens[1], CREDS_FIRM_LEN, 1, c.firm) < 0) {
		snprintf(err, errlen, "login %s: firm: 1 to %d letters or digits", c.login,
			 CREDS_FIRM_LEN);
		return -EINVAL;
	}
	for (size_t i = 2; i < n; i++) {
		if (lens[i] == 20 && strncmp(words[i], "cancel_on_disconnect", 20) == 0) {
			c.cancel_on_disconnect = 1;
			continue;
		}
		snprintf(err, errlen, "login %s: unknown option \"%.*s\"", c.login, (int)lens[i],
			 words[i]);
		return -EINVAL;
	}
	*out = c;
	return 0;
}

/* ASCII upper to lower case without a branch on the byte. */
static unsigned fold(unsigned char ch)
{
	unsigned up = (unsigned)((ch - 'A') & 0xffu) < 26u;

	return ch | (up << 5);
}

int creds_password_ok(const struct cred *c, const char *given)
{
	static const char none[CREDS_PASSWORD_LEN + 1]; /* no login: compared with "" */
	char a[CREDS_PASSWORD_LEN + 1] = { 0 }, b[CREDS_PASSWORD_LEN + 1] = { 0 };
	const char *want = c ? c->password : none;
	unsigned diff = 0;

	memcpy(a, want, strnlen(want, CREDS_PASSWORD_LEN));
	memcpy(b, given, strnlen(given, CREDS_PASSWORD_LEN + 1) > CREDS_PASSWORD_LEN
				 ? CREDS_PASSWORD_LEN : strnlen(given, CREDS_PASSWORD_LEN));
	/* every byte, whatever the first difference: the time says nothing of
	 * how much of a guess was right */
	for (size_t i = 0; i <= CREDS_PASSWORD_LEN; i++)
		diff |= fold((unsigned char)a[i]) ^ fold((unsigned char)b[i]);
	diff |= strnlen(given, CREDS_PASSWORD_LEN + 1) > CREDS_PASSWORD_LEN; /* too long: never */
	return c && diff == 0;
}

int creds_password_normalise(const char *in, char out[CREDS_PASSWORD_LEN + 1])
{
	char w[CREDS_PASSWORD_LEN + 1];
	size_t n = strlen(in);

	while (n > 0 && in[n - 1] == ' ')
		n--;
	if (take_word(in, n, CREDS_PASSWORD_LEN, 1, w) < 0)
		return -EINVAL;
	memcpy(out, w, sizeof(w));
	sodium_memzero(w, sizeof(w));
	return 0;
}

int creds_password_hash(const char *normalised, char out[CREDS_HASH_LEN])
{
	if (sodium_init() < 0 ||
	    crypto_pwhash_str(out, normalised, strlen(normalised), CREDS_PWHASH_OPSLIMIT,
			      CREDS_PWHASH_MEMLIMIT) != 0)
		return -ENOMEM;
	return 0;
}

int creds_password_verify(const char *hash, const char *normalised)
{
	return sodium_init() >= 0 &&
	       crypto_pwhash_str_verify(hash, normalised, strlen(normalised)) == 0;
}

int creds_dummy_hash(char out[CREDS_HASH_LEN])
{
	char pw[CREDS_PASSWORD_LEN + 1];
	int rc;

	if (sodium_init() < 0)
		return -ENOMEM;
	randombytes_buf(pw, CREDS_PASSWORD_LEN);
	for (size_t i = 0; i < CREDS_PASSWORD_LEN; i++)
		pw[i] = (char)('A' + (unsigned char)pw[i] % 26);
	pw[CREDS_PASSWORD_LEN] = '\0';
	rc = creds_password_hash(pw, out);
	sodium_memzero(pw, sizeof(pw));
	return rc;
}

int creds_hash_check(const char *s, char *err, size_t errlen)
{
	unsigned v, m, t, p;
	int end = 0;

	if (sscanf(s, ARGON2ID_PREFIX "v=%u$m=%u,t=%u,p=%u$%n", &v, &m, &t, &p, &end) != 4 ||
	    end == 0) {
		snprintf(err, errlen, "not $argon2id$v=19$m=KIB,t=PASSES,p=LANES$SALT$HASH");
		return -EINVAL;
	}
	/* what crypto_pwhash_str writes: a 16-byte salt and a 32-byte hash,
	 * unpadded base64 (22 and 43 characters) */
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *salt = s + end;
	size_t ns = strspn(salt, b64), nh = salt[ns] == '$' ? strspn(salt + ns + 1, b64) : 0;

	if (ns != 22 || nh != 43 || salt[ns + 1 + nh] != '\0') {
		snprintf(err, errlen, "want a 22-character salt and a 43-character hash (base64)");
		return -EINVAL;
	}
	if (m > CREDS_PWHASH_MAX_KIB || t > CREDS_PWHASH_MAX_T) {
		snprintf(err, errlen, "costs m=%u,t=%u: at most m=%u,t=%u (each failed login pays it)",
			 m, t, CREDS_PWHASH_MAX_KIB, CREDS_PWHASH_MAX_T);
		return -EINVAL;
	}
	/* libsodium decodes the whole string (version, salt, hash): -1 when
	 * it cannot */
	if (sodium_init() < 0 ||
	    crypto_pwhash_str_needs_rehash(s, CREDS_PWHASH_OPSLIMIT, CREDS_PWHASH_MEMLIMIT) < 0) {
		snprintf(err, errlen, "malformed (version, salt or hash)");
		return -EINVAL;
	}
	return 0;
}

size_t creds_plaintext(const struct creds *c, char *buf, size_t cap)
{
	size_t n = 0, len = 0;

	if (cap)
		buf[0] = '\0';
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].hash[0])
			continue;
		if (len < cap)
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", n ? ", " : "",
						c->v[i].login);
		n++;
	}
	return n;
}

const struct cred *creds_find(const struct creds *c, const char *login)
{
	size_t n = strnlen(login, CREDS_LOGIN_LEN + 1);

	while (n > 0 && login[n - 1] == ' ')
		n--;
	if (n == 0 || n > CREDS_LOGIN_LEN)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		if (strlen(c->v[i].login) == n && strncasecmp(c->v[i].login, login, n) == 0)
			return &c->v[i];
	return NULL;
}

int creds_add(struct creds *c, const char *login, const char *value, char *err,
		 size_t errlen)
{
	struct cred cred;
	int rc = creds_parse(login, value, &cred, err, errlen);

	if (rc < 0)
		return rc;
	if (creds_find(c, cred.login)) {
		snprintf(err, errlen, "login %s: listed twice", cred.login);
		return -EINVAL;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct cred *v = realloc(c->v, cap * sizeof(*v));

		if (!v) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = cred;
	return 0;
}

static int on_login(void *ctx, const char *section, const char *name, const char *value,
		    char *err, size_t errlen)
{
	(void)section;
	return creds_add(ctx, name, value, err, errlen);
}

int creds_load(struct creds *c, const char *path, char *err, size_t errlen)
{
	static const struct config_key no_keys[] = { CONFIG_END };
	static const char *const sections[] = { "logins", NULL };
	struct config_spec spec = { no_keys, sections, on_login, c };
	char dummy;

	return config_load(&spec, &dummy, path, NULL, 0, err, errlen);
}

void creds_fini(struct creds *c)
{
	free(c->v);
	memset(c, 0, sizeof(*c));
}
