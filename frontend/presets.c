/* frontend/presets.c — weight-map presets: the state_dict naming conventions
 * of the model families tfmc supports, written in the weights-block syntax
 * (one rule per line) and parsed by the same parser as a user's rules.
 *
 * A preset may name targets a given model does not have (a decoder's rules
 * on an encoder-only model, a learned position table on a sinusoidal model);
 * such rules are dropped when the map is applied.
 *
 * Each preset has a base: the prefix its base model's tensors carry in the
 * checkpoint it was written for ("bert." for BertForSequenceClassification,
 * "transformer." for GPT2LMHeadModel, "" for the rest). `root` (weights
 * block: preset "NAME" root "PREFIX") says where the base model lives in
 * the user's checkpoint: every source and ignore pattern that starts with
 * the base has the base replaced by the root; sources outside the base
 * (Hugging Face's task heads, `classifier`, `lm_head.weight`, which sit at
 * the top of the state_dict whatever the base model's prefix) are kept. So
 * `root ""` reads a checkpoint saved from BertModel (no "bert." prefix),
 * and for a base of "" the root is simply prepended to every name.
 *
 * Every preset is checked against the real state_dict of its model family by
 * tools/gen_goldens.py (check_weight_map: each tensor mapped or ignored, each
 * mapped name present), which reads the rules out of this file: keep each
 * preset a {"name", "base", "rule\n" "rule\n" ...} initializer of string
 * literals. */
#include "frontend/spec.h"

#include <string.h>

typedef struct Preset {
  const char *name;
  const char *base; /* the default root; see above */
  const char *text;
} Preset;

