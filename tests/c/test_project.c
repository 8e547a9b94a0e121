/* tests/c/test_project.c — the emitted project as files: regenerating gives
 * the same bytes; embedded weights decode to exactly the packed file;
 * malformed loop programs and bad arguments are refused with a message and
 * write nothing; the Makefile's NO_BLAS build leaves dlopen out. */
#include "backends/c/c_internal.h"
#include "c_test_util.h"
#include "ir/loop.h"
#include "passes/passes.h"

#include <dirent.h>

typedef struct Model {
  Arena *a;
  IrGraph *g;
  LoopProgram *p;
  RtModelInfo *info;
  float *weights;
} Model;

/* A small encoder layer: embed + positions, layernorm, q/k/v linears,
 * attention with a padding mask, output linear, gelu, log_softmax head. */
static Model small_model(const char *name) {
  Model m;
  m.a = arena_create();
  IrGraph *g = m.g = ir_graph_create(m.a, name);
  int B = ir_graph_add_symbol(g, "B", 3), S = ir_graph_add_symbol(g, "S", 6);
  IrLoc loc = {"small.tfm", 4, 2};
  enum { V = 13, D = 8 };
  int tok = ir_build_input(g, "tokens", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(B), IR_SYM(S)}), loc);
  int mask = ir_build_input(g, "mask", ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(B), IR_SYM(S)}), loc);
  int emb = ir_build_param(g, "embed.weight", ir_type2(IR_F32, V, D), loc);
  int x = ir_build(g, IR_OP_EMBED, (int[]){emb, tok}, 2, NULL, loc);
  int pos = ir_build_typed(g, IR_OP_ARANGE, NULL, 0, NULL, ir_type(IR_I32, 1, (IrDim[]){IR_SYM(S)}), loc);
  int pe = ir_build_typed(g, IR_OP_SINUSOID, (int[]){pos}, 1, NULL,
                          ir_type(IR_F32, 2, (IrDim[]){IR_SYM(S), IR_CONST(D)}), loc);
  x = ir_build(g, IR_OP_ADD, (int[]){x, pe}, 2, NULL, loc);
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.eps = 1e-5;
  int ln = ir_build(g, IR_OP_LAYERNORM,
                    (int[]){x, ir_build_param(g, "ln.weight", ir_type1(IR_F32, D), loc),
                            ir_build_param(g, "ln.bias", ir_type1(IR_F32, D), loc)},
                    3, &at, loc);
  int qkv[3];
  const char *wn[3] = {"q.weight", "k.weight", "v.weight"};
  for (int i = 0; i < 3; i++)
    qkv[i] = ir_build(g, IR_OP_LINEAR, (int[]){ln, ir_build_param(g, wn[i], ir_type2(IR_F32, D, D), loc)},
                      2, NULL, loc);
  int km = ir_build_typed(g, IR_OP_RESHAPE, (int[]){mask}, 1, NULL,
                          ir_type(IR_BOOL, 3, (IrDim[]){IR_SYM(B), IR_CONST(1), IR_SYM(S)}), loc);
  at.heads = 2;
  at.scale = 0.5;
  int att = ir_build(g, IR_OP_ATTENTION, (int[]){qkv[0], qkv[1], qkv[2], km}, 4, &at, loc);
  int o = ir_build(g, IR_OP_LINEAR,
                   (int[]){att, ir_build_param(g, "o.weight", ir_type2(IR_F32, D, D), loc),
                           ir_build_param(g, "o.bias", ir_type1(IR_F32, D), loc)},
                   3, NULL, loc);
  int h = ir_build(g, IR_OP_GELU, (int[]){ir_build(g, IR_OP_ADD, (int[]){x, o}, 2, NULL, loc)}, 1, NULL, loc);
  int logits = ir_build(g, IR_OP_LINEAR, (int[]){h, emb}, 2, NULL, loc);
  ir_graph_add_output(g, "log_probs", ir_build(g, IR_OP_LOG_SOFTMAX, (int[]){logits}, 1, NULL, loc));
  Diags d;
  diags_init(&d, m.a, NULL);
  cr_assert(ir_graph_verify(g, &d), "%s", d.captured);
  m.p = pass_lower_loops(m.a, g);
  int64_t vocab[2] = {V, 0};
  m.info = pass_model_info(m.a, g, m.p, vocab, 0);
  m.weights = arena_alloc(m.a, (size_t)m.info->weights_floats * 4 + 4);
  uint64_t rng = 99;
  for (int64_t i = 0; i < m.info->weights_floats; i++) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t bits = (uint32_t)(rng >> 32);
    float raw;
    memcpy(&raw, &bits, 4); /* arbitrary bit patterns: every byte value in the image */
    m.weights[i] = i % 7 == 0 && isfinite(raw) ? raw : (float)(int32_t)bits / 2147483648.0f;
  }
  return m;
}

