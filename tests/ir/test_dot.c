/* tests/ir/test_dot.c — Graphviz output: a node per IR node with op, attrs
 * and type in its label, an edge per operand, outputs as extra nodes, and
 * valid DOT whatever the names contain (checked by a small DOT lexer here,
 * and by Graphviz itself when `dot` is installed). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"

static char *dot_str(const IrGraph *g) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  cr_assert(f);
  ir_graph_print_dot(g, f);
  fclose(f);
  return s;
}

/* Lexical check of DOT: strings close on their line, no control bytes,
 * braces and brackets balance outside strings, statements end with ';'. */
static void check_dot_syntax(const char *s) {
  int braces = 0, brackets = 0;
  bool in_str = false;
  int line = 1;
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '\n') {
      cr_assert_not(in_str, "string runs past line %d:\n%s", line, s);
      line++;
      continue;
    }
    cr_assert(c >= 0x20 && c != 0x7f, "control byte 0x%02x on line %d", c, line);
    if (in_str) {
      if (c == '\\') {
        cr_assert(p[1] && p[1] != '\n', "dangling backslash on line %d", line);
        p++;
      } else if (c == '"') {
        in_str = false;
      }
      continue;
    }
    if (c == '"')
      in_str = true;
    else if (c == '{')
      braces++;
    else if (c == '}')
      braces--;
    else if (c == '[')
      brackets++;
    else if (c == ']')
      brackets--;
    cr_assert(braces >= 0 && brackets >= 0, "unbalanced on line %d", line);
  }
  cr_assert_eq(braces, 0);
  cr_assert_eq(brackets, 0);
  cr_assert_not(in_str);
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* Edge statements: lines "  nA -> nB..." (an arrow inside a label does not
 * count). */
static int count_edges(const char *s) {
  int n = 0;
  for (const char *p = s; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    int a, b, len = 0;
    if (sscanf(p, "  n%d -> %*[a-z]%d%n", &a, &b, &len) == 2 && len > 0)
      n++;
  }
  return n;
}

/* Runs Graphviz on the text when it is installed. */
static void check_with_graphviz(const char *dot) {
  if (access("/usr/bin/dot", X_OK) != 0)
    return;
  char path[] = "/tmp/tfmc_dot_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(dot, f);
  fclose(f);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "/usr/bin/dot -Tsvg %s > /dev/null 2>&1", path);
  int rc = system(cmd);
  unlink(path);
  cr_assert_eq(rc, 0, "graphviz rejected:\n%s", dot);
}

static IrGraph *sample(Arena *a, const char *name, const char *in_name) {
  IrGraph *g = ir_graph_create(a, name);
  int B = ir_graph_add_symbol(g, "B", 2);
  IrLoc L = {"m.tfm", 1, 1};
  int x = ir_build_input(g, in_name, ir_type(IR_F32, 2, (IrDim[]){IR_SYM(B), IR_CONST(8)}), L);
  int w = ir_build_param(g, "fc.weight", ir_type2(IR_F32, 4, 8), L);
  int b = ir_build_param(g, "fc.bias", ir_type1(IR_F32, 4), L);
  int y = ir_build(g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, L);
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.eps = 1e-5;
  int ln = ir_build(g, IR_OP_LAYERNORM, (int[]){y, b, b}, 3, &at, L);
  int r = ir_build(g, IR_OP_RELU, (int[]){ln}, 1, NULL, L);
  ir_graph_add_output(g, "out", r);
  ir_graph_add_output(g, in_name, y);
  return g;
}

Test(dot, structure) {
  Arena *a = arena_create();
  char *s = dot_str(sample(a, "tiny", "x"));
  check_dot_syntax(s);
  cr_assert(strncmp(s, "digraph \"tiny\" {\n", 17) == 0, "%s", s);
  for (int i = 0; i < 6; i++) {
    char want[32];
    snprintf(want, sizeof want, "  n%d [label=\"%%%d ", i, i);
    cr_assert_eq(count(s, want), 1, "node %d:\n%s", i, s);
  }
  cr_assert(strstr(s, "n0 [label=\"%0 input \\\"x\\\"\\nf32[B,8]\", shape=invhouse"), "%s", s);
  cr_assert(strstr(s, "n1 [label=\"%1 param \\\"fc.weight\\\"\\nf32[4,8]\", shape=note"), "%s", s);
  cr_assert(strstr(s, "n4 [label=\"%4 layernorm\\neps=1e-05 unbiased=false\\nf32[B,4]\""), "%s", s);
  cr_assert(strstr(s, "n5 [label=\"%5 relu\\nf32[B,4]\""), "%s", s);
  /* one edge per operand: linear 3, layernorm 3, relu 1; plus 2 outputs */
  cr_assert_eq(count_edges(s), 9, "%s", s);
  cr_assert(strstr(s, "  n0 -> n3 [headlabel=\"0\""), "%s", s);
  cr_assert(strstr(s, "  n2 -> n3 [headlabel=\"2\""), "%s", s);
  cr_assert(strstr(s, "  n4 -> n5;\n"), "%s", s);
  cr_assert(strstr(s, "  out0 [label=\"output \\\"out\\\"\""), "%s", s);
  cr_assert(strstr(s, "  n5 -> out0;\n"), "%s", s);
  cr_assert(strstr(s, "  n3 -> out1;\n"), "%s", s);
  cr_assert(s[strlen(s) - 2] == '}');
  check_with_graphviz(s);
  free(s);
  arena_destroy(a);
}

