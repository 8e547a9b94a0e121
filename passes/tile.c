/* passes/tile.c — the tile loop pass: GEMM blocking, parallel grain and
 * thread split chosen from the target's caches and thread count.
 *
 * rt_linear (runtime/rt_gemm.h) takes its cache blocks mc, nc, kc and its
 * split policy task_macs, split_macs as arguments; the lowering writes
 * defaults measured on one machine (LowerLoopsOptions). This pass sizes
 * them for the target instead, in the GotoBLAS model of what lives where:
 *
 *   kc  the depth of a block: kc = L2 / 512, at most 1024 (K is cut into
 *       equal blocks of at most kc, so from 512K of L2 up bert/gpt2's
 *       K = 768 runs as one block and 3072 as three). Every K block but
 *       the first re-reads the C tile, which for a wide or tall product
 *       (gpt2's LM head 128 x 50257, bert-base b8's 1024 x 3072) has left
 *       L2, so deeper is better as long as the micro-kernel's B panels
 *       (kc x nr) stream from L2 while the A panels of a row block pass
 *       over them: at 1024 the AVX-512 6x64 tile's four panels (kc x 64
 *       floats) fill a quarter of 1M, the AVX2 6x16 tile's one an eighth
 *       of 512K. It was L2 / 1024, which on a 512K L2 (Zen 3) ran K = 768
 *       as two blocks of 384: kc 1024 there (mc 60) measured +4 to +11%
 *       on 6 of 7 bert/gpt2 shapes at M = 128 and 1024 (2 threads,
 *       interleaved, medians of 5; -4% on the seventh, within the
 *       noise); bert-base b8 1314 -> 1228 ms (0.93x, medians of 9
 *       interleaved runs), b1 the same within the noise. The GotoBLAS
 *       rule, A and B panels in L1 (kc = L1 / 128 = 256 at 32K), measured
 *       slower for both tiles (one thread, 128 x 50257 x 768: AVX-512
 *       97.6 -> 105.6 GFLOP/s at kc 768, AVX2 77 -> 94; the bert-base
 *       shapes the same within the noise for AVX-512 and 2-5% faster for
 *       AVX2).
 *   mc  the rows of the packed block of x (mc x kc), which stays in L2
 *       while the B panels pass: half of L2, mc = L2 / (8 kc)
 *       (1M, kc 1024: 120; 512K: 60), a multiple of 12 (both tiles' mr
 *       divide it).
 *   nc  the columns of the packed block of w (kc x nc), which each thread
 *       keeps in its share of L3: half of it, nc = L3 / (8 kc threads)
 *       (32M, kc 1024, 2 threads: 2048 -> 1920), a multiple of 192 (both
 *       tiles' nr divide it).
 *   task_macs   2^17 multiply-adds per pool task at least: a hand-off to a
 *               worker costs a few microseconds, whatever the caches.
 *   split_macs  threads * 2^22: below it a product is cut into one piece
 *               per thread (each piece under ~4M multiply-adds, ~0.1 ms,
 *               where finer pieces buy no balance and each repacks the
 *               shared operand); 8M on 2 threads, the measured default.
 * Attention (rt_attention, rt_attention_flash), per call from its head
 * dims dh, dv (d = dh + dv):
 *   block_q  query rows per task: their Q rows and output rows (block_q x d
 *            floats) stay in L1 while the keys pass: block_q = L1 / (4 d),
 *            a multiple of 16 in 16..256 (32K, d 128: 64; 48K: 96).
 *   block_k  keys per block of the flash form's online softmax: the block's
 *            K^T and V (block_k x d floats) and its scores (block_q x
 *            block_k) stay in half of L2 while the block's rows are
 *            swept: block_k = L2 / (8 (d + block_q)), a multiple of 32 in
 *            32..2048 (1M, d 128, block_q 96: 576).
 * Each is clamped to the range its TILE_KEYS row gives; a --tile KEY=VALUE
 * override replaces the choice. With OpenBLAS doing the products, mc x nc
 * is the block the epilogue follows sgemm by.
 *
 * The target: --target-cache / --target-threads (emit-c, or anything that
 * passes them), else the host's /sys/devices/system/cpu/cpu0/cache.
 *
 * Invariants: only the policy arguments of rt_linear* and rt_attention*
 * change, to constants; no result changes beyond float rounding (kc sets
 * where K is cut, block_k where the online softmax rescales); running the
 * pass again changes nothing. */
#include "ir/loop.h"
#include "passes/passes.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct TileKeyInfo {
  const char *key;
  int64_t min, max;
  const char *doc;
} TileKeyInfo;

static const TileKeyInfo tile_keys[TILE_KEY_COUNT] = {
#define TILE_KEY_ROW(e, key, mn, mx, doc) [TILE_##e] = {key, mn, mx, doc},
    TILE_KEYS(TILE_KEY_ROW)
#undef TILE_KEY_ROW
};

