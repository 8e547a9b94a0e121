/* runtime/rt_text.c — one sequence of token ids from the command line, the
 * vocabulary file it may be written in (or the tokenizer that encodes it,
 * rt_tokenizer.c), and the summary of the outputs (see
 * rt_text.h). Shared by `tfmc run` and standalone executables.
 *
 * Invariants: nothing reaches a model unchecked — a bound sequence has
 * 1..max_len ids, each in [0, vocab), and a real token per padding mask,
 * exactly as rt_model_bind would require of a file; every refusal is a
 * message in err, never a crash, and leaves nothing allocated. The printer
 * only reads within the dims it is given, and prints decoded tokens quoted
 * and escaped, whatever their bytes. Libc and libm only, C99 (emitted C
 * projects copy this file). */
#include "runtime/rt_text.h"

#include "runtime/rt_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- the vocabulary ---- */

int rt_text_vocab_load(const char *path, RtVocab *v, char *err, size_t errlen) {
  memset(v, 0, sizeof *v);
  FILE *f = fopen(path, "rb");
  if (!f)
    return rt_errorf(err, errlen, "cannot read %s: %s", path, strerror(errno));
  size_t cap = 4096, len = 0, got;
  char *text = malloc(cap + 1);
  while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      char *bigger = cap < ((size_t)-1 - 1) / 2 ? realloc(text, 2 * cap + 1) : NULL;
      if (!bigger) {
        free(text);
        text = NULL;
        break;
      }
      text = bigger;
      cap *= 2;
    }
  }
  int bad = text && ferror(f);
  int saved = errno;
  fclose(f);
  if (!text)
    return rt_errorf(err, errlen, "%s: out of memory reading the vocabulary", path);
  if (bad) {
    free(text);
    return rt_errorf(err, errlen, "cannot read %s: %s", path, strerror(saved));
  }
  text[len] = '\0';
  int64_t lines = 0;
  for (size_t i = 0; i < len; i++)
    lines += text[i] == '\n';
  lines += len > 0 && text[len - 1] != '\n';
  char **tok = malloc((size_t)(lines + 1) * sizeof *tok);
  if (!tok) {
    free(text);
    return rt_errorf(err, errlen, "%s: out of memory reading the vocabulary", path);
  }
  int64_t n = 0;
  char *p = text, *end = text + len;
  while (p < end) {
    char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e)
      e = end;
    *e = '\0'; /* at end: the terminator already there */
    if (e > p && e[-1] == '\r')
      e[-1] = '\0';
    tok[n++] = p;
    p = e + 1;
  }
  v->tok = tok;
  v->n = n;
  v->text = text;
  return 0;
}

void rt_text_vocab_free(RtVocab *v) {
  if (!v)
    return;
  free(v->tok);
  free(v->text);
  memset(v, 0, sizeof *v);
}

const char *rt_text_vocab_symbol(const RtVocab *v, int64_t id) {
  return v && v->tok && id >= 0 && id < v->n ? v->tok[id] : NULL;
}

/* ---- one sequence ---- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

/* Refuses models whose inputs are not "tokens" plus its masks; returns the
 * index of "tokens", or -1 after a message. */
static int find_tokens(const RtModelInfo *info, char *err, size_t errlen) {
  const char *name = info->name ? info->name : "?";
  int tok = -1, src = 0, tgt = 0, others = 0, types = 0;
  char list[256] = "";
  size_t k = 0;
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind != RT_INPUT_IDS)
      continue;
    if (strcmp(t->name, "tokens") == 0) {
      tok = i;
    } else if (strcmp(t->name, "token_types") == 0) {
      types = 1;
    } else {
      src |= strcmp(t->name, "src") == 0;
      tgt |= strcmp(t->name, "tgt") == 0;
      others++;
      if (k < sizeof list)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", others > 1 ? ", " : "", t->name);
    }
  }
  if (src && tgt && others == 2)
    return rt_errorf(err, errlen,
                "--tokens/--text give one sequence; model '%s' is an encoder_decoder and needs "
                "src and tgt (use --inputs)",
                name),
           -1;
  if (others)
    return rt_errorf(err, errlen,
                "--tokens/--text give one sequence of 'tokens'; model '%s' takes the token ids "
                "%s (use --inputs)",
                name, list),
           -1;
  if (types)
    return rt_errorf(err, errlen, "model '%s' takes token_types; use --inputs", name), -1;
  if (tok < 0)
    return rt_errorf(err, errlen, "model '%s' takes no token ids 'tokens'; use --inputs", name), -1;
  if (info->inputs[tok].rank != 2)
    return rt_errorf(err, errlen, "model '%s': its input 'tokens' is not [batch, length]; use --inputs",
                name),
           -1;
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind == RT_INPUT_MASK && strcmp(t->ids_input, "tokens") != 0)
      return rt_errorf(err, errlen, "model '%s' takes '%s'; use --inputs", name, t->name), -1;
  }
  return tok;
}

