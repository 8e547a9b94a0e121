/* runtime/rt_tokenizer.c — GPT-2 byte-level BPE and BERT WordPiece (see
 * rt_tokenizer.h).
 *
 * Invariants: a loaded tokenizer is immutable (encode/decode only read it,
 * so threads may share one); every id it hands out is < rt_tokenizer_size
 * and has a token; GPT-2 tokens are stored as their raw bytes, so encoding
 * and decoding never touch the bytes-to-unicode symbols after loading and
 * decode(encode(x)) == x holds byte for byte; every refusal is a message in
 * err and leaves nothing allocated. Libc only, C99. */
#include "runtime/rt_tokenizer.h"

#include "runtime/rt_json.h"
#include "runtime/rt_model.h"
#include "runtime/rt_text.h"
#include "runtime/rt_unicode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDPIECE_MAX_CHARS 100 /* BertTokenizer's max_input_chars_per_word */
#define NO_TOKEN ((size_t)-1)

struct RtTokenizer {
  RtTokenizerKind kind;
  int uncased;
  int64_t n;          /* ids 0..n-1 */
  char *pool;         /* every token, NUL-terminated */
  size_t *off, *len;  /* id -> its token in pool; off NO_TOKEN when id has none */
  int32_t *slots;     /* token -> id: open addressing, -1 empty */
  size_t n_slots;     /* a power of two */
  /* gpt2 */
  int32_t byte_id[256]; /* the id of each single byte */
  uint64_t *merge_key;  /* ((left << 32) | right) + 1; 0 empty */
  int32_t *merge_rank, *merge_id;
  size_t n_merge_slots;
  /* wordpiece */
  int32_t unk, cls, sep;
};

/* ---- small pieces ---- */

typedef struct IdBuf {
  int32_t *v;
  int64_t n, cap;
} IdBuf;

static int ids_push(IdBuf *b, int32_t id) {
  if (b->n == b->cap) {
    int64_t cap = b->cap ? 2 * b->cap : 64;
    int32_t *v = realloc(b->v, (size_t)cap * sizeof *v);
    if (!v)
      return 1;
    b->v = v;
    b->cap = cap;
  }
  b->v[b->n++] = id;
  return 0;
}

typedef struct Bytes {
  char *p;
  size_t n, cap;
} Bytes;

static int bytes_put(Bytes *b, const void *s, size_t n) {
  if (b->cap - b->n < n + 1) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
      return 1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211u;
  return h ^ (h >> 29);
}

static int64_t token_id(const RtTokenizer *t, const char *s, size_t n) {
  size_t mask = t->n_slots - 1;
  for (size_t i = (size_t)hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
    int32_t id = t->slots[i];
    if (id < 0)
      return -1;
    if (t->len[id] == n && memcmp(t->pool + t->off[id], s, n) == 0)
      return id;
  }
}

