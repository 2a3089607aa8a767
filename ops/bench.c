/* lockstep-bench: the load generator and benchmark.
 *
 *  - load (the default): drives a running cluster through its gateways as
 *    real OUCH sessions, open loop at a fixed offered rate (each request's
 *    latency counts from its planned send time, so a stall is not hidden),
 *    closed loop (--window) or flat out (--max); reports latency
 *    percentiles per outcome, throughput, the daemons' CPU time, and every
 *    request left without an answer;
 *  - --baseline: the same load through a trivial relay with the same hops
 *    (client -TCP-> relay -UDP-> echo -UDP-> relay -TCP-> client), the
 *    processes forked here (--relay and --echo run one by hand);
 *  - --component: the sequencer alone (in-process, on loopback), the
 *    matcher's engine replaying a tape from memory, and the codecs.
 *
 * An "order" below is any inbound OUCH message: Enter, Cancel or Replace;
 * each is one command on the tape. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "arena.h"
#include "clock.h"
#include "config.h"
#include "convert.h"
#include "engine.h"
#include "hist.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "moldudp64.h"
#include "net.h"
#include "ouch.h"
#include "sequencer.h"
#include "soupbin.h"
#include "tape.h"
#include "wire.h"

#define PROG "lockstep-bench"
#define MAX_SESSIONS 256
#define MAX_GATEWAYS 16
#define MAX_SYMBOLS 16
#define MAX_PROCS 64
#define TXBUF (256 * 1024)
#define NO_LIVE UINT32_MAX

/* ---- options --------------------------------------------------------------- */

enum mix_kind { MIX_PASSIVE, MIX_MARKETABLE, MIX_CANCEL, MIX_REPLACE, MIX_N };
static const char *const mix_names[MIX_N] = { "passive", "marketable", "cancel", "replace" };

static struct {
	char connect[512], logins[1024], symbols_text[256];
	unsigned sessions;
	uint64_t orders; /* per session; 0: bounded by --duration */
	double rate; /* open loop, orders/s over all sessions; 0: closed loop */
	unsigned window;
	int max; /* --max: closed loop, deep window, flat out */
	double duration, warmup, timeout;
	uint64_t seed;
	unsigned mix[MIX_N]; /* weights */
	unsigned depth; /* resting orders a session keeps at most */
	const char *json, *png, *cluster_dir, *pids;
	int quiet, check_matches, baseline, spin;
	/* --component */
	const char *component, *journal;
	uint64_t events;
	unsigned batch, streams, datagram;
} opt = {
	.connect = "127.0.0.1:15000",
	.logins = "TRADR1:pw1,TRADR2:pw2,TRADR3:pw3",
	.symbols_text = "AAPL,MSFT,AMZN,GOOG",
	.sessions = 2,
	.window = 32,
	.timeout = 10,
	.seed = 1,
	.mix = { 48, 12, 25, 15 },
	.depth = 200,
	.streams = 1,
	.datagram = WIRE_MAX_DATAGRAM,
};

static const char *symbols[MAX_SYMBOLS];
static size_t symbol_len[MAX_SYMBOLS]; /* each at most OUCH_STOCK_LEN */
static unsigned n_symbols;
static volatile sig_atomic_t interrupted;
static int aborted; /* a session was lost: stop sending, wait for the rest */

