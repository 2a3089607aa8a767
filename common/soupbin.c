/* SoupBinTCP 4.0: the incremental stream parser, login field codecs and
 * packet builders.
 *
 * The parser checks a packet as soon as the bytes that decide a check are in:
 * the length (zero, over max_payload) once 2 bytes are buffered, the type and
 * a fixed-size type's length once 3 are. Every check depends only on the
 * bytes, so any split of the stream yields the same packets and the same
 * error. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "soupbin.h"

#define LOGIN_REQUEST_PAYLOAD (SOUP_LOGIN_REQUEST_LEN - 1)
#define LOGIN_ACCEPTED_PAYLOAD (SOUP_LOGIN_ACCEPTED_LEN - 1)

/* What a parser accepts of a type: not at all, any length, or exactly n. */
#define LEN_UNKNOWN (-2)
#define LEN_ANY (-1)

const char *soup_strerror(int err)
{
	switch (err) {
	case SOUP_OK:
		return "success";
	case SOUP_E_AGAIN:
		return "incomplete packet";
	case SOUP_E_ZERO_LENGTH:
		return "packet length 0";
	case SOUP_E_OVERSIZE:
		return "packet longer than the maximum";
	case SOUP_E_UNKNOWN_TYPE:
		return "packet type unknown in this direction";
	case SOUP_E_BAD_LENGTH:
		return "wrong length for the packet type";
	case SOUP_E_BAD_FIELD:
		return "login field not alphanumeric or numeric";
	case SOUP_E_NOSPACE:
		return "output buffer too small";
	}
	return "unknown SoupBinTCP error";
}

static int payload_len(enum soup_direction dir, uint8_t type)
{
	if (type == SOUP_DEBUG)
		return LEN_ANY;
	if (dir == SOUP_FROM_CLIENT) {
		switch (type) {
		case SOUP_LOGIN_REQUEST:
			return LOGIN_REQUEST_PAYLOAD;
		case SOUP_UNSEQUENCED_DATA:
			return LEN_ANY;
		case SOUP_CLIENT_HEARTBEAT:
		case SOUP_LOGOUT_REQUEST:
			return 0;
		}
	} else {
		switch (type) {
		case SOUP_LOGIN_ACCEPTED:
			return LOGIN_ACCEPTED_PAYLOAD;
		case SOUP_LOGIN_REJECTED:
			return 1;
		case SOUP_SEQUENCED_DATA:
			return LEN_ANY;
		case SOUP_SERVER_HEARTBEAT:
		case SOUP_END_OF_SESSION:
			return 0;
		}
	}
	return LEN_UNKNOWN;
}

/* A buffer smaller than 3 + max_payload lowers max_payload to what fits, so
 * that a packet the parser accepts always fits in its buffer. */
void soup_parser_init(struct soup_parser *p, uint8_t *buf, size_t cap, uint16_t max_payload,
		      enum soup_direction dir)
{
	if (max_payload > SOUP_MAX_PAYLOAD)
		max_payload = SOUP_MAX_PAYLOAD;
	if (cap < SOUP_HEADER_LEN + (size_t)max_payload)
		max_payload = cap > SOUP_HEADER_LEN ? (uint16_t)(cap - SOUP_HEADER_LEN) : 0;
	p->buf = buf;
	p->cap = cap;
	p->start = 0;
	p->end = 0;
	p->max_payload = max_payload;
	p->dir = dir;
	p->err = cap < SOUP_HEADER_LEN ? SOUP_E_NOSPACE : SOUP_OK;
}

/* Moves the unparsed bytes to the front when the buffer is empty, when less
 * than half of it is free, or when a maximal packet starting at `start`
 * would not fit. At most one partial packet is moved. */
uint8_t *soup_parser_space(struct soup_parser *p, size_t *room)
{
	if (p->start == p->end) {
		p->start = 0;
		p->end = 0;
	} else if (p->start > 0 && (p->cap - p->end < p->cap / 2 ||
				    p->cap - p->start < SOUP_HEADER_LEN + (size_t)p->max_payload)) {
		memmove(p->buf, p->buf + p->start, p->end - p->start);
		p->end -= p->start;
		p->start = 0;
	}
	*room = p->cap - p->end;
	return p->buf + p->end;
}

