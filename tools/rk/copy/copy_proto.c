/*
 * copy_proto.c - encoding and validating rk copy's wire format (see
 * copy_proto.h). Everything that arrives from a peer passes one of the
 * decoders here before any other code looks at it; they never trust a
 * length they have not compared with the bytes actually received, and do
 * their arithmetic in 64 bits so no sum can wrap.
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>
#include <rdmakit/wire.h>

#include "cli.h"
#include "copy_proto.h"

uint32_t cp_lane_arg(unsigned lane)
{
	return lane ? CP_VERSION | CP_LANE_JOIN | (uint32_t)lane << 16 : CP_VERSION;
}

uint32_t cp_pull_arg(void)
{
	return CP_VERSION | CP_LANE_PULL;
}

int cp_lane_parse(uint32_t app_arg, unsigned *lane)
{
	unsigned l = (app_arg >> 16) & 0x7fff;

	if ((app_arg & 0xffff) != CP_VERSION)
		return -EPROTO;
	if (app_arg & CP_LANE_PULL) {
		if (app_arg != cp_pull_arg())
			return -EBADMSG;
		*lane = 0;
		return 2;
	}
	if (!(app_arg & CP_LANE_JOIN)) {
		if (l)
			return -EBADMSG;
		*lane = 0;
		return 0;
	}
	if (l == 0 || l >= CP_MAX_LANES)
		return -EBADMSG;
	*lane = l;
	return 1;
}

/* ---- control messages ---- */

/* Payload sizes by type: exact for fixed ones, bounds for the others. */
#define HELLO_LEN   (12 + CP_KEY_LEN + 12)
#define WELCOME_LEN (36 + CP_KEY_LEN)
#define RESULTS_MIN 4
#define ERROR_MIN   4
#define ERROR_TEXT  200

static int msg_header(uint8_t *p, size_t cap, uint8_t type, size_t payload)
{
	if (cap < CP_MSG_HDR || payload > cap - CP_MSG_HDR)
		return -ENOSPC;
	rk_put32(p, CP_MAGIC);
	p[4] = CP_VERSION;
	p[5] = type;
	rk_put16(p + 6, 0);
	rk_put32(p + 8, (uint32_t)payload);
	return 0;
}

int cp_msg_peek(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t plen;

	if (len < CP_MSG_HDR || rk_get32(p) != CP_MAGIC)
		return -EBADMSG;
	if (p[4] != CP_VERSION)
		return -EPROTO;
	if (len > CP_MSG_MAX)
		return -EMSGSIZE;
	plen = rk_get32(p + 8);
	if (rk_get16(p + 6) != 0 || (uint64_t)plen + CP_MSG_HDR != len)
		return -EBADMSG;
	switch (p[5]) {
	case CP_MSG_HELLO:
	case CP_MSG_WELCOME:
	case CP_MSG_RESULTS:
	case CP_MSG_ERROR:
	case CP_MSG_PULL:
		return p[5];
	default:
		return -EBADMSG;
	}
}

/* Check header and type, return the payload and its length. */
static const uint8_t *payload(const void *buf, size_t len, int type, size_t *plen)
{
	if (cp_msg_peek(buf, len) != type)
		return NULL;
	*plen = len - CP_MSG_HDR;
	return (const uint8_t *)buf + CP_MSG_HDR;
}

int cp_hello_encode(const struct cp_hello *h, void *buf, size_t len)
{
	uint8_t *p = buf;

	if (msg_header(p, len, CP_MSG_HELLO, HELLO_LEN))
		return -ENOSPC;
	rk_put32(p + 12, h->chunk);
	rk_put16(p + 16, h->depth);
	rk_put16(p + 18, h->flags);
	rk_put16(p + 20, h->lanes);
	rk_put16(p + 22, 0);
	memcpy(p + 24, h->replaces, CP_KEY_LEN);
	rk_put64(p + 24 + CP_KEY_LEN, h->total_bytes);
	rk_put32(p + 32 + CP_KEY_LEN, h->total_files);
	return CP_MSG_HDR + HELLO_LEN;
}

