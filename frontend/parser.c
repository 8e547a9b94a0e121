/* frontend/parser.c — the .tfm syntax: tokens -> blocks of line entries.
 *
 *   spec    := NL* (item NL*)*
 *   item    := ('model' | 'weights') IDENT '{' NL+ (line NL+)* '}'
 *   line    := KEY value*                         value := IDENT | INT | FLOAT | STRING
 *            | TARGET '=' value*                  (weights blocks and presets only)
 *   TARGET  := IDENT ('[' 'i' ']')? ('.' IDENT)*
 *
 * Recovery is by line: an error inside a line is reported once and the rest
 * of the line is skipped, and the line is still recorded (marked bad) so that
 * sema knows the key was given and reports no "missing key" for it. A line
 * that holds a lexical error (TOK_ERROR) is marked bad without a second
 * message. A block left open is closed at end of file, or where the next
 * 'model NAME {' / 'weights NAME {' begins, with an error and a note at its
 * '{'.
 *
 * Also here: the message helpers shared with sema.c (parse_internal.h), the
 * weights-block checks (the same rule reader serves the user's lines and the
 * presets' texts) and spec_parse, which runs lexer, parser and both checks
 * and enforces one model block, at most one weights block, named alike.
 */
#include "frontend/parse_internal.h"

#include <string.h>

typedef struct Parser {
  Arena *a;
  Diags *d;
  const Token *t;
  int pos, n;
  const bool *line_err; /* [n]: a TOK_ERROR from here to the end of the line */
  bool in_block;    /* '}' ends a line and closes the block */
  bool allow_rules; /* TARGET '=' lines are allowed */
} Parser;

/* ---- message helpers ---- */

const char *spec_clip(Arena *a, const char *s) {
  size_t n = strlen(s);
  if (n <= 40) return s;
  n = 36;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 sequence */
  return arena_printf(a, "%.*s...", (int)n, s);
}

const char *tok_show(Arena *a, const Token *t) {
  switch (t->kind) {
  case TOK_EOF: return "end of file";
  case TOK_NEWLINE: return "end of line";
  case TOK_IDENT: case TOK_INT: case TOK_FLOAT: case TOK_STRING:
  case TOK_LBRACE: case TOK_RBRACE: case TOK_LBRACKET: case TOK_RBRACKET:
  case TOK_EQUALS: case TOK_DOT: case TOK_ERROR: case TOK_KIND_COUNT:
    break;
  }
  /* a string shows as written, in its own quotes */
  const char *q = t->kind == TOK_STRING ? "" : "'";
  const char *text = spec_clip(a, arena_strndup(a, t->start, (size_t)t->len));
  bool clipped = t->len > 40;
  return arena_printf(a, "%s%s%s", q, text, clipped && t->kind == TOK_STRING ? "\"" : q);
}

IrLoc tok_end(const Token *t) {
  IrLoc l = t->loc;
  l.col += t->len;
  return l;
}

/* Optimal string alignment distance, capped: returns 3 for anything > 2. */
static int edit_distance(const char *s, const char *t) {
  size_t n = strlen(s), m = strlen(t);
  if (n > 64 || m > 64 || (n > m ? n - m : m - n) > 2) return 3;
  int d[65][65];
  for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int cost = s[i - 1] != t[j - 1];
      int v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && s[i - 1] == t[j - 2] && s[i - 2] == t[j - 1] &&
          d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[n][m] > 2 ? 3 : d[n][m];
}

int spec_nearest(const char *s, const char *const *words, int n) {
  int best = -1, best_d = 3;
  for (int i = 0; i < n; i++) {
    int dist = edit_distance(s, words[i]);
    if (dist < best_d) best = i, best_d = dist;
  }
  return best;
}

const char *spec_word_list(Arena *a, const char *const *words, int n,
                           unsigned mask, const char *last_sep) {
  int total = 0;
  for (int i = 0; i < n; i++)
    if (!mask || (mask >> i & 1)) total++;
  const char *out = "";
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (mask && !(mask >> i & 1)) continue;
    const char *sep = k == 0 ? "" : k == total - 1 ? last_sep : ", ";
    out = arena_printf(a, "%s%s%s", out, sep, words[i]);
    k++;
  }
  return out;
}

/* ---- token cursor ---- */

static const Token *peek(Parser *p) {
  return &p->t[p->pos];
}

static const Token *peek_at(Parser *p, int k) {
  int i = p->pos + k;
  return i < p->n ? &p->t[i] : &p->t[p->n - 1];
}

static const Token *next(Parser *p) {
  const Token *t = &p->t[p->pos];
  if (t->kind != TOK_EOF) p->pos++;
  return t;
}

static bool at_line_end(Parser *p) {
  TokKind k = peek(p)->kind;
  return k == TOK_NEWLINE || k == TOK_EOF || (p->in_block && k == TOK_RBRACE);
}

static void skip_line(Parser *p) {
  while (!at_line_end(p)) next(p);
}

static void skip_newlines(Parser *p) {
  while (peek(p)->kind == TOK_NEWLINE) next(p);
}

static bool is_word(const Token *t, const char *w) {
  return t->kind == TOK_IDENT && strcmp(t->str, w) == 0;
}

/* Looked up, not scanned: a line of many headers asks once per header,
 * which scanning made quadratic (20000 headers on one line: 11 s). */
