/* frontend/spec.h — the .tfm model spec: lexer, parser, semantic checks,
 * weight maps, presets, lowering to graph IR, loading weights.
 *
 * Example:
 *     Arena *a = arena_create();
 *     Diags d; diags_init(&d, a, stderr);
 *     char err[256];
 *     SrcFile *src = src_file_read(a, "examples/gpt2.tfm", err, sizeof err);
 *     diags_add_source(&d, src);
 *     Spec *spec = spec_parse(a, src, &d);        // NULL if any error (all reported)
 *     IrGraph *g = spec_lower(a, spec, &(LowerOptions){0}, &d);
 *     ...
 *     arena_destroy(a);
 *
 * The language (README.md has the user-facing reference):
 *
 *   spec    := item*
 *   item    := 'model' IDENT '{' NL* (entry NL+)* '}'
 *            | 'weights' IDENT '{' NL* (wentry NL+)* '}'      IDENT = the model's name
 *   entry   := KEY value*                 one per line; '#' starts a comment
 *   value   := IDENT | NUMBER | STRING
 *   wentry  := 'preset' STRING ['root' STRING]
 *            | 'ignore' STRING            a checkpoint name (pattern) deliberately unused
 *            | TARGET '=' TRANSFORM ...   see WeightRule
 *   TARGET  := IDENT ('[' 'i' ']')? ('.' IDENT)*     e.g. enc[i].attn.q, src_embed
 *
 * Ownership: everything returned lives in the Arena passed in.
 */
#ifndef TFMC_SPEC_H
#define TFMC_SPEC_H

#include "ir/ir.h"
#include "runtime/rt_safetensors.h"

/* ---- lexer.c ---- */

typedef enum TokKind {
  TOK_EOF, TOK_NEWLINE, TOK_IDENT, TOK_INT, TOK_FLOAT, TOK_STRING,
  TOK_LBRACE, TOK_RBRACE, TOK_LBRACKET, TOK_RBRACKET, TOK_EQUALS, TOK_DOT,
  TOK_ERROR, TOK_KIND_COUNT
} TokKind;

typedef struct Token {
  TokKind kind;
  const char *start; /* into the source text */
  int len;
  IrLoc loc;
  int64_t ival;  /* TOK_INT */
  double fval;   /* TOK_INT and TOK_FLOAT */
  const char *str; /* TOK_STRING: unescaped, arena-owned; TOK_IDENT: copy */
} Token;

/* Tokenises the whole file; lexical errors are reported to d and produce
 * TOK_ERROR tokens (the parser skips them). The array ends with TOK_EOF. */
Token *lex_tokens(Arena *a, const SrcFile *src, Diags *d, int *n_out);

/* ---- the checked model (sema.c fills it; defaults documented in README) ---- */

typedef enum Arch { ARCH_ENCODER, ARCH_DECODER, ARCH_ENCODER_DECODER, ARCH_COUNT } Arch;
typedef enum Activation { ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_COUNT } Activation;
typedef enum NormPlace { NORM_PRE, NORM_POST, NORM_PLACE_COUNT } NormPlace;
typedef enum PosKind { POS_NONE, POS_SINUSOIDAL, POS_LEARNED, POS_KIND_COUNT } PosKind;
typedef enum HeadKind {
  HEAD_NONE,        /* outputs the final hidden states: "hidden" */
  HEAD_LOGITS,      /* "logits" [B,T,V] */
  HEAD_LOG_SOFTMAX, /* "log_probs" [B,T,V] */
  HEAD_CLASSIFIER,  /* "class_logits" [B,C] from position 0 */
  HEAD_KIND_COUNT
} HeadKind;

