/* backends/build.c — a standalone executable from a lowered model: the
 * LLVM object file, the generated run-time description (info.c) and
 * settings (model_config.h), the entry (main.c), the packed weights
 * (EXE.weights beside it, or assembled into .rodata by weights.S), linked
 * by the system C compiler with the runtime library. main.c and weights.S
 * are the templates under include_dir/runtime/templates, copied as they
 * are (tfmc emit-c copies the same main.c).
 *
 * Invariants: intermediate files live in EXE.build/ and are removed at the
 * end (success or not) unless keep is set; an embedded build removes a stale
 * EXE.weights, which would mislead; nothing is written outside EXE,
 * EXE.weights and EXE.build/. EXE and EXE.weights are written as rt_file.h
 * outputs (through symlinks, regular files only): both are complete
 * temporaries next to their targets before either gets its name, so a
 * failed build leaves the old files as they were. The caller has checked
 * that neither is one of its inputs. */
#include "backends/exec.h"

#include "backends/c/c_backend.h"
#include "backends/llvm/llvm_backend.h"
#include "ir/loop.h"
#include "runtime/rt_file.h"
#include "runtime/rt_model.h"
#include "runtime/rt_weights.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* argv[0] with its arguments; its exit status, or -1 / 128 when it could not
 * run or did not exit normally. */
static int run_command(char *const argv[]) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execvp(argv[0], argv);
    fprintf(stderr, "tfmc: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int fail(char *err, size_t errlen, const char *what, const char *path) {
  return rt_errorf(err, errlen, "cannot %s %s: %s", what, path, strerror(errno));
}

/* path := the template name (runtime/templates under rt_dir), as it is. */
static int write_template(const char *rt_dir, const char *name, const char *path, char *err,
                          size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f) return fail(err, errlen, "write", path);
  int rc = c_template_put(rt_dir, name, f, err, errlen);
  if (fclose(f) && !rc) rc = fail(err, errlen, "write", path);
  return rc;
}

/* One compiled program of an executable: its object file (entry function
 * `entry`, kernels internal when there are several programs) and its
 * description in a C file (`info_name`). */
typedef struct BuildProgram {
  const LoopProgram *prog;
  const RtModelInfo *info;
  const char *entry, *info_name; /* NULL, NULL: tfmc_model_run, tfmc_model_info */
  const char *stem;              /* EXE.build/STEM.o and STEM_info.c */
} BuildProgram;

/* What an executable is made of: its programs (a forward pass: one; a
 * generation: the decoder step, and the encoder of an encoder_decoder),
 * gen (generation: its RtGenInfo, written to gen_info.c; NULL for a
 * forward pass), the weights image and the RtModelInfo describing it, and
 * the main template (main.c or main_gen.c). */
typedef struct BuildPlan {
  BuildProgram progs[3];
  int n_progs;
  const RtGenInfo *gen;
  const RtModelInfo *weights_info;
  const float *packed;
  const char *main_template;
} BuildPlan;

/* Everything but the cleanup of EXE.build/ and committing *xout (EXE)
 * and *wout (EXE.weights; left unopened when embedded). */
