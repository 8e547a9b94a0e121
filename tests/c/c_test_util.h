/* tests/c/c_test_util.h — shared helpers of the C backend's tests: scratch
 * directories, running shell commands with their output kept for the
 * failure message, the toolchains under test, a driver program that runs
 * any emitted model on a safetensors file of inputs (any dtype), and
 * reading outputs back. Header-only: every function is static.
 *
 * Commands run through /bin/sh; paths are scratch directories made here
 * (no spaces, no shell metacharacters), so quoting stays simple. */
#ifndef TFMC_TESTS_C_UTIL_H
#define TFMC_TESTS_C_UTIL_H

#include "backends/c/c_backend.h"
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TFMC_SOURCE_DIR
#error "TFMC_SOURCE_DIR must be defined by the build"
#endif
#ifndef TFMC_BINARY_DIR
#error "TFMC_BINARY_DIR must be defined by the build"
#endif

#define CT_RUNTIME_DIR TFMC_SOURCE_DIR "/runtime"
#define CT_WARN "-Wall -Wextra -pedantic -Werror"

/* A fresh scratch directory (removed by ct_rmdir). */
static inline char *ct_mkdtemp(const char *tag) {
  char *p = malloc(256);
  cr_assert(p);
  snprintf(p, 256, "/tmp/tfmc-ctest-%s-XXXXXX", tag);
  cr_assert(mkdtemp(p), "mkdtemp %s failed", p);
  return p;
}

static inline void ct_rmdir(char *dir) {
  if (!dir) return;
  if (!getenv("TFMC_CTEST_KEEP")) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  }
  free(dir);
}

