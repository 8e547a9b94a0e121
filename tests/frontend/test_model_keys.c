/* tests/frontend/test_model_keys.c — walks the model-key table
 * (frontend/model_keys.def): every key has an example line here (a new row
 * without one fails), and for every key sema reports a missing required
 * key, a duplicate line of a non-repeatable key and a misspelling with
 * "did you mean", and records where the key was written in its ModelSpec
 * location field. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "frontend/spec.h"

typedef struct KeyRow {
  const char *name;
  bool required, repeatable;
  size_t loc; /* offsetof the ModelSpec IrLoc, or SIZE_MAX */
} KeyRow;

#define KEY_LOC(f) offsetof(ModelSpec, f)
#define KEY_NO_LOC SIZE_MAX
static const KeyRow rows[] = {
#define SPEC_MODEL_KEY(E, name, required, repeatable, handler, loc)                                \
  {name, required, repeatable, loc},
#include "frontend/model_keys.def"
#undef SPEC_MODEL_KEY
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

/* One valid line per key; together they make a valid encoder model. */
static const struct {
  const char *key, *line;
} examples[] = {
    {"arch", "arch encoder"},
    {"vocab", "vocab 100"},
    {"d_model", "d_model 64"},
    {"heads", "heads 4"},
    {"layers", "layers 2"},
    {"ffn", "ffn 128 gelu"},
    {"norm", "norm pre eps 1e-6"},
    {"final_norm", "final_norm yes"},
    {"position", "position learned max 64"},
    {"embed_scale", "embed_scale sqrt_d_model"},
    {"embed_norm", "embed_norm eps 1e-5"},
    {"token_types", "token_types 2"},
    {"mask", "mask encoder padding"},
    {"tokens", "tokens pad 0"},
    {"head", "head classifier 3 pooler"},
    {"max_batch", "max_batch 8"},
    {"max_len", "max_len 32"},
};
#define N_EXAMPLES ((int)(sizeof examples / sizeof examples[0]))

static Arena *arena;
static Diags diags;

static void setup(void) {
  arena = arena_create();
  diags_init(&diags, arena, NULL);
}

static void teardown(void) {
  arena_destroy(arena);
}

TestSuite(model_keys, .init = setup, .fini = teardown);

static const char *example_of(const char *key) {
  for (int i = 0; i < N_EXAMPLES; i++)
    if (strcmp(examples[i].key, key) == 0)
      return examples[i].line;
  return NULL;
}

/* The model with every example line (in table order) except `skip`, with
 * `twice` written twice and `replace` (if any) written instead of the first
 * word of `twice`'s first line. Line 1 is "model t {", keys from line 2. */
static const char *model_text(const char *skip, const char *twice, const char *replace) {
  const char *t = "model t {\n";
  for (int i = 0; i < N_ROWS; i++) {
    const char *line = example_of(rows[i].name);
    if (skip && strcmp(rows[i].name, skip) == 0)
      continue;
    if (replace && twice && strcmp(rows[i].name, twice) == 0)
      t = arena_printf(arena, "%s  %s%s\n", t, replace, line + strlen(rows[i].name));
    else
      t = arena_printf(arena, "%s  %s\n", t, line);
    if (twice && !replace && strcmp(rows[i].name, twice) == 0)
      t = arena_printf(arena, "%s  %s\n", t, line);
  }
  return arena_printf(arena, "%s}\n", t);
}

static Spec *parse(const char *text) {
  diags_init(&diags, arena, NULL);
  SrcFile *f = src_file_from_string(arena, "t.tfm", text);
  diags_add_source(&diags, f);
  return spec_parse(arena, f, &diags);
}

static const char *captured(void) {
  return diags.captured ? diags.captured : "";
}

Test(model_keys, every_key_has_an_example) {
  for (int i = 0; i < N_ROWS; i++)
    cr_assert(example_of(rows[i].name),
              "model_keys.def row '%s' has no example line in test_model_keys.c", rows[i].name);
  cr_assert_eq(N_EXAMPLES, N_ROWS, "an example for a key model_keys.def does not have");
  const char *text = model_text(NULL, NULL, NULL);
  cr_assert(parse(text), "%s\n%s", text, captured());
}

Test(model_keys, missing_keys) {
  for (int i = 0; i < N_ROWS; i++) {
    const char *text = model_text(rows[i].name, NULL, NULL);
    Spec *s = parse(text);
    const char *want =
        arena_printf(arena, "error: model 't' is missing required key '%s'", rows[i].name);
    if (rows[i].required)
      cr_assert(!s && strstr(captured(), want), "%s\n%s", text, captured());
    else
      cr_assert(s, "optional key '%s':\n%s\n%s", rows[i].name, text, captured());
  }
}

Test(model_keys, duplicate_keys) {
  for (int i = 0; i < N_ROWS; i++) {
    const char *text = model_text(NULL, rows[i].name, NULL);
    Spec *s = parse(text);
    cr_assert_null(s, "%s", text);
    const char *want = arena_printf(arena, "error: duplicate key '%s' in model 't'", rows[i].name);
    if (rows[i].repeatable)
      cr_assert(!strstr(captured(), want), "%s\n%s", text, captured());
    else
      cr_assert(strstr(captured(), want), "%s\n%s", text, captured());
  }
}

/* Capitalising the first letter is one edit from the key and at least two
 * from any other, so the suggestion must be the key itself. */
Test(model_keys, misspelt_keys_are_suggested) {
  for (int i = 0; i < N_ROWS; i++) {
    char *bad = arena_strdup(arena, rows[i].name);
    bad[0] = (char)(bad[0] - 'a' + 'A');
    const char *text = model_text(NULL, rows[i].name, bad);
    cr_assert_null(parse(text), "%s", text);
    const char *want = arena_printf(
        arena, "error: unknown key '%s' in model 't' (did you mean '%s'?)", bad, rows[i].name);
    cr_assert(strstr(captured(), want), "%s\n%s", text, captured());
  }
}

Test(model_keys, locations_recorded) {
  Spec *s = parse(model_text(NULL, NULL, NULL));
  cr_assert(s, "%s", captured());
  for (int i = 0; i < N_ROWS; i++) {
    if (rows[i].loc == SIZE_MAX)
      continue;
    const IrLoc *l = (const IrLoc *)((const char *)s->model + rows[i].loc);
    cr_assert_eq(l->line, i + 2, "'%s' recorded at line %d, written at %d", rows[i].name, l->line,
                 i + 2);
    cr_assert_eq(l->col, 3, "'%s'", rows[i].name);
  }
}
