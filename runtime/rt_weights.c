/* runtime/rt_weights.c — packed weights files (format in rt_weights.h):
 * writing them atomically, mapping and validating them, and validating
 * embedded images.
 *
 * Invariants of an RtWeights handed out:
 *   - the image had the magic, version 3 (or 2: its older checksum), the
 *     model's layout hash and float count, exactly 64 + 4 * n_floats bytes,
 *     and a matching checksum;
 *   - data points at n_floats host-order floats, 64-byte aligned, read-only,
 *     valid until rt_weights_close: straight into the mapping or the caller's
 *     image when the host is little-endian and the data is aligned, else
 *     into an owned aligned copy (byte-swapped on a big-endian host).
 * Header integers are assembled from little-endian bytes, never loaded
 * through wider pointers, so any image alignment and any host byte order
 * are handled; the byte order of the host is detected at run time. */
#if !defined(_WIN32) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE */
#endif
#include "runtime/rt_weights.h"

#include "runtime/rt_file.h"
#include "runtime/rt_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WTS_HEADER 64
/* 3: the checksum in segments and lanes (rt_weights.h); version 2 files
 * (one serial checksum chain) are still read; 2 was: a tied weight stored
 * once, in panels (pack-weights); a version 1 file is refused with a
 * message saying to pack it again */
#define WTS_VERSION RT_WEIGHTS_VERSION
#define WTS_VERSION_SERIAL 2u
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static const unsigned char wts_magic[8] = {'T', 'F', 'M', 'C', 'W', 'T', 'S', '\0'};

struct RtWeights {
  const float *data;
  void *map; /* the file mapping, or NULL */
  size_t map_len;
  float *owned; /* aligned copy, or NULL */
};

/* ---- bytes ---- */

static int host_is_little_endian(void) {
  const uint32_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static uint64_t load_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void store_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* Copies n floats stored little-endian at src into host order at dst. */
static void floats_from_le(float *dst, const unsigned char *src, size_t n) {
  if (host_is_little_endian()) {
    memcpy(dst, src, n * sizeof *dst);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)load_le(src + 4 * i, 4);
    memcpy(&dst[i], &u, 4);
  }
}

/* The little-endian bytes of the n floats at src into buf. */
static void floats_to_le(unsigned char *buf, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &src[i], 4);
    store_le(buf + 4 * i, u, 4);
  }
}

/* ---- the checksums (rt_weights.h) ----
 * Both are built on one step, FNV-1a 64 over an 8-byte little-endian word
 * with an xor-shift fold after the multiply so every bit of a word reaches
 * every bit of the state. Version 2 ran one chain of steps over the whole
 * data (read only now: 2 GB/s at best, a serial multiply chain); version 3
 * runs 8 chains (lanes) side by side over 1 MiB segments, which any number
 * of threads can take in any order. */

static inline uint64_t fnv_word(uint64_t h, uint64_t w) {
  h = (h ^ w) * FNV_PRIME;
  return h ^ (h >> 32);
}

/* ---- version 2: one chain over the words, the last one zero-padded ---- */

typedef struct Fnv {
  uint64_t h;
  unsigned char tail[8]; /* bytes of an unfinished word */
  int n_tail;
} Fnv;

static void fnv_update(Fnv *f, const unsigned char *p, size_t n) {
  while (f->n_tail && n) {
    f->tail[f->n_tail++] = *p++;
    n--;
    if (f->n_tail == 8) {
      f->h = fnv_word(f->h, load_le(f->tail, 8));
      f->n_tail = 0;
    }
  }
  uint64_t h = f->h;
  size_t i = 0;
  if (host_is_little_endian()) {
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      memcpy(&w, p + i, 8);
      h = fnv_word(h, w);
    }
  } else {
    for (; i + 8 <= n; i += 8)
      h = fnv_word(h, load_le(p + i, 8));
  }
  f->h = h;
  for (; i < n; i++)
    f->tail[f->n_tail++] = p[i];
}

static uint64_t fnv_final(Fnv *f) {
  if (f->n_tail) {
    memset(f->tail + f->n_tail, 0, (size_t)(8 - f->n_tail));
    f->h = fnv_word(f->h, load_le(f->tail, 8));
    f->n_tail = 0;
  }
  return f->h;
}

/* ---- version 3: 8 lanes per 1 MiB segment ---- */

#define SUM_LANES 8
#define SUM_SEGMENT ((size_t)1 << 20)
#define SUM_READ ((size_t)256 << 10) /* pread pieces: they stay in L2 */

/* one segment being taken: bytes arrive in pieces that are multiples of
 * 64 bytes, except the data's last one */
