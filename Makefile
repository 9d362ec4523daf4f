# rdmakit - top-level entry points.  The build itself is CMake; this file only
# strings the steps together so that two commands do everything:
#
#   make demo    build, then run the main job over the best RDMA device available
#   make check   build, then run every test: unit on the host, rdma in the sandbox
#
# Other targets: build, unit, package, rdma, rdma2, asan, fuzz, fuzz-seeds, lint, format,
# install, deb, clean.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
DEB_BUILD  ?= build-deb
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
CMAKE_ARGS ?=
SOFTROCE   := scripts/softroce

.PHONY: all deps deps-build build demo check unit package rdma rdma2 asan fuzz fuzz-seeds lint format install deb clean

all: build

# What each target installs (README: "What is installed for what"): 'make
# build' and 'make demo' what building and running rk needs, and the demo the
# sandbox mode it will run in; the tests everything, the two-host sandbox too.
deps:
	@scripts/deps
	@$(SOFTROCE) deps --hosts 2

deps-build:
	@scripts/deps --build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DRK_WERROR=ON $(CMAKE_ARGS)

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$$(nproc)

unit: deps build
	ctest --test-dir $(BUILD) -L '^unit$$' --output-on-failure

# The Debian packages built, installed, used and purged (root only; skipped otherwise).
package: deps build
	ctest --test-dir $(BUILD) -L '^package$$' --output-on-failure

rdma: deps build
	$(SOFTROCE) run -- scripts/check-rdma $(BUILD) rdma

rdma2: deps build
	$(SOFTROCE) run --hosts 2 -- scripts/check-rdma $(BUILD) rdma2

check: unit package rdma rdma2

# ASan + UBSan build of everything, unit tests run on the host, rdma tests in
# the sandbox (not the valgrind ones: valgrind cannot run sanitized binaries).
asan: deps
	cmake -S . -B $(ASAN_BUILD) -DRK_WERROR=ON -DRK_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$$(nproc)
	ctest --test-dir $(ASAN_BUILD) -L '^unit$$' --output-on-failure
	$(SOFTROCE) run -- scripts/check-rdma $(ASAN_BUILD) rdma -E valgrind

# libFuzzer targets of fuzz/ (clang, ASan + UBSan) in a build dir of their own,
# each run for FUZZ_SECONDS from its committed seeds (FUZZ_TARGETS: a subset).
fuzz:
	@scripts/deps --fuzz
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DRK_FUZZ=ON -DRK_BUILD_TESTS=OFF \
		-DRK_BUILD_EXAMPLES=OFF $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) --target fuzz_all -j$$(nproc)
	scripts/fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Rewrite fuzz/seeds/NAME/ from each target's encoders (regression inputs stay).
fuzz-seeds: build
	for t in $$(ls fuzz/seeds); do $(BUILD)/fuzz/fuzz_$$t --seeds fuzz/seeds/$$t || exit 1; done

demo: build
	@$(SOFTROCE) deps
	$(SOFTROCE) run -- scripts/demo $(BUILD)

lint: build
	@scripts/deps --lint
	scripts/lint $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

install: build
	cmake --install $(BUILD)

# Debian packages (librdmakit0, librdmakit-dev, rdmakit-tools) in $(DEB_BUILD)/,
# built from the tracked files by dpkg-buildpackage, checked by lintian.
deb:
	@scripts/deps --deb
	scripts/build-deb $(DEB_BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(DEB_BUILD)
