/* SPDX-License-Identifier: MIT */
/*
 * One child's network "proxy": a namespace taken from the pool
 * (netns.c), the proxy the daemon serves on its listening sockets (the
 * ops set by the daemon, which hold the policy, the audit and the
 * confirmations), and the environment that points the child's programs
 * at it. The proxy lives as long as the run: a call's, a background
 * process's, an MCP server instance's.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/base/util.h"

static const struct sandbox_net_ops *net_ops;
static void *net_ops_arg;

struct sandbox_net {
	struct sandbox_netns ns;	/* its listeners, lent to the ops while they serve */
	uid_t uid;
	void *served;
	const char *env[13];
};

#define STR_(x) #x
#define STR(x) STR_(x)
#define HTTP_URL "http://127.0.0.1:" STR(SANDBOX_PROXY_HTTP_PORT)
#define SOCKS_URL "socks5h://127.0.0.1:" STR(SANDBOX_PROXY_SOCKS_PORT)

/* Programs read one case or the other (curl the lower, pip and npm
 * either): both. */
static const char *const proxy_env[] = {
	"HTTP_PROXY=" HTTP_URL, "http_proxy=" HTTP_URL,
	"HTTPS_PROXY=" HTTP_URL, "https_proxy=" HTTP_URL,
	"ALL_PROXY=" SOCKS_URL, "all_proxy=" SOCKS_URL,
	"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1",
	NULL,
};

static const char *const network_names[] = {
	[SANDBOX_NET_NONE] = "false",
	[SANDBOX_NET_FULL] = "true",
	[SANDBOX_NET_PROXY] = "proxy",
};

const char *sandbox_network_name(enum sandbox_network n)
{
	return (unsigned)n < ELEMENTSOF(network_names) ? network_names[n] : "?";
}

void sandbox_net_set_ops(const struct sandbox_net_ops *ops, void *arg)
{
	net_ops = ops;
	net_ops_arg = arg;
}

int sandbox_net_prepare(const struct sandbox_req *req, struct sandbox_net **ret, char **ret_msg)
{
	if (!net_ops) {
		*ret_msg = xasprintf("The sandbox's network \"proxy\" is not served here (no proxy in this "
				     "process); the call is not given the full network instead");
		return -EPERM;
	}
	struct sandbox_net *n = xcalloc(1, sizeof(*n));
	n->uid = req->id && req->id->change ? req->id->uid : geteuid();
	int r = sandbox_netns_take(&n->ns, n->uid, ret_msg);
	if (r < 0) {
		free(n);
		return r;
	}
	/* The ops are lent the listeners: the namespace keeps them for a
	 * later call, and no copy is made and closed per call. */
	struct sandbox_net_serve s = {
		.http_fd = n->ns.http_fd,
		.socks_fd = n->ns.socks_fd,
		.tool_policy = req->net_policy,
		.who = req->net_who,
	};
	n->served = net_ops->start(net_ops_arg, &s, ret_msg);
	if (!n->served) {
		if (!*ret_msg)
			*ret_msg = xstrdup("The call's network proxy could not be started");
		sandbox_net_end(n, false);
		return -EIO;
	}
	memcpy(n->env, proxy_env, sizeof(proxy_env));
	*ret = n;
	return 0;
}

int sandbox_net_ns_fd(const struct sandbox_net *n)
{
	return n ? n->ns.ns_fd : -1;
}

int sandbox_net_diag_fd(const struct sandbox_net *n)
{
	return n ? n->ns.diag_fd : -1;
}

int sandbox_net_user_fd(const struct sandbox_net *n)
{
	return n ? n->ns.user_fd : -1;
}

const char *const *sandbox_net_env(const struct sandbox_net *n)
{
	return n ? n->env : NULL;
}

void *sandbox_net_served(const struct sandbox_net *n)
{
	return n ? n->served : NULL;
}

char *sandbox_net_note(const struct sandbox_net *n)
{
	return n && n->served && net_ops && net_ops->note ? net_ops->note(net_ops_arg, n->served) : NULL;
}

struct sandbox_net *sandbox_net_end(struct sandbox_net *n, bool reuse)
{
	if (!n)
		return NULL;
	if (n->served && net_ops)
		net_ops->stop(net_ops_arg, n->served);
	if (reuse)
		sandbox_netns_keep(&n->ns, n->uid);
	sandbox_netns_release(&n->ns);
	free(n);
	return NULL;
}