/* Encodes text with v's tokenizer into ids[0..max_len); returns their
 * number, or -1 after a message. */
static int64_t encode_text(const char *text, const RtTokenizer *t, int64_t vocab, int64_t max_len,
                           int32_t *ids, char *err, size_t errlen) {
  int32_t *enc;
  int64_t n;
  char msg[256];
  if (rt_tokenizer_encode(t, text, strlen(text), &enc, &n, msg, sizeof msg))
    return rt_errorf(err, errlen, "--text: %s", msg), -1;
  int64_t bad = -1;
  for (int64_t k = 0; k < n && bad < 0; k++)
    if (enc[k] >= vocab)
      bad = k;
  if (bad >= 0) {
    size_t len = 0;
    const char *tok = rt_tokenizer_token(t, enc[bad], &len);
    int32_t id = enc[bad];
    free(enc);
    return rt_errorf(err, errlen,
                     "--text: token %lld '%.*s' has id %d, beyond the model's vocab %lld",
                     (long long)bad, (int)len, tok ? tok : "", (int)id, (long long)vocab),
           -1;
  }
  if (n > max_len) {
    free(enc);
    return rt_errorf(err, errlen, "--text: %lld tokens, longer than the model's max_len %lld",
                     (long long)n, (long long)max_len),
           -1;
  }
  if (n > 0)
    memcpy(ids, enc, (size_t)n * sizeof *ids);
  free(enc);
  if (n == 0)
    return rt_errorf(err, errlen, "empty input sequence"), -1;
  return n;
}

/* Parses the ids of tokens or text into ids[0..max_len); returns their
 * number, or -1 after a message. */
static int64_t parse_ids(const char *tokens, const char *text, const RtVocab *v, int64_t vocab,
                         int64_t max_len, int32_t *ids, char *err, size_t errlen) {
  if (text && v->tokenizer)
    return encode_text(text, v->tokenizer, vocab, max_len, ids, err, errlen);
  int64_t n = 0;
  const char *p = tokens ? tokens : text;
  int64_t unk = -1; /* the vocabulary's unknown token, if it has one */
  static const char *const unk_names[] = {"<unk>", "[UNK]", "<UNK>", "UNK"};
  for (size_t u = 0; text && u < sizeof unk_names / sizeof *unk_names && unk < 0; u++)
    for (int64_t k = 0; k < v->n && unk < 0; k++)
      if (strcmp(v->tok[k], unk_names[u]) == 0)
        unk = k;
  while (*p) {
    while (is_space(*p) || *p == ',')
      p++;
    if (!*p)
      break;
    const char *s = p;
    while (*p && !is_space(*p) && (text || *p != ','))
      p++;
    int w = (int)(p - s);
    size_t wlen = (size_t)(p - s);
    if (n == max_len)
      return rt_errorf(err, errlen, "input longer than the model's max_len %lld", (long long)max_len),
             -1;
    if (tokens) {
      char *e;
      errno = 0;
      long long id = strtoll(s, &e, 10);
      if (e != p || errno)
        return rt_errorf(err, errlen, "--tokens: '%.*s' is not a token id", w, s), -1;
      if (id < 0 || id >= vocab)
        return rt_errorf(err, errlen, "--tokens: id %lld out of range [0, %lld)", id, (long long)vocab),
               -1;
      ids[n++] = (int32_t)id;
    } else {
      int64_t found = -1;
      for (int64_t k = 0; k < v->n && found < 0; k++)
        if (strlen(v->tok[k]) == wlen && memcmp(v->tok[k], s, wlen) == 0)
          found = k;
      if (found < 0 && unk >= 0)
        found = unk; /* a symbol the vocabulary lacks: its unknown token */
      if (found < 0)
        return rt_errorf(err, errlen, "--text: symbol '%.*s' is not in the vocabulary", w, s), -1;
      if (found >= vocab)
        return rt_errorf(err, errlen,
                    "--text: symbol '%.*s' has id %lld, beyond the model's vocab %lld", w, s,
                    (long long)found, (long long)vocab),
               -1;
      ids[n++] = (int32_t)found;
    }
  }
  if (n == 0)
    return rt_errorf(err, errlen, "empty input sequence"), -1;
  return n;
}

