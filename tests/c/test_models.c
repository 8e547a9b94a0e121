/* tests/c/test_models.c — whole models through `tfmc emit-c`, built as
 * standalone executables and run on the PyTorch goldens' inputs:
 *   - every golden model (tests/golden/NAME) and the bundled sort model,
 *     their generated sources compiled with gcc -std=c99 -pedantic -Werror
 *     and linked with the runtime (built once), outputs within
 *     1e-4 + 1e-4 |ref| of PyTorch's;
 *   - the sort model through its own Makefile (gcc; clang with NO_BLAS=1
 *     and embedded weights) and its CMakeLists.txt, the executable's
 *     interface (--help, --threads, --profile, refusals). */
#include "c_test_util.h"
#include "tests/common/profile_report.h"

#include <dirent.h>

#define TFMC TFMC_BINARY_DIR "/tfmc"
#define GOLDEN_DIR TFMC_SOURCE_DIR "/tests/golden"
#define SORT_DIR TFMC_SOURCE_DIR "/examples/sort"

static void need_tfmc(void) {
  cr_assert(access(TFMC, X_OK) == 0, "%s is not built (these tests emit through `tfmc emit-c`)",
            TFMC);
}

/* Compares every tensor of out with the same tensor of ref; every tensor of
 * ref (the attention probabilities too) must be in out. Returns the max
 * |diff|. */
