/* Authentication of cluster datagrams: the cluster key file, the keys
 * derived from it, and the tag every datagram between members carries.
 *
 * The tag is SipHash-2-4 with a 128-bit output (libsodium's
 * crypto_shorthash_siphashx24) under a 16-byte key derived, once at load,
 * from the 32-byte cluster key, the cluster's name and the surface (commands,
 * tape, executions, raft, checkpoint votes, retransmission requests): two
 * clusters with one key, or a datagram moved from one surface to another,
 * fail. SipHash because it is the cheapest keyed function libsodium has by a
 * wide margin (lockstep-bench --component codecs, rows auth_*): 33 ns for a
 * 40-byte request and 500 ns for a 1,400-byte tape datagram on this
 * project's machines, against 700 ns for ChaCha20 + Poly1305 and 2.7 us for
 * keyed BLAKE2b.
 *
 * The trailer. Wireshark's MoldUDP64 dissector reads message blocks to the
 * end of the datagram and calls the packet malformed when it finds another
 * number than the header's count (and an end of session or heartbeat with
 * any block at all), so the tag cannot follow the blocks as loose bytes. It
 * travels as one more message block, the last, counted in the header:
 *
 *     u16 length = 20 | u8 0xA5 | u8 key id | u16 count | tag[16]
 *
 * where `count` is the packet's own count (n messages, 0 for a heartbeat,
 * 0xFFFF for an end of session, the count asked for in a request) and the
 * header's count becomes n + 1 (1 for the others). The tag covers every
 * byte before it. auth_open() checks the tag, puts the packet's own count
 * back in the header and cuts the trailer off, so the MoldUDP64 parser sees
 * the packet as it was built. Datagrams that are not MoldUDP64 (raft's
 * prefix, checkpoint votes) carry the same trailer at their end
 * (mold_off = AUTH_RAW: no count to move).
 *
 * Nothing here logs, allocates after load or makes a system call but
 * auth_keyfile_load()'s file read. */
#ifndef LOCKSTEP_AUTH_H
#define LOCKSTEP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define AUTH_KEY_LEN 32 /* a cluster key */
#define AUTH_SUBKEY_LEN 16 /* the derived key a tag is made with */
#define AUTH_TAG_LEN 16
#define AUTH_TRAILER_LEN 22 /* the whole block, its length field included */
#define AUTH_TRAILER_MAGIC 0xA5
#define AUTH_MAX_KEYS 4 /* keys one file may hold (two during a rotation) */
#define AUTH_CLUSTER_MAX 32 /* a cluster's name, its NUL included */
#define AUTH_RAW ((size_t)-1) /* mold_off of a datagram that is not MoldUDP64 */

enum auth_surface {
	AUTH_CMD, /* gateway -> sequencer: commands and their heartbeats */
	AUTH_TAPE, /* the tape, its heartbeats and retransmissions */
	AUTH_EXEC, /* execution streams and their retransmissions */
	AUTH_RAFT, /* sequencer <-> sequencer */
	AUTH_VOTE, /* matcher checkpoint votes */
	AUTH_REQUEST, /* retransmission requests, to every server */
	AUTH_FLOW, /* a matcher's flow status, to the sequencers */
	AUTH_N_SURFACES
};

extern const char *const auth_surface_names[AUTH_N_SURFACES];

enum auth_err {
	AUTH_OK = 0,
	AUTH_E_SHORT = -1, /* no room for a trailer: too short, or none was added */
	AUTH_E_TRAILER = -2, /* the last block is not a trailer (length, magic) */
	AUTH_E_KEY = -3, /* a key id this node does not hold */
	AUTH_E_TAG = -4, /* the tag does not match */
	AUTH_E_COUNT = -5, /* the header's count is not the trailer's plus one */
	AUTH_E_NOSPACE = -6, /* seal: the buffer cannot take the trailer */
};
#define AUTH_N_ERRORS 6

const char *auth_strerror(int err);

/* A key file's contents:
 *
 *     # comments and blank lines
 *     cluster-key 1 <64 hex digits>
 *     cluster-key 2 <64 hex digits>
 *     send 2
 *
 * Key ids are 1..255, each at most once; `send` names the key this node
 * tags with (default: the only key; required with several). */
struct auth_keys {
	unsigned n;
	uint8_t id[AUTH_MAX_KEYS];
	uint8_t key[AUTH_MAX_KEYS][AUTH_KEY_LEN];
	uint8_t send_id;
};

/* Parses text[0..len) (need not be NUL-terminated). 0, or -EINVAL with err
 * saying "line N: what". */
int auth_keyfile_parse(const char *text, size_t len, struct auth_keys *out, char *err,
		       size_t errlen);
/* Reads and parses `path`: -errno of open/read, -EPERM when others may read
 * it (mode & 007), -EINVAL from the parser; err says which. */
int auth_keyfile_load(const char *path, struct auth_keys *out, char *err, size_t errlen);
/* k: one fresh random key, id 1, sent with. */
void auth_keys_generate(struct auth_keys *k);
/* Writes k as a key file into out; returns its length, or 0 when cap is
 * too small. */
size_t auth_keyfile_format(const struct auth_keys *k, char *out, size_t cap);

/* The derived keys a node tags and checks with. */
struct auth {
	int on;
	char cluster[AUTH_CLUSTER_MAX];
	unsigned n; /* keys held */
	unsigned send; /* index of the key tagged with */
	uint8_t id[AUTH_MAX_KEYS];
	uint8_t sub[AUTH_MAX_KEYS][AUTH_N_SURFACES][AUTH_SUBKEY_LEN];
};

/* Derives a's keys for cluster `cluster` (1..31 printable characters) from
 * k. -EINVAL for a bad name, no keys or a `send` id k does not hold. */
int auth_init(struct auth *a, const char *cluster, const struct auth_keys *k);
/* Authentication off (a lab): seal and open pass datagrams through. */
void auth_init_off(struct auth *a);

/* Adds the trailer to the datagram buf[0..len) (its MoldUDP64 header at
 * buf + mold_off, or AUTH_RAW) for surface s: the new length, or
 * AUTH_E_NOSPACE (buf untouched) when len + AUTH_TRAILER_LEN > cap. With
 * authentication off, len. */
int64_t auth_seal(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t len,
		  size_t cap, size_t mold_off);

/* Checks buf[0..len) for surface s and strips its trailer: AUTH_OK with
 * *inner the datagram's length as it was before auth_seal() (and its
 * header's count put back), or an AUTH_E_* (buf untouched). *key_index
 * (may be NULL) is the index of the key that matched. With authentication
 * off, *inner = len. */
int auth_open(const struct auth *a, enum auth_surface s, uint8_t *buf, size_t len,
	      size_t mold_off, size_t *inner, unsigned *key_index);

/* The key id of a sealed datagram's trailer (0 when it has none): for the
 * log line that names what came in. */
unsigned auth_key_id_of(const uint8_t *buf, size_t len);

#endif
