/* backends/llvm/emit.c — loop IR -> one LLVM module (LLVM 14 C API, typed
 * pointers).
 *
 * Each kernel becomes
 *     define void @NAME(i8* %args, i64 %lo, i64 %hi) noinline nounwind
 * whose body is  for (outer = lo; outer < hi; outer++) { body }, and
 *     define void @tfmc_model_run(i8* %args)
 * evaluates each kernel's extent (symbols and constants only) and calls the
 * runtime's rt_kernel_run(args, i, @NAME, extent, grain, parallel) for
 * kernel i (runtime/rt_model.h: it skips an extent that is not positive,
 * goes through the pool for parallel kernels and times the kernel when
 * args->profile is set).
 *
 * Shape of the generated code (what the optimiser relies on):
 *   - Variables are allocas in the entry block, zero-initialised (mem2reg /
 *     SROA promote them; a read before a write is 0, never undef).
 *   - Everything read through args (symbol values, buffer base pointers, the
 *     pool) is loaded once in the entry block, before any store, so loops see
 *     loop-invariant SSA values.
 *   - LS_FOR is a canonical loop: the bounds are evaluated once in the
 *     preheader, then header (i < hi) / body / latch (i + 1, nsw) / exit.
 *     (The C backend must evaluate `hi` once as well: for (v = lo, e = hi; ...).)
 *   - I64 add/sub/mul are nsw and buffer accesses are inbounds GEPs: int64_t
 *     arithmetic in C has the same undefined overflow, so the two backends
 *     mean the same thing.
 *   - Float ops marked reassoc carry the fast-math flags `reassoc contract`
 *     and nothing else; all other float ops are strict IEEE. LLVM 14's C API
 *     cannot set fast-math flags, so the module starts from a small prelude
 *     parsed from IR text that defines internal alwaysinline helpers
 *     (@tfmc.reassoc.fadd.f32 etc.) holding the flagged instruction; the
 *     inliner puts the flagged instruction in place before the vectoriser
 *     runs.
 *   - Alias information: accesses are tagged with scoped-noalias metadata
 *     per memory REGION, not per buffer: the weights, the arena, each input
 *     and each output are separate allocations by the RtRunArgs contract
 *     (runtime/rt_model.h), so an access to one region never aliases an
 *     access to another. Two buffers in the same region (two arena buffers,
 *     or a buffer read and written in place) get no claim at all.
 *
 * Errors: malformed loop IR is the loop IR verifier's to report
 * (ir/loop_verify.c, run at the top of llvm_module_emit): everything below
 * relies on its rules and only asserts them. LLVM's verifier complaining
 * about a module we built is an internal bug, returned as an error with its
 * message. */
#include "backends/llvm/llvm_internal.h"
#include "runtime/rt_model.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/IRReader.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RtRunArgs byte offsets, taken from the runtime's own struct: tfmc runs on
 * and targets 64-bit hosts, so the host's layout is the target's. The
 * asserts pin that layout to the contract runtime/rt_model.h documents: a
 * change to RtRunArgs (or a 32-bit host) stops the build here instead of
 * silently changing the ABI of every compiled model. */
_Static_assert(sizeof(void *) == 8, "the LLVM backend assumes 64-bit pointers");
_Static_assert(offsetof(RtRunArgs, syms) == 0 && offsetof(RtRunArgs, inputs) == 8 &&
                   offsetof(RtRunArgs, outputs) == 16 && offsetof(RtRunArgs, weights) == 24 &&
                   offsetof(RtRunArgs, arena) == 32 && offsetof(RtRunArgs, pool) == 40 &&
                   offsetof(RtRunArgs, profile) == 48 && offsetof(RtRunArgs, state) == 56 &&
                   sizeof(RtRunArgs) == 64,
               "RtRunArgs changed: update its layout contract in runtime/rt_model.h and "
               "bump RT_ABI_VERSION");
enum {
  ARGS_SYMS = offsetof(RtRunArgs, syms),
  ARGS_INPUTS = offsetof(RtRunArgs, inputs),
  ARGS_OUTPUTS = offsetof(RtRunArgs, outputs),
  ARGS_WEIGHTS = offsetof(RtRunArgs, weights),
  ARGS_ARENA = offsetof(RtRunArgs, arena),
  ARGS_STATE = offsetof(RtRunArgs, state),
  ARGS_POOL = offsetof(RtRunArgs, pool)
};

/* Reassociable float operations provided by the prelude. */
typedef enum ReassocOp { RA_FADD, RA_FSUB, RA_FMUL, RA_FDIV, RA_MIN, RA_MAX, RA_COUNT } ReassocOp;
static const char *reassoc_name[RA_COUNT] = {"fadd", "fsub", "fmul", "fdiv", "minnum", "maxnum"};

/* libm functions called by name (the JIT resolves them in process). */
typedef enum MathFn { MF_TANHF, MF_ERFF, MF_TANH, MF_ERF, MF_COUNT } MathFn;
static const char *math_name[MF_COUNT] = {"tanhf", "erff", "tanh", "erf"};

typedef struct Emit {
  const LoopProgram *p;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  char *err;
  size_t errlen;
  bool failed;
  const char *where; /* kernel name (or tfmc_model_run) for messages */

  LLVMTypeRef t_void, t_i8, t_i32, t_i64, t_f32, t_f64;
  LLVMTypeRef t_i8p, t_f32p;
  LLVMTypeRef t_kernel, t_entry, t_kernel_run;
  LLVMValueRef fn_kernel_run;
  LLVMValueRef fn_callee[LC_CALLEE_COUNT]; /* declarations from ir/callees.def */
  LLVMValueRef fn_math[MF_COUNT];
  LLVMValueRef fn_reassoc[RA_COUNT][2]; /* [op][0: f32, 1: f64] */
  unsigned md_scope, md_noalias;

  /* regions: 0 weights, 1 arena, 2 + 2i input i, 3 + 2i output i */
  int n_regions;
  LLVMMetadataRef domain;
  LLVMMetadataRef *region_scope; /* lazily built, [n_regions] */

  /* per function */
  const LKernel *k; /* NULL while emitting tfmc_model_run */
  LLVMValueRef fn, args;
  LLVMValueRef ctx_arg;   /* in a kernel: its i8** context (args, then its parameters) */
  int *param_of;          /* in a kernel: buffer -> parameter index, -1 if none */
  LLVMValueRef *vars; /* allocas [k->n_vars] */
  LLVMValueRef *base; /* typed element pointer per buffer, NULL if unused */
  LLVMValueRef *syms; /* i64 per symbol, NULL if unused */
  LLVMValueRef pool;  /* i8*, NULL if unused */
  bool *use_buf, *use_sym, *use_region;
  bool use_pool;
  LLVMValueRef *scope_list, *noalias_list; /* per region for this kernel, NULL: none */
  int block_seq;
} Emit;

