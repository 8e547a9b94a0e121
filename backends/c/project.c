/* backends/c/project.c — the emitted C project (c_emit_project):
 *
 *   DIR/model.c          kernels, tfmc_model_run, tfmc_model_info (emit.c)
 *   DIR/model.h          the static library's C API (create / run / destroy)
 *   DIR/api.c            its implementation over the runtime
 *   DIR/main.c           the standalone executable (rt_main)
 *   DIR/EXE.weights      packed weights, found by EXE next to itself; or
 *   DIR/weights.c        the same bytes as a C array (embed_weights)
 *   DIR/runtime/rt_*     the runtime sources, copied from opt->runtime_dir
 *   DIR/Makefile         `make` builds EXE and libmodel.a; NO_BLAS=1 without BLAS
 *   DIR/CMakeLists.txt   the same with CMake (-DNO_BLAS=ON)
 * where EXE is the model's name reduced to [A-Za-z0-9_] (c_exe_name).
 *
 * The generated sources (model.c, api.c, main.c, weights.c, model.h) are
 * C99 and compile cleanly with -std=c99 -Wall -Wextra -pedantic under gcc
 * and clang; the runtime is the project's own C11 code (atomics) and is
 * built with -std=c11.
 *
 * Invariants: the same program, info, weights and runtime give the same
 * bytes in every file (no timestamps, no paths, sorted listings); each file
 * is written to NAME.tmp and renamed over NAME, so a failed emission never
 * leaves a half-written file under a real name; only the files listed above
 * are written. */
#include "backends/c/c_internal.h"
#include "runtime/rt_weights.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PATH_CAP 4096

typedef struct Proj {
  const LoopProgram *p;
  const RtModelInfo *info;
  const float *weights;
  const CEmitOptions *opt;
  const char *dir;
  char exe[80];
  char weights_literal[96]; /* "EXE.weights" with its quotes */
  char **rt_files; /* runtime file names, sorted */
  int n_rt_files;
  char *err;
  size_t errlen;
} Proj;

typedef struct OutFile {
  FILE *f;
  char path[PATH_CAP], tmp[PATH_CAP + 8];
} OutFile;

/* ---- files ---- */

static int join(Proj *P, char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s/%s", a, b);
  if (n < 0 || (size_t)n >= cap) return c_fail(P->err, P->errlen, "c: path too long: %s/%s", a, b);
  return 0;
}

static int out_open(Proj *P, OutFile *o, const char *name) {
  if (join(P, o->path, sizeof o->path, P->dir, name)) return 1;
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->path);
  o->f = fopen(o->tmp, "wb");
  if (!o->f) return c_fail(P->err, P->errlen, "c: cannot write %s: %s", o->tmp, strerror(errno));
  return 0;
}

static int out_close(Proj *P, OutFile *o) {
  bool bad = ferror(o->f) != 0;
  if (fclose(o->f) != 0) bad = true;
  o->f = NULL;
  if (bad) {
    int e = errno;
    remove(o->tmp);
    return c_fail(P->err, P->errlen, "c: cannot write %s: %s", o->path, strerror(e));
  }
  if (rename(o->tmp, o->path) != 0) {
    int e = errno;
    remove(o->tmp);
    return c_fail(P->err, P->errlen, "c: cannot rename %s: %s", o->tmp, strerror(e));
  }
  return 0;
}

static void out_abandon(OutFile *o) {
  if (o->f) fclose(o->f);
  o->f = NULL;
  remove(o->tmp);
}

/* mkdir -p */
static int make_dirs(Proj *P, const char *path) {
  char buf[PATH_CAP];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return c_fail(P->err, P->errlen, "c: bad directory '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char keep = buf[i];
    buf[i] = '\0';
    struct stat st;
    if (stat(buf, &st) != 0) {
      if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return c_fail(P->err, P->errlen, "c: cannot create %s: %s", buf, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
      return c_fail(P->err, P->errlen, "c: %s exists and is not a directory", buf);
    }
    buf[i] = keep;
  }
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_runtime_file(const char *name) {
  size_t n = strlen(name);
  if (n < 6 || strncmp(name, "rt_", 3) != 0) return false;
  if (strcmp(name + n - 2, ".c") != 0 && strcmp(name + n - 2, ".h") != 0) return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.'))
      return false; /* it goes into the Makefile as is */
  }
  return true;
}

/* The runtime's rt_*.c / rt_*.h, sorted by name. */
static int list_runtime(Proj *P) {
  const char *rd = P->opt->runtime_dir;
  DIR *d = opendir(rd);
  if (!d) return c_fail(P->err, P->errlen, "c: cannot read the runtime directory %s: %s", rd,
                        strerror(errno));
  int cap = 0;
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL) {
    if (!is_runtime_file(de->d_name)) continue;
    if (P->n_rt_files == cap) {
      cap = cap ? 2 * cap : 32;
      char **nf = realloc(P->rt_files, (size_t)cap * sizeof *nf);
      if (!nf) {
        rc = c_fail(P->err, P->errlen, "c: out of memory");
        break;
      }
      P->rt_files = nf;
    }
    P->rt_files[P->n_rt_files] = malloc(strlen(de->d_name) + 1);
    if (!P->rt_files[P->n_rt_files]) {
      rc = c_fail(P->err, P->errlen, "c: out of memory");
      break;
    }
    strcpy(P->rt_files[P->n_rt_files++], de->d_name);
  }
  closedir(d);
  if (rc) return rc;
  if (P->n_rt_files) qsort(P->rt_files, (size_t)P->n_rt_files, sizeof *P->rt_files, cmp_str);
  static const char *const needed[] = {"rt_model.h", "rt_main.c", "rt_model.c",  "rt_weights.c",
                                       "rt_pool.c",  "rt_gemm.c", "rt_profile.c"};
  for (size_t i = 0; i < sizeof needed / sizeof *needed; i++) {
    bool found = false;
    for (int k = 0; k < P->n_rt_files && !found; k++) found = !strcmp(P->rt_files[k], needed[i]);
    if (!found)
      return c_fail(P->err, P->errlen, "c: the runtime directory %s has no %s", rd, needed[i]);
  }
  return 0;
}

