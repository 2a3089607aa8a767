/* The group glue: raft (sequencer/raft.h) decides; this file gives it the
 * journal, the state file and the network (its I/O table), writes the
 * TermStart, turns its roles into the node's (becoming primary or standby),
 * publishes what it commits and checks and opens the group's config.
 * Raft's outputs queue in s->rq and leave by one sendmmsg after the journal
 * is flushed (seq_group_send), at the end of whatever event-loop callback
 * called it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addrlist.h"
#include "clock.h"
#include "durable.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "macros.h"
#include "moldudp64.h"
#include "net.h"
#include "raft.h"
#include "rx.h"
#include "seq_private.h"
#include "wire.h"

/* the warnings this file logs, each kind at most 5 a second */
static struct log_ratelimit rl_malformed = LOG_RATELIMIT_INIT(1, 5);

#define SEQ_RAFT_MAX_ENTRIES 2048 /* entries in one answer to a standby's REQUEST */

/* ---- raft's messages out ---------------------------------------------- */

void seq_group_send(struct sequencer *s)
{
	int r;

	r = seq_tape_sync(s); /* and under fsync = disk, the sync starts */
	if (r < 0 || s->rq_n == 0) {
		s->rq_n = 0; /* nothing leaves that the journal does not hold */
		if (r < 0)
			seq_journal_error(s, "journal", r);
		return;
	}
	auth_node_seal_batch(AUTH_RAFT, &s->rq, s->rq_n, AUTH_RAW);
	r = net_batch_send(&s->rq, s->raft_fd, s->rq_n);
	if (r > 0)
		s->st.raft_sent += (unsigned)r;
	if (r < 0 || (unsigned)r < s->rq_n)
		s->st.raft_send_errors += s->rq_n - (r < 0 ? 0 : (unsigned)r);
	s->rq_n = 0;
}

/* The next slot of the queue, addressed to `to`. */
static uint8_t *rq_slot(struct sequencer *s, const struct sockaddr_in *to)
{
	if (s->rq_n == s->rq.n)
		seq_group_send(s);
	s->rq.addrs[s->rq_n] = *to;
	return net_batch_slot(&s->rq, s->rq_n);
}

/* Queues an APPEND for every destination: the header for the tape
 * datagram dg (whose first event follows prev), then dg itself. */
static void rq_append(struct sequencer *s, const struct raft_msg *m, const int *dst, int nd,
		      const uint8_t *dg, size_t len, int last)
{
	struct raft_msg h = *m;

	if (!last)
		h.flags &= ~RAFT_F_END;
	/* the datagram's sequence number is its day's: the index is its
	 * first event's (common/tapeday.h) */
	h.seq = seq_dgram_first_index(dg, len) - 1;
	h.seq_term = journal_term_at(s->journal, h.seq);
	for (int i = 0; i < nd; i++) {
		uint8_t *p = rq_slot(s, &s->peers[dst[i]]);

		seq_raft_encode(p, &h, &s->tape_session);
		memcpy(p + SEQ_RAFT_WIRE_LEN, dg, len);
		s->rq.lens[s->rq_n++] = SEQ_RAFT_WIRE_LEN + len;
	}
}

/* raft's send(). An APPEND's entries are the batch just built in `out` (the
 * live path: each tape datagram goes to each standby behind a header) or
 * are read back from the journal (answers to REQUESTs, the term start). */
