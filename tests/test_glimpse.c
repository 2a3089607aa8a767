/* GLIMPSE (matcher/glimpse.h): the image's packets, an image of an
 * engine's book (feedgen_glimpse, as matcher/feed.c builds it, with the
 * build's time per resting order printed, not asserted), and the server
 * in this process: its thread, the hand-over with an owner loop run here,
 * logins, sharing one image, Login Rejected 'S', heartbeats, logout. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "feedgen.h"
#include "glimpse.h"
#include "itch.h"
#include "soupbin.h"
#include "testutil.h"

#define NS 1000000000ull
#define T0 (19724ull * 86400ull * NS + 14ull * 3600ull * NS) /* 14:00 UTC */

/* The packets of an image: their count, each checked for its framing; the
 * ITCH messages into msgs (up to cap), their lengths into lens. */
static size_t parse(const struct glimpse_image *img, const uint8_t **msgs, size_t *lens,
		    size_t cap)
{
	size_t off = 0, n = 0;

	while (off < img->len) {
		size_t len;

		ck_assert_uint_ge(img->len - off, 3);
		len = (size_t)img->buf[off] << 8 | img->buf[off + 1];
		ck_assert_uint_ge(len, 2);
		ck_assert_uint_le(off + 2 + len, img->len);
		ck_assert_int_eq(img->buf[off + 2], 'S');
		ck_assert_uint_eq(len - 1, itch_len((char)img->buf[off + 3]));
		if (n < cap) {
			msgs[n] = img->buf + off + 3;
			lens[n] = len - 1;
		}
		n++;
		off += 2 + len;
	}
	return n;
}

START_TEST(image_packets)
{
	struct glimpse_image img = { 0 };
	const uint8_t *m[4];
	size_t l[4];
	uint8_t d[ITCH_ORDER_DELETE_LEN] = { 'D' }, x[ITCH_ORDER_CANCEL_LEN] = { 'X' };
	size_t cap;

	ck_assert_int_eq(glimpse_image_add(&img, d, sizeof(d)), 0);
	ck_assert_int_eq(glimpse_image_add(&img, x, sizeof(x)), 0);
	ck_assert_int_eq(img.available, 0);
	ck_assert_int_eq(glimpse_image_end(&img, "ITCH", 1234567), 0);
	ck_assert_int_eq(img.available, 1);
	ck_assert_str_eq(img.session, "ITCH");
	ck_assert_uint_eq(img.next, 1234567);
	ck_assert_uint_eq(img.messages, 3);
	ck_assert_uint_eq(parse(&img, m, l, 4), 3);
	ck_assert_uint_eq(img.len, 3 * 3 + sizeof(d) + sizeof(x) + ITCH_END_OF_SNAPSHOT_LEN);
	ck_assert_mem_eq(m[0], d, sizeof(d));
	ck_assert_mem_eq(m[1], x, sizeof(x));
	ck_assert_mem_eq(m[2], "G1234567             ", ITCH_END_OF_SNAPSHOT_LEN);
	/* reused: emptied, never shrunk */
	cap = img.cap;
	glimpse_image_reset(&img);
	ck_assert_uint_eq(img.len, 0);
	ck_assert_int_eq(img.available, 0);
	ck_assert_uint_eq(img.cap, cap);
	ck_assert_int_eq(glimpse_image_reserve(&img, 3 * cap), 0);
	ck_assert_uint_ge(img.cap, 3 * cap);
	/* a message no ITCH type has, or a session no Login Accepted takes:
	 * the image is dropped */
	ck_assert_int_eq(glimpse_image_add(&img, d, 0), -EINVAL);
	ck_assert_int_eq(glimpse_image_end(&img, "ITCH", 1), -EINVAL);
	ck_assert_int_eq(img.available, 0);
	glimpse_image_reset(&img);
	ck_assert_int_eq(glimpse_image_end(&img, "NOT ALNUM!", 1), -EINVAL);
	ck_assert_int_eq(img.available, 0);
	glimpse_image_free(&img);
}
END_TEST

/* --- an engine's book ---------------------------------------------------- */

static const char *const syms[] = { "AAPL", "MSFT" };
static uint64_t seq;

static void no_emit(void *ctx, const char *user, const struct ouch_msg *m)
{
	(void)ctx;
	(void)user;
	(void)m;
}

static void enter(struct engine *e, const char *user, const char *firm, const char *token,
		  char side, uint32_t shares, const char *stock, uint32_t price, char display)
{
	struct engine_cmd c;

	testutil_enter(&c, user, firm, token, side, shares, stock, price, display);
	++seq;
	engine_apply(e, seq, T0 + seq, &c, no_emit, NULL);
}

