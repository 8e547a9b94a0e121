/* passes/fuse_qkv.c — the Q/K/V projections of an attention that read the
 * same input become one linear over concatenated weights:
 *
 *   q = linear(x, Wq, bq); k = linear(x, Wk, bk); v = linear(x, Wv, bv)
 *   attention(q, k, v, mask)
 *     ->
 *   W   = param.concat "P.{q,k,v}.weight" (Wq, Wk, Wv) {axis=0}     [3d, d]
 *   b   = param.concat "P.{q,k,v}.bias"   (bq, bk, bv) {axis=0}     [3d]
 *   qkv = linear(x, W, b)                                            [B,T,3d]
 *   attention(slice(qkv){start=0}, slice(qkv){start=d}, slice(qkv){start=2d}, mask)
 *
 * one GEMM of N = 3d instead of three of N = d (x is read once, the
 * runtime's pack of x is shared). Cross-attention's K and V read the
 * encoder output (the memory) and its Q the decoder stream: K and V fuse
 * into one linear per cross-attention, Q stays. A step graph's keys and
 * values reach attention through kv.append; they fuse the same way.
 *
 * The derived weights are computed once when the weights are bound
 * (ir_weights_derive), never per run; the slices cost nothing at run time:
 * the lowering reads slices of the last axis that only attention q/k/v and
 * kv.append rows consume in place (row stride 3d), so a projection is fused
 * only when every consumer of it is such a read (an attention whose
 * probabilities are an output, --attention, reads through attn.probs /
 * attn.mix and keeps its three linears).
 *
 * Invariants: projections fuse only with projections of the same attention
 * that read the same value, all with a bias or all without, their weights
 * plain params (so a second run finds nothing to do); the fused nodes take
 * the location of the first projection; params move up to the first
 * projection of their group (a param has no operands, so any place is
 * topological); every other node is copied unchanged. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct Group {
  int member[3]; /* linear node ids, in node order */
  int n;
} Group;

/* A derived param built so far: the same params fused twice (two
 * attentions over one input with the same weights) share one. */
typedef struct Derived {
  int n, params[3]; /* old param ids */
  int id;           /* the param.concat in the new graph */
  const char *name;
} Derived;

typedef struct Fuse {
  int *group_of; /* linear -> group index, -1 */
  int *early;    /* param -> its copy made at its group's first linear, -1 */
  int *repl;     /* linear -> the slice that replaces it, -1 */
  Group *groups;
  int n_groups;
  int *uses;     /* consumers per node */
  Derived *derived;
  int n_derived;
} Fuse;

/* The linear feeding attention operand k (through a kv.append for k / v),
 * or -1. */
static int projection(const IrGraph *g, int att, int k) {
  int v = g->nodes[att].operands[k];
  if (k > 0 && g->nodes[v].op == IR_OP_KV_APPEND) v = g->nodes[v].operands[1];
  return g->nodes[v].op == IR_OP_LINEAR ? v : -1;
}

/* Every consumer of linear id reads its rows in place once it is a slice:
 * attention q / k / v, kv.append's rows; and it is no output. */
static bool rows_only(const IrGraph *g, const Fuse *f, int id) {
  for (int o = 0; o < g->n_outputs; o++)
    if (g->outputs[o].value == id) return false;
  int seen = 0;
  for (int i = id + 1; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    for (int k = 0; k < n->n_operands; k++) {
      if (n->operands[k] != id) continue;
      seen++;
      bool ok = ((n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_FLASH) && k < 3) ||
                (n->op == IR_OP_KV_APPEND && k == 1);
      if (!ok) return false;
    }
  }
  return seen == f->uses[id];
}

static bool fusable(const IrGraph *g, const Fuse *f, int lin) {
  const IrNode *n = &g->nodes[lin];
  if (f->group_of[lin] >= 0 || g->nodes[n->operands[1]].op != IR_OP_PARAM) return false;
  if (n->n_operands == 3 && g->nodes[n->operands[2]].op != IR_OP_PARAM) return false;
  return rows_only(g, f, lin);
}

