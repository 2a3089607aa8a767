/* The gateway alone: credentials parsing, address lists, and a whole
 * gateway on loopback driven by a fake client, fake sequencers and fake
 * tape/exec senders. */
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
#include "lockstep.pb-c.h"
#include "moldudp64.h"
#include "net.h"
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

	ck_assert_int_eq(net_parse_addr_list("127.0.0.1:16000", a, GW_MAX_SEQUENCERS), 1);
	ck_addr(&a[0], "127.0.0.1", 16000);
	ck_assert_int_eq(net_parse_addr_list("10.0.0.1:1,10.0.0.2:2", a, 2), 2);
	ck_addr(&a[0], "10.0.0.1", 1);
	ck_addr(&a[1], "10.0.0.2", 2);
	/* blanks (spaces, tabs) around the items */
	ck_assert_int_eq(net_parse_addr_list(" 10.0.0.1:1 ,10.0.0.2:2,\t10.0.0.3:3 \t", a, 3), 3);
	ck_addr(&a[0], "10.0.0.1", 1);
	ck_addr(&a[1], "10.0.0.2", 2);
	ck_addr(&a[2], "10.0.0.3", 3);
	/* a bare port is net_parse_addr's 0.0.0.0:port */
	ck_assert_int_eq(net_parse_addr_list("7 , 8", a, 2), 2);
	ck_addr(&a[1], "0.0.0.0", 8);
	ck_assert_int_eq(net_parse_addr_list("1.1.1.1:1,2.2.2.2:2,3.3.3.3:3,4.4.4.4:4,5.5.5.5:5,"
					     "6.6.6.6:6,7.7.7.7:7,8.8.8.8:8,9.9.9.9:9",
					     a, GW_MAX_SEQUENCERS),
			 9);
	ck_addr(&a[8], "9.9.9.9", 9);
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
	{ "127.0.0.1:1", NET_ADDR_LIST_MAX + 1, -EINVAL },
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
	ck_assert_msg(net_parse_addr_list(bad_lists[_i].list, a, bad_lists[_i].max) ==
			      bad_lists[_i].rc,
		      "\"%s\" (max %d): want %d", bad_lists[_i].list, bad_lists[_i].max,
		      bad_lists[_i].rc);
	ck_assert_msg(memcmp(a, keep, sizeof(a)) == 0, "\"%s\": output changed",
		      bad_lists[_i].list);
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
	char err[512], set[24][160], creds[128];
	const char *ov[24];
	int sp, n = 0, base = 30000 + (getpid() % 5000) * 4;
	FILE *f;

	snprintf(r->dir, sizeof(r->dir), "/tmp/test_gateway_%d", (int)getpid());
	snprintf(creds, sizeof(creds), "%s.creds", r->dir);
	f = fopen(creds, "w");
	fputs("[logins]\nTRADR1 = pw1 FRMA\nTRADR2 = pw2 FRMB cancel_on_disconnect\n", f);
	fclose(f);
	r->seq_fd = udp_bound(&sp);
	r->tape_port = base;
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
	ck_assert_int_le(n + n_extra, 24);
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

static Suite *gateway_suite(void)
{
	Suite *s = suite_create("gateway");
	TCase *tc = tcase_create("credentials");
	TCase *tl = tcase_create("loopback");

	tcase_add_test(tc, cred_valid);
	tcase_add_loop_test(tc, cred_invalid, 0, (int)(sizeof(bad_creds) / sizeof(bad_creds[0])));
	tcase_add_test(tc, creds_file);
	tcase_add_test(tc, default_session);
	tcase_add_test(tc, addr_list_good);
	tcase_add_loop_test(tc, addr_list_bad, 0, (int)(sizeof(bad_lists) / sizeof(bad_lists[0])));
	suite_add_tcase(s, tc);
	tcase_set_timeout(tl, 20);
	tcase_add_test(tl, login_rejects);
	tcase_add_test(tl, order_to_command);
	tcase_add_test(tl, heartbeat_and_idle);
	tcase_add_test(tl, two_sequencers);
	tcase_add_test(tl, refused_sequencer);
	tcase_add_test(tl, tape_too_old_by_source);
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
