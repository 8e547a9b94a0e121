/* tests/frontend/test_lower.c — lowering specs to graph IR: the canonical
 * parameter names and shapes, the inputs and outputs of each architecture,
 * the verifier accepting every lowered graph, node locations. */
#include "frontend/spec.h"

#include <criterion/criterion.h>
#include <string.h>

typedef struct Lowered {
  Arena *a;
  Spec *spec;
  IrGraph *g;
  Diags d;
} Lowered;

static Lowered lower_text(const char *text, const char *attention) {
  Lowered L;
  L.a = arena_create();
  diags_init(&L.d, L.a, NULL);
  SrcFile *src = src_file_from_string(L.a, "t.tfm", text);
  diags_add_source(&L.d, src);
  L.spec = spec_parse(L.a, src, &L.d);
  cr_assert(L.spec, "spec does not parse:\n%s", L.d.captured ? L.d.captured : "");
  L.g = spec_lower(L.a, L.spec, &(LowerOptions){attention}, &L.d);
  cr_assert(L.g, "lowering failed:\n%s", L.d.captured ? L.d.captured : "");
  cr_assert(ir_graph_verify(L.g, &L.d), "verifier:\n%s", L.d.captured ? L.d.captured : "");
  return L;
}

static const IrNode *find(const IrGraph *g, IrOp op, const char *name) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == op && strcmp(g->nodes[i].attrs.name, name) == 0) return &g->nodes[i];
  return NULL;
}

static int count_op(const IrGraph *g, IrOp op) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

static void expect_param(const IrGraph *g, const char *name, int64_t d0, int64_t d1) {
  const IrNode *n = find(g, IR_OP_PARAM, name);
  cr_assert(n, "missing param %s", name);
  cr_assert_eq(n->type.rank, d1 ? 2 : 1, "%s rank", name);
  cr_assert_eq(n->type.dims[0].value, d0, "%s dim 0", name);
  if (d1) cr_assert_eq(n->type.dims[1].value, d1, "%s dim 1", name);
}

static const char *seq2seq =
    "model translate {\n"
    "  arch encoder_decoder\n"
    "  vocab src 30 tgt 40\n"
    "  d_model 16\n"
    "  heads 4\n"
    "  layers encoder 2 decoder 1\n"
    "  ffn 24 relu\n"
    "  norm post\n"
    "  position learned max 10\n"
    "  embed_scale sqrt_d_model\n"
    "  tokens pad 1\n"
    "  mask encoder padding\n"
    "  mask decoder causal padding\n"
    "  mask cross padding\n"
    "  head logits\n"
    "}\n";

Test(lower, encoder_decoder_params_and_io) {
  Lowered L = lower_text(seq2seq, NULL);
  const IrGraph *g = L.g;
  expect_param(g, "src_embed.weight", 30, 16);
  expect_param(g, "tgt_embed.weight", 40, 16);
  expect_param(g, "src_pos.weight", 10, 16);
  expect_param(g, "tgt_pos.weight", 10, 16);
  const char *enc[] = {"enc.0", "enc.1"};
  for (int i = 0; i < 2; i++) {
    char n[64];
    const char *lin[] = {"attn.q", "attn.k", "attn.v", "attn.o"};
    for (int k = 0; k < 4; k++) {
      snprintf(n, sizeof n, "%s.%s.weight", enc[i], lin[k]);
      expect_param(g, n, 16, 16);
      snprintf(n, sizeof n, "%s.%s.bias", enc[i], lin[k]);
      expect_param(g, n, 16, 0);
    }
    snprintf(n, sizeof n, "%s.ffn.w1.weight", enc[i]);
    expect_param(g, n, 24, 16);
    snprintf(n, sizeof n, "%s.ffn.w2.weight", enc[i]);
    expect_param(g, n, 16, 24);
    snprintf(n, sizeof n, "%s.norm2.bias", enc[i]);
    expect_param(g, n, 16, 0);
  }
  expect_param(g, "dec.0.cross.q.weight", 16, 16);
  expect_param(g, "dec.0.norm3.weight", 16, 0);
  expect_param(g, "head.weight", 40, 16);
  expect_param(g, "head.bias", 40, 0);
  cr_assert_null(find(g, IR_OP_PARAM, "enc.norm.weight"));
  cr_assert_null(find(g, IR_OP_PARAM, "enc.2.attn.q.weight"));
  cr_assert(find(g, IR_OP_INPUT, "src"));
  cr_assert(find(g, IR_OP_INPUT, "tgt"));
  cr_assert(find(g, IR_OP_INPUT, "src_mask"));
  cr_assert(find(g, IR_OP_INPUT, "tgt_mask"));
  cr_assert_eq(g->n_outputs, 1);
  cr_assert_str_eq(g->outputs[0].name, "logits");
  /* 2 encoder self + 1 decoder self + 1 cross */
  cr_assert_eq(count_op(g, IR_OP_ATTENTION), 4);
  cr_assert_eq(count_op(g, IR_OP_MASK_CAUSAL), 1);
  cr_assert_eq(count_op(g, IR_OP_LAYERNORM), 2 * 2 + 3);
  /* logits [B,T,40] */
  const IrNode *out = &g->nodes[g->outputs[0].value];
  cr_assert_eq(out->type.rank, 3);
  cr_assert_str_eq(g->syms[out->type.dims[0].sym].name, "B");
  cr_assert_str_eq(g->syms[out->type.dims[1].sym].name, "T");
  cr_assert_eq(out->type.dims[2].value, 40);
  /* every node remembers a spec line */
  for (int i = 0; i < g->n_nodes; i++) {
    cr_assert(g->nodes[i].loc.file && g->nodes[i].loc.line > 0, "node %d has no location", i);
  }
  arena_destroy(L.a);
}