static bool line_has_error(Parser *p) {
  return p->pos < p->n && p->line_err[p->pos];
}

static Parser parser_make(Arena *a, Diags *d, const Token *toks, int n_toks, bool allow_rules) {
  bool *err = arena_alloc(a, (size_t)(n_toks > 0 ? n_toks : 1));
  bool after = false;
  for (int i = n_toks - 1; i >= 0; i--) {
    TokKind k = toks[i].kind;
    if (k == TOK_NEWLINE || k == TOK_EOF) after = false;
    else if (k == TOK_ERROR) after = true;
    err[i] = after;
  }
  return (Parser){.a = a, .d = d, .t = toks, .n = n_toks, .line_err = err,
                  .allow_rules = allow_rules};
}

static bool is_value(const Token *t) {
  return t->kind == TOK_IDENT || t->kind == TOK_INT || t->kind == TOK_FLOAT ||
         t->kind == TOK_STRING;
}

/* Does a new block begin here: 'model' or 'weights', a name, '{'? */
static bool at_block_start(Parser *p) {
  const Token *t = peek(p);
  return (is_word(t, "model") || is_word(t, "weights")) &&
         peek_at(p, 1)->kind == TOK_IDENT && peek_at(p, 2)->kind == TOK_LBRACE;
}

/* ---- lines ---- */

/* A growable string in the arena (targets can be long in hostile input, so
 * they are not rebuilt with printf for every part). */
typedef struct StrBuf {
  char *s;
  int len, cap;
} StrBuf;

static void strbuf_add(Arena *a, StrBuf *b, const char *s, int n) {
  arena_grow(a, (void **)&b->s, &b->cap, b->len + n + 1, 1);
  memcpy(b->s + b->len, s, (size_t)n);
  b->len += n;
  b->s[b->len] = 0;
}

/* TARGET := IDENT ('[' 'i' ']')? ('.' IDENT)*   then '='.
 * Returns the normalised text, or NULL after reporting. */
static const char *parse_target(Parser *p) {
  const Token *first = next(p);
  StrBuf text = {0};
  strbuf_add(p->a, &text, first->str, first->len);
  if (peek(p)->kind == TOK_LBRACKET) {
    next(p);
    const Token *idx = peek(p);
    if (!is_word(idx, "i")) {
      diag_error(p->d, idx->loc, "expected 'i' inside '[ ]', got %s (a rule covers every "
                 "layer: %s[i])", tok_show(p->a, idx), spec_clip(p->a, first->str));
      return NULL;
    }
    next(p);
    if (peek(p)->kind != TOK_RBRACKET) {
      diag_error(p->d, peek(p)->loc, "expected ']' after '%s[i', got %s",
                 spec_clip(p->a, first->str),
                 tok_show(p->a, peek(p)));
      return NULL;
    }
    next(p);
    strbuf_add(p->a, &text, "[i]", 3);
  }
  while (peek(p)->kind == TOK_DOT) {
    next(p);
    const Token *part = peek(p);
    if (part->kind != TOK_IDENT) {
      diag_error(p->d, part->loc, "expected a name after '%s.', got %s", spec_clip(p->a, text.s),
                 tok_show(p->a, part));
      return NULL;
    }
    next(p);
    strbuf_add(p->a, &text, ".", 1);
    strbuf_add(p->a, &text, part->str, part->len);
  }
  if (peek(p)->kind != TOK_EQUALS) {
    diag_error(p->d, peek(p)->loc, "expected '=' after the target '%s', got %s",
               spec_clip(p->a, text.s),
               tok_show(p->a, peek(p)));
    return NULL;
  }
  next(p);
  return text.s;
}

/* One line: fills e and returns true, or returns false when the line holds
 * nothing worth recording (it did not start with a name). Leaves the cursor
 * at the line's end (NEWLINE, EOF, or a '}' in a block). */
static bool parse_line(Parser *p, Entry *e) {
  memset(e, 0, sizeof *e);
  bool lex_bad = line_has_error(p);
  const Token *key = peek(p);
  if (key->kind != TOK_IDENT) {
    if (!lex_bad && key->kind != TOK_ERROR) {
      if (p->allow_rules)
        diag_error(p->d, key->loc, "expected 'preset', 'ignore' or a rule 'TARGET = ...', "
                   "got %s", tok_show(p->a, key));
      else
        diag_error(p->d, key->loc, "expected a key at the start of the line, got %s",
                   tok_show(p->a, key));
    }
    skip_line(p);
    return false;
  }
  e->kind = ENTRY_PLAIN;
  e->key = key;
  e->bad = lex_bad;
  TokKind k1 = peek_at(p, 1)->kind;
  if (p->allow_rules && (k1 == TOK_LBRACKET || k1 == TOK_DOT || k1 == TOK_EQUALS)) {
    e->kind = ENTRY_RULE;
    if (lex_bad) {
      skip_line(p);
      return true;
    }
    e->target = parse_target(p);
    if (!e->target) {
      e->bad = true;
      skip_line(p);
      return true;
    }
  } else {
    next(p);
  }
  e->vals = peek(p);
  e->end = tok_end(key);
  while (!at_line_end(p)) {
    const Token *v = peek(p);
    if (!e->bad && !is_value(v)) {
      diag_error(p->d, v->loc, "expected a value (a name, a number or a \"string\"), got %s",
                 tok_show(p->a, v));
      e->bad = true;
    }
    e->n_vals++;
    e->end = tok_end(v);
    next(p);
  }
  if (e->kind == ENTRY_RULE && e->n_vals == 0)
    e->end = tok_end(&p->t[p->pos - 1]);
  if (p->in_block && peek(p)->kind == TOK_RBRACE && !e->bad) {
    diag_error(p->d, peek(p)->loc, "'}' must be on a line of its own");
  }
  return true;
}

