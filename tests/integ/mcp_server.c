/* SPDX-License-Identifier: MIT */
/*
 * A small stdio MCP server for the tests of the "mcp" tool kind. Tools:
 * echo {text} answers the text; add {a, b} answers structuredContent
 * {sum}; fail answers isError; slow {ms} sleeps then answers; crash exits
 * the process without answering; pid answers the server's pid; badutf
 * answers bytes that are not UTF-8; huge {n} answers a text of n bytes;
 * closeout closes its standard output and stays. Its list also holds names
 * that are no tool names and a name twice; image answers a text and a PNG
 * image, badimage an image whose data is not base64; stderr {lines} writes
 * lines (default 1) to its stderr; content answers an item of every MCP
 * content type (mcp_server.h); content, nondestructive and destructive
 * carry annotations (readOnlyHint, destructiveHint). With "slowinit" as argument, it takes a second to answer
 * initialize ("slowinit12": 12 s); with "failstart" (or "failif=PATH"
 * while PATH exists), it writes two lines to stderr and exits 1; with
 * "alloc=MB", "connect=PORT" or "bigfile" its start needs memory, a TCP
 * connection, or to write a 2 MiB file (start_needs()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/json.h"
#include "tests/integ/mcp_server.h"
#include "proto/jsonrpc.h"

static void reply(const char *id, size_t id_len, const char *result)
{
	struct buf b = {0};
	jrpc_write_result(&b, id, id_len, result, strlen(result));
	buf_putc(&b, '\n');
	fwrite(buf_head(&b), 1, buf_size(&b), stdout);
	fflush(stdout);
	buf_free(&b);
}

static const char tools[] =
	"{\"tools\":["
	"{\"name\":\"echo\",\"description\":\"Echo text\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}},"
	"{\"name\":\"add\",\"description\":\"Add\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}},"
	"{\"name\":\"fail\",\"description\":\"Fails\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"slow\",\"description\":\"Sleeps\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"ms\":{\"type\":\"integer\"}}}},"
	"{\"name\":\"crash\",\"description\":\"Exits\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"pid\",\"description\":\"Its pid\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"bad_schema\",\"description\":\"Unsupported schema\",\"inputSchema\":{\"type\":\"object\",\"patternProperties\":{}}},"
	"{\"name\":\"badutf\",\"description\":\"Not UTF-8\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"huge\",\"description\":\"A long text\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}},"
	"{\"name\":\"image\",\"description\":\"An image\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"badimage\",\"description\":\"A bad image\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"stderr\",\"description\":\"Writes to stderr\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"lines\":{\"type\":\"integer\"}}}},"
	"{\"name\":\"closeout\",\"description\":\"Closes stdout\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"content\",\"description\":\"Every content type\",\"inputSchema\":{\"type\":\"object\"},\"annotations\":{\"readOnlyHint\":true}},"
	"{\"name\":\"nondestructive\",\"description\":\"Writes, destroys nothing\",\"inputSchema\":{\"type\":\"object\"},\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false}},"
	"{\"name\":\"destructive\",\"description\":\"Destroys\",\"inputSchema\":{\"type\":\"object\"},\"annotations\":{\"destructiveHint\":true}},"
	"{\"name\":\"bad name\",\"description\":\"A space\",\"inputSchema\":{\"type\":\"object\"}},"
	"{\"name\":\"echo\",\"description\":\"Twice\",\"inputSchema\":{\"type\":\"object\"}}"
	"]}";

/*
 * What a start needs: "alloc=MB" that much memory, "connect=PORT" a TCP
 * connection to 127.0.0.1:PORT, "bigfile" to write 2 MiB in $TMPDIR;
 * "failuid=UID" fails when run as that uid. Every argument counts
 * ("failuid=0" "slowinit2" both hold).
 * Refused, it says why on stderr, as servers do, and returns -1.
 */
static int start_needs(const char *arg)
{
	if (strncmp(arg, "alloc=", 6) == 0) {
		size_t n = (size_t)atol(arg + 6) << 20;
		char *m = malloc(n);
		if (!m) {
			fprintf(stderr, "fatal: out of memory\n");
			return -1;
		}
		memset(m, 1, n);
		free(m);
	} else if (strncmp(arg, "connect=", 8) == 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(arg + 8)),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			fprintf(stderr, "fatal: connect to 127.0.0.1:%s: %s\n", arg + 8, strerror(errno));
			return -1;
		}
		close(fd);
	} else if (strncmp(arg, "failuid=", 8) == 0 && getuid() == (uid_t)atol(arg + 8)) {
		fprintf(stderr, "fatal: not for uid %s\n", arg + 8);
		return -1;
	} else if (strcmp(arg, "bigfile") == 0) {
		const char *tmp = getenv("TMPDIR");
		char path[4096];
		snprintf(path, sizeof(path), "%s/big", tmp ? tmp : "/tmp");
		FILE *f = fopen(path, "w");
		static char block[65536];
		for (int i = 0; f && i < 32; i++)
			fwrite(block, 1, sizeof(block), f);
		if (f)
			fclose(f);
	}
	return 0;
}

