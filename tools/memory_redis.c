/* SPDX-License-Identifier: MIT */
/*
 * The memory tool's memory kept in Redis, with the shared store (§14):
 * every daemon using the same Redis and prefix sees the same memory for a
 * uid. Same commands, texts and limits as in files (tools/memory.c).
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/store/store.h"
#include "proto/base/buf.h"
#include "tools/memory_internal.h"

/*
 * With the Redis store (§14) memory is kept there, so that every daemon
 * using the same Redis and prefix sees the same memory for a uid: one hash
 * per memory ("PREFIX memory:UID:SCOPE"), a field "f:PATH" per file (its
 * text), "v:PATH" (its version, from the counter "#s"), "d:PATH" per
 * directory, and the running totals "#t" (bytes) and "#n" (entries) that
 * the limits are checked against. Each command is one script, so it is
 * atomic in Redis; str_replace and insert read the file, make the new text
 * here and write it back only if its version is still the one they read
 * (else the call answers that the file changed and is to be viewed again):
 * no write is ever lost. The commands run on an io thread over a blocking
 * connection of that thread's own.
 */
static const char MEMORY_LUA[] =
	"local h, op = KEYS[1], ARGV[1]\n"
	"local function kind(p)\n"
	"  if p == '' then return 'd' end\n"
	"  if redis.call('HEXISTS', h, 'f:' .. p) == 1 then return 'f' end\n"
	"  if redis.call('HEXISTS', h, 'd:' .. p) == 1 then return 'd' end\n"
	"  return nil\n"
	"end\n"
	/* The missing parents of p, or false when one is a file. */
	"local function parents(p)\n"
	"  local miss, i = {}, 0\n"
	"  while true do\n"
	"    i = string.find(p, '/', i + 1, true)\n"
	"    if not i then return miss end\n"
	"    local d = string.sub(p, 1, i - 1)\n"
	"    local k = kind(d)\n"
	"    if k == 'f' then return false end\n"
	"    if not k then miss[#miss + 1] = d end\n"
	"  end\n"
	"end\n"
	"local function num(f) return tonumber(redis.call('HGET', h, f) or '0') end\n"
	/* Calls fn for every file and directory field beneath p. */
	"local function beneath(p, fn)\n"
	"  local pre = p == '' and '' or p .. '/'\n"
	"  for _, f in ipairs(redis.call('HKEYS', h)) do\n"
	"    local t = string.sub(f, 1, 2)\n"
	"    if (t == 'f:' or t == 'd:') and string.sub(f, 3, 2 + #pre) == pre then fn(f) end\n"
	"  end\n"
	"end\n"
	"if op == 'get' then\n"
	"  local p = ARGV[2]\n"
	"  local k = kind(p)\n"
	"  if k == 'f' then return {'f', redis.call('HGET', h, 'f:' .. p), redis.call('HGET', h, 'v:' .. p)} end\n"
	"  if k == 'd' then\n"
	"    local out = {'d'}\n"
	"    beneath(p, function(f)\n"
	"      out[#out + 1] = f\n"
	"      out[#out + 1] = string.sub(f, 1, 2) == 'f:' and redis.call('HSTRLEN', h, f) or 0\n"
	"    end)\n"
	"    return out\n"
	"  end\n"
	"  if parents(p) == false then return {'notdir'} end\n"
	"  return {'none'}\n"
	"end\n"
	"if op == 'put' then\n"
	"  local p, text, expect = ARGV[2], ARGV[3], ARGV[4]\n"
	"  local k = kind(p)\n"
	"  if k == 'd' then return {'isdir'} end\n"
	"  local miss = parents(p)\n"
	"  if miss == false then return {'notdir'} end\n"
	"  if expect ~= '' and (k ~= 'f' or redis.call('HGET', h, 'v:' .. p) ~= expect) then return {'stale'} end\n"
	"  if #text > tonumber(ARGV[5]) then return {'file'} end\n"
	"  local old = k == 'f' and redis.call('HSTRLEN', h, 'f:' .. p) or 0\n"
	"  local total = num('#t') - old + #text\n"
	"  if total > tonumber(ARGV[6]) then return {'total', tostring(total)} end\n"
	"  local n, add = num('#n'), #miss + (k == 'f' and 0 or 1)\n"
	"  if n + add > tonumber(ARGV[7]) then return {'entries', tostring(n)} end\n"
	"  for _, d in ipairs(miss) do redis.call('HSET', h, 'd:' .. d, '1') end\n"
	"  local v = redis.call('HINCRBY', h, '#s', 1)\n"
	"  redis.call('HSET', h, 'f:' .. p, text, 'v:' .. p, v, '#t', total, '#n', n + add)\n"
	"  return {'ok', tostring(v), k == 'f' and '0' or '1'}\n"
	"end\n"
	"if op == 'del' then\n"
	"  local p = ARGV[2]\n"
	"  local k = kind(p)\n"
	"  if not k then return {'none'} end\n"
	"  local t, n = num('#t'), num('#n')\n"
	"  local function drop(f)\n"
	"    if string.sub(f, 1, 2) == 'f:' then\n"
	"      t = t - redis.call('HSTRLEN', h, f)\n"
	"      redis.call('HDEL', h, f, 'v:' .. string.sub(f, 3))\n"
	"    else\n"
	"      redis.call('HDEL', h, f)\n"
	"    end\n"
	"    n = n - 1\n"
	"  end\n"
	"  if k == 'd' then beneath(p, drop) end\n"
	"  drop(k .. ':' .. p)\n"
	"  redis.call('HSET', h, '#t', t, '#n', n)\n"
	"  return {'ok'}\n"
	"end\n"
	"if op == 'mv' then\n"
	"  local a, b = ARGV[2], ARGV[3]\n"
	"  local k = kind(a)\n"
	"  if not k then return {'none'} end\n"
	"  if kind(b) then return {'exists'} end\n"
	"  if k == 'd' and string.sub(b, 1, #a + 1) == a .. '/' then return {'inside'} end\n"
	"  local miss = parents(b)\n"
	"  if miss == false then return {'notdir'} end\n"
	"  local n = num('#n')\n"
	"  if n + #miss > tonumber(ARGV[4]) then return {'entries', tostring(n)} end\n"
	"  for _, d in ipairs(miss) do redis.call('HSET', h, 'd:' .. d, '1') end\n"
	/* A moved file gets a new version: an edit of the old path is stale. */
	"  local function move(from, to)\n"
	"    if redis.call('HEXISTS', h, 'f:' .. from) == 1 then\n"
	"      local v = redis.call('HINCRBY', h, '#s', 1)\n"
	"      redis.call('HSET', h, 'f:' .. to, redis.call('HGET', h, 'f:' .. from), 'v:' .. to, v)\n"
	"      redis.call('HDEL', h, 'f:' .. from, 'v:' .. from)\n"
	"    else\n"
	"      redis.call('HSET', h, 'd:' .. to, '1')\n"
	"      redis.call('HDEL', h, 'd:' .. from)\n"
	"    end\n"
	"  end\n"
	"  if k == 'd' then\n"
	"    local inner = {}\n"
	"    beneath(a, function(f) inner[#inner + 1] = string.sub(f, 3) end)\n"
	"    for _, p in ipairs(inner) do move(p, b .. string.sub(p, #a + 1)) end\n"
	"  end\n"
	"  move(a, b)\n"
	"  redis.call('HSET', h, '#n', n + #miss)\n"
	"  return {'ok'}\n"
	"end\n"
	"return {'bad'}\n";

