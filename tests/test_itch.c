/* ITCH 5.0 codec: golden bytes of every type (written out by hand from the
 * spec's layouts, not produced by the encoder), every byte of every message
 * spoiled against a hand-written map of what the byte is, the alpha rules
 * (printable, left-justified, stock not empty, a one-char blank kept),
 * GLIMPSE's End of Snapshot digits, every error path of both directions,
 * and 100,000 random valid messages that round-trip exactly. */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itch.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* The common header of every golden message but End of Snapshot: locate
 * 42, tracking 0x1234, timestamp 0x0123456789AB ns. */
#define HDR(t) (t), 0x00, 0x2a, 0x12, 0x34, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab
#define LOCATE 42
#define TRACKING 0x1234
#define TIMESTAMP 0x0123456789abull

/* --- golden messages ------------------------------------------------------ */
static const uint8_t g_system_event[] = {
	HDR('S'),
	'Q', /* event code: start of market hours */
};
static const uint8_t g_stock_directory[] = {
	HDR('R'),
	'Z', 'V', 'Z', 'Z', 'T', ' ', ' ', ' ', /* stock */
	'Q', /* market category */
	' ', /* financial status: blank, kept as ' ' */
	0x00, 0x00, 0x00, 0x64, /* round lot size 100 */
	'N', /* round lots only */
	'C', /* issue classification */
	'Z', ' ', /* issue subtype "Z" */
	'P', /* authenticity */
	'N', /* short sale threshold */
	' ', /* IPO flag */
	'1', /* LULD tier */
	'N', /* ETP flag */
	0x00, 0x00, 0x00, 0x03, /* ETP leverage 3 */
	'N', /* inverse */
};
static const uint8_t g_trading_action[] = {
	HDR('H'),
	'A', 'A', 'P', 'L', ' ', ' ', ' ', ' ', /* stock */
	'H', /* state: halted */
	' ', /* reserved */
	'L', 'U', 'D', 'P', /* reason */
};
static const uint8_t g_add_order[] = {
	HDR('A'),
	0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* ref */
	'B', /* side */
	0x00, 0x01, 0x86, 0xa0, /* shares 100000 */
	'M', 'S', 'F', 'T', ' ', ' ', ' ', ' ', /* stock */
	0x00, 0x16, 0xe3, 0x60, /* price 150.0000 */
};
static const uint8_t g_add_order_mpid[] = {
	HDR('F'),
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* ref */
	'S', /* side */
	0xff, 0xff, 0xff, 0xff, /* shares 2^32-1 */
	'B', 'R', 'K', '.', 'A', ' ', ' ', ' ', /* stock */
	0x05, 0xf5, 0xe1, 0x00, /* price 10000.0000 */
	'L', 'S', 'T', 'P', /* attribution */
};
static const uint8_t g_order_executed[] = {
	HDR('E'),
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* ref */
	0x00, 0x00, 0x00, 0x64, /* shares 100 */
	0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10, /* match */
};
static const uint8_t g_order_executed_price[] = {
	HDR('C'),
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* ref */
	0x00, 0x00, 0x00, 0x0a, /* shares 10 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, /* match */
	'N', /* printable */
	0x00, 0x0f, 0x42, 0x40, /* price 100.0000 */
};
static const uint8_t g_order_cancel[] = {
	HDR('X'),
	0x00, 0x00, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, /* ref */
	0x00, 0x00, 0x00, 0x32, /* shares 50 */
};
static const uint8_t g_order_delete[] = {
	HDR('D'),
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* ref */
};
static const uint8_t g_order_replace[] = {
	HDR('U'),
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, /* old ref */
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* new ref 2^32 */
	0x00, 0x00, 0x01, 0xf4, /* shares 500 */
	0x00, 0x00, 0x27, 0x10, /* price 1.0000 */
};
static const uint8_t g_trade[] = {
	HDR('P'),
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* ref 0 */
	'B', /* side */
	0x00, 0x00, 0x00, 0xc8, /* shares 200 */
	'Q', 'Q', 'Q', ' ', ' ', ' ', ' ', ' ', /* stock */
	0x00, 0x06, 0x1a, 0x80, /* price 40.0000 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, /* match 42 */
};
static const uint8_t g_end_of_snapshot[] = {
	'G', '1', '2', '3', '4', '5', ' ', ' ', ' ', ' ', ' ',
	' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', /* seq 12345 */
};

static struct itch_msg blank(char type)
{
	struct itch_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	if (type != ITCH_END_OF_SNAPSHOT) {
		m.locate = LOCATE;
		m.tracking = TRACKING;
		m.timestamp = TIMESTAMP;
	}
	return m;
}

static struct itch_msg s_system_event(void)
{
	struct itch_msg m = blank('S');

	m.u.system_event.event_code = ITCH_EVENT_START_OF_MARKET;
	return m;
}

static struct itch_msg s_stock_directory(void)
{
	struct itch_msg m = blank('R');

