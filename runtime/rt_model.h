/* runtime/rt_model.h — the ABI between compiled model code and the runtime.
 *
 * A compiled model is one function plus a description:
 *
 *     extern const RtModelInfo tfmc_model_info;      // data: names, shapes, sizes
 *     void tfmc_model_run(const RtRunArgs *args);   // the forward pass
 *
 * (the JIT gets the same function in process; `tfmc build` links an object
 * file holding it with a generated C file holding tfmc_model_info, the
 * runtime, and runtime/rt_main.c). The runtime binds the run-time dims
 * (symbols such as batch B and lengths S, T) from the inputs, checks them
 * against their maxima, allocates the activation arena (its size is fixed at
 * compile time), maps the packed weights and calls the function.
 *
 * The function runs its kernels in order, each through rt_kernel_run
 * (rt_profile.c), which hands it to the pool and, when args->profile is
 * set, times it; RtModelInfo.kernels names kernel i (its op kind and the
 * spec line it computes) for the profile report.
 *
 * Layout contract (generated code reads RtRunArgs by these byte offsets, on
 * 64-bit targets): syms 0, inputs 8, outputs 16, weights 24, arena 32,
 * pool 40, profile 48, state 56 (the entry function only passes args on to
 * rt_kernel_run, which reads the pool and the profile). The LLVM backend
 * takes the offsets from offsetof on this struct and static-asserts these
 * values (backends/llvm/emit.c), so changing the struct means changing
 * this contract and RT_ABI_VERSION together; the C backend reads fields by
 * name. Inputs are int32
 * (ids) or uint8 (masks, 1 = real token) arrays in row-major order with the
 * bound dims; outputs are f32 arrays sized for the bound dims. Weights are
 * f32, each tensor starting at a 64-byte aligned offset from the weights
 * base. The arena is 64-byte aligned. The state (state_bytes, 64-byte
 * aligned; NULL when 0) holds what persists from one run to the next (a
 * step graph's KV caches): the caller zeroes it before a new sequence and
 * keeps it between the runs of one. The weights, the arena, each input
 * and each output are distinct allocations that do not overlap (generated
 * code tells the optimiser so). */
#ifndef TFMC_RT_MODEL_H
#define TFMC_RT_MODEL_H

#include "runtime/rt_pool.h"

#include <stddef.h>
#include <stdint.h>

#define RT_ABI_VERSION 7 /* 3: kernels take a context (rt_kernel_run); 4: RtRunArgs.state;
                            5: RtModelInfo.arena_blocks; 6: RtWeightInfo.layout;
                            7: RtModelInfo.attention_layer */
#define RT_MAX_SYMS 8
#define RT_MAX_RANK 4

typedef enum RtElem { RT_ELEM_F32, RT_ELEM_I32, RT_ELEM_U8, RT_ELEM_COUNT } RtElem;

typedef struct RtDim {
  int sym;       /* index into RtModelInfo.sym_*, or -1 */
  int64_t value; /* the constant when sym < 0 */
} RtDim;

typedef enum RtInputKind {
  RT_INPUT_IDS,  /* token ids: int32, each in [0, vocab) */
  RT_INPUT_MASK, /* key padding mask: uint8 [B,L] from mask / lengths / pad ids */
  RT_INPUT_VALUES, /* f32 values another compiled run wrote: an encoder_decoder's
                      step graph takes the cross-attention keys / values its
                      encode graph computed once per source */
  RT_INPUT_KIND_COUNT
} RtInputKind;

typedef struct RtTensorInfo {
  const char *name;
  RtElem elem;
  int rank;
  RtDim dims[RT_MAX_RANK];
  RtInputKind kind;         /* inputs only */
  int64_t vocab;            /* RT_INPUT_IDS: exclusive upper bound of ids */
  const char *ids_input;    /* RT_INPUT_MASK: the ids input it pads ("tokens", "src") */
  const char *lengths_name; /* RT_INPUT_MASK: the alternative lengths tensor name */
} RtTensorInfo;

