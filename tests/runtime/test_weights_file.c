/* tests/runtime/test_weights_file.c — packed weights: write/open round
 * trips (mapped and embedded, aligned and not), the checksum and layout
 * hash pinned to values computed independently from their definitions,
 * and one test per refusal, each checking the message names the file and
 * says what is wrong. */
#include "runtime/rt_model.h"
#include "runtime/rt_weights.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a small model: a [2,3] at 0, b [4] at 16 ---- */

static const RtWeightInfo small_weights[] = {
    {"a", 2, {2, 3}, 0},
    {"b", 1, {4}, 16},
};

static RtModelInfo small_info(void) {
  RtModelInfo info = {.abi_version = RT_ABI_VERSION,
                      .name = "small",
                      .n_weights = 2,
                      .weights = small_weights,
                      .weights_floats = 20,
                      .pad_id = -1};
  info.layout_hash = rt_model_layout_hash(small_weights, 2);
  return info;
}

/* a model of the one weight w, n floats (no weight when n is 0) */
static RtModelInfo one_weight_info(const RtWeightInfo *w, const char *name, int64_t n) {
  RtModelInfo info = {.abi_version = RT_ABI_VERSION,
                      .name = name,
                      .weights = w,
                      .n_weights = n > 0,
                      .weights_floats = n};
  info.layout_hash = rt_model_layout_hash(w, info.n_weights);
  return info;
}

static float small_data[20];

static void fill_data(void) {
  for (int i = 0; i < 20; i++)
    small_data[i] = (float)i * 0.25f - 1.0f;
}

static char tmpdir[64];

static void setup(void) {
  fill_data();
  strcpy(tmpdir, "/tmp/tfmc_wtsXXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static char *path_in(const char *name) {
  static char buf[4][128];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 128, "%s/%s", tmpdir, name);
  return p;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 64);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static void spit(const char *path, const void *b, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b, 1, len, f), len);
  fclose(f);
}

static uint64_t le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* Writes the small model's file and returns its path. */
static const char *write_small(const char *name) {
  RtModelInfo info = small_info();
  char err[512] = "";
  const char *path = path_in(name);
  cr_assert_eq(rt_weights_write(path, &info, small_data, err, sizeof err), 0, "%s", err);
  return path;
}

/* v = {1, 2, 3}: an odd count (the checksum's last word is zero-padded),
 * written to three.wts; returns the file's bytes (len) and its model */
static const RtWeightInfo three_weights[1] = {{"v", 1, {3}, 0}};
static const float three_data[3] = {1.0f, 2.0f, 3.0f};
static unsigned char *write_three(RtModelInfo *info, size_t *len) {
  *info = one_weight_info(three_weights, "three", 3);
  char err[512] = "";
  const char *path = path_in("three.wts");
  cr_assert_eq(rt_weights_write(path, info, three_data, err, sizeof err), 0, "%s", err);
  return slurp(path, len);
}

static void expect_refused(const char *path, const RtModelInfo *info, const char *frag) {
  RtWeights *w = (RtWeights *)&w;
  char err[512] = "";
  cr_assert_neq(rt_weights_open(path, info, &w, err, sizeof err), 0,
                "accepted a bad file (expected '%s')", frag);
  cr_assert_null(w);
  cr_assert(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
            "message does not name the file: %s", err);
  cr_assert(strstr(err, frag), "message '%s' lacks '%s'", err, frag);
}

/* Writes the small file with bytes [at, at+n) replaced, then expects frag. */
static void expect_patched_refused(size_t at, const void *bytes, size_t n, const char *frag) {
  const char *good = write_small("good.wts");
  size_t len;
  unsigned char *b = slurp(good, &len);
  memcpy(b + at, bytes, n);
  const char *bad = path_in("bad.wts");
  spit(bad, b, len);
  free(b);
  RtModelInfo info = small_info();
  expect_refused(bad, &info, frag);
}

TestSuite(weights, .init = setup, .fini = teardown);

/* ---- round trips ---- */

Test(weights, write_open_round_trip) {
  const char *path = write_small("w.wts");
  size_t len;
  unsigned char *b = slurp(path, &len);
  cr_assert_eq(len, 64 + 20 * 4);
  cr_assert_eq(memcmp(b, "TFMCWTS\0", 8), 0);
  cr_assert_eq(b[8], 3);
  RtModelInfo info = small_info();
  cr_assert_eq(le64(b + 16), info.layout_hash);
  cr_assert_eq(le64(b + 24), 20);
  for (int i = 40; i < 64; i++)
    cr_assert_eq(b[i], 0, "reserved byte %d", i);
  free(b);

  RtWeights *w = NULL;
  char err[512] = "";
  cr_assert_eq(rt_weights_open(path, &info, &w, err, sizeof err), 0, "%s", err);
  const float *d = rt_weights_data(w);
  cr_assert_not_null(d);
  cr_assert_eq((uintptr_t)d % 64, 0, "weights data not 64-byte aligned");
  cr_assert_eq(memcmp(d, small_data, sizeof small_data), 0);
  rt_weights_close(w);
  rt_weights_close(NULL);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0644);
}

