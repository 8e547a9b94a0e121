/* passes/passes.h — analyses and transformations over graph IR and loop IR:
 * the statistics the CLI reports, lowering to loop IR with memory planning,
 * the model's run-time description, and (at the end) the pass manager with
 * its registered graph and loop passes. */
#ifndef TFMC_PASSES_H
#define TFMC_PASSES_H

#include "ir/ir.h"

typedef struct GraphStats {
  int64_t n_params;      /* scalar parameters (elements of all params) */
  int64_t weight_bytes;  /* as f32 */
  int64_t n_nodes;
  double flops;          /* multiply-adds counted as 2 FLOPs: linear, attention */
  double flops_linear;
  double flops_attention;
} GraphStats;

/* Counts parameters and FLOPs of one forward pass with the symbols bound to
 * sym_values[i] (indexed like g->syms). Elementwise ops, norms and softmax
 * are not counted (they are O(d) per token against O(d^2)). */
void pass_stats_compute(const IrGraph *g, const int64_t *sym_values, GraphStats *out);

/* loop_stats.c: what one forward of a loop program does, counted from the
 * loop IR with the symbols bound to syms[i] (indexed like the graph's
 * symbols): kernels whose extent is not empty (each runs once per
 * forward), runtime calls (ir/callees.def) made, and bytes stored into the
 * activation arena and the outputs, by the kernels' stores and by the
 * calls (what each writes follows from its size arguments). exact is false
 * when some loop bound or call size could not be evaluated statically
 * (those are then left out of the counts). */
typedef struct LoopStats {
  int kernels;
  int64_t calls;
  int64_t bytes_written;
  bool exact;
} LoopStats;
struct LoopProgram;
void pass_loop_stats(const struct LoopProgram *p, const int64_t *syms, LoopStats *out);

/* lower_loops.c: graph IR -> loop IR with the activation arena planned by
 * liveness at the maximum dims. The graph must verify. Buffers: inputs in
 * input-node order, outputs in g->outputs order, params packed in node order
 * at 16-float aligned offsets (LoopProgram.weights_floats in all).
 *
 * The lowering's policy: how kernels and runtime calls split and tile their
 * work. Each field ends up as a kernel's grain or as an argument of a
 * runtime call (ir/callees.def), so `tfmc ir --level loop` shows every
 * choice and a later pass may change it. None changes a result beyond
 * rounding (the grains and splits not even that). The defaults
 * (pass_lower_loops_options_default) are the values the runtime was tuned
 * with; lower_loops.c says why each is what it is. */
typedef struct LowerLoopsOptions {
  /* Parallel elementwise and row kernels: output elements each pool task
   * gets at least (LKernel.grain = this / elements per outer iteration,
   * rounded up). Default 4096. */
  int64_t grain_elems;
  /* rt_gelu grain: elements per task at least. Default 8192. */
  int64_t gelu_grain;
  /* rt_linear task_macs: multiply-adds per task at least; a product of
   * fewer than twice this runs on the calling thread. Default 1 << 17. */
  int64_t linear_task_macs;
  /* rt_linear split_macs: a product of fewer multiply-adds is cut into one
   * piece per thread. Default 1 << 23 (8M). */
  int64_t linear_split_macs;
  /* rt_linear mc, nc, kc: the cache blocks of its GEMM (rt_gemm.h). The
   * tile pass replaces them with blocks sized for the target's caches.
   * Default 128, 2016, 384: the runtime's former constants. */
  int64_t gemm_mc, gemm_nc, gemm_kc;
  /* rt_attention block_q: query rows per task. Default 64. */
  int64_t attn_block_q;
  /* rt_attention max_tk_tiled, derived per call from the head dims: the
   * largest key length whose K (dh x tk, tk rounded up to 8) and V
   * (tk x dv) each fit in this many floats; up to it the AVX2
   * register-tiled products run instead of BLAS. 0: always BLAS. Default
   * 16384 (64 KiB: tk <= 256 at dh = dv = 64, 1024 at 16). */
  int64_t attn_tiled_floats;
  /* rt_attention_flash block_k (attention.flash): keys per block of the
   * online softmax; a task's scores are block_q x block_k floats whatever
   * the sequence length. Default 128. (The knob `--tile
   * attention.block_k=N` sets.) */
  int64_t attn_block_k;
} LowerLoopsOptions;

