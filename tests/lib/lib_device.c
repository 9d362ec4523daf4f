/*
 * lib_device.c - how rk_device_open chooses a device.
 *
 *   lib_device one             given neither name nor address, the only
 *                              device is opened ($RK_DEV)
 *   lib_device many A B        with two devices, A and B, neither name nor
 *                              address: -ENODEV naming both; by name, each
 *                              opens; by $RK_ADDR, A; by the route to a
 *                              peer on A's subnet, A, and on B's (10.78.0.0/24),
 *                              B; a peer with no route: -ENETUNREACH
 *
 * device_choice.sh runs both, adding the second device (Soft-RoCE on a
 * dummy netdev) for "many" and removing it after.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lt.h"

static void open_ok(const struct rk_device_opts *o, const char *want)
{
	struct rk_device *dev;
	struct rk_error e;

	LT_CHECK(rk_device_open(o, &e, &dev), &e);
	if (strcmp(rk_device_get_info(dev)->name, want))
		LT_FAIL("opened %s, expected %s", rk_device_get_info(dev)->name, want);
	printf("opened %s (name %s, address %s, peer %s)\n", want, o && o->name ? o->name : "-",
	       o && o->addr ? o->addr : "-", o && o->peer ? o->peer : "-");
	rk_device_close(dev);
}

int main(int argc, char **argv)
{
	const char *dev_a = lt_env("RK_DEV");
	struct rk_device_opts by_addr = {.addr = lt_env("RK_ADDR"), .gid_index = -1};
	struct rk_device_opts none = {.gid_index = -1};
	struct rk_device *dev = NULL;
	struct rk_error e;
	int r;

	lt_prog = "lib_device";
	lt_role = argc > 1 ? argv[1] : "?";
	if (argc == 2 && !strcmp(argv[1], "one")) {
		open_ok(NULL, dev_a);
		return 0;
	}
	if (argc != 4 || strcmp(argv[1], "many"))
		LT_FAIL("usage: lib_device one | many DEV_A DEV_B");
	r = rk_device_open(&none, &e, &dev);
	if (r != -ENODEV || !strstr(e.msg, argv[2]) || !strstr(e.msg, argv[3]))
		LT_FAIL(
		    "two devices, nothing to choose by: %d (%s), expected -ENODEV naming %s and %s",
		    r, rk_error_str(&e), argv[2], argv[3]);
	printf("two devices, nothing to choose by: %s\n", rk_error_str(&e));
	for (int i = 2; i < 4; i++) {
		struct rk_device_opts by_name = {.name = argv[i], .gid_index = -1};

		open_ok(&by_name, argv[i]);
	}
	open_ok(&by_addr, argv[2]);
	/* By route: A's own subnet leaves by A, 10.78.0.0/24 by B. */
	{
		struct rk_device_opts by_peer = {.peer = lt_env("RK_ADDR"), .gid_index = -1};

		open_ok(&by_peer, argv[2]);
		by_peer.peer = "10.78.0.2";
		open_ok(&by_peer, argv[3]);
		by_peer.peer = "203.0.113.9"; /* TEST-NET-3: no route in the sandbox */
		r = rk_device_open(&by_peer, &e, &dev);
		if (r != -ENETUNREACH)
			LT_FAIL("a peer with no route: %d (%s), expected -ENETUNREACH", r,
				rk_error_str(&e));
		printf("a peer with no route: %s\n", rk_error_str(&e));
	}
	return 0;
}