Test(weights, from_memory_aligned_and_unaligned) {
  const char *path = write_small("w.wts");
  size_t len;
  unsigned char *b = slurp(path, &len);
  RtModelInfo info = small_info();
  for (size_t shift = 0; shift < 8; shift++) {
    unsigned char *img = aligned_alloc(64, 256);
    memcpy(img + shift, b, len);
    RtWeights *w = NULL;
    char err[512] = "";
    cr_assert_eq(rt_weights_from_memory(img + shift, len, &info, &w, err, sizeof err), 0, "%s",
                 err);
    const float *d = rt_weights_data(w);
    cr_assert_eq((uintptr_t)d % 64, 0, "shift %zu: data not aligned", shift);
    if (shift == 0)
      cr_assert_eq((const void *)d, img + 64, "an aligned image is not copied");
    cr_assert_eq(memcmp(d, small_data, sizeof small_data), 0, "shift %zu", shift);
    rt_weights_close(w);
    free(img);
  }
  free(b);
}

Test(weights, zero_and_odd_float_counts) {
  static const RtWeightInfo none[1] = {{"x", 0, {0}, 0}};
  RtModelInfo info = one_weight_info(none, "empty", 0);
  char err[512] = "";
  const char *path = path_in("empty.wts");
  cr_assert_eq(rt_weights_write(path, &info, NULL, err, sizeof err), 0, "%s", err);
  RtWeights *w = NULL;
  cr_assert_eq(rt_weights_open(path, &info, &w, err, sizeof err), 0, "%s", err);
  rt_weights_close(w);

  size_t len;
  free(write_three(&info, &len));
  cr_assert_eq(rt_weights_open(path_in("three.wts"), &info, &w, err, sizeof err), 0, "%s", err);
  cr_assert_eq(memcmp(rt_weights_data(w), three_data, sizeof three_data), 0);
  rt_weights_close(w);
}

/* ---- the definitions, pinned to values computed independently (Python,
 * from the header comments) ---- */

Test(weights, checksum_matches_its_definition) {
  RtModelInfo info;
  size_t len;
  unsigned char *b = write_three(&info, &len);
  cr_assert_eq(le64(b + 32), 0xa6907eaf1a2a5aaaull, "checksum %016llx",
               (unsigned long long)le64(b + 32));
  free(b);

  RtModelInfo four = info;
  four.weights_floats = 4;
  const float u[4] = {1.0f, -2.0f, 0.5f, 1e-3f};
  const char *path = path_in("four.wts");
  char err[512] = "";
  cr_assert_eq(rt_weights_write(path, &four, u, err, sizeof err), 0, "%s", err);
  b = slurp(path, &len);
  cr_assert_eq(le64(b + 32), 0x9416b4c699c0b7efull, "checksum %016llx",
               (unsigned long long)le64(b + 32));
  free(b);
}

/* Two segments (1 MiB and 12 bytes, the last word half padding), verified
 * from the file (pread, the segments shared by threads) and in memory; a
 * byte changed in either segment is refused both ways. */
Test(weights, checksum_over_segments) {
  enum { N = (1 << 18) + 3 };
  static const RtWeightInfo big[1] = {{"v", 1, {N}, 0}};
  RtModelInfo info = one_weight_info(big, "big", N);
  float *v = malloc(sizeof(float) * N);
  cr_assert_not_null(v);
  for (int i = 0; i < N; i++)
    v[i] = (float)(i % 1000) * 0.25f - 100.0f;
  char err[512] = "";
  const char *path = path_in("big.wts");
  cr_assert_eq(rt_weights_write(path, &info, v, err, sizeof err), 0, "%s", err);
  size_t len;
  unsigned char *b = slurp(path, &len);
  cr_assert_eq(le64(b + 32), 0x4848fb9cf3bea584ull, "checksum %016llx",
               (unsigned long long)le64(b + 32));
  RtWeights *w = NULL;
  cr_assert_eq(rt_weights_open(path, &info, &w, err, sizeof err), 0, "%s", err);
  cr_assert_eq(memcmp(rt_weights_data(w), v, sizeof(float) * N), 0);
  rt_weights_close(w);
  w = NULL;
  cr_assert_eq(rt_weights_from_memory(b, len, &info, &w, err, sizeof err), 0, "%s", err);
  rt_weights_close(w);
  const size_t at[] = {64 + 5, 64 + (1 << 20) - 1, 64 + (1 << 20) + 9};
  for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
    b[at[i]] ^= 0x01;
    const char *bad = path_in("bigbad.wts");
    spit(bad, b, len);
    expect_refused(bad, &info, "checksum mismatch: the file is corrupt");
    w = (RtWeights *)&w;
    cr_assert_neq(rt_weights_from_memory(b, len, &info, &w, err, sizeof err), 0);
    cr_assert(strstr(err, "checksum mismatch"), "%s", err);
    cr_assert_null(w);
    b[at[i]] ^= 0x01;
  }
  free(b);
  free(v);
}

