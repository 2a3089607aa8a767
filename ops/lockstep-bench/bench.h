/* lockstep-bench: what its files share (private to the binary): the options,
 * the order mix, the load's sessions, counts and histograms, and the helpers
 * of the relay, the echo and the components.
 *
 * An "order" is any inbound OUCH message: Enter, Cancel or Replace; each is
 * one command on the tape. */
#ifndef LOCKSTEP_BENCH_H
#define LOCKSTEP_BENCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <netinet/in.h>

#include "hist.h"
#include "moldudp64.h"
#include "net.h"
#include "ouch.h"
#include "soupbin.h"

#define PROG "lockstep-bench"
#define MAX_SESSIONS 256
#define MAX_GATEWAYS 16
#define MAX_SYMBOLS 16
#define MAX_PROCS 64
#define TXBUF (256 * 1024)

/* ---- main.c: the options ----------------------------------------------------- */

enum mix_kind { MIX_PASSIVE, MIX_MARKETABLE, MIX_CANCEL, MIX_REPLACE, MIX_N };

struct bench_options {
	char connect[512], logins[1024], symbols_text[256];
	unsigned sessions;
	uint64_t orders; /* per session; 0: bounded by --duration */
	double rate; /* open loop, orders/s over all sessions; 0: closed loop */
	unsigned window;
	int max; /* --max: closed loop, deep window, flat out */
	double duration, warmup, timeout;
	uint64_t seed;
	unsigned mix[MIX_N]; /* weights */
	unsigned depth; /* resting orders a session keeps at most */
	const char *json, *png, *cluster_dir, *pids;
	int quiet, check_matches, baseline, spin;
	/* --component */
	const char *component, *journal;
	const char *risk_file; /* --risk-file: the matcher component's [matcher] risk_file */
	uint64_t events, resting;
	uint32_t max_user_tokens; /* --max-user-tokens: the matcher component's */
	uint32_t max_tokens; /* --max-tokens: the matcher component's (0: never full) */
	unsigned batch, streams, datagram;
	int auth_off; /* --auth off: the sequencer component untagged */
	char fsync[16]; /* --fsync: the sequencer component's [sequencer] fsync ("": disk) */
	double flood; /* --flood: session 0 sends Enters at this rate, unmeasured (0: none) */
	const char *book_out; /* --book-out: the book the answers imply is written here */
};
extern struct bench_options opt;

/* ---- bench.c: helpers of every mode ------------------------------------------ */

extern volatile sig_atomic_t bench_interrupted; /* SIGINT or SIGTERM */
extern volatile sig_atomic_t bench_load_ended;  /* SIGUSR1: send no more, drain */
void bench_on_signal(int sig);
/* Splits a comma-separated list in place; the number of items (at most max). */
int bench_split(char *text, char **out, unsigned max);
/* A non-blocking UDP socket bound to addr (port 0: any), its address in
 * *bound; or a negative errno. */
int bench_udp_bound(const char *addr, struct sockaddr_in *bound);
/* Calls fn for each datagram received on fd (its index in `in`) until none
 * is left. */
void bench_batch_each(struct net_batch *in, int fd, void (*fn)(void *ctx, unsigned k), void *ctx);
/* Starts walking the blocks of received datagram k: 0, or -1 when it is
 * not a MoldUDP64 packet. */
int bench_mold_iter(struct net_batch *in, unsigned k, struct mold_iter *it);
/* Closes the packet b built in slot *n_out of `out`, addressed to `to`;
 * sends the batch on fd when that filled it. */
void bench_batch_push(struct net_batch *out, unsigned *n_out, struct mold_builder *b,
		      const struct sockaddr_in *to, int fd);

/* ---- mix.c: the orders the bench makes ---------------------------------------- */

extern const char *const mix_names[MIX_N];
extern const char *symbols[MAX_SYMBOLS];
extern size_t symbol_len[MAX_SYMBOLS]; /* each at most OUCH_STOCK_LEN */
extern unsigned n_symbols;

/* The book the default mix builds: passive limit orders 1 to 5 ticks from a
 * $100.00 middle, most at the touch; marketable orders are IOC limits 5
 * ticks through it, so they take what rests; round lots of 100 to 1000. */