/* A worker's own connection, freed when the worker ends. */
struct rconn {
	redisContext *c;
	char *addr;
	char sha[48];			/* the script's SHA-1 there, once loaded */
};

static pthread_key_t rconn_key;
static pthread_once_t rconn_once = PTHREAD_ONCE_INIT;

static void rconn_free(void *p)
{
	struct rconn *r = p;
	if (r->c)
		redisFree(r->c);
	free(r->addr);
	free(r);
}

static void rconn_key_make(void)
{
	if (pthread_key_create(&rconn_key, rconn_free) != 0)
		abort();
}

/* This worker's connection to addr ("unix:/path" or "HOST:PORT"), made
 * (again) when there is none or the last one failed; NULL when Redis
 * cannot be reached, or its Unix socket is served by a uid other than
 * root's, the daemon's or server_uid (store_server_trusted()). */
static redisContext *redis_conn(const char *addr, uint32_t timeout_ms, uid_t server_uid)
{
	pthread_once(&rconn_once, rconn_key_make);
	struct rconn *r = pthread_getspecific(rconn_key);
	if (!r) {
		r = xcalloc(1, sizeof(*r));
		(void)pthread_setspecific(rconn_key, r);
	}
	if (r->c && (r->c->err || !str_eq(r->addr, addr))) {
		redisFree(r->c);
		r->c = NULL;
	}
	if (r->c)
		return r->c;
	struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
	if (str_has_prefix(addr, "unix:")) {
		r->c = redisConnectUnixWithTimeout(addr + 5, tv);
	} else {
		/* HOST:PORT, the host maybe in brackets (IPv6). */
		_cleanup_free_ char *host = xstrdup(addr);
		char *colon = strrchr(host, ':');
		if (!colon)
			return NULL;
		*colon = '\0';
		int port = atoi(colon + 1);
		char *h = host;
		if (h[0] == '[' && colon > h + 1 && colon[-1] == ']') {
			colon[-1] = '\0';
			h++;
		}
		r->c = redisConnectWithTimeout(h, port, tv);
	}
	char why[384];
	if (r->c && !r->c->err && str_has_prefix(addr, "unix:") &&
	    store_server_trusted(r->c->fd, addr + 5, server_uid, why, sizeof(why)) < 0) {
		redisFree(r->c);
		r->c = NULL;
		return NULL;
	}
	if (r->c && !r->c->err && redisSetTimeout(r->c, tv) == REDIS_OK) {
		free(r->addr);
		r->addr = xstrdup(addr);
		r->sha[0] = '\0';
		return r->c;
	}
	if (r->c)
		redisFree(r->c);
	r->c = NULL;
	return NULL;
}

