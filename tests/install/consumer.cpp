/*
 * consumer.cpp - a C++17 program outside the tree, built against an
 * installed librdmakit: the headers' extern "C" guards make its symbols
 * link. An RPC client for consumer_c.
 *
 *   consumer_cpp version              print the library's version
 *   consumer_cpp call ADDR PORT N     N echo calls of growing size, each checked
 */
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rdmakit/rdmakit.h>

namespace
{

constexpr uint16_t kEcho = 1;

int call(const char *addr, const char *port, unsigned n)
{
	rk_device_opts dopts{};
	dopts.addr = addr;
	dopts.gid_index = -1;
	rk_rpc_client_opts co{};
	co.host = addr;
	co.port = port;
	co.timeout_ms = 30000;
	rk_device *dev = nullptr;
	rk_rpc_client *cl = nullptr;
	rk_error err{};
	int rc = 1;

	if (rk_device_open(&dopts, &err, &dev) || rk_rpc_client_connect(dev, &co, &err, &cl)) {
		std::fprintf(stderr, "consumer_cpp: %s\n", rk_error_str(&err));
		rk_device_close(dev);
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		std::string req =
		    "call " + std::to_string(i) + ": " + std::string(i * 97 % 5000, 'x');
		std::vector<char> resp(req.size());
		rk_rpc_call_args a{};
		a.method = kEcho;
		a.req = req.data();
		a.req_len = static_cast<uint32_t>(req.size());
		a.resp = resp.data();
		a.resp_cap = static_cast<uint32_t>(resp.size());
		a.timeout_ms = 10000;
		uint32_t got = 0;

		if (rk_rpc_call(cl, &a, &got, nullptr, &err)) {
			std::fprintf(stderr, "consumer_cpp: call %u: %s\n", i, rk_error_str(&err));
			goto out;
		}
		if (got != req.size() || std::memcmp(req.data(), resp.data(), got) != 0) {
			std::fprintf(stderr, "consumer_cpp: call %u came back wrong\n", i);
			goto out;
		}
	}
	std::printf("consumer_cpp: %u echo calls checked\n", n);
	rc = 0;
out:
	rk_rpc_client_destroy(cl);
	rk_device_close(dev);
	return rc;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc == 2 && !std::strcmp(argv[1], "version")) {
		std::printf("consumer_cpp: librdmakit %s\n", rk_version());
		return 0;
	}
	if (argc == 5 && !std::strcmp(argv[1], "call"))
		return call(argv[2], argv[3],
			    static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)));
	std::fprintf(stderr, "usage: consumer_cpp version | call ADDR PORT N\n");
	return 2;
}
