/* SPDX-License-Identifier: MIT */
/*
 * Network through the daemon: the egress policy of sandboxed calls (host
 * patterns with ports, deny over allow, unknown hosts denied or asked,
 * private addresses refused after resolution), an asynchronous resolver on
 * the daemon's loop (c-ares), and the proxy engine that serves an HTTP
 * proxy (absolute-form requests and CONNECT) and a SOCKS5 proxy (CONNECT)
 * on listening sockets the daemon hands it, every connection reported once.
 *
 * Everything runs on the caller's tc_loop and never blocks; every write
 * is a send(2) with MSG_NOSIGNAL, so a peer that closed raises no SIGPIPE.
 * The daemon owns namespaces, listeners, confirmations, audit, events and
 * metrics; this module only asks (ops.ask) and reports
 * (ops.connection_done).
 */
#ifndef TC_NET_H
#define TC_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct bind;
struct json;
struct tc_loop;

/* --- addresses ------------------------------------------------------------ */

/* One IPv4 or IPv6 address. */
struct net_addr {
	sa_family_t family;	/* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	};
};

/* Longest text net_addr_format writes, NUL included ("[...]" not added). */
#define NET_ADDR_STRLEN INET6_ADDRSTRLEN

/* Parses an IP literal ("10.0.0.1", "::1"; no brackets, no port).
 * Returns 0, or -EINVAL when s is not one. */
int net_addr_parse(const char *s, struct net_addr *ret);
/* Writes the address's usual text into out (NET_ADDR_STRLEN bytes). */
const char *net_addr_format(const struct net_addr *a, char out[NET_ADDR_STRLEN]);

/* What an address is, for the private-address refusal. IPv4-mapped
 * (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and
 * 6to4 (2002::/16) forms are classified by the IPv4 address they carry. */
enum net_addr_class {
	NET_ADDR_PUBLIC,
	NET_ADDR_LOOPBACK,	/* 127/8, ::1 */
	NET_ADDR_PRIVATE,	/* 10/8, 172.16/12, 192.168/16, fc00::/7 */
	NET_ADDR_CGNAT,		/* 100.64/10 */
	NET_ADDR_LINK_LOCAL,	/* 169.254/16 (cloud metadata), fe80::/10 */
	NET_ADDR_MULTICAST,	/* 224/4, ff00::/8 */
	NET_ADDR_UNSPECIFIED,	/* 0/8, :: */
	NET_ADDR_BROADCAST,	/* 255.255.255.255 */
	NET_ADDR_RESERVED,	/* 240/4, other special-purpose blocks */
};

enum net_addr_class net_addr_classify(const struct net_addr *a);
/* "public", "loopback", "private", "cgnat", "link-local", ... */
const char *net_addr_class_name(enum net_addr_class c);

/* --- policy --------------------------------------------------------------- */

enum net_decision {
	NET_DENY = 0,
	NET_ALLOW = 1,
	NET_ASK = 2,	/* only from net_policy_decide: unknown is "ask" */
};

/* "deny", "allow", "ask". */
const char *net_decision_name(enum net_decision d);

/* A parsed policy: immutable once built, shared by reference (the daemon's
 * configuration and every proxy made from it). */
struct net_policy;

/* Errors of one parse, each with the JSON path of the value at fault
 * ("network.allow[2]") and its byte offset in the source text (json.off),
 * for the caller's FILE:LINE:COL. Every error is counted in n; the first
 * NET_POLICY_MAX_ERRORS are kept. */
#define NET_POLICY_MAX_ERRORS 16
struct net_policy_error {
	size_t off;
	char path[128];
	char msg[192];
};
struct net_policy_errors {
	struct net_policy_error e[NET_POLICY_MAX_ERRORS];
	unsigned n;
};

/*
 * Parses a policy object strictly: keys "allow", "deny" (arrays of host
 * patterns: "host", "host:port", "*.domain" (subdomains only, any depth),
 * "*.domain:port", IPv4 literals, "[v6]:port" or a bare v6 literal),
 * "unknown" ("deny" or "ask"), "allow_private" (array of CIDRs, "10.0.0.0/8",
 * "fd00::/8"; a bare address is a /32 or /128), "hosts" (object: name ->
 * IP literal, used instead of DNS). Unknown keys and wrong types are
 * errors. path names v for messages ("network"; NULL: ""). Returns 0 and a
 * new policy (reference count 1), or -EINVAL with errs filled (when errs
 * is not NULL); -ENOMEM.
 */
int net_policy_parse(const struct json *v, const char *path, struct net_policy **ret,
		     struct net_policy_errors *errs);
/*
 * The same check for a file read with the strict binder (lib/bind, as a
 * B_CUSTOM field's parser would call it): every mistake is recorded in b
 * at its place ("FILE:LINE:COL: network.allow[2]: ..."). Returns 0 and a
 * new policy, or -EINVAL; -ENOMEM.
 */
int net_policy_bind(struct bind *b, const char *path, const struct json *v, struct net_policy **ret);
/*
 * The same for a tool's or provider's file, which may add hosts but not
 * widen the config's policy otherwise: "allow" and "deny" as above,
 * "unknown" only "deny"; "allow_private", "hosts" and "unknown": "ask"
 * are errors naming the key (the daemon's config alone sets them).
 */
int net_policy_bind_tool(struct bind *b, const char *path, const struct json *v, struct net_policy **ret);
/* An empty policy: everything unknown and denied, no private addresses. */
struct net_policy *net_policy_new(void);
/*
 * A new policy from base with extra on top: allow, deny, allow_private and
 * hosts are unions (a hosts entry of extra replaces base's for the same
 * name), unknown is extra's when extra sets it, else base's. Either may be
 * NULL. This is how a tool's or provider's "network": {"allow": [...]}
 * adds hosts to the configured policy. Returns 0 or -ENOMEM.
 */
int net_policy_merge(const struct net_policy *base, const struct net_policy *extra,
		     struct net_policy **ret);
struct net_policy *net_policy_ref(struct net_policy *p);
/* Drops one reference; frees at zero. Accepts NULL; returns NULL. */
struct net_policy *net_policy_unref(struct net_policy *p);

/* Longest rule text (pattern plus its "allow:" kind, NUL included). */
#define NET_RULE_MAX 320

/*
 * Decides on a host (a name, lower-cased here, or an IP literal without
 * brackets) and port by name only: a matching deny pattern wins, then a
 * matching allow pattern, then unknown. Writes the deciding rule into rule
 * ("deny:*.evil.com", "allow:registry.npmjs.org:443", "unknown:deny",
 * "unknown:ask"). Never returns NET_ASK when unknown is "deny".
 */
enum net_decision net_policy_decide(const struct net_policy *p, const char *host, uint16_t port,
				    char rule[NET_RULE_MAX]);
/*
 * Whether a resolved address may be connected to: public addresses may;
 * any other class only when an allow_private CIDR contains it. On refusal
 * writes "private:ADDRESS" (whatever the class) into rule and returns false.
 */
bool net_policy_address_ok(const struct net_policy *p, const struct net_addr *a,
			   char rule[NET_RULE_MAX]);
/* Longest host name a client may give (DNS: 253; IPv6 literal text: 45). */
#define NET_HOST_MAX 253

/* Whether host is written as the proxy hands hosts on: a host name
 * lower-cased, without a trailing dot, of at most NET_HOST_MAX bytes, or
 * an IP literal (without brackets). */
bool net_host_canonical(const char *host);

/* The fixed address of name from "hosts", or NULL. */
const struct net_addr *net_policy_host(const struct net_policy *p, const char *name);
/* Whether unknown hosts are asked about (the daemon may decline to ask
 * when nobody could answer). */
bool net_policy_asks(const struct net_policy *p);

/* --- resolver ------------------------------------------------------------- */

/* Asynchronous name resolution with c-ares, its sockets watched by the
 * loop. One per daemon is enough; each proxy may also own its own. */
struct net_resolver;

/* Makes a resolver (reads the system's resolver configuration once).
 * timeout_ms bounds each lookup (0: 5000). Returns 0 or a negative errno. */
int net_resolver_new(struct tc_loop *loop, uint32_t timeout_ms, struct net_resolver **ret);
/* Cancels every lookup (their callbacks run with -ECANCELED) and frees.
 * Accepts NULL; returns NULL. */
struct net_resolver *net_resolver_free(struct net_resolver *r);

/* Called once per lookup: 0 and the addresses found (IPv4 first, at most
 * NET_RESOLVE_MAX), or -ENOENT (no such name), -ETIMEDOUT, -ECANCELED,
 * -EIO. The array is valid during the call only. */
#define NET_RESOLVE_MAX 8
typedef void (*net_resolve_cb)(void *arg, int r, const struct net_addr *addrs, size_t n);
struct net_lookup;
/* Starts resolving name. The callback never runs from within this call.
 * Returns a handle for net_lookup_cancel, or NULL on -ENOMEM. */
struct net_lookup *net_resolve(struct net_resolver *r, const char *name, net_resolve_cb cb, void *arg);
/* Drops a pending lookup: its callback will not run. Accepts NULL. */
void net_lookup_cancel(struct net_lookup *l);

/* --- the proxy ------------------------------------------------------------ */

/* Bounds of one proxy (one call). net_limits_default fills the defaults;
 * a field left 0 in net_proxy_config takes its default too (max_bytes 0:
 * no budget). */
struct net_limits {
	unsigned max_connections;	/* concurrent connections (64); over it: 503 / SOCKS 0x01 */
	uint32_t header_bytes;		/* request line and headers, SOCKS greeting (16384) */
	uint32_t header_timeout_ms;	/* to send a full request or greeting (10000) */
	uint32_t connect_timeout_ms;	/* to connect upstream (10000); then 504 / SOCKS 0x04 */
	uint32_t idle_timeout_ms;	/* a connection moving no byte either way (300000) */
	uint32_t ask_timeout_ms;	/* a held connection waiting for ops.ask (120000); then denied */
	uint64_t max_bytes;		/* bytes up plus down over all connections; 0: no budget */
};
void net_limits_default(struct net_limits *l);

/* What one connection did, reported once through ops.connection_done. */
enum net_proto {
	NET_PROTO_HTTP,		/* absolute-form request forwarded */
	NET_PROTO_CONNECT,	/* HTTP CONNECT tunnel */
	NET_PROTO_SOCKS5,	/* SOCKS5 CONNECT tunnel */
};
/* "http", "connect", "socks5". */
const char *net_proto_name(enum net_proto p);

struct net_conn_record {
	enum net_proto proto;
	const char *host;	/* as the client named it; "" when it never said */
	uint16_t port;
	const char *address;	/* the address connected to (or refused); "" if none */
	enum net_decision decision;	/* NET_ALLOW or NET_DENY */
	const char *rule;	/* the rule that decided; "" if none (client gave up first) */
	const char *error;	/* NULL, or why it ended badly: "unresolvable",
				 * "connect refused", "unreachable", "timeout", "idle",
				 * "bad request", "client closed" (before its target was
				 * reached), "reset" (a socket error mid-tunnel), "limit",
				 * "budget", "closed" (proxy destroyed) */
	uint64_t bytes_up;	/* payload from the client to the origin */
	uint64_t bytes_down;	/* payload from the origin to the client */
	uint64_t duration_ms;
};

/* A held connection waiting for the daemon's answer. */
struct net_ask;

/* Called from the loop; none of them may free the proxy. */
struct net_proxy_ops {
	/*
	 * Unknown host under unknown: "ask". The daemon answers later with
	 * net_ask_answer (possibly from within this call), or the ask is
	 * withdrawn first through ask_cancel. NULL: unknown hosts are denied.
	 */
	void (*ask)(void *ctx, const char *host, uint16_t port, struct net_ask *ask);
	/* The ask is gone (client left, ask_timeout_ms, proxy destroyed): it
	 * must not be answered after this returns. */
	void (*ask_cancel)(void *ctx, struct net_ask *ask);
	/* Each accepted connection, exactly once, when it ends (also when the
	 * proxy is destroyed). Required. */
	void (*connection_done)(void *ctx, const struct net_conn_record *r);
};

/*
 * Answers an ask: allow connects (address checks still apply), deny
 * refuses with the rule given (NULL: "ask:deny" / "ask:allow"). Frees the
 * ask; the connection resumes from the loop, not from within this call.
 */
void net_ask_answer(struct net_ask *ask, bool allow, const char *rule);

struct net_proxy_config {
	struct tc_loop *loop;
	struct net_policy *policy;	/* referenced by the proxy */
	struct net_resolver *resolver;	/* NULL: the proxy makes its own */
	struct net_limits limits;
	int http_fd;			/* listening, owned by the proxy after success; -1: none */
	int socks_fd;			/* the same for SOCKS5 */
	/* The listeners stay the caller's (already non-blocking, open until
	 * the proxy is freed, which leaves them open): a pool that serves
	 * them again to the next proxy. */
	bool borrowed;
	const struct net_proxy_ops *ops;
	void *ctx;
};

struct net_proxy;

/* Starts accepting on the listeners (made non-blocking here unless
 * borrowed). Returns 0 or a negative errno (the fds stay the caller's on
 * failure). */
int net_proxy_new(const struct net_proxy_config *cfg, struct net_proxy **ret);
/*
 * Closes the listeners (unless borrowed) and every connection, reporting
 * each open one through connection_done (error "closed") and withdrawing
 * pending asks through ask_cancel, then frees. Accepts NULL; returns NULL.
 */
struct net_proxy *net_proxy_free(struct net_proxy *p);

/* Counters of one proxy. */
struct net_proxy_stats {
	unsigned active;		/* connections open now */
	uint64_t accepted;
	uint64_t allowed;
	uint64_t denied;
	uint64_t bytes_up;
	uint64_t bytes_down;
};
void net_proxy_stats(const struct net_proxy *p, struct net_proxy_stats *ret);

/* A refused destination, for the result's sandbox note: distinct host and
 * port pairs in the order first refused, at most NET_REFUSED_MAX kept
 * (more are counted). */
#define NET_REFUSED_MAX 32
struct net_refusal {
	const char *host;
	uint16_t port;
	const char *rule;
	unsigned count;		/* attempts refused */
};
/* Returns how many refusals are kept and points *ret at them (valid until
 * the proxy is freed; entries only get added); *ret_more gets how many
 * distinct destinations were not kept (may be NULL). */
size_t net_proxy_refused(const struct net_proxy *p, const struct net_refusal **ret, size_t *ret_more);

/*
 * The body of a 403 answer, also usable for the sandbox note:
 * "toolcalld: connection to HOST:PORT refused by rule RULE\n".
 */
void net_refusal_text(const char *host, uint16_t port, const char *rule, char *out, size_t size);

#endif
