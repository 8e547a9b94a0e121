/* tests/passes/test_cli.c — the pass options of the command line, end to
 * end through the built tfmc binary: `tfmc ir FILE.tfir --passes=...` prints
 * the golden outputs, -O levels, --print-after (to stderr or a file that
 * reads back), --pass-stats, usage errors (exit 2) that list the available
 * passes, and `tfmc run --passes` giving the same outputs as without. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GOLDEN TFMC_SOURCE_DIR "/tests/passes"

static char dir[256];
static char out_text[200000], err_text[200000];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_passes_cli_XXXXXX");
  cr_assert(mkdtemp(dir));
}

static void remove_dir(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(cli, .init = make_dir, .fini = remove_dir);

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f)
    fclose(f);
}

/* Runs `tfmc ARGS` in dir; returns the exit status (or 128+signal). */
static int tfmc(const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && %s/tfmc %s >stdout.txt 2>stderr.txt", dir, TFMC_BINARY_DIR,
           args);
  int st = system(cmd);
  char p[512];
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  slurp(p, out_text, sizeof out_text);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  slurp(p, err_text, sizeof err_text);
  if (WIFSIGNALED(st))
    return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static char *read_all(const char *path) {
  static char bufs[4][200000];
  static int k;
  char *b = bufs[k++ % 4];
  slurp(path, b, sizeof bufs[0]);
  return b;
}

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

static const char *spec_text = "model tiny {\n"
                               "  arch decoder\n"
                               "  vocab 20\n"
                               "  d_model 8\n"
                               "  heads 2\n"
                               "  layers 2\n"
                               "  ffn 16 relu\n"
                               "  position learned max 6\n"
                               "  head logits tied\n"
                               "  max_batch 2\n"
                               "}\n";

Test(cli, ir_passes_print_the_golden_outputs) {
  const char *cases[][2] = {{"dce", "dce"},
                            {"dce.nothing_dead", "dce"},
                            {"decompose-attention", "decompose-attention"},
                            {"pipeline.dce_then_decompose", "dce,decompose-attention"},
                            {"fuse-add-norm", "fuse-add-norm"},
                            {"fuse-elementwise", "fuse-elementwise"}};
  for (int i = 0; i < 6; i++) {
    char args[1024], exp[1024];
    snprintf(args, sizeof args, "ir %s/%s.tfir --passes=%s", GOLDEN, cases[i][0], cases[i][1]);
    snprintf(exp, sizeof exp, "%s/%s.expected.tfir", GOLDEN, cases[i][0]);
    cr_assert_eq(tfmc(args), 0, "%s: %s", args, err_text);
    cr_expect_str_eq(out_text, read_all(exp), "%s", args);
    cr_expect_str_eq(err_text, "", "%s printed to stderr: %s", args, err_text);
  }
}

Test(cli, unknown_pass_is_a_usage_error_listing_the_passes) {
  cr_assert_eq(tfmc("ir " GOLDEN "/dce.tfir --passes=dce,fold-everything"), 2);
  cr_expect(strstr(err_text, "unknown pass 'fold-everything'"), "%s", err_text);
  cr_expect(strstr(err_text, "available passes: dce, decompose-attention"), "%s", err_text);
  cr_expect_str_eq(out_text, "");
}

