/* The matcher's execution stream out: the exec block encoding (exec.h),
 * the ring of exec blocks kept for retransmission, packets built and sent
 * on the exec group (exec_flush), its heartbeats and end of session, and
 * the retransmission server that answers the gateways' requests from the
 * ring (on_retrans). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "exec.h"
#include "log.h"
#include "matcher_private.h"
#include "moldudp64.h"
#include "net.h"
#include "ouch.h"
#include "rxpath.h"
#include "wire.h"

int matcher_exec_encode(uint8_t *block, uint64_t tape_seq, const char *user,
			const struct ouch_msg *msg)
{
	int len = ouch_encode_outbound(msg, block + WIRE_EXEC_HDR_LEN,
				       MATCHER_EXEC_SLOT - 2 - WIRE_EXEC_HDR_LEN);

	if (len < 0)
		return len;
	wire_exec_header(block, tape_seq, user);
	return len + (int)WIRE_EXEC_HDR_LEN;
}

/* Closes the packet being built: it is sent with the next flush, and no
 * packet is open (pkt_slot == tx.n) until exec_begin_packet(). */
static void exec_end_packet(struct matcher *m)
{
	m->tx.lens[m->pkt_slot] = mold_build_end(&m->pkt);
	m->tx.addrs[m->pkt_slot] = m->exec_group;
	m->pkt_slot = m->tx.n;
	m->tx_count++;
}

void matcher_exec_flush(struct matcher *m)
{
	if (m->pkt_slot < m->tx.n)
		exec_end_packet(m);
	if (m->tx_count == 0)
		return;
	/* resuming after a pause, behind another replica that reported a
	 * checkpoint past what these packets answer (events up to applied + 1,
	 * the one being applied when a full batch is flushed): it has sent
	 * them, or is about to at the end of its wakeup (see
	 * matcher_resume_begin) */
	if (m->resuming && matcher_applied(m) < matcher_checkpoint_peers_high(m)) {
		m->st.exec_packets_skipped_resuming += m->tx_count;
		m->tx_count = 0;
		return;
	}
	auth_node_seal_batch(AUTH_EXEC, &m->tx, m->tx_count, 0);
	int sent = iopath_send(&m->io, &m->tx, m->exec_fd, m->tx_count, NET_SEND_WAIT_NS,
			       &m->st.exec_send_waits);
	if (sent < (int)m->tx_count)
		m->st.exec_send_errors += m->tx_count - (unsigned)(sent < 0 ? 0 : sent);
	m->st.exec_packets += m->tx_count;
	ab_send_batch(&m->exec_b, &m->io, &m->tx, m->tx_count, NET_SEND_WAIT_NS);
	m->tx_count = 0;
	m->last_exec_send_ns = mono_ns();
}

void matcher_exec_drop_unsent(struct matcher *m)
{
	m->pkt_slot = m->tx.n;
	m->tx_count = 0;
}

static void exec_begin_packet(struct matcher *m)
{
	if (m->tx_count == m->tx.n)
		matcher_exec_flush(m);
	m->pkt_slot = m->tx_count;
	mold_build_begin(&m->pkt, net_batch_slot(&m->tx, m->pkt_slot),
			 m->cfg->max_datagram - auth_node_reserve(), &m->exec_session, m->exec_next);
}

void matcher_exec_emit(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct matcher *m = ctx;
	uint8_t block[MATCHER_EXEC_SLOT - 2];
	/* shared with lockstep-replay rebuild, which counts exec blocks alike */
	int len;
	uint8_t *slot;

	if (m->fault_active) {
		/* the diverge fault's order is for nobody: no message of it
		 * goes out, so the stream keeps the others' numbering */
		m->fault_booked |= msg->type == OUCH_ACCEPTED;
		return;
	}
	if (m->diverged) {
		m->exec_next++;
		m->st.exec_blocks_withheld++;
		return;
	}
	len = matcher_exec_encode(block, m->cur_tape_seq, user, msg);
	if (len < 0) {
		log_err("cannot encode an outbound %c message: %s", msg->type, ouch_strerror(len));
		return;
	}
	slot = m->ring + (m->exec_next % m->cfg->ring) * MATCHER_EXEC_SLOT;
	slot[0] = (uint8_t)(len >> 8);
	slot[1] = (uint8_t)len;
	memcpy(slot + 2, block, (size_t)len);
	if (m->pkt_slot == m->tx.n)
		exec_begin_packet(m);
	if (mold_build_add(&m->pkt, block, (uint16_t)len) < 0) {
		exec_end_packet(m);
		exec_begin_packet(m);
		mold_build_add(&m->pkt, block, (uint16_t)len);
	}
	m->exec_next++;
	m->st.exec_blocks++;
}

void matcher_exec_heartbeat(struct matcher *m, uint64_t now)
{
	uint8_t hb[AUTH_CONTROL_MAX];
	size_t n;

	/* resuming: the next number it would announce may not be out yet */
	if (now - m->last_exec_send_ns < m->cfg->heartbeat_ns || m->diverged || m->resuming)
		return;
	n = auth_node_heartbeat(hb, AUTH_EXEC, &m->exec_session, m->exec_next, 0);
	sendto(m->exec_fd, hb, n, 0, (struct sockaddr *)&m->exec_group,
	       sizeof(m->exec_group));
	ab_send_one(&m->exec_b, hb, n);
	m->last_exec_send_ns = now;
	m->st.heartbeats_sent++;
}

