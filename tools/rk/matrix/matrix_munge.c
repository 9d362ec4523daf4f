/* matrix_munge.c - libmunge opened at run time; see matrix_munge.h. */
#ifdef RK_HAVE_MUNGE /* else no munge.h: rk matrix takes --token-file only */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "matrix_munge.h"

#define LIBMUNGE "libmunge.so.2"

static struct mx_munge calls;
static const struct mx_munge *loaded;
static char load_error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dlsym's object pointer as a function pointer (POSIX guarantees it converts). */
#define RESOLVE(h, field, name) (*(void **)&calls.field = dlsym(h, name)) != NULL

static void load(void)
{
	void *h = dlopen(LIBMUNGE, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(load_error, sizeof(load_error),
			 "MUNGE: %s cannot be loaded (Debian: apt install libmunge2): %s", LIBMUNGE,
			 dlerror());
		return;
	}
	if (!(RESOLVE(h, ctx_create, "munge_ctx_create") &&
	      RESOLVE(h, ctx_destroy, "munge_ctx_destroy") &&
	      RESOLVE(h, ctx_strerror, "munge_ctx_strerror") &&
	      RESOLVE(h, ctx_set, "munge_ctx_set") && RESOLVE(h, encode, "munge_encode") &&
	      RESOLVE(h, decode, "munge_decode"))) {
		snprintf(load_error, sizeof(load_error), "MUNGE: %s lacks a call: %s", LIBMUNGE,
			 dlerror());
		dlclose(h);
		return;
	}
	loaded = &calls; /* h stays open for the process's life */
}

const struct mx_munge *mx_munge(char *why, size_t why_len)
{
	pthread_once(&once, load);
	if (!loaded)
		snprintf(why, why_len, "%s", load_error);
	return loaded;
}
#endif