int64_t rt_text_ids(const char *tokens, const char *text, const RtVocab *v, int64_t vocab,
                    int64_t max_len, int32_t *ids, char *err, size_t errlen) {
  if (!tokens == !text || (text && !v))
    return rt_errorf(err, errlen, "internal: rt_text_ids arguments"), -1;
  size_t bad;
  if (text && !rt_utf8_valid(text, strlen(text), &bad))
    return rt_errorf(err, errlen, "--text: invalid UTF-8 at byte %zu", bad), -1;
  return parse_ids(tokens, text, v, vocab, max_len, ids, err, errlen);
}

/* Sets the symbol or checks the constant of dim d of t to value. */
static int bind_dim(const RtModelInfo *info, const RtTensorInfo *t, int d, int64_t value,
                    RtBound *out, char *err, size_t errlen) {
  const RtDim *dim = &t->dims[d];
  if (dim->sym < 0) {
    if (dim->value != value)
      return rt_errorf(err, errlen, "model '%s' takes '%s' with dim %d exactly %lld, not %lld; use "
                               "--inputs",
                  info->name ? info->name : "?", t->name, d, (long long)dim->value,
                  (long long)value);
    return 0;
  }
  if (out->syms[dim->sym] && out->syms[dim->sym] != value)
    return rt_errorf(err, errlen, "model info: input '%s' dim %d disagrees with the token ids", t->name,
                d);
  out->syms[dim->sym] = value;
  return 0;
}

static int text_bind(const RtModelInfo *info, const char *tokens, const char *text,
                     const RtVocab *v, RtBound *out, char *err, size_t errlen) {
  if (!info || !out || !tokens == !text || (text && !v))
    return rt_errorf(err, errlen, "internal: rt_text_bind arguments");
  if (rt_model_info_check(info, err, errlen) || rt_model_refuse_state(info, err, errlen))
    return 1;
  int tok = find_tokens(info, err, errlen);
  if (tok < 0)
    return 1;
  const RtTensorInfo *t = &info->inputs[tok];
  const RtDim *len_dim = &t->dims[1];
  int64_t max_len = len_dim->sym < 0 ? len_dim->value : info->sym_max[len_dim->sym];
  int32_t *ids = malloc((size_t)(max_len > 0 ? max_len : 1) * sizeof *ids);
  if (!ids)
    return rt_errorf(err, errlen, "out of memory");
  out->inputs[tok] = ids;
  int64_t n = parse_ids(tokens, text, v, t->vocab, max_len, ids, err, errlen);
  if (n < 0)
    return 1;
  if (bind_dim(info, t, 0, 1, out, err, errlen) || bind_dim(info, t, 1, n, out, err, errlen))
    return 1;
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *m = &info->inputs[i];
    if (m->kind != RT_INPUT_MASK)
      continue;
    if (bind_dim(info, m, 0, 1, out, err, errlen) || bind_dim(info, m, 1, n, out, err, errlen))
      return 1;
    uint8_t *mask = malloc((size_t)n);
    if (!mask)
      return rt_errorf(err, errlen, "out of memory");
    out->inputs[i] = mask;
    int any = 0;
    for (int64_t k = 0; k < n; k++) {
      mask[k] = info->pad_id < 0 || ids[k] != info->pad_id;
      any |= mask[k];
    }
    if (!any)
      return rt_errorf(err, errlen, "the input sequence is all padding");
  }
  return rt_model_outputs_alloc(info, out, "input", err, errlen);
}

