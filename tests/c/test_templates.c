/* tests/c/test_templates.c — the fixed sources under runtime/templates
 * (main.c, api.c, model.h, weights.S) that tfmc emit-c and tfmc build copy
 * as they are: each compiles (or assembles) on its own against the runtime
 * headers, with gcc and clang, C as C99 with -Wall -Wextra -pedantic
 * -Werror, for both settings of the model_config.h the emitter writes; so
 * a broken template fails here, not in a user's build. Every file of the
 * folder is covered (a new template needs no new test row), and both
 * commands write the same bytes. */
#include "backends/c/c_internal.h"
#include "c_test_util.h"

#include <dirent.h>

#define TFMC TFMC_BINARY_DIR "/tfmc"
#define TEMPLATES CT_RUNTIME_DIR "/templates"

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The template files: their names, each followed by a newline. */
static char *list_templates(void) {
  DIR *d = opendir(TEMPLATES);
  cr_assert(d, "cannot read %s", TEMPLATES);
  char *names = calloc(1, 4096);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    cr_assert(strlen(names) + strlen(de->d_name) + 2 < 4096);
    strcat(names, de->d_name);
    strcat(names, "\n");
  }
  closedir(d);
  return names;
}

static void write_config(const char *dir, bool embed) {
  char path[512];
  snprintf(path, sizeof path, "%s/model_config.h", dir);
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  static const RtModelInfo info = {.abi_version = RT_ABI_VERSION, .name = "tmpl"};
  c_emit_model_config(&info, embed, f);
  /* what emit-c --static adds for api_static.c: the region's parts */
  fputs("#define TFMC_ARENA_BYTES 4096\n#define TFMC_STATE_BYTES 0\n#define TFMC_MASKS_BYTES 64\n", f);
  /* and for api_gen_static.c (a generating model's static step API) */
  fputs("#define TFMC_GEN_HEADER_BYTES 16384\n#define TFMC_GEN_ARENA_BYTES 4096\n"
        "#define TFMC_GEN_STATE_BYTES 4096\n#define TFMC_GEN_STEPPER_BYTES 1024\n", f);
  cr_assert_eq(fclose(f), 0);
}

static void compile_all(const char *cc) {
  if (!ct_have(cc)) cr_skip_test("%s is not installed (Debian package %s)", cc, cc);
  char *names = list_templates();
  for (const char *want = "api.c\0main.c\0model.h\0weights.S\0"; *want; want += strlen(want) + 1) {
    char line[64];
    snprintf(line, sizeof line, "%s\n", want);
    cr_assert(strstr(names, line), "runtime/templates has no %s", want);
  }
  char *dir = ct_mkdtemp("tmpl");
  /* weights.S includes the packed image; any bytes do for assembling */
  char path[512];
  snprintf(path, sizeof path, "%s/model.weights", dir);
  ct_write_text(path, "0123456789abcdef");
  for (int embed = 0; embed < 2; embed++) {
    write_config(dir, embed);
    char *copy = strdup(names); /* strtok cuts it up */
    cr_assert(copy);
    for (char *name = strtok(copy, "\n"); name; name = strtok(NULL, "\n")) {
      if (ends_with(name, ".c")) {
        CT_RUN("%s -std=c99 " CT_WARN " -O2 -D_POSIX_C_SOURCE=200809L -I%s -I%s -c %s/%s -o %s/t.o",
               cc, TFMC_SOURCE_DIR, dir, TEMPLATES, name, dir);
      } else if (ends_with(name, ".h")) {
        /* a header stands on its own: the first and only include */
        snprintf(path, sizeof path, "%s/inc.c", dir);
        FILE *f = fopen(path, "wb");
        cr_assert(f);
        fprintf(f, "#include \"%s\"\nint tfmc_template_test;\n", name);
        cr_assert_eq(fclose(f), 0);
        CT_RUN("%s -std=c99 " CT_WARN " -I%s -I%s -I%s -c %s/inc.c -o %s/t.o", cc, TEMPLATES,
               TFMC_SOURCE_DIR, dir, dir, dir);
      } else if (ends_with(name, ".S")) {
        CT_RUN("%s -Wa,-I%s -c %s/%s -o %s/t.o", cc, dir, TEMPLATES, name, dir);
      } else {
        cr_assert_fail("runtime/templates/%s: no rule to check it (add one here)", name);
      }
    }
    free(copy);
  }
  free(names);
  ct_rmdir(dir);
}

