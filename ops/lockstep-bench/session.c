/* lockstep-bench: one OUCH session of the load: its tokens, the orders it
 * sends (the mix, into a send buffer that keeps their planned times when the
 * gateway does not read), and the answers it reads back (counted, timed into
 * the latency histograms, checked for both sides of every match, and with
 * --book-out kept as what they say of each order: book.c writes the book). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "bench.h"
#include "clock.h"

#define NO_LIVE UINT32_MAX

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

struct counts counts;
struct flood_counts flood;
const char *const h_names[H_N] = { "accepted", "executed", "canceled", "replaced" };
const char *const h_labels[H_N] = {
	"latency order->Accepted/Rejected (us)", "latency order->Executed (us)",
	"latency cancel->Canceled/CancelReject (us)", "latency replace->Replaced (us)",
};
struct hist hists[H_N];
uint64_t measure_start, measure_start_wall;
uint64_t tl_max_ns[TL_SECONDS];
uint32_t tl_count[TL_SECONDS];
struct match_slot *matches;
uint64_t match_mask, match_open;

/* The token of index i: prefix (8) + the index in 6 hex digits, NUL-terminated. */
static void token_of(const struct bsession *s, uint32_t i, char *tok)
{
	static const char hex[] = "0123456789ABCDEF";

	memcpy(tok, s->prefix, 8);
	for (int k = 13; k >= 8; k--, i >>= 4)
		tok[k] = hex[i & 15];
	tok[OUCH_TOKEN_LEN] = '\0';
}

int64_t session_token_index(const struct bsession *s, const char *tok)
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
	return v;
}

/* The token index of a token this session used, or -1. */
static int64_t index_of(const struct bsession *s, const char *tok)
{
	int64_t v = session_token_index(s, tok);

	return v < s->n_tok ? v : -1;
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
	counts.measured_answered++;
	counts.last_answer = now;
	if (hist >= 0)
		hist_record(&hists[hist], now > planned ? now - planned : 0);
	if (hist == H_ACCEPTED && planned >= measure_start) {
		uint64_t sec = (planned - measure_start) / 1000000000u, lat = now > planned ? now - planned : 0;

		if (sec < TL_SECONDS) {
			tl_count[sec]++;
			if (lat > tl_max_ns[sec])
				tl_max_ns[sec] = lat;
		}
	}
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
			counts.replace_dead++;
			answered(s, n->flags & T_WARM, -1, n->planned, now);
		}
	}
}

/* --check-matches: one side of a match seen (the rules: bench.h). */
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

/* --book-out: what an Accepted or a Replaced said of the order it names. */
static void book_set(struct book_tok *b, char side, const char *stock, uint32_t price,
		     uint32_t tif, char display, uint64_t ref, char state)
{
	b->ref = ref;
	b->price = price;
	memcpy(b->stock, stock, sizeof(b->stock)); /* stock: OUCH_STOCK_LEN + 1, NUL-padded */
	b->side = side;
	b->display = display;
	b->booked = state == OUCH_STATE_LIVE;
	b->ioc = tif == OUCH_TIF_IOC;
}

static void on_accepted(struct bsession *s, const struct ouch_msg *m, uint64_t now)
{
	int64_t i = index_of(s, m->type == OUCH_ACCEPTED ? m->u.accepted.token : m->u.rejected.token);
	struct tok *t;

	if (i < 0 || (s->tok[i].flags & (T_ANSWERED | T_REPLACEMENT))) {
		counts.unexpected++;
		return;
	}
	t = &s->tok[i];
	t->flags |= T_ANSWERED;
	answered(s, t->flags & T_WARM, H_ACCEPTED, t->planned, now);
	if (m->type == OUCH_REJECTED) {
		counts.rejected++;
		token_dies(s, (uint32_t)i, now);
		return;
	}
	counts.accepted++;
	t->open = m->u.accepted.shares;
	if (s->book) {
		const struct ouch_accepted *a = &m->u.accepted;

		book_set(&s->book[i], a->side, a->stock, a->price, a->tif, a->display, a->order_ref,
			 a->state);
	}
	if (!(t->flags & T_IOC) && m->u.accepted.state == OUCH_STATE_LIVE)
		live_add(s, (uint32_t)i);
}

static void on_replaced(struct bsession *s, const struct ouch_replaced *r, uint64_t now)
{
	int64_t i = index_of(s, r->replacement_token), o = index_of(s, r->previous_token);
	struct tok *t;

	if (i < 0 || !(s->tok[i].flags & T_REPLACEMENT) || (s->tok[i].flags & T_ANSWERED)) {
		counts.unexpected++;
		return;
	}
	t = &s->tok[i];
	t->flags |= T_ANSWERED;
	counts.replaced++;
	answered(s, t->flags & T_WARM, H_REPLACED, t->planned, now);
	if (o >= 0) {
		s->tok[o].flags &= (uint16_t)~T_REPL_SENT;
		s->tok[o].flags |= T_DEAD;
		live_remove(s, (uint32_t)o);
	}
	t->open = r->shares;
	if (s->book)
		book_set(&s->book[i], r->side, r->stock, r->price, r->tif, r->display, r->order_ref,
			 r->state);
	if (r->state == OUCH_STATE_LIVE)
		live_add(s, (uint32_t)i);
}

