/* SPDX-License-Identifier: MIT */
/*
 * The Redis store's connections: commands in flight on the command
 * connection (oldest first, a watchdog for the oldest), scripts sent by
 * SHA-1 and again as text on NOSCRIPT; connecting (to a Unix socket only
 * when a trusted uid serves it: store_server_trusted()), the subscription
 * connection, an outage (everything pending answered from the local
 * store or as unavailable) and reconnection with backoff.
 *
 * The bottom of the Redis store: it calls nothing of the claims, ends or
 * tasks above it, and tells them what happens (a message, Redis ready,
 * Redis gone) through the struct rconn_events the store set (r->events).
 */
#include "lib/store/store_redis_internal.h"

#include <hiredis/adapters/libev.h>

/* --- commands ---------------------------------------------------------- */

static void watchdog_arm(struct rstore *r)
{
	if (r->watchdog_armed)
		return;
	r->watchdog_armed = true;
	tc_timer_start(r->watchdog, MAX(r->cfg.timeout_ms / 4, 10));
}

/* A command without a reply past the timeout: Redis is stalled. */
void rs_watchdog_fire(void *arg)
{
	struct rstore *r = arg;
	r->watchdog_armed = false;
	struct rcmd *c = list_first(&r->pending, struct rcmd, node);
	if (!c)
		return;
	if (mono_ns() - c->sent_ns >= r->cfg.timeout_ms * 1000000ULL) {
		rs_outage(r, "no reply in %" PRIu64 " ms", r->cfg.timeout_ms);
		return;
	}
	watchdog_arm(r);
}

static bool resend_eval(struct rstore *r, struct rcmd *c);
static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* Queues a command for c on the command connection, formatted here in
 * RESP (hiredis copies it once into its output, in one write per loop
 * turn): REDIS_OK or REDIS_ERR. */
static int queue_cmd(struct rstore *r, struct rcmd *c, int argc, const char *const *argv, const size_t *lens)
{
	struct buf *b = &r->resp;
	buf_clear(b);
	buf_putc(b, '*');
	buf_put_u64(b, (uint64_t)argc);
	buf_append(b, "\r\n", 2);
	for (int i = 0; i < argc; i++) {
		size_t n = lens ? lens[i] : strlen(argv[i]);
		buf_putc(b, '$');
		buf_put_u64(b, n);
		buf_append(b, "\r\n", 2);
		buf_append(b, argv[i], n);
		buf_append(b, "\r\n", 2);
	}
	int ret = redisAsyncFormattedCommand(r->cmd, on_reply, c, buf_head(b), buf_size(b));
	if (b->cap > 64 * 1024)
		buf_free(b);	/* a large outcome's room is not kept */
	return ret;
}

static bool is_noscript(const redisReply *reply)
{
	return reply && reply->type == REDIS_REPLY_ERROR && str_has_prefix(reply->str, "NOSCRIPT");
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct rcmd *c = priv;
	struct rstore *r = c->r;
	list_remove(&c->node);
	struct eval_args *again = TAKE_PTR(c->again);
	if (again && is_noscript(reply) && ac == r->cmd) {
		/* Redis forgot the script (a restart, SCRIPT FLUSH): its text
		 * goes this once, and teaches it again. */
		c->again = again;
		if (resend_eval(r, c))
			return;
		c->again = NULL;
	}
	free(again);
	if (reply) {
		uint64_t us = (mono_ns() - c->sent_ns) / 1000;
		r->rtt_us = r->rtt_us ? (r->rtt_us * 7 + us) / 8 : us;
		if (!r->up && ac == r->cmd) {
			r->up = true;
			r->backoff_ms = 0;
			r->refusal[0] = '\0';
			if (r->outage) {
				r->outage = false;
				if (r->cfg.notify)
					r->cfg.notify(r->cfg.notify_arg, true, "reconnected");
			}
			r->events->ready(r);
		}
	}
	void *arg = c->arg;
	void (*fn)(struct rstore *, redisReply *, void *) = c->fn;
	free(c);
	fn(r, reply, arg);
}

/*
 * Sends one command (argv form) on the command connection; fn gets the
 * reply, or NULL when the connection went away first. Returns the command
 * (its arg may be cleared to ignore the reply), or NULL when nothing could
 * be sent (fn was not called).
 */
struct rcmd *rs_send_cmd(struct rstore *r, void (*fn)(struct rstore *, redisReply *, void *), void *arg,
			 int argc, const char **argv, const size_t *lens)
{
	if (!r->cmd)
		return NULL;
	struct rcmd *c = xcalloc(1, sizeof(*c));
	c->r = r;
	c->fn = fn;
	c->arg = arg;
	c->sent_ns = mono_ns();
	list_insert_tail(&r->pending, &c->node);
	if (queue_cmd(r, c, argc, argv, lens) != REDIS_OK) {
		list_remove(&c->node);
		free(c);
		return NULL;
	}
	r->commands++;
	watchdog_arm(r);
	return c;
}

