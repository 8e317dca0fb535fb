/* SPDX-License-Identifier: MIT */
/*
 * The store's front: the table of backends, opening one by name, the calls
 * that go through a store's ops, the check of who serves a store's Unix
 * socket, and the arguments' hash (SHA-256, small enough to carry here
 * rather than pull in a crypto library for it).
 */
#include "lib/store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/base/util.h"

const struct store_ops *const store_backends[] = {
	&store_memory_ops,
	&store_redis_ops,
	NULL,
};

void store_config_defaults(struct store_config *c)
{
	*c = (struct store_config){
		.kind = "memory",
		.address = "127.0.0.1:6379",
		.prefix = "toolcalld:",
		.lease_ms = 10000,
		.timeout_ms = 2000,
		.ttl_ms = 60000,
		.max_entries = 10000,
		.max_bytes = UINT64_C(256) << 20,
		.max_value_bytes = (size_t)64 << 20,
		.max_tasks = 1000,
		.server_uid = (uid_t)-1,
	};
}

int store_server_trusted(int fd, const char *path, uid_t server_uid, char *why, size_t n)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		int r = -errno;
		snprintf(why, n, "cannot tell who serves %s: %s", path, strerror(-r));
		return r;
	}
	uid_t own = geteuid();
	bool extra = server_uid != (uid_t)-1 && server_uid != 0;
	/* (uid_t)-1: the kernel knows no peer, which is trusted by nobody. */
	if (cred.uid != (uid_t)-1 && (cred.uid == 0 || cred.uid == own || (extra && cred.uid == server_uid)))
		return 0;
	char found[24] = "unknown", own_s[48] = "", extra_s[48] = "";
	if (cred.uid != (uid_t)-1)
		snprintf(found, sizeof(found), "%u", (unsigned)cred.uid);
	if (own != 0)
		snprintf(own_s, sizeof(own_s), ", %u (this daemon)", (unsigned)own);
	if (extra && server_uid != own)
		snprintf(extra_s, sizeof(extra_s), ", %u (store.server_uid)", (unsigned)server_uid);
	snprintf(why, n, "refused: the server on %s runs as uid %s; accepted are uid 0 (root)%s%s%s", path,
		 found, own_s, extra_s,
		 extra ? "" : "; store.server_uid may name one more");
	return -EPERM;
}

/* Opens the backend named by cfg->kind. */
int store_open(struct tc_loop *loop, const struct store_config *cfg, const struct store_value_ops *vops,
	       struct store **ret)
{
	const char *kind = cfg->kind ? cfg->kind : "memory";
	for (const struct store_ops *const *b = store_backends; *b; b++)
		if (str_eq((*b)->name, kind))
			return (*b)->open(loop, cfg, vops, ret);
	return -ENOENT;
}

struct store *store_free(struct store *s)
{
	if (s)
		s->ops->free(s);
	return NULL;
}

const char *store_kind(const struct store *s) { return s->ops->name; }

struct store_wait *store_claim(struct store *s, const struct store_key *k, store_cb cb, void *arg)
{
	return s->ops->claim(s, k, cb, arg);
}

/* Every backend's handles start with their ops, as the loop's do. */
struct handle {
	const struct store_ops *ops;
};
#define OPS(h) (((const struct handle *)(const void *)(h))->ops)

void store_wait_cancel(struct store_wait *w)
{
	if (w)
		OPS(w)->wait_cancel(w);
}

void store_complete(struct store_claim *c, void *value) { OPS(c)->complete(c, value); }
void store_release(struct store_claim *c) { OPS(c)->release(c); }

struct store_wait *store_task_put(struct store *s, uid_t uid, const char *id, const char *meta, size_t meta_len,
				  uint64_t order, uint64_t keep_ms, bool create, store_put_cb cb, void *arg)
{
	return s->ops->task_put(s, uid, id, meta, meta_len, order, keep_ms, create, cb, arg);
}

