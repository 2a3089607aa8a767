/* Pre-trade risk's text and plumbing: the limits syntax (common/risk.h),
 * the matcher's risk file and the tape's Admin (matcher/risk_admin.h). The
 * engine's checks themselves are tests/test_engine's. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lockstep.pb-c.h"
#include "risk.h"
#include "risk_admin.h"
#include "testutil.h"

START_TEST(limits_parse_every_key)
{
	struct risk_limits l;
	char err[160] = "";

	ck_assert_int_eq(risk_limits_parse("max_qty=5000 max_notional=250000.5 collar=5% "
					   "max_open=100 credit=1000000",
					   &l, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(l.set, RISK_ALL);
	ck_assert_uint_eq(l.max_qty, 5000);
	ck_assert_uint_eq(l.max_notional, 2500005000ull); /* dollars x 10^4 */
	ck_assert_uint_eq(l.collar_bp, 500);
	ck_assert_uint_eq(l.max_open, 100);
	ck_assert_uint_eq(l.credit, 10000000000ull);
	ck_assert_int_eq(risk_limits_parse("collar=0.25%", &l, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.collar_bp, 25);
	ck_assert_uint_eq(l.set, RISK_COLLAR);
	ck_assert_int_eq(risk_limits_parse("collar=30bp,max_qty=none", &l, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.collar_bp, 30);
	ck_assert_uint_eq(l.set, RISK_COLLAR | RISK_MAX_QTY);
	ck_assert_uint_eq(l.max_qty, 0); /* given as none: no limit */
	ck_assert_int_eq(risk_limits_parse("", &l, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.set, 0);
}
END_TEST

START_TEST(limits_parse_errors_say_which_word)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "max_qty=5000 max_qty=1", "max_qty given twice" },
		{ "max_qty=-1", "\"max_qty=-1\": max_qty wants shares" },
		{ "max_qty=4294967296", "\"max_qty=4294967296\": max_qty wants" },
		{ "max_notional=1.00001", "\"max_notional=1.00001\": max_notional wants" },
		{ "collar=5", "\"collar=5\": collar wants a percentage" },
		{ "collar=0%", "\"collar=0%\": collar wants" },
		{ "limit=3", "\"limit=3\": not a limit" },
		{ "max_open", "\"max_open\": not a limit" },
		{ "credit=", "\"credit=\": credit wants dollars" },
	};
	struct risk_limits l = { .set = 7 };
	char err[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_int_eq(risk_limits_parse(bad[i].text, &l, err, sizeof(err)), -EINVAL);
		ck_assert_msg(strncmp(err, bad[i].why, strlen(bad[i].why)) == 0, "%s: %s",
			      bad[i].text, err);
	}
	ck_assert_uint_eq(l.set, 7); /* untouched on failure */
}
END_TEST

START_TEST(limits_format_round_trip)
{
	const char *texts[] = { "max_qty=5000 max_notional=250000.5 collar=500bp max_open=100 "
				"credit=1000000",
				"max_notional=0.0001", "collar=1bp max_open=none", "" };

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct risk_limits a, b;
		char err[160], out[200];

		ck_assert_int_eq(risk_limits_parse(texts[i], &a, err, sizeof(err)), 0);
		risk_limits_format(&a, out, sizeof(out));
		ck_assert_str_eq(out, texts[i]);
		ck_assert_int_eq(risk_limits_parse(out, &b, err, sizeof(err)), 0);
		ck_assert_mem_eq(&a, &b, sizeof(a));
	}
}
END_TEST

