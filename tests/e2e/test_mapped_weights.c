/* tests/e2e/test_mapped_weights.c — a packing compile (DRIVER_PACKED)
 * reads its weights from the mapped checkpoint as the packer needs them
 * (weights_load_mapped: no f32 copy; f32 blocks packed from the file's
 * pages as they lie, WeightSource.view, others converted piece by piece).
 * The packed block must be, byte for byte, what packing the f32 copy
 * (weights_load) writes: for the PyTorch goldens (Linear [out, in] and
 * GPT-2's transposed Conv1D with its fused c_attn split by columns), at
 * f32, bf16 and int8 panels; for a bf16 checkpoint and a misaligned one
 * (no views: the converting reads); and the JIT's outputs on it are
 * those of the f32 copy's. */
#include "backends/exec.h"
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GOLDEN TFMC_SOURCE_DIR "/tests/golden/"

/* spec at -O2 (pack-weights at dtype), to DRIVER_PACKED: weights from the
 * file (mapped), or, with copy, from an f32 copy loaded first */
static void compile(Arena *a, const char *spec, const char *weights, PassWeightsDtype dtype,
                    bool copy, Compiled *c) {
  Diags d;
  diags_init(&d, a, NULL);
  char err[1024] = "";
  Compiled ref;
  DriverOptions o = {.weights = weights, .stage = DRIVER_GRAPH};
  if (copy) {
    cr_assert_eq(driver_compile_file(a, &d, spec, &o, &ref, err, sizeof err), 0, "%s %s", err,
                 d.captured ? d.captured : "");
    cr_assert(ref.w && !ref.w->src, "a graph compile reads the weights into an f32 copy");
  }
  static PassPipeline pl;
  cr_assert(pass_pipeline_level(2, &pl));
  PassContext pctx = {.diags = &d, .weights_dtype = dtype};
  o = (DriverOptions){.weights = weights, .stage = DRIVER_PACKED, .passes = &pl,
                      .pass_ctx = &pctx, .weight_set = copy ? ref.w : NULL};
  cr_assert_eq(driver_compile_file(a, &d, spec, &o, c, err, sizeof err), 0, "%s %s", err,
               d.captured ? d.captured : "");
  cr_assert(copy || (c->w && c->w->src), "a packing compile maps the checkpoint");
}

static void same_pack(const char *spec, const char *weights, PassWeightsDtype dtype) {
  Arena *a = arena_create();
  Compiled m, f;
  compile(a, spec, weights, dtype, false, &m);
  compile(a, spec, weights, dtype, true, &f);
  int64_t n = m.prog->weights_floats;
  cr_assert_eq(n, f.prog->weights_floats);
  cr_assert_gt(n, 0);
  for (int i = 0; i < m.info->n_weights; i++) {
    const RtWeightInfo *wi = &m.info->weights[i];
    cr_assert(memcmp(m.packed + wi->offset, f.packed + wi->offset,
                     (size_t)rt_weight_floats(wi) * sizeof(float)) == 0,
              "%s (%s, dtype %d): weight '%s' packed from the mapped checkpoint differs", spec,
              weights, (int)dtype, wi->name);
  }
  cr_assert(memcmp(m.packed, f.packed, (size_t)n * sizeof(float)) == 0);
  arena_destroy(a);
}

static const char *const goldens[] = {"gpt2", "bert", "seq2seq", "annotated",
                                      "torchnn_transformer"};

Test(mapped_weights, packs_what_the_f32_copy_packs) {
  char spec[512], weights[512];
  for (size_t i = 0; i < sizeof goldens / sizeof *goldens; i++) {
    snprintf(spec, sizeof spec, GOLDEN "%s/model.tfm", goldens[i]);
    snprintf(weights, sizeof weights, GOLDEN "%s/weights.safetensors", goldens[i]);
    same_pack(spec, weights, PASS_WEIGHTS_F32);
  }
  same_pack(GOLDEN "gpt2/model.tfm", GOLDEN "gpt2/weights.safetensors", PASS_WEIGHTS_BF16);
  same_pack(GOLDEN "gpt2/model.tfm", GOLDEN "gpt2/weights.safetensors", PASS_WEIGHTS_INT8);
  same_pack(GOLDEN "bert/model.tfm", GOLDEN "bert/weights.safetensors", PASS_WEIGHTS_INT8);
  same_pack(GOLDEN "bert/model.tfm", GOLDEN "bert/weights.safetensors", PASS_WEIGHTS_BF16);
}

