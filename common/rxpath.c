/* The receive path around common/rx on a daemon's loop (rxpath.h). */
#include "rxpath.h"
#include "log.h"

static struct log_ratelimit rl_too_old = LOG_RATELIMIT_INIT(1, 5);

void rxpath_arm(struct ev_loop *loop, ev_timer *t, uint64_t due, uint64_t now)
{
	ev_timer_stop(loop, t);
	if (due == RX_NEVER)
		return;
	ev_timer_set(t, due > now ? (double)(due - now) / 1e9 : 0., 0.);
	ev_timer_start(loop, t);
}

void rxpath_bufsize_check(const char *what, const struct net_bufsize *b)
{
	if (b->capped)
		log_warn("%s: socket buffer capped at %d bytes (asked %d): raise "
			 "net.core.rmem_max (receive) or wmem_max (send)", what, b->granted,
			 b->requested);
}

void rxpath_loss_init(struct rx_rng *rng, struct rx_drop *const *drops, unsigned n, double rate,
		      const char *name, uint64_t seed, unsigned first)
{
	uint64_t base = rx_seed_of(name, seed);

	rx_rng_seed(rng, base);
	for (unsigned i = 0; i < n; i++)
		rx_drop_init(drops[i], rate, base + first + i);
	if (rate > 0)
		log_warn("loss generator on: %.4f of received datagrams thrown away (seed %llu)",
			 rate, (unsigned long long)seed);
}

unsigned rxpath_server(const struct sockaddr_in *servers, unsigned n,
		       const struct sockaddr_in *from)
{
	unsigned k = 0;

	if (n == 1)
		return 0;
	while (k < n && (servers[k].sin_addr.s_addr != from->sin_addr.s_addr ||
			 servers[k].sin_port != from->sin_port))
		k++;
	return k;
}

void rxpath_too_old(struct rx *rx, unsigned server, const char *what,
		    const struct sockaddr_in *from, uint64_t seq, uint64_t now)
{
	char a[32];

	net_format_addr(from, a, sizeof(a));
	log_ratelimited(&rl_too_old, LOG_LVL_WARNING,
			"%s: retransmission server %s holds nothing below %llu", what, a,
			(unsigned long long)seq);
	rx_too_old(rx, server, seq, now);
}

size_t rxpath_too_old_answer(uint8_t *out, const struct mold_session *sess, const char *what,
			     uint64_t asked, uint64_t oldest)
{
	log_ratelimited(&rl_too_old, LOG_LVL_WARNING,
			"%s: retransmission of %llu asked, the oldest held is %llu: told so", what,
			(unsigned long long)asked, (unsigned long long)oldest);
	return mold_build_heartbeat(out, sess, oldest);
}

struct rx_config rxpath_tape_config(uint64_t window, uint64_t ring_bytes, int ab, uint64_t ab_wait,
				    uint64_t delay, uint64_t retry, uint64_t retry_max,
				    struct rx_rng *rng)
{
	struct rx_config rc = {
		.window = (uint32_t)window,
		.ring_bytes = (size_t)ring_bytes,
		.max_count = MOLD_MAX_COUNT,
		.hold_ns = ab ? ab_wait : 0,
		.delay_ns = delay,
		.retry_ns = retry,
		.retry_max_ns = retry_max > retry ? retry_max : retry,
		.settle_ns = retry / 4,
		.rng = rng,
	};

	return rc;
}
