/* runtime/rt_static.c — the pool and the kernel runner of the static build
 * (`tfmc emit-c --static`, compiled with -DTFMC_STATIC): what rt_pool.c and
 * rt_profile.c are to the threaded runtime, for hosts without an OS.
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
#else
typedef int rt_static_is_empty_without_tfmc_static;
#endif