static uint64_t rng_state;
static uint64_t rnd(void)
{
	/* splitmix64: reproducible for a given --seed */
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static enum mix_kind mix_pick(uint64_t r)
{
	unsigned total = 0, x;

	for (int k = 0; k < MIX_N; k++)
		total += opt.mix[k];
	x = (unsigned)(r % total);
	for (int k = 0; k < MIX_N; k++) {
		if (x < opt.mix[k])
			return (enum mix_kind)k;
		x -= opt.mix[k];
	}
	return MIX_PASSIVE;
}

/* The book the default mix builds: passive limit orders 1 to 5 ticks from a
 * $100.00 middle, most at the touch; marketable orders are IOC limits 5
 * ticks through it, so they take what rests; round lots of 100 to 1000. */
#define MID_PRICE 1000000u
#define TICK 100u
static uint32_t passive_price(int buy, uint64_t r)
{
	static const uint8_t ticks[8] = { 1, 1, 1, 2, 2, 3, 4, 5 };
	uint32_t off = ticks[r & 7] * TICK;

	return buy ? MID_PRICE - off : MID_PRICE + off;
}

static uint32_t lot(uint64_t r)
{
	return (uint32_t)(r % 10 + 1) * 100;
}

/* ---- the load: sessions, tokens, answers ----------------------------------- */

enum {
	T_BUY = 1 << 0,
	T_IOC = 1 << 1,
	T_WARM = 1 << 2, /* sent in the warm-up: not measured */
	T_ANSWERED = 1 << 3, /* Accepted, Rejected or Replaced (or its replace resolved) */
	T_DEAD = 1 << 4,
	T_CXL_SENT = 1 << 5,
	T_CXL_DONE = 1 << 6,
	T_CXL_WARM = 1 << 7,
	T_REPLACEMENT = 1 << 8, /* the new token of a Replace */
	T_REPL_SENT = 1 << 9, /* a Replace of this token is pending */
	T_EXEC = 1 << 10, /* its first execution as the aggressor was seen */
};

/* One per token a session used (Enter or Replace). */
struct tok {
	uint64_t planned; /* the Enter's or Replace's planned send time */
	uint64_t cxl_planned;
	uint32_t open; /* open shares once live */
	uint32_t live; /* index in the session's live set, or NO_LIVE */
	uint32_t repl; /* the pending Replace's new token */
	uint16_t flags;
};

struct bsession {
	int fd;
	unsigned gw;
	char user[SOUP_USERNAME_LEN + 1], pass[SOUP_PASSWORD_LEN + 1];
	char prefix[9]; /* token prefix: run (6) + session (2) */
	struct soup_parser parser;
	uint8_t rx[1 << 17];
	uint8_t tx[TXBUF];
	size_t txlen;
	struct tok *tok;
	uint32_t n_tok, cap_tok;
	uint32_t *live, n_live; /* resting orders that can be canceled or replaced */
	uint64_t actions; /* orders (any kind) sent */
	uint32_t in_flight;
	uint64_t last_tx;
	int lost;
};

struct counts {
	uint64_t enters, accepted, rejected;
	uint64_t cancels, canceled, cancel_rejects;
	uint64_t replaces, replaced, replace_dead; /* dead: its order died first */
	uint64_t executions, aggressor_fills, canceled_other, undecodable, unexpected;
	uint64_t measured_sent, measured_answered; /* requests after the warm-up */
	uint64_t last_answer; /* time of the last answer to a measured request */
};

static struct bsession *S;
static unsigned n_sessions;
static struct counts C;
enum { H_ACCEPTED, H_EXECUTED, H_CANCELED, H_REPLACED, H_N };
static const char *const h_names[H_N] = { "accepted", "executed", "canceled", "replaced" };
static const char *const h_labels[H_N] = {
	"latency order->Accepted/Rejected (us)", "latency order->Executed (us)",
	"latency cancel->Canceled/CancelReject (us)", "latency replace->Replaced (us)",
};
static struct hist H[H_N];
static uint64_t measure_start;

/* prefix (8) + the index in 6 hex digits: 14 characters, NUL-terminated */
#define TOKEN_INDEX_MAX 0xFFFFFFu
static void token_of(const struct bsession *s, uint32_t i, char *tok)
{
	static const char hex[] = "0123456789ABCDEF";

	memcpy(tok, s->prefix, 8);
	for (int k = 13; k >= 8; k--, i >>= 4)
		tok[k] = hex[i & 15];
	tok[OUCH_TOKEN_LEN] = '\0';
}

/* The token index of a token of this session, or -1. */
static int64_t index_of(const struct bsession *s, const char *tok)
{
	uint32_t v = 0;

	if (memcmp(tok, s->prefix, 8) != 0)
		return -1;
	for (int k = 8; k < 14; k++) {
		char c = tok[k];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	return v < s->n_tok ? (int64_t)v : -1;
}

static void live_add(struct bsession *s, uint32_t i)
{
	if (s->tok[i].live != NO_LIVE)
		return;
	s->tok[i].live = s->n_live;
	s->live[s->n_live++] = i;
}

static void live_remove(struct bsession *s, uint32_t i)
{
	uint32_t at = s->tok[i].live, last;

	if (at == NO_LIVE)
		return;
	last = s->live[--s->n_live];
	s->live[at] = last;
	s->tok[last].live = at;
	s->tok[i].live = NO_LIVE;
}

static void answered(struct bsession *s, int warm, int hist, uint64_t planned, uint64_t now)
{
	s->in_flight--;
	if (warm)
		return;
	C.measured_answered++;
	C.last_answer = now;
	if (hist >= 0)
		hist_record(&H[hist], now > planned ? now - planned : 0);
}

/* An order left the book: its pending Replace, if any, will be ignored (or
 * was answered by this very Canceled 'Z'): that resolves it. */
static void token_dies(struct bsession *s, uint32_t i, uint64_t now)
{
	struct tok *t = &s->tok[i];

	t->flags |= T_DEAD;
	live_remove(s, i);
	if (t->flags & T_REPL_SENT) {
		struct tok *n = &s->tok[t->repl];

		t->flags &= (uint16_t)~T_REPL_SENT;
		if (!(n->flags & T_ANSWERED)) {
			n->flags |= T_ANSWERED | T_DEAD;
			C.replace_dead++;
			answered(s, n->flags & T_WARM, -1, n->planned, now);
		}
	}
}

/* --check-matches: every match number must reach the bench exactly twice,
 * once on the resting (liquidity Added) and once on the aggressing (Removed)
 * side, with the same shares and price, on opposite sides of the book.
 * Holds only when the bench's sessions are the only traders. Open
 * addressing; a match fills one of its two orders, so there are at most as
 * many matches as tokens and the table (twice that) never fills. */
struct match_slot {
	uint64_t match; /* 0: empty */
	uint32_t shares, price;
	uint8_t seen; /* 1: Added side, 2: Removed side, 4: buy, 8: sell */
	uint8_t bad;
};
static struct match_slot *matches;
static uint64_t match_mask, match_open; /* open: one side seen so far */

static void match_record(const struct bsession *s, const struct ouch_executed *x)
{
	int64_t i = index_of(s, x->token);
	uint8_t side = i < 0 ? 0 : (s->tok[i].flags & T_BUY) ? 4 : 8;
	uint8_t liq = x->liquidity == OUCH_LIQ_ADDED ? 1 : x->liquidity == OUCH_LIQ_REMOVED ? 2 : 0;
	uint64_t h = (x->match * 0x9E3779B97F4A7C15ull) & match_mask;
	struct match_slot *m;
	int was_open;

	for (;; h = (h + 1) & match_mask) {
		m = &matches[h];
		if (m->match == 0 || m->match == x->match)
			break;
	}
	if (m->match == 0) {
		m->match = x->match;
		m->shares = x->shares;
		m->price = x->price;
		was_open = 0;
	} else {
		was_open = !m->bad && m->seen != 15;
		if (m->shares != x->shares || m->price != x->price)
			m->bad = 1;
	}
	if (!side || !liq || (m->seen & (liq | side)))
		m->bad = 1; /* a doubled side, or not one of ours */
	m->seen |= liq | side;
	match_open += (uint64_t)(!m->bad && m->seen != 15) - (uint64_t)was_open;
}

static void on_message(struct bsession *s, const uint8_t *data, size_t len, uint64_t now)
{
	struct ouch_msg m;
	struct tok *t;
	int64_t i, o;

	if (ouch_decode_outbound(data, len, &m) < 0) {
		C.undecodable++;
		return;
	}
	switch (m.type) {
	case OUCH_ACCEPTED:
	case OUCH_REJECTED:
		i = index_of(s, m.type == OUCH_ACCEPTED ? m.u.accepted.token : m.u.rejected.token);
		if (i < 0 || (s->tok[i].flags & (T_ANSWERED | T_REPLACEMENT))) {
			C.unexpected++;
			return;
		}
		t = &s->tok[i];
		t->flags |= T_ANSWERED;
		answered(s, t->flags & T_WARM, H_ACCEPTED, t->planned, now);
		if (m.type == OUCH_REJECTED) {
			C.rejected++;
			token_dies(s, (uint32_t)i, now);
			return;
		}
		C.accepted++;
		t->open = m.u.accepted.shares;
		if (!(t->flags & T_IOC) && m.u.accepted.state == OUCH_STATE_LIVE)
			live_add(s, (uint32_t)i);
		return;
	case OUCH_REPLACED:
		i = index_of(s, m.u.replaced.replacement_token);
		o = index_of(s, m.u.replaced.previous_token);
		if (i < 0 || !(s->tok[i].flags & T_REPLACEMENT) || (s->tok[i].flags & T_ANSWERED)) {
			C.unexpected++;
			return;
		}
		t = &s->tok[i];
		t->flags |= T_ANSWERED;
		C.replaced++;
		answered(s, t->flags & T_WARM, H_REPLACED, t->planned, now);
		if (o >= 0) {
			s->tok[o].flags &= (uint16_t)~T_REPL_SENT;
			s->tok[o].flags |= T_DEAD;
			live_remove(s, (uint32_t)o);
		}
		t->open = m.u.replaced.shares;
		if (m.u.replaced.state == OUCH_STATE_LIVE)
			live_add(s, (uint32_t)i);
		return;
	case OUCH_EXECUTED:
		C.executions++;
		if (matches)
			match_record(s, &m.u.executed);
		if ((i = index_of(s, m.u.executed.token)) < 0)
			return;
		t = &s->tok[i];
		if (m.u.executed.liquidity == OUCH_LIQ_REMOVED && !(t->flags & T_EXEC)) {
			t->flags |= T_EXEC;
			C.aggressor_fills++;
			if (!(t->flags & T_WARM))
				hist_record(&H[H_EXECUTED], now > t->planned ? now - t->planned : 0);
		}
		t->open = t->open > m.u.executed.shares ? t->open - m.u.executed.shares : 0;
		if (t->open == 0)
			token_dies(s, (uint32_t)i, now);
		return;
	case OUCH_CANCELED:
		if ((i = index_of(s, m.u.canceled.token)) < 0)
			return;
		t = &s->tok[i];
		t->open = t->open > m.u.canceled.decrement ? t->open - m.u.canceled.decrement : 0;
		if (m.u.canceled.reason == OUCH_CXL_USER && (t->flags & T_CXL_SENT) &&
		    !(t->flags & T_CXL_DONE)) {
			t->flags |= T_CXL_DONE;
			C.canceled++;
			answered(s, t->flags & T_CXL_WARM, H_CANCELED, t->cxl_planned, now);
			token_dies(s, (uint32_t)i, now); /* the bench cancels whole orders */
			return;
		}
		C.canceled_other++;
		if (t->open == 0 || m.u.canceled.reason != OUCH_CXL_USER)
			token_dies(s, (uint32_t)i, now);
		return;
	case OUCH_CANCEL_REJECT:
		if ((i = index_of(s, m.u.cancel_reject.token)) < 0)
			return;
		t = &s->tok[i];
		if (!(t->flags & T_CXL_SENT) || (t->flags & T_CXL_DONE)) {
			C.unexpected++;
			return;
		}
		t->flags |= T_CXL_DONE;
		C.cancel_rejects++;
		answered(s, t->flags & T_CXL_WARM, H_CANCELED, t->cxl_planned, now);
		return;
	default:
		return;
	}
}

/* ---- sending ---------------------------------------------------------------- */

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
	if (off) {
		memmove(s->tx, s->tx + off, s->txlen - off);
		s->txlen -= off;
		s->last_tx = mono_ns();
	}
	return 0;
}

/* Room for one more order (and its SoupBinTCP header) in the send buffer;
 * when the gateway does not read, orders wait here with their planned time. */
static int can_queue(struct bsession *s)
{
	if (s->lost || s->n_tok >= s->cap_tok)
		return 0;
	if (s->txlen + OUCH_MAX_LEN + 3 > TXBUF)
		flush_tx(s);
	return s->txlen + OUCH_MAX_LEN + 3 <= TXBUF;
}

static void queue_msg(struct bsession *s, const struct ouch_msg *m)
{
	uint8_t msg[OUCH_MAX_LEN];
	int len = ouch_encode_inbound(m, msg, sizeof(msg));

	if (len > 0)
		s->txlen += (size_t)soup_build_unsequenced(s->tx + s->txlen, TXBUF - s->txlen, msg,
							   (uint16_t)len);
}

static uint32_t new_token(struct bsession *s, uint64_t planned, uint16_t flags)
{
	uint32_t i = s->n_tok++;
	struct tok *t = &s->tok[i];

	t->planned = planned;
	t->live = NO_LIVE;
	t->flags = flags | (planned < measure_start ? T_WARM : 0);
	return i;
}

/* Sends the next order of the mix on session s (can_queue() said yes). */
static void send_action(struct bsession *s, uint64_t planned)
{
	uint64_t r = rnd();
	enum mix_kind k = mix_pick(r);
	struct ouch_msg m = { .inbound = 1 };
	int warm = planned < measure_start;

	r >>= 16;
	if ((k == MIX_CANCEL || k == MIX_REPLACE) && s->n_live == 0)
		k = MIX_PASSIVE;
	if (k == MIX_PASSIVE && s->n_live >= opt.depth)
		k = MIX_CANCEL; /* keep the book's depth bounded */
	if (k == MIX_PASSIVE || k == MIX_MARKETABLE) {
		struct ouch_enter_order *o = &m.u.enter;
		int buy = r & 1, ioc = k == MIX_MARKETABLE;
		uint32_t i = new_token(s, planned, (uint16_t)((buy ? T_BUY : 0) | (ioc ? T_IOC : 0)));

		m.type = OUCH_ENTER_ORDER;
		token_of(s, i, o->token);
		o->side = buy ? OUCH_BUY : OUCH_SELL;
		o->shares = lot(r >> 1);
		memcpy(o->stock, symbols[(r >> 8) % n_symbols], symbol_len[(r >> 8) % n_symbols] + 1);
		o->price = ioc ? (buy ? MID_PRICE + 5 * TICK : MID_PRICE - 5 * TICK)
			       : passive_price(buy, r >> 16);
		o->tif = ioc ? OUCH_TIF_IOC : OUCH_TIF_SYSTEM_HOURS;
		o->display = OUCH_DISPLAY_ATTRIBUTABLE;
		o->capacity = OUCH_CAP_AGENCY;
		o->iso = OUCH_ISO_NOT_ELIGIBLE;
		o->cross_type = OUCH_CROSS_NONE;
		o->customer_type = OUCH_CUST_RETAIL;
		C.enters++;
	} else {
		uint32_t j = s->live[(r >> 24) % s->n_live];
		struct tok *t = &s->tok[j];

		live_remove(s, j);
		if (k == MIX_CANCEL) {
			m.type = OUCH_CANCEL_ORDER;
			token_of(s, j, m.u.cancel.token);
			m.u.cancel.shares = 0;
			t->flags |= T_CXL_SENT | (warm ? T_CXL_WARM : 0);
			t->cxl_planned = planned;
			C.cancels++;
		} else {
			struct ouch_replace_order *o = &m.u.replace;
			int buy = t->flags & T_BUY;
			uint32_t n = new_token(s, planned, (uint16_t)(T_REPLACEMENT | (buy ? T_BUY : 0)));

			t = &s->tok[j]; /* (same array: new_token does not move it) */
			m.type = OUCH_REPLACE_ORDER;
			token_of(s, j, o->existing_token);
			token_of(s, n, o->replacement_token);
			o->shares = lot(r);
			o->price = passive_price(buy, r >> 8);
			o->tif = OUCH_TIF_SYSTEM_HOURS;
			o->display = OUCH_DISPLAY_ATTRIBUTABLE;
			o->iso = OUCH_ISO_NOT_ELIGIBLE;
			t->flags |= T_REPL_SENT;
			t->repl = n;
			C.replaces++;
		}
	}
	queue_msg(s, &m);
	s->actions++;
	s->in_flight++;
	if (!warm)
		C.measured_sent++;
}

static int read_session(struct bsession *s, uint64_t now)
{
	for (int rounds = 0; rounds < 8; rounds++) {
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
		if (err != SOUP_E_AGAIN)
			return -1;
		if ((size_t)n < room)
			return 0;
	}
	return 0;
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
	memcpy(l.username, s->user, sizeof(l.username));
	memcpy(l.password, s->pass, sizeof(l.password));
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

/* ---- CPU time of the daemons (/proc/PID/stat) ------------------------------- */

struct proc {
	char name[32];
	pid_t pid;
	double cpu0, cpu1; /* user + system seconds at the start and end of the measurement */
	int gone;
};
static struct proc procs[MAX_PROCS];
static unsigned n_procs;

static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* after "pid (comm) ": state is field 3, utime 14, stime 15 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void proc_add(const char *name, pid_t pid)
{
	if (n_procs == MAX_PROCS || pid <= 0)
		return;
	snprintf(procs[n_procs].name, sizeof(procs[n_procs].name), "%s", name);
	procs[n_procs++].pid = pid;
}

static int proc_cmp(const void *a, const void *b)
{
	return strcmp(((const struct proc *)a)->name, ((const struct proc *)b)->name);
}

/* --pids NAME=PID,... and --cluster DIR (its NODE.pid files, as ops/cluster
 * writes them). */
static int procs_load(void)
{
	if (opt.pids) {
		char buf[1024], *save, *t;

		snprintf(buf, sizeof(buf), "%s", opt.pids);
		for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(t, '=');

			if (eq)
				*eq = '\0';
			proc_add(eq ? t : "pid", (pid_t)atoi(eq ? eq + 1 : t));
		}
	}
	if (opt.cluster_dir) {
		DIR *d = opendir(opt.cluster_dir);
		struct dirent *e;

		if (!d) {
			fprintf(stderr, PROG ": --cluster %s: %s\n", opt.cluster_dir, strerror(errno));
			return -1;
		}
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);
			char path[512], name[64];
			FILE *f;
			int pid;

			if (n < 5 || n > 40 || strcmp(e->d_name + n - 4, ".pid") != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", opt.cluster_dir, e->d_name);
			snprintf(name, sizeof(name), "%.*s", (int)(n - 4), e->d_name);
			if ((f = fopen(path, "r"))) {
				if (fscanf(f, "%d", &pid) == 1)
					proc_add(name, (pid_t)pid);
				fclose(f);
			}
		}
		closedir(d);
	}
	qsort(procs, n_procs, sizeof(procs[0]), proc_cmp);
	return 0;
}

static void procs_sample(int end)
{
	for (unsigned i = 0; i < n_procs; i++) {
		double c = proc_cpu(procs[i].pid);

		if (c < 0)
			procs[i].gone = 1;
		else if (end)
			procs[i].cpu1 = c;
		else
			procs[i].cpu0 = c;
	}
}

static double self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

/* ---- --baseline: a relay with the same hops -------------------------------- */

/* The relay takes SoupBinTCP sessions like a gateway (any login is
 * accepted), puts every OUCH message into MoldUDP64 datagrams to the echo
 * (block: u16 BE client number, then the message), and writes the echo's
 * answers back to each client as sequenced data. The echo answers an Enter
 * with Accepted (an IOC also with a full Executed), a Cancel with Canceled,
 * a Replace with Replaced. Both batch with recvmmsg/sendmmsg, and wait in
 * poll() or, with --spin, spin. */
#define RELAY_CLIENTS 256
#define RELAY_BATCH 64

struct rclient {
	int fd;
	struct soup_parser parser;
	uint8_t rx[1 << 16];
	uint8_t *tx;
	size_t txlen;
};

static void relay_close(struct rclient *c)
{
	close(c->fd);
	c->fd = -1;
}