/* feed.c's glimpse_out (no check here: Check's asserts cost a system
 * call each when forked, which the timing would measure; img.err tells) */
static void to_image(void *ctx, uint32_t day, uint64_t s, const uint8_t *msg, size_t len)
{
	(void)day;
	(void)s;
	(void)glimpse_image_add(ctx, msg, len);
}

static struct engine *book(uint32_t max_orders)
{
	struct engine_config cfg = {
		.symbols = syms, .n_symbols = 2, .max_shares = 1000000, .max_orders = max_orders,
		.max_tokens = 2 * max_orders, .max_levels = 4096,
	};
	struct engine *e;

	ck_assert_int_eq(engine_create(&e, &cfg), 0);
	seq = 0;
	return e;
}

START_TEST(image_of_a_book)
{
	struct feedgen_config fc = { .symbols = syms, .n_symbols = 2, .locate_base = 7, .tracking = 3 };
	struct glimpse_image img = { 0 };
	struct engine *e = book(64);
	struct feedgen g;
	const uint8_t *m[16];
	size_t l[16], n;
	struct itch_msg d;

	ck_assert_int_eq(feedgen_init(&g, &fc, NULL, NULL), 0);
	enter(e, "U1", "FRMA", "B1", 'B', 100, "AAPL", 100000, 'Y');
	enter(e, "U1", "FRMA", "B2", 'B', 200, "AAPL", 110000, 'A'); /* attributed: 'F' */
	enter(e, "U2", "FRMB", "S1", 'S', 300, "AAPL", 200000, 'Y');
	enter(e, "U2", "FRMB", "H1", 'S', 400, "AAPL", 200000, 'N'); /* not displayed */
	enter(e, "U2", "FRMB", "S2", 'S', 500, "MSFT", 300000, 'Y');
	feedgen_glimpse(&g, e, engine_time(e), to_image, &img);
	ck_assert_int_eq(glimpse_image_end(&img, "ITCH", 42), 0);
	n = parse(&img, m, l, 16);
	ck_assert_uint_eq(n, 2 * 2 + 4 + 1);
	/* R, H per symbol; AAPL's bids best first, its ask; MSFT's ask */
	const char want[] = "RHRHFAAAG";
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(m[i][0], want[i]);
		ck_assert_int_eq(itch_decode(m[i], l[i], &d), 0);
		if (want[i] == 'G')
			continue;
		ck_assert_uint_eq(d.tracking, 3);
		ck_assert_uint_eq(d.timestamp, (T0 + seq) % (86400ull * NS));
		ck_assert_uint_eq(d.locate, i < 4 ? 7 + i / 2 : i < 7 ? 7 : 8);
	}
	ck_assert_int_eq(itch_decode(m[4], l[4], &d), 0);
	ck_assert_uint_eq(d.u.add.shares, 200);
	ck_assert_str_eq(d.u.add.attribution, "FRMA");
	ck_assert_int_eq(itch_decode(m[5], l[5], &d), 0);
	ck_assert_uint_eq(d.u.add.shares, 100);
	ck_assert_int_eq(itch_decode(m[6], l[6], &d), 0);
	ck_assert_uint_eq(d.u.add.shares, 300); /* H1 (400) is not shown */
	ck_assert_int_eq(itch_decode(m[7], l[7], &d), 0);
	ck_assert_str_eq(d.u.add.stock, "MSFT");
	ck_assert_int_eq(itch_decode(m[8], l[8], &d), 0);
	ck_assert_uint_eq(d.u.end_of_snapshot.seq, 42);
	glimpse_image_free(&img);
	engine_destroy(e);
}
END_TEST

/* What the matcher's loop pauses for: a book of 200,000 resting orders
 * (printed: ns per order, the first build, which grows the buffer, and
 * the next, which reuses it). */
