/* tests/common/op_cases.h — one small graph per op of the op table, with
 * random inputs (symbolic dims B, S bound below their maxima) and weights:
 * the cases the backend parity tests (tests/e2e: interpreter vs JIT;
 * tests/c: interpreter vs emitted C) run. The case table is generated from
 * ops.def, so an op without a case function does not compile.
 *
 *     Case c;
 *     op_case_build(&c, IR_OP_SOFTMAX, seed);   // c.g, c.in[0..n_in), c.w
 *     ...
 *     arena_destroy(c.a);
 *
 * Header-only (static functions) for the test executables that include it. */
#ifndef TFMC_TESTS_OP_CASES_H
#define TFMC_TESTS_OP_CASES_H

#include "backends/interp/interp.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

typedef struct Case {
  Arena *a;
  IrGraph *g;
  int sym_b, sym_s;
  Tensor in[6];
  int64_t vocab[6]; /* ids inputs: exclusive bound (0 for others) */
  int n_in;
  Weight w[8];
  int n_w;
  uint64_t rng;
  int mask; /* the key-mask input, built once (0: not yet) */
} Case;

static float frand(Case *c) {
  c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((c->rng >> 40) & 0xFFFFFF) / (float)0x1000000 * 2.0f - 1.0f;
}

static const IrLoc LOC = {"op_case.tfm", 1, 1};
enum { B = 2, S = 3 };

static IrType tbsd(Case *c, IrDtype dt, int64_t d) {
  return ir_type(dt, 3, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s), IR_CONST(d)});
}

/* an input with concrete dims (symbols bound to B, S) and random data */
static int input(Case *c, const char *name, IrType t, int64_t id_bound) {
  Tensor *x = &c->in[c->n_in];
  c->vocab[c->n_in++] = id_bound;
  x->name = name;
  x->dtype = t.dtype;
  x->rank = t.rank;
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) {
    IrDim d = t.dims[i];
    x->dims[i] = d.sym < 0 ? d.value : d.sym == c->sym_b ? B : S;
    n *= x->dims[i];
  }
  x->data = arena_alloc(c->a, (size_t)n * 4 + 4);
  for (int64_t i = 0; i < n; i++) {
    if (t.dtype == IR_F32) ((float *)x->data)[i] = frand(c) * 2;
    else if (t.dtype == IR_I32) ((int32_t *)x->data)[i] = (int32_t)((frand(c) + 1) * 0.5 * (double)id_bound) % (int32_t)id_bound;
    else ((uint8_t *)x->data)[i] = (uint8_t)(i % 3 != 2); /* never all zero per row */
  }
  return ir_build_input(c->g, name, t, LOC);
}

static int param(Case *c, const char *name, IrType t, float offset) {
  Weight *w = &c->w[c->n_w++];
  w->name = name;
  w->type = t;
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) n *= t.dims[i].value;
  w->data = arena_alloc(c->a, (size_t)n * 4);
  for (int64_t i = 0; i < n; i++) w->data[i] = offset + frand(c);
  return ir_build_param(c->g, name, t, LOC);
}

static int x_bsd(Case *c, int64_t d) { return input(c, "x", tbsd(c, IR_F32, d), 0); }

static IrAttrs attrs(void) {
  IrAttrs a;
  memset(&a, 0, sizeof a);
  return a;
}

static void out(Case *c, const char *name, int v) { ir_graph_add_output(c->g, name, v); }

static int unary(Case *c, IrOp op) {
  IrAttrs at = attrs();
  at.factor = 1.7;
  return ir_build(c->g, op, (int[]){x_bsd(c, 5)}, 1, &at, LOC);
}

static int binary(Case *c, IrOp op) {
  int x = x_bsd(c, 4);
  int y = param(c, "y", ir_type(IR_F32, 2, (IrDim[]){IR_CONST(1), IR_CONST(4)}), op == IR_OP_DIV ? 3.0f : 0.0f);
  return ir_build(c->g, op, (int[]){x, y}, 2, NULL, LOC);
}

static int key_mask(Case *c) {
  if (!c->mask)
    c->mask = input(c, "mask", ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s)}), 0);
  int m = c->mask;
  return ir_build_typed(c->g, IR_OP_RESHAPE, (int[]){m}, 1, NULL,
                        ir_type(IR_BOOL, 3, (IrDim[]){IR_SYM(c->sym_b), IR_CONST(1), IR_SYM(c->sym_s)}), LOC);
}

