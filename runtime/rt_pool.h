/* runtime/rt_pool.h — a persistent thread pool with a parallel-for.
 *
 * One pool owns the cores: BLAS runs single-threaded inside it (rt_gemm.h),
 * so no two pools spin against each other. Idle workers sleep (no spinning
 * past a short bounded spin), so a pool costs nothing between runs.
 *
 *     RtPool *p = rt_pool_create(0);             // 0: one thread per online CPU
 *     rt_pool_parallel_for(p, n, 1, body, ctx);  // body(ctx, lo, hi) over [0,n)
 *     rt_pool_destroy(p);
 */
#ifndef TFMC_RT_POOL_H
#define TFMC_RT_POOL_H

#include <stdint.h>

typedef struct RtPool RtPool;
typedef void (*RtTaskFn)(void *ctx, int64_t lo, int64_t hi);

/* n_threads counts the calling thread; 0 = online CPUs (sysconf), capped
 * at 256. Returns NULL only if no thread could be started at all (then the
 * caller runs serially with a NULL pool). */
RtPool *rt_pool_create(int n_threads);
void rt_pool_destroy(RtPool *p);
int rt_pool_size(const RtPool *p); /* 1 for NULL */

/* Splits [0, n) into contiguous chunks of at least `grain` iterations and
 * runs fn on them on the pool's threads (the caller takes part); returns
 * when all are done. A NULL pool, n <= grain or a call from inside a task
 * runs fn(ctx, 0, n) on the calling thread. */
void rt_pool_parallel_for(RtPool *p, int64_t n, int64_t grain, RtTaskFn fn, void *ctx);

#endif
