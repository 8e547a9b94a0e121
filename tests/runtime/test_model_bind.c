/* tests/runtime/test_model_bind.c — rt_model_bind and rt_main against a fake
 * compiled model: a hand-written run function whose outputs encode what it
 * was given (ids, derived masks, bound dims, weights, the pool), so every
 * check is on values. Covers the happy paths (lengths, mask, pad ids,
 * threads, embedded and default weights) and every refusal: ids out of
 * range, batch over max, inconsistent dims, missing and unexpected inputs,
 * another model's weights, truncated and corrupt weights, usage errors,
 * --outputs naming an input; --profile (the fake model's two kernels run
 * through rt_kernel_run, as compiled code's do). */
#include "runtime/rt_model.h"
#include "runtime/rt_pool.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_weights.h"
#include "tests/common/profile_report.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the fake model ----
 *   inputs  src [B,S] ids < 10, src_mask [B,S] (or src_lengths [B]), tgt [B,T] ids < 12
 *   outputs out [B,T,3] = 100000*src[b,0] + 1000*tgt[b,t] + 10*real(b) + c
 *           wsum [1]    = sum of the weights
 *   weights w1 [3,4] at 0, w2 [5] at 16 (21 floats) */

enum { SYM_B, SYM_S, SYM_T };

static const RtTensorInfo fake_inputs[] = {
    {"src", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 10, NULL, NULL},
    {"src_mask", RT_ELEM_U8, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_MASK, 0, "src", "src_lengths"},
    {"tgt", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_T, 0}}, RT_INPUT_IDS, 12, NULL, NULL},
};

static const RtTensorInfo fake_outputs[] = {
    {"out", RT_ELEM_F32, 3, {{SYM_B, 0}, {SYM_T, 0}, {-1, 3}}},
    {"wsum", RT_ELEM_F32, 1, {{-1, 1}}},
};

static const RtWeightInfo fake_weights[] = {
    {"w1", 2, {3, 4}, 0},
    {"w2", 1, {5}, 16},
};

static const RtKernelInfo fake_kernels[] = {
    {"k0_rows", "fake.rows", "rows %0 @fake.tfm:1:1"},
    {"k1_wsum", "fake.sum", "wsum %1 @fake.tfm:2:1"},
};

static RtModelInfo fake_info(void) {
  RtModelInfo info = {.abi_version = RT_ABI_VERSION,
                      .name = "fake",
                      .n_syms = 3,
                      .sym_names = {"B", "S", "T"},
                      .sym_max = {4, 6, 5},
                      .n_inputs = 3,
                      .inputs = fake_inputs,
                      .n_outputs = 2,
                      .outputs = fake_outputs,
                      .n_weights = 2,
                      .weights = fake_weights,
                      .weights_floats = 21,
                      .arena_bytes = 1000,
                      .pad_id = 0,
                      .n_kernels = 2,
                      .kernels = fake_kernels};
  info.layout_hash = rt_model_layout_hash(fake_weights, 2);
  return info;
}

static RtModelInfo the_info;
static int last_pool_size = -1, run_count;

/* kernel 0, over the batch rows */
static void fake_rows(void *ctx, int64_t lo, int64_t hi) {
  const RtRunArgs *a = ctx;
  int64_t S = a->syms[SYM_S], T = a->syms[SYM_T];
  const int32_t *src = a->inputs[0], *tgt = a->inputs[2];
  const uint8_t *mask = a->inputs[1];
  for (int64_t b = lo; b < hi; b++) {
    int real = 0;
    for (int64_t s = 0; s < S; s++)
      real += mask[b * S + s];
    for (int64_t t = 0; t < T; t++)
      for (int c = 0; c < 3; c++)
        a->outputs[0][(b * T + t) * 3 + c] =
            (float)(100000 * src[b * S] + 1000 * tgt[b * T + t] + 10 * real + c);
  }
}

/* kernel 1, one iteration */
static void fake_wsum(void *ctx, int64_t lo, int64_t hi) {
  const RtRunArgs *a = ctx;
  (void)lo;
  (void)hi;
  float s = 0;
  for (int i = 0; i < 21; i++)
    s += a->weights[i];
  a->outputs[1][0] = s;
}

static void fake_run(const RtRunArgs *a) {
  run_count++;
  cr_assert_eq((uintptr_t)a->arena % 64, 0, "arena not aligned");
  cr_assert_eq((uintptr_t)a->weights % 64, 0, "weights not aligned");
  memset(a->arena, 0xab, 1000); /* the whole arena is ours */
  last_pool_size = rt_pool_size(a->pool);
  rt_kernel_run(a, 0, fake_rows, (void *)a, a->syms[SYM_B], 1, 1);
  rt_kernel_run(a, 1, fake_wsum, (void *)a, 1, 1, 0);
}

