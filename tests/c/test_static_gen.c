/* tests/c/test_static_gen.c — `tfmc emit-c --static` of the generating
 * examples end to end: examples/reverse (an encoder_decoder) and
 * examples/add (a decoder), weights embedded, through model_gen.h's static
 * step API. The harness tests/c/mcu/gen_main.c (model.h only) decodes
 * greedily the first cases of each example's expected.txt and runs
 *   - on the host under -fsanitize=address,undefined and under valgrind,
 *     which must report no heap use at all (0 allocs);
 *   - on a Cortex-M4F (hard float) under qemu-system-arm's mps2-an386 with
 *     semihosting, the library built by the project's Makefile with
 *     arm-none-eabi-gcc -Os and linked with newlib;
 * both printing the ids of every case, which must be exactly what `tfmc run
 * --generate` prints for the same input and the example's expected answer
 * (then eos), the same refusals of bad input on both, and two generators
 * in two regions agreeing. The objects reference nothing outside the
 * library but libm and memcpy-style libc functions (nm: no malloc,
 * threads, files, stdio) and the Cortex-M objects hold no writable global.
 * Also: the commands' memory reports, and the refusals of what a static
 * build cannot plan (beams, a region a 32-bit target cannot address). A
 * target is skipped (naming the Debian package) only when its toolchain
 * is missing; tools/setup.sh installs them. */
#include "static_util.h"

#define TFMC TFMC_BINARY_DIR "/tfmc"
#define EXAMPLES TFMC_SOURCE_DIR "/examples"
#define N_CASES 6

/* The id of each blank-separated symbol of text in the example's vocab. */
static int symbols_to_ids(const char *vocab, const char *text, int *ids, int cap) {
  int n = 0;
  char sym[64];
  for (const char *p = text; *p;) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " \t\n");
    if (!len) break;
    cr_assert(len < sizeof sym && n < cap);
    memcpy(sym, p, len);
    sym[len] = '\0';
    int id = 0;
    const char *v = vocab;
    for (; *v; id++) {
      size_t vl = strcspn(v, "\n");
      if (vl == len && memcmp(v, sym, len) == 0) break;
      v += vl + (v[vl] == '\n');
    }
    cr_assert(*v, "'%s' is not in the vocabulary", sym);
    ids[n++] = id;
    p += len;
  }
  return n;
}

/* Emits example `name` with --static --embed-weights into dir/proj and
 * writes proj/gen_data.h with its first N_CASES cases; returns the ids
 * `tfmc run --generate 20` prints for them as the harness prints them
 * ("case C: IDS" lines, malloc'd), after checking each is the expected
 * answer followed by eos. */