static int causal(Case *c) {
  return ir_build_typed(c->g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                        ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(c->sym_s), IR_SYM(c->sym_s)}), LOC);
}

static int arange(Case *c) {
  return ir_build_typed(c->g, IR_OP_ARANGE, NULL, 0, NULL, ir_type(IR_I32, 1, (IrDim[]){IR_SYM(c->sym_s)}), LOC);
}

/* ---- one case per op ---- */

static void case_INPUT(Case *c) { out(c, "y", x_bsd(c, 3)); }
static void case_PARAM(Case *c) { out(c, "y", param(c, "w", ir_type2(IR_F32, 3, 5), 0)); }
static void case_CONST(Case *c) {
  IrAttrs at = attrs();
  at.value = 2.5;
  int k = ir_build(c->g, IR_OP_CONST, NULL, 0, &at, LOC);
  out(c, "y", ir_build(c->g, IR_OP_MUL, (int[]){x_bsd(c, 3), k}, 2, NULL, LOC));
}
static void case_ARANGE(Case *c) {
  x_bsd(c, 1); /* binds S */
  out(c, "y", arange(c));
}
static void case_SINUSOID(Case *c) {
  x_bsd(c, 1);
  out(c, "y", ir_build_typed(c->g, IR_OP_SINUSOID, (int[]){arange(c)}, 1, NULL,
                             ir_type(IR_F32, 2, (IrDim[]){IR_SYM(c->sym_s), IR_CONST(7)}), LOC));
}
static void case_EMBED(Case *c) {
  int table = param(c, "table", ir_type2(IR_F32, 9, 4), 0);
  int ids = input(c, "ids", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s)}), 9);
  out(c, "y", ir_build(c->g, IR_OP_EMBED, (int[]){table, ids}, 2, NULL, LOC));
  /* positions through the same kernel */
  out(c, "pos", ir_build(c->g, IR_OP_EMBED, (int[]){table, arange(c)}, 2, NULL, LOC));
}
static void case_ADD(Case *c) { out(c, "y", binary(c, IR_OP_ADD)); }
static void case_SUB(Case *c) { out(c, "y", binary(c, IR_OP_SUB)); }
static void case_MUL(Case *c) { out(c, "y", binary(c, IR_OP_MUL)); }
static void case_DIV(Case *c) { out(c, "y", binary(c, IR_OP_DIV)); }
static void case_AND(Case *c) {
  out(c, "y", ir_build(c->g, IR_OP_AND, (int[]){causal(c), key_mask(c)}, 2, NULL, LOC));
}
static void case_SCALE(Case *c) { out(c, "y", unary(c, IR_OP_SCALE)); }
static void case_RELU(Case *c) { out(c, "y", unary(c, IR_OP_RELU)); }
static void case_GELU(Case *c) { out(c, "y", unary(c, IR_OP_GELU)); }
static void case_GELU_TANH(Case *c) { out(c, "y", unary(c, IR_OP_GELU_TANH)); }
static void case_TANH(Case *c) { out(c, "y", unary(c, IR_OP_TANH)); }
static void case_LAYERNORM(Case *c) {
  int x = x_bsd(c, 6);
  int g = param(c, "g", ir_type1(IR_F32, 6), 1), b = param(c, "b", ir_type1(IR_F32, 6), 0);
  IrAttrs at = attrs();
  at.eps = 1e-5;
  out(c, "y", ir_build(c->g, IR_OP_LAYERNORM, (int[]){x, g, b}, 3, &at, LOC));
  at.eps = 1e-6;
  at.unbiased = true;
  out(c, "z", ir_build(c->g, IR_OP_LAYERNORM, (int[]){x, g, b}, 3, &at, LOC));
}
static void case_LINEAR(Case *c) {
  int x = x_bsd(c, 5);
  int w = param(c, "w", ir_type2(IR_F32, 7, 5), 0), b = param(c, "b", ir_type1(IR_F32, 7), 0);
  out(c, "y", ir_build(c->g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, LOC));
  out(c, "z", ir_build(c->g, IR_OP_LINEAR, (int[]){x, w}, 2, NULL, LOC));
}
static void case_SOFTMAX(Case *c) {
  out(c, "y", ir_build(c->g, IR_OP_SOFTMAX, (int[]){x_bsd(c, 9)}, 1, NULL, LOC));
}
static void case_LOG_SOFTMAX(Case *c) {
  out(c, "y", ir_build(c->g, IR_OP_LOG_SOFTMAX, (int[]){x_bsd(c, 9)}, 1, NULL, LOC));
}
static void case_MASK_CAUSAL(Case *c) {
  x_bsd(c, 1); /* binds S */
  out(c, "y", causal(c));
  /* a step's mask: 2 queries at the last 2 of S positions */
  out(c, "z", ir_build_typed(c->g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                             ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_CONST(2), IR_SYM(c->sym_s)}), LOC));
}
static void case_RESHAPE(Case *c) {
  int m = key_mask(c);
  out(c, "y", m); /* a reshape that is an output: copied */
  int x = x_bsd(c, 4);
  int r = ir_build_typed(c->g, IR_OP_RESHAPE, (int[]){x}, 1, NULL,
                         ir_type(IR_F32, 4, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s), IR_CONST(2), IR_CONST(2)}), LOC);
  out(c, "z", ir_build(c->g, IR_OP_RELU, (int[]){r}, 1, NULL, LOC)); /* an aliasing reshape */
}
static void case_TAKE(Case *c) {
  int x = x_bsd(c, 5);
  IrAttrs at = attrs();
  at.axis = 1;
  at.index = 0;
  out(c, "y", ir_build(c->g, IR_OP_TAKE, (int[]){x}, 1, &at, LOC));
  at.axis = 2;
  at.index = 3;
  out(c, "z", ir_build(c->g, IR_OP_TAKE, (int[]){x}, 1, &at, LOC));
}
static int qkv(Case *c, int *k, int *v) {
  int q = input(c, "q", tbsd(c, IR_F32, 8), 0);
  *k = input(c, "k", tbsd(c, IR_F32, 8), 0);
  *v = input(c, "v", tbsd(c, IR_F32, 8), 0);
  return q;
}
static void case_ATTENTION(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  IrAttrs at = attrs();
  at.heads = 2;
  at.scale = 0.5;
  out(c, "y", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, k, v, key_mask(c)}, 4, &at, LOC));
  int both = ir_build(c->g, IR_OP_AND, (int[]){causal(c), key_mask(c)}, 2, NULL, LOC);
  out(c, "z", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, k, v, both}, 4, &at, LOC));
  out(c, "u", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, k, v}, 3, &at, LOC));
}
static void case_ATTN_PROBS(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  (void)v;
  IrAttrs at = attrs();
  at.heads = 4;
  at.scale = 0.7;
  out(c, "y", ir_build(c->g, IR_OP_ATTN_PROBS, (int[]){q, k, causal(c)}, 3, &at, LOC));
}
static void case_ATTN_MIX(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  IrAttrs at = attrs();
  at.heads = 2;
  at.scale = 0.3;
  int p = ir_build(c->g, IR_OP_ATTN_PROBS, (int[]){q, k, key_mask(c)}, 3, &at, LOC);
  out(c, "y", ir_build(c->g, IR_OP_ATTN_MIX, (int[]){p, v}, 2, &at, LOC));
}
static void case_TAIL(Case *c) {
  int x = x_bsd(c, 5);
  IrAttrs at = attrs();
  at.axis = 1;
  out(c, "y", ir_build_typed(c->g, IR_OP_TAIL, (int[]){x}, 1, &at,
                             ir_type(IR_F32, 3, (IrDim[]){IR_SYM(c->sym_b), IR_CONST(2), IR_CONST(5)}), LOC));
  at.axis = 0;
  out(c, "z", ir_build_typed(c->g, IR_OP_TAIL, (int[]){arange(c)}, 1, &at,
                             ir_type(IR_I32, 1, (IrDim[]){IR_CONST(1)}), LOC));
}
static int state(Case *c, const char *name) {
  IrAttrs at = attrs();
  at.name = name;
  return ir_build_typed(c->g, IR_OP_STATE, NULL, 0, &at,
                        ir_type(IR_F32, 3, (IrDim[]){IR_CONST(3), IR_CONST(4), IR_CONST(8)}), LOC);
}
static void case_STATE(Case *c) { /* zero in a fresh run */
  out(c, "y", ir_build(c->g, IR_OP_RELU, (int[]){state(c, "s")}, 1, NULL, LOC));
}
/* keys and values appended to caches [3,4,8] (P = 0, L = S) and attended
 * over in place: batch elements 4 rows apart, not S */
