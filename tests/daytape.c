/* tests/daytape: writes a journal of several trading days as a sequencer
 * would (common/tapeday.h), without a cluster, for tests/replay_days.sh.
 *
 *   daytape DIR DAYS EVENTS [--open-last] [--segment-bytes N] [--one-batch]
 *
 * Day 1 starts at seq 1 (no START_OF_DAY: its base is 1 by definition);
 * each later day d starts a segment of its own (journal_roll) with
 * START_OF_DAY{day=d}; each day then holds EVENTS new orders (three per
 * sequencer batch, one timestamp a batch; day d's clock at 09:30 UTC on
 * 2026-12-0d) and ends with END_OF_DAY{day=d}, except the last day with
 * --open-last. --one-batch stamps every event with one time, as if one
 * sequencer batch held them all: only the day boundary then splits the
 * datagrams. Prints each day's first and last index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "lockstep.pb-c.h"
#include "tape.h"

#define DAY0_NS 1796117400000000000ull /* 2026-12-01T09:30:00Z */
#define DAY_NS 86400000000000ull

static struct journal *j;
static uint64_t seq = 1;
static int one_batch;

static void put(uint64_t ts, const char *origin, uint64_t origin_seq, enum tape_body body,
		const uint8_t *data, size_t len)
{
	uint8_t ev[1024];
	size_t n;

	if (one_batch)
		ts = DAY0_NS;
	n = tape_event_encode_body(ev, sizeof(ev), 1, seq, ts, origin, origin_seq, seq - 1,
					  body, data, len);

	if (!n || journal_append(j, seq, 1, ev, n) < 0) {
		fprintf(stderr, "daytape: append %llu failed\n", (unsigned long long)seq);
		exit(1);
	}
	seq++;
}

static void put_day(uint64_t ts, int kind, uint32_t day)
{
	Lockstep__DayEvent d = LOCKSTEP__DAY_EVENT__INIT;
	uint8_t buf[64];

	d.kind = (Lockstep__DayEvent__Kind)kind;
	d.day = day;
	put(ts, NULL, 0, TAPE_BODY_DAY, buf, lockstep__day_event__pack(&d, buf));
}

static void put_order(uint64_t ts, uint32_t day, uint64_t n)
{
	Lockstep__Command c = LOCKSTEP__COMMAND__INIT;
	Lockstep__NewOrder o = LOCKSTEP__NEW_ORDER__INIT;
	uint8_t buf[256];
	char token[32];

	snprintf(token, sizeof(token), "D%uO%llu", day, (unsigned long long)n);
	o.token = token;
	o.side = n % 2 ? 'B' : 'S';
	o.shares = 100;
	o.symbol = (char *)"AAPL";
	o.price = 1500000 + (uint32_t)(n % 7) * 100;
	o.tif = 99999;
	c.user = (char *)"U1";
	c.firm = (char *)"FIRM";
	c.body_case = LOCKSTEP__COMMAND__BODY_NEW_ORDER;
	c.new_order = &o;
	put(ts, "GW1", n, TAPE_BODY_COMMAND, buf, lockstep__command__pack(&c, buf));
}

int main(int argc, char **argv)
{
	struct journal_options o = { .segment_bytes = 4096, .fsync = JOURNAL_FSYNC_NONE };
	unsigned long days, events;
	uint64_t gw = 1;
	int open_last = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: daytape DIR DAYS EVENTS [--open-last] [--segment-bytes N]\n");
		return 2;
	}
	days = strtoul(argv[2], NULL, 10);
	events = strtoul(argv[3], NULL, 10);
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--open-last") == 0)
			open_last = 1;
		else if (strcmp(argv[i], "--one-batch") == 0)
			one_batch = 1;
		else if (strcmp(argv[i], "--segment-bytes") == 0 && i + 1 < argc)
			o.segment_bytes = strtoull(argv[++i], NULL, 10);
	}
	if (journal_open(&j, argv[1], &o, NULL) < 0) {
		fprintf(stderr, "daytape: cannot open %s\n", argv[1]);
		return 1;
	}
	for (uint32_t d = 1; d <= days; d++) {
		uint64_t ts = DAY0_NS + (d - 1) * DAY_NS, first = seq;

		if (d > 1) {
			journal_roll(j);
			put_day(ts, LOCKSTEP__DAY_EVENT__KIND__START_OF_DAY, d);
		}
		for (unsigned long i = 0; i < events; i++)
			put_order(ts + 1000000ull * (1 + i / 3), d, gw++);
		if (d < days || !open_last)
			put_day(ts + 1000000ull * (2 + events / 3), LOCKSTEP__DAY_EVENT__KIND__END_OF_DAY,
				d);
		printf("day %u %llu %llu\n", d, (unsigned long long)first,
		       (unsigned long long)(seq - 1));
	}
	if (journal_flush(j) < 0)
		return 1;
	journal_close(j);
	return 0;
}
