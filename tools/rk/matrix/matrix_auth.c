/* matrix_auth.c - a rank's proof that it belongs to the job; see matrix_auth.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#ifdef RK_HAVE_MUNGE
#include "matrix_munge.h"
#endif

#include "cli.h"
#include "matrix_auth.h"

/* The secret: the file's bytes less trailing blanks and newlines ("echo" adds one). */
static int read_token(struct mx_auth *a, const char *path, char *why, size_t why_len)
{
	uint8_t buf[MX_TOKEN_MAX + 2];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, why_len, "--token-file %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 0077)) {
		snprintf(why, why_len,
			 "--token-file %s: not a regular file that only its owner may read "
			 "(chmod 600 it)",
			 path);
		close(fd);
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t'))
		n--;
	if (n < (ssize_t)MX_TOKEN_MIN || n > (ssize_t)MX_TOKEN_MAX) {
		snprintf(why, why_len, "--token-file %s: expected a secret of %u to %u bytes", path,
			 MX_TOKEN_MIN, MX_TOKEN_MAX);
		memset(buf, 0, sizeof(buf));
		return -1;
	}
	memcpy(a->token, buf, (size_t)n);
	a->token_len = (uint32_t)n;
	memset(buf, 0, sizeof(buf));
	return 0;
}

int mx_auth_setup(struct mx_auth *a, const struct mx_opts *o, const struct mx_launch *la, char *why,
		  size_t why_len)
{
	const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
	int slurm = la->source && !strcmp(la->source, "Slurm");

	memset(a, 0, sizeof(*a));
	a->munge_socket = o->munge_socket;
	if (o->no_auth && o->token_path) {
		snprintf(why, why_len, "--no-auth and --token-file: choose one");
		return -1;
	}
	if (o->no_auth) {
		a->kind = MX_AUTH_NONE;
		return 0;
	}
	if (o->token_path) {
		a->kind = MX_AUTH_TOKEN;
		return read_token(a, o->token_path, why, why_len);
	}
#ifdef RK_HAVE_MUNGE
	if (slurm && job && *job && step && *step) {
		if (!mx_munge(why, why_len))
			return -1; /* says what to install; --token-file works without it */
		a->kind = MX_AUTH_MUNGE;
		snprintf(a->job, sizeof(a->job), "%s", job);
		snprintf(a->step, sizeof(a->step), "%s", step);
		return 0;
	}
	snprintf(why, why_len,
		 "no way to authenticate the ranks: give every rank --token-file FILE (the "
		 "same secret of 16 to 256 bytes, chmod 600), or start them with srun "
		 "(MUNGE, %s), or say --no-auth on a network you trust",
		 slurm ? "but SLURM_JOB_ID or SLURM_STEP_ID is not set" : "Slurm's own");
#else
	(void)job;
	(void)step;
	snprintf(why, why_len,
		 "no way to authenticate the ranks: give every rank --token-file FILE (the "
		 "same secret of 16 to 256 bytes, chmod 600), or say --no-auth on a network you "
		 "trust%s",
		 slurm ? " (this rk was built without libmunge: Slurm's MUNGE is not used)" : "");
#endif
	return -1;
}

void mx_auth_clear(struct mx_auth *a)
{
	/* volatile: the compiler may not drop a store nobody reads after. */
	volatile uint8_t *p = a->token;

	for (size_t i = 0; i < sizeof(a->token); i++)
		p[i] = 0;
	a->token_len = 0;
}

void mx_auth_payload(char *out, size_t len, const char *job, const char *step, uint32_t rank,
		     uint32_t size, uint64_t digest)
{
	snprintf(out, len, "rk-matrix %u job=%s step=%s rank=%u size=%u params=%016llx", MX_PROTO,
		 job, step, rank, size, (unsigned long long)digest);
}

uint64_t mx_params_digest(json_object *params)
{
	size_t len = 0;
	const char *t;

	if (!params)
		return 0;
	t = json_object_to_json_string_length(params, JSON_C_TO_STRING_PLAIN, &len);
	return t ? XXH3_64bits(t, len) : 0;
}

#ifdef RK_HAVE_MUNGE
/* A context on --munge-socket (or munged's default), with libmunge's calls in *@m. */
static munge_ctx_t munge_ctx(const struct mx_auth *a, const struct mx_munge **m, char *why,
			     size_t why_len)
{
	munge_ctx_t ctx;

	*m = mx_munge(why, why_len);
	if (!*m)
		return NULL;
	ctx = (*m)->ctx_create();
	if (!ctx) {
		snprintf(why, why_len, "MUNGE: out of memory");
		return NULL;
	}
	if (a->munge_socket &&
	    (*m)->ctx_set(ctx, MUNGE_OPT_SOCKET, a->munge_socket) != EMUNGE_SUCCESS) {
		snprintf(why, why_len, "MUNGE: socket %s: %s", a->munge_socket,
			 (*m)->ctx_strerror(ctx));
		(*m)->ctx_destroy(ctx);
		return NULL;
	}
	return ctx;
}
#endif