int rt_text_bind(const RtModelInfo *info, const char *tokens, const char *text, const RtVocab *v,
                 RtBound *out, char *err, size_t errlen) {
  if (!out)
    return rt_errorf(err, errlen, "internal: rt_text_bind without an output");
  memset(out, 0, sizeof *out);
  int rc = text_bind(info, tokens, text, v, out, err, errlen);
  if (rc)
    rt_model_unbind(info, out);
  return rc;
}

/* ---- the summary ---- */

static void print_shape(char *buf, size_t n, const RtTextTensor *t) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->rank && i < RT_MAX_RANK && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (k < n)
    snprintf(buf + k, n - k, "]");
}

/* s[0..n) in double quotes: UTF-8 as is, quotes, backslashes and control
 * characters escaped, bytes that are not UTF-8 as \xNN. */
static void print_quoted(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c >= 0x80 && k <= n - i && rt_utf8_valid(s + i, k, NULL)) {
      fwrite(s + i, 1, k, f);
      i += k;
      continue;
    }
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c < 0x20 || c >= 0x7F)
      fprintf(f, "\\x%02x", c);
    else
      fputc(c, f);
    i++;
  }
  fputc('"', f);
}

/* Each id decoded on its own; an id the tokenizer lacks as <ID>. */
static void print_decoded_row(FILE *f, const int32_t *ids, int64_t len, const RtTokenizer *t) {
  for (int64_t k = 0; k < len; k++) {
    char *s, err[128];
    size_t n;
    if (k)
      fputc(' ', f);
    if (rt_tokenizer_decode(t, ids + k, 1, &s, &n, err, sizeof err)) {
      fprintf(f, "<%d>", (int)ids[k]);
      continue;
    }
    print_quoted(f, s, n);
    free(s);
  }
}

static void print_ids_row(FILE *f, const int32_t *ids, int64_t len, const RtVocab *v) {
  if (v && v->tokenizer) {
    print_decoded_row(f, ids, len, v->tokenizer);
    return;
  }
  for (int64_t k = 0; k < len; k++) {
    const char *s = rt_text_vocab_symbol(v, ids[k]);
    if (s)
      fprintf(f, "%s%s", k ? " " : "", s);
    else
      fprintf(f, "%s%d", k ? " " : "", (int)ids[k]);
  }
}

static int64_t numel(const RtTextTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank && i < RT_MAX_RANK; i++)
    n *= t->dims[i];
  return n;
}

/* logits [B,L,V]: the argmax per position, under the input row */
static int print_argmax(FILE *f, const RtTextTensor *t, const char *sh, const RtTextTensor *ids,
                        const RtVocab *v) {
  const float *x = t->data;
  int64_t B = t->dims[0], L = t->dims[1], V = t->dims[2];
  fprintf(f, "%s %s, argmax per position:\n", t->name, sh);
  if (V < 1 || L < 1)
    return 0;
  int32_t *best = malloc((size_t)L * sizeof *best);
  if (!best)
    return 1;
  /* the input rows are shown when they line up with the positions */
  int show = ids && ids->data && ids->rank == 2 && ids->dims[0] >= B && ids->dims[1] == L;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t l = 0; l < L; l++) {
      const float *row = x + (b * L + l) * V;
      int64_t arg = 0;
      for (int64_t k = 1; k < V; k++)
        if (row[k] > row[arg])
          arg = k;
      best[l] = (int32_t)arg;
    }
    if (show) {
      const int32_t *row = (const int32_t *)ids->data + b * L;
      fprintf(f, "  input:  ");
      print_ids_row(f, row, L, v);
      fprintf(f, "\n");
      char *s, err[128];
      size_t n;
      if (v && v->tokenizer && !rt_tokenizer_decode(v->tokenizer, row, L, &s, &n, err, sizeof err)) {
        fprintf(f, "  text:   ");
        print_quoted(f, s, n);
        fprintf(f, "\n");
        free(s);
      }
    }
    fprintf(f, "  output: ");
    print_ids_row(f, best, L, v);
    fprintf(f, "\n");
  }
  free(best);
  return 0;
}

