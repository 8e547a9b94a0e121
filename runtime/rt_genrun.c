/* runtime/rt_genrun.c — generation on the command line (rt_genrun.h):
 * the options, the prompt, the loop (rt_generate / rt_generate_beam over an
 * RtStepper), the streamed ids or text, the timing, the outputs file.
 *
 * Invariants: every refusal is one line "PROG: message" on stderr and a
 * return of 1, before anything is printed to stdout where it can be
 * (options, the prompt, the source); what is printed is what --outputs
 * writes; a --repeat run draws the same numbers (the generator re-seeded). */
#include "runtime/rt_genrun.h"

#include "runtime/rt_generate.h"
#include "runtime/rt_io.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ---- */

/* A usage error (exit status 2): the message into err, 2 returned. */
#ifdef __GNUC__
static int usage(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
static int usage(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 2;
}

int rt_gen_args_parse(const RtGenArgStrings *s, RtGenArgs *g, char *err, size_t errlen) {
  char *e;
  memset(g, 0, sizeof *g);
  g->sample = rt_sample_options_default();
  g->length_penalty = 1.0;
  if (!s->generate || !*s->generate) return usage(err, errlen, "--generate takes a count");
  errno = 0;
  long long max_new = strtoll(s->generate, &e, 10);
  if (*e || errno) return usage(err, errlen, "--generate takes a count");
  if (max_new < 1)
    return rt_errorf(err, errlen, "--generate %lld: nothing to generate (give a count >= 1)",
                     max_new);
  g->max_new = max_new;
  g->sample.sample = s->sample != 0;
  if ((s->temperature || s->top_k || s->top_p) && !s->sample)
    return usage(err, errlen, "--temperature, --top-k and --top-p go with --sample");
  if (s->temperature && (g->sample.temperature = strtod(s->temperature, &e), *e || !*s->temperature))
    return usage(err, errlen, "--temperature takes a number");
  if (s->top_k && (errno = 0, g->sample.top_k = strtoll(s->top_k, &e, 10), *e || !*s->top_k || errno))
    return usage(err, errlen, "--top-k takes an integer");
  if (s->top_p && (g->sample.top_p = strtod(s->top_p, &e), *e || !*s->top_p))
    return usage(err, errlen, "--top-p takes a number");
  if (s->seed) {
    errno = 0;
    unsigned long long v = strtoull(s->seed, &e, 10);
    if (*e || !*s->seed || errno || strchr(s->seed, '-')) /* strtoull takes " -1" */
      return usage(err, errlen, "--seed takes a non-negative integer");
    g->seed = v;
  }
  long beams = 0;
  if (s->beams && (errno = 0, beams = strtol(s->beams, &e, 10), *e || !*s->beams || errno))
    return usage(err, errlen, "--beams takes an integer");
  if (s->length_penalty && !s->beams)
    return usage(err, errlen, "--length-penalty goes with --beams");
  if (s->length_penalty && (g->length_penalty = strtod(s->length_penalty, &e),
                            *e || !*s->length_penalty || !isfinite(g->length_penalty)))
    return usage(err, errlen, "--length-penalty takes a finite number");
  if (s->beams && (beams < 1 || beams > RT_GEN_MAX_BEAMS))
    return rt_errorf(err, errlen, "--beams must be in 1..%d (got %s)", RT_GEN_MAX_BEAMS, s->beams);
  if (s->beams && s->sample)
    return rt_errorf(err, errlen,
                     "--beams and --sample do not go together: beam search is deterministic");
  g->beams = (int)beams;
  if (g->sample.sample && rt_sample_options_check(&g->sample, err, errlen)) return 1;
  if (s->output) {
    size_t n = strlen(s->output);
    int file = n > 12 && strcmp(s->output + n - 12, ".safetensors") == 0;
    return rt_errorf(err, errlen, "--output %s: --output NAME adds a named intermediate to a "
                     "forward run's outputs; --generate has no such outputs: it writes generated "
                     "and generated_lengths (and attention, compiled with --attention) to "
                     "--outputs FILE%s%s%s", s->output, file ? " (did you mean --outputs " : "",
                     file ? s->output : "", file ? "?)" : "");
  }
  return 0;
}

/* ---- printing ---- */

typedef struct GenPrint {
  const RtVocab *vocab; /* NULL: ids only */
  int text;             /* a --text prompt: the generated text, streamed */
  int64_t eos, bos;     /* not printed as text (-1: none) */
  const int32_t *ids;   /* text with a tokenizer: the ids so far (rt_generate's out) */
  size_t printed;       /* ... and the bytes of their decoded text printed so far */
  /* the step's attention rows, collected as each id is chosen: NULL, or
   * [heads, rows, keys] with row g at attn + (h * rows + g) * keys */
  const RtStepper *st;
  float *attn;
  int64_t rows, keys;
} GenPrint;

/* --tokens / --inputs prompts: one id per line (with its symbol when there
 * is a vocabulary). --text prompts: the text as it comes: symbols of a
 * vocabulary separated by spaces, or what the tokenizer decodes the ids to
 * (the whole sequence decoded, the new bytes printed); eos and bos are not
 * text. */
/* A vocabulary's symbol for id, or [id] when it has none. */
static void print_symbol(const RtVocab *v, int32_t id) {
  const char *sym = rt_text_vocab_symbol(v, id);
  if (sym) fputs(sym, stdout);
  else printf("[%d]", id);
}

static void gen_print_token(void *user, int64_t index, int32_t id) {
  GenPrint *gp = user;
  if (!gp->text) {
    const char *sym = gp->vocab ? rt_text_vocab_symbol(gp->vocab, id) : NULL;
    if (sym)
      printf("%d %s\n", id, sym);
    else
      printf("%d\n", id);
  } else if (id == gp->eos || id == gp->bos) {
    /* special: no text */
  } else if (gp->vocab->tokenizer) {
    char *txt, msg[256];
    size_t len;
    if (!rt_tokenizer_decode(gp->vocab->tokenizer, gp->ids, index + 1, &txt, &len, msg,
                             sizeof msg)) {
      if (len > gp->printed) fwrite(txt + gp->printed, 1, len - gp->printed, stdout);
      gp->printed = len > gp->printed ? len : gp->printed;
      free(txt);
    }
  } else {
    if (gp->printed++) putchar(' ');
    print_symbol(gp->vocab, id);
  }
  fflush(stdout);
}

/* The attention row of the step that ran last (batch row 0) copied to row
 * index of gp->attn. */
static void attn_collect(GenPrint *gp, int64_t index) {
  const float *p;
  int64_t k;
  if (gp->attn && index < gp->rows && !rt_stepper_attention(gp->st, &p, &k) && k <= gp->keys)
    for (int64_t h = 0; h < gp->st->attn_heads; h++)
      memcpy(gp->attn + (h * gp->rows + index) * gp->keys, p + h * k, (size_t)k * sizeof *p);
}

/* The token callback of a run: the attention row of the step that chose
 * id (still in the step's output: the next step runs after this returns)
 * collected, then id printed. */
static void gen_token(void *user, int64_t index, int32_t id) {
  attn_collect(user, index);
  gen_print_token(user, index, id);
}

/* Beam search keeps no attention rows (beams are reordered and dropped
 * every step): once it is done, the best hypothesis out[0..n) is fed again
 * on batch row 0 of a fresh cache, as greedy decoding would have fed it,
 * and each step's row collected: the rows the search computed for it. */
static int attn_replay(GenPrint *gp, RtStepper *st, const int32_t *prompt, int64_t n_prompt,
                       const int32_t *out, int64_t n, char *err, size_t errlen) {
  const float *logits;
  rt_stepper_reset(st);
  for (int64_t g = 0; g < n; g++) {
    if (g == 0 ? rt_stepper_step(st, prompt, n_prompt, 0, &logits, err, errlen)
               : rt_stepper_step(st, &out[g - 1], 1, n_prompt + g - 1, &logits, err, errlen))
      return 1;
    attn_collect(gp, g);
  }
  return 0;
}

/* ---- the prompt ---- */

/* whitespace- or comma-separated non-negative ids into ids[0..cap); the
 * count, or -1 when there are none or one is not an id */
static int64_t parse_ids(const char *s, int32_t *ids, int64_t cap) {
  int64_t k = 0;
  const char *p = s;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ',') p++;
    if (!*p) break;
    char *e;
    errno = 0;
    long long v = strtoll(p, &e, 10);
    if (e == p || errno || v < 0 || v > INT32_MAX || k >= cap) return -1;
    ids[k++] = (int32_t)v;
    p = e;
  }
  return k ? k : -1;
}

