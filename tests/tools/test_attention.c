/* tests/tools/test_attention.c — `tfmc attention` end to end: the picture
 * is well-formed XML (xmllint) that a renderer draws (rsvg-convert); it
 * has one cell per layer x head x query x key; a cell's colour is viridis
 * of the probability `tfmc run --attention all --outputs` dumps for it;
 * labels are the tokens, escaped; --layer / --head / --batch-row pick what
 * is drawn; cross-attention puts target tokens down and source tokens
 * across; bad requests are refused and nothing the user wrote is
 * overwritten.
 *
 * During generation (--generate): `tfmc run --attention LAYER` writes one
 * row per generated token, each the row of a full forward pass over the
 * sequence so far (GPT-2-like decoder self-attention, an Annotated-like
 * encoder-decoder's cross-attention over a padded source); `tfmc attention
 * --generate` draws them, generated tokens down; the trained reverse
 * example's cross-attention is the anti-diagonal a reversal needs and its
 * README picture is what tfmc draws.
 *
 * Executables compiled with --attention (tfmc build, and tfmc emit-c built
 * with its Makefile) draw the same picture with --attention-map: byte for
 * byte what tfmc attention draws for the same spec, weights and inputs, a
 * forward pass of an encoder and the generation of a decoder and an
 * encoder-decoder; their refusals are said and nothing is overwritten.
 *
 * Each test writes its spec and inputs into a fresh temporary directory and
 * runs the built tfmc through the shell, as tests/tools/test_cli.c does. */
#include "runtime/rt_attnmap.h"
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];
static char err_text[65536];
static char *svg; /* the picture last read by read_svg (malloc'd) */

/* 2 layers, 2 heads, padding mask, vocabulary of 12 */
static const char *enc_spec = "model enc {\n"
                              "  arch encoder\n"
                              "  vocab 12\n"
                              "  d_model 16\n"
                              "  heads 2\n"
                              "  layers 2\n"
                              "  ffn 32 relu\n"
                              "  position learned max 12\n"
                              "  tokens pad 0\n"
                              "  mask encoder padding\n"
                              "  head logits\n"
                              "  max_batch 2\n"
                              "}\n";

static const char *encdec_spec = "model translate {\n"
                                 "  arch encoder_decoder\n"
                                 "  vocab src 20 tgt 20\n"
                                 "  d_model 16\n"
                                 "  heads 2\n"
                                 "  layers encoder 1 decoder 1\n"
                                 "  ffn 32 relu\n"
                                 "  norm post\n"
                                 "  position sinusoidal max 12\n"
                                 "  tokens pad 1\n"
                                 "  mask encoder padding\n"
                                 "  mask decoder causal\n"
                                 "  mask cross padding\n"
                                 "  head log_softmax\n"
                                 "}\n";

/* ids 0..11: symbols that need escaping, one invalid UTF-8 byte, one too
 * long to show whole */
static const char vocab_text[] = "<pad>\n&\na\"b'c\n<b>x</b>\n\xff\x01z\n"
                                 "abcdefghijklmnopqrstuvwxyz\nf\ng\nh\ni\nj\nk\n";

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

static bool exists(const char *name) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &st) == 0;
}

/* Runs a shell command in dir; returns the exit status (or 128+signal),
 * stderr in err_text. */
