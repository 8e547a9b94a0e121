/* passes/model_info.c — builds the RtModelInfo of a lowered graph: symbol
 * names and maxima, inputs (ids with their vocabulary bound, masks with the
 * ids they pad), outputs, the packed-weights layout and its hash, the arena
 * size, the kernel table (name, op kind, comment per kernel) the profiler
 * reports with. The layout and the kernels are read from the loop program,
 * so they are exactly what the generated code addresses and runs. */
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_model.h"

#include <stdint.h>
#include <string.h>

void pass_mask_names(const char *mask_input, const char **ids_input, const char **lengths) {
  if (strcmp(mask_input, "src_mask") == 0) {
    *ids_input = "src";
    *lengths = "src_lengths";
  } else if (strcmp(mask_input, "tgt_mask") == 0) {
    *ids_input = "tgt";
    *lengths = "tgt_lengths";
  } else {
    *ids_input = "tokens";
    *lengths = "lengths";
  }
}

static RtElem elem_of(IrDtype dt) {
  switch (dt) {
  case IR_F32: return RT_ELEM_F32;
  case IR_I32: return RT_ELEM_I32;
  case IR_BOOL: return RT_ELEM_U8;
  case IR_DTYPE_COUNT: break;
  }
  return RT_ELEM_F32;
}

static void fill_dims(RtTensorInfo *t, const IrType *ty) {
  t->rank = ty->rank;
  for (int i = 0; i < ty->rank; i++) {
    t->dims[i].sym = ty->dims[i].sym;
    t->dims[i].value = ty->dims[i].value;
  }
}

const RtKernelInfo *pass_kernel_table(Arena *a, const IrGraph *g, const LoopProgram *p) {
  int n = p ? p->n_kernels : 0;
  RtKernelInfo *t = arena_alloc(a, (size_t)(n + 1) * sizeof *t);
  for (int i = 0; i < n; i++) {
    const LKernel *k = &p->kernels[i];
    TFMC_ASSERT(k->node < g->n_nodes); /* the program was lowered from g */
    t[i].name = k->name ? arena_strdup(a, k->name) : NULL;
    /* op names are static rows of ir/ops.def */
    t[i].op = k->node >= 0 ? ir_op_info[g->nodes[k->node].op].name : PASS_KERNEL_NO_OP;
    t[i].comment = k->comment ? arena_strdup(a, k->comment) : NULL;
  }
  return t;
}

void pass_input_vocabs(const IrGraph *g, int64_t *input_vocab) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != IR_OP_INPUT) continue;
    int64_t v = 0;
    for (int j = i + 1; j < g->n_nodes; j++) {
      const IrNode *n = &g->nodes[j];
      if (n->op == IR_OP_FUSED) {
        /* a gather inside a fused body: embed($t, $k) with operand k the ids */
        Arena *ba = arena_create();
        char err[256];
        IrGraph *b = ir_fused_body(ba, g, j, err, sizeof err);
        for (int e = 0; b && e < b->n_nodes; e++) {
          const IrNode *bn = &b->nodes[e];
          int ids = bn->op == IR_OP_EMBED ? bn->operands[1] : -1;
          if (ids < 0 || b->nodes[ids].op != IR_OP_INPUT || n->operands[ids] != i) continue;
          IrDim rows_dim = b->nodes[bn->operands[0]].type.dims[0];
          if (rows_dim.sym >= 0) continue;
          if (v == 0 || rows_dim.value < v) v = rows_dim.value;
        }
        arena_destroy(ba);
        continue;
      }
      /* embed(table f32[V,D], ids) */
      if (n->op != IR_OP_EMBED || n->operands[1] != i) continue;
      IrDim rows_dim = g->nodes[n->operands[0]].type.dims[0];
      if (rows_dim.sym >= 0) continue; /* a computed table: no static bound */
      int64_t rows = rows_dim.value;
      if (v == 0 || rows < v) v = rows;
    }
    /* feeding no table (positions of a sinusoidal encoding): unbounded */
    input_vocab[k++] = v || g->nodes[i].type.dtype != IR_I32 ? v : INT32_MAX;
  }
}

