/* runtime/rt_file.h — writing output files without losing anyone's data:
 * the one implementation `tfmc` (run, build, emit-c) and compiled
 * executables (--outputs) share.
 *
 *   RtOut o;
 *   if (rt_file_same(out_path, in_path)) refuse;        // before any work
 *   if (rt_out_open(&o, out_path, 0, err, sizeof err)) fail;
 *   rt_file_write_all(o.fd, bytes, n) ...;              // on error: rt_out_abort(&o)
 *   if (rt_out_commit(&o, err, sizeof err)) fail;       // now the file has its name
 *
 * Where the bytes go:
 *   - a symlink is followed to its target (the link stays a link);
 *   - a regular file, or a name that does not exist yet, is written to a
 *     temporary next to the target and renamed over it by rt_out_commit:
 *     readers see the old file or the complete new one, and a failure
 *     leaves the old file (or nothing) behind; a replaced file keeps its
 *     permission bits, a new one gets 0644;
 *   - a FIFO or character device (/dev/null, /dev/stdout) is written in
 *     place, never replaced by a regular file;
 *   - anything else (a directory, a block device, a socket) is refused.
 *
 * Depends on libc (POSIX 2008) only. Every function returns 0 or non-zero
 * with a message in err naming the path the caller gave. */
#ifndef TFMC_RT_FILE_H
#define TFMC_RT_FILE_H

#include <stddef.h>

/* rt_out_open flags */
enum {
  RT_OUT_REGULAR = 1, /* refuse FIFOs and devices too (executables, packed weights) */
};

typedef struct RtOut {
  const char *path; /* as the caller gave it (borrowed; for messages) */
  char *target;     /* the file that receives the bytes (symlinks followed; owned) */
  char *tmp;        /* the temporary renamed over target; NULL when in place (owned) */
  int fd;           /* -1 once finished */
  int in_place;     /* a FIFO or character device, written directly */
} RtOut;

/* Opens path for writing as described above; o->fd is ready for bytes.
 * On failure nothing is left open or created. */
int rt_out_open(RtOut *o, const char *path, int flags, char *err, size_t errlen);
/* Flushes the bytes to disk and closes o->fd; the temporary keeps its
 * temporary name (o->tmp, e.g. for a linker to write over) until commit. */
int rt_out_finish(RtOut *o, char *err, size_t errlen);
/* Finishes (if not yet) and gives the file its name; releases o. On
 * failure the temporary is removed and the old file is untouched. */
int rt_out_commit(RtOut *o, char *err, size_t errlen);
/* Drops the output: closes, removes the temporary, releases o. Safe after
 * a failed rt_out_open, a commit, or on a zeroed RtOut. */
void rt_out_abort(RtOut *o);

/* Writes all n bytes (retrying short writes and EINTR). Returns 0 or -1
 * with errno set. */
int rt_file_write_all(int fd, const void *buf, size_t n);

/* Non-zero when a and b name the same file: equal strings, the same
 * device and inode, or the same resolved path (symlinks of the last
 * component followed, directories canonical; neither need exist). */
int rt_file_same(const char *a, const char *b);
/* Non-zero when path resolves to somewhere under the directory dir (which
 * need not exist yet). */
int rt_file_within(const char *path, const char *dir);
/* path with the symlinks of its last component followed and its directory
 * made canonical and absolute; malloc'd (the caller frees), or NULL with
 * errno set when its directory does not exist. */
char *rt_file_resolve(const char *path);

#endif