static int sh(const char *cmd) {
  char full[4096], p[512];
  snprintf(full, sizeof full, "cd %s && %s 2>stderr.txt", dir, cmd);
  int st = system(full);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  FILE *f = fopen(p, "r");
  size_t k = f ? fread(err_text, 1, sizeof err_text - 1, f) : 0;
  err_text[k] = 0;
  if (f) fclose(f);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static int tfmc(const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s/tfmc %s >stdout.txt", TFMC_BINARY_DIR, args);
  return sh(cmd);
}

static void read_svg(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  cr_assert(f, "no %s", name);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  free(svg);
  svg = malloc((size_t)n + 1);
  cr_assert(svg && fread(svg, 1, (size_t)n, f) == (size_t)n);
  svg[n] = 0;
  fclose(f);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The k-th heatmap cell (from 0): its fill colour and its tooltip. */
static void cell(int k, unsigned rgb[3], char *title, size_t n) {
  const char *p = svg;
  for (int i = 0; i <= k; i++) {
    p = strstr(p, "<rect class=\"cell\"");
    cr_assert(p, "no cell %d", k);
    p++;
  }
  const char *fill = strstr(p, "fill=\"#");
  cr_assert(fill && sscanf(fill, "fill=\"#%2x%2x%2x\"", &rgb[0], &rgb[1], &rgb[2]) == 3);
  const char *t = strstr(p, "<title>"), *e = strstr(p, "</title>");
  cr_assert(t && e && e > t);
  t += 7;
  snprintf(title, n, "%.*s", (int)(e - t), t);
}

/* The probabilities of output `name` in the safetensors file. */
static float *read_probs(const char *file, const char *name, int64_t dims[4]) {
  char p[512], err[512];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  RtSafetensors *st;
  cr_assert_eq(rt_st_open(p, &st, err, sizeof err), 0, "%s", err);
  const RtStTensor *t = rt_st_find(st, name);
  cr_assert(t, "%s has no %s", file, name);
  cr_assert_eq(t->rank, 4);
  for (int i = 0; i < 4; i++) dims[i] = t->shape[i];
  float *x = malloc((size_t)rt_st_numel(t) * 4);
  cr_assert(x && rt_st_read_f32(t, x, err, sizeof err) == 0, "%s", err);
  rt_st_close(st);
  return x;
}

/* The cell at flat index k has the colour viridis gives prob, and its
 * tooltip shows prob. */
static void expect_cell(int k, float prob) {
  unsigned got[3];
  unsigned char want[3];
  char title[256], num[32];
  cell(k, got, title, sizeof title);
  rt_attnmap_viridis(prob, want);
  for (int ch = 0; ch < 3; ch++)
    cr_assert_eq(got[ch], want[ch], "cell %d (p = %g): channel %d is %02x, viridis %02x", k,
                 prob, ch, got[ch], want[ch]);
  snprintf(num, sizeof num, ": %.4f", prob);
  cr_assert(strstr(title, num), "cell %d tooltip '%s' lacks %s", k, title, num);
}

static void write_ids(const char *file, const char **names, const int64_t *const *ids,
                      const int64_t (*shape)[2], int n) {
  RtStWrite w[4];
  char p[512], err[512];
  for (int i = 0; i < n; i++) w[i] = (RtStWrite){names[i], RT_I64, 2, {shape[i][0], shape[i][1]}, ids[i]};
  snprintf(p, sizeof p, "%s/%s", dir, file);
  cr_assert_eq(rt_st_write(p, w, n, NULL, 0, err, sizeof err), 0, "%s", err);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_attn_XXXXXX");
  cr_assert(mkdtemp(dir));
  write_file("enc.tfm", enc_spec);
  write_file("translate.tfm", encdec_spec);
  write_file("v.txt", vocab_text);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
  free(svg);
  svg = NULL;
}

TestSuite(attention, .init = setup, .fini = teardown);

#define T 6 /* tokens of the --text below */
#define TEXT "--text '& a\"b'\\''c <b>x</b> \xff\x01z abcdefghijklmnopqrstuvwxyz <pad>'"

Test(attention, every_layer_and_head_valid_svg_with_the_run_s_colours) {
  cr_assert_eq(tfmc("attention enc.tfm --init random --seed 3 --vocab v.txt " TEXT " -o maps.svg"),
               0, "%s", err_text);
  cr_assert_eq(sh("xmllint --noout maps.svg"), 0, "xmllint: %s", err_text);
  cr_assert_eq(sh("rsvg-convert maps.svg -o maps.png"), 0, "rsvg-convert: %s", err_text);
  read_svg("maps.svg");
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 2 * 2 * T * T);
  cr_assert(strstr(svg, "width=\"") && strstr(svg, "px\" height=\""), "sizes in pixels");
  cr_assert(strstr(svg, "attention probabilities of enc: 2 layers, 2 heads, batch row 0"));
  cr_assert(strstr(svg, "encoder.1 \xC2\xB7 head 1"));
  cr_assert(strstr(svg, "<linearGradient id=\"viridis\""), "legend bar");
  cr_assert(strstr(svg, ">0.75</text>"), "legend ticks");
  /* the labels: escaped, invalid bytes replaced, long ones cut */
  cr_assert(strstr(svg, ">&lt;pad&gt;</text>"));
  cr_assert(strstr(svg, ">&amp;</text>"));
  cr_assert(strstr(svg, ">a&quot;b&apos;c</text>"));
  cr_assert(strstr(svg, ">&lt;b&gt;x&lt;/b&gt;</text>"));
  cr_assert(strstr(svg, ">\xEF\xBF\xBD\xEF\xBF\xBDz</text>"));
  cr_assert(strstr(svg, ">abcdefghijk\xE2\x80\xA6</text>"));
  cr_assert_null(strstr(svg, "<pad>"));
  cr_assert_null(strstr(svg, "<b>"));

  /* colours: the same model and inputs, every layer dumped */
  cr_assert_eq(tfmc("run enc.tfm --init random --seed 3 --vocab v.txt " TEXT
                    " --attention all --outputs out.safetensors"),
               0, "%s", err_text);
  int64_t d[4];
  for (int layer = 0; layer < 2; layer++) {
    float *p = read_probs("out.safetensors", layer ? "attention.encoder.1" : "attention.encoder.0", d);
    cr_assert(d[0] == 1 && d[1] == 2 && d[2] == T && d[3] == T);
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
          int k = ((layer * 2 + h) * T + i) * T + j;
          expect_cell(k, p[(h * T + i) * T + j]);
        }
    /* the padding key (last) gets nothing; the rest sums to 1 */
    cr_assert_eq(p[T - 1], 0.0f);
    free(p);
  }
  unsigned rgb[3];
  char title[256];
  cell(1, rgb, title, sizeof title);
  cr_assert(strncmp(title, "&amp; \xE2\x86\x92 a&quot;b&apos;c: ", 23) == 0, "%s", title);
}

Test(attention, one_layer_one_head_one_batch_row_as_html) {
  /* batch of 2, lengths 3 and 5 (pad 0); no vocabulary: ids as labels */
  int64_t ids[10] = {7, 8, 9, 0, 0, 10, 11, 3, 4, 6};
  const char *names[] = {"tokens"};
  const int64_t *data[] = {ids};
  const int64_t shape[][2] = {{2, 5}};
  write_ids("in.safetensors", names, data, shape, 1);
  cr_assert_eq(tfmc("attention enc.tfm --init random --seed 5 --inputs in.safetensors "
                    "--layer encoder.1 --head 1 --batch-row 1 -o one.html"),
               0, "%s", err_text);
  read_svg("one.html");
  cr_assert(strncmp(svg, "<!DOCTYPE html>", 15) == 0);
  cr_assert(strstr(svg, "<meta charset=\"utf-8\">"));
  cr_assert(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  cr_assert(strstr(svg, "</svg>\n</body>\n</html>\n"));
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 5 * 5);
  cr_assert(strstr(svg, "attention probabilities of enc: encoder.1, head 1, batch row 1"));
  cr_assert(strstr(svg, ">10</text>") && strstr(svg, ">6</text>"), "row 1's ids as labels");
  cr_assert_eq(tfmc("run enc.tfm --init random --seed 5 --inputs in.safetensors "
                    "--attention encoder.1 --outputs out.safetensors"),
               0, "%s", err_text);
  int64_t d[4];
  float *p = read_probs("out.safetensors", "attention", d);
  cr_assert(d[0] == 2 && d[1] == 2 && d[2] == 5 && d[3] == 5);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++) expect_cell(i * 5 + j, p[((1 * 2 + 1) * 5 + i) * 5 + j]);
  free(p);
}

