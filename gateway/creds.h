/* The credentials file (creds.c): who may log in, with which password and
 * firm. */
#ifndef LOCKSTEP_GW_CREDS_H
#define LOCKSTEP_GW_CREDS_H

#include <stddef.h>

#define GW_LOGIN_LEN 6 /* SoupBinTCP username */
#define GW_PASSWORD_LEN 10 /* SoupBinTCP password */
#define GW_FIRM_LEN 4 /* OUCH firm */

/* One line of the credentials file's [logins] section:
 *     LOGIN = PASSWORD FIRM [cancel_on_disconnect]
 * LOGIN: 1..6 alphanumerics, PASSWORD: 1..10 alphanumerics, FIRM: 1..4
 * alphanumerics. Login and firm are kept upper-case; SoupBinTCP compares
 * usernames and passwords without regard to case. */
struct gw_cred {
	char login[GW_LOGIN_LEN + 1];
	char password[GW_PASSWORD_LEN + 1];
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

#endif
