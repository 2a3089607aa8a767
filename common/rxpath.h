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

#include "net.h"
#include "rx.h"

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