static int relay_run(int lfd, int ufd, const struct sockaddr_in *echo)
{
	static struct rclient cl[RELAY_CLIENTS];
	static struct pollfd pf[RELAY_CLIENTS + 2];
	struct net_batch out, in;
	struct mold_session sess;
	struct mold_builder b;
	unsigned n_out = 0, n_cl = 0;
	uint64_t seq = 1;
	int building = 0;

	if (net_batch_init(&out, RELAY_BATCH, WIRE_MAX_DATAGRAM) < 0 ||
	    net_batch_init(&in, RELAY_BATCH, WIRE_MAX_DATAGRAM) < 0)
		return 1;
	mold_session_set(&sess, "RELAY");
	for (unsigned i = 0; i < RELAY_CLIENTS; i++)
		cl[i].fd = -1;
	for (;;) {
		unsigned np = 2;

		pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = ufd, .events = POLLIN };
		for (unsigned i = 0; i < n_cl; i++)
			pf[np++] = (struct pollfd){ .fd = cl[i].fd,
						    .events = (short)(POLLIN | (cl[i].txlen ? POLLOUT : 0)) };
		if (poll(pf, np, opt.spin ? 0 : -1) < 0 && errno != EINTR)
			return 1;
		if (pf[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd >= 0 && n_cl < RELAY_CLIENTS) {
				struct rclient *c = &cl[n_cl++];

				net_tcp_tune(fd);
				c->fd = fd;
				c->txlen = 0;
				if (!c->tx && !(c->tx = malloc(TXBUF)))
					return 1;
				soup_parser_init(&c->parser, c->rx, sizeof(c->rx), SOUP_MAX_PAYLOAD,
						 SOUP_FROM_CLIENT);
			} else if (fd >= 0) {
				close(fd);
			}
		}
		/* client -> echo */
		for (unsigned i = 0; i < n_cl; i++) {
			struct rclient *c = &cl[i];
			struct soup_packet p;
			size_t room;
			uint8_t *at;
			ssize_t n;
			int err;

			if (c->fd < 0)
				continue;
			at = soup_parser_space(&c->parser, &room);
			n = recv(c->fd, at, room, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				relay_close(c);
				continue;
			}
			if (n < 0)
				continue;
			soup_parser_feed(&c->parser, (size_t)n);
			while ((err = soup_parser_next(&c->parser, &p)) == SOUP_OK) {
				if (p.type == SOUP_LOGIN_REQUEST) {
					int l = soup_build_login_accepted(c->tx + c->txlen, TXBUF - c->txlen,
									  "BASELINE", 1);
					if (l > 0)
						c->txlen += (size_t)l;
				} else if (p.type == SOUP_UNSEQUENCED_DATA && p.len <= OUCH_MAX_LEN) {
					uint8_t blk[2 + OUCH_MAX_LEN];

					blk[0] = (uint8_t)(i >> 8);
					blk[1] = (uint8_t)i;
					memcpy(blk + 2, p.payload, p.len);
					if (building && mold_build_add(&b, blk, (uint16_t)(p.len + 2)) == 0)
						continue;
					if (building) {
						out.lens[n_out] = mold_build_end(&b);
						out.addrs[n_out++] = *echo;
						if (n_out == out.n) {
							net_batch_send(&out, ufd, n_out);
							n_out = 0;
						}
					}
					mold_build_begin(&b, net_batch_slot(&out, n_out), out.size, &sess, seq);
					mold_build_add(&b, blk, (uint16_t)(p.len + 2));
					seq++;
					building = 1;
				}
			}
			if (err != SOUP_E_AGAIN)
				relay_close(c);
		}
		if (building) {
			out.lens[n_out] = mold_build_end(&b);
			out.addrs[n_out++] = *echo;
			building = 0;
		}
		if (n_out) {
			net_batch_send(&out, ufd, n_out);
			n_out = 0;
		}
		/* echo -> clients */
		for (int got; (got = net_batch_recv(&in, ufd)) > 0;) {
			for (int k = 0; k < got; k++) {
				struct mold_packet mp;
				struct mold_iter it;
				const uint8_t *d;
				uint64_t sq;
				uint16_t len;

				if (mold_parse(net_batch_slot(&in, (unsigned)k), in.lens[k], NULL, 0, &mp) < 0)
					continue;
				mold_iter_init(&it, &mp);
				while (mold_iter_next(&it, &sq, &d, &len)) {
					unsigned ci = (unsigned)(d[0] << 8 | d[1]);
					struct rclient *c = &cl[ci];
					int l;

					if (len < 3 || ci >= n_cl || c->fd < 0)
						continue;
					l = soup_build_sequenced(c->tx + c->txlen, TXBUF - c->txlen, d + 2,
								 (uint16_t)(len - 2));
					if (l > 0)
						c->txlen += (size_t)l;
				}
			}
			if ((unsigned)got < in.n)
				break;
		}
		for (unsigned i = 0; i < n_cl; i++) {
			struct rclient *c = &cl[i];
			size_t off = 0;

			while (c->fd >= 0 && off < c->txlen) {
				ssize_t n = send(c->fd, c->tx + off, c->txlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);

				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (n <= 0) {
					relay_close(c);
					break;
				}
				off += (size_t)n;
			}
			memmove(c->tx, c->tx + off, c->txlen - off);
			c->txlen -= off;
		}
	}
}

static int echo_answer(const uint8_t *in, uint16_t len, uint64_t *match,
		       uint8_t out[2][2 + OUCH_MAX_LEN], uint16_t out_len[2])
{
	struct ouch_msg m, a;
	int n = 0, l;

	if (len < 3 || ouch_decode_inbound(in + 2, (size_t)len - 2, &m) < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	switch (m.type) {
	case OUCH_ENTER_ORDER:
		a.type = OUCH_ACCEPTED;
		memcpy(a.u.accepted.token, m.u.enter.token, sizeof(a.u.accepted.token));
		a.u.accepted.side = m.u.enter.side;
		a.u.accepted.shares = m.u.enter.shares;
		memcpy(a.u.accepted.stock, m.u.enter.stock, sizeof(a.u.accepted.stock));
		a.u.accepted.price = m.u.enter.price;
		a.u.accepted.tif = m.u.enter.tif;
		memcpy(a.u.accepted.firm, m.u.enter.firm, sizeof(a.u.accepted.firm));
		a.u.accepted.display = m.u.enter.display;
		a.u.accepted.order_ref = ++*match;
		a.u.accepted.capacity = m.u.enter.capacity;
		a.u.accepted.iso = m.u.enter.iso;
		a.u.accepted.cross_type = m.u.enter.cross_type;
		a.u.accepted.state = OUCH_STATE_LIVE;
		a.u.accepted.bbo_weight = '0';
		break;
	case OUCH_CANCEL_ORDER:
		a.type = OUCH_CANCELED;
		memcpy(a.u.canceled.token, m.u.cancel.token, sizeof(a.u.canceled.token));
		a.u.canceled.decrement = 100;
		a.u.canceled.reason = OUCH_CXL_USER;
		break;
	case OUCH_REPLACE_ORDER:
		a.type = OUCH_REPLACED;
		memcpy(a.u.replaced.replacement_token, m.u.replace.replacement_token,
		       sizeof(a.u.replaced.replacement_token));
		memcpy(a.u.replaced.previous_token, m.u.replace.existing_token,
		       sizeof(a.u.replaced.previous_token));
		a.u.replaced.side = OUCH_BUY;
		a.u.replaced.shares = m.u.replace.shares;
		memcpy(a.u.replaced.stock, "AAPL", 5);
		a.u.replaced.price = m.u.replace.price;
		a.u.replaced.tif = m.u.replace.tif;
		a.u.replaced.display = m.u.replace.display;
		a.u.replaced.order_ref = ++*match;
		a.u.replaced.capacity = OUCH_CAP_AGENCY;
		a.u.replaced.iso = m.u.replace.iso;
		a.u.replaced.cross_type = OUCH_CROSS_NONE;
		a.u.replaced.state = OUCH_STATE_LIVE;
		a.u.replaced.bbo_weight = '0';
		break;
	default:
		return 0;
	}
	for (;;) {
		l = ouch_encode_outbound(&a, out[n] + 2, OUCH_MAX_LEN);
		if (l < 0)
			return n;
		out[n][0] = in[0];
		out[n][1] = in[1];
		out_len[n++] = (uint16_t)(l + 2);
		if (n == 2 || m.type != OUCH_ENTER_ORDER || m.u.enter.tif != OUCH_TIF_IOC)
			return n;
		/* a marketable order: filled in full, as the aggressor */
		memset(&a, 0, sizeof(a));
		a.type = OUCH_EXECUTED;
		memcpy(a.u.executed.token, m.u.enter.token, sizeof(a.u.executed.token));
		a.u.executed.shares = m.u.enter.shares;
		a.u.executed.price = m.u.enter.price;
		a.u.executed.liquidity = OUCH_LIQ_REMOVED;
		a.u.executed.match = *match;
	}
}

static int echo_run(int ufd)
{
	struct net_batch in, out;
	struct mold_session sess;
	uint64_t seq = 1, match = 0;

	if (net_batch_init(&in, RELAY_BATCH, WIRE_MAX_DATAGRAM) < 0 ||
	    net_batch_init(&out, RELAY_BATCH * 3, WIRE_MAX_DATAGRAM) < 0)
		return 1;
	mold_session_set(&sess, "ECHO");
	for (;;) {
		struct pollfd pf = { .fd = ufd, .events = POLLIN };
		unsigned n_out = 0;
		int got;

		if (poll(&pf, 1, opt.spin ? 0 : -1) < 0 && errno != EINTR)
			return 1;
		while ((got = net_batch_recv(&in, ufd)) > 0) {
			for (int k = 0; k < got; k++) {
				struct mold_packet mp;
				struct mold_builder b;
				struct mold_iter it;
				const uint8_t *d;
				uint64_t sq;
				uint16_t len;

				if (mold_parse(net_batch_slot(&in, (unsigned)k), in.lens[k], NULL, 0, &mp) < 0)
					continue;
				mold_build_begin(&b, net_batch_slot(&out, n_out), out.size, &sess, seq);
				mold_iter_init(&it, &mp);
				while (mold_iter_next(&it, &sq, &d, &len)) {
					uint8_t a[2][2 + OUCH_MAX_LEN];
					uint16_t al[2];
					int na = echo_answer(d, len, &match, a, al);

					for (int j = 0; j < na; j++) {
						if (mold_build_add(&b, a[j], al[j]) == 0) {
							seq++;
							continue;
						}
						out.lens[n_out] = mold_build_end(&b);
						out.addrs[n_out] = in.addrs[k];
						if (++n_out == out.n) {
							net_batch_send(&out, ufd, n_out);
							n_out = 0;
						}
						mold_build_begin(&b, net_batch_slot(&out, n_out), out.size,
								 &sess, seq);
						mold_build_add(&b, a[j], al[j]);
						seq++;
					}
				}
				if (b.count) {
					out.lens[n_out] = mold_build_end(&b);
					out.addrs[n_out] = in.addrs[k];
					if (++n_out == out.n) {
						net_batch_send(&out, ufd, n_out);
						n_out = 0;
					}
				}
			}
			if ((unsigned)got < in.n)
				break;
		}
		if (n_out)
			net_batch_send(&out, ufd, n_out);
	}
}

static int udp_bound(const char *addr, struct sockaddr_in *bound)
{
	struct net_udp_options uo = { .rcvbuf = 8 << 20, .sndbuf = 8 << 20, .nonblock = 1 };
	struct sockaddr_in sa;
	socklen_t sl = sizeof(*bound);
	int fd;

	if (net_parse_addr(addr, &sa) < 0)
		return -EINVAL;
	if ((fd = net_udp_open(&sa, &uo, NULL, NULL)) < 0)
		return fd;
	getsockname(fd, (struct sockaddr *)bound, &sl);
	return fd;
}

static pid_t spawn(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		_exit(fn(arg));
	}
	return pid;
}

struct relay_args {
	int lfd, ufd;
	struct sockaddr_in echo;
};
static int relay_thunk(void *p)
{
	struct relay_args *a = p;

	return relay_run(a->lfd, a->ufd, &a->echo);
}
static int echo_thunk(void *p)
{
	return echo_run(*(int *)p);
}

static pid_t children[MAX_GATEWAYS + 1];
static unsigned n_children;

/* Forks the echo and one relay per gateway of --connect; rewrites
 * opt.connect to the relays' addresses. */