/* How a weight's floats are stored (the loop IR's LWLayout): as the
 * param's values in row-major order, or, for a matrix [N, K] that
 * rt_linear_packed reads whole (and compiled code may also gather single
 * floats from: a tied embedding), in rt_gemm_pack's panels of 16 rows
 * (runtime/rt_gemm.h: ceil(N / 16) * 16 * K floats). A weight also read
 * plain by a runtime call, or gathered beside bf16 / int8 panels, is
 * listed twice, once per layout. */
typedef enum RtWeightLayout {
  RT_WEIGHT_PLAIN,
  RT_WEIGHT_PANELS,
  RT_WEIGHT_PANELS_BF16, /* the same panels of bf16 pairs (rt_gemm_pack_bf16):
                            ceil(N / 16) * 16 * ceil(K / 2) floats */
  RT_WEIGHT_PANELS_I8,   /* int8 panels with per-column scales (rt_gemm_pack_i8):
                            ceil(N / 16) * (16 * ceil4(K) + 128) / 4 floats */
  RT_WEIGHT_LAYOUT_COUNT
} RtWeightLayout;

typedef struct RtWeightInfo {
  const char *name;
  int rank;
  int64_t shape[RT_MAX_RANK]; /* the param's shape, whatever its layout */
  int64_t offset; /* in floats from the weights base; a multiple of 16 */
  int layout;     /* RtWeightLayout */
} RtWeightInfo;

/* Floats a weight takes in its layout (-1 for a malformed entry). */
int64_t rt_weight_floats(const RtWeightInfo *w);

/* One kernel of the compiled forward pass, in the order tfmc_model_run
 * runs them (kernel i is the `kernel` argument rt_kernel_run gets). */
typedef struct RtKernelInfo {
  const char *name;    /* "k22_attention": its function in the generated code */
  const char *op;      /* op kind: the IR op of the graph node it computes
                          ("attention", "matmul"); "(none)" without a node */
  const char *comment; /* the IR node and spec location ("attention %22 @m.tfm:7:3"); may be NULL */
} RtKernelInfo;

/* One buffer of the activation arena: where the plan put it and how many
 * bytes of it a run touches, bytes x the product of the listed symbols'
 * values (the buffer's dims that are symbols; -1 ends the list). The plan
 * is made at the maximum dims; a run with smaller dims touches only the
 * start of each buffer, which is what rt_arena_commit commits. */
typedef struct RtArenaBlock {
  int64_t offset; /* bytes from the arena base */
  int64_t bytes;  /* element size x the constant dims */
  int8_t syms[RT_MAX_RANK];
} RtArenaBlock;

typedef struct RtModelInfo {
  uint32_t abi_version; /* RT_ABI_VERSION */
  const char *name;
  int n_syms;
  const char *sym_names[RT_MAX_SYMS];
  int64_t sym_max[RT_MAX_SYMS];
  int n_inputs;
  const RtTensorInfo *inputs;
  int n_outputs;
  const RtTensorInfo *outputs;
  int n_weights;
  const RtWeightInfo *weights;
  int64_t weights_floats;  /* total size of the packed weights, in floats */
  uint64_t layout_hash;    /* FNV-1a 64 over every weight's name, shape and offset */
  int64_t arena_bytes;     /* activation arena, planned at the maximum dims */
  int64_t state_bytes;     /* state kept across runs (KV caches); 0: none */
  int64_t pad_id;          /* -1: none */
  int n_kernels;           /* 0: no kernel table (a profile then names nothing) */
  const RtKernelInfo *kernels;
  int n_arena_blocks;      /* 0: no table (every run commits the whole arena) */
  const RtArenaBlock *arena_blocks;
  const char *attention_layer; /* the layer whose probabilities the output "attention"
                                  holds (compiled with --attention LAYER: "encoder.0",
                                  "decoder.1.cross"); NULL: no such output (with
                                  --attention all each layer's is "attention.LAYER") */
} RtModelInfo;

