/* raft: the sequencer group's replication and election, as a pure state
 * machine (Raft, Ongaro and Ousterhout 2014, with the log multicast).
 *
 * No sockets, no clocks, no randomness inside: time comes in as `now` (any
 * monotonic nanoseconds), randomness from the caller's PRNG, the journal and
 * the vote through the caller's storage callbacks, and every output (a
 * message to send, a role change, entries to apply) through callbacks made
 * during the call that caused it.
 *
 * The log is the tape: entry `seq` (from 1) is the journal record with that
 * sequence number, stamped with the term of the primary that sequenced it.
 * The primary multicasts each batch as an APPEND (prev seq/term, entries,
 * its commit); standbys journal it after the prev check (a gap: they ask for
 * a retransmission with a REQUEST; a mismatch: they truncate the divergent
 * uncommitted tail and ask from earlier) and ACK the highest seq they know to
 * match the primary's log; the primary commits an entry of its own term once
 * a majority (itself included) has journalled it, and announces the commit in
 * later APPENDs and in HEARTBEATs. A new primary opens its term with a
 * term-start entry, which makes every standby cut a divergent tail. Messages
 * of an older term are ignored (fencing), apart from a reply that tells the
 * sender the newer term.
 *
 * Elections: a standby that hears no primary for a randomized election
 * timeout first asks for pre-votes (Raft thesis 9.6: nobody changes term for
 * them, and a node that heard a primary within the minimum election timeout
 * refuses), then, with a majority of pre-votes, increments its term and asks
 * for votes; a vote goes to the first candidate of a term whose journal is at
 * least as up to date (last term, then last seq). Of two pre-candidates that
 * ask each other, the one with the worse journal (or the same and the higher
 * id) steps back, so that two timeouts close together do not split the vote
 * (a group of 3 would lose a whole election timeout). A primary that has not
 * heard from a majority within the maximum election timeout steps down
 * (check-quorum), so that a primary cut off from its group stops sequencing.
 *
 * Hand-over (Raft thesis 3.10, leadership transfer): raft_transfer makes a
 * primary stop proposing, wait until the chosen standby has journalled its
 * whole log, then send it TIMEOUT_NOW; the standby starts a real election at
 * once (no pre-vote: its log is as up to date as the primary's, so it wins
 * the votes of a majority that saw nothing newer), and the old primary steps
 * down on its VOTE. A hand-over that has not happened within the maximum
 * election timeout is abandoned and the primary proposes again.
 *
 * The durability contract: before acting on the outputs of a call (sending
 * its messages, publishing what it applied), the caller writes what that
 * call wrote (appends, truncations) to its journal and makes the saved term
 * and vote durable: one journal flush per call, as the daemon's batch loop
 * already does. Entries need not be on disk by then: with io.durable_seq a
 * node counts for a commit (its own vote as primary, its ACK as standby)
 * only the entries that callback says are on disk, and the caller calls
 * raft_durable when it moves (a background sync ended). Without it every
 * entry counts once written, and the caller must sync at each flush.
 * Outputs are handed out in the order they must be sent.
 *
 * Mapping to lockstep's wire: an APPEND is a tape datagram (its Events carry
 * term, seq and the commit); a HEARTBEAT is the tape heartbeat (plus term,
 * commit and the primary's last term); a REQUEST is a MoldUDP64 request.
 * prev_term need not travel with every live datagram: within a term the
 * primary's entries are contiguous after its term-start entry, so prev_term
 * is the current term for every multicast APPEND but the one that starts the
 * term, whose term-start Event can carry it; a retransmission answer (which
 * may span terms: each Event has its own) carries it explicitly. VOTE,
 * VOTE_REPLY and ACK are small unicast control datagrams.
 */
#ifndef LOCKSTEP_RAFT_H
#define LOCKSTEP_RAFT_H

#include <stddef.h>
#include <stdint.h>

#define RAFT_MAX_NODES 9 /* groups of 1, 3 or 5 in practice */
#define RAFT_ALL (-1) /* raft_msg.to: every other node (multicast) */
#define RAFT_NOBODY (-1) /* no vote, no known primary */

enum raft_role {
	RAFT_STANDBY, /* follows a primary (or waits for one) */
	RAFT_PRECANDIDATE, /* asks whether it could win, without a new term */
	RAFT_CANDIDATE, /* asks for votes in a new term */
	RAFT_PRIMARY, /* sequences, replicates and commits */
	RAFT_ROLE_MAX
};

enum raft_msg_type {
	RAFT_MSG_VOTE, /* seq, seq_term: the candidate's last entry */
	RAFT_MSG_VOTE_REPLY, /* flags RAFT_F_GRANTED or not */
	RAFT_MSG_APPEND, /* seq, seq_term: prev entry; entries seq+1..; commit */
	RAFT_MSG_HEARTBEAT, /* seq, seq_term: the primary's last entry; commit */
	RAFT_MSG_ACK, /* seq, seq_term: the last entry known to match the primary */
	RAFT_MSG_REQUEST, /* seq: first entry wanted (retransmission) */
	RAFT_MSG_TIMEOUT_NOW, /* seq, seq_term: the primary's last entry; hand-over */
	RAFT_MSG_MAX
};

