/* The matcher's checkpoints (format in checkpoint.h): the LSCK datagram's
 * codec and the majority vote, the slots that hold each checkpoint's votes,
 * sending this replica's hash and receiving the others', and what being
 * outvoted does to a replica (diverge()). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "checkpoint.h"
#include "log.h"
#include "matcher_private.h"
#include "net.h"
#include "wire.h"

static struct log_ratelimit rl_ckpt = LOG_RATELIMIT_INIT(5, 5);
static struct log_ratelimit rl_malformed = LOG_RATELIMIT_INIT(5, 5);

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static int ckpt_printable(uint8_t c)
{
	return c >= 0x20 && c <= 0x7e;
}

int matcher_checkpoint_encode(uint8_t out[MATCHER_CKPT_LEN], const struct matcher_checkpoint *c)
{
	size_t len = strnlen(c->name, MATCHER_CKPT_NAME_LEN + 1);

	if (len == 0 || len > MATCHER_CKPT_NAME_LEN || c->name[len - 1] == ' ' ||
	    c->partition > 0xffff || c->seq == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!ckpt_printable((uint8_t)c->name[i]))
			return -EINVAL;
	memcpy(out, "LSCK", 4);
	put_u16(out + 4, MATCHER_CKPT_VERSION);
	put_u16(out + 6, (uint16_t)c->partition);
	memset(out + 8, ' ', MATCHER_CKPT_NAME_LEN);
	memcpy(out + 8, c->name, len);
	wire_put_u64(out + 40, c->seq);
	wire_put_u64(out + 48, c->hash);
	return MATCHER_CKPT_LEN;
}

int matcher_checkpoint_decode(const uint8_t *buf, size_t len, struct matcher_checkpoint *out)
{
	size_t n = MATCHER_CKPT_NAME_LEN;
	uint64_t seq;

	if (len != MATCHER_CKPT_LEN)
		return -EMSGSIZE;
	if (memcmp(buf, "LSCK", 4) != 0)
		return -EBADMSG;
	if (get_u16(buf + 4) != MATCHER_CKPT_VERSION)
		return -EPROTONOSUPPORT;
	while (n > 0 && buf[8 + n - 1] == ' ')
		n--;
	if (n == 0)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++)
		if (!ckpt_printable(buf[8 + i]))
			return -EBADMSG;
	seq = wire_get_u64(buf + 40);
	if (seq == 0)
		return -EBADMSG;
	out->partition = get_u16(buf + 6);
	memcpy(out->name, buf + 8, n);
	out->name[n] = '\0';
	out->seq = seq;
	out->hash = wire_get_u64(buf + 48);
	return 0;
}

enum matcher_vote matcher_checkpoint_vote(uint64_t own, const uint64_t *others, size_t n,
					  unsigned replicas, uint64_t *majority)
{
	size_t need = replicas / 2 + 1, mine = 1;

	if (replicas == 0)
		return MATCHER_VOTE_PENDING;
	for (size_t i = 0; i < n; i++)
		mine += others[i] == own;
	if (mine >= need) {
		if (majority)
			*majority = own;
		return MATCHER_VOTE_AGREED;
	}
	/* More voters than replicas: the count is wrong, and so could be any
	 * majority computed from it. */
	if (1 + n > replicas)
		return MATCHER_VOTE_PENDING;
	for (size_t i = 0; i < n; i++) {
		size_t same = 0;

		for (size_t j = 0; j < n; j++)
			same += others[j] == others[i];
		if (same >= need) {
			if (majority)
				*majority = others[i];
			return MATCHER_VOTE_DIVERGED;
		}
	}
	return MATCHER_VOTE_PENDING;
}

/* The slot of checkpoint `seq` (a multiple of the interval), recycled from
 * an older checkpoint if need be; NULL when it holds a newer one. */
static struct matcher_checkpoint_slot *ckpt_slot(struct matcher *m, uint64_t seq)
{
	struct matcher_checkpoint_slot *s = &m->ck[seq / m->cfg->checkpoint_interval % CKPT_WINDOW];

	if (s->seq == seq)
		return s;
	if (s->seq > seq)
		return NULL;
	if (s->seq && s->own_known && s->vote == MATCHER_VOTE_PENDING) {
		m->st.checkpoints_undecided++;
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint at tape seq %llu undecided: %u other replica(s) of %llu "
				"reported it, no majority agreed",
				(unsigned long long)s->seq, (unsigned)__builtin_popcount(s->present),
				(unsigned long long)m->cfg->replicas);
	}
	memset(s, 0, sizeof(*s));
	s->seq = seq;
	return s;
}

