/* tests/ir/test_parse.c — the textual IR parser's diagnostics: each kind of
 * mistake is reported at file:line:col of the offending token with a
 * specific message, several errors are reported per file, and nothing that
 * fails to parse (or to verify) comes back as a graph. */
#include <criterion/criterion.h>
#include <string.h>

#include "ir/ir.h"

/* Parses text expecting failure; returns the captured diagnostics. */
static const char *parse_fail(Arena *a, const char *text) {
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_from_string(a, "t.tfir", text);
  IrGraph *g = ir_graph_parse(a, src, &d);
  cr_assert_null(g, "parsed, but should have failed:\n%s", text);
  cr_assert_gt(d.n_errors, 0);
  cr_assert(d.captured);
  return d.captured;
}

/* The diagnostics contain `want` (a "file:line:col: error: message" line). */
#define EXPECT_ERROR(text, want)                                                                   \
  do {                                                                                             \
    Arena *a_ = arena_create();                                                                    \
    const char *got_ = parse_fail(a_, text);                                                       \
    cr_expect(strstr(got_, want), "expected\n  %s\ngot\n%s", want, got_);                          \
    arena_destroy(a_);                                                                             \
  } while (0)

#define HEAD "graph \"g\" {\n  sym B max 4\n  %0 = input \"x\" : f32[B,8]\n"

Test(parse, full_diagnostic_with_caret) {
  Arena *a = arena_create();
  const char *got = parse_fail(a, HEAD "  %1 = frob %0 : f32[B,8]\n}\n");
  cr_assert_str_eq(got, "t.tfir:4:8: error: unknown op 'frob'\n"
                        "    %1 = frob %0 : f32[B,8]\n"
                        "         ^\n");
  arena_destroy(a);
}

Test(parse, header_errors) {
  EXPECT_ERROR("",
               "t.tfir:1:1: error: expected 'graph' at the start of the file, found end of file");
  EXPECT_ERROR("grap \"x\" {}",
               "t.tfir:1:1: error: expected 'graph' at the start of the file, found 'grap'");
  EXPECT_ERROR("graph {}", "t.tfir:1:7: error: expected the graph name, found '{'");
  EXPECT_ERROR("graph x\n(", "t.tfir:2:1: error: unexpected character '('");
  EXPECT_ERROR("graph x [", "t.tfir:1:9: error: expected '{' after the graph name, found '['");
  EXPECT_ERROR("graph x {\n",
               "t.tfir:2:1: error: expected '}' to close the graph, found end of file");
  EXPECT_ERROR("graph x {\n}\nx",
               "t.tfir:3:1: error: expected end of file after the graph's closing '}', found 'x'");
}

Test(parse, statement_errors) {
  EXPECT_ERROR(HEAD "  foo\n}\n", "t.tfir:4:3: error: expected a statement ('%N = ...', 'sym', "
                                  "'pad' or 'output') or '}', found 'foo'");
  EXPECT_ERROR(HEAD "  pad 0\n  pad 1\n}\n", "t.tfir:5:3: error: duplicate pad id");
  EXPECT_ERROR(HEAD "  pad -1\n}\n", "t.tfir:4:7: error:");
  EXPECT_ERROR(HEAD "  %1 relu %0 : f32[B,8]\n}\n",
               "t.tfir:4:6: error: expected '=' after the value, found 'relu'");
  EXPECT_ERROR(HEAD "  %1 = %0 : f32[B,8]\n}\n",
               "t.tfir:4:8: error: expected an op name, found '%0'");
  EXPECT_ERROR(HEAD "  %1 = relu %0 f32[B,8]\n}\n",
               "t.tfir:4:16: error: expected ':' before the result type, found 'f32'");
  EXPECT_ERROR(HEAD "  %1 = relu %0 :\n}\n",
               "t.tfir:5:1: error: expected a type such as f32[B,S,64], found '}'");
  EXPECT_ERROR(HEAD "  % = relu %0 : f32[B,8]\n}\n",
               "t.tfir:4:3: error: expected a value number after '%'");
  EXPECT_ERROR(HEAD "  %99999999999 = relu %0 : f32[B,8]\n}\n",
               "t.tfir:4:3: error: bad value number");
}