/* Loads the script into Redis (again: a restarted Redis forgot it). */
static bool redis_load(redisContext *c, struct rconn *r)
{
	const char *argv[] = { "SCRIPT", "LOAD", MEMORY_LUA };
	size_t argl[] = { 6, 4, sizeof(MEMORY_LUA) - 1 };
	redisReply *reply = redisCommandArgv(c, 3, argv, argl);
	bool ok = reply && reply->type == REDIS_REPLY_STRING && reply->len < sizeof(r->sha);
	if (ok)
		memcpy(r->sha, reply->str, reply->len + 1);
	if (reply)
		freeReplyObject(reply);
	return ok;
}

/* Sends a command whole, then reads its reply: NULL when Redis could not
 * be reached or did not answer; *sent becomes true once the command went
 * out whole (Redis may then run it, answered or not: a command cut short
 * is never run). */
static redisReply *command_sent(redisContext *c, int argc, const char **argv, const size_t *argl, bool *sent)
{
	if (redisAppendCommandArgv(c, argc, argv, argl) != REDIS_OK)
		return NULL;
	for (int done = 0; !done;)
		if (redisBufferWrite(c, &done) != REDIS_OK)
			return NULL;
	*sent = true;
	void *reply = NULL;
	if (redisGetReply(c, &reply) != REDIS_OK)
		return NULL;
	return reply;
}

/* Runs the script with op and its n arguments; the reply (an array), or
 * NULL when Redis could not be reached or answered with an error. A write
 * (op other than "get") sent whole without an answer (Redis stalled or
 * went away as it ran) sets j->unknown: it may have been made, so it is
 * not to be sent again by a retry. */
static redisReply *redis_eval(struct mem_job *j, const char *op, size_t n, const char *const *args,
			      const size_t *lens)
{
	redisContext *c = redis_conn(j->redis_addr, j->redis_timeout_ms, j->redis_uid);
	if (!c)
		return NULL;
	struct rconn *rc = pthread_getspecific(rconn_key);
	if (!rc->sha[0] && !redis_load(c, rc))
		return NULL;
	const char *argv[12] = { "EVALSHA", rc->sha, "1", j->redis_key, op };
	size_t argl[12] = { 7, strlen(rc->sha), 1, strlen(j->redis_key), strlen(op) };
	for (size_t i = 0; i < n && i < 7; i++) {
		argv[5 + i] = args[i];
		argl[5 + i] = lens ? lens[i] : strlen(args[i]);
	}
	int argc = (int)(5 + MIN(n, (size_t)7));
	bool sent = false;
	redisReply *reply = command_sent(c, argc, argv, argl, &sent);
	if (reply && reply->type == REDIS_REPLY_ERROR && str_has_prefix(reply->str, "NOSCRIPT")) {
		freeReplyObject(reply);
		sent = false;	/* not run: Redis did not know the script */
		reply = redis_load(c, rc) ? command_sent(c, argc, argv, argl, &sent) : NULL;
	}
	if (!reply && sent && !str_eq(op, "get"))
		j->unknown = true;
	if (reply && (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
		      reply->element[0]->type != REDIS_REPLY_STRING)) {
		freeReplyObject(reply);
		return NULL;
	}
	return reply;
}