Test(cli, option_mistakes_are_usage_errors) {
  const char *bad[][2] = {
      {"ir " GOLDEN "/dce.tfir -O4", "unknown level '-O4'"},
      {"ir " GOLDEN "/dce.tfir -O", "unknown level '-O'"},
      {"ir " GOLDEN "/dce.tfir -O1 -O2", "give one optimisation level"},
      {"ir " GOLDEN "/dce.tfir -O1 --passes=dce", "give --passes or -O1, not both"},
      {"ir " GOLDEN "/dce.tfir --passes=", "empty pass list"},
      {"ir " GOLDEN "/dce.tfir --passes=dce --print-after=decompose-attention",
       "not in the pipeline"},
      {"ir " GOLDEN "/dce.tfir --passes=dce --print-after=dse", "unknown pass 'dse'"},
      {"ir " GOLDEN "/dce.tfir --passes=dce --print-file x.tfir", "--print-file goes with"},
      {"ir in.tfir --passes=dce --print-after=dce --print-file in.tfir", "would overwrite in.tfir"},
      {"ir in.tfir --passes=dce --print-after=dce --print-file ./in.tfir",
       "would overwrite in.tfir"},
      /* an option's value is not taken for a level */
      {"ir --format -O1 " GOLDEN "/dce.tfir", "--format must be text or dot, not '-O1'"},
      {"run spec.tfm --init random --tokens '1 2' --passes=nope", "unknown pass 'nope'"},
      {"run spec.tfm --init random --tokens '1 2' -O9", "unknown level '-O9'"},
      {"run spec.tfm --init random --tokens '1 2' -O1 --print-after=dce --print-file spec.tfm",
       "would overwrite spec.tfm"},
  };
  write_file("spec.tfm", spec_text);
  const char *in_text = read_all(GOLDEN "/dce.tfir");
  write_file("in.tfir", in_text);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(tfmc(bad[i][0]), 2, "%s: %s", bad[i][0], err_text);
    cr_expect(strstr(err_text, bad[i][1]), "%s: expected '%s' in: %s", bad[i][0], bad[i][1],
              err_text);
  }
  /* the inputs were not overwritten */
  char p[512];
  snprintf(p, sizeof p, "%s/in.tfir", dir);
  cr_expect_str_eq(read_all(p), in_text);
  snprintf(p, sizeof p, "%s/spec.tfm", dir);
  cr_expect_str_eq(read_all(p), spec_text);
}