/* ---- files ---- */

static char tmpdir[64];
static float weights_data[21];

static const char *path_in(const char *name) {
  static char buf[64][160]; /* a ring: paths stay valid for 64 calls */
  static int k;
  char *p = buf[k++ % 64];
  snprintf(p, 160, "%s/%s", tmpdir, name);
  return p;
}

static void setup(void) {
  strcpy(tmpdir, "/tmp/tfmc_modelXXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
  the_info = fake_info();
  for (int i = 0; i < 21; i++)
    weights_data[i] = (float)i; /* sum 210 */
  char err[512] = "";
  cr_assert_eq(rt_weights_write(path_in("fake.weights"), &the_info, weights_data, err, sizeof err),
               0, "%s", err);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(model, .init = setup, .fini = teardown);

/* Tensors for an inputs file: NULL data skips a tensor. */
typedef struct Inputs {
  int64_t b, s, t;
  const int64_t *src; /* written as I64 */
  const int32_t *tgt;
  const int32_t *lengths;
  const uint8_t *mask;
  int64_t tgt_b; /* 0: b */
  int extra;     /* add a tensor 'foo' */
} Inputs;

static const char *write_inputs(const char *name, const Inputs *in) {
  RtStWrite w[5];
  int n = 0;
  if (in->src)
    w[n++] = (RtStWrite){"src", RT_I64, 2, {in->b, in->s}, in->src};
  if (in->tgt)
    w[n++] = (RtStWrite){"tgt", RT_I32, 2, {in->tgt_b ? in->tgt_b : in->b, in->t}, in->tgt};
  if (in->lengths)
    w[n++] = (RtStWrite){"src_lengths", RT_I32, 1, {in->b}, in->lengths};
  if (in->mask)
    w[n++] = (RtStWrite){"src_mask", RT_U8, 2, {in->b, in->s}, in->mask};
  static const float foo[1] = {1};
  if (in->extra)
    w[n++] = (RtStWrite){"foo", RT_F32, 1, {1}, foo};
  const char *path = path_in(name);
  char err[512] = "";
  cr_assert_eq(rt_st_write(path, w, n, NULL, 0, err, sizeof err), 0, "%s", err);
  return path;
}

static const int64_t src2x3[] = {1, 2, 3, 4, 5, 0};
static const int32_t tgt2x4[] = {1, 2, 3, 4, 5, 6, 7, 8};

static Inputs good_inputs(void) {
  return (Inputs){.b = 2, .s = 3, .t = 4, .src = src2x3, .tgt = tgt2x4};
}

/* Runs rt_main with stdout and stderr captured into *out / *errtext
 * (static buffers). argv ends at NULL. */
static char out_text[8192], err_text[8192];

static void read_back(int fd, char *buf, size_t n) {
  lseek(fd, 0, SEEK_SET);
  ssize_t k = read(fd, buf, n - 1);
  buf[k > 0 ? k : 0] = '\0';
  close(fd);
}

static int run_main_img(const void *img, size_t img_len, const char **argv) {
  int argc = 0;
  while (argv[argc])
    argc++;
  fflush(stdout);
  fflush(stderr);
  int save_out = dup(1), save_err = dup(2);
  char po[128], pe[128];
  snprintf(po, sizeof po, "%s/stdout", tmpdir);
  snprintf(pe, sizeof pe, "%s/stderr", tmpdir);
  int fo = open(po, O_RDWR | O_CREAT | O_TRUNC, 0600),
      fe = open(pe, O_RDWR | O_CREAT | O_TRUNC, 0600);
  cr_assert(fo >= 0 && fe >= 0);
  dup2(fo, 1);
  dup2(fe, 2);
  int rc = rt_main(argc, (char **)argv, &the_info, fake_run, img, img_len);
  fflush(stdout);
  fflush(stderr);
  dup2(save_out, 1);
  dup2(save_err, 2);
  close(save_out);
  close(save_err);
  read_back(fo, out_text, sizeof out_text);
  read_back(fe, err_text, sizeof err_text);
  return rc;
}

static int run_main(const char **argv) {
  return run_main_img(NULL, 0, argv);
}

/* Runs with the given inputs file and the default weights; expects exit
 * status `want` and, when frag is set, frag in stderr. */
static void expect_main(const char *inputs, const char *weights, int want, const char *frag) {
  const char *argv[] = {"fake",
                        "--inputs",
                        inputs,
                        "--outputs",
                        path_in("out.safetensors"),
                        "--weights",
                        weights ? weights : path_in("fake.weights"),
                        NULL};
  int rc = run_main(argv);
  cr_assert_eq(rc, want, "exit %d, expected %d; stderr: %s", rc, want, err_text);
  if (frag)
    cr_assert(strstr(err_text, frag), "stderr '%s' lacks '%s'", err_text, frag);
  if (want) {
    cr_assert(strncmp(err_text, "fake: ", 6) == 0, "message not prefixed: %s", err_text);
    struct stat sb;
    cr_assert_neq(stat(path_in("out.safetensors"), &sb), 0, "outputs written after a failure");
  }
}

/* Reads the outputs file: out [b,t,3], wsum [1]. */
static float *read_outputs(int64_t b, int64_t t, float *wsum) {
  RtSafetensors *st;
  char err[512] = "";
  cr_assert_eq(rt_st_open(path_in("out.safetensors"), &st, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_count(st), 2);
  const RtStTensor *o = rt_st_find(st, "out"), *w = rt_st_find(st, "wsum");
  cr_assert(o && w);
  cr_assert_eq(o->dtype, RT_F32);
  cr_assert_eq(o->rank, 3);
  cr_assert(o->shape[0] == b && o->shape[1] == t && o->shape[2] == 3, "out shape [%lld,%lld,%lld]",
            (long long)o->shape[0], (long long)o->shape[1], (long long)o->shape[2]);
  float *v = malloc(sizeof(float) * (size_t)(b * t * 3));
  cr_assert_eq(rt_st_read_f32(o, v, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_read_f32(w, wsum, err, sizeof err), 0, "%s", err);
  rt_st_close(st);
  return v;
}

/* Checks out against the formula with the given real-token counts. */
static void check_out(const int64_t *src, int64_t s, const int32_t *tgt, int64_t b, int64_t t,
                      const int *real) {
  float wsum;
  float *v = read_outputs(b, t, &wsum);
  cr_assert_eq(wsum, 210.0f);
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < t; j++)
      for (int c = 0; c < 3; c++) {
        float want = (float)(100000 * src[i * s] + 1000 * tgt[i * t + j] + 10 * real[i] + c);
        cr_assert_eq(v[(i * t + j) * 3 + c], want, "out[%lld,%lld,%d] = %g, want %g", (long long)i,
                     (long long)j, c, v[(i * t + j) * 3 + c], want);
      }
  free(v);
}

/* ---- happy paths ---- */

Test(model, runs_with_lengths) {
  Inputs in = good_inputs();
  const int32_t lengths[] = {3, 1};
  in.lengths = lengths;
  expect_main(write_inputs("in.safetensors", &in), NULL, 0, NULL);
  cr_assert_eq(err_text[0], '\0', "stderr: %s", err_text);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 1});
  cr_assert_eq(run_count, 1);
}

Test(model, mask_from_pad_ids_and_explicit_mask) {
  Inputs in = good_inputs();
  expect_main(write_inputs("in.safetensors", &in), NULL, 0, NULL);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 2}); /* pad id 0 in row 1 */
  unlink(path_in("out.safetensors"));
  const uint8_t mask[] = {1, 0, 1, 0, 0, 1};
  in.mask = mask;
  expect_main(write_inputs("in2.safetensors", &in), NULL, 0, NULL);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){2, 1});
}

