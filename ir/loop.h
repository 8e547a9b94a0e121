/* ir/loop.h — loop IR: what graph IR lowers to and what both code
 * generators (backends/llvm, backends/c) print. Because both print the same
 * loop IR, they agree by construction.
 *
 * A LoopProgram is a list of kernels run in order by one entry function
 *
 *     void tfmc_model_run(const RtRunArgs *args);          (runtime/rt_model.h)
 *
 * Each kernel is a function  void kN(void *args, int64_t lo, int64_t hi)
 * whose body is  for (outer = lo; outer < hi; outer++) { body }.  The entry
 * function runs kernel i as  rt_kernel_run(args, i, kN, extent, grain,
 * parallel)  (runtime/rt_model.h), which calls rt_pool_parallel_for(
 * args->pool, extent, grain, kN, args) when the kernel is parallel, else
 * kN(args, 0, extent), and times it when profiling.  Kernel
 * bodies only read run-time values through the args: symbol values
 * (args->syms[i]), input/output pointers, the weights base and the arena.
 *
 * Buffers are typed base pointers: inputs[k], outputs[k], weights + a float
 * offset, arena + a byte offset (planned at the maximum dims, so offsets are
 * compile-time constants). Index expressions are element indices (i64).
 *
 * Expressions are typed: I64 (indices, loop variables, loaded ids and mask
 * bytes are widened to I64), F32, F64. Float ops with `reassoc` set may be
 * reassociated (reductions: lets the vectoriser work); everything else is
 * strict IEEE. Scalar variables (LS_LET defines, LS_SET assigns) are
 * function-local; loop variables are read with LX_VAR too.
 *
 * Example (softmax over rows of x f32[R,D] into y, D = 64):
 *   kernel k3 "softmax %12 @model.tfm:7:3" parallel extent R:
 *     for r (outer):
 *       let m = -inf
 *       for j in 0..64:  set m = max(m, load x[r*64+j])
 *       let s = 0
 *       for j in 0..64:  store y[r*64+j] = exp(load x[r*64+j] - m); set s = s + load y[r*64+j]
 *       for j in 0..64:  store y[r*64+j] = load y[r*64+j] / s
 *
 * Ownership: everything lives in the Arena the program was created with. */
#ifndef TFMC_LOOP_H
#define TFMC_LOOP_H

#include "ir/ir.h"

typedef enum LType { LT_I64, LT_F32, LT_F64, LT_COUNT } LType;

/* element type of a buffer in memory */
typedef enum LElem { LE_F32, LE_I32, LE_U8, LE_COUNT } LElem;

typedef enum LBufKind {
  LB_INPUT,  /* args->inputs[index] */
  LB_OUTPUT, /* args->outputs[index] */
  LB_WEIGHT, /* args->weights + offset floats */
  LB_ARENA,  /* args->arena + offset bytes (a multiple of 64) */
  LB_STATE,  /* args->state + offset bytes (a multiple of 64): tensors that
                persist across runs (KV caches), planned like the arena */
  LB_KIND_COUNT
} LBufKind;

/* How a weight buffer's floats are laid out (LB_WEIGHT only; the packer,
 * backends/exec.c backend_pack_weights, writes them so):
 *   LW_PLAIN   the param's values in row-major order, as the graph has them
 *   LW_PANELS  the param, a matrix of rows x cols (a linear's w[N, K]), in
 *              rt_gemm_pack's panels of 16 rows (runtime/rt_gemm.h):
 *              loop_panels_floats(rows, cols) floats; rt_linear_packed
 *              reads it whole, and element loads may read single floats of
 *              it: element (r, c) is float (r/16)*16*cols + c*16 + r%16 (the
 *              pack-weights pass: a tied embedding gathered from the panels
 *              its LM head multiplies by)
 *   LW_PANELS_BF16  the same panels holding bf16 pairs of steps of K
 *              (rt_gemm_pack_bf16): loop_panels_floats_bf16(rows, cols)
 *              floats; only rt_linear_packed_bf16 reads it (pack-weights
 *              under --weights-dtype bf16)
 *   LW_PANELS_I8  panels of int8 with per-column scales (rt_gemm_pack_i8):
 *              loop_panels_floats_i8(rows, cols) floats; only
 *              rt_linear_packed_i8 reads it (--weights-dtype int8) */