static void on_executed(struct bsession *s, const struct ouch_executed *x, uint64_t now)
{
	int64_t i;
	struct tok *t;

	counts.executions++;
	if (matches)
		match_record(s, x);
	if (s->book) {
		if (x->liquidity == OUCH_LIQ_REMOVED)
			book_shares.removed += x->shares;
		else if (x->liquidity == OUCH_LIQ_ADDED)
			book_shares.added += x->shares;
	}
	if ((i = index_of(s, x->token)) < 0)
		return;
	t = &s->tok[i];
	if (x->liquidity == OUCH_LIQ_REMOVED && !(t->flags & T_EXEC)) {
		t->flags |= T_EXEC;
		counts.aggressor_fills++;
		if (!(t->flags & T_WARM))
			hist_record(&hists[H_EXECUTED], now > t->planned ? now - t->planned : 0);
	}
	t->open = t->open > x->shares ? t->open - x->shares : 0;
	if (t->open == 0)
		token_dies(s, (uint32_t)i, now);
}

static void on_canceled(struct bsession *s, const struct ouch_canceled *c, uint64_t now)
{
	int64_t i;
	struct tok *t;

	if ((i = index_of(s, c->token)) < 0)
		return;
	t = &s->tok[i];
	t->open = t->open > c->decrement ? t->open - c->decrement : 0;
	if (c->reason == OUCH_CXL_USER && (t->flags & T_CXL_SENT) && !(t->flags & T_CXL_DONE)) {
		t->flags |= T_CXL_DONE;
		counts.canceled++;
		answered(s, t->flags & T_CXL_WARM, H_CANCELED, t->cxl_planned, now);
		token_dies(s, (uint32_t)i, now); /* the bench cancels whole orders */
		return;
	}
	counts.canceled_other++;
	if (t->open == 0 || c->reason != OUCH_CXL_USER)
		token_dies(s, (uint32_t)i, now);
}

static void on_cancel_reject(struct bsession *s, const char *token, uint64_t now)
{
	int64_t i;
	struct tok *t;

	if ((i = index_of(s, token)) < 0)
		return;
	t = &s->tok[i];
	if (!(t->flags & T_CXL_SENT) || (t->flags & T_CXL_DONE)) {
		counts.unexpected++;
		return;
	}
	t->flags |= T_CXL_DONE;
	counts.cancel_rejects++;
	answered(s, t->flags & T_CXL_WARM, H_CANCELED, t->cxl_planned, now);
}

/* --book-out: what the flood's answers do to its orders (book.c keeps
 * those that rest). */
static void book_flood(const struct bsession *s, const struct ouch_msg *m)
{
	int64_t i;

	switch (m->type) {
	case OUCH_ACCEPTED:
		if ((i = session_token_index(s, m->u.accepted.token)) >= 0)
			book_flood_accepted((uint32_t)i, &m->u.accepted);
		return;
	case OUCH_EXECUTED:
		if (m->u.executed.liquidity == OUCH_LIQ_REMOVED)
			book_shares.removed += m->u.executed.shares;
		else if (m->u.executed.liquidity == OUCH_LIQ_ADDED)
			book_shares.added += m->u.executed.shares;
		if ((i = session_token_index(s, m->u.executed.token)) >= 0)
			book_flood_reduce((uint32_t)i, m->u.executed.shares, 0);
		return;
	case OUCH_CANCELED:
		if ((i = session_token_index(s, m->u.canceled.token)) >= 0)
			book_flood_reduce((uint32_t)i, m->u.canceled.decrement,
					  m->u.canceled.reason != OUCH_CXL_USER);
		return;
	default:
		return;
	}
}

/* The flood session's answers: counted, not timed. */
static void on_flood_message(const struct bsession *s, const struct ouch_msg *m)
{
	if (m->type == OUCH_ACCEPTED)
		flood.accepted++;
	else if (m->type == OUCH_REJECTED && m->u.rejected.reason == OUCH_REJ_THROTTLED)
		flood.throttled++;
	else if (m->type == OUCH_REJECTED)
		flood.rejected++;
	if (opt.book_out)
		book_flood(s, m);
}

static void on_message(struct bsession *s, const uint8_t *data, size_t len, uint64_t now)
{
	struct ouch_msg m;

	if (ouch_decode_outbound(data, len, &m) < 0) {
		counts.undecodable++;
		return;
	}
	if (s->flood) {
		on_flood_message(s, &m);
		return;
	}
	switch (m.type) {
	case OUCH_ACCEPTED:
	case OUCH_REJECTED:
		on_accepted(s, &m, now);
		return;
	case OUCH_REPLACED:
		on_replaced(s, &m.u.replaced, now);
		return;
	case OUCH_EXECUTED:
		on_executed(s, &m.u.executed, now);
		return;
	case OUCH_CANCELED:
		on_canceled(s, &m.u.canceled, now);
		return;
	case OUCH_CANCEL_REJECT:
		on_cancel_reject(s, m.u.cancel_reject.token, now);
		return;
	default:
		return;
	}
}

