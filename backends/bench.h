/* backends/bench.h — what each pass of a pipeline buys (tfmc bench): the
 * model compiled with the pipeline of an optimisation level, with each of
 * its passes left out in turn, and with none (-O0), all run on the JIT
 * side by side in one process on the same inputs.
 *
 *     BenchOptions o = {.spec = "bert.tfm", .level = 2, .batch = 1, .seq = 128,
 *                       .rounds = 10};
 *     BenchResult r;
 *     if (bench_run(a, &d, &o, &r, err, sizeof err)) ...   // err, or d
 *     bench_print(stdout, &r);                             // the table
 *
 * Variants: r.v[0] is the full pipeline, r.v[1 .. n-2] the pipeline without
 * one pass each (every distinct pass of the level, in pipeline order: the
 * passes the level holds when this runs, nothing named here), r.v[n-1]
 * -O0. Each variant's kernels, runtime calls and bytes written per forward
 * come from its loop IR at the bound dims (pass_loop_stats). Timing: every
 * variant runs once to warm up, then `rounds` rounds each run every variant
 * (round-robin, the starting variant rotating), so slow drifts of the
 * machine's load hit all of them alike; a variant's turn is one untimed run
 * (its pool wakes, its data returns to the caches) and one timed run; each
 * variant's median is reported.
 *
 * Ownership: everything a BenchResult points to lives in the arena. */
#ifndef TFMC_BENCH_H
#define TFMC_BENCH_H

#include "backends/driver.h"

#include <stdio.h>

typedef struct BenchOptions {
  const char *spec;    /* .tfm */
  const char *weights; /* checkpoint; NULL: random weights from seed */
  uint64_t seed;
  int level;           /* 1..3 */
  int64_t batch, seq;  /* B, and every sequence-length symbol (S, T) */
  int rounds;          /* >= 1 */
  int threads;         /* JIT pool size; 0: one per CPU */
  bool progress;       /* a line on stderr as each variant compiles */
} BenchOptions;

typedef struct BenchVariant {
  const char *without;    /* the pass left out; NULL for the full pipeline and -O0 */
  PassPipeline pipeline;
  LoopStats stats;
  double ms_median, ms_min;
  double spread; /* half the interquartile range of its times over the median: the noise */
} BenchVariant;

typedef struct BenchResult {
  const char *model;
  int level, threads, rounds;
  int64_t batch, seq;
  int n;              /* variants */
  BenchVariant *v;
} BenchResult;

/* Compiles and runs the variants. Returns 0; or 1 after reporting to d
 * (spec, weights) or writing a message to err (bad batch / seq, I/O; ""
 * when d has it all). */
int bench_run(Arena *a, Diags *d, const BenchOptions *o, BenchResult *r, char *err,
              size_t errlen);

/* The table: per pass the kernels it removes, the activation bytes no
 * longer written, the median ms with and without it and their ratio; then
 * the whole pipeline against -O0, the line "kernels per forward: -O0 X,
 * -ON Y (-Z%)" and the largest spread (how far apart runs of one variant
 * were: ratios closer to 1 than that say nothing). */
void bench_print(FILE *f, const BenchResult *r);

/* The same as JSON into a malloc'd string (*len bytes, NUL-terminated);
 * NULL when out of memory. */
char *bench_json(const BenchResult *r, size_t *len);

#endif