typedef enum LWLayout { LW_PLAIN, LW_PANELS, LW_PANELS_BF16, LW_PANELS_I8, LW_LAYOUT_COUNT } LWLayout;

typedef struct LBuffer {
  LBufKind kind;
  int index;      /* LB_INPUT / LB_OUTPUT */
  int64_t offset; /* LB_WEIGHT: floats; LB_ARENA, LB_STATE: bytes */
  LElem elem;
  const char *name; /* for comments: the graph value or param name */
  LWLayout layout;  /* LB_WEIGHT; LW_PLAIN for every other kind */
  int64_t rows, cols; /* LW_PANELS: the matrix packed (> 0); else 0 */
} LBuffer;

/* Floats of a rows x cols matrix in LW_PANELS layout: rows rounded up to
 * whole panels of 16, times cols (rt_gemm_packed_floats). */
int64_t loop_panels_floats(int64_t rows, int64_t cols);
int64_t loop_panels_floats_bf16(int64_t rows, int64_t cols); /* ceil(rows/16)*16*ceil(cols/2) */
/* ceil(rows/16) * (16 * ceil4(cols) + 128) / 4 */
int64_t loop_panels_floats_i8(int64_t rows, int64_t cols);
/* Floats of a weight buffer in a panels layout (0 for LW_PLAIN, whose size
 * the graph's param gives). */
int64_t loop_weight_layout_floats(const LBuffer *b);
/* "panels", "panels_bf16" (NULL for LW_PLAIN): the listing's word. */
const char *loop_layout_str(LWLayout l);

typedef enum LExprKind {
  LX_CONST_I,  /* i64 constant: ival */
  LX_CONST_F,  /* float constant of type t (F32 or F64): fval */
  LX_VAR,      /* scalar / loop variable: var */
  LX_SYM,      /* args->syms[sym] (I64) */
  LX_LOAD,     /* buffer element: buf, a = index (I64); result: F32 for LE_F32
                  buffers, I64 (sign-extended / zero-extended) for LE_I32 / LE_U8 */
  LX_ADDR,     /* pointer to buffer element (only as a call argument): buf, a = index */
  LX_POOL,     /* args->pool (only as a call argument) */
  LX_NULL,     /* a null pointer (only as a call argument) */
  LX_BIN,      /* bop(a, b), both operands of type t (compare ops: result I64 0/1) */
  LX_UN,       /* uop(a) */
  LX_SELECT,   /* a (I64, nonzero = true) ? b : c, b and c of type t */
  LX_CAST,     /* a converted to t (int<->float, f32<->f64) */
  LX_KIND_COUNT
} LExprKind;

typedef enum LBinOp {
  LB_ADD, LB_SUB, LB_MUL, LB_DIV, /* DIV on I64: signed, operands >= 0 */
  LB_REM,                         /* I64 only, operands >= 0 */
  LB_MIN, LB_MAX,                 /* floats: like fminf/fmaxf for non-NaN */
  LB_LT, LB_LE, LB_EQ, LB_NE,     /* result I64 0/1 */
  LB_AND,                         /* I64 only: (a != 0) & (b != 0) */
  LB_BINOP_COUNT
} LBinOp;

typedef enum LUnOp {
  LU_NEG, LU_EXP, LU_LOG, LU_SQRT, LU_TANH, LU_ERF, LU_SIN, LU_COS, /* floats */
  LU_UNOP_COUNT
} LUnOp;

