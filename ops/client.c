/* lockstep-client: a command-line OUCH 4.2 client over SoupBinTCP 4.0.
 *
 * Interactive (a line a command, replies printed as they come) or scripted
 * (--script FILE), with several named sessions in one script and `expect`
 * lines that make a script a test. See lockstep-client(1). */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "ouch.h"
#include "soupbin.h"

#define MAX_SESSIONS 16
#define QUEUE_LEN 4096 /* received messages not yet expected */
#define LINE_MAX_LEN 512

struct session {
	char name[16];
	char user[8];
	int fd;
	int logged_in;
	uint64_t next_seq; /* SoupBinTCP sequence number of the next sequenced message */
	char soup_session[SOUP_SESSION_LEN + 1];
	struct soup_parser parser;
	uint8_t rxbuf[2 * 65536];
	uint64_t last_tx; /* mono_ns of the last packet sent (heartbeats) */
	char *queue[QUEUE_LEN]; /* formatted messages awaiting `expect` */
	unsigned q_head, q_len;
	unsigned long token_counter;
};

static struct session sessions[MAX_SESSIONS];
static unsigned n_sessions;
static struct session *current;
static const char *default_addr = "127.0.0.1:15000";
static int opt_timeout_ms = 5000;
static int opt_quiet;
static int scripted;
static unsigned long failures;
static char token_prefix[8];

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static struct session *find_session(const char *name)
{
	for (unsigned i = 0; i < n_sessions; i++)
		if (strcmp(sessions[i].name, name) == 0)
			return &sessions[i];
	return NULL;
}

static int send_all(struct session *s, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(s->fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = s->fd, .events = POLLOUT };
			poll(&p, 1, 100);
			continue;
		}
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	s->last_tx = mono_ns();
	return 0;
}

static void session_close(struct session *s, const char *why)
{
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
		out("%s ! disconnected: %s\n", s->name, why);
	}
	s->logged_in = 0;
}

/* Formats an outbound message without its timestamp, so that scripts can
 * compare lines exactly; the time goes in front where wanted. */
static void queue_message(struct session *s, const uint8_t *data, size_t len)
{
	struct ouch_msg m;
	char line[LINE_MAX_LEN];
	int err = ouch_decode_outbound(data, len, &m);

	if (err < 0)
		snprintf(line, sizeof(line), "Undecodable %zu bytes type %c: %s", len,
			 len ? data[0] : '?', ouch_strerror(err));
	else
		ouch_format(&m, line, sizeof(line));
	if (!opt_quiet)
		out("%s < %s\n", s->name, line);
	/* expect compares what follows the timestamp ("HH:MM:SS.nnnnnnnnn "). */
	const char *body = line;
	if (strlen(line) > 19 && line[2] == ':' && line[18] == ' ')
		body = line + 19;
	if (s->q_len == QUEUE_LEN) { /* the oldest unexpected line goes */
		free(s->queue[s->q_head]);
		s->q_head = (s->q_head + 1) % QUEUE_LEN;
		s->q_len--;
	}
	s->queue[(s->q_head + s->q_len++) % QUEUE_LEN] = strdup(body);
}

static void handle_packet(struct session *s, const struct soup_packet *p)
{
	switch (p->type) {
	case SOUP_LOGIN_ACCEPTED: {
		char sess[SOUP_SESSION_LEN + 1];
		uint64_t seq;

		if (soup_decode_login_accepted(p, sess, &seq) == 0) {
			s->logged_in = 1;
			s->next_seq = seq;
			snprintf(s->soup_session, sizeof(s->soup_session), "%s", sess);
			out("%s ! login accepted: session %s, next sequence %llu\n", s->name, sess,
			    (unsigned long long)seq);
		}
		break;
	}
	case SOUP_LOGIN_REJECTED:
		out("%s ! login rejected: %c (%s)\n", s->name, p->len ? p->payload[0] : '?',
		    p->len && p->payload[0] == 'A' ? "not authorized" : "session not available");
		session_close(s, "login rejected");
		break;
	case SOUP_SEQUENCED_DATA:
		s->next_seq++;
		queue_message(s, p->payload, p->len);
		break;
	case SOUP_SERVER_HEARTBEAT:
		break;
	case SOUP_END_OF_SESSION:
		session_close(s, "end of session");
		break;
	case SOUP_DEBUG:
		out("%s ! debug: %.*s\n", s->name, (int)p->len, (const char *)p->payload);
		break;
	default:
		break;
	}
}