/* The names of the peers of slot s whose hash is h, comma-separated. */
static void ckpt_names(const struct matcher *m, const struct matcher_checkpoint_slot *s,
		       uint64_t h, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < m->n_peers && n < cap; k++)
		if ((s->present & (1u << k)) && s->hash[k] == h)
			n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", m->ck_peer[k]);
}

static void ckpt_dissent(struct matcher *m, const struct matcher_checkpoint_slot *s,
			 unsigned k)
{
	m->st.checkpoint_dissents++;
	m->ck_peer_dissent |= 1u << k; /* its reports no longer say what it sent */
	if (m->cfg->replicas == 1) /* no majority to speak of: say only what differs */
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint at tape seq %llu: %s reports state hash %016llx, this "
				"replica has %016llx ([matcher] replicas = 1: no vote)",
				(unsigned long long)s->seq, m->ck_peer[k],
				(unsigned long long)s->hash[k], (unsigned long long)s->own);
	else
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint at tape seq %llu: %s reports state hash %016llx, the "
				"majority (this replica among it) %016llx: %s has diverged",
				(unsigned long long)s->seq, m->ck_peer[k],
				(unsigned long long)s->hash[k], (unsigned long long)s->own,
				m->ck_peer[k]);
}

/* Outvoted: the state is wrong from some event after the last agreed
 * checkpoint on. Nothing of it may reach a client any more: no execution
 * blocks, heartbeats or end of session, no retransmissions (the ring holds
 * the wrong blocks too), no snapshots (a restart would load them). The
 * replica keeps following the tape, answers STATUS ("diverged") and exits
 * with DAEMON_EXIT_DIVERGED when stopped. */
static void diverge(struct matcher *m, const struct matcher_checkpoint_slot *s, uint64_t majority)
{
	char who[256];

	ckpt_names(m, s, majority, who, sizeof(who));
	m->diverged = 1;
	m->st.checkpoints_diverged++;
	matcher_exec_drop_unsent(m); /* the blocks built but not sent yet stay unsent */
	matcher_set_state(m, M_DIVERGED);
	snprintf(m->div_msg, sizeof(m->div_msg),
		 "DIVERGED at checkpoint %llu: own state hash %016llx, majority %016llx (%s); "
		 "last agreed checkpoint %llu",
		 (unsigned long long)s->seq, (unsigned long long)s->own,
		 (unsigned long long)majority, who, (unsigned long long)m->ck_last_agreed);
	log_err("%s", m->div_msg);
	log_err("DIVERGED: this replica applied the tape differently from the majority of the "
		"partition's %llu replicas somewhere after tape seq %llu; it no longer publishes "
		"executions, serves their retransmissions or writes snapshots, and exits with "
		"status %d when stopped. Restart it to rebuild its state from a snapshot at or "
		"before %llu, or from the tape",
		(unsigned long long)m->cfg->replicas, (unsigned long long)m->ck_last_agreed,
		DAEMON_EXIT_DIVERGED, (unsigned long long)m->ck_last_agreed);
	matcher_snapshot_quarantine(m);
}

/* Decides slot s if it can be: called when its own hash or a report
 * arrives. */
static void ckpt_decide(struct matcher *m, struct matcher_checkpoint_slot *s)
{
	uint64_t others[CKPT_PEERS], majority = 0;
	size_t n = 0;
	unsigned k;

	if (!s->own_known || s->vote != MATCHER_VOTE_PENDING)
		return;
	for (k = 0; k < m->n_peers; k++)
		if (s->present & (1u << k))
			others[n++] = s->hash[k];
	if (!m->ck_warned && 1 + n > m->cfg->replicas) {
		m->ck_warned = 1;
		if (m->cfg->replicas == 1)
			log_notice("other replicas report checkpoints, but [matcher] replicas = 1: "
				   "their hashes are compared with this one's, no vote can stop it");
		else
			log_warn("%zu replicas reported the checkpoint at tape seq %llu, but "
				 "[matcher] replicas = %llu: no replica is outvoted until it is "
				 "set to the partition's number of replicas",
				 1 + n, (unsigned long long)s->seq,
				 (unsigned long long)m->cfg->replicas);
	}
	s->vote = (uint8_t)matcher_checkpoint_vote(s->own, others, n, (unsigned)m->cfg->replicas,
						   &majority);
	if (s->vote == MATCHER_VOTE_AGREED) {
		m->st.checkpoints_agreed++;
		if (s->seq > m->ck_last_agreed)
			m->ck_last_agreed = s->seq;
		log_debug("checkpoint at tape seq %llu agreed: hash %016llx",
			  (unsigned long long)s->seq, (unsigned long long)s->own);
		for (k = 0; k < m->n_peers; k++)
			if ((s->present & (1u << k)) && s->hash[k] != s->own)
				ckpt_dissent(m, s, k);
	} else if (s->vote == MATCHER_VOTE_DIVERGED && !m->diverged) {
		diverge(m, s, majority);
	}
}

