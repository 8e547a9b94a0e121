/* ir/fused.c — fused nodes: the kinds of fused.def and their decompositions.
 *
 * A fused node is defined by its decomposition into ordinary ops (the
 * bodies listed in fused.def). Its shape rule decomposes it into a scratch
 * graph and reads the result types there; the interpreter runs the same
 * decomposition; the lowering emits one kernel that computes the same
 * values. So a new fusion needs no reference kernel of its own.
 *
 * Invariants: a decomposition builds only ordinary ops (never `fused` or
 * `result`), checks every node with the shape rules (ir_build_try) and
 * never asserts on what it reads: an `elementwise` body comes from text
 * (.tfir files), so a malformed one is a message, not a crash.
 */
#include "ir.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static bool ir_fused_decompose_add_layernorm(IrGraph *into, const IrAttrs *at, const int *args,
                                             int n, int *results, char *err, size_t errlen);
static bool ir_fused_decompose_elementwise(IrGraph *into, const IrAttrs *at, const int *args,
                                           int n, int *results, char *err, size_t errlen);

const IrFusedInfo ir_fused_info[IR_FUSED_COUNT] = {
#define IR_FUSED(E, nm, mn, mx, nres, at, fn, doc) [IR_FUSED_##E] = {nm, mn, mx, nres, at, fn, doc},
#include "fused.def"
#undef IR_FUSED
};

/* operand lists are IR_MAX_OPERANDS long; result lists IR_FUSED_MAX_RESULTS */
#define IR_FUSED(E, nm, mn, mx, nres, at, fn, doc)                                                 \
  _Static_assert((mn) >= 0 && (mn) <= (mx) && (mx) <= IR_MAX_OPERANDS, nm ": operand counts");     \
  _Static_assert((nres) >= 1 && (nres) <= IR_FUSED_MAX_RESULTS, nm ": result count");
#include "fused.def"
#undef IR_FUSED

static bool fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen)
    vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return false;
}

int ir_fused_lookup(const char *name) {
  for (int i = 0; name && i < IR_FUSED_COUNT; i++)
    if (strcmp(ir_fused_info[i].name, name) == 0)
      return i;
  return -1;
}

int ir_fused_kind_of(const IrAttrs *at) { return ir_fused_lookup(at->fusion); }

unsigned ir_node_attr_mask(const IrNode *nd) {
  if ((int)nd->op < 0 || nd->op >= IR_OP_COUNT)
    return 0;
  if (nd->op != IR_OP_FUSED)
    return ir_op_info[nd->op].attrs;
  int k = ir_fused_kind_of(&nd->attrs);
  return IR_ATTR_FUSION | (k >= 0 ? ir_fused_info[k].attrs : 0);
}

bool ir_fused_decompose(IrGraph *into, const IrAttrs *at, const int *args, int n, int *results,
                        char *err, size_t errlen) {
  int k = ir_fused_kind_of(at);
  if (k < 0)
    return fail(err, errlen, "unknown fusion kind '%s'", at->fusion ? at->fusion : "");
  const IrFusedInfo *fi = &ir_fused_info[k];
  if (n < fi->min_operands || n > fi->max_operands)
    return fail(err, errlen, "fused '%s' takes %d..%d operands, got %d", fi->name,
                fi->min_operands, fi->max_operands, n);
  return fi->decompose(into, at, args, n, results, err, errlen);
}

/* A scratch graph with g's symbols and an input "$k" per operand. */
static IrGraph *scratch(Arena *a, const IrGraph *g, const int *operands, int n, int *args,
                        char *err, size_t errlen) {
  IrGraph *sg = ir_graph_create(a, g->name ? g->name : "fused");
  memcpy(sg->syms, g->syms, sizeof sg->syms);
  sg->n_syms = g->n_syms;
  for (int i = 0; i < n; i++) {
    if (operands[i] < 0 || operands[i] >= g->n_nodes) {
      fail(err, errlen, "operand %d refers to no value", i);
      return NULL;
    }
    IrAttrs at;
    memset(&at, 0, sizeof at);
    char name[16];
    snprintf(name, sizeof name, "$%d", i);
    at.name = name;
    args[i] = ir_build_try(sg, IR_OP_INPUT, NULL, 0, &at, g->nodes[operands[i]].type,
                           (IrLoc){NULL, 0, 0}, err, errlen);
    if (args[i] < 0)
      return NULL;
  }
  return sg;
}

