/* tests/ir/test_verify.c — ir_graph_verify accepts well-formed graphs and
 * rejects each kind of malformed one with a specific message at the node's
 * location, prefixed with the value and op. Malformed graphs are made by
 * building a valid graph and then breaking one field of its node array by
 * hand (the builder itself refuses to build them), or by writing the node
 * array out in full. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ir/ir.h"

static const IrLoc L = {"m.tfm", 3, 5};

static IrAttrs attrs0(void) {
  IrAttrs at;
  memset(&at, 0, sizeof at);
  return at;
}

/* Verifies g, expecting success. */
static void verify_ok(Arena *a, const IrGraph *g) {
  Diags d;
  diags_init(&d, a, NULL);
  cr_assert(ir_graph_verify(g, &d), "unexpected errors:\n%s", d.captured);
  cr_assert_eq(d.n_errors, 0);
}

/* Verifies g, expecting failure; returns the diagnostics. */
static const char *verify_fail(Arena *a, const IrGraph *g, int *n_errors) {
  Diags d;
  diags_init(&d, a, NULL);
  cr_assert_not(ir_graph_verify(g, &d), "verified, but should have failed");
  cr_assert(d.captured);
  if (n_errors)
    *n_errors = d.n_errors;
  return d.captured;
}

#define EXPECT_VERIFY_ERROR(a, g, want)                                                            \
  do {                                                                                             \
    const char *got_ = verify_fail(a, g, NULL);                                                    \
    cr_expect(strstr(got_, want), "expected\n  %s\ngot\n%s", want, got_);                          \
  } while (0)

/* The base graph most tests break:
 *   %0 = input "x" : f32[B,S,16]
 *   %1 = param "w" : f32[8,16]
 *   %2 = param "b" : f32[8]
 *   %3 = linear %0, %1, %2 : f32[B,S,8]
 *   %4 = relu %3 : f32[B,S,8]
 *   %5 = mask.causal : bool[1,S,S]
 *   %6 = attention %0, %0, %0, %5 {heads=4, scale=0.25} : f32[B,S,16]
 *   %7 = layernorm %6, %8? ... (see below)
 *   output "y" = %4, "z" = %6 */
static IrGraph *base(Arena *a) {
  IrGraph *g = ir_graph_create(a, "base");
  int B = ir_graph_add_symbol(g, "B", 2);
  int S = ir_graph_add_symbol(g, "S", 8);
  int x =
      ir_build_input(g, "x", ir_type(IR_F32, 3, (IrDim[]){IR_SYM(B), IR_SYM(S), IR_CONST(16)}), L);
  int w = ir_build_param(g, "w", ir_type2(IR_F32, 8, 16), L);
  int b = ir_build_param(g, "b", ir_type1(IR_F32, 8), L);
  int y = ir_build(g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, L);
  int r = ir_build(g, IR_OP_RELU, (int[]){y}, 1, NULL, L);
  int m = ir_build_typed(g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                         ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(S), IR_SYM(S)}), L);
  IrAttrs at = attrs0();
  at.heads = 4;
  at.scale = 0.25;
  int att = ir_build(g, IR_OP_ATTENTION, (int[]){x, x, x, m}, 4, &at, L);
  ir_graph_add_output(g, "y", r);
  ir_graph_add_output(g, "z", att);
  return g;
}

Test(verify, base_graph_is_valid) {
  Arena *a = arena_create();
  verify_ok(a, base(a));
  arena_destroy(a);
}

/* A graph written out as a node array, without the builder. */
Test(verify, hand_built_node_array) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "hand");
  g->syms[0] = (IrSymbol){"T", 4};
  g->n_syms = 1;
  IrNode nodes[] = {
      {.op = IR_OP_INPUT,
       .type = ir_type(IR_F32, 2, (IrDim[]){IR_SYM(0), IR_CONST(6)}),
       .attrs = {.name = "x"},
       .loc = L},
      {.op = IR_OP_CONST, .type = ir_type(IR_F32, 0, NULL), .attrs = {.value = 2}, .loc = L},
      {.op = IR_OP_MUL,
       .n_operands = 2,
       .operands = {0, 1},
       .type = ir_type(IR_F32, 2, (IrDim[]){IR_SYM(0), IR_CONST(6)}),
       .loc = L},
      {.op = IR_OP_SOFTMAX,
       .n_operands = 1,
       .operands = {2},
       .type = ir_type(IR_F32, 2, (IrDim[]){IR_SYM(0), IR_CONST(6)}),
       .loc = L},
  };
  g->nodes = nodes;
  g->n_nodes = g->cap_nodes = 4;
  IrOutput outs[] = {{"p", 3}};
  g->outputs = outs;
  g->n_outputs = g->cap_outputs = 1;
  verify_ok(a, g);

  nodes[3].type.dims[1] = IR_CONST(7);
  EXPECT_VERIFY_ERROR(
      a, g, "m.tfm:3:5: error: %3 (softmax): type f32[T,7] does not match the inferred f32[T,6]");
  nodes[3].type.dims[1] = IR_CONST(6);
  nodes[2].operands[1] = 3;
  EXPECT_VERIFY_ERROR(
      a, g,
      "m.tfm:3:5: error: %2 (mul): operand 1 refers to %3, which is not defined before this node");
  nodes[2].operands[1] = 2;
  EXPECT_VERIFY_ERROR(a, g,
                      "%2 (mul): operand 1 refers to %2, which is not defined before this node");
  nodes[2].operands[1] = 1;
  verify_ok(a, g);
  arena_destroy(a);
}