static int read_file(const char *path, char **text, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return rt_errorf(err, errlen, "cannot read %s: %s", path, strerror(errno));
  Bytes b = {0};
  char chunk[65536];
  size_t got;
  int bad = 0;
  while (!bad && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
    bad = bytes_put(&b, chunk, got);
  if (!bad && !b.p)
    bad = bytes_put(&b, "", 0);
  int io = ferror(f);
  int saved = errno;
  fclose(f);
  if (bad || io) {
    free(b.p);
    return bad ? rt_errorf(err, errlen, "%s: out of memory", path)
               : rt_errorf(err, errlen, "cannot read %s: %s", path, strerror(saved));
  }
  *text = b.p;
  *len = b.n;
  return 0;
}

/* Builds off/len/slots for ids 0..n-1 from entries (id[k], tok_off[k],
 * tok_len[k]) into t->pool. Refuses an id given twice or a token given
 * twice. */
static int index_tokens(RtTokenizer *t, const int32_t *id, const size_t *tok_off,
                        const size_t *tok_len, int64_t count, const char *path, char *err,
                        size_t errlen) {
  int64_t n = 0;
  for (int64_t k = 0; k < count; k++)
    if (id[k] + (int64_t)1 > n)
      n = id[k] + (int64_t)1;
  t->n = n;
  t->off = malloc((size_t)(n ? n : 1) * sizeof *t->off);
  t->len = malloc((size_t)(n ? n : 1) * sizeof *t->len);
  t->n_slots = 16;
  while (t->n_slots < 2 * (size_t)count)
    t->n_slots *= 2;
  t->slots = malloc(t->n_slots * sizeof *t->slots);
  if (!t->off || !t->len || !t->slots)
    return rt_errorf(err, errlen, "%s: out of memory", path);
  for (int64_t i = 0; i < n; i++)
    t->off[i] = NO_TOKEN, t->len[i] = 0;
  memset(t->slots, 0xff, t->n_slots * sizeof *t->slots);
  for (int64_t k = 0; k < count; k++) {
    if (t->off[id[k]] != NO_TOKEN)
      return rt_errorf(err, errlen, "%s: id %d is given twice", path, (int)id[k]);
    const char *s = t->pool + tok_off[k];
    if (token_id(t, s, tok_len[k]) >= 0)
      return rt_errorf(err, errlen, "%s: token '%s' is given twice", path, s);
    t->off[id[k]] = tok_off[k];
    t->len[id[k]] = tok_len[k];
    size_t mask = t->n_slots - 1, i = (size_t)hash_bytes(s, tok_len[k]) & mask;
    while (t->slots[i] >= 0)
      i = (i + 1) & mask;
    t->slots[i] = id[k];
  }
  return 0;
}

void rt_tokenizer_destroy(RtTokenizer *t) {
  if (!t)
    return;
  free(t->pool);
  free(t->off);
  free(t->len);
  free(t->slots);
  free(t->merge_key);
  free(t->merge_rank);
  free(t->merge_id);
  free(t);
}

RtTokenizerKind rt_tokenizer_kind(const RtTokenizer *t) { return t->kind; }
int64_t rt_tokenizer_size(const RtTokenizer *t) { return t->n; }

const char *rt_tokenizer_token(const RtTokenizer *t, int64_t id, size_t *len) {
  if (!t || id < 0 || id >= t->n || t->off[id] == NO_TOKEN)
    return NULL;
  if (len)
    *len = t->len[id];
  return t->pool + t->off[id];
}

/* ---- GPT-2: loading ---- */

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
 * others (0..32, 127..160, 173) for U+0100.. in byte order. */
static void byte_symbols(uint32_t sym[256], int cp_byte[324]) {
  int k = 0;
  for (int c = 0; c < 324; c++)
    cp_byte[c] = -1;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    sym[b] = printable ? (uint32_t)b : (uint32_t)(256 + k++);
    cp_byte[sym[b]] = b;
  }
}

/* Appends the raw bytes a token of symbols s[0..n) stands for to *b;
 * returns 1 when a symbol is not a byte's. */
static int symbols_to_bytes(const int cp_byte[324], const char *s, size_t n, Bytes *b, int *oom) {
  size_t at = 0;
  *oom = 0;
  while (at < n) {
    uint32_t cp;
    at += rt_utf8_decode(s + at, n - at, &cp);
    if (cp >= 324 || cp_byte[cp] < 0)
      return 1;
    char c = (char)cp_byte[cp];
    if (bytes_put(b, &c, 1))
      return *oom = 1;
  }
  return 0;
}

static int load_vocab_json(RtTokenizer *t, const int cp_byte[324], const char *path, char *err,
                           size_t errlen) {
  char *text;
  size_t text_len;
  if (read_file(path, &text, &text_len, err, errlen))
    return 1;
  Bytes pool = {0};
  int32_t *ids = NULL;
  size_t *offs = NULL, *lens = NULL, cap = 0, count = 0;
  int rc = 1;
  RtJsonReader r;
  rt_json_reader_init(&r, text, text_len);
  const char *key;
  size_t klen;
  int done = 0;
  if (rt_json_object_begin(&r))
    goto json_fail;
  while (!rt_json_object_next(&r, &key, &klen, &done) && !done) {
    RtJsonNumber num;
    if (rt_json_read_number(&r, &num))
      goto json_fail;
    if (num.negative || !num.exact || num.magnitude > 0x7fffffff) {
      rt_errorf(err, errlen, "%s: the id of token '%s' is not an id in 0..2^31-1", path, key);
      goto done;
    }
    if (count == cap) {
      cap = cap ? 2 * cap : 1024;
      int32_t *ni = realloc(ids, cap * sizeof *ids);
      ids = ni ? ni : ids;
      size_t *no = ni ? realloc(offs, cap * sizeof *offs) : NULL;
      offs = no ? no : offs;
      size_t *nl = no ? realloc(lens, cap * sizeof *lens) : NULL;
      lens = nl ? nl : lens;
      if (!nl) {
        rt_errorf(err, errlen, "%s: out of memory", path);
        goto done;
      }
    }
    size_t start = pool.n;
    int oom;
    if (symbols_to_bytes(cp_byte, key, klen, &pool, &oom)) {
      if (oom)
        rt_errorf(err, errlen, "%s: out of memory", path);
      else
        rt_errorf(err, errlen, "%s: token '%s' is not made of GPT-2 byte symbols", path, key);
      goto done;
    }
    if (bytes_put(&pool, "", 1)) { /* the NUL after the token */
      rt_errorf(err, errlen, "%s: out of memory", path);
      goto done;
    }
    ids[count] = (int32_t)num.magnitude;
    offs[count] = start;
    lens[count] = pool.n - 1 - start;
    count++;
  }
  if (r.failed || rt_json_finish(&r))
    goto json_fail;
  if (count == 0) {
    rt_errorf(err, errlen, "%s: no tokens", path);
    goto done;
  }
  t->pool = pool.p;
  pool.p = NULL;
  rc = index_tokens(t, ids, offs, lens, (int64_t)count, path, err, errlen);
  goto done;
json_fail:
  rt_errorf(err, errlen, "%s: byte %zu: %s (expected a JSON object of token: id)", path,
            r.err_pos, r.msg);
done:
  rt_json_reader_free(&r);
  free(pool.p);
  free(ids);
  free(offs);
  free(lens);
  free(text);
  return rc;
}