	strcpy(m.u.stock_directory.stock, "ZVZZT");
	m.u.stock_directory.market_category = 'Q';
	m.u.stock_directory.financial_status = ' ';
	m.u.stock_directory.round_lot_size = 100;
	m.u.stock_directory.round_lots_only = 'N';
	m.u.stock_directory.issue_classification = 'C';
	strcpy(m.u.stock_directory.issue_subtype, "Z");
	m.u.stock_directory.authenticity = 'P';
	m.u.stock_directory.short_sale_threshold = 'N';
	m.u.stock_directory.ipo_flag = ' ';
	m.u.stock_directory.luld_tier = '1';
	m.u.stock_directory.etp_flag = 'N';
	m.u.stock_directory.etp_leverage = 3;
	m.u.stock_directory.inverse = 'N';
	return m;
}

static struct itch_msg s_trading_action(void)
{
	struct itch_msg m = blank('H');

	strcpy(m.u.trading_action.stock, "AAPL");
	m.u.trading_action.state = ITCH_STATE_HALTED;
	m.u.trading_action.reserved = ' ';
	strcpy(m.u.trading_action.reason, "LUDP");
	return m;
}

static struct itch_msg s_add_order(void)
{
	struct itch_msg m = blank('A');

	m.u.add.ref = 0x8000000000000001ull;
	m.u.add.side = 'B';
	m.u.add.shares = 100000;
	strcpy(m.u.add.stock, "MSFT");
	m.u.add.price = 1500000;
	return m;
}

static struct itch_msg s_add_order_mpid(void)
{
	struct itch_msg m = blank('F');

	m.u.add.ref = 0x0102030405060708ull;
	m.u.add.side = 'S';
	m.u.add.shares = UINT32_MAX;
	strcpy(m.u.add.stock, "BRK.A");
	m.u.add.price = 100000000;
	strcpy(m.u.add.attribution, "LSTP");
	return m;
}

static struct itch_msg s_order_executed(void)
{
	struct itch_msg m = blank('E');

	m.u.executed.ref = 0x0102030405060708ull;
	m.u.executed.shares = 100;
	m.u.executed.match = 0xfedcba9876543210ull;
	return m;
}

static struct itch_msg s_order_executed_price(void)
{
	struct itch_msg m = blank('C');

	m.u.executed.ref = 7;
	m.u.executed.shares = 10;
	m.u.executed.match = 9;
	m.u.executed.printable = 'N';
	m.u.executed.price = 1000000;
	return m;
}

static struct itch_msg s_order_cancel(void)
{
	struct itch_msg m = blank('X');

	m.u.cancel.ref = 0xdeadbeef;
	m.u.cancel.shares = 50;
	return m;
}

static struct itch_msg s_order_delete(void)
{
	struct itch_msg m = blank('D');

	m.u.del.ref = UINT64_MAX;
	return m;
}

static struct itch_msg s_order_replace(void)
{
	struct itch_msg m = blank('U');

	m.u.replace.old_ref = 0x11;
	m.u.replace.new_ref = 1ull << 32;
	m.u.replace.shares = 500;
	m.u.replace.price = 10000;
	return m;
}

static struct itch_msg s_trade(void)
{
	struct itch_msg m = blank('P');

	m.u.trade.ref = 0;
	m.u.trade.side = 'B';
	m.u.trade.shares = 200;
	strcpy(m.u.trade.stock, "QQQ");
	m.u.trade.price = 400000;
	m.u.trade.match = 42;
	return m;
}

static struct itch_msg s_end_of_snapshot(void)
{
	struct itch_msg m = blank('G');

	m.u.end_of_snapshot.seq = 12345;
	return m;
}

/* What each byte of a message is, written out from the layouts: t type,
 * n a byte of a number (any value), k stock, a other alpha, c one-char
 * alpha, s side, y printable (Y/N), g End of Snapshot's digits. */
#define MAP_HDR "t" "nn" "nn" "nnnnnn"
#define MAP_N8 "nnnnnnnn"
#define MAP_N4 "nnnn"
#define MAP_STOCK "kkkkkkkk"

struct golden {
	const uint8_t *bytes;
	size_t len;
	struct itch_msg (*msg)(void);
	const char *map;
};

#define GOLDEN(b, f, map) { (b), sizeof(b), (f), (map) }
static const struct golden goldens[] = {
	GOLDEN(g_system_event, s_system_event, MAP_HDR "c"),
	GOLDEN(g_stock_directory, s_stock_directory,
	       MAP_HDR MAP_STOCK "c" "c" MAP_N4 "c" "c" "aa" "c" "c" "c" "c" "c" MAP_N4 "c"),
	GOLDEN(g_trading_action, s_trading_action, MAP_HDR MAP_STOCK "c" "c" "aaaa"),
	GOLDEN(g_add_order, s_add_order, MAP_HDR MAP_N8 "s" MAP_N4 MAP_STOCK MAP_N4),
	GOLDEN(g_add_order_mpid, s_add_order_mpid,
	       MAP_HDR MAP_N8 "s" MAP_N4 MAP_STOCK MAP_N4 "aaaa"),
	GOLDEN(g_order_executed, s_order_executed, MAP_HDR MAP_N8 MAP_N4 MAP_N8),
	GOLDEN(g_order_executed_price, s_order_executed_price,
	       MAP_HDR MAP_N8 MAP_N4 MAP_N8 "y" MAP_N4),
	GOLDEN(g_order_cancel, s_order_cancel, MAP_HDR MAP_N8 MAP_N4),
	GOLDEN(g_order_delete, s_order_delete, MAP_HDR MAP_N8),
	GOLDEN(g_order_replace, s_order_replace, MAP_HDR MAP_N8 MAP_N8 MAP_N4 MAP_N4),
	GOLDEN(g_trade, s_trade, MAP_HDR MAP_N8 "s" MAP_N4 MAP_STOCK MAP_N4 MAP_N8),
	GOLDEN(g_end_of_snapshot, s_end_of_snapshot, "t" "gggggggggggggggggggg"),
};

