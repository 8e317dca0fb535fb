/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl ps and kill, through processes/list and processes/kill.
 */
#include "daemon/ctl/ps.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "proto/json.h"

static const char *bad_list(const struct json *result)
{
	const struct json *v = json_get(result, "processes");
	return v && v->type == JSON_ARRAY ? NULL : "a result without a processes array";
}

static const char *str_or(const struct json *o, const char *key, const char *dflt)
{
	const struct json *v = json_get(o, key);
	return v && v->type == JSON_STRING ? v->u.str.s : dflt;
}

/* ID  UID  STATE  BYTES  COMMAND, one line each; control characters of
 * the command shown as '?'. */
static void show_list(const struct json *result)
{
	const struct json *v = json_get(result, "processes");
	printf("%-14s %-6s %-22s %-10s %s\n", "ID", "UID", "STATE", "BYTES", "COMMAND");
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *p = v->u.arr.items[i];
		int64_t uid = -1, bytes = 0, code = 0;
		char state[64];
		json_get_int(json_get(p, "uid"), &uid);
		json_get_int(json_get(p, "bytes"), &bytes);
		const struct json *running = json_get(p, "running");
		const struct json *waiting = json_get(p, "waiting_for_input");
		if (running && running->type == JSON_BOOL && running->u.b)
			snprintf(state, sizeof(state), "%s",
				 waiting && waiting->type == JSON_BOOL && waiting->u.b ? "running (input)" : "running");
		else if (json_get_int(json_get(p, "exit_code"), &code))
			snprintf(state, sizeof(state), "exit %" PRId64, code);
		else
			snprintf(state, sizeof(state), "%s", str_or(p, "signal", "ended"));
		char cmd[120];
		snprintf(cmd, sizeof(cmd), "%s", str_or(p, "command", ""));
		for (char *c = cmd; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		printf("%-14s %-6" PRId64 " %-22s %-10" PRId64 " %s\n", str_or(p, "id", "?"), uid, state, bytes, cmd);
	}
}

int run_ps(struct client *c, struct opts *o, char **args, int n)
{
	return simple_request(c, o, "processes/list", NULL, bad_list, show_list);
}

static void show_kill(const struct json *result)
{
	const struct json *ended = json_get(result, "ended");
	if (ended && ended->type == JSON_BOOL && ended->u.b)
		printf("%s had ended already\n", str_or(result, "id", "?"));
	else
		printf("signalled %s\n", str_or(result, "id", "?"));
}

int run_kill(struct client *c, struct opts *o, char **args, int n)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "id", args[0]);
	if (n > 1)
		jgen_kv_str(g, "signal", args[1]);
	jgen_obj_close(g);
	jgen_free(g);
	_cleanup_free_ char *params = buf_steal(&b);
	return simple_request(c, o, "processes/kill", params, NULL, show_kill);
}
