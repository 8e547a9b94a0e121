/* frontend/hf_import.c — a Hugging Face config.json -> a .tfm spec (model
 * block + weights block naming the preset and the root the checkpoint's
 * tensors sit under), for the families the spec language can express:
 *
 *   model_type   architectures                     spec
 *   bert         BertForSequenceClassification     head classifier N pooler, root "bert."
 *                BertModel (or none given)         head pooler (hidden + pooled), root ""
 *                BertForMaskedLM, BertForPreTraining  head none, root "bert."
 *   distilbert   DistilBertModel (or none given)   head none, root ""
 *                DistilBertForMaskedLM             head none, root "distilbert."
 *   gpt2         GPT2LMHeadModel                   head logits tied, root "transformer."
 *                GPT2Model (or none given)         head none, root ""
 *
 * Everything else is refused with the reason (RoBERTa's positions, task
 * heads tfmc has no op for, config switches that change the maths).
 *
 * Invariants:
 *   - the config is read once with the strict pull reader (runtime/rt_json)
 *     into a flat table of top-level fields, each with the line:col of its
 *     value, so every complaint about a field points at it;
 *   - the fields HF always writes (the sizes) are required; the others take
 *     the defaults of HF's config classes (BertConfig, GPT2Config,
 *     DistilBertConfig, PretrainedConfig), since save_pretrained leaves out
 *     generic fields equal to their defaults;
 *   - every problem is reported (not just the first), then NULL;
 *   - the text returned parses and checks as a spec: it is run through
 *     spec_parse before it is handed out.
 */
#include "frontend/spec.h"
#include "runtime/rt_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the config as a table of top-level fields ---- */

typedef struct HfField {
  const char *key;
  RtJsonType type;
  IrLoc loc;          /* of the value */
  RtJsonNumber num;   /* RT_JSON_NUMBER (text points into the document) */
  const char *str;    /* RT_JSON_STRING */
  bool boolean;       /* RT_JSON_BOOL */
  const char **items; /* RT_JSON_ARRAY: its string elements; RT_JSON_OBJECT: its
                       * string values (id2label) */
  const char **item_keys; /* RT_JSON_OBJECT: the member names */
  int n_items;
  bool all_strings;   /* every element / member value is a string */
} HfField;

typedef struct HfConfig {
  Arena *a;
  Diags *d;
  const SrcFile *src;
  HfField *f;
  int n, cap;
  int errors;
  size_t scan_pos; /* loc_at's last offset and its location */
  IrLoc scan_loc;
  struct HfKey *by_key; /* the fields sorted by key, for lookups */
} HfConfig;

typedef struct HfKey {
  const char *key;
  int index; /* into HfConfig.f */
} HfKey;

static int key_cmp(const void *x, const void *y) {
  const HfKey *a = x, *b = y;
  int c = strcmp(a->key, b->key);
  return c ? c : (a->index > b->index) - (a->index < b->index);
}

