/* SPDX-License-Identifier: MIT */
/*
 * Addresses: IP literals, CIDR blocks, and the classification that keeps
 * a sandboxed tool away from loopback, private networks and the cloud
 * metadata service. IPv6 forms that carry an IPv4 address (mapped,
 * compatible, NAT64, 6to4) are judged by that address, since the kernel
 * or a gateway turns them into it (the classic SSRF bypass).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "lib/net/net_internal.h"

int net_addr_parse(const char *s, struct net_addr *ret)
{
	struct net_addr a = { 0 };

	if (!s || strlen(s) >= NET_ADDR_STRLEN)
		return -EINVAL;
	if (inet_pton(AF_INET, s, &a.v4) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, s, &a.v6) == 1)
		a.family = AF_INET6;
	else
		return -EINVAL;
	*ret = a;
	return 0;
}

const char *net_addr_format(const struct net_addr *a, char out[NET_ADDR_STRLEN])
{
	if (!inet_ntop(a->family, a->family == AF_INET ? (const void *)&a->v4 : (const void *)&a->v6,
		       out, NET_ADDR_STRLEN))
		strcpy(out, "?");
	return out;
}

socklen_t net_addr_sockaddr(const struct net_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr = a->v4;
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(port);
	sin6->sin6_addr = a->v6;
	return sizeof(*sin6);
}

bool net_addr_embedded_v4(const struct net_addr *a, struct in_addr *ret)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t translated[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0 };
	static const uint8_t compat[12] = { 0 };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
	const uint8_t *b = a->v6.s6_addr;

	if (a->family != AF_INET6)
		return false;
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, translated, 12) == 0 || memcmp(b, nat64, 12) == 0) {
		memcpy(&ret->s_addr, b + 12, 4);
		return true;
	}
	if (memcmp(b, compat, 12) == 0) {
		/* :: and ::1 are IPv6's own unspecified and loopback. */
		if (b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1)
			return false;
		memcpy(&ret->s_addr, b + 12, 4);
		return true;
	}
	if (b[0] == 0x20 && b[1] == 0x02) {	/* 6to4: 2002:AABB:CCDD::/48 */
		memcpy(&ret->s_addr, b + 2, 4);
		return true;
	}
	return false;
}

/* Classifies an IPv4 address given in host byte order. */
static enum net_addr_class classify_v4(uint32_t x)
{
	static const struct { uint32_t net; unsigned bits; enum net_addr_class c; } blocks[] = {
		{ 0xffffffff, 32, NET_ADDR_BROADCAST },
		{ 0x00000000, 8, NET_ADDR_UNSPECIFIED },	/* "this network" */
		{ 0x0a000000, 8, NET_ADDR_PRIVATE },
		{ 0x64400000, 10, NET_ADDR_CGNAT },
		{ 0x7f000000, 8, NET_ADDR_LOOPBACK },
		{ 0xa9fe0000, 16, NET_ADDR_LINK_LOCAL },	/* 169.254.169.254: metadata */
		{ 0xac100000, 12, NET_ADDR_PRIVATE },
		{ 0xc0000000, 24, NET_ADDR_RESERVED },	/* IETF protocol assignments */
		{ 0xc0000200, 24, NET_ADDR_RESERVED },	/* documentation */
		{ 0xc0586300, 24, NET_ADDR_RESERVED },	/* 6to4 relay anycast */
		{ 0xc0a80000, 16, NET_ADDR_PRIVATE },
		{ 0xc6120000, 15, NET_ADDR_RESERVED },	/* benchmarking */
		{ 0xc6336400, 24, NET_ADDR_RESERVED },	/* documentation */
		{ 0xcb007100, 24, NET_ADDR_RESERVED },	/* documentation */
		{ 0xe0000000, 4, NET_ADDR_MULTICAST },
		{ 0xf0000000, 4, NET_ADDR_RESERVED },
	};
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		uint32_t mask = blocks[i].bits ? ~UINT32_C(0) << (32 - blocks[i].bits) : 0;
		if ((x & mask) == blocks[i].net)
			return blocks[i].c;
	}
	return NET_ADDR_PUBLIC;
}

enum net_addr_class net_addr_classify(const struct net_addr *a)
{
	struct in_addr v4;

