/* SPDX-License-Identifier: MIT */
/*
 * The "command" tool kind: a tool file declares a program and an argv
 * template, and each call runs that program directly (never through a
 * shell) with {{name}} placeholders replaced by the call's arguments.
 *
 *   { "name": "git_status", "kind": "command", "description": "...",
 *     "argv": ["git", "status", "--porcelain", "--", "{{path}}"],
 *     "side_effects": "read", "idempotent": true, "timeout_ms": 10000,
 *     "input_schema": { "type": "object", "properties": { "path": ... } },
 *     "stdout": "json" }
 *
 * Keys: name, argv and side_effects are required; kind ("command"),
 * description, input_schema (default: an object with no properties),
 * idempotent, timeout_ms, max_attempts, concurrency, cwd (a directory
 * beneath the workspace root, the default working directory), env (an
 * object of fixed NAME: value pairs added to the scrubbed environment) and
 * stdout ("text" or "json"; "output" is accepted as a synonym) are
 * optional; any other key is refused.
 *
 * Placeholders: each must name a property of input_schema; argv[0] is
 * always literal. A string argument is substituted as is, a number or a
 * boolean as its JSON text, an array or object as its canonical JSON text.
 * When an optional argument is absent (or null), an element that is exactly
 * "{{x}}" is dropped and a placeholder inside a longer element becomes
 * empty. "--" in the template is how a declaration keeps an argument from
 * being read as an option.
 *
 * Outcome: exit 0 is success ({exit_code, stdout, stderr, truncated,
 * duration_ms}, or with "stdout": "json" the parsed stdout: an object as
 * is, any other value as {"result": value}; output that does not parse is
 * an execution_error); exit 75 (EX_TEMPFAIL) is transient; any other
 * status, or death by a signal, is an execution_error quoting the tail of
 * stderr. A program that does not exist is an execution_error; a shortage
 * of processes or fds is transient.
 */
#ifndef TC_TOOLS_COMMAND_H
#define TC_TOOLS_COMMAND_H

#include "lib/tool.h"

struct json;

extern const struct tool_def tool_kind_command;

struct bind;
/*
 * Builds a tool from a parsed declaration, checked by the binder: every
 * mistake is recorded in b, each naming its key ("argv[4]: placeholder
 * '{{pth}}' names no property of input_schema") and, when b holds the
 * file's text, where it is. source_path becomes the tool's source.
 * Returns 0, or -EINVAL.
 */
int command_tool_bind(struct bind *b, const struct json *decl, const char *source_path, struct tool **ret);
/* The same outside a file: the messages in *ret_err, one a line. */
int command_tool_from_json(const struct json *decl, const char *source_path,
			   struct tool **ret, char **ret_err);

/* The literal elements of a command tool's argv, up to the first that
 * holds a placeholder (NULL-terminated, the caller's), or NULL for a tool
 * of another kind. */
char **command_tool_argv(const struct tool *t);

#endif
