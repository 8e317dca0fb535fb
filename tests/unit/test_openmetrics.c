/* SPDX-License-Identifier: MIT */
/*
 * The OpenMetrics checker of the metrics tests (tests/integ/openmetrics.c)
 * is itself held to the format: it accepts a text in the shape
 * admin/metrics writes, and refuses each kind of mistake.
 */
#include <check.h>
#include <string.h>

#include "tests/integ/openmetrics.h"
#include "tests/unit/check_main.h"

static const char good[] =
	"# TYPE toolcalld_calls counter\n"
	"# HELP toolcalld_calls Calls answered.\n"
	"toolcalld_calls_total{tool=\"read_file\"} 3\n"
	"toolcalld_calls_total{tool=\"a\\\"b\\\\c\\nd\"} 1\n"
	"# TYPE toolcalld_call_duration_seconds histogram\n"
	"# UNIT toolcalld_call_duration_seconds seconds\n"
	"# HELP toolcalld_call_duration_seconds Latency.\n"
	"toolcalld_call_duration_seconds_bucket{tool=\"x\",le=\"0.001\"} 1\n"
	"toolcalld_call_duration_seconds_bucket{tool=\"x\",le=\"+Inf\"} 2\n"
	"toolcalld_call_duration_seconds_count{tool=\"x\"} 2\n"
	"toolcalld_call_duration_seconds_sum{tool=\"x\"} 0.5\n"
	"# TYPE toolcalld_in_flight gauge\n"
	"# HELP toolcalld_in_flight Calls in flight.\n"
	"toolcalld_in_flight 0\n"
	"# EOF\n";

START_TEST(accepts_good_text)
{
	char err[256] = "";
	ck_assert_msg(om_check(good, err, sizeof(err)) == 0, "%s", err);
	ck_assert(om_check("# EOF\n", err, sizeof(err)) == 0);
	ck_assert(om_value(good, "toolcalld_calls_total", "{tool=\"read_file\"}") == 3);
	ck_assert(om_value(good, "toolcalld_in_flight", "") == 0);
	ck_assert(om_value(good, "toolcalld_nothing", "") == -1);
}
END_TEST

static const struct {
	const char *what, *text;
} bad[] = {
	{ "no # EOF", "# TYPE a gauge\n# HELP a x\na 1\n" },
	{ "text after # EOF", "# TYPE a gauge\n# HELP a x\na 1\n# EOF\na 2\n" },
	{ "no final newline", "# TYPE a gauge\n# HELP a x\na 1\n# EOF" },
	{ "a name starting with a digit", "# TYPE 1a gauge\n# HELP 1a x\n1a 1\n# EOF\n" },
	{ "a counter sample without _total", "# TYPE a counter\n# HELP a x\na 1\n# EOF\n" },
	{ "a counter family ending in _total", "# TYPE a_total counter\n# HELP a_total x\na_total_total 1\n# EOF\n" },
	{ "a negative counter", "# TYPE a counter\n# HELP a x\na_total -1\n# EOF\n" },
	{ "a bad escape", "# TYPE a gauge\n# HELP a x\na{l=\"\\t\"} 1\n# EOF\n" },
	{ "an unescaped quote", "# TYPE a gauge\n# HELP a x\na{l=\"a\"b\"} 1\n# EOF\n" },
	{ "a label name with a colon", "# TYPE a gauge\n# HELP a x\na{a:b=\"1\"} 1\n# EOF\n" },
	{ "a label twice", "# TYPE a gauge\n# HELP a x\na{l=\"1\",l=\"2\"} 1\n# EOF\n" },
	{ "buckets out of order", "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"2\"} 1\n"
	  "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 1\n# EOF\n" },
	{ "no +Inf bucket", "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 1\n# EOF\n" },
	{ "_count other than +Inf", "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"+Inf\"} 1\nh_count 2\nh_sum 1\n# EOF\n" },
	{ "no _sum", "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n# EOF\n" },
	{ "decreasing buckets", "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"1\"} 2\n"
	  "h_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 1\n# EOF\n" },
	{ "an interleaved family", "# TYPE a gauge\n# HELP a x\na 1\n# TYPE b gauge\n# HELP b x\nb 1\n"
	  "# TYPE a gauge\n# EOF\n" },
	{ "metadata after samples", "# TYPE a gauge\na 1\n# HELP a x\n# EOF\n" },
	{ "a sample twice", "# TYPE a gauge\n# HELP a x\na 1\na 1\n# EOF\n" },
	{ "a unit the name lacks", "# TYPE a_ms gauge\n# UNIT a_ms seconds\n# HELP a_ms x\na_ms 1\n# EOF\n" },
	{ "a free comment", "# hello\n# EOF\n" },
	{ "a bad number", "# TYPE a gauge\n# HELP a x\na 1.2.3\n# EOF\n" },
	{ "no # HELP", "# TYPE a gauge\na 1\n# EOF\n" },
	{ "an unknown type", "# TYPE a thing\n# HELP a x\na 1\n# EOF\n" },
	{ "an empty line", "# TYPE a gauge\n# HELP a x\n\na 1\n# EOF\n" },
};

START_TEST(refuses_each_mistake)
{
	char err[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(om_check(bad[i].text, err, sizeof(err)) < 0, "accepted %s", bad[i].what);
		ck_assert_msg(strncmp(err, "line ", 5) == 0, "%s: message '%s'", bad[i].what, err);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("openmetrics");
	TCase *tc = tcase_create("openmetrics");
	tcase_add_test(tc, accepts_good_text);
	tcase_add_test(tc, refuses_each_mistake);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
