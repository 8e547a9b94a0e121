/* tests/ir/test_loop_parse.c — loop IR listings read back (ir/loop_parse.c):
 * every kind of expression and statement round-trips through the printer
 * byte for byte, and malformed listings are refused with file:line:col
 * errors, several per run, never a crash. (Whole lowered models round-trip
 * in tests/passes/test_loop_ir.c.) */
#include "ir/loop.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static char *print_str(const LoopProgram *p) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  cr_assert(f);
  loop_program_print(p, f);
  fclose(f);
  return s;
}

static const char *head =
    "loop program \"t\\\"q\\x01\" (arena 128 bytes, weights 16 floats, syms 2)\n"
    "  b0 = arena+0 : i32  \"ids\"\n"
    "  b1 = weights+0 : f32  \"w\"\n"
    "  b2 = arena+64 : f32  \"%2\"\n"
    "  b3 = output[0] : f32  \"y\"\n"
    "  b4 = input[1] : u8  \"mask\"\n";

Test(loop_parse, every_construct_round_trips) {
  char text[4096];
  snprintf(text, sizeof text, "%s%s", head,
           "kernel k1_all \"every \\\\ kind\" node 7 parallel extent (sym0 * (sym1 + 1)) grain 3 (outer v0):\n"
           "  vars v0:i64 v1:f32 v2:f64 v3:i64 v4:i64\n"
           "  let v1: f32 = -inff\n"
           "  let v2: f64 = 1.0\n"
           "  let v2: f64 = (v2 * -1.0000000000000001e-05)\n"
           "  for v3 in 0..(sym1 - -2):\n"
           "    v1 = max~(v1, b1[(v3 % 16)])\n"
           "    v1 = (v1 +~ f32(v2))\n"
           "    v1 = min(v1, ((b4[v3] != 0) ? exp(-(v1)) : nanf))\n"
           "    {\n"
           "      let v4: i64 = ((b0[v3] < 5) && (v3 <= v0))\n"
           "      b2[v3] = f32(i64(sqrt(log(tanh(erf(sin(cos(0.5f))))))))\n"
           "    }\n"
           "    {\n"
           "    }\n"
           "  for v4 in v0..v0:\n"
           "  call rt_gelu(null, 16, &b1[0], &b2[(v0 / 2)], 1, 8192)\n"
           "  b0[0] = (v3 == 2)\n"
           "kernel \"not an identifier\" \"\" serial extent 1 grain 5 (outer v0):\n"
           "  vars v0:i64\n"
           "kernel k3 \"\" serial extent 2 (outer v1):\n"
           "  vars v0:f32 v1:i64\n"
           "  call rt_linear(pool, 1, 2, 3, &b1[0], 3, &b1[4], null, &b3[v1], 2, 0, 1f, null, 0, 128, 2016, 384, 131072, 8388608)\n"
           "kernel k4 \"\" serial extent 2 shares k3 (outer v1):\n"
           "  vars v0:f32 v1:i64\n"
           "  call rt_linear(pool, 1, 2, 3, &b1[0], 3, &b1[4], null, &b3[v1], 2, 0, 1f, null, 0, 128, 2016, 384, 131072, 8388608)\n");
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  LoopProgram *p = loop_program_parse(a, src_file_from_string(a, "all.tfloop", text), &d);
  cr_assert(p, "%s", d.captured ? d.captured : "");
  char *back = print_str(p);
  cr_expect_str_eq(back, text);
  cr_expect_eq(p->n_kernels, 4);
  cr_expect_eq(p->kernels[3].shares, 2);
  cr_expect_eq(p->kernels[0].node, 7);
  cr_expect_eq(p->kernels[1].node, -1);
  cr_expect_eq(p->kernels[2].outer_var, 1);
  cr_expect_str_eq(p->name, "t\"q\x01");
  /* the listing prints (and reads) what the verifier refuses, such as a
   * kernel name that is no C identifier: parsing does not verify */
  char err[256];
  cr_expect(!loop_program_verify(p, err, sizeof err));
  cr_expect(strstr(err, "kernel 1 (not an identifier): kernel name is not a C identifier"), "%s",
            err);
  free(back);
  arena_destroy(a);
}

/* a program with a state region (a step graph's KV caches): the header's
 * ", state N bytes" and state+OFFSET buffers round-trip, and verify */
