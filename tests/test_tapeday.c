/* The tape's days on the wire (common/tapeday.h): session names, the table
 * of days, the mapping both ways, and what a receiver learns from packets. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moldudp64.h"
#include "tape.h"
#include "tapeday.h"
#include "testutil.h"

static void session_str(const struct tapeday *t, uint32_t day, char out[MOLD_SESSION_LEN + 1])
{
	struct mold_session s;

	tapeday_session(t, day, &s);
	mold_session_str(&s, out);
}

START_TEST(session_names)
{
	struct tapeday t;
	struct mold_session s;
	char name[MOLD_SESSION_LEN + 1];

	ck_assert_int_eq(tapeday_init(&t, "TAPE"), 0);
	session_str(&t, 1, name);
	ck_assert_str_eq(name, "TAPE");
	session_str(&t, 2, name);
	ck_assert_str_eq(name, "TAPE000002");
	session_str(&t, 123456, name);
	ck_assert_str_eq(name, "TAPE123456");
	for (uint32_t d = 1; d < 3000; d += 7) {
		tapeday_session(&t, d, &s);
		ck_assert_uint_eq(tapeday_day_of(&t, &s), d);
	}
	ck_assert_int_eq(mold_session_set(&s, "TAPE00000X"), MOLD_OK);
	ck_assert_uint_eq(tapeday_day_of(&t, &s), 0);
	ck_assert_int_eq(mold_session_set(&s, "TAPE000001"), MOLD_OK); /* day 1 is "TAPE" */
	ck_assert_uint_eq(tapeday_day_of(&t, &s), 0);
	ck_assert_int_eq(mold_session_set(&s, "OTHER00002"), MOLD_OK);
	ck_assert_uint_eq(tapeday_day_of(&t, &s), 0);
	/* a long configured name keeps its first four characters from day 2 */
	ck_assert_int_eq(tapeday_init(&t, "REPLAYTAPE"), 0);
	session_str(&t, 1, name);
	ck_assert_str_eq(name, "REPLAYTAPE");
	session_str(&t, 2, name);
	ck_assert_str_eq(name, "REPL000002");
	ck_assert_int_eq(tapeday_init(&t, ""), -EINVAL);
	ck_assert_int_eq(tapeday_init(&t, "ELEVENCHARS"), -EINVAL);
}
END_TEST

START_TEST(table_and_mapping)
{
	struct tapeday t;
	struct mold_session s;
	uint64_t base, seq;

	ck_assert_int_eq(tapeday_init(&t, "TAPE"), 0);
	ck_assert_int_eq(tapeday_learn(&t, 0, 5), -EINVAL);
	ck_assert_int_eq(tapeday_learn(&t, 2, 1), -EINVAL);
	ck_assert_int_eq(tapeday_learn(&t, 2, 1001), 0);
	ck_assert_int_eq(tapeday_learn(&t, 3, 5001), 0);
	ck_assert_uint_eq(tapeday_day_at(&t, 1000, &base), 1);
	ck_assert_uint_eq(base, 1);
	ck_assert_uint_eq(tapeday_day_at(&t, 1001, &base), 2);
	ck_assert_uint_eq(base, 1001);
	ck_assert_uint_eq(tapeday_day_at(&t, 9999, NULL), 3);
	tapeday_wire(&t, 1001, &s, &seq);
	ck_assert_uint_eq(tapeday_day_of(&t, &s), 2);
	ck_assert_uint_eq(seq, 1);
	ck_assert_uint_eq(tapeday_index(&t, &s, 1), 1001);
	/* a request in day 2's session past its end names day 3's indices */
	ck_assert_uint_eq(tapeday_index(&t, &s, 4500), 5500);
	/* every index maps there and back */
	for (uint64_t i = 1; i < 7000; i += 13) {
		tapeday_wire(&t, i, &s, &seq);
		ck_assert_uint_eq(tapeday_index(&t, &s, seq), i);
	}
	/* a cut journal forgets the days that began after it */
	tapeday_forget_after(&t, 5000);
	ck_assert_uint_eq(tapeday_last(&t)->day, 2);
	ck_assert_uint_eq(tapeday_base(&t, 3), 0);
	/* day 3 again, elsewhere (a new primary sequenced its start later) */
	ck_assert_int_eq(tapeday_learn(&t, 3, 6001), 0);
	ck_assert_uint_eq(tapeday_base(&t, 3), 6001);
	/* relearning day 2 later drops day 3, which no longer starts after it */
	ck_assert_int_eq(tapeday_learn(&t, 2, 7000), 0);
	ck_assert_uint_eq(tapeday_base(&t, 3), 0);
	ck_assert_uint_eq(tapeday_base(&t, 2), 7000);
	/* the table keeps the latest days, and day 1 */
	for (uint32_t d = 3; d < 3 + 2 * TAPEDAY_KNOWN; d++)
		ck_assert_int_eq(tapeday_learn(&t, d, 7000 + 100ull * d), 0);
	ck_assert_uint_eq(t.n, TAPEDAY_KNOWN);
	ck_assert_uint_eq(t.known[0].day, 1);
	ck_assert_uint_eq(tapeday_last(&t)->day, 2 + 2 * TAPEDAY_KNOWN);
	ck_assert_uint_eq(tapeday_base(&t, 3), 0);
}
END_TEST

