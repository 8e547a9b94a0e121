/* tests/frontend/test_hf_import.c — spec_import_hf through its API: the
 * text it returns parses to the model the config describes, options
 * (name, max_batch) reach the spec, and every problem of a config is
 * reported in one run. tests/data/hf/ holds the CLI goldens
 * (check_hf_import.sh). */
#include "frontend/spec.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static Arena *arena;
static Diags diags;

static void setup(void) {
  arena = arena_create();
  diags_init(&diags, arena, NULL);
}
static void teardown(void) { arena_destroy(arena); }
TestSuite(hf_import, .init = setup, .fini = teardown);

static const char *captured(void) { return diags.captured ? diags.captured : ""; }

static const char *import(const char *json, const HfImportOptions *opt) {
  SrcFile *f = src_file_from_string(arena, "config.json", json);
  return spec_import_hf(arena, f, opt, &diags);
}

static const ModelSpec *parse(const char *text) {
  Spec *s = spec_parse(arena, src_file_from_string(arena, "imported.tfm", text), &diags);
  cr_assert_not_null(s, "%s\n%s", text, captured());
  return s->model;
}

static const char *tiny_gpt2 =
    "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 48,"
    " \"n_head\": 3, \"n_layer\": 2, \"n_positions\": 20, \"n_inner\": null,"
    " \"vocab_size\": 60, \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"layer_norm_epsilon\": 1e-5, \"activation_function\": \"gelu_new\"}";

Test(hf_import, gpt2_spec_is_the_model) {
  const char *text = import(tiny_gpt2, NULL);
  cr_assert_not_null(text, "%s", captured());
  const ModelSpec *m = parse(text);
  cr_expect_str_eq(m->name, "gpt2");
  cr_expect_eq(m->arch, ARCH_DECODER);
  cr_expect_eq(m->vocab_tgt, 60);
  cr_expect_eq(m->d_model, 48);
  cr_expect_eq(m->heads, 3);
  cr_expect_eq(m->layers_dec, 2);
  cr_expect_eq(m->d_ff, 4 * 48); /* n_inner null = 4 * n_embd */
  cr_expect_eq(m->act, ACT_GELU_TANH);
  cr_expect_eq(m->norm, NORM_PRE);
  cr_expect_eq(m->norm_eps, 1e-5);
  cr_expect(m->final_norm_dec);
  cr_expect_eq(m->pos, POS_LEARNED);
  cr_expect_eq(m->pos_max, 20);
  cr_expect_eq(m->head, HEAD_LOGITS);
  cr_expect(m->head_tied);
  cr_expect_eq(m->bos_id, 1);
  cr_expect_eq(m->eos_id, 2);
  cr_expect_eq(m->max_batch, 64);
  cr_expect(strstr(text, "preset \"hf-gpt2\" root \"transformer.\"") != NULL, "%s", text);
}

Test(hf_import, options_reach_the_spec) {
  HfImportOptions o = {"my_lm", 4};
  const char *text = import(tiny_gpt2, &o);
  cr_assert_not_null(text, "%s", captured());
  const ModelSpec *m = parse(text);
  cr_expect_str_eq(m->name, "my_lm");
  cr_expect_eq(m->max_batch, 4);
  cr_expect(strstr(text, "weights my_lm {") != NULL);
  HfImportOptions bad = {"not-an-ident", 0};
  cr_expect_null(import(tiny_gpt2, &bad));
  cr_expect(strstr(captured(), "is not an identifier") != NULL, "%s", captured());
}

Test(hf_import, bert_classifier_and_base_model) {
  const char *cls =
      "{\"model_type\": \"bert\", \"architectures\": [\"BertForSequenceClassification\"],"
      " \"hidden_size\": 32, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
      " \"intermediate_size\": 64, \"max_position_embeddings\": 16, \"vocab_size\": 50,"
      " \"num_labels\": 5}";
  const char *text = import(cls, NULL);
  cr_assert_not_null(text, "%s", captured());
  const ModelSpec *m = parse(text);
  cr_expect_eq(m->head, HEAD_CLASSIFIER);
  cr_expect_eq(m->n_classes, 5); /* num_labels without id2label */
  cr_expect(m->pooler);
  cr_expect_eq(m->act, ACT_GELU);       /* BertConfig's default hidden_act */
  cr_expect_eq(m->norm_eps, 1e-12);     /* ... layer_norm_eps */
  cr_expect_eq(m->embed_norm_eps, 1e-12);
  cr_expect_eq(m->token_types, 2);      /* ... type_vocab_size */
  cr_expect_eq(m->pad_id, 0);           /* ... pad_token_id */
  cr_expect(m->mask_enc_padding);
  cr_expect(strstr(text, "root \"bert.\"") != NULL);

  const char *base =
      "{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_attention_heads\": 2,"
      " \"num_hidden_layers\": 1, \"intermediate_size\": 64, \"max_position_embeddings\": 16,"
      " \"vocab_size\": 50}";
  text = import(base, NULL);
  cr_assert_not_null(text, "%s", captured());
  m = parse(text);
  /* BertModel: hidden and pooled, so the pooler's weights are read */
  cr_expect_eq(m->head, HEAD_NONE);
  cr_expect(m->pooler);
  cr_expect(strstr(text, "preset \"hf-bert\" root \"\"") != NULL, "%s", text);
  cr_expect(strstr(text, "ignore \"pooler.dense.*\"") == NULL, "%s", text);
}

