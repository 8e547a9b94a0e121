/* passes/lane_split.c — lane-split reductions (loop IR).
 *
 * A loop that only folds terms into one f32 variable r with a reassociable
 * add, max or min,
 *
 *     for v in lo..hi:
 *       r = (r +~ TERM(v))                       (or max~(r, TERM(v)), min~)
 *
 * (layernorm's sums, softmax's max) may be computed in any order, which ISO
 * C cannot say and the LLVM backend leaves to its vectoriser. This pass
 * decides the order in the IR, so both code generators print the same sums:
 *
 *     {
 *       let vN: i64 = (max((hi - lo), 0) / 8)      (folded when lo, hi are constants)
 *       let l0: f32 = 0f   ... l7                   (max / min: r's value)
 *       for vb in 0..vN:
 *         let vbase: i64 = (lo + (vb * 8))
 *         l0 = (l0 + TERM(vbase))  ...  l7 = (l7 + TERM((vbase + 7)))
 *       l0 = (l0 + l1); l2 = (l2 + l3); l4 = (l4 + l5); l6 = (l6 + l7)
 *       l0 = (l0 + l2); l4 = (l4 + l6)
 *       l0 = (l0 + l4)
 *       r = (r + l0)
 *       for v in (lo + (vN * 8))..hi:              (left out when empty)
 *         r = (r + TERM(v))
 *     }
 *
 * Lane l takes the iterations congruent to l mod 8 (counted from lo); the
 * eight independent chains are what compilers vectorise without
 * -ffast-math. This is the order backends/c/emit.c printed before the
 * decision moved here, so emitted C computes what it did.
 *
 * Invariants: everything the pass writes is strict (no reassoc), so the
 * result holds no reduction it would split again (idempotent); lo and hi
 * are evaluated once, as a loop's bounds are (held in variables unless they
 * are constants, symbols or variables the reduction cannot change); TERM
 * is copied, never shared between statements; loops with a constant trip
 * count below 8 are left alone (nothing to gain). */
#include "ir/loop.h"
#include "passes/passes.h"

#define LANES 8

static bool reads_var(const LExpr *e, int var) {
  if (!e) return false;
  if (e->kind == LX_VAR && e->var == var) return true;
  return reads_var(e->a, var) || reads_var(e->b, var) || reads_var(e->c, var);
}

/* A deep copy of e with variable var replaced by a copy of with (var < 0:
 * a plain copy). */
static LExpr *subst(LoopProgram *p, const LExpr *e, int var, const LExpr *with) {
  if (!e) return NULL;
  if (e->kind == LX_VAR && e->var == var) return subst(p, with, -1, NULL);
  LExpr *c = arena_alloc(p->arena, sizeof *c);
  *c = *e;
  c->a = subst(p, e->a, var, with);
  c->b = subst(p, e->b, var, with);
  c->c = subst(p, e->c, var, with);
  return c;
}

static LExpr *copy(LoopProgram *p, const LExpr *e) { return subst(p, e, -1, NULL); }

/* The loop's LS_SET if s is such a reduction, else NULL. */
static const LStmt *reduction(const LStmt *s) {
  if (s->kind != LS_FOR || s->n_stmts != 1 || s->stmts[0]->kind != LS_SET) return NULL;
  const LStmt *set = s->stmts[0];
  const LExpr *e = set->value;
  if (!e || e->kind != LX_BIN || !e->reassoc || e->t != LT_F32 || !e->a || !e->b) return NULL;
  if (e->op != LB_ADD && e->op != LB_MAX && e->op != LB_MIN) return NULL;
  if (e->a->kind != LX_VAR || e->a->var != set->var || set->var == s->var) return NULL;
  if (reads_var(e->b, set->var) || reads_var(s->lo, set->var) || reads_var(s->hi, set->var))
    return NULL;
  return set;
}

/* A bound usable at several places without changing meaning: a constant, a
 * symbol or a variable (the reduction assigns only r, which it does not
 * read); anything else is held in a new variable defined in blk. */
static LExpr *once(LoopProgram *p, LKernel *k, LStmt *blk, LExpr *e) {
  if (e->kind == LX_CONST_I || e->kind == LX_SYM || e->kind == LX_VAR) return e;
  int v = loop_var_new(p, k, LT_I64);
  ls_append(p, blk, ls_let(p, v, LT_I64, e));
  return lx_var(p, k, v);
}

/* a - b, with a - 0 kept as a */
static LExpr *sub(LoopProgram *p, LExpr *a, LExpr *b) {
  if (b->kind == LX_CONST_I && b->ival == 0) return a;
  return lx_bin(p, LB_SUB, a, b);
}

/* The block replacing reduction loop s (see the top of the file), or NULL
 * when the loop is better left as it is. */