/* The gpt2 golden's checkpoint written again by hand: as bf16 (rounded
 * to nearest even), or as f32 with pad: its header padded with blanks so
 * that no tensor is 4-byte aligned. */
static char *rewrite(const char *name, bool bf16, int pad) {
  char err[512];
  RtSafetensors *st;
  cr_assert_eq(rt_st_open(GOLDEN "gpt2/weights.safetensors", &st, err, sizeof err), 0, "%s", err);
  static char path[2][256];
  char *out_path = path[bf16];
  snprintf(out_path, sizeof path[0], "%s/tfmc-mapped-%d-%s.safetensors",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), name);
  int n = rt_st_count(st);
  size_t cap = 1 << 16, len = 0, data_len = 0;
  char *hdr = malloc(cap);
  cr_assert(hdr);
  len += (size_t)snprintf(hdr + len, cap - len, "{");
  for (int i = 0; i < n; i++) {
    const RtStTensor *t = rt_st_get(st, i);
    bool conv = t->dtype == RT_F32; /* others (GPT-2's BOOL masks) as they are */
    size_t bytes = conv ? (size_t)rt_st_numel(t) * (bf16 ? 2 : 4) : t->nbytes;
    len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                            i ? "," : "", t->name,
                            !conv ? rt_dtype_name(t->dtype) : bf16 ? "BF16" : "F32");
    for (int d = 0; d < t->rank; d++)
      len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", data_len,
                            data_len + bytes);
    cr_assert_lt(len, cap - 512);
    data_len += bytes;
  }
  len += (size_t)snprintf(hdr + len, cap - len, "}");
  if (pad) /* the data 2 bytes past a multiple of 4 */
    len += (size_t)snprintf(hdr + len, cap - len, "%*s", (int)((2 - (8 + len) % 4 + 4) % 4), "");
  FILE *out = fopen(out_path, "wb");
  cr_assert(out);
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)len >> (8 * i));
  cr_assert_eq(fwrite(len8, 1, 8, out), 8);
  cr_assert_eq(fwrite(hdr, 1, len, out), len);
  for (int i = 0; i < n; i++) {
    const RtStTensor *t = rt_st_get(st, i);
    if (t->dtype != RT_F32) {
      cr_assert_eq(fwrite(t->data, 1, t->nbytes, out), t->nbytes);
      continue;
    }
    int64_t numel = rt_st_numel(t);
    float *f = malloc((size_t)(numel + 1) * sizeof(float));
    cr_assert(f);
    cr_assert_eq(rt_st_read_f32(t, f, err, sizeof err), 0, "%s", err);
    for (int64_t k = 0; k < numel; k++) { /* little-endian bytes */
      uint32_t u;
      memcpy(&u, &f[k], 4);
      if (bf16)
        u = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
      for (int b = 0; b < (bf16 ? 2 : 4); b++) cr_assert_neq(fputc((int)(u >> (8 * b)) & 0xff, out), EOF);
    }
    free(f);
  }
  cr_assert_eq(fclose(out), 0);
  free(hdr);
  rt_st_close(st);
  RtSafetensors *back;
  cr_assert_eq(rt_st_open(out_path, &back, err, sizeof err), 0, "%s", err);
  if (!bf16)
    cr_assert_neq((uintptr_t)rt_st_get(back, 0)->data % 4, 0, "the rewrite is aligned");
  rt_st_close(back);
  return out_path;
}

Test(mapped_weights, bf16_and_misaligned_checkpoints_pack_alike) {
  const char *p = rewrite("bf16", true, 0);
  same_pack(GOLDEN "gpt2/model.tfm", p, PASS_WEIGHTS_F32);
  same_pack(GOLDEN "gpt2/model.tfm", p, PASS_WEIGHTS_INT8);
  remove(p);
  p = rewrite("misaligned", false, 2);
  same_pack(GOLDEN "gpt2/model.tfm", p, PASS_WEIGHTS_F32);
  same_pack(GOLDEN "gpt2/model.tfm", p, PASS_WEIGHTS_BF16);
  remove(p);
}
