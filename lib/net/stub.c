/* SPDX-License-Identifier: MIT */
/* Placeholders of the network engine until each part lands. */
#include <errno.h>
#include <stdlib.h>

#include "lib/net/net.h"

int net_policy_parse(const struct json *v, const char *path, struct net_policy **ret,
		     struct net_policy_errors *errs)
{ (void)v; (void)path; (void)errs; *ret = NULL; return -ENOSYS; }
struct net_policy *net_policy_new(void) { return NULL; }
int net_policy_merge(const struct net_policy *base, const struct net_policy *extra, struct net_policy **ret)
{ (void)base; (void)extra; *ret = NULL; return -ENOSYS; }
struct net_policy *net_policy_ref(struct net_policy *p) { return p; }
struct net_policy *net_policy_unref(struct net_policy *p) { (void)p; return NULL; }
enum net_decision net_policy_decide(const struct net_policy *p, const char *host, uint16_t port, char rule[NET_RULE_MAX])
{ (void)p; (void)host; (void)port; rule[0] = 0; return NET_DENY; }
bool net_policy_address_ok(const struct net_policy *p, const struct net_addr *a, char rule[NET_RULE_MAX])
{ (void)p; (void)a; rule[0] = 0; return false; }
const struct net_addr *net_policy_host(const struct net_policy *p, const char *name) { (void)p; (void)name; return NULL; }
bool net_policy_asks(const struct net_policy *p) { (void)p; return false; }
int net_resolver_new(struct tc_loop *loop, uint32_t timeout_ms, struct net_resolver **ret)
{ (void)loop; (void)timeout_ms; *ret = NULL; return -ENOSYS; }
struct net_resolver *net_resolver_free(struct net_resolver *r) { (void)r; return NULL; }
struct net_lookup *net_resolve(struct net_resolver *r, const char *name, net_resolve_cb cb, void *arg)
{ (void)r; (void)name; (void)cb; (void)arg; return NULL; }
void net_lookup_cancel(struct net_lookup *l) { (void)l; }
void net_limits_default(struct net_limits *l) { *l = (struct net_limits){ .max_connections = 64 }; }
void net_ask_answer(struct net_ask *ask, bool allow, const char *rule) { (void)ask; (void)allow; (void)rule; }
int net_proxy_new(const struct net_proxy_config *cfg, struct net_proxy **ret) { (void)cfg; *ret = NULL; return -ENOSYS; }
struct net_proxy *net_proxy_free(struct net_proxy *p) { (void)p; return NULL; }
void net_proxy_stats(const struct net_proxy *p, struct net_proxy_stats *ret) { (void)p; *ret = (struct net_proxy_stats){ 0 }; }
size_t net_proxy_refused(const struct net_proxy *p, const struct net_refusal **ret, size_t *ret_more)
{ (void)p; *ret = NULL; if (ret_more) *ret_more = 0; return 0; }
void net_refusal_text(const char *host, uint16_t port, const char *rule, char *out, size_t size)
{ (void)host; (void)port; (void)rule; if (size) out[0] = 0; }
int net_addr_parse(const char *s, struct net_addr *ret) { (void)s; (void)ret; return -ENOSYS; }
const char *net_addr_format(const struct net_addr *a, char out[NET_ADDR_STRLEN]) { (void)a; out[0] = 0; return out; }
enum net_addr_class net_addr_classify(const struct net_addr *a) { (void)a; return NET_ADDR_RESERVED; }
const char *net_addr_class_name(enum net_addr_class c) { (void)c; return "?"; }
const char *net_decision_name(enum net_decision d) { (void)d; return "?"; }
const char *net_proto_name(enum net_proto p) { (void)p; return "?"; }
