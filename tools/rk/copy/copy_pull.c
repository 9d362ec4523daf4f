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
#include "copy_proto.h"
#include "copy_pull.h"
#include "copy_recv.h"
#include "copy_token.h"

/* Never set: Ctrl-C ends the process, and the temporaries stay for --resume. */
static atomic_int no_stop;

/* DEST as a root directory to open and the prefix names must keep to. */
static int place(const char *dest, char *root, size_t root_len, char *leaf, size_t leaf_len)
{
	size_t n = strlen(dest);
	struct stat st;
	const char *slash;

	if (n == 0 || n >= root_len)
		return -1;
	if (dest[n - 1] == '/' || (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))) {
		if (mkdir(dest, 0755) && errno != EEXIST)
			return -errno;
		snprintf(root, root_len, "%s", dest);
		leaf[0] = '\0';
		return 0;
	}
	slash = strrchr(dest, '/');
	if (slash) {
		snprintf(root, root_len, "%.*s", (int)(slash - dest + 1), dest);
		slash++;
	} else {
		snprintf(root, root_len, ".");
		slash = dest;
	}
	if (strlen(slash) >= leaf_len || !strcmp(slash, ".") || !strcmp(slash, ".."))
		return -1;
	snprintf(leaf, leaf_len, "%s", slash);
	return 0;
}

static void report(const struct cp_pull_opts *o, const struct cp_recv_stats *st, double secs,
		   int rc, const char *fatal)
{
	char bytes[32], rate[32];
	double bps = secs > 0 ? (double)st->bytes * 8 / secs : 0;

	if (o->json) {
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
		json_object_object_add(j, "exit_code", json_object_new_int(rc));
		if (fatal)
			json_object_object_add(j, "error", json_object_new_string(fatal));
		printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
		json_object_put(j);
		return;
	}
	if (o->quiet)
		return;
	printf("rk copy: %u files received%s%s (%s) in %.2f s, %s, verified xxh3-128%s\n",
	       st->files + st->up_to_date, st->up_to_date ? " or up to date" : "",
	       st->failed ? ", some FAILED" : "", cli_fmt_bytes(st->bytes, bytes, sizeof(bytes)),
	       secs, cli_fmt_rate(bps, rate, sizeof(rate)), rc ? "; FAILED" : "");
}

int cp_pull_run(const struct cp_pull_opts *o)
{
	struct cp_pull p = {.chunk = o->chunk,
			    .depth = (uint16_t)o->depth,
			    .flags = (uint16_t)o->flags,
			    .options = o->recursive ? CP_PULL_RECURSIVE : 0,
			    .nsrc = (uint16_t)o->nsrc};
	struct rk_hello hello = {.app_id = CP_APP_ID, .app_arg = cp_pull_arg()};
	struct rk_cm_connect_opts co = {.host = o->host, .port = o->port, .hello = &hello};
	struct rk_device_opts d = {.gid_index = -1};
	struct cp_server srv = {0};
	struct cp_recv_stats st = {0};
	char root[PATH_MAX], leaf[256];
	uint8_t msg[CP_MSG_MAX];
	struct rk_error e;
	uint64_t t0;
	int n, r, rc;

	if (o->nsrc < 1 || o->nsrc > CP_PULL_MAX_SRC) {
		fprintf(stderr, "rk copy: 1 to %d sources from a server at once\n",
			CP_PULL_MAX_SRC);
		return RK_EXIT_USAGE;
	}
	r = place(o->dest, root, sizeof(root), leaf, sizeof(leaf));
	if (r) {
		fprintf(stderr, "rk copy: %s: %s\n", o->dest,
			r < -1 ? strerror(-r) : "not a destination (name a file or directory)");
		return RK_EXIT_USAGE;
	}
	p.dest = leaf;
	p.dest_len = (uint16_t)strlen(leaf);
	for (int i = 0; i < o->nsrc; i++) {
		size_t l = strlen(o->srcs[i]);

		if (l == 0 || l > CP_NAME_MAX) {
			fprintf(stderr, "rk copy: '%s': not a path on the server\n", o->srcs[i]);
			return RK_EXIT_USAGE;
		}
		p.src[i] = o->srcs[i];
		p.src_len[i] = (uint16_t)l;
	}
	n = cp_pull_encode(&p, msg, sizeof(msg));
	if (n < 0) {
		fprintf(stderr, "rk copy: the sources do not fit one request (%d bytes at most)\n",
			CP_MSG_MAX);
		return RK_EXIT_USAGE;
	}
	if (o->token) {
		hello.token_len = CP_TOKEN_LEN;
		memcpy(hello.token, o->token, CP_TOKEN_LEN);
	}
	srv.rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srv.rootfd < 0) {
		fprintf(stderr, "rk copy: %s: %s\n", root, strerror(errno));
		return RK_EXIT_FAILURE;
	}
	d.name = o->dev ? o->dev : getenv("RK_DEV");
	d.peer = d.name ? NULL : o->host;
	if (rk_device_open(&d, &e, &srv.dev)) {
		fprintf(stderr, "rk copy: %s\n", rk_error_str(&e));
		close(srv.rootfd);
		return RK_EXIT_LOST;
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
	r = cp_server_registry_init(&srv);
	if (r) {
		fprintf(stderr, "rk copy: %s\n", strerror(-r));
		rk_device_close(srv.dev);
		close(srv.rootfd);
		return RK_EXIT_FAILURE;
	}
	t0 = cli_now_ns();
	rk_error_clear(&e);
	r = cp_recv_pull(&srv, &co, msg, (size_t)n, o->flags, &st, &e);
	if (r == 0)
		rc = st.failed ? RK_EXIT_FAILURE : RK_EXIT_OK;
	else if (r == -ECONNREFUSED && (e.reject_reason || !strncmp(e.msg, "refused", 7)))
		rc = RK_EXIT_REFUSED;
	else
		rc = RK_EXIT_LOST;
	if (r && !o->json)
		fprintf(stderr, "rk copy: %s%s\n", rk_error_str(&e),
			rc == RK_EXIT_LOST && st.files + st.failed ? " (run again with --resume)"
								   : "");
	report(o, &st, (double)(cli_now_ns() - t0) / 1e9, rc, r ? rk_error_str(&e) : NULL);
	cp_server_registry_fini(&srv);
	rk_device_close(srv.dev);
	close(srv.rootfd);
	return rc;
}
