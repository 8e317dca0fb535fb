/* SPDX-License-Identifier: MIT */
/*
 * toolcalld: command line, configuration, and the server's life.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/load.h"
#include "daemon/log.h"
#include "daemon/preflight.h"
#include "daemon/server.h"
#include "lib/child/child.h"
#include "lib/sandbox/sandbox.h"
#include "lib/registry.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: toolcalld [OPTION]...\n"
		"Serve tool calls to agent loops over a Unix socket (JSON-RPC 2.0, MCP).\n"
		"\n"
		"  -c, --config FILE     read the configuration from FILE (JSON, comments allowed)\n"
		"  -s, --socket PATH     listen on PATH (default: $TOOLCALLD_SOCKET, else\n"
		"                        $XDG_RUNTIME_DIR/toolcalld.sock, else\n"
		"                        /run/toolcalld/toolcalld.sock for root or who may\n"
		"                        write there, else /tmp/toolcalld-UID/toolcalld.sock)\n"
		"  -w, --workspace DIR   default workspace of new sessions (default: the\n"
		"                        current directory)\n"
		"      --check-config    check the configuration, the tool files and what start-up\n"
		"                        needs (workspace, allowed roots, audit log, socket\n"
		"                        directory), print the socket path, then exit\n"
		"  -V, --version         print the version and exit\n"
		"  -h, --help            print this help and exit\n"
		"\n"
		"Flags win over the config file. Under systemd the daemon takes the socket it\n"
		"is passed, reports readiness (Type=notify) and logs to the journal.\n"
		"Signals: SIGTERM/SIGINT stop gracefully; SIGHUP reloads the configuration and\n"
		"the tool files and reopens the audit log.\n"
		"\n"
		"Try it: socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/toolcalld.sock\n"
		"  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n"
		"See toolcalld(8), toolcalld.conf(5) and toolcallctl(1).\n");
}

/* Past the kernel's default fs.nr_open, setrlimit fails. */
#define FD_LIMIT_CAP (UINT64_C(1) << 20)

/*
 * Raises the soft limit on open files to the hard one: each connection
 * holds an fd, and the soft limit is often 1024 (systemd's default) while
 * the hard one is far higher. Commands get the old soft limit back
 * (child_set_fd_limit): programs that use select() break past 1024.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rlim_t was = rl.rlim_cur;
	rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > FD_LIMIT_CAP ? FD_LIMIT_CAP : rl.rlim_max;
	if (want <= was)
		return;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_warning("cannot raise the limit on open files from %llu to %llu: %s",
			    (unsigned long long)was, (unsigned long long)want, strerror(errno));
		return;
	}
	child_set_fd_limit(was);
	log_debug("limit on open files raised from %llu to %llu (commands keep %llu)",
		  (unsigned long long)was, (unsigned long long)want, (unsigned long long)was);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *config_path = NULL, *socket_path = NULL, *workspace = NULL;
	bool check = false;
	int o;
	while ((o = getopt_long(argc, argv, "c:s:w:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 'c': config_path = optarg; break;
		case 's': socket_path = optarg; break;
		case 'w': workspace = optarg; break;
		case 'C': check = true; break;
		case 'V': printf("toolcalld %s\n", TOOLCALLD_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "toolcalld: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	log_init(LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	/* Answers of a few hundred KiB come and go all the time: keep glibc
	 * from giving memory back and taking it again on every one. */
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
	mallopt(M_MMAP_THRESHOLD, 8 << 20);

	struct server s = {0};
	config_init(&s.cfg);
	/* --check-config goes on past a config whose values are wrong, to
	 * report the tool files' mistakes too. */
	bool config_bad = false;
	if (config_path) {
		char *err = NULL;
		int r = check ? config_check(&s.cfg, config_path, &err) : config_load(&s.cfg, config_path, &err);
		if (r != 0)
			preflight_print_errors(err);
		free(err);
		if (r < 0) {
			config_free(&s.cfg);
			return 1;
		}
		config_bad = r > 0;
		s.config_path = realpath(config_path, NULL);
		s.file_socket = s.cfg.socket ? xstrdup(s.cfg.socket) : NULL;
		s.file_workspace = s.cfg.workspace ? xstrdup(s.cfg.workspace) : NULL;
	}
	if (socket_path) {
		free(s.cfg.socket);
		s.cfg.socket = xstrdup(socket_path);
	}
	if (workspace) {
		free(s.cfg.workspace);
		s.cfg.workspace = xstrdup(workspace);
	}
	log_set_level(s.cfg.log_level);

	if (check) {
		int status = preflight_check_config(&s.cfg, config_path, config_bad);
		config_free(&s.cfg);
		free(s.config_path);
		free(s.file_socket);
		free(s.file_workspace);
		return status;
	}

	raise_fd_limit();
	/* Before any thread is started, so that none keeps a capability an
	 * exec could raise: the children then have none left to drop. A
	 * daemon without CAP_SETPCAP has its children drop nothing either. */
	int dropped = child_drop_bounding_set();
	if (dropped < 0 && dropped != -EPERM)
		log_warning("cannot empty the capability bounding set: %s", strerror(-dropped));
	char *err = NULL;
	if (server_init(&s, &err) < 0) {
		log_error("%s", err ? err : "cannot start");
		free(err);
		server_free(&s);
		return 1;
	}
	server_run(&s);
	log_info("stopped");
	server_free(&s);
	return 0;
}
