/* tests/runtime/isa_init.h — Criterion .init functions that cap the GEMM's
 * kernel set (TFMC_GEMM_ISA) for one test; Criterion runs each test in a
 * fresh process, so the runtime picks the capped set when it first starts,
 * and rt_gemm_lanes() (which attention and the activations follow) reports
 * it. A test checks rt_gemm_lanes() itself and skips where the CPU lacks
 * the set. */
#ifndef TFMC_TESTS_ISA_INIT_H
#define TFMC_TESTS_ISA_INIT_H

#include <stdlib.h>

static inline void isa_avx512(void) {
  setenv("TFMC_GEMM_ISA", "avx512", 1);
}
static inline void isa_avx2(void) {
  setenv("TFMC_GEMM_ISA", "avx2", 1);
}
static inline void isa_scalar(void) {
  setenv("TFMC_GEMM_ISA", "scalar", 1);
}

#endif
