/* The sequencer end to end on loopback: the real libsequencer runs its own
 * event loop in a thread with a private state directory, ports chosen by the
 * kernel and a random 239.255.x.y tape group joined on 127.0.0.1; the test
 * plays the gateways (MoldUDP64 streams of packed lockstep.Command), a tape
 * receiver and a retransmission client. Every wait is bounded. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "daemon.h"
#include "iopath.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "moldudp64.h"
#include "net.h"
#include "raft.h"
#include "sequencer.h"
#include "tape.h"
#include "tapeday.h"
#include "testutil.h"

#define WAIT_MS 2000 /* for anything that must arrive */
#define QUIET_MS 250 /* for making sure nothing arrives */
#define MAX_SEQ 8192

/* ---- the sequencer in a thread ------------------------------------------ */

struct harness {
	char dir[128];
	struct seq_config cfg;
	struct daemon_node *node; /* the sequencer and its control socket */
	struct sequencer *s;
	struct ev_loop *loop;
	ev_async stop;
	pthread_t thread;
	int running;
	struct sockaddr_in listen, retrans, group;
	int gw_fd; /* the fake gateways' socket */
	int tape_fd; /* tape receiver */
	/* the tape as received: raw blocks by sequence number */
	uint8_t *block[MAX_SEQ];
	uint16_t block_len[MAX_SEQ];
	uint8_t pkt[65536];
	struct mold_packet mp;
	struct mold_iter it;
	int have_pkt;
	int heartbeats, eos;
	uint64_t hb_next;
	/* the tape's days as a receiver learns them (common/tapeday.h), and
	 * the session and MoldUDP64 sequence number of the last packet */
	struct tapeday days;
	char session[MOLD_SESSION_LEN + 1];
	uint64_t wire_seq;
};

static struct harness H;

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	(void)loop;
	daemon_node_stop(H.node);
}

static void *run_loop(void *arg)
{
	(void)arg;
	ev_run(H.loop, 0);
	return NULL;
}

static void seq_start(void)
{
	int r;

	H.loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(H.loop);
	r = daemon_node_open(&H.node, &seq_daemon, H.loop, &H.cfg);
	ck_assert_int_eq(r, 0);
	H.s = daemon_node_self(H.node);
	ev_async_init(&H.stop, on_stop);
	ev_async_start(H.loop, &H.stop);
	H.listen.sin_family = AF_INET;
	H.listen.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	H.listen.sin_port = htons((uint16_t)seq_listen_port(H.s));
	H.retrans = H.listen;
	H.retrans.sin_port = htons((uint16_t)seq_retrans_port(H.s));
	ck_assert_int_eq(pthread_create(&H.thread, NULL, run_loop, NULL), 0);
	H.running = 1;
}

/* Stops the sequencer cleanly (as SIGTERM does) and returns its counters. */
static void harness_stop(struct seq_stats *st)
{
	if (!H.running)
		return;
	ev_async_send(H.loop, &H.stop);
	pthread_join(H.thread, NULL);
	H.running = 0;
	if (st)
		seq_get_stats(H.s, st);
	daemon_node_close(H.node);
	ev_loop_destroy(H.loop);
	H.s = NULL;
	H.node = NULL;
}

static void fill_config(struct seq_config *c, const char *dir, const char *group)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->node.name, sizeof(c->node.name), "seq1");
	snprintf(c->node.state_dir, sizeof(c->node.state_dir), "%s", dir);
	snprintf(c->node.control, sizeof(c->node.control), "%.90s/seq1.ctl", dir);
	snprintf(c->listen, sizeof(c->listen), "127.0.0.1:0");
	snprintf(c->retrans, sizeof(c->retrans), "127.0.0.1:0");
	snprintf(c->tape_group, sizeof(c->tape_group), "%s", group);
	snprintf(c->tape_iface, sizeof(c->tape_iface), "127.0.0.1");
	snprintf(c->tape_session, sizeof(c->tape_session), "TAPE");
	c->tape_ttl = 1;
	c->heartbeat_ns = 50000000u;
	c->fsync = 0; /* disk */
	c->fsync_interval_ns = 100000000u;
	c->segment_size = 65536;
	c->rcvbuf = 4u << 20;
	c->sndbuf = 4u << 20;
	c->max_datagram = 1472;
	c->batch = 64;
	c->drain = 16;
	c->request_interval_ns = 20000000u;
	c->retrans_packets = 64;
}

