/* runtime/rt_file.c — safe output files (see rt_file.h).
 *
 * Invariants: a regular output only ever gets its name by rename(2) of a
 * complete, fsync'd temporary in the same directory as its target, so it
 * is never half-written and a symlink given as the output is never
 * replaced; FIFOs and character devices are opened, never created,
 * renamed or unlinked; every temporary is removed on every failure path. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath (POSIX 2008 XSI) */
#endif
#include "runtime/rt_file.h"

#include "runtime/rt_model.h" /* rt_errorf */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAX_LINKS 40 /* as the kernel's ELOOP limit */
#define FILE_LINK_CAP 4096


static char *str_cat3(const char *a, const char *b, const char *c) {
  size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
  char *s = malloc(na + nb + nc + 1);
  if (!s) return NULL;
  memcpy(s, a, na);
  memcpy(s + na, b, nb);
  memcpy(s + na + nb, c, nc + 1);
  return s;
}

int rt_file_write_all(int fd, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) {
      errno = EIO;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* ---- resolving names ---- */

/* path with the symlinks of its last component followed (a relative link
 * is relative to the link's directory). malloc'd, or NULL + errno. */
static char *follow_links(const char *path) {
  char *cur = malloc(strlen(path) + 1);
  if (!cur) return NULL;
  strcpy(cur, path);
  for (int hops = 0;; hops++) {
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    char link[FILE_LINK_CAP];
    ssize_t n = hops < FILE_MAX_LINKS ? readlink(cur, link, sizeof link - 1) : -1;
    if (hops >= FILE_MAX_LINKS) errno = ELOOP;
    if (n < 0 || (size_t)n >= sizeof link - 1) {
      if (n >= 0) errno = ENAMETOOLONG;
      free(cur);
      return NULL;
    }
    link[n] = '\0';
    char *next;
    const char *slash = strrchr(cur, '/');
    if (link[0] == '/' || !slash) {
      next = str_cat3(link, "", "");
    } else {
      cur[slash - cur + 1] = '\0';
      next = str_cat3(cur, link, "");
    }
    free(cur);
    if (!next) return NULL;
    cur = next;
  }
}

char *rt_file_resolve(const char *path) {
  if (!path || !*path) {
    errno = ENOENT;
    return NULL;
  }
  char *t = follow_links(path);
  if (!t) return NULL;
  char *slash = strrchr(t, '/');
  const char *base = slash ? slash + 1 : t;
  if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
    char *r = realpath(t, NULL); /* a directory: canonical as a whole */
    free(t);
    return r;
  }
  char *dir;
  if (!slash) dir = realpath(".", NULL);
  else if (slash == t) dir = realpath("/", NULL);
  else {
    *slash = '\0';
    dir = realpath(t, NULL);
  }
  char *r = dir ? str_cat3(strcmp(dir, "/") == 0 ? "" : dir, "/", base) : NULL;
  int e = errno;
  free(dir);
  free(t);
  errno = e;
  return r;
}

int rt_file_same(const char *a, const char *b) {
  if (!a || !b) return 0;
  if (strcmp(a, b) == 0) return 1;
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char *ra = rt_file_resolve(a), *rb = rt_file_resolve(b);
  int same = ra && rb && strcmp(ra, rb) == 0;
  free(ra);
  free(rb);
  return same;
}

int rt_file_within(const char *path, const char *dir) {
  char *rp = rt_file_resolve(path), *rd = rt_file_resolve(dir);
  size_t n = rd ? strlen(rd) : 0;
  int in = rp && rd && strncmp(rp, rd, n) == 0 && (rp[n] == '/' || (n == 1 && rd[0] == '/'));
  free(rp);
  free(rd);
  return in;
}

/* ---- writing ---- */

int rt_out_open(RtOut *o, const char *path, int flags, char *err, size_t errlen) {
  *o = (RtOut){.path = path, .fd = -1};
  if (!path || !*path) return rt_errorf(err, errlen, "cannot write an output with no name");
  o->target = rt_file_resolve(path);
  if (!o->target)
    return rt_errorf(err, errlen, "%s: cannot create a temporary file next to it: %s", path,
                     errno == ELOOP ? "too many levels of symbolic links" : strerror(errno));
  struct stat st;
  int exists = stat(o->target, &st) == 0;
  mode_t mode = 0644;
  if (exists && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) && !(flags & RT_OUT_REGULAR)) {
    o->in_place = 1;
    do o->fd = open(o->target, O_WRONLY | O_NOCTTY);
    while (o->fd < 0 && errno == EINTR);
    if (o->fd < 0) {
      int e = errno;
      rt_out_abort(o);
      return rt_errorf(err, errlen, "%s: cannot write: %s", path, strerror(e));
    }
    return 0;
  }
  if (exists && !S_ISREG(st.st_mode)) {
    rt_out_abort(o);
    return rt_errorf(err, errlen, "%s: cannot write: %s", path,
                     S_ISDIR(st.st_mode) ? "it is a directory"
                     : flags & RT_OUT_REGULAR
                         ? "it exists and is not a regular file"
                         : "it exists and is not a regular file, FIFO or character device");
  }
  if (exists) mode = st.st_mode & 07777;
  o->tmp = str_cat3(o->target, ".tmpXXXXXX", "");
  if (!o->tmp) {
    rt_out_abort(o);
    return rt_errorf(err, errlen, "%s: cannot write: out of memory", path);
  }
  o->fd = mkstemp(o->tmp);
  if (o->fd < 0) {
    int e = errno;
    free(o->tmp);
    o->tmp = NULL; /* nothing was created */
    rt_out_abort(o);
    return rt_errorf(err, errlen, "%s: cannot create a temporary file next to it: %s", path,
                     strerror(e));
  }
  if (fchmod(o->fd, mode) != 0) {
    int e = errno;
    rt_out_abort(o);
    return rt_errorf(err, errlen, "%s: cannot write: %s", path, strerror(e));
  }
  return 0;
}

int rt_out_finish(RtOut *o, char *err, size_t errlen) {
  if (o->fd < 0) return 0;
  int bad = !o->in_place && fsync(o->fd) != 0;
  int e = errno;
  if (close(o->fd) != 0 && !bad) bad = 1, e = errno;
  o->fd = -1;
  if (bad) {
    rt_out_abort(o);
    return rt_errorf(err, errlen, "%s: cannot write: %s", o->path, strerror(e));
  }
  return 0;
}

int rt_out_commit(RtOut *o, char *err, size_t errlen) {
  if (!o->target) return rt_errorf(err, errlen, "internal: output not open");
  if (rt_out_finish(o, err, errlen)) return 1;
  if (o->tmp && rename(o->tmp, o->target) != 0) {
    int e = errno;
    const char *p = o->path;
    rt_out_abort(o);
    return rt_errorf(err, errlen, "%s: cannot rename the temporary file over it: %s", p, strerror(e));
  }
  free(o->tmp);
  o->tmp = NULL;
  free(o->target);
  o->target = NULL;
  return 0;
}

void rt_out_abort(RtOut *o) {
  if (o->target && o->fd >= 0) close(o->fd); /* a zeroed RtOut owns no fd 0 */
  o->fd = -1;
  if (o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->target);
  o->tmp = o->target = NULL;
}
