/* runtime/rt_unicode.c — UTF-8, general categories, lowercase and NFD over
 * the generated tables of rt_unicode_data.h (see rt_unicode.h).
 *
 * Invariants: every lookup is a binary search over a sorted table and
 * answers for any uint32_t (values past U+10FFFF are Cn, map to
 * themselves); decoding trusts its input to be valid UTF-8 (callers check
 * with rt_utf8_valid first) but never reads past len. Libc only, C99. */
#include "runtime/rt_unicode.h"

#include <string.h>

#include "runtime/rt_unicode_data.h"

typedef char rt_uc_nfd_max_fits[RT_UC_DECOMP_MAX <= RT_UC_NFD_MAX ? 1 : -1];

size_t rt_utf8_decode(const char *s, size_t len, uint32_t *cp) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = u[0] < 0x80 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
  if (n > len)
    n = len;
  uint32_t c = n == 1 ? u[0] : n == 2 ? u[0] & 0x1Fu : n == 3 ? u[0] & 0x0Fu : u[0] & 0x07u;
  for (size_t i = 1; i < n; i++)
    c = (c << 6) | (u[i] & 0x3Fu);
  *cp = c;
  return n;
}

size_t rt_utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The index of the last run of runs[0..n) starting at or before cp, where
 * a run starts at runs[k] >> shift (runs[0] starts at 0). */
static size_t find_run(const uint32_t *runs, size_t n, int shift, uint32_t cp) {
  size_t lo = 0, hi = n; /* runs[lo] starts <= cp; answer in [lo, hi) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if ((runs[mid] >> shift) <= cp)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

RtUcCategory rt_uc_category(uint32_t cp) {
  if (cp > 0x10FFFF)
    return RT_UC_CN;
  return (RtUcCategory)(rt_uc_cat_runs[find_run(rt_uc_cat_runs, RT_UC_CAT_RUNS, 5, cp)] & 31u);
}

int rt_uc_is_letter(uint32_t cp) { return rt_uc_category(cp) <= RT_UC_LO; }

int rt_uc_is_number(uint32_t cp) {
  RtUcCategory c = rt_uc_category(cp);
  return c >= RT_UC_ND && c <= RT_UC_NO;
}

int rt_uc_is_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

uint32_t rt_uc_lower(uint32_t cp) {
  size_t lo = 0, hi = RT_UC_LOWER;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t c = rt_uc_lower_map[2 * mid];
    if (c == cp)
      return rt_uc_lower_map[2 * mid + 1];
    if (c < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return cp;
}

int rt_uc_ccc(uint32_t cp) {
  if (cp > 0x10FFFF)
    return 0;
  return (int)(rt_uc_ccc_runs[find_run(rt_uc_ccc_runs, RT_UC_CCC_RUNS, 8, cp)] & 255u);
}

/* Hangul syllables decompose algorithmically (Unicode 3.12). */
enum { H_SBASE = 0xAC00, H_LBASE = 0x1100, H_VBASE = 0x1161, H_TBASE = 0x11A7, H_VCOUNT = 21,
       H_TCOUNT = 28, H_NCOUNT = H_VCOUNT * H_TCOUNT, H_SCOUNT = 19 * H_NCOUNT };

size_t rt_uc_decompose(uint32_t cp, uint32_t out[RT_UC_NFD_MAX]) {
  if (cp >= H_SBASE && cp < H_SBASE + H_SCOUNT) {
    uint32_t s = cp - H_SBASE;
    out[0] = H_LBASE + s / H_NCOUNT;
    out[1] = H_VBASE + (s % H_NCOUNT) / H_TCOUNT;
    if (s % H_TCOUNT == 0)
      return 2;
    out[2] = H_TBASE + s % H_TCOUNT;
    return 3;
  }
  size_t lo = 0, hi = RT_UC_DECOMP;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rt_uc_decomp_cp[mid] == cp) {
      size_t at = rt_uc_decomp_at[mid] >> 3, n = rt_uc_decomp_at[mid] & 7u;
      memcpy(out, rt_uc_decomp_pool + at, n * sizeof *out);
      return n;
    }
    if (rt_uc_decomp_cp[mid] < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  out[0] = cp;
  return 1;
}

size_t rt_uc_nfd(uint32_t *cps, size_t n, size_t cap) {
  /* decompose back to front so the expansion never overwrites unread input */
  size_t total = 0;
  uint32_t d[RT_UC_NFD_MAX];
  for (size_t i = 0; i < n; i++)
    total += rt_uc_decompose(cps[i], d);
  if (total > cap)
    return (size_t)-1;
  size_t w = total;
  for (size_t i = n; i-- > 0;) {
    size_t k = rt_uc_decompose(cps[i], d);
    w -= k;
    memcpy(cps + w, d, k * sizeof *d);
  }
  /* canonical ordering: a stable sort of each run of non-starters by ccc */
  for (size_t i = 1; i < total; i++) {
    uint32_t c = cps[i];
    int cc = rt_uc_ccc(c);
    if (cc == 0)
      continue;
    size_t j = i;
    while (j > 0 && rt_uc_ccc(cps[j - 1]) > cc) {
      cps[j] = cps[j - 1];
      j--;
    }
    cps[j] = c;
  }
  return total;
}
