/* tests/ir/test_roundtrip.c — the textual IR: print -> parse -> print is
 * byte-identical for graphs that use every op in ops.def, hostile names and
 * awkward floating-point attributes; the printed form is pinned by a golden
 * file; the parser accepts the flexible forms (comments, free whitespace,
 * any increasing value numbers, bare graph names) and renumbers values. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static char *print_str(const IrGraph *g) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  cr_assert(f);
  ir_graph_print(g, f);
  fclose(f);
  return s;
}

/* Parses text; fails the test with the diagnostics if it does not parse. */
static IrGraph *parse_ok(Arena *a, const char *name, const char *text) {
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_from_string(a, name, text);
  IrGraph *g = ir_graph_parse(a, src, &d);
  cr_assert(g, "parse failed:\n%s\n--- input:\n%s", d.captured ? d.captured : "", text);
  cr_assert_eq(d.n_errors, 0);
  return g;
}

/* print(g) == print(parse(print(g))); returns the parsed graph. */
static IrGraph *check_roundtrip(Arena *a, const IrGraph *g) {
  char *t1 = print_str(g);
  IrGraph *g2 = parse_ok(a, "roundtrip.tfir", t1);
  char *t2 = print_str(g2);
  cr_assert_str_eq(t2, t1, "round trip differs:\n%s\n--- vs ---\n%s", t1, t2);
  free(t1);
  free(t2);
  return g2;
}

static IrAttrs attrs0(void) {
  IrAttrs at;
  memset(&at, 0, sizeof at);
  return at;
}

/* A small model that uses every op in ops.def. Keep it that way: the
 * coverage test below fails when an op is added and not used here. */
