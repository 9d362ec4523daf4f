/* matrix_pair.c - one leg of a pair as an in-process rk bench session; see matrix_pair.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_report.h"
#include "matrix_hello.h"
#include "matrix_pair.h"

unsigned mx_pair_budget_ms(const struct mx_opts *o)
{
	/* Per leg: the run, a connection that may take the watchdog, and the wait for the peer. */
	unsigned leg_bw = (o->duration_s + 2 * o->watchdog_s + 5) * 1000;
	unsigned leg_lat = (o->lat_duration_s + 2 * o->watchdog_s + 5) * 1000;

	return 2 * leg_bw + leg_lat;
}

static void leg_params(const struct mx_opts *o, int leg, struct bench_params *p)
{
	bench_params_default(p);
	p->op = BENCH_OP_WRITE;
	p->iters = 0;
	if (leg == MX_LAT) {
		/* Waiting for events needs a completion to wait for: a receive's. */
		p->op = o->poll == RK_WAIT_BUSY ? BENCH_OP_WRITE : BENCH_OP_WRITE_IMM;
		p->mode = BENCH_MODE_LAT;
		p->size_min = p->size_max = MATRIX_LAT_SIZE;
		p->duration_s = o->lat_duration_s;
		p->cq_mod = 1; /* one message in flight: signal each (as rk bench does) */
	} else {
		p->mode = BENCH_MODE_BW;
		p->size_min = p->size_max = o->size;
		p->duration_s = o->duration_s;
		/* The run is timed by duration: a warm-up of 16 MiB would cost a second on rxe. */
		p->warmup = 2;
		/*
		 * At most MATRIX_INFLIGHT bytes queued: the run ends when the last
		 * one completes, and 128 x 1 MiB drains for 3 s after a 1 s run on
		 * a slow link (on a fast one 16 MiB is still a millisecond of data).
		 */
		p->tx_depth = MATRIX_INFLIGHT / o->size;
		if (p->tx_depth > MATRIX_MAX_DEPTH)
			p->tx_depth = MATRIX_MAX_DEPTH;
		if (p->tx_depth < 2)
			p->tx_depth = 2;
		if (p->cq_mod > p->tx_depth)
			p->cq_mod = p->tx_depth;
	}
}

void mx_run_leg(const struct mx_opts *o, int leg, uint32_t me, const char *my_addr, uint32_t peer,
		const char *peer_addr, const uint8_t *key, struct mx_leg_out *out)
{
	int lead = me < peer, client = leg == MX_BW_BA ? !lead : lead;
	uint32_t server = client ? peer : me;
	struct bench_params p, client_p;
	struct bench_local l;
	struct bench_ctx c;
	struct bench_report rep;
	struct rk_error err;
	const char *stage;
	char why[160];
	int r;

	memset(out, 0, sizeof(*out));
	leg_params(o, leg, &p);
	if (bench_params_check(&p, why, sizeof(why))) {
		out->status = -EINVAL;
		snprintf(out->why, sizeof(out->why), "--%s", why);
		return;
	}
	bench_local_default(&l);
	l.quiet = 1;
	l.gbits = 1;
	l.watchdog_s = o->watchdog_s;
	l.poll = o->poll;
	l.wait_s = 2 * o->watchdog_s + 5;
	l.dev_name = o->dev;
	l.pair_key = key;
	snprintf(l.port, sizeof(l.port), "%u", o->port_base + 3 * server + (unsigned)leg);
	if (client) {
		l.host = peer_addr;
	} else {
		l.addr = my_addr;
		/* Both ranks run the same leg: anything else is refused, naming it. */
		l.explicit_fields = BF_OP | BF_MODE | BF_SIZE | BF_ITERS | BF_DURATION;
	}
	rk_error_clear(&err);
	bench_ctx_init(&c, &p, &l);
	bench_report_init(&rep, &c);
	r = bench_session(&c, &client_p, &rep, &stage, &err);
	if (c.dev)
		snprintf(out->dev, sizeof(out->dev), "%s", c.me.dev);
	if (!r && rep.n != 1)
		r = mx_fail(&err, EPROTO, "the session ended without a result");
	if (!r) {
		struct bench_figures f;

		bench_figures(&rep, &rep.res[0], &f);
		if (leg == MX_LAT) {
			out->v[0] = f.lat->lat_ns[LAT_MEDIAN] / 1e3;
			out->v[1] = f.lat->lat_ns[LAT_P99] / 1e3;
		} else {
			out->v[0] = f.bw_avg_bps / 1e9;
		}
	} else {
		out->status = r;
		snprintf(out->why, sizeof(out->why), "%s %s rank %u (%s): %s", stage,
			 client ? "to" : "from", peer, peer_addr, rk_error_str(&err));
	}
	bench_ctx_release(&c);
	bench_report_free(&rep);
}
