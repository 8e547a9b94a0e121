/* tests/tools/test_outputs.c — tfmc and built executables never lose a
 * user's data: an output that is (or resolves to) an input is refused
 * before any work; derived outputs (EXE.weights, EXE.build/, emit-c's
 * files) count; emit-c refuses a foreign non-empty directory unless
 * --force; symlinks are written through, FIFOs and device nodes written in
 * place; a failed command leaves no partial output; write errors on stdout
 * give exit status 1. --print-file follows the same rules.
 *
 * Each test works in a fresh temporary directory with the built tfmc and
 * the bundled sort model, through the shell. */
#define _XOPEN_SOURCE 700 /* mknod */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define SORT TFMC_SOURCE_DIR "/examples/sort"
#define TFMC TFMC_BINARY_DIR "/tfmc"

static char dir[256];
static char out_text[65536], err_text[65536];

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f) fclose(f);
}

/* `cd dir && CMD` (printf-style), stderr into err_text and stdout into
 * out_text unless CMD redirects it; the exit status (or 128+signal). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char c[4096], cmd[4400], p[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c, sizeof c, fmt, ap);
  va_end(ap);
  bool own_stdout = strstr(c, ">") != NULL;
  snprintf(cmd, sizeof cmd, "cd %s && %s %s 2>stderr.txt", dir, c, own_stdout ? "" : ">stdout.txt");
  int st = system(cmd);
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  slurp(p, out_text, sizeof out_text);
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  slurp(p, err_text, sizeof err_text);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

static const char *at(const char *name) {
  static char buf[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static bool exists(const char *name) {
  struct stat st;
  return lstat(at(name), &st) == 0;
}

static mode_t kind(const char *name) {
  struct stat st;
  cr_assert_eq(lstat(at(name), &st), 0, "%s is gone", name);
  return st.st_mode & S_IFMT;
}

static void same_bytes(const char *a, const char *b) {
  cr_assert_eq(sh("cmp -s %s %s", a, b), 0, "%s differs from %s", a, b);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_outputs_XXXXXX");
  cr_assert(mkdtemp(dir));
  cr_assert_eq(sh("cp " SORT "/model.tfm m.tfm && cp " SORT "/weights.safetensors m.weights && "
                  "cp " SORT "/inputs.safetensors in.safetensors"),
               0);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(outputs, .init = setup, .fini = teardown, .timeout = 300);

#define EXPECT_ERR(status, fragment)                                                     \
  do {                                                                                   \
    int st_ = (status);                                                                  \
    cr_assert_eq(st_, 1, "exit %d, stderr: %s", st_, err_text);                          \
    cr_assert(strstr(err_text, fragment), "stderr lacks '%s':\n%s", fragment, err_text); \
  } while (0)

#define RUN_SORT TFMC " run m.tfm --weights m.weights --inputs in.safetensors"

Test(outputs, build_refuses_derived_outputs_that_are_inputs) {
  cr_assert_eq(sh("cp m.weights orig.weights"), 0);
  /* EXE.weights derived from -o m is the checkpoint m.weights */
  EXPECT_ERR(sh(TFMC " build m.tfm --weights m.weights -o m"), "refusing to overwrite");
  cr_assert(strstr(err_text, "m.weights"), "%s", err_text);
  EXPECT_ERR(sh(TFMC " build m.tfm --weights m.weights -o m --embed-weights"),
             "refusing to overwrite");
  same_bytes("m.weights", "orig.weights");
  cr_assert(!exists("m"), "a refused build wrote the executable");
  /* -o resolving to the spec through a symlink */
  cr_assert_eq(symlink("m.tfm", at("link")), 0);
  EXPECT_ERR(sh(TFMC " build m.tfm --init random -o link"), "refusing to overwrite");
  /* an input inside EXE.build/ */
  cr_assert_eq(sh("mkdir x.build && cp m.weights x.build/w"), 0);
  EXPECT_ERR(sh(TFMC " build m.tfm --weights x.build/w -o x"), "x.build");
  same_bytes("x.build/w", "orig.weights");
}