static void hf_error(HfConfig *c, IrLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void hf_error(HfConfig *c, IrLoc loc, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(c->d, loc, "%s", msg);
  c->errors++;
}

/* line:col of a byte offset; offsets come in increasing order, so the scan
 * resumes where the last one stopped (a config with a million keys is
 * still read in one pass) */
static IrLoc loc_at(HfConfig *c, size_t pos) {
  if (pos < c->scan_pos) c->scan_pos = 0, c->scan_loc = (IrLoc){c->src->name, 1, 1};
  IrLoc l = c->scan_loc;
  size_t i = c->scan_pos;
  for (; i < pos && i < c->src->len; i++) {
    if (c->src->text[i] == '\n') {
      l.line++;
      l.col = 1;
    } else {
      l.col++;
    }
  }
  c->scan_pos = i;
  c->scan_loc = l;
  return l;
}

static IrLoc loc_file(const HfConfig *c) { return (IrLoc){c->src->name, 0, 0}; }

/* Printable, one-line, bounded: for echoing the config's strings in
 * messages and spec comments. */
static const char *clip(Arena *a, const char *s) {
  size_t n = strlen(s), max = 60;
  char *o = arena_alloc(a, (n < max ? n : max) + 4);
  size_t k = 0;
  for (size_t i = 0; i < n && i < max; i++)
    o[k++] = ((unsigned char)s[i] < 32 || s[i] == 127 || s[i] == '"' || s[i] == '\\') ? '?' : s[i];
  if (n > max) memcpy(o + k, "...", 3), k += 3;
  o[k] = 0;
  return o;
}

/* Reads an array or object value into f->items. */
static int read_container(HfConfig *c, RtJsonReader *r, HfField *f) {
  int cap = 0, kcap = 0, done;
  f->all_strings = true;
  if (f->type == RT_JSON_ARRAY ? rt_json_array_begin(r) : rt_json_object_begin(r)) return -1;
  for (;;) {
    const char *key = NULL;
    size_t klen;
    if (f->type == RT_JSON_ARRAY ? rt_json_array_next(r, &done)
                                 : rt_json_object_next(r, &key, &klen, &done))
      return -1;
    if (done) return 0;
    if (key) {
      arena_grow(c->a, (void **)&f->item_keys, &kcap, f->n_items + 1, sizeof(char *));
      f->item_keys[f->n_items] = arena_strdup(c->a, key);
    }
    RtJsonType t;
    if (rt_json_peek(r, &t)) return -1;
    const char *s = NULL;
    size_t len;
    if (t == RT_JSON_STRING) {
      if (rt_json_read_string(r, &s, &len)) return -1;
      s = arena_strdup(c->a, s);
    } else {
      f->all_strings = false;
      if (rt_json_skip_value(r)) return -1;
    }
    arena_grow(c->a, (void **)&f->items, &cap, f->n_items + 1, sizeof(char *));
    f->items[f->n_items++] = s;
  }
}

/* Fills c->f from the document; false after reporting. */
static bool config_read(HfConfig *c) {
  RtJsonReader r;
  rt_json_reader_init(&r, c->src->text, c->src->len);
  RtJsonType t;
  bool ok = false;
  if (rt_json_peek(&r, &t)) goto fail;
  if (t != RT_JSON_OBJECT) {
    hf_error(c, loc_at(c, r.pos), "a Hugging Face config.json holds a JSON object, not %s",
             rt_json_type_name(t));
    goto done;
  }
  if (rt_json_object_begin(&r)) goto fail;
  for (;;) {
    const char *key;
    size_t klen;
    int fin;
    if (rt_json_object_next(&r, &key, &klen, &fin)) goto fail;
    if (fin) break;
    key = arena_strndup(c->a, key, klen);
    if (rt_json_peek(&r, &t)) goto fail;
    IrLoc loc = loc_at(c, r.pos);
    arena_grow(c->a, (void **)&c->f, &c->cap, c->n + 1, sizeof *c->f);
    HfField *f = &c->f[c->n++];
    memset(f, 0, sizeof *f);
    f->key = key;
    f->type = t;
    f->loc = loc;
    const char *s;
    size_t len;
    switch (t) {
    case RT_JSON_NUMBER:
      if (rt_json_read_number(&r, &f->num)) goto fail;
      break;
    case RT_JSON_STRING:
      if (rt_json_read_string(&r, &s, &len)) goto fail;
      f->str = arena_strndup(c->a, s, len);
      break;
    case RT_JSON_BOOL:
      f->boolean = r.text[r.pos] == 't';
      if (rt_json_skip_value(&r)) goto fail;
      break;
    case RT_JSON_NULL:
      if (rt_json_skip_value(&r)) goto fail;
      break;
    case RT_JSON_ARRAY:
    case RT_JSON_OBJECT:
      if (read_container(c, &r, f)) goto fail;
      break;
    case RT_JSON_TYPE_COUNT:
      TFMC_ASSERT(!"bad JSON type");
    }
  }
  if (rt_json_finish(&r)) goto fail;
  /* sorted by key (then by position): lookups are binary searches, and a
   * key given twice is an error (Python would silently keep the last) */
  c->by_key = arena_alloc(c->a, sizeof(HfKey) * (size_t)(c->n + 1));
  for (int i = 0; i < c->n; i++) c->by_key[i] = (HfKey){c->f[i].key, i};
  qsort(c->by_key, (size_t)c->n, sizeof(HfKey), key_cmp);
  for (int i = 1; i < c->n; i++)
    if (strcmp(c->by_key[i].key, c->by_key[i - 1].key) == 0) {
      int first = i - 1;
      while (first > 0 && strcmp(c->by_key[first - 1].key, c->by_key[i].key) == 0) first--;
      hf_error(c, c->f[c->by_key[i].index].loc, "duplicate key \"%s\"", clip(c->a, c->by_key[i].key));
      diag_note(c->d, c->f[c->by_key[first].index].loc, "first given here");
    }
  ok = true; /* duplicates stop nothing: the other checks still run */
  goto done;
fail:
  hf_error(c, loc_at(c, r.err_pos), "invalid JSON: %s", r.msg);
done:
  rt_json_reader_free(&r);
  return ok;
}

/* The field of that key (the last one, were there two), or NULL. */
static HfField *field(HfConfig *c, const char *key) {
  int lo = 0, hi = c->n; /* first entry with key > `key` */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (strcmp(c->by_key[mid].key, key) <= 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || strcmp(c->by_key[lo - 1].key, key) != 0) return NULL;
  return &c->f[c->by_key[lo - 1].index];
}

/* ---- typed getters: each reports its own problems ---- */

#define REQUIRED INT64_MIN

/* An integer >= min. `dflt` when absent (REQUIRED: absence is an error,
 * naming `what`); with null_ok, null gives -1 (an id that is not set). */
static int64_t get_int(HfConfig *c, const char *key, int64_t dflt, int64_t min, bool null_ok,
                       const char *what) {
  HfField *f = field(c, key);
  if (!f) {
    if (dflt == REQUIRED)
      hf_error(c, loc_file(c), "missing \"%s\" (%s), which the config must give", key, what);
    return dflt == REQUIRED ? 1 : dflt;
  }
  if (f->type == RT_JSON_NULL && null_ok) return -1;
  if (f->type != RT_JSON_NUMBER || !f->num.integral) {
    hf_error(c, f->loc, "\"%s\" (%s) must be an integer%s, not %s", key, what,
             null_ok ? " or null" : "",
             f->type == RT_JSON_NUMBER ? "a number with a fraction or exponent"
                                       : rt_json_type_name(f->type));
    return 1;
  }
  if (!f->num.exact || f->num.magnitude > (uint64_t)1 << 40) {
    hf_error(c, f->loc, "\"%s\" (%s) is out of range: %.*s", key, what, (int)f->num.len,
             f->num.text);
    return 1;
  }
  int64_t v = f->num.negative ? -(int64_t)f->num.magnitude : (int64_t)f->num.magnitude;
  if (v < min) {
    hf_error(c, f->loc, "\"%s\" (%s) must be at least %lld, not %lld", key, what,
             (long long)min, (long long)v);
    return 1;
  }
  return v;
}

/* A finite number > 0. */
static double get_positive(HfConfig *c, const char *key, double dflt, const char *what) {
  HfField *f = field(c, key);
  if (!f) return dflt;
  if (f->type != RT_JSON_NUMBER) {
    hf_error(c, f->loc, "\"%s\" (%s) must be a number, not %s", key, what,
             rt_json_type_name(f->type));
    return dflt;
  }
  char buf[64];
  size_t n = f->num.len < sizeof buf - 1 ? f->num.len : sizeof buf - 1;
  memcpy(buf, f->num.text, n);
  buf[n] = 0;
  double v = strtod(buf, NULL);
  if (!(v > 0) || !isfinite(v)) {
    hf_error(c, f->loc, "\"%s\" (%s) must be a positive number, not %s", key, what, buf);
    return dflt;
  }
  return v;
}

static const char *get_str(HfConfig *c, const char *key, const char *dflt, const char *what) {
  HfField *f = field(c, key);
  if (!f) return dflt;
  if (f->type != RT_JSON_STRING) {
    hf_error(c, f->loc, "\"%s\" (%s) must be a string, not %s", key, what,
             rt_json_type_name(f->type));
    return dflt;
  }
  return f->str;
}

static bool get_bool(HfConfig *c, const char *key, bool dflt, const char *what) {
  HfField *f = field(c, key);
  if (!f) return dflt;
  if (f->type != RT_JSON_BOOL) {
    hf_error(c, f->loc, "\"%s\" (%s) must be true or false, not %s", key, what,
             rt_json_type_name(f->type));
    return dflt;
  }
  return f->boolean;
}

/* A switch whose non-default value changes the maths in a way the spec
 * cannot say: refused at the field. */
static void refuse_bool(HfConfig *c, const char *key, bool dflt, const char *why) {
  bool v = get_bool(c, key, dflt, "a switch");
  if (v != dflt)
    hf_error(c, field(c, key)->loc, "\"%s\": %s is not supported: %s", key,
             v ? "true" : "false", why);
}

/* The location of a field, or the file. */
static IrLoc loc_of(HfConfig *c, const char *key) {
  HfField *f = field(c, key);
  return f ? f->loc : loc_file(c);
}

/* ---- what the importer decides, then prints ---- */

typedef struct HfModel {
  const char *family;       /* "BERT" */
  const char *model_type;   /* "bert" */
  const char *arch_name;    /* the architecture read ("BertModel") */
  bool arch_given;
  const char *preset, *root;
  int64_t vocab, d_model, heads, layers, d_ff, max_pos, token_types, n_classes;
  const char *act;          /* spec ffn activation */
  const char *act_hf;       /* as the config says */
  const char *act_key;
  const char *norm;         /* "pre" | "post" */
  double eps, embed_eps;    /* embed_eps 0: no embed_norm */
  bool final_norm, decoder, tied, pooler;
  int64_t pad, bos, eos;
  const char *head_line;    /* the head entry's values */
  const char *head_note;    /* a comment line or NULL */
  const char *ignores[4];   /* ignore lines of the weights block */
  bool ignore_under_root[4]; /* the pattern is in the base model: printed after the root */
  const char *ignore_why[4];
  int n_ignores;
  const char *probe;        /* the base model's word embedding, without the root */
  const char *root_note;    /* why the root is what it is, when not from architectures */
} HfModel;

/* Shortest text that reads back as the same double. */
static const char *num_str(Arena *a, double v) {
  char buf[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, v);
    if (strtod(buf, NULL) == v) break;
  }
  char *e = strstr(buf, "e-0"); /* 1e-05 -> 1e-5 */
  if (e) memmove(e + 2, e + 3, strlen(e + 3) + 1);
  return arena_strdup(a, buf);
}