static bool fail(Emit *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(Emit *E, const char *fmt, ...) {
  if (E->failed)
    return false;
  E->failed = true;
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  llvm_fail(E->err, E->errlen, "llvm: %s: %s", E->where ? E->where : "module", msg);
  return false;
}

static LLVMTypeRef ltype(Emit *E, LType t) {
  return t == LT_F32 ? E->t_f32 : t == LT_F64 ? E->t_f64 : E->t_i64;
}

static LLVMTypeRef elem_type(Emit *E, LElem e) {
  switch (e) {
  case LE_F32: return E->t_f32;
  case LE_I32: return E->t_i32;
  case LE_U8: return E->t_i8;
  case LE_COUNT: break;
  }
  return E->t_i8;
}

static unsigned elem_align(LElem e) {
  return e == LE_F32 || e == LE_I32 ? 4 : 1;
}

static LLVMValueRef ci64(Emit *E, int64_t v) {
  return LLVMConstInt(E->t_i64, (unsigned long long)v, 1);
}

static LLVMBasicBlockRef new_block(Emit *E, const char *what) {
  char name[64];
  snprintf(name, sizeof name, "%s%d", what, E->block_seq++);
  return LLVMAppendBasicBlockInContext(E->ctx, E->fn, name);
}

static LLVMValueRef call(Emit *E, LLVMValueRef fn, LLVMValueRef *args, unsigned n,
                         const char *name) {
  return LLVMBuildCall2(E->b, LLVMGlobalGetValueType(fn), fn, args, n, name);
}

static void add_fn_attr(Emit *E, LLVMValueRef fn, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(E->ctx, kind, 0));
}

static void add_fn_string_attr(Emit *E, LLVMValueRef fn, const char *key, const char *value) {
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(E->ctx, key, (unsigned)strlen(key), value,
                                                    (unsigned)strlen(value)));
}

/* ---- module setup: prelude, types, runtime declarations ---- */

/* The reassoc helpers as IR text (the C API has no fast-math flags). */
static char *prelude_text(void) {
  size_t cap = 8192, len = 0;
  char *s = malloc(cap);
  if (!s)
    return NULL;
  static const char *tys[2] = {"float", "double"};
  static const char *sfx[2] = {"f32", "f64"};
  for (int t = 0; t < 2; t++) {
    for (int op = 0; op < RA_COUNT; op++) {
      const char *ty = tys[t];
      if (op == RA_MIN || op == RA_MAX)
        len += (size_t)snprintf(s + len, cap - len,
                                "define internal %s @tfmc.reassoc.%s.%s(%s %%a, %s %%b) #0 {\n"
                                "  %%r = call reassoc contract %s @llvm.%s.%s(%s %%a, %s %%b)\n"
                                "  ret %s %%r\n}\n"
                                "declare %s @llvm.%s.%s(%s, %s)\n",
                                ty, reassoc_name[op], sfx[t], ty, ty, ty, reassoc_name[op], sfx[t],
                                ty, ty, ty, ty, reassoc_name[op], sfx[t], ty, ty);
      else
        len += (size_t)snprintf(s + len, cap - len,
                                "define internal %s @tfmc.reassoc.%s.%s(%s %%a, %s %%b) #0 {\n"
                                "  %%r = %s reassoc contract %s %%a, %%b\n"
                                "  ret %s %%r\n}\n",
                                ty, reassoc_name[op], sfx[t], ty, ty, reassoc_name[op], ty, ty);
    }
  }
  len += (size_t)snprintf(s + len, cap - len,
                          "attributes #0 = { alwaysinline nounwind readnone willreturn }\n");
  if (len >= cap) { /* cannot happen with the fixed text above */
    free(s);
    return NULL;
  }
  return s;
}

/* The LLVM type of a runtime-call parameter of kind k. */
static LLVMTypeRef arg_type(Emit *E, LArgKind k) {
  switch (k) {
  case LA_POOL: return E->t_i8p;
  case LA_I64: return E->t_i64;
  case LA_F32: return E->t_f32;
  case LA_F32_PTR:
  case LA_F32_PTR_OR_NULL:
  case LA_F32_OUT:
  case LA_F32_OUT_OR_NULL:
  case LA_F32_PANELS:
  case LA_BF16_PANELS:
  case LA_I8_PANELS: return E->t_f32p;
  case LA_U8_PTR_OR_NULL: return E->t_i8p;
  case LA_KIND_COUNT: break;
  }
  return E->t_i8p;
}

