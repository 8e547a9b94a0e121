/* tests/fuzz/fuzz_weights.c — fuzz harness for rt_weights_from_memory, the
 * packed-weights parser, against a fixed small model (a [2,3] at 0, b [4]
 * at 16: 20 floats).
 *
 * Each input is tried twice: as it is, and (when it has a full header) with
 * its checksum field recomputed by this file's own implementation of the
 * definition in rt_weights.h, so mutated data, odd alignments and header
 * fields past the checksum are exercised, not only the checksum refusal.
 * Invariants checked (a violation aborts, which the replay driver and
 * libFuzzer report as a crash):
 *   - a refusal leaves no handle and a message "embedded weights: ...";
 *   - an acceptance means the header says what the model expects and the
 *     size is exact; the data is 64-byte aligned and equals the input's
 *     little-endian floats;
 *   - an input whose header is right (magic, version, hash, count, size)
 *     and whose checksum was recomputed is accepted. */
#include "runtime/rt_model.h"
#include "runtime/rt_weights.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const RtWeightInfo fuzz_weights[] = {
    {"a", 2, {2, 3}, 0},
    {"b", 1, {4}, 16},
};

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_weights: invariant violated: %s\n", what);
    abort();
  }
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static uint64_t step(uint64_t h, const uint8_t *p, size_t n) {
  uint8_t w[8] = {0};
  memcpy(w, p, n < 8 ? n : 8);
  h = (h ^ le(w, 8)) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

/* The checksum exactly as rt_weights.h defines it for the version (2: one
 * chain; 3: 8 lanes per 1 MiB segment, one segment at these sizes). */
static uint64_t checksum(uint32_t version, const uint8_t *p, size_t n) {
  const uint64_t o = 0xcbf29ce484222325ull;
  uint64_t h = o, lane[8];
  for (int j = 0; j < 8; j++)
    lane[j] = o ^ (uint64_t)j;
  for (size_t i = 0; i < n; i += 8) {
    if (version == 2)
      h = step(h, p + i, n - i);
    else
      lane[i / 8 % 8] = step(lane[i / 8 % 8], p + i, n - i);
  }
  if (version == 2)
    return h;
  uint8_t b[8];
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 8; i++)
      b[i] = (uint8_t)(lane[j] >> (8 * i));
    h = step(h, b, 8); /* the segment's digest */
  }
  uint64_t d = h;
  h = o;
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(d >> (8 * i));
  if (n) /* no segment when there is no data */
    h = step(h, b, 8);
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)((uint64_t)(n / 4) >> (8 * i));
  return step(h, b, 8); /* n_floats */
}

/* Returns 1 if accepted. */
static int try_image(const uint8_t *img, size_t size, const RtModelInfo *info) {
  RtWeights *w = (RtWeights *)&w;
  char err[512] = "";
  if (rt_weights_from_memory(img, size, info, &w, err, sizeof err) != 0) {
    check(w == NULL, "no handle on failure");
    check(strncmp(err, "embedded weights: ", 18) == 0 && err[18], "message names the image");
    return 0;
  }
  check(w != NULL, "handle on success");
  check(size == 64 + 4 * (size_t)info->weights_floats, "exact size");
  check(memcmp(img, "TFMCWTS\0", 8) == 0, "magic");
  check(le(img + 8, 4) == 2 || le(img + 8, 4) == 3, "version");
  check(le(img + 16, 8) == info->layout_hash, "layout hash");
  check(le(img + 24, 8) == (uint64_t)info->weights_floats, "float count");
  const float *d = rt_weights_data(w);
  check(d != NULL && (uintptr_t)d % 64 == 0, "aligned data");
  for (int64_t i = 0; i < info->weights_floats; i++) {
    uint32_t u = (uint32_t)le(img + 64 + 4 * i, 4), v;
    memcpy(&v, &d[i], 4);
    check(u == v, "data equals the image's floats");
  }
  rt_weights_close(w);
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  RtModelInfo info = {.abi_version = RT_ABI_VERSION,
                      .name = "fuzz",
                      .n_weights = 2,
                      .weights = fuzz_weights,
                      .weights_floats = 20,
                      .pad_id = -1};
  info.layout_hash = rt_model_layout_hash(fuzz_weights, 2);
  try_image(data, size, &info);
  if (size < 64 || size > 4096)
    return 0;
  /* again with the checksum fixed up, in a 64-byte aligned copy */
  uint8_t *copy = aligned_alloc(64, (size + 63) / 64 * 64);
  check(copy != NULL, "malloc");
  memcpy(copy, data, size);
  uint32_t version = (uint32_t)le(copy + 8, 4);
  uint64_t sum = checksum(version, copy + 64, size - 64);
  for (int i = 0; i < 8; i++)
    copy[32 + i] = (uint8_t)(sum >> (8 * i));
  int header_ok = memcmp(copy, "TFMCWTS\0", 8) == 0 && (version == 2 || version == 3) &&
                  le(copy + 16, 8) == info.layout_hash && le(copy + 24, 8) == 20 && size == 144;
  int accepted = try_image(copy, size, &info);
  check(accepted == header_ok, "a right header with a right checksum is accepted, only that");
  free(copy);
  return 0;
}
