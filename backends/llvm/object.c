/* backends/llvm/object.c — ahead-of-time outputs: an object file for the
 * host target, and the module as LLVM IR text for inspection.
 *
 * Objects are position independent (LLVMRelocPIC) so they link into the PIE
 * executables Debian's compilers make by default; they define
 * tfmc_model_run and one function per kernel, and reference rt_linear,
 * rt_pool_parallel_for and libm (resolved at link time).
 *
 * Invariant: both outputs come from exactly the module the JIT would run
 * (same emitter, same target attributes, same default<On> pipeline). */
#include "backends/llvm/llvm_internal.h"

#include <stdlib.h>
#include <string.h>

/* Builds, and optimises when `optimise`, the module for p in a fresh context.
 * On success the caller owns *ctx (LLVMContextDispose, after the module),
 * *tm and *mod. */
static int build(const LoopProgram *p, const LlvmTarget *t, LLVMRelocMode reloc, bool optimise,
                 LLVMContextRef *ctx, LLVMTargetMachineRef *tm, LLVMModuleRef *mod, char *err,
                 size_t errlen) {
  *ctx = NULL;
  *tm = NULL;
  *mod = NULL;
  LLVMTargetMachineRef m = llvm_target_machine_create(t, reloc, LLVMCodeModelDefault);
  if (!m)
    return llvm_fail(err, errlen, "llvm: no target machine for cpu '%s'", t->cpu);
  LLVMContextRef c = LLVMContextCreate(); /* one per compile */
  LLVMModuleRef md = NULL;
  if (llvm_module_emit(p, t, m, c, &md, err, errlen) ||
      (optimise && llvm_module_optimise(md, m, t->opt_level, err, errlen))) {
    if (md)
      LLVMDisposeModule(md);
    LLVMContextDispose(c);
    LLVMDisposeTargetMachine(m);
    return 1;
  }
  *ctx = c;
  *tm = m;
  *mod = md;
  return 0;
}

static void release(LLVMContextRef ctx, LLVMTargetMachineRef tm, LLVMModuleRef mod) {
  LLVMDisposeModule(mod); /* before its context */
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
}

int llvm_emit_object(const LoopProgram *p, const LlvmOptions *opt, const char *path, char *err,
                     size_t errlen) {
  if (!path || !*path)
    return llvm_fail(err, errlen, "llvm: no output path");
  LlvmTarget t;
  if (llvm_target_init(&t, opt, err, errlen))
    return 1;
  LLVMContextRef ctx;
  LLVMTargetMachineRef tm;
  LLVMModuleRef mod;
  if (build(p, &t, LLVMRelocPIC, true, &ctx, &tm, &mod, err, errlen)) {
    llvm_target_fini(&t);
    return 1;
  }
  int rc = 0;
  char *msg = NULL;
  if (opt && opt->entry) { /* one of several programs in one executable */
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
      size_t len;
      const char *name = LLVMGetValueName2(f, &len);
      if (LLVMIsDeclaration(f)) continue;
      if (len == strlen("tfmc_model_run") && memcmp(name, "tfmc_model_run", len) == 0)
        LLVMSetValueName2(f, opt->entry, strlen(opt->entry));
      else
        LLVMSetLinkage(f, LLVMInternalLinkage);
    }
  }
  /* LLVM 14 takes the file name as char * but does not modify it */
  if (LLVMTargetMachineEmitToFile(tm, mod, (char *)path, LLVMObjectFile, &msg)) {
    rc = llvm_fail(err, errlen, "llvm: cannot write %s: %s", path, msg ? msg : "?");
    LLVMDisposeMessage(msg);
  }
  release(ctx, tm, mod);
  llvm_target_fini(&t);
  return rc;
}

int llvm_emit_ir(const LoopProgram *p, const LlvmOptions *opt, FILE *out, char *err,
                 size_t errlen) {
  if (!out)
    return llvm_fail(err, errlen, "llvm: no output stream");
  LlvmTarget t;
  if (llvm_target_init(&t, opt, err, errlen))
    return 1;
  LLVMContextRef ctx;
  LLVMTargetMachineRef tm;
  LLVMModuleRef mod;
  if (build(p, &t, LLVMRelocPIC, t.opt_level > 0, &ctx, &tm, &mod, err, errlen)) {
    llvm_target_fini(&t);
    return 1;
  }
  char *text = LLVMPrintModuleToString(mod); /* ours: LLVMDisposeMessage */
  int rc = 0;
  if (fputs(text, out) == EOF || fflush(out) == EOF || ferror(out))
    rc = llvm_fail(err, errlen, "llvm: cannot write the IR");
  LLVMDisposeMessage(text);
  release(ctx, tm, mod);
  llvm_target_fini(&t);
  return rc;
}
