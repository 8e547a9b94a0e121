/* ir/dot.c — the graph as Graphviz: one box per node labelled with its value,
 * op, name, attributes and type; an edge from each operand to its user;
 * outputs as extra nodes. Inputs, params, other sources and composite ops
 * are styled apart so a model's structure reads at a glance.
 *
 * Invariants: the output is valid DOT whatever the names contain. Labels are
 * built as plain text (names shown C-style quoted, control bytes and invalid
 * UTF-8 as \xHH) and then escaped for DOT (" and \ escaped, line breaks as
 * \n), so a hostile name can neither end a string nor inject attributes.
 * Operand or output references to values that do not exist get no edge.
 */
#include "ir.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (of at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  size_t len;
  unsigned min;
  unsigned cp;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    len = 2, min = 0x80, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    len = 3, min = 0x800, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    len = 4, min = 0x10000, cp = s[0] & 0x07;
  else
    return 0;
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

/* A name for display: quoted, control bytes and bad UTF-8 as \xHH. */
static void label_name(const char *name, FILE *out) {
  const unsigned char *s = (const unsigned char *)(name ? name : "");
  size_t n = strlen((const char *)s);
  fputc('"', out);
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
      i++;
    } else if (c >= 0x20 && c < 0x7f) {
      fputc(c, out);
      i++;
    } else if (c >= 0x80 && utf8_len(s + i, n - i)) {
      size_t l = utf8_len(s + i, n - i);
      fwrite(s + i, 1, l, out);
      i += l;
    } else {
      fprintf(out, "\\x%02X", c);
      i++;
    }
  }
  fputc('"', out);
}

/* Writes text as the inside of a DOT quoted string; '\n' becomes a line
 * break in the label. */
static void dot_escape(const char *text, FILE *out) {
  for (const char *p = text; *p; p++) {
    if (*p == '"' || *p == '\\') {
      fputc('\\', out);
      fputc(*p, out);
    } else if (*p == '\n') {
      fputs("\\n", out);
    } else {
      fputc(*p, out);
    }
  }
}

/* Starts the next attribute: a new label line for the first, else a space. */
static void attr_sep(FILE *out, bool *any) {
  fputc(*any ? ' ' : '\n', out);
  *any = true;
}

/* The attributes other than the name, in attrs.def order; numbers shorter
 * than in the text form (%.6g), since a label is for reading. */
static void label_attrs(const IrNode *nd, FILE *out) {
  unsigned at = ir_node_attr_mask(nd);
  const IrAttrs *a = &nd->attrs;
  bool any = false;
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++) {
    const IrAttrInfo *info = &ir_attr_info[i];
    IrAttrId id = (IrAttrId)i;
    if (!(at & info->bit) || info->kind == IR_ATTR_KIND_STRING)
      continue;
    if (info->check == IR_ATTR_CHECK_OPTIONAL && ir_attrs_is_zero(a, id))
      continue;
    attr_sep(out, &any);
    fprintf(out, "%s=", info->name);
    switch (info->kind) {
    case IR_ATTR_KIND_F64: fprintf(out, "%.6g", ir_attrs_get_f64(a, id)); break;
    case IR_ATTR_KIND_BOOL: fputs(ir_attrs_get_bool(a, id) ? "true" : "false", out); break;
    case IR_ATTR_KIND_INT:
    case IR_ATTR_KIND_I64: fprintf(out, "%" PRId64, ir_attrs_get_int(a, id)); break;
    case IR_ATTR_KIND_ACT: fputs(ir_act_name((int)ir_attrs_get_int(a, id)), out); break;
    case IR_ATTR_KIND_STRING: /* shown after the op name */
    case IR_ATTR_KIND_COUNT: TFMC_ASSERT(!"attribute without a label");
    }
  }
}

