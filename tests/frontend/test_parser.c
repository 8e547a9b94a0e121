/* tests/frontend/test_parser.c — spec_parse on well-formed specs: every
 * ModelSpec field for a seq2seq, a GPT-2 and a BERT style model, defaults,
 * weight maps (preset + root + overrides), and every preset in presets.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "frontend/spec.h"

static Arena *arena;
static Diags diags;

static void setup(void) {
  arena = arena_create();
  diags_init(&diags, arena, NULL);
}

static void teardown(void) {
  arena_destroy(arena);
}

TestSuite(parser, .init = setup, .fini = teardown);

static const char *captured(void) {
  return diags.captured ? diags.captured : "";
}

static Spec *parse(const char *text) {
  SrcFile *f = src_file_from_string(arena, "t.tfm", text);
  diags_add_source(&diags, f);
  return spec_parse(arena, f, &diags);
}

static Spec *parse_ok(const char *text) {
  Spec *s = parse(text);
  cr_assert_not_null(s, "spec_parse failed:\n%s", captured());
  cr_assert_eq(diags.n_errors, 0);
  cr_assert_str_eq(captured(), "");
  return s;
}

static void expect_loc(IrLoc l, int line, int col) {
  cr_expect_str_eq(l.file, "t.tfm");
  cr_expect_eq(l.line, line, "line %d, expected %d", l.line, line);
  cr_expect_eq(l.col, col, "col %d, expected %d", l.col, col);
}

static const WeightRule *find_rule(const WeightMap *w, const char *target) {
  for (int i = 0; i < w->n_rules; i++)
    if (strcmp(w->rules[i].target, target) == 0) return &w->rules[i];
  return NULL;
}

/* README's first example, verbatim */
static const char *seq2seq =
    "# pytorch-seq2seq \"Attention is All You Need\" (post-norm, learned positions)\n"
    "model translate {\n"
    "  arch        encoder_decoder\n"
    "  vocab       src 7853 tgt 5893\n"
    "  d_model     256\n"
    "  heads       8\n"
    "  layers      encoder 3 decoder 3\n"
    "  ffn         512 relu\n"
    "  norm        post eps 1e-5\n"
    "  position    learned max 100\n"
    "  embed_scale sqrt_d_model\n"
    "  tokens      pad 1 bos 2 eos 3\n"
    "  mask        encoder padding\n"
    "  mask        decoder causal padding\n"
    "  mask        cross padding\n"
    "  head        logits\n"
    "}\n"
    "\n"
    "weights translate {\n"
    "  preset \"pytorch-seq2seq\"\n"
    "}\n";

