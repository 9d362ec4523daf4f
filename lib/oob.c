/*
 * oob.c - the out-of-band connection message: encode and validate.
 *
 * The message comes off a TCP socket from whoever connected, so decoding
 * trusts nothing: magic, version, the length field, the actual length and
 * every field's range are checked before anything is used.
 */
#include <errno.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "rk_internal.h"

static const uint8_t oob_magic[4] = {'R', 'K', 'O', 'B'};

int rk_oob_encode(const struct rk_oob_info *in, void *buf, size_t len)
{
	uint8_t *p = buf;

	if (len < RK_OOB_MSG_LEN)
		return -ENOSPC;
	if (in->qpn > 0xffffff || in->psn > 0xffffff || in->mtu < 1 || in->mtu > 5)
		return -EINVAL;
	memset(p, 0, RK_OOB_MSG_LEN);
	memcpy(p, oob_magic, 4);
	rk_put16(p + 4, RK_OOB_VERSION);
	rk_put16(p + 6, RK_OOB_MSG_LEN);
	rk_put16(p + 8, in->lid);
	p[10] = in->mtu;
	p[11] = 0; /* flags */
	rk_put32(p + 12, in->qpn);
	rk_put32(p + 16, in->psn);
	memcpy(p + 20, in->gid, 16);
	rk_put64(p + 36, in->buf_addr);
	rk_put64(p + 44, in->buf_len);
	rk_put32(p + 52, in->buf_rkey);
	rk_put32(p + 56, in->app);
	rk_put32(p + 60, 0); /* reserved */
	return RK_OOB_MSG_LEN;
}

int rk_oob_decode(const void *buf, size_t len, struct rk_oob_info *out, struct rk_error *err)
{
	const uint8_t *p = buf;
	struct rk_oob_info in;
	unsigned v, l;

	if (len < 8)
		return rk__err_set(err, EBADMSG, "rk_oob_decode", "truncated: %zu bytes", len);
	if (memcmp(p, oob_magic, 4) != 0)
		return rk__err_set(err, EBADMSG, "rk_oob_decode",
				   "bad magic (not an rdmakit peer)");
	v = rk_get16(p + 4);
	if (v != RK_OOB_VERSION)
		return rk__err_set(err, EPROTO, "rk_oob_decode", "peer speaks version %u, we %u", v,
				   RK_OOB_VERSION);
	l = rk_get16(p + 6);
	if (l != RK_OOB_MSG_LEN)
		return rk__err_set(err, EMSGSIZE, "rk_oob_decode", "length field %u, expected %u",
				   l, RK_OOB_MSG_LEN);
	if (len < RK_OOB_MSG_LEN)
		return rk__err_set(err, EBADMSG, "rk_oob_decode", "truncated: %zu of %u bytes", len,
				   RK_OOB_MSG_LEN);
	if (len > RK_OOB_MSG_LEN)
		return rk__err_set(err, EMSGSIZE, "rk_oob_decode", "oversized: %zu bytes", len);
	memset(&in, 0, sizeof(in));
	in.lid = rk_get16(p + 8);
	in.mtu = p[10];
	in.qpn = rk_get32(p + 12);
	in.psn = rk_get32(p + 16);
	memcpy(in.gid, p + 20, 16);
	in.buf_addr = rk_get64(p + 36);
	in.buf_len = rk_get64(p + 44);
	in.buf_rkey = rk_get32(p + 52);
	in.app = rk_get32(p + 56);
	if (p[11] != 0 || rk_get32(p + 60) != 0)
		return rk__err_set(err, EINVAL, "rk_oob_decode", "reserved fields not zero");
	if (in.mtu < 1 || in.mtu > 5)
		return rk__err_set(err, EINVAL, "rk_oob_decode", "mtu code %u invalid", in.mtu);
	if (in.qpn == 0 || in.qpn > 0xffffff || in.psn > 0xffffff)
		return rk__err_set(err, EINVAL, "rk_oob_decode", "qpn 0x%x / psn 0x%x out of range",
				   in.qpn, in.psn);
	if (in.buf_len && in.buf_addr + in.buf_len < in.buf_addr)
		return rk__err_set(err, EINVAL, "rk_oob_decode", "buffer wraps the address space");
	*out = in;
	return 0;
}
