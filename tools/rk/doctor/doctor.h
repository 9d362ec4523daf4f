/*
 * doctor.h - rk doctor: checks of this host's RDMA set-up, one concern per
 * file, each adding verdict lines and facts to one report.
 *
 *   doctor_report.c   the report: lines (verdict, text, fix), facts, printing
 *   doctor_kernel.c   device nodes, modules, devices and their providers
 *   doctor_port.c     port state, the netdev behind a RoCE port, MTU
 *   doctor_gid.c      GID table, the GID rdma_cm uses for each address
 *   doctor_memlock.c  RLIMIT_MEMLOCK against what the tools need; container, systemd
 *   doctor_cm.c       rdma_cm can bind each RDMA address
 *   doctor_caps.c     device capabilities the library uses (memory windows)
 *
 * rk doctor HOST and rk doctor --listen, across two hosts, build on this
 * report: see doctor_peer.h.
 *
 * Facts come from sysfs (world-readable) where possible, so that a user
 * without access to the device nodes still gets the port and GID checks;
 * what needs an open device says "not checked: needs ..." instead of ✓.
 * Single-threaded; the report owns every string and json object it holds.
 */
#ifndef RK_DOCTOR_H
#define RK_DOCTOR_H

#include <net/if.h>
#include <stddef.h>

#include <json-c/json.h>

#include "copy/copy_budget.h"

enum doc_verdict {
	DOC_OK,	  /* ✓ */
	DOC_WARN, /* ! works, but slower or fragile */
	DOC_FAIL, /* ✗ will fail */
	DOC_SKIP, /* not checked: needs ... */
};

#define DOC_MAX_PORTS 16

struct doc_port {
	char dev[64];
	int port;
	char link_layer[32];	  /* "Ethernet", "InfiniBand" */
	char netdev[IF_NAMESIZE]; /* RoCE: the netdev behind the port, "" if none */
	int active;		  /* port state ACTIVE */
};

struct doc_report {
	struct json_object *checks; /* array of {check, verdict, text, fix} */
	struct json_object *facts;  /* object: per-check facts */
	int nfail, nwarn, nskip;
	int color;
	struct doc_port ports[DOC_MAX_PORTS];
	int nports;
	int uverbs_ok; /* every uverbs node openable: verbs queries possible */
};

/* doc_add - one verdict line; @fix may be NULL (not for WARN / FAIL). Printed at once
 * unless the report is JSON-only. @fmt is the line's text. */
void doc_add(struct doc_report *r, enum doc_verdict v, const char *check, const char *fix,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* doc_fact - the facts object of @section (created on first use), owned by @r. */
struct json_object *doc_fact(struct doc_report *r, const char *section);

/* doc_run_local - a fresh report @r with every check below run, in order. */
void doc_run_local(struct doc_report *r);

/* doc_report_free - release what @r holds (its json). */
void doc_report_free(struct doc_report *r);

/* The checks, in the order rk doctor runs them. */
void doc_check_kernel(struct doc_report *r);
void doc_check_ports(struct doc_report *r);
void doc_check_gids(struct doc_report *r);
void doc_check_memlock(struct doc_report *r);
void doc_check_cm(struct doc_report *r);
void doc_check_caps(struct doc_report *r);

/*
 * doc_explain - attach to the last line the explain table's entry @e (NULL:
 * only @check): its name and meaning, the likely causes in order, its fixes,
 * and @check (may be NULL), what to look at on which host. Printed under the
 * line unless the report is JSON-only; in JSON as the line's "explain".
 */
struct rk_explain;
void doc_explain(struct doc_report *r, const struct rk_explain *e, const char *check);

/* What rk copy pins with its defaults: its own budget (copy_budget.h). */
#define DOC_NEED_COPY cp_client_pinned(1, CP_DEPTH_PER_LANE, CP_CHUNK_DEFAULT)

/* Helpers shared by the checks (doctor_report.c). */
int doc_read_file(const char *path, char *buf, size_t len); /* trimmed; 0 or -errno */
int doc_read_int(const char *path, long *out);

/* Print mode: set by cmd_doctor before the checks run. */
extern int doc_quiet; /* --json: print nothing but the final JSON */

#endif