Test(model, thread_counts_agree) {
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  const char *counts[] = {"1", "2", "3"};
  for (int i = 0; i < 3; i++) {
    const char *argv[] = {"fake",
                          "--inputs",
                          inputs,
                          "--outputs",
                          path_in("out.safetensors"),
                          "--weights",
                          path_in("fake.weights"),
                          "--threads",
                          counts[i],
                          NULL};
    cr_assert_eq(run_main(argv), 0, "%s", err_text);
    cr_assert_eq(last_pool_size, i + 1);
    check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 2});
  }
  /* the --opt=value form */
  char a1[200], a2[200], a3[200];
  snprintf(a1, sizeof a1, "--inputs=%s", inputs);
  snprintf(a2, sizeof a2, "--outputs=%s", path_in("out.safetensors"));
  snprintf(a3, sizeof a3, "--weights=%s", path_in("fake.weights"));
  const char *argv2[] = {"fake", a1, a2, a3, "--threads=2", NULL};
  cr_assert_eq(run_main(argv2), 0, "%s", err_text);
  cr_assert_eq(last_pool_size, 2);
}

/* --profile: after the timed runs, as many again with every kernel timed;
 * the report names the model's kernels and op kinds; the outputs are those
 * of a run without it, and stdout stays empty. */
Test(model, profile_reports_every_kernel_outputs_unchanged) {
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  const char *argv[] = {"fake",      "--inputs",  inputs,     "--outputs", path_in("out.safetensors"),
                        "--weights", path_in("fake.weights"), "--threads", "2",
                        "--repeat",  "3",         "--profile", NULL};
  cr_assert_eq(run_main(argv), 0, "%s", err_text);
  cr_assert_eq(run_count, 1 + 3 + 3, "runs: %d", run_count);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 2});
  cr_assert_eq(out_text[0], '\0', "stdout: %s", out_text);
  const char *timing = strstr(err_text, "timing: backend executable"),
             *profile = strstr(err_text, "profile: ");
  cr_assert(timing && profile && timing < profile, "timing line, then the report:\n%s", err_text);
  ProfReport r;
  prof_parse(err_text, &r);
  prof_check(&r);
  cr_assert_eq(r.n_kernels, 2, "%s", err_text);
  cr_assert_eq(r.runs, 3, "%s", err_text);
  cr_assert_eq(r.n_kinds, 2, "%s", err_text);
  cr_assert(prof_kind(&r, "fake.rows") && prof_kind(&r, "fake.rows")->kernels == 1, "%s", err_text);
  cr_assert(prof_kind(&r, "fake.sum") && prof_kind(&r, "fake.sum")->kernels == 1, "%s", err_text);
  cr_assert_eq(r.n_slow, 2);
  for (int i = 0; i < 2; i++) {
    int k = strcmp(r.slow[i].name, "k0_rows") == 0 ? 0 : 1;
    cr_assert_str_eq(r.slow[i].name, fake_kernels[k].name);
    cr_assert_str_eq(r.slow[i].comment, fake_kernels[k].comment);
  }
  /* without --repeat: one profiled run after the first */
  run_count = 0;
  const char *argv1[] = {"fake",      "--inputs",  inputs, "--outputs", path_in("out.safetensors"),
                         "--weights", path_in("fake.weights"), "--profile", NULL};
  cr_assert_eq(run_main(argv1), 0, "%s", err_text);
  cr_assert_eq(run_count, 2);
  cr_assert_null(strstr(err_text, "timing:"), "%s", err_text);
  prof_parse(err_text, &r);
  prof_check(&r);
  cr_assert_eq(r.runs, 1);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 2});
}

