/* The matching engine: the deterministic core that every matcher replica runs
 * on the committed, totally ordered tape.
 *
 * Determinism: the engine reads no clock and no randomness and never looks at
 * pointer values. Order reference numbers, match numbers, priorities and
 * expiries derive only from the commands, their order and the tape times that
 * the caller passes in, so replicas fed the same tape emit the same messages
 * and report the same engine_hash() bit for bit.
 *
 * Memory: engine_create() allocates everything once (order pool, token table,
 * level pool and per-side level arrays, expiry heap, user table);
 * engine_apply() never allocates. A command that needs a resource that is
 * exhausted is Rejected with reason 'O' (OUCH_REJ_OTHER).
 *
 * Semantics (OUCH 4.2 where the specification says, lockstep's choices where
 * it does not):
 *  - Price-time priority per symbol; executions at the resting order's price;
 *    within a price level displayed orders (Display A, Y, P) come first, then
 *    non-displayed ones (N), each first in, first out.
 *  - Accepted always carries state 'L' (live); an order that cannot rest is
 *    then executed and/or Canceled in the messages that follow it.
 *  - Every execution gives a match number (1, 2, ...) and two Executed
 *    messages: first the resting order's (liquidity 'A'), then the incoming
 *    order's (liquidity 'R').
 *  - Order reference numbers count from 1; every Accepted and every Replaced
 *    takes the next one.
 *  - Tokens are day-unique per user: an Enter, or a Replace whose replacement
 *    token, the user has already used (even on an order that has died, been
 *    replaced or been rejected) is silently ignored (OUCH 4.2: "ignored"),
 *    counted in ignored_duplicates. A Rejected Enter consumes its token, so a
 *    resent copy is ignored, not re-rejected. The memory of dead tokens is
 *    bounded, globally and per user:
 *    - the table holds the live orders' tokens and the most recently dead
 *      ones up to max_tokens; beyond, each new token makes the engine forget
 *      the oldest dead one of any user (tokens_forgotten), whose reuse is then
 *      taken as new. max_tokens - max_orders - 1 is the global horizon of
 *      duplicate detection, in dead tokens (room is made before the lookup);
 *      the table never rejects an order.
 *    - with max_user_tokens (0: none), a user remembers at most that many
 *      tokens, live and dead: a new token of a user that holds as many makes
 *      the engine forget that user's oldest dead token
 *      (user_tokens_forgotten), before the lookup, so the user's horizon is
 *      max_user_tokens - 1 - its open orders, in its own dead tokens. One
 *      user's churn then forgets only its own tokens, not another's (up to
 *      the global horizon, which max_tokens >= logins x max_user_tokens
 *      makes unreachable: the table then never fills). When all of the
 *      user's remembered tokens are live, the Enter (or Replace) is
 *      Rejected 'q' (OUCH_REJ_OPEN_QUOTA, counted in user_token_quota, not
 *      in risk_rejects) after the risk checks and before pools; its token
 *      is not consumed (nor is an Enter's Rejected then for another
 *      reason), and a Replace leaves the existing order as it was. The
 *      quota is part of the state hash (with the configuration's risk
 *      layer): replicas must share it.
 *  - Replace (OUCH 4.2): if the existing order is not live, or the replacement
 *    token was already used, the Replace is silently ignored (ignored_dead or
 *    ignored_duplicates). If the existing order is live but the replace is
 *    invalid (a field that Enter would reject, a post-only replacement that
 *    would execute, or a full pool), the existing order is Canceled (reason
 *    'Z', system) and the replacement token is not consumed. Otherwise
 *    Replaced (with a new order reference number); the order keeps its time
 *    priority when the price and the display class (displayed or not) are
 *    unchanged, the shares are not increased and it can still rest (not IOC),
 *    else it goes to the back of its new price level and, when marketable,
 *    executes like a new order. Replace's shares are the new open shares.
 *  - Cancel: shares is the new intended open size; 0 cancels all; a size at or
 *    above the open size does nothing; Canceled carries the decrement with
 *    reason 'U'; an unknown or dead token gets a Cancel Reject.
 *  - Modify: changes the side among S, T and E (a sell stays a sell, a buy
 *    stays a buy) and/or lowers the open shares, keeping priority; answered by
 *    Order Modified with the new side and open shares (0 shares: the order
 *    leaves the book and Order Modified is its last message). An unknown or
 *    dead token, a share increase or another side change is ignored
 *    (ignored_dead / ignored_invalid), as OUCH ignores share increases.
 *  - Time in force: 0 is IOC (rest Canceled 'I' after the executions); 99998
 *    and 99999 rest for the day; 1..86400 seconds rest until tape time reaches
 *    entry (or replace) time + TIF, then are Canceled with reason 'T' before
 *    the next command is applied (or in engine_advance_time), in order of
 *    expiry time, then of order reference number. Market orders (price
 *    OUCH_PRICE_MARKET) match at any price and never rest (they must carry
 *    TIF 0: ouch_validate_* rejects others with 'X').
 *  - Minimum quantity applies on entry only: when the liquidity executable at
 *    once (before any self-match) is below it, nothing executes, and the order
 *    is Canceled 'I' when IOC, else rests in full (even if that crosses).
 *  - Post-only (Display P) that would execute (crosses the other side's best
 *    price) is Rejected with OUCH_REJ_POST_ONLY_WOULD_TAKE.
 *  - Self-match prevention by firm (the login's firm of the command, not the
 *    Enter's firm field): when the incoming order reaches a resting order of
 *    its own firm, its remaining shares are Canceled with reason 'Q'; earlier
 *    executions stand. A login with an empty firm is never self-matched.
 *  - Validation order for Enter: unknown symbol ('S'), then
 *    ouch_validate_enter(), then the tick ('X'), then pools ('O') and
 *    post-only; a token already used is ignored whatever else is wrong.
 *  - CANCEL_ALL cancels every open order of the user (reason 'U') in the order
 *    they were entered (a replaced order keeps its place).
 *  - Outbound timestamps are tape_ns modulo one day (ns since midnight UTC).
 *  - The trading day (ENGINE_DAY, from the tape's DayEvents): the engine
 *    starts in day 1 (base 1), open. END_OF_DAY of the current day while
 *    open cancels every resting order with reason 'E' (OUCH_CXL_CLOSED), in
 *    book order (symbol in configuration order, bids then asks, best price
 *    first, then time priority: the order matching would have taken them),
 *    and closes the market. While closed, Enter is Rejected 'C'
 *    (OUCH_REJ_CLOSED; the token is consumed, as any rejected Enter's), and
 *    Replace is Rejected 'C' under its replacement token (no token
 *    consumed: there is no live order to replace); Cancel, Modify and
 *    Cancel All find no live order and answer as they do for one. START_OF_DAY
 *    of day d + 1 opens the market with day d + 1 and base = its tape seq,
 *    and forgets every token (all are dead: tokens are day-unique, so a new
 *    day may reuse them); a START of day d + 1 while day d is still open
 *    closes day d first, as its END would. A START of any other day, or an
 *    END of a day other than the current one or while closed, changes
 *    nothing but day_ignored. Day, base and open/closed are in the state
 *    hash (once they differ from day 1, base 1, open) and the snapshot.
 *  - Pre-trade risk (ENGINE_ADMIN and engine_config.risk; common/risk.h):
 *    limits per firm (the login's firm of the command) and per user (the
 *    login), each limit looked up field by field: the tape's (ENGINE_ADMIN
 *    LIMITS) for that name, else the configuration's for that name, else
 *    the tape's for "*", else the configuration's for "*", else none. An
 *    Enter passes the user's and the firm's kill switches, then the user's
 *    limits and then the firm's, each in this order, after the checks
 *    above and before pools and post-only:
 *      kill switch of the user or firm      'a' (OUCH_REJ_REJECT_ALL)
 *      max_qty (shares)                      'm' (EXCEEDED_SHARES_LIMIT)
 *      max_notional (price x shares)         'n' (EXCEEDED_DOLLAR_LIMIT)
 *      collar (bp from the reference price)  'X' (INVALID_PRICE)
 *      max_open (resting orders at once)     'q' (OUCH_REJ_OPEN_QUOTA)
 *      credit (resting notional + this)      'r' (OUCH_REJ_CREDIT)
 *    and then (not a risk limit: risk_rejects does not count it) the
 *    user's token quota, max_user_tokens, 'q' (Tokens above).
 *    A market order's notional is taken at the reference price (none known:
 *    0) and it is never collared. The reference price of a symbol is the
 *    configuration's (engine_config.risk REFERENCE entries), then the last
 *    execution's price (executions count only once risk is on, below), or
 *    ENGINE_ADMIN REFERENCE's; none known: no collar. Open notional is
 *    summed in 128 bits (a check sees it saturated to 64).
 *    max_open and credit count the new order whether or not it can rest
 *    (an IOC too). A login with an empty firm has no firm limits. When the
 *    firm table (max_firms) is full, an Enter of a new firm is Rejected 'O'.
 *    A Replace is checked as an Enter of its new shares and price (its own
 *    order not counted against max_open and credit); one that fails is
 *    Rejected under its replacement token with the reason (the token is not
 *    consumed) and the existing order stays as it was. Open notional is open shares x price of the
 *    resting orders, per user and per firm; executions and cancels release
 *    it. KILL of a firm or user (or LIFT) sets (clears) its kill switch;
 *    with cancel, every open order of that firm or user is Canceled with
 *    reason 'S' (supervisory), in the order they were entered. Cancel and
 *    Modify still work under a kill switch (they only lower risk). Limits,
 *    kill switches and reference prices set by the tape are in the state
 *    hash and the snapshot; the configuration's are hashed too (so that a
 *    replica configured otherwise is outvoted at the next checkpoint) but
 *    not snapshotted: a restarted replica takes its configuration's. Risk
 *    enters the hash (and the checks run) once the configuration has risk
 *    entries or an Admin has applied: until then the hash is an older
 *    version's. A LIFT of a name without a kill switch changes nothing
 *    (counted in admin_events); a REFERENCE price must be a limit price
 *    (1 .. OUCH_PRICE_MAX). START_OF_DAY keeps limits, kill switches and
 *    reference prices. A snapshot of format 3 (before risk) is refused
 *    (-EPROTO) by an engine whose configuration has risk entries; loaded
 *    mid-day, it rebuilds the firm table from the open orders only, so the
 *    point where max_firms fills can differ from a replica that never
 *    restarted (within a day of more than max_firms firms).
 */
