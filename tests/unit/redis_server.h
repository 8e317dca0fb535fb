/* SPDX-License-Identifier: MIT */
/*
 * A private redis-server for tests: started on a Unix socket in a
 * temporary directory (no TCP port, nothing saved), waited for with a
 * deadline, stopped, killed, paused and resumed by its pid.
 */
#ifndef TC_TEST_REDIS_SERVER_H
#define TC_TEST_REDIS_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

struct redis_server {
	char dir[64];		/* the temporary directory */
	char sock[128];		/* dir/r.sock */
	pid_t pid;		/* 0 when not running */
	uid_t uid;		/* the uid it runs as (0: this process's); set before starting */
};

/* True when redis-server can be run here; else *why says what is missing. */
bool redis_server_available(const char **why);
/* Makes the directory (once) and starts the server, as r->uid when set
 * (the directory then is that uid's; only root can); fails the test when
 * it does not answer PING within 10 s. */
void redis_server_start(struct redis_server *r);
/* SIGKILLs the server and reaps it (the directory stays). */
void redis_server_kill(struct redis_server *r);
/* SIGSTOP / SIGCONT. */
void redis_server_pause(struct redis_server *r, bool pause);
/* Deletes every key. */
void redis_server_flush(struct redis_server *r);
/* SET key value, as a writer that is not toolcalld would. */
void redis_server_set(struct redis_server *r, const char *key, const char *value);
/* How many keys it holds (DBSIZE). */
long long redis_server_keys(struct redis_server *r);
/* Kills the server and removes the directory. */
void redis_server_free(struct redis_server *r);

#endif
