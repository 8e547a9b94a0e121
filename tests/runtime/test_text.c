/* tests/runtime/test_text.c — rt_text: vocabulary files, one sequence of
 * ids or symbols bound for a model (masks from the pad id, dims, outputs),
 * every refusal as a message with nothing left allocated, and the summary
 * printer's lines (argmax tokens as symbols, class probabilities, others).
 * Models are hand-written RtModelInfo tables. */
#include "runtime/rt_model.h"
#include "runtime/rt_text.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SYM_B, SYM_S };

/* tokens [B,S] < 6, mask [B,S]; logits [B,S,6], pad id 0, S <= 4 */
static const RtTensorInfo lm_inputs[] = {
    {"tokens", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 6, NULL, NULL},
    {"mask", RT_ELEM_U8, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_MASK, 0, "tokens", "lengths"},
};
static const RtTensorInfo lm_outputs[] = {
    {"logits", RT_ELEM_F32, 3, {{SYM_B, 0}, {SYM_S, 0}, {-1, 6}}},
};
/* src/tgt, and tokens + token_types */
static const RtTensorInfo s2s_inputs[] = {
    {"src", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 6, NULL, NULL},
    {"tgt", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 6, NULL, NULL},
};
static const RtTensorInfo typed_inputs[] = {
    {"tokens", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 6, NULL, NULL},
    {"token_types", RT_ELEM_I32, 2, {{SYM_B, 0}, {SYM_S, 0}}, RT_INPUT_IDS, 2, NULL, NULL},
};

static RtModelInfo info_with(const char *name, const RtTensorInfo *in, int n_in) {
  RtModelInfo info = {.abi_version = RT_ABI_VERSION,
                      .name = name,
                      .n_syms = 2,
                      .sym_names = {"B", "S"},
                      .sym_max = {2, 4},
                      .n_inputs = n_in,
                      .inputs = in,
                      .n_outputs = 1,
                      .outputs = lm_outputs,
                      .pad_id = 0};
  return info;
}

static char vocab_path[64];

static void setup(void) {
  strcpy(vocab_path, "/tmp/tfmc_textXXXXXX");
  int fd = mkstemp(vocab_path);
  cr_assert(fd >= 0);
  /* ids 0..6: the last one is beyond the model's vocab 6; CRLF accepted */
  const char text[] = "<pad>\na\r\nb\nc\n\nd\nzz";
  cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
}

static void teardown(void) { unlink(vocab_path); }

TestSuite(text, .init = setup, .fini = teardown);

Test(text, vocab_lines_are_ids) {
  RtVocab v;
  char err[256];
  cr_assert_eq(rt_text_vocab_load(vocab_path, &v, err, sizeof err), 0, "%s", err);
  cr_assert_eq(v.n, 7);
  const char *want[] = {"<pad>", "a", "b", "c", "", "d", "zz"};
  for (int i = 0; i < 7; i++)
    cr_assert_str_eq(rt_text_vocab_symbol(&v, i), want[i]);
  cr_assert_null(rt_text_vocab_symbol(&v, 7));
  cr_assert_null(rt_text_vocab_symbol(&v, -1));
  cr_assert_null(rt_text_vocab_symbol(NULL, 0));
  rt_text_vocab_free(&v);
  rt_text_vocab_free(&v); /* twice is harmless */
  cr_assert_neq(rt_text_vocab_load("/nonexistent/v.txt", &v, err, sizeof err), 0);
  cr_assert(strstr(err, "cannot read /nonexistent/v.txt"), "%s", err);
  cr_assert_neq(rt_text_vocab_load("/tmp", &v, err, sizeof err), 0);
}

