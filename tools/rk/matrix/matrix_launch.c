/* matrix_launch.c - rank, size and rendezvous from the launcher; see matrix_launch.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix_launch.h"
#include "matrix_sched.h"

/* A decimal number below @max, the whole string. */
static int parse_num(const char *s, uint32_t max, uint32_t *out)
{
	unsigned long v = 0;

	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return -1;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > max)
			return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int mx_hostlist_first(const char *list, char *out, size_t len)
{
	size_t n = 0;
	const char *p = list;

	/* The prefix: up to ',' or '['. */
	while (*p && *p != ',' && *p != '[') {
		if (n + 1 >= len || isspace((unsigned char)*p))
			return -1;
		out[n++] = *p++;
	}
	if (*p == '[') {
		/* The first number of the range keeps its zero padding. */
		p++;
		if (!isdigit((unsigned char)*p))
			return -1;
		while (isdigit((unsigned char)*p)) {
			if (n + 1 >= len)
				return -1;
			out[n++] = *p++;
		}
		if (!strchr(p, ']'))
			return -1;
	}
	out[n] = 0;
	return n ? 0 : -1;
}

struct source {
	const char *name, *rank, *size;
};

static const struct source sources[] = {
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI", "PMI_RANK", "PMI_SIZE"},
};

int mx_launch_rendezvous(struct mx_launch *l, mx_getenv_fn get, const char *rdv, char *why,
			 size_t why_len)
{
	static const char *lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"};
	const char *v = rdv ? rdv : get("RK_MATRIX_ADDR");

	if (v && *v) {
		if (strlen(v) >= sizeof(l->rdv_host)) {
			snprintf(why, why_len, "the rendezvous address is too long");
			return -1;
		}
		snprintf(l->rdv_host, sizeof(l->rdv_host), "%s", v);
		return 0;
	}
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		v = get(lists[i]);
		if (!v || !*v)
			continue;
		if (mx_hostlist_first(v, l->rdv_host, sizeof(l->rdv_host))) {
			snprintf(why, why_len, "%s=%.80s: not a host list", lists[i], v);
			return -1;
		}
		return 0;
	}
	snprintf(why, why_len,
		 "no rendezvous address for rank 0: looked for --rendezvous, RK_MATRIX_ADDR, "
		 "SLURM_STEP_NODELIST and SLURM_JOB_NODELIST");
	return -1;
}

int mx_launch_env(struct mx_launch *l, mx_getenv_fn get, const char *rdv, char *why, size_t why_len)
{
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
		const struct source *s = &sources[i];
		const char *rv = get(s->rank), *sv = get(s->size);

		if (!rv && !sv)
			continue;
		if (parse_num(sv, MX_MAX_RANKS, &l->size) || l->size < 1 ||
		    parse_num(rv, l->size - 1, &l->rank)) {
			snprintf(why, why_len,
				 "%s=%.20s %s=%.20s: expected a rank below a size of 1 to %u",
				 s->rank, rv ? rv : "(unset)", s->size, sv ? sv : "(unset)",
				 MX_MAX_RANKS);
			return -1;
		}
		l->source = s->name;
		return mx_launch_rendezvous(l, get, rdv, why, why_len);
	}
	snprintf(why, why_len,
		 "not started by a launcher: none of SLURM_PROCID / SLURM_NTASKS (srun), "
		 "OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (mpirun), PMI_RANK / PMI_SIZE is "
		 "set; run it under srun or mpirun");
	return -1;
}

static const char *real_getenv(const char *name)
{
	return getenv(name);
}

const struct mx_launch_mpi *mx_launch_mpi;

int mx_launch_start(struct mx_launch *l, int *argc, char ***argv, const char *rdv, char *why,
		    size_t why_len)
{
	if (mx_launch_mpi && mx_launch_mpi->launched())
		return mx_launch_mpi->start(l, argc, argv, rdv, why, why_len);
	return mx_launch_env(l, real_getenv, rdv, why, why_len);
}

void mx_launch_end(struct mx_launch *l)
{
	if (l->mpi && mx_launch_mpi)
		mx_launch_mpi->end();
	l->mpi = 0;
}
