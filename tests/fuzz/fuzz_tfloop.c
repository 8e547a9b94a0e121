/* tests/fuzz/fuzz_tfloop.c — fuzz harness for the loop IR listing
 * (ir/loop_parse.c) and the loop passes that read what it builds.
 *
 * Any input must either be rejected with at least one diagnostic and no
 * program, or be accepted as a program that prints to text that parses
 * back and prints identically: print(parse(print(p))) == print(p). An
 * accepted program that also verifies must still verify after lane-split
 * and share-kernels, and running them again must change nothing (both are
 * idempotent). The verifier itself must answer (true, or false with a
 * message) for anything the parser accepts. A violated invariant aborts,
 * which the replay driver and libFuzzer report as a crash. Inputs with a
 * NUL byte are skipped (source files are text). */
#include "ir/loop.h"
#include "passes/passes.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what, const char *detail) {
  if (!ok) {
    fprintf(stderr, "fuzz_tfloop: invariant violated: %s\n%s\n", what, detail ? detail : "");
    abort();
  }
}

static char *print_program(const LoopProgram *p) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  check(f != NULL, "open_memstream", NULL);
  loop_program_print(p, f);
  fclose(f);
  return s;
}

static LoopProgram *parse(Arena *a, const char *name, const char *text, Diags *d) {
  diags_init(d, a, NULL);
  return loop_program_parse(a, src_file_from_string(a, name, text), d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (memchr(data, 0, size))
    return 0;
  char *text = malloc(size + 1);
  check(text != NULL, "out of memory", NULL);
  memcpy(text, data, size);
  text[size] = 0;

  Arena *a = arena_create();
  Diags d;
  LoopProgram *p = parse(a, "fuzz.tfloop", text, &d);
  if (!p) {
    check(d.n_errors > 0 && d.captured && d.captured_len > 0, "parse failed without a diagnostic",
          text);
  } else {
    check(d.n_errors == 0, "parse returned a program and reported errors", d.captured);
    char *t1 = print_program(p);
    Diags d2;
    LoopProgram *p2 = parse(a, "printed.tfloop", t1, &d2);
    if (!p2) {
      fprintf(stderr, "printed text:\n%s\n", t1);
      check(0, "printed program does not parse back", d2.captured);
    }
    char *t2 = print_program(p2);
    if (strcmp(t1, t2) != 0) {
      fprintf(stderr, "first print:\n%s\nsecond print:\n%s\n", t1, t2);
      check(0, "print(parse(print(p))) != print(p)", NULL);
    }
    char err[512] = "";
    if (loop_program_verify(p, err, sizeof err)) {
      Diags dp;
      diags_init(&dp, a, NULL);
      PassContext ctx = {.diags = &dp};
      check(pass_lane_split_run(p, &ctx) && pass_share_kernels_run(p, &ctx), "a pass failed",
            dp.captured);
      check(loop_program_verify(p, err, sizeof err), "the passes broke a verified program", err);
      char *t3 = print_program(p);
      check(pass_lane_split_run(p, &ctx) && pass_share_kernels_run(p, &ctx), "a pass failed",
            dp.captured);
      char *t4 = print_program(p);
      check(strcmp(t3, t4) == 0, "lane-split or share-kernels is not idempotent", t3);
      free(t3);
      free(t4);
    } else {
      check(err[0] != 0, "the verifier refused without a message", t1);
    }
    free(t1);
    free(t2);
  }
  arena_destroy(a);
  free(text);
  return 0;
}