Test(attention, cross_attention_targets_down_sources_across) {
  int64_t src[5] = {4, 5, 6, 7, 8}, tgt[3] = {2, 9, 10};
  const char *names[] = {"src", "tgt"};
  const int64_t *data[] = {src, tgt};
  const int64_t shape[][2] = {{1, 5}, {1, 3}};
  write_ids("in.safetensors", names, data, shape, 2);
  cr_assert_eq(tfmc("attention translate.tfm --init random --inputs in.safetensors -o x.svg "
                    "--backend interp"),
               0, "%s", err_text);
  cr_assert_eq(sh("xmllint --noout x.svg"), 0, "xmllint: %s", err_text);
  read_svg("x.svg");
  /* encoder.0 5x5, decoder.0 3x3, decoder.0.cross 3x5; 2 heads each */
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 2 * (25 + 9 + 15));
  cr_assert(strstr(svg, "target tokens down, source tokens across"));
  cr_assert_eq(tfmc("attention translate.tfm --init random --inputs in.safetensors --layer "
                    "decoder.0.cross --head 0 -o c.svg"),
               0, "%s", err_text);
  read_svg("c.svg");
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 3 * 5);
  unsigned rgb[3];
  char title[256];
  cell(1 * 5 + 3, rgb, title, sizeof title); /* query row 1 (tgt 9), key column 3 (src 7) */
  cr_assert(strncmp(title, "9 \xE2\x86\x92 7: ", 8) == 0, "%s", title);
  /* the causal decoder self-attention: nothing above the diagonal */
  cr_assert_eq(tfmc("run translate.tfm --init random --inputs in.safetensors --attention all "
                    "--outputs out.safetensors"),
               0, "%s", err_text);
  int64_t d[4];
  float *p = read_probs("out.safetensors", "attention.decoder.0", d);
  cr_assert(d[2] == 3 && d[3] == 3 && p[0 * 3 + 1] == 0.0f && p[0 * 3 + 2] == 0.0f);
  free(p);
  p = read_probs("out.safetensors", "attention.decoder.0.cross", d);
  cr_assert(d[2] == 3 && d[3] == 5);
  expect_cell(1 * 5 + 3, p[1 * 5 + 3]);
  free(p);
}

Test(attention, refuses_bad_requests_and_keeps_inputs) {
  const char *text = "--init random --vocab v.txt --text 'f g h'";
  char cmd[512];
  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o ./v.txt", text);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(strstr(err_text, "refusing to overwrite"), "%s", err_text);
  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o enc.tfm", text);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  char p[512];
  snprintf(p, sizeof p, "%s/v.txt", dir);
  FILE *f = fopen(p, "rb");
  char back[sizeof vocab_text + 8];
  size_t n = fread(back, 1, sizeof back, f);
  fclose(f);
  cr_assert(n == sizeof vocab_text - 1 && memcmp(back, vocab_text, n) == 0, "v.txt changed");
  write_file("v.svg", vocab_text); /* an input with the picture's extension */
  cr_assert_eq(tfmc("attention enc.tfm --init random --vocab v.svg --text 'f g' -o ./v.svg"), 1,
               "%s", err_text);
  cr_assert(strstr(err_text, "refusing to overwrite"), "%s", err_text);

  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o maps.png", text);
  cr_assert_eq(tfmc(cmd), 2, "%s", err_text);
  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o m.svg --head 2", text);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(strstr(err_text, "head 2 out of range"), "%s", err_text);
  cr_assert(!exists("m.svg"));
  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o m.svg --batch-row 1", text);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(strstr(err_text, "batch row 1 out of range"), "%s", err_text);
  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o m.svg --layer decoder.0", text);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(strstr(err_text, "no such attention layer"), "%s", err_text);
  snprintf(cmd, sizeof cmd, "attention enc.tfm %s -o m.svg --head -1", text);
  cr_assert_eq(tfmc(cmd), 2, "%s", err_text);
  cr_assert(!exists("m.svg"));
  cr_assert_eq(tfmc("attention enc.tfm --init random --tokens '3 4' -o m.svg --head all"), 0,
               "%s", err_text);
  cr_assert(exists("m.svg"));
}

