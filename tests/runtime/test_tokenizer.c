/* tests/runtime/test_tokenizer.c — rt_tokenizer and rt_unicode: GPT-2 BPE
 * and BERT WordPiece against reference tokenizations of a 2140-line corpus
 * (tests/data/tokenizer/, made by tools/gen_tokenizer_refs.mjs with the npm
 * packages gpt-3-encoder and @huggingface/tokenizers), byte-exact round
 * trips of any UTF-8, refusals with messages, and the Unicode tables. */
#include "runtime/rt_json.h"
#include "runtime/rt_text.h"
#include "runtime/rt_tokenizer.h"
#include "runtime/rt_unicode.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DATA TFMC_SOURCE_DIR "/tests/data/tokenizer/"

/* ---- helpers ---- */

typedef struct Lines {
  char *text;
  char **line;
  size_t n;
} Lines;

static Lines read_lines(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  Lines l = {malloc((size_t)size + 1), NULL, 0};
  cr_assert_eq(fread(l.text, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  l.text[size] = '\0';
  for (long i = 0; i < size; i++)
    l.n += l.text[i] == '\n';
  l.line = malloc((l.n + 1) * sizeof *l.line);
  char *p = l.text;
  for (size_t k = 0; k < l.n; k++) {
    char *e = strchr(p, '\n');
    *e = '\0';
    l.line[k] = p;
    p = e + 1;
  }
  return l;
}

static void free_lines(Lines *l) {
  free(l->text);
  free(l->line);
}

/* "1 2 3" -> ids; returns the count */
static int64_t parse_ids(const char *s, int32_t **ids) {
  size_t cap = 16, n = 0;
  *ids = malloc(cap * sizeof **ids);
  char *e;
  for (;;) {
    long v = strtol(s, &e, 10);
    if (e == s)
      break;
    if (n == cap)
      *ids = realloc(*ids, (cap *= 2) * sizeof **ids);
    (*ids)[n++] = (int32_t)v;
    s = e;
  }
  return (int64_t)n;
}

static RtTokenizer *load(const char *spec) {
  RtTokenizer *t;
  char err[512];
  int rc = rt_tokenizer_load(spec, &t, err, sizeof err);
  cr_assert_eq(rc, 0, "%s: %s", spec, err);
  return t;
}

static void assert_ids(const int32_t *got, int64_t n_got, const char *want_text, const char *what,
                       size_t line) {
  int32_t *want;
  int64_t n_want = parse_ids(want_text, &want);
  int same = n_got == n_want && memcmp(got, want, (size_t)n_got * sizeof *got) == 0;
  if (!same) {
    int64_t k = 0;
    while (k < n_got && k < n_want && got[k] == want[k])
      k++;
    cr_assert(0, "%s line %zu: %lld ids, want %lld; first difference at %lld: %d vs %d", what,
              line + 1, (long long)n_got, (long long)n_want, (long long)k,
              k < n_got ? got[k] : -1, k < n_want ? want[k] : -1);
  }
  free(want);
}

static char *decode(const RtTokenizer *t, const int32_t *ids, int64_t n, size_t *len) {
  char *text, err[512];
  cr_assert_eq(rt_tokenizer_decode(t, ids, n, &text, len, err, sizeof err), 0, "%s", err);
  return text;
}

/* ---- GPT-2 ---- */

Test(tokenizer_gpt2, hello_world) {
  RtTokenizer *t = load("gpt2:" DATA "gpt2");
  cr_assert_eq(rt_tokenizer_kind(t), RT_TOKENIZER_GPT2);
  cr_assert_eq(rt_tokenizer_size(t), 50257);
  int32_t *ids;
  int64_t n;
  char err[512];
  cr_assert_eq(rt_tokenizer_encode(t, "Hello world", 11, &ids, &n, err, sizeof err), 0);
  cr_assert_eq(n, 2);
  cr_assert_eq(ids[0], 15496);
  cr_assert_eq(ids[1], 995);
  size_t len;
  const char *tok = rt_tokenizer_token(t, 995, &len);
  cr_assert_str_eq(tok, " world"); /* raw bytes, not "Ġworld" */
  cr_assert_str_eq(rt_tokenizer_token(t, 50256, NULL), "<|endoftext|>");
  free(ids);
  /* the special token stays whole, anywhere */
  cr_assert_eq(rt_tokenizer_encode(t, "a<|endoftext|><|endoftext|>", 27, &ids, &n, err, sizeof err), 0);
  cr_assert_eq(n, 3);
  cr_assert(ids[0] == 64 && ids[1] == 50256 && ids[2] == 50256);
  cr_assert_null(rt_tokenizer_token(t, 50257, NULL));
  free(ids);
  rt_tokenizer_destroy(t);
}

Test(tokenizer_gpt2, every_corpus_line_matches_the_reference_and_round_trips) {
  RtTokenizer *t = load("gpt2:" DATA "gpt2/vocab.json," DATA "gpt2/merges.txt");
  Lines corpus = read_lines(DATA "corpus.txt"), ref = read_lines(DATA "gpt2.ids");
  cr_assert_eq(corpus.n, ref.n);
  cr_assert_gt(corpus.n, 2000);
  for (size_t k = 0; k < corpus.n; k++) {
    int32_t *ids;
    int64_t n;
    char err[512];
    size_t len = strlen(corpus.line[k]);
    cr_assert_eq(rt_tokenizer_encode(t, corpus.line[k], len, &ids, &n, err, sizeof err), 0,
                 "%s", err);
    assert_ids(ids, n, ref.line[k], "gpt2.ids", k);
    size_t back_len;
    char *back = decode(t, ids, n, &back_len);
    cr_assert(back_len == len && memcmp(back, corpus.line[k], len) == 0, "line %zu: no round trip",
              k + 1);
    free(back);
    free(ids);
  }
  free_lines(&corpus);
  free_lines(&ref);
  rt_tokenizer_destroy(t);
}

Test(tokenizer_gpt2, the_whole_corpus_as_one_text) {
  RtTokenizer *t = load("gpt2:" DATA "gpt2/vocab.json"); /* merges.txt beside it */
  Lines ref = read_lines(DATA "gpt2_all.ids");
  FILE *f = fopen(DATA "corpus.txt", "rb");
  cr_assert(f);
  static char text[1 << 18];
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  cr_assert_lt(len, sizeof text);
  int32_t *ids;
  int64_t n;
  char err[512];
  cr_assert_eq(rt_tokenizer_encode(t, text, len, &ids, &n, err, sizeof err), 0, "%s", err);
  assert_ids(ids, n, ref.line[0], "gpt2_all.ids", 0);
  size_t back_len;
  char *back = decode(t, ids, n, &back_len);
  cr_assert(back_len == len && memcmp(back, text, len) == 0);
  free(back);
  free(ids);
  free_lines(&ref);
  rt_tokenizer_destroy(t);
}

/* Random valid UTF-8 over every plane, controls and whitespace included:
 * decode(encode(x)) == x byte for byte. */
Test(tokenizer_gpt2, any_utf8_round_trips) {
  RtTokenizer *t = load("gpt2:" DATA "gpt2/");
  uint64_t s = 0x9E3779B97F4A7C15u;
  char text[4096];
  for (int round = 0; round < 300; round++) {
    size_t len = 0;
    int n_cp = 1 + round % 200;
    for (int i = 0; i < n_cp; i++) {
      s = s * 6364136223846793005u + 1442695040888963407u;
      uint32_t r = (uint32_t)(s >> 33), cp;
      switch (r % 6) {
      case 0: cp = r % 0x80; break;             /* ASCII, controls included */
      case 1: cp = " \t\n\r'"[r % 5]; break;    /* spacing and apostrophes */
      case 2: cp = 0x80 + r % 0x780; break;     /* 2-byte */
      case 3: cp = 0x800 + r % 0xF800; break;   /* 3-byte */
      case 4: cp = 0x10000 + r % 0x100000; break;
      default: cp = 0x3000 + r % 0x100; break;  /* CJK symbols, U+3000 */
      }
      if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = 'x';
      len += rt_utf8_encode(cp, text + len);
    }
    cr_assert(rt_utf8_valid(text, len, NULL));
    int32_t *ids;
    int64_t n;
    char err[512];
    cr_assert_eq(rt_tokenizer_encode(t, text, len, &ids, &n, err, sizeof err), 0, "%s", err);
    size_t back_len;
    char *back = decode(t, ids, n, &back_len);
    cr_assert(back_len == len && memcmp(back, text, len) == 0, "round %d: no round trip", round);
    free(back);
    free(ids);
  }
  rt_tokenizer_destroy(t);
}

/* Random bytes, mostly not UTF-8: both tokenizers refuse exactly what
 * rt_utf8_valid refuses, naming its offset; the rest GPT-2 round-trips and
 * WordPiece encodes to ids of its vocabulary between [CLS] and [SEP]. */
Test(tokenizer_gpt2, random_bytes_are_refused_or_round_trip) {
  RtTokenizer *g = load("gpt2:" DATA "gpt2");
  RtTokenizer *w = load("wordpiece:" DATA "bert-base-uncased/vocab.txt:uncased");
  uint64_t s = 12345;
  char text[256];
  int valid_seen = 0;
  for (int round = 0; round < 2000; round++) {
    size_t len = (size_t)(round % 40);
    for (size_t i = 0; i < len; i++) {
      s = s * 6364136223846793005u + 1442695040888963407u;
      uint32_t r = (uint32_t)(s >> 33);
      /* mostly ASCII so that some strings are valid */
      text[i] = (char)(r % 4 ? r % 0x80 : 0x80 + r % 0x80);
    }
    size_t bad;
    int valid = rt_utf8_valid(text, len, &bad);
    valid_seen += valid;
    for (int k = 0; k < 2; k++) {
      RtTokenizer *t = k ? w : g;
      int32_t *ids;
      int64_t n;
      char err[512], want[128];
      int rc = rt_tokenizer_encode(t, text, len, &ids, &n, err, sizeof err);
      if (!valid) {
        snprintf(want, sizeof want, "the text is not valid UTF-8 (at byte offset %zu)", bad);
        cr_assert_neq(rc, 0);
        cr_assert_str_eq(err, want);
        continue;
      }
      cr_assert_eq(rc, 0, "%s", err);
      for (int64_t i = 0; i < n; i++)
        cr_assert(ids[i] >= 0 && ids[i] < rt_tokenizer_size(t));
      size_t back_len;
      char *back = decode(t, ids, n, &back_len);
      if (t == g)
        cr_assert(back_len == len && memcmp(back, text, len) == 0, "round %d", round);
      else
        cr_assert(n >= 2 && ids[0] == 101 && ids[n - 1] == 102);
      free(back);
      free(ids);
    }
  }
  cr_assert_gt(valid_seen, 100);
  rt_tokenizer_destroy(g);
  rt_tokenizer_destroy(w);
}

Test(tokenizer_gpt2, empty_text_and_invalid_utf8) {
  RtTokenizer *t = load("gpt2:" DATA "gpt2");
  int32_t *ids;
  int64_t n;
  char err[512];
  cr_assert_eq(rt_tokenizer_encode(t, "", 0, &ids, &n, err, sizeof err), 0);
  cr_assert_eq(n, 0);
  free(ids);
  cr_assert_neq(rt_tokenizer_encode(t, "ab\xc3(x", 5, &ids, &n, err, sizeof err), 0);
  cr_assert_null(ids);
  cr_assert_str_eq(err, "the text is not valid UTF-8 (at byte offset 2)");
  cr_assert_neq(rt_tokenizer_encode(t, "\xed\xa0\x80", 3, &ids, &n, err, sizeof err), 0);
  cr_assert(strstr(err, "offset 0"), "%s", err); /* a surrogate */
  /* decoding an id that splits a character gives its bytes */
  int32_t half = -1; /* the token of the single byte 0xc3 */
  size_t len;
  for (int32_t id = 0; id < 50257 && half < 0; id++) {
    const char *tok = rt_tokenizer_token(t, id, &len);
    if (len == 1 && (unsigned char)tok[0] == 0xc3)
      half = id;
  }
  cr_assert_geq(half, 0);
  char *b = decode(t, &half, 1, &len);
  cr_assert_eq(len, 1);
  cr_assert_eq((unsigned char)b[0], 0xc3);
  free(b);
  int32_t bad = 50257;
  cr_assert_neq(rt_tokenizer_decode(t, &bad, 1, &b, &len, err, sizeof err), 0);
  cr_assert_str_eq(err, "id 50257 is not in the tokenizer's vocabulary (50257 ids)");
  rt_tokenizer_destroy(t);
}

/* ---- WordPiece ---- */

static void check_wordpiece(const char *spec, const char *ids_file, const char *text_file) {
  RtTokenizer *t = load(spec);
  cr_assert_eq(rt_tokenizer_kind(t), RT_TOKENIZER_WORDPIECE);
  cr_assert_eq(rt_tokenizer_size(t), 30522);
  Lines corpus = read_lines(DATA "corpus.txt"), ref = read_lines(ids_file);
  Lines want_text = {0};
  if (text_file)
    want_text = read_lines(text_file);
  cr_assert_eq(corpus.n, ref.n);
  for (size_t k = 0; k < corpus.n; k++) {
    int32_t *ids;
    int64_t n;
    char err[512];
    cr_assert_eq(
        rt_tokenizer_encode(t, corpus.line[k], strlen(corpus.line[k]), &ids, &n, err, sizeof err),
        0, "%s", err);
    assert_ids(ids, n, ref.line[k], ids_file, k);
    if (text_file) {
      size_t len;
      char *back = decode(t, ids, n, &len);
      cr_assert_str_eq(back, want_text.line[k], "line %zu", k + 1);
      free(back);
    }
    free(ids);
  }
  free_lines(&corpus);
  free_lines(&ref);
  if (text_file)
    free_lines(&want_text);
  rt_tokenizer_destroy(t);
}

Test(tokenizer_wordpiece, uncased_matches_the_reference_on_every_line) {
  check_wordpiece("wordpiece:" DATA "bert-base-uncased/vocab.txt:uncased",
                  DATA "wordpiece_uncased.ids", DATA "wordpiece_uncased.txt");
}

Test(tokenizer_wordpiece, cased_matches_the_reference_on_every_line) {
  check_wordpiece("wordpiece:" DATA "bert-base-uncased/vocab.txt", DATA "wordpiece_cased.ids",
                  NULL);
}

Test(tokenizer_wordpiece, cls_sep_unk_and_decode) {
  RtTokenizer *t = load("wordpiece:" DATA "bert-base-uncased/vocab.txt:uncased");
  int32_t *ids;
  int64_t n;
  char err[512];
  const char *text = "Héllo, unaffable world! \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa4\x96";
  cr_assert_eq(rt_tokenizer_encode(t, text, strlen(text), &ids, &n, err, sizeof err), 0);
  /* [CLS] hello , una ##ffa ##ble world ! [UNK] [UNK] [UNK] [SEP]: bert-base-uncased
   * has neither 你 nor 好; each CJK ideograph is a word of its own */
  int32_t want[] = {101, 7592, 1010, 14477, 20961, 3468, 2088, 999, 100, 100, 100, 102};
  cr_assert_eq(n, (int64_t)(sizeof want / sizeof want[0]));
  cr_assert_arr_eq(ids, want, sizeof want);
  size_t len;
  char *back = decode(t, ids, n, &len);
  cr_assert_str_eq(back, "[CLS] hello , unaffable world ! [UNK] [UNK] [UNK] [SEP]");
  cr_assert_eq(len, strlen(back));
  free(back);
  free(ids);
  rt_tokenizer_destroy(t);
}

/* ---- loading ---- */

static void assert_load_fails(const char *spec, const char *want) {
  RtTokenizer *t = (RtTokenizer *)1;
  char err[512];
  cr_assert_neq(rt_tokenizer_load(spec, &t, err, sizeof err), 0, "%s loaded", spec);
  cr_assert_null(t);
  cr_assert(strstr(err, want), "%s: '%s' lacks '%s'", spec, err, want);
}

static char tmp_dir[64];

static void write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

Test(tokenizer_load, refusals_name_the_problem) {
  assert_load_fails("sentencepiece:x.model", "unknown tokenizer 'sentencepiece:x.model'");
  assert_load_fails("gpt2:", "expected gpt2:DIR");
  assert_load_fails("gpt2:/nonexistent", "cannot read /nonexistent/vocab.json");
  assert_load_fails("wordpiece:/nonexistent/vocab.txt:uncased", "cannot read /nonexistent/vocab.txt");
  strcpy(tmp_dir, "/tmp/tfmc_tokXXXXXX");
  cr_assert(mkdtemp(tmp_dir));
  char spec[160];
  snprintf(spec, sizeof spec, "gpt2:%s", tmp_dir);
  write_file("vocab.json", "[1, 2]");
  assert_load_fails(spec, "vocab.json: byte 0:");
  write_file("vocab.json", "{\"a\": 0, \"b\": -1}");
  assert_load_fails(spec, "the id of token 'b' is not an id");
  write_file("vocab.json", "{\"a\": 0, \"b\": 0}");
  assert_load_fails(spec, "id 0 is given twice");
  write_file("vocab.json", "{\"a\": 0, \"\\u0000\": 1}");
  assert_load_fails(spec, "is not made of GPT-2 byte symbols");
  write_file("vocab.json", "{\"a\": 0, \"b\": 1}");
  write_file("merges.txt", "#version: 0.2\na b\n");
  assert_load_fails(spec, "merges.txt:2: the merge of 'a b' is not in vocab.json");
  write_file("merges.txt", "#version: 0.2\na c\n");
  assert_load_fails(spec, "merges.txt:2: 'c' is not in vocab.json");
  write_file("merges.txt", "#version: 0.2\nab\n");
  assert_load_fails(spec, "merges.txt:2: expected two tokens");
  write_file("merges.txt", "");
  assert_load_fails(spec, "byte 0x00 (symbol '\xc4\x80') has no token");
  snprintf(spec, sizeof spec, "wordpiece:%s/vocab.txt", tmp_dir);
  write_file("vocab.txt", "[PAD]\n[UNK]\n[CLS]\nhello\n");
  assert_load_fails(spec, "no [SEP] token");
  write_file("vocab.txt", "[UNK]\n[CLS]\n[SEP]\nx\nx\n");
  assert_load_fails(spec, "token 'x' is given twice");
  const char *names[] = {"vocab.json", "merges.txt", "vocab.txt"};
  for (int i = 0; i < 3; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, names[i]);
    unlink(path);
  }
  rmdir(tmp_dir);
}

/* ---- Unicode tables ---- */

Test(unicode, categories_lowercase_and_nfd) {
  cr_assert_eq(rt_uc_category('A'), RT_UC_LU);
  cr_assert_eq(rt_uc_category(0x4E2D), RT_UC_LO);     /* 中, in a First/Last range */
  cr_assert_eq(rt_uc_category(0x0301), RT_UC_MN);
  cr_assert_eq(rt_uc_category(0x00BD), RT_UC_NO);     /* ½ */
  cr_assert_eq(rt_uc_category(0x3000), RT_UC_ZS);
  cr_assert_eq(rt_uc_category(0x1F600), RT_UC_SO);    /* 😀 */
  cr_assert_eq(rt_uc_category(0x0378), RT_UC_CN);     /* unassigned */
  cr_assert_eq(rt_uc_category(0x10FFFF), RT_UC_CN);
  cr_assert_eq(rt_uc_category(0x110000), RT_UC_CN);
  cr_assert(rt_uc_is_letter(0xE9) && !rt_uc_is_letter('1') && rt_uc_is_number(0x0663));
  cr_assert(rt_uc_is_space(0x85) && rt_uc_is_space(0x2028) && !rt_uc_is_space(0xFEFF));
  cr_assert_eq(rt_uc_lower('Q'), 'q');
  cr_assert_eq(rt_uc_lower(0x0130), 'i');
  cr_assert_eq(rt_uc_lower(0x03A3), 0x03C3);
  cr_assert_eq(rt_uc_lower(0x1E9E), 0xDF);            /* ẞ -> ß */
  cr_assert_eq(rt_uc_lower(0x10400), 0x10428);        /* Deseret */
  cr_assert_eq(rt_uc_ccc(0x0301), 230);
  cr_assert_eq(rt_uc_ccc(0x0323), 220);
  uint32_t s[16] = {0x1EC7};                          /* ệ: e, dot below, circumflex */
  size_t n = rt_uc_nfd(s, 1, 16);
  cr_assert_eq(n, 3);
  cr_assert(s[0] == 'e' && s[1] == 0x0323 && s[2] == 0x0302);
  uint32_t h[16] = {'a', 0xD55C, 'o', 0x0301, 0x0323}; /* 한; marks out of order */
  n = rt_uc_nfd(h, 5, 16);
  cr_assert_eq(n, 7);
  uint32_t want[] = {'a', 0x1112, 0x1161, 0x11AB, 'o', 0x0323, 0x0301};
  cr_assert_arr_eq(h, want, sizeof want);
  uint32_t tight[2] = {0xE9, 0xE9};
  cr_assert_eq(rt_uc_nfd(tight, 2, 3), (size_t)-1);
  char u[4];
  uint32_t cp;
  cr_assert_eq(rt_utf8_encode(0x1F600, u), 4);
  cr_assert_eq(rt_utf8_decode(u, 4, &cp), 4);
  cr_assert_eq(cp, 0x1F600);
}

/* ---- --text through a tokenizer (rt_text) ---- */

enum { SYM_B, SYM_S };

static const RtTensorInfo lm_inputs[] = {
    {"tokens", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 6, NULL, NULL},
    {"mask", RT_ELEM_U8, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_MASK, 0, "tokens", "lengths"},
};
static const RtTensorInfo lm_outputs[] = {
    {"logits", RT_ELEM_F32, 3, {{SYM_B, 0}, {SYM_S, 0}, {-1, 6}}},
};
static const RtTensorInfo gpt_inputs[] = {
    {"tokens", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 50257, NULL, NULL},
};
static const RtTensorInfo gpt_outputs[] = {
    {"logits", RT_ELEM_F32, 3, {{SYM_B, 0}, {SYM_S, 0}, {-1, 50257}}},
};

static RtModelInfo lm_info(const RtTensorInfo *in, int n_in, const RtTensorInfo *out) {
  RtModelInfo info = {.abi_version = RT_ABI_VERSION,
                      .name = "lm",
                      .n_syms = 2,
                      .sym_names = {"B", "S"},
                      .sym_max = {2, 4},
                      .n_inputs = n_in,
                      .inputs = in,
                      .n_outputs = 1,
                      .outputs = out,
                      .pad_id = 0};
  return info;
}

static char printed[4096];

static const char *print_bound(const RtModelInfo *info, const RtBound *b, const RtVocab *v) {
  FILE *f = tmpfile();
  cr_assert(f);
  cr_assert_eq(rt_text_print_bound(f, info, b, v), 0);
  rewind(f);
  size_t n = fread(printed, 1, sizeof printed - 1, f);
  printed[n] = '\0';
  fclose(f);
  return printed;
}

static void expect_text_refusal(const RtModelInfo *info, const RtVocab *v, const char *text,
                                const char *want) {
  RtBound b;
  char err[512];
  cr_assert_neq(rt_text_bind(info, NULL, text, v, &b, err, sizeof err), 0, "'%s' accepted", text);
  cr_assert_str_eq(err, want);
  for (int i = 0; i < RT_MAX_IO; i++)
    cr_assert(!b.inputs[i] && !b.outputs[i], "left allocated after a refusal");
}

Test(tokenizer_text, binds_encoded_text_and_prints_decoded_tokens) {
  strcpy(tmp_dir, "/tmp/tfmc_tokXXXXXX");
  cr_assert(mkdtemp(tmp_dir));
  write_file("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n\"\n##s\n");
  char spec[160];
  snprintf(spec, sizeof spec, "wordpiece:%s/vocab.txt:uncased", tmp_dir);
  RtTokenizer *t = load(spec);
  RtVocab v = {0};
  v.tokenizer = t;
  RtModelInfo info = lm_info(lm_inputs, 2, lm_outputs);
  RtBound b;
  char err[512];
  cr_assert_eq(rt_text_bind(&info, NULL, "HELLO \"", &v, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(b.syms[SYM_S], 4);
  const int32_t *ids = b.inputs[0];
  cr_assert(ids[0] == 2 && ids[1] == 4 && ids[2] == 5 && ids[3] == 3);
  int32_t argmax[4] = {4, 5, 1, 3};
  for (int l = 0; l < 4; l++)
    b.outputs[0][l * 6 + argmax[l]] = 1.0f;
  cr_assert_str_eq(print_bound(&info, &b, &v),
                   "logits [1,4,6], argmax per position:\n"
                   "  input:  \"[CLS]\" \"hello\" \"\\\"\" \"[SEP]\"\n"
                   "  text:   \"[CLS] hello \\\" [SEP]\"\n"
                   "  output: \"hello\" \"\\\"\" \"[UNK]\" \"[SEP]\"\n");
  rt_model_unbind(&info, &b);
  expect_text_refusal(&info, &v, "hellos",
                      "--text: token 2 '##s' has id 6, beyond the model's vocab 6");
  expect_text_refusal(&info, &v, "hello hello hello",
                      "--text: 5 tokens, longer than the model's max_len 4");
  expect_text_refusal(&info, &v, "h\xff", "--text: the text is not valid UTF-8 (at byte offset 1)");
  rt_tokenizer_destroy(t);
  char path[128];
  snprintf(path, sizeof path, "%s/vocab.txt", tmp_dir);
  unlink(path);
  rmdir(tmp_dir);
}

Test(tokenizer_text, gpt2_rows_escape_what_is_not_printable_utf8) {
  RtTokenizer *t = load("gpt2:" DATA "gpt2");
  RtVocab v = {0};
  v.tokenizer = t;
  RtModelInfo info = lm_info(gpt_inputs, 1, gpt_outputs);
  info.sym_max[SYM_S] = 16;
  RtBound b;
  char err[512];
  cr_assert_eq(rt_text_bind(&info, NULL, "\"é\"\t\\", &v, &b, err, sizeof err), 0, "%s", err);
  int64_t n = b.syms[SYM_S];
  const int32_t *ids = b.inputs[0];
  b.outputs[0][0 * 50257 + ids[0]] = 1.0f; /* the rest: argmax id 0, "!" */
  const char *p = print_bound(&info, &b, &v);
  cr_assert(strstr(p, "  text:   \"\\\"é\\\"\\t\\\\\"\n"), "%s", p);
  cr_assert_gt(n, 1);
  rt_model_unbind(&info, &b);
  /* a token that is half a character prints as \xNN */
  cr_assert_eq(rt_text_bind(&info, NULL, "\xf0\x9f\xa4\x96", &v, &b, err, sizeof err), 0);
  cr_assert_gt(b.syms[SYM_S], 1); /* 🤖 is more than one token */
  p = print_bound(&info, &b, &v);
  cr_assert(strstr(p, "  input:  \"\\xf0"), "%s", p);
  cr_assert(strstr(p, "  text:   \"🤖\"\n"), "%s", p);
  rt_model_unbind(&info, &b);
  rt_tokenizer_destroy(t);
}