static int copy_file(Proj *P, const char *from, const char *to_name) {
  FILE *in = fopen(from, "rb");
  if (!in) return c_fail(P->err, P->errlen, "c: cannot read %s: %s", from, strerror(errno));
  OutFile o;
  if (out_open(P, &o, to_name)) {
    fclose(in);
    return 1;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, o.f) != n) break;
  bool bad = ferror(in) != 0;
  fclose(in);
  if (bad) {
    out_abandon(&o);
    return c_fail(P->err, P->errlen, "c: cannot read %s", from);
  }
  return out_close(P, &o);
}

static int copy_runtime(Proj *P) {
  for (int i = 0; i < P->n_rt_files; i++) {
    char from[PATH_CAP], to[PATH_CAP];
    if (join(P, from, sizeof from, P->opt->runtime_dir, P->rt_files[i]) ||
        join(P, to, sizeof to, "runtime", P->rt_files[i]) || copy_file(P, from, to))
      return 1;
  }
  return 0;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- weights ---- */

/* Writes the packed image as a C string literal, 64 input bytes per line:
 * printable bytes as themselves (not '"', '\\', '?'), others as the
 * shortest octal escape, three digits when an octal digit follows. A string
 * initializer compiles an order of magnitude faster and leaner than a brace
 * list (32 MiB: 4 s / 0.6 GB with gcc 12 against 73 s / 5 GB). */
static int write_weights_c(Proj *P, const char *image_path) {
  FILE *in = fopen(image_path, "rb");
  if (!in) return c_fail(P->err, P->errlen, "c: cannot read %s: %s", image_path, strerror(errno));
  if (fseek(in, 0, SEEK_END) != 0) {
    fclose(in);
    return c_fail(P->err, P->errlen, "c: cannot size %s", image_path);
  }
  long size = ftell(in);
  rewind(in);
  OutFile o;
  if (size < 0 || out_open(P, &o, "weights.c")) {
    fclose(in);
    return size < 0 ? c_fail(P->err, P->errlen, "c: cannot size %s", image_path) : 1;
  }
  fputs("/* weights.c - generated by tfmc: the packed weights of model ", o.f);
  c_put_comment(o.f, P->info->name);
  fprintf(o.f,
          ",\n"
          " * %ld bytes in the format of runtime/rt_weights.h (checked by the runtime\n"
          " * before use: layout hash, size, checksum), embedded in the program.\n"
          " * One string literal: gcc and clang compile that fast; compilers with a\n"
          " * small string limit (MSVC) need the weights file instead. */\n"
          "#include <stddef.h>\n"
          "\n"
          "#if defined(__GNUC__)\n"
          "#pragma GCC diagnostic ignored \"-Woverlength-strings\"\n"
          "#define TFMC_ALIGN64 __attribute__((aligned(64)))\n"
          "#else\n"
          "#define TFMC_ALIGN64\n"
          "#endif\n"
          "\n"
          "extern const unsigned char tfmc_weights_image[%ld];\n"
          "extern const size_t tfmc_weights_image_size;\n"
          "const size_t tfmc_weights_image_size = %ld;\n"
          "const unsigned char tfmc_weights_image[%ld] TFMC_ALIGN64 =\n",
          size, size, size, size);
  enum { LINE = 64, CHUNK = LINE * 1024 };
  unsigned char *buf = malloc(CHUNK);
  char *text = malloc((size_t)CHUNK / LINE * (LINE * 4 + 4));
  int rc = 0;
  if (!buf || !text) rc = c_fail(P->err, P->errlen, "c: out of memory");
  size_t n;
  while (!rc && (n = fread(buf, 1, CHUNK, in)) > 0) {
    size_t t = 0;
    for (size_t line = 0; line < n; line += LINE) {
      size_t end = line + LINE < n ? line + LINE : n;
      text[t++] = '"';
      for (size_t i = line; i < end; i++) {
        unsigned char c = buf[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') {
          text[t++] = (char)c;
          continue;
        }
        unsigned char next = i + 1 < end ? buf[i + 1] : 0;
        bool digit_next = next >= '0' && next <= '7';
        text[t++] = '\\';
        if (digit_next || c >= 0100) text[t++] = (char)('0' + (c >> 6));
        if (digit_next || c >= 010) text[t++] = (char)('0' + ((c >> 3) & 7));
        text[t++] = (char)('0' + (c & 7));
      }
      text[t++] = '"';
      text[t++] = '\n';
    }
    if (fwrite(text, 1, t, o.f) != t) rc = c_fail(P->err, P->errlen, "c: cannot write weights.c");
  }
  if (!rc && ferror(in)) rc = c_fail(P->err, P->errlen, "c: cannot read %s", image_path);
  free(buf);
  free(text);
  fclose(in);
  if (rc) {
    out_abandon(&o);
    return rc;
  }
  fputs(";\n", o.f);
  return out_close(P, &o);
}

static int write_weights(Proj *P) {
  char path[PATH_CAP], name[128];
  char werr[512];
  snprintf(name, sizeof name, P->opt->embed_weights ? ".%s.weights.image" : "%s.weights", P->exe);
  if (join(P, path, sizeof path, P->dir, name)) return 1;
  static const float none[1] = {0};
  if (rt_weights_write(path, P->info, P->weights ? P->weights : none, werr, sizeof werr))
    return c_fail(P->err, P->errlen, "c: %s", werr);
  if (!P->opt->embed_weights) return 0;
  int rc = write_weights_c(P, path);
  remove(path);
  return rc;
}

/* ---- model.h, api.c, main.c ---- */

/* model.h after its per-model comment (the API is the same for every
 * model; the comment lists this model's dims, inputs and outputs). */
static const char *const MODEL_H_BODY[] = {
    "#ifndef TFMC_MODEL_H",
    "#define TFMC_MODEL_H",
    "",
    "#include <stddef.h>",
    "#include <stdint.h>",
    "",
    "#ifdef __cplusplus",
    "extern \"C\" {",
    "#endif",
    "",
    "/* A loaded model: its weights, a thread pool and its activation arena. */",
    "typedef struct TfmcModel TfmcModel;",
    "",
    "#define TFMC_MAX_RANK 4",
    "#define TFMC_INPUT_IDS 0  /* int32 token ids, each in [0, vocab) */",
    "#define TFMC_INPUT_MASK 1 /* uint8 padding mask [batch, length], 1 = real token */",
    "",
    "/* ---- what the model takes and gives (no TfmcModel needed) ----",
    " * Strings returned are static; an index out of range gives NULL / 0 / -1. */",
    "const char *tfmc_model_name(void);",
    "int tfmc_model_n_dims(void);             /* run-time dimensions (batch, lengths) */",
    "const char *tfmc_model_dim_name(int i);",
    "int64_t tfmc_model_dim_max(int i);       /* each dim is 1..max at run time */",
    "int tfmc_model_n_inputs(void);",
    "const char *tfmc_model_input_name(int i);",
    "int tfmc_model_input_kind(int i);        /* TFMC_INPUT_IDS or TFMC_INPUT_MASK */",
    "int64_t tfmc_model_input_vocab(int i);   /* ids: the exclusive bound; masks: 0 */",
    "int tfmc_model_n_outputs(void);",
    "const char *tfmc_model_output_name(int i);",
    "/* The shape of input / output i when the dims take the values dims[0..n_dims):",
    " * writes the extents to shape[0..rank) and returns rank (<= TFMC_MAX_RANK),",
    " * or -1 when i or a dim value is out of range. *_numel: the element count. */",
    "int tfmc_model_input_shape(int i, const int64_t *dims, int64_t *shape);",
    "int tfmc_model_output_shape(int i, const int64_t *dims, int64_t *shape);",
    "int64_t tfmc_model_input_numel(int i, const int64_t *dims);",
    "int64_t tfmc_model_output_numel(int i, const int64_t *dims);",
    "",
    "/* ---- running ---- */",
    "",
    "/* Loads the model. weights_path: a packed-weights file (written by tfmc",
    " * next to this project as NAME.weights; mapped read-only, checked against",
    " * this model: layout, size, checksum), or NULL for the weights embedded in",
    " * the library (emitted with --embed-weights; an error otherwise).",
    " * n_threads: 0 = one per online CPU, 1 = run on the calling thread only,",
    " * up to 256. Returns NULL with a message in err on failure.",
    " * The caller owns the result and frees it with tfmc_model_destroy. */",
    "TfmcModel *tfmc_model_create(const char *weights_path, int n_threads, char *err,",
    "                             size_t errlen);",
    "",
    "/* Runs the forward pass on caller-owned buffers.",
    " *   dims[i]     the value of dimension i (tfmc_model_dim_name(i)), 1..max",
    " *   inputs[i]   input i, row-major with tfmc_model_input_shape(i, dims):",
    " *               int32_t token ids (checked < vocab), or a uint8_t mask",
    " *               (0/1, at least one 1 per sequence); a mask may be NULL: it",
    " *               is then derived from its ids (ids != pad id when the model",
    " *               has one, else all real). Only read.",
    " *   outputs[o]  float buffers of tfmc_model_output_numel(o, dims) elements,",
    " *               overwritten.",
    " * Returns 0, or non-zero with a message in err (nothing is run then).",
    " * One run at a time per TfmcModel (it owns one arena); separate TfmcModels",
    " * share nothing and may run concurrently. Allocates nothing (the runtime",
    " * GEMM's per-thread packing buffers aside, made once on first use). */",
    "int tfmc_model_run_buffers(TfmcModel *m, const int64_t *dims, const void *const *inputs,",
    "                           float *const *outputs, char *err, size_t errlen);",
    "",
    "/* Runs on a safetensors file of inputs, writing a safetensors file of",
    " * outputs (replaced atomically), exactly as the executable does: ids of any",
    " * integer dtype; masks given as mask, lengths, or derived from pad ids.",
    " * Returns 0 or non-zero with a message. */",
    "int tfmc_model_run_files(TfmcModel *m, const char *inputs_path, const char *outputs_path,",
    "                         char *err, size_t errlen);",
    "",
    "/* Frees everything tfmc_model_create allocated (NULL is fine). */",
    "void tfmc_model_destroy(TfmcModel *m);",
    "",
    "#ifdef __cplusplus",
    "}",
    "#endif",
    "",
    "#endif",
    NULL};

/* api.c after its first lines (which say whether weights are embedded). */
static const char *const API_BODY[] = {
    "#include \"model.h\"",
    "",
    "#include \"runtime/rt_model.h\"",
    "#include \"runtime/rt_safetensors.h\"",
    "#include \"runtime/rt_weights.h\"",
    "",
    "#include <stdarg.h>",
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "#include <string.h>",
    "",
    "/* The compiled model (model.c) and, when embedded, its weights (weights.c). */",
    "extern const RtModelInfo tfmc_model_info;",
    "void tfmc_model_run(const RtRunArgs *args);",
    "#if TFMC_EMBEDDED_WEIGHTS",
    "extern const unsigned char tfmc_weights_image[];",
    "extern const size_t tfmc_weights_image_size;",
    "#endif",
    "",
    "/* Runtime entry points (runtime/rt_pool.h, runtime/rt_gemm.h), declared",
    " * here because those headers and rt_model.h each typedef RtPool, which C99",
    " * allows only once per translation unit. */",
    "RtPool *rt_pool_create(int n_threads);",
    "void rt_pool_destroy(RtPool *p);",
    "const char *rt_gemm_backend(void);",
    "",
    "#define TFMC_MAX_THREADS 256",
    "",
    "struct TfmcModel {",
    "  RtWeights *weights;             /* mapped file or validated embedded image */",
    "  RtPool *pool;                   /* NULL: runs on the calling thread */",
    "  void *arena_raw;                /* malloc'd; arena is its 64-byte aligned part */",
    "  unsigned char *arena;",
    "  uint8_t *masks[RT_MAX_IO];      /* derived masks for mask inputs given as NULL */",
    "};",
    "",
    "static int api_fail(char *err, size_t errlen, const char *fmt, ...) {",
    "  if (err && errlen) {",
    "    va_list ap;",
    "    va_start(ap, fmt);",
    "    vsnprintf(err, errlen, fmt, ap);",
    "    va_end(ap);",
    "  }",
    "  return 1;",
    "}",
    "",
    "/* ---- description ---- */",
    "",
    "const char *tfmc_model_name(void) { return tfmc_model_info.name; }",
    "int tfmc_model_n_dims(void) { return tfmc_model_info.n_syms; }",
    "",
    "const char *tfmc_model_dim_name(int i) {",
    "  return i >= 0 && i < tfmc_model_info.n_syms ? tfmc_model_info.sym_names[i] : NULL;",
    "}",
    "",
    "int64_t tfmc_model_dim_max(int i) {",
    "  return i >= 0 && i < tfmc_model_info.n_syms ? tfmc_model_info.sym_max[i] : 0;",
    "}",
    "",
    "int tfmc_model_n_inputs(void) { return tfmc_model_info.n_inputs; }",
    "int tfmc_model_n_outputs(void) { return tfmc_model_info.n_outputs; }",
    "",
    "const char *tfmc_model_input_name(int i) {",
    "  return i >= 0 && i < tfmc_model_info.n_inputs ? tfmc_model_info.inputs[i].name : NULL;",
    "}",
    "",
    "const char *tfmc_model_output_name(int i) {",
    "  return i >= 0 && i < tfmc_model_info.n_outputs ? tfmc_model_info.outputs[i].name : NULL;",
    "}",
    "",
    "int tfmc_model_input_kind(int i) {",
    "  if (i < 0 || i >= tfmc_model_info.n_inputs) return -1;",
    "  return tfmc_model_info.inputs[i].kind == RT_INPUT_MASK ? TFMC_INPUT_MASK : TFMC_INPUT_IDS;",
    "}",
    "",
    "int64_t tfmc_model_input_vocab(int i) {",
    "  if (i < 0 || i >= tfmc_model_info.n_inputs) return 0;",
    "  return tfmc_model_info.inputs[i].kind == RT_INPUT_IDS ? tfmc_model_info.inputs[i].vocab : 0;",
    "}",
    "",
    "static int dims_ok(const int64_t *dims) {",
    "  if (!dims && tfmc_model_info.n_syms > 0) return 0;",
    "  for (int s = 0; s < tfmc_model_info.n_syms; s++)",
    "    if (dims[s] < 1 || dims[s] > tfmc_model_info.sym_max[s]) return 0;",
    "  return 1;",
    "}",
    "",
    "static int tensor_shape(const RtTensorInfo *t, const int64_t *dims, int64_t *shape) {",
    "  if (!dims_ok(dims)) return -1;",
    "  for (int d = 0; d < t->rank; d++)",
    "    shape[d] = t->dims[d].sym >= 0 ? dims[t->dims[d].sym] : t->dims[d].value;",
    "  return t->rank;",
    "}",
    "",
    "static int64_t tensor_numel(const RtTensorInfo *t, const int64_t *dims) {",
    "  int64_t shape[TFMC_MAX_RANK], n = 1;",
    "  int rank = tensor_shape(t, dims, shape);",
    "  if (rank < 0) return -1;",
    "  for (int d = 0; d < rank; d++) n *= shape[d];",
    "  return n;",
    "}",
    "",
    "int tfmc_model_input_shape(int i, const int64_t *dims, int64_t *shape) {",
    "  if (i < 0 || i >= tfmc_model_info.n_inputs || !shape) return -1;",
    "  return tensor_shape(&tfmc_model_info.inputs[i], dims, shape);",
    "}",
    "",
    "int tfmc_model_output_shape(int i, const int64_t *dims, int64_t *shape) {",
    "  if (i < 0 || i >= tfmc_model_info.n_outputs || !shape) return -1;",
    "  return tensor_shape(&tfmc_model_info.outputs[i], dims, shape);",
    "}",
    "",
    "int64_t tfmc_model_input_numel(int i, const int64_t *dims) {",
    "  if (i < 0 || i >= tfmc_model_info.n_inputs) return -1;",
    "  return tensor_numel(&tfmc_model_info.inputs[i], dims);",
    "}",
    "",
    "int64_t tfmc_model_output_numel(int i, const int64_t *dims) {",
    "  if (i < 0 || i >= tfmc_model_info.n_outputs) return -1;",
    "  return tensor_numel(&tfmc_model_info.outputs[i], dims);",
    "}",
    "",
    "/* ---- create / destroy ---- */",
    "",
    "static int64_t max_numel(const RtTensorInfo *t) {",
    "  int64_t n = 1;",
    "  for (int d = 0; d < t->rank; d++)",
    "    n *= t->dims[d].sym >= 0 ? tfmc_model_info.sym_max[t->dims[d].sym] : t->dims[d].value;",
    "  return n;",
    "}",
    "",
    "TfmcModel *tfmc_model_create(const char *weights_path, int n_threads, char *err, size_t errlen) {",
    "  const RtModelInfo *info = &tfmc_model_info;",
    "  if (info->abi_version != RT_ABI_VERSION) {",
    "    api_fail(err, errlen, \"model '%s' was compiled for runtime ABI %u; this runtime is ABI %d\",",
    "             info->name, info->abi_version, RT_ABI_VERSION);",
    "    return NULL;",
    "  }",
    "  if (n_threads < 0 || n_threads > TFMC_MAX_THREADS) {",
    "    api_fail(err, errlen, \"n_threads must be in 0..%d (0: one per CPU), not %d\",",
    "             TFMC_MAX_THREADS, n_threads);",
    "    return NULL;",
    "  }",
    "  TfmcModel *m = calloc(1, sizeof *m);",
    "  if (!m) {",
    "    api_fail(err, errlen, \"out of memory\");",
    "    return NULL;",
    "  }",
    "  int rc;",
    "  if (weights_path) {",
    "    rc = rt_weights_open(weights_path, info, &m->weights, err, errlen);",
    "  } else {",
    "#if TFMC_EMBEDDED_WEIGHTS",
    "    rc = rt_weights_from_memory(tfmc_weights_image, tfmc_weights_image_size, info, &m->weights,",
    "                                err, errlen);",
    "#else",
    "    rc = api_fail(err, errlen, \"model '%s' has no embedded weights: give the weights file\",",
    "                  info->name);",
    "#endif",
    "  }",
    "  if (rc) goto fail;",
    "  if (info->arena_bytes < 0 || (uint64_t)info->arena_bytes > (uint64_t)SIZE_MAX - 128) {",
    "    api_fail(err, errlen, \"bad arena size %lld\", (long long)info->arena_bytes);",
    "    goto fail;",
    "  }",
    "  m->arena_raw = malloc((size_t)info->arena_bytes + 64);",
    "  if (!m->arena_raw) {",
    "    api_fail(err, errlen, \"out of memory: the model needs %lld bytes of activations\",",
    "             (long long)info->arena_bytes);",
    "    goto fail;",
    "  }",
    "  m->arena = (unsigned char *)m->arena_raw + (64 - (size_t)((uintptr_t)m->arena_raw % 64)) % 64;",
    "  for (int i = 0; i < info->n_inputs; i++) {",
    "    if (info->inputs[i].kind != RT_INPUT_MASK) continue;",
    "    m->masks[i] = malloc((size_t)max_numel(&info->inputs[i]) + 1);",
    "    if (!m->masks[i]) {",
    "      api_fail(err, errlen, \"out of memory\");",
    "      goto fail;",
    "    }",
    "  }",
    "  (void)rt_gemm_backend(); /* may set environment variables: before any thread starts */",
    "  if (n_threads != 1) m->pool = rt_pool_create(n_threads); /* NULL: serial */",
    "  return m;",
    "fail:",
    "  tfmc_model_destroy(m);",
    "  return NULL;",
    "}",
    "",
    "void tfmc_model_destroy(TfmcModel *m) {",
    "  if (!m) return;",
    "  rt_pool_destroy(m->pool);",
    "  for (int i = 0; i < RT_MAX_IO; i++) free(m->masks[i]);",
    "  free(m->arena_raw);",
    "  rt_weights_close(m->weights);",
    "  free(m);",
    "}",
    "",
    "/* ---- running ---- */",
    "",
    "static int find_input(const char *name) {",
    "  for (int i = 0; name && i < tfmc_model_info.n_inputs; i++)",
    "    if (strcmp(tfmc_model_info.inputs[i].name, name) == 0) return i;",
    "  return -1;",
    "}",
    "",
    "int tfmc_model_run_buffers(TfmcModel *m, const int64_t *dims, const void *const *inputs,",
    "                           float *const *outputs, char *err, size_t errlen) {",
    "  const RtModelInfo *info = &tfmc_model_info;",
    "  void *in[RT_MAX_IO] = {NULL};",
    "  if (!m) return api_fail(err, errlen, \"no model\");",
    "  if ((info->n_inputs && !inputs) || (info->n_outputs && !outputs))",
    "    return api_fail(err, errlen, \"no input or output array\");",
    "  if (info->n_syms && !dims) return api_fail(err, errlen, \"no dims array\");",
    "  for (int s = 0; s < info->n_syms; s++)",
    "    if (dims[s] < 1 || dims[s] > info->sym_max[s])",
    "      return api_fail(err, errlen, \"dimension %s is %lld; it must be in 1..%lld\",",
    "                      info->sym_names[s], (long long)dims[s], (long long)info->sym_max[s]);",
    "  /* ids first: a mask given as NULL is derived from the ids it pads */",
    "  for (int i = 0; i < info->n_inputs; i++) {",
    "    const RtTensorInfo *t = &info->inputs[i];",
    "    if (t->kind == RT_INPUT_MASK) continue;",
    "    if (!inputs[i]) return api_fail(err, errlen, \"input '%s' is missing\", t->name);",
    "    in[i] = (void *)(uintptr_t)inputs[i]; /* only read */",
    "    if (t->elem != RT_ELEM_I32) continue;",
    "    const int32_t *ids = inputs[i];",
    "    int64_t n = tensor_numel(t, dims);",
    "    for (int64_t k = 0; k < n; k++)",
    "      if (ids[k] < 0 || (t->vocab > 0 && ids[k] >= t->vocab))",
    "        return api_fail(err, errlen, \"input '%s'[%lld] is %ld; token ids must be in [0, %lld)\",",
    "                        t->name, (long long)k, (long)ids[k], (long long)t->vocab);",
    "  }",
    "  for (int i = 0; i < info->n_inputs; i++) {",
    "    const RtTensorInfo *t = &info->inputs[i];",
    "    if (t->kind != RT_INPUT_MASK) continue;",
    "    int64_t shape[TFMC_MAX_RANK];",
    "    if (tensor_shape(t, dims, shape) != 2)",
    "      return api_fail(err, errlen, \"mask input '%s' is not [batch, length]\", t->name);",
    "    const uint8_t *mask = inputs[i];",
    "    if (!mask) { /* ids != pad id, else every token real */",
    "      int ids = find_input(t->ids_input);",
    "      const int32_t *tok = ids >= 0 ? inputs[ids] : NULL;",
    "      for (int64_t k = 0; k < shape[0] * shape[1]; k++)",
    "        m->masks[i][k] = (uint8_t)(!tok || info->pad_id < 0 || tok[k] != info->pad_id);",
    "      mask = m->masks[i];",
    "    }",
    "    for (int64_t b = 0; b < shape[0]; b++) {",
    "      int64_t real = 0;",
    "      for (int64_t l = 0; l < shape[1]; l++) {",
    "        uint8_t v = mask[b * shape[1] + l];",
    "        if (v > 1)",
    "          return api_fail(err, errlen, \"mask '%s'[%lld,%lld] is %d; masks hold 0 or 1\", t->name,",
    "                          (long long)b, (long long)l, v);",
    "        real += v;",
    "      }",
    "      if (real == 0)",
    "        return api_fail(err, errlen, \"mask '%s': sequence %lld has no real token\", t->name,",
    "                        (long long)b);",
    "    }",
    "    in[i] = (void *)(uintptr_t)mask;",
    "  }",
    "  for (int o = 0; o < info->n_outputs; o++)",
    "    if (!outputs[o])",
    "      return api_fail(err, errlen, \"output '%s' has no buffer\", info->outputs[o].name);",
    "  RtRunArgs args = {dims, in, outputs, rt_weights_data(m->weights), m->arena, m->pool, NULL};",
    "  tfmc_model_run(&args);",
    "  return 0;",
    "}",
    "",
    "int tfmc_model_run_files(TfmcModel *m, const char *inputs_path, const char *outputs_path,",
    "                         char *err, size_t errlen) {",
    "  if (!m || !inputs_path || !outputs_path) return api_fail(err, errlen, \"no model or file name\");",
    "  RtSafetensors *st = NULL;",
    "  RtBound b;",
    "  if (rt_st_open(inputs_path, &st, err, errlen)) return 1;",
    "  int rc = rt_model_bind(&tfmc_model_info, st, inputs_path, &b, err, errlen);",
    "  rt_st_close(st);",
    "  if (rc) return 1;",
    "  RtRunArgs args = {b.syms, b.inputs, b.outputs, rt_weights_data(m->weights), m->arena, m->pool,",
    "                    NULL};",
    "  tfmc_model_run(&args);",
    "  rc = rt_model_write_outputs(&tfmc_model_info, &b, outputs_path, err, errlen);",
    "  rt_model_unbind(&tfmc_model_info, &b);",
    "  return rc;",
    "}",
    NULL};

static void put_lines(FILE *f, const char *const *lines) {
  for (int i = 0; lines[i]; i++) {
    fputs(lines[i], f);
    fputc('\n', f);
  }
}

static void put_model_dims(FILE *f, const RtModelInfo *info, const RtTensorInfo *t) {
  fputc('[', f);
  for (int d = 0; d < t->rank; d++) {
    if (d) fputc(',', f);
    if (t->dims[d].sym >= 0) c_put_comment(f, info->sym_names[t->dims[d].sym]);
    else fprintf(f, "%lld", (long long)t->dims[d].value);
  }
  fputc(']', f);
}

static int write_model_h(Proj *P) {
  const RtModelInfo *info = P->info;
  OutFile o;
  if (out_open(P, &o, "model.h")) return 1;
  FILE *f = o.f;
  fputs("/* model.h - the C API of model ", f);
  c_put_comment(f, info->name);
  fprintf(f,
          " (generated by tfmc).\n"
          " * Link libmodel.a with -lm -lpthread (and -ldl unless built with NO_BLAS=1).\n"
          " *\n"
          " * Dimensions (bound at run time, 1..max):");
  for (int s = 0; s < info->n_syms; s++) {
    fprintf(f, "%s ", s ? "," : "");
    c_put_comment(f, info->sym_names[s]);
    fprintf(f, " <= %lld", (long long)info->sym_max[s]);
  }
  if (info->n_syms == 0) fputs(" none", f);
  fputs("\n * Inputs:\n", f);
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    fprintf(f, " *   %d  ", i);
    c_put_comment(f, t->name);
    fputc(' ', f);
    put_model_dims(f, info, t);
    if (t->kind == RT_INPUT_MASK) {
      fputs("  uint8 padding mask of ", f);
      c_put_comment(f, t->ids_input);
      fputs(" (may be NULL)\n", f);
    } else if (t->elem == RT_ELEM_I32) {
      fprintf(f, "  int32 token ids < %lld\n", (long long)t->vocab);
    } else {
      fprintf(f, "  %s\n", t->elem == RT_ELEM_F32 ? "float" : "uint8");
    }
  }
  fputs(" * Outputs (float):\n", f);
  for (int i = 0; i < info->n_outputs; i++) {
    fprintf(f, " *   %d  ", i);
    c_put_comment(f, info->outputs[i].name);
    fputc(' ', f);
    put_model_dims(f, info, &info->outputs[i]);
    fputc('\n', f);
  }
  fprintf(f,
          " *\n"
          " * Example:\n"
          " *     char err[512];\n"
          " *     TfmcModel *m = tfmc_model_create(%s, 0, err, sizeof err);\n"
          " *     if (!m) { fprintf(stderr, \"%%s\\n\", err); return 1; }\n"
          " *     int64_t dims[TFMC_MAX_RANK] = {...};     // one value per dimension\n"
          " *     const void *inputs[] = {...};            // per input, as listed above\n"
          " *     float *outputs[] = {...};                // tfmc_model_output_numel each\n"
          " *     if (tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err))\n"
          " *       fprintf(stderr, \"%%s\\n\", err);\n"
          " *     tfmc_model_destroy(m);\n"
          " *\n"
          " * Ownership: the caller owns every buffer it passes (only read, except\n"
          " * outputs, which are overwritten) and the TfmcModel from tfmc_model_create,\n"
          " * which owns the mapped weights, the thread pool and the activation arena\n"
          " * until tfmc_model_destroy. Strings returned by the tfmc_model_*name\n"
          " * functions are static. Every failure is a return code and a message in the\n"
          " * caller's err buffer; nothing exits or aborts. */\n",
          P->opt->embed_weights ? "NULL" : P->weights_literal);
  put_lines(f, MODEL_H_BODY);
  return out_close(P, &o);
}