/* --- helpers ------------------------------------------------------------ */

/* itch_decode, and *out untouched when it fails. */
static int decode_checked(const uint8_t *buf, size_t len, struct itch_msg *out)
{
	struct itch_msg poison;
	int rc;

	memset(&poison, 0xa5, sizeof(poison));
	memcpy(out, &poison, sizeof(poison));
	rc = itch_decode(buf, len, out);
	if (rc != ITCH_OK)
		ck_assert_msg(memcmp(out, &poison, sizeof(poison)) == 0,
			      "decode failed (%d) and wrote its output", rc);
	return rc;
}

/* itch_encode into a buffer of cap bytes (at most ITCH_MAX_LEN + 8), and
 * nothing written when it fails. */
static int encode_checked(const struct itch_msg *m, uint8_t *out, size_t cap)
{
	uint8_t buf[ITCH_MAX_LEN + 8], poison[ITCH_MAX_LEN + 8];
	int rc;

	ck_assert_uint_le(cap, sizeof(buf));
	memset(buf, 0x5a, sizeof(buf));
	memset(poison, 0x5a, sizeof(poison));
	rc = itch_encode(m, buf, cap);
	if (rc < 0)
		ck_assert_msg(memcmp(buf, poison, sizeof(buf)) == 0,
			      "encode failed (%d) and wrote its output", rc);
	else
		ck_assert_msg(memcmp(buf + rc, poison, sizeof(buf) - (size_t)rc) == 0,
			      "encode wrote past its length");
	memcpy(out, buf, cap);
	return rc;
}

/* Decodes buf, re-encodes: the same bytes. */
static struct itch_msg must_round_trip(const uint8_t *buf, size_t len)
{
	uint8_t again[ITCH_MAX_LEN];
	struct itch_msg m, back;
	int rc = decode_checked(buf, len, &m);

	ck_assert_msg(rc == ITCH_OK, "type %c: decode %d (%s)", buf[0], rc, itch_strerror(rc));
	rc = encode_checked(&m, again, sizeof(again));
	ck_assert_int_eq(rc, (int)len);
	ck_assert_msg(memcmp(again, buf, len) == 0, "type %c: re-encoded bytes differ", buf[0]);
	ck_assert_int_eq(decode_checked(again, len, &back), ITCH_OK);
	ck_assert(memcmp(&m, &back, sizeof(m)) == 0);
	return m;
}

/* --- golden bytes -------------------------------------------------------- */
START_TEST(golden_decode)
{
	const struct golden *g = &goldens[_i];
	struct itch_msg want = g->msg(), got;

	ck_assert_uint_eq(g->len, strlen(g->map));
	ck_assert_uint_eq(g->len, itch_len((char)g->bytes[0]));
	ck_assert_int_eq(decode_checked(g->bytes, g->len, &got), ITCH_OK);
	ck_assert_msg(memcmp(&want, &got, sizeof(want)) == 0, "type %c: decoded struct differs",
		      g->bytes[0]);
}
END_TEST

START_TEST(golden_encode)
{
	const struct golden *g = &goldens[_i];
	struct itch_msg m = g->msg();
	uint8_t out[ITCH_MAX_LEN + 8];

	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), (int)g->len);
	for (size_t k = 0; k < g->len; k++)
		ck_assert_msg(out[k] == g->bytes[k], "type %c: byte %zu is 0x%02x, not 0x%02x",
			      g->bytes[0], k, out[k], g->bytes[k]);
	/* exactly the room it needs */
	ck_assert_int_eq(encode_checked(&m, out, g->len), (int)g->len);
	must_round_trip(g->bytes, g->len);
}
END_TEST

START_TEST(lengths)
{
	static const struct {
		char type;
		size_t len;
	} want[] = {
		{ 'S', 12 }, { 'R', 39 }, { 'H', 25 }, { 'A', 36 }, { 'F', 40 }, { 'E', 31 },
		{ 'C', 36 }, { 'X', 23 }, { 'D', 19 }, { 'U', 35 }, { 'P', 44 }, { 'G', 21 },
	};
	unsigned known = 0;

	for (size_t i = 0; i < NELEM(want); i++)
		ck_assert_uint_eq(itch_len(want[i].type), want[i].len);
	for (int c = -128; c < 128; c++)
		known += itch_len((char)c) != 0;
	ck_assert_uint_eq(known, NELEM(want));
	ck_assert_uint_eq(itch_len('Y'), 0);
	ck_assert_uint_eq(itch_len('L'), 0);
	ck_assert_uint_eq(itch_len('\0'), 0);
	ck_assert_uint_eq(itch_len((char)0xc1), 0);
}
END_TEST

/* --- every byte of every golden message, spoiled ------------------------- */

