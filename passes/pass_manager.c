/* passes/pass_manager.c — the pass registry, the -O pipelines, the drivers
 * that run a pipeline's graph passes and its loop passes (verify,
 * print-after, timing, statistics) and the rebuild helper graph passes
 * share.
 *
 * Invariants kept here:
 *  - every pass, graph or loop, is one row of pass_table; every -O level is
 *    one straight list in level_pipelines, written in terms of those names;
 *  - in a pipeline no graph pass follows a loop pass (the graph is lowered
 *    once, between the two levels);
 *  - the IR handed to the first pass of a level verifies, and so does the IR
 *    after every pass that changed it; whether a pass changed it is decided
 *    here, not by the pass's own say-so: for a graph by a fingerprint of its
 *    nodes, outputs and symbols (graph passes rebuild), for a loop program
 *    by a hash of its printed listing (loop passes rewrite in place, and the
 *    listing shows everything the program holds);
 *  - a failing pass leaves an error in ctx->diags naming it, whether or not
 *    the pass reported one itself;
 *  - pass_rewrite builds a fresh graph in the old graph's arena; the old
 *    node array is never written, so a rewrite callback may read it freely.
 */
#include "passes/passes.h"

#include "ir/loop.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the registry: adding a pass is one file and one row here ---- */

static const PassInfo pass_table[] = {
    {"dce", "remove nodes no output depends on (inputs stay, unused params go)", pass_dce_run},
    {"decompose-attention",
     "attention -> attn.mix(attn.probs(q, k, mask), v); materialises the score matrix",
     pass_decompose_attention_run},
    {"prune-rows",
     "take(f(x)) -> f(take(x)) through row-wise ops: a classifier's last layer runs one row",
     pass_prune_rows_run},
    {"fuse-add-norm",
     "add + layernorm -> one row kernel (fused add_layernorm[_sum]; writes the sum when read)",
     pass_fuse_add_norm_run},
    {"fuse-elementwise",
     "trees of elementwise ops, gathers and masks -> one loop nest (fused elementwise)",
     pass_fuse_elementwise_run},
    {"fuse-qkv",
     "an attention's q/k/v linears of one input -> one linear over param.concat weights + slices",
     pass_fuse_qkv_run},
    {"flash-attention",
     "attention -> attention.flash: blocks of keys, online softmax, no Tq x Tk scores",
     pass_flash_attention_run},
    {"fuse-epilogue",
     "linear + relu/gelu/gelu_tanh (+ residual add) -> one linear whose GEMM epilogue applies them",
     pass_fuse_epilogue_run},
    {"pack-weights",
     "rt_linear on a whole weight -> rt_linear_packed on it packed once into GEMM panels (loop IR)",
     NULL, PASS_LOOP, pass_pack_weights_run},
    {"tile",
     "rt_linear's cache blocks, parallel grain and thread split, attention's blocks, from the target's caches (loop IR)",
     NULL, PASS_LOOP, pass_tile_run},
    {"lane-split",
     "reassociable reductions into one variable -> 8 lanes folded pairwise (loop IR)", NULL,
     PASS_LOOP, pass_lane_split_run},
    {"share-kernels",
     "kernels equal up to the buffers they touch share one generated function (loop IR)", NULL,
     PASS_LOOP, pass_share_kernels_run},
};

enum { PASS_TABLE_N = (int)(sizeof pass_table / sizeof pass_table[0]) };

/* ---- the optimisation levels, each a straight list of passes ----
 * decompose-attention is not here: it is a lowering that costs memory. */

static const char *const level_pipelines[4] = {
    [0] = "",    /* -O0: the graph as the frontend built it */
    [1] = "dce,lane-split,share-kernels",            /* -O1 */
    [2] = "prune-rows,fuse-qkv,fuse-epilogue,fuse-add-norm,fuse-elementwise,flash-attention,dce,"
          "pack-weights,tile,lane-split,share-kernels", /* -O2 */
    [3] = "prune-rows,fuse-qkv,fuse-epilogue,fuse-add-norm,fuse-elementwise,flash-attention,dce,"
          "pack-weights,tile,lane-split,share-kernels", /* -O3 */
};

