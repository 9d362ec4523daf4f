# rdmakit - top-level entry points.  The build itself is CMake; this file only
# strings the steps together so that two commands do everything:
#
#   make demo    build, then run the main job over the best RDMA device available
#   make check   build, then run every test: unit on the host, rdma in the sandbox
#
# Other targets: build, unit, rdma, rdma2, asan, lint, format, install, clean.

BUILD      ?= build
ASAN_BUILD ?= build-asan
CMAKE_ARGS ?=
SOFTROCE   := scripts/softroce

.PHONY: all deps build demo check unit rdma rdma2 asan lint format install clean

all: build

deps:
	@scripts/deps
	@$(SOFTROCE) deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DRK_WERROR=ON $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$$(nproc)

unit: build
	ctest --test-dir $(BUILD) -L '^unit$$' --output-on-failure

rdma: build
	$(SOFTROCE) run -- scripts/check-rdma $(BUILD) rdma

rdma2: build
	$(SOFTROCE) run --hosts 2 -- scripts/check-rdma $(BUILD) rdma2

check: unit rdma rdma2

# ASan + UBSan build of everything, unit tests run on the host, rdma tests in
# the sandbox (not the valgrind ones: valgrind cannot run sanitized binaries).
asan: deps
	cmake -S . -B $(ASAN_BUILD) -DRK_WERROR=ON -DRK_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$$(nproc)
	ctest --test-dir $(ASAN_BUILD) -L '^unit$$' --output-on-failure
	$(SOFTROCE) run -- scripts/check-rdma $(ASAN_BUILD) rdma -E valgrind

demo: build
	$(SOFTROCE) run -- scripts/demo $(BUILD)

lint: build
	@scripts/deps --lint
	scripts/lint $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
