/* The byte budget per source address (common/srcbudget.h). */
#include <check.h>

#include "srcbudget.h"
#include "testutil.h"

#define S 1000000000ull

START_TEST(bucket)
{
	struct src_budget b;

	src_budget_init(&b, 1000, 0); /* 1,000 bytes a second, a burst of 1,000 */
	ck_assert(src_budget_take(&b, 1, 600, S));
	ck_assert(!src_budget_take(&b, 1, 600, S)); /* 400 left */
	ck_assert(src_budget_take(&b, 2, 1000, S)); /* another address: its own */
	ck_assert(src_budget_take(&b, 1, 400, S));
	ck_assert(!src_budget_take(&b, 1, 1, S));
	ck_assert(src_budget_take(&b, 1, 500, S + S / 2)); /* half a second: 500 more */
	ck_assert(!src_budget_take(&b, 1, 1, S + S / 2));
	ck_assert(src_budget_take(&b, 1, 1000, 100 * S)); /* never more than the burst */
	ck_assert(!src_budget_take(&b, 1, 1, 100 * S));
	ck_assert_uint_eq(b.refused, 4);
	ck_assert(!src_budget_take(&b, 3, 1001, 100 * S)); /* more than a burst: never */
	{
		const size_t lens[] = { 400, 400, 400 };

		/* an answer of three datagrams: the first two fit a fresh bucket */
		ck_assert_uint_eq(src_budget_prefix(&b, 4, lens, 3, 100 * S), 2);
		ck_assert_uint_eq(src_budget_prefix(&b, 4, lens, 3, 100 * S), 0);
	}
}
END_TEST

START_TEST(off_and_eviction)
{
	struct src_budget b;

	src_budget_init(&b, 0, 0);
	for (int i = 0; i < 10; i++)
		ck_assert(src_budget_take(&b, 1, 1u << 30, S));
	src_budget_init(&b, 100, 100);
	ck_assert(src_budget_take(&b, 7, 100, S)); /* 7 spent */
	/* as many other addresses as there are slots push 7 out... */
	for (uint32_t a = 100; a < 100 + SRC_BUDGET_SLOTS; a++)
		ck_assert(src_budget_take(&b, a, 1, S + a));
	/* ...and it comes back with a full bucket (a forgotten source is new) */
	ck_assert(src_budget_take(&b, 7, 100, S + 1000));
	ck_assert(!src_budget_take(&b, 7, 1, S + 1000));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("srcbudget");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, bucket);
	tcase_add_test(tc, off_and_eviction);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