static void io_send(void *ctx, const struct raft_msg *m)
{
	struct sequencer *s = ctx;
	int dst[SEQ_MAX_PEERS], nd = 0;
	uint64_t from, to;

	for (int i = 0; i < s->n_peers; i++)
		if (i != s->id && (m->to == RAFT_ALL || m->to == i))
			dst[nd++] = i;
	if (m->type != RAFT_MSG_APPEND || m->n_entries == 0) {
		for (int i = 0; i < nd; i++) {
			uint8_t *p = rq_slot(s, &s->peers[dst[i]]);

			s->rq.lens[s->rq_n++] = seq_raft_encode(p, m, &s->tape_session);
		}
		return;
	}
	from = m->seq + 1;
	to = m->seq + m->n_entries;
	seq_tape_close_packet(s);
	if (s->out_n > 0 && s->out_first == from && s->next_seq - 1 == to) {
		for (unsigned k = 0; k < s->out_n; k++)
			rq_append(s, m, dst, nd, net_batch_slot(&s->out, k), s->out.lens[k],
				  k + 1 == s->out_n);
		return;
	}
	if (seq_tape_sync(s) < 0)
		return;
	while (from <= to) {
		uint64_t blocks = 0;
		unsigned n = seq_retrans_read(s, &s->jb, s->tape_cap, from, to, &blocks);

		if (n == 0 || blocks == 0)
			break;
		from += blocks;
		for (unsigned k = 0; k < n; k++)
			rq_append(s, m, dst, nd, net_batch_slot(&s->jb, k), s->jb.lens[k],
				  k + 1 == n && from > to);
	}
}

/* ---- the journal and the state file ----------------------------------- */

static uint64_t io_last_seq(void *ctx)
{
	return journal_last_seq(((struct sequencer *)ctx)->journal);
}

static uint64_t io_durable_seq(void *ctx)
{
	return journal_durable_seq(((struct sequencer *)ctx)->journal);
}

static uint64_t io_term_at(void *ctx, uint64_t seq)
{
	return journal_term_at(((struct sequencer *)ctx)->journal, seq);
}

/* The first event of a term, at seq, journalled directly (raft sends it to
 * the standbys from the journal). Packed with protobuf-c: once per term. */
static int write_term_start(struct sequencer *s, uint64_t seq, uint64_t term)
{
	Lockstep__TermStart ts = LOCKSTEP__TERM_START__INIT;
	Lockstep__Event ev = LOCKSTEP__EVENT__INIT;
	uint8_t buf[256];
	size_t n;
	int r;

	ts.node = s->cfg.node.name;
	ev.term = term;
	ev.seq = seq;
	ev.timestamp = wall_ns();
	ev.commit = seq;
	ev.body_case = LOCKSTEP__EVENT__BODY_TERM_START;
	ev.term_start = &ts;
	n = lockstep__event__get_packed_size(&ev);
	if (n > sizeof(buf) || n > s->tape_cap - MOLD_HEADER_LEN - 2)
		return -EMSGSIZE;
	lockstep__event__pack(&ev, buf);
	r = journal_append(s->journal, seq, term, buf, n);
	if (r == 0)
		s->journal_dirty = 1;
	return r;
}

static int io_append(void *ctx, uint64_t seq, uint64_t term, const void *data, size_t len)
{
	struct sequencer *s = ctx;
	struct tape_event_view v;
	int peeked = seq_day_peeks(s) && tape_event_peek(data, len, &v) == 0;
	int r;

	if (peeked)
		seq_day_before_append(s, seq, &v);
	r = journal_append(s->journal, seq, term, data, len);
	if (r < 0) {
		if (r == -ENOSPC || r == -EDQUOT)
			seq_journal_error(s, "journal", r); /* raft asks for it again later */
		return r;
	}
	s->journal_dirty = 1;
	if (peeked)
		seq_day_note(s, seq, &v);
	if (peeked && s->state != SEQ_PRIMARY) /* replicated: the primary's command numbers */
		seq_gw_note(s, &v);
	return 0;
}

static int io_append_term_start(void *ctx, uint64_t seq, uint64_t term)
{
	struct sequencer *s = ctx;
	int r = write_term_start(s, seq, term);

	if (r == 0)
		s->next_seq = seq + 1;
	return r;
}

static int io_truncate_after(void *ctx, uint64_t seq)
{
	struct sequencer *s = ctx;
	int r = journal_truncate_after(s->journal, seq);

	if (r < 0)
		return r;
	log_warn("journal: uncommitted events after %llu cut (they differ from the primary's)",
		 (unsigned long long)seq);
	tapeday_forget_after(&s->days, seq); /* the market's state: at the rescan */
	s->gw_dirty = 1;
	s->next_seq = seq + 1;
	return 0;
}