/* --inputs: `tokens` [B,T] (decoder) or `src` [B,S] (encoder_decoder), and
 * the padding as the forward pass takes it (README "Inputs and outputs"):
 * `mask` / `src_mask` [B,N] (1 = real token), or `lengths` / `src_lengths`
 * [B], or the spec's pad id, else none. */
typedef struct GenBatch {
  int32_t *ids;     /* [rows, len] */
  uint8_t *mask;    /* [rows, len], 1 = real */
  int64_t rows, len;
  int explicit_pad; /* the file gave a mask or lengths */
} GenBatch;

static void gen_batch_free(GenBatch *gb) {
  free(gb->ids);
  free(gb->mask);
  memset(gb, 0, sizeof *gb);
}

static int read_inputs(const char *path, const RtStepper *st, GenBatch *gb, char *err,
                       size_t errlen) {
  const char *name = st->enc ? "src" : "tokens";
  const char *mask_name = st->enc ? "src_mask" : "mask";
  const char *lengths_name = st->enc ? "src_lengths" : "lengths";
  int64_t vocab = st->enc ? st->src_vocab : st->token_vocab;
  int64_t max_len = st->enc ? st->max_src : st->max_len;
  int64_t pad_id = st->enc ? st->enc->pad_id : st->info->pad_id;
  memset(gb, 0, sizeof *gb);
  RtSafetensors *sf = NULL;
  if (rt_st_open(path, &sf, err, errlen)) return 1;
  int rc = 1;
  for (int k = 0; k < rt_st_count(sf); k++) {
    const char *got = rt_st_get(sf, k)->name;
    if (strcmp(got, name) != 0 && strcmp(got, mask_name) != 0 && strcmp(got, lengths_name) != 0) {
      rt_errorf(err, errlen, "%s: unexpected input '%s'; generation takes '%s' [B,N] (the %s) and "
                "optionally '%s' [B,N] or '%s' [B]", path, got, name,
                st->enc ? "sources" : "prompts", mask_name, lengths_name);
      goto done;
    }
  }
  gb->explicit_pad = rt_st_find(sf, mask_name) || rt_st_find(sf, lengths_name);
  /* the step's rows (beams, or prompts of a batch; an encoder_decoder's
   * encoder has as many) */
  const RtStTensor *t = rt_st_find(sf, name);
  if (t && t->rank == 2 && t->shape[0] > st->max_rows) {
    rt_errorf(err, errlen, "%s: a batch of %lld %s; this model was compiled to generate at most "
              "%lld rows at once (tfmc build / emit-c --max-beams K compiles for K)", path,
              (long long)t->shape[0], st->enc ? "sources" : "prompts", (long long)st->max_rows);
    goto done;
  }
  if (rt_io_read_ids(sf, path, name, vocab, st->max_rows, max_len, &gb->ids, &gb->rows, &gb->len,
                     err, errlen))
    goto done;
  if (!(gb->mask = malloc((size_t)(gb->rows * gb->len)))) {
    rt_errorf(err, errlen, "out of memory");
    goto done;
  }
  if (rt_io_key_mask(sf, path, mask_name, lengths_name, gb->ids, gb->rows, gb->len, pad_id,
                     gb->mask, err, errlen))
    goto done;
  rc = 0;
done:
  rt_st_close(sf);
  if (rc) gen_batch_free(gb);
  return rc;
}

