/* backends/c/project.c — the emitted C project (c_emit_project):
 *
 *   DIR/model.c          kernels, tfmc_model_run, tfmc_model_info (emit.c)
 *   DIR/model.h          the static library's C API (create / run / destroy):
 *                        this model's dims, inputs and outputs in a comment,
 *                        then the template model.h
 *   DIR/model_config.h   the per-model settings the templates include
 *                        (TFMC_EMBEDDED_WEIGHTS)
 *   DIR/api.c            the template api.c: model.h over the runtime
 *   DIR/main.c           the template main.c: the standalone executable (rt_main)
 *   DIR/EXE.weights      packed weights, found by EXE next to itself; or
 *   DIR/weights.c        the same bytes as a C array (embed_weights)
 *   DIR/runtime/rt_*     the runtime sources, copied from opt->runtime_dir
 *   DIR/Makefile         `make` builds EXE and libmodel.a; NO_BLAS=1 without BLAS
 *   DIR/CMakeLists.txt   the same with CMake (-DNO_BLAS=ON)
 *   DIR/.tfmc-project    the marker saying tfmc wrote this directory (written last)
 * where EXE is the model's name reduced to [A-Za-z0-9_] (c_exe_name).
 * With opt->static_mode (hosts without an OS; backends/c/static.c) the
 * project is a library only: model.c, model.h (the generated head, with
 * TFMC_MEM_BYTES, then templates/model_static.h), model_config.h (the
 * region's parts too), api.c (templates/api_static.c), EXE.weights or
 * weights.c, the runtime pieces the model calls, and a Makefile (libmodel.a;
 * `make size`); no main.c, no CMakeLists.txt. A generating model's static
 * project adds step.c, encode.c, gen_info.c, gen_api.c
 * (templates/api_gen_static.c) and model_gen.h (templates/
 * model_gen_static.h): the step API in a second region, TFMC_GEN_MEM_BYTES.
 *
 * Text that is the same for every model is not kept here as strings: the
 * runtime's sources (opt->runtime_dir/rt_*) and the templates
 * (opt->runtime_dir/templates: main.c, api.c, model.h; real C files the
 * tests compile as they are) are copied byte for byte through one function
 * (append_file). What differs per model is generated: model.c, weights.c,
 * model_config.h, the head of model.h, the build files.
 *
 * The generated sources (model.c, api.c, main.c, weights.c, model.h,
 * model_config.h) are C99 and compile cleanly with -std=c99 -Wall -Wextra
 * -pedantic under gcc and clang; the runtime is the project's own C11 code
 * (atomics) and is built with -std=c11.
 *
 * Invariants: the same program, info, weights and runtime give the same
 * bytes in every file (no timestamps, no paths, sorted listings); only the
 * files listed above are written, and none of them is one of the command's
 * inputs (opt->inputs); a directory that exists, is not empty and has no
 * marker is refused unless opt->force (c_project_dir_check). Every file is
 * an rt_file.h output (a temporary next to its target, through symlinks,
 * regular files only) and all of them get their names together at the end,
 * so a failed emission changes nothing: no file is replaced, temporaries
 * and the directories it created are removed. */
#include "backends/c/c_internal.h"
#include "runtime/rt_file.h"
#include "runtime/rt_weights.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096
#define PROJ_MARKER ".tfmc-project"
#define PROJ_MAX_NEW_DIRS 64

/* An output waiting for its name (renamed at the end, together). */
typedef struct Pending {
  RtOut out;
  char path[PATH_CAP];
} Pending;

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
  bool used[LC_CALLEE_COUNT]; /* static mode: the runtime functions kernels call */
  CStaticMemory mem;          /* static mode: the memory region */
  CStaticGenMemory gmem;      /* static mode, a generating model: the step API's region */
  char *err;
  size_t errlen;
  Pending **pending; /* owned; committed or aborted by c_emit_project */
  int n_pending, cap_pending;
  char *new_dirs[PROJ_MAX_NEW_DIRS]; /* created by this emission, outermost first */
  int n_new_dirs;
} Proj;

typedef struct OutFile {
  FILE *f; /* on a dup of the pending output's descriptor */
  Pending *pd;
} OutFile;

