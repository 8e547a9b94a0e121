/* tests/c/test_cross_generate.c — generation from emitted C under qemu-user:
 * the trained generating examples, examples/add (decoder-only GPT-2) and
 * examples/reverse (encoder-decoder), through `tfmc emit-c` (add with its
 * packed weights file, found next to the executable, reverse with
 * --embed-weights), built with the generated Makefile and
 * `make NO_BLAS=1` natively (the host reference) and with the cross gcc/ar
 * of each target of cross_util.h (aarch64; s390x, big-endian: the packed
 * weights, the --inputs file and the --outputs file are little-endian, so
 * the runtime byte-swaps them there), the generated C at -pedantic -Werror;
 * each project built once per target and run for several cases:
 *   - greedy, the README's prompt (add prints "1 0 0 3", reverse "o l l e h");
 *   - greedy, a batch of four held-out prompts of examples/NAME/expected.txt
 *     read from an --inputs safetensors file this test writes (add's left-
 *     padded with `mask`, reverse's sources right-padded with
 *     `src_lengths`), each row printing PyTorch's continuation;
 *   - `--sample --seed S --temperature T` (with --top-k or --top-p): not
 *     the greedy text, so the sampler's draws are what is compared;
 *   - `--beams 3`;
 *   - model.h's step API (tests/generate/step_api_example.c, the KV cache
 *     handed in by the caller, the weights file or the embedded weights)
 *     cross-built against the project's libmodel.a, greedy on the README's
 *     prompt.
 * The cross executable (an ELF file of the target's machine and byte
 * order) runs under qemu with 2 threads, the host one with 1; both print
 * exactly what `tfmc run` (JIT) prints, and their --outputs files
 * (`generated` i64 [B,N], `generated_lengths` i64 [B]) hold the same
 * values as `tfmc run`'s and are the same bytes as the host's; the step
 * API prints the host's greedy ids.
 * A target is skipped (naming the Debian package) only when its cross
 * compiler or qemu is missing. */
#include "cross_util.h"

#define TFMC TFMC_BINARY_DIR "/tfmc"
#define EXAMPLES TFMC_SOURCE_DIR "/examples"

enum { GEN_BATCH = 4, GEN_CASES = 4 };

/* One generating project under test. */
typedef struct GenModel {
  const char *name;    /* scratch project name and label in messages */
  const char *example; /* examples/EXAMPLE: model.tfm, weights, vocab, expected.txt */
  bool embed;          /* emit with --embed-weights */
  const char *prompt;  /* the README's command ... */
  const char *greedy;  /* ... and what it prints */
  const char *sample;  /* the options of the sampled case */
  bool encoder;        /* encoder_decoder: the batch is `src`, right-padded */
} GenModel;

static const GenModel gen_models[] = {
    {"add", "add", false, "4 0 6 + 5 9 7 =", "1 0 0 3",
     "--sample --seed 4 --temperature 8 --top-k 6", false},
    {"reverse-embedded", "reverse", true, "h e l l o", "o l l e h",
     "--sample --seed 3 --temperature 4 --top-p 0.95", true},
};
enum { N_GEN_MODELS = sizeof gen_models / sizeof gen_models[0] };

/* Held-out prompts of examples/EXAMPLE/expected.txt (a prompt, a tab,
 * PyTorch's greedy continuation), lines 2..1+GEN_BATCH (line 1 is the
 * README's prompt). */
typedef struct Heldout {
  char prompt[GEN_BATCH][128], want[GEN_BATCH][128];
} Heldout;

static void heldout_read(const char *example, Heldout *h) {
  char path[600];
  snprintf(path, sizeof path, EXAMPLES "/%s/expected.txt", example);
  char *text = ct_read_text(path, NULL);
  cr_assert(text, "cannot read %s", path);
  char *line = strchr(text, '\n');
  cr_assert(line, "%s: one line", path);
  for (int r = 0; r < GEN_BATCH; r++) {
    line++;
    char *end = strchr(line, '\n'), *tab = strchr(line, '\t');
    cr_assert(end && tab && tab < end && tab - line < 128 && end - tab < 128,
              "%s: line %d is not 'PROMPT<tab>CONTINUATION'", path, r + 2);
    memcpy(h->prompt[r], line, (size_t)(tab - line));
    h->prompt[r][tab - line] = '\0';
    memcpy(h->want[r], tab + 1, (size_t)(end - tab - 1));
    h->want[r][end - tab - 1] = '\0';
    line = end;
  }
  free(text);
}