/* Each row's real tokens must be one run: moved to the row's end (left
 * padding: a decoder's prompt, whose next token follows its last) or its
 * start (right padding: a source, whose positions count from 0), the pads'
 * ids in the freed cells in their order. pad[b] gets row b's pad count. */
static int realign_rows(GenBatch *gb, int to_end, int64_t *pad, const char *what, char *err,
                        size_t errlen) {
  int64_t n = gb->len;
  int32_t *tmp = malloc((size_t)n * sizeof *tmp);
  if (!tmp) return rt_errorf(err, errlen, "out of memory");
  for (int64_t b = 0; b < gb->rows; b++) {
    int32_t *ids = gb->ids + b * n;
    uint8_t *m = gb->mask + b * n;
    int64_t first = 0, last = n - 1, real = 0;
    while (!m[first]) first++; /* rt_io_key_mask: every row has a real token */
    while (!m[last]) last--;
    for (int64_t i = first; i <= last; i++) real += m[i];
    if (real != last - first + 1) {
      free(tmp);
      return rt_errorf(err, errlen,
                       "%s %lld has padding between its real tokens; generation takes each as "
                       "one run of real tokens, padded on the left or on the right",
                       what, (long long)b);
    }
    int64_t k = to_end ? n - real : 0, p = to_end ? 0 : real;
    for (int64_t i = 0; i < n; i++) {
      if (m[i]) tmp[k++] = ids[i];
      else tmp[p++] = ids[i];
    }
    memcpy(ids, tmp, (size_t)n * sizeof *tmp);
    for (int64_t i = 0; i < n; i++) m[i] = to_end ? i >= n - real : i < real;
    pad[b] = n - real;
  }
  free(tmp);
  return 0;
}

