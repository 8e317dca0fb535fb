/* SPDX-License-Identifier: MIT */
/*
 * The egress policy: host patterns with optional ports in "allow" and
 * "deny", what happens to the rest ("unknown"), the private address blocks
 * a call may still reach ("allow_private") and fixed name mappings
 * ("hosts"). Parsed strictly, every mistake reported with its JSON path;
 * immutable once built and shared by reference.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bind/bind.h"
#include "lib/net/net_internal.h"
#include "proto/base/util.h"
#include "proto/json.h"

/* Entries per list: a policy is written by hand, not generated. */
#define NET_POLICY_MAX_ENTRIES 4096

struct net_pattern {
	char *text;		/* as normalized, for the rule: "*.github.com:443" */
	char host[NET_HOST_MAX + 1];	/* without "*." */
	bool wildcard;
	bool is_ip;
	struct net_addr ip;
	uint16_t port;		/* 0: any */
};

struct net_private {
	struct net_cidr cidr;
};

struct net_hostmap {
	char name[NET_HOST_MAX + 1];
	struct net_addr a;
};

struct net_policy {
	unsigned refs;
	struct net_pattern *allow, *deny;
	size_t n_allow, n_deny;
	struct net_cidr *priv;
	size_t n_priv;
	struct net_hostmap *hosts;
	size_t n_hosts;
	int unknown;		/* -1 unset (deny), NET_DENY, NET_ASK */
};

const char *net_decision_name(enum net_decision d)
{
	switch (d) {
	case NET_DENY: return "deny";
	case NET_ALLOW: return "allow";
	case NET_ASK: return "ask";
	}
	return "?";
}

struct net_policy *net_policy_new(void)
{
	struct net_policy *p = calloc(1, sizeof(*p));

	if (p) {
		p->refs = 1;
		p->unknown = -1;
	}
	return p;
}

struct net_policy *net_policy_ref(struct net_policy *p)
{
	if (p)
		p->refs++;
	return p;
}

static void patterns_free(struct net_pattern *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(v);
}

struct net_policy *net_policy_unref(struct net_policy *p)
{
	if (!p || --p->refs > 0)
		return NULL;
	patterns_free(p->allow, p->n_allow);
	patterns_free(p->deny, p->n_deny);
	free(p->priv);
	free(p->hosts);
	free(p);
	return NULL;
}

/* Parses one pattern: "host", "host:port", "*.domain[:port]", "1.2.3.4[:port]",
 * "[v6]:port", "v6". Returns 0 or -EINVAL with why in msg. */
