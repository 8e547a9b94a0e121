/* frontend/sema.c — checks a model block and fills the ModelSpec.
 *
 * Every key is one row of model_keys.def (name, required, repeatable,
 * handler, where its location is recorded); the enum, the names unknown keys
 * are matched against, the missing/duplicate checks and the dispatch are
 * all derived from it.
 *
 * Each key has a handler that reads the line's values through a cursor
 * (Cur); a line that does not fit its key's grammar gets one message (the
 * first problem on the line) and is otherwise ignored. Range errors do not
 * stop the line. Checks that involve two keys (heads divides d_model, token
 * ids below vocab, max_len within the position table)
 * run after all lines, and only when both keys were read cleanly, so one
 * mistake never produces a cascade of follow-on messages.
 *
 * `arch` is read first (wherever it is written) because the meaning of
 * vocab, layers, max_len, final_norm, mask, head and token_types depends on
 * it; when it is missing or wrong, the architecture-dependent checks are
 * skipped (the arch error is reported).
 *
 * Defaults (README "Model keys"): norm post eps 1e-5, final_norm no,
 * embed_scale 1, embed_norm eps 1e-5 when present, token_types 0, max_batch
 * 64, max_len = the position table size (learned, or sinusoidal with max)
 * else 512, pad/bos/eos -1, decoders always causal. Counts of the side an
 * architecture does not have (vocab, layers, max_len) are 0.
 */
#include "frontend/parse_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One constant per model key (model_keys.def); the rest of the key table
 * (names, required, repeatable, handler, loc) is `keys` below the handlers. */
typedef enum Key {
#define SPEC_MODEL_KEY(E, name, required, repeatable, handler, loc) K_##E,
#include "frontend/model_keys.def"
#undef SPEC_MODEL_KEY
  K_COUNT
} Key;

enum { SIDE_ENCODER, SIDE_DECODER, SIDE_CROSS, SIDE_COUNT };
static const char *const side_names[SIDE_COUNT] = {"encoder", "decoder", "cross"};
static const char *const arch_names[ARCH_COUNT] = {"encoder", "decoder", "encoder_decoder"};

typedef struct LateError {
  IrLoc loc;
  const char *msg;
} LateError;

typedef struct Sema {
  Arena *a;
  Diags *d;
  const Block *b;
  ModelSpec *m;
  const Entry *first[K_COUNT];        /* where each key was first given */
  const Entry *mask_first[SIDE_COUNT];
  bool ok[K_COUNT];                   /* given and read without an error */
  bool suggested[K_COUNT];            /* an unknown key was taken for a misspelling of it */
  bool arch_known;
  /* tokens the cross-key checks point at */
  const Token *t_heads, *t_d_model, *t_tied;
  const Token *t_max_src, *t_max_tgt; /* NULL: not given */
  const Token *t_ids[3];              /* pad, bos, eos */
  bool max_len_plain;                 /* "max_len N" (not src/tgt) */
  LateError late[8];                  /* cross-key errors, printed in source order */
  int n_late;
  bool scale_sqrt;
  bool final_yes;
} Sema;

static bool has_encoder(const Sema *s) {
  return s->m->arch == ARCH_ENCODER || s->m->arch == ARCH_ENCODER_DECODER;
}

static bool has_decoder(const Sema *s) {
  return s->m->arch == ARCH_DECODER || s->m->arch == ARCH_ENCODER_DECODER;
}

/* ---- the value cursor ---- */

typedef struct Cur {
  Sema *s;
  const Entry *e;
  int i;
  const char *label; /* the key as messages name it: "heads", "mask encoder" */
  const char *gram;  /* "one integer": what the key takes, for messages */
  bool failed;
} Cur;

static Cur cur_make(Sema *s, const Entry *e, const char *gram) {
  return (Cur){s, e, 0, e->key->str, gram, false};
}

static const char *cur_key(const Cur *c) {
  return c->label;
}

static const Token *cur_peek(const Cur *c) {
  return c->i < c->e->n_vals ? &c->e->vals[c->i] : NULL;
}

/* The line does not fit the key's grammar at t (NULL: it ended early). */
static void cur_fail(Cur *c, const Token *t) {
  if (c->failed) return;
  c->failed = true;
  if (t)
    diag_error(c->s->d, t->loc, "'%s' takes %s, got %s", cur_key(c), c->gram,
               tok_show(c->s->a, t));
  else
    diag_error(c->s->d, c->e->end, "'%s' takes %s", cur_key(c), c->gram);
}

