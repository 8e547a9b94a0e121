/* tests/passes/test_manager.c — the pass manager: pipeline parsing and its
 * messages, the -O levels, verify-after-each (with broken passes defined
 * only here), failing passes, print-after, statistics, and the rebuild
 * helper passes are written with; then the same for loop passes (the
 * ordering rule, print-after, stats, a broken loop pass named). */
#include "ir/loop.h"
#include "passes/passes.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* x -> linear -> attention (causal) -> relu; plus a dead linear. */
static const char *graph_text =
    "graph \"m\" {\n"
    "  sym B max 2\n"
    "  sym T max 6\n"
    "  %0 = input \"x\" : f32[B,T,4] @\"m.tfm\":1:1\n"
    "  %1 = param \"w\" : f32[4,4] @\"m.tfm\":2:1\n"
    "  %2 = linear %0, %1 : f32[B,T,4] @\"m.tfm\":2:1\n"
    "  %3 = mask.causal : bool[1,T,T] @\"m.tfm\":3:1\n"
    "  %4 = attention %2, %0, %0, %3 {heads=2, scale=0.5} : f32[B,T,4] @\"m.tfm\":4:1\n"
    "  %5 = param \"dead.w\" : f32[3,4] @\"m.tfm\":5:1\n"
    "  %6 = linear %0, %5 : f32[B,T,3] @\"m.tfm\":5:1\n"
    "  %7 = relu %4 : f32[B,T,4] @\"m.tfm\":6:1\n"
    "  output \"y\" = %7\n"
    "}\n";

typedef struct Fixture {
  Arena *a;
  Diags d;
  IrGraph *g;
  PassContext ctx;
} Fixture;

static void setup(Fixture *f, const char *text) {
  f->a = arena_create();
  diags_init(&f->d, f->a, NULL);
  f->g = ir_graph_parse(f->a, src_file_from_string(f->a, "m.tfir", text), &f->d);
  cr_assert(f->g, "%s", f->d.captured ? f->d.captured : "");
  memset(&f->ctx, 0, sizeof f->ctx);
  f->ctx.diags = &f->d;
}

static const char *captured(const Fixture *f) {
  return f->d.captured ? f->d.captured : "";
}

static char *print_str(const IrGraph *g) {
  char *s = NULL;
  size_t n = 0;
  FILE *out = open_memstream(&s, &n);
  cr_assert(out);
  ir_graph_print(g, out);
  fclose(out);
  return s;
}

static PassPipeline parse_ok(const char *list) {
  PassPipeline pl;
  char err[512];
  cr_assert(pass_pipeline_parse(list, &pl, err, sizeof err), "%s: %s", list, err);
  return pl;
}

/* ---- parsing pipelines ---- */

Test(pipeline, unknown_pass_is_named_with_the_available_ones) {
  PassPipeline pl;
  char err[512];
  cr_assert_not(pass_pipeline_parse("dce,fuse-everything", &pl, err, sizeof err));
  cr_expect(strstr(err, "unknown pass 'fuse-everything'"), "%s", err);
  int n;
  const PassInfo *reg = pass_registry(&n);
  for (int i = 0; i < n; i++)
    cr_expect(strstr(err, reg[i].name), "'%s' not listed: %s", reg[i].name, err);
}

Test(pipeline, empty_names_and_lists_are_refused) {
  PassPipeline pl;
  char err[512];
  cr_expect_not(pass_pipeline_parse("", &pl, err, sizeof err));
  cr_expect(strstr(err, "empty pass list"), "%s", err);
  cr_expect_not(pass_pipeline_parse("dce,,dce", &pl, err, sizeof err));
  cr_expect(strstr(err, "empty pass name"), "%s", err);
  cr_expect_not(pass_pipeline_parse("dce,", &pl, err, sizeof err));
  cr_expect_not(pass_pipeline_parse("DCE", &pl, err, sizeof err)); /* names are exact */
}

Test(pipeline, names_in_order_with_spaces_allowed) {
  PassPipeline pl = parse_ok(" decompose-attention , dce,dce ");
  cr_assert_eq(pl.n, 3);
  cr_expect_str_eq(pl.passes[0]->name, "decompose-attention");
  cr_expect_str_eq(pl.passes[1]->name, "dce");
  cr_expect_eq(pl.passes[1], pl.passes[2]);
}

