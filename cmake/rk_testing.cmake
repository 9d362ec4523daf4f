# Test helpers, usable from any directory (tests/, examples/, tools/).
#
# Test labels:
#   unit   runs on the host, no RDMA device (cmocka)
#   rdma   needs an RDMA device: run inside scripts/softroce (make check does)
#   rdma2  needs two hosts: run inside scripts/softroce run --hosts 2
#   package  builds, installs and purges the Debian packages (root; make check runs it)
# Tests find the device and addresses in RK_DEV / RK_ADDR / RK_PEER_ADDR.
#
# The rdma label runs as many tests at once as the sandbox guest has CPUs
# (scripts/check-rdma; two): each test listens on ports of its own, tests
# that share ports hold a RESOURCE_LOCK, and tests that change the machine
# (a device down, a second device) are RUN_SERIAL. COST starts the longest
# first, so the two slots end together.
enable_testing()
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

# rk_unit_test(NAME SOURCES...) - a cmocka test linked with librdmakit.
function(rk_unit_test name)
	add_executable(${name} ${ARGN})
	target_link_libraries(${name} PRIVATE rdmakit_static PkgConfig::CMOCKA PkgConfig::XXHASH)
	target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/lib)
	add_test(NAME ${name} COMMAND ${name})
	set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 60)
endfunction()

# rk_rdma_test(NAME LABEL TIMEOUT COMMAND...) - a test that needs a device.
function(rk_rdma_test name label timeout)
	add_test(NAME ${name} COMMAND ${ARGN})
	set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT ${timeout}
		ENVIRONMENT "RK_BUILD=${PROJECT_BINARY_DIR};RK_SOURCE=${PROJECT_SOURCE_DIR}")
endfunction()

