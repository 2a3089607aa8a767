/* lockstepctl keygen: makes and rotates a cluster key file (common/auth.h).
 * A new file gets one fresh key (id 1, the one sent with), is created with
 * O_EXCL, mode 0640 and group lockstep where that group exists; --add,
 * --send and --remove rewrite an existing file through FILE.tmp, fsync and
 * rename, keeping its owner, group and mode. What was done is printed as
 * key ids, never as key bytes. */
#include "keygen.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"

#define KEYGEN_GROUP "lockstep" /* the group the daemons run as */
#define KEYGEN_MODE 0640

enum keygen_op { KG_NEW, KG_ADD, KG_SEND, KG_REMOVE };

struct keygen_args {
	enum keygen_op op;
	int ops; /* how many of --add, --send, --remove were given */
	uint8_t id;
	const char *path;
};

void keygen_usage(FILE *out)
{
	fputs("Key files (no socket; each prints key ids, never key bytes):\n"
	      "  keygen FILE              a new cluster key file: one fresh key (id 1) to\n"
	      "                           tag with, mode 0640, group lockstep where that\n"
	      "                           group exists; an existing FILE is never replaced\n"
	      "  keygen --add FILE        a rotation: one more fresh key, with the next free\n"
	      "                           id; the node still tags with the key it had\n"
	      "  keygen --send ID FILE    tag with key ID from now on\n"
	      "  keygen --remove ID FILE  drop key ID (never the one sent with)\n"
	      "  (--add, --send and --remove rewrite FILE through FILE.tmp and rename,\n"
	      "  keeping its owner, group and mode; copy FILE to every member and reload\n"
	      "  each after every step)\n",
	      out);
}

/* ---- files -------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync of the directory holding path, so that a create or rename lasts. */
static int sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	int fd, r;

	if (n >= sizeof(dir))
		return -1;
	memcpy(dir, path, n);
	dir[n] = '\0';
	if (!slash)
		strcpy(dir, ".");
	else if (n == 0)
		strcpy(dir, "/");
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	r = fsync(fd);
	close(fd);
	return r;
}

/* A new file: group lockstep when that group exists (else the group the
 * file got); a refusal is only a warning, the file stays the caller's. */
static void give_group(int fd, const char *path)
{
	const struct group *g = getgrnam(KEYGEN_GROUP);

	if (g && fchown(fd, (uid_t)-1, g->gr_gid) < 0)
		fprintf(stderr, "lockstepctl: warning: %s: not given to group %s (%s); the "
				"daemons must run as its owner or group\n",
			path, KEYGEN_GROUP, strerror(errno));
}

/* rewrite: the new file gets the owner and group of the old (st). */
static int keep_owner(int fd, const char *path, const struct stat *st)
{
	struct stat now;

	if (fstat(fd, &now) < 0)
		return -1;
	if (now.st_uid == st->st_uid && now.st_gid == st->st_gid)
		return 0;
	if (fchown(fd, now.st_uid == st->st_uid ? (uid_t)-1 : st->st_uid, st->st_gid) == 0)
		return 0;
	fprintf(stderr, "lockstepctl: %s: cannot keep owner %u and group %u: %s (run as its "
			"owner, a member of its group, or root)\n",
		path, (unsigned)st->st_uid, (unsigned)st->st_gid, strerror(errno));
	return -2;
}

/* Writes text into fd, gives it the owner, group and mode of like (NULL: a
 * new key file's), fsyncs. 0, -1 (errno says why) or -2 (said). */
static int fill(int fd, const char *path, const char *text, size_t len, const struct stat *like)
{
	int r;

	if (write_all(fd, text, len) < 0)
		return -1;
	if (!like)
		give_group(fd, path);
	else if ((r = keep_owner(fd, path, like)) < 0)
		return r;
	if (fchmod(fd, like ? like->st_mode & 07777 : KEYGEN_MODE) < 0 || fsync(fd) < 0)
		return -1;
	return 0;
}

