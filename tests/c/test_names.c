/* tests/c/test_names.c — names from a spec cannot break or inject into the
 * generated C. A model whose every name is hostile (quotes, comment
 * terminators, backslashes, newlines, trigraphs, non-ASCII, C keywords,
 * code that would declare a symbol if it escaped its literal or comment) is
 * emitted, built with its Makefile under gcc and clang with -Werror
 * (-std=c99 -pedantic for the generated files), and then:
 *   - a C program linked with libmodel.a prints every string of
 *     tfmc_model_info as hex, which must equal the original bytes;
 *   - no object defines the symbols the hostile names try to inject;
 *   - the executable runs on inputs named with the hostile names and
 *     computes embed(ids) + bias exactly, and its --profile report (whose
 *     kernel comments hold the hostile spec path) stays ASCII, one line
 *     per entry;
 *   - every generated file is plain ASCII. */
#include "backends/c/c_internal.h"
#include "c_test_util.h"
#include "ir/loop.h"
#include "passes/passes.h"

#define INJECT_A "*/ int tfmc_injected_a; /*"
#define INJECT_B "\"; int tfmc_injected_b; static const char *tfmc_x = \""

static const char *model_name = "int \"quoted\" " INJECT_A " \\ \n#error boom\n caf\xc3\xa9 \xff ?\?=";
static const char *sym_b = "B*/";
static const char *sym_s = "S\n#define x";
static const char *in_name = "static \"tok\xc3\xa9ns\" ?\?/";
static const char *w_table = "return";
static const char *w_bias = INJECT_B " */ \\";
static const char *out_name = "out \xe2\x80\xae " INJECT_A;
static const char *loc_file = "we\"ird*/ file\n.tfm";

enum { V = 5, D = 3, NB = 2, NS = 4 };

typedef struct Built {
  Arena *a;
  LoopProgram *p;
  RtModelInfo *info;
  float *weights;
} Built;

/* y[b,s,:] = table[ids[b,s], :] + bias */
static Built build(void) {
  Built r;
  r.a = arena_create();
  IrGraph *g = ir_graph_create(r.a, model_name);
  int B = ir_graph_add_symbol(g, sym_b, NB);
  int S = ir_graph_add_symbol(g, sym_s, 8);
  IrLoc loc = {loc_file, 3, 7};
  int ids = ir_build_input(g, in_name, ir_type(IR_I32, 2, (IrDim[]){IR_SYM(B), IR_SYM(S)}), loc);
  int table = ir_build_param(g, w_table, ir_type2(IR_F32, V, D), loc);
  int bias = ir_build_param(g, w_bias, ir_type1(IR_F32, D), loc);
  int e = ir_build(g, IR_OP_EMBED, (int[]){table, ids}, 2, NULL, loc);
  ir_graph_add_output(g, out_name, ir_build(g, IR_OP_ADD, (int[]){e, bias}, 2, NULL, loc));
  Diags d;
  diags_init(&d, r.a, NULL);
  cr_assert(ir_graph_verify(g, &d), "%s", d.captured);
  r.p = pass_lower_loops(r.a, g);
  int64_t vocab[1] = {V};
  r.info = pass_model_info(r.a, g, r.p, vocab, -1);
  r.weights = arena_alloc(r.a, (size_t)r.info->weights_floats * 4 + 4);
  for (int w = 0; w < r.info->n_weights; w++) {
    int64_t n = 1;
    for (int k = 0; k < r.info->weights[w].rank; k++) n *= r.info->weights[w].shape[k];
    for (int64_t i = 0; i < n; i++)
      r.weights[r.info->weights[w].offset + i] = (float)(w * 100 + i) + 0.25f;
  }
  return r;
}

static void hex(FILE *f, const char *s) {
  if (!s) {
    fputs("NULL\n", f);
    return;
  }
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) fprintf(f, "%02x", *c);
  fputc('\n', f);
}