static IrGraph *build_all_ops(Arena *a) {
  IrGraph *g = ir_graph_create(a, "all_ops");
  int B = ir_graph_add_symbol(g, "B", 4);
  int S = ir_graph_add_symbol(g, "S", 16);
  IrLoc L = {"all_ops.tfm", 3, 5};
  IrLoc none = {NULL, 0, 0};
  IrAttrs at = attrs0();

  int tok = ir_build_input(g, "tokens", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(B), IR_SYM(S)}), L);
  int pad = ir_build_input(g, "pad_mask", ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(B), IR_SYM(S)}), L);
  int emb = ir_build_param(g, "embed.weight", ir_type2(IR_F32, 100, 16), L);
  int x = ir_build(g, IR_OP_EMBED, (int[]){emb, tok}, 2, NULL, (IrLoc){"all_ops.tfm", 4, 3});
  int pos = ir_build_typed(g, IR_OP_ARANGE, NULL, 0, NULL, ir_type(IR_I32, 1, (IrDim[]){IR_SYM(S)}),
                           none);
  int pe = ir_build_typed(g, IR_OP_SINUSOID, (int[]){pos}, 1, NULL,
                          ir_type(IR_F32, 2, (IrDim[]){IR_SYM(S), IR_CONST(16)}), none);
  at = attrs0();
  at.value = 4.0;
  int c4 = ir_build(g, IR_OP_CONST, NULL, 0, &at, none);
  int xs = ir_build(g, IR_OP_MUL, (int[]){x, c4}, 2, NULL, none);
  int h = ir_build(g, IR_OP_ADD, (int[]){xs, pe}, 2, NULL, none);
  int lg = ir_build_param(g, "ln.weight", ir_type1(IR_F32, 16), L);
  int lb = ir_build_param(g, "ln.bias", ir_type1(IR_F32, 16), L);
  at = attrs0();
  at.eps = 1e-5;
  int n1 = ir_build(g, IR_OP_LAYERNORM, (int[]){h, lg, lb}, 3, &at, L);
  at.eps = 1e-6;
  at.unbiased = true;
  int n2 = ir_build(g, IR_OP_LAYERNORM, (int[]){h, lg, lb}, 3, &at, L);
  int qw = ir_build_param(g, "q.weight", ir_type2(IR_F32, 16, 16), L);
  int qb = ir_build_param(g, "q.bias", ir_type1(IR_F32, 16), L);
  int q = ir_build(g, IR_OP_LINEAR, (int[]){n1, qw, qb}, 3, NULL, L);
  int k = ir_build(g, IR_OP_LINEAR, (int[]){n2, qw}, 2, NULL, L);
  /* linears with an epilogue: relu(n2 qw^T) + k; gelu_tanh(n1 qw^T + qb) + q */
  at = attrs0();
  at.act = IR_ACT_RELU;
  at.residual = true;
  int ke = ir_build(g, IR_OP_LINEAR, (int[]){n2, qw, k}, 3, &at, L);
  at.act = IR_ACT_GELU_TANH;
  int qe = ir_build(g, IR_OP_LINEAR, (int[]){n1, qw, qb, q}, 4, &at, L);
  int causal = ir_build_typed(g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                              ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(S), IR_SYM(S)}), L);
  int padm = ir_build_typed(g, IR_OP_RESHAPE, (int[]){pad}, 1, NULL,
                            ir_type(IR_BOOL, 3, (IrDim[]){IR_SYM(B), IR_CONST(1), IR_SYM(S)}), L);
  int mask = ir_build(g, IR_OP_AND, (int[]){causal, padm}, 2, NULL, L);
  at = attrs0();
  at.heads = 4;
  at.scale = 0.5;
  int att = ir_build(g, IR_OP_ATTENTION, (int[]){q, k, k, mask}, 4, &at, L);
  int att3 = ir_build(g, IR_OP_ATTENTION, (int[]){qe, ke, ke}, 3, &at, L);
  int probs = ir_build(g, IR_OP_ATTN_PROBS, (int[]){q, k, padm}, 3, &at, L);
  int mix = ir_build(g, IR_OP_ATTN_MIX, (int[]){probs, k}, 2, &at, L);
  /* q and k as one projection over a derived weight, read back through
   * slices, into the flash form */
  at = attrs0();
  at.name = "qk.weight";
  int qkw = ir_build(g, IR_OP_PARAM_CONCAT, (int[]){qw, qw}, 2, &at, L);
  int qk = ir_build(g, IR_OP_LINEAR, (int[]){n1, qkw}, 2, NULL, L);
  at = attrs0();
  at.axis = 2;
  at.start = 16;
  int ks = ir_build_typed(g, IR_OP_SLICE, (int[]){qk}, 1, &at,
                          ir_type(IR_F32, 3, (IrDim[]){IR_SYM(B), IR_SYM(S), IR_CONST(16)}), L);
  at = attrs0();
  at.heads = 4;
  at.scale = 0.5;
  int fl = ir_build(g, IR_OP_ATTENTION_FLASH, (int[]){q, ks, ks, mask}, 4, &at, L);
  mix = ir_build(g, IR_OP_ADD, (int[]){mix, fl}, 2, NULL, L);
  int d1 = ir_build(g, IR_OP_SUB, (int[]){att, mix}, 2, NULL, L);
  int d2 = ir_build(g, IR_OP_DIV, (int[]){d1, c4}, 2, NULL, L);
  at = attrs0();
  at.factor = 0.125;
  int sc = ir_build(g, IR_OP_SCALE, (int[]){d2}, 1, &at, L);
  int r = ir_build(g, IR_OP_RELU, (int[]){sc}, 1, NULL, L);
  int ge = ir_build(g, IR_OP_GELU, (int[]){r}, 1, NULL, L);
  int gt = ir_build(g, IR_OP_GELU_TANH, (int[]){ge}, 1, NULL, L);
  int th = ir_build(g, IR_OP_TANH, (int[]){gt}, 1, NULL, L);
  int sum = ir_build(g, IR_OP_ADD, (int[]){th, att3}, 2, NULL, L);
  int sm = ir_build(g, IR_OP_SOFTMAX, (int[]){sum}, 1, NULL, L);
  int lsm = ir_build(g, IR_OP_LOG_SOFTMAX, (int[]){sm}, 1, NULL, L);
  at = attrs0();
  at.axis = 1;
  at.index = 0;
  int cls = ir_build(g, IR_OP_TAKE, (int[]){lsm}, 1, &at, L);
  /* a generation step: keys appended to a cache and attended over in
   * place, the last query row kept */
  at = attrs0();
  at.name = "cache.k";
  int st = ir_build_typed(g, IR_OP_STATE, NULL, 0, &at,
                          ir_type(IR_F32, 3, (IrDim[]){IR_CONST(4), IR_CONST(16), IR_CONST(16)}), L);
  int kv = ir_build_typed(g, IR_OP_KV_APPEND, (int[]){st, k}, 2, NULL,
                          ir_type(IR_F32, 3, (IrDim[]){IR_SYM(B), IR_SYM(S), IR_CONST(16)}), L);
  at = attrs0();
  at.heads = 4;
  at.scale = 0.5;
  int satt = ir_build(g, IR_OP_ATTENTION, (int[]){q, kv, kv, causal}, 4, &at, L);
  at = attrs0();
  at.axis = 1;
  int tl = ir_build_typed(g, IR_OP_TAIL, (int[]){satt}, 1, &at,
                          ir_type(IR_F32, 3, (IrDim[]){IR_SYM(B), IR_CONST(2), IR_CONST(16)}), L);
  at.index = -1;
  int last = ir_build(g, IR_OP_TAKE, (int[]){tl}, 1, &at, L);
  /* fusions: an elementwise body (a gather by ids and by positions, a
   * scale), add + layernorm with the sum as result 1 read by another */
  at = attrs0();
  at.fusion = "elementwise";
  at.expr = "scale(add(embed($0, $1), embed($0, arange[S])), 0.25)";
  int fe = ir_build(g, IR_OP_FUSED, (int[]){emb, tok}, 2, &at, L);
  at = attrs0();
  at.fusion = "add_layernorm_sum";
  at.eps = 1e-5;
  int fa = ir_build(g, IR_OP_FUSED, (int[]){x, pe, lg, lb}, 4, &at, L);
  at = attrs0();
  at.index = 1;
  int rs = ir_build(g, IR_OP_RESULT, (int[]){fa}, 1, &at, L);
  at = attrs0();
  at.fusion = "add_layernorm";
  at.eps = 1e-6;
  at.unbiased = true;
  int fu = ir_build(g, IR_OP_FUSED, (int[]){fe, rs, lg, lb}, 4, &at, L);
  ir_graph_add_output(g, "class_logits", cls);
  ir_graph_add_output(g, "hidden", lsm);
  ir_graph_add_output(g, "step", last);
  ir_graph_add_output(g, "fused", fu);
  return g;
}