Test(outputs, run_refuses_outputs_that_resolve_to_inputs) {
  cr_assert_eq(symlink("in.safetensors", at("alias")), 0);
  cr_assert_eq(link(at("m.weights"), at("hard")), 0);
  cr_assert_eq(sh("cp in.safetensors orig"), 0);
  EXPECT_ERR(sh(RUN_SORT " --outputs alias"), "refusing to overwrite");
  EXPECT_ERR(sh(RUN_SORT " --outputs hard"), "refusing to overwrite");
  EXPECT_ERR(sh(RUN_SORT " --outputs " TFMC), "tfmc itself");
  same_bytes("in.safetensors", "orig");
  cr_assert_eq(kind("alias"), S_IFLNK);
}

Test(outputs, written_through_symlinks_and_into_fifos_and_devices) {
  cr_assert_eq(symlink("sub/target.safetensors", at("link.safetensors")), 0);
  cr_assert_eq(mkdir(at("sub"), 0755), 0);
  cr_assert_eq(sh(RUN_SORT " --outputs link.safetensors"), 0, "%s", err_text);
  cr_assert_eq(kind("link.safetensors"), S_IFLNK, "the symlink was replaced");
  cr_assert_eq(kind("sub/target.safetensors"), S_IFREG);
  cr_assert_eq(sh(RUN_SORT " --outputs direct.safetensors"), 0, "%s", err_text);
  same_bytes("direct.safetensors", "sub/target.safetensors");
  /* a FIFO: written in place, read by cat */
  cr_assert_eq(mkfifo(at("fifo"), 0644), 0);
  cr_assert_eq(sh("(cat fifo > from_fifo &) ; " RUN_SORT " --outputs fifo; sleep 0.2; true"), 0);
  cr_assert_eq(kind("fifo"), S_IFIFO, "the FIFO was replaced");
  cr_assert_eq(sh("sleep 0.3; cmp -s from_fifo direct.safetensors"), 0, "the FIFO got other bytes");
  /* a device node of our own (root only): /dev/null and /dev/full */
  if (mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)) != 0) return;
  cr_assert_eq(mknod(at("full"), S_IFCHR | 0666, makedev(1, 7)), 0);
  cr_assert_eq(sh(RUN_SORT " --outputs null"), 0, "%s", err_text);
  cr_assert_eq(kind("null"), S_IFCHR, "the device node was replaced");
  EXPECT_ERR(sh(RUN_SORT " --outputs full"), "No space left on device");
  cr_assert_eq(kind("full"), S_IFCHR);
  /* and executables' --outputs share the implementation */
  cr_assert_eq(sh(TFMC " build m.tfm --init random -o exe"), 0, "%s", err_text);
  cr_assert_eq(sh("./exe --inputs in.safetensors --outputs null"), 0, "%s", err_text);
  cr_assert_eq(kind("null"), S_IFCHR);
  cr_assert_eq(sh("./exe --inputs in.safetensors --outputs link.safetensors"), 0, "%s", err_text);
  cr_assert_eq(kind("link.safetensors"), S_IFLNK);
}

Test(outputs, failed_build_leaves_no_outputs) {
  cr_assert_eq(sh("CC=false " TFMC " build m.tfm --init random -o x"), 1, "%s", err_text);
  cr_assert(!exists("x") && !exists("x.weights") && !exists("x.build"), "partial outputs left");
  cr_assert_neq(sh("ls -A | grep tmp"), 0, "a temporary was left: %s", out_text);
  /* an existing executable and weights survive a failed rebuild unchanged */
  cr_assert_eq(sh(TFMC " build m.tfm --init random --seed 1 -o x"), 0, "%s", err_text);
  cr_assert_eq(sh("cp x x.orig && cp x.weights xw.orig"), 0);
  cr_assert_eq(sh("CC=false " TFMC " build m.tfm --init random --seed 2 -o x"), 1);
  same_bytes("x", "x.orig");
  same_bytes("x.weights", "xw.orig");
}