static void session_read(struct session *s)
{
	long n = soup_parser_recv(&s->parser, s->fd, NULL);
	struct soup_packet p;
	int err;

	if (n == 0)
		return;
	if (n < 0) {
		session_close(s, n == -ECONNRESET ? "closed by the gateway" : strerror((int)-n));
		return;
	}
	while ((err = soup_parser_next(&s->parser, &p)) == SOUP_OK)
		handle_packet(s, &p);
	if (err != SOUP_E_AGAIN)
		session_close(s, soup_strerror(err));
}

/* Waits up to ms for input on every session (and stdin when interactive);
 * keeps heartbeats going. Returns 1 when stdin is readable. */
static int pump(int ms, int want_stdin)
{
	struct pollfd pfd[MAX_SESSIONS + 1];
	unsigned n = 0, map[MAX_SESSIONS + 1];
	uint64_t now = mono_ns();
	uint8_t hb[8];
	int stdin_ready = 0;

	for (unsigned i = 0; i < n_sessions; i++) {
		struct session *s = &sessions[i];

		if (s->fd < 0)
			continue;
		if (s->logged_in && now - s->last_tx > 1000000000ull) {
			int len = soup_build_client_heartbeat(hb, sizeof(hb));
			send_all(s, hb, (size_t)len);
		}
		pfd[n].fd = s->fd;
		pfd[n].events = POLLIN;
		map[n++] = i;
	}
	if (want_stdin) {
		pfd[n].fd = STDIN_FILENO;
		pfd[n].events = POLLIN;
		map[n++] = MAX_SESSIONS;
	}
	if (poll(pfd, n, ms) <= 0)
		return 0;
	for (unsigned k = 0; k < n; k++) {
		if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (map[k] == MAX_SESSIONS)
			stdin_ready = 1;
		else
			session_read(&sessions[map[k]]);
	}
	return stdin_ready;
}

static int cmd_connect(char **av, int ac)
{
	/* connect NAME USER PASSWORD [HOST:PORT] [seq N] [session S] */
	struct sockaddr_in sa;
	struct soup_login login = { 0 };
	struct session *s;
	uint8_t pkt[64];
	const char *addr = default_addr;
	int len;

	if (ac < 4) {
		out("usage: connect NAME USER PASSWORD [HOST:PORT] [seq N] [session S]\n");
		return -1;
	}
	s = find_session(av[1]);
	if (!s) {
		if (n_sessions == MAX_SESSIONS) {
			out("too many sessions\n");
			return -1;
		}
		s = &sessions[n_sessions++];
		memset(s, 0, sizeof(*s));
		s->fd = -1;
		snprintf(s->name, sizeof(s->name), "%s", av[1]);
	}
	if (s->fd >= 0)
		session_close(s, "reconnecting");
	snprintf(s->user, sizeof(s->user), "%s", av[2]);
	snprintf(login.username, sizeof(login.username), "%s", av[2]);
	snprintf(login.password, sizeof(login.password), "%s", av[3]);
	login.seq = s->next_seq ? s->next_seq : 1;
	if (s->soup_session[0])
		snprintf(login.session, sizeof(login.session), "%s", s->soup_session);
	for (int i = 4; i < ac; i++) {
		if (strcmp(av[i], "seq") == 0 && i + 1 < ac)
			login.seq = strtoull(av[++i], NULL, 10);
		else if (strcmp(av[i], "session") == 0 && i + 1 < ac)
			snprintf(login.session, sizeof(login.session), "%s", av[++i]);
		else
			addr = av[i];
	}
	if (net_parse_addr(addr, &sa) < 0) {
		out("%s: bad address %s\n", s->name, addr);
		return -1;
	}
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		out("%s ! cannot connect to %s: %s\n", s->name, addr, strerror(errno));
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
		return -1;
	}
	net_tcp_tune(s->fd);
	soup_parser_init(&s->parser, s->rxbuf, sizeof(s->rxbuf), SOUP_MAX_PAYLOAD, SOUP_FROM_SERVER);
	len = soup_build_login_request(pkt, sizeof(pkt), &login);
	if (len < 0 || send_all(s, pkt, (size_t)len) < 0) {
		session_close(s, "login request failed");
		return -1;
	}
	current = s;
	/* Wait for the answer, so that a script's next line sees the session. */
	for (uint64_t end = mono_ns() + (uint64_t)opt_timeout_ms * 1000000ull;
	     s->fd >= 0 && !s->logged_in && mono_ns() < end;)
		pump(50, 0);
	return s->logged_in ? 0 : -1;
}

