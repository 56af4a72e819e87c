# airlock - see README.md. `make` builds ./airlock, `make check` runs every
# test through prove, `make SAN=1 check` does the same under ASan+UBSan.

VERSION := 0.2.0
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
LINT_JOBS ?= 2
PKGS := openssl jansson libcares libseccomp sqlite3 libpq libnftables zlib libbrotlidec libzstd libnghttp2

WERROR ?= -Werror
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wvla -Wswitch-enum $(WERROR)
HARDEN := -fPIE -fstack-protector-strong -D_FORTIFY_SOURCE=3
CFLAGS ?= -O2 -g
# pkg-config runs when a recipe needs it (`=`, not `:=`): on a fresh
# machine the -dev packages are installed by the `deps` prerequisite,
# after make has read this file.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -DAIRLOCK_VERSION='"$(VERSION)"' $(WARN) $(CFLAGS) \
	-MMD -MP $(PKG_CFLAGS) \
	$(HARDEN) $(SAN_CFLAGS)
# libpq and libnftables are loaded with dlopen() when a PostgreSQL
# ledger or transparent mode is used (src/dynlib.c): not linked, so that
# every start and fork does not map them and their 20 dependencies.
DLOPEN_PKGS := libpq libnftables
LDLIBS = $(shell pkg-config --libs $(filter-out $(DLOPEN_PKGS),$(PKGS)) 2>/dev/null)
ALL_LDFLAGS := -pie -Wl,-z,relro,-z,now $(LDFLAGS)

ifeq ($(SAN),1)
BUILD := build/san
HARDEN := -fPIE -fstack-protector-strong
SAN_CFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
ALL_LDFLAGS += -fsanitize=address,undefined
BIN := $(BUILD)/airlock
else
BUILD := build/release
BIN := airlock
endif

