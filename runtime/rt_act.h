/* runtime/rt_act.h — activation functions whose libm form does not
 * vectorise (erff, tanhf are calls), written branch-free so the compiler
 * vectorises them; compiled code calls these for gelu and gelu_tanh, and
 * the GEMM epilogue (rt_gemm.h) applies them to output tiles in place. */
#ifndef TFMC_RT_ACT_H
#define TFMC_RT_ACT_H

#include "runtime/rt_pool.h"

#include <stdint.h>

/* y[i] = gelu(x[i]) for i < n, split over the pool in tasks of at least
 * grain elements (the caller's policy; values below 1 count as 1):
 *   tanh_approx = 0: x/2 (1 + erf(x / sqrt 2))                      (|error| < 2e-7 |x|)
 *   tanh_approx = 1: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (|error| < 2e-7 |x|)
 * x and y must not overlap. */
void rt_gelu(RtPool *pool, int64_t n, const float *x, float *y, int64_t tanh_approx,
             int64_t grain);

/* The activations a GEMM epilogue applies (rt_linear's act argument). */
typedef enum RtAct {
  RT_ACT_NONE,      /* y */
  RT_ACT_RELU,      /* max(y, 0) */
  RT_ACT_GELU,      /* rt_gelu's erf form */
  RT_ACT_GELU_TANH, /* rt_gelu's tanh form */
  RT_ACT_COUNT
} RtAct;

/* y[i] = act(y[i]) for i < n, in place, on the calling thread; gelu gives
 * exactly rt_gelu's bits for the same input. An act outside RtAct leaves
 * y as it is (rt_linear refuses none: compiled code passes what the
 * verified loop IR holds). */
void rt_act_row(int64_t act, float *y, int64_t n);

#endif