#define MID_PRICE 1000000u
#define TICK 100u

void mix_seed(uint64_t seed);
uint64_t mix_rnd(void);
enum mix_kind mix_pick(uint64_t r);
uint32_t mix_passive_price(int buy, uint64_t r);
uint32_t mix_lot(uint64_t r);
/* A fixed Enter Order (token numbered i), and the Command a gateway packs
 * for it (into out, 256 bytes); the Command's length. */
void mix_sample_enter(struct ouch_enter_order *o, uint32_t i);
size_t mix_pack_enter(const struct ouch_enter_order *e, const char *user, const char *firm,
		      uint8_t *out);
/* The Accepted (live, order number order_ref) that answers the Enter e. */
void mix_accept(const struct ouch_enter_order *e, uint64_t order_ref, struct ouch_accepted *a);

/* ---- session.c: one OUCH session of the load ----------------------------------- */

struct book_tok;

/* One per token a session used (Enter or Replace). */
struct tok {
	uint64_t planned; /* the Enter's or Replace's planned send time */
	uint64_t cxl_planned;
	uint32_t open; /* open shares once live */
	uint32_t live; /* index in the session's live set, or NO_LIVE */
	uint32_t repl; /* the pending Replace's new token */
	uint16_t flags;
};

struct bsession {
	int fd;
	unsigned gw;
	char user[SOUP_USERNAME_LEN + 1], pass[SOUP_PASSWORD_LEN + 1];
	char prefix[9]; /* token prefix: run (6) + session (2) */
	struct soup_parser parser;
	uint8_t rx[1 << 17];
	uint8_t tx[TXBUF];
	size_t txlen;
	struct tok *tok;
	uint32_t n_tok, cap_tok;
	uint32_t *live, n_live; /* resting orders that can be canceled or replaced */
	uint64_t actions; /* orders (any kind) sent */
	uint32_t in_flight;
	uint64_t last_tx;
	int lost;
	int flood; /* --flood's session: its answers are counted in `flood`, not timed */
	struct book_tok *book; /* --book-out: tok's twin, one per token; else NULL */
};

/* --flood: what session 0 sent, and what came back. */
struct flood_counts {
	uint64_t sent, skipped; /* skipped: planned, but its send buffer was full */
	uint64_t accepted, throttled, rejected; /* throttled: Rejected 'o' */
	char login[SOUP_USERNAME_LEN + 1];
};
extern struct flood_counts flood;

/* prefix (8) + the index in 6 hex digits: 14 characters */
#define TOKEN_INDEX_MAX 0xFFFFFFu

struct counts {
	uint64_t enters, accepted, rejected;
	uint64_t cancels, canceled, cancel_rejects;
	uint64_t replaces, replaced, replace_dead; /* dead: its order died first */
	uint64_t executions, aggressor_fills, canceled_other, undecodable, unexpected;
	uint64_t measured_sent, measured_answered; /* requests after the warm-up */
	uint64_t last_answer; /* time of the last answer to a measured request */
};
extern struct counts counts;

enum { H_ACCEPTED, H_EXECUTED, H_CANCELED, H_REPLACED, H_N };
extern const char *const h_names[H_N], *const h_labels[H_N];
extern struct hist hists[H_N]; /* latency from the planned send time, ns */
extern uint64_t measure_start; /* orders planned before it are the warm-up's */
extern uint64_t measure_start_wall; /* the same instant, CLOCK_REALTIME ns */
/* Accepted/Rejected per second of the run (by planned time, from
 * measure_start): the longest latency and how many, so that a tail can be
 * placed in time and set beside the daemons' logs. */
#define TL_SECONDS 3600
extern uint64_t tl_max_ns[TL_SECONDS];
extern uint32_t tl_count[TL_SECONDS];

/* --check-matches: every match number must reach the bench exactly twice,
 * once on the resting (liquidity Added) and once on the aggressing (Removed)
 * side, with the same shares and price, on opposite sides of the book.
 * Holds only when the bench's sessions are the only traders. Open
 * addressing; a match fills one of its two orders, so there are at most as
 * many matches as tokens and the table (twice that) never fills. */