Test(pipeline, too_many_passes_are_refused) {
  char list[1024] = "dce";
  for (int i = 1; i <= PASS_PIPELINE_MAX; i++)
    strcat(list, ",dce");
  PassPipeline pl;
  char err[512];
  cr_expect_not(pass_pipeline_parse(list, &pl, err, sizeof err));
  cr_expect(strstr(err, "more than"), "%s", err);
}

Test(pipeline, registry_rows_are_sound) {
  int n;
  const PassInfo *reg = pass_registry(&n);
  cr_assert_geq(n, 2);
  for (int i = 0; i < n; i++) {
    cr_expect(reg[i].description && *reg[i].description);
    /* one function, of the row's level */
    cr_expect(reg[i].level == PASS_GRAPH || reg[i].level == PASS_LOOP, "%s", reg[i].name);
    cr_expect(reg[i].level == PASS_GRAPH ? reg[i].run && !reg[i].run_loop
                                         : reg[i].run_loop && !reg[i].run,
              "%s: no function, or one of the wrong level", reg[i].name);
    cr_expect_null(strchr(reg[i].description, '\n'), "description of %s spans lines", reg[i].name);
    cr_expect_eq(pass_find(reg[i].name, strlen(reg[i].name)), &reg[i]);
    for (int k = 0; k < i; k++)
      cr_expect_str_neq(reg[i].name, reg[k].name);
  }
  cr_expect_null(pass_find("dc", 2));
}

Test(pipeline, levels) {
  PassPipeline pl;
  cr_assert(pass_pipeline_level(0, &pl));
  cr_expect_eq(pl.n, 0, "-O0 must change nothing");
  for (int level = 1; level <= 3; level++) {
    cr_assert(pass_pipeline_level(level, &pl));
    cr_expect_geq(pl.n, 1);
    bool dce = false;
    for (int i = 0; i < pl.n; i++) {
      /* not an optimisation: it materialises the score matrix */
      cr_expect_str_neq(pl.passes[i]->name, "decompose-attention");
      dce |= strcmp(pl.passes[i]->name, "dce") == 0;
    }
    cr_expect(dce, "-O%d lacks dce", level);
    /* the loop passes, last: lane-split before share-kernels, which must
     * compare the bodies lane-split leaves */
    /* -O2 and -O3 also pack the weights and tile (tile sizes the calls
     * pack-weights made; the blocks share-kernels compares are chosen by
     * then) */
    cr_expect_eq(pass_pipeline_count(&pl, PASS_LOOP), level >= 2 ? 4 : 2,
                 "-O%d lacks a loop pass", level);
    if (level >= 2) {
      cr_expect_str_eq(pl.passes[pl.n - 4]->name, "pack-weights");
      cr_expect_str_eq(pl.passes[pl.n - 3]->name, "tile");
    }
    cr_expect_str_eq(pl.passes[pl.n - 2]->name, "lane-split");
    cr_expect_str_eq(pl.passes[pl.n - 1]->name, "share-kernels");
  }
  cr_expect_not(pass_pipeline_level(4, &pl));
  cr_expect_not(pass_pipeline_level(-1, &pl));
}

Test(pipeline, print_after_must_name_a_pass_of_the_pipeline) {
  PassPipeline pl = parse_ok("dce");
  char err[512];
  cr_expect(pass_print_after_check(&pl, NULL, err, sizeof err));
  cr_expect(pass_print_after_check(&pl, "all", err, sizeof err));
  cr_expect(pass_print_after_check(&pl, "dce", err, sizeof err));
  cr_expect_not(pass_print_after_check(&pl, "decompose-attention", err, sizeof err));
  cr_expect(strstr(err, "not in the pipeline"), "%s", err);
  cr_expect_not(pass_print_after_check(&pl, "nope", err, sizeof err));
  cr_expect(strstr(err, "unknown pass 'nope'") && strstr(err, "decompose-attention"), "%s", err);
}

