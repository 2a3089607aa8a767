/* raft: the sequencer group's replication and election (see raft.h). */
#include "raft.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

struct raft {
	struct raft_config cfg;
	struct raft_io io;
	struct raft_stats stats;
	enum raft_role role;
	uint64_t term;
	int voted_for;
	int primary; /* known primary of `term`, RAFT_NOBODY */
	uint64_t commit; /* highest committed seq known */
	uint64_t applied; /* handed to apply() */

	/* standby */
	uint64_t election_at; /* start an election at this time */
	uint64_t primary_seen; /* last APPEND/HEARTBEAT of the current primary */
	uint64_t verified; /* entries up to here match the primary's log */
	uint64_t primary_last; /* highest seq the primary is known to have sent */
	uint64_t acked; /* seq of the last ACK sent */
	uint64_t want; /* first entry to ask for (0: nothing) */
	uint64_t req_at; /* when the outstanding REQUEST for `want` went */
	uint64_t req_end; /* its answer ends before this entry (at most max_entries) */
	int req_pending;

	/* (pre)candidate */
	unsigned votes; /* bit i: node i granted */
	uint64_t asked_at; /* last vote request sent (asked again every heartbeat) */

	/* primary */
	uint64_t match[RAFT_MAX_NODES]; /* seq known to match ours, per node */
	uint64_t heard[RAFT_MAX_NODES]; /* last message of our term, per node */
	uint64_t sent_upto; /* last entry multicast */
	uint64_t bcast_at; /* last multicast (APPEND or HEARTBEAT) */
	uint64_t primary_since;
	int transfer_to; /* hand-over under way to this node, RAFT_NOBODY */
	uint64_t transfer_until; /* abandoned at this time */
	uint64_t transfer_sent; /* last TIMEOUT_NOW (0: none yet) */

	uint64_t saved_term; /* as last saved (save_state succeeded) */
	int saved_vote;
	int down; /* raft_stand_down: no elections started here */

	/* last reported through io.role */
	enum raft_role rep_role;
	uint64_t rep_term;
	int rep_primary;
};

static const char *const role_names[RAFT_ROLE_MAX] = {
	[RAFT_STANDBY] = "standby",
	[RAFT_PRECANDIDATE] = "precandidate",
	[RAFT_CANDIDATE] = "candidate",
	[RAFT_PRIMARY] = "primary",
};

static const char *const msg_names[RAFT_MSG_MAX] = {
	[RAFT_MSG_VOTE] = "vote",
	[RAFT_MSG_VOTE_REPLY] = "vote-reply",
	[RAFT_MSG_APPEND] = "append",
	[RAFT_MSG_HEARTBEAT] = "heartbeat",
	[RAFT_MSG_ACK] = "ack",
	[RAFT_MSG_REQUEST] = "request",
	[RAFT_MSG_TIMEOUT_NOW] = "timeout-now",
};

const char *raft_role_name(enum raft_role role)
{
	return (unsigned)role < RAFT_ROLE_MAX ? role_names[role] : "?";
}

const char *raft_msg_name(enum raft_msg_type type)
{
	return (unsigned)type < RAFT_MSG_MAX ? msg_names[type] : "?";
}

static int majority(const struct raft *r)
{
	return r->cfg.n_nodes / 2 + 1;
}

static uint64_t last_seq(const struct raft *r)
{
	return r->io.last_seq(r->io.ctx);
}

static uint64_t term_at(const struct raft *r, uint64_t seq)
{
	return seq ? r->io.term_at(r->io.ctx, seq) : 0;
}

/* The last entry this node holds on disk: io.durable_seq, or (without it)
 * the whole journal. */
static uint64_t durable(const struct raft *r)
{
	uint64_t last = last_seq(r), d;

	if (!r->io.durable_seq || (r->cfg.bugs & RAFT_BUG_COUNT_VOLATILE))
		return last;
	d = r->io.durable_seq(r->io.ctx);
	return d < last ? d : last;
}

static uint64_t election_timeout(struct raft *r)
{
	uint64_t span = r->cfg.election_max_ns - r->cfg.election_min_ns;

	return r->cfg.election_min_ns + (span ? r->io.random(r->io.ctx) % (span + 1) : 0);
}