Test(templates, compile_with_gcc, .timeout = 120) { compile_all("gcc"); }
Test(templates, compile_with_clang, .timeout = 120) { compile_all("clang"); }

/* weights.S gives main.c the image and its size, as weights.c does. */
Test(templates, weights_S_links_with_main_c, .timeout = 60) {
  if (!ct_have("gcc")) cr_skip_test("gcc is not installed");
  char *dir = ct_mkdtemp("tmplS");
  char path[512];
  snprintf(path, sizeof path, "%s/model.weights", dir);
  ct_write_text(path, "0123456789abcdefXYZ");
  snprintf(path, sizeof path, "%s/check.c", dir);
  ct_write_text(path, "#include <stddef.h>\n"
                      "#include <stdint.h>\n"
                      "#include <string.h>\n"
                      "extern const unsigned char tfmc_weights_image[];\n"
                      "extern const size_t tfmc_weights_image_size;\n"
                      "int main(void) {\n"
                      "  if ((uintptr_t)tfmc_weights_image % 64 != 0) return 3;\n"
                      "  if (tfmc_weights_image_size != 19) return 4;\n"
                      "  return memcmp(tfmc_weights_image, \"0123456789abcdefXYZ\", 19) != 0;\n"
                      "}\n");
  CT_RUN("cd %s && gcc -std=c99 " CT_WARN " check.c -Wa,-I%s %s/weights.S -o check && ./check", dir,
         dir, TEMPLATES);
  ct_rmdir(dir);
}

static void same_as_template(const char *path, const char *name, bool suffix_only) {
  char tpath[512];
  snprintf(tpath, sizeof tpath, "%s/%s", TEMPLATES, name);
  size_t n = 0, m = 0;
  char *got = ct_read_text(path, &n), *want = ct_read_text(tpath, &m);
  cr_assert(got && want, "cannot read %s or %s", path, tpath);
  if (suffix_only)
    cr_assert(n > m && memcmp(got + n - m, want, m) == 0, "%s does not end with %s", path, tpath);
  else
    cr_assert(n == m && memcmp(got, want, m) == 0, "%s is not %s as it is", path, tpath);
  free(got);
  free(want);
}

/* Both commands put the templates into what they write, byte for byte. */
Test(templates, emit_c_and_build_copy_them, .timeout = 300) {
  char *dir = ct_mkdtemp("tmplcp");
  const char *sort = TFMC_SOURCE_DIR "/examples/sort";
  char path[600];
  for (int embed = 0; embed < 2; embed++) {
    const char *flag = embed ? "--embed-weights" : "";
    CT_RUN("%s emit-c %s/model.tfm --weights %s/weights.safetensors -o %s/proj%d %s", TFMC, sort,
           sort, dir, embed, flag);
    snprintf(path, sizeof path, "%s/proj%d/main.c", dir, embed);
    same_as_template(path, "main.c", false);
    snprintf(path, sizeof path, "%s/proj%d/api.c", dir, embed);
    same_as_template(path, "api.c", false);
    snprintf(path, sizeof path, "%s/proj%d/model.h", dir, embed);
    same_as_template(path, "model.h", true);
    snprintf(path, sizeof path, "%s/proj%d/model_config.h", dir, embed);
    char *cfg = ct_read_text(path, NULL);
    char want[64];
    snprintf(want, sizeof want, "#define TFMC_EMBEDDED_WEIGHTS %d\n", embed);
    cr_assert(cfg && strstr(cfg, want), "%s lacks %s", path, want);
    free(cfg);

    CT_RUN("cd %s && %s build %s/model.tfm --weights %s/weights.safetensors -o exe%d --keep %s && "
           "./exe%d --text '7 3 9 1' --vocab %s/vocab.txt | grep -q 'output: 1 3 7 9'",
           dir, TFMC, sort, sort, embed, flag, embed, sort);
    snprintf(path, sizeof path, "%s/exe%d.build/main.c", dir, embed);
    same_as_template(path, "main.c", false);
    if (embed) {
      snprintf(path, sizeof path, "%s/exe%d.build/weights.S", dir, embed);
      same_as_template(path, "weights.S", false);
    }
  }
  ct_rmdir(dir);
}