Test(parse, value_errors) {
  EXPECT_ERROR(
      HEAD "  %1 = relu %7 : f32[B,8]\n}\n",
      "t.tfir:4:13: error: undefined value %7 (a value must be defined before it is used)");
  EXPECT_ERROR(HEAD "  %1 = relu %1 : f32[B,8]\n}\n", "t.tfir:4:13: error: undefined value %1");
  EXPECT_ERROR(HEAD "  %0 = relu %0 : f32[B,8]\n}\n",
               "t.tfir:4:3: error: duplicate value %0 (first defined at line 3)");
  EXPECT_ERROR(HEAD "  %5 = relu %0 : f32[B,8]\n  %4 = relu %5 : f32[B,8]\n}\n",
               "t.tfir:5:3: error: value %4 defined after %5: value numbers must increase");
  EXPECT_ERROR(HEAD "  output \"y\" = %3\n}\n", "t.tfir:4:16: error: undefined value %3");
  EXPECT_ERROR(HEAD "  output \"y\" = %0\n  output \"y\" = %0\n}\n",
               "t.tfir:5:10: error: duplicate output name 'y' (first declared at line 4)");
  EXPECT_ERROR(HEAD "  output y = %0\n}\n",
               "t.tfir:4:10: error: expected the quoted output name, found 'y'");
}

Test(parse, operand_and_attribute_errors) {
  EXPECT_ERROR(HEAD "  %1 = relu %0, %0 : f32[B,8]\n}\n",
               "t.tfir:4:8: error: 'relu' takes 1 operand, got 2");
  EXPECT_ERROR(HEAD "  %1 = linear %0 : f32[B,8]\n}\n",
               "t.tfir:4:8: error: 'linear' takes 2 to 4 operands, got 1");
  EXPECT_ERROR(HEAD "  %1 = linear %0, %0 {act=swish} : f32[B,8]\n}\n",
               "t.tfir:4:27: error: expected none, relu, gelu or gelu_tanh for 'act', found 'swish'");
  EXPECT_ERROR(HEAD "  %1 = linear %0, %0 {residual=yes} : f32[B,8]\n}\n",
               "t.tfir:4:32: error: expected true or false for 'residual', found 'yes'");
  EXPECT_ERROR(HEAD "  %1 = relu %0 {act=relu} : f32[B,8]\n}\n",
               "t.tfir:4:17: error: attribute 'act' is not allowed for 'relu'");
  EXPECT_ERROR(HEAD "  %1 = add %0, %0, %0, %0, %0, %0 : f32[B,8]\n}\n",
               "t.tfir:4:8: error: 'add' takes 2 operands, got 6");
  EXPECT_ERROR(HEAD "  %1 = relu %0 {eps=1} : f32[B,8]\n}\n",
               "t.tfir:4:17: error: attribute 'eps' is not allowed for 'relu'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {bogus=1} : f32[B,8]\n}\n",
               "t.tfir:4:18: error: unknown attribute 'bogus'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor=1, factor=2} : f32[B,8]\n}\n",
               "t.tfir:4:28: error: duplicate attribute 'factor'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 : f32[B,8]\n}\n",
               "t.tfir:4:8: error: 'scale' needs attribute 'factor'");
  EXPECT_ERROR(HEAD "  %1 = layernorm %0, %0, %0 {eps=1e-5} : f32[B,8]\n}\n",
               "t.tfir:4:8: error: 'layernorm' needs attribute 'unbiased'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor} : f32[B,8]\n}\n",
               "t.tfir:4:24: error: expected '=' after the attribute name, found '}'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor=x} : f32[B,8]\n}\n",
               "t.tfir:4:25: error: expected a number for 'factor', found 'x'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor=1e999} : f32[B,8]\n}\n",
               "t.tfir:4:25: error: number '1e999' is out of range");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor=1.2.3} : f32[B,8]\n}\n",
               "t.tfir:4:25: error: malformed number '1.2.3'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor=0x10} : f32[B,8]\n}\n",
               "t.tfir:4:25: error: malformed number '0x10'");
  EXPECT_ERROR(HEAD "  %1 = scale %0 {factor=1 : f32[B,8]\n}\n",
               "t.tfir:4:27: error: expected ',' or '}' after the attribute, found ':'");
  EXPECT_ERROR(HEAD "  %1 = layernorm %0, %0, %0 {eps=1, unbiased=yes} : f32[B,8]\n}\n",
               "t.tfir:4:46: error: expected true or false for 'unbiased', found 'yes'");
  EXPECT_ERROR(HEAD "  %1 = take %0 {axis=1.5, index=0} : f32[B]\n}\n",
               "t.tfir:4:22: error: expected an integer for 'axis', found '1.5'");
  EXPECT_ERROR(HEAD "  %1 = take %0 {axis=99999999999, index=0} : f32[B]\n}\n",
               "t.tfir:4:22: error: an integer for 'axis' '99999999999' is out of range");
  EXPECT_ERROR(HEAD "  %1 = input : f32[2]\n}\n",
               "t.tfir:4:14: error: expected the quoted name after 'input', found ':'");
  EXPECT_ERROR(HEAD "  %1 = param {name=\"w\"} : f32[2]\n}\n",
               "t.tfir:4:14: error: expected the quoted name after 'param', found '{'");
}