/* The picture in README.md (examples/sort/attention.svg) is what tfmc draws
 * today for the README's command: the same cells, each within one step of
 * the printed probability (4 decimals) of a fresh run (the kernels' float
 * summation order may differ between CPUs), and the same text outside the
 * cells. Regenerate it with the command in README.md "Attention maps". */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  cr_assert(s && fread(s, 1, (size_t)n, f) == (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

/* The committed picture `path` against fresh.svg, which has `cells` cells. */
static void expect_same_picture(const char *path, int cells) {
  char *old = slurp(path);
  read_svg("fresh.svg");
  int n = count(svg, "<rect class=\"cell\"");
  cr_assert_eq(n, cells, "%d cells expected, got %d", cells, n);
  cr_assert_eq(count(old, "<rect class=\"cell\""), n, "README picture: stale cell count");
  const char *a = old, *b = svg;
  for (int k = 0; k < n; k++) {
    a = strstr(a, "<rect class=\"cell\"");
    b = strstr(b, "<rect class=\"cell\"");
    cr_assert(a && b);
    const char *ta = strstr(a, "<title>"), *tb = strstr(b, "<title>");
    const char *ea = ta ? strstr(ta, "</title>") : NULL, *eb = tb ? strstr(tb, "</title>") : NULL;
    cr_assert(ea && eb, "cell %d has no tooltip", k);
    /* the tooltip is "QUERY → KEY: P"; the fill colour follows P */
    const char *pa = NULL, *pb = NULL;
    for (const char *q = ta; q < ea; q++)
      if (q[0] == ':' && q[1] == ' ') pa = q;
    for (const char *q = tb; q < eb; q++)
      if (q[0] == ':' && q[1] == ' ') pb = q;
    cr_assert(pa && pb, "cell %d: no probability in its tooltip", k);
    float va = strtof(pa + 2, NULL), vb = strtof(pb + 2, NULL);
    cr_assert(fabsf(va - vb) <= 1.5e-4f, "cell %d: README picture %.4f, tfmc now %.4f", k, va,
              vb);
    cr_assert_eq(pa - ta, pb - tb, "cell %d: different labels", k);
    cr_assert(strncmp(ta, tb, (size_t)(pa - ta)) == 0, "cell %d: different labels", k);
    a = ea;
    b = eb;
  }
  /* everything after the last cell (legend, labels) is identical */
  cr_assert_str_eq(a, b, "README picture: the text after the cells differs");
  free(old);
}

Test(attention, readme_picture_is_what_tfmc_draws) {
  cr_assert_eq(tfmc("attention " TFMC_SOURCE_DIR "/examples/sort/model.tfm --weights " TFMC_SOURCE_DIR
                    "/examples/sort/weights.safetensors --vocab " TFMC_SOURCE_DIR
                    "/examples/sort/vocab.txt --text '7 3 9 1 3 0 8 2' --backend interp -o fresh.svg"),
               0, "%s", err_text);
  expect_same_picture(TFMC_SOURCE_DIR "/examples/sort/attention.svg", 2 * 4 * 8 * 8);
}

/* ---- during generation ---- */

#define GPT2 TFMC_SOURCE_DIR "/tests/generate/gpt2/"
#define ANN TFMC_SOURCE_DIR "/tests/generate/annotated/"
#define REV TFMC_SOURCE_DIR "/examples/reverse/"

/* The ids `tfmc run --generate --tokens` printed (one per line) into ids;
 * their count. */
static int printed_ids(int64_t *ids, int cap) {
  char p[512];
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  FILE *f = fopen(p, "r");
  cr_assert(f);
  int n = 0;
  long long v;
  while (n < cap && fscanf(f, "%lld", &v) == 1) ids[n++] = v;
  fclose(f);
  return n;
}

/* gen [1,H,N,K] (row g: generated token g) against the full forward's
 * probabilities full [1,H,Tq,Tk]: row g is full row q0 + g over its Tk
 * keys, within 1e-4 + 1e-4|ref|; the keys after them (K > Tk) are 0. */
static void expect_rows_of_full(const float *gen, const int64_t gd[4], const float *full,
                                const int64_t fd[4], int64_t q0, const char *what) {
  cr_assert(gd[0] == 1 && fd[0] == 1 && gd[1] == fd[1] && q0 + gd[2] <= fd[2] && fd[3] <= gd[3],
            "%s: shapes [1,%lld,%lld,%lld] and [1,%lld,%lld,%lld]", what, (long long)gd[1],
            (long long)gd[2], (long long)gd[3], (long long)fd[1], (long long)fd[2],
            (long long)fd[3]);
  for (int64_t h = 0; h < gd[1]; h++)
    for (int64_t g = 0; g < gd[2]; g++)
      for (int64_t j = 0; j < gd[3]; j++) {
        float got = gen[(h * gd[2] + g) * gd[3] + j];
        float ref = j < fd[3] ? full[(h * fd[2] + q0 + g) * fd[3] + j] : 0.0f;
        cr_assert(fabsf(got - ref) <= 1e-4f + 1e-4f * fabsf(ref),
                  "%s: head %lld, generated %lld, key %lld: %.7g, full forward %.7g", what,
                  (long long)h, (long long)g, (long long)j, got, ref);
      }
}

/* GPT-2-like decoder: row g is the query at position P+g-1 (the step that
 * chose token g) over the prompt and the tokens before it: the full
 * forward's row over the prompt and the first N-1 generated tokens; with
 * --beams, those of the best hypothesis. */
Test(attention, generated_decoder_rows_are_the_full_forward_s) {
  static const char *const runs[][3] = {{"interp", "decoder.1", ""},
                                        {"jit", "decoder.0", ""},
                                        {"jit", "decoder.1", "--sample --seed 5 --top-k 20"},
                                        {"interp", "decoder.1", "--beams 3"},
                                        {"jit", "decoder.0", "--beams 4 --length-penalty 0"}};
  enum { P = 6, N = 9 };
  const char *prompt = "17 3 42 8 99 5";
  for (int r = 0; r < 5; r++) {
    char cmd[2048], seq[1024];
    int64_t ids[64];
    snprintf(cmd, sizeof cmd,
             "run " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors --tokens '%s' "
             "--generate %d --attention %s --backend %s %s --outputs gen.safetensors",
             prompt, N, runs[r][1], runs[r][0], runs[r][2]);
    cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
    cr_assert_eq(printed_ids(ids, 64), N);
    int k = snprintf(seq, sizeof seq, "%s", prompt);
    for (int g = 0; g + 1 < N; g++)
      k += snprintf(seq + k, sizeof seq - (size_t)k, " %lld", (long long)ids[g]);
    char full_cmd[2048];
    snprintf(full_cmd, sizeof full_cmd,
             "run " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors --tokens '%s' "
             "--attention %s --backend interp --outputs full.safetensors", seq, runs[r][1]);
    cr_assert_eq(tfmc(full_cmd), 0, "%s", err_text);
    int64_t gd[4], fd[4];
    float *gen = read_probs("gen.safetensors", "attention", gd);
    float *full = read_probs("full.safetensors", "attention", fd);
    cr_assert(gd[1] == 4 && gd[2] == N && gd[3] == P + N, "[1,4,%d,%d] expected", N, P + N);
    cr_assert(fd[2] == P + N - 1 && fd[3] == P + N - 1);
    expect_rows_of_full(gen, gd, full, fd, P - 1, cmd);
    free(gen);
    free(full);
  }
}

/* Annotated-like encoder-decoder, a source ending in two pads: row g is
 * the full forward's row g over (src, bos + the first N-1 generated
 * tokens): the cross-attention's over the source, the pads getting 0; the
 * decoder self-attention's over bos and the generated tokens (K = 1 + N,
 * the last key 0). Greedy and beam search. */
Test(attention, generated_encdec_rows_are_the_full_forward_s) {
  enum { S = 11, N = 7 };
  const char *src = "0 31 4 4 18 26 11 35 1 2 2";
  int64_t s_ids[S] = {0, 31, 4, 4, 18, 26, 11, 35, 1, 2, 2};
  static const char *const runs[][3] = {{"interp", "decoder.0.cross", ""},
                                        {"jit", "decoder.0.cross", ""},
                                        {"jit", "decoder.1.cross", "--beams 3"},
                                        {"interp", "decoder.1", ""},
                                        {"jit", "decoder.0", "--beams 2"}};
  for (int b = 0; b < 5; b++) {
    char cmd[2048], full_cmd[1024];
    int64_t ids[64];
    bool cross = strstr(runs[b][1], ".cross") != NULL;
    snprintf(cmd, sizeof cmd,
             "run " ANN "generate.tfm --weights " ANN "weights.safetensors --tokens '%s' "
             "--generate %d --attention %s --backend %s %s --outputs gen.safetensors",
             src, N, runs[b][1], runs[b][0], runs[b][2]);
    cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
    cr_assert_eq(printed_ids(ids, 64), N);
    int64_t t_ids[N] = {0}; /* bos 0, then the generated ids but the last */
    for (int g = 0; g + 1 < N; g++) t_ids[g + 1] = ids[g];
    const char *names[] = {"src", "tgt"};
    const int64_t *data[] = {s_ids, t_ids};
    const int64_t shape[][2] = {{1, S}, {1, N}};
    write_ids("in.safetensors", names, data, shape, 2);
    snprintf(full_cmd, sizeof full_cmd,
             "run " ANN "generate.tfm --weights " ANN "weights.safetensors --inputs "
             "in.safetensors --attention %s --backend interp --outputs full.safetensors",
             runs[b][1]);
    cr_assert_eq(tfmc(full_cmd), 0, "%s", err_text);
    int64_t gd[4], fd[4];
    float *gen = read_probs("gen.safetensors", "attention", gd);
    float *full = read_probs("full.safetensors", "attention", fd);
    int64_t K = cross ? S : 1 + N;
    cr_assert(gd[1] == 4 && gd[2] == N && gd[3] == K && fd[2] == N && fd[3] == (cross ? S : N),
              "%s", cmd);
    expect_rows_of_full(gen, gd, full, fd, 0, cmd);
    for (int h = 0; h < 4 && cross; h++)
      for (int g = 0; g < N; g++)
        cr_assert(gen[(h * N + g) * S + S - 1] == 0.0f && gen[(h * N + g) * S + S - 2] == 0.0f,
                  "a pad got attention");
    free(gen);
    free(full);
  }
}

/* The picture of a generation: one heatmap per head, generated tokens down,
 * source tokens across, coloured as `run --attention` wrote them. */
Test(attention, generation_picture_generated_down_source_across) {
  enum { S = 7, N = 5 };
  const char *src = "--tokens '0 5 9 14 22 7 1'";
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "attention " ANN "generate.tfm --weights " ANN "weights.safetensors %s --generate %d "
           "-o gen.svg", src, N);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  cr_assert(strstr(err_text, "wrote gen.svg (decoder.1.cross, all heads, 5 generated tokens)"),
            "the last decoder layer's cross-attention by default: %s", err_text);
  cr_assert_eq(sh("xmllint --noout gen.svg"), 0, "xmllint: %s", err_text);
  cr_assert_eq(sh("rsvg-convert gen.svg -o gen.png"), 0, "rsvg-convert: %s", err_text);
  read_svg("gen.svg");
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 4 * N * S);
  cr_assert(strstr(svg, "attention probabilities of annotated_generate: decoder.1.cross, 4 heads, "
                        "5 generated tokens"));
  cr_assert(strstr(svg, "generated tokens down"));
  snprintf(cmd, sizeof cmd,
           "run " ANN "generate.tfm --weights " ANN "weights.safetensors %s --generate %d "
           "--attention decoder.1.cross --outputs out.safetensors", src, N);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  int64_t ids[16];
  cr_assert_eq(printed_ids(ids, 16), N);
  int64_t d[4];
  float *p = read_probs("out.safetensors", "attention", d);
  cr_assert(d[1] == 4 && d[2] == N && d[3] == S);
  for (int k = 0; k < 4 * N * S; k += 3) expect_cell(k, p[k]);
  /* labels: the generated id down, the source id across */
  unsigned rgb[3];
  char title[256], want[64];
  cell(2 * S + 3, rgb, title, sizeof title); /* head 0, generated 2, source 3 (14) */
  snprintf(want, sizeof want, "%lld \xE2\x86\x92 14: ", (long long)ids[2]);
  cr_assert(strncmp(title, want, strlen(want)) == 0, "'%s', not '%s'", title, want);
  free(p);
  /* one head, as HTML; a decoder: prompt and generated tokens across */
  cr_assert_eq(tfmc("attention " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors "
                    "--tokens '17 3 42' --generate 4 --layer decoder.0 --head 2 --backend interp "
                    "-o one.html"),
               0, "%s", err_text);
  read_svg("one.html");
  cr_assert(strncmp(svg, "<!DOCTYPE html>", 15) == 0);
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 4 * (3 + 4));
  cr_assert(strstr(svg, "decoder.0, head 2, 4 generated tokens"));
  /* beam search: the best hypothesis's rows */
  cr_assert_eq(tfmc("attention " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors "
                    "--tokens '17 3 42' --generate 4 --beams 3 --head 0 -o beam.svg"),
               0, "%s", err_text);
  read_svg("beam.svg");
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 4 * (3 + 4));
}

