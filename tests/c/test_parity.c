/* tests/c/test_parity.c — every op of the op table through the emitted C
 * against the reference interpreter: graph -> pass_lower_loops -> the loop
 * passes of -O2 (lane-split: the reductions print as 8 lanes, as emitted C
 * at -O2 computes them) -> C project -> compiled with a driver (c_test_util.h) -> run on random
 * inputs with symbolic dims bound below their maxima -> outputs within
 * 1e-5 + 1e-4 |ref| of interp_run's (ints exact, masks as booleans).
 *
 * One test per toolchain: gcc and clang, each with BLAS (OpenBLAS when the
 * machine has it) and with NO_BLAS (the portable GEMM), the generated
 * sources at -std=c99 -pedantic -Werror; then aarch64 and s390x
 * (big-endian) cross builds run under qemu-user, whose outputs must also
 * match the host's. The cases are tests/common/op_cases.h (one per op of
 * ops.def: an op without a case does not compile). */
#include "backends/exec.h"
#include "c_test_util.h"
#include "tests/common/op_cases.h"
#include "ir/loop.h"
#include "passes/passes.h"

/* ---- running one op ---- */

typedef struct Built {
  Case c;
  LoopProgram *p;
  RtModelInfo *info;
  float *packed;
  Tensor *ref;
  int n_ref;
} Built;

static void build_op(int op, Built *b) {
  Case *c = &b->c;
  op_case_build(c, op, 777);
  WeightSet raw = {c->w, c->n_w}, *ws = &raw;
  char err[1024];
  /* derived params (param.concat) computed once, as the driver does */
  ws = ir_weights_derive(c->a, c->g, &raw, err, sizeof err);
  cr_assert(ws, "%s: %s", ir_op_info[op].name, err);
  cr_assert_eq(interp_run(c->g, ws, c->in, c->n_in, c->a, &b->ref, &b->n_ref, err, sizeof err), 0,
               "%s: %s", ir_op_info[op].name, err);
  b->p = pass_lower_loops(c->a, c->g);
  PassPipeline o2;
  cr_assert(pass_pipeline_level(2, &o2));
  Diags d;
  diags_init(&d, c->a, NULL);
  PassContext ctx = {.diags = &d};
  cr_assert(pass_pipeline_run_loop(b->p, &o2, &ctx), "%s: %s", ir_op_info[op].name,
            d.captured ? d.captured : "");
  b->info = pass_model_info(c->a, c->g, b->p, c->vocab, -1);
  b->packed = arena_alloc(c->a, (size_t)b->info->weights_floats * 4 + 4);
  char perr[256];
  cr_assert_eq(backend_pack_weights(b->p, ws, b->packed, 0, perr, sizeof perr), 0, "%s", perr);
}

/* Emits op's project into dir/NAME, writes its inputs to dir/NAME/in.safetensors. */
static void emit_op(const Built *b, const char *proj) {
  char err[1024], path[1024];
  CEmitOptions opt = {false, CT_RUNTIME_DIR};
  cr_assert_eq(c_emit_project(b->p, b->info, b->packed, &opt, proj, err, sizeof err), 0, "%s", err);
  RtStWrite w[6];
  for (int i = 0; i < b->c.n_in; i++) {
    const Tensor *t = &b->c.in[i];
    w[i].name = t->name;
    w[i].dtype = t->dtype == IR_F32 ? RT_F32 : t->dtype == IR_I32 ? RT_I32 : RT_U8;
    w[i].rank = t->rank;
    for (int d = 0; d < t->rank; d++) w[i].shape[d] = t->dims[d];
    w[i].data = t->data;
  }
  snprintf(path, sizeof path, "%.900s/in.safetensors", proj);
  cr_assert_eq(rt_st_write(path, w, b->c.n_in, NULL, 0, err, sizeof err), 0, "%s", err);
}

/* Largest |a - b| over outputs; fails beyond tolerance. */
static double compare(const char *op, const char *what, const Tensor *ref, int n_ref,
                      const char *out_path, float **host) {
  double maxd = 0;
  for (int o = 0; o < n_ref; o++) {
    int64_t n;
    float *got = ct_read_output(out_path, ref[o].name, &n);
    cr_assert_eq(n, tensor_numel(&ref[o]), "%s %s: %s has %lld elements", op, what, ref[o].name,
                 (long long)n);
    for (int64_t i = 0; i < n; i++) {
      float r = ref[o].dtype == IR_F32   ? ((float *)ref[o].data)[i]
                : ref[o].dtype == IR_I32 ? (float)((int32_t *)ref[o].data)[i]
                                         : (float)(((uint8_t *)ref[o].data)[i] != 0);
      float g = ref[o].dtype == IR_BOOL ? (float)(got[i] != 0) : got[i];
      if (ref[o].dtype != IR_F32) {
        cr_assert_eq(g, r, "%s %s: %s[%lld] = %g, interp %g", op, what, ref[o].name, (long long)i, g, r);
      } else {
        double d = fabs((double)g - r);
        if (d > maxd) maxd = d;
        cr_assert(d <= 1e-5 + 1e-4 * fabs(r), "%s %s: %s[%lld] = %.9g, interp %.9g", op, what,
                  ref[o].name, (long long)i, g, r);
      }
      if (host) {
        float h = host[o][i];
        cr_assert(fabsf(g - h) <= 1e-5f + 1e-5f * fabsf(h), "%s %s: %s[%lld] = %.9g, host %.9g", op,
                  what, ref[o].name, (long long)i, g, h);
      }
    }
    free(got);
  }
  return maxd;
}

