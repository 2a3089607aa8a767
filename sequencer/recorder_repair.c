/* The tape recorder's answers owed and its repair group (recorder.h): a
 * request for what the journal does not hold yet is remembered and
 * answered as soon as it does (the recorder missed the same datagram as its
 * receivers, and asks upstream once for all of them); on the repair group
 * receivers ask and hear each other ask (a gap another receiver asked for
 * waits for the answer, rx_heard), and a recorder with repair_answer
 * answers each range once, by multicast to the group. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "auth_node.h"
#include "clock.h"
#include "log.h"
#include "moldudp64.h"
#include "recorder_private.h"
#include "rxpath.h"

#define REC_OWED_NS 1000000000ull /* an answer owed longer is dropped: its asker asked elsewhere */

static int is_group(const struct recorder *r, const struct sockaddr_in *to)
{
	return r->rep_fd >= 0 && net_addr_same(to, &r->rep_group);
}

/* Sends the journal's events [lo, hi] to `to` (the repair group: counted,
 * and remembered for the hold-off). */
static void answer(struct recorder *r, uint64_t lo, uint64_t hi, const struct sockaddr_in *to,
		   uint64_t now)
{
	struct mold_request q;
	uint8_t req[MOLD_REQUEST_LEN];
	size_t n;

	if (hi - lo + 1 > MOLD_MAX_COUNT)
		hi = lo + MOLD_MAX_COUNT - 1;
	q.count = (uint16_t)(hi - lo + 1);
	tapeday_wire(&r->days, lo, &q.session, &q.seq);
	n = mold_build_request(req, &q);
	tape_server_serve(&r->srv, r->journal, &r->days, req, n, to, r->written, now);
	if (is_group(r, to)) {
		r->answered[r->answered_next++ % REC_RANGES] = (struct rec_range){ lo, hi, now, *to };
		r->st.repair_answers++;
	}
}

static int recently_answered(const struct recorder *r, uint64_t lo, uint64_t hi, uint64_t now)
{
	for (unsigned i = 0; i < REC_RANGES; i++) {
		const struct rec_range *a = &r->answered[i];

		if (a->t && now - a->t < r->cfg->repair_holdoff_ns && a->lo <= lo && hi <= a->hi)
			return 1;
	}
	return 0;
}

void rec_owe(struct recorder *r, uint64_t lo, uint64_t hi, const struct sockaddr_in *to,
	     uint64_t now)
{
	for (unsigned i = 0; i < r->n_pending; i++) {
		const struct rec_range *p = &r->pending[i];

		if (p->lo <= lo && hi <= p->hi && net_addr_same(&p->to, to))
			return;
	}
	if (r->n_pending == REC_RANGES)
		return; /* the requester asks again */
	r->pending[r->n_pending++] = (struct rec_range){ lo, hi, now, *to };
	if (is_group(r, to))
		r->st.repair_pending++;
	else
		r->st.retrans_owed++;
}

void rec_owed_drain(struct recorder *r, uint64_t now)
{
	for (unsigned i = 0; i < r->n_pending;) {
		struct rec_range *p = &r->pending[i];

		if (now - p->t > REC_OWED_NS) {
			*p = r->pending[--r->n_pending];
			continue;
		}
		if (p->lo > r->written) {
			i++;
			continue;
		}
		answer(r, p->lo, p->hi < r->written ? p->hi : r->written, &p->to, now);
		if (p->hi > r->written) {
			p->lo = r->written + 1;
			i++;
		} else {
			*p = r->pending[--r->n_pending];
		}
	}
}

/* A request heard on the repair group: this recorder's own gaps wait for
 * its answer (rx_heard); a repair_answer recorder answers it once. */