static int baseline_start(unsigned n_gw)
{
	struct sockaddr_in echo_addr, any;
	char list[sizeof(opt.connect)] = "", name[24];
	int efd = udp_bound("127.0.0.1:0", &echo_addr);
	size_t used = 0;
	pid_t pid;

	if (efd < 0)
		return efd;
	pid = spawn(echo_thunk, &efd);
	close(efd);
	if (pid < 0)
		return -errno;
	children[n_children++] = pid;
	proc_add("echo", pid);
	for (unsigned g = 0; g < n_gw; g++) {
		struct relay_args a = { .echo = echo_addr };
		socklen_t sl = sizeof(any);

		net_parse_addr("127.0.0.1:0", &any);
		if ((a.lfd = net_tcp_listen(&any, 128)) < 0)
			return a.lfd;
		if ((a.ufd = udp_bound("127.0.0.1:0", &any)) < 0)
			return a.ufd;
		getsockname(a.lfd, (struct sockaddr *)&any, &sl);
		pid = spawn(relay_thunk, &a);
		close(a.lfd);
		close(a.ufd);
		if (pid < 0)
			return -errno;
		children[n_children++] = pid;
		snprintf(name, sizeof(name), "relay-%u", g + 1);
		proc_add(name, pid);
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s127.0.0.1:%d",
					 g ? "," : "", ntohs(any.sin_port));
	}
	memcpy(opt.connect, list, sizeof(list));
	return 0;
}

static void baseline_stop(void)
{
	for (unsigned i = 0; i < n_children; i++)
		kill(children[i], SIGTERM);
	for (unsigned i = 0; i < n_children; i++)
		waitpid(children[i], NULL, 0);
	n_children = 0;
}

/* ---- reports ---------------------------------------------------------------- */

static void json_hist(FILE *f, const struct hist *h)
{
	fprintf(f,
		"{\"n\": %llu, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"p99.9\": %.1f, "
		"\"p99.99\": %.1f, \"max\": %.1f}",
		(unsigned long long)h->count, hist_percentile(h, 50) / 1e3,
		hist_percentile(h, 90) / 1e3, hist_percentile(h, 99) / 1e3,
		hist_percentile(h, 99.9) / 1e3, hist_percentile(h, 99.99) / 1e3, h->max / 1e3);
}

/* The percentile curve: points at 1 - 10^(-k/10), k = 0..50 (0% to
 * 99.999%), then the max; x is k / 10 (log10 of 1 / (1 - p)). */
#define CURVE_POINTS 51
static double curve_p(int k)
{
	return 100.0 * (1.0 - pow(10.0, -k / 10.0));
}

static void json_curve(FILE *f, const struct hist *h)
{
	fputc('[', f);
	for (int k = 0; k < CURVE_POINTS && h->count; k++) {
		double p = curve_p(k);

		if (k && (1.0 - p / 100.0) * (double)h->count < 1.0)
			break; /* past what this many samples can tell */
		fprintf(f, "%s[%.4f, %.1f]", k ? ", " : "", p, hist_percentile(h, p) / 1e3);
	}
	if (h->count)
		fprintf(f, ", [100, %.1f]", h->max / 1e3);
	fputc(']', f);
}

static void plot_png(const char *png, const char *title)
{
	FILE *g = popen("gnuplot 2>/dev/null", "w");
	int any = 0;

	if (!g) {
		fprintf(stderr, PROG ": --png: cannot run gnuplot\n");
		return;
	}
	for (int h = 0; h < H_N; h++) {
		if (!H[h].count)
			continue;
		fprintf(g, "$%s << EOD\n", h_names[h]);
		for (int k = 0; k < CURVE_POINTS; k++) {
			double p = curve_p(k);

			if (k && (1.0 - p / 100.0) * (double)H[h].count < 1.0)
				break;
			fprintf(g, "%.2f %.3f\n", k / 10.0, hist_percentile(&H[h], p) / 1e3);
		}
		fprintf(g, "EOD\n");
	}
	fprintf(g,
		"set terminal png size 960,600\n"
		"set output '%s'\n"
		"set title \"%s\" noenhanced\n"
		"set xlabel 'percentile'\nset ylabel 'latency (us)'\n"
		"set logscale y\nset grid\nset key top left\n"
		"set xtics ('0%%%%' 0, '90%%%%' 1, '99%%%%' 2, '99.9%%%%' 3, '99.99%%%%' 4, '99.999%%%%' 5)\n"
		"set xrange [0:5]\nplot ",
		png, title);
	for (int h = 0; h < H_N; h++)
		if (H[h].count)
			fprintf(g, "%s$%s using 1:2 with linespoints title '%s'", any++ ? ", " : "",
				h_names[h], h_names[h]);
	fputc('\n', g);
	if (pclose(g) != 0)
		fprintf(stderr, PROG ": --png: gnuplot failed (is gnuplot-nox installed?)\n");
}

