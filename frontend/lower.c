/* frontend/lower.c — a checked model spec becomes graph IR.
 *
 * The forward pass reads like the model (README "The forward pass"):
 *
 *   x = embed(tokens) * embed_scale (+ token_type_embed) + positions
 *   x = embed_norm(x)
 *   encoder layers, pre-norm  x = x + attn(norm1(x)); x = x + ffn(norm2(x))
 *                   post-norm x = norm1(x + attn(x)); x = norm2(x + ffn(x))
 *   decoder layers add cross-attention over the encoder output (memory)
 *   final norms, head
 *
 * Invariants: parameter names are the canonical ones of README ("Canonical
 * parameter names"), built once each; every node carries the location of
 * the spec line that asked for it; shapes are symbolic in B (batch), S
 * (source / encoder length) and T (target / decoder length). */
#include "frontend/spec.h"
#include "runtime/rt_model.h" /* RT_MAX_IO: outputs a compiled model can have */

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct Lower {
  IrGraph *g;
  const ModelSpec *m;
  const LowerOptions *opt;
  int sym_b;
  int64_t d;             /* d_model */
  const char *attn_want; /* requested attention layer, or NULL */
  bool attn_all;         /* --attention all: every layer's probabilities */
  int attn_probs;        /* value id of the requested layer's probabilities, or -1 */
  int n_attn;            /* attn_all: probabilities recorded so far */
  int *attn_values;      /* attn_all: their value ids, in forward order */
  const char **attn_names; /* attn_all: "attention.LAYER" of each */
  int sym_l;             /* step graph: the symbol L (past + new tokens), else -1 */
  int positions;         /* decoder step graph: the input "positions" i32[B,T] (each row's
                            own positions: left padding), else -1 */
  /* encoder_decoder step graph: per decoder layer the inputs holding the
   * cross-attention keys / values the encode graph computed, else NULL */
  int *cross_k, *cross_v;
  /* named intermediates (LowerOptions.outputs), in forward order */
  struct Named {
    const char *name;
    int value;
  } *named;
  int n_named, cap_named;
} Lower;

/* Records value as the intermediate `name` (LowerOptions.outputs). */
static void name_value(Lower *L, const char *name, int value) {
  arena_grow(L->g->arena, (void **)&L->named, &L->cap_named, L->n_named + 1, sizeof *L->named);
  L->named[L->n_named].name = name;
  L->named[L->n_named++].value = value;
}

static IrLoc pick(const ModelSpec *m, IrLoc l) { return l.file ? l : m->loc; }

static IrAttrs no_attrs(void) {
  IrAttrs a;
  memset(&a, 0, sizeof a);
  return a;
}

static int param(Lower *L, const char *name, IrType t, IrLoc loc) {
  return ir_build_param(L->g, name, t, loc);
}

static int op1(Lower *L, IrOp op, int x, IrLoc loc) {
  return ir_build(L->g, op, (int[]){x}, 1, NULL, loc);
}

static int op2(Lower *L, IrOp op, int a, int b, IrLoc loc) {
  return ir_build(L->g, op, (int[]){a, b}, 2, NULL, loc);
}

/* x (..., in) -> (..., out): x W^T + b, W [out,in] named PREFIX.weight */
static int linear(Lower *L, int x, const char *prefix, int64_t out, int64_t in,
                  bool bias, IrLoc loc) {
  Arena *a = L->g->arena;
  int w = param(L, arena_printf(a, "%s.weight", prefix), ir_type2(IR_F32, out, in), loc);
  if (!bias) return op2(L, IR_OP_LINEAR, x, w, loc);
  int b = param(L, arena_printf(a, "%s.bias", prefix), ir_type1(IR_F32, out), loc);
  return ir_build(L->g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, loc);
}

/* layernorm over d_model with the model's flavour */
static int norm(Lower *L, int x, const char *prefix, double eps, bool unbiased,
                IrLoc loc) {
  Arena *a = L->g->arena;
  int gw = param(L, arena_printf(a, "%s.weight", prefix), ir_type1(IR_F32, L->d), loc);
  int gb = param(L, arena_printf(a, "%s.bias", prefix), ir_type1(IR_F32, L->d), loc);
  IrAttrs at = no_attrs();
  at.eps = eps;
  at.unbiased = unbiased;
  return ir_build(L->g, IR_OP_LAYERNORM, (int[]){x, gw, gb}, 3, &at, loc);
}