/* What the printer program must print for info. */
static char *expected_dump(const RtModelInfo *info) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  hex(f, info->name);
  for (int s = 0; s < info->n_syms; s++) {
    hex(f, info->sym_names[s]);
    fprintf(f, "%lld\n", (long long)info->sym_max[s]);
  }
  for (int i = 0; i < info->n_inputs; i++) hex(f, info->inputs[i].name);
  for (int i = 0; i < info->n_outputs; i++) hex(f, info->outputs[i].name);
  for (int i = 0; i < info->n_weights; i++) {
    hex(f, info->weights[i].name);
    fprintf(f, "%lld %d\n", (long long)info->weights[i].offset, info->weights[i].rank);
  }
  fprintf(f, "%016llx %lld %lld\n", (unsigned long long)info->layout_hash,
          (long long)info->weights_floats, (long long)info->arena_bytes);
  fprintf(f, "%d\n", info->n_kernels);
  for (int i = 0; i < info->n_kernels; i++) {
    hex(f, info->kernels[i].name);
    hex(f, info->kernels[i].op);
    hex(f, info->kernels[i].comment);
  }
  fclose(f);
  return buf;
}

static const char printer_src[] =
    "#include \"runtime/rt_model.h\"\n"
    "#include <stdio.h>\n"
    "extern const RtModelInfo tfmc_model_info;\n"
    "static void hex(const char *s) {\n"
    "  if (!s) { puts(\"NULL\"); return; }\n"
    "  for (; *s; s++) printf(\"%02x\", (unsigned)(unsigned char)*s);\n"
    "  putchar('\\n');\n"
    "}\n"
    "int main(void) {\n"
    "  const RtModelInfo *m = &tfmc_model_info;\n"
    "  int i;\n"
    "  hex(m->name);\n"
    "  for (i = 0; i < m->n_syms; i++) { hex(m->sym_names[i]); printf(\"%lld\\n\", (long long)m->sym_max[i]); }\n"
    "  for (i = 0; i < m->n_inputs; i++) hex(m->inputs[i].name);\n"
    "  for (i = 0; i < m->n_outputs; i++) hex(m->outputs[i].name);\n"
    "  for (i = 0; i < m->n_weights; i++) {\n"
    "    hex(m->weights[i].name);\n"
    "    printf(\"%lld %d\\n\", (long long)m->weights[i].offset, m->weights[i].rank);\n"
    "  }\n"
    "  printf(\"%016llx %lld %lld\\n\", (unsigned long long)m->layout_hash,\n"
    "         (long long)m->weights_floats, (long long)m->arena_bytes);\n"
    "  printf(\"%d\\n\", m->n_kernels);\n"
    "  for (i = 0; i < m->n_kernels; i++) {\n"
    "    hex(m->kernels[i].name);\n"
    "    hex(m->kernels[i].op);\n"
    "    hex(m->kernels[i].comment);\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static void check_ascii(const char *dir, const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  size_t len;
  char *t = ct_read_text(path, &len);
  cr_assert(t, "cannot read %s", path);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)t[i];
    cr_assert((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t', "%s: byte %02x at %zu", file, c,
              i);
  }
  cr_assert(!strstr(t, "\n#error"), "%s: a name broke a line", file);
  free(t);
}

