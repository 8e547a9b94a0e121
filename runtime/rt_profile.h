/* runtime/rt_profile.h — where a compiled model spends its time: wall time
 * per kernel, summed over runs, and the report `tfmc run --profile` and
 * standalone executables' `--profile` print.
 *
 *     RtProfile *prof = rt_profile_create(info->n_kernels);   // NULL: no memory
 *     RtRunArgs args = {syms, inputs, outputs, weights, arena, pool, prof};
 *     for (int r = 0; r < runs; r++) tfmc_model_run(&args);   // rt_kernel_run times
 *     rt_profile_report(info->kernels, info->n_kernels, prof, runs, stderr);
 *     rt_profile_destroy(prof);
 *
 * The report (one format for every path):
 *
 *     profile: 41 kernels, 1.234 ms per run (mean of 100 runs)
 *       op kind         kernels   ms per run   share
 *       attention             2        0.600   48.6%
 *       ...                                          (by time, slowest first)
 *       slowest kernels:
 *       k22_attention                 0.310 ms  attention %22 @model.tfm:7:3
 *       ...                                          (at most 8)
 *
 * A profile is filled on the thread that runs the model (rt_kernel_run is
 * called by tfmc_model_run, never from inside a task), so it needs no lock;
 * one profile must not be shared by two runs at the same time. */
#ifndef TFMC_RT_PROFILE_H
#define TFMC_RT_PROFILE_H

#include "runtime/rt_model.h"

#include <stdint.h>
#include <stdio.h>

/* (typedef'd as RtProfile in rt_model.h) */
struct RtProfile {
  int n_kernels;
  double *ms;     /* [n_kernels]: wall time of kernel i, summed over its calls */
  int64_t *calls; /* [n_kernels]: how often rt_kernel_run ran kernel i */
};

/* A zeroed profile for kernels 0..n_kernels-1 (n_kernels >= 0). Returns
 * NULL when out of memory or n_kernels < 0. Caller frees with
 * rt_profile_destroy (NULL is fine). */
RtProfile *rt_profile_create(int n_kernels);
void rt_profile_destroy(RtProfile *p);

/* Prints the report above for p over `runs` runs (times are divided by
 * runs; runs < 1 counts as 1) to f. kernels[i] names p's kernel i (the
 * first min(n_kernels, p->n_kernels) are reported); kernels with the same
 * op string form one op kind; ties keep the kernels' order. Names,
 * op kinds and comments are printed with bytes outside printable ASCII as
 * \xHH, so a hostile spec path cannot break the lines. Returns 0, or -1
 * when out of memory (after a line saying so). */
int rt_profile_report(const RtKernelInfo *kernels, int n_kernels, const RtProfile *p, int runs,
                      FILE *f);

/* Runs run(args) `runs` more times (>= 1) with a fresh profile, then prints
 * rt_profile_report to f. args->profile is NULL again afterwards. Returns 0,
 * or non-zero when out of memory. */
int rt_profile_runs(const RtKernelInfo *kernels, int n_kernels, RtModelRunFn run,
                    RtRunArgs *args, int runs, FILE *f);

/* ---- wall-clock timing of whole runs (--repeat) ---- */

typedef struct RtTiming {
  double median_ms, min_ms, max_ms;
  int runs;
} RtTiming;

/* Sorts ms[0..n) (n >= 1) and fills *t with its median, min and max. */
void rt_timing_summarise(double *ms, int n, RtTiming *t);
/* Milliseconds on the monotonic clock, for timing runs. */
double rt_timing_now_ms(void);
/* Runs run(args) n times (n >= 1), each timed, into *t. Returns 0, or 1
 * when out of memory (nothing run). */
int rt_time_runs(RtModelRunFn run, const RtRunArgs *args, int n, RtTiming *t);

#endif
