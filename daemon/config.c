/* SPDX-License-Identifier: MIT */
/*
 * The config file: reading it with a size cap, parsing it with comments
 * allowed, and checking every key against one table per section. Numbers
 * go through one range check, paths through one resolver, and every
 * complaint through one function that prefixes FILE:LINE:COL, so a message
 * always points at the text to fix.
 */
#include "daemon/config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/default_socket.h"
#include "proto/base/buf.h"
#include "proto/json.h"

static const char *const builtin_names[CONFIG_TOOL_MAX] = {
	[CONFIG_TOOL_READ_FILE] = "read_file",
	[CONFIG_TOOL_WRITE_FILE] = "write_file",
	[CONFIG_TOOL_PATCH_FILE] = "patch_file",
	[CONFIG_TOOL_LIST_DIR] = "list_dir",
	[CONFIG_TOOL_SHELL] = "shell",
};

static const char *const default_env_allow[] = { "PATH", "LANG", "HOME", "TERM" };

static const struct {
	const char *name;
	int level;
} log_levels[] = {
	{ "debug", LOG_DEBUG },
	{ "info", LOG_INFO },
	{ "warning", LOG_WARNING },
	{ "error", LOG_ERR },
};

const char *config_builtin_name(enum config_builtin b)
{
	return (unsigned)b < CONFIG_TOOL_MAX ? builtin_names[b] : NULL;
}

int config_builtin_from_name(const char *name)
{
	for (int i = 0; i < CONFIG_TOOL_MAX; i++)
		if (name && strcmp(builtin_names[i], name) == 0)
			return i;
	return -1;
}

const char *config_log_level_name(int level)
{
	for (size_t i = 0; i < ELEMENTSOF(log_levels); i++)
		if (log_levels[i].level == level)
			return log_levels[i].name;
	return "?";
}

char *config_default_socket(void)
{
	return default_socket_path();
}

static void strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void config_init(struct config *c)
{
	*c = (struct config) {
		.socket_mode = 0660,
		.workspace = xstrdup("."),
		.audit_fsync_ms = 1000,
		.grace_ms = 10000,
		.log_level = LOG_INFO,
		.limits = {
			.max_message_bytes = 8388608,
			.max_json_depth = 64,
			.max_batch = 1000,
			.max_concurrent = 64,
			.session_concurrency = 4,
			.queue_max = 256,
			.queue_max_total = 8192,
			.max_connections = 16384,
			.max_output_bytes = 16u << 20,
			.max_client_memory = UINT64_C(1) << 30,
			.idle_timeout_ms = 0,
			.event_queue = 1024,
		},
		.retry = { .max_attempts = 3, .base_delay_ms = 100 },
		.idempotency = { .ttl_ms = 60000, .max_entries = 10000, .max_bytes = UINT64_C(256) << 20 },
		.circuit = { .failures = 5, .window_ms = 30000, .open_ms = 30000 },
		.tools = {
			.timeout_ms = { [CONFIG_TOOL_SHELL] = 600000 },
			.shell_output_cap = 1048576,
			.read_file_limit = 1048576,
		},
	};
	policy_config_init(&c->confirmation);

	size_t n = ELEMENTSOF(default_env_allow);
	c->tools.shell_env_allow = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		c->tools.shell_env_allow[i] = xstrdup(default_env_allow[i]);
	c->tools.n_shell_env_allow = n;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->socket);
	free(c->workspace);
	strv_free(c->workspaces_allowed, c->n_workspaces_allowed);
	free(c->tools_dir);
	free(c->tools_dir_at);
	free(c->audit_log);
	for (size_t i = 0; i < c->limits.n_per_tool; i++)
		free(c->limits.per_tool[i].name);
	free(c->limits.per_tool);
	policy_config_free(&c->confirmation);
	strv_free(c->tools.shell_env_allow, c->tools.n_shell_env_allow);
	free(c->peers.uids);
	free(c->peers.gids);
	*c = (struct config) {};
}

uint32_t config_tool_timeout(const struct config *c, const char *name)
{
	int b = config_builtin_from_name(name);
	return b < 0 ? 0 : c->tools.timeout_ms[b];
}

