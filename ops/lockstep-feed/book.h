/* A market data subscriber's order books, built from decoded ITCH 5.0
 * messages (common/itch.h): per symbol, the displayed resting orders by
 * order reference number, in price levels per side in price-time order.
 *
 * Queue order follows the feed's rules: an Add ('A', 'F') joins the back of
 * its price level; an Order Replace ('U') moves the order to new_ref with
 * the new shares and price, keeping its place in the queue when the price
 * is the same and the shares did not grow, else at the back of its (new)
 * price level; executions ('E', 'C') and cancels ('X') reduce it in place,
 * and it leaves the book when its shares reach 0; 'D' removes it. 'P'
 * (trade against a non-displayed order) changes no order, only the
 * symbol's volume. 'R' maps a stock locate to its symbol, 'H' sets the
 * symbol's trading state, 'S' the last system event.
 *
 * Nothing here crashes on bad input: a message that cannot be applied as
 * it stands (an unknown order reference, a duplicate one, an unknown
 * locate...) is counted as an anomaly (enum book_anomaly) and leaves the
 * book as it was; an execution or cancel of more shares than the order
 * has removes the order and is counted too.
 *
 * Pure: no clock, no I/O, no logging; memory is allocated at
 * book_create() only, sized by its arguments, and the cost of a message
 * does not depend on how many orders the book holds (hash tables keyed by
 * reference number and by price), except for an Add or Replace that opens
 * a new price level: it walks the side from its best level to its place
 * (short for the adds near the top that make most of a feed). */
#ifndef LOCKSTEP_FEED_BOOK_H
#define LOCKSTEP_FEED_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "itch.h"

#define BOOK_MAX_SYMBOLS 65535u /* stock locates are 16 bits */
#define BOOK_LINE_MAX 96 /* a dump line, with its NUL */

enum book_anomaly {
	BOOK_OK = 0,
	BOOK_A_UNKNOWN_REF, /* E, C, X, D, U of a reference the book does not hold */
	BOOK_A_DUPLICATE_REF, /* A, F or U's new_ref: a reference already in the book */
	BOOK_A_OVER_EXECUTE, /* E or C of more shares than the order has (removed) */
	BOOK_A_OVER_CANCEL, /* X of more shares than the order has (removed) */
	BOOK_A_UNKNOWN_LOCATE, /* A, F, H, P of a locate no 'R' named */
	BOOK_A_UNKNOWN_TYPE, /* a type the book does not know */
	BOOK_A_BAD_FIELD, /* 0 shares, a side not B/S */
	BOOK_A_SYMBOL_MISMATCH, /* the message's stock is not its locate's symbol */
	BOOK_A_LOCATE_CONFLICT, /* 'R' for a locate or symbol already mapped otherwise */
	BOOK_A_ORDERS_FULL, /* more resting orders than max_orders */
	BOOK_A_SYMBOLS_FULL, /* more symbols than max_symbols */
	BOOK_A_MAX
};

const char *book_anomaly_name(int a); /* "unknown_ref", ... */

struct book_stats {
	uint64_t messages; /* given to book_apply */
	uint64_t adds, executions, cancels, deletes, replaces, trades;
	uint64_t system_events, directory, trading_actions, other;
	uint64_t executed_shares; /* E, C and P: the volume */
	uint64_t anomalies[BOOK_A_MAX]; /* [BOOK_OK] unused */
	uint64_t anomalies_total;
	uint32_t orders, levels, symbols; /* now */
	uint32_t orders_high; /* the most orders held at once */
};

struct book;

/* max_orders resting orders (1..2^31), max_symbols symbols
 * (1..BOOK_MAX_SYMBOLS). -EINVAL, -ENOMEM. */
int book_create(struct book **out, uint32_t max_orders, uint32_t max_symbols);
void book_destroy(struct book *b); /* accepts NULL */
/* Forgets every order and symbol (a new trading day, or before loading a
 * snapshot); the counters are kept. */
void book_clear(struct book *b);

/* Applies one message: BOOK_OK, or the anomaly it was counted as. 'G'
 * (GLIMPSE's End of Snapshot) changes nothing and is BOOK_OK. */
int book_apply(struct book *b, const struct itch_msg *m);

void book_get_stats(const struct book *b, struct book_stats *out);
/* The last System Event code applied, 0 before any. */
char book_last_event(const struct book *b);

/* A symbol as the book knows it. */
struct book_symbol {
	char stock[ITCH_STOCK_LEN + 1];
	uint16_t locate;
	char state; /* the last 'H' state, 0 before any */
	char reason[5];
	uint32_t orders; /* resting, both sides */
	uint64_t volume; /* shares executed (E, C, P) */
	uint64_t trades; /* executions and trades */
};

/* -ENOENT when no 'R' named the symbol. */
int book_symbol(const struct book *b, const char *stock, struct book_symbol *out);

/* One price level, aggregated. */
struct book_level {
	uint32_t price; /* 4 implied decimals */
	uint64_t shares;
	uint32_t orders;
};

struct book_top {
	int has_bid, has_ask;
	struct book_level bid, ask;
};

/* Best bid and ask of `stock`; -ENOENT when the symbol is not known. */
int book_top(const struct book *b, const char *stock, struct book_top *out);
/* Up to n levels of one side ('B' or 'S') of `stock`, best first: how
 * many were written, or -ENOENT (unknown symbol), -EINVAL (side). */
int book_depth(const struct book *b, const char *stock, char side, struct book_level *out,
	       unsigned n);

/* The canonical dump: symbols in name order; for each, one line
 *   SYMBOL state S locate L
 * (S: the trading state, '-' before any 'H'), then one line per resting
 * order in book order (bids best price first, then asks best price
 * first, time priority within a level):
 *   SYMBOL SIDE PRICE SHARES REF
 * with PRICE in dollars and 4 decimals (101.2500). Two books that hold the
 * same orders in the same queue order and the same symbols dump the same
 * lines, so that dumps compare with diff.
 *
 * A cursor walks the lines; it is valid while the book does not change. */
struct book_cursor {
	uint32_t sym_pos; /* index into the name-sorted symbols */
	int side; /* -1: the symbol line is next; 0 bids, 1 asks */
	uint32_t order; /* next order of the current side, or none */
};

void book_cursor_init(struct book_cursor *c);
/* Writes the next line (NUL-terminated, no newline) into line: its length,
 * or 0 at the end. */
size_t book_cursor_next(const struct book *b, struct book_cursor *c,
			char line[BOOK_LINE_MAX]);

/* Compares the dumps of a and b: 0 when equal; else 1, with the first
 * difference described in diff (NUL-terminated, cut to cap):
 *   "line N: A <line> / B <line>" (a missing line reads "(end)"). */
int book_compare(const struct book *a, const struct book *b, char *diff, size_t cap);

#endif
