/* passes/fuse_elementwise.c — chains of elementwise and broadcast ops -> one
 * loop nest.
 *
 *   e = add(embed(W, tokens), embed(T, types))        three kernels, two
 *     ->  e = fused "elementwise" "add(embed($0, $1), embed($2, $3))" W, tokens, T, types
 *   m = and(mask.causal, reshape(pad))                two kernels
 *     ->  m = fused "elementwise" "and(mask.causal[1,S,S], $0)" reshape(pad)
 *
 * A fused "elementwise" node (ir/fused.def) computes a tree of ops element
 * by element in one loop nest over its result (passes/lower_loops.c), so
 * the values in between are never stored: one kernel and one buffer per
 * tree instead of one per op.
 *
 * Which ops may be in a tree: the elementwise unary and binary ops (scale,
 * relu, gelu, gelu_tanh, tanh, add, sub, mul, div, and), embed (a gather:
 * its table stays an operand, its ids may be computed), and the index
 * sources arange and mask.causal. A node P joins the tree of its reader C
 * when P is such an op, C is too, P has no other reader and is no output,
 * P is not C's embedding table, and P has C's shape (or is a gather or an
 * index source, cheap enough to recompute where C broadcasts it). A tree is
 * fused when it has at least two nodes and at most 8 distinct operands
 * (IR_MAX_OPERANDS); a subtree that would take more stays a node of its own
 * (and may be a tree of its own). The root keeps its place and location.
 *
 * Invariants: values are the same (the same scalar formulas, each op's
 * result rounded to f32 as before); outputs keep names and order; a value
 * read twice is never recomputed (only single-reader nodes join a tree).
 * Running the pass again changes nothing.
 */
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPR_MAX 4096

typedef struct Fuse {
  const IrGraph *g;
  bool *absorb;  /* per node: computed inside its reader's tree */
  bool *root;    /* per node: the root of a fused tree */
  int **ext;     /* per root: its distinct operands, in $k order */
  int *n_ext;
  const char **expr; /* per root: the body */
} Fuse;

static bool fusable(IrOp op) {
  switch (op) {
  case IR_OP_ADD:
  case IR_OP_SUB:
  case IR_OP_MUL:
  case IR_OP_DIV:
  case IR_OP_AND:
  case IR_OP_SCALE:
  case IR_OP_RELU:
  case IR_OP_GELU:
  case IR_OP_GELU_TANH:
  case IR_OP_TANH:
  case IR_OP_EMBED:
  case IR_OP_ARANGE:
  case IR_OP_MASK_CAUSAL:
    return true;
  case IR_OP_INPUT:
  case IR_OP_PARAM:
  case IR_OP_CONST:
  case IR_OP_SINUSOID:
  case IR_OP_LAYERNORM:
  case IR_OP_LINEAR:
  case IR_OP_SOFTMAX:
  case IR_OP_LOG_SOFTMAX:
  case IR_OP_RESHAPE:
  case IR_OP_TAKE:
  case IR_OP_ATTENTION:
  case IR_OP_ATTN_PROBS:
  case IR_OP_ATTN_MIX:
  case IR_OP_TAIL:
  case IR_OP_STATE:
  case IR_OP_KV_APPEND:
  case IR_OP_FUSED: /* an elementwise tree already: the pass is a fixpoint */
  case IR_OP_RESULT:
  case IR_OP_ATTENTION_FLASH:
  case IR_OP_PARAM_CONCAT:
  case IR_OP_SLICE:
  case IR_OP_COUNT:
    break;
  }
  return false;
}

static bool is_ident(const char *s) {
  if (!s || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
    return false;
  for (const char *p = s + 1; *p; p++)
    if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9')))
      return false;
  return true;
}

/* A typed source's dims must be writable in the body: integers or symbols
 * named like identifiers. */
static bool dims_writable(const IrGraph *g, const IrType *t) {
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i].sym >= 0 && !is_ident(g->syms[t->dims[i].sym].name))
      return false;
  return true;
}

