/* runtime/rt_arena.c — see rt_arena.h. */
#if !defined(_WIN32) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#endif
#include "runtime/rt_arena.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#if defined(MAP_ANONYMOUS)
#define RT_ARENA_MMAP 1
#endif
#endif
#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

#define PAGE 4096

int64_t rt_arena_block_bytes(const RtArenaBlock *b, const int64_t *syms) {
  int64_t n = b->bytes;
  for (int d = 0; d < RT_MAX_RANK && b->syms[d] >= 0; d++) n *= syms[b->syms[d]];
  return n;
}

typedef struct Span {
  int64_t lo, hi;
} Span;

static int span_cmp(const void *x, const void *y) {
  const Span *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

int64_t rt_arena_need(const RtModelInfo *info, const int64_t *syms) {
  int n = info->n_arena_blocks;
  if (n <= 0) return info->arena_bytes;
  Span *s = malloc((size_t)n * sizeof *s);
  if (!s) return info->arena_bytes;
  int k = 0;
  for (int i = 0; i < n; i++) {
    int64_t len = rt_arena_block_bytes(&info->arena_blocks[i], syms);
    if (len <= 0) continue;
    int64_t lo = info->arena_blocks[i].offset;
    s[k++] = (Span){lo / PAGE * PAGE, (lo + len + PAGE - 1) / PAGE * PAGE};
  }
  qsort(s, (size_t)k, sizeof *s, span_cmp);
  int64_t total = 0, lo = 0, hi = -1;
  for (int i = 0; i < k; i++) {
    if (s[i].lo > hi) {
      if (hi > lo) total += hi - lo;
      lo = s[i].lo;
      hi = s[i].hi;
    } else if (s[i].hi > hi) {
      hi = s[i].hi;
    }
  }
  if (hi > lo) total += hi - lo;
  free(s);
  return total;
}

static int open_malloc(RtArena *a, const RtModelInfo *info, char *err, size_t errlen,
                       const char *why) {
  size_t len = ((size_t)info->arena_bytes + 63) / 64 * 64;
  a->raw = aligned_alloc(64, len ? len : 64);
  if (!a->raw)
    return rt_errorf(err, errlen,
                     "cannot have the %lld-byte activation arena of model '%s' (planned at the "
                     "maximum dims: max_batch and the maximum length)%s%s",
                     (long long)info->arena_bytes, info->name ? info->name : "?", why ? ": " : "",
                     why ? why : "");
  a->base = a->raw;
  a->len = len;
  return 0;
}

int rt_arena_open(RtArena *a, const RtModelInfo *info, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  a->info = info;
  if (info->arena_bytes < 0 || (uint64_t)info->arena_bytes > (uint64_t)SIZE_MAX / 2)
    return rt_errorf(err, errlen, "model info: bad arena size %lld", (long long)info->arena_bytes);
#ifdef RT_ARENA_MMAP
  if (info->n_arena_blocks > 0 && info->arena_bytes > 0) {
    size_t len = ((size_t)info->arena_bytes + PAGE - 1) / PAGE * PAGE;
    /* inaccessible: no memory is charged until rt_arena_commit */
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      a->done = calloc((size_t)info->n_arena_blocks, sizeof *a->done);
      if (!a->done) {
        munmap(p, len);
        return rt_errorf(err, errlen, "out of memory");
      }
      a->base = p;
      a->len = len;
      a->mapped = 1;
      return 0;
    }
    return open_malloc(a, info, err, errlen, "not even as address space (ulimit -v?)");
  }
#endif
  return open_malloc(a, info, err, errlen, NULL);
}

#ifdef RT_ARENA_MMAP
/* The machine's memory, bytes: RAM and swap (Linux), else RAM; 0 when the
 * system does not say. */
static int64_t machine_memory(void) {
#if defined(__linux__)
  struct sysinfo si;
  if (sysinfo(&si) == 0 && si.mem_unit > 0)
    return ((int64_t)si.totalram + (int64_t)si.totalswap) * (int64_t)si.mem_unit;
#endif
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) return (int64_t)pages * (int64_t)size;
#endif
  return 0;
}
#endif

int rt_arena_commit(RtArena *a, const int64_t *syms, char *err, size_t errlen) {
  if (!a->mapped) return 0;
#ifdef RT_ARENA_MMAP
  const RtModelInfo *info = a->info;
  /* The system may grant more than it has (overcommit, and each block
   * alone may look affordable): a run that needs more than the machine's
   * RAM and swap in all would only be killed by the OOM killer once its
   * pages are touched, after minutes of work. Refuse it here. */
  bool grows = false;
  for (int i = 0; i < info->n_arena_blocks && !grows; i++)
    grows = rt_arena_block_bytes(&info->arena_blocks[i], syms) > a->done[i];
  int64_t have = grows ? machine_memory() : 0, need = have > 0 ? rt_arena_need(info, syms) : 0;
  if (need > have)
    return rt_errorf(err, errlen,
                     "cannot have the memory this run needs: %lld bytes of activations at "
                     "these dims, more than this machine has (%lld bytes of RAM and swap); "
                     "run fewer or shorter sequences at a time",
                     (long long)need, (long long)have);
  for (int i = 0; i < info->n_arena_blocks; i++) {
    const RtArenaBlock *b = &info->arena_blocks[i];
    int64_t len = rt_arena_block_bytes(b, syms);
    if (len <= a->done[i]) continue;
    int64_t lo = (b->offset + a->done[i]) / PAGE * PAGE;
    int64_t hi = (b->offset + len + PAGE - 1) / PAGE * PAGE;
    if (hi > (int64_t)a->len) hi = (int64_t)a->len;
    if (hi > lo && mprotect(a->base + lo, (size_t)(hi - lo), PROT_READ | PROT_WRITE) != 0) {
      int e = errno;
      return rt_errorf(err, errlen,
                       "cannot have the memory this run needs: %lld bytes of activations at "
                       "these dims (the arena planned at the maximum dims is %lld bytes): %s",
                       (long long)rt_arena_need(info, syms), (long long)info->arena_bytes,
                       strerror(e));
    }
    a->done[i] = len;
  }
#else
  (void)syms;
  (void)err;
  (void)errlen;
#endif
  return 0;
}

void rt_arena_close(RtArena *a) {
#ifdef RT_ARENA_MMAP
  if (a->mapped) munmap(a->base, a->len);
#endif
  if (!a->mapped) free(a->raw);
  free(a->done);
  memset(a, 0, sizeof *a);
}