/* ---- files ---- */

static int join(Proj *P, char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s/%s", a, b);
  if (n < 0 || (size_t)n >= cap) return c_fail(P->err, P->errlen, "c: path too long: %s/%s", a, b);
  return 0;
}

/* DIR/name as a pending output: refused when it is one of the inputs. */
static Pending *pending_open(Proj *P, const char *name) {
  if (P->n_pending == P->cap_pending) {
    int cap = P->cap_pending ? 2 * P->cap_pending : 32;
    Pending **np = realloc(P->pending, (size_t)cap * sizeof *np);
    if (!np) return c_fail(P->err, P->errlen, "c: out of memory"), NULL;
    P->pending = np;
    P->cap_pending = cap;
  }
  Pending *pd = malloc(sizeof *pd);
  if (!pd) return c_fail(P->err, P->errlen, "c: out of memory"), NULL;
  pd->out = (RtOut){.fd = -1};
  if (join(P, pd->path, sizeof pd->path, P->dir, name)) return free(pd), NULL;
  for (int i = 0; i < P->opt->n_inputs; i++)
    if (P->opt->inputs[i] && rt_file_same(pd->path, P->opt->inputs[i])) {
      c_fail(P->err, P->errlen, "c: %s is the input %s; refusing to overwrite it", pd->path,
             P->opt->inputs[i]);
      return free(pd), NULL;
    }
  char msg[PATH_CAP + 256];
  if (rt_out_open(&pd->out, pd->path, RT_OUT_REGULAR, msg, sizeof msg)) {
    c_fail(P->err, P->errlen, "c: %s", msg);
    return free(pd), NULL;
  }
  P->pending[P->n_pending++] = pd;
  return pd;
}

static int out_open(Proj *P, OutFile *o, const char *name) {
  o->f = NULL;
  if (!(o->pd = pending_open(P, name))) return 1;
  int fd = dup(o->pd->out.fd);
  if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
    if (fd >= 0) close(fd);
    return c_fail(P->err, P->errlen, "c: cannot write %s: %s", o->pd->path, strerror(errno));
  }
  return 0;
}

/* The bytes are complete: flushed and synced; the name comes at the end. */
static int out_close(Proj *P, OutFile *o) {
  bool bad = ferror(o->f) != 0;
  if (fclose(o->f) != 0) bad = true;
  o->f = NULL;
  if (bad) return c_fail(P->err, P->errlen, "c: cannot write %s: %s", o->pd->path, strerror(errno));
  char msg[PATH_CAP + 256];
  if (rt_out_finish(&o->pd->out, msg, sizeof msg)) return c_fail(P->err, P->errlen, "c: %s", msg);
  return 0;
}

static void out_abandon(OutFile *o) {
  if (o->f) fclose(o->f); /* the pending output is dropped with the others */
  o->f = NULL;
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
      if (mkdir(buf, 0755) == 0) {
        if (P->n_new_dirs < PROJ_MAX_NEW_DIRS && (P->new_dirs[P->n_new_dirs] = malloc(n + 1)))
          strcpy(P->new_dirs[P->n_new_dirs++], buf); /* removed again if the emission fails */
      } else if (errno != EEXIST) {
        return c_fail(P->err, P->errlen, "c: cannot create %s: %s", buf, strerror(errno));
      }
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
  if (strcmp(name, "rt_static.c") == 0) return false; /* the static mode's pool, not this one's */
  if (strcmp(name + n - 2, ".c") != 0 && strcmp(name + n - 2, ".h") != 0) return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.'))
      return false; /* it goes into the Makefile as is */
  }
  return true;
}

/* Static mode: the pieces c_static_runtime names, sorted. */
static int list_runtime_static(Proj *P) {
  const char *names[32];
  int n = c_static_runtime(P->used, P->opt->gen != NULL, names, 32);
  if (n < 0) return c_fail(P->err, P->errlen, "c: too many runtime files");
  P->rt_files = calloc((size_t)n + 1, sizeof *P->rt_files);
  if (!P->rt_files) return c_fail(P->err, P->errlen, "c: out of memory");
  for (int i = 0; i < n; i++) {
    char path[PATH_CAP];
    struct stat st;
    if (join(P, path, sizeof path, P->opt->runtime_dir, names[i])) return 1;
    if (stat(path, &st) != 0)
      return c_fail(P->err, P->errlen, "c: the runtime directory %s has no %s",
                    P->opt->runtime_dir, names[i]);
    if (!(P->rt_files[i] = malloc(strlen(names[i]) + 1)))
      return c_fail(P->err, P->errlen, "c: out of memory");
    strcpy(P->rt_files[i], names[i]);
    P->n_rt_files = i + 1;
  }
  return 0;
}