/* VOTE, VOTE_REPLY: a pre-vote; its term is the one the candidate would take */
#define RAFT_F_PRE 1u
#define RAFT_F_GRANTED 2u /* VOTE_REPLY */
/* APPEND: the end of an answer to a REQUEST (a caller that splits an APPEND
 * into several datagrams sets it on the last one only). A standby asks
 * again for what is still missing once an answer has ended, or after
 * request_ns; not on every datagram of a long answer. */
#define RAFT_F_END 4u

/* An entry of a received APPEND; data is only read during the call. */
struct raft_entry {
	uint64_t term;
	const void *data;
	size_t len;
};

struct raft_msg {
	enum raft_msg_type type;
	int from; /* sender, 0..n-1 */
	int to; /* receiver, or RAFT_ALL */
	uint64_t term;
	uint64_t seq; /* see raft_msg_type */
	uint64_t seq_term; /* the term of the entry at seq (0 when seq is 0) */
	uint64_t commit; /* APPEND, HEARTBEAT */
	uint32_t n_entries; /* APPEND: entries seq+1 .. seq+n_entries */
	/* Received APPEND: the n_entries entries. Sent APPEND: NULL; the caller
	 * attaches records seq+1 .. seq+n_entries from its journal (with their
	 * terms). */
	const struct raft_entry *entries;
	unsigned flags;
};

/* The caller's side. Storage calls return 0 or a negative errno (which the
 * raft call then returns: the caller should treat it as fatal). */
struct raft_io {
	void *ctx;
	/* The journal. term_at(0) and term_at of an absent seq are 0. */
	uint64_t (*last_seq)(void *ctx);
	uint64_t (*term_at)(void *ctx, uint64_t seq);
	/* Appends entry seq == last_seq() + 1. */
	int (*append)(void *ctx, uint64_t seq, uint64_t term, const void *data, size_t len);
	/* Appends this node's term-start entry (the caller builds its bytes)
	 * at seq == last_seq() + 1 for a term it has just won. */
	int (*append_term_start)(void *ctx, uint64_t seq, uint64_t term);
	/* Removes every entry after seq (never a committed one). */
	int (*truncate_after)(void *ctx, uint64_t seq);
	/* Optional: the last seq on disk (at most last_seq). NULL: all of it. */
	uint64_t (*durable_seq)(void *ctx);
	/* Persists the current term and vote (RAFT_NOBODY: none). */
	int (*save_state)(void *ctx, uint64_t term, int voted_for);

	/* Outputs. m (and anything it points to) is valid during the call. */
	void (*send)(void *ctx, const struct raft_msg *m);
	/* After every role change (and a new term or a newly known primary). */
	void (*role)(void *ctx, enum raft_role role, uint64_t term, int primary);
	/* Entries from..to (inclusive) are committed and may be applied, in
	 * order, exactly once per raft instance. */
	void (*apply)(void *ctx, uint64_t from, uint64_t to);

	/* The caller's seeded PRNG: uniformly distributed 64-bit values. */
	uint64_t (*random)(void *ctx);
};

/* Deliberate bugs, for the simulation to show that its checks can fail. */
#define RAFT_BUG_VOTE_ANY_LOG 1u /* grant (pre-)votes without the up-to-date check */
#define RAFT_BUG_COMMIT_OLD_TERM 2u /* count replicas of older terms' entries */
#define RAFT_BUG_FORGET_VOTE 4u /* never persist the vote */
#define RAFT_BUG_COUNT_VOLATILE 8u /* count entries not yet on disk (ignore durable_seq) */

struct raft_config {
	int id; /* this node, 0..n_nodes-1 */
	int n_nodes; /* 1..RAFT_MAX_NODES */
	/* As last saved through save_state (0 and RAFT_NOBODY at first start). */
	uint64_t term;
	int voted_for;
	/* Entries up to here are known to be committed and were applied by the
	 * caller before (0: none); the first apply() starts after it. */
	uint64_t applied;
	uint64_t heartbeat_ns; /* primary idle for this long: HEARTBEAT; 0: 50 ms */
	uint64_t election_min_ns; /* randomized election timeout; 0: 150 ms */
	uint64_t election_max_ns; /* 0: 300 ms; at least election_min_ns */
	uint64_t request_ns; /* a REQUEST unanswered for this long is repeated; 0: 20 ms */
	uint32_t max_entries; /* entries per retransmission APPEND; 0: 64 */
	int no_prevote; /* 1: elections without the pre-vote round */
	int no_check_quorum; /* 1: a primary never steps down by itself */
	unsigned bugs; /* RAFT_BUG_*: tests only */
};