/* A data packet of `blocks` events in `day`'s session from index `index`. */
static size_t data_packet(const struct tapeday *t, uint8_t *buf, size_t cap, uint32_t day,
			  uint64_t base, uint64_t index, unsigned blocks)
{
	struct mold_builder b;
	struct mold_session s;

	tapeday_session(t, day, &s);
	ck_assert_int_eq(mold_build_begin(&b, buf, cap, &s, index - base + 1), MOLD_OK);
	for (unsigned k = 0; k < blocks; k++) {
		uint8_t ev[128];
		size_t n = tape_event_encode(ev, sizeof(ev), 3, index + k, 1, "gw-1", 7, index + k,
					     (const uint8_t *)"", 0);

		ck_assert_int_eq(mold_build_add(&b, ev, (uint16_t)n), MOLD_OK);
	}
	return mold_build_end(&b);
}

START_TEST(receiver_learns_days_from_the_tape)
{
	struct tapeday sender, rcv;
	struct mold_packet p;
	struct mold_iter it;
	uint8_t buf[2048], hb[MOLD_HEADER_LEN], req[MOLD_REQUEST_LEN];
	struct mold_session s;
	struct mold_request r;
	const uint8_t *data;
	uint64_t seq;
	uint16_t len;
	size_t n;

	ck_assert_int_eq(tapeday_init(&sender, "TAPE"), 0);
	ck_assert_int_eq(tapeday_learn(&sender, 2, 501), 0);
	ck_assert_int_eq(tapeday_init(&rcv, "TAPE"), 0);
	/* day 1's packets: indices as they are */
	n = data_packet(&sender, buf, sizeof(buf), 1, 1, 40, 2);
	ck_assert_int_eq(tapeday_parse(&rcv, buf, n, 0, &p), 0);
	ck_assert_uint_eq(p.seq, 40);
	/* a heartbeat of day 2 before any of its data: ask for more */
	tapeday_session(&sender, 2, &s);
	n = mold_build_heartbeat(hb, &s, 7);
	ck_assert_int_eq(tapeday_parse(&rcv, hb, n, 0, &p), TAPEDAY_LATER);
	/* a request past day 1's end (the receiver knows no more) names indices */
	n = tapeday_build_request(&rcv, req, 500, 3);
	ck_assert_int_eq(tapeday_parse_request(&sender, req, n, &r), 0);
	ck_assert_uint_eq(r.seq, 500);
	ck_assert_uint_eq(r.count, 3);
	/* day 2's data (its third packet first): the base comes from the Event */
	n = data_packet(&sender, buf, sizeof(buf), 2, 501, 510, 3);
	ck_assert_int_eq(tapeday_parse(&rcv, buf, n, 0, &p), 0);
	ck_assert_uint_eq(p.seq, 510);
	ck_assert_uint_eq(tapeday_base(&rcv, 2), 501);
	mold_iter_init(&it, &p);
	for (uint64_t want = 510; mold_iter_next(&it, &seq, &data, &len); want++)
		ck_assert_uint_eq(seq, want);
	ck_assert_int_eq(tapeday_parse(&rcv, hb, MOLD_HEADER_LEN, 0, &p), 0);
	ck_assert_uint_eq(p.seq, 507);
	/* now its requests are in day 2's session, from 1 */
	n = tapeday_build_request(&rcv, req, 501, 1);
	ck_assert_int_eq(mold_parse_request(req, n, &s, &r), MOLD_OK);
	ck_assert_uint_eq(r.seq, 1);
	/* a packet whose Event names an index its wire position cannot have */
	n = data_packet(&sender, buf, sizeof(buf), 3, 600, 600, 1);
	buf[16] = 0xff; /* the wire sequence number, far past the index */
	buf[15] = 0xff;
	ck_assert_int_eq(tapeday_parse(&rcv, buf, n, 0, &p), MOLD_E_SEQ_WRAP);
	ck_assert_uint_eq(tapeday_base(&rcv, 3), 0);
	/* foreign sessions are refused */
	ck_assert_int_eq(mold_session_set(&s, "OTHER"), MOLD_OK);
	n = mold_build_heartbeat(hb, &s, 7);
	ck_assert_int_eq(tapeday_parse(&rcv, hb, n, 0, &p), MOLD_E_SESSION);
}
END_TEST

START_TEST(day_event_round_trip)
{
	uint8_t body[] = { 0x08, 0x02, 0x10, 0x05 }; /* kind START_OF_DAY, day 5 */
	uint8_t ev[128];
	struct tape_event_view v;
	enum tape_day_kind kind;
	uint32_t day;
	size_t n = tape_event_encode_body(ev, sizeof(ev), 2, 77, 1, NULL, 0, 77, TAPE_BODY_DAY,
					  body, sizeof(body));

	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(tape_event_peek(ev, n, &v), 0);
	ck_assert_int_eq(v.body, TAPE_BODY_DAY);
	ck_assert_int_eq(tape_day_peek(v.body_data, v.body_len, &kind, &day), 0);
	ck_assert_int_eq(kind, TAPE_DAY_START);
	ck_assert_uint_eq(day, 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tapeday");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, session_names);
	tcase_add_test(tc, table_and_mapping);
	tcase_add_test(tc, receiver_learns_days_from_the_tape);
	tcase_add_test(tc, day_event_round_trip);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
