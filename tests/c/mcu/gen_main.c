/* tests/c/mcu/gen_main.c — the test harness of `tfmc emit-c --static` of a
 * generating model (a decoder, or an encoder_decoder: the same C for both,
 * through model_gen.h's static step API): on the host (host_io.c; under
 * ASan+UBSan and valgrind) and on a Cortex-M4F under QEMU
 * (mps2_startup.c). It uses only model.h and mcu_io.h: no heap, no stdio.
 * For each case of gen_data.h (written by the test: the prompt, or an
 * encoder_decoder's source, as ids) it decodes greedily up to GEN_MAX_NEW
 * tokens, stopping at eos (kept) or max_len, and prints the ids; then runs
 * two generators in two regions interleaved, token by token, and checks
 * they give the first pass's ids; then passes bad input of every kind and
 * prints each refusal's message. Exit status 0 when every check held. */
#include "model.h"

#include "gen_data.h" /* GEN_N, GEN_MAX_NEW, GEN_CAP, gen_len, gen_ids */
#include "mcu_io.h"

#include <string.h>

/* the packed image weights.c links in (emitted with --embed-weights) */
extern const unsigned char tfmc_weights_image[];

static unsigned char mem_a[TFMC_GEN_MEM_BYTES], mem_b[TFMC_GEN_MEM_BYTES];
static int32_t out[GEN_N][GEN_MAX_NEW];
static int out_len[GEN_N];
static uint64_t scratch[256]; /* a region too small, a region never set up */
static int failures;

static void put(const char *s) { mcu_write(s); }