/* ---- passes defined only here ---- */

static int counted_runs;

static bool count_run(IrGraph *g, PassContext *ctx) {
  (void)g;
  (void)ctx;
  counted_runs++;
  return true;
}
static const PassInfo counting = {"count", "counts its runs; changes nothing", count_run};

/* Edits a node in place and breaks its type: the manager must notice the
 * change without being told and the verifier must reject it. */
static bool break_type_run(IrGraph *g, PassContext *ctx) {
  (void)ctx;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_LINEAR) {
      g->nodes[i].type.dims[2] = IR_CONST(5);
      return true;
    }
  return true;
}
static const PassInfo breaks_type = {"break-type", "gives a linear the wrong type", break_type_run};

/* Points an operand forward (not a topological order any more). */
static bool break_order_run(IrGraph *g, PassContext *ctx) {
  (void)ctx;
  g->nodes[2].operands[0] = g->n_nodes - 1;
  return true;
}
static const PassInfo breaks_order = {"break-order", "makes an operand refer forward",
                                      break_order_run};

static bool silent_fail_run(IrGraph *g, PassContext *ctx) {
  (void)g;
  (void)ctx;
  return false;
}
static const PassInfo silent_fail = {"silent-fail", "fails without a message", silent_fail_run};

static bool loud_fail_run(IrGraph *g, PassContext *ctx) {
  diag_error(ctx->diags, g->nodes[4].loc, "cannot tile this attention");
  return false;
}
static const PassInfo loud_fail = {"loud-fail", "fails with a message", loud_fail_run};

/* The rebuild helper: every relu becomes a gelu of the same operand. */
static int relu_to_gelu(PassRewrite *rw, int id, void *user) {
  const IrNode *n = &rw->old->nodes[id];
  if (n->op != IR_OP_RELU)
    return PASS_COPY;
  (*(int *)user)++;
  int x = pass_rewrite_operand(rw, id, 0);
  return ir_build(rw->g, IR_OP_GELU, &x, 1, NULL, n->loc);
}
static bool relu_to_gelu_run(IrGraph *g, PassContext *ctx) {
  int n = 0;
  pass_rewrite(g, NULL, relu_to_gelu, &n);
  pass_note(ctx, "replaced %d relu", n);
  return true;
}
static const PassInfo relu_gelu = {"relu-to-gelu", "relu -> gelu", relu_to_gelu_run};

/* The rebuild helper's drop: the dead linear (%6) and its param (%5). */
static int drop_dead(PassRewrite *rw, int id, void *user) {
  (void)rw;
  (void)user;
  return id == 5 || id == 6 ? PASS_DROP : PASS_COPY;
}
static bool drop_dead_run(IrGraph *g, PassContext *ctx) {
  (void)ctx;
  pass_rewrite(g, NULL, drop_dead, NULL);
  return true;
}
static const PassInfo dropper = {"drop-dead", "drops %5 and %6", drop_dead_run};

/* ---- verify after each ---- */

Test(verify, a_pass_that_breaks_types_is_caught_and_named) {
  Fixture f;
  setup(&f, graph_text);
  PassPipeline pl = parse_ok("dce");
  pass_pipeline_add(&pl, &breaks_type);
  pass_pipeline_add(&pl, &counting);
  counted_runs = 0;
  cr_assert_not(pass_pipeline_run(f.g, &pl, &f.ctx));
  cr_expect(strstr(captured(&f), "pass 'break-type' left a graph that does not verify"), "%s",
            captured(&f));
  cr_expect(strstr(captured(&f), "(linear)"), "the verifier's message is missing: %s",
            captured(&f));
  cr_expect_eq(counted_runs, 0, "the pipeline went on after a broken pass");
  arena_destroy(f.a);
}

Test(verify, a_pass_that_breaks_the_order_is_caught) {
  Fixture f;
  setup(&f, graph_text);
  PassPipeline pl = {{0}, 0};
  pass_pipeline_add(&pl, &breaks_order);
  cr_assert_not(pass_pipeline_run(f.g, &pl, &f.ctx));
  cr_expect(strstr(captured(&f), "pass 'break-order' left a graph that does not verify"), "%s",
            captured(&f));
  arena_destroy(f.a);
}