static uint64_t hash_pair(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdu;
  key ^= key >> 33;
  return key;
}

/* The merge of the pair (a, b): its rank, or -1 when there is none. */
static int32_t merge_find(const RtTokenizer *t, int32_t a, int32_t b, int32_t *merged) {
  uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; /* + 1: 0 is empty */
  size_t mask = t->n_merge_slots - 1;
  for (size_t i = (size_t)hash_pair(key) & mask;; i = (i + 1) & mask) {
    if (t->merge_key[i] == 0)
      return -1;
    if (t->merge_key[i] == key) {
      *merged = t->merge_id[i];
      return t->merge_rank[i];
    }
  }
}

static int load_merges(RtTokenizer *t, const int cp_byte[324], const char *path, char *err,
                       size_t errlen) {
  RtVocab lines;
  if (rt_text_vocab_load(path, &lines, err, errlen))
    return 1;
  t->n_merge_slots = 16;
  while (t->n_merge_slots < 2 * (size_t)lines.n)
    t->n_merge_slots *= 2;
  t->merge_key = calloc(t->n_merge_slots, sizeof *t->merge_key);
  t->merge_rank = malloc(t->n_merge_slots * sizeof *t->merge_rank);
  t->merge_id = malloc(t->n_merge_slots * sizeof *t->merge_id);
  Bytes side[2] = {{0}, {0}};
  int rc = 1;
  if (!t->merge_key || !t->merge_rank || !t->merge_id) {
    rt_errorf(err, errlen, "%s: out of memory", path);
    goto done;
  }
  int32_t rank = 0;
  for (int64_t k = 0; k < lines.n; k++) {
    const char *line = lines.tok[k];
    if (!*line || (k == 0 && line[0] == '#')) /* "#version: 0.2", blank lines */
      continue;
    const char *sp = strchr(line, ' ');
    if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' ')) {
      rt_errorf(err, errlen, "%s:%lld: expected two tokens separated by one space", path,
                (long long)k + 1);
      goto done;
    }
    int32_t id[3];
    const char *part[2] = {line, sp + 1};
    size_t plen[2] = {(size_t)(sp - line), strlen(sp + 1)};
    for (int s = 0; s < 2; s++) {
      int oom;
      side[s].n = 0;
      if (symbols_to_bytes(cp_byte, part[s], plen[s], &side[s], &oom)) {
        rt_errorf(err, errlen, oom ? "%s: out of memory" : "%s:%lld: not GPT-2 byte symbols",
                  path, (long long)k + 1);
        goto done;
      }
      int64_t found = token_id(t, side[s].p, side[s].n);
      if (found < 0) {
        rt_errorf(err, errlen, "%s:%lld: '%.*s' is not in vocab.json", path, (long long)k + 1,
                  (int)plen[s], part[s]);
        goto done;
      }
      id[s] = (int32_t)found;
    }
    if (bytes_put(&side[0], side[1].p, side[1].n)) {
      rt_errorf(err, errlen, "%s: out of memory", path);
      goto done;
    }
    int64_t merged = token_id(t, side[0].p, side[0].n);
    if (merged < 0) {
      rt_errorf(err, errlen, "%s:%lld: the merge of '%s' is not in vocab.json", path,
                (long long)k + 1, line);
      goto done;
    }
    id[2] = (int32_t)merged;
    uint64_t key = ((uint64_t)(uint32_t)id[0] << 32 | (uint32_t)id[1]) + 1;
    size_t mask = t->n_merge_slots - 1, i = (size_t)hash_pair(key) & mask;
    while (t->merge_key[i] != 0 && t->merge_key[i] != key)
      i = (i + 1) & mask;
    if (t->merge_key[i] == 0) { /* a repeated pair keeps its first (lowest) rank */
      t->merge_key[i] = key;
      t->merge_rank[i] = rank;
      t->merge_id[i] = id[2];
    }
    rank++;
  }
  rc = 0;