typedef struct RtProfile RtProfile; /* per-kernel times: runtime/rt_profile.h */

typedef struct RtRunArgs {
  const int64_t *syms;   /* bound symbol values, indexed like sym_names */
  void *const *inputs;   /* one per RtModelInfo.inputs */
  float *const *outputs; /* one per RtModelInfo.outputs */
  const float *weights;  /* packed weights base */
  unsigned char *arena;  /* arena_bytes, 64-byte aligned */
  RtPool *pool;          /* may be NULL: run on the calling thread */
  RtProfile *profile;    /* NULL: no timing; else every kernel's time is added to it */
  unsigned char *state;  /* state_bytes, 64-byte aligned, kept across runs; NULL when 0 */
} RtRunArgs;

typedef void (*RtModelRunFn)(const RtRunArgs *args);

/* ---- rt_profile.c: what generated code calls for each kernel ----
 * Runs kernel number `kernel` (fn, over [0, n)) for tfmc_model_run: nothing
 * when n <= 0; rt_pool_parallel_for(args->pool, n, grain, fn, ctx) when
 * parallel; else fn(ctx, 0, n) on the calling thread. Generated code passes
 * as ctx an array of pointers: args, then the base of each buffer the
 * kernel's function takes (kernels that differ only in their buffers share
 * one function: ir/loop.h, share-kernels); ctx is only read, and only
 * until rt_kernel_run returns. When args->profile
 * is set it also adds the kernel's wall time and one call to the profile's
 * entry `kernel` (ignored when out of its range). Without a profile it
 * costs one branch more than calling the pool directly. */
void rt_kernel_run(const RtRunArgs *args, int kernel, RtTaskFn fn, void *ctx, int64_t n,
                   int64_t grain, int parallel);

/* The packed-weights format version the runtime writes (header word at
 * byte 8; runtime/rt_weights.c, which also reads version 2, and
 * rt_static.c's in-place check). 2: a tied embedding is stored once, in its
 * LM head's panels; 3: the checksum in 1 MiB segments of 8 lanes, which
 * threads verify side by side (rt_weights.h). */
#define RT_WEIGHTS_VERSION 3u

/* FNV-1a 64 of the weights layout (what layout_hash holds): for each
 * weight in order, its name bytes, a 0 byte, rank and shape and offset as
 * 8-byte little-endian integers. */
uint64_t rt_model_layout_hash(const RtWeightInfo *w, int n);

/* ---- rt_model.c: binding inputs for a run (the CLI's JIT path and
 * standalone executables share it) ---- */

/* inputs, and outputs, of one model: --attention all adds one output per
 * attention layer (a 6+6-layer translation model has 18) */
#define RT_MAX_IO 64

typedef struct RtBound {
  int64_t syms[RT_MAX_SYMS];
  void *inputs[RT_MAX_IO];  /* malloc'd, per info->inputs */
  float *outputs[RT_MAX_IO]; /* malloc'd, sized for the bound dims */
  int64_t output_dims[RT_MAX_IO][RT_MAX_RANK];
} RtBound;

struct RtSafetensors;
/* Reads every input of info from st (label names the file in messages):
 * ids through rt_io_read_ids (range-checked against vocab), masks through
 * rt_io_key_mask (mask / lengths / pad ids); binds each symbol from the
 * first dim that uses it and checks every other use agrees and each value
 * is within 1..max; refuses tensors the model does not take (naming what it
 * takes). Allocates outputs. Returns 0 or non-zero + message; on failure
 * nothing stays allocated. */
int rt_model_bind(const RtModelInfo *info, const struct RtSafetensors *st,
                  const char *label, RtBound *out, char *err, size_t errlen);