START_TEST(image_build_time)
{
	enum { N = 200000 };
	struct feedgen_config fc = { .symbols = syms, .n_symbols = 2, .locate_base = 1 };
	struct glimpse_image img = { 0 };
	struct engine *e = book(N + 16);
	struct feedgen g;
	char tok[16];

	ck_assert_int_eq(feedgen_init(&g, &fc, NULL, NULL), 0);
	for (uint32_t i = 0; i < N; i++) {
		snprintf(tok, sizeof(tok), "T%u", i);
		enter(e, i % 2 ? "U1" : "U2", "FRMA", tok, i % 2 ? 'B' : 'S', 100 + i % 7,
		      syms[i % 2], i % 2 ? 900000 - (i % 2000) * 100 : 1100000 + (i % 2000) * 100,
		      i % 3 ? 'Y' : 'A');
	}
	for (int round = 0; round < 2; round++) {
		uint64_t t0 = mono_ns(), ns;

		glimpse_image_reset(&img);
		feedgen_glimpse(&g, e, engine_time(e), to_image, &img);
		ck_assert_int_eq(glimpse_image_end(&img, "ITCH", 1), 0);
		ns = mono_ns() - t0;
		ck_assert_uint_eq(img.messages, 2 * 2 + N + 1);
		printf("GLIMPSE image of %d resting orders (%zu bytes): %.1f ms, %.0f ns an order (%s)\n",
		       N, img.len, ns / 1e6, (double)ns / N, round ? "buffer reused" : "buffer grown");
	}
	glimpse_image_free(&img);
	engine_destroy(e);
}
END_TEST

/* --- the server, in this process ----------------------------------------- */

struct srv {
	struct ev_loop *owner;
	struct glimpse *g;
	ev_async done;
	int port;
	int builds; /* the owner's */
	int unavailable; /* the next builds give no image */
	uint64_t build_sleep_ns;
	pthread_t client;
	int failed;
	char why[256];
};

static struct srv S;

/* On the owner's loop: the End of Snapshot's number is the build's. */
static void build(void *ctx, struct glimpse_image *img)
{
	struct srv *s = ctx;
	uint8_t d[ITCH_ORDER_DELETE_LEN] = { 'D' };
	struct timespec ts = { 0, (long)__atomic_load_n(&s->build_sleep_ns, __ATOMIC_SEQ_CST) };

	ck_assert_ptr_eq(ctx, &S);
	s->builds++;
	if (ts.tv_nsec)
		nanosleep(&ts, NULL);
	if (__atomic_load_n(&s->unavailable, __ATOMIC_SEQ_CST))
		return;
	glimpse_image_add(img, d, sizeof(d));
	glimpse_image_end(img, "ITCH", (uint64_t)s->builds);
}

