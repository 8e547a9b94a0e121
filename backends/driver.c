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
#include "runtime/rt_weights.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (o->attention || o->n_outputs) {
      snprintf(err, errlen, "%s applies to specs, not .tfir files",
               o->attention ? "--attention" : "--output");
      return NULL;
    }
    g = ir_graph_parse(a, src, d);
  } else {
    *spec = spec_parse(a, src, d);
    LowerOptions lo = {.attention_layer = o->attention, .step = o->step,
                       .outputs = o->outputs, .n_outputs = o->n_outputs};
    if (*spec) g = spec_lower(a, *spec, &lo, d);
  }
  if (g && !ir_graph_verify(g, d)) g = NULL;
  return g;
}

/* 2. weights: the checkpoint through the spec's weight map (canonical names
 * without a spec), or random. The checkpoint is unmapped before returning:
 * the WeightSet holds its own f32 copies, and a mapping kept open would stay
 * in the resident set (bert-base's peak RSS under the JIT fell by ~440 MB)
 * while the backend packs and runs. */
/* NaN or Inf in a checkpoint would silently poison every output: each
 * weight holding any is named with its count (the first few; then a
 * total), as warnings, or errors when strict. Returns the number of such
 * weights. */
static int nonfinite_weights(Diags *d, const char *file, const WeightSet *w, bool strict) {
  enum { SHOWN = 20 };
  int bad = 0;
  IrLoc at = {file, 0, 0};
  TFMC_ASSERT(w->nonfinite); /* weights_load counts them while it reads */
  for (int i = 0; i < w->n; i++) {
    const Weight *x = &w->items[i];
    int64_t n = 1, count = w->nonfinite[i];
    for (int k = 0; k < x->type.rank; k++) n *= x->type.dims[k].value;
    if (!count || bad++ >= SHOWN) continue;
    (strict ? diag_error : diag_warning)(d, at, "weight '%s' has %lld NaN or Inf value%s (of %lld)",
                                         x->name, (long long)count, count == 1 ? "" : "s",
                                         (long long)n);
  }
  if (bad > SHOWN)
    (strict ? diag_error : diag_warning)(d, at, "%d more weights hold NaN or Inf values",
                                         bad - SHOWN);
  return bad;
}

/* The machine's memory in bytes, or INT64_MAX when unknown. */
static int64_t physical_memory(void) {
#ifdef _SC_PHYS_PAGES
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0 && pages <= INT64_MAX / size) return (int64_t)pages * size;
#endif
  return INT64_MAX;
}

static WeightSet *weights_get(Arena *a, Diags *d, const IrGraph *g, const Spec *spec,
                              const DriverOptions *o, char *err, size_t errlen) {
  /* a model bigger than the machine is refused before its pages are
   * touched (later the kernel would kill us; an allocation failure is
   * reported where it happens) */
  int64_t need = weights_bytes(g), have = physical_memory();
  if (need > have) {
    snprintf(err, errlen,
             "the weights of '%s' need %lld bytes as f32 (%.1f GB); this machine has %lld bytes "
             "of memory",
             g->name, (long long)need, (double)need / 1e9, (long long)have);
    return NULL;
  }
  if (!o->weights) {
    WeightSet *w = weights_random(a, g, o->seed);
    for (int i = 0; !w && i < g->n_nodes; i++)
      for (int k = 0; g->nodes[i].op == IR_OP_PARAM && k < g->nodes[i].type.rank; k++)
        if (g->nodes[i].type.dims[k].sym >= 0 || g->nodes[i].type.dims[k].value < 0) {
          snprintf(err, errlen, "param '%s' has a symbolic or negative dimension; weights need "
                   "constant shapes", g->nodes[i].attrs.name ? g->nodes[i].attrs.name : "?");
          return NULL;
        }
    if (!w)
      snprintf(err, errlen,
               "out of memory: the weights of '%s' need %lld bytes as f32 (%.1f GB), more than "
               "this process can allocate",
               g->name, (long long)need, (double)need / 1e9);
    return w;
  }
  RtSafetensors *st = NULL;
  if (rt_st_open(o->weights, &st, err, errlen)) return NULL;
  int errors0 = d->n_errors;
  /* weights that will be packed are read from the checkpoint as the packer
   * needs them (the set keeps it mapped), never into an f32 copy */
  WeightSet *w = o->stage == DRIVER_PACKED ? weights_load_mapped(a, g, spec, st, d)
                                           : weights_load(a, g, spec, st, d);
  if (o->stage != DRIVER_PACKED || !w) rt_st_close(st);
  if (w && nonfinite_weights(d, o->weights, w, o->strict) && o->strict) {
    snprintf(err, errlen, "%s has NaN or Inf weights (refused under --strict)", o->weights);
    return NULL;
  }
  if (!w) {
    int n = d->n_errors - errors0;
    snprintf(err, errlen, "%s does not fit %s '%s' (%d problem%s above)", o->weights,
             spec ? "model" : "graph", g->name, n, n == 1 ? "" : "s");
  }
  return w;
}