/* ---- the load's main loop ------------------------------------------------------ */

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int split(char *text, char **out, unsigned max)
{
	char *save;
	unsigned n = 0;

	for (char *t = strtok_r(text, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return (int)n;
}

static int load_main(void)
{
	static struct pollfd pf[MAX_SESSIONS];
	char connect_list[sizeof(opt.connect)], logins[sizeof(opt.logins)];
	char *gw[MAX_GATEWAYS], *lg[MAX_SESSIONS];
	unsigned n_gw, n_lg;
	uint64_t cap, total = 0, sent = 0;
	int rc = 0, closed_loop = opt.rate <= 0;
	unsigned window = opt.window;

	if (opt.max && !closed_loop) {
		fprintf(stderr, PROG ": --max and --rate exclude each other\n");
		return 2;
	}
	if (opt.max && window == 32)
		window = 256;
	snprintf(connect_list, sizeof(connect_list), "%s", opt.connect);
	n_gw = (unsigned)split(connect_list, gw, MAX_GATEWAYS);
	if (opt.baseline) {
		int r = baseline_start(n_gw);

		if (r < 0) {
			fprintf(stderr, PROG ": --baseline: %s\n", strerror(-r));
			baseline_stop();
			return 1;
		}
		snprintf(connect_list, sizeof(connect_list), "%s", opt.connect);
		n_gw = (unsigned)split(connect_list, gw, MAX_GATEWAYS);
	}
	snprintf(logins, sizeof(logins), "%s", opt.logins);
	n_lg = (unsigned)split(logins, lg, MAX_SESSIONS);
	if (!n_gw || !n_lg) {
		fprintf(stderr, PROG ": need a gateway and a login\n");
		return 2;
	}
	if (procs_load() < 0)
		return 2;
	n_sessions = opt.sessions;
	/* Tokens per session: one per Enter or Replace at most. */
	if (opt.orders)
		cap = opt.orders;
	else if (!closed_loop)
		cap = (uint64_t)(opt.rate * (opt.warmup + opt.duration) / n_sessions) + 16;
	else
		cap = (uint64_t)(3e6 * (opt.warmup + opt.duration) / n_sessions) + 1024;
	if (cap > TOKEN_INDEX_MAX + 1) {
		/* a token holds 6 hex digits of index per session */
		if (opt.orders) {
			fprintf(stderr, PROG ": at most %u orders per session\n", TOKEN_INDEX_MAX + 1);
			return 2;
		}
		cap = TOKEN_INDEX_MAX + 1;
	}
	if (opt.orders)
		total = opt.orders * n_sessions;
	else if (!closed_loop)
		total = (uint64_t)(opt.rate * (opt.warmup + opt.duration));
	S = calloc(n_sessions, sizeof(*S));
	if (!S)
		return 1;
	for (int h = 0; h < H_N; h++)
		hist_init(&H[h]);
	if (opt.check_matches) {
		uint64_t mc = 16;

		while (mc < 2 * cap * n_sessions)
			mc <<= 1;
		if (!(matches = calloc(mc, sizeof(*matches))))
			return 1;
		match_mask = mc - 1;
	}
	/* Tokens are day-unique per login: the run is the millisecond of the
	 * day (base 36, 6 characters; two runs start at least a login apart),
	 * then the session (2), then the index (6 hex digits). */
	uint64_t run = wall_ns() / 1000000ull % 86400000ull;
	static const char b36[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	for (unsigned i = 0; i < n_sessions; i++) {
		struct bsession *s = &S[i];
		char *colon = strchr(lg[i % n_lg], ':');
		int err;

		if (!colon) {
			fprintf(stderr, PROG ": a login is USER:PASSWORD\n");
			return 2;
		}
		snprintf(s->user, sizeof(s->user), "%.*s", (int)(colon - lg[i % n_lg]), lg[i % n_lg]);
		snprintf(s->pass, sizeof(s->pass), "%s", colon + 1);
		for (int k = 5; k >= 0; k--)
			s->prefix[5 - k] = b36[run / ((uint64_t[]){ 1, 36, 1296, 46656, 1679616,
								      60466176 })[k] % 36];
		s->prefix[6] = b36[i / 36 % 36];
		s->prefix[7] = b36[i % 36];
		s->cap_tok = (uint32_t)cap;
		s->tok = calloc(cap, sizeof(*s->tok));
		s->live = calloc(cap, sizeof(*s->live));
		if (!s->tok || !s->live) {
			fprintf(stderr, PROG ": out of memory for %llu tokens\n", (unsigned long long)cap);
			return 1;
		}
		s->gw = i % n_gw;
		if ((err = login(s, gw[s->gw])) < 0) {
			fprintf(stderr, PROG ": session %u (%s at %s): %s%s\n", i, s->user, gw[s->gw],
				strerror(-err),
				err == -EACCES ? " (one session per login: give --logins)" : "");
			baseline_stop();
			return 1;
		}
	}
	prctl(PR_SET_TIMERSLACK, 1000UL);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	uint64_t start = mono_ns(), now = start, deadline = 0, stop_sending;
	double interval = closed_loop ? 0 : 1e9 / opt.rate;
	int sampled = 0;
	double cpu_self0 = 0;

	measure_start = start + (uint64_t)(opt.warmup * 1e9);
	stop_sending = opt.duration > 0 ? measure_start + (uint64_t)(opt.duration * 1e9) : UINT64_MAX;
	if (opt.warmup <= 0) {
		procs_sample(0);
		cpu_self0 = self_cpu();
		sampled = 1;
	}
	for (;;) {
		int sending = !interrupted && !aborted && (total ? sent < total : now < stop_sending);
		int64_t wait_ns = 100000000;

		if (!sampled && now >= measure_start) {
			procs_sample(0);
			cpu_self0 = self_cpu();
			sampled = 1;
		}
		if (sending) {
			if (!closed_loop) { /* open loop: everything planned up to now goes */
				while (sent < total) {
					uint64_t planned = start + (uint64_t)((double)sent * interval);
					struct bsession *s = &S[sent % n_sessions];

					if (planned > now) {
						wait_ns = (int64_t)(planned - now);
						break;
					}
					if (!can_queue(s))
						break; /* the gateway is not reading: stalls count */
					send_action(s, planned);
					sent++;
				}
			} else {
				for (unsigned i = 0; i < n_sessions; i++) {
					struct bsession *s = &S[i];

					while ((!opt.orders || s->actions < opt.orders) && s->in_flight < window &&
					       now < stop_sending && can_queue(s)) {
						send_action(s, now);
						sent++;
					}
				}
				if (opt.orders && sent == total)
					sending = 0;
			}
		}
		if (!sending && !deadline)
			deadline = now + (uint64_t)(opt.timeout * 1e9);
		for (unsigned i = 0; i < n_sessions; i++) {
			struct bsession *s = &S[i];

			if (s->txlen && !s->lost && flush_tx(s) < 0) {
				fprintf(stderr, PROG ": session %u lost\n", i);
				s->lost = aborted = 1;
			}
			if (now - s->last_tx > 1000000000ull && !s->lost && s->txlen + 8 <= TXBUF) {
				s->txlen += (size_t)soup_build_client_heartbeat(s->tx + s->txlen, 8);
				flush_tx(s);
			}
			pf[i].fd = s->lost ? -1 : s->fd;
			pf[i].events = (short)(POLLIN | (s->txlen ? POLLOUT : 0));
			pf[i].revents = 0;
		}
		{
			struct timespec ts = { 0, 0 };

			if (wait_ns > 0) {
				ts.tv_sec = wait_ns / 1000000000;
				ts.tv_nsec = wait_ns % 1000000000;
			}
			ppoll(pf, n_sessions, &ts, NULL);
		}
		now = mono_ns();
		uint64_t in_flight = 0;
		for (unsigned i = 0; i < n_sessions; i++) {
			struct bsession *s = &S[i];

			if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) && read_session(s, now) < 0) {
				fprintf(stderr, PROG ": session %u closed by the gateway\n", i);
				s->lost = aborted = 1;
			}
			in_flight += s->in_flight;
		}
		if (!sending && in_flight == 0 && match_open == 0)
			break;
		if (deadline && now >= deadline)
			break;
		if (interrupted && !deadline)
			deadline = now + 1000000000ull;
	}
	procs_sample(1);
	double cpu_self = self_cpu() - cpu_self0;
	uint64_t end = C.last_answer > measure_start ? C.last_answer : now;
	double secs = (double)(end - measure_start) / 1e9;
	double wall = (double)(mono_ns() - measure_start) / 1e9;
	double achieved = secs > 0 ? (double)C.measured_answered / secs : 0;
	uint64_t in_flight = 0;
	for (unsigned i = 0; i < n_sessions; i++)
		in_flight += S[i].in_flight;
	uint64_t ans_enter = C.accepted + C.rejected;
	uint64_t ans_cxl = C.canceled + C.cancel_rejects, ans_repl = C.replaced + C.replace_dead;

	printf("orders:      %llu sent, %llu answered (%llu rejected), %llu unanswered\n",
	       (unsigned long long)C.enters, (unsigned long long)ans_enter,
	       (unsigned long long)C.rejected, (unsigned long long)(C.enters - ans_enter));
	printf("cancels:     %llu sent, %llu answered (%llu Cancel Reject), %llu unanswered\n",
	       (unsigned long long)C.cancels, (unsigned long long)ans_cxl,
	       (unsigned long long)C.cancel_rejects, (unsigned long long)(C.cancels - ans_cxl));
	printf("replaces:    %llu sent, %llu answered (%llu on orders that had left the book), "
	       "%llu unanswered\n",
	       (unsigned long long)C.replaces, (unsigned long long)ans_repl,
	       (unsigned long long)C.replace_dead, (unsigned long long)(C.replaces - ans_repl));
	printf("executions:  %llu Executed messages, %llu other cancels (IOC rest, self-match)\n",
	       (unsigned long long)C.executions, (unsigned long long)C.canceled_other);
	if (C.undecodable || C.unexpected)
		printf("unexpected:  %llu undecodable messages, %llu answers to nothing pending\n",
		       (unsigned long long)C.undecodable, (unsigned long long)C.unexpected);
	if (closed_loop)
		printf("throughput:  offered closed loop (%u in flight per session%s), achieved %.0f "
		       "orders/s over %.2f s",
		       window, opt.max ? ", --max" : "", achieved, secs);
	else
		printf("throughput:  offered %.0f orders/s open loop, achieved %.0f orders/s over %.2f s",
		       opt.rate, achieved, secs);
	printf(" (%u sessions, %u %s%s)\n", n_sessions, n_gw,
	       opt.baseline ? "relays" : "gateways", opt.warmup > 0 ? ", after the warm-up" : "");
	printf("mix:        ");
	for (int k = 0; k < MIX_N; k++)
		printf(" %s %u", mix_names[k], opt.mix[k]);
	printf(" (weights); at most %u resting per session\n", opt.depth);
	for (int h = 0; h < H_N; h++)
		if (H[h].count || h == H_ACCEPTED)
			hist_print(&H[h], stdout, h_labels[h], 1000.0);
	printf("cpu:        ");
	for (unsigned i = 0; i < n_procs; i++)
		printf(" %s %.2f s (%.0f%%)%s", procs[i].name, procs[i].cpu1 - procs[i].cpu0,
		       100 * (procs[i].cpu1 - procs[i].cpu0) / (wall > 0 ? wall : 1),
		       procs[i].gone ? " (exited)" : "");
	printf(" bench %.2f s (%.0f%%)\n", cpu_self, 100 * cpu_self / (wall > 0 ? wall : 1));

	if (opt.json) {
		FILE *f = fopen(opt.json, "w");

		if (!f) {
			fprintf(stderr, PROG ": %s: %s\n", opt.json, strerror(errno));
			rc = 1;
		} else {
			fprintf(f,
				"{\"target\": \"%s\", \"mode\": \"%s\", \"sessions\": %u, \"gateways\": %u, "
				"\"offered_per_s\": %.0f, \"window\": %u, \"achieved_per_s\": %.0f, "
				"\"seconds\": %.3f, \"warmup\": %.3f, \"seed\": %llu,\n",
				opt.baseline ? "baseline" : "lockstep",
				opt.max ? "max" : closed_loop ? "closed" : "open", n_sessions, n_gw,
				closed_loop ? 0 : opt.rate, closed_loop ? window : 0, achieved, secs,
				opt.warmup, (unsigned long long)opt.seed);
			fprintf(f,
				" \"sent\": {\"enter\": %llu, \"cancel\": %llu, \"replace\": %llu}, "
				"\"unanswered\": %llu, \"rejected\": %llu, \"cancel_rejects\": %llu, "
				"\"replace_dead\": %llu, \"executions\": %llu,\n",
				(unsigned long long)C.enters, (unsigned long long)C.cancels,
				(unsigned long long)C.replaces, (unsigned long long)in_flight,
				(unsigned long long)C.rejected, (unsigned long long)C.cancel_rejects,
				(unsigned long long)C.replace_dead, (unsigned long long)C.executions);
			/* the first version's keys, kept */
			fprintf(f,
				" \"orders\": %llu, \"answered\": %llu, \"cancels\": %llu, "
				"\"cancels_unanswered\": %llu, \"orders_per_s\": %.0f, \"accept_us\": ",
				(unsigned long long)C.enters, (unsigned long long)ans_enter,
				(unsigned long long)C.cancels, (unsigned long long)(C.cancels - ans_cxl),
				achieved);
			json_hist(f, &H[H_ACCEPTED]);
			fprintf(f, ",\n \"latency_us\": {");
			for (int h = 0; h < H_N; h++) {
				fprintf(f, "%s\"%s\": ", h ? ", " : "", h_names[h]);
				json_hist(f, &H[h]);
			}
			fprintf(f, "},\n \"curve_us\": {");
			for (int h = 0; h < H_N; h++) {
				fprintf(f, "%s\"%s\": ", h ? ", " : "", h_names[h]);
				json_curve(f, &H[h]);
			}
			fprintf(f, "},\n \"mix\": {");
			for (int k = 0; k < MIX_N; k++)
				fprintf(f, "%s\"%s\": %u", k ? ", " : "", mix_names[k], opt.mix[k]);
			fprintf(f, "},\n \"cpu_s\": {");
			for (unsigned i = 0; i < n_procs; i++)
				fprintf(f, "\"%s\": %.3f, ", procs[i].name, procs[i].cpu1 - procs[i].cpu0);
			fprintf(f, "\"bench\": %.3f}, \"wall_s\": %.3f}\n", cpu_self, wall);
			fclose(f);
		}
	}
	if (opt.png) {
		char title[160];

		snprintf(title, sizeof(title), "%s: %s %.0f orders/s, %u sessions",
			 opt.baseline ? "baseline relay" : "lockstep",
			 closed_loop ? "closed loop, achieved" : "open loop", closed_loop ? achieved : opt.rate,
			 n_sessions);
		plot_png(opt.png, title);
	}
	if (matches) {
		uint64_t pairs = 0, one_sided = 0, bad = 0;

		for (uint64_t h = 0; h <= match_mask; h++) {
			const struct match_slot *m = &matches[h];

			if (!m->match)
				continue;
			if (m->bad)
				bad++;
			else if (m->seen != 15)
				one_sided++;
			else
				pairs++;
		}
		printf("matches:     %llu with both sides agreeing, %llu with one side only, "
		       "%llu disagreeing or doubled\n",
		       (unsigned long long)pairs, (unsigned long long)one_sided,
		       (unsigned long long)bad);
		if (one_sided + bad)
			rc = 1;
	}
	baseline_stop();
	if (in_flight || C.undecodable || aborted)
		rc = 1;
	for (unsigned i = 0; i < n_sessions; i++)
		if (S[i].n_tok >= S[i].cap_tok && !interrupted && total == 0)
			fprintf(stderr, PROG ": session %u ran out of tokens (%u): the run was cut short\n", i,
				S[i].cap_tok);
	return rc;
}

/* ---- --component codecs ------------------------------------------------------- */

static volatile uint64_t sink;

struct codec_result {
	const char *name;
	double ns;
};
static struct codec_result codec_results[16];
static unsigned n_codec_results;

static void codec_report(const char *name, uint64_t t0, uint64_t n)
{
	double ns = (double)(mono_ns() - t0) / (double)n;

	printf("codec %-24s %8.1f ns/message  (%.1f M/s)\n", name, ns, 1e3 / ns);
	if (n_codec_results < 16)
		codec_results[n_codec_results++] = (struct codec_result){ name, ns };
}

static void sample_enter(struct ouch_enter_order *o, uint32_t i)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->token, sizeof(o->token), "BENCH0%08X", i);
	o->side = OUCH_BUY;
	o->shares = 300;
	memcpy(o->stock, "AAPL", 5);
	o->price = MID_PRICE - TICK;
	o->tif = OUCH_TIF_SYSTEM_HOURS;
	memcpy(o->firm, "FRMA", 5);
	o->display = OUCH_DISPLAY_ATTRIBUTABLE;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = OUCH_ISO_NOT_ELIGIBLE;
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = OUCH_CUST_RETAIL;
}

/* The Command a gateway packs for an Enter. */
static size_t pack_enter_command(const struct ouch_enter_order *e, const char *user,
				 const char *firm, uint8_t *out)
{
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__NewOrder no = LOCKSTEP__NEW_ORDER__INIT;

	no.token = (char *)e->token;
	no.side = (uint8_t)e->side;
	no.shares = e->shares;
	no.symbol = (char *)e->stock;
	no.price = e->price;
	no.tif = e->tif;
	no.firm = (char *)e->firm;
	no.display = (uint8_t)e->display;
	no.capacity = (uint8_t)e->capacity;
	no.min_qty = e->min_qty;
	no.iso = (uint8_t)e->iso;
	no.cross_type = (uint8_t)e->cross_type;
	no.customer_type = (uint8_t)e->customer_type;
	c.user = (char *)user;
	c.firm = (char *)firm;
	c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
	c.new_order = &no;
	return lockstep__command__pack(&c, out);
}

