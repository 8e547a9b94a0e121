/* ir/ir.h — the graph IR: arena, diagnostics, types, op table, graph, builder,
 * printer, parser, verifier, Graphviz output.
 *
 * A worked example (what the frontend does for one linear layer):
 *
 *     Arena *a = arena_create();
 *     IrGraph *g = ir_graph_create(a, "tiny");
 *     int B = ir_graph_add_symbol(g, "B", 8);           // batch, bound at run time, <= 8
 *     int S = ir_graph_add_symbol(g, "S", 128);         // sequence length, <= 128
 *     IrLoc loc = {"tiny.tfm", 3, 5};
 *     IrType tx = ir_type(IR_F32, 3, (IrDim[]){IR_SYM(B), IR_SYM(S), IR_CONST(64)});
 *     int x = ir_build_input(g, "x", tx, loc);
 *     int w = ir_build_param(g, "fc.weight", ir_type2(IR_F32, 32, 64), loc);
 *     int b = ir_build_param(g, "fc.bias", ir_type1(IR_F32, 32), loc);
 *     int y = ir_build(g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, loc); // f32[B,S,32]
 *     ir_graph_add_output(g, "y", y);
 *     ir_graph_print(g, stdout);
 *     arena_destroy(a);                                   // frees the graph too
 *
 * Values are SSA: value id == index of the node that defines it; a node's
 * operands always have smaller ids (nodes are stored in a topological order).
 * Every node carries the spec location it came from.
 *
 * Ownership: everything an IrGraph points to lives in the Arena passed to
 * ir_graph_create; nothing is freed separately.
 */
#ifndef TFMC_IR_H
#define TFMC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- arena.c: bump allocator; one per compilation, freed at once ---- */

typedef struct Arena Arena;
Arena *arena_create(void);
void arena_destroy(Arena *a);
/* Zeroed, 16-byte aligned memory owned by the arena. Aborts on OOM. */
void *arena_alloc(Arena *a, size_t size);
/* The same, but NULL when memory runs out (for sizes the user chose:
 * weights) instead of stopping the compiler. */
