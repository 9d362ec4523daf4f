/*
 * copy_proto.h - the wire protocol between rk copy (sender) and rk serve
 * (receiver). Pure encoding and decoding: no verbs, no files, so every byte
 * a peer can send is checked here and unit-tested on its own.
 *
 * Two channels share one RC connection:
 *
 *  1. Control messages (SEND without immediate): a 12-byte header {magic
 *     "RKCP", u8 version, u8 type, u16 zero, u32 payload length} then the
 *     payload. The client sends one, HELLO (chunk size, depth, flags,
 *     lanes, the key of the session it replaces after a reconnect);
 *     everything else flows server -> client: WELCOME (the ring and a
 *     session key), RESULTS (per-file results of one slot's records),
 *     ERROR (fatal, with text).
 *
 *  2. The ring: librdmakit's credit ring (rdmakit/ring.h) with NSLOTS
 *     slots of cp_slot_stride(chunk) bytes at the receiver. Message number
 *     seq goes into slot seq mod NSLOTS over lane slot mod LANES, one
 *     RDMA WRITE WITH IMMEDIATE (the ring's immediate: slot and sequence);
 *     the ring gives credits back (0-byte SENDs with immediate) as the
 *     receiver copies messages out, and puts what comes over several
 *     lanes back in order. A message is a header block of records (its
 *     length inside it, at most CP_HDR_SIZE) followed directly by the data
 *     (at most chunk bytes). Records say what the data is (file, offset,
 *     running hash) and also carry directory entries, file begin/end and
 *     bye, so a tree of small files travels many files per slot with no
 *     round trip per file. Every slot the receiver handles is answered by
 *     exactly one RESULTS, on lane 0 in sequence, so control traffic needs
 *     no flow control of its own: the receiver takes the next slot only
 *     with a send buffer free for its RESULTS.
 *
 * Lanes (--num-qp N): the first connection is lane 0 and carries HELLO and
 * WELCOME; lanes 1..N-1 are more RC connections whose rdma_cm hello names
 * the lane and carries the 16-byte session key from WELCOME instead of the
 * access token. The ring orders the slots of all lanes: file data, the
 * streaming whole-file hash and records are handled in the order the
 * sender wrote them; each header block repeats its sequence number.
 *
 * All integers are big-endian. Hashes are XXH3-128 (high half first).
 */
#ifndef RK_COPY_PROTO_H
#define RK_COPY_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>
/*
 * On x86, XXH3_128bits() and XXH3_128bits_update() become libxxhash's
 * runtime-dispatched variants (AVX2 or AVX-512 where the CPU has them,
 * SSE2 otherwise) instead of the SSE2 build baseline. Same hash values;
 * about 3x faster in the TCG sandbox, where hashing shares the emulated
 * CPUs with rxe, and faster on real hosts with AVX2.
 */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif
#endif

#define CP_MAGIC      0x524b4350u /* "RKCP": control messages */
#define CP_SLOT_MAGIC 0x524b534cu /* "RKSL": a slot's header block */
#define CP_VERSION                                                                                 \
	8 /* 3: resume by proof; 4: CP_BEGIN_INTO; 5: CP_F_REPLACES; 6: totals; 7: the library's   \
	     ring; 8: lanes refused by reject code (a lane retries on RK_REJECT_NO_SESSION) */
#define CP_APP_ID 0x524b4350u /* rdma_cm hello app_id of rk copy */

#define CP_MSG_HDR     12
#define CP_MSG_MAX     4096  /* largest control message */
#define CP_HDR_SIZE    4096  /* a slot's header block */
#define CP_SLOT_HDR    16    /* magic, nrec, zero, seq, the block's length */
#define CP_REC_FIXED   48    /* a record without its name */
#define CP_MAX_RECORDS 64    /* per slot, so one RESULTS holds every result */
#define CP_NAME_MAX    1024  /* bytes of a relative destination path */
#define CP_COMP_MAX    240   /* bytes of one path component (room for ".X.rkpart") */
#define CP_CHUNK_MIN   4096u /* smallest chunk */
#define CP_CHUNK_MAX                                                                               \
	((8u << 20) - CP_HDR_SIZE) /* rxe: one work request (records + data) <= 8 MiB */
#define CP_MAX_SLOTS	64	   /* ring slots per connection */
#define CP_RESULT_SIZE	24
#define CP_PROOF_MAX	64 /* prefix hashes a resuming BEGIN carries, at most */
#define CP_MAX_LANES	8  /* connections (QPs) per session */
#define CP_KEY_LEN	16 /* session key that lanes 1.. present */
#define CP_DEFAULT_PORT "7900"