Test(verify, a_graph_that_does_not_verify_runs_no_pass) {
  Fixture f;
  setup(&f, graph_text);
  f.g->nodes[7].type.dtype = IR_I32; /* relu of f32 typed i32 */
  PassPipeline pl = {{0}, 0};
  pass_pipeline_add(&pl, &counting);
  counted_runs = 0;
  cr_assert_not(pass_pipeline_run(f.g, &pl, &f.ctx));
  cr_expect_eq(counted_runs, 0);
  cr_expect(strstr(captured(&f), "does not verify; no pass ran"), "%s", captured(&f));
  arena_destroy(f.a);
}

Test(verify, failing_passes_are_named_and_leave_the_graph) {
  Fixture f;
  setup(&f, graph_text);
  char *before = print_str(f.g);
  PassPipeline pl = {{0}, 0};
  pass_pipeline_add(&pl, &silent_fail);
  cr_assert_not(pass_pipeline_run(f.g, &pl, &f.ctx));
  cr_expect(strstr(captured(&f), "pass 'silent-fail' failed without saying why"), "%s",
            captured(&f));

  Fixture f2;
  setup(&f2, graph_text);
  PassPipeline pl2 = {{0}, 0};
  pass_pipeline_add(&pl2, &loud_fail);
  cr_assert_not(pass_pipeline_run(f2.g, &pl2, &f2.ctx));
  cr_expect(strstr(captured(&f2), "m.tfm:4:1: error: cannot tile this attention"), "%s",
            captured(&f2));
  cr_expect(strstr(captured(&f2), "pass 'loud-fail' failed"), "%s", captured(&f2));
  char *after = print_str(f2.g);
  cr_expect_str_eq(after, before);
  free(before);
  free(after);
  arena_destroy(f.a);
  arena_destroy(f2.a);
}

/* ---- print-after and statistics ---- */

Test(print, after_one_pass_prints_that_graph) {
  Fixture f;
  setup(&f, graph_text);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  f.ctx.print_after = "dce";
  f.ctx.print_out = out;
  PassPipeline pl = parse_ok("dce,decompose-attention");
  cr_assert(pass_pipeline_run(f.g, &pl, &f.ctx), "%s", captured(&f));
  fclose(out);
  /* the printed graph is the one after dce alone */
  Fixture ref;
  setup(&ref, graph_text);
  PassPipeline only_dce = parse_ok("dce");
  cr_assert(pass_pipeline_run(ref.g, &only_dce, &ref.ctx));
  char *after_dce = print_str(ref.g);
  const char *head = "# IR after pass 'dce'\n";
  cr_assert(strncmp(buf, head, strlen(head)) == 0, "%s", buf);
  cr_expect_str_eq(buf + strlen(head), after_dce);
  cr_expect_null(strstr(buf, "decompose-attention"));
  free(buf);
  free(after_dce);
  arena_destroy(f.a);
  arena_destroy(ref.a);
}

Test(print, after_all_prints_every_pass_and_parses_back) {
  Fixture f;
  setup(&f, graph_text);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  f.ctx.print_after = "all";
  f.ctx.print_out = out;
  PassPipeline pl = parse_ok("dce,dce,decompose-attention");
  cr_assert(pass_pipeline_run(f.g, &pl, &f.ctx), "%s", captured(&f));
  fclose(out);
  const char *h1 = strstr(buf, "# IR after pass 'dce'\n");
  const char *h2 = h1 ? strstr(h1 + 1, "# IR after pass 'dce' (unchanged)\n") : NULL;
  const char *h3 = h2 ? strstr(h2, "# IR after pass 'decompose-attention'\n") : NULL;
  cr_assert(h1 == buf && h2 && h3, "%s", buf);
  /* the last block (a comment line, then IR) reads back as the final graph */
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  IrGraph *back = ir_graph_parse(a, src_file_from_string(a, "printed.tfir", h3), &d);
  cr_assert(back, "%s", d.captured ? d.captured : "");
  char *p1 = print_str(back), *p2 = print_str(f.g);
  cr_expect_str_eq(p1, p2);
  free(p1);
  free(p2);
  free(buf);
  arena_destroy(a);
  arena_destroy(f.a);
}

