/*
 * pd.c - protection domains besides the device's own (see rdmakit/pd.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"

int rk_pd_alloc(struct rk_device *dev, struct rk_error *err, struct rk_pd **out)
{
	struct rk_pd *pd;

	*out = NULL;
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return rk__err_set(err, ENOMEM, "rk_pd_alloc", NULL);
	pd->dev = dev;
	pd->pd = ibv_alloc_pd(dev->ctx);
	if (!pd->pd) {
		int r = rk__err_sys(err, "ibv_alloc_pd", "%s", dev->info.name);

		free(pd);
		return r;
	}
	*out = pd;
	return 0;
}

void rk_pd_free(struct rk_pd *pd)
{
	int r;

	if (!pd)
		return;
	r = ibv_dealloc_pd(pd->pd);
	if (r)
		rk_warn("ibv_dealloc_pd: %s (something created in the PD is still alive)",
			strerror(r));
	free(pd);
}

struct rk_device *rk_pd_device(const struct rk_pd *pd)
{
	return pd->dev;
}

struct ibv_pd *rk_pd_ibv(const struct rk_pd *pd)
{
	return pd->pd;
}
