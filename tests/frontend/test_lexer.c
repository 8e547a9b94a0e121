/* tests/frontend/test_lexer.c — the .tfm lexer: every token kind, string
 * escapes, locations, and each lexical error with its message and place. */
#include <criterion/criterion.h>
#include <string.h>

#include "frontend/spec.h"

static Arena *arena;
static Diags diags;
static Token *toks;
static int n_toks;

static void setup(void) {
  arena = arena_create();
  diags_init(&diags, arena, NULL);
}

static void teardown(void) {
  arena_destroy(arena);
}

TestSuite(lexer, .init = setup, .fini = teardown);

/* lexes text (length given, so NUL bytes can be part of it) */
static void lex_n(const char *text, size_t len) {
  SrcFile *f = arena_alloc(arena, sizeof *f);
  f->name = "t.tfm";
  char *buf = arena_alloc(arena, len + 1);
  memcpy(buf, text, len);
  f->text = buf;
  f->len = len;
  diags_add_source(&diags, f);
  toks = lex_tokens(arena, f, &diags, &n_toks);
}

static void lex(const char *text) {
  lex_n(text, strlen(text));
}

static const char *captured(void) {
  return diags.captured ? diags.captured : "";
}

static void expect_kinds(const TokKind *kinds, int n) {
  cr_assert_eq(n_toks, n, "got %d tokens, expected %d; diags: %s", n_toks, n, captured());
  for (int i = 0; i < n; i++)
    cr_expect_eq(toks[i].kind, kinds[i], "token %d: kind %d, expected %d", i, toks[i].kind,
                 kinds[i]);
}

Test(lexer, empty_input_is_just_eof) {
  lex("");
  cr_assert_eq(n_toks, 1);
  cr_expect_eq(toks[0].kind, TOK_EOF);
  cr_expect_eq(toks[0].loc.line, 1);
  cr_expect_eq(toks[0].loc.col, 1);
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, every_token_kind) {
  lex("model x { } [ ] = . 42 -7 0.5 \"s\"\n");
  TokKind k[] = {TOK_IDENT, TOK_IDENT, TOK_LBRACE, TOK_RBRACE, TOK_LBRACKET, TOK_RBRACKET,
                 TOK_EQUALS, TOK_DOT, TOK_INT, TOK_INT, TOK_FLOAT, TOK_STRING, TOK_NEWLINE,
                 TOK_EOF};
  expect_kinds(k, (int)(sizeof k / sizeof k[0]));
  cr_expect_str_eq(toks[0].str, "model");
  cr_expect_str_eq(toks[1].str, "x");
  cr_expect_eq(toks[8].ival, 42);
  cr_expect_eq(toks[8].fval, 42.0);
  cr_expect_eq(toks[9].ival, -7);
  cr_expect_eq(toks[10].fval, 0.5);
  cr_expect_str_eq(toks[11].str, "s");
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, identifiers) {
  lex("_a b_2 gelu_tanh split_conv1d X");
  cr_assert_eq(n_toks, 6);
  const char *want[] = {"_a", "b_2", "gelu_tanh", "split_conv1d", "X"};
  for (int i = 0; i < 5; i++) {
    cr_expect_eq(toks[i].kind, TOK_IDENT);
    cr_expect_str_eq(toks[i].str, want[i]);
    cr_expect_eq(toks[i].len, (int)strlen(want[i]));
  }
}