static void find_groups(const IrGraph *g, Fuse *f) {
  for (int a = 0; a < g->n_nodes; a++) {
    IrOp op = g->nodes[a].op;
    if (op != IR_OP_ATTENTION && op != IR_OP_ATTENTION_FLASH) continue;
    int lin[3];
    for (int k = 0; k < 3; k++) {
      lin[k] = projection(g, a, k);
      for (int j = 0; j < k; j++)
        if (lin[j] == lin[k]) lin[k] = -1; /* one projection feeding two operands */
      if (lin[k] >= 0 && !fusable(g, f, lin[k])) lin[k] = -1;
    }
    /* the projections of one input and one bias form, in node order */
    for (int k = 0; k < 3; k++) {
      if (lin[k] < 0) continue;
      Group gr = {{0}, 0};
      const IrNode *lead = &g->nodes[lin[k]];
      for (int j = k; j < 3; j++) {
        if (lin[j] < 0) continue;
        const IrNode *n = &g->nodes[lin[j]];
        if (n->operands[0] != lead->operands[0] || n->n_operands != lead->n_operands) continue;
        gr.member[gr.n++] = lin[j];
        if (j != k) lin[j] = -1;
      }
      lin[k] = -1;
      if (gr.n < 2) continue;
      for (int i = 1; i < gr.n; i++) /* insertion sort by node id */
        for (int j = i; j > 0 && gr.member[j - 1] > gr.member[j]; j--) {
          int t = gr.member[j];
          gr.member[j] = gr.member[j - 1];
          gr.member[j - 1] = t;
        }
      for (int i = 0; i < gr.n; i++) f->group_of[gr.member[i]] = f->n_groups;
      f->groups[f->n_groups++] = gr;
    }
  }
}

/* "enc.0.attn.q.weight", "enc.0.attn.k.weight" -> "enc.0.attn.{q,k}.weight":
 * the common prefix up to a '.', the common suffix from a '.'. */
static const char *fused_name(Arena *a, const IrGraph *g, const int *params, int n) {
  const char *first = g->nodes[params[0]].attrs.name;
  size_t len0 = strlen(first), pre = len0, suf = len0;
  for (int i = 1; i < n; i++) {
    const char *s = g->nodes[params[i]].attrs.name;
    size_t len = strlen(s), p = 0, q = 0;
    while (p < pre && p < len && s[p] == first[p]) p++;
    while (q < suf && q < len && q < len0 && s[len - 1 - q] == first[len0 - 1 - q]) q++;
    pre = p;
    suf = q;
  }
  while (pre > 0 && first[pre - 1] != '.') pre--;
  while (suf > 0 && first[len0 - suf] != '.') suf--;
  if (pre + suf > len0) suf = len0 - pre;
  char *buf = arena_printf(a, "%.*s{", (int)pre, first);
  for (int i = 0; i < n; i++) {
    const char *s = g->nodes[params[i]].attrs.name;
    size_t len = strlen(s);
    size_t mid = len >= pre + suf ? len - pre - suf : 0;
    buf = arena_printf(a, "%s%s%.*s", buf, i ? "," : "", (int)mid, s + (len >= pre + suf ? pre : 0));
  }
  return arena_printf(a, "%s}%s", buf, first + len0 - suf);
}

/* param.concat of the params old[0..n) (new ids fresh[]) along axis 0:
 * the one built earlier for the same params, or a new one whose name no
 * param or derived param has. */
static int derive(PassRewrite *rw, Fuse *f, const int *old, const int *fresh, int n, IrLoc loc) {
  for (int i = 0; i < f->n_derived; i++) {
    const Derived *d = &f->derived[i];
    if (d->n == n && memcmp(d->params, old, (size_t)n * sizeof *old) == 0) return d->id;
  }
  const char *base = fused_name(rw->g->arena, rw->old, old, n), *name = base;
  for (int tries = 2;; tries++) {
    bool taken = false;
    for (int i = 0; i < rw->old->n_nodes && !taken; i++)
      taken = (rw->old->nodes[i].op == IR_OP_PARAM || rw->old->nodes[i].op == IR_OP_PARAM_CONCAT) &&
              strcmp(rw->old->nodes[i].attrs.name, name) == 0;
    for (int i = 0; i < f->n_derived && !taken; i++) taken = strcmp(f->derived[i].name, name) == 0;
    if (!taken) break;
    name = arena_printf(rw->g->arena, "%s#%d", base, tries);
  }
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.axis = 0;
  at.name = name;
  Derived *d = &f->derived[f->n_derived++];
  d->n = n;
  memcpy(d->params, old, (size_t)n * sizeof *old);
  d->name = name;
  d->id = ir_build(rw->g, IR_OP_PARAM_CONCAT, fresh, n, &at, loc);
  return d->id;
}

