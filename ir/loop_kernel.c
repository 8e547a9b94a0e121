/* ir/loop_kernel.c — kernels as functions of their buffers: the buffers a
 * kernel touches (its parameters, in one fixed order) and the structural
 * equality that lets two kernels share one generated function.
 *
 * A kernel's parameters are the distinct buffers its extent and body
 * reference, in the order a pre-order walk first meets them (statements in
 * order; a FOR's bounds before its body; a store's buffer before its index
 * and value; a load's buffer before its index; operands a, b, c). Both code
 * generators pass parameter j of kernel k as its j-th buffer base, so two
 * kernels whose bodies are equal up to a renaming of buffers — same
 * statements, expressions, constants, variables, extent, grain — compute
 * with one function: loop_kernel_same reports whether that holds.
 *
 * The renaming must also keep each parameter's memory region (the weights,
 * the arena, input k, output k: what alias information is derived from) and
 * element type, so the shared function's claims hold for every caller. */
#include "ir/loop.h"

#include <string.h>

typedef struct Walk {
  const LoopProgram *p;
  int *slot;   /* buffer -> parameter index, -1 before first seen */
  int *params; /* parameter index -> buffer */
  int n;
} Walk;

static void see_buf(Walk *w, int buf) {
  if (buf < 0 || buf >= w->p->n_bufs) return; /* malformed: the verifier says so */
  if (w->slot[buf] >= 0) return;
  w->slot[buf] = w->n;
  w->params[w->n++] = buf;
}

static void walk_expr(Walk *w, const LExpr *e) {
  if (!e) return;
  if (e->kind == LX_LOAD || e->kind == LX_ADDR) see_buf(w, e->buf);
  walk_expr(w, e->a);
  walk_expr(w, e->b);
  walk_expr(w, e->c);
}

static void walk_stmt(Walk *w, const LStmt *s) {
  switch (s->kind) {
  case LS_FOR:
    walk_expr(w, s->lo);
    walk_expr(w, s->hi);
    break;
  case LS_LET:
  case LS_SET: walk_expr(w, s->value); break;
  case LS_STORE:
    see_buf(w, s->buf);
    walk_expr(w, s->index);
    walk_expr(w, s->value);
    break;
  case LS_CALL:
    for (int i = 0; i < s->n_args; i++) walk_expr(w, s->args[i]);
    break;
  case LS_BLOCK: break;
  case LS_KIND_COUNT: TFMC_ASSERT(!"bad statement kind");
  }
  for (int i = 0; i < s->n_stmts; i++) walk_stmt(w, s->stmts[i]);
}

int loop_kernel_params(const LoopProgram *p, const LKernel *k, int *params) {
  int *slot = arena_alloc(p->arena, (size_t)(p->n_bufs + 1) * sizeof *slot);
  for (int i = 0; i < p->n_bufs; i++) slot[i] = -1;
  Walk w = {p, slot, params, 0};
  walk_expr(&w, k->extent);
  walk_stmt(&w, k->body);
  return w.n;
}

int loop_buffer_region(const LBuffer *b) {
  switch (b->kind) {
  case LB_WEIGHT: return 0;
  case LB_ARENA: return 1;
  case LB_STATE: return 2;
  case LB_INPUT: return 3 + 2 * b->index;
  case LB_OUTPUT: return 4 + 2 * b->index;
  case LB_KIND_COUNT: break;
  }
  TFMC_ASSERT(!"bad buffer kind");
  return -1;
}

/* ---- structural equality up to a renaming of buffers ---- */

typedef struct Same {
  const LoopProgram *p;
  int *map, *rev; /* a's buffer -> b's, b's -> a's; -1 unmapped */
} Same;

static bool same_buf(Same *s, int x, int y) {
  if (s->map[x] < 0 && s->rev[y] < 0) {
    const LBuffer *bx = &s->p->bufs[x], *by = &s->p->bufs[y];
    if (bx->elem != by->elem || loop_buffer_region(bx) != loop_buffer_region(by)) return false;
    s->map[x] = y;
    s->rev[y] = x;
    return true;
  }
  return s->map[x] == y && s->rev[y] == x;
}

static bool same_expr(Same *s, const LExpr *a, const LExpr *b) {
  if (!a || !b) return a == b;
  if (a->kind != b->kind || a->t != b->t || a->reassoc != b->reassoc || a->op != b->op)
    return false;
  switch (a->kind) {
  case LX_CONST_I:
    if (a->ival != b->ival) return false;
    break;
  case LX_CONST_F:
    if (memcmp(&a->fval, &b->fval, sizeof a->fval) != 0) return false;
    break;
  case LX_VAR:
    if (a->var != b->var) return false;
    break;
  case LX_SYM:
    if (a->sym != b->sym) return false;
    break;
  case LX_LOAD:
  case LX_ADDR:
    if (!same_buf(s, a->buf, b->buf)) return false;
    break;
  case LX_POOL:
  case LX_NULL:
  case LX_BIN:
  case LX_UN:
  case LX_SELECT:
  case LX_CAST: break;
  case LX_KIND_COUNT: return false;
  }
  return same_expr(s, a->a, b->a) && same_expr(s, a->b, b->b) && same_expr(s, a->c, b->c);
}