typedef struct ModelSpec {
  const char *name;
  IrLoc loc;
  Arch arch;
  /* "src" is the encoder side, "tgt" the decoder side. Encoder-only models
   * use only src fields, decoder-only models only tgt fields. */
  int64_t vocab_src, vocab_tgt;
  int64_t d_model, heads, d_ff;
  int64_t layers_enc, layers_dec;
  Activation act;
  NormPlace norm;
  double norm_eps;     /* default 1e-5 */
  bool norm_unbiased;  /* a (x-mean)/(std_unbiased+eps) + b */
  bool final_norm_enc, final_norm_dec;
  PosKind pos;
  int64_t pos_max;     /* learned: table rows; sinusoidal: 0 = no bound */
  double embed_scale;  /* 1.0 = none; sqrt(d_model) for sqrt_d_model */
  bool embed_norm;
  double embed_norm_eps;
  int64_t token_types; /* 0 = none */
  bool mask_enc_padding, mask_dec_padding, mask_dec_causal, mask_cross_padding;
  int64_t pad_id, bos_id, eos_id; /* -1 = not given */
  HeadKind head;
  int64_t n_classes;   /* HEAD_CLASSIFIER */
  bool head_tied;      /* LM head reuses the target (or only) embedding; no bias */
  bool head_bias;      /* default: !head_tied */
  bool pooler;         /* classifier: tanh(linear(x[:,0])) before the classifier */
  int64_t max_batch, max_src, max_tgt;
  /* where each key was written, for diagnostics raised after sema */
  IrLoc loc_arch, loc_heads, loc_mask, loc_head, loc_position;
  /* filled when present; a zero IrLoc falls back to loc */
  IrLoc loc_vocab, loc_layers, loc_ffn, loc_norm, loc_embed_norm, loc_final_norm;
} ModelSpec;

/* ---- weight maps ---- */

typedef enum WeightXform {
  WX_TENSOR,      /* TARGET = tensor "name"          one tensor, as stored */
  WX_LINEAR,      /* TARGET = linear "prefix"        prefix.weight [out,in], prefix.bias */
  WX_CONV1D,      /* TARGET = conv1d "prefix"        HF Conv1D: weight [in,out] (transposed on load) */
  WX_NORM,        /* TARGET = norm "prefix"          prefix.weight, prefix.bias */
  WX_HEADS,       /* TARGET = heads "pattern{h}"     H linears [d/H,in] concatenated to [d,in] */
  WX_SPLIT,       /* TARGET(.qkv) = split "prefix"   fused [3d,in] split into q, k, v */
  WX_SPLIT_CONV1D,/* TARGET(.qkv) = split_conv1d "prefix"   fused Conv1D [in,3d] */
  WX_TIED,        /* TARGET = tied "name"            a stored copy of a tied weight: checked equal, not loaded */
  WX_COUNT
} WeightXform;

typedef struct WeightRule {
  IrLoc loc;
  const char *target;        /* as written, normalised: "enc[i].attn.q" */
  WeightXform xform;
  const char *source;        /* checkpoint name or prefix; may hold {i} (layer) and {h} (head) */
  const char *weight_suffix; /* default "weight" ("in_proj_weight" style overrides: weight "...") */
  const char *bias_suffix;   /* default "bias"; "" = no bias stored */
  bool from_preset;
} WeightRule;

typedef struct WeightMap {
  IrLoc loc;
  const char *model_name;
  const char *preset; /* NULL = none */
  const char *root;   /* where the preset's base model lives in the checkpoint: the
                       * `root` given, else the preset's base (spec_preset_base) */
  WeightRule *rules;  /* explicit rules first, then preset rules (explicit win) */
  int n_rules;
  const char **ignore; /* checkpoint name patterns ({i}, {h}, * allowed) */
  IrLoc *ignore_loc;
  int n_ignore;
} WeightMap;

typedef struct Spec {
  const SrcFile *src;
  ModelSpec *model;
  WeightMap *weights; /* NULL: the checkpoint uses tfmc's canonical names */
} Spec;

/* parser.c + sema.c: parses and checks; reports every error found; returns
 * NULL if there was any. */
Spec *spec_parse(Arena *a, const SrcFile *src, Diags *d);

/* presets.c: the preset's rule text (in the weights-block syntax), or NULL
 * if no such preset. Lists all names through names/n. */
