/* SPDX-License-Identifier: MIT */
/*
 * stderr or journald logging.
 */
#include "daemon/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/systemd.h"

static int max_level = LOG_INFO;
static bool to_journal;

void log_init(int level)
{
	max_level = level;
	/* systemd sets JOURNAL_STREAM=dev:ino of the stream it connected. */
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long long dev, ino;
	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
		to_journal = true;
}

void log_set_level(int level)
{
	max_level = level;
}

/*
 * Writes s to stderr with its control characters (and, for a field's
 * value, backslashes) as \xNN. A session id may hold any character and a
 * message may quote what a client, a tool or a workspace sent (a path, a
 * provider's words): one message stays one line.
 */
static void put_escaped(const char *s, bool backslash)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f || (backslash && *p == '\\'))
			fprintf(stderr, "\\x%02x", *p);
		else
			fputc(*p, stderr);
	}
}

/* Writes " key=value" to stderr unless value is NULL. */
static void put_field(const char *key, const char *value)
{
	if (!value)
		return;
	fprintf(stderr, " %s=", key);
	put_escaped(value, true);
}

void log_call(int prio, const char *session, const char *call_id, const char *tool,
	      const char *fmt, ...)
{
	if (prio > max_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	if (to_journal) {
		char prio_s[2] = { (char)('0' + (prio & 7)), '\0' };
		struct journal_field f[6] = {
			{ "MESSAGE", msg, strlen(msg) },
			{ "PRIORITY", prio_s, 1 },
			{ "SYSLOG_IDENTIFIER", "toolcalld", 9 },
		};
		size_t n = 3;
		/* Empty fields were sent for a call's missing names: kept. */
		f[n++] = (struct journal_field){ "TOOLCALLD_SESSION", session ? session : "", session ? strlen(session) : 0 };
		f[n++] = (struct journal_field){ "TOOLCALLD_CALL_ID", call_id ? call_id : "", call_id ? strlen(call_id) : 0 };
		f[n++] = (struct journal_field){ "TOOLCALLD_TOOL", tool ? tool : "", tool ? strlen(tool) : 0 };
		journal_send(NULL, f, n);
	} else {
		static const char *const names[] = { "emerg", "alert", "crit", "error",
						     "warning", "notice", "info", "debug" };
		fprintf(stderr, "toolcalld: %s: ", names[prio & 7]);
		put_escaped(msg, false);
		put_field("session", session);
		put_field("call", call_id);
		put_field("tool", tool);
		fputc('\n', stderr);
	}
	free(msg);
}