static void setup(void)
{
	struct net_udp_options o = { .rcvbuf = 8 << 20, .reuseaddr = 1, .nonblock = 1 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	char group[64];
	unsigned rnd;

	memset(&H, 0, sizeof(H));
	log_init("test_sequencer", LOG_LVL_WARNING);
	ck_assert_int_eq(testutil_mkdtemp(H.dir, sizeof(H.dir), "/tmp", "test_sequencer"), 0);
	/* A random group and a port below the ephemeral range (32768 up),
	 * where other processes' sockets are not; another try if it is taken. */
	for (int attempt = 0; attempt < 20; attempt++) {
		rnd = (unsigned)(getpid() ^ (unsigned)mono_ns()) * 2654435761u;
		snprintf(group, sizeof(group), "239.255.%u.%u:%u", (rnd >> 8) & 0xff,
			 1 + rnd % 250, 20000 + (rnd >> 16) % 12000);
		ck_assert_int_eq(net_parse_addr(group, &H.group), 0);
		H.tape_fd = net_mcast_recv_open(&H.group, "127.0.0.1", &o, NULL);
		if (H.tape_fd != -EADDRINUSE)
			break;
	}
	ck_assert_int_ge(H.tape_fd, 0);
	fill_config(&H.cfg, H.dir, group);
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	H.gw_fd = net_udp_open(&any, &o, NULL, NULL);
	ck_assert_int_ge(H.gw_fd, 0);
	seq_start();
}

static void teardown(void)
{
	harness_stop(NULL);
	close(H.gw_fd);
	close(H.tape_fd);
	for (unsigned i = 0; i < MAX_SEQ; i++)
		free(H.block[i]);
	if (testutil_rm_rf(H.dir) != 0)
		fprintf(stderr, "could not remove %s\n", H.dir);
}

/* ---- helpers -------------------------------------------------------------- */

/* A packed Command: a new order whose token names the gateway and its seq. */
static size_t make_command(uint8_t *out, size_t cap, const char *gw, uint64_t n)
{
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__NewOrder o = LOCKSTEP__NEW_ORDER__INIT;
	char token[32];
	size_t len;

	snprintf(token, sizeof(token), "%s-%llu", gw, (unsigned long long)n);
	o.token = token;
	o.side = 'B';
	o.shares = 100 + (uint32_t)n;
	o.symbol = (char *)"AAPL";
	o.price = 1500000;
	c.user = (char *)"U1";
	c.firm = (char *)"FIRM";
	c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
	c.new_order = &o;
	len = lockstep__command__get_packed_size(&c);
	ck_assert_uint_le(len, cap);
	lockstep__command__pack(&c, out);
	return len;
}

/* Sends commands [first, first + n) of gateway `gw` in one datagram to `to`. */
static void send_cmds_to(const char *gw, uint64_t first, unsigned n, const struct sockaddr_in *to)
{
	struct mold_session sess;
	struct mold_builder b;
	uint8_t pkt[1472], cmd[256];
	size_t len;

	ck_assert_int_eq(mold_session_set(&sess, gw), 0);
	ck_assert_int_eq(mold_build_begin(&b, pkt, sizeof(pkt), &sess, first), 0);
	for (unsigned i = 0; i < n; i++) {
		len = make_command(cmd, sizeof(cmd), gw, first + i);
		ck_assert_int_eq(mold_build_add(&b, cmd, (uint16_t)len), 0);
	}
	len = mold_build_end(&b);
	ck_assert_int_eq(sendto(H.gw_fd, pkt, len, 0, (const struct sockaddr *)to, sizeof(*to)),
			 (ssize_t)len);
}

/* ... to the sequencer's command listener. */
static void send_cmds(const char *gw, uint64_t first, unsigned n)
{
	send_cmds_to(gw, first, n, &H.listen);
}

static void send_raw(const void *buf, size_t len, const struct sockaddr_in *to)
{
	ck_assert_int_eq(sendto(H.gw_fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to)),
			 (ssize_t)len);
}

/* The next tape block within ms: 1 (and its seq/bytes), 0 on timeout, 2 on
 * end of session. Heartbeats are counted. Blocks are kept in H.block. */
static int tape_next(uint64_t *seq, const uint8_t **data, uint16_t *len, int ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)ms * 1000000u;
	struct mold_packet raw;
	int rc;

	if (!H.days.n)
		ck_assert_int_eq(tapeday_init(&H.days, "TAPE"), 0);
	for (;;) {
		ssize_t n;
		uint64_t now;

		if (H.have_pkt && mold_iter_next(&H.it, seq, data, len)) {
			ck_assert_uint_lt(*seq, MAX_SEQ);
			free(H.block[*seq]);
			H.block[*seq] = malloc(*len);
			memcpy(H.block[*seq], *data, *len);
			H.block_len[*seq] = *len;
			return 1;
		}
		H.have_pkt = 0;
		now = mono_ns();
		if (now >= deadline || !testutil_wait_readable(H.tape_fd, (int)((deadline - now) / 1000000u) + 1))
			return 0;
		n = recv(H.tape_fd, H.pkt, sizeof(H.pkt), 0);
		if (n <= 0)
			continue;
		ck_assert_int_le(n, 1472);
		ck_assert_int_eq(mold_parse(H.pkt, (size_t)n, NULL, 0, &raw), 0);
		rc = tapeday_parse(&H.days, H.pkt, (size_t)n, 0, &H.mp);
		if (rc == TAPEDAY_LATER)
			continue; /* a heartbeat of a day whose data comes next */
		ck_assert_int_eq(rc, 0);
		mold_session_str(&raw.session, H.session);
		H.wire_seq = raw.seq;
		if (H.mp.kind == MOLD_HEARTBEAT) {
			H.heartbeats++;
			H.hb_next = H.mp.seq;
			continue;
		}
		if (H.mp.kind == MOLD_END_OF_SESSION) {
			H.eos = 1;
			H.hb_next = H.mp.seq;
			return 2;
		}
		mold_iter_init(&H.it, &H.mp);
		H.have_pkt = 1;
	}
}

/* Takes the next event off the tape (which must come) and unpacks it. */
static Lockstep__Event *next_event(uint64_t *seq)
{
	const uint8_t *data;
	uint16_t len;
	Lockstep__Event *ev;

	int r;

	/* an end of session of a previous run may still be queued */
	while ((r = tape_next(seq, &data, &len, WAIT_MS)) == 2)
		;
	ck_assert_msg(r == 1, "no event (eos %d, next %llu)", H.eos,
		      (unsigned long long)H.hb_next);
	ev = lockstep__event__unpack(NULL, len, data);
	ck_assert_ptr_nonnull(ev);
	ck_assert_uint_eq(ev->seq, *seq);
	return ev;
}

/* Expects a command event of gateway gw, number n, with the exact bytes sent. */
static uint64_t expect_command(uint64_t term, const char *gw, uint64_t n)
{
	uint8_t want[256], got[256];
	size_t wlen = make_command(want, sizeof(want), gw, n), glen;
	uint64_t seq;
	Lockstep__Event *ev = next_event(&seq);

	ck_assert_uint_eq(ev->term, term);
	ck_assert_int_eq(ev->body_case, LOCKSTEP__EVENT__BODY_COMMAND);
	ck_assert_str_eq(ev->origin, gw);
	ck_assert_uint_eq(ev->origin_seq, n);
	ck_assert_uint_eq(ev->commit, seq);
	ck_assert_uint_gt(ev->timestamp, 1600000000ull * 1000000000ull);
	glen = lockstep__command__get_packed_size(ev->command);
	ck_assert_uint_eq(glen, wlen);
	lockstep__command__pack(ev->command, got);
	ck_assert_mem_eq(got, want, wlen);
	lockstep__event__free_unpacked(ev, NULL);
	return seq;
}

