/* tests/runtime/test_safetensors.c — rt_safetensors: write/read round trips,
 * dtype conversions from hand-built bytes, and one test per malformed-file
 * case, each checking the error names the file, the tensor and the fault. */
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

/* A safetensors image: 8-byte LE length, the JSON text, then dlen data
 * bytes, in an exactly sized malloc block (so sanitizers see overreads). */
static unsigned char *mk(const char *json, const void *data, size_t dlen, size_t *len) {
  size_t n = strlen(json);
  *len = 8 + n + dlen;
  unsigned char *b = malloc(*len ? *len : 1);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(b + 8, json, n);
  if (dlen) memcpy(b + 8 + n, data, dlen);
  return b;
}

static const unsigned char zeros[256];

static void expect_fail_raw(const unsigned char *b, size_t len, const char *frag) {
  RtSafetensors *st = (RtSafetensors *)&st;
  char err[512] = "";
  int rc = rt_st_parse(b, len, "t.st", &st, err, sizeof err);
  cr_assert_neq(rc, 0, "accepted a malformed buffer (expected '%s')", frag);
  cr_assert_null(st);
  cr_assert(strncmp(err, "t.st: ", 6) == 0, "message does not name the file: %s", err);
  cr_assert(strstr(err, frag), "message '%s' lacks '%s'", err, frag);
}

static void expect_fail(const char *json, size_t dlen, const char *frag) {
  size_t len;
  unsigned char *b = mk(json, zeros, dlen, &len);
  expect_fail_raw(b, len, frag);
  free(b);
}

static RtSafetensors *parse_ok(const unsigned char *b, size_t len) {
  RtSafetensors *st = NULL;
  char err[512] = "";
  int rc = rt_st_parse(b, len, "t.st", &st, err, sizeof err);
  cr_assert_eq(rc, 0, "rejected: %s", err);
  cr_assert_not_null(st);
  return st;
}

static char tmpdir[64];

