/* SPDX-License-Identifier: MIT */
/*
 * Shared inside lib/net: host name checks, CIDR blocks, the parsed HTTP
 * request and SOCKS5 messages (pure functions, fuzzed), the byte relay of
 * a tunnel, and the proxy's objects, shared by proxy.c (listeners, limits,
 * records, lifetime) and conn.c (one connection from its first byte to
 * its end).
 */
#ifndef TC_NET_INTERNAL_H
#define TC_NET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/net/net.h"
#include "proto/base/buf.h"

/* An address block ("10.0.0.0/8"). */
struct net_cidr {
	struct net_addr a;
	unsigned bits;
};

/* Parses "ADDR/BITS" or a bare address (all bits). 0 or -EINVAL. */
int net_cidr_parse(const char *s, struct net_cidr *ret);
/* Whether the block holds a; an IPv4 block also holds the IPv4-mapped and
 * -compatible forms of its addresses. */
bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a);
/* The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4),
 * or false. */
bool net_addr_embedded_v4(const struct net_addr *a, struct in_addr *ret);
/* Fills a sockaddr for connect(2). Returns its length. */
socklen_t net_addr_sockaddr(const struct net_addr *a, uint16_t port, struct sockaddr_storage *ss);

/*
 * Checks a host name as a client or a pattern gives it and writes it
 * lower-cased, without one trailing dot, into out (NET_HOST_MAX + 1
 * bytes): DNS labels of letters, digits, '-' and '_' (1..63 bytes each),
 * or an IP literal. Returns 0 or -EINVAL.
 */
int net_host_normalize(const char *host, size_t len, char out[NET_HOST_MAX + 1]);

/* --- HTTP ---------------------------------------------------------------- */

/* A request's head, parsed. */
struct net_http_req {
	bool connect;		/* CONNECT host:port */
	char host[NET_HOST_MAX + 1];
	uint16_t port;
	/* For forwarded requests: the head to send upstream (origin-form,
	 * hop-by-hop headers removed, Host set, Connection: close). */
	struct buf head;
	size_t head_len;	/* bytes of the client's head consumed */
	bool has_body;		/* Content-Length > 0 or chunked: body follows */
};

/* Why a head is refused: the status to answer. */
enum {
	NET_HTTP_INCOMPLETE = 0,	/* wait for more bytes */
	NET_HTTP_OK = 1,
};

/*
 * Parses the head of one request in data[0..len). Returns NET_HTTP_OK
 * with req filled, NET_HTTP_INCOMPLETE (no blank line yet and len below
 * max), or a negative HTTP status to answer: -400 (malformed), -431 (head
 * over max bytes), -405 (a method with no absolute-form URL), -501
 * (unsupported, e.g. a non-http scheme). msg gets a short reason.
 */
int net_http_parse_head(const char *data, size_t len, size_t max, struct net_http_req *req,
			char *msg, size_t msg_size);
void net_http_req_done(struct net_http_req *req);

/* Tracks where a forwarded request's body ends (Content-Length or chunked),
 * so that nothing past it reaches the origin. */
struct net_http_body;
struct net_http_body *net_http_body_new(const char *head, size_t head_len);
/* Feeds body bytes: returns how many belong to the body (< len when the
 * message ends inside data), or -1 on a malformed body. *done is set when
 * the message is complete. */
long net_http_body_feed(struct net_http_body *b, const char *data, size_t len, bool *done);
struct net_http_body *net_http_body_free(struct net_http_body *b);

/* --- SOCKS5 -------------------------------------------------------------- */

/* Parses the method greeting. Returns >0 bytes consumed (no-auth offered
 * or not: *noauth), 0 when incomplete, -1 when malformed. */
int net_socks_greeting(const uint8_t *data, size_t len, bool *noauth);

struct net_socks_req {
	char host[NET_HOST_MAX + 1];	/* domain name normalized, or address text */
	uint16_t port;
	bool is_addr;
	struct net_addr addr;
};

/* SOCKS5 reply codes. */
enum {
	SOCKS_OK = 0x00,
	SOCKS_FAIL = 0x01,
	SOCKS_RULESET = 0x02,
	SOCKS_NET_UNREACH = 0x03,
	SOCKS_HOST_UNREACH = 0x04,
	SOCKS_REFUSED = 0x05,
	SOCKS_TTL = 0x06,
	SOCKS_CMD = 0x07,
	SOCKS_ATYP = 0x08,
};

/* Parses a request. Returns >0 bytes consumed with req filled, 0 when
 * incomplete, or the negative reply code to answer (-SOCKS_CMD,
 * -SOCKS_ATYP, -SOCKS_FAIL for malformed). */
int net_socks_request(const uint8_t *data, size_t len, struct net_socks_req *req);
/* Writes a reply (10 bytes, bound address 0.0.0.0:0) into out. */
size_t net_socks_reply(uint8_t code, uint8_t out[10]);

/* --- the byte relay of a connection --------------------------------------- */

