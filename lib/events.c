/* SPDX-License-Identifier: MIT */
/*
 * Event building and fan-out. An event is written once as JSON and handed
 * to every matching subscriber.
 */
#include "lib/events.h"

#include <fnmatch.h>
#include <string.h>

#include "lib/session.h"
#include "proto/json.h"

void event_bus_init(struct event_bus *b)
{
	list_init(&b->subs);
	b->emitted = b->dropped = 0;
}

bool event_pattern_valid(const char *p)
{
	if (!p || !*p || strlen(p) > 128)
		return false;
	for (const char *c = p; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '*'))
			return false;
	return true;
}

struct subscriber *event_subscribe(struct event_bus *b, const char *const *patterns, uid_t uid,
				   const char *session_id,
				   bool (*deliver)(void *ctx, const char *params, size_t n), void *ctx)
{
	struct subscriber *s = xcalloc(1, sizeof(*s));
	size_t n = 0;
	while (patterns && patterns[n])
		n++;
	s->patterns = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		s->patterns[i] = xstrdup(patterns[i]);
	s->uid = uid;
	s->session_id = xstrdup(session_id ? session_id : "*");
	s->deliver = deliver;
	s->ctx = ctx;
	list_insert_tail(&b->subs, &s->node);
	return s;
}

void event_unsubscribe(struct subscriber *s)
{
	if (!s)
		return;
	list_remove(&s->node);
	for (char **p = s->patterns; *p; p++)
		free(*p);
	free(s->patterns);
	free(s->session_id);
	free(s);
}

static bool type_matches(const struct subscriber *sub, const char *type)
{
	if (!sub->patterns[0])
		return true;
	for (char **p = sub->patterns; *p; p++)
		if (fnmatch(*p, type, 0) == 0)
			return true;
	return false;
}

static bool scope_matches(const struct subscriber *sub, const struct session *s)
{
	if (!s)
		return true;
	if (sub->uid != s->uid)
		return false;
	return strcmp(sub->session_id, "*") == 0 || strcmp(sub->session_id, s->id) == 0;
}

bool event_has_subscriber(const struct event_bus *b, const char *type, const struct session *s)
{
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &b->subs) {
		struct subscriber *sub = list_entry(pos, struct subscriber, node);
		if (type_matches(sub, type) && scope_matches(sub, s))
			return true;
	}
	return false;
}

/* Tells a subscriber how many events it missed. */
static void report_drops(struct subscriber *sub)
{
	char tbuf[32];
	format_time(wall_ms(), tbuf);
	struct buf b = {0};
	buf_printf(&b, "{\"type\":\"events.dropped\",\"time\":\"%s\",\"count\":%llu}", tbuf,
		   (unsigned long long)sub->dropped);
	if (sub->deliver(sub->ctx, buf_head(&b), buf_size(&b)))
		sub->dropped = 0;
	buf_free(&b);
}

/* Writes one event object. */
static void build_event(struct buf *out, const char *type, const struct session *s, const char *call_id,
			const char *tool, void (*extra)(struct jgen *g, void *arg), void *arg)
{
	char tbuf[32];
	format_time(wall_ms(), tbuf);
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "type", type);
	jgen_kv_str(g, "time", tbuf);
	if (s)
		jgen_kv_str(g, "sessionId", s->id);
	if (call_id)
		jgen_kv_str(g, "callId", call_id);
	if (tool)
		jgen_kv_str(g, "tool", tool);
	if (extra)
		extra(g, arg);
	jgen_obj_close(g);
	jgen_free(g);
}

static void deliver(struct event_bus *b, struct subscriber *sub, const struct buf *out)
{
	if (sub->dropped)
		report_drops(sub);
	if (!sub->deliver(sub->ctx, buf_head(out), buf_size(out))) {
		sub->dropped++;
		sub->dropped_total++;
		b->dropped++;
	}
}

void event_emit(struct event_bus *b, const char *type, const struct session *s, const char *call_id,
		const char *tool, void (*extra)(struct jgen *g, void *arg), void *arg)
{
	if (list_empty(&b->subs))
		return;
	struct buf out = {0};
	bool built = false;
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &b->subs) {
		struct subscriber *sub = list_entry(pos, struct subscriber, node);
		if (!type_matches(sub, type) || !scope_matches(sub, s))
			continue;
		if (!built) {
			build_event(&out, type, s, call_id, tool, extra, arg);
			built = true;
			b->emitted++;
		}
		deliver(b, sub, &out);
	}
	buf_free(&out);
}

void event_emit_to(struct event_bus *b, struct subscriber *sub, const char *type, const struct session *s,
		   const char *call_id, const char *tool, void (*extra)(struct jgen *g, void *arg), void *arg)
{
	if (!type_matches(sub, type) || !scope_matches(sub, s))
		return;
	struct buf out = {0};
	build_event(&out, type, s, call_id, tool, extra, arg);
	b->emitted++;
	deliver(b, sub, &out);
	buf_free(&out);
}
