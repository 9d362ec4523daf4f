/*
 * cmd_doctor.c - rk doctor: check this host's RDMA set-up before something
 * fails, one line per check (✓ fine, ! works but slower or fragile, ✗ will
 * fail) and the fix for every ! and ✗. --json gives the same verdicts with
 * the facts behind them. Exit 0 when nothing is ✗, 1 otherwise.
 *
 * The checks live in doctor_*.c (see doctor.h). Nothing here needs root;
 * what cannot be looked at says "not checked: needs ...".
 */
#include <getopt.h>
#include <stdio.h>

#include <rdmakit/version.h>

#include "commands.h"
#include "doctor.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: rk doctor [--json]\n"
		     "\n"
		     "Check this host's RDMA set-up: device nodes, modules, providers, ports and\n"
		     "their netdevs, GIDs, MTU, the locked-memory limit and rdma_cm. One line per\n"
		     "check: \u2713 fine, ! works but slower or fragile, \u2717 will fail, - not "
		     "checked;\n"
		     "every ! and \u2717 comes with its fix.\n"
		     "\n"
		     "  --json      the verdicts and the facts as one JSON object on stdout\n"
		     "  -h, --help  this text\n"
		     "\n"
		     "exit: 0 nothing is \u2717, 1 something is, 2 bad command line\n");
}

int rk_cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct doc_report r = {0};
	int c, json = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return RK_EXIT_OK;
		default:
			usage(stderr);
			return RK_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return RK_EXIT_USAGE;
	}
	doc_quiet = json;
	r.checks = json_object_new_array();
	r.facts = json_object_new_object();
	doc_check_kernel(&r);
	doc_check_ports(&r);
	doc_check_gids(&r);
	doc_check_memlock(&r);
	doc_check_cm(&r);
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "rk_version", json_object_new_string(rk_version()));
		json_object_object_add(o, "ok", json_object_new_boolean(r.nfail == 0));
		json_object_object_add(o, "failures", json_object_new_int(r.nfail));
		json_object_object_add(o, "warnings", json_object_new_int(r.nwarn));
		json_object_object_add(o, "not_checked", json_object_new_int(r.nskip));
		json_object_object_add(o, "checks", r.checks);
		json_object_object_add(o, "facts", r.facts);
		printf("%s\n", json_object_to_json_string_ext(
				   o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		printf("\n%d \u2717, %d !, %d not checked\n", r.nfail, r.nwarn, r.nskip);
		json_object_put(r.checks);
		json_object_put(r.facts);
	}
	return r.nfail ? RK_EXIT_FAILURE : RK_EXIT_OK;
}
