/* backends/driver.c — the compile pipeline, once (driver.h lists it).
 *
 * Invariants: weights are checked against the graph as built, before any
 * pass (passes keep the inputs and the params they still read, and packing
 * binds params by name); the run-time description is made from the graph
 * the backends compile, so every binder checks inputs against the program
 * that runs; a stage reports its errors and the stages after it do not run. */
#include "backends/driver.h"

#include "backends/exec.h"
#include "runtime/rt_safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* 1. front end: a spec lowered to graph IR, or a textual graph. */
static IrGraph *front_end(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                          Spec **spec, char *err, size_t errlen) {
  SrcFile *src = src_file_read(a, path, err, errlen);
  if (!src) return NULL;
  diags_add_source(d, src);
  IrGraph *g = NULL;
  if (ends_with(path, ".tfir")) {
    if (o->attention) {
      snprintf(err, errlen, "--attention applies to specs, not .tfir files");
      return NULL;
    }
    g = ir_graph_parse(a, src, d);
  } else {
    *spec = spec_parse(a, src, d);
    if (*spec) g = spec_lower(a, *spec, &(LowerOptions){o->attention}, d);
  }
  if (g && !ir_graph_verify(g, d)) g = NULL;
  return g;
}

/* 2. weights: the checkpoint through the spec's weight map (canonical names
 * without a spec), or random. The checkpoint is unmapped before returning:
 * the WeightSet holds its own f32 copies, and a mapping kept open would stay
 * in the resident set (bert-base's peak RSS under the JIT fell by ~440 MB)
 * while the backend packs and runs. */
static WeightSet *weights_get(Arena *a, Diags *d, const IrGraph *g, const Spec *spec,
                              const DriverOptions *o, char *err, size_t errlen) {
  if (!o->weights) return weights_random(a, g, o->seed);
  RtSafetensors *st = NULL;
  if (rt_st_open(o->weights, &st, err, errlen)) return NULL;
  int errors0 = d->n_errors;
  WeightSet *w = weights_load(a, g, spec, st, d);
  rt_st_close(st);
  if (!w) {
    int n = d->n_errors - errors0;
    snprintf(err, errlen, "%s does not fit %s '%s' (%d problem%s above)", o->weights,
             spec ? "model" : "graph", g->name, n, n == 1 ? "" : "s");
  }
  return w;
}

/* 6. the run-time description of g (and of prog, once lowered). */
static RtModelInfo *model_info(Arena *a, const Compiled *c) {
  int64_t vocab[RT_MAX_IO] = {0};
  pass_input_vocabs(c->g, vocab);
  return pass_model_info(a, c->g, c->prog, vocab, c->g->pad_id);
}

static int compile(Arena *a, Diags *d, const DriverOptions *o, Compiled *c, char *err,
                   size_t errlen) {
  /* 2. weights */
  if (!c->w && !o->no_weights && !(c->w = weights_get(a, d, c->g, c->spec, o, err, errlen)))
    return 1;
  /* 3. graph passes */
  PassContext *pctx = o->pass_ctx;
  bool run_passes = pctx && ((o->passes && o->passes->n) || pctx->stats_out);
  if (run_passes && !pass_pipeline_run(c->g, o->passes, pctx)) return 1;
  if (o->stage == DRIVER_GRAPH) {
    c->info = model_info(a, c);
    return 0;
  }
  /* 4. lowering to loop IR, verified (a failure is a compiler bug) */
  c->prog = pass_lower_loops(a, c->g);
  char verr[512];
  if (!loop_program_verify(c->prog, verr, sizeof verr)) {
    snprintf(err, errlen, "internal error: lowering produced invalid loop IR: %s", verr);
    return 1;
  }
  /* 5. loop passes */
  if (run_passes && !pass_pipeline_run_loop(c->prog, o->passes, pctx)) return 1;
  /* 6. the run-time description and the packed weights */
  c->info = model_info(a, c);
  if (o->stage == DRIVER_PACKED) {
    TFMC_ASSERT(c->w);
    /* 64-byte aligned: compiled code may assume each tensor's alignment */
    uintptr_t raw = (uintptr_t)arena_alloc(a, (size_t)c->prog->weights_floats * 4 + 128);
    c->packed = (float *)((raw + 63) & ~(uintptr_t)63);
    backend_pack_weights(c->prog, c->w, c->packed);
  }
  return 0;
}

int driver_compile_file(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                        Compiled *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  if (errlen) *err = 0;
  /* 1. front end */
  if (!(c->g = front_end(a, d, path, o, &c->spec, err, errlen))) return 1;
  return compile(a, d, o, c, err, errlen);
}

int driver_compile_loop_file(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                             LoopProgram **out, char *err, size_t errlen) {
  *out = NULL;
  if (errlen) *err = 0;
  const PassPipeline *pl = o->passes;
  if (pl && pass_pipeline_count(pl, PASS_GRAPH)) {
    snprintf(err, errlen, "%s is loop IR: the pipeline may only hold loop passes", path);
    return 1;
  }
  SrcFile *src = src_file_read(a, path, err, errlen);
  if (!src) return 1;
  diags_add_source(d, src);
  LoopProgram *p = loop_program_parse(a, src, d);
  if (!p) return 1;
  char verr[512];
  if (!loop_program_verify(p, verr, sizeof verr)) {
    snprintf(err, errlen, "%s does not verify: %s", path, verr);
    return 1;
  }
  PassContext *pctx = o->pass_ctx;
  if (pctx && ((pl && pl->n) || pctx->stats_out) && !pass_pipeline_run_loop(p, pl, pctx)) return 1;
  *out = p;
  return 0;
}

int driver_compile_graph(Arena *a, Diags *d, IrGraph *g, WeightSet *w, const DriverOptions *o,
                         Compiled *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  if (errlen) *err = 0;
  if (!ir_graph_verify(g, d)) return 1;
  c->g = g;
  c->w = w;
  return compile(a, d, o, c, err, errlen);
}
