/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl's output: pretty JSON, call results and error envelopes,
 * the aligned tool list, one line per event, and the approver's question.
 */
#include "daemon/ctl/ctl_format.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* Longest value shown inside an event line or a prompt. */
#define VALUE_MAX 200

/* Length of the UTF-8 sequence a lead byte starts (0: not a lead byte). */
static size_t utf8_lead_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return 2;
	if (c >= 0xE0 && c <= 0xEF)
		return 3;
	if (c >= 0xF0 && c <= 0xF4)
		return 4;
	return 0;
}

/* True for the character (n bytes, valid UTF-8) at s that a terminal acts
 * on (utf8_is_control()). */
static bool is_control(const unsigned char *s, size_t n)
{
	uint32_t cp;
	return utf8_decode((const char *)s, n, &cp) == n && utf8_is_control(cp);
}

void ctl_sanitize(const char *s, size_t n, size_t max, struct buf *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, shown = 0;

	while (i < n) {
		size_t l = utf8_lead_len(u[i]);
		bool ok = l > 0 && i + l <= n && utf8_valid(s + i, l);
		if (!ok)
			l = 1;
		if (shown + l > max) {
			buf_puts(out, "...");
			return;
		}
		if (!ok || is_control(u + i, l))
			buf_putc(out, '?');
		else
			buf_append(out, s + i, l);
		shown += l;
		i += l;
	}
}

static void sanitize_str(const char *s, size_t max, struct buf *out)
{
	if (s)
		ctl_sanitize(s, strlen(s), max, out);
}

static void indent(struct buf *out, unsigned level)
{
	for (unsigned i = 0; i < level; i++)
		buf_puts(out, "  ");
}

/* Writes one value of the pretty printer. */
static void pretty_value(const struct json *v, unsigned level, struct buf *out)
{
	switch (v->type) {
	case JSON_NULL:
		buf_puts(out, "null");
		return;
	case JSON_BOOL:
		buf_puts(out, v->u.b ? "true" : "false");
		return;
	case JSON_NUMBER:
		buf_append(out, v->u.num.raw, v->u.num.raw_len);
		return;
	case JSON_STRING:
		json_quote(out, v->u.str.s, v->u.str.len);
		return;
	case JSON_ARRAY:
		if (v->u.arr.n == 0) {
			buf_puts(out, "[]");
			return;
		}
		buf_puts(out, "[\n");
		for (size_t i = 0; i < v->u.arr.n; i++) {
			indent(out, level + 1);
			pretty_value(v->u.arr.items[i], level + 1, out);
			buf_puts(out, i + 1 < v->u.arr.n ? ",\n" : "\n");
		}
		indent(out, level);
		buf_putc(out, ']');
		return;
	case JSON_OBJECT:
		if (v->u.obj.n == 0) {
			buf_puts(out, "{}");
			return;
		}
		buf_puts(out, "{\n");
		for (size_t i = 0; i < v->u.obj.n; i++) {
			const struct json_member *m = &v->u.obj.members[i];
			indent(out, level + 1);
			json_quote(out, m->key, m->key_len);
			buf_puts(out, ": ");
			pretty_value(m->value, level + 1, out);
			buf_puts(out, i + 1 < v->u.obj.n ? ",\n" : "\n");
		}
		indent(out, level);
		buf_putc(out, '}');
		return;
	}
}

void ctl_pretty(const struct json *v, struct buf *out)
{
	if (v)
		pretty_value(v, 0, out);
	else
		buf_puts(out, "null");
	buf_putc(out, '\n');
}

bool ctl_call_text(const struct json *result, struct buf *out)
{
	const struct json *content = json_get(result, "content");

	if (content && content->type == JSON_ARRAY)
		for (size_t i = 0; i < content->u.arr.n; i++) {
			const struct json *item = content->u.arr.items[i];
			const struct json *text = json_get(item, "text");
			if (!str_eq(json_str(json_get(item, "type")), "text") || !json_str(text))
				continue;
			buf_append(out, text->u.str.s, text->u.str.len);
			if (text->u.str.len == 0 || text->u.str.s[text->u.str.len - 1] != '\n')
				buf_putc(out, '\n');
		}
	return json_is_true(json_get(result, "isError"));
}