static bool same_stmt(Same *s, const LStmt *a, const LStmt *b) {
  if (a->kind != b->kind || a->n_stmts != b->n_stmts) return false;
  switch (a->kind) {
  case LS_FOR:
    if (a->var != b->var || !same_expr(s, a->lo, b->lo) || !same_expr(s, a->hi, b->hi))
      return false;
    break;
  case LS_LET:
  case LS_SET:
    if (a->t != b->t || a->var != b->var || !same_expr(s, a->value, b->value)) return false;
    break;
  case LS_STORE:
    if (!same_buf(s, a->buf, b->buf) || !same_expr(s, a->index, b->index) ||
        !same_expr(s, a->value, b->value))
      return false;
    break;
  case LS_CALL:
    if (a->callee != b->callee || a->n_args != b->n_args) return false;
    for (int i = 0; i < a->n_args; i++)
      if (!same_expr(s, a->args[i], b->args[i])) return false;
    break;
  case LS_BLOCK: break;
  case LS_KIND_COUNT: return false;
  }
  for (int i = 0; i < a->n_stmts; i++)
    if (!same_stmt(s, a->stmts[i], b->stmts[i])) return false;
  return true;
}

bool loop_kernel_same(const LoopProgram *p, const LKernel *a, const LKernel *b) {
  if (a->n_vars != b->n_vars || a->outer_var != b->outer_var || a->parallel != b->parallel ||
      (a->parallel && a->grain != b->grain))
    return false;
  for (int v = 0; v < a->n_vars; v++)
    if (a->var_types[v] != b->var_types[v]) return false;
  int *m = arena_alloc(p->arena, (size_t)(2 * p->n_bufs + 1) * sizeof *m);
  for (int i = 0; i < 2 * p->n_bufs; i++) m[i] = -1;
  Same s = {p, m, m + p->n_bufs};
  return same_expr(&s, a->extent, b->extent) && same_stmt(&s, a->body, b->body);
}

/* FNV-1a over what loop_kernel_same compares, buffers as (first-use
 * index, region, element type): equal kernels hash alike. */
typedef struct Hash {
  uint64_t h;
  int *slot;
  int n;
  const LoopProgram *p;
} Hash;

static void mix(Hash *h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h->h ^= (v >> (8 * i)) & 0xff;
    h->h *= 1099511628211ull;
  }
}

static void hash_buf(Hash *h, int buf) {
  if (h->slot[buf] < 0) h->slot[buf] = h->n++;
  mix(h, (uint64_t)h->slot[buf]);
  mix(h, (uint64_t)loop_buffer_region(&h->p->bufs[buf]));
  mix(h, (uint64_t)h->p->bufs[buf].elem);
}

static void hash_expr(Hash *h, const LExpr *e) {
  if (!e) {
    mix(h, 0xfeed);
    return;
  }
  mix(h, (uint64_t)e->kind | (uint64_t)e->t << 8 | (uint64_t)e->reassoc << 16 |
             (uint64_t)(unsigned)e->op << 24);
  uint64_t f;
  switch (e->kind) {
  case LX_CONST_I: mix(h, (uint64_t)e->ival); break;
  case LX_CONST_F:
    memcpy(&f, &e->fval, sizeof f);
    mix(h, f);
    break;
  case LX_VAR: mix(h, (uint64_t)e->var); break;
  case LX_SYM: mix(h, (uint64_t)e->sym); break;
  case LX_LOAD:
  case LX_ADDR: hash_buf(h, e->buf); break;
  case LX_POOL:
  case LX_NULL:
  case LX_BIN:
  case LX_UN:
  case LX_SELECT:
  case LX_CAST:
  case LX_KIND_COUNT: break;
  }
  hash_expr(h, e->a);
  hash_expr(h, e->b);
  hash_expr(h, e->c);
}

static void hash_stmt(Hash *h, const LStmt *s) {
  mix(h, (uint64_t)s->kind | (uint64_t)s->n_stmts << 8);
  switch (s->kind) {
  case LS_FOR:
    mix(h, (uint64_t)s->var);
    hash_expr(h, s->lo);
    hash_expr(h, s->hi);
    break;
  case LS_LET:
  case LS_SET:
    mix(h, (uint64_t)s->var | (uint64_t)s->t << 32);
    hash_expr(h, s->value);
    break;
  case LS_STORE:
    hash_buf(h, s->buf);
    hash_expr(h, s->index);
    hash_expr(h, s->value);
    break;
  case LS_CALL:
    mix(h, (uint64_t)s->callee);
    for (int i = 0; i < s->n_args; i++) hash_expr(h, s->args[i]);
    break;
  case LS_BLOCK:
  case LS_KIND_COUNT: break;
  }
  for (int i = 0; i < s->n_stmts; i++) hash_stmt(h, s->stmts[i]);
}

uint64_t loop_kernel_hash(const LoopProgram *p, const LKernel *k) {
  int *slot = arena_alloc(p->arena, (size_t)(p->n_bufs + 1) * sizeof *slot);
  for (int i = 0; i < p->n_bufs; i++) slot[i] = -1;
  Hash h = {1469598103934665603ull, slot, 0, p};
  mix(&h, (uint64_t)k->n_vars | (uint64_t)k->outer_var << 16 | (uint64_t)k->parallel << 32);
  if (k->parallel) mix(&h, (uint64_t)k->grain);
  for (int v = 0; v < k->n_vars; v++) mix(&h, (uint64_t)k->var_types[v]);
  hash_expr(&h, k->extent);
  hash_stmt(&h, k->body);
  return h.h;
}

int loop_program_functions(const LoopProgram *p) {
  int n = 0;
  for (int i = 0; i < p->n_kernels; i++) n += p->kernels[i].shares < 0;
  return n;
}