static char *emit_gen(const char *dir, const char *name, int eos) {
  char path[512], *log = NULL;
  snprintf(path, sizeof path, EXAMPLES "/%s/vocab.txt", name);
  char *vocab = ct_read_text(path, NULL);
  snprintf(path, sizeof path, EXAMPLES "/%s/expected.txt", name);
  char *expected = ct_read_text(path, NULL);
  cr_assert(vocab && expected);
  char data[8192], ref[4096];
  int dl = snprintf(data, sizeof data,
                    "#define GEN_N %d\n#define GEN_MAX_NEW 20\n#define GEN_CAP 16\n"
                    "static const int64_t gen_len[GEN_N] = {",
                    N_CASES);
  char ids_text[N_CASES][256];
  int lens[N_CASES], ids[N_CASES][16];
  int rl = 0;
  const char *line = expected;
  for (int c = 0; c < N_CASES; c++) {
    const char *tab = strchr(line, '\t'), *eol = strchr(line, '\n');
    cr_assert(tab && eol && tab < eol, "%s/expected.txt: line %d", name, c + 1);
    char input[256], answer[256];
    snprintf(input, sizeof input, "%.*s", (int)(tab - line), line);
    snprintf(answer, sizeof answer, "%.*s", (int)(eol - tab - 1), tab + 1);
    lens[c] = symbols_to_ids(vocab, input, ids[c], 16);
    int want[32];
    int nw = symbols_to_ids(vocab, answer, want, 31);
    want[nw++] = eos;
    int tl = 0;
    for (int k = 0; k < lens[c]; k++) tl += snprintf(ids_text[c] + tl, 256 - (size_t)tl, "%s%d", k ? " " : "", ids[c][k]);
    dl += snprintf(data + dl, sizeof data - (size_t)dl, "%s%d", c ? ", " : "", lens[c]);
    /* tfmc run --generate: the reference */
    int rc = ct_sh(&log, "%s run " EXAMPLES "/%s/model.tfm --weights " EXAMPLES
                   "/%s/weights.safetensors --tokens '%s' --generate 20",
                   TFMC, name, name, ids_text[c]);
    cr_assert_eq(rc, 0, "%s", log);
    char got[256] = "";
    int gl = 0, ng = 0;
    const char *ids_start = strstr(log, "\n"); /* after the "$ command" line */
    cr_assert(ids_start, "%s", log);
    for (const char *p = ids_start + 1; *p;) {
      char *end;
      long v = strtol(p, &end, 10);
      if (end == p) break;
      cr_assert(ng < 32 && v == want[ng], "%s case %d: tfmc run gives id %ld, the expected answer %d",
                name, c, v, ng < nw ? want[ng] : -1);
      ng++;
      gl += snprintf(got + gl, sizeof got - (size_t)gl, " %ld", v);
      p = end;
      while (*p == '\n') p++;
    }
    cr_assert_eq(ng, nw, "%s case %d: tfmc run gave %d ids:\n%s", name, c, ng, log);
    rl += snprintf(ref + rl, sizeof ref - (size_t)rl, "case %d:%s\n", c, got);
    free(log);
    line = eol + 1;
  }
  dl += snprintf(data + dl, sizeof data - (size_t)dl,
                 "};\nstatic const int32_t gen_ids[GEN_N][GEN_CAP] = {\n");
  for (int c = 0; c < N_CASES; c++) {
    dl += snprintf(data + dl, sizeof data - (size_t)dl, "  {");
    for (int k = 0; k < lens[c]; k++)
      dl += snprintf(data + dl, sizeof data - (size_t)dl, "%s%d", k ? ", " : "", ids[c][k]);
    dl += snprintf(data + dl, sizeof data - (size_t)dl, "},\n");
  }
  snprintf(data + dl, sizeof data - (size_t)dl, "};\n");
  CT_RUN("%s emit-c " EXAMPLES "/%s/model.tfm --weights " EXAMPLES "/%s/weights.safetensors "
         "--static --embed-weights -o %s/proj",
         TFMC, name, name, dir);
  snprintf(path, sizeof path, "%s/proj/gen_data.h", dir);
  ct_write_text(path, data);
  free(vocab);
  free(expected);
  char *r = strdup(ref);
  cr_assert(r);
  return r;
}

/* The harness's output: "done: ok" and the reference's ids; returns the
 * text (malloc'd). */
static char *check_output(const char *path, const char *what, const char *ref) {
  char *text = ct_read_text(path, NULL);
  cr_assert(text, "no output from %s", what);
  cr_assert(strstr(text, "done: ok\n"), "%s:\n%s", what, text);
  char *cases = lines_with(text, "case ");
  cr_assert_str_eq(cases, ref, "%s generates other ids than tfmc run --generate:\n%s", what, text);
  free(cases);
  return text;
}

