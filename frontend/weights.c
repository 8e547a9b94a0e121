/* frontend/weights.c — a checkpoint's tensors -> the graph's params, through
 * the spec's weight map (README "Weight maps"), and deterministic random
 * weights for runs without a checkpoint.
 *
 * Every IR_OP_PARAM node of the graph is one canonical parameter
 * ("enc.0.attn.q.weight"). Its group is the name without the last component
 * ("enc.0.attn.q"), and the group's weight-map target replaces a layer index
 * after the first component by [i] ("enc[i].attn.q", layer 0). For each param
 * the first rule of the map (explicit rules come before preset rules) whose
 * target is the param's target, or for q/k/v the `.qkv` target of the same
 * attention, says which checkpoint tensor(s) hold it and how they are laid
 * out; the transform turns them into the PyTorch layout the graph uses
 * (linear weights [out,in]). Without a weights block every param is read
 * from the tensor of its own canonical name; with a block, a param no rule
 * covers falls back to its canonical name too.
 *
 * Invariants:
 *   - every stored tensor's dtype and shape are checked against what the
 *     transform needs before a byte of it is read;
 *   - every checkpoint tensor is either consumed by some param (or by the
 *     tied-weight check), matched by an ignore pattern, or reported as
 *     unexpected;
 *   - problems are collected and reported all at once, one diag_error each
 *     (the same missing tensor wanted by q, k and v is one error naming the
 *     three); weights_load returns NULL if there was any;
 *   - everything returned lives in the arena; stored tensors are read
 *     straight from the mapped file into it (transposed or sliced on the
 *     way), queued while the params are resolved and done at the end on a
 *     pool of the online CPUs (reads_run).
 *
 * The `root` of a preset is applied by the parser (to the preset's sources
 * and ignore patterns) when it expands the preset into rules, so rule
 * sources and ignore patterns here are final checkpoint names. */
#include "frontend/spec.h"
#include "runtime/rt_pool.h"
#include "runtime/rt_weights.h" /* rt_weights_advise_huge */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

typedef struct Shape {
  int rank;
  int64_t dims[RT_ST_MAX_RANK];
} Shape;

static Shape shape1(int64_t d0) { return (Shape){1, {d0}}; }
static Shape shape2(int64_t d0, int64_t d1) { return (Shape){2, {d0, d1}}; }