static void add_entry(Parser *p, Block *b, const Entry *e, int *cap) {
  arena_grow(p->a, (void **)&b->entries, cap, b->n_entries + 1, sizeof(Entry));
  b->entries[b->n_entries++] = *e;
}

/* item := ('model' | 'weights') IDENT '{' NL+ (line NL+)* '}' */
static void parse_block(Parser *p, Block *b) {
  const Token *kw = next(p);
  memset(b, 0, sizeof *b);
  b->kind = strcmp(kw->str, "model") == 0 ? BLOCK_MODEL : BLOCK_WEIGHTS;
  b->keyword = kw;
  bool lex_bad = line_has_error(p);
  while (peek(p)->kind == TOK_ERROR) next(p);
  bool reported = lex_bad; /* one message per header */
  if (peek(p)->kind == TOK_IDENT) {
    b->name = next(p);
  } else if (!reported) {
    diag_error(p->d, peek(p)->loc, "expected a name after '%s', got %s", kw->str,
               tok_show(p->a, peek(p)));
    reported = true;
  }
  while (peek(p)->kind == TOK_ERROR) next(p);
  /* the block as messages name it: 'model tiny' */
  const char *what = b->name ? arena_printf(p->a, "'%s %s'", kw->str,
                                            spec_clip(p->a, b->name->str))
                             : arena_printf(p->a, "'%s'", kw->str);
  const Token *lbrace = NULL;
  if (peek(p)->kind == TOK_LBRACE) {
    lbrace = next(p);
  } else {
    if (!reported)
      diag_error(p->d, peek(p)->loc, "expected '{' after %s, got %s", what,
                 tok_show(p->a, peek(p)));
    /* the '{' may be further on this line or alone on the next one */
    while (!at_line_end(p) && peek(p)->kind != TOK_LBRACE) next(p);
    if (peek(p)->kind == TOK_NEWLINE) {
      int save = p->pos;
      skip_newlines(p);
      if (peek(p)->kind != TOK_LBRACE) p->pos = save;
    }
    if (peek(p)->kind == TOK_LBRACE) lbrace = next(p);
  }
  const Token *opener = lbrace ? lbrace : kw;
  if (lbrace && !at_line_end(p) && peek(p)->kind != TOK_RBRACE) {
    /* reported once; an entry that follows is still read */
    if (!line_has_error(p))
      diag_error(p->d, peek(p)->loc, "expected a new line after '{': one entry per line");
    if (peek(p)->kind != TOK_IDENT) {
      p->in_block = true;
      skip_line(p);
      p->in_block = false;
    }
  }

  bool saved_in_block = p->in_block, saved_rules = p->allow_rules;
  p->in_block = true;
  p->allow_rules = b->kind == BLOCK_WEIGHTS;
  int cap = 0;
  for (;;) {
    skip_newlines(p);
    const Token *t = peek(p);
    if (t->kind == TOK_EOF) {
      if (lbrace) { /* without a '{' the header's error says enough */
        diag_error(p->d, t->loc, "missing '}' at end of file");
        diag_note(p->d, opener->loc, "to close %s opened here", what);
      }
      break;
    }
    if (t->kind == TOK_RBRACE) {
      next(p);
      if (peek(p)->kind != TOK_NEWLINE && peek(p)->kind != TOK_EOF) {
        if (!line_has_error(p))
          diag_error(p->d, peek(p)->loc, "expected a new line after '}', got %s",
                     tok_show(p->a, peek(p)));
        p->in_block = false;
        skip_line(p);
      }
      break;
    }
    if (at_block_start(p)) {
      if (lbrace) {
        diag_error(p->d, t->loc, "missing '}' before the next block");
        diag_note(p->d, opener->loc, "to close %s opened here", what);
      }
      break;
    }
    Entry e;
    if (parse_line(p, &e)) add_entry(p, b, &e, &cap);
  }
  p->in_block = saved_in_block;
  p->allow_rules = saved_rules;
}

Block *parse_blocks(Arena *a, const Token *toks, int n_toks, Diags *d, int *n_blocks) {
  Parser p = parser_make(a, d, toks, n_toks, false);
  Block *blocks = NULL;
  int n = 0, cap = 0;
  for (;;) {
    skip_newlines(&p);
    const Token *t = peek(&p);
    if (t->kind == TOK_EOF) break;
    if (is_word(t, "model") || is_word(t, "weights")) {
      arena_grow(a, (void **)&blocks, &cap, n + 1, sizeof(Block));
      parse_block(&p, &blocks[n++]);
      continue;
    }
    if (t->kind == TOK_ERROR) {
      skip_line(&p);
      continue;
    }
    /* Junk outside any block: one message, then resynchronise at the next
     * line that begins a block. */
    diag_error(d, t->loc, "expected 'model NAME {' or 'weights NAME {', got %s",
               tok_show(a, t));
    for (;;) {
      skip_line(&p);
      if (peek(&p)->kind == TOK_EOF) break;
      next(&p);
      skip_newlines(&p);
      const Token *u = peek(&p);
      if (u->kind == TOK_EOF || is_word(u, "model") || is_word(u, "weights")) break;
    }
  }
  *n_blocks = n;
  return blocks;
}

