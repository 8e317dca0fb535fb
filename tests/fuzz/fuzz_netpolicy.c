/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the network policy (lib/net/policy.c, addr.c):
 * the input is a policy in JSON, a NUL byte, then a host, a NUL byte and
 * an address. Whatever the bytes: a policy parses or every error has a
 * path and a message; a parsed policy decides any host with a rule that
 * starts with its kind, deny patterns win (a merge of the policy with
 * itself decides the same), and an address is either public or refused
 * with "private:" unless allow_private holds it.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/net/net_internal.h"
#include "proto/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(text, '\0', size);
	size_t tn = nul ? (size_t)(nul - text) : size;
	char host[300] = "", addr[64] = "";
	struct json_doc *doc = NULL;
	struct json_err jerr;
	struct net_policy_errors errs;
	struct net_policy *p = NULL, *m = NULL;
	char rule[NET_RULE_MAX], rule2[NET_RULE_MAX];

	if (nul) {
		const char *h = nul + 1, *end = text + size;
		const char *nul2 = memchr(h, '\0', (size_t)(end - h));
		size_t hn = (size_t)((nul2 ? nul2 : end) - h);
		memcpy(host, h, hn < sizeof(host) - 1 ? hn : sizeof(host) - 1);
		if (nul2) {
			size_t an = (size_t)(end - nul2 - 1);
			memcpy(addr, nul2 + 1, an < sizeof(addr) - 1 ? an : sizeof(addr) - 1);
		}
	}
	if (json_parse(text, tn, 0, 16, &doc, &jerr) < 0)
		return 0;
	int r = net_policy_parse(json_doc_root(doc), "network", &p, &errs);
	if (r < 0) {
		if (errs.n == 0 || !errs.e[0].msg[0])
			abort();
		json_doc_unref(doc);
		return 0;
	}
	uint16_t port = (uint16_t)(size * 7919);
	enum net_decision d = net_policy_decide(p, host, port, rule);
	static const char *const kinds[] = { "deny:", "allow:", "unknown:", "invalid-host" };
	bool known = false;
	for (size_t i = 0; i < 4; i++)
		known |= strncmp(rule, kinds[i], strlen(kinds[i])) == 0;
	if (!known || (d == NET_ASK && strcmp(rule, "unknown:ask") != 0))
		abort();
	if (net_policy_merge(p, p, &m) < 0)
		abort();
	if (net_policy_decide(m, host, port, rule2) != d || strcmp(rule, rule2) != 0)
		abort();
	struct net_addr a;
	if (net_addr_parse(addr, &a) == 0) {
		bool ok = net_policy_address_ok(p, &a, rule);
		if (!ok && strncmp(rule, "private:", 8) != 0)
			abort();
		if (net_addr_classify(&a) == NET_ADDR_PUBLIC && !ok)
			abort();
	}
	net_policy_host(p, host);
	net_policy_unref(m);
	net_policy_unref(p);
	json_doc_unref(doc);
	return 0;
}
