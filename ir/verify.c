/* ir/verify.c — checks that a graph is well formed.
 *
 * Structure: op codes known; operand counts within the op's table row;
 * operands refer to values defined earlier (the node order is topological);
 * types have a valid dtype, rank 0..IR_MAX_RANK, symbol indices that exist,
 * constant dims >= 1 (zero-sized tensors are not supported) and an element
 * count that fits in 64 bits; attributes make sense (a non-empty name on
 * input/param, heads >= 1, eps finite and >= 0, factor/scale/value finite:
 * each attrs.def row's CHECK, reported in table order);
 * input names unique among inputs, param names unique among params, output
 * names unique, outputs referring to existing values; symbols named, unique,
 * max >= 1; state names unique, each state appended to by at most one
 * kv.append, and a kv.append result (a view of its state) consumed only as
 * the k or v of attention / attn.probs / attn.mix, never an output; a fused
 * node's kind a row of fused.def with its operand count, attributes and a
 * body that decomposes (the shape rule decomposes it), a `result` reading
 * result 1..n-1 of a fused node, at most one `result` per result.
 * Types: every node's type equals what its shape rule (ir_infer_type) gives;
 * for ops whose type is declared (input, param, arange, mask.causal, reshape,
 * sinusoid) the rule checks the declared type in place.
 *
 * Each problem is reported at the node's location, prefixed with the value
 * and op: "%7 (layernorm): ...". A node is type-checked only when it and its
 * operands are sound (well-formed and, for the operands, correctly typed),
 * so one mistake gives one message, and the shape rules never see an index
 * they could overrun.
 */
#include "ir.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *op_name(IrOp op) {
  return (int)op >= 0 && op < IR_OP_COUNT ? ir_op_info[op].name : "?";
}

static void node_error(Diags *d, const IrGraph *g, int id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void node_error(Diags *d, const IrGraph *g, int id, const char *fmt, ...) {
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const IrNode *nd = &g->nodes[id];
  diag_error(d, nd->loc, "%%%d (%s): %s", id, op_name(nd->op), msg);
}

/* A name made printable for a message: quoted, control bytes escaped, cut. */
static const char *show(const char *s, char *buf, size_t n) {
  if (!s)
    return "(null)";
  size_t k = 0, len = strlen(s);
  buf[k++] = '"';
  for (size_t i = 0; i < len && k + 8 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f)
      k += (size_t)snprintf(buf + k, n - k, "\\x%02X", c);
    else if (c == '"' || c == '\\') {
      buf[k++] = '\\';
      buf[k++] = (char)c;
    } else
      buf[k++] = (char)c;
    if (i + 1 < len && k + 8 >= n) {
      memcpy(buf + k, "...", 3);
      k += 3;
    }
  }
  buf[k++] = '"';
  buf[k] = 0;
  return buf;
}

/* The type as the printer writes it; the caller frees the string. */
static char *type_str(const IrGraph *g, const IrType *t) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  TFMC_ASSERT(f);
  ir_type_print(g, t, f);
  fclose(f);
  return s;
}

static bool type_check(const IrGraph *g, int id, const IrType *t, Diags *d) {
  if ((int)t->dtype < 0 || t->dtype >= IR_DTYPE_COUNT) {
    node_error(d, g, id, "dtype code %d is not valid", (int)t->dtype);
    return false;
  }
  if (t->rank < 0 || t->rank > IR_MAX_RANK) {
    node_error(d, g, id, "rank %d is out of range (0..%d)", t->rank, IR_MAX_RANK);
    return false;
  }
  bool ok = true;
  int64_t elems = 1;
  for (int i = 0; i < t->rank; i++) {
    IrDim dm = t->dims[i];
    int64_t v;
    if (dm.sym >= 0) {
      if (dm.sym >= g->n_syms || dm.sym >= IR_MAX_SYMS) {
        node_error(d, g, id, "dim %d refers to symbol #%d, but the graph has %d", i, dm.sym,
                   g->n_syms);
        ok = false;
        continue;
      }
      v = g->syms[dm.sym].max;
    } else {
      v = dm.value;
      if (v < 1) {
        node_error(d, g, id, "dim %d is %lld; dimensions must be >= 1", i, (long long)v);
        ok = false;
        continue;
      }
    }
    if (v >= 1 && elems > INT64_MAX / v) {
      node_error(d, g, id, "the type has more elements than a 64-bit count holds");
      return false;
    }
    if (v >= 1)
      elems *= v;
  }
  return ok;
}