Test(parser, seq2seq_readme_example_every_field) {
  Spec *s = parse_ok(seq2seq);
  const ModelSpec *m = s->model;
  cr_assert_not_null(m);
  cr_expect_str_eq(m->name, "translate");
  expect_loc(m->loc, 2, 7);
  cr_expect_eq(m->arch, ARCH_ENCODER_DECODER);
  cr_expect_eq(m->vocab_src, 7853);
  cr_expect_eq(m->vocab_tgt, 5893);
  cr_expect_eq(m->d_model, 256);
  cr_expect_eq(m->heads, 8);
  cr_expect_eq(m->d_ff, 512);
  cr_expect_eq(m->layers_enc, 3);
  cr_expect_eq(m->layers_dec, 3);
  cr_expect_eq(m->act, ACT_RELU);
  cr_expect_eq(m->norm, NORM_POST);
  cr_expect_eq(m->norm_eps, 1e-5);
  cr_expect_not(m->norm_unbiased);
  cr_expect_not(m->final_norm_enc);
  cr_expect_not(m->final_norm_dec);
  cr_expect_eq(m->pos, POS_LEARNED);
  cr_expect_eq(m->pos_max, 100);
  cr_expect_eq(m->embed_scale, 16.0);
  cr_expect_not(m->embed_norm);
  cr_expect_eq(m->embed_norm_eps, 1e-5);
  cr_expect_eq(m->token_types, 0);
  cr_expect(m->mask_enc_padding);
  cr_expect(m->mask_dec_padding);
  cr_expect(m->mask_dec_causal);
  cr_expect(m->mask_cross_padding);
  cr_expect_eq(m->pad_id, 1);
  cr_expect_eq(m->bos_id, 2);
  cr_expect_eq(m->eos_id, 3);
  cr_expect_eq(m->head, HEAD_LOGITS);
  cr_expect_eq(m->n_classes, 0);
  cr_expect_not(m->head_tied);
  cr_expect(m->head_bias);
  cr_expect_not(m->pooler);
  cr_expect_eq(m->max_batch, 64);
  cr_expect_eq(m->max_src, 100);
  cr_expect_eq(m->max_tgt, 100);
  expect_loc(m->loc_arch, 3, 3);
  expect_loc(m->loc_heads, 6, 3);
  expect_loc(m->loc_mask, 13, 3);
  expect_loc(m->loc_head, 16, 3);
  expect_loc(m->loc_position, 10, 3);

  const WeightMap *w = s->weights;
  cr_assert_not_null(w);
  cr_expect_str_eq(w->model_name, "translate");
  expect_loc(w->loc, 19, 9);
  cr_expect_str_eq(w->preset, "pytorch-seq2seq");
  cr_expect_str_eq(w->root, "");
  cr_expect_eq(w->n_rules, 26);
  cr_expect_eq(w->n_ignore, 0);
  for (int i = 0; i < w->n_rules; i++) {
    cr_expect(w->rules[i].from_preset);
    expect_loc(w->rules[i].loc, 20, 10); /* the preset line */
  }
  const WeightRule *r = find_rule(w, "enc[i].attn.q");
  cr_assert_not_null(r);
  cr_expect_eq(r->xform, WX_LINEAR);
  cr_expect_str_eq(r->source, "encoder.layers.{i}.self_attention.fc_q");
  cr_expect_str_eq(r->weight_suffix, "weight");
  cr_expect_str_eq(r->bias_suffix, "bias");
  r = find_rule(w, "src_pos");
  cr_assert_not_null(r);
  cr_expect_eq(r->xform, WX_TENSOR);
  cr_expect_str_eq(r->source, "encoder.pos_embedding.weight");
  cr_expect_eq(s->src->len, strlen(seq2seq));
}

static const char *gpt2 =
    "# GPT-2 small, Hugging Face layout\n"
    "model gpt2 {\n"
    "  arch        decoder\n"
    "  vocab       50257\n"
    "  d_model     768\n"
    "  heads       12\n"
    "  layers      12\n"
    "  ffn         3072 gelu_tanh\n"
    "  norm        pre eps 1e-5\n"
    "  final_norm  yes\n"
    "  position    learned max 1024\n"
    "  tokens      bos 50256 eos 50256\n"
    "  head        logits tied\n"
    "  max_batch   8\n"
    "}\n"
    "weights gpt2 {\n"
    "  preset \"hf-gpt2\"\n"
    "}\n";