/* The architecture named first in "architectures", or NULL when absent. */
static const char *architecture(HfConfig *c) {
  HfField *f = field(c, "architectures");
  if (!f || f->type == RT_JSON_NULL) return NULL;
  if (f->type != RT_JSON_ARRAY || !f->all_strings || f->n_items == 0) {
    hf_error(c, f->loc, "\"architectures\" must be a non-empty list of class names (strings)%s",
             f->type == RT_JSON_ARRAY ? "" : arena_printf(c->a, ", not %s",
                                                          rt_json_type_name(f->type)));
    return NULL;
  }
  for (int i = 1; i < f->n_items; i++)
    if (strcmp(f->items[i], f->items[0]) != 0) {
      hf_error(c, f->loc, "\"architectures\" names %d classes (%s, %s, ...); give the one the "
               "checkpoint was saved from", f->n_items, clip(c->a, f->items[0]),
               clip(c->a, f->items[i]));
      return NULL;
    }
  return f->items[0];
}

/* The activation of the feed-forward layer: HF's ACT2FN names -> ffn. */
static const char *activation(HfConfig *c, HfModel *m, const char *key, const char *dflt) {
  const char *s = get_str(c, key, dflt, "the feed-forward activation");
  m->act_hf = s;
  m->act_key = key;
  if (strcmp(s, "gelu") == 0) return "gelu";
  if (strcmp(s, "gelu_new") == 0 || strcmp(s, "gelu_pytorch_tanh") == 0) return "gelu_tanh";
  if (strcmp(s, "relu") == 0) return "relu";
  hf_error(c, loc_of(c, key), "\"%s\": activation \"%s\" is not supported (supported: gelu, "
           "gelu_new, gelu_pytorch_tanh, relu)", key, clip(c->a, s));
  return "gelu";
}