/* The reply's element i as a string (NULL: none), its length in *ret_len. */
static const char *el(const redisReply *r, size_t i, size_t *ret_len)
{
	if (i >= r->elements || r->element[i]->type != REDIS_REPLY_STRING)
		return NULL;
	if (ret_len)
		*ret_len = r->element[i]->len;
	return r->element[i]->str;
}

/* True when the reply's status (element 0) is s. */
static bool is(const redisReply *r, const char *s)
{
	return str_eq(r->element[0]->str, s);
}

/* The answer to a write Redis took but did not answer: whether it was
 * made is not known, and a retry could make it twice (an insert) or
 * report a change made as failed (a rename). Not retried: the model looks.
 * -1 (the job's error set). */
static int unknown_outcome(struct mem_job *j, const char *path)
{
	mem_fail(j, "The shared store took the change to %s but did not answer in time, so whether it "
		 "was made is not known; it was not repeated. View %s, then make the change again if it "
		 "is not there.", path, path);
	return -1;
}

/* The answers every write may get (for a path shown as path). */
static int put_failed(struct mem_job *j, const redisReply *r, const char *path, size_t n)
{
	if (is(r, "isdir"))
		return mem_fail(j, "The path %s is a directory; give the path of a file inside it.", path);
	if (is(r, "notdir"))
		return fail_errno(j, -ENOTDIR, "write", path);
	if (is(r, "stale"))
		return mem_fail(j, "The file %s changed after it was read for this edit (another session wrote, "
			    "renamed or deleted it), so nothing was changed. View it again, then repeat the edit.",
			    path);
	if (is(r, "file"))
		return over_file(j, path, n);
	if (is(r, "total"))
		return over_total(j, strtoull(el(r, 1, NULL) ? el(r, 1, NULL) : "0", NULL, 10));
	if (is(r, "entries"))
		return over_entries(j, strtoull(el(r, 1, NULL) ? el(r, 1, NULL) : "0", NULL, 10));
	return mem_fail(j, "Could not write %s: the store answered '%s'.", path, r->element[0]->str);
}

/* Writes text at rel in place of was (the text read; NULL for create);
 * expect: the version read ("" for create). 0 when
 * written (*ret_created), else the job's error set and -1. */
static int redis_put(struct mem_job *j, const char *text, size_t n, const char *was, size_t was_n,
		     const char *expect, bool *ret_created)
{
	if (text_refused(j, j->path, text, n, was, was_n) < 0)
		return -1;
	char maxf[24], maxt[24], maxn[24];
	snprintf(maxf, sizeof(maxf), "%zu", j->max_file);
	snprintf(maxt, sizeof(maxt), "%zu", j->max_total);
	snprintf(maxn, sizeof(maxn), "%d", ENTRIES_MAX);
	const char *args[] = { j->rel, text, expect, maxf, maxt, maxn };
	size_t lens[] = { strlen(j->rel), n, strlen(expect), strlen(maxf), strlen(maxt), strlen(maxn) };
	redisReply *r = redis_eval(j, "put", 6, args, lens);
	if (!r && j->unknown)
		return unknown_outcome(j, j->path);
	if (!r)
		return -EIO;
	int ret = 0;
	if (is(r, "ok")) {
		j->bytes = n;
		if (ret_created)
			*ret_created = str_eq(el(r, 2, NULL), "1");
	} else {
		put_failed(j, r, j->path, n);
		ret = -1;
	}
	freeReplyObject(r);
	return ret;
}

/* Compares relative paths so that a directory's entries follow it
 * directly: '/' sorts before every other byte. */
static int tree_cmp(const void *a, const void *b)
{
	/* Past the fields' "f:" or "d:". */
	const unsigned char *x = *(const unsigned char *const *)a + 2, *y = *(const unsigned char *const *)b + 2;
	for (; *x && *x == *y; x++, y++)
		;
	int cx = *x == '/' ? 1 : *x ? *x + 1 : 0, cy = *y == '/' ? 1 : *y ? *y + 1 : 0;
	return cx - cy;
}

