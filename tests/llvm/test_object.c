/* tests/llvm/test_object.c — the LLVM backend's ahead-of-time outputs.
 *
 * Objects: each hand-built program goes through llvm_emit_object, is linked
 * by the system C compiler with a small driver and the runtime library
 * (libtfmc_rt.a) into a PIE executable, run, and its outputs compared with
 * the same program run through the JIT. IR: the host CPU's name and
 * features appear in the function attributes, loops vectorise at the
 * host's width, and an AVX-512 CPU gets 512-bit vectors (zmm registers). */
#include "tests/llvm/llvm_cases.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *driver_source =
    "#include \"runtime/rt_model.h\"\n"
    "#include \"runtime/rt_pool.h\"\n"
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "void tfmc_model_run(const RtRunArgs *args);\n"
    "static int64_t rd64(FILE *f) { int64_t v; if (fread(&v, 8, 1, f) != 1) exit(3); return v; }\n"
    "static void *buf(int64_t n) { size_t m = ((size_t)n + 63) / 64 * 64 + 64;\n"
    "  void *p = aligned_alloc(64, m); if (!p) exit(4); memset(p, 0, m); return p; }\n"
    "int main(int argc, char **argv) {\n"
    "  if (argc != 3) return 2;\n"
    "  FILE *f = fopen(argv[1], \"rb\"); if (!f) return 2;\n"
    "  int64_t n_syms = rd64(f), n_in = rd64(f), n_out = rd64(f), threads = rd64(f);\n"
    "  int64_t syms[8] = {0}; void *in[8] = {0}; float *out[8] = {0}; int64_t out_bytes[8];\n"
    "  for (int64_t i = 0; i < n_syms; i++) syms[i] = rd64(f);\n"
    "  for (int64_t i = 0; i < n_in; i++) { int64_t n = rd64(f); in[i] = buf(n);\n"
    "    if (n && fread(in[i], 1, (size_t)n, f) != (size_t)n) return 3; }\n"
    "  for (int64_t i = 0; i < n_out; i++) { out_bytes[i] = rd64(f); out[i] = buf(out_bytes[i]); "
    "}\n"
    "  int64_t wn = rd64(f); float *w = buf(wn * 4);\n"
    "  if (wn && fread(w, 4, (size_t)wn, f) != (size_t)wn) return 3;\n"
    "  unsigned char *arena = buf(rd64(f));\n"
    "  fclose(f);\n"
    "  RtPool *pool = threads ? rt_pool_create((int)threads) : NULL;\n"
    "  RtRunArgs args = {syms, in, out, w, arena, pool, NULL};\n"
    "  tfmc_model_run(&args);\n"
    "  if (pool) rt_pool_destroy(pool);\n"
    "  FILE *o = fopen(argv[2], \"wb\"); if (!o) return 2;\n"
    "  for (int64_t i = 0; i < n_out; i++) fwrite(out[i], 1, (size_t)out_bytes[i], o);\n"
    "  int rc = fclose(o) ? 5 : 0;\n"
    "  for (int64_t i = 0; i < n_in; i++) free(in[i]);\n"
    "  for (int64_t i = 0; i < n_out; i++) free(out[i]);\n"
    "  free(w);\n  free(arena);\n"
    "  return rc;\n"
    "}\n";

static char workdir[64];

static void make_workdir(void) {
  if (workdir[0])
    return;
  snprintf(workdir, sizeof workdir, "/tmp/tfmc_llvm_XXXXXX");
  cr_assert(mkdtemp(workdir), "mkdtemp failed");
  char path[128];
  snprintf(path, sizeof path, "%s/driver.c", workdir);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(driver_source, f);
  fclose(f);
}

static void put64(FILE *f, int64_t v) {
  fwrite(&v, 8, 1, f);
}

static void write_case(const Case *c, int n_syms, int threads, const char *path) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  put64(f, n_syms);
  put64(f, c->n_in);
  put64(f, c->n_out);
  put64(f, threads);
  for (int i = 0; i < n_syms; i++)
    put64(f, c->syms[i]);
  for (int i = 0; i < c->n_in; i++) {
    put64(f, c->in_bytes[i]);
    fwrite(c->in[i], 1, (size_t)c->in_bytes[i], f);
  }
  for (int i = 0; i < c->n_out; i++)
    put64(f, c->out_bytes[i]);
  put64(f, c->weights_floats);
  if (c->weights_floats)
    fwrite(c->weights, 4, (size_t)c->weights_floats, f);
  put64(f, c->arena_bytes);
  cr_assert_eq(fclose(f), 0);
}

/* Runs p through the JIT and through an object file + driver executable and
 * compares every output (they are the same code, so to the last bit except
 * where rt_linear's threading differs). */