static int parse_price(const char *text, uint32_t *out_price)
{
	char *end;
	double v;

	if (strcmp(text, "market") == 0 || strcmp(text, "mkt") == 0) {
		*out_price = OUCH_PRICE_MARKET;
		return 0;
	}
	v = strtod(text, &end);
	if (*end || v < 0 || v > 214748.3647)
		return -1;
	*out_price = (uint32_t)(v * 10000.0 + 0.5);
	return 0;
}

static void next_token(struct session *s, char *tok)
{
	snprintf(tok, OUCH_TOKEN_LEN + 1, "%s%lu", token_prefix, ++s->token_counter);
}

static int send_ouch(struct session *s, const struct ouch_msg *m)
{
	uint8_t msg[OUCH_MAX_LEN], pkt[OUCH_MAX_LEN + 8];
	char line[LINE_MAX_LEN];
	int len = ouch_encode_inbound(m, msg, sizeof(msg));

	if (len < 0) {
		out("%s: cannot encode: %s\n", s->name, ouch_strerror(len));
		return -1;
	}
	len = soup_build_unsequenced(pkt, sizeof(pkt), msg, (uint16_t)len);
	if (len < 0 || send_all(s, pkt, (size_t)len) < 0) {
		session_close(s, "send failed");
		return -1;
	}
	if (!opt_quiet) {
		ouch_format(m, line, sizeof(line));
		out("%s > %s\n", s->name, line);
	}
	return 0;
}

/* buy|sell|short|exempt SHARES SYMBOL PRICE|market [ioc|day|tif N] [token T]
 * [display X] [minqty N] [firm F] [capacity C] */
static int cmd_order(struct session *s, char **av, int ac)
{
	struct ouch_msg m = { .type = OUCH_ENTER_ORDER, .inbound = 1 };
	struct ouch_enter_order *o = &m.u.enter;

	if (ac < 4) {
		out("usage: %s SHARES SYMBOL PRICE|market [ioc|day|tif N] [token T] [display X] "
		    "[minqty N] [firm F]\n", av[0]);
		return -1;
	}
	o->side = strcmp(av[0], "buy") == 0 ? 'B' : strcmp(av[0], "sell") == 0 ? 'S' :
		  strcmp(av[0], "short") == 0 ? 'T' : 'E';
	o->shares = (uint32_t)strtoul(av[1], NULL, 10);
	snprintf(o->stock, sizeof(o->stock), "%s", av[2]);
	if (parse_price(av[3], &o->price) < 0) {
		out("bad price %s\n", av[3]);
		return -1;
	}
	o->tif = o->price == OUCH_PRICE_MARKET ? OUCH_TIF_IOC : OUCH_TIF_SYSTEM_HOURS;
	o->display = 'A';
	o->capacity = 'A';
	o->iso = 'N';
	o->cross_type = 'N';
	o->customer_type = 'R';
	next_token(s, o->token);
	for (int i = 4; i < ac; i++) {
		const char *k = av[i], *v = i + 1 < ac ? av[i + 1] : NULL;

		if (strcmp(k, "ioc") == 0)
			o->tif = OUCH_TIF_IOC;
		else if (strcmp(k, "day") == 0)
			o->tif = OUCH_TIF_MARKET_HOURS;
		else if (!v) {
			out("%s needs a value\n", k);
			return -1;
		} else if (strcmp(k, "tif") == 0)
			o->tif = (uint32_t)strtoul(v, NULL, 10), i++;
		else if (strcmp(k, "token") == 0)
			snprintf(o->token, sizeof(o->token), "%s", v), i++;
		else if (strcmp(k, "display") == 0)
			o->display = v[0], i++;
		else if (strcmp(k, "minqty") == 0)
			o->min_qty = (uint32_t)strtoul(v, NULL, 10), i++;
		else if (strcmp(k, "firm") == 0)
			snprintf(o->firm, sizeof(o->firm), "%s", v), i++;
		else if (strcmp(k, "capacity") == 0)
			o->capacity = v[0], i++;
		else if (strcmp(k, "side") == 0)
			o->side = v[0], i++;
		else {
			out("unknown option %s\n", k);
			return -1;
		}
	}
	return send_ouch(s, &m);
}

