# Thin wrapper over CMake. `make demo` and `make test` are all a newcomer needs.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
FUZZ_BUILD  ?= build-fuzz
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 300
PREFIX      ?= /usr/local
DESTDIR     ?=
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DHETMEM_WERROR=ON
endif

.PHONY: all deps build test test-sanitize demo bench fuzz clean install uninstall

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

# Installs into $(DESTDIR)$(PREFIX); the prefix may be moved afterwards.
# The list of installed files is $(BUILD)/install_manifest.txt.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# Removes what the last `make install` from this build installed (its
# manifest), then the folders that it left empty.
uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "uninstall: $(BUILD)/install_manifest.txt: nothing was installed from this build" >&2; exit 1; }
	@DESTDIR="$(DESTDIR)" ./scripts/uninstall.sh $(BUILD)/install_manifest.txt

demo: build
	@./scripts/demo.sh $(BUILD)

bench: build
	@./bench/run-all.sh $(BUILD)

# libFuzzer on every target in tests/fuzz, FUZZ_SECONDS each.
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHETMEM_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	./tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