static void mark_ops(const IrGraph *g, bool *seen) {
  for (int i = 0; i < g->n_nodes; i++)
    seen[g->nodes[i].op] = true;
}

static char *read_text(Arena *a, const char *path) {
  char err[256];
  SrcFile *f = src_file_read(a, path, err, sizeof err);
  cr_assert(f, "%s", err);
  return (char *)f->text;
}

Test(roundtrip, all_ops_builder_graph) {
  Arena *a = arena_create();
  IrGraph *g = build_all_ops(a);
  Diags d;
  diags_init(&d, a, NULL);
  cr_assert(ir_graph_verify(g, &d), "%s", d.captured);
  IrGraph *g2 = check_roundtrip(a, g);
  cr_assert_eq(g2->n_nodes, g->n_nodes);
  for (int i = 0; i < g->n_nodes; i++) {
    cr_assert_eq(g2->nodes[i].op, g->nodes[i].op);
    cr_assert(ir_type_eq(&g2->nodes[i].type, &g->nodes[i].type));
    cr_assert_eq(g2->nodes[i].n_operands, g->nodes[i].n_operands);
    cr_assert_eq(g2->nodes[i].loc.line, g->nodes[i].loc.line);
    cr_assert_eq(g2->nodes[i].loc.file == NULL, g->nodes[i].loc.file == NULL);
  }
  arena_destroy(a);
}

/* The printed form is pinned: tests/ir/all_ops.tfir is print(build_all_ops). */
Test(roundtrip, golden_file) {
  Arena *a = arena_create();
  char *golden = read_text(a, TFMC_SOURCE_DIR "/tests/ir/all_ops.tfir");
  char *t = print_str(build_all_ops(a));
  cr_assert_str_eq(t, golden, "printer output changed:\n%s", t);
  IrGraph *g = parse_ok(a, "all_ops.tfir", golden);
  char *t2 = print_str(g);
  cr_assert_str_eq(t2, golden);
  free(t);
  free(t2);
  arena_destroy(a);
}