/* Sends script s with the keys and args given as strings (lengths
 * kvlen, or NUL-terminated when kvlen is NULL): by its SHA-1 when known,
 * keeping the arguments in case Redis has forgotten it. */
struct rcmd *rs_send_eval(struct rstore *r, void (*fn)(struct rstore *, redisReply *, void *), void *arg,
			  enum script s, int nkeys, int nargs, const char *const *kv, const size_t *kvlen)
{
	const char *argv[3 + MAX_EVAL_ARGS];
	size_t lens[3 + MAX_EVAL_ARGS];
	char nk[8];
	int n = nkeys + nargs;
	assert(n <= MAX_EVAL_ARGS);
	snprintf(nk, sizeof(nk), "%d", nkeys);
	bool by_sha = r->sha[s][0] != '\0';
	argv[0] = by_sha ? "EVALSHA" : "EVAL";
	lens[0] = strlen(argv[0]);
	argv[1] = by_sha ? r->sha[s] : rs_script_text[s];
	lens[1] = strlen(argv[1]);
	argv[2] = nk;
	lens[2] = strlen(nk);
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		argv[3 + i] = kv[i];
		lens[3 + i] = kvlen ? kvlen[i] : strlen(kv[i]);
		total += lens[3 + i];
	}
	struct rcmd *c = rs_send_cmd(r, fn, arg, 3 + n, argv, lens);
	if (!c || !by_sha)
		return c;
	struct eval_args *e = xmalloc(sizeof(*e) + (size_t)n * sizeof(size_t) + total);
	e->script = s;
	e->nkeys = nkeys;
	e->n = n;
	e->data = (char *)(e->lens + n);
	char *p = e->data;
	for (int i = 0; i < n; i++) {
		e->lens[i] = lens[3 + i];
		memcpy(p, argv[3 + i], lens[3 + i]);
		p += lens[3 + i];
	}
	c->again = e;
	return c;
}

/* Sends c's EVALSHA again as EVAL, last in line: false when it cannot. */
static bool resend_eval(struct rstore *r, struct rcmd *c)
{
	const struct eval_args *e = c->again;
	const char *argv[3 + MAX_EVAL_ARGS];
	size_t lens[3 + MAX_EVAL_ARGS];
	char nk[8];
	snprintf(nk, sizeof(nk), "%d", e->nkeys);
	argv[0] = "EVAL";
	argv[1] = rs_script_text[e->script];
	argv[2] = nk;
	for (int i = 0; i < 3; i++)
		lens[i] = strlen(argv[i]);
	const char *p = e->data;
	for (int i = 0; i < e->n; i++) {
		argv[3 + i] = p;
		lens[3 + i] = e->lens[i];
		p += e->lens[i];
	}
	if (queue_cmd(r, c, 3 + e->n, argv, lens) != REDIS_OK)
		return false;
	free(TAKE_PTR(c->again));
	c->sent_ns = mono_ns();
	list_insert_tail(&r->pending, &c->node);
	r->commands++;
	return true;
}