static void report(struct raft *r)
{
	if (r->role == r->rep_role && r->term == r->rep_term && r->primary == r->rep_primary)
		return;
	r->rep_role = r->role;
	r->rep_term = r->term;
	r->rep_primary = r->primary;
	if (r->io.role)
		r->io.role(r->io.ctx, r->role, r->term, r->primary);
}

static int nospace(int e)
{
	return e == -ENOSPC || e == -EDQUOT;
}

/* Persists the term and vote. When the disk is full the term and vote go
 * back to what was saved (nothing may act on an unsaved vote or term) and
 * the error climbs to raft_receive or raft_tick, which ignore the message
 * or the timeout. */
static int save(struct raft *r)
{
	int e = r->io.save_state(r->io.ctx, r->term,
				 r->cfg.bugs & RAFT_BUG_FORGET_VOTE ? RAFT_NOBODY : r->voted_for);

	if (e == 0) {
		r->saved_term = r->term;
		r->saved_vote = r->voted_for;
	} else if (nospace(e)) {
		r->term = r->saved_term;
		r->voted_for = r->saved_vote;
	}
	return e;
}

static void emit(struct raft *r, struct raft_msg *m)
{
	m->from = r->cfg.id;
	if (m->term == 0)
		m->term = r->term;
	r->io.send(r->io.ctx, m);
}

static void set_commit(struct raft *r, uint64_t commit)
{
	if (commit <= r->commit)
		return;
	r->commit = commit;
	if (commit > r->applied) {
		uint64_t from = r->applied + 1;

		r->applied = commit;
		if (r->io.apply)
			r->io.apply(r->io.ctx, from, commit);
	}
}

/* Takes a newer term (or, with term == r->term, just falls back to
 * standby). */
static int step_down(struct raft *r, uint64_t term, uint64_t now)
{
	int e = 0;

	if (term > r->term) {
		r->term = term;
		r->voted_for = RAFT_NOBODY;
		r->primary = RAFT_NOBODY;
		r->verified = r->commit; /* a committed prefix is in every later log */
		r->primary_last = 0;
		r->want = 0;
		r->req_pending = 0;
		e = save(r);
	}
	if (r->role != RAFT_STANDBY) {
		if (r->role == RAFT_PRIMARY) {
			r->primary = RAFT_NOBODY;
			r->verified = r->commit;
			r->transfer_to = RAFT_NOBODY;
		}
		r->role = RAFT_STANDBY;
		r->election_at = now + election_timeout(r);
	}
	report(r);
	return e;
}

/* ---- the primary ---- */

static void send_heartbeat(struct raft *r, uint64_t now)
{
	struct raft_msg m = {
		.type = RAFT_MSG_HEARTBEAT,
		.to = RAFT_ALL,
		.seq = r->sent_upto,
		.seq_term = term_at(r, r->sent_upto),
		.commit = r->commit,
	};

	if (r->cfg.n_nodes > 1)
		emit(r, &m);
	r->bcast_at = now;
}

/* Commits the highest seq a majority holds, if it is of our term (an
 * older term's entry commits with it, never by counting: Raft 5.4.2). */
static int advance_commit(struct raft *r)
{
	uint64_t v[RAFT_MAX_NODES], n;
	int k = r->cfg.n_nodes;

	for (int i = 0; i < k; i++)
		v[i] = i == r->cfg.id ? durable(r) : r->match[i];
	for (int i = 1; i < k; i++) /* insertion sort, descending; k <= 9 */
		for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
			uint64_t t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	n = v[majority(r) - 1];
	if (n <= r->commit)
		return 0;
	if (term_at(r, n) != r->term && !(r->cfg.bugs & RAFT_BUG_COMMIT_OLD_TERM))
		return 0;
	set_commit(r, n);
	return 1;
}

