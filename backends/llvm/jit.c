/* backends/llvm/jit.c — compile a loop program in process with ORC LLJIT.
 *
 * Steps (each LLVMErrorRef is handled where it arises; cleanup runs in
 * reverse order of acquisition, each object's owner named beside it):
 *   1. an LLJIT whose JITTargetMachineBuilder is made from a target machine
 *      with our CPU and features (so JIT code generation matches the
 *      "target-cpu"/"target-features" attributes the module carries);
 *   2. runtime and libm entry points defined as absolute symbols taken from
 *      this process (every function of ir/callees.def, rt_kernel_run,
 *      &expf, ...), plus a process-symbol generator for anything else LLVM's
 *      lowering may call;
 *   3. the module built in the context of a ThreadSafeContext (one context
 *      per compile), optimised, added as a ThreadSafeModule;
 *   4. a lookup of tfmc_model_run, which compiles the whole module.
 *
 * Invariant: a returned RtModelRunFn stays valid until llvm_jit_destroy. */
#include "backends/llvm/llvm_internal.h"
#include "runtime/rt_act.h"
#include "runtime/rt_attention.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_model.h"
#include "runtime/rt_pool.h"

#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* GNU extensions in libm that LLVM's code generator may emit when a
 * function computes both sin(x) and cos(x); math.h declares them only
 * under _GNU_SOURCE. */
extern void sincosf(float x, float *s, float *c);
extern void sincos(double x, double *s, double *c);

struct LlvmJit {
  LLVMOrcLLJITRef lljit;
  char session_error[512]; /* last error the execution session reported */
};

/* Errors that cannot be returned to a caller (e.g. a symbol the JIT linker
 * could not resolve) arrive here; the lookup that triggered them fails and
 * quotes this message. */
static void report_session_error(void *ctx, LLVMErrorRef e) {
  LlvmJit *jit = ctx;
  char *msg = LLVMGetErrorMessage(e); /* consumes e */
  snprintf(jit->session_error, sizeof jit->session_error, "%s", msg ? msg : "?");
  LLVMDisposeErrorMessage(msg);
}

/* The C type of a runtime-call parameter of each kind (ir/loop.h). */
#define LOOP_ARG_KIND_CTYPE(kind, ctype, what) typedef ctype jit_arg_##kind;
LOOP_ARG_KINDS(LOOP_ARG_KIND_CTYPE)
#undef LOOP_ARG_KIND_CTYPE

/* The address of a runtime function of ir/callees.def. It is first assigned
 * to a pointer typed from the row's argument kinds, so a row that does not
 * match the runtime's prototype (a missing, extra or mistyped parameter)
 * fails to compile here instead of crashing generated code. */
static void (*callee_address(LCallee c))(void) {
  switch (c) {
#define LOOP_ARG(kind, name) jit_arg_##kind
#define LOOP_CALLEE(e, fn, doc, ...)                                                            \
  case LC_##e: {                                                                                \
    void (*typed)(__VA_ARGS__) = fn;                                                            \
    return (void (*)(void))typed;                                                               \
  }
#include "ir/callees.def"
#undef LOOP_CALLEE
#undef LOOP_ARG
  case LC_CALLEE_COUNT: break;
  }
  return NULL;
}

/* emit.c declares rt_kernel_run as void (i8*, i32, void (i8*, i64, i64)*,
 * i8*, i64, i64, i32): a runtime prototype that drifts from that fails here. */
_Static_assert(_Generic(&rt_kernel_run,
                        void (*)(const RtRunArgs *, int, RtTaskFn, void *, int64_t, int64_t,
                                 int): 1,
                        default: 0),
               "rt_kernel_run does not have the parameters backends/llvm/emit.c declares");

static int define_runtime_symbols(LLVMOrcLLJITRef j, char *err, size_t errlen) {
  static const struct {
    const char *name;
    void (*addr)(void);
  } libs[] = {
      {"rt_kernel_run", (void (*)(void))rt_kernel_run},
      {"tanhf", (void (*)(void))tanhf},
      {"tanh", (void (*)(void))tanh},
      {"erff", (void (*)(void))erff},
      {"erf", (void (*)(void))erf},
      {"expf", (void (*)(void))expf},
      {"exp", (void (*)(void))exp},
      {"logf", (void (*)(void))logf},
      {"log", (void (*)(void))log},
      {"sinf", (void (*)(void))sinf},
      {"sin", (void (*)(void))sin},
      {"cosf", (void (*)(void))cosf},
      {"cos", (void (*)(void))cos},
      {"sincosf", (void (*)(void))sincosf},
      {"sincos", (void (*)(void))sincos},
      {"sqrtf", (void (*)(void))sqrtf},
      {"sqrt", (void (*)(void))sqrt},
      {"memset", (void (*)(void))memset},
      {"memcpy", (void (*)(void))memcpy},
      {"memmove", (void (*)(void))memmove},
  };
  enum { N_LIBS = sizeof libs / sizeof *libs, N = N_LIBS + LC_CALLEE_COUNT };
  LLVMJITCSymbolMapPair pairs[N];
  for (int i = 0; i < N; i++) {
    const char *name = i < N_LIBS ? libs[i].name : loop_callee_info[i - N_LIBS].name;
    void (*addr)(void) = i < N_LIBS ? libs[i].addr : callee_address((LCallee)(i - N_LIBS));
    pairs[i].Name = LLVMOrcLLJITMangleAndIntern(j, name); /* handed to the MU */
    pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)addr;
    pairs[i].Sym.Flags.GenericFlags =
        LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
    pairs[i].Sym.Flags.TargetFlags = 0;
  }
  LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, N); /* ours until defined */
  LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j), mu);
  if (e) {
    LLVMOrcDisposeMaterializationUnit(mu); /* not transferred on failure */
    return llvm_fail_error(e, "llvm: cannot define runtime symbols", err, errlen);
  }

  LLVMOrcDefinitionGeneratorRef gen = NULL;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j),
                                                           NULL, NULL);
  if (e)
    return llvm_fail_error(e, "llvm: cannot search process symbols", err, errlen);
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j), gen); /* the dylib owns gen */
  return 0;
}