static void host(const char *name, int eos) {
  char *dir = ct_mkdtemp("static-gen-host");
  char *ref = emit_gen(dir, name, eos);
  CT_RUN("cd %s/proj && make -s CC=gcc CFLAGS='-O1 -g -fsanitize=address,undefined "
         "-fno-sanitize-recover=all -Werror' && gcc -std=c99 " CT_WARN
         " -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -I. -I" MCU " " MCU
         "/gen_main.c " MCU "/host_io.c libmodel.a -lm -o gen_asan && ./gen_asan > asan.txt",
         dir);
  char path[512];
  snprintf(path, sizeof path, "%s/proj/asan.txt", dir);
  free(check_output(path, "the host build under ASan+UBSan", ref));
  if (!ct_have("valgrind")) cr_skip_test("valgrind is missing (Debian package valgrind)");
  CT_RUN("cd %s/proj && make -s clean && make -s CC=gcc CFLAGS='-O2 -g -Werror' && "
         "gcc -std=c99 " CT_WARN " -O2 -g -I. -I" MCU " " MCU "/gen_main.c " MCU
         "/host_io.c libmodel.a -lm -o gen_host && "
         "valgrind --error-exitcode=9 ./gen_host > valgrind.txt 2> valgrind.log && "
         "grep -q 'total heap usage: 0 allocs, 0 frees, 0 bytes allocated' valgrind.log && "
         "grep -q 'ERROR SUMMARY: 0 errors' valgrind.log || { cat valgrind.log; exit 1; }",
         dir);
  snprintf(path, sizeof path, "%s/proj/valgrind.txt", dir);
  free(check_output(path, "the host build under valgrind", ref));
  snprintf(path, sizeof path, "%s/proj", dir);
  check_references(path, "nm");
  free(ref);
  ct_rmdir(dir);
}

Test(static_gen, reverse_host_sanitizers_valgrind_no_heap, .timeout = 300) { host("reverse", 2); }
Test(static_gen, add_host_sanitizers_valgrind_no_heap, .timeout = 300) { host("add", 12); }

static void cortex_m4(const char *name, int eos) {
  if (!ct_have("arm-none-eabi-gcc"))
    cr_skip_test("arm-none-eabi-gcc is missing (Debian packages gcc-arm-none-eabi "
                 "libnewlib-arm-none-eabi)");
  if (!ct_have("qemu-system-arm"))
    cr_skip_test("qemu-system-arm is missing (Debian package qemu-system-arm)");
  char *dir = ct_mkdtemp("static-gen-m4");
  char *ref = emit_gen(dir, name, eos);
  CT_RUN("cd %s/proj && make -s CC=gcc CFLAGS='-O2 -Werror' && gcc -std=c99 " CT_WARN
         " -O2 -I. -I" MCU " " MCU "/gen_main.c " MCU "/host_io.c libmodel.a -lm -o gen_host"
         " && ./gen_host > host.txt && make -s clean",
         dir);
  CT_RUN("cd %s/proj && make -s CC=arm-none-eabi-gcc AR=arm-none-eabi-ar CFLAGS='-Os " ARM_FLAGS
         " -ffunction-sections -fdata-sections -Werror' && "
         "arm-none-eabi-size -t $(ls *.o runtime/*.o | grep -v weights.o) > size.txt && "
         "arm-none-eabi-gcc -std=c99 " CT_WARN " -Os " ARM_FLAGS
         " -ffunction-sections -fdata-sections -I. -I" MCU " " MCU "/gen_main.c " MCU
         "/mps2_startup.c libmodel.a -nostartfiles -T " MCU "/mps2_an386.ld -Wl,--gc-sections "
         "-lm -lc -lgcc -o gen.elf && "
         "timeout 500 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none "
         "-semihosting-config enable=on,target=native -icount shift=0 -kernel gen.elf "
         "> m4.txt 2>&1",
         dir);
  char path[512];
  snprintf(path, sizeof path, "%s/proj/size.txt", dir);
  char *size = ct_read_text(path, NULL);
  cr_assert(size);
  const char *tot = strstr(size, "(TOTALS)");
  cr_assert(tot, "%s", size);
  while (tot > size && tot[-1] != '\n') tot--;
  long text = strtol(tot, NULL, 10);
  cr_assert(text > 1000 && text < 128 * 1024,
            "the library's text (code + constants, weights aside) is %ld bytes:\n%s", text, size);
  free(size);
  snprintf(path, sizeof path, "%s/proj/m4.txt", dir);
  char *m4 = check_output(path, "the Cortex-M4F image under qemu", ref);
  snprintf(path, sizeof path, "%s/proj/host.txt", dir);
  char *hst = check_output(path, "the host build", ref);
  const char *prefixes[] = {"model ", "refused ", "two generators", "done"};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
    char *a = lines_with(m4, prefixes[i]), *b = lines_with(hst, prefixes[i]);
    cr_assert(a[0], "no '%s' lines", prefixes[i]);
    cr_assert_str_eq(a, b, "the Cortex-M4F and the host differ");
    free(a);
    free(b);
  }
  cr_assert(strstr(m4, "ticks per generated token: "), "%s", m4);
  free(m4);
  free(hst);
  free(ref);
  snprintf(path, sizeof path, "%s/proj", dir);
  check_references(path, "arm-none-eabi-nm");
  CT_RUN("cd %s/proj && arm-none-eabi-nm *.o runtime/*.o > syms.txt && "
         "if grep -E ' [BbDdCGgSs] ' syms.txt; then echo 'writable globals above'; exit 1; fi",
         dir);
  ct_rmdir(dir);
}

