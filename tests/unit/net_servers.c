/* SPDX-License-Identifier: MIT */
/* Blocking test servers and clients on loopback (see net_servers.h). */
#include "tests/unit/net_servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int net_test_listen(uint16_t *ret_port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 256) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) < 0)
		abort();
	*ret_port = ntohs(sin.sin_port);
	return fd;
}

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int net_test_connect(uint16_t port, int timeout_ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	set_timeouts(fd, timeout_ms);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

bool net_test_write(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

long net_test_read_all(int fd, char *out, size_t size)
{
	size_t got = 0;
	for (;;) {
		if (got + 1 >= size)
			break;
		ssize_t n = recv(fd, out + got, size - 1 - got, 0);
		if (n < 0) {
			out[got] = '\0';
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	return (long)got;
}

bool net_test_read_n(int fd, void *out, size_t len)
{
	char *p = out;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

bool net_test_read_head(int fd, char *out, size_t size)
{
	size_t got = 0;
	while (got + 1 < size) {
		if (recv(fd, out + got, 1, 0) != 1)
			break;
		got++;
		out[got] = '\0';
		if (got >= 4 && memcmp(out + got - 4, "\r\n\r\n", 4) == 0)
			return true;
	}
	out[got] = '\0';
	return false;
}

static void *origin_main(void *arg)
{
	struct net_origin *o = arg;
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n"
				     "Connection: close\r\n\r\n" ORIGIN_BODY;
	char head[8192];

	for (;;) {
		int fd = accept4(o->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL;
		set_timeouts(fd, 10000);
		if (net_test_read_head(fd, head, sizeof(head))) {
			size_t body = 0;
			const char *cl = strcasestr(head, "\r\nContent-Length:");
			if (cl)
				body = strtoul(cl + 17, NULL, 10);
			char *buf = malloc(body + 1);
			if (buf && net_test_read_n(fd, buf, body)) {
				memcpy(o->last_head, head, sizeof(head));
				o->last_body = body;
				__atomic_add_fetch(&o->requests, 1, __ATOMIC_SEQ_CST);
				net_test_write(fd, answer, sizeof(answer) - 1);
			}
			free(buf);
		}
		close(fd);
	}
}

void net_origin_start(struct net_origin *o)
{
	pthread_t t;
	memset(o, 0, sizeof(*o));
	o->fd = net_test_listen(&o->port);
	pthread_create(&t, NULL, origin_main, o);
	pthread_detach(t);
}

void net_origin_stop(struct net_origin *o)
{
	shutdown(o->fd, SHUT_RDWR);
	close(o->fd);
}

static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[65536];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0 || !net_test_write(fd, buf, (size_t)n))
			break;
	}
	close(fd);
	return NULL;
}

static void *echo_main(void *arg)
{
	struct net_echo *e = arg;
	for (;;) {
		pthread_t t;
		int fd = accept4(e->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL;
		set_timeouts(fd, 30000);
		pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

void net_echo_start(struct net_echo *e)
{
	pthread_t t;
	e->fd = net_test_listen(&e->port);
	pthread_create(&t, NULL, echo_main, e);
	pthread_detach(t);
}

void net_echo_stop(struct net_echo *e)
{
	shutdown(e->fd, SHUT_RDWR);
	close(e->fd);
}