/* The runtime's rt_*.c / rt_*.h, sorted by name. */
static int list_runtime(Proj *P) {
  if (P->opt->static_mode) return list_runtime_static(P);
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

/* Appends the file `from` to out byte for byte: the one way runtime text
 * (the runtime's sources, the templates) reaches a project. */
static int append_file(const char *from, FILE *out, char *err, size_t errlen) {
  FILE *in = fopen(from, "rb");
  if (!in) return c_fail(err, errlen, "c: cannot read %s: %s", from, strerror(errno));
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) break;
  bool bad = ferror(in) != 0;
  fclose(in);
  if (bad) return c_fail(err, errlen, "c: cannot read %s", from);
  return 0; /* a failed write shows in ferror(out) */
}

int c_template_put(const char *runtime_dir, const char *name, FILE *out, char *err,
                   size_t errlen) {
  char from[PATH_CAP];
  int n = snprintf(from, sizeof from, "%s/templates/%s", runtime_dir, name);
  if (n < 0 || (size_t)n >= sizeof from)
    return c_fail(err, errlen, "c: path too long: %s/templates/%s", runtime_dir, name);
  return append_file(from, out, err, errlen);
}

void c_emit_model_config(const RtModelInfo *info, bool embed_weights, FILE *out) {
  c_emit_model_config_gen(info, NULL, embed_weights, out);
}

void c_emit_model_config_gen(const RtModelInfo *info, const RtGenInfo *gen, bool embed_weights,
                             FILE *out) {
  fputs("/* model_config.h - generated by tfmc for model ", out);
  c_put_comment(out, info->name);
  fprintf(out,
          ": what the fixed sources\n"
          " * (main.c, api.c: the same for every model) need to know about this one. */\n"
          "#ifndef TFMC_MODEL_CONFIG_H\n"
          "#define TFMC_MODEL_CONFIG_H\n"
          "\n"
          "/* 1: the packed weights are linked in (tfmc_weights_image and\n"
          " * tfmc_weights_image_size); 0: they are read from a file at run time. */\n"
          "#define TFMC_EMBEDDED_WEIGHTS %d\n",
          embed_weights ? 1 : 0);
  if (gen)
    fprintf(out,
            "\n"
            "/* the model generates (main_gen.c, api_gen.c: tfmc_step_run); 1 when it\n"
            " * has an encoder (tfmc_encode_run, an encoder_decoder), 0 for a decoder */\n"
            "#define TFMC_GENERATION 1\n"
            "#define TFMC_ENCODER %d\n",
            gen->encode ? 1 : 0);
  fputs("\n#endif\n", out);
}