static bool module_create(Emit *E, const char *name) {
  char *text = prelude_text();
  if (!text)
    return fail(E, "out of memory");
  /* the parser takes ownership of buf */
  LLVMMemoryBufferRef buf =
      LLVMCreateMemoryBufferWithMemoryRangeCopy(text, strlen(text), "tfmc-prelude");
  free(text);
  char *msg = NULL;
  if (LLVMParseIRInContext(E->ctx, buf, &E->mod, &msg)) {
    fail(E, "internal error: prelude does not parse: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    E->mod = NULL;
    return false;
  }
  LLVMSetModuleIdentifier(E->mod, name, strlen(name));
  LLVMSetSourceFileName(E->mod, name, strlen(name));

  E->t_void = LLVMVoidTypeInContext(E->ctx);
  E->t_i8 = LLVMInt8TypeInContext(E->ctx);
  E->t_i32 = LLVMInt32TypeInContext(E->ctx);
  E->t_i64 = LLVMInt64TypeInContext(E->ctx);
  E->t_f32 = LLVMFloatTypeInContext(E->ctx);
  E->t_f64 = LLVMDoubleTypeInContext(E->ctx);
  E->t_i8p = LLVMPointerType(E->t_i8, 0);
  E->t_f32p = LLVMPointerType(E->t_f32, 0);

  LLVMTypeRef kp[3] = {E->t_i8p, E->t_i64, E->t_i64};
  E->t_kernel = LLVMFunctionType(E->t_void, kp, 3, 0);
  E->t_entry = LLVMFunctionType(E->t_void, &E->t_i8p, 1, 0);
  /* void rt_kernel_run(const RtRunArgs *, int kernel, RtTaskFn, void *ctx,
   *                    int64_t n, int64_t grain, int parallel) */
  LLVMTypeRef rp[7] = {E->t_i8p, E->t_i32, LLVMPointerType(E->t_kernel, 0), E->t_i8p,
                       E->t_i64, E->t_i64, E->t_i32};
  E->t_kernel_run = LLVMFunctionType(E->t_void, rp, 7, 0);

  for (int c = 0; c < LC_CALLEE_COUNT; c++) {
    const LCalleeInfo *ci = &loop_callee_info[c];
    LLVMTypeRef params[LOOP_CALLEE_MAX_ARGS];
    for (int i = 0; i < ci->n_args; i++)
      params[i] = arg_type(E, ci->args[i].kind);
    E->fn_callee[c] = LLVMAddFunction(E->mod, ci->name,
                                      LLVMFunctionType(E->t_void, params, (unsigned)ci->n_args, 0));
    add_fn_attr(E, E->fn_callee[c], "nounwind");
  }
  E->fn_kernel_run = LLVMAddFunction(E->mod, "rt_kernel_run", E->t_kernel_run);
  add_fn_attr(E, E->fn_kernel_run, "nounwind");
  for (int i = 0; i < MF_COUNT; i++) {
    LLVMTypeRef ty = (i == MF_TANHF || i == MF_ERFF) ? E->t_f32 : E->t_f64;
    E->fn_math[i] = LLVMAddFunction(E->mod, math_name[i], LLVMFunctionType(ty, &ty, 1, 0));
    /* tanh and erf cannot overflow or hit a pole: they never set errno */
    add_fn_attr(E, E->fn_math[i], "nounwind");
    add_fn_attr(E, E->fn_math[i], "readnone");
    add_fn_attr(E, E->fn_math[i], "willreturn");
  }
  static const char *sfx[2] = {"f32", "f64"};
  for (int op = 0; op < RA_COUNT; op++)
    for (int t = 0; t < 2; t++) {
      char fname[64];
      snprintf(fname, sizeof fname, "tfmc.reassoc.%s.%s", reassoc_name[op], sfx[t]);
      E->fn_reassoc[op][t] = LLVMGetNamedFunction(E->mod, fname);
      if (!E->fn_reassoc[op][t])
        return fail(E, "internal error: prelude lacks %s", fname);
    }
  E->md_scope = LLVMGetMDKindIDInContext(E->ctx, "alias.scope", 11);
  E->md_noalias = LLVMGetMDKindIDInContext(E->ctx, "noalias", 7);
  return true;
}

static LLVMValueRef intrinsic(Emit *E, const char *name, LLVMTypeRef overload) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) {
    fail(E, "internal error: no intrinsic %s", name);
    return NULL;
  }
  return LLVMGetIntrinsicDeclaration(E->mod, id, &overload, 1);
}

/* ---- pre-walk: which buffers, symbols, regions a function reads through
 * args ---- */

static int region_of(const LBuffer *b) { return loop_buffer_region(b); }

/* regions 0, 1 and 2 (weights, arena, state) and two per input / output
 * index */
static void count_regions(Emit *E) {
  int max_io = 0;
  for (int i = 0; i < E->p->n_bufs; i++) {
    const LBuffer *b = &E->p->bufs[i];
    if ((b->kind == LB_INPUT || b->kind == LB_OUTPUT) && b->index + 1 > max_io)
      max_io = b->index + 1;
  }
  E->n_regions = 3 + 2 * max_io;
}

static void walk_expr(Emit *E, const LExpr *e) {
  if (!e)
    return;
  const LoopProgram *p = E->p;
  switch (e->kind) {
  case LX_SYM: E->use_sym[e->sym] = true; break;
  case LX_LOAD:
  case LX_ADDR:
    E->use_buf[e->buf] = true;
    if (e->kind == LX_LOAD)
      E->use_region[region_of(&p->bufs[e->buf])] = true;
    break;
  case LX_POOL: E->use_pool = true; break;
  case LX_CONST_I:
  case LX_CONST_F:
  case LX_VAR:
  case LX_NULL:
  case LX_BIN:
  case LX_UN:
  case LX_SELECT:
  case LX_CAST:
  case LX_KIND_COUNT: break;
  }
  walk_expr(E, e->a);
  walk_expr(E, e->b);
  walk_expr(E, e->c);
}

static void walk_stmt(Emit *E, const LStmt *s) {
  if (!s)
    return;
  walk_expr(E, s->lo);
  walk_expr(E, s->hi);
  walk_expr(E, s->value);
  walk_expr(E, s->index);
  if (s->kind == LS_STORE) {
    E->use_buf[s->buf] = true;
    E->use_region[region_of(&E->p->bufs[s->buf])] = true;
  }
  if (s->kind == LS_CALL)
    for (int i = 0; i < s->n_args; i++)
      walk_expr(E, s->args[i]);
  if (s->kind == LS_BLOCK || s->kind == LS_FOR)
    for (int i = 0; i < s->n_stmts; i++)
      walk_stmt(E, s->stmts[i]);
}

/* ---- reading args (entry block only) ---- */

static LLVMValueRef args_field(Emit *E, int offset, LLVMTypeRef ty, const char *name) {
  LLVMValueRef off = ci64(E, offset);
  LLVMValueRef at = LLVMBuildInBoundsGEP2(E->b, E->t_i8, E->args, &off, 1, "");
  at = LLVMBuildBitCast(E->b, at, LLVMPointerType(ty, 0), "");
  LLVMValueRef v = LLVMBuildLoad2(E->b, ty, at, name);
  LLVMSetAlignment(v, 8);
  return v;
}