Test(model, profile_refusals) {
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  const char *argv[] = {"fake", "--inputs", inputs, "--outputs", path_in("out.safetensors"),
                        "--weights", path_in("fake.weights"), "--profile=yes", NULL};
  cr_assert_eq(run_main(argv), 2, "%s", err_text);
  cr_assert(strstr(err_text, "option '--profile' takes no value"), "%s", err_text);
  /* a model without a kernel table cannot be profiled: said before any run */
  the_info.n_kernels = 0;
  the_info.kernels = NULL;
  argv[7] = "--profile";
  cr_assert_eq(run_main(argv), 1, "%s", err_text);
  cr_assert(strstr(err_text, "fake: --profile: model 'fake' carries no kernel table"), "%s",
            err_text);
  cr_assert_eq(run_count, 0);
  struct stat sb;
  cr_assert_neq(stat(path_in("out.safetensors"), &sb), 0, "outputs written after a refusal");
  /* --help documents it */
  cr_assert_eq(run_main((const char *[]){"fake", "--help", NULL}), 0);
  cr_assert(strstr(out_text, "[--repeat N] [--profile]") && strstr(out_text, "  --profile "),
            "%s", out_text);
}

Test(model, embedded_weights) {
  FILE *f = fopen(path_in("fake.weights"), "rb");
  cr_assert_not_null(f);
  unsigned char img[256];
  size_t len = fread(img, 1, sizeof img, f);
  fclose(f);
  cr_assert_eq(len, 64 + 21 * 4);
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  const char *argv[] = {"fake", "--inputs", inputs, "--outputs", path_in("out.safetensors"), NULL};
  cr_assert_eq(run_main_img(img, len, argv), 0, "%s", err_text);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 2});
  const char *argv2[] = {"fake",
                         "--inputs",
                         inputs,
                         "--outputs",
                         path_in("out.safetensors"),
                         "--weights",
                         path_in("fake.weights"),
                         NULL};
  cr_assert_eq(run_main_img(img, len, argv2), 2);
  cr_assert(strstr(err_text, "embeds its weights"), "%s", err_text);
  /* a damaged embedded image is refused like a file */
  img[100] ^= 1;
  cr_assert_eq(run_main_img(img, len, argv), 1);
  cr_assert(strstr(err_text, "embedded weights: checksum mismatch"), "%s", err_text);
}

