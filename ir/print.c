/* ir/print.c — the textual form of the graph IR.
 *
 *   graph "tiny" {
 *     sym B max 8
 *     pad 0                       (the padding token id, when the model has one)
 *     %0 = input "x" : f32[B,64] @"tiny.tfm":3:5
 *     %1 = layernorm %0, %2, %3 {eps=1e-05, unbiased=false} : f32[B,64]
 *     output "y" = %1
 *   }
 *
 * Invariants this file keeps (parse.c relies on them, and the round-trip
 * tests check them: print(parse(print(g))) is byte-identical to print(g)):
 *  - a value prints as %<node index>;
 *  - strings (graph name, input/param/output names, location files) print as
 *    C-like quoted strings: \" \\ \n \t, \xHH for other control bytes and
 *    DEL; bytes >= 0x80 pass through, so UTF-8 stays readable;
 *  - symbol names print bare when they are identifiers the parser lexes as
 *    one token ([A-Za-z_][A-Za-z0-9_.]*), quoted otherwise;
 *  - an op's attributes print in attrs.def row order, only those its ops.def
 *    row carries, and OPTIONAL ones only when not their zero value; string attributes (the name) go, quoted, right after the
 *    op name, the others in braces as name=value;
 *  - floating-point attributes print with the fewest significant digits, 9 to
 *    17, that read back (strtod) to the identical double, so values that came
 *    from floats print as %.9g and every double reads back bit-identical;
 *  - a node without a location (loc.file == NULL) prints no @ part.
 * Printing never fails on a malformed graph (bad op codes, symbol indices,
 * ranks print as something visibly wrong); ir_graph_verify says what is bad.
 */
#include "ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void print_string(const char *s, FILE *out) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\t': fputs("\\t", out); break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        fprintf(out, "\\x%02X", *p);
      else
        fputc(*p, out);
    }
  }
  fputc('"', out);
}

static bool is_ident(const char *s) {
  if (!s || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
    return false;
  for (const char *p = s + 1; *p; p++)
    if (!(*p == '_' || *p == '.' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9')))
      return false;
  return true;
}

static void print_name(const char *s, FILE *out) {
  if (is_ident(s))
    fputs(s, out);
  else
    print_string(s, out);
}

/* Shortest of %.9g .. %.17g that strtod reads back to the same bits. */
static void print_double(double v, FILE *out) {
  if (isnan(v)) {
    fputs("nan", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", out);
    return;
  }
  char buf[64];
  for (int prec = 9; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    double back = strtod(buf, NULL);
    if (memcmp(&back, &v, sizeof v) == 0)
      break;
  }
  fputs(buf, out);
}

void ir_type_print(const IrGraph *g, const IrType *t, FILE *out) {
  fputs((int)t->dtype >= 0 && t->dtype < IR_DTYPE_COUNT ? ir_dtype_name(t->dtype) : "?dtype", out);
  fputc('[', out);
  int rank = t->rank < 0 ? 0 : t->rank > IR_MAX_RANK ? IR_MAX_RANK : t->rank;
  for (int i = 0; i < rank; i++) {
    if (i)
      fputc(',', out);
    IrDim d = t->dims[i];
    if (d.sym < 0)
      fprintf(out, "%" PRId64, d.value);
    else if (g && d.sym < g->n_syms && d.sym < IR_MAX_SYMS)
      print_name(g->syms[d.sym].name, out);
    else
      fprintf(out, "?sym%d", d.sym);
  }
  if (t->rank != rank)
    fprintf(out, "?rank%d", t->rank);
  fputc(']', out);
}

/* Writes attribute id of at in its kind's text form (parse.c reads it back). */
static void print_attr_value(IrAttrId id, const IrAttrs *at, FILE *out) {
  switch (ir_attr_info[id].kind) {
  case IR_ATTR_KIND_STRING: print_string(ir_attrs_get_string(at, id), out); break;
  case IR_ATTR_KIND_F64: print_double(ir_attrs_get_f64(at, id), out); break;
  case IR_ATTR_KIND_BOOL: fputs(ir_attrs_get_bool(at, id) ? "true" : "false", out); break;
  case IR_ATTR_KIND_INT:
  case IR_ATTR_KIND_I64: fprintf(out, "%" PRId64, ir_attrs_get_int(at, id)); break;
  case IR_ATTR_KIND_ACT: fputs(ir_act_name((int)ir_attrs_get_int(at, id)), out); break;
  case IR_ATTR_KIND_COUNT: TFMC_ASSERT(!"attribute without a printer");
  }
}

static void print_node(const IrGraph *g, int id, FILE *out) {
  const IrNode *nd = &g->nodes[id];
  bool op_ok = (int)nd->op >= 0 && nd->op < IR_OP_COUNT;
  fprintf(out, "  %%%d = ", id);
  if (op_ok)
    fputs(ir_op_info[nd->op].name, out);
  else
    fprintf(out, "?op%d", (int)nd->op);
  unsigned attrs = ir_node_attr_mask(nd); /* a fused node: its kind's */
  /* string attributes (the name) go quoted right after the op name */
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++)
    if ((attrs & ir_attr_info[i].bit) && ir_attr_info[i].kind == IR_ATTR_KIND_STRING) {
      fputc(' ', out);
      print_attr_value((IrAttrId)i, &nd->attrs, out);
    }
  int n = nd->n_operands < 0                 ? 0
          : nd->n_operands > IR_MAX_OPERANDS ? IR_MAX_OPERANDS
                                             : nd->n_operands;
  for (int i = 0; i < n; i++)
    fprintf(out, "%s%%%d", i ? ", " : " ", nd->operands[i]);
  bool first = true;
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++) {
    if (!(attrs & ir_attr_info[i].bit) || ir_attr_info[i].kind == IR_ATTR_KIND_STRING)
      continue;
    if (ir_attr_info[i].check == IR_ATTR_CHECK_OPTIONAL && ir_attrs_is_zero(&nd->attrs, (IrAttrId)i))
      continue; /* left out: reads back as the zero value */
    fputs(first ? " {" : ", ", out);
    first = false;
    fprintf(out, "%s=", ir_attr_info[i].name);
    print_attr_value((IrAttrId)i, &nd->attrs, out);
  }
  if (!first)
    fputc('}', out);
  fputs(" : ", out);
  ir_type_print(g, &nd->type, out);
  if (nd->loc.file) {
    fputs(" @", out);
    print_string(nd->loc.file, out);
    fprintf(out, ":%d:%d", nd->loc.line, nd->loc.col);
  }
  fputc('\n', out);
}

void ir_graph_print(const IrGraph *g, FILE *out) {
  fputs("graph ", out);
  print_string(g->name, out);
  fputs(" {\n", out);
  for (int i = 0; i < g->n_syms && i < IR_MAX_SYMS; i++) {
    fputs("  sym ", out);
    print_name(g->syms[i].name, out);
    fprintf(out, " max %" PRId64 "\n", g->syms[i].max);
  }
  if (g->pad_id >= 0) fprintf(out, "  pad %" PRId64 "\n", g->pad_id);
  for (int i = 0; i < g->n_nodes; i++)
    print_node(g, i, out);
  for (int i = 0; i < g->n_outputs; i++) {
    fputs("  output ", out);
    print_string(g->outputs[i].name, out);
    fprintf(out, " = %%%d\n", g->outputs[i].value);
  }
  fputs("}\n", out);
}
