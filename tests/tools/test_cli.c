/* tests/tools/test_cli.c — the tfmc command line end to end: bad inputs get
 * a clear message and a non-zero exit, never a crash; usage errors exit 2;
 * outputs are deterministic; nothing the user wrote is overwritten.
 *
 * Each test writes a small spec and input files into a fresh temporary
 * directory and runs the built tfmc binary through the shell. */
#include "runtime/rt_safetensors.h"
#include "tests/common/profile_report.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    "  layers 1\n"
    "  ffn 32 gelu\n"
    "  position learned max 12\n"
    "  tokens pad 0\n"
    "  mask encoder padding\n"
    "  head classifier 3\n"
    "  max_batch 4\n"
    "}\n";

static const char *nomask_spec_text =
    "model plain {\n"
    "  arch encoder\n"
    "  vocab 50\n"
    "  d_model 16\n"
    "  heads 2\n"
    "  layers 1\n"
    "  ffn 32 relu\n"
    "  position sinusoidal\n"
    "  head logits\n"
    "}\n";

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f) fclose(f);
}

/* Runs `tfmc ARGS` in dir; returns the exit status (or 128+signal). */
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

static void write_inputs(const char *name, const RtStWrite *t, int n) {
  char p[512], err[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  cr_assert_eq(rt_st_write(p, t, n, NULL, 0, err, sizeof err), 0, "%s", err);
}

static RtStWrite ids_tensor(const char *name, RtDtype dt, const void *data, int64_t b,
                            int64_t len) {
  RtStWrite w = {name, dt, 2, {b, len}, data};
  return w;
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_cli_XXXXXX");
  cr_assert(mkdtemp(dir));
  write_file("cls.tfm", spec_text);
  write_file("plain.tfm", nomask_spec_text);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(cli, .init = setup, .fini = teardown);

#define EXPECT_ERR(status, fragment)                                                   \
  do {                                                                                 \
    cr_assert_eq(status, 1, "exit %d, stderr: %s", status, err_text);                  \
    cr_assert(strstr(err_text, fragment), "stderr lacks '%s':\n%s", fragment, err_text); \
  } while (0)

Test(cli, runs_and_is_deterministic) {
  int64_t ids[6] = {5, 7, 9, 0, 3, 0};
  RtStWrite t = ids_tensor("tokens", RT_I64, ids, 2, 3);
  write_inputs("in.safetensors", &t, 1);
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 7 --inputs in.safetensors --outputs a.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 7 --inputs in.safetensors --outputs b.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare a.safetensors b.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
  cr_assert(strstr(out_text, "class_logits"));
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 8 --inputs in.safetensors --outputs c.safetensors"), 0);
  cr_assert_eq(tfmc("compare c.safetensors a.safetensors --atol 0 --rtol 0"), 1, "different seeds gave equal outputs");
}

Test(cli, token_id_out_of_range) {
  int32_t ids[3] = {5, 50, 1};
  RtStWrite t = ids_tensor("tokens", RT_I32, ids, 1, 3);
  write_inputs("in.safetensors", &t, 1);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs in.safetensors"), "token ids must be in [0, 50)");
  int64_t neg[2] = {-1, 3};
  t = ids_tensor("tokens", RT_I64, neg, 1, 2);
  write_inputs("in2.safetensors", &t, 1);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs in2.safetensors"), "token ids must be in [0, 50)");
  EXPECT_ERR(tfmc("run cls.tfm --init random --tokens \"3 99\""), "out of range");
}

Test(cli, batch_and_length_limits) {
  int32_t ids[13 * 5] = {0};
  for (int i = 0; i < 65; i++) ids[i] = 1 + i % 40;
  RtStWrite t = ids_tensor("tokens", RT_I32, ids, 5, 2); /* max_batch 4 */
  write_inputs("big_b.safetensors", &t, 1);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs big_b.safetensors"), "max_batch");
  t = ids_tensor("tokens", RT_I32, ids, 1, 13); /* max_len 12 (position table) */
  write_inputs("big_s.safetensors", &t, 1);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs big_s.safetensors"), "max_len");
}

Test(cli, lengths_and_masks_checked) {
  int32_t ids[4] = {3, 4, 5, 6};
  int32_t zero_len[2] = {2, 0};
  RtStWrite t[2] = {ids_tensor("tokens", RT_I32, ids, 2, 2), {"lengths", RT_I32, 1, {2}, zero_len}};
  write_inputs("len0.safetensors", t, 2);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs len0.safetensors"), "lengths must be in [1, 2]");
  uint8_t mask[4] = {1, 1, 0, 0};
  RtStWrite m[2] = {ids_tensor("tokens", RT_I32, ids, 2, 2), {"mask", RT_U8, 2, {2, 2}, mask}};
  write_inputs("mask0.safetensors", m, 2);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs mask0.safetensors"), "no real token");
  int32_t all_pad[2] = {0, 0};
  RtStWrite p = ids_tensor("tokens", RT_I32, all_pad, 1, 2);
  write_inputs("pad.safetensors", &p, 1);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs pad.safetensors"), "no real token");
}

Test(cli, unexpected_and_missing_inputs) {
  int32_t ids[2] = {3, 4}, len[1] = {2};
  RtStWrite t[2] = {ids_tensor("tokens", RT_I32, ids, 1, 2), {"lengths", RT_I32, 1, {1}, len}};
  write_inputs("in.safetensors", t, 2);
  /* a model without a padding mask must not silently ignore lengths */
  EXPECT_ERR(tfmc("run plain.tfm --init random --inputs in.safetensors"), "unexpected input 'lengths'");
  cr_assert(strstr(err_text, "mask"));
  RtStWrite only_len = {"lengths", RT_I32, 1, {1}, len};
  write_inputs("nolen.safetensors", &only_len, 1);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs nolen.safetensors"), "missing input 'tokens'");
  float f[2] = {1, 2};
  RtStWrite ft = {"tokens", RT_F32, 2, {1, 2}, f};
  write_inputs("float.safetensors", &ft, 1);
  cr_assert_eq(tfmc("run cls.tfm --init random --inputs float.safetensors"), 1, "%s", err_text);
}

Test(cli, refuses_to_overwrite_inputs) {
  int32_t ids[2] = {3, 4};
  RtStWrite t = ids_tensor("tokens", RT_I32, ids, 1, 2);
  write_inputs("in.safetensors", &t, 1);
  struct stat before, after;
  char p[512];
  snprintf(p, sizeof p, "%s/in.safetensors", dir);
  cr_assert_eq(stat(p, &before), 0);
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs in.safetensors --outputs in.safetensors"),
             "refusing to overwrite");
  EXPECT_ERR(tfmc("run cls.tfm --init random --inputs in.safetensors --outputs ./in.safetensors"),
             "refusing to overwrite");
  cr_assert_eq(stat(p, &after), 0);
  cr_assert_eq(before.st_size, after.st_size);
  cr_assert_eq(before.st_mtime, after.st_mtime);
}

Test(cli, bad_files) {
  EXPECT_ERR(tfmc("run cls.tfm --weights nope.safetensors --tokens 1"), "nope.safetensors");
  write_file("garbage.safetensors", "this is not a safetensors file at all");
  EXPECT_ERR(tfmc("run cls.tfm --weights garbage.safetensors --tokens 1"), "garbage.safetensors");
  EXPECT_ERR(tfmc("check missing.tfm"), "missing.tfm");
  float w[4] = {1, 2, 3, 4};
  RtStWrite wt = {"not.a.weight", RT_F32, 1, {4}, w};
  write_inputs("w.safetensors", &wt, 1);
  cr_assert_eq(tfmc("run cls.tfm --weights w.safetensors --tokens 1"), 1);
  cr_assert(strstr(err_text, "embed.weight"), "%s", err_text);
  cr_assert(strstr(err_text, "not.a.weight"), "%s", err_text);
}

Test(cli, attention_layer_checked) {
  EXPECT_ERR(tfmc("run cls.tfm --init random --tokens 1 --attention encoder.3"), "encoder.3");
  EXPECT_ERR(tfmc("ir cls.tfm --attention decoder.0"), "decoder.0");
  cr_assert_eq(tfmc("ir cls.tfm --attention encoder.0"), 0, "%s", err_text);
  cr_assert(strstr(out_text, "attn.probs"));
  cr_assert(strstr(out_text, "output \"attention\""));
}

Test(cli, usage_errors_exit_2) {
  cr_assert_eq(tfmc("frobnicate"), 2);
  cr_assert_eq(tfmc("run cls.tfm --tokens 1"), 2);
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens 1 --bogus"), 2);
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens 1 --backend nope"), 2);
  cr_assert_eq(tfmc("ir cls.tfm --format png"), 2);
  cr_assert_eq(tfmc("compare a"), 2);
  const char *cmds[] = {"check", "ir", "run", "compare"};
  for (int i = 0; i < 4; i++) {
    char c[64];
    snprintf(c, sizeof c, "%s --help", cmds[i]);
    cr_assert_eq(tfmc(c), 0);
    cr_assert(strstr(out_text, "usage: tfmc"), "%s", out_text);
  }
}

Test(cli, text_with_vocab) {
  write_file("v.txt", "<pad>\na\nb\nc\n");
  cr_assert_eq(tfmc("run cls.tfm --init random --text \"a b c\" --vocab v.txt"), 0, "%s", err_text);
  cr_assert(strstr(out_text, "class_logits [1,3]"), "%s", out_text);
  EXPECT_ERR(tfmc("run cls.tfm --init random --text \"a z\" --vocab v.txt"), "'z' is not in the vocabulary");
}

Test(cli, check_reports_sizes) {
  cr_assert_eq(tfmc("check cls.tfm"), 0, "%s", err_text);
  /* embed 50*16 + pos 12*16 + layer (4*(16*16+16) + 2*2*16 + 16*32+32 + 32*16+16)
   * + classifier 16*3+3 */
  long expect = 800 + 192 + (4 * 272 + 64 + 544 + 528) + 51;
  char want[64];
  snprintf(want, sizeof want, "parameters      %ld", expect);
  cr_assert(strstr(out_text, want), "want '%s' in:\n%s", want, out_text);
}

/* tfmc build: the executable runs without LLVM, takes any batch and length
 * up to the maxima, refuses bad inputs and another model's weights. */
Test(cli, built_executable_checks_inputs_and_weights) {
  cr_assert_eq(tfmc("build cls.tfm --init random --seed 3 -o cls"), 0, "%s", err_text);
  cr_assert_eq(tfmc("build plain.tfm --init random -o plain"), 0, "%s", err_text);
  int32_t ids[6] = {5, 7, 9, 0, 3, 0};
  RtStWrite t = ids_tensor("tokens", RT_I32, ids, 2, 3);
  write_inputs("in.safetensors", &t, 1);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cd %s && ./cls --inputs in.safetensors --outputs exe.safetensors", dir);
  cr_assert_eq(system(cmd), 0);
  /* same numbers as the JIT and the interpreter with the same seed */
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 3 --inputs in.safetensors --outputs jit.safetensors"), 0);
  cr_assert_eq(tfmc("compare exe.safetensors jit.safetensors --atol 1e-5 --rtol 1e-5"), 0, "%s", out_text);
  /* one length more than the position table */
  int32_t long_ids[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  t = ids_tensor("tokens", RT_I32, long_ids, 1, 13);
  write_inputs("long.safetensors", &t, 1);
  snprintf(cmd, sizeof cmd, "cd %s && ./cls --inputs long.safetensors --outputs o.safetensors 2>err.txt", dir);
  int st = system(cmd);
  cr_assert_eq(WEXITSTATUS(st), 1);
  int32_t bad[2] = {3, 77};
  t = ids_tensor("tokens", RT_I32, bad, 1, 2);
  write_inputs("bad.safetensors", &t, 1);
  snprintf(cmd, sizeof cmd, "cd %s && ./cls --inputs bad.safetensors --outputs o.safetensors 2>err.txt", dir);
  st = system(cmd);
  cr_assert_eq(WEXITSTATUS(st), 1);
  char p[512];
  snprintf(p, sizeof p, "%s/err.txt", dir);
  slurp(p, err_text, sizeof err_text);
  cr_assert(strstr(err_text, "77"), "%s", err_text);
  /* another model's weights file is refused, not misread */
  snprintf(cmd, sizeof cmd,
           "cd %s && ./cls --weights plain.weights --inputs in.safetensors --outputs o.safetensors 2>err.txt", dir);
  st = system(cmd);
  cr_assert_eq(WEXITSTATUS(st), 1);
  slurp(p, err_text, sizeof err_text);
  cr_assert(strstr(err_text, "another model"), "%s", err_text);
  /* --help names the model's inputs */
  snprintf(cmd, sizeof cmd, "cd %s && ./cls --help >help.txt", dir);
  cr_assert_eq(system(cmd), 0);
  snprintf(p, sizeof p, "%s/help.txt", dir);
  slurp(p, out_text, sizeof out_text);
  cr_assert(strstr(out_text, "tokens"), "%s", out_text);
}

/* Runs `cd dir && CMD` with stdout and stderr into out_text / err_text;
 * returns the exit status (or 128+signal). */
static int in_dir(const char *cmd_text) {
  char cmd[4096], p[512];
  snprintf(cmd, sizeof cmd, "cd %s && %s >stdout.txt 2>stderr.txt", dir, cmd_text);
  int st = system(cmd);
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  slurp(p, out_text, sizeof out_text);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  slurp(p, err_text, sizeof err_text);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

#define SORT TFMC_SOURCE_DIR "/examples/sort"

/* A built executable takes one sequence as --tokens or --text --vocab and,
 * without --outputs, prints the summary `tfmc run` prints (README's first
 * command); it refuses what `tfmc run` refuses, with the same messages. */
Test(cli, built_executable_takes_tokens_and_text, .timeout = 300) {
  cr_assert_eq(tfmc("build " SORT "/model.tfm --weights " SORT "/weights.safetensors -o sort"),
               0, "%s", err_text);
  cr_assert_eq(tfmc("run " SORT "/model.tfm --weights " SORT "/weights.safetensors --vocab "
                    SORT "/vocab.txt --text \"7 3 9 1 3 0 8 2\""),
               0, "%s", err_text);
  char *want = strdup(out_text);
  cr_assert(strstr(want, "output: 0 1 2 3 3 7 8 9"), "%s", want);
  cr_assert_eq(in_dir("./sort --text \"7 3 9 1 3 0 8 2\" --vocab " SORT "/vocab.txt"), 0, "%s",
               err_text);
  cr_assert_str_eq(out_text, want);
  free(want);
  /* --tokens: ids (vocab line k = id k, '0' is id 1); with --vocab, printed as symbols */
  cr_assert_eq(in_dir("./sort --tokens \"8,4 10\""), 0, "%s", err_text);
  cr_assert(strstr(out_text, "  input:  8 4 10\n  output: 4 8 10\n"), "%s", out_text);
  cr_assert_eq(in_dir("./sort --tokens \"8 4 10\" --vocab " SORT "/vocab.txt"), 0, "%s", err_text);
  cr_assert(strstr(out_text, "  output: 3 7 9\n"), "%s", out_text);
  /* the same numbers as tfmc run, written with --outputs */
  cr_assert_eq(in_dir("./sort --tokens \"8 4 10\" --outputs exe.safetensors"), 0, "%s", err_text);
  cr_assert_eq(out_text[0], '\0', "printed with --outputs: %s", out_text);
  cr_assert_eq(tfmc("run " SORT "/model.tfm --weights " SORT "/weights.safetensors --tokens "
                    "\"8 4 10\" --outputs jit.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare exe.safetensors jit.safetensors --atol 1e-5 --rtol 1e-5"), 0, "%s",
               out_text);
  /* --inputs without --outputs: the summary too */
  cr_assert_eq(in_dir("./sort --inputs " SORT "/inputs.safetensors"), 0, "%s", err_text);
  cr_assert(strstr(out_text, "logits [8,16,11], argmax per position:"), "%s", out_text);
  /* refusals: the message and exit status 1, or 2 for usage errors */
  static const struct {
    const char *args, *msg;
    int status;
  } bad[] = {
      {"--tokens \"1 11\"", "sort: --tokens: id 11 out of range [0, 11)", 1},
      {"--tokens \"1 x\"", "sort: --tokens: 'x' is not a token id", 1},
      {"--text \"7 q\" --vocab " SORT "/vocab.txt", "sort: --text: symbol 'q' is not in the vocabulary", 1},
      {"--tokens \"1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8\"", "sort: input longer than the model's max_len 16", 1},
      {"--tokens \" , \"", "sort: empty input sequence", 1},
      {"--tokens 0", "sort: the input sequence is all padding", 1},
      {"--text 7 --vocab nope.txt", "sort: cannot read nope.txt", 1},
      {"--text 7", "sort: --text needs --vocab", 2},
      {"--tokens 1 --inputs " SORT "/inputs.safetensors", "give exactly one of --inputs, --tokens and --text", 2},
      {"--tokens 1 --text 1 --vocab " SORT "/vocab.txt", "give exactly one of --inputs, --tokens and --text", 2},
      {"--tokens", "option '--tokens' needs a value", 2},
      {"--outputs o.safetensors", "missing --inputs FILE", 2},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./sort %s", bad[i].args);
    int st = in_dir(cmd);
    cr_assert_eq(st, bad[i].status, "%s: exit %d, stderr: %s", cmd, st, err_text);
    cr_assert(strstr(err_text, bad[i].msg), "%s: stderr lacks '%s':\n%s", cmd, bad[i].msg, err_text);
  }
  /* --outputs naming the vocabulary is refused and leaves it alone */
  write_file("v.txt", "<pad>\n0\n1\n");
  cr_assert_eq(in_dir("./sort --text \"1 0\" --vocab v.txt --outputs v.txt"), 1, "%s", err_text);
  cr_assert(strstr(err_text, "is one of the input files"), "%s", err_text);
  char p[512];
  snprintf(p, sizeof p, "%s/v.txt", dir);
  slurp(p, out_text, sizeof out_text);
  cr_assert_str_eq(out_text, "<pad>\n0\n1\n");
  /* --tokens refuses a model with token_types or src/tgt, as tfmc run does */
  write_file("s2s.tfm", "model s2s {\n  arch encoder_decoder\n  vocab 20\n  d_model 16\n"
                        "  heads 2\n  layers 1\n  ffn 32 relu\n  position learned max 12\n"
                        "  head logits\n}\n");
  cr_assert_eq(tfmc("build s2s.tfm --init random -o s2s"), 0, "%s", err_text);
  cr_assert_eq(in_dir("./s2s --tokens \"1 2\""), 1, "%s", err_text);
  const char *s2s_msg = "--tokens/--text give one sequence; model 's2s' is an encoder_decoder and "
                        "needs src and tgt (use --inputs)";
  cr_assert(strstr(err_text, s2s_msg), "%s", err_text);
  EXPECT_ERR(tfmc("run s2s.tfm --init random --tokens \"1 2\""), s2s_msg);
}

/* --profile on an executable from `tfmc build` and on `tfmc run` (the JIT):
 * one report format, naming every kernel of the loop IR under its op kind
 * and the slowest with their spec lines; profiling changes no output bit.
 * The bundled sort model. */
static char *read_file(const char *name, size_t *len) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  cr_assert(f, "cannot read %s", p);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  cr_assert(b && fread(b, 1, (size_t)n, f) == (size_t)n);
  b[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return b;
}

static void expect_same_bytes(const char *a, const char *b) {
  size_t la, lb;
  char *x = read_file(a, &la), *y = read_file(b, &lb);
  cr_assert(la == lb && memcmp(x, y, la) == 0, "%s and %s differ", a, b);
  free(x);
  free(y);
}

/* What every report of the sort model holds: the loop IR's kernels, and
 * the op kinds an encoder with a padding mask and relu is made of at -O2
 * (its relu and the residual adds run in the linears' epilogues:
 * fuse-epilogue, before fuse-add-norm, so the pre-norm layernorms stand
 * alone; the embeddings' sum, gathers included, is one fused kernel). */
static void check_sort_report(const char *text, int runs, const char *listing) {
  ProfReport r;
  prof_parse(text, &r);
  prof_check(&r);
  prof_check_listing(&r, listing);
  cr_assert_eq(r.runs, runs, "%s", text);
  const char *ops[] = {"fused", "linear", "layernorm", "attention.flash"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    cr_assert(prof_kind(&r, ops[i]), "no op kind %s in:\n%s", ops[i], text);
  cr_assert_null(prof_kind(&r, "relu"), "relu is in the linears' epilogues at -O2:\n%s", text);
  cr_assert_eq(prof_kind(&r, "attention.flash")->kernels, 2, "two layers: %s", text);
  cr_assert_null(prof_kind(&r, "embed"), "the gathers are in the fused sum:\n%s", text);
  cr_assert_eq(prof_kind(&r, "fused")->kernels, 1, "%s", text);
}

Test(cli, profile_built_executable_and_jit, .timeout = 300) {
  /* one pass level for the listing and the artefacts, whatever the defaults */
  cr_assert_eq(tfmc("ir " SORT "/model.tfm --level loop -O2"), 0, "%s", err_text);
  char *listing = strdup(out_text);
  cr_assert_eq(tfmc("build " SORT "/model.tfm --weights " SORT "/weights.safetensors -O2 -o sort"),
               0, "%s", err_text);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && ./sort --inputs " SORT "/inputs.safetensors --outputs plain.safetensors "
           "--threads 2 && ./sort --inputs " SORT "/inputs.safetensors --outputs prof.safetensors "
           "--threads 2 --repeat 5 --profile >exe_out.txt 2>exe_err.txt",
           dir);
  cr_assert_eq(system(cmd), 0);
  expect_same_bytes("plain.safetensors", "prof.safetensors");
  size_t n;
  char *exe_out = read_file("exe_out.txt", &n), *exe_err = read_file("exe_err.txt", &n);
  cr_assert_eq(exe_out[0], '\0', "the report went to stdout: %s", exe_out);
  cr_assert(strstr(exe_err, "timing: backend executable"), "%s", exe_err);
  check_sort_report(exe_err, 5, listing);
  /* still the model: PyTorch's outputs */
  cr_assert_eq(tfmc("compare prof.safetensors " SORT "/expected.safetensors --atol 1e-4 --rtol 1e-4"),
               0, "%s", out_text);

  /* tfmc run --profile: the same report from the JIT's code */
  const char *run = "run " SORT "/model.tfm --weights " SORT "/weights.safetensors --inputs " SORT
                    "/inputs.safetensors -O2 --threads 2 --outputs ";
  snprintf(cmd, sizeof cmd, "%sjit_plain.safetensors", run);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  snprintf(cmd, sizeof cmd, "%sjit_prof.safetensors --profile --repeat 2", run);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  check_sort_report(err_text, 2, listing);
  expect_same_bytes("jit_plain.safetensors", "jit_prof.safetensors");
  snprintf(cmd, sizeof cmd, "%sjit_prof1.safetensors --profile", run);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  check_sort_report(err_text, 1, listing);
  cr_assert_eq(tfmc("run " SORT "/model.tfm --weights " SORT "/weights.safetensors --inputs " SORT
                    "/inputs.safetensors --backend interp --profile"),
               2, "%s", err_text);
  free(exe_out);
  free(exe_err);
  free(listing);
}

/* tfmc compare takes integer tensors (generation's `generated` i64 [B,N]
 * and `generated_lengths` i64 [B]) by value, whatever their integer dtype:
 * equal ids pass at tolerance 0, one differing id fails. */
Test(cli, compare_takes_integer_tensors) {
  int64_t ids[6] = {1, 0, 0, 3, 12, -1}, lengths[1] = {5};
  int32_t ids32[6] = {1, 0, 0, 3, 12, -1};
  RtStWrite a[2] = {ids_tensor("generated", RT_I64, ids, 1, 6),
                    {"generated_lengths", RT_I64, 1, {1}, lengths}};
  write_inputs("a.safetensors", a, 2);
  RtStWrite b[2] = {ids_tensor("generated", RT_I32, ids32, 1, 6), a[1]};
  write_inputs("b.safetensors", b, 2);
  cr_assert_eq(tfmc("compare b.safetensors a.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
  cr_assert(strstr(out_text, "generated_lengths [1]: max |diff| 0,"), "%s", out_text);
  ids32[3] = 4;
  write_inputs("b.safetensors", b, 2);
  cr_assert_eq(tfmc("compare b.safetensors a.safetensors"), 1, "%s", out_text);
  cr_assert(strstr(out_text, "generated      [1,6]: max |diff| 1, worst at [3] (4 vs 3), 1 over "
                             "tolerance: FAIL"),
            "%s", out_text);
}

/* tfmc run FILE.tfir: a graph IR file (as `tfmc ir` prints it, perhaps
 * edited by hand) runs through the same driver as its spec: the same
 * outputs, random weights by name, checkpoints by canonical names, and ids
 * bounded by the embedding they feed. */
Test(cli, runs_a_graph_ir_file) {
  int64_t ids[6] = {5, 7, 9, 3, 0, 0}, lengths[2] = {3, 1};
  RtStWrite t[2] = {ids_tensor("tokens", RT_I64, ids, 2, 3),
                    {"lengths", RT_I64, 1, {2}, lengths}};
  write_inputs("in.safetensors", t, 2);
  cr_assert_eq(tfmc("ir cls.tfm -O2"), 0, "%s", err_text);
  write_file("cls.tfir", out_text);
  cr_assert(strstr(out_text, "\n  pad 0\n"), "the graph lacks the spec's pad id:\n%s", out_text);
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 3 --inputs in.safetensors --outputs a.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("run cls.tfir --init random --seed 3 --inputs in.safetensors --outputs b.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare b.safetensors a.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
  cr_assert_eq(tfmc("run cls.tfir --init random --seed 3 --backend interp --inputs in.safetensors --outputs c.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare c.safetensors a.safetensors"), 0, "%s", out_text);
  cr_assert_eq(tfmc("run cls.tfir --init random --tokens \"4 8 15\""), 0, "%s", err_text);
  cr_assert(strstr(out_text, "class_logits"), "%s", out_text);
  EXPECT_ERR(tfmc("run cls.tfir --init random --tokens \"4 50\""), "out of range [0, 50)");
  /* the graph keeps the spec's pad id (`pad 0`): padding without lengths */
  write_inputs("ids.safetensors", t, 1);
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 3 --inputs ids.safetensors --outputs d.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("run cls.tfir --init random --seed 3 --inputs ids.safetensors --outputs e.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare e.safetensors d.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
  cr_assert_eq(tfmc("compare e.safetensors a.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
  /* no weight map: a checkpoint needs the canonical names */
  write_inputs("w.safetensors", t, 1);
  EXPECT_ERR(tfmc("run cls.tfir --weights w.safetensors --tokens 4"), "does not fit graph 'cls'");
  EXPECT_ERR(tfmc("run cls.tfir --init random --tokens 4 --attention encoder.0"), "applies to specs");
}

/* --threads 0 means one thread per online CPU, on tfmc run as on
 * executables and in model.h; out-of-range values are usage errors. */
Test(cli, threads_zero_means_every_cpu) {
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 5 --tokens \"4 8 15\" --threads 0 --outputs a.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("run cls.tfm --init random --seed 5 --tokens \"4 8 15\" --threads 1 --outputs b.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare a.safetensors b.safetensors"), 0, "%s", out_text);
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens 4 --threads -1"), 2);
  cr_assert(strstr(err_text, "--threads takes 0..256"), "%s", err_text);
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens 4 --threads 257"), 2);
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens 4 --threads="), 2);
}

/* A checkpoint under another naming convention: a one-line summary comes
 * first, naming the preset its tensor names look like, then the details. */
Test(cli, wrong_checkpoint_names_the_convention) {
  static float w[16 * 48];
  RtStWrite t[2] = {{"encoder.layers.0.self_attn.in_proj_weight", RT_F32, 2, {48, 16}, w},
                    {"encoder.layers.0.linear1.weight", RT_F32, 2, {32, 16}, w}};
  write_inputs("torchnn.safetensors", t, 2);
  EXPECT_ERR(tfmc("run cls.tfm --weights torchnn.safetensors --tokens 4"), "missing tensor");
  const char *note = strstr(err_text, "note: 0 of ");
  cr_assert(note, "%s", err_text);
  cr_assert(strstr(note, "look like the 'torch.nn' convention: try `preset \"torch.nn\"`"), "%s",
            err_text);
  cr_assert(note < strstr(err_text, "error: missing tensor"), "the summary must come first:\n%s",
            err_text);
}

/* On a terminal a long compile and a long --repeat loop say how far they
 * are (stderr lines rewritten with \r, cleared at the end); redirected,
 * stderr holds only the timing line, as before. The terminal comes from
 * util-linux's `script`. */
Test(cli, progress_only_on_a_terminal, .timeout = 300) {
  if (system("command -v script >/dev/null 2>&1") != 0) cr_skip_test("no `script` here");
  char tokens[2048] = "";
  for (int i = 0; i < 128; i++) {
    char t[16];
    snprintf(t, sizeof t, "%d ", (i * 7919) % 30522);
    strcat(tokens, t);
  }
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd %s && script -qec \"%s/tfmc run %s/bench/backends/bert_base.tfm --init random "
           "--tokens '%s' --repeat 12 --threads 1 >/dev/null\" tty.txt >/dev/null 2>&1",
           dir, TFMC_BINARY_DIR, TFMC_SOURCE_DIR, tokens);
  cr_assert_eq(system(cmd), 0);
  char p[512], tty[65536];
  snprintf(p, sizeof p, "%s/tty.txt", dir);
  slurp(p, tty, sizeof tty);
  cr_assert(strstr(tty, "tfmc: compiling 91 kernels (17 functions) with LLVM..."), "%s", tty);
  cr_assert(strstr(tty, "\rtiming: run "), "%s", tty);
  cr_assert(strstr(tty, "timing: backend jit, compile"), "%s", tty);
  snprintf(cmd, sizeof cmd,
           "run %s/bench/backends/bert_base.tfm --init random --tokens '%s' --repeat 2 --threads 1",
           TFMC_SOURCE_DIR, tokens);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  cr_assert_null(strstr(err_text, "compiling"), "%s", err_text);
  cr_assert_null(strchr(err_text, '\r'), "%s", err_text);
}

/* `head pooler`: BertModel's outputs, the hidden states and the pooled
 * tanh(pooler(x[:,0])). Checked against PyTorch through the BERT golden:
 * its classifier applied to our pooled output must give the golden's
 * class_logits. `layers 0` is the embeddings alone. */
static float *read_tensor(const char *path, const char *name, int64_t *n) {
  RtSafetensors *st;
  char err[512];
  cr_assert_eq(rt_st_open(path, &st, err, sizeof err), 0, "%s", err);
  const RtStTensor *t = rt_st_find(st, name);
  cr_assert(t, "%s lacks %s", path, name);
  *n = rt_st_numel(t);
  float *v = malloc((size_t)*n * sizeof *v + 4);
  cr_assert_eq(rt_st_read_f32(t, v, err, sizeof err), 0, "%s", err);
  rt_st_close(st);
  return v;
}

Test(cli, head_pooler_matches_bertmodel) {
  const char *spec = "model bert {\n  arch encoder\n  vocab 90\n  d_model 64\n  heads 4\n"
                     "  layers 2\n  ffn 128 gelu\n  norm post eps 1e-12\n  position learned max 40\n"
                     "  embed_norm eps 1e-12\n  token_types 2\n  tokens pad 0\n"
                     "  mask encoder padding\n  head pooler\n}\n"
                     "weights bert {\n  preset \"hf-bert\"\n  ignore \"classifier.*\"\n}\n";
  write_file("bp.tfm", spec);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "run bp.tfm --weights %s/tests/golden/bert/weights.safetensors --inputs "
           "%s/tests/golden/bert/inputs.safetensors --outputs bp.safetensors",
           TFMC_SOURCE_DIR, TFMC_SOURCE_DIR);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  char out[512], w[512], ref[512];
  snprintf(out, sizeof out, "%s/bp.safetensors", dir);
  snprintf(w, sizeof w, "%s/tests/golden/bert/weights.safetensors", TFMC_SOURCE_DIR);
  snprintf(ref, sizeof ref, "%s/tests/golden/bert/expected.safetensors", TFMC_SOURCE_DIR);
  int64_t np, nw, nb, nr, nh;
  float *pooled = read_tensor(out, "pooled", &np);
  float *hidden = read_tensor(out, "hidden", &nh);
  float *cw = read_tensor(w, "classifier.weight", &nw);
  float *cb = read_tensor(w, "classifier.bias", &nb);
  float *logits = read_tensor(ref, "class_logits", &nr);
  int64_t d = 64, classes = nb, batch = np / d;
  cr_assert_eq(nw, classes * d);
  cr_assert_eq(nr, batch * classes);
  cr_assert_eq(nh % (batch * d), 0);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t k = 0; k < classes; k++) {
      double y = cb[k];
      for (int64_t j = 0; j < d; j++) y += (double)cw[k * d + j] * pooled[b * d + j];
      double want = logits[b * classes + k];
      cr_assert(fabs(y - want) <= 1e-4 + 1e-4 * fabs(want), "row %lld class %lld: %g vs %g",
                (long long)b, (long long)k, y, want);
    }
  free(pooled), free(hidden), free(cw), free(cb), free(logits);
  /* refusals: a pooler needs an encoder */
  write_file("bad.tfm", "model g {\n  arch decoder\n  vocab 9\n  d_model 8\n  heads 2\n  layers 1\n"
                        "  ffn 16 relu\n  position learned max 8\n  head pooler\n}\n");
  EXPECT_ERR(tfmc("check bad.tfm"), "a pooler reads position 0 of the encoder output");
  /* layers 0: the embeddings alone */
  write_file("emb.tfm", "model e {\n  arch encoder\n  vocab 9\n  d_model 8\n  heads 2\n  layers 0\n"
                        "  ffn 16 relu\n  position learned max 8\n  head none\n}\n");
  cr_assert_eq(tfmc("check emb.tfm"), 0, "%s", err_text);
  cr_assert_eq(tfmc("run emb.tfm --init random --tokens \"1 2 3\""), 0, "%s", err_text);
  cr_assert(strstr(out_text, "hidden"), "%s", out_text);
}

/* The files --tokenizer reads are inputs: an output naming one is refused
 * and the file is left as it was. */
Test(cli, outputs_never_overwrite_tokenizer_files) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp %s/tests/data/tokenizer/gpt2/vocab.json %s/tests/data/tokenizer/gpt2/merges.txt %s/",
           TFMC_SOURCE_DIR, TFMC_SOURCE_DIR, dir);
  cr_assert_eq(system(cmd), 0);
  char before[512], p[512];
  snprintf(p, sizeof p, "%s/vocab.json", dir);
  slurp(p, before, sizeof before);
  EXPECT_ERR(tfmc("run cls.tfm --init random --tokens \"1 2\" --tokenizer gpt2:. --outputs vocab.json"),
             "refusing to overwrite it");
  EXPECT_ERR(tfmc("run cls.tfm --init random --tokens \"1 2\" --tokenizer gpt2:vocab.json,merges.txt "
                  "--outputs ./merges.txt"),
             "refusing to overwrite it");
  char after[512];
  slurp(p, after, sizeof after);
  cr_assert_str_eq(after, before);
}