Test(parser, gpt2_style_tied_head_every_field) {
  Spec *s = parse_ok(gpt2);
  const ModelSpec *m = s->model;
  cr_expect_str_eq(m->name, "gpt2");
  cr_expect_eq(m->arch, ARCH_DECODER);
  cr_expect_eq(m->vocab_src, 0);
  cr_expect_eq(m->vocab_tgt, 50257);
  cr_expect_eq(m->d_model, 768);
  cr_expect_eq(m->heads, 12);
  cr_expect_eq(m->d_ff, 3072);
  cr_expect_eq(m->layers_enc, 0);
  cr_expect_eq(m->layers_dec, 12);
  cr_expect_eq(m->act, ACT_GELU_TANH);
  cr_expect_eq(m->norm, NORM_PRE);
  cr_expect_eq(m->norm_eps, 1e-5);
  cr_expect_not(m->norm_unbiased);
  cr_expect_not(m->final_norm_enc);
  cr_expect(m->final_norm_dec);
  cr_expect_eq(m->pos, POS_LEARNED);
  cr_expect_eq(m->pos_max, 1024);
  cr_expect_eq(m->embed_scale, 1.0);
  cr_expect_not(m->embed_norm);
  cr_expect_eq(m->token_types, 0);
  cr_expect_not(m->mask_enc_padding);
  cr_expect_not(m->mask_dec_padding);
  cr_expect(m->mask_dec_causal);
  cr_expect_not(m->mask_cross_padding);
  cr_expect_eq(m->pad_id, -1);
  cr_expect_eq(m->bos_id, 50256);
  cr_expect_eq(m->eos_id, 50256);
  cr_expect_eq(m->head, HEAD_LOGITS);
  cr_expect(m->head_tied);
  cr_expect_not(m->head_bias);
  cr_expect_not(m->pooler);
  cr_expect_eq(m->max_batch, 8);
  cr_expect_eq(m->max_src, 0);
  cr_expect_eq(m->max_tgt, 1024);
  expect_loc(m->loc_mask, 2, 7); /* no mask line: the model's name */

  const WeightMap *w = s->weights;
  cr_assert_not_null(w);
  cr_expect_str_eq(w->preset, "hf-gpt2");
  cr_expect_eq(w->n_rules, 10);
  cr_expect_eq(w->n_ignore, 2);
  cr_expect_str_eq(w->ignore[0], "transformer.h.{i}.attn.bias");
  cr_expect_str_eq(w->ignore[1], "transformer.h.{i}.attn.masked_bias");
  const WeightRule *r = find_rule(w, "dec[i].attn.qkv");
  cr_assert_not_null(r);
  cr_expect_eq(r->xform, WX_SPLIT_CONV1D);
  cr_expect_str_eq(r->source, "transformer.h.{i}.attn.c_attn");
  r = find_rule(w, "head");
  cr_assert_not_null(r);
  cr_expect_eq(r->xform, WX_TIED);
  cr_expect_str_eq(r->source, "lm_head.weight");
}

static const char *bert =
    "model bert {\n"
    "  arch         encoder\n"
    "  vocab        30522\n"
    "  d_model      768\n"
    "  heads        12\n"
    "  layers       12\n"
    "  ffn          3072 gelu\n"
    "  norm         layernorm post eps 1e-12\n"
    "  position     learned max 512\n"
    "  token_types  2\n"
    "  embed_norm   eps 1e-12\n"
    "  mask         encoder padding\n"
    "  tokens       pad 0\n"
    "  head         classifier 2 pooler\n"
    "  max_len      128\n"
    "}\n"
    "weights bert {\n"
    "  preset \"hf-bert\"\n"
    "}\n";

Test(parser, bert_style_token_types_and_pooler_every_field) {
  Spec *s = parse_ok(bert);
  const ModelSpec *m = s->model;
  cr_expect_str_eq(m->name, "bert");
  cr_expect_eq(m->arch, ARCH_ENCODER);
  cr_expect_eq(m->vocab_src, 30522);
  cr_expect_eq(m->vocab_tgt, 0);
  cr_expect_eq(m->d_model, 768);
  cr_expect_eq(m->heads, 12);
  cr_expect_eq(m->d_ff, 3072);
  cr_expect_eq(m->layers_enc, 12);
  cr_expect_eq(m->layers_dec, 0);
  cr_expect_eq(m->act, ACT_GELU);
  cr_expect_eq(m->norm, NORM_POST);
  cr_expect_eq(m->norm_eps, 1e-12);
  cr_expect_not(m->norm_unbiased);
  cr_expect_not(m->final_norm_enc);
  cr_expect_not(m->final_norm_dec);
  cr_expect_eq(m->pos, POS_LEARNED);
  cr_expect_eq(m->pos_max, 512);
  cr_expect_eq(m->embed_scale, 1.0);
  cr_expect(m->embed_norm);
  cr_expect_eq(m->embed_norm_eps, 1e-12);
  cr_expect_eq(m->token_types, 2);
  cr_expect(m->mask_enc_padding);
  cr_expect_not(m->mask_dec_padding);
  cr_expect_not(m->mask_dec_causal);
  cr_expect_not(m->mask_cross_padding);
  cr_expect_eq(m->pad_id, 0);
  cr_expect_eq(m->bos_id, -1);
  cr_expect_eq(m->eos_id, -1);
  cr_expect_eq(m->head, HEAD_CLASSIFIER);
  cr_expect_eq(m->n_classes, 2);
  cr_expect_not(m->head_tied);
  cr_expect(m->head_bias);
  cr_expect(m->pooler);
  cr_expect_eq(m->max_batch, 64);
  cr_expect_eq(m->max_src, 128);
  cr_expect_eq(m->max_tgt, 0);
  const WeightMap *w = s->weights;
  cr_assert_not_null(w);
  cr_expect_eq(w->n_rules, 14);
  cr_expect_eq(w->n_ignore, 1);
  cr_expect_not_null(find_rule(w, "token_type"));
  cr_expect_not_null(find_rule(w, "pooler"));
}

