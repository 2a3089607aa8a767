/* The gateway alone: credentials parsing, address lists, partition routes,
 * and a whole gateway on loopback driven by a fake client, fake sequencers
 * and fake tape/exec senders. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addrlist.h"
#include "gateway.h"
#include "gw_private.h" /* gw_exec_live */
#include "lockout.h"
#include "lockstep.pb-c.h"
#include "moldudp64.h"
#include "net.h"
#include "ouch.h"
#include "soupbin.h"
#include "tape.h"
#include "wire.h"
#include "testutil.h"

/* ---- credentials ---------------------------------------------------------- */

START_TEST(cred_valid)
{
	struct cred c;
	char err[256];

	ck_assert_int_eq(creds_parse("tradr1", "pw1 frma", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.login, "TRADR1");
	ck_assert_str_eq(c.password, "pw1");
	ck_assert_str_eq(c.firm, "FRMA");
	ck_assert_int_eq(c.cancel_on_disconnect, 0);
	ck_assert_int_eq(creds_parse("A", "  p\tF   cancel_on_disconnect ", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(c.cancel_on_disconnect, 1);
	ck_assert_str_eq(c.firm, "F");
}
END_TEST

/* The password check: case-insensitive as SoupBinTCP compares, the whole
 * password (no prefix, nothing longer), nothing for no login. */
START_TEST(cred_password_check)
{
	struct cred c;
	char err[256];

	ck_assert_int_eq(creds_parse("tradr1", "PassW0rd FRMA", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(creds_password_ok(&c, "PassW0rd"), 1);
	ck_assert_int_eq(creds_password_ok(&c, "passw0rd"), 1);
	ck_assert_int_eq(creds_password_ok(&c, "PASSW0RD"), 1);
	ck_assert_int_eq(creds_password_ok(&c, "PassW0r"), 0);
	ck_assert_int_eq(creds_password_ok(&c, "PassW0rdX"), 0);
	ck_assert_int_eq(creds_password_ok(&c, "PassW0rd\x01"), 0);
	ck_assert_int_eq(creds_password_ok(&c, "PassW1rd"), 0);
	ck_assert_int_eq(creds_password_ok(&c, ""), 0);
	ck_assert_int_eq(creds_password_ok(&c, "PassW0rd123"), 0); /* 11: too long */
	ck_assert_int_eq(creds_password_ok(NULL, ""), 0);
	ck_assert_int_eq(creds_password_ok(NULL, "PassW0rd"), 0);
	/* '@' and '[' sit beside 'A' and 'Z': not letters, not folded */
	ck_assert_int_eq(creds_parse("tradr2", "AZ FRMA", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(creds_password_ok(&c, "az"), 1);
	ck_assert_int_eq(creds_password_ok(&c, "`z"), 0);
	ck_assert_int_eq(creds_password_ok(&c, "a{"), 0);
}
END_TEST

static const struct {
	const char *login, *value;
} bad_creds[] = {
	{ "", "pw FRM" },
	{ "TOOLONG", "pw FRM" },
	{ "TR-1", "pw FRM" },
	{ "TR 1", "pw FRM" },
	{ "TR1", "" },
	{ "TR1", "pw" },
	{ "TR1", "   " },
	{ "TR1", "pw FIRMX" },
	{ "TR1", "pw F-RM" },
	{ "TR1", "password123 FRM" },
	{ "TR1", "p@ss FRM" },
	{ "TR1", "pw FRM cancel" },
	{ "TR1", "pw FRM cancel_on_disconnectX" },
	{ "TR1", "pw FRM cancel_on_disconnect extra" },
	{ "TR1", "pw FRM CANCEL_ON_DISCONNECT" },
	{ "TR\xc3\xa9", "pw FRM" },
	{ "TR1", "pw\xc3\xa9 FRM" },
	{ "TR1", "pw FR\x01" },
	{ "TR1", "pw FRM yes" },
	{ "TR1", "pw FRM 1" },
};

START_TEST(cred_invalid)
{
	struct cred c = { .login = "KEEP" };
	char err[256] = "";

	ck_assert_int_eq(creds_parse(bad_creds[_i].login, bad_creds[_i].value, &c, err,
				       sizeof(err)),
			 -EINVAL);
	ck_assert_msg(err[0] != '\0', "an error message for case %d", _i);
	ck_assert_str_eq(c.login, "KEEP");
}
END_TEST

START_TEST(creds_file)
{
	char path[] = "/tmp/test_gateway_credsXXXXXX", err[512];
	struct creds c = { 0 };
	const struct cred *f;
	int fd = mkstemp(path);
	FILE *fp = fdopen(fd, "w");

	fputs("; logins\n[logins]\nTRADR1 = pw1 FRMA\ntradr2 = pw2 FRMB cancel_on_disconnect\n", fp);
	fclose(fp);
	ck_assert_int_eq(creds_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.n, 2);
	f = creds_find(&c, "tradr2");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->cancel_on_disconnect, 1);
	ck_assert_ptr_nonnull(creds_find(&c, "TRADR1"));
	ck_assert_ptr_nonnull(creds_find(&c, "TRADR1 "));
	ck_assert_ptr_null(creds_find(&c, "TRADR3"));
	ck_assert_ptr_null(creds_find(&c, ""));
	creds_fini(&c);

	fp = fopen(path, "w");
	fputs("[logins]\nTRADR1 = pw1 FRMA\ntradr1 = pw2 FRMB\n", fp);
	fclose(fp);
	ck_assert_int_lt(creds_load(&c, path, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	creds_fini(&c);

	fp = fopen(path, "w");
	fputs("[other]\nTRADR1 = pw1 FRMA\n", fp);
	fclose(fp);
	ck_assert_int_lt(creds_load(&c, path, err, sizeof(err)), 0);
	creds_fini(&c);
	unlink(path);
}
END_TEST

/* A password as SoupBinTCP compares it: padding cut, upper-cased, 1..10
 * alphanumerics. */
START_TEST(password_normalise)
{
	char out[CREDS_PASSWORD_LEN + 1] = "KEEP";

	ck_assert_int_eq(creds_password_normalise("pw1", out), 0);
	ck_assert_str_eq(out, "PW1");
	ck_assert_int_eq(creds_password_normalise("PassW0rd  ", out), 0);
	ck_assert_str_eq(out, "PASSW0RD");
	ck_assert_int_eq(creds_password_normalise("abcdefghij", out), 0);
	ck_assert_str_eq(out, "ABCDEFGHIJ");
	strcpy(out, "KEEP");
	ck_assert_int_eq(creds_password_normalise("", out), -EINVAL);
	ck_assert_int_eq(creds_password_normalise("   ", out), -EINVAL);
	ck_assert_int_eq(creds_password_normalise(" pw", out), -EINVAL);
	ck_assert_int_eq(creds_password_normalise("p w", out), -EINVAL);
	ck_assert_int_eq(creds_password_normalise("abcdefghijk", out), -EINVAL);
	ck_assert_int_eq(creds_password_normalise("p@ss", out), -EINVAL);
	ck_assert_str_eq(out, "KEEP");
}
END_TEST

/* A hashed entry: made as lockstepctl passwd makes it, verified without
 * regard to case; a hash that is not Argon2id, is malformed or costs too
 * much is refused when the file is read. */
START_TEST(cred_hash)
{
	char h[CREDS_HASH_LEN], value[CREDS_HASH_LEN + 32], err[256], pw[CREDS_PASSWORD_LEN + 1];
	struct cred c;

	ck_assert_int_eq(creds_password_normalise("PassW0rd", pw), 0);
	ck_assert_int_eq(creds_password_hash(pw, h), 0);
	ck_assert_int_eq(strncmp(h, "$argon2id$v=19$m=12288,t=3,p=1$", 31), 0);
	snprintf(value, sizeof(value), "%s FRMA cancel_on_disconnect", h);
	ck_assert_int_eq(creds_parse("tradr1", value, &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.hash, h);
	ck_assert_str_eq(c.password, "");
	ck_assert_str_eq(c.firm, "FRMA");
	ck_assert_int_eq(c.cancel_on_disconnect, 1);
	ck_assert_int_eq(creds_hash_check(h, err, sizeof(err)), 0);
	ck_assert_int_eq(creds_password_normalise("passw0rd", pw), 0);
	ck_assert_int_eq(creds_password_verify(c.hash, pw), 1);
	ck_assert_int_eq(creds_password_normalise("PASSW0RD  ", pw), 0);
	ck_assert_int_eq(creds_password_verify(c.hash, pw), 1);
	ck_assert_int_eq(creds_password_verify(c.hash, "PASSW0R"), 0);
	ck_assert_int_eq(creds_password_verify(c.hash, "PassW0rd"), 0); /* not normalised */
	/* a plaintext password is no hash: not verified as one */
	ck_assert_int_eq(creds_password_verify("PW1", "PW1"), 0);

	static const char *const bad[] = {
		"$argon2i$v=19$m=12288,t=3,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGg",
		"$argon2id$v=19$m=12288,t=3,p=1$!!!$###",
		"$argon2id$v=19$m=12288,t=3,p=1$",
		"$argon2id$v=19$m=1048576,t=3,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGg",
		"$argon2id$v=19$m=12288,t=99,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGg",
		"$argon2id$m=12288",
		"$2b$10$abcdefghijklmnopqrstuv",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(value, sizeof(value), "%s FRMA", bad[i]);
		err[0] = '\0';
		ck_assert_msg(creds_parse("tradr1", value, &c, err, sizeof(err)) == -EINVAL,
			      "bad hash %zu taken", i);
		ck_assert_ptr_nonnull(strstr(err, "hash"));
	}
	/* well formed, but too costly for every failed login to pay */
	snprintf(value, sizeof(value), "$argon2id$v=19$m=1048576,t=3,p=1$%s FRMA", h + 31);
	ck_assert_int_eq(creds_parse("tradr1", value, &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "costs"));
	snprintf(value, sizeof(value), "$argon2id$v=19$m=12288,t=99,p=1$%s FRMA", h + 31);
	ck_assert_int_eq(creds_parse("tradr1", value, &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "costs"));
	/* the hash cut short by one character, or one too long */
	snprintf(value, sizeof(value), "%.*s FRMA", (int)strlen(h) - 1, h);
	ck_assert_int_eq(creds_parse("tradr1", value, &c, err, sizeof(err)), -EINVAL);
	snprintf(value, sizeof(value), "%sA FRMA", h);
	ck_assert_int_eq(creds_parse("tradr1", value, &c, err, sizeof(err)), -EINVAL);
}
END_TEST

/* A file of both kinds loads; the plaintext entries are named. */
START_TEST(creds_plaintext_named)
{
	char path[] = "/tmp/test_gateway_credsXXXXXX", err[512], h[CREDS_HASH_LEN], names[64];
	struct creds c = { 0 };
	int fd = mkstemp(path);
	FILE *fp = fdopen(fd, "w");

	ck_assert_int_eq(creds_password_hash("PW2", h), 0);
	fprintf(fp, "[logins]\nTRADR1 = pw1 FRMA\nTRADR2 = %s FRMB\nTRADR3 = pw3 FRMA\n", h);
	fclose(fp);
	ck_assert_int_eq(creds_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.n, 3);
	ck_assert_uint_eq(creds_plaintext(&c, names, sizeof(names)), 2);
	ck_assert_str_eq(names, "TRADR1, TRADR3");
	ck_assert_str_eq(creds_find(&c, "tradr2")->hash, h);
	creds_fini(&c);
	unlink(path);
}
END_TEST

/* ---- the failed-login table (lockout.c), time passed in ---------------- */

#define MS (UINT64_C(1000000))
#define SEC (1000 * MS)

static const struct lockout_config lcfg = {
	.pair_max = 3, .addr_max = 6, .window_ns = 60 * SEC, .lockout_ns = 30 * SEC,
	.backoff_ns = 100 * MS, .backoff_max_ns = 1000 * MS,
};

/* The delay doubles with each failure up to the cap; the third failure of
 * a login at an address locks that pair only: the same login from another
 * address, and another login from the same address, still try. */
START_TEST(lockout_pair)
{
	struct lockout *t = lockout_new(1024, &lcfg, 42);
	enum lockout_state locked;
	uint64_t left = 0, now = 1000 * SEC;
	const uint32_t a = 0x7f000002, b = 0x7f000003;

	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(lockout_check(t, a, 1, now, &left), LOCKOUT_OPEN);
	ck_assert_uint_eq(lockout_fail(t, a, 1, now, &locked), 100 * MS);
	ck_assert_int_eq(locked, LOCKOUT_OPEN);
	ck_assert_uint_eq(lockout_fail(t, a, 1, now + 1, &locked), 200 * MS);
	ck_assert_int_eq(lockout_check(t, a, 1, now + 2, &left), LOCKOUT_OPEN);
	ck_assert_uint_eq(lockout_fail(t, a, 1, now + 2, &locked), 1000 * MS); /* locked: the cap */
	ck_assert_int_eq(locked, LOCKOUT_PAIR);
	ck_assert_int_eq(lockout_check(t, a, 1, now + 3, &left), LOCKOUT_PAIR);
	ck_assert_uint_eq(left, 30 * SEC - 1);
	ck_assert_int_eq(lockout_check(t, b, 1, now + 3, &left), LOCKOUT_OPEN);
	ck_assert_int_eq(lockout_check(t, a, 2, now + 3, &left), LOCKOUT_OPEN);
	/* a success elsewhere does not unlock it; the lock ends on time */
	lockout_success(t, b, 1, now + 4);
	lockout_success(t, a, 1, now + 4);
	ck_assert_int_eq(lockout_check(t, a, 1, now + 30 * SEC + 1, &left), LOCKOUT_PAIR);
	ck_assert_int_eq(lockout_check(t, a, 1, now + 30 * SEC + 2, &left), LOCKOUT_OPEN);
	/* after the lock the pair counts afresh, but the back-off follows the
	 * address's count too: its 4th failure */
	ck_assert_uint_eq(lockout_fail(t, a, 1, now + 31 * SEC, &locked), 800 * MS);
	ck_assert_int_eq(locked, LOCKOUT_OPEN);
	lockout_free(t);
}
END_TEST

/* Failures of many logins from one address lock the address: every login
 * from it, a real one included, is locked out; another address is not.
 * The back-off follows the address's count too (a login per guess gains
 * nothing). */
START_TEST(lockout_address)
{
	struct lockout *t = lockout_new(1024, &lcfg, 7);
	enum lockout_state locked = LOCKOUT_OPEN;
	uint64_t left, now = 5 * SEC, d = 0;
	const uint32_t a = 0x7f000002;

	for (uint32_t login = 0; login < 5; login++) {
		d = lockout_fail(t, a, login, now, &locked);
		ck_assert_int_eq(locked, LOCKOUT_OPEN);
	}
	ck_assert_uint_eq(d, 1000 * MS); /* 100 ms x 2^4, capped */
	lockout_fail(t, a, LOCKOUT_UNKNOWN, now, &locked);
	ck_assert_int_eq(locked, LOCKOUT_ADDR);
	ck_assert_int_eq(lockout_check(t, a, 9, now, &left), LOCKOUT_ADDR);
	ck_assert_int_eq(lockout_check(t, a, LOCKOUT_UNKNOWN, now, &left), LOCKOUT_ADDR);
	ck_assert_int_eq(lockout_check(t, a + 1, 9, now, &left), LOCKOUT_OPEN);
	ck_assert_int_eq(lockout_check(t, a, 9, now + 30 * SEC, &left), LOCKOUT_OPEN);
	lockout_free(t);
}
END_TEST

/* Failures further apart than the window are counted afresh; a success
 * forgets the pair's failures. */
START_TEST(lockout_window_and_success)
{
	struct lockout *t = lockout_new(64, &lcfg, 1);
	enum lockout_state locked;
	uint64_t left, now = 100 * SEC;

	lockout_fail(t, 1, 1, now, &locked);
	lockout_fail(t, 1, 1, now + SEC, &locked);
	ck_assert_uint_eq(lockout_fail(t, 1, 1, now + 62 * SEC, &locked), 100 * MS);
	ck_assert_int_eq(locked, LOCKOUT_OPEN);
	lockout_fail(t, 2, 1, now, &locked);
	lockout_fail(t, 2, 1, now, &locked);
	lockout_success(t, 2, 1, now);
	lockout_fail(t, 2, 1, now, &locked);
	ck_assert_int_eq(locked, LOCKOUT_OPEN);
	ck_assert_int_eq(lockout_check(t, 2, 1, now, &left), LOCKOUT_OPEN);
	lockout_free(t);
}
END_TEST

/* A table far too small for the addresses failing: every call stays
 * bounded, evictions are counted, and a locked address is evicted only
 * after the unlocked ones around it. */
START_TEST(lockout_eviction)
{
	struct lockout *t = lockout_new(64, &lcfg, 3);
	struct lockout_counts lc;
	enum lockout_state locked;
	uint64_t left, now = 10 * SEC;

	for (int i = 0; i < 6; i++)
		lockout_fail(t, 0x0a000001, LOCKOUT_UNKNOWN, now, &locked);
	ck_assert_int_eq(locked, LOCKOUT_ADDR);
	for (uint32_t i = 0; i < 100000; i++)
		lockout_fail(t, 0x0b000000 + i, 1, now + i, &locked);
	lockout_counts(t, &lc);
	ck_assert_uint_eq(lc.capacity, 64);
	ck_assert_uint_le(lc.entries, 64);
	ck_assert_uint_gt(lc.evictions, 90000);
	/* the locked address outlived 200,000 unlocked entries */
	ck_assert_int_eq(lockout_check(t, 0x0a000001, 1, now + 100000, &left), LOCKOUT_ADDR);
	lockout_free(t);
}
END_TEST

START_TEST(default_session)
{
	char s[11];
	struct tm tm = { .tm_year = 125, .tm_mon = 11, .tm_mday = 3, .tm_hour = 12 };

	gw_default_session(s, mktime(&tm));
	ck_assert_str_eq(s, "LS20251203");
}
END_TEST

/* ---- the logins' write-ahead journal's records (gateway/wal.c) ---------- */

START_TEST(wal_record)
{
	uint8_t rec[8 + 40], buf[GW_WAL_RECORD_MAX], bad[GW_WAL_RECORD_MAX];
	char name[CREDS_LOGIN_LEN + 1];
	const uint8_t *got;
	size_t len, got_len;
	uint64_t seq;

	for (size_t i = 0; i < sizeof(rec); i++)
		rec[i] = (uint8_t)(i * 7);
	len = gw_wal_encode(buf, "TRADR1", 0x0102030405060708ull, rec, sizeof(rec));
	ck_assert_uint_eq(len, 1 + 6 + 8 + sizeof(rec));
	ck_assert_int_eq(gw_wal_parse(buf, len, name, &seq, &got, &got_len), 0);
	ck_assert_str_eq(name, "TRADR1");
	ck_assert_uint_eq(seq, 0x0102030405060708ull);
	ck_assert_uint_eq(got_len, sizeof(rec));
	ck_assert_mem_eq(got, rec, sizeof(rec));
	/* cut short anywhere before the record's tag ends: not a record */
	for (size_t cut = 0; cut < 1 + 6 + 8 + 8; cut++)
		ck_assert_int_eq(gw_wal_parse(buf, cut, name, &seq, &got, &got_len), -EBADMSG);
	/* a name of 0 or 7 bytes, or with a byte no login has */
	memcpy(bad, buf, len);
	bad[0] = 0;
	ck_assert_int_eq(gw_wal_parse(bad, len, name, &seq, &got, &got_len), -EBADMSG);
	bad[0] = CREDS_LOGIN_LEN + 1;
	ck_assert_int_eq(gw_wal_parse(bad, len, name, &seq, &got, &got_len), -EBADMSG);
	bad[0] = 6;
	bad[3] = '/';
	ck_assert_int_eq(gw_wal_parse(bad, len, name, &seq, &got, &got_len), -EBADMSG);
	ck_assert_int_eq(gw_wal_parse(buf, GW_WAL_RECORD_MAX + 1, name, &seq, &got, &got_len),
			 -EBADMSG);
}
END_TEST

/* ---- address lists ([gateway] sequencer, tape_retrans) ------------------- */

static void ck_addr(const struct sockaddr_in *a, const char *ip, int port)
{
	char want[32], got[32];

	snprintf(want, sizeof(want), "%s:%d", ip, port);
	net_format_addr(a, got, sizeof(got));
	ck_assert_str_eq(got, want);
}

START_TEST(addr_list_good)
{
	struct sockaddr_in a[GW_MAX_SEQUENCERS];

	ck_assert_int_eq(addrlist_parse("127.0.0.1:16000", a, GW_MAX_SEQUENCERS), 1);
	ck_addr(&a[0], "127.0.0.1", 16000);
	ck_assert_int_eq(addrlist_parse("10.0.0.1:1,10.0.0.2:2", a, 2), 2);
	ck_addr(&a[0], "10.0.0.1", 1);
	ck_addr(&a[1], "10.0.0.2", 2);
	/* blanks (spaces, tabs) around the items */
	ck_assert_int_eq(addrlist_parse(" 10.0.0.1:1 ,10.0.0.2:2,\t10.0.0.3:3 \t", a, 3), 3);
	ck_addr(&a[0], "10.0.0.1", 1);
	ck_addr(&a[1], "10.0.0.2", 2);
	ck_addr(&a[2], "10.0.0.3", 3);
	/* a bare port is net_parse_addr's 0.0.0.0:port */
	ck_assert_int_eq(addrlist_parse("7 , 8", a, 2), 2);
	ck_addr(&a[1], "0.0.0.0", 8);
	ck_assert_int_eq(addrlist_parse("1.1.1.1:1,2.2.2.2:2,3.3.3.3:3,4.4.4.4:4,5.5.5.5:5,"
					     "6.6.6.6:6,7.7.7.7:7,8.8.8.8:8,9.9.9.9:9",
					     a, GW_MAX_SEQUENCERS),
			 9);
	ck_addr(&a[8], "9.9.9.9", 9);
}
END_TEST

/* tape_recorders then tape_retrans: the near ones first, counted. */
START_TEST(addr_list_near)
{
	struct sockaddr_in a[RX_MAX_SERVERS];
	unsigned near = 99;

	ck_assert_int_eq(addrlist_parse_near("10.0.0.9:9", "10.0.0.1:1,10.0.0.2:2", a, 9, &near), 3);
	ck_assert_uint_eq(near, 1);
	ck_addr(&a[0], "10.0.0.9", 9);
	ck_addr(&a[2], "10.0.0.2", 2);
	ck_assert_int_eq(addrlist_parse_near(" ", "10.0.0.1:1", a, 9, &near), 1);
	ck_assert_uint_eq(near, 0);
	ck_assert_int_eq(addrlist_parse_near(NULL, "10.0.0.1:1", a, 9, &near), 1);
	ck_assert_int_eq(addrlist_parse_near("1.1.1.1:1,2.2.2.2:2", "3.3.3.3:3,4.4.4.4:4", a, 3,
					     &near),
			 -E2BIG);
	ck_assert_int_eq(addrlist_parse_near("1.1.1.1:1,2.2.2.2:2", "3.3.3.3:3", a, 2, &near),
			 -E2BIG);
	ck_assert_int_eq(addrlist_parse_near("1.1.1.1:1,", "3.3.3.3:3", a, 9, &near), -EINVAL);
	ck_assert_int_eq(addrlist_parse_near("1.1.1.1:1", "", a, 9, &near), -EINVAL);
}
END_TEST

static const struct {
	const char *list;
	int max, rc;
} bad_lists[] = {
	{ "", 9, -EINVAL },
	{ " \t ", 9, -EINVAL },
	{ ",", 9, -EINVAL },
	{ "127.0.0.1:1,", 9, -EINVAL },
	{ ",127.0.0.1:1", 9, -EINVAL },
	{ "127.0.0.1:1,,127.0.0.2:2", 9, -EINVAL },
	{ "127.0.0.1:1, ,127.0.0.2:2", 9, -EINVAL },
	{ "127.0.0.1:1 127.0.0.2:2", 9, -EINVAL }, /* blanks are not separators */
	{ "127.0.0.1 :1", 9, -EINVAL },
	{ "127.0.0.1:", 9, -EINVAL },
	{ "127.0.0.1:65536", 9, -EINVAL },
	{ "127.0.0.1:x", 9, -EINVAL },
	{ ":1", 9, -EINVAL },
	{ "127.0.0.1:1", 0, -EINVAL },
	{ "127.0.0.1:1", ADDRLIST_MAX + 1, -EINVAL },
	{ "127.0.0.1:1,127.0.0.2:2", 1, -E2BIG },
	{ "1.1.1.1:1,2.2.2.2:2,3.3.3.3:3,4.4.4.4:4,5.5.5.5:5,6.6.6.6:6,7.7.7.7:7,8.8.8.8:8,"
	  "9.9.9.9:9,10.10.10.10:10",
	  9, -E2BIG },
	{ "127.0.0.1:1,127.0.0.2:2,127.0.0.3:3", 2, -E2BIG },
};

START_TEST(addr_list_bad)
{
	struct sockaddr_in a[GW_MAX_SEQUENCERS], keep[GW_MAX_SEQUENCERS];

	memset(a, 0xab, sizeof(a));
	memcpy(keep, a, sizeof(a));
	ck_assert_msg(addrlist_parse(bad_lists[_i].list, a, bad_lists[_i].max) ==
			      bad_lists[_i].rc,
		      "\"%s\" (max %d): want %d", bad_lists[_i].list, bad_lists[_i].max,
		      bad_lists[_i].rc);
	ck_assert_msg(memcmp(a, keep, sizeof(a)) == 0, "\"%s\": output changed",
		      bad_lists[_i].list);
}
END_TEST

/* ---- partition routes ------------------------------------------------------- */

/* Loads a gateway config from overrides (section.key=value) into *cfg. */
static void routes_config(struct gw_config *cfg, const char *const *ov, size_t n)
{
	struct config_spec spec = { gw_config_keys, NULL, NULL, NULL };
	const char *all[16] = { "node.name=t" };
	char err[512];

	ck_assert_uint_lt(n, 16);
	if (n) /* memcpy from NULL, even of 0 bytes, is undefined */
		memcpy(all + 1, ov, n * sizeof(*ov));
	ck_assert_msg(config_load(&spec, cfg, NULL, all, n + 1, err, sizeof(err)) == 0, "%s", err);
}

static struct gw_routes *routes_of(const char *const *ov, size_t n)
{
	static struct gw_config cfg;
	struct gw_routes *r = NULL;
	char err[512];

	routes_config(&cfg, ov, n);
	ck_assert_msg(gw_routes_open(&r, &cfg, err, sizeof(err)) == 0, "%s", err);
	return r;
}

#define N_OV(a) (sizeof(a) / sizeof(a[0]))

static const char *const three_listed[] = {
	"gateway.partitions=3",
	"gateway.symbols=AAPL MSFT",
	"partition1.symbols= IBM,ORCL\tT ",
	"partition1.exec_group=239.255.9.3:1000",
	"partition1.exec_retrans=127.0.0.1:1001",
	"partition2.symbols=BRK.A",
	"partition2.exec_group=239.255.9.4:1000",
	"partition2.exec_retrans=127.0.0.1:1002,127.0.0.1:1003",
};

START_TEST(routes_listed)
{
	struct gw_routes *r = routes_of(three_listed, N_OV(three_listed));

	ck_assert_uint_eq(gw_routes_parts(r), 3);
	ck_assert_int_eq(gw_routes_listed(r), 1);
	ck_assert_int_eq(gw_route_symbol(r, "AAPL", 8), 0);
	ck_assert_int_eq(gw_route_symbol(r, "MSFT    ", 8), 0); /* OUCH's padding */
	ck_assert_int_eq(gw_route_symbol(r, "IBM", 3), 1);
	ck_assert_int_eq(gw_route_symbol(r, "ORCL", 9), 1);
	ck_assert_int_eq(gw_route_symbol(r, "T", 1), 1);
	ck_assert_int_eq(gw_route_symbol(r, "BRK.A", 5), 2);
	ck_assert_int_eq(gw_route_symbol(r, "BRK", 3), -ENOENT);
	ck_assert_int_eq(gw_route_symbol(r, "aapl", 4), -ENOENT); /* as the matcher: exact */
	ck_assert_int_eq(gw_route_symbol(r, "ZZZZ", 4), -ENOENT);
	ck_assert_int_eq(gw_route_symbol(r, "", 0), -ENOENT);
	ck_assert_int_eq(gw_route_symbol(r, "        ", 8), -ENOENT);
	gw_routes_close(r);
}
END_TEST

START_TEST(routes_hash)
{
	static const char *const ov[] = {
		"gateway.partitions=3",
		"partition1.exec_group=239.255.9.3:1000",
		"partition1.exec_retrans=127.0.0.1:1001",
		"partition2.exec_group=239.255.9.4:1000",
		"partition2.exec_retrans=127.0.0.1:1002",
	};
	static const char *const syms[] = { "AAPL", "MSFT", "IBM", "ORCL", "T", "ZZZZZZZZ" };
	struct gw_routes *r = routes_of(ov, N_OV(ov));

	ck_assert_int_eq(gw_routes_listed(r), 0);
	/* FNV-1a, 32 bits, of the characters without the padding (the man
	 * page tells operators so): "AAPL" = 0x58cd330b */
	ck_assert_uint_eq(gw_route_symbol_hash("AAPL", 4), 0x58cd330bu);
	ck_assert_uint_eq(gw_route_symbol_hash("AAPL    ", 8), 0x58cd330bu);
	for (size_t i = 0; i < N_OV(syms); i++)
		ck_assert_int_eq(gw_route_symbol(r, syms[i], strlen(syms[i])),
				 (int)(gw_route_symbol_hash(syms[i], strlen(syms[i])) % 3));
	gw_routes_close(r);

	/* one partition, the configuration of old: everything to 0, no table */
	r = routes_of(NULL, 0);
	ck_assert_uint_eq(gw_routes_parts(r), 1);
	ck_assert_int_eq(gw_route_symbol(r, "ANYTHING", 8), 0);
	ck_assert_int_eq(gw_route_enter(r, 0, "T1", 2, 0), -EINVAL);
	ck_assert_int_eq(gw_route_token(r, 0, "T1", 2), -ENOENT);
	ck_assert_int_eq(gw_route_full(r), 0);
	gw_routes_close(r);
}
END_TEST

static const struct {
	const char *ov[4], *why;
} bad_routes[] = {
	{ { "gateway.partitions=2" }, "[partition1] exec_group" },
	{ { "gateway.partitions=2", "partition1.exec_group=239.255.9.3:1" },
	  "[partition1] exec_retrans" },
	{ { "gateway.partitions=2", "partition1.exec_group=239.255.0.2:18000",
	    "partition1.exec_retrans=127.0.0.1:1" },
	  "partition 0's as well" },
	{ { "partition1.exec_group=239.255.9.3:1" }, "[partition1]: configured" },
	{ { "partition15.exec_session=X" }, "[partition15]: configured" },
	{ { "gateway.partitions=2", "partition1.exec_group=239.255.9.3:1",
	    "partition1.exec_retrans=127.0.0.1:1", "gateway.symbols=AAPL" },
	  "[partition1] symbols: missing" },
	{ { "gateway.partitions=2", "partition1.exec_group=239.255.9.3:1",
	    "partition1.exec_retrans=127.0.0.1:1", "partition1.symbols=AAPL" },
	  "[gateway] symbols: missing" },
	{ { "gateway.symbols=AAPL TOOLONGXX" }, "\"TOOLONGXX\"" },
	{ { "gateway.symbols=AAPL AAPL" }, "AAPL is partition 0's too" },
	{ { "gateway.symbols=AA\x01" }, "printable" },
	{ { "gateway.exec_group=" }, "[gateway] exec_group" },
	{ { "gateway.exec_retrans=" }, "[gateway] exec_retrans" },
};

START_TEST(routes_bad)
{
	static struct gw_config cfg;
	struct gw_routes *r = NULL;
	char err[512] = "";
	size_t n = 0;

	while (n < 4 && bad_routes[_i].ov[n])
		n++;
	routes_config(&cfg, bad_routes[_i].ov, n);
	ck_assert_int_eq(gw_routes_open(&r, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(err, bad_routes[_i].why), "case %d: \"%s\" does not say \"%s\"", _i,
		      err, bad_routes[_i].why);
}
END_TEST

START_TEST(routes_tokens)
{
	static const char *const ov[] = {
		"gateway.partitions=2",
		"gateway.max_tokens=1024",
		"partition1.exec_group=239.255.9.3:1000",
		"partition1.exec_retrans=127.0.0.1:1001",
	};
	struct gw_routes *r = routes_of(ov, N_OV(ov));
	char tok[16];
	int rc;

	ck_assert_int_eq(gw_route_token(r, 0, "T1", 2), -ENOENT);
	ck_assert_int_eq(gw_route_enter(r, 0, "T1", 2, 1), 0);
	ck_assert_int_eq(gw_route_token(r, 0, "T1", 2), 1);
	ck_assert_int_eq(gw_route_token(r, 0, "T1            ", 14), 1); /* padded */
	ck_assert_int_eq(gw_route_token(r, 1, "T1", 2), -ENOENT); /* per login */
	ck_assert_int_eq(gw_route_token(r, 0, "T", 1), -ENOENT);
	ck_assert_int_eq(gw_route_enter(r, 0, "T1", 2, 0), -EEXIST); /* the first stays */
	ck_assert_int_eq(gw_route_maybe(r, 0, "T1", 2, 0), -EEXIST);
	ck_assert_int_eq(gw_route_token(r, 0, "T1", 2), 1);
	ck_assert_int_eq(gw_route_enter(r, 1, "T1", 2, 0), 0);
	ck_assert_int_eq(gw_route_token(r, 1, "T1", 2), 0);
	ck_assert_int_eq(gw_route_enter(r, 0, "T2", 2, 2), -EINVAL); /* no partition 2 */
	/* max_tokens live orders for Enter Orders, then the slack (3/4 of 2048
	 * slots) for the live tokens an execution stream names */
	for (int i = 2; i < 1024; i++) {
		snprintf(tok, sizeof(tok), "E%d", i);
		ck_assert_int_eq(gw_route_enter(r, 0, tok, strlen(tok), (unsigned)i & 1), 0);
	}
	ck_assert_uint_eq(gw_route_count(r), 1024);
	ck_assert_int_eq(gw_route_full(r), 1);
	ck_assert_int_eq(gw_route_enter(r, 0, "NEW", 3, 0), -ENOSPC);
	for (int i = 0;; i++) {
		struct ouch_msg m = { .type = OUCH_ACCEPTED };

		snprintf(m.u.accepted.token, sizeof(m.u.accepted.token), "R%d", i);
		m.u.accepted.shares = 100;
		m.u.accepted.state = OUCH_STATE_LIVE;
		rc = gw_route_learn(r, 2, 1, &m);
		if (rc != 0)
			break;
		ck_assert_int_lt(i, 2048);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_uint_eq(gw_route_count(r), 1536);
	ck_assert_int_eq(gw_route_verify(r), 0);
	for (int i = 2; i < 1024; i++) {
		snprintf(tok, sizeof(tok), "E%d", i);
		ck_assert_int_eq(gw_route_token(r, 0, tok, strlen(tok)), i & 1);
	}
	ck_assert_int_eq(gw_route_token(r, 2, "R7", 2), 1);
	gw_routes_close(r);
}
END_TEST

/* ---- a gateway on loopback ------------------------------------------------ */

struct rig {
	char dir[64];
	struct ev_loop *loop;
	struct gw *gw;
	int seq_fd; /* the fake sequencer */
	int port; /* OUCH */
	int tape_port; /* of the tape's multicast group, 239.255.9.1 */
	int exec_port; /* of the exec groups: 239.255.9.2, 239.255.9.3 (partition 1) */
	uint8_t dgram[2048]; /* the last command datagram read (next_command) */
	size_t dlen;
};

static int udp_bound(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	getsockname(fd, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Opens the gateway with the rig's configuration, then `extra` overrides
 * (section.key=value; the last setting of a key wins). */
static void rig_open_ex(struct rig *r, char extra[][160], int n_extra)
{
	static const struct config_key *keys = gw_config_keys;
	struct config_spec spec = { keys, NULL, NULL, NULL };
	struct gw_config cfg;
	char err[512], set[40][160], creds[128];
	const char *ov[40];
	int sp, n = 0, base = 30000 + (getpid() % 5000) * 4;
	FILE *f;

	snprintf(r->dir, sizeof(r->dir), "/tmp/test_gateway_%d", (int)getpid());
	snprintf(creds, sizeof(creds), "%s.creds", r->dir);
	static char pw3[CREDS_HASH_LEN]; /* TRADR3's, hashed once */

	if (!pw3[0])
		ck_assert_int_eq(creds_password_hash("PW3", pw3), 0);
	f = fopen(creds, "w");
	fprintf(f, "[logins]\nTRADR1 = pw1 FRMA\nTRADR2 = pw2 FRMB cancel_on_disconnect\n"
		   "TRADR3 = %s FRMA\n", pw3);
	fclose(f);
	r->seq_fd = udp_bound(&sp);
	r->tape_port = base;
	r->exec_port = base + 2;
	r->dlen = 0;
	snprintf(set[n++], 160, "node.name=gwtest");
	snprintf(set[n++], 160, "node.state_dir=%s", r->dir);
	snprintf(set[n++], 160, "node.log_level=err");
	snprintf(set[n++], 160, "gateway.ouch_listen=127.0.0.1:0");
	snprintf(set[n++], 160, "gateway.sequencer=127.0.0.1:%d", sp);
	snprintf(set[n++], 160, "gateway.tape_group=239.255.9.1:%d", base);
	snprintf(set[n++], 160, "gateway.tape_retrans=127.0.0.1:%d", base + 1);
	snprintf(set[n++], 160, "gateway.exec_group=239.255.9.2:%d", base + 2);
	snprintf(set[n++], 160, "gateway.exec_retrans=127.0.0.1:%d", base + 3);
	snprintf(set[n++], 160, "gateway.soup_session=SESS1");
	snprintf(set[n++], 160, "gateway.credentials=%s", creds);
	snprintf(set[n++], 160, "gateway.heartbeat=200ms");
	snprintf(set[n++], 160, "gateway.idle_timeout=600ms");
	ck_assert_int_le(n + n_extra, 40);
	for (int i = 0; i < n_extra; i++)
		memcpy(set[n++], extra[i], 160);
	for (int i = 0; i < n; i++)
		ov[i] = set[i];
	ck_assert_msg(config_load(&spec, &cfg, NULL, ov, (size_t)n, err, sizeof(err)) == 0, "%s",
		      err);
	snprintf(cfg.node.control, sizeof(cfg.node.control), "%s/ctl", r->dir);
	r->loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_int_eq(gw_open(&r->gw, r->loop, &cfg), 0);
	r->port = gw_ouch_port(r->gw);
	ck_assert_int_gt(r->port, 0);
}

static void rig_open(struct rig *r)
{
	rig_open_ex(r, NULL, 0);
}

static void rig_close(struct rig *r)
{
	char creds[80];

	gw_stop(r->gw);
	gw_close(r->gw);
	ev_loop_destroy(r->loop);
	close(r->seq_fd);
	snprintf(creds, sizeof(creds), "%s.creds", r->dir);
	ck_assert_int_eq(testutil_rm_rf(r->dir), 0);
	ck_assert_int_eq(testutil_rm_rf(creds), 0);
}

/* Runs the loop until fd is readable (or ms pass); 1 when readable. */
static int pump_until(struct rig *r, int fd, int ms)
{
	for (int t = 0; t < ms; t += 5) {
		ev_run(r->loop, EVRUN_NOWAIT);
		if (testutil_wait_readable(fd, 5))
			return 1;
	}
	return 0;
}

static int client_connect(struct rig *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ev_run(r->loop, EVRUN_NOWAIT);
	return fd;
}

/* Reads one SoupBinTCP packet: its type, payload in buf; 0 on EOF. */
static int client_read(struct rig *r, int fd, uint8_t *buf, size_t cap, size_t *len)
{
	uint8_t hdr[2];
	size_t n, got = 0;

	if (!pump_until(r, fd, 2000))
		return -1;
	if (recv(fd, hdr, 2, MSG_WAITALL) != 2)
		return 0;
	n = (size_t)(hdr[0] << 8 | hdr[1]);
	ck_assert_uint_le(n, cap);
	while (got < n) {
		ssize_t k;

		pump_until(r, fd, 500);
		k = recv(fd, buf + got, n - got, 0);
		if (k <= 0)
			return 0;
		got += (size_t)k;
	}
	*len = n - 1;
	return buf[0];
}

static void client_login(int fd, const char *user, const char *pw, const char *session,
			 uint64_t seq)
{
	struct soup_login l = { .seq = seq };
	uint8_t b[64];
	int n;

	snprintf(l.username, sizeof(l.username), "%s", user);
	snprintf(l.password, sizeof(l.password), "%s", pw);
	snprintf(l.session, sizeof(l.session), "%s", session);
	n = soup_build_login_request(b, sizeof(b), &l);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(write(fd, b, (size_t)n), n);
}

START_TEST(login_rejects)
{
	struct rig r;
	uint8_t b[128];
	size_t len;
	int fd;

	rig_open(&r);
	fd = client_connect(&r);
	client_login(fd, "TRADR1", "nope", "", 0);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 'J');
	ck_assert_int_eq(b[1], 'A');
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 0);
	close(fd);

	fd = client_connect(&r);
	client_login(fd, "NOBODY", "pw1", "", 0);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 'J');
	ck_assert_int_eq(b[1], 'A');
	close(fd);

	fd = client_connect(&r);
	client_login(fd, "TRADR1", "pw1", "OTHER", 0);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 'J');
	ck_assert_int_eq(b[1], 'S');
	close(fd);

	fd = client_connect(&r); /* a packet before login */
	ck_assert_int_eq(write(fd, "\x00\x01R", 3), 3);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 0);
	close(fd);

	fd = client_connect(&r); /* oversize */
	ck_assert_int_eq(write(fd, "\xff\xffL", 3), 3);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 0);
	close(fd);

	fd = client_connect(&r); /* unknown type */
	ck_assert_int_eq(write(fd, "\x00\x01Q", 3), 3);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 0);
	close(fd);
	rig_close(&r);
}
END_TEST

/* A client socket from source address src (127/8) to the rig. */
static int client_connect_from(struct rig *r, const char *src)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in b = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(inet_pton(AF_INET, src, &b.sin_addr), 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ev_run(r->loop, EVRUN_NOWAIT);
	return fd;
}

/* One login attempt of user/pw from src: the answer's type ('A', 'J'),
 * the reject reason in *reason. */
static int try_login(struct rig *r, const char *src, const char *user, const char *pw,
		     char *reason)
{
	uint8_t b[128];
	size_t len;
	int fd = client_connect_from(r, src), t;

	client_login(fd, user, pw, "", 0);
	t = client_read(r, fd, b, sizeof(b), &len);
	*reason = (char)b[1];
	close(fd);
	return t;
}

/* A hashed password, verified off the loop without regard to case; two
 * failures of TRADR3 at 127.0.0.1 lock it there: its right password is
 * then rejected unverified, while TRADR3 still logs in from 127.0.0.2. */
START_TEST(login_hashed_and_locked)
{
	char extra[3][160] = { "gateway.login_failures_before_lockout=2",
			       "gateway.login_backoff=10ms", "gateway.login_backoff_max=50ms" };
	struct rig r;
	char why = 0;

	rig_open_ex(&r, extra, 3);
	ck_assert_int_eq(try_login(&r, "127.0.0.1", "TRADR3", "pw3", &why), 'A');
	ck_assert_uint_eq(r.gw->st.login_verifications, 1);
	ck_assert_int_eq(try_login(&r, "127.0.0.1", "TRADR3", "pw4", &why), 'J');
	ck_assert_int_eq(why, 'A');
	ck_assert_int_eq(try_login(&r, "127.0.0.1", "TRADR3", "PW5", &why), 'J');
	ck_assert_uint_eq(r.gw->st.login_failures, 2);
	ck_assert_uint_eq(r.gw->st.login_lockouts, 1);
	ck_assert_uint_eq(r.gw->st.login_verifications, 3);
	ck_assert_int_eq(try_login(&r, "127.0.0.1", "TRADR3", "pw3", &why), 'J');
	ck_assert_int_eq(why, 'A');
	ck_assert_uint_eq(r.gw->st.login_locked_out_rejects, 1);
	ck_assert_uint_eq(r.gw->st.login_verifications, 3); /* not verified */
	/* another login at that address is not locked; the locked one is not
	 * locked elsewhere */
	/* (TRADR1's entry is plaintext: decided in line, answered after a
	 * verification of the dummy hash, so that it takes a hash's time) */
	ck_assert_int_eq(try_login(&r, "127.0.0.1", "TRADR1", "PW1", &why), 'A');
	ck_assert_uint_eq(r.gw->st.login_verifications, 4);
	ck_assert_int_eq(try_login(&r, "127.0.0.2", "tradr3", "Pw3", &why), 'A');
	ck_assert_uint_eq(r.gw->st.logins, 3);
	/* a name that is no login is verified too (against the dummy hash) */
	ck_assert_int_eq(try_login(&r, "127.0.0.3", "NOBODY", "pw3", &why), 'J');
	ck_assert_uint_eq(r.gw->st.login_verifications, 6);
	/* and it has a lockout entry of its own: two failures lock NOBODY at
	 * 127.0.0.3, not another name that is no login */
	ck_assert_int_eq(try_login(&r, "127.0.0.3", "NOBODY", "pw3", &why), 'J');
	ck_assert_int_eq(try_login(&r, "127.0.0.3", "NOBODY", "pw3", &why), 'J');
	ck_assert_uint_eq(r.gw->st.login_locked_out_rejects, 2);
	ck_assert_int_eq(try_login(&r, "127.0.0.3", "NOONE", "pw3", &why), 'J');
	ck_assert_uint_eq(r.gw->st.login_locked_out_rejects, 2);
	ck_assert_uint_eq(r.gw->st.login_verifications, 8);
	rig_close(&r);
}
END_TEST

START_TEST(order_to_command)
{
	struct rig r;
	uint8_t b[2048], pkt[128];
	struct mold_packet mp;
	struct mold_session ms;
	size_t len;
	int fd, other, n;
	static const uint8_t enter[49] = "OTOKEN1        B\x00\x00\x00\x64"
					 "AAPL    \x00\x0f\x42\x40\x00\x00\x00\x00"
					 "FRMAAAN\x00\x00\x00\x00NR";

	rig_open(&r);
	fd = client_connect(&r);
	client_login(fd, "tradr1", "PW1", "SESS1", 1);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 'A');
	ck_assert_int_eq(memcmp(b + 1, "     SESS1", 10), 0);
	ck_assert_int_eq(memcmp(b + 11, "                   1", 20), 0);

	other = client_connect(&r); /* the same login again */
	client_login(other, "TRADR1", "pw1", "", 0);
	ck_assert_int_eq(client_read(&r, other, b, sizeof(b), &len), 'J');
	ck_assert_int_eq(b[1], 'S');
	close(other);

	n = soup_build_unsequenced(pkt, sizeof(pkt), enter, sizeof(enter));
	ck_assert_int_eq(write(fd, pkt, (size_t)n), n);
	mold_session_set(&ms, "gwtest");
	do {
		ck_assert(pump_until(&r, r.seq_fd, 2000));
		n = (int)recv(r.seq_fd, b, sizeof(b), 0);
		ck_assert_int_eq(mold_parse(b, (size_t)n, &ms, 0, &mp), 0);
	} while (mp.kind != MOLD_DATA);
	ck_assert_uint_eq(mp.seq, 1);
	ck_assert_uint_eq(mp.count, 1);
	{
		struct mold_iter it;
		uint64_t s;
		const uint8_t *d;
		uint16_t dl;
		Lockstep__Command *c;

		mold_iter_init(&it, &mp);
		ck_assert(mold_iter_next(&it, &s, &d, &dl));
		c = lockstep__command__unpack(NULL, dl, d);
		ck_assert_ptr_nonnull(c);
		ck_assert_str_eq(c->user, "TRADR1");
		ck_assert_str_eq(c->firm, "FRMA");
		ck_assert_int_eq(c->body_case, LOCKSTEP__COMMAND__BODY_NEW_ORDER);
		ck_assert_str_eq(c->new_order->token, "TOKEN1");
		ck_assert_str_eq(c->new_order->symbol, "AAPL");
		ck_assert_uint_eq(c->new_order->shares, 100);
		ck_assert_uint_eq(c->new_order->price, 1000000);
		lockstep__command__free_unpacked(c, NULL);
	}
	/* undecodable OUCH: disconnected, nothing sequenced */
	n = soup_build_unsequenced(pkt, sizeof(pkt), "O123", 4);
	ck_assert_int_eq(write(fd, pkt, (size_t)n), n);
	for (;;) {
		int t = client_read(&r, fd, b, sizeof(b), &len);

		if (t == 'H')
			continue;
		ck_assert_int_eq(t, 0);
		break;
	}
	close(fd);
	rig_close(&r);
}
END_TEST

START_TEST(heartbeat_and_idle)
{
	struct rig r;
	uint8_t b[128];
	size_t len;
	int fd;

	rig_open(&r);
	fd = client_connect(&r);
	client_login(fd, "TRADR1", "pw1", "", 0);
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 'A');
	ck_assert_int_eq(client_read(&r, fd, b, sizeof(b), &len), 'H');
	/* silent client: dropped after idle_timeout (600 ms) */
	for (;;) {
		int t = client_read(&r, fd, b, sizeof(b), &len);

		if (t == 'H')
			continue;
		ck_assert_int_eq(t, 0);
		break;
	}
	close(fd);
	rig_close(&r);
}
END_TEST

/* ---- a sequencer group of several nodes -------------------------------- */

static const uint8_t enter_order[49] = "OTOKEN1        B\x00\x00\x00\x64"
				       "AAPL    \x00\x0f\x42\x40\x00\x00\x00\x00"
				       "FRMAAAN\x00\x00\x00\x00NR";

/* Logs TRADR1 in and sends one Enter Order: command 1 of the stream. */
static int client_enter(struct rig *r)
{
	uint8_t b[256], pkt[128];
	size_t len;
	int fd = client_connect(r), n;

	client_login(fd, "TRADR1", "pw1", "", 0);
	ck_assert_int_eq(client_read(r, fd, b, sizeof(b), &len), 'A');
	n = soup_build_unsequenced(pkt, sizeof(pkt), enter_order, sizeof(enter_order));
	ck_assert_int_eq(write(fd, pkt, (size_t)n), n);
	return fd;
}

/* Runs the loop until one of fds is readable (or ms pass): the lowest index
 * readable, -1 when none; readable[i] says which were. */
static int pump_any(struct rig *r, const int *fds, int n, int ms, int *readable)
{
	for (int t = 0; t < ms; t += 5) {
		struct pollfd p[4];
		int first = -1;

		ck_assert_int_le(n, 4);
		ev_run(r->loop, EVRUN_NOWAIT);
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		if (poll(p, (nfds_t)n, 5) <= 0)
			continue;
		for (int i = n - 1; i >= 0; i--) {
			readable[i] = (p[i].revents & POLLIN) != 0;
			if (readable[i])
				first = i;
		}
		if (first >= 0)
			return first;
	}
	return -1;
}

/* The next command-stream datagram of kind `kind` on fd (others skipped):
 * its bytes in buf, its length returned. */
static int seq_read_kind(struct rig *r, int fd, enum mold_kind kind, uint8_t *buf, size_t cap)
{
	struct mold_session ms;
	struct mold_packet mp;

	mold_session_set(&ms, "gwtest");
	for (int i = 0; i < 100; i++) {
		int n;

		ck_assert_msg(pump_until(r, fd, 2000), "nothing from the gateway");
		n = (int)recv(fd, buf, cap, 0);
		ck_assert_int_eq(mold_parse(buf, (size_t)n, &ms, 0, &mp), 0);
		if (mp.kind == kind)
			return n;
	}
	ck_abort_msg("no datagram of kind %d", (int)kind);
	return -1;
}

/* [gateway] sequencer lists two nodes: each gets every datagram of the
 * command stream, the commands and the heartbeats, byte for byte. */
START_TEST(two_sequencers)
{
	struct rig r;
	char extra[1][160];
	uint8_t a[2048], b[2048];
	int fa, fb, pa, pb, na, nb, fd;

	fa = udp_bound(&pa);
	fb = udp_bound(&pb);
	snprintf(extra[0], 160, "gateway.sequencer= 127.0.0.1:%d ,\t127.0.0.1:%d", pa, pb);
	rig_open_ex(&r, extra, 1);
	fd = client_enter(&r);
	na = seq_read_kind(&r, fa, MOLD_DATA, a, sizeof(a));
	nb = seq_read_kind(&r, fb, MOLD_DATA, b, sizeof(b));
	ck_assert_int_eq(na, nb);
	ck_assert_int_eq(memcmp(a, b, (size_t)na), 0);
	ck_assert_uint_eq(wire_get_u64(a + MOLD_SESSION_LEN), 1); /* command 1 */
	/* heartbeats (cmd_heartbeat 100ms) go to both as well */
	na = seq_read_kind(&r, fa, MOLD_HEARTBEAT, a, sizeof(a));
	nb = seq_read_kind(&r, fb, MOLD_HEARTBEAT, b, sizeof(b));
	ck_assert_int_eq(na, MOLD_HEADER_LEN);
	ck_assert_int_eq(nb, MOLD_HEADER_LEN);
	ck_assert_int_eq(memcmp(a, b, MOLD_HEADER_LEN), 0);
	close(fd);
	rig_close(&r);
	close(fa);
	close(fb);
}
END_TEST

/* A node the kernel refuses to send to (port 0: EINVAL on every send)
 * does not keep the command stream from the others. */
START_TEST(refused_sequencer)
{
	struct rig r;
	char extra[1][160];
	uint8_t a[2048];
	int fa, pa, fd;

	fa = udp_bound(&pa);
	snprintf(extra[0], 160, "gateway.sequencer=127.0.0.1:0,127.0.0.1:%d", pa);
	rig_open_ex(&r, extra, 1);
	fd = client_enter(&r);
	seq_read_kind(&r, fa, MOLD_DATA, a, sizeof(a));
	ck_assert_uint_eq(wire_get_u64(a + MOLD_SESSION_LEN), 1);
	seq_read_kind(&r, fa, MOLD_HEARTBEAT, a, sizeof(a));
	close(fd);
	rig_close(&r);
	close(fa);
}
END_TEST

/* Reads a tape request on fd: checks it asks from seq 1, returns the
 * asker's address in from. */
static void tape_request_read(int fd, struct sockaddr_in *from)
{
	struct mold_session ts;
	struct mold_request q;
	socklen_t fl = sizeof(*from);
	uint8_t buf[64];
	ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)from, &fl);

	mold_session_set(&ts, "TAPE");
	ck_assert_int_eq(mold_parse_request(buf, (size_t)n, &ts, &q), 0);
	ck_assert_uint_eq(q.seq, 1);
	ck_assert_uint_eq(q.count, 4);
}

/* [gateway] tape_retrans lists two servers, asked in turn; the too-old
 * answer counts against the server it came from (by source address): the
 * other one is asked at once, and the one that said so no more. */
START_TEST(tape_too_old_by_source)
{
	struct rig r;
	char extra[3][160];
	uint8_t b[2048], hb[MOLD_HEADER_LEN];
	struct mold_session ts;
	struct sockaddr_in from, group = { .sin_family = AF_INET };
	struct in_addr lo = { .s_addr = htonl(INADDR_LOOPBACK) };
	int t[2], pt[2], rd[2] = { 0, 0 }, fd, mc;

	t[0] = udp_bound(&pt[0]);
	t[1] = udp_bound(&pt[1]);
	snprintf(extra[0], 160, "gateway.tape_retrans=127.0.0.1:%d, 127.0.0.1:%d", pt[0], pt[1]);
	snprintf(extra[1], 160, "gateway.request_delay=0ms");
	snprintf(extra[2], 160, "gateway.retrans_timeout=50ms");
	rig_open_ex(&r, extra, 3);
	fd = client_enter(&r);
	seq_read_kind(&r, r.seq_fd, MOLD_DATA, b, sizeof(b)); /* command 1 is out, unacknowledged */

	/* a tape heartbeat says 1..4 exist: they may hold command 1 */
	mc = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(mc, 0);
	ck_assert_int_eq(setsockopt(mc, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)), 0);
	inet_pton(AF_INET, "239.255.9.1", &group.sin_addr);
	group.sin_port = htons((uint16_t)r.tape_port);
	mold_session_set(&ts, "TAPE");
	mold_build_heartbeat(hb, &ts, 5);
	ck_assert_int_eq(sendto(mc, hb, sizeof(hb), 0, (struct sockaddr *)&group, sizeof(group)),
			 (ssize_t)sizeof(hb));

	/* asked from server 0, then (no answer) from server 1 */
	ck_assert_int_eq(pump_any(&r, t, 2, 2000, rd), 0);
	tape_request_read(t[0], &from);
	ck_assert_int_eq(pump_any(&r, t, 2, 2000, rd), 1);
	tape_request_read(t[1], &from);
	/* server 1 holds nothing below 5: server 0 is asked again at once, and
	 * the retry after that goes to server 0 too, not to server 1 */
	ck_assert_int_eq(sendto(t[1], hb, sizeof(hb), 0, (struct sockaddr *)&from, sizeof(from)),
			 (ssize_t)sizeof(hb));
	for (int k = 0; k < 2; k++) {
		rd[0] = rd[1] = 0;
		ck_assert_int_eq(pump_any(&r, t, 2, 2000, rd), 0);
		ck_assert_msg(!rd[1], "server 1 asked after its too-old answer");
		tape_request_read(t[0], &from);
	}
	close(mc);
	close(fd);
	rig_close(&r);
	close(t[0]);
	close(t[1]);
}
END_TEST

/* ---- partitions on loopback ------------------------------------------------ */

/* Two partitions: AAPL and MSFT in 0, IBM and ORCL in 1, whose exec group
 * is 239.255.9.3 (on the port of partition 0's). */
static void rig_parts_open(struct rig *r)
{
	char extra[7][160];
	int base = 30000 + (getpid() % 5000) * 4; /* rig_open_ex's */

	snprintf(extra[0], 160, "gateway.partitions=2");
	snprintf(extra[1], 160, "gateway.symbols=AAPL MSFT");
	snprintf(extra[2], 160, "partition1.symbols=IBM,ORCL");
	snprintf(extra[3], 160, "partition1.exec_group=239.255.9.3:%d", base + 2);
	snprintf(extra[4], 160, "partition1.exec_retrans=127.0.0.1:%d", base + 3);
	snprintf(extra[5], 160, "gateway.resend_timeout=60s"); /* each command comes once */
	snprintf(extra[6], 160, "gateway.idle_timeout=10s");
	rig_open_ex(r, extra, 7);
}

/* One partition that lists its symbols. */
static void rig_listed_open(struct rig *r)
{
	char extra[3][160];

	snprintf(extra[0], 160, "gateway.symbols=AAPL MSFT");
	snprintf(extra[1], 160, "gateway.resend_timeout=60s");
	snprintf(extra[2], 160, "gateway.idle_timeout=10s");
	rig_open_ex(r, extra, 3);
}

/* Stops the gateway and starts it again on the same state directory
 * (without its progress file when `forget`: the journals alone then say
 * where each exec stream resumes). */
static void rig_reopen(struct rig *r, void (*open_fn)(struct rig *), int forget)
{
	char path[128];

	gw_stop(r->gw);
	gw_close(r->gw);
	ev_loop_destroy(r->loop);
	close(r->seq_fd);
	if (forget) {
		snprintf(path, sizeof(path), "%s/gateway.pos", r->dir);
		ck_assert_int_eq(unlink(path), 0);
	}
	open_fn(r);
}

static int client_as(struct rig *r, const char *user, const char *pw, uint64_t seq)
{
	uint8_t b[256];
	size_t len;
	int fd = client_connect(r);

	client_login(fd, user, pw, "", seq);
	ck_assert_int_eq(client_read(r, fd, b, sizeof(b), &len), 'A');
	return fd;
}

static void client_send(int fd, const struct ouch_msg *m)
{
	uint8_t msg[64], pkt[128];
	int n = ouch_encode_inbound(m, msg, sizeof(msg)), k;

	ck_assert_int_gt(n, 0);
	k = soup_build_unsequenced(pkt, sizeof(pkt), msg, (uint16_t)n);
	ck_assert_int_eq(write(fd, pkt, (size_t)k), k);
}

static void send_enter(int fd, const char *token, const char *stock)
{
	struct ouch_msg m = { .type = OUCH_ENTER_ORDER };
	struct ouch_enter_order *e = &m.u.enter;

	snprintf(e->token, sizeof(e->token), "%s", token);
	snprintf(e->stock, sizeof(e->stock), "%s", stock);
	snprintf(e->firm, sizeof(e->firm), "FRMA");
	e->side = OUCH_BUY;
	e->shares = 100;
	e->price = 1000000;
	e->tif = OUCH_TIF_SYSTEM_HOURS;
	e->display = OUCH_DISPLAY_ATTRIBUTABLE;
	e->capacity = OUCH_CAP_AGENCY;
	e->iso = OUCH_ISO_NOT_ELIGIBLE;
	e->cross_type = OUCH_CROSS_NONE;
	e->customer_type = OUCH_CUST_NOT_RETAIL;
	client_send(fd, &m);
}

static void send_cancel(int fd, const char *token)
{
	struct ouch_msg m = { .type = OUCH_CANCEL_ORDER };

	snprintf(m.u.cancel.token, sizeof(m.u.cancel.token), "%s", token);
	client_send(fd, &m);
}

static void send_replace(int fd, const char *existing, const char *replacement)
{
	struct ouch_msg m = { .type = OUCH_REPLACE_ORDER };
	struct ouch_replace_order *o = &m.u.replace;

	snprintf(o->existing_token, sizeof(o->existing_token), "%s", existing);
	snprintf(o->replacement_token, sizeof(o->replacement_token), "%s", replacement);
	o->shares = 50;
	o->price = 1000000;
	o->tif = OUCH_TIF_SYSTEM_HOURS;
	o->display = OUCH_DISPLAY_ATTRIBUTABLE;
	o->iso = OUCH_ISO_NOT_ELIGIBLE;
	client_send(fd, &m);
}

static void send_modify(int fd, const char *token)
{
	struct ouch_msg m = { .type = OUCH_MODIFY_ORDER };

	snprintf(m.u.modify.token, sizeof(m.u.modify.token), "%s", token);
	m.u.modify.side = OUCH_SELL;
	m.u.modify.shares = 10;
	client_send(fd, &m);
}

/* Command `want` of the gateway's stream (heartbeats skipped), unpacked;
 * the caller frees it. Several commands may share a datagram: the last
 * datagram read is looked at first. */
static Lockstep__Command *next_command(struct rig *r, uint64_t want)
{
	struct mold_session ms;

	mold_session_set(&ms, "gwtest");
	for (int i = 0; i < 100; i++) {
		struct mold_packet mp;
		struct mold_iter it;
		const uint8_t *d;
		uint16_t dl;
		uint64_t seq;
		ssize_t n;

		if (r->dlen && mold_parse(r->dgram, r->dlen, &ms, 0, &mp) == 0 &&
		    mp.kind == MOLD_DATA) {
			mold_iter_init(&it, &mp);
			while (mold_iter_next(&it, &seq, &d, &dl))
				if (seq == want)
					return lockstep__command__unpack(NULL, dl, d);
		}
		ck_assert_msg(pump_until(r, r->seq_fd, 2000), "no command %d", (int)want);
		n = recv(r->seq_fd, r->dgram, sizeof(r->dgram), 0);
		ck_assert_int_gt(n, 0);
		r->dlen = (size_t)n;
	}
	ck_abort_msg("no command %d", (int)want);
	return NULL;
}

/* Command `want` is of `body` and goes to partition `part`. */
static void ck_command(struct rig *r, uint64_t want, int body, unsigned part)
{
	Lockstep__Command *c = next_command(r, want);

	ck_assert_ptr_nonnull(c);
	ck_assert_msg((int)c->body_case == body, "command %d: body %d, want %d", (int)want,
		      (int)c->body_case, body);
	ck_assert_msg(c->partition == part, "command %d: partition %u, want %u", (int)want,
		      c->partition, part);
	lockstep__command__free_unpacked(c, NULL);
}

#define NEW LOCKSTEP__COMMAND__BODY_NEW_ORDER
#define CXL LOCKSTEP__COMMAND__BODY_CANCEL
#define RPL LOCKSTEP__COMMAND__BODY_REPLACE
#define MOD LOCKSTEP__COMMAND__BODY_MODIFY
#define SES LOCKSTEP__COMMAND__BODY_SESSION

/* The next Sequenced Data message to the client (heartbeats skipped): its
 * OUCH bytes in b + 1; returns its type. */
static int client_msg(struct rig *r, int fd, uint8_t *b, size_t cap)
{
	size_t len;
	int t;

	while ((t = client_read(r, fd, b, cap, &len)) == 'H')
		;
	ck_assert_msg(t == 'S', "packet type %d, want Sequenced Data", t);
	return b[1];
}

/* The next message is `type` for `token`. */
static void ck_client(struct rig *r, int fd, int type, const char *token)
{
	uint8_t b[256];
	char want[15];

	ck_assert_int_eq(client_msg(r, fd, b, sizeof(b)), type);
	snprintf(want, sizeof(want), "%-14s", token);
	ck_assert_msg(memcmp(b + 10, want, 14) == 0, "token %.14s, want %s", b + 10, token);
}

/* Nothing but heartbeats for ms. */
static void client_quiet(struct rig *r, int fd, int ms)
{
	uint8_t b[256];
	size_t len;

	for (int t = 0; t < ms; t += 5) {
		ev_run(r->loop, EVRUN_NOWAIT);
		if (testutil_wait_readable(fd, 5))
			ck_assert_int_eq(client_read(r, fd, b, sizeof(b), &len), 'H');
	}
}

START_TEST(partition_routing)
{
	struct rig r;
	int fd;

	rig_parts_open(&r);
	fd = client_as(&r, "TRADR1", "pw1", 0);
	send_enter(fd, "T1", "IBM");
	ck_command(&r, 1, NEW, 1);
	send_enter(fd, "T2", "AAPL");
	ck_command(&r, 2, NEW, 0);
	send_cancel(fd, "T1");
	ck_command(&r, 3, CXL, 1);
	send_cancel(fd, "T2");
	ck_command(&r, 4, CXL, 0);
	send_cancel(fd, "NOPE"); /* unknown: partition 0 answers it */
	ck_command(&r, 5, CXL, 0);
	send_replace(fd, "T1", "T3"); /* T3 lives where T1 did */
	ck_command(&r, 6, RPL, 1);
	send_cancel(fd, "T3");
	ck_command(&r, 7, CXL, 1);
	send_modify(fd, "T3");
	ck_command(&r, 8, MOD, 1);
	send_replace(fd, "NOPE", "T5"); /* no order: T5 is not taken */
	ck_command(&r, 9, RPL, 0);
	send_enter(fd, "T5", "ORCL");
	ck_command(&r, 10, NEW, 1);
	send_enter(fd, "T1", "AAPL"); /* T1 again: where T1 went (a duplicate there) */
	ck_command(&r, 11, NEW, 1);
	/* no partition trades ZZZZ: partition 0's matcher is to reject it, on
	 * the tape (the gateway answers for no matcher) */
	send_enter(fd, "T4", "ZZZZ");
	ck_command(&r, 12, NEW, 0);
	send_enter(fd, "T6", "MSFT");
	ck_command(&r, 13, NEW, 0);
	close(fd);
	/* TRADR2's orders are canceled on disconnect, in either partition */
	fd = client_as(&r, "TRADR2", "pw2", 0);
	close(fd);
	ck_command(&r, 14, SES, 0);
	ck_command(&r, 15, SES, 1);

	/* a restart learns the tokens again from the command journal */
	rig_reopen(&r, rig_parts_open, 0);
	fd = client_as(&r, "TRADR1", "pw1", 0);
	send_cancel(fd, "T3");
	ck_command(&r, 16, CXL, 1);
	send_cancel(fd, "T5");
	ck_command(&r, 17, CXL, 1);
	send_cancel(fd, "T6");
	ck_command(&r, 18, CXL, 0);
	send_cancel(fd, "T4"); /* rejected by the gateway: unknown */
	ck_command(&r, 18, CXL, 0);
	close(fd);
	rig_close(&r);
}
END_TEST

static int mc_open(void)
{
	struct in_addr lo = { .s_addr = htonl(INADDR_LOOPBACK) };
	int mc = socket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_int_ge(mc, 0);
	ck_assert_int_eq(setsockopt(mc, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)), 0);
	return mc;
}