#ifndef LOCKSTEP_ENGINE_H
#define LOCKSTEP_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "ouch.h"
#include "risk.h"

struct engine;

struct engine_config {
	const char *const *symbols; /* the symbols this partition trades, 1..8 chars, distinct */
	size_t n_symbols;
	uint32_t max_shares; /* shares per order, e.g. 1,000,000 */
	uint32_t max_orders; /* open orders at once, e.g. 1 << 20 */
	uint32_t max_tokens; /* tokens remembered, live and dead, > max_orders, e.g. 1 << 22 */
	/* tokens remembered per user, live and dead (see Tokens above); 0: no
	 * quota. Every replica of a partition must have the same. */
	uint32_t max_user_tokens;
	uint32_t max_levels; /* price levels per side per symbol, e.g. 1024 */
	uint32_t max_users; /* distinct logins; 0 means 65536 */
	uint32_t max_firms; /* distinct firms (of logins and of limits); 0 means 4096 */
	/* The configuration's risk entries (LIMITS of FIRM or USER, REFERENCE
	 * of SYMBOL; cancel and KILL/LIFT are not taken here), applied at
	 * create as the base layer (see Pre-trade risk above); copied. A
	 * REFERENCE of a symbol not traded here is skipped; another bad entry
	 * (or more names than the tables hold) makes engine_create -EINVAL. */
	const struct engine_admin_cmd *risk;
	size_t n_risk;
	/* Order reference and match numbers start at partition << 48 (plus 1),
	 * so that no two partitions hand out the same one. */
	uint32_t partition;
};