/* The error when byte k of golden g is set to v, from the map. */
static int expected(const struct golden *g, size_t k, uint8_t v)
{
	switch (g->map[k]) {
	case 'n':
		return ITCH_OK;
	case 'k':
	case 'a':
	case 'c':
		return v >= 0x20 && v <= 0x7e ? ITCH_OK : ITCH_E_ALPHA;
	case 's':
		return v == 'B' || v == 'S' ? ITCH_OK : ITCH_E_FIELD;
	case 'y':
		return v == 'Y' || v == 'N' ? ITCH_OK : ITCH_E_FIELD;
	}
	return -100; /* 't' and 'g' are tested on their own */
}

START_TEST(every_byte_unprintable)
{
	static const uint8_t bad[] = { 0x00, 0x01, 0x09, 0x1f, 0x7f, 0x80, 0xc3, 0xff };
	const struct golden *g = &goldens[_i];

	if (g->bytes[0] == ITCH_END_OF_SNAPSHOT)
		return;
	for (size_t k = 1; k < g->len; k++) {
		for (size_t b = 0; b < NELEM(bad); b++) {
			uint8_t buf[ITCH_MAX_LEN];
			struct itch_msg m;
			int want = expected(g, k, bad[b]), rc;

			memcpy(buf, g->bytes, g->len);
			buf[k] = bad[b];
			rc = decode_checked(buf, g->len, &m);
			ck_assert_msg(rc == want, "type %c byte %zu = 0x%02x: %d, not %d", buf[0], k,
				      bad[b], rc, want);
			if (rc == ITCH_OK)
				must_round_trip(buf, g->len);
		}
	}
}
END_TEST

/* A one-char field may be a blank: kept as ' ', sent as ' '. */
START_TEST(one_char_blank_kept)
{
	const struct golden *g = &goldens[_i];

	for (size_t k = 1; k < g->len; k++) {
		uint8_t buf[ITCH_MAX_LEN];

		if (g->map[k] != 'c')
			continue;
		memcpy(buf, g->bytes, g->len);
		buf[k] = ' ';
		must_round_trip(buf, g->len);
	}
	if (g->bytes[0] == ITCH_STOCK_DIRECTORY) {
		struct itch_msg m = must_round_trip(g->bytes, g->len);

		ck_assert_int_eq(m.u.stock_directory.financial_status, ' ');
		ck_assert_int_eq(m.u.stock_directory.ipo_flag, ' ');
	}
}
END_TEST

/* Every value of a side or printable byte: only B/S and Y/N decode. */
START_TEST(side_and_printable_every_value)
{
	const struct golden *g = &goldens[_i];

	for (size_t k = 1; k < g->len; k++) {
		if (g->map[k] != 's' && g->map[k] != 'y')
			continue;
		for (unsigned v = 0; v < 256; v++) {
			uint8_t buf[ITCH_MAX_LEN];
			struct itch_msg m;
			int want = expected(g, k, (uint8_t)v);

			memcpy(buf, g->bytes, g->len);
			buf[k] = (uint8_t)v;
			ck_assert_int_eq(decode_checked(buf, g->len, &m), want);
		}
	}
}
END_TEST

/* --- lengths and types --------------------------------------------------- */
START_TEST(wrong_length_every_type)
{
	const struct golden *g = &goldens[_i];
	uint8_t buf[ITCH_MAX_LEN + 2];
	struct itch_msg m;

	memset(buf, ' ', sizeof(buf));
	memcpy(buf, g->bytes, g->len);
	for (size_t len = 1; len <= sizeof(buf); len++) {
		int rc = decode_checked(buf, len, &m);

		ck_assert_int_eq(rc, len == g->len ? ITCH_OK : ITCH_E_LEN);
	}
	ck_assert_int_eq(decode_checked(buf, 0, &m), ITCH_E_EMPTY);
}
END_TEST

START_TEST(unknown_types)
{
	uint8_t buf[ITCH_MAX_LEN];
	unsigned known = 0;

	memset(buf, ' ', sizeof(buf));
	for (unsigned t = 0; t < 256; t++) {
		struct itch_msg m;
		int hit = 0;

		buf[0] = (uint8_t)t;
		for (size_t i = 0; i < NELEM(goldens); i++)
			hit |= goldens[i].bytes[0] == t;
		if (hit) {
			known++;
			continue;
		}
		for (size_t len = 1; len <= sizeof(buf); len++)
			ck_assert_int_eq(decode_checked(buf, len, &m), ITCH_E_TYPE);
	}
	ck_assert_uint_eq(known, 12);
	/* the ITCH 5.0 types lockstep does not publish */
	for (const char *t = "YLVWKJhQBIN"; *t; t++) {
		struct itch_msg m = blank(*t), got;
		uint8_t out[ITCH_MAX_LEN];

		buf[0] = (uint8_t)*t;
		ck_assert_int_eq(decode_checked(buf, 20, &got), ITCH_E_TYPE);
		ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_TYPE);
	}
}
END_TEST

/* --- alpha fields -------------------------------------------------------- */

/* Golden g with the n bytes at k replaced by s. */
static int decode_patched(const struct golden *g, size_t k, const char *s)
{
	uint8_t buf[ITCH_MAX_LEN];
	struct itch_msg m;

	memcpy(buf, g->bytes, g->len);
	memcpy(buf + k, s, strlen(s));
	return decode_checked(buf, g->len, &m);
}

