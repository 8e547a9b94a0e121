/* tests/e2e/test_bench.c — tfmc bench end to end on a tiny classifier with
 * one round: a row per pass of the level's pipeline (whatever passes it
 * holds: the names come from pass_pipeline_level, not from this file), in
 * the table and in the JSON, with sane fields (counts >= 0, times > 0);
 * prune-rows, where the level has it, saves bytes on a classifier, and the
 * fusion passes remove kernels and bytes (static counts, not timings); and bad input is refused with a message. No test
 * here asserts anything about speed. */
#include "passes/passes.h"
#include "runtime/rt_json.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];
static char out_text[65536], err_text[65536];

static const char *spec_text =
    "model cls {\n"
    "  arch encoder\n"
    "  vocab 50\n"
    "  d_model 16\n"
    "  heads 2\n"
    "  layers 2\n"
    "  ffn 32 gelu\n"
    "  position learned max 12\n"
    "  tokens pad 0\n"
    "  mask encoder padding\n"
    "  head classifier 3\n"
    "  max_batch 4\n"
    "}\n";

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f) fclose(f);
}

static int tfmc(const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && %s/tfmc %s >stdout.txt 2>stderr.txt", dir,
           TFMC_BINARY_DIR, args);
  int st = system(cmd);
  char p[512];
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  slurp(p, out_text, sizeof out_text);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  slurp(p, err_text, sizeof err_text);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_bench_XXXXXX");
  cr_assert(mkdtemp(dir));
  char p[512];
  snprintf(p, sizeof p, "%s/cls.tfm", dir);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs(spec_text, f);
  fclose(f);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(bench, .init = setup, .fini = teardown);

typedef struct Row {
  char pass[64];
  double kernels_removed, bytes_not_written, ms_with, ms_without, ratio;
} Row;

typedef struct Report {
  char pipeline[16][64];
  int n_pipeline;
  double kernels_full, kernels_o0;
  Row rows[16];
  int n_rows;
  bool have_all;
} Report;

static double number(RtJsonReader *r) {
  RtJsonNumber n;
  cr_assert_eq(rt_json_read_number(r, &n), 0, "%s", r->msg);
  char buf[64];
  snprintf(buf, sizeof buf, "%.*s", (int)n.len, n.text);
  return strtod(buf, NULL);
}

/* {"passes": [names], "kernels": K, ...}: the names into names (if given) */
static double variant(RtJsonReader *r, char (*names)[64], int *n_names) {
  const char *key;
  size_t klen;
  int done;
  double kernels = -1;
  cr_assert_eq(rt_json_object_begin(r), 0);
  while (!rt_json_object_next(r, &key, &klen, &done) && !done) {
    if (strcmp(key, "kernels") == 0) {
      kernels = number(r);
    } else if (strcmp(key, "passes") == 0 && names) {
      cr_assert_eq(rt_json_array_begin(r), 0);
      while (!rt_json_array_next(r, &done) && !done) {
        const char *s;
        size_t len;
        cr_assert_eq(rt_json_read_string(r, &s, &len), 0);
        cr_assert_lt(*n_names, 16);
        snprintf(names[(*n_names)++], 64, "%s", s);
      }
    } else {
      cr_assert_eq(rt_json_skip_value(r), 0);
    }
  }
  return kernels;
}

static void read_row(RtJsonReader *r, Row *row) {
  const char *key;
  size_t klen;
  int done;
  cr_assert_eq(rt_json_object_begin(r), 0);
  while (!rt_json_object_next(r, &key, &klen, &done) && !done) {
    if (strcmp(key, "pass") == 0) {
      const char *s;
      size_t len;
      cr_assert_eq(rt_json_read_string(r, &s, &len), 0);
      snprintf(row->pass, sizeof row->pass, "%s", s);
    } else if (strcmp(key, "kernels_removed") == 0) row->kernels_removed = number(r);
    else if (strcmp(key, "bytes_not_written") == 0) row->bytes_not_written = number(r);
    else if (strcmp(key, "ms_with") == 0) row->ms_with = number(r);
    else if (strcmp(key, "ms_without") == 0) row->ms_without = number(r);
    else if (strcmp(key, "ratio") == 0) row->ratio = number(r);
    else cr_assert_eq(rt_json_skip_value(r), 0);
  }
}

