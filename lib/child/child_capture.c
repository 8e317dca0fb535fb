/* SPDX-License-Identifier: MIT */
/*
 * What is kept of a child's output stream: the first half of the cap as it
 * comes, the last half in a ring, and at the end the two joined with a
 * marker line saying how much was left out, cut on character boundaries.
 */
#include "lib/child/child_internal.h"

#include <inttypes.h>
#include <string.h>

#include "proto/base/util.h"

void capture_init(struct capture *cp, size_t cap)
{
	cp->head_cap = cap / 2;
	cp->tail_cap = cap - cp->head_cap;
}

/* Adds bytes: the head fills first, then the ring keeps the latest. */
void capture_add(struct capture *cp, const char *p, size_t n)
{
	cp->total += n;
	size_t take = MIN(n, cp->head_cap - buf_size(&cp->head));
	if (take) {
		buf_append(&cp->head, p, take);
		p += take;
		n -= take;
	}
	if (!n || !cp->tail_cap)
		return;
	if (!cp->ring)
		cp->ring = xmalloc(cp->tail_cap);
	if (n >= cp->tail_cap) {
		memcpy(cp->ring, p + n - cp->tail_cap, cp->tail_cap);
		cp->ring_start = 0;
		cp->ring_len = cp->tail_cap;
		return;
	}
	size_t pos = (cp->ring_start + cp->ring_len) % cp->tail_cap;
	size_t first = MIN(n, cp->tail_cap - pos);
	memcpy(cp->ring + pos, p, first);
	memcpy(cp->ring, p + first, n - first);
	cp->ring_len += n;
	if (cp->ring_len > cp->tail_cap) {
		cp->ring_start = (cp->ring_start + cp->ring_len - cp->tail_cap) % cp->tail_cap;
		cp->ring_len = cp->tail_cap;
	}
}

/* Returns len shortened by a trailing incomplete UTF-8 sequence, if any. */
static size_t utf8_trim_end(const char *s, size_t len)
{
	for (size_t k = 1; k <= 4 && k <= len; k++) {
		unsigned char b = (unsigned char)s[len - k];
		if ((b & 0xC0) == 0x80)
			continue;
		size_t need = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
		return need > k ? len - k : len;
	}
	return len;
}

static char ring_at(const struct capture *cp, size_t i)
{
	return cp->ring[(cp->ring_start + i) % cp->tail_cap];
}

size_t capture_kept(const struct capture *cp)
{
	return buf_size(&cp->head) + cp->ring_len;
}

/* Builds what is kept of a stream: all of it when nothing was dropped,
 * else head, marker line and tail, cut on character boundaries. */
void capture_finish(struct capture *cp, char **ret, size_t *ret_len, bool *ret_truncated)
{
	capture_finish_within(cp, SIZE_MAX, ret, ret_len, ret_truncated);
}

void capture_finish_within(struct capture *cp, size_t budget, char **ret, size_t *ret_len, bool *ret_truncated)
{
	struct buf out = {0};
	size_t head_len = buf_size(&cp->head);
	size_t ring_len = cp->ring_len;
	size_t skip = 0;

	if (head_len + ring_len > budget) {
		/* Half the budget to the head at most, the rest to the
		 * latest bytes of the tail. */
		head_len = MIN(head_len, budget / 2);
		ring_len = MIN(ring_len, budget - head_len);
	}
	/* The ring's last ring_len bytes. */
	size_t ring_off = cp->ring_len - ring_len;
	bool truncated = cp->total > (uint64_t)head_len + ring_len;

	if (truncated) {
		head_len = utf8_trim_end(buf_head(&cp->head), head_len);
		while (skip < 3 && skip < ring_len && ((unsigned char)ring_at(cp, ring_off + skip) & 0xC0) == 0x80)
			skip++;
	}
	buf_append(&out, buf_head(&cp->head), head_len);
	if (truncated)
		buf_printf(&out, "\n[... %" PRIu64 " bytes omitted ...]\n", cp->total - head_len - (ring_len - skip));
	if (ring_len > skip) {
		size_t start = (cp->ring_start + ring_off + skip) % cp->tail_cap;
		size_t n = ring_len - skip;
		size_t first = MIN(n, cp->tail_cap - start);
		buf_append(&out, cp->ring + start, first);
		buf_append(&out, cp->ring, n - first);
	}
	*ret_len = buf_size(&out);
	*ret = buf_steal(&out);
	*ret_truncated = truncated;
}

void capture_free(struct capture *cp)
{
	buf_free(&cp->head);
	free(cp->ring);
	cp->ring = NULL;
}