static const struct golden *golden_of(char type)
{
	for (size_t i = 0; i < NELEM(goldens); i++)
		if (goldens[i].bytes[0] == (uint8_t)type)
			return &goldens[i];
	ck_abort_msg("no golden %c", type);
	return NULL;
}

/* Where the stock is: R and H at 11, A and F at 24, P at 24. */
START_TEST(alpha_not_left_justified)
{
	static const struct {
		char type;
		size_t at;
		const char *bytes;
		int want;
	} cases[] = {
		{ 'R', 11, " ZVZZT  ", ITCH_E_ALPHA },
		{ 'R', 11, "ZV ZZT  ", ITCH_E_ALPHA },
		{ 'R', 11, "ZVZZT  X", ITCH_E_ALPHA },
		{ 'R', 11, "        ", ITCH_E_ALPHA }, /* empty stock */
		{ 'R', 11, "ZVZZTXYZ", ITCH_OK }, /* all eight */
		{ 'R', 11, "Z       ", ITCH_OK },
		{ 'R', 27, " Z", ITCH_E_ALPHA }, /* issue subtype */
		{ 'R', 27, "  ", ITCH_OK },
		{ 'R', 27, "ZZ", ITCH_OK },
		{ 'H', 11, "        ", ITCH_E_ALPHA },
		{ 'H', 11, " AAPL   ", ITCH_E_ALPHA },
		{ 'H', 21, "    ", ITCH_OK }, /* reason */
		{ 'H', 21, "LU P", ITCH_E_ALPHA },
		{ 'H', 21, "   P", ITCH_E_ALPHA },
		{ 'H', 21, "L   ", ITCH_OK },
		{ 'A', 24, "        ", ITCH_E_ALPHA },
		{ 'A', 24, "MS FT   ", ITCH_E_ALPHA },
		{ 'F', 24, "        ", ITCH_E_ALPHA },
		{ 'F', 36, " LST", ITCH_E_ALPHA }, /* attribution */
		{ 'F', 36, "    ", ITCH_OK },
		{ 'P', 24, "        ", ITCH_E_ALPHA },
		{ 'P', 24, "       Q", ITCH_E_ALPHA },
		{ 'P', 24, "~!@#$%^&", ITCH_OK },
	};

	for (size_t i = 0; i < NELEM(cases); i++) {
		const struct golden *g = golden_of(cases[i].type);
		int rc = decode_patched(g, cases[i].at, cases[i].bytes);

		ck_assert_msg(rc == cases[i].want, "%c at %zu \"%s\": %d, not %d", cases[i].type,
			      cases[i].at, cases[i].bytes, rc, cases[i].want);
	}
}
END_TEST

START_TEST(alpha_trimmed_on_decode)
{
	const struct golden *g = golden_of('R');
	uint8_t buf[ITCH_MAX_LEN];
	struct itch_msg m;

	memcpy(buf, g->bytes, g->len);
	memcpy(buf + 27, "  ", 2);
	ck_assert_int_eq(decode_checked(buf, g->len, &m), ITCH_OK);
	ck_assert_str_eq(m.u.stock_directory.issue_subtype, "");
	ck_assert_str_eq(m.u.stock_directory.stock, "ZVZZT");
	memcpy(buf + 11, "ABCDEFGH", 8);
	ck_assert_int_eq(decode_checked(buf, g->len, &m), ITCH_OK);
	ck_assert_str_eq(m.u.stock_directory.stock, "ABCDEFGH");

	g = golden_of('H');
	memcpy(buf, g->bytes, g->len);
	memcpy(buf + 21, "    ", 4);
	ck_assert_int_eq(decode_checked(buf, g->len, &m), ITCH_OK);
	ck_assert_str_eq(m.u.trading_action.reason, "");
	ck_assert_int_eq(m.u.trading_action.reserved, ' ');
}
END_TEST

START_TEST(encode_alpha_errors)
{
	uint8_t out[ITCH_MAX_LEN];
	struct itch_msg m;

	/* a stock filling its array: no NUL, nine bytes */
	m = s_add_order();
	memset(m.u.add.stock, 'X', sizeof(m.u.add.stock));
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_add_order_mpid();
	memset(m.u.add.attribution, 'X', sizeof(m.u.add.attribution));
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_stock_directory();
	memset(m.u.stock_directory.issue_subtype, 'X', sizeof(m.u.stock_directory.issue_subtype));
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_trading_action();
	memset(m.u.trading_action.reason, 'X', sizeof(m.u.trading_action.reason));
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);

	/* empty stock, of every type that has one */
	m = s_stock_directory();
	m.u.stock_directory.stock[0] = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_trading_action();
	strcpy(m.u.trading_action.stock, "   ");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_add_order();
	m.u.add.stock[0] = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_add_order_mpid();
	m.u.add.stock[0] = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_trade();
	m.u.trade.stock[0] = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);

	/* not left-justified */
	m = s_trade();
	strcpy(m.u.trade.stock, " QQQ");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	strcpy(m.u.trade.stock, "Q QQ");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_add_order_mpid();
	strcpy(m.u.add.attribution, " LS");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);

	/* unprintable */
	m = s_add_order();
	strcpy(m.u.add.stock, "MS\tFT");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	strcpy(m.u.add.stock, "MS\x7f");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	strcpy(m.u.add.stock, "\xc3\xa9");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);

	/* a one-char field left NUL is not a blank */
	m = s_system_event();
	m.u.system_event.event_code = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_stock_directory();
	m.u.stock_directory.inverse = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m.u.stock_directory.inverse = '\x1f';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);
	m = s_trading_action();
	m.u.trading_action.reserved = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_ALPHA);

	/* trailing spaces are padding */
	m = s_add_order();
	strcpy(m.u.add.stock, "MSFT    ");
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_ADD_ORDER_LEN);
	ck_assert(memcmp(out, g_add_order, sizeof(g_add_order)) == 0);
}
END_TEST