Test(lexer, floats) {
  lex("1e-5 0.5 2.5E3 -1.25 1e+2 -3e4 1E0");
  double want[] = {1e-5, 0.5, 2.5e3, -1.25, 1e2, -3e4, 1.0};
  cr_assert_eq(n_toks, 8);
  for (int i = 0; i < 7; i++) {
    cr_expect_eq(toks[i].kind, TOK_FLOAT, "token %d", i);
    cr_expect_eq(toks[i].fval, want[i], "token %d: %g", i, toks[i].fval);
  }
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, integers) {
  lex("0 007 9223372036854775807 -9223372036854775808");
  cr_assert_eq(n_toks, 5);
  cr_expect_eq(toks[0].ival, 0);
  cr_expect_eq(toks[1].ival, 7);
  cr_expect_eq(toks[2].ival, INT64_MAX);
  cr_expect_eq(toks[3].ival, INT64_MIN);
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, a_number_then_a_dot_is_two_tokens) {
  lex("1.x");
  TokKind k[] = {TOK_INT, TOK_DOT, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
}

Test(lexer, string_escapes) {
  lex("\"a\\\"b\\\\c\\nd\\te\\x41\\x7e\" \"\" \"\\xC3\\xA9\" \"caf\xc3\xa9 \xe2\x82\xac\"");
  cr_assert_eq(n_toks, 5, "%s", captured());
  cr_expect_str_eq(toks[0].str, "a\"b\\c\nd\teA~");
  cr_expect_str_eq(toks[1].str, "");
  cr_expect_str_eq(toks[2].str, "\xc3\xa9");
  cr_expect_str_eq(toks[3].str, "caf\xc3\xa9 \xe2\x82\xac");
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, hash_inside_a_string_is_not_a_comment) {
  lex("\"a#b\" # c \"d\"\nx");
  TokKind k[] = {TOK_STRING, TOK_NEWLINE, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect_str_eq(toks[0].str, "a#b");
}

Test(lexer, comments_and_blank_lines) {
  lex("# header\n\n  # indented \xff bytes are fine in comments\nx # trailing\n");
  /* a run of newlines is one token: memory follows content, not lines */
  TokKind k[] = {TOK_NEWLINE, TOK_IDENT, TOK_NEWLINE, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect_eq(toks[1].loc.line, 4);
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, many_blank_lines_are_one_token) {
  static char text[100010];
  memset(text, '\n', 100000);
  strcpy(text + 100000, "x\n\n");
  lex(text);
  TokKind k[] = {TOK_NEWLINE, TOK_IDENT, TOK_NEWLINE, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect_eq(toks[1].loc.line, 100001);
}

Test(lexer, locations_are_line_and_byte_column) {
  lex("model tiny {\n\theads  8\n  x = \"\xc3\xa9\" y\n");
  /* model(1:1) tiny(1:7) {(1:12) NL heads(2:2) 8(2:9) NL x(3:3) =(3:5) "é"(3:7) y(3:12) */
  struct { int i, line, col; } want[] = {{0, 1, 1}, {1, 1, 7}, {2, 1, 12}, {3, 1, 13},
                                         {4, 2, 2}, {5, 2, 9}, {7, 3, 3}, {8, 3, 5},
                                         {9, 3, 7}, {10, 3, 12}, {12, 4, 1}};
  cr_assert_eq(n_toks, 13, "%s", captured());
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    const Token *t = &toks[want[k].i];
    cr_expect_eq(t->loc.line, want[k].line, "token %d line %d", want[k].i, t->loc.line);
    cr_expect_eq(t->loc.col, want[k].col, "token %d col %d", want[k].i, t->loc.col);
    cr_expect_str_eq(t->loc.file, "t.tfm");
  }
}

Test(lexer, crlf_is_one_newline) {
  lex("a\r\nb # c\r\n\"s\"\r\n");
  TokKind k[] = {TOK_IDENT, TOK_NEWLINE, TOK_IDENT, TOK_NEWLINE, TOK_STRING, TOK_NEWLINE,
                 TOK_EOF};
  expect_kinds(k, 7);
  cr_expect_eq(toks[1].len, 2);
  cr_expect_eq(toks[2].loc.line, 2);
  cr_expect_eq(toks[2].loc.col, 1);
  cr_expect_eq(toks[4].loc.line, 3);
  cr_expect_eq(diags.n_errors, 0);
}

Test(lexer, eof_location_after_last_byte) {
  lex("ab\ncd");
  cr_assert_eq(n_toks, 4);
  cr_expect_eq(toks[3].kind, TOK_EOF);
  cr_expect_eq(toks[3].loc.line, 2);
  cr_expect_eq(toks[3].loc.col, 3);
}

/* ---- errors: message, location, and the TOK_ERROR token ---- */

static void expect_one_error(const char *diag_text, TokKind at0) {
  cr_expect_eq(diags.n_errors, 1, "errors: %d\n%s", diags.n_errors, captured());
  cr_expect_str_eq(captured(), diag_text);
  cr_expect_eq(toks[0].kind, at0);
}

Test(lexer, unexpected_character) {
  lex("x;y");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect_str_eq(captured(), "t.tfm:1:2: error: unexpected character ';'\n  x;y\n   ^\n");
  TokKind k[] = {TOK_IDENT, TOK_ERROR, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
}

Test(lexer, a_run_of_unexpected_characters_is_one_error) {
  lex("a ;;; b");
  TokKind k[] = {TOK_IDENT, TOK_ERROR, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect_eq(diags.n_errors, 1);
  cr_expect_eq(toks[1].len, 3);
}

Test(lexer, non_ascii_outside_strings) {
  lex("\xc3\xa9\xc3\xa8 x");
  expect_one_error("t.tfm:1:1: error: unexpected character '\xc3\xa9' (only ASCII is allowed "
                   "outside strings and comments)\n  \xc3\xa9\xc3\xa8 x\n  ^\n", TOK_ERROR);
  cr_expect_eq(toks[1].kind, TOK_IDENT);
}

Test(lexer, invalid_byte_is_shown_as_hex) {
  lex("\xff");
  expect_one_error("t.tfm:1:1: error: unexpected character '\\xFF'\n  \xff\n  ^\n", TOK_ERROR);
}

Test(lexer, nul_byte_is_an_error_not_the_end) {
  lex_n("a\0b", 3);
  TokKind k[] = {TOK_IDENT, TOK_ERROR, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "unexpected character '\\x00'") != NULL, "%s", captured());
}

Test(lexer, lone_cr_is_an_error) {
  lex("a\rb");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "1:2: error: unexpected character '\\x0D'") != NULL, "%s",
            captured());
}

Test(lexer, minus_without_digit) {
  lex("hf-gpt2");
  TokKind k[] = {TOK_IDENT, TOK_ERROR, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect(strstr(captured(), "1:3: error: unexpected character '-'") != NULL, "%s",
            captured());
}

Test(lexer, integer_overflow) {
  lex("99999999999999999999");
  expect_one_error("t.tfm:1:1: error: integer '99999999999999999999' is out of range\n"
                   "  99999999999999999999\n  ^\n", TOK_ERROR);
}

Test(lexer, negative_integer_overflow) {
  lex("-9223372036854775809");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect_eq(toks[0].kind, TOK_ERROR);
}

Test(lexer, float_overflow) {
  lex("x 1e999");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect_eq(toks[1].kind, TOK_ERROR);
  cr_expect(strstr(captured(), "1:3: error: number '1e999' is out of range") != NULL, "%s",
            captured());
}

Test(lexer, malformed_number) {
  lex("12abc 0x10");
  TokKind k[] = {TOK_ERROR, TOK_ERROR, TOK_EOF};
  expect_kinds(k, 3);
  cr_expect_eq(diags.n_errors, 2);
  cr_expect(strstr(captured(), "1:1: error: malformed number '12abc'") != NULL, "%s",
            captured());
  cr_expect(strstr(captured(), "1:7: error: malformed number '0x10'") != NULL, "%s",
            captured());
}

Test(lexer, unterminated_string_at_eof) {
  lex("x \"abc");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect_str_eq(captured(), "t.tfm:1:3: error: unterminated string\n  x \"abc\n    ^\n");
  TokKind k[] = {TOK_IDENT, TOK_ERROR, TOK_EOF};
  expect_kinds(k, 3);
}

Test(lexer, unterminated_string_at_newline_keeps_the_newline) {
  lex("\"abc\ny");
  TokKind k[] = {TOK_ERROR, TOK_NEWLINE, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 4);
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "1:1: error: unterminated string") != NULL);
  cr_expect_eq(toks[2].loc.line, 2);
}

Test(lexer, escaped_quote_at_end_leaves_string_open) {
  lex("\"abc\\\"");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "unterminated string") != NULL, "%s", captured());
}