void *arena_try_alloc(Arena *a, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Grows *arr (element size elem) to hold at least need elements. */
void arena_grow(Arena *a, void **arr, int *cap, int need, size_t elem);
/* fn(ctx) when a is destroyed, before its memory is freed (the last one
 * registered first): what an arena's data holds open (a mapped
 * checkpoint). */
void arena_on_destroy(Arena *a, void (*fn)(void *), void *ctx);

/* Internal-bug assertion: prints file:line and aborts. Never for user errors. */
#define TFMC_ASSERT(cond)                                                     \
  do {                                                                        \
    if (!(cond)) tfmc_assert_fail(__FILE__, __LINE__, #cond);                 \
  } while (0)
_Noreturn void tfmc_assert_fail(const char *file, int line, const char *what);

/* ---- diag.c: user-facing diagnostics ----
 * Collected, then printed as
 *     file:line:col: error: message
 *       <the source line>
 *       <spaces>^
 * Several per run; a phase stops at its end if any error was reported. */

typedef struct IrLoc {
  const char *file; /* NULL: no location */
  int line, col;    /* 1-based; 0 when unknown */
} IrLoc;

typedef struct SrcFile {
  const char *name;
  const char *text; /* NUL-terminated */
  size_t len;
} SrcFile;

typedef struct Diags {
  Arena *arena;
  const SrcFile *files[16]; /* sources that locations may refer to */
  int n_files;
  int n_errors;
  FILE *out; /* where diagnostics go (stderr by default) */
  char *captured; /* when out == NULL: messages are appended here */
  size_t captured_len, captured_cap;
} Diags;

void diags_init(Diags *d, Arena *a, FILE *out);
void diags_add_source(Diags *d, const SrcFile *f);
void diag_error(Diags *d, IrLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A problem that does not stop the phase (not counted in n_errors). */
void diag_warning(Diags *d, IrLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_note(Diags *d, IrLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Reads a whole file into the arena; returns NULL (and reports) on failure. */
SrcFile *src_file_read(Arena *a, const char *path, char *err, size_t errlen);
SrcFile *src_file_from_string(Arena *a, const char *name, const char *text);

/* ---- types ---- */

typedef enum IrDtype { IR_F32, IR_I32, IR_BOOL, IR_DTYPE_COUNT } IrDtype;

#define IR_MAX_RANK 4
#define IR_MAX_SYMS 8
#define IR_MAX_OPERANDS 8 /* a fused node takes up to 8 */

/* One dimension: a constant (sym < 0) or a named symbol bound at run time. */
typedef struct IrDim {
  int sym;       /* index into IrGraph.syms, or -1 */
  int64_t value; /* the constant when sym < 0 */
} IrDim;
#define IR_CONST(v) ((IrDim){-1, (v)})
#define IR_SYM(s) ((IrDim){(s), 0})

typedef struct IrType {
  IrDtype dtype;
  int rank; /* 0..IR_MAX_RANK */
  IrDim dims[IR_MAX_RANK];
} IrType;

IrType ir_type(IrDtype dt, int rank, const IrDim *dims);
IrType ir_type1(IrDtype dt, int64_t d0);
IrType ir_type2(IrDtype dt, int64_t d0, int64_t d1);
bool ir_dim_eq(IrDim a, IrDim b);
bool ir_type_eq(const IrType *a, const IrType *b);
const char *ir_dtype_name(IrDtype dt); /* "f32", "i32", "bool" */

/* ---- the op table (ops.def) ---- */

typedef enum IrOp {
#define IR_OP(e, name, mn, mx, attrs, kind) IR_OP_##e,
#include "ops.def"
#undef IR_OP
  IR_OP_COUNT
} IrOp;

typedef enum IrOpKind {
  IR_KIND_SOURCE,    /* no operands: input, param, const, arange, mask.causal */
  IR_KIND_UNARY,     /* elementwise, one operand, result type = operand type */
  IR_KIND_BINARY,    /* elementwise, broadcasting */
  IR_KIND_COMPOSITE, /* decomposes into other ops (passes may do so) */
  IR_KIND_OTHER,
  IR_KIND_FUSED,     /* `fused`: a pass's fusion, defined by its decomposition (fused.def) */
  IR_KIND_COUNT
} IrOpKind;

/* ---- the attribute table (attrs.def) ----
 * Typed attribute fields. An op carries those named by its table row (a
 * mask of IR_ATTR_* bits); printer, parser, Graphviz output and verifier
 * walk ir_attr_info instead of naming fields, so a new attribute is one row. */

typedef enum IrAttrId {
#define IR_ATTR(E, field, kind, check) IR_ATTR_ID_##E,
#include "attrs.def"
#undef IR_ATTR
  IR_ATTR_ID_COUNT
} IrAttrId;

/* The mask bits ops.def rows use: IR_ATTR_NAME, IR_ATTR_EPS, ... */
enum {
#define IR_ATTR(E, field, kind, check) IR_ATTR_##E = 1u << IR_ATTR_ID_##E,
#include "attrs.def"
#undef IR_ATTR
};

typedef enum IrAttrKind {
  IR_ATTR_KIND_STRING, /* the op's quoted name, right after the op name */
  IR_ATTR_KIND_F64,
  IR_ATTR_KIND_BOOL,
  IR_ATTR_KIND_INT,
  IR_ATTR_KIND_I64,
  IR_ATTR_KIND_ACT, /* an IrAct, written as its word */
  IR_ATTR_KIND_COUNT
} IrAttrKind;

/* An activation a linear applies in its epilogue (attribute act): the
 * same functions as the relu, gelu and gelu_tanh ops. The values are
 * runtime/rt_act.h's RtAct, which rt_linear takes. */
typedef enum IrAct { IR_ACT_NONE, IR_ACT_RELU, IR_ACT_GELU, IR_ACT_GELU_TANH, IR_ACT_COUNT } IrAct;
/* "none", "relu", "gelu", "gelu_tanh" ("?" out of range) */
const char *ir_act_name(int act);
/* The IrAct of that word, or -1. */
int ir_act_lookup(const char *name, size_t len);

/* The C type of each kind's field. */
#define IR_ATTR_CTYPE_STRING const char *
#define IR_ATTR_CTYPE_F64 double
#define IR_ATTR_CTYPE_BOOL bool
#define IR_ATTR_CTYPE_INT int
#define IR_ATTR_CTYPE_I64 int64_t
#define IR_ATTR_CTYPE_ACT IrAct

typedef enum IrAttrCheck {
  IR_ATTR_CHECK_NONE,
  IR_ATTR_CHECK_NONEMPTY, /* STRING: non-NULL and not "" */
  IR_ATTR_CHECK_FINITE,   /* F64: finite */
  IR_ATTR_CHECK_NONNEG,   /* F64: finite and >= 0 */
  IR_ATTR_CHECK_POSITIVE, /* INT, I64: >= 1 */
  IR_ATTR_CHECK_OPTIONAL, /* any value; may be left out of the text (= zero) */
  IR_ATTR_CHECK_COUNT
} IrAttrCheck;

typedef struct IrAttrs {
#define IR_ATTR(E, field, kind, check) IR_ATTR_CTYPE_##kind field;
#include "attrs.def"
#undef IR_ATTR
} IrAttrs;

typedef struct IrAttrInfo {
  const char *name; /* the field's name, as the text form spells it */
  unsigned bit;     /* IR_ATTR_<ENUM> */
  IrAttrKind kind;
  IrAttrCheck check;
  size_t offset; /* offsetof(IrAttrs, field) */
} IrAttrInfo;

extern const IrAttrInfo ir_attr_info[IR_ATTR_ID_COUNT];
/* The attribute with that textual name, or -1. */
int ir_attr_lookup(const char *name, size_t len);
/* Typed views of attribute `id` of at; each asserts the row's kind. */
const char *ir_attrs_get_string(const IrAttrs *at, IrAttrId id);
double ir_attrs_get_f64(const IrAttrs *at, IrAttrId id);
bool ir_attrs_get_bool(const IrAttrs *at, IrAttrId id);
/* INT, I64 and ACT alike, widened. */
int64_t ir_attrs_get_int(const IrAttrs *at, IrAttrId id);
/* True when attribute id holds its kind's zero value (0, false, NULL,
 * none): what an OPTIONAL attribute left out of the text means. */
bool ir_attrs_is_zero(const IrAttrs *at, IrAttrId id);
void ir_attrs_set_string(IrAttrs *at, IrAttrId id, const char *v);
void ir_attrs_set_f64(IrAttrs *at, IrAttrId id, double v);
void ir_attrs_set_bool(IrAttrs *at, IrAttrId id, bool v);
/* INT, I64 and ACT alike; the caller keeps v within the field's range. */
void ir_attrs_set_int(IrAttrs *at, IrAttrId id, int64_t v);

typedef struct IrOpInfo {
  const char *name;
  int min_operands, max_operands;
  unsigned attrs; /* IR_ATTR_* bits */
  IrOpKind kind;
} IrOpInfo;

extern const IrOpInfo ir_op_info[IR_OP_COUNT];
/* Returns the op with that textual name, or -1. */
int ir_op_lookup(const char *name, size_t len);

/* ---- the graph ---- */

typedef struct IrNode {
  IrOp op;
  int n_operands;
  int operands[IR_MAX_OPERANDS]; /* value ids (< this node's id) */
  IrType type;
  IrAttrs attrs;
  IrLoc loc;
} IrNode;

typedef struct IrSymbol {
  const char *name; /* "B", "S", "T" */
  int64_t max;      /* inclusive upper bound, >= 1 */
} IrSymbol;

typedef struct IrOutput {
  const char *name;
  int value;
} IrOutput;

typedef struct IrGraph {
  Arena *arena;
  const char *name;
  IrSymbol syms[IR_MAX_SYMS];
  int n_syms;
  IrNode *nodes;
  int n_nodes, cap_nodes;
  IrOutput *outputs;
  int n_outputs, cap_outputs;
  int64_t pad_id; /* the padding token id that masks derive from (`tokens pad N`;
                     printed `pad N`), -1 when none: a model-level fact the
                     runtime's binders need, so a .tfir graph keeps it */
} IrGraph;

IrGraph *ir_graph_create(Arena *a, const char *name);
/* Returns the symbol index; an existing symbol of that name is returned as is. */
int ir_graph_add_symbol(IrGraph *g, const char *name, int64_t max);
int ir_graph_find_symbol(const IrGraph *g, const char *name, size_t len);
void ir_graph_add_output(IrGraph *g, const char *name, int value);

/* ---- weights bound to a graph's params (graph.c) ----
 * The frontend's loader fills a WeightSet from a checkpoint (or at random);
 * the interpreter and the weight packer read it by param name. */

typedef struct Weight {
  const char *name; /* canonical param name (the param node's name) */
  IrType type;      /* constant dims */
  float *data;      /* arena-owned, row-major; NULL: read from the set's src as needed */
} Weight;

/* Where a set's weights without data come from (weights_load_mapped: a
 * checkpoint kept mapped, read where the packer or a derived param needs
 * it, never into an f32 copy of the whole model). read writes floats
 * [f0, f1) of item's row-major data to dst: 0, or 1 with a message. */
typedef struct WeightSource {
  int (*read)(const struct WeightSource *s, int item, int64_t f0, int64_t f1, float *dst,
              char *err, size_t errlen);
  /* NULL, or a hint that nothing is read for a while (the packer is done):
   * the checkpoint's pages may leave the process's memory */
  void (*release)(const struct WeightSource *s);
  /* NULL, or item's data as stored, where it is one block of f32 values
   * in the source's memory, seen as a matrix of rows of `cols` floats:
   * element (i, p) at v[i * *rs + p * *cs] (*cs 1: rows as stored; *rs 1:
   * the stored tensor's transpose, a Conv1D's [in, out]); NULL otherwise
   * (other dtypes, pieces of several tensors, a misaligned block) */
  const float *(*view)(const struct WeightSource *s, int item, int64_t cols, int64_t *rs,
                       int64_t *cs);
  /* NULL, or a hint that [p, p + bytes) of a view is done with: its
   * pages may leave the process (a later read faults them back) */
  void (*drop)(const struct WeightSource *s, const void *p, size_t bytes);
} WeightSource;

typedef struct WeightSet {
  Weight *items;
  int n;
  /* per item, its NaN and Inf values as read from a checkpoint (counted
   * by weights_load while it reads); NULL for other sets */
  int64_t *nonfinite;
  const WeightSource *src; /* NULL: every item has data */
} WeightSet;

/* The weight of that name, or NULL (also for NULL arguments). */
const Weight *ir_weights_find(const WeightSet *w, const char *name);
/* Floats [f0, f1) of weight wt (an item of w) into dst, from its data or
 * w's source: 0, or 1 with a message. */
int ir_weight_read(const WeightSet *w, const Weight *wt, int64_t f0, int64_t f1, float *dst,
                   char *err, size_t errlen);
/* Whether a and b (items of sets wa and wb) are the same weight: the same
 * data, or, for weights read from a source, the same item of one source
 * (a derived set shares its base set's items and source). */
bool ir_weight_same(const WeightSet *wa, const Weight *a, const WeightSet *wb, const Weight *b);

/* ---- derived.c: derived parameters (param.concat) ----
 * ir_param_concat_compute writes the value of param.concat node id of g
 * (its numel floats) into dst from its operands' weights in w; false with
 * a message when one is missing or shaped unlike its param.
 * ir_weights_derive returns w plus one weight per param.concat node of g
 * (named as the node, its data allocated in a), computed once: the set the
 * interpreter and the packer read. w itself is not changed (it may be
 * shared); with no derived params w is returned as is. NULL with a
 * message on failure. */
bool ir_param_concat_compute(const IrGraph *g, int id, const WeightSet *w, float *dst,
                             char *err, size_t errlen);
WeightSet *ir_weights_derive(Arena *a, const IrGraph *g, const WeightSet *w, char *err,
                             size_t errlen);

/* ---- builder (graph.c): records nodes, infers result types ----
 * ir_build infers the result type from the operands and attributes with the
 * op's shape rule; it asserts (internal bug) when the operands do not fit,
 * since the frontend checks the user's spec before building. Ops whose result
 * shape is not implied by operands (input, param, arange, mask.causal,
 * reshape, sinusoid) take it from ir_build_typed. */
int ir_build(IrGraph *g, IrOp op, const int *operands, int n,
             const IrAttrs *attrs, IrLoc loc);
int ir_build_typed(IrGraph *g, IrOp op, const int *operands, int n,
                   const IrAttrs *attrs, IrType type, IrLoc loc);
int ir_build_input(IrGraph *g, const char *name, IrType type, IrLoc loc);
int ir_build_param(IrGraph *g, const char *name, IrType type, IrLoc loc);

/* ir_build_typed without the assertion: for builders of IR that may not
 * fit (decompositions of fused nodes read from text). Returns the new value
 * id, or -1 with a message in err when the shape rule rejects the node. */
int ir_build_try(IrGraph *g, IrOp op, const int *operands, int n, const IrAttrs *attrs,
                 IrType type, IrLoc loc, char *err, size_t errlen);

/* Shape rule: computes the result type of `op` applied to `operands` in g.
 * Returns false and writes a message to err when the operands do not fit.
 * For the ops listed above as typed, *out must already hold the declared
 * type; the rule checks it. Used by the builder and the verifier. */
bool ir_infer_type(const IrGraph *g, IrOp op, const int *operands, int n,
                   const IrAttrs *attrs, IrType *out, char *err, size_t errlen);

/* ---- fused.c: fused ops (the kinds of fused.def) ----
 *
 * A pass that fuses several nodes into one kernel builds one `fused` node
 * whose `fusion` attribute names a row of fused.def. The row says how many
 * operands and results the kind has, which attributes it carries, and how
 * it decomposes into the other ops of ops.def; that decomposition is its
 * definition: the shape rule and the interpreter run it, the lowering emits
 * one kernel that computes the same values. Result 0 is the fused node's own
 * value; result i >= 1 of a multi-result kind is a `result {index=i}` node
 * whose operand is the fused node.
 *
 *     %9 = fused "add_layernorm" %3, %7, %8, %2 {eps=1e-05, unbiased=false} : f32[B,S,64]
 *     %5 = fused "elementwise" "scale(add($0, $1), 0.5)" %3, %4 : f32[B,S,64]
 *     %6 = fused "add_layernorm_sum" %3, %4, %1, %2 {eps=1e-05, unbiased=false} : f32[B,S,64]
 *     %7 = result %6 {index=1} : f32[B,S,64]          (the sum, for the residual path) */

typedef enum IrFusedKind {
#define IR_FUSED(E, name, mn, mx, nres, attrs, decompose, doc) IR_FUSED_##E,
#include "fused.def"
#undef IR_FUSED
  IR_FUSED_COUNT
} IrFusedKind;

#define IR_FUSED_MAX_RESULTS 2

/* Appends nodes of ordinary ops to `into` that compute a fused node with
 * attributes at applied to the values args[0..n) of `into`; writes the
 * value ids of its results to results[]. False, with a message in err, when
 * the body does not fit the operands. */
typedef bool (*IrFusedDecomposeFn)(IrGraph *into, const IrAttrs *at, const int *args, int n,
                                   int *results, char *err, size_t errlen);

typedef struct IrFusedInfo {
  const char *name; /* the `fusion` attribute: "add_layernorm" */
  int min_operands, max_operands;
  int n_results;    /* 1..IR_FUSED_MAX_RESULTS */
  unsigned attrs;   /* IR_ATTR_* bits the kind carries besides `fusion` */
  IrFusedDecomposeFn decompose;
  const char *doc;  /* one line: what it computes */
} IrFusedInfo;

extern const IrFusedInfo ir_fused_info[IR_FUSED_COUNT];
/* The kind of that name, or -1. */
int ir_fused_lookup(const char *name);
/* The kind of a fused node (-1 when the attribute names none). */
int ir_fused_kind_of(const IrAttrs *at);
/* The attributes a node carries: its ops.def row's, except a fused node,
 * which carries `fusion` and what its kind's row names (a fused node of an
 * unknown kind: `fusion` only). Printer, parser, verifier and dot read this. */
unsigned ir_node_attr_mask(const IrNode *nd);
/* ir_fused_info[kind].decompose, with the kind's operand count checked. */
bool ir_fused_decompose(IrGraph *into, const IrAttrs *at, const int *args, int n, int *results,
                        char *err, size_t errlen);
/* The types of the results of a fused node with attributes at over operands
 * of g, by decomposing it into a scratch graph; *n_results set. False with a
 * message when the kind is unknown or the body does not fit. */
bool ir_fused_result_types(const IrGraph *g, const IrAttrs *at, const int *operands, int n,
                           IrType *types, int *n_results, char *err, size_t errlen);
/* The decomposition of fused node `id` of g as a graph of its own (in a):
 * inputs "$0".."$k" typed as the node's operands, then the body; outputs
 * "r0", "r1", ... its results. NULL (message in err) when it does not fit. */
IrGraph *ir_fused_body(Arena *a, const IrGraph *g, int id, char *err, size_t errlen);

/* ---- print.c: textual form (stable; parse.c reads it back) ----
 *
 *   graph "NAME" {
 *     sym B max 8
 *     sym S max 128
 *     %0 = input "tokens" : i32[B,S] @"model.tfm":12:3
 *     %1 = param "src_embed.weight" : f32[1000,64] @"model.tfm":5:3
 *     %2 = embed %1, %0 : f32[B,S,64] @"model.tfm":5:3
 *     %3 = layernorm %2, %4, %5 {eps=1e-05, unbiased=false} : f32[B,S,64]
 *     output "logits" = %9
 *   }
 *
 * Attributes are printed in attrs.def order, floats with the shortest of
 * %.9g..%.17g that reads back bit-identical. A node without a location
 * prints no @ part. */
void ir_graph_print(const IrGraph *g, FILE *out);
void ir_type_print(const IrGraph *g, const IrType *t, FILE *out);

/* ---- parse.c ----
 * Parses the textual form. On error reports file:line:col diagnostics to d
 * and returns NULL. The graph is allocated in a; it is verified. */
IrGraph *ir_graph_parse(Arena *a, const SrcFile *src, Diags *d);

/* ---- verify.c ----
 * Checks structure (operand ids in range and earlier, operand counts, attrs
 * that make sense, symbol indices valid, unique input/param/output names,
 * outputs referring to existing values) and types (every node's type equals
 * what its shape rule infers). Reports each problem to d (at the node's
 * location) and returns false if any. */
bool ir_graph_verify(const IrGraph *g, Diags *d);

/* ---- dot.c: Graphviz ---- */
void ir_graph_print_dot(const IrGraph *g, FILE *out);

#endif
