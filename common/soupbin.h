/* SoupBinTCP 4.0 (NASDAQ): framing and every packet type.
 *
 * A packet is a 2-byte big-endian length (of what follows), a 1-byte type and
 * a payload of length - 1 bytes. The stream parser is incremental: bytes may
 * arrive split anywhere, and any split yields the same packets. Nothing here
 * allocates after init, or logs. */
#ifndef LOCKSTEP_SOUPBIN_H
#define LOCKSTEP_SOUPBIN_H

#include <stddef.h>
#include <stdint.h>

#define SOUP_USERNAME_LEN 6 /* alphanumeric, right-padded with spaces */
#define SOUP_PASSWORD_LEN 10 /* alphanumeric, right-padded with spaces */
#define SOUP_SESSION_LEN 10 /* alphanumeric, left-padded with spaces */
#define SOUP_SEQNUM_LEN 20 /* numeric ASCII, left-padded with spaces */
#define SOUP_LOGIN_REQUEST_LEN 47 /* type + 6 + 10 + 10 + 20 */
#define SOUP_LOGIN_ACCEPTED_LEN 31 /* type + 10 + 20 */
#define SOUP_MAX_PAYLOAD 65534u /* the length field's limit, less the type */
#define SOUP_HEADER_LEN 3 /* a packet's length (2) and type (1) */

/* Packet types. */
enum soup_type {
	/* either direction */
	SOUP_DEBUG = '+',
	/* server -> client */
	SOUP_LOGIN_ACCEPTED = 'A',
	SOUP_LOGIN_REJECTED = 'J',
	SOUP_SEQUENCED_DATA = 'S',
	SOUP_SERVER_HEARTBEAT = 'H',
	SOUP_END_OF_SESSION = 'Z',
	/* client -> server */
	SOUP_LOGIN_REQUEST = 'L',
	SOUP_UNSEQUENCED_DATA = 'U',
	SOUP_CLIENT_HEARTBEAT = 'R',
	SOUP_LOGOUT_REQUEST = 'O',
};

/* Login Rejected reject reason codes. */
enum soup_reject_reason {
	SOUP_REJECT_NOT_AUTHORIZED = 'A',
	SOUP_REJECT_SESSION_UNAVAILABLE = 'S',
};

enum soup_err {
	SOUP_OK = 0,
	SOUP_E_AGAIN = -1, /* parser: need more bytes (not an error) */
	SOUP_E_ZERO_LENGTH = -2, /* a length of 0: no room for the type */
	SOUP_E_OVERSIZE = -3, /* longer than the parser's maximum */
	SOUP_E_UNKNOWN_TYPE = -4, /* not a type of the expected direction */
	SOUP_E_BAD_LENGTH = -5, /* wrong payload length for a fixed-size type */
	SOUP_E_BAD_FIELD = -6, /* a login field that is not alphanumeric/numeric */
	SOUP_E_NOSPACE = -7, /* builder: output buffer too small */
};

const char *soup_strerror(int err);

enum soup_direction {
	SOUP_FROM_CLIENT, /* the server's parser: L U R O + */
	SOUP_FROM_SERVER, /* the client's parser: A J S H Z + */
};

/* One packet; payload points into the parser's buffer and is valid until the
 * next call to soup_parser_feed() or soup_parser_next(). */
struct soup_packet {
	char type;
	const uint8_t *payload;
	uint16_t len; /* payload bytes, without the type */
};

/* Incremental parser over a fixed buffer of `cap` bytes (at least 3 +
 * max_payload). Usage: read() into soup_parser_space(), soup_parser_feed()
 * the count, then soup_parser_next() until SOUP_E_AGAIN. A hard error is
 * sticky: the stream cannot be resynchronised, so the caller disconnects. */
struct soup_parser {
	uint8_t *buf;
	size_t cap, start, end;
	uint16_t max_payload;
	enum soup_direction dir;
	int err;
};

void soup_parser_init(struct soup_parser *p, uint8_t *buf, size_t cap, uint16_t max_payload,
		      enum soup_direction dir);
/* Where the next read() may write, and how much; compacts as needed. */
uint8_t *soup_parser_space(struct soup_parser *p, size_t *room);
void soup_parser_feed(struct soup_parser *p, size_t n);
/* Reads what the stream socket fd holds into the free space (one
 * non-blocking recv) and feeds it: the bytes read (> 0), 0 when nothing is
 * there yet (EAGAIN, EINTR, or no room until packets are taken), -ECONNRESET
 * when the peer closed, or another negative errno. *room_out (may be NULL)
 * is the room the read was offered: less read than that means drained. */
long soup_parser_recv(struct soup_parser *p, int fd, size_t *room_out);
/* Copies `n` bytes in (for tests and for callers that do not read() in place);
 * returns how many fit. */
size_t soup_parser_push(struct soup_parser *p, const void *data, size_t n);
/* SOUP_OK and the next packet; SOUP_E_AGAIN when incomplete; a negative
 * error otherwise. Fixed-size types are length-checked here. */
int soup_parser_next(struct soup_parser *p, struct soup_packet *out);
/* Puts back pkt, the packet soup_parser_next() just returned (no feed or
 * next since): the next call returns it again. */
void soup_parser_unread(struct soup_parser *p, const struct soup_packet *pkt);

/* Login Request fields, decoded: strings trimmed of padding, NUL-terminated. */
struct soup_login {
	char username[SOUP_USERNAME_LEN + 1];
	char password[SOUP_PASSWORD_LEN + 1];
	char session[SOUP_SESSION_LEN + 1]; /* empty: the current session */
	uint64_t seq; /* requested sequence number; 0: from now on */
};

int soup_decode_login(const struct soup_packet *pkt, struct soup_login *out);
/* Login Accepted payload: session and the sequence number of the next
 * sequenced message. */
int soup_decode_login_accepted(const struct soup_packet *pkt, char session[SOUP_SESSION_LEN + 1],
			       uint64_t *seq);

/* Builders write one whole packet (length, type, payload) into out and
 * return its length, or SOUP_E_NOSPACE. */
int soup_build(uint8_t *out, size_t cap, char type, const void *payload, uint16_t len);
int soup_build_login_request(uint8_t *out, size_t cap, const struct soup_login *l);
int soup_build_login_accepted(uint8_t *out, size_t cap, const char *session, uint64_t seq);
int soup_build_login_rejected(uint8_t *out, size_t cap, char reason);
int soup_build_sequenced(uint8_t *out, size_t cap, const void *msg, uint16_t len);
int soup_build_unsequenced(uint8_t *out, size_t cap, const void *msg, uint16_t len);
int soup_build_server_heartbeat(uint8_t *out, size_t cap);
int soup_build_client_heartbeat(uint8_t *out, size_t cap);
int soup_build_end_of_session(uint8_t *out, size_t cap);
int soup_build_logout_request(uint8_t *out, size_t cap);
int soup_build_debug(uint8_t *out, size_t cap, const char *text);

#endif
