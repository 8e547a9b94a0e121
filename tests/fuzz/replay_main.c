/* tests/fuzz/replay_main.c — a libFuzzer-compatible replay driver, shared by
 * every harness in tests/fuzz (so it knows nothing about any format).
 *
 *   fuzz_X_replay CORPUS_DIR [N]
 *
 * Calls LLVMFuzzerTestOneInput on every regular file in CORPUS_DIR (sorted by
 * name; an empty input when the directory is missing or empty), then on N
 * deterministic mutations of those seeds: bit flips, byte sets, interesting
 * bytes and integers, insertions, deletions, duplications, truncations,
 * splices of two seeds. Prints "COUNT passed, 0 failed" and returns 0; a
 * harness that finds a bug crashes (abort, sanitizer), and that is the
 * failure.
 *
 * Invariants: the PRNG seed is fixed, so a run is reproducible; each input is
 * handed over in its own exactly sized malloc block, so a sanitizer or
 * valgrind sees any read past its end; inputs never exceed MAX_INPUT bytes. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT ((size_t)1 << 20)

typedef struct Input {
  uint8_t *data;
  size_t size;
} Input;

typedef struct Seeds {
  Input *v;
  size_t n, cap;
} Seeds;

/* ---- deterministic randomness (xorshift64*) ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

static size_t rng_below(size_t n) {
  return n ? (size_t)(rng_next() % n) : 0;
}

/* ---- running one input ---- */

static size_t n_run;

static void run_one(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) {
    fprintf(stderr, "replay: out of memory\n");
    abort();
  }
  if (size) memcpy(copy, data, size);
  LLVMFuzzerTestOneInput(copy, size);
  free(copy);
  n_run++;
}

/* ---- the corpus ---- */

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void seeds_add(Seeds *s, uint8_t *data, size_t size) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 16;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) abort();
  }
  s->v[s->n++] = (Input){data, size};
}

static int read_file(const char *path, uint8_t **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) abort();
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0 || n > MAX_INPUT) break;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  int bad = ferror(f);
  fclose(f);
  if (bad || n > MAX_INPUT) {
    free(buf);
    return -1;
  }
  *data = buf;
  *size = n;
  return 0;
}

/* Loads every regular file of dir, in name order. */
static void load_corpus(const char *dir, Seeds *s) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "replay: no corpus at %s (%s); starting from an empty input\n", dir,
            strerror(errno));
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      names = realloc(names, cap * sizeof *names);
      if (!names) abort();
    }
    names[n] = strdup(e->d_name);
    if (!names[n]) abort();
    n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_names);
  for (size_t i = 0; i < n; i++) {
    size_t plen = strlen(dir) + strlen(names[i]) + 2;
    char *path = malloc(plen);
    if (!path) abort();
    snprintf(path, plen, "%s/%s", dir, names[i]);
    struct stat sb;
    uint8_t *data;
    size_t size;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
      if (read_file(path, &data, &size) == 0) seeds_add(s, data, size);
      else fprintf(stderr, "replay: skipping %s (unreadable or over %zu bytes)\n", path, MAX_INPUT);
    }
    free(path);
    free(names[i]);
  }
  free(names);
}

/* ---- mutations ---- */

static const uint8_t interesting_bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xc0, 0xed, 0xf4,
                                            '"',  '{',  '}',  '[',  ']',  ',',  ':',  '\\',
                                            '-',  '.',  'e',  '0',  '9',  ' ',  '\n', 'u'};

static const uint64_t interesting_ints[] = {0,          1,          2,          7,
                                            8,          0x7f,       0x80,       0xff,
                                            0x7fff,     0xffff,     0x7fffffff, 0xffffffff,
                                            1ull << 32, 1ull << 53, 1ull << 63, ~0ull};

/* Makes room for `extra` more bytes in a buffer of *cap bytes. */
static uint8_t *reserve(uint8_t *buf, size_t *cap, size_t size, size_t extra) {
  if (size + extra <= *cap) return buf;
  size_t nc = *cap ? *cap : 64;
  while (nc < size + extra) nc *= 2;
  buf = realloc(buf, nc);
  if (!buf) abort();
  *cap = nc;
  return buf;
}