static int layer_norm(Lower *L, int x, const char *prefix) {
  return norm(L, x, prefix, L->m->norm_eps, L->m->norm_unbiased,
              pick(L->m, L->m->loc_norm));
}

/* Multi-head attention: softmax(q k^T / sqrt(d_head) + mask) v, projected.
 * xq f32[B,Tq,d], xkv f32[B,Tk,d], mask bool[B|1,Tq|1,Tk] or -1. */
static int attention(Lower *L, int xq, int xkv, int mask, const char *prefix,
                     const char *layer_name, int k_given, int v_given) {
  const ModelSpec *m = L->m;
  Arena *a = L->g->arena;
  IrLoc loc = pick(m, m->loc_heads);
  int q = linear(L, xq, arena_printf(a, "%s.q", prefix), L->d, L->d, true, loc);
  /* k_given / v_given >= 0: keys and values computed once per source by the
   * encode graph (cross-attention in a step graph) */
  int k = k_given >= 0 ? k_given : linear(L, xkv, arena_printf(a, "%s.k", prefix), L->d, L->d, true, loc);
  int v = v_given >= 0 ? v_given : linear(L, xkv, arena_printf(a, "%s.v", prefix), L->d, L->d, true, loc);
  if (L->sym_l >= 0 && k_given < 0) { /* step graph: attend over the cache, this step appended */
    IrType tc = ir_type(IR_F32, 3, (IrDim[]){IR_CONST(L->g->syms[L->sym_b].max), IR_CONST(m->max_tgt), IR_CONST(L->d)});
    IrType tv = ir_type(IR_F32, 3, (IrDim[]){IR_SYM(L->sym_b), IR_SYM(L->sym_l), IR_CONST(L->d)});
    IrAttrs sa = no_attrs();
    sa.name = arena_printf(a, "cache.%s.k", layer_name);
    int ck = ir_build_typed(L->g, IR_OP_STATE, NULL, 0, &sa, tc, loc);
    sa.name = arena_printf(a, "cache.%s.v", layer_name);
    int cv = ir_build_typed(L->g, IR_OP_STATE, NULL, 0, &sa, tc, loc);
    k = ir_build_typed(L->g, IR_OP_KV_APPEND, (int[]){ck, k}, 2, NULL, tv, loc);
    v = ir_build_typed(L->g, IR_OP_KV_APPEND, (int[]){cv, v}, 2, NULL, tv, loc);
  }
  IrAttrs at = no_attrs();
  at.heads = (int)m->heads;
  at.scale = 1.0 / sqrt((double)(L->d / m->heads));
  int ops[4] = {q, k, v, mask};
  int ctx;
  if (L->attn_all || (L->attn_want && strcmp(L->attn_want, layer_name) == 0)) {
    int pops[3] = {q, k, mask};
    int p = ir_build(L->g, IR_OP_ATTN_PROBS, pops, mask >= 0 ? 3 : 2, &at, loc);
    IrAttrs mix = no_attrs();
    mix.heads = at.heads;
    ctx = ir_build(L->g, IR_OP_ATTN_MIX, (int[]){p, v}, 2, &mix, loc);
    if (L->attn_all) {
      L->attn_names[L->n_attn] = arena_printf(a, "attention.%s", layer_name);
      L->attn_values[L->n_attn++] = p;
    } else {
      L->attn_probs = p;
    }
  } else {
    ctx = ir_build(L->g, IR_OP_ATTENTION, ops, mask >= 0 ? 4 : 3, &at, loc);
  }
  return linear(L, ctx, arena_printf(a, "%s.o", prefix), L->d, L->d, true, loc);
}

/* w2(act(w1 x)) */
static int ffn(Lower *L, int x, const char *prefix) {
  const ModelSpec *m = L->m;
  Arena *a = L->g->arena;
  IrLoc loc = pick(m, m->loc_ffn);
  int h = linear(L, x, arena_printf(a, "%s.w1", prefix), m->d_ff, L->d, true, loc);
  IrOp act = IR_OP_RELU;
  switch (m->act) {
  case ACT_RELU: act = IR_OP_RELU; break;
  case ACT_GELU: act = IR_OP_GELU; break;
  case ACT_GELU_TANH: act = IR_OP_GELU_TANH; break;
  case ACT_COUNT: TFMC_ASSERT(!"activation");
  }
  h = op1(L, act, h, loc);
  return linear(L, h, arena_printf(a, "%s.w2", prefix), L->d, m->d_ff, true, loc);
}