/* Creates path (never over anything) holding text. 0, or -1 after saying why. */
static int write_new(const char *path, const char *text, size_t len)
{
	/* 0600 until the group and mode are set: no one else reads it meanwhile */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), r;

	if (fd < 0) {
		fprintf(stderr, "lockstepctl: %s: %s\n", path,
			errno == EEXIST ? "exists: not replaced (rotate its keys with --add, "
					  "--send, --remove)" : strerror(errno));
		return -1;
	}
	r = fill(fd, path, text, len, NULL);
	if (r == -1)
		fprintf(stderr, "lockstepctl: %s: %s\n", path, strerror(errno));
	if (close(fd) < 0 && r == 0)
		r = -1;
	if (r < 0) {
		unlink(path);
		return -1;
	}
	return sync_dir(path) < 0 ? (perror(path), -1) : 0;
}

/* Replaces path (as it was when st was taken) by text: path.tmp, fsync,
 * rename. 0, or -1 after saying why (path untouched). */
static int write_over(const char *path, const struct stat *st, const char *text, size_t len)
{
	char tmp[PATH_MAX];
	int fd, r;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		fprintf(stderr, "lockstepctl: %s: path too long\n", path);
		return -1;
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "lockstepctl: %s: %s\n", tmp,
			errno == EEXIST ? "exists: another lockstepctl keygen at work, or one "
					  "that was stopped (then remove it)" : strerror(errno));
		return -1;
	}
	r = fill(fd, tmp, text, len, st);
	if (close(fd) < 0 && r == 0)
		r = -1;
	if (r == 0 && rename(tmp, path) < 0)
		r = -1;
	if (r == -1)
		fprintf(stderr, "lockstepctl: %s: %s\n", tmp, strerror(errno));
	if (r < 0) {
		unlink(tmp);
		return -1;
	}
	return sync_dir(path) < 0 ? (perror(path), -1) : 0;
}

/* ---- keys --------------------------------------------------------------- */

/* "PATH: WHAT; keys 1 2, sending with key 2" */
static void print_keys(const char *path, const char *what, const struct auth_keys *k)
{
	printf("%s: %s; keys", path, what);
	for (unsigned i = 0; i < k->n; i++)
		printf(" %u", k->id[i]);
	printf(", sending with key %u\n", k->send_id);
}

static int held(const struct auth_keys *k, uint8_t id)
{
	for (unsigned i = 0; i < k->n; i++)
		if (k->id[i] == id)
			return (int)i;
	return -1;
}

/* The id after the highest one held, or the lowest free one past 255. */
static uint8_t next_id(const struct auth_keys *k)
{
	unsigned top = 0;

	for (unsigned i = 0; i < k->n; i++)
		if (k->id[i] > top)
			top = k->id[i];
	if (top < 255)
		return (uint8_t)(top + 1);
	for (unsigned id = 1;; id++)
		if (held(k, (uint8_t)id) < 0)
			return (uint8_t)id;
}

