/* The client edge's pure parts (gateway/throttle.c): a login's token bucket,
 * the bounded queue of messages a throttled session holds, and the size
 * check of a command against one command datagram. No clock (time is
 * passed in, in seconds, as the loop's ev_now), no system call, no
 * logging; the queue allocates once, at throttle_queue_init. */
#ifndef LOCKSTEP_THROTTLE_H
#define LOCKSTEP_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

/* A token bucket: `rate` tokens a second up to `burst`. rate 0: off (every
 * take succeeds). Time that goes backwards adds nothing. */
struct throttle {
	double rate, burst, tokens, last;
};

void throttle_init(struct throttle *t, double rate, double burst, double now);
/* 1 when a token was taken at `now`, 0 when none is left. */
int throttle_take(struct throttle *t, double now);
/* Seconds from `now` until a token is there (0: one is). */
double throttle_wait(struct throttle *t, double now);

/* Inbound OUCH messages waiting for tokens, oldest first, each at most
 * THROTTLE_MSG_MAX bytes (an Enter Order, the longest, is 49). */
#define THROTTLE_MSG_MAX 63
struct throttle_queue {
	uint8_t (*slot)[THROTTLE_MSG_MAX + 1]; /* [0]: the length */
	uint32_t cap, head, n;
};

/* 0, or -ENOMEM; cap 0 holds nothing (every push fails). */
int throttle_queue_init(struct throttle_queue *q, uint32_t cap);
void throttle_queue_fini(struct throttle_queue *q); /* accepts a zeroed queue */
/* 0, or -ENOSPC when full (or len > THROTTLE_MSG_MAX). */
int throttle_queue_push(struct throttle_queue *q, const uint8_t *msg, size_t len);
/* The oldest message and its length (NULL when empty); valid until the
 * next push. */
const uint8_t *throttle_queue_peek(const struct throttle_queue *q, size_t *len);
void throttle_queue_pop(struct throttle_queue *q);

/* A command datagram: the MoldUDP64 header, the block's length field and
 * the authentication trailer (auth_reserve) around the commands. The room
 * one command may take in a datagram of max_datagram bytes (0: none). */
size_t throttle_cmd_room(uint64_t max_datagram, size_t auth_reserve);
/* 1 when a command packed to `encoded` bytes fits that room. */
static inline int throttle_cmd_fits(size_t encoded, size_t room)
{
	return encoded <= room;
}
/* The packed size of the largest Command an OUCH inbound message can make
 * (every field at its widest), which max_datagram must leave room for. */
size_t throttle_max_ouch_command(void);

#endif
