/*
 * copy_send_file.c - a sending session's plan items into records (see
 * copy_send_int.h): slots filled in order and handed to the lanes, small
 * files several to a slot, large ones a chunk per slot after their READY,
 * and --resume's proofs of what we hold.
 *
 * Only the main thread runs here. It holds s->mu except while it reads
 * and hashes file data into a slot that is its alone (LS_FILL) or into
 * its hash buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "copy_files.h"
#include "copy_send_int.h"

static void unlock_main(struct sender *s)
{
	if (s->threaded)
		pthread_mutex_unlock(&s->mu);
}

static void lock_main(struct sender *s)
{
	if (s->threaded)
		pthread_mutex_lock(&s->mu);
}

/* ---- slots ---- */

/*
 * Hand the filled slot to the lane the ring gave it for posting, with its
 * header block moved to sit right before the data: one write carries
 * both. The ring puts the slots of all lanes back in sequence at the
 * server; the block repeats its sequence number.
 */
static int flush(struct sender *s)
{
	struct lslot *ls;
	struct send_lane *l;

	if (s->cur < 0)
		return 0;
	if (s->fatal)
		return -1;
	ls = &s->slots[s->cur];
	cp_slot_finish(&s->wr, (uint32_t)ls->rb.seq);
	memmove(snd_slot_data(s, s->cur) - s->wr.len, snd_slot_hdr(s, s->cur), s->wr.len);
	ls->state = LS_POSTED;
	ls->hlen = (uint16_t)s->wr.len;
	ls->dlen = s->dlen;
	l = &s->lanes[ls->rb.lane];
	l->q[l->qtail++ % CP_MAX_SLOTS] = (uint16_t)s->cur;
	s->cur = -1;
	snd_wake(l);
	return 0;
}

/*
 * Make sure a slot is being filled: the ring's next one, once the server
 * gave it back (a credit), our write from it completed and the server
 * answered the slot that used it before (its RESULTS): the RESULTS the
 * server may have on their way to us never outnumber the slots, so our
 * receive queue holds them (RQ_DEPTH) whichever lane's thread is behind.
 */
static int get_slot(struct sender *s)
{
	struct rk_error e;

	if (s->cur >= 0)
		return 0;
	for (;;) {
		int i = (int)(s->next_seq % s->w.nslots), r;
		struct rk_ring_tx_buf b;

		if (s->slots[i].state == LS_FREE && rk_ring_tx_credits(s->ring) &&
		    s->next_seq - s->results_seq < s->w.nslots) {
			r = rk_ring_tx_reserve(s->ring, &b, &e);
			if (r == 0) { /* b.slot is i: the ring counts as we do */
				s->next_seq++;
				s->cur = (int)b.slot;
				s->slots[s->cur].state = LS_FILL;
				s->slots[s->cur].rb = b;
				cp_slot_init(&s->wr, snd_slot_hdr(s, s->cur), CP_HDR_SIZE);
				s->dlen = 0;
				return 0;
			}
			if (r != -EAGAIN) { /* its lane was dropped: the ring said why */
				snd_fatal_transport(s, "connection lost: %s", rk_error_str(&e));
				return -1;
			}
		}
		if (snd_pump(s, WAIT_MS))
			return -1;
	}
}

/* A slot with room for @nrec records, @name_len bytes of name and @data bytes. */
static int need(struct sender *s, unsigned nrec, size_t name_len, uint64_t data)
{
	if (s->cur >= 0 &&
	    (s->wr.nrec + nrec > CP_MAX_RECORDS ||
	     s->wr.len + nrec * CP_REC_FIXED + name_len + 8 > CP_HDR_SIZE ||
	     s->dlen + data > s->w.chunk) &&
	    flush(s))
		return -1;
	return get_slot(s);
}

static void add(struct sender *s, const struct cp_rec *r)
{
	/* need() made room; a failure here is a bug, not a peer's doing. */
	if (cp_slot_add(&s->wr, r))
		abort();
}

/* ---- files ---- */