static bool shape_eq(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static int64_t shape_numel(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dims[i];
  return n;
}

/* "[64,32]"; "[]" for a scalar. */
static const char *shape_str(Arena *a, const Shape *s) {
  char buf[8 * 24 + 4];
  size_t k = 0;
  buf[k++] = '[';
  for (int i = 0; i < s->rank; i++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%lld", i ? "," : "",
                          (long long)s->dims[i]);
  buf[k++] = ']';
  buf[k] = 0;
  return arena_strdup(a, buf);
}

static Shape tensor_shape(const RtStTensor *t) {
  Shape s = {t->rank, {0}};
  for (int i = 0; i < t->rank && i < RT_ST_MAX_RANK; i++) s.dims[i] = t->shape[i];
  return s;
}

static bool dtype_is_float(RtDtype dt) {
  switch (dt) {
  case RT_F32:
  case RT_F16:
  case RT_BF16:
  case RT_F64:
    return true;
  case RT_I64:
  case RT_I32:
  case RT_I16:
  case RT_I8:
  case RT_U8:
  case RT_BOOL:
  case RT_DTYPE_COUNT:
    return false;
  }
  return false;
}

static bool str_ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool all_digits(const char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/* Replaces every occurrence of key ("{i}") in s by value (-1: s as is). */
static const char *subst(Arena *a, const char *s, const char *key,
                         int64_t value) {
  if (value < 0 || !strstr(s, key)) return s;
  char num[24];
  snprintf(num, sizeof num, "%lld", (long long)value);
  size_t kl = strlen(key), nl = strlen(num), n = 0;
  for (const char *p = s; (p = strstr(p, key)); p += kl) n++;
  char *out = arena_alloc(a, strlen(s) + n * nl + 1);
  char *o = out;
  for (const char *p = s; *p;) {
    if (strncmp(p, key, kl) == 0) {
      memcpy(o, num, nl);
      o += nl;
      p += kl;
    } else {
      *o++ = *p++;
    }
  }
  *o = 0;
  return out;
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* ---- ignore patterns: '*' any run, {i} and {h} a run of digits ----
 * Matched by dynamic programming over (pattern token, name position), so a
 * pattern like "*{i}*{i}*" costs O(len^2), never exponential time. */

typedef struct PatTok {
  char kind; /* 'c' literal char, '*' any run, 'd' one or more digits */
  char c;
} PatTok;

static bool glob_match(const char *pat, const char *name) {
  size_t pl = strlen(pat), nl = strlen(name);
  PatTok *toks = malloc((pl + 1) * sizeof *toks);
  bool *row = malloc((nl + 1) * sizeof *row), *next = malloc((nl + 1) * sizeof *next);
  bool ok = false;
  if (!toks || !row || !next) goto done;
  size_t nt = 0;
  for (size_t i = 0; i < pl;) {
    if (pat[i] == '*') {
      toks[nt++] = (PatTok){'*', 0};
      i++;
    } else if (strncmp(pat + i, "{i}", 3) == 0 || strncmp(pat + i, "{h}", 3) == 0) {
      toks[nt++] = (PatTok){'d', 0};
      i += 3;
    } else {
      toks[nt++] = (PatTok){'c', pat[i++]};
    }
  }
  /* row[j]: tokens [0, t) match name[0, j) */
  for (size_t j = 0; j <= nl; j++) row[j] = j == 0;
  for (size_t t = 0; t < nt; t++) {
    for (size_t j = 0; j <= nl; j++) {
      bool m = false;
      switch (toks[t].kind) {
      case '*':
        m = row[j] || (j > 0 && next[j - 1]);
        break;
      case 'd': /* one digit after a match, or one more digit of this run */
        m = j > 0 && name[j - 1] >= '0' && name[j - 1] <= '9' &&
            (row[j - 1] || next[j - 1]);
        break;
      default:
        m = j > 0 && name[j - 1] == toks[t].c && row[j - 1];
        break;
      }
      next[j] = m;
    }
    bool *tmp = row;
    row = next;
    next = tmp;
  }
  ok = row[nl];
done:
  free(toks);
  free(row);
  free(next);
  return ok;
}

/* ---- the graph's params ---- */

typedef struct Param {
  const char *name;   /* "enc.0.attn.q.weight" */
  const char *group;  /* "enc.0.attn.q" */
  const char *leaf;   /* "weight" */
  const char *target; /* "enc[i].attn.q" */
  int64_t layer;      /* 0 above; -1 for groups outside the layer stacks */
  Shape shape;
  IrType type;
  float *data;
  bool ok;           /* loaded with no problem */
  int64_t nonfinite; /* NaN and Inf values read into data */
} Param;

/* group "enc.12.attn.q" -> target "enc[i].attn.q", layer 12 */
static void param_split_name(Arena *a, Param *p) {
  const char *dot = strrchr(p->name, '.');
  if (!dot) {
    p->group = p->name;
    p->leaf = "";
  } else {
    p->group = arena_strndup(a, p->name, (size_t)(dot - p->name));
    p->leaf = dot + 1;
  }
  p->target = p->group;
  p->layer = -1;
  const char *d1 = strchr(p->group, '.');
  if (!d1) return;
  const char *num = d1 + 1;
  const char *d2 = strchr(num, '.');
  size_t nlen = d2 ? (size_t)(d2 - num) : strlen(num);
  if (!all_digits(num, nlen) || nlen > 9) return;
  p->layer = strtoll(num, NULL, 10);
  p->target = arena_printf(a, "%.*s[i]%s", (int)(d1 - p->group), p->group,
                           d2 ? d2 : "");
}

/* ---- problems: collected, merged by tensor, reported at the end ---- */

typedef enum ProbKind {
  PROB_MISSING,  /* tensor absent */
  PROB_SHAPE,    /* stored shape differs from what the transform needs */
  PROB_DTYPE,    /* not a float tensor */
  PROB_READ,     /* rt_st_read_f32 refused it */
  PROB_NO_BIAS,  /* rule says no bias stored; the model has one */
  PROB_NO_SOURCE,/* rule cannot supply this leaf (a 'tensor' rule for .bias) */
  PROB_BAD_FIT,  /* transform cannot produce the param's shape */
  PROB_KIND_COUNT
} ProbKind;

typedef struct Problem {
  ProbKind kind;
  IrLoc loc;
  const char *key;  /* what merges: tensor name, or rule target */
  const char *note; /* appended to the message, may be "" */
  Shape expected, found;
  RtDtype dtype;
  const char **params; /* the params that wanted it */
  int n_params, cap_params;
} Problem;

typedef struct Loader {
  Arena *a;
  Diags *d;
  const IrGraph *g;
  const Spec *spec;
  const WeightMap *map; /* NULL: canonical names */
  const RtSafetensors *st;
  Param *params;
  int n_params;
  int64_t heads;
  /* checkpoint tensors: open-addressing name -> index */
  int n_tensors;
  int *slots;
  int n_slots;
  bool *consumed;
  /* per rule */
  bool *rule_dropped; /* target absent in the model: never matches */
  bool *rule_bad;     /* reported once; params it covers are skipped */
  Problem *probs;
  int n_probs, cap_probs;
  /* reads of stored tensors, queued while the params are resolved and
   * done at the end (reads_run) */
  struct Read *reads;
  int n_reads, cap_reads;
  int cur; /* the param being resolved */
} Loader;

static void problem_add(Loader *L, ProbKind kind, IrLoc loc, const char *key,
                        const Shape *expected, const Shape *found, RtDtype dt,
                        const char *param, const char *note) {
  Shape none = {0, {0}};
  if (!expected) expected = &none;
  if (!found) found = &none;
  if (!note) note = "";
  Problem *p = NULL;
  for (int i = 0; i < L->n_probs; i++) {
    Problem *q = &L->probs[i];
    if (q->kind == kind && strcmp(q->key, key) == 0 &&
        shape_eq(&q->expected, expected) && shape_eq(&q->found, found) &&
        strcmp(q->note, note) == 0) {
      p = q;
      break;
    }
  }
  if (!p) {
    arena_grow(L->a, (void **)&L->probs, &L->cap_probs, L->n_probs + 1,
               sizeof *L->probs);
    p = &L->probs[L->n_probs++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->loc = loc;
    p->key = key;
    p->note = note;
    p->expected = *expected;
    p->found = *found;
    p->dtype = dt;
  }
  for (int i = 0; i < p->n_params; i++)
    if (strcmp(p->params[i], param) == 0) return;
  arena_grow(L->a, (void **)&p->params, &p->cap_params, p->n_params + 1,
             sizeof *p->params);
  p->params[p->n_params++] = param;
}

/* "enc.1.attn.q.bias", "enc.1.attn.k.bias" -> "enc.1.attn.q/k.bias" when the
 * names differ in one dot-separated component; else "a, b". */
static const char *params_join(Arena *a, const char **names, int n) {
  if (n == 1) return names[0];
  enum { MAXC = 32 };
  const char *comp[MAXC];
  size_t clen[MAXC];
  int nc = 0;
  for (const char *s = names[0]; nc < MAXC;) {
    const char *e = strchr(s, '.');
    comp[nc] = s;
    clen[nc++] = e ? (size_t)(e - s) : strlen(s);
    if (!e) break;
    s = e + 1;
  }
  int diff = -1;
  bool same_layout = true;
  for (int k = 1; k < n && same_layout; k++) {
    const char *s = names[k];
    for (int c = 0; c < nc; c++) {
      const char *e = strchr(s, '.');
      size_t len = e ? (size_t)(e - s) : strlen(s);
      if ((c == nc - 1) != (e == NULL)) {
        same_layout = false;
        break;
      }
      if (len != clen[c] || strncmp(s, comp[c], len) != 0) {
        if (diff >= 0 && diff != c) {
          same_layout = false;
          break;
        }
        diff = c;
      }
      s = e ? e + 1 : s + len;
    }
  }
  if (same_layout && diff >= 0) {
    const char *pre_end = comp[diff];
    const char *post = comp[diff] + clen[diff];
    char *mid = "";
    for (int k = 0; k < n; k++) {
      const char *s = names[k];
      for (int c = 0; c < diff; c++) s = strchr(s, '.') + 1;
      const char *e = strchr(s, '.');
      size_t len = e ? (size_t)(e - s) : strlen(s);
      mid = arena_printf(a, "%s%s%.*s", mid, k ? "/" : "", (int)len, s);
    }
    return arena_printf(a, "%.*s%s%s", (int)(pre_end - names[0]), names[0],
                        mid, post);
  }
  char *out = "";
  for (int k = 0; k < n; k++)
    out = arena_printf(a, "%s%s%s", out, k ? ", " : "", names[k]);
  return out;
}

static void problems_report(Loader *L) {
  for (int i = 0; i < L->n_probs; i++) {
    Problem *p = &L->probs[i];
    const char *who = params_join(L->a, p->params, p->n_params);
    const char *exp = shape_str(L->a, &p->expected);
    const char *fnd = shape_str(L->a, &p->found);
    switch (p->kind) {
    case PROB_MISSING:
      diag_error(L->d, p->loc, "missing tensor '%s' for %s, expected %s%s",
                 p->key, who, exp, p->note);
      break;
    case PROB_SHAPE:
      diag_error(L->d, p->loc,
                 "tensor '%s' has shape %s, expected %s (for %s)%s", p->key,
                 fnd, exp, who, p->note);
      break;
    case PROB_DTYPE:
      diag_error(L->d, p->loc,
                 "tensor '%s' has dtype %s, expected a floating-point tensor "
                 "(F32, F16, BF16 or F64) (for %s)",
                 p->key, rt_dtype_name(p->dtype), who);
      break;
    case PROB_READ:
      diag_error(L->d, p->loc, "cannot read tensor '%s' (for %s): %s", p->key,
                 who, p->note);
      break;
    case PROB_NO_BIAS:
      diag_error(L->d, p->loc,
                 "%s: the weight map says the checkpoint stores no bias for "
                 "'%s' (bias \"\"), but the model has a bias there",
                 who, p->key);
      break;
    case PROB_NO_SOURCE:
      diag_error(L->d, p->loc, "%s: %s", who, p->note);
      break;
    case PROB_BAD_FIT:
      diag_error(L->d, p->loc, "%s %s: %s", who, exp, p->note);
      break;
    case PROB_KIND_COUNT:
      TFMC_ASSERT(!"bad problem kind");
    }
  }
}

/* ---- checkpoint lookup ---- */

static void tensors_index(Loader *L) {
  L->n_tensors = L->st ? rt_st_count(L->st) : 0;
  L->n_slots = 16;
  while (L->n_slots < 2 * L->n_tensors) L->n_slots *= 2;
  L->slots = arena_alloc(L->a, (size_t)L->n_slots * sizeof *L->slots);
  for (int i = 0; i < L->n_slots; i++) L->slots[i] = -1;
  L->consumed = arena_alloc(L->a, (size_t)(L->n_tensors + 1) * sizeof *L->consumed);
  for (int i = 0; i < L->n_tensors; i++) {
    const RtStTensor *t = rt_st_get(L->st, i);
    size_t s = (size_t)(hash_str(t->name) & (uint64_t)(L->n_slots - 1));
    while (L->slots[s] >= 0) s = (s + 1) & (size_t)(L->n_slots - 1);
    L->slots[s] = i;
  }
}

static int tensor_find(const Loader *L, const char *name) {
  size_t s = (size_t)(hash_str(name) & (uint64_t)(L->n_slots - 1));
  while (L->slots[s] >= 0) {
    if (strcmp(rt_st_get(L->st, L->slots[s])->name, name) == 0)
      return L->slots[s];
    s = (s + 1) & (size_t)(L->n_slots - 1);
  }
  return -1;
}

/* Looks the tensor up, marks it consumed, checks dtype and shape. Returns it
 * when it can be read as `want`; otherwise records the problem and returns
 * NULL. `note` explains a missing tensor (may be NULL). */
static const RtStTensor *tensor_fetch(Loader *L, const char *name,
                                      const Shape *want, const char *param,
                                      IrLoc loc, const char *note,
                                      const char *shape_note) {
  int i = tensor_find(L, name);
  if (i < 0) {
    problem_add(L, PROB_MISSING, loc, name, want, NULL, RT_F32, param, note);
    return NULL;
  }
  L->consumed[i] = true;
  const RtStTensor *t = rt_st_get(L->st, i);
  if (!dtype_is_float(t->dtype)) {
    problem_add(L, PROB_DTYPE, loc, name, NULL, NULL, t->dtype, param, NULL);
    return NULL;
  }
  Shape have = tensor_shape(t);
  if (!shape_eq(&have, want)) {
    problem_add(L, PROB_SHAPE, loc, name, want, &have, t->dtype, param,
                shape_note);
    return NULL;
  }
  return t;
}

/* ---- reads: queued while the params are resolved, done on a pool ---- */

/* A block of a stored tensor into a param's data (rt_st_read_f32_block:
 * rows [r0, +nr) x columns [c0, +nc) of t as a matrix, transposed or not),
 * straight from the mapped file. */
typedef struct Read {
  const RtStTensor *t;
  int64_t r0, nr, c0, nc;
  int transpose;
  int64_t off; /* where the block goes in its param's data, in floats */
  int param;   /* index into L->params */
  IrLoc loc;
} Read;

/* The block into the current param's data from float off on. */
static void read_block(Loader *L, const RtStTensor *t, int64_t r0, int64_t nr, int64_t c0,
                       int64_t nc, int transpose, int64_t off, IrLoc loc) {
  arena_grow(L->a, (void **)&L->reads, &L->cap_reads, L->n_reads + 1, sizeof *L->reads);
  L->reads[L->n_reads++] = (Read){t, r0, nr, c0, nc, transpose, off, L->cur, loc};
}

/* the whole tensor, as it is stored */
static void tensor_read(Loader *L, const RtStTensor *t, int64_t off, IrLoc loc) {
  int64_t rows = t->rank ? t->shape[0] : 1;
  read_block(L, t, 0, rows, 0, rows ? rt_st_numel(t) / rows : 0, 0, off, loc);
}

/* A read's dst rows [lo, hi) (rows of its block, or columns when it
 * transposes) into dst: 0, or 1 with a message. */
static int read_rows(const Read *r, int64_t lo, int64_t hi, float *dst, char *err, size_t errlen) {
  if (r->transpose) /* columns [lo, hi) */
    return rt_st_read_f32_block(r->t, r->r0, r->nr, r->c0 + lo, hi - lo, 1, dst, err, errlen);
  return rt_st_read_f32_block(r->t, r->r0 + lo, hi - lo, r->c0, r->nc, 0, dst, err, errlen);
}

/* A piece of a read: its block's rows [lo, hi), or columns when it
 * transposes (the rows of dst either way), into its param's data; for a
 * mapped set (dst NULL) the block's stored rows [lo, hi) either way, only
 * counted. */
typedef struct ReadPiece {
  const Read *r;
  float *dst;              /* the param's data (NULL: a mapped set's, only counted) */
  const RtSafetensors *st; /* a mapped set's checkpoint (its pages dropped when counted) */
  int64_t lo, hi;
  int failed;
  int64_t nonfinite; /* NaN and Inf values among those read */
  char err[256];
} ReadPiece;

/* NaN or Inf: the exponent bits all set */
static int64_t count_nonfinite(const float *x, int64_t n) {
  int64_t c = 0;
  for (int64_t k = 0; k < n; k++) {
    uint32_t u;
    memcpy(&u, &x[k], sizeof u);
    c += (u & 0x7f800000u) == 0x7f800000u;
  }
  return c;
}

/* NaN and Inf among a stored block's values (rows r0.., columns c0.. of
 * the tensor seen as [shape[0], rest]), counted on the stored bits where
 * the dtype allows (f32, f16, bf16: the exponent all ones); -1 for other
 * dtypes. Each value is read as a host word and tested against the
 * exponent's bits as the file's little-endian bytes hold them, read the
 * same way: one test on either byte order, in whole-word loops (byte by
 * byte, this count took 15% of a gpt2-small run). */
static int64_t count_nonfinite_stored(const RtStTensor *t, int64_t r0, int64_t nr, int64_t c0,
                                      int64_t nc) {
  static const unsigned char f32[4] = {0, 0, 0x80, 0x7f}, f16[2] = {0, 0x7c},
                             bf16[2] = {0x80, 0x7f};
  const unsigned char *half = t->dtype == RT_F16 ? f16 : t->dtype == RT_BF16 ? bf16 : NULL;
  if (t->dtype != RT_F32 && !half) return -1;
  uint32_t m32;
  uint16_t m16 = 0;
  memcpy(&m32, f32, 4);
  if (half) memcpy(&m16, half, 2);
  int64_t rows = t->rank ? t->shape[0] : 1, rest = rows ? rt_st_numel(t) / rows : 0;
  int64_t c = 0;
  for (int64_t r = r0; r < r0 + nr; r++) {
    const unsigned char *b = (const unsigned char *)t->data + (r * rest + c0) * (half ? 2 : 4);
    if (half)
      for (int64_t k = 0; k < nc; k++) {
        uint16_t u;
        memcpy(&u, b + 2 * k, 2);
        c += (u & m16) == m16;
      }
    else
      for (int64_t k = 0; k < nc; k++) {
        uint32_t u;
        memcpy(&u, b + 4 * k, 4);
        c += (u & m32) == m32;
      }
  }
  return c;
}

/* The pages of a read's stored rows [lo, hi) (of its block) out of the
 * process (rt_st_drop; nothing when st is NULL) */
static void drop_stored_rows(const RtSafetensors *st, const Read *r, int64_t lo, int64_t hi) {
  int64_t rows = r->t->rank ? r->t->shape[0] : 1, rest = rows ? rt_st_numel(r->t) / rows : 0;
  size_t es = rt_dtype_size(r->t->dtype);
  if (st && hi > lo && r->nc > 0)
    rt_st_drop(st, (const unsigned char *)r->t->data + (size_t)((r->r0 + lo) * rest + r->c0) * es,
               (size_t)((hi - lo - 1) * rest + r->nc) * es);
}

/* pieces [lo, hi) (an RtTaskFn) */
static void read_pieces(void *ctx, int64_t lo, int64_t hi) {
  ReadPiece *pieces = ctx;
  float *scratch = NULL; /* a mapped set's pieces of other dtypes: read to be counted */
  int64_t scratch_floats = 0;
  for (int64_t i = lo; i < hi; i++) {
    ReadPiece *pc = &pieces[i];
    const Read *r = pc->r;
    int64_t n = pc->hi - pc->lo;
    int64_t width = r->transpose ? r->nr : r->nc; /* dst rows [lo, hi) of this width */
    float *dst = pc->dst ? pc->dst + r->off + pc->lo * width : NULL;
    if (!dst) { /* a mapped set: its stored rows [lo, hi) only counted, then dropped */
      pc->nonfinite = count_nonfinite_stored(r->t, r->r0 + pc->lo, n, r->c0, r->nc);
      if (pc->nonfinite < 0) { /* other dtypes: converted to be counted */
        pc->nonfinite = 0;
        if (n * r->nc > scratch_floats) {
          free(scratch);
          scratch_floats = n * r->nc;
          scratch = malloc((size_t)scratch_floats * sizeof(float));
          if (!scratch) {
            scratch_floats = 0;
            pc->failed = 1;
            snprintf(pc->err, sizeof pc->err, "out of memory");
            continue;
          }
        }
        pc->failed = rt_st_read_f32_block(r->t, r->r0 + pc->lo, n, r->c0, r->nc, 0, scratch,
                                          pc->err, sizeof pc->err);
        pc->nonfinite = pc->failed ? 0 : count_nonfinite(scratch, n * r->nc);
      }
      /* the packer faults them back from the page cache, a piece at a time */
      drop_stored_rows(pc->st, r, pc->lo, pc->hi);
      continue;
    }
    pc->failed = read_rows(r, pc->lo, pc->hi, dst, pc->err, sizeof pc->err);
    /* counted here, on all cores, while the piece is in cache: a pass of
     * its own over gpt2-small's 500 MB took ~85 ms */
    pc->nonfinite = pc->failed ? 0 : count_nonfinite(dst, n * width);
  }
  free(scratch);
}

/* Does the queued reads, cut into pieces of ~4 MB of floats, on a pool of
 * the online CPUs' threads made for the call (one thread for less than a
 * piece in all): converting, transposing and faulting in a checkpoint's
 * pages is most of a `tfmc run`'s start (gpt2-small, 500 MB). A read that
 * fails is a problem of its param (reported once, not per piece). */
enum { PIECE_FLOATS = 1 << 20 };

/* A read's length in dst rows (*len) and the dst rows per piece: ~4 MB,
 * a multiple of 8 (the transposing tiles' height) */
static int64_t read_step(const Read *r, bool stored, int64_t *len) {
  int64_t width = r->transpose && !stored ? r->nr : r->nc;
  *len = r->transpose && !stored ? r->nc : r->nr;
  return width > 0 && PIECE_FLOATS / width > 8 ? PIECE_FLOATS / width / 8 * 8 : 8;
}

static void reads_run(Loader *L, bool mapped) {
  int64_t n = 0, total = 0, len;
  for (int i = 0; i < L->n_reads; i++) {
    int64_t step = read_step(&L->reads[i], mapped, &len);
    n += len > 0 ? (len + step - 1) / step : 1;
    total += L->reads[i].nr * L->reads[i].nc;
  }
  ReadPiece *pieces = n ? calloc((size_t)n, sizeof *pieces) : NULL;
  TFMC_ASSERT(pieces || !n);
  int64_t k = 0;
  for (int i = 0; i < L->n_reads; i++) {
    const Read *r = &L->reads[i];
    int64_t step = read_step(r, mapped, &len), lo = 0;
    do {
      int64_t hi = len - lo < step ? len : lo + step;
      pieces[k].r = r;
      pieces[k].dst = L->params[r->param].data;
      pieces[k].st = mapped ? L->st : NULL;
      pieces[k].lo = lo;
      pieces[k++].hi = hi;
      lo = hi;
    } while (lo < len);
  }
  TFMC_ASSERT(k == n);
  RtPool *pool = total > PIECE_FLOATS ? rt_pool_create(0) : NULL; /* NULL: this thread */
  rt_pool_parallel_for(pool, n, 1, read_pieces, pieces);
  rt_pool_destroy(pool);
  const Read *reported = NULL;
  for (int64_t i = 0; i < n; i++) {
    const Read *r = pieces[i].r;
    L->params[r->param].nonfinite += pieces[i].nonfinite;
    if (!pieces[i].failed || r == reported) continue;
    reported = r;
    Param *p = &L->params[r->param];
    problem_add(L, PROB_READ, r->loc, r->t->name, NULL, NULL, r->t->dtype, p->name,
                arena_strdup(L->a, pieces[i].err));
    p->ok = false;
  }
  free(pieces);
}

/* Scratch memory (the tied check's row), or a problem when there is none. */
static float *scratch_alloc(Loader *L, int64_t n, const char *param, IrLoc loc,
                            const char *name) {
  float *p = n > 0 && (uint64_t)n < SIZE_MAX / sizeof(float)
                 ? malloc((size_t)n * sizeof(float))
                 : NULL;
  if (!p)
    problem_add(L, PROB_READ, loc, name, NULL, NULL, RT_F32, param,
                "out of memory");
  return p;
}

/* ---- rules ---- */

static const char *rule_weight_suffix(const WeightRule *r) {
  return r->weight_suffix ? r->weight_suffix : "weight";
}
static const char *rule_bias_suffix(const WeightRule *r) {
  return r->bias_suffix ? r->bias_suffix : "bias";
}

static const char *xform_name(WeightXform x) {
  switch (x) {
  case WX_TENSOR: return "tensor";
  case WX_LINEAR: return "linear";
  case WX_CONV1D: return "conv1d";
  case WX_NORM: return "norm";
  case WX_HEADS: return "heads";
  case WX_SPLIT: return "split";
  case WX_SPLIT_CONV1D: return "split_conv1d";
  case WX_TIED: return "tied";
  case WX_COUNT: break;
  }
  return "?";
}

static bool model_head_tied(const Loader *L) {
  return L->spec && L->spec->model && L->spec->model->head_tied;
}

static bool target_in_model(const Loader *L, const char *target) {
  for (int i = 0; i < L->n_params; i++)
    if (strcmp(L->params[i].target, target) == 0) return true;
  return false;
}

/* "enc[i].attn.qkv" -> "enc[i].attn" (NULL if target is not a .qkv one) */
static const char *qkv_parent(Arena *a, const char *target) {
  if (!str_ends_with(target, ".qkv")) return NULL;
  return arena_strndup(a, target, strlen(target) - 4);
}

static bool target_exists(Loader *L, const char *target) {
  if (target_in_model(L, target)) return true;
  const char *parent = qkv_parent(L->a, target);
  if (!parent) return false;
  static const char *const qkv[] = {"q", "k", "v"};
  for (int s = 0; s < 3; s++)
    if (target_in_model(L, arena_printf(L->a, "%s.%s", parent, qkv[s])))
      return true;
  return false;
}

/* Why a target names nothing in this model, for the error message. */
static const char *target_absent_reason(const Loader *L, const char *target) {
  const ModelSpec *m = L->spec ? L->spec->model : NULL;
  size_t blen = strcspn(target, "[.");
  bool layered = target[blen] == '[';
  const char *rest = layered ? strchr(target, ']') : target + blen;
  rest = rest && *rest == ']' ? rest + 1 : rest;
  if (rest && *rest == '.') rest++;
  char base[64];
  snprintf(base, sizeof base, "%.*s", (int)(blen < 63 ? blen : 63), target);
  if (!m) return "it names no parameter group of the model";
  bool encdec = m->arch == ARCH_ENCODER_DECODER;
  if (strcmp(base, "dec") == 0 && m->arch == ARCH_ENCODER)
    return "an encoder model has no decoder";
  if (strcmp(base, "enc") == 0 && m->arch == ARCH_DECODER)
    return "a decoder-only model has no encoder; its layers are dec[i]";
  if (strcmp(base, "dec") == 0 && layered && m->arch == ARCH_DECODER &&
      (strncmp(rest, "cross", 5) == 0 || strcmp(rest, "norm3") == 0))
    return "a decoder-only model has no cross-attention (nor its norm3)";
  if (!layered && strcmp(target, "enc.norm") == 0)
    return "final_norm does not include the encoder";
  if (!layered && strcmp(target, "dec.norm") == 0)
    return "final_norm does not include the decoder";
  if (strcmp(base, "embed") == 0 && encdec)
    return "an encoder_decoder model has src_embed and tgt_embed";
  if ((strcmp(base, "pos") == 0 || strcmp(base, "embed_norm") == 0) && encdec &&
      m->pos == POS_LEARNED)
    return "an encoder_decoder model has separate src_ and tgt_ groups";
  if (strncmp(base, "src_", 4) == 0 || strncmp(base, "tgt_", 4) == 0) {
    if (!encdec)
      return "src_ and tgt_ groups belong to encoder_decoder models; this one "
             "has a single stack (embed, pos, embed_norm)";
  }
  if (str_ends_with(base, "pos") && m->pos != POS_LEARNED)
    return "the model's positions are not learned";
  if (str_ends_with(base, "embed_norm") && !m->embed_norm)
    return "the model has no embed_norm";
  if (strcmp(base, "token_type") == 0 && m->token_types == 0)
    return "the model has no token_types";
  if (strcmp(base, "head") == 0) {
    switch (m->head) {
    case HEAD_NONE: return "the model's head is 'none'";
    case HEAD_CLASSIFIER: return "a classifier head's groups are 'classifier' and 'pooler'";
    case HEAD_LOGITS:
    case HEAD_LOG_SOFTMAX:
    case HEAD_KIND_COUNT: break;
    }
  }
  if (strcmp(base, "pooler") == 0 && !m->pooler) return "the model has no pooler";
  if (strcmp(base, "classifier") == 0 && m->head != HEAD_CLASSIFIER)
    return "the model's head is not a classifier";
  return "it names no parameter group of the model (README: Canonical "
         "parameter names)";
}

/* Checks that make a rule unusable whatever param it meets. Reports at the
 * rule and returns false. */
static bool rule_check(Loader *L, const WeightRule *r) {
  bool qkv = str_ends_with(r->target, ".qkv");
  bool layered = strstr(r->target, "[i]") != NULL;
  const char *src = r->source ? r->source : "";
  if (!r->source || !r->target) {
    diag_error(L->d, r->loc, "weight rule without a target or a source");
    return false;
  }
  if (qkv && r->xform != WX_SPLIT && r->xform != WX_SPLIT_CONV1D) {
    diag_error(L->d, r->loc,
               "'%s' is a fused Q/K/V target: it takes 'split' or "
               "'split_conv1d', not '%s' (for separate tensors write rules "
               "for .q, .k and .v)",
               r->target, xform_name(r->xform));
    return false;
  }
  if (!qkv && (r->xform == WX_SPLIT || r->xform == WX_SPLIT_CONV1D)) {
    diag_error(L->d, r->loc,
               "'%s' splits a fused Q/K/V tensor: its target must end in "
               ".qkv (e.g. enc[i].attn.qkv), not '%s'",
               xform_name(r->xform), r->target);
    return false;
  }
  if (r->xform == WX_TIED && strcmp(r->target, "head") != 0) {
    diag_error(L->d, r->loc, "'tied' applies only to the target 'head', not '%s'",
               r->target);
    return false;
  }
  if (r->xform == WX_HEADS && !strstr(src, "{h}")) {
    diag_error(L->d, r->loc,
               "a 'heads' source needs {h} for the head index: \"%s\"", src);
    return false;
  }
  if (r->xform != WX_HEADS && strstr(src, "{h}")) {
    diag_error(L->d, r->loc,
               "{h} (head index) is only meaningful with 'heads': \"%s\"", src);
    return false;
  }
  if (!layered && strstr(src, "{i}")) {
    diag_error(L->d, r->loc,
               "{i} in \"%s\" needs a per-layer target such as enc[i]..., "
               "not '%s'",
               src, r->target);
    return false;
  }
  if (layered && !strstr(src, "{i}")) {
    diag_error(L->d, r->loc,
               "target '%s' is per layer but \"%s\" has no {i}: every layer "
               "would read the same tensors",
               r->target, src);
    return false;
  }
  return true;
}

/* Marks rules whose target the model lacks (preset: dropped silently;
 * explicit: an error) and checks the rest. */
static void rules_prepare(Loader *L) {
  const WeightMap *m = L->map;
  L->rule_dropped = arena_alloc(L->a, (size_t)(m->n_rules + 1) * sizeof(bool));
  L->rule_bad = arena_alloc(L->a, (size_t)(m->n_rules + 1) * sizeof(bool));
  const char *model_name = L->spec && L->spec->model && L->spec->model->name
                               ? L->spec->model->name
                               : m->model_name ? m->model_name : L->g->name;
  for (int i = 0; i < m->n_rules; i++) {
    const WeightRule *r = &m->rules[i];
    const char *target = r->target ? r->target : "";
    bool exists = target_exists(L, target);
    if (r->xform == WX_TIED && strcmp(target, "head") == 0) {
      if (model_head_tied(L)) {
        exists = true; /* the virtual head of a tied model */
      } else if (exists && !r->from_preset) {
        diag_error(L->d, r->loc,
                   "'head = tied ...' but the head is not tied in model '%s' "
                   "(add 'tied' to the head line)",
                   model_name);
        L->rule_bad[i] = true;
        continue;
      }
      /* a preset's tied rule on an untied head reads the stored copy as the
       * head's own weight (GPT-2's lm_head.weight is exactly that) */
    }
    if (!exists) {
      L->rule_dropped[i] = true;
      if (!r->from_preset)
        diag_error(L->d, r->loc,
                   "weight target '%s' does not exist in model '%s' (%s)",
                   target, model_name, target_absent_reason(L, target));
      continue;
    }
    if (!rule_check(L, r)) L->rule_bad[i] = true;
  }
}

/* The first live rule for p, or -1; *slot = 0/1/2 when it is a .qkv rule. */
static int rule_for(Loader *L, const Param *p, int *slot) {
  *slot = -1;
  const char *last = strrchr(p->target, '.');
  int qkv_slot = -1;
  const char *parent_qkv = NULL;
  if (last && last[2] == 0 && (last[1] == 'q' || last[1] == 'k' || last[1] == 'v')) {
    qkv_slot = last[1] == 'q' ? 0 : last[1] == 'k' ? 1 : 2;
    parent_qkv = arena_printf(L->a, "%.*s.qkv", (int)(last - p->target), p->target);
  }
  for (int i = 0; i < L->map->n_rules; i++) {
    if (L->rule_dropped[i]) continue;
    const WeightRule *r = &L->map->rules[i];
    if (!r->target) continue;
    if (strcmp(r->target, p->target) == 0) return i;
    if (parent_qkv && strcmp(r->target, parent_qkv) == 0) {
      *slot = qkv_slot;
      return i;
    }
  }
  return -1;
}

/* ---- loading one param ---- */

static void load_canonical(Loader *L, Param *p, const char *note) {
  const RtStTensor *t =
      tensor_fetch(L, p->name, &p->shape, p->name, (IrLoc){0}, note, NULL);
  if (t) tensor_read(L, t, 0, (IrLoc){0});
}

/* A shape mismatch that looks like the other layout gets a hint. */
static const char *transpose_hint(const Loader *L, const char *name,
                                  const Shape *want, WeightXform x) {
  int i = tensor_find(L, name);
  if (i < 0 || want->rank != 2) return NULL;
  const RtStTensor *t = rt_st_get(L->st, i);
  if (t->rank != 2 || t->shape[0] != want->dims[1] || t->shape[1] != want->dims[0])
    return NULL;
  if (x == WX_LINEAR)
    return "; it looks stored as [in,out]: use 'conv1d' for HF Conv1D layers";
  if (x == WX_CONV1D)
    return "; it looks stored as [out,in]: use 'linear'";
  if (x == WX_SPLIT)
    return "; it looks stored as [in,3d]: use 'split_conv1d'";
  if (x == WX_SPLIT_CONV1D)
    return "; it looks stored as [3d,in]: use 'split'";
  return NULL;
}

static void load_by_rule(Loader *L, Param *p, int ri, int slot) {
  const WeightRule *r = &L->map->rules[ri];
  IrLoc loc = r->loc;
  bool is_w = strcmp(p->leaf, "weight") == 0, is_b = strcmp(p->leaf, "bias") == 0;
  const char *src = subst(L->a, r->source, "{i}", p->layer);
  WeightXform x = r->xform;
  if (x == WX_TIED) x = WX_TENSOR; /* preset tied rule, untied head */
  if (x == WX_TENSOR) {
    if (!is_w) {
      problem_add(L, PROB_NO_SOURCE, loc, r->target, NULL, NULL, RT_F32, p->name,
                  arena_printf(L->a,
                               "the rule for '%s' ('%s') gives one tensor, "
                               "used for %s.weight; nothing supplies this one "
                               "(use 'linear' or 'norm' for a weight and a bias)",
                               r->target, xform_name(r->xform), p->group));
      return;
    }
    const RtStTensor *t = tensor_fetch(L, src, &p->shape, p->name, loc, NULL, NULL);
    if (t) tensor_read(L, t, 0, loc);
    return;
  }
  if (!is_w && !is_b) {
    problem_add(L, PROB_NO_SOURCE, loc, r->target, NULL, NULL, RT_F32, p->name,
                arena_printf(L->a, "a '%s' rule supplies only .weight and .bias",
                             xform_name(r->xform)));
    return;
  }
  const char *suffix = is_w ? rule_weight_suffix(r) : rule_bias_suffix(r);
  if (!*suffix) {
    /* merged per rule and layer: q, k, v of one split are one error */
    problem_add(L, PROB_NO_BIAS, loc, r->target, NULL, NULL, RT_F32, p->name,
                arena_printf(L->a, "%lld", (long long)p->layer));
    return;
  }
  int want_rank = is_w ? 2 : 1;
  bool needs_matrix = x == WX_CONV1D || x == WX_HEADS || x == WX_SPLIT ||
                      x == WX_SPLIT_CONV1D;
  if (needs_matrix && p->shape.rank != want_rank) {
    problem_add(L, PROB_BAD_FIT, loc, r->target, &p->shape, NULL, RT_F32, p->name,
                arena_printf(L->a, "'%s' produces %s", xform_name(x),
                             is_w ? "a matrix [out,in]" : "a vector [out]"));
    return;
  }
  const char *name = arena_printf(L->a, "%s.%s", src, suffix);
  switch (x) {
  case WX_LINEAR:
  case WX_NORM: {
    const char *hint = transpose_hint(L, name, &p->shape, x);
    const RtStTensor *t = tensor_fetch(L, name, &p->shape, p->name, loc, NULL, hint);
    if (t) tensor_read(L, t, 0, loc);
    return;
  }
  case WX_CONV1D: {
    if (is_b) {
      const RtStTensor *t = tensor_fetch(L, name, &p->shape, p->name, loc, NULL, NULL);
      if (t) tensor_read(L, t, 0, loc);
      return;
    }
    int64_t out = p->shape.dims[0], in = p->shape.dims[1];
    Shape want = shape2(in, out);
    const char *hint = transpose_hint(L, name, &want, x);
    const RtStTensor *t = tensor_fetch(L, name, &want, p->name, loc, NULL, hint);
    if (t) /* stored [in,out] -> [out,in] */
      read_block(L, t, 0, in, 0, out, 1, 0, loc);
    return;
  }
  case WX_HEADS: {
    int64_t H = L->heads, d = p->shape.dims[0];
    if (H <= 0 || d % H != 0) {
      problem_add(L, PROB_BAD_FIT, loc, r->target, &p->shape, NULL, RT_F32,
                  p->name,
                  arena_printf(L->a,
                               "'heads' needs the output size %lld to be a "
                               "multiple of the head count %lld",
                               (long long)d, (long long)H));
      return;
    }
    int64_t dh = d / H, row = is_w ? p->shape.dims[1] : 1;
    Shape want = is_w ? shape2(dh, row) : shape1(dh);
    for (int64_t h = 0; h < H; h++) { /* heads concatenated along dim 0 */
      const char *hn = subst(L->a, name, "{h}", h);
      const RtStTensor *t = tensor_fetch(L, hn, &want, p->name, loc, NULL, NULL);
      if (t) tensor_read(L, t, h * dh * row, loc);
    }
    return;
  }
  case WX_SPLIT:
  case WX_SPLIT_CONV1D: {
    TFMC_ASSERT(slot >= 0 && slot < 3);
    int64_t d = p->shape.dims[0];
    int64_t in = is_w ? p->shape.dims[1] : 1;
    Shape want = !is_w ? shape1(3 * d)
                 : x == WX_SPLIT ? shape2(3 * d, in)
                                 : shape2(in, 3 * d);
    const char *hint = transpose_hint(L, name, &want, x);
    const RtStTensor *t = tensor_fetch(L, name, &want, p->name, loc, NULL, hint);
    if (!t) return;
    if (!is_w || x == WX_SPLIT) /* rows [slot*d, (slot+1)*d) of [3d,in] (or of [3d]) */
      read_block(L, t, slot * d, d, 0, in, 0, 0, loc);
    else /* columns [slot*d, (slot+1)*d) of [in,3d], transposed to [d,in] */
      read_block(L, t, 0, in, slot * d, d, 1, 0, loc);
    return;
  }
  case WX_TENSOR:
  case WX_TIED:
  case WX_COUNT:
    break;
  }
  TFMC_ASSERT(!"unhandled weight transform");
}

/* A tied head: the checkpoint may hold a copy of the embedding under the
 * rule's name (or "head.weight" without a rule); it must be identical. */
/* A mapped set's source: each item's reads (those of its param, in
 * order), from the checkpoint kept open. */
typedef struct MappedSource {
  WeightSource base;
  RtSafetensors *st;
  const Read *reads;
  int *first, *count; /* per item: its reads */
  bool *covered;      /* per item: its reads write every float (else the rest is 0) */
} MappedSource;

static int mapped_read(const WeightSource *s, int item, int64_t f0, int64_t f1, float *dst,
                       char *err, size_t errlen) {
  const MappedSource *m = (const MappedSource *)(const void *)s;
  if (!m->covered[item]) memset(dst, 0, (size_t)(f1 - f0) * sizeof(float));
  for (int i = m->first[item]; i < m->first[item] + m->count[item]; i++) {
    const Read *r = &m->reads[i];
    int64_t width = r->transpose ? r->nr : r->nc, len = r->transpose ? r->nc : r->nr;
    int64_t end = r->off + width * len;
    int64_t a = f0 > r->off ? f0 : r->off, b = f1 < end ? f1 : end;
    if (a >= b || width <= 0) continue;
    /* the dst rows that hold [a, b): whole rows straight into dst, else
     * through a copy of those rows */
    int64_t lo = (a - r->off) / width, hi = (b - r->off + width - 1) / width;
    if ((a - r->off) % width == 0 && (b - r->off) % width == 0) {
      if (read_rows(r, lo, hi, dst + (a - f0), err, errlen)) return 1;
    } else {
      float *rows = malloc((size_t)((hi - lo) * width) * sizeof(float));
      if (!rows) {
        snprintf(err, errlen, "out of memory");
        return 1;
      }
      int bad = read_rows(r, lo, hi, rows, err, errlen);
      if (!bad)
        memcpy(dst + (a - f0), rows + (a - r->off - lo * width), (size_t)(b - a) * sizeof(float));
      free(rows);
      if (bad) return 1;
    }
    /* stored rows read (a transposing read's columns share theirs with
     * the rest of the block: left to release) */
    if (!r->transpose) drop_stored_rows(m->st, r, lo, hi);
  }
  return 0;
}

static void mapped_close(void *st) { rt_st_close(st); }

static void mapped_release(const WeightSource *s) {
  rt_st_release(((const MappedSource *)(const void *)s)->st);
}

/* An item that is one f32 block of one tensor, as it lies in the mapping
 * (WeightSource.view): rows of the block as stored, the transpose of a
 * transposing read, or the tensor whole seen as rows of cols floats. The
 * file is little-endian: no view on other hosts. */
static const float *mapped_view(const WeightSource *s, int item, int64_t cols, int64_t *rs,
                                int64_t *cs) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const MappedSource *m = (const MappedSource *)(const void *)s;
  if (m->count[item] != 1 || !m->covered[item] || cols <= 0) return NULL;
  const Read *r = &m->reads[m->first[item]];
  if (r->t->dtype != RT_F32 || r->off != 0) return NULL;
  int64_t rows = r->t->rank ? r->t->shape[0] : 1, rest = rows ? rt_st_numel(r->t) / rows : 0;
  const unsigned char *v = (const unsigned char *)r->t->data + (size_t)(r->r0 * rest + r->c0) * 4;
  if ((uintptr_t)v % _Alignof(float) != 0) return NULL;
  if (r->transpose) { /* item row i: column c0 + i of the block */
    if (r->nr != cols) return NULL;
    *rs = 1;
    *cs = rest;
  } else if (r->nc == cols) {
    *rs = rest;
    *cs = 1;
  } else if (r->c0 == 0 && r->nc == rest) { /* whole rows: one contiguous run */
    *rs = cols;
    *cs = 1;
  } else {
    return NULL;
  }
  return (const float *)(const void *)v;
#else
  (void)s, (void)item, (void)cols, (void)rs, (void)cs;
  return NULL;
#endif
}

static void mapped_drop(const WeightSource *s, const void *p, size_t bytes) {
  rt_st_drop(((const MappedSource *)(const void *)s)->st, p, bytes);
}

/* A mapped set's source over L's reads (st kept open by the caller) */
static MappedSource *mapped_source(Loader *L) {
  Arena *a = L->a;
  MappedSource *m = arena_alloc(a, sizeof *m);
  m->base.read = mapped_read;
  m->base.release = mapped_release;
  m->base.view = mapped_view;
  m->base.drop = mapped_drop;
  m->st = (RtSafetensors *)L->st;
  m->reads = L->reads;
  m->first = arena_alloc(a, (size_t)(L->n_params + 1) * sizeof *m->first);
  m->count = arena_alloc(a, (size_t)(L->n_params + 1) * sizeof *m->count);
  m->covered = arena_alloc(a, (size_t)(L->n_params + 1) * sizeof *m->covered);
  int64_t *floats = arena_alloc(a, (size_t)(L->n_params + 1) * sizeof *floats);
  for (int i = L->n_reads - 1; i >= 0; i--) { /* a param's reads are queued together */
    const Read *r = &L->reads[i];
    m->first[r->param] = i;
    m->count[r->param]++;
    floats[r->param] += r->nr * r->nc;
  }
  for (int i = 0; i < L->n_params; i++) {
    for (int k = m->first[i]; k < m->first[i] + m->count[i]; k++)
      TFMC_ASSERT(L->reads[k].param == i);
    m->covered[i] = floats[i] == shape_numel(&L->params[i].shape);
  }
  return m;
}

/* m: a mapped load's source (the embedding has no data), else NULL */
static void check_tied(Loader *L, const MappedSource *m) {
  if (!model_head_tied(L)) return;
  const Param *emb = NULL;
  for (int i = 0; i < L->n_params && !emb; i++)
    if (strcmp(L->params[i].name, "tgt_embed.weight") == 0) emb = &L->params[i];
  for (int i = 0; i < L->n_params && !emb; i++)
    if (strcmp(L->params[i].name, "embed.weight") == 0) emb = &L->params[i];
  if (!emb) return;
  const char *name = "head.weight";
  IrLoc loc = {0};
  for (int i = 0; L->map && i < L->map->n_rules; i++) {
    const WeightRule *r = &L->map->rules[i];
    if (L->rule_dropped[i] || L->rule_bad[i] || r->xform != WX_TIED) continue;
    name = r->source;
    loc = r->loc;
    break;
  }
  if (tensor_find(L, name) < 0) return; /* no stored copy: fine */
  const char *who = arena_printf(L->a, "head.weight, tied to %s", emb->name);
  const RtStTensor *t = tensor_fetch(L, name, &emb->shape, who, loc, NULL, NULL);
  if (!t || !emb->ok) return;
  /* row by row through one row's buffer: a scratch copy of the whole
   * matrix (GPT-2's stored lm_head: 154 MB) faulted in that many fresh
   * pages; a mapped load's embedding row through a second one */
  int64_t rows = emb->shape.rank ? emb->shape.dims[0] : 1;
  int64_t cols = rows ? shape_numel(&emb->shape) / rows : 0;
  float *row = scratch_alloc(L, 2 * (cols > 0 ? cols : 1), who, loc, name);
  if (!row) return;
  float *erow = row + (cols > 0 ? cols : 1);
  double maxd = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < rows; i++) {
    char err[256];
    if (rt_st_read_f32_block(t, i, 1, 0, cols, 0, row, err, sizeof err) ||
        (m && mapped_read(&m->base, (int)(emb - L->params), i * cols, (i + 1) * cols, erow, err,
                          sizeof err))) {
      problem_add(L, PROB_READ, loc, t->name, NULL, NULL, t->dtype, who, arena_strdup(L->a, err));
      free(row);
      return;
    }
    const float *e = m ? erow : emb->data + i * cols;
    for (int64_t k = 0; k < cols; k++) {
      if (row[k] == e[k]) continue;
      double dd = fabs((double)row[k] - (double)e[k]);
      if (at < 0 || dd > maxd || isnan(dd)) {
        maxd = dd;
        at = i * cols + k;
      }
    }
  }
  free(row);
  if (at >= 0)
    diag_error(L->d, loc,
               "%s: stored copy of a tied weight differs from %s (max "
               "|diff| %g at [%lld,%lld]); the model ties the head to the "
               "embedding, so the checkpoint's head is not the one it was "
               "trained with",
               name, emb->name, maxd, (long long)(at / cols), (long long)(at % cols));
}

/* The naming convention a checkpoint's tensor names point to, by a name
 * fragment only that convention uses; NULL when none does. */
static const char *guess_preset(const Loader *L) {
  static const struct {
    const char *fragment, *preset;
  } signs[] = {
      {".attention.self.query.", "hf-bert"},  {".attention.q_lin.", "hf-distilbert"},
      {".attn.c_attn.", "hf-gpt2"},           {".self_attn.in_proj_weight", "torch.nn"},
      {".sublayer.", "annotated"},            {".self_attention.fc_q.", "pytorch-seq2seq"},
      {".attention.heads.", "anatomy"},
  };
  for (size_t k = 0; k < sizeof signs / sizeof *signs; k++)
    for (int i = 0; i < L->n_tensors; i++)
      if (strstr(rt_st_get(L->st, i)->name, signs[k].fragment)) return signs[k].preset;
  return NULL;
}

/* Before the list of problems: how much of the model the checkpoint held,
 * and, when few parameters were found, the naming convention its tensor
 * names look like, so a wrong or missing weights block reads as one line. */
static void summary_report(Loader *L) {
  int found = 0;
  for (int i = 0; i < L->n_params; i++) found += L->params[i].ok;
  if (found == L->n_params) return;
  const char *guess = found * 2 < L->n_params ? guess_preset(L) : NULL;
  const char *using = L->map && L->map->preset ? L->map->preset : NULL;
  if (guess && using && strcmp(guess, using) == 0) guess = NULL;
  IrLoc loc = L->map ? L->map->loc : (IrLoc){0};
  /* a note, not one more error: the problems below are the errors */
  if (guess)
    diag_note(L->d, loc,
               "%d of %d parameters found in the checkpoint; its tensor names look like the "
               "'%s' convention: try `preset \"%s\"` in the weights block%s",
               found, L->n_params, guess, guess, using ? " instead of the one given" : "");
  else
    diag_note(L->d, loc, "%d of %d parameters found in the checkpoint (the problems follow)",
               found, L->n_params);
}

static void report_unexpected(Loader *L) {
  int unexpected = 0;
  for (int i = 0; i < L->n_tensors; i++) {
    if (L->consumed[i]) continue;
    const RtStTensor *t = rt_st_get(L->st, i);
    bool ignored = false;
    for (int k = 0; L->map && k < L->map->n_ignore && !ignored; k++)
      ignored = L->map->ignore[k] && glob_match(L->map->ignore[k], t->name);
    /* tensors a rule already reported as unusable would have read are not
     * reported again as unexpected */
    for (int k = 0; L->map && k < L->map->n_rules && !ignored; k++) {
      const WeightRule *r = &L->map->rules[k];
      bool reported = L->rule_bad[k] || (L->rule_dropped[k] && !r->from_preset);
      if (!reported || !r->source) continue;
      ignored = glob_match(r->source, t->name) ||
                glob_match(arena_printf(L->a, "%s.*", r->source), t->name);
    }
    if (ignored) continue;
    Shape s = tensor_shape(t);
    unexpected++;
    if (L->map)
      diag_error(L->d, (IrLoc){0},
                 "unexpected tensor '%s' %s in the checkpoint: no weight-map "
                 "rule uses it (add `ignore \"%s\"` to the weights block if "
                 "that is intended)",
                 t->name, shape_str(L->a, &s), t->name);
    else
      diag_error(L->d, (IrLoc){0},
                 "unexpected tensor '%s' %s in the checkpoint: the model has "
                 "no parameter of that name (without a weights block the "
                 "checkpoint must use tfmc's canonical names)",
                 t->name, shape_str(L->a, &s));
  }
  if (!L->map && unexpected > 0) {
    int found = 0;
    for (int i = 0; i < L->n_params; i++)
      if (tensor_find(L, L->params[i].name) >= 0) found++;
    if (found == 0 && L->n_params > 0)
      diag_note(L->d, (IrLoc){0},
                "none of the model's parameters is in the checkpoint under "
                "its canonical name; add a weights block that maps the "
                "checkpoint's names (a preset such as \"torch.nn\" or "
                "\"hf-gpt2\", or explicit rules)");
  }
}

static int64_t graph_heads(const IrGraph *g, const Spec *spec) {
  if (spec && spec->model && spec->model->heads > 0) return spec->model->heads;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_ATTENTION || g->nodes[i].op == IR_OP_ATTENTION_FLASH ||
        g->nodes[i].op == IR_OP_ATTN_PROBS)
      return g->nodes[i].attrs.heads;
  return 0;
}

/* Collects the params; reports (and returns false for) a symbolic dim. */
static bool params_collect(Loader *L) {
  const IrGraph *g = L->g;
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == IR_OP_PARAM;
  L->params = arena_alloc(L->a, (size_t)(n + 1) * sizeof *L->params);
  bool ok = true;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *nd = &g->nodes[i];
    if (nd->op != IR_OP_PARAM) continue;
    Param *p = &L->params[L->n_params++];
    p->name = nd->attrs.name ? nd->attrs.name : "";
    p->type = nd->type;
    p->shape.rank = nd->type.rank;
    for (int k = 0; k < nd->type.rank; k++) {
      if (nd->type.dims[k].sym >= 0 || nd->type.dims[k].value < 0) {
        if (L->d)
          diag_error(L->d, nd->loc,
                     "param '%s' has a symbolic or negative dimension; "
                     "weights need constant shapes",
                     p->name);
        ok = false;
      }
      p->shape.dims[k] = nd->type.dims[k].value;
    }
    param_split_name(L->a, p);
  }
  return ok;
}