done:
  free(side[0].p);
  free(side[1].p);
  rt_text_vocab_free(&lines);
  return rc;
}

int rt_tokenizer_load_gpt2(const char *vocab_json, const char *merges_txt, RtTokenizer **out,
                           char *err, size_t errlen) {
  *out = NULL;
  RtTokenizer *t = calloc(1, sizeof *t);
  if (!t)
    return rt_errorf(err, errlen, "out of memory");
  t->kind = RT_TOKENIZER_GPT2;
  uint32_t sym[256];
  int cp_byte[324];
  byte_symbols(sym, cp_byte);
  if (load_vocab_json(t, cp_byte, vocab_json, err, errlen) ||
      load_merges(t, cp_byte, merges_txt, err, errlen)) {
    rt_tokenizer_destroy(t);
    return 1;
  }
  for (int b = 0; b < 256; b++) {
    char c = (char)b;
    int64_t id = token_id(t, &c, 1);
    if (id < 0) {
      char s[4];
      size_t n = rt_utf8_encode(sym[b], s);
      rt_tokenizer_destroy(t);
      return rt_errorf(err, errlen, "%s: byte 0x%02x (symbol '%.*s') has no token", vocab_json, b,
                       (int)n, s);
    }
    t->byte_id[b] = (int32_t)id;
  }
  *out = t;
  return 0;
}

/* ---- GPT-2: encoding ---- */

/* The end of the pre-token starting at c[i] (i < n): the first alternative
 * of 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * that matches, as a backtracking regex engine takes it. */
static size_t gpt2_piece_end(const uint32_t *c, size_t n, size_t i) {
  if (c[i] == '\'' && i + 1 < n) {
    uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
      return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
      return i + 3;
  }
  size_t j = i + (c[i] == ' ' && i + 1 < n ? 1 : 0); /* the optional leading space */
  if (rt_uc_is_letter(c[j])) {
    while (j < n && rt_uc_is_letter(c[j]))
      j++;
    return j;
  }
  if (rt_uc_is_number(c[j])) {
    while (j < n && rt_uc_is_number(c[j]))
      j++;
    return j;
  }
  if (!rt_uc_is_space(c[j])) {
    while (j < n && !rt_uc_is_space(c[j]) && !rt_uc_is_letter(c[j]) && !rt_uc_is_number(c[j]))
      j++;
    return j;
  }
  /* c[i] is whitespace: \s+(?!\S) leaves the last space of a run that a
   * non-space follows to the next piece; \s+ takes a lone one */
  size_t k = i;
  while (k < n && rt_uc_is_space(c[k]))
    k++;
  return k < n && k - 1 > i ? k - 1 : k;
}

/* BPE over one pre-token's bytes: merges the lowest-ranked adjacent pair,
 * every occurrence left to right, until no pair has a merge. sym has room
 * for n ids. */
static int gpt2_bpe(const RtTokenizer *t, const unsigned char *b, size_t n, int32_t *sym,
                    IdBuf *out) {
  for (size_t i = 0; i < n; i++)
    sym[i] = t->byte_id[b[i]];
  size_t m = n;
  while (m > 1) {
    int32_t best = -1, best_a = 0, best_b = 0, best_id = 0, merged;
    for (size_t i = 0; i + 1 < m; i++) {
      int32_t r = merge_find(t, sym[i], sym[i + 1], &merged);
      if (r >= 0 && (best < 0 || r < best))
        best = r, best_a = sym[i], best_b = sym[i + 1], best_id = merged;
    }
    if (best < 0)
      break;
    size_t w = 0;
    for (size_t i = 0; i < m;) {
      if (i + 1 < m && sym[i] == best_a && sym[i + 1] == best_b) {
        sym[w++] = best_id;
        i += 2;
      } else {
        sym[w++] = sym[i++];
      }
    }
    m = w;
  }
  for (size_t i = 0; i < m; i++)
    if (ids_push(out, sym[i]))
      return 1;
  return 0;
}