enum engine_cmd_kind {
	ENGINE_ENTER,
	ENGINE_REPLACE,
	ENGINE_CANCEL,
	ENGINE_MODIFY,
	ENGINE_CANCEL_ALL, /* logout / disconnect with cancel-on-disconnect */
	ENGINE_DAY, /* a DayEvent of the tape: u.day; user and firm unused */
	ENGINE_ADMIN, /* an Admin of the tape: u.admin; user and firm unused */
};

/* Admin's kinds and scopes, numbered as lockstep.proto's Admin. */
enum engine_admin_kind {
	ENGINE_ADMIN_LIMITS = 1,
	ENGINE_ADMIN_KILL = 2,
	ENGINE_ADMIN_LIFT = 3,
	ENGINE_ADMIN_REFERENCE = 4,
};
enum engine_scope { ENGINE_SCOPE_FIRM = 1, ENGINE_SCOPE_USER = 2, ENGINE_SCOPE_SYMBOL = 3 };

/* An operator's risk command. A kind, scope or name the engine does not
 * take (a symbol not traded here, a LIMITS of a SYMBOL, "*" for a kill
 * switch or a reference, a firm or user table full) changes nothing but
 * admin_ignored. */
struct engine_admin_cmd {
	uint32_t kind; /* enum engine_admin_kind */
	uint32_t scope; /* enum engine_scope */
	char name[9]; /* firm (<= 4), user (<= 6), symbol (<= 8) or "*", NUL-terminated */
	int cancel; /* KILL: also cancel every open order of the firm or user */
	struct risk_limits limits; /* LIMITS: the fields given replace the tape's for name */
	uint32_t price; /* REFERENCE */
};

