/* backends/c/info.c — the model description (runtime/rt_model.h) printed
 * as C data: `const RtModelInfo tfmc_model_info = {...};` with its input,
 * output, weight and kernel arrays.
 *
 * Used by model.c (c_emit_model) and by `tfmc build`, which compiles it next
 * to the LLVM object. Designated initializers name every field, so the text
 * stays right if rt_model.h reorders its structs, and a reader sees what
 * each number is.
 *
 * Invariants: every string is a C string literal through c_put_string
 * (names from the spec cannot break or inject into the C); the data reads
 * back field for field equal to the RtModelInfo it was printed from (up to
 * each tensor's rank); the arrays are static, named tfmc_info_*; only
 * tfmc_model_info is external. */
#include "backends/c/c_internal.h"

static const char *elem_const(RtElem e) {
  switch (e) {
  case RT_ELEM_F32: return "RT_ELEM_F32";
  case RT_ELEM_I32: return "RT_ELEM_I32";
  case RT_ELEM_U8: return "RT_ELEM_U8";
  case RT_ELEM_COUNT: break;
  }
  return "RT_ELEM_COUNT";
}

static const char *kind_const(RtInputKind k) {
  switch (k) {
  case RT_INPUT_IDS: return "RT_INPUT_IDS";
  case RT_INPUT_MASK: return "RT_INPUT_MASK";
  case RT_INPUT_VALUES: return "RT_INPUT_VALUES";
  case RT_INPUT_KIND_COUNT: break;
  }
  return "RT_INPUT_KIND_COUNT";
}

static void put_tensor(FILE *o, const RtTensorInfo *t) {
  fputs("  {.name = ", o);
  c_put_string(o, t->name);
  fprintf(o, ", .elem = %s, .rank = %d,\n   .dims = {", elem_const(t->elem), t->rank);
  for (int d = 0; d < t->rank; d++) {
    fprintf(o, "%s{.sym = %d", d ? ", " : "", t->dims[d].sym);
    if (t->dims[d].value) {
      fputs(", .value = ", o);
      c_put_i64(o, t->dims[d].value);
    }
    fputc('}', o);
  }
  fputc('}', o);
  if (t->kind != RT_INPUT_IDS) fprintf(o, ", .kind = %s", kind_const(t->kind));
  if (t->vocab) {
    fputs(", .vocab = ", o);
    c_put_i64(o, t->vocab);
  }
  if (t->ids_input) {
    fputs(",\n   .ids_input = ", o);
    c_put_string(o, t->ids_input);
  }
  if (t->lengths_name) {
    fputs(", .lengths_name = ", o);
    c_put_string(o, t->lengths_name);
  }
  fputs("},\n", o);
}

static void put_tensors(FILE *o, const char *array, const RtTensorInfo *t, int n) {
  if (n <= 0) return;
  fprintf(o, "static const RtTensorInfo %s[%d] = {\n", array, n);
  for (int i = 0; i < n; i++) put_tensor(o, &t[i]);
  fputs("};\n\n", o);
}

void c_emit_model_info(const RtModelInfo *info, FILE *out) {
  c_emit_model_info_named(info, "tfmc_model_info", out);
}