Test(outputs, emit_c_guards_its_directory) {
  cr_assert_eq(sh("mkdir D && cp m.tfm D/model.tfm && cp m.weights D/sort.weights && "
                  "echo mine > D/Makefile && cp m.tfm D/model.c"),
               0);
  /* a foreign non-empty directory: refused before any work */
  EXPECT_ERR(sh(TFMC " emit-c D/model.tfm --weights D/sort.weights -o D"), "--force");
  /* --force, but the project's sort.weights is the input checkpoint */
  EXPECT_ERR(sh(TFMC " emit-c D/model.tfm --weights D/sort.weights -o D --force"),
             "refusing to overwrite");
  /* an input spec named like a project file */
  EXPECT_ERR(sh(TFMC " emit-c D/model.c --weights m.weights -o D --force"), "refusing to overwrite");
  cr_assert_eq(sh("cat D/Makefile"), 0);
  cr_assert_str_eq(out_text, "mine\n", "a refused emission changed files");
  same_bytes("D/model.c", "m.tfm");
  same_bytes("D/sort.weights", "m.weights");
  cr_assert(!exists("D/model.h") && !exists("D/runtime") && !exists("D/.tfmc-project"));
  cr_assert_neq(sh("ls -A D | grep tmp"), 0, "a temporary was left: %s", out_text);
  /* --force with other inputs: only the project's files are replaced */
  cr_assert_eq(sh("echo notes > D/NOTES"), 0);
  cr_assert_eq(sh(TFMC " emit-c m.tfm --weights m.weights -o D --force"), 0, "%s", err_text);
  cr_assert_eq(sh("cat D/NOTES"), 0);
  cr_assert_str_eq(out_text, "notes\n");
  cr_assert(exists("D/.tfmc-project") && exists("D/model.h"));
  /* ours now: no --force needed */
  cr_assert_eq(sh(TFMC " emit-c m.tfm --weights m.weights -o D"), 0, "%s", err_text);
  /* an empty or new directory needs none either; a file is no directory */
  cr_assert_eq(mkdir(at("E"), 0755), 0);
  cr_assert_eq(sh(TFMC " emit-c m.tfm --init random -o E"), 0, "%s", err_text);
  cr_assert_eq(sh(TFMC " emit-c m.tfm --init random -o F/G"), 0, "%s", err_text);
  EXPECT_ERR(sh(TFMC " emit-c m.tfm --init random -o m.weights"), "not a directory");
}

Test(outputs, failed_emit_c_leaves_nothing) {
  /* a project file that cannot be replaced (a directory in its place) */
  cr_assert_eq(sh("mkdir -p P/Makefile && touch P/.tfmc-project"), 0);
  EXPECT_ERR(sh(TFMC " emit-c m.tfm --init random -o P"), "Makefile");
  cr_assert_eq(sh("ls -A P | tr '\\n' ' '"), 0);
  cr_assert_str_eq(out_text, ".tfmc-project Makefile ", "left behind: %s", out_text);
}

/* --print-file FILE (the IR after passes): an output like the others */
#define PRINT_SORT                                                                                 \
  TFMC " run m.tfm --weights m.weights --inputs in.safetensors -O1 --print-after=dce"
#define IR_HEAD "# IR after pass 'dce'"

