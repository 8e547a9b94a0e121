/* ir/graph.c — the op table, types, graph construction and shape rules.
 *
 * Invariants kept here: nodes are appended only, so operand ids are always
 * smaller than the id of the node using them (a topological order); every
 * node built through ir_build* has the type its shape rule infers. */
#include "ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const IrOpInfo ir_op_info[IR_OP_COUNT] = {
#define IR_OP(e, nm, mn, mx, at, kd) [IR_OP_##e] = {nm, mn, mx, at, kd},
#include "ops.def"
#undef IR_OP
};

int ir_op_lookup(const char *name, size_t len) {
  for (int i = 0; i < IR_OP_COUNT; i++)
    if (strlen(ir_op_info[i].name) == len &&
        memcmp(ir_op_info[i].name, name, len) == 0)
      return i;
  return -1;
}

const char *ir_dtype_name(IrDtype dt) {
  switch (dt) {
  case IR_F32: return "f32";
  case IR_I32: return "i32";
  case IR_BOOL: return "bool";
  case IR_DTYPE_COUNT: break;
  }
  return "?";
}

IrType ir_type(IrDtype dt, int rank, const IrDim *dims) {
  IrType t;
  memset(&t, 0, sizeof t);
  TFMC_ASSERT(rank >= 0 && rank <= IR_MAX_RANK);
  t.dtype = dt;
  t.rank = rank;
  /* field by field: a struct copy may carry the padding after IrDim.sym
   * uninitialised, and the pass manager fingerprints nodes byte by byte */
  for (int i = 0; i < IR_MAX_RANK; i++) {
    t.dims[i].sym = i < rank ? dims[i].sym : -1;
    t.dims[i].value = i < rank ? dims[i].value : 0;
  }
  return t;
}

IrType ir_type1(IrDtype dt, int64_t d0) {
  return ir_type(dt, 1, (IrDim[]){IR_CONST(d0)});
}

IrType ir_type2(IrDtype dt, int64_t d0, int64_t d1) {
  return ir_type(dt, 2, (IrDim[]){IR_CONST(d0), IR_CONST(d1)});
}

bool ir_dim_eq(IrDim a, IrDim b) {
  if (a.sym >= 0 || b.sym >= 0) return a.sym == b.sym;
  return a.value == b.value;
}

bool ir_type_eq(const IrType *a, const IrType *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (!ir_dim_eq(a->dims[i], b->dims[i])) return false;
  return true;
}

IrGraph *ir_graph_create(Arena *a, const char *name) {
  IrGraph *g = arena_alloc(a, sizeof *g);
  g->arena = a;
  g->name = arena_strdup(a, name);
  g->pad_id = -1;
  return g;
}

int ir_graph_find_symbol(const IrGraph *g, const char *name, size_t len) {
  for (int i = 0; i < g->n_syms; i++)
    if (strlen(g->syms[i].name) == len && memcmp(g->syms[i].name, name, len) == 0)
      return i;
  return -1;
}

int ir_graph_add_symbol(IrGraph *g, const char *name, int64_t max) {
  int s = ir_graph_find_symbol(g, name, strlen(name));
  if (s >= 0) return s;
  TFMC_ASSERT(g->n_syms < IR_MAX_SYMS);
  g->syms[g->n_syms].name = arena_strdup(g->arena, name);
  g->syms[g->n_syms].max = max;
  return g->n_syms++;
}

void ir_graph_add_output(IrGraph *g, const char *name, int value) {
  arena_grow(g->arena, (void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1,
             sizeof *g->outputs);
  g->outputs[g->n_outputs].name = arena_strdup(g->arena, name);
  g->outputs[g->n_outputs].value = value;
  g->n_outputs++;
}

/* ---- shape rules ---- */

static bool fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return false;
}

static bool dim_is(IrDim d, int64_t v) { return d.sym < 0 && d.value == v; }

/* numpy broadcasting over trailing dims; a constant 1 stretches. */
static bool broadcast(const IrType *a, const IrType *b, IrType *out, char *err,
                      size_t errlen) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  IrType t = *a;
  t.rank = r;
  for (int i = 0; i < r; i++) {
    int ia = a->rank - r + i, ib = b->rank - r + i;
    IrDim da = ia >= 0 ? a->dims[ia] : IR_CONST(1);
    IrDim db = ib >= 0 ? b->dims[ib] : IR_CONST(1);
    if (ir_dim_eq(da, db)) t.dims[i] = da;
    else if (dim_is(da, 1)) t.dims[i] = db;
    else if (dim_is(db, 1)) t.dims[i] = da;
    else return fail(err, errlen, "operand shapes do not broadcast (dim %d)", i);
  }
  *out = t;
  return true;
}