/* 6. the run-time description of g (and of prog, once lowered); the
 * output "attention" is named by the layer o->attention chose (what an
 * executable's --attention-map labels it with). */
static RtModelInfo *model_info(Arena *a, const Compiled *c, const DriverOptions *o) {
  int64_t vocab[RT_MAX_IO] = {0};
  pass_input_vocabs(c->g, vocab);
  RtModelInfo *m = pass_model_info(a, c->g, c->prog, vocab, c->g->pad_id);
  for (int i = 0; o->attention && i < m->n_outputs; i++)
    if (strcmp(m->outputs[i].name, "attention") == 0)
      m->attention_layer = arena_strdup(a, o->attention);
  return m;
}

/* x's buffer holding what v holds: the same weight (the very same Weight
 * data: loaded weights are never written after the load) in the same
 * layout and shape; NULL when x has none. */
static const LBuffer *twin_buffer(const Compiled *x, const WeightSet *w, const LBuffer *v) {
  const Weight *wv = ir_weights_find(w, v->name);
  for (int b = 0; wv && b < x->prog->n_bufs; b++) {
    const LBuffer *u = &x->prog->bufs[b];
    if (u->kind != LB_WEIGHT || strcmp(u->name, v->name) != 0 || u->layout != v->layout ||
        u->rows != v->rows || u->cols != v->cols || u->elem != v->elem)
      continue;
    const Weight *wu = ir_weights_find(x->w, u->name);
    if (ir_weight_same(x->w, wu, w, wv)) return u;
  }
  return NULL;
}

static int64_t weight_buf_floats(const LBuffer *b, const WeightSet *w) {
  if (b->layout != LW_PLAIN) return loop_weight_layout_floats(b);
  const Weight *wt = ir_weights_find(w, b->name);
  int64_t n = 1;
  for (int d = 0; wt && d < wt->type.rank; d++) n *= wt->type.dims[d].value;
  return n;
}

/* Moves each weight buffer of c's program that has a twin in x's
 * (twin_buffer) to its twin's offset, and the others after x's block from
 * *end on (rounded up to 16 floats; *end 0: x's weights_floats), advancing
 * *end past them; c->packed_from is the first of those, c->prog's
 * weights_floats their end (x's without any). Changes nothing and returns
 * false when no buffer has a twin, or, with end NULL (the program runs on
 * its packed block alone: a JIT session), when one has none. */
static bool weights_relocate(const Compiled *x, Compiled *c, int64_t *end) {
  if (!x || !x->packed || !x->prog || !x->w || !c->w || x->packed_base) return false;
  LoopProgram *p = c->prog;
  int twins = 0, weights = 0;
  for (int b = 0; b < p->n_bufs; b++)
    if (p->bufs[b].kind == LB_WEIGHT) {
      weights++;
      twins += twin_buffer(x, c->w, &p->bufs[b]) != NULL;
    }
  if (!twins || (!end && twins < weights)) return false;
  int64_t none = 0;
  if (!end) end = &none;
  if (*end < x->prog->weights_floats) *end = x->prog->weights_floats;
  int64_t from = (*end + 15) / 16 * 16, ofs = from;
  for (int b = 0; b < p->n_bufs; b++) {
    LBuffer *v = &p->bufs[b];
    if (v->kind != LB_WEIGHT) continue;
    const LBuffer *u = twin_buffer(x, c->w, v);
    if (u) {
      v->offset = u->offset;
    } else {
      v->offset = ofs;
      ofs = (ofs + weight_buf_floats(v, c->w) + 15) / 16 * 16;
    }
  }
  c->packed_base = x;
  c->packed_from = ofs > from ? from : 0;
  p->weights_floats = ofs > from ? ofs : x->prog->weights_floats;
  if (ofs > from) *end = ofs;
  return true;
}

