# kiln: one Makefile, no configure.
# Several builds may share the tree: make B=build-x KILN=build-x/kiln
#   make           build ./kiln
#   make test      every test (unit, golden, end-to-end)
#   make golden    the golden pass tests; UPDATE=fuse/case rewrites one's expectation
#   make demo      the main job on the shipped examples
#   make tools     build/tests/mkckpt and refgen: checkpoints and tokenizers to try
#   make deps      install the Debian packages kiln needs (as root)
#   make bench     time every example and the linear kernels vs OpenBLAS
#   make deps-bench  install OpenBLAS, which only the benchmark uses (as root)
#   make test-asan every test again under ASan and UBSan, then kiln under valgrind
#   make deps-asan   install valgrind, which only test-asan uses (as root)
#   make fuzz      build the libFuzzer harnesses and run each FUZZ_SECONDS (60)
#   make deps-fuzz   install clang 14 and its libFuzzer runtime (as root)
CC ?= cc
B := build
FUZZ_B := build-fuzz
KILN := kiln
WARN := -Wall -Wextra
ifeq ($(WERROR),1)
WARN += -Werror
endif
CFLAGS ?= -O2 -g
KILN_CFLAGS := -std=c11 -I. $(WARN) -fopenmp -D_XOPEN_SOURCE=700 -MMD -MP
LDLIBS := -ljansson -ltcc -lnettle -lmicrohttpd -lpthread -ldl -lm

# The MPI part (runtime/mpi/) is not kiln's: only programs of several
# ranks link it (with Open MPI); kiln compiles it alone, as a check.
SRCS := $(sort $(wildcard ir/*.c frontend/*.c passes/*.c codegen/*.c \
	$(filter-out runtime/mpi/%,$(wildcard runtime/*/*.c))))
RT_SRCS := $(sort $(wildcard runtime/*/*.c runtime/*.h runtime/*/*.h))
OBJS := $(SRCS:%.c=$(B)/%.o) $(B)/rt_text.o
TEST_SRCS := $(sort $(wildcard tests/unit/test_*.c))
TESTS := $(TEST_SRCS:tests/unit/%.c=$(B)/tests/%)

all: $(KILN)