/* The trained reverse model reads its source backwards: generated letter g
 * attends most (mean over heads) to source position n-1-g; the README
 * shows this picture. */
Test(attention, reverse_example_attends_anti_diagonally) {
  cr_assert_eq(tfmc("run " REV "model.tfm --weights " REV "weights.safetensors --vocab " REV
                    "vocab.txt --text 'h e l l o' --generate 20 --attention decoder.1.cross "
                    "--backend interp --outputs rev.safetensors"),
               0, "%s", err_text);
  int64_t d[4];
  float *p = read_probs("rev.safetensors", "attention", d);
  cr_assert(d[1] == 4 && d[2] == 6 && d[3] == 5, "o l l e h </s> over h e l l o");
  for (int g = 0; g < 5; g++) {
    int best = 0;
    double m[5] = {0};
    for (int j = 0; j < 5; j++) {
      for (int h = 0; h < 4; h++) m[j] += p[(h * 6 + g) * 5 + j] / 4;
      if (m[j] > m[best]) best = j;
    }
    cr_assert_eq(best, 4 - g, "generated letter %d attends most to source %d, not %d", g, best,
                 4 - g);
  }
  free(p);
  cr_assert_eq(tfmc("attention " REV "model.tfm --weights " REV "weights.safetensors --vocab " REV
                    "vocab.txt --text 'h e l l o' --generate 20 --backend interp -o fresh.svg"),
               0, "%s", err_text);
  read_svg("fresh.svg");
  cr_assert(strstr(svg, ">&lt;/s&gt;</text>") && strstr(svg, ">h</text>"), "symbols as labels");
  expect_same_picture(TFMC_SOURCE_DIR "/examples/reverse/attention.svg", 4 * 6 * 5);
}