Entry *parse_rule_lines(Arena *a, const Token *toks, int n_toks, Diags *d, int *n_entries) {
  Parser p = parser_make(a, d, toks, n_toks, true);
  Block b = {0};
  int cap = 0;
  for (;;) {
    skip_newlines(&p);
    if (peek(&p)->kind == TOK_EOF) break;
    Entry e;
    if (parse_line(&p, &e)) add_entry(&p, &b, &e, &cap);
    /* not in a block, so a '}' does not end the line: it is reported as a
     * bad value and skipped with the rest of the line */
  }
  *n_entries = b.n_entries;
  return b.entries;
}

/* ---- the weights block ----
 *
 * Rules are read by wrule_read, for the user's lines and for a preset's
 * alike; the preset's rules come after the user's in WeightMap.rules, minus
 * those the user overrides. Whether a target exists in the model (dec[i]
 * rules on an encoder-only model) is weights.c's business, not checked here.
 */

#define XB(x) (1u << (x))
#define T_TENSOR XB(WX_TENSOR)
#define T_NORM XB(WX_NORM)
#define T_LIN (XB(WX_LINEAR) | XB(WX_CONV1D))
#define T_QKV (T_LIN | XB(WX_HEADS))
#define T_FUSED (XB(WX_SPLIT) | XB(WX_SPLIT_CONV1D))

static const char *const xform_names[WX_COUNT] = {
    "tensor", "linear", "conv1d", "norm", "heads", "split", "split_conv1d", "tied"};

typedef struct TargetInfo {
  const char *name;
  unsigned xforms; /* XB(WeightXform) bits */
  int group;       /* attention group: 1 enc[i].attn, 2 dec[i].attn, 3 dec[i].cross; 0 none */
  char leaf;       /* within a group: 'q', 'k', 'v', 'o', or 'F' for the fused qkv */
} TargetInfo;

static const TargetInfo targets[] = {
    {"embed", T_TENSOR, 0, 0},
    {"src_embed", T_TENSOR, 0, 0},
    {"tgt_embed", T_TENSOR, 0, 0},
    {"pos", T_TENSOR, 0, 0},
    {"src_pos", T_TENSOR, 0, 0},
    {"tgt_pos", T_TENSOR, 0, 0},
    {"token_type", T_TENSOR, 0, 0},
    {"embed_norm", T_NORM, 0, 0},
    {"src_embed_norm", T_NORM, 0, 0},
    {"tgt_embed_norm", T_NORM, 0, 0},
    {"enc[i].norm1", T_NORM, 0, 0},
    {"enc[i].norm2", T_NORM, 0, 0},
    {"dec[i].norm1", T_NORM, 0, 0},
    {"dec[i].norm2", T_NORM, 0, 0},
    {"dec[i].norm3", T_NORM, 0, 0},
    {"enc.norm", T_NORM, 0, 0},
    {"dec.norm", T_NORM, 0, 0},
    {"enc[i].attn.q", T_QKV, 1, 'q'},
    {"enc[i].attn.k", T_QKV, 1, 'k'},
    {"enc[i].attn.v", T_QKV, 1, 'v'},
    {"enc[i].attn.o", T_LIN, 1, 'o'},
    {"enc[i].attn.qkv", T_FUSED, 1, 'F'},
    {"dec[i].attn.q", T_QKV, 2, 'q'},
    {"dec[i].attn.k", T_QKV, 2, 'k'},
    {"dec[i].attn.v", T_QKV, 2, 'v'},
    {"dec[i].attn.o", T_LIN, 2, 'o'},
    {"dec[i].attn.qkv", T_FUSED, 2, 'F'},
    {"dec[i].cross.q", T_QKV, 3, 'q'},
    {"dec[i].cross.k", T_QKV, 3, 'k'},
    {"dec[i].cross.v", T_QKV, 3, 'v'},
    {"dec[i].cross.o", T_LIN, 3, 'o'},
    {"dec[i].cross.qkv", T_FUSED, 3, 'F'},
    {"enc[i].ffn.w1", T_LIN, 0, 0},
    {"enc[i].ffn.w2", T_LIN, 0, 0},
    {"dec[i].ffn.w1", T_LIN, 0, 0},
    {"dec[i].ffn.w2", T_LIN, 0, 0},
    {"head", T_LIN | XB(WX_TIED), 0, 0},
    {"pooler", T_LIN, 0, 0},
    {"classifier", T_LIN, 0, 0},
};
#define N_TARGETS ((int)(sizeof targets / sizeof targets[0]))

static int target_find(const char *name) {
  for (int i = 0; i < N_TARGETS; i++)
    if (strcmp(targets[i].name, name) == 0) return i;
  return -1;
}

/* The target of the same attention group with the given leaf. */
static int target_in_group(int group, char leaf) {
  for (int i = 0; i < N_TARGETS; i++)
    if (targets[i].group == group && targets[i].leaf == leaf) return i;
  return -1;
}