/* text as code points: cps[k] starts at byte at[k]; at[n] = len */
static int decode_all(const char *text, size_t len, uint32_t **cps, size_t **at, size_t *n,
                      char *err, size_t errlen) {
  size_t bad;
  if (!rt_utf8_valid(text, len, &bad))
    return rt_errorf(err, errlen, "the text is not valid UTF-8 (at byte offset %zu)", bad);
  *cps = malloc((len + 1) * sizeof **cps);
  if (at)
    *at = malloc((len + 1) * sizeof **at);
  if (!*cps || (at && !*at)) {
    free(*cps);
    if (at)
      free(*at);
    return rt_errorf(err, errlen, "out of memory");
  }
  size_t k = 0, i = 0;
  while (i < len) {
    if (at)
      (*at)[k] = i;
    i += rt_utf8_decode(text + i, len - i, &(*cps)[k]);
    k++;
  }
  if (at)
    (*at)[k] = len;
  *n = k;
  return 0;
}

static int gpt2_encode(const RtTokenizer *t, const char *text, size_t len, IdBuf *out, char *err,
                       size_t errlen) {
  uint32_t *c;
  size_t *at, n;
  if (decode_all(text, len, &c, &at, &n, err, errlen))
    return 1;
  int32_t *sym = malloc((len ? len : 1) * sizeof *sym);
  int rc = sym ? 0 : 1;
  for (size_t i = 0; i < n && !rc;) {
    size_t e = gpt2_piece_end(c, n, i);
    rc = gpt2_bpe(t, (const unsigned char *)text + at[i], at[e] - at[i], sym, out);
    i = e;
  }
  free(sym);
  free(c);
  free(at);
  return rc ? rt_errorf(err, errlen, "out of memory") : 0;
}

/* ---- WordPiece ---- */

int rt_tokenizer_load_wordpiece(const char *vocab_txt, int uncased, RtTokenizer **out, char *err,
                                size_t errlen) {
  *out = NULL;
  RtVocab v;
  if (rt_text_vocab_load(vocab_txt, &v, err, errlen))
    return 1;
  RtTokenizer *t = calloc(1, sizeof *t);
  int32_t *ids = malloc((size_t)(v.n ? v.n : 1) * sizeof *ids);
  size_t *offs = malloc((size_t)(v.n ? v.n : 1) * sizeof *offs);
  size_t *lens = malloc((size_t)(v.n ? v.n : 1) * sizeof *lens);
  int rc = 1;
  if (!t || !ids || !offs || !lens) {
    rt_errorf(err, errlen, "%s: out of memory", vocab_txt);
    goto done;
  }
  t->kind = RT_TOKENIZER_WORDPIECE;
  t->uncased = uncased;
  if (v.n == 0) {
    rt_errorf(err, errlen, "%s: no tokens", vocab_txt);
    goto done;
  }
  /* the vocabulary's lines (NUL-terminated in place) become the pool */
  for (int64_t k = 0; k < v.n; k++) {
    ids[k] = (int32_t)k;
    offs[k] = (size_t)(v.tok[k] - v.text);
    lens[k] = strlen(v.tok[k]);
  }
  t->pool = v.text;
  v.text = NULL;
  if (index_tokens(t, ids, offs, lens, v.n, vocab_txt, err, errlen))
    goto done;
  const char *need[3] = {"[UNK]", "[CLS]", "[SEP]"};
  int32_t *slot[3] = {&t->unk, &t->cls, &t->sep};
  for (int s = 0; s < 3; s++) {
    int64_t id = token_id(t, need[s], strlen(need[s]));
    if (id < 0) {
      rt_errorf(err, errlen, "%s: no %s token", vocab_txt, need[s]);
      goto done;
    }
    *slot[s] = (int32_t)id;
  }
  *out = t;
  t = NULL;
  rc = 0;
done:
  rt_tokenizer_destroy(t);
  free(ids);
  free(offs);
  free(lens);
  free(v.text);
  free(v.tok);
  return rc;
}

static int bert_is_control(uint32_t c) {
  if (c == '\t' || c == '\n' || c == '\r')
    return 0;
  RtUcCategory k = rt_uc_category(c);
  return k >= RT_UC_CC && k <= RT_UC_CN;
}

static int bert_is_whitespace(uint32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || rt_uc_category(c) == RT_UC_ZS;
}

static int bert_is_punctuation(uint32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return 1;
  RtUcCategory k = rt_uc_category(c);
  return k >= RT_UC_PC && k <= RT_UC_PO;
}

/* The CJK Unified Ideographs blocks BertTokenizer puts spaces around. */
static int bert_is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int is_cased(uint32_t c) {
  RtUcCategory k = rt_uc_category(c);
  return k == RT_UC_LU || k == RT_UC_LL || k == RT_UC_LT;
}