START_TEST(encode_field_errors)
{
	uint8_t out[ITCH_MAX_LEN];
	struct itch_msg m;

	m = s_add_order();
	m.u.add.side = 'b';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m.u.add.side = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m = s_add_order_mpid();
	m.u.add.side = ' ';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m = s_trade();
	m.u.trade.side = 'X';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m = s_order_executed_price();
	m.u.executed.printable = 'y';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m.u.executed.printable = '\0';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m.u.executed.printable = 'Y';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_ORDER_EXECUTED_PRICE_LEN);
	ck_assert_int_eq(out[31], 'Y');

	/* 'E' has no printable: whatever the union holds there is not sent */
	m = s_order_executed();
	m.u.executed.printable = '\x01';
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_ORDER_EXECUTED_LEN);
}
END_TEST

START_TEST(timestamp_bounds)
{
	static const uint8_t ts_max[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t out[ITCH_MAX_LEN];
	struct itch_msg m = s_order_delete(), back;

	m.timestamp = ITCH_TS_MAX;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_ORDER_DELETE_LEN);
	ck_assert(memcmp(out + 5, ts_max, 6) == 0);
	ck_assert_int_eq(decode_checked(out, ITCH_ORDER_DELETE_LEN, &back), ITCH_OK);
	ck_assert_uint_eq(back.timestamp, ITCH_TS_MAX);
	m.timestamp = ITCH_TS_MAX + 1;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m.timestamp = UINT64_MAX;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_E_FIELD);
	m.timestamp = 0;
	m.locate = UINT16_MAX;
	m.tracking = 0x8001;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_ORDER_DELETE_LEN);
	ck_assert_int_eq(out[1], 0xff);
	ck_assert_int_eq(out[2], 0xff);
	ck_assert_int_eq(out[3], 0x80);
	ck_assert_int_eq(out[4], 0x01);
	for (int k = 5; k < 11; k++)
		ck_assert_int_eq(out[k], 0);
}
END_TEST

START_TEST(encode_no_space)
{
	const struct golden *g = &goldens[_i];
	struct itch_msg m = g->msg();
	uint8_t out[ITCH_MAX_LEN + 8];

	for (size_t cap = 0; cap < g->len; cap++)
		ck_assert_int_eq(encode_checked(&m, out, cap), ITCH_E_NOSPACE);
	ck_assert_int_eq(encode_checked(&m, out, g->len), (int)g->len);
}
END_TEST

/* --- End of Snapshot ----------------------------------------------------- */
START_TEST(end_of_snapshot_digits)
{
	static const struct {
		const char *digits; /* the 20 bytes after 'G' */
		int want;
		uint64_t seq;
	} cases[] = {
		{ "0                   ", ITCH_OK, 0 },
		{ "1                   ", ITCH_OK, 1 },
		{ "9999999999          ", ITCH_OK, 9999999999ull },
		{ "18446744073709551615", ITCH_OK, UINT64_MAX },
		{ "10000000000000000000", ITCH_OK, 10000000000000000000ull },
		{ "18446744073709551616", ITCH_E_FIELD, 0 }, /* UINT64_MAX + 1 */
		{ "99999999999999999999", ITCH_E_FIELD, 0 },
		{ "                    ", ITCH_E_FIELD, 0 }, /* no digit */
		{ " 12345              ", ITCH_E_FIELD, 0 }, /* right of a space */
		{ "12 45               ", ITCH_E_FIELD, 0 }, /* digits after spaces */
		{ "12345              6", ITCH_E_FIELD, 0 },
		{ "12a45               ", ITCH_E_FIELD, 0 }, /* not a digit */
		{ "-1                  ", ITCH_E_FIELD, 0 },
		{ "+1                  ", ITCH_E_FIELD, 0 },
		{ "0x10                ", ITCH_E_FIELD, 0 },
		{ "00                  ", ITCH_E_FIELD, 0 }, /* a leading zero */
		{ "0012345             ", ITCH_E_FIELD, 0 },
		{ "00000000000000000001", ITCH_E_FIELD, 0 }, /* zero padded */
		{ "12345\0              ", ITCH_E_FIELD, 0 }, /* NUL padded */
	};

	for (size_t i = 0; i < NELEM(cases); i++) {
		uint8_t buf[ITCH_END_OF_SNAPSHOT_LEN];
		struct itch_msg m;
		int rc;

		buf[0] = 'G';
		memcpy(buf + 1, cases[i].digits, ITCH_SEQ_DIGITS);
		rc = decode_checked(buf, sizeof(buf), &m);
		ck_assert_msg(rc == cases[i].want, "\"%.20s\": %d, not %d", cases[i].digits, rc,
			      cases[i].want);
		if (rc != ITCH_OK)
			continue;
		ck_assert_uint_eq(m.u.end_of_snapshot.seq, cases[i].seq);
		ck_assert_int_eq(m.locate, 0);
		ck_assert_int_eq(m.tracking, 0);
		ck_assert_uint_eq(m.timestamp, 0);
		must_round_trip(buf, sizeof(buf));
	}
}
END_TEST

