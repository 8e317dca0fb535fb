/* SPDX-License-Identifier: MIT */
/*
 * Small blocking servers and clients on 127.0.0.1 for the proxy's tests,
 * each server in its own thread: an HTTP origin that keeps the last head
 * it received and answers a fixed body, and a TCP echo. Clients use
 * timeouts on every socket, so a broken proxy fails a test, never hangs it.
 */
#ifndef TC_NET_SERVERS_H
#define TC_NET_SERVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A listening socket on 127.0.0.1 with a kernel-chosen port. */
int net_test_listen(uint16_t *ret_port);

struct net_origin {
	int fd;
	uint16_t port;
	char last_head[8192];	/* the head of the last request, NUL-terminated */
	size_t last_body;	/* bytes of its body (Content-Length) */
	unsigned requests;
};

/* The origin answers every request with ORIGIN_BODY and closes. */
#define ORIGIN_BODY "hello from the origin\n"
void net_origin_start(struct net_origin *o);
void net_origin_stop(struct net_origin *o);

struct net_echo {
	int fd;
	uint16_t port;
};
void net_echo_start(struct net_echo *e);
void net_echo_stop(struct net_echo *e);

/* A client socket connected to 127.0.0.1:port, reads and writes bounded
 * by timeout_ms. */
int net_test_connect(uint16_t port, int timeout_ms);
/* Writes all of data. */
bool net_test_write(int fd, const void *data, size_t len);
/* Reads until end of file, at most size - 1 bytes, NUL-terminated;
 * returns the bytes read or -1. */
long net_test_read_all(int fd, char *out, size_t size);
/* Reads exactly len bytes; false on EOF or timeout. */
bool net_test_read_n(int fd, void *out, size_t len);
/* Reads until the head's blank line (byte by byte); NUL-terminated. */
bool net_test_read_head(int fd, char *out, size_t size);

#endif
