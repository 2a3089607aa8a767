/* The credentials file (creds.c): who may log in, with which password and
 * firm. */
#ifndef LOCKSTEP_GW_CREDS_H
#define LOCKSTEP_GW_CREDS_H

#include <stddef.h>

#define GW_LOGIN_LEN 6 /* SoupBinTCP username */
#define GW_PASSWORD_LEN 10 /* SoupBinTCP password */
#define GW_FIRM_LEN 4 /* OUCH firm */
#define GW_HASH_LEN 128 /* a password hash string and its NUL (crypto_pwhash_STRBYTES) */

/* The cost of the hashes `lockstepctl passwd` makes: Argon2id with 3
 * passes over 12 MiB (OWASP's equivalent of 2 passes over 19 MiB), about
 * 30 ms a verification on one core. INTERACTIVE's 64 MiB and 2 passes take
 * 4 times that on the same core: a burst of a few hundred logins at the
 * open (every firm reconnecting) would wait seconds, and a gateway pays
 * the memory once per verifying thread. The cost is in each hash: a file
 * may mix costs, and a new cost applies to hashes made after it. */
#define GW_PWHASH_OPSLIMIT 3
#define GW_PWHASH_MEMLIMIT (12u << 20)
/* The most a hash of the credentials file may ask for (a larger one is an
 * error: every failed login would pay it). */
#define GW_PWHASH_MAX_KIB (256u << 10)
#define GW_PWHASH_MAX_T 16u

/* One line of the credentials file's [logins] section:
 *     LOGIN = PASSWORD FIRM [cancel_on_disconnect]
 * LOGIN: 1..6 alphanumerics; PASSWORD: an Argon2id hash string
 * ("$argon2id$v=19$m=...,t=...,p=...$SALT$HASH", `lockstepctl passwd`) of
 * the upper-cased password, or (the old form, warned about) the password
 * itself, 1..10 alphanumerics; FIRM: 1..4 alphanumerics. Login and firm
 * are kept upper-case; SoupBinTCP compares usernames and passwords without
 * regard to case, so a password is upper-cased before it is hashed and
 * before it is verified (gw_password_normalise). */
struct gw_cred {
	char login[GW_LOGIN_LEN + 1];
	char password[GW_PASSWORD_LEN + 1]; /* plaintext entries only; else "" */
	char hash[GW_HASH_LEN]; /* "": a plaintext entry */
	char firm[GW_FIRM_LEN + 1];
	int cancel_on_disconnect;
};

struct gw_creds {
	struct gw_cred *v;
	size_t n, cap;
};

/* Parses one entry into *out; -EINVAL with err set when malformed. */
int gw_cred_parse(const char *login, const char *value, struct gw_cred *out, char *err,
		  size_t errlen);
/* Adds one entry (duplicate logins are an error). */
int gw_creds_add(struct gw_creds *c, const char *login, const char *value, char *err,
		 size_t errlen);
/* Loads the INI file at path (a [logins] section, nothing else); err says
 * file:line: what is wrong. An empty file is valid (no logins). */
int gw_creds_load(struct gw_creds *c, const char *path, char *err, size_t errlen);
/* The entry for a username (case-insensitive, trailing spaces ignored), or NULL. */
const struct gw_cred *gw_creds_find(const struct gw_creds *c, const char *login);
void gw_creds_fini(struct gw_creds *c); /* accepts a zeroed struct */
/* 1 when `given` (a Login Request's password, trailing spaces trimmed) is
 * c's password, without regard to case (SoupBinTCP); compared in constant
 * time, every byte whatever differs first. c NULL (no such login): 0, after
 * the same comparison. */
int gw_cred_password_ok(const struct gw_cred *c, const char *given);

/* A password as SoupBinTCP compares it: trailing spaces (padding) cut,
 * 1..10 alphanumerics, upper-cased into out. 0 or -EINVAL. */
int gw_password_normalise(const char *in, char out[GW_PASSWORD_LEN + 1]);
/* The Argon2id hash string of a normalised password, at the cost above.
 * 0, or -ENOMEM (libsodium could not). */
int gw_password_hash(const char *normalised, char out[GW_HASH_LEN]);
/* 1 when hash (a valid hash string) is the hash of normalised. Takes tens
 * of milliseconds: never on the event loop. */
int gw_password_verify(const char *hash, const char *normalised);
/* 0 when s is an Argon2id hash string the gateway accepts (well formed,
 * its cost within GW_PWHASH_MAX_*); else -EINVAL with why said in err. */
int gw_hash_check(const char *s, char *err, size_t errlen);
/* Entries with a plaintext password: their count, their logins listed in
 * buf (comma separated, cut to cap). */
size_t gw_creds_plaintext(const struct gw_creds *c, char *buf, size_t cap);

#endif