# The command line (cli/) and `kiln bench` / `kiln machine` (bench/): the
# top of the layers, in kiln alone (the unit tests link what they test).
CLI_OBJS := $(patsubst %.c,$(B)/%.o,$(sort $(wildcard cli/*.c bench/*.c)))
BENCH_OBJS := $(filter $(B)/bench/%,$(CLI_OBJS))

$(KILN): $(CLI_OBJS) $(OBJS) $(B)/runtime/mpi/rt_mpi.o
	$(CC) $(CFLAGS) -fopenmp -o $@ $(CLI_OBJS) $(OBJS) $(LDLIBS)

$(B)/runtime/mpi/rt_mpi.o: runtime/mpi/rt_mpi.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) $$(mpicc --showme:compile) -c -o $@ $<

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -c -o $@ $<

# The micro-kernels JIT code calls are built as generated programs are
# (runtime/core/rt_kernels.c): vectorised for this CPU, multiply-adds fused.
# The JIT's vector programs (runtime/jit/rt_vec.c) pick AVX-512, AVX2 or
# SSE2 loops at load (target_clones), so kiln runs under valgrind, which
# has no AVX-512; tuned for this CPU.
$(B)/runtime/core/rt_kernels.o: KILN_CFLAGS += -O3 -march=native -ffp-contract=fast
$(B)/runtime/attn/rt_attn.o: KILN_CFLAGS += -O3 -march=native -ffp-contract=fast
$(B)/runtime/pairs/rt_amx.o: KILN_CFLAGS += -O3 -march=native
$(B)/runtime/pairs/rt_bf16dp.o: KILN_CFLAGS += -O3 -march=native
$(B)/runtime/jit/rt_vec.o: KILN_CFLAGS += -O3 -mtune=native -fno-math-errno
# The quantized gemm kernels pick AVX-512 VNNI, AVX2 or C where they are
# compiled (runtime/quant/rt_gemm_q.c): for this CPU, as generated programs.
# -g0: with debug information gcc takes minutes over their inlined bodies
# (3.5 min of CPU against 38 s without, here).
$(B)/runtime/quant/rt_gemm_q.o: KILN_CFLAGS += -O3 -march=native -g0
# Its AMX path likewise (runtime/quant/rt_gemm_q_amx.c: AMX tiles or none).
$(B)/runtime/quant/rt_gemm_q_amx.o: KILN_CFLAGS += -O3 -march=native -g0
# FP8's kernel likewise (runtime/quant/rt_gemm_f8.c: AVX-512 or C).
$(B)/runtime/quant/rt_gemm_f8.o: KILN_CFLAGS += -O3 -march=native -g0

# The runtime's parts as C text for generated programs (cg_rt_parts,
# codegen/codegen.h): per part its public header, and its body (its
# internal headers, then its .c files), each without its local includes;
# and the core's internal header alone (cg_rt_core_h), which the other
# parts' bodies use: the core's body has it once in a pasted file.
# The JIT part has a header only: kiln holds its code.
RT_QUOTE = sed -e '/^\#include "/d' -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/'
RT_PART_core := runtime/kiln_rt.h | runtime/core/rt_core.h $(sort $(wildcard runtime/core/*.c))
RT_PART_attn := runtime/rt_attn.h | $(sort $(wildcard runtime/attn/*.c))
RT_PART_gguf := runtime/rt_gguf.h | $(sort $(wildcard runtime/gguf/*.c))
RT_PART_gen := runtime/rt_gen.h | runtime/gen/rt_tok.h \
	$(sort $(wildcard runtime/gen/*.c))
RT_PART_quant := runtime/rt_quant.h | runtime/quant/rt_qk.h \
	$(sort $(wildcard runtime/quant/*.c))
RT_PART_jit := runtime/rt_jit.h |
RT_PART_serve := runtime/rt_serve.h | runtime/rt_gen.h runtime/gen/rt_tok.h \
	runtime/serve/rt_srv.h $(sort $(wildcard runtime/serve/*.c))
RT_PART_mpi := runtime/rt_mpi.h | $(sort $(wildcard runtime/mpi/*.c))
RT_PART_pairs := runtime/rt_pairs.h | $(sort $(wildcard runtime/pairs/*.c))
RT_PARTS := core gguf attn gen quant jit serve mpi pairs
$(B)/rt_text.c $(FUZZ_B)/obj/rt_text.c: $(RT_SRCS) Makefile
	@mkdir -p $(@D)
	@{ echo '/* generated from runtime/ by the Makefile */'; \
	  echo '#include "codegen/codegen.h"'; \
	  echo 'const CgRtPart cg_rt_parts[CG_RT_NPARTS] = {'; \
	  $(foreach p,$(RT_PARTS),echo '{"$(p)",'; \
	    $(RT_QUOTE) $(firstword $(RT_PART_$(p))); echo ','; \
	    for f in $(wordlist 3,999,$(RT_PART_$(p))); do $(RT_QUOTE) $$f; done; echo '""},';) \
	  echo '};'; echo 'const char cg_rt_core_h[] ='; $(RT_QUOTE) runtime/core/rt_core.h; echo ';'; } > $@.tmp
	mv $@.tmp $@

$(B)/rt_text.o: $(B)/rt_text.c
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -c -o $@ $<

$(B)/tests/%: tests/unit/%.c $(B)/tests/testlib.o $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -o $@ $< $(filter %.o,$^) -lcmocka $(LDLIBS)

# test_gemm_q again against rt_gemm_q.c built for AVX2 and for plain
# x86-64 (its portable C), beside the -march=native build kiln holds.
QG_PATHS := avx2 c
QG_FLAGS_avx2 := -O3 -mavx2 -mfma -mno-avx512f -g0
QG_FLAGS_c := -O3 -g0
QG_TESTS := $(QG_PATHS:%=$(B)/tests/test_gemm_q_%)
TESTS += $(QG_TESTS)

$(QG_PATHS:%=$(B)/tests/rt_gemm_q_%.o): $(B)/tests/rt_gemm_q_%.o: runtime/quant/rt_gemm_q.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) $(QG_FLAGS_$*) -c -o $@ $<

$(QG_TESTS): $(B)/tests/test_gemm_q_%: tests/unit/test_gemm_q.c $(B)/tests/rt_gemm_q_%.o \
	  $(B)/tests/testlib.o $(OBJS)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -o $@ $< \
	  $(filter-out $(B)/runtime/quant/rt_gemm_q.o,$(filter %.o,$^)) -lcmocka $(LDLIBS)

# test_fp8 again against rt_gemm_f8.c built for plain x86-64 (its
# portable C), beside the -march=native build kiln holds.
$(B)/tests/rt_gemm_f8_c.o: runtime/quant/rt_gemm_f8.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -O3 -g0 -c -o $@ $<

TESTS += $(B)/tests/test_fp8_c
$(B)/tests/test_fp8_c: tests/unit/test_fp8.c $(B)/tests/rt_gemm_f8_c.o $(B)/tests/testlib.o $(OBJS)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -o $@ $< \
	  $(filter-out $(B)/runtime/quant/rt_gemm_f8.o,$(filter %.o,$^)) -lcmocka $(LDLIBS)

$(B)/tests/testlib.o: tests/unit/testlib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -I. -c -o $@ $<

# The import tests' checkpoints (tests/import/): ckpt.c makes them and
# runs their hand-written forward passes, ckpt_files.c writes them (and
# ckpt_stream.c, tensor by tensor, those too big to hold; ckpt_gguf.c as
# llama.cpp's converter makes a GGUF of them, with gguf_write.c); mkckpt
# is their command line, for tests/import.sh and for big checkpoints on
# demand.
CKPT_OBJS := $(B)/tests/ckpt.o $(B)/tests/ckpt_files.o $(B)/tests/ckpt_stream.o \
	$(B)/tests/ckpt_gguf.o $(B)/tests/gguf_write.o
$(filter-out $(B)/tests/gguf_write.o,$(CKPT_OBJS)): $(B)/tests/%.o: tests/import/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -c -o $@ $<

# What the importers' unit tests share (tests/unit/import_run.c).
$(B)/tests/import_run.o: tests/unit/import_run.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -I. -c -o $@ $<

$(B)/tests/test_import $(B)/tests/test_import_gguf $(B)/tests/test_distribute: $(CKPT_OBJS) \
	$(B)/tests/import_run.o

# GGUF files for the tests (tests/import/gguf_write.c), from the format's
# specification.
$(B)/tests/gguf_write.o: tests/import/gguf_write.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -c -o $@ $<

$(B)/tests/test_gguf: $(B)/tests/gguf_write.o
$(B)/tests/test_bench: $(BENCH_OBJS)

# Hugging Face tokenizer.json files (tests/gen/hftok.c), for the tokenizer
# tests and mkckpt's folders.
$(B)/tests/hftok.o: tests/gen/hftok.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -c -o $@ $<

$(B)/tests/test_tokenizer: $(B)/tests/hftok.o
$(B)/tests/test_tok_gguf: $(B)/tests/hftok.o $(B)/tests/gguf_write.o

$(B)/tests/mkckpt: tests/import/mkckpt.c $(CKPT_OBJS) $(B)/tests/hftok.o $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -o $@ $< $(filter %.o,$^) $(LDLIBS)

# Greedy generation through the reference interpreter, for tests/generate.sh.
$(B)/tests/refgen: tests/gen/refgen.c $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KILN_CFLAGS) -o $@ $< $(filter %.o,$^) $(LDLIBS)