void soup_parser_feed(struct soup_parser *p, size_t n)
{
	if (n > p->cap - p->end) /* more than soup_parser_space() offered */
		n = p->cap - p->end;
	p->end += n;
}

long soup_parser_recv(struct soup_parser *p, int fd, size_t *room_out)
{
	size_t room;
	uint8_t *at = soup_parser_space(p, &room);
	ssize_t n;

	if (room_out)
		*room_out = room;
	if (room == 0)
		return 0;
	n = recv(fd, at, room, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	soup_parser_feed(p, (size_t)n);
	return (long)n;
}

size_t soup_parser_push(struct soup_parser *p, const void *data, size_t n)
{
	size_t room;
	uint8_t *dst = soup_parser_space(p, &room);

	if (n > room)
		n = room;
	if (n)
		memcpy(dst, data, n);
	p->end += n;
	return n;
}

static int parser_fail(struct soup_parser *p, int err)
{
	p->err = err;
	return err;
}

int soup_parser_next(struct soup_parser *p, struct soup_packet *out)
{
	const uint8_t *q = p->buf + p->start;
	size_t avail = p->end - p->start;
	unsigned len;
	int want;

	if (p->err)
		return p->err;
	if (avail < 2)
		return SOUP_E_AGAIN;
	len = (unsigned)q[0] << 8 | q[1];
	if (len == 0)
		return parser_fail(p, SOUP_E_ZERO_LENGTH);
	if (len - 1 > p->max_payload)
		return parser_fail(p, SOUP_E_OVERSIZE);
	if (avail < SOUP_HEADER_LEN)
		return SOUP_E_AGAIN;
	want = payload_len(p->dir, q[2]);
	if (want == LEN_UNKNOWN)
		return parser_fail(p, SOUP_E_UNKNOWN_TYPE);
	if (want != LEN_ANY && (unsigned)want != len - 1)
		return parser_fail(p, SOUP_E_BAD_LENGTH);
	if (avail < 2 + (size_t)len)
		return SOUP_E_AGAIN;
	out->type = (char)q[2];
	out->payload = q + SOUP_HEADER_LEN;
	out->len = (uint16_t)(len - 1);
	p->start += 2 + (size_t)len;
	return SOUP_OK;
}

void soup_parser_unread(struct soup_parser *p, const struct soup_packet *pkt)
{
	p->start = (size_t)(pkt->payload - p->buf) - SOUP_HEADER_LEN;
}

/* --- login fields ---------------------------------------------------------- */

static inline int is_alnum(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* Alphanumeric, right-padded with spaces: the text is what precedes the
 * padding. out holds n + 1. */
static int get_right(const uint8_t *f, size_t n, char *out)
{
	size_t k = n;

	while (k > 0 && f[k - 1] == ' ')
		k--;
	for (size_t i = 0; i < k; i++)
		if (!is_alnum(f[i]))
			return SOUP_E_BAD_FIELD;
	memcpy(out, f, k);
	out[k] = '\0';
	return SOUP_OK;
}

/* Alphanumeric, left-padded with spaces; all spaces gives "". */
static int get_left(const uint8_t *f, size_t n, char *out)
{
	size_t i = 0;

	while (i < n && f[i] == ' ')
		i++;
	for (size_t j = i; j < n; j++)
		if (!is_alnum(f[j]))
			return SOUP_E_BAD_FIELD;
	memcpy(out, f + i, n - i);
	out[n - i] = '\0';
	return SOUP_OK;
}

/* Decimal ASCII, left-padded with spaces, at least one digit, at most
 * UINT64_MAX. */
static int get_num(const uint8_t *f, size_t n, uint64_t *v)
{
	size_t i = 0;
	uint64_t x = 0;

	while (i < n && f[i] == ' ')
		i++;
	if (i == n)
		return SOUP_E_BAD_FIELD;
	for (; i < n; i++) {
		unsigned d = (unsigned)f[i] - '0';

		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return SOUP_E_BAD_FIELD;
		x = x * 10 + d;
	}
	*v = x;
	return SOUP_OK;
}

/* Length of a field value, or -1 when it is longer than n or not
 * alphanumeric. */
static long check_alnum(const char *s, size_t n)
{
	size_t k = s ? strnlen(s, n + 1) : 0;

	if (k > n)
		return -1;
	for (size_t i = 0; i < k; i++)
		if (!is_alnum((uint8_t)s[i]))
			return -1;
	return (long)k;
}

static void put_right(uint8_t *f, size_t n, const char *s, size_t k)
{
	if (k)
		memcpy(f, s, k);
	memset(f + k, ' ', n - k);
}

static void put_left(uint8_t *f, size_t n, const char *s, size_t k)
{
	memset(f, ' ', n - k);
	if (k)
		memcpy(f + n - k, s, k);
}

static void put_num(uint8_t *f, size_t n, uint64_t v)
{
	size_t i = n;

	do {
		f[--i] = (uint8_t)('0' + v % 10);
		v /= 10;
	} while (v && i > 0);
	memset(f, ' ', i);
}

int soup_decode_login(const struct soup_packet *pkt, struct soup_login *out)
{
	const uint8_t *f = pkt->payload;
	struct soup_login l;

	if (pkt->type != SOUP_LOGIN_REQUEST)
		return SOUP_E_UNKNOWN_TYPE;
	if (pkt->len != LOGIN_REQUEST_PAYLOAD)
		return SOUP_E_BAD_LENGTH;
	if (get_right(f, SOUP_USERNAME_LEN, l.username) ||
	    get_right(f + SOUP_USERNAME_LEN, SOUP_PASSWORD_LEN, l.password) ||
	    get_left(f + SOUP_USERNAME_LEN + SOUP_PASSWORD_LEN, SOUP_SESSION_LEN, l.session) ||
	    get_num(f + SOUP_USERNAME_LEN + SOUP_PASSWORD_LEN + SOUP_SESSION_LEN, SOUP_SEQNUM_LEN,
		    &l.seq))
		return SOUP_E_BAD_FIELD;
	*out = l;
	return SOUP_OK;
}

int soup_decode_login_accepted(const struct soup_packet *pkt, char session[SOUP_SESSION_LEN + 1],
			       uint64_t *seq)
{
	char s[SOUP_SESSION_LEN + 1];
	uint64_t v;

	if (pkt->type != SOUP_LOGIN_ACCEPTED)
		return SOUP_E_UNKNOWN_TYPE;
	if (pkt->len != LOGIN_ACCEPTED_PAYLOAD)
		return SOUP_E_BAD_LENGTH;
	if (get_left(pkt->payload, SOUP_SESSION_LEN, s) ||
	    get_num(pkt->payload + SOUP_SESSION_LEN, SOUP_SEQNUM_LEN, &v))
		return SOUP_E_BAD_FIELD;
	memcpy(session, s, sizeof(s));
	*seq = v;
	return SOUP_OK;
}

/* --- builders -------------------------------------------------------------- */

/* Writes the length and type of a packet with `len` payload bytes; the
 * caller has checked that 3 + len fits. */
static uint8_t *put_header(uint8_t *out, char type, uint16_t len)
{
	out[0] = (uint8_t)((len + 1) >> 8);
	out[1] = (uint8_t)(len + 1);
	out[2] = (uint8_t)type;
	return out + SOUP_HEADER_LEN;
}

/* SOUP_E_OVERSIZE when len exceeds SOUP_MAX_PAYLOAD (the length field would
 * overflow). */
int soup_build(uint8_t *out, size_t cap, char type, const void *payload, uint16_t len)
{
	if (len > SOUP_MAX_PAYLOAD)
		return SOUP_E_OVERSIZE;
	if (cap < SOUP_HEADER_LEN + (size_t)len)
		return SOUP_E_NOSPACE;
	if (len)
		memcpy(put_header(out, type, len), payload, len);
	else
		put_header(out, type, 0);
	return SOUP_HEADER_LEN + len;
}

/* SOUP_E_BAD_FIELD when a name is too long or not alphanumeric. */
int soup_build_login_request(uint8_t *out, size_t cap, const struct soup_login *l)
{
	long u = check_alnum(l->username, SOUP_USERNAME_LEN);
	long pw = check_alnum(l->password, SOUP_PASSWORD_LEN);
	long s = check_alnum(l->session, SOUP_SESSION_LEN);
	uint8_t *f;

	if (u < 0 || pw < 0 || s < 0)
		return SOUP_E_BAD_FIELD;
	if (cap < SOUP_LOGIN_REQUEST_LEN + 2)
		return SOUP_E_NOSPACE;
	f = put_header(out, SOUP_LOGIN_REQUEST, LOGIN_REQUEST_PAYLOAD);
	put_right(f, SOUP_USERNAME_LEN, l->username, (size_t)u);
	f += SOUP_USERNAME_LEN;
	put_right(f, SOUP_PASSWORD_LEN, l->password, (size_t)pw);
	f += SOUP_PASSWORD_LEN;
	put_left(f, SOUP_SESSION_LEN, l->session, (size_t)s);
	f += SOUP_SESSION_LEN;
	put_num(f, SOUP_SEQNUM_LEN, l->seq);
	return SOUP_LOGIN_REQUEST_LEN + 2;
}

/* SOUP_E_BAD_FIELD when the session is too long or not alphanumeric; NULL
 * or "" writes a blank session. */
int soup_build_login_accepted(uint8_t *out, size_t cap, const char *session, uint64_t seq)
{
	long s = check_alnum(session, SOUP_SESSION_LEN);
	uint8_t *f;

	if (s < 0)
		return SOUP_E_BAD_FIELD;
	if (cap < SOUP_LOGIN_ACCEPTED_LEN + 2)
		return SOUP_E_NOSPACE;
	f = put_header(out, SOUP_LOGIN_ACCEPTED, LOGIN_ACCEPTED_PAYLOAD);
	put_left(f, SOUP_SESSION_LEN, session, (size_t)s);
	put_num(f + SOUP_SESSION_LEN, SOUP_SEQNUM_LEN, seq);
	return SOUP_LOGIN_ACCEPTED_LEN + 2;
}

int soup_build_login_rejected(uint8_t *out, size_t cap, char reason)
{
	return soup_build(out, cap, SOUP_LOGIN_REJECTED, &reason, 1);
}

int soup_build_sequenced(uint8_t *out, size_t cap, const void *msg, uint16_t len)
{
	return soup_build(out, cap, SOUP_SEQUENCED_DATA, msg, len);
}

int soup_build_unsequenced(uint8_t *out, size_t cap, const void *msg, uint16_t len)
{
	return soup_build(out, cap, SOUP_UNSEQUENCED_DATA, msg, len);
}

int soup_build_server_heartbeat(uint8_t *out, size_t cap)
{
	return soup_build(out, cap, SOUP_SERVER_HEARTBEAT, NULL, 0);
}

int soup_build_client_heartbeat(uint8_t *out, size_t cap)
{
	return soup_build(out, cap, SOUP_CLIENT_HEARTBEAT, NULL, 0);
}

int soup_build_end_of_session(uint8_t *out, size_t cap)
{
	return soup_build(out, cap, SOUP_END_OF_SESSION, NULL, 0);
}

int soup_build_logout_request(uint8_t *out, size_t cap)
{
	return soup_build(out, cap, SOUP_LOGOUT_REQUEST, NULL, 0);
}

/* SOUP_E_OVERSIZE when the text is longer than SOUP_MAX_PAYLOAD. */
int soup_build_debug(uint8_t *out, size_t cap, const char *text)
{
	size_t n = strnlen(text, (size_t)SOUP_MAX_PAYLOAD + 1);

	if (n > SOUP_MAX_PAYLOAD)
		return SOUP_E_OVERSIZE;
	return soup_build(out, cap, SOUP_DEBUG, text, (uint16_t)n);
}
