/* tests/c/cross_util.h — what the cross tests (test_cross_models.c,
 * test_cross_generate.c) share: the two qemu-user targets, aarch64
 * (little-endian) and s390x (big-endian), each with its toolchain and the
 * Debian packages that provide it; the executable's name in an emitted
 * project; the check that a cross executable is an ELF file of the
 * target's machine and byte order. Header-only: every function is static. */
#ifndef TFMC_TESTS_C_CROSS_UTIL_H
#define TFMC_TESTS_C_CROSS_UTIL_H

#include "c_test_util.h"

/* A cross target: its toolchain, what its executables must look like, and
 * where its tools come from. */
typedef struct CrossTarget {
  CtTool tool;
  bool big_endian;
  unsigned elf_machine;  /* e_machine: EM_AARCH64 183, EM_S390 22 */
  const char *qemu;      /* the emulator tool->run starts */
  const char *cc_package; /* the Debian package of tool->cc */
} CrossTarget;

static const CrossTarget cross_aarch64 = {
    {"aarch64", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ar",
     "qemu-aarch64 -L /usr/aarch64-linux-gnu", true},
    false, 183, "qemu-aarch64", "gcc-aarch64-linux-gnu"};

static const CrossTarget cross_s390x = {
    {"s390x", "s390x-linux-gnu-gcc", "s390x-linux-gnu-ar", "qemu-s390x -L /usr/s390x-linux-gnu",
     true},
    true, 22, "qemu-s390x", "gcc-s390x-linux-gnu"};

/* Why target x cannot be tested here (its cross compiler or qemu is
 * missing, naming the package), or NULL when it can. Static text. */
static inline const char *cross_missing(const CrossTarget *x) {
  static char why[200];
  if (!ct_have(x->tool.cc)) {
    snprintf(why, sizeof why, "%s is missing (Debian package %s)", x->tool.cc, x->cc_package);
    return why;
  }
  if (!ct_have(x->qemu)) {
    snprintf(why, sizeof why, "%s is missing (Debian package qemu-user)", x->qemu);
    return why;
  }
  return NULL;
}

/* The executable's name: the first target of the generated Makefile's
 * `all:` rule ("all: EXE libmodel.a"). Returns malloc'd text. */
static inline char *project_exe(const char *proj) {
  char path[800];
  snprintf(path, sizeof path, "%.700s/Makefile", proj);
  char *mk = ct_read_text(path, NULL);
  cr_assert(mk, "emit-c wrote no %s", path);
  const char *all = strstr(mk, "\nall: ");
  cr_assert(all, "%s has no 'all:' rule", path);
  all += strlen("\nall: ");
  size_t n = strcspn(all, " \n");
  cr_assert(n > 0 && n < 64, "%s: cannot read the executable's name", path);
  char *exe = malloc(n + 1);
  cr_assert(exe);
  memcpy(exe, all, n);
  exe[n] = '\0';
  free(mk);
  return exe;
}

/* The cross executable proj/exe of model `name` is an ELF file for x's
 * machine and byte order (header bytes: EI_DATA at 5, e_machine at 18 in
 * the file's order), so a host binary run by mistake cannot pass for it. */
static inline void elf_expect(const char *proj, const char *exe, const char *name,
                              const CrossTarget *x) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s", proj, exe);
  FILE *f = fopen(path, "rb");
  cr_assert(f, "%s: the build wrote no %s", name, path);
  unsigned char h[20];
  size_t n = fread(h, 1, sizeof h, f);
  fclose(f);
  cr_assert(n == sizeof h && memcmp(h, "\177ELF", 4) == 0, "%s is not an ELF file", path);
  int big = h[5] == 2;
  unsigned machine = big ? (unsigned)h[18] << 8 | h[19] : (unsigned)h[19] << 8 | h[18];
  cr_assert_eq(big, x->big_endian, "%s: byte order %s", path, big ? "big" : "little");
  cr_assert_eq(machine, x->elf_machine, "%s: ELF machine %u, expected %u", path, machine,
               x->elf_machine);
}

#endif