static uint64_t expect_term_start(uint64_t term)
{
	uint64_t seq;
	Lockstep__Event *ev = next_event(&seq);

	ck_assert_int_eq(ev->body_case, LOCKSTEP__EVENT__BODY_TERM_START);
	ck_assert_uint_eq(ev->term, term);
	ck_assert_str_eq(ev->term_start->node, "seq1");
	ck_assert_uint_eq(ev->commit, seq);
	lockstep__event__free_unpacked(ev, NULL);
	return seq;
}

static void expect_quiet(void)
{
	uint64_t seq;
	const uint8_t *data;
	uint16_t len;

	ck_assert_int_eq(tape_next(&seq, &data, &len, QUIET_MS), 0);
}

/* Reads the gateway socket for a request packet for gw; 0 on timeout. */
static int gw_request(const char *gw, struct mold_request *req, int ms)
{
	struct mold_session sess;
	uint8_t buf[1500];
	ssize_t n;

	mold_session_set(&sess, gw);
	if (!testutil_wait_readable(H.gw_fd, ms))
		return 0;
	n = recv(H.gw_fd, buf, sizeof(buf), 0);
	ck_assert_int_eq(mold_parse_request(buf, (size_t)n, &sess, req), 0);
	return 1;
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(term_start_then_commands_in_order)
{
	uint64_t seq;
	struct seq_stats st;

	ck_assert_uint_eq(expect_term_start(1), 1);
	send_cmds("gw1", 1, 10);
	send_cmds("gw2", 1, 5);
	send_cmds("gw1", 11, 3);
	for (uint64_t n = 1; n <= 10; n++)
		ck_assert_uint_eq(expect_command(1, "gw1", n), 1 + n);
	for (uint64_t n = 1; n <= 5; n++)
		ck_assert_uint_eq(expect_command(1, "gw2", n), 11 + n);
	for (uint64_t n = 11; n <= 13; n++)
		seq = expect_command(1, "gw1", n);
	ck_assert_uint_eq(seq, 19);
	expect_quiet();
	harness_stop(&st);
	ck_assert_uint_eq(st.commands_sequenced, 18);
	ck_assert_uint_eq(st.commands_received, 18);
	ck_assert_uint_eq(st.gateways, 2);
	ck_assert_uint_eq(st.duplicates, 0);
	ck_assert_uint_gt(st.journal_bytes, 0);
	ck_assert_int_eq(tape_next(&seq, &(const uint8_t *){ NULL }, &(uint16_t){ 0 }, WAIT_MS), 2);
	ck_assert_uint_eq(H.hb_next, 20);
}
END_TEST

START_TEST(duplicates_are_dropped)
{
	struct seq_stats st;

	expect_term_start(1);
	send_cmds("gw1", 1, 5);
	send_cmds("gw1", 1, 5); /* the whole datagram again */
	send_cmds("gw1", 4, 4); /* 4, 5 again, then 6, 7 */
	for (uint64_t n = 1; n <= 7; n++)
		ck_assert_uint_eq(expect_command(1, "gw1", n), 1 + n);
	expect_quiet();
	harness_stop(&st);
	ck_assert_uint_eq(st.duplicates, 7);
	ck_assert_uint_eq(st.commands_sequenced, 7);
}
END_TEST

START_TEST(gap_is_requested_and_filled)
{
	struct mold_request req;
	struct seq_stats st;

	expect_term_start(1);
	send_cmds("gw1", 1, 3);
	for (uint64_t n = 1; n <= 3; n++)
		expect_command(1, "gw1", n);
	send_cmds("gw1", 6, 3); /* 4 and 5 lost */
	ck_assert_int_eq(gw_request("gw1", &req, WAIT_MS), 1);
	ck_assert_uint_eq(req.seq, 4);
	ck_assert_uint_eq(req.count, 2);
	expect_quiet(); /* 6..8 are held until 4 and 5 come */
	send_cmds("gw1", 4, 5); /* the gateway answers from 4 */
	for (uint64_t n = 4; n <= 8; n++)
		ck_assert_uint_eq(expect_command(1, "gw1", n), 1 + n);
	harness_stop(&st);
	ck_assert_uint_eq(st.gaps, 1);
	/* asked again, with back-off, while the gateway did not answer */
	ck_assert_uint_ge(st.gap_requests_sent, 1);
	ck_assert_uint_eq(st.commands_sequenced, 8);
}
END_TEST

/* Several gaps at once: each asked for at once, the commands after them held;
 * a gateway's too-old answer (a heartbeat to the request socket whose seq is
 * the oldest it holds) gives the rest up, loudly, and the stream goes on. */
START_TEST(gaps_held_and_too_old_answer)
{
	struct mold_session sess;
	struct mold_request req[2];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	uint8_t buf[64], hb[MOLD_HEADER_LEN];
	struct seq_stats st;
	ssize_t n;

	expect_term_start(1);
	mold_session_set(&sess, "gw1");
	send_cmds("gw1", 1, 2);
	send_cmds("gw1", 5, 2); /* 3, 4 lost */
	send_cmds("gw1", 9, 2); /* 7, 8 lost */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(testutil_wait_readable(H.gw_fd, WAIT_MS), 1);
		n = recvfrom(H.gw_fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		ck_assert_int_eq(mold_parse_request(buf, (size_t)n, &sess, &req[i]), 0);
	}
	ck_assert_uint_eq(req[0].seq, 3);
	ck_assert_uint_eq(req[0].count, 2);
	ck_assert_uint_eq(req[1].seq, 7);
	ck_assert_uint_eq(req[1].count, 2);
	ck_assert_uint_ne(ntohs(from.sin_port), ntohs(H.listen.sin_port));
	expect_command(1, "gw1", 1);
	expect_command(1, "gw1", 2);
	/* 7 and 8 come (to the request socket), 3 and 4 no longer exist */
	send_cmds_to("gw1", 7, 2, &from);
	send_raw(hb, mold_build_heartbeat(hb, &sess, 5), &from);
	for (uint64_t c = 5; c <= 10; c++)
		expect_command(1, "gw1", c);
	expect_quiet();
	harness_stop(&st);
	ck_assert_uint_eq(st.gaps, 2);
	ck_assert_uint_eq(st.gateway_too_old, 1);
	ck_assert_uint_eq(st.commands_lost, 2);
	ck_assert_uint_eq(st.commands_sequenced, 8);
	ck_assert_uint_eq(st.commands_held, 6); /* 5, 6, 9, 10, then 7, 8 */
}
END_TEST

START_TEST(heartbeat_reveals_lost_tail)
{
	struct mold_session sess;
	struct mold_request req;
	uint8_t hb[MOLD_HEADER_LEN];

	expect_term_start(1);
	send_cmds("gw1", 1, 2);
	expect_command(1, "gw1", 1);
	expect_command(1, "gw1", 2);
	mold_session_set(&sess, "gw1");
	send_raw(hb, mold_build_heartbeat(hb, &sess, 5), &H.listen); /* 3, 4 lost */
	ck_assert_int_eq(gw_request("gw1", &req, WAIT_MS), 1);
	ck_assert_uint_eq(req.seq, 3);
	ck_assert_uint_eq(req.count, 2);
	/* Rate limit: a second heartbeat at once asks nothing more. */
	send_raw(hb, mold_build_heartbeat(hb, &sess, 5), &H.listen);
	ck_assert_int_eq(gw_request("gw1", &req, 10), 0);
	/* After the interval it asks again. */
	usleep(30000);
	send_raw(hb, mold_build_heartbeat(hb, &sess, 5), &H.listen);
	ck_assert_int_eq(gw_request("gw1", &req, WAIT_MS), 1);
	ck_assert_uint_eq(req.seq, 3);
	send_cmds("gw1", 3, 2);
	expect_command(1, "gw1", 3);
	expect_command(1, "gw1", 4);
}
END_TEST

START_TEST(tape_heartbeats_when_idle)
{
	uint64_t seq;
	const uint8_t *data;
	uint16_t len;

	expect_term_start(1);
	ck_assert_int_eq(tape_next(&seq, &data, &len, 300), 0);
	ck_assert_int_ge(H.heartbeats, 2);
	ck_assert_uint_eq(H.hb_next, 2);
}
END_TEST

/* Reads a retransmission answer: every block into blocks[], returns how many. */
static unsigned retrans_collect(int fd, uint64_t first, uint64_t count)
{
	struct mold_session sess;
	struct mold_packet mp;
	struct mold_iter it;
	uint8_t buf[2048];
	unsigned got = 0;
	uint64_t want = first;

	(void)sess;
	if (!H.days.n)
		ck_assert_int_eq(tapeday_init(&H.days, "TAPE"), 0);
	while (got < count && testutil_wait_readable(fd, WAIT_MS)) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		uint64_t seq;
		const uint8_t *data;
		uint16_t len;

		ck_assert_int_gt(n, 0);
		ck_assert_int_le(n, 1472);
		ck_assert_int_eq(tapeday_parse(&H.days, buf, (size_t)n, 0, &mp), 0);
		ck_assert_int_eq(mp.kind, MOLD_DATA);
		mold_session_str((const struct mold_session *)buf, H.session);
		mold_iter_init(&it, &mp);
		while (mold_iter_next(&it, &seq, &data, &len)) {
			ck_assert_uint_eq(seq, want);
			ck_assert_ptr_nonnull(H.block[seq]);
			ck_assert_uint_eq(len, H.block_len[seq]);
			ck_assert_mem_eq(data, H.block[seq], len);
			want++;
			got++;
		}
	}
	return got;
}