Test(attention, generation_refusals) {
  const char *gpt = "run " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors --tokens '1 2' "
                    "--generate 3 --outputs o.safetensors ";
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s --attention decoder.2", gpt);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(strstr(err_text, "--attention decoder.2 with generation: give one decoder layer of "
                             "model 'gpt2_generate' (decoder.N, N from 0 to 1)"), "%s", err_text);
  snprintf(cmd, sizeof cmd, "%s --attention decoder.0.cross", gpt);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  snprintf(cmd, sizeof cmd, "%s --attention all", gpt);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(!exists("o.safetensors"));
  cr_assert_eq(tfmc("run " ANN "generate.tfm --weights " ANN "weights.safetensors --tokens '0 5' "
                    "--generate 3 --attention encoder.0 --outputs o.safetensors"),
               1, "%s", err_text);
  cr_assert(strstr(err_text, "decoder.N.cross for the cross-attention over the source"), "%s",
            err_text);
  cr_assert_eq(tfmc("run " ANN "generate.tfm --weights " ANN "weights.safetensors --tokens '0 5' "
                    "--generate 3 --attention decoder.0"),
               2, "%s", err_text);
  cr_assert(strstr(err_text, "give --outputs"), "%s", err_text);
  const char *draw = "attention " ANN "generate.tfm --weights " ANN "weights.safetensors "
                     "--tokens '0 5' --generate 3 -o m.svg ";
  snprintf(cmd, sizeof cmd, "%s --layer decoder.7.cross", draw);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  snprintf(cmd, sizeof cmd, "%s --layer all", draw);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  snprintf(cmd, sizeof cmd, "%s --head 4", draw);
  cr_assert_eq(tfmc(cmd), 1, "%s", err_text);
  cr_assert(strstr(err_text, "head 4 out of range"), "%s", err_text);
  snprintf(cmd, sizeof cmd, "%s --batch-row 0", draw);
  cr_assert_eq(tfmc(cmd), 2, "%s", err_text);
  cr_assert(!exists("m.svg"));
  cr_assert_eq(tfmc("attention " ANN "generate.tfm --weights " ANN "weights.safetensors "
                    "--tokens '0 5' --beams 2 -o m.svg"), 2, "%s", err_text);
  cr_assert(strstr(err_text, "--beams goes with --generate"), "%s", err_text);
  cr_assert_eq(tfmc("attention enc.tfm --init random --tokens '3 4' --generate 3 -o m.svg"), 1,
               "%s", err_text);
  cr_assert(strstr(err_text, "is an encoder, which does not generate"), "%s", err_text);
  cr_assert(!exists("m.svg"));
}


