/* runtime/rt_io.c — reading and checking model inputs (see rt_io.h).
 *
 * Invariant: nothing reaches a kernel unchecked: ids are in range, shapes
 * within the declared maxima, and every sequence has a real token (a fully
 * masked attention row has no meaning). */
#include "runtime/rt_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void shape_str(const RtStTensor *t, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < t->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

int rt_io_read_ids(const RtSafetensors *st, const char *file_label,
                   const char *name, int64_t vocab, int64_t max_b,
                   int64_t max_len, int32_t **ids, int64_t *b, int64_t *len,
                   char *err, size_t errlen) {
  const RtStTensor *t = rt_st_find(st, name);
  char sh[128];
  if (!t) {
    snprintf(err, errlen, "%s: missing input '%s' (token ids [batch, length])", file_label, name);
    return 1;
  }
  shape_str(t, sh, sizeof sh);
  if (t->rank != 2) {
    snprintf(err, errlen, "%s: input '%s' has shape %s; expected [batch, length]", file_label, name, sh);
    return 1;
  }
  if (t->shape[0] < 1 || t->shape[0] > max_b) {
    snprintf(err, errlen, "%s: input '%s' has batch %lld; the model accepts 1..%lld (max_batch)",
             file_label, name, (long long)t->shape[0], (long long)max_b);
    return 1;
  }
  if (t->shape[1] < 1 || t->shape[1] > max_len) {
    snprintf(err, errlen, "%s: input '%s' has length %lld; the model accepts 1..%lld (max_len)",
             file_label, name, (long long)t->shape[1], (long long)max_len);
    return 1;
  }
  int32_t *buf = malloc((size_t)(t->shape[0] * t->shape[1]) * sizeof *buf);
  if (!buf) {
    snprintf(err, errlen, "%s: out of memory", file_label);
    return 1;
  }
  char e2[512];
  if (rt_st_read_i32(t, buf, 0, vocab - 1, e2, sizeof e2)) {
    snprintf(err, errlen, "%s: token ids must be in [0, %lld): %s", file_label,
             (long long)vocab, e2);
    free(buf);
    return 1;
  }
  *ids = buf;
  *b = t->shape[0];
  *len = t->shape[1];
  return 0;
}

int rt_io_key_mask(const RtSafetensors *st, const char *file_label,
                   const char *mask_name, const char *lengths_name,
                   const int32_t *ids, int64_t b, int64_t len, int64_t pad_id,
                   uint8_t *out, char *err, size_t errlen) {
  const RtStTensor *m = mask_name ? rt_st_find(st, mask_name) : NULL;
  const RtStTensor *l = lengths_name ? rt_st_find(st, lengths_name) : NULL;
  char e2[512], sh[128];
  if (m && l) {
    snprintf(err, errlen, "%s: give either '%s' or '%s', not both", file_label,
             mask_name, lengths_name);
    return 1;
  }
  if (m) {
    shape_str(m, sh, sizeof sh);
    if (m->rank != 2 || m->shape[0] != b || m->shape[1] != len) {
      snprintf(err, errlen, "%s: input '%s' has shape %s; expected [%lld,%lld] like the token ids",
               file_label, mask_name, sh, (long long)b, (long long)len);
      return 1;
    }
    int32_t *v = malloc((size_t)(b * len) * sizeof *v);
    if (!v) {
      snprintf(err, errlen, "%s: out of memory", file_label);
      return 1;
    }
    if (rt_st_read_i32(m, v, 0, 1, e2, sizeof e2)) {
      snprintf(err, errlen, "%s: mask values must be 0 or 1: %s", file_label, e2);
      free(v);
      return 1;
    }
    for (int64_t i = 0; i < b * len; i++) out[i] = (uint8_t)v[i];
    free(v);
  } else if (l) {
    shape_str(l, sh, sizeof sh);
    if (l->rank != 1 || l->shape[0] != b) {
      snprintf(err, errlen, "%s: input '%s' has shape %s; expected [%lld] (one length per sequence)",
               file_label, lengths_name, sh, (long long)b);
      return 1;
    }
    int32_t *v = malloc((size_t)b * sizeof *v);
    if (!v) {
      snprintf(err, errlen, "%s: out of memory", file_label);
      return 1;
    }
    if (rt_st_read_i32(l, v, 1, len, e2, sizeof e2)) {
      snprintf(err, errlen, "%s: lengths must be in [1, %lld]: %s", file_label,
               (long long)len, e2);
      free(v);
      return 1;
    }
    for (int64_t i = 0; i < b; i++)
      for (int64_t j = 0; j < len; j++) out[i * len + j] = j < v[i];
    free(v);
  } else if (pad_id >= 0) {
    for (int64_t i = 0; i < b * len; i++) out[i] = ids[i] != pad_id;
  } else {
    memset(out, 1, (size_t)(b * len));
  }
  for (int64_t i = 0; i < b; i++) {
    int any = 0;
    for (int64_t j = 0; j < len; j++) any |= out[i * len + j];
    if (!any) {
      snprintf(err, errlen, "%s: sequence %lld has no real token (all padding)",
               file_label, (long long)i);
      return 1;
    }
  }
  return 0;
}