typedef struct WSema {
  Arena *a;
  Diags *d;
  WeightMap *w;
  int cap_rules, cap_ignore;
  const Entry *first[N_TARGETS]; /* the user's rule for each target */
  const Entry *preset_line;
} WSema;

/* "tensor", "norm", "linear, conv1d or heads" */
static const char *xform_list(Arena *a, unsigned mask) {
  return spec_word_list(a, xform_names, WX_COUNT, mask, " or ");
}

static void report_unknown_target(WSema *ws, const Entry *e) {
  const char *names[N_TARGETS];
  for (int i = 0; i < N_TARGETS; i++) names[i] = targets[i].name;
  const char *t = e->target;
  const char *shown = spec_clip(ws->a, t);
  /* the commonest slip: a layer target written without [i], or the reverse */
  const char *alt = NULL;
  const char *dot = strchr(t, '.');
  const char *br = strstr(t, "[i]");
  if (br)
    alt = arena_printf(ws->a, "%.*s%s", (int)(br - t), t, br + 3);
  else if (dot)
    alt = arena_printf(ws->a, "%.*s[i]%s", (int)(dot - t), t, dot);
  int near = alt && target_find(alt) >= 0 ? target_find(alt) : spec_nearest(t, names, N_TARGETS);
  if (near >= 0)
    diag_error(ws->d, e->key->loc, "unknown weight target '%s' (did you mean '%s'?)", shown,
               names[near]);
  else
    diag_error(ws->d, e->key->loc, "unknown weight target '%s'", shown);
}

/* The location of byte `offset` of a string token's unescaped text, for a
 * caret that points into the string. */
static IrLoc loc_in_string(const Token *tok, size_t offset) {
  IrLoc l = tok->loc;
  int raw = 1; /* past the opening quote */
  for (size_t k = 0; k < offset && raw < tok->len - 1; k++) {
    if (tok->start[raw] != '\\') raw += 1;
    else if (tok->start[raw + 1] == 'x') raw += 4;
    else raw += 2;
  }
  l.col += raw;
  return l;
}

/* The same, for the first occurrence of piece in the text. */
static IrLoc loc_of_piece(const Token *tok, const char *piece) {
  const char *at = strstr(tok->str, piece);
  return loc_in_string(tok, at ? (size_t)(at - tok->str) : 0);
}

/* Checks the {...} placeholders of a source or pattern: counts {i} and {h},
 * reports anything else. */
static bool check_placeholders(WSema *ws, const Token *tok, int *n_i, int *n_h) {
  *n_i = *n_h = 0;
  for (const char *p = tok->str; *p; p++) {
    if (*p == '}') {
      diag_error(ws->d, loc_in_string(tok, (size_t)(p - tok->str)),
                 "'}' without '{' in %s; placeholders are {i} (the layer) and {h} (the head)",
                 tok_show(ws->a, tok));
      return false;
    }
    if (*p != '{') continue;
    const char *q = strchr(p, '}');
    const char *open = strchr(p + 1, '{');
    if (!q || (open && open < q)) {
      diag_error(ws->d, loc_in_string(tok, (size_t)(p - tok->str)),
                 "unclosed '{' in %s; placeholders are {i} (the layer) and {h} (the head)",
                 tok_show(ws->a, tok));
      return false;
    }
    const char *ph = arena_strndup(ws->a, p, (size_t)(q - p + 1));
    if (strcmp(ph, "{i}") == 0) {
      (*n_i)++;
    } else if (strcmp(ph, "{h}") == 0) {
      (*n_h)++;
    } else {
      diag_error(ws->d, loc_in_string(tok, (size_t)(p - tok->str)),
                 "unknown placeholder '%s'; placeholders are {i} (the layer) and {h} (the head)",
                 spec_clip(ws->a, ph));
      return false;
    }
    p = q;
  }
  return true;
}

/* TARGET = XFORM "SOURCE" [weight "SUFFIX"] [bias "SUFFIX"] [no_bias]
 * Returns false after reporting. *target_ix is set as soon as the target is
 * known (-1 otherwise), so duplicates are found even in a faulty rule. */