Test(hf_import, every_problem_reported_once) {
  const char *json =
      "{\"model_type\": \"bert\", \"hidden_size\": \"32\", \"num_attention_heads\": 2.5,\n"
      " \"intermediate_size\": 0, \"vocab_size\": 50, \"max_position_embeddings\": 16}";
  cr_expect_null(import(json, NULL));
  cr_expect_eq(diags.n_errors, 4, "%s", captured());
  cr_expect(strstr(captured(), "config.json:1:39: error: \"hidden_size\"") != NULL, "%s",
            captured());
  cr_expect(strstr(captured(), "missing \"num_hidden_layers\"") != NULL);
  cr_expect(strstr(captured(), "config.json:2:23: error: \"intermediate_size\"") != NULL,
            "%s", captured());
}

Test(hf_import, hostile_text_is_refused_not_crashed) {
  const char *cases[] = {"", "{", "nul\x01l", "{\"model_type\": \"bert\"", "\"bert\"",
                         "{\"model_type\": 7}", "{\"model_type\": \"\\u0000\"}",
                         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                         "[[[[[[[]]]"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int before = diags.n_errors;
    cr_expect_null(import(cases[i], NULL), "case %zu", i);
    cr_expect_gt(diags.n_errors, before, "case %zu", i);
  }
}

/* With the checkpoint's names at hand the root is the prefix of its word
 * embedding (BertModel reads the pooler, under that root too). */
Test(hf_import, root_from_the_checkpoint) {
  const char *bert_model =
      "{\"model_type\": \"bert\", \"architectures\": [\"BertModel\"], \"hidden_size\": 32,"
      " \"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"intermediate_size\": 64,"
      " \"max_position_embeddings\": 16, \"vocab_size\": 50}";
  const char *names[] = {"bert.pooler.dense.weight", "bert.embeddings.word_embeddings.weight"};
  HfImportOptions o = {NULL, 0, "w.safetensors", names, 2};
  const char *text = import(bert_model, &o);
  cr_assert_not_null(text, "%s", captured());
  cr_expect(strstr(text, "preset \"hf-bert\" root \"bert.\"") != NULL, "%s", text);
  cr_expect(strstr(text, "head        pooler") != NULL, "%s", text);
  cr_expect(strstr(text, "# The root is the prefix of the word embedding in") != NULL, "%s", text);

  const char *hub[] = {"h.0.ln_1.weight", "wte.weight"};
  HfImportOptions og = {NULL, 0, "w.safetensors", hub, 2};
  text = import(tiny_gpt2, &og);
  cr_assert_not_null(text, "%s", captured());
  cr_expect(strstr(text, "preset \"hf-gpt2\" root \"\"") != NULL, "%s", text);

  const char *other[] = {"xwte.weight", "encoder.embed.weight"}; /* no "wte.weight" part */
  HfImportOptions ob = {NULL, 0, "w.safetensors", other, 2};
  cr_expect_null(import(tiny_gpt2, &ob));
  cr_expect(strstr(captured(), "w.safetensors: error: no tensor named \"wte.weight\"") != NULL,
            "%s", captured());
}

/* Reading is linear in the config: 200k keys import in well under a
 * second (the duplicate check and lookups once scanned every field). */
Test(hf_import, many_keys_stay_linear, .timeout = 20) {
  size_t cap = 200000 * 24 + 1024, n = 0;
  char *json = malloc(cap);
  cr_assert_not_null(json);
  n += (size_t)snprintf(json + n, cap - n, "{\n");
  for (int i = 0; i < 200000; i++) n += (size_t)snprintf(json + n, cap - n, " \"k%d\": %d,\n", i, i);
  snprintf(json + n, cap - n, "%s", tiny_gpt2 + 1);
  const char *text = import(json, NULL);
  free(json);
  cr_expect_not_null(text, "%s", captured());
}
