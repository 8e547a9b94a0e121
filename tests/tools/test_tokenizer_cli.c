/* tests/tools/test_tokenizer_cli.c — --tokenizer on `tfmc run` and on
 * executables from `tfmc build`: text encoded by GPT-2 BPE or BERT
 * WordPiece (the vocabularies in tests/data/tokenizer/), the summary
 * printed through the tokenizer's decode, ids beyond the model's vocab and
 * bad specs refused with messages, usage mistakes exiting 2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DATA TFMC_SOURCE_DIR "/tests/data/tokenizer/"
#define GPT2 "gpt2:" DATA "gpt2"
#define BERT "wordpiece:" DATA "bert-base-uncased/vocab.txt:uncased"

static char dir[256];
static char out_text[65536], err_text[65536];

/* GPT-2's vocabulary, a tiny model */
static const char *gpt_spec = "model tiny {\n"
                              "  arch decoder\n"
                              "  vocab 50257\n"
                              "  d_model 16\n"
                              "  heads 2\n"
                              "  layers 1\n"
                              "  ffn 32 gelu_tanh\n"
                              "  norm pre eps 1e-5\n"
                              "  final_norm yes\n"
                              "  position learned max 32\n"
                              "  mask decoder causal\n"
                              "  head logits tied\n"
                              "}\n";

/* bert-base-uncased's vocabulary, an encoder without token types */
static const char *bert_spec = "model enc {\n"
                               "  arch encoder\n"
                               "  vocab 30522\n"
                               "  d_model 16\n"
                               "  heads 2\n"
                               "  layers 1\n"
                               "  ffn 32 gelu\n"
                               "  position learned max 32\n"
                               "  tokens pad 0\n"
                               "  mask encoder padding\n"
                               "  head logits\n"
                               "}\n";

static const char *small_spec = "model small {\n"
                                "  arch decoder\n"
                                "  vocab 100\n"
                                "  d_model 16\n"
                                "  heads 2\n"
                                "  layers 1\n"
                                "  ffn 32 relu\n"
                                "  position learned max 8\n"
                                "  mask decoder causal\n"
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
  if (f)
    fclose(f);
}

/* Runs `cd dir && CMD` (TFMC replaced by the built tfmc); returns the exit
 * status (or 128+signal) with stdout and stderr in out_text / err_text. */