static const Preset presets[] = {
    {"torch.nn", "",
     /* nn.Transformer / nn.TransformerEncoder / nn.TransformerDecoder */
     "enc[i].attn.qkv = split \"encoder.layers.{i}.self_attn\" weight \"in_proj_weight\" bias \"in_proj_bias\"\n"
     "enc[i].attn.o = linear \"encoder.layers.{i}.self_attn.out_proj\"\n"
     "enc[i].ffn.w1 = linear \"encoder.layers.{i}.linear1\"\n"
     "enc[i].ffn.w2 = linear \"encoder.layers.{i}.linear2\"\n"
     "enc[i].norm1 = norm \"encoder.layers.{i}.norm1\"\n"
     "enc[i].norm2 = norm \"encoder.layers.{i}.norm2\"\n"
     "enc.norm = norm \"encoder.norm\"\n"
     "dec[i].attn.qkv = split \"decoder.layers.{i}.self_attn\" weight \"in_proj_weight\" bias \"in_proj_bias\"\n"
     "dec[i].attn.o = linear \"decoder.layers.{i}.self_attn.out_proj\"\n"
     "dec[i].cross.qkv = split \"decoder.layers.{i}.multihead_attn\" weight \"in_proj_weight\" bias \"in_proj_bias\"\n"
     "dec[i].cross.o = linear \"decoder.layers.{i}.multihead_attn.out_proj\"\n"
     "dec[i].ffn.w1 = linear \"decoder.layers.{i}.linear1\"\n"
     "dec[i].ffn.w2 = linear \"decoder.layers.{i}.linear2\"\n"
     "dec[i].norm1 = norm \"decoder.layers.{i}.norm1\"\n"
     "dec[i].norm2 = norm \"decoder.layers.{i}.norm2\"\n"
     "dec[i].norm3 = norm \"decoder.layers.{i}.norm3\"\n"
     "dec.norm = norm \"decoder.norm\"\n"},
    {"annotated", "",
     /* The Annotated Transformer: EncoderDecoder(make_model) */
     "src_embed = tensor \"src_embed.0.lut.weight\"\n"
     "tgt_embed = tensor \"tgt_embed.0.lut.weight\"\n"
     "ignore \"src_embed.1.pe\"\n"
     "ignore \"tgt_embed.1.pe\"\n"
     "enc[i].attn.q = linear \"encoder.layers.{i}.self_attn.linears.0\"\n"
     "enc[i].attn.k = linear \"encoder.layers.{i}.self_attn.linears.1\"\n"
     "enc[i].attn.v = linear \"encoder.layers.{i}.self_attn.linears.2\"\n"
     "enc[i].attn.o = linear \"encoder.layers.{i}.self_attn.linears.3\"\n"
     "enc[i].ffn.w1 = linear \"encoder.layers.{i}.feed_forward.w_1\"\n"
     "enc[i].ffn.w2 = linear \"encoder.layers.{i}.feed_forward.w_2\"\n"
     "enc[i].norm1 = norm \"encoder.layers.{i}.sublayer.0.norm\" weight \"a_2\" bias \"b_2\"\n"
     "enc[i].norm2 = norm \"encoder.layers.{i}.sublayer.1.norm\" weight \"a_2\" bias \"b_2\"\n"
     "enc.norm = norm \"encoder.norm\" weight \"a_2\" bias \"b_2\"\n"
     "dec[i].attn.q = linear \"decoder.layers.{i}.self_attn.linears.0\"\n"
     "dec[i].attn.k = linear \"decoder.layers.{i}.self_attn.linears.1\"\n"
     "dec[i].attn.v = linear \"decoder.layers.{i}.self_attn.linears.2\"\n"
     "dec[i].attn.o = linear \"decoder.layers.{i}.self_attn.linears.3\"\n"
     "dec[i].cross.q = linear \"decoder.layers.{i}.src_attn.linears.0\"\n"
     "dec[i].cross.k = linear \"decoder.layers.{i}.src_attn.linears.1\"\n"
     "dec[i].cross.v = linear \"decoder.layers.{i}.src_attn.linears.2\"\n"
     "dec[i].cross.o = linear \"decoder.layers.{i}.src_attn.linears.3\"\n"
     "dec[i].ffn.w1 = linear \"decoder.layers.{i}.feed_forward.w_1\"\n"
     "dec[i].ffn.w2 = linear \"decoder.layers.{i}.feed_forward.w_2\"\n"
     "dec[i].norm1 = norm \"decoder.layers.{i}.sublayer.0.norm\" weight \"a_2\" bias \"b_2\"\n"
     "dec[i].norm2 = norm \"decoder.layers.{i}.sublayer.1.norm\" weight \"a_2\" bias \"b_2\"\n"
     "dec[i].norm3 = norm \"decoder.layers.{i}.sublayer.2.norm\" weight \"a_2\" bias \"b_2\"\n"
     "dec.norm = norm \"decoder.norm\" weight \"a_2\" bias \"b_2\"\n"
     "head = linear \"generator.proj\"\n"},
    {"pytorch-seq2seq", "",
     /* bentrevett/pytorch-seq2seq, "6 - Attention is All You Need" */
     "src_embed = tensor \"encoder.tok_embedding.weight\"\n"
     "src_pos = tensor \"encoder.pos_embedding.weight\"\n"
     "tgt_embed = tensor \"decoder.tok_embedding.weight\"\n"
     "tgt_pos = tensor \"decoder.pos_embedding.weight\"\n"
     "enc[i].attn.q = linear \"encoder.layers.{i}.self_attention.fc_q\"\n"
     "enc[i].attn.k = linear \"encoder.layers.{i}.self_attention.fc_k\"\n"
     "enc[i].attn.v = linear \"encoder.layers.{i}.self_attention.fc_v\"\n"
     "enc[i].attn.o = linear \"encoder.layers.{i}.self_attention.fc_o\"\n"
     "enc[i].ffn.w1 = linear \"encoder.layers.{i}.positionwise_feedforward.fc_1\"\n"
     "enc[i].ffn.w2 = linear \"encoder.layers.{i}.positionwise_feedforward.fc_2\"\n"
     "enc[i].norm1 = norm \"encoder.layers.{i}.self_attn_layer_norm\"\n"
     "enc[i].norm2 = norm \"encoder.layers.{i}.ff_layer_norm\"\n"
     "dec[i].attn.q = linear \"decoder.layers.{i}.self_attention.fc_q\"\n"
     "dec[i].attn.k = linear \"decoder.layers.{i}.self_attention.fc_k\"\n"
     "dec[i].attn.v = linear \"decoder.layers.{i}.self_attention.fc_v\"\n"
     "dec[i].attn.o = linear \"decoder.layers.{i}.self_attention.fc_o\"\n"
     "dec[i].cross.q = linear \"decoder.layers.{i}.encoder_attention.fc_q\"\n"
     "dec[i].cross.k = linear \"decoder.layers.{i}.encoder_attention.fc_k\"\n"
     "dec[i].cross.v = linear \"decoder.layers.{i}.encoder_attention.fc_v\"\n"
     "dec[i].cross.o = linear \"decoder.layers.{i}.encoder_attention.fc_o\"\n"
     "dec[i].ffn.w1 = linear \"decoder.layers.{i}.positionwise_feedforward.fc_1\"\n"
     "dec[i].ffn.w2 = linear \"decoder.layers.{i}.positionwise_feedforward.fc_2\"\n"
     "dec[i].norm1 = norm \"decoder.layers.{i}.self_attn_layer_norm\"\n"
     "dec[i].norm2 = norm \"decoder.layers.{i}.enc_attn_layer_norm\"\n"
     "dec[i].norm3 = norm \"decoder.layers.{i}.ff_layer_norm\"\n"
     "head = linear \"decoder.fc_out\"\n"},
    {"anatomy", "",
     /* "NLP with Transformers" ch. 3: TransformerForSequenceClassification */
     "embed = tensor \"encoder.embeddings.token_embeddings.weight\"\n"
     "pos = tensor \"encoder.embeddings.position_embeddings.weight\"\n"
     "embed_norm = norm \"encoder.embeddings.layer_norm\"\n"
     "enc[i].attn.q = heads \"encoder.layers.{i}.attention.heads.{h}.q\"\n"
     "enc[i].attn.k = heads \"encoder.layers.{i}.attention.heads.{h}.k\"\n"
     "enc[i].attn.v = heads \"encoder.layers.{i}.attention.heads.{h}.v\"\n"
     "enc[i].attn.o = linear \"encoder.layers.{i}.attention.output_linear\"\n"
     "enc[i].norm1 = norm \"encoder.layers.{i}.layer_norm_1\"\n"
     "enc[i].norm2 = norm \"encoder.layers.{i}.layer_norm_2\"\n"
     "enc[i].ffn.w1 = linear \"encoder.layers.{i}.feed_forward.linear_1\"\n"
     "enc[i].ffn.w2 = linear \"encoder.layers.{i}.feed_forward.linear_2\"\n"
     "classifier = linear \"classifier\"\n"},
    {"hf-bert", "bert.",
     /* Hugging Face BertForSequenceClassification; root "" for BertModel */
     "embed = tensor \"bert.embeddings.word_embeddings.weight\"\n"
     "pos = tensor \"bert.embeddings.position_embeddings.weight\"\n"
     "token_type = tensor \"bert.embeddings.token_type_embeddings.weight\"\n"
     "embed_norm = norm \"bert.embeddings.LayerNorm\"\n"
     "ignore \"bert.embeddings.position_ids\"\n"
     "enc[i].attn.q = linear \"bert.encoder.layer.{i}.attention.self.query\"\n"
     "enc[i].attn.k = linear \"bert.encoder.layer.{i}.attention.self.key\"\n"
     "enc[i].attn.v = linear \"bert.encoder.layer.{i}.attention.self.value\"\n"
     "enc[i].attn.o = linear \"bert.encoder.layer.{i}.attention.output.dense\"\n"
     "enc[i].norm1 = norm \"bert.encoder.layer.{i}.attention.output.LayerNorm\"\n"
     "enc[i].ffn.w1 = linear \"bert.encoder.layer.{i}.intermediate.dense\"\n"
     "enc[i].ffn.w2 = linear \"bert.encoder.layer.{i}.output.dense\"\n"
     "enc[i].norm2 = norm \"bert.encoder.layer.{i}.output.LayerNorm\"\n"
     "pooler = linear \"bert.pooler.dense\"\n"
     "classifier = linear \"classifier\"\n"},
    {"hf-distilbert", "distilbert.",
     /* Hugging Face DistilBertForMaskedLM / ...ForSequenceClassification;
      * root "" for DistilBertModel. No token types; post-norm. */
     "embed = tensor \"distilbert.embeddings.word_embeddings.weight\"\n"
     "pos = tensor \"distilbert.embeddings.position_embeddings.weight\"\n"
     "embed_norm = norm \"distilbert.embeddings.LayerNorm\"\n"
     "ignore \"distilbert.embeddings.position_ids\"\n"
     "enc[i].attn.q = linear \"distilbert.transformer.layer.{i}.attention.q_lin\"\n"
     "enc[i].attn.k = linear \"distilbert.transformer.layer.{i}.attention.k_lin\"\n"
     "enc[i].attn.v = linear \"distilbert.transformer.layer.{i}.attention.v_lin\"\n"
     "enc[i].attn.o = linear \"distilbert.transformer.layer.{i}.attention.out_lin\"\n"
     "enc[i].norm1 = norm \"distilbert.transformer.layer.{i}.sa_layer_norm\"\n"
     "enc[i].ffn.w1 = linear \"distilbert.transformer.layer.{i}.ffn.lin1\"\n"
     "enc[i].ffn.w2 = linear \"distilbert.transformer.layer.{i}.ffn.lin2\"\n"
     "enc[i].norm2 = norm \"distilbert.transformer.layer.{i}.output_layer_norm\"\n"},
    {"hf-gpt2", "transformer.",
     /* Hugging Face GPT2LMHeadModel: Conv1D weights are [in, out];
      * root "" for GPT2Model */
     "embed = tensor \"transformer.wte.weight\"\n"
     "pos = tensor \"transformer.wpe.weight\"\n"
     "dec[i].norm1 = norm \"transformer.h.{i}.ln_1\"\n"
     "dec[i].attn.qkv = split_conv1d \"transformer.h.{i}.attn.c_attn\"\n"
     "dec[i].attn.o = conv1d \"transformer.h.{i}.attn.c_proj\"\n"
     "dec[i].norm2 = norm \"transformer.h.{i}.ln_2\"\n"
     "dec[i].ffn.w1 = conv1d \"transformer.h.{i}.mlp.c_fc\"\n"
     "dec[i].ffn.w2 = conv1d \"transformer.h.{i}.mlp.c_proj\"\n"
     "dec.norm = norm \"transformer.ln_f\"\n"
     "head = tied \"lm_head.weight\"\n"
     "ignore \"transformer.h.{i}.attn.bias\"\n"
     "ignore \"transformer.h.{i}.attn.masked_bias\"\n"},
};

static const Preset *preset_find(const char *name) {
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
    if (strcmp(presets[i].name, name) == 0) return &presets[i];
  return NULL;
}

const char *spec_preset_text(const char *name) {
  const Preset *p = preset_find(name);
  return p ? p->text : NULL;
}

const char *spec_preset_base(const char *name) {
  const Preset *p = preset_find(name);
  return p ? p->base : NULL;
}

const char *spec_preset_source(Arena *a, const char *name, const char *root,
                               const char *source) {
  const char *base = spec_preset_base(name);
  TFMC_ASSERT(base);
  if (!root) return source;
  size_t n = strlen(base);
  if (strncmp(source, base, n) != 0) return source; /* outside the base model */
  if (n == 0 && !root[0]) return source;
  return arena_printf(a, "%s%s", root, source + n);
}

void spec_preset_names(const char *const **names, int *n) {
  static const char *list[sizeof presets / sizeof presets[0]];
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
    list[i] = presets[i].name;
  *names = list;
  *n = (int)(sizeof presets / sizeof presets[0]);
}