static void dispose_lljit(LLVMOrcLLJITRef j) {
  LLVMErrorRef e = LLVMOrcDisposeLLJIT(j);
  /* Nothing can be done about a failure to tear down (the memory is gone
   * either way); the error must still be consumed. */
  if (e)
    LLVMConsumeError(e);
}

void llvm_jit_destroy(LlvmJit *jit) {
  if (!jit)
    return;
  if (jit->lljit)
    dispose_lljit(jit->lljit);
  free(jit);
}

int llvm_jit_compile(const LoopProgram *p, const LlvmOptions *opt, LlvmJit **jit_out,
                     RtModelRunFn *run, char *err, size_t errlen) {
  *jit_out = NULL;
  *run = NULL;
  LlvmTarget t;
  const LlvmOptions jit_default = {.opt_level = 1}; /* llvm_backend.h: why 1 */
  if (llvm_target_init(&t, opt ? opt : &jit_default, err, errlen))
    return 1; /* t: ours, fini below */

  int rc = 1;
  LlvmJit *jit = calloc(1, sizeof *jit);  /* ours until returned */
  LLVMTargetMachineRef tm = NULL;         /* ours: for the optimiser */
  LLVMOrcThreadSafeContextRef tsc = NULL; /* ours until the module holds it */
  LLVMModuleRef mod = NULL;               /* ours until wrapped in a ThreadSafeModule */
  LLVMErrorRef e;
  if (!jit) {
    llvm_fail(err, errlen, "llvm: out of memory");
    goto out;
  }

  /* 1. the JIT, generating code for our CPU and features */
  LLVMTargetMachineRef jtm =
      llvm_target_machine_create(&t, LLVMRelocDefault, LLVMCodeModelJITDefault);
  if (!jtm) {
    llvm_fail(err, errlen, "llvm: no target machine for cpu '%s'", t.cpu);
    goto out;
  }
  /* the builder consumes jtm; the LLJIT builder then owns jtmb, and
   * LLVMOrcCreateLLJIT consumes the LLJIT builder whether it succeeds or not */
  LLVMOrcJITTargetMachineBuilderRef jtmb =
      LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jtm);
  LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, jtmb);
  e = LLVMOrcCreateLLJIT(&jit->lljit, builder);
  if (e) {
    jit->lljit = NULL;
    llvm_fail_error(e, "llvm: cannot create the JIT", err, errlen);
    goto out;
  }
  LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(jit->lljit),
                                          report_session_error, jit);

  /* 2. what generated code calls */
  if (define_runtime_symbols(jit->lljit, err, errlen))
    goto out;

  /* 3. the module, in a context of its own */
  tm = llvm_target_machine_create(&t, LLVMRelocDefault, LLVMCodeModelJITDefault);
  if (!tm) {
    llvm_fail(err, errlen, "llvm: no target machine for cpu '%s'", t.cpu);
    goto out;
  }
  tsc = LLVMOrcCreateNewThreadSafeContext();
  if (llvm_module_emit(p, &t, tm, LLVMOrcThreadSafeContextGetContext(tsc), &mod, err, errlen))
    goto out;
  if (llvm_module_optimise(mod, tm, t.opt_level, err, errlen))
    goto out;
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc); /* owns mod */
  mod = NULL;
  LLVMOrcDisposeThreadSafeContext(tsc); /* the module keeps the context alive */
  tsc = NULL;
  e = LLVMOrcLLJITAddLLVMIRModule(jit->lljit, LLVMOrcLLJITGetMainJITDylib(jit->lljit), tsm);
  if (e) { /* tsm belongs to the JIT even on failure */
    llvm_fail_error(e, "llvm: cannot add the module to the JIT", err, errlen);
    goto out;
  }

  /* 4. compile and find the entry point */
  LLVMOrcExecutorAddress addr = 0;
  e = LLVMOrcLLJITLookup(jit->lljit, &addr, "tfmc_model_run");
  if (e) {
    char what[600];
    snprintf(what, sizeof what, "llvm: JIT compilation failed%s%s",
             jit->session_error[0] ? " (" : "", jit->session_error[0] ? jit->session_error : "");
    if (jit->session_error[0])
      strncat(what, ")", sizeof what - strlen(what) - 1);
    llvm_fail_error(e, what, err, errlen);
    goto out;
  }
  if (!addr) {
    llvm_fail(err, errlen, "llvm: tfmc_model_run resolved to address 0");
    goto out;
  }
  *run = (RtModelRunFn)(uintptr_t)addr;
  *jit_out = jit;
  jit = NULL;
  rc = 0;

out:
  if (mod)
    LLVMDisposeModule(mod);
  if (tsc)
    LLVMOrcDisposeThreadSafeContext(tsc);
  if (tm)
    LLVMDisposeTargetMachine(tm);
  llvm_jit_destroy(jit); /* NULL on success */
  llvm_target_fini(&t);
  return rc;
}

void *llvm_jit_lookup(LlvmJit *jit, const char *name) {
  LLVMOrcExecutorAddress addr = 0;
  LLVMErrorRef e = LLVMOrcLLJITLookup(jit->lljit, &addr, name);
  if (e) {
    LLVMConsumeError(e); /* absent: the caller reports it by name */
    return NULL;
  }
  return (void *)(uintptr_t)addr;
}