const char *spec_preset_text(const char *name);
/* The prefix the preset's base-model sources carry ("bert." for hf-bert):
 * the root used when the weights block gives none. NULL if no such preset. */
const char *spec_preset_base(const char *name);
/* The checkpoint name a source (or ignore pattern) of preset `name` stands
 * for under `root`: the base prefix replaced by root; a source outside the
 * base (a task head at the top of the state_dict) unchanged. Arena-owned or
 * `source` itself. */
const char *spec_preset_source(Arena *a, const char *name, const char *root,
                               const char *source);
void spec_preset_names(const char *const **names, int *n);

/* ---- hf_import.c: a Hugging Face config.json -> a spec ---- */

typedef struct HfImportOptions {
  const char *name;  /* the model's name; NULL: the model_type ("bert") */
  int64_t max_batch; /* > 0: a max_batch line; 0: the spec's default */
  /* The checkpoint's tensor names, when it is at hand: the root is then
   * the prefix its word embedding carries, whatever "architectures" says
   * (the hub's gpt2 says GPT2LMHeadModel but stores GPT2Model's names).
   * weights_path names it in messages and in the spec's comment. */
  const char *weights_path;
  const char *const *tensor_names;
  int n_tensor_names;
} HfImportOptions;

/* Reads a Hugging Face config.json (model_type bert, distilbert, gpt2; the
 * architectures field picks the head and the checkpoint root) and returns
 * a spec, model block and weights block, as text that spec_parse accepts.
 * Reports every problem to d, at the JSON value's line:col where there is
 * one (refusals say why the model is not expressible), and returns NULL.
 * The text is arena-owned. */
const char *spec_import_hf(Arena *a, const SrcFile *config, const HfImportOptions *opt,
                           Diags *d);

/* ---- lower.c: model -> graph IR ---- */

typedef struct LowerOptions {
  /* NULL; or an attention layer whose probabilities become the output
   * "attention" [B,H,Tq,Tk]: "encoder.N", "decoder.N", "decoder.N.cross";
   * or "all": every attention layer's probabilities become an output
   * "attention.LAYER" (attention.encoder.0, ..., attention.decoder.0,
   * attention.decoder.0.cross, ...), after the head's output, in the order
   * the forward pass computes them. With step: one decoder layer
   * ("decoder.N" or "decoder.N.cross"), whose last query row becomes the
   * output "attention" [B,H,L] (self-attention over the cache) or [B,H,S]
   * (cross-attention over the source): what the step's new token was
   * chosen by; "all" and encoder layers are refused */
  const char *attention_layer;
  /* false: the forward pass over whole sequences. true (decoder-only specs):
   * the step graph of generation with a KV cache (encoder_decoder: see
   * encode). Symbols B, T (new tokens)
   * and L (= P + T, P the tokens already in the cache; the runtime binds
   * it); input "tokens" i32[B,T] at cache slots P..L-1; per decoder layer two
   * states "cache.decoder.N.k" / ".v" f32[max_batch, max_len, d_model] that
   * the step's keys and values are appended to (kv.append) and attended
   * over; the head at the last position only: "logits" (or "log_probs")
   * [B,V]. A decoder's step also takes "mask" bool[B,L] (1 = a real token
   * in that cache slot; the causal mask bool[1,T,L] and-ed with it, so a
   * left-padded row's pads are no query's keys) and, with a position
   * encoding, "positions" i32[B,T] (each row's own positions of its new
   * tokens: cumsum(mask) - 1 for a left-padded row, P..L-1 without
   * padding). An encoder_decoder's target is never padded (every row
   * starts at bos): its positions are P..L-1. */
  bool step;
  /* true (encoder_decoder specs): the encode graph of generation, run once
   * per source. Symbols B, S; inputs "src" (and "src_mask" with an encoder
   * padding mask); outputs "cross.decoder.N.k" / ".v" f32[B,S,d_model], the
   * cross-attention keys and values of every decoder layer over the
   * encoder's output. With step on an encoder_decoder, the step graph is
   * the decoder's: symbols B, S, T, L; inputs "tokens" (target ids),
   * "src_mask" bool[B,S] (with a cross padding mask) and the
   * "cross.decoder.N.k" / ".v" values the encode graph wrote, read by each
   * layer's cross-attention instead of projecting the memory. */
  bool encode;
  int64_t step_max_batch; /* step: B's maximum and the caches' batch rows (0: 1) */
  /* Named intermediates that become outputs too, after the head's and the
   * attention outputs, in this order (duplicates and names the head already
   * outputs are added once). The names follow the canonical parameter
   * names: "embeddings" (after positions, token types and the embedding
   * norm; "src_embeddings" / "tgt_embeddings" in an encoder_decoder),
   * "enc.N.out" / "dec.N.out" (the output of layer N), "encoder.out" /
   * "decoder.out" (the stack's, after its final norm), "hidden" (what the
   * head reads), "pooled" (tanh(pooler(hidden[:, 0])), with a pooler). An
   * unknown name is reported with the list of the model's names. Not with
   * step. */
  const char *const *outputs;
  int n_outputs;
  /* When not NULL: set to the model's named intermediates as one line
   * ("embeddings, enc.0.out .. enc.11.out, encoder.out, hidden"), in the
   * graph's arena (tfmc check prints it). */
  const char **named_values;
} LowerOptions;

