/*
 * doctor_gate.h - what rk doctor --listen asks of a connection before it
 * tells it anything or holds anything for it: a first frame that is an rk
 * doctor hello of this protocol, at most DOC_HELLO_MAX bytes, arriving
 * within DOC_HELLO_MS of the accept, and the listener's token when it has
 * one (its digest compared in constant time). Until then the peer gets no
 * facts, no welcome and no session.
 *
 * Pure (no I/O, no clock): doctor_listen.c feeds in the bytes it reads and
 * keeps the time; the unit test and the fuzz target feed in anything.
 */
#ifndef RK_DOCTOR_GATE_H
#define RK_DOCTOR_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "doctor_wire.h"

#define DOC_HELLO_MS	2000 /* from the accept to the whole hello */
#define DOC_PENDING_MAX 16   /* connections waiting for their hello; the oldest goes */

/*
 * doc_hello_need - the length of the hello frame whose first @got bytes are
 * at @buf, as far as they tell: DOC_WIRE_HDR while the header is not in,
 * then the whole frame. More bytes are needed while the result is > @got;
 * the frame is complete when it equals @got (never read past it). Returns
 * -EBADMSG when the bytes are not "RKDR" (known from the first wrong byte)
 * and -EMSGSIZE for a frame longer than a hello may be; @why (may be NULL)
 * says what came, printable.
 */
int doc_hello_need(const uint8_t *buf, size_t got, char *why, size_t why_len);

/*
 * doc_hello_judge - the complete hello frame of @len bytes at @frame,
 * against @token (the listener's digest; NULL when it has none). Returns 0
 * when the peer is admitted (*@checked: 1 if its token was checked), or
 * -EBADMSG / -EMSGSIZE (not an rk doctor hello), -EPROTO (another protocol
 * version), -EACCES (the token is missing or wrong). @why says why in
 * printable text fit to be sent to the peer (it holds nothing of ours).
 */
int doc_hello_judge(const uint8_t *frame, size_t len, const uint8_t *token, int *checked, char *why,
		    size_t why_len);

/* doc_hello_from_rk - 1 if the @got bytes at @buf begin as rk doctor's frames do. */
int doc_hello_from_rk(const uint8_t *buf, size_t got);

#endif
