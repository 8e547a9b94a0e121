/* ir/loop_verify.c — PLACEHOLDER so the looppass branch links: the real
 * loop IR verifier is written on another branch and replaces this file
 * wholesale at merge (same prototype, ir/loop.h). This one checks only what
 * a pass could break without tripping the builders' asserts: buffer and
 * variable numbers in range, and every call against its callee's row
 * (loop_call_check). */
#include "ir/loop.h"

#include <stdarg.h>

static bool fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return false;
}

static bool expr_ok(const LoopProgram *p, const LKernel *k, const LExpr *e, char *err,
                    size_t errlen) {
  if (!e) return true;
  if (e->kind == LX_VAR && (e->var < 0 || e->var >= k->n_vars))
    return fail(err, errlen, "%s: variable v%d out of range", k->name, e->var);
  if ((e->kind == LX_LOAD || e->kind == LX_ADDR) && (e->buf < 0 || e->buf >= p->n_bufs))
    return fail(err, errlen, "%s: buffer b%d out of range", k->name, e->buf);
  return expr_ok(p, k, e->a, err, errlen) && expr_ok(p, k, e->b, err, errlen) &&
         expr_ok(p, k, e->c, err, errlen);
}

static bool stmt_ok(const LoopProgram *p, const LKernel *k, const LStmt *s, char *err,
                    size_t errlen) {
  switch (s->kind) {
  case LS_FOR:
  case LS_LET:
  case LS_SET:
    if (s->var < 0 || s->var >= k->n_vars)
      return fail(err, errlen, "%s: variable v%d out of range", k->name, s->var);
    break;
  case LS_STORE:
    if (s->buf < 0 || s->buf >= p->n_bufs)
      return fail(err, errlen, "%s: buffer b%d out of range", k->name, s->buf);
    break;
  case LS_CALL: {
    char why[400];
    if (!loop_call_check(p, s, why, sizeof why)) return fail(err, errlen, "%s: %s", k->name, why);
    break;
  }
  case LS_BLOCK: break;
  case LS_KIND_COUNT: return fail(err, errlen, "%s: unknown statement kind", k->name);
  }
  if (!expr_ok(p, k, s->lo, err, errlen) || !expr_ok(p, k, s->hi, err, errlen) ||
      !expr_ok(p, k, s->value, err, errlen) || !expr_ok(p, k, s->index, err, errlen))
    return false;
  for (int i = 0; s->kind == LS_CALL && i < s->n_args; i++)
    if (!expr_ok(p, k, s->args[i], err, errlen)) return false;
  for (int i = 0; (s->kind == LS_FOR || s->kind == LS_BLOCK) && i < s->n_stmts; i++)
    if (!stmt_ok(p, k, s->stmts[i], err, errlen)) return false;
  return true;
}

bool loop_program_verify(const LoopProgram *p, char *err, size_t errlen) {
  for (int i = 0; i < p->n_kernels; i++) {
    const LKernel *k = &p->kernels[i];
    if (!k->body || k->body->kind != LS_BLOCK)
      return fail(err, errlen, "%s: the body is not a block", k->name);
    if (!stmt_ok(p, k, k->body, err, errlen)) return false;
  }
  return true;
}