static int cli_connect(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)S.port) };
	struct timeval tv = { 5, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int cli_login(int fd, const char *user, const char *pw)
{
	struct soup_login l = { 0 };
	uint8_t b[64];
	int n;

	snprintf(l.username, sizeof(l.username), "%s", user);
	snprintf(l.password, sizeof(l.password), "%s", pw);
	n = soup_build_login_request(b, sizeof(b), &l);
	return n > 0 && send(fd, b, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

static int read_all(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The next packet's type and payload (up to 64 bytes); -1 at EOF. */
static int cli_packet(int fd, uint8_t *payload, size_t *len)
{
	uint8_t h[3];
	size_t n;

	if (read_all(fd, h, 3) < 0)
		return -1;
	n = ((size_t)h[0] << 8 | h[1]) - 1;
	if (n > 64 || read_all(fd, payload, n) < 0)
		return -1;
	*len = n;
	return h[2];
}

#define CHECK(c) \
	do { \
		if (!(c)) { \
			snprintf(S.why, sizeof(S.why), "line %d: %s", __LINE__, #c); \
			S.failed = 1; \
			goto out; \
		} \
	} while (0)

/* Login Accepted, the image (a 'D', the End of Snapshot): its number. */
static long cli_snapshot(int fd)
{
	uint8_t p[64];
	size_t n;

	if (cli_packet(fd, p, &n) != 'A' || n != 30 || memcmp(p, "      ITCH", 10) != 0 ||
	    memcmp(p + 10, "                   1", 20) != 0)
		return -1;
	if (cli_packet(fd, p, &n) != 'S' || p[0] != 'D' || cli_packet(fd, p, &n) != 'S' ||
	    p[0] != 'G' || n != ITCH_END_OF_SNAPSHOT_LEN)
		return -1;
	return strtol((const char *)p + 1, NULL, 10);
}

static void *client_main(void *arg)
{
	uint8_t p[64];
	size_t n;
	int a = -1, b = -1, c = -1;

	(void)arg;
	/* a wrong password, an unknown name: 'A', closed */
	for (int i = 0; i < 2; i++) {
		CHECK((a = cli_connect()) >= 0);
		CHECK(cli_login(a, i ? "NOBODY" : "TRADR1", i ? "pw1" : "wrong") == 0);
		CHECK(cli_packet(a, p, &n) == 'J' && n == 1 && p[0] == 'A');
		CHECK(cli_packet(a, p, &n) == -1);
		close(a);
		a = -1;
	}
	/* a's login asks for image 1 (built slowly: 600 ms); b and c log in
	 * after it and share image 2 */
	__atomic_store_n(&S.build_sleep_ns, 600000000ull, __ATOMIC_SEQ_CST);
	CHECK((a = cli_connect()) >= 0 && (b = cli_connect()) >= 0 && (c = cli_connect()) >= 0);
	CHECK(cli_login(a, "TRADR1", "pw1") == 0);
	usleep(100000);
	CHECK(cli_login(b, "tradr1", "PW1") == 0); /* SoupBinTCP: any case */
	CHECK(cli_login(c, "TRADR1", "pw1") == 0);
	CHECK(cli_snapshot(a) == 1);
	CHECK(cli_snapshot(b) == 2);
	CHECK(cli_snapshot(c) == 2);
	/* then heartbeats; a Logout Request closes */
	CHECK(cli_packet(a, p, &n) == 'H' && n == 0);
	CHECK(send(a, "\0\1O", 3, MSG_NOSIGNAL) == 3);
	CHECK(cli_packet(a, p, &n) == -1);
	close(a);
	close(b);
	close(c);
	a = b = c = -1;
	/* no image: 'S', closed */
	__atomic_store_n(&S.build_sleep_ns, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&S.unavailable, 1, __ATOMIC_SEQ_CST);
	CHECK((a = cli_connect()) >= 0);
	CHECK(cli_login(a, "TRADR1", "pw1") == 0);
	CHECK(cli_packet(a, p, &n) == 'J' && n == 1 && p[0] == 'S');
	CHECK(cli_packet(a, p, &n) == -1);
out:
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	if (c >= 0)
		close(c);
	ev_async_send(S.owner, &S.done);
	return NULL;
}

static void on_done(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

START_TEST(server)
{
	char dir[1024], path[1100], err[600];
	struct glimpse_config gc = { .listen = "127.0.0.1:0", .logins = path, .max_sessions = 4 };
	struct glimpse_stats st;
	FILE *f;

	ck_assert_int_eq(testutil_mkdtemp(dir, sizeof(dir), testutil_tmp_parent(), "glimpse"), 0);
	snprintf(path, sizeof(path), "%s/logins.conf", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("[logins]\nTRADR1 = pw1 FRMA\n", f);
	fclose(f);
	memset(&S, 0, sizeof(S));
	ck_assert_ptr_nonnull(S.owner = ev_loop_new(EVFLAG_AUTO));
	ck_assert_msg(glimpse_open(&S.g, &gc, S.owner, build, &S, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(glimpse_start(S.g), 0);
	ck_assert_int_gt(S.port = glimpse_port(S.g), 0);
	ev_async_init(&S.done, on_done);
	ev_async_start(S.owner, &S.done);
	ck_assert_int_eq(pthread_create(&S.client, NULL, client_main, NULL), 0);
	ev_run(S.owner, 0);
	pthread_join(S.client, NULL);
	ck_assert_msg(!S.failed, "client: %s", S.why);
	ck_assert_int_eq(S.builds, 3);
	glimpse_get_stats(S.g, &st);
	ck_assert_uint_eq(st.logins_rejected, 2);
	ck_assert_uint_eq(st.logins, 4);
	ck_assert_uint_eq(st.logins_unavailable, 1);
	ck_assert_uint_eq(st.snapshots, 2);
	ck_assert_uint_eq(st.snapshots_sent, 3);
	ck_assert_uint_eq(st.logouts, 1);
	ck_assert_uint_ge(st.build_max_us, 600000);
	ev_async_stop(S.owner, &S.done);
	glimpse_close(S.g);
	ev_loop_destroy(S.owner);
	testutil_rm_rf(dir);
}
END_TEST

/* A logins file the server cannot read stops it at open. */
START_TEST(bad_logins)
{
	char err[600];
	struct glimpse_config gc = { .listen = "127.0.0.1:0", .logins = "/nonexistent/logins.conf",
				     .max_sessions = 1 };
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct glimpse *g = NULL;

	ck_assert_int_lt(glimpse_open(&g, &gc, loop, build, &S, err, sizeof(err)), 0);
	ck_assert_ptr_null(g);
	ck_assert_ptr_nonnull(strstr(err, "logins"));
	gc.logins = "";
	gc.listen = "nowhere";
	ck_assert_int_lt(glimpse_open(&g, &gc, loop, build, &S, err, sizeof(err)), 0);
	ev_loop_destroy(loop);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("glimpse");
	TCase *tc = tcase_create("image");

	tcase_add_test(tc, image_packets);
	tcase_add_test(tc, image_of_a_book);
	tcase_add_test(tc, image_build_time);
	suite_add_tcase(s, tc);
	tc = tcase_create("server");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, server);
	tcase_add_test(tc, bad_logins);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