Test(dot, hostile_names_stay_inside_strings) {
  static const char *names[] = {
      "q\"uote",  "back\\slash\\", "new\nline", "*/ /* ]; n0 -> n1; //", "caf\xc3\xa9",
      "\xff\xfe", "ctl\x01\x7f",   "\\n\\l\\N", "\"];\ndigraph x {",
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    Arena *a = arena_create();
    char *s = dot_str(sample(a, names[i], names[i]));
    check_dot_syntax(s);
    /* the only edges are the real ones */
    cr_assert_eq(count_edges(s), 9, "%s", s);
    check_with_graphviz(s);
    free(s);
    arena_destroy(a);
  }
}

Test(dot, name_escapes) {
  Arena *a = arena_create();
  char *s = dot_str(sample(a, "g", "a\"b\\c\nd\xc3\xa9\xff"));
  /* shown as "a\"b\\c\x0Adé\xFF", then escaped for DOT */
  cr_assert(strstr(s, "%0 input \\\"a\\\\\\\"b\\\\\\\\c\\\\x0Ad\xc3\xa9\\\\xFF\\\"\\n"), "%s", s);
  free(s);
  arena_destroy(a);
}

/* Malformed graphs still print (no edges to values that do not exist). */
Test(dot, malformed_graph) {
  Arena *a = arena_create();
  IrGraph *g = sample(a, "bad", "x");
  g->nodes[5].operands[0] = 77;
  g->nodes[4].op = (IrOp)99;
  g->outputs[0].value = -3;
  g->nodes[0].type.dims[0] = IR_SYM(6);
  char *s = dot_str(g);
  check_dot_syntax(s);
  cr_assert(strstr(s, "?op99"), "%s", s);
  cr_assert(strstr(s, "?sym6"), "%s", s);
  cr_assert_null(strstr(s, "n77"), "%s", s);
  cr_assert_eq(count_edges(s), 7, "%s", s); /* %3: 3, %4: 3, out1; none for %5, out0 */
  check_with_graphviz(s);
  free(s);
  arena_destroy(a);
}

Test(dot, golden_graph) {
  Arena *a = arena_create();
  char err[256];
  SrcFile *src = src_file_read(a, TFMC_SOURCE_DIR "/tests/ir/all_ops.tfir", err, sizeof err);
  cr_assert(src, "%s", err);
  Diags d;
  diags_init(&d, a, NULL);
  IrGraph *g = ir_graph_parse(a, src, &d);
  cr_assert(g, "%s", d.captured);
  char *s = dot_str(g);
  check_dot_syntax(s);
  int edges = g->n_outputs, clusters = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != IR_OP_FUSED) {
      edges += g->nodes[i].n_operands;
      continue;
    }
    /* a fused node is a cluster of its body: an edge from the fused node's
     * operand to each body op reading it (count_edges counts those: the
     * edges inside the cluster start at nI_bK), and from each result to
     * the fused node's own box */
    IrGraph *b = ir_fused_body(a, g, i, err, sizeof err);
    cr_assert(b, "%s", err);
    for (int k = 0; k < b->n_nodes; k++)
      for (int j = 0; b->nodes[k].op != IR_OP_INPUT && j < b->nodes[k].n_operands; j++)
        edges += b->nodes[b->nodes[k].operands[j]].op == IR_OP_INPUT;
    for (int r = 0; r < b->n_outputs; r++) {
      char res[64];
      snprintf(res, sizeof res, "n%d_b%d -> n%d [style=dashed", i, b->outputs[r].value, i);
      cr_assert(strstr(s, res), "no edge from result %d of %%%d:\n%s", r, i, s);
    }
    char want[64];
    snprintf(want, sizeof want, "subgraph cluster_n%d {", i);
    cr_assert(strstr(s, want), "no cluster for %%%d:\n%s", i, s);
    clusters++;
  }
  cr_assert_eq(clusters, 3);
  cr_assert_eq(count_edges(s), edges);
  cr_assert(strstr(s, "n47_b4 [label=\"embed\\nf32[S,16]\""), "%s", s);
  cr_assert(strstr(s, "heads=4 scale=0.5"), "%s", s);
  cr_assert(strstr(s, "axis=1 index=0"), "%s", s);
  check_with_graphviz(s);
  free(s);
  arena_destroy(a);
}