static int run(const char *cmd_text) {
  char cmd[4096], p[512];
  const char *tf = strstr(cmd_text, "TFMC ");
  if (tf == cmd_text)
    snprintf(cmd, sizeof cmd, "cd %s && %s/tfmc %s >stdout.txt 2>stderr.txt", dir,
             TFMC_BINARY_DIR, cmd_text + 5);
  else
    snprintf(cmd, sizeof cmd, "cd %s && %s >stdout.txt 2>stderr.txt", dir, cmd_text);
  int st = system(cmd);
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  slurp(p, out_text, sizeof out_text);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  slurp(p, err_text, sizeof err_text);
  if (WIFSIGNALED(st))
    return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_tokcli_XXXXXX");
  cr_assert(mkdtemp(dir));
  write_file("tiny.tfm", gpt_spec);
  write_file("enc.tfm", bert_spec);
  write_file("small.tfm", small_spec);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(tokenizer_cli, .init = setup, .fini = teardown);

#define EXPECT(status, want, text, fragment)                                                 \
  do {                                                                                       \
    int st_ = (status);                                                                      \
    cr_assert_eq(st_, want, "exit %d, stderr: %s", st_, err_text);                           \
    cr_assert(strstr(text, fragment), "lacks '%s':\n%s", fragment, text);                    \
  } while (0)

Test(tokenizer_cli, run_gpt2_text_prints_decoded_tokens, .timeout = 120) {
  EXPECT(run("TFMC run tiny.tfm --init random --text 'Hello, world' --tokenizer " GPT2), 0,
         out_text, "  input:  \"Hello\" \",\" \" world\"\n  text:   \"Hello, world\"\n");
  cr_assert(strstr(out_text, "logits [1,3,50257], argmax per position:\n"), "%s", out_text);
  /* the same vocab.json and merges.txt named one by one; ids decoded */
  EXPECT(run("TFMC run tiny.tfm --init random --tokens '15496 11 995' --tokenizer gpt2:" DATA
             "gpt2/vocab.json," DATA "gpt2/merges.txt"),
         0, out_text, "  text:   \"Hello, world\"\n");
  /* any UTF-8 goes through; what is not printable comes back escaped */
  EXPECT(run("TFMC run tiny.tfm --init random --text \"$(printf 'caf\\303\\251\\t\\342\\234\\250')\" "
             "--tokenizer " GPT2),
         0, out_text, "  text:   \"café\\t✨\"\n");
}

Test(tokenizer_cli, run_wordpiece_text, .timeout = 120) {
  EXPECT(run("TFMC run enc.tfm --init random --text 'Héllo, WORLD!' --tokenizer " BERT), 0,
         out_text,
         "  input:  \"[CLS]\" \"hello\" \",\" \"world\" \"!\" \"[SEP]\"\n"
         "  text:   \"[CLS] hello , world ! [SEP]\"\n");
}

Test(tokenizer_cli, refusals_and_usage, .timeout = 120) {
  EXPECT(run("TFMC run small.tfm --init random --text 'Hello' --tokenizer " GPT2), 1, err_text,
         "tfmc: --text: token 0 'Hello' has id 15496, beyond the model's vocab 100\n");
  EXPECT(run("TFMC run tiny.tfm --init random --text \"$(yes word | head -40 | tr '\\n' ' ')\" "
             "--tokenizer " GPT2),
         1, err_text, "tfmc: --text: 41 tokens, longer than the model's max_len 32\n");
  EXPECT(run("TFMC run tiny.tfm --init random --text \"$(printf 'ab\\377')\" --tokenizer " GPT2),
         1, err_text, "--text: the text is not valid UTF-8 (at byte offset 2)");
  EXPECT(run("TFMC run tiny.tfm --init random --text x --tokenizer bpe:x"), 1, err_text,
         "tfmc: --tokenizer: unknown tokenizer 'bpe:x'");
  EXPECT(run("TFMC run tiny.tfm --init random --text x --tokenizer gpt2:/nonexistent"), 1,
         err_text, "cannot read /nonexistent/vocab.json");
  EXPECT(run("TFMC run tiny.tfm --init random --text x --tokenizer " GPT2 " --vocab v.txt"), 2,
         err_text, "give one of --vocab and --tokenizer");
  EXPECT(run("TFMC run tiny.tfm --init random --text x"), 2, err_text,
         "--text needs --vocab or --tokenizer");
}

Test(tokenizer_cli, built_executable_takes_the_same_option, .timeout = 300) {
  cr_assert_eq(run("TFMC build tiny.tfm --init random --seed 5 -o tiny"), 0, "%s", err_text);
  EXPECT(run("./tiny --text 'Hello, world' --tokenizer " GPT2), 0, out_text,
         "  input:  \"Hello\" \",\" \" world\"\n  text:   \"Hello, world\"\n");
  char exe_out[65536];
  strcpy(exe_out, out_text);
  /* the same summary as the JIT with the same weights */
  EXPECT(run("TFMC run tiny.tfm --init random --seed 5 --text 'Hello, world' --tokenizer " GPT2),
         0, out_text, "  text:");
  cr_assert_str_eq(out_text, exe_out);
  EXPECT(run("./tiny --text x --tokenizer wordpiece:/nonexistent.txt"), 1, err_text,
         "tiny: --tokenizer: cannot read /nonexistent.txt");
  EXPECT(run("./tiny --text x --vocab v.txt --tokenizer " GPT2), 2, err_text,
         "give one of --vocab and --tokenizer");
  EXPECT(run("./tiny --text x"), 2, err_text, "--text needs --vocab or --tokenizer");
  EXPECT(run("./tiny --help"), 0, out_text, "--tokenizer SPEC");
}