/* The node's label as plain text; the caller frees it. */
static char *node_label(const IrGraph *g, int id) {
  const IrNode *nd = &g->nodes[id];
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  TFMC_ASSERT(f);
  bool op_ok = (int)nd->op >= 0 && nd->op < IR_OP_COUNT;
  if (op_ok)
    fprintf(f, "%%%d %s", id, ir_op_info[nd->op].name);
  else
    fprintf(f, "%%%d ?op%d", id, (int)nd->op);
  for (int i = 0; op_ok && i < IR_ATTR_ID_COUNT; i++)
    if ((ir_node_attr_mask(nd) & ir_attr_info[i].bit) &&
        ir_attr_info[i].kind == IR_ATTR_KIND_STRING) {
      fputc(' ', f);
      label_name(ir_attrs_get_string(&nd->attrs, (IrAttrId)i), f);
    }
  if (op_ok)
    label_attrs(nd, f);
  /* the type, with symbol names made safe the same way */
  char *ty = NULL;
  size_t tn = 0;
  FILE *tf = open_memstream(&ty, &tn);
  TFMC_ASSERT(tf);
  ir_type_print(g, &nd->type, tf);
  fclose(tf);
  fputc('\n', f);
  for (const unsigned char *p = (const unsigned char *)ty; *p; p++) {
    if (*p < 0x20 || *p == 0x7f)
      fprintf(f, "\\x%02X", *p);
    else if (*p >= 0x80 && !utf8_len(p, strlen((const char *)p)))
      fprintf(f, "\\x%02X", *p);
    else if (*p >= 0x80) {
      size_t l = utf8_len(p, strlen((const char *)p));
      fwrite(p, 1, l, f);
      p += l - 1;
    } else
      fputc(*p, f);
  }
  free(ty);
  fclose(f);
  return s;
}

static const char *node_style(const IrNode *nd) {
  if ((int)nd->op < 0 || nd->op >= IR_OP_COUNT)
    return "color=red";
  if (nd->op == IR_OP_INPUT)
    return "shape=invhouse, style=filled, fillcolor=\"#cfe2ff\"";
  if (nd->op == IR_OP_PARAM)
    return "shape=note, style=filled, fillcolor=\"#fff3cd\"";
  switch (ir_op_info[nd->op].kind) {
  case IR_KIND_SOURCE: return "shape=ellipse, style=filled, fillcolor=\"#e9ecef\"";
  case IR_KIND_COMPOSITE: return "style=\"filled,bold\", fillcolor=\"#f8d7da\"";
  case IR_KIND_FUSED: return "style=\"filled,bold\", fillcolor=\"#e2d9f3\"";
  case IR_KIND_UNARY:
  case IR_KIND_BINARY:
  case IR_KIND_OTHER:
  case IR_KIND_COUNT: break;
  }
  return "style=filled, fillcolor=white";
}

/* The ops of fused node f's body b (its inputs "$k" are f's operands) as
 * nodes nF_bK of f's cluster, with the edges between them and from each
 * result to the fused node itself. */
static void draw_body(const IrGraph *b, int f, FILE *out) {
  for (int k = 0; k < b->n_nodes; k++) {
    if (b->nodes[k].op == IR_OP_INPUT)
      continue;
    char *label = node_label(b, k);
    const char *text = strchr(label, ' '); /* without the body's own %k */
    fprintf(out, "    n%d_b%d [label=\"", f, k);
    dot_escape(text ? text + 1 : label, out);
    fprintf(out, "\", %s];\n", node_style(&b->nodes[k]));
    free(label);
    for (int j = 0; j < b->nodes[k].n_operands; j++) {
      int o = b->nodes[k].operands[j];
      if (b->nodes[o].op != IR_OP_INPUT)
        fprintf(out, "    n%d_b%d -> n%d_b%d;\n", f, o, f, k);
    }
  }
  for (int r = 0; r < b->n_outputs; r++)
    fprintf(out, "    n%d_b%d -> n%d [style=dashed%s];\n", f, b->outputs[r].value, f,
            r ? ", label=\"result 1\"" : "");
}