static const char *override_spec =
    "model tiny {\n"
    "  arch encoder_decoder\n"
    "  vocab 1000\n"
    "  d_model 64\n"
    "  heads 4\n"
    "  layers 2\n"
    "  ffn 256 relu\n"
    "  position sinusoidal\n"
    "  head logits\n"
    "}\n"
    "weights tiny {\n"
    "  preset \"torch.nn\" root \"transformer.\"   # under a prefix\n"
    "  src_embed = tensor \"src_tok.weight\"\n"
    "  tgt_embed = tensor \"tgt_tok.weight\"\n"
    "  enc[i].attn.q = linear \"enc.{i}.q_proj\"\n"
    "  enc[i].attn.k = heads \"enc.{i}.heads.{h}.k\" weight \"w\" no_bias\n"
    "  enc[i].attn.v = conv1d \"enc.{i}.v\"\n"
    "  dec[i].norm3 = norm \"dec.{i}.ln3\" weight \"a_2\" bias \"b_2\"\n"
    "  head = linear \"generator.proj\" bias \"\"\n"
    "  ignore \"src_embed.1.pe\"\n"
    "}\n";

Test(parser, weights_preset_root_and_overrides) {
  Spec *s = parse_ok(override_spec);
  const WeightMap *w = s->weights;
  cr_assert_not_null(w);
  cr_expect_str_eq(w->model_name, "tiny");
  cr_expect_str_eq(w->preset, "torch.nn");
  cr_expect_str_eq(w->root, "transformer.");
  /* 7 explicit rules, then torch.nn's 17 minus enc[i].attn.qkv (replaced by
   * the explicit q, k, v) and dec[i].norm3 (overridden) */
  cr_assert_eq(w->n_rules, 7 + 15);
  const char *explicit[] = {"src_embed", "tgt_embed", "enc[i].attn.q", "enc[i].attn.k",
                            "enc[i].attn.v", "dec[i].norm3", "head"};
  for (int i = 0; i < 7; i++) {
    cr_expect_str_eq(w->rules[i].target, explicit[i]);
    cr_expect_not(w->rules[i].from_preset);
    expect_loc(w->rules[i].loc, 13 + i, 3);
  }
  for (int i = 7; i < w->n_rules; i++) {
    cr_expect(w->rules[i].from_preset);
    cr_expect(strncmp(w->rules[i].source, "transformer.", 12) == 0, "%s", w->rules[i].source);
    expect_loc(w->rules[i].loc, 12, 10);
  }
  cr_expect_eq(w->rules[0].xform, WX_TENSOR);
  cr_expect_str_eq(w->rules[0].source, "src_tok.weight"); /* root is for the preset only */
  cr_expect_eq(w->rules[3].xform, WX_HEADS);
  cr_expect_str_eq(w->rules[3].source, "enc.{i}.heads.{h}.k");
  cr_expect_str_eq(w->rules[3].weight_suffix, "w");
  cr_expect_str_eq(w->rules[3].bias_suffix, "");
  cr_expect_eq(w->rules[4].xform, WX_CONV1D);
  cr_expect_eq(w->rules[5].xform, WX_NORM);
  cr_expect_str_eq(w->rules[5].weight_suffix, "a_2");
  cr_expect_str_eq(w->rules[5].bias_suffix, "b_2");
  cr_expect_str_eq(w->rules[6].bias_suffix, "");
  cr_expect_str_eq(w->rules[6].weight_suffix, "weight");
  cr_expect_null(find_rule(w, "enc[i].attn.qkv"));
  int n_norm3 = 0;
  for (int i = 0; i < w->n_rules; i++) n_norm3 += strcmp(w->rules[i].target, "dec[i].norm3") == 0;
  cr_expect_eq(n_norm3, 1);
  const WeightRule *r = find_rule(w, "dec[i].attn.qkv");
  cr_assert_not_null(r);
  cr_expect_eq(r->xform, WX_SPLIT);
  cr_expect_str_eq(r->source, "transformer.decoder.layers.{i}.self_attn");
  cr_expect_str_eq(r->weight_suffix, "in_proj_weight");
  cr_expect_str_eq(r->bias_suffix, "in_proj_bias");
  cr_expect_eq(w->n_ignore, 1);
  cr_expect_str_eq(w->ignore[0], "src_embed.1.pe");
  expect_loc(w->ignore_loc[0], 20, 3);
}