const PassInfo *pass_registry(int *n) {
  *n = PASS_TABLE_N;
  return pass_table;
}

const PassInfo *pass_find(const char *name, size_t len) {
  for (int i = 0; i < PASS_TABLE_N; i++)
    if (strlen(pass_table[i].name) == len && memcmp(pass_table[i].name, name, len) == 0)
      return &pass_table[i];
  return NULL;
}

const char *pass_level_name(PassLevel level) {
  switch (level) {
  case PASS_GRAPH: return "graph";
  case PASS_LOOP: return "loop";
  case PASS_LEVEL_COUNT: break;
  }
  return "?";
}

void pass_names_list(char *buf, size_t n) {
  size_t k = 0;
  if (n)
    buf[0] = 0;
  for (int i = 0; i < PASS_TABLE_N && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", pass_table[i].name);
}

/* The loop pass a graph pass may not follow, or NULL. */
static const PassInfo *loop_pass_before(const PassPipeline *p, const PassInfo *pass) {
  if (pass->level != PASS_GRAPH)
    return NULL;
  for (int i = 0; i < p->n; i++)
    if (p->passes[i]->level == PASS_LOOP)
      return p->passes[i];
  return NULL;
}

bool pass_pipeline_add(PassPipeline *p, const PassInfo *pass) {
  if (p->n >= PASS_PIPELINE_MAX || loop_pass_before(p, pass))
    return false;
  p->passes[p->n++] = pass;
  return true;
}

int pass_pipeline_count(const PassPipeline *p, PassLevel level) {
  int n = 0;
  for (int i = 0; i < p->n; i++)
    n += p->passes[i]->level == level;
  return n;
}

static bool is_space(char c) {
  return c == ' ' || c == '\t';
}

bool pass_pipeline_disable(PassPipeline *pl, const char *list, char *err, size_t errlen) {
  char names[512];
  pass_names_list(names, sizeof names);
  const char *p = list;
  for (;;) {
    const char *s = p, *e = strchr(p, ',');
    if (!e)
      e = p + strlen(p);
    while (s < e && (is_space(*s) || *s == '-'))
      s++;
    const char *t = e;
    while (t > s && is_space(t[-1]))
      t--;
    if (t == s) {
      snprintf(err, errlen, "empty pass name in '%s' (available passes: %s)", list, names);
      return false;
    }
    const PassInfo *pi = pass_find(s, (size_t)(t - s));
    if (!pi) {
      snprintf(err, errlen, "unknown pass '%.*s' (available passes: %s)", (int)(t - s), s, names);
      return false;
    }
    int k = 0;
    for (int i = 0; i < pl->n; i++)
      if (pl->passes[i] != pi)
        pl->passes[k++] = pl->passes[i];
    if (k == pl->n) {
      snprintf(err, errlen, "pass '%s' is not in the pipeline, so it cannot be disabled",
               pi->name);
      return false;
    }
    pl->n = k;
    if (!*e)
      return true;
    p = e + 1;
  }
}

bool pass_pipeline_parse(const char *list, PassPipeline *out, char *err, size_t errlen) {
  char names[512];
  pass_names_list(names, sizeof names);
  memset(out, 0, sizeof *out);
  const char *p = list;
  while (is_space(*p))
    p++;
  if (!*p) {
    snprintf(err, errlen, "empty pass list (available passes: %s)", names);
    return false;
  }
  for (;;) {
    const char *s = p, *e = strchr(p, ',');
    if (!e)
      e = p + strlen(p);
    while (s < e && is_space(*s))
      s++;
    const char *t = e;
    while (t > s && is_space(t[-1]))
      t--;
    if (t == s) {
      snprintf(err, errlen, "empty pass name in '%s' (available passes: %s)", list, names);
      return false;
    }
    const PassInfo *pi = pass_find(s, (size_t)(t - s));
    if (!pi) {
      snprintf(err, errlen, "unknown pass '%.*s' (available passes: %s)", (int)(t - s), s, names);
      return false;
    }
    const PassInfo *lp = loop_pass_before(out, pi);
    if (lp) {
      snprintf(err, errlen,
               "graph pass '%s' cannot follow loop pass '%s': the graph is lowered to loop IR "
               "once, so list the graph passes first",
               pi->name, lp->name);
      return false;
    }
    if (!pass_pipeline_add(out, pi)) {
      snprintf(err, errlen, "more than %d passes in one pipeline", PASS_PIPELINE_MAX);
      return false;
    }
    if (!*e)
      return true;
    p = e + 1;
  }
}

bool pass_pipeline_level(int level, PassPipeline *out) {
  memset(out, 0, sizeof *out);
  if (level < 0 || level > 3)
    return false;
  if (!*level_pipelines[level])
    return true;
  char err[256];
  bool ok = pass_pipeline_parse(level_pipelines[level], out, err, sizeof err);
  TFMC_ASSERT(ok); /* the level table names registered passes */
  return true;
}

bool pass_print_after_check(const PassPipeline *p, const char *print_after, char *err,
                            size_t errlen) {
  if (!print_after || strcmp(print_after, "all") == 0)
    return true;
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->passes[i]->name, print_after) == 0)
      return true;
  char names[512];
  pass_names_list(names, sizeof names);
  if (!pass_find(print_after, strlen(print_after)))
    snprintf(err, errlen, "--print-after: unknown pass '%s' (available passes: %s, or 'all')",
             print_after, names);
  else
    snprintf(err, errlen, "--print-after: pass '%s' is not in the pipeline", print_after);
  return false;
}