RtModelInfo *pass_model_info(Arena *a, const IrGraph *g, const LoopProgram *p,
                             const int64_t *input_vocab, int64_t pad_id) {
  RtModelInfo *m = arena_alloc(a, sizeof *m);
  m->abi_version = RT_ABI_VERSION;
  m->name = arena_strdup(a, g->name);
  m->n_syms = g->n_syms;
  for (int i = 0; i < g->n_syms; i++) {
    m->sym_names[i] = arena_strdup(a, g->syms[i].name);
    m->sym_max[i] = g->syms[i].max;
  }
  int n_in = 0;
  for (int i = 0; i < g->n_nodes; i++) n_in += g->nodes[i].op == IR_OP_INPUT;
  TFMC_ASSERT(n_in <= RT_MAX_IO && g->n_outputs <= RT_MAX_IO);
  RtTensorInfo *in = arena_alloc(a, (size_t)(n_in + 1) * sizeof *in);
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op != IR_OP_INPUT) continue;
    RtTensorInfo *t = &in[k];
    t->name = arena_strdup(a, n->attrs.name);
    t->elem = elem_of(n->type.dtype);
    fill_dims(t, &n->type);
    if (n->type.dtype == IR_BOOL) {
      const char *ids, *lengths;
      t->kind = RT_INPUT_MASK;
      pass_mask_names(n->attrs.name, &ids, &lengths);
      t->ids_input = ids;
      t->lengths_name = lengths;
    } else if (n->type.dtype == IR_F32) {
      t->kind = RT_INPUT_VALUES;
    } else {
      t->kind = RT_INPUT_IDS;
      t->vocab = input_vocab[k];
    }
    k++;
  }
  m->n_inputs = n_in;
  m->inputs = in;
  RtTensorInfo *out = arena_alloc(a, (size_t)(g->n_outputs + 1) * sizeof *out);
  for (int o = 0; o < g->n_outputs; o++) {
    const IrNode *n = &g->nodes[g->outputs[o].value];
    out[o].name = arena_strdup(a, g->outputs[o].name);
    out[o].elem = elem_of(n->type.dtype);
    fill_dims(&out[o], &n->type);
  }
  m->n_outputs = g->n_outputs;
  m->outputs = out;
  int n_w = 0;
  for (int b = 0; p && b < p->n_bufs; b++) n_w += p->bufs[b].kind == LB_WEIGHT;
  RtWeightInfo *w = arena_alloc(a, (size_t)(n_w + 1) * sizeof *w);
  int j = 0;
  for (int b = 0; p && b < p->n_bufs; b++) {
    const LBuffer *lb = &p->bufs[b];
    if (lb->kind != LB_WEIGHT) continue;
    const IrNode *pn = NULL;
    for (int i = 0; i < g->n_nodes && !pn; i++)
      if ((g->nodes[i].op == IR_OP_PARAM || g->nodes[i].op == IR_OP_PARAM_CONCAT) &&
          strcmp(g->nodes[i].attrs.name, lb->name) == 0)
        pn = &g->nodes[i];
    TFMC_ASSERT(pn);
    w[j].name = arena_strdup(a, lb->name);
    w[j].rank = pn->type.rank;
    for (int d = 0; d < pn->type.rank; d++) w[j].shape[d] = pn->type.dims[d].value;
    w[j].offset = lb->offset;
    _Static_assert((int)LW_PANELS == (int)RT_WEIGHT_PANELS && (int)LW_PLAIN == (int)RT_WEIGHT_PLAIN &&
                       (int)LW_PANELS_BF16 == (int)RT_WEIGHT_PANELS_BF16 &&
                       (int)LW_PANELS_I8 == (int)RT_WEIGHT_PANELS_I8 &&
                       (int)LW_LAYOUT_COUNT == (int)RT_WEIGHT_LAYOUT_COUNT,
                   "LWLayout and RtWeightLayout differ");
    w[j].layout = (int)lb->layout;
    j++;
  }
  m->n_weights = n_w;
  m->weights = w;
  m->weights_floats = p ? p->weights_floats : 0;
  m->layout_hash = rt_model_layout_hash(w, n_w);
  m->arena_bytes = p ? p->arena_bytes : 0;
  m->state_bytes = p ? p->state_bytes : 0;
  m->pad_id = pad_id;
  m->n_kernels = p ? p->n_kernels : 0;
  m->kernels = pass_kernel_table(a, g, p);
  _Static_assert(IR_MAX_RANK == RT_MAX_RANK, "arena blocks list up to a rank's symbols");
  if (p && p->n_arena_blocks > 0) {
    RtArenaBlock *ab = arena_alloc(a, (size_t)p->n_arena_blocks * sizeof *ab);
    for (int i = 0; i < p->n_arena_blocks; i++) {
      ab[i].offset = p->arena_blocks[i].offset;
      ab[i].bytes = p->arena_blocks[i].bytes;
      memcpy(ab[i].syms, p->arena_blocks[i].syms, sizeof ab[i].syms);
    }
    m->n_arena_blocks = p->n_arena_blocks;
    m->arena_blocks = ab;
  }
  return m;
}