/* Case_Ignorable, near enough: marks, format, modifiers, and the word-inner
 * punctuation Unicode lists (' . : · ’ ‧ ...). */
static int is_case_ignorable(uint32_t c) {
  RtUcCategory k = rt_uc_category(c);
  return k == RT_UC_MN || k == RT_UC_ME || k == RT_UC_CF || k == RT_UC_LM || k == RT_UC_SK ||
         c == 0x27 || c == 0x2E || c == 0x3A || c == 0xB7 || c == 0x2018 || c == 0x2019 ||
         c == 0x2024 || c == 0x2027 || c == 0xFE13 || c == 0xFE52 || c == 0xFE55 ||
         c == 0xFF07 || c == 0xFF0E || c == 0xFF1A;
}

/* str.lower() over w[0..n): simple lowercase, with Final_Sigma (a capital
 * sigma after a cased letter and before none becomes final sigma). U+0130's
 * full lowercase is i + U+0307; only used before accents are stripped. */
static void lower_word(uint32_t *w, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (w[i] != 0x3A3) {
      w[i] = rt_uc_lower(w[i]);
      continue;
    }
    size_t j = i;
    while (j > 0 && is_case_ignorable(w[j - 1]))
      j--;
    int before = j > 0 && is_cased(w[j - 1]);
    j = i + 1;
    while (j < n && is_case_ignorable(w[j]))
      j++;
    int after = j < n && is_cased(w[j]);
    w[i] = before && !after ? 0x3C2 : 0x3C3;
  }
}

/* Greedy longest-match-first WordPiece of one word w[0..n) (n >= 1). */
static int wordpiece_word(const RtTokenizer *t, const uint32_t *w, size_t n, Bytes *buf,
                          Bytes *key, IdBuf *out) {
  if (n > WORDPIECE_MAX_CHARS)
    return ids_push(out, t->unk);
  size_t off[WORDPIECE_MAX_CHARS + 1];
  buf->n = 0;
  for (size_t i = 0; i < n; i++) {
    char s[4];
    off[i] = buf->n;
    if (bytes_put(buf, s, rt_utf8_encode(w[i], s)))
      return 1;
  }
  off[n] = buf->n;
  int64_t first = out->n;
  for (size_t start = 0; start < n;) {
    int64_t found = -1;
    size_t end = n;
    for (; end > start; end--) {
      key->n = 0;
      if ((start > 0 && bytes_put(key, "##", 2)) ||
          bytes_put(key, buf->p + off[start], off[end] - off[start]))
        return 1;
      if ((found = token_id(t, key->p, key->n)) >= 0)
        break;
    }
    if (found < 0) { /* the whole word is unknown */
      out->n = first;
      return ids_push(out, t->unk);
    }
    if (ids_push(out, (int32_t)found))
      return 1;
    start = end;
  }
  return 0;
}

/* The basic tokenizer and WordPiece over one piece of text without
 * special tokens. */
static int wordpiece_segment(const RtTokenizer *t, const char *text, size_t len, IdBuf *out,
                             char *err, size_t errlen) {
  uint32_t *in;
  size_t n;
  if (decode_all(text, len, &in, NULL, &n, err, errlen))
    return 1;
  /* clean text (drop NUL, U+FFFD, controls; whitespace to spaces) and put
   * spaces around CJK ideographs: at most 3 code points for each */
  uint32_t *c = malloc((3 * n + 1) * sizeof *c);
  if (!c) {
    free(in);
    return rt_errorf(err, errlen, "out of memory");
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t x = in[i];
    if (x == 0 || x == 0xFFFD || bert_is_control(x))
      continue;
    if (bert_is_cjk(x)) {
      c[m++] = ' ';
      c[m++] = x;
      c[m++] = ' ';
    } else {
      c[m++] = bert_is_whitespace(x) ? ' ' : x;
    }
  }
  free(in);
  Bytes buf = {0}, key = {0};
  uint32_t *word = NULL;
  size_t word_cap = 0;
  int rc = 0;
  for (size_t i = 0; i < m && !rc;) {
    if (rt_uc_is_space(c[i])) {
      i++;
      continue;
    }
    size_t s = i;
    while (i < m && !rt_uc_is_space(c[i]))
      i++;
    size_t wn = i - s;
    if (word_cap < wn * RT_UC_NFD_MAX) {
      free(word);
      word_cap = wn * RT_UC_NFD_MAX;
      if (!(word = malloc(word_cap * sizeof *word))) {
        rc = 1;
        break;
      }
    }
    memcpy(word, c + s, wn * sizeof *word);
    if (t->uncased) { /* lowercase, then strip accents: NFD, drop Mn */
      lower_word(word, wn);
      wn = rt_uc_nfd(word, wn, word_cap);
      size_t k = 0;
      for (size_t j = 0; j < wn; j++)
        if (rt_uc_category(word[j]) != RT_UC_MN)
          word[k++] = word[j];
      wn = k;
    }
    /* punctuation characters are words of their own */
    for (size_t j = 0; j < wn && !rc;) {
      size_t e = j + 1;
      if (!bert_is_punctuation(word[j]))
        while (e < wn && !bert_is_punctuation(word[e]))
          e++;
      rc = wordpiece_word(t, word + j, e - j, &buf, &key, out);
      j = e;
    }
  }
  free(word);
  free(buf.p);
  free(key.p);
  free(c);
  return rc ? rt_errorf(err, errlen, "out of memory") : 0;
}

