/* The receive path around common/rx.h on a daemon's event loop, written
 * once for the sequencer, the matcher, the gateway and lockstep-replay:
 * arming the request timer, the receive-buffer warning, seeding the loss
 * generator, which retransmission server an answer came from, and the
 * too-old answer, both sides of it. Daemon-side: it logs (rate-limited); it never allocates.
 * The counted batch receive is net_batch_recv_counted() (net.h). */
#ifndef LOCKSTEP_RXPATH_H
#define LOCKSTEP_RXPATH_H

#include <ev.h>
#include <netinet/in.h>
#include <stdint.h>

#include "config.h"
#include "net.h"
#include "rx.h"

/* The keys of a tape receiver's loss recovery in section `sec`, written
 * once for the matcher and the recorder, whose config structs (`type`)
 * name the fields alike; rxpath_tape_config() makes its rx_config. */
#define RXPATH_TAPE_KEYS(type, sec) \
	{ sec, "ab_wait", CONFIG_DURATION, offsetof(type, ab_wait_ns), 0, "1ms", 0, 10e9, NULL, \
	  "A/B: with tape_group_b, a gap waits this long for the other network's copy before " \
	  "its first request (then request_delay's random wait)" }, \
	{ sec, "retrans_wait", CONFIG_DURATION, offsetof(type, retrans_wait_ns), 0, "10ms", 1e5, \
	  60e9, NULL, "wait before asking again for a tape range still missing (doubles each time)" }, \
	{ sec, "retrans_wait_max", CONFIG_DURATION, offsetof(type, retrans_wait_max_ns), 0, "1s", \
	  1e5, 600e9, NULL, "longest wait between two requests for one range" }, \
	{ sec, "request_delay", CONFIG_DURATION, offsetof(type, request_delay_ns), 0, "2ms", 0, \
	  10e9, NULL, "the first request for a new gap waits a random time up to this" }, \
	{ sec, "reorder_window", CONFIG_UINT, offsetof(type, reorder_window), 0, "65536", 2, \
	  1 << 24, NULL, "tape events held ahead of a gap (sequence numbers)" }, \
	{ sec, "reorder_bytes", CONFIG_SIZE, offsetof(type, reorder_bytes), 0, "16M", 4096, \
	  4294967295.0, NULL, "memory for the tape events held ahead of a gap" }, \
	{ sec, "drop_rate", CONFIG_DOUBLE, offsetof(type, drop_rate), 0, "0", 0, 1, NULL, \
	  "loss generator for tests: fraction of received datagrams thrown away" }, \
	{ sec, "drop_seed", CONFIG_UINT, offsetof(type, drop_seed), 0, "1", 0, 0, NULL, \
	  "loss generator seed: the same seed loses the same packets" }

/* A tape receiver's rx_config from its keys (the matcher's and the
 * recorder's, alike): reorder_window, reorder_bytes, ab_wait when the
 * tape comes on two networks (ab), request_delay, retrans_wait and
 * retrans_wait_max (raised to retrans_wait when below); requests of up to
 * MOLD_MAX_COUNT blocks, the rest of a range asked for retrans_wait / 4
 * after its answer stops (answers in flight are not asked again). Servers
 * are the caller's (n_servers, n_near). */
struct rx_config rxpath_tape_config(uint64_t window, uint64_t ring_bytes, int ab, uint64_t ab_wait,
				    uint64_t delay, uint64_t retry, uint64_t retry_max,
				    struct rx_rng *rng);

/* Arms the one-shot timer t to fire at `due` (monotonic ns, as rx_due();
 * now is the current time): at once when due has passed, never (stopped)
 * for RX_NEVER. */
void rxpath_arm(struct ev_loop *loop, ev_timer *t, uint64_t due, uint64_t now);

/* The earlier of due and rx's next request (rx may be NULL). */
static inline uint64_t rxpath_due_min(uint64_t due, const struct rx *rx)
{
	uint64_t d = rx ? rx_due(rx) : RX_NEVER;

	return d < due ? d : due;
}

/* Warns when the kernel gave `what` a smaller socket buffer than asked
 * (b from net_set_rcvbuf() or net_set_sndbuf()). */
void rxpath_bufsize_check(const char *what, const struct net_bufsize *b);

/* The loss generator and request jitter of node `name`: rng from
 * rx_seed_of(name, seed), drops[i] from that + first + i, so that every
 * node and socket loses independently and the same seed loses the same
 * datagrams. Warns once when rate > 0. */
void rxpath_loss_init(struct rx_rng *rng, struct rx_drop *const *drops, unsigned n, double rate,
		      const char *name, uint64_t seed, unsigned first);

/* The index among servers[0..n-1] of the one at `from`. With one server an
 * answer can only be its, whatever address it came from: 0; among several,
 * an unknown sender gets n, which rx counts and otherwise ignores. */
unsigned rxpath_server(const struct sockaddr_in *servers, unsigned n,
		       const struct sockaddr_in *from);

/* The too-old answer (a heartbeat on the request socket): server `server`
 * of `what`'s stream (from: its address) holds nothing below seq. Tells rx
 * and logs (rate-limited). */
void rxpath_too_old(struct rx *rx, unsigned server, const char *what,
		    const struct sockaddr_in *from, uint64_t seq, uint64_t now);

/* The server's side of the too-old answer: a request for seq `asked` of
 * `what`'s stream came in while the oldest held is `oldest` (> asked).
 * Builds into out (MOLD_HEADER_LEN bytes) the heartbeat that tells the
 * requester so, logs (rate-limited) and returns its length; the caller
 * sends it, then what it holds from oldest on. */
size_t rxpath_too_old_answer(uint8_t *out, const struct mold_session *sess, const char *what,
			     uint64_t asked, uint64_t oldest);

#endif