static int become_primary(struct raft *r, uint64_t now)
{
	uint64_t seq = last_seq(r) + 1;
	int e;

	r->role = RAFT_PRIMARY;
	r->primary = r->cfg.id;
	r->primary_since = now;
	for (int i = 0; i < r->cfg.n_nodes; i++) {
		r->match[i] = 0;
		r->heard[i] = now;
	}
	r->req_pending = 0;
	r->transfer_to = RAFT_NOBODY;
	report(r);
	if ((e = r->io.append_term_start(r->io.ctx, seq, r->term)) < 0)
		return e;
	r->sent_upto = seq - 1;
	return raft_flush(r, now);
}

int raft_propose(struct raft *r, const void *data, size_t len, uint64_t *seq)
{
	uint64_t s;
	int e;

	if (r->role != RAFT_PRIMARY)
		return -EPERM;
	if (r->transfer_to != RAFT_NOBODY)
		return -EBUSY;
	s = last_seq(r) + 1;
	if ((e = r->io.append(r->io.ctx, s, r->term, data, len)) < 0)
		return e;
	*seq = s;
	return 0;
}

int raft_flush(struct raft *r, uint64_t now)
{
	uint64_t last;

	if (r->role != RAFT_PRIMARY)
		return 0;
	last = last_seq(r);
	if (last <= r->sent_upto)
		return 0;
	advance_commit(r); /* a group of one */
	if (r->cfg.n_nodes > 1) {
		struct raft_msg m = {
			.type = RAFT_MSG_APPEND,
			.to = RAFT_ALL,
			.seq = r->sent_upto,
			.seq_term = term_at(r, r->sent_upto),
			.commit = r->commit,
			.n_entries = (uint32_t)(last - r->sent_upto),
		};

		emit(r, &m);
	}
	r->sent_upto = last;
	r->bcast_at = now;
	return 0;
}

/* A hand-over: once the target holds our whole log, it is told to start
 * an election now (again every heartbeat interval, in case that was lost). */
static void transfer_step(struct raft *r, uint64_t now)
{
	uint64_t last = last_seq(r);
	int to = r->transfer_to;

	if (to == RAFT_NOBODY || r->match[to] < last ||
	    (r->transfer_sent && now - r->transfer_sent < r->cfg.heartbeat_ns / 2))
		return;
	struct raft_msg m = {
		.type = RAFT_MSG_TIMEOUT_NOW,
		.to = to,
		.seq = last,
		.seq_term = term_at(r, last),
		.commit = r->commit,
	};
	emit(r, &m);
	r->transfer_sent = now;
}

int raft_transfer(struct raft *r, int to, uint64_t now)
{
	if (r->role != RAFT_PRIMARY)
		return -EPERM;
	if (r->transfer_to != RAFT_NOBODY)
		return -EALREADY;
	if (to != RAFT_NOBODY && (to < 0 || to >= r->cfg.n_nodes || to == r->cfg.id))
		return -EINVAL;
	if (to == RAFT_NOBODY) {
		for (int i = 0; i < r->cfg.n_nodes; i++) {
			if (i == r->cfg.id || now - r->heard[i] >= r->cfg.election_max_ns)
				continue;
			if (to == RAFT_NOBODY || r->match[i] > r->match[to] ||
			    (r->match[i] == r->match[to] && r->heard[i] > r->heard[to]))
				to = i;
		}
	} else if (now - r->heard[to] >= r->cfg.election_max_ns) {
		to = RAFT_NOBODY;
	}
	if (to == RAFT_NOBODY)
		return -EHOSTUNREACH;
	r->transfer_to = to;
	r->transfer_until = now + r->cfg.election_max_ns;
	r->transfer_sent = 0;
	r->stats.transfers++;
	transfer_step(r, now);
	return 0;
}

int raft_transfer_target(const struct raft *r)
{
	return r->role == RAFT_PRIMARY ? r->transfer_to : RAFT_NOBODY;
}

static void on_ack(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	r->heard[m->from] = now;
	if (m->seq > last_seq(r) || term_at(r, m->seq) != m->seq_term)
		return; /* not (yet) our log */
	if (m->seq > r->match[m->from])
		r->match[m->from] = m->seq;
	/* announce a new commit at once when no APPEND is about to carry it */
	if (advance_commit(r) && r->sent_upto == last_seq(r))
		send_heartbeat(r, now);
	if (m->from == r->transfer_to)
		transfer_step(r, now);
}