typedef struct Seg {
  uint64_t lane[SUM_LANES];
  size_t at; /* bytes taken */
} Seg;

static void seg_begin(Seg *s) {
  for (int j = 0; j < SUM_LANES; j++)
    s->lane[j] = FNV_OFFSET ^ (uint64_t)j;
  s->at = 0;
}

static void seg_take(Seg *s, const unsigned char *p, size_t n) {
  size_t i = 0;
  if (s->at % 64 == 0 && host_is_little_endian()) {
    uint64_t l0 = s->lane[0], l1 = s->lane[1], l2 = s->lane[2], l3 = s->lane[3];
    uint64_t l4 = s->lane[4], l5 = s->lane[5], l6 = s->lane[6], l7 = s->lane[7];
    for (; i + 64 <= n; i += 64) {
      uint64_t w[SUM_LANES];
      memcpy(w, p + i, sizeof w);
      l0 = fnv_word(l0, w[0]);
      l1 = fnv_word(l1, w[1]);
      l2 = fnv_word(l2, w[2]);
      l3 = fnv_word(l3, w[3]);
      l4 = fnv_word(l4, w[4]);
      l5 = fnv_word(l5, w[5]);
      l6 = fnv_word(l6, w[6]);
      l7 = fnv_word(l7, w[7]);
    }
    s->lane[0] = l0, s->lane[1] = l1, s->lane[2] = l2, s->lane[3] = l3;
    s->lane[4] = l4, s->lane[5] = l5, s->lane[6] = l6, s->lane[7] = l7;
  }
  for (; i < n; i += 8) { /* words one by one; the last may be short */
    unsigned char w[8] = {0};
    memcpy(w, p + i, n - i < 8 ? n - i : 8);
    int j = (int)((s->at + i) / 8 % SUM_LANES);
    s->lane[j] = fnv_word(s->lane[j], load_le(w, 8));
  }
  s->at += n;
}

static uint64_t seg_digest(const Seg *s) {
  uint64_t d = FNV_OFFSET;
  for (int j = 0; j < SUM_LANES; j++)
    d = fnv_word(d, s->lane[j]);
  return d;
}

/* the checksum from the segments' digests */
static uint64_t sum_fold(const uint64_t *digest, size_t n_seg, uint64_t n_floats) {
  uint64_t h = FNV_OFFSET;
  for (size_t i = 0; i < n_seg; i++)
    h = fnv_word(h, digest[i]);
  return fnv_word(h, n_floats);
}

/* Segments of the data [off, off + len) of an image in memory (img), of
 * host-order floats to write (host: bytes of a big-endian host, taken in
 * little-endian pieces), or of the file open as fd (neither), taken by a
 * pool's threads. */
typedef struct SumJob {
  const unsigned char *img;
  const float *host;
  int fd;
  size_t off, len;
  uint64_t *digest;
  atomic_int failed; /* errno of a failed read, or 0 */
} SumJob;