/* ---- the loop ---- */

static int gen_once(const RtGenArgs *g, RtStepper *st, const RtGenerateOptions *go,
                    const int32_t *prompt, int64_t n_prompt, int32_t *out, GenPrint *gp,
                    RtGenerateResult *res, char *err, size_t errlen) {
  if (g->beams)
    return rt_generate_beam(go, g->beams, g->length_penalty, rt_stepper_batch_step,
                            rt_stepper_reorder, st, prompt, n_prompt, out, res, err, errlen);
  return rt_generate(go, rt_stepper_step, st, prompt, n_prompt, out, gp ? gen_token : NULL,
                     gp, res, err, errlen);
}

/* generated i64 [rows, N] (N: the longest row; a shorter row's tail is
 * RT_GEN_PAD_ID) and generated_lengths i64 [rows]; with attn (one row:
 * rt_gen_run's rows, compacted to [1, heads, N, keys]) attention too. */
static int write_outputs(const char *path, const int32_t *out, int64_t stride,
                         const int64_t *lengths, int64_t rows, const GenPrint *attn, char *err,
                         size_t errlen) {
  int64_t n = 0;
  for (int64_t b = 0; b < rows; b++) n = lengths[b] > n ? lengths[b] : n;
  int64_t *ids = malloc((size_t)(rows * n) * sizeof *ids + 8);
  if (!ids) return rt_errorf(err, errlen, "out of memory");
  for (int64_t b = 0; b < rows; b++)
    for (int64_t i = 0; i < n; i++) ids[b * n + i] = i < lengths[b] ? out[b * stride + i] : RT_GEN_PAD_ID;
  RtStWrite w[3] = {
      {.name = "generated", .dtype = RT_I64, .rank = 2, .shape = {rows, n}, .data = ids},
      {.name = "generated_lengths", .dtype = RT_I64, .rank = 1, .shape = {rows}, .data = lengths},
      {.name = "attention", .dtype = RT_F32, .rank = 4,
       .shape = {1, attn && attn->st ? attn->st->attn_heads : 0, n, attn ? attn->keys : 0},
       .data = attn ? attn->attn : NULL}};
  int rc = rt_st_write(path, w, attn && attn->attn ? 3 : 2, NULL, 0, err, errlen);
  free(ids);
  return rc;
}

static int64_t gen_out_len(const RtGenArgs *g, const RtStepper *st) {
  int64_t room = st->max_len > 1 ? st->max_len : 1;
  return g->max_new < room ? g->max_new : room;
}

/* Whether the step's attention is over the source (cross-attention) rather
 * than the positions so far. */
static int attn_cross(const RtStepper *st) {
  return st->info->outputs[st->out_attn].dims[2].sym != st->sym_l;
}

/* The attention rows of up to `rows` generated ids, zeroed, allocated once
 * before the loop over `keys` keys at most. */
static int attn_alloc(GenPrint *gp, const RtStepper *st, int64_t rows, int64_t keys, char *err,
                      size_t errlen) {
  gp->st = st;
  gp->rows = rows;
  gp->keys = keys;
  if (st->attn_heads < 1 || rows > INT64_MAX / st->attn_heads / keys / (int64_t)sizeof(float) ||
      !(gp->attn = calloc((size_t)(st->attn_heads * rows * keys), sizeof(float))))
    return rt_errorf(err, errlen, "out of memory for the attention of %lld tokens",
                     (long long)rows);
  return 0;
}

/* [heads, rows, keys] -> [heads, n, k] in place (n <= rows, k <= keys, so
 * every element moves to an index no larger than its own) */
static void attn_compact(GenPrint *gp, int64_t n, int64_t k) {
  for (int64_t h = 0; h < gp->st->attn_heads; h++)
    for (int64_t i = 0; i < n; i++)
      memmove(gp->attn + (h * n + i) * k, gp->attn + (h * gp->rows + i) * gp->keys,
              (size_t)k * sizeof(float));
  gp->rows = n;
  gp->keys = k;
}

