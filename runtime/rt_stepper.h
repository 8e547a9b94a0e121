/* runtime/rt_stepper.h — the compiled programs of generation as the step
 * functions runtime/rt_generate.h drives, whoever runs them.
 *
 * A decoder generates with one program, the *step* graph (frontend/spec.h
 * LowerOptions.step: input "tokens" i32[B,T], symbols B, T, L; output 0 the
 * last position's logits [B,V]; its KV caches are the program's state; its
 * "mask" and "positions" inputs the stepper fills from each row's left
 * padding). An encoder_decoder adds the *encode* program (src [B,S] ->
 * every decoder layer's cross-attention keys / values), whose outputs the
 * step graph takes as RT_INPUT_VALUES inputs by name. RtStepper binds both programs'
 * inputs and outputs to buffers allocated once, at the maxima (nothing per
 * token), and runs them through a small table of function pointers,
 * RtGenOps, so one loop serves every backend:
 *
 *     the JIT and the interpreter   backends/exec.c (ExecSession)
 *     executables and emitted C     rt_gen_model.h (compiled functions,
 *                                   planned arena and state)
 *
 *     RtStepper st;
 *     if (rt_stepper_init(&st, step_info, encode_info_or_NULL, &ops, user, err, sizeof err)) ...
 *     if (encoder_decoder && rt_stepper_encode(&st, src, n_src, err, sizeof err)) ...
 *     rt_generate(&(RtGenerateOptions){n, st.max_len, st.vocab, eos}, rt_stepper_step, &st,
 *                 prompt, n_prompt, out, ...);
 *     rt_stepper_free(&st);
 *
 * Also here: the description of a compiled generation artefact
 * (RtGenInfo: both programs, the state tensors, bos / eos, the packed
 * weights' layout) that executables and emitted C carry as data.
 *
 * libc only; C99. */
#ifndef TFMC_RT_STEPPER_H
#define TFMC_RT_STEPPER_H

#include "runtime/rt_model.h"

#include <stddef.h>
#include <stdint.h>

typedef enum RtGenProgram {
  RT_GEN_STEP,   /* the decoder step */
  RT_GEN_ENCODE, /* the encoder (encoder_decoder only) */
  RT_GEN_PROGRAM_COUNT
} RtGenProgram;

/* How a backend runs the programs. user is RtStepper.user. */
typedef struct RtGenOps {
  /* Runs program `which` on b: its symbols (b->syms, every one bound), its
   * inputs; writes its outputs. The step keeps its state (KV caches) from
   * one run to the next. Returns 0, or 1 with a message. */
  int (*run)(void *user, RtGenProgram which, RtBound *b, char *err, size_t errlen);
  /* Zeroes the step's state: a new sequence. */
  void (*reset)(void *user);
  /* Beam search, and a batch's live rows moved to the front: in every
   * state tensor f32[rows, positions, width], row i < n becomes what row
   * parent[i] held, over the first len positions. Returns 0, or 1 with a
   * message. */
  int (*reorder)(void *user, const int64_t *parent, int n, int64_t len, char *err,
                 size_t errlen);
} RtGenOps;

typedef struct RtStepper {
  const RtModelInfo *info;  /* the step program */
  const RtGenOps *ops;
  void *user;
  RtBound b;                /* syms set per step; inputs[in_tokens] = tokens, outputs[0] = logits */
  int sym_b, sym_t, sym_l, sym_s; /* sym_s: an encoder_decoder's source length, else -1 */
  int in_tokens, in_src_mask;     /* step inputs (in_src_mask -1: none) */
  int in_positions, in_mask;      /* a decoder's step: "positions" (-1: no position
                                     encoding) and "mask" (-1: an encoder_decoder) */
  int64_t *pad;             /* [max_rows]: the left padding of each row (its first pad[b]
                               cache slots are masked out), rt_stepper_set_padding; then
                               max_rows more, rt_stepper_reorder's scratch */
  int64_t max_len;          /* L's maximum: the positions the cache holds */
  int64_t max_rows;         /* B's maximum: 1, or the beams of a beam search */
  int64_t vocab;            /* V */
  int64_t token_vocab;      /* ids fed to the step are < token_vocab */
  /* the step's output "attention" [B,H,L] or [B,H,S] (a step graph compiled
   * with one decoder layer's probabilities: the last query row of each
   * step), or -1 */
  int out_attn;
  int64_t attn_heads;
  float *rows[RT_MAX_IO];   /* max_rows > 1: values input i copied to every row */
  /* encoder_decoder: the encode program and its buffers (inputs src and
   * src_mask, outputs the cross keys / values the step's RT_INPUT_VALUES
   * inputs point at); enc NULL for decoder-only */
  const RtModelInfo *enc;
  RtBound eb;
  int enc_in_src, enc_in_mask;  /* enc_in_mask -1: the encoder takes no mask */
  int value_from[RT_MAX_IO];    /* step input i <- encode output value_from[i], or -1 */
  int64_t max_src, src_vocab;   /* S's maximum; ids of src are < src_vocab */
  int64_t max_enc_rows;         /* the encode program's B maximum */
  int64_t enc_rows;             /* sources last encoded: 1 (every row translates it) or
                                   the batch's rows */
  int encoded;                  /* rt_stepper_encode has run */
  void *block;                  /* the buffers' memory when rt_stepper_init allocated it */
} RtStepper;