static void send_request(int fd, const char *session, uint64_t seq, uint16_t count)
{
	struct mold_request r = { .seq = seq, .count = count };
	uint8_t buf[MOLD_REQUEST_LEN];

	mold_session_set(&r.session, session);
	mold_build_request(buf, &r);
	ck_assert_int_eq(sendto(fd, buf, sizeof(buf), 0, (struct sockaddr *)&H.retrans,
				sizeof(H.retrans)), (ssize_t)sizeof(buf));
}

START_TEST(retransmission_is_byte_identical)
{
	struct net_udp_options o = { .rcvbuf = 4 << 20 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct seq_stats st;
	int fd;

	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = net_udp_open(&any, &o, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	expect_term_start(1);
	for (uint64_t n = 1; n <= 300; n += 10)
		send_cmds("gw1", n, 10);
	for (uint64_t n = 1; n <= 300; n++)
		expect_command(1, "gw1", n);
	/* Everything from 1 (the TermStart too): several datagrams. */
	send_request(fd, "TAPE", 1, 301);
	ck_assert_uint_eq(retrans_collect(fd, 1, 301), 301);
	/* A middle range. */
	send_request(fd, "TAPE", 150, 20);
	ck_assert_uint_eq(retrans_collect(fd, 150, 20), 20);
	/* Past the end: only what exists. */
	send_request(fd, "TAPE", 295, 100);
	ck_assert_uint_eq(retrans_collect(fd, 295, 100), 7);
	/* Beyond the end, or of another session: nothing. */
	send_request(fd, "TAPE", 1000, 5);
	send_request(fd, "OTHER", 1, 5);
	ck_assert_int_eq(testutil_wait_readable(fd, QUIET_MS), 0);
	harness_stop(&st);
	ck_assert_uint_eq(st.retrans_requests, 4);
	ck_assert_uint_eq(st.retrans_bad_requests, 1);
	ck_assert_uint_eq(st.retrans_blocks_sent, 301 + 20 + 7);
	ck_assert_uint_ge(st.retrans_packets_sent, 4);
	close(fd);
}
END_TEST

START_TEST(restart_keeps_numbers_and_dedup)
{
	struct seq_stats st;

	expect_term_start(1);
	send_cmds("gw1", 1, 5);
	send_cmds("gw2", 1, 2);
	for (uint64_t n = 1; n <= 5; n++)
		expect_command(1, "gw1", n);
	expect_command(1, "gw2", 1);
	ck_assert_uint_eq(expect_command(1, "gw2", 2), 8);
	harness_stop(&st);
	ck_assert_int_eq(tape_next(&(uint64_t){ 0 }, &(const uint8_t *){ NULL },
				   &(uint16_t){ 0 }, WAIT_MS), 2);
	ck_assert_uint_eq(H.hb_next, 9);

	seq_start();
	ck_assert_uint_eq(expect_term_start(2), 9);
	send_cmds("gw1", 3, 3); /* old commands, resent */
	send_cmds("gw2", 2, 1);
	expect_quiet();
	send_cmds("gw1", 5, 2); /* 5 is old, 6 new */
	ck_assert_uint_eq(expect_command(2, "gw1", 6), 10);
	send_cmds("gw2", 3, 1);
	ck_assert_uint_eq(expect_command(2, "gw2", 3), 11);
	harness_stop(&st);
	ck_assert_uint_eq(st.duplicates, 5);
	ck_assert_uint_eq(st.commands_sequenced, 2);

	/* A third start, after the journal holds two terms. */
	seq_start();
	ck_assert_uint_eq(expect_term_start(3), 12);
	send_cmds("gw1", 6, 2);
	ck_assert_uint_eq(expect_command(3, "gw1", 7), 13);
}
END_TEST

START_TEST(torn_journal_tail_is_cut)
{
	char path[300];
	struct seq_stats st;
	FILE *f;

	expect_term_start(1);
	send_cmds("gw1", 1, 4);
	for (uint64_t n = 1; n <= 4; n++)
		expect_command(1, "gw1", n);
	harness_stop(&st);
	/* A torn record at the end of the (only) segment. */
	snprintf(path, sizeof(path), "%s/journal/%020llu.seg", H.dir, 1ull);
	f = fopen(path, "ab");
	ck_assert_ptr_nonnull(f);
	fwrite("\x40\x00\x00\x00\x06\x00", 1, 6, f);
	fclose(f);
	seq_start();
	ck_assert_uint_eq(expect_term_start(2), 6);
	send_cmds("gw1", 4, 2);
	ck_assert_uint_eq(expect_command(2, "gw1", 5), 7);
}
END_TEST

START_TEST(malformed_and_oversize_are_counted)
{
	static const uint8_t junk[][24] = {
		{ 1, 2, 3 },
		{ 'g', 'w', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 0, 0, 0, 0, 0, 0, 0, 1, 0, 2 },
		{ 'g', 'w', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 9 },
		/* well formed, but a session name no origin can carry */
		{ 'g', 0, '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 },
		{ ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 },
	};
	static const size_t junk_len[] = { 3, 20, 22, 20, 20 };
	struct mold_session sess;
	struct mold_builder b;
	uint8_t pkt[1472], big[1430];
	struct seq_stats st;

	expect_term_start(1);
	for (size_t i = 0; i < sizeof(junk_len) / sizeof(junk_len[0]); i++)
		send_raw(junk[i], junk_len[i], &H.listen);
	/* An empty command, then one that cannot fit a tape datagram. */
	memset(big, 'x', sizeof(big));
	mold_session_set(&sess, "gw1");
	mold_build_begin(&b, pkt, sizeof(pkt), &sess, 1);
	mold_build_add(&b, big, 0);
	send_raw(pkt, mold_build_end(&b), &H.listen);
	mold_build_begin(&b, pkt, sizeof(pkt), &sess, 1);
	ck_assert_int_eq(mold_build_add(&b, big, sizeof(big)), 0);
	send_raw(pkt, mold_build_end(&b), &H.listen);
	expect_quiet();
	send_cmds("gw1", 1, 2);
	expect_command(1, "gw1", 1);
	expect_command(1, "gw1", 2);
	harness_stop(&st);
	ck_assert_uint_eq(st.malformed_packets, 5);
	ck_assert_uint_eq(st.gateways, 1);
	ck_assert_uint_eq(st.oversize_commands, 2);
	ck_assert_uint_eq(st.commands_sequenced, 2);
}
END_TEST

START_TEST(many_commands_fill_datagrams)
{
	enum { N = 4000, PER = 16 };
	struct seq_stats st;
	uint64_t n = 1, m = 1;

	expect_term_start(1);
	while (n <= N) {
		/* a window of 20 datagrams so that no socket buffer overflows */
		for (int k = 0; k < 20 && n <= N; k++, n += PER)
			send_cmds("gw1", n, PER);
		for (; m < n && m <= N; m++)
			expect_command(1, "gw1", m);
	}
	harness_stop(&st);
	ck_assert_uint_eq(st.commands_sequenced, N);
	/* more than one event per tape datagram */
	ck_assert_uint_lt(st.tape_packets_sent, N / 4);
}
END_TEST

/* ctl_op OP: the sequencer's answer to a control request (freed by the
 * caller). */
static Lockstep__ControlReply *ctl_op(Lockstep__ControlRequest__Op op)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *rep = NULL;

	req.op = op;
	ck_assert_int_eq(ctl_call(H.cfg.node.control, &req, &rep, WAIT_MS), 0);
	return rep;
}

/* The next event must be a DayEvent of kind `kind` for day `day`. */
static uint64_t expect_day(int kind, uint32_t day)
{
	uint64_t seq;
	Lockstep__Event *ev = next_event(&seq);

	ck_assert_int_eq(ev->body_case, LOCKSTEP__EVENT__BODY_DAY);
	ck_assert_int_eq(ev->day->kind, kind);
	ck_assert_uint_eq(ev->day->day, day);
	ck_assert_str_eq(ev->origin, "");
	lockstep__event__free_unpacked(ev, NULL);
	return seq;
}

/* The trading day on the wire: end-of-day and start-of-day from the
 * control socket; from the START_OF_DAY on, the tape (live, heartbeats,
 * retransmissions) is in day 2's session from sequence number 1, while the
 * events' seq count on; a day starts a journal segment; a restart keeps
 * the day and the gateways' numbers. */
START_TEST(trading_day_on_the_wire)
{
	struct net_udp_options o = { .rcvbuf = 4 << 20 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	Lockstep__ControlReply *rep;
	struct seq_stats st;
	char path[300];
	int fd;

	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = net_udp_open(&any, &o, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	expect_term_start(1);
	send_cmds("gw1", 1, 3);
	for (uint64_t n = 1; n <= 3; n++)
		expect_command(1, "gw1", n);
	rep = ctl_op(LOCKSTEP__CONTROL_REQUEST__OP__END_OF_DAY);
	ck_assert_int_eq(rep->error, 0);
	ck_assert_str_eq(rep->message, "day 1 closed at seq 5");
	lockstep__control_reply__free_unpacked(rep, NULL);
	ck_assert_uint_eq(expect_day(LOCKSTEP__DAY_EVENT__KIND__END_OF_DAY, 1), 5);
	ck_assert_str_eq(H.session, "TAPE");
	rep = ctl_op(LOCKSTEP__CONTROL_REQUEST__OP__END_OF_DAY);
	ck_assert_int_eq(rep->error, -EALREADY);
	lockstep__control_reply__free_unpacked(rep, NULL);
	rep = ctl_op(LOCKSTEP__CONTROL_REQUEST__OP__STATUS);
	ck_assert_uint_eq(rep->day, 1);
	ck_assert_str_eq(rep->market, "closed");
	lockstep__control_reply__free_unpacked(rep, NULL);
	/* a command while closed is still day 1's */
	send_cmds("gw1", 4, 1);
	ck_assert_uint_eq(expect_command(1, "gw1", 4), 6);
	ck_assert_str_eq(H.session, "TAPE");
	rep = ctl_op(LOCKSTEP__CONTROL_REQUEST__OP__START_OF_DAY);
	ck_assert_int_eq(rep->error, 0);
	ck_assert_str_eq(rep->message, "day 2 opened at seq 7: tape session TAPE000002");
	lockstep__control_reply__free_unpacked(rep, NULL);
	ck_assert_uint_eq(expect_day(LOCKSTEP__DAY_EVENT__KIND__START_OF_DAY, 2), 7);
	ck_assert_str_eq(H.session, "TAPE000002");
	ck_assert_uint_eq(H.wire_seq, 1);
	send_cmds("gw1", 5, 2);
	ck_assert_uint_eq(expect_command(1, "gw1", 5), 8);
	ck_assert_uint_eq(expect_command(1, "gw1", 6), 9);
	ck_assert_str_eq(H.session, "TAPE000002");
	rep = ctl_op(LOCKSTEP__CONTROL_REQUEST__OP__STATUS);
	ck_assert_uint_eq(rep->day, 2);
	ck_assert_str_eq(rep->market, "open");
	lockstep__control_reply__free_unpacked(rep, NULL);
	/* retransmissions: day 2 from its own 1; day 1's session past its end
	 * names day 2's events, which come in day 2's session */
	send_request(fd, "TAPE000002", 1, 3);
	ck_assert_uint_eq(retrans_collect(fd, 7, 3), 3);
	ck_assert_str_eq(H.session, "TAPE000002");
	send_request(fd, "TAPE", 5, 2);
	ck_assert_uint_eq(retrans_collect(fd, 5, 2), 2);
	ck_assert_str_eq(H.session, "TAPE");
	send_request(fd, "TAPE", 6, 3);
	ck_assert_uint_eq(retrans_collect(fd, 6, 3), 3);
	ck_assert_str_eq(H.session, "TAPE000002");
	send_request(fd, "TAPE000003", 1, 3); /* a day not begun: nothing */
	ck_assert_int_eq(testutil_wait_readable(fd, QUIET_MS), 0);
	harness_stop(&st);
	ck_assert_uint_eq(st.day_events, 2);
	ck_assert_uint_eq(st.retrans_bad_requests, 1);
	/* the day's first event began a segment */
	snprintf(path, sizeof(path), "%s/journal/%020llu.seg", H.dir, 7ull);
	ck_assert_int_eq(access(path, F_OK), 0);

	/* restarted: still day 2, the gateways' numbers kept */
	seq_start();
	ck_assert_uint_eq(expect_term_start(2), 10);
	ck_assert_str_eq(H.session, "TAPE000002");
	ck_assert_uint_eq(H.wire_seq, 4);
	send_cmds("gw1", 6, 2); /* 6 is old, 7 new */
	ck_assert_uint_eq(expect_command(2, "gw1", 7), 11);
	rep = ctl_op(LOCKSTEP__CONTROL_REQUEST__OP__START_OF_DAY);
	ck_assert_int_eq(rep->error, -EALREADY);
	lockstep__control_reply__free_unpacked(rep, NULL);
	close(fd);
}
END_TEST

START_TEST(control_status_and_stats)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *rep = NULL;
	int found = 0;

	expect_term_start(1);
	send_cmds("gw1", 1, 3);
	for (uint64_t n = 1; n <= 3; n++)
		expect_command(1, "gw1", n);
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STATUS;
	ck_assert_int_eq(ctl_call(H.cfg.node.control, &req, &rep, WAIT_MS), 0);
	ck_assert_int_eq(rep->error, 0);
	ck_assert_str_eq(rep->role, "sequencer");
	ck_assert_str_eq(rep->state, "primary");
	ck_assert_str_eq(rep->name, "seq1");
	ck_assert_ptr_nonnull(strstr(rep->auth, "OFF"));
	ck_assert_uint_eq(rep->term, 1);
	ck_assert_uint_eq(rep->seq, 4);
	ck_assert_uint_eq(rep->commit, 4);
	lockstep__control_reply__free_unpacked(rep, NULL);
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STATS;
	ck_assert_int_eq(ctl_call(H.cfg.node.control, &req, &rep, WAIT_MS), 0);
	/* the auth_* counters of the skeleton: one a surface and auth_on (off here) */
	ck_assert_uint_eq(rep->n_counters, SEQ_N_COUNTERS + IOPATH_N_COUNTERS + AUTH_N_SURFACES + 1);
	for (size_t i = 0; i < rep->n_counters; i++) {
		if (strcmp(rep->counters[i]->name, "commands_sequenced") == 0) {
			ck_assert_uint_eq(rep->counters[i]->value, 3);
			ck_assert_int_eq(rep->counters[i]->gauge, 0);
			found++;
		}
		if (strcmp(rep->counters[i]->name, "io_uring") == 0) {
			ck_assert_uint_eq(rep->counters[i]->value, 0); /* io = mmsg */
			ck_assert_int_eq(rep->counters[i]->gauge, 1);
			found++;
		}
		if (strcmp(rep->counters[i]->name, "journal_bytes") == 0) {
			ck_assert_uint_gt(rep->counters[i]->value, 0);
			ck_assert_int_eq(rep->counters[i]->gauge, 1); /* a level, not a count */
			found++;
		}
	}
	ck_assert_int_eq(found, 3);
	lockstep__control_reply__free_unpacked(rep, NULL);
	/* a sequencer without a group has nobody to hand over to */
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STEP_DOWN;
	ck_assert_int_eq(ctl_call(H.cfg.node.control, &req, &rep, WAIT_MS), 0);
	ck_assert_int_eq(rep->error, -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(rep->message, "not in a group"));
	ck_assert_str_eq(rep->state, "primary");
	lockstep__control_reply__free_unpacked(rep, NULL);
}
END_TEST

/* A control socket path longer than a Unix socket address holds (a
 * checkout deep in a file system) is bound and reached through its
 * directory; a file name that cannot fit is refused with ENAMETOOLONG. */
START_TEST(control_socket_long_path)
{
	Lockstep__ControlRequest req = LOCKSTEP__CONTROL_REQUEST__INIT;
	Lockstep__ControlReply *rep = NULL;
	struct daemon_node *node = NULL;
	char deep[PATH_MAX];
	struct stat sb;
	size_t len;

	harness_stop(NULL);
	len = (size_t)snprintf(deep, sizeof(deep), "%s", H.dir);
	while (len < 150) {
		len += (size_t)snprintf(deep + len, sizeof(deep) - len, "/a-rather-long-folder");
		ck_assert_int_eq(mkdir(deep, 0755), 0);
	}
	ck_assert_uint_lt(len + 10, sizeof(H.cfg.node.control));
	memcpy(H.cfg.node.control, deep, len);
	memcpy(H.cfg.node.control + len, "/seq1.ctl", 10);
	ck_assert_uint_gt(strlen(H.cfg.node.control), 108);
	seq_start();
	req.op = LOCKSTEP__CONTROL_REQUEST__OP__STATUS;
	ck_assert_int_eq(ctl_call(H.cfg.node.control, &req, &rep, WAIT_MS), 0);
	ck_assert_str_eq(rep->role, "sequencer");
	ck_assert_str_eq(rep->name, "seq1");
	lockstep__control_reply__free_unpacked(rep, NULL);
	ck_assert_int_eq(stat(H.cfg.node.control, &sb), 0);
	ck_assert(S_ISSOCK(sb.st_mode));
	harness_stop(NULL);
	ck_assert_int_eq(stat(H.cfg.node.control, &sb), -1); /* removed at stop */
	/* a file name of 100 characters does not fit any address */
	snprintf(H.cfg.node.control, sizeof(H.cfg.node.control), "%s/%0100d", H.dir, 7);
	H.loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_int_eq(daemon_node_open(&node, &seq_daemon, H.loop, &H.cfg), -ENAMETOOLONG);
	ev_loop_destroy(H.loop);
}
END_TEST

START_TEST(group_peers_parse)
{
	struct sockaddr_in a[SEQ_MAX_PEERS];

	ck_assert_int_eq(seq_parse_peers("", a, SEQ_MAX_PEERS), 0);
	ck_assert_int_eq(seq_parse_peers("  ", a, SEQ_MAX_PEERS), 0);
	ck_assert_int_eq(seq_parse_peers("127.0.0.1:9300", a, SEQ_MAX_PEERS), 1);
	ck_assert_int_eq(ntohs(a[0].sin_port), 9300);
	ck_assert_int_eq(seq_parse_peers("127.0.0.1:1, 127.0.0.2:2 ,127.0.0.3:3", a, SEQ_MAX_PEERS),
			 3);
	ck_assert_uint_eq(ntohl(a[1].sin_addr.s_addr), 0x7f000002u);
	ck_assert_int_eq(ntohs(a[2].sin_port), 3);
	ck_assert_int_eq(seq_parse_peers("127.0.0.1:1,,127.0.0.1:2", a, SEQ_MAX_PEERS), -EINVAL);
	ck_assert_int_eq(seq_parse_peers("127.0.0.1:1,", a, SEQ_MAX_PEERS), -EINVAL);
	ck_assert_int_eq(seq_parse_peers("127.0.0.1:0", a, SEQ_MAX_PEERS), -EINVAL);
	ck_assert_int_eq(seq_parse_peers("nohost", a, SEQ_MAX_PEERS), -EINVAL);
	ck_assert_int_eq(seq_parse_peers("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", a, 2), -E2BIG);
}
END_TEST

START_TEST(group_wire_round_trip_and_refusals)
{
	struct mold_session tape, other;
	struct raft_msg m = { .type = RAFT_MSG_VOTE_REPLY, .from = 2, .to = 1, .term = 7,
			      .seq = 1ull << 40, .seq_term = 6, .commit = 99,
			      .flags = RAFT_F_PRE | RAFT_F_GRANTED };
	struct raft_msg back;
	uint8_t buf[SEQ_RAFT_WIRE_LEN + 1];

	ck_assert_int_eq(mold_session_set(&tape, "TAPE"), 0);
	ck_assert_int_eq(mold_session_set(&other, "TAPE2"), 0);
	ck_assert_uint_eq(seq_raft_encode(buf, &m, &tape), SEQ_RAFT_WIRE_LEN);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &tape, 3, &back), 0);
	ck_assert_int_eq(back.type, m.type);
	ck_assert_int_eq(back.from, 2);
	ck_assert_int_eq(back.to, 1);
	ck_assert_uint_eq(back.term, 7);
	ck_assert_uint_eq(back.seq, 1ull << 40);
	ck_assert_uint_eq(back.seq_term, 6);
	ck_assert_uint_eq(back.commit, 99);
	ck_assert_uint_eq(back.flags, RAFT_F_PRE | RAFT_F_GRANTED);
	ck_assert_ptr_null(back.entries);
	/* to every member */
	m.type = RAFT_MSG_HEARTBEAT;
	m.to = RAFT_ALL;
	m.flags = 0;
	seq_raft_encode(buf, &m, &tape);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &tape, 3, &back), 0);
	ck_assert_int_eq(back.to, RAFT_ALL);
	/* refusals: length, session, node ids, type, magic */
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN - 1, &tape, 3, &back), -EBADMSG);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN + 1, &tape, 3, &back), -EBADMSG);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &other, 3, &back), -EBADMSG);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &tape, 2, &back), -EBADMSG);
	m.type = RAFT_MSG_APPEND; /* with no entries: the header alone */
	seq_raft_encode(buf, &m, &tape);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &tape, 3, &back), 0);
	ck_assert_int_eq(back.type, RAFT_MSG_APPEND);
	m.type = RAFT_MSG_MAX;
	seq_raft_encode(buf, &m, &tape);
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &tape, 3, &back), -EBADMSG);
	m.type = RAFT_MSG_ACK;
	seq_raft_encode(buf, &m, &tape);
	buf[0] = 'X';
	ck_assert_int_eq(seq_raft_decode(buf, SEQ_RAFT_WIRE_LEN, &tape, 3, &back), -EBADMSG);
}
END_TEST