/* Checks each attribute the op carries against its attrs.def CHECK, in
 * table order. */
static bool attrs_check(const IrGraph *g, int id, Diags *d) {
  const IrNode *nd = &g->nodes[id];
  unsigned carried = ir_node_attr_mask(nd);
  bool ok = true;
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++) {
    const IrAttrInfo *info = &ir_attr_info[i];
    IrAttrId aid = (IrAttrId)i;
    if (!(carried & info->bit))
      continue;
    switch (info->check) {
    case IR_ATTR_CHECK_NONE: break;
    case IR_ATTR_CHECK_NONEMPTY: {
      const char *v = ir_attrs_get_string(&nd->attrs, aid);
      if (!v || !v[0]) {
        node_error(d, g, id, "has no %s", info->name);
        ok = false;
      }
      break;
    }
    case IR_ATTR_CHECK_FINITE: {
      double v = ir_attrs_get_f64(&nd->attrs, aid);
      if (!isfinite(v)) {
        node_error(d, g, id, "%s must be a finite number, got %g", info->name, v);
        ok = false;
      }
      break;
    }
    case IR_ATTR_CHECK_NONNEG: {
      double v = ir_attrs_get_f64(&nd->attrs, aid);
      if (!(isfinite(v) && v >= 0)) {
        node_error(d, g, id, "%s must be a finite number >= 0, got %g", info->name, v);
        ok = false;
      }
      break;
    }
    case IR_ATTR_CHECK_POSITIVE: {
      int64_t v = ir_attrs_get_int(&nd->attrs, aid);
      if (v < 1) {
        node_error(d, g, id, "%s must be >= 1, got %lld", info->name, (long long)v);
        ok = false;
      }
      break;
    }
    case IR_ATTR_CHECK_OPTIONAL: break;
    case IR_ATTR_CHECK_COUNT: TFMC_ASSERT(!"attribute without a check");
    }
    if (info->kind == IR_ATTR_KIND_ACT) {
      int64_t v = ir_attrs_get_int(&nd->attrs, aid);
      if (v < 0 || v >= IR_ACT_COUNT) {
        node_error(d, g, id, "%s must be none, relu, gelu or gelu_tanh, got %lld", info->name,
                   (long long)v);
        ok = false;
      }
    }
  }
  return ok;
}

/* Checks node id; returns whether its users can be type-checked against it:
 * false when its type is malformed or not what its rule infers (its users
 * are then skipped, so one wrong type gives one message, not one per use). */
static bool node_check(const IrGraph *g, int id, const bool *type_ok, Diags *d) {
  const IrNode *nd = &g->nodes[id];
  if ((int)nd->op < 0 || nd->op >= IR_OP_COUNT) {
    node_error(d, g, id, "unknown op code %d", (int)nd->op);
    return false;
  }
  const IrOpInfo *info = &ir_op_info[nd->op];
  bool own_type = type_check(g, id, &nd->type, d);
  bool sound = own_type;
  if (nd->n_operands < info->min_operands || nd->n_operands > info->max_operands) {
    if (info->min_operands == info->max_operands)
      node_error(d, g, id, "takes %d operand%s, got %d", info->min_operands,
                 info->min_operands == 1 ? "" : "s", nd->n_operands);
    else
      node_error(d, g, id, "takes %d %s %d operands, got %d", info->min_operands,
                 info->max_operands == info->min_operands + 1 ? "or" : "to", info->max_operands,
                 nd->n_operands);
    sound = false;
  } else {
    for (int j = 0; j < nd->n_operands; j++) {
      int o = nd->operands[j];
      if (o < 0 || o >= g->n_nodes) {
        node_error(d, g, id, "operand %d refers to %%%d, which does not exist", j, o);
        sound = false;
      } else if (o >= id) {
        node_error(d, g, id, "operand %d refers to %%%d, which is not defined before this node", j,
                   o);
        sound = false;
      } else if (!type_ok[o]) {
        sound = false; /* reported at %o */
      }
    }
  }
  if (!attrs_check(g, id, d))
    sound = false;
  if (!sound)
    return own_type;

  IrType t = nd->type;
  char err[512];
  if (!ir_infer_type(g, nd->op, nd->operands, nd->n_operands, &nd->attrs, &t, err, sizeof err)) {
    node_error(d, g, id, "%s", err);
    return false;
  }
  if (!ir_type_eq(&t, &nd->type)) {
    char *have = type_str(g, &nd->type), *want = type_str(g, &t);
    node_error(d, g, id, "type %s does not match the inferred %s", have, want);
    free(have);
    free(want);
    return false;
  }
  return own_type;
}