START_TEST(end_of_snapshot_lengths_and_header)
{
	/* 21 digits cannot be in the field: the message is a byte too long */
	static const uint8_t digits21[] = "G184467440737095516150";
	uint8_t out[ITCH_MAX_LEN];
	struct itch_msg m;

	ck_assert_int_eq(decode_checked(digits21, sizeof(digits21) - 1, &m), ITCH_E_LEN);
	ck_assert_int_eq(decode_checked(digits21, 20, &m), ITCH_E_LEN);
	/* no common header: encode ignores locate, tracking and timestamp,
	 * even a timestamp no other type could send */
	m = s_end_of_snapshot();
	m.locate = 7;
	m.tracking = 8;
	m.timestamp = UINT64_MAX;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_END_OF_SNAPSHOT_LEN);
	ck_assert(memcmp(out, g_end_of_snapshot, sizeof(g_end_of_snapshot)) == 0);
	m.u.end_of_snapshot.seq = UINT64_MAX;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_END_OF_SNAPSHOT_LEN);
	ck_assert(memcmp(out, "G18446744073709551615", 21) == 0);
	m.u.end_of_snapshot.seq = 0;
	ck_assert_int_eq(encode_checked(&m, out, sizeof(out)), ITCH_END_OF_SNAPSHOT_LEN);
	ck_assert(memcmp(out, "G0                   ", 21) == 0);
}
END_TEST

START_TEST(strerror_every_code)
{
	const char *seen[8];

	for (int e = 0; e >= ITCH_E_NOSPACE; e--) {
		const char *s = itch_strerror(e);

		ck_assert_ptr_nonnull(s);
		ck_assert_str_ne(s, itch_strerror(-100));
		for (int k = 0; k < -e; k++)
			ck_assert_str_ne(s, seen[k]);
		seen[-e] = s;
	}
	ck_assert_ptr_nonnull(itch_strerror(1));
}
END_TEST

/* --- random valid messages ------------------------------------------------ */
static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A number biased to the edges: 0, all ones, one bit, or any. */
static uint64_t rnd_num(uint64_t *s, uint64_t mask)
{
	uint64_t r = splitmix(s);

	switch (r % 8) {
	case 0: return 0;
	case 1: return mask;
	case 2: return (1ull << (r >> 8) % 64) & mask;
	case 3: return (r >> 8) & 0xffff & mask;
	}
	return splitmix(s) & mask;
}

static char rnd_chr(uint64_t *s)
{
	return (char)(0x20 + splitmix(s) % 95);
}

/* A valid alpha value of at most w bytes: printable, no space inside (only
 * trailing ones, which the codec drops), at least one byte when required. */
static void rnd_alpha(uint64_t *s, char *dst, size_t w, int required)
{
	size_t n = (size_t)(splitmix(s) % (w + 1));

	if (required && n == 0)
		n = 1;
	for (size_t i = 0; i < n; i++)
		dst[i] = (char)(0x21 + splitmix(s) % 94);
	dst[n] = '\0';
}

static const char types[] = "SRHAFECXDUPG";

static struct itch_msg rnd_msg(uint64_t *s)
{
	struct itch_msg m;
	char t = types[splitmix(s) % (sizeof(types) - 1)];