static int cmd_cancel(struct session *s, char **av, int ac)
{
	struct ouch_msg m = { .type = OUCH_CANCEL_ORDER, .inbound = 1 };

	if (ac < 2) {
		out("usage: cancel TOKEN [SHARES]  (SHARES: the new size, 0 or absent cancels all)\n");
		return -1;
	}
	snprintf(m.u.cancel.token, sizeof(m.u.cancel.token), "%s", av[1]);
	m.u.cancel.shares = ac > 2 ? (uint32_t)strtoul(av[2], NULL, 10) : 0;
	return send_ouch(s, &m);
}

static int cmd_replace(struct session *s, char **av, int ac)
{
	struct ouch_msg m = { .type = OUCH_REPLACE_ORDER, .inbound = 1 };
	struct ouch_replace_order *r = &m.u.replace;

	if (ac < 5) {
		out("usage: replace TOKEN NEWTOKEN SHARES PRICE [ioc|day|tif N] [display X] [minqty N]\n");
		return -1;
	}
	snprintf(r->existing_token, sizeof(r->existing_token), "%s", av[1]);
	snprintf(r->replacement_token, sizeof(r->replacement_token), "%s", av[2]);
	r->shares = (uint32_t)strtoul(av[3], NULL, 10);
	if (parse_price(av[4], &r->price) < 0) {
		out("bad price %s\n", av[4]);
		return -1;
	}
	r->tif = OUCH_TIF_SYSTEM_HOURS;
	r->display = 'A';
	r->iso = 'N';
	for (int i = 5; i < ac; i++) {
		if (strcmp(av[i], "ioc") == 0)
			r->tif = OUCH_TIF_IOC;
		else if (strcmp(av[i], "day") == 0)
			r->tif = OUCH_TIF_MARKET_HOURS;
		else if (i + 1 < ac && strcmp(av[i], "tif") == 0)
			r->tif = (uint32_t)strtoul(av[++i], NULL, 10);
		else if (i + 1 < ac && strcmp(av[i], "display") == 0)
			r->display = av[++i][0];
		else if (i + 1 < ac && strcmp(av[i], "minqty") == 0)
			r->min_qty = (uint32_t)strtoul(av[++i], NULL, 10);
		else {
			out("unknown option %s\n", av[i]);
			return -1;
		}
	}
	return send_ouch(s, &m);
}

static int cmd_modify(struct session *s, char **av, int ac)
{
	struct ouch_msg m = { .type = OUCH_MODIFY_ORDER, .inbound = 1 };

	if (ac < 4) {
		out("usage: modify TOKEN SIDE SHARES\n");
		return -1;
	}
	snprintf(m.u.modify.token, sizeof(m.u.modify.token), "%s", av[1]);
	m.u.modify.side = av[2][0];
	m.u.modify.shares = (uint32_t)strtoul(av[3], NULL, 10);
	return send_ouch(s, &m);
}

/* expect PATTERN...: the session's next message must match the glob
 * pattern (fnmatch), within the timeout. */
static int cmd_expect(struct session *s, const char *pattern)
{
	uint64_t end = mono_ns() + (uint64_t)opt_timeout_ms * 1000000ull;

	while (s->q_len == 0 && s->fd >= 0 && mono_ns() < end)
		pump(20, 0);
	if (s->q_len == 0) {
		out("FAIL %s: expected \"%s\", got nothing%s\n", s->name, pattern,
		    s->fd < 0 ? " (disconnected)" : " (timeout)");
		failures++;
		return -1;
	}
	char *line = s->queue[s->q_head];
	s->q_head = (s->q_head + 1) % QUEUE_LEN;
	s->q_len--;
	int ok = fnmatch(pattern, line, 0) == 0;
	if (!ok) {
		out("FAIL %s: expected \"%s\"\n%*s  got \"%s\"\n", s->name, pattern,
		    (int)strlen(s->name), "", line);
		failures++;
	}
	free(line);
	return ok ? 0 : -1;
}

/* expect-none MS: nothing arrives on the session for MS milliseconds. */
static int cmd_expect_none(struct session *s, int ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000ull;

	while (s->q_len == 0 && mono_ns() < end)
		pump(10, 0);
	if (s->q_len) {
		out("FAIL %s: expected nothing, got \"%s\"\n", s->name, s->queue[s->q_head]);
		failures++;
		return -1;
	}
	return 0;
}

