/* SPDX-License-Identifier: MIT */
/*
 * The network policy without sockets: host patterns and ports, deny over
 * allow, unknown deny or ask, merging a tool's hosts into the configured
 * policy, address classification (IPv4-mapped and other embedded forms
 * included), allow_private, strict parse errors with their paths, and
 * the HTTP head and SOCKS5 parsers' answers.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bind/bind.h"
#include "lib/net/net.h"
#include "lib/net/net_internal.h"
#include "proto/json.h"
#include "tests/unit/check_main.h"

/* Parses a policy from JSON text; fails the test on error. */
static struct net_policy *policy(const char *text)
{
	struct json_doc *doc = NULL;
	struct json_err jerr;
	struct net_policy_errors errs;
	struct net_policy *p = NULL;

	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &jerr), 0);
	int r = net_policy_parse(json_doc_root(doc), "network", &p, &errs);
	if (r < 0)
		ck_abort_msg("%s: %s: %s", text, errs.n ? errs.e[0].path : "", errs.n ? errs.e[0].msg : "");
	json_doc_unref(doc);
	return p;
}

static const struct {
	const char *host;
	uint16_t port;
	enum net_decision want;
	const char *rule;
} decide_table[] = {
	{ "registry.npmjs.org", 443, NET_ALLOW, "allow:registry.npmjs.org" },
	{ "REGISTRY.npmjs.org.", 80, NET_ALLOW, "allow:registry.npmjs.org" },
	{ "npmjs.org", 443, NET_DENY, "unknown:deny" },
	{ "evil.registry.npmjs.org", 443, NET_DENY, "unknown:deny" },
	{ "api.github.com", 443, NET_ALLOW, "allow:*.github.com:443" },
	{ "a.b.github.com", 443, NET_ALLOW, "allow:*.github.com:443" },
	{ "api.github.com", 80, NET_DENY, "unknown:deny" },
	{ "github.com", 443, NET_DENY, "unknown:deny" },	/* subdomains only */
	{ "xgithub.com", 443, NET_DENY, "unknown:deny" },
	{ "gist.github.com", 443, NET_DENY, "deny:gist.github.com" },	/* deny wins */
	{ "www.example.org", 8080, NET_ALLOW, "allow:*.example.org" },
	{ "a.evil.example.org", 1, NET_DENY, "deny:*.evil.example.org" },
	{ "10.1.2.3", 22, NET_ALLOW, "allow:10.1.2.3:22" },
	{ "10.1.2.3", 23, NET_DENY, "unknown:deny" },
	{ "::1", 8080, NET_ALLOW, "allow:[::1]:8080" },
	{ "0:0::1", 8080, NET_ALLOW, "allow:[::1]:8080" },
	{ "2001:db8::5", 1, NET_ALLOW, "allow:2001:db8::5" },
	{ "bad host", 80, NET_DENY, "invalid-host" },
};

START_TEST(decide_by_pattern_and_port)
{
	struct net_policy *p = policy("{\"allow\": [\"registry.npmjs.org\", \"*.github.com:443\", \"*.example.org\","
				      " \"10.1.2.3:22\", \"[::1]:8080\", \"2001:db8::5\", \"gist.github.com\"],"
				      " \"deny\": [\"gist.github.com\", \"*.evil.example.org\"]}");
	char rule[NET_RULE_MAX];

	for (size_t i = 0; i < sizeof(decide_table) / sizeof(decide_table[0]); i++) {
		enum net_decision d = net_policy_decide(p, decide_table[i].host, decide_table[i].port, rule);
		ck_assert_msg(d == decide_table[i].want, "%s:%u: %s", decide_table[i].host, decide_table[i].port,
			      net_decision_name(d));
		ck_assert_str_eq(rule, decide_table[i].rule);
	}
	ck_assert(!net_policy_asks(p));
	net_policy_unref(p);
}
END_TEST