/* ---- executables: --attention-map ---- */

/* Whether the files a and b (in dir) hold the same bytes. */
static bool same_bytes(const char *a, const char *b) {
  char pa[512], pb[512];
  snprintf(pa, sizeof pa, "%s/%s", dir, a);
  snprintf(pb, sizeof pb, "%s/%s", dir, b);
  char *x = slurp(pa), *y = slurp(pb);
  bool same = strcmp(x, y) == 0;
  free(x);
  free(y);
  return same;
}

/* `tfmc emit-c ARGS -o NAME.d`, built with its Makefile (NO_BLAS, the
 * generated C at -Werror), the executable linked as NAME. */
static void emit_c_exe(const char *args, const char *name) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "emit-c %s -o %s.d", args, name);
  cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
  snprintf(cmd, sizeof cmd,
           "make -s -C %s.d -j2 NO_BLAS=1 CFLAGS='-O2 -Werror' >/dev/null && "
           "ln -s %s.d/$(sed -n 's/^all: \\([A-Za-z0-9_]*\\) libmodel.a$/\\1/p' %s.d/Makefile) %s",
           name, name, name, name);
  cr_assert_eq(sh(cmd), 0, "%s", err_text);
}

/* The encoder built with --attention all, by tfmc build and by emit-c:
 * every layer and head, and one layer, head and batch row as HTML, are
 * tfmc attention's bytes; so is a build with one layer. */
Test(attention, executables_draw_what_tfmc_attention_draws) {
  cr_assert_eq(tfmc("build enc.tfm --init random --seed 3 --attention all -o encx"), 0, "%s",
               err_text);
  emit_c_exe("enc.tfm --init random --seed 3 --attention all", "encc");
  cr_assert_eq(tfmc("attention enc.tfm --init random --seed 3 --vocab v.txt " TEXT " -o t.svg"),
               0, "%s", err_text);
  static const char *const exes[] = {"encx", "encc"};
  for (int e = 0; e < 2; e++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./%s --vocab v.txt " TEXT " --attention-map x.svg >stdout.txt",
             exes[e]);
    cr_assert_eq(sh(cmd), 0, "%s: %s", exes[e], err_text);
    cr_assert(strstr(err_text, "wrote x.svg (2 layers, all heads, batch row 0)"), "%s", err_text);
    cr_assert_eq(sh("xmllint --noout x.svg"), 0, "xmllint: %s", err_text);
    cr_assert(same_bytes("x.svg", "t.svg"), "%s: the picture differs from tfmc attention's",
              exes[e]);
  }
  /* one layer, head and batch row, as HTML; ids as labels */
  int64_t ids[10] = {7, 8, 9, 0, 0, 10, 11, 3, 4, 6};
  const char *names[] = {"tokens"};
  const int64_t *data[] = {ids};
  const int64_t shape[][2] = {{2, 5}};
  write_ids("in.safetensors", names, data, shape, 1);
  cr_assert_eq(tfmc("attention enc.tfm --init random --seed 3 --inputs in.safetensors "
                    "--layer encoder.1 --head 1 --batch-row 1 -o t.html"),
               0, "%s", err_text);
  for (int e = 0; e < 2; e++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "./%s --inputs in.safetensors --attention-map x.html --layer encoder.1 --head 1 "
             "--batch-row 1 --outputs out.safetensors",
             exes[e]);
    cr_assert_eq(sh(cmd), 0, "%s: %s", exes[e], err_text);
    cr_assert(same_bytes("x.html", "t.html"), "%s: the picture differs from tfmc attention's",
              exes[e]);
    cr_assert(exists("out.safetensors"), "--outputs written too");
  }
  cr_assert_eq(tfmc("build enc.tfm --init random --seed 3 --attention encoder.1 -o enc1"), 0, "%s",
               err_text);
  cr_assert_eq(sh("./enc1 --inputs in.safetensors --attention-map x.html --head 1 --batch-row 1 "
                  ">/dev/null"),
               0, "%s", err_text);
  cr_assert(same_bytes("x.html", "t.html"), "one layer compiled in: not tfmc attention's picture");
}

/* Generation: the executable's --generate N --attention-map is tfmc
 * attention --generate's picture, for a decoder (self-attention, one
 * head; beam search) and an encoder-decoder (cross-attention). */