# A pseudo-terminal driver, for tests/chat.sh.
$(B)/tests/ptyrun: tests/gen/ptyrun.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# The checkpoint and tokenizer writers alone, to try kiln on their files
# (README "Generating text").
tools: $(B)/tests/mkckpt $(B)/tests/refgen
.PHONY: tools

# A stories110M-shaped llama2.c checkpoint (440 MB, random weights)
# imported, built and run: on demand, never part of `make test`.
test-import-big: $(KILN) $(B)/tests/mkckpt
	@KILN=$(abspath $(KILN)) MKCKPT=$(abspath $(B)/tests/mkckpt) sh tests/import.sh --big

# ---- set-up -------------------------------------------------------------
# qemu-user: tests/target.sh runs --target builds on CPU models without AVX-512.
# pkgconf: tests/cli.sh links a --lib build through its NAME.pc.
# libmicrohttpd-dev: the HTTP server of PROG serve (runtime/serve/).
# Open MPI (libopenmpi-dev, openmpi-bin): mpicc and mpirun for programs built
# with --ranks N > 1 and their tests; one-rank programs never use it.
# curl, python3: tests/serve.sh's client and its JSON; iproute2: mpi-netns.sh.
DEB_PKGS := libjansson-dev libtcc-dev tcc libcmocka-dev nettle-dev qemu-user pkgconf \
	libmicrohttpd-dev libopenmpi-dev openmpi-bin curl python3 iproute2
