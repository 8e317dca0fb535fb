/* SPDX-License-Identifier: MIT */
/*
 * The network "proxy" of sandboxed runs, served by the daemon's loop: see
 * daemon/egress.h. One resolver for the daemon; one proxy per run, made from
 * the policy in force when the run started (a reload changes the next
 * runs', not the ones going on).
 */
#include "daemon/egress.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/egress_internal.h"
#include "daemon/server_state.h"
#include "lib/base/audit.h"
#include "lib/base/openmetrics.h"
#include "lib/events.h"
#include "lib/net/net.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

/* Counters per tool and decision, a bounded number of tools (the rest
 * count as "other"). */
#define COUNTS_MAX 256

struct net_count {
	char *tool;
	uint64_t n[2];			/* by enum net_decision (deny, allow) */
	uint64_t bytes_up, bytes_down;
};

static void served_free(struct net_served *sv);

/* The policy, the resolver and the counters. */
static struct net_service svc_state;

struct net_service *net_service(void)
{
	return &svc_state;
}

static struct net_count *count_of(struct net_service *svc, const char *tool)
{
	if (!tool)
		tool = "";
	for (size_t i = 0; i < svc->n_counts; i++)
		if (strcmp(svc->counts[i].tool, tool) == 0)
			return &svc->counts[i];
	if (svc->n_counts == COUNTS_MAX) {
		tool = "other";
		for (size_t i = 0; i < svc->n_counts; i++)
			if (strcmp(svc->counts[i].tool, tool) == 0)
				return &svc->counts[i];
		/* The last tool's row becomes "other", its counts kept. */
		struct net_count *last = &svc->counts[svc->n_counts - 1];
		free(last->tool);
		last->tool = xstrdup(tool);
		return last;
	}
	svc->counts = xreallocarray(svc->counts, svc->n_counts + 1, sizeof(*svc->counts));
	struct net_count *c = &svc->counts[svc->n_counts++];
	*c = (struct net_count){ .tool = xstrdup(tool) };
	return c;
}

/* The members a connection's audit line and events share. */
static void conn_fields(struct jgen *g, const struct net_served *sv, const struct net_conn_record *r)
{
	jgen_kv_int(g, "uid", (int64_t)sv->uid);
	if (sv->process_id)
		jgen_kv_str(g, "processId", sv->process_id);
	jgen_kv_str(g, "host", r->host);
	jgen_kv_int(g, "port", r->port);
	jgen_kv_str(g, "address", r->address);
	jgen_kv_str(g, "decision", r->decision == NET_ALLOW ? "allow" : "deny");
	jgen_kv_str(g, "rule", r->rule);
	jgen_kv_str(g, "protocol", net_proto_name(r->proto));
	if (r->error)
		jgen_kv_str(g, "error", r->error);
	jgen_kv_int(g, "bytes_up", (int64_t)r->bytes_up);
	jgen_kv_int(g, "bytes_down", (int64_t)r->bytes_down);
	jgen_kv_int(g, "duration_ms", (int64_t)r->duration_ms);
}

struct event_arg {
	const struct net_served *sv;
	const struct net_conn_record *r;
};

static void event_extra(struct jgen *g, void *arg)
{
	struct event_arg *a = arg;
	conn_fields(g, a->sv, a->r);
}

/* The session of a run, for the events' scope: the one it came from, or
 * (an MCP server's, a session gone) one standing for its uid alone. */
const struct session *net_served_session(const struct net_served *sv, struct session *tmp)
{
	struct server *s = sv->svc->server;
	struct session *found = sv->session && s && s->sessions ? session_find(s->sessions, sv->uid, sv->session) : NULL;
	if (found)
		return found;
	*tmp = (struct session){ .id = sv->session ? sv->session : (char *)"", .uid = sv->uid };
	return tmp;
}

/* Every connection, once, when it ends: audit, event, counters. */
static void on_connection_done(void *ctx, const struct net_conn_record *r)
{
	struct net_served *sv = ctx;
	struct net_service *svc = sv->svc;
	struct server *s = svc->server;

	struct net_count *c = count_of(svc, sv->tool);
	c->n[r->decision == NET_ALLOW]++;
	c->bytes_up += r->bytes_up;
	c->bytes_down += r->bytes_down;
	if (r->rule && strcmp(r->rule, "limit:net_connections") == 0)
		sv->over_connections++;
	else if ((r->rule && strcmp(r->rule, "limit:net_mb") == 0) || (r->error && strcmp(r->error, "budget") == 0))
		sv->over_bytes++;

	if (s && s->audit) {
		char tbuf[32];
		format_time(wall_ms(), tbuf);
		_cleanup_(buf_free) struct buf b = {0};
		struct jgen *g = jgen_new(&b);
		jgen_obj_open(g);
		jgen_kv_str(g, "time", tbuf);
		jgen_kv_str(g, "type", "network");
		jgen_kv_str(g, "session", sv->session);
		jgen_kv_str(g, "callId", sv->call_id);
		jgen_kv_str(g, "tool", sv->tool);
		conn_fields(g, sv, r);
		jgen_obj_close(g);
		jgen_free(g);
		audit_record(s->audit, buf_head(&b), buf_size(&b));
	}
	if (s) {
		struct session tmp;
		struct event_arg a = { .sv = sv, .r = r };
		event_emit(&s->bus, r->decision == NET_ALLOW ? "network.connect" : "network.refused",
			   net_served_session(sv, &tmp), sv->call_id, sv->tool, event_extra, &a);
	}
}