static int build(Arena *a, const BuildPlan *bp, const BuildOptions *o, RtOut *xout, RtOut *wout,
                 char *err, size_t errlen) {
  const char *exe = o->exe, *dir = arena_printf(a, "%s.build", exe);
  bool embed = o->embed_weights;
  char msg[1024];
  if (mkdir(dir, 0755) && errno != EEXIST) return fail(err, errlen, "create", dir);
  const char *main_c = arena_printf(a, "%s/main.c", dir), *wfile = arena_printf(a, "%s.weights", exe);
  const char *wimg = arena_printf(a, "%s/model.weights", dir), *wasm = arena_printf(a, "%s/weights.S", dir);
  const char *config_h = arena_printf(a, "%s/model_config.h", dir);
  const char *gen_c = arena_printf(a, "%s/gen_info.c", dir);
  const char *rt_dir = arena_printf(a, "%s/runtime", o->include_dir);
  const char *objs[3], *infos[3];
  for (int i = 0; i < bp->n_progs; i++) {
    const BuildProgram *pr = &bp->progs[i];
    objs[i] = arena_printf(a, "%s/%s.o", dir, pr->stem);
    infos[i] = arena_printf(a, "%s/%s_info.c", dir, pr->stem);
    /* a big model's code generation takes a moment: say so on a terminal */
    int functions = loop_program_functions(pr->prog);
    bool progress = functions >= 16 && isatty(2);
    if (progress) {
      fprintf(stderr, "tfmc: generating code for %d kernels (%d functions) and linking...",
              pr->prog->n_kernels, functions);
      fflush(stderr);
    }
    LlvmOptions lo = {.opt_level = 3, .entry = pr->entry};
    int orc = llvm_emit_object(pr->prog, bp->n_progs > 1 ? &lo : NULL, objs[i], msg, sizeof msg);
    if (progress) fprintf(stderr, "\r%80s\r", "");
    if (orc) return rt_errorf(err, errlen, "%s", msg);
    FILE *f = fopen(infos[i], "w");
    if (!f) return fail(err, errlen, "write", infos[i]);
    fprintf(f, "#include \"runtime/rt_model.h\"\n\n");
    c_emit_model_info_named(pr->info, pr->info_name ? pr->info_name : "tfmc_model_info", f);
    if (fclose(f)) return fail(err, errlen, "write", infos[i]);
  }
  if (bp->gen) {
    FILE *f = fopen(gen_c, "w");
    if (!f) return fail(err, errlen, "write", gen_c);
    fprintf(f, "#include \"runtime/rt_model.h\"\n\n");
    c_emit_gen_info(bp->gen, f);
    if (fclose(f)) return fail(err, errlen, "write", gen_c);
  }
  FILE *f = fopen(config_h, "w");
  if (!f) return fail(err, errlen, "write", config_h);
  c_emit_model_config_gen(bp->progs[0].info, bp->gen, embed, f);
  if (fclose(f)) return fail(err, errlen, "write", config_h);
  /* main.c and weights.S are the same for every model: runtime/templates */
  if (write_template(rt_dir, bp->main_template, main_c, err, errlen)) return 1;
  const RtModelInfo *wi = bp->weights_info;
  if (embed ? rt_weights_write(wimg, wi, bp->packed, msg, sizeof msg)
            : rt_out_open(wout, wfile, RT_OUT_REGULAR, msg, sizeof msg) ||
                  rt_weights_write_fd(wout->fd, wfile, wi, bp->packed, msg, sizeof msg) ||
                  rt_out_finish(wout, msg, sizeof msg))
    return rt_errorf(err, errlen, "%s", msg);
  /* the linker writes a temporary next to EXE's target; renamed at the end */
  if (rt_out_open(xout, exe, RT_OUT_REGULAR, msg, sizeof msg) || rt_out_finish(xout, msg, sizeof msg))
    return rt_errorf(err, errlen, "%s", msg);
  if (embed && write_template(rt_dir, "weights.S", wasm, err, errlen)) return 1;
  const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  char *cmd[32];
  int n = 0;
  cmd[n++] = (char *)cc;
  cmd[n++] = "-O2";
  cmd[n++] = arena_printf(a, "-I%s", o->include_dir);
  cmd[n++] = arena_printf(a, "-I%s", dir);
  cmd[n++] = "-o";
  cmd[n++] = xout->tmp;
  for (int i = 0; i < bp->n_progs; i++) cmd[n++] = (char *)objs[i], cmd[n++] = (char *)infos[i];
  if (bp->gen) cmd[n++] = (char *)gen_c;
  cmd[n++] = (char *)main_c;
  if (embed) cmd[n++] = arena_printf(a, "-Wa,-I%s", dir), cmd[n++] = (char *)wasm;
  cmd[n++] = (char *)o->runtime_lib;
  cmd[n++] = "-lm";
  cmd[n++] = "-lpthread";
  cmd[n++] = "-ldl";
#ifdef TFMC_LINK_SANITIZE
  /* a TFMC_SANITIZE build's runtime library is instrumented: so is the link */
  cmd[n++] = "-fsanitize=address,undefined";
#endif
  cmd[n] = NULL;
  int st = run_command(cmd);
  if (st != 0) return rt_errorf(err, errlen, "linking %s with %s failed (status %d)", exe, cc, st);
  if ((!embed && rt_out_commit(wout, msg, sizeof msg)) || rt_out_commit(xout, msg, sizeof msg))
    return rt_errorf(err, errlen, "%s", msg);
  if (embed) remove(wfile); /* a stale weights file next to an embedded build would mislead */
  return 0;
}

static int build_plan(Arena *a, const BuildPlan *bp, const BuildOptions *o, char *err,
                      size_t errlen) {
  RtOut xout = {.fd = -1}, wout = {.fd = -1};
  int rc = build(a, bp, o, &xout, &wout, err, errlen);
  rt_out_abort(&xout); /* no-ops once committed */
  rt_out_abort(&wout);
  if (!o->keep) {
    const char *files[] = {"model.o",  "model_info.c", "encode.o", "encode_info.c", "step.o",
                           "step_info.c",
                           "gen_info.c", "model_config.h", "main.c", "model.weights",
                           "weights.S"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
      remove(arena_printf(a, "%s.build/%s", o->exe, files[i]));
    rmdir(arena_printf(a, "%s.build", o->exe));
  }
  return rc;
}

int backend_build_executable(Arena *a, const LoopProgram *prog, const RtModelInfo *info,
                             const float *packed, const BuildOptions *o, char *err,
                             size_t errlen) {
  BuildPlan bp = {.progs = {{prog, info, NULL, NULL, "model"}},
                  .n_progs = 1,
                  .weights_info = info,
                  .packed = packed,
                  .main_template = "main.c"};
  return build_plan(a, &bp, o, err, errlen);
}

int backend_build_generation(Arena *a, const Compiled *forward, const CompiledGeneration *gen,
                             const RtGenInfo *gi, const float *image, const BuildOptions *o,
                             char *err, size_t errlen) {
  BuildPlan bp = {.progs = {{forward->prog, forward->info, "tfmc_model_run", "tfmc_model_info",
                             "model"},
                            {gen->step.prog, gen->step.info, "tfmc_step_run", "tfmc_step_info",
                             "step"},
                            {gen->encode.prog, gen->encode.info, "tfmc_encode_run",
                             "tfmc_encode_info", "encode"}},
                  .n_progs = gen->encoder_decoder ? 3 : 2,
                  .gen = gi,
                  .weights_info = gi->weights,
                  .packed = image,
                  .main_template = "main_gen.c"};
  return build_plan(a, &bp, o, err, errlen);
}