static bool wrule_read(WSema *ws, const Entry *e, const char *preset, const char *root,
                       WeightRule *r, int *target_ix) {
  Arena *a = ws->a;
  Diags *d = ws->d;
  memset(r, 0, sizeof *r);
  int ti = target_find(e->target);
  *target_ix = ti;
  if (ti < 0) {
    report_unknown_target(ws, e);
    return false;
  }
  const TargetInfo *tg = &targets[ti];
  const char *allowed = xform_list(a, tg->xforms);
  if (e->n_vals == 0 || e->vals[0].kind != TOK_IDENT) {
    IrLoc at = e->n_vals ? e->vals[0].loc : e->end;
    diag_error(d, at, "expected a transform after '=': '%s' takes %s", tg->name, allowed);
    return false;
  }
  const Token *xt = &e->vals[0];
  int x = -1;
  for (int i = 0; i < WX_COUNT; i++)
    if (strcmp(xt->str, xform_names[i]) == 0) x = i;
  if (x < 0) {
    int near = spec_nearest(xt->str, xform_names, WX_COUNT);
    if (near >= 0)
      diag_error(d, xt->loc, "unknown transform '%s' (did you mean '%s'?)",
                 spec_clip(a, xt->str), xform_names[near]);
    else
      diag_error(d, xt->loc, "unknown transform '%s'; '%s' takes %s", spec_clip(a, xt->str),
                 tg->name, allowed);
    return false;
  }
  if (!(tg->xforms & XB(x))) {
    diag_error(d, xt->loc, "'%s' takes %s, not %s", tg->name, allowed, xform_names[x]);
    return false;
  }
  if (e->n_vals < 2 || e->vals[1].kind != TOK_STRING) {
    if (e->n_vals < 2)
      diag_error(d, e->end, "expected the checkpoint name in quotes after '%s'", xt->str);
    else
      diag_error(d, e->vals[1].loc, "expected the checkpoint name in quotes after '%s', got %s",
                 xt->str, tok_show(a, &e->vals[1]));
    return false;
  }
  const Token *src = &e->vals[1];
  if (!src->str[0]) {
    diag_error(d, src->loc, "the checkpoint name is empty");
    return false;
  }
  int n_i, n_h;
  if (!check_placeholders(ws, src, &n_i, &n_h)) return false;
  bool has_i = strstr(tg->name, "[i]") != NULL;
  if (has_i && n_i == 0) {
    diag_error(d, src->loc, "the source of '%s' must contain {i}, the layer index", tg->name);
    return false;
  }
  if (!has_i && n_i > 0) {
    diag_error(d, loc_of_piece(src, "{i}"), "'{i}' in the source, but '%s' is not a "
               "per-layer target", tg->name);
    return false;
  }
  if (x == WX_HEADS && n_h == 0) {
    diag_error(d, src->loc, "a heads rule's source must contain {h}, the head index");
    return false;
  }
  if (x != WX_HEADS && n_h > 0) {
    diag_error(d, loc_of_piece(src, "{h}"), "'{h}' in the source needs the heads "
               "transform, not %s", xform_names[x]);
    return false;
  }
  const Token *seen_w = NULL, *seen_b = NULL, *seen_nb = NULL;
  for (int i = 2; i < e->n_vals;) {
    const Token *t = &e->vals[i];
    bool is_w = is_word(t, "weight"), is_b = is_word(t, "bias"), is_nb = is_word(t, "no_bias");
    if (!is_w && !is_b && !is_nb) {
      diag_error(d, t->loc, "unexpected %s; after the source a rule takes weight \"SUFFIX\", "
                 "bias \"SUFFIX\" or no_bias", tok_show(a, t));
      return false;
    }
    if (x == WX_TENSOR || x == WX_TIED) {
      diag_error(d, t->loc, "'%s' does not apply to a %s rule: its source names one tensor",
                 t->str, xform_names[x]);
      return false;
    }
    const Token **seen = is_w ? &seen_w : is_b ? &seen_b : &seen_nb;
    if (*seen) {
      diag_error(d, t->loc, "'%s' given twice in one rule", t->str);
      return false;
    }
    *seen = t;
    if (is_nb) {
      i++;
      continue;
    }
    if (i + 1 >= e->n_vals || e->vals[i + 1].kind != TOK_STRING) {
      IrLoc at = i + 1 < e->n_vals ? e->vals[i + 1].loc : e->end;
      diag_error(d, at, "expected a suffix in quotes after '%s'", t->str);
      return false;
    }
    const Token *sfx = &e->vals[i + 1];
    if (strchr(sfx->str, '{') || strchr(sfx->str, '}')) {
      diag_error(d, sfx->loc, "a suffix cannot hold placeholders; put {i} and {h} in the "
                 "source");
      return false;
    }
    if (is_w && !sfx->str[0]) {
      diag_error(d, sfx->loc, "the weight suffix cannot be empty");
      return false;
    }
    *seen = sfx;
    i += 2;
  }
  if (seen_nb && seen_b && seen_b->str[0]) {
    const Token *later = seen_nb->loc.col > seen_b->loc.col ? seen_nb : seen_b;
    diag_error(d, later->loc, "'no_bias' contradicts bias %s", tok_show(a, seen_b));
    return false;
  }
  r->loc = e->key->loc;
  r->target = tg->name;
  r->xform = (WeightXform)x;
  r->source = preset ? spec_preset_source(a, preset, root, src->str) : src->str;
  r->weight_suffix = seen_w ? seen_w->str : "weight";
  r->bias_suffix = seen_nb ? "" : seen_b ? seen_b->str : "bias";
  return true;
}

static void wmap_add_rule(WSema *ws, const WeightRule *r) {
  WeightMap *w = ws->w;
  arena_grow(ws->a, (void **)&w->rules, &ws->cap_rules, w->n_rules + 1, sizeof(WeightRule));
  w->rules[w->n_rules++] = *r;
}

static void wmap_add_ignore(WSema *ws, const char *pattern, IrLoc loc) {
  WeightMap *w = ws->w;
  int cap = ws->cap_ignore;
  arena_grow(ws->a, (void **)&w->ignore, &cap, w->n_ignore + 1, sizeof(const char *));
  int cap2 = ws->cap_ignore;
  arena_grow(ws->a, (void **)&w->ignore_loc, &cap2, w->n_ignore + 1, sizeof(IrLoc));
  ws->cap_ignore = cap;
  w->ignore[w->n_ignore] = pattern;
  w->ignore_loc[w->n_ignore] = loc;
  w->n_ignore++;
}