/* num_labels as PretrainedConfig derives it: len(id2label), else
 * num_labels, else 2. */
static int64_t labels(HfConfig *c, HfField **id2label) {
  HfField *f = field(c, "id2label");
  *id2label = NULL;
  int64_t n = get_int(c, "num_labels", 2, 1, false, "the number of classes");
  if (!f) return n;
  if (f->type != RT_JSON_OBJECT || !f->all_strings || f->n_items == 0) {
    hf_error(c, f->loc, "\"id2label\" must be a non-empty object of class names (\"0\": "
             "\"NEGATIVE\", ...)%s", f->type == RT_JSON_OBJECT ? "" :
             arena_printf(c->a, ", not %s", rt_json_type_name(f->type)));
    return n;
  }
  if (field(c, "num_labels") && n != f->n_items)
    hf_error(c, loc_of(c, "num_labels"), "\"num_labels\" is %lld but \"id2label\" names %d "
             "classes", (long long)n, f->n_items);
  *id2label = f;
  return f->n_items;
}

static void add_ignore(HfModel *m, const char *pattern, bool under_root, const char *why) {
  TFMC_ASSERT(m->n_ignores < 4);
  m->ignore_why[m->n_ignores] = why;
  m->ignore_under_root[m->n_ignores] = under_root;
  m->ignores[m->n_ignores++] = pattern;
}

/* An architecture outside the table: refused, with what is supported. */
static void refuse_arch(HfConfig *c, const HfModel *m, const char *why, const char *supported) {
  hf_error(c, loc_of(c, "architectures"), "architecture \"%s\" is not supported%s%s "
           "(supported for model_type \"%s\": %s)", clip(c->a, m->arch_name), why ? ": " : "",
           why ? why : "", m->model_type, supported);
}