static int copy_file(Proj *P, const char *from, const char *to_name) {
  OutFile o;
  if (out_open(P, &o, to_name)) return 1;
  if (append_file(from, o.f, P->err, P->errlen)) {
    out_abandon(&o);
    return 1;
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

/* EXE.weights; or weights.c, from the packed image in a temporary that
 * never gets a name. */
static int write_weights(Proj *P) {
  char path[PATH_CAP], name[128];
  char werr[PATH_CAP + 256];
  static const float none[1] = {0};
  const float *w = P->opt->gen ? P->opt->gen_image : P->weights ? P->weights : none;
  const RtModelInfo *winfo = P->opt->gen ? P->opt->gen->weights : P->info;
  snprintf(name, sizeof name, P->opt->embed_weights ? ".%s.weights.image" : "%s.weights", P->exe);
  if (!P->opt->embed_weights) {
    Pending *pd = pending_open(P, name);
    if (!pd) return 1;
    if (rt_weights_write_fd(pd->out.fd, pd->path, winfo, w, werr, sizeof werr) ||
        rt_out_finish(&pd->out, werr, sizeof werr))
      return c_fail(P->err, P->errlen, "c: %s", werr);
    return 0;
  }
  RtOut img;
  if (join(P, path, sizeof path, P->dir, name)) return 1;
  if (rt_out_open(&img, path, RT_OUT_REGULAR, werr, sizeof werr) ||
      rt_weights_write_fd(img.fd, path, winfo, w, werr, sizeof werr) ||
      rt_out_finish(&img, werr, sizeof werr)) {
    rt_out_abort(&img);
    return c_fail(P->err, P->errlen, "c: %s", werr);
  }
  int rc = write_weights_c(P, img.tmp);
  rt_out_abort(&img); /* removes the temporary */
  return rc;
}

/* ---- model.h, model_config.h, api.c, main.c ---- */

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
  if (P->opt->static_mode)
    fputs(" (generated by tfmc emit-c --static).\n"
          " * Link libmodel.a with -lm: no heap, threads, files or stdio.\n"
          " *\n"
          " * Dimensions (bound at run time, 1..max):",
          f);
  else
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
  bool st = P->opt->static_mode;
  if (st && P->opt->embed_weights)
    fputs(" * Weights: embedded in the library (weights.c, const: flash):\n"
          " *     tfmc_model_init(mem, sizeof mem, NULL, 0, ...)\n",
          f);
  else if (st)
    fprintf(f,
            " * Weights: the bytes of the file %s.weights tfmc wrote next to this project,\n"
            " * wherever they are (4-byte aligned, 64 is best):\n"
            " *     tfmc_model_init(mem, sizeof mem, image, image_bytes, ...)\n",
            P->exe);
  else if (P->opt->embed_weights)
    fputs(" * Weights: embedded in the library (weights.c): tfmc_model_create(NULL, ...)\n", f);
  else
    fprintf(f,
            " * Weights: the file %s.weights tfmc wrote next to this project:\n"
            " *     tfmc_model_create(%s, ...)\n",
            P->exe, P->weights_literal);
  if (st) {
    const CStaticMemory *m = &P->mem;
    const CStaticGenMemory *g = &P->gmem;
    const RtModelInfo *winfo = P->opt->gen ? P->opt->gen->weights : P->info;
    fprintf(f,
            " * Memory: one region of TFMC_MEM_BYTES, any alignment: a %lld-byte header,\n"
            " * the activation arena (%lld bytes, planned at the maximum dims), the state\n"
            " * kept between runs (%lld), the masks derived from ids (%lld), each rounded\n"
            " * up to 64 bytes, and 64 bytes of alignment slack. Weights: %lld bytes.\n",
            (long long)m->header, (long long)m->arena, (long long)m->state, (long long)m->masks,
            (long long)(64 + 4 * winfo->weights_floats));
    if (P->opt->gen)
      fprintf(f,
              " * Generation: the model is %s; model_gen.h (included below)\n"
              " * declares the static step API (tfmc_gen_init, _encode, _prefill, _step,\n"
              " * _reset), one sequence at a time, in a second region of TFMC_GEN_MEM_BYTES,\n"
              " * any alignment: a %lld-byte header, one arena for the %s (%lld\n"
              " * bytes), the KV cache (%lld bytes: %lld positions), the step's buffers\n"
              " * (%lld), each rounded up to 64 bytes, and 64 bytes of alignment slack. The\n"
              " * weights image holds the forward pass's and the generation programs' weights.\n",
              P->opt->gen->encode ? "an encoder_decoder" : "a decoder", (long long)g->header,
              P->opt->gen->encode ? "encoder and the step" : "step", (long long)g->arena,
              (long long)g->state,
              (long long)(P->opt->gen->n_states ? P->opt->gen->states[0].positions : 0),
              (long long)g->stepper);
    fprintf(f,
            " *\n"
            " * The rest of this file is the same for every model. */\n"
            "#define TFMC_MEM_BYTES %lld\n"
            "#define TFMC_WEIGHTS_BYTES %lld /* the packed image: 64-byte header + f32 data */\n",
            (long long)m->total, (long long)(64 + 4 * winfo->weights_floats));
    if (P->opt->gen)
      fprintf(f,
              "#define TFMC_GENERATION 1\n"
              "#define TFMC_GEN_MEM_BYTES %lld /* the step API's region */\n",
              (long long)g->total);
    fputc('\n', f);
  } else if (P->opt->gen) {
    fprintf(f,
            " * Generation: the model is a %s; model_gen.h (included below)\n"
            " * declares the step API (tfmc_gen_create, _encode, _prefill, _step, _reset)\n"
            " * over the same weights file; main.c generates with it (%s --generate N).\n"
            " *\n"
            " * The rest of this file is the same for every model. */\n"
            "#define TFMC_GENERATION 1\n",
            P->opt->gen->encode ? "encoder_decoder" : "decoder", P->exe);
  } else {
    fputs(" *\n"
          " * The rest of this file is the same for every model. */\n",
          f);
  }
  if (c_template_put(P->opt->runtime_dir, st ? "model_static.h" : "model.h", f, P->err,
                     P->errlen)) {
    out_abandon(&o);
    return 1;
  }
  return out_close(P, &o);
}

/* model_config.h: the per-model settings the fixed sources include. */
static int write_model_config(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "model_config.h")) return 1;
  if (!P->opt->static_mode) {
    c_emit_model_config_gen(P->info, P->opt->gen, P->opt->embed_weights, o.f);
    return out_close(P, &o);
  }
  fputs("/* model_config.h - generated by tfmc emit-c --static for model ", o.f);
  c_put_comment(o.f, P->info->name);
  fprintf(o.f,
          ": what the fixed\n"
          " * source api.c (the same for every model) needs to know about this one. */\n"
          "#ifndef TFMC_MODEL_CONFIG_H\n"
          "#define TFMC_MODEL_CONFIG_H\n"
          "\n"
          "/* 1: the packed weights are linked in (tfmc_weights_image and\n"
          " * tfmc_weights_image_size); 0: the caller passes their image. */\n"
          "#define TFMC_EMBEDDED_WEIGHTS %d\n"
          "\n"
          "/* the parts of the memory region (bytes, before rounding) */\n"
          "#define TFMC_ARENA_BYTES %lld\n"
          "#define TFMC_STATE_BYTES %lld\n"
          "#define TFMC_MASKS_BYTES %lld\n",
          P->opt->embed_weights ? 1 : 0, (long long)P->mem.arena, (long long)P->mem.state,
          (long long)P->mem.masks);
  if (P->opt->gen)
    fprintf(o.f,
            "\n"
            "/* the model generates (gen_api.c: tfmc_step_run); 1 when it has an encoder\n"
            " * (tfmc_encode_run, an encoder_decoder), 0 for a decoder; the parts of the\n"
            " * step API's region (bytes, before rounding) */\n"
            "#define TFMC_GENERATION 1\n"
            "#define TFMC_ENCODER %d\n"
            "#define TFMC_GEN_HEADER_BYTES %lld\n"
            "#define TFMC_GEN_ARENA_BYTES %lld\n"
            "#define TFMC_GEN_STATE_BYTES %lld\n"
            "#define TFMC_GEN_STEPPER_BYTES %lld\n",
            P->opt->gen->encode ? 1 : 0, (long long)P->gmem.header, (long long)P->gmem.arena,
            (long long)P->gmem.state, (long long)P->gmem.stepper);
  fputs("\n#endif\n", o.f);
  return out_close(P, &o);
}