LowerLoopsOptions pass_lower_loops_options_default(void);
struct LoopProgram;
/* Lowers with opts (not kept: copied into the program's arguments). */
struct LoopProgram *pass_lower_loops_with(Arena *a, const IrGraph *g,
                                          const LowerLoopsOptions *opts);
/* pass_lower_loops_with the defaults. */
struct LoopProgram *pass_lower_loops(Arena *a, const IrGraph *g);

/* model_info.c: the run-time description of a compiled model (what
 * standalone executables and emitted C carry: runtime/rt_model.h). Inputs
 * are the graph's input nodes in order; ids inputs take their exclusive
 * bound from input_vocab[k] (k = input index; ignored for masks); a mask
 * input "mask" / "src_mask" / "tgt_mask" pads the ids input "tokens" / "src"
 * / "tgt" and may be given as "lengths" / "src_lengths" / "tgt_lengths".
 * p may be NULL for the I/O part only (no weights, no arena size).
 * Everything is allocated in a. */
struct RtModelInfo;
struct RtModelInfo *pass_model_info(Arena *a, const IrGraph *g, const struct LoopProgram *p,
                                    const int64_t *input_vocab, int64_t pad_id);
/* The kernel table of p (RtModelInfo.kernels, p->n_kernels rows, in run
 * order): each kernel's name, the name of the IR op of the node of g it
 * computes (PASS_KERNEL_NO_OP for a kernel without a node) and its comment.
 * p must have been lowered from g; p NULL gives an empty table. The model
 * info above carries it; the JIT builds it to report a profile. Allocated
 * in a. */
#define PASS_KERNEL_NO_OP "(none)"
struct RtKernelInfo;
const struct RtKernelInfo *pass_kernel_table(Arena *a, const IrGraph *g,
                                             const struct LoopProgram *p);
/* Every input's exclusive id bound, in input-node order (input_vocab of
 * pass_model_info): the rows of the embedding tables an ids input feeds
 * directly (the smallest, if several); 0 for masks; INT32_MAX (unbounded)
 * for ids that feed no embedding table (a step graph's positions under a
 * sinusoidal encoding). */
void pass_input_vocabs(const IrGraph *g, int64_t *input_vocab);
/* The ids input a mask input pads and the name of its lengths alternative. */
void pass_mask_names(const char *mask_input, const char **ids_input, const char **lengths);

/* ---- pass_manager.c: named passes, pipelines, verify-after-each ----
 *
 *     PassPipeline pl;
 *     char err[512];
 *     if (!pass_pipeline_parse("dce,lane-split", &pl, err, sizeof err))
 *       fprintf(stderr, "%s\n", err);           // names the available passes
 *     PassContext ctx = {.diags = &d, .print_after = "all", .stats_out = stderr};
 *     if (!pass_pipeline_run(g, &pl, &ctx)) ...  // the graph passes, reported to d
 *     LoopProgram *p = pass_lower_loops(a, g);
 *     if (!pass_pipeline_run_loop(p, &pl, &ctx)) ...  // then the loop passes
 *
 * Passes work at one of two levels. A graph pass is
 * `bool pass_NAME_run(IrGraph *g, PassContext *ctx)`: it replaces *g with
 * the transformed graph (allocated in g->arena). A loop pass is
 * `bool pass_NAME_run(LoopProgram *p, PassContext *ctx)`: it rewrites *p in
 * place (new nodes in p->arena). Either says what it did with pass_note,
 * and on failure reports to ctx->diags, leaves its IR as it was and returns
 * false. Passes of both levels are rows of one table in pass_manager.c
 * (name, one-line description, level, function); the -O levels are straight
 * lists there naming both kinds. A pipeline lists its graph passes first:
 * they run on the graph, the driver lowers it, then the loop passes run on
 * the loop program, so a graph pass after a loop pass is refused when the
 * list is parsed. pass_pipeline_run runs only the graph passes,
 * pass_pipeline_run_loop only the loop passes, each with the same UX:
 * before the first pass the IR is verified; after each pass that changed it
 * (detected by the manager from a fingerprint, not trusted to the pass) it
 * is verified again, so a broken pass is named at once; print-after prints
 * the IR of the pass's level (ir_graph_print / loop_program_print);
 * --pass-stats prints a line per pass (time, nodes or kernels before and
 * after, verify time, the pass's note). */