static void import_bert(HfConfig *c, HfModel *m, HfField **id2label) {
  m->family = "BERT";
  m->vocab = get_int(c, "vocab_size", REQUIRED, 1, false, "the vocabulary size");
  m->d_model = get_int(c, "hidden_size", REQUIRED, 1, false, "d_model");
  m->layers = get_int(c, "num_hidden_layers", REQUIRED, 1, false, "the number of layers");
  m->heads = get_int(c, "num_attention_heads", REQUIRED, 1, false, "the number of heads");
  m->d_ff = get_int(c, "intermediate_size", REQUIRED, 1, false, "the feed-forward size");
  m->max_pos = get_int(c, "max_position_embeddings", REQUIRED, 1, false,
                       "the position table size");
  m->token_types = get_int(c, "type_vocab_size", 2, 0, false, "the number of token types");
  m->act = activation(c, m, "hidden_act", "gelu");
  m->eps = get_positive(c, "layer_norm_eps", 1e-12, "the LayerNorm epsilon");
  m->embed_eps = m->eps;
  m->pad = get_int(c, "pad_token_id", 0, 0, true, "the padding token id");
  m->bos = m->eos = -1;
  m->norm = "post";
  const char *pe = get_str(c, "position_embedding_type", "absolute", "the position encoding");
  if (strcmp(pe, "absolute") != 0)
    hf_error(c, loc_of(c, "position_embedding_type"), "\"position_embedding_type\": \"%s\" is "
             "not supported: tfmc's learned positions are absolute (a table row per position); "
             "relative_key attention scores are not expressible", clip(c->a, pe));
  refuse_bool(c, "is_decoder", false, "a causal BERT is not an encoder; tfmc's BERT is the "
              "bidirectional encoder");
  refuse_bool(c, "add_cross_attention", false, "BERT with cross-attention is an "
              "encoder-decoder half the spec cannot describe");
  m->preset = "hf-bert";
  m->probe = "embeddings.word_embeddings.weight";
  const char *supported = "BertModel, BertForSequenceClassification, BertForMaskedLM, "
                          "BertForPreTraining";
  const char *a = m->arch_name;
  if (strcmp(a, "BertModel") == 0) {
    m->root = "";
    m->head_line = "pooler";
    m->head_note = "BertModel: the outputs are last_hidden_state (\"hidden\") and "
                   "pooler_output (\"pooled\", tanh(pooler(x[:,0])))";
  } else if (strcmp(a, "BertForSequenceClassification") == 0) {
    m->root = "bert.";
    m->n_classes = labels(c, id2label);
    m->head_line = arena_printf(c->a, "classifier %lld pooler", (long long)m->n_classes);
  } else if (strcmp(a, "BertForMaskedLM") == 0 || strcmp(a, "BertForPreTraining") == 0) {
    m->root = "bert.";
    m->head_line = "none";
    m->head_note = arena_printf(c->a, "%s: the output is the encoder's last_hidden_state "
                                "(\"hidden\"); the pre-training heads (cls.*: dense, gelu, "
                                "LayerNorm, tied decoder) are not imported", a);
    add_ignore(m, "pooler.dense.*", true, "the pooler: only a classifier head uses it");
    add_ignore(m, "cls.*", false, "the pre-training heads");
  } else if (strcmp(a, "BertForTokenClassification") == 0) {
    refuse_arch(c, m, "its classifier runs on every position; tfmc's classifier head reads "
                "position 0", supported);
  } else {
    refuse_arch(c, m, NULL, supported);
  }
}

static void import_distilbert(HfConfig *c, HfModel *m) {
  m->family = "DistilBERT";
  m->vocab = get_int(c, "vocab_size", REQUIRED, 1, false, "the vocabulary size");
  m->d_model = get_int(c, "dim", REQUIRED, 1, false, "d_model");
  m->layers = get_int(c, "n_layers", REQUIRED, 1, false, "the number of layers");
  m->heads = get_int(c, "n_heads", REQUIRED, 1, false, "the number of heads");
  m->d_ff = get_int(c, "hidden_dim", REQUIRED, 1, false, "the feed-forward size");
  m->max_pos = get_int(c, "max_position_embeddings", REQUIRED, 1, false,
                       "the position table size");
  m->act = activation(c, m, "activation", "gelu");
  /* sinusoidal_pos_embds only changes how the table is initialised: it is
   * stored in the checkpoint either way, so `position learned` reads it */
  (void)get_bool(c, "sinusoidal_pos_embds", false, "sinusoidal position table");
  m->eps = m->embed_eps = 1e-12; /* DistilBERT's nn.LayerNorm(dim, eps=1e-12) */
  m->pad = get_int(c, "pad_token_id", 0, 0, true, "the padding token id");
  m->bos = m->eos = -1;
  m->norm = "post";
  m->preset = "hf-distilbert";
  m->probe = "embeddings.word_embeddings.weight";
  const char *supported = "DistilBertModel, DistilBertForMaskedLM";
  const char *a = m->arch_name;
  if (strcmp(a, "DistilBertModel") == 0) {
    m->root = "";
    m->head_line = "none";
    m->head_note = "DistilBertModel: the output is last_hidden_state (\"hidden\")";
  } else if (strcmp(a, "DistilBertForMaskedLM") == 0) {
    m->root = "distilbert.";
    m->head_line = "none";
    m->head_note = "DistilBertForMaskedLM: the output is the encoder's last_hidden_state "
                   "(\"hidden\"); the MLM head (vocab_transform, gelu, vocab_layer_norm, "
                   "vocab_projector) is not imported";
    add_ignore(m, "vocab_*", false, "the MLM head");
  } else if (strcmp(a, "DistilBertForSequenceClassification") == 0) {
    refuse_arch(c, m, "its head is classifier(relu(pre_classifier(x[:,0]))) and tfmc's "
                "pooler is tanh (BERT's), so the head is not expressible", supported);
  } else {
    refuse_arch(c, m, NULL, supported);
  }
}