static int pattern_parse(const char *s, size_t len, struct net_pattern *ret, char *msg, size_t msg_size)
{
	struct net_pattern p = { 0 };
	const char *host = s, *port = NULL;
	size_t host_len = len;

	if (len > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close) {
			snprintf(msg, msg_size, "'[' without ']'");
			return -EINVAL;
		}
		host = s + 1;
		host_len = (size_t)(close - host);
		if (close + 1 < s + len) {
			if (close[1] != ':') {
				snprintf(msg, msg_size, "after ']' only ':PORT' may follow");
				return -EINVAL;
			}
			port = close + 2;
		}
		char tmp[NET_ADDR_STRLEN];
		if (host_len >= sizeof(tmp) || !memchr(host, ':', host_len)) {
			snprintf(msg, msg_size, "brackets hold an IPv6 address");
			return -EINVAL;
		}
		memcpy(tmp, host, host_len);
		tmp[host_len] = '\0';
		if (net_addr_parse(tmp, &p.ip) < 0) {
			snprintf(msg, msg_size, "'%s' is not an IPv6 address", tmp);
			return -EINVAL;
		}
	} else {
		const char *colon = memchr(s, ':', len);
		if (colon && memchr(colon + 1, ':', (size_t)(s + len - colon - 1))) {
			/* A bare IPv6 address: no port. */
			port = NULL;
		} else if (colon) {
			host_len = (size_t)(colon - s);
			port = colon + 1;
		}
	}
	if (port) {
		size_t n = (size_t)(s + len - port);
		unsigned v = 0;
		if (n == 0 || n > 5) {
			snprintf(msg, msg_size, "the port must be 1 to 65535");
			return -EINVAL;
		}
		for (size_t i = 0; i < n; i++) {
			if (port[i] < '0' || port[i] > '9') {
				snprintf(msg, msg_size, "the port must be 1 to 65535");
				return -EINVAL;
			}
			v = v * 10 + (unsigned)(port[i] - '0');
		}
		if (v == 0 || v > 65535) {
			snprintf(msg, msg_size, "the port must be 1 to 65535");
			return -EINVAL;
		}
		p.port = (uint16_t)v;
	}
	if (host_len >= 2 && host[0] == '*' && host[1] == '.') {
		p.wildcard = true;
		host += 2;
		host_len -= 2;
	}
	if (memchr(host, '*', host_len)) {
		snprintf(msg, msg_size, "'*' stands only at the start, as '*.domain'");
		return -EINVAL;
	}
	if (net_host_normalize(host, host_len, p.host) < 0) {
		snprintf(msg, msg_size, "'%.*s' is not a host name or IP address", (int)MIN(host_len, 80), host);
		return -EINVAL;
	}
	if (net_addr_parse(p.host, &p.ip) == 0) {
		if (p.wildcard) {
			snprintf(msg, msg_size, "'*.' cannot precede an IP address");
			return -EINVAL;
		}
		p.is_ip = true;
	}
	/* The rule's text: normalized, IPv6 with brackets when a port follows. */
	char text[NET_HOST_MAX + 16];
	snprintf(text, sizeof(text), "%s%s%s%s", p.wildcard ? "*." : "",
		 p.is_ip && p.ip.family == AF_INET6 && p.port ? "[" : "", p.host,
		 p.is_ip && p.ip.family == AF_INET6 && p.port ? "]" : "");
	if (p.port)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), ":%u", p.port);
	p.text = strdup(text);
	if (!p.text)
		return -ENOMEM;
	*ret = p;
	return 0;
}

/* The parse's state: where errors go. */
/* The parse's state: where errors go (a list of our own, or the binder). */
struct pstate {
	const char *path;
	struct net_policy_errors *errs;
	struct bind *bind;
	bool tool;		/* a tool's or provider's file: adds hosts, widens nothing else */
	int r;
};

static void PRINTF(4, 5) perr(struct pstate *st, const struct json *v, const char *sub, const char *fmt, ...)
{
	char path[128], msg[192];
	va_list ap;

	if (st->r == 0)
		st->r = -EINVAL;
	snprintf(path, sizeof(path), "%s%s%s", st->path, *st->path && sub[0] && sub[0] != '[' ? "." : "", sub);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (st->bind) {
		bind_fail(st->bind, v ? v->off : 0, path[0] ? path : NULL, "%s", msg);
		return;
	}
	if (!st->errs)
		return;
	if (st->errs->n < NET_POLICY_MAX_ERRORS) {
		struct net_policy_error *e = &st->errs->e[st->errs->n];
		e->off = v ? v->off : 0;
		memcpy(e->path, path, sizeof(e->path));
		memcpy(e->msg, msg, sizeof(e->msg));
	}
	st->errs->n++;
}

static int patterns_parse(struct pstate *st, const char *key, const struct json *v,
			  struct net_pattern **ret, size_t *ret_n)
{
	char sub[64], msg[160];

