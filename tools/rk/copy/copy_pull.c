/*
 * copy_pull.c - rk copy HOST:SRC... DEST (see copy_pull.h).
 *
 * The roles of a push turned round over the connection this side makes:
 * after its PULL, this process is the receiver, a session of copy_recv.c
 * with the same file sink rk serve uses (copy_files.c: temporaries, flock,
 * chunk and whole-file verification, fsync, rename, --resume by proof),
 * rooted at DEST's directory. The server is a peer like any other: every
 * name it sends is checked there, and must be DEST or lie beneath it
 * (cp_server.only_under), so it cannot make us write beside DEST.
 *
 * Where things land. DEST an existing directory, or ending in '/': the
 * root is DEST and the server plans as for a push to its top. Otherwise
 * the root is DEST's parent and the server plans to "LEAF" (DEST's last
 * component), where the sink's CP_BEGIN_INTO rule makes one file LEAF
 * itself and puts anything else under LEAF/.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <json-c/json.h>
#include <rdmakit/cm.h>
#include <rdmakit/device.h>

#include "cli.h"
#include "commands.h"
#include "copy_files.h"
#include "copy_path.h"
#include "copy_proto.h"
#include "copy_pull.h"
#include "copy_recv.h"
#include "copy_retry.h"
#include "copy_token.h"

/* Never set: Ctrl-C ends the process, and the temporaries stay for --resume. */
static atomic_int no_stop;