/* raw HEX: sends bytes as they are (for tests of misbehaving clients). */
static int cmd_raw(struct session *s, const char *hex)
{
	uint8_t buf[1024];
	size_t n = 0;

	for (; hex[0] && hex[1] && n < sizeof(buf); hex += 2) {
		unsigned v;

		if (isspace((unsigned char)hex[0])) {
			hex--;
			continue;
		}
		if (sscanf(hex, "%2x", &v) != 1)
			break;
		buf[n++] = (uint8_t)v;
	}
	return send_all(s, buf, n);
}

static void help(void)
{
	out("commands (prefix with SESSION: to pick a session, e.g. \"B: sell 100 AAPL 150\"):\n"
	    "  connect NAME USER PASSWORD [HOST:PORT] [seq N] [session S]\n"
	    "  buy|sell|short|exempt SHARES SYMBOL PRICE|market [ioc|day|tif SECONDS] [token T]\n"
	    "      [display A|Y|N|P] [minqty N] [firm F] [capacity A|P|R|O]\n"
	    "  cancel TOKEN [NEW_SIZE]      replace TOKEN NEWTOKEN SHARES PRICE [options]\n"
	    "  modify TOKEN SIDE SHARES     logout     disconnect     sleep MS\n"
	    "  expect PATTERN               (glob; the session's next reply must match)\n"
	    "  expect-none MS               raw HEX     echo TEXT     help     quit\n");
}

/* Runs one line; returns -1 on an error that fails a script, 1 to quit. */
/* Strips a "NAME: " session prefix off *pp: 0 with *s that session (or
 * left as it was without a prefix), -1 when no session has that name. */
static int line_session(char **pp, struct session **s)
{
	char *p = *pp, *colon = strchr(p, ':');

	if (!colon || colon >= p + strcspn(p, " \t"))
		return 0;
	*colon = '\0';
	*s = find_session(p);
	if (!*s) {
		out("no session %s\n", p);
		return -1;
	}
	p = colon + 1;
	while (isspace((unsigned char)*p))
		p++;
	*pp = p;
	return 0;
}

static int cmd_logout(struct session *s)
{
	uint8_t pkt[8];
	int len = soup_build_logout_request(pkt, sizeof(pkt));

	send_all(s, pkt, (size_t)len);
	for (uint64_t end = mono_ns() + 1000000000ull; s->fd >= 0 && mono_ns() < end;)
		pump(20, 0);
	session_close(s, "logged out");
	return 0;
}

/* The commands that act on an open session. */
static int run_session_cmd(struct session *s, char **av, int ac)
{
	if (strcmp(av[0], "expect-none") == 0 && ac == 2)
		return cmd_expect_none(s, atoi(av[1]));
	if (!strcmp(av[0], "buy") || !strcmp(av[0], "sell") || !strcmp(av[0], "short") ||
	    !strcmp(av[0], "exempt"))
		return cmd_order(s, av, ac);
	if (strcmp(av[0], "cancel") == 0)
		return cmd_cancel(s, av, ac);
	if (strcmp(av[0], "replace") == 0)
		return cmd_replace(s, av, ac);
	if (strcmp(av[0], "modify") == 0)
		return cmd_modify(s, av, ac);
	if (strcmp(av[0], "logout") == 0)
		return cmd_logout(s);
	if (strcmp(av[0], "disconnect") == 0) {
		session_close(s, "by request");
		return 0;
	}
	out("unknown command %s (try help)\n", av[0]);
	return -1;
}

/* expect, echo and raw take the rest of the line as it is. */
static int run_text_cmd(struct session *s, char *p)
{
	char *arg = p + strcspn(p, " ") + 1;

	if (p[0] == 'e' && p[1] == 'c') {
		out("%s\n", arg);
		return 0;
	}
	if (!s || s->fd < 0) {
		out("no open session\n");
		return -1;
	}
	return p[0] == 'r' ? cmd_raw(s, arg) : cmd_expect(s, arg);
}