struct raft_stats {
	uint64_t elections; /* real elections started (new terms) */
	uint64_t prevotes; /* pre-vote rounds started */
	uint64_t votes_granted;
	uint64_t appends_received;
	uint64_t entries_appended; /* journalled on behalf of a primary */
	uint64_t requests_sent;
	uint64_t requests_served;
	uint64_t truncations;
	uint64_t stale_ignored; /* messages of an older term */
	uint64_t terms_refused; /* terms beyond RAFT_TERM_STEP_MAX ahead, or entries newer than their message */
	uint64_t refused; /* messages that would have undone a commit */
	uint64_t stepdowns; /* check-quorum */
	uint64_t transfers; /* hand-overs started (raft_transfer) */
	uint64_t transfers_abandoned; /* not done within election_max */
	uint64_t timeout_now; /* TIMEOUT_NOW obeyed: elections started at once */
	uint64_t nospace; /* a full disk: entries not appended, a term or vote not saved */
};

/* A message may raise a member's term by at most this much: a term that far
 * ahead is a forged or broken message, not a history of elections (a
 * million failovers), and adopting it would let one datagram with term
 * 2^64-1 wrap the group's term and leave it without a primary for good.
 * Such a message is ignored and counted (terms_refused). A member that
 * really is this far behind (restored from an old backup) stays a standby
 * that does not follow: the operator restores its state file. Terms never
 * reach RAFT_TERM_LIMIT, so they never wrap: raft_open refuses a saved term
 * or journal beyond it (-ERANGE), and no election starts there. */
#define RAFT_TERM_STEP_MAX (1ull << 20)
#define RAFT_TERM_LIMIT (UINT64_MAX - RAFT_TERM_STEP_MAX)

struct raft;

/* Creates the state machine, a standby, at time now (a group of one elects
 * itself at the first tick). io is copied. A journal whose last term is newer
 * than cfg->term (a lost state file) raises the term to it, with the vote
 * taken as given to this node: whether it voted is unknown. Returns 0,
 * -EINVAL for a bad config, -ERANGE for a term at RAFT_TERM_LIMIT or beyond
 * (a damaged or forged state file or journal), -ENOMEM. */
int raft_open(struct raft **out, const struct raft_config *cfg, const struct raft_io *io,
	      uint64_t now);
void raft_close(struct raft *r); /* accepts NULL */

/* A member whose disk is full (down = 1) stands down: a primary steps down
 * to standby in its term, so that the others elect a member that can write,
 * and no election starts here until down = 0. Whatever the call, an append
 * or a save_state that fails with -ENOSPC or -EDQUOT is not fatal: the
 * entries not appended are asked for again later, and a term or vote not
 * saved is forgotten with the message or timeout that raised it (counted:
 * stats.nospace). Returns 0 or a negative errno. */
int raft_stand_down(struct raft *r, int down, uint64_t now);

/* io.durable_seq moved: a primary commits what a majority now holds on
 * disk, a standby ACKs its primary. */
int raft_durable(struct raft *r, uint64_t now);

/* Timeouts. Call at raft_deadline() at the latest (earlier is harmless). */
int raft_tick(struct raft *r, uint64_t now);
/* The latest time for the next raft_tick. */
uint64_t raft_deadline(const struct raft *r);

/* A message from a peer (m->to is this node or RAFT_ALL). */
int raft_receive(struct raft *r, const struct raft_msg *m, uint64_t now);

/* Primary only: hands over to node `to` (RAFT_NOBODY: the standby whose
 * journal is furthest, of those heard within the maximum election timeout).
 * From now on raft_propose refuses (-EBUSY) until this node is no longer
 * primary or the hand-over is abandoned. Returns 0; -EPERM when not the
 * primary; -EINVAL for a bad node (itself, out of range); -EALREADY when a
 * hand-over is under way; -EHOSTUNREACH when no standby has been heard
 * (a group of one included). */
int raft_transfer(struct raft *r, int to, uint64_t now);
/* The node a hand-over is under way to, or RAFT_NOBODY. */
int raft_transfer_target(const struct raft *r);

/* Primary only (-EPERM otherwise; -EBUSY while handing over): journals data
 * as the next entry of its term and sets *seq to its sequence number. The entries proposed since the
 * last flush go out as one APPEND at raft_flush. */
int raft_propose(struct raft *r, const void *data, size_t len, uint64_t *seq);
/* Sends what was proposed (a no-op without), and commits it at once in a
 * group of one. */
int raft_flush(struct raft *r, uint64_t now);

enum raft_role raft_role(const struct raft *r);
uint64_t raft_term(const struct raft *r);
/* The known primary of the term, or RAFT_NOBODY. */
int raft_primary(const struct raft *r);
/* The highest committed seq known. */
uint64_t raft_commit(const struct raft *r);
uint64_t raft_last_seq(const struct raft *r);
void raft_get_stats(const struct raft *r, struct raft_stats *out);
const char *raft_role_name(enum raft_role role);
const char *raft_msg_name(enum raft_msg_type type);

#endif