Test(model, default_weights_next_to_the_executable) {
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  const char *exe = path_in("fake"); /* argv[0]; fake.weights lies next to it */
  const char *argv[] = {exe, "--inputs", inputs, "--outputs", path_in("out.safetensors"), NULL};
  cr_assert_eq(run_main(argv), 0, "%s", err_text);
  check_out(src2x3, 3, tgt2x4, 2, 4, (const int[]){3, 2});
  const char *argv2[] = {path_in("other"),           "--inputs", inputs, "--outputs",
                         path_in("out.safetensors"), NULL};
  cr_assert_eq(run_main(argv2), 1);
  cr_assert(strstr(err_text, "other: ") && strstr(err_text, "cannot open weights"), "%s", err_text);
}

/* ---- refusals of inputs ---- */

Test(model, refuses_ids_out_of_range) {
  Inputs in = good_inputs();
  const int64_t bad[] = {1, 2, 3, 4, 10, 0};
  in.src = bad;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1, "token ids must be in [0, 10)");
  const int64_t neg[] = {1, 2, 3, 4, -1, 0};
  in.src = neg;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1, "token ids must be in [0, 10)");
  in = good_inputs();
  const int32_t badt[] = {1, 2, 3, 4, 5, 6, 7, 12};
  in.tgt = badt;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1, "token ids must be in [0, 12)");
}

Test(model, refuses_batch_over_max) {
  int64_t src[5 * 3];
  int32_t tgt[5 * 4];
  for (int i = 0; i < 15; i++)
    src[i] = 1;
  for (int i = 0; i < 20; i++)
    tgt[i] = 1;
  Inputs in = {.b = 5, .s = 3, .t = 4, .src = src, .tgt = tgt};
  expect_main(write_inputs("in.safetensors", &in), NULL, 1,
              "input 'src' has batch 5; the model accepts 1..4");
  in = (Inputs){.b = 1, .s = 7, .t = 4, .src = src, .tgt = tgt};
  expect_main(write_inputs("in.safetensors", &in), NULL, 1,
              "input 'src' has length 7; the model accepts 1..6");
}

Test(model, refuses_inconsistent_dims) {
  int32_t tgt[3 * 4];
  for (int i = 0; i < 12; i++)
    tgt[i] = 2;
  Inputs in = good_inputs();
  in.tgt = tgt;
  in.tgt_b = 3;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1,
              "input 'tgt' dim 0 is 3 but B is 2 (from 'src')");
  /* a mask whose shape differs from its ids */
  const uint8_t mask[] = {1, 1, 1, 1};
  RtStWrite w[3] = {{"src", RT_I64, 2, {2, 3}, src2x3},
                    {"tgt", RT_I32, 2, {2, 4}, tgt2x4},
                    {"src_mask", RT_U8, 2, {2, 2}, mask}};
  char err[512];
  cr_assert_eq(rt_st_write(path_in("in2.safetensors"), w, 3, NULL, 0, err, sizeof err), 0);
  expect_main(path_in("in2.safetensors"), NULL, 1,
              "input 'src_mask' has shape [2,2]; expected [2,3] like the token ids");
}

Test(model, refuses_missing_input) {
  Inputs in = good_inputs();
  in.tgt = NULL;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1, "missing input 'tgt'");
}

Test(model, refuses_unexpected_input) {
  Inputs in = good_inputs();
  in.extra = 1;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1,
              "unexpected input 'foo'; model 'fake' takes: src, src_mask, src_lengths, tgt");
}

Test(model, refuses_bad_masks) {
  Inputs in = good_inputs();
  const int32_t lengths[] = {3, 2};
  const uint8_t mask[] = {1, 1, 1, 1, 1, 0};
  in.lengths = lengths;
  in.mask = mask;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1,
              "give either 'src_mask' or 'src_lengths', not both");
  in = good_inputs();
  const int32_t zero[] = {3, 0};
  in.lengths = zero;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1, "lengths must be in [1, 3]");
  in = good_inputs();
  const int64_t pads[] = {1, 2, 3, 0, 0, 0};
  in.src = pads;
  expect_main(write_inputs("in.safetensors", &in), NULL, 1, "sequence 1 has no real token");
}