Test(print, stats_name_each_pass_and_what_it_did) {
  Fixture f;
  setup(&f, graph_text);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  f.ctx.stats_out = out;
  PassPipeline pl = parse_ok("dce,decompose-attention,dce");
  pass_pipeline_add(&pl, &relu_gelu);
  cr_assert(pass_pipeline_run(f.g, &pl, &f.ctx), "%s", captured(&f));
  fclose(out);
  const char *want[] = {"what it did",
                        "8 -> 6",
                        "removed 2 nodes (1 param)",
                        "6 -> 7",
                        "decomposed 1 attention op",
                        "nothing to remove",
                        "replaced 1 relu",
                        "total",
                        "8 -> 7",
                        "(4 passes)"};
  const char *at = buf;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *hit = strstr(at, want[i]);
    cr_expect(hit, "'%s' missing (or out of order) in:\n%s", want[i], buf);
    if (hit)
      at = hit;
  }
  free(buf);
  arena_destroy(f.a);
}

/* ---- the rebuild helper ---- */

Test(rewrite, replace_and_drop_keep_order_and_outputs) {
  Fixture f;
  setup(&f, graph_text);
  PassPipeline pl = {{0}, 0};
  pass_pipeline_add(&pl, &relu_gelu);
  pass_pipeline_add(&pl, &dropper);
  cr_assert(pass_pipeline_run(f.g, &pl, &f.ctx), "%s", captured(&f));
  char *got = print_str(f.g);
  const char *want =
      "graph \"m\" {\n"
      "  sym B max 2\n"
      "  sym T max 6\n"
      "  %0 = input \"x\" : f32[B,T,4] @\"m.tfm\":1:1\n"
      "  %1 = param \"w\" : f32[4,4] @\"m.tfm\":2:1\n"
      "  %2 = linear %0, %1 : f32[B,T,4] @\"m.tfm\":2:1\n"
      "  %3 = mask.causal : bool[1,T,T] @\"m.tfm\":3:1\n"
      "  %4 = attention %2, %0, %0, %3 {heads=2, scale=0.5} : f32[B,T,4] @\"m.tfm\":4:1\n"
      "  %5 = gelu %4 : f32[B,T,4] @\"m.tfm\":6:1\n"
      "  output \"y\" = %5\n"
      "}\n";
  cr_expect_str_eq(got, want);
  free(got);
  arena_destroy(f.a);
}

Test(rewrite, dce_on_a_graph_of_inputs_only_keeps_them) {
  Fixture f;
  setup(&f, "graph \"io\" {\n"
            "  %0 = input \"a\" : f32[3]\n"
            "  %1 = input \"b\" : f32[3]\n"
            "  %2 = param \"p\" : f32[3]\n"
            "  output \"a\" = %0\n"
            "}\n");
  PassPipeline pl = parse_ok("dce");
  cr_assert(pass_pipeline_run(f.g, &pl, &f.ctx), "%s", captured(&f));
  cr_expect_eq(f.g->n_nodes, 2);
  cr_expect_eq(f.g->nodes[1].op, IR_OP_INPUT);
  cr_expect_str_eq(f.g->nodes[1].attrs.name, "b");
  arena_destroy(f.a);
}

/* ---- loop passes ---- */

Test(pipeline, a_graph_pass_after_a_loop_pass_is_refused) {
  PassPipeline pl;
  char err[512];
  cr_assert_not(pass_pipeline_parse("dce,lane-split,prune-rows", &pl, err, sizeof err));
  cr_expect(strstr(err, "graph pass 'prune-rows' cannot follow loop pass 'lane-split'"), "%s",
            err);
  cr_expect(strstr(err, "graph passes first"), "%s", err);
  pl = parse_ok("prune-rows,dce,lane-split,lane-split");
  cr_expect_eq(pass_pipeline_count(&pl, PASS_GRAPH), 2);
  cr_expect_eq(pass_pipeline_count(&pl, PASS_LOOP), 2);
  const PassInfo *dce = pass_find("dce", 3);
  cr_expect_not(pass_pipeline_add(&pl, dce), "pass_pipeline_add keeps the rule too");
  cr_expect_eq(pl.n, 4);
  cr_expect_str_eq(pass_level_name(pass_find("lane-split", 10)->level), "loop");
  /* print-after names loop passes as well */
  cr_expect(pass_print_after_check(&pl, "lane-split", err, sizeof err), "%s", err);
  PassPipeline graph_only = parse_ok("dce");
  cr_expect_not(pass_print_after_check(&graph_only, "lane-split", err, sizeof err));
  cr_expect(strstr(err, "not in the pipeline"), "%s", err);
}