typedef int (*SegmentFn)(const RtTokenizer *t, const char *text, size_t len, IdBuf *out,
                         char *err, size_t errlen);

/* Special tokens written in the text stay whole wherever they are (those
 * of specials[0..n) the vocabulary has; the longest at each place), as
 * Hugging Face's tokenizers split on added tokens before anything else;
 * the pieces between go through segment. */
static int encode_split(const RtTokenizer *t, const char *text, size_t len,
                        const char *const *specials, int n, SegmentFn segment, IdBuf *out,
                        char *err, size_t errlen) {
  size_t bad;
  if (!rt_utf8_valid(text, len, &bad))
    return rt_errorf(err, errlen, "the text is not valid UTF-8 (at byte offset %zu)", bad);
  int64_t special_id[8];
  for (int k = 0; k < n && k < 8; k++)
    special_id[k] = token_id(t, specials[k], strlen(specials[k]));
  size_t from = 0;
  for (size_t i = 0; i <= len;) {
    int hit = -1;
    size_t hit_len = 0;
    for (int k = 0; k < n && k < 8 && i < len; k++) {
      size_t sl = strlen(specials[k]);
      if (special_id[k] >= 0 && sl > hit_len && len - i >= sl &&
          memcmp(text + i, specials[k], sl) == 0)
        hit = k, hit_len = sl;
    }
    if (hit < 0 && i < len) {
      i++;
      continue;
    }
    if (i > from && segment(t, text + from, i - from, out, err, errlen))
      return 1;
    if (hit < 0)
      break;
    if (ids_push(out, (int32_t)special_id[hit]))
      return rt_errorf(err, errlen, "out of memory");
    i += hit_len;
    from = i;
  }
  return 0;
}

/* ---- the entry points ---- */

int rt_tokenizer_encode(const RtTokenizer *t, const char *text, size_t len, int32_t **ids,
                        int64_t *n, char *err, size_t errlen) {
  static const char *const gpt2_specials[] = {"<|endoftext|>"};
  static const char *const bert_specials[] = {"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"};
  IdBuf out = {0};
  *ids = NULL;
  *n = 0;
  int rc;
  if (t->kind == RT_TOKENIZER_GPT2) {
    rc = encode_split(t, text, len, gpt2_specials, 1, gpt2_encode, &out, err, errlen);
  } else {
    if (ids_push(&out, t->cls))
      rc = rt_errorf(err, errlen, "out of memory");
    else if (encode_split(t, text, len, bert_specials, 5, wordpiece_segment, &out, err, errlen))
      rc = 1;
    else if (ids_push(&out, t->sep))
      rc = rt_errorf(err, errlen, "out of memory");
    else
      rc = 0;
  }
  if (rc) {
    free(out.v);
    return 1;
  }
  int64_t count = out.n;
  if (!out.v && ids_push(&out, 0)) /* never NULL on success */
    return rt_errorf(err, errlen, "out of memory");
  *ids = out.v;
  *n = count;
  return 0;
}