/* Control message types. */
enum cp_msg_type {
	CP_MSG_HELLO = 1,   /* C->S: chunk, depth, flags */
	CP_MSG_WELCOME = 2, /* S->C: ring and limits */
	CP_MSG_RESULTS = 3, /* S->C: the results of one slot's records */
	CP_MSG_ERROR = 4,   /* S->C: fatal, code and text */
	CP_MSG_PULL = 5,    /* C->S: what to fetch (a server with --read) */
};

/* Session flags (HELLO). */
#define CP_F_FORCE  (1u << 0) /* overwrite existing files */
#define CP_F_RESUME (1u << 1) /* continue from verified temporary files */
/*
 * This session takes over from the client's previous one, named by the
 * key its WELCOME gave (cp_hello.replaces): after a lost connection the
 * server may not have noticed yet (the client's QP failed, the DREQ was
 * lost too), and until it does, that session holds the locks of the files
 * it was writing. The key is a secret only the client and the server hold,
 * so it proves the old session was this client's.
 */
#define CP_F_REPLACES (1u << 2)
#define CP_F_ALL      (CP_F_FORCE | CP_F_RESUME | CP_F_REPLACES)

struct cp_hello {
	uint32_t chunk;
	uint16_t depth;
	uint16_t flags;
	uint16_t lanes;		      /* 1..CP_MAX_LANES connections in this session */
	uint8_t replaces[CP_KEY_LEN]; /* with CP_F_REPLACES; else all zero */
	/*
	 * What the sender plans to send, for the receiver's progress bar
	 * only: nothing is sized or allowed by it (the limits are per file,
	 * as each BEGIN comes).
	 */
	uint64_t total_bytes;
	uint32_t total_files;
};

/*
 * PULL: the first message of a client that fetches (rk copy HOST:SRC
 * DEST). The sources are paths under the served directory; the server
 * expands them by the rules of a push (cp_plan_build) with @dest as the
 * destination prefix, and sends what it planned as a pushing client
 * would. Sources and dest point into the decoded buffer, are not
 * NUL-terminated, hold no NUL, and are 1..CP_NAME_MAX bytes (dest 0..).
 */
#define CP_PULL_MAX_SRC	  64
#define CP_PULL_RECURSIVE (1u << 0)

struct cp_pull {
	uint32_t chunk;
	uint16_t depth;
	uint16_t flags;	 /* CP_F_FORCE, CP_F_RESUME */
	uint8_t options; /* CP_PULL_RECURSIVE */
	uint8_t lanes;	 /* 1..CP_MAX_LANES connections the client will make (--num-qp) */
	uint16_t nsrc;	 /* 1..CP_PULL_MAX_SRC */
	uint16_t dest_len;
	const char *dest;
	uint16_t src_len[CP_PULL_MAX_SRC];
	const char *src[CP_PULL_MAX_SRC];
};

/* cp_slot_stride - a ring slot's bytes: room for a header block, then @chunk data, in 4 KiB. */
static inline size_t cp_slot_stride(uint32_t chunk)
{
	return CP_HDR_SIZE + ((size_t)chunk + 4095) / 4096 * 4096;
}

struct cp_welcome {
	uint64_t ring_addr; /* slot i at ring_addr + i * cp_slot_stride(chunk) */
	uint32_t rkey;
	uint32_t chunk;	 /* data bytes per slot (the client's chunk) */
	uint16_t nslots; /* ring slots: a multiple of the lanes */
	uint16_t max_name;
	uint32_t max_files;	 /* per connection */
	uint64_t max_file_size;	 /* bytes */
	uint8_t key[CP_KEY_LEN]; /* lanes 1.. join with it */
};

/* Result kinds and codes carried by RESULTS. */
enum cp_result_kind {
	CP_RES_READY = 1, /* file may start at offset (a prefix the client proved) */
	CP_RES_DONE = 2,  /* terminal: code says how */
};