int cp_hello_decode(const void *buf, size_t len, struct cp_hello *h)
{
	size_t n;
	const uint8_t *p = payload(buf, len, CP_MSG_HELLO, &n);

	if (!p || n != HELLO_LEN || rk_get16(p + 10))
		return -EBADMSG;
	h->chunk = rk_get32(p);
	h->depth = rk_get16(p + 4);
	h->flags = rk_get16(p + 6);
	h->lanes = rk_get16(p + 8);
	memcpy(h->replaces, p + 12, CP_KEY_LEN);
	h->total_bytes = rk_get64(p + 12 + CP_KEY_LEN);
	h->total_files = rk_get32(p + 20 + CP_KEY_LEN);
	if (h->chunk < CP_CHUNK_MIN || h->chunk > CP_CHUNK_MAX || h->depth == 0 ||
	    (h->flags & ~CP_F_ALL) || h->lanes == 0 || h->lanes > CP_MAX_LANES)
		return -EBADMSG;
	/* No key without the flag: one encoding per meaning. */
	if (!(h->flags & CP_F_REPLACES)) {
		static const uint8_t zero[CP_KEY_LEN];

		if (memcmp(h->replaces, zero, CP_KEY_LEN))
			return -EBADMSG;
	}
	return 0;
}

int cp_welcome_encode(const struct cp_welcome *w, void *buf, size_t len)
{
	uint8_t *p = buf;

	if (msg_header(p, len, CP_MSG_WELCOME, WELCOME_LEN))
		return -ENOSPC;
	p += CP_MSG_HDR;
	rk_put64(p, w->ring_addr);
	rk_put32(p + 8, w->rkey);
	rk_put32(p + 12, w->chunk);
	rk_put16(p + 16, w->nslots);
	rk_put16(p + 18, w->max_name);
	rk_put32(p + 20, w->max_files);
	rk_put64(p + 24, w->max_file_size);
	rk_put32(p + 32, 0);
	memcpy(p + 36, w->key, CP_KEY_LEN);
	return CP_MSG_HDR + WELCOME_LEN;
}

int cp_welcome_decode(const void *buf, size_t len, struct cp_welcome *w)
{
	size_t n;
	const uint8_t *p = payload(buf, len, CP_MSG_WELCOME, &n);

	if (!p || n != WELCOME_LEN || rk_get32(p + 32) != 0)
		return -EBADMSG;
	w->ring_addr = rk_get64(p);
	w->rkey = rk_get32(p + 8);
	w->chunk = rk_get32(p + 12);
	w->nslots = rk_get16(p + 16);
	w->max_name = rk_get16(p + 18);
	w->max_files = rk_get32(p + 20);
	w->max_file_size = rk_get64(p + 24);
	memcpy(w->key, p + 36, CP_KEY_LEN);
	if (w->chunk < CP_CHUNK_MIN || w->chunk > CP_CHUNK_MAX || w->nslots == 0 ||
	    w->nslots > CP_MAX_SLOTS || w->max_name == 0)
		return -EBADMSG;
	return 0;
}

int cp_results_encode(const struct cp_results *c, void *buf, size_t len)
{
	size_t plen = RESULTS_MIN + (size_t)c->nres * CP_RESULT_SIZE;
	uint8_t *p = buf;

	if (c->nres > CP_MAX_RECORDS || msg_header(p, len, CP_MSG_RESULTS, plen))
		return -ENOSPC;
	p += CP_MSG_HDR;
	rk_put16(p, c->seq);
	rk_put16(p + 2, c->nres);
	p += RESULTS_MIN;
	for (unsigned i = 0; i < c->nres; i++, p += CP_RESULT_SIZE) {
		const struct cp_result *r = &c->res[i];

		rk_put32(p, r->file_id);
		p[4] = r->kind;
		p[5] = r->flags;
		rk_put16(p + 6, r->code);
		rk_put32(p + 8, r->sys_errno);
		rk_put64(p + 12, r->offset);
		rk_put32(p + 20, 0);
	}
	return (int)(CP_MSG_HDR + plen);
}

int cp_results_decode(const void *buf, size_t len, struct cp_results *c)
{
	size_t n;
	const uint8_t *p = payload(buf, len, CP_MSG_RESULTS, &n);

	if (!p || n < RESULTS_MIN)
		return -EBADMSG;
	c->seq = rk_get16(p);
	c->nres = rk_get16(p + 2);
	if (c->nres > CP_MAX_RECORDS || n != RESULTS_MIN + (size_t)c->nres * CP_RESULT_SIZE)
		return -EBADMSG;
	p += RESULTS_MIN;
	for (unsigned i = 0; i < c->nres; i++, p += CP_RESULT_SIZE) {
		struct cp_result *r = &c->res[i];

		r->file_id = rk_get32(p);
		r->kind = p[4];
		r->flags = p[5];
		r->code = rk_get16(p + 6);
		r->sys_errno = rk_get32(p + 8);
		r->offset = rk_get64(p + 12);
		if ((r->kind != CP_RES_READY && r->kind != CP_RES_DONE) || r->code > CP_E_LAST ||
		    r->flags || rk_get32(p + 20))
			return -EBADMSG;
	}
	return 0;
}