	if (a->family == AF_INET)
		return classify_v4(ntohl(a->v4.s_addr));
	if (a->family != AF_INET6)
		return NET_ADDR_RESERVED;
	const uint8_t *b = a->v6.s6_addr;
	if (IN6_IS_ADDR_UNSPECIFIED(&a->v6))
		return NET_ADDR_UNSPECIFIED;
	if (IN6_IS_ADDR_LOOPBACK(&a->v6))
		return NET_ADDR_LOOPBACK;
	if (net_addr_embedded_v4(a, &v4)) {
		enum net_addr_class c = classify_v4(ntohl(v4.s_addr));
		/* A 6to4 address of a public IPv4 is public; the forms the
		 * kernel maps straight to IPv4 are judged alike. */
		return c;
	}
	if (b[0] == 0xff)
		return NET_ADDR_MULTICAST;
	if ((b[0] & 0xfe) == 0xfc)
		return NET_ADDR_PRIVATE;
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return NET_ADDR_LINK_LOCAL;
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return NET_ADDR_PRIVATE;	/* site-local, deprecated */
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
		return NET_ADDR_RESERVED;	/* documentation */
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
		return NET_ADDR_RESERVED;	/* Teredo: carries an IPv4 address obfuscated */
	if (b[0] == 0x01 && b[1] == 0 && memcmp(b + 2, "\0\0\0\0\0\0", 6) == 0)
		return NET_ADDR_RESERVED;	/* discard-only 100::/64 */
	if ((b[0] & 0xe0) != 0x20)
		return NET_ADDR_RESERVED;	/* outside global unicast 2000::/3 */
	return NET_ADDR_PUBLIC;
}

const char *net_addr_class_name(enum net_addr_class c)
{
	static const char *const names[] = {
		[NET_ADDR_PUBLIC] = "public",
		[NET_ADDR_LOOPBACK] = "loopback",
		[NET_ADDR_PRIVATE] = "private",
		[NET_ADDR_CGNAT] = "cgnat",
		[NET_ADDR_LINK_LOCAL] = "link-local",
		[NET_ADDR_MULTICAST] = "multicast",
		[NET_ADDR_UNSPECIFIED] = "unspecified",
		[NET_ADDR_BROADCAST] = "broadcast",
		[NET_ADDR_RESERVED] = "reserved",
	};
	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

int net_cidr_parse(const char *s, struct net_cidr *ret)
{
	char addr[NET_ADDR_STRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct net_cidr c = { 0 };

	if (n >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, n);
	addr[n] = '\0';
	if (net_addr_parse(addr, &c.a) < 0)
		return -EINVAL;
	unsigned max = c.a.family == AF_INET ? 32 : 128;
	c.bits = max;
	if (slash) {
		const char *p = slash + 1;
		unsigned bits = 0;
		if (!*p || strlen(p) > 3)
			return -EINVAL;
		for (; *p; p++) {
			if (*p < '0' || *p > '9')
				return -EINVAL;
			bits = bits * 10 + (unsigned)(*p - '0');
		}
		if (bits > max)
			return -EINVAL;
		c.bits = bits;
	}
	*ret = c;
	return 0;
}

/* Whether the first bits of a and b agree. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a)
{
	struct in_addr v4;

	if (c->a.family == AF_INET) {
		if (a->family == AF_INET)
			v4 = a->v4;
		else if (!net_addr_embedded_v4(a, &v4))
			return false;
		return prefix_equal((const uint8_t *)&c->a.v4, (const uint8_t *)&v4, c->bits);
	}
	if (a->family != AF_INET6)
		return false;
	return prefix_equal(c->a.v6.s6_addr, a->v6.s6_addr, c->bits);
}

int net_host_normalize(const char *host, size_t len, char out[NET_HOST_MAX + 1])
{
	struct net_addr a;
	size_t label = 0;

	if (len && host[len - 1] == '.')
		len--;
	if (len == 0 || len > NET_HOST_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char ch = host[i];
		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		out[i] = ch;
	}
	out[len] = '\0';
	if (memchr(out, ':', len))	/* only an IPv6 literal has colons */
		return net_addr_parse(out, &a) < 0 ? -EINVAL : 0;
	for (size_t i = 0; i < len; i++) {
		char ch = out[i];
		if (ch == '.') {
			if (label == 0)
				return -EINVAL;
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
			return -EINVAL;
		if (++label > 63)
			return -EINVAL;
	}
	return label == 0 ? -EINVAL : 0;	/* "name.." leaves an empty label */
}

bool net_host_canonical(const char *host)
{
	char out[NET_HOST_MAX + 1];
	size_t len = strnlen(host, NET_HOST_MAX + 1);
	/* Normalizing changes nothing (a trailing dot or a capital would
	 * be rewritten). */
	return len <= NET_HOST_MAX && net_host_normalize(host, len, out) == 0 && memcmp(out, host, len + 1) == 0;
}