static int write_api_c(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "api.c")) return 1;
  fputs("/* api.c - generated by tfmc: the C API of model.h over the runtime: loading\n"
        " * (weights, pool, arena), checking caller buffers, running tfmc_model_run.\n"
        " * Invariants: every failure is a message, never an exit; a failed create\n"
        " * frees what it took; a run allocates nothing. */\n",
        o.f);
  fprintf(o.f, "#define TFMC_EMBEDDED_WEIGHTS %d\n\n", P->opt->embed_weights ? 1 : 0);
  put_lines(o.f, API_BODY);
  return out_close(P, &o);
}

static int write_main_c(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "main.c")) return 1;
  FILE *f = o.f;
  bool embed = P->opt->embed_weights;
  fputs("/* main.c - generated by tfmc: the standalone executable of model ", f);
  c_put_comment(f, P->info->name);
  fprintf(f, ".\n *   %s --inputs IN.safetensors --outputs OUT.safetensors [--threads N]\n", P->exe);
  if (embed)
    fputs(" * with the weights embedded (weights.c).\n", f);
  else
    fprintf(f, " *       [--weights FILE]   (default: %s.weights next to the executable)\n", P->exe);
  fputs(" * runtime/rt_main.c does the rest: arguments, checks, weights, threads, outputs. */\n"
        "#include \"runtime/rt_model.h\"\n"
        "\n"
        "extern const RtModelInfo tfmc_model_info;\n"
        "void tfmc_model_run(const RtRunArgs *args);\n",
        f);
  if (embed)
    fputs("extern const unsigned char tfmc_weights_image[];\n"
          "extern const size_t tfmc_weights_image_size;\n",
          f);
  fprintf(f,
          "\n"
          "int main(int argc, char **argv) {\n"
          "  return rt_main(argc, argv, &tfmc_model_info, tfmc_model_run, %s, %s);\n"
          "}\n",
          embed ? "tfmc_weights_image" : "NULL", embed ? "tfmc_weights_image_size" : "0");
  return out_close(P, &o);
}