/* A packet of partition part's exec stream (239.255.9.(2 + part)): block
 * `seq` for `user`, an Accepted for token on stock; or (user NULL) a
 * heartbeat saying seq is next. */
static void exec_send(struct rig *r, int mc, unsigned part, uint64_t seq, const char *user,
		      const char *token, const char *stock)
{
	struct sockaddr_in group = { .sin_family = AF_INET };
	struct ouch_msg m = { .type = OUCH_ACCEPTED };
	struct ouch_accepted *a = &m.u.accepted;
	struct mold_session ms;
	struct mold_builder mb;
	uint8_t blk[128], pkt[256];
	char name[16];
	size_t len;
	int n;

	group.sin_addr.s_addr = htonl(0xefff0902u + part); /* 239.255.9.2 + part */
	group.sin_port = htons((uint16_t)r->exec_port);
	snprintf(name, sizeof(name), "EXEC%u", part);
	mold_session_set(&ms, name);
	if (!user) {
		len = mold_build_heartbeat(pkt, &ms, seq);
	} else {
		snprintf(a->token, sizeof(a->token), "%s", token);
		snprintf(a->stock, sizeof(a->stock), "%s", stock);
		snprintf(a->firm, sizeof(a->firm), "FRMA");
		a->timestamp = 1;
		a->side = OUCH_BUY;
		a->shares = 100;
		a->price = 1000000;
		a->tif = OUCH_TIF_SYSTEM_HOURS;
		a->display = OUCH_DISPLAY_ATTRIBUTABLE;
		a->order_ref = seq;
		a->capacity = OUCH_CAP_AGENCY;
		a->iso = OUCH_ISO_NOT_ELIGIBLE;
		a->cross_type = OUCH_CROSS_NONE;
		a->state = OUCH_STATE_LIVE;
		wire_exec_header(blk, 100 + seq, user);
		n = ouch_encode_outbound(&m, blk + WIRE_EXEC_HDR_LEN,
					 sizeof(blk) - WIRE_EXEC_HDR_LEN);
		ck_assert_int_gt(n, 0);
		mold_build_begin(&mb, pkt, sizeof(pkt), &ms, seq);
		len = WIRE_EXEC_HDR_LEN + (size_t)n;
		ck_assert_int_eq(mold_build_add(&mb, blk, (uint16_t)len), 0);
		len = mold_build_end(&mb);
	}
	ck_assert_int_eq(sendto(mc, pkt, len, 0, (struct sockaddr *)&group, sizeof(group)),
			 (ssize_t)len);
}