/* One kernel: a layernorm-like sum over 64, then a scale. */
static const char *loop_text =
    "loop program \"m\" (arena 1024 bytes, weights 0 floats, syms 1)\n"
    "  b0 = input[0] : f32  \"x\"\n"
    "  b1 = output[0] : f32  \"y\"\n"
    "kernel k1_sum \"sum %1\" node 1 parallel extent sym0 grain 4 (outer v0):\n"
    "  vars v0:i64 v1:f32 v2:i64\n"
    "  let v1: f32 = 0f\n"
    "  for v2 in 0..64:\n"
    "    v1 = (v1 +~ b0[((v0 * 64) + v2)])\n"
    "  b1[v0] = v1\n";

typedef struct LoopFixture {
  Arena *a;
  Diags d;
  LoopProgram *p;
  PassContext ctx;
} LoopFixture;

static void loop_setup(LoopFixture *f) {
  f->a = arena_create();
  diags_init(&f->d, f->a, NULL);
  f->p = loop_program_parse(f->a, src_file_from_string(f->a, "m.tfloop", loop_text), &f->d);
  cr_assert(f->p, "%s", f->d.captured ? f->d.captured : "");
  memset(&f->ctx, 0, sizeof f->ctx);
  f->ctx.diags = &f->d;
}

static char *loop_str(const LoopProgram *p) {
  char *s = NULL;
  size_t n = 0;
  FILE *out = open_memstream(&s, &n);
  cr_assert(out);
  loop_program_print(p, out);
  fclose(out);
  return s;
}

static int loop_runs;
static bool loop_count_run(LoopProgram *p, PassContext *ctx) {
  (void)p;
  (void)ctx;
  loop_runs++;
  return true;
}
static const PassInfo loop_counting = {"loop-count", "counts its runs; changes nothing", NULL,
                                       PASS_LOOP, loop_count_run};

/* Appends a call with no arguments to the first kernel: rt_gelu takes 6. */
static bool loop_break_run(LoopProgram *p, PassContext *ctx) {
  (void)ctx;
  ls_append(p, p->kernels[0].body, ls_call(p, LC_GELU, NULL, 0));
  return true;
}
static const PassInfo loop_breaks = {"break-call", "adds a call without its arguments", NULL,
                                     PASS_LOOP, loop_break_run};

static bool loop_fail_run(LoopProgram *p, PassContext *ctx) {
  (void)p;
  (void)ctx;
  return false;
}
static const PassInfo loop_fails = {"loop-fail", "fails without a message", NULL, PASS_LOOP,
                                    loop_fail_run};

Test(loop_passes, graph_runner_skips_them_and_loop_runner_skips_graph_passes) {
  Fixture f;
  setup(&f, graph_text);
  PassPipeline pl = parse_ok("dce");
  pass_pipeline_add(&pl, &loop_counting);
  loop_runs = 0;
  cr_assert(pass_pipeline_run(f.g, &pl, &f.ctx), "%s", captured(&f));
  cr_expect_eq(loop_runs, 0, "the graph runner ran a loop pass");
  LoopFixture lf;
  loop_setup(&lf);
  cr_assert(pass_pipeline_run_loop(lf.p, &pl, &lf.ctx), "%s", lf.d.captured);
  cr_expect_eq(loop_runs, 1);
  arena_destroy(f.a);
  arena_destroy(lf.a);
}