/* PULL payload: chunk u32, depth u16, flags u16, options u8, lanes u8, nsrc u16, dest (u16 +
 * bytes), sources (u16 + bytes each). */
#define PULL_FIXED 12

static int pull_put(uint8_t *p, size_t *off, size_t cap, const char *s, uint16_t n)
{
	if (*off + 2 + n > cap)
		return -ENOSPC;
	rk_put16(p + *off, n);
	memcpy(p + *off + 2, s, n);
	*off += 2 + (size_t)n;
	return 0;
}

int cp_pull_encode(const struct cp_pull *p, void *buf, size_t len)
{
	uint8_t *b = buf;
	size_t off = CP_MSG_HDR + PULL_FIXED, cap = len < CP_MSG_MAX ? len : CP_MSG_MAX;

	if (cap < off || p->nsrc > CP_PULL_MAX_SRC)
		return -ENOSPC;
	if (pull_put(b, &off, cap, p->dest, p->dest_len))
		return -ENOSPC;
	for (unsigned i = 0; i < p->nsrc; i++)
		if (pull_put(b, &off, cap, p->src[i], p->src_len[i]))
			return -ENOSPC;
	if (msg_header(b, len, CP_MSG_PULL, off - CP_MSG_HDR))
		return -ENOSPC;
	rk_put32(b + 12, p->chunk);
	rk_put16(b + 16, p->depth);
	rk_put16(b + 18, p->flags);
	b[20] = p->options;
	b[21] = p->lanes;
	rk_put16(b + 22, p->nsrc);
	return (int)off;
}

/* One length-prefixed string at *off of the @n-byte payload: 0 or -EBADMSG. */
static int pull_get(const uint8_t *p, size_t n, size_t *off, size_t min, const char **s,
		    uint16_t *slen)
{
	uint16_t l;

	if (*off + 2 > n)
		return -EBADMSG;
	l = rk_get16(p + *off);
	if (l < min || l > CP_NAME_MAX || *off + 2 + l > n || memchr(p + *off + 2, 0, l))
		return -EBADMSG;
	*s = (const char *)p + *off + 2;
	*slen = l;
	*off += 2 + (size_t)l;
	return 0;
}

int cp_pull_decode(const void *buf, size_t len, struct cp_pull *p)
{
	size_t n, off = PULL_FIXED;
	const uint8_t *b = payload(buf, len, CP_MSG_PULL, &n);

	if (!b || n < PULL_FIXED)
		return -EBADMSG;
	memset(p, 0, sizeof(*p));
	p->chunk = rk_get32(b);
	p->depth = rk_get16(b + 4);
	p->flags = rk_get16(b + 6);
	p->options = b[8];
	p->lanes = b[9];
	p->nsrc = rk_get16(b + 10);
	if (p->chunk < CP_CHUNK_MIN || p->chunk > CP_CHUNK_MAX || p->depth == 0 ||
	    (p->flags & ~(CP_F_FORCE | CP_F_RESUME)) || (p->options & ~CP_PULL_RECURSIVE) ||
	    p->lanes == 0 || p->lanes > CP_MAX_LANES || p->nsrc == 0 || p->nsrc > CP_PULL_MAX_SRC)
		return -EBADMSG;
	if (pull_get(b, n, &off, 0, &p->dest, &p->dest_len))
		return -EBADMSG;
	for (unsigned i = 0; i < p->nsrc; i++)
		if (pull_get(b, n, &off, 1, &p->src[i], &p->src_len[i]))
			return -EBADMSG;
	return off == n ? 0 : -EBADMSG;
}