static const struct net_proxy_ops proxy_ops = {
	.ask = net_ask_start,
	.ask_cancel = net_ask_cancel,
	.connection_done = on_connection_done,
};

static void served_free(struct net_served *sv)
{
	free(sv->session);
	free(sv->call_id);
	free(sv->process_id);
	free(sv->tool);
	free(sv);
}

/* sandbox ops: serves a run's proxy. */
static void *serve_start(void *arg, const struct sandbox_net_serve *s, char **ret_msg)
{
	struct net_service *svc = arg;
	const struct sandbox_net_who *who = s->who;
	struct net_served *sv = xcalloc(1, sizeof(*sv));
	sv->svc = svc;
	sv->uid = who ? who->uid : geteuid();
	sv->session = who && who->session ? xstrdup(who->session) : NULL;
	sv->call_id = who && who->call_id ? xstrdup(who->call_id) : NULL;
	sv->process_id = who && who->process_id ? xstrdup(who->process_id) : NULL;
	sv->tool = who && who->tool ? xstrdup(who->tool) : NULL;

	struct net_policy *pol = NULL;
	int r = net_policy_merge(svc->policy, s->tool_policy, &pol);
	if (r == 0 && !svc->resolver)
		r = net_resolver_new(svc->loop, 0, &svc->resolver);
	struct net_proxy_config pc = {
		.loop = who && who->loop ? who->loop : svc->loop,
		.policy = pol,
		.resolver = svc->resolver,
		.limits = svc->limits,
		.http_fd = s->http_fd,
		.socks_fd = s->socks_fd,
		.borrowed = true,
		.ops = &proxy_ops,
		.ctx = sv,
	};
	if (!pc.limits.max_connections)
		pc.limits.max_connections = 64;	/* as net_proxy_new takes it */
	sv->max_connections = pc.limits.max_connections;
	sv->max_bytes = pc.limits.max_bytes;
	if (r == 0)
		r = net_proxy_new(&pc, &sv->proxy);
	net_policy_unref(pol);
	if (r < 0) {
		*ret_msg = xasprintf("The call's network proxy could not be started: %s", strerror(-r));
		served_free(sv);
		return NULL;
	}
	svc->served++;
	return sv;
}

static void serve_stop(void *arg, void *served)
{
	struct net_service *svc = arg;
	struct net_served *sv = served;
	/* Every open connection is reported (error "closed") and every ask
	 * withdrawn from within this. */
	sv->proxy = net_proxy_free(sv->proxy);
	svc->served--;
	served_free(sv);
}

static bool limit_rule(const char *rule)
{
	return rule && strncmp(rule, "limit:", 6) == 0;
}

/* The [limit] lines of a run whose proxy's limits turned connections
 * away (or cut them), each naming its limit and value, once per run. */
static void limit_note(const struct net_served *sv, struct buf *b)
{
	if (sv->over_connections)
		buf_printf(b, "%s[limit] The command reached the network connection limit (%u at once, "
			   "limits.net_connections) of its sandbox: %" PRIu64 " connection%s refused (HTTP 503 or "
			   "a SOCKS5 failure) while others were open.",
			   buf_size(b) ? "\n" : "", sv->max_connections, sv->over_connections,
			   sv->over_connections == 1 ? " was" : "s were");
	if (sv->over_bytes)
		buf_printf(b, "%s[limit] The command reached the network byte limit (%" PRIu64 " MB up and down, "
			   "limits.net_mb) of its sandbox: %" PRIu64 " connection%s refused or closed.",
			   buf_size(b) ? "\n" : "", sv->max_bytes >> 20, sv->over_bytes,
			   sv->over_bytes == 1 ? " was" : "s were");
}

/* The note for the result: each host:port the policy refused and its
 * rule, then the limits the proxy's connections ran into. */