/* Runs the loop until the gateway has heard every partition (or ms pass). */
static int wait_live(struct rig *r, int ms)
{
	for (int t = 0; t < ms && !gw_exec_live(r->gw); t += 5) {
		ev_run(r->loop, EVRUN_NOWAIT);
		usleep(5000);
	}
	return gw_exec_live(r->gw);
}

/* Each partition's stream is arbitrated alone: the same exec seq in two
 * partitions is two messages; the gateway is ready once both are heard;
 * the streams teach the token table; after a restart without the progress
 * file, each stream resumes after what the login journals hold for it. */
START_TEST(partition_exec)
{
	struct rig r;
	int fd, mc = mc_open();

	rig_parts_open(&r);
	fd = client_as(&r, "TRADR1", "pw1", 1);
	ck_assert(!gw_exec_live(r.gw));
	exec_send(&r, mc, 0, 1, NULL, NULL, NULL);
	ck_assert(!wait_live(&r, 300));
	exec_send(&r, mc, 1, 1, NULL, NULL, NULL);
	ck_assert(wait_live(&r, 2000));
	exec_send(&r, mc, 1, 1, "TRADR1", "X1", "IBM");
	ck_client(&r, fd, 'A', "X1");
	exec_send(&r, mc, 0, 1, "TRADR1", "X0", "AAPL");
	ck_client(&r, fd, 'A', "X0");
	exec_send(&r, mc, 1, 2, "TRADR1", "X2", "ORCL");
	ck_client(&r, fd, 'A', "X2");
	exec_send(&r, mc, 1, 2, "TRADR1", "X2", "ORCL"); /* another replica's copy */
	client_quiet(&r, fd, 100);
	/* X1 was never entered here: partition 1's stream says where it is */
	send_cancel(fd, "X1");
	ck_command(&r, 1, CXL, 1);
	send_cancel(fd, "X0");
	ck_command(&r, 2, CXL, 0);
	close(fd);

	rig_reopen(&r, rig_parts_open, 1);
	fd = client_as(&r, "TRADR1", "pw1", 1);
	ck_client(&r, fd, 'A', "X1"); /* replayed from the journal */
	ck_client(&r, fd, 'A', "X0");
	ck_client(&r, fd, 'A', "X2");
	/* the replicas' streams from the start: only what is new gets through */
	exec_send(&r, mc, 1, 1, "TRADR1", "X1", "IBM");
	exec_send(&r, mc, 0, 1, "TRADR1", "X0", "AAPL");
	exec_send(&r, mc, 1, 2, "TRADR1", "X2", "ORCL");
	exec_send(&r, mc, 1, 3, "TRADR1", "X3", "IBM");
	ck_client(&r, fd, 'A', "X3");
	exec_send(&r, mc, 0, 2, "TRADR1", "X4", "MSFT");
	ck_client(&r, fd, 'A', "X4");
	client_quiet(&r, fd, 200);
	/* and the token table learns from the login journals too */
	send_cancel(fd, "X2");
	ck_command(&r, 3, CXL, 1);
	close(fd);
	close(mc);
	rig_close(&r);
}
END_TEST

