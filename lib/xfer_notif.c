/*
 * xfer_notif.c - the owner's side of notifications (xfer.h): the 0-byte
 * receives it keeps posted on each lane (counted on the lane, so a peer
 * recreated there takes them over), the queue of what arrived, and
 * reposting as the application takes them.
 */
#include <arpa/inet.h>
#include <errno.h>

#include "rk_internal.h"
#include "xfer_int.h"

int rk__xfer_notif_recv(struct rk_xfer_peer *p, unsigned lane, struct rk_error *err)
{
	uint64_t id = (uint64_t)RK_XFER_WRID_NOTIF << 48 | (uint64_t)p->idx << 32 | lane;
	int r = rk_post_recv(p->lanes[lane], NULL, 0, 0, id, err);

	if (r == 0)
		p->lanes[lane]->xfer_recvs++;
	return r;
}

struct rk_xfer_peer *rk__xfer_qp_peer(struct rk_xfer *x, uint32_t qp_num, unsigned *lane)
{
	for (unsigned i = 0; i < x->npeers; i++) {
		struct rk_xfer_peer *p = x->peers[i];

		for (unsigned l = 0; p && l < p->nlanes; l++)
			if (rk_conn_qp_num(p->lanes[l]) == qp_num) {
				*lane = l;
				return p;
			}
	}
	return NULL;
}

/*
 * A notification receive completed: 1 if it was on a lane of one of @x's
 * peers (the one whose id it carries, or one created later on the same
 * lane, which took the receive over), else 0.
 */
int rk__xfer_notif_arrival(struct rk_xfer *x, uint64_t wr_id, const struct ibv_wc *wc)
{
	unsigned idx = (unsigned)(wr_id >> 32) & 0xffff, lane = (unsigned)wr_id & 0xffff;
	struct rk_xfer_peer *p = idx < x->npeers ? x->peers[idx] : NULL;

	if (!p || lane >= p->nlanes || rk_conn_qp_num(p->lanes[lane]) != wc->qp_num)
		p = rk__xfer_qp_peer(x, wc->qp_num, &lane);
	if (!p)
		return 0;
	if (p->lanes[lane]->xfer_recvs)
		p->lanes[lane]->xfer_recvs--;
	if (wc->status != IBV_WC_SUCCESS)
		return 1; /* flushed: the lane is down, nothing to repost */
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc->wc_flags & IBV_WC_WITH_IMM)) {
		p->nq[(p->nq_head + p->nq_count) % p->nq_cap] = ntohl(wc->imm_data);
		p->nq_count++;
		x->st.notifs_received++;
	} else {
		rk_dbg("xfer: lane %u: a %d-byte message that is no notification, ignored", lane,
		       (int)wc->byte_len);
	}
	if (p->nq_count > p->nq_cap / 2 || rk__xfer_notif_recv(p, lane, NULL))
		p->held[lane]++;
	return 1;
}

int rk_xfer_notif_take(struct rk_xfer_peer *p, uint32_t *value)
{
	if (!p->nq_count)
		return 0;
	*value = p->nq[p->nq_head];
	p->nq_head = (p->nq_head + 1) % p->nq_cap;
	p->nq_count--;
	for (unsigned l = 0; l < p->nlanes; l++)
		while (p->held[l] && p->nq_count <= p->nq_cap / 2) {
			if (rk__xfer_notif_recv(p, l, NULL))
				break;
			p->held[l]--;
		}
	return 1;
}
