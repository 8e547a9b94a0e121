/* tests/passes/test_loop_ir.c — the loop IR listing is complete: every
 * example spec (examples/NAME.tfm, examples/NAME/model.tfm), lowered at -O0 and
 * at -O2 (graph passes, lowering, then the loop passes), prints a listing
 * that loop_program_parse reads back into a program printing the same
 * text, byte for byte; and the loop passes keep every program verifying
 * and are idempotent on it. */
#include "frontend/spec.h"
#include "ir/loop.h"
#include "passes/passes.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXAMPLES TFMC_SOURCE_DIR "/examples"

static char *print_str(const LoopProgram *p) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  cr_assert(f);
  loop_program_print(p, f);
  fclose(f);
  return s;
}

static IrGraph *lower_spec(Arena *a, const char *path) {
  char err[512];
  SrcFile *src = src_file_read(a, path, err, sizeof err);
  cr_assert(src, "%s", err);
  Diags d;
  diags_init(&d, a, NULL);
  diags_add_source(&d, src);
  Spec *spec = spec_parse(a, src, &d);
  cr_assert(spec, "%s: %s", path, d.captured ? d.captured : "");
  IrGraph *g = spec_lower(a, spec, &(LowerOptions){NULL}, &d);
  cr_assert(g, "%s: %s", path, d.captured ? d.captured : "");
  return g;
}

/* The program of spec path at -O level: graph passes, lowering, loop passes. */
static LoopProgram *compile(Arena *a, const char *path, int level) {
  IrGraph *g = lower_spec(a, path);
  PassPipeline pl;
  cr_assert(pass_pipeline_level(level, &pl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext ctx = {.diags = &d};
  cr_assert(pass_pipeline_run(g, &pl, &ctx), "%s: %s", path, d.captured ? d.captured : "");
  LoopProgram *p = pass_lower_loops(a, g);
  cr_assert(pass_pipeline_run_loop(p, &pl, &ctx), "%s: %s", path, d.captured ? d.captured : "");
  return p;
}

static int example_specs(char paths[][512], int max) {
  int n = 0;
  DIR *dir = opendir(EXAMPLES);
  cr_assert(dir);
  struct dirent *e;
  while ((e = readdir(dir)) && n < max) {
    if (e->d_name[0] == '.') continue;
    size_t len = strlen(e->d_name);
    struct stat st;
    char model[512];
    snprintf(model, sizeof model, "%s/%s/model.tfm", EXAMPLES, e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".tfm") == 0)
      snprintf(paths[n++], 512, "%s/%s", EXAMPLES, e->d_name);
    else if (stat(model, &st) == 0)
      snprintf(paths[n++], 512, "%s", model);
  }
  closedir(dir);
  return n;
}

Test(loop_ir, every_example_round_trips_at_O0_and_O2, .timeout = 300) {
  char paths[64][512];
  int n = example_specs(paths, 64);
  cr_assert_geq(n, 8, "examples missing from %s", EXAMPLES);
  for (int i = 0; i < n; i++)
    for (int level = 0; level <= 2; level += 2) {
      Arena *a = arena_create();
      LoopProgram *p = compile(a, paths[i], level);
      char *text = print_str(p);
      Diags d;
      diags_init(&d, a, NULL);
      LoopProgram *back = loop_program_parse(a, src_file_from_string(a, "listing.tfloop", text), &d);
      cr_assert(back, "%s -O%d: the listing does not parse:\n%s", paths[i], level,
                d.captured ? d.captured : "");
      char *again = print_str(back);
      cr_expect_str_eq(again, text, "%s -O%d prints differently after a round trip", paths[i],
                       level);
      char err[512];
      cr_expect(loop_program_verify(back, err, sizeof err), "%s -O%d: %s", paths[i], level, err);
      free(text);
      free(again);
      arena_destroy(a);
    }
}

/* -O2's lane-split leaves no reassociable reduction behind, and running it
 * again changes nothing; -O2 does split some loops of every example. */
Test(loop_ir, lane_split_is_idempotent_on_every_example, .timeout = 300) {
  char paths[64][512];
  int n = example_specs(paths, 64);
  PassPipeline split;
  char err[512];
  cr_assert(pass_pipeline_parse("lane-split", &split, err, sizeof err), "%s", err);
  for (int i = 0; i < n; i++) {
    Arena *a = arena_create();
    LoopProgram *o0 = compile(a, paths[i], 0);
    char *plain = print_str(o0);
    Diags d;
    diags_init(&d, a, NULL);
    PassContext ctx = {.diags = &d};
    cr_assert(pass_pipeline_run_loop(o0, &split, &ctx), "%s", d.captured ? d.captured : "");
    char *once = print_str(o0);
    cr_expect_str_neq(once, plain, "%s: lane-split found nothing to split", paths[i]);
    cr_expect(strstr(ctx.note, "split "), "%s: note '%s'", paths[i], ctx.note);
    cr_assert(pass_pipeline_run_loop(o0, &split, &ctx), "%s", d.captured ? d.captured : "");
    char *twice = print_str(o0);
    cr_expect_str_eq(twice, once, "%s: lane-split is not idempotent", paths[i]);
    free(plain);
    free(once);
    free(twice);
    arena_destroy(a);
  }
}