	memset(&m, 0, sizeof(m));
	m.type = t;
	if (t != ITCH_END_OF_SNAPSHOT) {
		m.locate = (uint16_t)rnd_num(s, UINT16_MAX);
		m.tracking = (uint16_t)rnd_num(s, UINT16_MAX);
		m.timestamp = rnd_num(s, ITCH_TS_MAX);
	}
	switch (t) {
	case 'S':
		m.u.system_event.event_code = rnd_chr(s);
		break;
	case 'R':
		rnd_alpha(s, m.u.stock_directory.stock, ITCH_STOCK_LEN, 1);
		m.u.stock_directory.market_category = rnd_chr(s);
		m.u.stock_directory.financial_status = rnd_chr(s);
		m.u.stock_directory.round_lot_size = (uint32_t)rnd_num(s, UINT32_MAX);
		m.u.stock_directory.round_lots_only = rnd_chr(s);
		m.u.stock_directory.issue_classification = rnd_chr(s);
		rnd_alpha(s, m.u.stock_directory.issue_subtype, 2, 0);
		m.u.stock_directory.authenticity = rnd_chr(s);
		m.u.stock_directory.short_sale_threshold = rnd_chr(s);
		m.u.stock_directory.ipo_flag = rnd_chr(s);
		m.u.stock_directory.luld_tier = rnd_chr(s);
		m.u.stock_directory.etp_flag = rnd_chr(s);
		m.u.stock_directory.etp_leverage = (uint32_t)rnd_num(s, UINT32_MAX);
		m.u.stock_directory.inverse = rnd_chr(s);
		break;
	case 'H':
		rnd_alpha(s, m.u.trading_action.stock, ITCH_STOCK_LEN, 1);
		m.u.trading_action.state = rnd_chr(s);
		m.u.trading_action.reserved = rnd_chr(s);
		rnd_alpha(s, m.u.trading_action.reason, 4, 0);
		break;
	case 'A':
	case 'F':
		m.u.add.ref = rnd_num(s, UINT64_MAX);
		m.u.add.side = splitmix(s) & 1 ? 'B' : 'S';
		m.u.add.shares = (uint32_t)rnd_num(s, UINT32_MAX);
		rnd_alpha(s, m.u.add.stock, ITCH_STOCK_LEN, 1);
		m.u.add.price = (uint32_t)rnd_num(s, UINT32_MAX);
		if (t == 'F')
			rnd_alpha(s, m.u.add.attribution, ITCH_MPID_LEN, 0);
		break;
	case 'E':
	case 'C':
		m.u.executed.ref = rnd_num(s, UINT64_MAX);
		m.u.executed.shares = (uint32_t)rnd_num(s, UINT32_MAX);
		m.u.executed.match = rnd_num(s, UINT64_MAX);
		if (t == 'C') {
			m.u.executed.printable = splitmix(s) & 1 ? 'Y' : 'N';
			m.u.executed.price = (uint32_t)rnd_num(s, UINT32_MAX);
		}
		break;
	case 'X':
		m.u.cancel.ref = rnd_num(s, UINT64_MAX);
		m.u.cancel.shares = (uint32_t)rnd_num(s, UINT32_MAX);
		break;
	case 'D':
		m.u.del.ref = rnd_num(s, UINT64_MAX);
		break;
	case 'U':
		m.u.replace.old_ref = rnd_num(s, UINT64_MAX);
		m.u.replace.new_ref = rnd_num(s, UINT64_MAX);
		m.u.replace.shares = (uint32_t)rnd_num(s, UINT32_MAX);
		m.u.replace.price = (uint32_t)rnd_num(s, UINT32_MAX);
		break;
	case 'P':
		m.u.trade.ref = rnd_num(s, UINT64_MAX);
		m.u.trade.side = splitmix(s) & 1 ? 'B' : 'S';
		m.u.trade.shares = (uint32_t)rnd_num(s, UINT32_MAX);
		rnd_alpha(s, m.u.trade.stock, ITCH_STOCK_LEN, 1);
		m.u.trade.price = (uint32_t)rnd_num(s, UINT32_MAX);
		m.u.trade.match = rnd_num(s, UINT64_MAX);
		break;
	default:
		m.u.end_of_snapshot.seq = rnd_num(s, UINT64_MAX) >> splitmix(s) % 64;
		break;
	}
	return m;
}

START_TEST(random_round_trips)
{
	unsigned per_type[128] = { 0 };
	uint64_t seed = 5;

	for (int i = 0; i < 100000; i++) {
		struct itch_msg m = rnd_msg(&seed), back;
		uint8_t buf[ITCH_MAX_LEN], again[ITCH_MAX_LEN];
		int n = itch_encode(&m, buf, sizeof(buf)), rc;

		ck_assert_msg(n == (int)itch_len(m.type), "message %d (%c): encode %d", i, m.type,
			      n);
		rc = itch_decode(buf, (size_t)n, &back);
		ck_assert_msg(rc == ITCH_OK, "message %d (%c): decode %d", i, m.type, rc);
		ck_assert_msg(memcmp(&m, &back, sizeof(m)) == 0, "message %d (%c): differs", i,
			      m.type);
		ck_assert_int_eq(itch_encode(&back, again, sizeof(again)), n);
		ck_assert(memcmp(buf, again, (size_t)n) == 0);
		per_type[(uint8_t)m.type]++;
	}
	for (const char *t = types; *t; t++)
		ck_assert_uint_gt(per_type[(uint8_t)*t], 7000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("itch");
	TCase *golden = tcase_create("golden");
	TCase *bad = tcase_create("malformed");
	TCase *enc = tcase_create("encode");
	TCase *rnd = tcase_create("random");
	int n = (int)NELEM(goldens);

	tcase_add_loop_test(golden, golden_decode, 0, n);
	tcase_add_loop_test(golden, golden_encode, 0, n);
	tcase_add_test(golden, lengths);
	tcase_add_test(golden, strerror_every_code);
	suite_add_tcase(s, golden);

	tcase_add_loop_test(bad, every_byte_unprintable, 0, n);
	tcase_add_loop_test(bad, one_char_blank_kept, 0, n);
	tcase_add_loop_test(bad, side_and_printable_every_value, 0, n);
	tcase_add_loop_test(bad, wrong_length_every_type, 0, n);
	tcase_add_test(bad, unknown_types);
	tcase_add_test(bad, alpha_not_left_justified);
	tcase_add_test(bad, alpha_trimmed_on_decode);
	tcase_add_test(bad, end_of_snapshot_digits);
	tcase_add_test(bad, end_of_snapshot_lengths_and_header);
	suite_add_tcase(s, bad);

	tcase_add_test(enc, encode_alpha_errors);
	tcase_add_test(enc, encode_field_errors);
	tcase_add_test(enc, timestamp_bounds);
	tcase_add_loop_test(enc, encode_no_space, 0, n);
	suite_add_tcase(s, enc);

	tcase_add_test(rnd, random_round_trips);
	suite_add_tcase(s, rnd);

	return testutil_run(s, 0);
}