/* A script's SHA-1 from SCRIPT LOAD: later calls send it instead. */
static void script_loaded(struct rstore *r, redisReply *reply, void *arg)
{
	char *sha = arg;
	if (!reply)
		return;
	if (reply->type != REDIS_REPLY_STRING || reply->len != SHA1_HEX || !rs_is_hex(reply->str, SHA1_HEX)) {
		rs_outage(r, "unexpected reply to SCRIPT LOAD: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
		return;
	}
	memcpy(sha, reply->str, SHA1_HEX + 1);
}

/* A reply that must be an integer. */
void rs_ignore_reply(struct rstore *r, redisReply *reply, void *arg)
{
	if (reply && reply->type != REDIS_REPLY_INTEGER && reply->type != REDIS_REPLY_STATUS)
		rs_outage(r, "unexpected reply: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
}

/* Writes v in decimal into out: its start. */
const char *rs_u64_str(char out[static 24], uint64_t v)
{
	out[23] = '\0';
	return fmt_u64(out + 23, v);
}

/* Whether s holds n lowercase hex digits. */
bool rs_is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Hands what hiredis holds to the socket now, not when the loop next
 * polls, so that Redis starts on it while this turn goes on. Calls
 * nothing back: a failure shows at the next write event. */
void rs_write_now(struct rstore *r)
{
	int done;
	if (r->cmd && (r->cmd->c.flags & REDIS_CONNECTED) && !r->cmd->c.err)
		redisBufferWrite(&r->cmd->c, &done);
}

/* --- connection -------------------------------------------------------- */

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct rstore *r = ac->data;
	if (!r)
		return;
	/* hiredis frees ac after this: forget it first. */
	if (ac == r->cmd)
		r->cmd = NULL;
	if (ac == r->sub)
		r->sub = NULL;
	rs_outage(r, "connection closed%s%s", ac->errstr[0] ? ": " : "", ac->errstr);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct rstore *r = ac->data;
	if (r && status != REDIS_OK) {
		if (ac == r->cmd)
			r->cmd = NULL;
		if (ac == r->sub)
			r->sub = NULL;
		rs_outage(r, "cannot connect to %s: %s", r->address, ac->errstr);
	}
}

static redisAsyncContext *open_ctx(struct rstore *r)
{
	redisAsyncContext *ac = r->host ? redisAsyncConnect(r->host, r->port) : redisAsyncConnectUnix(r->path);
	if (!ac)
		return NULL;
	if (ac->err) {
		snprintf(r->last_error, sizeof(r->last_error), "%s", ac->errstr);
		redisAsyncFree(ac);
		return NULL;
	}
	/* A Unix connect() has completed here (hiredis fails it otherwise),
	 * and nothing is sent before the loop's first write event: who
	 * serves the socket is known before it hears a word. */
	if (r->path && store_server_trusted(ac->c.fd, r->path, r->cfg.server_uid, r->last_error,
					    sizeof(r->last_error)) < 0) {
		r->refused = true;
		redisAsyncFree(ac);
		return NULL;
	}
	ac->data = r;
	redisLibevAttach(r->ev, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	return ac;
}

/* Drops both connections: every pending reply comes back NULL. */
void rs_drop(struct rstore *r)
{
	redisAsyncContext *c = r->cmd, *s = r->sub;
	r->cmd = r->sub = NULL;
	r->up = false;
	if (c) {
		c->data = NULL;
		redisAsyncFree(c);
	}
	if (s) {
		s->data = NULL;
		redisAsyncFree(s);
	}
	/* A context being freed inside its own callback answers later. */
	while (!list_empty(&r->pending)) {
		struct rcmd *cmd = list_first(&r->pending, struct rcmd, node);
		list_remove(&cmd->node);
		list_init(&cmd->node);
	}
	struct map *chans = r->chans;
	const char *k;
	void *v;
	for (size_t it = 0; map_next(chans, &it, &k, &v);)
		((struct chan *)v)->subscribed = false;
}

void rs_retry_fire(void *arg)
{
	struct rstore *r = arg;
	r->retry_armed = false;
	rs_connect_now(r);
}

void rs_connect_now(struct rstore *r)
{
	if (r->cmd)
		return;
	r->refused = false;
	r->cmd = open_ctx(r);
	r->sub = r->cmd ? open_ctx(r) : NULL;
	if (!r->cmd || !r->sub) {
		char why[512];
		snprintf(why, sizeof(why), "cannot connect to %s: %s", r->address, r->last_error);
		/* A server refused is told even mid-outage (once for each
		 * refusal): someone made the socket where Redis was. */
		bool tell = r->outage && r->refused && !str_eq(r->refusal, r->last_error);
		if (r->refused)
			snprintf(r->refusal, sizeof(r->refusal), "%s", r->last_error);
		rs_outage(r, "%s", why);
		if (tell && r->cfg.notify)
			r->cfg.notify(r->cfg.notify_arg, false, why);
		return;
	}
	/* Tasks cancelled through other daemons. */
	const char *sub[] = { "SUBSCRIBE", r->cancel_chan };
	redisAsyncCommandArgv(r->sub, r->events->message, r, 2, sub, NULL);
	/* What this daemon recorded alone goes first: Redis has it before
	 * it is seen as back, and before any claim of this daemon. */
	r->events->ready(r);
	/* The first reply says Redis is there. */
	const char *ping = "PING";
	rs_send_cmd(r, rs_ignore_reply, NULL, 1, &ping, NULL);
	for (int i = 0; i < N_SCRIPTS; i++) {
		const char *load[] = { "SCRIPT", "LOAD", rs_script_text[i] };
		rs_send_cmd(r, script_loaded, r->sha[i], 3, load, NULL);
	}
}

/* Treats Redis as away: warns once, answers what waits, reconnects later. */
void rs_outage(struct rstore *r, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!r->outage) {
		r->outage = true;
		r->outages++;
		if (r->cfg.notify)
			r->cfg.notify(r->cfg.notify_arg, false, why);
	}
	rs_drop(r);
	r->events->down(r);
	if (!r->retry_armed) {
		r->retry_armed = true;
		r->backoff_ms = r->backoff_ms ? MIN(r->backoff_ms * 2, BACKOFF_MAX_MS) : BACKOFF_MIN_MS;
		tc_timer_start(r->retry, r->backoff_ms + tc_random(r->loop) % (r->backoff_ms / 2 + 1));
	}
}