/* One partition listing its symbols: an unknown symbol goes to partition 0,
 * whose matcher rejects it on the tape; the gateway answers nothing itself. */
START_TEST(listed_unknown_symbol_to_partition_0)
{
	struct rig r;
	int fd, mc = mc_open();

	rig_listed_open(&r);
	fd = client_as(&r, "TRADR1", "pw1", 1);
	exec_send(&r, mc, 0, 1, "TRADR1", "X0", "AAPL");
	ck_client(&r, fd, 'A', "X0");
	send_enter(fd, "T9", "IBM");
	ck_command(&r, 1, NEW, 0);
	send_enter(fd, "T8", "MSFT");
	ck_command(&r, 2, NEW, 0);
	client_quiet(&r, fd, 200); /* no Rejected of the gateway's own */
	close(fd);
	close(mc);
	rig_close(&r);
}
END_TEST

/* ---- the trading day -------------------------------------------------------- */

/* One event on the tape: tape index `index` as MoldUDP64 seq `seq` of
 * session `sess`, a DayEvent {kind, day} (kind TAPE_DAY_NONE: another
 * gateway's command), committed. Sent to the tape group, or (to a
 * request's asker) from fd. */
static void tape_send(struct rig *r, int fd, const struct sockaddr_in *to, const char *sess,
		      uint64_t seq, uint64_t index, enum tape_day_kind kind, uint32_t day)
{
	struct sockaddr_in group = { .sin_family = AF_INET };
	uint8_t ev[128], pkt[256], body[4] = { 0x08, (uint8_t)kind, 0x10, (uint8_t)day };
	uint64_t ts = 1700000000ull * 1000000000ull + index;
	struct mold_session ms;
	struct mold_builder mb;
	size_t n, len;

	if (kind == TAPE_DAY_NONE)
		n = tape_event_encode(ev, sizeof(ev), 1, index, ts, "OTHER", index, index,
				      (const uint8_t *)"", 0);
	else
		n = tape_event_encode_body(ev, sizeof(ev), 1, index, ts, NULL, 0, index,
					   TAPE_BODY_DAY, body, sizeof(body));
	ck_assert_uint_gt(n, 0);
	mold_session_set(&ms, sess);
	mold_build_begin(&mb, pkt, sizeof(pkt), &ms, seq);
	ck_assert_int_eq(mold_build_add(&mb, ev, (uint16_t)n), 0);
	len = mold_build_end(&mb);
	if (!to) {
		inet_pton(AF_INET, "239.255.9.1", &group.sin_addr);
		group.sin_port = htons((uint16_t)r->tape_port);
		to = &group;
	}
	ck_assert_int_eq(sendto(fd, pkt, len, 0, (const struct sockaddr *)to, sizeof(*to)),
			 (ssize_t)len);
}