static void put_i(int64_t v) {
  char b[24];
  int i = (int)sizeof b - 1;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  b[i] = '\0';
  do {
    b[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) b[--i] = '-';
  put(b + i);
}

static void fail(const char *what) {
  put("FAIL ");
  put(what);
  put("\n");
  failures++;
}

static int32_t argmax(const float *logits) {
  int32_t best = 0;
  for (int64_t v = 1; v < tfmc_gen_vocab(); v++)
    if (logits[v] > logits[best]) best = (int32_t)v;
  return best;
}

/* A sequence's start: encode the source and feed bos, or prefill the prompt. */
static int start(TfmcGen *g, const int32_t *ids, int64_t n, const float **logits, char *err,
                 size_t errlen) {
  tfmc_gen_reset(g);
  if (!tfmc_gen_has_encoder()) return tfmc_gen_prefill(g, ids, n, logits, err, errlen);
  int32_t bos = (int32_t)tfmc_gen_bos();
  return tfmc_gen_encode(g, ids, n, err, errlen) || tfmc_gen_prefill(g, &bos, 1, logits, err, errlen);
}

/* Greedy decoding of one case; returns the number of ids, -1 on failure. */
static int generate(TfmcGen *g, int c, int32_t *ids, char *err, size_t errlen) {
  const float *logits;
  if (start(g, gen_ids[c], gen_len[c], &logits, err, errlen)) return -1;
  int k = 0;
  while (k < GEN_MAX_NEW) {
    int32_t tok = argmax(logits);
    ids[k++] = tok;
    if (tok == tfmc_gen_eos() || k == GEN_MAX_NEW || tfmc_gen_position(g) >= tfmc_gen_max_len())
      break;
    if (tfmc_gen_step(g, tok, &logits, err, errlen)) return -1;
  }
  return k;
}

/* A call that must be refused: prints "refused (what): message". */
static void refused(const char *what, int rc, const char *err) {
  if (rc == 0 || !err[0]) {
    fail(what);
    return;
  }
  put("refused (");
  put(what);
  put("): ");
  put(err);
  put("\n");
}

int main(void) {
  char err[256];
  TfmcGen *a = tfmc_gen_init(mem_a, sizeof mem_a, NULL, 0, err, sizeof err);
  TfmcGen *b = tfmc_gen_init(mem_b, sizeof mem_b, NULL, 0, err, sizeof err);
  if (!a || !b) {
    put(err);
    put("\n");
    return 1;
  }
  put("model ");
  put(tfmc_model_name());
  put(": TFMC_GEN_MEM_BYTES ");
  put_i(TFMC_GEN_MEM_BYTES);
  put(", max_len ");
  put_i(tfmc_gen_max_len());
  put(", vocab ");
  put_i(tfmc_gen_vocab());
  put(", encoder ");
  put_i(tfmc_gen_has_encoder());
  put("\n");

  uint32_t ticks_total = 0, tokens_total = 0;
  for (int c = 0; c < GEN_N; c++) {
    mcu_ticks_start();
    out_len[c] = generate(a, c, out[c], err, sizeof err);
    ticks_total += mcu_ticks();
    if (out_len[c] < 0) {
      fail(err);
      continue;
    }
    tokens_total += (uint32_t)out_len[c];
    put("case ");
    put_i(c);
    put(":");
    for (int k = 0; k < out_len[c]; k++) {
      put(" ");
      put_i(out[c][k]);
    }
    put("\n");
  }
  if (mcu_ticks_available()) {
    uint32_t calib = mcu_calibrate();
    put("ticks per generated token: ");
    put_i(tokens_total ? ticks_total / tokens_total : 0);
    put("; ticks for ");
    put_i(MCU_CALIBRATE_INSNS);
    put(" instructions: ");
    put_i(calib);
    put("; instructions per generated token: ");
    put_i(calib && tokens_total
              ? (int64_t)((uint64_t)ticks_total / tokens_total * MCU_CALIBRATE_INSNS / calib)
              : 0);
    put("\n");
  }

  /* two generators interleaved token by token (b on the cases in reverse
   * order): each must give the first pass's ids */
  int same = 1;
  for (int c = 0; c < GEN_N; c++) {
    int r = GEN_N - 1 - c;
    const float *la, *lb;
    if (start(a, gen_ids[c], gen_len[c], &la, err, sizeof err) ||
        start(b, gen_ids[r], gen_len[r], &lb, err, sizeof err)) {
      same = 0;
      continue;
    }
    for (int k = 0; k < GEN_MAX_NEW && same; k++) {
      if (k < out_len[c]) {
        int32_t t = argmax(la);
        same &= t == out[c][k];
        if (k + 1 < out_len[c]) same &= tfmc_gen_step(a, t, &la, err, sizeof err) == 0;
      }
      if (k < out_len[r]) {
        int32_t t = argmax(lb);
        same &= t == out[r][k];
        if (k + 1 < out_len[r]) same &= tfmc_gen_step(b, t, &lb, err, sizeof err) == 0;
      }
    }
  }
  if (same) put("two generators: the same ids\n");
  else fail("two generators disagree");

  /* bad input: refused through the return code, never a trap */
  const float *logits;
  int32_t bad = (int32_t)tfmc_gen_vocab();
  if (start(a, gen_ids[0], gen_len[0], &logits, err, sizeof err)) fail(err);
  int64_t pos = tfmc_gen_position(a);
  refused("id vocab", tfmc_gen_step(a, bad, &logits, err, sizeof err), err);
  refused("id -1", tfmc_gen_step(a, -1, &logits, err, sizeof err), err);
  if (tfmc_gen_position(a) != pos) fail("a refused step moved the position");
  refused("prefill of 0", tfmc_gen_prefill(a, gen_ids[0], 0, &logits, err, sizeof err), err);
  static int32_t many[4096];
  refused("past max_len",
          tfmc_gen_prefill(a, many, tfmc_gen_max_len(), &logits, err, sizeof err), err);
  refused("no logits", tfmc_gen_prefill(a, gen_ids[0], 1, NULL, err, sizeof err), err);
  refused("no generator", tfmc_gen_step(NULL, 1, &logits, err, sizeof err), err);
  refused("uninitialised region",
          tfmc_gen_step((TfmcGen *)(void *)scratch, 1, &logits, err, sizeof err), err);
  refused("region too small",
          tfmc_gen_init(scratch, sizeof scratch, NULL, 0, err, sizeof err) == NULL, err);
  refused("not an image",
          tfmc_gen_init(mem_b, sizeof mem_b, gen_ids, sizeof gen_ids, err, sizeof err) == NULL,
          err);
  refused("image truncated",
          tfmc_gen_init(mem_b, sizeof mem_b, tfmc_weights_image, 1000, err, sizeof err) == NULL,
          err);
  if (tfmc_gen_has_encoder()) {
    tfmc_gen_reset(a);
    refused("source too long",
            tfmc_gen_encode(a, many, tfmc_gen_max_src() + 1, err, sizeof err), err);
    many[0] = 1 << 20;
    refused("source id", tfmc_gen_encode(a, many, 1, err, sizeof err), err);
    many[0] = 0;
    TfmcGen *c = tfmc_gen_init(mem_b, sizeof mem_b, NULL, 0, err, sizeof err);
    int32_t bos = (int32_t)tfmc_gen_bos();
    refused("step before encode", !c || tfmc_gen_prefill(c, &bos, 1, &logits, err, sizeof err),
            err);
  } else {
    refused("encode of a decoder", tfmc_gen_encode(a, gen_ids[0], 1, err, sizeof err), err);
  }
  /* a message buffer of 8 bytes gets a cut message, never an overflow */
  char small[8];
  if (tfmc_gen_step(a, bad, &logits, small, sizeof small) == 0 || strlen(small) != 7)
    fail("short message buffer");
  /* it still generates after all that */
  int32_t again[GEN_MAX_NEW];
  int n = generate(a, 0, again, err, sizeof err);
  if (n != out_len[0] || memcmp(again, out[0], (size_t)n * sizeof *again) != 0)
    fail("the generator after the refusals");
  put(failures ? "done: FAILED\n" : "done: ok\n");
  return failures ? 1 : 0;
}
