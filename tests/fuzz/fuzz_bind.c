/* tests/fuzz/fuzz_bind.c — fuzz harness for the runtime's input binders:
 * rt_model_bind (a safetensors file of inputs) and rt_text_bind (--tokens
 * ids and --text symbols), against two fixed models: a token model (tokens
 * i32 [B,S] with a padding mask derived from pad id 0 or a lengths tensor)
 * and an encoder-decoder (src/tgt with their masks).
 *
 * The first byte chooses the model and the binder; the rest is the file
 * (rt_st_parse) or the text (NUL-free prefix). Invariants (a violation
 * aborts, which the replay driver and libFuzzer report as a crash):
 *   - a refusal leaves a non-empty message;
 *   - an acceptance binds every symbol to 1..max, gives every input and
 *     output a buffer, every id in [0, vocab), every mask byte 0 or 1, and
 *     for a mask derived from pad ids exactly (id != pad); rt_model_unbind
 *     frees it all (the sanitizer build sees leaks and double frees). */
#include "runtime/rt_model.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_bind: invariant broken: %s\n", what);
    abort();
  }
}

enum { SYM_B, SYM_S, SYM_T };

static const RtTensorInfo tok_inputs[] = {
    {"tokens", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 20, NULL, NULL},
    {"mask", RT_ELEM_U8, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_MASK, 0, "tokens", "lengths"},
};
static const RtTensorInfo tok_outputs[] = {
    {"logits", RT_ELEM_F32, 3, {{SYM_B, 0}, {SYM_S, 0}, {-1, 20}}, RT_INPUT_IDS, 0, NULL, NULL},
};
static const RtModelInfo tok_model = {
    .abi_version = RT_ABI_VERSION,
    .name = "fuzz_tokens",
    .n_syms = 2,
    .sym_names = {"B", "S"},
    .sym_max = {3, 8},
    .n_inputs = 2,
    .inputs = tok_inputs,
    .n_outputs = 1,
    .outputs = tok_outputs,
    .pad_id = 0,
};

static const RtTensorInfo s2s_inputs[] = {
    {"src", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 11, NULL, NULL},
    {"tgt", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_T, 0}}, RT_INPUT_IDS, 13, NULL, NULL},
    {"src_mask", RT_ELEM_U8, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_MASK, 0, "src", "src_lengths"},
    {"tgt_mask", RT_ELEM_U8, 2, {{SYM_B, 0}, {SYM_T, 0}}, RT_INPUT_MASK, 0, "tgt", "tgt_lengths"},
};
static const RtTensorInfo s2s_outputs[] = {
    {"log_probs", RT_ELEM_F32, 3, {{SYM_B, 0}, {SYM_T, 0}, {-1, 13}}, RT_INPUT_IDS, 0, NULL, NULL},
};
static const RtModelInfo s2s_model = {
    .abi_version = RT_ABI_VERSION,
    .name = "fuzz_seq2seq",
    .n_syms = 3,
    .sym_names = {"B", "S", "T"},
    .sym_max = {2, 6, 5},
    .n_inputs = 4,
    .inputs = s2s_inputs,
    .n_outputs = 1,
    .outputs = s2s_outputs,
    .pad_id = 1,
};

static int64_t dim_of(const RtBound *b, RtDim d) { return d.sym >= 0 ? b->syms[d.sym] : d.value; }

static int64_t numel(const RtBound *b, const RtTensorInfo *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= dim_of(b, t->dims[i]);
  return n;
}

static const RtTensorInfo *find_input(const RtModelInfo *m, const char *name) {
  for (int i = 0; i < m->n_inputs; i++)
    if (strcmp(m->inputs[i].name, name) == 0) return &m->inputs[i];
  return NULL;
}