static int run_line(char *line)
{
	char *av[32], *p = line;
	struct session *s = current;
	int ac = 0;

	while (isspace((unsigned char)*p))
		p++;
	if (!*p || *p == '#')
		return 0;
	p[strcspn(p, "\r\n")] = '\0';
	if (line_session(&p, &s) < 0)
		return -1;
	if (strncmp(p, "expect ", 7) == 0 || strncmp(p, "echo ", 5) == 0 || strncmp(p, "raw ", 4) == 0)
		return run_text_cmd(s, p);
	for (char *t = strtok(p, " \t"); t && ac < 32; t = strtok(NULL, " \t"))
		av[ac++] = t;
	if (ac == 0)
		return 0;
	if (strcmp(av[0], "quit") == 0 || strcmp(av[0], "exit") == 0)
		return 1;
	if (strcmp(av[0], "help") == 0) {
		help();
		return 0;
	}
	if (strcmp(av[0], "connect") == 0)
		return cmd_connect(av, ac);
	if (strcmp(av[0], "sleep") == 0 && ac == 2) {
		uint64_t end = mono_ns() + strtoull(av[1], NULL, 10) * 1000000ull;

		while (mono_ns() < end)
			pump(10, 0);
		return 0;
	}
	if (!s || s->fd < 0) {
		out("no open session: connect first\n");
		return -1;
	}
	return run_session_cmd(s, av, ac);
}

static void usage(FILE *f)
{
	fputs("Usage: lockstep-client [OPTIONS] [USER PASSWORD]\n"
	      "\n"
	      "An OUCH 4.2 client over SoupBinTCP 4.0. With USER and PASSWORD it logs in\n"
	      "a session named after the user; commands then come from standard input\n"
	      "(interactive) or from --script FILE, and every reply is printed on one line.\n"
	      "\n"
	      "Options:\n"
	      "  -c, --connect HOST:PORT  the gateway (default 127.0.0.1:15000)\n"
	      "  -f, --script FILE        run FILE's lines; exit 1 if any expect failed\n"
	      "  -t, --timeout MS         how long expect and login wait (default 5000)\n"
	      "  -q, --quiet              print only failures and echo lines\n"
	      "  -p, --token-prefix P     prefix of generated order tokens\n"
	      "  -h, --help               this text; `help` inside lists the commands\n",
	      f);
}

/* Generated tokens must be day-unique per login across runs: they start
 * with the time of day in seconds, base 36. */
static void token_prefix_init(void)
{
	unsigned long t = (unsigned long)(wall_ns() / 1000000000ull % 86400);

	for (int i = 3; i >= 0; i--, t /= 36)
		token_prefix[i] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[t % 36];
	token_prefix[4] = '\0';
}

/* Options; returns -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, const char **script)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'c' },
		{ "script", required_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "token-prefix", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:f:t:qp:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			default_addr = optarg;
			break;
		case 'f':
			*script = optarg;
			break;
		case 't':
			opt_timeout_ms = atoi(optarg);
			break;
		case 'q':
			opt_quiet = 1;
			break;
		case 'p':
			snprintf(token_prefix, sizeof(token_prefix), "%s", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	return -1;
}

/* Runs every line of `in`: 1 when a scripted line failed, else 0. */
static int run_input(FILE *in, int from_script)
{
	char line[LINE_MAX_LEN];
	int rc = 0;

	for (;;) {
		if (!from_script) { /* keep printing replies while waiting for input */
			while (!pump(100, 1))
				;
		}
		if (!fgets(line, sizeof(line), in))
			break;
		int r = run_line(line);
		if (r == 1)
			break;
		if (r < 0 && scripted && from_script)
			rc = 1;
	}
	/* Let replies still in flight print before leaving an interactive run. */
	if (!from_script)
		pump(200, 0);
	return rc;
}

int main(int argc, char **argv)
{
	const char *script = NULL;
	FILE *in = stdin;
	int rc;

	token_prefix_init();
	if ((rc = parse_options(argc, argv, &script)) >= 0)
		return rc;
	if (script && !(in = fopen(script, "r"))) {
		fprintf(stderr, "lockstep-client: %s: %s\n", script, strerror(errno));
		return 2;
	}
	scripted = script != NULL || !isatty(STDIN_FILENO);
	if (argc - optind == 2) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "connect %s %s %s", argv[optind], argv[optind],
			 argv[optind + 1]);
		if (run_line(cmd) < 0)
			return 1;
	} else if (argc != optind) {
		usage(stderr);
		return 2;
	}
	if (!scripted)
		out("lockstep-client: type help for the commands\n");
	rc = run_input(in, script != NULL);
	for (unsigned i = 0; i < n_sessions; i++)
		if (sessions[i].fd >= 0)
			close(sessions[i].fd);
	if (failures)
		out("%lu expectation(s) failed\n", failures);
	return rc || failures ? 1 : 0;
}