/* --repeat R: R more generations, timed; the summary on stderr. */
static int gen_repeat(const RtGenRun *r, const RtGenArgs *g, RtStepper *st,
                      RtGenerateOptions *go, RtRng *rng, const int32_t *src, int64_t n_src,
                      const int32_t *prompt, int64_t n_prompt, int64_t n_generated, char *err,
                      size_t errlen) {
  int n = r->repeat;
  double *ms = malloc((size_t)n * 4 * sizeof *ms);
  int32_t *again = malloc((size_t)gen_out_len(g, st) * sizeof *again);
  int rc = 1;
  if (!ms || !again) {
    rt_errorf(err, errlen, "out of memory");
    goto done;
  }
  double *enc = ms, *pre = ms + n, *tok = ms + 2 * n, *all = ms + 3 * n;
  for (int i = 0; i < n; i++) {
    RtGenerateResult r2;
    all[i] = enc[i] = rt_timing_now_ms();
    if (st->enc && rt_stepper_encode(st, src, n_src, err, errlen)) goto done;
    enc[i] = rt_timing_now_ms() - enc[i];
    rt_stepper_reset(st);
    rt_rng_seed(rng, g->seed); /* the same draws again */
    if (gen_once(g, st, go, prompt, n_prompt, again, NULL, &r2, err, errlen)) goto done;
    all[i] = rt_timing_now_ms() - all[i];
    pre[i] = r2.prefill_ms;
    tok[i] = r2.n > 1 ? r2.decode_ms / (double)(r2.n - 1) : 0;
  }
  RtTiming tp, tt, ta;
  rt_timing_summarise(pre, n, &tp);
  rt_timing_summarise(tok, n, &tt);
  rt_timing_summarise(all, n, &ta);
  if (st->enc) {
    RtTiming te;
    rt_timing_summarise(enc, n, &te);
    fprintf(stderr, "timing: backend %s, source %lld tokens, encode median %.3f ms (min %.3f)\n",
            r->backend, (long long)n_src, te.median_ms, te.min_ms);
  }
  fprintf(stderr,
          "timing: backend %s, prompt %lld tokens, prefill median %.3f ms (min %.3f); decode "
          "median %.3f ms per token (min %.3f) over %lld tokens; %d runs\n",
          r->backend, (long long)n_prompt, tp.median_ms, tp.min_ms, tt.median_ms, tt.min_ms,
          (long long)(n_generated > 1 ? n_generated - 1 : 0), n);
  /* the whole sequence, encode and cache reset included: what a caller
   * waits for per generation (a median of sums, not a sum of medians) */
  fprintf(stderr, "timing: backend %s, compile %.1f ms, whole generation median %.3f ms (min "
          "%.3f): %sprefill and %lld decode steps; %d runs\n", r->backend, r->compile_ms,
          ta.median_ms, ta.min_ms, st->enc ? "encode, " : "",
          (long long)(n_generated > 1 ? n_generated - 1 : 0), n);
  rc = 0;
done:
  free(ms);
  free(again);
  return rc;
}

/* ---- a batch of prompts (or sources): --inputs with B > 1 ---- */

typedef struct RowPrint {
  const RtVocab *vocab; /* NULL: ids only */
  int64_t bos, eos;     /* not text */
} RowPrint;

/* One line per row, when it is done: "row B: ID ID ...", and with a
 * vocabulary a tab and its text (symbols separated by spaces, or what the
 * tokenizer decodes the ids to; bos and eos are not text). */
static void print_row(void *user, int64_t row, const int32_t *ids, int64_t n, RtStop stop) {
  const RowPrint *rp = user;
  (void)stop;
  printf("row %lld:", (long long)row);
  for (int64_t i = 0; i < n; i++) printf(" %d", ids[i]);
  if (rp->vocab) {
    putchar('\t');
    int32_t *text_ids = malloc((size_t)n * sizeof *text_ids + 4);
    int64_t k = 0;
    for (int64_t i = 0; text_ids && i < n; i++)
      if (ids[i] != rp->eos && ids[i] != rp->bos) text_ids[k++] = ids[i];
    if (text_ids && rp->vocab->tokenizer) {
      char *txt, msg[256];
      size_t len;
      if (!rt_tokenizer_decode(rp->vocab->tokenizer, text_ids, k, &txt, &len, msg, sizeof msg)) {
        fwrite(txt, 1, len, stdout);
        free(txt);
      }
    } else {
      for (int64_t i = 0; text_ids && i < k; i++) {
        if (i) putchar(' ');
        print_symbol(rp->vocab, text_ids[i]);
      }
    }
    free(text_ids);
  }
  putchar('\n');
  fflush(stdout);
}

