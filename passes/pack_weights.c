/* passes/pack_weights.c — loop pass "pack-weights": a linear's weights are
 * packed once, into the panels its GEMM kernels read, instead of on every
 * call.
 *
 * rt_linear (runtime/rt_gemm.h) copies its w[N, K] into panels of 16
 * columns for every block of every call (or hands it to OpenBLAS's sgemm,
 * which does the same): for bert-base that is all 85M weights repacked per
 * forward. This pass turns every rt_linear call whose w is a whole weight
 * (element 0 of an LB_WEIGHT buffer, N and K constants, the buffer N x K
 * floats) into rt_linear_packed on the same weight in LW_PANELS layout
 * (ir/loop.h), which the packer (backends/exec.c backend_pack_weights)
 * writes once with rt_gemm_pack: when the JIT loads the weights, and into
 * the packed-weights file `tfmc build` and `tfmc emit-c` write. The layout
 * is the same on every ISA, so one file runs on AVX2, AVX-512 and scalar
 * machines.
 *
 * A weight read only by such calls changes layout in place. So does one
 * whose other reads are all element loads (GPT-2's token embedding,
 * gathered by the embedding and multiplied by the tied LM head), when its
 * panels hold f32: each load's index e, element (row e / K, col e % K) of
 * w[N, K], is rewritten to where rt_gemm_pack put that element,
 *     (row / 16) * 16K + col * 16 + row % 16,
 * so the weight exists once, packed (gpt2-small: 154 MB less on disk and in
 * memory). An index of the form x * K + y with y a constant in [0, K) or
 * the variable of an enclosing loop over a part of 0..K (the embedding's
 * id * D + j) gives row x and col y directly, without the division. A
 * weight whose address another call takes, or whose panels are bf16 or
 * int8 (--weights-dtype: gathering from them would change the embedding's
 * values), is kept as it is and gets a packed copy beside it. Then every
 * weight is laid out again, in buffer order, at multiples of 16 floats (a
 * panels buffer rounds N up to whole panels).
 *
 * The values computed do not change: rt_linear_packed runs the kernels
 * rt_linear's portable GEMM runs, on the same panels (bit for bit where
 * both take tfmc's GEMM; OpenBLAS's sgemm sums in its own order), and a
 * load from the panels reads the very float the plain weight held. With
 * `--disable-pass=pack-weights` the products stay rt_linear calls, which
 * follow TFMC_GEMM at run time (OpenBLAS, when it is found).
 *
 * Under --weights-dtype bf16 (ctx->weights_dtype) the panels hold bf16
 * pairs (LW_PANELS_BF16, rt_gemm_pack_bf16: half the bytes) and the calls
 * become rt_linear_packed_bf16; under int8 they hold int8 with one scale
 * per output column (LW_PANELS_I8, rt_gemm_pack_i8: a quarter of the
 * bytes) and the calls become rt_linear_packed_i8 (x quantised per row as
 * it runs), except products with K >= 131072, whose 32-bit integer sums
 * could overflow: they keep f32 panels. Everything else stays f32.
 *
 * Invariant: running the pass again changes nothing (it rewrites rt_linear
 * calls, and the loads of the weights those calls read, only; it leaves no
 * rt_linear it can rewrite, and a weight already in panels is never
 * gathered from again). */
#include "ir/loop.h"
#include "passes/passes.h"

#include <string.h>

typedef struct PackState {
  LoopProgram *p;
  int n_bufs;       /* buffers when the pass began */
  int64_t *size;    /* per buffer: floats a weight takes now (before re-planning) */
  int *refs;        /* per buffer: reads anywhere (loads, addresses) */
  int *loads;       /* per buffer: element loads (LX_LOAD) among them */
  int *linear_refs; /* per buffer: reads as the w of a packable rt_linear */
  int64_t *n, *k;   /* per buffer: the N x K those calls agree on (-1: they disagree) */
  int *packed_as;   /* per buffer: the panels buffer its calls read, or -1 */
  bool *plain;      /* per buffer: an f32 weight in LW_PLAIN layout when the pass began */
  bool *gathered;   /* per buffer: packed in place, its loads to be rewritten */
  const LExpr **done; /* loads rewritten (a node reached twice is rewritten once) */
  int n_done, cap_done;
} PackState;

static void count_expr(PackState *S, const LExpr *e) {
  if (!e)
    return;
  if (e->kind == LX_LOAD || e->kind == LX_ADDR)
    S->refs[e->buf]++;
  if (e->kind == LX_LOAD)
    S->loads[e->buf]++;
  count_expr(S, e->a);
  count_expr(S, e->b);
  count_expr(S, e->c);
}


/* The weight buffer an rt_linear call's w is the whole of, with its N, K;
 * -1 when the call does not qualify. */