static char *serve_note(void *arg, void *served)
{
	(void)arg;
	struct net_served *sv = served;
	const struct net_refusal *ref;
	size_t more = 0;
	size_t n = sv->proxy ? net_proxy_refused(sv->proxy, &ref, &more) : 0;
	size_t k = 0;
	struct buf b = {0};
	for (size_t i = 0; i < n; i++) {
		/* A refusal by a limit is told by its [limit] line. */
		if (limit_rule(ref[i].rule))
			continue;
		const char *h = ref[i].host && *ref[i].host ? ref[i].host : "?";
		bool v6 = strchr(h, ':') != NULL;
		buf_printf(&b, "%s%s%s%s:%u (rule %s)", k++ ? ", " : "[sandbox] The network proxy refused ",
			   v6 ? "[" : "", h, v6 ? "]" : "", (unsigned)ref[i].port,
			   ref[i].rule && *ref[i].rule ? ref[i].rule : "none");
	}
	if (k && more)
		buf_printf(&b, " and %zu more", more);
	if (k)
		buf_puts(&b, ". Only the hosts the network policy allows can be reached; if one is needed, ask the user "
			     "to add it to the tool's \"network\": {\"allow\": [...]} or to network.allow in the config.");
	limit_note(sv, &b);
	if (!buf_size(&b)) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

static const struct sandbox_net_ops sandbox_ops = {
	.start = serve_start,
	.stop = serve_stop,
	.note = serve_note,
};

bool daemon_net_wanted(const struct config *cfg)
{
	const struct sandbox_config *sb = &cfg->sandbox;
	if (sb->network == SANDBOX_NET_PROXY)
		return true;
	for (size_t i = 0; i < sb->n_per_tool; i++)
		if (sb->per_tool[i].network == SANDBOX_NET_PROXY)
			return true;
	return false;
}

void daemon_net_apply(struct server *s)
{
	struct net_service *svc = &svc_state;
	net_policy_unref(svc->policy);
	svc->policy = s->cfg.network ? net_policy_ref(s->cfg.network) : net_policy_new();
	net_limits_default(&svc->limits);
	svc->limits.max_connections = s->cfg.limits.net_connections;
	svc->limits.max_bytes = s->cfg.limits.net_mb << 20;
	/* A held connection waits as long as a tool's confirmation would. */
	svc->limits.ask_timeout_ms = (uint32_t)MIN(s->cfg.confirmation.timeout_ms, (uint64_t)UINT32_MAX);
}

int daemon_net_init(struct server *s, char **ret_err)
{
	struct net_service *svc = &svc_state;
	svc->server = s;
	svc->loop = s->loop;
	daemon_net_apply(s);
	sandbox_net_set_ops(&sandbox_ops, svc);
	net_ask_init(s);
	return daemon_net_check(&s->cfg, ret_err);
}

int daemon_net_check(const struct config *cfg, char **ret_err)
{
	/* Probed only where the config asks for it (a namespace costs a
	 * millisecond or more); a tool file's "proxy" is refused at its call,
	 * saying the same, where none can be made. */
	const char *why = NULL;
	if (daemon_net_wanted(cfg) && !sandbox_netns_capable(&why)) {
		*ret_err = xasprintf("sandbox.network \"proxy\" cannot be served here: each call needs a network "
				     "namespace of its own, and %s", why);
		return -EPERM;
	}
	return 0;
}

void daemon_net_free(struct server *s)
{
	(void)s;
	struct net_service *svc = &svc_state;
	sandbox_net_set_ops(NULL, NULL);
	svc->resolver = net_resolver_free(svc->resolver);
	svc->policy = net_policy_unref(svc->policy);
	for (size_t i = 0; i < svc->n_counts; i++)
		free(svc->counts[i].tool);
	free(svc->counts);
	svc->counts = NULL;
	svc->n_counts = 0;
	net_ask_clear();
	svc->server = NULL;
}

void daemon_net_metrics(struct server *s, struct buf *b)
{
	(void)s;
	struct net_service *svc = &svc_state;
	metrics_family(b, "toolcalld_network_connections", "counter", NULL,
		       "Connections through the sandbox network proxy, by tool and decision.");
	for (size_t i = 0; i < svc->n_counts; i++)
		for (int d = 0; d < 2; d++) {
			const char *labels[] = { "tool", svc->counts[i].tool, "decision", d ? "allow" : "deny", NULL };
			metrics_u64(b, "toolcalld_network_connections_total", labels, svc->counts[i].n[d]);
		}
	metrics_family(b, "toolcalld_network_bytes", "counter", "bytes",
		       "Bytes moved through the sandbox network proxy, by tool and direction.");
	for (size_t i = 0; i < svc->n_counts; i++) {
		const char *up[] = { "tool", svc->counts[i].tool, "direction", "up", NULL };
		const char *down[] = { "tool", svc->counts[i].tool, "direction", "down", NULL };
		metrics_u64(b, "toolcalld_network_bytes_total", up, svc->counts[i].bytes_up);
		metrics_u64(b, "toolcalld_network_bytes_total", down, svc->counts[i].bytes_down);
	}
	metrics_family(b, "toolcalld_network_proxies", "gauge", NULL, "Network proxies served now (one per run).");
	metrics_u64(b, "toolcalld_network_proxies", NULL, svc->served);
	unsigned open, waiting;
	net_ask_counts(&open, &waiting);
	metrics_family(b, "toolcalld_network_questions", "gauge", NULL,
		       "network.connect confirmations open now (unknown: \"ask\").");
	metrics_u64(b, "toolcalld_network_questions", NULL, open);
	metrics_family(b, "toolcalld_network_asks_waiting", "gauge", NULL,
		       "Connections held for the answer to a network.connect confirmation.");
	metrics_u64(b, "toolcalld_network_asks_waiting", NULL, waiting);
}
