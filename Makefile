# Thin wrapper over CMake. `make demo` and `make test` are all a newcomer needs.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
FUZZ_BUILD  ?= build-fuzz
CROSS_BUILD ?= build-aarch64
TSAN_BUILD  ?= build-tsan
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 300
PREFIX      ?= /usr/local
DESTDIR     ?=
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DHETMEM_WERROR=ON
endif

.PHONY: all deps build test test-sanitize test-tsan demo bench fuzz cross-aarch64 clean install uninstall

all: build

deps:
	@./scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The C tests once more under AddressSanitizer and UBSan.
test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DHETMEM_SANITIZE=address,undefined $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE 'nosan'

# ThreadSanitizer on the threaded code that tests can reach: the estimator's
# worker threads (unit_test_estimate) and pshuffle's progress thread (4
# ranks, --thread). Only those: the other tests are single-threaded, and
# at TSan's speed some outrun their timeouts or CPU-time bounds. The
# preload's collector is not covered: a TSan runtime cannot be loaded into
# the uninstrumented programs the preload is injected into.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DHETMEM_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --test-dir $(TSAN_BUILD) --output-on-failure -R '^(unit_test_estimate|pshuffle_mpi_invariants_thread_4)$$'

# Installs into $(DESTDIR)$(PREFIX); the prefix may be moved afterwards.
# The list of installed files is $(BUILD)/install_manifest.txt, the list of
# folders the install created $(BUILD)/install_dirs.txt.
install: build
	DESTDIR="$(DESTDIR)" ./scripts/install.sh $(BUILD) "$(PREFIX)"

# Removes what the last `make install` from this build installed (its
# manifest) and the byte-code Python wrote beside it, then the folders that
# it created or that are hetmem's own, once empty. Fails when the prefix was
# moved away.
uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "uninstall: $(BUILD)/install_manifest.txt: nothing was installed from this build" >&2; exit 1; }
	@DESTDIR="$(DESTDIR)" ./scripts/uninstall.sh $(BUILD)/install_manifest.txt $(BUILD)/install_dirs.txt

demo: build
	@./scripts/demo.sh $(BUILD)

bench: build
	@./bench/run-all.sh $(BUILD)

# libFuzzer on every target in tests/fuzz, FUZZ_SECONDS each.
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHETMEM_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	./tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Compiles and links the whole tree for 64-bit Arm with Debian's cross gcc
# and arm64 -dev packages (installed here on first use); runs nothing.
cross-aarch64:
	@./scripts/deps.sh scripts/packages-aarch64.txt
	cmake -S . -B $(CROSS_BUILD) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON $(CMAKE_FLAGS)
	cmake --build $(CROSS_BUILD) -j $(JOBS)
	@for f in bin/hetmem lib/libhetmem.so lib/libhetmem_preload.so; do \
	  readelf -h $(CROSS_BUILD)/$$f | grep -q 'Machine: *AArch64' || { echo "cross-aarch64: $$f: not an AArch64 ELF" >&2; exit 1; }; \
	done
	@echo "cross-aarch64: built for AArch64 in $(CROSS_BUILD)"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(CROSS_BUILD) $(TSAN_BUILD)