/* Reports a custom message at t and stops the line. */
static void cur_error(Cur *c, const Token *t, const char *msg) {
  if (c->failed) return;
  c->failed = true;
  diag_error(c->s->d, t ? t->loc : c->e->end, "%s", msg);
}

static bool cur_at_word(const Cur *c, const char *w) {
  const Token *t = cur_peek(c);
  return t && t->kind == TOK_IDENT && strcmp(t->str, w) == 0;
}

static bool cur_done(const Cur *c) {
  return c->failed || c->i >= c->e->n_vals;
}

/* One of words[0..n): returns its index, or -1 after reporting (with a
 * suggestion for a near miss). */
static int cur_choice(Cur *c, const char *const *words, int n, const Token **tok) {
  if (c->failed) return -1;
  const Token *t = cur_peek(c);
  if (tok) *tok = t;
  if (!t || t->kind != TOK_IDENT) {
    cur_fail(c, t);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (strcmp(t->str, words[i]) == 0) {
      c->i++;
      return i;
    }
  int near = spec_nearest(t->str, words, n);
  c->failed = true;
  if (near >= 0)
    diag_error(c->s->d, t->loc, "'%s' takes %s, got %s (did you mean '%s'?)", cur_key(c),
               c->gram, tok_show(c->s->a, t), words[near]);
  else
    diag_error(c->s->d, t->loc, "'%s' takes %s, got %s", cur_key(c), c->gram,
               tok_show(c->s->a, t));
  return -1;
}

static bool cur_word(Cur *c, const char *w) {
  const char *const words[1] = {w};
  return cur_choice(c, words, 1, NULL) == 0;
}

/* An integer in lo..hi. Out of range is reported but does not stop the
 * line; what says what the number is ("layers encoder"). */
static bool cur_int(Cur *c, const char *what, int64_t lo, int64_t hi, int64_t *out,
                    const Token **tok) {
  if (c->failed) return false;
  const Token *t = cur_peek(c);
  if (tok) *tok = t;
  if (!t || t->kind != TOK_INT) {
    cur_fail(c, t);
    return false;
  }
  c->i++;
  if (t->ival < lo || t->ival > hi) {
    if (hi == INT64_MAX)
      diag_error(c->s->d, t->loc, "'%s' must be %lld or more, got %lld", what, (long long)lo,
                 (long long)t->ival);
    else
      diag_error(c->s->d, t->loc, "'%s' must be between %lld and %lld, got %lld", what,
                 (long long)lo, (long long)hi, (long long)t->ival);
    return false;
  }
  *out = t->ival;
  return true;
}

/* A number (integer or float) strictly inside (lo, hi); hi < 0: no bound. */
static bool cur_number(Cur *c, const char *what, double lo, double hi, double *out) {
  if (c->failed) return false;
  const Token *t = cur_peek(c);
  if (!t || (t->kind != TOK_INT && t->kind != TOK_FLOAT)) {
    cur_fail(c, t);
    return false;
  }
  c->i++;
  if (!(t->fval > lo) || (hi >= 0 && !(t->fval < hi))) {
    const char *text = spec_clip(c->s->a, arena_strndup(c->s->a, t->start, (size_t)t->len));
    if (hi >= 0)
      diag_error(c->s->d, t->loc, "'%s' must be greater than %g and less than %g, got %s",
                 what, lo, hi, text);
    else
      diag_error(c->s->d, t->loc, "'%s' must be greater than %g, got %s", what, lo, text);
    return false;
  }
  *out = t->fval;
  return true;
}

/* Nothing may follow. */
static bool cur_end(Cur *c) {
  if (c->failed) return false;
  const Token *t = cur_peek(c);
  if (!t) return true;
  c->failed = true;
  diag_error(c->s->d, t->loc, "unexpected %s: '%s' takes %s", tok_show(c->s->a, t),
             cur_key(c), c->gram);
  return false;
}

/* A flag word repeated on one line. */
static bool cur_once(Cur *c, const Token *t, const Token **seen) {
  if (*seen) {
    cur_error(c, t, arena_printf(c->s->a, "'%s' given twice in one '%s' line", t->str,
                                 cur_key(c)));
    return false;
  }
  *seen = t;
  return true;
}

static const Token *cur_take(Cur *c) {
  const Token *t = cur_peek(c);
  if (t) c->i++;
  return t;
}

/* ---- one handler per key ---- */

static bool key_arch(Sema *s, const Entry *e) {
  Cur c = cur_make(s, e, "encoder, decoder or encoder_decoder");
  int k = cur_choice(&c, arch_names, ARCH_COUNT, NULL);
  if (!cur_end(&c)) return false;
  s->m->arch = (Arch)k;
  return true;
}

/* "vocab N" or "vocab src N tgt M" (encoder_decoder only); also used for
 * "max_len". */
static bool key_sizes(Sema *s, const Entry *e, int64_t hi, int64_t *src, int64_t *tgt,
                      const Token **t_src, const Token **t_tgt) {
  const char *key = e->key->str;
  Cur c = cur_make(s, e, "a size, or 'src N tgt M'");
  if (cur_at_word(&c, "src")) {
    if (s->arch_known && s->m->arch != ARCH_ENCODER_DECODER) {
      cur_error(&c, cur_peek(&c),
                arena_printf(s->a, "'%s src N tgt M' is only for encoder_decoder models; "
                             "write '%s N' for arch %s", key, key, arch_names[s->m->arch]));
      return false;
    }
    cur_take(&c);
    bool ok = cur_int(&c, arena_printf(s->a, "%s src", key), 1, hi, src, t_src);
    if (!cur_word(&c, "tgt")) return false;
    ok &= cur_int(&c, arena_printf(s->a, "%s tgt", key), 1, hi, tgt, t_tgt);
    return cur_end(&c) && ok;
  }
  int64_t v = 0;
  const Token *t = NULL;
  bool ok = cur_int(&c, key, 1, hi, &v, &t);
  if (!cur_end(&c) || !ok) return false;
  *src = *tgt = v;
  *t_src = *t_tgt = t;
  return true;
}

static bool key_vocab(Sema *s, const Entry *e) {
  const Token *a, *b;
  return key_sizes(s, e, 16777216, &s->m->vocab_src, &s->m->vocab_tgt, &a, &b);
}

static bool key_max_len(Sema *s, const Entry *e) {
  s->max_len_plain = !(e->n_vals > 0 && e->vals[0].kind == TOK_IDENT);
  return key_sizes(s, e, 1048576, &s->m->max_src, &s->m->max_tgt, &s->t_max_src, &s->t_max_tgt);
}

static bool key_one_int(Sema *s, const Entry *e, int64_t lo, int64_t hi, int64_t *out,
                        const Token **tok) {
  Cur c = cur_make(s, e, "one integer");
  bool ok = cur_int(&c, e->key->str, lo, hi, out, tok);
  return cur_end(&c) && ok;
}

static bool key_d_model(Sema *s, const Entry *e) {
  return key_one_int(s, e, 1, 65536, &s->m->d_model, &s->t_d_model);
}

static bool key_heads(Sema *s, const Entry *e) {
  return key_one_int(s, e, 1, 1024, &s->m->heads, &s->t_heads);
}

static bool key_max_batch(Sema *s, const Entry *e) {
  return key_one_int(s, e, 1, 65536, &s->m->max_batch, NULL);
}

static bool key_token_types(Sema *s, const Entry *e) {
  if (s->arch_known && s->m->arch != ARCH_ENCODER) {
    diag_error(s->d, e->key->loc, "'token_types' (BERT's segment embeddings) needs arch "
               "encoder; this model is arch %s", arch_names[s->m->arch]);
    return false;
  }
  return key_one_int(s, e, 1, 1024, &s->m->token_types, NULL);
}

/* "layers N" or "layers encoder N decoder M" (encoder_decoder only) */
static bool key_layers(Sema *s, const Entry *e) {
  Cur c = cur_make(s, e, "a count, or 'encoder N decoder M'");
  ModelSpec *m = s->m;
  if (cur_at_word(&c, "encoder")) {
    if (s->arch_known && m->arch != ARCH_ENCODER_DECODER) {
      cur_error(&c, cur_peek(&c),
                arena_printf(s->a, "'layers encoder N decoder M' is only for encoder_decoder "
                             "models; write 'layers N' for arch %s", arch_names[m->arch]));
      return false;
    }
    cur_take(&c);
    bool ok = cur_int(&c, "layers encoder", 0, 1024, &m->layers_enc, NULL);
    if (!cur_word(&c, "decoder")) return false;
    ok &= cur_int(&c, "layers decoder", 0, 1024, &m->layers_dec, NULL);
    return cur_end(&c) && ok;
  }
  int64_t v = 0;
  /* 0: embeddings only (what an embedding-layer experiment or a probe wants) */
  bool ok = cur_int(&c, "layers", 0, 1024, &v, NULL);
  if (!cur_end(&c) || !ok) return false;
  m->layers_enc = m->layers_dec = v;
  return true;
}

static bool key_ffn(Sema *s, const Entry *e) {
  static const char *const acts[ACT_COUNT] = {"relu", "gelu", "gelu_tanh"};
  Cur c = cur_make(s, e, "a size and an activation (relu, gelu, gelu_tanh)");
  bool ok = cur_int(&c, "ffn", 1, 1048576, &s->m->d_ff, NULL);
  int k = cur_choice(&c, acts, ACT_COUNT, NULL);
  if (!cur_end(&c) || !ok) return false;
  s->m->act = (Activation)k;
  return true;
}

/* norm [layernorm] pre|post (eps X | unbiased_std)* */
static bool key_norm(Sema *s, const Entry *e) {
  static const char *const places[NORM_PLACE_COUNT] = {"pre", "post"};
  Cur c = cur_make(s, e, "pre or post, then optionally 'eps X' and 'unbiased_std'");
  if (cur_at_word(&c, "layernorm")) cur_take(&c);
  int k = cur_choice(&c, places, NORM_PLACE_COUNT, NULL);
  if (k < 0) return false;
  s->m->norm = (NormPlace)k;
  const Token *seen_eps = NULL, *seen_unb = NULL;
  bool ok = true;
  while (!cur_done(&c)) {
    const Token *t = cur_peek(&c);
    if (cur_at_word(&c, "eps")) {
      if (!cur_once(&c, cur_take(&c), &seen_eps)) return false;
      ok &= cur_number(&c, "norm eps", 0, 1, &s->m->norm_eps);
    } else if (cur_at_word(&c, "unbiased_std")) {
      if (!cur_once(&c, cur_take(&c), &seen_unb)) return false;
      s->m->norm_unbiased = true;
    } else {
      cur_fail(&c, t);
    }
  }
  return !c.failed && ok;
}

/* final_norm yes | no | encoder | decoder | encoder decoder */
static bool key_final_norm(Sema *s, const Entry *e) {
  static const char *const words[4] = {"yes", "no", "encoder", "decoder"};
  Cur c = cur_make(s, e, "yes, no, encoder, decoder or 'encoder decoder'");
  ModelSpec *m = s->m;
  const Token *t;
  int k = cur_choice(&c, words, 4, &t);
  if (k < 0) return false;
  if (k <= 1) {
    s->final_yes = k == 0;
    return cur_end(&c);
  }
  const Token *seen[2] = {NULL, NULL};
  bool ok = true;
  for (;;) {
    if (!cur_once(&c, t, &seen[k - 2])) return false;
    bool exists = k == 2 ? has_encoder(s) : has_decoder(s);
    if (s->arch_known && !exists) {
      diag_error(s->d, t->loc, "'final_norm %s': arch %s has no %s", words[k],
                 arch_names[m->arch], words[k]);
      ok = false;
    }
    if (k == 2) m->final_norm_enc = true;
    else m->final_norm_dec = true;
    if (cur_done(&c)) break;
    k = cur_choice(&c, words + 2, 2, &t);
    if (k < 0) return false;
    k += 2;
  }
  return !c.failed && ok;
}

/* position sinusoidal [max N] | learned max N | none */
static bool key_position(Sema *s, const Entry *e) {
  static const char *const kinds[POS_KIND_COUNT] = {"none", "sinusoidal", "learned"};
  Cur c = cur_make(s, e, "sinusoidal, 'sinusoidal max N', 'learned max N' or none");
  const Token *t;
  int k = cur_choice(&c, kinds, POS_KIND_COUNT, &t);
  if (k < 0) return false;
  s->m->pos = (PosKind)k;
  s->m->pos_max = 0;
  if (k == POS_NONE) return cur_end(&c);
  if (cur_done(&c)) {
    if (k == POS_LEARNED) {
      diag_error(s->d, e->end, "'position learned' needs 'max N' (the number of rows of the "
                 "position table)");
      return false;
    }
    return true;
  }
  c.label = k == POS_LEARNED ? "position learned" : "position sinusoidal";
  c.gram = k == POS_LEARNED ? "'max N'" : "nothing, or 'max N'";
  if (!cur_word(&c, "max")) return false;
  c.gram = "'max N' with the number of positions";
  bool ok = cur_int(&c, "position max", 1, 1048576, &s->m->pos_max, NULL);
  return cur_end(&c) && ok;
}

/* embed_scale sqrt_d_model | none | NUMBER */
static bool key_embed_scale(Sema *s, const Entry *e) {
  Cur c = cur_make(s, e, "sqrt_d_model, none or a number");
  const Token *t = cur_peek(&c);
  if (t && t->kind == TOK_IDENT) {
    static const char *const words[2] = {"sqrt_d_model", "none"};
    int k = cur_choice(&c, words, 2, NULL);
    if (k < 0) return false;
    s->scale_sqrt = k == 0;
    s->m->embed_scale = 1.0;
    return cur_end(&c);
  }
  bool ok = cur_number(&c, "embed_scale", 0, -1, &s->m->embed_scale);
  return cur_end(&c) && ok;
}

/* embed_norm [eps X] */
static bool key_embed_norm(Sema *s, const Entry *e) {
  Cur c = cur_make(s, e, "nothing, or 'eps X'");
  s->m->embed_norm = true;
  if (cur_done(&c)) return true;
  if (!cur_word(&c, "eps")) return false;
  bool ok = cur_number(&c, "embed_norm eps", 0, 1, &s->m->embed_norm_eps);
  return cur_end(&c) && ok;
}

/* mask encoder padding | mask decoder causal|padding|causal padding |
 * mask cross padding; one line per side. */
static bool key_mask(Sema *s, const Entry *e) {
  ModelSpec *m = s->m;
  Cur c = cur_make(s, e, "encoder, decoder or cross, then the mask kinds");
  const Token *side_tok;
  int side = cur_choice(&c, side_names, SIDE_COUNT, &side_tok);
  if (side < 0) return false;
  if (s->mask_first[side]) {
    diag_error(s->d, side_tok->loc, "duplicate 'mask %s' line", side_names[side]);
    diag_note(s->d, s->mask_first[side]->vals[0].loc, "first given here");
    return false;
  }
  s->mask_first[side] = e;
  if (s->arch_known) {
    const char *msg = NULL;
    if (side == SIDE_ENCODER && !has_encoder(s))
      msg = arena_printf(s->a, "'mask encoder': arch %s has no encoder", arch_names[m->arch]);
    else if (side == SIDE_DECODER && !has_decoder(s))
      msg = arena_printf(s->a, "'mask decoder': arch %s has no decoder", arch_names[m->arch]);
    else if (side == SIDE_CROSS && m->arch != ARCH_ENCODER_DECODER)
      msg = "cross attention exists only in encoder_decoder models";
    if (msg) {
      cur_error(&c, side_tok, msg);
      return false;
    }
  }
  c.gram = side == SIDE_DECODER ? "causal, padding or 'causal padding'" : "padding";
  c.label = arena_printf(s->a, "mask %s", side_names[side]);
  const Token *seen[2] = {NULL, NULL}; /* causal, padding */
  static const char *const kinds[2] = {"causal", "padding"};
  if (cur_done(&c)) cur_fail(&c, NULL);
  while (!cur_done(&c)) {
    const Token *t;
    int k = cur_choice(&c, kinds, 2, &t);
    if (k < 0) return false;
    if (!cur_once(&c, t, &seen[k])) return false;
    if (k == 0 && side == SIDE_ENCODER) {
      cur_error(&c, t, "a causal mask makes no sense for encoder self-attention "
                "(use arch decoder)");
      return false;
    }
    if (k == 0 && side == SIDE_CROSS) {
      cur_error(&c, t, "cross attention takes only a padding mask (a causal mask applies "
                "to the decoder's self-attention: 'mask decoder causal')");
      return false;
    }
    if (k == 1) {
      if (side == SIDE_ENCODER) m->mask_enc_padding = true;
      if (side == SIDE_DECODER) m->mask_dec_padding = true;
      if (side == SIDE_CROSS) m->mask_cross_padding = true;
    }
  }
  return !c.failed;
}

/* tokens (pad N | bos N | eos N)+ */
static bool key_tokens(Sema *s, const Entry *e) {
  static const char *const words[3] = {"pad", "bos", "eos"};
  Cur c = cur_make(s, e, "any of 'pad N', 'bos N', 'eos N'");
  int64_t *ids[3] = {&s->m->pad_id, &s->m->bos_id, &s->m->eos_id};
  const Token *seen[3] = {NULL, NULL, NULL};
  if (cur_done(&c)) cur_fail(&c, NULL);
  bool ok = true;
  while (!cur_done(&c)) {
    const Token *w;
    int k = cur_choice(&c, words, 3, &w);
    if (k < 0 || !cur_once(&c, w, &seen[k])) return false;
    const Token *t;
    int64_t v;
    if (cur_int(&c, arena_printf(s->a, "tokens %s", words[k]), 0, INT64_MAX, &v, &t)) {
      *ids[k] = v;
      s->t_ids[k] = t;
    } else {
      ok = false;
    }
  }
  return !c.failed && ok;
}

/* head logits|log_softmax|classifier N|none|pooler, then tied, no_bias, pooler.
 * `head pooler` is `head none pooler`: the hidden states and BERT's pooled
 * output tanh(pooler(x[:,0])), what HF's BertModel returns. */
static bool key_head(Sema *s, const Entry *e) {
  static const char *const kinds[HEAD_KIND_COUNT + 1] = {"none", "logits", "log_softmax",
                                                         "classifier", "pooler"};
  static const char *const flags[3] = {"tied", "no_bias", "pooler"};
  ModelSpec *m = s->m;
  Cur c = cur_make(s, e, "logits, log_softmax, 'classifier N', none or pooler, then "
                   "optionally tied, no_bias, pooler");
  const Token *kt;
  int k = cur_choice(&c, kinds, HEAD_KIND_COUNT + 1, &kt);
  if (k < 0) return false;
  const Token *pooler_kind = k == HEAD_KIND_COUNT ? kt : NULL;
  if (pooler_kind) k = HEAD_NONE;
  m->head = (HeadKind)k;
  bool ok = true;
  if (k == HEAD_CLASSIFIER) {
    const char *gram = c.gram;
    c.gram = "the number of classes after 'classifier'";
    ok &= cur_int(&c, "head classifier", 1, 1048576, &m->n_classes, NULL);
    c.gram = gram;
    if (s->arch_known && m->arch != ARCH_ENCODER) {
      diag_error(s->d, kt->loc, "a classifier head needs arch encoder (it reads position 0 "
                 "of the encoder output); this model is arch %s", arch_names[m->arch]);
      ok = false;
    }
  }
  const Token *seen[3] = {NULL, NULL, pooler_kind};
  while (!cur_done(&c)) {
    const Token *t;
    int f = cur_choice(&c, flags, 3, &t);
    if (f < 0 || !cur_once(&c, t, &seen[f])) return false;
  }
  if (c.failed) return false;
  if (seen[0] && k != HEAD_LOGITS && k != HEAD_LOG_SOFTMAX) {
    diag_error(s->d, seen[0]->loc, "'tied' applies only to logits and log_softmax heads "
               "(the output projection reuses the token embedding)");
    ok = false;
  }
  if (seen[1] && k == HEAD_NONE) {
    diag_error(s->d, seen[1]->loc, "'no_bias' needs a head with a projection; 'head none' "
               "has none");
    ok = false;
  }
  if (seen[2] && k != HEAD_CLASSIFIER && k != HEAD_NONE) {
    diag_error(s->d, seen[2]->loc, "'pooler' goes with a classifier head ('head classifier "
               "N pooler') or alone ('head pooler': the hidden states and the pooled output)");
    ok = false;
  } else if (seen[2] && k == HEAD_NONE && s->arch_known && m->arch != ARCH_ENCODER) {
    diag_error(s->d, seen[2]->loc, "a pooler reads position 0 of the encoder output: it needs "
               "arch encoder; this model is arch %s", arch_names[m->arch]);
    ok = false;
  }
  m->head_tied = seen[0] != NULL;
  m->head_bias = !seen[0] && !seen[1];
  m->pooler = seen[2] != NULL;
  s->t_tied = seen[0];
  return ok;
}

/* ---- the key table ---- */

typedef struct KeyInfo {
  bool required, repeatable;
  bool (*handler)(Sema *s, const Entry *e);
  size_t loc; /* offsetof the ModelSpec IrLoc that records the key, or KEY_NO_LOC */
} KeyInfo;

/* The offset of an IrLoc field of ModelSpec; any other type fails to
 * compile (the _Generic has no other association). */
#define KEY_LOC(f) (offsetof(ModelSpec, f) + 0 * sizeof(_Generic(((ModelSpec *)0)->f, IrLoc: 1)))
#define KEY_NO_LOC SIZE_MAX

/* also the words an unknown key is matched against */
static const char *const key_names[K_COUNT] = {
#define SPEC_MODEL_KEY(E, name, required, repeatable, handler, loc) [K_##E] = name,
#include "frontend/model_keys.def"
#undef SPEC_MODEL_KEY
};

static const KeyInfo keys[K_COUNT] = {
#define SPEC_MODEL_KEY(E, name, required, repeatable, handler, loc)                           \
  [K_##E] = {required, repeatable, handler, loc},
#include "frontend/model_keys.def"
#undef SPEC_MODEL_KEY
};

/* ---- after all lines: checks across keys, defaults ---- */

/* Cross-key errors are collected and printed in source order. */
static void late_error(Sema *s, IrLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void late_error(Sema *s, IrLoc loc, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  TFMC_ASSERT(s->n_late < (int)(sizeof s->late / sizeof s->late[0]));
  s->late[s->n_late].loc = loc;
  s->late[s->n_late].msg = arena_strdup(s->a, buf);
  s->n_late++;
}

static void late_flush(Sema *s) {
  for (int i = 1; i < s->n_late; i++)
    for (int j = i; j > 0; j--) {
      IrLoc a = s->late[j - 1].loc, b = s->late[j].loc;
      if (a.line < b.line || (a.line == b.line && a.col <= b.col)) break;
      LateError t = s->late[j];
      s->late[j] = s->late[j - 1];
      s->late[j - 1] = t;
    }
  for (int i = 0; i < s->n_late; i++) diag_error(s->d, s->late[i].loc, "%s", s->late[i].msg);
  s->n_late = 0;
}

static void check_token_ids(Sema *s) {
  static const char *const names[3] = {"pad", "bos", "eos"};
  ModelSpec *m = s->m;
  if (!s->ok[K_VOCAB] || !s->arch_known) return;
  for (int i = 0; i < 3; i++) {
    const Token *t = s->t_ids[i];
    if (!t) continue;
    int64_t id = t->ival;
    if (m->arch == ARCH_ENCODER_DECODER && m->vocab_src != m->vocab_tgt) {
      bool src_bad = id >= m->vocab_src, tgt_bad = id >= m->vocab_tgt;
      if (src_bad || tgt_bad)
        late_error(s, t->loc, "%s %lld must be less than vocab %s %lld (token ids are "
                   "shared by both sides)", names[i], (long long)id, src_bad ? "src" : "tgt",
                   (long long)(src_bad ? m->vocab_src : m->vocab_tgt));
      continue;
    }
    int64_t v = m->arch == ARCH_DECODER ? m->vocab_tgt : m->vocab_src;
    if (id >= v)
      late_error(s, t->loc, "%s %lld must be less than vocab %lld", names[i],
                 (long long)id, (long long)v);
  }
}

static void check_max_len(Sema *s) {
  ModelSpec *m = s->m;
  int64_t table = m->pos != POS_NONE ? m->pos_max : 0;
  if (!s->ok[K_POSITION]) table = 0;
  if (!s->first[K_MAX_LEN]) {
    int64_t v = table > 0 ? table : 512;
    m->max_src = m->max_tgt = v;
  } else if (s->ok[K_MAX_LEN] && table > 0) {
    const Token *ts[2] = {s->t_max_src, s->t_max_tgt};
    const char *sides[2] = {"src ", "tgt "};
    bool use[2] = {true, true};
    if (s->max_len_plain) use[1] = false; /* one token: report once */
    for (int i = 0; i < 2; i++) {
      if (!use[i] || ts[i]->ival <= table) continue;
      late_error(s, ts[i]->loc, "max_len %s%lld exceeds the position table (max %lld)",
                 s->max_len_plain ? "" : sides[i], (long long)ts[i]->ival, (long long)table);
    }
  }
}

static void finish(Sema *s) {
  ModelSpec *m = s->m;
  /* a required key written misspelt has had its error ("did you mean"):
   * one error per line, not a second one for the key it meant */
  for (int k = 0; k < K_COUNT; k++)
    if (keys[k].required && !s->first[k] && !s->suggested[k] && s->b->name)
      diag_error(s->d, m->loc, "model '%s' is missing required key '%s'",
                 spec_clip(s->a, m->name), key_names[k]);
  if (s->ok[K_HEADS] && s->ok[K_D_MODEL] && m->d_model % m->heads != 0)
    late_error(s, s->t_heads->loc, "heads %lld does not divide d_model %lld",
               (long long)m->heads, (long long)m->d_model);
  if (s->scale_sqrt) m->embed_scale = s->ok[K_D_MODEL] ? sqrt((double)m->d_model) : 1.0;
  check_token_ids(s);
  check_max_len(s);
  late_flush(s);
  if (s->arch_known) {
    if (s->final_yes) {
      m->final_norm_enc = has_encoder(s);
      m->final_norm_dec = has_decoder(s);
    }
    m->mask_dec_causal = has_decoder(s);
    if (!has_encoder(s)) m->vocab_src = m->layers_enc = m->max_src = 0;
    if (!has_decoder(s)) m->vocab_tgt = m->layers_dec = m->max_tgt = 0;
  }
  for (int k = 0; k < K_COUNT; k++)
    if (keys[k].loc != KEY_NO_LOC && s->first[k])
      *(IrLoc *)((char *)m + keys[k].loc) = s->first[k]->key->loc;
}

/* Reads the arch line quietly, before the others (errors in it are reported
 * when its turn comes). */
static void preread_arch(Sema *s) {
  for (int i = 0; i < s->b->n_entries; i++) {
    const Entry *e = &s->b->entries[i];
    if (e->kind != ENTRY_PLAIN || strcmp(e->key->str, key_names[K_ARCH]) != 0) continue;
    if (!e->bad && e->n_vals == 1 && e->vals[0].kind == TOK_IDENT)
      for (int k = 0; k < ARCH_COUNT; k++)
        if (strcmp(e->vals[0].str, arch_names[k]) == 0) {
          s->m->arch = (Arch)k;
          s->arch_known = true;
        }
    return;
  }
}

ModelSpec *sema_model(Arena *a, const Block *b, Diags *d) {
  ModelSpec *m = arena_alloc(a, sizeof *m);
  m->name = b->name ? b->name->str : "";
  m->loc = b->name ? b->name->loc : b->keyword->loc;
  m->loc_arch = m->loc_heads = m->loc_mask = m->loc_head = m->loc_position = m->loc;
  m->norm = NORM_POST;
  m->norm_eps = 1e-5;
  m->embed_scale = 1.0;
  m->embed_norm_eps = 1e-5;
  m->pad_id = m->bos_id = m->eos_id = -1;
  m->head_bias = true;
  m->max_batch = 64;
  Sema s = {.a = a, .d = d, .b = b, .m = m};
  const char *shown = spec_clip(a, m->name);
  const char *in_model = b->name ? arena_printf(a, " in model '%s'", shown) : "";
  preread_arch(&s);
  for (int i = 0; i < b->n_entries; i++) {
    const Entry *e = &b->entries[i];
    int k = -1;
    for (int j = 0; j < K_COUNT; j++)
      if (strcmp(e->key->str, key_names[j]) == 0) k = j;
    if (k < 0) {
      int near = spec_nearest(e->key->str, key_names, K_COUNT);
      if (near >= 0) {
        diag_error(d, e->key->loc, "unknown key '%s'%s (did you mean '%s'?)",
                   spec_clip(a, e->key->str), in_model, key_names[near]);
        s.suggested[near] = true;
      } else
        diag_error(d, e->key->loc, "unknown key '%s'%s", spec_clip(a, e->key->str), in_model);
      continue;
    }
    if (s.first[k] && !keys[k].repeatable) {
      diag_error(d, e->key->loc, "duplicate key '%s'%s", key_names[k], in_model);
      diag_note(d, s.first[k]->key->loc, "first given here");
      continue;
    }
    bool first = !s.first[k];
    if (first) s.first[k] = e;
    if (e->bad) continue;
    bool ok = keys[k].handler(&s, e);
    if (first) s.ok[k] = ok;
    else s.ok[k] = s.ok[k] && ok;
  }
  finish(&s);
  return m;
}
