/* runtime/rt_text.h — inputs and outputs as text: one sequence of token ids
 * given on the command line (as ids, or as symbols of a vocabulary file) and
 * the summary of the outputs printed when no outputs file is asked for.
 * `tfmc run --tokens/--text` and standalone executables (rt_main.c) share
 * it, so both accept and refuse the same things with the same messages.
 *
 *     RtVocab v = {0};
 *     char err[512];
 *     RtBound b;
 *     if (rt_text_vocab_load("vocab.txt", &v, err, sizeof err) ||
 *         rt_text_bind(info, NULL, "7 3 9", &v, &b, err, sizeof err))
 *       fprintf(stderr, "prog: %s\n", err);       // exit 1
 *     ... run the model on b ...
 *     rt_text_print_bound(stdout, info, &b, &v);  // "  output: 3 7 9"
 *     rt_model_unbind(info, &b);
 *     rt_text_vocab_free(&v);
 *
 * Depends on libc, libm and rt_model only; C99. */
#ifndef TFMC_RT_TEXT_H
#define TFMC_RT_TEXT_H

#include "runtime/rt_model.h"
#include "runtime/rt_tokenizer.h"

#include <stdint.h>
#include <stdio.h>

/* A vocabulary file: one token per line, line k (from 0) is id k; a final
 * newline ends the last line, "\r\n" line ends are accepted. Or a real
 * tokenizer (rt_tokenizer.h, not owned: the caller destroys it): then
 * --text is any text, encoded by it, and ids print as its decoded tokens. */
typedef struct RtVocab {
  char **tok;  /* tok[k]: the symbol of id k; points into text */
  int64_t n;   /* number of ids */
  char *text;  /* the file's bytes, one NUL-terminated line per id */
  const RtTokenizer *tokenizer; /* when set, used instead of tok */
} RtVocab;

/* Reads path into *v (owned by v: free with rt_text_vocab_free). Returns 0,
 * or non-zero with a message naming the file (*v then holds nothing). */
int rt_text_vocab_load(const char *path, RtVocab *v, char *err, size_t errlen);
void rt_text_vocab_free(RtVocab *v);
/* The symbol of id, or NULL when v is NULL or id is not in it. */
const char *rt_text_vocab_symbol(const RtVocab *v, int64_t id);

/* Binds one sequence (batch 1) for a model taking the ids input "tokens"
 * and nothing else but its padding masks (derived from info->pad_id):
 * exactly one of tokens (ids separated by whitespace or commas) and text
 * (whitespace-separated symbols of v, which must then be given; or, when v
 * has a tokenizer, any text it encodes; symbols v lacks map to its unknown
 * token as in rt_text_ids). Refuses,
 * with a message: models needing other ids (src/tgt, token_types), ids out
 * of [0, vocab), symbols not in v or beyond the model's vocab, sequences
 * longer than the model's maximum, an empty sequence, a sequence that is
 * all padding. On success *out is bound as rt_model_bind binds it (free it
 * with rt_model_unbind); on failure nothing stays allocated. */
int rt_text_bind(const RtModelInfo *info, const char *tokens, const char *text, const RtVocab *v,
                 RtBound *out, char *err, size_t errlen);

/* The ids of one sequence, as rt_text_bind reads them: tokens (ids) or text
 * (symbols of v, or text v's tokenizer encodes) into ids[0..max_len), each
 * below vocab. Symbols of text that v lacks become its unknown token
 * (the first of <unk>, [UNK], <UNK>, UNK it has), else are refused naming
 * the symbol; text that is not valid UTF-8 is refused (rt_text_bind takes
 * any bytes: a vocabulary's symbols may be). Returns the number of ids, or
 * -1 with a message. For generation (prompts and sources). */
int64_t rt_text_ids(const char *tokens, const char *text, const RtVocab *v, int64_t vocab,
                    int64_t max_len, int32_t *ids, char *err, size_t errlen);

/* A tensor to summarise: f32 data for outputs, int32 for ids. */
typedef struct RtTextTensor {
  const char *name;
  int rank;
  int64_t dims[RT_MAX_RANK];
  const void *data;
} RtTextTensor;

/* The summary `tfmc run` prints without --outputs, one block per output:
 *   logits / log_probs [B,L,V]: "NAME [B,L,V], argmax per position:" then per
 *     row "  input:  IDS" (when ids, [B,L] int32, is given) and
 *     "  output: IDS", each id printed as its symbol when v has it; with a
 *     tokenizer each id as its decoded token, quoted and escaped, and the
 *     input row also decoded whole ("  text:   \"...\"");
 *   class_logits [B,C]: per row the argmax class, its softmax probability
 *     and the first 10 logits;
 *   anything else: mean, rms and the first 6 values.
 * ids may be NULL. Returns 0, or non-zero when out of memory. */
int rt_text_print_outputs(FILE *f, const RtTextTensor *outs, int n_out, const RtTextTensor *ids,
                          const RtVocab *v);
/* The same for a bound run of info: its outputs, with the ids input "tokens"
 * (or "tgt") as the input rows. */
int rt_text_print_bound(FILE *f, const RtModelInfo *info, const RtBound *b, const RtVocab *v);

#endif
