/*
 * cmd_doctor.c - rk doctor: check this host's RDMA set-up before something
 * fails, one line per check (✓ fine, ! works but slower or fragile, ✗ will
 * fail) and the fix for every ! and ✗. --json gives the same verdicts with
 * the facts behind them. Exit 0 when nothing is ✗, 1 otherwise.
 *
 * With HOST[:PORT] it goes on to the peer's rk doctor --listen: both
 * sides' facts compared, then the link test (doctor_peer.h). --token-file
 * takes rk copy's token files (copy/copy_token.h).
 *
 * The checks live in doctor_*.c (see doctor.h). Nothing here needs root;
 * what cannot be looked at says "not checked: needs ...".
 */
#include <getopt.h>
#include <stdio.h>

#include <rdmakit/version.h>

#include "cli.h"
#include "commands.h"
#include "copy/copy_token.h"
#include "doctor.h"
#include "doctor_gate.h"
#include "doctor_peer.h"

_Static_assert(CP_TOKEN_LEN == DOC_TOKEN_LEN, "rk doctor's hello carries rk copy's token digest");

static const char synopsis[] =
    "usage: rk doctor [--json[=FILE]]                 this host\n"
    "       rk doctor [--json[=FILE]] [--timeout DURATION] [--token-file FILE]\n"
    "                 HOST[:PORT]                     this host, HOST and the link\n"
    "       rk doctor --listen [--addr ADDR] [--port PORT] [--once]\n"
    "                 [--timeout DURATION] [--token-file FILE]\n";

static void usage(FILE *out)
{
	fputs(synopsis, out);
	fprintf(out,
		"\n"
		"Check this host's RDMA set-up: device nodes, modules, providers, ports and\n"
		"their netdevs, GIDs, MTU, the locked-memory limit and rdma_cm. One line per\n"
		"check: \u2713 fine, ! works but slower or fragile, \u2717 will fail, - not "
		"checked;\n"
		"every ! and \u2717 comes with its fix.\n"
		"\n"
		"With HOST, where `rk doctor --listen` runs: both hosts' facts are exchanged and\n"
		"compared (versions, device and port, GID types, MTU at both ends and the path\n"
		"MTU, locked memory), saying what to change on which host; then an rdma_cm\n"
		"connection and a 4 KiB SEND, RDMA WRITE and RDMA READ each way, the data\n"
		"checked, and the round-trip time. A failing step is named with its completion\n"
		"status or CM event, the likely causes in order and what to check on which host;\n"
		"every step has a deadline and the report says how far the test got.\n"
		"\n"
		"  --json[=FILE]        the verdicts and the facts as one JSON object on stdout\n"
		"                       (instead of the lines), or into FILE (beside them)\n"
		"  --timeout DURATION   deadline of each step of the two-host test (default\n"
		"                       %ds; 100ms..60s; the listener takes the client's, up to\n"
		"                       its own). A bare number is read as milliseconds this\n"
		"                       release, with a warning: write 5000ms or 5s\n"
		"  --listen             serve rk doctor HOST from other hosts, one test at a time\n"
		"  --addr ADDR          the address to listen on (default: any)\n"
		"  --port PORT          TCP port (default %s; HOST:PORT on the other side)\n"
		"  --once               with --listen: serve one test, then exit\n"
		"  --token-file FILE    the access token (a file as for rk copy / rk serve): the\n"
		"                       listener admits only clients that send it; the client\n"
		"                       sends it\n"
		"  -h, --help           this text\n"
		"\n"
		"The listener tells a connection nothing (not even its facts) until it has said\n"
		"hello as rk doctor does, in a first message of at most %d bytes within %d ms,\n"
		"with the token when the listener has one (compared in constant time; it\n"
		"travels unencrypted, as rk copy's). Without --token-file any rk doctor client\n"
		"that reaches the port may run the test. Up to %d connections wait for their\n"
		"hello at once (past that the oldest is dropped); the test runs for one client\n"
		"at a time, a client admitted meanwhile is told it is busy, and a test is ended\n"
		"after %d x the listener's --timeout + %d s. Refusals are logged to stderr.\n"
		"\n"
		"exit: 0 nothing is \u2717, 1 something is, 2 bad command line or token file\n",
		DOC_DEFAULT_STEP_MS / 1000, DOC_DEFAULT_PORT, DOC_HELLO_MAX, DOC_HELLO_MS,
		DOC_PENDING_MAX, DOC_LINK_STEPS + 3, DOC_LOCAL_CHECKS_MS / 1000);
}