bool ir_fused_result_types(const IrGraph *g, const IrAttrs *at, const int *operands, int n,
                           IrType *types, int *n_results, char *err, size_t errlen) {
  int k = ir_fused_kind_of(at);
  if (k < 0)
    return fail(err, errlen, "unknown fusion kind '%s'", at->fusion ? at->fusion : "");
  if (n < 0 || n > IR_MAX_OPERANDS)
    return fail(err, errlen, "bad operand count %d", n);
  Arena *a = arena_create();
  int args[IR_MAX_OPERANDS], res[IR_FUSED_MAX_RESULTS];
  IrGraph *sg = scratch(a, g, operands, n, args, err, errlen);
  bool ok = sg && ir_fused_decompose(sg, at, args, n, res, err, errlen);
  if (ok) {
    *n_results = ir_fused_info[k].n_results;
    for (int i = 0; i < *n_results; i++)
      types[i] = sg->nodes[res[i]].type;
  }
  arena_destroy(a);
  return ok;
}

IrGraph *ir_fused_body(Arena *a, const IrGraph *g, int id, char *err, size_t errlen) {
  const IrNode *nd = &g->nodes[id];
  if (nd->op != IR_OP_FUSED) {
    fail(err, errlen, "%%%d is not a fused node", id);
    return NULL;
  }
  int k = ir_fused_kind_of(&nd->attrs);
  int args[IR_MAX_OPERANDS], res[IR_FUSED_MAX_RESULTS];
  if (k < 0 || nd->n_operands < 0 || nd->n_operands > IR_MAX_OPERANDS) {
    fail(err, errlen, "%%%d is not a well-formed fused node", id);
    return NULL;
  }
  IrGraph *sg = scratch(a, g, nd->operands, nd->n_operands, args, err, errlen);
  if (!sg || !ir_fused_decompose(sg, &nd->attrs, args, nd->n_operands, res, err, errlen))
    return NULL;
  for (int i = 0; i < ir_fused_info[k].n_results; i++) {
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    ir_graph_add_output(sg, name, res[i]);
  }
  return sg;
}

/* ---- add_layernorm, add_layernorm_sum ---- */

/* layernorm(add(a, b), g, beta) {eps, unbiased}; the sum is result 1 */
static bool ir_fused_decompose_add_layernorm(IrGraph *into, const IrAttrs *at, const int *args,
                                             int n, int *results, char *err, size_t errlen) {
  (void)n;
  IrType none;
  memset(&none, 0, sizeof none);
  IrLoc nowhere = {NULL, 0, 0};
  int sum = ir_build_try(into, IR_OP_ADD, args, 2, NULL, none, nowhere, err, errlen);
  if (sum < 0)
    return false;
  IrAttrs la;
  memset(&la, 0, sizeof la);
  la.eps = at->eps;
  la.unbiased = at->unbiased;
  int y = ir_build_try(into, IR_OP_LAYERNORM, (int[]){sum, args[2], args[3]}, 3, &la, none,
                       nowhere, err, errlen);
  if (y < 0)
    return false;
  results[0] = y;
  results[1] = sum; /* read only by the two-result kind */
  return true;
}

/* ---- elementwise: the expression ---- */

typedef struct Expr {
  IrGraph *g;
  const char *s, *p; /* the text, the cursor */
  const int *args;
  int n_args;
  unsigned used; /* operands read */
  int depth;
  char *err;
  size_t errlen;
} Expr;

static bool ex_fail(Expr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool ex_fail(Expr *e, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return fail(e->err, e->errlen, "body \"%s\", at offset %d: %s", e->s, (int)(e->p - e->s), msg);
}

static void ex_space(Expr *e) {
  while (*e->p == ' ')
    e->p++;
}

static bool ex_punct(Expr *e, char c) {
  ex_space(e);
  if (*e->p != c)
    return ex_fail(e, "expected '%c'", c);
  e->p++;
  return true;
}

static bool is_word(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.'; }

/* dim := INT | a symbol of the graph */
static bool ex_dim(Expr *e, IrDim *d) {
  ex_space(e);
  const char *s = e->p;
  while (is_word(*e->p))
    e->p++;
  size_t len = (size_t)(e->p - s);
  if (!len)
    return ex_fail(e, "expected a dim");
  if (isdigit((unsigned char)s[0])) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end != e->p || v < 1)
      return ex_fail(e, "a dim must be an integer >= 1 or a symbol");
    *d = IR_CONST(v);
    return true;
  }
  int sym = ir_graph_find_symbol(e->g, s, len);
  if (sym < 0)
    return ex_fail(e, "unknown symbol '%.*s'", (int)len, s);
  *d = IR_SYM(sym);
  return true;
}

static bool ex_expr(Expr *e, int *out);

/* expr := '$' INT | OP '(' expr [',' expr] ')' | 'scale' '(' expr ',' NUMBER ')'
 *       | OP '[' dim (',' dim)* ']'                 (arange, mask.causal) */