int cp_error_encode(uint16_t code, const char *text, void *buf, size_t len)
{
	size_t tl = strnlen(text, ERROR_TEXT);
	uint8_t *p = buf;

	if (msg_header(p, len, CP_MSG_ERROR, ERROR_MIN + tl))
		return -ENOSPC;
	rk_put16(p + 12, code);
	rk_put16(p + 14, (uint16_t)tl);
	memcpy(p + 16, text, tl);
	return (int)(CP_MSG_HDR + ERROR_MIN + tl);
}

int cp_error_decode(const void *buf, size_t len, uint16_t *code, char *text, size_t text_len)
{
	size_t n, tl;
	const uint8_t *p = payload(buf, len, CP_MSG_ERROR, &n);

	if (!p || n < ERROR_MIN || text_len == 0)
		return -EBADMSG;
	*code = rk_get16(p);
	tl = rk_get16(p + 2);
	if (tl > ERROR_TEXT || n != ERROR_MIN + tl)
		return -EBADMSG;
	/* Printable ASCII only: the text ends up on the user's terminal. */
	cli_clean_text(text, text_len, p + 4, tl);
	return 0;
}

/* ---- slot header blocks ---- */

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

void cp_slot_init(struct cp_slot_writer *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = CP_SLOT_HDR;
	w->nrec = 0;
	rk_put32(w->buf, CP_SLOT_MAGIC);
	rk_put16(w->buf + 4, 0);
	rk_put16(w->buf + 6, 0);
	rk_put32(w->buf + 8, 0);
	rk_put32(w->buf + 12, 0);
}

void cp_slot_finish(struct cp_slot_writer *w, uint32_t seq)
{
	rk_put32(w->buf + 8, seq);
	rk_put32(w->buf + 12, (uint32_t)w->len);
}

int cp_slot_split(const void *buf, size_t len, uint32_t *hlen)
{
	const uint8_t *p = buf;
	uint32_t h;

	if (len < CP_SLOT_HDR || rk_get32(p) != CP_SLOT_MAGIC)
		return -EBADMSG;
	h = rk_get32(p + 12);
	if (h < CP_SLOT_HDR || h > CP_HDR_SIZE || h > len)
		return -EBADMSG;
	*hlen = h;
	return 0;
}

int cp_slot_room(const struct cp_slot_writer *w, size_t name_len)
{
	return w->nrec < CP_MAX_RECORDS && name_len <= CP_NAME_MAX &&
	       w->len + CP_REC_FIXED + pad8(name_len) <= w->cap;
}

int cp_slot_add(struct cp_slot_writer *w, const struct cp_rec *r)
{
	uint8_t *p = w->buf + w->len;
	size_t nl = r->name ? r->name_len : 0;

	if (!cp_slot_room(w, nl))
		return -ENOSPC;
	p[0] = r->type;
	p[1] = r->flags;
	rk_put16(p + 2, (uint16_t)nl);
	rk_put32(p + 4, r->file_id);
	rk_put64(p + 8, r->a);
	rk_put64(p + 16, r->b);
	rk_put32(p + 24, r->data_off);
	rk_put32(p + 28, r->data_len);
	memcpy(p + 32, r->hash, 16);
	if (nl)
		memcpy(p + CP_REC_FIXED, r->name, nl);
	memset(p + CP_REC_FIXED + nl, 0, pad8(nl) - nl);
	w->len += CP_REC_FIXED + pad8(nl);
	w->nrec++;
	rk_put16(w->buf + 4, (uint16_t)w->nrec);
	return 0;
}

int cp_slot_reader_init(struct cp_slot_reader *rd, const void *buf, size_t len, uint32_t data_len)
{
	const uint8_t *p = buf;

	if (len < CP_SLOT_HDR || len > CP_HDR_SIZE || rk_get32(p) != CP_SLOT_MAGIC ||
	    rk_get16(p + 4) > CP_MAX_RECORDS || rk_get16(p + 6) != 0 || rk_get32(p + 12) != len)
		return -EBADMSG;
	rd->buf = p;
	rd->len = len;
	rd->pos = CP_SLOT_HDR;
	rd->data_len = data_len;
	rd->nrec = rk_get16(p + 4);
	rd->seq = rk_get32(p + 8);
	rd->seen = 0;
	return 0;
}