struct match_slot {
	uint64_t match; /* 0: empty */
	uint32_t shares, price;
	uint8_t seen; /* 1: Added side, 2: Removed side, 4: buy, 8: sell */
	uint8_t bad;
};
extern struct match_slot *matches; /* NULL without --check-matches */
extern uint64_t match_mask, match_open; /* open: one side seen so far */

/* Connects to a gateway and logs in (5 s at most): 0 or a negative errno. */
int session_login(struct bsession *s, const char *addr);
/* Reads and handles what the gateway sent: 0, or -1 when the session ended. */
int session_read(struct bsession *s, uint64_t now);
/* Sends what the send buffer holds, as far as the socket takes it: 0 or -1. */
int session_flush(struct bsession *s);
/* Whether there is room for one more order. */
int session_can_queue(struct bsession *s);
/* Queues the next order of the mix (session_can_queue() said yes). */
void session_send(struct bsession *s, uint64_t planned);
/* --flood: queues Enter number i (an IOC far from the market: Accepted,
 * then Canceled; nothing rests), untracked (session_can_queue() said yes). */
void session_send_flood(struct bsession *s, uint32_t i);

/* --book-out: the orders resting on the book according to the answers.
 * Calls fn for each order of session s that an Accepted or Replaced put
 * on the book live and that no answer since took off (open shares left);
 * and counts the IOC orders accepted whose end (an execution of their last
 * share, or their Canceled) has not come yet. */
void session_book_each(const struct bsession *s,
		       void (*fn)(void *ctx, const struct book_tok *b, uint32_t open), void *ctx);
uint64_t session_book_ioc_open(const struct bsession *s);
/* The index of a token of session s (whatever the session's count of
 * tokens), or -1 when it is not one of its tokens. */
int64_t session_token_index(const struct bsession *s, const char *tok);

/* ---- book.c: --book-out, the book the OUCH answers imply ------------------------ */

/* What the Accepted, or the Replaced, of a token said of the order. */
struct book_tok {
	uint64_t ref; /* Order Reference Number */
	uint32_t price;
	char stock[OUCH_STOCK_LEN]; /* trimmed, NUL-padded: not NUL-terminated */
	char side, display;
	uint8_t booked; /* 1: the answer's state was Live */
	uint8_t ioc; /* 1: its Time In Force was IOC (its end is due at once) */
};

/* Shares executed on the bench's orders, each liquidity: with the bench as
 * the only trader every Removed has its Added in some session, and the
 * book is complete only when they balance. */
struct book_shares {
	uint64_t removed, added;
};
extern struct book_shares book_shares;

/* What the book still waits for after the last answer of an order. */
struct book_wait {
	uint64_t ioc_open; /* IOC orders accepted, their end not seen */
	uint64_t one_sided; /* shares Removed beyond those Added */
	uint64_t flood_unanswered; /* --flood's Enters without Accepted or Rejected */
	uint64_t lost; /* flood orders not kept (out of memory): nothing to wait for */
};

/* The flood session's answers: its orders are not in its tok[] (the flood
 * wraps its token numbers), so those that rest are kept here. */
void book_flood_accepted(uint32_t index, const struct ouch_accepted *a);
/* An execution (shares) or a Canceled (decrement; gone: not a user's
 * partial cancel, the order is gone) of the flood's order index. */
void book_flood_reduce(uint32_t index, uint32_t shares, int gone);
/* Whether the book waits for answers (what for, and what was lost, in *w
 * unless w is NULL): the drain goes on. */
int book_waiting(struct bsession *ss, unsigned n, struct book_wait *w);
/* Writes opt.book_out: one line "SYMBOL SIDE PRICE SHARES REF" per resting
 * displayed order, sorted by symbol, side, price and reference. The lines
 * written, or -1 with a message. */
long book_write(struct bsession *ss, unsigned n);
void book_fini(void);

/* ---- load.c and report.c: the load, and what it reports -------------------------- */