/* A tape heartbeat of session sess saying seq is next. */
static void tape_heartbeat(struct rig *r, int mc, const char *sess, uint64_t seq)
{
	struct sockaddr_in group = { .sin_family = AF_INET };
	struct mold_session ms;
	uint8_t hb[MOLD_HEADER_LEN];

	inet_pton(AF_INET, "239.255.9.1", &group.sin_addr);
	group.sin_port = htons((uint16_t)r->tape_port);
	mold_session_set(&ms, sess);
	mold_build_heartbeat(hb, &ms, seq);
	ck_assert_int_eq(sendto(mc, hb, sizeof(hb), 0, (struct sockaddr *)&group, sizeof(group)),
			 (ssize_t)sizeof(hb));
}

/* The next client message is a System Event with code `code`. */
static void ck_system_event(struct rig *r, int fd, char code)
{
	uint8_t b[256];

	ck_assert_int_eq(client_msg(r, fd, b, sizeof(b)), OUCH_SYSTEM_EVENT);
	ck_assert_int_eq(b[10], code);
}

static void ck_day(struct rig *r, uint32_t day, const char *market)
{
	Lockstep__ControlReply rep = LOCKSTEP__CONTROL_REPLY__INIT;

	gw_daemon.status(r->gw, &rep);
	ck_assert_uint_eq(rep.day, day);
	ck_assert_str_eq(rep.market, market);
}