Test(verify, operands) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[4].operands[0] = 5; /* relu uses the mask defined after it */
  EXPECT_VERIFY_ERROR(
      a, g,
      "m.tfm:3:5: error: %4 (relu): operand 0 refers to %5, which is not defined before this node");
  g->nodes[4].operands[0] = 99;
  EXPECT_VERIFY_ERROR(a, g, "%4 (relu): operand 0 refers to %99, which does not exist");
  g->nodes[4].operands[0] = -1;
  EXPECT_VERIFY_ERROR(a, g, "%4 (relu): operand 0 refers to %-1, which does not exist");
  g->nodes[4].operands[0] = 3;
  g->nodes[4].n_operands = 2;
  g->nodes[4].operands[1] = 3;
  EXPECT_VERIFY_ERROR(a, g, "%4 (relu): takes 1 operand, got 2");
  g->nodes[4].n_operands = 1;
  g->nodes[3].n_operands = 1;
  EXPECT_VERIFY_ERROR(a, g, "%3 (linear): takes 2 to 4 operands, got 1");
  g->nodes[3].n_operands = 7;
  EXPECT_VERIFY_ERROR(a, g, "%3 (linear): takes 2 to 4 operands, got 7");
  g->nodes[3].n_operands = 3;
  /* residual=true makes the last operand (here the bias) the residual */
  g->nodes[3].attrs.residual = true;
  EXPECT_VERIFY_ERROR(a, g, "%3 (linear): linear residual must have the result's type");
  g->nodes[3].attrs.residual = false;
  g->nodes[3].attrs.act = (IrAct)7;
  EXPECT_VERIFY_ERROR(a, g, "%3 (linear): act must be none, relu, gelu or gelu_tanh, got 7");
  g->nodes[3].attrs.act = IR_ACT_NONE;
  g->nodes[5].n_operands = 1;
  EXPECT_VERIFY_ERROR(a, g, "%5 (mask.causal): takes 0 operands, got 1");
  arena_destroy(a);
}

Test(verify, type_mismatch) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[3].type.dims[2] = IR_CONST(9); /* linear result with the wrong N */
  int n;
  const char *got = verify_fail(a, g, &n);
  cr_assert(strstr(got, "m.tfm:3:5: error: %3 (linear): type f32[B,S,9] does not match the "
                        "inferred f32[B,S,8]\n"),
            "%s", got);
  cr_assert_eq(n, 1, "%s", got); /* relu of %3 is checked against %3's declared type */
  g->nodes[3].type.dims[2] = IR_CONST(8);
  g->nodes[3].type.dtype = IR_I32;
  EXPECT_VERIFY_ERROR(a, g, "%3 (linear): type i32[B,S,8] does not match the inferred f32[B,S,8]");
  g->nodes[3].type.dtype = IR_F32;
  g->nodes[3].type.rank = 2;
  EXPECT_VERIFY_ERROR(a, g, "%3 (linear): type f32[B,S] does not match the inferred f32[B,S,8]");
  g->nodes[3].type.rank = 3;
  g->nodes[1].type.dims[1] = IR_CONST(15); /* weight's K does not match x */
  EXPECT_VERIFY_ERROR(a, g,
                      "%3 (linear): linear weight must be f32[N,K] with K the input's last dim");
  arena_destroy(a);
}