/*
 * Moves bytes both ways between a client and an upstream socket: each
 * direction peeks at its source through a buffer shared by the loop's
 * relays and takes from the source only what its destination took, so
 * bytes that cannot go yet wait in the source's socket; or with plain
 * read/write through a buffer of its own (copy). Initial bytes (a
 * forwarded head, bytes the client sent early) go upstream first. With
 * body, the upstream direction copies and stops at the end of that HTTP
 * body: nothing past one message reaches the origin.
 */
struct net_relay;

/* After bytes moved (the deltas): return 0 to go on, or a negative errno
 * to end the relay with it. */
typedef int (*net_relay_progress_cb)(void *arg, uint64_t up, uint64_t down);
/* Once, when both directions are done (0), or on an error (negative
 * errno). The relay may be freed from within. */
typedef void (*net_relay_done_cb)(void *arg, int r);

struct net_relay_config {
	struct tc_loop *loop;
	int client_fd, upstream_fd;	/* borrowed: the caller closes them */
	const void *initial;		/* bytes to send upstream first */
	size_t initial_len;
	struct net_http_body *body;	/* taken; NULL: a tunnel */
	bool up_done;			/* the client has nothing more to send upstream */
	bool copy;			/* read/write through buffers of its own */
	/* An HTTP forward ends when the origin's answer is through, whatever
	 * the client still holds open. */
	bool end_with_down;
	net_relay_progress_cb progress;
	net_relay_done_cb done;
	void *arg;
};

int net_relay_start(const struct net_relay_config *cfg, struct net_relay **ret);
struct net_relay *net_relay_free(struct net_relay *r);
/* The relay work a loop does per turn before ready directions wait for
 * the next turn (tests make it tiny to see the queue; 0: the default,
 * 1 ms). */
void net_relay_turn_budget(uint64_t ns);

/* --- the proxy's objects --------------------------------------------------- */
enum conn_state {
	ST_HEAD,		/* reading an HTTP request head */
	ST_SOCKS_HELLO,		/* reading the SOCKS5 method greeting */
	ST_SOCKS_REQ,		/* reading the SOCKS5 request */
	ST_ASK,			/* held: the daemon decides */
	ST_RESOLVE,
	ST_CONNECT,
	ST_RELAY,
	ST_LINGER,		/* answered: the client's last bytes are read and dropped */
};

struct conn {
	struct list node;
	struct net_proxy *p;
	enum conn_state state;
	enum net_proto proto;
	bool socks;
	int cfd, ufd;
	struct tc_io *cio;		/* client readable, before the relay */
	struct tc_io *uio;		/* upstream writable while connecting */
	struct tc_timer *timer;		/* the deadline of the state; 0 ms: resume */
	struct buf in;			/* client bytes before the relay */
	char host[NET_HOST_MAX + 1];
	uint16_t port;
	char address[NET_ADDR_STRLEN];
	char rule[NET_RULE_MAX];
	enum net_decision decision;
	const char *error;
	struct net_http_req req;	/* ST_HEAD's result, for forwarded requests */
	size_t consumed;		/* bytes of in that the head or SOCKS request took */
	struct net_addr addrs[NET_RESOLVE_MAX];
	size_t n_addrs, next_addr;
	struct net_lookup *lookup;
	struct net_ask *ask;
	bool answered, answer_allow;	/* ask answered: resume from the timer */
	struct net_relay *relay;
	uint64_t start_ms, last_ms;
	uint64_t bytes_up, bytes_down;
	size_t linger_bytes;		/* ST_LINGER: dropped so far */
};

struct net_ask {
	struct conn *c;
	bool allow;
	char rule[NET_RULE_MAX];
};

struct listener {
	struct net_proxy *p;
	int fd;
	bool socks;
	struct tc_io *io;
};

struct net_proxy {
	struct tc_loop *loop;
	struct net_policy *policy;
	struct net_resolver *resolver;
	bool own_resolver;
	bool borrowed;			/* the listeners stay the caller's */
	struct net_limits limits;
	const struct net_proxy_ops *ops;
	void *ctx;
	struct listener listeners[2];
	struct tc_timer *accept_retry;	/* out of fds: accept again later */
	struct list conns;
	struct net_proxy_stats stats;
	uint64_t bytes_total;
	struct net_refusal refused[NET_REFUSED_MAX];
	char refused_host[NET_REFUSED_MAX][NET_HOST_MAX + 1];
	char refused_rule[NET_REFUSED_MAX][NET_RULE_MAX];
	size_t n_refused, refused_more;
	bool freeing;
};

/* conn.c */
struct conn *net_conn_new(struct net_proxy *p, int fd, bool socks);
/* Ends c: reports it through connection_done, closes and frees. */
void net_conn_end(struct conn *c, const char *error);
/* Whether a new byte moved puts p over its budget. */
bool net_proxy_over_budget(struct net_proxy *p);
/* Records a refusal for net_proxy_refused. */
void net_proxy_note_refusal(struct net_proxy *p, const char *host, uint16_t port, const char *rule);

#endif