static void on_request(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	uint64_t last = last_seq(r), from = m->seq ? m->seq : 1, n;

	r->heard[m->from] = now;
	if (from > last + 1)
		from = last + 1;
	n = last - from + 1;
	if (n > r->cfg.max_entries)
		n = r->cfg.max_entries;
	struct raft_msg a = {
		.type = RAFT_MSG_APPEND,
		.to = m->from,
		.seq = from - 1,
		.seq_term = term_at(r, from - 1),
		.commit = r->commit,
		.n_entries = (uint32_t)n,
		.flags = RAFT_F_END,
	};
	emit(r, &a);
	r->stats.requests_served++;
}

static int primary_tick(struct raft *r, uint64_t now)
{
	if (!r->cfg.no_check_quorum && r->cfg.n_nodes > 1 &&
	    now - r->primary_since >= r->cfg.election_max_ns) {
		int alive = 1;

		for (int i = 0; i < r->cfg.n_nodes; i++)
			if (i != r->cfg.id && now - r->heard[i] < r->cfg.election_max_ns)
				alive++;
		if (alive < majority(r)) {
			r->stats.stepdowns++;
			return step_down(r, r->term, now);
		}
	}
	if (r->transfer_to != RAFT_NOBODY) {
		if (now >= r->transfer_until) {
			r->transfer_to = RAFT_NOBODY;
			r->stats.transfers_abandoned++;
		} else {
			transfer_step(r, now);
		}
	}
	if (now - r->bcast_at >= r->cfg.heartbeat_ns)
		send_heartbeat(r, now);
	return 0;
}

/* ---- elections ---- */

static int up_to_date(const struct raft *r, const struct raft_msg *m)
{
	uint64_t last = last_seq(r), lt = term_at(r, last);

	if (r->cfg.bugs & RAFT_BUG_VOTE_ANY_LOG)
		return 1;
	return m->seq_term > lt || (m->seq_term == lt && m->seq >= last);
}

/* m's log is more up to date than ours, or as up to date with a lower id */
static int better(const struct raft *r, const struct raft_msg *m)
{
	uint64_t last = last_seq(r), lt = term_at(r, last);

	if (m->seq_term != lt)
		return m->seq_term > lt;
	if (m->seq != last)
		return m->seq > last;
	return m->from < r->cfg.id;
}

/* The vote request of our (pre)candidacy; sent again every heartbeat
 * interval until the candidacy ends, so that one lost datagram costs a
 * heartbeat, not an election timeout and a term. A voter answers a repeat
 * as it answered the first (one vote per term, a pre-vote changes nothing). */
static void send_vote_request(struct raft *r, uint64_t now)
{
	uint64_t last = last_seq(r);
	int pre = r->role == RAFT_PRECANDIDATE;
	struct raft_msg m = {
		.type = RAFT_MSG_VOTE,
		.to = RAFT_ALL,
		.term = pre ? r->term + 1 : r->term,
		.seq = last,
		.seq_term = term_at(r, last),
		.flags = pre ? RAFT_F_PRE : 0,
	};

	r->asked_at = now;
	if (r->cfg.n_nodes > 1)
		emit(r, &m);
}

static void ask_votes(struct raft *r, uint64_t now)
{
	r->votes = 1u << r->cfg.id;
	send_vote_request(r, now);
}

static int won(const struct raft *r)
{
	return __builtin_popcount(r->votes) >= majority(r);
}

static int start_election(struct raft *r, uint64_t now)
{
	int e;

	if (r->term >= RAFT_TERM_LIMIT)
		return 0; /* never: raft_open and raft_receive keep terms below */
	r->term++;
	r->voted_for = r->cfg.id;
	r->primary = RAFT_NOBODY;
	r->verified = r->commit;
	r->primary_last = 0;
	r->want = 0;
	r->req_pending = 0;
	r->role = RAFT_CANDIDATE;
	r->election_at = now + election_timeout(r);
	r->stats.elections++;
	if ((e = save(r)) < 0) {
		if (nospace(e))
			r->role = RAFT_STANDBY; /* no new term: a standby as before */
		return e;
	}
	report(r);
	ask_votes(r, now);
	return won(r) ? become_primary(r, now) : 0;
}

