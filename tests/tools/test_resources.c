/* tests/tools/test_resources.c — tfmc on models too big for the machine
 * and on checkpoints with NaN / Inf: a message and exit status 1, never an
 * abort (134) or a kill (137); non-finite weights are named with their
 * count, a warning by default and an error under --strict.
 *
 * Each test works in a fresh temporary directory with the built tfmc,
 * through the shell. */
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#define SORT TFMC_SOURCE_DIR "/examples/sort"
#define ADD TFMC_SOURCE_DIR "/examples/add"
#define TFMC TFMC_BINARY_DIR "/tfmc"

static char dir[256];
static char err_text[65536];

static int sh(const char *c) {
  char cmd[4400], p[512];
  snprintf(cmd, sizeof cmd, "cd %s && (%s) >/dev/null 2>stderr.txt", dir, c);
  int st = system(cmd);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  FILE *f = fopen(p, "r");
  size_t k = f ? fread(err_text, 1, sizeof err_text - 1, f) : 0;
  err_text[k] = 0;
  if (f) fclose(f);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static void put(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_resources_XXXXXX");
  cr_assert(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(resources, .init = setup, .fini = teardown, .timeout = 300);

#define EXPECT_ERR(status, fragment)                                                     \
  do {                                                                                   \
    int st_ = (status);                                                                  \
    cr_assert_eq(st_, 1, "exit %d, stderr: %s", st_, err_text);                          \
    cr_assert(strstr(err_text, fragment), "stderr lacks '%s':\n%s", fragment, err_text); \
  } while (0)

static const char *spec_fmt = "model big {\n"
                              "  arch decoder\n"
                              "  vocab 50000\n"
                              "  d_model %d\n"
                              "  heads 8\n"
                              "  layers %d\n"
                              "  ffn %d gelu\n"
                              "  position learned max 1024\n"
                              "  head logits\n"
                              "}\n";

/* A 2 GB address space. ASan reserves terabytes of shadow memory at start,
 * so under it the limit is its allocator's instead (a failed allocation
 * returns NULL, as it does under ulimit). */
#ifdef TFMC_SANITIZE_BUILD
static const char *address_space_limit =
    "export ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=2000";
#else
static const char *address_space_limit = "ulimit -v 2000000";
#endif

/* Weights of 41 TB (more than any test machine) and of 9.8 GB (more than a
 * 2 GB address space): refused with the size, on every command that makes
 * weights. */
Test(resources, weights_too_big_are_a_message) {
  char text[512];
  snprintf(text, sizeof text, spec_fmt, 65536, 200, 262144);
  put("huge.tfm", text);
  snprintf(text, sizeof text, spec_fmt, 8192, 2, 32768);
  put("mid.tfm", text);
  cr_assert_eq(sh(TFMC " check huge.tfm"), 0, "%s", err_text);
  const char *cmds[] = {TFMC " run %s --init random --tokens '1 2 3'",
                        TFMC " build %s --init random -o exe",
                        TFMC " emit-c %s --init random -o proj"};
  for (int i = 0; i < 3; i++)
    for (int m = 0; m < 2; m++) {
      char c[600];
      snprintf(c, sizeof c, "%s; ", address_space_limit);
      snprintf(c + strlen(c), sizeof c - strlen(c), cmds[i], m ? "mid.tfm" : "huge.tfm");
      EXPECT_ERR(sh(c), "bytes");
      cr_assert(strstr(err_text, m ? "9753857344" : "41258850651456"), "%s", err_text);
    }
  cr_assert_neq(sh("ls exe* proj"), 0, "a refused build left outputs");
}

/* The sort model with maxima of 256 sequences of 200000 tokens: its arena,
 * planned at the maximum dims, is 65.5 GB at -O2 (the embedding sum one
 * fused loop nest; 78.6 GB unfused), more than the machine has. A
 * 3-token run commits only what its dims touch, through the JIT and an
 * executable; without the address space to reserve the plan, the refusal
 * names the size. */
Test(resources, arena_follows_the_run_s_dims) {
  put("wide.tfm", "model wide {\n  arch encoder\n  vocab 11\n  d_model 64\n  heads 4\n"
                  "  layers 2\n  ffn 128 relu\n  norm pre eps 1e-5\n  final_norm yes\n"
                  "  position learned max 200000\n  tokens pad 0\n  mask encoder padding\n"
                  "  head logits\n  max_batch 256\n}\n");
  /* the plan's size (it depends on what the passes fuse): tens of GB */
  cr_assert_eq(sh(TFMC " check wide.tfm > check.txt"), 0, "%s", err_text);
  char path[512], check[8192], want[64];
  snprintf(path, sizeof path, "%s/check.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert(f);
  size_t k = fread(check, 1, sizeof check - 1, f);
  check[k] = 0;
  fclose(f);
  const char *at = strstr(check, "  arena ");
  cr_assert(at, "%s", check);
  long long plan = strtoll(at + 8, NULL, 10);
  cr_assert_gt(plan, 48LL << 30, "the plan is not the one this test is about:\n%s", check);
  snprintf(want, sizeof want, "%lld-byte activation arena", plan);
  cr_assert_eq(sh(TFMC " run wide.tfm --init random --tokens '1 2 3'"), 0, "%s", err_text);
  cr_assert_eq(sh(TFMC " build wide.tfm --init random -o exe && ./exe --tokens '1 2 3 4'"), 0,
               "%s", err_text);
#ifndef TFMC_SANITIZE_BUILD
  /* what the runs used: the weights (51 MB), LLVM, and a few pages per buffer */
  struct rusage ru;
  cr_assert_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
  cr_assert_lt(ru.ru_maxrss, 1500 * 1024L, "a child's peak RSS was %ld KB", ru.ru_maxrss);
  EXPECT_ERR(sh("ulimit -v 2000000; " TFMC " run wide.tfm --init random --tokens '1 2 3'"),
             want);
  cr_assert(strstr(err_text, "address space"), "%s", err_text);
  EXPECT_ERR(sh("ulimit -v 2000000; ./exe --tokens '1 2 3'"), want);
#endif
  /* A run at the maximum dims (256 x 200000 tokens, as u8 ids) needs the
   * whole plan: more than this machine's RAM and swap, so it is refused
   * before any work, where the system would have let the blocks be
   * committed and then killed the process (an OOM kill 2.5 minutes into
   * such a run was seen here). */
  struct sysinfo si;
  cr_assert_eq(sysinfo(&si), 0);
  long long have = ((long long)si.totalram + (long long)si.totalswap) * si.mem_unit;
  if (have >= plan)
    cr_skip_test("this machine has %lld bytes of RAM and swap, more than the plan", have);
  uint8_t *ids = malloc((size_t)256 * 200000);
  cr_assert(ids);
  for (size_t i = 0; i < (size_t)256 * 200000; i++) ids[i] = (uint8_t)(1 + i % 10);
  RtStWrite t = {"tokens", RT_U8, 2, {256, 200000}, ids};
  char in[512], err[512];
  snprintf(in, sizeof in, "%s/big.safetensors", dir);
  cr_assert_eq(rt_st_write(in, &t, 1, NULL, 0, err, sizeof err), 0, "%s", err);
  free(ids);
  char more[256];
  snprintf(more, sizeof more, "cannot have the memory this run needs: %lld bytes of activations at "
           "these dims, more than this machine has (%lld bytes", plan, have);
  EXPECT_ERR(sh(TFMC " run wide.tfm --init random --inputs big.safetensors"), more);
  EXPECT_ERR(sh("./exe --inputs big.safetensors --outputs out.safetensors"), more);
  cr_assert_neq(sh("ls out.safetensors"), 0, "a refused run wrote its outputs");
}

/* The checkpoint of the example in model_dir with NaN and Inf written
 * into its first two matrices whose names lack `spare` (NULL: any), as
 * bad.safetensors; float tensors are written as f32, others as they are. */
static void poisoned_checkpoint(const char *model_dir, const char *spare) {
  RtSafetensors *st;
  char err[1024], path[512];
  snprintf(path, sizeof path, "%s/weights.safetensors", model_dir);
  cr_assert_eq(rt_st_open(path, &st, err, sizeof err), 0, "%s", err);
  int n = rt_st_count(st);
  RtStWrite *w = calloc((size_t)n, sizeof *w);
  float **data = calloc((size_t)n, sizeof *data);
  int poisoned = 0;
  for (int i = 0; i < n; i++) {
    const RtStTensor *t = rt_st_get(st, i);
    int64_t numel = rt_st_numel(t);
    data[i] = malloc((size_t)numel * sizeof(float) + 4);
    int is_float = t->dtype == RT_F32 || t->dtype == RT_F16 || t->dtype == RT_BF16 ||
                   t->dtype == RT_F64;
    if (is_float)
      cr_assert_eq(rt_st_read_f32(t, data[i], err, sizeof err), 0, "%s", err);
    else /* the mask buffers GPT-2 checkpoints carry: bytes, kept */
      cr_assert(rt_dtype_size(t->dtype) == 1, "%s", t->name);
    w[i] = (RtStWrite){t->name, is_float ? RT_F32 : t->dtype, t->rank, {0},
                       is_float ? (const void *)data[i] : t->data};
    memcpy(w[i].shape, t->shape, sizeof t->shape);
    if (is_float && t->rank == 2 && poisoned < 2 && !(spare && strstr(t->name, spare))) {
      data[i][0] = poisoned ? INFINITY : NAN;
      if (!poisoned) data[i][numel - 1] = -INFINITY;
      poisoned++;
    }
  }
  cr_assert_eq(poisoned, 2);
  snprintf(path, sizeof path, "%s/bad.safetensors", dir);
  cr_assert_eq(rt_st_write(path, w, n, NULL, 0, err, sizeof err), 0, "%s", err);
  rt_st_close(st);
  for (int i = 0; i < n; i++) free(data[i]);
  free(data);
  free(w);
}

Test(resources, nonfinite_weights_warned_or_refused) {
  poisoned_checkpoint(SORT, NULL);
  cr_assert_eq(sh(TFMC " run " SORT "/model.tfm --weights bad.safetensors --tokens '3 1 2'"), 0,
               "%s", err_text);
  cr_assert(strstr(err_text, "warning: weight '"), "%s", err_text);
  cr_assert(strstr(err_text, "has 2 NaN or Inf values"), "%s", err_text);
  cr_assert(strstr(err_text, "has 1 NaN or Inf value ("), "%s", err_text);
  const char *strict[] = {
      TFMC " run " SORT "/model.tfm --weights bad.safetensors --tokens '3 1 2' --strict",
      TFMC " build " SORT "/model.tfm --weights bad.safetensors -o exe --strict",
      TFMC " emit-c " SORT "/model.tfm --weights bad.safetensors -o proj --strict"};
  for (int i = 0; i < 3; i++) {
    EXPECT_ERR(sh(strict[i]), "error: weight '");
    cr_assert(strstr(err_text, "--strict"), "%s", err_text);
  }
  cr_assert_neq(sh("ls exe* proj"), 0, "a refused build left outputs");
  /* a clean checkpoint says nothing under --strict */
  cr_assert_eq(sh(TFMC " run " SORT "/model.tfm --weights " SORT
                       "/weights.safetensors --tokens '3 1 2' --strict"),
               0, "%s", err_text);
  cr_assert(!strstr(err_text, "NaN"), "%s", err_text);
}

/* A generating spec's build compiles the forward and the generation
 * programs on one read of the checkpoint: each poisoned weight is named
 * once. */
Test(resources, nonfinite_weights_warned_once_by_a_generating_build) {
  poisoned_checkpoint(ADD, "lm_head"); /* a copy of the tied embedding */
  cr_assert_eq(sh(TFMC " build " ADD "/model.tfm --weights bad.safetensors -o exe"), 0, "%s",
               err_text);
  /* c_attn's first and last values land in q and v, c_proj's first in o */
  int warnings = 0;
  for (const char *at = err_text; (at = strstr(at, "warning: weight '")); at++) warnings++;
  cr_assert_eq(warnings, 3, "%s", err_text);
  static const char *const named[] = {"'dec.0.attn.q.weight' has 1 NaN or Inf value",
                                      "'dec.0.attn.v.weight' has 1 NaN or Inf value",
                                      "'dec.0.attn.o.weight' has 1 NaN or Inf value"};
  for (int i = 0; i < 3; i++) cr_assert(strstr(err_text, named[i]), "%s", err_text);
  cr_assert(strstr(err_text, "it generates"), "%s", err_text);
}