Test(verify, types_themselves) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[0].type.dims[0] = IR_SYM(5);
  int n;
  const char *got = verify_fail(a, g, &n);
  cr_assert(strstr(got, "%0 (input): dim 0 refers to symbol #5, but the graph has 2"), "%s", got);
  cr_assert_eq(n, 1, "users of a broken value are not checked again:\n%s", got);
  g->nodes[0].type.dims[0] = IR_SYM(-1);
  g->nodes[0].type.dims[0].value = 0;
  EXPECT_VERIFY_ERROR(a, g, "%0 (input): dim 0 is 0; dimensions must be >= 1");
  g->nodes[0].type.dims[0] = IR_CONST(-4);
  EXPECT_VERIFY_ERROR(a, g, "%0 (input): dim 0 is -4; dimensions must be >= 1");
  g->nodes[0].type.dims[0] = IR_SYM(0);
  g->nodes[0].type.rank = 5;
  EXPECT_VERIFY_ERROR(a, g, "%0 (input): rank 5 is out of range (0..4)");
  g->nodes[0].type.rank = 3;
  g->nodes[0].type.dtype = (IrDtype)7;
  EXPECT_VERIFY_ERROR(a, g, "%0 (input): dtype code 7 is not valid");
  g->nodes[0].type.dtype = IR_F32;
  g->nodes[1].type.dims[0] = IR_CONST(INT64_MAX / 2);
  g->nodes[1].type.dims[1] = IR_CONST(4);
  EXPECT_VERIFY_ERROR(a, g, "%1 (param): the type has more elements than a 64-bit count holds");
  g->nodes[1].type = ir_type2(IR_I32, 8, 16);
  EXPECT_VERIFY_ERROR(a, g, "%1 (param): param must be f32");
  arena_destroy(a);
}

Test(verify, unknown_op) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[4].op = (IrOp)IR_OP_COUNT;
  EXPECT_VERIFY_ERROR(a, g, "%4 (?): unknown op code");
  arena_destroy(a);
}

Test(verify, names) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  ir_build_input(g, "x", ir_type1(IR_F32, 3), (IrLoc){"m.tfm", 9, 1});
  EXPECT_VERIFY_ERROR(a, g, "m.tfm:9:1: error: %7 (input): duplicate input name \"x\" (also %0)");
  g->nodes[7].attrs.name = "w"; /* an input may share a param's name */
  verify_ok(a, g);
  ir_build_param(g, "w", ir_type1(IR_F32, 3), (IrLoc){"m.tfm", 10, 1});
  EXPECT_VERIFY_ERROR(a, g, "m.tfm:10:1: error: %8 (param): duplicate param name \"w\" (also %1)");
  g->nodes[8].attrs.name = "";
  EXPECT_VERIFY_ERROR(a, g, "%8 (param): has no name");
  g->nodes[8].attrs.name = NULL;
  EXPECT_VERIFY_ERROR(a, g, "%8 (param): has no name");
  arena_destroy(a);
}

Test(verify, outputs) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  ir_graph_add_output(g, "y", 3);
  EXPECT_VERIFY_ERROR(a, g, "m.tfm:3:5: error: duplicate output name \"y\" (outputs #0 and #2)");
  g->outputs[2].name = "q";
  g->outputs[2].value = 42;
  EXPECT_VERIFY_ERROR(a, g, "error: output \"q\" refers to %42, but the graph has 7 values");
  g->outputs[2].value = -1;
  EXPECT_VERIFY_ERROR(a, g, "error: output \"q\" refers to %-1, but the graph has 7 values");
  g->outputs[2].value = 3;
  g->outputs[2].name = "";
  EXPECT_VERIFY_ERROR(a, g, "error: output #2 has no name");
  arena_destroy(a);
}

Test(verify, attention) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[6].attrs.heads = 3; /* does not divide 16 */
  EXPECT_VERIFY_ERROR(a, g, "%6 (attention): attention heads must divide the model dim");
  g->nodes[6].attrs.heads = 0;
  EXPECT_VERIFY_ERROR(a, g, "%6 (attention): heads must be >= 1, got 0");
  g->nodes[6].attrs.heads = 4;
  g->nodes[6].attrs.scale = INFINITY;
  EXPECT_VERIFY_ERROR(a, g, "%6 (attention): scale must be a finite number, got inf");
  g->nodes[6].attrs.scale = 0.25;
  verify_ok(a, g);
  /* a mask of the wrong rank: bool[S,S] */
  IrGraph *g2 = base(a);
  g2->nodes[5].op = IR_OP_INPUT;
  g2->nodes[5].attrs.name = "m";
  g2->nodes[5].type = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(1), IR_SYM(1)});
  EXPECT_VERIFY_ERROR(a, g2, "%6 (attention): attention mask must be bool of rank 3");
  /* a mask of the wrong dtype */
  g2->nodes[5].type = ir_type(IR_F32, 3, (IrDim[]){IR_CONST(1), IR_SYM(1), IR_SYM(1)});
  EXPECT_VERIFY_ERROR(a, g2, "%6 (attention): attention mask must be bool of rank 3");
  g2->nodes[5].type = ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(1), IR_CONST(3)});
  EXPECT_VERIFY_ERROR(a, g2, "%6 (attention): attention mask key dim must be Tk");
  arena_destroy(a);
}