int mx_auth_prove(const struct mx_auth *a, json_object *hello, uint32_t rank, uint32_t size,
		  json_object *params, char *why, size_t why_len)
{
	json_object_object_add(hello, "auth", json_object_new_string(mx_auth_name(a->kind)));
	if (a->kind == MX_AUTH_TOKEN) {
		char hex[2 * MX_TOKEN_MAX + 1];

		cli_hex(a->token, a->token_len, hex);
		json_object_object_add(hello, "token", json_object_new_string(hex));
		memset(hex, 0, sizeof(hex));
		return 0;
	}
#ifdef RK_HAVE_MUNGE
	if (a->kind == MX_AUTH_MUNGE) {
		char payload[256], *cred = NULL;
		const struct mx_munge *m;
		munge_ctx_t ctx = munge_ctx(a, &m, why, why_len);
		munge_err_t e;

		if (!ctx)
			return -1;
		mx_auth_payload(payload, sizeof(payload), a->job, a->step, rank, size,
				mx_params_digest(params));
		e = m->encode(&cred, ctx, payload, (int)strlen(payload));
		if (e != EMUNGE_SUCCESS) {
			snprintf(why, why_len, "MUNGE: cannot make a credential: %s",
				 m->ctx_strerror(ctx));
			m->ctx_destroy(ctx);
			free(cred);
			return -1;
		}
		m->ctx_destroy(ctx);
		json_object_object_add(hello, "cred", json_object_new_string(cred));
		free(cred);
		return 0;
	}
#else
	(void)rank;
	(void)size;
	(void)params;
	(void)why;
	(void)why_len;
#endif
	return 0;
}

#ifdef RK_HAVE_MUNGE
static int check_munge(const struct mx_auth *a, const struct mx_hello *h, char *why, size_t why_len)
{
	char want[256], got[256];
	void *buf = NULL;
	int blen = 0, r = -1;
	uid_t uid;
	gid_t gid;
	const struct mx_munge *m;
	munge_ctx_t ctx = munge_ctx(a, &m, why, why_len);
	munge_err_t e;

	if (!ctx)
		return -1;
	e = m->decode(h->cred, ctx, &buf, &blen, &uid, &gid);
	if (e != EMUNGE_SUCCESS) {
		/* Its text names a replay, an expired or a forged credential. */
		snprintf(why, why_len, "MUNGE: %s", m->ctx_strerror(ctx));
	} else if (uid != geteuid()) {
		snprintf(why, why_len, "MUNGE: a credential of uid %u, rank 0 runs as uid %u",
			 (unsigned)uid, (unsigned)geteuid());
	} else {
		mx_auth_payload(want, sizeof(want), a->job, a->step, h->rank, h->size,
				mx_params_digest(h->params));
		cli_clean_text(got, sizeof(got), buf ? buf : "",
			       buf && blen > 0 ? (size_t)blen : 0);
		if (!buf || blen != (int)strlen(want) || memcmp(buf, want, (size_t)blen))
			snprintf(why, why_len, "MUNGE: a credential for \"%s\", expected \"%s\"",
				 got, want);
		else
			r = 0;
	}
	free(buf);
	m->ctx_destroy(ctx);
	return r;
}
#endif

int mx_auth_check(const struct mx_auth *a, const struct mx_hello *h, char *why, size_t why_len)
{
	if (h->auth != a->kind) {
		snprintf(why, why_len, "a proof of kind %s, rank 0 wants %s", mx_auth_name(h->auth),
			 mx_auth_name(a->kind));
		return -1;
	}
	switch (a->kind) {
	case MX_AUTH_NONE:
		return 0;
	case MX_AUTH_TOKEN:
		/* Constant time; the length is no secret worth a timing channel of its own. */
		if (h->token_len == a->token_len && cli_equal_ct(h->token, a->token, a->token_len))
			return 0;
		snprintf(why, why_len, "a wrong token");
		return -1;
	case MX_AUTH_MUNGE:
#ifdef RK_HAVE_MUNGE
		return check_munge(a, h, why, why_len);
#endif
		break;
	}
	snprintf(why, why_len, "no proof this rk can check");
	return -1;
}
