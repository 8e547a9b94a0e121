/* tests/c/test_cross_models.c — whole trained models through `tfmc emit-c`,
 * cross-compiled with the generated Makefile and run under qemu-user:
 *   - aarch64 (little-endian) and s390x (big-endian; the packed weights
 *     and the safetensors files are little-endian, so the runtime
 *     byte-swaps the weights, the inputs and the outputs there);
 *   - the bundled sort model (packed weights file found next to the
 *     executable, and --embed-weights), and the PyTorch goldens gpt2 and
 *     annotated with the `--attention LAYER` their args file asks for;
 *   - each project built twice from the same sources with
 *     `make NO_BLAS=1` (the portable GEMM): natively with gcc (the host
 *     reference) and with the cross gcc/ar, the generated C at -pedantic
 *     -Werror; the cross executable (checked to be an ELF file of the
 *     target's machine and byte order) run under qemu with 2 threads.
 * The cross outputs must pass `tfmc compare --atol 1e-4 --rtol 1e-4`
 * against PyTorch's expected.safetensors and lie within the same
 * tolerance of the host's outputs; the max differences are printed.
 * A target is skipped (naming the Debian package) only when its cross
 * compiler or qemu is missing. Generation on the same targets:
 * test_cross_generate.c. */
#include "cross_util.h"

#include <ctype.h>

#define TFMC TFMC_BINARY_DIR "/tfmc"
#define GOLDEN_DIR TFMC_SOURCE_DIR "/tests/golden"
#define SORT_DIR TFMC_SOURCE_DIR "/examples/sort"

/* One model under test: where its golden lives and how it is emitted. */
typedef struct CrossModel {
  const char *name; /* scratch project name and label in messages */
  const char *dir;  /* holds model.tfm, weights/inputs/expected.safetensors */
  bool embed;       /* emit with --embed-weights */
} CrossModel;

static const CrossModel cross_models[] = {
    {"sort", SORT_DIR, false},
    {"sort-embedded", SORT_DIR, true},
    {"gpt2", GOLDEN_DIR "/gpt2", false},
    {"annotated", GOLDEN_DIR "/annotated", false},
};
enum { N_CROSS_MODELS = sizeof cross_models / sizeof cross_models[0] };

/* The extra emit-c arguments of a golden (DIR/args, e.g. `--attention
 * decoder.0`), "" when it has none. Refuses anything but plain option
 * words, since the text goes into a shell command. Returns malloc'd text. */
static char *golden_args(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/args", dir);
  char *t = ct_read_text(path, NULL);
  if (!t) return strdup("");
  for (char *c = t; *c; c++) {
    if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    cr_assert(isalnum((unsigned char)*c) || strchr(" -._", *c),
              "%s holds '%c', which this test does not pass to a shell", path, *c);
  }
  return t;
}

/* Max |a - b| over every tensor of out, each matched by name in ref (ref
 * may hold more); with check, fails where |a - b| > 1e-4 + 1e-4 |b|. */