static void case_KV_APPEND(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  IrType tl = tbsd(c, IR_F32, 8);
  int kc = ir_build_typed(c->g, IR_OP_KV_APPEND, (int[]){state(c, "ck"), k}, 2, NULL, tl, LOC);
  int vc = ir_build_typed(c->g, IR_OP_KV_APPEND, (int[]){state(c, "cv"), v}, 2, NULL, tl, LOC);
  IrAttrs at = attrs();
  at.heads = 2;
  at.scale = 0.5;
  out(c, "y", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, kc, vc, causal(c)}, 4, &at, LOC));
  int p = ir_build(c->g, IR_OP_ATTN_PROBS, (int[]){q, kc, causal(c)}, 3, &at, LOC);
  out(c, "z", ir_build(c->g, IR_OP_ATTN_MIX, (int[]){p, vc}, 2, &at, LOC));
}

/* fused elementwise bodies over every kind of leaf (an operand, a gather by
 * ids and by positions, a broadcast operand, a causal mask), a bool result,
 * and add_layernorm with a broadcast addend */
static int fused(Case *c, const char *kind, const char *expr, const int *ops, int n,
                 const IrAttrs *extra) {
  IrAttrs at = extra ? *extra : attrs();
  at.fusion = kind;
  at.expr = expr;
  return ir_build(c->g, IR_OP_FUSED, ops, n, &at, LOC);
}
static void case_FUSED(Case *c) {
  int x = x_bsd(c, 6);
  int table = param(c, "table", ir_type2(IR_F32, 9, 6), 0);
  int ids = input(c, "ids", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s)}), 9);
  int v = param(c, "v", ir_type(IR_F32, 2, (IrDim[]){IR_CONST(1), IR_CONST(6)}), 3.0f);
  out(c, "emb", fused(c, "elementwise", "gelu(add(add(embed($0, $1), embed($0, arange[S])), $2))",
                      (int[]){table, ids, x}, 3, NULL));
  out(c, "math", fused(c, "elementwise",
                       "mul(relu(scale(div(sub($0, $1), $1), 0.25)), tanh(gelu_tanh($0)))",
                       (int[]){x, v}, 2, NULL));
  out(c, "mask", fused(c, "elementwise", "and(mask.causal[1,S,S], $0)", (int[]){key_mask(c)}, 1, NULL));
  int g = param(c, "g", ir_type1(IR_F32, 6), 1), b = param(c, "b", ir_type1(IR_F32, 6), 0);
  int r = param(c, "r", ir_type1(IR_F32, 6), 0);
  IrAttrs ln = attrs();
  ln.eps = 1e-5;
  out(c, "ln", fused(c, "add_layernorm", NULL, (int[]){x, r, g, b}, 4, &ln));
  ln.unbiased = true;
  out(c, "lnu", fused(c, "add_layernorm", NULL, (int[]){r, x, g, b}, 4, &ln));
}
/* add_layernorm_sum: the normalised sum and the sum (result 1) */
static void case_RESULT(Case *c) {
  int x = x_bsd(c, 6);
  int y = input(c, "y", tbsd(c, IR_F32, 6), 0);
  int g = param(c, "g", ir_type1(IR_F32, 6), 1), b = param(c, "b", ir_type1(IR_F32, 6), 0);
  IrAttrs ln = attrs();
  ln.eps = 1e-5;
  int f = fused(c, "add_layernorm_sum", NULL, (int[]){x, y, g, b}, 4, &ln);
  IrAttrs ri = attrs();
  ri.index = 1;
  out(c, "sum", ir_build(c->g, IR_OP_RESULT, (int[]){f}, 1, &ri, LOC));
  out(c, "y", ir_build(c->g, IR_OP_RELU, (int[]){f}, 1, NULL, LOC));
}
static void case_ATTENTION_FLASH(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  IrAttrs at = attrs();
  at.heads = 2;
  at.scale = 0.5;
  out(c, "y", ir_build(c->g, IR_OP_ATTENTION_FLASH, (int[]){q, k, v, key_mask(c)}, 4, &at, LOC));
  out(c, "z", ir_build(c->g, IR_OP_ATTENTION_FLASH, (int[]){q, k, v, causal(c)}, 4, &at, LOC));
  out(c, "u", ir_build(c->g, IR_OP_ATTENTION_FLASH, (int[]){q, k, v}, 3, &at, LOC));
}
/* Wq|Wk|Wv as one derived weight, and two biases concatenated: one linear
 * over the fused weight (what fuse-qkv builds) */