/* Builds the graph for the model. Parameter names are tfmc's canonical ones
 * (README "Canonical parameter names"). Reports bad options (an attention
 * layer that does not exist; "all" with more outputs than RT_MAX_IO) to d
 * and returns NULL. */
IrGraph *spec_lower(Arena *a, const Spec *spec, const LowerOptions *opt,
                    Diags *d);

/* ---- weights.c: checkpoint -> the graph's params ---- */

/* (Weight and WeightSet are in ir/ir.h: the backends read them too) */

/* Loads every param of g from the checkpoint through the spec's weight map
 * (or canonical names when the spec has none). On mismatch reports, in one
 * message list, every missing, unexpected and mis-shaped tensor by name
 * (expected vs found) and returns NULL. The set's nonfinite counts each
 * weight's NaN and Inf values (NaN/Inf are loaded as they are; the caller
 * decides what they mean). */
WeightSet *weights_load(Arena *a, const IrGraph *g, const Spec *spec,
                        const RtSafetensors *st, Diags *d);
/* The same checks, reports and NaN/Inf counts, but no f32 copy: the set's
 * items have no data and its source reads them from st, converted,
 * sliced and transposed, where they are needed (the packer's pieces, a
 * derived param's operands; ir_weight_read), or lends the packer an f32
 * tensor's bytes as they lie in the mapping (WeightSource.view). The
 * NaN/Inf count runs on the stored bits; every block counted or read is
 * dropped from the process's memory behind it (rt_st_drop: the page
 * cache keeps it), so the checkpoint never sits in the RSS whole. On
 * success st belongs to the set: a's destruction closes it; on failure
 * (NULL) it is still the caller's. For pipelines that pack the weights
 * (the driver's DRIVER_PACKED): gpt2-small's `tfmc run` peaks at 695 MiB
 * instead of 1146. */
WeightSet *weights_load_mapped(Arena *a, const IrGraph *g, const Spec *spec, RtSafetensors *st,
                               Diags *d);
/* Deterministic random init for runs without a checkpoint (same seed, same
 * values on every machine; each param has its own stream keyed by its name):
 * linear weights U(-1/sqrt(in), 1/sqrt(in)), biases U(-0.1, 0.1), norm gains
 * 1 + U(-0.1, 0.1), norm biases U(-0.1, 0.1), embedding tables U(-1, 1). */
WeightSet *weights_random(Arena *a, const IrGraph *g, uint64_t seed);
/* (weights_load reports, and weights_random returns NULL, when the weights
 * do not fit in memory.) The bytes of g's params as f32 (saturating). */
int64_t weights_bytes(const IrGraph *g);

#endif