/* One residual sublayer, pre- or post-norm: f is applied by the caller
 * between the two halves, so this is split into before/after. */
static int sub_in(Lower *L, int x, const char *norm_prefix) {
  return L->m->norm == NORM_PRE ? layer_norm(L, x, norm_prefix) : x;
}

static int sub_out(Lower *L, int x, int fx, const char *norm_prefix) {
  int y = op2(L, IR_OP_ADD, x, fx, pick(L->m, L->m->loc_layers));
  return L->m->norm == NORM_POST ? layer_norm(L, y, norm_prefix) : y;
}

/* tokens i32[B,len] -> f32[B,len,d] with positions, token types, embed norm.
 * side: "" for single-stack models, "src_" / "tgt_" for encoder_decoder. */
static int embeddings(Lower *L, int ids, int types, int64_t vocab, int len_sym,
                      const char *side, int *embed_param) {
  const ModelSpec *m = L->m;
  Arena *a = L->g->arena;
  IrLoc vloc = pick(m, m->loc_vocab);
  int table = param(L, arena_printf(a, "%sembed.weight", side), ir_type2(IR_F32, vocab, L->d), vloc);
  *embed_param = table;
  int x = op2(L, IR_OP_EMBED, table, ids, vloc);
  if (m->embed_scale != 1.0) {
    IrAttrs at = no_attrs();
    at.factor = m->embed_scale;
    x = ir_build(L->g, IR_OP_SCALE, (int[]){x}, 1, &at, vloc);
  }
  if (types >= 0) {
    int tt = param(L, "token_type.weight", ir_type2(IR_F32, m->token_types, L->d), m->loc);
    x = op2(L, IR_OP_ADD, x, op2(L, IR_OP_EMBED, tt, types, m->loc), m->loc);
  }
  IrLoc ploc = pick(m, m->loc_position);
  if (m->pos != POS_NONE) {
    int pos;
    if (L->positions >= 0) { /* decoder step: each row's positions, given */
      pos = L->positions;
    } else if (L->sym_l >= 0) { /* step: positions P..L-1, the last T of 0..L-1 */
      int all = ir_build_typed(L->g, IR_OP_ARANGE, NULL, 0, NULL,
                               ir_type(IR_I32, 1, (IrDim[]){IR_SYM(L->sym_l)}), ploc);
      IrAttrs ta = no_attrs();
      pos = ir_build_typed(L->g, IR_OP_TAIL, (int[]){all}, 1, &ta,
                           ir_type(IR_I32, 1, (IrDim[]){IR_SYM(len_sym)}), ploc);
    } else {
      pos = ir_build_typed(L->g, IR_OP_ARANGE, NULL, 0, NULL,
                           ir_type(IR_I32, 1, (IrDim[]){IR_SYM(len_sym)}), ploc);
    }
    int pe;
    if (m->pos == POS_LEARNED) {
      int pt = param(L, arena_printf(a, "%spos.weight", side), ir_type2(IR_F32, m->pos_max, L->d), ploc);
      pe = op2(L, IR_OP_EMBED, pt, pos, ploc);
    } else {
      IrType pt = L->g->nodes[pos].type;
      pt.dtype = IR_F32;
      pt.dims[pt.rank++] = IR_CONST(L->d);
      pe = ir_build_typed(L->g, IR_OP_SINUSOID, (int[]){pos}, 1, NULL, pt, ploc);
    }
    x = op2(L, IR_OP_ADD, x, pe, ploc);
  }
  if (m->embed_norm)
    x = norm(L, x, arena_printf(a, "%sembed_norm", side), m->embed_norm_eps, false,
             pick(m, m->loc_embed_norm));
  name_value(L, arena_printf(a, "%sembeddings", side), x);
  return x;
}

/* bool[B,len] key mask input -> bool[B,1,len] */
static int key_mask(Lower *L, int mask_in, int len_sym, IrLoc loc) {
  IrType t = ir_type(IR_BOOL, 3, (IrDim[]){IR_SYM(L->sym_b), IR_CONST(1), IR_SYM(len_sym)});
  return ir_build_typed(L->g, IR_OP_RESHAPE, (int[]){mask_in}, 1, NULL, t, loc);
}

