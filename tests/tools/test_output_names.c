/* tests/tools/test_output_names.c — `--output NAME` (run, build, emit-c):
 * named intermediates become outputs (values pinned against PyTorch by the
 * goldens tests/golden/bert_outputs and gpt2_outputs); here the command
 * line around it: `tfmc check` lists the names; repeated and comma-listed
 * names add up; a name the head already outputs or one asked twice is
 * output once; two names of one value give two equal outputs on the JIT
 * and the interpreter; an executable built with names outputs them;
 * unknown names, empty names and .tfir graphs are refused with a
 * message, and so is --output with --generate (tfmc run and executables,
 * exit 1, pointing at --outputs). */
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
    "  layers 3\n"
    "  ffn 32 gelu\n"
    "  position learned max 12\n"
    "  tokens pad 0\n"
    "  head classifier 3 pooler\n"
    "}\n";

static const char *encdec_text =
    "model tr {\n"
    "  arch encoder_decoder\n"
    "  vocab src 20 tgt 30\n"
    "  d_model 16\n"
    "  heads 2\n"
    "  layers encoder 1 decoder 2\n"
    "  ffn 32 relu\n"
    "  position sinusoidal\n"
    "  head logits\n"
    "}\n";

static const char *lm_text =
    "model lm {\n"
    "  arch decoder\n"
    "  vocab 40\n"
    "  d_model 16\n"
    "  heads 2\n"
    "  layers 2\n"
    "  ffn 32 gelu\n"
    "  norm pre\n"
    "  final_norm yes\n"
    "  position learned max 16\n"
    "  mask decoder causal\n"
    "  head logits tied\n"
    "}\n";

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f) fclose(f);
}

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

static int sh(const char *fmt, const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && %s %s >stdout.txt 2>stderr.txt", dir, fmt, args);
  int st = system(cmd);
  char p[512];
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  slurp(p, out_text, sizeof out_text);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  slurp(p, err_text, sizeof err_text);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static int tfmc(const char *args) { return sh(TFMC_BINARY_DIR "/tfmc", args); }

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_outnames_XXXXXX");
  cr_assert(mkdtemp(dir));
  write_file("cls.tfm", spec_text);
  write_file("tr.tfm", encdec_text);
  write_file("lm.tfm", lm_text);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(output_names, .init = setup, .fini = teardown);

/* each "NAME [" heading of a printed output, counted */
static int printed(const char *name) {
  char want[128];
  snprintf(want, sizeof want, "%s [", name);
  int n = 0;
  for (const char *p = out_text; (p = strstr(p, want)); p++)
    n += p == out_text || p[-1] == '\n';
  return n;
}

Test(output_names, check_lists_the_names) {
  cr_assert_eq(tfmc("check cls.tfm"), 0, "%s", err_text);
  cr_expect(strstr(out_text, "--output names  embeddings, enc.0.out .. enc.2.out, encoder.out, "
                             "hidden, pooled\n"), "%s", out_text);
  cr_assert_eq(tfmc("check tr.tfm"), 0, "%s", err_text);
  cr_expect(strstr(out_text, "--output names  src_embeddings, enc.0.out, encoder.out, "
                             "tgt_embeddings, dec.0.out, dec.1.out, decoder.out, hidden\n"),
            "%s", out_text);
  cr_assert_eq(tfmc("check lm.tfm"), 0, "%s", err_text);
  cr_expect(strstr(out_text, "--output names  embeddings, dec.0.out, dec.1.out, decoder.out, "
                             "hidden\n"), "%s", out_text);
}

Test(output_names, repeated_and_listed_names_add_up) {
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens \"3 4 5\" --output enc.1.out,pooled "
                    "--output=embeddings --output pooled"),
               0, "%s", err_text);
  cr_expect_eq(printed("class_logits"), 1, "%s", out_text);
  cr_expect_eq(printed("enc.1.out"), 1, "%s", out_text);
  cr_expect_eq(printed("embeddings"), 1, "%s", out_text);
  cr_expect_eq(printed("pooled"), 1, "%s", out_text);
  cr_expect(strstr(out_text, "enc.1.out [1,3,16]"), "%s", out_text);
  cr_expect(strstr(out_text, "pooled [1,16]"), "%s", out_text);
}

