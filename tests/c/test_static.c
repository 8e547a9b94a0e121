/* tests/c/test_static.c — `tfmc emit-c --static` end to end on the bundled
 * sort model (max_batch 1, weights embedded): the harness tests/c/mcu/
 * sort_main.c, which uses model.h only, runs
 *   - on the host under -fsanitize=address,undefined and under valgrind,
 *     which must report no heap use at all (0 allocs);
 *   - on a Cortex-M4F (hard float) under qemu-system-arm's mps2-an386 with
 *     semihosting, the library built by the project's Makefile with
 *     arm-none-eabi-gcc -Os and linked with newlib;
 * both printing every logit, which must match PyTorch's
 * (examples/sort/expected.safetensors) within 1e-4 + 1e-4 |x|, the argmax
 * tokens and every refusal of bad input the same on both, and two models
 * in two regions agreeing bit for bit. The objects reference nothing
 * outside the library but libm and memcpy-style libc functions (nm: no
 * malloc, threads, files, stdio), the Cortex-M objects hold no writable
 * global, and their text (code + constants, the weights aside) is under
 * 64 KB. Also: the commands' memory reports, a project taking the
 * caller's weights image (checked: checksum, layout, magic), and
 * backends/c/static.c's choice of runtime files and its refusal. A target is skipped (naming the Debian package) only when its
 * toolchain is missing; tools/setup.sh installs them. */
#include "static_util.h"

#define SORT_DIR TFMC_SOURCE_DIR "/examples/sort"
#define TFMC TFMC_BINARY_DIR "/tfmc"

/* Emits the static project of the sort model at max_batch 1 into
 * dir/proj, with sort_data.h: the 8 sequences of the example's inputs. */
static void emit_sort(const char *dir) {
  char path[512];
  size_t n;
  snprintf(path, sizeof path, "%s/model.tfm", SORT_DIR);
  char *spec = ct_read_text(path, &n);
  cr_assert(spec);
  const char *key = "  head        logits\n";
  char *at = strstr(spec, key);
  cr_assert(at, "examples/sort/model.tfm changed: no head line");
  at += strlen(key);
  char *out = malloc(n + 64);
  snprintf(out, n + 64, "%.*s  max_batch   1\n%s", (int)(at - spec), spec, at);
  snprintf(path, sizeof path, "%s/sort1.tfm", dir);
  ct_write_text(path, out);
  free(out);
  free(spec);
  CT_RUN("%s emit-c %s/sort1.tfm --weights %s/weights.safetensors --static --embed-weights "
         "-o %s/proj",
         TFMC, dir, SORT_DIR, dir);

  RtSafetensors *st;
  char err[512];
  cr_assert_eq(rt_st_open(SORT_DIR "/inputs.safetensors", &st, err, sizeof err), 0, "%s", err);
  const RtStTensor *t = rt_st_find(st, "tokens");
  cr_assert(t && t->rank == 2 && t->shape[0] == 8 && t->shape[1] == 16);
  int32_t ids[128];
  cr_assert_eq(rt_st_read_i32(t, ids, 0, 1000, err, sizeof err), 0, "%s", err);
  rt_st_close(st);
  char text[4096];
  int len = snprintf(text, sizeof text,
                     "#define SORT_N 8\n#define SORT_S 16\n"
                     "static const int32_t sort_tokens[SORT_N][SORT_S] = {\n");
  for (int i = 0; i < 128; i++)
    len += snprintf(text + len, sizeof text - (size_t)len, "%s%d%s", i % 16 ? ", " : "  {",
                    (int)ids[i], i % 16 == 15 ? "},\n" : "");
  snprintf(text + len, sizeof text - (size_t)len, "};\n");
  snprintf(path, sizeof path, "%s/proj/sort_data.h", dir);
  ct_write_text(path, text);
}

/* Checks the harness's output file: "done: ok", every logit against
 * PyTorch's; returns the text (malloc'd) for comparisons. */