static int packable(const PackState *S, const LStmt *s, int64_t *n, int64_t *k) {
  if (s->kind != LS_CALL || s->callee != LC_LINEAR)
    return -1;
  const LExpr *w = s->args[loop_callee_arg(LC_LINEAR, "w")];
  const LExpr *en = s->args[loop_callee_arg(LC_LINEAR, "n")], *ek = s->args[loop_callee_arg(LC_LINEAR, "k")];
  if (w->kind != LX_ADDR || !w->a || w->a->kind != LX_CONST_I || w->a->ival != 0)
    return -1;
  if (en->kind != LX_CONST_I || ek->kind != LX_CONST_I || en->ival < 1 || ek->ival < 1)
    return -1;
  if (w->buf >= S->n_bufs || !S->plain[w->buf])
    return -1;
  /* the whole weight: N x K floats, up to the 16-float alignment of the plan */
  if (en->ival > S->size[w->buf] / ek->ival || S->size[w->buf] - en->ival * ek->ival >= 16)
    return -1;
  *n = en->ival;
  *k = ek->ival;
  return w->buf;
}

static void count_stmt(PackState *S, const LStmt *s) {
  if (!s)
    return;
  count_expr(S, s->lo);
  count_expr(S, s->hi);
  count_expr(S, s->value);
  count_expr(S, s->index);
  if (s->kind == LS_STORE)
    S->refs[s->buf]++;
  for (int i = 0; i < s->n_args; i++)
    count_expr(S, s->args[i]);
  int64_t n, k;
  int b = packable(S, s, &n, &k);
  if (b >= 0) {
    if (S->linear_refs[b]++ == 0) {
      S->n[b] = n;
      S->k[b] = k;
    } else if (S->n[b] != n || S->k[b] != k) {
      S->n[b] = S->k[b] = -1;
    }
  }
  for (int i = 0; i < s->n_stmts; i++)
    count_stmt(S, s->stmts[i]);
}

static void rewrite_stmt(PackState *S, LStmt *s, int *calls) {
  if (!s)
    return;
  int64_t n, k;
  int b = packable(S, s, &n, &k);
  if (b >= 0 && S->packed_as[b] >= 0) {
    /* rt_linear_packed takes rt_linear's arguments in the same order */
    LWLayout l = S->p->bufs[S->packed_as[b]].layout;
    s->callee = l == LW_PANELS_BF16 ? LC_LINEAR_PACKED_BF16
                : l == LW_PANELS_I8 ? LC_LINEAR_PACKED_I8
                                    : LC_LINEAR_PACKED;
    s->args[loop_callee_arg(s->callee, "w")] = lx_addr(S->p, S->packed_as[b], lx_i(S->p, 0));
    (*calls)++;
  }
  for (int i = 0; i < s->n_stmts; i++)
    rewrite_stmt(S, s->stmts[i], calls);
}

/* ---- loads from a weight packed in place ---- */

/* The loop variables around a load, each with the constant range [lo, hi)
 * it runs over (hi < 0: not constant). The verifier allows 64 nested
 * statements, and no loop assigns its own variable. */
typedef struct LoopScope {
  int var[66];
  int64_t lo[66], hi[66];
  int n;
} LoopScope;

static void scope_push(LoopScope *sc, int var, const LExpr *lo, const LExpr *hi) {
  TFMC_ASSERT(sc->n < 66);
  sc->var[sc->n] = var;
  sc->lo[sc->n] = lo && lo->kind == LX_CONST_I ? lo->ival : -1;
  sc->hi[sc->n] = hi && hi->kind == LX_CONST_I ? hi->ival : -1;
  sc->n++;
}

static LExpr *copy_expr(LoopProgram *p, const LExpr *e) {
  if (!e)
    return NULL;
  LExpr *c = arena_alloc(p->arena, sizeof *c);
  *c = *e;
  c->a = copy_expr(p, e->a);
  c->b = copy_expr(p, e->b);
  c->c = copy_expr(p, e->c);
  return c;
}

/* Whether y lies in [0, k) wherever it is evaluated: a constant, or the
 * variable of an enclosing loop over a part of 0..k. */
static bool within_cols(const LoopScope *sc, const LExpr *y, int64_t k) {
  if (y->kind == LX_CONST_I)
    return y->ival >= 0 && y->ival < k;
  if (y->kind != LX_VAR || y->t != LT_I64)
    return false;
  for (int i = sc->n - 1; i >= 0; i--)
    if (sc->var[i] == y->var)
      return sc->lo[i] >= 0 && sc->hi[i] >= 0 && sc->hi[i] <= k;
  return false;
}

