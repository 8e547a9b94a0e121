/* tests/fuzz/fuzz_spec.c — fuzz harness for the .tfm frontend (lexer,
 * parser, semantic checks, weight maps and preset expansion).
 *
 * The input bytes become a SrcFile (NUL-terminated, but its length is the
 * input's, so NUL bytes inside are lexed, as the lexer must cope with them).
 * Invariants checked, any violation aborts:
 *   - tokens: in order, inside the text, each location equal to the line and
 *     byte column of its first byte, one TOK_EOF at the end; lexical errors
 *     are reported iff there is a TOK_ERROR token;
 *   - spec_parse returns NULL iff it reported an error, and then the
 *     captured text is non-empty and starts with the file's name;
 *   - an accepted spec is consistent: sizes in their documented bounds,
 *     heads divides d_model, token ids below vocab, rules with known
 *     transforms and non-empty sources;
 *   - parsing is deterministic: a second run prints the same diagnostics.
 */
#include "frontend/spec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what, const char *detail) {
  if (!ok) {
    fprintf(stderr, "fuzz_spec: invariant violated: %s\n%s\n", what, detail ? detail : "");
    abort();
  }
}

static SrcFile *make_src(Arena *a, const uint8_t *data, size_t size) {
  SrcFile *f = arena_alloc(a, sizeof *f);
  char *text = arena_alloc(a, size + 1);
  memcpy(text, data, size);
  f->name = "fuzz.tfm";
  f->text = text;
  f->len = size;
  return f;
}

static void check_tokens(const SrcFile *src) {
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  int n;
  Token *t = lex_tokens(a, src, &d, &n);
  check(n >= 1 && t[n - 1].kind == TOK_EOF, "token array does not end with EOF", NULL);
  const char *prev_end = src->text;
  int line = 1;
  const char *line_start = src->text;
  const char *scan = src->text;
  bool any_error = false;
  for (int i = 0; i < n; i++) {
    check(t[i].kind >= 0 && t[i].kind < TOK_KIND_COUNT, "bad token kind", NULL);
    check(i == n - 1 || t[i].kind != TOK_EOF, "EOF before the end", NULL);
    check(t[i].start >= prev_end && t[i].len >= 0 &&
              t[i].start + t[i].len <= src->text + src->len,
          "token outside the text or out of order", NULL);
    for (; scan < t[i].start; scan++)
      if (*scan == '\n') line++, line_start = scan + 1;
    check(t[i].loc.line == line && t[i].loc.col == (int)(t[i].start - line_start) + 1,
          "token location does not match its position", NULL);
    if (t[i].kind == TOK_ERROR) any_error = true;
    if (t[i].kind == TOK_IDENT || t[i].kind == TOK_STRING)
      check(t[i].str != NULL, "identifier or string without text", NULL);
    prev_end = t[i].start + t[i].len;
  }
  check(any_error == (d.n_errors > 0), "lexical errors and TOK_ERROR tokens disagree",
        d.captured);
  arena_destroy(a);
}

