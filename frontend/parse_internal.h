/* frontend/parse_internal.h — what parser.c and sema.c share (private to the
 * frontend; spec.h is the public interface).
 *
 * parser.c turns tokens into Blocks of Entries (one Entry per source line),
 * checks the weights block and drives spec_parse; sema.c checks a model
 * block and fills the ModelSpec. Both report through the helpers below so
 * that messages look alike.
 */
#ifndef TFMC_PARSE_INTERNAL_H
#define TFMC_PARSE_INTERNAL_H

#include "frontend/spec.h"

/* ---- parser.c: the syntax tree ---- */

typedef enum EntryKind {
  ENTRY_PLAIN, /* KEY value*                     (model entries, preset, ignore) */
  ENTRY_RULE,  /* TARGET '=' value*              (weights blocks and presets) */
  ENTRY_KIND_COUNT
} EntryKind;

/* One line of a block. */
typedef struct Entry {
  EntryKind kind;
  const Token *key;   /* the key, or the first identifier of the target */
  const Token *vals;  /* the values: after the key, or after '=' */
  int n_vals;
  IrLoc end;          /* just past the last token of the line */
  const char *target; /* ENTRY_RULE: normalised, "enc[i].attn.q" */
  bool bad;           /* a lexical or syntax error was already reported on this line */
} Entry;

typedef enum BlockKind { BLOCK_MODEL, BLOCK_WEIGHTS, BLOCK_KIND_COUNT } BlockKind;

typedef struct Block {
  BlockKind kind;
  const Token *keyword; /* 'model' / 'weights' */
  const Token *name;    /* NULL when missing (already reported) */
  Entry *entries;
  int n_entries;
} Block;

/* Parses a whole file's tokens into blocks. Syntax errors are reported to d;
 * recovery is by line, so every line gets a chance to be checked. */
Block *parse_blocks(Arena *a, const Token *toks, int n_toks, Diags *d,
                    int *n_blocks);

/* Parses a bare list of weights-block lines (a preset's text). */
Entry *parse_rule_lines(Arena *a, const Token *toks, int n_toks, Diags *d,
                        int *n_entries);

/* ---- helpers for messages (parser.c) ---- */

/* A token as a message shows it: "'heads'", "end of line", "end of file".
 * Long tokens are shortened. */
const char *tok_show(Arena *a, const Token *t);
/* s, shortened to about 40 bytes for a message. */
const char *spec_clip(Arena *a, const char *s);
/* The location just past the token. */
IrLoc tok_end(const Token *t);
/* Index of the word in words[0..n) nearest to s with an edit distance of at
 * most 2 (transpositions count 1), or -1. */
int spec_nearest(const char *s, const char *const *words, int n);
/* "a, b or c" built from words[0..n) where mask bit i selects words[i]
 * (mask 0: all). */
const char *spec_word_list(Arena *a, const char *const *words, int n,
                           unsigned mask, const char *last_sep);

/* ---- sema.c ---- */

/* Checks a model block and fills a ModelSpec. Reports every problem to d;
 * the returned spec is only meaningful when no error was reported. */
ModelSpec *sema_model(Arena *a, const Block *b, Diags *d);

#endif