/* Files of version 2 (one serial chain for the checksum, the rest the
 * same) are still read, and checked by their own checksum. */
Test(weights, reads_version_2) {
  RtModelInfo info;
  size_t len;
  unsigned char *b = write_three(&info, &len);
  char err[512] = "";
  b[8] = 2;
  const char *old = path_in("three_v2.wts");
  spit(old, b, len); /* version 2 with a version 3 checksum */
  expect_refused(old, &info, "checksum mismatch: the file is corrupt");
  uint64_t v2 = 0xe885be897cd27a46ull; /* the serial chain over 1, 2, 3 (and 4 zero bytes) */
  for (int i = 0; i < 8; i++)
    b[32 + i] = (unsigned char)(v2 >> (8 * i));
  spit(old, b, len);
  RtWeights *w = NULL;
  cr_assert_eq(rt_weights_open(old, &info, &w, err, sizeof err), 0, "%s", err);
  cr_assert_eq(memcmp(rt_weights_data(w), three_data, sizeof three_data), 0);
  rt_weights_close(w);
  w = NULL;
  cr_assert_eq(rt_weights_from_memory(b, len, &info, &w, err, sizeof err), 0, "%s", err);
  rt_weights_close(w);
  b[64] ^= 0x40;
  spit(old, b, len);
  expect_refused(old, &info, "checksum mismatch: the file is corrupt");
  free(b);
}

Test(weights, layout_hash_matches_its_definition) {
  cr_assert_eq(rt_model_layout_hash(small_weights, 2), 0x24e42136e7a4f1d8ull);
  cr_assert_eq(rt_model_layout_hash(small_weights, 0), 0xcbf29ce484222325ull);
  /* every field takes part */
  RtWeightInfo w[2] = {small_weights[0], small_weights[1]};
  uint64_t h = rt_model_layout_hash(w, 2);
  w[1].offset = 32;
  cr_assert_neq(rt_model_layout_hash(w, 2), h);
  w[1].offset = 16;
  w[0].shape[1] = 4;
  cr_assert_neq(rt_model_layout_hash(w, 2), h);
  w[0].shape[1] = 3;
  w[0].name = "A";
  cr_assert_neq(rt_model_layout_hash(w, 2), h);
}

/* ---- refusals ---- */

Test(weights, refuses_missing_empty_and_directory) {
  RtModelInfo info = small_info();
  expect_refused(path_in("nope.wts"), &info, "cannot open weights");
  spit(path_in("empty.wts"), "", 0);
  expect_refused(path_in("empty.wts"), &info, "empty file");
  expect_refused(tmpdir, &info, "is a directory");
}

Test(weights, refuses_wrong_magic) {
  char junk[100];
  memset(junk, 'x', sizeof junk);
  spit(path_in("junk.wts"), junk, sizeof junk);
  RtModelInfo info = small_info();
  expect_refused(path_in("junk.wts"), &info, "not a tfmc packed-weights file (bad magic)");
  /* a safetensors checkpoint gets a hint */
  unsigned char st[40] = {14, 0, 0, 0, 0, 0, 0, 0};
  memcpy(st + 8, "{\"__metadata__\":{}}", 19);
  spit(path_in("w.safetensors"), st, sizeof st);
  expect_refused(path_in("w.safetensors"), &info, "is a safetensors checkpoint");
}

Test(weights, refuses_truncated_header) {
  const char *good = write_small("good.wts");
  size_t len;
  unsigned char *b = slurp(good, &len);
  spit(path_in("short.wts"), b, 30);
  free(b);
  RtModelInfo info = small_info();
  expect_refused(path_in("short.wts"), &info,
                 "truncated: 30 bytes, shorter than the 64-byte header");
}