typedef struct NameRef {
  const char *name;
  int index;
} NameRef;

static int name_ref_cmp(const void *pa, const void *pb) {
  const NameRef *a = pa, *b = pb;
  int c = strcmp(a->name, b->name);
  return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* Reports every node of op `op` (or `also`) whose name an earlier such node
 * has: a derived param (param.concat) is named among the params. */
static void check_unique_node_names(const IrGraph *g, IrOp op, IrOp also, Diags *d) {
  NameRef *refs = malloc(((size_t)g->n_nodes + 1) * sizeof *refs);
  TFMC_ASSERT(refs);
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if ((g->nodes[i].op == op || g->nodes[i].op == also) && g->nodes[i].attrs.name &&
        g->nodes[i].attrs.name[0])
      refs[n++] = (NameRef){g->nodes[i].attrs.name, i};
  qsort(refs, (size_t)n, sizeof *refs, name_ref_cmp);
  for (int i = 1, first = 0; i < n; i++) {
    if (strcmp(refs[i].name, refs[first].name) != 0) {
      first = i;
      continue;
    }
    char buf[96];
    node_error(d, g, refs[i].index, "duplicate %s name %s (also %%%d)",
               op_name(g->nodes[refs[i].index].op),
               show(refs[i].name, buf, sizeof buf), refs[first].index);
  }
  free(refs);
}

/* kv.append results are views of their state: compiled code reads them in
 * place with the state's batch stride, which only attention reads know */
static void check_kv_views(const IrGraph *g, Diags *d) {
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    /* a node with a bad operand count was reported by node_check; read
     * only the operands it can hold */
    int n_ops = n->n_operands < 0                 ? 0
                : n->n_operands > IR_MAX_OPERANDS ? IR_MAX_OPERANDS
                                                  : n->n_operands;
    for (int k = 0; k < n_ops; k++) {
      int o = n->operands[k];
      if (o < 0 || o >= i)
        continue;
      const IrNode *on = &g->nodes[o];
      if (on->op == IR_OP_KV_APPEND) {
        bool ok = ((n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_FLASH ||
                    n->op == IR_OP_ATTN_PROBS) && (k == 1 || k == 2)) ||
                  (n->op == IR_OP_ATTN_MIX && k == 1);
        if (n->op == IR_OP_ATTN_PROBS && k == 2)
          ok = false; /* its mask */
        if (!ok)
          node_error(d, g, i, "operand %d is kv.append %%%d, which only attention k / v may read",
                     k, o);
      }
      if (on->op == IR_OP_STATE && n->op == IR_OP_KV_APPEND && k == 0)
        for (int j = i + 1; j < g->n_nodes; j++)
          if (g->nodes[j].op == IR_OP_KV_APPEND && g->nodes[j].n_operands > 0 &&
              g->nodes[j].operands[0] == o)
            node_error(d, g, j, "state %%%d is already appended to by %%%d", o, i);
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i].value;
    if (v >= 0 && v < g->n_nodes && g->nodes[v].op == IR_OP_KV_APPEND)
      node_error(d, g, v, "a kv.append result cannot be an output");
  }
}

/* A fused node writes each of its results >= 1 into the one `result`
 * node that selects it: two selecting the same result are refused. */