/* One generation of the batch from a fresh state: the sources encoded
 * (encoder_decoder) or each row's padding set (decoder), the generators
 * seeded (row b: seed + b), the loop. */
static int batch_once(const RtGenArgs *g, RtStepper *st, const RtGenerateOptions *go, RtRng *rngs,
                      const GenBatch *gb, const int64_t *pad, const int32_t *prompt,
                      int64_t n_prompt, int32_t *out, int64_t *lengths, RtRowDoneFn on_done,
                      void *done_user, RtGenerateResult *res, double *encode_ms, char *err,
                      size_t errlen) {
  double t0 = rt_timing_now_ms();
  if (st->enc && rt_stepper_encode_rows(st, gb->ids, gb->mask, gb->rows, gb->len, err, errlen))
    return 1;
  if (encode_ms) *encode_ms = rt_timing_now_ms() - t0;
  rt_stepper_reset(st);
  if (!st->enc && rt_stepper_set_padding(st, pad, gb->rows, err, errlen)) return 1;
  for (int64_t b = 0; b < gb->rows; b++) rt_rng_seed(&rngs[b], g->seed + (uint64_t)b);
  return rt_generate_batch(go, rt_stepper_batch_step, rt_stepper_reorder, st, prompt, gb->rows,
                           n_prompt, out, lengths, NULL, on_done, done_user, res, err, errlen);
}

static int gen_run_batch(const RtGenRun *r, const RtGenArgs *g, RtStepper *st, GenBatch *gb,
                         char *err, size_t errlen) {
  int64_t rows = gb->rows;
  if (g->beams)
    return rt_errorf(err, errlen, "--beams takes one %s; %s holds a batch of %lld (beam search "
                     "of a batch is not supported)", st->enc ? "source" : "prompt", r->inputs,
                     (long long)rows);
  if (st->out_attn >= 0 || r->capture)
    return rt_errorf(err, errlen, "--attention takes one %s; %s holds a batch of %lld (the "
                     "attention of a batch is not supported)", st->enc ? "source" : "prompt",
                     r->inputs, (long long)rows);
  int64_t max_new = gen_out_len(g, st);
  int64_t *pad = malloc((size_t)rows * sizeof *pad), *lengths = malloc((size_t)rows * sizeof *lengths);
  int32_t *out = malloc((size_t)(rows * max_new) * sizeof *out);
  int32_t *prompt = st->enc ? malloc((size_t)rows * sizeof *prompt) : gb->ids;
  RtRng *rngs = malloc((size_t)rows * sizeof *rngs);
  void *scratch = g->sample.sample ? malloc(rt_sample_scratch_bytes(st->vocab) + 64) : NULL;
  double *ms = r->repeat > 0 ? malloc((size_t)r->repeat * 4 * sizeof *ms) : NULL;
  int rc = 1;
  if (!pad || !lengths || !out || !prompt || !rngs || (g->sample.sample && !scratch) ||
      (r->repeat > 0 && !ms)) {
    rt_errorf(err, errlen, "out of memory");
    goto done;
  }
  if (realign_rows(gb, !st->enc, pad, st->enc ? "source row" : "prompt row", err, errlen)) goto done;
  int64_t n_prompt = gb->len;
  if (st->enc) { /* every target starts at bos */
    for (int64_t b = 0; b < rows; b++) prompt[b] = (int32_t)r->bos;
    n_prompt = 1;
  }
  RtGenerateOptions go = {max_new, st->max_len, st->vocab, r->eos,
                          g->sample.sample ? &g->sample : NULL, rngs, scratch};
  RtGenerateResult res;
  RowPrint rp = {r->vocab, r->bos, r->eos};
  if (batch_once(g, st, &go, rngs, gb, pad, prompt, n_prompt, out, lengths, print_row, &rp, &res,
                 NULL, err, errlen))
    goto done;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    rt_errorf(err, errlen, "cannot write to standard output: %s", strerror(errno));
    goto done;
  }
  if (res.stop == RT_STOP_MAX_LEN)
    fprintf(stderr, "%s: stopped after %lld tokens: the batch reached max_len %lld (%lld prompt "
            "slots, padding included)\n", r->prog ? r->prog : "tfmc", (long long)res.n,
            (long long)st->max_len, (long long)n_prompt);
  if (r->repeat > 0) { /* --repeat R: R more generations of the batch, timed */
    double *enc = ms, *pre = ms + r->repeat, *tok = ms + 2 * r->repeat, *all = ms + 3 * r->repeat;
    for (int i = 0; i < r->repeat; i++) {
      RtGenerateResult r2;
      all[i] = rt_timing_now_ms();
      if (batch_once(g, st, &go, rngs, gb, pad, prompt, n_prompt, out, lengths, NULL, NULL, &r2,
                     &enc[i], err, errlen))
        goto done;
      all[i] = rt_timing_now_ms() - all[i];
      pre[i] = r2.prefill_ms;
      tok[i] = r2.n > 1 ? r2.decode_ms / (double)(r2.n - 1) : 0;
    }
    RtTiming te, tp, tt, ta;
    rt_timing_summarise(enc, r->repeat, &te);
    rt_timing_summarise(pre, r->repeat, &tp);
    rt_timing_summarise(tok, r->repeat, &tt);
    rt_timing_summarise(all, r->repeat, &ta);
    if (st->enc)
      fprintf(stderr, "timing: backend %s, %lld sources of %lld tokens, encode median %.3f ms "
              "(min %.3f)\n", r->backend, (long long)rows, (long long)gb->len, te.median_ms,
              te.min_ms);
    fprintf(stderr,
            "timing: backend %s, batch of %lld, prompts %lld tokens, prefill median %.3f ms (min "
            "%.3f); decode median %.3f ms per step of the batch (min %.3f) over %lld steps; %d "
            "runs\n",
            r->backend, (long long)rows, (long long)n_prompt, tp.median_ms, tp.min_ms,
            tt.median_ms, tt.min_ms, (long long)(res.n > 1 ? res.n - 1 : 0), r->repeat);
    fprintf(stderr, "timing: backend %s, compile %.1f ms, whole generation median %.3f ms (min "
            "%.3f): %sprefill and %lld decode steps of the batch; %d runs\n", r->backend,
            r->compile_ms, ta.median_ms, ta.min_ms, st->enc ? "encode, " : "",
            (long long)(res.n > 1 ? res.n - 1 : 0), r->repeat);
  }
  if (r->outputs && write_outputs(r->outputs, out, max_new, lengths, rows, NULL, err, errlen))
    goto done;
  rc = 0;