/* ---- Makefile, CMakeLists.txt ---- */

/* Each runtime file ending in ext, as runtime/STEM<as>, each after sep. */
static void put_rt_list(Proj *P, FILE *f, const char *ext, const char *as, const char *sep) {
  for (int i = 0; i < P->n_rt_files; i++) {
    const char *n = P->rt_files[i];
    if (!ends_with(n, ext)) continue;
    fprintf(f, "%sruntime/%.*s%s", sep, (int)(strlen(n) - strlen(ext)), n, as);
  }
}

static int write_makefile(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "Makefile")) return 1;
  FILE *f = o.f;
  bool embed = P->opt->embed_weights;
  const char *e = P->exe;
  fprintf(f,
          "# Makefile - generated by tfmc for model %s. Any make (GNU, BSD) will do.\n"
          "#   make              builds %s (the executable) and libmodel.a (the C API of\n"
          "#                     model.h), matrix products through OpenBLAS when the\n"
          "#                     machine has it (loaded at run time), else portable code\n"
          "#   make NO_BLAS=1    the same with the runtime's portable GEMM only (no dlopen)\n"
          "#   make clean        (needed when switching NO_BLAS)\n"
          "# Run: ./%s --inputs IN.safetensors --outputs OUT.safetensors [--threads N]\n"
          "# The generated sources are C99, the runtime is C11.\n"
          "\n"
          "CC ?= cc\n"
          "AR ?= ar\n"
          "CFLAGS ?= -O2\n"
          "NO_BLAS ?= 0\n"
          "WARN = -Wall -Wextra -pedantic\n"
          "DEFS = -I. -D_POSIX_C_SOURCE=200809L $(BLAS_DEFS_$(NO_BLAS))\n"
          "BLAS_DEFS_1 = -DTFMC_NO_BLAS\n"
          "BLAS_LIBS_0 = -ldl\n"
          "LIBS = -lm -lpthread $(BLAS_LIBS_$(NO_BLAS))\n"
          "C99 = $(CC) -std=c99 $(WARN) $(DEFS) $(CPPFLAGS) $(CFLAGS)\n"
          "C11 = $(CC) -std=c11 $(WARN) $(DEFS) $(CPPFLAGS) $(CFLAGS)\n"
          "\n"
          "GEN_OBJS = model.o api.o%s\n"
          "RT_OBJS =",
          e, e, e, embed ? " weights.o" : "");
  put_rt_list(P, f, ".c", ".o", " \\\n  ");
  fputs("\nHDRS = model.h", f);
  put_rt_list(P, f, ".h", ".h", " \\\n  ");
  fprintf(f,
          "\n"
          "\n"
          "all: %s libmodel.a\n"
          "\n"
          "%s: main.o libmodel.a\n"
          "\t$(CC) $(CFLAGS) $(LDFLAGS) -o %s main.o libmodel.a $(LIBS)\n"
          "\n"
          "libmodel.a: $(GEN_OBJS) $(RT_OBJS)\n"
          "\trm -f libmodel.a\n"
          "\t$(AR) rcs libmodel.a $(GEN_OBJS) $(RT_OBJS)\n"
          "\n"
          "main.o: main.c $(HDRS)\n"
          "\t$(C99) -c main.c -o main.o\n"
          "model.o: model.c $(HDRS)\n"
          "\t$(C99) -c model.c -o model.o\n"
          "api.o: api.c $(HDRS)\n"
          "\t$(C99) -c api.c -o api.o\n",
          e, e, e);
  if (embed) fputs("weights.o: weights.c\n\t$(C99) -c weights.c -o weights.o\n", f);
  for (int i = 0; i < P->n_rt_files; i++) {
    const char *n = P->rt_files[i];
    if (!ends_with(n, ".c")) continue;
    int stem = (int)strlen(n) - 2;
    fprintf(f, "runtime/%.*s.o: runtime/%s $(HDRS)\n\t$(C11) -c runtime/%s -o runtime/%.*s.o\n",
            stem, n, n, n, stem, n);
  }
  fprintf(f,
          "\n"
          "clean:\n"
          "\trm -f %s libmodel.a main.o $(GEN_OBJS) $(RT_OBJS)\n"
          "\n"
          ".PHONY: all clean\n",
          e);
  return out_close(P, &o);
}

