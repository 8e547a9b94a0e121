/* tests/passes/test_loop_stats.c — pass_loop_stats counts what one forward
 * does from the loop IR: kernels that run, runtime calls, and bytes stored
 * into the arena and the outputs (not the state, weights or inputs), with
 * loops multiplied, triangles walked and call sizes from their arguments. */
#include "ir/loop.h"
#include "passes/passes.h"

#include <criterion/criterion.h>

static LoopProgram *parse(Arena *a, const char *text) {
  Diags d;
  diags_init(&d, a, NULL);
  LoopProgram *p = loop_program_parse(a, src_file_from_string(a, "s.tfloop", text), &d);
  cr_assert(p, "%s", d.captured ? d.captured : "");
  char err[256];
  cr_assert(loop_program_verify(p, err, sizeof err), "%s", err);
  return p;
}

Test(loop_stats, counts_stores_calls_and_kernels) {
  const char *text =
      "loop program \"m\" (arena 65536 bytes, weights 4096 floats, syms 2, state 256 bytes)\n"
      "  b0 = input[0] : f32  \"x\"\n"
      "  b1 = weights+0 : f32  \"w\"\n"
      "  b2 = arena+0 : f32  \"%1\"\n"
      "  b3 = arena+8192 : u8  \"%2\"\n"
      "  b4 = output[0] : f32  \"y\"\n"
      "  b5 = state+0 : f32  \"cache\"\n"
      /* sym0 rows x 8: 4 bytes per element */
      "kernel k1 \"\" parallel extent sym0 grain 1 (outer v0):\n"
      "  vars v0:i64 v1:i64\n"
      "  for v1 in 0..8:\n"
      "    b2[((v0 * 8) + v1)] = b0[v1]\n"
      /* a causal triangle over sym1: sym1 (sym1 + 1) / 2 bytes (u8) */
      "kernel k2 \"\" serial extent sym1 (outer v0):\n"
      "  vars v0:i64 v1:i64\n"
      "  for v1 in 0..(v0 + 1):\n"
      "    b3[((v0 * 16) + v1)] = 1\n"
      /* a call per row: m = 2, n = 4 floats each, into the output */
      "kernel k3 \"\" serial extent sym0 (outer v0):\n"
      "  vars v0:i64\n"
      "  call rt_linear(null, 2, 4, 8, &b2[0], 8, &b1[0], null, &b4[(v0 * 8)], 4, 2, 1f, &b2[0], 4, 128, 2016, 384, 131072, 8388608)\n"
      /* state and weights-free stores are not activations written */
      "kernel k4 \"\" serial extent 3 (outer v0):\n"
      "  vars v0:i64\n"
      "  b5[v0] = 0f\n"
      /* empty at these dims: does not run */
      "kernel k5 \"\" serial extent (sym1 - 5) (outer v0):\n"
      "  vars v0:i64\n"
      "  b2[v0] = 0f\n"
      "kernel k6 \"\" serial extent 1 (outer v0):\n"
      "  vars v0:i64\n"
      "  call rt_gelu(pool, (sym0 * 3), &b2[0], &b2[0], 0, 8192)\n";
  Arena *a = arena_create();
  LoopProgram *p = parse(a, text);
  int64_t syms[2] = {3, 5};
  LoopStats st;
  pass_loop_stats(p, syms, &st);
  cr_expect(st.exact);
  cr_expect_eq(st.kernels, 5, "%d", st.kernels);
  cr_expect_eq(st.calls, 3 + 1, "%lld", (long long)st.calls);
  int64_t want = 3 * 8 * 4        /* k1 */
                 + 5 * 6 / 2      /* k2 */
                 + 3 * 2 * 4 * 4  /* k3 */
                 + 3 * 3 * 4;     /* k6 */
  cr_expect_eq(st.bytes_written, want, "%lld, want %lld", (long long)st.bytes_written,
               (long long)want);
  /* at other dims the same program counts differently */
  int64_t syms2[2] = {1, 8};
  pass_loop_stats(p, syms2, &st);
  cr_expect_eq(st.kernels, 6);
  cr_expect_eq(st.bytes_written, 1 * 8 * 4 + 8 * 9 / 2 + 1 * 2 * 4 * 4 + 3 * 4 * 1 + 3 * 4,
               "%lld", (long long)st.bytes_written);
  arena_destroy(a);
}

/* attention writes out [b, tq, h*dv] and, when asked, probs [b, h, tq, tk] */
Test(loop_stats, attention_out_and_probs) {
  const char *text =
      "loop program \"m\" (arena 65536 bytes, weights 0 floats, syms 1)\n"
      "  b0 = arena+0 : f32  \"q\"\n"
      "  b1 = arena+4096 : f32  \"out\"\n"
      "  b2 = output[0] : f32  \"probs\"\n"
      "kernel k1 \"\" serial extent 1 (outer v0):\n"
      "  vars v0:i64\n"
      "  call rt_attention(pool, 1, 2, sym0, sym0, 4, 4, 0.5f, &b0[0], 8, &b0[0], 8, &b0[0], 8, "
      "0, 0, null, 0, 0, &b1[0], &b2[0], 64, 16)\n"
      "kernel k2 \"\" serial extent 1 (outer v0):\n"
      "  vars v0:i64\n"
      "  call rt_attention(pool, 1, 2, sym0, sym0, 4, 4, 0.5f, &b0[0], 8, &b0[0], 8, &b0[0], 8, "
      "0, 0, null, 0, 0, &b1[0], null, 64, 16)\n"
      "kernel k3 \"\" serial extent 1 (outer v0):\n"
      "  vars v0:i64\n"
      "  call rt_attention_flash(pool, 1, 2, sym0, sym0, 4, 4, 0.5f, &b0[0], 8, &b0[0], 8, "
      "&b0[0], 8, 0, 0, null, 0, 0, &b1[0], 64, 128)\n";
  Arena *a = arena_create();
  LoopProgram *p = parse(a, text);
  int64_t syms[1] = {6};
  LoopStats st;
  pass_loop_stats(p, syms, &st);
  cr_expect(st.exact);
  cr_expect_eq(st.calls, 3);
  /* the flash call writes out alone: its scores stay in its scratch */
  cr_expect_eq(st.bytes_written, 3 * (1 * 2 * 6 * 4 * 4) + 1 * 2 * 6 * 6 * 4, "%lld",
               (long long)st.bytes_written);
  arena_destroy(a);
}