static void build_and_run(const CtTool *t, const char *proj, const char *libdir, int threads) {
  ct_build_driver(t, proj, libdir);
  CT_RUN("cd %s && %s ./driver *.weights in.safetensors out-%s.safetensors %d", proj, t->run, t->name,
         threads);
}

/* All ops through toolchain t; with host (a native no-BLAS gcc), cross
 * outputs are also compared with the host's. */
static void parity(const CtTool *t, const CtTool *host) {
  if (!ct_have(t->cc)) cr_skip_test("%s is not installed", t->cc);
  char *tmp = ct_mkdtemp("parity");
  char libdir[600], hostlib[600];
  snprintf(libdir, sizeof libdir, "%s/lib-%s", tmp, t->name);
  snprintf(hostlib, sizeof hostlib, "%s/lib-host", tmp);
  mkdir(libdir, 0755);
  mkdir(hostlib, 0755);
  double worst = 0, worst_host = 0;
  for (int op = 0; op < IR_OP_COUNT; op++) {
    Built b;
    build_op(op, &b);
    char proj[700], what[160], out[800];
    snprintf(proj, sizeof proj, "%s/%s", tmp, ir_op_info[op].name);
    for (char *ch = strrchr(proj, '/'); *ch; ch++)
      if (*ch == '.') *ch = '_';
    emit_op(&b, proj);
    if (op == 0) {
      ct_build_runtime(t, proj, libdir);
      if (host) ct_build_runtime(host, proj, hostlib);
    }
    float *host_out[8] = {0};
    if (host) {
      build_and_run(host, proj, hostlib, 2);
      snprintf(out, sizeof out, "%s/out-%s.safetensors", proj, host->name);
      for (int o = 0; o < b.n_ref; o++) {
        int64_t n;
        host_out[o] = ct_read_output(out, b.ref[o].name, &n);
      }
    }
    build_and_run(t, proj, libdir, op % 2 ? 3 : 1);
    snprintf(out, sizeof out, "%s/out-%s.safetensors", proj, t->name);
    snprintf(what, sizeof what, "(%s%s)", t->name, t->no_blas ? ", no BLAS" : "");
    double d = compare(ir_op_info[op].name, what, b.ref, b.n_ref, out, host ? host_out : NULL);
    if (d > worst) worst = d;
    if (host) {
      for (int o = 0; o < b.n_ref; o++) {
        int64_t n;
        float *g = ct_read_output(out, b.ref[o].name, &n);
        for (int64_t i = 0; i < n; i++)
          if (fabsf(g[i] - host_out[o][i]) > worst_host) worst_host = fabsf(g[i] - host_out[o][i]);
        free(g);
        free(host_out[o]);
      }
    }
    arena_destroy(b.c.a);
  }
  fprintf(stderr, "parity %-8s%s: %d ops, max |diff| vs interp %.3g", t->name,
          t->no_blas ? " no BLAS" : "", IR_OP_COUNT, worst);
  if (host) fprintf(stderr, ", vs host %.3g", worst_host);
  fputc('\n', stderr);
  ct_rmdir(tmp);
}

Test(parity, gcc_blas, .timeout = 600) {
  CtTool t = {"gcc", "gcc", "ar", "", false};
  parity(&t, NULL);
}
Test(parity, gcc_no_blas, .timeout = 600) {
  CtTool t = {"gcc", "gcc", "ar", "", true};
  parity(&t, NULL);
}
Test(parity, clang_blas, .timeout = 600) {
  if (!ct_have("clang")) cr_skip_test("clang is not installed (Debian package clang)");
  CtTool t = {"clang", "clang", "ar", "", false};
  parity(&t, NULL);
}
Test(parity, clang_no_blas, .timeout = 600) {
  if (!ct_have("clang")) cr_skip_test("clang is not installed (Debian package clang)");
  CtTool t = {"clang", "clang", "ar", "", true};
  parity(&t, NULL);
}

static const CtTool host_gcc = {"host", "gcc", "ar", "", true};

Test(parity, aarch64_qemu, .timeout = 900) {
  if (!ct_have("aarch64-linux-gnu-gcc") || !ct_have("qemu-aarch64"))
    cr_skip_test("no aarch64 cross toolchain (Debian: gcc-aarch64-linux-gnu, qemu-user)");
  CtTool t = {"aarch64", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ar",
              "qemu-aarch64 -L /usr/aarch64-linux-gnu", true};
  parity(&t, &host_gcc);
}
Test(parity, s390x_big_endian_qemu, .timeout = 900) {
  if (!ct_have("s390x-linux-gnu-gcc") || !ct_have("qemu-s390x"))
    cr_skip_test("no s390x cross toolchain (Debian: gcc-s390x-linux-gnu, qemu-user)");
  CtTool t = {"s390x", "s390x-linux-gnu-gcc", "s390x-linux-gnu-ar",
              "qemu-s390x -L /usr/s390x-linux-gnu", true};
  parity(&t, &host_gcc);
}
