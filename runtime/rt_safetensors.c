/* runtime/rt_safetensors.c — reading (mmap, validated) and writing
 * (atomic, sorted) safetensors files. Depends on libc (POSIX) only.
 *
 * Invariants of an RtSafetensors handed out by rt_st_open / rt_st_parse:
 *   - every tensor has a known dtype, rank <= RT_ST_MAX_RANK, dims >= 0 whose
 *     product (ignoring zero dims) is at most 2^53, and
 *     nbytes == numel * dtype size;
 *   - its byte range [BEGIN, END) lies inside the data buffer and overlaps
 *     no other non-empty range; names are unique and contain no NUL;
 *   - entries[] is sorted by (BEGIN, END, name); by_name[] by name (strcmp),
 *     meta[] by key; every string is valid UTF-8 and owned by the handle.
 * Tensor data is never dereferenced as a wider type: values are assembled
 * from little-endian bytes, so unaligned data and big-endian hosts work. */
#define _DEFAULT_SOURCE /* madvise, MADV_DONTNEED (rt_st_release, rt_st_drop) */
#include "rt_safetensors.h"

#include "rt_file.h"
#include "rt_json.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_HEADER_MAX ((uint64_t)100 << 20) /* 100 MiB, as the reference reader */
#define ST_MAX_EXACT ((uint64_t)1 << 53)    /* largest integer a JSON double holds */

/* ---- dtypes ---- */

const char *rt_dtype_name(RtDtype dt) {
  switch (dt) {
  case RT_F32: return "F32";
  case RT_F16: return "F16";
  case RT_BF16: return "BF16";
  case RT_F64: return "F64";
  case RT_I64: return "I64";
  case RT_I32: return "I32";
  case RT_I16: return "I16";
  case RT_I8: return "I8";
  case RT_U8: return "U8";
  case RT_BOOL: return "BOOL";
  case RT_DTYPE_COUNT: break;
  }
  return "?";
}

size_t rt_dtype_size(RtDtype dt) {
  switch (dt) {
  case RT_F64:
  case RT_I64: return 8;
  case RT_F32:
  case RT_I32: return 4;
  case RT_F16:
  case RT_BF16:
  case RT_I16: return 2;
  case RT_I8:
  case RT_U8:
  case RT_BOOL: return 1;
  case RT_DTYPE_COUNT: break;
  }
  return 0;
}

static int dtype_lookup(const char *s, size_t len, RtDtype *out) {
  for (int i = 0; i < RT_DTYPE_COUNT; i++) {
    const char *name = rt_dtype_name((RtDtype)i);
    if (strlen(name) == len && memcmp(name, s, len) == 0) {
      *out = (RtDtype)i;
      return 0;
    }
  }
  return -1;
}

/* ---- byte order ---- */

/* The widths tensors use written out, so the compiler makes each one
 * load (plus a byte swap on a big-endian host): as a loop over k it stayed
 * a loop of byte loads, and reading bert-base's 110M f32 weights took 14%
 * of a `tfmc run`'s samples. */