Test(parser, explicit_qkv_drops_the_presets_q_k_v) {
  Spec *s = parse_ok("model m {\n arch encoder_decoder\n vocab 10\n d_model 8\n heads 2\n"
                     " layers 1\n ffn 16 relu\n position none\n head log_softmax\n}\n"
                     "weights m {\n preset \"annotated\" root \"model.\"\n"
                     " dec[i].cross.qkv = split \"dec.{i}.cross\"\n}\n");
  const WeightMap *w = s->weights;
  cr_expect_null(find_rule(w, "dec[i].cross.q"));
  cr_expect_null(find_rule(w, "dec[i].cross.k"));
  cr_expect_null(find_rule(w, "dec[i].cross.v"));
  cr_expect_not_null(find_rule(w, "dec[i].cross.o"));
  cr_expect_not_null(find_rule(w, "dec[i].attn.q"));
  cr_expect_eq(w->n_rules, 1 + 26 - 3);
  cr_expect_eq(w->n_ignore, 2);
  cr_expect_str_eq(w->ignore[0], "model.src_embed.1.pe");
}

Test(parser, every_preset_parses) {
  const char *const *names;
  int n;
  spec_preset_names(&names, &n);
  cr_assert_geq(n, 6);
  for (int i = 0; i < n; i++) {
    const char *text = spec_preset_text(names[i]);
    cr_assert_not_null(text, "%s", names[i]);
    int rules = 0, ignores = 0;
    for (const char *p = text; *p;) {
      const char *e = strchr(p, '\n');
      size_t len = e ? (size_t)(e - p) : strlen(p);
      const char *line = arena_strndup(arena, p, len);
      if (strstr(line, " = ")) rules++;
      else if (strncmp(line, "ignore ", 7) == 0) ignores++;
      p += len + (e != NULL);
    }
    const char *spec = arena_printf(
        arena, "model m {\n arch encoder_decoder\n vocab 100\n d_model 8\n heads 2\n"
               " layers 1\n ffn 16 relu\n position learned max 8\n head logits\n}\n"
               "weights m {\n preset \"%s\" root \"r.\"\n}\n", names[i]);
    Spec *s = parse(spec);
    cr_expect_not_null(s, "preset %s:\n%s", names[i], captured());
    if (!s) continue;
    cr_expect_eq(s->weights->n_rules, rules, "preset %s: %d rules, expected %d", names[i],
                 s->weights->n_rules, rules);
    cr_expect_eq(s->weights->n_ignore, ignores, "preset %s", names[i]);
    /* the root replaces the preset's base; sources outside the base (HF
     * task heads) stay as written */
    const char *base = spec_preset_base(names[i]);
    cr_assert_not_null(base, "%s", names[i]);
    for (int k = 0; k < s->weights->n_rules; k++) {
      const char *src = s->weights->rules[k].source;
      bool outside = base[0] && strncmp(src, base, strlen(base)) != 0 &&
                     strstr(text, arena_printf(arena, "\"%s\"", src));
      cr_expect(strncmp(src, "r.", 2) == 0 || outside, "preset %s: %s", names[i], src);
    }
  }
  cr_expect_null(spec_preset_text("no-such-preset"));
  cr_expect_null(spec_preset_base("no-such-preset"));
}