void c_emit_model_info_named(const RtModelInfo *info, const char *name, FILE *out) {
  char err[256];
  if (c_info_check(info, NULL, err, sizeof err)) {
    fputs("#error ", out);
    c_put_string(out, err);
    fputc('\n', out);
    return;
  }
  FILE *o = out;
  fputs("/* ---- the model description (runtime/rt_model.h): what the runtime checks\n"
        " * inputs against, how it sizes outputs and the arena, where each weight is */\n\n",
        o);
  put_tensors(o, "tfmc_info_inputs", info->inputs, info->n_inputs);
  put_tensors(o, "tfmc_info_outputs", info->outputs, info->n_outputs);
  if (info->n_weights > 0) {
    fprintf(o, "static const RtWeightInfo tfmc_info_weights[%d] = {\n", info->n_weights);
    for (int i = 0; i < info->n_weights; i++) {
      const RtWeightInfo *w = &info->weights[i];
      fputs("  {.name = ", o);
      c_put_string(o, w->name);
      fprintf(o, ", .rank = %d, .shape = {", w->rank);
      for (int d = 0; d < w->rank; d++) {
        if (d) fputs(", ", o);
        c_put_i64(o, w->shape[d]);
      }
      fputs("}, .offset = ", o);
      c_put_i64(o, w->offset);
      if (w->layout == RT_WEIGHT_PANELS) fputs(", .layout = RT_WEIGHT_PANELS", o);
      if (w->layout == RT_WEIGHT_PANELS_BF16) fputs(", .layout = RT_WEIGHT_PANELS_BF16", o);
      if (w->layout == RT_WEIGHT_PANELS_I8) fputs(", .layout = RT_WEIGHT_PANELS_I8", o);
      fputs("},\n", o);
    }
    fputs("};\n\n", o);
  }
  if (info->n_kernels > 0) {
    /* what --profile names kernel i by (rt_kernel_run's `kernel`) */
    fprintf(o, "static const RtKernelInfo tfmc_info_kernels[%d] = {\n", info->n_kernels);
    for (int i = 0; i < info->n_kernels; i++) {
      const RtKernelInfo *k = &info->kernels[i];
      fputs("  {.name = ", o);
      c_put_string(o, k->name);
      fputs(", .op = ", o);
      c_put_string(o, k->op);
      if (k->comment) {
        fputs(",\n   .comment = ", o);
        c_put_string(o, k->comment);
      }
      fputs("},\n", o);
    }
    fputs("};\n\n", o);
  }
  if (info->n_arena_blocks > 0) {
    /* what a run's dims touch of the arena (runtime/rt_arena.h) */
    fprintf(o, "static const RtArenaBlock tfmc_info_arena_blocks[%d] = {\n", info->n_arena_blocks);
    for (int i = 0; i < info->n_arena_blocks; i++) {
      const RtArenaBlock *b = &info->arena_blocks[i];
      fputs("  {", o);
      c_put_i64(o, b->offset);
      fputs(", ", o);
      c_put_i64(o, b->bytes);
      fputs(", {", o);
      for (int d = 0; d < RT_MAX_RANK; d++) fprintf(o, "%s%d", d ? ", " : "", b->syms[d]);
      fputs("}},\n", o);
    }
    fputs("};\n\n", o);
  }
  fprintf(o, "const RtModelInfo %s = {\n  .abi_version = %u,\n  .name = ", name,
          (unsigned)info->abi_version);
  c_put_string(o, info->name);
  fprintf(o, ",\n  .n_syms = %d,\n", info->n_syms);
  if (info->n_syms > 0) {
    fputs("  .sym_names = {", o);
    for (int s = 0; s < info->n_syms; s++) {
      if (s) fputs(", ", o);
      c_put_string(o, info->sym_names[s]);
    }
    fputs("},\n  .sym_max = {", o);
    for (int s = 0; s < info->n_syms; s++) {
      if (s) fputs(", ", o);
      c_put_i64(o, info->sym_max[s]);
    }
    fputs("},\n", o);
  }
  fprintf(o, "  .n_inputs = %d,\n", info->n_inputs);
  if (info->n_inputs > 0) fputs("  .inputs = tfmc_info_inputs,\n", o);
  fprintf(o, "  .n_outputs = %d,\n", info->n_outputs);
  if (info->n_outputs > 0) fputs("  .outputs = tfmc_info_outputs,\n", o);
  fprintf(o, "  .n_weights = %d,\n", info->n_weights);
  if (info->n_weights > 0) fputs("  .weights = tfmc_info_weights,\n", o);
  fputs("  .weights_floats = ", o);
  c_put_i64(o, info->weights_floats);
  fprintf(o, ",\n  .layout_hash = UINT64_C(0x%016llx),\n  .arena_bytes = ",
          (unsigned long long)info->layout_hash);
  c_put_i64(o, info->arena_bytes);
  if (info->state_bytes) {
    fputs(",\n  .state_bytes = ", o);
    c_put_i64(o, info->state_bytes);
  }
  fputs(",\n  .pad_id = ", o);
  c_put_i64(o, info->pad_id);
  fprintf(o, ",\n  .n_kernels = %d,\n", info->n_kernels);
  if (info->n_kernels > 0) fputs("  .kernels = tfmc_info_kernels,\n", o);
  if (info->n_arena_blocks > 0)
    fprintf(o, "  .n_arena_blocks = %d,\n  .arena_blocks = tfmc_info_arena_blocks,\n",
            info->n_arena_blocks);
  if (info->attention_layer) {
    fputs("  .attention_layer = ", o);
    c_put_string(o, info->attention_layer);
    fputs(",\n", o);
  }
  fputs("};\n", o);
}

void c_emit_gen_info(const RtGenInfo *gi, FILE *out) {
  FILE *o = out;
  fputs("/* ---- generation (runtime/rt_stepper.h): the programs, the KV cache tensors\n"
        " * of the step's state (beam search reorders their rows), bos / eos, and the\n"
        " * layout of the one packed-weights image both programs read ---- */\n\n"
        "#include \"runtime/rt_stepper.h\"\n\n"
        "extern const RtModelInfo tfmc_step_info; /* the decoder step */\n",
        o);
  if (gi->forward) fputs("extern const RtModelInfo tfmc_model_info; /* the forward pass */\n", o);
  if (gi->encode) fputs("extern const RtModelInfo tfmc_encode_info; /* the encoder */\n", o);
  fputs("\n", o);
  c_emit_model_info_named(gi->weights, "tfmc_weights_info", o);
  if (gi->n_states > 0) {
    fprintf(o, "\nstatic const RtStateInfo tfmc_gen_states[%d] = {\n", gi->n_states);
    for (int i = 0; i < gi->n_states; i++) {
      const RtStateInfo *s = &gi->states[i];
      fputs("  {", o);
      c_put_string(o, s->name);
      fputs(", ", o);
      c_put_i64(o, s->offset);
      fputs(", ", o);
      c_put_i64(o, s->rows);
      fputs(", ", o);
      c_put_i64(o, s->positions);
      fputs(", ", o);
      c_put_i64(o, s->width);
      fputs("},\n", o);
    }
    fputs("};\n", o);
  }
  fprintf(o, "\nconst RtGenInfo tfmc_gen_info = {\n  .version = %d,\n", RT_GEN_INFO_VERSION);
  if (gi->forward) fputs("  .forward = &tfmc_model_info,\n", o);
  fputs("  .step = &tfmc_step_info,\n", o);
  if (gi->encode) fputs("  .encode = &tfmc_encode_info,\n", o);
  fputs("  .weights = &tfmc_weights_info,\n  .encode_offset = ", o);
  c_put_i64(o, gi->encode_offset);
  fputs(",\n  .step_offset = ", o);
  c_put_i64(o, gi->step_offset);
  fprintf(o, ",\n  .n_states = %d,\n", gi->n_states);
  if (gi->n_states > 0) fputs("  .states = tfmc_gen_states,\n", o);
  fputs("  .bos = ", o);
  c_put_i64(o, gi->bos);
  fputs(",\n  .eos = ", o);
  c_put_i64(o, gi->eos);
  fputs("\n};\n", o);
}
