/* tests/runtime/test_file.c — rt_file: outputs replace regular files
 * atomically, write through symlinks to their targets, write FIFOs and
 * character devices in place, leave nothing behind on failure; same-file
 * and within-directory checks by inode and by resolved path. */
#define _XOPEN_SOURCE 700 /* mknod */
#include "runtime/rt_file.h"
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static char dir[256];

static const char *at(const char *name) {
  static char buf[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static void put(const char *name, const char *text) {
  FILE *f = fopen(at(name), "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

static const char *get(const char *name) {
  static char buf[256];
  FILE *f = fopen(at(name), "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[n] = 0;
  if (f) fclose(f);
  return buf;
}

static int n_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int write_text(const char *path, const char *text) {
  RtOut o;
  char err[512];
  if (rt_out_open(&o, path, 0, err, sizeof err)) return 1;
  if (rt_file_write_all(o.fd, text, strlen(text))) {
    rt_out_abort(&o);
    return 1;
  }
  return rt_out_commit(&o, err, sizeof err);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tfmc_file_XXXXXX");
  cr_assert(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {
  }
}

TestSuite(file, .init = setup, .fini = teardown);

Test(file, replaces_regular_file_keeping_its_mode) {
  put("a", "old");
  chmod(at("a"), 0600);
  cr_assert_eq(write_text(at("a"), "new"), 0);
  cr_assert_str_eq(get("a"), "new");
  struct stat st;
  cr_assert_eq(stat(at("a"), &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0600);
  cr_assert_eq(n_entries(), 1, "a temporary was left behind");
}

Test(file, abort_leaves_old_file_and_no_temporary) {
  put("a", "old");
  RtOut o;
  char err[512];
  cr_assert_eq(rt_out_open(&o, at("a"), 0, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_file_write_all(o.fd, "half", 4), 0);
  rt_out_abort(&o);
  cr_assert_str_eq(get("a"), "old");
  cr_assert_eq(n_entries(), 1);
  RtOut z = {0};
  rt_out_abort(&z); /* a zeroed RtOut owns nothing (and not fd 0) */
  cr_assert(fcntl(0, F_GETFD) >= 0 || errno != EBADF);
}

Test(file, writes_through_symlinks) {
  cr_assert_eq(symlink("target", at("link")), 0);
  cr_assert_eq(write_text(at("link"), "one"), 0); /* dangling: creates the target */
  struct stat st;
  cr_assert_eq(lstat(at("link"), &st), 0);
  cr_assert(S_ISLNK(st.st_mode), "the symlink was replaced");
  cr_assert_str_eq(get("target"), "one");
  cr_assert_eq(mkdir(at("sub"), 0755), 0);
  cr_assert_eq(symlink("../target", at("sub/rel")), 0);
  cr_assert_eq(write_text(at("sub/rel"), "two"), 0);
  cr_assert_str_eq(get("target"), "two");
  cr_assert_eq(lstat(at("sub/rel"), &st), 0);
  cr_assert(S_ISLNK(st.st_mode));
}

Test(file, fifo_written_in_place) {
  cr_assert_eq(mkfifo(at("fifo"), 0644), 0);
  int rd = open(at("fifo"), O_RDONLY | O_NONBLOCK); /* a reader, so opening for write does not block */
  cr_assert(rd >= 0);
  cr_assert_eq(write_text(at("fifo"), "piped"), 0);
  char buf[16] = {0};
  cr_assert_eq(read(rd, buf, sizeof buf - 1), 5);
  cr_assert_str_eq(buf, "piped");
  close(rd);
  struct stat st;
  cr_assert_eq(lstat(at("fifo"), &st), 0);
  cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
}

Test(file, char_device_written_in_place) {
  if (mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)) != 0) cr_skip_test("mknod needs root");
  cr_assert_eq(write_text(at("null"), "gone"), 0);
  struct stat st;
  cr_assert_eq(lstat(at("null"), &st), 0);
  cr_assert(S_ISCHR(st.st_mode), "the device node was replaced");
  RtOut o;
  char err[512];
  cr_assert_neq(rt_out_open(&o, at("null"), RT_OUT_REGULAR, err, sizeof err), 0);
  cr_assert(strstr(err, "not a regular file"), "%s", err);
}

Test(file, refuses_directories) {
  cr_assert_eq(mkdir(at("d"), 0755), 0);
  RtOut o;
  char err[512];
  cr_assert_neq(rt_out_open(&o, at("d"), 0, err, sizeof err), 0);
  cr_assert(strstr(err, "directory"), "%s", err);
  cr_assert_neq(rt_out_open(&o, at("nodir/x"), 0, err, sizeof err), 0);
  cr_assert(strstr(err, "nodir/x"), "%s", err);
}

Test(file, safetensors_through_symlink) {
  cr_assert_eq(symlink("real.safetensors", at("out.safetensors")), 0);
  float v[2] = {1, 2};
  RtStWrite w = {"x", RT_F32, 1, {2}, v};
  char err[512];
  cr_assert_eq(rt_st_write(at("out.safetensors"), &w, 1, NULL, 0, err, sizeof err), 0, "%s", err);
  struct stat st;
  cr_assert_eq(lstat(at("out.safetensors"), &st), 0);
  cr_assert(S_ISLNK(st.st_mode));
  cr_assert_eq(stat(at("real.safetensors"), &st), 0);
  cr_assert(st.st_size > 8);
}

Test(file, same_by_inode_and_by_resolved_path) {
  put("a", "x");
  cr_assert_eq(link(at("a"), at("hard")), 0);
  cr_assert_eq(symlink("a", at("soft")), 0);
  cr_assert(rt_file_same(at("a"), at("hard")));
  cr_assert(rt_file_same(at("soft"), at("a")));
  cr_assert_eq(mkdir(at("sub"), 0755), 0);
  cr_assert(rt_file_same(at("sub/../new"), at("new")), "not yet existing, same resolved path");
  cr_assert_eq(symlink("new", at("soft_new")), 0);
  cr_assert(rt_file_same(at("soft_new"), at("new")), "dangling symlink to the same name");
  cr_assert(!rt_file_same(at("a"), at("new")));
  cr_assert(rt_file_within(at("sub/x"), at("sub")));
  cr_assert(!rt_file_within(at("subx"), at("sub")));
  cr_assert_eq(symlink("sub", at("sublink")), 0);
  cr_assert(rt_file_within(at("sub/x"), at("sublink")));
}