Test(verify, mask_causal_declared_type) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[5].type.dims[0] = IR_CONST(2);
  EXPECT_VERIFY_ERROR(a, g, "%5 (mask.causal): mask.causal result must be bool[1,Tq,Tk]");
  arena_destroy(a);
}

/* a kv.append result is a view of its state: attention k / v only, never
 * an output; one kv.append per state; state names unique */
Test(verify, kv_append_views) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  IrType ts = ir_type(IR_F32, 3, (IrDim[]){IR_CONST(2), IR_CONST(8), IR_CONST(16)});
  IrAttrs sa = attrs0();
  sa.name = "cache";
  int st = ir_build_typed(g, IR_OP_STATE, NULL, 0, &sa, ts, L);
  IrType tv = g->nodes[0].type; /* f32[B,S,16]: P = 0 */
  int kv = ir_build_typed(g, IR_OP_KV_APPEND, (int[]){st, 0}, 2, NULL, tv, L);
  IrAttrs at = attrs0();
  at.heads = 4;
  at.scale = 0.25;
  ir_graph_add_output(g, "w", ir_build(g, IR_OP_ATTENTION, (int[]){0, kv, kv}, 3, &at, L));
  verify_ok(a, g);
  int r = ir_build(g, IR_OP_RELU, (int[]){kv}, 1, NULL, L);
  ir_graph_add_output(g, "r", r);
  EXPECT_VERIFY_ERROR(a, g, "(relu): operand 0 is kv.append %8, which only attention k / v may read");
  g->n_outputs--;
  g->n_nodes--;
  ir_graph_add_output(g, "kv", kv);
  EXPECT_VERIFY_ERROR(a, g, "%8 (kv.append): a kv.append result cannot be an output");
  g->n_outputs--;
  ir_build_typed(g, IR_OP_KV_APPEND, (int[]){st, 0}, 2, NULL, tv, L);
  EXPECT_VERIFY_ERROR(a, g, "%10 (kv.append): state %7 is already appended to by %8");
  arena_destroy(a);
}

/* derived params concatenate params only, and are named among the params;
 * slices lie within their operand's (constant) axis */
Test(verify, param_concat_and_slice) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  IrAttrs at = attrs0();
  at.name = "ww";
  int cc = ir_build(g, IR_OP_PARAM_CONCAT, (int[]){1, 1}, 2, &at, L); /* f32[16,16] */
  IrAttrs sl = attrs0();
  sl.axis = 2;
  sl.start = 8;
  IrType t8 = g->nodes[3].type; /* f32[B,S,8] */
  int s = ir_build_typed(g, IR_OP_SLICE, (int[]){0}, 1, &sl, t8, L);
  ir_graph_add_output(g, "cc", cc);
  ir_graph_add_output(g, "s", s);
  verify_ok(a, g);
  g->nodes[s].attrs.start = 9; /* 9..17 of 16 */
  EXPECT_VERIFY_ERROR(a, g, "(slice): slice 9..17 must lie within a constant dim of 16");
  g->nodes[s].attrs.start = -1;
  EXPECT_VERIFY_ERROR(a, g, "(slice): slice -1..7 must lie within a constant dim of 16");
  g->nodes[s].attrs.start = 8;
  g->nodes[cc].operands[1] = 3; /* the linear's result */
  EXPECT_VERIFY_ERROR(a, g, "(param.concat): param.concat operand 1 is not a param");
  g->nodes[cc].operands[1] = 1;
  g->nodes[cc].attrs.name = "w"; /* a param's name */
  EXPECT_VERIFY_ERROR(a, g, "(param.concat): duplicate param.concat name \"w\" (also %1)");
  arena_destroy(a);
}