/* api.c, main.c: fixed sources, copied as they are (template `from`). */
static int write_template_as(Proj *P, const char *from, const char *name) {
  OutFile o;
  if (out_open(P, &o, name)) return 1;
  if (c_template_put(P->opt->runtime_dir, from, o.f, P->err, P->errlen)) {
    out_abandon(&o);
    return 1;
  }
  return out_close(P, &o);
}

/* The generated sources compiled as C99 besides model.c and api.c: the
 * generation programs and their API (gen_api.c) for a generating model. */
static int gen_sources(const Proj *P, const char **names) {
  int n = 0;
  if (!P->opt->gen) return 0;
  names[n++] = "step";
  if (P->opt->gen->encode) names[n++] = "encode";
  names[n++] = "gen_info";
  names[n++] = "gen_api";
  return n;
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
          "GEN_OBJS = model.o api.o%s",
          e, e, e, embed ? " weights.o" : "");
  const char *extra[4];
  int n_extra = gen_sources(P, extra);
  for (int i = 0; i < n_extra; i++) fprintf(f, " %s.o", extra[i]);
  fputs("\nRT_OBJS =", f);
  put_rt_list(P, f, ".c", ".o", " \\\n  ");
  fputs(P->opt->gen ? "\nHDRS = model.h model_gen.h model_config.h" : "\nHDRS = model.h model_config.h", f);
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
  for (int i = 0; i < n_extra; i++)
    fprintf(f, "%s.o: %s.c $(HDRS)\n\t$(C99) -c %s.c -o %s.o\n", extra[i], extra[i], extra[i],
            extra[i]);
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