int64_t weights_bytes(const IrGraph *g) {
  int64_t total = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *nd = &g->nodes[i];
    if (nd->op != IR_OP_PARAM) continue;
    int64_t n = 4;
    for (int k = 0; k < nd->type.rank; k++) {
      int64_t v = nd->type.dims[k].sym >= 0 ? 0 : nd->type.dims[k].value;
      n = v <= 0 ? 0 : n > INT64_MAX / v ? INT64_MAX : n * v;
    }
    total = n > INT64_MAX - total ? INT64_MAX : total + n;
  }
  return total;
}


static WeightSet *load(Arena *a, const IrGraph *g, const Spec *spec, const RtSafetensors *st,
                       Diags *d, bool mapped) {
  int errors0 = d->n_errors;
  Loader L;
  memset(&L, 0, sizeof L);
  L.a = a;
  L.d = d;
  L.g = g;
  L.spec = spec;
  L.map = spec ? spec->weights : NULL;
  L.st = st;
  if (!params_collect(&L)) return NULL;
  L.heads = graph_heads(g, spec);
  tensors_index(&L);
  if (L.map) rules_prepare(&L);
  /* every param's data in one block, 64-byte aligned pieces: untouched
   * zero pages (a big block is calloc'd) advised onto 2 MiB pages, whose
   * first writes fault 512x less often; a block per param left up to 4 MiB
   * of each (its unaligned ends) on 4 KiB pages, ~150 MB of gpt2-small's */
  size_t total = 0;
  bool fits = true;
  for (int i = 0; i < L.n_params && !mapped; i++) {
    size_t bytes = ((size_t)shape_numel(&L.params[i].shape) * sizeof(float) + 63) & ~(size_t)63;
    fits = fits && bytes <= SIZE_MAX - 64 - total;
    total += fits ? bytes : 0;
  }
  unsigned char *block = mapped ? NULL : fits ? arena_try_alloc(a, total + 64) : NULL;
  if (!block && !mapped) {
    diag_error(d, (IrLoc){0},
               "out of memory: the weights of '%s' need %lld bytes as f32, more than this "
               "process can allocate",
               g->name, (long long)weights_bytes(g));
    return NULL;
  }
  if (block) {
    block = (unsigned char *)(((uintptr_t)block + 63) & ~(uintptr_t)63);
    rt_weights_advise_huge(block, total);
  }
  for (int i = 0; i < L.n_params; i++) {
    Param *p = &L.params[i];
    if (block) {
      p->data = (float *)(void *)block;
      block += ((size_t)shape_numel(&p->shape) * sizeof(float) + 63) & ~(size_t)63;
    }
    int probs0 = 0;
    for (int k = 0; k < L.n_probs; k++) probs0 += L.probs[k].n_params;
    L.cur = i;
    int slot = -1, ri = L.map ? rule_for(&L, p, &slot) : -1;
    if (ri >= 0 && L.rule_bad[ri]) continue; /* already reported */
    if (ri >= 0)
      load_by_rule(&L, p, ri, slot);
    else if (L.map)
      load_canonical(&L, p,
                     arena_printf(a,
                                  " (no weight-map rule for '%s', so its "
                                  "canonical name was used)",
                                  p->target));
    else
      load_canonical(&L, p, NULL);
    int probs1 = 0;
    for (int k = 0; k < L.n_probs; k++) probs1 += L.probs[k].n_params;
    p->ok = probs1 == probs0;
  }
  reads_run(&L, mapped);
  MappedSource *m = mapped ? mapped_source(&L) : NULL;
  check_tied(&L, m);
  /* what the tied check read (two vocab x d matrices), out again */
  if (m) rt_st_release(m->st);
  summary_report(&L);
  problems_report(&L);
  report_unexpected(&L);
  if (d->n_errors > errors0) return NULL;
  WeightSet *ws = arena_alloc(a, sizeof *ws);
  ws->n = L.n_params;
  ws->items = arena_alloc(a, (size_t)(L.n_params + 1) * sizeof *ws->items);
  ws->nonfinite = arena_alloc(a, (size_t)(L.n_params + 1) * sizeof *ws->nonfinite);
  for (int i = 0; i < L.n_params; i++) {
    ws->items[i] = (Weight){L.params[i].name, L.params[i].type, L.params[i].data};
    ws->nonfinite[i] = L.params[i].nonfinite;
  }
  if (m) {
    ws->src = &m->base;
    arena_on_destroy(a, mapped_close, m->st);
  }
  return ws;
}