static char *check_output(const char *path, const char *what) {
  char *text = ct_read_text(path, NULL);
  cr_assert(text, "no output from %s", what);
  cr_assert(strstr(text, "done: ok\n"), "%s:\n%s", what, text);
  int64_t n;
  float *want = ct_read_output(SORT_DIR "/expected.safetensors", "logits", &n);
  cr_assert_eq(n, 8 * 16 * 11);
  for (int s = 0; s < 8; s++) {
    char key[32];
    snprintf(key, sizeof key, "seq %d: logits", s);
    const char *p = strstr(text, key);
    cr_assert(p, "%s printed no %s", what, key);
    p += strlen(key);
    for (int i = 0; i < 16 * 11; i++) {
      char *end;
      unsigned long bits = strtoul(p, &end, 16);
      cr_assert(end != p, "%s: logit %d of sequence %d missing", what, i, s);
      p = end;
      uint32_t b32 = (uint32_t)bits;
      float got;
      memcpy(&got, &b32, 4);
      float w = want[s * 16 * 11 + i];
      cr_assert(fabsf(got - w) <= 1e-4f + 1e-4f * fabsf(w), "%s: logits[%d,%d] %.9g, PyTorch %.9g",
                what, s, i, (double)got, (double)w);
    }
  }
  free(want);
  return text;
}

Test(static_c, host_sanitizers_valgrind_no_heap) {
  char *dir = ct_mkdtemp("static-host");
  emit_sort(dir);
  /* ASan + UBSan over the library and the harness */
  CT_RUN("cd %s/proj && make -s CC=gcc CFLAGS='-O1 -g -fsanitize=address,undefined "
         "-fno-sanitize-recover=all -Werror' && gcc -std=c99 " CT_WARN
         " -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -I. -I" MCU " " MCU
         "/sort_main.c " MCU "/host_io.c libmodel.a -lm -o sort_asan && ./sort_asan > asan.txt",
         dir);
  char path[512];
  snprintf(path, sizeof path, "%s/proj/asan.txt", dir);
  free(check_output(path, "the host build under ASan+UBSan"));
  /* valgrind: no heap use at all, no error */
  if (!ct_have("valgrind")) cr_skip_test("valgrind is missing (Debian package valgrind)");
  CT_RUN("cd %s/proj && make -s clean && make -s CC=gcc CFLAGS='-O2 -g -Werror' && "
         "gcc -std=c99 " CT_WARN " -O2 -g -I. -I" MCU " " MCU "/sort_main.c " MCU
         "/host_io.c libmodel.a -lm -o sort_host && "
         "valgrind --error-exitcode=9 ./sort_host > valgrind.txt 2> valgrind.log && "
         "grep -q 'total heap usage: 0 allocs, 0 frees, 0 bytes allocated' valgrind.log && "
         "grep -q 'ERROR SUMMARY: 0 errors' valgrind.log || { cat valgrind.log; exit 1; }",
         dir);
  snprintf(path, sizeof path, "%s/proj/valgrind.txt", dir);
  free(check_output(path, "the host build under valgrind"));
  snprintf(path, sizeof path, "%s/proj", dir);
  check_references(path, "nm");
  ct_rmdir(dir);
}