static void case_PARAM_CONCAT(Case *c) {
  int x = x_bsd(c, 4);
  IrType tw = ir_type2(IR_F32, 3, 4), tb = ir_type1(IR_F32, 3);
  int wq = param(c, "wq", tw, 0), wk = param(c, "wk", tw, 0), wv = param(c, "wv", tw, 0);
  int bq = param(c, "bq", tb, 0), bk = param(c, "bk", tb, 0), bv = param(c, "bv", tb, 0);
  IrAttrs at = attrs();
  at.name = "wqkv";
  int w = ir_build(c->g, IR_OP_PARAM_CONCAT, (int[]){wq, wk, wv}, 3, &at, LOC);
  at.name = "bqkv";
  int b = ir_build(c->g, IR_OP_PARAM_CONCAT, (int[]){bq, bk, bv}, 3, &at, LOC);
  out(c, "y", ir_build(c->g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, LOC));
  at.name = "wide";
  at.axis = 1;
  out(c, "z", ir_build(c->g, IR_OP_PARAM_CONCAT, (int[]){wq, wk}, 2, &at, LOC));
}
/* Q, K and V sliced out of one [B,S,24] value: read in place by attention
 * (views), and copies where other ops read a slice */
static void case_SLICE(Case *c) {
  int x = x_bsd(c, 24);
  IrAttrs at = attrs();
  at.axis = 2;
  int part[3];
  for (int i = 0; i < 3; i++) {
    at.start = 8 * i;
    part[i] = ir_build_typed(c->g, IR_OP_SLICE, (int[]){x}, 1, &at, tbsd(c, IR_F32, 8), LOC);
  }
  IrAttrs aa = attrs();
  aa.heads = 2;
  aa.scale = 0.5;
  out(c, "y", ir_build(c->g, IR_OP_ATTENTION, (int[]){part[0], part[1], part[2], key_mask(c)}, 4,
                       &aa, LOC));
  out(c, "f", ir_build(c->g, IR_OP_ATTENTION_FLASH, (int[]){part[0], part[1], part[2], causal(c)},
                       4, &aa, LOC));
  at.start = 5; /* an odd start, copied for an elementwise op */
  int odd = ir_build_typed(c->g, IR_OP_SLICE, (int[]){x}, 1, &at, tbsd(c, IR_F32, 3), LOC);
  out(c, "z", ir_build(c->g, IR_OP_RELU, (int[]){odd}, 1, NULL, LOC));
  at.axis = 0; /* rows of a param */
  at.start = 1;
  out(c, "w", ir_build_typed(c->g, IR_OP_SLICE, (int[]){param(c, "p", ir_type2(IR_F32, 4, 5), 0)}, 1,
                             &at, ir_type2(IR_F32, 2, 5), LOC));
}

static void (*const op_cases[IR_OP_COUNT])(Case *) = {
#define IR_OP(e, name, mn, mx, at, kind) [IR_OP_##e] = case_##e,
#include "ir/ops.def"
#undef IR_OP
};


/* Builds the case of op into c (a fresh arena; the caller destroys c->a),
 * checks it uses the op and verifies. */
static void op_case_build(Case *c, int op, uint64_t seed) {
  memset(c, 0, sizeof *c);
  c->a = arena_create();
  c->rng = seed + (uint64_t)op;
  c->g = ir_graph_create(c->a, ir_op_info[op].name);
  c->sym_b = ir_graph_add_symbol(c->g, "B", 3);
  c->sym_s = ir_graph_add_symbol(c->g, "S", 4);
  op_cases[op](c);
  bool used = false;
  for (int i = 0; i < c->g->n_nodes; i++) used |= (int)c->g->nodes[i].op == op;
  cr_assert(used, "the case for %s does not use it", ir_op_info[op].name);
  Diags d;
  diags_init(&d, c->a, NULL);
  cr_assert(ir_graph_verify(c->g, &d), "%s", d.captured);
}

#endif