/* The static project's Makefile: libmodel.a only, for any C99/C11
 * cross compiler (CC, CFLAGS from the command line). */
static int write_makefile_static(Proj *P) {
  OutFile o;
  if (out_open(P, &o, "Makefile")) return 1;
  FILE *f = o.f;
  bool embed = P->opt->embed_weights;
  fprintf(f,
          "# Makefile - generated by tfmc emit-c --static for model %s. Any make will do.\n"
          "#   make              builds libmodel.a (the C API of model.h): no heap, threads,\n"
          "#                     files or stdio; link it with -lm\n"
          "#   make size         prints the size of each section of its objects\n"
          "# For a microcontroller, e.g. a Cortex-M4F:\n"
          "#   make CC=arm-none-eabi-gcc AR=arm-none-eabi-ar SIZE=arm-none-eabi-size \\\n"
          "#        CFLAGS='-Os -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16'\n"
          "# The generated sources are C99, the runtime is C11.\n"
          "\n"
          "CC ?= cc\n"
          "AR ?= ar\n"
          "SIZE ?= size\n"
          "CFLAGS ?= -O2\n"
          "WARN = -Wall -Wextra -pedantic\n"
          "DEFS = -I. -DTFMC_STATIC\n"
          "C99 = $(CC) -std=c99 $(WARN) $(DEFS) $(CPPFLAGS) $(CFLAGS)\n"
          "C11 = $(CC) -std=c11 $(WARN) $(DEFS) $(CPPFLAGS) $(CFLAGS)\n"
          "\n"
          "GEN_OBJS = model.o api.o%s",
          P->exe, embed ? " weights.o" : "");
  const char *extra[4];
  int n_extra = gen_sources(P, extra);
  for (int i = 0; i < n_extra; i++) fprintf(f, " %s.o", extra[i]);
  fputs("\nRT_OBJS =", f);
  put_rt_list(P, f, ".c", ".o", " \\\n  ");
  fputs(P->opt->gen ? "\nHDRS = model.h model_gen.h model_config.h" : "\nHDRS = model.h model_config.h", f);
  put_rt_list(P, f, ".h", ".h", " \\\n  ");
  fputs("\n"
        "\n"
        "all: libmodel.a\n"
        "\n"
        "libmodel.a: $(GEN_OBJS) $(RT_OBJS)\n"
        "\trm -f libmodel.a\n"
        "\t$(AR) rcs libmodel.a $(GEN_OBJS) $(RT_OBJS)\n"
        "\n"
        "size: libmodel.a\n"
        "\t$(SIZE) -t libmodel.a\n"
        "\n"
        "model.o: model.c $(HDRS)\n"
        "\t$(C99) -c model.c -o model.o\n"
        "api.o: api.c $(HDRS)\n"
        "\t$(C99) -c api.c -o api.o\n",
        f);
  if (embed) fputs("weights.o: weights.c\n\t$(C99) -c weights.c -o weights.o\n", f);
  for (int i = 0; i < n_extra; i++)
    fprintf(f, "%s.o: %s.c $(HDRS)\n\t$(C99) -c %s.c -o %s.o\n", extra[i], extra[i], extra[i],
            extra[i]);
  for (int i = 0; i < P->n_rt_files; i++) {
    const char *n = P->rt_files[i];
    if (!ends_with(n, ".c")) continue;
    int stem = (int)strlen(n) - 2;
    fprintf(f, "runtime/%.*s.o: runtime/%s $(HDRS)\n\t$(C11) -c runtime/%s -o runtime/%.*s.o\n",
            stem, n, n, n, stem, n);
  }
  fputs("\n"
        "clean:\n"
        "\trm -f libmodel.a $(GEN_OBJS) $(RT_OBJS)\n"
        "\n"
        ".PHONY: all clean size\n",
        f);
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
          "add_library(tfmc_model_gen OBJECT model.c api.c%s",
          e, e, e, embed ? " weights.c" : "");
  const char *extra[4];
  int n_extra = gen_sources(P, extra);
  for (int i = 0; i < n_extra; i++) fprintf(f, " %s.c", extra[i]);
  fputs(")\n"
        "set_target_properties(tfmc_model_gen PROPERTIES C_STANDARD 99)\n"
        "add_library(tfmc_model_runtime OBJECT",
        f);
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