START_TEST(unknown_ask_and_merge)
{
	struct net_policy *base = policy("{\"unknown\": \"ask\", \"deny\": [\"*.evil.com\"],"
					 " \"hosts\": {\"origin.test\": \"127.0.0.1\"}}");
	struct net_policy *tool = policy("{\"allow\": [\"registry.npmjs.org\"], \"hosts\": {\"mirror.test\": \"::1\"}}");
	struct net_policy *m = NULL;
	char rule[NET_RULE_MAX];

	ck_assert_int_eq(net_policy_decide(base, "x.org", 80, rule), NET_ASK);
	ck_assert_str_eq(rule, "unknown:ask");
	ck_assert_int_eq(net_policy_decide(base, "a.evil.com", 80, rule), NET_DENY);
	ck_assert_str_eq(rule, "deny:*.evil.com");
	ck_assert_int_eq(net_policy_merge(base, tool, &m), 0);
	ck_assert_int_eq(net_policy_decide(m, "registry.npmjs.org", 443, rule), NET_ALLOW);
	ck_assert_str_eq(rule, "allow:registry.npmjs.org");
	ck_assert_int_eq(net_policy_decide(m, "x.org", 80, rule), NET_ASK);	/* base's unknown kept */
	ck_assert_int_eq(net_policy_decide(m, "a.evil.com", 80, rule), NET_DENY);
	ck_assert_ptr_nonnull(net_policy_host(m, "ORIGIN.test"));
	ck_assert_int_eq(net_policy_host(m, "mirror.test")->family, AF_INET6);
	ck_assert_ptr_null(net_policy_host(m, "other.test"));
	net_policy_unref(m);
	/* The tool's own policy alone still denies the unknown. */
	ck_assert_int_eq(net_policy_decide(tool, "x.org", 80, rule), NET_DENY);
	net_policy_unref(base);
	net_policy_unref(tool);
}
END_TEST

static const struct {
	const char *addr;
	enum net_addr_class want;
} class_table[] = {
	{ "8.8.8.8", NET_ADDR_PUBLIC },
	{ "127.0.0.1", NET_ADDR_LOOPBACK },
	{ "127.255.0.9", NET_ADDR_LOOPBACK },
	{ "10.0.0.1", NET_ADDR_PRIVATE },
	{ "172.16.0.1", NET_ADDR_PRIVATE },
	{ "172.31.255.255", NET_ADDR_PRIVATE },
	{ "172.32.0.1", NET_ADDR_PUBLIC },
	{ "192.168.1.1", NET_ADDR_PRIVATE },
	{ "100.64.0.1", NET_ADDR_CGNAT },
	{ "100.128.0.1", NET_ADDR_PUBLIC },
	{ "169.254.169.254", NET_ADDR_LINK_LOCAL },
	{ "224.0.0.1", NET_ADDR_MULTICAST },
	{ "0.0.0.0", NET_ADDR_UNSPECIFIED },
	{ "0.1.2.3", NET_ADDR_UNSPECIFIED },
	{ "255.255.255.255", NET_ADDR_BROADCAST },
	{ "240.0.0.1", NET_ADDR_RESERVED },
	{ "::", NET_ADDR_UNSPECIFIED },
	{ "::1", NET_ADDR_LOOPBACK },
	{ "fc00::1", NET_ADDR_PRIVATE },
	{ "fd12:3456::1", NET_ADDR_PRIVATE },
	{ "fe80::1", NET_ADDR_LINK_LOCAL },
	{ "ff02::1", NET_ADDR_MULTICAST },
	{ "2606:4700::1111", NET_ADDR_PUBLIC },
	{ "::ffff:127.0.0.1", NET_ADDR_LOOPBACK },	/* mapped: the SSRF bypass */
	{ "::ffff:169.254.169.254", NET_ADDR_LINK_LOCAL },
	{ "::ffff:10.0.0.1", NET_ADDR_PRIVATE },
	{ "::ffff:8.8.8.8", NET_ADDR_PUBLIC },
	{ "::127.0.0.1", NET_ADDR_LOOPBACK },		/* compatible */
	{ "::ffff:0:127.0.0.1", NET_ADDR_LOOPBACK },	/* translated */
	{ "64:ff9b::a9fe:a9fe", NET_ADDR_LINK_LOCAL },	/* NAT64 of 169.254.169.254 */
	{ "2002:7f00:1::", NET_ADDR_LOOPBACK },	/* 6to4 of 127.0.0.1 */
	{ "2002:0808:0808::", NET_ADDR_PUBLIC },
};

START_TEST(classify_addresses)
{
	for (size_t i = 0; i < sizeof(class_table) / sizeof(class_table[0]); i++) {
		struct net_addr a;
		ck_assert_msg(net_addr_parse(class_table[i].addr, &a) == 0, "%s", class_table[i].addr);
		enum net_addr_class c = net_addr_classify(&a);
		ck_assert_msg(c == class_table[i].want, "%s: %s, not %s", class_table[i].addr,
			      net_addr_class_name(c), net_addr_class_name(class_table[i].want));
	}
	struct net_addr a;
	ck_assert_int_lt(net_addr_parse("127.1", &a), 0);
	ck_assert_int_lt(net_addr_parse("[::1]", &a), 0);
}
END_TEST