static void check_spec(const Spec *s) {
  const ModelSpec *m = s->model;
  check(m != NULL && m->name && m->name[0], "accepted spec without a model", NULL);
  check(m->arch >= 0 && m->arch < ARCH_COUNT, "bad arch", NULL);
  check(m->d_model >= 1 && m->d_model <= 65536, "d_model out of bounds", NULL);
  check(m->heads >= 1 && m->heads <= 1024 && m->d_model % m->heads == 0, "bad heads", NULL);
  check(m->d_ff >= 1 && m->d_ff <= 1048576, "ffn out of bounds", NULL);
  check(m->max_batch >= 1 && m->max_batch <= 65536, "max_batch out of bounds", NULL);
  bool enc = m->arch != ARCH_DECODER, dec = m->arch != ARCH_ENCODER;
  /* layers 0 (embeddings only) is valid on every arch; a stack the arch
   * lacks has none */
  check(m->layers_enc >= 0 && m->layers_enc <= 1024 && m->layers_dec >= 0 &&
            m->layers_dec <= 1024 && (enc || m->layers_enc == 0) && (dec || m->layers_dec == 0),
        "layers vs arch", NULL);
  check(enc == (m->vocab_src > 0) && dec == (m->vocab_tgt > 0), "vocab vs arch", NULL);
  check(enc == (m->max_src > 0) && dec == (m->max_tgt > 0), "max_len vs arch", NULL);
  check(m->mask_dec_causal == dec, "decoders are causal", NULL);
  check(!m->mask_cross_padding || m->arch == ARCH_ENCODER_DECODER, "cross mask", NULL);
  check(m->norm_eps > 0 && m->norm_eps < 1 && m->embed_norm_eps > 0 && m->embed_norm_eps < 1,
        "eps out of bounds", NULL);
  check(m->embed_scale > 0, "embed_scale", NULL);
  check(m->pos != POS_LEARNED || m->pos_max >= 1, "learned positions without a table", NULL);
  if (m->pos != POS_NONE && m->pos_max > 0)
    check(m->max_src <= m->pos_max && m->max_tgt <= m->pos_max, "max_len beyond the table",
          NULL);
  int64_t ids[3] = {m->pad_id, m->bos_id, m->eos_id};
  for (int i = 0; i < 3; i++) {
    check(ids[i] >= -1, "negative token id", NULL);
    if (enc) check(ids[i] < m->vocab_src, "token id >= vocab", NULL);
    if (dec) check(ids[i] < m->vocab_tgt, "token id >= vocab", NULL);
  }
  check(m->head != HEAD_CLASSIFIER || (m->arch == ARCH_ENCODER && m->n_classes >= 1),
        "classifier", NULL);
  check(!m->pooler || m->head == HEAD_CLASSIFIER, "pooler without classifier", NULL);
  check(!m->head_tied || !m->head_bias, "tied head with a bias", NULL);
  check(m->token_types == 0 || m->arch == ARCH_ENCODER, "token_types", NULL);
  const WeightMap *w = s->weights;
  if (!w) return;
  check(strcmp(w->model_name, m->name) == 0, "weights name differs from the model's", NULL);
  check(w->root != NULL, "NULL root", NULL);
  bool in_preset_part = false;
  for (int i = 0; i < w->n_rules; i++) {
    const WeightRule *r = &w->rules[i];
    check(!in_preset_part || r->from_preset, "an explicit rule after a preset rule", NULL);
    check(!r->from_preset || w->preset, "a preset rule without a preset", NULL);
    in_preset_part = r->from_preset;
    check(r->target && r->source && r->source[0] && r->weight_suffix && r->bias_suffix,
          "incomplete rule", NULL);
    check(r->xform >= 0 && r->xform < WX_COUNT, "bad transform", NULL);
    for (int j = 0; j < i; j++)
      check(strcmp(w->rules[j].target, r->target) != 0, "two rules for one target", r->target);
  }
  for (int i = 0; i < w->n_ignore; i++)
    check(w->ignore[i] && w->ignore[i][0], "empty ignore pattern", NULL);
}

static char *run_parse(const uint8_t *data, size_t size, bool *accepted) {
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = make_src(a, data, size);
  Spec *s = spec_parse(a, src, &d);
  *accepted = s != NULL;
  if (!s) {
    check(d.n_errors > 0, "spec_parse failed without an error", NULL);
    check(d.captured && strncmp(d.captured, "fuzz.tfm", 8) == 0,
          "diagnostics missing or not about the file", d.captured);
  } else {
    check(d.n_errors == 0, "spec_parse returned a spec and reported errors", d.captured);
    check(s->src == src, "spec->src", NULL);
    check_spec(s);
  }
  char *out = strdup(d.captured ? d.captured : "");
  check(out != NULL, "out of memory", NULL);
  arena_destroy(a);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Arena *a = arena_create();
  check_tokens(make_src(a, data, size));
  arena_destroy(a);
  bool ok1, ok2;
  char *first = run_parse(data, size, &ok1);
  char *second = run_parse(data, size, &ok2);
  check(ok1 == ok2 && strcmp(first, second) == 0, "spec_parse is not deterministic", first);
  free(first);
  free(second);
  return 0;
}