/* Binds the step program (and, when enc is not NULL, the encode program,
 * whose outputs must be the step's values inputs by name). Buffers at the
 * maxima, allocated once. Refuses (1 + message) programs that are not a
 * step graph / an encode program; the stepper is then to be freed. */
int rt_stepper_init(RtStepper *st, const RtModelInfo *step, const RtModelInfo *enc,
                    const RtGenOps *ops, void *user, char *err, size_t errlen);
/* The same with the buffers in the caller's memory (mem_bytes >=
 * rt_stepper_bytes(step, enc), 16-byte aligned; kept until the stepper is
 * no longer used; rt_stepper_free does not free it): what the static build
 * (emit-c --static, no heap) uses, with its size a compile-time constant. */
int rt_stepper_init_in(RtStepper *st, const RtModelInfo *step, const RtModelInfo *enc,
                       const RtGenOps *ops, void *user, void *mem, size_t mem_bytes, char *err,
                       size_t errlen);
/* The bytes of those buffers (-1: not a step graph / encode program). Not
 * in the static build. */
int64_t rt_stepper_bytes(const RtModelInfo *step, const RtModelInfo *enc);
/* Runs the encoder over src[0..n) (batch 1; src_mask = ids != the pad id,
 * refused when every id is pad) and hands its keys / values to the step
 * graph: the steps after it translate this source. The caller resets the
 * step's KV cache (rt_stepper_reset) for a new sequence. Refuses ids
 * outside the source vocabulary and n outside 1..max_src. */
int rt_stepper_encode(RtStepper *st, const int32_t *src, int64_t n, char *err, size_t errlen);
/* A batch of sources src[rows, n] (row-major) with their masks
 * src_mask[rows, n] (1 = real token; NULL: ids != the pad id, as
 * rt_stepper_encode): encodes them at once, row b's target then translates
 * source b, so the steps after it run exactly `rows` rows (rows 1: every
 * row translates the one source). Refuses rows outside 1..the encode
 * program's maximum, a row without a real token, and a mask with padding
 * the model does not mask (its encoder or its cross-attention takes no
 * source mask: the batch would not translate as each source alone). The
 * caller puts each row's real tokens first (right padding: the encoder's
 * positions count from 0). */
int rt_stepper_encode_rows(RtStepper *st, const int32_t *src, const uint8_t *src_mask,
                           int64_t rows, int64_t n, char *err, size_t errlen);
/* Left padding of a decoder's batch: row b's first pad[b] cache slots hold
 * pads, masked out of every query, and its tokens sit at positions
 * slot - pad[b] (HF's position_ids = cumsum(attention_mask) - 1). NULL:
 * none. Holds until the next call or rt_stepper_reset. Refuses rows
 * outside 1..max_rows and pads outside 0..max_len-1. */
int rt_stepper_set_padding(RtStepper *st, const int64_t *pad, int64_t rows, char *err,
                           size_t errlen);
/* A new sequence: the step's state zeroed (ops->reset), no padding. */
void rt_stepper_reset(RtStepper *st);
/* Runs rows x n new tokens (row-major; rows <= max_rows) at positions
 * past..past+n-1 of every row; *logits: [rows, V], valid until the next
 * step. Refuses ids outside the vocabulary and steps past max_len. */
int rt_stepper_step_rows(RtStepper *st, const int32_t *tokens, int64_t rows, int64_t n,
                         int64_t past, const float **logits, char *err, size_t errlen);