static void make_tmpdir(void) {
  strcpy(tmpdir, "/tmp/tfmc_st_XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(tmpdir);
}

static int count_dir_entries(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* ---- round trip ---- */

TestSuite(st_write, .init = make_tmpdir, .fini = remove_tmpdir);

Test(st_write, round_trip_all_write_dtypes_metadata_awkward_names) {
  float f[6] = {1.5f, -2.25f, 0.0f, 3.0e38f, -1.0e-40f, 42.0f};
  int32_t i32[4] = {INT32_MIN, -1, 0, INT32_MAX};
  int64_t i64[4] = {INT64_MIN, -5, 1LL << 40, INT64_MAX};
  uint8_t u8[3] = {0, 128, 255};
  uint8_t bl[4] = {1, 0, 0, 1};
  float scalar = 7.0f;
  const char *n_quote = "say \"hi\"", *n_back = "back\\slash", *n_ctrl = "tab\tnl\nbell\x07";
  const char *n_utf8 = "ünïcødé.名前.😀";
  RtStWrite w[] = {
      {.name = "enc.0.attn.q.weight", .dtype = RT_F32, .rank = 2, .shape = {2, 3}, .data = f},
      {.name = n_quote, .dtype = RT_I32, .rank = 1, .shape = {4}, .data = i32},
      {.name = n_back, .dtype = RT_I64, .rank = 2, .shape = {2, 2}, .data = i64},
      {.name = n_ctrl, .dtype = RT_U8, .rank = 1, .shape = {3}, .data = u8},
      {.name = n_utf8, .dtype = RT_BOOL, .rank = 3, .shape = {1, 2, 2}, .data = bl},
      {.name = "scalar", .dtype = RT_F32, .rank = 0, .data = &scalar},
      {.name = "empty", .dtype = RT_F32, .rank = 2, .shape = {0, 3}, .data = NULL},
  };
  const char *meta[] = {"format", "pt", "note", "a \"quoted\" \\ value\nwith ütf8"};
  char path[128], err[512] = "";
  snprintf(path, sizeof path, "%s/w.safetensors", tmpdir);
  int rc = rt_st_write(path, w, 7, meta, 2, err, sizeof err);
  cr_assert_eq(rc, 0, "%s", err);
  cr_assert_eq(count_dir_entries(), 1, "temporary file left behind");

  /* The raw layout: 8-byte LE length, aligned, header padded with spaces. */
  FILE *fp = fopen(path, "rb");
  unsigned char raw[4096];
  size_t got = fread(raw, 1, sizeof raw, fp);
  fclose(fp);
  uint64_t hn = 0;
  for (int i = 0; i < 8; i++) hn |= (uint64_t)raw[i] << (8 * i);
  cr_assert_eq(hn % 8, 0);
  cr_assert(8 + hn <= got);
  cr_assert(memcmp(raw + 8, "{\"__metadata__\":{\"format\":\"pt\",\"note\":", 38) == 0);
  size_t last = 8 + (size_t)hn - 1;
  while (raw[last] == ' ') last--;
  cr_assert_eq(raw[last], '}');
  cr_assert_eq(got, 8 + hn + 24 + 16 + 32 + 3 + 4 + 4, "file is %zu bytes", got);

  RtSafetensors *st = NULL;
  rc = rt_st_open(path, &st, err, sizeof err);
  cr_assert_eq(rc, 0, "%s", err);
  cr_assert_eq(rt_st_count(st), 7);
  cr_assert_str_eq(rt_st_metadata(st, "format"), "pt");
  cr_assert_str_eq(rt_st_metadata(st, "note"), "a \"quoted\" \\ value\nwith ütf8");
  cr_assert_null(rt_st_metadata(st, "missing"));

  /* Written in name order, so offset order is name order. */
  for (int i = 1; i < rt_st_count(st); i++)
    cr_assert(strcmp(rt_st_get(st, i - 1)->name, rt_st_get(st, i)->name) < 0);
  cr_assert_null(rt_st_get(st, 7));
  cr_assert_null(rt_st_get(st, -1));

  const RtStTensor *t = rt_st_find(st, "enc.0.attn.q.weight");
  cr_assert_not_null(t);
  cr_assert_eq(t->dtype, RT_F32);
  cr_assert_eq(t->rank, 2);
  cr_assert_eq(t->shape[0], 2);
  cr_assert_eq(t->shape[1], 3);
  cr_assert_eq(t->nbytes, 24);
  float fb[6];
  cr_assert_eq(rt_st_read_f32(t, fb, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < 6; i++) cr_assert_eq(f32_bits(fb[i]), f32_bits(f[i]), "f32 element %d", i);

  t = rt_st_find(st, n_quote);
  cr_assert_not_null(t);
  int32_t ib[4];
  cr_assert_eq(rt_st_read_i32(t, ib, INT32_MIN, INT32_MAX, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < 4; i++) cr_assert_eq(ib[i], i32[i]);

  t = rt_st_find(st, n_back);
  cr_assert_not_null(t);
  cr_assert_eq(t->dtype, RT_I64);
  for (int i = 0; i < 4; i++) {
    int64_t v = 0;
    const unsigned char *p = (const unsigned char *)t->data + 8 * i;
    uint64_t u = 0;
    for (int k = 0; k < 8; k++) u |= (uint64_t)p[k] << (8 * k);
    memcpy(&v, &u, 8);
    cr_assert_eq(v, i64[i], "i64 element %d", i);
  }
  char msg[512];
  cr_assert_neq(rt_st_read_i32(t, ib, INT32_MIN, INT32_MAX, msg, sizeof msg), 0);
  cr_assert(strstr(msg, "element 0 (index [0, 0]) is -9223372036854775808"), "%s", msg);

  t = rt_st_find(st, n_ctrl);
  cr_assert_not_null(t);
  int32_t ub[3];
  cr_assert_eq(rt_st_read_i32(t, ub, 0, 255, err, sizeof err), 0, "%s", err);
  cr_assert_eq(ub[0], 0);
  cr_assert_eq(ub[1], 128);
  cr_assert_eq(ub[2], 255);

  t = rt_st_find(st, n_utf8);
  cr_assert_not_null(t);
  cr_assert_eq(t->dtype, RT_BOOL);
  cr_assert_eq(t->rank, 3);
  cr_assert_eq(rt_st_numel(t), 4);
  cr_assert_eq(rt_st_read_i32(t, ib, 0, 1, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < 4; i++) cr_assert_eq(ib[i], bl[i]);

  t = rt_st_find(st, "scalar");
  cr_assert_eq(t->rank, 0);
  cr_assert_eq(rt_st_numel(t), 1);
  cr_assert_eq(rt_st_read_f32(t, fb, err, sizeof err), 0);
  cr_assert_eq(fb[0], 7.0f);

  t = rt_st_find(st, "empty");
  cr_assert_eq(rt_st_numel(t), 0);
  cr_assert_eq(t->nbytes, 0);
  cr_assert_eq(rt_st_read_f32(t, fb, err, sizeof err), 0);

  cr_assert_null(rt_st_find(st, "nope"));
  rt_st_close(st);

  /* Writing again replaces the file atomically, without leftovers. */
  rc = rt_st_write(path, w, 1, NULL, 0, err, sizeof err);
  cr_assert_eq(rc, 0, "%s", err);
  cr_assert_eq(rt_st_open(path, &st, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_count(st), 1);
  cr_assert_null(rt_st_metadata(st, "format"));
  rt_st_close(st);
  cr_assert_eq(count_dir_entries(), 1);
}

Test(st_write, empty_file_of_tensors) {
  char path[128], err[512] = "";
  snprintf(path, sizeof path, "%s/e.safetensors", tmpdir);
  cr_assert_eq(rt_st_write(path, NULL, 0, NULL, 0, err, sizeof err), 0, "%s", err);
  RtSafetensors *st;
  cr_assert_eq(rt_st_open(path, &st, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_st_count(st), 0);
  rt_st_close(st);
}

static void expect_write_fail(const RtStWrite *w, int n, const char *const *meta, int n_meta,
                              const char *frag) {
  char path[128], err[512] = "";
  snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
  int rc = rt_st_write(path, w, n, meta, n_meta, err, sizeof err);
  cr_assert_neq(rc, 0, "write accepted (expected '%s')", frag);
  cr_assert(strstr(err, frag), "message '%s' lacks '%s'", err, frag);
  cr_assert(strstr(err, path), "message does not name the file: %s", err);
  cr_assert_eq(count_dir_entries(), 0, "a file was left behind");
}

Test(st_write, refuses_bad_input) {
  float f = 1;
  uint8_t two = 2;
  RtStWrite bad_utf8 = {.name = "a\xff", .dtype = RT_F32, .rank = 0, .data = &f};
  expect_write_fail(&bad_utf8, 1, NULL, 0, "not valid UTF-8");
  RtStWrite overlong = {.name = "a\xc0\xaf", .dtype = RT_F32, .rank = 0, .data = &f};
  expect_write_fail(&overlong, 1, NULL, 0, "not valid UTF-8");
  RtStWrite dup[2] = {{.name = "x", .dtype = RT_F32, .data = &f},
                      {.name = "x", .dtype = RT_F32, .data = &f}};
  expect_write_fail(dup, 2, NULL, 0, "duplicate tensor name 'x'");
  RtStWrite reserved = {.name = "__metadata__", .dtype = RT_F32, .data = &f};
  expect_write_fail(&reserved, 1, NULL, 0, "reserved");
  RtStWrite boolv = {.name = "b", .dtype = RT_BOOL, .rank = 1, .shape = {1}, .data = &two};
  expect_write_fail(&boolv, 1, NULL, 0, "not a BOOL");
  RtStWrite neg = {.name = "n", .dtype = RT_F32, .rank = 1, .shape = {-1}, .data = &f};
  expect_write_fail(&neg, 1, NULL, 0, "negative dim");
  RtStWrite rank = {.name = "r", .dtype = RT_F32, .rank = 9, .data = &f};
  expect_write_fail(&rank, 1, NULL, 0, "rank 9");
  const char *meta_bad[] = {"k", "v\xed\xa0\x80"};
  expect_write_fail(NULL, 0, meta_bad, 1, "not valid UTF-8");
  const char *meta_dup[] = {"k", "1", "k", "2"};
  expect_write_fail(NULL, 0, meta_dup, 2, "duplicate __metadata__ key 'k'");

  char err[512];
  cr_assert_neq(rt_st_write("/nonexistent-dir/x.safetensors", NULL, 0, NULL, 0, err, sizeof err),
                0);
  cr_assert(strstr(err, "/nonexistent-dir/x.safetensors: cannot create"), "%s", err);
}

/* ---- conversions ---- */

Test(st_convert, f16_values) {
  static const struct {
    uint16_t h;
    uint32_t f; /* expected f32 bits */
  } cases[] = {
      {0x0000, 0x00000000}, /* +0 */
      {0x8000, 0x80000000}, /* -0 */
      {0x3C00, 0x3F800000}, /* 1 */
      {0xC000, 0xC0000000}, /* -2 */
      {0x3555, 0x3EAAA000}, /* 0.333251953125 */
      {0x7BFF, 0x477FE000}, /* 65504, largest normal */
      {0x0400, 0x38800000}, /* 2^-14, smallest normal */
      {0x0001, 0x33800000}, /* 2^-24, smallest subnormal */
      {0x8001, 0xB3800000}, /* -2^-24 */
      {0x0200, 0x38000000}, /* 2^-15 */
      {0x03FF, 0x387FC000}, /* largest subnormal 1023 * 2^-24 */
      {0x7C00, 0x7F800000}, /* +inf */
      {0xFC00, 0xFF800000}, /* -inf */
  };
  size_t n = sizeof cases / sizeof cases[0];
  unsigned char data[64];
  for (size_t i = 0; i < n; i++) {
    data[2 * i] = (unsigned char)cases[i].h;
    data[2 * i + 1] = (unsigned char)(cases[i].h >> 8);
  }
  data[2 * n] = 0x00, data[2 * n + 1] = 0x7E; /* NaN */
  data[2 * n + 2] = 0x01, data[2 * n + 3] = 0xFC; /* negative NaN with payload */
  char json[160];
  snprintf(json, sizeof json, "{\"h\":{\"dtype\":\"F16\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}",
           n + 2, 2 * (n + 2));
  size_t len;
  unsigned char *b = mk(json, data, 2 * (n + 2), &len);
  RtSafetensors *st = parse_ok(b, len);
  float out[32];
  char err[256];
  cr_assert_eq(rt_st_read_f32(rt_st_find(st, "h"), out, err, sizeof err), 0, "%s", err);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(f32_bits(out[i]), cases[i].f, "f16 0x%04x -> 0x%08x, expected 0x%08x", cases[i].h,
                 f32_bits(out[i]), cases[i].f);
  cr_assert(isnan(out[n]));
  cr_assert(isnan(out[n + 1]));
  cr_assert(signbit(out[n + 1]));
  cr_assert_eq(out[7], 0x1p-24f);
  rt_st_close(st);
  free(b);
}

Test(st_convert, bf16_values) {
  static const uint16_t in[] = {0x3F80, 0xC040, 0x0000, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x4049};
  static const uint32_t want[] = {0x3F800000, 0xC0400000, 0, 0x80000000,
                                  0x7F800000, 0xFF800000, 0x00010000, 0x40490000};
  unsigned char data[20];
  for (int i = 0; i < 8; i++) {
    data[2 * i] = (unsigned char)in[i];
    data[2 * i + 1] = (unsigned char)(in[i] >> 8);
  }
  data[16] = 0xC0, data[17] = 0x7F; /* NaN */
  size_t len;
  unsigned char *b =
      mk("{\"b\":{\"dtype\":\"BF16\",\"shape\":[3,3],\"data_offsets\":[0,18]}}", data, 18, &len);
  RtSafetensors *st = parse_ok(b, len);
  float out[9];
  char err[256];
  cr_assert_eq(rt_st_read_f32(rt_st_find(st, "b"), out, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(f32_bits(out[i]), want[i], "bf16 0x%04x", in[i]);
  cr_assert(isnan(out[8]));
  cr_assert_eq(out[0], 1.0f);
  cr_assert_eq(out[1], -3.0f);
  rt_st_close(st);
  free(b);
}

static void put_f64(unsigned char *p, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(u >> (8 * i));
}

Test(st_convert, f64_and_unaligned_f32) {
  /* Header of odd length, so the data (and the tensors) start unaligned. */
  const char *json = "{\"d\":{\"dtype\":\"F64\",\"shape\":[7],\"data_offsets\":[0,56]},"
                     "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[57,65]}}  ";
  unsigned char data[65] = {0};
  /* 0x1.ffffffp127 is FLT_MAX plus half an ulp: the first value rounding to inf. */
  double dv[7] = {0.1, -1e300, 1e300, 1e-50, 0x1.fffffefffffffp127, -2.5, -0x1.ffffffp127};
  for (int i = 0; i < 7; i++) put_f64(data + 8 * i, dv[i]);
  uint32_t a = f32_bits(-7.25f), c = f32_bits(1e-3f);
  for (int i = 0; i < 4; i++) {
    data[57 + i] = (unsigned char)(a >> (8 * i));
    data[61 + i] = (unsigned char)(c >> (8 * i));
  }
  size_t len;
  unsigned char *b = mk(json, data, sizeof data, &len);
  RtSafetensors *st = parse_ok(b, len);
  cr_assert_neq(((uintptr_t)rt_st_find(st, "f")->data) % 4, 0, "test wants unaligned data");
  float out[7];
  char err[256];
  cr_assert_eq(rt_st_read_f32(rt_st_find(st, "d"), out, err, sizeof err), 0, "%s", err);
  cr_assert_eq(out[0], 0.1f);
  cr_assert(isinf(out[1]) && out[1] < 0);
  cr_assert(isinf(out[2]) && out[2] > 0);
  cr_assert_eq(out[3], 0.0f);
  cr_assert_eq(out[4], FLT_MAX); /* just below the threshold: rounds down */
  cr_assert_eq(out[5], -2.5f);
  cr_assert(isinf(out[6]) && out[6] < 0);
  cr_assert_eq(rt_st_read_f32(rt_st_find(st, "f"), out, err, sizeof err), 0, "%s", err);
  cr_assert_eq(out[0], -7.25f);
  cr_assert_eq(out[1], 1e-3f);
  /* The first tensor by offset is d, then f. */
  cr_assert_str_eq(rt_st_get(st, 0)->name, "d");
  cr_assert_str_eq(rt_st_get(st, 1)->name, "f");
  rt_st_close(st);
  free(b);
}

/* rt_st_read_f32_block against element-by-element reads of the whole
 * tensor: rows and columns, transposed or not, for every float dtype, a
 * rank-3 tensor seen as [d0, d1 * d2] and a scalar as [1, 1]; blocks
 * outside the matrix refused. */
Test(st_convert, read_block_rows_columns_transposed) {
  const char *json = "{\"f\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,140]},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[5,7],\"data_offsets\":[140,210]},"
                     "\"h\":{\"dtype\":\"F16\",\"shape\":[5,7],\"data_offsets\":[210,280]},"
                     "\"d\":{\"dtype\":\"F64\",\"shape\":[2,3,4],\"data_offsets\":[280,472]},"
                     "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[472,476]},"
                     "\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[476,484]}}";
  unsigned char data[484] = {0};
  for (int k = 0; k < 35; k++) {
    float v = (float)k - 10.5f; /* exact in bf16 and f16 */
    uint32_t u = f32_bits(v);
    for (int i = 0; i < 4; i++) data[4 * k + i] = (unsigned char)(u >> (8 * i));
    data[140 + 2 * k] = (unsigned char)(u >> 16);
    data[140 + 2 * k + 1] = (unsigned char)(u >> 24);
  }
  for (int k = 0; k < 35; k++) { /* f16 of k - 10.5: sign, 5-bit exponent, 10-bit mantissa */
    double a = fabs((double)k - 10.5);
    int e = 0;
    while (a >= 2.0) { a /= 2; e++; }
    while (a < 1.0) { a *= 2; e--; }
    uint16_t h = (uint16_t)(((double)k - 10.5 < 0 ? 0x8000 : 0) | (unsigned)(e + 15) << 10 |
                            (unsigned)((a - 1.0) * 1024));
    data[210 + 2 * k] = (unsigned char)h;
    data[210 + 2 * k + 1] = (unsigned char)(h >> 8);
  }
  for (int k = 0; k < 24; k++) put_f64(data + 280 + 8 * k, 0.25 * k - 3);
  uint32_t sv = f32_bits(42.0f);
  for (int i = 0; i < 4; i++) data[472 + i] = (unsigned char)(sv >> (8 * i));
  size_t len;
  unsigned char *b = mk(json, data, sizeof data, &len);
  RtSafetensors *st = parse_ok(b, len);
  char err[256];
  static const char *const names[] = {"f", "b", "h", "d"};
  for (int t = 0; t < 4; t++) {
    const RtStTensor *x = rt_st_find(st, names[t]);
    int64_t rows = x->shape[0], cols = rt_st_numel(x) / rows;
    float whole[35], blk[35];
    cr_assert_eq(rt_st_read_f32(x, whole, err, sizeof err), 0, "%s", err);
    for (int tr = 0; tr < 2; tr++)
      for (int64_t r0 = 0; r0 < rows; r0++)
        for (int64_t nr = 0; r0 + nr <= rows; nr++)
          for (int64_t c0 = 0; c0 < cols; c0 += 2)
            for (int64_t nc = 0; c0 + nc <= cols; nc += 3) {
              memset(blk, 0xff, sizeof blk);
              cr_assert_eq(rt_st_read_f32_block(x, r0, nr, c0, nc, tr, blk, err, sizeof err), 0,
                           "%s", err);
              for (int64_t i = 0; i < nr; i++)
                for (int64_t j = 0; j < nc; j++)
                  cr_assert_eq(tr ? blk[j * nr + i] : blk[i * nc + j],
                               whole[(r0 + i) * cols + c0 + j],
                               "%s rows %lld+%lld cols %lld+%lld transposed %d at [%lld, %lld]",
                               names[t], (long long)r0, (long long)nr, (long long)c0,
                               (long long)nc, tr, (long long)i, (long long)j);
              if (nr * nc < 35) /* nothing past the block written */
                cr_assert_eq(((uint32_t *)blk)[nr * nc], 0xffffffffu);
            }
  }
  float one = 0;
  cr_assert_eq(rt_st_read_f32_block(rt_st_find(st, "s"), 0, 1, 0, 1, 1, &one, err, sizeof err), 0,
               "%s", err);
  cr_assert_eq(one, 42.0f);
  float out[40];
  const RtStTensor *f = rt_st_find(st, "f");
  cr_assert_neq(rt_st_read_f32_block(f, 3, 3, 0, 7, 0, out, err, sizeof err), 0);
  cr_assert(strstr(err, "rows [3, +3) x columns [0, +7) of tensor 'f' ([5, 7] as a matrix)"),
            "%s", err);
  cr_assert_neq(rt_st_read_f32_block(f, 0, 5, 5, 3, 1, out, err, sizeof err), 0);
  cr_assert_neq(rt_st_read_f32_block(f, -1, 1, 0, 1, 0, out, err, sizeof err), 0);
  cr_assert_neq(rt_st_read_f32_block(f, 0, 1, 0, -1, 0, out, err, sizeof err), 0);
  cr_assert_neq(rt_st_read_f32_block(rt_st_find(st, "i"), 0, 2, 0, 1, 0, out, err, sizeof err), 0);
  cr_assert(strstr(err, "tensor 'i' has dtype I32"), "%s", err);
  rt_st_close(st);
  free(b);
}

Test(st_convert, signed_integers_sign_extend) {
  const char *json = "{\"a\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                     "\"b\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[2,6]},"
                     "\"c\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[6,22]}}";
  unsigned char data[22] = {0x80, 0x7F, 0x00, 0x80, 0xFF, 0x7F, 0xFB, 0xFF, 0xFF, 0xFF, 0xFF,
                            0xFF, 0xFF, 0xFF, 0x07, 0, 0, 0, 0, 0, 0, 0};
  size_t len;
  unsigned char *b = mk(json, data, sizeof data, &len);
  RtSafetensors *st = parse_ok(b, len);
  int32_t v[2];
  char err[256];
  cr_assert_eq(rt_st_read_i32(rt_st_find(st, "a"), v, INT32_MIN, INT32_MAX, err, sizeof err), 0);
  cr_assert_eq(v[0], -128);
  cr_assert_eq(v[1], 127);
  cr_assert_eq(rt_st_read_i32(rt_st_find(st, "b"), v, INT32_MIN, INT32_MAX, err, sizeof err), 0);
  cr_assert_eq(v[0], -32768);
  cr_assert_eq(v[1], 32767);
  cr_assert_eq(rt_st_read_i32(rt_st_find(st, "c"), v, -10, 10, err, sizeof err), 0, "%s", err);
  cr_assert_eq(v[0], -5);
  cr_assert_eq(v[1], 7);
  rt_st_close(st);
  free(b);
}

Test(st_convert, read_i32_refuses_out_of_range_id) {
  const char *json = "{\"ids\":{\"dtype\":\"I64\",\"shape\":[2,2],\"data_offsets\":[0,32]}}";
  unsigned char data[32] = {0};
  data[0] = 3, data[8] = 9, data[16] = 0, data[24] = 10; /* 10 >= vocab 10 */
  size_t len;
  unsigned char *b = mk(json, data, sizeof data, &len);
  RtSafetensors *st = parse_ok(b, len);
  int32_t v[4];
  char err[256];
  const RtStTensor *t = rt_st_find(st, "ids");
  cr_assert_neq(rt_st_read_i32(t, v, 0, 9, err, sizeof err), 0);
  cr_assert_str_eq(err, "tensor 'ids': element 3 (index [1, 1]) is 10, outside the allowed range [0, 9]");
  cr_assert_eq(rt_st_read_i32(t, v, 0, 10, err, sizeof err), 0, "%s", err);
  cr_assert_eq(v[3], 10);
  /* A value beyond int32 is refused even with a wide range. */
  data[24] = 0, data[28] = 1; /* 2^32 */
  free(b);
  b = mk(json, data, sizeof data, &len);
  rt_st_close(st);
  st = parse_ok(b, len);
  cr_assert_neq(rt_st_read_i32(rt_st_find(st, "ids"), v, INT64_MIN, INT64_MAX, err, sizeof err), 0);
  cr_assert(strstr(err, "element 3 (index [1, 1]) is 4294967296"), "%s", err);
  rt_st_close(st);
  free(b);
}

Test(st_convert, dtype_mismatch_and_bad_bool) {
  const char *json = "{\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                     "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                     "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[8,10]}}";
  unsigned char data[10] = {0, 0, 0x80, 0x3F, 1, 0, 0, 0, 1, 2};
  size_t len;
  unsigned char *b = mk(json, data, sizeof data, &len);
  RtSafetensors *st = parse_ok(b, len);
  float f[2];
  int32_t v[2];
  char err[256];
  cr_assert_neq(rt_st_read_f32(rt_st_find(st, "i"), f, err, sizeof err), 0);
  cr_assert(strstr(err, "tensor 'i' has dtype I32; expected a floating-point"), "%s", err);
  cr_assert_neq(rt_st_read_i32(rt_st_find(st, "f"), v, 0, 1, err, sizeof err), 0);
  cr_assert(strstr(err, "tensor 'f' has dtype F32; expected an integer"), "%s", err);
  cr_assert_neq(rt_st_read_i32(rt_st_find(st, "m"), v, 0, 1, err, sizeof err), 0);
  cr_assert(strstr(err, "tensor 'm': element 1 is byte 2, not a BOOL"), "%s", err);
  rt_st_close(st);
  free(b);
}

/* ---- accepted oddities ---- */

Test(st_parse, accepts_escapes_gaps_unknown_keys_and_sorts_by_offset) {
  const char *json = " {\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[10,12]},\n"
                     "\t\"\\u00e9\\ud83d\\ude00\\/\\\"\":{\"shape\":[],\"dtype\":\"U8\","
                     "\"data_offsets\":[3,4],\"extra\":{\"x\":[1,2.5e-3,true,null,\"s\"]}},"
                     "\"a\":{\"dtype\":\"U8\",\"shape\":[1,0],\"data_offsets\":[11,11]},"
                     "\"__metadata__\":{}}   ";
  size_t len;
  unsigned char *b = mk(json, zeros, 16, &len);
  RtSafetensors *st = parse_ok(b, len);
  cr_assert_eq(rt_st_count(st), 3);
  cr_assert_str_eq(rt_st_get(st, 0)->name, "\xc3\xa9\xf0\x9f\x98\x80/\"");
  cr_assert_str_eq(rt_st_get(st, 1)->name, "c");
  cr_assert_str_eq(rt_st_get(st, 2)->name, "a"); /* empty range inside c's: no overlap */
  cr_assert_not_null(rt_st_find(st, "é😀/\""));
  rt_st_close(st);
  free(b);
}

/* ---- malformed files ---- */

#define ENTRY(dtype, shape, offs) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offs "}"

Test(st_parse, empty_file) {
  expect_fail_raw((const unsigned char *)"", 0, "file is empty");
}

Test(st_parse, shorter_than_8_bytes) {
  expect_fail_raw((const unsigned char *)"\x02\0\0\0\0", 5, "file too short (5 bytes");
}

Test(st_parse, header_length_past_end) {
  unsigned char b[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
  expect_fail_raw(b, sizeof b, "header length 100 runs past the end of the file (4 bytes");
}

Test(st_parse, header_length_absurd) {
  unsigned char b[10] = {0, 0, 0, 0, 1, 0, 0, 0, '{', '}'};
  expect_fail_raw(b, sizeof b, "header length 4294967296 is absurd");
  unsigned char c[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
  expect_fail_raw(c, sizeof c, "is absurd");
}

Test(st_parse, header_not_utf8) {
  expect_fail("{\"a\xff\":{}}", 0, "header is not valid UTF-8 (byte 3 of the header)");
  expect_fail("{\"a\xc0\xaf\":{}}", 0, "not valid UTF-8 (byte 3"); /* overlong '/' */
  expect_fail("{\"\xe0\x80\xaf\":{}}", 0, "not valid UTF-8");      /* overlong, 3 bytes */
  expect_fail("{\"\xed\xa0\x80\":{}}", 0, "not valid UTF-8");      /* surrogate D800 */
  expect_fail("{\"\xf4\x90\x80\x80\":{}}", 0, "not valid UTF-8");  /* above U+10FFFF */
  expect_fail("{\"\xe2\x82\":{}}", 0, "not valid UTF-8");          /* truncated sequence */
}

Test(st_parse, bad_json_truncated) {
  expect_fail("{\"a\":{\"dtype\":\"F32\"", 0, "unexpected end of input");
  expect_fail("", 0, "invalid header JSON at byte 0 of the header: unexpected end of input");
}

Test(st_parse, bad_json_trailing_comma) {
  expect_fail("{\"a\":" ENTRY("F32", "[1]", "[0,4]") ",}", 4, "trailing comma before '}'");
  expect_fail("{\"a\":" ENTRY("F32", "[1,]", "[0,4]") "}", 4, "trailing comma before ']'");
}

Test(st_parse, bad_json_unterminated_string) {
  expect_fail("{\"a", 0, "invalid header JSON at byte 1 of the header: unterminated string");
  expect_fail("{\"a\\", 0, "unterminated string");
}

Test(st_parse, bad_json_trailing_garbage) {
  expect_fail("{} x", 0, "expected end of input after the JSON value, found 'x'");
  expect_fail("{}}", 0, "expected end of input");
  unsigned char b[12] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, 0};
  expect_fail_raw(b, sizeof b, "expected end of input after the JSON value, found byte 0x00");
}

Test(st_parse, bad_json_other) {
  expect_fail("{\"a\":" ENTRY("F32", "[01]", "[0,4]") "}", 4, "leading zero");
  expect_fail("{\"a\\q\":{}}", 0, "invalid escape '\\q'");
  expect_fail("{\"\\ud800\":{}}", 0, "unpaired high surrogate");
  expect_fail("{\"\\ud800\\u0041\":{}}", 0, "unpaired high surrogate");
  expect_fail("{\"\\udc00\":{}}", 0, "unpaired low surrogate");
  expect_fail("{\"\\u12g4\":{}}", 0, "4 hex digits");
  expect_fail("{\"a\tb\":{}}", 0, "control character 0x09");
  expect_fail("{\"a\" {}}", 0, "expected ':' after an object key");
  expect_fail("{\"__metadata__\":{} \"b\":{}}", 0, "expected ',' or '}', found '\"'");
  expect_fail("{a:{}}", 0, "expected a string key");
  expect_fail("{\"a\":" ENTRY("F32", "[1]", "[0,4]") ",\"b\":{\"x\":tru}}", 4, "expected a value");
  expect_fail("{\"a\":" ENTRY("F32", "[1.]", "[0,4]") "}", 4, "a digit after '.'");
  expect_fail("{\"a\":" ENTRY("F32", "[1e]", "[0,4]") "}", 4, "a digit in the exponent");
  expect_fail("{\"a\":" ENTRY("F32", "[-]", "[0,4]") "}", 4, "expected a number");
  /* Nesting past the limit inside an ignored key. */
  char deep[400];
  strcpy(deep, "{\"a\":{\"x\":");
  for (int i = 0; i < 70; i++) strcat(deep, "[");
  strcat(deep, "}}");
  expect_fail(deep, 0, "nesting deeper than 64 levels");
}

Test(st_parse, top_level_not_an_object) {
  expect_fail("[1,2]", 0, "header JSON is an array, not an object of tensors");
  expect_fail("\"x\"", 0, "header JSON is a string");
}

Test(st_parse, entry_not_an_object) {
  expect_fail("{\"w\":5}", 0, "tensor 'w': entry is a number, not an object");
  expect_fail("{\"w\":[]}", 0, "tensor 'w': entry is an array, not an object");
}

Test(st_parse, missing_fields) {
  expect_fail("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing \"dtype\"");
  expect_fail("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing \"shape\"");
  expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'w': missing \"data_offsets\"");
}

Test(st_parse, wrong_field_types_and_duplicate_keys) {
  expect_fail("{\"w\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
              "tensor 'w': dtype must be a string, found a number");
  expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4,
              "tensor 'w': shape must be an array of integers, found an object");
  expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0,4\"}}", 4,
              "tensor 'w': data_offsets must be [BEGIN, END], found a string");
  expect_fail("{\"w\":" ENTRY("F32", "[\"3\"]", "[0,4]") "}", 4,
              "tensor 'w': shape dim 0 must be an integer, found a string");
  expect_fail("{\"w\":" ENTRY("F32", "[1]", "[0,4,8]") "}", 8,
              "tensor 'w': data_offsets has more than two elements");
  expect_fail("{\"w\":" ENTRY("F32", "[1]", "[4]") "}", 8,
              "tensor 'w': data_offsets has 1 element, expected");
  expect_fail("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
              "tensor 'w': duplicate key \"dtype\"");
  expect_fail("{\"a\\u0000b\":" ENTRY("F32", "[1]", "[0,4]") "}", 4, "contains a NUL character");
}

Test(st_parse, unknown_dtype) {
  expect_fail("{\"w\":" ENTRY("Q4", "[1]", "[0,4]") "}", 4,
              "tensor 'w': unknown or unsupported dtype 'Q4'");
  expect_fail("{\"w\":" ENTRY("f32", "[1]", "[0,4]") "}", 4, "dtype 'f32'");
}

Test(st_parse, negative_dim) {
  expect_fail("{\"w\":" ENTRY("F32", "[2,-1]", "[0,4]") "}", 4,
              "tensor 'w': shape dim 1 is negative (-1)");
  expect_fail("{\"w\":" ENTRY("F32", "[-0]", "[0,4]") "}", 4, "is negative (-0)");
}

Test(st_parse, non_integer_dim) {
  expect_fail("{\"w\":" ENTRY("F32", "[1.5]", "[0,4]") "}", 4,
              "tensor 'w': shape dim 0 is not an integer (1.5)");
  expect_fail("{\"w\":" ENTRY("F32", "[1e3]", "[0,4]") "}", 4, "shape dim 0 is not an integer (1e3)");
  expect_fail("{\"w\":" ENTRY("F32", "[1.0]", "[0,4]") "}", 4, "is not an integer (1.0)");
  expect_fail("{\"w\":" ENTRY("F32", "[9007199254740993]", "[0,4]") "}", 4,
              "shape dim 0 is too large (9007199254740993");
  expect_fail("{\"w\":" ENTRY("F32", "[1]", "[0,4.5]") "}", 4,
              "tensor 'w': data_offsets END is not an integer (4.5)");
  expect_fail("{\"w\":" ENTRY("F32", "[1]", "[-4,0]") "}", 4,
              "tensor 'w': data_offsets BEGIN is negative (-4)");
  expect_fail("{\"w\":" ENTRY("F32", "[1]", "[0,99999999999999999999999]") "}", 4,
              "data_offsets END is too large");
}

Test(st_parse, rank_above_8) {
  expect_fail("{\"w\":" ENTRY("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4,
              "tensor 'w': shape has rank > 8");
  /* Rank 8 itself is fine. */
  size_t len;
  unsigned char *b = mk("{\"w\":" ENTRY("F32", "[1,1,1,1,1,1,1,2]", "[0,8]") "}", zeros, 8, &len);
  RtSafetensors *st = parse_ok(b, len);
  cr_assert_eq(rt_st_find(st, "w")->rank, 8);
  rt_st_close(st);
  free(b);
}

Test(st_parse, numel_overflow) {
  expect_fail("{\"w\":" ENTRY("F32", "[4294967296,4294967296]", "[0,4]") "}", 4,
              "tensor 'w': shape [4294967296, 4294967296]: element count overflows");
  expect_fail("{\"w\":" ENTRY("F32", "[0,4294967296,4294967296]", "[0,0]") "}", 0,
              "element count overflows");
}

Test(st_parse, offsets_reversed) {
  expect_fail("{\"w\":" ENTRY("F32", "[1]", "[8,4]") "}", 8,
              "tensor 'w': data_offsets [8, 4] are reversed");
}

Test(st_parse, offsets_past_end_of_buffer) {
  expect_fail("{\"w\":" ENTRY("F32", "[4]", "[0,16]") "}", 8,
              "tensor 'w': data_offsets [0, 16] end past the data buffer (8 bytes");
}

Test(st_parse, byte_count_not_numel_times_size) {
  size_t len;
  unsigned char *b = mk("{\"enc.0.attn.q.weight\":" ENTRY("F32", "[5,6]", "[0,100]") "}", zeros,
                        200, &len);
  RtSafetensors *st = (RtSafetensors *)&len;
  char err[512];
  cr_assert_neq(rt_st_parse(b, len, "w.safetensors", &st, err, sizeof err), 0);
  cr_assert_null(st);
  cr_assert_str_eq(err, "w.safetensors: tensor 'enc.0.attn.q.weight': data_offsets [0, 100] but "
                        "shape [5, 6] of F32 needs 120 bytes");
  free(b);
  expect_fail("{\"s\":" ENTRY("I64", "[]", "[0,4]") "}", 8, "shape [] of I64 needs 8 bytes");
}

Test(st_parse, tensors_overlapping) {
  expect_fail("{\"a\":" ENTRY("F32", "[2]", "[0,8]") ",\"b\":" ENTRY("F32", "[2]", "[4,12]") "}",
              12, "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  /* b lies inside a large earlier range, after a small one. */
  expect_fail("{\"a\":" ENTRY("U8", "[100]", "[0,100]") ",\"c\":" ENTRY("U8", "[1]", "[1,2]")
              ",\"b\":" ENTRY("U8", "[2]", "[50,52]") "}",
              100, "tensors 'a' [0, 100] and 'c' [1, 2] overlap");
}

Test(st_parse, duplicate_names) {
  expect_fail("{\"a\":" ENTRY("F32", "[1]", "[0,4]") ",\"a\":" ENTRY("F32", "[1]", "[4,8]") "}", 8,
              "duplicate tensor name 'a'");
  expect_fail("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate \"__metadata__\"");
  expect_fail("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate __metadata__ key 'k'");
}

Test(st_parse, metadata_non_string_value) {
  expect_fail("{\"__metadata__\":{\"format\":\"pt\",\"n\":1}}", 0,
              "__metadata__ value for key 'n' is a number, not a string");
  expect_fail("{\"__metadata__\":{\"n\":{\"x\":\"y\"}}}", 0,
              "__metadata__ value for key 'n' is an object, not a string");
  expect_fail("{\"__metadata__\":[]}", 0, "__metadata__ must be an object of strings, found an array");
}

/* ---- rt_st_open on real files ---- */

TestSuite(st_open, .init = make_tmpdir, .fini = remove_tmpdir);

Test(st_open, nonexistent_path) {
  RtSafetensors *st = (RtSafetensors *)&st;
  char err[512];
  char path[128];
  snprintf(path, sizeof path, "%s/missing.safetensors", tmpdir);
  cr_assert_neq(rt_st_open(path, &st, err, sizeof err), 0);
  cr_assert_null(st);
  char want[256];
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  cr_assert_str_eq(err, want);
}

Test(st_open, directory) {
  RtSafetensors *st;
  char err[512];
  cr_assert_neq(rt_st_open(tmpdir, &st, err, sizeof err), 0);
  cr_assert(strstr(err, "is a directory"), "%s", err);
}

Test(st_open, empty_and_truncated_files) {
  char path[128], err[512];
  RtSafetensors *st;
  snprintf(path, sizeof path, "%s/e.safetensors", tmpdir);
  fclose(fopen(path, "wb"));
  cr_assert_neq(rt_st_open(path, &st, err, sizeof err), 0);
  cr_assert(strstr(err, ": file is empty") && strstr(err, path), "%s", err);

  float f[4] = {1, 2, 3, 4};
  RtStWrite w = {.name = "enc.w", .dtype = RT_F32, .rank = 2, .shape = {2, 2}, .data = f};
  snprintf(path, sizeof path, "%s/t.safetensors", tmpdir);
  cr_assert_eq(rt_st_write(path, &w, 1, NULL, 0, err, sizeof err), 0, "%s", err);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(truncate(path, sb.st_size - 3), 0);
  cr_assert_neq(rt_st_open(path, &st, err, sizeof err), 0);
  char want[256];
  snprintf(want, sizeof want, "%s: tensor 'enc.w': data_offsets [0, 16] end past the data buffer (13 bytes", path);
  cr_assert(strstr(err, want), "%s", err);

  cr_assert_eq(truncate(path, 5), 0);
  cr_assert_neq(rt_st_open(path, &st, err, sizeof err), 0);
  cr_assert(strstr(err, "file too short (5 bytes"), "%s", err);

  cr_assert_eq(truncate(path, 20), 0);
  cr_assert_neq(rt_st_open(path, &st, err, sizeof err), 0);
  cr_assert(strstr(err, "runs past the end of the file (12 bytes"), "%s", err);
}