static void check_bound(const RtModelInfo *m, RtBound *b, int mask_from_pads) {
  for (int s = 0; s < m->n_syms; s++)
    check(b->syms[s] >= 1 && b->syms[s] <= m->sym_max[s], "symbol within 1..max");
  for (int i = 0; i < m->n_inputs; i++) {
    const RtTensorInfo *t = &m->inputs[i];
    int64_t n = numel(b, t);
    check(b->inputs[i] != NULL, "every input bound");
    if (t->kind == RT_INPUT_IDS) {
      const int32_t *ids = b->inputs[i];
      for (int64_t k = 0; k < n; k++) check(ids[k] >= 0 && ids[k] < t->vocab, "ids in range");
    } else {
      const uint8_t *mask = b->inputs[i];
      int ids_at = -1;
      for (int j = 0; j < m->n_inputs; j++)
        if (strcmp(m->inputs[j].name, t->ids_input) == 0) ids_at = j;
      check(ids_at >= 0 && find_input(m, t->ids_input) != NULL, "mask has its ids");
      const int32_t *ids = b->inputs[ids_at];
      for (int64_t k = 0; k < n; k++) {
        check(mask[k] <= 1, "mask bytes are 0 or 1");
        if (mask_from_pads) check(mask[k] == (ids[k] != m->pad_id), "pad mask = (id != pad)");
      }
    }
  }
  for (int o = 0; o < m->n_outputs; o++) {
    check(b->outputs[o] != NULL, "every output allocated");
    /* writable to its full bound size */
    int64_t n = numel(b, &m->outputs[o]);
    b->outputs[o][0] = 1.0f;
    b->outputs[o][n - 1] = 2.0f;
  }
}

static const char *const symbols[] = {"<pad>", "a", "b", "c", "d", "e", "f", "g", "h", "i",
                                      "j", "k", "l", "m", "n", "o", "p", "q", "r", "s"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 3, seq2seq = (data[0] / 3) % 2;
  const RtModelInfo *m = seq2seq ? &s2s_model : &tok_model;
  data++, size--;
  char err[512] = "";
  RtBound b;
  memset(&b, 0, sizeof b);
  if (mode == 0) {
    RtSafetensors *st = NULL;
    if (rt_st_parse(data, size, "fuzz.safetensors", &st, err, sizeof err) != 0) {
      check(err[0] != 0, "parse refusal has a message");
      return 0;
    }
    err[0] = 0;
    int rc = rt_model_bind(m, st, "fuzz.safetensors", &b, err, sizeof err);
    int has_mask = 0;
    for (int i = 0; i < m->n_inputs; i++)
      if (m->inputs[i].kind == RT_INPUT_MASK && rt_st_find(st, m->inputs[i].name)) has_mask = 1;
    int has_lengths = rt_st_find(st, "lengths") || rt_st_find(st, "src_lengths") ||
                      rt_st_find(st, "tgt_lengths");
    if (rc != 0) {
      check(err[0] != 0, "bind refusal has a message");
    } else {
      check_bound(m, &b, !has_mask && !has_lengths);
      rt_model_unbind(m, &b);
    }
    rt_st_close(st);
    return 0;
  }
  /* text binders: the input up to its first NUL */
  char *text = malloc(size + 1);
  check(text != NULL, "malloc");
  memcpy(text, data, size);
  text[size] = 0;
  RtVocab v = {(char **)symbols, (int64_t)(sizeof symbols / sizeof symbols[0]), NULL, NULL};
  int rc = mode == 1 ? rt_text_bind(m, text, NULL, NULL, &b, err, sizeof err)
                     : rt_text_bind(m, NULL, text, &v, &b, err, sizeof err);
  if (rc != 0) {
    check(err[0] != 0, "text refusal has a message");
  } else {
    check(!seq2seq, "rt_text_bind binds token models only");
    check(b.syms[SYM_B] == 1, "text binds one sequence");
    check_bound(m, &b, 1);
    rt_model_unbind(m, &b);
  }
  free(text);
  return 0;
}
