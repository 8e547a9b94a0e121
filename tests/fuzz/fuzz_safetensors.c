/* tests/fuzz/fuzz_safetensors.c — fuzz harness for rt_st_parse.
 *
 * Any input must either be refused with a message ("fuzz: ...") and no
 * handle, or be accepted with a handle whose documented invariants hold:
 * tensors in offset order inside the input, unique and findable names,
 * nbytes == numel * dtype size, and every tensor readable through
 * rt_st_read_f32 / rt_st_read_i32 (whichever fits its dtype). A violated
 * invariant aborts, which the replay driver and libFuzzer report as a crash. */
#include "runtime/rt_safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOUCH_ELEMS ((int64_t)1 << 20) /* read tensors up to 4 MiB of f32 */

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_safetensors: invariant violated: %s\n", what);
    abort();
  }
}

static int is_float(RtDtype dt) {
  switch (dt) {
  case RT_F32:
  case RT_F16:
  case RT_BF16:
  case RT_F64: return 1;
  case RT_I64:
  case RT_I32:
  case RT_I16:
  case RT_I8:
  case RT_U8:
  case RT_BOOL:
  case RT_DTYPE_COUNT: return 0;
  }
  return 0;
}

static void touch(const RtStTensor *t) {
  char err[512];
  int64_t n = rt_st_numel(t);
  if (n > MAX_TOUCH_ELEMS) return;
  if (is_float(t->dtype)) {
    float *f = malloc((size_t)n * sizeof *f + 1);
    check(f != NULL, "malloc");
    check(rt_st_read_f32(t, f, err, sizeof err) == 0, "float tensor readable as f32");
    volatile float sink = 0;
    for (int64_t i = 0; i < n; i++) sink += f[i];
    (void)sink;
    int32_t dummy;
    err[0] = '\0';
    check(rt_st_read_i32(t, &dummy, 0, 1, err, sizeof err) != 0 && err[0],
          "float tensor refused by read_i32 with a message");
    free(f);
  } else {
    int32_t *v = malloc((size_t)n * sizeof *v + 1);
    check(v != NULL, "malloc");
    err[0] = '\0';
    if (rt_st_read_i32(t, v, INT32_MIN, INT32_MAX, err, sizeof err) != 0) {
      /* Only values beyond int32 or bad BOOL bytes may be refused. */
      check(err[0] && (t->dtype == RT_I64 || t->dtype == RT_BOOL), "int read refused wrongly");
    }
    err[0] = '\0';
    if (rt_st_read_i32(t, v, 0, 3, err, sizeof err) != 0)
      check(strncmp(err, "tensor '", 8) == 0, "range message names the tensor");
    float dummy;
    check(rt_st_read_f32(t, &dummy, err, sizeof err) != 0, "int tensor refused by read_f32");
    free(v);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  RtSafetensors *st = NULL;
  char err[512] = "";
  if (rt_st_parse(data, size, "fuzz", &st, err, sizeof err) != 0) {
    check(st == NULL, "no handle on failure");
    check(strncmp(err, "fuzz: ", 6) == 0 && err[6] != '\0', "failure message names the input");
    return 0;
  }
  check(st != NULL, "handle on success");
  int n = rt_st_count(st);
  const uint8_t *prev_end = NULL;
  for (int i = 0; i < n; i++) {
    const RtStTensor *t = rt_st_get(st, i);
    check(t != NULL && t->name != NULL, "rt_st_get");
    check(rt_st_find(st, t->name) == t, "rt_st_find finds the tensor");
    check(t->rank >= 0 && t->rank <= RT_ST_MAX_RANK, "rank");
    check((uint64_t)rt_st_numel(t) * rt_dtype_size(t->dtype) == t->nbytes, "nbytes");
    const uint8_t *p = t->data;
    check(p >= data + 8 && p + t->nbytes <= data + size, "data inside the input");
    if (t->nbytes) {
      check(prev_end == NULL || p >= prev_end, "offset order, no overlap");
      prev_end = p + t->nbytes;
    }
    touch(t);
  }
  check(rt_st_get(st, n) == NULL, "rt_st_get past the end");
  (void)rt_st_metadata(st, "format");
  rt_st_close(st);
  return 0;
}
