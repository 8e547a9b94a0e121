/* backends/llvm/llvm_internal.h — private interface between the files of the
 * LLVM backend. One section per .c file.
 *
 *   context.c  target selection (host CPU name and features unless the
 *              options override them), target machines, the optimisation
 *              pipeline, error-message helpers
 *   emit.c     loop IR -> one verified LLVM module
 *   jit.c      ORC LLJIT (llvm_jit_compile / llvm_jit_destroy)
 *   object.c   object files and textual IR (llvm_emit_object / llvm_emit_ir)
 *
 * Ownership: every function that creates an LLVM object says who disposes
 * of it; nothing here keeps global state except the one-time target
 * initialisation. Each compile uses its own LLVMContext, so compiles may run
 * concurrently on different threads. */
#ifndef TFMC_LLVM_INTERNAL_H
#define TFMC_LLVM_INTERNAL_H

#include "backends/llvm/llvm_backend.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>

#include <stdbool.h>

/* ---- context.c ---- */

/* What code is generated for. Strings are owned by the struct and freed by
 * llvm_target_fini. */
typedef struct LlvmTarget {
  LLVMTargetRef target;
  char *triple;   /* LLVMGetDefaultTargetTriple */
  char *cpu;      /* host CPU name or LlvmOptions.cpu */
  char *features; /* host features, LlvmOptions.features, or "" (a named CPU's defaults) */
  int opt_level;  /* 0..3 */
} LlvmTarget;

/* Initialises the native target once per process, resolves opt (NULL: all
 * defaults) into t. Returns 0, or non-zero with a message (unknown target,
 * opt_level out of range); on failure t holds nothing. */
int llvm_target_init(LlvmTarget *t, const LlvmOptions *opt, char *err, size_t errlen);
void llvm_target_fini(LlvmTarget *t);

/* A target machine for t (caller disposes with LLVMDisposeTargetMachine;
 * NULL only if LLVM refuses the CPU/feature combination). */
LLVMTargetMachineRef llvm_target_machine_create(const LlvmTarget *t, LLVMRelocMode reloc,
                                                LLVMCodeModel code_model);

/* Runs "default<O{t->opt_level}>" (loop and SLP vectorisation on) over m for
 * tm. Returns 0 or non-zero with a message. */
int llvm_module_optimise(LLVMModuleRef m, LLVMTargetMachineRef tm, int opt_level, char *err,
                         size_t errlen);

/* snprintf into err (which may be NULL or have errlen 0). Returns 1 so
 * callers can `return llvm_fail(...)`. */
int llvm_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Consumes e (non-NULL): writes "what: <LLVM's message>" to err and
 * returns 1. */
int llvm_fail_error(LLVMErrorRef e, const char *what, char *err, size_t errlen);

/* ---- emit.c ---- */

/* Builds the module for p in ctx: one function per kernel and
 * tfmc_model_run, with t's CPU/features attributes and tm's triple and data
 * layout, then verifies it. Malformed loop IR is reported as an error, never
 * a crash: the loop IR verifier (loop_program_verify) runs first and its
 * message is returned prefixed "llvm: " (the compile driver will own that
 * call). On success *out is a module owned by the caller (LLVMDisposeModule,
 * or hand it to ORC); on failure nothing is left allocated. */
int llvm_module_emit(const LoopProgram *p, const LlvmTarget *t, LLVMTargetMachineRef tm,
                     LLVMContextRef ctx, LLVMModuleRef *out, char *err, size_t errlen);

#endif