struct load {
	char connect_list[sizeof(opt.connect)], logins[sizeof(opt.logins)];
	char *gw[MAX_GATEWAYS], *lg[MAX_SESSIONS];
	unsigned n_gw, n_lg, window;
	int closed_loop, aborted; /* aborted: a session was lost */
	uint64_t cap, total, sent; /* tokens per session; orders to send (0: by time) */
	uint64_t start, now, deadline, stop_sending;
	double interval; /* open loop: ns between orders */
	unsigned first; /* the first measured session: 1 with --flood (session 0 floods) */
	uint64_t flood_next; /* --flood: the next Enter's number */
	int sampled; /* the CPU times at the start of the measurement were taken */
	double cpu_self0;
};

/* What the report shows besides the counts. */
struct load_figures {
	double cpu_self, secs, wall, achieved;
	uint64_t in_flight;
	long book_orders; /* the lines of --book-out; -1 without, or when not written */
};

extern unsigned n_sessions;

int load_run(void);
void report_text(const struct load *l, const struct load_figures *f);
int report_json(const struct load *l, const struct load_figures *f); /* 0 or -1 */
void report_png(const struct load *l, const struct load_figures *f);
/* The --check-matches summary; 1 when a match is one-sided or disagrees. */
int report_matches(void);

/* ---- procs.c: CPU time of the daemons (/proc/PID/stat and schedstat) ------------ */

struct proc {
	char name[32];
	pid_t pid;
	double cpu0, cpu1; /* user + system seconds at the start and end of the measurement */
	uint64_t on_cpu0, on_cpu1; /* ns on a CPU (schedstat) at the same times */
	int fine; /* on_cpu0 and on_cpu1 hold (a single thread, schedstat readable) */
	uint64_t loop0, loop1; /* several threads: the main thread's ns on a CPU */
	int loop_ok; /* loop0 and loop1 hold */
	uint64_t minflt0, minflt1; /* minor page faults (/proc/PID/stat) at the same times */
	int gone;
	int in_cluster; /* a NODE.pid of --cluster: its control socket is DIR/NODE/NODE.ctl */
};
extern struct proc procs[MAX_PROCS];
extern unsigned n_procs;

/* The new entry, or NULL when the table is full or pid is not one. */
struct proc *procs_add(const char *name, pid_t pid);
/* --pids and --cluster: 0, or -1 with a message. */
int procs_load(void);
void procs_sample(int end);
/* p's CPU time over the measurement, ns: schedstat's when fine, else
 * stat's (a multiple of 10 ms); 0 once it is gone. */
double procs_cpu_ns(const struct proc *p);
/* p's main thread's (its event loop's) CPU time over the measurement, ns;
 * -1 for a single-threaded process (all of it is), or when unreadable. */
double procs_loop_ns(const struct proc *p);
/* p's minor page faults over the measurement (0 once it is gone): memory
 * touched for the first time, which a hot path should not do. */
uint64_t procs_minflt(const struct proc *p);
double procs_self_cpu(void);

/* ---- losses.c: what the run lost (/proc/net/snmp, the daemons' STATS) ------------ */

/* Samples the machine's UDP counters and, with --cluster, each daemon's
 * loss counters over its control socket: before the first order (end 0)
 * and after the last answer (end 1). */
void losses_sample(int end);
/* The "kernel udp:" and "losses:" lines. */
void losses_text(FILE *f);
/* The "kernel_udp", "daemon_losses" and "gateway_stages_ns" keys (commas
 * between them only). */
void losses_json(FILE *f);

/* ---- relay.c, echo.c, baseline.c: --baseline ------------------------------------- */

#define RELAY_BATCH 64
int relay_run(int lfd, int ufd, const struct sockaddr_in *echo);
int echo_run(int ufd);
/* Forks the echo and one relay per gateway of --connect; rewrites
 * opt.connect to the relays' addresses. 0 or a negative errno. */
int baseline_start(unsigned n_gw);
void baseline_stop(void);

/* ---- comp_*.c: --component --------------------------------------------------------- */

int comp_codecs_run(uint64_t n);
int comp_matcher_run(void);
int comp_sequencer_run(void);

#endif