Test(lower, attention_output_requested) {
  Lowered L = lower_text(seq2seq, "decoder.0.cross");
  cr_assert_eq(L.g->n_outputs, 2);
  cr_assert_str_eq(L.g->outputs[1].name, "attention");
  const IrNode *p = &L.g->nodes[L.g->outputs[1].value];
  cr_assert_eq(p->op, IR_OP_ATTN_PROBS);
  cr_assert_eq(p->type.dims[1].value, 4); /* heads */
  cr_assert_eq(count_op(L.g, IR_OP_ATTENTION), 3);
  arena_destroy(L.a);

  Lowered M;
  M.a = arena_create();
  diags_init(&M.d, M.a, NULL);
  SrcFile *src = src_file_from_string(M.a, "t.tfm", seq2seq);
  M.spec = spec_parse(M.a, src, &M.d);
  cr_assert(M.spec);
  cr_assert_null(spec_lower(M.a, M.spec, &(LowerOptions){"decoder.1"}, &M.d));
  cr_assert_null(spec_lower(M.a, M.spec, &(LowerOptions){"encoder.0.cross"}, &M.d));
  cr_assert_null(spec_lower(M.a, M.spec, &(LowerOptions){"bogus"}, &M.d));
  cr_assert_eq(M.d.n_errors, 3);
  arena_destroy(M.a);
}

/* "all": every attention layer's probabilities, named by layer, after the
 * head's output, in forward order; no fused attention left. */
Test(lower, attention_all_layers) {
  Lowered L = lower_text(seq2seq, "all");
  static const char *const names[] = {"logits", "attention.encoder.0", "attention.encoder.1",
                                      "attention.decoder.0", "attention.decoder.0.cross"};
  cr_assert_eq(L.g->n_outputs, 5);
  for (int i = 0; i < 5; i++) cr_assert_str_eq(L.g->outputs[i].name, names[i]);
  for (int i = 1; i < 5; i++) {
    const IrNode *p = &L.g->nodes[L.g->outputs[i].value];
    cr_assert_eq(p->op, IR_OP_ATTN_PROBS, "%s", names[i]);
    cr_assert_eq(p->type.rank, 4);
    cr_assert_eq(p->type.dims[1].value, 4); /* heads */
  }
  /* cross attention: queries from the target (T), keys from the source (S) */
  const IrType *t = &L.g->nodes[L.g->outputs[4].value].type;
  cr_assert_str_eq(L.g->syms[t->dims[2].sym].name, "T");
  cr_assert_str_eq(L.g->syms[t->dims[3].sym].name, "S");
  cr_assert_eq(count_op(L.g, IR_OP_ATTENTION), 0);
  cr_assert_eq(count_op(L.g, IR_OP_ATTN_MIX), 4);
  arena_destroy(L.a);

  /* 40 + 40 + 40 layers: more outputs than a compiled model can have */
  Lowered M;
  M.a = arena_create();
  diags_init(&M.d, M.a, NULL);
  const char *big = "model big {\n  arch encoder_decoder\n  vocab src 30 tgt 40\n  d_model 16\n"
                    "  heads 4\n  layers encoder 40 decoder 40\n  ffn 24 relu\n"
                    "  position sinusoidal max 10\n  head logits\n}\n";
  M.spec = spec_parse(M.a, src_file_from_string(M.a, "t.tfm", big), &M.d);
  cr_assert(M.spec, "%s", M.d.captured ? M.d.captured : "");
  cr_assert_null(spec_lower(M.a, M.spec, &(LowerOptions){"all"}, &M.d));
  cr_assert(strstr(M.d.captured, "120 attention layers"), "%s", M.d.captured);
  arena_destroy(M.a);
}

