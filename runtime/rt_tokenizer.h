/* runtime/rt_tokenizer.h — real tokenizers: text to token ids and back, as
 * the models' own tokenizers do it.
 *
 *   gpt2       GPT-2's byte-level BPE from Hugging Face's vocab.json and
 *              merges.txt: the GPT-2 pre-tokenisation regex
 *                's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *              (written by hand over UTF-8), each piece's bytes as the
 *              bytes-to-unicode symbols, merged by rank; "<|endoftext|>"
 *              in the text is its one special id, as Hugging Face's GPT-2
 *              tokenizer takes it. Any UTF-8 text round-trips exactly:
 *              decode(encode(x)) == x.
 *   wordpiece  BERT's WordPiece from vocab.txt, as BertTokenizer does it:
 *              clean text (drop NUL, U+FFFD and controls; whitespace to
 *              spaces), spaces around CJK ideographs, split on whitespace;
 *              when uncased lowercase (Python's str.lower, final sigma
 *              included) and strip accents (NFD, drop Mn);
 *              split off punctuation; then greedy longest-match-first
 *              WordPiece with "##" continuations, [UNK] for a word with no
 *              match or over 100 characters; [CLS] ... [SEP] around it.
 *              Special tokens written in the text ([CLS] [SEP] [PAD] [UNK]
 *              [MASK]) stay whole, as BertTokenizer keeps them.
 *              Decoding is convert_tokens_to_string: tokens joined by
 *              spaces, " ##" removed.
 *
 *     RtTokenizer *t;
 *     char err[512];
 *     int32_t *ids; int64_t n;
 *     if (rt_tokenizer_load("gpt2:tests/data/tokenizer/gpt2", &t, err, sizeof err) ||
 *         rt_tokenizer_encode(t, "Hello world", 11, &ids, &n, err, sizeof err))
 *       fprintf(stderr, "prog: %s\n", err);  // ids = {15496, 995}
 *     char *text; size_t len;
 *     rt_tokenizer_decode(t, ids, n, &text, &len, err, sizeof err); // "Hello world"
 *     free(text); free(ids);
 *     rt_tokenizer_destroy(t);
 *
 * Where Python's and JavaScript's tokenizers differ, this follows Python's:
 * \s is the White_Space property (U+0085 is a space, U+FEFF is not), and
 * BERT drops unassigned code points (category Cn) with the controls.
 *
 * Libc and rt_unicode / rt_json / rt_text / rt_model (messages) only; C99. */
#ifndef TFMC_RT_TOKENIZER_H
#define TFMC_RT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef enum RtTokenizerKind {
  RT_TOKENIZER_GPT2,
  RT_TOKENIZER_WORDPIECE,
  RT_TOKENIZER_KIND_COUNT
} RtTokenizerKind;

typedef struct RtTokenizer RtTokenizer;

/* Loads the tokenizer a command-line spec names (owned by the caller: free
 * with rt_tokenizer_destroy):
 *   gpt2:DIR                       DIR/vocab.json and DIR/merges.txt
 *   gpt2:VOCAB.json,MERGES.txt
 *   wordpiece:VOCAB.txt            cased (text as is)
 *   wordpiece:VOCAB.txt:uncased    lowercased, accents stripped (bert-base-uncased)
 * Returns 0, or non-zero with a message naming the file and line. */
int rt_tokenizer_load(const char *spec, RtTokenizer **out, char *err, size_t errlen);
/* The files a spec names (what rt_tokenizer_load reads), so a command can
 * refuse an output that would overwrite one: files[0..n) malloc'd, freed by
 * rt_tokenizer_files_free. Returns 0, or non-zero with a message. */
typedef struct RtTokenizerFiles {
  RtTokenizerKind kind;
  int uncased;     /* wordpiece */
  char *files[2];  /* gpt2: vocab.json, merges.txt; wordpiece: vocab.txt */
  int n;
} RtTokenizerFiles;
int rt_tokenizer_files(const char *spec, RtTokenizerFiles *f, char *err, size_t errlen);
void rt_tokenizer_files_free(RtTokenizerFiles *f);
int rt_tokenizer_load_gpt2(const char *vocab_json, const char *merges_txt, RtTokenizer **out,
                           char *err, size_t errlen);
int rt_tokenizer_load_wordpiece(const char *vocab_txt, int uncased, RtTokenizer **out, char *err,
                                size_t errlen);
void rt_tokenizer_destroy(RtTokenizer *t);

RtTokenizerKind rt_tokenizer_kind(const RtTokenizer *t);
/* The number of ids (the largest id + 1). */
int64_t rt_tokenizer_size(const RtTokenizer *t);
/* The token of id as the vocabulary file writes it (GPT-2: its bytes, not
 * the bytes-to-unicode symbols), NUL-terminated, owned by t; NULL when id is
 * not in the vocabulary. *len (when not NULL) gets its length. */
const char *rt_tokenizer_token(const RtTokenizer *t, int64_t id, size_t *len);

/* Encodes text[0..len) into *ids (malloc'd, owned by the caller; *n of
 * them). wordpiece puts [CLS] first and [SEP] last. Refuses invalid UTF-8
 * with a message naming the byte offset. Returns 0 or non-zero. */
int rt_tokenizer_encode(const RtTokenizer *t, const char *text, size_t len, int32_t **ids,
                        int64_t *n, char *err, size_t errlen);
/* Decodes ids into *text (malloc'd, NUL-terminated, owned by the caller;
 * *len bytes without the NUL). GPT-2 gives back the exact bytes, which may
 * be invalid UTF-8 for ids that split a character. Refuses ids not in the
 * vocabulary. Returns 0 or non-zero. */
int rt_tokenizer_decode(const RtTokenizer *t, const int32_t *ids, int64_t n, char **text,
                        size_t *len, char *err, size_t errlen);

#endif