/* hidden and encoder.out are one value: two outputs, equal, on both backends */
Test(output_names, two_names_of_one_value, .timeout = 120) {
  const char *backends[] = {"jit", "interp"};
  for (int i = 0; i < 2; i++) {
    char args[512];
    snprintf(args, sizeof args, "run cls.tfm --init random --tokens \"3 4 5 6\" --backend %s "
             "--output encoder.out,hidden,enc.2.out --outputs %s.safetensors", backends[i],
             backends[i]);
    cr_assert_eq(tfmc(args), 0, "%s: %s", backends[i], err_text);
  }
  cr_assert_eq(tfmc("compare jit.safetensors interp.safetensors"), 0, "%s", out_text);
  cr_expect(strstr(out_text, "hidden "), "%s", out_text);
  cr_expect(strstr(out_text, "encoder.out "), "%s", out_text);
  /* hidden alone is the same numbers as hidden beside the others */
  cr_assert_eq(tfmc("run cls.tfm --init random --tokens \"3 4 5 6\" --output hidden "
                    "--outputs h.safetensors"), 0, "%s", err_text);
  cr_assert_eq(tfmc("compare jit.safetensors h.safetensors --atol 0 --rtol 0"), 0, "%s", out_text);
}

Test(output_names, refusals) {
  cr_expect_eq(tfmc("run cls.tfm --init random --tokens \"3 4\" --output enc.3.out"), 1);
  cr_expect(strstr(err_text, "--output enc.3.out: model 'cls' has no intermediate named "
                             "'enc.3.out' (it has: embeddings, enc.0.out .. enc.2.out, "
                             "encoder.out, hidden, pooled)"), "%s", err_text);
  cr_expect_eq(tfmc("run cls.tfm --init random --tokens \"3 4\" --output hidden,"), 2);
  cr_expect(strstr(err_text, "--output takes intermediate names"), "%s", err_text);
  /* generation: refused (exit 1), pointing at --outputs; --profile is usage */
  cr_expect_eq(tfmc("run lm.tfm --init random --tokens \"3 4\" --generate 2 --output hidden"), 1);
  cr_expect(strstr(err_text, "tfmc: --output hidden: --output NAME adds a named intermediate to a "
                             "forward run's outputs; --generate has no such outputs: it writes "
                             "generated and generated_lengths (and attention, compiled with "
                             "--attention) to --outputs FILE\n"), "%s", err_text);
  cr_expect_eq(tfmc("run lm.tfm --init random --tokens \"3 4\" --generate 2 --output o.safetensors"),
               1);
  cr_expect(strstr(err_text, "(did you mean --outputs o.safetensors?)"), "%s", err_text);
  cr_expect_eq(access("o.safetensors", F_OK), -1);
  cr_expect_eq(tfmc("run lm.tfm --init random --tokens \"3 4\" --generate 2 --profile"), 2);
  cr_expect(strstr(err_text, "--generate does not take --profile yet"), "%s", err_text);
  cr_expect_eq(tfmc("build cls.tfm --init random -o exe --output bogus"), 1);
  cr_expect(strstr(err_text, "no intermediate named 'bogus'"), "%s", err_text);
  cr_expect_eq(access("exe", F_OK), -1);
  cr_expect_eq(tfmc("ir cls.tfm --output hidden"), 2); /* ir has no --output */
  write_file("g.tfir", "graph g {\n}\n");
  cr_expect_eq(tfmc("run g.tfir --init random --tokens \"1\" --output hidden"), 1);
  cr_expect(strstr(err_text, "--output applies to specs, not .tfir files"), "%s", err_text);
}

/* the executable carries the outputs it was built with */
Test(output_names, built_executable_outputs_them, .timeout = 300) {
  cr_assert_eq(tfmc("build lm.tfm --init random -o lm --output dec.0.out --output hidden"), 0,
               "%s", err_text);
  cr_assert_eq(sh("./lm", "--tokens \"3 4 5\""), 0, "%s", err_text);
  cr_expect_eq(printed("logits"), 1, "%s", out_text);
  cr_expect(strstr(out_text, "dec.0.out [1,3,16]"), "%s", out_text);
  cr_expect(strstr(out_text, "hidden [1,3,16]"), "%s", out_text);
  /* its generation refuses --output as tfmc run --generate does */
  cr_expect_eq(sh("./lm", "--tokens \"3 4\" --generate 2 --output hidden"), 1);
  cr_expect(strstr(err_text, "lm: --output hidden: --output NAME adds a named intermediate"),
            "%s", err_text);
  cr_expect_eq(sh("./lm", "--tokens \"3 4\" --generate 2 --output=o.safetensors"), 1);
  cr_expect(strstr(err_text, "(did you mean --outputs o.safetensors?)"), "%s", err_text);
  cr_expect_eq(strstr(out_text, "\n") != NULL, 0, "printed: %s", out_text);
}
