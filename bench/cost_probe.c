/*
 * cost_probe - name the verbs provider's data-path functions for bench/cost.
 *
 * usage: cost_probe DEVICE
 *
 * Prints one JSON object: the provider library's path and, for poll_cq,
 * req_notify_cq, post_send and post_recv, the function's offset from the
 * library's load address - the name callgrind gives a function of a
 * stripped library (librxe's are static). bench/cost counts the calls of
 * poll_cq as the passes of a wait loop, whatever the provider.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int print_fn(const char *name, void *fn, int last)
{
	Dl_info info;

	if (!fn || !dladdr(fn, &info) || !info.dli_fbase) {
		fprintf(stderr, "cost_probe: %s: no provider function\n", name);
		return -1;
	}
	printf("  \"%s\": \"0x%016jx\"%s\n", name,
	       (uintmax_t)((uintptr_t)fn - (uintptr_t)info.dli_fbase), last ? "" : ",");
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	Dl_info info;
	int i, n, rc = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: cost_probe DEVICE\n");
		return 2;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		perror("cost_probe: ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n && !ctx; i++)
		if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0)
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "cost_probe: cannot open device %s\n", argv[1]);
		goto out;
	}
	/* The ops table is what the inline ibv_poll_cq / ibv_post_send call. */
	if (!dladdr((void *)ctx->ops.poll_cq, &info) || !info.dli_fname) {
		fprintf(stderr, "cost_probe: poll_cq is in no library\n");
		goto close;
	}
	printf("{\n  \"device\": \"%s\",\n  \"provider\": \"%s\",\n", argv[1], info.dli_fname);
	if (print_fn("poll_cq", (void *)ctx->ops.poll_cq, 0) ||
	    print_fn("req_notify_cq", (void *)ctx->ops.req_notify_cq, 0) ||
	    print_fn("post_send", (void *)ctx->ops.post_send, 0) ||
	    print_fn("post_recv", (void *)ctx->ops.post_recv, 1))
		goto close;
	printf("}\n");
	rc = 0;
close:
	ibv_close_device(ctx);
out:
	ibv_free_device_list(list);
	return rc;
}