/* The term and vote, in state_dir/raft-state (durable.h: a crash leaves
 * the old or the new). */
static int io_save_state(void *ctx, uint64_t term, int voted_for)
{
	struct sequencer *s = ctx;
	char path[320], text[64];
	struct iovec iov = { text, 0 };
	int r;

	snprintf(path, sizeof(path), "%s/raft-state", s->cfg.node.state_dir);
	iov.iov_len = (size_t)snprintf(text, sizeof(text), "%llu %d\n", (unsigned long long)term,
				       voted_for);
	r = durable_write(path, &iov, 1, 0640);
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	return r;
}

/* Reads what io_save_state wrote; a missing file is a first start. */
static int load_state(struct sequencer *s, uint64_t *term, int *voted_for)
{
	char path[320];
	unsigned long long t;
	int v;
	FILE *f;

	*term = 0;
	*voted_for = RAFT_NOBODY;
	snprintf(path, sizeof(path), "%s/raft-state", s->cfg.node.state_dir);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	if (fscanf(f, "%llu %d", &t, &v) != 2 || v < RAFT_NOBODY || v >= s->n_peers) {
		fclose(f);
		log_err("%s: not 'TERM VOTE': remove it only if this node's vote does not matter",
			path);
		return -EINVAL;
	}
	fclose(f);
	*term = t;
	*voted_for = v;
	return 0;
}

/* ---- roles and commits ------------------------------------------------- */

/* This node has just won its term: the gateways' streams start again from
 * what the journal holds (a cut tail is forgotten), the tape goes on after
 * what the journal holds (entries of older terms that were never multicast
 * are fetched by the receivers through retransmission), and raft appends
 * the TermStart next. */
static void become_primary(struct sequencer *s, uint64_t term)
{
	if (s->gw_dirty) {
		int r = seq_gw_rebuild(s, 1);

		if (r < 0)
			log_err("journal: rescanning the gateways' numbers: %s", strerror(-r));
		s->gw_dirty = 0;
	}
	seq_gw_restart(s);
	s->published = journal_last_seq(s->journal);
	s->next_seq = s->published + 1;
	s->pend_n = 0;
	s->out_n = 0;
	s->out_open = 0;
	log_notice("primary: term %llu from seq %llu, tape %s session %s, commands on port %d, "
		   "retransmissions on port %d (group of %d)",
		   (unsigned long long)term, (unsigned long long)s->next_seq, s->cfg.tape_group,
		   s->cfg.tape_session, net_local_port(s->cmd_fd), net_local_port(s->retrans_fd),
		   s->n_peers);
}

static void io_role(void *ctx, enum raft_role role, uint64_t term, int primary)
{
	struct sequencer *s = ctx;
	enum seq_state st = role == RAFT_PRIMARY ? SEQ_PRIMARY
			    : role != RAFT_STANDBY ? SEQ_CANDIDATE
			    : primary == RAFT_NOBODY ? SEQ_WAITING
						     : SEQ_STANDBY;

	if (s->state == SEQ_STOPPED)
		return;
	s->term = term;
	if (st == SEQ_PRIMARY && s->state != SEQ_PRIMARY) {
		s->state = st;
		s->primary_id = primary;
		become_primary(s, term);
		seq_gw_mode(s);
		return;
	}
	if (s->state == SEQ_PRIMARY && st != SEQ_PRIMARY) {
		/* Deposed: what was built and not replicated is dropped (never
		 * multicast: it was not committed); the gateways keep it. */
		s->out_n = 0;
		s->out_open = 0;
		s->pend_n = 0;
		ev_timer_stop(s->loop, &s->rx_timer);
		log_warn("no longer primary: term %llu, %s", (unsigned long long)term,
			 seq_state_names[st]);
	}
	if (st == SEQ_STANDBY && (s->state != SEQ_STANDBY || s->primary_id != primary)) {
		char a[32];

		net_format_addr(&s->peers[primary], a, sizeof(a));
		log_notice("standby: term %llu, primary is node %d (%s)", (unsigned long long)term,
			   primary, a);
	} else if (st == SEQ_CANDIDATE && s->state != SEQ_CANDIDATE)
		log_info("election: no primary heard in term %llu, asking for votes",
			 (unsigned long long)term);
	s->state = st;
	s->primary_id = primary;
	seq_gw_mode(s);
}