Test(lower, gpt2_tied_head_and_final_norm) {
  Lowered L = lower_text("model gpt {\n"
                         "  arch decoder\n"
                         "  vocab 50\n"
                         "  d_model 16\n"
                         "  heads 2\n"
                         "  layers 2\n"
                         "  ffn 64 gelu_tanh\n"
                         "  norm pre\n"
                         "  final_norm yes\n"
                         "  position learned max 32\n"
                         "  head logits tied\n"
                         "}\n",
                         NULL);
  const IrGraph *g = L.g;
  expect_param(g, "embed.weight", 50, 16);
  expect_param(g, "pos.weight", 32, 16);
  expect_param(g, "dec.1.norm2.weight", 16, 0);
  expect_param(g, "dec.norm.weight", 16, 0);
  cr_assert_null(find(g, IR_OP_PARAM, "head.weight"));
  cr_assert_null(find(g, IR_OP_PARAM, "dec.0.norm3.weight"));
  cr_assert_null(find(g, IR_OP_PARAM, "dec.0.cross.q.weight"));
  cr_assert_null(find(g, IR_OP_INPUT, "mask"));
  cr_assert_eq(count_op(g, IR_OP_GELU_TANH), 2);
  /* the head is linear(x, embed.weight) */
  const IrNode *out = &g->nodes[g->outputs[0].value];
  cr_assert_eq(out->op, IR_OP_LINEAR);
  cr_assert_eq(out->n_operands, 2);
  cr_assert_str_eq(g->nodes[out->operands[1]].attrs.name, "embed.weight");
  arena_destroy(L.a);
}

Test(lower, bert_classifier_with_pooler) {
  Lowered L = lower_text("model bert {\n"
                         "  arch encoder\n"
                         "  vocab 100\n"
                         "  d_model 32\n"
                         "  heads 4\n"
                         "  layers 1\n"
                         "  ffn 64 gelu\n"
                         "  norm post eps 1e-12\n"
                         "  position learned max 20\n"
                         "  embed_norm eps 1e-12\n"
                         "  token_types 2\n"
                         "  mask encoder padding\n"
                         "  head classifier 3 pooler\n"
                         "}\n",
                         NULL);
  const IrGraph *g = L.g;
  expect_param(g, "token_type.weight", 2, 32);
  expect_param(g, "embed_norm.weight", 32, 0);
  expect_param(g, "pooler.weight", 32, 32);
  expect_param(g, "classifier.weight", 3, 32);
  expect_param(g, "classifier.bias", 3, 0);
  cr_assert(find(g, IR_OP_INPUT, "token_types"));
  cr_assert(find(g, IR_OP_INPUT, "mask"));
  cr_assert_str_eq(g->outputs[0].name, "class_logits");
  cr_assert_eq(count_op(g, IR_OP_TAKE), 1);
  cr_assert_eq(count_op(g, IR_OP_TANH), 1);
  const IrNode *ln = NULL;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_LAYERNORM) ln = &g->nodes[i];
  cr_assert(ln);
  cr_assert_float_eq(ln->attrs.eps, 1e-12, 1e-20);
  arena_destroy(L.a);
}