Test(static_c, cortex_m4_under_qemu, .timeout = 600) {
  if (!ct_have("arm-none-eabi-gcc"))
    cr_skip_test("arm-none-eabi-gcc is missing (Debian packages gcc-arm-none-eabi "
                 "libnewlib-arm-none-eabi)");
  if (!ct_have("qemu-system-arm"))
    cr_skip_test("qemu-system-arm is missing (Debian package qemu-system-arm)");
  char *dir = ct_mkdtemp("static-m4");
  emit_sort(dir);
  /* the host's output, for the comparison */
  CT_RUN("cd %s/proj && make -s CC=gcc CFLAGS='-O2 -Werror' && gcc -std=c99 " CT_WARN
         " -O2 -I. -I" MCU " " MCU "/sort_main.c " MCU "/host_io.c libmodel.a -lm -o sort_host"
         " && ./sort_host > host.txt && make -s clean",
         dir);
  /* the library for a Cortex-M4F at -Os, its size, the image, the run */
  CT_RUN("cd %s/proj && make -s CC=arm-none-eabi-gcc AR=arm-none-eabi-ar CFLAGS='-Os " ARM_FLAGS
         " -ffunction-sections -fdata-sections -Werror' && "
         "arm-none-eabi-size -t model.o api.o runtime/*.o > size.txt && "
         "arm-none-eabi-gcc -std=c99 " CT_WARN " -Os " ARM_FLAGS
         " -ffunction-sections -fdata-sections -I. -I" MCU " " MCU "/sort_main.c " MCU
         "/mps2_startup.c libmodel.a -nostartfiles -T " MCU "/mps2_an386.ld -Wl,--gc-sections "
         "-lm -lc -lgcc -o sort.elf && "
         "timeout 300 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none "
         "-semihosting-config enable=on,target=native -icount shift=0 -kernel sort.elf "
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
  cr_assert(text > 1000 && text < 64 * 1024,
            "the library's text (code + constants, weights aside) is %ld bytes:\n%s", text, size);
  /* emit-c --size-cc reports the same number as binutils */
  char *log = NULL;
  int rc = ct_sh(&log,
                 "%s emit-c %s/sort1.tfm --weights %s/weights.safetensors --static "
                 "--embed-weights -o %s/sized --size-cc 'arm-none-eabi-gcc -Os " ARM_FLAGS
                 " -ffunction-sections -fdata-sections'",
                 TFMC, dir, SORT_DIR, dir);
  cr_assert_eq(rc, 0, "%s", log);
  const char *code = strstr(log, "code (all but the weights)");
  cr_assert(code, "%s", log);
  long reported = strtol(code + strlen("code (all but the weights)"), NULL, 10);
  cr_assert_eq(reported, text, "emit-c --size-cc says %ld, arm-none-eabi-size %ld:\n%s\n%s",
               reported, text, log, size);
  cr_assert(strstr(log, "weights.c"), "%s", log);
  free(log);
  free(size);
  snprintf(path, sizeof path, "%s/proj/m4.txt", dir);
  char *m4 = check_output(path, "the Cortex-M4F image under qemu");
  snprintf(path, sizeof path, "%s/proj/host.txt", dir);
  char *host = check_output(path, "the host build");
  /* the same decisions and the same messages on both */
  const char *prefixes[] = {"model ", "refused ", "two instances", "done"};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
    char *a = lines_with(m4, prefixes[i]), *b = lines_with(host, prefixes[i]);
    cr_assert(a[0], "no '%s' lines", prefixes[i]);
    cr_assert_str_eq(a, b, "the Cortex-M4F and the host differ");
    free(a);
    free(b);
  }
  for (int s = 0; s < 8; s++) {
    char key[32];
    snprintf(key, sizeof key, "seq %d: argmax", s);
    char *a = lines_with(m4, key), *b = lines_with(host, key);
    cr_assert_str_eq(a, b, "the Cortex-M4F and the host pick other tokens");
    free(a);
    free(b);
  }
  cr_assert(strstr(m4, "ticks per inference: "), "%s", m4);
  free(m4);
  free(host);
  /* nothing outside libm and memcpy & co.; no writable global at all */
  snprintf(path, sizeof path, "%s/proj", dir);
  check_references(path, "arm-none-eabi-nm");
  CT_RUN("cd %s/proj && arm-none-eabi-nm model.o api.o weights.o runtime/*.o > syms.txt && "
         "if grep -E ' [BbDdCGgSs] ' syms.txt; then echo 'writable globals above'; exit 1; fi",
         dir);
  ct_rmdir(dir);
}