done:
  free(pad);
  free(lengths);
  free(out);
  if (st->enc) free(prompt);
  free(rngs);
  free(scratch);
  free(ms);
  return rc;
}

int rt_gen_run(const RtGenRun *r, const RtGenArgs *g, RtStepper *st) {
  char err[1024];
  int rc = 1;
  int32_t *src = NULL, *out = NULL, bos_id;
  void *scratch = NULL;
  GenPrint gp = {0};
  int64_t n_src = -1;
  const char *prog = r->prog ? r->prog : "tfmc";
  if (!!r->tokens + !!r->text + !!r->inputs != 1 || (r->text && !r->vocab)) {
    fprintf(stderr, "%s: internal: generation needs exactly one prompt (--text with a vocabulary)\n",
            prog);
    return 1;
  }
  if (st->enc && r->bos < 0) {
    fprintf(stderr, "%s: model '%s' is an encoder_decoder without a bos token: the target "
                    "starts at the spec's 'tokens bos N'\n", prog, st->info->name);
    return 1;
  }
  /* the prompt's (or source's) ids */
  int64_t ids_vocab = st->enc ? st->src_vocab : st->token_vocab;
  if (r->inputs) {
    GenBatch gb;
    if (read_inputs(r->inputs, st, &gb, err, sizeof err)) goto fail;
    if (gb.rows > 1) { /* one line per row when it is done */
      rc = gen_run_batch(r, g, st, &gb, err, sizeof err);
      gen_batch_free(&gb);
      if (rc) goto fail;
      goto done;
    }
    /* one sequence: as the prompt (source) alone, its padding dropped when
     * the file says where it is */
    int64_t pad0 = 0;
    if (gb.explicit_pad && realign_rows(&gb, 0, &pad0, st->enc ? "source row" : "prompt row", err,
                                        sizeof err)) {
      gen_batch_free(&gb);
      goto fail;
    }
    src = gb.ids;
    n_src = gb.len - pad0;
    free(gb.mask);
  } else {
    size_t cap = strlen(r->tokens ? r->tokens : r->text) + 2;
    if (!(src = malloc(cap * sizeof *src))) {
      fprintf(stderr, "%s: out of memory\n", prog);
      return 1;
    }
    if (r->tokens && (n_src = parse_ids(r->tokens, src, (int64_t)cap)) < 0)
      rt_errorf(err, sizeof err, "--tokens: expected whitespace-separated token ids, at least one");
    if (r->text)
      n_src = rt_text_ids(NULL, r->text, r->vocab, ids_vocab, (int64_t)cap, src, err, sizeof err);
  }
  if (n_src < 0) goto fail;
  if (st->enc && rt_stepper_encode(st, src, n_src, err, sizeof err)) goto fail;
  const int32_t *prompt = src; /* a decoder's prompt; an encoder_decoder's target starts at bos */
  int64_t n_prompt = n_src;
  if (st->enc) {
    bos_id = (int32_t)r->bos;
    prompt = &bos_id;
    n_prompt = 1;
  }
  RtRng rng;
  rt_rng_seed(&rng, g->seed);
  RtGenerateOptions go = {g->max_new, st->max_len, st->vocab, r->eos, NULL, NULL, NULL};
  if (g->sample.sample) {
    go.sample = &g->sample;
    go.rng = &rng;
    if (!(go.scratch = scratch = malloc(rt_sample_scratch_bytes(st->vocab) + 64))) {
      rt_errorf(err, sizeof err, "out of memory");
      goto fail;
    }
  }
  if (g->beams > st->max_rows) {
    rt_errorf(err, sizeof err,
              "--beams %d: this model was compiled for beam search with at most %lld beam%s "
              "(tfmc build / emit-c --max-beams K compiles for K)",
              g->beams, (long long)st->max_rows, st->max_rows == 1 ? "" : "s");
    goto fail;
  }
  if (!(out = malloc((size_t)gen_out_len(g, st) * sizeof *out))) {
    rt_errorf(err, sizeof err, "out of memory");
    goto fail;
  }
  RtGenerateResult res;
  gp = (GenPrint){r->vocab, r->text != NULL, r->eos, r->bos, out, 0, NULL, NULL, 0, 0};
  /* the keys: the source, or the prompt and the generated ids */
  int cross = st->out_attn >= 0 && attn_cross(st);
  if (st->out_attn >= 0 && attn_alloc(&gp, st, gen_out_len(g, st),
                                      cross ? n_src : n_prompt + gen_out_len(g, st), err, sizeof err))
    goto fail;
  if (gen_once(g, st, &go, prompt, n_prompt, out, &gp, &res, err, sizeof err)) goto fail;
  if (gp.attn && g->beams &&
      attn_replay(&gp, st, prompt, n_prompt, out, res.n, err, sizeof err))
    goto fail;
  if (gp.attn) attn_compact(&gp, res.n, cross ? n_src : n_prompt + res.n);
  for (int64_t i = 0; g->beams && i < res.n; i++) /* known only when the search is done */
    gen_print_token(&gp, i, out[i]);
  if (gp.text) putchar('\n');
  if (fflush(stdout) != 0 || ferror(stdout)) {
    rt_errorf(err, sizeof err, "cannot write to standard output: %s", strerror(errno));
    goto fail;
  }
  if (res.stop == RT_STOP_MAX_LEN)
    fprintf(stderr, "%s: stopped after %lld tokens: the sequence reached max_len %lld\n", prog,
            (long long)res.n, (long long)st->max_len);
  if (r->repeat > 0 && gen_repeat(r, g, st, &go, &rng, src, n_src, prompt, n_prompt, res.n, err,
                                  sizeof err))
    goto fail;
  if (r->outputs && write_outputs(r->outputs, out, res.n, &res.n, 1, &gp, err, sizeof err))
    goto fail;
  if (r->capture) {
    RtGenCapture *c = r->capture;
    memset(c, 0, sizeof *c);
    if (gp.attn && !(c->key_ids = malloc((size_t)gp.keys * sizeof *c->key_ids))) {
      rt_errorf(err, sizeof err, "out of memory");
      goto fail;
    }
    for (int64_t j = 0; gp.attn && j < gp.keys; j++)
      c->key_ids[j] = cross ? src[j] : j < n_prompt ? prompt[j] : out[j - n_prompt];
    c->ids = out, c->n = res.n, out = NULL;
    c->attention = gp.attn, gp.attn = NULL;
    c->heads = st->out_attn >= 0 ? st->attn_heads : 0;
    c->keys = gp.keys;
  }
  rc = 0;
  goto done;
fail:
  fprintf(stderr, "%s: %s\n", prog, err);
done:
  free(src);
  free(out);
  free(scratch);
  free(gp.attn);
  return rc;
}

void rt_gen_capture_free(RtGenCapture *c) {
  free(c->ids);
  free(c->attention);
  free(c->key_ids);
  memset(c, 0, sizeof *c);
}