static bool load_args(Emit *E) {
  const LoopProgram *p = E->p;
  LLVMValueRef syms = NULL, inputs = NULL, outputs = NULL, weights = NULL, arena = NULL, state = NULL;
  for (int i = 0; i < p->n_syms; i++) {
    if (!E->use_sym[i])
      continue;
    if (!syms)
      syms = args_field(E, ARGS_SYMS, LLVMPointerType(E->t_i64, 0), "syms");
    LLVMValueRef idx = ci64(E, i);
    LLVMValueRef at = LLVMBuildInBoundsGEP2(E->b, E->t_i64, syms, &idx, 1, "");
    char name[32];
    snprintf(name, sizeof name, "sym%d", i);
    E->syms[i] = LLVMBuildLoad2(E->b, E->t_i64, at, name);
    LLVMSetAlignment(E->syms[i], 8);
  }
  if (E->use_pool)
    E->pool = args_field(E, ARGS_POOL, E->t_i8p, "pool");
  for (int i = 0; i < p->n_bufs; i++) {
    if (!E->use_buf[i])
      continue;
    const LBuffer *bf = &p->bufs[i];
    LLVMTypeRef ety = elem_type(E, bf->elem);
    LLVMValueRef ptr = NULL;
    if (E->k) {
      /* a kernel's buffers are its parameters: ctx[1 + j] */
      TFMC_ASSERT(E->param_of[i] >= 0);
      LLVMValueRef idx = ci64(E, 1 + E->param_of[i]);
      LLVMValueRef at = LLVMBuildInBoundsGEP2(E->b, E->t_i8p, E->ctx_arg, &idx, 1, "");
      ptr = LLVMBuildLoad2(E->b, E->t_i8p, at, "");
      LLVMSetAlignment(ptr, 8);
      char name[32];
      snprintf(name, sizeof name, "b%d", i);
      E->base[i] = LLVMBuildBitCast(E->b, ptr, LLVMPointerType(ety, 0), name);
      continue;
    }
    switch (bf->kind) {
    case LB_INPUT:
    case LB_OUTPUT: {
      bool in = bf->kind == LB_INPUT;
      LLVMValueRef *arr = in ? &inputs : &outputs;
      if (!*arr)
        *arr = args_field(E, in ? ARGS_INPUTS : ARGS_OUTPUTS, LLVMPointerType(E->t_i8p, 0),
                          in ? "inputs" : "outputs");
      LLVMValueRef idx = ci64(E, bf->index);
      LLVMValueRef at = LLVMBuildInBoundsGEP2(E->b, E->t_i8p, *arr, &idx, 1, "");
      ptr = LLVMBuildLoad2(E->b, E->t_i8p, at, "");
      LLVMSetAlignment(ptr, 8);
      break;
    }
    case LB_WEIGHT: {
      if (!weights)
        weights = args_field(E, ARGS_WEIGHTS, E->t_f32p, "weights");
      LLVMValueRef off = ci64(E, bf->offset);
      ptr = LLVMBuildInBoundsGEP2(E->b, E->t_f32, weights, &off, 1, "");
      break;
    }
    case LB_ARENA: {
      if (!arena)
        arena = args_field(E, ARGS_ARENA, E->t_i8p, "arena");
      LLVMValueRef off = ci64(E, bf->offset);
      ptr = LLVMBuildInBoundsGEP2(E->b, E->t_i8, arena, &off, 1, "");
      break;
    }
    case LB_STATE: {
      if (!state)
        state = args_field(E, ARGS_STATE, E->t_i8p, "state");
      LLVMValueRef off = ci64(E, bf->offset);
      ptr = LLVMBuildInBoundsGEP2(E->b, E->t_i8, state, &off, 1, "");
      break;
    }
    case LB_KIND_COUNT: TFMC_ASSERT(!"a buffer of a known kind"); break;
    }
    char name[32];
    snprintf(name, sizeof name, "b%d", i);
    E->base[i] = LLVMBuildBitCast(E->b, ptr, LLVMPointerType(ety, 0), name);
  }
  return true;
}

/* ---- alias scopes per region ---- */

static LLVMMetadataRef region_scope(Emit *E, int r) {
  if (E->region_scope[r])
    return E->region_scope[r];
  if (!E->domain) {
    LLVMMetadataRef s = LLVMMDStringInContext2(E->ctx, "tfmc.regions", 12);
    E->domain = LLVMMDNodeInContext2(E->ctx, &s, 1);
  }
  char name[48];
  if (r == 0)
    snprintf(name, sizeof name, "tfmc.weights");
  else if (r == 1)
    snprintf(name, sizeof name, "tfmc.arena");
  else
    snprintf(name, sizeof name, "tfmc.%s%d", r % 2 ? "output" : "input", (r - 2) / 2);
  LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(E->ctx, name, strlen(name)), E->domain};
  E->region_scope[r] = LLVMMDNodeInContext2(E->ctx, ops, 2);
  return E->region_scope[r];
}

/* For a kernel touching several regions: access to region r is in scope r
 * and does not alias the other regions the kernel touches. */
static bool build_scopes(Emit *E) {
  int n = 0;
  for (int r = 0; r < E->n_regions; r++)
    n += E->use_region[r];
  if (n < 2)
    return true;
  LLVMMetadataRef *others = malloc((size_t)n * sizeof *others);
  if (!others)
    return fail(E, "out of memory");
  for (int r = 0; r < E->n_regions; r++) {
    if (!E->use_region[r])
      continue;
    LLVMMetadataRef self = region_scope(E, r);
    int m = 0;
    for (int q = 0; q < E->n_regions; q++)
      if (q != r && E->use_region[q])
        others[m++] = region_scope(E, q);
    E->scope_list[r] = LLVMMetadataAsValue(E->ctx, LLVMMDNodeInContext2(E->ctx, &self, 1));
    E->noalias_list[r] =
        LLVMMetadataAsValue(E->ctx, LLVMMDNodeInContext2(E->ctx, others, (size_t)m));
  }
  free(others);
  return true;
}

static void tag_access(Emit *E, LLVMValueRef inst, int buf) {
  int r = region_of(&E->p->bufs[buf]);
  if (r < 0 || !E->scope_list[r])
    return;
  LLVMSetMetadata(inst, E->md_scope, E->scope_list[r]);
  LLVMSetMetadata(inst, E->md_noalias, E->noalias_list[r]);
}

/* ---- expressions ---- */

static LLVMValueRef emit_expr(Emit *E, const LExpr *e);

/* the element buf[index] (the verifier checked buf, the index type and
 * that only kernels read buffers) */
static LLVMValueRef elem_ptr(Emit *E, int buf, const LExpr *index) {
  TFMC_ASSERT(E->base[buf] && index->t == LT_I64);
  LLVMValueRef i = emit_expr(E, index);
  if (!i)
    return NULL;
  return LLVMBuildInBoundsGEP2(E->b, elem_type(E, E->p->bufs[buf].elem), E->base[buf], &i, 1, "");
}

static LLVMValueRef emit_load(Emit *E, const LExpr *e) {
  LLVMValueRef ptr = elem_ptr(E, e->buf, e->a);
  if (!ptr)
    return NULL;
  LElem el = E->p->bufs[e->buf].elem;
  TFMC_ASSERT(e->t == (el == LE_F32 ? LT_F32 : LT_I64));
  LLVMValueRef v = LLVMBuildLoad2(E->b, elem_type(E, el), ptr, "");
  LLVMSetAlignment(v, elem_align(el));
  tag_access(E, v, e->buf);
  switch (el) {
  case LE_F32: return v;
  case LE_I32: return LLVMBuildSExt(E->b, v, E->t_i64, "");
  case LE_U8: return LLVMBuildZExt(E->b, v, E->t_i64, "");
  case LE_COUNT: break;
  }
  return v;
}