DEB_FILES := /usr/include/jansson.h /usr/include/libtcc.h /usr/include/cmocka.h \
	/usr/include/nettle/sha2.h /usr/bin/qemu-x86_64 /usr/bin/pkg-config /usr/include/microhttpd.h \
	/usr/bin/mpicc /usr/bin/mpirun /usr/bin/curl /usr/bin/python3 /usr/sbin/ip \
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
	@$(MAKE) --no-print-directory $(KILN) $(B)/tests/mkckpt
	@MKCKPT=$(B)/tests/mkckpt sh examples/demo.sh

test: need-deps
	@$(MAKE) --no-print-directory $(KILN) $(TESTS) $(B)/tests/mkckpt $(B)/tests/refgen \
	  $(B)/tests/ptyrun
	@KILN=$(abspath $(KILN)) MKCKPT=$(abspath $(B)/tests/mkckpt) REFGEN=$(abspath $(B)/tests/refgen) \
	  PTYRUN=$(abspath $(B)/tests/ptyrun) sh tests/run.sh $(TESTS)

# Golden pass tests (tests/passes/PASS/CASE.kir, run by tests/golden.sh):
# `make golden UPDATE=lower/mlp` (or UPDATE=lower) rewrites expectations.
golden: $(KILN)
	@KILN=$(KILN) sh tests/golden.sh $(if $(UPDATE),-u $(UPDATE))

.PHONY: golden

# ---- sanitizers ------------------------------------------------------------
# `make test-asan`: tests/run.sh, as `make test` runs it, with kiln and the
# unit tests built with ASan and UBSan in $(ASAN_B), and every executable
# kiln builds too (KILN_CFLAGS_EXTRA, which cg_build_exe appends). A report
# exits 99, which no test expects; malloc may return NULL (kiln checks)
# rather than abort on a huge request. Then tests/valgrind.sh on ./kiln.
ASAN_B := build-asan
SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_TESTS := $(TEST_SRCS:tests/unit/%.c=$(ASAN_B)/tests/%)
ASAN_ENV := KILN=$(CURDIR)/$(ASAN_B)/kiln MKCKPT=$(CURDIR)/$(ASAN_B)/tests/mkckpt \
	KILN_CFLAGS_EXTRA='$(SANITIZE)' \
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:detect_stack_use_after_return=1:strict_string_checks=1:exitcode=99 \
	UBSAN_OPTIONS=print_stacktrace=1:exitcode=99

test-asan: need-deps deps-asan
	@$(MAKE) --no-print-directory B=$(ASAN_B) KILN=$(ASAN_B)/kiln CFLAGS='-O1 -g $(SANITIZE)' \
		$(ASAN_B)/kiln $(ASAN_TESTS) $(ASAN_B)/tests/mkckpt
	@$(ASAN_ENV) sh tests/run.sh $(ASAN_TESTS)
	@$(MAKE) --no-print-directory $(KILN)
	@KILN=$(abspath $(KILN)) sh tests/valgrind.sh

deps-asan:
	@if command -v valgrind >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps-asan: run as root: apt-get install valgrind" >&2; exit 1; fi; \
	echo "deps-asan: installing valgrind" >&2; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >&2

.PHONY: test-asan deps-asan test-import-big

clean:
	rm -rf $(B) kiln build-asan build-fuzz