static int start_prevote(struct raft *r, uint64_t now)
{
	if (r->cfg.no_prevote)
		return start_election(r, now);
	r->role = RAFT_PRECANDIDATE;
	r->primary = RAFT_NOBODY;
	r->election_at = now + election_timeout(r);
	r->stats.prevotes++;
	report(r);
	ask_votes(r, now);
	return won(r) ? start_election(r, now) : 0;
}

static int on_vote(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	struct raft_msg rep = { .type = RAFT_MSG_VOTE_REPLY, .to = m->from };
	int e;

	if (m->flags & RAFT_F_PRE) {
		/* no state changes; refused while a primary is heard */
		int lease = r->role == RAFT_PRIMARY ||
			    (r->role == RAFT_STANDBY && r->primary != RAFT_NOBODY &&
			     now - r->primary_seen < r->cfg.election_min_ns);
		int grant = m->term > r->term && !lease && up_to_date(r, m);

		rep.flags = RAFT_F_PRE | (grant ? RAFT_F_GRANTED : 0);
		rep.term = grant ? m->term : r->term;
		emit(r, &rep);
		/* Two nodes that time out together would both win their pre-votes
		 * and split the real vote (a whole election timeout lost, in a
		 * group of 3 for sure): the one with the worse log, or with the
		 * same log and the higher id, steps back. */
		if (grant && r->role == RAFT_PRECANDIDATE && better(r, m)) {
			r->role = RAFT_STANDBY;
			r->election_at = now + election_timeout(r);
			report(r);
		}
		return 0;
	}
	if (m->term > r->term && (e = step_down(r, m->term, now)) < 0)
		return e;
	if (m->term == r->term && (r->voted_for == RAFT_NOBODY || r->voted_for == m->from) &&
	    up_to_date(r, m)) {
		r->voted_for = m->from;
		if ((e = save(r)) < 0)
			return e;
		r->election_at = now + election_timeout(r);
		r->stats.votes_granted++;
		rep.flags = RAFT_F_GRANTED;
	}
	emit(r, &rep);
	return 0;
}

static int on_vote_reply(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	if (m->flags & RAFT_F_PRE) {
		if (m->term > r->term + 1 || (m->term > r->term && !(m->flags & RAFT_F_GRANTED)))
			return step_down(r, m->term, now); /* a newer term exists */
		if (r->role != RAFT_PRECANDIDATE || m->term != r->term + 1 ||
		    !(m->flags & RAFT_F_GRANTED))
			return 0;
		r->votes |= 1u << m->from;
		return won(r) ? start_election(r, now) : 0;
	}
	if (m->term > r->term)
		return step_down(r, m->term, now);
	if (m->term < r->term || r->role != RAFT_CANDIDATE || !(m->flags & RAFT_F_GRANTED))
		return 0;
	r->votes |= 1u << m->from;
	return won(r) ? become_primary(r, now) : 0;
}

/* ---- the standby ---- */

static void maybe_request(struct raft *r, uint64_t now)
{
	if (r->role != RAFT_STANDBY || r->primary == RAFT_NOBODY || r->want == 0 ||
	    r->want > r->primary_last) {
		r->req_pending = 0;
		return;
	}
	if (r->req_pending && now - r->req_at < r->cfg.request_ns)
		return;
	struct raft_msg m = { .type = RAFT_MSG_REQUEST, .to = r->primary, .seq = r->want };
	emit(r, &m);
	r->req_pending = 1;
	r->req_at = now;
	r->req_end = r->want + r->cfg.max_entries;
	r->stats.requests_sent++;
}

/* Progress inside the answer in flight is no new question (asking again
 * for every datagram of a long answer would multiply the answers); an
 * earlier want (a cut tail) or one past the answer's end is. */
static void set_want(struct raft *r, uint64_t want)
{
	if (want != r->want && (want < r->want || want >= r->req_end))
		r->req_pending = 0; /* a new question: ask it now */
	r->want = want;
}

