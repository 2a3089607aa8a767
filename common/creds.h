/* The credentials file (creds.c): who may log in, with which password and
 * firm. The gateway's OUCH logins ([gateway] credentials) and the
 * matcher's GLIMPSE logins ([feed] logins) read the same format, and
 * `lockstepctl passwd` writes its lines. */
#ifndef LOCKSTEP_CREDS_H
#define LOCKSTEP_CREDS_H

#include <stddef.h>

#define CREDS_LOGIN_LEN 6 /* SoupBinTCP username */
#define CREDS_PASSWORD_LEN 10 /* SoupBinTCP password */
#define CREDS_FIRM_LEN 4 /* OUCH firm */
#define CREDS_HASH_LEN 128 /* a password hash string and its NUL (crypto_pwhash_STRBYTES) */

/* The cost of the hashes `lockstepctl passwd` makes: Argon2id with 3
 * passes over 12 MiB (OWASP's equivalent of 2 passes over 19 MiB), about
 * 30 ms a verification on one core. INTERACTIVE's 64 MiB and 2 passes take
 * 4 times that on the same core: a burst of a few hundred logins at the
 * open (every firm reconnecting) would wait seconds, and a server pays
 * the memory once per verifying thread. The cost is in each hash: a file
 * may mix costs, and a new cost applies to hashes made after it. */
#define CREDS_PWHASH_OPSLIMIT 3
#define CREDS_PWHASH_MEMLIMIT (12u << 20)
/* The most a hash of the credentials file may ask for (a larger one is an
 * error: every failed login would pay it). */
#define CREDS_PWHASH_MAX_KIB (256u << 10)
#define CREDS_PWHASH_MAX_T 16u

/* One line of the credentials file's [logins] section:
 *     LOGIN = PASSWORD FIRM [cancel_on_disconnect]
 * LOGIN: 1..6 alphanumerics; PASSWORD: an Argon2id hash string
 * ("$argon2id$v=19$m=...,t=...,p=...$SALT$HASH", `lockstepctl passwd`) of
 * the upper-cased password, or (the old form, warned about) the password
 * itself, 1..10 alphanumerics; FIRM: 1..4 alphanumerics. Login and firm
 * are kept upper-case; SoupBinTCP compares usernames and passwords without
 * regard to case, so a password is upper-cased before it is hashed and
 * before it is verified (creds_password_normalise). */
struct cred {
	char login[CREDS_LOGIN_LEN + 1];
	char password[CREDS_PASSWORD_LEN + 1]; /* plaintext entries only; else "" */
	char hash[CREDS_HASH_LEN]; /* "": a plaintext entry */
	char firm[CREDS_FIRM_LEN + 1];
	int cancel_on_disconnect;
};

struct creds {
	struct cred *v;
	size_t n, cap;
};

/* Parses one entry into *out; -EINVAL with err set when malformed. */
int creds_parse(const char *login, const char *value, struct cred *out, char *err,
		  size_t errlen);
/* Adds one entry (duplicate logins are an error). */
int creds_add(struct creds *c, const char *login, const char *value, char *err,
		 size_t errlen);
/* Loads the INI file at path (a [logins] section, nothing else); err says
 * file:line: what is wrong. An empty file is valid (no logins). */
int creds_load(struct creds *c, const char *path, char *err, size_t errlen);
/* The entry for a username (case-insensitive, trailing spaces ignored), or NULL. */
const struct cred *creds_find(const struct creds *c, const char *login);
void creds_fini(struct creds *c); /* accepts a zeroed struct */
/* 1 when `given` (a Login Request's password, trailing spaces trimmed) is
 * c's password, without regard to case (SoupBinTCP); compared in constant
 * time, every byte whatever differs first. c NULL (no such login): 0, after
 * the same comparison. */
int creds_password_ok(const struct cred *c, const char *given);

/* A password as SoupBinTCP compares it: trailing spaces (padding) cut,
 * 1..10 alphanumerics, upper-cased into out. 0 or -EINVAL. */
int creds_password_normalise(const char *in, char out[CREDS_PASSWORD_LEN + 1]);
/* The Argon2id hash string of a normalised password, at the cost above.
 * 0, or -ENOMEM (libsodium could not). */
int creds_password_hash(const char *normalised, char out[CREDS_HASH_LEN]);
/* 1 when hash (a valid hash string) is the hash of normalised. Takes tens
 * of milliseconds: never on the event loop. */
int creds_password_verify(const char *hash, const char *normalised);
/* The hash of a random password at lockstepctl passwd's cost: what a
 * server verifies a name that is no login (or a plaintext entry) against,
 * so that the time of its answer says nothing of which logins exist. Takes
 * as long as a verification. 0, or -ENOMEM (libsodium could not). */
int creds_dummy_hash(char out[CREDS_HASH_LEN]);
/* 0 when s is an Argon2id hash string a credentials file may hold (well formed,
 * its cost within CREDS_PWHASH_MAX_*); else -EINVAL with why said in err. */
int creds_hash_check(const char *s, char *err, size_t errlen);
/* Entries with a plaintext password: their count, their logins listed in
 * buf (comma separated, cut to cap). */
size_t creds_plaintext(const struct creds *c, char *buf, size_t cap);

#endif