Test(text, binds_tokens_and_text) {
  RtModelInfo info = info_with("lm", lm_inputs, 2);
  RtBound b;
  char err[256];
  cr_assert_eq(rt_text_bind(&info, " 3,1\t0 ", NULL, NULL, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(b.syms[SYM_B], 1);
  cr_assert_eq(b.syms[SYM_S], 3);
  const int32_t *ids = b.inputs[0];
  const uint8_t *mask = b.inputs[1];
  cr_assert(ids[0] == 3 && ids[1] == 1 && ids[2] == 0);
  cr_assert(mask[0] == 1 && mask[1] == 1 && mask[2] == 0, "mask from pad id 0");
  cr_assert(b.outputs[0] && b.output_dims[0][0] == 1 && b.output_dims[0][1] == 3 &&
            b.output_dims[0][2] == 6);
  rt_model_unbind(&info, &b);

  RtVocab v;
  cr_assert_eq(rt_text_vocab_load(vocab_path, &v, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_text_bind(&info, NULL, "d a\nb", &v, &b, err, sizeof err), 0, "%s", err);
  ids = b.inputs[0];
  cr_assert(b.syms[SYM_S] == 3 && ids[0] == 5 && ids[1] == 1 && ids[2] == 2);
  rt_model_unbind(&info, &b);
  rt_text_vocab_free(&v);
}

static void expect_refusal(const RtModelInfo *info, const char *tokens, const char *text,
                           const char *frag) {
  RtVocab v;
  char err[512] = "";
  cr_assert_eq(rt_text_vocab_load(vocab_path, &v, err, sizeof err), 0, "%s", err);
  RtBound b;
  cr_assert_neq(rt_text_bind(info, tokens, text, &v, &b, err, sizeof err), 0,
                "'%s' was accepted", tokens ? tokens : text);
  cr_assert(strstr(err, frag), "'%s' lacks '%s'", err, frag);
  for (int i = 0; i < RT_MAX_IO; i++)
    cr_assert(!b.inputs[i] && !b.outputs[i], "left allocated after a refusal");
  rt_text_vocab_free(&v);
}

Test(text, refusals) {
  RtModelInfo lm = info_with("lm", lm_inputs, 2);
  expect_refusal(&lm, "1 6", NULL, "--tokens: id 6 out of range [0, 6)");
  expect_refusal(&lm, "1 -1", NULL, "--tokens: id -1 out of range [0, 6)");
  expect_refusal(&lm, "1 2x", NULL, "--tokens: '2x' is not a token id");
  expect_refusal(&lm, "99999999999999999999", NULL, "is not a token id");
  expect_refusal(&lm, "1 2 3 4 5", NULL, "input longer than the model's max_len 4");
  expect_refusal(&lm, " , ", NULL, "empty input sequence");
  expect_refusal(&lm, NULL, "", "empty input sequence");
  expect_refusal(&lm, "0 0", NULL, "the input sequence is all padding");
  expect_refusal(&lm, NULL, "a q", "--text: symbol 'q' is not in the vocabulary");
  expect_refusal(&lm, NULL, "a,b", "--text: symbol 'a,b' is not in the vocabulary");
  expect_refusal(&lm, NULL, "a zz", "--text: symbol 'zz' has id 6, beyond the model's vocab 6");
  RtModelInfo s2s = info_with("s2s", s2s_inputs, 2);
  expect_refusal(&s2s, "1", NULL,
                 "--tokens/--text give one sequence; model 's2s' is an encoder_decoder and needs "
                 "src and tgt (use --inputs)");
  RtModelInfo typed = info_with("typed", typed_inputs, 2);
  expect_refusal(&typed, "1", NULL, "model 'typed' takes token_types; use --inputs");
  RtModelInfo bad = lm;
  bad.abi_version = RT_ABI_VERSION + 1;
  expect_refusal(&bad, "1", NULL, "runtime ABI");
}

/* Prints through a temporary file and returns what was printed. */
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

Test(text, summary_lines) {
  RtModelInfo lm = info_with("lm", lm_inputs, 2);
  RtBound b;
  char err[256];
  cr_assert_eq(rt_text_bind(&lm, "5 1 2", NULL, NULL, &b, err, sizeof err), 0, "%s", err);
  for (int l = 0; l < 3; l++) /* argmax at position l: id 3 - l */
    b.outputs[0][l * 6 + 3 - l] = 1.0f;
  const char *want = "logits [1,3,6], argmax per position:\n"
                     "  input:  5 1 2\n"
                     "  output: 3 2 1\n";
  cr_assert_str_eq(print_bound(&lm, &b, NULL), want);
  RtVocab v;
  cr_assert_eq(rt_text_vocab_load(vocab_path, &v, err, sizeof err), 0, "%s", err);
  cr_assert_str_eq(print_bound(&lm, &b, &v), "logits [1,3,6], argmax per position:\n"
                                             "  input:  d a b\n"
                                             "  output: c b a\n");
  rt_text_vocab_free(&v);
  rt_model_unbind(&lm, &b);

  /* class_logits and anything else, without ids */
  float cls[2] = {0.0f, 0.0f}, other[3] = {1.0f, -1.0f, 2.0f};
  RtTextTensor outs[2] = {{"class_logits", 2, {1, 2}, cls}, {"hidden", 1, {3}, other}};
  FILE *f = tmpfile();
  cr_assert(f);
  cr_assert_eq(rt_text_print_outputs(f, outs, 2, NULL, NULL), 0);
  rewind(f);
  size_t n = fread(printed, 1, sizeof printed - 1, f);
  printed[n] = '\0';
  fclose(f);
  cr_assert_str_eq(printed, "class_logits [1,2]:\n"
                            "  [0] class 0 (p = 0.5000); 0 0\n"
                            "hidden [3]: mean 0.666667, rms 1.41421, first values 1 -1 2\n");
}