Test(cli, print_after_and_stats_go_to_stderr) {
  cr_assert_eq(tfmc("ir " GOLDEN
                    "/pipeline.dce_then_decompose.tfir --passes=dce,decompose-attention "
                    "--print-after=all --pass-stats"),
               0, "%s", err_text);
  cr_expect_str_eq(out_text, read_all(GOLDEN "/pipeline.dce_then_decompose.expected.tfir"));
  const char *want[] = {"# IR after pass 'dce'\ngraph \"pipeline\" {",
                        "# IR after pass 'decompose-attention'\ngraph \"pipeline\" {",
                        "removed 3 nodes (1 param)",
                        "decomposed 1 attention op",
                        "8 -> 6",
                        "(2 passes)"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_expect(strstr(err_text, want[i]), "'%s' missing from: %s", want[i], err_text);
}

/* --format dot draws the graph after a pass too, each fused node a cluster
 * of the ops it replaced; --pass-stats says what each fusion pass fused */
Test(cli, print_after_draws_fused_nodes_as_clusters) {
  cr_assert_eq(tfmc("ir " GOLDEN "/fuse-add-norm.tfir --passes=fuse-add-norm,fuse-elementwise "
                    "--format dot --print-after=fuse-add-norm --pass-stats"),
               0, "%s", err_text);
  const char *want[] = {"# IR after pass 'fuse-add-norm'\ndigraph \"add_norm\" {",
                        "  subgraph cluster_n7 {\n    label=\"%7 fused \\\"add_layernorm\\\"",
                        "  subgraph cluster_n11 {\n    label=\"%11 fused \\\"add_layernorm_sum\\\"",
                        "n11_b4 -> n11_b5;", /* the sum into the norm, inside the cluster */
                        "n11_b4 -> n11 [style=dashed, label=\"result 1\"];",
                        "fused 4 add + layernorm pairs into row kernels (2 also write the sum)",
                        "fused 6 nodes into 3 elementwise loop nests"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_expect(strstr(err_text, want[i]), "'%s' missing from: %s", want[i], err_text);
  cr_expect(strncmp(out_text, "digraph \"add_norm\" {", 20) == 0, "%s", out_text);
  cr_expect(strstr(out_text, "subgraph cluster_n"), "%s", out_text);
}

Test(cli, print_file_holds_ir_that_reads_back) {
  cr_assert_eq(
      tfmc("ir " GOLDEN "/dce.tfir --passes=dce --print-after=dce --print-file after.tfir"), 0,
      "%s", err_text);
  cr_expect_str_eq(err_text, "");
  char p[512];
  snprintf(p, sizeof p, "%s/after.tfir", dir);
  const char *printed = read_all(p);
  const char *head = "# IR after pass 'dce'\n";
  cr_assert(strncmp(printed, head, strlen(head)) == 0, "%s", printed);
  const char *expected = read_all(GOLDEN "/dce.expected.tfir");
  cr_expect_str_eq(printed + strlen(head), expected);
  cr_assert_eq(tfmc("ir after.tfir"), 0, "%s", err_text);
  cr_expect_str_eq(out_text, expected);
}

Test(cli, levels_on_a_spec) {
  write_file("spec.tfm", spec_text);
  cr_assert_eq(tfmc("ir spec.tfm"), 0, "%s", err_text);
  char plain[200000];
  strcpy(plain, out_text);
  cr_assert_eq(tfmc("ir spec.tfm -O0"), 0, "%s", err_text);
  cr_expect_str_eq(out_text, plain, "-O0 changed the IR");
  cr_expect_str_eq(err_text, "");
  for (int level = 1; level <= 3; level++) {
    char args[64];
    snprintf(args, sizeof args, "ir spec.tfm -O%d --pass-stats", level);
    cr_assert_eq(tfmc(args), 0, "%s", err_text);
    cr_expect(strstr(err_text, "dce"), "%s", err_text);
    cr_expect_null(strstr(err_text, "decompose-attention"), "-O%d decomposes attention", level);
  }
  cr_assert_eq(tfmc("ir spec.tfm --passes=decompose-attention --level loop"), 0, "%s", err_text);
  cr_expect(strstr(out_text, "attn_probs"), "the loop IR lacks the decomposed kernels:\n%.2000s",
            out_text);
}

Test(cli, run_with_passes_gives_the_same_outputs) {
  write_file("spec.tfm", spec_text);
  const char *base = "run spec.tfm --init random --seed 3 --tokens '4 1 7 2 9'";
  char args[1024];
  snprintf(args, sizeof args, "%s --backend interp --outputs ref.st", base);
  cr_assert_eq(tfmc(args), 0, "%s", err_text);
  snprintf(args, sizeof args,
           "%s --backend interp --passes=dce,decompose-attention --pass-stats --outputs got.st",
           base);
  cr_assert_eq(tfmc(args), 0, "%s", err_text);
  cr_expect(strstr(err_text, "decomposed 2 attention ops"), "%s", err_text);
  cr_assert_eq(tfmc("compare got.st ref.st --atol 0 --rtol 0"), 0, "%s%s", out_text, err_text);
  /* the JIT runs the rewritten graph too */
  snprintf(args, sizeof args, "%s --backend jit --passes=decompose-attention -O0 --outputs jit.st",
           base);
  cr_expect_eq(tfmc(args), 2, "--passes with -O0 should be refused");
  snprintf(args, sizeof args, "%s --backend jit --passes=decompose-attention --outputs jit.st",
           base);
  cr_assert_eq(tfmc(args), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare jit.st ref.st --atol 1e-5 --rtol 1e-5"), 0, "%s%s", out_text,
               err_text);
  snprintf(args, sizeof args, "%s -O2 --outputs o2.st", base);
  cr_assert_eq(tfmc(args), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare o2.st ref.st --atol 1e-5 --rtol 1e-5"), 0, "%s%s", out_text, err_text);
}

Test(cli, help_lists_the_passes) {
  cr_assert_eq(tfmc("ir --help"), 0);
  cr_expect(strstr(out_text, "--passes=LIST | -O0..-O3"), "%s", out_text);
  cr_expect(strstr(out_text, "  dce "), "%s", out_text);
  cr_expect(strstr(out_text, "  decompose-attention "), "%s", out_text);
  cr_assert_eq(tfmc("run --help"), 0);
  cr_expect(strstr(out_text, "--pass-stats"), "%s", out_text);
}

Test(cli, a_broken_tfir_is_a_user_error) {
  write_file("bad.tfir",
             "graph \"b\" {\n  %0 = input \"x\" : f32[3]\n  %1 = relu %7 : f32[3]\n}\n");
  cr_expect_eq(tfmc("ir bad.tfir --passes=dce"), 1);
  cr_expect(strstr(err_text, "bad.tfir:3:"), "%s", err_text);
}

/* Every PyTorch parity golden still matches PyTorch after the passes: the
 * interpreter with dce and decompose-attention, the JIT with the
 * decomposed attention (its own kernels) and the -O3 pipeline. */
Test(cli, pytorch_goldens_hold_after_passes, .timeout = 600) {
  const char *root = TFMC_SOURCE_DIR "/tests/golden";
  const char *runs[][2] = {{"interp", "--passes=dce,decompose-attention"},
                           {"jit", "--passes=decompose-attention"},
                           {"jit", "-O3"}};
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "ls -d %s/*/ > %s/goldens.txt", root, dir);
  cr_assert_eq(system(cmd), 0);
  char list_path[512];
  snprintf(list_path, sizeof list_path, "%s/goldens.txt", dir);
  char list[8192];
  slurp(list_path, list, sizeof list);
  int n = 0;
  for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
    char g[1024], extra[256] = "", args[4096];
    snprintf(g, sizeof g, "%s", line);
    snprintf(args, sizeof args, "%sargs", g);
    FILE *f = fopen(args, "r");
    if (f) {
      if (!fgets(extra, sizeof extra, f))
        extra[0] = 0;
      extra[strcspn(extra, "\n")] = 0;
      fclose(f);
    }
    n++;
    for (int r = 0; r < 3; r++) {
      snprintf(args, sizeof args,
               "run %smodel.tfm --weights %sweights.safetensors --inputs %sinputs.safetensors "
               "--outputs out.st --backend %s %s %s",
               g, g, g, runs[r][0], runs[r][1], extra);
      cr_assert_eq(tfmc(args), 0, "%s: %s", args, err_text);
      snprintf(args, sizeof args, "compare out.st %sexpected.safetensors --atol 1e-4 --rtol 1e-4",
               g);
      cr_expect_eq(tfmc(args), 0, "%s with %s %s:\n%s", g, runs[r][0], runs[r][1], out_text);
    }
  }
  cr_expect_geq(n, 10, "golden directories missing under %s", root);
}

/* Switching passes off by name: --disable-pass=NAME or --passes=-NAME take
 * the pass out of the level's pipeline (-O2 by default on run, build and
 * emit-c); the stats show what ran; a pass that is unknown or not in the
 * pipeline is a usage error; .tfloop files take loop passes only. */
Test(cli, passes_switch_off_by_name) {
  write_file("spec.tfm", spec_text);
  cr_assert_eq(tfmc("ir spec.tfm -O2 --level loop --pass-stats"), 0, "%s", err_text);
  cr_expect(strstr(err_text, "share-kernels") && strstr(err_text, "lane-split"), "%s", err_text);
  cr_assert_eq(tfmc("ir spec.tfm -O2 --level loop --disable-pass=share-kernels --pass-stats"), 0,
               "%s", err_text);
  cr_expect(strstr(err_text, "lane-split") && !strstr(err_text, "share-kernels"), "%s", err_text);
  cr_expect_null(strstr(out_text, " shares "), "share-kernels ran though disabled");
  cr_assert_eq(tfmc("ir spec.tfm -O3 --level loop --passes=-lane-split,-prune-rows --pass-stats"), 0,
               "%s", err_text);
  cr_expect(strstr(err_text, "share-kernels") && strstr(err_text, "dce"), "%s", err_text);
  cr_expect(!strstr(err_text, "lane-split") && !strstr(err_text, "prune-rows"), "%s", err_text);
  cr_expect_eq(tfmc("ir spec.tfm -O2 --disable-pass=fuse-everything"), 2);
  cr_expect(strstr(err_text, "unknown pass 'fuse-everything'"), "%s", err_text);
  cr_expect_eq(tfmc("ir spec.tfm -O0 --disable-pass=dce"), 2);
  cr_expect(strstr(err_text, "'dce' is not in the pipeline"), "%s", err_text);
  cr_expect_eq(tfmc("ir spec.tfm -O2 --passes=-dce --disable-pass=prune-rows"), 2);
  cr_expect_eq(tfmc("ir spec.tfm --passes=dce,-prune-rows"), 2);
  /* a loop listing through the loop passes only */
  cr_assert_eq(tfmc("ir spec.tfm -O2 --level loop --disable-pass=share-kernels"), 0, "%s", err_text);
  write_file("spec.tfloop", out_text);
  cr_assert_eq(tfmc("ir spec.tfloop --passes=share-kernels"), 0, "%s", err_text);
  cr_expect(strstr(out_text, " shares "), "%.2000s", out_text);
  cr_expect_eq(tfmc("ir spec.tfloop --passes=dce"), 1);
  cr_expect(strstr(err_text, "may only hold loop passes"), "%s", err_text);
  /* run: the same outputs with a pass off */
  cr_assert_eq(tfmc("run spec.tfm --init random --tokens \"1 2 3\" --outputs a.safetensors"), 0,
               "%s", err_text);
  cr_assert_eq(tfmc("run spec.tfm --init random --tokens \"1 2 3\" --disable-pass=share-kernels "
                    "--outputs b.safetensors"),
               0, "%s", err_text);
  cr_assert_eq(tfmc("compare a.safetensors b.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
}

/* The tile pass from the command line: the golden through `tfmc ir` with
 * the golden's target; --tile overrides show in the listing and the
 * stats; bad keys, values, sizes and thread counts, a key given twice, and
 * tile options without the tile pass are usage errors that say why. */
Test(cli, tile_options) {
  cr_assert_eq(tfmc("ir " GOLDEN "/loop/tile.tfloop --passes=tile --target-cache L1=32K,L2=1M,L3=32M"
                    " --target-threads 2"),
               0, "%s", err_text);
  cr_expect_str_eq(out_text, read_all(GOLDEN "/loop/tile.expected.tfloop"));
  cr_assert_eq(tfmc("ir " GOLDEN "/loop/tile.tfloop --passes=tile --target-cache L1=48K,L2=2M"
                    " --target-threads 1 --tile gemm.mc=64 --tile gemm.nc=960,gemm.task_macs=1000"
                    " --pass-stats"),
               0, "%s", err_text);
  /* kc = 2M / 1024 = 2048 -> 1024 (the cap); the rest as given; split_macs
   * 1 thread * 2^22 */
  cr_expect(strstr(out_text, ", 64, 960, 1024, 1000, 4194304)"), "%s", out_text);
  cr_expect(strstr(err_text, "mc=64 nc=960 kc=1024 task_macs=1000 split_macs=4194304 (L1 48K, L2 2M,"
                             " L3 "),
            "%s", err_text);
  cr_expect(strstr(err_text, "--tile gemm.mc,gemm.nc,gemm.task_macs)"), "%s", err_text);
  /* a 512K L2 (Zen 3): kc = 512K / 512 = 1024, so K = 768 is one block;
   * mc = 512K / (8 * 1024) = 64 -> 60; nc = 32M / (8 * 1024 * 2) = 2048
   * -> 1920 */
  cr_assert_eq(tfmc("ir " GOLDEN "/loop/tile.tfloop --passes=tile --target-cache L1=32K,L2=512K,"
                    "L3=32M --target-threads 2 --pass-stats"),
               0, "%s", err_text);
  cr_expect(strstr(out_text, ", 60, 1920, 1024, 131072, 8388608)"), "%s", out_text);
  cr_expect(strstr(err_text, "mc=60 nc=1920 kc=1024 task_macs=131072 split_macs=8388608 (L1 32K,"
                             " L2 512K, L3 32M, 2 threads: --target-cache"),
            "%s", err_text);
  /* the attention keys: per call from the head dims (L1 48K, L2 2M: dh = dv
   * = 16 -> block_q 48K / 128 = 384 -> 256, block_k 2M / (8 (32 + 256)) =
   * 910 -> 896; dh = dv = 64 -> block_q 48K / 512 = 96), or as given */
  cr_assert_eq(tfmc("ir " GOLDEN "/loop/tile.tfloop --passes=tile --target-cache L1=48K,L2=2M"
                    " --pass-stats"),
               0, "%s", err_text);
  cr_expect(strstr(out_text, "&b3[0], 256, 896)"), "%s", out_text);
  cr_expect(strstr(out_text, "&b3[0], null, 96, 1024)"), "%s", out_text);
  cr_expect(strstr(err_text, "; 2 attention calls: block_q=96..256 block_k=896"), "%s", err_text);
  cr_assert_eq(tfmc("ir " GOLDEN "/loop/tile.tfloop --passes=tile --tile attention.block_k=100"
                    " --tile attention.block_q=7 --pass-stats"),
               0, "%s", err_text);
  cr_expect(strstr(out_text, "&b3[0], 7, 100)"), "%s", out_text);
  cr_expect(strstr(out_text, "&b3[0], null, 7, 1024)"), "%s", out_text);
  cr_expect(strstr(err_text, "--tile attention.block_q,attention.block_k); 2 attention calls: "
                             "block_q=7 block_k=100"),
            "%s", err_text);
  const char *bad[][2] = {
      {"--passes=tile --tile attention.block_k=0",
       "--tile: attention.block_k=0 is not an integer in 1..65536"},
      {"--passes=tile --tile attention.block_q=5000",
       "--tile: attention.block_q=5000 is not an integer in 1..4096"},
      {"--passes=tile --tile gemm.kc=3", "--tile: gemm.kc=3 is not an integer in 8..8192"},
      {"--passes=tile --tile gemm.kc=12x", "--tile: gemm.kc=12x is not an integer in 8..8192"},
      {"--passes=tile --tile gemm.bogus=3", "--tile: unknown key 'gemm.bogus' (keys: gemm.mc,"},
      {"--passes=tile --tile gemm.mc", "--tile: 'gemm.mc' is not KEY=VALUE"},
      {"--passes=tile --tile gemm.mc=8,gemm.mc=16", "--tile: gemm.mc given twice"},
      {"--passes=tile --target-cache L4=1M", "'L4=1M' is not L1=SIZE, L2=SIZE or L3=SIZE"},
      {"--passes=tile --target-cache L1=32Q", "L1=32Q is not a cache size"},
      {"--passes=tile --target-cache L1=32K,L1=48K", "L1 given twice"},
      {"--passes=tile --target-threads 0", "'0' is not a thread count 1..1024"},
      {"--passes=lane-split --tile gemm.mc=64", "need the tile pass in the pipeline"},
      {"--target-threads 4", "need the tile pass in the pipeline"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char args[512];
    snprintf(args, sizeof args, "ir " GOLDEN "/loop/tile.tfloop %s", bad[i][0]);
    cr_expect_eq(tfmc(args), 2, "%s", args);
    cr_expect(strstr(err_text, bad[i][1]), "%s: %s", args, err_text);
    cr_expect_str_eq(out_text, "", "%s printed IR", args);
  }
}

/* fuse-epilogue from the command line: the golden, and a spec at -O2 whose
 * FFN's relu and both residual adds of each layer become epilogues (the
 * pass's note says how many), with the same outputs as -O0 on the JIT. */
Test(cli, fuse_epilogue_on_a_spec) {
  cr_assert_eq(tfmc("ir " GOLDEN "/fuse-epilogue.tfir --passes=fuse-epilogue"), 0, "%s", err_text);
  cr_expect_str_eq(out_text, read_all(GOLDEN "/fuse-epilogue.expected.tfir"));
  write_file("tiny.tfm", spec_text);
  cr_assert_eq(tfmc("ir tiny.tfm -O2 --pass-stats"), 0, "%s", err_text);
  cr_expect(strstr(err_text, "fused 2 activations and 4 residual adds into linear epilogues"), "%s",
            err_text);
  cr_expect(strstr(out_text, "{act=relu}"), "%s", out_text);
  cr_expect(strstr(out_text, "{residual=true}"), "%s", out_text);
  cr_assert_eq(tfmc("run tiny.tfm --init random --tokens '1 2 3 4 5' -O2 --outputs o2.safetensors"),
               0, "%s", err_text);
  cr_assert_eq(tfmc("run tiny.tfm --init random --tokens '1 2 3 4 5' -O0 --outputs o0.safetensors"),
               0, "%s", err_text);
  cr_assert_eq(tfmc("compare o2.safetensors o0.safetensors --atol 1e-5 --rtol 1e-5"), 0, "%s%s",
               out_text, err_text);
}
