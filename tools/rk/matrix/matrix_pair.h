/*
 * matrix_pair.h - one measurement of a pair: an rk bench session run in
 * this process, with rk bench's engines (bench_session), as server or
 * client of the pair's other rank.
 *
 * A pair runs its three legs in order (enum mx_leg); for each, one side
 * serves on port_base + 3 x its rank + leg, so a leg that fails on one
 * side (the other never connects, times out) cannot be mistaken for the
 * next. A server waits at most the connection budget for its client.
 *
 * Each leg has its keys from rank 0 (MX_KEY_LEN bytes, fresh every pair
 * and round, sent to the two ranks only): the client's PARAMS and its
 * rdma_cm hellos carry the first half, which the server checks in
 * constant time (a connection without it is turned away and the server
 * waits on for its real peer); the server's ACCEPT and its rdma_cm accept
 * carry the second half, which the client checks before it measures. So
 * neither side measures against whoever else answers at an address or
 * port, whatever address rank 0 relayed.
 */
#ifndef RK_MATRIX_PAIR_H
#define RK_MATRIX_PAIR_H

#include "matrix.h"

struct mx_leg_out {
	int status;    /* 0 or a negative errno */
	double v[2];   /* bw: Gb/s; lat: median, p99 in us */
	char why[200]; /* status != 0 */
	char dev[32];  /* the device this side used, when it opened one */
};

/*
 * mx_run_leg - leg @leg of the pair of this rank (@me, at @my_addr) and
 * @peer (at @peer_addr), with the leg's @key. Whether this side is the client follows from the
 * leg and the ranks (the lower rank leads MX_BW_AB and MX_LAT). Blocks
 * for the leg's duration plus connection set-up; fills @out, never fails
 * otherwise. Not thread-safe against another leg in the same process.
 */
void mx_run_leg(const struct mx_opts *o, int leg, uint32_t me, const char *my_addr, uint32_t peer,
		const char *peer_addr, const uint8_t *key, struct mx_leg_out *out);

#endif