	if (v->type != JSON_ARRAY) {
		perr(st, v, key, "must be an array of host patterns, not %s", json_kind_name(v));
		return 0;
	}
	if (v->u.arr.n > NET_POLICY_MAX_ENTRIES) {
		perr(st, v, key, "at most %d patterns", NET_POLICY_MAX_ENTRIES);
		return 0;
	}
	struct net_pattern *out = calloc(v->u.arr.n + 1, sizeof(*out));
	if (!out)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *item = v->u.arr.items[i];
		snprintf(sub, sizeof(sub), "%s[%zu]", key, i);
		if (item->type != JSON_STRING) {
			perr(st, item, sub, "must be a string (a host pattern), not %s", json_kind_name(item));
			continue;
		}
		int r = pattern_parse(item->u.str.s, item->u.str.len, &out[n], msg, sizeof(msg));
		if (r == -ENOMEM) {
			patterns_free(out, n);
			return r;
		}
		if (r < 0 || strlen(item->u.str.s) != item->u.str.len) {
			perr(st, item, sub, "%s", r < 0 ? msg : "holds a NUL byte");
			if (r == 0)
				free(out[n].text);
			continue;
		}
		n++;
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

static int privs_parse(struct pstate *st, const struct json *v, struct net_policy *p)
{
	char sub[64];

	if (v->type != JSON_ARRAY || v->u.arr.n > NET_POLICY_MAX_ENTRIES) {
		perr(st, v, "allow_private", "must be an array of CIDR blocks (\"10.0.0.0/8\")");
		return 0;
	}
	p->priv = calloc(v->u.arr.n + 1, sizeof(*p->priv));
	if (!p->priv)
		return -ENOMEM;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *item = v->u.arr.items[i];
		snprintf(sub, sizeof(sub), "allow_private[%zu]", i);
		if (item->type != JSON_STRING || strlen(item->u.str.s) != item->u.str.len ||
		    net_cidr_parse(item->u.str.s, &p->priv[p->n_priv]) < 0) {
			perr(st, item, sub, "must be a CIDR block such as \"10.0.0.0/8\" or \"fd00::/8\"");
			continue;
		}
		p->n_priv++;
	}
	return 0;
}

static int hosts_parse(struct pstate *st, const struct json *v, struct net_policy *p)
{
	char sub[NET_HOST_MAX + 16];

	if (v->type != JSON_OBJECT || v->u.obj.n > NET_POLICY_MAX_ENTRIES) {
		perr(st, v, "hosts", "must be an object mapping names to IP addresses");
		return 0;
	}
	p->hosts = calloc(v->u.obj.n + 1, sizeof(*p->hosts));
	if (!p->hosts)
		return -ENOMEM;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		struct net_hostmap *h = &p->hosts[p->n_hosts];
		snprintf(sub, sizeof(sub), "hosts.%.*s", (int)MIN(m->key_len, 80), m->key);
		if (m->key_len != strlen(m->key) || net_host_normalize(m->key, m->key_len, h->name) < 0) {
			perr(st, m->value, sub, "the name is not a host name");
			continue;
		}
		if (m->value->type != JSON_STRING || net_addr_parse(m->value->u.str.s, &h->a) < 0) {
			perr(st, m->value, sub, "must be an IP address (\"127.0.0.1\", \"::1\")");
			continue;
		}
		p->n_hosts++;
	}
	return 0;
}

static int policy_parse(struct pstate *pst, const struct json *v, struct net_policy **ret);

int net_policy_parse(const struct json *v, const char *path, struct net_policy **ret,
		     struct net_policy_errors *errs)
{
	struct pstate st = { .path = path ? path : "", .errs = errs };

	if (errs)
		errs->n = 0;
	return policy_parse(&st, v, ret);
}

int net_policy_bind(struct bind *b, const char *path, const struct json *v, struct net_policy **ret)
{
	struct pstate st = { .path = path ? path : "", .bind = b };

	return policy_parse(&st, v, ret);
}

int net_policy_bind_tool(struct bind *b, const char *path, const struct json *v, struct net_policy **ret)
{
	struct pstate st = { .path = path ? path : "", .bind = b, .tool = true };

	return policy_parse(&st, v, ret);
}

/* Refuses in a tool's file a key that only the daemon's config may set. */
static void perr_config_only(struct pstate *st, const struct json *v, const char *key)
{
	perr(st, v, key, "may be set in the daemon's config alone: a tool or provider file adds hosts "
	     "(\"allow\") and narrows (\"deny\", \"unknown\": \"deny\"), and widens nothing else");
}