/* An APPEND: the header, then a tape datagram whose events are the entries
 * prev + 1 onwards, each with its own term. */
START_TEST(group_append_entries)
{
	struct mold_session tape, other;
	struct raft_msg m = { .type = RAFT_MSG_APPEND, .from = 0, .to = RAFT_ALL, .term = 5,
			      .seq = 41, .seq_term = 4, .commit = 40 };
	struct raft_msg back;
	struct raft_entry en[8];
	struct mold_builder b;
	uint8_t buf[1500], ev[128];
	size_t n, len;

	ck_assert_int_eq(mold_session_set(&tape, "TAPE"), 0);
	ck_assert_int_eq(mold_session_set(&other, "OTHER"), 0);
	seq_raft_encode(buf, &m, &tape);
	mold_build_begin(&b, buf + SEQ_RAFT_WIRE_LEN, sizeof(buf) - SEQ_RAFT_WIRE_LEN, &tape, 42);
	for (uint64_t seq = 42; seq <= 44; seq++) {
		n = tape_event_encode(ev, sizeof(ev), seq == 42 ? 4 : 5, seq, 1, "GW1", seq, seq,
				      (const uint8_t *)"xyz", 3);
		ck_assert_uint_gt(n, 0);
		ck_assert_int_eq(mold_build_add(&b, ev, (uint16_t)n), MOLD_OK);
	}
	len = SEQ_RAFT_WIRE_LEN + mold_build_end(&b);
	ck_assert_int_eq(seq_raft_decode(buf, len, &tape, 3, &back), 0);
	ck_assert_int_eq(seq_raft_decode_entries(buf, len, &tape, &back, en, 8), 0);
	ck_assert_uint_eq(back.n_entries, 3);
	ck_assert_ptr_eq(back.entries, en);
	ck_assert_uint_eq(en[0].term, 4);
	ck_assert_uint_eq(en[2].term, 5);
	ck_assert_uint_eq(back.seq, 41);
	ck_assert_uint_eq(back.seq_term, 4);
	/* too many for the caller's array; another session; not after prev */
	ck_assert_int_eq(seq_raft_decode_entries(buf, len, &tape, &back, en, 2), -EBADMSG);
	ck_assert_int_eq(seq_raft_decode_entries(buf, len, &other, &back, en, 8), -EBADMSG);
	back.seq = 40;
	ck_assert_int_eq(seq_raft_decode_entries(buf, len, &tape, &back, en, 8), -EBADMSG);
	/* a truncated tape datagram */
	ck_assert_int_eq(seq_raft_decode(buf, len - 1, &tape, 3, &back), 0);
	ck_assert_int_eq(seq_raft_decode_entries(buf, len - 1, &tape, &back, en, 8), -EBADMSG);
}
END_TEST