/* ---- targets ---- */

void pass_target_generic(PassTarget *t) {
  memset(t, 0, sizeof *t);
  t->l1 = 32 << 10;
  t->l2 = 512 << 10;
  t->l3 = 8 << 20;
  t->threads = 4;
  t->source = "generic target";
}

/* The first line of a sysfs file, or "" when it cannot be read. */
static void read_line(const char *path, char *buf, size_t n) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  if (!fgets(buf, (int)n, f))
    buf[0] = 0;
  fclose(f);
  buf[strcspn(buf, "\n")] = 0;
}

/* "32K", "1024K", "32768K", "1M" -> bytes; 0 when it is not a size. */
static int64_t parse_size(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v <= 0)
    return 0;
  int64_t mult = 1;
  switch (toupper((unsigned char)*end)) {
  case 0: break;
  case 'K': mult = (int64_t)1 << 10; end++; break;
  case 'M': mult = (int64_t)1 << 20; end++; break;
  case 'G': mult = (int64_t)1 << 30; end++; break;
  default: return 0;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end || v > ((int64_t)1 << 30) / mult)
    return 0;
  return v * mult;
}

void pass_target_host(PassTarget *t) {
  pass_target_generic(t);
  t->source = "host";
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus >= 1)
    t->threads = cpus > 1024 ? 1024 : (int)cpus;
  bool any = false;
  for (int i = 0; i < 16; i++) {
    char path[128], level[16], type[32], size[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    read_line(path, level, sizeof level);
    if (!level[0])
      break;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    read_line(path, type, sizeof type);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    read_line(path, size, sizeof size);
    int64_t bytes = parse_size(size);
    if (bytes <= 0 || strcmp(type, "Instruction") == 0)
      continue;
    if (strcmp(level, "1") == 0)
      t->l1 = bytes, any = true;
    else if (strcmp(level, "2") == 0)
      t->l2 = bytes, any = true;
    else if (strcmp(level, "3") == 0)
      t->l3 = bytes, any = true;
  }
  if (!any)
    t->source = "host (no cache sizes in /sys: generic sizes)";
}

bool pass_target_parse_cache(PassTarget *t, const char *spec, char *err, size_t errlen) {
  bool seen[3] = {false, false, false};
  int64_t val[3] = {t->l1, t->l2, t->l3};
  const char *p = spec;
  if (!*p) {
    snprintf(err, errlen, "--target-cache: empty (expected e.g. L1=32K,L2=1M,L3=32M)");
    return false;
  }
  for (;;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char item[64];
    if (len == 0 || len >= sizeof item) {
      snprintf(err, errlen, "--target-cache: bad item '%.*s' in '%s' (expected e.g. L1=32K,L2=1M,L3=32M)",
               (int)(len > 40 ? 40 : len), p, spec);
      return false;
    }
    memcpy(item, p, len);
    item[len] = 0;
    char *eq = strchr(item, '=');
    int level = -1;
    if (eq && eq - item == 2 && (item[0] == 'L' || item[0] == 'l') && item[1] >= '1' &&
        item[1] <= '3')
      level = item[1] - '1';
    if (level < 0) {
      snprintf(err, errlen, "--target-cache: '%s' is not L1=SIZE, L2=SIZE or L3=SIZE", item);
      return false;
    }
    if (seen[level]) {
      snprintf(err, errlen, "--target-cache: L%d given twice in '%s'", level + 1, spec);
      return false;
    }
    int64_t bytes = parse_size(eq + 1);
    if (bytes < 1024) {
      snprintf(err, errlen,
               "--target-cache: L%d=%s is not a cache size (bytes, or a number with K, M or G; "
               "1K..1G)",
               level + 1, eq + 1);
      return false;
    }
    seen[level] = true;
    val[level] = bytes;
    if (!e)
      break;
    p = e + 1;
  }
  t->l1 = val[0], t->l2 = val[1], t->l3 = val[2];
  t->source = "--target-cache";
  return true;
}

bool pass_target_parse_threads(PassTarget *t, const char *text, char *err, size_t errlen) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < 1 || v > 1024) {
    snprintf(err, errlen, "--target-threads: '%s' is not a thread count 1..1024", text);
    return false;
  }
  t->threads = (int)v;
  return true;
}