/* What an ACK can promise: entries that match the primary's log and are on
 * this node's disk. */
static uint64_t ack_seq(const struct raft *r)
{
	uint64_t d = durable(r);

	return r->verified < d ? r->verified : d;
}

static void send_ack(struct raft *r, int to)
{
	struct raft_msg m = {
		.type = RAFT_MSG_ACK,
		.to = to,
		.seq = ack_seq(r),
	};

	m.seq_term = term_at(r, m.seq);
	r->acked = m.seq;
	emit(r, &m);
}

/* The first seq of the run of entries of the term of `seq`, not below lo
 * (terms never decrease along a log). */
static uint64_t run_start(const struct raft *r, uint64_t seq, uint64_t lo)
{
	uint64_t t = term_at(r, seq), hi = seq;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (term_at(r, mid) < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return hi;
}

/* Our entry at prev disagrees with the primary's: it is not committed, nor
 * is anything after it. Cut it and ask from the start of the previous run
 * (one term further back per round trip). */
static int mismatch(struct raft *r, uint64_t prev, uint64_t now)
{
	int e;

	if ((e = r->io.truncate_after(r->io.ctx, prev - 1)) < 0)
		return e;
	r->stats.truncations++;
	if (r->verified > prev - 1)
		r->verified = prev - 1;
	if (prev - 1 <= r->commit)
		set_want(r, prev);
	else
		set_want(r, run_start(r, prev - 1, r->commit + 1));
	maybe_request(r, now);
	return 0;
}

static int on_append(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	uint64_t prev = m->seq, last = last_seq(r), n = m->n_entries, upto, c;
	uint64_t before = r->verified;
	int e;

	if (r->role == RAFT_PRIMARY) { /* two primaries in one term: a bug */
		r->stats.refused++;
		return 0;
	}
	if (r->role != RAFT_STANDBY && (e = step_down(r, r->term, now)) < 0)
		return e;
	r->primary = m->from;
	r->primary_seen = now;
	r->election_at = now + election_timeout(r);
	report(r);
	r->stats.appends_received++;
	if (prev + n > r->primary_last)
		r->primary_last = prev + n;

	if (prev > last) { /* a gap: ask from our end (or from earlier if asking already) */
		if (!r->want || r->want > last + 1)
			set_want(r, last + 1);
		maybe_request(r, now);
		send_ack(r, m->from);
		return 0;
	}
	if (term_at(r, prev) != m->seq_term) {
		if (prev <= r->commit) {
			r->stats.refused++;
			return 0;
		}
		if ((e = mismatch(r, prev, now)) < 0)
			return e;
		send_ack(r, m->from);
		return 0;
	}
	for (uint64_t k = 0; k < n; k++) {
		const struct raft_entry *en = &m->entries[k];
		uint64_t s = prev + 1 + k;

		if (s <= last) {
			if (term_at(r, s) == en->term)
				continue;
			if (s <= r->commit) {
				r->stats.refused++;
				return 0;
			}
			if ((e = r->io.truncate_after(r->io.ctx, s - 1)) < 0)
				return e;
			r->stats.truncations++;
			last = s - 1;
		}
		if ((e = r->io.append(r->io.ctx, s, en->term, en->data, en->len)) < 0) {
			if (!nospace(e))
				return e;
			r->stats.nospace++; /* the rest is asked for again later */
			n = k;
			break;
		}
		r->stats.entries_appended++;
		last = s;
	}
	upto = prev + n;
	if (upto > r->verified)
		r->verified = upto;
	c = m->commit < r->verified ? m->commit : r->verified;
	set_commit(r, c);
	if ((m->flags & RAFT_F_END) && r->verified > before)
		r->req_pending = 0; /* the answer is all here: what is still missing, ask now */
	set_want(r, r->verified + 1);
	maybe_request(r, now);
	send_ack(r, m->from);
	return 0;
}

/* ---- the entry points ---- */

/* A term no member can have reached by elections, or entries of a term
 * newer than the message that carries them: counted, never adopted. */
static int term_insane(struct raft *r, const struct raft_msg *m)
{
	if (m->term > r->term && m->term - r->term > RAFT_TERM_STEP_MAX) {
		r->stats.terms_refused++;
		return 1;
	}
	for (size_t i = 0; m->type == RAFT_MSG_APPEND && i < m->n_entries; i++)
		if (m->entries[i].term > m->term) {
			r->stats.terms_refused++;
			return 1;
		}
	return 0;
}

static int receive(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	int e;

	if (m->from < 0 || m->from >= r->cfg.n_nodes || m->from == r->cfg.id ||
	    (unsigned)m->type >= RAFT_MSG_MAX || term_insane(r, m))
		return 0;
	if (m->type == RAFT_MSG_VOTE)
		return on_vote(r, m, now);
	if (m->type == RAFT_MSG_VOTE_REPLY)
		return on_vote_reply(r, m, now);
	if (m->term < r->term) { /* fencing; tell an old primary the news */
		r->stats.stale_ignored++;
		if (m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_HEARTBEAT) {
			struct raft_msg a = { .type = RAFT_MSG_ACK, .to = m->from };

			emit(r, &a);
		}
		return 0;
	}
	if (m->term > r->term && (e = step_down(r, m->term, now)) < 0)
		return e;
	switch (m->type) {
	case RAFT_MSG_APPEND:
		return on_append(r, m, now);
	case RAFT_MSG_HEARTBEAT: {
		struct raft_msg h = *m;

		h.n_entries = 0;
		return on_append(r, &h, now);
	}
	case RAFT_MSG_ACK:
		if (r->role == RAFT_PRIMARY)
			on_ack(r, m, now);
		return 0;
	case RAFT_MSG_REQUEST:
		if (r->role == RAFT_PRIMARY)
			on_request(r, m, now);
		return 0;
	case RAFT_MSG_TIMEOUT_NOW:
		/* From the primary of our term, and only with its whole log
		 * here (else we could not win): an election at once. Starting
		 * one is always safe; this just skips the wait. */
		if (r->role != RAFT_STANDBY || m->from != r->primary ||
		    last_seq(r) != m->seq || term_at(r, m->seq) != m->seq_term)
			return 0;
		r->stats.timeout_now++;
		return start_election(r, now);
	default:
		return 0;
	}
}

int raft_durable(struct raft *r, uint64_t now)
{
	if (r->role == RAFT_PRIMARY) {
		/* announce a new commit at once when no APPEND is about to carry it */
		if (advance_commit(r) && r->sent_upto == last_seq(r))
			send_heartbeat(r, now);
		return 0;
	}
	if (r->role == RAFT_STANDBY && r->primary != RAFT_NOBODY && ack_seq(r) > r->acked)
		send_ack(r, r->primary);
	return 0;
}

int raft_receive(struct raft *r, const struct raft_msg *m, uint64_t now)
{
	int e = receive(r, m, now);

	if (nospace(e)) { /* a term or vote could not be saved: as if never received */
		r->stats.nospace++;
		return 0;
	}
	return e;
}

int raft_stand_down(struct raft *r, int down, uint64_t now)
{
	int e = 0;

	if (down && !r->down && r->role == RAFT_PRIMARY)
		e = step_down(r, r->term, now);
	if (down && r->role != RAFT_STANDBY && r->role != RAFT_PRIMARY) {
		r->role = RAFT_STANDBY;
		report(r);
	}
	r->down = down;
	return e;
}

static int tick(struct raft *r, uint64_t now)
{
	if (r->role == RAFT_PRIMARY)
		return primary_tick(r, now);
	if (now >= r->election_at && r->down) {
		r->election_at = now + election_timeout(r); /* stands for nothing */
		return 0;
	}
	if (now >= r->election_at)
		return start_prevote(r, now);
	if ((r->role == RAFT_CANDIDATE || r->role == RAFT_PRECANDIDATE) &&
	    now - r->asked_at >= r->cfg.heartbeat_ns)
		send_vote_request(r, now);
	if (r->req_pending && now - r->req_at >= r->cfg.request_ns) {
		r->req_pending = 0;
		maybe_request(r, now);
	}
	return 0;
}

int raft_tick(struct raft *r, uint64_t now)
{
	int e = tick(r, now);

	if (nospace(e)) { /* no new term without saving it: tried again later */
		r->stats.nospace++;
		return 0;
	}
	return e;
}

uint64_t raft_deadline(const struct raft *r)
{
	uint64_t d;

	if (r->role == RAFT_PRIMARY) {
		/* TIMEOUT_NOW is repeated from the heartbeat ticks */
		d = r->bcast_at + r->cfg.heartbeat_ns;
		if (r->transfer_to != RAFT_NOBODY && r->transfer_until < d)
			d = r->transfer_until;
		return d;
	}
	d = r->election_at;
	if ((r->role == RAFT_CANDIDATE || r->role == RAFT_PRECANDIDATE) &&
	    r->asked_at + r->cfg.heartbeat_ns < d)
		d = r->asked_at + r->cfg.heartbeat_ns;
	if (r->req_pending && r->req_at + r->cfg.request_ns < d)
		d = r->req_at + r->cfg.request_ns;
	return d;
}

int raft_open(struct raft **out, const struct raft_config *cfg, const struct raft_io *io,
	      uint64_t now)
{
	struct raft *r;

	if (cfg->n_nodes < 1 || cfg->n_nodes > RAFT_MAX_NODES || cfg->id < 0 ||
	    cfg->id >= cfg->n_nodes || cfg->voted_for < RAFT_NOBODY ||
	    cfg->voted_for >= cfg->n_nodes || !io->last_seq || !io->term_at || !io->append ||
	    !io->append_term_start || !io->truncate_after || !io->save_state || !io->send ||
	    !io->random)
		return -EINVAL;
	if (cfg->term >= RAFT_TERM_LIMIT || io->term_at(io->ctx, io->last_seq(io->ctx)) >= RAFT_TERM_LIMIT)
		return -ERANGE;
	if (!(r = calloc(1, sizeof(*r))))
		return -ENOMEM;
	r->cfg = *cfg;
	r->io = *io;
	if (!r->cfg.heartbeat_ns)
		r->cfg.heartbeat_ns = 50 * MS;
	if (!r->cfg.election_min_ns)
		r->cfg.election_min_ns = 150 * MS;
	if (!r->cfg.election_max_ns)
		r->cfg.election_max_ns = 300 * MS;
	if (r->cfg.election_max_ns < r->cfg.election_min_ns)
		r->cfg.election_max_ns = r->cfg.election_min_ns;
	if (!r->cfg.request_ns)
		r->cfg.request_ns = 20 * MS;
	if (!r->cfg.max_entries)
		r->cfg.max_entries = 64;
	r->term = cfg->term;
	r->voted_for = cfg->voted_for;
	if (term_at(r, last_seq(r)) > r->term) {
		/* the saved state is older than the journal: whether we voted
		 * in that term is unknown, so act as if for ourselves */
		r->term = term_at(r, last_seq(r));
		r->voted_for = cfg->id;
	}
	r->saved_term = r->term;
	r->saved_vote = r->voted_for;
	r->primary = RAFT_NOBODY;
	r->transfer_to = RAFT_NOBODY;
	r->role = RAFT_STANDBY;
	r->commit = r->applied = cfg->applied <= last_seq(r) ? cfg->applied : last_seq(r);
	r->verified = r->commit;
	/* a group of one elects itself at the first tick */
	r->election_at = cfg->n_nodes == 1 ? now : now + election_timeout(r);
	r->rep_role = RAFT_STANDBY;
	r->rep_term = r->term;
	r->rep_primary = RAFT_NOBODY;
	*out = r;
	return 0;
}

void raft_close(struct raft *r)
{
	free(r);
}

enum raft_role raft_role(const struct raft *r)
{
	return r->role;
}

uint64_t raft_term(const struct raft *r)
{
	return r->term;
}

int raft_primary(const struct raft *r)
{
	return r->primary;
}

uint64_t raft_commit(const struct raft *r)
{
	return r->commit;
}

uint64_t raft_last_seq(const struct raft *r)
{
	return last_seq(r);
}

void raft_get_stats(const struct raft *r, struct raft_stats *out)
{
	*out = r->stats;
}