/* ignore "PATTERN" */
static void wmap_ignore(WSema *ws, const Entry *e, const char *preset, const char *root,
                        IrLoc loc) {
  if (e->n_vals != 1 || e->vals[0].kind != TOK_STRING) {
    IrLoc at = e->n_vals == 0 ? e->end : e->vals[e->vals[0].kind == TOK_STRING ? 1 : 0].loc;
    diag_error(ws->d, at, "'ignore' takes one checkpoint name pattern in quotes "
               "({i}, {h} and * allowed)");
    return;
  }
  const Token *t = &e->vals[0];
  if (!t->str[0]) {
    diag_error(ws->d, t->loc, "the ignore pattern is empty");
    return;
  }
  int n_i, n_h;
  if (!check_placeholders(ws, t, &n_i, &n_h)) return;
  const char *p = preset ? spec_preset_source(ws->a, preset, root, t->str) : t->str;
  wmap_add_ignore(ws, p, loc);
}

/* Checks the preset's text as rules and appends those the user did not
 * override. Errors in a preset are bugs in presets.c, but are reported like
 * any others (at "<preset NAME>:line:col"). */
static void wmap_expand_preset(WSema *ws, const char *name, const char *root, IrLoc at) {
  Arena *a = ws->a;
  const char *text = spec_preset_text(name);
  SrcFile *pf = src_file_from_string(a, arena_printf(a, "<preset %s>", name), text);
  diags_add_source(ws->d, pf);
  int n_toks, n_entries;
  Token *toks = lex_tokens(a, pf, ws->d, &n_toks);
  Entry *es = parse_rule_lines(a, toks, n_toks, ws->d, &n_entries);
  bool user_fused[4] = {false}, user_split[4] = {false};
  for (int i = 0; i < N_TARGETS; i++) {
    if (!ws->first[i] || !targets[i].group) continue;
    if (targets[i].leaf == 'F') user_fused[targets[i].group] = true;
    if (strchr("qkv", targets[i].leaf)) user_split[targets[i].group] = true;
  }
  const Entry *seen[N_TARGETS] = {NULL};
  for (int i = 0; i < n_entries; i++) {
    const Entry *e = &es[i];
    if (e->bad) continue;
    if (e->kind == ENTRY_PLAIN) {
      if (strcmp(e->key->str, "ignore") == 0)
        wmap_ignore(ws, e, name, root, at);
      else
        diag_error(ws->d, e->key->loc, "a preset holds only rules and ignore lines, not '%s'",
                   e->key->str);
      continue;
    }
    WeightRule r;
    int ti;
    bool ok = wrule_read(ws, e, name, root, &r, &ti);
    if (ti >= 0 && seen[ti]) {
      diag_error(ws->d, e->key->loc, "duplicate rule for '%s' in preset '%s'",
                 targets[ti].name, name);
      continue;
    }
    if (ti >= 0) seen[ti] = e;
    if (!ok) continue;
    const TargetInfo *tg = &targets[ti];
    if (ws->first[ti]) continue; /* the user's rule wins */
    if (tg->group && tg->leaf == 'F' && user_split[tg->group]) continue;
    if (tg->group && tg->leaf && strchr("qkv", tg->leaf) && user_fused[tg->group]) continue;
    r.from_preset = true;
    r.loc = at;
    wmap_add_rule(ws, &r);
  }
}

/* preset "NAME" [root "PREFIX"] */
static void wmap_preset_line(WSema *ws, const Entry *e, const Token **name_tok,
                             const Token **root_tok) {
  Arena *a = ws->a;
  const char *const *names;
  int n_names;
  spec_preset_names(&names, &n_names);
  const char *known = spec_word_list(a, names, n_names, 0, ", ");
  if (ws->preset_line) {
    diag_error(ws->d, e->key->loc, "duplicate 'preset' line: a weights block takes one preset");
    diag_note(ws->d, ws->preset_line->key->loc, "first given here");
    return;
  }
  ws->preset_line = e;
  if (e->n_vals == 0 || e->vals[0].kind != TOK_STRING) {
    IrLoc at = e->n_vals ? e->vals[0].loc : e->end;
    diag_error(ws->d, at, "'preset' takes a name in quotes (one of %s)", known);
    return;
  }
  const Token *nt = &e->vals[0];
  bool ok = true;
  if (!spec_preset_text(nt->str)) {
    int near = spec_nearest(nt->str, names, n_names);
    if (near >= 0)
      diag_error(ws->d, nt->loc, "unknown preset %s (did you mean \"%s\"?); known presets: "
                 "%s", tok_show(a, nt), names[near], known);
    else
      diag_error(ws->d, nt->loc, "unknown preset %s; known presets: %s", tok_show(a, nt), known);
    ok = false;
  }
  const Token *rt = NULL;
  if (e->n_vals > 1) {
    const Token *t = &e->vals[1];
    if (!is_word(t, "root")) {
      diag_error(ws->d, t->loc, "unexpected %s: 'preset' takes a name in quotes, then "
                 "optionally root \"PREFIX\"", tok_show(a, t));
      return;
    }
    if (e->n_vals < 3 || e->vals[2].kind != TOK_STRING) {
      IrLoc at = e->n_vals < 3 ? e->end : e->vals[2].loc;
      diag_error(ws->d, at, "expected the checkpoint prefix in quotes after 'root'");
      return;
    }
    rt = &e->vals[2];
    if (strchr(rt->str, '{') || strchr(rt->str, '}')) {
      diag_error(ws->d, rt->loc, "the root prefix cannot hold placeholders");
      return;
    }
    if (e->n_vals > 3) {
      diag_error(ws->d, e->vals[3].loc, "unexpected %s after the root prefix",
                 tok_show(a, &e->vals[3]));
      return;
    }
  }
  if (ok) {
    *name_tok = nt;
    *root_tok = rt;
  }
}