/* A generating model's other sources: step.c (tfmc_step_run), encode.c
 * (tfmc_encode_run, an encoder_decoder's), gen_info.c (tfmc_gen_info). */
static int write_gen_c(Proj *P) {
  const CEmitOptions *opt = P->opt;
  OutFile o;
  if (out_open(P, &o, "step.c")) return 1;
  c_emit_model_named(opt->step_prog, opt->gen->step, "tfmc_step_run", "tfmc_step_info", o.f);
  if (out_close(P, &o)) return 1;
  if (opt->gen->encode) {
    if (out_open(P, &o, "encode.c")) return 1;
    c_emit_model_named(opt->encode_prog, opt->gen->encode, "tfmc_encode_run", "tfmc_encode_info",
                       o.f);
    if (out_close(P, &o)) return 1;
  }
  if (out_open(P, &o, "gen_info.c")) return 1;
  fputs("/* gen_info.c - generated by tfmc: what the model's generation is made of. */\n"
        "#include \"runtime/rt_model.h\"\n\n",
        o.f);
  c_emit_gen_info(opt->gen, o.f);
  return out_close(P, &o);
}


int c_project_dir_check(const char *dir, bool force, char *err, size_t errlen) {
  struct stat st;
  if (stat(dir, &st) != 0) return 0; /* created by the emission */
  if (!S_ISDIR(st.st_mode)) return c_fail(err, errlen, "c: %s exists and is not a directory", dir);
  char marker[PATH_CAP];
  int n = snprintf(marker, sizeof marker, "%s/%s", dir, PROJ_MARKER);
  if (n < 0 || (size_t)n >= sizeof marker) return c_fail(err, errlen, "c: path too long: %s", dir);
  if (force || access(marker, F_OK) == 0) return 0;
  DIR *d = opendir(dir);
  if (!d) return c_fail(err, errlen, "c: cannot read %s: %s", dir, strerror(errno));
  bool empty = true;
  struct dirent *de;
  while (empty && (de = readdir(d)) != NULL)
    empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
  closedir(d);
  if (empty) return 0;
  return c_fail(err, errlen,
                "c: %s exists, is not empty and was not written by tfmc emit-c (it has no %s);"
                " refusing to write into it (--force writes the project's files there, replacing"
                " only those)",
                dir, PROJ_MARKER);
}

/* The marker: tfmc wrote this directory, so the next emission may replace
 * its files without --force. */
static int write_marker(Proj *P) {
  OutFile o;
  if (out_open(P, &o, PROJ_MARKER)) return 1;
  fputs("This directory was written by tfmc emit-c; running it again with -o here\n"
        "replaces the files it wrote (and nothing else) without --force.\n",
        o.f);
  return out_close(P, &o);
}

/* All pending outputs get their names, or, after a failure, none does and
 * the directories this emission created are removed again. */
static int finish_project(Proj *P, int rc) {
  char msg[PATH_CAP + 256];
  for (int i = 0; i < P->n_pending; i++) {
    if (!rc && rt_out_commit(&P->pending[i]->out, msg, sizeof msg))
      rc = c_fail(P->err, P->errlen, "c: %s", msg);
    rt_out_abort(&P->pending[i]->out); /* a no-op once committed */
    free(P->pending[i]);
  }
  free(P->pending);
  for (int i = P->n_new_dirs - 1; i >= 0; i--) {
    if (rc) rmdir(P->new_dirs[i]);
    free(P->new_dirs[i]);
  }
  return rc;
}

