/* tests/passes/test_golden.c — IR in, IR out: every tests/passes/NAME.tfir
 * (first line "# passes: LIST") run through that pipeline must print exactly
 * NAME.expected.tfir, byte for byte; likewise every loop IR golden
 * tests/passes/loop/NAME.tfloop through its loop passes must print
 * NAME.expected.tfloop (a line "# target: ..." names the tile pass's
 * target, "# weights-dtype: bf16" pack-weights' panels). Also: every
 * registered pass has a golden of its own (a file whose pipeline is that
 * pass alone); every
 * expected file is valid IR that prints back unchanged; and running the
 * pipeline again on an expected file changes nothing (the passes here are
 * idempotent, so a golden that is not a fixpoint shows a pass that left work
 * undone). */
#include "ir/loop.h"
#include "passes/passes.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_DIR TFMC_SOURCE_DIR "/tests/passes"
#define LOOP_GOLDEN_DIR GOLDEN_DIR "/loop"

static char *print_str(const IrGraph *g) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  cr_assert(f);
  ir_graph_print(g, f);
  fclose(f);
  return s;
}

static SrcFile *read_src(Arena *a, const char *path) {
  char err[512];
  SrcFile *f = src_file_read(a, path, err, sizeof err);
  cr_assert(f, "%s", err);
  return f;
}

static IrGraph *parse(Arena *a, const SrcFile *src) {
  Diags d;
  diags_init(&d, a, NULL);
  IrGraph *g = ir_graph_parse(a, src, &d);
  cr_assert(g, "%s does not parse:\n%s", src->name, d.captured ? d.captured : "");
  return g;
}

/* The pipeline named on the first line ("# passes: LIST"). */
static void header_pipeline(const SrcFile *src, PassPipeline *pl, char *list, size_t n) {
  const char *tag = "# passes:";
  cr_assert(strncmp(src->text, tag, strlen(tag)) == 0,
            "%s: the first line must be '# passes: LIST'", src->name);
  const char *s = src->text + strlen(tag), *e = strchr(s, '\n');
  cr_assert(e);
  snprintf(list, n, "%.*s", (int)(e - s), s);
  char err[512];
  cr_assert(pass_pipeline_parse(list, pl, err, sizeof err), "%s: %s", src->name, err);
}

static char *run_pipeline(IrGraph *g, const PassPipeline *pl, const char *name) {
  Diags d;
  diags_init(&d, g->arena, NULL);
  PassContext ctx = {.diags = &d};
  cr_assert(pass_pipeline_run(g, pl, &ctx), "%s: pipeline failed:\n%s", name,
            d.captured ? d.captured : "");
  cr_assert_eq(d.n_errors, 0);
  return print_str(g);
}

static bool is_golden_input_ext(const char *name, const char *in, const char *exp) {
  size_t n = strlen(name);
  return n > strlen(in) && strcmp(name + n - strlen(in), in) == 0 &&
         !(n > strlen(exp) && strcmp(name + n - strlen(exp), exp) == 0);
}

static bool is_golden_input(const char *name) {
  return is_golden_input_ext(name, ".tfir", ".expected.tfir");
}

/* ---- loop IR goldens ---- */

static char *print_loop_str(const LoopProgram *p) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  cr_assert(f);
  loop_program_print(p, f);
  fclose(f);
  return s;
}

static LoopProgram *parse_loop(Arena *a, const SrcFile *src) {
  Diags d;
  diags_init(&d, a, NULL);
  LoopProgram *p = loop_program_parse(a, src, &d);
  cr_assert(p, "%s does not parse:\n%s", src->name, d.captured ? d.captured : "");
  return p;
}

/* The target named on the line "# target: --target-cache C --target-threads N"
 * of a loop golden (so the tile pass decides the same on every machine);
 * NULL when the file has no such line (the host). */
static const PassTarget *header_target(Arena *a, const SrcFile *src) {
  const char *line = strstr(src->text, "\n# target:");
  if (!line)
    return NULL;
  PassTarget *t = arena_alloc(a, sizeof *t);
  pass_target_generic(t);
  char cache[128], threads[32], err[256];
  cr_assert(sscanf(line, "\n# target: --target-cache %127s --target-threads %31s", cache, threads) == 2,
            "%s: the target line must be '# target: --target-cache C --target-threads N'",
            src->name);
  cr_assert(pass_target_parse_cache(t, cache, err, sizeof err), "%s: %s", src->name, err);
  cr_assert(pass_target_parse_threads(t, threads, err, sizeof err), "%s: %s", src->name, err);
  return t;
}