void matcher_exec_end(struct matcher *m)
{
	uint8_t eos[AUTH_CONTROL_MAX];
	size_t n = auth_node_heartbeat(eos, AUTH_EXEC, &m->exec_session, m->exec_next, 1);

	if (m->exec_fd >= 0)
		sendto(m->exec_fd, eos, n, 0, (struct sockaddr *)&m->exec_group,
		       sizeof(m->exec_group));
	ab_send_one(&m->exec_b, eos, n);
}

/* --- execution retransmissions ------------------------------------------- */

/* The datagrams of an answer [0, k) that from's budget lets go: a prefix. */
static unsigned answer_budget(struct matcher *m, unsigned k, const struct sockaddr_in *from)
{
	unsigned n = src_budget_prefix(&m->req_budget, from->sin_addr.s_addr, m->req_tx.lens, k,
				       m->now);

	if (n < k)
		m->st.retrans_budget_refused++;
	return n;
}

static void serve_request(struct matcher *m, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	struct mold_request r;
	struct mold_builder b;
	uint64_t oldest = m->exec_next > m->cfg->ring ? m->exec_next - m->cfg->ring : 1;

	if (oldest < m->exec_first)
		oldest = m->exec_first; /* what came before the snapshot we started from */
	uint64_t seq, end;
	unsigned k = 0;

	if (mold_parse_request(buf, len, &m->exec_session, &r) < 0) {
		m->st.exec_requests_bad++;
		return;
	}
	m->st.exec_requests_served++;
	seq = r.seq;
	if (r.seq < oldest) {
		/* The too-old answer (common/rx.h): a heartbeat to the requester
		 * whose seq is the oldest block held; then what is held. */
		m->st.exec_requests_too_old++;
		m->req_tx.lens[k] = rxpath_too_old_answer(net_batch_slot(&m->req_tx, k),
							  &m->exec_session, "exec", r.seq, oldest);
		m->req_tx.addrs[k++] = *from;
		seq = oldest;
	}
	end = r.seq + r.count < m->exec_next ? r.seq + r.count : m->exec_next;
	while (seq < end && k < m->req_tx.n && k < RETRANS_PACKETS) {
		mold_build_begin(&b, net_batch_slot(&m->req_tx, k),
				 m->cfg->max_datagram - auth_node_reserve(), &m->exec_session, seq);
		for (; seq < end; seq++) {
			const uint8_t *slot = m->ring + (seq % m->cfg->ring) * MATCHER_EXEC_SLOT;
			uint16_t blen = (uint16_t)(slot[0] << 8 | slot[1]);

			if (mold_build_add(&b, slot + 2, blen) < 0)
				break;
			m->st.exec_blocks_resent++;
		}
		m->req_tx.lens[k] = mold_build_end(&b);
		m->req_tx.addrs[k] = *from;
		k++;
	}
	k = answer_budget(m, k, from);
	auth_node_seal_batch(AUTH_EXEC, &m->req_tx, k, 0);
	if (k)
		net_batch_send(&m->req_tx, m->retrans_fd, k);
}

static void on_retrans(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;
	int n = net_batch_recv_counted(&m->req_rx, m->retrans_fd, &m->rxq_retrans);

	(void)loop;
	(void)revents;
	if (n > 0)
		m->now = mono_ns();
	for (int i = 0; i < n; i++) {
		uint8_t *buf = net_batch_slot(&m->req_rx, (unsigned)i);
		size_t len = m->req_rx.lens[i];

		if (auth_node_check(AUTH_REQUEST, buf, &len, 0, &m->req_rx.addrs[i]) < 0)
			continue;
		if (rx_drop(&m->drop_retrans, buf, len)) {
			m->st.exec_requests_dropped++;
			continue;
		}
		if (m->diverged) { /* silence: the gateway asks another replica */
			m->st.exec_requests_refused++;
			continue;
		}
		serve_request(m, buf, len, &m->req_rx.addrs[i]);
	}
}

/* A/B: the execution stream on network B, when exec_group_b is set. */
static int open_exec_b(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	const char *iface = *c->tape_iface_b ? c->tape_iface_b : c->tape_iface, *why = "";
	int err = ab_send_open(&m->exec_b, c->exec_group_b, iface, 1, (int)c->sndbuf, &why);

	if (err < 0)
		log_err("[matcher] exec_group_b %s on %s: %s: %s", c->exec_group_b, iface, why,
			strerror(-err));
	else if (ab_send_on(&m->exec_b))
		log_info("A/B: executions to %s and to %s on %s", c->exec_group, c->exec_group_b,
			 iface);
	return err;
}

int matcher_exec_open(struct matcher *m, const struct sockaddr_in *local)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options so = { .sndbuf = (int)c->sndbuf, .nonblock = 1, .rxq_ovfl = 1 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	char session[16];
	int err;

	snprintf(session, sizeof(session), "EXEC%llu", (unsigned long long)c->partition);
	mold_session_set(&m->exec_session, session);
	m->exec_fd = net_udp_open(&any, &so, NULL, NULL);
	if (m->exec_fd < 0)
		return m->exec_fd;
	if ((err = net_mcast_send_setup(m->exec_fd, c->tape_iface, 1)) < 0) {
		log_err("exec stream on %s: %s", c->tape_iface, strerror(-err));
		return err;
	}
	if ((err = open_exec_b(m)) < 0)
		return err;
	m->retrans_fd = net_udp_open(local, &so, NULL, NULL);
	if (m->retrans_fd < 0) {
		log_err("exec_retrans %s: %s", c->exec_retrans, strerror(-m->retrans_fd));
		return m->retrans_fd;
	}
	return 0;
}

void matcher_exec_start(struct matcher *m)
{
	ev_io_init(&m->retrans_io, on_retrans, m->retrans_fd, EV_READ);
	m->retrans_io.data = m;
	ev_io_start(m->loop, &m->retrans_io);
}