/* May node p (read once, by c as operand k) be computed inside c's tree? */
static bool joins(const IrGraph *g, int p, int c, int k);

bool pass_fuse_elementwise_joins(const IrGraph *g, int p, int c, int k) {
  int readers = 0;
  for (int i = p + 1; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_operands; j++)
      readers += g->nodes[i].operands[j] == p;
  for (int i = 0; i < g->n_outputs; i++)
    readers += 2 * (g->outputs[i].value == p);
  return readers == 1 && joins(g, p, c, k);
}

static bool joins(const IrGraph *g, int p, int c, int k) {
  const IrNode *pn = &g->nodes[p], *cn = &g->nodes[c];
  if (!fusable(pn->op) || !fusable(cn->op))
    return false;
  if (cn->op == IR_OP_EMBED && k == 0)
    return false; /* the table is read at computed rows: an operand */
  bool cheap = pn->op == IR_OP_EMBED || pn->op == IR_OP_ARANGE || pn->op == IR_OP_MASK_CAUSAL;
  if (!cheap && !ir_type_eq(&pn->type, &cn->type))
    return false; /* c broadcasts it: computing it per element of c would repeat work */
  if ((pn->op == IR_OP_ARANGE || pn->op == IR_OP_MASK_CAUSAL) && !dims_writable(g, &pn->type))
    return false;
  return true;
}

/* Collects the distinct operands of v's tree into ext; a subtree that would
 * take more than IR_MAX_OPERANDS stays out (its node becomes an operand).
 * False when even that does not fit. */
static bool collect(Fuse *f, int v, int *ext, int *n_ext) {
  const IrNode *n = &f->g->nodes[v];
  for (int k = 0; k < n->n_operands; k++) {
    int o = n->operands[k];
    if (f->absorb[o]) {
      int save = *n_ext;
      if (collect(f, o, ext, n_ext))
        continue;
      *n_ext = save;
      f->absorb[o] = false; /* a tree of its own, later */
    }
    bool seen = false;
    for (int i = 0; i < *n_ext && !seen; i++)
      seen = ext[i] == o;
    if (seen)
      continue;
    if (*n_ext == IR_MAX_OPERANDS)
      return false;
    ext[(*n_ext)++] = o;
  }
  return true;
}

/* Appends the body of v (a tree member) to buf. */
static void write_body(const Fuse *f, int v, const int *ext, int n_ext, char *buf, size_t *len) {
  const IrGraph *g = f->g;
  const IrNode *n = &g->nodes[v];
#define PUT(...)                                                                                   \
  do {                                                                                             \
    if (*len < EXPR_MAX)                                                                           \
      *len += (size_t)snprintf(buf + *len, EXPR_MAX - *len, __VA_ARGS__);                          \
  } while (0)
  if (n->op == IR_OP_ARANGE || n->op == IR_OP_MASK_CAUSAL) {
    PUT("%s[", ir_op_info[n->op].name);
    for (int i = 0; i < n->type.rank; i++) {
      IrDim d = n->type.dims[i];
      if (d.sym >= 0)
        PUT("%s%s", i ? "," : "", g->syms[d.sym].name);
      else
        PUT("%s%lld", i ? "," : "", (long long)d.value);
    }
    PUT("]");
    return;
  }
  PUT("%s(", ir_op_info[n->op].name);
  for (int k = 0; k < n->n_operands; k++) {
    int o = n->operands[k];
    if (k)
      PUT(", ");
    if (f->absorb[o]) {
      write_body(f, o, ext, n_ext, buf, len);
      continue;
    }
    for (int i = 0; i < n_ext; i++)
      if (ext[i] == o)
        PUT("$%d", i);
  }
  if (n->op == IR_OP_SCALE) {
    /* the shortest form that reads back to the same double */
    char num[64];
    for (int prec = 9; prec <= 17; prec++) {
      snprintf(num, sizeof num, "%.*g", prec, n->attrs.factor);
      if (strtod(num, NULL) == n->attrs.factor)
        break;
    }
    PUT(", %s", num);
  }
  PUT(")");
#undef PUT
}