int rt_tokenizer_decode(const RtTokenizer *t, const int32_t *ids, int64_t n, char **text,
                        size_t *len, char *err, size_t errlen) {
  Bytes b = {0};
  *text = NULL;
  *len = 0;
  int oom = bytes_put(&b, "", 0);
  for (int64_t k = 0; k < n && !oom; k++) {
    size_t tl;
    const char *tok = rt_tokenizer_token(t, ids[k], &tl);
    if (!tok) {
      free(b.p);
      return rt_errorf(err, errlen, "id %d is not in the tokenizer's vocabulary (%lld ids)",
                       (int)ids[k], (long long)t->n);
    }
    if (t->kind == RT_TOKENIZER_WORDPIECE && k > 0)
      oom = bytes_put(&b, " ", 1);
    if (!oom)
      oom = bytes_put(&b, tok, tl);
  }
  if (!oom && t->kind == RT_TOKENIZER_WORDPIECE) {
    /* convert_tokens_to_string: " ".join(tokens).replace(" ##", "").strip() */
    size_t w = 0;
    for (size_t r = 0; r < b.n;) {
      if (b.n - r >= 3 && memcmp(b.p + r, " ##", 3) == 0) {
        r += 3;
        continue;
      }
      b.p[w++] = b.p[r++];
    }
    size_t s = 0;
    while (s < w && strchr(" \t\n\r\f\v", b.p[s]))
      s++;
    while (w > s && strchr(" \t\n\r\f\v", b.p[w - 1]))
      w--;
    memmove(b.p, b.p + s, w - s);
    b.n = w - s;
    b.p[b.n] = '\0';
  }
  if (oom) {
    free(b.p);
    return rt_errorf(err, errlen, "out of memory");
  }
  *text = b.p;
  *len = b.n;
  return 0;
}

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

void rt_tokenizer_files_free(RtTokenizerFiles *f) {
  free(f->files[0]);
  free(f->files[1]);
  memset(f, 0, sizeof *f);
}

int rt_tokenizer_files(const char *spec, RtTokenizerFiles *f, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  const char *usage = "expected gpt2:DIR, gpt2:VOCAB.json[,MERGES.txt] or "
                      "wordpiece:VOCAB.txt[:uncased]";
  if (strncmp(spec, "wordpiece:", 10) == 0) {
    const char *p = spec + 10;
    size_t n = strlen(p);
    if (ends_with(p, n, ":uncased"))
      f->uncased = 1, n -= 8;
    else if (ends_with(p, n, ":cased"))
      n -= 6;
    if (n == 0)
      return rt_errorf(err, errlen, "tokenizer '%s': no vocab.txt (%s)", spec, usage);
    f->kind = RT_TOKENIZER_WORDPIECE;
    f->n = 1;
    if (!(f->files[0] = malloc(n + 1)))
      return rt_errorf(err, errlen, "out of memory");
    memcpy(f->files[0], p, n);
    f->files[0][n] = '\0';
    return 0;
  }
  if (strncmp(spec, "gpt2:", 5) != 0)
    return rt_errorf(err, errlen, "unknown tokenizer '%s' (%s)", spec, usage);
  const char *p = spec + 5, *comma = strchr(p, ',');
  size_t n = strlen(p);
  if (n == 0 || comma == p || (comma && !comma[1]))
    return rt_errorf(err, errlen, "tokenizer '%s': %s", spec, usage);
  char *vocab = malloc(n + sizeof "/vocab.json"), *merges = malloc(n + sizeof "/merges.txt");
  f->kind = RT_TOKENIZER_GPT2;
  f->n = 2;
  f->files[0] = vocab;
  f->files[1] = merges;
  if (!vocab || !merges) {
    rt_tokenizer_files_free(f);
    return rt_errorf(err, errlen, "out of memory");
  }
  if (comma) { /* VOCAB.json,MERGES.txt */
    memcpy(vocab, p, (size_t)(comma - p));
    vocab[comma - p] = '\0';
    strcpy(merges, comma + 1);
  } else if (ends_with(p, n, ".json")) { /* VOCAB.json: merges.txt beside it */
    strcpy(vocab, p);
    const char *slash = strrchr(p, '/');
    size_t dir = slash ? (size_t)(slash - p) + 1 : 0;
    memcpy(merges, p, dir);
    strcpy(merges + dir, "merges.txt");
  } else { /* DIR */
    size_t d = n;
    while (d > 1 && p[d - 1] == '/')
      d--;
    memcpy(vocab, p, d);
    strcpy(vocab + d, "/vocab.json");
    memcpy(merges, p, d);
    strcpy(merges + d, "/merges.txt");
  }
  return 0;
}

int rt_tokenizer_load(const char *spec, RtTokenizer **out, char *err, size_t errlen) {
  *out = NULL;
  RtTokenizerFiles f;
  if (rt_tokenizer_files(spec, &f, err, errlen)) return 1;
  int rc = f.kind == RT_TOKENIZER_WORDPIECE
               ? rt_tokenizer_load_wordpiece(f.files[0], f.uncased, out, err, errlen)
               : rt_tokenizer_load_gpt2(f.files[0], f.files[1], out, err, errlen);
  rt_tokenizer_files_free(&f);
  return rc;
}