SRC := $(wildcard src/*.c)
# The sandbox's seccomp filter, compiled at build time (src/gen/mkseccomp.c).
GEN_FILTER := build/gen/sandbox_filter.c
LIB_OBJ := $(patsubst src/%.c,$(BUILD)/src/%.o,$(filter-out src/main.c,$(SRC))) \
	$(BUILD)/gen/sandbox_filter.o
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%.t,$(UNIT_SRC))
INTEGRATION := $(sort $(wildcard tests/integration/*.t))
HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER_BIN := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(HELPER_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,tests/fuzz/bin/%,$(FUZZ_SRC))

.PHONY: all deps fuzz-deps check unit integration lint fuzz install demo bench deb e2e clean

all: $(BIN)

# Installs the Debian packages the build needs when one is missing; quick
# and silent when everything is there.
# `make demo` asks for the demo's packages here too (DEPS_FOR, a
# target-specific variable its prerequisites inherit), so that a fresh
# machine is told everything it misses at once.
deps:
	@scripts/install-deps --build $(DEPS_FOR)

$(BUILD)/src/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# A libseccomp program run at build time prints the BPF the sandbox loads.
build/gen/mkseccomp: src/gen/mkseccomp.c | deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< \
		$(shell pkg-config --libs libseccomp 2>/dev/null)

$(GEN_FILTER): build/gen/mkseccomp
	$< > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/sandbox_filter.o: $(GEN_FILTER)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c -o $@ $<

$(BUILD)/tests/unit/%.o: tests/unit/%.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c -o $@ $<

$(BIN): $(BUILD)/src/main.o $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/unit/%.t: $(BUILD)/tests/unit/%.o $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

# The decoder's tests make their input with the encoders (brotli's is a
# library of its own; zlib and libzstd hold both directions).
$(BUILD)/tests/unit/test_decode.t tests/fuzz/bin/fuzz_decode: \
	LDLIBS += $(shell pkg-config --libs libbrotlienc 2>/dev/null)

# Small programs the integration tests run inside the sandbox.
$(BUILD)/tests/helpers/%: tests/helpers/%.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $<

# Test helpers that drive airlock's modules directly link their objects:
# ghmint (the GitHub App mint of ghapp.c against the stand-in API),
# spend_tool (ledger.c and meter.c for the spend tests and bench/spend),
# transparent-parts (dnsstub.c and transparent.c for
# tests/integration/75-transparent-parts.t), tlog_tool (the receipt writer and
# the key holder for tests/integration/21-tlog.t and its benchmark).
HELPER_LINKED := $(BUILD)/tests/helpers/ghmint $(BUILD)/tests/helpers/spend_tool \
	$(BUILD)/tests/helpers/transparent-parts $(BUILD)/tests/helpers/tlog_tool
$(HELPER_LINKED): $(BUILD)/tests/helpers/%: tests/helpers/%.c $(LIB_OBJ) | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc $(ALL_LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

# Every test speaks TAP; prove runs the compiled unit tests and the
# integration scripts, each in a network namespace of its own
# (tests/netns-exec).
# build/test-bin comes first in the tests' PATH: its python3 is the
# system's /usr/bin/python3 (with the Debian modules the tests use), not a
# version manager's shim that a developer's PATH may put first (a pyenv
# shim costs about ten times the interpreter's own start, and the tests
# start python3 thousands of times).
TEST_BIN := build/test-bin
TEST_ENV = PATH=$(CURDIR)/$(TEST_BIN):$$PATH AIRLOCK=$(abspath $(BIN)) AIRLOCK_SRC=$(CURDIR) \
	AIRLOCK_HELPERS=$(abspath $(BUILD)/tests/helpers)

$(TEST_BIN)/python3:
	@mkdir -p $(dir $@)
	@if [ -x /usr/bin/python3 ]; then ln -sf /usr/bin/python3 $@; \
	else ln -sf "$$(command -v python3)" $@; fi

# The files run in parallel (TEST_JOBS at once; each is in a network
# namespace of its own, so they cannot see each other's servers), the
# slowest first so that the run ends with the short ones (by the times
# kept in $(BUILD)/test-times/ from earlier runs, else tests/test-estimates).
# tests/tap-timer times every file and every test point; the report of
# the run is $(BUILD)/test-times.txt (build/test-times.txt for the plain
# build).
# tests/make-fixtures first makes what several files share (a PostgreSQL
# data directory), once. TESTS=... runs only those files.
TEST_JOBS ?= 6
TEST_TIMES := $(if $(filter 1,$(SAN)),$(BUILD),build)/test-times.txt
TESTS ?= $(UNIT_BIN) $(INTEGRATION)
SLOW_FIRST = $(shell tests/order-tests $(BUILD)/test-times $(TESTS))
RUN_TESTS = @rm -rf $(BUILD)/test-times.new && mkdir -p $(BUILD)/test-times.new && \
	s=$$(date +%s%N); \
	tests/make-fixtures $(CURDIR)/build/test-fixtures && \
	$(TEST_ENV) AIRLOCK_TEST_TIMES=$(CURDIR)/$(BUILD)/test-times.new \
		AIRLOCK_TEST_FIXTURES=$(CURDIR)/build/test-fixtures \
		prove -j$(TEST_JOBS) --timer --exec $(CURDIR)/tests/tap-timer $(1); st=$$?; \
	e=$$(date +%s%N); \
	tests/times-summary $(BUILD)/test-times.new $(TEST_TIMES) $$(( (e - s) / 1000000 )) $(TEST_JOBS); \
	mkdir -p $(BUILD)/test-times && mv -f $(BUILD)/test-times.new/* $(BUILD)/test-times/ 2>/dev/null; \
	rm -rf $(BUILD)/test-times.new; \
	exit $$st

check: $(BIN) $(UNIT_BIN) $(HELPER_BIN) $(TEST_BIN)/python3
	@scripts/install-deps --test
	$(call RUN_TESTS,$(SLOW_FIRST))

unit: $(UNIT_BIN) $(TEST_BIN)/python3
	$(call RUN_TESTS,$(UNIT_BIN))

integration: $(BIN) $(HELPER_BIN) $(TEST_BIN)/python3
	$(call RUN_TESTS,$(INTEGRATION))

lint: | deps
	@scripts/install-deps --lint
	# the layering of docs/ARCHITECTURE.md: no value, decider or filter
	# depends on the proxy core, no cycle across floors
	scripts/include-graph --check
	cppcheck -j$(LINT_JOBS) --quiet --error-exitcode=1 --enable=warning,style,performance,portability \
		--inline-suppr --std=c11 -D_GNU_SOURCE --include=.cppcheck-defs.h \
		-I src src tests/unit tests/fuzz
	printf '%s\n' $(SRC) | xargs -P$(LINT_JOBS) -n4 sh -c 'exec clang-tidy --quiet "$$@" -- \
		-std=c11 -D_GNU_SOURCE -Isrc $(shell pkg-config --cflags $(PKGS) 2>/dev/null)' sh

# libFuzzer targets link airlock's modules, compiled once for all of them
# with the fuzzer's coverage and the sanitizers (build/fuzz/); each runs
# FUZZ_SECONDS on a copy of its committed corpus (the committed files are
# never changed).
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=address,undefined
FUZZ_OBJ := $(patsubst src/%.c,build/fuzz/src/%.o,$(filter-out src/main.c,$(SRC))) \
	build/fuzz/gen/sandbox_filter.o
fuzz-deps: deps
	@scripts/install-deps --fuzz
build/fuzz/src/%.o: src/%.c | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP $(PKG_CFLAGS) -c -o $@ $<
build/fuzz/gen/sandbox_filter.o: $(GEN_FILTER) | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -Isrc -c -o $@ $<
tests/fuzz/bin/%: tests/fuzz/%.c $(FUZZ_OBJ) | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) \
		-Isrc -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

fuzz: $(FUZZ_BIN)
	@set -e; for f in $(FUZZ_BIN); do \
		name=$$(basename $$f); work=build/fuzz-corpus/$$name; \
		rm -rf $$work; mkdir -p $$work; \
		cp tests/fuzz/corpus/$$name/* $$work/ 2>/dev/null || true; \
		echo "== $$name ($(FUZZ_SECONDS) s)"; \
		tests/netns-exec $$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=1 $$work tests/fuzz/corpus/$$name; \
	done

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/doc/airlock/examples
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/airlock
	install -m 0644 man/airlock.1 $(DESTDIR)$(PREFIX)/share/man/man1/airlock.1
	install -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/airlock/
	@# docs/ and examples/ as the tree has them: README's links work there
	find docs examples -path examples/invalid -prune -o -type f \
		\( -name '*.md' -o -name '*.png' -o -name '*.json' \) \
		-exec install -D -m 0644 {} $(DESTDIR)$(PREFIX)/share/doc/airlock/{} \;

# The Debian package (scripts/mkdeb): binary, man page, docs, examples and
# a systemd unit for `airlock proxy`, in build/.
deb: $(BIN)
	@scripts/install-deps --deb
	@scripts/mkdeb $(BIN) $(VERSION) build

# The demo needs only a few packages beyond the build's (install-deps
# --demo); DEMO_KEEP=1 keeps its receipts (scripts/demo says where).
demo: DEPS_FOR = --demo
demo: $(BIN) $(TEST_BIN)/python3
	@scripts/install-deps --demo
	@PATH=$(CURDIR)/$(TEST_BIN):$$PATH AIRLOCK=$(abspath $(BIN)) scripts/demo

# The end-to-end test (tests/e2e/run, docs/E2E.md): a real coding agent
# under `airlock run --enforce`. The first run installs the agent from the
# npm registry into a cache outside the repository ($$AIRLOCK_E2E_CACHE,
# default ~/.cache/airlock-e2e); later runs use the cache. First, the
# platform's own credential flow with stock curl and git (no download):
# its control plane's /scm-credentials and /provider-auth/... answers
# captured, git push with the captured token (docs/E2E.md).
E2E_CAPTURE := tests/integration/67-secret-capture-git.t
e2e: $(BIN) $(HELPER_BIN) $(TEST_BIN)/python3
	@scripts/install-deps --test
	$(TEST_ENV) prove -v --exec $(CURDIR)/tests/tap-timer $(E2E_CAPTURE)
	@command -v npm >/dev/null 2>&1 || scripts/install-deps --e2e
	PATH=$(CURDIR)/$(TEST_BIN):$$PATH AIRLOCK=$(abspath $(BIN)) AIRLOCK_SRC=$(CURDIR) prove -v --exec bash tests/e2e/run

bench: $(BIN)
	@AIRLOCK=$(abspath $(BIN)) bench/all

clean:
	rm -rf build airlock tests/fuzz/bin

# Objects made on the way to a test or a fuzz target are kept (make would
# delete them as intermediate files and build them again the next time).
.SECONDARY: $(FUZZ_OBJ) $(UNIT_BIN:.t=.o)

-include $(shell find build -name '*.d' 2>/dev/null)