static int encoder(Lower *L, int x, int mask) {
  const ModelSpec *m = L->m;
  Arena *a = L->g->arena;
  for (int64_t i = 0; i < m->layers_enc; i++) {
    const char *p = arena_printf(a, "enc.%lld", (long long)i);
    const char *n1 = arena_printf(a, "%s.norm1", p), *n2 = arena_printf(a, "%s.norm2", p);
    int h = sub_in(L, x, n1);
    h = attention(L, h, h, mask, arena_printf(a, "%s.attn", p),
                  arena_printf(a, "encoder.%lld", (long long)i), -1, -1);
    x = sub_out(L, x, h, n1);
    h = ffn(L, sub_in(L, x, n2), arena_printf(a, "%s.ffn", p));
    x = sub_out(L, x, h, n2);
    name_value(L, arena_printf(a, "%s.out", p), x);
  }
  if (m->final_norm_enc) x = layer_norm(L, x, "enc.norm");
  name_value(L, "encoder.out", x);
  return x;
}

/* memory < 0 and no L->cross_k: decoder-only (no cross-attention) */
static int decoder(Lower *L, int y, int self_mask, int memory, int cross_mask) {
  const ModelSpec *m = L->m;
  Arena *a = L->g->arena;
  for (int64_t i = 0; i < m->layers_dec; i++) {
    const char *p = arena_printf(a, "dec.%lld", (long long)i);
    const char *n1 = arena_printf(a, "%s.norm1", p), *n2 = arena_printf(a, "%s.norm2", p);
    int h = sub_in(L, y, n1);
    h = attention(L, h, h, self_mask, arena_printf(a, "%s.attn", p),
                  arena_printf(a, "decoder.%lld", (long long)i), -1, -1);
    y = sub_out(L, y, h, n1);
    const char *nf = n2;
    if (memory >= 0 || L->cross_k) {
      h = sub_in(L, y, n2);
      h = attention(L, h, memory, cross_mask, arena_printf(a, "%s.cross", p),
                    arena_printf(a, "decoder.%lld.cross", (long long)i),
                    L->cross_k ? L->cross_k[i] : -1, L->cross_v ? L->cross_v[i] : -1);
      y = sub_out(L, y, h, n2);
      nf = arena_printf(a, "%s.norm3", p);
    }
    h = ffn(L, sub_in(L, y, nf), arena_printf(a, "%s.ffn", p));
    y = sub_out(L, y, h, nf);
    name_value(L, arena_printf(a, "%s.out", p), y);
  }
  if (m->final_norm_dec) y = layer_norm(L, y, "dec.norm");
  name_value(L, "decoder.out", y);
  return y;
}

static void head(Lower *L, int x, int embed_param, int64_t vocab) {
  const ModelSpec *m = L->m;
  IrLoc loc = pick(m, m->loc_head);
  IrGraph *g = L->g;
  if (L->sym_l < 0) name_value(L, "hidden", x);
  switch (m->head) {
  case HEAD_NONE:
    ir_graph_add_output(g, "hidden", x);
    if (m->pooler) { /* head pooler: BertModel's pooled output too */
      IrAttrs at = no_attrs();
      at.axis = 1;
      at.index = 0;
      int first = ir_build(g, IR_OP_TAKE, (int[]){x}, 1, &at, loc); /* [B,d] */
      int pooled = op1(L, IR_OP_TANH, linear(L, first, "pooler", L->d, L->d, true, loc), loc);
      name_value(L, "pooled", pooled);
      ir_graph_add_output(g, "pooled", pooled);
    }
    return;
  case HEAD_LOGITS:
  case HEAD_LOG_SOFTMAX: {
    int y;
    if (L->sym_l >= 0) { /* step: the last position only, [B,D] */
      IrAttrs ta = no_attrs();
      ta.axis = 1;
      ta.index = -1;
      x = ir_build(g, IR_OP_TAKE, (int[]){x}, 1, &ta, loc);
    }
    if (m->head_tied) y = op2(L, IR_OP_LINEAR, x, embed_param, loc);
    else y = linear(L, x, "head", vocab, L->d, m->head_bias, loc);
    if (m->head == HEAD_LOG_SOFTMAX)
      ir_graph_add_output(g, "log_probs", op1(L, IR_OP_LOG_SOFTMAX, y, loc));
    else
      ir_graph_add_output(g, "logits", y);
    return;
  }
  case HEAD_CLASSIFIER: {
    IrAttrs at = no_attrs();
    at.axis = 1;
    at.index = 0;
    int first = ir_build(g, IR_OP_TAKE, (int[]){x}, 1, &at, loc); /* [B,d] */
    if (m->pooler) {
      first = op1(L, IR_OP_TANH, linear(L, first, "pooler", L->d, L->d, true, loc), loc);
      name_value(L, "pooled", first);
    }
    int y = linear(L, first, "classifier", m->n_classes, L->d, m->head_bias, loc);
    ir_graph_add_output(g, "class_logits", y);
    return;
  }
  case HEAD_KIND_COUNT:
    break;
  }
  TFMC_ASSERT(!"head kind");
}