static void rig_day_open(struct rig *r)
{
	char extra[1][160];

	snprintf(extra[0], 160, "gateway.idle_timeout=10s");
	rig_open_ex(r, extra, 1);
}

/* A DayEvent on the tape: every login's stream gets the System Event
 * (also a login not logged in, which replays it later); the same event
 * again (another index, a retransmission, a restart with or without the
 * progress file) journals nothing; START_OF_DAY of day 2 comes in day 2's
 * session. STATUS follows the day and the market. */
START_TEST(day_system_events)
{
	struct rig r;
	int mc = mc_open(), fd;

	rig_day_open(&r);
	ck_day(&r, 1, "open");
	fd = client_as(&r, "TRADR1", "pw1", 0);
	tape_send(&r, mc, NULL, "TAPE", 1, 1, TAPE_DAY_NONE, 0);
	tape_send(&r, mc, NULL, "TAPE", 2, 2, TAPE_DAY_END, 1);
	ck_system_event(&r, fd, OUCH_EVENT_END_OF_DAY);
	ck_day(&r, 1, "closed");
	tape_send(&r, mc, NULL, "TAPE", 2, 2, TAPE_DAY_END, 1); /* a copy */
	tape_send(&r, mc, NULL, "TAPE", 3, 3, TAPE_DAY_END, 1); /* the same event again */
	client_quiet(&r, fd, 150);
	ck_assert_uint_eq(r.gw->st.day_events, 3); /* TRADR1, TRADR2 and TRADR3 */

	/* a restart that lost its progress file finds it in the journals */
	close(fd);
	rig_reopen(&r, rig_day_open, 1);
	ck_day(&r, 1, "open"); /* nothing said yet; the journals hold E */
	fd = client_as(&r, "TRADR1", "pw1", 0);
	tape_send(&r, mc, NULL, "TAPE", 2, 2, TAPE_DAY_END, 1);
	client_quiet(&r, fd, 150);
	ck_assert_uint_eq(r.gw->st.day_events, 0);

	/* day 2 opens in its own session, at index 4 */
	tape_send(&r, mc, NULL, "TAPE000002", 1, 4, TAPE_DAY_START, 2);
	ck_system_event(&r, fd, OUCH_EVENT_START_OF_DAY);
	ck_day(&r, 2, "open");
	close(fd);

	/* a restart with it: the state and what was journalled stay */
	rig_reopen(&r, rig_day_open, 0);
	ck_day(&r, 2, "open");
	fd = client_as(&r, "TRADR1", "pw1", 0);
	tape_send(&r, mc, NULL, "TAPE000002", 1, 4, TAPE_DAY_START, 2);
	client_quiet(&r, fd, 150);
	ck_assert_uint_eq(r.gw->st.day_events, 0);
	close(fd);

	/* TRADR2 was never logged in: its stream holds both */
	fd = client_as(&r, "TRADR2", "pw2", 1);
	ck_system_event(&r, fd, OUCH_EVENT_END_OF_DAY);
	ck_system_event(&r, fd, OUCH_EVENT_START_OF_DAY);
	client_quiet(&r, fd, 100);
	close(fd);
	close(mc);
	rig_close(&r);
}
END_TEST

