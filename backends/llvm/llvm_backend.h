/* backends/llvm/llvm_backend.h — loop IR to native code through LLVM's C
 * API: verify the module, optimise with the new pass manager
 * (LLVMRunPasses; the levels below) for the host CPU's name and features
 * (AVX-512 here), then either JIT it in process with ORC LLJIT or write an
 * object file. Makes no optimisation decisions of its own: those are
 * passes that produced the loop IR.
 *
 * The code defines one function per kernel,
 *     void <kernel name>(void *args, int64_t lo, int64_t hi)
 * and the entry function
 *     void tfmc_model_run(const RtRunArgs *args)     (runtime/rt_model.h)
 * which calls them in order (through rt_pool_parallel_for for parallel
 * kernels). Runtime entry points (rt_linear, rt_pool_parallel_for) and libm
 * functions resolve in process for the JIT, at link time for objects.
 *
 * Example:
 *     LlvmJit *jit; RtModelRunFn run; char err[512];
 *     if (llvm_jit_compile(prog, &jit, &run, err, sizeof err)) { ... }
 *     run(&args);
 *     llvm_jit_destroy(jit);
 */
#ifndef TFMC_LLVM_BACKEND_H
#define TFMC_LLVM_BACKEND_H

#include "ir/loop.h"
#include "runtime/rt_model.h"

#include <stdio.h>

typedef struct LlvmJit LlvmJit;

/* LlvmOptions.opt_level: 0, 2 and 3 are LLVM's default<O0/O2/O3>
 * pipelines; 1 is default<O1> plus the loop and SLP vectorisers. The JIT
 * defaults to 1: its code is only what lies between runtime calls
 * (layernorm and the elementwise ops the fusion passes leave; the GEMMs
 * and attention are precompiled runtime), and O2/O3's pipeline is most of
 * a one-shot `tfmc run`'s compile (bert-base: 650-730 ms against 240-270
 * ms at 1, mostly MemorySSA, loop unrolling, the inliner and InstCombine),
 * while the vectorisers keep that code's loops vectorised (bert-base's 25
 * layernorms 1.0-1.7 ms per run at O3, 1.9-2.5 ms at 1, 3.9-9.1 ms at
 * plain O1). Objects (`tfmc build`) default to 3: compiled once, run many
 * times. */
typedef struct LlvmOptions {
  int opt_level;        /* 0..3; default 1 for the JIT, 3 for objects and IR */
  const char *cpu;      /* NULL: the host CPU (LLVMGetHostCPUName) */
  const char *features; /* NULL: the host's features */
  const char *entry;    /* objects only: the entry function's name (NULL: tfmc_model_run).
                           When set, the kernels get internal linkage, so objects of
                           several programs (a generation artefact's encoder and
                           decoder step) link into one executable */
} LlvmOptions;

/* Compiles p in process. On success *jit owns the code (run stays valid
 * until llvm_jit_destroy). Returns 0 or non-zero with a message. */
int llvm_jit_compile(const LoopProgram *p, const LlvmOptions *opt, LlvmJit **jit,
                     RtModelRunFn *run, char *err, size_t errlen);
void llvm_jit_destroy(LlvmJit *jit);
/* The address of a compiled function (a kernel, by its LKernel name), or
 * NULL if there is none; valid until llvm_jit_destroy. */
void *llvm_jit_lookup(LlvmJit *jit, const char *name);

/* Writes an object file for the host target defining tfmc_model_run and the
 * kernels (link it with the runtime and libm). */
int llvm_emit_object(const LoopProgram *p, const LlvmOptions *opt, const char *path,
                     char *err, size_t errlen);

/* Writes the (optimised when opt_level > 0) LLVM IR as text, for inspection. */
int llvm_emit_ir(const LoopProgram *p, const LlvmOptions *opt, FILE *out, char *err,
                 size_t errlen);

#endif
