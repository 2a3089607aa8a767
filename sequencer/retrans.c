/* The tape retransmission server: requests for committed events on the
 * retrans socket, answered from the journal (and the too-old answer for
 * what it no longer holds), the tape receivers' flow-control status
 * messages passed to flow.c; seq_retrans_read also rebuilds tape datagrams
 * from the journal for the tape and for raft. */
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

/* the warnings this file logs, each kind at most 5 a second */
static struct log_ratelimit rl_retrans = LOG_RATELIMIT_INIT(1, 5);

/* Fills batch b with tape datagrams of at most cap bytes holding consecutive
 * journalled events [from, to]; returns the number of datagrams and the
 * blocks through *blocks. */
unsigned seq_retrans_read(struct sequencer *s, struct net_batch *b, size_t cap, uint64_t from,
			  uint64_t to, uint64_t *blocks)
{
	struct journal_iter *it;
	struct mold_builder mb;
	struct mold_session sess;
	unsigned np = 0;
	uint64_t seq, term, wire, day_end;
	const uint8_t *data;
	size_t len;
	int r;

	*blocks = 0;
	if (journal_iter_open(&it, s->journal, from) < 0)
		return 0;
	/* each datagram in its day's session, never across two days */
	day_end = seq_day_end(s, from);
	seq_day_wire(s, from, &sess, &wire);
	mold_build_begin(&mb, net_batch_slot(b, 0), cap, &sess, wire);
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1 && seq <= to) {
		if (seq <= day_end && mold_build_add(&mb, data, (uint16_t)len) == MOLD_OK) {
			(*blocks)++;
			continue;
		}
		if (mb.count == 0)
			break; /* a record longer than a datagram: cannot be served */
		b->lens[np++] = mold_build_end(&mb);
		if (np == b->n)
			break;
		day_end = seq_day_end(s, seq);
		seq_day_wire(s, seq, &sess, &wire);
		mold_build_begin(&mb, net_batch_slot(b, np), cap, &sess, wire);
		if (mold_build_add(&mb, data, (uint16_t)len) != MOLD_OK)
			break;
		(*blocks)++;
	}
	if (r < 0)
		log_ratelimited(&rl_retrans, LOG_LVL_WARNING, "retrans: journal read: %s",
				strerror(-r));
	if (np < b->n && mb.count > 0)
		b->lens[np++] = mold_build_end(&mb);
	journal_iter_close(it);
	return np;
}

/* The datagrams of an answer [0, np) that from's budget lets go: a prefix
 * (blocks is then only an upper bound of the events in it). */
static unsigned retrans_budget(struct sequencer *s, unsigned np, const struct sockaddr_in *from,
			       uint64_t *blocks)
{
	unsigned k = src_budget_prefix(&s->rbudget, from->sin_addr.s_addr, s->rout.lens, np,
				       mono_ns());

	if (k < np) {
		char a[32];

		s->st.retrans_budget_refused++;
		*blocks = 0; /* not counted as sent: the prefix's are not known here */
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&rl_retrans, LOG_LVL_WARNING,
				"retrans: %s past its budget ([node] retrans_budget %llu bytes/s): "
				"%u of %u datagrams sent", a,
				(unsigned long long)s->rbudget.rate, k, np);
	}
	return k;
}

static void retrans_serve(struct sequencer *s, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	struct mold_request req;
	/* Committed events only: a standby's tail may yet be cut. */
	uint64_t first = journal_first_seq(s->journal), last = s->commit;
	uint64_t lo, hi, blocks = 0;
	unsigned np;
	/* in any day's session this node knows: its seq then names an index */
	int r = tapeday_parse_request(&s->days, buf, len, &req);

	if (r < 0) {
		char a[32];

		s->st.retrans_bad_requests++;
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&rl_retrans, LOG_LVL_WARNING, "retrans request from %s: %s", a,
				mold_strerror(r));
		return;
	}
	s->st.retrans_requests++;
	if (req.count == 0 || last == 0)
		return;
	if (req.seq < first) {
		/* The too-old answer (common/rx.h): a heartbeat to the requester
		 * whose seq is the oldest event journalled; then what is held. */
		uint8_t hb[AUTH_CONTROL_MAX];
		struct mold_session sess;
		uint64_t wire;
		size_t n;

		seq_day_wire(s, first, &sess, &wire);
		n = rxpath_too_old_answer(hb, &sess, "tape", req.seq, wire);

		n = auth_node_seal(AUTH_TAPE, hb, n, sizeof(hb), 0);
		s->st.retrans_too_old++;
		(void)sendto(s->retrans_fd, hb, n, 0, (const struct sockaddr *)from, sizeof(*from));
	}
	lo = req.seq < first ? first : req.seq;
	hi = req.seq + req.count - 1;
	if (hi > last)
		hi = last;
	if (lo > hi)
		return;
	np = seq_retrans_read(s, &s->rout, s->rout.size - auth_node_reserve(), lo, hi, &blocks);
	np = retrans_budget(s, np, from, &blocks);
	auth_node_seal_batch(AUTH_TAPE, &s->rout, np, 0);
	for (unsigned i = 0; i < np; i++)
		s->rout.addrs[i] = *from;
	r = np ? net_batch_send(&s->rout, s->retrans_fd, np) : 0;
	if (r > 0)
		s->st.retrans_packets_sent += (unsigned)r;
	if (r >= 0 && (unsigned)r == np)
		s->st.retrans_blocks_sent += blocks;
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
			retrans_serve(s, buf, len, from);
	}
}

void seq_retrans_start(struct sequencer *s)
{
	ev_io_init(&s->retrans_io, on_retrans_readable, s->retrans_fd, EV_READ);
	ev_io_start(s->loop, &s->retrans_io);
}