uint32_t config_tool_concurrency(const struct config *c, const char *name)
{
	for (size_t i = 0; i < c->limits.n_per_tool; i++)
		if (strcmp(c->limits.per_tool[i].name, name) == 0)
			return c->limits.per_tool[i].max;
	return 0;
}

char *config_resolve_path(const char *base_dir, const char *path)
{
	struct buf b = {};

	if (path[0] != '/' && base_dir)
		buf_printf(&b, "%s/", base_dir);
	buf_puts(&b, path);
	_cleanup_free_ char *joined = buf_steal(&b);

	/* Drop "." components and repeated or trailing slashes; ".." stays for
	 * the kernel to resolve, since taking it lexically would be wrong when
	 * a component is a symbolic link. */
	bool is_abs = joined[0] == '/';
	bool first = true;
	if (is_abs)
		buf_putc(&b, '/');
	for (char *s = joined; *s;) {
		while (*s == '/')
			s++;
		char *e = s;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - s);
		if (n > 0 && !(n == 1 && s[0] == '.')) {
			if (!first)
				buf_putc(&b, '/');
			buf_append(&b, s, n);
			first = false;
		}
		s = e;
	}
	if (buf_size(&b) == 0)
		buf_putc(&b, '.');
	return buf_steal(&b);
}

/* --- parsing ------------------------------------------------------------ */

struct cfg_parse {
	const char *name;	/* the file's name, for messages */
	const char *text;
	size_t len;
	const char *base_dir;	/* NULL: leave relative paths as written */
	char *err;
};

/* Records the first error, located at byte off of the text. Returns -EINVAL. */
static int PRINTF(4, 5) fail(struct cfg_parse *p, size_t off, const char *key, const char *fmt, ...)
{
	if (p->err)
		return -EINVAL;

	unsigned line, col;
	json_line_col(p->text, p->len, off, &line, &col);

	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);

	if (key)
		p->err = xasprintf("%s:%u:%u: %s: %s", p->name, line, col, key, msg);
	else
		p->err = xasprintf("%s:%u:%u: %s", p->name, line, col, msg);
	return -EINVAL;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * Finds where a member's key starts: the tree keeps only the value's
 * offset, so walk back over ':' and white space to the key's closing quote,
 * then to its opening quote. A comment between key and value defeats
 * this; the value's offset is then close enough.
 */
static size_t key_offset(const struct cfg_parse *p, const struct json *value)
{
	size_t i = value->off;

	while (i > 0 && is_blank(p->text[i - 1]))
		i--;
	if (i == 0 || p->text[i - 1] != ':')
		return value->off;
	i--;
	while (i > 0 && is_blank(p->text[i - 1]))
		i--;
	if (i == 0 || p->text[i - 1] != '"')
		return value->off;
	i--;	/* at the closing quote */
	while (i > 0) {
		i--;
		if (p->text[i] != '"')
			continue;
		size_t bs = 0;
		while (bs < i && p->text[i - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			return i;
	}
	return value->off;
}

/* Appends a key to a dotted path, made printable (keys come from the file
 * and end up on a terminal or in the journal). */
static char *key_path(const char *parent, const struct json_member *m)
{
	struct buf b = {};

	if (parent) {
		buf_puts(&b, parent);
		buf_putc(&b, '.');
	}
	size_t n = MIN(m->key_len, (size_t)64);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)m->key[i];
		buf_putc(&b, ch < 0x20 || ch == 0x7f ? '?' : (char)ch);
	}
	if (m->key_len > n)
		buf_puts(&b, "...");
	return buf_steal(&b);
}

/* True when a key is a plain C string equal to s. */
static bool key_is(const struct json_member *m, const char *s)
{
	return m->key_len == strlen(s) && memcmp(m->key, s, m->key_len) == 0;
}

/* True when a key holds no NUL byte (it names a tool or a class). */
static bool key_plain(const struct json_member *m)
{
	return m->key_len > 0 && strlen(m->key) == m->key_len;
}

/* The type of a value as messages name it ("integer", "string"). */
static const char *got(const struct json *v)
{
	return json_kind_name(v);
}

