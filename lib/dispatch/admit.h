/* SPDX-License-Identifier: MIT */
/*
 * Admission: the checks a call passes before it becomes an execution. Each
 * step looks at one thing (the tool, the audit log, the arguments, the schema, the
 * confirmation policy, paths, the idempotency key, the circuit, the budget)
 * and returns the outcome that refuses the call, or NULL to go on; what the
 * steps learn is gathered in a struct admission. Used by dispatch.c only.
 */
#ifndef TC_ADMIT_H
#define TC_ADMIT_H

#include <stdbool.h>

#include "lib/dispatch/policy.h"

struct call_params;
struct dispatcher;
struct idem_entry;
struct json;
struct json_doc;
struct outcome;
struct session;
struct tool;
struct tool_state;
struct uid_state;

/* What dispatch_call learns about a call before it becomes an execution. */
struct admission {
	const char *name;
	struct tool *t;			/* the registry's; NULL when not found */
	struct json_doc *doc;		/* holds args */
	const struct json *args;
	enum confirm_mode mode;
	char *key;			/* uid-scoped idempotency key, or NULL */
	char *canon;			/* canonical arguments (keyed only) */
	struct tool_state *ts;
	struct uid_state *us;		/* the session's uid */
	struct circuit *circuit;	/* the tool's for that uid */
	bool probe;			/* the circuit's probe */
};

/* Frees what the admission still holds (for _cleanup_). */
void admit_clear(struct admission *a);
/* Finds the tool the session may call (a->t; NULL when not found). */
struct outcome *admit_find_tool(struct dispatcher *d, struct session *s, struct admission *a);
/* Refuses every call while the audit log cannot be written and
 * audit.on_error is "refuse". */
struct outcome *admit_check_audit(struct dispatcher *d);
/* Takes the arguments: an object, or JSON text in a string; none is {}. */
struct outcome *admit_parse_arguments(struct dispatcher *d, const struct call_params *p,
				      struct admission *a);
/* Checks the arguments against the tool's schema. */
struct outcome *admit_validate_arguments(struct admission *a);
/* Emits tool.input_invalid for a refusal by the two steps above. */
void admit_report_invalid(struct dispatcher *d, struct session *s, const char *name, const struct outcome *o);
/* Applies the confirmation policy to a->mode. */
void admit_decide_confirmation(struct dispatcher *d, struct session *s, struct admission *a);
/* Refuses paths that escape the workspace before anyone is asked to confirm. */
struct outcome *admit_check_paths(struct session *s, const struct admission *a);
/* Looks the idempotency key up: its entry, or NULL for a new key. */
struct idem_entry *admit_find_keyed(struct dispatcher *d, struct session *s, const char *client_key,
				    struct admission *a);
/* Asks the circuit of the tool for the session's uid whether the call may
 * run (a->ts, a->us, a->circuit, a->probe). */
struct outcome *admit_check_circuit(struct dispatcher *d, struct session *s, struct admission *a);
/* Refuses a call when no budget is left for its first attempt. */
struct outcome *admit_check_budget(struct session *s, const struct call_params *p, struct admission *a);

#endif