static int rewrite(PassRewrite *rw, int id, void *user) {
  Fuse *f = user;
  const IrNode *n = &rw->old->nodes[id];
  if (f->early[id] >= 0) return f->early[id]; /* a param moved up */
  if (f->repl[id] >= 0) return f->repl[id];   /* a later member: its slice */
  int gi = n->op == IR_OP_LINEAR ? f->group_of[id] : -1;
  if (gi < 0) return PASS_COPY;
  const Group *gr = &f->groups[gi];
  TFMC_ASSERT(gr->member[0] == id);
  bool bias = n->n_operands == 3;
  int w_old[3], b_old[3], w_new[3], b_new[3];
  for (int i = 0; i < gr->n; i++) {
    const IrNode *m = &rw->old->nodes[gr->member[i]];
    w_old[i] = m->operands[1];
    b_old[i] = bias ? m->operands[2] : -1;
    for (int k = 0; k < (bias ? 2 : 1); k++) {
      int p = k ? b_old[i] : w_old[i];
      int *to = k ? &b_new[i] : &w_new[i];
      if (p < id) { /* defined before this linear: already in the new graph */
        *to = rw->map[p];
      } else if (f->early[p] >= 0) {
        *to = f->early[p];
      } else {
        *to = pass_rewrite_copy(rw, p);
        f->early[p] = *to;
      }
    }
  }
  int w = derive(rw, f, w_old, w_new, gr->n, n->loc);
  int ops[3] = {pass_rewrite_operand(rw, id, 0), w, bias ? derive(rw, f, b_old, b_new, gr->n, n->loc) : -1};
  IrAttrs at;
  int fused = ir_build(rw->g, IR_OP_LINEAR, ops, bias ? 3 : 2, NULL, n->loc);
  /* one slice of the last axis per projection, in the fused order */
  int64_t start = 0;
  int first = -1;
  for (int i = 0; i < gr->n; i++) {
    const IrNode *m = &rw->old->nodes[gr->member[i]];
    memset(&at, 0, sizeof at);
    at.axis = m->type.rank - 1;
    at.start = start;
    int s = ir_build_typed(rw->g, IR_OP_SLICE, &fused, 1, &at, m->type, m->loc);
    start += m->type.dims[m->type.rank - 1].value;
    if (i == 0) first = s;
    else f->repl[gr->member[i]] = s;
  }
  return first;
}

bool pass_fuse_qkv_run(IrGraph *g, PassContext *ctx) {
  size_t nn = (size_t)g->n_nodes + 1;
  Fuse f = {malloc(nn * sizeof(int)), malloc(nn * sizeof(int)), malloc(nn * sizeof(int)),
            malloc(nn * sizeof(Group)), 0, calloc(nn, sizeof(int)),
            malloc(2 * nn * sizeof(Derived)), 0};
  if (!f.group_of || !f.early || !f.repl || !f.groups || !f.uses || !f.derived) {
    free(f.group_of), free(f.early), free(f.repl), free(f.groups), free(f.uses), free(f.derived);
    diag_error(ctx->diags, (IrLoc){NULL, 0, 0}, "fuse-qkv: out of memory");
    return false;
  }
  for (size_t i = 0; i < nn; i++) f.group_of[i] = f.early[i] = f.repl[i] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_operands; k++) f.uses[g->nodes[i].operands[k]]++;
  find_groups(g, &f);
  int linears = 0, n3 = 0;
  for (int i = 0; i < f.n_groups; i++) {
    linears += f.groups[i].n;
    n3 += f.groups[i].n == 3;
  }
  if (f.n_groups)
    pass_rewrite(g, NULL, rewrite, &f);
  if (!f.n_groups)
    pass_note(ctx, "no projections of one attention share an input");
  else
    pass_note(ctx, "fused %d linears into %d (%d of 3, %d of 2), %d derived param%s", linears,
              f.n_groups, n3, f.n_groups - n3, f.n_derived, f.n_derived == 1 ? "" : "s");
  free(f.group_of), free(f.early), free(f.repl), free(f.groups), free(f.uses), free(f.derived);
  return true;
}