static bool same_dims(const IrType *a, int ia, const IrType *b, int ib) {
  return ir_dim_eq(a->dims[ia], b->dims[ib]);
}

/* Checks an attention mask operand bool[B|1, Tq|1, Tk] against q and k. */
static bool check_mask(const IrType *m, const IrType *q, const IrType *k,
                       char *err, size_t errlen) {
  if (m->dtype != IR_BOOL || m->rank != 3)
    return fail(err, errlen, "attention mask must be bool of rank 3");
  if (!dim_is(m->dims[0], 1) && !same_dims(m, 0, q, 0))
    return fail(err, errlen, "attention mask batch dim must be 1 or the batch");
  if (!dim_is(m->dims[1], 1) && !same_dims(m, 1, q, 1))
    return fail(err, errlen, "attention mask query dim must be 1 or Tq");
  if (!same_dims(m, 2, k, 1))
    return fail(err, errlen, "attention mask key dim must be Tk");
  return true;
}

/* rank within bounds and every symbol index naming a symbol of g */
static bool type_ok(const IrGraph *g, const IrType *t) {
  if (t->rank < 0 || t->rank > IR_MAX_RANK) return false;
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i].sym >= g->n_syms || t->dims[i].sym < -1) return false;
  return true;
}

/* Product of the constant dims (-1 if it overflows or a dim is negative);
 * symbols are tallied separately so reshape can compare symbolic counts. */
static int64_t elem_count_const(const IrType *t, int64_t *sym_pow) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i].sym >= 0) {
      sym_pow[t->dims[i].sym]++;
    } else {
      int64_t v = t->dims[i].value;
      if (v < 0 || (v > 0 && n > INT64_MAX / v)) return -1;
      n *= v;
    }
  }
  return n;
}