# ---- install: kiln alone (its runtime is inside it) and its docs -----------
# make install [PREFIX=/usr/local] [DESTDIR=staging root]; INSTALL_BIN is
# the binary installed (tests/cli.sh passes the one under test).
PREFIX ?= /usr/local
INSTALL_BIN ?= $(KILN)
install: $(KILN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/doc/kiln
	install -m 755 $(INSTALL_BIN) $(DESTDIR)$(PREFIX)/bin/kiln
	install -m 644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/kiln

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/kiln
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/kiln

# ---- benchmarks (never part of `make test`: tests do not depend on speed) --
# Every example, then kiln's linear kernels beside OpenBLAS, on 2 threads.
bench: $(KILN) $(B)/tests/mkckpt
	@mkdir -p $(B)
	./$(KILN) bench --threads 2 --json $(B)/bench.json
	@$(MAKE) --no-print-directory bench-tokens

# A stories110M-shaped decoder (the test tools' llama2.c checkpoint, random
# weights) in every weight type, as llama-bench -p 256 -n 64 -r 3 -t 2 times
# its own: build/bench-tokens-TYPE.json each; then a Qwen2-0.5B-shaped
# folder (mkckpt --shape qwen2-0.5b) in f32 and bf16:
# build/bench-tokens-qwen2-TYPE.json.
BENCH_TYPES := f32 bf16 q8_0 q4_0 q4_k_m
bench-tokens: $(KILN) $(B)/tests/mkckpt
	@mkdir -p $(B)/bench-s110
	@[ -f $(B)/bench-s110/s110.safetensors ] || { $(B)/tests/mkckpt llama2c $(B)/bench-s110/s110.bin \
	  --shape stories110M >/dev/null && ./$(KILN) import llama2c $(B)/bench-s110/s110.bin \
	  -o $(B)/bench-s110/s110.json --weights-out $(B)/bench-s110/s110.safetensors --max-seq 512; }
	@for t in $(BENCH_TYPES); do \
	  ./$(KILN) bench $(B)/bench-s110/s110.json --weights $(B)/bench-s110/s110.safetensors \
	    --weight-dtype $$t -p 256 -n 64 -r 3 --threads 2 --json $(B)/bench-tokens-$$t.json || exit 1; \
	done
	@[ -f $(B)/bench-q05/model.safetensors ] || $(B)/tests/mkckpt hf qwen2 $(B)/bench-q05 \
	  --shape qwen2-0.5b >/dev/null
	@for t in f32 bf16; do \
	  ./$(KILN) bench $(B)/bench-q05 --weight-dtype $$t -p 256 -n 64 -r 3 --threads 2 \
	    --json $(B)/bench-tokens-qwen2-$$t.json || exit 1; \
	done

deps-bench:
	@if dpkg -s libopenblas-dev >/dev/null 2>&1; then echo "deps-bench: libopenblas-dev present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps-bench: run as root: apt-get install libopenblas-dev" >&2; exit 1; fi; \
	echo "deps-bench: installing libopenblas-dev" >&2; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev >&2

# ---- fuzzing (tests/fuzz/README.md; never part of `make test`) -------------
# libFuzzer harnesses, clang 14 with ASan and UBSan, built in $(FUZZ_B):
# kiln's sources with coverage into one archive, a harness per reader.
FUZZ_CC := clang-14
FUZZ_SECONDS := 60
FUZZERS := model safetensors npy kir tokenizer hf image quant gguf chat serve
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) -std=c11 -I. $(WARN) -D_XOPEN_SOURCE=700
FUZZ_OBJS := $(SRCS:%.c=$(FUZZ_B)/obj/%.o) $(FUZZ_B)/obj/rt_text.o
FUZZ_BINS := $(FUZZERS:%=$(FUZZ_B)/fuzz_%)

fuzz: need-deps
	@command -v $(FUZZ_CC) >/dev/null || { echo "fuzz: no $(FUZZ_CC); run make deps-fuzz (as root)" >&2; exit 1; }
	@$(MAKE) --no-print-directory $(FUZZ_BINS)
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_B) $(FUZZERS)

$(FUZZ_B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_B)/obj/rt_text.o: $(FUZZ_B)/obj/rt_text.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_B)/libkiln.a: $(FUZZ_OBJS)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_B)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.c tests/fuzz/fuzz.h $(FUZZ_B)/libkiln.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(LDLIBS)

deps-fuzz:
	@if dpkg -s clang-14 libclang-rt-14-dev >/dev/null 2>&1; then echo "deps-fuzz: clang-14 and libclang-rt-14-dev present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps-fuzz: run as root: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 1; fi; \
	echo "deps-fuzz: installing clang-14 libclang-rt-14-dev" >&2; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 libclang-rt-14-dev >&2

.PHONY: all deps need-deps demo test clean install uninstall bench bench-tokens deps-bench fuzz deps-fuzz
-include $(shell find $(B) -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_B)/obj -name '*.d' 2>/dev/null)