/* Lists the directory of a "get" reply two levels deep, as do_view does
 * for files; a directory's size is that of the files beneath it. */
static void redis_list(struct mem_job *j, const redisReply *r)
{
	size_t pre = *j->rel ? strlen(j->rel) + 1 : 0;
	size_t n = 0;
	const char **names = xcalloc(r->elements / 2 + 1, sizeof(*names));
	uint64_t all = 0;
	for (size_t i = 1; i + 1 < r->elements; i += 2) {
		const char *f = el(r, i, NULL);
		if (!f || strlen(f) < 2 + pre)
			continue;
		if (f[0] == 'f')
			all += (uint64_t)r->element[i + 1]->integer;
		const char *name = f + 2 + pre;
		const char *second = strchr(name, '/');
		if ((second && strchr(second + 1, '/')) || name[0] == '.' || (second && second[1] == '.'))
			continue;	/* deeper than two levels, or hidden */
		names[n++] = f;
	}
	qsort(names, n, sizeof(*names), tree_cmp);
	_cleanup_free_ char *shown = xasprintf(PREFIX "%s%s", *j->rel ? "/" : "", j->rel);
	buf_printf(&j->out, "Here're the files and directories up to 2 levels deep in %s, excluding hidden items:\n",
		   shown);
	put_size(&j->out, all);
	buf_printf(&j->out, "\t%s", shown);
	for (size_t k = 0; k < n && k < VIEW_ENTRIES_MAX; k++) {
		const char *name = names[k] + 2 + pre;
		uint64_t size = 0;
		size_t len = strlen(names[k]);
		for (size_t i = 1; i + 1 < r->elements; i += 2) {
			const char *f = el(r, i, NULL);
			if (!f || f[0] != 'f')
				continue;
			if (names[k][0] == 'f' ? str_eq(f, names[k])
					       : (strncmp(f + 2, names[k] + 2, len - 2) == 0 && f[len] == '/'))
				size += (uint64_t)r->element[i + 1]->integer;
		}
		buf_putc(&j->out, '\n');
		put_size(&j->out, size);
		buf_printf(&j->out, "\t%s/", shown);
		put_name(&j->out, name);
		if (names[k][0] == 'd')
			buf_putc(&j->out, '/');
	}
	if (n > VIEW_ENTRIES_MAX)
		buf_printf(&j->out, "\n(only the first %d entries are shown)", VIEW_ENTRIES_MAX);
	free(names);
}

/* Reads the file rel: its text and version, owned by the reply *ret
 * (freed by the caller). -1 with the job's error set when it is no file. */
static int redis_read(struct mem_job *j, redisReply **ret)
{
	const char *args[] = { j->rel };
	redisReply *r = redis_eval(j, "get", 1, args, NULL);
	if (!r)
		return -EIO;
	int ret_r = 0;
	if (is(r, "none"))
		mem_fail(j, "The path %s does not exist. Please provide a valid path.", j->path), ret_r = -1;
	else if (is(r, "notdir"))
		fail_errno(j, -ENOTDIR, "read", j->path), ret_r = -1;
	else if (is(r, "d") && j->cmd != C_VIEW)
		mem_fail(j, "The path %s is not a file.", j->path), ret_r = -1;
	else if (is(r, "f") && (!el(r, 1, NULL) || !el(r, 2, NULL)))
		mem_fail(j, "The record of %s in the store is damaged; delete it.", j->path), ret_r = -1;
	if (ret_r < 0) {
		freeReplyObject(r);
		return ret_r;
	}
	*ret = r;
	return 0;
}

/* The view of a file, the common case, read with one HGET: no script,
 * whose copy of the text into Lua and back was most of Redis's work for
 * a view. 1 when the text was shown; 0 when there is no such file (the
 * script then tells a directory, a missing path and a file on the way);
 * -EIO when Redis cannot be reached. */
static int redis_view_file(struct mem_job *j)
{
	if (!*j->rel)
		return 0;
	redisContext *c = redis_conn(j->redis_addr, j->redis_timeout_ms, j->redis_uid);
	if (!c)
		return -EIO;
	_cleanup_free_ char *field = xasprintf("f:%s", j->rel);
	const char *argv[] = { "HGET", j->redis_key, field };
	redisReply *r = redisCommandArgv(c, 3, argv, NULL);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		if (r)
			freeReplyObject(r);
		return -EIO;
	}
	int ret = 0;
	if (r->type == REDIS_REPLY_STRING) {
		view_text(j, r->str, r->len);
		ret = 1;
	}
	freeReplyObject(r);
	return ret;
}