/* Every op in ops.def appears in the round-trip corpus. */
Test(roundtrip, every_op_is_covered) {
  Arena *a = arena_create();
  bool seen[IR_OP_COUNT] = {0};
  mark_ops(check_roundtrip(a, build_all_ops(a)), seen);
  mark_ops(parse_ok(a, "all_ops.tfir", read_text(a, TFMC_SOURCE_DIR "/tests/ir/all_ops.tfir")),
           seen);
  for (int op = 0; op < IR_OP_COUNT; op++)
    cr_expect(seen[op], "op '%s' is not in the round-trip corpus; add it to build_all_ops",
              ir_op_info[op].name);
  arena_destroy(a);
}

Test(roundtrip, hostile_names) {
  static const char *names[] = {
      "quote\"in",
      "back\\slash",
      "new\nline",
      "tab\there",
      "ctl\x01\x1f\x7f",
      "caf\xc3\xa9 \xe2\x88\x9a",
      "*/ /* -- */",
      "%0 = input",
      "}",
      "",
      "\xff\xfe not utf8",
      "# not a comment",
      "@\"x\":1:2",
      "\\x41",
      "{heads=3}",
      " spaced ",
  };
  int n = (int)(sizeof names / sizeof names[0]);
  for (int i = 0; i < n; i++) {
    Arena *a = arena_create();
    /* graph name, input name, param name, output name, location file, symbol */
    IrGraph *g = ir_graph_create(a, names[i]);
    const char *symname = names[i][0] ? names[i] : "B";
    int s = ir_graph_add_symbol(g, symname, 3);
    const char *nm = names[i][0] ? names[i] : "x";
    IrLoc L = {names[i], 7, 9};
    int x = ir_build_input(g, nm, ir_type(IR_F32, 2, (IrDim[]){IR_SYM(s), IR_CONST(5)}), L);
    int w = ir_build_param(g, nm, ir_type2(IR_F32, 2, 5), L);
    int y = ir_build(g, IR_OP_LINEAR, (int[]){x, w}, 2, NULL, L);
    ir_graph_add_output(g, nm, y);
    Diags d;
    diags_init(&d, a, NULL);
    cr_assert(ir_graph_verify(g, &d), "%s", d.captured);
    IrGraph *g2 = check_roundtrip(a, g);
    cr_assert_str_eq(g2->name, names[i]);
    cr_assert_str_eq(g2->syms[0].name, symname);
    cr_assert_str_eq(g2->nodes[0].attrs.name, nm);
    cr_assert_str_eq(g2->nodes[1].attrs.name, nm);
    cr_assert_str_eq(g2->outputs[0].name, nm);
    cr_assert_str_eq(g2->nodes[2].loc.file, names[i]);
    cr_assert_eq(g2->nodes[2].loc.line, 7);
    cr_assert_eq(g2->nodes[2].loc.col, 9);
    arena_destroy(a);
  }
}

Test(roundtrip, escapes_are_canonical) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "a\"b\\c\nd\te\x01"
                                  "f\x7f"
                                  "g\xc3\xa9");
  char *t = print_str(g);
  cr_assert_str_eq(t, "graph \"a\\\"b\\\\c\\nd\\te\\x01f\\x7Fg\xc3\xa9\" {\n}\n");
  free(t);
  arena_destroy(a);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* A graph whose float attributes are v: const value, scale factor,
 * layernorm eps (|v|), attention scale. */
static IrGraph *float_graph(Arena *a, double v) {
  IrGraph *g = ir_graph_create(a, "floats");
  IrLoc none = {NULL, 0, 0};
  IrAttrs at = attrs0();
  at.value = v;
  ir_build(g, IR_OP_CONST, NULL, 0, &at, none);
  int x = ir_build_input(
      g, "x", ir_type(IR_F32, 3, (IrDim[]){IR_CONST(1), IR_CONST(2), IR_CONST(4)}), none);
  at = attrs0();
  at.factor = v;
  ir_build(g, IR_OP_SCALE, (int[]){x}, 1, &at, none);
  int p = ir_build_param(g, "p", ir_type1(IR_F32, 4), none);
  at = attrs0();
  at.eps = fabs(v);
  ir_build(g, IR_OP_LAYERNORM, (int[]){x, p, p}, 3, &at, none);
  at = attrs0();
  at.heads = 2;
  at.scale = v;
  ir_build(g, IR_OP_ATTENTION, (int[]){x, x, x}, 3, &at, none);
  return g;
}

