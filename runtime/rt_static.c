/* runtime/rt_static.c — the pool and the kernel runner of the static build
 * (`tfmc emit-c --static`, compiled with -DTFMC_STATIC): what rt_pool.c and
 * rt_profile.c are to the threaded runtime, for hosts without an OS.
 *
 * Also the two things the static API and the generation runtime
 * (rt_stepper.c, rt_gen_model.c built with TFMC_STATIC) need without stdio:
 * rt_errorf, formatting its messages itself (%s, %c, %d/%i/%u with the
 * length modifiers l, ll, z; nothing else), and rt_static_image_check, the
 * packed-weights checks of rt_weights.h on an image in place.
 *
 * Everything runs on the calling thread: rt_pool_parallel_for is one call
 * of the body over the whole range, a pool is never created (generated
 * code passes the NULL pool it is given on to the runtime), and
 * rt_kernel_run has no profile to time into. With rt_gemm.c, rt_attention.c
 * and rt_act.c built with TFMC_STATIC (portable kernels only, no scratch,
 * no heap), the static project references no allocator, no thread, no file
 * and no stdio, and has no mutable global: all the state of a run is in the
 * caller's memory region (runtime/templates/api_static.c).
 *
 * Invariants: the same results as the threaded runtime run on one thread
 * (rt_pool_parallel_for(NULL, ...) does exactly this there); nothing here
 * writes anything but what the kernels it calls write. */
#include "runtime/rt_model.h"

#include <stdarg.h>
#include <string.h>

/* Without TFMC_STATIC (the threaded runtime library, which globs runtime/)
 * this file is empty: rt_pool.c and rt_profile.c are those functions. */
#ifdef TFMC_STATIC

int rt_pool_size(const RtPool *p) {
  (void)p;
  return 1;
}

void rt_pool_parallel_for(RtPool *p, int64_t n, int64_t grain, RtTaskFn fn, void *ctx) {
  (void)p;
  (void)grain;
  if (n > 0) fn(ctx, 0, n);
}

void rt_kernel_run(const RtRunArgs *args, int kernel, RtTaskFn fn, void *ctx, int64_t n,
                   int64_t grain, int parallel) {
  (void)args;
  (void)kernel;
  (void)grain;
  (void)parallel;
  if (n > 0) fn(ctx, 0, n);
}

/* ---- messages without stdio ---- */

typedef struct Msg {
  char *p;
  size_t cap, n;
} Msg;

static void msg_c(Msg *m, char c) {
  if (m->n + 1 < m->cap) m->p[m->n++] = c;
}

static void msg_u(Msg *m, unsigned long long u, int neg) {
  char buf[24];
  int i = (int)sizeof buf;
  do {
    buf[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (neg) msg_c(m, '-');
  while (i < (int)sizeof buf) msg_c(m, buf[i++]);
}

int rt_errorf(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return 1;
  Msg m = {err, errlen, 0};
  va_list ap;
  va_start(ap, fmt);
  for (const char *f = fmt; *f; f++) {
    if (*f != '%') {
      msg_c(&m, *f);
      continue;
    }
    int longs = 0, size = 0;
    for (f++; *f == 'l' || *f == 'z'; f++) *f == 'z' ? (size = 1) : longs++;
    switch (*f) {
    case 's': {
      const char *s = va_arg(ap, const char *);
      for (s = s ? s : "(null)"; *s; s++) msg_c(&m, *s);
      break;
    }
    case 'c': msg_c(&m, (char)va_arg(ap, int)); break;
    case 'd':
    case 'i': {
      long long v = size ? (long long)va_arg(ap, size_t)
                    : longs >= 2 ? va_arg(ap, long long)
                    : longs ? va_arg(ap, long)
                            : va_arg(ap, int);
      msg_u(&m, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, v < 0);
      break;
    }
    case 'u': {
      unsigned long long v = size ? va_arg(ap, size_t)
                             : longs >= 2 ? va_arg(ap, unsigned long long)
                             : longs ? va_arg(ap, unsigned long)
                                     : va_arg(ap, unsigned);
      msg_u(&m, v, 0);
      break;
    }
    case '%': msg_c(&m, '%'); break;
    default: /* not used by the static runtime's messages */
      msg_c(&m, '?');
      if (!*f) f--;
      break;
    }
  }
  va_end(ap);
  m.p[m.n] = '\0';
  return 1;
}

/* ---- packed weights in place ---- */

static uint64_t load_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint64_t static_sum_step(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

int rt_static_image_check(const void *image, size_t len, const RtModelInfo *info, char *err,
                          size_t errlen) {
  const unsigned char *img = image;
  const uint32_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  if (first != 1) return rt_errorf(err, errlen, "the static build needs a little-endian target");
  if ((uintptr_t)img % 4 != 0)
    return rt_errorf(err, errlen, "the weights image must be 4-byte aligned (64 is best)");
  if (len < 64 || memcmp(img, "TFMCWTS", 8) != 0)
    return rt_errorf(err, errlen, "not a packed-weights image (no TFMCWTS header)");
  if (load_le(img + 8, 4) != RT_WEIGHTS_VERSION)
    return rt_errorf(err, errlen,
                     "packed-weights image of another format version (not %d): pack it again "
                     "with this tfmc", (int)RT_WEIGHTS_VERSION);
  uint64_t n = load_le(img + 24, 8);
  if (load_le(img + 16, 8) != info->layout_hash || n != (uint64_t)info->weights_floats)
    return rt_errorf(err, errlen,
                     "the weights image was packed for another model (not '%s': layout or size "
                     "differ)",
                     info->name);
  if ((uint64_t)(len - 64) / 4 < n)
    return rt_errorf(err, errlen, "the weights image is truncated: %lld bytes for %lld floats",
                     (long long)len, (long long)n);
  /* the checksum (rt_weights.h): 8 lanes per 1 MiB segment, one thread */
  const uint64_t O = 0xcbf29ce484222325ull, seg_bytes = (uint64_t)1 << 20;
  uint64_t h = O, bytes = 4 * n;
  for (uint64_t seg = 0; seg < bytes; seg += seg_bytes) {
    uint64_t end = bytes - seg < seg_bytes ? bytes : seg + seg_bytes, lane[8], d = O;
    for (int j = 0; j < 8; j++) lane[j] = O ^ (uint64_t)j;
    for (uint64_t i = seg; i < end; i += 8) { /* the last, half word: 4 zero bytes added */
      uint64_t *l = &lane[(i - seg) / 8 % 8];
      *l = static_sum_step(*l, load_le(img + 64 + i, end - i < 8 ? 4 : 8));
    }
    for (int j = 0; j < 8; j++) d = static_sum_step(d, lane[j]);
    h = static_sum_step(h, d);
  }
  h = static_sum_step(h, n);
  if (h != load_le(img + 32, 8))
    return rt_errorf(err, errlen, "the weights image is corrupt (checksum mismatch)");
  return 0;
}
#else
typedef int rt_static_is_empty_without_tfmc_static;
#endif