static double outputs_max_diff(const char *out, const char *ref, const char *what, bool check) {
  RtSafetensors *so, *sr;
  char err[512];
  cr_assert_eq(rt_st_open(out, &so, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_open(ref, &sr, err, sizeof err), 0, "%s", err);
  cr_assert_gt(rt_st_count(so), 0, "%s: no outputs", what);
  double maxd = 0;
  for (int i = 0; i < rt_st_count(so); i++) {
    const RtStTensor *a = rt_st_get(so, i), *b = rt_st_find(sr, a->name);
    cr_assert(b, "%s: output '%s' is not in %s", what, a->name, ref);
    cr_assert_eq(a->rank, b->rank, "%s: %s ranks differ", what, a->name);
    for (int d = 0; d < a->rank; d++)
      cr_assert_eq(a->shape[d], b->shape[d], "%s: %s dim %d differs", what, a->name, d);
    int64_t n = rt_st_numel(a);
    float *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
    cr_assert(x && y);
    cr_assert_eq(rt_st_read_f32(a, x, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rt_st_read_f32(b, y, err, sizeof err), 0, "%s", err);
    for (int64_t k = 0; k < n; k++) {
      cr_assert(isfinite(x[k]), "%s: %s[%lld] = %g", what, a->name, (long long)k, x[k]);
      double diff = fabs((double)x[k] - y[k]);
      if (diff > maxd) maxd = diff;
      if (check)
        cr_assert(diff <= 1e-4 + 1e-4 * fabs(y[k]), "%s: %s[%lld] = %.7g, reference %.7g", what,
                  a->name, (long long)k, x[k], y[k]);
    }
    free(x);
    free(y);
  }
  rt_st_close(so);
  rt_st_close(sr);
  return maxd;
}

/* One model on target x: emit, build natively and with x, run both, compare. */
static void cross_model_run(const CrossTarget *x, const CrossModel *m, const char *tmp) {
  const CtTool *t = &x->tool;
  char host[700], cross[700], out_host[800], out_cross[800], expected[700];
  snprintf(host, sizeof host, "%s/%s-host", tmp, m->name);
  snprintf(cross, sizeof cross, "%s/%s-%s", tmp, m->name, t->name);
  snprintf(out_host, sizeof out_host, "%s/out.safetensors", host);
  snprintf(out_cross, sizeof out_cross, "%s/out.safetensors", cross);
  snprintf(expected, sizeof expected, "%s/expected.safetensors", m->dir);
  char *args = golden_args(m->dir);
  CT_RUN("%s emit-c %s/model.tfm --weights %s/weights.safetensors -o %s%s %s", TFMC, m->dir, m->dir,
         host, m->embed ? " --embed-weights" : "", args);
  free(args);
  /* the same sources for both builds: make builds in place */
  CT_RUN("cp -R %s %s", host, cross);
  char *exe = project_exe(host);
  CT_RUN("cd %s && make -j2 NO_BLAS=1 CC=gcc AR=ar CFLAGS='-O2 -Werror'", host);
  CT_RUN("cd %s && make -j2 NO_BLAS=1 CC=%s AR=%s CFLAGS='-O2 -Werror'", cross, t->cc, t->ar);
  elf_expect(cross, exe, m->name, x);
  if (m->embed) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s.weights", cross, exe);
    cr_assert(access(path, F_OK) != 0, "--embed-weights wrote %s", path);
  }
  /* the packed weights are found next to the executable (under qemu via
   * its emulated /proc/self/exe) */
  CT_RUN("cd %s && ./%s --inputs %s/inputs.safetensors --outputs out.safetensors --threads 1", host,
         exe, m->dir);
  CT_RUN("cd %s && %s ./%s --inputs %s/inputs.safetensors --outputs out.safetensors --threads 2",
         cross, t->run, exe, m->dir);
  CT_RUN("%s compare %s %s --atol 1e-4 --rtol 1e-4", TFMC, out_cross, expected);
  char what[200];
  snprintf(what, sizeof what, "%s on %s vs PyTorch", m->name, t->name);
  double vs_ref = outputs_max_diff(out_cross, expected, what, true);
  snprintf(what, sizeof what, "%s on %s vs host", m->name, t->name);
  double vs_host = outputs_max_diff(out_cross, out_host, what, true);
  snprintf(what, sizeof what, "%s on host vs PyTorch", m->name);
  double host_ref = outputs_max_diff(out_host, expected, what, true);
  fprintf(stderr, "cross %-8s %-14s max |diff| vs PyTorch %.3g, vs host %.3g (host vs PyTorch %.3g)\n",
          t->name, m->name, vs_ref, vs_host, host_ref);
  free(exe);
}

static void cross_models_run(const CrossTarget *x) {
  cr_assert(access(TFMC, X_OK) == 0, "%s is not built (this test emits through `tfmc emit-c`)",
            TFMC);
  char *tmp = ct_mkdtemp("cross");
  for (int i = 0; i < N_CROSS_MODELS; i++) cross_model_run(x, &cross_models[i], tmp);
  ct_rmdir(tmp);
}

Test(cross_models, aarch64_qemu, .timeout = 300) {
  const char *why = cross_missing(&cross_aarch64);
  if (why) cr_skip_test("%s", why);
  cross_models_run(&cross_aarch64);
}

Test(cross_models, s390x_big_endian_qemu, .timeout = 300) {
  const char *why = cross_missing(&cross_s390x);
  if (why) cr_skip_test("%s", why);
  cross_models_run(&cross_s390x);
}