/* The id of each space-separated symbol of text (line k of the example's
 * vocab.txt = id k) into ids; returns the count. */
static int vocab_ids(const char *example, const char *text, int64_t *ids, int cap) {
  char path[600];
  snprintf(path, sizeof path, EXAMPLES "/%s/vocab.txt", example);
  char *vocab = ct_read_text(path, NULL);
  cr_assert(vocab, "cannot read %s", path);
  int n = 0;
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, " ");
    int64_t id = 0;
    const char *v = vocab;
    while (*v && !(strncmp(v, p, len) == 0 && v[len] == '\n')) {
      v = strchr(v, '\n');
      cr_assert(v, "'%.*s' is not in %s", (int)len, p, path);
      v++, id++;
    }
    cr_assert(*v, "'%.*s' is not in %s", (int)len, p, path);
    cr_assert_lt(n, cap, "'%s': more than %d symbols", text, cap);
    ids[n++] = id;
    p += len;
    while (*p == ' ') p++;
  }
  free(vocab);
  return n;
}

/* Writes the held-out prompts as one batch for --inputs: a decoder's
 * `tokens` [B,N] left-padded with `mask` [B,N] (1 = real; a prompt's next
 * token follows its last), an encoder_decoder's `src` [B,N] right-padded
 * with `src_lengths` [B]; the pads' ids are 0. */
static void batch_write(const GenModel *m, const Heldout *h, const char *path) {
  enum { CAP = 16 };
  int64_t row[GEN_BATCH][CAP], ids[GEN_BATCH * CAP] = {0}, mask[GEN_BATCH * CAP] = {0},
                                                     lengths[GEN_BATCH];
  int n = 0;
  for (int r = 0; r < GEN_BATCH; r++) {
    lengths[r] = vocab_ids(m->example, h->prompt[r], row[r], CAP);
    if (lengths[r] > n) n = (int)lengths[r];
  }
  for (int r = 0; r < GEN_BATCH; r++)
    for (int i = 0; i < lengths[r]; i++) {
      int at = r * n + (m->encoder ? i : n - (int)lengths[r] + i);
      ids[at] = row[r][i];
      mask[at] = 1;
    }
  RtStWrite w[2] = {
      {.name = m->encoder ? "src" : "tokens", .dtype = RT_I64, .rank = 2,
       .shape = {GEN_BATCH, n}, .data = ids},
      m->encoder ? (RtStWrite){.name = "src_lengths", .dtype = RT_I64, .rank = 1,
                              .shape = {GEN_BATCH}, .data = lengths}
                 : (RtStWrite){.name = "mask", .dtype = RT_I64, .rank = 2,
                              .shape = {GEN_BATCH, n}, .data = mask}};
  char err[512];
  cr_assert_eq(rt_st_write(path, w, 2, NULL, 0, err, sizeof err), 0, "%s", err);
}

/* Case k's options (after --vocab): 0 greedy, 1 the batch, 2 sampled,
 * 3 beam search. */
static void case_args(const GenModel *m, int k, const char *tmp, char *args, size_t len) {
  cr_assert(!strchr(m->prompt, '\''), "a prompt with a quote");
  switch (k) {
  case 0: snprintf(args, len, "--text '%s' --generate 20", m->prompt); break;
  case 1:
    snprintf(args, len, "--inputs %s/%s-batch.safetensors --generate 20", tmp, m->example);
    break;
  case 2: snprintf(args, len, "--text '%s' --generate 20 %s", m->prompt, m->sample); break;
  default: snprintf(args, len, "--text '%s' --generate 20 --beams 3", m->prompt); break;
  }
}

/* The generated ids of two --outputs files: the same tensors, each the
 * same values (rank, shape, dtype, elements). */
