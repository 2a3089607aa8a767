/* lockstep-bench: drives a running cluster through its gateways as real
 * OUCH sessions and measures the time from an order's planned send time to
 * its answer (open loop: a stall is not hidden), or, with --window, keeps a
 * fixed number of orders in flight per session (closed loop). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "hist.h"
#include "net.h"
#include "ouch.h"
#include "soupbin.h"

#define MAX_SESSIONS 64
#define TXBUF (256 * 1024)

enum { ORD_SENT = 1, ORD_ANSWERED = 2, ORD_CANCEL_SENT = 4, ORD_CANCEL_ANSWERED = 8 };

struct bsession {
	int fd;
	char user[8], pass[12];
	char prefix[8]; /* token prefix: run + session */
	struct soup_parser parser;
	uint8_t rx[1 << 17];
	uint8_t tx[TXBUF];
	size_t txlen;
	uint64_t *planned; /* per order index: planned send time */
	uint8_t *flags;
	uint64_t *cancel_planned;
	uint32_t sent, answered, in_flight, cancels, cancels_answered;
	uint64_t last_tx;
};

static struct bsession S[MAX_SESSIONS];
static unsigned n_sessions = 2;
static uint32_t orders_per_session = 10000;
static double rate; /* orders/s over all sessions; 0: closed loop */
static unsigned window = 32;
static uint64_t seed = 1;
static const char *symbols[16];
static unsigned n_symbols;
static struct hist h_accept, h_cancel;
static uint64_t executions, rejects, canceled_other, undecodable;
static int quiet;