void matcher_checkpoint_own(struct matcher *m, uint64_t seq)
{
	struct matcher_checkpoint c = { .partition = (uint32_t)m->cfg->partition, .seq = seq,
					.hash = engine_hash(m->engine) };
	uint8_t buf[MATCHER_CKPT_LEN + AUTH_TRAILER_LEN];
	struct matcher_checkpoint_slot *s;
	size_t n;

	snprintf(c.name, sizeof(c.name), "%s", m->cfg->node.name);
	if (matcher_checkpoint_encode(buf, &c) == MATCHER_CKPT_LEN &&
	    (n = auth_node_seal(AUTH_VOTE, buf, MATCHER_CKPT_LEN, sizeof(buf), AUTH_RAW)) &&
	    sendto(m->exec_fd, buf, n, 0, (const struct sockaddr *)&m->ck_group,
		   sizeof(m->ck_group)) == (ssize_t)n)
		m->st.checkpoints_sent++;
	else
		m->st.checkpoint_send_errors++;
	s = ckpt_slot(m, seq);
	if (!s) { /* the others are a whole window ahead: nothing to compare with */
		m->st.checkpoints_out_of_window++;
		return;
	}
	s->own = c.hash;
	s->own_known = 1;
	ckpt_decide(m, s);
}

uint64_t matcher_checkpoint_peers_high(const struct matcher *m)
{
	uint64_t high = 0;

	for (unsigned k = 0; k < m->n_peers; k++)
		if (!(m->ck_peer_dissent & (1u << k)) && m->ck_peer_seq[k] > high)
			high = m->ck_peer_seq[k];
	return high;
}

/* Peer k for `name`, added if new; -1 when the table is full. */
static int ckpt_peer(struct matcher *m, const char *name)
{
	for (unsigned k = 0; k < m->n_peers; k++)
		if (strcmp(m->ck_peer[k], name) == 0)
			return (int)k;
	if (m->n_peers == CKPT_PEERS)
		return -1;
	snprintf(m->ck_peer[m->n_peers], sizeof(m->ck_peer[0]), "%s", name);
	log_info("checkpoints: replica %s heard", name);
	return (int)m->n_peers++;
}

static void on_ckpt_packet(struct matcher *m, uint8_t *buf, size_t len,
			   const struct sockaddr_in *from)
{
	uint64_t k_ivl = m->cfg->checkpoint_interval;
	struct matcher_checkpoint c;
	struct matcher_checkpoint_slot *s;
	int err, k;

	if (auth_node_check(AUTH_VOTE, buf, &len, AUTH_RAW, from) < 0)
		return;
	if (!auth_node_from_host(m->ck_hosts, m->n_ck_hosts, from, "checkpoint vote",
				 "[matcher] replica_hosts", &m->st.checkpoints_not_member))
		return;
	err = matcher_checkpoint_decode(buf, len, &c);
	if (err < 0) {
		char a[32];

		net_format_addr(from, a, sizeof(a));
		m->st.checkpoints_malformed++;
		log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
				"malformed checkpoint datagram (%zu bytes) from %s dropped: %s",
				len, a, strerror(-err));
		return;
	}
	if (c.partition != m->cfg->partition) {
		m->st.checkpoints_other_partition++;
		return;
	}
	if (strcmp(c.name, m->cfg->node.name) == 0)
		return; /* our own, looped back */
	if (c.seq % k_ivl != 0) {
		m->st.checkpoints_ignored++;
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint of %s at tape seq %llu ignored: not a multiple of this "
				"replica's checkpoint_interval %llu",
				c.name, (unsigned long long)c.seq, (unsigned long long)k_ivl);
		return;
	}
	m->st.checkpoints_received++;
	if ((k = ckpt_peer(m, c.name)) < 0) {
		m->st.checkpoints_ignored++;
		log_ratelimited(&rl_ckpt, LOG_LVL_WARNING,
				"checkpoint of %s ignored: already %d other replicas heard", c.name,
				CKPT_PEERS);
		return;
	}
	if (c.seq > m->ck_peer_seq[k] && c.seq <= matcher_applied(m) + MATCHER_CKPT_AHEAD_MAX)
		m->ck_peer_seq[k] = c.seq; /* for a replica resuming after a pause */
	/* Beyond a window ahead it could only push out checkpoints still to
	 * be voted on, and would be pushed out itself before it is reached. */
	if (c.seq >= matcher_applied(m) + CKPT_WINDOW * k_ivl || !(s = ckpt_slot(m, c.seq))) {
		m->st.checkpoints_out_of_window++;
		return;
	}

	s->hash[k] = c.hash; /* a restarted replica may report a checkpoint again */
	s->present |= 1u << k;
	if (!s->own_known)
		return;
	if (s->vote == MATCHER_VOTE_PENDING)
		ckpt_decide(m, s);
	else if (s->vote == MATCHER_VOTE_AGREED && c.hash != s->own)
		ckpt_dissent(m, s, (unsigned)k);
}