/* The DayEvent's kinds, numbered as lockstep.proto's DayEvent.Kind. */
enum engine_day_kind { ENGINE_DAY_END = 1, ENGINE_DAY_START = 2 };

struct engine_day_cmd {
	uint32_t kind; /* enum engine_day_kind; another value is ignored (day_ignored) */
	uint32_t day;
};

struct engine_cmd {
	enum engine_cmd_kind kind;
	char user[7]; /* SoupBinTCP login, NUL-terminated */
	char firm[5]; /* the login's firm (self-match prevention), NUL-terminated */
	union {
		struct ouch_enter_order enter;
		struct ouch_replace_order replace;
		struct ouch_cancel_order cancel;
		struct ouch_modify_order modify;
		struct engine_day_cmd day;
		struct engine_admin_cmd admin;
	} u;
};

/* Every outbound message goes to one user; msg (zero-filled, then set) is
 * valid only during the call. */
typedef void (*engine_emit_fn)(void *ctx, const char *user, const struct ouch_msg *msg);

/* Market data: the book as the public sees it, for the ITCH feed
 * (matcher/feedgen.h). With engine_set_md(), engine_apply and
 * engine_advance_time also report every change to the displayed book and
 * every execution of a resting order, in the order they happen:
 *  - ADD: a displayed order (Display other than 'N') starts resting: ref,
 *    side, shares, price, and firm: the login's firm when the order's
 *    Display is 'A' (attributable), else "". An order that executes on
 *    arrival is reported only for what rests of it.
 *  - EXEC: shares of a displayed resting order executed at price (its
 *    own), match; it leaves the book when its shares reach 0 (no DELETE).
 *  - TRADE: the same for a non-displayed resting order (ref 0: its ref is
 *    never shown).
 *  - CANCEL: a displayed resting order lost shares and still rests
 *    (Cancel to a smaller size, Modify down): shares is the decrement.
 *  - DELETE: a displayed resting order left the book other than by
 *    execution: Cancel, Cancel All, expiry, a kill switch, the end of the
 *    day, an invalid Replace (Canceled 'Z'), or a Replace that moved it and
 *    then executed, did not rest, or rests non-displayed.
 *  - REPLACE: a displayed resting order replaced by a displayed order that
 *    rests without executing: old_ref, ref, shares, price. Time priority
 *    is kept when the price is the same and the shares did not grow (else
 *    the replacement is at the back of its price level): a subscriber that
 *    applies that rule keeps the engine's queue order.
 *  - DAY_END (after an END_OF_DAY's deletes) and DAY_START: day.
 * The incoming side of an execution is not reported (ITCH shows the
 * resting order's); a Modify between S, T and E is no change (ITCH's sides
 * are B and S); side is the order's OUCH side. md (zero-filled, then set)
 * is valid only during the call; ts is the tape time in ns since
 * midnight. Reporting changes nothing of the engine's state or hash. */