void ctl_error_lines(const struct json *error, struct buf *out)
{
	const struct json *data = json_get(error, "data");
	const char *kind = json_str(json_get(data, "kind"));
	const char *message = json_str(json_get(error, "message"));
	int64_t code = 0;

	buf_puts(out, "error: ");
	if (kind)
		sanitize_str(kind, SIZE_MAX, out);
	else if (json_get_int(json_get(error, "code"), &code))
		buf_printf(out, "code %lld", (long long)code);
	else
		buf_puts(out, "unknown");
	buf_puts(out, ": ");
	sanitize_str(message ? message : "(no message)", SIZE_MAX, out);
	buf_putc(out, '\n');

	const struct json *errors = json_get(data, "errors");
	if (!str_eq(kind, "validation_error") || !errors || errors->type != JSON_ARRAY)
		return;
	for (size_t i = 0; i < errors->u.arr.n; i++) {
		const struct json *e = errors->u.arr.items[i];
		const char *path = json_str(json_get(e, "path"));
		/* An entry that only repeats the message (no argument named)
		 * says nothing more. */
		if ((!path || !*path) && message && str_eq(json_str(json_get(e, "message")), message))
			continue;
		buf_puts(out, "  ");
		/* "" is the JSON pointer of the whole arguments object. */
		sanitize_str(path && *path ? path : "/", SIZE_MAX, out);
		buf_puts(out, ": ");
		sanitize_str(json_str(json_get(e, "message")), SIZE_MAX, out);
		buf_putc(out, '\n');
	}
}

/* The side-effect class a listed tool declares in its _meta. */
static const char *tool_side(const struct json *tool)
{
	const char *s = json_str(json_get(json_get(tool, "_meta"), "toolcalld/sideEffects"));
	return s ? s : "-";
}

void ctl_tool_lines(const struct json *const *tools, size_t n, struct buf *out)
{
	size_t width = 4, side_width = 4;

	for (size_t i = 0; i < n; i++) {
		const char *name = json_str(json_get(tools[i], "name"));
		width = MAX(width, name ? MIN(strlen(name), (size_t)40) : 0);
		side_width = MAX(side_width, MIN(strlen(tool_side(tools[i])), (size_t)16));
	}

	for (size_t i = 0; i < n; i++) {
		const char *name = json_str(json_get(tools[i], "name"));
		const char *desc = json_str(json_get(tools[i], "description"));
		size_t start = buf_size(out);

		struct buf cell = {};
		sanitize_str(name ? name : "?", 80, &cell);
		buf_printf(out, "%-*s  ", (int)width, buf_head(&cell));
		buf_clear(&cell);
		sanitize_str(tool_side(tools[i]), 16, &cell);
		buf_printf(out, "%-*s  ", (int)side_width, buf_head(&cell));
		buf_free(&cell);

		if (desc) {
			size_t len = strcspn(desc, "\n");
			ctl_sanitize(desc, len, VALUE_MAX, out);
		}
		/* No trailing blanks when there is no description. */
		while (buf_size(out) > start && buf_head(out)[buf_size(out) - 1] == ' ')
			out->len--;
		buf_putc(out, '\n');
	}
}

/* True when a string can be shown bare after "key=". */
static bool plain_word(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c == '"' || c == '\\' || c == 0x7f)
			return false;
	}
	return true;
}

/* Appends a value of an event or prompt, shortened and made harmless. */
static void short_value(const struct json *v, struct buf *out)
{
	struct buf tmp = {};

	if (v->type == JSON_STRING && plain_word(v->u.str.s, v->u.str.len)) {
		ctl_sanitize(v->u.str.s, v->u.str.len, VALUE_MAX, out);
		return;
	}
	if (v->type == JSON_STRING) {
		json_quote(&tmp, v->u.str.s, v->u.str.len);
	} else {
		struct jgen *g = jgen_new(&tmp);
		jgen_value(g, v);
		jgen_free(g);
	}
	ctl_sanitize(buf_head(&tmp), buf_size(&tmp), VALUE_MAX, out);
	buf_free(&tmp);
}