static inline char *ct_read_text(const char *path, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char *s = malloc(cap + 1);
  size_t n;
  while (s && (n = fread(s + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      char *t = realloc(s, cap + 1);
      if (!t) free(s);
      s = t;
    }
  }
  fclose(f);
  if (!s) return NULL;
  s[len] = '\0';
  if (len_out) *len_out = len;
  return s;
}

static inline void ct_write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert(f, "cannot write %s", path);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* Runs a shell command (printf-style) with stdout+stderr into LOG; returns
 * the exit status (-1: did not run). On failure *log_text (if given) holds
 * the last 3000 bytes of the log, malloc'd. */
static inline int ct_sh(char **log_text, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int ct_sh(char **log_text, const char *fmt, ...) {
  char cmd[8192], full[8400], logp[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  snprintf(logp, sizeof logp, "/tmp/tfmc-ctest-log-%ld", (long)getpid());
  snprintf(full, sizeof full, "( %s ) > %s 2>&1", cmd, logp);
  int st = system(full);
  int rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  if (log_text) {
    size_t len = 0;
    char *t = ct_read_text(logp, &len);
    if (t && len > 3000) memmove(t, t + len - 3000, 3001);
    size_t cl = strlen(cmd) > 1000 ? 1000 : strlen(cmd);
    char *msg = malloc(cl + (t ? strlen(t) : 0) + 32);
    if (msg) sprintf(msg, "$ %.*s\n%s", (int)cl, cmd, t ? t : "(no output)");
    free(t);
    *log_text = msg;
  }
  remove(logp);
  return rc;
}

/* Runs a command that must succeed; fails the test with its output. */
#define CT_RUN(...)                                                                \
  do {                                                                             \
    char *ct_log_ = NULL;                                                          \
    int ct_rc_ = ct_sh(&ct_log_, __VA_ARGS__);                                     \
    cr_assert_eq(ct_rc_, 0, "command failed (status %d):\n%s", ct_rc_,             \
                 ct_log_ ? ct_log_ : "");                                          \
    free(ct_log_);                                                                 \
  } while (0)

static inline bool ct_have(const char *tool) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s > /dev/null 2>&1", tool);
  return system(cmd) == 0;
}

/* ---- the driver: runs the model compiled into it on IN.safetensors ----
 *   driver WEIGHTS IN OUT THREADS
 * Inputs are matched to tfmc_model_info.inputs by name and read as their
 * element type (f32 through rt_st_read_f32, i32 / u8 through
 * rt_st_read_i32), binding the symbols from their shapes; outputs are
 * written with the dtype of their element type (F32, I32, U8). Unlike the
 * standalone main it takes float inputs and non-float outputs, which the op
 * tests need. Compiled as C11 (it includes rt_pool.h next to rt_model.h). */
static const char ct_driver_src[] =
    "#include \"runtime/rt_model.h\"\n"
    "#include \"runtime/rt_pool.h\"\n"
    "#include \"runtime/rt_safetensors.h\"\n"
    "#include \"runtime/rt_weights.h\"\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "extern const RtModelInfo tfmc_model_info;\n"
    "void tfmc_model_run(const RtRunArgs *args);\n"
    "static int die(const char *m) { fprintf(stderr, \"driver: %s\\n\", m); return 1; }\n"
    "int main(int argc, char **argv) {\n"
    "  const RtModelInfo *info = &tfmc_model_info;\n"
    "  char err[1024];\n"
    "  if (argc != 5) return die(\"usage: driver WEIGHTS IN OUT THREADS\");\n"
    "  RtWeights *w;\n"
    "  if (rt_weights_open(argv[1], info, &w, err, sizeof err)) return die(err);\n"
    "  RtSafetensors *st;\n"
    "  if (rt_st_open(argv[2], &st, err, sizeof err)) return die(err);\n"
    "  int64_t syms[RT_MAX_SYMS] = {0};\n"
    "  void *in[RT_MAX_IO] = {0};\n"
    "  float *out[RT_MAX_IO] = {0};\n"
    "  for (int i = 0; i < info->n_inputs; i++) {\n"
    "    const RtTensorInfo *t = &info->inputs[i];\n"
    "    const RtStTensor *s = rt_st_find(st, t->name);\n"
    "    if (!s || s->rank != t->rank) return die(\"input missing or of another rank\");\n"
    "    for (int d = 0; d < t->rank; d++)\n"
    "      if (t->dims[d].sym >= 0) syms[t->dims[d].sym] = s->shape[d];\n"
    "    int64_t n = rt_st_numel(s);\n"
    "    in[i] = calloc((size_t)n * 4 + 4, 1);\n"
    "    if (t->elem == RT_ELEM_F32) {\n"
    "      if (rt_st_read_f32(s, in[i], err, sizeof err)) return die(err);\n"
    "    } else {\n"
    "      int32_t *v = calloc((size_t)n + 1, 4);\n"
    "      if (rt_st_read_i32(s, v, INT32_MIN, INT32_MAX, err, sizeof err)) return die(err);\n"
    "      for (int64_t k = 0; k < n; k++) {\n"
    "        if (t->elem == RT_ELEM_I32) ((int32_t *)in[i])[k] = v[k];\n"
    "        else ((uint8_t *)in[i])[k] = (uint8_t)v[k];\n"
    "      }\n"
    "      free(v);\n"
    "    }\n"
    "  }\n"
    "  RtStWrite ws[RT_MAX_IO];\n"
    "  for (int o = 0; o < info->n_outputs; o++) {\n"
    "    const RtTensorInfo *t = &info->outputs[o];\n"
    "    int64_t n = 1;\n"
    "    ws[o].name = t->name;\n"
    "    ws[o].rank = t->rank;\n"
    "    for (int d = 0; d < t->rank; d++) {\n"
    "      ws[o].shape[d] = rt_model_dim(&t->dims[d], syms);\n"
    "      n *= ws[o].shape[d];\n"
    "    }\n"
    "    ws[o].dtype = t->elem == RT_ELEM_F32 ? RT_F32 : t->elem == RT_ELEM_I32 ? RT_I32 : RT_U8;\n"
    "    out[o] = calloc((size_t)n * 4 + 4, 1);\n"
    "    ws[o].data = out[o];\n"
    "  }\n"
    "  int threads = atoi(argv[4]);\n"
    "  RtPool *pool = threads == 1 ? NULL : rt_pool_create(threads);\n"
    "  size_t arena_len = ((size_t)info->arena_bytes + 63) / 64 * 64 + 64;\n"
    "  unsigned char *arena = aligned_alloc(64, arena_len);\n"
    "  if (!arena) return die(\"no memory\");\n"
    "  memset(arena, 0xA5, arena_len); /* garbage: kernels must not read unwritten memory */\n"
    "  unsigned char *state = info->state_bytes ? aligned_alloc(64, ((size_t)info->state_bytes + 63) / 64 * 64) : NULL;\n"
    "  if (state) memset(state, 0, (size_t)info->state_bytes); /* a fresh sequence */\n"
    "  RtRunArgs args = {syms, in, out, rt_weights_data(w), arena, pool, NULL, state};\n"
    "  tfmc_model_run(&args);\n"
    "  if (rt_st_write(argv[3], ws, info->n_outputs, NULL, 0, err, sizeof err)) return die(err);\n"
    "  rt_pool_destroy(pool);\n"
    "  rt_weights_close(w);\n"
    "  rt_st_close(st);\n"
    "  free(arena);\n"
    "  free(state);\n"
    "  for (int i = 0; i < RT_MAX_IO; i++) free(in[i]), free(out[i]);\n"
    "  return 0;\n"
    "}\n";

/* A toolchain under test: compiler, archiver, how to run what it builds. */
typedef struct CtTool {
  const char *name;   /* for messages: "gcc", "clang", "aarch64" */
  const char *cc, *ar;
  const char *run;    /* prefix to run a binary ("" native, "qemu-aarch64 -L ...") */
  bool no_blas;
} CtTool;

/* Compiles the copied runtime of project dir `proj` into LIBDIR/librt.a
 * with tool t (C11, the generated Makefile's flags plus -Werror), and the
 * driver into LIBDIR/driver.o. The runtime is compiled inside proj by
 * relative paths, as its Makefile does, so the preprocessed sources do not
 * name the project's directory and the tests' compile cache
 * (tests/CMakeLists.txt) serves every project the same objects. */
static inline void ct_build_runtime(const CtTool *t, const char *proj, const char *libdir) {
  char path[1024];
  snprintf(path, sizeof path, "%.900s/driver.c", libdir);
  ct_write_text(path, ct_driver_src);
  CT_RUN("cd %s && for f in runtime/rt_*.c; do %s -std=c11 " CT_WARN
         " -O2 -I. -D_POSIX_C_SOURCE=200809L %s -c $f -o %s/$(basename $f .c).o || exit 1; done",
         proj, t->cc, t->no_blas ? "-DTFMC_NO_BLAS" : "", libdir);
  CT_RUN("cd %s && %s rcs librt.a rt_*.o && %s -std=c11 " CT_WARN
         " -O2 -I%s -D_POSIX_C_SOURCE=200809L -c driver.c -o driver.o",
         libdir, t->ar, t->cc, proj);
}

/* Compiles proj/model.c (C99, -Werror) and links it with the driver and
 * the runtime of libdir into proj/driver. */
static inline void ct_build_driver(const CtTool *t, const char *proj, const char *libdir) {
  CT_RUN("cd %s && %s -std=c99 " CT_WARN " -O2 -I. -D_POSIX_C_SOURCE=200809L -c model.c -o model.o"
         " && %s -o driver %s/driver.o model.o %s/librt.a -lm -lpthread %s",
         proj, t->cc, t->cc, libdir, libdir, t->no_blas ? "" : "-ldl");
}

/* Reads output `name` of a safetensors file as floats (any dtype the
 * driver writes); returns a malloc'd array and its element count. */
static inline float *ct_read_output(const char *path, const char *name, int64_t *n_out) {
  RtSafetensors *st;
  char err[512];
  cr_assert_eq(rt_st_open(path, &st, err, sizeof err), 0, "%s", err);
  const RtStTensor *t = rt_st_find(st, name);
  cr_assert(t, "%s has no tensor '%s'", path, name);
  int64_t n = rt_st_numel(t);
  float *v = malloc((size_t)n * sizeof *v + 4);
  if (t->dtype == RT_F32) {
    cr_assert_eq(rt_st_read_f32(t, v, err, sizeof err), 0, "%s", err);
  } else {
    int32_t *iv = malloc((size_t)n * 4 + 4);
    cr_assert_eq(rt_st_read_i32(t, iv, INT32_MIN, INT32_MAX, err, sizeof err), 0, "%s", err);
    for (int64_t i = 0; i < n; i++) v[i] = (float)iv[i];
    free(iv);
  }
  rt_st_close(st);
  *n_out = n;
  return v;
}

#endif