enum cp_code {
	CP_OK = 0,
	CP_E_EXISTS = 1,       /* destination exists and no --force */
	CP_E_PATH = 2,	       /* name refused (absolute, .., escapes DIR) */
	CP_E_LIMIT = 3,	       /* size, count or name length over the server's limits */
	CP_E_IO = 4,	       /* server-side I/O error (errno) */
	CP_E_HASH = 5,	       /* a chunk or the whole file failed verification (offset) */
	CP_E_NOSPACE = 6,      /* not enough room in DIR */
	CP_E_BUSY = 7,	       /* another transfer of the same file is in progress */
	CP_E_PROTO = 8,	       /* malformed records */
	CP_E_ABORTED = 9,      /* the client gave up on this file */
	CP_E_UPTODATE = 10,    /* (success) resume found the final file identical */
	CP_E_OPEN_LIMIT = 11,  /* files open at once in the session (--max-open) */
	CP_E_BYTES_LIMIT = 12, /* bytes announced in the session (--max-bytes) */
	CP_E_ENTRY_LIMIT = 13, /* files and directories in the session (--max-files) */
};
#define CP_E_LAST CP_E_ENTRY_LIMIT

struct cp_result {
	uint32_t file_id;
	uint8_t kind;
	uint8_t flags;
	uint16_t code;
	uint32_t sys_errno; /* for CP_E_IO */
	uint64_t offset;    /* READY: start; DONE with CP_E_HASH: where */
};

struct cp_results {
	uint16_t seq; /* the slot's sequence number, low 16 bits */
	uint16_t nres;
	struct cp_result res[CP_MAX_RECORDS];
};

/* Record types inside a slot's header block. */
enum cp_rec_type {
	CP_REC_DIR = 1,	  /* name: create this directory (and parents) */
	CP_REC_BEGIN = 2, /* file_id, a = size, b = mode, name; flags CP_BEGIN_* */
	/*
	 * file_id, a = offset, data_off/len, and the hash of the file from its
	 * start to the end of these bytes (the streaming XXH3-128 digest):
	 * each byte is hashed once on each side, and each chunk's check covers
	 * everything before it (a resumed prefix too).
	 */
	CP_REC_DATA = 3,
	CP_REC_END = 4,	    /* file_id, hash of the whole file */
	CP_REC_RESTART = 5, /* unused since version 3 (resume by proof): refused */
	CP_REC_ABORT = 6,   /* file_id: the client gives up on this file */
	CP_REC_BYE = 7,	    /* no more slots follow */
};

#define CP_BEGIN_WAIT  (1u << 0) /* answer with READY before data comes */
#define CP_BEGIN_PROOF (1u << 1) /* resume: what the client holds (with WAIT) */
/*
 * The name is DEST/LEAF (one file copied to a DEST without a trailing '/'):
 * the file is DEST/LEAF when DEST is a directory there, else DEST itself,
 * as cp and rsync decide; only the server can tell, at the moment it looks.
 */
#define CP_BEGIN_INTO (1u << 2)
#define CP_BEGIN_ALL  (CP_BEGIN_WAIT | CP_BEGIN_PROOF | CP_BEGIN_INTO)

/*
 * Resume by proof (--resume). The server never tells a client the size or
 * hash of anything on its side; the client states what it holds and the
 * server only confirms or denies. A BEGIN with CP_BEGIN_PROOF carries in
 * its hash the XXH3-128 of the client's whole file (a bytes), and in its
 * data (data_off, data_len = 16 * cp_proof_count()) the XXH3-128 of the
 * prefixes [0, k * cp_proof_step()) for k = 1 .. cp_proof_count(), each
 * shorter than the file. The server answers with one of:
 *  - DONE CP_E_UPTODATE: the final file exists with that size and hash;
 *  - DONE CP_E_EXISTS: the final file exists and is something else;
 *  - READY at offset 0, k * step or the size: the longest of those prefixes
 *    that its temporary holds with the stated hash (0 when none).
 * So all a client learns is whether a content it already has is there.
 */
uint64_t cp_proof_step(uint64_t size, uint32_t chunk);	/* a chunk multiple */
unsigned cp_proof_count(uint64_t size, uint32_t chunk); /* 0..CP_PROOF_MAX-1 */
/* cp_proof_offset_ok - whether @off is one of the offsets READY may name. */
int cp_proof_offset_ok(uint64_t size, uint32_t chunk, uint64_t off);

struct cp_rec {
	uint8_t type;
	uint8_t flags;
	uint16_t name_len;
	uint32_t file_id;
	uint64_t a, b;
	uint32_t data_off, data_len;
	uint8_t hash[16];
	const char *name; /* points into the parsed block; not NUL-terminated */
};

/*
 * The rdma_cm hello's app_arg: CP_VERSION for lane 0 (a new session),
 * CP_VERSION | CP_LANE_JOIN | lane << 16 for lanes 1.. (token = key).
 * cp_lane_parse returns 0 (new session, *lane = 0), 1 (join of *lane,
 * 1..CP_MAX_LANES-1), 2 (a pull, *lane = 0), -EPROTO (another version)
 * or -EBADMSG.
 */