int main(int argc, char **argv)
{
	/* "slowinit" waits a second before answering initialize, "slowinitN" N. */
	int slow_init = 0;
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], "slowinit", 8) == 0)
			slow_init = argv[i][8] ? atoi(argv[i] + 8) : 1;
	/* "failif=PATH": fails to start while PATH exists. */
	bool fail_now = argc > 1 && strncmp(argv[1], "failif=", 7) == 0 && access(argv[1] + 7, F_OK) == 0;
	if (fail_now || (argc > 1 && strcmp(argv[1], "failstart") == 0)) {
		fprintf(stderr, "starting test server\nfatal: cannot open /nonexistent/config.toml\n");
		return 1;
	}
	for (int i = 1; i < argc; i++)
		if (start_needs(argv[i]) < 0)
			return 1;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	while ((n = getline(&line, &cap, stdin)) > 0) {
		struct json_doc *doc = NULL;
		if (json_parse(line, (size_t)n, 0, 64, &doc, NULL) < 0)
			continue;
		const struct json *msg = json_doc_root(doc);
		const char *src = json_doc_text(doc);
		const char *method = json_str(json_get(msg, "method"));
		const struct json *id = json_get(msg, "id");
		if (!method || !id) {
			json_doc_unref(doc);
			continue;
		}
		const char *idt = src + id->off;
		if (strcmp(method, "initialize") == 0) {
			if (slow_init)
				sleep((unsigned)slow_init);
			reply(idt, id->len, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},"
					    "\"serverInfo\":{\"name\":\"test\",\"version\":\"1\"}}");
		} else if (strcmp(method, "tools/list") == 0) {
			reply(idt, id->len, tools);
		} else if (strcmp(method, "tools/call") == 0) {
			const struct json *params = json_get(msg, "params");
			const char *name = json_str(json_get(params, "name"));
			const struct json *args = json_get(params, "arguments");
			char out[512];
			int64_t a = 0, b = 0;
			if (str_eq(name, "echo")) {
				struct buf q = {0};
				const char *t = json_str(json_get(args, "text"));
				json_quote(&q, t ? t : "", t ? strlen(t) : 0);
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":%s}]}", buf_head(&q));
				buf_free(&q);
			} else if (str_eq(name, "add")) {
				json_get_int(json_get(args, "a"), &a);
				json_get_int(json_get(args, "b"), &b);
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"%lld\"}],"
					 "\"structuredContent\":{\"sum\":%lld}}", (long long)(a + b), (long long)(a + b));
			} else if (str_eq(name, "fail")) {
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"it failed\"}],\"isError\":true}");
			} else if (str_eq(name, "slow")) {
				json_get_int(json_get(args, "ms"), &a);
				usleep((useconds_t)a * 1000);
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"slept\"}]}");
			} else if (str_eq(name, "crash")) {
				_exit(3);
			} else if (str_eq(name, "badutf")) {
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"bad\xff\xfe!\"}]}");
			} else if (str_eq(name, "huge")) {
				json_get_int(json_get(args, "n"), &a);
				struct buf h = {0};
				buf_puts(&h, "{\"content\":[{\"type\":\"text\",\"text\":\"");
				buf_reserve(&h, (size_t)a);
				memset(h.data + h.len, 'x', (size_t)a);
				h.len += (size_t)a;
				buf_puts(&h, "\"}]}");
				reply(idt, id->len, buf_head(&h));
				buf_free(&h);
				json_doc_unref(doc);
				continue;
			} else if (str_eq(name, "closeout")) {
				fflush(stdout);
				close(1);
				for (;;)
					pause();
			} else if (str_eq(name, "image")) {
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"a dot\"},"
					 "{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"}]}");
			} else if (str_eq(name, "badimage")) {
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"image\",\"data\":\"not base64!\","
					 "\"mimeType\":\"image/png\"}]}");
			} else if (str_eq(name, "stderr")) {
				json_get_int(json_get(args, "lines"), &a);
				for (int64_t i = 0; i < (a ? a : 1); i++)
					fprintf(stderr, "a note on stderr, %lld\n", (long long)i);
				fflush(stderr);
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"noted\"}]}");
			} else if (str_eq(name, "content")) {
				reply(idt, id->len, "{\"content\":" MCP_CONTENT_ITEMS ",\"structuredContent\":" MCP_CONTENT_STRUCTURED
						    ",\"_meta\":" MCP_CONTENT_META "}");
				json_doc_unref(doc);
				continue;
			} else if (str_eq(name, "nondestructive") || str_eq(name, "destructive")) {
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}");
			} else if (str_eq(name, "pid")) {
				snprintf(out, sizeof(out), "{\"content\":[{\"type\":\"text\",\"text\":\"%d\"}]}", (int)getpid());
			} else {
				struct buf e = {0};
				jrpc_write_error(&e, idt, id->len, -32602, "unknown tool", NULL, 0);
				printf("%s\n", buf_head(&e));
				fflush(stdout);
				buf_free(&e);
				json_doc_unref(doc);
				continue;
			}
			reply(idt, id->len, out);
		} else if (strcmp(method, "ping") == 0) {
			reply(idt, id->len, "{}");
		}
		json_doc_unref(doc);
	}
	free(line);
	return 0;
}