static LLVMValueRef bool_to_i64(Emit *E, LLVMValueRef c) {
  return LLVMBuildZExt(E->b, c, E->t_i64, "");
}

static LLVMValueRef emit_bin(Emit *E, const LExpr *e) {
  LBinOp op = (LBinOp)e->op;
  LType t = e->a->t;
  TFMC_ASSERT(e->b->t == t);
  LLVMValueRef a = emit_expr(E, e->a);
  if (!a)
    return NULL;
  LLVMValueRef b = emit_expr(E, e->b);
  if (!b)
    return NULL;
  LLVMValueRef ab[2] = {a, b};

  if (t == LT_I64) {
    switch (op) {
    case LB_ADD: return LLVMBuildNSWAdd(E->b, a, b, "");
    case LB_SUB: return LLVMBuildNSWSub(E->b, a, b, "");
    case LB_MUL: return LLVMBuildNSWMul(E->b, a, b, "");
    case LB_DIV: return LLVMBuildSDiv(E->b, a, b, "");
    case LB_REM: return LLVMBuildSRem(E->b, a, b, "");
    case LB_MIN: return LLVMBuildSelect(E->b, LLVMBuildICmp(E->b, LLVMIntSLT, a, b, ""), a, b, "");
    case LB_MAX: return LLVMBuildSelect(E->b, LLVMBuildICmp(E->b, LLVMIntSGT, a, b, ""), a, b, "");
    case LB_LT: return bool_to_i64(E, LLVMBuildICmp(E->b, LLVMIntSLT, a, b, ""));
    case LB_LE: return bool_to_i64(E, LLVMBuildICmp(E->b, LLVMIntSLE, a, b, ""));
    case LB_EQ: return bool_to_i64(E, LLVMBuildICmp(E->b, LLVMIntEQ, a, b, ""));
    case LB_NE: return bool_to_i64(E, LLVMBuildICmp(E->b, LLVMIntNE, a, b, ""));
    case LB_AND: {
      LLVMValueRef z = ci64(E, 0);
      LLVMValueRef x = LLVMBuildAnd(E->b, LLVMBuildICmp(E->b, LLVMIntNE, a, z, ""),
                                    LLVMBuildICmp(E->b, LLVMIntNE, b, z, ""), "");
      return bool_to_i64(E, x);
    }
    case LB_BINOP_COUNT: break;
    }
    TFMC_ASSERT(!"a known i64 binary operator");
  }

  int ti = t == LT_F64;
  if (e->reassoc) {
    ReassocOp ra = RA_COUNT;
    switch (op) {
    case LB_ADD: ra = RA_FADD; break;
    case LB_SUB: ra = RA_FSUB; break;
    case LB_MUL: ra = RA_FMUL; break;
    case LB_DIV: ra = RA_FDIV; break;
    case LB_MIN: ra = RA_MIN; break;
    case LB_MAX: ra = RA_MAX; break;
    case LB_REM:
    case LB_LT:
    case LB_LE:
    case LB_EQ:
    case LB_NE:
    case LB_AND:
    case LB_BINOP_COUNT: break; /* compares have nothing to reassociate */
    }
    if (ra != RA_COUNT)
      return call(E, E->fn_reassoc[ra][ti], ab, 2, "");
  }
  switch (op) {
  case LB_ADD: return LLVMBuildFAdd(E->b, a, b, "");
  case LB_SUB: return LLVMBuildFSub(E->b, a, b, "");
  case LB_MUL: return LLVMBuildFMul(E->b, a, b, "");
  case LB_DIV: return LLVMBuildFDiv(E->b, a, b, "");
  case LB_MIN:
  case LB_MAX: {
    LLVMValueRef fn = intrinsic(E, op == LB_MIN ? "llvm.minnum" : "llvm.maxnum", ltype(E, t));
    return fn ? call(E, fn, ab, 2, "") : NULL;
  }
  case LB_LT: return bool_to_i64(E, LLVMBuildFCmp(E->b, LLVMRealOLT, a, b, ""));
  case LB_LE: return bool_to_i64(E, LLVMBuildFCmp(E->b, LLVMRealOLE, a, b, ""));
  case LB_EQ: return bool_to_i64(E, LLVMBuildFCmp(E->b, LLVMRealOEQ, a, b, ""));
  case LB_NE: return bool_to_i64(E, LLVMBuildFCmp(E->b, LLVMRealUNE, a, b, ""));
  case LB_REM:
  case LB_AND:
  case LB_BINOP_COUNT: break;
  }
  TFMC_ASSERT(!"a binary operator defined on floats");
  return NULL;
}

static LLVMValueRef emit_un(Emit *E, const LExpr *e) {
  TFMC_ASSERT(loop_type_is_float(e->t) && e->a->t == e->t);
  LLVMValueRef a = emit_expr(E, e->a);
  if (!a)
    return NULL;
  LLVMTypeRef ty = ltype(E, e->t);
  bool f32 = e->t == LT_F32;
  const char *intr = NULL;
  switch ((LUnOp)e->op) {
  case LU_NEG: return LLVMBuildFNeg(E->b, a, "");
  case LU_EXP: intr = "llvm.exp"; break;
  case LU_LOG: intr = "llvm.log"; break;
  case LU_SQRT: intr = "llvm.sqrt"; break;
  case LU_SIN: intr = "llvm.sin"; break;
  case LU_COS: intr = "llvm.cos"; break;
  case LU_TANH: return call(E, E->fn_math[f32 ? MF_TANHF : MF_TANH], &a, 1, "");
  case LU_ERF: return call(E, E->fn_math[f32 ? MF_ERFF : MF_ERF], &a, 1, "");
  case LU_UNOP_COUNT: break;
  }
  TFMC_ASSERT(intr);
  LLVMValueRef fn = intrinsic(E, intr, ty);
  return fn ? call(E, fn, &a, 1, "") : NULL;
}

static LLVMValueRef emit_cast(Emit *E, const LExpr *e) {
  LLVMValueRef a = emit_expr(E, e->a);
  if (!a)
    return NULL;
  LType from = e->a->t, to = e->t;
  LLVMTypeRef ty = ltype(E, to);
  if (from == to)
    return a;
  if (from == LT_I64)
    return LLVMBuildSIToFP(E->b, a, ty, "");
  if (to == LT_I64)
    return LLVMBuildFPToSI(E->b, a, ty, "");
  if (to == LT_F64)
    return LLVMBuildFPExt(E->b, a, ty, "");
  return LLVMBuildFPTrunc(E->b, a, ty, "");
}