void session_book_each(const struct bsession *s,
		       void (*fn)(void *ctx, const struct book_tok *b, uint32_t open), void *ctx)
{
	for (uint32_t i = 0; s->book && i < s->n_tok; i++) {
		const struct tok *t = &s->tok[i];

		if (s->book[i].booked && !(t->flags & T_DEAD) && t->open > 0)
			fn(ctx, &s->book[i], t->open);
	}
}

uint64_t session_book_ioc_open(const struct bsession *s)
{
	uint64_t n = 0;

	for (uint32_t i = 0; s->book && i < s->n_tok; i++) {
		const struct tok *t = &s->tok[i];

		n += s->book[i].booked && s->book[i].ioc && !(t->flags & T_DEAD) && t->open > 0;
	}
	return n;
}

int session_flush(struct bsession *s)
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
int session_can_queue(struct bsession *s)
{
	if (s->lost || (!s->flood && s->n_tok >= s->cap_tok))
		return 0;
	if (s->txlen + OUCH_MAX_LEN + 3 > TXBUF)
		session_flush(s);
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
void session_send(struct bsession *s, uint64_t planned)
{
	uint64_t r = mix_rnd();
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
		o->shares = mix_lot(r >> 1);
		memcpy(o->stock, symbols[(r >> 8) % n_symbols], symbol_len[(r >> 8) % n_symbols] + 1);
		o->price = ioc ? (buy ? MID_PRICE + 5 * TICK : MID_PRICE - 5 * TICK)
			       : mix_passive_price(buy, r >> 16);
		o->tif = ioc ? OUCH_TIF_IOC : OUCH_TIF_SYSTEM_HOURS;
		o->display = OUCH_DISPLAY_ATTRIBUTABLE;
		o->capacity = OUCH_CAP_AGENCY;
		o->iso = OUCH_ISO_NOT_ELIGIBLE;
		o->cross_type = OUCH_CROSS_NONE;
		o->customer_type = OUCH_CUST_RETAIL;
		counts.enters++;
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
			counts.cancels++;
		} else {
			struct ouch_replace_order *o = &m.u.replace;
			int buy = t->flags & T_BUY;
			uint32_t n = new_token(s, planned, (uint16_t)(T_REPLACEMENT | (buy ? T_BUY : 0)));

			t = &s->tok[j]; /* (same array: new_token does not move it) */
			m.type = OUCH_REPLACE_ORDER;
			token_of(s, j, o->existing_token);
			token_of(s, n, o->replacement_token);
			o->shares = mix_lot(r);
			o->price = mix_passive_price(buy, r >> 8);
			o->tif = OUCH_TIF_SYSTEM_HOURS;
			o->display = OUCH_DISPLAY_ATTRIBUTABLE;
			o->iso = OUCH_ISO_NOT_ELIGIBLE;
			t->flags |= T_REPL_SENT;
			t->repl = n;
			counts.replaces++;
		}
	}
	queue_msg(s, &m);
	s->actions++;
	s->in_flight++;
	if (!warm)
		counts.measured_sent++;
}

void session_send_flood(struct bsession *s, uint32_t i)
{
	struct ouch_msg m = { .type = OUCH_ENTER_ORDER, .inbound = 1 };
	struct ouch_enter_order *o = &m.u.enter;

	token_of(s, i & TOKEN_INDEX_MAX, o->token);
	o->side = OUCH_BUY;
	o->shares = 100;
	memcpy(o->stock, symbols[i % n_symbols], symbol_len[i % n_symbols] + 1);
	o->price = MID_PRICE - 100 * TICK; /* a dollar under the book: never fills */
	o->tif = OUCH_TIF_IOC;
	o->display = OUCH_DISPLAY_ATTRIBUTABLE;
	o->capacity = OUCH_CAP_AGENCY;
	o->iso = OUCH_ISO_NOT_ELIGIBLE;
	o->cross_type = OUCH_CROSS_NONE;
	o->customer_type = OUCH_CUST_RETAIL;
	queue_msg(s, &m);
	flood.sent++;
}

int session_read(struct bsession *s, uint64_t now)
{
	for (int rounds = 0; rounds < 8; rounds++) {
		size_t room;
		long n = soup_parser_recv(&s->parser, s->fd, &room);
		struct soup_packet p;
		int err;

		if (n == 0)
			return 0;
		if (n < 0)
			return -1;
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

int session_login(struct bsession *s, const char *addr)
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
		struct pollfd pf = { .fd = s->fd, .events = POLLIN };
		long n;

		poll(&pf, 1, 100);
		n = soup_parser_recv(&s->parser, s->fd, NULL);
		if (n == -ECONNRESET)
			return -ECONNRESET;
		if (n <= 0)
			continue;
		if (soup_parser_next(&s->parser, &p) == SOUP_OK)
			return p.type == SOUP_LOGIN_ACCEPTED ? 0 : -EACCES;
	}
	return -ETIMEDOUT;
}