/* Checks v as a policy; errors go where st says. */
static int policy_parse(struct pstate *pst, const struct json *v, struct net_policy **ret)
{
	struct pstate st = *pst;
	struct net_policy *p;
	int r = 0;

	if (!v || v->type != JSON_OBJECT) {
		perr(&st, v, "", "must be an object with \"allow\", \"deny\", \"unknown\", \"allow_private\", \"hosts\"");
		return st.r;
	}
	p = net_policy_new();
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < v->u.obj.n && r >= 0; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		/* A key with a NUL inside ("allow\u0000x") is no known key. */
		const char *k = m->key_len == strlen(m->key) ? m->key : "";
		if (strcmp(k, "allow") == 0 && !p->allow)
			r = patterns_parse(&st, "allow", m->value, &p->allow, &p->n_allow);
		else if (strcmp(k, "deny") == 0 && !p->deny)
			r = patterns_parse(&st, "deny", m->value, &p->deny, &p->n_deny);
		else if ((strcmp(k, "allow_private") == 0 || strcmp(k, "hosts") == 0) && st.tool)
			perr_config_only(&st, m->value, k);
		else if (strcmp(k, "allow_private") == 0 && !p->priv)
			r = privs_parse(&st, m->value, p);
		else if (strcmp(k, "hosts") == 0 && !p->hosts)
			r = hosts_parse(&st, m->value, p);
		else if (strcmp(k, "unknown") == 0) {
			const char *s = json_str(m->value);
			if (s && strcmp(s, "deny") == 0)
				p->unknown = NET_DENY;
			else if (s && strcmp(s, "ask") == 0 && st.tool)
				perr_config_only(&st, m->value, "unknown");
			else if (s && strcmp(s, "ask") == 0)
				p->unknown = NET_ASK;
			else
				perr(&st, m->value, "unknown", "must be \"deny\" or \"ask\"");
		} else {
			/* The key as written, made printable: it ends up on a terminal. */
			char sub[64];
			size_t n = MIN(m->key_len, sizeof(sub) - 1);
			for (size_t j = 0; j < n; j++)
				sub[j] = m->key[j] > 0x20 && m->key[j] < 0x7f ? m->key[j] : '?';
			sub[n] = '\0';
			perr(&st, m->value, sub, "unknown key (known: allow, deny, unknown, allow_private, hosts)");
		}
	}
	if (r < 0 || st.r < 0) {
		net_policy_unref(p);
		return r < 0 ? r : st.r;
	}
	*ret = p;
	return 0;
}