static LLVMValueRef emit_expr(Emit *E, const LExpr *e) {
  if (E->failed)
    return NULL;
  switch (e->kind) {
  case LX_CONST_I: return ci64(E, e->ival);
  case LX_CONST_F: return LLVMConstReal(ltype(E, e->t), e->fval);
  case LX_VAR:
    TFMC_ASSERT(E->k && E->k->var_types[e->var] == e->t);
    return LLVMBuildLoad2(E->b, ltype(E, e->t), E->vars[e->var], "");
  case LX_SYM: TFMC_ASSERT(E->syms[e->sym]); return E->syms[e->sym];
  case LX_LOAD: return emit_load(E, e);
  case LX_ADDR:
  case LX_POOL:
  case LX_NULL: break; /* call arguments only: emit_call */
  case LX_BIN: return emit_bin(E, e);
  case LX_UN: return emit_un(E, e);
  case LX_SELECT: {
    LLVMValueRef c = emit_expr(E, e->a);
    LLVMValueRef x = c ? emit_expr(E, e->b) : NULL;
    LLVMValueRef y = x ? emit_expr(E, e->c) : NULL;
    if (!y)
      return NULL;
    return LLVMBuildSelect(E->b, LLVMBuildICmp(E->b, LLVMIntNE, c, ci64(E, 0), ""), x, y, "");
  }
  case LX_CAST: return emit_cast(E, e);
  case LX_KIND_COUNT: break;
  }
  TFMC_ASSERT(!"a value expression of a known kind");
  return NULL;
}

/* ---- statements ---- */

static bool emit_stmts(Emit *E, LStmt *const *stmts, int n);

/* for (var = lo; var < hi; var++) stmts, with hi evaluated once (the
 * verifier saw that nothing inside assigns var) */
static bool emit_loop(Emit *E, int var, LLVMValueRef lo, LLVMValueRef hi, LStmt *const *stmts,
                      int n) {
  LLVMValueRef slot = E->vars[var];
  LLVMBuildStore(E->b, lo, slot);
  LLVMBasicBlockRef header = new_block(E, "header");
  LLVMBasicBlockRef body = new_block(E, "body");
  LLVMBasicBlockRef latch = new_block(E, "latch");
  LLVMBasicBlockRef exit = new_block(E, "exit");
  LLVMBuildBr(E->b, header);

  LLVMPositionBuilderAtEnd(E->b, header);
  LLVMValueRef i = LLVMBuildLoad2(E->b, E->t_i64, slot, "");
  LLVMBuildCondBr(E->b, LLVMBuildICmp(E->b, LLVMIntSLT, i, hi, ""), body, exit);

  LLVMPositionBuilderAtEnd(E->b, body);
  if (!emit_stmts(E, stmts, n))
    return false;
  LLVMBuildBr(E->b, latch);

  LLVMPositionBuilderAtEnd(E->b, latch);
  i = LLVMBuildLoad2(E->b, E->t_i64, slot, "");
  LLVMBuildStore(E->b, LLVMBuildNSWAdd(E->b, i, ci64(E, 1), ""), slot);
  LLVMBuildBr(E->b, header);

  LLVMPositionBuilderAtEnd(E->b, exit);
  return true;
}

/* A call of a runtime function of ir/callees.def (the verifier matched its
 * arguments against the table's row). */
static bool emit_call(Emit *E, const LStmt *s) {
  const LCalleeInfo *ci = &loop_callee_info[s->callee];
  LLVMValueRef v[LOOP_CALLEE_MAX_ARGS];
  for (int i = 0; i < ci->n_args; i++) {
    const LExpr *a = s->args[i];
    v[i] = NULL;
    switch (ci->args[i].kind) {
    case LA_POOL:
      v[i] = a->kind == LX_NULL ? LLVMConstNull(E->t_i8p) : E->pool;
      break;
    case LA_I64:
    case LA_F32: v[i] = emit_expr(E, a); break;
    case LA_F32_PTR:
    case LA_F32_PTR_OR_NULL:
    case LA_F32_OUT:
    case LA_F32_OUT_OR_NULL:
    case LA_U8_PTR_OR_NULL:
    case LA_F32_PANELS:
    case LA_BF16_PANELS:
    case LA_I8_PANELS:
      v[i] = a->kind == LX_NULL ? LLVMConstNull(arg_type(E, ci->args[i].kind))
                                : elem_ptr(E, a->buf, a->a);
      break;
    case LA_KIND_COUNT: TFMC_ASSERT(!"an argument of a known kind"); break;
    }
    if (!v[i])
      return false;
  }
  call(E, E->fn_callee[s->callee], v, (unsigned)ci->n_args, "");
  return true;
}

static bool emit_stmt(Emit *E, const LStmt *s) {
  if (E->failed)
    return false;
  switch (s->kind) {
  case LS_FOR: {
    TFMC_ASSERT(E->k->var_types[s->var] == LT_I64);
    LLVMValueRef lo = emit_expr(E, s->lo);
    LLVMValueRef hi = lo ? emit_expr(E, s->hi) : NULL;
    if (!hi)
      return false;
    return emit_loop(E, s->var, lo, hi, s->stmts, s->n_stmts);
  }
  case LS_LET:
  case LS_SET: {
    TFMC_ASSERT(E->k->var_types[s->var] == s->value->t);
    LLVMValueRef v = emit_expr(E, s->value);
    if (!v)
      return false;
    LLVMBuildStore(E->b, v, E->vars[s->var]);
    return true;
  }
  case LS_STORE: {
    LElem el = E->p->bufs[s->buf].elem;
    TFMC_ASSERT(s->value->t == (el == LE_F32 ? LT_F32 : LT_I64));
    LLVMValueRef ptr = elem_ptr(E, s->buf, s->index);
    LLVMValueRef v = ptr ? emit_expr(E, s->value) : NULL;
    if (!v)
      return false;
    if (el != LE_F32)
      v = LLVMBuildTrunc(E->b, v, elem_type(E, el), "");
    LLVMValueRef st = LLVMBuildStore(E->b, v, ptr);
    LLVMSetAlignment(st, elem_align(el));
    tag_access(E, st, s->buf);
    return true;
  }
  case LS_CALL: return emit_call(E, s);
  case LS_BLOCK: return emit_stmts(E, s->stmts, s->n_stmts);
  case LS_KIND_COUNT: break;
  }
  TFMC_ASSERT(!"a statement of a known kind");
  return false;
}