/* Checks an integer in [min, max]. */
static int want_uint(struct cfg_parse *p, const char *key, const struct json *v,
		     uint64_t min, uint64_t max, uint64_t *ret)
{
	const char *what = min == 0 ? "a non-negative integer" :
			   min == 1 ? "a positive integer" : "an integer";
	int64_t i;

	if (!json_get_int(v, &i)) {
		if (v->type == JSON_NUMBER)
			return fail(p, v->off, key, "expected %s, got %.*s", what,
				    (int)MIN(v->u.num.raw_len, (size_t)40), v->u.num.raw);
		return fail(p, v->off, key, "expected %s, got %s", what, got(v));
	}
	if (i < 0 || (uint64_t)i < min) {
		if (min <= 1)
			return fail(p, v->off, key, "expected %s", what);
		return fail(p, v->off, key, "expected an integer of at least %llu",
			    (unsigned long long)min);
	}
	if ((uint64_t)i > max)
		return fail(p, v->off, key, "expected %s of at most %llu", what,
			    (unsigned long long)max);
	*ret = (uint64_t)i;
	return 0;
}

/* Checks a non-empty string without NUL bytes. */
static int want_string(struct cfg_parse *p, const char *key, const struct json *v, const char **ret)
{
	if (v->type != JSON_STRING)
		return fail(p, v->off, key, "expected a string, got %s", got(v));
	if (v->u.str.len == 0)
		return fail(p, v->off, key, "expected a non-empty string");
	if (strlen(v->u.str.s) != v->u.str.len)
		return fail(p, v->off, key, "must not contain NUL bytes");
	*ret = v->u.str.s;
	return 0;
}

/* Checks a path and resolves it against the file's directory. */
static int want_path(struct cfg_parse *p, const char *key, const struct json *v, char **ret)
{
	const char *s;
	int r = want_string(p, key, v, &s);
	if (r < 0)
		return r;
	if (strlen(s) >= PATH_MAX)
		return fail(p, v->off, key, "path longer than %d bytes", PATH_MAX - 1);
	*ret = config_resolve_path(p->base_dir, s);
	return 0;
}

/* Checks an array of strings (paths when resolve). */
static int want_strv(struct cfg_parse *p, const char *key, const struct json *v, bool resolve,
		     char ***ret, size_t *ret_n)
{
	if (v->type != JSON_ARRAY)
		return fail(p, v->off, key, "expected an array of strings, got %s", got(v));

	size_t n = v->u.arr.n;
	char **strv = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *k = xasprintf("%s[%zu]", key, i);
		const struct json *item = v->u.arr.items[i];
		const char *s;
		int r = resolve ? want_path(p, k, item, &strv[i]) : want_string(p, k, item, &s);
		if (r < 0) {
			strv_free(strv, n);
			return r;
		}
		if (!resolve)
			strv[i] = xstrdup(s);
	}
	*ret = strv;
	*ret_n = n;
	return 0;
}

/* Checks a mode string: "auto", "prompt" or "deny". */
static int want_mode(struct cfg_parse *p, const char *key, const struct json *v, enum confirm_mode *ret)
{
	int m = confirm_mode_from_name(json_str(v));
	if (m < 0 || strlen(v->u.str.s) != v->u.str.len) {
		if (v->type != JSON_STRING)
			return fail(p, v->off, key, "expected \"auto\", \"prompt\" or \"deny\", got %s", got(v));
		return fail(p, v->off, key, "expected \"auto\", \"prompt\" or \"deny\"");
	}
	*ret = (enum confirm_mode)m;
	return 0;
}

/* The side-effect class a key names, or a located error. */
static int want_class(struct cfg_parse *p, const char *key, const struct json_member *m, int *ret)
{
	int cls = key_plain(m) ? side_effect_from_name(m->key) : -1;
	if (cls < 0)
		return fail(p, key_offset(p, m->value), key,
			    "unknown side-effect class (expected none, read, write, execute or network)");
	*ret = cls;
	return 0;
}

/* Checks that a value is an object. */
static int want_object(struct cfg_parse *p, const char *key, const struct json *v)
{
	if (v->type != JSON_OBJECT)
		return fail(p, v->off, key, "expected an object, got %s", got(v));
	return 0;
}

/* --- the key tables ------------------------------------------------------ */

