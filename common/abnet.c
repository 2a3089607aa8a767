/* A/B networks: the sender's second socket (abnet.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "abnet.h"

int ab_send_open(struct ab_send *b, const char *group, const char *iface, int ttl, int sndbuf,
		 const char **why)
{
	struct net_udp_options so = { .sndbuf = sndbuf, .nonblock = 1 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	int r;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (!group || !*group)
		return 0;
	*why = "not a multicast group:port";
	if (net_parse_addr(group, &b->group) < 0 || !IN_MULTICAST(ntohl(b->group.sin_addr.s_addr)))
		return -EINVAL;
	*why = "socket";
	r = net_udp_open(&any, &so, NULL, NULL);
	if (r < 0)
		return r;
	b->fd = r;
	*why = "interface";
	r = net_mcast_send_setup(b->fd, iface, ttl);
	if (r < 0) {
		ab_send_close(b);
		return r;
	}
	return 0;
}

void ab_send_close(struct ab_send *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

void ab_send_batch(struct ab_send *b, struct iopath *io, struct net_batch *bt, unsigned count,
		   uint64_t wait_ns)
{
	int r;

	if (b->fd < 0 || count == 0)
		return;
	for (unsigned i = 0; i < count; i++)
		bt->addrs[i] = b->group;
	r = iopath_send(io, bt, b->fd, count, wait_ns, &b->send_waits);
	if (r > 0)
		b->packets += (unsigned)r;
	if (r < (int)count)
		b->send_errors += count - (unsigned)(r < 0 ? 0 : r);
}

void ab_send_one(struct ab_send *b, const void *pkt, size_t len)
{
	if (b->fd < 0)
		return;
	if (sendto(b->fd, pkt, len, 0, (const struct sockaddr *)&b->group, sizeof(b->group)) < 0)
		b->send_errors++;
	else
		b->packets++;
}
