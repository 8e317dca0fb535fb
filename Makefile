# SPDX-License-Identifier: MIT
#
# A thin front for meson: `make run`, `make check`, `make bench`, `make fuzz`,
# `make deb`, `make install-user`. meson.build is the truth; this file only
# installs what is missing (packaging/deps.sh, by purpose) and calls meson
# and ninja with the right build directories.

BUILD      ?= build
# The programs alone (no tests, no benchmarks): make run, make install-user.
RUN_BUILD  ?= build-run
DEB_DIR    ?= build-deb
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
MESON_OPTS ?=
FUZZ_SECONDS ?= 20

.PHONY: quickstart all deps deps-run build build-run run check check-plain check-asan bench fuzz valgrind interop install install-user deb clean

all: build

deps:
	@sh packaging/deps.sh build test

deps-run:
	@sh packaging/deps.sh build

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(RUN_BUILD)/build.ninja:
	meson setup $(RUN_BUILD) -Dtests=false -Dbench=false -Dfuzz=false $(MESON_OPTS)

build-run: deps-run $(RUN_BUILD)/build.ninja
	ninja -C $(RUN_BUILD)

run: build-run
	@sh packaging/run.sh $(RUN_BUILD)

# Per-user units and programs in ~/.local/bin, ~/.config/systemd/user.
install-user: build-run
	@sh packaging/install-user.sh $(RUN_BUILD)

# The Debian package, built in a temporary copy of the tree, into $(DEB_DIR).
deb:
	@sh packaging/deps.sh deb
	@sh packaging/deb.sh $(DEB_DIR)

check: check-plain check-asan
	@sh packaging/summary.sh $(BUILD) $(ASAN_BUILD)

check-plain: build
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 --no-suite quickstart

# The README's quick start from a fresh clone, timed (printed, not asserted).
quickstart: build
	meson test -C $(BUILD) --suite quickstart --verbose

# clang, not gcc: its UBSan also flags pointer arithmetic on NULL (NULL + 0),
# which gcc's lets pass.
$(ASAN_BUILD)/build.ninja:
	CC=clang meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false $(MESON_OPTS)

check-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2 --suite unit --suite integ

bench: build
	$(BUILD)/tests/bench/tc-bench $(BENCH_ARGS)

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dbench=false -Db_sanitize=address,undefined -Db_lundef=false

fuzz: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) build.ninja
	ninja -C $(FUZZ_BUILD) $$(ninja -C $(FUZZ_BUILD) -t targets all | sed -n 's|^\(tests/fuzz/fuzz_[a-z_]*\): .*|\1|p')
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

valgrind: build
	rm -rf $(BUILD)/valgrind && mkdir -p $(BUILD)/valgrind
	@status=0; CK_EXCLUDE_TAGS=timing CK_TIMEOUT_MULTIPLIER=10 TC_WAIT_SCALE=5 TC_UNDER_VALGRIND=1 meson test -C $(BUILD) --suite integ --no-suite load --timeout-multiplier 10 --print-errorlogs --num-processes 2 \
		--wrapper 'valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 --suppressions=$(CURDIR)/tests/valgrind.supp --trace-children=yes --trace-children-skip=/bin/*,/usr/bin/*,/usr/sbin/*,/usr/local/* --log-file=$(CURDIR)/$(BUILD)/valgrind/%p.log' \
		|| status=1; \
	if grep -qs 'unhandled amd64-linux syscall: 434' $(BUILD)/valgrind/*.log; then \
		echo "note: $$(valgrind --version) has no pidfd_open; toolcalld polls its children instead"; fi; \
	bad=$$(grep -l -E 'definitely lost: [1-9]|ERROR SUMMARY: [1-9]' $(BUILD)/valgrind/*.log); \
	if [ -n "$$bad" ]; then \
		for f in $$bad; do echo "$$f: $$(sed -n 's/^==[0-9]*== Command: //p' $$f | head -n 1)"; done; \
		echo "valgrind found errors or definite leaks: see the logs above (a test process that failed an assertion leaks what it held)"; exit 1; fi; \
	[ $$status -eq 0 ] || exit 1; \
	echo "valgrind: no errors, no definite leaks ($$(ls $(BUILD)/valgrind | wc -l) processes checked)"

interop: build
	sh tests/interop/run.sh $(BUILD)

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(RUN_BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(DEB_DIR)