/* A host as the proxy hands it on, and nothing a record could slip in. */
START_TEST(canonical_hosts)
{
	static const char *const good[] = { "ask.test", "a-b_c.example", "127.0.0.2", "::1", "fd00::1" };
	static const char *const bad[] = { "", "Ask.test", "ask.test.", "a..b", "a b", "a:b", "[::1]", "a/b",
					   "host\n", ".lead" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(net_host_canonical(good[i]), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!net_host_canonical(bad[i]), "%s", bad[i]);
	char long_name[NET_HOST_MAX + 2];
	for (size_t i = 0; i < sizeof(long_name) - 1; i++)
		long_name[i] = (i % 60 == 59) ? '.' : 'a';
	long_name[NET_HOST_MAX + 1] = '\0';
	ck_assert(!net_host_canonical(long_name));
	long_name[NET_HOST_MAX] = '\0';
	ck_assert(net_host_canonical(long_name));
}
END_TEST

START_TEST(private_addresses_refused_unless_allowed)
{
	struct net_policy *none = net_policy_new();
	struct net_policy *lo = policy("{\"allow_private\": [\"127.0.0.0/8\", \"fd00::/8\", \"169.254.169.254\"]}");
	char rule[NET_RULE_MAX];
	struct net_addr a;

	net_addr_parse("8.8.8.8", &a);
	ck_assert(net_policy_address_ok(none, &a, rule));
	net_addr_parse("127.0.0.1", &a);
	ck_assert(!net_policy_address_ok(none, &a, rule));
	ck_assert_str_eq(rule, "private:127.0.0.1");
	ck_assert(net_policy_address_ok(lo, &a, rule));
	net_addr_parse("::ffff:127.0.0.2", &a);
	ck_assert(!net_policy_address_ok(none, &a, rule));
	ck_assert_str_eq(rule, "private:::ffff:127.0.0.2");
	ck_assert(net_policy_address_ok(lo, &a, rule));	/* the block holds the mapped form */
	net_addr_parse("169.254.169.254", &a);
	ck_assert(!net_policy_address_ok(none, &a, rule));
	ck_assert(net_policy_address_ok(lo, &a, rule));
	net_addr_parse("169.254.169.253", &a);
	ck_assert(!net_policy_address_ok(lo, &a, rule));
	net_addr_parse("fd00::1", &a);
	ck_assert(net_policy_address_ok(lo, &a, rule));
	net_addr_parse("fc00::1", &a);
	ck_assert(!net_policy_address_ok(lo, &a, rule));
	net_addr_parse("10.0.0.1", &a);
	ck_assert(!net_policy_address_ok(lo, &a, rule));
	ck_assert_str_eq(rule, "private:10.0.0.1");
	net_policy_unref(none);
	net_policy_unref(lo);
}
END_TEST

START_TEST(strict_parse_errors)
{
	const char *text = "{\"allow\": [\"ok.com\", 3, \"*.x*.com\", \"a.com:0\", \"a.com:65536\", \"[::1\", \"*.1.2.3.4\"],"
			   " \"unknown\": \"maybe\", \"alow\": [], \"allow_private\": [\"10.0.0.0/33\"],"
			   " \"hosts\": {\"bad name\": \"1.2.3.4\", \"ok.test\": \"localhost\"}, \"deny\": \"x\"}";
	struct json_doc *doc = NULL;
	struct json_err jerr;
	struct net_policy_errors errs;
	struct net_policy *p = NULL;
	static const char *const paths[] = {
		"network.allow[1]", "network.allow[2]", "network.allow[3]", "network.allow[4]",
		"network.allow[5]", "network.allow[6]", "network.unknown", "network.alow",
		"network.allow_private[0]", "network.hosts.bad name", "network.hosts.ok.test", "network.deny",
	};

	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &jerr), 0);
	ck_assert_int_eq(net_policy_parse(json_doc_root(doc), "network", &p, &errs), -EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_uint_eq(errs.n, sizeof(paths) / sizeof(paths[0]));
	for (size_t i = 0; i < errs.n; i++) {
		ck_assert_str_eq(errs.e[i].path, paths[i]);
		ck_assert(errs.e[i].msg[0]);
		ck_assert_uint_gt(errs.e[i].off, 0);
	}
	ck_assert(strstr(errs.e[7].msg, "unknown key"));
	ck_assert(strstr(errs.e[3].msg, "port"));
	json_doc_unref(doc);

	/* Not an object at all. */
	ck_assert_int_eq(json_parse("[]", 2, 0, 0, &doc, &jerr), 0);
	ck_assert_int_eq(net_policy_parse(json_doc_root(doc), "network", &p, &errs), -EINVAL);
	ck_assert_uint_eq(errs.n, 1);
	json_doc_unref(doc);
}
END_TEST

