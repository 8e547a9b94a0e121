/* runtime/rt_unicode.h — the little Unicode the tokenizers need: UTF-8
 * decoding and encoding, general categories, simple lowercase, canonical
 * decomposition (NFD). Tables are generated from the Unicode Character
 * Database by tools/gen_unicode_tables.py (runtime/rt_unicode_data.h).
 *
 *     uint32_t cp; size_t at = 0;
 *     while (at < len) {
 *       at += rt_utf8_decode(s + at, len - at, &cp); // s already validated
 *       if (rt_uc_is_letter(cp)) ...
 *     }
 *
 * Libc only; C99. */
#ifndef TFMC_RT_UNICODE_H
#define TFMC_RT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* General categories, in the generated table's order. */
typedef enum RtUcCategory {
  RT_UC_LU, RT_UC_LL, RT_UC_LT, RT_UC_LM, RT_UC_LO,
  RT_UC_MN, RT_UC_MC, RT_UC_ME,
  RT_UC_ND, RT_UC_NL, RT_UC_NO,
  RT_UC_PC, RT_UC_PD, RT_UC_PS, RT_UC_PE, RT_UC_PI, RT_UC_PF, RT_UC_PO,
  RT_UC_SM, RT_UC_SC, RT_UC_SK, RT_UC_SO,
  RT_UC_ZS, RT_UC_ZL, RT_UC_ZP,
  RT_UC_CC, RT_UC_CF, RT_UC_CS, RT_UC_CO, RT_UC_CN,
  RT_UC_CATEGORY_COUNT
} RtUcCategory;

/* The longest canonical decomposition of one code point (Hangul: 3). */
#define RT_UC_NFD_MAX 4

/* Decodes one code point of s[0..len) (len >= 1), which must be valid UTF-8
 * (rt_utf8_valid in rt_json.h); returns the bytes it took. */
size_t rt_utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Writes cp (<= 0x10FFFF) as UTF-8 into out; returns 1..4. */
size_t rt_utf8_encode(uint32_t cp, char out[4]);

RtUcCategory rt_uc_category(uint32_t cp);
int rt_uc_is_letter(uint32_t cp); /* \p{L}: Lu Ll Lt Lm Lo */
int rt_uc_is_number(uint32_t cp); /* \p{N}: Nd Nl No */
/* \s: the White_Space property (PropList.txt; as Python's regex module). */
int rt_uc_is_space(uint32_t cp);
/* Simple lowercase (UnicodeData field 13); cp itself when it has none. */
uint32_t rt_uc_lower(uint32_t cp);
/* Canonical combining class. */
int rt_uc_ccc(uint32_t cp);
/* The full canonical decomposition of cp into out; returns its length
 * (1 and out[0] = cp when cp does not decompose). */
size_t rt_uc_decompose(uint32_t cp, uint32_t out[RT_UC_NFD_MAX]);
/* NFD in place over cps[0..n): every code point decomposed (cps must have
 * room: returns the new length, at most cap, or (size_t)-1 when it would not
 * fit), then marks reordered by combining class (canonical ordering). */
size_t rt_uc_nfd(uint32_t *cps, size_t n, size_t cap);

#endif