/* The Hugging Face presets under any root: the base model's prefix
 * ("bert.", "transformer.") is the default root and `root ""` drops it,
 * while the task heads at the top of the state_dict keep their names. */
static const char *hf_root_spec(const char *preset, const char *root_line) {
  return arena_printf(arena,
                      "model m {\n arch encoder\n vocab 100\n d_model 8\n heads 2\n layers 1\n"
                      " ffn 16 relu\n position learned max 8\n head classifier 2 pooler\n}\n"
                      "weights m {\n preset \"%s\"%s\n}\n",
                      preset, root_line);
}

Test(parser, hf_presets_take_any_root) {
  struct {
    const char *preset, *root_line, *root, *target, *source, *ignore0;
  } cases[] = {
      {"hf-bert", "", "bert.", "embed", "bert.embeddings.word_embeddings.weight",
       "bert.embeddings.position_ids"},
      {"hf-bert", " root \"\"", "", "embed", "embeddings.word_embeddings.weight",
       "embeddings.position_ids"},
      {"hf-bert", " root \"model.bert.\"", "model.bert.", "pooler", "model.bert.pooler.dense",
       "model.bert.embeddings.position_ids"},
      {"hf-bert", " root \"\"", "", "classifier", "classifier", NULL},
      {"hf-gpt2", "", "transformer.", "embed", "transformer.wte.weight", NULL},
      {"hf-gpt2", " root \"\"", "", "dec[i].attn.qkv", "h.{i}.attn.c_attn", "h.{i}.attn.bias"},
      {"hf-gpt2", " root \"\"", "", "head", "lm_head.weight", NULL},
      {"torch.nn", " root \"t.\"", "t.", "enc.norm", "t.encoder.norm", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Spec *s = parse(hf_root_spec(cases[i].preset, cases[i].root_line));
    cr_assert_not_null(s, "%s:\n%s", cases[i].preset, captured());
    cr_expect_str_eq(s->weights->root, cases[i].root);
    const WeightRule *r = find_rule(s->weights, cases[i].target);
    if (!cases[i].source) continue;
    cr_assert_not_null(r, "%s %s", cases[i].preset, cases[i].target);
    cr_expect_str_eq(r->source, cases[i].source);
    if (cases[i].ignore0) cr_expect_str_eq(s->weights->ignore[0], cases[i].ignore0);
  }
}

static const char *minimal =
    "model tiny {\n"
    "  arch encoder\n"
    "  vocab 1000\n"
    "  d_model 64\n"
    "  heads 4\n"
    "  layers 2\n"
    "  ffn 256 relu\n"
    "  position sinusoidal\n"
    "  head none\n"
    "}\n";

Test(parser, defaults) {
  Spec *s = parse_ok(minimal);
  const ModelSpec *m = s->model;
  cr_expect_null(s->weights);
  cr_expect_eq(m->norm, NORM_POST);
  cr_expect_eq(m->norm_eps, 1e-5);
  cr_expect_eq(m->pos, POS_SINUSOIDAL);
  cr_expect_eq(m->pos_max, 0);
  cr_expect_eq(m->embed_scale, 1.0);
  cr_expect_not(m->embed_norm);
  cr_expect_eq(m->embed_norm_eps, 1e-5);
  cr_expect_eq(m->max_batch, 64);
  cr_expect_eq(m->max_src, 512);
  cr_expect_eq(m->max_tgt, 0);
  cr_expect_eq(m->pad_id, -1);
  cr_expect_eq(m->head, HEAD_NONE);
  cr_expect_not(m->mask_dec_causal);
  cr_expect_not(m->mask_enc_padding);
  cr_expect_eq(m->layers_enc, 2);
  cr_expect_eq(m->layers_dec, 0);
}

static Spec *parse_with(const char *extra_lines, const char *arch) {
  const char *t = arena_printf(arena, "model x {\n arch %s\n vocab 100\n d_model 64\n heads 4\n"
                               " layers 2\n ffn 256 relu\n%s head none\n}\n", arch, extra_lines);
  return parse(t);
}

Test(parser, sinusoidal_max_is_the_default_max_len) {
  Spec *s = parse_with(" position sinusoidal max 256\n", "decoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->pos_max, 256);
  cr_expect_eq(s->model->max_tgt, 256);
  cr_expect_eq(s->model->max_src, 0);
}

Test(parser, encoder_decoder_plain_forms_mean_both_sides) {
  Spec *s = parse_with(" position none\n max_len 300\n", "encoder_decoder");
  cr_assert_not_null(s, "%s", captured());
  const ModelSpec *m = s->model;
  cr_expect_eq(m->vocab_src, 100);
  cr_expect_eq(m->vocab_tgt, 100);
  cr_expect_eq(m->layers_enc, 2);
  cr_expect_eq(m->layers_dec, 2);
  cr_expect_eq(m->max_src, 300);
  cr_expect_eq(m->max_tgt, 300);
  cr_expect(m->mask_dec_causal);
  cr_expect_eq(m->pos, POS_NONE);
}

Test(parser, max_len_src_tgt) {
  Spec *s = parse_with(" position learned max 64\n max_len src 50 tgt 64\n", "encoder_decoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->max_src, 50);
  cr_expect_eq(s->model->max_tgt, 64);
}

Test(parser, norm_options_any_order) {
  Spec *s = parse_with(" position none\n norm pre unbiased_std eps 1e-6\n", "encoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->norm, NORM_PRE);
  cr_expect(s->model->norm_unbiased);
  cr_expect_eq(s->model->norm_eps, 1e-6);
}

Test(parser, final_norm_forms) {
  Spec *s = parse_with(" position none\n final_norm decoder encoder\n", "encoder_decoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect(s->model->final_norm_enc);
  cr_expect(s->model->final_norm_dec);
  s = parse_with(" position none\n final_norm yes\n", "encoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect(s->model->final_norm_enc);
  cr_expect_not(s->model->final_norm_dec);
  s = parse_with(" position none\n final_norm no\n", "decoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_not(s->model->final_norm_dec);
}

Test(parser, embed_scale_number_and_embed_norm_default) {
  Spec *s = parse_with(" position none\n embed_scale 2.5\n embed_norm\n", "encoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->embed_scale, 2.5);
  cr_expect(s->model->embed_norm);
  cr_expect_eq(s->model->embed_norm_eps, 1e-5);
  s = parse_with(" position none\n embed_scale none\n", "encoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->embed_scale, 1.0);
  s = parse_with(" position none\n embed_scale sqrt_d_model\n", "encoder");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->embed_scale, 8.0);
}

Test(parser, head_no_bias) {
  const char *t = "model x {\n arch decoder\n vocab 100\n d_model 64\n heads 4\n layers 2\n"
                  " ffn 256 relu\n position none\n head log_softmax no_bias\n"
                  " mask decoder padding causal\n}\n";
  Spec *s = parse(t);
  cr_assert_not_null(s, "%s", captured());
  cr_expect_eq(s->model->head, HEAD_LOG_SOFTMAX);
  cr_expect_not(s->model->head_bias);
  cr_expect_not(s->model->head_tied);
  cr_expect(s->model->mask_dec_padding);
  cr_expect(s->model->mask_dec_causal);
}

Test(parser, weights_block_may_come_first_and_crlf_is_fine) {
  Spec *s = parse("weights tiny {\r\n  preset \"anatomy\"\r\n}\r\n"
                  "model tiny {\r\n  arch encoder\r\n  vocab 1000\r\n  d_model 64\r\n"
                  "  heads 4\r\n  layers 2\r\n  ffn 256 relu\r\n  position learned max 64\r\n"
                  "  embed_norm\r\n  head classifier 3\r\n}\r\n");
  cr_assert_not_null(s, "%s", captured());
  cr_expect_str_eq(s->weights->preset, "anatomy");
  cr_expect_eq(s->model->n_classes, 3);
}

Test(parser, errors_return_null_and_are_counted) {
  Spec *s = parse("model x {\n arch encoder\n heads 5\n}\n");
  cr_expect_null(s);
  /* missing vocab, d_model, layers, ffn, position, head */
  cr_expect_eq(diags.n_errors, 6, "%s", captured());
}

Test(parser, readme_weight_map_example_mixes_qkv_with_q_and_k) {
  /* README's "Weight maps" example shows every transform at once; as one
   * block it maps enc[i].attn both fused and per projection, which is an
   * error. */
  Spec *s = parse(
      "model mymodel {\n arch encoder_decoder\n vocab 1000\n d_model 64\n heads 4\n"
      " layers 2\n ffn 256 relu\n position sinusoidal\n head logits tied\n}\n"
      "weights mymodel {\n"
      "  preset \"torch.nn\" root \"transformer.\"     # a naming convention, under a prefix\n"
      "  src_embed      = tensor \"src_tok.weight\"\n"
      "  enc[i].attn.q  = linear \"enc.{i}.attn.q_proj\"            # .weight [out,in] + .bias\n"
      "  enc[i].attn.qkv = split \"enc.{i}.attn\" weight \"in_proj_weight\" bias \"in_proj_bias\"\n"
      "  enc[i].attn.k  = heads \"enc.{i}.attn.heads.{h}.k\"       # H per-head linears\n"
      "  dec[i].attn.qkv = split_conv1d \"h.{i}.attn.c_attn\"      # HF Conv1D [in,3d]\n"
      "  enc[i].norm1   = norm \"enc.{i}.ln\" weight \"a_2\" bias \"b_2\"\n"
      "  head           = tied \"lm_head.weight\"                  # stored copy\n"
      "  ignore \"src_embed.1.pe\"                                 # deliberately unused\n"
      "}\n");
  cr_expect_null(s);
  cr_expect_eq(diags.n_errors, 2, "%s", captured());
  cr_expect(strstr(captured(), "t.tfm:15:3: error: enc[i].attn.qkv also covers enc[i].attn.q\n")
            != NULL, "%s", captured());
  cr_expect(strstr(captured(),
                   "t.tfm:16:3: error: enc[i].attn.k is also covered by enc[i].attn.qkv\n")
            != NULL, "%s", captured());
}

/* Hostile shapes stay linear: many block headers on one line (each asks
 * whether the rest of its line has a lexical error: a lookup, not a scan)
 * still give the usual messages, and an error token later on the line
 * silences the per-header message as before. */
Test(parser, many_headers_on_one_line) {
  enum { N = 20000 };
  size_t cap = (size_t)N * 12 + 64;
  char *text = malloc(cap);
  cr_assert(text);
  size_t k = (size_t)snprintf(text, cap, "model m {");
  for (int i = 0; i < N; i++) k += (size_t)snprintf(text + k, cap - k, " model x {");
  snprintf(text + k, cap - k, " $\n}\n");
  cr_assert_null(parse(text));
  cr_assert(strstr(captured(), "unexpected character '$'"), "%s", captured());
  cr_assert(!strstr(captured(), "expected a new line after '{'"), "%s", captured());
  free(text);
}
