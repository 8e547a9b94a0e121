/* backends/driver.h — the one compile driver. Every command (check, ir,
 * run, build, emit-c) and every backend (interp, jit, object files, C)
 * gets its program from here, so the pipeline exists once:
 *
 *     DriverOptions o = {.weights = "w.safetensors", .passes = &pl, .pass_ctx = &pctx,
 *                        .stage = DRIVER_PACKED};
 *     Compiled c;
 *     char err[1024];
 *     if (driver_compile_file(a, &d, "model.tfm", &o, &c, err, sizeof err)) {
 *       if (*err) fprintf(stderr, "tfmc: %s\n", err);   // spec errors went to d
 *       ...
 *     }
 *     // c.g: the optimised graph; c.prog: its loop program; c.info: the
 *     // run-time description (I/O contract, weights layout, kernels);
 *     // c.packed: the weights as compiled code addresses them
 *
 * The pipeline (driver.c reads as this list):
 *   1. front end   a .tfm spec parsed, checked and lowered to graph IR, or a
 *                  .tfir textual graph parsed; verified
 *   2. weights     a checkpoint through the spec's weight map (canonical
 *                  names for .tfir graphs), or random from a seed; checked
 *                  against the graph as built, before any pass
 *   3. graph passes of the pipeline, verified after each
 *   4. lowering to loop IR, with the activation arena planned
 *   5. loop passes of the pipeline, verified after each
 *   6. the run-time description (RtModelInfo) and the packed weights
 * Each stage after the one asked for (DriverOptions.stage) is skipped.
 *
 * Ownership: everything a Compiled points to lives in the arena passed in. */
#ifndef TFMC_DRIVER_H
#define TFMC_DRIVER_H

#include "frontend/spec.h"
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_model.h"
#include "runtime/rt_stepper.h"

typedef enum DriverStage {
  DRIVER_GRAPH,  /* stop after the graph passes (c.info holds the I/O part only) */
  DRIVER_LOOP,   /* ... after lowering and the loop passes */
  DRIVER_PACKED, /* ... with the weights packed for compiled code */
  DRIVER_STAGE_COUNT
} DriverStage;

typedef struct DriverOptions {
  const char *attention;    /* spec only: a layer whose probabilities become an output */
  bool no_weights;          /* check / ir: neither load nor make weights */
  const char *weights;      /* checkpoint (safetensors); NULL: random weights from seed */
  uint64_t seed;
  const PassPipeline *passes; /* NULL or empty: no passes */
  PassContext *pass_ctx;      /* required with passes; its diags are the driver's */
  DriverStage stage;
  bool strict;                /* NaN/Inf in the checkpoint's weights is an error, not a warning */
  bool step;                  /* spec only: the step graph of generation (LowerOptions.step) */
  int64_t step_rows;          /* driver_compile_generation: the step's batch rows and KV-cache
                                 rows (LowerOptions.step_max_batch; 0: 1; beam search: beams) */
  const char *const *outputs; /* spec only: named intermediates made outputs too
                                 (LowerOptions.outputs), before any pass */
  int n_outputs;
  WeightSet *weight_set;      /* NULL; or weights loaded by an earlier compile of the same
                                 spec (its Compiled.w), used instead of loading them again:
                                 one checkpoint read for many pipelines (tfmc bench) */
  const struct Compiled *packed_like; /* NULL; or a program compiled to DRIVER_PACKED earlier
                                 on the same weights: this program's weight buffers that are
                                 buffers of it (the same weight data, layout and shape) move
                                 to its offsets and are read from its packed block, not
                                 packed again. driver_compile_generation: the others, if
                                 any, go after that block (and after those of earlier
                                 programs of the same generation), and only they are packed
                                 (Compiled.packed_base); a decoder's step needs none, an
                                 encoder_decoder's encoder its cross-attention keys' and
                                 values' (fused in the forward pass): tfmc build's image is
                                 the forward block and those. driver_compile_file and _graph:
                                 only when every buffer has one, so that the program runs on
                                 that block alone (tfmc bench's variants) */
} DriverOptions;

