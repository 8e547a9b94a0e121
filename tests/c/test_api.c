/* tests/c/test_api.c — the static library's C API (model.h) from a C99
 * program, on the bundled sort model emitted by `tfmc emit-c`: the
 * description functions, create / run / destroy on caller buffers (outputs
 * equal PyTorch's within 1e-4), a derived mask equal to an explicit one,
 * smaller run-time dims, every refusal (bad dims, ids, masks, missing
 * buffers, missing or foreign weights files, bad thread counts) with the
 * model still usable afterwards, the safetensors-file entry, and the
 * embedded-weights variant. Built with gcc and clang, -std=c99 -pedantic
 * -Werror. */
#include "c_test_util.h"

#define SORT_DIR TFMC_SOURCE_DIR "/examples/sort"
#define TFMC TFMC_BINARY_DIR "/tfmc"

static const char client_src[] =
    "#include \"model.h\"\n"
    "#include <math.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "\n"
    "static int fails = 0;\n"
    "#define CHECK(c, what) do { if (!(c)) { printf(\"FAIL line %d: %s (%s)\\n\", __LINE__, what, err); fails++; } } while (0)\n"
    "static char err[512];\n"
    "\n"
    "static void *slurp(const char *path, size_t *n) {\n"
    "  FILE *f = fopen(path, \"rb\");\n"
    "  char *b = malloc(1 << 20);\n"
    "  *n = f && b ? fread(b, 1, 1 << 20, f) : 0;\n"
    "  if (f) fclose(f);\n"
    "  return b;\n"
    "}\n"
    "\n"
    "int main(int argc, char **argv) {\n"
    "  const char *wpath = argc > 1 && strcmp(argv[1], \"-\") != 0 ? argv[1] : NULL;\n"
    "  size_t nt, ne;\n"
    "  int32_t *tokens = slurp(argv[2], &nt);\n"
    "  float *expected = slurp(argv[3], &ne);\n"
    "  int threads = atoi(argv[5]);\n"
    "  int64_t dims[2] = {8, 16}, shape[TFMC_MAX_RANK];\n"
    "  int i;\n"
    "  CHECK(nt == 8 * 16 * 4 && ne == 8 * 16 * 11 * 4, \"test data\");\n"
    "  /* the description */\n"
    "  CHECK(strcmp(tfmc_model_name(), \"sort\") == 0, \"name\");\n"
    "  CHECK(tfmc_model_n_dims() == 2, \"n_dims\");\n"
    "  CHECK(strcmp(tfmc_model_dim_name(0), \"B\") == 0 && strcmp(tfmc_model_dim_name(1), \"S\") == 0, \"dim names\");\n"
    "  CHECK(tfmc_model_dim_max(0) == 64 && tfmc_model_dim_max(1) == 16, \"dim max\");\n"
    "  CHECK(tfmc_model_dim_name(2) == NULL && tfmc_model_dim_max(-1) == 0, \"dims out of range\");\n"
    "  CHECK(tfmc_model_n_inputs() == 2 && tfmc_model_n_outputs() == 1, \"counts\");\n"
    "  CHECK(strcmp(tfmc_model_input_name(0), \"tokens\") == 0, \"input 0\");\n"
    "  CHECK(tfmc_model_input_kind(0) == TFMC_INPUT_IDS && tfmc_model_input_vocab(0) == 11, \"ids\");\n"
    "  CHECK(strcmp(tfmc_model_input_name(1), \"mask\") == 0, \"input 1\");\n"
    "  CHECK(tfmc_model_input_kind(1) == TFMC_INPUT_MASK && tfmc_model_input_vocab(1) == 0, \"mask\");\n"
    "  CHECK(tfmc_model_input_kind(2) == -1 && tfmc_model_input_name(2) == NULL, \"inputs out of range\");\n"
    "  CHECK(strcmp(tfmc_model_output_name(0), \"logits\") == 0, \"output\");\n"
    "  CHECK(tfmc_model_output_shape(0, dims, shape) == 3 && shape[0] == 8 && shape[1] == 16 && shape[2] == 11, \"output shape\");\n"
    "  CHECK(tfmc_model_input_shape(1, dims, shape) == 2 && shape[1] == 16, \"input shape\");\n"
    "  CHECK(tfmc_model_output_numel(0, dims) == 8 * 16 * 11 && tfmc_model_input_numel(0, dims) == 128, \"numel\");\n"
    "  dims[1] = 17;\n"
    "  CHECK(tfmc_model_output_shape(0, dims, shape) == -1 && tfmc_model_output_numel(0, dims) == -1, \"bad dims\");\n"
    "  dims[1] = 16;\n"
    "\n"
    "  /* refusals at create */\n"
    "  CHECK(!tfmc_model_create(\"/nonexistent/sort.weights\", 1, err, sizeof err) && strstr(err, \"/nonexistent/sort.weights\"), \"missing weights\");\n"
    "  CHECK(!tfmc_model_create(argv[2], 1, err, sizeof err) && strstr(err, argv[2]), \"foreign weights\");\n"
    "  CHECK(!tfmc_model_create(wpath, -1, err, sizeof err) && strstr(err, \"n_threads\"), \"threads < 0\");\n"
    "  CHECK(!tfmc_model_create(wpath, 1000, err, sizeof err) && strstr(err, \"n_threads\"), \"threads > 256\");\n"
    "  if (wpath) CHECK(!tfmc_model_create(NULL, 1, err, sizeof err) && strstr(err, \"no embedded weights\"), \"no embedded weights\");\n"
    "\n"
    "  TfmcModel *m = tfmc_model_create(wpath, threads, err, sizeof err);\n"
    "  CHECK(m != NULL, \"create\");\n"
    "  if (!m) return 1;\n"
    "  float *out = malloc(8 * 16 * 11 * sizeof *out), *out2 = malloc(8 * 16 * 11 * sizeof *out);\n"
    "  uint8_t mask[8 * 16];\n"
    "  const void *inputs[2];\n"
    "  float *outputs[1];\n"
    "  inputs[0] = tokens;\n"
    "  inputs[1] = NULL;\n"
    "  outputs[0] = out;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) == 0, \"run\");\n"
    "  double maxd = 0;\n"
    "  for (i = 0; i < 8 * 16 * 11; i++) {\n"
    "    double d = fabs((double)out[i] - expected[i]);\n"
    "    if (d > maxd) maxd = d;\n"
    "    if (d > 1e-4 + 1e-4 * fabs(expected[i])) { CHECK(0, \"logits differ from PyTorch\"); break; }\n"
    "  }\n"
    "  printf(\"max |diff| vs PyTorch: %g\\n\", maxd);\n"
    "  /* an explicit mask equal to the derived one gives the same bits */\n"
    "  for (i = 0; i < 128; i++) mask[i] = (uint8_t)(tokens[i] != 0);\n"
    "  inputs[1] = mask;\n"
    "  outputs[0] = out2;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) == 0, \"run with mask\");\n"
    "  CHECK(memcmp(out, out2, 8 * 16 * 11 * sizeof *out) == 0, \"explicit mask = derived mask\");\n"
    "  /* fewer sequences: the first 3 rows */\n"
    "  dims[0] = 3;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) == 0, \"run B=3\");\n"
    "  for (i = 0; i < 3 * 16 * 11; i++)\n"
    "    if (fabs((double)out[i] - out2[i]) > 1e-5 * (1 + fabs(out[i]))) { CHECK(0, \"B=3 rows = first rows of B=8\"); break; }\n"
    "  dims[0] = 8;\n"
    "\n"
    "  /* refusals at run time: a message, nothing run, the model still usable */\n"
    "  dims[0] = 0;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"dimension B is 0\"), \"B = 0\");\n"
    "  dims[0] = 65;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"1..64\"), \"B = 65\");\n"
    "  dims[0] = 8;\n"
    "  tokens[37] = 11;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"[0, 11)\"), \"id = vocab\");\n"
    "  tokens[37] = -1;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"'tokens'[37]\"), \"id < 0\");\n"
    "  tokens[37] = 1;\n"
    "  mask[5] = 2;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"0 or 1\"), \"mask 2\");\n"
    "  for (i = 16; i < 32; i++) mask[i] = 0;\n"
    "  mask[5] = 1;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"sequence 1 has no real token\"), \"empty row\");\n"
    "  inputs[0] = NULL;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"'tokens' is missing\"), \"no tokens\");\n"
    "  inputs[0] = tokens;\n"
    "  inputs[1] = NULL;\n"
    "  outputs[0] = NULL;\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) && strstr(err, \"'logits' has no buffer\"), \"no output\");\n"
    "  CHECK(tfmc_model_run_buffers(NULL, dims, inputs, outputs, err, sizeof err) != 0, \"no model\");\n"
    "  outputs[0] = out2;\n"
    "  tokens[37] = ((int32_t *)slurp(argv[2], &nt))[37];\n"
    "  CHECK(tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err) == 0, \"run after refusals\");\n"
    "  CHECK(memcmp(out, out2, 8 * 16 * 11 * sizeof *out) == 0, \"same result after refusals\");\n"
    "\n"
    "  /* the file entry */\n"
    "  CHECK(tfmc_model_run_files(m, argv[4], \"files_out.safetensors\", err, sizeof err) == 0, \"run_files\");\n"
    "  CHECK(tfmc_model_run_files(m, \"/nonexistent.safetensors\", \"x.safetensors\", err, sizeof err) && strstr(err, \"/nonexistent.safetensors\"), \"run_files missing\");\n"
    "  tfmc_model_destroy(m);\n"
    "  tfmc_model_destroy(NULL);\n"
    "  printf(\"%d failures\\n\", fails);\n"
    "  return fails != 0;\n"
    "}\n";