/* What the commands print, and the project without embedded weights. */
Test(static_c, cli) {
  char *dir = ct_mkdtemp("static-cli");
  char *log = NULL;
  int rc;
  rc = ct_sh(&log, "%s check %s/model.tfm", TFMC, SORT_DIR);
  cr_assert_eq(rc, 0, "%s", log);
  cr_assert(strstr(log, "static memory "), "%s", log);
  free(log);
  rc = ct_sh(&log, "%s emit-c %s/model.tfm --weights %s/weights.safetensors --static -o %s/q",
             TFMC, SORT_DIR, SORT_DIR, dir);
  cr_assert_eq(rc, 0, "%s", log);
  cr_assert(strstr(log, "TFMC_MEM_BYTES "), "%s", log);
  free(log);
  /* --size-cc: only with --static; a compiler that cannot run is an error */
  rc = ct_sh(&log, "%s emit-c %s/model.tfm --weights %s/weights.safetensors --size-cc cc -o %s/r",
             TFMC, SORT_DIR, SORT_DIR, dir);
  cr_assert_eq(rc, 2, "%s", log);
  cr_assert(strstr(log, "--size-cc measures a --static project"), "%s", log);
  free(log);
  rc = ct_sh(&log,
             "%s emit-c %s/model.tfm --weights %s/weights.safetensors --static --size-cc "
             "'no-such-cc -Os' -o %s/r",
             TFMC, SORT_DIR, SORT_DIR, dir);
  cr_assert_eq(rc, 1, "%s", log);
  cr_assert(strstr(log, "no-such-cc"), "%s", log);
  free(log);
  /* the host compiler measures too (ELF on Linux) */
  rc = ct_sh(&log,
             "%s emit-c %s/model.tfm --weights %s/weights.safetensors --static --size-cc "
             "'cc -Os' -o %s/r --force",
             TFMC, SORT_DIR, SORT_DIR, dir);
  cr_assert_eq(rc, 0, "%s", log);
  cr_assert(strstr(log, "runtime/rt_static.c"), "%s", log);
  cr_assert(strstr(log, "code (all but the weights)"), "%s", log);
  free(log);
  /* without --embed-weights: the caller's image (sort.weights), no main, no threads */
  char path[512];
  snprintf(path, sizeof path, "%s/q/sort.weights", dir);
  cr_assert(access(path, F_OK) == 0);
  snprintf(path, sizeof path, "%s/q/main.c", dir);
  cr_assert(access(path, F_OK) != 0);
  snprintf(path, sizeof path, "%s/q/runtime/rt_pool.c", dir);
  cr_assert(access(path, F_OK) != 0);
  CT_RUN("cd %s/q && make -s CFLAGS='-O2 -Werror' && grep -q '#define TFMC_MEM_BYTES' model.h",
         dir);
  /* the caller's image: the file's bytes, checked at init; one flipped
   * byte in the data is refused (checksum), so is the image of another
   * model and a call with no image at all */
  snprintf(path, sizeof path, "%s/q/image.c", dir);
  ct_write_text(path,
                "#include \"model.h\"\n"
                "#include <stdio.h>\n"
                "#include <stdlib.h>\n"
                "#include <string.h>\n"
                "static unsigned char mem[TFMC_MEM_BYTES];\n"
                "int main(int argc, char **argv) {\n"
                "  FILE *f = fopen(argv[1], \"rb\");\n"
                "  unsigned char *img = malloc(TFMC_WEIGHTS_BYTES + 64);\n"
                "  size_t n = f && img ? fread(img, 1, TFMC_WEIGHTS_BYTES + 64, f) : 0;\n"
                "  char err[256];\n"
                "  if (argc > 2) img[atoi(argv[2])] ^= 1;\n"
                "  TfmcModel *m = tfmc_model_init(mem, sizeof mem, img, n, err, sizeof err);\n"
                "  if (!m) { printf(\"refused: %s\\n\", err); return 1; }\n"
                "  if (tfmc_model_init(mem, sizeof mem, NULL, 0, err, sizeof err)) return 2;\n"
                "  printf(\"no image: %s\\n\", err);\n"
                "  int32_t ids[16] = {8, 4, 10, 2, 4, 1, 9, 3};\n"
                "  int64_t dims[2] = {1, 16};\n"
                "  static float out[64 * 16 * 11];\n"
                "  const void *in[2] = {ids, NULL};\n"
                "  float *o[1] = {out};\n"
                "  if (tfmc_model_run_buffers(m, dims, in, o, err, sizeof err)) return 3;\n"
                "  for (int t = 0; t < 8; t++) {\n"
                "    int b = 0;\n"
                "    for (int v = 1; v < 11; v++) if (out[t * 11 + v] > out[t * 11 + b]) b = v;\n"
                "    printf(\"%d \", b);\n"
                "  }\n"
                "  printf(\"\\n\");\n"
                "  free(img);\n"
                "  return 0;\n"
                "}\n");
  CT_RUN("cd %s/q && gcc -std=c99 " CT_WARN " -O2 -I. image.c libmodel.a -lm -o image && "
         "./image sort.weights > ok.txt && grep -qx '1 2 3 4 4 8 9 10 ' ok.txt && "
         "grep -q 'no image: model .sort. has no embedded weights' ok.txt",
         dir);
  rc = ct_sh(&log, "cd %s/q && ./image sort.weights 5000", dir);
  cr_assert_eq(rc, 1, "%s", log);
  cr_assert(strstr(log, "refused: the weights image is corrupt (checksum mismatch)"), "%s", log);
  free(log);
  rc = ct_sh(&log, "cd %s/q && ./image sort.weights 20", dir);
  cr_assert_eq(rc, 1, "%s", log);
  cr_assert(strstr(log, "refused: the weights image was packed for another model"), "%s", log);
  free(log);
  rc = ct_sh(&log, "cd %s/q && ./image %s/model.tfm", dir, SORT_DIR);
  cr_assert_eq(rc, 1, "%s", log);
  cr_assert(strstr(log, "refused: not a packed-weights image"), "%s", log);
  free(log);
  ct_rmdir(dir);
}