static void io_apply(void *ctx, uint64_t from, uint64_t to)
{
	struct sequencer *s = ctx;

	s->commit = to;
	if (s->state == SEQ_PRIMARY)
		seq_tape_publish(s, from, to);
}

static uint64_t io_random(void *ctx)
{
	return rx_rng_next(&((struct sequencer *)ctx)->rng);
}

/* ---- timer and socket -------------------------------------------------- */

static void raft_arm(struct sequencer *s)
{
	uint64_t d = raft_deadline(s->raft), now = mono_ns();

	ev_timer_stop(s->loop, &s->raft_timer);
	ev_timer_set(&s->raft_timer, d > now ? (double)(d - now) / 1e9 : 0., 0.);
	ev_timer_start(s->loop, &s->raft_timer);
}

/* After every call into raft: its messages leave, its timer moves. */
void seq_group_done(struct sequencer *s, int r)
{
	if (r < 0) {
		seq_fail(s, "raft (journal or state file)", r);
		return;
	}
	seq_group_send(s);
	raft_arm(s);
}

static void on_raft_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, raft_timer);

	(void)loop;
	(void)revents;
	s->now_ns = mono_ns();
	s->now_wall = wall_ns();
	seq_group_done(s, raft_tick(s->raft, s->now_ns));
}

/* After raft_receive: a message whose term raft refused as insane (a
 * forged or broken datagram, RAFT_TERM_STEP_MAX) gets a line naming its
 * source (rate-limited). */
static void raft_term_check(struct sequencer *s, const struct raft_msg *m,
			    const struct sockaddr_in *from)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(1, 5);
	struct raft_stats rs;
	char a[32];

	raft_get_stats(s->raft, &rs);
	if (rs.terms_refused == s->terms_refused_seen)
		return;
	s->terms_refused_seen = rs.terms_refused;
	net_format_addr(from, a, sizeof(a));
	log_ratelimited(&rl, LOG_LVL_WARNING,
			"raft %s from %s (node %d) refused: term %llu against ours %llu (a member "
			"moves at most %llu terms at once; entries never newer than their message)",
			raft_msg_name(m->type), a, m->from, (unsigned long long)m->term,
			(unsigned long long)raft_term(s->raft), (unsigned long long)RAFT_TERM_STEP_MAX);
}

/* Members only: node k's raft socket is bound to peers[k], so what claims
 * to be from k and comes from elsewhere is not k's (a copy of its datagram
 * sent from another host, or a member speaking for another). */
static int raft_from_member(struct sequencer *s, const struct raft_msg *m,
			    const struct sockaddr_in *from)
{
	const struct sockaddr_in *p = &s->peers[m->from];
	char a[32], want[32];

	if (net_addr_same(p, from))
		return 1;
	s->st.raft_not_member++;
	net_format_addr(from, a, sizeof(a));
	net_format_addr(p, want, sizeof(want));
	log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
			"raft %s from %s refused: it names node %d, whose address is %s",
			raft_msg_name(m->type), a, m->from, want);
	return 0;
}

