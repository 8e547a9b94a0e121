/* runtime/rt_gen_model.h — a compiled generation artefact loaded and run:
 * what generation executables (`tfmc build` of a decoder or
 * encoder_decoder spec) and emitted C projects (`tfmc emit-c`, model.h's
 * step API) run on. It is one RtGenOps backend of rt_stepper.h: the
 * compiled functions (tfmc_step_run: the decoder step; tfmc_encode_run:
 * the encoder with the cross-attention keys / values), described by an
 * RtGenInfo, over one packed-weights image, a thread pool, one planned
 * activation arena per program (committed as the dims of a run need:
 * rt_arena.h) and the step's state, the KV caches, planned at compile time
 * (RtModelInfo.state_bytes) and allocated once: owned by the model, or
 * handed in by the caller. Nothing is allocated per token.
 *
 *     RtGenModel m;
 *     if (rt_gen_model_open(&m, &tfmc_gen_info, tfmc_step_run, tfmc_encode_run, "m.weights",
 *                           NULL, 0, 0, NULL, err, sizeof err)) ...
 *     rt_stepper_encode(&m.st, src, n, ...);          // encoder_decoder
 *     rt_generate(..., rt_stepper_step, &m.st, ...);  // or the caller's own loop
 *     rt_stepper_reset(&m.st);                        // a new sequence
 *     rt_gen_model_close(&m);
 *
 * rt_main_generate is the main of generation executables: the options of
 * `tfmc run --generate` (rt_genrun.h) on this artefact.
 *
 * libc, pthreads (the pool) and the runtime only. */
#ifndef TFMC_RT_GEN_MODEL_H
#define TFMC_RT_GEN_MODEL_H

#include "runtime/rt_arena.h"
#include "runtime/rt_stepper.h"
#include "runtime/rt_weights.h"

#include <stddef.h>
#include <stdint.h>

typedef struct RtGenModel {
  const RtGenInfo *gi;
  RtModelRunFn run[RT_GEN_PROGRAM_COUNT];
  RtWeights *weights;                  /* the hosted loader's; NULL in rt_gen_model_init_in */
  const float *w;                      /* the image's floats (every program's blocks) */
  RtPool *pool;                        /* NULL: the calling thread */
  RtArena arena[RT_GEN_PROGRAM_COUNT]; /* one per program */
  unsigned char *state;                /* gi->step->state_bytes, 64-byte aligned */
  void *state_raw;                     /* what to free; NULL when the caller's */
  int64_t dirty_rows, dirty_len;       /* what steps wrote since the last reset */
  void *scratch;                       /* beam reordering's rows (malloc'd on first use) */
  size_t scratch_bytes;
  RtStepper st;                        /* the step functions take &st */
} RtGenModel;

/* Loads the artefact gi (checked: rt_gen_info_check) with its functions
 * (encode NULL for a decoder). Weights: image (image_len bytes, e.g.
 * linked into the program; the caller keeps it alive) when not NULL, else
 * the packed-weights file weights_path; either is validated against
 * gi->weights. n_threads: 0 one per online CPU, 1 the calling thread.
 * state: NULL to allocate the KV caches here; else the caller's
 * gi->step->state_bytes bytes, 64-byte aligned, zeroed here and kept until
 * rt_gen_model_close. Returns 0, or 1 with a message (nothing held then). */
int rt_gen_model_open(RtGenModel *m, const RtGenInfo *gi, RtModelRunFn step, RtModelRunFn encode,
                      const char *weights_path, const void *image, size_t image_len,
                      int n_threads, void *state, char *err, size_t errlen);
void rt_gen_model_close(RtGenModel *m);

/* The same artefact in the caller's memory, for the static build
 * (emit-c --static, -DTFMC_STATIC: no heap, files or threads; the calling
 * thread; no beam search): weights, the image's floats (checked by the
 * caller); arena, 64-byte aligned, at least the larger of the programs'
 * arena_bytes (they never run at once, so one arena serves both); state,
 * 64-byte aligned, gi->step->state_bytes (zeroed here; NULL when 0);
 * stepper, rt_stepper_bytes(gi->step, gi->encode) bytes, 16-byte aligned.
 * Nothing to close. Returns 0, or 1 with a message. The hosted functions
 * (open, close, rt_main_generate) are not in the static build. */
int rt_gen_model_init_in(RtGenModel *m, const RtGenInfo *gi, RtModelRunFn step,
                         RtModelRunFn encode, const float *weights, unsigned char *arena,
                         unsigned char *state, void *stepper, size_t stepper_bytes, char *err,
                         size_t errlen);

/* The main of a generation executable:
 *   EXE --generate N (--tokens "IDS" | --text "TEXT" (--vocab V | --tokenizer T)
 *                     | --inputs IN.safetensors)
 *       [--sample [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *        | --beams K [--length-penalty A]] [--outputs OUT.safetensors]
 *       [--vocab V | --tokenizer T] [--weights FILE] [--threads N] [--repeat N]
 *   EXE --help | --version
 * as `tfmc run --generate` takes them (rt_genrun.h). Without --generate
 * (and with gi->forward: forward, tfmc_model_run) it is rt_main: one
 * forward pass, as `tfmc run` without --generate. Weights as rt_main
 * finds them: embedded when embedded != NULL, else --weights, else
 * EXE.weights next to the executable. Exit status 0, 1 (bad input, weights
 * or options' values), 2 (bad usage). */
int rt_main_generate(int argc, char **argv, const RtGenInfo *gi, RtModelRunFn forward,
                     RtModelRunFn step, RtModelRunFn encode, const void *embedded,
                     size_t embedded_len);

#endif