enum engine_md_kind {
	ENGINE_MD_ADD = 1,
	ENGINE_MD_EXEC,
	ENGINE_MD_TRADE,
	ENGINE_MD_CANCEL,
	ENGINE_MD_DELETE,
	ENGINE_MD_REPLACE,
	ENGINE_MD_DAY_END,
	ENGINE_MD_DAY_START,
};

struct engine_md {
	enum engine_md_kind kind;
	uint64_t ts; /* ns since midnight, tape time */
	uint32_t sym; /* the symbol's index in engine_config.symbols */
	const char *stock; /* its name */
	char side; /* OUCH side: B, S, T or E */
	char firm[OUCH_FIRM_LEN + 1]; /* ADD: the attribution, "" for none */
	uint32_t shares, price;
	uint64_t ref, old_ref, match;
	uint32_t day; /* DAY_END, DAY_START */
};

typedef void (*engine_md_fn)(void *ctx, const struct engine_md *md);

/* Allocates everything the engine will ever use; 0, -EINVAL (bad config) or
 * -ENOMEM. *out is untouched on failure. */
int engine_create(struct engine **out, const struct engine_config *cfg);
void engine_destroy(struct engine *e); /* accepts NULL */

/* Applies one committed tape event: seq and tape_ns (ns since the epoch) come
 * from the tape. Orders whose TIF has passed at tape_ns are expired first.
 * emit may be NULL (messages are then dropped). */
void engine_apply(struct engine *e, uint64_t seq, uint64_t tape_ns, const struct engine_cmd *cmd,
		  engine_emit_fn emit, void *ctx);
/* Advances tape time with no command (heartbeats): expires orders. */
void engine_advance_time(struct engine *e, uint64_t tape_ns, engine_emit_fn emit, void *ctx);

/* Market data reports to fn (NULL: none, the default); see above. */
void engine_set_md(struct engine *e, engine_md_fn fn, void *ctx);
/* Reports an ADD for every displayed resting order in book order (symbol
 * in configuration order, bids then asks, best price first, then time
 * priority) at the time of the last event applied: the displayed book as
 * a GLIMPSE snapshot gives it. O(resting orders); no allocation. */
void engine_md_walk(const struct engine *e, engine_md_fn fn, void *ctx);

/* The state hash: the XOR of an XXH3 of every open order's full state
 * (maintained incrementally), combined with the counters. Equal books and
 * counters give equal hashes on every replica. */
uint64_t engine_hash(const struct engine *e);

struct engine_stats {
	uint64_t commands; /* engine_apply calls */
	uint64_t last_seq; /* seq of the last engine_apply */
	uint64_t orders_open;
	uint64_t accepted; /* Accepted messages */
	uint64_t replaced; /* Replaced messages */
	uint64_t rejects; /* Rejected messages (and replaces answered by a cancel) */
	uint64_t canceled; /* Canceled messages, all reasons */
	uint64_t expired; /* Canceled 'T' */
	uint64_t self_match_cancels; /* Canceled 'Q' */
	uint64_t cancel_rejects; /* Cancel Reject messages */
	uint64_t modified; /* Order Modified messages */
	uint64_t matches; /* executions (match numbers given) */
	uint64_t shares_matched;
	uint64_t ignored_duplicates; /* Enter/Replace with an already used token */
	uint64_t ignored_dead; /* Replace/Modify of an unknown or dead order */
	uint64_t ignored_invalid; /* Modify that OUCH ignores; unknown command kind */
	uint64_t tokens; /* tokens remembered (live and recently dead) */
	uint64_t tokens_forgotten; /* dead tokens forgotten to make room in the table */
	uint64_t users; /* logins seen */
	uint64_t messages; /* outbound messages */
	/* after messages: the snapshot format keeps the fields above as they
	 * were in version 2 (engine_snapshot.c) */
	uint64_t day_events; /* DayEvents applied (END and START) */
	uint64_t day_ignored; /* DayEvents out of order or of another kind: ignored */
	uint64_t closed_cancels; /* Canceled 'E' at an end of day */
	uint64_t closed_rejects; /* Rejected 'C' while closed */
	uint64_t admin_events; /* ENGINE_ADMIN applied */
	uint64_t admin_ignored; /* ENGINE_ADMIN that changed nothing (see engine_admin_cmd) */
	uint64_t risk_rejects; /* Rejected for a risk limit or a kill switch (all below) */
	uint64_t risk_killed; /* 'a' */
	uint64_t risk_qty; /* 'm' */
	uint64_t risk_notional; /* 'n' */
	uint64_t risk_collar; /* 'X' for the collar */
	uint64_t risk_open; /* 'q' */
	uint64_t risk_credit; /* 'r' */
	uint64_t kill_cancels; /* Canceled 'S' by a kill switch */
	uint64_t user_tokens_forgotten; /* dead tokens forgotten for their user's quota */
	uint64_t user_token_quota; /* Rejected 'q': the user's quota full of live tokens */
};