static void check_results(const IrGraph *g, Diags *d) {
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op != IR_OP_RESULT || n->n_operands != 1)
      continue;
    for (int j = i + 1; j < g->n_nodes; j++) {
      const IrNode *m = &g->nodes[j];
      if (m->op == IR_OP_RESULT && m->n_operands == 1 && m->operands[0] == n->operands[0] &&
          m->attrs.index == n->attrs.index)
        node_error(d, g, j, "result %lld of %%%d is already read by %%%d",
                   (long long)m->attrs.index, m->operands[0], i);
    }
  }
}

static IrLoc output_loc(const IrGraph *g, int value) {
  if (value >= 0 && value < g->n_nodes)
    return g->nodes[value].loc;
  return (IrLoc){NULL, 0, 0};
}

static void check_outputs(const IrGraph *g, Diags *d) {
  char buf[96];
  NameRef *refs = malloc(((size_t)g->n_outputs + 1) * sizeof *refs);
  TFMC_ASSERT(refs);
  int n = 0;
  for (int i = 0; i < g->n_outputs; i++) {
    const IrOutput *o = &g->outputs[i];
    if (!o->name || !o->name[0])
      diag_error(d, output_loc(g, o->value), "output #%d has no name", i);
    else
      refs[n++] = (NameRef){o->name, i};
    if (o->value < 0 || o->value >= g->n_nodes)
      diag_error(d, output_loc(g, o->value),
                 "output %s refers to %%%d, but the graph has %d values",
                 show(o->name, buf, sizeof buf), o->value, g->n_nodes);
  }
  qsort(refs, (size_t)n, sizeof *refs, name_ref_cmp);
  for (int i = 1, first = 0; i < n; i++) {
    if (strcmp(refs[i].name, refs[first].name) != 0) {
      first = i;
      continue;
    }
    const IrOutput *o = &g->outputs[refs[i].index];
    diag_error(d, output_loc(g, o->value), "duplicate output name %s (outputs #%d and #%d)",
               show(o->name, buf, sizeof buf), refs[first].index, refs[i].index);
  }
  free(refs);
}

static void check_symbols(const IrGraph *g, Diags *d) {
  char buf[96];
  IrLoc none = {NULL, 0, 0};
  for (int i = 0; i < g->n_syms; i++) {
    const IrSymbol *s = &g->syms[i];
    if (!s->name || !s->name[0]) {
      diag_error(d, none, "symbol #%d has no name", i);
      continue;
    }
    if (s->max < 1)
      diag_error(d, none, "symbol %s: max must be >= 1, got %lld", show(s->name, buf, sizeof buf),
                 (long long)s->max);
    for (int j = 0; j < i; j++)
      if (g->syms[j].name && strcmp(g->syms[j].name, s->name) == 0)
        diag_error(d, none, "symbol %s is declared twice (#%d and #%d)",
                   show(s->name, buf, sizeof buf), j, i);
  }
}

bool ir_graph_verify(const IrGraph *g, Diags *d) {
  int before = d->n_errors;
  IrLoc none = {NULL, 0, 0};
  if (!g->name)
    diag_error(d, none, "the graph has no name");
  if (g->n_syms < 0 || g->n_syms > IR_MAX_SYMS) {
    diag_error(d, none, "the graph has %d symbols (0..%d allowed)", g->n_syms, IR_MAX_SYMS);
    return false; /* every symbolic dim would be suspect */
  }
  if (g->n_nodes < 0 || g->n_outputs < 0 || (g->n_nodes > 0 && !g->nodes) ||
      (g->n_outputs > 0 && !g->outputs)) {
    diag_error(d, none, "the graph's node or output arrays are corrupt");
    return false;
  }
  check_symbols(g, d);
  bool *type_ok = malloc((size_t)g->n_nodes + 1);
  TFMC_ASSERT(type_ok);
  for (int i = 0; i < g->n_nodes; i++)
    type_ok[i] = node_check(g, i, type_ok, d);
  free(type_ok);
  check_unique_node_names(g, IR_OP_INPUT, IR_OP_INPUT, d);
  check_unique_node_names(g, IR_OP_PARAM, IR_OP_PARAM_CONCAT, d);
  check_unique_node_names(g, IR_OP_STATE, IR_OP_STATE, d);
  check_kv_views(g, d);
  check_results(g, d);
  check_outputs(g, d);
  return d->n_errors == before;
}