/* The weights dtype named on the line "# weights-dtype: f32|bf16|int8" of a
 * loop golden (pack-weights' panels); f32 when the file has no such line. */
static PassWeightsDtype header_weights_dtype(const SrcFile *src) {
  const char *line = strstr(src->text, "\n# weights-dtype:");
  if (!line)
    return PASS_WEIGHTS_F32;
  char name[16] = "";
  cr_assert(sscanf(line, "\n# weights-dtype: %15s", name) == 1, "%s: bad weights-dtype line",
            src->name);
  if (strcmp(name, "bf16") == 0)
    return PASS_WEIGHTS_BF16;
  if (strcmp(name, "int8") == 0)
    return PASS_WEIGHTS_INT8;
  cr_assert_str_eq(name, "f32", "%s: weights-dtype f32, bf16 or int8", src->name);
  return PASS_WEIGHTS_F32;
}

static char *run_loop_pipeline(LoopProgram *p, const PassPipeline *pl, const char *name,
                               const PassTarget *target, PassWeightsDtype dtype) {
  Diags d;
  diags_init(&d, p->arena, NULL);
  PassContext ctx = {.diags = &d, .target = target, .weights_dtype = dtype};
  cr_assert(pass_pipeline_run_loop(p, pl, &ctx), "%s: pipeline failed:\n%s", name,
            d.captured ? d.captured : "");
  cr_assert_eq(d.n_errors, 0);
  return print_loop_str(p);
}

/* Runs every tests/passes/loop/NAME.tfloop; marks the passes run alone. */
static int run_loop_goldens(const PassInfo *reg, int pr_n, bool *alone) {
  DIR *dir = opendir(LOOP_GOLDEN_DIR);
  cr_assert(dir);
  int n_files = 0;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!is_golden_input_ext(e->d_name, ".tfloop", ".expected.tfloop"))
      continue;
    n_files++;
    Arena *a = arena_create();
    char path[1024], expected_path[1024], list[256];
    snprintf(path, sizeof path, "%s/%s", LOOP_GOLDEN_DIR, e->d_name);
    snprintf(expected_path, sizeof expected_path, "%s/%.*s.expected.tfloop", LOOP_GOLDEN_DIR,
             (int)(strlen(e->d_name) - strlen(".tfloop")), e->d_name);
    SrcFile *src = read_src(a, path);
    SrcFile *exp = read_src(a, expected_path);
    PassPipeline pl;
    header_pipeline(src, &pl, list, sizeof list);
    cr_assert_eq(pass_pipeline_count(&pl, PASS_GRAPH), 0, "%s: a loop golden runs loop passes",
                 e->d_name);
    if (pl.n == 1)
      for (int i = 0; i < pr_n; i++)
        alone[i] |= pl.passes[0] == &reg[i];
    LoopProgram *in = parse_loop(a, src);
    char *before = print_loop_str(in);
    const PassTarget *target = header_target(a, src);
    PassWeightsDtype dtype = header_weights_dtype(src);
    char *got = run_loop_pipeline(in, &pl, e->d_name, target, dtype);
    cr_expect_str_eq(got, exp->text, "%s after '%s' differs from its expected file:\n%s",
                     e->d_name, list, got);
    cr_expect_str_neq(got, before, "%s: '%s' changed nothing", e->d_name, list);
    /* the expected file is valid loop IR, prints back as is, and is a fixpoint */
    LoopProgram *pe = parse_loop(a, exp);
    char *back = print_loop_str(pe);
    cr_expect_str_eq(back, exp->text, "%s does not print back unchanged", expected_path);
    char *again = run_loop_pipeline(pe, &pl, expected_path, target, dtype);
    cr_expect_str_eq(again, exp->text, "'%s' changes %s again", list, expected_path);
    free(before);
    free(got);
    free(back);
    free(again);
    arena_destroy(a);
  }
  closedir(dir);
  return n_files;
}