void engine_get_stats(const struct engine *e, struct engine_stats *out);

/* The trading day as the tape's DayEvents left it: day d (1 at first), its
 * base (the tape seq of its START_OF_DAY; 1 for day 1), and whether the
 * market is open (0 between an END_OF_DAY and the next START_OF_DAY). */
struct engine_day {
	uint32_t day;
	int open;
	uint64_t base;
};
void engine_get_day(const struct engine *e, struct engine_day *out);
/* The tape time (ns since the epoch) of the last event applied or time
 * advanced to (a loaded snapshot's until then): every replica at one tape
 * position has the same. */
uint64_t engine_time(const struct engine *e);

/* How full each pool is: in use, and the size the config gave. Firms
 * (of logins and of limits) and named users count from the configuration
 * on. */
struct engine_pool {
	const char *name; /* "orders", "tokens", "levels", "users", "firms" */
	uint64_t used, size;
};
enum { ENGINE_POOLS = 5 };

/* Risk as the engine sees it now, for STATUS and tests: the effective
 * limits of a firm or user (every field set: 0 is none), whether its kill
 * switch is on, and its open orders and open notional. -ENOENT for a name
 * never seen (its limits are then the "*" ones, nothing open: ask for
 * "*", which gives the defaults), -EINVAL for another scope; *out is then
 * untouched. */
struct engine_risk_view {
	struct risk_limits limits;
	int killed;
	uint64_t open_orders, open_notional;
};
int engine_get_risk(const struct engine *e, uint32_t scope, const char *name,
		    struct engine_risk_view *out);
void engine_get_pools(const struct engine *e, struct engine_pool out[ENGINE_POOLS]);

/* Checks the book's invariants and recomputes the state hash from scratch:
 * 0, -EUCLEAN when something is inconsistent, or -ENOMEM (one scratch
 * array of users). O(open orders + dead tokens + users); for tests and
 * offline verification, not for the hot path. */
int engine_verify(const struct engine *e);

/* Snapshots: the whole state (orders in priority order per level, tokens,
 * users, counters, expiries, the day) as a byte stream, versioned (see engine_snapshot.c).
 * fn returns 0 or a negative errno, which the call then returns.
 * engine_snapshot_write: 0 or the first error (or -ENOMEM); O(open orders +
 * tokens), allocates one scratch array of max_orders u32.
 * engine_snapshot_read: into a freshly created engine with the same symbols
 * (-EBUSY otherwise); -EPROTO for a format version it does not read
 * (it reads the current one, 4, and the one before, 3: engine_snapshot.c), -EBADMSG for
 * content that does not add up (the engine is then unusable: destroy it).
 * After a successful read engine_hash() equals the hash at write time. */
typedef int (*engine_write_fn)(void *ctx, const void *buf, size_t len);
typedef int (*engine_read_fn)(void *ctx, void *buf, size_t len);
int engine_snapshot_write(const struct engine *e, engine_write_fn fn, void *ctx);
int engine_snapshot_read(struct engine *e, engine_read_fn fn, void *ctx);

#endif