static void import_gpt2(HfConfig *c, HfModel *m) {
  m->family = "GPT-2";
  m->decoder = true;
  m->vocab = get_int(c, "vocab_size", REQUIRED, 1, false, "the vocabulary size");
  m->d_model = get_int(c, "n_embd", REQUIRED, 1, false, "d_model");
  m->layers = get_int(c, "n_layer", REQUIRED, 1, false, "the number of layers");
  m->heads = get_int(c, "n_head", REQUIRED, 1, false, "the number of heads");
  m->max_pos = get_int(c, "n_positions", REQUIRED, 1, false, "the position table size");
  m->d_ff = get_int(c, "n_inner", -1, 1, true, "the feed-forward size");
  if (m->d_ff < 0) m->d_ff = 4 * m->d_model; /* GPT2MLP: n_inner or 4 * n_embd */
  m->act = activation(c, m, "activation_function", "gelu_new");
  m->eps = get_positive(c, "layer_norm_epsilon", 1e-5, "the LayerNorm epsilon");
  m->pad = get_int(c, "pad_token_id", -1, 0, true, "the padding token id");
  m->bos = get_int(c, "bos_token_id", 50256, 0, true, "the beginning-of-text id");
  m->eos = get_int(c, "eos_token_id", 50256, 0, true, "the end-of-text id");
  m->norm = "pre";
  m->final_norm = true;
  m->tied = get_bool(c, "tie_word_embeddings", true, "whether lm_head is wte");
  refuse_bool(c, "scale_attn_weights", true, "attention without the 1/sqrt(head size) scale "
              "is not expressible");
  refuse_bool(c, "scale_attn_by_inverse_layer_idx", false, "scores scaled by 1/(layer+1) "
              "are not expressible");
  refuse_bool(c, "add_cross_attention", false, "GPT-2 with cross-attention is a decoder "
              "half the spec cannot describe");
  m->preset = "hf-gpt2";
  m->probe = "wte.weight";
  const char *supported = "GPT2Model, GPT2LMHeadModel";
  const char *a = m->arch_name;
  if (strcmp(a, "GPT2Model") == 0) {
    m->root = "";
    m->head_line = "none";
    m->head_note = "GPT2Model: the output is last_hidden_state after ln_f (\"hidden\")";
  } else if (strcmp(a, "GPT2LMHeadModel") == 0) {
    m->root = "transformer.";
    m->head_line = m->tied ? "logits tied" : "logits no_bias";
    if (!m->tied) m->head_note = "tie_word_embeddings false: lm_head.weight is its own matrix";
  } else if (strcmp(a, "GPT2ForSequenceClassification") == 0) {
    refuse_arch(c, m, "its score head reads the last non-padding token; tfmc's classifier "
                "reads position 0 of an encoder", supported);
  } else {
    refuse_arch(c, m, NULL, supported);
  }
}

/* Checks across fields, at the field that breaks them. */
static void check_model(HfConfig *c, const HfModel *m, const char *heads_key,
                        const char *d_key) {
  if (m->d_model % m->heads != 0)
    hf_error(c, loc_of(c, heads_key), "\"%s\" %lld does not divide \"%s\" %lld", heads_key,
             (long long)m->heads, d_key, (long long)m->d_model);
  const char *keys[] = {"pad_token_id", "bos_token_id", "eos_token_id"};
  int64_t ids[] = {m->pad, m->bos, m->eos};
  for (int i = 0; i < 3; i++)
    if (ids[i] >= m->vocab)
      hf_error(c, loc_of(c, keys[i]), "\"%s\" %lld is not below \"vocab_size\" %lld%s", keys[i],
               (long long)ids[i], (long long)m->vocab,
               field(c, keys[i]) ? "" : " (the config does not give it; that is HF's default)");
}

/* The root is the prefix of the checkpoint's word embedding: the one
 * tensor every model of the family has, under its base model. */
