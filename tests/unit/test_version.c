/* test_version.c - the library reports the version CMake built it with. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include <rdmakit/version.h>

static void version_is_semver(void **state)
{
	const char *v = rk_version();
	int dots = 0;

	assert_non_null(v);
	for (const char *p = v; *p; p++)
		dots += *p == '.';
	assert_int_equal(dots, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(version_is_semver),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