/* A tape request from server fd: its session and seq, count; the asker's
 * address in from. */
static void tape_request_of(int fd, struct sockaddr_in *from, const char *sess, uint64_t seq,
			    uint16_t count)
{
	struct mold_session ts;
	struct mold_request q;
	socklen_t fl = sizeof(*from);
	uint8_t buf[64];
	ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)from, &fl);

	mold_session_set(&ts, sess);
	ck_assert_int_eq(mold_parse_request(buf, (size_t)n, &ts, &q), 0);
	ck_assert_uint_eq(q.seq, seq);
	ck_assert_uint_eq(q.count, count);
}

/* Requests across days: a heartbeat of day 2 whose base is unknown makes
 * the gateway ask for the index after what it has (in day 1's session);
 * the answer, in day 2's session, teaches day 2's base, and a later gap is
 * asked for in day 2's session and numbers. Without a command of ours
 * unacknowledged the tape skips a gap, but not a day's START_OF_DAY. */
START_TEST(day_tape_requests)
{
	struct rig r;
	char extra[4][160];
	uint8_t b[2048];
	struct sockaddr_in from;
	int t, pt, rd[1] = { 0 }, fd, cfd, mc = mc_open();

	t = udp_bound(&pt);
	snprintf(extra[0], 160, "gateway.tape_retrans=127.0.0.1:%d", pt);
	snprintf(extra[1], 160, "gateway.request_delay=0ms");
	snprintf(extra[2], 160, "gateway.retrans_timeout=50ms");
	snprintf(extra[3], 160, "gateway.idle_timeout=10s");
	rig_open_ex(&r, extra, 4);
	cfd = client_enter(&r);
	seq_read_kind(&r, r.seq_fd, MOLD_DATA, b, sizeof(b)); /* command 1, unacknowledged */

	tape_send(&r, mc, NULL, "TAPE", 1, 1, TAPE_DAY_NONE, 0);
	tape_send(&r, mc, NULL, "TAPE", 2, 2, TAPE_DAY_END, 1);
	ck_system_event(&r, cfd, OUCH_EVENT_END_OF_DAY);
	/* day 2 began (its base unknown): index 3 exists, in day 1's numbers */
	tape_heartbeat(&r, mc, "TAPE000002", 3);
	ck_assert_int_eq(pump_any(&r, &t, 1, 2000, rd), 0);
	tape_request_of(t, &from, "TAPE", 3, 1);
	/* the answer comes in day 2's session: START_OF_DAY at index 3 */
	tape_send(&r, t, &from, "TAPE000002", 1, 3, TAPE_DAY_START, 2);
	ck_system_event(&r, cfd, OUCH_EVENT_START_OF_DAY);
	ck_day(&r, 2, "open");
	/* day 2's seq 2..4 (indices 4..6) lost: asked for in day 2's numbers */
	tape_heartbeat(&r, mc, "TAPE000002", 5);
	ck_assert_int_eq(pump_any(&r, &t, 1, 2000, rd), 0);
	tape_request_of(t, &from, "TAPE000002", 2, 3);
	close(cfd);
	close(t);
	rig_close(&r);

	/* nothing of ours unacknowledged: day 3's first packet seen is its
	 * third; indices up to its START are skipped, its START is asked for */
	t = udp_bound(&pt);
	snprintf(extra[0], 160, "gateway.tape_retrans=127.0.0.1:%d", pt);
	rig_open_ex(&r, extra, 4);
	fd = client_as(&r, "TRADR1", "pw1", 0);
	tape_send(&r, mc, NULL, "TAPE", 1, 1, TAPE_DAY_NONE, 0);
	tape_send(&r, mc, NULL, "TAPE000003", 3, 12, TAPE_DAY_NONE, 0);
	ck_assert_int_eq(pump_any(&r, &t, 1, 2000, rd), 0);
	tape_request_of(t, &from, "TAPE000003", 1, 2);
	tape_send(&r, t, &from, "TAPE000003", 1, 10, TAPE_DAY_START, 3);
	ck_system_event(&r, fd, OUCH_EVENT_END_OF_DAY); /* day 2's, not seen */
	ck_system_event(&r, fd, OUCH_EVENT_START_OF_DAY);
	ck_assert_uint_eq(r.gw->st.day_implied, 1);
	ck_day(&r, 3, "open");
	close(fd);
	close(t);
	close(mc);
	rig_close(&r);
}
END_TEST