Test(parse, type_errors) {
  EXPECT_ERROR(HEAD "  %1 = relu %0 : f16[B,8]\n}\n",
               "t.tfir:4:18: error: unknown dtype 'f16' (expected f32, i32 or bool)");
  EXPECT_ERROR(HEAD "  %1 = relu %0 : f32[B,Q]\n}\n",
               "t.tfir:4:24: error: unknown symbol 'Q' (declare it first: sym NAME max N)");
  EXPECT_ERROR(
      HEAD "  %1 = relu %0 : f32[B,0]\n}\n",
      "t.tfir:4:24: error: a dimension must be >= 1 (zero-sized tensors are not supported)");
  EXPECT_ERROR(HEAD "  %1 = relu %0 : f32[B,-3]\n}\n",
               "t.tfir:4:24: error: expected a dimension, found '-3'");
  EXPECT_ERROR(HEAD "  %1 = relu %0 : f32[1,2,3,4,5]\n}\n",
               "t.tfir:4:30: error: too many dimensions (the rank is at most 4)");
  EXPECT_ERROR(HEAD "  %1 = relu %0 : f32[B,8\n}\n",
               "t.tfir:5:1: error: expected ',' or ']' in the type, found '}'");
  EXPECT_ERROR(HEAD "  %1 = relu %0 : f32 B\n}\n",
               "t.tfir:4:22: error: expected '[' after the dtype, found 'B'");
}

Test(parse, symbol_errors) {
  EXPECT_ERROR(HEAD "  sym B max 5\n}\n", "t.tfir:4:7: error: duplicate symbol 'B'");
  EXPECT_ERROR(HEAD "  sym C max 0\n}\n", "t.tfir:4:13: error: a symbol's maximum must be >= 1");
  EXPECT_ERROR(HEAD "  sym C 5\n}\n",
               "t.tfir:4:9: error: expected 'max' after the symbol name, found '5'");
  EXPECT_ERROR("graph g {\n sym A max 1 sym B max 1 sym C max 1 sym D max 1\n"
               " sym E max 1 sym F max 1 sym G max 1 sym H max 1\n sym I max 1\n}\n",
               "t.tfir:4:6: error: too many symbols (at most 8)");
}