Test(model, refuses_unreadable_inputs_file) {
  expect_main(path_in("missing.safetensors"), NULL, 1, "cannot open");
  FILE *f = fopen(path_in("junk.safetensors"), "wb");
  fputs("not a safetensors file at all", f);
  fclose(f);
  expect_main(path_in("junk.safetensors"), NULL, 1, "junk.safetensors: ");
}

/* ---- refusals of weights ---- */

Test(model, refuses_another_models_weights) {
  RtWeightInfo other[2] = {fake_weights[0], fake_weights[1]};
  other[0].shape[0] = 4;
  other[0].shape[1] = 3;
  RtModelInfo oi = fake_info();
  oi.name = "other";
  oi.weights = other;
  oi.layout_hash = rt_model_layout_hash(other, 2);
  char err[512] = "";
  cr_assert_eq(rt_weights_write(path_in("other.weights"), &oi, weights_data, err, sizeof err), 0);
  Inputs in = good_inputs();
  expect_main(write_inputs("in.safetensors", &in), path_in("other.weights"), 1,
              "was packed for another model");
}

static void damaged_weights(const char *name, long keep, long flip_at) {
  FILE *f = fopen(path_in("fake.weights"), "rb");
  unsigned char buf[256];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  if (keep >= 0)
    n = (size_t)keep;
  if (flip_at >= 0)
    buf[flip_at] ^= 0x04;
  f = fopen(path_in(name), "wb");
  fwrite(buf, 1, n, f);
  fclose(f);
}

Test(model, refuses_truncated_weights) {
  damaged_weights("cut.weights", 100, -1);
  Inputs in = good_inputs();
  expect_main(write_inputs("in.safetensors", &in), path_in("cut.weights"), 1,
              "cut.weights: truncated: 100 bytes, expected 148");
}

Test(model, refuses_corrupt_weights) {
  damaged_weights("bad.weights", -1, 64 + 4 * 7 + 1);
  Inputs in = good_inputs();
  expect_main(write_inputs("in.safetensors", &in), path_in("bad.weights"), 1,
              "bad.weights: checksum mismatch: the file is corrupt");
}

/* ---- usage ---- */

static void expect_usage(const char **argv, const char *frag) {
  int rc = run_main(argv);
  cr_assert_eq(rc, 2, "exit %d for usage error '%s'; stderr %s", rc, frag, err_text);
  cr_assert(strstr(err_text, frag), "stderr '%s' lacks '%s'", err_text, frag);
  cr_assert(strstr(err_text, "(see 'fake --help')"), "%s", err_text);
}

Test(model, usage_errors) {
  const char *o = path_in("out.safetensors");
  expect_usage((const char *[]){"fake", NULL}, "missing --inputs FILE");
  expect_usage((const char *[]){"fake", "--inputs", "x", "--tokens", "1", NULL},
               "give exactly one of --inputs, --tokens and --text");
  expect_usage((const char *[]){"fake", "--text", "a", NULL}, "--text needs --vocab");
  expect_usage((const char *[]){"fake", "--tokens=", NULL}, "has an empty value");
  expect_usage((const char *[]){"fake", "--input", "x", NULL}, "unknown option '--input'");
  expect_usage((const char *[]){"fake", "--inputs", NULL}, "option '--inputs' needs a value");
  expect_usage((const char *[]){"fake", "--inputs", "a", "--inputs", "b", NULL},
               "option '--inputs' given twice");
  expect_usage((const char *[]){"fake", "stray", NULL}, "unexpected argument 'stray'");
  expect_usage((const char *[]){"fake", "--inputs=", NULL}, "has an empty value");
  const char *bad_threads[] = {"257", "abc", "-1", "2x", " 2", "99999999999999999999"};
  for (int i = 0; i < (int)(sizeof bad_threads / sizeof *bad_threads); i++)
    expect_usage((const char *[]){"fake", "--inputs", "a", "--outputs", o, "--threads",
                                  bad_threads[i], NULL},
                 "--threads takes an integer in 0..256 (0: one per CPU)");
}

/* --outputs is optional: without it the outputs are summarised on stdout;
 * --tokens / --text need a model with one ids input 'tokens' */