/* ---- the target the tile pass sizes blocks for (tile.c) ----
 *
 * TILE_KEYS(X): what `--tile KEY=VALUE` may set, one row each:
 *   X(ENUM, "key", min, max, "what it is")
 * The tile pass chooses every key from the target (cache sizes, threads)
 * unless the user set it; values outside min..max are refused when parsed.
 * A new tiling decision is one row here plus its case in tile.c's
 * tile_choose and tile_apply (the switches have no default, so the
 * compiler lists them). */
#define TILE_KEYS(X)                                                                       \
  X(GEMM_MC, "gemm.mc", 1, 4096, "rt_linear rows per packed block of x (mc x kc lives in L2)")   \
  X(GEMM_NC, "gemm.nc", 1, 65536,                                                                \
    "rt_linear columns per packed block of w (kc x nc lives in L3, shared by the threads)")      \
  X(GEMM_KC, "gemm.kc", 8, 8192, "rt_linear depth per block (the micro-kernel's panels in L1)")  \
  X(GEMM_TASK_MACS, "gemm.task_macs", 1, (int64_t)1 << 40,                                       \
    "rt_linear multiply-adds per pool task at least (the parallel grain)")                       \
  X(GEMM_SPLIT_MACS, "gemm.split_macs", 0, (int64_t)1 << 40,                                     \
    "rt_linear products below this are cut into one piece per thread (the thread split)")        \
  X(ATTENTION_BLOCK_Q, "attention.block_q", 1, 4096,                                             \
    "attention query rows per task (their Q and output rows live in L1)")                        \
  X(ATTENTION_BLOCK_K, "attention.block_k", 1, 65536,                                            \
    "flash attention keys per block of the online softmax (K and V blocks live in L2)")

typedef enum TileKey {
#define TILE_KEY_ENUM(e, key, mn, mx, doc) TILE_##e,
  TILE_KEYS(TILE_KEY_ENUM)
#undef TILE_KEY_ENUM
  TILE_KEY_COUNT
} TileKey;

typedef struct PassTarget {
  int64_t l1, l2, l3;     /* bytes: L1 data and L2 per core, L3 in all; > 0 */
  int threads;            /* threads the compiled code runs on, >= 1 */
  const char *source;     /* where the numbers came from, for notes: "host", ... */
  bool set[TILE_KEY_COUNT]; /* --tile KEY=VALUE given */
  int64_t tile[TILE_KEY_COUNT];
} PassTarget;

/* The host: cache sizes from /sys/devices/system/cpu/cpu0/cache/index*
 * (level, type, size), threads = online CPUs; what the sysfs files do not
 * say stays as pass_target_generic has it. No overrides. */
void pass_target_host(PassTarget *t);
/* A generic target, for emit-c without --target-cache: L1 32K, L2 512K,
 * L3 8M, 4 threads. No overrides. */
void pass_target_generic(PassTarget *t);
/* --target-cache "L1=32K,L2=1M,L3=32M": any of the three levels, each at
 * most once, sizes in bytes or with a K / M / G suffix (powers of 1024),
 * 1K..1G; the levels not named keep their values. False, with a message
 * naming what is wrong, on anything else. */
bool pass_target_parse_cache(PassTarget *t, const char *spec, char *err, size_t errlen);
/* --target-threads N: 1..1024. */
bool pass_target_parse_threads(PassTarget *t, const char *text, char *err, size_t errlen);
/* --tile KEY=VALUE: a TILE_KEYS key and an integer in its range, each key
 * at most once. The message lists the keys when the key is unknown. */