Test(parse, string_errors) {
  EXPECT_ERROR(HEAD "  %1 = input \"abc : f32[2]\n}\n", "t.tfir:4:14: error: unterminated string");
  EXPECT_ERROR(HEAD "  %1 = input \"abc", "t.tfir:4:14: error: unterminated string");
  EXPECT_ERROR(HEAD "  %1 = input \"a\\qb\" : f32[2]\n}\n",
               "t.tfir:4:16: error: unknown escape 'q'");
  EXPECT_ERROR(HEAD "  %1 = input \"a\\x4\" : f32[2]\n}\n",
               "t.tfir:4:16: error: '\\x' needs two hex digits");
  EXPECT_ERROR(HEAD "  %1 = input \"a\\x00\" : f32[2]\n}\n",
               "t.tfir:4:16: error: a string cannot contain a NUL byte ('\\x00')");
  EXPECT_ERROR(HEAD "  %1 = input \"ok\" : f32[2] @\"f\":1\n}\n",
               "t.tfir:5:1: error: expected ':' after the line number, found '}'");
  EXPECT_ERROR(HEAD "  %1 = input \"ok\" : f32[2] @f:1:1\n}\n",
               "t.tfir:4:29: error: expected a quoted file name after '@', found 'f'");
  EXPECT_ERROR(HEAD "  %1 = input \"ok\" : f32[2] @\"f\":1:-1\n}\n",
               "t.tfir:4:35: error: expected a column number, found '-1'");
}

/* Several errors per file; a statement using a value whose definition
 * failed is dropped without a message of its own. */
Test(parse, several_errors_and_no_cascade) {
  Arena *a = arena_create();
  const char *got =
      parse_fail(a, HEAD "  %1 = frob %0 : f32[B,8]\n"      /* error */
                         "  %2 = relu %1 : f32[B,8]\n"      /* uses the failed %1: silent */
                         "  %3 = relu %0 : f32[B,Q]\n"      /* error */
                         "  %4 = relu %0 : f32[B,8]\n"      /* fine */
                         "  %5 = relu %0 {x=1 : f32[B,8]\n" /* error */
                         "  output \"o\" = %2\n"            /* silent */
                         "}\n");
  cr_assert(strstr(got, "t.tfir:4:8: error: unknown op 'frob'"), "%s", got);
  cr_assert(strstr(got, "t.tfir:6:24: error: unknown symbol 'Q'"), "%s", got);
  cr_assert(strstr(got, "t.tfir:8:17: error: unknown attribute 'x'"), "%s", got);
  int lines = 0;
  for (const char *p = got; *p; p++)
    lines += *p == '\n';
  cr_assert_eq(lines, 9, "three errors of three lines each:\n%s", got);
  arena_destroy(a);
}

/* Recovery resumes at a statement that begins on the line where the error
 * was found (here the missing type's place is taken by the next value). */
Test(parse, recovery_keeps_next_statement) {
  Arena *a = arena_create();
  const char *got = parse_fail(a, HEAD "  %1 = relu %0\n"
                                       "  %2 = relu %0 : f32[B,9]\n"
                                       "}\n");
  cr_assert(strstr(got, "t.tfir:5:3: error: expected ':' before the result type, found '%2'"), "%s",
            got);
  /* %2 was parsed after recovery; its type error is not reported because
   * verification only runs on a graph that parsed */
  int lines = 0;
  for (const char *p = got; *p; p++)
    lines += *p == '\n';
  cr_assert_eq(lines, 3, "%s", got);
  arena_destroy(a);
}

Test(parse, error_limit) {
  Arena *a = arena_create();
  char *text = arena_alloc(a, 100000);
  strcpy(text, "graph g {\n");
  for (int i = 0; i < 200; i++)
    strcat(text, "  %1 = frob : f32[]\n");
  strcat(text, "}\n");
  const char *got = parse_fail(a, text);
  cr_assert(strstr(got, "too many errors; stopping"), "%s", got);
  int errors = 0;
  for (const char *p = strstr(got, "error:"); p; p = strstr(p + 1, "error:"))
    errors++;
  cr_assert_leq(errors, 30);
  arena_destroy(a);
}

/* Verification runs after parsing; its errors point at the definition in
 * the .tfir text, not at the @ location (which is restored afterwards). */
