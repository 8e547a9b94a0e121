/* ir/arena.c — bump allocator and the internal-bug assert.
 *
 * Invariants: every block is zeroed and 16-byte aligned; memory is released
 * only by arena_destroy, all at once. Allocation failure aborts (the
 * compiler cannot continue without memory; this is not a user error). */
#include "ir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
  struct Chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} Chunk;

struct Arena {
  Chunk *head;
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
  Chunk *c = a->head;
  while (c) {
    Chunk *n = c->next;
    free(c);
    c = n;
  }
  free(a);
}

void *arena_alloc(Arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  Chunk *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t cap = size > (1u << 16) ? size : (1u << 16);
    c = malloc(sizeof *c + cap);
    if (!c) tfmc_assert_fail(__FILE__, __LINE__, "out of memory");
    c->size = cap;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
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