static void read_report(const char *path, Report *rep) {
  static char text[1 << 16];
  slurp(path, text, sizeof text);
  memset(rep, 0, sizeof *rep);
  RtJsonReader r;
  const char *key;
  size_t klen;
  int done;
  rt_json_reader_init(&r, text, strlen(text));
  cr_assert_eq(rt_json_object_begin(&r), 0, "%s", r.msg);
  while (!rt_json_object_next(&r, &key, &klen, &done) && !done) {
    if (strcmp(key, "pipeline") == 0) {
      rep->kernels_full = variant(&r, rep->pipeline, &rep->n_pipeline);
    } else if (strcmp(key, "O0") == 0) {
      rep->kernels_o0 = variant(&r, NULL, NULL);
    } else if (strcmp(key, "passes") == 0) {
      cr_assert_eq(rt_json_array_begin(&r), 0);
      while (!rt_json_array_next(&r, &done) && !done) {
        cr_assert_lt(rep->n_rows, 16);
        read_row(&r, &rep->rows[rep->n_rows++]);
      }
    } else if (strcmp(key, "all") == 0) {
      Row all = {0};
      read_row(&r, &all);
      cr_expect_geq(all.kernels_removed, 0);
      cr_expect_geq(all.bytes_not_written, 0);
      cr_expect_gt(all.ms_with, 0);
      cr_expect_gt(all.ms_without, 0);
      rep->have_all = true;
    } else {
      cr_assert_eq(rt_json_skip_value(&r), 0);
    }
  }
  cr_assert(!r.failed && rt_json_finish(&r) == 0, "%s: %s", path, r.msg);
  rt_json_reader_free(&r);
}

static void check_level(int level) {
  char args[256];
  snprintf(args, sizeof args, "bench cls.tfm --init random -O%d --rounds 1 --batch 2 --seq 10 "
           "--threads 1 --json out.json", level);
  cr_assert_eq(tfmc(args), 0, "%s", err_text);
  PassPipeline pl;
  cr_assert(pass_pipeline_level(level, &pl));
  Report rep;
  char p[512];
  snprintf(p, sizeof p, "%s/out.json", dir);
  read_report(p, &rep);
  cr_assert(rep.have_all);
  cr_expect_eq(rep.n_pipeline, pl.n);
  for (int i = 0; i < pl.n && i < rep.n_pipeline; i++)
    cr_expect_str_eq(rep.pipeline[i], pl.passes[i]->name);
  /* one row per distinct pass, in pipeline order */
  int want = 0;
  for (int i = 0; i < pl.n; i++) {
    bool seen = false;
    for (int k = 0; k < i; k++) seen |= pl.passes[k] == pl.passes[i];
    if (seen) continue;
    cr_assert_lt(want, rep.n_rows, "no row for %s", pl.passes[i]->name);
    const Row *row = &rep.rows[want++];
    cr_expect_str_eq(row->pass, pl.passes[i]->name);
    /* prune-rows costs a kernel with fuse-qkv after it: the last layer's
     * query projection reads one row, so it no longer fuses with the keys
     * and values (fewer FLOPs, one more GEMM call); the others remove */
    if (strcmp(row->pass, "prune-rows") == 0)
      cr_expect_geq(row->kernels_removed, -1, "%s", row->pass);
    else
      cr_expect_geq(row->kernels_removed, 0, "%s", row->pass);
    if (strcmp(row->pass, "fuse-qkv") == 0) /* 2 layers: 2 q/k/v (k/v) groups of 3 (2) */
      cr_expect_eq(row->kernels_removed, 3, "%s", row->pass);
    cr_expect_geq(row->bytes_not_written, 0, "%s", row->pass);
    cr_expect_gt(row->ms_with, 0, "%s", row->pass);
    cr_expect_gt(row->ms_without, 0, "%s", row->pass);
    cr_expect_gt(row->ratio, 0, "%s", row->pass);
    /* the classifier reads the first row only: prune-rows saves writes */
    if (strcmp(row->pass, "prune-rows") == 0) cr_expect_gt(row->bytes_not_written, 0);
    /* the fusions remove kernels and the values between them (the residual
     * adds into the linears' epilogues, the embedding gathers before their
     * sum). fuse-add-norm runs after fuse-epilogue, which takes every add
     * that follows a linear (fewer bytes than add + layernorm would move):
     * what is left to it are sums no linear made and fuse-elementwise does
     * not take whole (an embedding sum, gathers and all, is one loop nest
     * of fuse-elementwise), and this spec has none */
    if (strcmp(row->pass, "fuse-epilogue") == 0 || strcmp(row->pass, "fuse-elementwise") == 0) {
      cr_expect_gt(row->kernels_removed, 0, "%s", row->pass);
      cr_expect_gt(row->bytes_not_written, 0, "%s", row->pass);
    }
    /* the table has the same row */
    char line[128];
    snprintf(line, sizeof line, "\n%s ", row->pass);
    cr_expect(strstr(out_text, line), "no table row for %s:\n%s", row->pass, out_text);
  }
  cr_expect_eq(rep.n_rows, want);
  cr_expect_gt(rep.kernels_full, 0);
  cr_expect_geq(rep.kernels_o0, rep.kernels_full);
  char line[128];
  snprintf(line, sizeof line, "kernels per forward: -O0 %.0f, -O%d %.0f (", rep.kernels_o0, level,
           rep.kernels_full);
  cr_expect(strstr(out_text, line), "no '%s' in:\n%s", line, out_text);
}