/* Row and column of element e of a matrix of k columns: x and y when e is
 * x * k + y with y in [0, k) (then x = (e - y) / k exactly), else e / k
 * and e % k (indices are >= 0). New expressions, sharing nothing with e. */
static void row_col(LoopProgram *p, const LoopScope *sc, const LExpr *e, int64_t k, LExpr **row,
                    LExpr **col) {
  if (e->kind == LX_BIN && e->op == LB_ADD)
    for (int swap = 0; swap < 2; swap++) {
      const LExpr *m = swap ? e->b : e->a, *y = swap ? e->a : e->b, *x = NULL;
      if (m->kind != LX_BIN || m->op != LB_MUL || !within_cols(sc, y, k))
        continue;
      if (m->b->kind == LX_CONST_I && m->b->ival == k)
        x = m->a;
      else if (m->a->kind == LX_CONST_I && m->a->ival == k)
        x = m->b;
      if (x) {
        *row = copy_expr(p, x);
        *col = copy_expr(p, y);
        return;
      }
    }
  *row = lx_bin(p, LB_DIV, copy_expr(p, e), lx_i(p, k));
  *col = lx_bin(p, LB_REM, copy_expr(p, e), lx_i(p, k));
}

/* Element (row, col) of a matrix of k columns in LW_PANELS layout
 * (rt_gemm_pack): panel row / 16 of 16k floats, then col's 16 floats, then
 * row % 16. */
static LExpr *panels_index(LoopProgram *p, LExpr *row, LExpr *col, int64_t k) {
  LExpr *panel = lx_bin(p, LB_MUL, lx_bin(p, LB_DIV, row, lx_i(p, 16)), lx_i(p, 16 * k));
  LExpr *lane = lx_bin(p, LB_REM, copy_expr(p, row), lx_i(p, 16));
  return lx_bin(p, LB_ADD, lx_bin(p, LB_ADD, panel, lx_bin(p, LB_MUL, col, lx_i(p, 16))), lane);
}

static bool rewritten(PackState *S, const LExpr *e) {
  for (int i = 0; i < S->n_done; i++)
    if (S->done[i] == e)
      return true;
  if (S->n_done == S->cap_done) {
    int cap = S->cap_done ? 2 * S->cap_done : 16;
    const LExpr **d = arena_alloc(S->p->arena, (size_t)cap * sizeof *d);
    if (S->n_done)
      memcpy(d, S->done, (size_t)S->n_done * sizeof *d);
    S->done = d;
    S->cap_done = cap;
  }
  S->done[S->n_done++] = e;
  return false;
}

static void gather_expr(PackState *S, const LoopScope *sc, LExpr *e, int *loads) {
  if (!e || (e->kind == LX_LOAD && S->gathered[e->buf] && rewritten(S, e)))
    return;
  gather_expr(S, sc, e->a, loads);
  gather_expr(S, sc, e->b, loads);
  gather_expr(S, sc, e->c, loads);
  if (e->kind != LX_LOAD || !S->gathered[e->buf])
    return;
  LExpr *row, *col;
  row_col(S->p, sc, e->a, S->k[e->buf], &row, &col);
  e->a = panels_index(S->p, row, col, S->k[e->buf]);
  (*loads)++;
}

static void gather_stmt(PackState *S, LoopScope *sc, LStmt *s, int *loads) {
  if (!s)
    return;
  gather_expr(S, sc, s->lo, loads); /* bounds: evaluated before the loop */
  gather_expr(S, sc, s->hi, loads);
  gather_expr(S, sc, s->value, loads);
  gather_expr(S, sc, s->index, loads);
  for (int i = 0; i < s->n_args; i++)
    gather_expr(S, sc, s->args[i], loads);
  if (s->kind == LS_FOR)
    scope_push(sc, s->var, s->lo, s->hi);
  for (int i = 0; i < s->n_stmts; i++)
    gather_stmt(S, sc, s->stmts[i], loads);
  if (s->kind == LS_FOR)
    sc->n--;
}

/* Buffer indices by weights offset: insertion sort (a program has a few
 * hundred weights at most, already in order when they come from the
 * lowering). */
static void sort_by_offset(int *idx, int n, const LoopProgram *p) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && p->bufs[idx[j - 1]].offset > p->bufs[idx[j]].offset; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
}

