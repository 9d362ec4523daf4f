/*
 * xfer_desc.c - the segment descriptor's wire form (xfer.h): fixed
 * little-endian fields, every one checked on decode, because the bytes come
 * from a peer.
 */
#include <errno.h>
#include <string.h>

#include "xfer_int.h"

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

size_t rk__xdesc_size(unsigned lanes)
{
	return lanes >= 1 && lanes <= RK_XFER_LANES_MAX ? RK_XDESC_HDR + 4 * (size_t)lanes : 0;
}

/* The rules both ends apply: NULL if @d is well formed, else the field at fault. */
static const char *fields_bad(const struct rk__xdesc *d)
{
	if (d->version != RK_XFER_DESC_VERSION)
		return "version";
	if (!d->access || (d->access & ~(unsigned)(RK_XFER_READ | RK_XFER_WRITE)))
		return "access";
	if (d->mode != RK_XFER_MW && d->mode != RK_XFER_MR)
		return "mode";
	if (!rk__xdesc_size(d->lanes))
		return "lane count";
	if (!d->gen)
		return "generation";
	if (!d->len || d->addr + d->len < d->addr)
		return "length";
	return NULL;
}

int rk__xdesc_encode(const struct rk__xdesc *d, void *buf, size_t cap, size_t *len)
{
	uint8_t *p = buf;
	size_t n;

	if (fields_bad(d))
		return -EINVAL;
	n = rk__xdesc_size(d->lanes);
	if (cap < n)
		return -ENOSPC;
	put32(p, RK_XDESC_MAGIC);
	p[4] = d->version;
	p[5] = d->access;
	p[6] = d->mode;
	p[7] = d->lanes;
	put32(p + 8, d->gen);
	put32(p + 12, d->seg_id);
	put64(p + 16, d->addr);
	put64(p + 24, d->len);
	for (unsigned i = 0; i < d->lanes; i++)
		put32(p + RK_XDESC_HDR + 4 * i, d->rkey[i]);
	*len = n;
	return 0;
}

int rk__xdesc_decode(const void *buf, size_t len, struct rk__xdesc *out, const char **why)
{
	const uint8_t *p = buf;
	struct rk__xdesc d;
	const char *bad;

	if (len < RK_XDESC_HDR) {
		*why = "truncated header";
		return -EPROTO;
	}
	if (get32(p) != RK_XDESC_MAGIC) {
		*why = "magic";
		return -EPROTO;
	}
	memset(&d, 0, sizeof(d));
	d.version = p[4];
	d.access = p[5];
	d.mode = p[6];
	d.lanes = p[7];
	d.gen = get32(p + 8);
	d.seg_id = get32(p + 12);
	d.addr = get64(p + 16);
	d.len = get64(p + 24);
	bad = fields_bad(&d);
	if (bad) {
		*why = bad;
		return -EPROTO;
	}
	if (len != rk__xdesc_size(d.lanes)) {
		*why = len < rk__xdesc_size(d.lanes) ? "truncated keys" : "trailing bytes";
		return -EPROTO;
	}
	for (unsigned i = 0; i < d.lanes; i++)
		d.rkey[i] = get32(p + RK_XDESC_HDR + 4 * i);
	*out = d;
	return 0;
}