bool pass_target_parse_tile(PassTarget *t, const char *kv, char *err, size_t errlen);
/* "gemm.mc, gemm.nc, ...": the TILE_KEYS keys, for messages and help. */
void pass_tile_keys_list(char *buf, size_t n);

/* What pack-weights stores a linear's weights as (--weights-dtype). */
typedef enum PassWeightsDtype {
  PASS_WEIGHTS_F32,
  PASS_WEIGHTS_BF16,
  PASS_WEIGHTS_INT8,
  PASS_WEIGHTS_DTYPE_COUNT
} PassWeightsDtype;

typedef struct PassContext {
  Diags *diags;            /* passes and the verifier report here */
  const char *print_after; /* NULL, "all", or a pass name: print the IR after it */
  FILE *print_out;         /* where print_after goes; NULL: stderr */
  bool print_dot;          /* print_after draws graphs as Graphviz (ir_graph_print_dot:
                              fused nodes as clusters of their bodies), not text */
  FILE *stats_out;         /* NULL: quiet; else a line per pass (time, nodes, note) */
  char note[256];          /* set by the running pass through pass_note */
  const PassTarget *target; /* what the tile pass sizes for; NULL: the host */
  PassWeightsDtype weights_dtype; /* pack-weights: f32 (default) or bf16 panels */
} PassContext;

/* The IR a pass works on. PASS_GRAPH is 0, so a row that names no level is
 * a graph pass. */
typedef enum PassLevel { PASS_GRAPH, PASS_LOOP, PASS_LEVEL_COUNT } PassLevel;

typedef bool (*PassFn)(IrGraph *g, PassContext *ctx);
typedef bool (*PassLoopFn)(struct LoopProgram *p, PassContext *ctx);

typedef struct PassInfo {
  const char *name;        /* as written in --passes: "dce" */
  const char *description; /* one line */
  PassFn run;              /* PASS_GRAPH: the pass */
  PassLevel level;
  PassLoopFn run_loop;     /* PASS_LOOP: the pass */
} PassInfo;

#define PASS_PIPELINE_MAX 32

typedef struct PassPipeline {
  const PassInfo *passes[PASS_PIPELINE_MAX];
  int n;
} PassPipeline;

/* The registry, in table order (static storage). */
const PassInfo *pass_registry(int *n);
/* The pass of that name, or NULL. */
const PassInfo *pass_find(const char *name, size_t len);
/* "graph" / "loop" */
const char *pass_level_name(PassLevel level);
/* "dce, decompose-attention": every registered name, for messages. */
void pass_names_list(char *buf, size_t n);
/* Parses a comma-separated list of pass names. On an unknown or empty name,
 * more than PASS_PIPELINE_MAX passes, or a graph pass after a loop pass,
 * writes a message (listing the available passes, or saying the order
 * rule) to err and returns false. */
bool pass_pipeline_parse(const char *list, PassPipeline *out, char *err, size_t errlen);
/* Removes every pass named in list ("a,b", each name optionally written
 * "-a") from pl, keeping the order of the others: -O3 less one pass, the
 * way an experiment measures what that pass buys. False, with a message,
 * for an unknown name or a pass the pipeline does not hold. */
bool pass_pipeline_disable(PassPipeline *pl, const char *list, char *err, size_t errlen);
/* The pipeline of optimisation level 0..3 (-O0 is empty). False if out of range. */
bool pass_pipeline_level(int level, PassPipeline *out);
/* Appends one pass (a registered one, or one a test defines). False when
 * full or when a graph pass would follow a loop pass. */
bool pass_pipeline_add(PassPipeline *p, const PassInfo *pass);
/* How many passes of the pipeline work at that level. */
int pass_pipeline_count(const PassPipeline *p, PassLevel level);
/* Checks that a print_after value is "all" or names a pass of the pipeline
 * (of either level); otherwise writes why to err. */
bool pass_print_after_check(const PassPipeline *p, const char *print_after, char *err,
                            size_t errlen);
