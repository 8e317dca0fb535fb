/* SPDX-License-Identifier: MIT */
/*
 * The tests' private redis-server (see redis_server.h).
 */
#include "tests/unit/redis_server.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <hiredis/hiredis.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/base/util.h"

bool redis_server_available(const char **why)
{
	if (system("command -v redis-server >/dev/null 2>&1") != 0) {
		*why = "redis-server is not installed (Debian package redis-server)";
		return false;
	}
	return true;
}

/* True when the socket answers PING. */
static bool answers(const char *path)
{
	redisContext *c = redisConnectUnix(path);
	bool ok = c && !c->err;
	if (ok) {
		redisReply *r = redisCommand(c, "PING");
		ok = r && r->type == REDIS_REPLY_STATUS;
		if (r)
			freeReplyObject(r);
	}
	if (c)
		redisFree(c);
	return ok;
}

void redis_server_start(struct redis_server *r)
{
	if (!r->dir[0]) {
		snprintf(r->dir, sizeof(r->dir), "/tmp/tc-redis-XXXXXX");
		ck_assert_msg(mkdtemp(r->dir) != NULL, "mkdtemp failed");
		snprintf(r->sock, sizeof(r->sock), "%s/r.sock", r->dir);
	}
	unlink(r->sock);
	/* Another uid's server: its socket is made, and listened on, by it. */
	gid_t gid = r->uid;
	if (r->uid) {
		struct passwd *pw = getpwuid(r->uid);
		if (pw)
			gid = pw->pw_gid;
		ck_assert_msg(chown(r->dir, r->uid, gid) == 0, "chown %s: %s", r->dir, strerror(errno));
	}
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		if (r->uid && (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(r->uid) < 0))
			_exit(126);
		execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", r->sock, "--save", "",
		       "--appendonly", "no", "--dir", r->dir, (char *)NULL);
		_exit(127);
	}
	r->pid = pid;
	uint64_t end = mono_ms() + 10000;
	while (!answers(r->sock)) {
		ck_assert_msg(mono_ms() < end, "redis-server did not answer on %s within 10 s", r->sock);
		ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "redis-server exited at start");
		usleep(10000);
	}
}

void redis_server_kill(struct redis_server *r)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, SIGCONT);
	kill(r->pid, SIGKILL);
	waitpid(r->pid, NULL, 0);
	r->pid = 0;
}

void redis_server_pause(struct redis_server *r, bool pause)
{
	if (r->pid > 0)
		kill(r->pid, pause ? SIGSTOP : SIGCONT);
}

/* Runs one command on a fresh connection and checks its reply type. */
static void command(struct redis_server *r, int want, const char *fmt, const char *a, const char *b)
{
	redisContext *c = redisConnectUnix(r->sock);
	ck_assert_msg(c && !c->err, "cannot connect to redis-server");
	redisReply *rep = b ? redisCommand(c, fmt, a, b) : redisCommand(c, fmt);
	ck_assert_msg(rep && rep->type == want, "unexpected reply from redis-server");
	freeReplyObject(rep);
	redisFree(c);
}

void redis_server_flush(struct redis_server *r)
{
	command(r, REDIS_REPLY_STATUS, "FLUSHALL", NULL, NULL);
}

void redis_server_set(struct redis_server *r, const char *key, const char *value)
{
	command(r, REDIS_REPLY_STATUS, "SET %s %s", key, value);
}

long long redis_server_keys(struct redis_server *r)
{
	redisContext *c = redisConnectUnix(r->sock);
	ck_assert_msg(c && !c->err, "cannot connect to redis-server");
	redisReply *rep = redisCommand(c, "DBSIZE");
	ck_assert_msg(rep && rep->type == REDIS_REPLY_INTEGER, "unexpected reply from redis-server");
	long long n = rep->integer;
	freeReplyObject(rep);
	redisFree(c);
	return n;
}

void redis_server_free(struct redis_server *r)
{
	redis_server_kill(r);
	if (r->dir[0]) {
		unlink(r->sock);
		rmdir(r->dir);
		r->dir[0] = '\0';
	}
}