int c_emit_project(const LoopProgram *p, const RtModelInfo *info, const float *weights,
                   const CEmitOptions *opt, const char *dir, char *err, size_t errlen) {
  if (!opt || !opt->runtime_dir || !dir || !*dir)
    return c_fail(err, errlen, "c: no options, runtime directory or output directory");
  if (c_program_check(p, err, errlen) || c_info_check(info, p, err, errlen)) return 1;
  if (!weights && info->weights_floats > 0)
    return c_fail(err, errlen, "c: no weights given for %lld weight floats",
                  (long long)info->weights_floats);
  if (opt->gen && (!opt->step_prog || !opt->gen_image ||
                   !opt->gen->forward || !opt->gen->encode != !opt->encode_prog ||
                   c_program_check(opt->step_prog, err, errlen) ||
                   (opt->encode_prog && c_program_check(opt->encode_prog, err, errlen))))
    return *err ? 1 : c_fail(err, errlen, "c: a generation project needs its programs and image");
  Proj P = {.p = p, .info = info, .weights = weights, .opt = opt, .dir = dir, .err = err,
            .errlen = errlen};
  c_exe_name(info->name, P.exe, sizeof P.exe);
  snprintf(P.weights_literal, sizeof P.weights_literal, "\"%s.weights\"", P.exe);
  char rt_dir[PATH_CAP];
  bool st = opt->static_mode;
  if (st) {
    const LoopProgram *progs[3] = {p, opt->gen ? opt->step_prog : NULL,
                                   opt->gen ? opt->encode_prog : NULL};
    if (c_static_check_all(progs, 3, P.used, err, errlen)) return 1;
    c_static_memory(info, &P.mem);
    if (opt->gen && c_static_gen_memory(opt->gen->step, opt->gen->encode, &P.gmem))
      return c_fail(err, errlen, "c: internal: the step program is not a generation step graph");
    /* one region must be addressable by a 32-bit target (a microcontroller) */
    int64_t big = P.mem.total > P.gmem.total ? P.mem.total : P.gmem.total;
    if (big > INT32_MAX)
      return c_fail(err, errlen,
                    "c: --static: %s needs a memory region of %lld bytes (%s), more than a "
                    "32-bit target addresses; the static build plans every buffer at the spec's "
                    "maxima: lower its max_batch, position max (max_len) or d_model",
                    P.gmem.total > P.mem.total ? "generation" : "the forward pass", (long long)big,
                    P.gmem.total > P.mem.total
                        ? "TFMC_GEN_MEM_BYTES: the KV cache and the step's arena at max_len"
                        : "TFMC_MEM_BYTES: the activation arena at the maximum dims");
  }
  int rc = c_project_dir_check(dir, opt->force, err, errlen) || list_runtime(&P) ||
           make_dirs(&P, dir) ||
           join(&P, rt_dir, sizeof rt_dir, dir, "runtime") || make_dirs(&P, rt_dir) ||
           write_model_c(&P) || write_model_h(&P) || write_model_config(&P) ||
           write_template_as(&P, st ? "api_static.c" : "api.c", "api.c") ||
           (!st && write_template_as(&P, opt->gen ? "main_gen.c" : "main.c", "main.c")) ||
           (opt->gen && (write_gen_c(&P) ||
                         write_template_as(&P, st ? "model_gen_static.h" : "model_gen.h",
                                           "model_gen.h") ||
                         write_template_as(&P, st ? "api_gen_static.c" : "api_gen.c",
                                           "gen_api.c"))) ||
           write_weights(&P) || copy_runtime(&P) ||
           (st ? write_makefile_static(&P) : write_makefile(&P) || write_cmake(&P)) ||
           write_marker(&P);
  rc = finish_project(&P, rc);
  for (int i = 0; i < P.n_rt_files; i++) free(P.rt_files[i]);
  free(P.rt_files);
  return rc;
}
