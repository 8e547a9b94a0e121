/* backends/c/c_backend.h — loop IR printed as portable C99: the same loop
 * IR the LLVM backend compiles, so the two agree by construction.
 *
 * `tfmc emit-c SPEC --weights W -o DIR` writes a self-contained project:
 *   DIR/model.c        the kernels (one function per kernel, a comment naming
 *                      the IR node and spec line, shape comments), the entry
 *                      tfmc_model_run and the data tfmc_model_info
 *   DIR/model.h        the C API of the static library (create / run /
 *                      destroy; who owns what)
 *   DIR/main.c         the standalone executable (calls rt_main)
 *   DIR/api.c, DIR/model_config.h   model.h over the runtime; main.c and
 *                      api.c are runtime/templates copied as they are,
 *                      model_config.h their per-model settings
 *   DIR/runtime/...    the runtime sources it needs (copied)
 *   DIR/EXE.weights    packed weights, named after the executable EXE (which
 *                      looks for them next to itself), or, with
 *                      embed_weights, weights.c holding them as a C array
 *   DIR/Makefile, DIR/CMakeLists.txt   build the executable and libmodel.a;
 *                      `make NO_BLAS=1` builds without BLAS
 * With static_mode (`emit-c --static`: hosts without an OS) the project is
 * instead a library only: model.c as above, model.h the static API
 * (runtime/templates/model_static.h: one caller-provided memory region of
 * TFMC_MEM_BYTES, no heap, threads, files or stdio), api.c from
 * templates/api_static.c, only the runtime pieces the model calls
 * (c_static_runtime), the weights as EXE.weights or, embedded, weights.c
 * (const: flash), and a Makefile building libmodel.a (`make size` prints
 * its sections); a generating spec adds the static step API (see gen
 * below). See backends/c/static.c.
 * Regenerating gives the same bytes (deterministic names, no timestamps).
 * Names from the spec are escaped wherever they reach generated text. */
#ifndef TFMC_C_BACKEND_H
#define TFMC_C_BACKEND_H

#include "ir/loop.h"
#include "runtime/rt_model.h"
#include "runtime/rt_stepper.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct CEmitOptions {
  bool embed_weights;      /* weights as a C array in weights.c */
  const char *runtime_dir; /* the runtime source folder: its rt_*.c / rt_*.h files and its
                              templates/ (main.c, api.c, model.h; static mode:
                              api_static.c, model_static.h) are copied */
  bool force;               /* write into an existing non-empty directory without a marker */
  const char *const *inputs; /* files the project must not overwrite (NULL entries skipped) */
  int n_inputs;
  bool static_mode; /* the static library for hosts without an OS (see above) */
  /* A decoder or encoder_decoder that generates:
   * its description (driver_generation_info; gen->forward is the program
   * p), its step and encoder programs (encode_prog NULL for a decoder) and
   * the weights image of all of them, written instead of `weights`. The
   * project then also has step.c, encode.c, gen_info.c, gen_api.c
   * (templates/api_gen.c) and model_gen.h (templates/model_gen.h: the
   * step API model.h includes), and its main.c is templates/main_gen.c.
   * With static_mode: no main.c; gen_api.c is templates/api_gen_static.c
   * and model_gen.h templates/model_gen_static.h (the step API in a second
   * caller-provided region, TFMC_GEN_MEM_BYTES: c_static_gen_memory), the
   * step planned at batch 1 (greedy decoding; no beams, no sampling). */
  const RtGenInfo *gen;
  const LoopProgram *step_prog, *encode_prog;
  const float *gen_image;
} CEmitOptions;

/* Refuses dir when it exists and is not a directory, or is a non-empty
 * directory tfmc did not write (no dir/.tfmc-project) and !force. Returns 0
 * or non-zero with a message. */
int c_project_dir_check(const char *dir, bool force, char *err, size_t errlen);

/* Writes the project into dir (created if missing; files written there are
 * replaced, nothing else is touched; c_project_dir_check first; no file is
 * one of opt->inputs). All files get their names together at the end: a
 * failure changes nothing in dir. weights: info->weights_floats floats.
 * Returns 0 or non-zero with a message. */
int c_emit_project(const LoopProgram *p, const RtModelInfo *info, const float *weights,
                   const CEmitOptions *opt, const char *dir, char *err, size_t errlen);

/* Writes model.c's text (kernels, tfmc_model_run, tfmc_model_info). */
void c_emit_model(const LoopProgram *p, const RtModelInfo *info, FILE *out);

/* The same with the entry function and the info named (a generation
 * artefact links several programs: tfmc_model_run / tfmc_model_info, the
 * forward pass; tfmc_step_run / tfmc_step_info, the decoder step;
 * tfmc_encode_run / tfmc_encode_info, the encoder). */