void pass_note(PassContext *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->note, sizeof ctx->note, fmt, ap);
  va_end(ap);
}

/* ---- the driver ---- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/* Changes whenever a pass touches the graph's nodes, outputs or symbols
 * (rebuilt graphs get fresh arena strings, so a rebuild always counts). */
static uint64_t fingerprint(const IrGraph *g) {
  uint64_t h = 14695981039346656037ULL;
  h = fnv(h, &g->nodes, sizeof g->nodes);
  h = fnv(h, &g->n_nodes, sizeof g->n_nodes);
  if (g->n_nodes > 0)
    h = fnv(h, g->nodes, (size_t)g->n_nodes * sizeof *g->nodes);
  h = fnv(h, &g->n_outputs, sizeof g->n_outputs);
  if (g->n_outputs > 0)
    h = fnv(h, g->outputs, (size_t)g->n_outputs * sizeof *g->outputs);
  h = fnv(h, &g->n_syms, sizeof g->n_syms);
  return fnv(h, g->syms, sizeof g->syms);
}

static const IrLoc NO_LOC = {NULL, 0, 0};

/* A hash of the listing: it shows every buffer, kernel, variable type,
 * statement and expression, so any change a pass makes changes it (up to
 * a hash collision). Costs a print of the program per pass. */
static uint64_t loop_fingerprint(const LoopProgram *p) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  TFMC_ASSERT(f);
  loop_program_print(p, f);
  fclose(f);
  uint64_t h = fnv(14695981039346656037ULL, text, n);
  free(text);
  return h;
}

/* ---- one runner for both levels: what it needs to know of each ---- */

typedef struct Level {
  PassLevel level;
  const char *pass_word;  /* "pass" / "loop pass": messages and the stats table */
  const char *ir_word;    /* "IR" / "loop IR": print-after headers */
  const char *unit;       /* "nodes" / "kernels": the stats column */
  const char *changed;    /* the stats note of a pass that said nothing */
  const char *bad_input;  /* the IR given to the pipeline does not verify */
  const char *bad_output; /* "... '%s' left ... that does not verify" (pass name) */
  uint64_t (*fingerprint)(const void *ir);
  int (*count)(const void *ir);
  void (*print)(const void *ir, FILE *out);
  bool (*verify)(const void *ir, Diags *d, const char *when); /* reports when, false */
  bool (*run)(const PassInfo *pass, void *ir, PassContext *ctx);
} Level;