/* "X.N.out" -> the length of "X." and N; false for other names */
static bool layer_out_name(const char *name, int *prefix, long long *n) {
  const char *dot = strchr(name, '.');
  int end = 0;
  if (!dot || sscanf(dot + 1, "%lld.out%n", n, &end) != 1 || dot[1 + end] != 0) return false;
  *prefix = (int)(dot - name) + 1;
  return true;
}

/* The named intermediates as one line, runs of layers collapsed:
 * "embeddings, enc.0.out .. enc.11.out, encoder.out, hidden". */
static const char *named_list(const Lower *L) {
  Arena *a = L->g->arena;
  const char *s = "";
  for (int i = 0; i < L->n_named;) {
    int pre, pre2, j = i + 1;
    long long n, n2;
    if (layer_out_name(L->named[i].name, &pre, &n))
      while (j < L->n_named && layer_out_name(L->named[j].name, &pre2, &n2) && pre2 == pre &&
             strncmp(L->named[j].name, L->named[i].name, (size_t)pre) == 0 && n2 == n + (j - i))
        j++;
    else
      j = i + 1;
    const char *sep = *s ? ", " : "";
    if (j - i >= 3)
      s = arena_printf(a, "%s%s%s .. %s", s, sep, L->named[i].name, L->named[j - 1].name);
    else if (j - i == 2)
      s = arena_printf(a, "%s%s%s, %s", s, sep, L->named[i].name, L->named[i + 1].name);
    else
      s = arena_printf(a, "%s%s%s", s, sep, L->named[i].name);
    i = j;
  }
  return s;
}

/* LowerOptions.outputs: each named intermediate asked for becomes an
 * output (once; not again when the head outputs it under that name). */
static bool named_outputs(Lower *L, Diags *d) {
  const LowerOptions *opt = L->opt;
  IrGraph *g = L->g;
  bool ok = true;
  for (int i = 0; opt && i < opt->n_outputs; i++) {
    const char *want = opt->outputs[i];
    int k = 0;
    while (k < L->n_named && strcmp(L->named[k].name, want) != 0) k++;
    if (k == L->n_named) {
      diag_error(d, (IrLoc){0}, "--output %s: model '%s' has no intermediate named '%s' (it has: %s)",
                 want, L->m->name, want, named_list(L));
      ok = false;
      continue;
    }
    bool have = false;
    for (int o = 0; o < g->n_outputs; o++) have |= strcmp(g->outputs[o].name, want) == 0;
    if (have) continue;
    if (g->n_outputs == RT_MAX_IO) {
      diag_error(d, (IrLoc){0},
                 "--output %s: more outputs than a compiled model can have (%d)", want, RT_MAX_IO);
      return false;
    }
    ir_graph_add_output(g, want, L->named[k].value);
  }
  return ok;
}

static bool layer_exists(const ModelSpec *m, const char *name) {
  long long i;
  int n = 0;
  char tail[16] = {0};
  if (sscanf(name, "encoder.%lld%n", &i, &n) == 1 && name[n] == 0)
    return m->arch != ARCH_DECODER && i >= 0 && i < m->layers_enc;
  if (sscanf(name, "decoder.%lld%n", &i, &n) == 1) {
    if (m->arch == ARCH_ENCODER || i < 0 || i >= m->layers_dec) return false;
    if (name[n] == 0) return true;
    snprintf(tail, sizeof tail, "%s", name + n);
    return strcmp(tail, ".cross") == 0 && m->arch == ARCH_ENCODER_DECODER;
  }
  return false;
}