typedef struct Compiled {
  Spec *spec;        /* NULL for a .tfir graph or a graph handed in */
  IrGraph *g;        /* after the graph passes */
  WeightSet *w;      /* NULL with no_weights */
  LoopProgram *prog; /* NULL at DRIVER_GRAPH */
  RtModelInfo *info; /* the run-time description of g (and prog) */
  float *packed;     /* DRIVER_PACKED: info->weights_floats floats, 64-byte aligned; for a
                        program moved onto another's block (packed_base) the floats
                        [packed_from, info->weights_floats) only: its own weights */
  const struct Compiled *packed_base; /* NULL; or DriverOptions.packed_like, when this
                        program reads its weights at offsets < packed_from from that
                        program's packed block (and packed is that block when it
                        needs no weights of its own: packed_from 0) */
  int64_t packed_from;
} Compiled;

/* Compiles a spec (.tfm) or a textual graph (.tfir, by its extension).
 * Returns 0; or 1 after reporting to d (spec, IR, weight-map errors) or
 * writing a message to err (I/O; err is "" when d has it all). */
int driver_compile_file(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                        Compiled *c, char *err, size_t errlen);

/* What generation runs, compiled into one artefact from one spec and one
 * checkpoint (read once; both programs pack from the same WeightSet):
 *   decoder          step: the step graph (LowerOptions.step), KV caches as
 *                    its state; encode unused (encode.g NULL)
 *   encoder_decoder  encode: src -> every decoder layer's cross-attention
 *                    keys / values (LowerOptions.encode), run once per
 *                    source; step: the decoder's step graph, taking those
 *                    as RT_INPUT_VALUES inputs, its self-attention KV
 *                    caches as state
 * o->step and o->outputs must be unset (refused by the lowering);
 * o->attention, one decoder layer, makes the step graph output "attention"
 * [B,H,L] or [B,H,S]: the probabilities of the step's last query row
 * (LowerOptions.attention_layer). Specs only: a .tfir graph is refused. Returns 0, or 1 as
 * driver_compile_file does. */
typedef struct CompiledGeneration {
  bool encoder_decoder;
  Compiled encode; /* encoder_decoder only */
  Compiled step;
} CompiledGeneration;
int driver_compile_generation(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                              CompiledGeneration *gen, char *err, size_t errlen);

/* What a generation executable or emitted project carries, from a
 * generation compiled to DRIVER_PACKED and, when not NULL, the forward pass
 * of the same spec (driver_compile_file): the description
 * (runtime/rt_stepper.h RtGenInfo: the programs' infos, the step's state
 * tensors, the spec's bos / eos, the weights image's layout) and the one
 * weights image (*image: gi->weights->weights_floats floats, 64-byte
 * aligned: the forward pass's packed weights, the encoder's at
 * gi->encode_offset, the step's at gi->step_offset; a program reading the
 * forward pass's very weights shares its block, offset 0; programs compiled
 * with packed_like = forward start at 0 and add only their own weights,
 * after the forward block; when they add none the image is forward->packed
 * itself, not a copy). Everything
 * lives in a. Returns 0, or 1 + message. */
int driver_generation_info(Arena *a, const Compiled *forward, const CompiledGeneration *gen,
                           RtGenInfo **gi, float **image, char *err, size_t errlen);

/* A loop IR listing (.tfloop, as `tfmc ir --level loop` prints it) read
 * back, verified, and run through the pipeline's loop passes (stage 5): a
 * loop pass tested as IR in, IR out. The pipeline may hold no graph pass.
 * Returns 0 with *out set, or 1 as driver_compile_file does. */
int driver_compile_loop_file(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                             LoopProgram **out, char *err, size_t errlen);

/* The same pipeline from stage 2 (or 3, when w is given) on a graph built
 * in memory (tests, tools): g must verify; w NULL loads o->weights or makes
 * random ones (unless o->no_weights). Ids inputs are bounded by the tables
 * of the embeddings they feed (unbounded when they feed none). */
int driver_compile_graph(Arena *a, Diags *d, IrGraph *g, WeightSet *w, const DriverOptions *o,
                         Compiled *c, char *err, size_t errlen);

#endif