static void gen_outputs_equal(const char *out, const char *ref, const char *what) {
  RtSafetensors *so, *sr;
  char err[512];
  cr_assert_eq(rt_st_open(out, &so, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_open(ref, &sr, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_count(so), 2, "%s: %d outputs, not generated and generated_lengths", what,
               rt_st_count(so));
  cr_assert_eq(rt_st_count(sr), 2, "%s: the reference has %d outputs", what, rt_st_count(sr));
  static const char *const names[] = {"generated", "generated_lengths"};
  for (int i = 0; i < 2; i++) {
    const RtStTensor *a = rt_st_find(so, names[i]), *b = rt_st_find(sr, names[i]);
    cr_assert(a && b, "%s: no '%s'", what, names[i]);
    cr_assert_eq(a->dtype, RT_I64, "%s: %s is not I64", what, names[i]);
    cr_assert_eq(a->dtype, b->dtype, "%s: %s dtypes differ", what, names[i]);
    cr_assert_eq(a->rank, b->rank, "%s: %s ranks differ", what, names[i]);
    for (int d = 0; d < a->rank; d++)
      cr_assert_eq(a->shape[d], b->shape[d], "%s: %s dim %d: %lld, reference %lld", what,
                   names[i], d, (long long)a->shape[d], (long long)b->shape[d]);
    int64_t n = rt_st_numel(a);
    int32_t *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
    cr_assert(x && y);
    cr_assert_eq(rt_st_read_i32(a, x, -1, INT32_MAX, err, sizeof err), 0, "%s: %s", what, err);
    cr_assert_eq(rt_st_read_i32(b, y, -1, INT32_MAX, err, sizeof err), 0, "%s: %s", what, err);
    for (int64_t k = 0; k < n; k++)
      cr_assert_eq(x[k], y[k], "%s: %s[%lld] = %d, reference %d", what, names[i], (long long)k,
                   x[k], y[k]);
    free(x);
    free(y);
  }
  rt_st_close(so);
  rt_st_close(sr);
}

/* The files a and b hold the same bytes. */
static void same_bytes(const char *a, const char *b, const char *what) {
  size_t la = 0, lb = 0;
  char *x = ct_read_text(a, &la), *y = ct_read_text(b, &lb);
  cr_assert(x && y, "%s: cannot read %s or %s", what, a, b);
  cr_assert(la == lb && memcmp(x, y, la) == 0, "%s: %s and %s differ", what, a, b);
  free(x);
  free(y);
}

/* The text a case printed (its stdout), malloc'd. */
static char *printed(const char *path) {
  char *t = ct_read_text(path, NULL);
  cr_assert(t, "no %s", path);
  return t;
}

/* The batch printed one line per row as it finished, "row R: IDS<tab>TEXT";
 * row R's TEXT must be PyTorch's continuation of held-out prompt R. */
static void batch_expect(const char *text, const Heldout *h, const char *what) {
  int seen = 0;
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    cr_assert(end, "%s: an unterminated line in:\n%s", what, text);
    int r;
    cr_assert_eq(sscanf(line, "row %d:", &r), 1, "%s: not a row: '%.*s'", what,
                 (int)(end - line), line);
    cr_assert(r >= 0 && r < GEN_BATCH && !(seen & 1 << r), "%s: row %d again or out of range",
              what, r);
    seen |= 1 << r;
    const char *tab = memchr(line, '\t', (size_t)(end - line));
    cr_assert(tab, "%s: row %d prints no text", what, r);
    cr_assert(strlen(h->want[r]) == (size_t)(end - tab - 1) &&
                  memcmp(tab + 1, h->want[r], strlen(h->want[r])) == 0,
              "%s: row %d ('%s') printed '%.*s', PyTorch '%s'", what, r, h->prompt[r],
              (int)(end - tab - 1), tab + 1, h->want[r]);
    line = end + 1;
  }
  cr_assert_eq(seen, (1 << GEN_BATCH) - 1, "%s: rows missing in:\n%s", what, text);
}

/* The reference runs of an example: every case through `tfmc run` (JIT)
 * and the host build of proj (1 thread), into TMP/EXAMPLE-{jit,host}-K.
 * {txt,safetensors}; they must agree with each other and with PyTorch. */
static void reference_run(const GenModel *m, const char *proj, const char *exe, const char *tmp,
                          const Heldout *h) {
  char args[800], what[1000];
  for (int k = 0; k < GEN_CASES; k++) {
    case_args(m, k, tmp, args, sizeof args);
    CT_RUN("%s run " EXAMPLES "/%s/model.tfm --weights " EXAMPLES
           "/%s/weights.safetensors --vocab " EXAMPLES "/%s/vocab.txt %s --outputs "
           "%s/%s-jit-%d.safetensors > %s/%s-jit-%d.txt",
           TFMC, m->example, m->example, m->example, args, tmp, m->example, k, tmp, m->example,
           k);
    CT_RUN("cd %s && ./%s --vocab " EXAMPLES "/%s/vocab.txt %s --outputs "
           "%s/%s-host-%d.safetensors --threads 1 > %s/%s-host-%d.txt",
           proj, exe, m->example, args, tmp, m->example, k, tmp, m->example, k);
    char jit_txt[700], host_txt[700], jit_out[700], host_out[700];
    snprintf(jit_txt, sizeof jit_txt, "%s/%s-jit-%d.txt", tmp, m->example, k);
    snprintf(host_txt, sizeof host_txt, "%s/%s-host-%d.txt", tmp, m->example, k);
    snprintf(jit_out, sizeof jit_out, "%s/%s-jit-%d.safetensors", tmp, m->example, k);
    snprintf(host_out, sizeof host_out, "%s/%s-host-%d.safetensors", tmp, m->example, k);
    char *jit = printed(jit_txt), *host = printed(host_txt);
    snprintf(what, sizeof what, "%s on the host, %s", m->name, args);
    cr_assert_str_eq(host, jit, "%s: printed '%s', tfmc run '%s'", what, host, jit);
    gen_outputs_equal(host_out, jit_out, what);
    bool is_greedy = strlen(host) == strlen(m->greedy) + 1 &&
                     strncmp(host, m->greedy, strlen(m->greedy)) == 0 && host[strlen(host) - 1] == '\n';
    if (k == 0)
      cr_assert(is_greedy, "%s: printed '%s', the README '%s'", what, host, m->greedy);
    else if (k == 1)
      batch_expect(host, h, what);
    else if (k == 2)
      cr_assert(!is_greedy,
                "%s: sampled the greedy text '%s'; choose a seed and temperature that do not",
                what, m->greedy);
    free(jit);
    free(host);
  }
}

/* model.h's step API on target x: tests/generate/step_api_example.c
 * (greedy by hand, the KV cache handed in by the caller, one id per line,
 * eos included) cross-built against proj's libmodel.a at -Werror and run
 * under qemu on the README's prompt prints the ids of the host's greedy
 * --outputs (case 0). */
static void step_api_run(const CrossTarget *x, const GenModel *m, const char *proj,
                         const char *exe, const char *tmp) {
  const CtTool *t = &x->tool;
  CT_RUN("cd %s && %s -std=c11 " CT_WARN " -I. -o step_api " TFMC_SOURCE_DIR
         "/tests/generate/step_api_example.c libmodel.a -lm -lpthread",
         proj, t->cc);
  int64_t prompt[16];
  int n = vocab_ids(m->example, m->prompt, prompt, 16);
  char ids[200] = "";
  for (int i = 0; i < n; i++)
    snprintf(ids + strlen(ids), sizeof ids - strlen(ids), " %lld", (long long)prompt[i]);
  char weights[100];
  snprintf(weights, sizeof weights, "%s", m->embed ? "-" : exe);
  if (!m->embed) strcat(weights, ".weights");
  CT_RUN("cd %s && %s ./step_api %s 20%s > %s/%s-%s-api.txt", proj, t->run, weights, ids, tmp,
         m->name, t->name);
  char path[700], want[400] = "";
  snprintf(path, sizeof path, "%s/%s-host-0.safetensors", tmp, m->example);
  int64_t n_gen;
  float *gen = ct_read_output(path, "generated", &n_gen);
  for (int64_t i = 0; i < n_gen; i++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "%d\n", (int)gen[i]);
  free(gen);
  snprintf(path, sizeof path, "%s/%s-%s-api.txt", tmp, m->name, t->name);
  char *got = printed(path);
  cr_assert_str_eq(got, want, "%s on %s, model.h step API on '%s': printed\n%s, the host\n%s",
                   m->name, t->name, m->prompt, got, want);
  free(got);
}

/* Every case on target x from the cross build proj: the same text as the
 * host build and tfmc run, the same generated ids, the same output bytes
 * as the host's. Prints what it compared. */
static void cross_run(const CrossTarget *x, const GenModel *m, const char *proj, const char *exe,
                      const char *tmp) {
  const CtTool *t = &x->tool;
  char args[800], what[1000], shown[GEN_CASES][64];
  for (int k = 0; k < GEN_CASES; k++) {
    case_args(m, k, tmp, args, sizeof args);
    CT_RUN("cd %s && %s ./%s --vocab " EXAMPLES "/%s/vocab.txt %s --outputs "
           "%s/%s-%s-%d.safetensors --threads 2 > %s/%s-%s-%d.txt",
           proj, t->run, exe, m->example, args, tmp, m->name, t->name, k, tmp, m->name, t->name,
           k);
    char cross_txt[700], host_txt[700], cross_out[700], host_out[700], jit_out[700];
    snprintf(cross_txt, sizeof cross_txt, "%s/%s-%s-%d.txt", tmp, m->name, t->name, k);
    snprintf(host_txt, sizeof host_txt, "%s/%s-host-%d.txt", tmp, m->example, k);
    snprintf(cross_out, sizeof cross_out, "%s/%s-%s-%d.safetensors", tmp, m->name, t->name, k);
    snprintf(host_out, sizeof host_out, "%s/%s-host-%d.safetensors", tmp, m->example, k);
    snprintf(jit_out, sizeof jit_out, "%s/%s-jit-%d.safetensors", tmp, m->example, k);
    char *cross = printed(cross_txt), *host = printed(host_txt);
    snprintf(what, sizeof what, "%s on %s, %s", m->name, t->name, args);
    cr_assert_str_eq(cross, host, "%s: printed '%s', the host (and tfmc run) '%s'", what, cross,
                     host);
    gen_outputs_equal(cross_out, host_out, what);
    gen_outputs_equal(cross_out, jit_out, what);
    same_bytes(cross_out, host_out, what);
    size_t n = strcspn(cross, "\n");
    snprintf(shown[k], sizeof shown[k], "%.*s", n > 40 ? 40 : (int)n, cross);
    free(cross);
    free(host);
  }
  step_api_run(x, m, proj, exe, tmp);
  fprintf(stderr,
          "cross %-8s %-16s = host = tfmc run (text, ids, output bytes): greedy '%s', batch "
          "of %d, sampled '%s', beams '%s'; step API = host\n",
          t->name, m->name, shown[0], GEN_BATCH, shown[2], shown[3]);
}

static void cross_generate_run(const CrossTarget *x) {
  cr_assert(access(TFMC, X_OK) == 0, "%s is not built (this test emits through `tfmc emit-c`)",
            TFMC);
  const CtTool *t = &x->tool;
  char *tmp = ct_mkdtemp("crossgen");
  for (int i = 0; i < N_GEN_MODELS; i++) {
    const GenModel *m = &gen_models[i];
    char host[700], cross[700];
    snprintf(host, sizeof host, "%s/%s-host", tmp, m->name);
    snprintf(cross, sizeof cross, "%s/%s-%s", tmp, m->name, t->name);
    CT_RUN("%s emit-c " EXAMPLES "/%s/model.tfm --weights " EXAMPLES
           "/%s/weights.safetensors -o %s%s",
           TFMC, m->example, m->example, host, m->embed ? " --embed-weights" : "");
    char *exe = project_exe(host);
    Heldout h;
    heldout_read(m->example, &h);
    char batch[700];
    snprintf(batch, sizeof batch, "%s/%s-batch.safetensors", tmp, m->example);
    batch_write(m, &h, batch);
    /* the same sources for both builds: make builds in place */
    CT_RUN("cp -R %s %s", host, cross);
    CT_RUN("cd %s && make -j2 NO_BLAS=1 CC=gcc AR=ar CFLAGS='-O2 -Werror'", host);
    reference_run(m, host, exe, tmp, &h);
    CT_RUN("cd %s && make -j2 NO_BLAS=1 CC=%s AR=%s CFLAGS='-O2 -Werror'", cross, t->cc, t->ar);
    elf_expect(cross, exe, m->name, x);
    if (m->embed) {
      char path[800];
      snprintf(path, sizeof path, "%s/%s.weights", cross, exe);
      cr_assert(access(path, F_OK) != 0, "--embed-weights wrote %s", path);
    }
    cross_run(x, m, cross, exe, tmp);
    free(exe);
  }
  ct_rmdir(tmp);
}

Test(cross_generate, aarch64_qemu, .timeout = 300) {
  const char *why = cross_missing(&cross_aarch64);
  if (why) cr_skip_test("%s", why);
  cross_generate_run(&cross_aarch64);
}

Test(cross_generate, s390x_big_endian_qemu, .timeout = 300) {
  const char *why = cross_missing(&cross_s390x);
  if (why) cr_skip_test("%s", why);
  cross_generate_run(&cross_s390x);
}