/* The edges from fused node f's operands into the body nodes reading them. */
static void draw_body_edges(const IrGraph *b, int f, const IrNode *nd, FILE *out) {
  for (int k = 0; k < b->n_nodes; k++)
    for (int j = 0; j < b->nodes[k].n_operands; j++) {
      int o = b->nodes[k].operands[j];
      if (b->nodes[o].op == IR_OP_INPUT && o < nd->n_operands)
        fprintf(out, "  n%d -> n%d_b%d;\n", nd->operands[o], f, k);
    }
}

void ir_graph_print_dot(const IrGraph *g, FILE *out) {
  char *gname = NULL;
  size_t gn = 0;
  FILE *f = open_memstream(&gname, &gn);
  TFMC_ASSERT(f);
  label_name(g->name, f);
  fclose(f);
  /* gname is the quoted display form; drop its quotes for the DOT id */
  gname[strlen(gname) - 1] = 0;
  fputs("digraph \"", out);
  dot_escape(gname + 1, out);
  fputs("\" {\n  label=\"graph ", out);
  dot_escape(gname + 1, out);
  fputs("\";\n  labelloc=t;\n", out);
  free(gname);
  fputs("  node [shape=box, fontname=\"monospace\", fontsize=10];\n", out);
  fputs("  edge [arrowsize=0.6];\n", out);
  /* a fused node's body, when it decomposes: drawn as a cluster */
  Arena *ba = arena_create();
  IrGraph **body = arena_alloc(ba, (size_t)(g->n_nodes + 1) * sizeof *body);
  for (int i = 0; i < g->n_nodes; i++) {
    char *label = node_label(g, i);
    if (g->nodes[i].op == IR_OP_FUSED) {
      char err[256];
      body[i] = ir_fused_body(ba, g, i, err, sizeof err);
    }
    if (body[i]) {
      fprintf(out, "  subgraph cluster_n%d {\n    label=\"", i);
      dot_escape(label, out);
      fputs("\";\n    style=\"rounded,filled\";\n    fillcolor=\"#f3eefa\";\n", out);
      draw_body(body[i], i, out);
      fputs("  ", out);
    }
    fprintf(out, "  n%d [label=\"", i);
    dot_escape(label, out);
    fprintf(out, "\", %s];\n", node_style(&g->nodes[i]));
    if (body[i])
      fputs("  }\n", out);
    free(label);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *nd = &g->nodes[i];
    if (body[i]) { /* operands go into the body nodes that read them */
      draw_body_edges(body[i], i, nd, out);
      continue;
    }
    int n = nd->n_operands < 0                 ? 0
            : nd->n_operands > IR_MAX_OPERANDS ? IR_MAX_OPERANDS
                                               : nd->n_operands;
    for (int j = 0; j < n; j++) {
      int o = nd->operands[j];
      if (o < 0 || o >= g->n_nodes)
        continue;
      if (n > 1)
        fprintf(out, "  n%d -> n%d [headlabel=\"%d\", labelfontsize=8];\n", o, i, j);
      else
        fprintf(out, "  n%d -> n%d;\n", o, i);
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    char *label = NULL;
    size_t ln = 0;
    FILE *lf = open_memstream(&label, &ln);
    TFMC_ASSERT(lf);
    fputs("output ", lf);
    label_name(g->outputs[i].name, lf);
    fclose(lf);
    fprintf(out, "  out%d [label=\"", i);
    dot_escape(label, out);
    fputs("\", shape=house, style=filled, fillcolor=\"#d1e7dd\"];\n", out);
    free(label);
    int v = g->outputs[i].value;
    if (v >= 0 && v < g->n_nodes)
      fprintf(out, "  n%d -> out%d;\n", v, i);
  }
  fputs("}\n", out);
  arena_destroy(ba);
}