/* An RtStepFn (rt_generate.h), one row: user is the RtStepper. */
int rt_stepper_step(void *user, const int32_t *tokens, int64_t n, int64_t past,
                    const float **logits, char *err, size_t errlen);
/* RtBatchStepFn and RtReorderFn (rt_generate_beam, rt_generate_batch):
 * user is the RtStepper. A reorder moves each row whole: its KV cache
 * (ops->reorder), its left padding and, for a batch of sources (not one
 * source on every row), its cross-attention keys / values and source mask,
 * which are moved in place: there parent[i] >= i (rt_generate_batch's
 * compaction), else it is refused as an internal error. */
int rt_stepper_batch_step(void *user, const int32_t *tokens, int64_t rows, int64_t n,
                          int64_t past, const float **logits, char *err, size_t errlen);
int rt_stepper_reorder(void *user, const int64_t *parent, int64_t rows, int64_t len, char *err,
                       size_t errlen);
/* After a step of a program with an "attention" output (out_attn >= 0):
 * *probs points at batch row 0's probabilities of the step's last query,
 * [attn_heads, *keys] (keys: the positions up to the query's own, or the
 * source's), valid until the next step. Returns 0, or 1 (no such output). */
int rt_stepper_attention(const RtStepper *st, const float **probs, int64_t *keys);
/* Frees the buffers when rt_stepper_init allocated them (not ops / user). */
void rt_stepper_free(RtStepper *st);

/* ---- compiled generation artefacts (executables, emitted C) ---- */

/* One state tensor of the step program: a KV cache f32[rows, positions,
 * width] at a byte offset of RtRunArgs.state. */
typedef struct RtStateInfo {
  const char *name; /* "cache.decoder.0.k" */
  int64_t offset;   /* bytes from the state base; 64-byte aligned */
  int64_t rows, positions, width;
} RtStateInfo;

#define RT_GEN_INFO_VERSION 1

/* What a generation executable (or emitted project) is, as data: its
 * programs (the full forward pass as `tfmc run` without --generate runs
 * it, tfmc_model_run; the decoder step, tfmc_step_run; an
 * encoder_decoder's encoder, tfmc_encode_run), the step's state tensors,
 * the spec's bos / eos, and the one packed-weights image every program
 * reads (rt_weights.h, validated against `weights`, an RtModelInfo
 * describing only that image: the forward pass's weights at 0, the
 * encoder's at encode_offset, the step's at step_offset, each program's
 * offsets moved by its start; the starts are 64-byte aligned and every
 * block lies inside the image. A program whose weights are the forward
 * pass's, in the same layout with the same values (a decoder's step), has
 * no block of its own: its offset is 0, and the image is half the size). */
typedef struct RtGenInfo {
  uint32_t version;            /* RT_GEN_INFO_VERSION */
  const RtModelInfo *forward;  /* NULL: none (then its block is empty) */
  const RtModelInfo *step;
  const RtModelInfo *encode;   /* NULL: a decoder */
  const RtModelInfo *weights;  /* the packed image's layout (weights fields only) */
  int64_t encode_offset, step_offset; /* floats into the image; multiples of 16 */
  int n_states;
  const RtStateInfo *states;
  int64_t bos, eos;            /* -1: none (an encoder_decoder needs bos) */
} RtGenInfo;

/* Not in the static build (-DTFMC_STATIC): the two functions below. */

/* The maximum of symbol `name` of a program (L: max_len of a step, S:
 * the longest source of an encoder), 0 when info is NULL or has no such
 * symbol; what the step APIs (api_gen.c, api_gen_static.c) report. */
int64_t rt_model_sym_max(const RtModelInfo *info, const char *name);

/* Checks gi is well formed (versions, both programs by rt_model_info_check,
 * the state tensors inside the step's state, the weights image covering
 * both programs). Returns 0, or 1 with a message. */
int rt_gen_info_check(const RtGenInfo *gi, char *err, size_t errlen);

/* RtGenOps.reorder over compiled state: for each state tensor of states,
 * row i < n becomes row parent[i], over its first len positions. scratch
 * (*scratch, *scratch_bytes: grown with realloc as needed, owned by the
 * caller, freed with free) holds the copied rows. Returns 0, or 1 with a
 * message (out of memory, a parent or len out of range). */
int rt_state_reorder(const RtStateInfo *states, int n_states, unsigned char *state,
                     const int64_t *parent, int n, int64_t len, void **scratch,
                     size_t *scratch_bytes, char *err, size_t errlen);

#endif