/* Emits the sort model into dir (embedded weights or not). */
static void emit_sort(const char *dir, bool embed) {
  cr_assert(access(TFMC, X_OK) == 0, "%s is not built (the C API test emits through `tfmc emit-c`)",
            TFMC);
  CT_RUN("%s emit-c %s/model.tfm --weights %s/weights.safetensors -o %s%s", TFMC, SORT_DIR, SORT_DIR,
         dir, embed ? " --embed-weights" : "");
}

/* tokens.bin (int32) and expected.bin (float logits) for the client */
static void write_raw_data(const char *dir) {
  RtSafetensors *st;
  char err[512], path[700];
  cr_assert_eq(rt_st_open(SORT_DIR "/inputs.safetensors", &st, err, sizeof err), 0, "%s", err);
  int32_t tok[128];
  cr_assert_eq(rt_st_read_i32(rt_st_find(st, "tokens"), tok, 0, 10, err, sizeof err), 0, "%s", err);
  rt_st_close(st);
  snprintf(path, sizeof path, "%s/tokens.bin", dir);
  FILE *f = fopen(path, "wb");
  cr_assert(f && fwrite(tok, 4, 128, f) == 128);
  fclose(f);
  int64_t n;
  float *e = ct_read_output(SORT_DIR "/expected.safetensors", "logits", &n);
  cr_assert_eq(n, 8 * 16 * 11);
  snprintf(path, sizeof path, "%s/expected.bin", dir);
  f = fopen(path, "wb");
  cr_assert(f && fwrite(e, 4, (size_t)n, f) == (size_t)n);
  fclose(f);
  free(e);
}