/* backends/c/static.c on the sort model's loop program: the runtime
 * functions it calls pick the runtime files (the same for the flash and
 * the plain attention); an attention call that would write probabilities
 * (the static attention keeps none) is refused. */
Test(static_c, runtime_pieces_and_refusal) {
  char *dir = ct_mkdtemp("static-pieces");
  CT_RUN("%s ir %s/model.tfm --level loop -O2 > %s/sort.tfloop && "
         "%s ir %s/model.tfm --level loop -O2 --disable-pass=flash-attention > %s/plain.tfloop && "
         "sed '0,/, null, \\([0-9]*\\), 1024)/s//, \\&b49[0], \\1, 1024)/' %s/plain.tfloop > "
         "%s/probs.tfloop && "
         "! cmp -s %s/plain.tfloop %s/probs.tfloop",
         TFMC, SORT_DIR, dir, TFMC, SORT_DIR, dir, dir, dir, dir, dir);
  const char *names[] = {"sort.tfloop", "plain.tfloop", "probs.tfloop"};
  for (int i = 0; i < 3; i++) {
    Arena *a = arena_create();
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    SrcFile *src = src_file_read(a, path, err, sizeof err);
    cr_assert(src, "%s", err);
    Diags d;
    diags_init(&d, a, stderr);
    LoopProgram *p = loop_program_parse(a, src, &d);
    cr_assert(p && d.n_errors == 0, "%s does not parse", path);
    bool used[LC_CALLEE_COUNT];
    int rc = c_static_check(p, used, err, sizeof err);
    if (i == 2) {
      cr_assert_neq(rc, 0);
      cr_assert(strstr(err, "--static does not write attention maps"), "%s", err);
    } else {
      cr_assert_eq(rc, 0, "%s", err);
      cr_assert(used[LC_LINEAR_PACKED] && !used[LC_GELU]); /* pack-weights: all of them */
      cr_assert(i == 0 ? used[LC_ATTENTION_FLASH] && !used[LC_ATTENTION]
                       : used[LC_ATTENTION] && !used[LC_ATTENTION_FLASH]);
      const char *files[32];
      int n = c_static_runtime(used, false, files, 32);
      /* rt_act: rt_linear's epilogue applies its activations */
      const char *want[] = {"rt_act.c",          "rt_act.h",   "rt_attention.c", "rt_attention.h",
                            "rt_exp.h",          "rt_gemm.c",  "rt_gemm.h",      "rt_gemm_i8.c",
                            "rt_gemm_kernels.h", "rt_model.h", "rt_pool.h",      "rt_static.c"};
      cr_assert_eq(n, 12);
      for (int k = 0; k < n; k++) cr_assert_str_eq(files[k], want[k]);
      cr_assert_eq(c_static_runtime(used, false, files, 3), -1);
    }
    arena_destroy(a);
  }
  ct_rmdir(dir);
}