/* A group needs a journal that syncs; a node_id outside peers and a bad
 * peers list are refused; a group of one is the single node. */
START_TEST(group_config_checked)
{
	struct seq_stats st;
	struct sequencer *s = NULL;
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct seq_config c = H.cfg;

	harness_stop(NULL); /* the fixture's, started before this test's config */
	snprintf(c.peers, sizeof(c.peers), "127.0.0.1:9301,127.0.0.1:9302,127.0.0.1:9303");
	c.fsync = 2; /* none: a crash of a majority would lose acknowledged events */
	ck_assert_int_eq(seq_open(&s, loop, &c), -EINVAL);
	c.fsync = 0;
	snprintf(c.peers, sizeof(c.peers), "127.0.0.1:9301,bad");
	ck_assert_int_eq(seq_open(&s, loop, &c), -EINVAL);
	snprintf(c.peers, sizeof(c.peers), "127.0.0.1:9301");
	c.node_id = 1;
	ck_assert_int_eq(seq_open(&s, loop, &c), -EINVAL);
	c.node_id = 0;
	c.fsync = 1; /* majority-memory, where the majority is one machine's memory */
	ck_assert_int_eq(seq_open(&s, loop, &c), -EINVAL);
	c.fsync = 0;
	ev_loop_destroy(loop);
	H.cfg.node_id = 0;
	snprintf(H.cfg.peers, sizeof(H.cfg.peers), "127.0.0.1:9301");
	seq_start();
	ck_assert_uint_eq(seq_term(H.s), 2); /* a group of one: as before, a new term */
	ck_assert_uint_eq(seq_last_seq(H.s), 2); /* the two term starts */
	harness_stop(&st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sequencer");
	TCase *tc = tcase_create("loopback");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, term_start_then_commands_in_order);
	tcase_add_test(tc, duplicates_are_dropped);
	tcase_add_test(tc, gap_is_requested_and_filled);
	tcase_add_test(tc, gaps_held_and_too_old_answer);
	tcase_add_test(tc, heartbeat_reveals_lost_tail);
	tcase_add_test(tc, tape_heartbeats_when_idle);
	tcase_add_test(tc, retransmission_is_byte_identical);
	tcase_add_test(tc, restart_keeps_numbers_and_dedup);
	tcase_add_test(tc, torn_journal_tail_is_cut);
	tcase_add_test(tc, malformed_and_oversize_are_counted);
	tcase_add_test(tc, many_commands_fill_datagrams);
	tcase_add_test(tc, control_status_and_stats);
	tcase_add_test(tc, control_socket_long_path);
	tcase_add_test(tc, trading_day_on_the_wire);
	tcase_add_test(tc, group_peers_parse);
	tcase_add_test(tc, group_wire_round_trip_and_refusals);
	tcase_add_test(tc, group_append_entries);
	tcase_add_test(tc, group_config_checked);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