void rt_model_unbind(const RtModelInfo *info, RtBound *b);
/* Binds b->syms from the dims of every input (dims[i], info->inputs[i]'s
 * rank of them) by rt_model_bind's rules: constant dims checked, each
 * symbol bound by its first use to a value in 1..max, every other use
 * agreeing; label names the source in messages. For callers holding the
 * inputs in memory (tests, tools); touches nothing but b->syms. */
int rt_model_bind_shapes(const RtModelInfo *info, const int64_t (*dims)[RT_MAX_RANK],
                         RtBound *b, const char *label, char *err, size_t errlen);
/* Checks info is well formed (ABI, counts, dims, input kinds): 0 or
 * non-zero + message. rt_model_bind does it first. */
int rt_model_info_check(const RtModelInfo *info, char *err, size_t errlen);
/* Refuses (1 + message) a model with state (a generation step program):
 * forward runs (rt_model_bind, rt_text_bind, rt_main) keep no state from
 * one run to the next; runtime/rt_stepper.h runs such programs. */
int rt_model_refuse_state(const RtModelInfo *info, char *err, size_t errlen);
/* Formats a message into err (when err and errlen allow) and returns 1: the
 * runtime's "fail with a message" for functions that report through
 * (err, errlen). The static build's (rt_static.c, no stdio) knows %s, %c
 * and %d / %i / %u with l, ll or z: the runtime files it links use no other. */
#ifdef __GNUC__
int rt_errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#else
int rt_errorf(char *err, size_t errlen, const char *fmt, ...);
#endif
/* rt_static.c (the static build only, -DTFMC_STATIC): checks a packed
 * weights image in place (len bytes, 4-byte aligned) against info's
 * layout as rt_weights.h does (magic, version, layout hash, size,
 * checksum), without stdio. Returns 0, or 1 with a message. */
int rt_static_image_check(const void *image, size_t len, const RtModelInfo *info, char *err,
                          size_t errlen);
/* Sizes and allocates b's outputs for its bound symbols (b->syms; 0 =
 * unbound, refused when an output uses it). Binders call it last; on
 * failure the caller unbinds. */
int rt_model_outputs_alloc(const RtModelInfo *info, RtBound *b, const char *label, char *err,
                           size_t errlen);
/* Writes the outputs (f32, bound shapes) to path with rt_st_write. */
int rt_model_write_outputs(const RtModelInfo *info, const RtBound *b, const char *path,
                           char *err, size_t errlen);
int64_t rt_model_dim(const RtDim *d, const int64_t *syms);

/* ---- rt_main.c: the main of standalone executables ----
 *   EXE (--inputs IN.safetensors | --tokens "IDS" | --text "SYMBOLS" --vocab V.txt)
 *       [--outputs OUT.safetensors] [--vocab V.txt] [--weights FILE]
 *       [--threads N] [--repeat N] [--profile] [--help] [--version]
 *       [--attention-map MAPS.svg|MAPS.html [--layer L|all] [--head H|all] [--batch-row R]]
 * --tokens / --text: one sequence through rt_text_bind (rt_text.h); without
 * --outputs the outputs are summarised on stdout (rt_text_print_bound).
 * --attention-map (info outputs attention: compiled with --attention) draws
 * it as `tfmc attention` does (rt_attnmap.h rt_attnmap_draw_run).
 * Weights: the embedded image when embedded != NULL, else --weights, else
 * the file EXE.weights next to the executable (found via /proc/self/exe or
 * argv[0]). --repeat N: N more timed runs after the first, the median, min
 * and max on stderr. --profile: after those, max(N, 1) more runs with a
 * profile, its report (rt_profile_report) on stderr. The outputs written
 * are the same either way. Refuses bad inputs with a message and exit
 * status 1; usage errors exit 2. */
int rt_main(int argc, char **argv, const RtModelInfo *info, RtModelRunFn run,
            const void *embedded, size_t embedded_len);

#endif