Test(outputs, print_file_follows_the_output_rules) {
  /* a regular file: replaced whole, keeping its mode */
  cr_assert_eq(sh("echo old > ir.txt && chmod 600 ir.txt"), 0);
  cr_assert_eq(sh(PRINT_SORT " --print-file ir.txt"), 0, "%s", err_text);
  cr_assert_eq(sh("head -c %d ir.txt", (int)strlen(IR_HEAD)), 0);
  cr_assert_str_eq(out_text, IR_HEAD);
  struct stat st;
  cr_assert_eq(stat(at("ir.txt"), &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));
  /* through a symlink to its target */
  cr_assert_eq(mkdir(at("sub"), 0755), 0);
  cr_assert_eq(symlink("sub/ir.txt", at("link.txt")), 0);
  cr_assert_eq(sh(PRINT_SORT " --print-file link.txt"), 0, "%s", err_text);
  cr_assert_eq(kind("link.txt"), S_IFLNK, "the symlink was replaced");
  same_bytes("sub/ir.txt", "ir.txt");
  /* a FIFO: written in place */
  cr_assert_eq(mkfifo(at("fifo"), 0644), 0);
  cr_assert_eq(
      sh("(cat fifo > from_fifo &) ; " PRINT_SORT " --print-file fifo > run.txt; sleep 0.2; true"),
      0);
  cr_assert_eq(kind("fifo"), S_IFIFO, "the FIFO was replaced");
  cr_assert_eq(sh("sleep 0.3; cmp -s from_fifo ir.txt"), 0, "the FIFO got other bytes");
  /* an input, or tfmc itself: refused before any work */
  cr_assert_eq(sh("cp m.weights orig.weights"), 0);
  cr_assert_eq(sh(PRINT_SORT " --print-file m.weights"), 2, "%s", err_text);
  cr_assert(strstr(err_text, "would overwrite m.weights"), "%s", err_text);
  same_bytes("m.weights", "orig.weights");
  EXPECT_ERR(sh(PRINT_SORT " --print-file " TFMC), "tfmc itself");
  /* build: the weights beside -o count too */
  cr_assert_eq(sh(TFMC " build m.tfm --init random -o x -O1 --print-after=dce "
                       "--print-file x.weights"),
               2, "%s", err_text);
  cr_assert(!exists("x") && !exists("x.weights"), "a refused build wrote outputs");
  /* a failed command: the IR was printed, but the old file stays as it was,
   * a new one is not created, and no temporary is left */
  cr_assert_eq(sh("cp ir.txt ir.orig"), 0);
  cr_assert_eq(sh("CC=false " TFMC " build m.tfm --init random -o x -O1 --print-after=dce "
                  "--print-file ir.txt"),
               1, "%s", err_text);
  same_bytes("ir.txt", "ir.orig");
  cr_assert_eq(sh("CC=false " TFMC " build m.tfm --init random -o x -O1 --print-after=dce "
                  "--print-file new.txt"),
               1, "%s", err_text);
  cr_assert(!exists("new.txt"), "a failed build left its --print-file");
  cr_assert_neq(sh("ls -A | grep tmp"), 0, "a temporary was left: %s", out_text);
  /* device nodes of our own (root only): written in place; a full one is
   * a write error, exit 1 */
  if (mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)) != 0)
    return;
  cr_assert_eq(mknod(at("full"), S_IFCHR | 0666, makedev(1, 7)), 0);
  cr_assert_eq(sh(PRINT_SORT " --print-file null"), 0, "%s", err_text);
  cr_assert_eq(kind("null"), S_IFCHR, "the device node was replaced");
  EXPECT_ERR(sh(PRINT_SORT " --print-file full"), "No space left on device");
  cr_assert_eq(kind("full"), S_IFCHR);
}

Test(outputs, executable_refuses_to_overwrite_itself) {
  cr_assert_eq(sh(TFMC " build m.tfm --weights m.weights -o sorter"), 0, "%s", err_text);
  cr_assert_eq(sh("cp sorter orig"), 0);
  EXPECT_ERR(sh("./sorter --inputs in.safetensors --outputs ./sorter"), "refusing to overwrite");
  EXPECT_ERR(sh("./sorter --inputs in.safetensors --outputs sorter.weights"),
             "refusing to overwrite");
  same_bytes("sorter", "orig");
}

Test(outputs, stdout_write_errors_exit_1) {
  if (access("/dev/full", W_OK) != 0) cr_skip_test("no /dev/full");
  cr_assert_eq(sh(RUN_SORT " > /dev/full"), 1, "tfmc run to a full stdout: %s", err_text);
  cr_assert(strstr(err_text, "standard output"), "%s", err_text);
  cr_assert_eq(sh(TFMC " check m.tfm > /dev/full"), 1);
  cr_assert_eq(sh(TFMC " build m.tfm --weights m.weights -o sorter"), 0, "%s", err_text);
  cr_assert_eq(sh("./sorter --inputs in.safetensors > /dev/full"), 1);
  cr_assert_eq(sh("./sorter --help > /dev/full"), 1);
}