Test(attention, generating_executables_draw_what_tfmc_attention_draws) {
  static const struct {
    const char *dir, *layer, *args[2];
  } builds[] = {
      {GPT2, "decoder.0", {"--tokens '17 3 42' --generate 4 --head 2",
                           "--tokens '17 3 42' --generate 4 --beams 3"}},
      {ANN, "decoder.1.cross", {"--tokens '0 5 9 14 22 7 1' --generate 5", NULL}},
  };
  for (int b = 0; b < 2; b++) {
    char model[1024], cmd[2300];
    snprintf(model, sizeof model, "%sgenerate.tfm --weights %sweights.safetensors", builds[b].dir,
             builds[b].dir);
    snprintf(cmd, sizeof cmd, "build %s --attention %s -o genx", model, builds[b].layer);
    cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
    snprintf(cmd, sizeof cmd, "%s --attention %s", model, builds[b].layer);
    emit_c_exe(cmd, "genc");
    for (int r = 0; r < 2 && builds[b].args[r]; r++) {
      snprintf(cmd, sizeof cmd, "attention %s --layer %s %s -o t.svg", model, builds[b].layer,
               builds[b].args[r]);
      cr_assert_eq(tfmc(cmd), 0, "%s", err_text);
      static const char *const exes[] = {"genx", "genc"};
      for (int e = 0; e < 2; e++) {
        snprintf(cmd, sizeof cmd, "./%s %s --attention-map x.svg >stdout.txt", exes[e],
                 builds[b].args[r]);
        cr_assert_eq(sh(cmd), 0, "%s: %s", cmd, err_text);
        cr_assert(strstr(err_text, "generated tokens)"), "%s", err_text);
        cr_assert_eq(sh("xmllint --noout x.svg"), 0, "xmllint: %s", err_text);
        cr_assert(same_bytes("x.svg", "t.svg"),
                  "%s (%s): the picture differs from tfmc attention's", cmd, builds[b].dir);
      }
    }
    cr_assert_eq(sh("rm -rf genx genx.weights genc genc.d"), 0);
  }
}

/* What executables refuse: a PNG, a layer not compiled in (naming those
 * that are), a head or batch row out of range, an input or a directory as
 * the picture, the options without --attention-map or without --attention
 * compiled in (where --help does not list them); nothing is overwritten. */
Test(attention, executable_refusals) {
  cr_assert_eq(tfmc("build enc.tfm --init random --attention encoder.0 -o encx"), 0, "%s",
               err_text);
  static const struct {
    const char *args;
    int status;
    const char *says;
  } bad[] = {
      {"--attention-map m.png", 2, "rsvg-convert"},
      {"--attention-map m.txt", 2, "the picture is FILE.svg or FILE.html"},
      {"--attention-map m.svg --layer encoder.1", 1, "outputs those of encoder.0;"},
      {"--attention-map m.svg --layer decoder.9.cross", 1, "not among the attention layers"},
      {"--attention-map m.svg --head 2", 1, "head 2 out of range"},
      {"--attention-map m.svg --head x", 2, "--head takes a non-negative integer or all"},
      {"--attention-map m.svg --batch-row 1", 1, "batch row 1 out of range"},
      {"--layer encoder.0", 2, "--layer goes with --attention-map"},
      {"--attention-map m.svg --outputs m.svg", 1, "is the --outputs file too"},
      {"--attention-map ./v.svg", 1, "refusing to overwrite"},
      {"--attention-map encx.svg", 1, "refusing to overwrite"},
      {"--attention-map d.svg", 1, "is a directory"},
  };
  write_file("v.svg", vocab_text);
  cr_assert_eq(sh("ln -s encx encx.svg && mkdir d.svg"), 0);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char cmd[1024];
    /* the vocabulary v.svg: an input with the picture's extension */
    snprintf(cmd, sizeof cmd, "./encx --vocab v.svg --text 'f g h' %s >/dev/null", bad[i].args);
    cr_assert_eq(sh(cmd), bad[i].status, "%s: %s", cmd, err_text);
    cr_assert(strstr(err_text, bad[i].says), "%s: '%s' lacks '%s'", cmd, err_text, bad[i].says);
    cr_assert(!exists("m.svg") && !exists("m.png"), "%s: a picture was written", cmd);
  }
  cr_assert(same_bytes("v.svg", "v.txt"), "the vocabulary changed");
  cr_assert_eq(sh("cmp -s encx.svg encx"), 0);
  /* a symlink to a device is written through, in place */
  cr_assert_eq(sh("ln -s /dev/null null.svg && ./encx --tokens '3 4' --attention-map null.svg "
                  ">/dev/null && test -c /dev/null"),
               0, "%s", err_text);
  /* --help lists the options only when compiled in */
  cr_assert_eq(sh("./encx --help >help.txt"), 0);
  cr_assert_eq(sh("grep -q -- '--attention-map FILE' help.txt && grep -q 'with --attention-map: "
                  "encoder.0 or all' help.txt"),
               0, "--help of an executable built with --attention lists --attention-map");
  cr_assert_eq(tfmc("build enc.tfm --init random -o plain"), 0, "%s", err_text);
  cr_assert_eq(sh("./plain --help >help.txt"), 0);
  cr_assert_neq(sh("grep -q -- '--attention-map' help.txt"), 0, "listed without --attention");
  cr_assert_eq(sh("./plain --tokens '3 4' --attention-map m.svg"), 2, "%s", err_text);
  cr_assert(strstr(err_text, "compiled without attention outputs"), "%s", err_text);
  cr_assert(!exists("m.svg"));
  /* generation without attention rows compiled in; --batch-row */
  cr_assert_eq(tfmc("build " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors -o gen"), 0,
               "%s", err_text);
  cr_assert_eq(sh("./gen --generate 2 --tokens '1 2' --attention-map m.svg"), 2, "%s", err_text);
  cr_assert(strstr(err_text, "generates without attention rows"), "%s", err_text);
  cr_assert_eq(tfmc("build " GPT2 "generate.tfm --weights " GPT2 "weights.safetensors "
                    "--attention decoder.1 -o gen1"),
               0, "%s", err_text);
  cr_assert_eq(sh("./gen1 --generate 2 --tokens '1 2' --attention-map m.svg --batch-row 0"), 2,
               "%s", err_text);
  cr_assert_eq(sh("./gen1 --generate 2 --tokens '1 2' --attention-map m.svg --layer decoder.0"), 1,
               "%s", err_text);
  cr_assert(strstr(err_text, "outputs those of decoder.1;"), "%s", err_text);
  cr_assert(!exists("m.svg"));
}