bool ir_infer_type(const IrGraph *g, IrOp op, const int *operands, int n,
                   const IrAttrs *at, IrType *out, char *err, size_t errlen) {
  const IrOpInfo *info = &ir_op_info[op];
  if (n < info->min_operands || n > info->max_operands)
    return fail(err, errlen, "'%s' takes %d..%d operands, got %d", info->name,
                info->min_operands, info->max_operands, n);
  const IrType *t[IR_MAX_OPERANDS] = {0};
  for (int i = 0; i < n; i++) {
    if (operands[i] < 0 || operands[i] >= g->n_nodes)
      return fail(err, errlen, "operand %d refers to no value", i);
    t[i] = &g->nodes[operands[i]].type;
    if (!type_ok(g, t[i])) return fail(err, errlen, "operand %d has a malformed type", i);
  }
  if (info->kind == IR_KIND_SOURCE || op == IR_OP_SINUSOID || op == IR_OP_RESHAPE ||
      op == IR_OP_TAIL || op == IR_OP_KV_APPEND || op == IR_OP_SLICE) {
    /* typed ops: the declared result type is checked in place */
    if (!type_ok(g, out)) return fail(err, errlen, "malformed result type");
  }
  IrType r;
  switch (op) {
  case IR_OP_INPUT:
  case IR_OP_PARAM:
    if (out->rank < 0 || out->rank > IR_MAX_RANK)
      return fail(err, errlen, "bad rank");
    if (op == IR_OP_PARAM && out->dtype != IR_F32)
      return fail(err, errlen, "param must be f32");
    return true;
  case IR_OP_CONST:
    *out = ir_type(IR_F32, 0, NULL);
    return true;
  case IR_OP_ARANGE:
    if (out->dtype != IR_I32 || out->rank != 1)
      return fail(err, errlen, "arange result must be i32[N]");
    return true;
  case IR_OP_MASK_CAUSAL:
    if (out->dtype != IR_BOOL || out->rank != 3 || !dim_is(out->dims[0], 1))
      return fail(err, errlen, "mask.causal result must be bool[1,Tq,Tk]");
    return true;
  case IR_OP_STATE:
    if (out->dtype != IR_F32 || out->rank != 3)
      return fail(err, errlen, "state must be f32[Bm,Sm,D]");
    for (int i = 0; i < 3; i++)
      if (out->dims[i].sym >= 0 || out->dims[i].value < 1)
        return fail(err, errlen, "state dims must be constants >= 1");
    return true;
  case IR_OP_KV_APPEND:
    if (n < 1 || g->nodes[operands[0]].op != IR_OP_STATE)
      return fail(err, errlen, "kv.append appends to a state");
    if (t[1]->dtype != IR_F32 || t[1]->rank != 3 || !same_dims(t[1], 2, t[0], 2))
      return fail(err, errlen, "kv.append rows must be f32[B,T,D] with the state's D");
    if (out->dtype != IR_F32 || out->rank != 3 || !same_dims(out, 0, t[1], 0) ||
        !same_dims(out, 2, t[0], 2))
      return fail(err, errlen, "kv.append result must be f32[B,L,D]");
    if ((out->dims[1].sym < 0 && out->dims[1].value > t[0]->dims[1].value) ||
        (t[1]->dims[0].sym < 0 && t[1]->dims[0].value > t[0]->dims[0].value))
      return fail(err, errlen, "kv.append does not fit its state");
    return true;
  case IR_OP_TAIL:
    if (at->axis < 0 || at->axis >= t[0]->rank)
      return fail(err, errlen, "tail axis %d out of range", at->axis);
    if (out->dtype != t[0]->dtype || out->rank != t[0]->rank)
      return fail(err, errlen, "tail keeps the dtype and rank");
    for (int i = 0; i < out->rank; i++)
      if (i != at->axis && !same_dims(out, i, t[0], i))
        return fail(err, errlen, "tail keeps every dim but the axis");
    if (out->dims[at->axis].sym < 0 && t[0]->dims[at->axis].sym < 0 &&
        out->dims[at->axis].value > t[0]->dims[at->axis].value)
      return fail(err, errlen, "tail longer than its operand");
    return true;
  case IR_OP_SLICE:
    if (at->axis < 0 || at->axis >= t[0]->rank)
      return fail(err, errlen, "slice axis %d out of range", at->axis);
    if (out->dtype != t[0]->dtype || out->rank != t[0]->rank)
      return fail(err, errlen, "slice keeps the dtype and rank");
    for (int i = 0; i < out->rank; i++)
      if (i != at->axis && !same_dims(out, i, t[0], i))
        return fail(err, errlen, "slice keeps every dim but the axis");
    if (at->start < 0 || out->dims[at->axis].sym >= 0 || t[0]->dims[at->axis].sym >= 0 ||
        out->dims[at->axis].value < 1 ||
        at->start + out->dims[at->axis].value > t[0]->dims[at->axis].value)
      return fail(err, errlen, "slice %lld..%lld must lie within a constant dim of %lld",
                  (long long)at->start,
                  (long long)(at->start + (out->dims[at->axis].sym >= 0 ? 0 : out->dims[at->axis].value)),
                  (long long)(t[0]->dims[at->axis].sym >= 0 ? -1 : t[0]->dims[at->axis].value));
    return true;
  case IR_OP_PARAM_CONCAT:
    for (int i = 0; i < n; i++)
      if (g->nodes[operands[i]].op != IR_OP_PARAM)
        return fail(err, errlen, "param.concat operand %d is not a param", i);
    if (at->axis < 0 || at->axis >= t[0]->rank)
      return fail(err, errlen, "param.concat axis %d out of range", at->axis);
    r = *t[0];
    for (int i = 1; i < n; i++) {
      if (t[i]->rank != t[0]->rank)
        return fail(err, errlen, "param.concat operands must have one rank");
      for (int d = 0; d < r.rank; d++)
        if (d != at->axis && !same_dims(t[i], d, t[0], d))
          return fail(err, errlen, "param.concat operands must agree on every dim but the axis");
      r.dims[at->axis].value += t[i]->dims[at->axis].value;
    }
    *out = r;
    return true;
  case IR_OP_SINUSOID:
    if (t[0]->dtype != IR_I32 || t[0]->rank < 1 || t[0]->rank >= IR_MAX_RANK)
      return fail(err, errlen, "sinusoid takes positions i32[...] of rank 1..%d", IR_MAX_RANK - 1);
    if (out->dtype != IR_F32 || out->rank != t[0]->rank + 1 ||
        out->dims[out->rank - 1].sym >= 0 || out->dims[out->rank - 1].value <= 0)
      return fail(err, errlen, "sinusoid result must be f32[...,D] with constant D");
    for (int d = 0; d < t[0]->rank; d++)
      if (!same_dims(out, d, t[0], d))
        return fail(err, errlen, "sinusoid result must be f32[...,D] over the positions' dims");
    return true;
  case IR_OP_EMBED:
    if (t[0]->dtype != IR_F32 || t[0]->rank != 2)
      return fail(err, errlen, "embed table must be f32[V,D]");
    if (t[1]->dtype != IR_I32 || t[1]->rank >= IR_MAX_RANK)
      return fail(err, errlen, "embed ids must be i32 of rank < %d", IR_MAX_RANK);
    r = *t[1];
    r.dtype = IR_F32;
    r.dims[r.rank++] = t[0]->dims[1];
    *out = r;
    return true;
  case IR_OP_ADD:
  case IR_OP_SUB:
  case IR_OP_MUL:
  case IR_OP_DIV:
    if (t[0]->dtype != IR_F32 || t[1]->dtype != IR_F32)
      return fail(err, errlen, "'%s' takes f32 operands", info->name);
    return broadcast(t[0], t[1], out, err, errlen);
  case IR_OP_AND:
    if (t[0]->dtype != IR_BOOL || t[1]->dtype != IR_BOOL)
      return fail(err, errlen, "'and' takes bool operands");
    return broadcast(t[0], t[1], out, err, errlen);
  case IR_OP_SCALE:
  case IR_OP_RELU:
  case IR_OP_GELU:
  case IR_OP_GELU_TANH:
  case IR_OP_TANH:
  case IR_OP_SOFTMAX:
  case IR_OP_LOG_SOFTMAX:
    if (t[0]->dtype != IR_F32)
      return fail(err, errlen, "'%s' takes an f32 operand", info->name);
    if ((op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX) && t[0]->rank < 1)
      return fail(err, errlen, "'%s' needs rank >= 1", info->name);
    *out = *t[0];
    return true;
  case IR_OP_LAYERNORM:
    if (t[0]->dtype != IR_F32 || t[0]->rank < 1)
      return fail(err, errlen, "layernorm input must be f32 of rank >= 1");
    for (int i = 1; i < 3; i++)
      if (t[i]->dtype != IR_F32 || t[i]->rank != 1 ||
          !same_dims(t[i], 0, t[0], t[0]->rank - 1))
        return fail(err, errlen, "layernorm %s must be f32[D] with D the last dim",
                    i == 1 ? "gain" : "bias");
    if (!(at->eps >= 0)) return fail(err, errlen, "layernorm eps must be >= 0");
    *out = *t[0];
    return true;
  case IR_OP_LINEAR: {
    /* linear(x, w, bias?, residual?): residual=true says the last operand
     * is the residual, so 3 operands are x, w, bias or x, w, residual */
    bool has_res = at && at->residual;
    int n_bias = n - 2 - (has_res ? 1 : 0);
    if (n_bias < 0 || n_bias > 1)
      return fail(err, errlen, "linear with residual=%s takes %s operands, got %d",
                  has_res ? "true" : "false", has_res ? "3 or 4" : "2 or 3", n);
    if (t[0]->dtype != IR_F32 || t[0]->rank < 1)
      return fail(err, errlen, "linear input must be f32 of rank >= 1");
    if (t[1]->dtype != IR_F32 || t[1]->rank != 2 ||
        !same_dims(t[1], 1, t[0], t[0]->rank - 1))
      return fail(err, errlen, "linear weight must be f32[N,K] with K the input's last dim");
    if (n_bias && (t[2]->dtype != IR_F32 || t[2]->rank != 1 ||
                   !same_dims(t[2], 0, t[1], 0)))
      return fail(err, errlen, "linear bias must be f32[N]");
    if (at && ((int)at->act < 0 || at->act >= IR_ACT_COUNT))
      return fail(err, errlen, "linear act must be none, relu, gelu or gelu_tanh");
    r = *t[0];
    r.dims[r.rank - 1] = t[1]->dims[0];
    if (has_res && !ir_type_eq(t[n - 1], &r))
      return fail(err, errlen, "linear residual must have the result's type");
    *out = r;
    return true;
  }
  case IR_OP_RESHAPE: {
    int64_t pa[IR_MAX_SYMS] = {0}, pb[IR_MAX_SYMS] = {0};
    if (out->dtype != t[0]->dtype)
      return fail(err, errlen, "reshape keeps the dtype");
    int64_t na = elem_count_const(t[0], pa), nb = elem_count_const(out, pb);
    if (na < 0 || nb < 0) return fail(err, errlen, "tensor too large");
    if (na != nb ||
        memcmp(pa, pb, sizeof pa) != 0)
      return fail(err, errlen, "reshape must keep the element count");
    return true;
  }
  case IR_OP_TAKE:
    if (at->axis < 0 || at->axis >= t[0]->rank)
      return fail(err, errlen, "take axis %d out of range", at->axis);
    if (t[0]->dims[at->axis].sym < 0 && (at->index >= t[0]->dims[at->axis].value ||
                                         at->index < -t[0]->dims[at->axis].value))
      return fail(err, errlen, "take index %lld out of range", (long long)at->index);
    r = *t[0];
    for (int i = at->axis; i + 1 < r.rank; i++) r.dims[i] = r.dims[i + 1];
    r.rank--;
    r.dims[r.rank] = IR_CONST(0);
    *out = r;
    return true;
  case IR_OP_ATTENTION:
  case IR_OP_ATTENTION_FLASH:
  case IR_OP_ATTN_PROBS: {
    if (op == IR_OP_ATTENTION_FLASH) op = IR_OP_ATTENTION; /* the same rule */
    int nk = op == IR_OP_ATTENTION ? 3 : 2;
    for (int i = 0; i < nk; i++)
      if (t[i]->dtype != IR_F32 || t[i]->rank != 3)
        return fail(err, errlen, "attention q/k/v must be f32[B,T,D]");
    if (!same_dims(t[0], 0, t[1], 0) || !same_dims(t[0], 2, t[1], 2))
      return fail(err, errlen, "attention q and k must agree on B and D");
    if (op == IR_OP_ATTENTION &&
        (!same_dims(t[2], 0, t[1], 0) || !same_dims(t[2], 1, t[1], 1)))
      return fail(err, errlen, "attention k and v must agree on B and Tk");
    if (t[0]->dims[2].sym >= 0)
      return fail(err, errlen, "attention model dim must be constant");
    if (at->heads <= 0 || t[0]->dims[2].value % at->heads != 0)
      return fail(err, errlen, "attention heads must divide the model dim");
    if (op == IR_OP_ATTENTION && (t[2]->dims[2].sym >= 0 ||
                                  t[2]->dims[2].value % at->heads != 0))
      return fail(err, errlen, "attention heads must divide v's dim");
    if (n > nk && !check_mask(t[nk], t[0], t[1], err, errlen)) return false;
    if (op == IR_OP_ATTENTION) {
      r = *t[0];
      r.dims[2] = t[2]->dims[2];
    } else {
      r = ir_type(IR_F32, 4, (IrDim[]){t[0]->dims[0], IR_CONST(at->heads),
                                       t[0]->dims[1], t[1]->dims[1]});
    }
    *out = r;
    return true;
  }
  case IR_OP_ATTN_MIX:
    if (t[0]->dtype != IR_F32 || t[0]->rank != 4 || t[1]->dtype != IR_F32 ||
        t[1]->rank != 3)
      return fail(err, errlen, "attn.mix takes p f32[B,H,Tq,Tk] and v f32[B,Tk,D]");
    if (!dim_is(t[0]->dims[1], at->heads) || at->heads <= 0 ||
        t[1]->dims[2].sym >= 0 || t[1]->dims[2].value % at->heads != 0)
      return fail(err, errlen, "attn.mix heads must match p and divide D");
    if (!same_dims(t[0], 0, t[1], 0) || !same_dims(t[0], 3, t[1], 1))
      return fail(err, errlen, "attn.mix p and v must agree on B and Tk");
    *out = ir_type(IR_F32, 3, (IrDim[]){t[0]->dims[0], t[0]->dims[2], t[1]->dims[2]});
    return true;
  case IR_OP_FUSED: {
    /* the type of result 0 of the decomposition (fused.c) */
    IrType rt[IR_FUSED_MAX_RESULTS];
    int nr;
    if (!ir_fused_result_types(g, at, operands, n, rt, &nr, err, errlen))
      return false;
    *out = rt[0];
    return true;
  }
  case IR_OP_RESULT: {
    const IrNode *f = &g->nodes[operands[0]];
    if (f->op != IR_OP_FUSED)
      return fail(err, errlen, "result reads a fused node, not '%s'", ir_op_info[f->op].name);
    IrType rt[IR_FUSED_MAX_RESULTS];
    int nr;
    if (!ir_fused_result_types(g, &f->attrs, f->operands, f->n_operands, rt, &nr, err, errlen))
      return false;
    if (at->index < 1 || at->index >= nr)
      return fail(err, errlen, "result index %lld out of range: fused '%s' has %d result%s%s",
                  (long long)at->index, f->attrs.fusion, nr, nr == 1 ? "" : "s",
                  nr > 1 ? " (result 0 is the node itself)" : "");
    *out = rt[at->index];
    return true;
  }
  case IR_OP_COUNT:
    break;
  }
  return fail(err, errlen, "unknown op");
}

