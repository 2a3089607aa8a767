/* The flow-control status message: a tape receiver (a matcher replica)
 * tells the sequencer how far it has applied the tape, so that the tape
 * never runs further ahead of the slowest live receiver than that receiver's
 * kernel buffer holds (receiver-driven flow control, after Aeron's status
 * messages and publisher limit). It goes to each sequencer node's
 * retransmission address, beside the 20-byte MoldUDP64 requests; its length
 * (40) and magic tell them apart. Integers big-endian:
 *   0  "LSFS"           magic
 *   4  u8 version (1)   5  u8 flags           6  u16 partition
 *   8  u64 applied      the highest tape seq the receiver has applied
 *  16  u64 window       events the receiver can take beyond applied
 *                       (0: the sequencer's flow_window)
 *  24  char name[16]    the receiver's node name, NUL-padded
 * A receiver sends one every so many events applied and at least every
 * FLOW_STATUS_INTERVAL_NS while live; the sequencer forgets a receiver it
 * has not heard for its flow_timeout.
 * Flags: FLOW_STATUS_PAUSING says the receiver is about to stop reading for
 * a planned pause (a snapshot), or is still catching up after one: the tape
 * need not wait for it while another receiver of its partition keeps up; it
 * catches up from its kernel buffer (or by retransmission) and is counted
 * again once a status without the flag finds it back within its window of
 * the tape, or behind for too long (flowtable.h). Any other bit is
 * refused. */
#ifndef LOCKSTEP_FLOWSTATUS_H
#define LOCKSTEP_FLOWSTATUS_H

#include <stddef.h>
#include <stdint.h>

#define FLOW_STATUS_LEN 40
#define FLOW_STATUS_NAME_LEN 16
#define FLOW_STATUS_INTERVAL_NS (100 * 1000000ull)
#define FLOW_STATUS_PAUSING 0x01

struct flow_status {
	uint64_t applied, window;
	uint16_t partition;
	uint8_t flags; /* FLOW_STATUS_PAUSING, or 0 */
	char name[FLOW_STATUS_NAME_LEN + 1]; /* NUL-terminated */
};

/* Writes the message (name cut to 16 bytes); returns FLOW_STATUS_LEN. */
size_t flow_status_encode(uint8_t out[FLOW_STATUS_LEN], const struct flow_status *st);
/* 1 when buf looks like a status message (its length and magic): the
 * caller's dispatch between it and a MoldUDP64 request. */
int flow_status_is(const uint8_t *buf, size_t len);
/* 0, or -EBADMSG (length, magic, an unknown flag, a name that is empty or has a byte
 * outside printable ASCII before its padding, or non-NUL padding) or
 * -EPROTO (another version). */
int flow_status_decode(const uint8_t *buf, size_t len, struct flow_status *out);

/* What one event of the tape costs in the receiver's kernel buffer, as the
 * kernel accounts it (skb truesize: on loopback 832 bytes up to a
 * 197-byte datagram, 2,304 for a full 1,472-byte one; on a NIC whatever its
 * driver allocates per frame, whatever the datagram's length), so that a
 * receiver states its window from measurement rather than a model. A sample
 * is the socket's receive-buffer use (SO_MEMINFO, net_rmem_alloc()) just
 * before a read that emptied the queue, over the events of the datagrams
 * that read took. The estimate rises to a larger sample at once and falls
 * toward smaller ones by 1/64 of the difference a sample: a burst of short
 * datagrams is believed at once, a change to longer ones slowly. Pure: no
 * clock, no system call. */
struct flow_cost {
	uint64_t per_event; /* bytes of kernel buffer an event costs; 0: no sample yet */
	uint64_t samples;
};

/* The cost assumed before any sample: a datagram of one event that a NIC
 * driver gave a 4 KiB buffer. */
#define FLOW_COST_DEFAULT 4352

void flow_cost_sample(struct flow_cost *c, uint64_t rmem_bytes, uint64_t events);
/* The events a buffer of `bytes` holds at 3/4 of its size (the rest is the
 * margin for a change of datagram shape since the last sample); at least 1. */
uint64_t flow_cost_window(const struct flow_cost *c, uint64_t bytes);

#endif