static int component_codecs(uint64_t n)
{
	static uint8_t buf[1 << 20];
	struct ouch_msg m = { .type = OUCH_ENTER_ORDER, .inbound = 1 }, d;
	struct ouch_msg acc = { .type = OUCH_ACCEPTED };
	uint8_t msg[OUCH_MAX_LEN], cmd[256], ev[512];
	struct mold_session sess;
	struct mold_builder b;
	struct mold_packet mp;
	struct tape_event_view v;
	struct arena arena;
	size_t cmd_len, ev_len, pkt_len, stream_len = 0;
	uint64_t t0, acc_sum = 0, blocks_per_pkt = 0;
	int len;

	sample_enter(&m.u.enter, 1);
	len = ouch_encode_inbound(&m, msg, sizeof(msg));
	memset(&acc.u.accepted, 0, sizeof(acc.u.accepted));
	memcpy(acc.u.accepted.token, m.u.enter.token, sizeof(acc.u.accepted.token));
	acc.u.accepted.side = OUCH_BUY;
	acc.u.accepted.shares = 300;
	memcpy(acc.u.accepted.stock, "AAPL", 5);
	acc.u.accepted.price = MID_PRICE - TICK;
	acc.u.accepted.tif = OUCH_TIF_SYSTEM_HOURS;
	memcpy(acc.u.accepted.firm, "FRMA", 5);
	acc.u.accepted.display = 'A';
	acc.u.accepted.capacity = 'A';
	acc.u.accepted.iso = 'N';
	acc.u.accepted.cross_type = 'N';
	acc.u.accepted.state = 'L';
	acc.u.accepted.bbo_weight = '0';
	cmd_len = pack_enter_command(&m.u.enter, "TRADR1", "FRMA", cmd);
	ev_len = tape_event_encode(ev, sizeof(ev), 1, 12345678, 1700000000000000000ull, "gw-1",
				   12345, 12345678, cmd, cmd_len);
	if (arena_init(&arena, 1 << 16) < 0)
		return 1;

	/* MoldUDP64: a tape datagram of events, parsed and walked */
	mold_session_set(&sess, "TAPE");
	mold_build_begin(&b, buf, WIRE_MAX_DATAGRAM, &sess, 1000);
	while (mold_build_add(&b, ev, (uint16_t)ev_len) == 0)
		blocks_per_pkt++;
	pkt_len = mold_build_end(&b);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n / blocks_per_pkt; i++) {
		struct mold_iter it;
		const uint8_t *data;
		uint64_t seq;
		uint16_t l;

		if (mold_parse(buf, pkt_len, &sess, 0, &mp) == 0) {
			mold_iter_init(&it, &mp);
			while (mold_iter_next(&it, &seq, &data, &l))
				acc_sum += l;
		}
	}
	codec_report("moldudp64_parse+iter", t0, n / blocks_per_pkt * blocks_per_pkt);

	/* SoupBinTCP: a client's stream of Enter Orders, parsed */
	while (stream_len + (size_t)len + 3 <= sizeof(buf))
		stream_len += (size_t)soup_build_unsequenced(buf + stream_len, sizeof(buf) - stream_len,
							     msg, (uint16_t)len);
	{
		static uint8_t pbuf[1 << 17];
		struct soup_parser p;
		struct soup_packet pk;
		uint64_t packets = 0;

		t0 = mono_ns();
		while (packets < n) {
			size_t off = 0;

			soup_parser_init(&p, pbuf, sizeof(pbuf), SOUP_MAX_PAYLOAD, SOUP_FROM_CLIENT);
			while (off < stream_len) {
				size_t room, k;
				uint8_t *at = soup_parser_space(&p, &room);

				k = stream_len - off < room ? stream_len - off : room;
				if (k > 65536)
					k = 65536; /* a recv's worth */
				memcpy(at, buf + off, k);
				soup_parser_feed(&p, k);
				off += k;
				while (soup_parser_next(&p, &pk) == SOUP_OK) {
					acc_sum += pk.len;
					packets++;
				}
			}
		}
		codec_report("soupbintcp_parse", t0, packets);
	}

	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		msg[1 + (i & 7)] = (uint8_t)('A' + (i & 15)); /* the token varies */
		if (ouch_decode_inbound(msg, (size_t)len, &d) == 0)
			acc_sum += d.u.enter.shares;
	}
	codec_report("ouch_decode(Enter)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		acc.u.accepted.order_ref = i;
		acc_sum += (uint64_t)ouch_encode_outbound(&acc, buf, OUCH_MAX_LEN);
	}
	codec_report("ouch_encode(Accepted)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		m.u.enter.shares = 100 + (uint32_t)(i & 1023);
		acc_sum += (uint64_t)ouch_encode_inbound(&m, buf, OUCH_MAX_LEN);
	}
	codec_report("ouch_encode(Enter)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++)
		acc_sum += tape_event_encode(buf, 512, 1, i, 1700000000000000000ull + i, "gw-1", i, i, cmd,
					     cmd_len);
	codec_report("tape_event_encode", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++)
		if (tape_event_peek(ev, ev_len, &v) == 0)
			acc_sum += v.body_len + v.seq;
	codec_report("tape_event_peek", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		Lockstep__Command *c = lockstep__command__unpack(&arena.allocator, cmd_len, cmd);

		if (c)
			acc_sum += c->new_order->shares;
		arena_reset(&arena);
	}
	codec_report("command_unpack(arena)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		m.u.enter.shares = 100 + (uint32_t)(i & 1023);
		acc_sum += pack_enter_command(&m.u.enter, "TRADR1", "FRMA", buf);
	}
	codec_report("command_pack", t0, n);
	sink = acc_sum;
	arena_fini(&arena);
	printf("(an Enter is %d bytes of OUCH, %zu of Command, %zu of Event; %llu Events per "
	       "%u-byte tape datagram)\n",
	       len, cmd_len, ev_len, (unsigned long long)blocks_per_pkt, WIRE_MAX_DATAGRAM);
	if (opt.json) {
		FILE *f = fopen(opt.json, "w");

		if (f) {
			fprintf(f, "{\"component\": \"codecs\", \"ns_per_message\": {");
			for (unsigned i = 0; i < n_codec_results; i++)
				fprintf(f, "%s\"%s\": %.2f", i ? ", " : "", codec_results[i].name,
					codec_results[i].ns);
			fprintf(f, "}}\n");
			fclose(f);
		}
	}
	return 0;
}

/* ---- --component matcher: the engine replaying a tape from memory ------------- */

struct tape_mem {
	uint8_t *buf;
	size_t len, cap;
	uint64_t events;
};

static int tape_mem_add(struct tape_mem *t, const uint8_t *ev, size_t len)
{
	if (t->len + len + 4 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1 << 24;
		uint8_t *p = realloc(t->buf, cap);

		if (!p)
			return -ENOMEM;
		t->buf = p;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, &(uint32_t){ (uint32_t)len }, 4);
	memcpy(t->buf + t->len + 4, ev, len);
	t->len += len + 4;
	t->events++;
	return 0;
}

/* A synthetic tape with the load's mix, for three logins on two firms (as
 * ops/cluster's): passive and marketable Enters, Cancels and Replaces of
 * recent orders (some of which have died meanwhile, as in real traffic). */
static int tape_synthesize(struct tape_mem *t, uint64_t n)
{
	static const char *const users[3] = { "TRADR1", "TRADR2", "TRADR3" };
	static const char *const firms[3] = { "FRMA", "FRMB", "FRMA" };
	enum { RECENT = 256 };
	static uint32_t recent[3][RECENT];
	uint32_t next_tok[3] = { 0, 0, 0 };
	uint8_t cmd[256], ev[512];

	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = rnd();
		unsigned u = (unsigned)(r % 3);
		enum mix_kind k = mix_pick(r >> 2);
		Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
		Lockstep__NewOrder no = LOCKSTEP__NEW_ORDER__INIT;
		Lockstep__CancelOrder co = LOCKSTEP__CANCEL_ORDER__INIT;
		Lockstep__ReplaceOrder ro = LOCKSTEP__REPLACE_ORDER__INIT;
		char tok[OUCH_TOKEN_LEN + 1], tok2[OUCH_TOKEN_LEN + 1], sym[OUCH_STOCK_LEN + 1];
		size_t cl, el;
		int buy;

		r >>= 16;
		buy = r & 1;
		if (next_tok[u] < 16 && (k == MIX_CANCEL || k == MIX_REPLACE))
			k = MIX_PASSIVE;
		c.user = (char *)users[u];
		c.firm = (char *)firms[u];
		if (k == MIX_PASSIVE || k == MIX_MARKETABLE) {
			uint32_t id = next_tok[u]++;

			snprintf(tok, sizeof(tok), "SYNTH%u%08X", u, id);
			snprintf(sym, sizeof(sym), "%s", symbols[(r >> 8) % n_symbols]);
			no.token = tok;
			no.side = (uint32_t)(buy ? OUCH_BUY : OUCH_SELL);
			no.shares = lot(r >> 1);
			no.symbol = sym;
			no.price = k == MIX_MARKETABLE ? (buy ? MID_PRICE + 5 * TICK : MID_PRICE - 5 * TICK)
						       : passive_price(buy, r >> 16);
			no.tif = k == MIX_MARKETABLE ? OUCH_TIF_IOC : OUCH_TIF_SYSTEM_HOURS;
			no.firm = (char *)firms[u];
			no.display = OUCH_DISPLAY_ATTRIBUTABLE;
			no.capacity = OUCH_CAP_AGENCY;
			no.iso = OUCH_ISO_NOT_ELIGIBLE;
			no.cross_type = OUCH_CROSS_NONE;
			no.customer_type = OUCH_CUST_RETAIL;
			c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
			c.new_order = &no;
			if (k == MIX_PASSIVE)
				recent[u][id % RECENT] = id;
		} else {
			uint32_t slot = (uint32_t)((r >> 24) % RECENT), id;

			id = recent[u][slot < next_tok[u] ? slot : 0];
			snprintf(tok, sizeof(tok), "SYNTH%u%08X", u, id);
			if (k == MIX_CANCEL) {
				co.token = tok;
				c.body_case = LOCKSTEP__COMMAND__BODY_CANCEL;
				c.cancel = &co;
			} else {
				uint32_t nid = next_tok[u]++;

				snprintf(tok2, sizeof(tok2), "SYNTH%u%08X", u, nid);
				ro.existing_token = tok;
				ro.replacement_token = tok2;
				ro.shares = lot(r);
				ro.price = passive_price(buy, r >> 8);
				ro.tif = OUCH_TIF_SYSTEM_HOURS;
				ro.display = OUCH_DISPLAY_ATTRIBUTABLE;
				ro.iso = OUCH_ISO_NOT_ELIGIBLE;
				c.body_case = LOCKSTEP__COMMAND__BODY_REPLACE;
				c.replace = &ro;
				recent[u][slot] = nid;
			}
		}
		cl = lockstep__command__pack(&c, cmd);
		el = tape_event_encode(ev, sizeof(ev), 1, i + 1, 1700000000000000000ull + i * 1000, "gw-1",
				       i + 1, i + 1, cmd, cl);
		if (!el || tape_mem_add(t, ev, el) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int tape_from_journal(struct tape_mem *t, const char *dir)
{
	struct journal_options o = { .read_only = 1 };
	struct journal_report rep;
	struct journal *j;
	struct journal_iter *it;
	const uint8_t *data;
	uint64_t seq, term;
	size_t len;
	int r;

	if ((r = journal_open(&j, dir, &o, &rep)) < 0)
		return r;
	if (!journal_last_seq(j) || (r = journal_iter_open(&it, j, journal_first_seq(j))) < 0) {
		journal_close(j);
		return r < 0 ? r : -ENOENT;
	}
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1)
		if ((r = tape_mem_add(t, data, len)) < 0)
			break;
	journal_iter_close(it);
	journal_close(j);
	return r < 0 ? r : 0;
}

struct emit_ctx {
	uint8_t block[2 + WIRE_EXEC_HDR_LEN + OUCH_MAX_LEN];
	uint64_t seq, messages, bytes;
};

/* What the matcher does with each outbound message, less the socket: an
 * exec block (header + encoded OUCH). */
static void emit_encode(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct emit_ctx *e = ctx;
	int len = ouch_encode_outbound(msg, e->block + 2 + WIRE_EXEC_HDR_LEN, OUCH_MAX_LEN);

	wire_exec_header(e->block + 2, e->seq, user);
	e->messages++;
	e->bytes += (uint64_t)(len > 0 ? len : 0) + WIRE_EXEC_HDR_LEN;
}

static int component_matcher(void)
{
	struct tape_mem t = { 0 };
	struct engine_config ec = {
		.symbols = symbols, .n_symbols = n_symbols, .max_shares = 1000000,
		.max_orders = 1 << 20, .max_tokens = 1 << 23, .max_levels = 4096,
	};
	struct engine *e = NULL;
	struct engine_stats es;
	struct emit_ctx em = { .seq = 0 };
	struct arena arena;
	uint64_t n = opt.events ? opt.events : 2000000, applied = 0, t0, t1;
	size_t off;
	int r;

	if (opt.journal) {
		r = tape_from_journal(&t, opt.journal);
		if (r < 0) {
			fprintf(stderr, PROG ": --journal %s: %s\n", opt.journal, strerror(-r));
			return 1;
		}
	} else if (tape_synthesize(&t, n) < 0) {
		fprintf(stderr, PROG ": out of memory for %llu events\n", (unsigned long long)n);
		return 1;
	}
	if (t.events >= ec.max_tokens)
		ec.max_tokens = (uint32_t)(t.events + t.events / 2 > (1u << 30) ? 1u << 30
										: t.events + t.events / 2);
	if ((r = engine_create(&e, &ec)) < 0 || arena_init(&arena, 1 << 16) < 0) {
		fprintf(stderr, PROG ": engine: %s\n", strerror(-r));
		return 1;
	}
	t0 = mono_ns();
	for (off = 0; off < t.len;) {
		uint32_t len;
		struct tape_event_view v;
		struct engine_cmd cmd;

		memcpy(&len, t.buf + off, 4);
		if (tape_event_peek(t.buf + off + 4, len, &v) == 0) {
			em.seq = v.seq;
			switch (convert_event(&v, 0, &arena, &cmd)) {
			case CONVERT_APPLY:
				engine_apply(e, v.seq, v.timestamp, &cmd, emit_encode, &em);
				applied++;
				break;
			case CONVERT_TIME:
			case CONVERT_OTHER_PARTITION:
				engine_advance_time(e, v.timestamp, emit_encode, &em);
				break;
			case CONVERT_SKIP:
				break;
			}
		}
		off += 4 + len;
	}
	t1 = mono_ns();
	engine_get_stats(e, &es);
	double secs = (double)(t1 - t0) / 1e9;
	printf("matcher: %llu events (%s), %llu applied in %.3f s: %.0f events/s, %.0f ns/event\n",
	       (unsigned long long)t.events, opt.journal ? opt.journal : "synthetic",
	       (unsigned long long)applied, secs, (double)t.events / secs,
	       (double)(t1 - t0) / (double)t.events);
	printf("matcher: %llu outbound messages (%.0f/s); accepted %llu, replaced %llu, canceled %llu, "
	       "cancel rejects %llu, rejects %llu, matches %llu, open orders %llu; hash %016llx\n",
	       (unsigned long long)em.messages, (double)em.messages / secs,
	       (unsigned long long)es.accepted, (unsigned long long)es.replaced,
	       (unsigned long long)es.canceled, (unsigned long long)es.cancel_rejects,
	       (unsigned long long)es.rejects, (unsigned long long)es.matches,
	       (unsigned long long)es.orders_open, (unsigned long long)engine_hash(e));
	if (opt.json) {
		FILE *f = fopen(opt.json, "w");

		if (f) {
			fprintf(f,
				"{\"component\": \"matcher\", \"events\": %llu, \"seconds\": %.4f, "
				"\"events_per_s\": %.0f, \"ns_per_event\": %.1f, \"messages\": %llu, "
				"\"matches\": %llu, \"hash\": \"%016llx\"}\n",
				(unsigned long long)t.events, secs, (double)t.events / secs,
				(double)(t1 - t0) / (double)t.events, (unsigned long long)em.messages,
				(unsigned long long)es.matches, (unsigned long long)engine_hash(e));
			fclose(f);
		}
	}
	arena_fini(&arena);
	engine_destroy(e);
	free(t.buf);
	return 0;
}

/* ---- --component sequencer: libsequencer in a thread, fed on loopback ---------- */

struct seq_thread {
	struct ev_loop *loop;
	struct sequencer *seq;
	ev_async stop;
};

static void seq_on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	struct seq_thread *st = w->data;

	(void)revents;
	seq_stop(st->seq);
	ev_break(loop, EVBREAK_ALL);
}