/* Through the binder, each mistake is reported at its line and column. */
START_TEST(policy_through_the_binder)
{
	const char *text = "{\n  \"network\": {\"allow\": [\"ok.org\",\n    \"bad host\"], \"unknown\": 1}}";
	struct json_doc *doc = NULL;
	struct json_err jerr;
	struct net_policy *p = NULL;
	struct bind b = { .name = "toolcalld.json", .text = text, .len = strlen(text) };

	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &jerr), 0);
	const struct json *v = json_get(json_doc_root(doc), "network");
	ck_assert_int_eq(net_policy_bind(&b, "network", v, &p), -EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_uint_eq(b.n_errors, 2);
	char *got = bind_errors(&b);
	ck_assert_msg(strstr(got, "toolcalld.json:3:5: network.allow[1]: 'bad host' is not a host name or IP address"),
		      "%s", got);
	ck_assert_msg(strstr(got, "toolcalld.json:3:29: network.unknown: must be \"deny\" or \"ask\""), "%s", got);
	free(got);
	json_doc_unref(doc);

	text = "{\"allow\": [\"ok.org\"]}";
	b = (struct bind){ .name = "tool.json", .text = text, .len = strlen(text) };
	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &jerr), 0);
	ck_assert_int_eq(net_policy_bind(&b, "network", json_doc_root(doc), &p), 0);
	ck_assert_uint_eq(b.n_errors, 0);
	char rule[NET_RULE_MAX];
	ck_assert_int_eq(net_policy_decide(p, "ok.org", 443, rule), NET_ALLOW);
	net_policy_unref(p);
	json_doc_unref(doc);
}
END_TEST

/* Parses a head; returns the result and leaves req for the caller. */
static int head(const char *text, struct net_http_req *req, char *msg)
{
	return net_http_parse_head(text, strlen(text), 16384, req, msg, 160);
}