static void object_matches_jit(const LoopProgram *p, Case *c, int n_syms, int threads) {
  make_workdir();
  char err[1024] = "";
  /* JIT reference */
  LlvmJit *jit;
  RtModelRunFn run;
  cr_assert_eq(llvm_jit_compile(p, NULL, &jit, &run, err, sizeof err), 0, "%s", err);
  case_clear_outputs(c);
  RtPool *pool = threads ? rt_pool_create(threads) : NULL;
  RtRunArgs args = case_args(c, pool);
  run(&args);
  if (pool)
    rt_pool_destroy(pool);
  llvm_jit_destroy(jit);

  char obj[160], exe[160], in[160], out[160], cmd[1024];
  snprintf(obj, sizeof obj, "%s/%s.o", workdir, p->name);
  snprintf(exe, sizeof exe, "%s/%s", workdir, p->name);
  snprintf(in, sizeof in, "%s/%s.case", workdir, p->name);
  snprintf(out, sizeof out, "%s/%s.out", workdir, p->name);
  cr_assert_eq(llvm_emit_object(p, NULL, obj, err, sizeof err), 0, "%s", err);
  /* like `tfmc build`: $CC (default cc), the runtime library, libm, threads;
   * a sanitizer build's runtime library needs the sanitizer runtimes */
  const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
#ifdef __SANITIZE_ADDRESS__
  const char *san = " -fsanitize=address,undefined";
#else
  const char *san = "";
#endif
  snprintf(cmd, sizeof cmd,
           "%s%s -std=c11 -O1 -I'%s' -o '%s' '%s/driver.c' '%s' '%s/libtfmc_rt.a' -lm -lpthread "
           "-ldl",
           cc, san, TFMC_SOURCE_DIR, exe, workdir, obj, TFMC_BINARY_DIR);
  cr_assert_eq(system(cmd), 0, "link failed: %s", cmd);
  write_case(c, n_syms, threads, in);
  snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", exe, in, out);
  cr_assert_eq(system(cmd), 0, "run failed: %s", cmd);

  FILE *f = fopen(out, "rb");
  cr_assert(f);
  for (int i = 0; i < c->n_out; i++) {
    int64_t n = c->out_bytes[i] / 4;
    float *got = malloc((size_t)c->out_bytes[i]);
    cr_assert_eq(fread(got, 4, (size_t)n, f), (size_t)n, "short output file");
    int64_t bad = first_mismatch(got, c->out[i], n, 1e-6);
    cr_expect_eq(bad, -1, "%s output %d element %lld: object %.9g, JIT %.9g", p->name, i,
                 (long long)bad, bad >= 0 ? got[bad] : 0.0, bad >= 0 ? c->out[i][bad] : 0.0);
    free(got);
  }
  fclose(f);
  remove(obj);
  remove(exe);
  remove(in);
  remove(out);
}

static void cleanup_workdir(void) {
  if (!workdir[0])
    return;
  char path[128];
  snprintf(path, sizeof path, "%s/driver.c", workdir);
  remove(path);
  rmdir(workdir);
  workdir[0] = 0;
}

TestSuite(llvm_object, .fini = cleanup_workdir);

Test(llvm_object, gelu_parallel) {
  Arena *a = arena_create();
  Case c;
  case_gelu(&c, 31, 100);
  object_matches_jit(prog_gelu(a, 100, true), &c, 1, 2);
  float *want = malloc(31 * 100 * 4);
  ref_gelu(c.in[0], want, 31 * 100);
  cr_expect_eq(first_mismatch(c.out[0], want, 31 * 100, 1e-6), -1);
  free(want);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_object, softmax) {
  Arena *a = arena_create();
  Case c;
  case_softmax(&c, 17, 50);
  object_matches_jit(prog_softmax(a, 50), &c, 1, 0);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_object, gather_nested_ops) {
  Arena *a = arena_create();
  Case c;
  case_gather(&c);
  object_matches_jit(prog_gather(a), &c, 0, 2);
  case_free(&c);
  case_nested(&c, 9, 6);
  c.syms[0] = 7; /* fewer rows than allocated */
  object_matches_jit(prog_nested(a), &c, 2, 2);
  case_free(&c);
  case_ops(&c);
  object_matches_jit(prog_ops(a), &c, 0, 0);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_object, linear) {
  Arena *a = arena_create();
  Case c;
  case_linear(&c);
  object_matches_jit(prog_linear(a), &c, 0, 2);
  float y0[LIN_M * LIN_LDY], y1[(LIN_M - 1) * LIN_N];
  ref_linear(&c, y0, y1);
  cr_expect_eq(first_mismatch(c.out[0], y0, LIN_M * LIN_LDY, 1e-5), -1);
  cr_expect_eq(first_mismatch(c.out[1], y1, (LIN_M - 1) * LIN_N, 1e-5), -1);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_object, unwritable_path_is_an_error) {
  Arena *a = arena_create();
  char err[512] = "";
  int rc = llvm_emit_object(prog_gelu(a, 8, false), NULL, "/nonexistent-dir/x.o", err, sizeof err);
  cr_expect_neq(rc, 0);
  cr_expect(strstr(err, "/nonexistent-dir/x.o"), "message: %s", err);
  arena_destroy(a);
}

/* ---- textual IR ---- */

static char *ir_text(const LoopProgram *p, const LlvmOptions *o) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert(f);
  char err[512] = "";
  int rc = llvm_emit_ir(p, o, f, err, sizeof err);
  fclose(f);
  cr_assert_eq(rc, 0, "%s", err);
  return text;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *s = strstr(hay, needle); s; s = strstr(s + 1, needle))
    n++;
  return n;
}

