/* tests/fuzz/fuzz_tokenizer.c — fuzz harness for the runtime's tokenizers
 * (runtime/rt_tokenizer.c): GPT-2 byte-level BPE and BERT WordPiece (cased
 * and uncased), with the real vocabularies in tests/data/tokenizer, loaded
 * once per process.
 *
 * The first byte chooses the tokenizer and whether the rest is text to
 * encode or little-endian int32 ids to decode. Invariants (a violation
 * aborts, which the replay driver and libFuzzer report as a crash):
 *   - valid UTF-8 (as this file checks it: shortest forms, no surrogates,
 *     at most U+10FFFF) is always encoded; anything refused has a message;
 *   - every id encoded is in the vocabulary (rt_tokenizer_token knows it);
 *   - GPT-2: decode(encode(text)) gives back the exact bytes;
 *   - WordPiece: [CLS] first, [SEP] last, and the ids decode;
 *   - decode accepts ids exactly when each is in the vocabulary, and GPT-2's
 *     decode of n ids is the concatenation of their tokens. */
#include "runtime/rt_tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TFMC_TEST_DATA_DIR
#error "TFMC_TEST_DATA_DIR must name tests/data"
#endif

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_tokenizer: invariant broken: %s\n", what);
    abort();
  }
}

static RtTokenizer *toks[3]; /* gpt2, wordpiece cased, wordpiece uncased */

static void load_all(void) {
  if (toks[0]) return;
  static const char *const specs[3] = {
      "gpt2:" TFMC_TEST_DATA_DIR "/tokenizer/gpt2",
      "wordpiece:" TFMC_TEST_DATA_DIR "/tokenizer/bert-base-uncased/vocab.txt",
      "wordpiece:" TFMC_TEST_DATA_DIR "/tokenizer/bert-base-uncased/vocab.txt:uncased",
  };
  for (int i = 0; i < 3; i++) {
    char err[512];
    if (rt_tokenizer_load(specs[i], &toks[i], err, sizeof err) != 0) {
      fprintf(stderr, "fuzz_tokenizer: %s\n", err);
      abort();
    }
  }
}

/* Strict UTF-8: 1 when s[0..n) is well formed. */
static int utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    uint32_t cp;
    int len;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return 0;
    }
    if (i + (size_t)len > n) return 0;
    for (int k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    i += (size_t)len;
  }
  return 1;
}

static void fuzz_encode(const RtTokenizer *t, int gpt2, const uint8_t *data, size_t size) {
  int32_t *ids = NULL;
  int64_t n = -1;
  char err[512] = "";
  int rc = rt_tokenizer_encode(t, (const char *)data, size, &ids, &n, err, sizeof err);
  if (rc != 0) {
    check(err[0] != 0, "refusal has a message");
    check(!utf8_valid(data, size), "valid UTF-8 is encoded");
    return;
  }
  check(n >= 0 && (n == 0 || ids != NULL), "ids returned");
  for (int64_t i = 0; i < n; i++) check(rt_tokenizer_token(t, ids[i], NULL) != NULL, "id in vocab");
  if (!gpt2) {
    size_t l;
    const char *first = n >= 2 ? rt_tokenizer_token(t, ids[0], &l) : NULL;
    check(first && strcmp(first, "[CLS]") == 0, "[CLS] first");
    const char *last = rt_tokenizer_token(t, ids[n - 1], &l);
    check(last && strcmp(last, "[SEP]") == 0, "[SEP] last");
  }
  char *text = NULL;
  size_t len = 0;
  rc = rt_tokenizer_decode(t, ids, n, &text, &len, err, sizeof err);
  check(rc == 0 && text != NULL && text[len] == 0, "encoded ids decode");
  if (gpt2) check(len == size && memcmp(text, data, size) == 0, "GPT-2 round trip is exact");
  free(text);
  free(ids);
}

static void fuzz_decode(const RtTokenizer *t, int gpt2, const uint8_t *data, size_t size) {
  int64_t n = (int64_t)(size / 4);
  int32_t *ids = calloc((size_t)(n ? n : 1), sizeof *ids);
  check(ids != NULL, "malloc");
  int all_known = 1;
  size_t expect_len = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
                 (uint32_t)data[4 * i + 2] << 16 | (uint32_t)data[4 * i + 3] << 24;
    /* small ids most of the time, so most inputs are accepted */
    ids[i] = (u & 0x80000000u) ? (int32_t)u : (int32_t)(u % (uint32_t)(rt_tokenizer_size(t) + 8));
    size_t l = 0;
    if (!rt_tokenizer_token(t, ids[i], &l)) all_known = 0;
    expect_len += l;
  }
  char *text = NULL;
  size_t len = 0;
  char err[512] = "";
  int rc = rt_tokenizer_decode(t, ids, n, &text, &len, err, sizeof err);
  if (rc != 0) {
    check(err[0] != 0, "refusal has a message");
    check(!all_known, "ids in the vocabulary decode");
  } else {
    check(all_known, "ids not in the vocabulary are refused");
    check(text != NULL && text[len] == 0, "decoded text is NUL-terminated");
    if (gpt2) {
      check(len == expect_len, "GPT-2 decode is the concatenation of its tokens");
      size_t at = 0;
      for (int64_t i = 0; i < n; i++) {
        size_t l;
        const char *tok = rt_tokenizer_token(t, ids[i], &l);
        check(memcmp(text + at, tok, l) == 0, "GPT-2 decode is the concatenation of its tokens");
        at += l;
      }
    }
  }
  free(text);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  load_all();
  int which = data[0] % 3, decode = (data[0] / 3) % 2;
  if (decode)
    fuzz_decode(toks[which], which == 0, data + 1, size - 1);
  else
    fuzz_encode(toks[which], which == 0, data + 1, size - 1);
  return 0;
}
