/*
 * matrix_wire.h - the rendezvous channel of rk matrix: one TCP connection
 * between each rank and rank 0, carrying JSON documents (json-c).
 *
 * Frame: rk's control frame (common/frame.h): "RKMX", u32 big-endian
 * length (<= MX_WIRE_MAX), u8 type (MX_FRAME_JSON), that many bytes of
 * JSON text, one object; sent and read by the shared channel
 * (common/chan.h). Protocol 2 and older had no type byte: such a peer's
 * frame is refused as a version mismatch (-EPROTO) from its header.
 * What arrives is network input: the length is
 * bounded before anything is allocated, the text must parse as one JSON
 * object, and the reader checks every field it uses (mx_get_*). Every
 * wait has a deadline.
 */
#ifndef RK_MATRIX_WIRE_H
#define RK_MATRIX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>
#include <rdmakit/error.h>

#include "common/chan.h"

#define MX_WIRE_MAX   (64u << 10)
#define MX_FRAME_JSON 1 /* the one frame type: a JSON object */

extern const struct cli_frame_fmt mx_frame_fmt;

/* mx_wire_send - @o as one frame within @timeout_ms. 0 or a negative errno. @o stays the caller's.
 */
int mx_wire_send(int fd, json_object *o, int timeout_ms, struct rk_error *err);

/*
 * mx_wire_recv - the next frame within @timeout_ms into *@o (the caller
 * puts it with json_object_put). Returns 0, -ETIMEDOUT, -ECONNRESET (the
 * peer closed), -EBADMSG (not a frame of a JSON object), -EPROTO (an older
 * rk matrix's frame), -EMSGSIZE.
 */
int mx_wire_recv(int fd, json_object **o, int timeout_ms, struct rk_error *err);

/*
 * mx_wire_parse - @len bytes of frame text into *@o: one JSON object
 * (strict JSON, nothing after it), or -EBADMSG / -ENOMEM.
 */
int mx_wire_parse(const char *text, size_t len, json_object **o, struct rk_error *err);

/*
 * A frame read a piece at a time, as the bytes come (rank 0 reads the
 * hellos of many connections at once, none of which may hold it up).
 * Zero it to start; mx_wire_rd_free after.
 */
struct mx_wire_rd {
	struct cli_frame_fmt fmt; /* mx_frame_fmt with the caller's bound */
	struct cli_chan ch;
};

/*
 * mx_wire_rd_feed - read what @fd has now (never waits). Returns 1 with
 * the whole frame's object in *@o, 0 when more is to come, or a negative
 * errno: -ECONNRESET (closed), -EBADMSG, -EPROTO (an older rk matrix's
 * frame), -EMSGSIZE (a frame over @max bytes, refused from its header
 * before anything is allocated).
 */
int mx_wire_rd_feed(struct mx_wire_rd *rd, int fd, uint32_t max, json_object **o,
		    struct rk_error *err);
void mx_wire_rd_free(struct mx_wire_rd *rd);

/* mx_get_u32 - member @k of @o, an integer in [0, @max]. 0 or -1. */
int mx_get_u32(json_object *o, const char *k, uint32_t max, uint32_t *out);
/* mx_get_num - member @k, a finite number >= 0. 0 or -1. */
int mx_get_num(json_object *o, const char *k, double *out);
/* mx_get_str - member @k, a string; copied cleaned (printable ASCII) into @out. 0 or -1. */
int mx_get_str(json_object *o, const char *k, char *out, size_t len);
/* mx_type - member "t" of @o, or "" */
const char *mx_type(json_object *o);

#endif