static void report(const struct cp_pull_opts *o, const struct cp_recv_stats *st,
		   unsigned reconnects, double secs, int rc, const char *fatal)
{
	char again[32] = "";
	char bytes[32], rate[32];
	double bps = secs > 0 ? (double)st->bytes * 8 / secs : 0;

	if (o->json_path) {
		json_object *j = json_object_new_object();

		if (!j)
			return;
		json_object_object_add(j, "direction", json_object_new_string("pull"));
		json_object_object_add(j, "files_copied", json_object_new_int64(st->files));
		json_object_object_add(j, "files_up_to_date",
				       json_object_new_int64(st->up_to_date));
		json_object_object_add(j, "failed", json_object_new_int64(st->failed));
		json_object_object_add(j, "directories", json_object_new_int64(st->dirs));
		json_object_object_add(j, "bytes", json_object_new_int64((int64_t)st->bytes));
		json_object_object_add(j, "seconds", json_object_new_double(secs));
		json_object_object_add(j, "gbps", json_object_new_double(bps / 1e9));
		json_object_object_add(j, "verified", json_object_new_string("xxh3-128"));
		json_object_object_add(j, "reconnects", json_object_new_int((int)reconnects));
		json_object_object_add(j, "exit_code", json_object_new_int(rc));
		if (fatal)
			json_object_object_add(j, "error", json_object_new_string(fatal));
		(void)cli_json_emit("copy", o->json_path,
				    json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
		json_object_put(j);
		if (o->json)
			return;
	}
	if (o->quiet)
		return;
	if (reconnects)
		snprintf(again, sizeof(again), ", %u reconnect%s", reconnects,
			 reconnects == 1 ? "" : "s");
	printf("rk copy: %u files received%s%s (%s) in %.2f s, %s%s, verified xxh3-128%s\n",
	       st->files + st->up_to_date, st->up_to_date ? " or up to date" : "",
	       st->failed ? ", some FAILED" : "", cli_fmt_bytes(st->bytes, bytes, sizeof(bytes)),
	       secs, cli_fmt_rate(bps / 8, rate, sizeof(rate)), again, rc ? "; FAILED" : "");
}

/* The PULL for @o, with the chunk, depth and flags this session uses. */
static int encode(const struct cp_pull_opts *o, const char *leaf, uint32_t chunk, unsigned depth,
		  unsigned flags, uint8_t *msg, size_t len)
{
	struct cp_pull p = {.chunk = chunk,
			    .depth = (uint16_t)depth,
			    .flags = (uint16_t)flags,
			    .options = o->recursive ? CP_PULL_RECURSIVE : 0,
			    .lanes = (uint8_t)(o->lanes ? o->lanes : 1),
			    .nsrc = (uint16_t)o->nsrc,
			    .dest = leaf,
			    .dest_len = (uint16_t)strlen(leaf)};

	for (int i = 0; i < o->nsrc; i++) {
		size_t l = strlen(o->srcs[i]);

		if (l == 0 || l > CP_NAME_MAX) {
			fprintf(stderr, "rk copy: '%s': not a path on the server\n", o->srcs[i]);
			return -1;
		}
		p.src[i] = o->srcs[i];
		p.src_len[i] = (uint16_t)l;
	}
	if (cp_pull_encode(&p, msg, len) < 0) {
		fprintf(stderr, "rk copy: the sources do not fit one request (%d bytes at most)\n",
			CP_MSG_MAX);
		return -1;
	}
	return cp_pull_encode(&p, msg, len);
}

/*
 * What a later session may mend: the transport's doing, not a refusal (a
 * reject reason, or the server's ERROR: @refused) or a fault of ours.
 */
static int transport_loss(int r, const struct rk_error *e, int refused)
{
	if (r == -ECONNREFUSED)
		return !e->reject_reason && !refused;
	return r == -ETIMEDOUT || r == -ECONNRESET || r == -EIO || r == -EHOSTUNREACH ||
	       r == -ENETUNREACH || r == -ECONNABORTED || r == -ENOTCONN;
}

/* One session after another until the pull is through or the retry budget is spent. */
static int run(const struct cp_pull_opts *o, struct cp_server *srv, struct rk_cm_connect_opts *co,
	       const char *leaf, struct cp_recv_stats *total, unsigned *reconnects,
	       struct rk_error *e)
{
	struct cp_retry_opts ro = {
	    .retries = o->retries, .window_s = o->window_s, .retry_first = o->retry_first};
	struct cp_retry_state rs;
	uint32_t chunk = o->chunk;
	unsigned depth = o->depth, flags = o->flags, prior_ok = 0;
	uint8_t msg[CP_MSG_MAX];
	uint64_t moved = 0;

	memset(total, 0, sizeof(*total));
	cp_retry_begin(&rs, &ro, 0);
	for (;;) {
		struct cp_recv_stats st;
		char why[512];
		uint64_t wait;
		int n = encode(o, leaf, chunk, depth, flags, msg, sizeof(msg)), r;

		if (n < 0)
			return -EINVAL;
		rk_error_clear(e);
		r = cp_recv_pull(srv, co, msg, (size_t)n, flags, o->lanes ? o->lanes : 1, &st, e);
		/* A file finished in an earlier session is "up to date" in this one. */
		total->files += st.files;
		total->bytes += st.bytes;
		total->up_to_date =
		    st.up_to_date - (prior_ok < st.up_to_date ? prior_ok : st.up_to_date);
		total->failed = st.failed;
		total->dirs = st.dirs;
		total->refused = st.refused;
		prior_ok += st.files;
		/* Progress: data written, and files committed (each a new entry, never counted
		 * twice). */
		moved += st.moved + (uint64_t)st.files * CP_ENTRY_BYTES;
		*reconnects = rs.reconnects;
		/* Nobody listening at the first try is a wrong host or port: say so at once. */
		if (!r || !transport_loss(r, e, st.refused) ||
		    (!rs.reconnects && !st.established && r == -ECONNREFUSED))
			return r;
		/* No answer at all at the first connect: one deadline (copy_retry.c). */
		if (!rs.reconnects && !st.established && !ro.retry_first) {
			snprintf(why, sizeof(why), "%s", rk_error_str(e));
			cp_first_connect_note(why, sizeof(why));
			rk_error_setf(e, "rk copy", -r, "%s", why);
			return r;
		}
		snprintf(why, sizeof(why), "%s", rk_error_str(e));
		if (cp_retry_next(&rs, moved, st.established, &chunk, &depth, NULL, &wait, why,
				  sizeof(why))) {
			rk_error_setf(e, "rk copy", -r, "%s", why);
			return r;
		}
		cp_progress_clear(srv->progress);
		if (!o->quiet && !o->json)
			fprintf(
			    stderr,
			    "rk copy: %s; reconnecting in %.1f s (%u of %u, chunk %u KiB, depth "
			    "%u)\n",
			    why, (double)wait / 1000, rs.reconnects, ro.retries, chunk >> 10,
			    depth);
		cp_retry_sleep(wait);
		flags |= CP_F_RESUME;
		/* The next session counts everything again: up to date, resumed, sent. */
		cp_progress_restart(srv->progress, 0, 0, rs.reconnects);
	}
}

int cp_pull_run(const struct cp_pull_opts *o)
{
	struct rk_hello hello = {.app_id = CP_APP_ID, .app_arg = cp_pull_arg()};
	struct rk_cm_connect_opts co = {.host = o->host, .port = o->port, .hello = &hello};
	struct rk_device_opts d = {.gid_index = -1};
	struct cp_server srv = {0};
	struct cp_recv_stats st = {0};
	struct cp_progress prog;
	char root[PATH_MAX], leaf[256] = "";
	uint8_t msg[CP_MSG_MAX];
	struct rk_error e;
	unsigned reconnects = 0;
	uint64_t t0;
	int r, rc;

	if (o->nsrc < 1 || o->nsrc > CP_PULL_MAX_SRC) {
		fprintf(stderr, "rk copy: 1 to %d sources from a server at once\n",
			CP_PULL_MAX_SRC);
		return RK_EXIT_USAGE;
	}
	r = cp_dest_place(o->dest, root, sizeof(root), leaf, sizeof(leaf));
	if (r) {
		fprintf(stderr, "rk copy: %s: %s\n", o->dest,
			r < -1 ? strerror(-r) : "not a destination (name a file or directory)");
		return RK_EXIT_USAGE;
	}
	/* The request must fit before anything is opened. */
	if (encode(o, leaf, o->chunk, o->depth, o->flags | CP_F_RESUME, msg, sizeof(msg)) < 0)
		return RK_EXIT_USAGE;
	if (o->token) {
		hello.token_len = CP_TOKEN_LEN;
		memcpy(hello.token, o->token, CP_TOKEN_LEN);
	}
	srv.rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srv.rootfd < 0) {
		fprintf(stderr, "rk copy: %s: %s\n", root, strerror(errno));
		return RK_EXIT_FAILURE;
	}
	cli_device_opts(&d, o->dev, NULL, o->host);
	if (rk_device_open(&d, &e, &srv.dev)) {
		char why[RK_ERROR_MSG_MAX + 64];
		int code = cli_device_failed(&e, why, sizeof(why));

		fprintf(stderr, "rk copy: %s\n", why);
		close(srv.rootfd);
		return code;
	}
	/*
	 * The ring stays bounded; files, bytes and sizes are what we asked
	 * for, so we do not cap them (a server that sends more than its files
	 * fills DEST's file system as a copy of those files would).
	 */
	srv.max_file_size = UINT64_MAX;
	srv.max_bytes = UINT64_MAX;
	srv.max_files = UINT32_MAX - 1;
	srv.max_open = 16;
	srv.max_ring = 64u << 20;
	srv.idle_ms = o->idle_ms;
	srv.stop = &no_stop;
	srv.only_under = leaf[0] ? leaf : NULL;
	srv.who = "rk copy";
	srv.quiet = o->quiet || o->json;
	/* The total comes with the server's HELLO. */
	cp_progress_init(&prog, 0, 0, o->progress);
	srv.progress = &prog;
	r = cp_server_registry_init(&srv);
	if (r) {
		fprintf(stderr, "rk copy: %s\n", strerror(-r));
		rk_device_close(srv.dev);
		close(srv.rootfd);
		return RK_EXIT_FAILURE;
	}
	t0 = cli_now_ns();
	r = run(o, &srv, &co, leaf, &st, &reconnects, &e);
	cp_progress_end(&prog);
	if (r == 0)
		rc = st.failed ? RK_EXIT_FAILURE : RK_EXIT_OK;
	else if (r == -EINVAL)
		rc = RK_EXIT_USAGE;
	else if (r == -ECONNREFUSED && (e.reject_reason || st.refused))
		rc = RK_EXIT_REFUSED;
	else
		rc = RK_EXIT_LOST;
	if (r && !o->json)
		fprintf(stderr, "rk copy: %s%s\n", rk_error_str(&e),
			rc == RK_EXIT_LOST && st.files + st.failed ? " (run again with --resume)"
								   : "");
	report(o, &st, reconnects, (double)(cli_now_ns() - t0) / 1e9, rc,
	       r ? rk_error_str(&e) : NULL);
	cp_server_registry_fini(&srv);
	rk_device_close(srv.dev);
	close(srv.rootfd);
	return rc;
}