static Suite *gateway_suite(void)
{
	Suite *s = suite_create("gateway");
	TCase *tc = tcase_create("credentials");
	TCase *tl = tcase_create("loopback");

	tcase_add_test(tc, cred_valid);
	tcase_add_test(tc, cred_password_check);
	tcase_add_loop_test(tc, cred_invalid, 0, (int)(sizeof(bad_creds) / sizeof(bad_creds[0])));
	tcase_add_test(tc, creds_file);
	tcase_add_test(tc, password_normalise);
	tcase_add_test(tc, cred_hash);
	tcase_add_test(tc, creds_plaintext_named);
	tcase_add_test(tc, lockout_pair);
	tcase_add_test(tc, lockout_address);
	tcase_add_test(tc, lockout_window_and_success);
	tcase_add_test(tc, lockout_eviction);
	tcase_add_test(tc, default_session);
	tcase_add_test(tc, wal_record);
	tcase_add_test(tc, addr_list_good);
	tcase_add_test(tc, addr_list_near);
	tcase_add_loop_test(tc, addr_list_bad, 0, (int)(sizeof(bad_lists) / sizeof(bad_lists[0])));
	tcase_add_test(tc, routes_listed);
	tcase_add_test(tc, routes_hash);
	tcase_add_loop_test(tc, routes_bad, 0, (int)(sizeof(bad_routes) / sizeof(bad_routes[0])));
	tcase_add_test(tc, routes_tokens);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tl, 20);
	tcase_add_test(tl, login_rejects);
	tcase_add_test(tl, login_hashed_and_locked);
	tcase_add_test(tl, order_to_command);
	tcase_add_test(tl, heartbeat_and_idle);
	tcase_add_test(tl, two_sequencers);
	tcase_add_test(tl, refused_sequencer);
	tcase_add_test(tl, tape_too_old_by_source);
	tcase_add_test(tl, partition_routing);
	tcase_add_test(tl, partition_exec);
	tcase_add_test(tl, listed_unknown_symbol_to_partition_0);
	tcase_add_test(tl, day_system_events);
	tcase_add_test(tl, day_tape_requests);
	suite_add_tcase(s, tl);
	return s;
}

int main(void)
{
	return testutil_run(gateway_suite(), 0);
}