Test(model, summary_without_outputs_and_one_sequence_refused) {
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  int rc = run_main((const char *[]){"fake", "--inputs", inputs, "--weights",
                                     path_in("fake.weights"), NULL});
  cr_assert_eq(rc, 0, "%s", err_text);
  cr_assert(strstr(out_text, "out [2,4,3]: mean ") && strstr(out_text, "wsum [1]: mean 210"),
            "%s", out_text);
  struct stat sb;
  cr_assert_neq(stat(path_in("out.safetensors"), &sb), 0, "an outputs file was written");
  rc = run_main((const char *[]){"fake", "--tokens", "1 2", "--weights", path_in("fake.weights"),
                                 NULL});
  cr_assert_eq(rc, 1, "%s", err_text);
  cr_assert(strstr(err_text, "fake: --tokens/--text give one sequence; model 'fake' is an "
                             "encoder_decoder and needs src and tgt (use --inputs)"),
            "%s", err_text);
  cr_assert_eq(run_count, 1, "the model ran for a refused sequence");
}

Test(model, help_and_version) {
  int rc = run_main((const char *[]){"fake", "--help", NULL});
  cr_assert_eq(rc, 0);
  const char *want[] = {"usage: fake --inputs",
                        "model 'fake'",
                        "src            [B,S]  token ids in [0, 10)",
                        "src_mask       [B,S]  optional padding mask of 'src'",
                        "src_lengths [B]",
                        "default: ids != pad id 0",
                        "tgt            [B,T]  token ids in [0, 12)",
                        "out            [B,T,3]",
                        "wsum           [1]",
                        "Dimensions: B <= 4, S <= 6, T <= 5",
                        "--threads N",
                        "fake.weights next to the executable",
                        "Exit status: 0 success, 1 bad inputs or weights, 2 bad usage"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    cr_assert(strstr(out_text, want[i]), "--help lacks '%s':\n%s", want[i], out_text);
  /* src and tgt: --tokens / --text cannot give them, so --help does not
   * offer them (the executable would refuse them) */
  cr_assert_null(strstr(out_text, "--tokens"), "%s", out_text);
  cr_assert_null(strstr(out_text, "--text"), "%s", out_text);
  cr_assert(strstr(out_text, "come as a safetensors file (--inputs)"), "%s", out_text);
  /* --help wins over other mistakes */
  cr_assert_eq(run_main((const char *[]){"fake", "--bogus", "-h", NULL}), 0);
  cr_assert(strstr(out_text, "usage: fake"));
  rc = run_main((const char *[]){"fake", "--version", NULL});
  cr_assert_eq(rc, 0);
  char abi[32];
  snprintf(abi, sizeof abi, "runtime ABI %d;", RT_ABI_VERSION);
  cr_assert(strstr(out_text, "model 'fake'") && strstr(out_text, abi), "%s", out_text);
  cr_assert_eq(run_count, 0, "the model ran for --help/--version");
}

Test(model, refuses_outputs_equal_to_an_input) {
  Inputs in = good_inputs();
  const char *inputs = write_inputs("in.safetensors", &in);
  struct stat before, after;
  cr_assert_eq(stat(inputs, &before), 0);
  char other_spelling[200];
  snprintf(other_spelling, sizeof other_spelling, "%s/../%s/in.safetensors", tmpdir,
           strrchr(tmpdir, '/') + 1);
  const char *outs[] = {inputs, other_spelling, path_in("fake.weights")};
  for (int i = 0; i < 3; i++) {
    const char *argv[] = {
        "fake", "--inputs", inputs, "--outputs", outs[i], "--weights", path_in("fake.weights"),
        NULL};
    cr_assert_eq(run_main(argv), 1);
    cr_assert(strstr(err_text, "is one of the input files; refusing to overwrite it"), "%s",
              err_text);
  }
  cr_assert_eq(stat(inputs, &after), 0);
  cr_assert_eq(before.st_size, after.st_size);
  cr_assert_eq(run_count, 0);
}

Test(model, reports_unwritable_outputs) {
  Inputs in = good_inputs();
  const char *argv[] = {"fake",
                        "--inputs",
                        write_inputs("in.safetensors", &in),
                        "--outputs",
                        "/nonexistent-dir-tfmc/out.safetensors",
                        "--weights",
                        path_in("fake.weights"),
                        NULL};
  cr_assert_eq(run_main(argv), 1);
  cr_assert(strstr(err_text, "/nonexistent-dir-tfmc/out.safetensors"), "%s", err_text);
}

/* ---- rt_model_bind directly ---- */

static RtSafetensors *open_inputs(const Inputs *in) {
  RtSafetensors *st;
  char err[512] = "";
  cr_assert_eq(rt_st_open(write_inputs("direct.safetensors", in), &st, err, sizeof err), 0, "%s",
               err);
  return st;
}

Test(model, bind_sets_dims_and_sizes) {
  Inputs in = good_inputs();
  RtSafetensors *st = open_inputs(&in);
  RtBound b;
  char err[512] = "";
  cr_assert_eq(rt_model_bind(&the_info, st, "in", &b, err, sizeof err), 0, "%s", err);
  cr_assert(b.syms[SYM_B] == 2 && b.syms[SYM_S] == 3 && b.syms[SYM_T] == 4);
  cr_assert(b.output_dims[0][0] == 2 && b.output_dims[0][1] == 4 && b.output_dims[0][2] == 3);
  cr_assert_eq(b.output_dims[1][0], 1);
  const int32_t *src = b.inputs[0];
  const uint8_t *mask = b.inputs[1];
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(src[i], (int32_t)src2x3[i]);
    cr_assert_eq(mask[i], src2x3[i] != 0);
  }
  cr_assert_eq(rt_model_dim(&fake_outputs[0].dims[2], b.syms), 3);
  cr_assert_eq(rt_model_dim(&fake_outputs[0].dims[1], b.syms), 4);
  /* outputs round-trip through rt_model_write_outputs */
  for (int i = 0; i < 24; i++)
    b.outputs[0][i] = (float)i * 0.5f;
  b.outputs[1][0] = -3;
  cr_assert_eq(rt_model_write_outputs(&the_info, &b, path_in("out.safetensors"), err, sizeof err),
               0, "%s", err);
  float wsum;
  float *v = read_outputs(2, 4, &wsum);
  cr_assert_eq(wsum, -3.0f);
  for (int i = 0; i < 24; i++)
    cr_assert_eq(v[i], (float)i * 0.5f);
  free(v);
  rt_model_unbind(&the_info, &b);
  for (int i = 0; i < RT_MAX_IO; i++)
    cr_assert(!b.inputs[i] && !b.outputs[i]);
  rt_st_close(st);
}