static uint64_t rng_state;
static uint64_t rnd(void)
{
	/* splitmix64: reproducible for a given --seed */
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void token_of(const struct bsession *s, uint32_t i, char *tok)
{
	snprintf(tok, OUCH_TOKEN_LEN + 1, "%.6s%08X", s->prefix, i & 0xffffffffu);
}

/* The order index of a token of this session, or -1. */
static int64_t index_of(const struct bsession *s, const char *tok)
{
	size_t n = strlen(s->prefix);
	char *end;
	unsigned long v;

	if (strncmp(tok, s->prefix, n) != 0)
		return -1;
	v = strtoul(tok + n, &end, 16);
	return *end || v >= orders_per_session ? -1 : (int64_t)v;
}

static int flush_tx(struct bsession *s)
{
	size_t off = 0;

	while (off < s->txlen) {
		ssize_t n = send(s->fd, s->tx + off, s->txlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	memmove(s->tx, s->tx + off, s->txlen - off);
	s->txlen -= off;
	s->last_tx = mono_ns();
	return 0;
}

static void queue_msg(struct bsession *s, const struct ouch_msg *m)
{
	uint8_t msg[OUCH_MAX_LEN];
	int len = ouch_encode_inbound(m, msg, sizeof(msg));

	if (s->txlen + OUCH_MAX_LEN + 3 > TXBUF)
		flush_tx(s);
	if (len > 0 && s->txlen + OUCH_MAX_LEN + 3 <= TXBUF)
		s->txlen += (size_t)soup_build_unsequenced(s->tx + s->txlen, TXBUF - s->txlen, msg,
							   (uint16_t)len);
}

/* The default mix resembles a book: limit orders near the touch, about a
 * fifth marketable, and a cancel for about one order in four. */
static void send_next(struct bsession *s, uint64_t planned)
{
	struct ouch_msg m = { .type = OUCH_ENTER_ORDER, .inbound = 1 };
	struct ouch_enter_order *o = &m.u.enter;
	uint32_t i = s->sent;
	uint64_t r = rnd();
	int buy = r & 1;
	int marketable = (r >> 1) % 5 == 0;
	uint32_t mid = 1000000; /* $100.00 */
	uint32_t off = (uint32_t)((r >> 8) % 10 + 1) * 100;

	token_of(s, i, o->token);
	o->side = buy ? 'B' : 'S';
	o->shares = (uint32_t)((r >> 16) % 10 + 1) * 100;
	snprintf(o->stock, sizeof(o->stock), "%s", symbols[(r >> 24) % n_symbols]);
	o->price = marketable ? (buy ? mid + off : mid - off) : (buy ? mid - off : mid + off);
	o->tif = marketable ? OUCH_TIF_IOC : OUCH_TIF_SYSTEM_HOURS;
	o->display = 'A';
	o->capacity = 'A';
	o->iso = 'N';
	o->cross_type = 'N';
	o->customer_type = 'R';
	queue_msg(s, &m);
	s->planned[i] = planned;
	s->flags[i] = ORD_SENT;
	s->sent++;
	s->in_flight++;
	/* cancel an earlier resting order of this session, now and then */
	if (i > 10 && (r >> 32) % 4 == 0) {
		uint32_t j = (uint32_t)((r >> 40) % i);

		if ((s->flags[j] & (ORD_ANSWERED | ORD_CANCEL_SENT)) == ORD_ANSWERED) {
			struct ouch_msg c = { .type = OUCH_CANCEL_ORDER, .inbound = 1 };

			token_of(s, j, c.u.cancel.token);
			queue_msg(s, &c);
			s->flags[j] |= ORD_CANCEL_SENT;
			s->cancel_planned[j] = planned;
			s->cancels++;
		}
	}
}

static void on_message(struct bsession *s, const uint8_t *data, size_t len, uint64_t now)
{
	struct ouch_msg m;
	const char *tok;
	int64_t i;

	if (ouch_decode_outbound(data, len, &m) < 0) {
		undecodable++;
		return;
	}
	switch (m.type) {
	case OUCH_ACCEPTED:
	case OUCH_REJECTED:
		tok = m.type == OUCH_ACCEPTED ? m.u.accepted.token : m.u.rejected.token;
		if ((i = index_of(s, tok)) < 0 || (s->flags[i] & ORD_ANSWERED))
			return;
		s->flags[i] |= ORD_ANSWERED;
		s->answered++;
		s->in_flight--;
		hist_record(&h_accept, now - s->planned[i]);
		if (m.type == OUCH_REJECTED)
			rejects++;
		return;
	case OUCH_EXECUTED:
		executions++;
		return;
	case OUCH_CANCELED:
	case OUCH_CANCEL_REJECT:
		tok = m.type == OUCH_CANCELED ? m.u.canceled.token : m.u.cancel_reject.token;
		i = index_of(s, tok);
		if (m.type == OUCH_CANCELED && m.u.canceled.reason != OUCH_CXL_USER) {
			canceled_other++;
			return;
		}
		if (i < 0 || !(s->flags[i] & ORD_CANCEL_SENT) || (s->flags[i] & ORD_CANCEL_ANSWERED))
			return;
		s->flags[i] |= ORD_CANCEL_ANSWERED;
		s->cancels_answered++;
		hist_record(&h_cancel, now - s->cancel_planned[i]);
		return;
	default:
		return;
	}
}

static int read_session(struct bsession *s, uint64_t now)
{
	size_t room;
	uint8_t *at = soup_parser_space(&s->parser, &room);
	ssize_t n = recv(s->fd, at, room, MSG_DONTWAIT);
	struct soup_packet p;
	int err;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return -1;
	soup_parser_feed(&s->parser, (size_t)n);
	while ((err = soup_parser_next(&s->parser, &p)) == SOUP_OK)
		if (p.type == SOUP_SEQUENCED_DATA)
			on_message(s, p.payload, p.len, now);
		else if (p.type == SOUP_END_OF_SESSION)
			return -1;
	return err == SOUP_E_AGAIN ? 0 : -1;
}

static int login(struct bsession *s, const char *addr)
{
	struct sockaddr_in sa;
	struct soup_login l = { .seq = 0 };
	uint8_t pkt[64];
	struct soup_packet p;
	uint64_t end = mono_ns() + 5000000000ull;
	int len;

	if (net_parse_addr(addr, &sa) < 0)
		return -EINVAL;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	net_tcp_tune(s->fd);
	soup_parser_init(&s->parser, s->rx, sizeof(s->rx), SOUP_MAX_PAYLOAD, SOUP_FROM_SERVER);
	snprintf(l.username, sizeof(l.username), "%s", s->user);
	snprintf(l.password, sizeof(l.password), "%s", s->pass);
	len = soup_build_login_request(pkt, sizeof(pkt), &l);
	if (send(s->fd, pkt, (size_t)len, MSG_NOSIGNAL) != len)
		return -EIO;
	while (mono_ns() < end) {
		size_t room;
		uint8_t *at = soup_parser_space(&s->parser, &room);
		struct pollfd pf = { .fd = s->fd, .events = POLLIN };
		ssize_t n;

		poll(&pf, 1, 100);
		n = recv(s->fd, at, room, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			continue;
		soup_parser_feed(&s->parser, (size_t)n);
		if (soup_parser_next(&s->parser, &p) == SOUP_OK)
			return p.type == SOUP_LOGIN_ACCEPTED ? 0 : -EACCES;
	}
	return -ETIMEDOUT;
}

static void usage(FILE *f)
{
	fputs("Usage: lockstep-bench [OPTIONS]\n"
	      "\n"
	      "Sends orders through running lockstep gateways as real OUCH sessions and\n"
	      "reports the latency from each order's planned send time to its answer\n"
	      "(Accepted or Rejected; Canceled or Cancel Reject for cancels), the\n"
	      "throughput, and every order that got no answer (which must be none).\n"
	      "\n"
	      "Options:\n"
	      "  -c, --connect H:P[,H:P]  gateways; sessions are spread over them\n"
	      "                           (default 127.0.0.1:15000)\n"
	      "  -l, --logins U:P,...     logins, reused round robin\n"
	      "                           (default TRADR1:pw1,TRADR2:pw2,TRADR3:pw3)\n"
	      "  -s, --sessions N         sessions (default 2)\n"
	      "  -n, --orders N           orders per session (default 10000)\n"
	      "  -r, --rate R             open loop: R orders/s over all sessions\n"
	      "  -w, --window W           closed loop: W orders in flight per session\n"
	      "                           (the default, W = 32, when no --rate)\n"
	      "      --symbols A,B,...    symbols (default AAPL,MSFT,AMZN,GOOG)\n"
	      "      --seed S             the order mix's seed (default 1)\n"
	      "  -t, --timeout S          give up waiting for answers after S s (default 10)\n"
	      "  -j, --json FILE          also write the results as JSON\n"
	      "  -q, --quiet              only the summary\n"
	      "  -h, --help               this text\n"
	      "\n"
	      "Exit status: 0 when every order and cancel was answered, 1 otherwise.\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'c' }, { "logins", required_argument, NULL, 'l' },
		{ "sessions", required_argument, NULL, 's' }, { "orders", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' }, { "window", required_argument, NULL, 'w' },
		{ "symbols", required_argument, NULL, 'S' }, { "seed", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' }, { "json", required_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char connect_list[512] = "127.0.0.1:15000", logins[512] = "TRADR1:pw1,TRADR2:pw2,TRADR3:pw3";
	char syms[256] = "AAPL,MSFT,AMZN,GOOG", *gw[16], *lg[64], *save;
	unsigned n_gw = 0, n_lg = 0;
	const char *json = NULL;
	double timeout = 10;
	int c;

	while ((c = getopt_long(argc, argv, "c:l:s:n:r:w:t:j:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': snprintf(connect_list, sizeof(connect_list), "%s", optarg); break;
		case 'l': snprintf(logins, sizeof(logins), "%s", optarg); break;
		case 's': n_sessions = (unsigned)atoi(optarg); break;
		case 'n': orders_per_session = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'r': rate = atof(optarg); break;
		case 'w': window = (unsigned)atoi(optarg); break;
		case 'S': snprintf(syms, sizeof(syms), "%s", optarg); break;
		case 'e': seed = strtoull(optarg, NULL, 10); break;
		case 't': timeout = atof(optarg); break;
		case 'j': json = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (n_sessions < 1 || n_sessions > MAX_SESSIONS || orders_per_session < 1 ||
	    orders_per_session > 0x7fffffff || window < 1 || rate < 0) {
		fprintf(stderr, "lockstep-bench: sessions 1..%d, orders >= 1, window >= 1\n",
			MAX_SESSIONS);
		return 2;
	}
	for (char *t = strtok_r(connect_list, ",", &save); t && n_gw < 16; t = strtok_r(NULL, ",", &save))
		gw[n_gw++] = t;
	for (char *t = strtok_r(logins, ",", &save); t && n_lg < 64; t = strtok_r(NULL, ",", &save))
		lg[n_lg++] = t;
	for (char *t = strtok_r(syms, ",", &save); t && n_symbols < 16; t = strtok_r(NULL, ",", &save))
		symbols[n_symbols++] = t;
	if (!n_gw || !n_lg || !n_symbols) {
		fprintf(stderr, "lockstep-bench: need a gateway, a login and a symbol\n");
		return 2;
	}
	rng_state = seed;
	hist_init(&h_accept);
	hist_init(&h_cancel);
	/* Tokens must be day-unique per login: a run prefix from the time of day. */
	unsigned run = (unsigned)(wall_ns() / 1000000ull % 1296000ull);
	for (unsigned i = 0; i < n_sessions; i++) {
		struct bsession *s = &S[i];
		char *colon = strchr(lg[i % n_lg], ':');

		if (!colon) {
			fprintf(stderr, "lockstep-bench: a login is USER:PASSWORD\n");
			return 2;
		}
		snprintf(s->user, sizeof(s->user), "%.*s", (int)(colon - lg[i % n_lg]), lg[i % n_lg]);
		snprintf(s->pass, sizeof(s->pass), "%s", colon + 1);
		snprintf(s->prefix, sizeof(s->prefix), "%04X%02X", run & 0xffff, i & 0xff);
		s->planned = calloc(orders_per_session, sizeof(uint64_t));
		s->cancel_planned = calloc(orders_per_session, sizeof(uint64_t));
		s->flags = calloc(orders_per_session, 1);
		if (!s->planned || !s->flags || !s->cancel_planned)
			return 1;
		int err = login(s, gw[i % n_gw]);
		if (err < 0) {
			fprintf(stderr, "lockstep-bench: session %u (%s at %s): %s\n", i, s->user,
				gw[i % n_gw], strerror(-err));
			return 1;
		}
	}

	uint64_t total = (uint64_t)n_sessions * orders_per_session, sent = 0, answered = 0;
	uint64_t start = mono_ns(), last_send = start, deadline = 0;
	double interval = rate > 0 ? 1e9 / rate : 0;
	struct pollfd pf[MAX_SESSIONS];

	for (;;) {
		uint64_t now = mono_ns();

		if (sent < total) {
			if (rate > 0) { /* open loop: everything planned up to now goes */
				while (sent < total) {
					uint64_t planned = start + (uint64_t)(sent * interval);
					if (planned > now)
						break;
					send_next(&S[sent % n_sessions], planned);
					sent++;
				}
			} else {
				for (unsigned i = 0; i < n_sessions; i++)
					while (S[i].sent < orders_per_session && S[i].in_flight < window) {
						send_next(&S[i], now);
						sent++;
					}
			}
			last_send = now;
		} else if (!deadline) {
			deadline = now + (uint64_t)(timeout * 1e9);
		}
		for (unsigned i = 0; i < n_sessions; i++) {
			if (S[i].txlen && flush_tx(&S[i]) < 0) {
				fprintf(stderr, "lockstep-bench: session %u lost\n", i);
				deadline = now;
			}
			if (now - S[i].last_tx > 1000000000ull) { /* SoupBinTCP heartbeat */
				S[i].txlen += (size_t)soup_build_client_heartbeat(S[i].tx + S[i].txlen, 8);
			}
			pf[i].fd = S[i].fd;
			pf[i].events = POLLIN;
		}
		poll(pf, n_sessions, rate > 0 ? 0 : 1);
		now = mono_ns();
		answered = 0;
		uint64_t cancels = 0, cancels_answered = 0;
		for (unsigned i = 0; i < n_sessions; i++) {
			if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) && read_session(&S[i], now) < 0) {
				fprintf(stderr, "lockstep-bench: session %u closed by the gateway\n", i);
				deadline = now;
			}
			answered += S[i].answered;
			cancels += S[i].cancels;
			cancels_answered += S[i].cancels_answered;
		}
		if (sent == total && answered == total && cancels_answered == cancels)
			break;
		if (deadline && now >= deadline)
			break;
	}
	double secs = (double)(last_send - start) / 1e9;
	uint64_t cancels = 0, cancels_answered = 0;
	for (unsigned i = 0; i < n_sessions; i++) {
		cancels += S[i].cancels;
		cancels_answered += S[i].cancels_answered;
	}
	double elapsed = (double)(mono_ns() - start) / 1e9;
	printf("orders:      %llu sent, %llu answered (%llu rejected), %llu unanswered\n",
	       (unsigned long long)sent, (unsigned long long)answered, (unsigned long long)rejects,
	       (unsigned long long)(sent - answered));
	printf("cancels:     %llu sent, %llu answered, %llu unanswered\n",
	       (unsigned long long)cancels, (unsigned long long)cancels_answered,
	       (unsigned long long)(cancels - cancels_answered));
	printf("executions:  %llu Executed messages, %llu other cancels (IOC rest, self-match)\n",
	       (unsigned long long)executions, (unsigned long long)canceled_other);
	printf("throughput:  offered %s, achieved %.0f orders/s over %.2f s\n",
	       rate > 0 ? "open loop" : "closed loop", (double)answered / (elapsed > 0 ? elapsed : 1),
	       elapsed);
	hist_print(&h_accept, stdout, "latency order->Accepted/Rejected (us)", 1000.0);
	hist_print(&h_cancel, stdout, "latency cancel->Canceled/CancelReject (us)", 1000.0);
	(void)secs;
	if (json) {
		FILE *f = fopen(json, "w");
		if (f) {
			fprintf(f,
				"{\"sessions\": %u, \"orders\": %llu, \"answered\": %llu, "
				"\"unanswered\": %llu, \"cancels\": %llu, \"cancels_unanswered\": %llu, "
				"\"executions\": %llu, \"seconds\": %.3f, \"orders_per_s\": %.0f, "
				"\"accept_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
				"\"p99.9\": %.1f, \"p99.99\": %.1f, \"max\": %.1f}}\n",
				n_sessions, (unsigned long long)sent, (unsigned long long)answered,
				(unsigned long long)(sent - answered), (unsigned long long)cancels,
				(unsigned long long)(cancels - cancels_answered),
				(unsigned long long)executions, elapsed, (double)answered / elapsed,
				hist_percentile(&h_accept, 50) / 1e3, hist_percentile(&h_accept, 90) / 1e3,
				hist_percentile(&h_accept, 99) / 1e3, hist_percentile(&h_accept, 99.9) / 1e3,
				hist_percentile(&h_accept, 99.99) / 1e3, h_accept.max / 1e3);
			fclose(f);
		}
	}
	(void)quiet;
	return sent == total && answered == total && cancels == cancels_answered ? 0 : 1;
}