static double compare_outputs(const char *out, const char *ref, const char *model) {
  RtSafetensors *so, *sr;
  char err[512];
  cr_assert_eq(rt_st_open(out, &so, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_open(ref, &sr, err, sizeof err), 0, "%s", err);
  cr_assert_gt(rt_st_count(so), 0, "%s: no outputs", model);
  for (int i = 0; i < rt_st_count(sr); i++)
    cr_assert(rt_st_find(so, rt_st_get(sr, i)->name), "%s: reference '%s' was not produced", model,
              rt_st_get(sr, i)->name);
  double maxd = 0;
  for (int i = 0; i < rt_st_count(so); i++) {
    const RtStTensor *a = rt_st_get(so, i), *b = rt_st_find(sr, a->name);
    cr_assert(b, "%s: output '%s' is not in the reference", model, a->name);
    cr_assert_eq(rt_st_numel(a), rt_st_numel(b), "%s: %s sizes differ", model, a->name);
    cr_assert_eq(a->rank, b->rank, "%s: %s ranks differ", model, a->name);
    int64_t n = rt_st_numel(a);
    float *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
    cr_assert_eq(rt_st_read_f32(a, x, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rt_st_read_f32(b, y, err, sizeof err), 0, "%s", err);
    for (int64_t k = 0; k < n; k++) {
      double d = fabs((double)x[k] - y[k]);
      if (d > maxd) maxd = d;
      cr_assert(d <= 1e-4 + 1e-4 * fabs(y[k]), "%s: %s[%lld] = %.7g, PyTorch %.7g", model, a->name,
                (long long)k, x[k], y[k]);
    }
    free(x);
    free(y);
  }
  rt_st_close(so);
  rt_st_close(sr);
  return maxd;
}

static bool is_model_dir(const char *dir) {
  char p[600];
  snprintf(p, sizeof p, "%s/model.tfm", dir);
  return access(p, R_OK) == 0;
}

Test(models, goldens_match_pytorch, .timeout = 900) {
  need_tfmc();
  char *tmp = ct_mkdtemp("models");
  CtTool gcc = {"gcc", "gcc", "ar", "", false};
  char dirs[32][512];
  int n = 0;
  DIR *d = opendir(GOLDEN_DIR);
  cr_assert(d, "no %s", GOLDEN_DIR);
  struct dirent *de;
  while ((de = readdir(d)) && n < 31) {
    if (de->d_name[0] == '.') continue;
    snprintf(dirs[n], sizeof dirs[n], "%s/%s", GOLDEN_DIR, de->d_name);
    if (is_model_dir(dirs[n])) n++;
  }
  closedir(d);
  snprintf(dirs[n++], sizeof dirs[0], "%s", SORT_DIR);
  cr_assert_geq(n, 2);
  bool built_rt = false;
  for (int i = 0; i < n; i++) {
    const char *name = strrchr(dirs[i], '/') + 1;
    char proj[1024], exe[80] = "";
    snprintf(proj, sizeof proj, "%s/%s", tmp, name);
    /* the golden's extra arguments (e.g. --attention decoder.0) so its
     * attention output is built and compared too */
    char args_path[1100], extra[256] = "";
    snprintf(args_path, sizeof args_path, "%.1000s/args", dirs[i]);
    char *a = access(args_path, R_OK) == 0 ? ct_read_text(args_path, NULL) : NULL;
    if (a) {
      size_t k = 0;
      for (const char *c = a; *c && *c != '\n' && k + 1 < sizeof extra; c++) {
        cr_assert(strchr("abcdefghijklmnopqrstuvwxyz0123456789.-_ ", *c), "odd byte in %s", args_path);
        extra[k++] = *c;
      }
      extra[k] = 0;
      free(a);
    }
    CT_RUN("%s emit-c %s/model.tfm --weights %s/weights.safetensors -o %s %s", TFMC, dirs[i], dirs[i],
           proj, extra);
    if (!built_rt) {
      ct_build_runtime(&gcc, proj, tmp);
      built_rt = true;
    }
    /* the executable is the only file without a dot next to the Makefile */
    CT_RUN("cd %s && ls *.weights > exe.txt", proj);
    char path[1100];
    snprintf(path, sizeof path, "%s/exe.txt", proj);
    char *t = ct_read_text(path, NULL);
    cr_assert(t && strstr(t, ".weights"));
    snprintf(exe, sizeof exe, "%.*s", (int)(strstr(t, ".weights") - t), t);
    free(t);
    /* every generated source: model.c main.c api.c, and for a model that
     * generates (a decoder or encoder_decoder) step.c encode.c gen_info.c
     * gen_api.c too */
    CT_RUN("cd %s && gcc -std=c99 " CT_WARN " -O2 -I. -D_POSIX_C_SOURCE=200809L -c *.c"
           " && gcc -o %s *.o %s/librt.a -lm -lpthread -ldl",
           proj, exe, tmp);
    CT_RUN("cd %s && ./%s --inputs %s/inputs.safetensors --outputs out.safetensors --threads 2", proj,
           exe, dirs[i]);
    snprintf(path, sizeof path, "%s/out.safetensors", proj);
    char ref[1024];
    snprintf(ref, sizeof ref, "%.511s/expected.safetensors", dirs[i]);
    double maxd = compare_outputs(path, ref, name);
    fprintf(stderr, "emit-c %-34s max |diff| vs PyTorch %.3g\n", name, maxd);
  }
  ct_rmdir(tmp);
}

/* The sort model through its generated build files. */
static void sort_build(const char *how, const char *build_cmd, bool embed, const char *exe_path) {
  need_tfmc();
  char *tmp = ct_mkdtemp("sortbuild");
  char proj[600];
  snprintf(proj, sizeof proj, "%s/sort", tmp);
  /* -O2 here and for the loop IR listing below: one pass level, whatever the defaults */
  CT_RUN("%s emit-c %s/model.tfm --weights %s/weights.safetensors -O2 -o %s%s", TFMC, SORT_DIR,
         SORT_DIR, proj, embed ? " --embed-weights" : "");
  CT_RUN("cd %s && %s", proj, build_cmd);
  CT_RUN("cd %s && %s --help | grep -q 'Runs the model .sort.'", proj, exe_path);
  /* one sequence as text, summarised on stdout as `tfmc run` prints it */
  CT_RUN("cd %s && %s --text '7 3 9 1 3 0 8 2' --vocab %s/vocab.txt > text.txt && "
         "grep -q '^  output: 0 1 2 3 3 7 8 9$' text.txt",
         proj, exe_path, SORT_DIR);
  for (int threads = 1; threads <= 4; threads += 3) {
    CT_RUN("cd %s && %s --inputs %s/inputs.safetensors --outputs out.safetensors --threads %d", proj,
           exe_path, SORT_DIR, threads);
    char out[700];
    snprintf(out, sizeof out, "%s/out.safetensors", proj);
    double maxd = compare_outputs(out, SORT_DIR "/expected.safetensors", how);
    fprintf(stderr, "sort via %-44s %d threads: max |diff| %.3g\n", how, threads, maxd);
  }
  /* --profile: the runtime's report names every kernel of the loop IR under
   * its op kind; the outputs are bit for bit those of a run without it */
  CT_RUN("%s ir %s/model.tfm --level loop -O2 > %s/listing.txt", TFMC, SORT_DIR, tmp);
  CT_RUN("cd %s && %s --inputs %s/inputs.safetensors --outputs plain.safetensors --threads 2 && "
         "%s --inputs %s/inputs.safetensors --outputs prof.safetensors --threads 2 --repeat 3 "
         "--profile 2> profile.txt && cmp plain.safetensors prof.safetensors",
         proj, exe_path, SORT_DIR, exe_path, SORT_DIR);
  char listing_path[700], report_path[700];
  snprintf(listing_path, sizeof listing_path, "%s/listing.txt", tmp);
  snprintf(report_path, sizeof report_path, "%s/profile.txt", proj);
  char *listing = ct_read_text(listing_path, NULL), *report = ct_read_text(report_path, NULL);
  cr_assert(listing && report);
  ProfReport r;
  prof_parse(report, &r);
  prof_check(&r);
  prof_check_listing(&r, listing);
  cr_assert_eq(r.runs, 3, "%s", report);
  cr_assert(prof_kind(&r, "attention.flash") && prof_kind(&r, "linear"), "%s", report);
  free(listing);
  free(report);
  /* refusals are messages with exit status 1 / 2, never crashes */
  char *log = NULL;
  int rc = ct_sh(&log, "cd %s && %s --inputs %s/weights.safetensors --outputs o.safetensors", proj,
                 exe_path, SORT_DIR);
  cr_assert_eq(rc, 1, "wrong inputs file: status %d\n%s", rc, log);
  free(log);
  rc = ct_sh(&log, "cd %s && %s --inputs", proj, exe_path);
  cr_assert_eq(rc, 2, "usage error: status %d\n%s", rc, log);
  free(log);
  ct_rmdir(tmp);
}

Test(models, sort_makefile_gcc, .timeout = 300) {
  sort_build("make (gcc)", "make CC=gcc CFLAGS='-O2 -Werror'", false, "./sort");
}

Test(models, sort_makefile_clang_no_blas_embedded, .timeout = 300) {
  if (!ct_have("clang")) cr_skip_test("clang is not installed (Debian package clang)");
  sort_build("make (clang, NO_BLAS=1, embedded)", "make CC=clang CFLAGS='-O2 -Werror' NO_BLAS=1",
             true, "./sort");
}

Test(models, sort_cmake, .timeout = 300) {
  if (!ct_have("cmake")) cr_skip_test("cmake is not installed");
  sort_build("cmake", "cmake -S . -B build -DCMAKE_C_FLAGS=-Werror > /dev/null && cmake --build build",
             false, "build/sort");
}
