/*
 * kv_cache.c - example 10: a block cache read one-sided. The server holds
 * fixed-size blocks in one registered segment; a client finds keys by RPC
 * and READs their blocks straight out of the server's memory, with a
 * descriptor the server exported to it alone (include/rdmakit/xfer.h).
 *
 *   ex10_kv_cache [options] ADDR             server (child process) and client
 *   ex10_kv_cache --server [options] ADDR    the server only
 *   ex10_kv_cache --client [options] ADDR    the client only
 *
 * kv_wire.h is the protocol, kv_server.c and kv_client.c the two sides.
 * Like 09, this example links librdmakit.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "kv_cache.h"
#include "kv_wire.h"

static void usage(FILE *f)
{
	ex_pair_usage(
	    f,
	    "A block cache read one-sided: keys found by RPC, blocks read by RDMA READ\n"
	    "with a descriptor the server exports to each client, every block checked.\n",
	    "7550",
	    "                    (data lanes on PORT + 1)\n"
	    "  -b, --blocks N    server: blocks of 4 KiB held, 1..65536 (default 256)\n"
	    "  -n, --clients N   server: exit after N clients said bye and left, 0 = "
	    "never\n"
	    "                    (default 1)\n"
	    "  -m, --mode M      server: access control, auto|mw|mr (default auto:\n"
	    "                    memory windows where the device has them)\n"
	    "  -l, --lease S     server: a client's access ends S seconds after its last\n"
	    "                    hello or lookup, 1..3600 (default 30)\n"
	    "  -k, --keys N      client: look up keys 0..N-1, 1..1000000 (default 300)\n"
	    "  -B, --batch N     client: blocks per READ batch, 1..%d (default 16)\n",
	    KV_BATCH_MAX);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"server", no_argument, NULL, 's'},
					     {"client", no_argument, NULL, 'c'},
					     {"port", required_argument, NULL, 'p'},
					     {"blocks", required_argument, NULL, 'b'},
					     {"clients", required_argument, NULL, 'n'},
					     {"mode", required_argument, NULL, 'm'},
					     {"lease", required_argument, NULL, 'l'},
					     {"keys", required_argument, NULL, 'k'},
					     {"batch", required_argument, NULL, 'B'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct kv_args a = {.pair.port = "7550",
			    .blocks = 256,
			    .clients = 1,
			    .lease_s = KV_LEASE_MS / 1000,
			    .keys = 300,
			    .batch = 16};
	long port;
	int opt;

	ex_set_prog(argv[0]);
	while ((opt = getopt_long(argc, argv, "scp:b:n:m:l:k:B:h", opts, NULL)) != -1) {
		if (ex_pair_option(&a.pair, opt, optarg, usage))
			continue;
		if (opt == 'b')
			a.blocks = ex_opt_num(optarg, 1, 65536, "--blocks: a number in 1..65536");
		else if (opt == 'n')
			a.clients =
			    ex_opt_num(optarg, 0, 1000000, "--clients: a number in 0..1000000");
		else if (opt == 'l')
			a.lease_s = ex_opt_num(optarg, 1, 3600, "--lease: seconds, 1..3600");
		else if (opt == 'k')
			a.keys = ex_opt_num(optarg, 1, 1000000, "--keys: a number in 1..1000000");
		else if (opt == 'B')
			a.batch = ex_opt_num(optarg, 1, KV_BATCH_MAX, "--batch: a number in 1..64");
		else if (opt == 'm' && !strcmp(optarg, "auto"))
			a.mode = RK_XFER_AUTO;
		else if (opt == 'm' && !strcmp(optarg, "mw"))
			a.mode = RK_XFER_MW;
		else if (opt == 'm' && !strcmp(optarg, "mr"))
			a.mode = RK_XFER_MR;
		else if (opt == 'm')
			ex_bad_usage("--mode: auto, mw or mr");
	}
	/* The data lanes listen on the next port: one number to give, two listeners. */
	if (ex_parse_int(a.pair.port, 1, 65534, &port))
		ex_bad_usage("--port: a number in 1..65534 (the data lanes use PORT + 1)");
	snprintf(a.data_port, sizeof(a.data_port), "%ld", port + 1);
	ex_pair_run(&a.pair, argc, argv, usage, kv_server, kv_client, &a);
	return 0;
}