static void check_float(double v) {
  Arena *a = arena_create();
  IrGraph *g2 = check_roundtrip(a, float_graph(a, v));
  double eps = fabs(v);
  cr_assert(memcmp(&g2->nodes[0].attrs.value, &v, sizeof v) == 0, "value %.17g", v);
  cr_assert(memcmp(&g2->nodes[2].attrs.factor, &v, sizeof v) == 0, "factor %.17g", v);
  cr_assert(memcmp(&g2->nodes[4].attrs.eps, &eps, sizeof v) == 0, "eps %.17g", v);
  cr_assert(memcmp(&g2->nodes[5].attrs.scale, &v, sizeof v) == 0, "scale %.17g", v);
  arena_destroy(a);
}

Test(roundtrip, float_attrs_bit_identical) {
  static const double fixed[] = {
      0.0,
      -0.0,
      1.0,
      -1.0,
      1e-5,
      1e-6,
      1e-12,
      0.1,
      1.0 / 3.0,
      0.125,
      0.14433756729740643 /* 1/sqrt(48) */,
      1e9,
      -1e9,
      DBL_MAX,
      -DBL_MAX,
      DBL_MIN,
      4.9406564584124654e-324 /* smallest subnormal */,
      2.2250738585072009e-308,
      (double)0.1f,
      (double)1e-5f,
      (double)FLT_MAX,
      (double)FLT_MIN,
      123456789.0,
      1e22,
      9007199254740993.0,
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    check_float(fixed[i]);
  for (int i = 0; i < 300; i++) { /* random finite doubles, by bit pattern */
    uint64_t bits = rng_next();
    double v;
    memcpy(&v, &bits, sizeof v);
    if (!isfinite(v))
      continue;
    check_float(v);
  }
  for (int i = 0; i < 300; i++) { /* random floats widened to double */
    uint32_t bits = (uint32_t)rng_next();
    float f;
    memcpy(&f, &bits, sizeof f);
    if (!isfinite(f))
      continue;
    check_float((double)f);
  }
}

Test(roundtrip, floats_print_short) {
  Arena *a = arena_create();
  char *t = print_str(float_graph(a, 1e-5));
  cr_assert(strstr(t, "{value=1e-05}"), "%s", t);
  cr_assert(strstr(t, "{eps=1e-05, unbiased=false}"), "%s", t);
  cr_assert(strstr(t, "{heads=2, scale=1e-05}"), "%s", t);
  free(t);
  /* a float widened to double prints with 9 digits and reads back exactly */
  t = print_str(float_graph(a, (double)0.1f));
  cr_assert(strstr(t, "{factor=0.100000001}") == NULL, "%s", t);
  cr_assert(strstr(t, "{factor=0.10000000149011612}"), "%s", t);
  free(t);
  arena_destroy(a);
}

/* Free layout, comments, any increasing value numbers, a bare graph name:
 * all read back into the canonical form. */
Test(roundtrip, flexible_input_is_renumbered) {
  Arena *a = arena_create();
  const char *in = "# a comment before the graph\n"
                   "graph tiny {   # bare name\n"
                   "  sym B max 8 sym\n S max\n 128\n"
                   "  %10 = input \"x\" : f32[B,S,64] @\"t.tfm\":1:2   # trailing comment\n"
                   "  %20=param \"w\":f32[32,64]\n"
                   "  %21 = param \"b\"\n   : f32[32]\n"
                   "\t%99 = linear %10,%20 ,\n %21 : f32[B,S,32]\n"
                   "  %1000 = layernorm %99, %21, %21 {unbiased=true, eps=0.5} : f32[B,S,32]\n"
                   "  %1001 = mask.causal {} : bool[1,S,S]\n"
                   "  output \"y\" = %1000 output \"m\"=%1001\n"
                   "}\n# trailing comment\n";
  IrGraph *g = parse_ok(a, "flex.tfir", in);
  char *t = print_str(g);
  const char *want = "graph \"tiny\" {\n"
                     "  sym B max 8\n"
                     "  sym S max 128\n"
                     "  %0 = input \"x\" : f32[B,S,64] @\"t.tfm\":1:2\n"
                     "  %1 = param \"w\" : f32[32,64]\n"
                     "  %2 = param \"b\" : f32[32]\n"
                     "  %3 = linear %0, %1, %2 : f32[B,S,32]\n"
                     "  %4 = layernorm %3, %2, %2 {eps=0.5, unbiased=true} : f32[B,S,32]\n"
                     "  %5 = mask.causal : bool[1,S,S]\n"
                     "  output \"y\" = %4\n"
                     "  output \"m\" = %5\n"
                     "}\n";
  cr_assert_str_eq(t, want);
  cr_assert_eq(g->nodes[3].operands[2], 2);
  cr_assert_eq(g->outputs[0].value, 4);
  free(t);
  arena_destroy(a);
}

Test(roundtrip, quoted_symbol_names) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "q");
  int s1 = ir_graph_add_symbol(g, "seq len", 9);
  int s2 = ir_graph_add_symbol(g, "x.y_1", 9);
  int s3 = ir_graph_add_symbol(g, "1st", 9);
  ir_build_input(g, "x", ir_type(IR_I32, 3, (IrDim[]){IR_SYM(s1), IR_SYM(s2), IR_SYM(s3)}),
                 (IrLoc){0});
  char *t = print_str(g);
  cr_assert(strstr(t, "sym \"seq len\" max 9\n  sym x.y_1 max 9\n  sym \"1st\" max 9\n"), "%s", t);
  cr_assert(strstr(t, ": i32[\"seq len\",x.y_1,\"1st\"]\n"), "%s", t);
  free(t);
  check_roundtrip(a, g);
  arena_destroy(a);
}