/* Runs the pipeline's graph passes over g (see above); its loop passes are
 * left to pass_pipeline_run_loop. Returns false after reporting to
 * ctx->diags if the input does not verify, a pass fails, or a pass leaves a
 * graph that does not verify. */
bool pass_pipeline_run(IrGraph *g, const PassPipeline *p, PassContext *ctx);
/* Runs the pipeline's loop passes over p, lowered from the graph the graph
 * passes left (see above). Verification is loop_program_verify (ir/loop.h);
 * "changed" means the printed listing's hash changed. Returns false after
 * reporting to ctx->diags if the input does not verify, a pass fails, or a
 * pass leaves a program that does not verify. */
bool pass_pipeline_run_loop(struct LoopProgram *p, const PassPipeline *pl, PassContext *ctx);
/* Sets the running pass's one-line summary ("removed 12 nodes"). */
void pass_note(PassContext *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rebuilding a graph, for passes: pass_rewrite walks the old nodes in order
 * and builds a new graph in the same arena. Per node: dropped if keep is
 * given and keep[id] is false; else replaced by what fn returns if fn is
 * given and returns >= 0 or PASS_DROP; else copied with its operands mapped.
 * fn builds its replacement on rw->g (operands through pass_rewrite_operand)
 * and returns the new value id, or PASS_COPY to copy the node as is. Outputs
 * are remapped; then *g becomes the new graph. A kept node whose operand was
 * dropped, or a dropped output, is an internal error (asserted): passes keep
 * what outputs need. */
typedef struct PassRewrite {
  const IrGraph *old; /* the graph being rebuilt */
  IrGraph *g;         /* the new graph */
  int *map;           /* old value id -> new value id, -1 when dropped */
} PassRewrite;

enum { PASS_COPY = -1, PASS_DROP = -2 };
typedef int (*PassRewriteFn)(PassRewrite *rw, int id, void *user);

void pass_rewrite(IrGraph *g, const bool *keep, PassRewriteFn fn, void *user);
/* The new id of operand k of old node id (asserts it was kept). */
int pass_rewrite_operand(const PassRewrite *rw, int id, int k);
/* Copies old node id into rw->g with its operands mapped; returns its new id. */
int pass_rewrite_copy(PassRewrite *rw, int id);

/* ---- the passes (one file each; README "Passes") ---- */

/* dce.c: removes every node no output depends on, except inputs (the graph's
 * interface stays); unused params go. */
bool pass_dce_run(IrGraph *g, PassContext *ctx);
/* decompose_attention.c: attention(q, k, v, mask?) -> attn.mix(attn.probs(q,
 * k, mask?), v). Exactly the same values; materialises the score matrix, so
 * it is a lowering for experiments, not an optimisation. */
bool pass_decompose_attention_run(IrGraph *g, PassContext *ctx);
/* fuse_qkv.c: the Q/K/V projections of an attention that read one input
 * (cross-attention: K and V of the memory) -> one linear over param.concat
 * weights and biases, whose slices attention reads in place. Same values
 * up to summation order. */
bool pass_fuse_qkv_run(IrGraph *g, PassContext *ctx);
/* flash_attention.c: attention -> attention.flash, the block form with an
 * online softmax (rt_attention_flash): the Tq x Tk scores are never
 * materialised. Same values up to summation order. */
bool pass_flash_attention_run(IrGraph *g, PassContext *ctx);
/* prune_rows.c: take(f(x), axis, i) -> f(take(x, axis, i)) through ops that
 * are row-wise along axis, up to values needed in full anyway: a classifier
 * reading hidden[:, 0] computes its last layer's queries, attention output
 * and FFN for that one row. Same values up to summation order. */
bool pass_prune_rows_run(IrGraph *g, PassContext *ctx);
/* fuse_epilogue.c: relu / gelu / gelu_tanh of a linear, and a residual add
 * of the result, -> one linear {act, residual=true} whose GEMM applies them
 * to each output tile in cache (rt_linear's epilogue). Same values, same
 * f32 rounding; only values nothing else reads are folded. */
bool pass_fuse_epilogue_run(IrGraph *g, PassContext *ctx);

/* fuse_add_norm.c: layernorm(add(a, b)) -> fused "add_layernorm" (one row
 * kernel); "add_layernorm_sum" plus a `result {index=1}` for the sum when
 * something else reads it (pre-norm). An add both of whose operands would
 * join its elementwise tree (embedding sums) is left to fuse-elementwise.
 * Same values up to rounding. */
bool pass_fuse_add_norm_run(IrGraph *g, PassContext *ctx);
/* fuse_elementwise.c: trees of single-reader elementwise ops, gathers
 * (embed) and index sources (arange, mask.causal) -> fused "elementwise"
 * nodes, one loop nest each (at most 8 operands). Same values. */
bool pass_fuse_elementwise_run(IrGraph *g, PassContext *ctx);
/* Whether fuse-elementwise would compute node p inside the tree of its
 * reader c (p read once, as c's operand k, and not an output). */
bool pass_fuse_elementwise_joins(const IrGraph *g, int p, int c, int k);

/* ---- loop passes (one file each) ---- */

/* lane_split.c: a loop that only folds terms into one f32 variable with a
 * reassociable add / max / min (layernorm sums, softmax max) becomes 8 lane
 * accumulators (lane l takes the iterations lo + l mod 8) folded pairwise,
 * ((l0 l1) (l2 l3)) ((l4 l5) (l6 l7)), into the variable, then the
 * remaining iterations one by one. Everything it writes is strict, so the
 * order is decided here and both code generators print the same sums; the
 * result has no reassociable reduction left (running it again changes
 * nothing). Loops with a constant trip count below 8 stay as they are. */
bool pass_lane_split_run(struct LoopProgram *p, PassContext *ctx);

/* pack_weights.c: every rt_linear whose w is a whole weight becomes
 * rt_linear_packed on that weight in LW_PANELS layout (packed once by the
 * packer, never per call), or, when ctx->weights_dtype is bf16 / int8,
 * rt_linear_packed_bf16 / _i8 on it in LW_PANELS_BF16 / LW_PANELS_I8; a
 * weight also read by element loads only (a tied embedding's gather) is
 * packed in place when its panels hold f32 and the loads read the panels;
 * one read otherwise (its address taken by another call, or bf16 / int8
 * panels) keeps its plain copy; the weights are laid out again. Same
 * values in f32; bf16 rounds the weights (and, where the CPU multiplies
 * in bf16, x). */
bool pass_pack_weights_run(struct LoopProgram *p, PassContext *ctx);

/* tile.c: chooses rt_linear's cache blocks (mc, nc, kc), its parallel
 * grain (task_macs) and its thread split (split_macs) from ctx->target (the
 * host when NULL) and writes them into every rt_linear call, where the
 * listing shows them; --tile overrides win. The model (tile.c says why):
 *   kc = L1 / 128 (the 6x16 AVX2 tile's panels take 11/16 of L1), 64..1024,
 *        a multiple of 8
 *   mc = L2 / (8 kc) (the packed block of x takes half of L2), 24..1020,
 *        a multiple of 12
 *   nc = L3 / (8 kc threads) (each thread's packed block of w takes half
 *        of its share of L3), 192..8064, a multiple of 192
 *   task_macs = 2^17 (a pool hand-off costs a few microseconds)
 *   split_macs = threads * 2^22 (pieces under ~4M multiply-adds gain
 *        nothing from finer splitting)
 * and every rt_attention / rt_attention_flash call's blocks from its head
 * dims d = dh + dv:
 *   block_q = L1 / (4 d) (the block's Q and output rows), 16..256, a
 *        multiple of 16
 *   block_k = L2 / (8 (d + block_q)) (flash only: the key block's K^T, V
 *        and scores in half of L2), 32..2048, a multiple of 32 */
bool pass_tile_run(struct LoopProgram *p, PassContext *ctx);

/* share_kernels.c: kernels equal up to the buffers they touch
 * (loop_kernel_same) share one generated function (LKernel.shares); they
 * run in the same order and compute the same values. */
bool pass_share_kernels_run(struct LoopProgram *p, PassContext *ctx);

#endif