static uint64_t load_le(const unsigned char *p, size_t k) {
  uint64_t lo;
  switch (k) {
  case 2: return (uint64_t)p[0] | (uint64_t)p[1] << 8;
  case 4:
  case 8:
    lo = (uint64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                    (uint32_t)p[3] << 24);
    if (k == 4) return lo;
    return lo | (uint64_t)((uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                           (uint32_t)p[7] << 24)
                    << 32;
  default: break;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < k; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void store_le(unsigned char *p, uint64_t v, size_t k) {
  for (size_t i = 0; i < k; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- errors ---- */

typedef struct StCtx {
  const char *label;
  char *err;
  size_t errlen;
} StCtx;

/* Writes "LABEL: message" into the caller's buffer; returns -1. */
static int st_fail(const StCtx *c, const char *fmt, ...) {
  if (!c->err || c->errlen == 0) return -1;
  int k = snprintf(c->err, c->errlen, "%s: ", c->label);
  if (k < 0) k = 0;
  if ((size_t)k < c->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Without a label (rt_st_read_*: a tensor does not know its file). */
static int plain_fail(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

static void fmt_shape(char *buf, size_t n, const int64_t *shape, int rank) {
  size_t k = 0;
  buf[0] = '\0';
  k += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* ---- the handle ---- */

typedef struct StEntry {
  RtStTensor t; /* first member: rt_st_get returns &entry->t */
  uint64_t begin, end;
} StEntry;

struct RtSafetensors {
  void *map; /* mmapped file (rt_st_open) or NULL (rt_st_parse) */
  size_t map_len;
  StEntry *entries; /* sorted by offset */
  int n, cap;
  const StEntry **by_name; /* sorted by name */
  char **meta;             /* key, value, key, value, ... sorted by key */
  int n_meta, meta_cap;
};

void rt_st_close(RtSafetensors *st) {
  if (!st) return;
  for (int i = 0; i < st->n; i++) free((char *)st->entries[i].t.name);
  for (int i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
  free(st->entries);
  free(st->by_name);
  free(st->meta);
  if (st->map) munmap(st->map, st->map_len);
  free(st);
}

void rt_st_release(RtSafetensors *st) {
#ifdef MADV_DONTNEED
  if (st && st->map) madvise(st->map, st->map_len, MADV_DONTNEED);
#else
  (void)st;
#endif
}

void rt_st_drop(const RtSafetensors *st, const void *p, size_t bytes) {
#ifdef MADV_DONTNEED
  if (!st || !st->map || !p || !bytes) return;
  uintptr_t base = (uintptr_t)st->map, lo = (uintptr_t)p, hi = lo + bytes;
  if (lo < base || hi < lo || hi > base + st->map_len) return;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  lo = (lo + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page; /* whole pages inside */
  hi = hi / (uintptr_t)page * (uintptr_t)page;
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
  (void)st, (void)p, (void)bytes;
#endif
}

static char *dup_bytes(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* ---- header parsing ---- */

typedef struct StParse {
  StCtx c;
  RtJsonReader r;
  RtSafetensors *st;
  const unsigned char *data; /* the byte buffer after the header */
  uint64_t data_len;
} StParse;

static int json_fail(StParse *p) {
  return st_fail(&p->c, "invalid header JSON at byte %zu of the header: %s", p->r.err_pos,
                 p->r.msg);
}

#define JSON(call)                                                                                 \
  do {                                                                                             \
    if (call) return json_fail(p);                                                                 \
  } while (0)

/* Reads an exact non-negative integer (at most 2^53); `what` names it. */
static int read_uint(StParse *p, const char *name, const char *what, uint64_t *out) {
  RtJsonType t;
  RtJsonNumber num;
  JSON(rt_json_peek(&p->r, &t));
  if (t != RT_JSON_NUMBER)
    return st_fail(&p->c, "tensor '%s': %s must be an integer, found %s", name, what,
                   rt_json_type_name(t));
  JSON(rt_json_read_number(&p->r, &num));
  int w = (int)(num.len > 40 ? 40 : num.len);
  if (num.negative)
    return st_fail(&p->c, "tensor '%s': %s is negative (%.*s)", name, what, w, num.text);
  if (!num.integral)
    return st_fail(&p->c, "tensor '%s': %s is not an integer (%.*s)", name, what, w, num.text);
  if (!num.exact)
    return st_fail(&p->c, "tensor '%s': %s is too large (%.*s%s; the limit is 2^53)", name, what,
                   w, num.text, num.len > 40 ? "..." : "");
  *out = num.magnitude;
  return 0;
}

static int parse_shape(StParse *p, StEntry *e) {
  const char *name = e->t.name;
  RtJsonType t;
  int done;
  JSON(rt_json_peek(&p->r, &t));
  if (t != RT_JSON_ARRAY)
    return st_fail(&p->c, "tensor '%s': shape must be an array of integers, found %s", name,
                   rt_json_type_name(t));
  JSON(rt_json_array_begin(&p->r));
  for (;;) {
    JSON(rt_json_array_next(&p->r, &done));
    if (done) return 0;
    if (e->t.rank == RT_ST_MAX_RANK)
      return st_fail(&p->c, "tensor '%s': shape has rank > %d (the limit)", name, RT_ST_MAX_RANK);
    char what[32];
    uint64_t d;
    snprintf(what, sizeof what, "shape dim %d", e->t.rank);
    if (read_uint(p, name, what, &d)) return -1;
    e->t.shape[e->t.rank++] = (int64_t)d;
  }
}

static int parse_offsets(StParse *p, StEntry *e) {
  const char *name = e->t.name;
  RtJsonType t;
  int done, k = 0;
  uint64_t v[2];
  JSON(rt_json_peek(&p->r, &t));
  if (t != RT_JSON_ARRAY)
    return st_fail(&p->c, "tensor '%s': data_offsets must be [BEGIN, END], found %s", name,
                   rt_json_type_name(t));
  JSON(rt_json_array_begin(&p->r));
  for (;;) {
    JSON(rt_json_array_next(&p->r, &done));
    if (done) break;
    if (k == 2)
      return st_fail(&p->c, "tensor '%s': data_offsets has more than two elements", name);
    if (read_uint(p, name, k ? "data_offsets END" : "data_offsets BEGIN", &v[k])) return -1;
    k++;
  }
  if (k != 2)
    return st_fail(&p->c, "tensor '%s': data_offsets has %d element%s, expected [BEGIN, END]",
                   name, k, k == 1 ? "" : "s");
  e->begin = v[0];
  e->end = v[1];
  return 0;
}

/* Checks one parsed entry against the buffer: counts and byte ranges. */
static int check_entry(StParse *p, StEntry *e) {
  const char *name = e->t.name;
  char shp[200];
  uint64_t numel = 1, nonzero = 1;
  for (int i = 0; i < e->t.rank; i++) {
    uint64_t d = (uint64_t)e->t.shape[i];
    numel *= d; /* cannot overflow while nonzero stays <= 2^53 */
    if (d == 0) continue;
    if (nonzero > ST_MAX_EXACT / d) {
      fmt_shape(shp, sizeof shp, e->t.shape, e->t.rank);
      return st_fail(&p->c, "tensor '%s': shape %s: element count overflows (limit 2^53)", name,
                     shp);
    }
    nonzero *= d;
  }
  uint64_t need = numel * rt_dtype_size(e->t.dtype); /* <= 2^56 */
  if (e->begin > e->end)
    return st_fail(&p->c, "tensor '%s': data_offsets [%llu, %llu] are reversed (BEGIN > END)",
                   name, (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end - e->begin != need) {
    fmt_shape(shp, sizeof shp, e->t.shape, e->t.rank);
    return st_fail(&p->c, "tensor '%s': data_offsets [%llu, %llu] but shape %s of %s needs %llu bytes",
                   name, (unsigned long long)e->begin, (unsigned long long)e->end, shp,
                   rt_dtype_name(e->t.dtype), (unsigned long long)need);
  }
  if (e->end > p->data_len)
    return st_fail(&p->c,
                   "tensor '%s': data_offsets [%llu, %llu] end past the data buffer (%llu bytes; "
                   "file truncated?)",
                   name, (unsigned long long)e->begin, (unsigned long long)e->end,
                   (unsigned long long)p->data_len);
  e->t.data = p->data + e->begin;
  e->t.nbytes = (size_t)need;
  return 0;
}

static int parse_entry(StParse *p, const char *key, size_t klen) {
  RtSafetensors *st = p->st;
  RtJsonType t;
  int done, have_dtype = 0, have_shape = 0, have_offsets = 0;
  if (memchr(key, '\0', klen))
    return st_fail(&p->c, "tensor name '%s...' contains a NUL character", key);
  if (st->n == st->cap) {
    int nc = st->cap ? 2 * st->cap : 16;
    StEntry *ne = realloc(st->entries, (size_t)nc * sizeof *ne);
    if (!ne) return st_fail(&p->c, "out of memory");
    st->entries = ne;
    st->cap = nc;
  }
  StEntry *e = &st->entries[st->n];
  memset(e, 0, sizeof *e);
  e->t.name = dup_bytes(key, klen);
  if (!e->t.name) return st_fail(&p->c, "out of memory");
  st->n++; /* owned by st from here on */
  const char *name = e->t.name;

  JSON(rt_json_peek(&p->r, &t));
  if (t != RT_JSON_OBJECT)
    return st_fail(&p->c, "tensor '%s': entry is %s, not an object", name, rt_json_type_name(t));
  JSON(rt_json_object_begin(&p->r));
  for (;;) {
    const char *k;
    size_t kl;
    JSON(rt_json_object_next(&p->r, &k, &kl, &done));
    if (done) break;
    if (kl == 5 && memcmp(k, "dtype", 5) == 0) {
      const char *s;
      size_t sl;
      if (have_dtype++) return st_fail(&p->c, "tensor '%s': duplicate key \"dtype\"", name);
      JSON(rt_json_peek(&p->r, &t));
      if (t != RT_JSON_STRING)
        return st_fail(&p->c, "tensor '%s': dtype must be a string, found %s", name,
                       rt_json_type_name(t));
      JSON(rt_json_read_string(&p->r, &s, &sl));
      if (dtype_lookup(s, sl, &e->t.dtype))
        return st_fail(&p->c,
                       "tensor '%s': unknown or unsupported dtype '%.*s' (tfmc reads F32, F16, "
                       "BF16, F64, I64, I32, I16, I8, U8, BOOL)",
                       name, (int)(sl > 40 ? 40 : sl), s);
    } else if (kl == 5 && memcmp(k, "shape", 5) == 0) {
      if (have_shape++) return st_fail(&p->c, "tensor '%s': duplicate key \"shape\"", name);
      if (parse_shape(p, e)) return -1;
    } else if (kl == 12 && memcmp(k, "data_offsets", 12) == 0) {
      if (have_offsets++) return st_fail(&p->c, "tensor '%s': duplicate key \"data_offsets\"", name);
      if (parse_offsets(p, e)) return -1;
    } else {
      JSON(rt_json_skip_value(&p->r)); /* unknown keys are ignored, as the reference does */
    }
  }
  const char *missing = !have_dtype ? "dtype" : !have_shape ? "shape" : !have_offsets ? "data_offsets" : NULL;
  if (missing) return st_fail(&p->c, "tensor '%s': missing \"%s\"", name, missing);
  return check_entry(p, e);
}

static int parse_metadata(StParse *p) {
  RtSafetensors *st = p->st;
  RtJsonType t;
  int done;
  JSON(rt_json_peek(&p->r, &t));
  if (t != RT_JSON_OBJECT)
    return st_fail(&p->c, "__metadata__ must be an object of strings, found %s",
                   rt_json_type_name(t));
  JSON(rt_json_object_begin(&p->r));
  for (;;) {
    const char *k, *v;
    size_t kl, vl;
    JSON(rt_json_object_next(&p->r, &k, &kl, &done));
    if (done) return 0;
    if (memchr(k, '\0', kl))
      return st_fail(&p->c, "__metadata__ key '%s...' contains a NUL character", k);
    JSON(rt_json_peek(&p->r, &t));
    if (t != RT_JSON_STRING)
      return st_fail(&p->c, "__metadata__ value for key '%s' is %s, not a string", k,
                     rt_json_type_name(t));
    JSON(rt_json_read_string(&p->r, &v, &vl));
    if (memchr(v, '\0', vl))
      return st_fail(&p->c, "__metadata__ value for key '%s' contains a NUL character", k);
    if (st->n_meta == st->meta_cap) {
      int nc = st->meta_cap ? 2 * st->meta_cap : 8;
      char **nm = realloc(st->meta, (size_t)nc * 2 * sizeof *nm);
      if (!nm) return st_fail(&p->c, "out of memory");
      st->meta = nm;
      st->meta_cap = nc;
    }
    char *kd = dup_bytes(k, kl), *vd = dup_bytes(v, vl);
    if (!kd || !vd) {
      free(kd);
      free(vd);
      return st_fail(&p->c, "out of memory");
    }
    st->meta[2 * st->n_meta] = kd;
    st->meta[2 * st->n_meta + 1] = vd;
    st->n_meta++;
  }
}

static int parse_header(StParse *p) {
  RtJsonType t;
  int done, have_meta = 0;
  JSON(rt_json_peek(&p->r, &t));
  if (t != RT_JSON_OBJECT)
    return st_fail(&p->c, "header JSON is %s, not an object of tensors", rt_json_type_name(t));
  JSON(rt_json_object_begin(&p->r));
  for (;;) {
    const char *k;
    size_t kl;
    JSON(rt_json_object_next(&p->r, &k, &kl, &done));
    if (done) break;
    if (kl == 12 && memcmp(k, "__metadata__", 12) == 0) {
      if (have_meta++) return st_fail(&p->c, "duplicate \"__metadata__\"");
      if (parse_metadata(p)) return -1;
    } else if (parse_entry(p, k, kl)) {
      return -1;
    }
  }
  JSON(rt_json_finish(&p->r));
  return 0;
}

#undef JSON

/* ---- whole-file checks ---- */

static int cmp_offset(const void *a, const void *b) {
  const StEntry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->t.name, y->t.name);
}

static int cmp_name(const void *a, const void *b) {
  const StEntry *const *x = a, *const *y = b;
  return strcmp((*x)->t.name, (*y)->t.name);
}

static int cmp_meta(const void *a, const void *b) {
  char *const *x = a, *const *y = b;
  return strcmp(x[0], y[0]);
}

static int check_all(StParse *p) {
  RtSafetensors *st = p->st;
  if (st->n > 0) {
    qsort(st->entries, (size_t)st->n, sizeof *st->entries, cmp_offset);
    st->by_name = malloc((size_t)st->n * sizeof *st->by_name);
    if (!st->by_name) return st_fail(&p->c, "out of memory");
    for (int i = 0; i < st->n; i++) st->by_name[i] = &st->entries[i];
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_name);
  }
  for (int i = 1; i < st->n; i++)
    if (strcmp(st->by_name[i - 1]->t.name, st->by_name[i]->t.name) == 0)
      return st_fail(&p->c, "duplicate tensor name '%s'", st->by_name[i]->t.name);
  if (st->n_meta > 0) qsort(st->meta, (size_t)st->n_meta, 2 * sizeof *st->meta, cmp_meta);
  for (int i = 1; i < st->n_meta; i++)
    if (strcmp(st->meta[2 * i - 2], st->meta[2 * i]) == 0)
      return st_fail(&p->c, "duplicate __metadata__ key '%s'", st->meta[2 * i]);
  /* Sorted by BEGIN, a non-empty range overlaps an earlier one iff it starts
   * before the furthest END seen so far. Empty ranges overlap nothing. */
  const StEntry *reach = NULL;
  for (int i = 0; i < st->n; i++) {
    const StEntry *e = &st->entries[i];
    if (e->begin == e->end) continue;
    if (reach && e->begin < reach->end)
      return st_fail(&p->c, "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                     reach->t.name, (unsigned long long)reach->begin,
                     (unsigned long long)reach->end, e->t.name, (unsigned long long)e->begin,
                     (unsigned long long)e->end);
    if (!reach || e->end > reach->end) reach = e;
  }
  return 0;
}

/* Validates buf[0..len) into a new handle; map (may be NULL) becomes owned by
 * the handle, and is released on failure too. */
static int st_parse(const void *buf, size_t len, const StCtx *c, void *map, size_t map_len,
                    RtSafetensors **out) {
  *out = NULL;
  RtSafetensors *st = calloc(1, sizeof *st);
  if (!st) {
    if (map) munmap(map, map_len);
    return st_fail(c, "out of memory");
  }
  st->map = map;
  st->map_len = map_len;
  StParse p = {.c = *c, .st = st};
  const unsigned char *b = buf;
  int rc = -1;
  if (len == 0) {
    st_fail(c, "file is empty (a safetensors file starts with an 8-byte header length)");
    goto done;
  }
  if (len < 8) {
    st_fail(c, "file too short (%zu bytes; a safetensors file starts with an 8-byte header length)",
            len);
    goto done;
  }
  uint64_t n = load_le(b, 8);
  if (n > ST_HEADER_MAX) {
    st_fail(c, "header length %llu is absurd (the limit is 100 MiB); not a safetensors file?",
            (unsigned long long)n);
    goto done;
  }
  if (n > len - 8) {
    st_fail(c, "header length %llu runs past the end of the file (%zu bytes follow the length)",
            (unsigned long long)n, len - 8);
    goto done;
  }
  size_t bad;
  if (!rt_utf8_valid(b + 8, (size_t)n, &bad)) {
    st_fail(c, "header is not valid UTF-8 (byte %zu of the header)", bad);
    goto done;
  }
  p.data = b + 8 + n;
  p.data_len = len - 8 - n;
  rt_json_reader_init(&p.r, (const char *)b + 8, (size_t)n);
  rc = parse_header(&p);
  rt_json_reader_free(&p.r);
  if (rc == 0) rc = check_all(&p);
done:
  if (rc) {
    rt_st_close(st);
    return -1;
  }
  *out = st;
  return 0;
}

int rt_st_parse(const void *buf, size_t len, const char *label, RtSafetensors **out, char *err,
                size_t errlen) {
  StCtx c = {label ? label : "<buffer>", err, errlen};
  if (!out) return st_fail(&c, "internal: rt_st_parse without an output handle");
  if (!buf && len) {
    *out = NULL;
    return st_fail(&c, "internal: NULL buffer");
  }
  return st_parse(buf ? buf : "", len, &c, NULL, 0, out);
}

int rt_st_open(const char *path, RtSafetensors **out, char *err, size_t errlen) {
  StCtx c = {path ? path : "(null)", err, errlen};
  if (!out) return st_fail(&c, "internal: rt_st_open without an output handle");
  *out = NULL;
  if (!path) return st_fail(&c, "internal: NULL path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st_fail(&c, "cannot open: %s", strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return st_fail(&c, "cannot stat: %s", strerror(e));
  }
  if (S_ISDIR(sb.st_mode)) {
    close(fd);
    return st_fail(&c, "is a directory, not a safetensors file");
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return st_fail(&c, "not a regular file");
  }
  if (sb.st_size < 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
    close(fd);
    return st_fail(&c, "file too large to map");
  }
  size_t len = (size_t)sb.st_size;
  void *map = NULL;
  if (len > 0) {
    map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return st_fail(&c, "cannot map: %s", strerror(e));
    }
  }
  close(fd); /* the mapping stays valid */
  return st_parse(map ? map : "", len, &c, map, len, out);
}

/* ---- queries ---- */

int rt_st_count(const RtSafetensors *st) {
  return st ? st->n : 0;
}

const RtStTensor *rt_st_get(const RtSafetensors *st, int i) {
  if (!st || i < 0 || i >= st->n) return NULL;
  return &st->entries[i].t;
}

const RtStTensor *rt_st_find(const RtSafetensors *st, const char *name) {
  if (!st || !name) return NULL;
  int lo = 0, hi = st->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(name, st->by_name[mid]->t.name);
    if (c == 0) return &st->by_name[mid]->t;
    if (c < 0) hi = mid - 1;
    else lo = mid + 1;
  }
  return NULL;
}

const char *rt_st_metadata(const RtSafetensors *st, const char *key) {
  if (!st || !key) return NULL;
  int lo = 0, hi = st->n_meta - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(key, st->meta[2 * mid]);
    if (c == 0) return st->meta[2 * mid + 1];
    if (c < 0) hi = mid - 1;
    else lo = mid + 1;
  }
  return NULL;
}

int64_t rt_st_numel(const RtStTensor *t) {
  if (!t) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->shape[i]; /* validated: <= 2^53 */
  return n;
}

/* ---- conversion ---- */

static float bits_to_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals normalised,
 * infinities kept, NaN payloads kept in the top mantissa bits). */
static float f16_to_f32(uint32_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* mant * 2^-24: shift the leading 1 up to bit 10 */
      uint32_t e = 113; /* biased exponent of 2^-14, less one per shift */
      while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
      }
      bits = sign | (e << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return bits_to_f32(bits);
}

/* binary64 -> binary32 with round-to-nearest; out-of-range values become
 * +-inf explicitly (a plain cast of them is undefined in ISO C). */
static float f64_to_f32(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  const double overflow = 0x1.ffffffp127; /* FLT_MAX + half an ulp: rounds to inf */
  if (d >= overflow) return bits_to_f32(0x7F800000u);
  if (d <= -overflow) return bits_to_f32(0xFF800000u);
  return (float)d;
}

static int check_tensor(const RtStTensor *t, char *err, size_t errlen) {
  if (!t) return plain_fail(err, errlen, "internal: NULL tensor");
  if ((unsigned)t->dtype >= RT_DTYPE_COUNT || t->rank < 0 || t->rank > RT_ST_MAX_RANK ||
      (uint64_t)rt_st_numel(t) * rt_dtype_size(t->dtype) != t->nbytes || (!t->data && t->nbytes))
    return plain_fail(err, errlen, "tensor '%s': inconsistent descriptor",
                      t->name ? t->name : "?");
  return 0;
}

/* One element of each float dtype as f32, from its little-endian bytes. */
#define ST_F32(p) bits_to_f32((uint32_t)load_le(p, 4))
#define ST_F16(p) f16_to_f32((uint32_t)load_le(p, 2))
#define ST_BF16(p) bits_to_f32((uint32_t)load_le(p, 2) << 16)
#define ST_F64(p) f64_to_f32(load_le(p, 8))

/* The block loops, per dtype (SIZE bytes, CONV) so that no switch sits in
 * them: rows [r0, r0 + nr) x columns [c0, c0 + nc) of the [rows, cols]
 * matrix at base, as dst[i, j] (row length nc) or, transposed, dst[j, i]
 * (row length nr). The transpose goes by 8 x 8 tiles, so the strided side
 * of a tile stays in L1 (32 x 32 tiles did not: at 3072 columns their 32
 * source rows share one L1 set). GPT-2's Conv1D weights (85M floats)
 * transposed element by element took ~1 s of `tfmc run`; by tiles, one
 * thread, ns per element: 768 x 3072 2.5-2.8 vs 5.6-6.1, 3072 x 768
 * 2.0-3.2 vs 5.3-6.7. */
#define ST_BLOCK(SIZE, CONV)                                                                       \
  do {                                                                                             \
    if (!transpose) {                                                                              \
      for (int64_t i = 0; i < nr; i++) {                                                           \
        const unsigned char *src = base + (size_t)((r0 + i) * cols + c0) * (SIZE);                 \
        float *d = dst + i * nc;                                                                   \
        for (int64_t j = 0; j < nc; j++) d[j] = CONV(src + (size_t)j * (SIZE));                    \
      }                                                                                            \
      break;                                                                                       \
    }                                                                                              \
    enum { T = 8 };                                                                                \
    for (int64_t j0 = 0; j0 < nc; j0 += T)                                                         \
      for (int64_t i0 = 0; i0 < nr; i0 += T) {                                                     \
        int64_t j1 = nc - j0 < T ? nc : j0 + T, i1 = nr - i0 < T ? nr : i0 + T;                    \
        for (int64_t j = j0; j < j1; j++)                                                          \
          for (int64_t i = i0; i < i1; i++)                                                        \
            dst[j * nr + i] = CONV(base + (size_t)((r0 + i) * cols + c0 + j) * (SIZE));            \
      }                                                                                            \
  } while (0)

int rt_st_read_f32_block(const RtStTensor *t, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                         int transpose, float *dst, char *err, size_t errlen) {
  if (check_tensor(t, err, errlen)) return -1;
  int64_t n = rt_st_numel(t), rows = t->rank ? t->shape[0] : 1;
  int64_t cols = rows ? n / rows : 0;
  if (r0 < 0 || nr < 0 || c0 < 0 || nc < 0 || r0 > rows - nr || c0 > cols - nc)
    return plain_fail(err, errlen,
                      "internal: rows [%lld, +%lld) x columns [%lld, +%lld) of tensor '%s' "
                      "([%lld, %lld] as a matrix)",
                      (long long)r0, (long long)nr, (long long)c0, (long long)nc, t->name,
                      (long long)rows, (long long)cols);
  if (nr && nc && !dst) return plain_fail(err, errlen, "internal: NULL destination");
  const unsigned char *base = t->data;
  switch (t->dtype) {
  case RT_F32: ST_BLOCK(4, ST_F32); return 0;
  case RT_F16: ST_BLOCK(2, ST_F16); return 0;
  case RT_BF16: ST_BLOCK(2, ST_BF16); return 0;
  case RT_F64: ST_BLOCK(8, ST_F64); return 0;
  case RT_I64:
  case RT_I32:
  case RT_I16:
  case RT_I8:
  case RT_U8:
  case RT_BOOL:
  case RT_DTYPE_COUNT: break;
  }
  return plain_fail(err, errlen,
                    "tensor '%s' has dtype %s; expected a floating-point tensor (F32, F16, BF16 "
                    "or F64)",
                    t->name, rt_dtype_name(t->dtype));
}

int rt_st_read_f32(const RtStTensor *t, float *dst, char *err, size_t errlen) {
  if (check_tensor(t, err, errlen)) return -1;
  int64_t n = rt_st_numel(t), rows = t->rank ? t->shape[0] : 1;
  return rt_st_read_f32_block(t, 0, rows, 0, rows ? n / rows : 0, 0, dst, err, errlen);
}

/* "element 7 (index [1, 3])" for the flat index i of t. */
static void fmt_element(char *buf, size_t n, const RtStTensor *t, size_t i) {
  int64_t idx[RT_ST_MAX_RANK];
  size_t rest = i;
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = t->shape[d] ? (int64_t)(rest % (uint64_t)t->shape[d]) : 0;
    rest = t->shape[d] ? rest / (size_t)t->shape[d] : 0;
  }
  int k = snprintf(buf, n, "element %zu", i);
  if (t->rank > 1 && k > 0 && (size_t)k < n) {
    char s[200];
    fmt_shape(s, sizeof s, idx, t->rank);
    snprintf(buf + k, n - (size_t)k, " (index %s)", s);
  }
}

int rt_st_read_i32(const RtStTensor *t, int32_t *dst, int64_t lo, int64_t hi, char *err,
                   size_t errlen) {
  if (check_tensor(t, err, errlen)) return -1;
  const unsigned char *p = t->data;
  size_t n = (size_t)rt_st_numel(t), size = rt_dtype_size(t->dtype);
  if (n && !dst) return plain_fail(err, errlen, "internal: NULL destination");
  switch (t->dtype) {
  case RT_I64:
  case RT_I32:
  case RT_I16:
  case RT_I8:
  case RT_U8:
  case RT_BOOL: break;
  case RT_F32:
  case RT_F16:
  case RT_BF16:
  case RT_F64:
  case RT_DTYPE_COUNT:
    return plain_fail(err, errlen,
                      "tensor '%s' has dtype %s; expected an integer tensor (I64, I32, I16, I8, "
                      "U8 or BOOL)",
                      t->name, rt_dtype_name(t->dtype));
  }
  /* The destination is int32, so the usable range is never wider than it. */
  int64_t elo = lo < INT32_MIN ? INT32_MIN : lo, ehi = hi > INT32_MAX ? INT32_MAX : hi;
  for (size_t i = 0; i < n; i++) {
    uint64_t raw = load_le(p + size * i, size);
    int64_t v;
    if (t->dtype == RT_U8 || t->dtype == RT_BOOL) {
      v = (int64_t)raw;
    } else { /* sign-extend from size bytes, without relying on conversions */
      uint64_t sign = (uint64_t)1 << (8 * size - 1);
      v = (raw & sign) ? -(int64_t)(~raw & (sign - 1)) - 1 : (int64_t)raw;
    }
    char where[260];
    if (t->dtype == RT_BOOL && v > 1) {
      fmt_element(where, sizeof where, t, i);
      return plain_fail(err, errlen, "tensor '%s': %s is byte %lld, not a BOOL (0 or 1)", t->name,
                        where, (long long)v);
    }
    if (v < elo || v > ehi) {
      fmt_element(where, sizeof where, t, i);
      return plain_fail(err, errlen, "tensor '%s': %s is %lld, outside the allowed range [%lld, %lld]",
                        t->name, where, (long long)v, (long long)lo, (long long)hi);
    }
    dst[i] = (int32_t)v;
  }
  return 0;
}

/* ---- writing ---- */

typedef struct StBuf {
  char *s;
  size_t n, cap;
  int oom;
} StBuf;

static void buf_add(StBuf *b, const char *s, size_t k) {
  if (b->oom) return;
  if (b->n + k + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + k + 1) nc *= 2;
    char *ns = realloc(b->s, nc);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
  memcpy(b->s + b->n, s, k);
  b->n += k;
  b->s[b->n] = '\0';
}

static void buf_str(StBuf *b, const char *s) {
  buf_add(b, s, strlen(s));
}

/* Appends s as a JSON string literal: quotes, backslashes and control
 * characters escaped; other bytes (valid UTF-8, checked earlier) as is. */
static void buf_json_string(StBuf *b, const char *s) {
  buf_add(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char e[8];
    switch (*p) {
    case '"': buf_add(b, "\\\"", 2); break;
    case '\\': buf_add(b, "\\\\", 2); break;
    case '\n': buf_add(b, "\\n", 2); break;
    case '\r': buf_add(b, "\\r", 2); break;
    case '\t': buf_add(b, "\\t", 2); break;
    case '\b': buf_add(b, "\\b", 2); break;
    case '\f': buf_add(b, "\\f", 2); break;
    default:
      if (*p < 0x20) {
        snprintf(e, sizeof e, "\\u%04x", *p);
        buf_add(b, e, 6);
      } else {
        buf_add(b, (const char *)p, 1);
      }
    }
  }
  buf_add(b, "\"", 1);
}

#define write_all rt_file_write_all

/* Writes count host-endian values of `size` bytes as little-endian. */
static int write_values_le(int fd, const unsigned char *src, size_t count, size_t size) {
  unsigned char chunk[1 << 16];
  size_t per = sizeof chunk / size;
  while (count > 0) {
    size_t k = count < per ? count : per;
    for (size_t i = 0; i < k; i++) {
      uint64_t v;
      switch (size) {
      case 8: memcpy(&v, src + 8 * i, 8); break;
      case 4: {
        uint32_t u;
        memcpy(&u, src + 4 * i, 4);
        v = u;
        break;
      }
      case 2: {
        uint16_t u;
        memcpy(&u, src + 2 * i, 2);
        v = u;
        break;
      }
      default: v = src[i]; break;
      }
      store_le(chunk + size * i, v, size);
    }
    if (write_all(fd, chunk, k * size)) return -1;
    src += k * size;
    count -= k;
  }
  return 0;
}

/* One tensor to write, in header order. `name` is first: cmp_str_ptr sorts it. */
typedef struct StRow {
  const char *name;
  const RtStWrite *w;
  uint64_t nbytes;
} StRow;

static int cmp_str_ptr(const void *a, const void *b) {
  const char *const *x = a, *const *y = b;
  return strcmp(*x, *y);
}

/* Checks one tensor to be written; returns its byte count in *nbytes. */
static int write_check(const StCtx *c, const RtStWrite *w, uint64_t *nbytes) {
  if (!w->name) return st_fail(c, "a tensor has no name");
  if (!rt_utf8_valid(w->name, strlen(w->name), NULL))
    return st_fail(c, "tensor name '%s' is not valid UTF-8", w->name);
  if (strcmp(w->name, "__metadata__") == 0)
    return st_fail(c, "tensor name '__metadata__' is reserved");
  if ((unsigned)w->dtype >= RT_DTYPE_COUNT)
    return st_fail(c, "tensor '%s': invalid dtype %d", w->name, (int)w->dtype);
  if (w->rank < 0 || w->rank > RT_ST_MAX_RANK)
    return st_fail(c, "tensor '%s': rank %d outside [0, %d]", w->name, w->rank, RT_ST_MAX_RANK);
  uint64_t numel = 1, nonzero = 1;
  for (int i = 0; i < w->rank; i++) {
    if (w->shape[i] < 0)
      return st_fail(c, "tensor '%s': negative dim %lld", w->name, (long long)w->shape[i]);
    uint64_t d = (uint64_t)w->shape[i];
    numel *= d;
    if (d == 0) continue;
    if (nonzero > ST_MAX_EXACT / d)
      return st_fail(c, "tensor '%s': element count overflows", w->name);
    nonzero *= d;
  }
  *nbytes = numel * rt_dtype_size(w->dtype);
  if (*nbytes > (uint64_t)SIZE_MAX)
    return st_fail(c, "tensor '%s': too large for this host", w->name);
  if (*nbytes && !w->data) return st_fail(c, "tensor '%s': no data", w->name);
  if (w->dtype == RT_BOOL) {
    const unsigned char *p = w->data;
    for (uint64_t i = 0; i < numel; i++)
      if (p[i] > 1)
        return st_fail(c, "tensor '%s': element %llu is %u, not a BOOL (0 or 1)", w->name,
                       (unsigned long long)i, p[i]);
  }
  return 0;
}

int rt_st_write(const char *path, const RtStWrite *tensors, int n, const char *const *meta,
                int n_meta, char *err, size_t errlen) {
  StCtx c = {path ? path : "(null)", err, errlen};
  if (!path) return st_fail(&c, "internal: NULL path");
  if (n < 0 || n_meta < 0 || (n > 0 && !tensors) || (n_meta > 0 && !meta))
    return st_fail(&c, "internal: bad tensor or metadata count");
  int rc = -1;
  RtOut o = {.fd = -1};
  StBuf h = {0};
  StRow *rows = malloc(((size_t)n + 1) * sizeof *rows);
  const char **mkeys = malloc(((size_t)n_meta + 1) * 2 * sizeof *mkeys);
  if (!rows || !mkeys) {
    st_fail(&c, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    rows[i] = (StRow){tensors[i].name, &tensors[i], 0};
    if (write_check(&c, &tensors[i], &rows[i].nbytes)) goto out;
  }
  if (n > 0) qsort(rows, (size_t)n, sizeof *rows, cmp_str_ptr);
  for (int i = 1; i < n; i++)
    if (strcmp(rows[i - 1].name, rows[i].name) == 0) {
      st_fail(&c, "duplicate tensor name '%s'", rows[i].name);
      goto out;
    }
  for (int i = 0; i < n_meta; i++) {
    const char *k = meta[2 * i], *v = meta[2 * i + 1];
    if (!k || !v) {
      st_fail(&c, "__metadata__ pair %d has a NULL key or value", i);
      goto out;
    }
    if (!rt_utf8_valid(k, strlen(k), NULL) || !rt_utf8_valid(v, strlen(v), NULL)) {
      st_fail(&c, "__metadata__ key or value for '%s' is not valid UTF-8", k);
      goto out;
    }
    mkeys[2 * i] = k;
    mkeys[2 * i + 1] = v;
  }
  if (n_meta > 0) qsort(mkeys, (size_t)n_meta, 2 * sizeof *mkeys, cmp_str_ptr);
  for (int i = 1; i < n_meta; i++)
    if (strcmp(mkeys[2 * i - 2], mkeys[2 * i]) == 0) {
      st_fail(&c, "duplicate __metadata__ key '%s'", mkeys[2 * i]);
      goto out;
    }

  /* The header: {"__metadata__":{...},"NAME":{"dtype":..,"shape":[..],"data_offsets":[B,E]},...} */
  buf_str(&h, "{");
  if (n_meta > 0) {
    buf_str(&h, "\"__metadata__\":{");
    for (int i = 0; i < n_meta; i++) {
      if (i) buf_str(&h, ",");
      buf_json_string(&h, mkeys[2 * i]);
      buf_str(&h, ":");
      buf_json_string(&h, mkeys[2 * i + 1]);
    }
    buf_str(&h, "}");
  }
  uint64_t offset = 0;
  for (int i = 0; i < n; i++) {
    const RtStWrite *w = rows[i].w;
    uint64_t nb = rows[i].nbytes;
    char num[96];
    if (i || n_meta > 0) buf_str(&h, ",");
    buf_json_string(&h, w->name);
    buf_str(&h, ":{\"dtype\":\"");
    buf_str(&h, rt_dtype_name(w->dtype));
    buf_str(&h, "\",\"shape\":[");
    for (int d = 0; d < w->rank; d++) {
      snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)w->shape[d]);
      buf_str(&h, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
             (unsigned long long)(offset + nb));
    buf_str(&h, num);
    offset += nb;
  }
  buf_str(&h, "}");
  while (!h.oom && h.n % 8 != 0) buf_str(&h, " "); /* 8 + N stays 8-byte aligned */
  if (h.oom) {
    st_fail(&c, "out of memory");
    goto out;
  }
  if (h.n > ST_HEADER_MAX) {
    st_fail(&c, "header would be %zu bytes, over the 100 MiB limit", h.n);
    goto out;
  }

  if (rt_out_open(&o, path, 0, err, errlen)) goto out;
  unsigned char len8[8];
  store_le(len8, h.n, 8);
  int bad = write_all(o.fd, len8, 8) || write_all(o.fd, h.s, h.n);
  for (int i = 0; i < n && !bad; i++) {
    size_t size = rt_dtype_size(rows[i].w->dtype);
    bad = write_values_le(o.fd, rows[i].w->data, (size_t)(rows[i].nbytes / size), size);
  }
  if (bad) {
    st_fail(&c, "cannot write: %s", strerror(errno));
    goto out;
  }
  if (rt_out_commit(&o, err, errlen)) goto out;
  rc = 0;
out:
  rt_out_abort(&o);
  free(h.s);
  free(rows);
  free(mkeys);
  return rc;
}