Test(loop_parse, state_round_trips) {
  const char *text =
      "loop program \"step\" (arena 64 bytes, weights 0 floats, syms 3, state 256 bytes)\n"
      "  b0 = input[0] : f32  \"x\"\n"
      "  b1 = state+0 : f32  \"cache.decoder.0.k\"\n"
      "  b2 = state+128 : f32  \"cache.decoder.0.v\"\n"
      "kernel k1_kv_append \"\" serial extent sym1 (outer v0):\n"
      "  vars v0:i64\n"
      "  b1[((sym2 - sym1) + v0)] = b0[v0]\n";
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  LoopProgram *p = loop_program_parse(a, src_file_from_string(a, "state.tfloop", text), &d);
  cr_assert(p, "%s", d.captured ? d.captured : "");
  cr_expect_eq(p->state_bytes, 256);
  cr_expect_eq(p->bufs[2].kind, LB_STATE);
  cr_expect_eq(p->bufs[2].offset, 128);
  char *back = print_str(p);
  cr_expect_str_eq(back, text);
  char err[256];
  cr_expect(loop_program_verify(p, err, sizeof err), "%s", err);
  free(back);
  arena_destroy(a);
}

/* text after the header; the errors expected, in order */
static void refused(const char *body, const char *const *want, int n_want) {
  char text[4096];
  snprintf(text, sizeof text, "%s%s", head, body);
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  cr_expect_null(loop_program_parse(a, src_file_from_string(a, "bad.tfloop", text), &d), "%s",
                 body);
  const char *at = d.captured ? d.captured : "";
  for (int i = 0; i < n_want; i++) {
    const char *hit = strstr(at, want[i]);
    cr_expect(hit, "'%s' missing (or out of order) in:\n%s", want[i],
              d.captured ? d.captured : "");
    if (hit) at = hit + strlen(want[i]);
  }
  arena_destroy(a);
}

Test(loop_parse, errors_point_at_the_line_and_column_and_keep_going) {
  const char *k = "kernel k1 \"\" serial extent 1 (outer v0):\n"
                  "  vars v0:i64 v1:f32\n";
  char body[2048];
  snprintf(body, sizeof body, "%s%s", k,
           "  let v1: f32 = (v1 + 1)\n"          /* line 9: f32 + i64 */
           "  v9 = 0f\n"                         /* line 10: no v9 */
           "  b7[0] = 0f\n"                      /* line 11: no b7 */
           "  b1[0] = 1\n"                       /* line 12: f32 buffer, i64 value */
           "  call rt_gelu(null)\n"              /* line 13: wrong argument count */
           "  for v1 in 0..4:\n"                 /* line 14: f32 loop variable */
           "    v1 = 0f\n"                       /* swallowed with its loop */
           "  frob v1\n");                       /* line 16 */
  const char *want[] = {"bad.tfloop:9:",  "operands of different types",
                        "bad.tfloop:10:3: error: no variable v9",
                        "bad.tfloop:11:3: error: no buffer b7",
                        "bad.tfloop:12:", "the stored value must be f32",
                        "bad.tfloop:13:", "rt_gelu takes 6 arguments, given 1",
                        "bad.tfloop:14:", "a loop variable must be i64",
                        "bad.tfloop:16:3: error: expected a statement"};
  refused(body, want, (int)(sizeof want / sizeof *want));
}

Test(loop_parse, structure_errors) {
  const char *w1[] = {"bad.tfloop:8:3: error: expected 'vars'"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n  let v0: i64 = 0\n", w1, 1);
  const char *w2[] = {"bad.tfloop:9:", "indented deeper"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n  vars v0:i64\n    b1[0] = 0f\n", w2, 2);
  const char *w3[] = {"missing its '}'"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n  vars v0:i64\n  {\n    b1[0] = 0f\n", w3, 1);
  const char *w4[] = {"bad.tfloop:7:", "expected buffer b5 next"};
  refused("  b6 = arena+0 : f32  \"x\"\n", w4, 2);
  const char *w5[] = {"bad.tfloop:7:", "extent reads only constants and symbols"};
  refused("kernel k1 \"\" serial extent v0 (outer v0):\n  vars v0:i64\n", w5, 2);
  const char *w6[] = {"bad.tfloop:8:", "outer variable v0 must be"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n  vars v0:f32\n", w6, 2);
  const char *w7[] = {"bad.tfloop:9:", "a '}' without its '{'"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n  vars v0:i64\n  }\n", w7, 2);
  const char *w8[] = {"bad.tfloop:7:", "unterminated string"};
  refused("kernel k1 \"abc serial extent 1 (outer v0):\n", w8, 2);
  /* a kernel header and no vars line (found by fuzz_tfloop: it printed a
   * kernel without variables that did not read back) */
  const char *w9[] = {"error: the last kernel has no 'vars' line"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n", w9, 1);
  const char *w10[] = {"bad.tfloop:8:1: error: the kernel before this one has no 'vars' line"};
  refused("kernel k1 \"\" serial extent 1 (outer v0):\n"
          "kernel k2 \"\" serial extent 1 (outer v0):\n  vars v0:i64\n",
          w10, 1);
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  cr_expect_null(loop_program_parse(a, src_file_from_string(a, "e.tfloop", "\n# nothing\n"), &d));
  cr_expect(d.captured && strstr(d.captured, "empty loop IR"), "%s", d.captured);
  arena_destroy(a);
}