Test(lexer, unknown_escape) {
  lex("\"a\\qb\" x");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect_str_eq(captured(), "t.tfm:1:3: error: unknown escape '\\q' in a string "
                   "(known: \\\" \\\\ \\n \\t \\xHH)\n  \"a\\qb\" x\n    ^\n");
  TokKind k[] = {TOK_ERROR, TOK_IDENT, TOK_EOF};
  expect_kinds(k, 3);
}

Test(lexer, bad_hex_escape) {
  lex("\"\\x4\"");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "1:2: error: '\\x' in a string takes two hex digits") != NULL,
            "%s", captured());
}

Test(lexer, nul_escape) {
  lex("\"\\x00\"");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "'\\x00' is not allowed in a string") != NULL, "%s", captured());
}

Test(lexer, invalid_utf8_in_string) {
  lex("\"ab\xc3(\"");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "1:4: error: invalid UTF-8 in a string") != NULL, "%s",
            captured());
  cr_expect_eq(toks[0].kind, TOK_ERROR);
}

Test(lexer, overlong_and_surrogate_utf8_rejected) {
  lex("\"\xc0\xaf\" \"\xed\xa0\x80\" \"\xf4\x90\x80\x80\"");
  cr_expect_eq(diags.n_errors, 3, "%s", captured());
}

Test(lexer, escapes_must_make_valid_utf8) {
  lex("\"\\xC3\"");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "1:1: error: string is not valid UTF-8 (check its \\x escapes)")
            != NULL, "%s", captured());
}

Test(lexer, control_character_in_string) {
  lex("\"a\x01\"");
  cr_expect_eq(diags.n_errors, 1);
  cr_expect(strstr(captured(), "1:3: error: control character '\\x01' in a string") != NULL,
            "%s", captured());
}

Test(lexer, tab_in_string_is_kept) {
  lex("\"a\tb\"");
  cr_expect_eq(diags.n_errors, 0);
  cr_expect_str_eq(toks[0].str, "a\tb");
}

Test(lexer, lexing_continues_after_errors) {
  lex("a ; b\n\"x\\q\" c\n1e999 d\n");
  cr_expect_eq(diags.n_errors, 3);
  int idents = 0;
  for (int i = 0; i < n_toks; i++)
    if (toks[i].kind == TOK_IDENT) idents++;
  cr_expect_eq(idents, 4);
  cr_expect_eq(toks[n_toks - 1].kind, TOK_EOF);
}
