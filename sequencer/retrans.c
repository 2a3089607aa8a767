/* The tape retransmission socket: requests for committed events, answered
 * from the journal by common/tapeserve.c (with the too-old answer for what
 * it no longer holds), and the tape receivers' flow-control status
 * messages, passed to flow.c; seq_retrans_read rebuilds tape datagrams from
 * the journal for the tape and for raft. */
#include <string.h>

#include "clock.h"
#include "flowstatus.h"
#include "journal.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "rx.h"
#include "rxpath.h"
#include "seq_private.h"

/* Fills batch b with tape datagrams of at most cap bytes holding consecutive
 * journalled events [from, to]; returns the number of datagrams and the
 * blocks through *blocks. */
unsigned seq_retrans_read(struct sequencer *s, struct net_batch *b, size_t cap, uint64_t from,
			  uint64_t to, uint64_t *blocks)
{
	return tape_journal_read(s->journal, &s->days, b, cap, from, to, blocks);
}

static void on_retrans_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, retrans_io);
	int n;

	(void)loop;
	(void)revents;
	n = net_batch_recv_counted(&s->rin, s->retrans_fd, &s->rxq_retrans);
	for (int i = 0; i < n; i++) {
		uint8_t *buf = net_batch_slot(&s->rin, (unsigned)i);
		const struct sockaddr_in *from = &s->rin.addrs[i];
		size_t len = s->rin.lens[i], tag = auth_node_reserve();
		/* which of the two it claims to be picks the key it is checked with */
		int flow = len >= tag && flow_status_is(buf, len - tag);

		if (auth_node_check(flow ? AUTH_FLOW : AUTH_REQUEST, buf, &len, flow ? AUTH_RAW : 0,
				    from) < 0 ||
		    rx_drop(&s->drop_retrans, buf, len))
			continue;
		if (flow)
			seq_flow_status(s, buf, len, from);
		else
			/* committed events only: a standby's tail may yet be cut */
			tape_server_serve(&s->srv, s->journal, &s->days, buf, len, from, s->commit,
					  mono_ns());
	}
}

void seq_retrans_start(struct sequencer *s)
{
	s->srv.fd = s->retrans_fd;
	ev_io_init(&s->retrans_io, on_retrans_readable, s->retrans_fd, EV_READ);
	ev_io_start(s->loop, &s->retrans_io);
}