static int read_full(int fd, uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA; /* the file shrank */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static void local_fail(struct cp_item *it, const char *what, int e)
{
	snprintf(it->local_err, sizeof(it->local_err), "%s: %s", what,
		 e == -ENODATA ? "the file changed while being copied" : strerror(abs(e)));
	it->state = CP_ITEM_DONE;
}

static int hash_file(struct sender *s, int fd, uint64_t len)
{
	uint64_t off = 0;

	XXH3_128bits_reset(s->st);
	while (off < len) {
		size_t n = len - off < HASH_BUF ? (size_t)(len - off) : HASH_BUF;
		int r;

		unlock_main(s);
		r = read_full(fd, s->hashbuf, n, off);
		if (!r)
			XXH3_128bits_update(s->st, s->hashbuf, n);
		lock_main(s);
		if (r)
			return r;
		off += n;
		if (snd_pump(s, 0))
			return -EPIPE;
	}
	return 0;
}

/* A file that fits in the current slot's data block: no round trip. */
static int send_small(struct sender *s, struct cp_item *it, uint32_t id, int fd)
{
	size_t nl = strlen(it->dst);
	struct cp_rec r = {.file_id = id};
	uint8_t h[16];
	int e;

	if (need(s, 3, nl, it->size))
		return -1;
	/* The slot being filled is ours alone: read and hash without the lock. */
	unlock_main(s);
	e = read_full(fd, snd_slot_data(s, s->cur) + s->dlen, (size_t)it->size, 0);
	if (!e)
		cp_hash128(snd_slot_data(s, s->cur) + s->dlen, (size_t)it->size, h);
	lock_main(s);
	if (e) {
		local_fail(it, "read", e);
		return 0;
	}
	r.type = CP_REC_BEGIN;
	r.flags = it->into ? CP_BEGIN_INTO : 0;
	r.a = it->size;
	r.b = it->mode;
	r.name = it->dst;
	r.name_len = (uint16_t)nl;
	add(s, &r);
	memset(&r, 0, sizeof(r));
	r.file_id = id;
	if (it->size) {
		r.type = CP_REC_DATA;
		r.data_off = s->dlen;
		r.data_len = (uint32_t)it->size;
		memcpy(r.hash, h, 16);
		add(s, &r);
	}
	r.type = CP_REC_END;
	r.data_off = r.data_len = 0;
	memcpy(r.hash, h, 16);
	add(s, &r);
	s->dlen += (uint32_t)it->size;
	it->state = CP_ITEM_SENT;
	cp_progress_add(s->o->progress, it->size, it->dst);
	return 0;
}

/* Add a record of @type for @id to a (possibly new) slot and post it. */
static int send_record(struct sender *s, uint8_t type, uint32_t id, const uint8_t *hash)
{
	struct cp_rec r = {.type = type, .file_id = id};

	if (hash)
		memcpy(r.hash, hash, 16);
	if (need(s, 1, 0, 0))
		return -1;
	add(s, &r);
	return flush(s);
}

/*
 * --resume: what we hold, for the server to check its side against (see
 * CP_BEGIN_PROOF): the hashes of our prefixes at every proof step into
 * @proof and of the whole file into @whole. One read of the file.
 */
static int prove(struct sender *s, int fd, uint64_t size, uint8_t *proof, uint8_t whole[16])
{
	uint64_t step = cp_proof_step(size, s->w.chunk), off = 0;
	unsigned k = 0, n = cp_proof_count(size, s->w.chunk);

	XXH3_128bits_reset(s->st);
	while (off < size) {
		uint64_t stop = k < n ? (k + 1) * step : size;
		size_t len = stop - off < HASH_BUF ? (size_t)(stop - off) : HASH_BUF;
		int r;

		unlock_main(s);
		r = read_full(fd, s->hashbuf, len, off);
		if (!r)
			XXH3_128bits_update(s->st, s->hashbuf, len);
		lock_main(s);
		if (r)
			return r;
		off += len;
		if (off == stop && k < n)
			cp_hash_digest(s->st, proof + 16 * k++);
		if (snd_pump(s, 0))
			return -EPIPE;
	}
	cp_hash_digest(s->st, whole);
	return 0;
}

static int send_large(struct sender *s, struct cp_item *it, uint32_t id, int fd)
{
	int resume = (s->o->flags & CP_F_RESUME) != 0;
	unsigned nproof = resume ? cp_proof_count(it->size, s->w.chunk) : 0;
	uint8_t proof[16 * CP_PROOF_MAX];
	size_t nl = strlen(it->dst);
	struct cp_rec r = {.type = CP_REC_BEGIN,
			   .flags = (uint8_t)(CP_BEGIN_WAIT | (resume ? CP_BEGIN_PROOF : 0) |
					      (it->into ? CP_BEGIN_INTO : 0)),
			   .file_id = id,
			   .a = it->size,
			   .b = it->mode,
			   .name = it->dst,
			   .name_len = (uint16_t)nl};
	uint64_t off;
	int e;

	if (resume) {
		e = prove(s, fd, it->size, proof, r.hash);
		if (e == -EPIPE)
			return -1;
		if (e) {
			local_fail(it, "read", e);
			return 0;
		}
	}
	if (need(s, 1, nl, 16 * nproof))
		return -1;
	if (resume) {
		r.data_off = s->dlen;
		r.data_len = 16 * nproof;
		memcpy(snd_slot_data(s, s->cur) + s->dlen, proof, r.data_len);
		s->dlen += r.data_len;
	}
	add(s, &r);
	it->waiting_ready = 1;
	it->state = CP_ITEM_SENT;
	if (flush(s))
		return -1;
	while (!it->ready && it->state != CP_ITEM_DONE)
		if (snd_pump(s, WAIT_MS))
			return -1;
	if (it->state == CP_ITEM_DONE)
		return 0; /* refused, or (--resume) already up to date */
	/* Only a prefix we proved: anything else is a server that breaks the protocol. */
	off = it->ready_res.offset;
	if (resume ? !cp_proof_offset_ok(it->size, s->w.chunk, off) : off != 0) {
		snd_fatal(s, RK_EXIT_LOST,
			  "protocol error: READY for %s at an offset never offered", it->dst);
		return -1;
	}
	e = hash_file(s, fd, off);
	if (e == -EPIPE)
		return -1;
	if (e) {
		local_fail(it, "read", e);
		return send_record(s, CP_REC_ABORT, id, NULL);
	}
	cp_progress_add(s->o->progress, off, it->dst);
	/* One chunk per slot; the last one also carries END (a file of 0 bytes: END alone). */
	do {
		uint32_t n = it->size - off < s->w.chunk ? (uint32_t)(it->size - off) : s->w.chunk;

		if (need(s, 3, 0, s->w.chunk))
			return -1;
		if (it->state == CP_ITEM_DONE)
			return 0; /* failed on the server: stop (the slot takes the next records) */
		memset(&r, 0, sizeof(r));
		r.file_id = id;
		unlock_main(s);
		e = read_full(fd, snd_slot_data(s, s->cur), n, off);
		if (!e && n) { /* one pass: the record carries the file's digest so far */
			XXH3_128bits_update(s->st, snd_slot_data(s, s->cur), n);
			cp_hash_digest(s->st, r.hash);
		}
		lock_main(s);
		if (e) {
			local_fail(it, "read", e);
			it->state = CP_ITEM_SENT; /* the server still owes its DONE for the abort */
			r.type = CP_REC_ABORT;
			memset(r.hash, 0, sizeof(r.hash));
			add(s, &r);
			return flush(s);
		}
		if (n) {
			r.type = CP_REC_DATA;
			r.a = off;
			r.data_len = n;
			add(s, &r);
			s->dlen = n;
			off += n;
		}
		if (off == it->size) {
			memset(&r, 0, sizeof(r));
			r.type = CP_REC_END;
			r.file_id = id;
			cp_hash_digest(s->st, r.hash);
			add(s, &r);
		}
		if (flush(s))
			return -1;
		cp_progress_add(s->o->progress, n, it->dst);
	} while (off < it->size);
	return 0;
}

static int send_item(struct sender *s, size_t idx)
{
	struct cp_item *it = &s->plan->items[idx];
	uint32_t id = (uint32_t)idx + 1;
	struct stat st;
	int fd, r;

	s->moved += CP_ENTRY_BYTES; /* an entry counts for the minimum rate, as in rk serve */
	if (it->is_dir) {
		struct cp_rec rec = {.type = CP_REC_DIR,
				     .file_id = id,
				     .b = it->mode,
				     .name = it->dst,
				     .name_len = (uint16_t)strlen(it->dst)};

		if (need(s, 1, rec.name_len, 0))
			return -1;
		add(s, &rec);
		it->state = CP_ITEM_SENT;
		return 0;
	}
	fd = cp_plan_open(s->plan, it);
	if (fd < 0) {
		local_fail(it, "open", fd);
		return 0;
	}
	if (fstat(fd, &st)) { /* st is unset: its mode says nothing */
		local_fail(it, "fstat", -errno);
		close(fd);
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		local_fail(it, "open", -EINVAL);
		close(fd);
		return 0;
	}
	/* A server's file: a hard link planted since the plan is not read (copy_plan.h). */
	if (s->plan->confined && st.st_nlink > 1) {
		snprintf(it->local_err, sizeof(it->local_err),
			 "open: a file with %ju hard links (not served)", (uintmax_t)st.st_nlink);
		it->state = CP_ITEM_DONE;
		cp_progress_file(s->o->progress);
		close(fd);
		return 0;
	}
	if (it->size != (uint64_t)st.st_size) {
		s->o->progress->total += (uint64_t)st.st_size - it->size;
		it->size = (uint64_t)st.st_size;
	}
	if (it->size > s->w.max_file_size) {
		snprintf(it->local_err, sizeof(it->local_err),
			 "larger than the server accepts (%llu bytes)",
			 (unsigned long long)s->w.max_file_size);
		it->state = CP_ITEM_DONE;
		cp_progress_file(s->o->progress);
		close(fd);
		return 0;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (!(s->o->flags & CP_F_RESUME) && it->size <= s->w.chunk)
		r = send_small(s, it, id, fd);
	else
		r = send_large(s, it, id, fd);
	close(fd);
	return r;
}

int snd_run(struct sender *s)
{
	struct cp_rec bye = {.type = CP_REC_BYE};

	/* After a reconnect, what the server already settled stays settled. */
	for (size_t i = 0; i < s->plan->n; i++)
		if (s->plan->items[i].state != CP_ITEM_DONE && send_item(s, i))
			return -1;
	if (need(s, 1, 0, 0))
		return -1;
	add(s, &bye);
	if (flush(s))
		return -1;
	while (!snd_all_done(s))
		if (snd_pump(s, WAIT_MS))
			return -1;
	return 0;
}