void c_emit_model_named(const LoopProgram *p, const RtModelInfo *info, const char *entry,
                        const char *info_name, FILE *out);

/* Writes just `const RtModelInfo tfmc_model_info = {...};` with its arrays
 * (used by `tfmc build` next to the LLVM object); _named: under that name
 * (its arrays are static: one info per translation unit). */
void c_emit_model_info(const RtModelInfo *info, FILE *out);
void c_emit_model_info_named(const RtModelInfo *info, const char *name, FILE *out);

/* Writes `const RtGenInfo tfmc_gen_info = {...};` (runtime/rt_stepper.h)
 * with the weights image's description (tfmc_weights_info) and the state
 * tensors, referring to tfmc_step_info, tfmc_model_info (the forward pass,
 * when gi has one) and tfmc_encode_info (an encoder_decoder's) defined
 * elsewhere (one translation unit of its own). */
void c_emit_gen_info(const RtGenInfo *gi, FILE *out);

/* The fixed sources of a project (runtime_dir/templates: main.c, api.c,
 * model.h; `tfmc build` uses main.c and weights.S): appends template name
 * to out byte for byte. Returns 0 or non-zero with a message. */
int c_template_put(const char *runtime_dir, const char *name, FILE *out, char *err,
                   size_t errlen);

/* Writes model_config.h: what the templates main.c and api.c need to know
 * about this model (TFMC_EMBEDDED_WEIGHTS). */
void c_emit_model_config(const RtModelInfo *info, bool embed_weights, FILE *out);
/* The same for a generation artefact (gen not NULL): also TFMC_ENCODER. */
void c_emit_model_config_gen(const RtModelInfo *info, const RtGenInfo *gen, bool embed_weights,
                             FILE *out);

/* ---- static.c: the static mode's decisions ---- */

/* The one memory region of a static model (bytes): the parts, as
 * runtime/templates/api_static.c lays them out, and their total
 * (TFMC_MEM_BYTES: 64 bytes of alignment slack included). */
typedef struct CStaticMemory {
  int64_t header, arena, state, masks, total;
} CStaticMemory;
void c_static_memory(const RtModelInfo *info, CStaticMemory *m);

/* A generating model's second region (TFMC_GEN_MEM_BYTES, the static step
 * API of runtime/templates/api_gen_static.c): the TfmcGen header, one
 * arena for the encoder and the step, the step's state (the KV cache),
 * the stepper's buffers, and the total with 64 bytes of alignment slack.
 * encode NULL for a decoder. Returns 0, or 1 when they are not generation
 * programs. */
typedef struct CStaticGenMemory {
  int64_t header, arena, state, stepper, total;
} CStaticGenMemory;
int c_static_gen_memory(const RtModelInfo *step, const RtModelInfo *encode, CStaticGenMemory *m);

/* Which runtime functions (ir/callees.def) the program calls, in used[];
 * refuses what the static runtime cannot run (attention maps). Returns 0
 * or non-zero with a message. */
int c_static_check(const LoopProgram *p, bool used[LC_CALLEE_COUNT], char *err, size_t errlen);

/* c_static_check of each program (NULL entries skipped), used[] their
 * union. Returns 0 or non-zero with a message. */
int c_static_check_all(const LoopProgram *const *progs, int n_progs, bool used[LC_CALLEE_COUNT],
                       char *err, size_t errlen);

/* The runtime files a static project needs for those calls (rt_static.c,
 * the headers, the files of the used callees; with gen, a generating
 * model's, rt_stepper.c and rt_gen_model.c and their headers), sorted; at
 * most cap. Returns their number, or -1 when cap is too small. */
int c_static_runtime(const bool used[LC_CALLEE_COUNT], bool gen, const char **files, int cap);

/* The static project's translation units, as its Makefile compiles them:
 * model.c, api.c, for a generating model (step not NULL; encode NULL for
 * a decoder) step.c, encode.c, gen_info.c, gen_api.c, runtime/rt_*.c of
 * the pieces the programs call, and weights.c when embedded. Returns
 * their number, or -1 when cap is too small. */
int c_static_sources(const LoopProgram *p, const LoopProgram *step, const LoopProgram *encode,
                     bool embed, char (*files)[64], int cap);

/* ---- size.c: code size, measured with the target's compiler ---- */

typedef struct CSize {
  int64_t text, data, bss; /* bytes, as binutils' size counts them */
} CSize;

/* Compiles each of files (paths relative to the project dir: model.c,
 * api.c, weights.c, runtime/rt_*.c) with cc ("CC FLAGS...", split on
 * blanks) and the project Makefile's own flags, into a temporary directory,
 * and reads each object's section sizes into sizes[i]. The compiler must
 * produce ELF. Returns 0 or non-zero with a message. */
int c_static_measure(const char *dir, const char *cc, const char *const *files, int n_files,
                     CSize *sizes, char *err, size_t errlen);

#endif