static uint64_t graph_fingerprint(const void *ir) { return fingerprint(ir); }
static int graph_count(const void *ir) { return ((const IrGraph *)ir)->n_nodes; }
static void graph_print(const void *ir, FILE *out) { ir_graph_print(ir, out); }
static bool graph_verify(const void *ir, Diags *d, const char *when) {
  if (ir_graph_verify(ir, d))
    return true;
  diag_error(d, NO_LOC, "%s", when);
  return false;
}
static bool graph_run(const PassInfo *pass, void *ir, PassContext *ctx) {
  return pass->run(ir, ctx);
}

static uint64_t loop_fingerprint_of(const void *ir) { return loop_fingerprint(ir); }
static int loop_count(const void *ir) { return ((const LoopProgram *)ir)->n_kernels; }
static void loop_print(const void *ir, FILE *out) { loop_program_print(ir, out); }
static bool loop_verify(const void *ir, Diags *d, const char *when) {
  char err[512];
  if (loop_program_verify(ir, err, sizeof err))
    return true;
  diag_error(d, NO_LOC, "%s: %s", when, err);
  return false;
}
static bool loop_run(const PassInfo *pass, void *ir, PassContext *ctx) {
  return pass->run_loop(ir, ctx);
}

static const Level graph_level = {
    PASS_GRAPH, "pass", "IR", "nodes", "changed the graph",
    "the graph given to the pass pipeline does not verify; no pass ran",
    "pass '%s' left a graph that does not verify (errors above)",
    graph_fingerprint, graph_count, graph_print, graph_verify, graph_run};

static const Level loop_level = {
    PASS_LOOP, "loop pass", "loop IR", "kernels", "changed the program",
    "the loop program given to the pass pipeline does not verify; no pass ran",
    "loop pass '%s' left a program that does not verify",
    loop_fingerprint_of, loop_count, loop_print, loop_verify, loop_run};

/* Runs pl's passes of level L over ir: verify the input, then per pass run,
 * detect a change by fingerprint, print after it on request, verify what
 * changed, and a stats line; the totals last. */
static bool run_level(void *ir, const PassPipeline *pl, PassContext *ctx, const Level *L) {
  TFMC_ASSERT(ir && pl && ctx && ctx->diags);
  Diags *d = ctx->diags;
  FILE *pout = ctx->print_out ? ctx->print_out : stderr;
  FILE *sout = ctx->stats_out;
  if (!L->verify(ir, d, L->bad_input))
    return false;
  int first = L->count(ir), n_run = 0;
  double total_ms = 0;
  if (sout)
    fprintf(sout, "%-22s %9s  %-14s %9s  %s\n", L->pass_word, "ms", L->unit, "verify ms",
            "what it did");
  for (int i = 0; i < pl->n; i++) {
    const PassInfo *pass = pl->passes[i];
    if (pass->level != L->level)
      continue; /* the other level's runner takes it */
    n_run++;
    int before = L->count(ir), errors_before = d->n_errors;
    uint64_t h = L->fingerprint(ir);
    ctx->note[0] = 0;
    double t0 = now_ms();
    bool ok = L->run(pass, ir, ctx);
    double pass_ms = now_ms() - t0;
    if (!ok) {
      if (d->n_errors == errors_before)
        diag_error(d, NO_LOC, "%s '%s' failed without saying why", L->pass_word, pass->name);
      else
        diag_error(d, NO_LOC, "%s '%s' failed", L->pass_word, pass->name);
      return false;
    }
    bool changed = L->fingerprint(ir) != h;
    if (ctx->print_after &&
        (strcmp(ctx->print_after, "all") == 0 || strcmp(ctx->print_after, pass->name) == 0)) {
      fprintf(pout, "# %s after pass '%s'%s\n", L->ir_word, pass->name,
              changed ? "" : " (unchanged)");
      if (L->level == PASS_GRAPH && ctx->print_dot)
        ir_graph_print_dot(ir, pout); /* the '#' header line is a comment to dot too */
      else
        L->print(ir, pout);
    }
    double verify_ms = 0;
    if (changed) {
      char when[160];
      snprintf(when, sizeof when, L->bad_output, pass->name);
      double t1 = now_ms();
      bool good = L->verify(ir, d, when);
      verify_ms = now_ms() - t1;
      if (!good)
        return false;
    }
    total_ms += pass_ms + verify_ms;
    if (sout) {
      char counts[64];
      snprintf(counts, sizeof counts, "%d -> %d", before, L->count(ir));
      fprintf(sout, "%-22s %9.3f  %-14s %9.3f  %s\n", pass->name, pass_ms, counts, verify_ms,
              ctx->note[0] ? ctx->note
              : changed    ? L->changed
                           : "no change");
    }
  }
  if (sout) {
    char counts[64];
    snprintf(counts, sizeof counts, "%d -> %d", first, L->count(ir));
    fprintf(sout, "%-22s %9.3f  %-14s (%d %s%s)\n", "total", total_ms, counts, n_run,
            L->pass_word, n_run == 1 ? "" : "es");
  }
  return true;
}