static bool ex_expr(Expr *e, int *out) {
  if (++e->depth > 64)
    return ex_fail(e, "nested too deep");
  ex_space(e);
  IrType none;
  memset(&none, 0, sizeof none);
  IrLoc nowhere = {NULL, 0, 0};
  char msg[256];
  if (*e->p == '$') {
    e->p++;
    if (!isdigit((unsigned char)*e->p))
      return ex_fail(e, "expected an operand number after '$'");
    long k = strtol(e->p, (char **)&e->p, 10);
    if (k < 0 || k >= e->n_args)
      return ex_fail(e, "operand $%ld does not exist (%d operands)", k, e->n_args);
    e->used |= 1u << k;
    *out = e->args[k];
    e->depth--;
    return true;
  }
  const char *s = e->p;
  while (is_word(*e->p))
    e->p++;
  if (e->p == s)
    return ex_fail(e, "expected '$K' or an op");
  int op = ir_op_lookup(s, (size_t)(e->p - s));
  if (op < 0)
    return ex_fail(e, "unknown op '%.*s'", (int)(e->p - s), s);
  IrOpKind kind = ir_op_info[op].kind;
  IrAttrs at;
  memset(&at, 0, sizeof at);
  ex_space(e);
  if (op == IR_OP_ARANGE || op == IR_OP_MASK_CAUSAL) {
    /* typed sources: the dims in brackets */
    if (!ex_punct(e, '['))
      return false;
    IrDim dims[IR_MAX_RANK];
    int rank = 0;
    for (;;) {
      if (rank == IR_MAX_RANK)
        return ex_fail(e, "more than %d dims", IR_MAX_RANK);
      if (!ex_dim(e, &dims[rank++]))
        return false;
      ex_space(e);
      if (*e->p != ',')
        break;
      e->p++;
    }
    if (!ex_punct(e, ']'))
      return false;
    IrType t = ir_type(op == IR_OP_ARANGE ? IR_I32 : IR_BOOL, rank, dims);
    *out = ir_build_try(e->g, (IrOp)op, NULL, 0, &at, t, nowhere, msg, sizeof msg);
    if (*out < 0)
      return ex_fail(e, "%s: %s", ir_op_info[op].name, msg);
    e->depth--;
    return true;
  }
  if (kind != IR_KIND_UNARY && kind != IR_KIND_BINARY && op != IR_OP_EMBED)
    return ex_fail(e, "'%s' cannot be part of an elementwise body", ir_op_info[op].name);
  if (!ex_punct(e, '('))
    return false;
  int ops[2], n = 0, want = kind == IR_KIND_UNARY ? 1 : 2;
  for (; n < want; n++) {
    if (n && !ex_punct(e, ','))
      return false;
    if (op == IR_OP_EMBED && n == 0) {
      /* the table is read at computed rows: it must be an operand */
      ex_space(e);
      if (*e->p != '$')
        return ex_fail(e, "the table of embed must be an operand $K");
    }
    if (!ex_expr(e, &ops[n]))
      return false;
  }
  if (op == IR_OP_SCALE) {
    if (!ex_punct(e, ','))
      return false;
    ex_space(e);
    char *end;
    double v = strtod(e->p, &end);
    if (end == e->p || !isfinite(v))
      return ex_fail(e, "scale needs a finite factor");
    e->p = end;
    at.factor = v;
  }
  if (!ex_punct(e, ')'))
    return false;
  *out = ir_build_try(e->g, (IrOp)op, ops, n, &at, none, nowhere, msg, sizeof msg);
  if (*out < 0)
    return ex_fail(e, "%s: %s", ir_op_info[op].name, msg);
  e->depth--;
  return true;
}

static bool ir_fused_decompose_elementwise(IrGraph *into, const IrAttrs *at, const int *args,
                                           int n, int *results, char *err, size_t errlen) {
  if (!at->expr || !at->expr[0])
    return fail(err, errlen, "an elementwise fusion needs a body (expr)");
  Expr e = {into, at->expr, at->expr, args, n, 0, 0, err, errlen};
  if (!ex_expr(&e, &results[0]))
    return false;
  ex_space(&e);
  if (*e.p)
    return ex_fail(&e, "unexpected text after the expression");
  for (int k = 0; k < n; k++)
    if (!(e.used & (1u << k)))
      return fail(err, errlen, "body \"%s\" does not use operand $%d", at->expr, k);
  for (int k = 0; k < n; k++)
    if (results[0] == args[k])
      return fail(err, errlen, "body \"%s\" computes nothing: it is an operand", at->expr);
  return true;
}
