/* runtime/rt_exp.h — exp(x) for x <= 0 without branches or calls, so loops
 * that use it vectorise (the softmax's e^(x - max), gelu's e^(-a^2)); one
 * definition, instantiated per ISA by the files that use it:
 *
 *     RT_DEFINE_EXP_NEG(attn_exp_avx2, __attribute__((target("avx2,fma"))), fmaf)
 *     float y = attn_exp_avx2(x);   // x <= 0
 *
 * x = n ln2 + r with n = round(x / ln2) (the 1.5 * 2^23 trick; ln2 split in
 * two so n ln2 is exact enough), e^r by its Taylor series to r^7 (|r| <=
 * ln2/2: error < 6e-9), then 2^n added to the exponent bits; within 2e-7
 * relative of expf. Below -86 the result is 0 (e^-86 = 4.5e-38 is nothing
 * next to a softmax row's largest term, 1), as expf's denormals would be; a
 * NaN stays NaN. MADD(a, b, c) = a*b + c: fmaf where the ISA fuses it (ISO
 * C mode contracts nothing by itself), else a multiply and an add. */
#ifndef TFMC_RT_EXP_H
#define TFMC_RT_EXP_H

#include <stdint.h>
#include <string.h>

#define RT_DEFINE_EXP_NEG(NAME, ATTR, MADD)                                                       \
  ATTR static inline float NAME(float x) {                                                         \
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */             \
    float t = MADD(x, 1.44269504088896341f, shift);                                                \
    float n = t - shift;                                                                           \
    float r = MADD(n, -0.693145751953125f, x);                                                     \
    r = MADD(n, -1.42860682030941723e-6f, r);                                                      \
    float p = 1.0f / 5040;                                                                         \
    p = MADD(p, r, 1.0f / 720);                                                                    \
    p = MADD(p, r, 1.0f / 120);                                                                    \
    p = MADD(p, r, 1.0f / 24);                                                                     \
    p = MADD(p, r, 1.0f / 6);                                                                      \
    p = MADD(p, r, 0.5f);                                                                          \
    p = MADD(p, r, 1.0f);                                                                          \
    p = MADD(p, r, 1.0f);                                                                          \
    uint32_t tb, pb, xb;                                                                           \
    memcpy(&tb, &t, sizeof tb);                                                                    \
    memcpy(&pb, &p, sizeof pb);                                                                    \
    memcpy(&xb, &x, sizeof xb);                                                                    \
    pb += (tb - 0x4B400000u) << 23;                              /* * 2^n */                       \
    pb &= -(uint32_t)!(x < -86.0f);                              /* underflow: 0 (a mask) */       \
    uint32_t nan = -(uint32_t)((xb & 0x7FFFFFFFu) > 0x7F800000u); /* x is NaN: x */                \
    pb = (pb & ~nan) | (xb & nan);                                                                 \
    float y;                                                                                       \
    memcpy(&y, &pb, sizeof y);                                                                     \
    return y;                                                                                      \
  }

#endif