/* Reads path into k and its owner, group and mode into st. */
static int load(const char *path, struct auth_keys *k, struct stat *st)
{
	char err[512];

	if (stat(path, st) < 0) {
		fprintf(stderr, "lockstepctl: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (auth_keyfile_load(path, k, err, sizeof(err)) < 0) {
		fprintf(stderr, "lockstepctl: %s\n", err);
		return -1;
	}
	return 0;
}

/* Writes k into path: a new file (st NULL) or over the old one. */
static int store(const char *path, const struct stat *st, const struct auth_keys *k)
{
	char text[2048];
	size_t len = auth_keyfile_format(k, text, sizeof(text));
	int r;

	if (len == 0) {
		fprintf(stderr, "lockstepctl: %s: the keys do not fit a key file\n", path);
		return -1;
	}
	r = st ? write_over(path, st, text, len) : write_new(path, text, len);
	sodium_memzero(text, sizeof(text));
	return r;
}

static int kg_new(const char *path, struct auth_keys *k)
{
	auth_keys_generate(k);
	if (store(path, NULL, k) < 0)
		return 1;
	print_keys(path, "a new cluster key file", k);
	return 0;
}

static int kg_add(const char *path, struct auth_keys *k, struct stat *st)
{
	char what[160];
	uint8_t id;

	if (load(path, k, st) < 0)
		return 1;
	if (k->n == AUTH_MAX_KEYS) {
		fprintf(stderr, "lockstepctl: %s: holds %d keys, the most a file may: remove one "
				"first (--remove ID)\n",
			path, AUTH_MAX_KEYS);
		return 1;
	}
	id = next_id(k);
	randombytes_buf(k->key[k->n], AUTH_KEY_LEN);
	k->id[k->n++] = id;
	if (store(path, st, k) < 0)
		return 1;
	snprintf(what, sizeof(what), "added key %u (once every member holds it: --send %u)", id,
		 id);
	print_keys(path, what, k);
	return 0;
}

static int kg_send(const char *path, uint8_t id, struct auth_keys *k, struct stat *st)
{
	char what[64];

	if (load(path, k, st) < 0)
		return 1;
	if (held(k, id) < 0) {
		fprintf(stderr, "lockstepctl: %s: holds no key %u\n", path, id);
		return 1;
	}
	if (k->send_id == id) {
		print_keys(path, "unchanged", k);
		return 0;
	}
	k->send_id = id;
	if (store(path, st, k) < 0)
		return 1;
	snprintf(what, sizeof(what), "now sending with key %u", id);
	print_keys(path, what, k);
	return 0;
}

static int kg_remove(const char *path, uint8_t id, struct auth_keys *k, struct stat *st)
{
	char what[64];
	int i;

	if (load(path, k, st) < 0)
		return 1;
	if ((i = held(k, id)) < 0 || k->send_id == id) {
		fprintf(stderr, "lockstepctl: %s: %s %u%s\n", path,
			i < 0 ? "holds no key" : "sends with key", id,
			i < 0 ? "" : ": not removed (switch first: --send ID)");
		return 1;
	}
	k->n--;
	memmove(&k->id[i], &k->id[i + 1], k->n - (unsigned)i);
	memmove(k->key[i], k->key[i + 1], (k->n - (unsigned)i) * sizeof(k->key[0]));
	sodium_memzero(k->key[k->n], sizeof(k->key[0]));
	if (store(path, st, k) < 0)
		return 1;
	snprintf(what, sizeof(what), "removed key %u", id);
	print_keys(path, what, k);
	return 0;
}

/* ---- the command line ---------------------------------------------------- */

static int parse_id(const char *s, uint8_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > 255 || s[0] == '-' || s[0] == '+')
		return -1;
	*out = (uint8_t)v;
	return 0;
}

/* 0 to go on, or the exit status (--help: 0; a bad command line: 2). */
static int parse_args(int argc, char **argv, struct keygen_args *a)
{
	static const struct option opts[] = {
		{ "add", no_argument, NULL, 'a' },
		{ "send", required_argument, NULL, 's' },
		{ "remove", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *why = NULL;
	int c;

	optind = 1;
	while (!why && (c = getopt_long(argc, argv, "as:r:h", opts, NULL)) != -1) {
		a->ops++;
		if (c == 'h') {
			keygen_usage(stdout);
			return -1;
		} else if (c == 'a') {
			a->op = KG_ADD;
		} else if (c == 's' || c == 'r') {
			a->op = c == 's' ? KG_SEND : KG_REMOVE;
			if (parse_id(optarg, &a->id) < 0)
				why = "a key id is a number from 1 to 255";
		} else {
			why = "see --help";
		}
	}
	if (!why && a->ops > 1)
		why = "one of --add, --send, --remove at a time";
	else if (!why && optind != argc - 1)
		why = "give one FILE (see --help)";
	if (why) {
		fprintf(stderr, "lockstepctl: keygen: %s\n", why);
		return 2;
	}
	a->path = argv[optind];
	return 0;
}

int keygen_main(int argc, char **argv)
{
	struct keygen_args a = { .op = KG_NEW };
	struct auth_keys k = { 0 };
	struct stat st;
	int rc = parse_args(argc, argv, &a);

	if (rc != 0)
		return rc < 0 ? 0 : rc; /* --help, or a bad command line */
	if (sodium_init() < 0) {
		fprintf(stderr, "lockstepctl: keygen: libsodium cannot start\n");
		return 1;
	}
	switch (a.op) {
	case KG_NEW:
		rc = kg_new(a.path, &k);
		break;
	case KG_ADD:
		rc = kg_add(a.path, &k, &st);
		break;
	case KG_SEND:
		rc = kg_send(a.path, a.id, &k, &st);
		break;
	case KG_REMOVE:
		rc = kg_remove(a.path, a.id, &k, &st);
		break;
	}
	sodium_memzero(&k, sizeof(k));
	return rc;
}