typedef struct LExpr LExpr;
struct LExpr {
  LExprKind kind;
  LType t;       /* result type (pointer-valued kinds: LT_I64, ignored) */
  bool reassoc;  /* LX_BIN on floats: may be reassociated */
  int64_t ival;
  double fval;
  int var, sym, buf;
  int op;        /* LBinOp or LUnOp */
  LExpr *a, *b, *c;
};

typedef enum LStmtKind {
  LS_FOR,   /* for (var = lo, end = hi; var < end; var++) body   (lo, hi: I64,
               both evaluated once before the loop; the body never assigns var) */
  LS_LET,   /* define var : t = value */
  LS_SET,   /* var = value */
  LS_STORE, /* buffer[index] = value (value F32 for LE_F32, I64 truncated for LE_I32 / LE_U8) */
  LS_CALL,  /* runtime function `callee` (args) */
  LS_BLOCK, /* stmts in order */
  LS_KIND_COUNT
} LStmtKind;

/* Runtime functions generated code may call: one row each in
 * ir/callees.def (prototypes in runtime/). */
typedef enum LCallee {
#define LOOP_CALLEE(e, fn, doc, ...) LC_##e,
#include "ir/callees.def"
#undef LOOP_CALLEE
  LC_CALLEE_COUNT
} LCallee;

/* What a call argument may be, and the C type of the parameter:
 * X(KIND, C type, what the argument must be).  Pointer kinds take LX_ADDR
 * (or LX_NULL when the kind says so); F32_PANELS takes the address of
 * element 0 of an LW_PANELS weight (the one place such a weight is read
 * whole; loads may read its floats one by one); *_OUT kinds are written by the callee
 * (never into the weights or an input), the others only read; POOL takes
 * LX_POOL or LX_NULL (run on the calling thread). */
#define LOOP_ARG_KINDS(X)                                                          \
  X(POOL, RtPool *, "the pool or null")                                            \
  X(I64, int64_t, "an i64 value")                                                  \
  X(F32, float, "an f32 value")                                                    \
  X(F32_PTR, const float *, "the address of an f32 buffer")                        \
  X(F32_PTR_OR_NULL, const float *, "the address of an f32 buffer or null")        \
  X(F32_OUT, float *, "the address of an f32 buffer")                              \
  X(F32_OUT_OR_NULL, float *, "the address of an f32 buffer or null")              \
  X(U8_PTR_OR_NULL, const uint8_t *, "the address of a u8 buffer or null")          \
  X(F32_PANELS, const float *, "a weight in panels layout, whole")                 \
  X(BF16_PANELS, const float *, "a weight in panels_bf16 layout, whole")            \
  X(I8_PANELS, const float *, "a weight in panels_i8 layout, whole")

typedef enum LArgKind {
#define LOOP_ARG_KIND_ENUM(k, ctype, what) LA_##k,
  LOOP_ARG_KINDS(LOOP_ARG_KIND_ENUM)
#undef LOOP_ARG_KIND_ENUM
  LA_KIND_COUNT
} LArgKind;

#define LOOP_CALLEE_MAX_ARGS 24

typedef struct LCalleeArg {
  LArgKind kind;
  const char *name; /* "bias" */
} LCalleeArg;

typedef struct LCalleeInfo {
  const char *name; /* the C function: "rt_linear" */
  const char *doc;  /* one line */
  int n_args;
  LCalleeArg args[LOOP_CALLEE_MAX_ARGS];
} LCalleeInfo;

/* The rows of ir/callees.def, indexed by LCallee. */
extern const LCalleeInfo loop_callee_info[LC_CALLEE_COUNT];
/* The position of callee c's argument called name in its ir/callees.def
 * row (asserts that there is one). */
int loop_callee_arg(LCallee c, const char *name);
/* "const float *" for LA_F32_PTR, ... */
const char *loop_arg_ctype(LArgKind k);