/* Every regular file under dir (relative names, sorted), newline-separated. */
static char *list_files(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s.list", dir);
  CT_RUN("cd %s && find . -type f | LC_ALL=C sort > %s", dir, path);
  char *t = ct_read_text(path, NULL);
  remove(path);
  cr_assert(t);
  return t;
}

static void same_files(const char *d1, const char *d2) {
  char *l1 = list_files(d1), *l2 = list_files(d2);
  cr_assert_str_eq(l1, l2, "different file sets");
  for (char *line = strtok(l1, "\n"); line; line = strtok(NULL, "\n")) {
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/%s", d1, line);
    snprintf(p2, sizeof p2, "%s/%s", d2, line);
    size_t n1 = 0, n2 = 0;
    char *a = ct_read_text(p1, &n1), *b = ct_read_text(p2, &n2);
    cr_assert(a && b);
    cr_assert(n1 == n2 && memcmp(a, b, n1) == 0, "%s differs between emissions", line);
    free(a);
    free(b);
  }
  free(l1);
  free(l2);
}

Test(project, regenerating_gives_the_same_bytes) {
  char *dir = ct_mkdtemp("det");
  char d1[512], d2[512], err[1024];
  snprintf(d1, sizeof d1, "%s/one", dir);
  snprintf(d2, sizeof d2, "%s/two/nested", dir);
  for (int embed = 0; embed < 2; embed++) {
    CEmitOptions opt = {embed, CT_RUNTIME_DIR};
    /* two separate compilations of the same graph */
    Model a = small_model("small"), b = small_model("small");
    cr_assert_eq(c_emit_project(a.p, a.info, a.weights, &opt, d1, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c_emit_project(b.p, b.info, b.weights, &opt, d2, err, sizeof err), 0, "%s", err);
    same_files(d1, d2);
    /* and again over the first: same bytes, nothing else appears */
    cr_assert_eq(c_emit_project(b.p, b.info, b.weights, &opt, d1, err, sizeof err), 0, "%s", err);
    same_files(d1, d2);
    arena_destroy(a.a);
    arena_destroy(b.a);
  }
  char *l = list_files(d1);
  cr_assert(strstr(l, "./model.c\n") && strstr(l, "./model.h\n") && strstr(l, "./api.c\n") &&
                strstr(l, "./model_config.h\n") &&
                strstr(l, "./main.c\n") && strstr(l, "./Makefile\n") &&
                strstr(l, "./CMakeLists.txt\n") && strstr(l, "./small.weights\n") &&
                strstr(l, "./weights.c\n") && strstr(l, "./runtime/rt_model.h\n") &&
                strstr(l, "./runtime/rt_main.c\n") && !strstr(l, ".tmp") && !strstr(l, ".image"),
            "%s", l);
  free(l);
  ct_rmdir(dir);
}

/* weights.c holds exactly the bytes of the packed weights file. */
static const char dump_src[] =
    "#include <stddef.h>\n"
    "#include <stdio.h>\n"
    "extern const unsigned char tfmc_weights_image[];\n"
    "extern const size_t tfmc_weights_image_size;\n"
    "int main(void) {\n"
    "  if ((size_t)tfmc_weights_image % 64 != 0) return 3;\n"
    "  return fwrite(tfmc_weights_image, 1, tfmc_weights_image_size, stdout) !=\n"
    "         tfmc_weights_image_size;\n"
    "}\n";

Test(project, embedded_weights_are_the_packed_file, .timeout = 120) {
  Model m = small_model("small");
  char *dir = ct_mkdtemp("emb");
  char d1[512], d2[512], err[1024];
  snprintf(d1, sizeof d1, "%s/file", dir);
  snprintf(d2, sizeof d2, "%s/embed", dir);
  CEmitOptions o1 = {false, CT_RUNTIME_DIR}, o2 = {true, CT_RUNTIME_DIR};
  cr_assert_eq(c_emit_project(m.p, m.info, m.weights, &o1, d1, err, sizeof err), 0, "%s", err);
  cr_assert_eq(c_emit_project(m.p, m.info, m.weights, &o2, d2, err, sizeof err), 0, "%s", err);
  char path[600];
  snprintf(path, sizeof path, "%s/dump.c", d2);
  ct_write_text(path, dump_src);
  const char *ccs[] = {"gcc", "clang"};
  for (int i = 0; i < 2; i++) {
    if (!ct_have(ccs[i])) continue;
    CT_RUN("cd %s && %s -std=c99 " CT_WARN " -O2 dump.c weights.c -o dump && ./dump > image.bin && "
           "cmp image.bin %s/small.weights",
           d2, ccs[i], d1);
  }
  arena_destroy(m.a);
  ct_rmdir(dir);
}

/* ---- refusals ---- */

static bool dir_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void refused(const LoopProgram *p, const RtModelInfo *info, const char *want) {
  char err[512] = "";
  cr_assert_neq(c_program_check(p, err, sizeof err) || c_info_check(info, p, err, sizeof err), 0,
                "accepted; expected: %s", want);
  cr_assert(strstr(err, want), "message '%s' lacks '%s'", err, want);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  c_emit_model(p, info, f);
  fclose(f);
  cr_assert(strncmp(buf, "#error \"c: ", 11) == 0 && !strchr(buf, '{'), "printed: %s", buf);
  free(buf);
  char *dir = ct_mkdtemp("bad");
  char out[600];
  snprintf(out, sizeof out, "%s/proj", dir);
  CEmitOptions opt = {false, CT_RUNTIME_DIR};
  static const float w[64];
  cr_assert_neq(c_emit_project(p, info, w, &opt, out, err, sizeof err), 0);
  cr_assert(!dir_exists(out), "a refused program still wrote %s", out);
  ct_rmdir(dir);
}

typedef struct Tiny {
  Arena *a;
  LoopProgram *p;
  LKernel *k;
  int bin, bout, bw, tv;
  RtModelInfo info;
  RtTensorInfo in, out;
  RtWeightInfo w;
} Tiny;

/* out[i] = in[i] * w[0]; a valid program the cases below break */
static void tiny(Tiny *t) {
  memset(t, 0, sizeof *t);
  t->a = arena_create();
  LoopProgram *p = t->p = loop_program_create(t->a, "tiny");
  p->n_syms = 1;
  p->weights_floats = 16;
  t->bin = loop_buffer_add(p, LB_INPUT, 0, 0, LE_F32, "in");
  t->bout = loop_buffer_add(p, LB_OUTPUT, 0, 0, LE_F32, "out");
  t->bw = loop_buffer_add(p, LB_WEIGHT, 0, 0, LE_F32, "w");
  LKernel *k = t->k = loop_kernel_add(p, "k0_mul", "mul", 0);
  k->extent = lx_sym(p, 0);
  t->tv = loop_var_new(p, k, LT_F32);
  ls_append(p, k->body, ls_let(p, t->tv, LT_F32, lx_load(p, t->bw, lx_i(p, 0))));
  ls_append(p, k->body, ls_store(p, t->bout, lx_var(p, k, k->outer_var),
                                 lx_bin(p, LB_MUL, lx_load(p, t->bin, lx_var(p, k, k->outer_var)),
                                        lx_var(p, k, t->tv))));
  RtModelInfo *m = &t->info;
  m->abi_version = RT_ABI_VERSION;
  m->name = "tiny";
  m->n_syms = 1;
  m->sym_names[0] = "N";
  m->sym_max[0] = 4;
  t->in = (RtTensorInfo){.name = "in", .elem = RT_ELEM_F32, .rank = 1, .dims = {{0, 0}}};
  t->out = (RtTensorInfo){.name = "out", .elem = RT_ELEM_F32, .rank = 1, .dims = {{0, 0}}};
  t->w = (RtWeightInfo){.name = "w", .rank = 1, .shape = {1}, .offset = 0};
  m->n_inputs = m->n_outputs = m->n_weights = 1;
  m->inputs = &t->in;
  m->outputs = &t->out;
  m->weights = &t->w;
  m->weights_floats = 16;
  m->layout_hash = rt_model_layout_hash(&t->w, 1);
}

Test(project, tiny_program_is_accepted) {
  Tiny t;
  tiny(&t);
  char err[256];
  cr_assert_eq(c_program_check(t.p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(c_info_check(&t.info, t.p, err, sizeof err), 0, "%s", err);
  arena_destroy(t.a);
}

Test(project, malformed_programs_are_refused) {
  Tiny t;

  tiny(&t); /* a store into the weights */
  ls_append(t.p, t.k->body, ls_store(t.p, t.bw, lx_i(t.p, 0), lx_f32(t.p, 1)));
  refused(t.p, &t.info, "stores into b2, which is in the weights");
  arena_destroy(t.a);

  tiny(&t); /* an extent reading a variable (every other rule of loop IR:
             * tests/ir/test_loop_verify.c) */
  t.k->extent = lx_var(t.p, t.k, t.k->outer_var);
  refused(t.p, &t.info, "c: kernel 0 (k0_mul): uses variable v0 in an extent");
  arena_destroy(t.a);

  tiny(&t); /* the info does not match the program */
  t.info.weights_floats = 32;
  refused(t.p, &t.info, "does not match the program");
  arena_destroy(t.a);

  tiny(&t); /* a weight outside the packed weights */
  t.w.offset = 15;
  t.w.shape[0] = 4;
  refused(t.p, &t.info, "lies outside");
  arena_destroy(t.a);

  tiny(&t); /* a nameless input */
  t.in.name = NULL;
  refused(t.p, &t.info, "input 0 has no name");
  arena_destroy(t.a);
}

Test(project, bad_arguments_are_refused) {
  Tiny t;
  tiny(&t);
  char *dir = ct_mkdtemp("args");
  char out[600], err[512];
  snprintf(out, sizeof out, "%s/proj", dir);
  static const float w[16];
  CEmitOptions bad_rt = {false, "/nonexistent/runtime"};
  cr_assert_neq(c_emit_project(t.p, &t.info, w, &bad_rt, out, err, sizeof err), 0);
  cr_assert(strstr(err, "cannot read the runtime directory /nonexistent/runtime"), "%s", err);
  CEmitOptions tests_dir = {false, TFMC_SOURCE_DIR "/tests"};
  cr_assert_neq(c_emit_project(t.p, &t.info, w, &tests_dir, out, err, sizeof err), 0);
  cr_assert(strstr(err, "has no rt_model.h"), "%s", err);
  CEmitOptions opt = {false, CT_RUNTIME_DIR};
  cr_assert_neq(c_emit_project(t.p, &t.info, NULL, &opt, out, err, sizeof err), 0);
  cr_assert(strstr(err, "no weights"), "%s", err);
  cr_assert_neq(c_emit_project(t.p, &t.info, w, NULL, out, err, sizeof err), 0);
  cr_assert(!dir_exists(out));
  /* a file where the directory should be */
  ct_write_text(out, "not a directory");
  cr_assert_neq(c_emit_project(t.p, &t.info, w, &opt, out, err, sizeof err), 0);
  cr_assert(strstr(err, "is not a directory"), "%s", err);
  arena_destroy(t.a);
  ct_rmdir(dir);
}

/* make NO_BLAS=1 builds a program that never loads a BLAS library. */
Test(project, no_blas_build_has_no_dlopen, .timeout = 120) {
  Tiny t;
  tiny(&t);
  char *dir = ct_mkdtemp("noblas");
  char out[600], err[512];
  snprintf(out, sizeof out, "%s/proj", dir);
  static const float w[16] = {2.0f};
  CEmitOptions opt = {false, CT_RUNTIME_DIR};
  cr_assert_eq(c_emit_project(t.p, &t.info, w, &opt, out, err, sizeof err), 0, "%s", err);
  CT_RUN("cd %s && make CFLAGS='-O2 -Werror' NO_BLAS=1 && nm -u tiny > undefined.txt", out);
  char path[700];
  snprintf(path, sizeof path, "%s/undefined.txt", out);
  char *u = ct_read_text(path, NULL);
  cr_assert(u && strstr(u, "pthread"), "nm -u lists no pthread symbol: %s", u ? u : "");
  cr_assert(!strstr(u, "dlopen"),
            "runtime/rt_gemm.c does not honour TFMC_NO_BLAS: the NO_BLAS build still calls "
            "dlopen");
  free(u);
  arena_destroy(t.a);
  ct_rmdir(dir);
}

/* An output that resolves to an input (here only once the emission has
 * created the directory) fails the emission, which then changes nothing:
 * no file, no temporary, not even the directories it created. */
Test(project, failed_emission_leaves_nothing) {
  Model m = small_model("small");
  char *dir = ct_mkdtemp("fail");
  char out[600], input[700], parent[600], err[1024];
  snprintf(parent, sizeof parent, "%s/new", dir);
  snprintf(out, sizeof out, "%s/new/proj", dir);
  snprintf(input, sizeof input, "%s/new/../new/proj/Makefile", dir);
  const char *ins[] = {input};
  CEmitOptions opt = {false, CT_RUNTIME_DIR, false, ins, 1};
  cr_assert_neq(c_emit_project(m.p, m.info, m.weights, &opt, out, err, sizeof err), 0);
  cr_assert(strstr(err, "refusing to overwrite"), "%s", err);
  cr_assert(!dir_exists(parent), "a failed emission left %s", parent);
  /* into an existing foreign directory only with force */
  mkdir(parent, 0755);
  mkdir(out, 0755);
  snprintf(input, sizeof input, "%s/new/proj/notes", dir);
  ct_write_text(input, "mine");
  opt.n_inputs = 0;
  cr_assert_neq(c_emit_project(m.p, m.info, m.weights, &opt, out, err, sizeof err), 0);
  cr_assert(strstr(err, "--force"), "%s", err);
  opt.force = true;
  cr_assert_eq(c_emit_project(m.p, m.info, m.weights, &opt, out, err, sizeof err), 0, "%s", err);
  arena_destroy(m.a);
  ct_rmdir(dir);
}
