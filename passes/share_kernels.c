/* passes/share_kernels.c — loop pass "share-kernels": kernels that differ
 * only in the buffers they touch are generated once.
 *
 * The twelve layers of bert-base lower to twelve copies of the same dozen
 * kernels whose bodies differ only in weight and arena offsets; compiling
 * each copy costs LLVM's whole optimisation pipeline again (2.8 s of JIT
 * time for bert-base before this pass) and prints twelve copies into
 * emitted C. This pass marks every kernel equal to an earlier one up to a
 * renaming of buffers (loop_kernel_same: same statements, constants,
 * variables, extent and grain; each buffer in the same memory region with
 * the same element type) as sharing that kernel's function
 * (LKernel.shares); the code generators then emit one function per
 * unshared kernel and call it with each kernel's own buffers
 * (loop_kernel_params). Kernels run in the same order as before and
 * compute exactly the same values.
 *
 * Invariant kept: a kernel shares only with an earlier kernel that does not
 * itself share. */
#include "ir/loop.h"
#include "passes/passes.h"

bool pass_share_kernels_run(LoopProgram *p, PassContext *ctx) {
  uint64_t *hash = arena_alloc(p->arena, (size_t)(p->n_kernels + 1) * sizeof *hash);
  for (int i = 0; i < p->n_kernels; i++) {
    LKernel *k = &p->kernels[i];
    hash[i] = loop_kernel_hash(p, k);
    k->shares = -1;
    for (int j = 0; j < i && k->shares < 0; j++)
      if (p->kernels[j].shares < 0 && hash[j] == hash[i] && loop_kernel_same(p, &p->kernels[j], k))
        k->shares = j;
  }
  int functions = loop_program_functions(p);
  if (ctx)
    pass_note(ctx, "%d kernels run as %d functions (%d share one)", p->n_kernels, functions,
              p->n_kernels - functions);
  return true;
}