typedef struct LStmt LStmt;
struct LStmt {
  LStmtKind kind;
  int var;             /* LS_FOR loop var, LS_LET / LS_SET target */
  LType t;             /* LS_LET */
  LExpr *lo, *hi;      /* LS_FOR */
  LExpr *value;        /* LS_LET / LS_SET / LS_STORE */
  int buf;             /* LS_STORE */
  LExpr *index;        /* LS_STORE */
  LCallee callee;      /* LS_CALL */
  LExpr **args;        /* LS_CALL */
  int n_args;
  LStmt **stmts;       /* LS_BLOCK; LS_FOR body is stmts[0..n_stmts) */
  int n_stmts, cap_stmts;
};

typedef struct LKernel {
  const char *name;    /* "k12_softmax": unique, a C identifier */
  const char *comment; /* "softmax %12 @\"model.tfm\":7:3" (may hold any bytes; printers escape) */
  int node;            /* graph value it computes (-1: none) */
  LExpr *extent;       /* I64: iterations of the outer loop */
  int outer_var;       /* the outer loop variable */
  bool parallel;       /* split over the pool (rt_pool_parallel_for) */
  int64_t grain;       /* minimum iterations per task */
  LStmt *body;         /* LS_BLOCK run once per outer iteration */
  int n_vars;          /* variables used: 0..n_vars-1 (outer_var included) */
  LType *var_types;    /* type of each variable */
  int shares;          /* -1: generated as its own function; else the index of an
                          earlier kernel (itself not sharing) with the same body up to
                          buffers (loop_kernel_same), whose function runs this one
                          with this kernel's buffers as its parameters */
} LKernel;

/* An arena buffer's extent at run time: offset, and bytes x the values of
 * the listed symbols (-1 ends the list): the RtArenaBlock table by which
 * the runtime commits only what a run's dims touch (runtime/rt_arena.h). */
typedef struct LArenaBlock {
  int64_t offset;
  int64_t bytes;
  int8_t syms[IR_MAX_RANK];
} LArenaBlock;

typedef struct LoopProgram {
  Arena *arena;
  const char *name;    /* model name */
  LBuffer *bufs;
  int n_bufs, cap_bufs;
  LKernel *kernels;
  int n_kernels, cap_kernels;
  int n_syms;
  int64_t arena_bytes;
  int64_t weights_floats;
  int64_t state_bytes; /* the state region (LB_STATE buffers); 0: none */
  LArenaBlock *arena_blocks; /* one per planned arena buffer (none from a .tfloop
                                listing: the runtime then commits the whole arena) */
  int n_arena_blocks;
} LoopProgram;

/* ---- loop.c: construction helpers and the printer ---- */

/* "i64", "f32", "f64" ("bad type" for anything else); "f32", "i32", "u8"
 * ("bad element type"). Static strings. */
const char *loop_type_str(LType t);
const char *loop_elem_str(LElem e);
bool loop_type_is_float(LType t); /* F32 or F64 */
LoopProgram *loop_program_create(Arena *a, const char *name);
int loop_buffer_add(LoopProgram *p, LBufKind kind, int index, int64_t offset, LElem elem,
                    const char *name);
LKernel *loop_kernel_add(LoopProgram *p, const char *name, const char *comment, int node);
int loop_var_new(LoopProgram *p, LKernel *k, LType t);

LExpr *lx_i(LoopProgram *p, int64_t v);
LExpr *lx_f32(LoopProgram *p, double v);
LExpr *lx_f64(LoopProgram *p, double v);
LExpr *lx_var(LoopProgram *p, LKernel *k, int var);
LExpr *lx_sym(LoopProgram *p, int sym);
LExpr *lx_load(LoopProgram *p, int buf, LExpr *index);
LExpr *lx_addr(LoopProgram *p, int buf, LExpr *index);
LExpr *lx_pool(LoopProgram *p);
LExpr *lx_null(LoopProgram *p);
LExpr *lx_bin(LoopProgram *p, LBinOp op, LExpr *a, LExpr *b); /* folds constant I64 arithmetic */
LExpr *lx_bin_reassoc(LoopProgram *p, LBinOp op, LExpr *a, LExpr *b);
LExpr *lx_un(LoopProgram *p, LUnOp op, LExpr *a);
LExpr *lx_select(LoopProgram *p, LExpr *cond, LExpr *a, LExpr *b);
LExpr *lx_cast(LoopProgram *p, LType t, LExpr *a);