static void root_from_checkpoint(HfConfig *c, HfModel *m, const HfImportOptions *opt) {
  const char *w = opt->weights_path ? opt->weights_path : "the checkpoint";
  size_t np = strlen(m->probe);
  for (int i = 0; i < opt->n_tensor_names; i++) {
    const char *t = opt->tensor_names[i];
    size_t n = strlen(t);
    if (n < np || strcmp(t + n - np, m->probe) != 0 || (n > np && t[n - np - 1] != '.')) continue;
    const char *root = arena_strndup(c->a, t, n - np);
    m->root_note = arena_printf(c->a, "The root is the prefix of the word embedding in %s: it "
                                "holds \"%s\"%s.", w, clip(c->a, t),
                                strcmp(root, m->root) == 0 ? "" : arena_printf(c->a,
                                " (%s would save it under \"%s\")", clip(c->a, m->arch_name),
                                m->root));
    m->root = root;
    if (strchr(root, '"') || strchr(root, '{') || strchr(root, '}') || strchr(root, '\\'))
      hf_error(c, (IrLoc){w, 0, 0}, "the tensor \"%s\" has a prefix a spec cannot quote",
               clip(c->a, t));
    return;
  }
  hf_error(c, (IrLoc){w, 0, 0}, "no tensor named \"%s\" (under any prefix): not a checkpoint "
           "of the %s model this config describes", m->probe, m->family);
}

/* ---- the spec text ---- */

typedef struct Buf {
  Arena *a;
  char *p;
  int len, cap;
} Buf;

static void put(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  arena_grow(b->a, (void **)&b->p, &b->cap, b->len + n + 1, 1);
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += n;
}

/* A comment wrapped at ~76 columns, each line starting with `lead`. */
static void put_comment(Buf *b, const char *lead, const char *text) {
  const char *p = text;
  while (*p) {
    int room = 76 - (int)strlen(lead), n = (int)strlen(p);
    if (n > room) {
      n = room;
      while (n > 0 && p[n] != ' ') n--;
      if (n == 0) n = room;
    }
    put(b, "%s%.*s\n", lead, n, p);
    p += n;
    while (*p == ' ') p++;
  }
}

static const char *spec_text(HfConfig *c, const HfModel *m, const HfField *id2label,
                             const char *name, int64_t max_batch) {
  Arena *a = c->a;
  Buf b = {a, NULL, 0, 0};
  put(&b, "# Imported by `tfmc import-hf` from a Hugging Face config.json:\n");
  put(&b, "# %s, model_type \"%s\"%s.\n", clip(a, m->arch_name), m->model_type,
      m->arch_given ? "" : " (no \"architectures\" given: the base model)");
  put(&b, "model %s {\n", name);
  put(&b, "  arch        %s\n", m->decoder ? "decoder" : "encoder");
  put(&b, "  vocab       %lld\n", (long long)m->vocab);
  put(&b, "  d_model     %lld\n", (long long)m->d_model);
  put(&b, "  heads       %lld\n", (long long)m->heads);
  put(&b, "  layers      %lld\n", (long long)m->layers);
  put(&b, "  ffn         %lld %s", (long long)m->d_ff, m->act);
  if (strcmp(m->act, m->act_hf) != 0) put(&b, "%*s# %s \"%s\"", 3, "", m->act_key, m->act_hf);
  put(&b, "\n");
  put(&b, "  norm        %s eps %s\n", m->norm, num_str(a, m->eps));
  if (m->final_norm) put(&b, "  final_norm  yes\n");
  put(&b, "  position    learned max %lld\n", (long long)m->max_pos);
  if (m->embed_eps > 0) put(&b, "  embed_norm  eps %s\n", num_str(a, m->embed_eps));
  if (m->token_types > 0) put(&b, "  token_types %lld\n", (long long)m->token_types);
  if (m->pad >= 0 || m->bos >= 0 || m->eos >= 0) {
    put(&b, "  tokens     ");
    if (m->pad >= 0) put(&b, " pad %lld", (long long)m->pad);
    if (m->bos >= 0) put(&b, " bos %lld", (long long)m->bos);
    if (m->eos >= 0) put(&b, " eos %lld", (long long)m->eos);
    put(&b, "\n");
  }
  put(&b, "  mask        %s\n", m->decoder ? "decoder causal padding" : "encoder padding");
  if (m->head_note) put_comment(&b, "  # ", m->head_note);
  if (id2label) {
    put(&b, "  # class_logits[i] is id2label[i]:");
    for (int i = 0; i < id2label->n_items; i++)
      put(&b, "%s %s \"%s\"", i ? "," : "", clip(a, id2label->item_keys[i]),
          clip(a, id2label->items[i]));
    put(&b, "\n");
  }
  put(&b, "  head        %s\n", m->head_line);
  if (max_batch > 0) put(&b, "  max_batch   %lld\n", (long long)max_batch);
  put(&b, "}\n\n");
  if (m->root_note)
    put_comment(&b, "# ", m->root_note);
  else if (m->root[0])
    put_comment(&b, "# ", arena_printf(a, "%s saves the base model under \"%s\" (a checkpoint "
                "saved from the base model alone has no prefix: root \"\").",
                clip(a, m->arch_name), m->root));
  else
    put_comment(&b, "# ", arena_printf(a, "%s saves its tensors without a prefix (a checkpoint "
                "saved from a model with a task head has one: root \"%s\").",
                clip(a, m->arch_name), spec_preset_base(m->preset)));
  put(&b, "weights %s {\n", name);
  put(&b, "  preset \"%s\" root \"%s\"\n", m->preset, m->root);
  for (int i = 0; i < m->n_ignores; i++) {
    const char *p = m->ignore_under_root[i] ? arena_printf(a, "%s%s", m->root, m->ignores[i])
                                            : m->ignores[i];
    int pad = 24 - (int)strlen(p);
    put(&b, "  ignore \"%s\"%*s# %s\n", p, pad > 1 ? pad : 1, "", m->ignore_why[i]);
  }
  put(&b, "}\n");
  return b.p;
}