Test(static_gen, reverse_cortex_m4_under_qemu, .timeout = 900) { cortex_m4("reverse", 2); }
Test(static_gen, add_cortex_m4_under_qemu, .timeout = 900) { cortex_m4("add", 12); }

/* What the commands print and refuse. */
Test(static_gen, cli) {
  char *dir = ct_mkdtemp("static-gen-cli");
  char *log = NULL;
  int rc = ct_sh(&log, "%s check " EXAMPLES "/reverse/model.tfm", TFMC);
  cr_assert_eq(rc, 0, "%s", log);
  cr_assert(strstr(log, "static generation "), "%s", log);
  free(log);
  /* without --embed-weights: the caller's image; the sizes in model.h */
  rc = ct_sh(&log, "%s emit-c " EXAMPLES "/add/model.tfm --weights " EXAMPLES
             "/add/weights.safetensors --static -o %s/q",
             TFMC, dir);
  cr_assert_eq(rc, 0, "%s", log);
  cr_assert(strstr(log, "TFMC_GEN_MEM_BYTES "), "%s", log);
  free(log);
  CT_RUN("cd %s/q && test -f add.weights && test ! -f main.c && test ! -f runtime/rt_pool.c && "
         "make -s CFLAGS='-O2 -Werror' && grep -q '#define TFMC_GEN_MEM_BYTES' model.h && "
         "grep -q 'tfmc_gen_init' model_gen.h",
         dir);
  /* the caller's image (add.weights' bytes): refused without one, then
   * "4 0 6 + 5 9 7 =" continues with the sum and eos */
  char path[512];
  snprintf(path, sizeof path, "%s/q/image.c", dir);
  ct_write_text(path,
                "#include \"model.h\"\n"
                "#include <stdio.h>\n"
                "#include <stdlib.h>\n"
                "static unsigned char mem[TFMC_GEN_MEM_BYTES];\n"
                "int main(void) {\n"
                "  FILE *f = fopen(\"add.weights\", \"rb\");\n"
                "  unsigned char *img = malloc(TFMC_WEIGHTS_BYTES + 64);\n"
                "  size_t n = f && img ? fread(img, 1, TFMC_WEIGHTS_BYTES + 64, f) : 0;\n"
                "  char err[256];\n"
                "  if (tfmc_gen_init(mem, sizeof mem, NULL, 0, err, sizeof err)) return 2;\n"
                "  printf(\"no image: %s\\n\", err);\n"
                "  TfmcGen *g = tfmc_gen_init(mem, sizeof mem, img, n, err, sizeof err);\n"
                "  if (!g) { printf(\"refused: %s\\n\", err); return 1; }\n"
                "  int32_t prompt[8] = {4, 0, 6, 10, 5, 9, 7, 11};\n"
                "  const float *l;\n"
                "  if (tfmc_gen_prefill(g, prompt, 8, &l, err, sizeof err)) return 3;\n"
                "  for (int i = 0; i < 10; i++) {\n"
                "    int b = 0;\n"
                "    for (int v = 1; v < tfmc_gen_vocab(); v++) if (l[v] > l[b]) b = v;\n"
                "    printf(\"%d \", b);\n"
                "    if (b == tfmc_gen_eos()) break;\n"
                "    if (tfmc_gen_step(g, b, &l, err, sizeof err)) return 4;\n"
                "  }\n"
                "  printf(\"\\n\");\n"
                "  free(img);\n"
                "  return 0;\n"
                "}\n");
  CT_RUN("cd %s/q && gcc -std=c99 " CT_WARN " -O2 -I. image.c libmodel.a -lm -o image && "
         "./image > out.txt && grep -qx '1 0 0 3 12 ' out.txt && "
         "grep -q 'no image: model .add. has no embedded weights' out.txt",
         dir);
  /* --size-cc measures the generation sources too */
  rc = ct_sh(&log, "%s emit-c " EXAMPLES "/reverse/model.tfm --weights " EXAMPLES
             "/reverse/weights.safetensors --static --size-cc 'cc -Os' -o %s/r",
             TFMC, dir);
  cr_assert_eq(rc, 0, "%s", log);
  cr_assert(strstr(log, "step.c") && strstr(log, "encode.c") && strstr(log, "gen_api.c") &&
                strstr(log, "runtime/rt_stepper.c"),
            "%s", log);
  free(log);
  /* beams need rows the static build does not plan */
  rc = ct_sh(&log, "%s emit-c " EXAMPLES "/add/model.tfm --weights " EXAMPLES
             "/add/weights.safetensors --static --max-beams 2 -o %s/s",
             TFMC, dir);
  cr_assert_eq(rc, 2, "%s", log);
  cr_assert(strstr(log, "--max-beams does not apply"), "%s", log);
  free(log);
  /* attention rows: the static attention keeps no probabilities */
  rc = ct_sh(&log, "%s emit-c " EXAMPLES "/reverse/model.tfm --weights " EXAMPLES
             "/reverse/weights.safetensors --static --attention decoder.1.cross -o %s/s",
             TFMC, dir);
  cr_assert_eq(rc, 1, "%s", log);
  cr_assert(strstr(log, "the static step API keeps no attention rows"), "%s", log);
  free(log);
  /* a KV cache no 32-bit target addresses (2 x 6 layers x 100000 positions x
   * 512 floats: 2.4 GB, and the step's arena for a prefill of 100000 tokens):
   * refused with the bytes, nothing written */
  snprintf(path, sizeof path, "%s/long.tfm", dir);
  ct_write_text(path, "model long {\n  arch decoder\n  vocab 13\n  d_model 512\n  heads 4\n"
                      "  layers 6\n  ffn 64 relu\n  norm pre eps 1e-5\n  final_norm yes\n"
                      "  position sinusoidal max 100000\n  tokens eos 12\n"
                      "  mask decoder causal\n  head logits\n  max_batch 1\n}\n");
  rc = ct_sh(&log, "%s emit-c %s --init random --static -o %s/t", TFMC, path, dir);
  cr_assert_eq(rc, 1, "%s", log);
  cr_assert(strstr(log, "generation needs a memory region of") &&
                strstr(log, "more than a 32-bit target addresses"),
            "%s", log);
  free(log);
  snprintf(path, sizeof path, "%s/t", dir);
  cr_assert(access(path, F_OK) != 0, "a refused emission left %s", path);
  ct_rmdir(dir);
}