Test(loop_passes, a_broken_loop_pass_is_caught_and_named) {
  LoopFixture f;
  loop_setup(&f);
  PassPipeline pl = {{0}, 0};
  pass_pipeline_add(&pl, &loop_breaks);
  pass_pipeline_add(&pl, &loop_counting);
  loop_runs = 0;
  cr_assert_not(pass_pipeline_run_loop(f.p, &pl, &f.ctx));
  const char *c = f.d.captured ? f.d.captured : "";
  cr_expect(strstr(c, "loop pass 'break-call' left a program that does not verify"), "%s", c);
  cr_expect(strstr(c, "rt_gelu takes 6 arguments, given 0"), "the verifier's reason: %s", c);
  cr_expect_eq(loop_runs, 0, "the pipeline went on after a broken pass");
  arena_destroy(f.a);
}

Test(loop_passes, failing_and_unverifiable_input) {
  LoopFixture f;
  loop_setup(&f);
  PassPipeline pl = {{0}, 0};
  pass_pipeline_add(&pl, &loop_fails);
  cr_assert_not(pass_pipeline_run_loop(f.p, &pl, &f.ctx));
  cr_expect(strstr(f.d.captured, "loop pass 'loop-fail' failed without saying why"), "%s",
            f.d.captured);
  LoopFixture g;
  loop_setup(&g);
  ls_append(g.p, g.p->kernels[0].body, ls_call(g.p, LC_GELU, NULL, 0));
  PassPipeline count = {{0}, 0};
  pass_pipeline_add(&count, &loop_counting);
  loop_runs = 0;
  cr_assert_not(pass_pipeline_run_loop(g.p, &count, &g.ctx));
  cr_expect(strstr(g.d.captured, "does not verify; no pass ran"), "%s", g.d.captured);
  cr_expect_eq(loop_runs, 0);
  arena_destroy(f.a);
  arena_destroy(g.a);
}

Test(loop_passes, print_after_prints_the_loop_ir_which_parses_back) {
  LoopFixture f;
  loop_setup(&f);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  f.ctx.print_after = "all";
  f.ctx.print_out = out;
  PassPipeline pl = parse_ok("dce,lane-split,lane-split");
  cr_assert(pass_pipeline_run_loop(f.p, &pl, &f.ctx), "%s", f.d.captured);
  fclose(out);
  const char *h1 = strstr(buf, "# loop IR after pass 'lane-split'\n");
  const char *h2 = h1 ? strstr(h1 + 1, "# loop IR after pass 'lane-split' (unchanged)\n") : NULL;
  cr_assert(h1 == buf && h2, "%s", buf);
  cr_expect_null(strstr(buf, "'dce'"), "a graph pass printed at the loop level: %s", buf);
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  LoopProgram *back =
      loop_program_parse(a, src_file_from_string(a, "printed.tfloop", strchr(h2, '\n') + 1), &d);
  cr_assert(back, "%s", d.captured ? d.captured : "");
  char *p1 = loop_str(back), *p2 = loop_str(f.p);
  cr_expect_str_eq(p1, p2);
  cr_expect(strstr(p2, "for v11 in 0..8:"), "not split: %s", p2);
  free(p1);
  free(p2);
  free(buf);
  arena_destroy(a);
  arena_destroy(f.a);
}

Test(loop_passes, stats_name_each_loop_pass_with_kernels_and_note) {
  LoopFixture f;
  loop_setup(&f);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  f.ctx.stats_out = out;
  PassPipeline pl = parse_ok("lane-split,lane-split");
  cr_assert(pass_pipeline_run_loop(f.p, &pl, &f.ctx), "%s", f.d.captured);
  fclose(out);
  const char *want[] = {"loop pass", "kernels", "what it did",
                        "lane-split", "1 -> 1", "split 1 reduction in 1 kernel into 8 lanes",
                        "lane-split", "no change",
                        "total", "(2 loop passes)"};
  const char *at = buf;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *hit = strstr(at, want[i]);
    cr_expect(hit, "'%s' missing (or out of order) in:\n%s", want[i], buf);
    if (hit)
      at = hit + strlen(want[i]);
  }
  free(buf);
  arena_destroy(f.a);
}