WeightSet *weights_load(Arena *a, const IrGraph *g, const Spec *spec, const RtSafetensors *st,
                        Diags *d) {
  return load(a, g, spec, st, d, false);
}

WeightSet *weights_load_mapped(Arena *a, const IrGraph *g, const Spec *spec, RtSafetensors *st,
                               Diags *d) {
  return load(a, g, spec, st, d, true);
}

/* ---- random init ----
 * Each param draws from its own splitmix64 stream seeded by (seed, name), so
 * its values depend only on the seed and its name, not on the graph's order
 * or the platform: the uniform is a 24-bit integer scaled exactly to [0,1),
 * mapped with double arithmetic and rounded once to float. */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* U(lo, hi) from the top 24 bits: exact in double on every platform */
static double uniform(uint64_t *s, double lo, double hi) {
  double u = (double)(splitmix64(s) >> 40) * (1.0 / 16777216.0);
  return lo + (hi - lo) * u;
}

/* Tables looked up by id: token embeddings, learned positions, segments. */
static bool group_is_table(const char *group) {
  const char *last = strrchr(group, '.');
  last = last ? last + 1 : group;
  return str_ends_with(last, "embed") || str_ends_with(last, "pos") ||
         strcmp(last, "token_type") == 0;
}

WeightSet *weights_random(Arena *a, const IrGraph *g, uint64_t seed) {
  Loader L;
  memset(&L, 0, sizeof L);
  L.a = a;
  L.g = g;
  if (!params_collect(&L)) return NULL;
  WeightSet *ws = arena_alloc(a, sizeof *ws);
  ws->n = L.n_params;
  ws->items = arena_alloc(a, (size_t)(L.n_params + 1) * sizeof *ws->items);
  for (int i = 0; i < L.n_params; i++) {
    Param *p = &L.params[i];
    int64_t n = shape_numel(&p->shape);
    float *data = arena_try_alloc(a, (size_t)n * sizeof(float));
    if (!data) return NULL; /* out of memory: the caller says how much was needed */
    uint64_t s = seed ^ hash_str(p->name);
    splitmix64(&s);
    bool is_bias = strcmp(p->leaf, "bias") == 0;
    bool norm = strstr(p->group, "norm") != NULL;
    double lo = -0.1, hi = 0.1, add = 0;
    if (norm && !is_bias) {
      add = 1.0; /* gain 1 + U(-0.1, 0.1) */
    } else if (!is_bias && group_is_table(p->group)) {
      lo = -1, hi = 1;
    } else if (!is_bias && p->shape.rank == 2 && p->shape.dims[1] > 0) {
      double bound = 1.0 / sqrt((double)p->shape.dims[1]);
      lo = -bound, hi = bound;
    }
    for (int64_t k = 0; k < n; k++)
      data[k] = (float)(add + uniform(&s, lo, hi));
    ws->items[i] = (Weight){p->name, p->type, data};
  }
  return ws;
}
