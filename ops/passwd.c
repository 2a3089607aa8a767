/* lockstepctl passwd: reads a password (from the terminal without echo,
 * twice; else one line of stdin), normalises it as SoupBinTCP compares it
 * (padding cut, upper-cased: common/creds.h) and prints its Argon2id hash,
 * or with LOGIN and FIRM the whole line of the credentials file. */
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "creds.h"
#include "passwd.h"

void passwd_usage(FILE *out)
{
	fputs("lockstepctl passwd [LOGIN FIRM [cancel_on_disconnect]]\n"
	      "  reads a password (1 to 10 letters or digits; from the terminal without\n"
	      "  echo, twice, else one line of standard input), and prints its Argon2id\n"
	      "  hash for a credentials file (the gateway's [gateway] credentials, the\n"
	      "  matcher's GLIMPSE [feed] logins); with LOGIN and FIRM, the whole line:\n"
	      "  LOGIN = HASH FIRM [cancel_on_disconnect]. SoupBinTCP compares\n"
	      "  passwords without regard to case: the hash is of the password\n"
	      "  upper-cased, as the gateway and the matcher verify it.\n",
	      out);
}

/* One line into buf (its newline cut), echo off when in is a terminal. 0,
 * or -1 at end of input or on a line too long. */
static int read_line(const char *prompt, char *buf, size_t cap)
{
	struct termios old, quiet;
	int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
	int rc = 0;
	size_t n;

	if (tty) {
		fputs(prompt, stderr);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	if (!fgets(buf, (int)cap, stdin))
		rc = -1;
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (rc < 0)
		return -1;
	n = strlen(buf);
	if (n == cap - 1 && buf[n - 1] != '\n')
		return -1;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return 0;
}

/* The normalised password read, twice on a terminal. 0 or 1 (said why). */
static int read_password(char out[CREDS_PASSWORD_LEN + 1])
{
	char a[64], b[64], again[CREDS_PASSWORD_LEN + 1];
	int rc = 1;

	if (read_line("Password: ", a, sizeof(a)) < 0) {
		fprintf(stderr, "lockstepctl: passwd: no password read\n");
	} else if (creds_password_normalise(a, out) < 0) {
		fprintf(stderr, "lockstepctl: passwd: a password is 1 to %d letters or digits "
				"(SoupBinTCP)\n", CREDS_PASSWORD_LEN);
	} else if (isatty(STDIN_FILENO) &&
		   (read_line("Again: ", b, sizeof(b)) < 0 ||
		    creds_password_normalise(b, again) < 0 || strcmp(out, again) != 0)) {
		fprintf(stderr, "lockstepctl: passwd: the two differ\n");
	} else {
		rc = 0;
	}
	sodium_memzero(a, sizeof(a));
	sodium_memzero(b, sizeof(b));
	sodium_memzero(again, sizeof(again));
	return rc;
}

int passwd_main(int argc, char **argv)
{
	char pw[CREDS_PASSWORD_LEN + 1], hash[CREDS_HASH_LEN], value[CREDS_HASH_LEN + 64], err[256];
	struct cred c;
	int rc;

	if (argc != 1 && argc != 3 && !(argc == 4 && strcmp(argv[3], "cancel_on_disconnect") == 0)) {
		passwd_usage(stderr);
		return 2;
	}
	if (argc > 1 && creds_parse(argv[1], "x x", &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "lockstepctl: passwd: %s\n", err);
		return 2;
	}
	if (read_password(pw) != 0)
		return 1;
	rc = creds_password_hash(pw, hash);
	sodium_memzero(pw, sizeof(pw));
	if (rc < 0) {
		fprintf(stderr, "lockstepctl: passwd: libsodium could not hash\n");
		return 1;
	}
	if (argc == 1) {
		printf("%s\n", hash);
		return 0;
	}
	snprintf(value, sizeof(value), "%s %s%s", hash, argv[2], argc == 4 ? " cancel_on_disconnect" : "");
	if (creds_parse(argv[1], value, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "lockstepctl: passwd: %s\n", err);
		return 2;
	}
	printf("%s = %s %s%s\n", c.login, c.hash, c.firm,
	       c.cancel_on_disconnect ? " cancel_on_disconnect" : "");
	return 0;
}