Test(parse, verify_errors_point_into_the_text) {
  Arena *a = arena_create();
  const char *got = parse_fail(a, HEAD "  %1 = param \"w\" : f32[4,8] @\"m.tfm\":9:9\n"
                                       "  %2 = linear %0, %1 : f32[B,5] @\"m.tfm\":9:9\n"
                                       "  %3 = input \"x\" : f32[2]\n"
                                       "}\n");
  cr_assert(strstr(got, "t.tfir:5:3: error: %2 (linear): type f32[B,5] does not match "
                        "the inferred f32[B,4]\n"
                        "    %2 = linear %0, %1 : f32[B,5] @\"m.tfm\":9:9\n"
                        "    ^\n"),
            "%s", got);
  cr_assert(strstr(got, "t.tfir:6:3: error: %3 (input): duplicate input name \"x\" (also %0)"),
            "%s", got);
  arena_destroy(a);
}

Test(parse, attr_sanity_is_verified) {
  EXPECT_ERROR(HEAD "  %1 = layernorm %0, %0, %0 {eps=-1, unbiased=false} : f32[B,8]\n}\n",
               "t.tfir:4:3: error: %1 (layernorm): eps must be a finite number >= 0, got -1");
  EXPECT_ERROR(HEAD "  %1 = reshape %0 : f32[B,4,2]\n  %2 = attention %1, %1, %1 {heads=0, "
                    "scale=1} : f32[B,4,2]\n}\n",
               "t.tfir:5:3: error: %2 (attention): heads must be >= 1, got 0");
  EXPECT_ERROR(HEAD "  %1 = input \"\" : f32[2]\n}\n",
               "t.tfir:4:3: error: %1 (input): has no name");
}

Test(parse, ok_graph_is_verified_and_returned) {
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_from_string(
      a, "ok.tfir", HEAD "  %1 = relu %0 : f32[B,8] @\"m.tfm\":2:7\n  output \"y\" = %1\n}\n");
  IrGraph *g = ir_graph_parse(a, src, &d);
  cr_assert(g, "%s", d.captured);
  cr_assert_eq(d.n_errors, 0);
  cr_assert_eq(g->n_nodes, 2);
  cr_assert_str_eq(g->nodes[1].loc.file, "m.tfm");
  cr_assert_eq(g->nodes[1].loc.line, 2);
  cr_assert_eq(g->nodes[1].loc.col, 7);
  cr_assert_null(g->nodes[0].loc.file);
  cr_assert_eq(g->nodes[0].loc.line, 0);
  /* the location's file is a copy in the arena, not a pointer into the text */
  cr_assert(g->nodes[1].loc.file < src->text || g->nodes[1].loc.file > src->text + src->len);
  arena_destroy(a);
}

/* Size is linear: many nodes and long strings parse quickly. */
Test(parse, large_graph, .timeout = 20) {
  Arena *a = arena_create();
  int n = 20000;
  size_t cap = (size_t)n * 120 + 4096;
  char *text = arena_alloc(a, cap);
  size_t len = (size_t)snprintf(text, cap,
                                "graph \"big\" {\n  sym B max 4\n"
                                "  %%0 = input \"x\" : f32[B,8]\n");
  for (int i = 1; i < n; i++)
    len += (size_t)snprintf(text + len, cap - len,
                            "  %%%d = param \"p%d.%s\" : f32[8] @\"f.tfm\":%d:1\n", 2 * i, i,
                            "a_long_name_to_make_strings_matter", i);
  snprintf(text + len, cap - len, "}\n");
  Diags d;
  diags_init(&d, a, NULL);
  IrGraph *g = ir_graph_parse(a, src_file_from_string(a, "big.tfir", text), &d);
  cr_assert(g, "%s", d.captured);
  cr_assert_eq(g->n_nodes, n);
  cr_assert_str_eq(g->nodes[n - 1].attrs.name, "p19999.a_long_name_to_make_strings_matter");
  cr_assert_eq(g->nodes[1].loc.file, g->nodes[n - 1].loc.file); /* interned */
  arena_destroy(a);
}

