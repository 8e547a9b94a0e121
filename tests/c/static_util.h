/* tests/c/static_util.h — what the tests of `tfmc emit-c --static`
 * (test_static.c: the forward pass; test_static_gen.c: generation) share:
 * the harnesses' folder, the Cortex-M4F flags, the check that the
 * library's objects reference nothing but libm and the string functions,
 * and picking lines out of a harness's output. Header-only. */
#ifndef TFMC_TESTS_C_STATIC_UTIL_H
#define TFMC_TESTS_C_STATIC_UTIL_H

#include "c_test_util.h"

#define MCU TFMC_SOURCE_DIR "/tests/c/mcu"
#define ARM_FLAGS "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"

/* What the objects may reference outside the library: libm and the
 * string functions (and, on ARM, the compiler's own helpers; on a PIE
 * host, the linker's _GLOBAL_OFFSET_TABLE_, which taking a function's
 * address refers to). */
#define ALLOWED_UNDEFINED                                                                         \
  "(memcpy|memset|memmove|memcmp|strcmp|strlen|expf|logf|sqrtf|tanhf|erff|sinf|cosf|fmaf|"       \
  "copysignf|fabsf|fminf|fmaxf|exp|log|sqrt|tanh|erf|sin|cos|fmin|fmax|__aeabi_[a-z0-9_]+|_GLOBAL_OFFSET_TABLE_)"

/* The lines of text that start with prefix, in order (malloc'd). */
static inline char *lines_with(const char *text, const char *prefix) {
  char *out = calloc(1, strlen(text) + 1);
  for (const char *p = text; *p;) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
    if (strncmp(p, prefix, strlen(prefix)) == 0) strncat(out, p, len);
    p += len;
  }
  return out;
}

/* The undefined symbols of the project proj's objects (the library: its
 * .o files and those under runtime/; the harness is linked from its
 * source), less what the library defines itself, must all be
 * ALLOWED_UNDEFINED. */
static inline void check_references(const char *proj, const char *nm) {
  CT_RUN("cd %s && %s -u *.o runtime/*.o | awk 'NF==2{print $2}' | sort -u "
         "> undefined.txt && %s --defined-only *.o runtime/*.o | "
         "awk 'NF==3{print $3}' | sort -u > defined.txt && "
         "comm -23 undefined.txt defined.txt > outside.txt && "
         "if grep -vxE '" ALLOWED_UNDEFINED "' outside.txt; then "
         "echo 'the static library references the symbols above'; exit 1; fi",
         proj, nm, nm);
  /* the forbidden ones by name, so a widened allowlist cannot hide them */
  CT_RUN("cd %s && ! grep -xE '(malloc|calloc|realloc|free|aligned_alloc|posix_memalign|"
         "pthread_.*|mmap|munmap|open|fopen|fread|fwrite|fclose|read|write|printf|fprintf|"
         "snprintf|vsnprintf|sprintf|puts|fputs|putchar|stdout|stderr|exit|abort|getenv|"
         "dlopen|_sbrk|sbrk)' outside.txt",
         proj);
}

#endif
