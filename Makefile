# SPDX-License-Identifier: MIT
#
# A thin front for meson: `make run`, `make check`, `make bench`, `make fuzz`.
# meson.build is the truth; this file only installs what is missing and
# calls meson and ninja with the right build directories.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
MESON_OPTS ?=
FUZZ_SECONDS ?= 20

.PHONY: all deps build run check check-plain check-asan bench fuzz valgrind install clean

all: build

deps:
	@sh packaging/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

run: build
	@sh packaging/run.sh $(BUILD)

check: check-plain check-asan

check-plain: build
	meson test -C $(BUILD) --print-errorlogs --num-processes 2

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false $(MESON_OPTS)

check-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2 --suite unit --suite integ

bench: build
	$(BUILD)/tests/bench/tc-bench

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dbench=false -Db_sanitize=address,undefined -Db_lundef=false

fuzz: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

valgrind: build
	meson test -C $(BUILD) --suite integ --wrapper 'valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 --trace-children=no' \
		--timeout-multiplier 10 --print-errorlogs

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