/* Runs the command on the memory kept in Redis. 0, or -EIO when Redis
 * cannot be reached (the call fails transient). */
int redis_run(struct mem_job *j)
{
	redisReply *r = NULL;
	size_t n = 0;
	const char *text;
	int ret;
	switch (j->cmd) {
	case C_VIEW:
		ret = redis_view_file(j);
		if (ret != 0)
			return ret < 0 ? ret : 0;
		ret = redis_read(j, &r);
		if (ret == -EIO)
			return ret;
		if (ret == 0 && is(r, "d"))
			redis_list(j, r);
		else if (ret == 0) {
			text = el(r, 1, &n);
			view_text(j, text, n);
		}
		break;
	case C_CREATE: {
		if (!*j->rel)
			return mem_fail(j, "Cannot create " PREFIX " itself: give the path of a file, such as "
				    PREFIX "/notes.md");
		bool created = false;
		ret = redis_put(j, j->text, j->text_len, NULL, 0, "", &created);
		if (ret == -EIO)
			return ret;
		if (ret == 0 && created)
			buf_printf(&j->out, "File created successfully at: %s", j->path);
		else if (ret == 0)
			buf_printf(&j->out, "File %s has been overwritten.", j->path);
		return 0;
	}
	case C_STR_REPLACE:
	case C_INSERT: {
		ret = redis_read(j, &r);
		if (ret == -EIO)
			return ret;
		if (ret < 0)
			return 0;
		text = el(r, 1, &n);
		_cleanup_(buf_free) struct buf next = {0};
		size_t line = 0;
		if (j->cmd == C_STR_REPLACE ? replace_text(j, text, n, &next, &line) < 0
					    : insert_text(j, text, n, &next) < 0)
			break;
		ret = redis_put(j, buf_head(&next), buf_size(&next), text, n, el(r, 2, NULL), NULL);
		if (ret == -EIO) {
			freeReplyObject(r);
			return ret;
		}
		if (ret == 0 && j->cmd == C_STR_REPLACE)
			replaced(j, &next, line);
		else if (ret == 0)
			buf_printf(&j->out, "The file %s has been edited.", j->path);
		break;
	}
	case C_DELETE: {
		if (!*j->rel)
			return mem_fail(j, "Cannot delete the " PREFIX " directory itself");
		const char *args[] = { j->rel };
		r = redis_eval(j, "del", 1, args, NULL);
		if (!r && j->unknown)
			return unknown_outcome(j, j->path), 0;
		if (!r)
			return -EIO;
		if (is(r, "none"))
			mem_fail(j, "The path %s does not exist", j->path);
		else
			buf_printf(&j->out, "Successfully deleted %s", j->path);
		break;
	}
	case C_RENAME: {
		if (!*j->rel)
			return mem_fail(j, "Cannot rename the " PREFIX " directory itself");
		char maxn[24];
		snprintf(maxn, sizeof(maxn), "%d", ENTRIES_MAX);
		const char *args[] = { j->rel, j->rel2, maxn };
		r = redis_eval(j, "mv", 3, args, NULL);
		if (!r && j->unknown)
			return unknown_outcome(j, j->path), 0;
		if (!r)
			return -EIO;
		if (is(r, "none"))
			mem_fail(j, "The path %s does not exist", j->path);
		else if (is(r, "exists") || !*j->rel2)
			mem_fail(j, "The destination %s already exists", j->path2);
		else if (is(r, "inside"))
			mem_fail(j, "Cannot move %s into itself (%s).", j->path, j->path2);
		else if (is(r, "notdir"))
			fail_errno(j, -ENOTDIR, "rename to", j->path2);
		else if (is(r, "entries"))
			over_entries(j, strtoull(el(r, 1, NULL) ? el(r, 1, NULL) : "0", NULL, 10));
		else
			buf_printf(&j->out, "Successfully renamed %s to %s", j->path, j->path2);
		break;
	}
	}
	if (r)
		freeReplyObject(r);
	return 0;
}

/* On an io thread, as the peer: opens the scope (made on first use, 0700)
 * and runs the command, one write at a time per scope. */
