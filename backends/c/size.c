/* backends/c/size.c — the code size of a static project, measured: each
 * translation unit compiled with the target's compiler and flags, as the
 * project's Makefile compiles it, and the sections of the object read from
 * its ELF header (text: allocated and not writable, code and constants;
 * data: allocated, writable, with contents; bss: allocated, no contents),
 * the numbers binutils' `size` prints.
 *
 * Invariant: nothing is written into the project; objects go to a fresh
 * temporary directory removed afterwards. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "backends/c/c_backend.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return 1;
}

static uint64_t rd(const unsigned char *p, int n, bool big) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[big ? n - 1 - i : i] << (8 * i);
  return v;
}

/* Sums the sections of the ELF object at path. */
static int elf_sizes(const char *path, CSize *s, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, errlen, "cannot read %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
  bool ok = b && fread(b, 1, (size_t)n, f) == (size_t)n;
  fclose(f);
  if (!ok || n < 52 || memcmp(b, "\177ELF", 4) != 0 || (b[4] != 1 && b[4] != 2) ||
      (b[5] != 1 && b[5] != 2)) {
    free(b);
    return fail(err, errlen, "%s is not an ELF object (the compiler must make ELF)", path);
  }
  bool w64 = b[4] == 2, big = b[5] == 2;
  uint64_t shoff = w64 ? rd(b + 40, 8, big) : rd(b + 32, 4, big);
  uint64_t shentsize = rd(b + (w64 ? 58 : 46), 2, big), shnum = rd(b + (w64 ? 60 : 48), 2, big);
  uint64_t need = w64 ? 64 : 40;
  if (shentsize < need || shoff > (uint64_t)n || shnum > ((uint64_t)n - shoff) / shentsize) {
    free(b);
    return fail(err, errlen, "%s: malformed ELF section table", path);
  }
  *s = (CSize){0, 0, 0};
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char *h = b + shoff + i * shentsize;
    uint64_t type = rd(h + 4, 4, big);
    uint64_t flags = w64 ? rd(h + 8, 8, big) : rd(h + 8, 4, big);
    uint64_t size = w64 ? rd(h + 32, 8, big) : rd(h + 20, 4, big);
    if (!(flags & 0x2)) continue; /* SHF_ALLOC */
    if (type == 8)                /* SHT_NOBITS */
      s->bss += (int64_t)size;
    else if (flags & 0x1) /* SHF_WRITE */
      s->data += (int64_t)size;
    else
      s->text += (int64_t)size;
  }
  free(b);
  return 0;
}

/* Runs argv; 0 when it exited 0. */
static int run(char **argv, char *err, size_t errlen) {
  pid_t pid = fork();
  if (pid < 0) return fail(err, errlen, "cannot start %s: %s", argv[0], strerror(errno));
  if (pid == 0) {
    execvp(argv[0], argv);
    fprintf(stderr, "tfmc: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return fail(err, errlen, "waitpid: %s", strerror(errno));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return fail(err, errlen, "%s failed (exit %d) compiling the project for --size-cc", argv[0],
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

int c_static_measure(const char *dir, const char *cc, const char *const *files, int n_files,
                     CSize *sizes, char *err, size_t errlen) {
  /* "CC FLAGS...": split on blanks, as make splits $(CC) $(CFLAGS) */
  char *words = strdup(cc ? cc : "");
  char *argv[96];
  int n = 0;
  if (!words) return fail(err, errlen, "out of memory");
  for (char *t = strtok(words, " \t"); t && n < 80; t = strtok(NULL, " \t")) argv[n++] = t;
  if (n == 0) {
    free(words);
    return fail(err, errlen, "--size-cc needs a compiler (\"CC FLAGS...\")");
  }
  if (n == 80) {
    free(words);
    return fail(err, errlen, "--size-cc: too many words");
  }
  char tmp[] = "/tmp/tfmc_size_XXXXXX", obj[4200], inc[4200], src[4200];
  if (!mkdtemp(tmp)) {
    free(words);
    return fail(err, errlen, "cannot make a temporary directory: %s", strerror(errno));
  }
  snprintf(inc, sizeof inc, "-I%s", dir);
  int rc = 0;
  for (int i = 0; i < n_files && !rc; i++) {
    const char *f = files[i];
    bool rt = strncmp(f, "runtime/", 8) == 0;
    snprintf(src, sizeof src, "%s/%s", dir, f);
    snprintf(obj, sizeof obj, "%s/%d.o", tmp, i);
    /* the Makefile's flags: C99 for the generated files, C11 for the runtime */
    int k = n;
    argv[k++] = rt ? "-std=c11" : "-std=c99";
    argv[k++] = inc;
    argv[k++] = "-DTFMC_STATIC";
    argv[k++] = "-c";
    argv[k++] = src;
    argv[k++] = "-o";
    argv[k++] = obj;
    argv[k] = NULL;
    rc = run(argv, err, errlen) || elf_sizes(obj, &sizes[i], err, errlen);
    unlink(obj);
  }
  rmdir(tmp);
  free(words);
  return rc;
}
