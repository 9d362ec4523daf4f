/*
 * doctor_link_int.h - what the link test's three files share: the link
 * (one connection, its buffers and the peer-writable and peer-readable
 * regions), one step's result, and the verified transfer primitives.
 * doctor_link.c opens and closes the link and holds the primitives,
 * doctor_link_client.c drives the steps, doctor_link_serve.c answers them.
 */
#ifndef RK_DOCTOR_LINK_INT_H
#define RK_DOCTOR_LINK_INT_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/conn.h>
#include <rdmakit/post.h>

#include "doctor_peer.h"

enum { SLOT_SEND, SLOT_RECV, SLOT_READ, SLOT_RTT, NSLOTS };

#define RTT_LEN		 64
#define RECVS		 (2 + DOC_RTT_ROUNDS)
#define QUEUE		 64
#define WR_RECV		 1
#define CONNECT_SLACK_MS 2000 /* the listener waits this much longer for the request */

struct doc_link {
	struct rk_device *dev;
	struct rk_pd *pd;
	struct rk_mr *local;  /* NSLOTS x DOC_XFER_LEN, local access only */
	struct rk_mr *inbox;  /* the peer writes here */
	struct rk_mr *outbox; /* the peer reads here */
	struct rk_listener *lis;
	struct rk_conn *conn;
	uint64_t seed;
	int recv_pending; /* receive completions seen while waiting for something else */
	uint64_t next_id;
};

/* What one side saw of one step. */
struct step_res {
	int ok;
	int wc_status; /* failed completion, -1 none */
	int timed_out;
	int64_t value;
	char text[256];
};

/* Slot @i of the local buffer (NSLOTS x DOC_XFER_LEN). */
uint8_t *doc_link_slot(const struct doc_link *l, int i);
/* The pattern of @step: splitmix64 from the seed, the same at both ends. */
void doc_link_pattern(uint64_t seed, int step, uint8_t *buf, size_t len);
/* Compare @len bytes of @got (copied first: it may be registered memory) with @step's. */
void doc_link_verify(uint64_t seed, int step, const volatile uint8_t *got, size_t len,
		     struct step_res *res);
/* Wait for send WR @want's completion, or (@want 0) a receive's, within @ms. */
int doc_link_wait_wc(struct doc_link *l, uint64_t want, int ms, struct step_res *res);
/* Post @op on slot @s; its WR id into *@id. */
int doc_link_post(struct doc_link *l, enum rk_op op, int s, uint32_t len, uint64_t raddr,
		  uint32_t rkey, uint64_t *id, struct step_res *res);
/* Post @op, wait for its completion. */
int doc_link_post_wait(struct doc_link *l, enum rk_op op, int s, uint32_t len, uint64_t raddr,
		       uint32_t rkey, int ms, struct step_res *res);
/* The connection's options: event mode, the MTU both ends can take. */
struct rk_conn_opts doc_link_conn_opts(struct doc_link *l, int mtu_a, int mtu_b);

#endif