static void names_with(const char *cc, bool embed) {
  if (!ct_have(cc)) cr_skip_test("%s is not installed (Debian package %s)", cc, cc);
  Built r = build();
  char *dir = ct_mkdtemp("names");
  char err[1024];
  CEmitOptions opt = {embed, CT_RUNTIME_DIR};
  cr_assert_eq(c_emit_project(r.p, r.info, r.weights, &opt, dir, err, sizeof err), 0, "%s", err);
  char exe[80];
  c_exe_name(r.info->name, exe, sizeof exe);
  for (const char *c = exe; *c; c++)
    cr_assert((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  *c == '_',
              "executable name %s", exe);
  for (const char *f = "model.c\0model.h\0model_config.h\0api.c\0main.c\0Makefile\0"
                        "CMakeLists.txt\0";
       *f; f += strlen(f) + 1)
    check_ascii(dir, f);
  if (embed) check_ascii(dir, "weights.c");

  CT_RUN("cd %s && make CC=%s CFLAGS='-O2 -Werror' NO_BLAS=1", dir, cc);
  /* nothing the names tried to declare exists */
  char path[512];
  CT_RUN("cd %s && nm model.o api.o main.o > syms.txt", dir);
  snprintf(path, sizeof path, "%s/syms.txt", dir);
  char *syms = ct_read_text(path, NULL);
  cr_assert(syms && strstr(syms, "tfmc_model_run"), "nm lists no tfmc_model_run");
  cr_assert(!strstr(syms, "tfmc_injected"), "a name injected code:\n%s", syms);
  free(syms);

  snprintf(path, sizeof path, "%s/printer.c", dir);
  ct_write_text(path, printer_src);
  CT_RUN("cd %s && %s -std=c99 " CT_WARN " -I. printer.c libmodel.a -lm -lpthread -o printer && "
         "./printer > dump.txt",
         dir, cc);
  snprintf(path, sizeof path, "%s/dump.txt", dir);
  char *got = ct_read_text(path, NULL);
  char *want = expected_dump(r.info);
  cr_assert(got);
  cr_assert_eq(r.info->n_kernels, 2, "embed and add");
  cr_assert_str_eq(got, want, "tfmc_model_info does not round-trip the names");
  free(got);
  free(want);

  /* the executable: inputs under the hostile name, outputs under another */
  int32_t ids[NB * NS] = {0, 4, 2, 1, 3, 3, 0, 4};
  RtStWrite in = {in_name, RT_I32, 2, {NB, NS}, ids};
  snprintf(path, sizeof path, "%s/in.safetensors", dir);
  cr_assert_eq(rt_st_write(path, &in, 1, NULL, 0, err, sizeof err), 0, "%s", err);
  CT_RUN("cd %s && ./%s --help > help.txt && ./%s --inputs in.safetensors --outputs out.safetensors "
         "--threads 2 --profile 2> profile.txt",
         dir, exe, exe);
  check_ascii(dir, "profile.txt");
  snprintf(path, sizeof path, "%s/profile.txt", dir);
  char *prof = ct_read_text(path, NULL);
  cr_assert(prof);
  cr_assert(strstr(prof, "profile: 2 kernels,") && strstr(prof, "\n  embed ") &&
                strstr(prof, "\n  add ") && strstr(prof, "@we\"ird*/ file\\x0a.tfm:3:7\n"),
            "%s", prof);
  free(prof);
  snprintf(path, sizeof path, "%s/out.safetensors", dir);
  int64_t n;
  float *y = ct_read_output(path, out_name, &n);
  cr_assert_eq(n, NB * NS * D);
  const RtWeightInfo *wt = strcmp(r.info->weights[0].name, w_table) == 0 ? &r.info->weights[0]
                                                                          : &r.info->weights[1];
  const RtWeightInfo *wb = wt == &r.info->weights[0] ? &r.info->weights[1] : &r.info->weights[0];
  for (int t = 0; t < NB * NS; t++)
    for (int j = 0; j < D; j++) {
      float want_v = r.weights[wt->offset + ids[t] * D + j] + r.weights[wb->offset + j];
      cr_assert_eq(y[t * D + j], want_v, "out[%d,%d] = %g, want %g", t, j, y[t * D + j], want_v);
    }
  free(y);
  arena_destroy(r.a);
  ct_rmdir(dir);
}

Test(names, hostile_names_gcc, .timeout = 300) { names_with("gcc", false); }
Test(names, hostile_names_clang_embedded, .timeout = 300) { names_with("clang", true); }

/* The info alone (what `tfmc build` compiles next to the LLVM object)
 * compiles as C99 and C11 with both compilers. */
Test(names, model_info_alone_compiles, .timeout = 120) {
  Built r = build();
  char *dir = ct_mkdtemp("info");
  char path[512];
  snprintf(path, sizeof path, "%s/info.c", dir);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs("#include \"runtime/rt_model.h\"\n\n", f);
  c_emit_model_info(r.info, f);
  fclose(f);
  const char *ccs[] = {"gcc", "clang"};
  for (int i = 0; i < 2; i++) {
    if (!ct_have(ccs[i])) continue;
    CT_RUN("cd %s && %s -std=c99 " CT_WARN " -I%s -c info.c -o info99.o && %s -std=c11 " CT_WARN
           " -I%s -c info.c -o info11.o",
           dir, ccs[i], TFMC_SOURCE_DIR, ccs[i], TFMC_SOURCE_DIR);
  }
  arena_destroy(r.a);
  ct_rmdir(dir);
}