enum field_kind {
	F_U32,		/* uint32_t in [min, max] */
	F_U64,		/* uint64_t in [min, max] */
	F_PATH,		/* char *, resolved */
	F_PATH_NULL,	/* char *, resolved, or null */
	F_PATHS,	/* char ** and size_t at off_n, resolved */
	F_SECTION,	/* an object checked against another table */
	F_CUSTOM,
};

struct field {
	const char *key;
	enum field_kind kind;
	size_t off;
	size_t off_n;
	uint64_t min, max;
	const struct field *section;	/* NULL-key terminated */
	const char *unknown;		/* F_SECTION: message for an unknown key */
	int (*parse)(struct cfg_parse *p, const char *key, const struct json *v, struct config *c);
};

#define CFG(m) offsetof(struct config, m)
#define U32(k, m, lo, hi) { .key = k, .kind = F_U32, .off = CFG(m), .min = lo, .max = hi }
#define U64(k, m, lo, hi) { .key = k, .kind = F_U64, .off = CFG(m), .min = lo, .max = hi }
#define PATH(k, m) { .key = k, .kind = F_PATH, .off = CFG(m) }
#define PATH_NULL(k, m) { .key = k, .kind = F_PATH_NULL, .off = CFG(m) }
#define PATHS(k, m, n) { .key = k, .kind = F_PATHS, .off = CFG(m), .off_n = CFG(n) }
#define SECTION(k, t, u) { .key = k, .kind = F_SECTION, .section = t, .unknown = u }
#define CUSTOM(k, f) { .key = k, .kind = F_CUSTOM, .parse = f }

#define MS_MAX UINT32_MAX
#define GIB (UINT64_C(1) << 30)

static int parse_section(struct cfg_parse *p, const char *key, const struct json *v,
			 const struct field *fields, const char *unknown, struct config *c);