/* Applies one random mutation to buf[0..*size); may grow it (realloc). */
static uint8_t *mutate_once(uint8_t *buf, size_t *size, size_t *cap, const Seeds *s) {
  size_t n = *size;
  switch (rng_below(11)) {
  case 0: /* flip a bit */
    if (n) buf[rng_below(n)] ^= (uint8_t)(1u << rng_below(8));
    break;
  case 1: /* set a random byte */
    if (n) buf[rng_below(n)] = (uint8_t)rng_next();
    break;
  case 2: /* set an interesting byte */
    if (n) buf[rng_below(n)] = interesting_bytes[rng_below(sizeof interesting_bytes)];
    break;
  case 3: /* nudge a byte (digits become other digits, lengths shift by one) */
    if (n) buf[rng_below(n)] += (uint8_t)(rng_below(2) ? 1 : 0xff);
    break;
  case 4: { /* insert 1-8 random or interesting bytes */
    size_t k = 1 + rng_below(8), at = rng_below(n + 1);
    if (n + k > MAX_INPUT) break;
    buf = reserve(buf, cap, n, k);
    memmove(buf + at + k, buf + at, n - at);
    for (size_t i = 0; i < k; i++)
      buf[at + i] = rng_below(2) ? (uint8_t)rng_next()
                                 : interesting_bytes[rng_below(sizeof interesting_bytes)];
    *size = n + k;
    break;
  }
  case 5: { /* delete a range */
    if (!n) break;
    size_t at = rng_below(n), k = 1 + rng_below(n - at < 16 ? n - at : 16);
    memmove(buf + at, buf + at + k, n - at - k);
    *size = n - k;
    break;
  }
  case 6: /* truncate */
    *size = rng_below(n + 1);
    break;
  case 7: { /* duplicate a chunk somewhere else */
    if (!n) break;
    size_t from = rng_below(n), k = 1 + rng_below(n - from < 64 ? n - from : 64);
    size_t at = rng_below(n + 1);
    if (n + k > MAX_INPUT) break;
    buf = reserve(buf, cap, n, k);
    uint8_t tmp[64];
    memcpy(tmp, buf + from, k);
    memmove(buf + at + k, buf + at, n - at);
    memcpy(buf + at, tmp, k);
    *size = n + k;
    break;
  }
  case 8: { /* overwrite with an interesting little-endian integer */
    size_t w = (size_t)1 << rng_below(4); /* 1, 2, 4 or 8 bytes */
    if (n < w) break;
    size_t at = rng_below(n - w + 1);
    uint64_t v = interesting_ints[rng_below(sizeof interesting_ints / sizeof interesting_ints[0])];
    if (rng_below(4) == 0) v = (uint64_t)n - rng_below(16); /* near the input's own length */
    for (size_t i = 0; i < w; i++) buf[at + i] = (uint8_t)(v >> (8 * i));
    break;
  }
  case 9: { /* splice: this input's prefix, another seed's suffix */
    const Input *o = &s->v[rng_below(s->n)];
    size_t keep = rng_below(n + 1), from = rng_below(o->size + 1), k = o->size - from;
    if (keep + k > MAX_INPUT) break;
    buf = reserve(buf, cap, keep, k);
    if (k) memcpy(buf + keep, o->data + from, k);
    *size = keep + k;
    break;
  }
  case 10: { /* replace a range with the same-length range of another seed */
    const Input *o = &s->v[rng_below(s->n)];
    if (!n || !o->size) break;
    size_t at = rng_below(n), from = rng_below(o->size);
    size_t k = 1 + rng_below(32);
    if (k > n - at) k = n - at;
    if (k > o->size - from) k = o->size - from;
    memcpy(buf + at, o->data + from, k);
    break;
  }
  }
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s CORPUS_DIR [ITERATIONS]\n", argv[0]);
    return 2;
  }
  long iters = 0;
  if (argc == 3) {
    char *end;
    errno = 0;
    iters = strtol(argv[2], &end, 10);
    if (errno || *end || end == argv[2] || iters < 0) {
      fprintf(stderr, "%s: bad iteration count '%s'\n", argv[0], argv[2]);
      return 2;
    }
  }
  Seeds s = {0};
  load_corpus(argv[1], &s);
  if (s.n == 0) {
    uint8_t *empty = malloc(1);
    if (!empty) abort();
    seeds_add(&s, empty, 0);
  }
  for (size_t i = 0; i < s.n; i++) run_one(s.v[i].data, s.v[i].size);

  uint8_t *buf = NULL;
  size_t cap = 0;
  for (long it = 0; it < iters; it++) {
    const Input *seed = &s.v[rng_below(s.n)];
    buf = reserve(buf, &cap, 0, seed->size + 1);
    size_t size = seed->size;
    if (size) memcpy(buf, seed->data, size);
    int k = 1 + (int)rng_below(4);
    for (int m = 0; m < k; m++) buf = mutate_once(buf, &size, &cap, &s);
    run_one(buf, size);
  }
  free(buf);
  for (size_t i = 0; i < s.n; i++) free(s.v[i].data);
  free(s.v);
  printf("%zu passed, 0 failed\n", n_run);
  return 0;
}
