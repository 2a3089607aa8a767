/* lockstep-feed's order books (ops/lockstep-feed/book.h): adds, executions,
 * cancels, deletes, replaces (queue place kept or lost), depth, anomalies,
 * the canonical dump and compare, and 100,000 random operations checked
 * against a naive list-based model. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "book.h"
#include "itch.h"
#include "testutil.h"

/* Check writes down every passing ck_assert (a write(2) each): the loops
 * of the random test check with these, which only call Check on failure. */
#define FAST_EQ(a, b) \
	do { \
		long long fa_ = (long long)(a), fb_ = (long long)(b); \
		if (fa_ != fb_) \
			ck_abort_msg("%s == %s: %lld != %lld", #a, #b, fa_, fb_); \
	} while (0)
#define FAST_STR_EQ(a, b) \
	do { \
		if (strcmp((a), (b)) != 0) \
			ck_abort_msg("%s == %s:\n%s\n---- !=\n%s", #a, #b, (a), (b)); \
	} while (0)

/* ---- messages ------------------------------------------------------------ */

static struct itch_msg msg(char type, uint16_t locate)
{
	struct itch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.locate = locate;
	return m;
}

static int dir(struct book *b, uint16_t locate, const char *stock)
{
	struct itch_msg m = msg('R', locate);

	snprintf(m.u.stock_directory.stock, sizeof(m.u.stock_directory.stock), "%s", stock);
	return book_apply(b, &m);
}

static int trading(struct book *b, uint16_t locate, const char *stock, char state)
{
	struct itch_msg m = msg('H', locate);

	snprintf(m.u.trading_action.stock, sizeof(m.u.trading_action.stock), "%s", stock);
	m.u.trading_action.state = state;
	return book_apply(b, &m);
}

static int add(struct book *b, uint16_t locate, const char *stock, uint64_t ref, char side,
	       uint32_t shares, uint32_t price)
{
	struct itch_msg m = msg('A', locate);

	m.u.add.ref = ref;
	m.u.add.side = side;
	m.u.add.shares = shares;
	m.u.add.price = price;
	snprintf(m.u.add.stock, sizeof(m.u.add.stock), "%s", stock);
	return book_apply(b, &m);
}

static int exec_(struct book *b, uint64_t ref, uint32_t shares)
{
	struct itch_msg m = msg('E', 0);

	m.u.executed.ref = ref;
	m.u.executed.shares = shares;
	return book_apply(b, &m);
}

static int exec_price(struct book *b, uint64_t ref, uint32_t shares, uint32_t price)
{
	struct itch_msg m = msg('C', 0);

	m.u.executed.ref = ref;
	m.u.executed.shares = shares;
	m.u.executed.printable = 'Y';
	m.u.executed.price = price;
	return book_apply(b, &m);
}

static int cancel(struct book *b, uint64_t ref, uint32_t shares)
{
	struct itch_msg m = msg('X', 0);

	m.u.cancel.ref = ref;
	m.u.cancel.shares = shares;
	return book_apply(b, &m);
}

static int del(struct book *b, uint64_t ref)
{
	struct itch_msg m = msg('D', 0);

	m.u.del.ref = ref;
	return book_apply(b, &m);
}

static int replace(struct book *b, uint64_t old_ref, uint64_t new_ref, uint32_t shares,
		   uint32_t price)
{
	struct itch_msg m = msg('U', 0);

	m.u.replace.old_ref = old_ref;
	m.u.replace.new_ref = new_ref;
	m.u.replace.shares = shares;
	m.u.replace.price = price;
	return book_apply(b, &m);
}

static int trade(struct book *b, uint16_t locate, const char *stock, uint32_t shares)
{
	struct itch_msg m = msg('P', locate);

	m.u.trade.side = 'B';
	m.u.trade.shares = shares;
	m.u.trade.price = 1000000;
	snprintf(m.u.trade.stock, sizeof(m.u.trade.stock), "%s", stock);
	return book_apply(b, &m);
}

/* The whole dump, lines joined by '\n'. */
static void dump(const struct book *b, char *out, size_t cap)
{
	struct book_cursor c;
	char line[BOOK_LINE_MAX];
	size_t n, off = 0;

	book_cursor_init(&c);
	out[0] = 0;
	while ((n = book_cursor_next(b, &c, line)) > 0) {
		if (off + n + 1 >= cap)
			ck_abort_msg("dump: more than %zu bytes", cap);
		memcpy(out + off, line, n);
		off += n;
		out[off++] = '\n';
		out[off] = 0;
	}
}

static struct book *new_book(uint32_t orders, uint32_t symbols)
{
	struct book *b = NULL;

	ck_assert_int_eq(book_create(&b, orders, symbols), 0);
	ck_assert_ptr_nonnull(b);
	return b;
}

/* ---- the cases ----------------------------------------------------------- */

START_TEST(create_limits)
{
	struct book *b = NULL;

	ck_assert_int_eq(book_create(&b, 0, 10), -EINVAL);
	ck_assert_int_eq(book_create(&b, 10, 0), -EINVAL);
	ck_assert_int_eq(book_create(&b, 10, BOOK_MAX_SYMBOLS + 1), -EINVAL);
	ck_assert_ptr_null(b);
	book_destroy(NULL);
}
END_TEST

START_TEST(adds_top_and_depth)
{
	struct book *b = new_book(100, 10);
	struct book_top t;
	struct book_level lv[4];
	struct book_symbol y;

	ck_assert_int_eq(dir(b, 1, "AAPL"), BOOK_OK);
	ck_assert_int_eq(book_top(b, "AAPL", &t), 0);
	ck_assert(!t.has_bid && !t.has_ask);
	ck_assert_int_eq(book_top(b, "MSFT", &t), -ENOENT);
	/* bids at 100.00 (2 orders), 99.50; asks at 100.10, 100.20 (2) */
	ck_assert_int_eq(add(b, 1, "AAPL", 1, 'B', 100, 1000000), BOOK_OK);
	ck_assert_int_eq(add(b, 1, "AAPL", 2, 'B', 300, 995000), BOOK_OK);
	ck_assert_int_eq(add(b, 1, "AAPL", 3, 'B', 50, 1000000), BOOK_OK);
	ck_assert_int_eq(add(b, 1, "AAPL", 4, 'S', 200, 1002000), BOOK_OK);
	ck_assert_int_eq(add(b, 1, "AAPL", 5, 'S', 70, 1001000), BOOK_OK);
	ck_assert_int_eq(add(b, 1, "AAPL", 6, 'S', 30, 1002000), BOOK_OK);
	ck_assert_int_eq(book_top(b, "AAPL", &t), 0);
	ck_assert(t.has_bid && t.has_ask);
	ck_assert_uint_eq(t.bid.price, 1000000);
	ck_assert_uint_eq(t.bid.shares, 150);
	ck_assert_uint_eq(t.bid.orders, 2);
	ck_assert_uint_eq(t.ask.price, 1001000);
	ck_assert_uint_eq(t.ask.shares, 70);
	ck_assert_uint_eq(t.ask.orders, 1);

	ck_assert_int_eq(book_depth(b, "AAPL", 'B', lv, 4), 2);
	ck_assert_uint_eq(lv[0].price, 1000000);
	ck_assert_uint_eq(lv[0].shares, 150);
	ck_assert_uint_eq(lv[1].price, 995000);
	ck_assert_uint_eq(lv[1].shares, 300);
	ck_assert_uint_eq(lv[1].orders, 1);
	ck_assert_int_eq(book_depth(b, "AAPL", 'S', lv, 1), 1); /* n caps */
	ck_assert_uint_eq(lv[0].price, 1001000);
	ck_assert_int_eq(book_depth(b, "AAPL", 'S', lv, 4), 2);
	ck_assert_uint_eq(lv[1].price, 1002000);
	ck_assert_uint_eq(lv[1].shares, 230);
	ck_assert_uint_eq(lv[1].orders, 2);
	ck_assert_int_eq(book_depth(b, "AAPL", 'X', lv, 4), -EINVAL);
	ck_assert_int_eq(book_depth(b, "NOPE", 'B', lv, 4), -ENOENT);

	ck_assert_int_eq(book_symbol(b, "AAPL", &y), 0);
	ck_assert_uint_eq(y.locate, 1);
	ck_assert_uint_eq(y.orders, 6);
	ck_assert_int_eq(y.state, 0);
	ck_assert_int_eq(trading(b, 1, "AAPL", 'T'), BOOK_OK);
	ck_assert_int_eq(book_symbol(b, "AAPL", &y), 0);
	ck_assert_int_eq(y.state, 'T');
	book_destroy(b);
}
END_TEST

START_TEST(executes_cancels_deletes)
{
	struct book *b = new_book(100, 10);
	struct book_top t;
	struct book_symbol y;
	struct book_stats st;

	dir(b, 7, "MSFT");
	add(b, 7, "MSFT", 10, 'B', 100, 500000);
	add(b, 7, "MSFT", 11, 'B', 200, 500000);
	add(b, 7, "MSFT", 12, 'S', 300, 510000);

	ck_assert_int_eq(exec_(b, 10, 40), BOOK_OK); /* partial */
	book_top(b, "MSFT", &t);
	ck_assert_uint_eq(t.bid.shares, 260);
	ck_assert_uint_eq(t.bid.orders, 2);
	ck_assert_int_eq(exec_price(b, 10, 60, 499000), BOOK_OK); /* to 0: gone */
	book_top(b, "MSFT", &t);
	ck_assert_uint_eq(t.bid.shares, 200);
	ck_assert_uint_eq(t.bid.orders, 1);
	ck_assert_int_eq(exec_(b, 10, 1), BOOK_A_UNKNOWN_REF);

	ck_assert_int_eq(cancel(b, 12, 100), BOOK_OK); /* partial cancel */
	book_top(b, "MSFT", &t);
	ck_assert_uint_eq(t.ask.shares, 200);
	ck_assert_int_eq(cancel(b, 12, 200), BOOK_OK); /* all of it */
	book_top(b, "MSFT", &t);
	ck_assert(!t.has_ask);

	ck_assert_int_eq(del(b, 11), BOOK_OK);
	book_top(b, "MSFT", &t);
	ck_assert(!t.has_bid);
	ck_assert_int_eq(del(b, 11), BOOK_A_UNKNOWN_REF);

	/* too many shares: the order goes, counted */
	add(b, 7, "MSFT", 13, 'S', 10, 510000);
	add(b, 7, "MSFT", 14, 'S', 10, 510000);
	ck_assert_int_eq(exec_(b, 13, 11), BOOK_A_OVER_EXECUTE);
	ck_assert_int_eq(cancel(b, 14, 11), BOOK_A_OVER_CANCEL);
	book_top(b, "MSFT", &t);
	ck_assert(!t.has_ask);

	ck_assert_int_eq(trade(b, 7, "MSFT", 500), BOOK_OK);
	ck_assert_int_eq(book_symbol(b, "MSFT", &y), 0);
	ck_assert_uint_eq(y.volume, 40 + 60 + 10 + 500);
	ck_assert_uint_eq(y.trades, 4);
	ck_assert_uint_eq(y.orders, 0);
	book_get_stats(b, &st);
	ck_assert_uint_eq(st.orders, 0);
	ck_assert_uint_eq(st.levels, 0);
	ck_assert_uint_eq(st.orders_high, 3);
	ck_assert_uint_eq(st.executed_shares, 610);
	ck_assert_uint_eq(st.anomalies[BOOK_A_UNKNOWN_REF], 2);
	ck_assert_uint_eq(st.anomalies[BOOK_A_OVER_EXECUTE], 1);
	ck_assert_uint_eq(st.anomalies[BOOK_A_OVER_CANCEL], 1);
	ck_assert_uint_eq(st.anomalies_total, 4);
	book_destroy(b);
}
END_TEST

START_TEST(replace_priority)
{
	struct book *b = new_book(100, 10);
	char d[2048];

	dir(b, 1, "IBM");
	add(b, 1, "IBM", 1, 'B', 100, 1000000);
	add(b, 1, "IBM", 2, 'B', 100, 1000000);
	add(b, 1, "IBM", 3, 'B', 100, 1000000);
	/* same price, fewer shares: 1 -> 11 keeps the front */
	ck_assert_int_eq(replace(b, 1, 11, 60, 1000000), BOOK_OK);
	/* same price, same shares: 2 -> 12 keeps its place */
	ck_assert_int_eq(replace(b, 2, 12, 100, 1000000), BOOK_OK);
	dump(b, d, sizeof(d));
	ck_assert_str_eq(d, "IBM state - locate 1\n"
			    "IBM B 100.0000 60 11\n"
			    "IBM B 100.0000 100 12\n"
			    "IBM B 100.0000 100 3\n");
	/* same price, more shares: 11 -> 21 to the back */
	ck_assert_int_eq(replace(b, 11, 21, 61, 1000000), BOOK_OK);
	dump(b, d, sizeof(d));
	ck_assert_str_eq(d, "IBM state - locate 1\n"
			    "IBM B 100.0000 100 12\n"
			    "IBM B 100.0000 100 3\n"
			    "IBM B 100.0000 61 21\n");
	/* another price, fewer shares: to the back of that level (a new one) */
	ck_assert_int_eq(add(b, 1, "IBM", 4, 'B', 5, 1010000), BOOK_OK);
	ck_assert_int_eq(replace(b, 12, 22, 10, 1010000), BOOK_OK);
	/* the last order of a level moved away: the level goes */
	ck_assert_int_eq(replace(b, 3, 23, 10, 990000), BOOK_OK);
	dump(b, d, sizeof(d));
	ck_assert_str_eq(d, "IBM state - locate 1\n"
			    "IBM B 101.0000 5 4\n"
			    "IBM B 101.0000 10 22\n"
			    "IBM B 100.0000 61 21\n"
			    "IBM B 99.0000 10 23\n");
	/* the old references are gone, the new ones answer */
	ck_assert_int_eq(del(b, 12), BOOK_A_UNKNOWN_REF);
	ck_assert_int_eq(replace(b, 12, 30, 1, 1), BOOK_A_UNKNOWN_REF);
	ck_assert_int_eq(replace(b, 22, 21, 1, 1), BOOK_A_DUPLICATE_REF);
	ck_assert_int_eq(replace(b, 22, 31, 0, 1), BOOK_A_BAD_FIELD);
	ck_assert_int_eq(del(b, 22), BOOK_OK);
	/* a replace keeps the side: an ask stays an ask */
	add(b, 1, "IBM", 40, 'S', 5, 1020000);
	ck_assert_int_eq(replace(b, 40, 41, 7, 1030000), BOOK_OK);
	dump(b, d, sizeof(d));
	ck_assert_str_eq(d, "IBM state - locate 1\n"
			    "IBM B 101.0000 5 4\n"
			    "IBM B 100.0000 61 21\n"
			    "IBM B 99.0000 10 23\n"
			    "IBM S 103.0000 7 41\n");
	book_destroy(b);
}
END_TEST

START_TEST(anomalies_counted)
{
	struct book *b = new_book(2, 2);
	struct itch_msg m = msg('Y', 1);
	struct book_stats st;

	ck_assert_int_eq(add(b, 1, "AAPL", 1, 'B', 1, 1), BOOK_A_UNKNOWN_LOCATE);
	ck_assert_int_eq(trading(b, 1, "AAPL", 'T'), BOOK_A_UNKNOWN_LOCATE);
	ck_assert_int_eq(trade(b, 1, "AAPL", 1), BOOK_A_UNKNOWN_LOCATE);
	ck_assert_int_eq(dir(b, 1, "AAPL"), BOOK_OK);
	ck_assert_int_eq(dir(b, 1, "AAPL"), BOOK_OK); /* again: the same, fine */
	ck_assert_int_eq(dir(b, 1, "MSFT"), BOOK_A_LOCATE_CONFLICT);
	ck_assert_int_eq(dir(b, 2, "AAPL"), BOOK_A_LOCATE_CONFLICT);
	ck_assert_int_eq(dir(b, 3, ""), BOOK_A_BAD_FIELD);
	ck_assert_int_eq(dir(b, 2, "MSFT"), BOOK_OK);
	ck_assert_int_eq(dir(b, 3, "IBM"), BOOK_A_SYMBOLS_FULL);
	ck_assert_int_eq(add(b, 1, "MSFT", 1, 'B', 1, 1), BOOK_A_SYMBOL_MISMATCH);
	ck_assert_int_eq(trading(b, 2, "AAPL", 'H'), BOOK_A_SYMBOL_MISMATCH);
	ck_assert_int_eq(add(b, 1, "AAPL", 1, 'Z', 1, 1), BOOK_A_BAD_FIELD);
	ck_assert_int_eq(add(b, 1, "AAPL", 1, 'B', 0, 1), BOOK_A_BAD_FIELD);
	ck_assert_int_eq(add(b, 1, "AAPL", 1, 'B', 1, 1), BOOK_OK);
	ck_assert_int_eq(add(b, 2, "MSFT", 1, 'S', 1, 1), BOOK_A_DUPLICATE_REF);
	ck_assert_int_eq(add(b, 2, "MSFT", 2, 'S', 1, 1), BOOK_OK);
	ck_assert_int_eq(add(b, 2, "MSFT", 3, 'S', 1, 1), BOOK_A_ORDERS_FULL);
	ck_assert_int_eq(exec_(b, 1, 0), BOOK_A_BAD_FIELD);
	ck_assert_int_eq(cancel(b, 99, 1), BOOK_A_UNKNOWN_REF);
	ck_assert_int_eq(book_apply(b, &m), BOOK_A_UNKNOWN_TYPE);
	m.type = 'G';
	ck_assert_int_eq(book_apply(b, &m), BOOK_OK);
	m = msg('S', 0);
	m.u.system_event.event_code = 'Q';
	ck_assert_int_eq(book_apply(b, &m), BOOK_OK);
	ck_assert_int_eq(book_last_event(b), 'Q');

	book_get_stats(b, &st);
	ck_assert_uint_eq(st.anomalies[BOOK_A_UNKNOWN_LOCATE], 3);
	ck_assert_uint_eq(st.anomalies[BOOK_A_LOCATE_CONFLICT], 2);
	ck_assert_uint_eq(st.anomalies[BOOK_A_BAD_FIELD], 4);
	ck_assert_uint_eq(st.anomalies[BOOK_A_SYMBOLS_FULL], 1);
	ck_assert_uint_eq(st.anomalies[BOOK_A_SYMBOL_MISMATCH], 2);
	ck_assert_uint_eq(st.anomalies[BOOK_A_DUPLICATE_REF], 1);
	ck_assert_uint_eq(st.anomalies[BOOK_A_ORDERS_FULL], 1);
	ck_assert_uint_eq(st.anomalies[BOOK_A_UNKNOWN_REF], 1);
	ck_assert_uint_eq(st.anomalies[BOOK_A_UNKNOWN_TYPE], 1);
	ck_assert_uint_eq(st.anomalies_total, 16);
	ck_assert_uint_eq(st.orders, 2);
	ck_assert_uint_eq(st.symbols, 2);
	ck_assert_str_eq(book_anomaly_name(BOOK_A_OVER_CANCEL), "over_cancel");
	ck_assert_str_eq(book_anomaly_name(99), "unknown");

	/* a new day: nothing held, counters kept */
	book_clear(b);
	book_get_stats(b, &st);
	ck_assert_uint_eq(st.orders, 0);
	ck_assert_uint_eq(st.symbols, 0);
	ck_assert_uint_eq(st.anomalies_total, 16);
	ck_assert_int_eq(book_last_event(b), 0);
	ck_assert_int_eq(add(b, 1, "AAPL", 1, 'B', 1, 1), BOOK_A_UNKNOWN_LOCATE);
	ck_assert_int_eq(dir(b, 5, "AAPL"), BOOK_OK);
	ck_assert_int_eq(add(b, 5, "AAPL", 1, 'B', 1, 1), BOOK_OK);
	book_destroy(b);
}
END_TEST

START_TEST(dump_and_compare)
{
	struct book *a = new_book(100, 10), *b = new_book(100, 10);
	char d[2048], diff[256];

	/* symbols dump in name order whatever their locates and arrival */
	dir(a, 3, "ZZZ");
	dir(a, 1, "AAA");
	dir(b, 1, "AAA");
	dir(b, 3, "ZZZ");
	trading(a, 3, "ZZZ", 'T');
	trading(b, 3, "ZZZ", 'T');
	add(a, 3, "ZZZ", 5, 'S', 10, 12345);
	add(a, 1, "AAA", 6, 'B', 20, 1);
	add(b, 1, "AAA", 6, 'B', 20, 1);
	add(b, 3, "ZZZ", 5, 'S', 10, 12345);
	dump(a, d, sizeof(d));
	ck_assert_str_eq(d, "AAA state - locate 1\n"
			    "AAA B 0.0001 20 6\n"
			    "ZZZ state T locate 3\n"
			    "ZZZ S 1.2345 10 5\n");
	ck_assert_int_eq(book_compare(a, b, diff, sizeof(diff)), 0);

	/* one more order on b only */
	add(b, 3, "ZZZ", 7, 'S', 1, 12345);
	ck_assert_int_eq(book_compare(a, b, diff, sizeof(diff)), 1);
	ck_assert_str_eq(diff, "line 5: A (end) / B ZZZ S 1.2345 1 7");
	ck_assert_int_eq(book_compare(b, a, diff, sizeof(diff)), 1);
	ck_assert_str_eq(diff, "line 5: A ZZZ S 1.2345 1 7 / B (end)");
	/* the same orders in another queue order differ */
	add(a, 1, "AAA", 8, 'B', 20, 1);
	add(a, 3, "ZZZ", 7, 'S', 1, 12345);
	add(b, 1, "AAA", 8, 'B', 20, 1);
	ck_assert_int_eq(book_compare(a, b, diff, sizeof(diff)), 0);
	replace(a, 6, 9, 20, 1); /* keeps its place */
	replace(b, 6, 9, 21, 1); /* to the back */
	ck_assert_int_eq(book_compare(a, b, diff, sizeof(diff)), 1);
	ck_assert_str_eq(diff, "line 2: A AAA B 0.0001 20 9 / B AAA B 0.0001 20 8");
	/* a trading state differs */
	del(a, 9);
	del(b, 9);
	ck_assert_int_eq(book_compare(a, b, diff, sizeof(diff)), 0);
	trading(b, 1, "AAA", 'H');
	ck_assert_int_eq(book_compare(a, b, diff, 0), 1);
	/* the cursor's end is sticky */
	{
		struct book_cursor c;
		char line[BOOK_LINE_MAX];

		book_cursor_init(&c);
		while (book_cursor_next(a, &c, line) > 0)
			;
		ck_assert_uint_eq(book_cursor_next(a, &c, line), 0);
		ck_assert_str_eq(line, "");
	}
	book_destroy(a);
	book_destroy(b);
}
END_TEST

/* ---- a naive model, and random operations -------------------------------- */

#define M_SYMS 3
#define M_CAP 4096 /* the book's max_orders: the hash tables wrap and shift */

static const char *const m_stock[M_SYMS] = { "AAPL", "IBM", "MSFT" }; /* name order */

struct m_order {
	uint64_t ref, prio;
	uint32_t shares, price;
	int sym;
	char side;
};

struct model {
	struct m_order o[M_CAP];
	unsigned n;
	uint64_t prio;
};

static uint64_t rng_s = 0x1234567890abcdefull;

static uint64_t rnd(void)
{
	rng_s ^= rng_s << 13;
	rng_s ^= rng_s >> 7;
	rng_s ^= rng_s << 17;
	return rng_s;
}

static unsigned rnd_upto(unsigned n)
{
	return (unsigned)(rnd() % n);
}

static void m_remove(struct model *m, int i)
{
	m->o[i] = m->o[--m->n];
}

/* a before b in book order (same symbol) */
static int m_before(const struct m_order *a, const struct m_order *b)
{
	if (a->side != b->side)
		return a->side == 'B';
	if (a->price != b->price)
		return a->side == 'B' ? a->price > b->price : a->price < b->price;
	return a->prio < b->prio;
}

static int m_cmp(const void *pa, const void *pb)
{
	const struct m_order *a = pa, *b = pb;

	if (a->sym != b->sym)
		return a->sym - b->sym;
	return m_before(a, b) ? -1 : 1;
}

static void m_dump(const struct model *m, char *out, size_t cap)
{
	static struct m_order s[M_CAP];
	size_t off = 0;
	unsigned k = 0;

	memcpy(s, m->o, m->n * sizeof(s[0]));
	qsort(s, m->n, sizeof(s[0]), m_cmp);
	for (int y = 0; y < M_SYMS; y++) {
		off += (size_t)snprintf(out + off, cap - off, "%s state T locate %d\n", m_stock[y],
					y + 1);
		for (; k < m->n && s[k].sym == y; k++)
			off += (size_t)snprintf(out + off, cap - off, "%s %c %u.%04u %u %llu\n",
						m_stock[y], s[k].side, s[k].price / 10000,
						s[k].price % 10000, s[k].shares,
						(unsigned long long)s[k].ref);
		if (off >= cap)
			ck_abort_msg("model dump: %zu bytes do not fit", off);
	}
}

static void m_check_top(const struct model *m, const struct book *b, int y)
{
	struct book_top t;
	uint32_t bp = 0, ap = UINT32_MAX;
	uint64_t bs = 0, as = 0;
	uint32_t bn = 0, an = 0;
	int hb = 0, ha = 0;

	for (unsigned i = 0; i < m->n; i++) {
		const struct m_order *o = &m->o[i];

		if (o->sym != y)
			continue;
		if (o->side == 'B') {
			if (!hb || o->price > bp) {
				bp = o->price;
				bs = 0;
				bn = 0;
			}
			hb = 1;
			if (o->price == bp) {
				bs += o->shares;
				bn++;
			}
		} else {
			if (!ha || o->price < ap) {
				ap = o->price;
				as = 0;
				an = 0;
			}
			ha = 1;
			if (o->price == ap) {
				as += o->shares;
				an++;
			}
		}
	}
	FAST_EQ(book_top(b, m_stock[y], &t), 0);
	FAST_EQ(t.has_bid, hb);
	FAST_EQ(t.has_ask, ha);
	if (hb) {
		FAST_EQ(t.bid.price, bp);
		FAST_EQ(t.bid.shares, bs);
		FAST_EQ(t.bid.orders, bn);
	}
	if (ha) {
		FAST_EQ(t.ask.price, ap);
		FAST_EQ(t.ask.shares, as);
		FAST_EQ(t.ask.orders, an);
	}
}

static uint32_t rnd_price(char side)
{
	/* overlapping bands: many orders a level, levels opened anywhere */
	return (side == 'B' ? 990000 : 1000000) + 100 * rnd_upto(150);
}

START_TEST(random_against_model)
{
	static struct model m;
	static char want[M_CAP * 48 + 256], got[M_CAP * 48 + 256];
	struct book *b = new_book(M_CAP, 16);
	uint64_t next_ref = 1000, expect_anomalies = 0;
	struct book_stats st;

	m.n = 0;
	for (int y = 0; y < M_SYMS; y++) {
		/* locates in reverse name order: dumps must still sort by name */
		FAST_EQ(dir(b, (uint16_t)(y + 1), m_stock[y]), BOOK_OK);
		FAST_EQ(trading(b, (uint16_t)(y + 1), m_stock[y], 'T'), BOOK_OK);
	}
	for (int step = 0; step < 100000; step++) {
		unsigned op = rnd_upto(100);
		int i = m.n ? (int)rnd_upto(m.n) : -1;
		struct m_order *o = i >= 0 ? &m.o[i] : NULL;
		int touched = o ? o->sym : -1;

		/* mostly adds while the book is small, never past its capacity */
		if (m.n < 200 && op >= 60)
			op = rnd_upto(40);
		if (m.n >= M_CAP - 1 || (!o && op >= 40))
			op = o ? 60 : 0;
		if (op < 40) { /* add */
			struct m_order n = { .ref = next_ref++, .prio = m.prio++,
					     .shares = 1 + rnd_upto(500), .sym = (int)rnd_upto(M_SYMS),
					     .side = rnd_upto(2) ? 'B' : 'S' };

			n.price = rnd_price(n.side);
			FAST_EQ(add(b, (uint16_t)(n.sym + 1), m_stock[n.sym], n.ref, n.side,
					     n.shares, n.price),
					 BOOK_OK);
			m.o[m.n++] = n;
			touched = n.sym;
		} else if (op < 55) { /* execute, now and then too much */
			uint32_t sh = rnd_upto(10) ? 1 + rnd_upto(o->shares) : o->shares + 1;
			int want_a = sh > o->shares ? BOOK_A_OVER_EXECUTE : BOOK_OK;

			FAST_EQ(rnd_upto(2) ? exec_(b, o->ref, sh)
						     : exec_price(b, o->ref, sh, o->price),
					 want_a);
			expect_anomalies += want_a != BOOK_OK;
			if (sh >= o->shares)
				m_remove(&m, i);
			else
				o->shares -= sh;
		} else if (op < 65) { /* cancel */
			uint32_t sh = rnd_upto(10) ? 1 + rnd_upto(o->shares) : o->shares + 5;
			int want_a = sh > o->shares ? BOOK_A_OVER_CANCEL : BOOK_OK;

			FAST_EQ(cancel(b, o->ref, sh), want_a);
			expect_anomalies += want_a != BOOK_OK;
			if (sh >= o->shares)
				m_remove(&m, i);
			else
				o->shares -= sh;
		} else if (op < 78) { /* delete */
			FAST_EQ(del(b, o->ref), BOOK_OK);
			m_remove(&m, i);
		} else if (op < 97) { /* replace: same price less, same price more, moved */
			uint64_t nr = next_ref++;
			uint32_t price = rnd_upto(2) ? o->price : rnd_price(o->side);
			uint32_t sh = 1 + rnd_upto(o->shares + 50);

			FAST_EQ(replace(b, o->ref, nr, sh, price), BOOK_OK);
			if (!(price == o->price && sh <= o->shares))
				o->prio = m.prio++;
			o->ref = nr;
			o->price = price;
			o->shares = sh;
		} else { /* an anomaly: a reference never used, or a duplicate */
			if (rnd_upto(2) || !o)
				FAST_EQ(del(b, 1 + rnd_upto(999)), BOOK_A_UNKNOWN_REF);
			else
				FAST_EQ(add(b, (uint16_t)(o->sym + 1), m_stock[o->sym],
						     o->ref, 'B', 1, 1),
						 BOOK_A_DUPLICATE_REF);
			expect_anomalies++;
		}
		if (touched >= 0)
			m_check_top(&m, b, touched);
		if (step % 997 == 0) {
			for (int y = 0; y < M_SYMS; y++)
				m_check_top(&m, b, y);
			m_dump(&m, want, sizeof(want));
			dump(b, got, sizeof(got));
			FAST_STR_EQ(got, want);
		}
	}
	m_dump(&m, want, sizeof(want));
	dump(b, got, sizeof(got));
	FAST_STR_EQ(got, want);
	book_get_stats(b, &st);
	FAST_EQ(st.orders, m.n);
	FAST_EQ(st.anomalies_total, expect_anomalies);
	ck_assert_uint_gt(st.orders_high, 1000);

	/* every order out: the book is empty again, and its tables too */
	while (m.n) {
		FAST_EQ(del(b, m.o[0].ref), BOOK_OK);
		m_remove(&m, 0);
	}
	book_get_stats(b, &st);
	FAST_EQ(st.orders, 0);
	FAST_EQ(st.levels, 0);
	for (int y = 0; y < M_SYMS; y++)
		m_check_top(&m, b, y);
	book_destroy(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("feedbook");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, create_limits);
	tcase_add_test(tc, adds_top_and_depth);
	tcase_add_test(tc, executes_cancels_deletes);
	tcase_add_test(tc, replace_priority);
	tcase_add_test(tc, anomalies_counted);
	tcase_add_test(tc, dump_and_compare);
	tcase_add_test(tc, random_against_model);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