static bool emit_stmts(Emit *E, LStmt *const *stmts, int n) {
  for (int i = 0; i < n; i++)
    if (!emit_stmt(E, stmts[i]))
      return false;
  return true;
}

/* ---- functions ---- */

/* Per-function scratch, sized for the program; zeroed per function. */
typedef struct Scratch {
  LLVMValueRef *base, *syms, *scope_list, *noalias_list;
  bool *use_buf, *use_sym, *use_region;
} Scratch;

static bool scratch_alloc(Emit *E, Scratch *s) {
  size_t nb = (size_t)E->p->n_bufs + 1, ns = (size_t)E->p->n_syms + 1,
         nr = (size_t)E->n_regions + 1;
  s->base = calloc(nb, sizeof *s->base);
  s->syms = calloc(ns, sizeof *s->syms);
  s->scope_list = calloc(nr, sizeof *s->scope_list);
  s->noalias_list = calloc(nr, sizeof *s->noalias_list);
  s->use_buf = calloc(nb, 1);
  s->use_sym = calloc(ns, 1);
  s->use_region = calloc(nr, 1);
  E->region_scope = calloc(nr, sizeof *E->region_scope);
  if (!s->base || !s->syms || !s->scope_list || !s->noalias_list || !s->use_buf || !s->use_sym ||
      !s->use_region || !E->region_scope)
    return fail(E, "out of memory");
  return true;
}

static void scratch_free(Emit *E, Scratch *s) {
  free(s->base);
  free(s->syms);
  free(s->scope_list);
  free(s->noalias_list);
  free(s->use_buf);
  free(s->use_sym);
  free(s->use_region);
  free(E->region_scope);
  E->region_scope = NULL;
}

static void scratch_reset(Emit *E, Scratch *s) {
  size_t nb = (size_t)E->p->n_bufs + 1, ns = (size_t)E->p->n_syms + 1,
         nr = (size_t)E->n_regions + 1;
  memset(s->base, 0, nb * sizeof *s->base);
  memset(s->syms, 0, ns * sizeof *s->syms);
  memset(s->scope_list, 0, nr * sizeof *s->scope_list);
  memset(s->noalias_list, 0, nr * sizeof *s->noalias_list);
  memset(s->use_buf, 0, nb);
  memset(s->use_sym, 0, ns);
  memset(s->use_region, 0, nr);
  E->base = s->base;
  E->syms = s->syms;
  E->scope_list = s->scope_list;
  E->noalias_list = s->noalias_list;
  E->use_buf = s->use_buf;
  E->use_sym = s->use_sym;
  E->use_region = s->use_region;
  E->use_pool = false;
  E->pool = NULL;
  E->vars = NULL;
  E->block_seq = 0;
}

static LLVMValueRef define_kernel(Emit *E, const LKernel *k, Scratch *sc) {
  E->k = k;
  E->where = k->name;
  /* the verifier saw a unique identifier that names nothing else */
  TFMC_ASSERT(!LLVMGetNamedFunction(E->mod, k->name) && !LLVMGetNamedGlobal(E->mod, k->name));

  scratch_reset(E, sc);
  walk_stmt(E, k->body);

  LLVMValueRef fn = LLVMAddFunction(E->mod, k->name, E->t_kernel);
  E->fn = fn;
  add_fn_attr(E, fn, "nounwind");
  add_fn_attr(E, fn, "noinline");
  LLVMValueRef ctx_i8 = LLVMGetParam(fn, 0);
  LLVMSetValueName2(ctx_i8, "ctx", 3);
  LLVMValueRef lo = LLVMGetParam(fn, 1), hi = LLVMGetParam(fn, 2);
  LLVMSetValueName2(lo, "lo", 2);
  LLVMSetValueName2(hi, "hi", 2);
  if (k->comment && *k->comment) {
    LLVMMetadataRef s = LLVMMDStringInContext2(E->ctx, k->comment, strlen(k->comment));
    unsigned kind = LLVMGetMDKindIDInContext(E->ctx, "tfmc.kernel", 11);
    LLVMGlobalSetMetadata(fn, kind, LLVMMDNodeInContext2(E->ctx, &s, 1));
  }

  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(E->ctx, fn, "entry");
  LLVMPositionBuilderAtEnd(E->b, entry);
  /* ctx: the RtRunArgs pointer, then the kernel's buffer bases in
   * loop_kernel_params order (what tfmc_model_run hands over) */
  E->ctx_arg = LLVMBuildBitCast(E->b, ctx_i8, LLVMPointerType(E->t_i8p, 0), "ctxv");
  {
    LLVMValueRef at = LLVMBuildLoad2(E->b, E->t_i8p, E->ctx_arg, "args");
    LLVMSetAlignment(at, 8);
    E->args = at;
    int *params = calloc((size_t)E->p->n_bufs + 1, sizeof *params);
    if (!params) {
      fail(E, "out of memory");
      return NULL;
    }
    for (int b = 0; b < E->p->n_bufs; b++) E->param_of[b] = -1;
    int n = loop_kernel_params(E->p, k, params);
    for (int j = 0; j < n; j++) E->param_of[params[j]] = j;
    free(params);
  }
  E->vars = calloc((size_t)k->n_vars, sizeof *E->vars);
  if (!E->vars) {
    fail(E, "out of memory");
    return NULL;
  }
  for (int v = 0; v < k->n_vars; v++) {
    char name[32];
    snprintf(name, sizeof name, "v%d", v);
    LLVMTypeRef ty = ltype(E, k->var_types[v]);
    E->vars[v] = LLVMBuildAlloca(E->b, ty, name);
    LLVMBuildStore(E->b, LLVMConstNull(ty), E->vars[v]);
  }
  bool ok = load_args(E) && build_scopes(E) &&
            emit_loop(E, k->outer_var, lo, hi, k->body->stmts, k->body->n_stmts);
  if (ok)
    LLVMBuildRetVoid(E->b);
  free(E->vars);
  E->vars = NULL;
  E->k = NULL;
  return ok ? fn : NULL;
}