Test(weights, refuses_truncated_data) {
  const char *good = write_small("good.wts");
  size_t len;
  unsigned char *b = slurp(good, &len);
  spit(path_in("cut.wts"), b, len - 4);
  RtModelInfo info = small_info();
  expect_refused(path_in("cut.wts"), &info, "truncated: 140 bytes, expected 144");
  memset(b + len, 0, 8);
  spit(path_in("long.wts"), b, len + 8);
  expect_refused(path_in("long.wts"), &info,
                 "size mismatch (trailing bytes): 152 bytes, expected 144");
  free(b);
}

Test(weights, refuses_other_version) {
  unsigned char v4[4] = {4, 0, 0, 0};
  expect_patched_refused(8, v4, 4, "format version 4; this runtime reads versions 2 and 3");
}

/* Version 1 files listed a tied embedding twice (plain and packed): their
 * layout hash would refuse them too, but as "another model"; the version
 * says what happened. */
Test(weights, refuses_version_1_saying_to_pack_again) {
  unsigned char v1[4] = {1, 0, 0, 0};
  expect_patched_refused(8, v1, 4,
                         "packed-weights format version 1, written by an older tfmc (it stored "
                         "a tied embedding twice); this runtime reads version 3: pack the "
                         "weights again with tfmc build");
}

Test(weights, refuses_another_models_layout) {
  const char *path = write_small("w.wts");
  RtWeightInfo other[2] = {small_weights[0], small_weights[1]};
  other[1].shape[0] = 5; /* same size, different shape */
  RtModelInfo info = small_info();
  info.name = "other";
  info.layout_hash = rt_model_layout_hash(other, 2);
  expect_refused(path, &info, "was packed for another model (weights layout hash");
}

Test(weights, refuses_wrong_float_count) {
  const char *path = write_small("w.wts");
  RtModelInfo info = small_info();
  info.weights_floats = 24;
  expect_refused(path, &info, "was packed for another model (20 floats; model 'small' has 24)");
}

Test(weights, refuses_patched_float_count) {
  unsigned char n[8];
  put_le64(n, (uint64_t)1 << 62);
  expect_patched_refused(24, n, 8, "was packed for another model (4611686018427387904 floats");
}

Test(weights, refuses_corrupt_data) {
  /* a flipped bit in any float is caught, and so are two sign flips in the
   * high halves of two words of one lane (which a plain word-wise FNV
   * would miss) */
  unsigned char flip[1];
  for (size_t at = 64; at < 64 + 80; at += 9) {
    const char *good = write_small("good.wts");
    size_t len;
    unsigned char *b = slurp(good, &len);
    flip[0] = b[at] ^ 0x10;
    free(b);
    expect_patched_refused(at, flip, 1, "checksum mismatch: the file is corrupt");
  }
  const char *good = write_small("good.wts");
  size_t len;
  unsigned char *b = slurp(good, &len);
  b[64 + 7] ^= 0x80; /* words 0 and 8: lane 0 */
  b[64 + 71] ^= 0x80;
  const char *bad = path_in("signs.wts");
  spit(bad, b, len);
  free(b);
  RtModelInfo info = small_info();
  expect_refused(bad, &info, "checksum mismatch: the file is corrupt");
}

Test(weights, refuses_corrupt_checksum_field) {
  unsigned char zero[8] = {0};
  expect_patched_refused(32, zero, 8, "checksum mismatch");
}

Test(weights, embedded_refusals_name_the_image) {
  RtModelInfo info = small_info();
  RtWeights *w = (RtWeights *)&w;
  char err[512] = "";
  cr_assert_neq(rt_weights_from_memory("nonsense", 8, &info, &w, err, sizeof err), 0);
  cr_assert_null(w);
  cr_assert(strncmp(err, "embedded weights: ", 18) == 0, "%s", err);
  cr_assert_neq(rt_weights_from_memory(NULL, 0, &info, &w, err, sizeof err), 0);
  cr_assert(strstr(err, "empty"), "%s", err);
}

Test(weights, write_reports_failures) {
  RtModelInfo info = small_info();
  char err[512] = "";
  const char *path = "/nonexistent-dir-tfmc/w.wts";
  cr_assert_neq(rt_weights_write(path, &info, small_data, err, sizeof err), 0);
  cr_assert(strncmp(err, path, strlen(path)) == 0, "%s", err);
  cr_assert(strstr(err, "cannot create a temporary file"), "%s", err);
  /* no temporary file is left behind on success either */
  write_small("w.wts");
  char cmd[160];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
  cr_assert_neq(system(cmd), 0, "a temporary file was left behind");
}