static void *seq_thread_main(void *p)
{
	struct seq_thread *st = p;

	ev_run(st->loop, 0);
	return NULL;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int component_sequencer(void)
{
	static struct seq_config cfg;
	const struct config_spec spec = { .keys = seq_config_keys };
	struct seq_thread st = { 0 };
	struct seq_stats ss;
	char dir[] = "/tmp/lockstep-bench-seq.XXXXXX", text[1024], err[256];
	struct sockaddr_in seq_addr, group, probe;
	struct mold_session sess[MAX_GATEWAYS], tape_sess;
	struct net_batch tx, rx;
	struct net_udp_options uo = { .rcvbuf = 32 << 20, .sndbuf = 8 << 20, .nonblock = 1 };
	uint8_t cmd[256];
	size_t cmd_len;
	unsigned streams = opt.streams, per = opt.batch;
	int fds[MAX_GATEWAYS], tape_fd, r, port;
	uint64_t next[MAX_GATEWAYS], sent = 0, top = 0, window = 16384, answered_req = 0;
	pthread_t th;
	clockid_t seq_clock;
	struct ouch_enter_order e;

	if (streams < 1 || streams > MAX_GATEWAYS || opt.datagram < 256 || opt.datagram > 65507) {
		fprintf(stderr, PROG ": --streams 1..%d, --datagram 256..65507\n", MAX_GATEWAYS);
		return 2;
	}
	sample_enter(&e, 7);
	cmd_len = pack_enter_command(&e, "TRADR1", "FRMA", cmd);
	if (!per)
		per = (unsigned)((opt.datagram - MOLD_HEADER_LEN) / (cmd_len + 2));
	if (per < 1 || MOLD_HEADER_LEN + per * (cmd_len + 2) > opt.datagram) {
		fprintf(stderr, PROG ": --batch %u commands of %zu bytes do not fit --datagram %u\n", per,
			cmd_len, opt.datagram);
		return 2;
	}
	if (!mkdtemp(dir))
		return 1;
	/* a free port for the tape's group (the bench's own group, not a cluster's) */
	if ((port = udp_bound("127.0.0.1:0", &probe)) < 0)
		return 1;
	close(port);
	port = ntohs(probe.sin_port);
	snprintf(text, sizeof(text),
		 "[node]\nname = bench-seq\nstate_dir = %s\nlog_level = warning\n"
		 "[sequencer]\nlisten = 127.0.0.1:0\nretrans = 127.0.0.1:0\n"
		 "tape_group = 239.255.77.1:%d\ntape_iface = 127.0.0.1\nmax_datagram = %u\n"
		 "rcvbuf = 32M\nsndbuf = 8M\n",
		 dir, port, opt.datagram);
	if (config_load_buffer(&spec, &cfg, "bench", text, strlen(text), NULL, 0, err, sizeof(err)) <
	    0) {
		fprintf(stderr, PROG ": sequencer config: %s\n", err);
		return 1;
	}
	log_init("bench-sequencer", LOG_LVL_WARNING);
	net_parse_addr("239.255.77.1:0", &group);
	group.sin_port = htons((uint16_t)port);
	if ((tape_fd = net_mcast_recv_open(&group, "127.0.0.1", &uo, NULL)) < 0) {
		fprintf(stderr, PROG ": tape socket: %s\n", strerror(-tape_fd));
		return 1;
	}
	st.loop = ev_loop_new(EVFLAG_AUTO);
	if (!st.loop || (r = seq_open(&st.seq, st.loop, &cfg)) < 0) {
		fprintf(stderr, PROG ": the sequencer did not open\n");
		return 1;
	}
	net_parse_addr("127.0.0.1:0", &seq_addr);
	seq_addr.sin_port = htons((uint16_t)seq_listen_port(st.seq));
	ev_async_init(&st.stop, seq_on_stop);
	st.stop.data = &st;
	ev_async_start(st.loop, &st.stop);
	for (unsigned g = 0; g < streams; g++) {
		char name[16];
		struct sockaddr_in any;

		net_parse_addr("127.0.0.1:0", &any);
		snprintf(name, sizeof(name), "BENCH%u", g + 1);
		mold_session_set(&sess[g], name);
		if ((fds[g] = net_udp_open(&any, &uo, NULL, NULL)) < 0)
			return 1;
		next[g] = 1;
	}
	mold_session_set(&tape_sess, "TAPE");
	if (net_batch_init(&tx, 64, opt.datagram) < 0 || net_batch_init(&rx, 64, 65536) < 0)
		return 1;
	if (pthread_create(&th, NULL, seq_thread_main, &st) != 0)
		return 1;
	pthread_getcpuclockid(th, &seq_clock);

	double duration = opt.duration > 0 ? opt.duration : 3, warmup = opt.warmup;
	uint64_t start = mono_ns(), m0 = start + (uint64_t)(warmup * 1e9);
	uint64_t end = m0 + (uint64_t)(duration * 1e9), now = start, top0 = 0;
	double seq_cpu0 = 0, feed_cpu0 = 0, seq_cpu1, feed_cpu1;
	int measuring = warmup <= 0;
	struct timespec ts;

	if (measuring) {
		clock_gettime(seq_clock, &ts);
		seq_cpu0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		feed_cpu0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	}
	while ((now = mono_ns()) < end && !interrupted) {
		unsigned n = 0;
		int got;

		if (!measuring && now >= m0) {
			measuring = 1;
			top0 = top;
			clock_gettime(seq_clock, &ts);
			seq_cpu0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
			feed_cpu0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
			m0 = now;
		}
		/* the gateways' streams: round robin, a window ahead of the tape */
		while (n < tx.n && sent + per <= top + window) {
			unsigned g = (unsigned)((sent / per) % streams);
			struct mold_builder b;

			mold_build_begin(&b, net_batch_slot(&tx, n), tx.size, &sess[g], next[g]);
			for (unsigned k = 0; k < per; k++)
				mold_build_add(&b, cmd, (uint16_t)cmd_len);
			tx.lens[n] = mold_build_end(&b);
			tx.addrs[n] = seq_addr;
			next[g] += per;
			sent += per;
			/* one sendmmsg per stream socket: a batch holds one stream */
			if (streams > 1) {
				net_batch_send(&tx, fds[g], 1);
				continue;
			}
			n++;
		}
		if (n)
			net_batch_send(&tx, fds[0], n);
		/* the tape: the highest sequence number seen */
		while ((got = net_batch_recv(&rx, tape_fd)) > 0) {
			for (int k = 0; k < got; k++) {
				struct mold_packet mp;

				if (mold_parse(net_batch_slot(&rx, (unsigned)k), rx.lens[k], &tape_sess, 0,
					       &mp) == 0 &&
				    mp.kind == MOLD_DATA && mp.seq + mp.count - 1 > top + 1)
					top = mp.seq + mp.count - 2; /* less the TermStart at seq 1 */
			}
			if ((unsigned)got < rx.n)
				break;
		}
		/* a gap request from the sequencer: answer from the template */
		for (unsigned g = 0; g < streams; g++) {
			uint8_t rq[64];
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t l = recvfrom(fds[g], rq, sizeof(rq), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
			struct mold_request req;

			if (l > 0 && mold_parse_request(rq, (size_t)l, &sess[g], &req) == 0) {
				uint64_t q = req.seq, qend = req.seq + req.count;

				while (q < qend && q < next[g]) {
					struct mold_builder b;
					size_t pl;

					mold_build_begin(&b, net_batch_slot(&tx, 0), tx.size, &sess[g], q);
					for (unsigned k = 0; k < per && q < qend && q < next[g]; k++, q++)
						mold_build_add(&b, cmd, (uint16_t)cmd_len);
					pl = mold_build_end(&b);
					sendto(fds[g], net_batch_slot(&tx, 0), pl, 0, (struct sockaddr *)&from, fl);
				}
				answered_req++;
			}
		}
		if (sent + per > top + window) {
			struct pollfd pf = { .fd = tape_fd, .events = POLLIN };

			poll(&pf, 1, 1);
		}
	}
	now = mono_ns();
	clock_gettime(seq_clock, &ts);
	seq_cpu1 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	feed_cpu1 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	ev_async_send(st.loop, &st.stop);
	pthread_join(th, NULL);
	seq_get_stats(st.seq, &ss);
	seq_close(st.seq);
	ev_loop_destroy(st.loop);
	close(tape_fd);
	for (unsigned g = 0; g < streams; g++)
		close(fds[g]);
	net_batch_fini(&tx);
	net_batch_fini(&rx);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

	double secs = (double)(now - m0) / 1e9, rate = (double)(top - top0) / secs;
	printf("sequencer: %llu events sequenced in %.2f s: %.0f events/s (%u stream%s, %u commands "
	       "of %zu bytes per %u-byte datagram)\n",
	       (unsigned long long)(top - top0), secs, rate, streams, streams > 1 ? "s" : "", per,
	       cmd_len, opt.datagram);
	printf("sequencer: cpu %.2f s (%.0f%%), feeder %.2f s; tape %llu packets (%.1f events each), "
	       "journal %llu MB, gaps %llu, gap requests answered %llu, kernel drops %llu\n",
	       seq_cpu1 - seq_cpu0, 100 * (seq_cpu1 - seq_cpu0) / secs, feed_cpu1 - feed_cpu0,
	       (unsigned long long)ss.tape_packets_sent,
	       ss.tape_packets_sent ? (double)ss.commands_sequenced / (double)ss.tape_packets_sent : 0,
	       (unsigned long long)(ss.journal_bytes >> 20), (unsigned long long)ss.gaps,
	       (unsigned long long)answered_req, (unsigned long long)ss.rxq_dropped);
	if (opt.json) {
		FILE *f = fopen(opt.json, "w");

		if (f) {
			fprintf(f,
				"{\"component\": \"sequencer\", \"events\": %llu, \"seconds\": %.3f, "
				"\"events_per_s\": %.0f, \"streams\": %u, \"per_datagram\": %u, "
				"\"datagram\": %u, \"cpu_s\": %.3f, \"tape_packets\": %llu, \"gaps\": %llu}\n",
				(unsigned long long)(top - top0), secs, rate, streams, per, opt.datagram,
				seq_cpu1 - seq_cpu0, (unsigned long long)ss.tape_packets_sent,
				(unsigned long long)ss.gaps);
			fclose(f);
		}
	}
	return 0;
}

/* ---- main --------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fputs("Usage: lockstep-bench [OPTIONS]                      load a running cluster\n"
	      "       lockstep-bench --baseline [OPTIONS]           the same load through a relay\n"
	      "       lockstep-bench --component codecs|matcher|sequencer|all [OPTIONS]\n"
	      "       lockstep-bench --relay LISTEN --to ECHO | --echo LISTEN [--spin]\n"
	      "\n"
	      "Sends orders (Enter, Cancel and Replace: each one order here, one command on\n"
	      "the tape) through running lockstep gateways as real OUCH sessions, and reports\n"
	      "the latency from each order's planned send time to its answer, per outcome\n"
	      "(Accepted, Executed, Canceled, Replaced), the throughput offered and achieved,\n"
	      "the CPU time of each daemon, and every order without an answer (must be none).\n"
	      "\n"
	      "Load:\n"
	      "  -c, --connect H:P[,H:P]  gateways; sessions are spread over them\n"
	      "                           (default 127.0.0.1:15000)\n"
	      "  -l, --logins U:P,...     logins, one per session, reused round robin\n"
	      "                           (default TRADR1:pw1,TRADR2:pw2,TRADR3:pw3)\n"
	      "  -s, --sessions N         sessions (default 2)\n"
	      "  -r, --rate R             open loop: R orders/s over all sessions\n"
	      "  -w, --window W           closed loop: W orders in flight per session\n"
	      "                           (the default, W = 32, without --rate)\n"
	      "      --max                flat out: closed loop, W = 256 unless given\n"
	      "  -n, --orders N           orders per session (default 10000 without --duration)\n"
	      "  -d, --duration S         measure for S seconds (instead of --orders)\n"
	      "      --warmup S           load for S seconds first, not measured\n"
	      "      --mix P:M:C:R        weights of passive limit orders, marketable (IOC)\n"
	      "                           orders, cancels and replaces (default 48:12:25:15)\n"
	      "      --depth N            resting orders per session at most (default 200):\n"
	      "                           past it a cancel is sent instead of a passive order\n"
	      "      --symbols A,B,...    symbols (default AAPL,MSFT,AMZN,GOOG)\n"
	      "      --seed S             the order mix's seed (default 1)\n"
	      "  -t, --timeout S          wait for answers S s after the last order (default 10)\n"
	      "  -m, --check-matches      both sides of every match must be answered once each,\n"
	      "                           with the same shares and price (bench only trader)\n"
	      "      --cluster DIR        report the CPU time of the daemons whose DIR/*.pid\n"
	      "                           ops/cluster wrote\n"
	      "      --pids NAME=PID,...  ... or of these processes\n"
	      "      --baseline           run the load through relays forked here (one per\n"
	      "                           --connect address) and an echo instead of a cluster\n"
	      "      --spin               the relays and the echo spin instead of sleeping\n"
	      "                           (a core each; the daemons sleep in epoll)\n"
	      "  -j, --json FILE          also write the results as JSON\n"
	      "      --png FILE           and the latency percentile curves (gnuplot)\n"
	      "  -q, --quiet              (accepted for compatibility; the report is short)\n"
	      "\n"
	      "Components (--component; --json and --seed as above):\n"
	      "  codecs                   ns per message of each codec (--events N, default 2M)\n"
	      "  matcher                  the engine replaying a synthetic tape of --events N\n"
	      "                           (default 2M) events of the --mix, or --journal DIR\n"
	      "  sequencer                libsequencer in a thread fed by --streams K synthetic\n"
	      "                           gateway streams of --batch B commands per datagram of\n"
	      "                           --datagram BYTES (default: as many as fit in 1472)\n"
	      "                           for --duration S (default 3)\n"
	      "  all                      the three\n"
	      "\n"
	      "  -h, --help               this text\n"
	      "\n"
	      "Exit status: 0 when every order was answered (and, with --check-matches, both\n"
	      "sides of every match agree), 1 otherwise, 2 usage.\n",
	      f);
}

enum {
	O_MAX = 256, O_DURATION, O_WARMUP, O_MIX, O_DEPTH, O_CLUSTER, O_PIDS, O_BASELINE, O_SPIN,
	O_PNG, O_COMPONENT, O_JOURNAL, O_EVENTS, O_BATCH, O_STREAMS, O_DATAGRAM, O_RELAY, O_TO,
	O_ECHO,
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'c' }, { "logins", required_argument, NULL, 'l' },
		{ "sessions", required_argument, NULL, 's' }, { "orders", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' }, { "window", required_argument, NULL, 'w' },
		{ "symbols", required_argument, NULL, 'S' }, { "seed", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' }, { "json", required_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' }, { "help", no_argument, NULL, 'h' },
		{ "check-matches", no_argument, NULL, 'm' }, { "duration", required_argument, NULL, 'd' },
		{ "max", no_argument, NULL, O_MAX }, { "warmup", required_argument, NULL, O_WARMUP },
		{ "mix", required_argument, NULL, O_MIX }, { "depth", required_argument, NULL, O_DEPTH },
		{ "cluster", required_argument, NULL, O_CLUSTER },
		{ "pids", required_argument, NULL, O_PIDS }, { "baseline", no_argument, NULL, O_BASELINE },
		{ "spin", no_argument, NULL, O_SPIN }, { "png", required_argument, NULL, O_PNG },
		{ "component", required_argument, NULL, O_COMPONENT },
		{ "journal", required_argument, NULL, O_JOURNAL },
		{ "events", required_argument, NULL, O_EVENTS },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "streams", required_argument, NULL, O_STREAMS },
		{ "datagram", required_argument, NULL, O_DATAGRAM },
		{ "relay", required_argument, NULL, O_RELAY }, { "to", required_argument, NULL, O_TO },
		{ "echo", required_argument, NULL, O_ECHO },
		{ NULL, 0, NULL, 0 },
	};
	const char *relay = NULL, *to = NULL, *echo = NULL;
	char syms[sizeof(opt.symbols_text)];
	int c, orders_given = 0;

	while ((c = getopt_long(argc, argv, "c:l:s:n:r:w:t:j:qhmd:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': snprintf(opt.connect, sizeof(opt.connect), "%s", optarg); break;
		case 'l': snprintf(opt.logins, sizeof(opt.logins), "%s", optarg); break;
		case 's': opt.sessions = (unsigned)atoi(optarg); break;
		case 'n': opt.orders = strtoull(optarg, NULL, 10); orders_given = 1; break;
		case 'r': opt.rate = atof(optarg); break;
		case 'w': opt.window = (unsigned)atoi(optarg); break;
		case 'S': snprintf(opt.symbols_text, sizeof(opt.symbols_text), "%s", optarg); break;
		case 'e': opt.seed = strtoull(optarg, NULL, 10); break;
		case 't': opt.timeout = atof(optarg); break;
		case 'j': opt.json = optarg; break;
		case 'q': opt.quiet = 1; break;
		case 'm': opt.check_matches = 1; break;
		case 'd': opt.duration = atof(optarg); break;
		case O_MAX: opt.max = 1; break;
		case O_WARMUP: opt.warmup = atof(optarg); break;
		case O_MIX:
			if (sscanf(optarg, "%u:%u:%u:%u", &opt.mix[0], &opt.mix[1], &opt.mix[2],
				   &opt.mix[3]) != 4 ||
			    opt.mix[0] + opt.mix[1] + opt.mix[2] + opt.mix[3] == 0 ||
			    opt.mix[0] + opt.mix[1] == 0) {
				fprintf(stderr, PROG ": --mix P:M:C:R, four weights, some orders new\n");
				return 2;
			}
			break;
		case O_DEPTH: opt.depth = (unsigned)atoi(optarg); break;
		case O_CLUSTER: opt.cluster_dir = optarg; break;
		case O_PIDS: opt.pids = optarg; break;
		case O_BASELINE: opt.baseline = 1; break;
		case O_SPIN: opt.spin = 1; break;
		case O_PNG: opt.png = optarg; break;
		case O_COMPONENT: opt.component = optarg; break;
		case O_JOURNAL: opt.journal = optarg; break;
		case O_EVENTS: opt.events = strtoull(optarg, NULL, 10); break;
		case O_BATCH: opt.batch = (unsigned)atoi(optarg); break;
		case O_STREAMS: opt.streams = (unsigned)atoi(optarg); break;
		case O_DATAGRAM: opt.datagram = (unsigned)atoi(optarg); break;
		case O_RELAY: relay = optarg; break;
		case O_TO: to = optarg; break;
		case O_ECHO: echo = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument %s\n", argv[optind]);
		return 2;
	}
	rng_state = opt.seed;
	snprintf(syms, sizeof(syms), "%s", opt.symbols_text);
	{
		char *tmp[MAX_SYMBOLS];

		n_symbols = (unsigned)split(syms, tmp, MAX_SYMBOLS);
		for (unsigned i = 0; i < n_symbols; i++) {
			symbols[i] = tmp[i];
			symbol_len[i] = strlen(tmp[i]);
			if (symbol_len[i] > OUCH_STOCK_LEN) {
				fprintf(stderr, PROG ": symbol %s: at most %d characters\n", tmp[i],
					OUCH_STOCK_LEN);
				return 2;
			}
		}
	}
	if (!n_symbols) {
		fprintf(stderr, PROG ": need a symbol\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (relay || echo) {
		struct sockaddr_in a, e;
		int fd, ufd;

		if (echo) {
			if ((ufd = udp_bound(echo, &a)) < 0) {
				fprintf(stderr, PROG ": --echo %s: %s\n", echo, strerror(-ufd));
				return 1;
			}
			return echo_run(ufd);
		}
		if (!to || net_parse_addr(to, &e) < 0 || net_parse_addr(relay, &a) < 0) {
			fprintf(stderr, PROG ": --relay H:P --to ECHO_H:P\n");
			return 2;
		}
		if ((fd = net_tcp_listen(&a, 128)) < 0 || (ufd = udp_bound("127.0.0.1:0", &a)) < 0) {
			fprintf(stderr, PROG ": --relay %s: cannot listen\n", relay);
			return 1;
		}
		return relay_run(fd, ufd, &e);
	}
	if (opt.component) {
		int all = strcmp(opt.component, "all") == 0, rc = 0, any = 0;

		if (all && opt.json) {
			fprintf(stderr, PROG ": --json takes one component, not all\n");
			return 2;
		}
		signal(SIGINT, on_signal);
		if (all || strcmp(opt.component, "codecs") == 0) {
			rc |= component_codecs(opt.events ? opt.events : 2000000);
			any = 1;
		}
		if (all || strcmp(opt.component, "matcher") == 0) {
			rc |= component_matcher();
			any = 1;
		}
		if (all || strcmp(opt.component, "sequencer") == 0) {
			rc |= component_sequencer();
			any = 1;
		}
		if (!any) {
			fprintf(stderr, PROG ": --component codecs, matcher, sequencer or all\n");
			return 2;
		}
		return rc;
	}
	if (opt.sessions < 1 || opt.sessions > MAX_SESSIONS || opt.window < 1 || opt.rate < 0 ||
	    opt.duration < 0 || opt.warmup < 0 || (orders_given && opt.orders < 1)) {
		fprintf(stderr, PROG ": sessions 1..%d, orders >= 1, window >= 1\n", MAX_SESSIONS);
		return 2;
	}
	if (opt.duration > 0 && orders_given) {
		fprintf(stderr, PROG ": --orders or --duration, not both\n");
		return 2;
	}
	if (opt.duration <= 0 && !orders_given)
		opt.orders = 10000;
	return load_main();
}
