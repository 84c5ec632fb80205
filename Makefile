# kiln: one Makefile, no configure.
# Several builds may share the tree: make B=build-x KILN=build-x/kiln
#   make           build ./kiln
#   make test      every test (unit, golden, end-to-end)
#   make golden    the golden pass tests; UPDATE=fuse/case rewrites one's expectation
#   make demo      the main job on the shipped examples
#   make deps      install the Debian packages kiln needs (as root)
#   make bench     time every example and the linear kernels vs OpenBLAS
#   make deps-bench  install OpenBLAS, which only the benchmark uses (as root)
CC ?= cc
B := build
KILN := kiln
WARN := -Wall -Wextra
ifeq ($(WERROR),1)
WARN += -Werror
endif
CFLAGS ?= -O2 -g
KILN_CFLAGS := -std=c11 -I. $(WARN) -fopenmp -D_XOPEN_SOURCE=700 -MMD -MP
LDLIBS := -ljansson -ltcc -ldl -lm

SRCS := $(sort $(wildcard ir/*.c frontend/*.c passes/*.c codegen/*.c runtime/*.c))
RT_SRCS := $(sort $(wildcard runtime/*.c))
OBJS := $(SRCS:%.c=$(B)/%.o) $(B)/rt_text.o
TEST_SRCS := $(sort $(wildcard tests/unit/test_*.c))
TESTS := $(TEST_SRCS:tests/unit/%.c=$(B)/tests/%)

all: $(KILN)

# The command line: main.c, and bench.c for `kiln bench` and `kiln machine`.
CLI_OBJS := $(B)/main.o $(B)/bench.o

$(KILN): $(CLI_OBJS) $(OBJS)
	$(CC) $(CFLAGS) -fopenmp -o $@ $^ $(LDLIBS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -c -o $@ $<

# The runtime as C text for generated programs: the header, then every
# runtime/*.c without its include of the header.
RT_QUOTE = sed -e '/^\#include "kiln_rt.h"/d' -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/'
$(B)/rt_text.c: runtime/kiln_rt.h $(RT_SRCS) Makefile
	@mkdir -p $(B)
	{ echo '/* generated from runtime/ by the Makefile */'; \
	  echo 'const char cg_rt_header[] ='; $(RT_QUOTE) runtime/kiln_rt.h; echo ';'; \
	  echo 'const char cg_rt_body[] ='; for f in $(RT_SRCS); do $(RT_QUOTE) $$f; done; echo ';'; } > $@.tmp
	mv $@.tmp $@

$(B)/tests/%: tests/unit/%.c $(B)/tests/testlib.o $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -o $@ $(filter %.c %.o,$^) -lcmocka $(LDLIBS)

$(B)/tests/testlib.o: tests/unit/testlib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -I. -c -o $@ $<

# ---- set-up -------------------------------------------------------------
DEB_PKGS := libjansson-dev libtcc-dev tcc libcmocka-dev
DEB_FILES := /usr/include/jansson.h /usr/include/libtcc.h /usr/include/cmocka.h \
	/usr/lib/x86_64-linux-gnu/tcc/libtcc1.a
deps:
	@missing=0; for f in $(DEB_FILES); do [ -e $$f ] || missing=1; done; \
	if [ $$missing = 0 ]; then echo "deps: all present ($(DEB_PKGS))"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps: missing packages; run as root: apt-get install $(DEB_PKGS)" >&2; exit 1; fi; \
	echo "deps: installing $(DEB_PKGS)" >&2; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEB_PKGS) >&2

# `make demo` and `make test` install what is missing first.
need-deps:
	@for f in $(DEB_FILES); do [ -e $$f ] || { $(MAKE) --no-print-directory deps; break; }; done

demo: need-deps
	@$(MAKE) --no-print-directory $(KILN)
	@sh examples/demo.sh

test: need-deps
	@$(MAKE) --no-print-directory $(KILN) $(TESTS)
	@sh tests/run.sh $(TESTS)

# Golden pass tests (tests/passes/PASS/CASE.kir, run by tests/golden.sh):
# `make golden UPDATE=lower/mlp` (or UPDATE=lower) rewrites expectations.
golden: $(KILN)
	@KILN=$(KILN) sh tests/golden.sh $(if $(UPDATE),-u $(UPDATE))

.PHONY: golden

clean:
	rm -rf $(B) kiln

# ---- benchmarks (never part of `make test`: tests do not depend on speed) --
# Every example, then kiln's linear kernels beside OpenBLAS, on 2 threads.
bench: $(KILN)
	@mkdir -p $(B)
	./$(KILN) bench --threads 2 --json $(B)/bench.json

deps-bench:
	@if dpkg -s libopenblas-dev >/dev/null 2>&1; then echo "deps-bench: libopenblas-dev present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps-bench: run as root: apt-get install libopenblas-dev" >&2; exit 1; fi; \
	echo "deps-bench: installing libopenblas-dev" >&2; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev >&2

.PHONY: all deps need-deps demo test clean bench deps-bench
-include $(shell find $(B) -name '*.d' 2>/dev/null)