Test(golden, every_file_prints_its_expected_ir) {
  DIR *dir = opendir(GOLDEN_DIR);
  cr_assert(dir);
  int n_files = 0;
  int pr_n;
  const PassInfo *reg = pass_registry(&pr_n);
  bool *alone = calloc((size_t)pr_n, sizeof *alone); /* pass has a golden to itself */
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!is_golden_input(e->d_name))
      continue;
    n_files++;
    Arena *a = arena_create();
    char path[1024], expected_path[1024], list[256];
    snprintf(path, sizeof path, "%s/%s", GOLDEN_DIR, e->d_name);
    snprintf(expected_path, sizeof expected_path, "%s/%.*s.expected.tfir", GOLDEN_DIR,
             (int)(strlen(e->d_name) - strlen(".tfir")), e->d_name);
    SrcFile *src = read_src(a, path);
    SrcFile *exp = read_src(a, expected_path);
    PassPipeline pl;
    header_pipeline(src, &pl, list, sizeof list);
    if (pl.n == 1)
      for (int i = 0; i < pr_n; i++)
        alone[i] |= pl.passes[0] == &reg[i];

    char *got = run_pipeline(parse(a, src), &pl, e->d_name);
    cr_expect_str_eq(got, exp->text, "%s after '%s' differs from its expected file:\n%s", e->d_name,
                     list, got);

    /* the expected file is valid IR, prints back as is, and is a fixpoint */
    IrGraph *ge = parse(a, exp);
    char *back = print_str(ge);
    cr_expect_str_eq(back, exp->text, "%s.expected.tfir does not print back unchanged", e->d_name);
    char *again = run_pipeline(ge, &pl, expected_path);
    cr_expect_str_eq(again, exp->text, "'%s' changes %s's expected output again", list, e->d_name);
    free(got);
    free(back);
    free(again);
    arena_destroy(a);
  }
  closedir(dir);
  cr_assert_geq(n_files, 4, "the golden files are missing from %s", GOLDEN_DIR);
  cr_assert_geq(run_loop_goldens(reg, pr_n, alone), 1, "the loop goldens are missing from %s",
                LOOP_GOLDEN_DIR);
  for (int i = 0; i < pr_n; i++)
    cr_expect(alone[i], "pass '%s' has no golden file running it alone", reg[i].name);
  free(alone);
}

/* The golden inputs mean something: each pipeline changes its input, except
 * the one file whose point is that nothing is dead. */
Test(golden, inputs_differ_from_outputs_where_they_should) {
  Arena *a = arena_create();
  const char *changed[] = {"dce", "decompose-attention", "pipeline.dce_then_decompose"};
  for (int i = 0; i < 3; i++) {
    char p[1024], list[256];
    snprintf(p, sizeof p, "%s/%s.tfir", GOLDEN_DIR, changed[i]);
    SrcFile *src = read_src(a, p);
    PassPipeline pl;
    header_pipeline(src, &pl, list, sizeof list);
    IrGraph *g = parse(a, src);
    char *before = print_str(g);
    char *after = run_pipeline(g, &pl, changed[i]);
    cr_expect_str_neq(before, after, "%s: '%s' changed nothing", changed[i], list);
    free(before);
    free(after);
  }
  arena_destroy(a);
}

/* Every registered pass runs on every graph the IR tests and the tfir fuzz
 * corpus hold (those that parse): all_ops.tfir uses every op of ops.def, so
 * the rebuild helper copies every op kind. Each result must verify (the
 * manager checks) and print back through the parser unchanged. */
Test(golden, every_pass_runs_on_every_corpus_graph) {
  const char *dirs[] = {TFMC_SOURCE_DIR "/tests/ir",
                        TFMC_SOURCE_DIR "/tests/fuzz/corpus/fuzz_tfir"};
  int n_reg, n_graphs = 0;
  const PassInfo *reg = pass_registry(&n_reg);
  for (int k = 0; k < 2; k++) {
    DIR *dir = opendir(dirs[k]);
    cr_assert(dir, "%s", dirs[k]);
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.')
        continue;
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
      if (k == 0 && !strstr(e->d_name, ".tfir"))
        continue;
      for (int p = 0; p < n_reg; p++) {
        if (reg[p].level != PASS_GRAPH)
          continue; /* loop passes: tests/passes/test_loop_ir.c runs them on every example */
        Arena *a = arena_create();
        Diags d;
        diags_init(&d, a, NULL);
        IrGraph *g = ir_graph_parse(a, read_src(a, path), &d);
        if (!g) { /* a corpus file that is meant to be rejected */
          arena_destroy(a);
          break;
        }
        n_graphs += p == 0;
        PassPipeline pl = {{&reg[p]}, 1};
        PassContext ctx = {.diags = &d};
        cr_expect(pass_pipeline_run(g, &pl, &ctx), "%s on %s:\n%s", reg[p].name, e->d_name,
                  d.captured ? d.captured : "");
        char *text = print_str(g);
        SrcFile *src = src_file_from_string(a, "again.tfir", text);
        cr_expect(ir_graph_parse(a, src, &d), "%s on %s prints what does not parse", reg[p].name,
                  e->d_name);
        free(text);
        arena_destroy(a);
      }
    }
    closedir(dir);
  }
  cr_expect_geq(n_graphs, 4, "too few corpus graphs found");
}
