/* ir/arena.c — bump allocator and the internal-bug assert.
 *
 * Invariants: every block is zeroed and 16-byte aligned; memory is released
 * only by arena_destroy, all at once. Allocation failure aborts (the
 * compiler cannot continue without memory; this is not a user error),
 * except through arena_try_alloc, which user-sized data (weights) takes
 * so that a model too big for the machine is a message, not an abort. */
#include "ir.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
  struct Chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} Chunk;

typedef struct Hook {
  struct Hook *next;
  void (*fn)(void *);
  void *ctx;
} Hook;

struct Arena {
  Chunk *head;
  Hook *hooks; /* arena_on_destroy's, the last one first */
};

_Noreturn void tfmc_assert_fail(const char *file, int line, const char *what) {
  fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n", file, line,
          what);
  abort();
}

Arena *arena_create(void) {
  Arena *a = calloc(1, sizeof *a);
  if (!a) tfmc_assert_fail(__FILE__, __LINE__, "out of memory");
  return a;
}

void arena_destroy(Arena *a) {
  if (!a) return;
  for (Hook *h = a->hooks; h; h = h->next) h->fn(h->ctx);
  Chunk *c = a->head;
  while (c) {
    Chunk *n = c->next;
    free(c);
    c = n;
  }
  free(a);
}

#define ARENA_CHUNK ((size_t)1 << 16)

void *arena_try_alloc(Arena *a, size_t size) {
  if (size > SIZE_MAX - sizeof(Chunk) - 15) return NULL;
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  if (size > ARENA_CHUNK) {
    /* a chunk of its own, behind the head so small blocks keep filling
     * the head; calloc: the zero pages of a large block are not touched */
    Chunk *big = calloc(1, sizeof *big + size);
    if (!big) return NULL;
    big->size = big->used = size;
    if (a->head) {
      big->next = a->head->next;
      a->head->next = big;
    } else {
      a->head = big;
    }
    return big->data;
  }
  Chunk *c = a->head;
  if (!c || c->size - c->used < size) {
    c = malloc(sizeof *c + ARENA_CHUNK);
    if (!c) return NULL;
    c->size = ARENA_CHUNK;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void *arena_alloc(Arena *a, size_t size) {
  void *p = arena_try_alloc(a, size);
  if (!p) tfmc_assert_fail(__FILE__, __LINE__, "out of memory");
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) {
  return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = arena_alloc(a, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

void arena_grow(Arena *a, void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return;
  int nc = *cap ? *cap * 2 : 16;
  while (nc < need) nc *= 2;
  void *p = arena_alloc(a, (size_t)nc * elem);
  if (*arr) memcpy(p, *arr, (size_t)*cap * elem);
  *arr = p;
  *cap = nc;
}

void arena_on_destroy(Arena *a, void (*fn)(void *), void *ctx) {
  Hook *h = arena_alloc(a, sizeof *h);
  *h = (Hook){a->hooks, fn, ctx};
  a->hooks = h;
}