/* n bytes at off of fd, whole (short reads continued); 0 or an errno */
static int pread_full(int fd, unsigned char *buf, size_t n, size_t off) {
  while (n) {
    ssize_t got = pread(fd, buf, n, (off_t)off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return got == 0 ? EIO : errno; /* EIO: the file shrank under us */
    buf += got;
    off += (size_t)got;
    n -= (size_t)got;
  }
  return 0;
}

/* the digests of segments [lo, hi) (an RtTaskFn) */
static void sum_segments(void *ctx, int64_t lo, int64_t hi) {
  SumJob *job = ctx;
  unsigned char *buf = NULL;
  if (!job->img && !(buf = malloc(SUM_READ))) { /* pieces of host or fd */
    atomic_store(&job->failed, ENOMEM);
    return;
  }
  for (int64_t i = lo; i < hi && !atomic_load(&job->failed); i++) {
    size_t at = (size_t)i * SUM_SEGMENT;
    size_t end = job->len - at < SUM_SEGMENT ? job->len : at + SUM_SEGMENT;
    Seg s;
    seg_begin(&s);
    if (job->img) {
      seg_take(&s, job->img + job->off + at, end - at);
    } else {
      for (; at < end; at += SUM_READ) {
        size_t n = end - at < SUM_READ ? end - at : SUM_READ;
        int e = 0;
        if (job->host)
          floats_to_le(buf, job->host + at / 4, n / 4);
        else
          e = pread_full(job->fd, buf, n, job->off + at);
        if (e) {
          atomic_store(&job->failed, e);
          break;
        }
        seg_take(&s, buf, n);
      }
    }
    job->digest[i] = seg_digest(&s);
  }
  free(buf);
}

/* The version 3 checksum of n_floats little-endian floats at off in img,
 * or host-order floats at host, or at off in fd, the segments on a pool of the online CPUs (made for the call: this
 * runs once, at load). 0, or 1 with errno set. Reading with pread, not the
 * mapping: hashing through the mapping would make every page of the file
 * resident in the process, where a run touches only the weights it reads
 * (a generation: the step's; a gather: its rows). */
static int sum_data(const unsigned char *img, const float *host, int fd, size_t off,
                    uint64_t n_floats, uint64_t *sum) {
  size_t len = (size_t)n_floats * 4, n_seg = (len + SUM_SEGMENT - 1) / SUM_SEGMENT;
  uint64_t one = 0, *digest = n_seg > 1 ? malloc(n_seg * sizeof *digest) : &one;
  if (!digest)
    return errno = ENOMEM, 1;
  SumJob job = {.img = img, .host = host, .fd = fd, .off = off, .len = len, .digest = digest};
  atomic_init(&job.failed, 0);
  RtPool *pool = n_seg > 1 ? rt_pool_create(0) : NULL; /* NULL: this thread alone */
  rt_pool_parallel_for(pool, (int64_t)n_seg, 1, sum_segments, &job);
  rt_pool_destroy(pool);
  int failed = atomic_load(&job.failed);
  if (!failed)
    *sum = sum_fold(digest, n_seg, n_floats);
  if (digest != &one)
    free(digest);
  if (failed)
    return errno = failed, 1;
  return 0;
}

/* ---- validation ---- */

static int wts_fail(char *err, size_t errlen, const char *label, const char *msg) {
  if (err && errlen)
    snprintf(err, errlen, "%s: %s", label, msg);
  return 1;
}

/* The version 2 checksum of the data bytes [WTS_HEADER, len) of the file
 * open as fd, read with pread in pieces (see sum_data). 0, or 1 with errno
 * set when the file cannot be read whole. */
static int wts_hash_fd_serial(int fd, size_t len, uint64_t *sum) {
  unsigned char *buf = malloc(SUM_READ);
  if (!buf)
    return 1;
  Fnv f = {FNV_OFFSET, {0}, 0};
  for (size_t at = WTS_HEADER; at < len; at += SUM_READ) {
    size_t want = len - at < SUM_READ ? len - at : SUM_READ;
    int e = pread_full(fd, buf, want, at);
    if (e) {
      free(buf);
      return errno = e, 1;
    }
    fnv_update(&f, buf, want);
  }
  free(buf);
  *sum = fnv_final(&f);
  return 0;
}

/* Checks an image of len bytes against info; 0 or 1 + message. The data's
 * checksum is computed from the image, or with pread from fd when fd >= 0
 * (the file the image maps). */
static int wts_check(const unsigned char *img, size_t len, int fd, const RtModelInfo *info,
                     const char *label, char *err, size_t errlen) {
  char msg[384];
  if (len < sizeof wts_magic || memcmp(img, wts_magic, sizeof wts_magic) != 0) {
    if (len == 0)
      return wts_fail(err, errlen, label, "empty file; not a tfmc packed-weights file");
    if (len >= 9 && img[8] == '{') /* 8-byte header length then JSON */
      return wts_fail(err, errlen, label,
                      "is a safetensors checkpoint, not tfmc packed weights; "
                      "pack it for this model with tfmc build");
    return wts_fail(err, errlen, label, "not a tfmc packed-weights file (bad magic)");
  }
  if (len < WTS_HEADER) {
    snprintf(msg, sizeof msg, "truncated: %zu bytes, shorter than the %d-byte header", len,
             WTS_HEADER);
    return wts_fail(err, errlen, label, msg);
  }
  uint32_t version = (uint32_t)load_le(img + 8, 4);
  if (version == 1) {
    snprintf(msg, sizeof msg,
             "packed-weights format version 1, written by an older tfmc (it stored a tied "
             "embedding twice); this runtime reads version %u: pack the weights again with "
             "tfmc build",
             WTS_VERSION);
    return wts_fail(err, errlen, label, msg);
  }
  if (version != WTS_VERSION && version != WTS_VERSION_SERIAL) {
    snprintf(msg, sizeof msg,
             "packed-weights format version %u; this runtime reads versions %u and %u", version,
             WTS_VERSION_SERIAL, WTS_VERSION);
    return wts_fail(err, errlen, label, msg);
  }
  const char *model = info->name ? info->name : "?";
  uint64_t hash = load_le(img + 16, 8), n_floats = load_le(img + 24, 8);
  if (hash != info->layout_hash) {
    snprintf(msg, sizeof msg,
             "was packed for another model (weights layout hash %016llx; model '%s' has "
             "%016llx)",
             (unsigned long long)hash, model, (unsigned long long)info->layout_hash);
    return wts_fail(err, errlen, label, msg);
  }
  if (info->weights_floats < 0 || n_floats != (uint64_t)info->weights_floats) {
    snprintf(msg, sizeof msg, "was packed for another model (%llu floats; model '%s' has %lld)",
             (unsigned long long)n_floats, model, (long long)info->weights_floats);
    return wts_fail(err, errlen, label, msg);
  }
  if (n_floats > ((uint64_t)SIZE_MAX - WTS_HEADER) / 4) {
    snprintf(msg, sizeof msg, "%llu floats do not fit in memory on this host",
             (unsigned long long)n_floats);
    return wts_fail(err, errlen, label, msg);
  }
  size_t want = WTS_HEADER + (size_t)n_floats * 4;
  if (len != want) {
    snprintf(msg, sizeof msg, "%s: %zu bytes, expected %zu (the %d-byte header and %llu floats)",
             len < want ? "truncated" : "size mismatch (trailing bytes)", len, want, WTS_HEADER,
             (unsigned long long)n_floats);
    return wts_fail(err, errlen, label, msg);
  }
  uint64_t sum = 0, stored = load_le(img + 32, 8);
  int bad = 0;
  if (version == WTS_VERSION) {
    bad = sum_data(fd >= 0 ? NULL : img, NULL, fd, WTS_HEADER, n_floats, &sum);
  } else if (fd >= 0) {
    bad = wts_hash_fd_serial(fd, want, &sum);
  } else {
    Fnv f = {FNV_OFFSET, {0}, 0};
    fnv_update(&f, img + WTS_HEADER, want - WTS_HEADER);
    sum = fnv_final(&f);
  }
  if (bad) {
    snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
    return wts_fail(err, errlen, label, msg);
  }
  if (sum != stored) {
    snprintf(msg, sizeof msg,
             "checksum mismatch: the file is corrupt (stored %016llx, data hashes to %016llx)",
             (unsigned long long)stored, (unsigned long long)sum);
    return wts_fail(err, errlen, label, msg);
  }
  return 0;
}

/* Builds the handle for a validated image: points into it when possible,
 * else copies (aligned, host order). */
static int wts_make(const unsigned char *img, size_t len, void *map, const char *label,
                    RtWeights **out, char *err, size_t errlen) {
  RtWeights *w = calloc(1, sizeof *w);
  if (!w)
    return wts_fail(err, errlen, label, "out of memory");
  size_t n = (len - WTS_HEADER) / 4;
  const unsigned char *data = img + WTS_HEADER;
  if (host_is_little_endian() && (uintptr_t)data % 64 == 0) {
    w->data = (const float *)(const void *)data;
  } else {
    size_t bytes = (n * 4 + 63) / 64 * 64;
    w->owned = aligned_alloc(64, bytes ? bytes : 64);
    if (!w->owned) {
      free(w);
      return wts_fail(err, errlen, label, "out of memory copying the weights");
    }
    rt_weights_advise_huge(w->owned, bytes);
    floats_from_le(w->owned, data, n);
    w->data = w->owned;
  }
  if (w->owned && map) { /* the copy is all we need */
    munmap(map, len);
    map = NULL;
  }
  w->map = map;
  w->map_len = map ? len : 0;
  *out = w;
  return 0;
}

int rt_weights_from_memory(const void *image, size_t len, const RtModelInfo *info, RtWeights **out,
                           char *err, size_t errlen) {
  const char *label = "embedded weights";
  if (!out)
    return wts_fail(err, errlen, label, "internal: no output handle");
  *out = NULL;
  if (!info)
    return wts_fail(err, errlen, label, "internal: no model info");
  if (!image && len)
    return wts_fail(err, errlen, label, "internal: NULL image");
  const unsigned char *img = image ? image : (const unsigned char *)"";
  if (wts_check(img, len, -1, info, label, err, errlen))
    return 1;
  return wts_make(img, len, NULL, label, out, err, errlen);
}

int rt_weights_open(const char *path, const RtModelInfo *info, RtWeights **out, char *err,
                    size_t errlen) {
  const char *label = path ? path : "(null)";
  char msg[256];
  if (!out)
    return wts_fail(err, errlen, label, "internal: no output handle");
  *out = NULL;
  if (!info || !path)
    return wts_fail(err, errlen, label, "internal: no model info or path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(msg, sizeof msg, "cannot open weights: %s", strerror(errno));
    return wts_fail(err, errlen, label, msg);
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
    close(fd);
    return wts_fail(err, errlen, label, msg);
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return wts_fail(err, errlen, label,
                    S_ISDIR(sb.st_mode) ? "is a directory, not a weights file"
                                        : "not a regular file");
  }
  if (sb.st_size < 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
    close(fd);
    return wts_fail(err, errlen, label, "file too large to map");
  }
  size_t len = (size_t)sb.st_size;
  if (len < WTS_HEADER) { /* too short to map usefully: read and let the checks explain */
    unsigned char small[WTS_HEADER];
    ssize_t got = len ? read(fd, small, len) : 0;
    close(fd);
    if (got < 0) {
      snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
      return wts_fail(err, errlen, label, msg);
    }
    if (wts_check(small, (size_t)got, -1, info, label, err, errlen))
      return 1;
    return wts_fail(err, errlen, label, "internal: a short file passed the checks");
  }
  void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    snprintf(msg, sizeof msg, "cannot map: %s", strerror(errno));
    close(fd);
    return wts_fail(err, errlen, label, msg);
  }
  rt_weights_advise_huge(map, len); /* the weights are read from here (wts_make) */
  int bad = wts_check(map, len, fd, info, label, err, errlen);
  close(fd); /* the mapping stays valid */
  if (bad || wts_make(map, len, map, label, out, err, errlen)) {
    if (!*out)
      munmap(map, len);
    return 1;
  }
  return 0;
}