#define CP_LANE_JOIN (1u << 31)
uint32_t cp_lane_arg(unsigned lane);
int cp_lane_parse(uint32_t app_arg, unsigned *lane);

/*
 * A client that pulls (a server with --read sends, the client receives):
 * CP_VERSION | CP_LANE_PULL, with the access token; cp_lane_parse returns
 * 2 for it. One connection: a pull has no further lanes.
 */
#define CP_LANE_PULL (1u << 30)
uint32_t cp_pull_arg(void);

/*
 * Control messages. Encoders return the byte count or -ENOSPC. cp_msg_peek
 * validates the header of a received message of @len bytes: magic,
 * version, a known type and a payload length that matches @len exactly;
 * it returns the type or -EBADMSG / -EPROTO (version) / -EMSGSIZE.
 * The decoders check the payload of their type (-EBADMSG when wrong).
 */
int cp_msg_peek(const void *buf, size_t len);
int cp_hello_encode(const struct cp_hello *h, void *buf, size_t len);
int cp_hello_decode(const void *buf, size_t len, struct cp_hello *h);
int cp_welcome_encode(const struct cp_welcome *w, void *buf, size_t len);
int cp_welcome_decode(const void *buf, size_t len, struct cp_welcome *w);
int cp_results_encode(const struct cp_results *c, void *buf, size_t len);
int cp_results_decode(const void *buf, size_t len, struct cp_results *c);
/* PULL: -ENOSPC when the sources do not fit one CP_MSG_MAX message. */
int cp_pull_encode(const struct cp_pull *p, void *buf, size_t len);
int cp_pull_decode(const void *buf, size_t len, struct cp_pull *p);
int cp_error_encode(uint16_t code, const char *text, void *buf, size_t len);
int cp_error_decode(const void *buf, size_t len, uint16_t *code, char *text, size_t text_len);

/*
 * Slot header blocks. The writer appends records to a CP_HDR_SIZE buffer;
 * cp_slot_add returns 0 or -ENOSPC (block or record count full).
 */
struct cp_slot_writer {
	uint8_t *buf;
	size_t cap, len;
	unsigned nrec;
};

void cp_slot_init(struct cp_slot_writer *w, void *buf, size_t cap);
/* cp_slot_finish - stamp the block with its sequence number and its length (at posting). */
void cp_slot_finish(struct cp_slot_writer *w, uint32_t seq);
int cp_slot_add(struct cp_slot_writer *w, const struct cp_rec *r);
/* cp_slot_room - whether a record with @name_len more bytes of name fits. */
int cp_slot_room(const struct cp_slot_writer *w, size_t name_len);

/*
 * cp_slot_split - a message of @len bytes from the ring: the length of its
 * header block in *@hlen (the data follows it), or -EBADMSG when it is not
 * a header block or the length it states does not fit (CP_SLOT_HDR ..
 * min(@len, CP_HDR_SIZE)).
 */
int cp_slot_split(const void *buf, size_t len, uint32_t *hlen);

/*
 * The reader validates the block header (magic, record count, the length
 * it states is @len) and then,
 * record by record, the type, the name length (<= CP_NAME_MAX, inside the
 * block), data_off + data_len <= @data_len (the bytes the peer actually
 * placed; data only on DATA and on BEGIN with CP_BEGIN_PROOF, a multiple
 * of 16 bytes there) and zero padding. Returns 1 with *@r filled, 0 at the end, or
 * -EBADMSG.
 */
struct cp_slot_reader {
	const uint8_t *buf;
	size_t len, pos;
	uint32_t data_len;
	uint32_t seq; /* the block's sequence number */
	unsigned nrec, seen;
};

int cp_slot_reader_init(struct cp_slot_reader *rd, const void *buf, size_t len, uint32_t data_len);
int cp_slot_next(struct cp_slot_reader *rd, struct cp_rec *r);

/* cp_code_str - "destination exists (use --force)" etc. */
const char *cp_code_str(unsigned code);

/* cp_hash128 - XXH3-128 of a buffer as 16 big-endian bytes. */
void cp_hash128(const void *data, size_t len, uint8_t out[16]);

/* cp_hash_digest - the same for a streaming state. */
void cp_hash_digest(const XXH3_state_t *st, uint8_t out[16]);

#endif