static LStmt *split(LoopProgram *p, LKernel *k, LStmt *s, const LStmt *set) {
  LBinOp op = (LBinOp)set->value->op;
  int r = set->var, v = s->var;
  const LExpr *term = set->value->b;
  bool konst = s->lo->kind == LX_CONST_I && s->hi->kind == LX_CONST_I;
  if (konst && s->hi->ival - s->lo->ival < LANES) return NULL;

  LStmt *blk = ls_block(p);
  LExpr *lo = once(p, k, blk, s->lo), *hi = once(p, k, blk, s->hi), *blocks;
  if (konst) {
    blocks = lx_i(p, (hi->ival - lo->ival) / LANES);
  } else {
    int n = loop_var_new(p, k, LT_I64);
    LExpr *trip = lx_bin(p, LB_MAX, sub(p, copy(p, hi), copy(p, lo)), lx_i(p, 0));
    ls_append(p, blk, ls_let(p, n, LT_I64, lx_bin(p, LB_DIV, trip, lx_i(p, LANES))));
    blocks = lx_var(p, k, n);
  }
  int lane[LANES];
  for (int l = 0; l < LANES; l++) {
    lane[l] = loop_var_new(p, k, LT_F32);
    ls_append(p, blk, ls_let(p, lane[l], LT_F32, op == LB_ADD ? lx_f32(p, 0) : lx_var(p, k, r)));
  }
  int vb = loop_var_new(p, k, LT_I64), base = loop_var_new(p, k, LT_I64);
  LStmt *blocks_loop = ls_for(p, vb, lx_i(p, 0), copy(p, blocks));
  ls_append(p, blk, blocks_loop);
  ls_append(p, blocks_loop, ls_let(p, base, LT_I64,
                            lx_bin(p, LB_ADD, copy(p, lo),
                                   lx_bin(p, LB_MUL, lx_var(p, k, vb), lx_i(p, LANES)))));
  for (int l = 0; l < LANES; l++) {
    LExpr *at = lx_bin(p, LB_ADD, lx_var(p, k, base), lx_i(p, l));
    ls_append(p, blocks_loop, ls_set(p, lane[l], lx_bin(p, op, lx_var(p, k, lane[l]),
                                                  subst(p, term, v, at))));
  }
  for (int w = 1; w < LANES; w *= 2) /* ((l0 l1) (l2 l3)) ((l4 l5) (l6 l7)) */
    for (int l = 0; l < LANES; l += 2 * w)
      ls_append(p, blk, ls_set(p, lane[l], lx_bin(p, op, lx_var(p, k, lane[l]),
                                                    lx_var(p, k, lane[l + w]))));
  ls_append(p, blk, ls_set(p, r, lx_bin(p, op, lx_var(p, k, r), lx_var(p, k, lane[0]))));
  if (!(konst && (hi->ival - lo->ival) % LANES == 0)) {
    LExpr *from = lx_bin(p, LB_ADD, copy(p, lo), lx_bin(p, LB_MUL, copy(p, blocks), lx_i(p, LANES)));
    LStmt *rest = ls_for(p, v, from, copy(p, hi));
    ls_append(p, rest, ls_set(p, r, lx_bin(p, op, lx_var(p, k, r), copy(p, term))));
    ls_append(p, blk, rest);
  }
  return blk;
}

/* Whether a statement of s other than skip (and what skip holds) reads
 * variable var. */
static bool reads_var_outside(const LStmt *s, const LStmt *skip, int var) {
  if (!s || s == skip) return false;
  if (reads_var(s->lo, var) || reads_var(s->hi, var) || reads_var(s->value, var) ||
      reads_var(s->index, var))
    return true;
  for (int i = 0; i < s->n_args; i++)
    if (reads_var(s->args[i], var)) return true;
  for (int i = 0; i < s->n_stmts; i++)
    if (reads_var_outside(s->stmts[i], skip, var)) return true;
  return false;
}

/* Whether a statement that starts before stop, in statement order, defines
 * var (a let, a set, or a loop driving it): the verifier's rule for a read.
 * *hit is set once stop is reached. */
static bool defined_before(const LStmt *s, const LStmt *stop, int var, bool *hit) {
  if (!s || *hit)
    return false;
  if (s == stop) {
    *hit = true;
    return false;
  }
  if ((s->kind == LS_LET || s->kind == LS_SET || s->kind == LS_FOR) && s->var == var)
    return true;
  for (int i = 0; i < s->n_stmts && !*hit; i++)
    if (defined_before(s->stmts[i], stop, var, hit))
      return true;
  return false;
}

static int split_in(LoopProgram *p, LKernel *k, LStmt *parent) {
  int n = 0;
  for (int i = 0; i < parent->n_stmts; i++) {
    LStmt *s = parent->stmts[i];
    const LStmt *set = reduction(s);
    /* a loop variable read after its loop (listings may say so) keeps its
     * loop: the split one is driven by other variables */
    if (set && reads_var_outside(k->body, s, s->var)) set = NULL;
    /* max / min lanes start at r's value, read before the loop: a reduction
     * whose r nothing defines before it (its first read is 0, which only
     * the set itself may rely on) keeps its loop, or the split program
     * would read r undefined */
    bool hit = false;
    if (set && set->value->op != LB_ADD && !defined_before(k->body, s, set->var, &hit))
      set = NULL;
    LStmt *blk = set ? split(p, k, s, set) : NULL;
    if (blk) {
      parent->stmts[i] = blk;
      n++;
    } else if (s->kind == LS_FOR || s->kind == LS_BLOCK) {
      n += split_in(p, k, s);
    }
  }
  return n;
}

bool pass_lane_split_run(LoopProgram *p, PassContext *ctx) {
  int loops = 0, kernels = 0;
  for (int i = 0; i < p->n_kernels; i++) {
    int n = split_in(p, &p->kernels[i], p->kernels[i].body);
    loops += n;
    kernels += n > 0;
  }
  if (loops) pass_note(ctx, "split %d reduction%s in %d kernel%s into %d lanes", loops,
                       loops == 1 ? "" : "s", kernels, kernels == 1 ? "" : "s", LANES);
  return true;
}