static void on_raft_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, raft_io);
	int r = 0;

	(void)loop;
	(void)revents;
	for (uint64_t round = 0; round < s->cfg.drain && r == 0; round++) {
		int n = net_batch_recv_counted(&s->raft_in, s->raft_fd, &s->rxq_raft);

		if (n <= 0)
			break;
		s->now_ns = mono_ns();
		s->now_wall = wall_ns();
		for (int i = 0; i < n && r == 0; i++) {
			uint8_t *buf = net_batch_slot(&s->raft_in, (unsigned)i);
			size_t len = s->raft_in.lens[i];
			struct raft_msg m;

			if (auth_node_check(AUTH_RAFT, buf, &len, AUTH_RAW, &s->raft_in.addrs[i]) < 0 ||
			    rx_drop(&s->drop_raft, buf, len))
				continue;
			if (seq_raft_decode(buf, len, &s->tape_session, s->n_peers, &m) < 0 ||
			    (m.to != RAFT_ALL && m.to != s->id) || m.from == s->id ||
			    (m.type == RAFT_MSG_APPEND &&
			     seq_raft_decode_entries(buf, len, &s->tape_session, &m, s->entries,
						     s->max_entries) < 0)) {
				char a[32];

				s->st.raft_malformed++;
				net_format_addr(&s->raft_in.addrs[i], a, sizeof(a));
				log_ratelimited(&rl_malformed, LOG_LVL_WARNING,
						"raft datagram (%zu bytes) from %s refused", len, a);
				continue;
			}
			if (!raft_from_member(s, &m, &s->raft_in.addrs[i]))
				continue;
			s->st.raft_received++;
			r = raft_receive(s->raft, &m, s->now_ns);
			raft_term_check(s, &m, &s->raft_in.addrs[i]);
		}
		if ((unsigned)n < s->raft_in.n)
			break;
	}
	seq_group_done(s, r);
}

/* ---- config and start ------------------------------------------------- */

int seq_parse_peers(const char *peers, struct sockaddr_in *out, int max)
{
	int n;

	if (peers[strspn(peers, " \t")] == '\0')
		return 0; /* a group of one */
	n = addrlist_parse(peers, out, max);
	if (n == -E2BIG)
		return n;
	if (n < 0)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (out[i].sin_port == 0)
			return -EINVAL;
	return n;
}

/* The group: peers, node_id, the election timeouts. */
int seq_group_check(struct sequencer *s)
{
	const struct seq_config *c = &s->cfg;
	int n = seq_parse_peers(c->peers, s->peers, SEQ_MAX_PEERS);

	if (n < 0) {
		log_err("peers '%s': %s", c->peers,
			n == -E2BIG ? "more than 9 members" : "expected host:port,host:port,...");
		return -EINVAL;
	}
	if ((s->n_gw_hosts = addrlist_parse_hosts(c->gateways, s->gw_hosts, ADDRLIST_MAX)) < 0) {
		log_err("gateways '%s': expected host,host,... (at most %d)", c->gateways,
			ADDRLIST_MAX);
		return -EINVAL;
	}
	if (c->node_id >= (uint64_t)(n ? n : 1)) {
		log_err("node_id %llu: not an index of peers (%d members)",
			(unsigned long long)c->node_id, n ? n : 1);
		return -EINVAL;
	}
	if (c->election_max_ns < c->election_min_ns) {
		log_err("election_max is shorter than election_min");
		return -EINVAL;
	}
	if (n > 1 && seq_fsync_modes[c->fsync] == JOURNAL_FSYNC_NONE) {
		log_err("fsync = none in a group of %d: an acknowledged event could be lost by a "
			"crash of a majority; use disk or majority-memory",
			n);
		return -EINVAL;
	}
	if (n <= 1 && seq_fsync_modes[c->fsync] == JOURNAL_FSYNC_INTERVAL) {
		log_err("fsync = majority-memory on a single sequencer: its memory is the "
			"majority, and a power cut loses what it acknowledged; use disk (or none, "
			"for a lab)");
		return -EINVAL;
	}
	if (n <= 1 && seq_fsync_modes[c->fsync] == JOURNAL_FSYNC_NONE)
		log_warn("fsync = none: the journal is never synced; a power cut loses what was "
			 "acknowledged (a lab only)");
	if (n > 1 && c->max_datagram < 512) {
		log_err("max_datagram %llu: a group needs at least 512 (the raft header "
			"rides on each tape datagram)",
			(unsigned long long)c->max_datagram);
		return -EINVAL;
	}
	s->n_peers = n ? n : 1;
	s->id = (int)c->node_id;
	/* a tape datagram, its tag, and behind a raft header with a tag of its own */
	s->tape_cap = c->max_datagram - auth_node_reserve() -
		      (n > 1 ? SEQ_RAFT_WIRE_LEN + auth_node_reserve() : 0);
	return 0;
}