Test(roundtrip, locations_are_interned) {
  Arena *a = arena_create();
  IrGraph *g = parse_ok(a, "loc.tfir",
                        "graph \"g\" {\n"
                        "  %0 = input \"x\" : f32[2] @\"m.tfm\":1:1\n"
                        "  %1 = relu %0 : f32[2] @\"m.tfm\":2:1\n"
                        "  %2 = relu %1 : f32[2] @\"other.tfm\":0:0\n"
                        "  %3 = relu %2 : f32[2]\n"
                        "}\n");
  cr_assert_str_eq(g->nodes[0].loc.file, "m.tfm");
  cr_assert_eq(g->nodes[0].loc.file, g->nodes[1].loc.file);
  cr_assert_str_eq(g->nodes[2].loc.file, "other.tfm");
  cr_assert_null(g->nodes[3].loc.file);
  cr_assert_eq(g->nodes[3].loc.line, 0);
  check_roundtrip(a, g);
  arena_destroy(a);
}

Test(roundtrip, empty_graph_and_scalars) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "");
  check_roundtrip(a, g);
  IrAttrs at = attrs0();
  at.value = -2.5;
  int c = ir_build(g, IR_OP_CONST, NULL, 0, &at, (IrLoc){0});
  ir_graph_add_output(g, "c", c);
  char *t = print_str(g);
  cr_assert_str_eq(t, "graph \"\" {\n  %0 = const {value=-2.5} : f32[]\n  output \"c\" = %0\n}\n");
  free(t);
  check_roundtrip(a, g);
  arena_destroy(a);
}

Test(roundtrip, type_print) {
  Arena *a = arena_create();
  IrGraph *g = ir_graph_create(a, "t");
  int B = ir_graph_add_symbol(g, "B", 2);
  IrType t = ir_type(IR_BOOL, 3, (IrDim[]){IR_SYM(B), IR_CONST(1), IR_CONST(77)});
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  ir_type_print(g, &t, f);
  fputc(' ', f);
  IrType sc = ir_type(IR_I32, 0, NULL);
  ir_type_print(g, &sc, f);
  fclose(f);
  cr_assert_str_eq(s, "bool[B,1,77] i32[]");
  free(s);
  arena_destroy(a);
}