void ctl_event_line(const struct json *event, struct buf *out)
{
	static const struct {
		const char *key, *label;
	} first[] = {
		{ "callId", "call" },
		{ "sessionId", "session" },
		{ "kind", "kind" },
	};
	const struct json *time = json_get(event, "time");
	int64_t ms;

	if (json_str(time)) {
		sanitize_str(json_str(time), 64, out);
	} else if (json_get_int(time, &ms) && ms >= 0) {
		char tbuf[32];
		format_time((uint64_t)ms, tbuf);
		buf_puts(out, tbuf);
	} else {
		buf_puts(out, "-");
	}
	buf_putc(out, ' ');
	sanitize_str(json_str(json_get(event, "type")) ?: "?", 64, out);

	const struct json *tool = json_get(event, "tool");
	if (json_str(tool)) {
		buf_putc(out, ' ');
		short_value(tool, out);
	}

	for (size_t i = 0; i < ELEMENTSOF(first); i++) {
		const struct json *v = json_get(event, first[i].key);
		if (!v || v->type == JSON_NULL)
			continue;
		buf_printf(out, " %s=", first[i].label);
		short_value(v, out);
	}

	if (event && event->type == JSON_OBJECT)
		for (size_t i = 0; i < event->u.obj.n; i++) {
			const struct json_member *m = &event->u.obj.members[i];
			bool shown = str_eq(m->key, "time") || str_eq(m->key, "type") ||
				     (str_eq(m->key, "tool") && json_str(tool));
			for (size_t j = 0; j < ELEMENTSOF(first); j++)
				shown = shown || str_eq(m->key, first[j].key);
			if (shown)
				continue;
			buf_putc(out, ' ');
			ctl_sanitize(m->key, m->key_len, 64, out);
			buf_putc(out, '=');
			short_value(m->value, out);
		}
	buf_putc(out, '\n');
}

/* The first of several names a member may go by. */
static const struct json *get_any(const struct json *obj, const char *const *keys)
{
	for (; *keys; keys++) {
		const struct json *v = json_get(obj, *keys);
		if (v && v->type != JSON_NULL)
			return v;
	}
	return NULL;
}

const struct json *ctl_confirm_request_id(const struct json *event)
{
	static const char *const keys[] = { "requestId", "confirmationId", "id", NULL };
	return get_any(event, keys);
}

void ctl_escape(const char *s, size_t n, struct buf *out)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_lead_len(u[i]);
		bool ok = l > 0 && i + l <= n && utf8_valid(s + i, l);
		if (!ok) {
			buf_printf(out, "\\x%02X", u[i]);
			i++;
			continue;
		}
		if (l == 1 && u[i] == '\\')
			buf_puts(out, "\\\\");
		else if (l == 1 && u[i] == '\n')
			buf_puts(out, "\\n");
		else if (l == 1 && u[i] == '\t')
			buf_puts(out, "\\t");
		else if (l == 1 && u[i] == '\r')
			buf_puts(out, "\\r");
		else if (is_control(u + i, l)) {
			uint32_t cp = 0;
			utf8_decode(s + i, l, &cp);
			buf_printf(out, "\\u{%X}", (unsigned)cp);
		}
		else
			buf_append(out, s + i, l);
		i += l;
	}
}

/* The arguments of a confirmation request as an object: the daemon sends
 * them as JSON text in "input" (*ret_doc then holds them), others may send
 * the object itself. NULL when there is none. */
static const struct json *confirm_arguments(const struct json *event, struct json_doc **ret_doc)
{
	const struct json *in = json_get(event, "input");
	if (in && in->type == JSON_OBJECT)
		return in;
	if (!in || in->type != JSON_STRING ||
	    json_parse(in->u.str.s, in->u.str.len, 0, 64, ret_doc, NULL) < 0)
		return NULL;
	const struct json *v = json_doc_root(*ret_doc);
	return v && v->type == JSON_OBJECT ? v : NULL;
}

/* Appends one argument on a line of its own, every byte of it: strings
 * with their length, other values as JSON. */
static void argument_line(const struct json_member *m, struct buf *out)
{
	buf_puts(out, "  ");
	ctl_escape(m->key, m->key_len, out);
	const struct json *v = m->value;
	if (v->type == JSON_STRING) {
		buf_printf(out, " (%zu bytes): ", v->u.str.len);
		ctl_escape(v->u.str.s, v->u.str.len, out);
	} else {
		struct buf tmp = {};
		struct jgen *g = jgen_new(&tmp);
		jgen_value(g, v);
		jgen_free(g);
		buf_puts(out, ": ");
		ctl_escape(buf_head(&tmp), buf_size(&tmp), out);
		buf_free(&tmp);
	}
	buf_putc(out, '\n');
}


/* Lines of a diff shown before a confirmation question, at most. */
#define DIFF_LINES_MAX 200

/*
 * Appends the diff a confirmation request carries, line by line, each line
 * sanitized (a tab shown as spaces) so that it cannot move the cursor or
 * fake the question, cut after DIFF_LINES_MAX lines.
 */