/* Attention layers of the model: self-attention per encoder and decoder
 * layer, plus cross-attention per decoder layer of an encoder-decoder. */
static int64_t attention_layers(const ModelSpec *m) {
  int64_t enc = m->arch == ARCH_DECODER ? 0 : m->layers_enc;
  int64_t dec = m->arch == ARCH_ENCODER ? 0 : m->layers_dec;
  return enc + dec * (m->arch == ARCH_ENCODER_DECODER ? 2 : 1);
}

IrGraph *spec_lower(Arena *a, const Spec *spec, const LowerOptions *opt,
                    Diags *d) {
  const ModelSpec *m = spec->model;
  bool all = opt && opt->attention_layer && strcmp(opt->attention_layer, "all") == 0;
  int64_t n_layers = attention_layers(m);
  if (all && 1 + n_layers > RT_MAX_IO) {
    diag_error(d, (IrLoc){0},
               "--attention all: model '%s' has %lld attention layers, more outputs than a "
               "compiled model can have (%d); ask for one layer",
               m->name, (long long)n_layers, RT_MAX_IO);
    return NULL;
  }
  /* generation: one decoder layer, whose attention each step computes */
  if (opt && opt->step && opt->attention_layer && m->arch != ARCH_ENCODER &&
      (all || strncmp(opt->attention_layer, "decoder.", 8) != 0 ||
       !layer_exists(m, opt->attention_layer))) {
    diag_error(d, (IrLoc){0},
               "--attention %s with generation: give one decoder layer of model '%s' "
               "(decoder.N%s, N from 0 to %lld)",
               opt->attention_layer, m->name,
               m->arch == ARCH_ENCODER_DECODER
                   ? ", or decoder.N.cross for the cross-attention over the source"
                   : "",
               (long long)m->layers_dec - 1);
    return NULL;
  }
  if (opt && opt->attention_layer && !all && !layer_exists(m, opt->attention_layer)) {
    diag_error(d, (IrLoc){0},
               "--attention %s: model '%s' has no such attention layer (use "
               "encoder.N, decoder.N or decoder.N.cross with N from 0, or all)",
               opt->attention_layer, m->name);
    return NULL;
  }
  bool step = opt && opt->step, encode = opt && opt->encode;
  if ((step || encode) && m->arch == ARCH_ENCODER) {
    diag_error(d, pick(m, m->loc_arch),
               "generation: model '%s' is an encoder, which does not generate (arch decoder or "
               "encoder_decoder do)", m->name);
    return NULL;
  }
  if (encode && (step || m->arch != ARCH_ENCODER_DECODER)) {
    diag_error(d, pick(m, m->loc_arch),
               "generation: model '%s' has no encoder to run once per source (arch "
               "encoder_decoder has)", m->name);
    return NULL;
  }
  if (step && m->head != HEAD_LOGITS && m->head != HEAD_LOG_SOFTMAX) {
    diag_error(d, pick(m, m->loc_head),
               "generation: model '%s' has no language-model head (head logits or "
               "log_softmax)", m->name);
    return NULL;
  }
  if (encode && opt->attention_layer) {
    diag_error(d, (IrLoc){0}, "--attention: the encode graph of generation draws no attention "
               "(ask the step graph for a decoder layer)");
    return NULL;
  }
  if ((step || encode) && opt->n_outputs) {
    diag_error(d, (IrLoc){0}, "--output is not available with generation yet");
    return NULL;
  }
  Lower L = {0};
  L.sym_l = -1;
  L.positions = -1;
  L.g = ir_graph_create(a, m->name);
  L.g->pad_id = m->pad_id;
  L.m = m;
  L.opt = opt;
  L.d = m->d_model;
  L.attn_all = all;
  L.attn_want = opt && !all ? opt->attention_layer : NULL;
  L.attn_probs = -1;
  if (all) {
    L.attn_values = arena_alloc(a, (size_t)(n_layers + 1) * sizeof *L.attn_values);
    L.attn_names = arena_alloc(a, (size_t)(n_layers + 1) * sizeof *L.attn_names);
  }
  IrGraph *g = L.g;
  int64_t max_batch = m->max_batch;
  if (step || encode) max_batch = opt->step_max_batch > 0 ? opt->step_max_batch : 1;
  L.sym_b = ir_graph_add_symbol(g, "B", max_batch);
  IrLoc aloc = pick(m, m->loc_arch), mloc = pick(m, m->loc_mask);

  if (m->arch == ARCH_ENCODER) {
    int S = ir_graph_add_symbol(g, "S", m->max_src);
    IrType ti = ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)});
    int tokens = ir_build_input(g, "tokens", ti, aloc);
    int types = m->token_types > 0 ? ir_build_input(g, "token_types", ti, m->loc) : -1;
    int mask = -1;
    if (m->mask_enc_padding) {
      IrType tm = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)});
      mask = key_mask(&L, ir_build_input(g, "mask", tm, mloc), S, mloc);
    }
    int ep;
    int x = embeddings(&L, tokens, types, m->vocab_src, S, "", &ep);
    x = encoder(&L, x, mask);
    head(&L, x, ep, m->vocab_src);
  } else if (m->arch == ARCH_DECODER && step) {
    int T = ir_graph_add_symbol(g, "T", m->max_tgt);
    L.sym_l = ir_graph_add_symbol(g, "L", m->max_tgt);
    IrType ti = ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(T)});
    int tokens = ir_build_input(g, "tokens", ti, aloc);
    /* a batch of left-padded prompts (HF's generate): row b's pads are
     * masked out of every query by "mask" bool[B,L] (1 = real token), and
     * its tokens sit at their own positions, "positions" i32[B,T]
     * (cumsum(mask) - 1); the runtime fills both (runtime/rt_stepper.c) */
    if (m->pos != POS_NONE) L.positions = ir_build_input(g, "positions", ti, pick(m, m->loc_position));
    int keys = key_mask(&L, ir_build_input(g, "mask", ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(L.sym_l)}), mloc),
                        L.sym_l, mloc);
    /* query t (position P+t) sees keys 0..P+t that are not padding */
    int mask = ir_build_typed(g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                              ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(T), IR_SYM(L.sym_l)}), mloc);
    mask = op2(&L, IR_OP_AND, mask, keys, mloc);
    int ep;
    int y = embeddings(&L, tokens, -1, m->vocab_tgt, T, "", &ep);
    y = decoder(&L, y, mask, -1, -1);
    head(&L, y, ep, m->vocab_tgt);
  } else if (encode) {
    /* once per source: the encoder, then every decoder layer's
     * cross-attention keys and values of its output (the memory) */
    int S = ir_graph_add_symbol(g, "S", m->max_src);
    int src = ir_build_input(g, "src", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)}), aloc);
    int src_keys = -1;
    if (m->mask_enc_padding) {
      IrType tm = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)});
      src_keys = key_mask(&L, ir_build_input(g, "src_mask", tm, mloc), S, mloc);
    }
    int ep_src;
    int x = embeddings(&L, src, -1, m->vocab_src, S, "src_", &ep_src);
    int memory = encoder(&L, x, src_keys);
    IrLoc hloc = pick(m, m->loc_heads);
    for (int64_t i = 0; i < m->layers_dec; i++) {
      const char *p = arena_printf(a, "dec.%lld.cross", (long long)i);
      int k = linear(&L, memory, arena_printf(a, "%s.k", p), L.d, L.d, true, hloc);
      int v = linear(&L, memory, arena_printf(a, "%s.v", p), L.d, L.d, true, hloc);
      ir_graph_add_output(g, arena_printf(a, "cross.decoder.%lld.k", (long long)i), k);
      ir_graph_add_output(g, arena_printf(a, "cross.decoder.%lld.v", (long long)i), v);
    }
  } else if (m->arch == ARCH_ENCODER_DECODER && step) {
    /* the decoder's step: new target tokens at P..L-1, self-attention over
     * its KV cache, cross-attention over the encode graph's keys / values */
    int S = ir_graph_add_symbol(g, "S", m->max_src);
    int T = ir_graph_add_symbol(g, "T", m->max_tgt);
    L.sym_l = ir_graph_add_symbol(g, "L", m->max_tgt);
    int tokens = ir_build_input(g, "tokens", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(T)}), aloc);
    int src_keys = -1;
    if (m->mask_cross_padding) {
      IrType tm = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)});
      src_keys = key_mask(&L, ir_build_input(g, "src_mask", tm, mloc), S, mloc);
    }
    IrType tkv = ir_type(IR_F32, 3, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S), IR_CONST(L.d)});
    L.cross_k = arena_alloc(a, (size_t)(m->layers_dec + 1) * sizeof *L.cross_k);
    L.cross_v = arena_alloc(a, (size_t)(m->layers_dec + 1) * sizeof *L.cross_v);
    for (int64_t i = 0; i < m->layers_dec; i++) {
      L.cross_k[i] = ir_build_input(g, arena_printf(a, "cross.decoder.%lld.k", (long long)i), tkv, aloc);
      L.cross_v[i] = ir_build_input(g, arena_printf(a, "cross.decoder.%lld.v", (long long)i), tkv, aloc);
    }
    int mask = ir_build_typed(g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                              ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(T), IR_SYM(L.sym_l)}), mloc);
    int ep;
    int y = embeddings(&L, tokens, -1, m->vocab_tgt, T, "tgt_", &ep);
    y = decoder(&L, y, mask, -1, src_keys);
    head(&L, y, ep, m->vocab_tgt);
  } else if (m->arch == ARCH_DECODER) {
    int T = ir_graph_add_symbol(g, "T", m->max_tgt);
    IrType ti = ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(T)});
    int tokens = ir_build_input(g, "tokens", ti, aloc);
    int pad = -1;
    if (m->mask_dec_padding) {
      IrType tm = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(T)});
      pad = key_mask(&L, ir_build_input(g, "mask", tm, mloc), T, mloc);
    }
    int mask = ir_build_typed(g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                              ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(T), IR_SYM(T)}), mloc);
    if (pad >= 0) mask = op2(&L, IR_OP_AND, mask, pad, mloc);
    int ep;
    int y = embeddings(&L, tokens, -1, m->vocab_tgt, T, "", &ep);
    y = decoder(&L, y, mask, -1, -1);
    head(&L, y, ep, m->vocab_tgt);
  } else {
    int S = ir_graph_add_symbol(g, "S", m->max_src);
    int T = ir_graph_add_symbol(g, "T", m->max_tgt);
    int src = ir_build_input(g, "src", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)}), aloc);
    int tgt = ir_build_input(g, "tgt", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(T)}), aloc);
    int src_keys = -1, tgt_keys = -1;
    if (m->mask_enc_padding || m->mask_cross_padding) {
      IrType tm = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(S)});
      src_keys = key_mask(&L, ir_build_input(g, "src_mask", tm, mloc), S, mloc);
    }
    if (m->mask_dec_padding) {
      IrType tm = ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(L.sym_b), IR_SYM(T)});
      tgt_keys = key_mask(&L, ir_build_input(g, "tgt_mask", tm, mloc), T, mloc);
    }
    int causal = ir_build_typed(g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                                ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(T), IR_SYM(T)}), mloc);
    if (tgt_keys >= 0) causal = op2(&L, IR_OP_AND, causal, tgt_keys, mloc);
    int ep_src, ep_tgt;
    int x = embeddings(&L, src, -1, m->vocab_src, S, "src_", &ep_src);
    int memory = encoder(&L, x, m->mask_enc_padding ? src_keys : -1);
    int y = embeddings(&L, tgt, -1, m->vocab_tgt, T, "tgt_", &ep_tgt);
    y = decoder(&L, y, causal, memory, m->mask_cross_padding ? src_keys : -1);
    head(&L, y, ep_tgt, m->vocab_tgt);
  }
  if (L.attn_probs >= 0 && L.sym_l >= 0) {
    /* step: the last query row, the one whose output picks the next token:
     * [B,H,Tq,Tk] -> [B,H,Tk] (Tk = L, or S for cross-attention) */
    IrAttrs ta = no_attrs();
    ta.axis = 2;
    ta.index = -1;
    int last = ir_build(g, IR_OP_TAKE, (int[]){L.attn_probs}, 1, &ta, g->nodes[L.attn_probs].loc);
    ir_graph_add_output(g, "attention", last);
  } else if (L.attn_probs >= 0) {
    ir_graph_add_output(g, "attention", L.attn_probs);
  }
  TFMC_ASSERT(L.n_attn == (all ? n_layers : 0));
  for (int i = 0; i < L.n_attn; i++) ir_graph_add_output(g, L.attn_names[i], L.attn_values[i]);
  if (!named_outputs(&L, d)) return NULL;
  if (opt && opt->named_values) *opt->named_values = named_list(&L);
  return g;
}