static void on_ckpt(struct ev_loop *loop, ev_io *w, int revents)
{
	struct matcher *m = w->data;

	(void)loop;
	(void)revents;
	for (int round = 0; round < NET_DRAIN_ROUNDS; round++) {
		int n = net_batch_recv(&m->ck_rx, m->ck_fd);

		for (int i = 0; i < n; i++)
			on_ckpt_packet(m, net_batch_slot(&m->ck_rx, (unsigned)i), m->ck_rx.lens[i],
				       &m->ck_rx.addrs[i]);
		if (n < (int)m->ck_rx.n)
			break;
	}
}

/* The checkpoint group: [matcher] checkpoint_group, or the exec group's
 * address + 1 on its port (239.255.0.2:P gives 239.255.0.3:P), so that
 * clusters side by side on one host, which differ in their ports, do not
 * hear each other; sent and received on one socket, loopback on so that
 * replicas of one host hear each other (their own datagrams come back too,
 * and are told apart by name). */
int matcher_checkpoint_open(struct matcher *m)
{
	const struct matcher_config *c = m->cfg;
	struct net_udp_options o = { .nonblock = 1 };
	struct matcher_checkpoint probe = { .partition = (uint32_t)c->partition, .seq = 1 };
	uint8_t buf[MATCHER_CKPT_LEN];
	char g[32];
	int err;

	snprintf(probe.name, sizeof(probe.name), "%s", c->node.name);
	if (matcher_checkpoint_encode(buf, &probe) < 0) {
		log_err("[node] name \"%s\": a checkpoint carries a name of 1..%d printable "
			"characters, not ending in a space", c->node.name, MATCHER_CKPT_NAME_LEN);
		return -EINVAL;
	}
	if ((m->n_ck_hosts = addrlist_parse_hosts(c->replica_hosts, m->ck_hosts, ADDRLIST_MAX)) <
	    0) {
		log_err("[matcher] replica_hosts \"%s\": expected host,host,... (at most %d)",
			c->replica_hosts, ADDRLIST_MAX);
		return -EINVAL;
	}
	if (c->checkpoint_group[0]) {
		if ((err = net_parse_addr(c->checkpoint_group, &m->ck_group)) < 0) {
			log_err("[matcher] checkpoint_group \"%s\": %s", c->checkpoint_group,
				strerror(-err));
			return err;
		}
	} else {
		m->ck_group = m->exec_group;
		m->ck_group.sin_addr.s_addr = htonl(ntohl(m->exec_group.sin_addr.s_addr) + 1);
	}
	net_format_addr(&m->ck_group, g, sizeof(g));
	if (!IN_MULTICAST(ntohl(m->ck_group.sin_addr.s_addr))) {
		log_err("checkpoint group %s is not a multicast address: set [matcher] "
			"checkpoint_group", g);
		return -EINVAL;
	}
	m->ck_fd = net_mcast_recv_open(&m->ck_group, c->tape_iface, &o, NULL);
	if (m->ck_fd < 0) {
		log_err("checkpoint group %s on %s: %s", g, c->tape_iface, strerror(-m->ck_fd));
		return m->ck_fd;
	}
	log_notice("checkpoints every %llu tape seqs on %s; %llu replica(s), a majority is %llu%s",
		   (unsigned long long)c->checkpoint_interval, g, (unsigned long long)c->replicas,
		   (unsigned long long)(c->replicas / 2 + 1),
		   c->replicas == 1 ? " (this replica alone: never outvoted)" : "");
	return 0;
}

void matcher_checkpoint_start(struct matcher *m)
{
	if (m->ck_fd < 0)
		return;
	ev_io_init(&m->ck_io, on_ckpt, m->ck_fd, EV_READ);
	m->ck_io.data = m;
	ev_io_start(m->loop, &m->ck_io);
}