const float *rt_weights_data(const RtWeights *w) {
  return w ? w->data : NULL;
}

void rt_weights_close(RtWeights *w) {
  if (!w)
    return;
  if (w->map)
    munmap(w->map, w->map_len);
  free(w->owned);
  free(w);
}

/* ---- writing ---- */

int rt_weights_write_fd(int fd, const char *label, const RtModelInfo *info, const float *data,
                        char *err, size_t errlen) {
  if (!info)
    return wts_fail(err, errlen, label, "internal: no model info");
  if (info->weights_floats < 0 || (info->weights_floats > 0 && !data))
    return wts_fail(err, errlen, label, "internal: no weights data");
  size_t n = (size_t)info->weights_floats;
  int le = host_is_little_endian();
  unsigned char chunk[4096];
  enum { CHUNK_FLOATS = sizeof chunk / 4 };

  uint64_t sum = 0; /* on a big-endian host, over the bytes as written */
  if (sum_data(le ? (const unsigned char *)data : NULL, le ? NULL : data, -1, 0, n, &sum))
    return wts_fail(err, errlen, label, "out of memory taking the checksum");
  unsigned char head[WTS_HEADER] = {0};
  memcpy(head, wts_magic, sizeof wts_magic);
  store_le(head + 8, WTS_VERSION, 4);
  store_le(head + 16, info->layout_hash, 8);
  store_le(head + 24, (uint64_t)n, 8);
  store_le(head + 32, sum, 8);

  int bad = rt_file_write_all(fd, head, sizeof head);
  if (le) {
    if (!bad && n)
      bad = rt_file_write_all(fd, data, n * 4);
  } else {
    for (size_t i = 0; i < n && !bad; i += CHUNK_FLOATS) {
      size_t k = n - i < CHUNK_FLOATS ? n - i : CHUNK_FLOATS;
      floats_to_le(chunk, data + i, k);
      bad = rt_file_write_all(fd, chunk, k * 4);
    }
  }
  if (bad) {
    char msg[256];
    snprintf(msg, sizeof msg, "cannot write: %s", strerror(errno));
    return wts_fail(err, errlen, label, msg);
  }
  return 0;
}

int rt_weights_write(const char *path, const RtModelInfo *info, const float *data, char *err,
                     size_t errlen) {
  RtOut o;
  if (!path)
    return wts_fail(err, errlen, "(null)", "internal: no path");
  if (rt_out_open(&o, path, RT_OUT_REGULAR, err, errlen))
    return 1;
  if (rt_weights_write_fd(o.fd, path, info, data, err, errlen)) {
    rt_out_abort(&o);
    return 1;
  }
  return rt_out_commit(&o, err, errlen);
}

void rt_weights_advise_huge(void *p, size_t len) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = (uintptr_t)2 << 20;
  const char *off = getenv("TFMC_HUGE_PAGES");
  if (!p || (off && strcmp(off, "0") == 0))
    return;
  uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
  uintptr_t hi = ((uintptr_t)p + len) & ~(huge - 1);
  if (hi > lo && (uintptr_t)p + len > (uintptr_t)p)
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* EINVAL without THP: nothing lost */
#else
  (void)p;
  (void)len;
#endif
}