static int write_cmake(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "CMakeLists.txt")) return 1;
  FILE *f = o.f;
  bool embed = P->opt->embed_weights;
  const char *e = P->exe;
  fprintf(f,
          "# CMakeLists.txt - generated by tfmc for model %s: builds %s (the executable)\n"
          "# and libmodel.a (the C API of model.h).\n"
          "#   cmake -S . -B build [-DNO_BLAS=ON] && cmake --build build\n"
          "#   build/%s --inputs IN.safetensors --outputs OUT.safetensors\n"
          "# The generated sources are C99, the runtime is C11.\n"
          "cmake_minimum_required(VERSION 3.13)\n"
          "project(tfmc_model C)\n"
          "\n"
          "option(NO_BLAS \"Build without BLAS: the runtime's portable GEMM only (no dlopen)\" OFF)\n"
          "if(NOT CMAKE_BUILD_TYPE)\n"
          "  set(CMAKE_BUILD_TYPE Release)\n"
          "endif()\n"
          "find_package(Threads REQUIRED)\n"
          "\n"
          "add_library(tfmc_model_gen OBJECT model.c api.c%s)\n"
          "set_target_properties(tfmc_model_gen PROPERTIES C_STANDARD 99)\n"
          "add_library(tfmc_model_runtime OBJECT",
          e, e, e, embed ? " weights.c" : "");
  put_rt_list(P, f, ".c", ".c", "\n  ");
  fprintf(f,
          ")\n"
          "set_target_properties(tfmc_model_runtime PROPERTIES C_STANDARD 11)\n"
          "add_library(tfmc_model_lib STATIC $<TARGET_OBJECTS:tfmc_model_gen>\n"
          "            $<TARGET_OBJECTS:tfmc_model_runtime>)\n"
          "set_target_properties(tfmc_model_lib PROPERTIES OUTPUT_NAME model)\n"
          "target_link_libraries(tfmc_model_lib PUBLIC Threads::Threads)\n"
          "if(UNIX)\n"
          "  target_link_libraries(tfmc_model_lib PUBLIC m)\n"
          "endif()\n"
          "if(NOT NO_BLAS)\n"
          "  target_link_libraries(tfmc_model_lib PUBLIC ${CMAKE_DL_LIBS})\n"
          "endif()\n"
          "\n"
          "add_executable(%s main.c)\n"
          "set_target_properties(%s PROPERTIES C_STANDARD 99)\n"
          "target_link_libraries(%s PRIVATE tfmc_model_lib)\n"
          "\n"
          "foreach(t tfmc_model_gen tfmc_model_runtime %s)\n"
          "  set_target_properties(${t} PROPERTIES C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)\n"
          "  target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})\n"
          "  target_compile_definitions(${t} PRIVATE _POSIX_C_SOURCE=200809L\n"
          "                             $<$<BOOL:${NO_BLAS}>:TFMC_NO_BLAS>)\n"
          "  if(CMAKE_C_COMPILER_ID MATCHES \"GNU|Clang\")\n"
          "    target_compile_options(${t} PRIVATE -Wall -Wextra -pedantic)\n"
          "  endif()\n"
          "endforeach()\n",
          e, e, e, e);
  if (!embed)
    fprintf(f,
            "\n"
            "# the executable looks for %s.weights next to itself\n"
            "add_custom_command(TARGET %s POST_BUILD\n"
            "                   COMMAND ${CMAKE_COMMAND} -E copy_if_different\n"
            "                           ${CMAKE_CURRENT_SOURCE_DIR}/%s.weights $<TARGET_FILE_DIR:%s>)\n",
            e, e, e, e);
  return out_close(P, &o);
}