Test(lower, annotated_sinusoidal_unbiased_log_softmax) {
  Lowered L = lower_text("model annotated {\n"
                         "  arch encoder_decoder\n"
                         "  vocab 20\n"
                         "  d_model 16\n"
                         "  heads 2\n"
                         "  layers 1\n"
                         "  ffn 32 relu\n"
                         "  norm pre eps 1e-6 unbiased_std\n"
                         "  final_norm yes\n"
                         "  position sinusoidal\n"
                         "  embed_scale sqrt_d_model\n"
                         "  tokens pad 0\n"
                         "  mask encoder padding\n"
                         "  mask decoder causal padding\n"
                         "  mask cross padding\n"
                         "  head log_softmax\n"
                         "}\n",
                         NULL);
  const IrGraph *g = L.g;
  cr_assert_eq(count_op(g, IR_OP_SINUSOID), 2);
  cr_assert_eq(count_op(g, IR_OP_LOG_SOFTMAX), 1);
  cr_assert_str_eq(g->outputs[0].name, "log_probs");
  expect_param(g, "enc.norm.weight", 16, 0);
  expect_param(g, "dec.norm.weight", 16, 0);
  cr_assert_null(find(g, IR_OP_PARAM, "src_pos.weight"));
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_LAYERNORM) cr_assert(g->nodes[i].attrs.unbiased);
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_SCALE) cr_assert_float_eq(g->nodes[i].attrs.factor, 4.0, 1e-12);
  arena_destroy(L.a);
}

/* Generation's step graph with one decoder layer's attention: the last
 * query row of its probabilities, [B,H,S] for cross-attention over the
 * source, [B,H,L] for self-attention over the cache; the head's output
 * stays first (the stepper reads the logits there). */
Test(lower, step_graph_attention_is_the_last_query_row) {
  static const char *const layers[] = {"decoder.0.cross", "decoder.0"};
  static const char *const keys[] = {"S", "L"};
  for (int i = 0; i < 2; i++) {
    Arena *a = arena_create();
    Diags d;
    diags_init(&d, a, NULL);
    SrcFile *src = src_file_from_string(a, "t.tfm", seq2seq);
    diags_add_source(&d, src);
    Spec *spec = spec_parse(a, src, &d);
    cr_assert(spec);
    IrGraph *g = spec_lower(a, spec, &(LowerOptions){.attention_layer = layers[i], .step = true}, &d);
    cr_assert(g, "%s", d.captured ? d.captured : "");
    cr_assert(ir_graph_verify(g, &d), "%s", d.captured ? d.captured : "");
    cr_assert_eq(g->n_outputs, 2);
    cr_assert_str_eq(g->outputs[0].name, "logits");
    cr_assert_str_eq(g->outputs[1].name, "attention");
    const IrNode *t = &g->nodes[g->outputs[1].value];
    cr_assert_eq(t->op, IR_OP_TAKE);
    cr_assert(t->attrs.axis == 2 && t->attrs.index == -1);
    cr_assert_eq(g->nodes[t->operands[0]].op, IR_OP_ATTN_PROBS);
    cr_assert_eq(t->type.rank, 3);
    cr_assert_str_eq(g->syms[t->type.dims[0].sym].name, "B");
    cr_assert_eq(t->type.dims[1].value, 4);
    cr_assert_str_eq(g->syms[t->type.dims[2].sym].name, keys[i], "%s", layers[i]);
    arena_destroy(a);
  }
  /* refused: every layer at once, encoder layers, a layer the model lacks,
   * the encode graph */
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  Spec *spec = spec_parse(a, src_file_from_string(a, "t.tfm", seq2seq), &d);
  cr_assert(spec);
  static const char *const bad[] = {"all", "encoder.0", "decoder.1", "decoder.0.self"};
  for (int i = 0; i < 4; i++)
    cr_assert_null(spec_lower(a, spec, &(LowerOptions){.attention_layer = bad[i], .step = true}, &d),
                   "%s", bad[i]);
  cr_assert_null(spec_lower(a, spec, &(LowerOptions){.attention_layer = "decoder.0", .encode = true}, &d));
  cr_assert_eq(d.n_errors, 5);
  cr_assert(strstr(d.captured, "--attention encoder.0 with generation: give one decoder layer of "
                               "model 'translate' (decoder.N, or decoder.N.cross for the "
                               "cross-attention over the source, N from 0 to 0)"),
            "%s", d.captured);
  arena_destroy(a);
}