Test(bench, rows_per_pass_and_json_at_every_level, .timeout = 300) {
  for (int level = 1; level <= 3; level++) check_level(level);
}

#define EXPECT_EXIT(status, code, fragment)                                             \
  do {                                                                                  \
    cr_expect_eq(status, code, "exit %d, stderr: %s", status, err_text);                \
    cr_expect(strstr(err_text, fragment), "stderr lacks '%s':\n%s", fragment, err_text); \
  } while (0)

Test(bench, bad_input_refused, .timeout = 120) {
  EXPECT_EXIT(tfmc("bench cls.tfm --init random --seq 13 --rounds 1"), 1,
              "--seq 13: model 'cls' takes at most 12");
  EXPECT_EXIT(tfmc("bench cls.tfm --init random --batch 5 --rounds 1"), 1,
              "--batch 5: model 'cls' takes at most 4");
  EXPECT_EXIT(tfmc("bench cls.tfm --init random -O7"), 2, "unknown level '-O7'");
  EXPECT_EXIT(tfmc("bench cls.tfm --init random -O0"), 2, "-O0 runs no passes");
  EXPECT_EXIT(tfmc("bench cls.tfm --init random --rounds 0"), 2, "--rounds takes 1..");
  EXPECT_EXIT(tfmc("bench cls.tfm --init random --threads -1"), 2, "--threads takes 0..256");
  EXPECT_EXIT(tfmc("bench cls.tfm"), 2, "give exactly one of --weights and --init random");
  EXPECT_EXIT(tfmc("bench missing.tfm --init random --rounds 1"), 1, "missing.tfm");
  EXPECT_EXIT(tfmc("bench cls.tfm --weights missing.safetensors --rounds 1"), 1,
              "missing.safetensors");
  /* --json never overwrites an input */
  EXPECT_EXIT(tfmc("bench cls.tfm --init random --rounds 1 --json cls.tfm"), 1,
              "refusing to overwrite");
  char p[512], text[4096];
  snprintf(p, sizeof p, "%s/cls.tfm", dir);
  slurp(p, text, sizeof text);
  cr_expect_str_eq(text, spec_text);
  /* nor is a directory replaced */
  EXPECT_EXIT(tfmc("bench cls.tfm --init random --rounds 1 --json ."), 1, "--json .");
}