/* Appends copies of n patterns to *v. */
static int patterns_append(struct net_pattern **v, size_t *n, const struct net_pattern *src, size_t m)
{
	if (!m)
		return 0;
	struct net_pattern *nv = realloc(*v, (*n + m) * sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	for (size_t i = 0; i < m; i++) {
		nv[*n] = src[i];
		nv[*n].text = strdup(src[i].text);
		if (!nv[*n].text)
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

int net_policy_merge(const struct net_policy *base, const struct net_policy *extra,
		     struct net_policy **ret)
{
	const struct net_policy *both[2] = { base, extra };
	struct net_policy *p = net_policy_new();

	if (!p)
		return -ENOMEM;
	for (int k = 0; k < 2; k++) {
		const struct net_policy *s = both[k];
		if (!s)
			continue;
		if (patterns_append(&p->allow, &p->n_allow, s->allow, s->n_allow) < 0 ||
		    patterns_append(&p->deny, &p->n_deny, s->deny, s->n_deny) < 0)
			goto nomem;
		if (s->n_priv) {
			struct net_cidr *nv = realloc(p->priv, (p->n_priv + s->n_priv) * sizeof(*nv));
			if (!nv)
				goto nomem;
			memcpy(nv + p->n_priv, s->priv, s->n_priv * sizeof(*nv));
			p->priv = nv;
			p->n_priv += s->n_priv;
		}
		for (size_t i = 0; i < s->n_hosts; i++) {
			size_t j;
			for (j = 0; j < p->n_hosts && strcmp(p->hosts[j].name, s->hosts[i].name) != 0; j++)
				;
			if (j == p->n_hosts) {
				struct net_hostmap *nv = realloc(p->hosts, (p->n_hosts + 1) * sizeof(*nv));
				if (!nv)
					goto nomem;
				p->hosts = nv;
				p->n_hosts++;
			}
			p->hosts[j] = s->hosts[i];
		}
		if (s->unknown >= 0)
			p->unknown = s->unknown;
	}
	*ret = p;
	return 0;
nomem:
	net_policy_unref(p);
	return -ENOMEM;
}

/* Whether pattern p matches the normalized host (and its parsed address,
 * when it is an IP literal) on port. */
static bool pattern_match(const struct net_pattern *p, const char *host, const struct net_addr *ip,
			  uint16_t port)
{
	if (p->port && p->port != port)
		return false;
	if (p->is_ip)
		return ip && ip->family == p->ip.family &&
		       memcmp(ip->family == AF_INET ? (const void *)&ip->v4 : (const void *)&ip->v6,
			      p->ip.family == AF_INET ? (const void *)&p->ip.v4 : (const void *)&p->ip.v6,
			      ip->family == AF_INET ? 4 : 16) == 0;
	if (ip)
		return false;
	if (!p->wildcard)
		return strcmp(p->host, host) == 0;
	size_t hl = strlen(host), pl = strlen(p->host);
	return hl > pl + 1 && host[hl - pl - 1] == '.' && strcmp(host + hl - pl, p->host) == 0;
}

static const struct net_pattern *patterns_find(const struct net_pattern *v, size_t n, const char *host,
					       const struct net_addr *ip, uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (pattern_match(&v[i], host, ip, port))
			return &v[i];
	return NULL;
}

enum net_decision net_policy_decide(const struct net_policy *p, const char *host, uint16_t port,
				    char rule[NET_RULE_MAX])
{
	char norm[NET_HOST_MAX + 1];
	struct net_addr ip;
	const struct net_pattern *m;
	bool is_ip;

	if (!host || net_host_normalize(host, strlen(host), norm) < 0) {
		snprintf(rule, NET_RULE_MAX, "invalid-host");
		return NET_DENY;
	}
	is_ip = net_addr_parse(norm, &ip) == 0;
	if (p && (m = patterns_find(p->deny, p->n_deny, norm, is_ip ? &ip : NULL, port))) {
		snprintf(rule, NET_RULE_MAX, "deny:%s", m->text);
		return NET_DENY;
	}
	if (p && (m = patterns_find(p->allow, p->n_allow, norm, is_ip ? &ip : NULL, port))) {
		snprintf(rule, NET_RULE_MAX, "allow:%s", m->text);
		return NET_ALLOW;
	}
	if (p && p->unknown == NET_ASK) {
		snprintf(rule, NET_RULE_MAX, "unknown:ask");
		return NET_ASK;
	}
	snprintf(rule, NET_RULE_MAX, "unknown:deny");
	return NET_DENY;
}

bool net_policy_address_ok(const struct net_policy *p, const struct net_addr *a, char rule[NET_RULE_MAX])
{
	char text[NET_ADDR_STRLEN];

	if (net_addr_classify(a) == NET_ADDR_PUBLIC)
		return true;
	for (size_t i = 0; p && i < p->n_priv; i++)
		if (net_cidr_contains(&p->priv[i], a))
			return true;
	snprintf(rule, NET_RULE_MAX, "private:%s", net_addr_format(a, text));
	return false;
}

const struct net_addr *net_policy_host(const struct net_policy *p, const char *name)
{
	char norm[NET_HOST_MAX + 1];

	if (!p || !name || net_host_normalize(name, strlen(name), norm) < 0)
		return NULL;
	for (size_t i = 0; i < p->n_hosts; i++)
		if (strcmp(p->hosts[i].name, norm) == 0)
			return &p->hosts[i].a;
	return NULL;
}

bool net_policy_asks(const struct net_policy *p)
{
	return p && p->unknown == NET_ASK;
}