/* ---- the project ---- */

static int write_model_c(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "model.c")) return 1;
  c_emit_model(P->p, P->info, o.f);
  return out_close(P, &o);
}

int c_emit_project(const LoopProgram *p, const RtModelInfo *info, const float *weights,
                   const CEmitOptions *opt, const char *dir, char *err, size_t errlen) {
  if (!opt || !opt->runtime_dir || !dir || !*dir)
    return c_fail(err, errlen, "c: no options, runtime directory or output directory");
  if (c_program_check(p, err, errlen) || c_info_check(info, p, err, errlen)) return 1;
  if (!weights && info->weights_floats > 0)
    return c_fail(err, errlen, "c: no weights given for %lld weight floats",
                  (long long)info->weights_floats);
  Proj P = {.p = p, .info = info, .weights = weights, .opt = opt, .dir = dir, .err = err,
            .errlen = errlen};
  c_exe_name(info->name, P.exe, sizeof P.exe);
  snprintf(P.weights_literal, sizeof P.weights_literal, "\"%s.weights\"", P.exe);
  char rt_dir[PATH_CAP];
  int rc = list_runtime(&P) || make_dirs(&P, dir) ||
           join(&P, rt_dir, sizeof rt_dir, dir, "runtime") || make_dirs(&P, rt_dir) ||
           write_model_c(&P) || write_model_h(&P) || write_api_c(&P) || write_main_c(&P) ||
           write_weights(&P) || copy_runtime(&P) || write_makefile(&P) || write_cmake(&P);
  for (int i = 0; i < P.n_rt_files; i++) free(P.rt_files[i]);
  free(P.rt_files);
  return rc;
}