int rk_cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", optional_argument, NULL, 'j'},
	    {"listen", no_argument, NULL, 'l'},
	    {"addr", required_argument, NULL, 'a'},
	    {"port", required_argument, NULL, 'p'},
	    {"timeout", required_argument, NULL, 't'},
	    {"once", no_argument, NULL, 'o'},
	    {"token-file", required_argument, NULL, 'k'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *addr = NULL, *port = DOC_DEFAULT_PORT, *target = NULL, *token_file = NULL,
		   *json_path = NULL;
	uint8_t token[CP_TOKEN_LEN];
	char why[256];
	struct doc_report r;
	uint64_t step_ms = DOC_DEFAULT_STEP_MS;
	int c, json = 0, listen = 0, once = 0, port_set = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json_path = cli_json_path(optarg);
			json = cli_json_to_stdout(json_path);
			break;
		case 'l':
			listen = 1;
			break;
		case 'a':
			addr = optarg;
			break;
		case 'p':
			port = optarg;
			port_set = 1;
			break;
		case 'o':
			once = 1;
			break;
		case 'k':
			token_file = optarg;
			break;
		case 't':
			/*
			 * A bare number was milliseconds here (seconds in every
			 * other rk command): so read one more release, said.
			 */
			if (cli_is_bare_number(optarg) &&
			    cli_parse_uint(optarg, DOC_STEP_MS_MIN, DOC_STEP_MS_MAX, &step_ms) ==
				0) {
				fprintf(stderr,
					"rk doctor: warning: --timeout %s is read as milliseconds "
					"this release and as seconds in the next; write %sms or "
					"%gs\n",
					optarg, optarg, (double)step_ms / 1000);
				break;
			}
			if (cli_duration_opt("doctor", synopsis, "--timeout", optarg,
					     DOC_STEP_MS_MIN, DOC_STEP_MS_MAX, 1, &step_ms))
				return RK_EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return RK_EXIT_OK;
		default:
			return cli_option_error("doctor", synopsis, argv, "h", opts);
		}
	}
	if (optind < argc)
		target = argv[optind++];
	if (optind < argc)
		return cli_usage_error("doctor", synopsis, "unexpected argument '%s'",
				       argv[optind]);
	if (listen && (target || json_path))
		return cli_usage_error("doctor", synopsis,
				       "--listen takes neither HOST nor --json");
	if (!listen && (addr || once || port_set))
		return cli_usage_error("doctor", synopsis,
				       "--addr, --port and --once go with --listen");
	if (token_file && !listen && !target)
		return cli_usage_error("doctor", synopsis, "--token-file needs HOST or --listen");
	if (token_file && cp_token_load(token_file, token, why, sizeof(why))) {
		fprintf(stderr, "rk doctor: token: %s\n", why);
		return RK_EXIT_USAGE;
	}
	if (listen)
		return doc_listen(addr, port, once, (int)step_ms, token_file ? token : NULL)
			   ? RK_EXIT_FAILURE
			   : RK_EXIT_OK;
	doc_quiet = json;
	doc_run_local(&r);
	if (target) {
		if (!json)
			printf("\nwith %s:\n", target);
		doc_peer_run(&r, target, (int)step_ms, token_file ? token : NULL);
	}
	if (!json)
		printf("\n%d \u2717, %d !, %d not checked\n", r.nfail, r.nwarn, r.nskip);
	if (json_path) {
		struct json_object *o = json_object_new_object();
		int bad;

		json_object_object_add(o, "rk_version", json_object_new_string(rk_version()));
		if (target)
			json_object_object_add(o, "peer", json_object_new_string(target));
		json_object_object_add(o, "ok", json_object_new_boolean(r.nfail == 0));
		json_object_object_add(o, "failures", json_object_new_int(r.nfail));
		json_object_object_add(o, "warnings", json_object_new_int(r.nwarn));
		json_object_object_add(o, "not_checked", json_object_new_int(r.nskip));
		json_object_object_add(o, "checks", r.checks);
		json_object_object_add(o, "facts", r.facts);
		bad =
		    cli_json_emit("doctor", json_path,
				  json_object_to_json_string_ext(
				      o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o); /* with r.checks and r.facts */
		if (bad)
			return RK_EXIT_FAILURE;
	} else {
		doc_report_free(&r);
	}
	return r.nfail ? RK_EXIT_FAILURE : RK_EXIT_OK;
}
