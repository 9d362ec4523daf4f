/*
 * qp_connect.c - manual connection: INIT -> RTR -> RTS from the peer's
 * out-of-band info.
 *
 * Each transition is checked, and a failure names the step and every
 * attribute it set, because "Invalid argument" from ibv_modify_qp alone
 * gives no clue which of a dozen fields the device disliked.
 */
#include <errno.h>
#include <string.h>

#include "rk_internal.h"

void rk_conn_local_info(const struct rk_conn *c, struct rk_oob_info *info)
{
	memset(info, 0, sizeof(*info));
	info->lid = c->dev->info.lid;
	memcpy(info->gid, c->dev->info.gid.raw, 16);
	info->qpn = c->qp->qp_num;
	info->psn = c->psn;
	info->mtu = (uint8_t)c->local_mtu;
}

static int check_remote(const struct rk_conn *c, const struct rk_oob_info *r, struct rk_error *err)
{
	static const uint8_t zero[16];

	if (r->qpn == 0 || r->qpn > 0xffffff || r->psn > 0xffffff)
		return rk__err_set(err, EINVAL, "rk_conn_connect",
				   "peer qpn 0x%x / psn 0x%x invalid", r->qpn, r->psn);
	if (r->mtu < IBV_MTU_256 || r->mtu > IBV_MTU_4096)
		return rk__err_set(err, EINVAL, "rk_conn_connect", "peer mtu %u invalid", r->mtu);
	if (c->dev->info.link_layer == IBV_LINK_LAYER_ETHERNET && !memcmp(r->gid, zero, 16))
		return rk__err_set(err, EINVAL, "rk_conn_connect",
				   "peer sent no GID (RoCE needs one)");
	if (c->dev->info.link_layer != IBV_LINK_LAYER_ETHERNET && r->lid == 0)
		return rk__err_set(err, EINVAL, "rk_conn_connect", "peer sent LID 0 (InfiniBand)");
	return 0;
}

static int to_rtr(struct rk_conn *c, const struct rk_oob_info *rem, struct rk_error *err)
{
	const struct rk_device_info *di = &c->dev->info;
	struct ibv_qp_attr a = {0};
	int r;

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = c->path_mtu;
	a.dest_qp_num = rem->qpn;
	a.rq_psn = rem->psn;
	a.max_dest_rd_atomic = c->opts.max_rd_atomic;
	a.min_rnr_timer = c->opts.min_rnr_timer;
	a.ah_attr.dlid = rem->lid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = di->port;
	if (di->link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, rem->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)di->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	r = ibv_modify_qp(c->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r) {
		r = rk__err_ret(err, r, "ibv_modify_qp RTR",
				"path_mtu %u dest_qpn 0x%x rq_psn 0x%x max_dest_rd_atomic %u "
				"min_rnr_timer %u dlid %u sgid_index %d port %u",
				rk_mtu_bytes(a.path_mtu), a.dest_qp_num, a.rq_psn,
				a.max_dest_rd_atomic, a.min_rnr_timer, a.ah_attr.dlid,
				di->gid_index, di->port);
		rk__err_set_qp(err, c->qp->qp_num);
	}
	return r;
}

static int to_rts(struct rk_conn *c, struct rk_error *err)
{
	struct ibv_qp_attr a = {0};
	int r;

	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->psn;
	a.timeout = c->opts.ack_timeout;
	a.retry_cnt = c->opts.retry_cnt;
	a.rnr_retry = c->opts.rnr_retry;
	a.max_rd_atomic = c->opts.max_rd_atomic;
	r = ibv_modify_qp(c->qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	if (r) {
		r = rk__err_ret(err, r, "ibv_modify_qp RTS",
				"sq_psn 0x%x timeout %u retry_cnt %u rnr_retry %u max_rd_atomic %u",
				a.sq_psn, a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic);
		rk__err_set_qp(err, c->qp->qp_num);
	}
	return r;
}

int rk_conn_connect(struct rk_conn *c, const struct rk_oob_info *rem, struct rk_error *err)
{
	int r;

	if (c->cm || c->state != RK_CONN_IDLE)
		return rk__err_set(err, EINVAL, "rk_conn_connect",
				   "connection is %s (manual connect needs an idle one)",
				   c->cm ? "an rdma_cm one" : rk_conn_state_str(c->state));
	r = check_remote(c, rem, err);
	if (r)
		return r;
	c->path_mtu = (enum ibv_mtu)rem->mtu < c->local_mtu ? (enum ibv_mtu)rem->mtu : c->local_mtu;
	r = to_rtr(c, rem, err);
	if (r)
		return r;
	r = to_rts(c, err);
	if (r)
		return r;
	c->state = RK_CONN_CONNECTED;
	rk_dbg("qp 0x%x connected to qp 0x%x: local psn 0x%x, remote psn 0x%x, mtu %u "
	       "(local %u, peer %u), timeout %u retry %u rnr_retry %u rd_atomic %u",
	       c->qp->qp_num, rem->qpn, c->psn, rem->psn, rk_mtu_bytes(c->path_mtu),
	       rk_mtu_bytes(c->local_mtu), rk_mtu_bytes((enum ibv_mtu)rem->mtu),
	       c->opts.ack_timeout, c->opts.retry_cnt, c->opts.rnr_retry, c->opts.max_rd_atomic);
	return 0;
}