void pass_tile_keys_list(char *buf, size_t n) {
  size_t k = 0;
  if (n)
    buf[0] = 0;
  for (int i = 0; i < TILE_KEY_COUNT && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", tile_keys[i].key);
}

bool pass_target_parse_tile(PassTarget *t, const char *kv, char *err, size_t errlen) {
  const char *eq = strchr(kv, '=');
  char keys[256];
  pass_tile_keys_list(keys, sizeof keys);
  if (!eq) {
    snprintf(err, errlen, "--tile: '%s' is not KEY=VALUE (keys: %s)", kv, keys);
    return false;
  }
  int key = -1;
  for (int i = 0; i < TILE_KEY_COUNT; i++)
    if (strlen(tile_keys[i].key) == (size_t)(eq - kv) &&
        memcmp(tile_keys[i].key, kv, (size_t)(eq - kv)) == 0)
      key = i;
  if (key < 0) {
    snprintf(err, errlen, "--tile: unknown key '%.*s' (keys: %s)", (int)(eq - kv > 64 ? 64 : eq - kv),
             kv, keys);
    return false;
  }
  const TileKeyInfo *ki = &tile_keys[key];
  char *end;
  errno = 0;
  long long v = strtoll(eq + 1, &end, 10);
  if (errno || end == eq + 1 || *end || v < ki->min || v > ki->max) {
    snprintf(err, errlen, "--tile: %s=%s is not an integer in %" PRId64 "..%" PRId64 " (%s)",
             ki->key, eq + 1, ki->min, ki->max, ki->doc);
    return false;
  }
  if (t->set[key]) {
    snprintf(err, errlen, "--tile: %s given twice", ki->key);
    return false;
  }
  t->set[key] = true;
  t->tile[key] = v;
  return true;
}

/* ---- the choice ---- */

static int64_t clamp_down(int64_t v, int64_t lo, int64_t hi, int64_t unit) {
  v = v / unit * unit;
  return v < lo ? lo : v > hi ? hi : v;
}

/* Every key's value for target t (formulas at the top), overrides last.
 * The attention keys depend on each call's head dims: here they get the
 * value for dh = dv = 64, and attn_blocks sizes them per call. */
static void tile_choose(const PassTarget *t, int64_t *v) {
  int64_t threads = t->threads >= 1 ? t->threads : 1;
  for (int k = 0; k < TILE_KEY_COUNT; k++) {
    switch ((TileKey)k) {
    case TILE_GEMM_KC: v[k] = clamp_down(t->l2 / 512, 64, 1024, 8); break;
    case TILE_GEMM_MC: break; /* from kc, below */
    case TILE_GEMM_NC: break;
    case TILE_GEMM_TASK_MACS: v[k] = (int64_t)1 << 17; break;
    case TILE_GEMM_SPLIT_MACS: v[k] = threads << 22; break;
    case TILE_ATTENTION_BLOCK_Q: break; /* per call, attn_blocks */
    case TILE_ATTENTION_BLOCK_K: break;
    case TILE_KEY_COUNT: break;
    }
    if (t->set[k])
      v[k] = t->tile[k];
  }
  int64_t kc = v[TILE_GEMM_KC];
  if (!t->set[TILE_GEMM_MC])
    v[TILE_GEMM_MC] = clamp_down(t->l2 / (8 * kc), 24, 1020, 12);
  if (!t->set[TILE_GEMM_NC])
    v[TILE_GEMM_NC] = clamp_down(t->l3 / (8 * kc * threads), 192, 8064, 192);
}

/* block_q and block_k of an attention call with head dims dh, dv (formulas
 * at the top), overrides last. */
static void attn_blocks(const PassTarget *t, int64_t dh, int64_t dv, int64_t *bq, int64_t *bk) {
  int64_t d = dh + dv > 0 ? dh + dv : 128;
  *bq = t->set[TILE_ATTENTION_BLOCK_Q] ? t->tile[TILE_ATTENTION_BLOCK_Q]
                                        : clamp_down(t->l1 / (4 * d), 16, 256, 16);
  *bk = t->set[TILE_ATTENTION_BLOCK_K] ? t->tile[TILE_ATTENTION_BLOCK_K]
                                        : clamp_down(t->l2 / (8 * (d + *bq)), 32, 2048, 32);
}

/* The value of a constant i64 argument, else fallback. */
static int64_t const_arg(const LStmt *s, const char *name, int64_t fallback) {
  const LExpr *e = s->args[loop_callee_arg(s->callee, name)];
  return e && e->kind == LX_CONST_I ? e->ival : fallback;
}

/* What the pass set, for its note. */
typedef struct TileCount {
  int linear, attention, flash;
  int64_t bq_min, bq_max, bk_min, bk_max; /* over the attention / flash calls */
} TileCount;

static void count_range(int64_t v, int64_t *lo, int64_t *hi, bool first) {
  if (first || v < *lo)
    *lo = v;
  if (first || v > *hi)
    *hi = v;
}

/* Sets s's arguments for the keys that concern its callee; counts calls. */
static void tile_apply(LoopProgram *p, LStmt *s, const PassTarget *t, const int64_t *v,
                       TileCount *n) {
  if (!s)
    return;
  if (s->kind == LS_CALL && (s->callee == LC_LINEAR || s->callee == LC_LINEAR_PACKED ||
                                s->callee == LC_LINEAR_PACKED_BF16 ||
                                s->callee == LC_LINEAR_PACKED_I8)) {
    for (int k = 0; k < TILE_KEY_COUNT; k++) {
      const char *arg = NULL;
      switch ((TileKey)k) {
      case TILE_GEMM_MC: arg = "mc"; break;
      case TILE_GEMM_NC: arg = "nc"; break;
      case TILE_GEMM_KC: arg = "kc"; break;
      case TILE_GEMM_TASK_MACS: arg = "task_macs"; break;
      case TILE_GEMM_SPLIT_MACS: arg = "split_macs"; break;
      case TILE_ATTENTION_BLOCK_Q: break;
      case TILE_ATTENTION_BLOCK_K: break;
      case TILE_KEY_COUNT: break;
      }
      if (arg)
        s->args[loop_callee_arg(s->callee, arg)] = lx_i(p, v[k]);
    }
    n->linear++;
  }
  if (s->kind == LS_CALL && (s->callee == LC_ATTENTION || s->callee == LC_ATTENTION_FLASH)) {
    int64_t bq, bk;
    attn_blocks(t, const_arg(s, "dh", 64), const_arg(s, "dv", 64), &bq, &bk);
    s->args[loop_callee_arg(s->callee, "block_q")] = lx_i(p, bq);
    count_range(bq, &n->bq_min, &n->bq_max, n->attention++ == 0);
    if (s->callee == LC_ATTENTION_FLASH) { /* rt_attention has no key blocks */
      s->args[loop_callee_arg(s->callee, "block_k")] = lx_i(p, bk);
      count_range(bk, &n->bk_min, &n->bk_max, n->flash++ == 0);
    }
  }
  for (int i = 0; i < s->n_stmts; i++)
    tile_apply(p, s->stmts[i], t, v, n);
}

/* "32K", "1M", or bytes. */
static void size_str(int64_t b, char *buf, size_t n) {
  if (b % (1 << 20) == 0)
    snprintf(buf, n, "%" PRId64 "M", b >> 20);
  else if (b % 1024 == 0)
    snprintf(buf, n, "%" PRId64 "K", b >> 10);
  else
    snprintf(buf, n, "%" PRId64, b);
}

bool pass_tile_run(LoopProgram *p, PassContext *ctx) {
  PassTarget host;
  const PassTarget *t = ctx->target;
  if (!t) {
    pass_target_host(&host);
    t = &host;
  }
  int64_t v[TILE_KEY_COUNT];
  tile_choose(t, v);
  TileCount n = {0};
  for (int i = 0; i < p->n_kernels; i++)
    tile_apply(p, p->kernels[i].body, t, v, &n);
  char l1[32], l2[32], l3[32], over[160] = "", attn[160] = "";
  size_str(t->l1, l1, sizeof l1);
  size_str(t->l2, l2, sizeof l2);
  size_str(t->l3, l3, sizeof l3);
  size_t k = 0;
  for (int i = 0; i < TILE_KEY_COUNT && k < sizeof over; i++)
    if (t->set[i])
      k += (size_t)snprintf(over + k, sizeof over - k, "%s%s", k ? "," : "; --tile ",
                            tile_keys[i].key);
  if (n.attention) {
    char bq[48], bk[48];
    snprintf(bq, sizeof bq, n.bq_min == n.bq_max ? "%" PRId64 : "%" PRId64 "..%" PRId64,
             n.bq_min, n.bq_max);
    snprintf(bk, sizeof bk, n.bk_min == n.bk_max ? "%" PRId64 : "%" PRId64 "..%" PRId64,
             n.bk_min, n.bk_max);
    snprintf(attn, sizeof attn, "; %d attention call%s: block_q=%s block_k=%s", n.attention,
             n.attention == 1 ? "" : "s", bq, n.flash ? bk : "-");
  }
  pass_note(ctx,
            "%d rt_linear call%s: mc=%" PRId64 " nc=%" PRId64 " kc=%" PRId64
            " task_macs=%" PRId64 " split_macs=%" PRId64 " (L1 %s, L2 %s, L3 %s, %d thread%s: %s%s)%s",
            n.linear, n.linear == 1 ? "" : "s", v[TILE_GEMM_MC], v[TILE_GEMM_NC], v[TILE_GEMM_KC],
            v[TILE_GEMM_TASK_MACS], v[TILE_GEMM_SPLIT_MACS], l1, l2, l3, t->threads,
            t->threads == 1 ? "" : "s", t->source, over, attn);
  return true;
}