static int rewrite(PassRewrite *rw, int id, void *user) {
  Fuse *f = user;
  if (f->absorb[id])
    return PASS_DROP; /* computed inside its root */
  if (!f->root[id])
    return PASS_COPY;
  const IrNode *n = &rw->old->nodes[id];
  int ops[IR_MAX_OPERANDS];
  for (int i = 0; i < f->n_ext[id]; i++) {
    ops[i] = rw->map[f->ext[id][i]];
    TFMC_ASSERT(ops[i] >= 0);
  }
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.fusion = "elementwise";
  at.expr = f->expr[id];
  return ir_build_typed(rw->g, IR_OP_FUSED, ops, f->n_ext[id], &at, n->type, n->loc);
}

bool pass_fuse_elementwise_run(IrGraph *g, PassContext *ctx) {
  int n = g->n_nodes;
  Arena *a = g->arena;
  Fuse f = {g,
            arena_alloc(a, (size_t)(n + 1) * sizeof(bool)),
            arena_alloc(a, (size_t)(n + 1) * sizeof(bool)),
            arena_alloc(a, (size_t)(n + 1) * sizeof(int *)),
            arena_alloc(a, (size_t)(n + 1) * sizeof(int)),
            arena_alloc(a, (size_t)(n + 1) * sizeof(char *))};
  int *readers = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
  int *reader = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
  int *reader_k = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
  bool *is_output = arena_alloc(a, (size_t)(n + 1) * sizeof(bool));
  for (int i = 0; i < g->n_outputs; i++)
    is_output[g->outputs[i].value] = true;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i].n_operands; k++) {
      int o = g->nodes[i].operands[k];
      readers[o]++;
      reader[o] = i;
      reader_k[o] = k;
    }
  for (int i = 0; i < n; i++)
    f.absorb[i] = readers[i] == 1 && !is_output[i] && joins(g, i, reader[i], reader_k[i]);
  /* roots from the last node back: a subtree left out of a tree (too many
   * operands) has a smaller id, so it is met later as a root of its own */
  int trees = 0, nodes_in = 0;
  for (int i = n - 1; i >= 0; i--) {
    const IrNode *nd = &g->nodes[i];
    if (f.absorb[i] || !fusable(nd->op))
      continue;
    if (nd->type.rank < 1) { /* a scalar root: left as it is, with its operands */
      for (int k = 0; k < nd->n_operands; k++)
        f.absorb[nd->operands[k]] = false;
      continue;
    }
    int ext[IR_MAX_OPERANDS], n_ext = 0;
    if (!collect(&f, i, ext, &n_ext)) {
      for (int k = 0; k < nd->n_operands; k++)
        f.absorb[nd->operands[k]] = false;
      continue;
    }
    int members = 1;
    for (int k = 0; k < nd->n_operands; k++)
      members += f.absorb[nd->operands[k]];
    if (members == 1)
      continue; /* a node alone: nothing to fuse */
    char *buf = arena_alloc(a, EXPR_MAX + 1);
    size_t len = 0;
    write_body(&f, i, ext, n_ext, buf, &len);
    if (len >= EXPR_MAX) { /* a body too long to write: leave the tree as it is */
      for (int k = 0; k < nd->n_operands; k++)
        f.absorb[nd->operands[k]] = false;
      continue;
    }
    f.root[i] = true;
    f.expr[i] = buf;
    f.n_ext[i] = n_ext;
    f.ext[i] = arena_alloc(a, sizeof ext);
    memcpy(f.ext[i], ext, sizeof ext);
    trees++;
  }
  if (!trees) {
    pass_note(ctx, "no chain of elementwise ops to fuse");
    return true;
  }
  for (int i = 0; i < n; i++)
    nodes_in += f.absorb[i] || f.root[i];
  pass_rewrite(g, NULL, rewrite, &f);
  pass_note(ctx, "fused %d nodes into %d elementwise loop nest%s", nodes_in, trees,
            trees == 1 ? "" : "s");
  return true;
}
