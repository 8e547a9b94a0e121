/* tests/e2e/test_op_diff.c — the differential op test: every op of the op
 * table (tests/common/op_cases.h) runs through the reference interpreter
 * and through the JIT (graph -> loop IR -> LLVM) on random inputs with
 * symbolic dims, and the two must agree. An op without a case does not
 * compile. */
#include "backends/exec.h"
#include "tests/common/op_cases.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void run_case(int op) {
  Case c;
  op_case_build(&c, op, 1234);
  WeightSet ws = {c.w, c.n_w};
  Tensor *ri, *rj;
  int ni, nj;
  char err[1024];
  cr_assert_eq(backend_run_tensors("interp", c.g, &ws, c.in, c.n_in, &(ExecOptions){2, 0}, c.a, &ri, &ni, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(backend_run_tensors("jit", c.g, &ws, c.in, c.n_in, &(ExecOptions){2, 0}, c.a, &rj, &nj, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(ni, nj);
  for (int o = 0; o < ni; o++) {
    cr_assert_eq(ri[o].rank, rj[o].rank);
    cr_assert_eq(ri[o].dtype, rj[o].dtype, "%s: output dtype", ir_op_info[op].name);
    int64_t n = tensor_numel(&ri[o]);
    cr_assert_eq(n, tensor_numel(&rj[o]));
    for (int64_t i = 0; i < n; i++) {
      if (ri[o].dtype == IR_F32) {
        float x = ((float *)ri[o].data)[i], y = ((float *)rj[o].data)[i];
        cr_assert(fabsf(x - y) <= 1e-5f + 1e-4f * fabsf(x), "%s output %s[%lld]: interp %.9g jit %.9g",
                  ir_op_info[op].name, ri[o].name, (long long)i, x, y);
      } else if (ri[o].dtype == IR_I32) {
        cr_assert_eq(((int32_t *)ri[o].data)[i], ((int32_t *)rj[o].data)[i], "%s[%lld]", ir_op_info[op].name, (long long)i);
      } else {
        cr_assert_eq(((uint8_t *)ri[o].data)[i] != 0, ((uint8_t *)rj[o].data)[i] != 0, "%s[%lld]",
                     ir_op_info[op].name, (long long)i);
      }
    }
  }
  arena_destroy(c.a);
}

ParameterizedTestParameters(op_diff, interp_vs_jit) {
  static int ops[IR_OP_COUNT];
  for (int i = 0; i < IR_OP_COUNT; i++) ops[i] = i;
  return cr_make_param_array(int, ops, IR_OP_COUNT);
}

ParameterizedTest(int *op, op_diff, interp_vs_jit) { run_case(*op); }