/* reloc_end: where weights of the program's own go after o->packed_like's
 * block (weights_relocate; NULL: it may have none, as it runs on that
 * block alone) */
static int compile(Arena *a, Diags *d, const DriverOptions *o, Compiled *c, int64_t *reloc_end,
                   char *err, size_t errlen) {
  /* 2. weights (checked against this graph once, when they were loaded) */
  if (!c->w && !o->no_weights && o->weight_set) c->w = o->weight_set;
  if (!c->w && !o->no_weights && !(c->w = weights_get(a, d, c->g, c->spec, o, err, errlen)))
    return 1;
  /* 3. graph passes */
  PassContext *pctx = o->pass_ctx;
  bool run_passes = pctx && ((o->passes && o->passes->n) || pctx->stats_out);
  if (run_passes && !pass_pipeline_run(c->g, o->passes, pctx)) return 1;
  /* derived params (param.concat, made by passes): computed once, here,
   * for the interpreter and the packer alike */
  if (c->w && !(c->w = ir_weights_derive(a, c->g, c->w, err, errlen))) return 1;
  if (o->stage == DRIVER_GRAPH) {
    c->info = model_info(a, c, o);
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
  /* 5b. weights another program packed already: read where they are
   * (gpt2-small's step: 0.5 GB not packed twice) */
  if (o->stage == DRIVER_PACKED && weights_relocate(o->packed_like, c, reloc_end) &&
      !loop_program_verify(c->prog, verr, sizeof verr)) {
    snprintf(err, errlen, "internal error: weights moved to another program's: %s", verr);
    return 1;
  }
  /* 6. the run-time description and the packed weights */
  c->info = model_info(a, c, o);
  if (c->packed_base && !c->packed_from) { /* nothing of its own */
    c->packed = c->packed_base->packed;
    return 0;
  }
  if (o->stage == DRIVER_PACKED) {
    TFMC_ASSERT(c->w);
    /* 64-byte aligned: compiled code may assume each tensor's alignment */
    int64_t floats = c->prog->weights_floats - c->packed_from;
    uintptr_t raw = (uintptr_t)arena_try_alloc(a, (size_t)floats * 4 + 128);
    if (!raw) {
      snprintf(err, errlen,
               "out of memory: packing the weights needs another %lld bytes (%.1f GB)",
               (long long)floats * 4, (double)floats * 4e-9);
      return 1;
    }
    c->packed = (float *)((raw + 63) & ~(uintptr_t)63);
    /* huge pages before the packer first writes it */
    rt_weights_advise_huge(c->packed, (size_t)floats * 4);
    if (backend_pack_weights(c->prog, c->w, c->packed, c->packed_from, err, errlen)) return 1;
    /* the checkpoint's pages out of the process until another compile of
     * the same weights (tfmc bench) reads them again: gpt2-small's 665 MB
     * stayed in the RSS of the JIT's compile and every run */
    if (c->w->src && c->w->src->release) c->w->src->release(c->w->src);
  }
  return 0;
}

int driver_compile_file(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                        Compiled *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  if (errlen) *err = 0;
  /* 1. front end */
  if (!(c->g = front_end(a, d, path, o, &c->spec, err, errlen))) return 1;
  return compile(a, d, o, c, NULL, err, errlen);
}

int driver_compile_generation(Arena *a, Diags *d, const char *path, const DriverOptions *o,
                              CompiledGeneration *gen, char *err, size_t errlen) {
  memset(gen, 0, sizeof *gen);
  if (errlen) *err = 0;
  if (ends_with(path, ".tfir")) {
    snprintf(err, errlen, "generation compiles a spec (.tfm), not a .tfir graph");
    return 1;
  }
  /* 1. front end: the spec once, lowered to each graph generation runs */
  SrcFile *src = src_file_read(a, path, err, errlen);
  if (!src) return 1;
  diags_add_source(d, src);
  Spec *spec = spec_parse(a, src, d);
  if (!spec) return 1;
  /* the encoder takes as many sources as the step has rows (a batch of
   * sources; beam search encodes one and copies it to every row) */
  LowerOptions step = {.step = true, .step_max_batch = o->step_rows,
                       .attention_layer = o->attention},
               encode = {.encode = true, .step_max_batch = o->step_rows};
  gen->encoder_decoder = spec->model->arch == ARCH_ENCODER_DECODER;
  gen->step.spec = gen->encode.spec = spec;
  if (!(gen->step.g = spec_lower(a, spec, &step, d)) || !ir_graph_verify(gen->step.g, d)) return 1;
  int64_t end = 0; /* weights of their own after packed_like's block: the encoder's, the step's */
  if (!gen->encoder_decoder) return compile(a, d, o, &gen->step, &end, err, errlen);
  if (!(gen->encode.g = spec_lower(a, spec, &encode, d)) || !ir_graph_verify(gen->encode.g, d))
    return 1;
  /* 2. weights: checked against the whole model (neither graph alone uses
   * every tensor of the checkpoint) */
  WeightSet *w = o->weight_set;
  if (!w && !o->no_weights) {
    IrGraph *full = spec_lower(a, spec, NULL, d);
    if (!full || !ir_graph_verify(full, d) || !(w = weights_get(a, d, full, spec, o, err, errlen)))
      return 1;
  }
  gen->encode.w = gen->step.w = w;
  /* 3.-6. for each */
  return compile(a, d, o, &gen->encode, &end, err, errlen) ||
         compile(a, d, o, &gen->step, &end, err, errlen);
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
  return compile(a, d, o, c, NULL, err, errlen);
}

/* Whether two compiled programs read the same weights in the same layout at
 * the same offsets with the same values (a decoder's forward pass and its
 * step do): then one block of the image serves both. */
static int same_weight_block(const Compiled *x, const Compiled *y) {
  const RtModelInfo *a = x->info, *b = y->info;
  if (a->n_weights != b->n_weights || a->weights_floats != b->weights_floats)
    return 0;
  for (int i = 0; i < a->n_weights; i++) {
    const RtWeightInfo *u = &a->weights[i], *v = &b->weights[i];
    if (strcmp(u->name, v->name) != 0 || u->offset != v->offset || u->layout != v->layout ||
        u->rank != v->rank || memcmp(u->shape, v->shape, sizeof u->shape) != 0)
      return 0;
  }
  return memcmp(x->packed, y->packed, (size_t)a->weights_floats * 4) == 0;
}

int driver_generation_info(Arena *a, const Compiled *forward, const CompiledGeneration *gen,
                           RtGenInfo **out, float **image, char *err, size_t errlen) {
  const Compiled *st = &gen->step, *en = gen->encoder_decoder ? &gen->encode : NULL;
  *out = NULL;
  *image = NULL;
  if (!st->prog || !st->packed || (en && (!en->prog || !en->packed)) ||
      (forward && (!forward->prog || !forward->packed))) {
    snprintf(err, errlen, "internal: generation info before the weights were packed");
    return 1;
  }
  RtGenInfo *gi = arena_alloc(a, sizeof *gi);
  memset(gi, 0, sizeof *gi);
  gi->version = RT_GEN_INFO_VERSION;
  gi->forward = forward ? forward->info : NULL;
  gi->step = st->info;
  gi->encode = en ? en->info : NULL;
  const ModelSpec *m = st->spec->model;
  gi->bos = m->bos_id;
  gi->eos = m->eos_id;
  /* the image: the forward pass's weights, the encoder's, the step's, each
   * block starting 64-byte aligned; a block equal to the forward pass's is
   * that block (decoder-only models: the image is half the size). Programs
   * moved onto the forward pass's block (packed_like: tfmc build) start at
   * 0 too and add only their own weights, which follow it. */
  const Compiled *block[3] = {forward, en, st};
  bool based = forward != NULL; /* every other program reads the forward block */
  for (int k = 1; k < 3; k++) based &= !block[k] || block[k]->packed_base == forward;
  int64_t start[3] = {0, 0, 0}, end = 0, from[3] = {0, 0, 0};
  int alias[3] = {0, 0, 0};
  RtModelInfo *w = arena_alloc(a, sizeof *w);
  memset(w, 0, sizeof *w);
  w->abi_version = RT_ABI_VERSION;
  w->name = st->info->name;
  w->pad_id = -1;
  for (int k = 0; k < 3; k++) {
    if (!block[k]) continue;
    if (based) { /* the forward block's weights, then each one's own from packed_from */
      from[k] = k ? block[k]->packed_from : 0;
      alias[k] = k && !from[k];
      if (block[k]->info->weights_floats > end) end = block[k]->info->weights_floats;
      for (int i = 0; !alias[k] && i < block[k]->info->n_weights; i++)
        w->n_weights += block[k]->info->weights[i].offset >= from[k];
      continue;
    }
    if (k > 0 && forward && same_weight_block(forward, block[k])) {
      alias[k] = 1;
      start[k] = start[0];
      continue;
    }
    start[k] = (end + 15) / 16 * 16;
    end = start[k] + block[k]->info->weights_floats;
    w->n_weights += block[k]->info->n_weights;
  }
  gi->encode_offset = start[1];
  gi->step_offset = start[2];
  RtWeightInfo *ws = arena_alloc(a, (size_t)(w->n_weights + 1) * sizeof *ws);
  int n_w = 0;
  for (int k = 0; k < 3; k++)
    for (int i = 0; block[k] && !alias[k] && i < block[k]->info->n_weights; i++) {
      if (block[k]->info->weights[i].offset < from[k]) continue; /* the forward block's */
      ws[n_w] = block[k]->info->weights[i];
      ws[n_w++].offset += start[k];
    }
  w->weights = ws;
  w->weights_floats = end;
  w->layout_hash = rt_model_layout_hash(ws, w->n_weights);
  gi->weights = w;
  float *img;
  if (forward && end == forward->info->weights_floats) {
    img = forward->packed; /* every other block is in it: that block as it is, no copy */
  } else {
    uintptr_t raw = (uintptr_t)arena_try_alloc(a, (size_t)end * 4 + 128);
    if (!raw) {
      snprintf(err, errlen, "out of memory: the weights image needs %lld bytes",
               (long long)end * 4);
      return 1;
    }
    img = (float *)((raw + 63) & ~(uintptr_t)63);
    memset(img, 0, (size_t)end * 4);
    for (int k = 0; k < 3; k++)
      if (block[k] && !alias[k])
        memcpy(img + start[k] + from[k], block[k]->packed,
               (size_t)(block[k]->info->weights_floats - from[k]) * 4);
  }
  /* the step's state tensors (KV caches) f32[rows, positions, width]: where
   * the plan put them, for beam search's row reordering */
  const IrGraph *g = st->g;
  RtStateInfo *states = arena_alloc(a, (size_t)(g->n_nodes + 1) * sizeof *states);
  int n = 0;
  for (int id = 0; id < g->n_nodes; id++) {
    const IrNode *nd = &g->nodes[id];
    if (nd->op != IR_OP_STATE) continue;
    const LBuffer *lb = NULL;
    for (int b = 0; b < st->prog->n_bufs && !lb; b++)
      if (st->prog->bufs[b].kind == LB_STATE && strcmp(st->prog->bufs[b].name, nd->attrs.name) == 0)
        lb = &st->prog->bufs[b];
    if (!lb || nd->type.rank != 3) {
      snprintf(err, errlen, "internal: state '%s' has no planned buffer of rank 3", nd->attrs.name);
      return 1;
    }
    states[n++] = (RtStateInfo){nd->attrs.name, lb->offset, nd->type.dims[0].value,
                                nd->type.dims[1].value, nd->type.dims[2].value};
  }
  gi->states = states;
  gi->n_states = n;
  if (rt_gen_info_check(gi, err, errlen)) return 1;
  *out = gi;
  *image = img;
  return 0;
}
