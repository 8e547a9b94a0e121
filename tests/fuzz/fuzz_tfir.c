/* tests/fuzz/fuzz_tfir.c — fuzz harness for the textual graph IR.
 *
 * Any input must either be rejected with at least one diagnostic and no
 * graph, or be accepted as a graph that (1) verifies, (2) prints to text
 * that parses back, and (3) prints identically the second time:
 * print(parse(print(g))) == print(g). Its Graphviz form must print too.
 * A violated invariant aborts, which the replay driver and libFuzzer report
 * as a crash. Inputs with a NUL byte are skipped: source files are text
 * (src_file_read refuses them before the parser is reached). */
#include "ir/ir.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what, const char *detail) {
  if (!ok) {
    fprintf(stderr, "fuzz_tfir: invariant violated: %s\n%s\n", what, detail ? detail : "");
    abort();
  }
}

static char *print_graph(const IrGraph *g, bool dot) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  check(f != NULL, "open_memstream", NULL);
  if (dot)
    ir_graph_print_dot(g, f);
  else
    ir_graph_print(g, f);
  fclose(f);
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (memchr(data, 0, size))
    return 0;
  char *text = malloc(size + 1);
  check(text != NULL, "out of memory", NULL);
  memcpy(text, data, size);
  text[size] = 0;

  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_from_string(a, "fuzz.tfir", text);
  IrGraph *g = ir_graph_parse(a, src, &d);
  if (!g) {
    check(d.n_errors > 0 && d.captured && d.captured_len > 0, "parse failed without a diagnostic",
          text);
  } else {
    check(d.n_errors == 0, "parse returned a graph and reported errors", d.captured);
    Diags dv;
    diags_init(&dv, a, NULL);
    check(ir_graph_verify(g, &dv), "a parsed graph does not verify", dv.captured);

    char *t1 = print_graph(g, false);
    Diags d2;
    diags_init(&d2, a, NULL);
    SrcFile *src2 = src_file_from_string(a, "printed.tfir", t1);
    IrGraph *g2 = ir_graph_parse(a, src2, &d2);
    if (!g2) {
      fprintf(stderr, "printed text:\n%s\n", t1);
      check(0, "printed graph does not parse back", d2.captured);
    }
    char *t2 = print_graph(g2, false);
    if (strcmp(t1, t2) != 0) {
      fprintf(stderr, "first print:\n%s\nsecond print:\n%s\n", t1, t2);
      check(0, "print(parse(print(g))) != print(g)", NULL);
    }
    check(g2->n_nodes == g->n_nodes && g2->n_outputs == g->n_outputs && g2->n_syms == g->n_syms,
          "round trip changed the graph's size", t1);

    char *dot = print_graph(g, true);
    size_t dl = strlen(dot);
    check(dl > 2 && strncmp(dot, "digraph \"", 9) == 0 && strcmp(dot + dl - 2, "}\n") == 0,
          "dot output malformed", dot);
    free(dot);
    free(t1);
    free(t2);
  }
  arena_destroy(a);
  free(text);
  return 0;
}