Test(verify, float_attrs) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "f");
  int x = ir_build_input(g, "x", ir_type1(IR_F32, 4), L);
  IrAttrs at = attrs0();
  at.eps = 1e-5;
  int ln = ir_build(g, IR_OP_LAYERNORM, (int[]){x, x, x}, 3, &at, L);
  at = attrs0();
  at.factor = 2;
  int sc = ir_build(g, IR_OP_SCALE, (int[]){x}, 1, &at, L);
  at = attrs0();
  at.value = 1;
  int c = ir_build(g, IR_OP_CONST, NULL, 0, &at, L);
  verify_ok(a, g);
  g->nodes[ln].attrs.eps = -1e-5;
  EXPECT_VERIFY_ERROR(a, g, "%1 (layernorm): eps must be a finite number >= 0, got -1e-05");
  g->nodes[ln].attrs.eps = NAN;
  EXPECT_VERIFY_ERROR(a, g, "%1 (layernorm): eps must be a finite number >= 0, got nan");
  g->nodes[ln].attrs.eps = 0; /* allowed */
  verify_ok(a, g);
  g->nodes[sc].attrs.factor = -INFINITY;
  EXPECT_VERIFY_ERROR(a, g, "%2 (scale): factor must be a finite number, got -inf");
  g->nodes[sc].attrs.factor = 2;
  g->nodes[c].attrs.value = NAN;
  EXPECT_VERIFY_ERROR(a, g, "%3 (const): value must be a finite number, got nan");
  g->nodes[c].attrs.value = 1;
  g->nodes[c].type = ir_type1(IR_F32, 1);
  EXPECT_VERIFY_ERROR(a, g, "%3 (const): type f32[1] does not match the inferred f32[]");
  arena_destroy(a);
}

Test(verify, take_and_reshape) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "t");
  int B = ir_graph_add_symbol(g, "B", 3);
  int x =
      ir_build_input(g, "x", ir_type(IR_F32, 3, (IrDim[]){IR_SYM(B), IR_CONST(4), IR_CONST(6)}), L);
  IrAttrs at = attrs0();
  at.axis = 1;
  at.index = 3;
  int t = ir_build(g, IR_OP_TAKE, (int[]){x}, 1, &at, L);
  int r = ir_build_typed(g, IR_OP_RESHAPE, (int[]){x}, 1, NULL,
                         ir_type(IR_F32, 2, (IrDim[]){IR_SYM(B), IR_CONST(24)}), L);
  verify_ok(a, g);
  g->nodes[t].attrs.index = 4;
  EXPECT_VERIFY_ERROR(a, g, "%1 (take): take index 4 out of range");
  g->nodes[t].attrs.index = 3;
  g->nodes[t].attrs.axis = 3;
  EXPECT_VERIFY_ERROR(a, g, "%1 (take): take axis 3 out of range");
  g->nodes[t].attrs.axis = 1;
  g->nodes[r].type.dims[1] = IR_CONST(25);
  EXPECT_VERIFY_ERROR(a, g, "%2 (reshape): reshape must keep the element count");
  arena_destroy(a);
}

Test(verify, symbols) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->syms[1].max = 0;
  EXPECT_VERIFY_ERROR(a, g, "error: symbol \"S\": max must be >= 1, got 0");
  g->syms[1].max = 8;
  g->syms[1].name = "B";
  EXPECT_VERIFY_ERROR(a, g, "error: symbol \"B\" is declared twice (#0 and #1)");
  g->syms[1].name = "";
  EXPECT_VERIFY_ERROR(a, g, "error: symbol #1 has no name");
  g->syms[1].name = "S";
  g->n_syms = 9;
  EXPECT_VERIFY_ERROR(a, g, "error: the graph has 9 symbols (0..8 allowed)");
  g->n_syms = 2;
  verify_ok(a, g);
  arena_destroy(a);
}

/* Several problems: all reported, each once. */
Test(verify, reports_every_problem) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[4].operands[0] = 6;
  g->nodes[6].attrs.heads = 5;
  ir_graph_add_output(g, "z", 4);
  int n;
  const char *got = verify_fail(a, g, &n);
  cr_assert_eq(n, 3, "%s", got);
  cr_assert(strstr(got, "%4 (relu): operand 0 refers to %6"), "%s", got);
  cr_assert(strstr(got, "%6 (attention): attention heads must divide the model dim"), "%s", got);
  cr_assert(strstr(got, "duplicate output name \"z\""), "%s", got);
  arena_destroy(a);
}

/* Names in messages are shown escaped: a hostile name cannot forge lines. */
Test(verify, hostile_names_in_messages) {
  Arena *a = arena_create();
  IrGraph *g = base(a);
  g->nodes[1].attrs.name = "evil\nm.tfm:1:1: error: forged";
  g->nodes[2].attrs.name = "evil\nm.tfm:1:1: error: forged";
  const char *got = verify_fail(a, g, NULL);
  cr_assert(strstr(got, "duplicate param name \"evil\\x0Am.tfm:1:1: error: forged\""), "%s", got);
  cr_assert_null(strstr(got, "\nm.tfm:1:1"), "%s", got);
  arena_destroy(a);
}
