/* tests/passes/test_lower_options.c — the lowering's policy
 * (LowerLoopsOptions) reaches the program: the defaults are today's tuned
 * values, every field shows up as a kernel grain or a runtime call argument
 * (rt_linear task_macs / split_macs, rt_gelu grain, rt_attention block_q /
 * max_tk_tiled, rt_attention_flash block_q / block_k), and max_tk_tiled is the largest key length whose K (dh x
 * tk rounded up to 8) and V (tk x dv) fit in attn_tiled_floats. */
#include "frontend/spec.h"
#include "ir/loop.h"
#include "passes/passes.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* An encoder with a padding mask, GELU and a classifier: every callee. */
static IrGraph *build(Arena *a, int d_model, int heads) {
  char text[512];
  snprintf(text, sizeof text,
           "model enc {\n  arch encoder\n  vocab 30\n  d_model %d\n  heads %d\n  layers 1\n"
           "  ffn 32 gelu\n  norm post\n  position learned max 10\n  tokens pad 0\n"
           "  mask encoder padding\n  head classifier 3\n  max_batch 2\n}\n",
           d_model, heads);
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_from_string(a, "enc.tfm", text);
  diags_add_source(&d, src);
  Spec *spec = spec_parse(a, src, &d);
  cr_assert(spec, "%s", d.captured ? d.captured : "");
  IrGraph *g = spec_lower(a, spec, &(LowerOptions){0}, &d);
  cr_assert(g, "%s", d.captured ? d.captured : "");
  return g;
}

/* Argument i of every call to callee c in p must be the constant want;
 * returns how many calls there were. */
static int check_calls(const LoopProgram *p, LCallee c, int i, int64_t want) {
  int n = 0;
  for (int k = 0; k < p->n_kernels; k++) {
    const LStmt *body = p->kernels[k].body;
    for (int s = 0; s < body->n_stmts; s++) {
      const LStmt *st = body->stmts[s];
      if (st->kind != LS_CALL || st->callee != c)
        continue;
      n++;
      const LExpr *e = st->args[i];
      cr_assert(e->kind == LX_CONST_I && e->ival == want, "%s argument %d (%s): %lld, want %lld",
                loop_callee_info[c].name, i, loop_callee_info[c].args[i].name,
                e->kind == LX_CONST_I ? (long long)e->ival : -1LL, (long long)want);
    }
  }
  return n;
}

/* The position of the argument named name in callee c's row. */
static int arg_index(LCallee c, const char *name) {
  for (int i = 0; i < loop_callee_info[c].n_args; i++)
    if (strcmp(loop_callee_info[c].args[i].name, name) == 0)
      return i;
  cr_assert_fail("%s has no argument %s", loop_callee_info[c].name, name);
  return -1;
}

/* The grain of the layernorm kernel: rows of d_model elements. */
static int64_t layernorm_grain(const LoopProgram *p) {
  for (int k = 0; k < p->n_kernels; k++)
    if (strstr(p->kernels[k].name, "_layernorm"))
      return p->kernels[k].grain;
  cr_assert_fail("no layernorm kernel");
  return -1;
}

static void check_program(const LoopProgram *p, const LowerLoopsOptions *o, int64_t max_tk) {
  cr_assert_gt(check_calls(p, LC_LINEAR, arg_index(LC_LINEAR, "task_macs"), o->linear_task_macs), 0);
  check_calls(p, LC_LINEAR, arg_index(LC_LINEAR, "split_macs"), o->linear_split_macs);
  cr_assert_gt(check_calls(p, LC_GELU, arg_index(LC_GELU, "grain"), o->gelu_grain), 0);
  cr_assert_gt(check_calls(p, LC_ATTENTION, arg_index(LC_ATTENTION, "block_q"), o->attn_block_q), 0);
  check_calls(p, LC_ATTENTION, arg_index(LC_ATTENTION, "max_tk_tiled"), max_tk);
}

Test(lower_options, defaults_are_the_tuned_values) {
  LowerLoopsOptions o = pass_lower_loops_options_default();
  cr_assert_eq(o.grain_elems, 4096);
  cr_assert_eq(o.gelu_grain, 8192);
  cr_assert_eq(o.linear_task_macs, (int64_t)1 << 17);
  cr_assert_eq(o.linear_split_macs, (int64_t)1 << 23);
  cr_assert_eq(o.attn_block_q, 64);
  cr_assert_eq(o.attn_tiled_floats, 16384);
  cr_assert_eq(o.attn_block_k, 128);
}

/* attention.flash (after flash-attention) takes block_q and block_k */
static void check_flash(Arena *a, IrGraph *g, const LowerLoopsOptions *o) {
  PassPipeline pl;
  char err[256];
  cr_assert(pass_pipeline_parse("flash-attention", &pl, err, sizeof err), "%s", err);
  Diags d;
  diags_init(&d, a, NULL);
  PassContext ctx = {.diags = &d};
  cr_assert(pass_pipeline_run(g, &pl, &ctx));
  LoopProgram *p = pass_lower_loops_with(a, g, o);
  cr_assert_eq(check_calls(p, LC_ATTENTION_FLASH, arg_index(LC_ATTENTION_FLASH, "block_k"),
                           o->attn_block_k), 1);
  cr_assert_eq(check_calls(p, LC_ATTENTION_FLASH, arg_index(LC_ATTENTION_FLASH, "block_q"),
                           o->attn_block_q), 1);
  cr_assert_eq(check_calls(p, LC_ATTENTION, 0, 0), 0);
}

Test(lower_options, defaults_reach_the_calls) {
  Arena *a = arena_create();
  LowerLoopsOptions o = pass_lower_loops_options_default();
  /* dh = dv = 64: K and V of a head in 16k floats up to 256 keys */
  LoopProgram *p = pass_lower_loops(a, build(a, 128, 2));
  check_program(p, &o, 256);
  cr_assert_eq(layernorm_grain(p), 4096 / 128);
  /* dh = dv = 24: 16384 / 24 = 682 keys of V, 680 of K (rounded to 8) */
  check_program(pass_lower_loops(a, build(a, 24, 1)), &o, 680);
  /* dh = dv = 4 */
  check_program(pass_lower_loops(a, build(a, 16, 4)), &o, 4096);
  check_flash(a, build(a, 16, 4), &o);
  arena_destroy(a);
}

Test(lower_options, every_field_reaches_the_program) {
  Arena *a = arena_create();
  LowerLoopsOptions o = {.grain_elems = 1000,
                         .gelu_grain = 3,
                         .linear_task_macs = 5,
                         .linear_split_macs = 7,
                         .attn_block_q = 2,
                         .attn_tiled_floats = 16 * 8 * 10,
                         .attn_block_k = 11};
  IrGraph *g = build(a, 32, 2); /* dh = dv = 16: 1280 / 16 = 80 keys */
  LoopProgram *p = pass_lower_loops_with(a, g, &o);
  check_program(p, &o, 80);
  cr_assert_eq(layernorm_grain(p), (1000 + 31) / 32);
  o.attn_tiled_floats = 0; /* never the tiled products */
  o.grain_elems = 1;
  p = pass_lower_loops_with(a, g, &o);
  check_program(p, &o, 0);
  cr_assert_eq(layernorm_grain(p), 1);
  check_flash(a, g, &o);
  arena_destroy(a);
}