/* A NUL byte inside the text (a SrcFile made by hand) is an error, not a
 * silently shortened name. */
Test(parse, nul_bytes_in_text) {
  Arena *a = arena_create();
  static const char text[] = "graph \"g\" {\n  %0 = input \"a\0b\" : f32[2]\n  \0\n}\n";
  SrcFile src = {"nul.tfir", text, sizeof text - 1};
  Diags d;
  diags_init(&d, a, NULL);
  cr_assert_null(ir_graph_parse(a, &src, &d));
  cr_assert(strstr(d.captured, "nul.tfir:2:16: error: a string cannot contain a NUL byte"), "%s",
            d.captured);
  arena_destroy(a);
}

/* fused nodes: the kind must be a row of fused.def, with its operand count
 * and attributes; the body must decompose; `result` reads result 1..n-1
 * of a fused node, once */
#define FHEAD HEAD "  %1 = param \"g\" : f32[8]\n"
Test(parse, fused_nodes_are_checked) {
  EXPECT_ERROR(FHEAD "  %2 = fused \"add_norm\" %0 : f32[B,8]\n}\n",
               "t.tfir:5:14: error: unknown fusion kind 'add_norm' (fused.def has: "
               "add_layernorm, add_layernorm_sum, elementwise)");
  EXPECT_ERROR(FHEAD "  %2 = fused \"add_layernorm\" %0, %0, %1 {eps=1e-05, unbiased=false} : "
                     "f32[B,8]\n}\n",
               "t.tfir:5:8: error: fused 'add_layernorm' takes 4 operands, got 3");
  EXPECT_ERROR(FHEAD "  %2 = fused \"elementwise\" \"relu($0)\" %0 {eps=1} : f32[B,8]\n}\n",
               "attribute 'eps' is not allowed for 'fused'");
  EXPECT_ERROR(FHEAD "  %2 = fused \"elementwise\" %0 : f32[B,8]\n}\n",
               "t.tfir:5:28: error: expected the quoted expr after 'fused', found '%0'");
  EXPECT_ERROR(FHEAD "  %2 = fused \"elementwise\" \"add($0, $1)\" %0 : f32[B,8]\n}\n",
               "t.tfir:5:3: error: %2 (fused): body \"add($0, $1)\", at offset 10: operand $1 "
               "does not exist (1 operands)");
  EXPECT_ERROR(FHEAD "  %2 = fused \"elementwise\" \"softmax($0)\" %0 : f32[B,8]\n}\n",
               "'softmax' cannot be part of an elementwise body");
  EXPECT_ERROR(FHEAD "  %2 = fused \"elementwise\" \"relu($0)\" %0, %1 : f32[B,8]\n}\n",
               "body \"relu($0)\" does not use operand $1");
  EXPECT_ERROR(FHEAD "  %2 = fused \"elementwise\" \"relu($0)\" %0 : f32[B,9]\n}\n",
               "%2 (fused): type f32[B,9] does not match the inferred f32[B,8]");
  EXPECT_ERROR(FHEAD "  %2 = fused \"add_layernorm\" %0, %0, %1, %1 {eps=1e-05, unbiased=false}"
                     " : f32[B,8]\n  %3 = result %2 {index=1} : f32[B,8]\n}\n",
               "%3 (result): result index 1 out of range: fused 'add_layernorm' has 1 result");
  EXPECT_ERROR(FHEAD "  %2 = fused \"add_layernorm_sum\" %0, %0, %1, %1 {eps=1e-05, "
                     "unbiased=false} : f32[B,8]\n  %3 = result %2 {index=1} : f32[B,8]\n"
                     "  %4 = result %2 {index=1} : f32[B,8]\n}\n",
               "%4 (result): result 1 of %2 is already read by %3");
  EXPECT_ERROR(FHEAD "  %2 = result %0 {index=1} : f32[B,8]\n}\n",
               "%2 (result): result reads a fused node, not 'input'");
}