bool pass_pack_weights_run(LoopProgram *p, PassContext *ctx) {
  int nb = p->n_bufs;
  PackState S = {p, nb};
  S.size = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.size);
  S.refs = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.refs);
  S.loads = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.loads);
  S.gathered = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.gathered);
  S.linear_refs = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.linear_refs);
  S.n = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.n);
  S.k = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.k);
  S.packed_as = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.packed_as);
  S.plain = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *S.plain);
  /* each weight's extent: up to the next weight's offset (the plan lays
   * them out in order, without gaps beyond alignment), panels by their
   * formula */
  int *order = arena_alloc(p->arena, (size_t)(nb + 1) * sizeof *order), nw = 0;
  for (int b = 0; b < nb; b++) {
    S.refs[b] = S.loads[b] = S.linear_refs[b] = 0;
    S.gathered[b] = false;
    S.packed_as[b] = -1;
    S.size[b] = 0;
    S.plain[b] = p->bufs[b].kind == LB_WEIGHT && p->bufs[b].layout == LW_PLAIN &&
                 p->bufs[b].elem == LE_F32;
    if (p->bufs[b].kind == LB_WEIGHT)
      order[nw++] = b;
  }
  sort_by_offset(order, nw, p);
  for (int i = 0; i < nw; i++) {
    const LBuffer *b = &p->bufs[order[i]];
    int64_t end = p->weights_floats;
    for (int j = i + 1; j < nw && end == p->weights_floats; j++)
      if (p->bufs[order[j]].offset > b->offset)
        end = p->bufs[order[j]].offset;
    S.size[order[i]] = b->layout != LW_PLAIN ? loop_weight_layout_floats(b) : end - b->offset;
  }
  for (int i = 0; i < p->n_kernels; i++) {
    count_expr(&S, p->kernels[i].extent);
    count_stmt(&S, p->kernels[i].body);
  }
  PassWeightsDtype dtype = ctx ? ctx->weights_dtype : PASS_WEIGHTS_F32;
  LWLayout layout = dtype == PASS_WEIGHTS_BF16   ? LW_PANELS_BF16
                    : dtype == PASS_WEIGHTS_INT8 ? LW_PANELS_I8
                                                 : LW_PANELS;
  int wide_k = 0; /* int8: products too deep for exact 32-bit sums stay f32 */
  /* choose: in place when only such calls read the weight, or they and
   * element loads do and the panels hold f32 (the loads then read the
   * panels); else a copy */
  int in_place = 0, copies = 0, gathered = 0;
  for (int b = 0; b < nb; b++) {
    if (!S.linear_refs[b] || S.n[b] < 0)
      continue;
    LWLayout l = layout == LW_PANELS_I8 && S.k[b] >= 131072 ? LW_PANELS : layout;
    int target = b;
    if (S.refs[b] == S.linear_refs[b]) {
      in_place++;
    } else if (l == LW_PANELS && S.refs[b] == S.linear_refs[b] + S.loads[b]) {
      S.gathered[b] = true;
      in_place++;
      gathered++;
    } else {
      LBuffer src = p->bufs[b];
      target = loop_buffer_add(p, LB_WEIGHT, 0, src.offset, LE_F32, src.name);
      copies++;
    }
    LBuffer *t = &p->bufs[target];
    t->layout = l;
    wide_k += l != layout;
    t->rows = S.n[b];
    t->cols = S.k[b];
    S.packed_as[b] = target;
  }
  if (!in_place && !copies) {
    pass_note(ctx, "no rt_linear reads a whole weight: nothing packed");
    return true;
  }
  int calls = 0, loads = 0;
  for (int i = 0; i < p->n_kernels; i++)
    rewrite_stmt(&S, p->kernels[i].body, &calls);
  for (int i = 0; gathered && i < p->n_kernels; i++) {
    LKernel *k = &p->kernels[i];
    LoopScope sc = {.n = 0};
    scope_push(&sc, k->outer_var, lx_i(p, 0), k->extent); /* outer in 0..extent */
    gather_stmt(&S, &sc, k->body, &loads);
  }
  /* lay the weights out again, in buffer order */
  int64_t ofs = 0, before = p->weights_floats;
  for (int b = 0; b < p->n_bufs; b++) {
    LBuffer *w = &p->bufs[b];
    if (w->kind != LB_WEIGHT)
      continue;
    int64_t floats = w->layout != LW_PLAIN ? loop_weight_layout_floats(w) : S.size[b];
    TFMC_ASSERT(w->layout != LW_PLAIN || b < nb); /* the copies added are panels */
    w->offset = ofs;
    ofs += (floats + 15) & ~(int64_t)15;
  }
  p->weights_floats = ofs;
  pass_note(ctx,
            "%d rt_linear calls read prepacked %s of %d weights (%d packed in place, %d of them "
            "also gathered from the panels by %d loads; %d copies beside a weight also read "
            "otherwise%s); weights %lld -> %lld floats",
            calls, loop_layout_str(layout), in_place + copies, in_place, gathered, loads, copies,
            wide_k ? "; some with K >= 131072 kept f32 panels" : "", (long long)before,
            (long long)ofs);
  return true;
}