LStmt *ls_block(LoopProgram *p);
void ls_append(LoopProgram *p, LStmt *block, LStmt *s); /* block: LS_BLOCK or LS_FOR */
LStmt *ls_for(LoopProgram *p, int var, LExpr *lo, LExpr *hi); /* append body stmts to it */
LStmt *ls_let(LoopProgram *p, int var, LType t, LExpr *value);
LStmt *ls_set(LoopProgram *p, int var, LExpr *value);
LStmt *ls_store(LoopProgram *p, int buf, LExpr *index, LExpr *value);
LStmt *ls_call(LoopProgram *p, LCallee callee, LExpr **args, int n);

/* Evaluates an integer expression of constants and symbols (what kernel
 * extents are) with symbol values syms[i]; false if e holds anything else. */
bool loop_expr_eval_i64(const LExpr *e, const int64_t *syms, int64_t *out);

/* ---- loop_kernel.c: kernels as functions of their buffers ---- */

/* The buffers k's extent and body reference, each once, in the order a
 * pre-order walk meets them (statements in order, a store's buffer before
 * its index and value, operands a, b, c): the parameters of k's generated
 * function. params needs room for p->n_bufs; returns the count. */
int loop_kernel_params(const LoopProgram *p, const LKernel *k, int *params);
/* The memory region of a buffer, as alias information sees it: 0 the
 * weights, 1 the arena, 2 the state, then one per input and one per
 * output. */
int loop_buffer_region(const LBuffer *b);
/* True when a and b are the same kernel up to a one-to-one renaming of
 * buffers that keeps each buffer's region and element type: one generated
 * function, called with each one's loop_kernel_params, computes both. */
bool loop_kernel_same(const LoopProgram *p, const LKernel *a, const LKernel *b);
/* A hash of what loop_kernel_same compares: same kernels, same hash. */
uint64_t loop_kernel_hash(const LoopProgram *p, const LKernel *k);
/* How many functions the code generators emit for p: its kernels that
 * share no other's. */
int loop_program_functions(const LoopProgram *p);

/* The listing (tfmc ir --level loop): readable, and complete, so that
 * loop_program_parse reads it back into a program that prints the same
 * text. Shape:
 *
 *   loop program "tiny" (arena 4096 bytes, weights 2048 floats, syms 2)
 *     (", state N bytes" before the ')' when the program has a state region;
 *     its buffers print as  bN = state+OFFSET : f32  "name")
 *     b0 = input[0] : i32  "tokens"
 *     b1 = weights+0 : f32  "embed.weight"
 *     (a weight in LW_PANELS layout: "b5 = weights+1024 : f32 panels[768,768]  "w"")
 *     b2 = arena+0 : f32  "%3"
 *   kernel k3_layernorm "layernorm %3 @\"m.tfm\":4:1" node 3 parallel extent (sym0 * sym1) grain 4 (outer v0):
 *     vars v0:i64 v1:f32 v2:i64
 *     let v1: f32 = 0f
 *     for v2 in 0..64:
 *       v1 = (v1 +~ b2[((v0 * 64) + v2)])
 *
 * Expressions print fully parenthesised: (a OP b), (c ? a : b), min(a, b),
 * exp(a), -(a), f32(a) (a cast), b3[i] (a load), &b3[i] (an address),
 * sym0, v4, pool, null; a `~` after a binary operator (min~, max~) marks
 * reassoc. Constants: i64 as integers (-3), f32 with an f suffix (0.5f,
 * -inff), f64 always with a point or exponent (1.0, 1e-12). "node N" is
 * left out for a kernel without a node, "grain N" for a serial kernel of
 * grain 1. */