/* Raft's state machine over the journal and the state file; the raft
 * socket. A group of one becomes the primary at the first tick. */
int seq_group_open(struct sequencer *s)
{
	struct raft_config rc = {
		.id = s->id,
		.n_nodes = s->n_peers,
		.heartbeat_ns = s->cfg.raft_heartbeat_ns,
		.election_min_ns = s->cfg.election_min_ns,
		.election_max_ns = s->cfg.election_max_ns,
		.max_entries = SEQ_RAFT_MAX_ENTRIES,
	};
	struct raft_io io = {
		.ctx = s,
		.last_seq = io_last_seq,
		.durable_seq = io_durable_seq,
		.term_at = io_term_at,
		.append = io_append,
		.append_term_start = io_append_term_start,
		.truncate_after = io_truncate_after,
		.save_state = io_save_state,
		.send = io_send,
		.role = io_role,
		.apply = io_apply,
		.random = io_random,
	};
	int r;

	if ((r = load_state(s, &rc.term, &rc.voted_for)) < 0)
		return r;
	if (s->n_peers > 1) {
		struct net_udp_options o = { .rcvbuf = 4 << 20, .sndbuf = (int)s->cfg.sndbuf,
					     .nonblock = 1, .rxq_ovfl = 1 };
		char a[32];

		net_format_addr(&s->peers[s->id], a, sizeof(a));
		if ((r = seq_open_udp("raft (peers[node_id])", a, &o, &s->raft_fd)) < 0)
			return r;
	}
	r = raft_open(&s->raft, &rc, &io, mono_ns());
	if (r == -ERANGE) {
		log_err("raft: the saved term (%llu) or the journal's last term is at or beyond "
			"%llu, which no history of elections reaches: the state file or journal is "
			"damaged or was forged; restore this node's state directory",
			(unsigned long long)rc.term, (unsigned long long)RAFT_TERM_LIMIT);
		return r;
	}
	if (r < 0) {
		log_err("raft: %s", strerror(-r));
		return r;
	}
	if (s->n_peers > 1)
		log_notice("group of %d, node %d: term %llu, journal up to seq %llu; waiting for a "
			   "primary",
			   s->n_peers, s->id, (unsigned long long)raft_term(s->raft),
			   (unsigned long long)journal_last_seq(s->journal));
	return 0;
}


/* fsync = disk: a background sync of the journal ended. What a majority
 * now holds on disk is committed (and multicast), or a standby ACKs it. */
static void on_sync_done(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sequencer *s = container_of(w, struct sequencer, sync_io);
	int r = journal_poll(s->journal);

	(void)loop;
	(void)revents;
	if (r < 0) {
		seq_journal_error(s, "journal fsync", r);
		return;
	}
	s->st.journal_syncs += (unsigned)r;
	if (r > 0 && (r = raft_durable(s->raft, mono_ns())) < 0) {
		seq_fail(s, "raft", r);
		return;
	}
	seq_group_send(s);
}

void seq_group_start(struct sequencer *s)
{
	int fd = journal_sync_fd(s->journal);

	if (fd >= 0) {
		ev_io_init(&s->sync_io, on_sync_done, fd, EV_READ);
		ev_io_start(s->loop, &s->sync_io);
	}
	ev_init(&s->raft_timer, on_raft_timer);
	if (s->raft_fd >= 0) {
		ev_io_init(&s->raft_io, on_raft_readable, s->raft_fd, EV_READ);
		ev_io_start(s->loop, &s->raft_io);
	}
}