static int append(IrGraph *g, IrOp op, const int *operands, int n,
                  const IrAttrs *attrs, IrType type, IrLoc loc) {
  arena_grow(g->arena, (void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1,
             sizeof *g->nodes);
  IrNode *nd = &g->nodes[g->n_nodes];
  memset(nd, 0, sizeof *nd);
  nd->op = op;
  nd->n_operands = n;
  for (int i = 0; i < n; i++) nd->operands[i] = operands[i];
  if (attrs) nd->attrs = *attrs;
  if (nd->attrs.name) nd->attrs.name = arena_strdup(g->arena, nd->attrs.name);
  if (nd->attrs.fusion) nd->attrs.fusion = arena_strdup(g->arena, nd->attrs.fusion);
  if (nd->attrs.expr) nd->attrs.expr = arena_strdup(g->arena, nd->attrs.expr);
  nd->type = type;
  nd->loc = loc;
  if (loc.file) nd->loc.file = arena_strdup(g->arena, loc.file);
  return g->n_nodes++;
}

int ir_build_typed(IrGraph *g, IrOp op, const int *operands, int n,
                   const IrAttrs *attrs, IrType type, IrLoc loc) {
  char err[256];
  IrAttrs none;
  memset(&none, 0, sizeof none);
  if (!ir_infer_type(g, op, operands, n, attrs ? attrs : &none, &type, err,
                     sizeof err)) {
    fprintf(stderr, "ir_build %s: %s\n", ir_op_info[op].name, err);
    TFMC_ASSERT(!"shape rule rejected a node the frontend built");
  }
  return append(g, op, operands, n, attrs, type, loc);
}

int ir_build_try(IrGraph *g, IrOp op, const int *operands, int n, const IrAttrs *attrs,
                 IrType type, IrLoc loc, char *err, size_t errlen) {
  IrAttrs none;
  memset(&none, 0, sizeof none);
  if (n < 0 || n > IR_MAX_OPERANDS) {
    fail(err, errlen, "'%s' with %d operands", ir_op_info[op].name, n);
    return -1;
  }
  if (!ir_infer_type(g, op, operands, n, attrs ? attrs : &none, &type, err, errlen))
    return -1;
  return append(g, op, operands, n, attrs, type, loc);
}

int ir_build(IrGraph *g, IrOp op, const int *operands, int n,
             const IrAttrs *attrs, IrLoc loc) {
  IrType t;
  memset(&t, 0, sizeof t);
  return ir_build_typed(g, op, operands, n, attrs, t, loc);
}

int ir_build_input(IrGraph *g, const char *name, IrType type, IrLoc loc) {
  IrAttrs a;
  memset(&a, 0, sizeof a);
  a.name = name;
  return ir_build_typed(g, IR_OP_INPUT, NULL, 0, &a, type, loc);
}

int ir_build_param(IrGraph *g, const char *name, IrType type, IrLoc loc) {
  IrAttrs a;
  memset(&a, 0, sizeof a);
  a.name = name;
  return ir_build_typed(g, IR_OP_PARAM, NULL, 0, &a, type, loc);
}

const Weight *ir_weights_find(const WeightSet *w, const char *name) {
  if (!w || !name) return NULL;
  for (int i = 0; i < w->n; i++)
    if (strcmp(w->items[i].name, name) == 0) return &w->items[i];
  return NULL;
}

int ir_weight_read(const WeightSet *w, const Weight *wt, int64_t f0, int64_t f1, float *dst,
                   char *err, size_t errlen) {
  if (f1 <= f0) return 0;
  if (wt->data) {
    memcpy(dst, wt->data + f0, (size_t)(f1 - f0) * sizeof(float));
    return 0;
  }
  if (!w->src || wt < w->items || wt >= w->items + w->n) {
    snprintf(err, errlen, "weight '%s' has no data", wt->name);
    return 1;
  }
  return w->src->read(w->src, (int)(wt - w->items), f0, f1, dst, err, errlen);
}

bool ir_weight_same(const WeightSet *wa, const Weight *a, const WeightSet *wb, const Weight *b) {
  if (!a || !b || !ir_type_eq(&a->type, &b->type)) return false;
  if (a->data || b->data) return a->data == b->data;
  return wa->src && wa->src == wb->src && a - wa->items == b - wb->items;
}