START_TEST(risk_file_entries)
{
	static const char text[] = "# limits\n"
				   "firm FRMA credit=1000000\n"
				   "\n"
				   "user *   max_open=5 collar=5%\n"
				   "  user TRADR1 max_qty=500\tmax_notional=60000\r\n"
				   "reference AAPL 150.25\n"
				   "user tradr2 max_open=3\n";
	struct engine_admin_cmd *a;
	size_t n;
	char err[200] = "";

	ck_assert_int_eq(risk_text_load("r.conf", text, sizeof(text) - 1, &a, &n, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_uint_eq(a[0].kind, ENGINE_ADMIN_LIMITS);
	ck_assert_uint_eq(a[0].scope, ENGINE_SCOPE_FIRM);
	ck_assert_str_eq(a[0].name, "FRMA");
	ck_assert_uint_eq(a[0].limits.set, RISK_CREDIT);
	ck_assert_str_eq(a[1].name, "*");
	ck_assert_uint_eq(a[1].scope, ENGINE_SCOPE_USER);
	ck_assert_uint_eq(a[1].limits.set, RISK_MAX_OPEN | RISK_COLLAR);
	ck_assert_str_eq(a[2].name, "TRADR1");
	ck_assert_uint_eq(a[2].limits.max_qty, 500);
	ck_assert_uint_eq(a[2].limits.max_notional, 600000000ull);
	ck_assert_uint_eq(a[3].kind, ENGINE_ADMIN_REFERENCE);
	ck_assert_uint_eq(a[3].scope, ENGINE_SCOPE_SYMBOL);
	ck_assert_str_eq(a[3].name, "AAPL");
	ck_assert_uint_eq(a[3].price, 1502500);
	ck_assert_str_eq(a[4].name, "TRADR2"); /* as the credentials file has it */
	free(a);
}
END_TEST

START_TEST(risk_file_errors_name_the_line)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "firm FRMAX credit=1\n", "r.conf:1: firm NAME LIMIT...: a name of 1..4" },
		{ "user TRADR1\n", "r.conf:1: user NAME LIMIT..." },
		{ "\nuser A max_qty=1\nuser A credit=2\n", "r.conf:3: user A given twice" },
		{ "reference AAPL 0\n", "r.conf:1: reference SYMBOL PRICE" },
		{ "reference * 10\n", "r.conf:1: reference SYMBOL PRICE" },
		{ "desk D1 max_qty=1\n", "r.conf:1: want firm NAME" },
		{ "user TR-1 max_qty=1\n", "r.conf:1: user NAME LIMIT...: a name of 1..6 letters" },
		{ "reference AAPL 200000\n", "r.conf:1: reference SYMBOL PRICE" },
		{ "firm F credit=1 bogus=2\n", "r.conf:1: \"bogus=2\": not a limit" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct engine_admin_cmd *a = (void *)1;
		size_t n = 9;
		char err[200] = "";

		ck_assert_int_eq(risk_text_load("r.conf", bad[i].text, strlen(bad[i].text), &a, &n,
						err, sizeof(err)),
				 -EINVAL);
		ck_assert_msg(strncmp(err, bad[i].why, strlen(bad[i].why)) == 0, "%s: %s",
			      bad[i].text, err);
		ck_assert_ptr_null(a);
		ck_assert_uint_eq(n, 0);
	}
}
END_TEST

START_TEST(admin_decode_and_describe)
{
	Lockstep__Admin a = LOCKSTEP__ADMIN__INIT;
	Lockstep__RiskLimits l = LOCKSTEP__RISK_LIMITS__INIT;
	struct engine_cmd cmd;
	uint8_t buf[128];
	char text[200];
	size_t n;

	a.kind = LOCKSTEP__ADMIN__KIND__LIMITS;
	a.scope = LOCKSTEP__ADMIN__SCOPE__USER;
	a.name = "TRADR1";
	l.set = RISK_MAX_QTY | RISK_CREDIT;
	l.max_qty = 1000;
	l.credit = 50000000;
	a.limits = &l;
	n = lockstep__admin__pack(&a, buf);
	ck_assert_int_eq(risk_admin_decode(buf, n, &cmd), 0);
	ck_assert_int_eq(cmd.kind, ENGINE_ADMIN);
	ck_assert_uint_eq(cmd.u.admin.limits.max_qty, 1000);
	risk_admin_describe(&cmd.u.admin, text, sizeof(text));
	ck_assert_str_eq(text, "user TRADR1: max_qty=1000 credit=5000");

	a.kind = LOCKSTEP__ADMIN__KIND__KILL;
	a.scope = LOCKSTEP__ADMIN__SCOPE__FIRM;
	a.name = "FRMA";
	a.cancel = 1;
	a.limits = NULL;
	n = lockstep__admin__pack(&a, buf);
	ck_assert_int_eq(risk_admin_decode(buf, n, &cmd), 0);
	risk_admin_describe(&cmd.u.admin, text, sizeof(text));
	ck_assert_str_eq(text, "firm FRMA: kill switch, open orders canceled");

	a.name = "TOOLONGNAME"; /* past the engine's 8 characters */
	n = lockstep__admin__pack(&a, buf);
	ck_assert_int_eq(risk_admin_decode(buf, n, &cmd), -1);
	buf[0] = 0xff; /* not protobuf */
	ck_assert_int_eq(risk_admin_decode(buf, 3, &cmd), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("risk");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, limits_parse_every_key);
	tcase_add_test(tc, limits_parse_errors_say_which_word);
	tcase_add_test(tc, limits_format_round_trip);
	tcase_add_test(tc, risk_file_entries);
	tcase_add_test(tc, risk_file_errors_name_the_line);
	tcase_add_test(tc, admin_decode_and_describe);
	suite_add_tcase(s, tc);
	return testutil_run(s, 0);
}