int cp_slot_next(struct cp_slot_reader *rd, struct cp_rec *r)
{
	const uint8_t *p;
	size_t nl, used;

	if (rd->seen == rd->nrec)
		return rd->pos == rd->len ? 0 : -EBADMSG; /* no trailing bytes */
	if (rd->len - rd->pos < CP_REC_FIXED)
		return -EBADMSG;
	p = rd->buf + rd->pos;
	r->type = p[0];
	r->flags = p[1];
	r->name_len = rk_get16(p + 2);
	r->file_id = rk_get32(p + 4);
	r->a = rk_get64(p + 8);
	r->b = rk_get64(p + 16);
	r->data_off = rk_get32(p + 24);
	r->data_len = rk_get32(p + 28);
	memcpy(r->hash, p + 32, 16);
	nl = r->name_len;
	if (r->type < CP_REC_DIR || r->type > CP_REC_BYE || nl > CP_NAME_MAX)
		return -EBADMSG;
	used = CP_REC_FIXED + pad8(nl);
	if (used > rd->len - rd->pos)
		return -EBADMSG;
	for (size_t i = CP_REC_FIXED + nl; i < used; i++)
		if (p[i])
			return -EBADMSG;
	if ((uint64_t)r->data_off + r->data_len > rd->data_len)
		return -EBADMSG;
	/* Names only where they mean something; data only on DATA records. */
	if ((r->type == CP_REC_DIR || r->type == CP_REC_BEGIN) != (nl > 0))
		return -EBADMSG;
	if (r->flags & ~(r->type == CP_REC_BEGIN ? CP_BEGIN_ALL : 0u))
		return -EBADMSG;
	if (r->type == CP_REC_BEGIN && (r->flags & CP_BEGIN_PROOF)) {
		if (!(r->flags & CP_BEGIN_WAIT) || r->data_len % 16 ||
		    r->data_len > 16 * CP_PROOF_MAX)
			return -EBADMSG;
	} else if (r->type != CP_REC_DATA && (r->data_off || r->data_len)) {
		return -EBADMSG;
	}
	r->name = nl ? (const char *)p + CP_REC_FIXED : NULL;
	rd->pos += used;
	rd->seen++;
	return 1;
}

const char *cp_code_str(unsigned code)
{
	switch (code) {
	case CP_OK:
		return "ok";
	case CP_E_EXISTS:
		return "destination exists (use --force to overwrite)";
	case CP_E_PATH:
		return "destination path refused (absolute, '..', or escapes the served directory)";
	case CP_E_LIMIT:
		return "over the server's limits (name length or --max-file-size)";
	case CP_E_IO:
		return "I/O error on the server";
	case CP_E_HASH:
		return "integrity check failed (xxh3-128 mismatch)";
	case CP_E_NOSPACE:
		return "not enough space on the server";
	case CP_E_BUSY:
		return "another transfer of this file is in progress";
	case CP_E_PROTO:
		return "protocol error";
	case CP_E_ABORTED:
		return "aborted";
	case CP_E_UPTODATE:
		return "already up to date";
	case CP_E_OPEN_LIMIT:
		return "too many files open at once in this session (server's --max-open)";
	case CP_E_BYTES_LIMIT:
		return "over this session's byte limit (server's --max-bytes)";
	case CP_E_ENTRY_LIMIT:
		return "over this session's entry limit (server's --max-files)";
	default:
		return "unknown error";
	}
}

uint64_t cp_proof_step(uint64_t size, uint32_t chunk)
{
	uint64_t chunks = size / chunk + (size % chunk != 0);
	uint64_t per = chunks / CP_PROOF_MAX + (chunks % CP_PROOF_MAX != 0);

	return (per ? per : 1) * chunk;
}

unsigned cp_proof_count(uint64_t size, uint32_t chunk)
{
	return size ? (unsigned)((size - 1) / cp_proof_step(size, chunk)) : 0;
}

int cp_proof_offset_ok(uint64_t size, uint32_t chunk, uint64_t off)
{
	uint64_t step = cp_proof_step(size, chunk);

	return off == 0 || off == size ||
	       (off % step == 0 && off / step <= cp_proof_count(size, chunk));
}

void cp_hash128(const void *data, size_t len, uint8_t out[16])
{
	XXH128_hash_t h = XXH3_128bits(data, len);

	rk_put64(out, h.high64);
	rk_put64(out + 8, h.low64);
}

void cp_hash_digest(const XXH3_state_t *st, uint8_t out[16])
{
	XXH128_hash_t h = XXH3_128bits_digest(st);

	rk_put64(out, h.high64);
	rk_put64(out + 8, h.low64);
}