static void api_with(const char *cc, bool embed, int threads) {
  if (!ct_have(cc)) cr_skip_test("%s is not installed (Debian package %s)", cc, cc);
  char *dir = ct_mkdtemp("api");
  char proj[600], path[700];
  snprintf(proj, sizeof proj, "%s/sort", dir);
  emit_sort(proj, embed);
  write_raw_data(proj);
  snprintf(path, sizeof path, "%s/client.c", proj);
  ct_write_text(path, client_src);
  CT_RUN("cd %s && make CC=%s CFLAGS='-O2 -Werror' libmodel.a && %s -std=c99 " CT_WARN
         " -O2 -I. client.c libmodel.a -lm -lpthread -ldl -o client",
         proj, cc, cc);
  CT_RUN("cd %s && ./client %s tokens.bin expected.bin %s/inputs.safetensors %d", proj,
         embed ? "-" : "sort.weights", SORT_DIR, threads);
  /* the file entry's output equals PyTorch's too */
  snprintf(path, sizeof path, "%s/files_out.safetensors", proj);
  int64_t n, ne;
  float *got = ct_read_output(path, "logits", &n);
  float *want = ct_read_output(SORT_DIR "/expected.safetensors", "logits", &ne);
  cr_assert_eq(n, ne);
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabsf(got[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]), "logits[%lld] %g vs %g",
              (long long)i, got[i], want[i]);
  free(got);
  free(want);
  ct_rmdir(dir);
}

Test(api, gcc_weights_file_threads, .timeout = 300) { api_with("gcc", false, 0); }
Test(api, clang_embedded_one_thread, .timeout = 300) { api_with("clang", true, 1); }