/* class_logits [B,C]: the argmax class and its softmax probability */
static void print_classes(FILE *f, const RtTextTensor *t, const char *sh) {
  const float *x = t->data;
  fprintf(f, "%s %s:\n", t->name, sh);
  if (t->dims[1] < 1)
    return;
  for (int64_t b = 0; b < t->dims[0]; b++) {
    const float *row = x + b * t->dims[1];
    double mx = row[0], sum = 0;
    int64_t arg = 0;
    for (int64_t k = 1; k < t->dims[1]; k++)
      if (row[k] > mx)
        mx = row[k], arg = k;
    for (int64_t k = 0; k < t->dims[1]; k++)
      sum += exp(row[k] - mx);
    fprintf(f, "  [%lld] class %lld (p = %.4f);", (long long)b, (long long)arg, 1.0 / sum);
    for (int64_t k = 0; k < t->dims[1] && k < 10; k++)
      fprintf(f, " %.4g", row[k]);
    fprintf(f, "\n");
  }
}

int rt_text_print_outputs(FILE *f, const RtTextTensor *outs, int n_out, const RtTextTensor *ids,
                          const RtVocab *v) {
  for (int i = 0; i < n_out; i++) {
    const RtTextTensor *t = &outs[i];
    const char *name = t->name ? t->name : "?";
    char sh[96];
    print_shape(sh, sizeof sh, t);
    const float *x = t->data;
    if ((strcmp(name, "logits") == 0 || strcmp(name, "log_probs") == 0) && t->rank == 3) {
      if (print_argmax(f, t, sh, ids, v))
        return 1;
    } else if (strcmp(name, "class_logits") == 0 && t->rank == 2) {
      print_classes(f, t, sh);
    } else {
      int64_t n = numel(t);
      double s = 0, s2 = 0;
      for (int64_t k = 0; k < n; k++)
        s += x[k], s2 += (double)x[k] * x[k];
      fprintf(f, "%s %s: mean %.6g, rms %.6g, first values", name, sh, s / (double)n,
              sqrt(s2 / (double)n));
      for (int64_t k = 0; k < n && k < 6; k++)
        fprintf(f, " %.6g", x[k]);
      fprintf(f, "\n");
    }
  }
  return 0;
}

int rt_text_print_bound(FILE *f, const RtModelInfo *info, const RtBound *b, const RtVocab *v) {
  RtTextTensor outs[RT_MAX_IO], ids;
  const RtTextTensor *idp = NULL;
  int n_out = info->n_outputs < 0 ? 0 : info->n_outputs > RT_MAX_IO ? RT_MAX_IO : info->n_outputs;
  for (int i = 0; i < n_out; i++) {
    const RtTensorInfo *t = &info->outputs[i];
    memset(&outs[i], 0, sizeof outs[i]);
    outs[i].name = t->name;
    outs[i].rank = t->rank < 0 ? 0 : t->rank > RT_MAX_RANK ? RT_MAX_RANK : t->rank;
    for (int d = 0; d < outs[i].rank; d++)
      outs[i].dims[d] = b->output_dims[i][d];
    outs[i].data = b->outputs[i];
  }
  for (int i = 0; i < info->n_inputs && i < RT_MAX_IO; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind != RT_INPUT_IDS || t->rank != 2 ||
        (strcmp(t->name, "tokens") != 0 && strcmp(t->name, "tgt") != 0))
      continue;
    memset(&ids, 0, sizeof ids);
    ids.name = t->name;
    ids.rank = 2;
    ids.dims[0] = rt_model_dim(&t->dims[0], b->syms);
    ids.dims[1] = rt_model_dim(&t->dims[1], b->syms);
    ids.data = b->inputs[i];
    idp = &ids;
  }
  return rt_text_print_outputs(f, outs, n_out, idp, v);
}
