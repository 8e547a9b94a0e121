/* backends/llvm/context.c — what the LLVM backend generates code for, and
 * how it optimises it.
 *
 * Target: the default triple, and the host CPU's name and features
 * (LLVMGetHostCPUName / LLVMGetHostCPUFeatures) unless LlvmOptions names a
 * CPU or a feature string. A named CPU without a feature string gets that
 * CPU's own features (""), never the host's, so cross-CPU output is
 * self-consistent. The same CPU and features go into the target machines
 * here and into every function's "target-cpu" / "target-features"
 * attributes (emit.c), so the vectoriser and the code generator agree.
 *
 * Optimisation: the new pass manager's default<On> pipeline through
 * LLVMRunPasses with loop and SLP vectorisation on; no legacy pass manager.
 *
 * Invariants: the native target is initialised exactly once per process
 * (pthread_once), so concurrent compiles are safe; everything else is
 * per-compile. */
#include "backends/llvm/llvm_internal.h"

#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llvm_fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

int llvm_fail_error(LLVMErrorRef e, const char *what, char *err, size_t errlen) {
  char *msg = LLVMGetErrorMessage(e); /* consumes e; we own msg */
  llvm_fail(err, errlen, "%s: %s", what, msg ? msg : "unknown LLVM error");
  LLVMDisposeErrorMessage(msg);
  return 1;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status; /* 0 ok; written once under init_once */

static void init_native(void) {
  if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
    init_status = 1;
}

static char *dup_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

void llvm_target_fini(LlvmTarget *t) {
  if (t->triple)
    LLVMDisposeMessage(t->triple);
  free(t->cpu);
  free(t->features);
  memset(t, 0, sizeof *t);
}

int llvm_target_init(LlvmTarget *t, const LlvmOptions *opt, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  LlvmOptions o = {.opt_level = 3};
  if (opt)
    o = *opt;
  if (o.opt_level < 0 || o.opt_level > 3)
    return llvm_fail(err, errlen, "llvm: optimisation level %d is not in 0..3", o.opt_level);
  t->opt_level = o.opt_level;

  pthread_once(&init_once, init_native);
  if (init_status)
    return llvm_fail(err, errlen, "llvm: cannot initialise the native target");

  t->triple = LLVMGetDefaultTargetTriple(); /* LLVMDisposeMessage in fini */
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &t->target, &msg)) {
    llvm_fail(err, errlen, "llvm: no target for %s: %s", t->triple, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    llvm_target_fini(t);
    return 1;
  }

  if (o.cpu) {
    t->cpu = dup_string(o.cpu);
  } else {
    char *host = LLVMGetHostCPUName(); /* ours: LLVMDisposeMessage */
    t->cpu = dup_string(host);
    LLVMDisposeMessage(host);
  }
  if (o.features) {
    t->features = dup_string(o.features);
  } else if (o.cpu) {
    t->features = dup_string(""); /* the named CPU's own features */
  } else {
    char *host = LLVMGetHostCPUFeatures();
    t->features = dup_string(host);
    LLVMDisposeMessage(host);
  }
  if (!t->cpu || !t->features) {
    llvm_target_fini(t);
    return llvm_fail(err, errlen, "llvm: out of memory");
  }
  /* x86-64: LLVM takes 64-bit support from the CPU's definition, so an
   * unknown CPU name (which LLVM only warns about and ignores) would leave a
   * subtarget without it and LLVM would abort the process. Naming the
   * feature keeps such a typo a warning. */
  if (!strncmp(t->triple, "x86_64", 6)) {
    if (strstr(t->features, "-64bit")) {
      llvm_fail(err, errlen, "llvm: the features '%s' disable 64-bit mode on %s", t->features,
                t->triple);
      llvm_target_fini(t);
      return 1;
    }
    if (!strstr(t->features, "+64bit")) {
      size_t n = strlen(t->features);
      char *f = malloc(n + 8);
      if (!f) {
        llvm_target_fini(t);
        return llvm_fail(err, errlen, "llvm: out of memory");
      }
      snprintf(f, n + 8, "+64bit%s%s", n ? "," : "", t->features);
      free(t->features);
      t->features = f;
    }
  }
  return 0;
}

LLVMTargetMachineRef llvm_target_machine_create(const LlvmTarget *t, LLVMRelocMode reloc,
                                                LLVMCodeModel code_model) {
  static const LLVMCodeGenOptLevel levels[4] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                                LLVMCodeGenLevelDefault,
                                                LLVMCodeGenLevelAggressive};
  return LLVMCreateTargetMachine(t->target, t->triple, t->cpu, t->features, levels[t->opt_level],
                                 reloc, code_model);
}

int llvm_module_optimise(LLVMModuleRef m, LLVMTargetMachineRef tm, int opt_level, char *err,
                         size_t errlen) {
  /* level 1 (the JIT's): LLVM's O1, whose pipeline has no vectorisers,
   * then the loop and SLP vectorisers and a clean-up of what they leave;
   * llvm_backend.h says why */
  static const char *pipelines[4] = {
      "default<O0>", "default<O1>,function(loop-vectorize,slp-vectorizer,instcombine,simplifycfg)",
      "default<O2>", "default<O3>"};
  if (opt_level < 0 || opt_level > 3)
    return llvm_fail(err, errlen, "llvm: optimisation level %d is not in 0..3", opt_level);
  LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions(); /* ours: dispose below */
  LLVMPassBuilderOptionsSetLoopVectorization(o, opt_level >= 1);
  LLVMPassBuilderOptionsSetSLPVectorization(o, opt_level >= 1);
  LLVMPassBuilderOptionsSetLoopInterleaving(o, opt_level >= 2);
  LLVMPassBuilderOptionsSetLoopUnrolling(o, opt_level >= 2);
  LLVMErrorRef e = LLVMRunPasses(m, pipelines[opt_level], tm, o);
  LLVMDisposePassBuilderOptions(o);
  if (e)
    return llvm_fail_error(e, "llvm: optimisation failed", err, errlen);
  return 0;
}