bool pass_pipeline_run(IrGraph *g, const PassPipeline *p, PassContext *ctx) {
  return run_level(g, p, ctx, &graph_level);
}

bool pass_pipeline_run_loop(LoopProgram *p, const PassPipeline *pl, PassContext *ctx) {
  return run_level(p, pl, ctx, &loop_level);
}

/* ---- rebuilding ---- */

int pass_rewrite_operand(const PassRewrite *rw, int id, int k) {
  const IrNode *n = &rw->old->nodes[id];
  TFMC_ASSERT(k >= 0 && k < n->n_operands);
  int v = rw->map[n->operands[k]];
  TFMC_ASSERT(v >= 0); /* a kept node's operand was dropped */
  return v;
}

int pass_rewrite_copy(PassRewrite *rw, int id) {
  const IrNode *n = &rw->old->nodes[id];
  int ops[IR_MAX_OPERANDS];
  for (int k = 0; k < n->n_operands; k++)
    ops[k] = pass_rewrite_operand(rw, id, k);
  return ir_build_typed(rw->g, n->op, ops, n->n_operands, &n->attrs, n->type, n->loc);
}

void pass_rewrite(IrGraph *g, const bool *keep, PassRewriteFn fn, void *user) {
  Arena *a = g->arena;
  IrGraph *old = arena_alloc(a, sizeof *old);
  *old = *g;
  IrGraph *ng = ir_graph_create(a, old->name);
  /* same symbols at the same indices, so types copy as they are */
  memcpy(ng->syms, old->syms, sizeof ng->syms);
  ng->n_syms = old->n_syms;
  ng->pad_id = old->pad_id;
  PassRewrite rw = {old, ng, arena_alloc(a, (size_t)(old->n_nodes + 1) * sizeof(int))};
  for (int id = 0; id < old->n_nodes; id++) {
    int r = -1;
    if (!keep || keep[id]) {
      r = fn ? fn(&rw, id, user) : PASS_COPY;
      if (r == PASS_COPY)
        r = pass_rewrite_copy(&rw, id);
      else if (r == PASS_DROP)
        r = -1;
      TFMC_ASSERT(r >= -1 && r < ng->n_nodes);
    }
    rw.map[id] = r;
  }
  for (int i = 0; i < old->n_outputs; i++) {
    int v = rw.map[old->outputs[i].value];
    TFMC_ASSERT(v >= 0); /* a pass dropped an output */
    ir_graph_add_output(ng, old->outputs[i].name, v);
  }
  *g = *ng;
}
