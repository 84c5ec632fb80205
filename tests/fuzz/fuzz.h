/* tests/fuzz/fuzz.h: what the libFuzzer harnesses share (fuzz.c).
 *
 * Every harness defines LLVMFuzzerTestOneInput and follows one contract:
 * any input may be refused, none may crash, trip ASan or UBSan, leak, or
 * break an invariant that the harness checks (FUZZ_CHECK aborts, so
 * libFuzzer keeps the input as a crash). kiln's layers print nothing on
 * bad input (problems go to Diags or rt_err), so the harnesses need no
 * stderr redirection, and a sanitizer report is never hidden. */
#ifndef KILN_FUZZ_H
#define KILN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* An invariant the code under test promises; a broken one aborts. */
#define FUZZ_CHECK(c) ((c) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #c))
_Noreturn void fuzz_fail(const char *file, int line, const char *what);

/* The readers under test take paths: the input is written to one memory
 * file (memfd, created on first use, reused), whose /proc/self/fd path is
 * returned. Every open of that path reads the file from its start. */
const char *fuzz_file(const uint8_t *data, size_t size);

/* The input as a NUL-terminated malloc'd string (a NUL inside ends it). */
char *fuzz_text(const uint8_t *data, size_t size);

/* FNV-1a of the input, for choices made per input (a pass to switch off,
 * an order of passes): deterministic, so a crash reproduces from its file. */
uint64_t fuzz_hash(const uint8_t *data, size_t size);

/* The .kir contract (ir/KIR.md) on a module m: its text parses back,
 * prints the same bytes, and (when lowered) gives the same C in both
 * flavours. The module read back lives in an arena freed before return. */
void fuzz_reparse(const Module *m);

#endif