static bool define_entry(Emit *E, LLVMValueRef entry_fn, LLVMValueRef *kernels, Scratch *sc) {
  const LoopProgram *p = E->p;
  E->where = "tfmc_model_run";
  scratch_reset(E, sc);
  for (int i = 0; i < p->n_kernels; i++)
    walk_expr(E, p->kernels[i].extent);
  /* every kernel's parameters, as base pointers computed once here */
  int *params = calloc((size_t)p->n_bufs + 1, sizeof *params);
  if (!params)
    return fail(E, "out of memory");
  int max_params = 0;
  for (int i = 0; i < p->n_bufs; i++)
    E->use_buf[i] = false; /* extents read no buffers */
  for (int i = 0; i < p->n_kernels; i++) {
    int n = loop_kernel_params(p, &p->kernels[i], params);
    for (int j = 0; j < n; j++)
      E->use_buf[params[j]] = true;
    if (n > max_params)
      max_params = n;
  }
  E->fn = entry_fn;
  E->args = LLVMGetParam(entry_fn, 0);
  LLVMSetValueName2(E->args, "args", 4);
  LLVMPositionBuilderAtEnd(E->b, LLVMAppendBasicBlockInContext(E->ctx, entry_fn, "entry"));
  if (!load_args(E)) {
    free(params);
    return false;
  }
  /* one context array, filled before each kernel runs: rt_kernel_run
   * returns only when every task of the kernel is done */
  LLVMValueRef ctx_arr =
      LLVMBuildArrayAlloca(E->b, E->t_i8p, ci64(E, 1 + max_params), "ctx");
  LLVMSetAlignment(ctx_arr, 8);
  LLVMValueRef ctx_i8 = LLVMBuildBitCast(E->b, ctx_arr, E->t_i8p, "");
  LLVMBuildStore(E->b, E->args, ctx_arr);
  for (int i = 0; i < p->n_kernels; i++) {
    const LKernel *k = &p->kernels[i];
    E->where = k->name;
    LLVMValueRef n = emit_expr(E, k->extent);
    if (!n) {
      free(params);
      return false;
    }
    int np = loop_kernel_params(p, k, params);
    for (int j = 0; j < np; j++) {
      LLVMValueRef idx = ci64(E, 1 + j);
      LLVMValueRef at = LLVMBuildInBoundsGEP2(E->b, E->t_i8p, ctx_arr, &idx, 1, "");
      LLVMBuildStore(E->b, LLVMBuildBitCast(E->b, E->base[params[j]], E->t_i8p, ""), at);
    }
    LLVMValueRef a[7] = {E->args,
                         LLVMConstInt(E->t_i32, (unsigned long long)i, 0),
                         kernels[k->shares >= 0 ? k->shares : i],
                         ctx_i8,
                         n,
                         ci64(E, k->parallel ? k->grain : 1),
                         LLVMConstInt(E->t_i32, k->parallel ? 1 : 0, 0)};
    call(E, E->fn_kernel_run, a, 7, "");
  }
  LLVMBuildRetVoid(E->b);
  free(params);
  return true;
}

static void set_target_attrs(Emit *E, const LlvmTarget *t) {
  for (LLVMValueRef f = LLVMGetFirstFunction(E->mod); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f))
      continue;
    add_fn_string_attr(E, f, "target-cpu", t->cpu);
    add_fn_string_attr(E, f, "target-features", t->features);
    /* no effect without AVX-512; with it, lets loops use zmm registers */
    add_fn_string_attr(E, f, "prefer-vector-width", "512");
  }
}

int llvm_module_emit(const LoopProgram *p, const LlvmTarget *t, LLVMTargetMachineRef tm,
                     LLVMContextRef ctx, LLVMModuleRef *out, char *err, size_t errlen) {
  *out = NULL;
  Emit E = {.p = p, .ctx = ctx, .err = err, .errlen = errlen};
  Scratch sc = {0};
  LLVMValueRef *kernels = NULL;
  /* The compile driver will verify the program after lowering and after
   * every loop pass; until it does, the entry point does. */
  char bad[400];
  if (!loop_program_verify(p, bad, sizeof bad))
    return llvm_fail(err, errlen, "llvm: %s", bad);
  if (!module_create(&E, p->name && *p->name ? p->name : "tfmc"))
    goto fail;                           /* owns E.mod */
  E.b = LLVMCreateBuilderInContext(ctx); /* ours: disposed below */
  {
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(E.mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *dl = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(E.mod, dl);
    LLVMDisposeMessage(dl);
    LLVMDisposeTargetData(td);
  }
  count_regions(&E);
  if (!scratch_alloc(&E, &sc))
    goto fail;

  LLVMValueRef entry_fn = LLVMAddFunction(E.mod, "tfmc_model_run", E.t_entry);
  add_fn_attr(&E, entry_fn, "nounwind");
  /* The entry is a straight list of kernel calls, each after a few stores
   * into the context array: nothing to optimise, while the SLP vectoriser's
   * dependency scheduling over that one long block cost more than all the
   * kernels together (bert-base: 153 calls). */
  add_fn_attr(&E, entry_fn, "optnone");
  add_fn_attr(&E, entry_fn, "noinline");
  kernels = calloc((size_t)p->n_kernels + 1, sizeof *kernels);
  if (!kernels) {
    fail(&E, "out of memory");
    goto fail;
  }
  E.param_of = calloc((size_t)p->n_bufs + 1, sizeof *E.param_of);
  if (!E.param_of) {
    fail(&E, "out of memory");
    goto fail;
  }
  /* one function per kernel that shares no other's (share-kernels) */
  for (int i = 0; i < p->n_kernels; i++) {
    int sh = p->kernels[i].shares;
    if (sh >= 0) {
      TFMC_ASSERT(sh < i && p->kernels[sh].shares < 0); /* verified */
      continue;
    }
    kernels[i] = define_kernel(&E, &p->kernels[i], &sc);
    if (!kernels[i])
      goto fail;
  }
  if (!define_entry(&E, entry_fn, kernels, &sc))
    goto fail;
  set_target_attrs(&E, t);

  char *msg = NULL;
  if (LLVMVerifyModule(E.mod, LLVMReturnStatusAction, &msg)) {
    E.where = NULL;
    fail(&E, "internal error: the generated module does not verify: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    goto fail;
  }
  LLVMDisposeMessage(msg);

  free(kernels);
  free(E.param_of);
  scratch_free(&E, &sc);
  LLVMDisposeBuilder(E.b);
  *out = E.mod;
  return 0;

fail:
  free(kernels);
  free(E.param_of);
  scratch_free(&E, &sc);
  if (E.b)
    LLVMDisposeBuilder(E.b);
  if (E.mod)
    LLVMDisposeModule(E.mod);
  if (!E.failed)
    llvm_fail(err, errlen, "llvm: emission failed");
  return 1;
}