void loop_program_print(const LoopProgram *p, FILE *out);

/* ---- loop_parse.c: the listing read back ----
 * Parses what loop_program_print writes into a new program in a; errors go
 * to d as file:line:col with the line and a caret, several per run. Returns
 * NULL if anything was reported. Types are checked as the builders would
 * (operands of one type, stores of the buffer's element type, variables in
 * range); nothing is folded, so the program prints back as it was written. */
LoopProgram *loop_program_parse(Arena *a, const SrcFile *src, Diags *d);


/* ---- loop_verify.c: the loop IR verifier ----
 *
 * The one set of well-formedness rules of loop IR; both code generators
 * (backends/llvm, backends/c) rely on them and only assert. A program
 * verifies when
 *   - its counts are sane: buffers, kernels >= 0, symbols 0..RT_MAX_SYMS,
 *     arena bytes and weight floats >= 0;
 *   - every buffer has a known kind and element type; inputs / outputs an
 *     index in 0..RT_MAX_IO-1; weights an offset in 0..weights_floats
 *     floats; arena (state) buffers an offset in 0..arena_bytes
 *     (0..state_bytes) bytes that is a
 *     multiple of 64;
 *   - every kernel is named by a C identifier that no other kernel, no
 *     runtime function (ir/callees.def, rt_kernel_run, ...), no libm / libc
 *     function code generators may call and no tfmc_model_* symbol takes;
 *     its extent is an I64 expression of integer constants and symbols only
 *     (loop_expr_eval_i64 evaluates it); a parallel kernel's grain >= 1; its
 *     outer variable an I64 variable of the kernel; its body an LS_BLOCK;
 *     every variable of a known type; statements nested at most 64 deep;
 *   - every expression is typed as LExpr says: constants of their type;
 *     variables in range, read at their declared type and defined (by an
 *     LS_LET, LS_SET or the LS_FOR driving them) by a statement that starts
 *     before the read (a let / set may read the variable's previous value,
 *     0 before the first write); symbols in range; loads from existing
 *     buffers, of the type of their element, at I64 indices (from a weight
 *     in a panels layout only when it holds f32: LW_PANELS); LX_BIN operands
 *     of one type, compares and LB_AND giving I64, no LB_REM / LB_AND on
 *     floats, no integer division or remainder by the constant 0; unary ops
 *     on floats keeping their type; select on an I64 condition; casts of
 *     known types; LX_ADDR / LX_POOL / LX_NULL only as call arguments;
 *   - LS_FOR bounds are I64 and the loop variable an I64 variable that no
 *     enclosing loop drives and that its body never assigns; LS_LET values
 *     of the let's type; LS_LET / LS_SET targets of the value's type;
 *     LS_STORE indices I64, values F32 for f32 buffers and I64 otherwise,
 *     never into the weights or an input;
 *   - every LS_CALL matches its ir/callees.def row: a known callee, the
 *     argument count, each argument of its kind (pointer kinds: LX_ADDR
 *     into an existing buffer of the right element type, written ones not
 *     into the weights or an input; LX_NULL only where the kind allows it;
 *     value kinds: I64 / F32 expressions, never a pointer).
 * Returns true, or false with the first problem in err, naming the kernel
 * ("kernel 3 (k3_softmax): store to b7 needs a f32 value"). Only reads p.
 *
 * The compile driver runs it after lowering and after every loop pass; until
 * then the code generators' entry points call it. */
bool loop_program_verify(const LoopProgram *p, char *err, size_t errlen);
/* The part of those rules one LS_CALL obeys on its own (its ir/callees.def
 * row: callee, argument count, argument kinds and buffers), for the loop
 * IR parser, which checks calls as it reads them. */
bool loop_call_check(const LoopProgram *p, const LStmt *s, char *err, size_t errlen);

#endif