static bool ident_ok(const char *s) {
  if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

const char *spec_import_hf(Arena *a, const SrcFile *config, const HfImportOptions *opt,
                           Diags *d) {
  diags_add_source(d, config);
  HfConfig c = {.a = a, .d = d, .src = config, .scan_loc = {config->name, 1, 1}};
  if (!config_read(&c)) return NULL;
  HfModel m = {0};
  HfField *id2label = NULL;
  const char *supported = "bert, distilbert, gpt2";
  HfField *mt = field(&c, "model_type");
  if (!mt) {
    hf_error(&c, loc_file(&c), "missing \"model_type\": cannot tell which family the config "
             "describes (supported: %s)", supported);
    return NULL;
  }
  if (mt->type != RT_JSON_STRING) {
    hf_error(&c, mt->loc, "\"model_type\" must be a string, not %s", rt_json_type_name(mt->type));
    return NULL;
  }
  m.model_type = mt->str;
  m.arch_name = architecture(&c);
  m.arch_given = m.arch_name != NULL;
  const char *heads_key = "num_attention_heads", *d_key = "hidden_size";
  if (strcmp(mt->str, "bert") == 0) {
    if (!m.arch_name) m.arch_name = "BertModel";
    import_bert(&c, &m, &id2label);
  } else if (strcmp(mt->str, "distilbert") == 0) {
    if (!m.arch_name) m.arch_name = "DistilBertModel";
    import_distilbert(&c, &m);
    heads_key = "n_heads", d_key = "dim";
  } else if (strcmp(mt->str, "gpt2") == 0) {
    if (!m.arch_name) m.arch_name = "GPT2Model";
    import_gpt2(&c, &m);
    heads_key = "n_head", d_key = "n_embd";
  } else if (strcmp(mt->str, "roberta") == 0 || strcmp(mt->str, "xlm-roberta") == 0 ||
             strcmp(mt->str, "camembert") == 0) {
    hf_error(&c, mt->loc, "model_type \"%s\" is not supported: RoBERTa's position ids "
             "start at pad_token_id + 1 and skip padding (create_position_ids_from_input_ids), "
             "while tfmc's learned positions are table rows 0..len-1 for every token, so "
             "every position would read the wrong row (supported: %s)", mt->str, supported);
    return NULL;
  } else {
    hf_error(&c, mt->loc, "model_type \"%s\" is not supported (supported: %s)",
             clip(a, mt->str), supported);
    return NULL;
  }
  if (c.errors) return NULL;
  if (opt && opt->tensor_names) root_from_checkpoint(&c, &m, opt);
  check_model(&c, &m, heads_key, d_key);
  const char *name = opt && opt->name ? opt->name : NULL;
  if (!name) {
    /* the model_type, as an identifier ("xlm-roberta" would not be one) */
    char *n = arena_strdup(a, m.model_type);
    for (char *p = n; *p; p++)
      if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9')))
        *p = '_';
    name = ident_ok(n) ? n : "model";
  }
  if (!ident_ok(name)) {
    hf_error(&c, (IrLoc){0}, "the model name \"%s\" is not an identifier (letters, digits, _)",
             clip(a, name));
  }
  if (c.errors) return NULL;
  const char *text = spec_text(&c, &m, id2label, name, opt ? opt->max_batch : 0);
  /* the importer's promise: what it prints checks as a spec */
  const char *sname = arena_printf(a, "<spec imported from %s>", config->name);
  SrcFile *sf = src_file_from_string(a, sname, text);
  int before = d->n_errors;
  if (!spec_parse(a, sf, d) || d->n_errors != before) {
    diag_note(d, (IrLoc){0}, "the spec imported from %s does not check; these are the "
              "values the config gives", config->name);
    return NULL;
  }
  return text;
}
