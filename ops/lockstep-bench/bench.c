/* lockstep-bench: the helpers every mode uses: the stop flags its signal
 * handler sets, list splitting, a bound UDP socket, and the batch loops of
 * the relay, the echo and the sequencer's feeder. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "bench.h"

volatile sig_atomic_t bench_interrupted;
volatile sig_atomic_t bench_load_ended;

void bench_on_signal(int sig)
{
	if (sig == SIGUSR1)
		bench_load_ended = 1;
	else
		bench_interrupted = 1;
}

int bench_split(char *text, char **out, unsigned max)
{
	char *save;
	unsigned n = 0;

	for (char *t = strtok_r(text, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return (int)n;
}

int bench_udp_bound(const char *addr, struct sockaddr_in *bound)
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

void bench_batch_each(struct net_batch *in, int fd, void (*fn)(void *ctx, unsigned k), void *ctx)
{
	int got;

	while ((got = net_batch_recv(in, fd)) > 0) {
		for (int k = 0; k < got; k++)
			fn(ctx, (unsigned)k);
		if ((unsigned)got < in->n)
			break;
	}
}

int bench_mold_iter(struct net_batch *in, unsigned k, struct mold_iter *it)
{
	struct mold_packet mp;

	if (mold_parse(net_batch_slot(in, k), in->lens[k], NULL, 0, &mp) < 0)
		return -1;
	mold_iter_init(it, &mp);
	return 0;
}

void bench_batch_push(struct net_batch *out, unsigned *n_out, struct mold_builder *b,
		      const struct sockaddr_in *to, int fd)
{
	out->lens[*n_out] = mold_build_end(b);
	out->addrs[*n_out] = *to;
	if (++*n_out == out->n) {
		net_batch_send(out, fd, *n_out);
		*n_out = 0;
	}
}