struct store_wait *store_task_swap(struct store *s, uid_t uid, const char *id, const char *old, size_t old_len,
				   const char *meta, size_t meta_len, uint64_t keep_ms, store_put_cb cb, void *arg)
{
	return s->ops->task_swap(s, uid, id, old, old_len, meta, meta_len, keep_ms, cb, arg);
}

void store_hear_cancels(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg)
{
	s->ops->hear_cancels(s, fn, arg);
}

void store_reconfigure(struct store *s, const struct store_config *c) { s->ops->reconfigure(s, c); }

struct store_wait *store_task_get(struct store *s, uid_t uid, const char *id,
				  void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg)
{
	return s->ops->task_get(s, uid, id, cb, arg);
}

struct store_wait *store_task_list(struct store *s, uid_t uid, uint64_t after, size_t limit,
				   void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
				   void *arg)
{
	return s->ops->task_list(s, uid, after, limit, cb, arg);
}

void store_write_stats(struct store *s, struct jgen *g) { s->ops->write_stats(s, g); }

void store_set_limits(struct store *s, uint64_t ttl_ms, size_t max_entries, uint64_t max_bytes)
{
	s->ops->set_limits(s, ttl_ms, max_entries, max_bytes);
}

size_t store_entries(struct store *s) { return s->ops->entries(s); }
void store_sweep(struct store *s) { s->ops->sweep(s); }
uint64_t store_next_expiry(struct store *s) { return s->ops->next_expiry(s); }

/* --- SHA-256 (FIPS 180-4) ---------------------------------------------- */

struct sha256 {
	uint32_t h[8];
	uint8_t block[64];
	size_t fill;
	uint64_t total;
};

static const uint32_t K256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *c, const uint8_t *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
		       p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
	uint32_t e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = cc;
		cc = b;
		b = a;
		a = t1 + t2;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
	c->h[5] += f;
	c->h[6] += g;
	c->h[7] += h;
}

static void sha256_init(struct sha256 *c)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	memcpy(c->h, iv, sizeof(iv));
	c->fill = 0;
	c->total = 0;
}

static void sha256_update(struct sha256 *c, const void *data, size_t n)
{
	const uint8_t *p = data;
	c->total += n;
	while (n) {
		size_t k = MIN(n, 64 - c->fill);
		memcpy(c->block + c->fill, p, k);
		c->fill += k;
		p += k;
		n -= k;
		if (c->fill == 64) {
			sha256_block(c, c->block);
			c->fill = 0;
		}
	}
}

static void sha256_final(struct sha256 *c, uint8_t out[static STORE_HASH_LEN])
{
	uint64_t bits = c->total * 8;
	uint8_t pad = 0x80;
	sha256_update(c, &pad, 1);
	pad = 0;
	while (c->fill != 56)
		sha256_update(c, &pad, 1);
	uint8_t len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(c, len, 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void store_sha256(const void *p, size_t n, uint8_t ret[static STORE_HASH_LEN])
{
	struct sha256 c;
	sha256_init(&c);
	sha256_update(&c, p, n);
	sha256_final(&c, ret);
}

void store_args_hash(const char *tool, const char *canon, size_t canon_len,
		     uint8_t ret[static STORE_HASH_LEN])
{
	struct sha256 c;
	sha256_init(&c);
	sha256_update(&c, tool, strlen(tool) + 1);
	sha256_update(&c, canon, canon_len);
	sha256_final(&c, ret);
}

void store_session_put(struct store *s, uid_t uid, const char *id, const char *rec, size_t n, uint64_t keep_ms)
{
	if (n <= STORE_SESSION_MAX)
		s->ops->session_put(s, uid, id, rec, n, keep_ms);
}

struct store_wait *store_session_get(struct store *s, uid_t uid, const char *id,
				     void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg)
{
	return s->ops->session_get(s, uid, id, cb, arg);
}

bool store_writing(struct store *s)
{
	return s && s->ops->writing && s->ops->writing(s);
}