START_TEST(http_heads)
{
	struct net_http_req req;
	char msg[160];

	ck_assert_int_eq(head("GET http://Example.org:8080/a/b?q=1#frag HTTP/1.1\r\nHost: wrong\r\n"
			      "Connection: X-Private, keep-alive\r\nX-Private: 1\r\nKeep-Alive: 5\r\n"
			      "Proxy-Authorization: Basic eA==\r\nTE: trailers\r\nUpgrade: h2c\r\n"
			      "Accept: */*\r\n\r\n", &req, msg), NET_HTTP_OK);
	ck_assert(!req.connect);
	ck_assert_str_eq(req.host, "example.org");
	ck_assert_uint_eq(req.port, 8080);
	ck_assert_str_eq(buf_head(&req.head), "GET /a/b?q=1 HTTP/1.1\r\nHost: example.org:8080\r\n"
			 "Accept: */*\r\nConnection: close\r\n\r\n");
	net_http_req_done(&req);

	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.0\r\n\r\n", &req, msg), NET_HTTP_OK);
	ck_assert_str_eq(buf_head(&req.head), "GET / HTTP/1.0\r\nHost: a.org\r\nConnection: close\r\n\r\n");
	net_http_req_done(&req);

	ck_assert_int_eq(head("CONNECT [::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n", &req, msg), NET_HTTP_OK);
	ck_assert(req.connect);
	ck_assert_str_eq(req.host, "::1");
	ck_assert_uint_eq(req.port, 443);
	net_http_req_done(&req);

	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.1\r\nHost: a.org\r\n", &req, msg), NET_HTTP_INCOMPLETE);
	ck_assert_int_eq(head("GET /relative HTTP/1.1\r\nHost: a.org\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("GET https://a.org/ HTTP/1.1\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.1\nHost: a\n\n", &req, msg), -400);
	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("CONNECT a.org HTTP/1.1\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("GET http://u:p@a.org/ HTTP/1.1\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("POST http://a.org/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("POST http://a.org/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
			      &req, msg), -400);

	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.0\r\n HTTPion:\x1dX-A: 3\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.1\r\nX-A: a\x01b\r\n\r\n", &req, msg), -400);
	ck_assert_int_eq(head("GET http://a.org/ HTTP/1.1\r\nX-A: tab\there, \xc3\xa9t\xc3\xa9\r\n\r\n", &req, msg),
			 NET_HTTP_OK);
	net_http_req_done(&req);

	char big[20000];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET http://a.org/ HTTP/1.1\r\nX: ", 31);
	ck_assert_int_eq(net_http_parse_head(big, sizeof(big), 16384, &req, msg, sizeof(msg)), -431);
}
END_TEST

START_TEST(http_body_end)
{
	const char h1[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
	const char h2[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
	bool done;

	struct net_http_body *b = net_http_body_new(h1, sizeof(h1) - 1);
	ck_assert_int_eq(net_http_body_feed(b, "abc", 3, &done), 3);
	ck_assert(!done);
	ck_assert_int_eq(net_http_body_feed(b, "deGET / HTTP/1.1\r\n", 18, &done), 2);
	ck_assert(done);
	net_http_body_free(b);

	b = net_http_body_new(h2, sizeof(h2) - 1);
	ck_assert_int_eq(net_http_body_feed(b, "3\r\nabc\r\n0\r\n\r\nEXTRA", 18, &done), 13);
	ck_assert(done);
	net_http_body_free(b);
}
END_TEST

START_TEST(socks_messages)
{
	struct net_socks_req req;
	bool noauth;
	static const uint8_t hello[] = { 5, 2, 2, 0 };
	static const uint8_t hello_auth[] = { 5, 1, 2 };
	static const uint8_t dom[] = { 5, 1, 0, 3, 9, 'E', 'x', 'a', '.', 'm', 'p', 'l', 'e', '.', 0, 80 };
	static const uint8_t v4[] = { 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90 };
	static const uint8_t v6[] = { 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 22 };
	static const uint8_t bind[] = { 5, 2, 0, 1, 1, 2, 3, 4, 0, 80 };
	static const uint8_t atyp[] = { 5, 1, 0, 9, 1, 2, 3, 4, 0, 80 };

	ck_assert_int_eq(net_socks_greeting(hello, 3, &noauth), 0);
	ck_assert_int_eq(net_socks_greeting(hello, sizeof(hello), &noauth), 4);
	ck_assert(noauth);
	ck_assert_int_eq(net_socks_greeting(hello_auth, sizeof(hello_auth), &noauth), 3);
	ck_assert(!noauth);
	ck_assert_int_eq(net_socks_greeting((const uint8_t *)"\4\1\0", 3, &noauth), -1);

	ck_assert_int_eq(net_socks_request(dom, sizeof(dom) - 1, &req), 0);
	ck_assert_int_eq(net_socks_request(dom, sizeof(dom), &req), (int)sizeof(dom));
	ck_assert_str_eq(req.host, "exa.mple");	/* lower-cased, without the final dot */
	ck_assert_int_eq(net_socks_request(v4, sizeof(v4), &req), (int)sizeof(v4));
	ck_assert_str_eq(req.host, "127.0.0.1");
	ck_assert_uint_eq(req.port, 8080);
	ck_assert(req.is_addr);
	ck_assert_int_eq(net_socks_request(v6, sizeof(v6), &req), (int)sizeof(v6));
	ck_assert_str_eq(req.host, "::1");
	ck_assert_int_eq(net_socks_request(bind, sizeof(bind), &req), -SOCKS_CMD);
	ck_assert_int_eq(net_socks_request(atyp, sizeof(atyp), &req), -SOCKS_ATYP);

	/* A reply as RFC 1928 has it: version, code, reserved, then a bound
	 * address clients parse (type 1, IPv4 0.0.0.0, port 0). */
	uint8_t reply[10];
	static const uint8_t want[10] = { 5, SOCKS_RULESET, 0, 1, 0, 0, 0, 0, 0, 0 };
	ck_assert_uint_eq(net_socks_reply(SOCKS_RULESET, reply), sizeof(reply));
	ck_assert_mem_eq(reply, want, sizeof(want));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("policy");
	tcase_add_test(tc, decide_by_pattern_and_port);
	tcase_add_test(tc, unknown_ask_and_merge);
	tcase_add_test(tc, classify_addresses);
	tcase_add_test(tc, canonical_hosts);
	tcase_add_test(tc, private_addresses_refused_unless_allowed);
	tcase_add_test(tc, strict_parse_errors);
	tcase_add_test(tc, policy_through_the_binder);
	tcase_add_test(tc, http_heads);
	tcase_add_test(tc, http_body_end);
	tcase_add_test(tc, socks_messages);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
