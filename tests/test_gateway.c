/* The gateway alone: credentials parsing, and a whole gateway on loopback
 * driven by a fake client, a fake sequencer and fake tape/exec senders. */
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

#include "gateway.h"
#include "lockstep.pb-c.h"
#include "moldudp64.h"
#include "soupbin.h"
#include "wire.h"

/* ---- credentials ---------------------------------------------------------- */

START_TEST(cred_valid)
{
	struct gw_cred c;
	char err[256];

	ck_assert_int_eq(gw_cred_parse("tradr1", "pw1 frma", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.login, "TRADR1");
	ck_assert_str_eq(c.password, "pw1");
	ck_assert_str_eq(c.firm, "FRMA");
	ck_assert_int_eq(c.cancel_on_disconnect, 0);
	ck_assert_int_eq(gw_cred_parse("A", "  p\tF   cancel_on_disconnect ", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(c.cancel_on_disconnect, 1);
	ck_assert_str_eq(c.firm, "F");
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
	struct gw_cred c = { .login = "KEEP" };
	char err[256] = "";

	ck_assert_int_eq(gw_cred_parse(bad_creds[_i].login, bad_creds[_i].value, &c, err,
				       sizeof(err)),
			 -EINVAL);
	ck_assert_msg(err[0] != '\0', "an error message for case %d", _i);
	ck_assert_str_eq(c.login, "KEEP");
}
END_TEST

START_TEST(creds_file)
{
	char path[] = "/tmp/test_gateway_credsXXXXXX", err[512];
	struct gw_creds c = { 0 };
	const struct gw_cred *f;
	int fd = mkstemp(path);
	FILE *fp = fdopen(fd, "w");

	fputs("; logins\n[logins]\nTRADR1 = pw1 FRMA\ntradr2 = pw2 FRMB cancel_on_disconnect\n", fp);
	fclose(fp);
	ck_assert_int_eq(gw_creds_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.n, 2);
	f = gw_creds_find(&c, "tradr2");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->cancel_on_disconnect, 1);
	ck_assert_ptr_nonnull(gw_creds_find(&c, "TRADR1"));
	ck_assert_ptr_nonnull(gw_creds_find(&c, "TRADR1 "));
	ck_assert_ptr_null(gw_creds_find(&c, "TRADR3"));
	ck_assert_ptr_null(gw_creds_find(&c, ""));
	gw_creds_fini(&c);

	fp = fopen(path, "w");
	fputs("[logins]\nTRADR1 = pw1 FRMA\ntradr1 = pw2 FRMB\n", fp);
	fclose(fp);
	ck_assert_int_lt(gw_creds_load(&c, path, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	gw_creds_fini(&c);

	fp = fopen(path, "w");
	fputs("[other]\nTRADR1 = pw1 FRMA\n", fp);
	fclose(fp);
	ck_assert_int_lt(gw_creds_load(&c, path, err, sizeof(err)), 0);
	gw_creds_fini(&c);
	unlink(path);
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

/* ---- a gateway on loopback ------------------------------------------------ */

struct rig {
	char dir[64];
	struct ev_loop *loop;
	struct gw *gw;
	int seq_fd; /* the fake sequencer */
	int port; /* OUCH */
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

static void rig_open(struct rig *r)
{
	static const struct config_key *keys = gw_config_keys;
	struct config_spec spec = { keys, NULL, NULL, NULL };
	struct gw_config cfg;
	char err[512], set[16][160], creds[128];
	const char *ov[16];
	int sp, n = 0, base = 30000 + (getpid() % 5000) * 4;
	FILE *f;

	snprintf(r->dir, sizeof(r->dir), "/tmp/test_gateway_%d", (int)getpid());
	snprintf(creds, sizeof(creds), "%s.creds", r->dir);
	f = fopen(creds, "w");
	fputs("[logins]\nTRADR1 = pw1 FRMA\nTRADR2 = pw2 FRMB cancel_on_disconnect\n", f);
	fclose(f);
	r->seq_fd = udp_bound(&sp);
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

static void rig_close(struct rig *r)
{
	char cmd[160];

	gw_stop(r->gw);
	gw_close(r->gw);
	ev_loop_destroy(r->loop);
	close(r->seq_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s.creds", r->dir, r->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs the loop until fd is readable (or ms pass); 1 when readable. */
static int pump_until(struct rig *r, int fd, int ms)
{
	for (int t = 0; t < ms; t += 5) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		ev_run(r->loop, EVRUN_NOWAIT);
		if (poll(&p, 1, 5) > 0)
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

static Suite *gateway_suite(void)
{
	Suite *s = suite_create("gateway");
	TCase *tc = tcase_create("credentials");
	TCase *tl = tcase_create("loopback");

	tcase_add_test(tc, cred_valid);
	tcase_add_loop_test(tc, cred_invalid, 0, (int)(sizeof(bad_creds) / sizeof(bad_creds[0])));
	tcase_add_test(tc, creds_file);
	tcase_add_test(tc, default_session);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tl, 20);
	tcase_add_test(tl, login_rejects);
	tcase_add_test(tl, order_to_command);
	tcase_add_test(tl, heartbeat_and_idle);
	suite_add_tcase(s, tl);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(gateway_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