static void confirm_diff(const struct json *diff, struct buf *out)
{
	const char *s = diff->u.str.s, *end = s + diff->u.str.len;
	size_t lines = 0;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;
		if (++lines > DIFF_LINES_MAX) {
			size_t more = 0;
			for (const char *p = s; p < end; p++)
				more += *p == '\n';
			buf_printf(out, "[... %zu more lines of diff]\n", more + (end[-1] != '\n'));
			return;
		}
		for (const char *p = s; p < e;) {
			const char *tab = memchr(p, '\t', (size_t)(e - p));
			const char *pe = tab ? tab : e;
			ctl_sanitize(p, (size_t)(pe - p), 400, out);
			if (tab)
				buf_puts(out, "    ");
			p = tab ? tab + 1 : e;
		}
		buf_putc(out, '\n');
		s = nl ? nl + 1 : end;
	}
}

void ctl_confirm_prompt(const struct json *event, struct buf *out)
{
	static const char *const side_keys[] = { "sideEffects", "sideEffect", "side_effects", NULL };
	static const char *const summary_keys[] = { "summary", "inputSummary", "arguments", NULL };
	static const char *const files_keys[] = { "files", "projectedFiles", NULL };

	const struct json *diff = json_get(event, "diff");
	if (json_str(diff) && diff->u.str.len)
		confirm_diff(diff, out);
	/* A sandboxed child's connection through the network proxy: the
	 * host and port are the whole question. */
	int64_t port;
	if (str_eq(json_str(json_get(event, "kind")), "network.connect") && json_str(json_get(event, "host")) &&
	    json_get_int(json_get(event, "port"), &port)) {
		buf_puts(out, "Allow ");
		sanitize_str(json_str(json_get(event, "tool")) ?: "?", 80, out);
		buf_puts(out, " to connect to ");
		sanitize_str(json_str(json_get(event, "host")), 256, out);
		buf_printf(out, ":%" PRId64 " (network.connect)? [y]es/[n]o/[a]lways: ", port);
		return;
	}
	buf_puts(out, "Allow ");
	sanitize_str(json_str(json_get(event, "tool")) ?: "?", 80, out);
	const struct json *side = get_any(event, side_keys);
	if (json_str(side)) {
		buf_puts(out, " (");
		sanitize_str(json_str(side), 16, out);
		buf_putc(out, ')');
	}
	const struct json *files = get_any(event, files_keys);
	bool has_files = files && files->type == JSON_ARRAY && files->u.arr.n > 0;

	struct json_doc *doc = NULL;
	const struct json *args = confirm_arguments(event, &doc);
	if (args) {
		/* Every byte of what will run, one argument a line. */
		buf_puts(out, ":\n");
		for (size_t i = 0; i < args->u.obj.n; i++)
			argument_line(&args->u.obj.members[i], out);
		if (has_files) {
			buf_puts(out, "  files:");
			for (size_t i = 0; i < files->u.arr.n; i++) {
				const struct json *f = files->u.arr.items[i];
				buf_puts(out, i ? ", " : " ");
				if (json_str(f))
					ctl_escape(f->u.str.s, f->u.str.len, out);
				else
					short_value(f, out);
			}
			buf_putc(out, '\n');
		}
		json_doc_unref(doc);
		buf_puts(out, "Allow it? [y]es/[n]o/[a]lways: ");
		return;
	}
	json_doc_unref(doc);

	const struct json *summary = get_any(event, summary_keys);
	if (summary) {
		buf_putc(out, ' ');
		if (json_str(summary))
			ctl_sanitize(summary->u.str.s, summary->u.str.len, SIZE_MAX, out);
		else
			short_value(summary, out);
	}
	if (has_files) {
		buf_puts(out, " [files:");
		for (size_t i = 0; i < files->u.arr.n; i++) {
			buf_putc(out, ' ');
			short_value(files->u.arr.items[i], out);
		}
		buf_putc(out, ']');
	}
	buf_puts(out, "? [y]es/[n]o/[a]lways: ");
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

const char *ctl_parse_answer(const char *line, size_t len)
{
	static const struct {
		const char *word, *decision;
	} answers[] = {
		{ "y", "allow" },
		{ "yes", "allow" },
		{ "n", "deny" },
		{ "no", "deny" },
		{ "a", "always_allow" },
		{ "always", "always_allow" },
	};

	while (len > 0 && is_blank(line[0])) {
		line++;
		len--;
	}
	while (len > 0 && is_blank(line[len - 1]))
		len--;
	for (size_t i = 0; i < ELEMENTSOF(answers); i++)
		if (strlen(answers[i].word) == len && strncasecmp(line, answers[i].word, len) == 0)
			return answers[i].decision;
	return NULL;
}