static void repair_request(struct recorder *r, const uint8_t *buf, size_t len,
			   const struct sockaddr_in *from, uint64_t now)
{
	struct mold_request q;
	uint64_t lo, hi;

	if (net_addr_same(from, &r->own))
		return; /* our own, back by multicast loop (a port alone: another host may share it) */
	if (tapeday_parse_request(&r->days, buf, len, &q) < 0 || q.count == 0) {
		r->st.tape_malformed++;
		return;
	}
	r->st.repair_heard++;
	/* suppression is among those who ask the group: a recorder that asks
	 * upstream (repair_ask = no, the group's answerer) must not wait for
	 * the answer it is to give */
	if (r->cfg->repair_suppress && r->cfg->repair_ask)
		rx_heard(r->rx, q.seq, q.count, now);
	if (!r->cfg->repair_answer)
		return;
	lo = q.seq;
	hi = q.seq + q.count - 1;
	if (journal_first_seq(r->journal) > lo)
		return; /* not held: the requester goes upstream */
	if (recently_answered(r, lo, hi, now)) {
		r->st.repair_answers_suppressed++;
		return;
	}
	if (r->written >= lo)
		answer(r, lo, hi < r->written ? hi : r->written, &r->rep_group, now);
	if (hi > r->written)
		rec_owe(r, lo > r->written ? lo : r->written + 1, hi, &r->rep_group, now);
}

/* An answer multicast on the repair group: tape data. */
static void repair_data(struct recorder *r, uint8_t *buf, size_t len)
{
	struct mold_packet p;

	if (tapeday_parse(&r->days, buf, len, 0, &p) < 0 || p.kind != MOLD_DATA)
		return;
	r->st.repair_data++;
	rx_packet(r->rx, &p, r->now);
}

void rec_repair_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct recorder *r = w->data;
	size_t tag = auth_node_reserve();
	int n;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		n = net_batch_recv_counted(&r->in, r->rep_fd, &r->rxq_srv);
		if (n <= 0)
			break;
		r->now = mono_ns();
		for (int i = 0; i < n; i++) {
			uint8_t *buf = net_batch_slot(&r->in, (unsigned)i);
			const struct sockaddr_in *from = &r->in.addrs[i];
			size_t len = r->in.lens[i];
			int request = len == MOLD_REQUEST_LEN + tag;

			if (auth_node_check(request ? AUTH_REQUEST : AUTH_TAPE, buf, &len, 0, from) < 0 ||
			    rx_drop(&r->drop_srv, buf, len))
				continue;
			if (request)
				repair_request(r, buf, len, from, r->now);
			else
				repair_data(r, buf, len);
		}
		if ((unsigned)n < r->in.n)
			break;
	}
	rec_wakeup_end(r);
}

/* The repair group, when configured: joined on tape_iface; requests leave
 * by req_fd, which then sends multicast too. */
int rec_repair_open(struct recorder *r, const struct net_udp_options *o)
{
	const struct rec_config *c = r->cfg;
	struct net_bufsize rcv;
	socklen_t olen = sizeof(r->own);
	int e;

	if (getsockname(r->req_fd, (struct sockaddr *)&r->own, &olen) < 0)
		return -errno;
	if (!*c->repair_group)
		return 0;
	if (net_parse_addr(c->repair_group, &r->rep_group) < 0 ||
	    !IN_MULTICAST(ntohl(r->rep_group.sin_addr.s_addr))) {
		log_err("[recorder] repair_group \"%s\": not a multicast group:port", c->repair_group);
		return -EINVAL;
	}
	if ((r->rep_fd = net_mcast_recv_open(&r->rep_group, c->tape_iface, o, &rcv)) < 0) {
		log_err("repair group %s on %s: %s", c->repair_group, c->tape_iface,
			strerror(-r->rep_fd));
		return r->rep_fd;
	}
	rxpath_bufsize_check("repair group", &rcv);
	if ((e = net_mcast_send_setup(r->req_fd, c->tape_iface, 1)) < 0) {
		log_err("repair group: requests on %s: %s", c->tape_iface, strerror(-e));
		return e;
	}
	log_info("repair group %s: %s%s", c->repair_group,
		 c->repair_ask ? "asked first, " : "", c->repair_answer ? "answered" : "heard");
	return 0;
}