/* "socket": a path short enough for sun_path, or null. */
static int parse_socket(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	char *s = NULL;
	if (v->type != JSON_NULL) {
		int r = want_path(p, key, v, &s);
		if (r < 0)
			return r;
		if (strlen(s) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
			free(s);
			return fail(p, v->off, key, "socket path longer than %zu bytes",
				    sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
		}
	}
	free(c->socket);
	c->socket = s;
	return 0;
}

/* "socket_mode": a string of octal digits, "0660". */
static int parse_socket_mode(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	static const char want[] = "expected a string of 3 or 4 octal digits such as \"0660\"";

	if (!s)
		return fail(p, v->off, key, "%s, got %s", want, got(v));
	size_t n = v->u.str.len;
	if (n < 3 || n > 4 || strspn(s, "01234567") != n)
		return fail(p, v->off, key, "%s", want);
	unsigned long mode = strtoul(s, NULL, 8);
	if (mode > 0777)
		return fail(p, v->off, key, "setuid, setgid and sticky bits make no sense on a socket");
	c->socket_mode = (mode_t)mode;
	return 0;
}

/* "log_level": a name mapped to a syslog priority. */
static int parse_log_level(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	for (size_t i = 0; s && i < ELEMENTSOF(log_levels); i++)
		if (strcmp(s, log_levels[i].name) == 0 && strlen(s) == v->u.str.len) {
			c->log_level = log_levels[i].level;
			return 0;
		}
	return fail(p, v->off, key, "expected \"debug\", \"info\", \"warning\" or \"error\"%s%s",
		    s ? "" : ", got ", s ? "" : got(v));
}

/* "limits.per_tool_concurrency": { "tool": N }. */
static int parse_per_tool_concurrency(struct cfg_parse *p, const char *key, const struct json *v,
				      struct config *c)
{
	int r = want_object(p, key, v);
	if (r < 0)
		return r;

	size_t n = v->u.obj.n;
	struct config_tool_cap *caps = xcalloc(n ? n : 1, sizeof(*caps));
	for (size_t i = 0; i < n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = key_path(key, m);
		uint64_t max = 0;
		if (!key_plain(m))
			r = fail(p, key_offset(p, m->value), k, "expected a tool name");
		else
			r = want_uint(p, k, m->value, 1, 1000000, &max);
		if (r < 0) {
			for (size_t j = 0; j < i; j++)
				free(caps[j].name);
			free(caps);
			return r;
		}
		caps[i] = (struct config_tool_cap) { xstrdup(m->key), (uint32_t)max };
	}
	for (size_t i = 0; i < c->limits.n_per_tool; i++)
		free(c->limits.per_tool[i].name);
	free(c->limits.per_tool);
	c->limits.per_tool = caps;
	c->limits.n_per_tool = n;
	return 0;
}

/* "confirmation.no_approver": "deny" or "wait". */
static int parse_no_approver(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	if (s && strlen(s) == v->u.str.len && (str_eq(s, "deny") || str_eq(s, "wait"))) {
		c->confirmation.no_approver_wait = str_eq(s, "wait");
		return 0;
	}
	return fail(p, v->off, key, "expected \"deny\" or \"wait\"%s%s", s ? "" : ", got ", s ? "" : got(v));
}

/* "confirmation.default": { class: mode }, merged with the defaults. */
static int parse_confirm_default(struct cfg_parse *p, const char *key, const struct json *v,
				 struct config *c)
{
	int r = want_object(p, key, v);
	if (r < 0)
		return r;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = key_path(key, m);
		int cls = 0;
		r = want_class(p, k, m, &cls);
		if (r < 0)
			return r;
		r = want_mode(p, k, m->value, &c->confirmation.by_class[cls]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "confirmation.trusted_workspace_overrides": { class: mode }, replacing
 * the default overrides. */
static int parse_trusted_overrides(struct cfg_parse *p, const char *key, const struct json *v,
				   struct config *c)
{
	int r = want_object(p, key, v);
	if (r < 0)
		return r;

	bool has[SIDE_MAX] = {};
	enum confirm_mode mode[SIDE_MAX] = {};
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = key_path(key, m);
		int cls = 0;
		r = want_class(p, k, m, &cls);
		if (r < 0)
			return r;
		r = want_mode(p, k, m->value, &mode[cls]);
		if (r < 0)
			return r;
		has[cls] = true;
	}
	memcpy(c->confirmation.has_override, has, sizeof(has));
	memcpy(c->confirmation.trusted_override, mode, sizeof(mode));
	return 0;
}

/* "confirmation.per_tool": { "tool": mode }. */
static int parse_per_tool_mode(struct cfg_parse *p, const char *key, const struct json *v,
			       struct config *c)
{
	int r = want_object(p, key, v);
	if (r < 0)
		return r;

	size_t n = v->u.obj.n;
	struct policy_tool_mode *modes = xcalloc(n ? n : 1, sizeof(*modes));
	for (size_t i = 0; i < n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = key_path(key, m);
		if (!key_plain(m))
			r = fail(p, key_offset(p, m->value), k, "expected a tool name");
		else
			r = want_mode(p, k, m->value, &modes[i].mode);
		if (r < 0) {
			for (size_t j = 0; j < i; j++)
				free(modes[j].name);
			free(modes);
			return r;
		}
		modes[i].name = xstrdup(m->key);
	}
	struct policy_config *pc = &c->confirmation;
	for (size_t i = 0; i < pc->n_per_tool; i++)
		free(pc->per_tool[i].name);
	free(pc->per_tool);
	pc->per_tool = modes;
	pc->n_per_tool = n;
	return 0;
}

/* "confirmation.trusted_workspaces": paths, made canonical when they exist
 * so they compare equal to the canonical roots of sessions. */
static int parse_trusted(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	char **strv;
	size_t n;
	int r = want_strv(p, key, v, true, &strv, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		char *real = realpath(strv[i], NULL);
		if (real) {
			free(strv[i]);
			strv[i] = real;
		}
	}
	struct policy_config *pc = &c->confirmation;
	strv_free(pc->trusted_workspaces, pc->n_trusted);
	pc->trusted_workspaces = strv;
	pc->n_trusted = n;
	return 0;
}

/* "tools.shell.env_allow": names of variables passed to commands. */
static int parse_env_allow(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	char **strv;
	size_t n;
	int r = want_strv(p, key, v, false, &strv, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (strchr(strv[i], '=')) {
			strv_free(strv, n);
			return fail(p, v->u.arr.items[i]->off, key, "expected a variable name, without '='");
		}
	strv_free(c->tools.shell_env_allow, c->tools.n_shell_env_allow);
	c->tools.shell_env_allow = strv;
	c->tools.n_shell_env_allow = n;
	return 0;
}

/* Checks a list of user or group ids, or names looked up now. */
static int want_ids(struct cfg_parse *p, const char *key, const struct json *v, bool groups,
		    uint32_t **ret, size_t *ret_n)
{
	if (v->type != JSON_ARRAY)
		return fail(p, v->off, key, "expected an array of %s, got %s",
			    groups ? "group ids or names" : "user ids or names", got(v));

	size_t n = v->u.arr.n;
	_cleanup_free_ uint32_t *ids = xcalloc(n ? n : 1, sizeof(uint32_t));
	for (size_t i = 0; i < n; i++) {
		const struct json *item = v->u.arr.items[i];
		_cleanup_free_ char *k = xasprintf("%s[%zu]", key, i);
		const char *name = json_str(item);
		if (name) {
			const char *s;
			int r = want_string(p, k, item, &s);
			if (r < 0)
				return r;
			if (groups) {
				struct group *g = getgrnam(name);
				if (!g)
					return fail(p, item->off, k, "no such group '%s'", name);
				ids[i] = g->gr_gid;
			} else {
				struct passwd *pw = getpwnam(name);
				if (!pw)
					return fail(p, item->off, k, "no such user '%s'", name);
				ids[i] = pw->pw_uid;
			}
			continue;
		}
		uint64_t id;
		/* (uid_t)-1 means "no id" to the kernel: never a real peer. */
		int r = want_uint(p, k, item, 0, UINT32_MAX - 1, &id);
		if (r < 0)
			return r;
		ids[i] = (uint32_t)id;
	}
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

/* "peers.allow_uids". */
static int parse_allow_uids(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	uint32_t *ids;
	size_t n;
	_Static_assert(sizeof(uid_t) == sizeof(uint32_t), "uid_t is 32 bits");
	int r = want_ids(p, key, v, false, &ids, &n);
	if (r < 0)
		return r;
	free(c->peers.uids);
	c->peers.uids = (uid_t *)ids;
	c->peers.n_uids = n;
	return 0;
}

/* "peers.allow_gids". */
static int parse_allow_gids(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	uint32_t *ids;
	size_t n;
	_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "gid_t is 32 bits");
	int r = want_ids(p, key, v, true, &ids, &n);
	if (r < 0)
		return r;
	free(c->peers.gids);
	c->peers.gids = (gid_t *)ids;
	c->peers.n_gids = n;
	return 0;
}

#define TOOL_TIMEOUT(b) U32("timeout_ms", tools.timeout_ms[b], 1, MS_MAX)

static const struct field workspaces_fields[] = {
	PATHS("allowed", workspaces_allowed, n_workspaces_allowed),
	{},
};

static const struct field limits_fields[] = {
	U64("max_message_bytes", limits.max_message_bytes, 256, GIB),
	U32("max_json_depth", limits.max_json_depth, 2, 1024),
	U32("max_batch", limits.max_batch, 1, 1000000),
	U32("max_concurrent", limits.max_concurrent, 1, 1000000),
	U32("session_concurrency", limits.session_concurrency, 1, 1000000),
	U32("queue_max", limits.queue_max, 0, 1000000),
	U32("queue_max_total", limits.queue_max_total, 0, 100000000),
	U32("max_connections", limits.max_connections, 1, 1000000),
	U64("max_output_bytes", limits.max_output_bytes, 4096, 1024 * GIB),
	U64("max_client_memory", limits.max_client_memory, 1 << 20, 1024 * GIB),
	U64("idle_timeout_ms", limits.idle_timeout_ms, 0, MS_MAX),
	CUSTOM("per_tool_concurrency", parse_per_tool_concurrency),
	U32("event_queue", limits.event_queue, 1, 1000000),
	{},
};

static const struct field retry_fields[] = {
	U32("max_attempts", retry.max_attempts, 1, 100),
	U64("base_delay_ms", retry.base_delay_ms, 0, 3600000),
	{},
};

static const struct field idempotency_fields[] = {
	U64("ttl_ms", idempotency.ttl_ms, 0, MS_MAX),
	U64("max_entries", idempotency.max_entries, 1, 100000000),
	U64("max_bytes", idempotency.max_bytes, 1 << 20, 1024 * GIB),
	{},
};

static const struct field circuit_fields[] = {
	U32("failures", circuit.failures, 1, 1000000),
	U64("window_ms", circuit.window_ms, 1, MS_MAX),
	U64("open_ms", circuit.open_ms, 1, MS_MAX),
	{},
};

static const struct field confirmation_fields[] = {
	U64("timeout_ms", confirmation.timeout_ms, 1, MS_MAX),
	CUSTOM("no_approver", parse_no_approver),
	CUSTOM("default", parse_confirm_default),
	CUSTOM("per_tool", parse_per_tool_mode),
	CUSTOM("trusted_workspaces", parse_trusted),
	CUSTOM("trusted_workspace_overrides", parse_trusted_overrides),
	{},
};

static const struct field shell_fields[] = {
	TOOL_TIMEOUT(CONFIG_TOOL_SHELL),
	CUSTOM("env_allow", parse_env_allow),
	U64("output_cap", tools.shell_output_cap, 1, GIB),
	{},
};

static const struct field read_file_fields[] = {
	TOOL_TIMEOUT(CONFIG_TOOL_READ_FILE),
	U64("limit", tools.read_file_limit, 1, GIB),
	{},
};

static const struct field write_file_fields[] = { TOOL_TIMEOUT(CONFIG_TOOL_WRITE_FILE), {} };
static const struct field patch_file_fields[] = { TOOL_TIMEOUT(CONFIG_TOOL_PATCH_FILE), {} };
static const struct field list_dir_fields[] = { TOOL_TIMEOUT(CONFIG_TOOL_LIST_DIR), {} };

static const struct field tools_fields[] = {
	SECTION("read_file", read_file_fields, NULL),
	SECTION("write_file", write_file_fields, NULL),
	SECTION("patch_file", patch_file_fields, NULL),
	SECTION("list_dir", list_dir_fields, NULL),
	SECTION("shell", shell_fields, NULL),
	{},
};

static const struct field peers_fields[] = {
	CUSTOM("allow_uids", parse_allow_uids),
	CUSTOM("allow_gids", parse_allow_gids),
	{},
};

static const struct field root_fields[] = {
	CUSTOM("socket", parse_socket),
	CUSTOM("socket_mode", parse_socket_mode),
	PATH("workspace", workspace),
	SECTION("workspaces", workspaces_fields, NULL),
	PATH_NULL("tools_dir", tools_dir),
	PATH_NULL("audit_log", audit_log),
	U64("audit_fsync_ms", audit_fsync_ms, 0, MS_MAX),
	U64("grace_ms", grace_ms, 0, MS_MAX),
	CUSTOM("log_level", parse_log_level),
	SECTION("limits", limits_fields, NULL),
	SECTION("retry", retry_fields, NULL),
	SECTION("idempotency", idempotency_fields, NULL),
	SECTION("circuit", circuit_fields, NULL),
	SECTION("confirmation", confirmation_fields, NULL),
	SECTION("tools", tools_fields,
		"not a built-in tool (read_file, write_file, patch_file, list_dir, shell); "
		"tool files set their own timeout_ms"),
	SECTION("peers", peers_fields, NULL),
	{},
};

/* Checks one value against its field and stores it. */
static int parse_field(struct cfg_parse *p, const char *key, const struct json *v,
		       const struct field *f, struct config *c)
{
	void *at = (char *)c + f->off;
	uint64_t u;
	char *s;
	int r;

	switch (f->kind) {
	case F_U32:
		r = want_uint(p, key, v, f->min, f->max, &u);
		if (r < 0)
			return r;
		*(uint32_t *)at = (uint32_t)u;
		return 0;
	case F_U64:
		r = want_uint(p, key, v, f->min, f->max, &u);
		if (r < 0)
			return r;
		*(uint64_t *)at = u;
		return 0;
	case F_PATH_NULL:
		if (v->type == JSON_NULL) {
			free(*(char **)at);
			*(char **)at = NULL;
			return 0;
		}
		__attribute__((fallthrough));
	case F_PATH:
		r = want_path(p, key, v, &s);
		if (r < 0)
			return r;
		free(*(char **)at);
		*(char **)at = s;
		return 0;
	case F_PATHS: {
		char **strv;
		size_t n;
		r = want_strv(p, key, v, true, &strv, &n);
		if (r < 0)
			return r;
		size_t *at_n = (size_t *)((char *)c + f->off_n);
		strv_free(*(char ***)at, *at_n);
		*(char ***)at = strv;
		*at_n = n;
		return 0;
	}
	case F_SECTION:
		return parse_section(p, key, v, f->section, f->unknown, c);
	case F_CUSTOM:
		return f->parse(p, key, v, c);
	}
	return -EINVAL;
}

/* Checks an object against a table of keys. */
static int parse_section(struct cfg_parse *p, const char *key, const struct json *v,
			 const struct field *fields, const char *unknown, struct config *c)
{
	if (v->type != JSON_OBJECT) {
		if (!key)
			return fail(p, v->off, NULL, "expected an object at the top level, got %s", got(v));
		return fail(p, v->off, key, "expected an object, got %s", got(v));
	}

	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = key_path(key, m);
		const struct field *f = fields;
		while (f->key && !key_is(m, f->key))
			f++;
		if (!f->key)
			return fail(p, key_offset(p, m->value), k, "%s", unknown ? unknown : "unknown key");
		int r = parse_field(p, k, m->value, f, c);
		if (r < 0)
			return r;
	}
	return 0;
}

static void json_doc_unrefp(struct json_doc **d)
{
	json_doc_unref(*d);
}

int config_load_text(struct config *c, const char *name, const char *base_dir,
		     const char *text, size_t len, char **ret_err)
{
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	struct cfg_parse p = { .name = name, .text = text, .len = len, .base_dir = base_dir };
	struct json_err jerr = {};

	if (len > CONFIG_MAX_BYTES) {
		*ret_err = xasprintf("%s: larger than %u bytes", name, CONFIG_MAX_BYTES);
		return -EFBIG;
	}

	int r = json_parse(text, len, JSON_ALLOW_COMMENTS, CONFIG_MAX_DEPTH, &doc, &jerr);
	if (r < 0) {
		fail(&p, jerr.offset, NULL, "%s", jerr.msg);
		*ret_err = p.err;
		return -EINVAL;
	}

	struct config tmp;
	config_init(&tmp);
	r = parse_section(&p, NULL, json_doc_root(doc), root_fields, NULL, &tmp);
	if (r < 0) {
		config_free(&tmp);
		*ret_err = p.err;
		return r;
	}
	/* tools_dir is read at every (re)load: a directory that cannot be
	 * opened then is reported at its line in this file. */
	const struct json *td = json_get(json_doc_root(doc), "tools_dir");
	if (td && tmp.tools_dir) {
		unsigned line, col;
		json_line_col(text, len, key_offset(&p, td), &line, &col);
		tmp.tools_dir_at = xasprintf("%s:%u:%u", name, line, col);
	}
	config_free(c);
	*c = tmp;
	return 0;
}

/* Reads a whole file of at most max bytes. */
static int read_file_capped(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;

	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;

	struct buf b = {};
	for (;;) {
		buf_reserve(&b, 65536);
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			buf_free(&b);
			return -e;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > max) {
			buf_free(&b);
			return -EFBIG;
		}
	}
	*ret_len = buf_size(&b);
	*ret = buf_steal(&b);
	return 0;
}

int config_load(struct config *c, const char *path, char **ret_err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	int r = read_file_capped(path, CONFIG_MAX_BYTES, &text, &len);
	if (r == -EFBIG) {
		*ret_err = xasprintf("%s: larger than %u bytes", path, CONFIG_MAX_BYTES);
		return r;
	}
	if (r < 0) {
		*ret_err = xasprintf("%s: %s", path, strerror(-r));
		return r;
	}

	/* Relative paths in the file are relative to the file's directory. */
	_cleanup_free_ char *abspath = NULL;
	if (path[0] == '/') {
		abspath = xstrdup(path);
	} else {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		if (!cwd) {
			r = -errno;
			*ret_err = xasprintf("%s: cannot determine the working directory: %s",
					     path, strerror(-r));
			return r;
		}
		abspath = xasprintf("%s/%s", cwd, path);
	}
	char *slash = strrchr(abspath, '/');
	if (slash == abspath)
		slash[1] = '\0';	/* a file in "/" */
	else
		*slash = '\0';

	return config_load_text(c, path, abspath, text, len, ret_err);
}
