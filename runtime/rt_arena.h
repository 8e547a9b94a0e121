/* runtime/rt_arena.h — the activation arena's memory: planned at the
 * maximum dims, committed as runs need it.
 *
 * The arena plan (passes/lower_loops.c) places every buffer at its size at
 * the maximum dims (max_batch x max length), so a spec with large maxima
 * has a large arena although a short run touches only the start of each
 * buffer. rt_arena_open reserves the whole plan as address space only
 * (POSIX: an inaccessible private mapping, which costs no memory);
 * rt_arena_commit makes writable, before a run, exactly the pages the run's
 * dims touch (the union of [offset, offset + bytes at these dims) over the
 * model's RtArenaBlock table), so memory follows the dims of the run and a
 * run the system cannot give memory to is refused with the byte count
 * instead of being killed halfway. Committed pages stay committed (a later
 * run with the same or smaller dims commits nothing).
 *
 * Where there is no mmap/mprotect (or the model has no block table, or the
 * address space cannot be reserved but the whole arena can be allocated),
 * the whole arena is allocated at once and commit does nothing. */
#ifndef TFMC_RT_ARENA_H
#define TFMC_RT_ARENA_H

#include "runtime/rt_model.h"

#include <stddef.h>
#include <stdint.h>

typedef struct RtArena {
  unsigned char *base; /* 64-byte aligned; info->arena_bytes usable bytes */
  size_t len;          /* bytes reserved (page multiple when mapped) */
  void *raw;           /* what to free when allocated (not mapped) */
  int mapped;          /* 1: reserved with mmap, committed by rt_arena_commit */
  int64_t *done;       /* per block: bytes from its offset already committed */
  const RtModelInfo *info;
} RtArena;

/* Reserves the arena of info (which must have passed rt_model_info_check
 * or come from the compiler). Returns 0, or 1 with a message naming the
 * size and the maxima it was planned at. */
int rt_arena_open(RtArena *a, const RtModelInfo *info, char *err, size_t errlen);

/* Commits what a run with these symbol values touches. Returns 0, or 1
 * with a message naming the bytes the run needs. */
int rt_arena_commit(RtArena *a, const int64_t *syms, char *err, size_t errlen);

/* The bytes a run with these symbol values touches: the pages (4096 bytes)
 * of the union of its blocks' extents; info->arena_bytes without a table. */
int64_t rt_arena_need(const RtModelInfo *info, const int64_t *syms);

/* Bytes of block b at these symbol values. */
int64_t rt_arena_block_bytes(const RtArenaBlock *b, const int64_t *syms);

void rt_arena_close(RtArena *a);

#endif