Test(llvm_object, ir_names_the_host_cpu_and_vectorises) {
  Arena *a = arena_create();
  LoopProgram *p = prog_gelu(a, 1024, true);
  char *ir = ir_text(p, NULL);
  char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
  char want[256];
  snprintf(want, sizeof want, "\"target-cpu\"=\"%s\"", cpu);
  cr_expect(strstr(ir, want), "IR lacks %s", want);
  char *want_features = malloc(strlen(features) + 32);
  sprintf(want_features, "\"target-features\"=\"%s\"", features);
  cr_expect(strstr(ir, want_features), "IR lacks %s", want_features);
  free(want_features);
  cr_expect(strstr(ir, "\"prefer-vector-width\"=\"512\""));
  cr_expect(strstr(ir, "define void @k1_gelu(i8* "), "kernel signature");
  cr_expect(strstr(ir, "define void @tfmc_model_run(i8* "), "entry signature");
  /* kernel 0, extent sym0, grain 2, parallel */
  const char *call = strstr(ir, "call void @rt_kernel_run(i8* %args, i32 0, ");
  cr_expect(call && strstr(call, "@k1_gelu, i8* ") && strstr(call, ", i64 %sym0, i64 2, i32 1)"),
            "the kernel runs through rt_kernel_run:\n%s", ir);
  cr_expect(strstr(ir, "gelu %1 @\\22t.tfm\\22:3:5"), "kernel comment kept as metadata");
  /* a strict elementwise loop vectorises at the host's width: erff is a
   * scalar libm call, so use the chain's scale kernel for a clean check */
  LoopProgram *q = prog_chain(a, 1, 4);
  char *ir2 = ir_text(q, NULL);
  const char *vec = strstr(features, "+avx512f") ? "<16 x float>"
                    : strstr(features, "+avx")   ? "<8 x float>"
                                                 : "<4 x float>";
  cr_expect(strstr(ir2, vec), "host IR lacks %s", vec);
  fprintf(stderr, "llvm_object: host %s: elementwise kernel uses %s (%d times)\n", cpu, vec,
          count(ir2, vec));
  /* deterministic */
  char *again = ir_text(p, NULL);
  cr_expect_str_eq(ir, again);
  free(again);
  free(ir2);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(features);
  free(ir);
  arena_destroy(a);
}

Test(llvm_object, reductions_vectorise_with_reassoc) {
  Arena *a = arena_create();
  char *ir = ir_text(prog_softmax(a, 1024), NULL);
  /* the sum is reassociable: a vector accumulator; the exp loop is vector too */
  cr_expect(strstr(ir, "fadd reassoc contract <"), "softmax sum not vectorised");
  cr_expect(strstr(ir, "@llvm.exp.v"), "exp loop not vectorised");
  free(ir);
  arena_destroy(a);
}

Test(llvm_object, unoptimised_ir_keeps_the_structure) {
  Arena *a = arena_create();
  LlvmOptions o0 = {.opt_level = 0};
  char *ir = ir_text(prog_softmax(a, 64), &o0);
  cr_expect(strstr(ir, "alloca float"), "variables are allocas");
  cr_expect(strstr(ir, "call float @tfmc.reassoc.maxnum.f32("), "reassoc max helper");
  cr_expect(strstr(ir, "call float @tfmc.reassoc.fadd.f32("), "reassoc add helper");
  cr_expect(strstr(ir, "fadd reassoc contract float"), "helper carries the flags");
  cr_expect(strstr(ir, "fdiv float 1.000000e+00"), "strict division stays unflagged");
  cr_expect(strstr(ir, "!alias.scope"), "input and output accesses carry region scopes");
  cr_expect(!strstr(ir, "x float>"), "no vectors at -O0");
  free(ir);
  arena_destroy(a);
}

Test(llvm_object, avx512_cpu_gets_zmm) {
  Arena *a = arena_create();
  LoopProgram *p = prog_chain(a, 1, 4);
  LlvmOptions o = {.opt_level = 3, .cpu = "skylake-avx512"};
  char *ir = ir_text(p, &o);
  cr_expect(strstr(ir, "\"target-cpu\"=\"skylake-avx512\""));
  cr_expect(strstr(ir, "<16 x float>"), "no 512-bit vectors for skylake-avx512");
  free(ir);
  make_workdir();
  char obj[128], cmd[400], err[512] = "";
  snprintf(obj, sizeof obj, "%s/avx512.o", workdir);
  cr_assert_eq(llvm_emit_object(p, &o, obj, err, sizeof err), 0, "%s", err);
  if (system("objdump --version >/dev/null 2>&1") == 0) {
    snprintf(cmd, sizeof cmd, "objdump -d '%s' | grep -q zmm", obj);
    cr_expect_eq(system(cmd), 0, "no zmm register in the AVX-512 object");
  } else {
    cr_log_warn("objdump not found: zmm check skipped");
  }
  remove(obj);
  arena_destroy(a);
}