Test(model, bind_refuses_malformed_info) {
  Inputs in = good_inputs();
  RtSafetensors *st = open_inputs(&in);
  RtBound b;
  char err[512] = "";
  RtModelInfo info = fake_info();
  info.abi_version = 99;
  cr_assert_neq(rt_model_bind(&info, st, "in", &b, err, sizeof err), 0);
  cr_assert(strstr(err, "compiled for runtime ABI 99"), "%s", err);

  RtTensorInfo outs[2] = {fake_outputs[0], fake_outputs[1]};
  outs[0].dims[2] = (RtDim){7, 0}; /* no such symbol */
  info = fake_info();
  info.outputs = outs;
  cr_assert_neq(rt_model_bind(&info, st, "in", &b, err, sizeof err), 0);
  cr_assert(strstr(err, "model info: output 'out' dim 2 is malformed"), "%s", err);
  for (int i = 0; i < RT_MAX_IO; i++)
    cr_assert(!b.inputs[i] && !b.outputs[i]);

  RtTensorInfo ins[3] = {fake_inputs[0], fake_inputs[1], fake_inputs[2]};
  ins[1].ids_input = "nothing";
  info = fake_info();
  info.inputs = ins;
  cr_assert_neq(rt_model_bind(&info, st, "in", &b, err, sizeof err), 0);
  cr_assert(strstr(err, "mask input 'src_mask' is malformed"), "%s", err);
  rt_st_close(st);
}

Test(model, bind_checks_constant_dims) {
  RtTensorInfo ins[3] = {fake_inputs[0], fake_inputs[1], fake_inputs[2]};
  ins[2].dims[1] = (RtDim){-1, 5}; /* tgt must be exactly 5 long */
  RtModelInfo info = fake_info();
  info.inputs = ins;
  RtTensorInfo outs[2] = {fake_outputs[0], fake_outputs[1]};
  outs[0].dims[1] = (RtDim){-1, 5};
  info.outputs = outs;
  Inputs in = good_inputs();
  RtSafetensors *st = open_inputs(&in);
  RtBound b;
  char err[512] = "";
  cr_assert_neq(rt_model_bind(&info, st, "in", &b, err, sizeof err), 0);
  cr_assert(strstr(err, "in: input 'tgt' dim 1 is 4; the model takes exactly 5"), "%s", err);
  rt_st_close(st);
}