/* Reads a weights block. The map is meaningful only if nothing was reported. */
static WeightMap *sema_weights(Arena *a, const Block *b, Diags *d) {
  WeightMap *w = arena_alloc(a, sizeof *w);
  w->loc = b->name ? b->name->loc : b->keyword->loc;
  w->model_name = b->name ? b->name->str : "";
  w->root = "";
  WSema ws = {.a = a, .d = d, .w = w};
  const Token *preset = NULL, *root = NULL;
  for (int i = 0; i < b->n_entries; i++) {
    const Entry *e = &b->entries[i];
    if (e->bad) continue;
    if (e->kind == ENTRY_PLAIN) {
      const char *k = e->key->str;
      if (strcmp(k, "preset") == 0) {
        wmap_preset_line(&ws, e, &preset, &root);
      } else if (strcmp(k, "ignore") == 0) {
        wmap_ignore(&ws, e, NULL, NULL, e->key->loc);
      } else if (target_find(k) >= 0) {
        IrLoc at = e->n_vals ? e->vals[0].loc : e->end;
        diag_error(d, at, "expected '=' after the target '%s'", k);
      } else {
        diag_error(d, e->key->loc, "unknown weights entry '%s': expected 'preset', 'ignore' "
                   "or 'TARGET = TRANSFORM \"SOURCE\"'", spec_clip(a, k));
      }
      continue;
    }
    WeightRule r;
    int ti;
    bool ok = wrule_read(&ws, e, NULL, NULL, &r, &ti);
    if (ti < 0) continue;
    const TargetInfo *tg = &targets[ti];
    if (ws.first[ti]) {
      diag_error(d, e->key->loc, "duplicate rule for '%s'", tg->name);
      diag_note(d, ws.first[ti]->key->loc, "first given here");
      continue;
    }
    if (tg->group && tg->leaf == 'F') {
      for (const char *l = "qkv"; *l; l++) {
        int o = target_in_group(tg->group, *l);
        if (!ws.first[o]) continue;
        diag_error(d, e->key->loc, "%s also covers %s", tg->name, targets[o].name);
        diag_note(d, ws.first[o]->key->loc, "%s given here", targets[o].name);
        ok = false;
      }
    } else if (tg->group && strchr("qkv", tg->leaf)) {
      int f = target_in_group(tg->group, 'F');
      if (ws.first[f]) {
        diag_error(d, e->key->loc, "%s is also covered by %s", tg->name, targets[f].name);
        diag_note(d, ws.first[f]->key->loc, "%s given here", targets[f].name);
        ok = false;
      }
    }
    ws.first[ti] = e;
    if (ok) wmap_add_rule(&ws, &r);
  }
  if (preset) {
    w->preset = preset->str;
    w->root = root ? root->str : spec_preset_base(w->preset);
    wmap_expand_preset(&ws, w->preset, w->root, preset->loc);
  }
  return w;
}

/* ---- the whole file ---- */

Spec *spec_parse(Arena *a, const SrcFile *src, Diags *d) {
  int errors_before = d->n_errors;
  diags_add_source(d, src);
  int n_toks, n_blocks;
  Token *toks = lex_tokens(a, src, d, &n_toks);
  Block *blocks = parse_blocks(a, toks, n_toks, d, &n_blocks);
  const Block *model = NULL, *weights = NULL;
  for (int i = 0; i < n_blocks; i++) {
    const Block *b = &blocks[i];
    const Block **slot = b->kind == BLOCK_MODEL ? &model : &weights;
    if (*slot) {
      if (b->kind == BLOCK_MODEL)
        diag_error(d, b->keyword->loc, "a second model block: a spec describes one model");
      else
        diag_error(d, b->keyword->loc, "a second weights block: a spec takes at most one");
      diag_note(d, (*slot)->keyword->loc, "the first one is here");
      continue;
    }
    *slot = b;
  }
  ModelSpec *m = model ? sema_model(a, model, d) : NULL;
  WeightMap *w = NULL;
  if (weights) {
    if (!model) {
      diag_error(d, weights->name ? weights->name->loc : weights->keyword->loc,
                 "a weights block without a model block");
    } else if (model->name && weights->name &&
               strcmp(model->name->str, weights->name->str) != 0) {
      diag_error(d, weights->name->loc, "the weights block is named '%s', but the model is "
                 "'%s'", spec_clip(a, weights->name->str), spec_clip(a, model->name->str));
      diag_note(d, model->name->loc, "the model is named here");
    }
    w = sema_weights(a, weights, d);
  } else if (!model) {
    diag_error(d, (IrLoc){src->name, 0, 0}, "no model block: a spec needs "
               "'model NAME { ... }'");
  }
  if (d->n_errors > errors_before) return NULL;
  Spec *spec = arena_alloc(a, sizeof *spec);
  spec->src = src;
  spec->model = m;
  spec->weights = w;
  return spec;
}
